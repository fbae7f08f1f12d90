"""FlexSP: heterogeneous Ulysses SP groups per micro-batch, chosen by a MILP (ASPLOS'25).

Per global batch: the sequence blaster cuts the sorted batch into the fewest micro-batches that
fit the cluster's token capacity; each micro-batch's lengths are bucketed (padding DP) and a MILP
picks SP groups of different sizes and assigns bucket counts to them:

.. math::

    \\min M \\quad\\text{s.t.}\\quad \\sum_p A_{kp} = n_k,\\;
    \\sum_k \\ell_k A_{kp} \\le \\mathrm{cap}_p\\, m_p,\\;
    \\sum_k (a_p \\ell_k^2 + b_p \\ell_k) A_{kp} + c_p m_p \\le M,\\;
    \\sum_p d_p m_p \\le N,\\; A_{kp} \\in \\mathbb{N},\\; m_p \\in \\{0, 1\\}

over the option list ``p`` (each SP size ``d`` repeated ``min(N/d, n)`` times; ``A_kp = 0`` where a
bucket does not fit), with ``m_p >= m_{p+1}`` between copies of one size to break symmetry. The
solver (HiGHS) is warm-started by the balanced heuristic (best homogeneous SP size with
longest-first assignment) and has a time limit; at the limit the better of incumbent and heuristic
is kept and a warning says so. Step time = ``Σ_micro-batches max_group (Σ a s² + b s + c)``.

Baselines (the paper's in-code ones): homogeneous SP of one size with ``random``, ``ffd`` or
``bfd`` assignment per micro-batch (and ``lpt``); :meth:`FlexSPPlanner.best_homogeneous` picks
the best single SP size for a list of steps.

>>> import numpy as np
>>> from sgl.systems.seq import flexsp_cost_model
>>> planner = FlexSPPlanner(flexsp_cost_model(devices=8, memory_gb=80).sp_pool(), devices=8)
>>> plan = planner.plan(np.array([60000, 2000, 1500, 1000, 800, 700, 600, 500]))
>>> plan.validate(np.array([60000, 2000, 1500, 1000, 800, 700, 600, 500]), devices=8)
>>> plan.time <= planner.homogeneous(np.array([60000, 2000, 1500, 1000, 800, 700, 600, 500]), 8).time
True
"""
from __future__ import annotations

import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.cost import StrategyCost, longest_supported
from sgl.systems.seq.lengths import check_lengths
from sgl.systems.seq.milp import solve_milp
from sgl.systems.seq._greedy import earliest_finish
from sgl.systems.seq.packing import assign, blast, bucketize, members_in_order
from sgl.systems.seq.plan import GroupWork, StepPlan

__all__ = ["FlexSPPlanner", "check_fits"]

ASSIGNMENTS = ("random", "ffd", "bfd", "lpt")


def check_fits(lengths: np.ndarray, pool: Sequence[StrategyCost]) -> None:
    """PlanError naming the longest supported length when a sequence fits no strategy."""
    longest = longest_supported(pool)
    top = int(np.max(lengths))
    if top > longest:
        best = max(pool, key=lambda p: p.capacity).label if pool else "none"
        raise PlanError(f"a sequence of {top} tokens is longer than any strategy supports: the longest "
                        f"supported length is {longest} tokens ({best}); drop or truncate longer sequences "
                        f"(e.g. --max-length {longest}) or give more devices/memory")


class FlexSPPlanner:
    """Plans steps over ``devices`` devices with an SP-group pool (``SeqCostModel.sp_pool()``).

    Solver latency controls: ``bound_gap`` skips the MILP when the balanced heuristic is within that
    share of :meth:`lower_bound`; ``milp_patience = k > 0`` skips it after ``k`` consecutive
    micro-batches on which it did not beat the heuristic (state kept across steps), trying it again
    on every ``milp_retry``-th skipped one and resuming as soon as it wins.
    """

    def __init__(self, pool: Sequence[StrategyCost], devices: int, *, time_limit: float = 1.0,
                 max_buckets: int = 16, tolerance: float = 0.02, seed: int = 0, bound_gap: float = 0.0,
                 milp_patience: int = 0, milp_retry: int = 8) -> None:
        self.devices = check_int(devices, "devices", 1, error=PlanError)
        self.pool = sorted((p for p in pool if p.devices <= self.devices), key=lambda p: p.devices)
        if not self.pool:
            raise PlanError("FlexSP needs at least one SP size that fits the cluster and holds a token in memory")
        if any(p.pp != 1 for p in self.pool):
            raise PlanError("FlexSP plans SP groups without pipelining: give strategies with pp = 1")
        self.time_limit = check_real(time_limit, "time_limit", 0.0, open_low=True, error=PlanError)
        self.max_buckets = check_int(max_buckets, "max_buckets", 1, error=PlanError)
        self.tolerance = check_real(tolerance, "tolerance", 0.0, error=PlanError)
        self.seed = seed
        self.bound_gap = check_real(bound_gap, "bound_gap", 0.0, error=PlanError)
        self.milp_patience = check_int(milp_patience, "milp_patience", 0, error=PlanError)
        self.milp_retry = check_int(milp_retry, "milp_retry", 1, error=PlanError)
        self._no_gain = 0           # consecutive micro-batches where the MILP did not beat the heuristic
        self._skipped = 0
        # the cluster's tokens per micro-batch: the tightest per-device capacity × N
        self.cluster_capacity = int(min(p.capacity / p.devices for p in self.pool) * self.devices)

    # ------------------------------------------------------------------ baselines
    def _assign_phase(self, lengths: np.ndarray, idx: np.ndarray, cost: StrategyCost, method: str
                      ) -> Optional[List[GroupWork]]:
        groups = self.devices // cost.devices
        bins = assign(lengths[idx], groups, cost.capacity, method, time_of=cost.seq_time, seed=self.seed)
        if bins is None:
            return None
        return [GroupWork(cost, [idx[b]], lengths) for b in bins if b.size]

    def homogeneous(self, lengths, sp_size: int, method: str = "best") -> StepPlan:
        """One SP size for every group; ``method`` one of random/ffd/bfd/lpt or ``best`` of them.

        A micro-batch that a method cannot pack is split in two (more micro-batches) until it packs.
        """
        lengths = check_lengths(lengths)
        costs = [p for p in self.pool if p.devices == sp_size]
        if not costs:
            raise PlanError(f"SP size {sp_size} is not in the pool ({[p.devices for p in self.pool]})")
        cost = costs[0]
        check_fits(lengths, [cost])
        methods = ASSIGNMENTS if method == "best" else (method,)
        best: Optional[StepPlan] = None
        for name in methods:
            phases: List[List[GroupWork]] = []
            pending = list(blast(lengths, self.cluster_capacity))
            while pending:
                idx = pending.pop(0)
                phase = self._assign_phase(lengths, idx, cost, name)
                if phase is None:
                    half = idx.size // 2
                    if half == 0:
                        raise PlanError(f"sequence of {int(lengths[idx].sum())} tokens does not fit {cost.label}")
                    pending[:0] = [idx[:half], idx[half:]]
                    continue
                phases.append(phase)
            plan = StepPlan(f"homogeneous-{cost.label}-{name}", phases)
            if best is None or plan.time < best.time:
                best = plan
        return best

    def best_homogeneous(self, batches: Sequence[np.ndarray], method: str = "best") -> Tuple[int, List[StepPlan]]:
        """The one SP size minimising total time over ``batches`` (each step its best assignment)."""
        longest = max(int(np.max(b)) for b in batches)
        best: Tuple[float, int, List[StepPlan]] = (np.inf, 0, [])
        for cost in self.pool:
            if cost.capacity < longest:
                continue
            plans = [self.homogeneous(b, cost.devices, method) for b in batches]
            total = sum(p.time for p in plans)
            if total < best[0]:
                best = (total, cost.devices, plans)
        if not best[2]:
            check_fits(np.array([longest]), self.pool)
        return best[1], best[2]

    # ------------------------------------------------------------------ FlexSP
    def _options(self, n: int, longest: int) -> List[StrategyCost]:
        options: List[StrategyCost] = []
        for cost in self.pool:
            copies = min(self.devices // cost.devices, n)
            if cost.capacity >= 1:
                options.extend([cost] * copies)
        return options

    def _heuristic(self, lengths: np.ndarray, idx: np.ndarray) -> Optional[List[GroupWork]]:
        """Balanced heuristic: each sequence too long for the base size gets the smallest SP group
        that holds it, the remaining devices form groups of one base size, then every sequence goes
        longest-first to the group where it finishes earliest; best base size kept."""
        best: Optional[List[GroupWork]] = None
        order = idx[np.argsort(-lengths[idx], kind="stable")]
        for base in self.pool:
            groups: List[StrategyCost] = []
            free = self.devices
            for i in order:
                if lengths[i] <= base.capacity:
                    break
                fit = next((c for c in self.pool if c.capacity >= lengths[i]), None)
                if fit is None or fit.devices > free:
                    groups = []
                    break
                groups.append(fit)
                free -= fit.devices
            if free < 0 or (not groups and lengths[order[0]] > base.capacity):
                continue
            groups += [base] * min(free // base.devices, order.size)
            if not groups:
                continue
            owner, ok = earliest_finish(order, lengths, [g.c for g in groups], [g.a for g in groups],
                                        [g.b for g in groups], [g.capacity for g in groups])
            if not ok:
                continue
            members = members_in_order(owner, np.sort(order), len(groups))
            phase = [GroupWork(g, [m], lengths) for g, m in zip(groups, members) if m.size]
            if best is None or max(g.time for g in phase) < max(g.time for g in best):
                best = phase
        return best

    def lower_bound(self, sub: np.ndarray) -> float:
        """A lower bound on a micro-batch's makespan: ``max(max_i min_p T_p(s_i) + c_p,
        c_min + Σ_i min_p d_p T_p(s_i) / N)`` (the slowest group is at least the device-weighted mean)."""
        T = np.array([p.seq_time(sub) for p in self.pool])                      # (P, n)
        fits = np.array([p.capacity for p in self.pool])[:, None] >= sub[None, :]
        c = np.array([p.c for p in self.pool])[:, None]
        one = np.where(fits, T + c, np.inf).min(axis=0).max()
        d = np.array([p.devices for p in self.pool], dtype=np.float64)[:, None]
        spread = np.where(fits, d * T, np.inf).min(axis=0).sum() / self.devices + float(c.min())
        return float(max(one, spread))

    def solve_micro_batch(self, lengths: np.ndarray, idx: np.ndarray) -> Tuple[List[GroupWork], str, float]:
        """Groups for one micro-batch: ``(groups, status, solver seconds)``.

        With ``bound_gap > 0`` the MILP is skipped when the balanced heuristic is within that share
        of :meth:`lower_bound` (status ``"heuristic (within bound)"``): the MILP could gain no more.
        """
        sub = lengths[idx]
        t0 = time.perf_counter()
        quick = self._heuristic(lengths, idx)
        if quick is not None and self.bound_gap > 0:
            if max(g.time for g in quick) <= self.lower_bound(sub) * (1 + self.bound_gap):
                return quick, "heuristic (within bound)", time.perf_counter() - t0
        if quick is not None and self.milp_patience and self._no_gain >= self.milp_patience:
            self._skipped += 1
            if self._skipped % self.milp_retry:
                return (quick, f"heuristic (MILP skipped: no gain on {self._no_gain} micro-batches)",
                        time.perf_counter() - t0)
        groups, status, _ = self._solve_milp(lengths, idx, quick)
        if status.startswith("heuristic"):
            self._no_gain += 1
        else:
            self._no_gain, self._skipped = 0, 0
        return groups, status, time.perf_counter() - t0

    def _solve_milp(self, lengths: np.ndarray, idx: np.ndarray, heuristic: Optional[List[GroupWork]]
                    ) -> Tuple[List[GroupWork], str, float]:
        """The MILP over the bucketed micro-batch, warm-started by (and never worse than) ``heuristic``."""
        sub = lengths[idx]
        bounds, which = bucketize(sub, self.max_buckets, self.tolerance)
        counts = np.bincount(which, minlength=bounds.size)
        options = self._options(sub.size, int(sub.max()))
        K, P = bounds.size, len(options)
        nA = K * P
        col = lambda k, p: k * P + p                     # noqa: E731
        n_cols = nA + P + 1
        rows, cols, vals, lo, hi = [], [], [], [], []

        def add(entries, low, high):
            r = len(lo)
            for c, v in entries:
                rows.append(r)
                cols.append(c)
                vals.append(v)
            lo.append(low)
            hi.append(high)

        for k in range(K):
            add([(col(k, p), 1.0) for p in range(P)], counts[k], counts[k])
        for p, cost in enumerate(options):
            add([(col(k, p), float(bounds[k])) for k in range(K)] + [(nA + p, -float(cost.capacity))], -np.inf, 0.0)
            times = cost.seq_time(bounds)
            add([(col(k, p), float(times[k])) for k in range(K)] + [(nA + p, cost.c), (nA + P, -1.0)], -np.inf, 0.0)
        add([(nA + p, float(cost.devices)) for p, cost in enumerate(options)], -np.inf, float(self.devices))
        for p in range(P - 1):
            if options[p] is options[p + 1]:
                add([(nA + p, 1.0), (nA + p + 1, -1.0)], 0.0, np.inf)
        A = sp.csr_matrix((vals, (rows, cols)), shape=(len(lo), n_cols))
        col_hi = np.zeros(n_cols)
        for p, cost in enumerate(options):
            for k in range(K):
                col_hi[col(k, p)] = counts[k] if bounds[k] <= cost.capacity else 0
            col_hi[nA + p] = 1
        col_hi[-1] = np.inf
        integrality = np.ones(n_cols, dtype=bool)
        integrality[-1] = False
        objective = np.zeros(n_cols)
        objective[-1] = 1.0

        start = None
        if heuristic is not None:
            start = np.zeros(n_cols)
            first = {id(c): options.index(c) for c in options[::-1]}   # first copy of each size
            taken: Dict[int, int] = {}
            for g in heuristic:
                p = first[id(g.cost)] + taken.get(id(g.cost), 0)
                taken[id(g.cost)] = taken.get(id(g.cost), 0) + 1
                start[nA + p] = 1
                ks, cs = np.unique(which[_positions(idx, g.micro_batches[0])], return_counts=True)
                for k, c in zip(ks, cs):
                    start[col(int(k), p)] = c
            start[-1] = max(float(start[[col(k, p) for k in range(K)]] @ options[p].seq_time(bounds) + options[p].c)
                            for p in range(P) if start[nA + p] > 0)
        result = solve_milp(objective, A, lo, hi, np.zeros(n_cols), col_hi, integrality,
                            time_limit=self.time_limit, start=start)
        groups: Optional[List[GroupWork]] = None
        if result.x is not None:
            groups = self._decode(lengths, idx, which, result.x, options, K, P)
        status = result.status
        if groups is None or (heuristic is not None and max(g.time for g in heuristic) < max(g.time for g in groups)):
            if heuristic is None:
                raise PlanError(f"FlexSP found no feasible grouping for a micro-batch of {sub.size} sequences "
                                f"({int(sub.sum())} tokens); give more memory or devices")
            if status == "error":
                warnings.warn("FlexSP MILP failed (HiGHS reported a solve error); using the balanced heuristic "
                              "grouping", RuntimeWarning, stacklevel=4)
                status = "heuristic (solver error)"
            elif status != "optimal":
                warnings.warn(f"FlexSP MILP stopped at its {self.time_limit:g}s time limit without beating "
                              f"the balanced heuristic; using the heuristic grouping", RuntimeWarning, stacklevel=4)
                status = "heuristic (solver time-out)"
            else:
                status = "heuristic (bucket padding)"
            groups = heuristic
        elif status == "time_limit":
            warnings.warn(f"FlexSP MILP hit its {self.time_limit:g}s time limit; using its best incumbent "
                          f"(no worse than the heuristic)", RuntimeWarning, stacklevel=4)
        return groups, status, result.seconds

    def _decode(self, lengths, idx, which, x, options, K, P) -> List[GroupWork]:
        pools = [list(idx[which == k]) for k in range(K)]
        groups = []
        for p in range(P):
            if x[K * P + p] < 0.5:
                continue
            members: List[int] = []
            for k in range(K):
                take = int(round(x[k * P + p]))
                members.extend(pools[k][:take])
                pools[k] = pools[k][take:]
            if members:
                groups.append(GroupWork(options[p], [np.asarray(members)], lengths))
        return groups

    def plan(self, lengths) -> StepPlan:
        """FlexSP's plan of one global batch."""
        lengths = check_lengths(lengths)
        check_fits(lengths, self.pool)
        t0 = time.perf_counter()
        phases, statuses = [], []
        for idx in blast(lengths, self.cluster_capacity):
            groups, status, _ = self.solve_micro_batch(lengths, np.sort(idx))
            phases.append(groups)
            statuses.append(status)
        status = "optimal" if all(s == "optimal" for s in statuses) else ", ".join(sorted(set(statuses)))
        return StepPlan("flexsp", phases, solver_seconds=time.perf_counter() - t0, status=status)


def _positions(sorted_idx: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Positions of ``members`` inside the sorted index array ``sorted_idx``."""
    return np.searchsorted(sorted_idx, members)
