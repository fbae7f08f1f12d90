"""Hydraulis: heterogeneous replicas that each own a length range, two-stage data assignment.

**Strategy generation** (a DP over GPU count ``n`` and length-bin prefix ``j``, on the length
histogram): with ``C_k(i, j)`` the expected per-step time of strategy ``k`` on the sequences of
bins ``i..j-1`` (``Σ count·(a s² + b s + c·s/capacity)`` plus the warm-up ``(pp-1)·cost(e_j)``, only when
``e_j <= capacity_k``),

.. math:: t[n][j] = \\min_{k,\\, i < j,\\, d \\ge 1} \\max\\bigl(t[n - d\\,g_k][i],\\; C_k(i, j) / d\\bigr),
          \\qquad t[n][0] = 0,

which yields a *set* of replicas (``d`` copies of strategy ``k`` for each chosen range).

**Stage 1** (:meth:`HydraulisPlanner.dispatch`): each step's sequences, longest first, go to the
replica minimising its estimated finish time (sum of sequence costs plus the pipeline bubble of
its longest sequence) among the replicas that can hold them; a few seeded shuffles, best kept.

**Stage 2** (:meth:`HydraulisPlanner.pack`): per replica, for ``v`` micro-batches from the fewest
that fit upward, the ILP ``min max_j Σ_i o_ij t_i`` s.t. ``Σ_j o_ij = 1``, ``Σ_i o_ij s_i <= cap``
(HiGHS, time limit, warm start from a greedy packing); the ``v`` minimising
``(max + c)·(pp - 1 + v)`` is kept.

>>> import numpy as np
>>> from sgl.systems.seq import hydraulis_pool
>>> planner = HydraulisPlanner(hydraulis_pool(16), devices=16)
>>> reps = planner.build_replicas(np.r_[np.full(60, 800), np.full(4, 12000)], batch_size=64)
>>> sum(r.cost.devices for r in reps) <= 16
True
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.cost import StrategyCost
from sgl.systems.seq.flexsp import check_fits
from sgl.systems.seq.lengths import check_lengths
from sgl.systems.seq.milp import solve_milp
from sgl.systems.seq.plan import GroupWork, StepPlan

__all__ = ["Replica", "HydraulisPlanner"]


@dataclass(frozen=True)
class Replica:
    """One model replica: its strategy and the length range ``(lo, hi]`` it was planned for."""

    cost: StrategyCost
    lo: int
    hi: int


class HydraulisPlanner:
    """Hydraulis over a strategy pool (e.g. :func:`hydraulis_pool`) on ``devices`` devices.

    Latency defaults (per-step solver time must stay below the few % of step time it saves):
    ILP time limit 20 ms, no ILP when the greedy packing is within ``bound_gap`` = 5 % of its
    lower bound, no extra dispatch shuffles (on the real length lists they did not beat the
    longest-first order), a vectorised replica DP. ``ilp_patience = k > 0``: after ``k`` packing
    ILPs in a row that did not beat the greedy packing, the ILP runs only on every
    ``ilp_retry``-th call until it wins again (as :class:`FlexSPPlanner`'s ``milp_patience``).
    """

    def __init__(self, pool: Sequence[StrategyCost], devices: int, *, time_limit: float = 0.02,
                 shuffles: int = 0, seed: int = 0, max_ilp_sequences: int = 160, bound_gap: float = 0.05,
                 ilp_patience: int = 0, ilp_retry: int = 8) -> None:
        self.devices = check_int(devices, "devices", 1, error=PlanError)
        self.pool = [p for p in pool if p.devices <= self.devices and p.capacity > 0]
        if not self.pool:
            raise PlanError("Hydraulis has no strategy that fits the cluster and holds a sequence in memory")
        self.time_limit = check_real(time_limit, "time_limit", 0.0, open_low=True, error=PlanError)
        self.shuffles = check_int(shuffles, "shuffles", 0, error=PlanError)
        self.seed = seed
        self.max_ilp_sequences = max_ilp_sequences
        self.bound_gap = check_real(bound_gap, "bound_gap", 0.0, error=PlanError)
        self.replicas: List[Replica] = []
        self.ilp_patience = check_int(ilp_patience, "ilp_patience", 0, error=PlanError)
        self.ilp_retry = check_int(ilp_retry, "ilp_retry", 1, error=PlanError)
        self._no_gain, self._skipped = 0, 0     # packing ILPs in a row that did not beat greedy

    # ------------------------------------------------------------------ strategy DP
    def build_replicas(self, lengths, batch_size: int, bins: Optional[Sequence[int]] = None) -> List[Replica]:
        """Plan the replica set from a length sample and the sequences per step (module doc)."""
        lengths = check_lengths(lengths)
        check_fits(lengths, self.pool)
        batch_size = check_int(batch_size, "batch_size", 1, error=PlanError)
        top = int(lengths.max())
        if bins is None:
            caps = sorted({p.capacity for p in self.pool if p.capacity < top})
            grid = [2 ** k for k in range(6, 40) if 2 ** k < top]
            bins = sorted(set([0] + grid + caps + [top]))
        edges = np.asarray(bins, dtype=np.int64)
        S, K, N = edges.size - 1, len(self.pool), self.devices
        which = np.clip(np.searchsorted(edges, lengths, side="left") - 1, 0, S - 1)
        scale = batch_size / lengths.size
        # W[k, j]: expected per-step cost of bin j on strategy k
        W = np.zeros((K, S))
        for k, p in enumerate(self.pool):
            # c is paid per micro-batch: tokens / capacity micro-batches of the bin's sequences
            W[k] = np.bincount(which, weights=p.seq_time(lengths) + p.c * lengths / p.capacity, minlength=S) * scale
        csum = np.concatenate([np.zeros((K, 1)), np.cumsum(W, axis=1)], axis=1)
        occupied = np.concatenate([[0], np.cumsum(np.bincount(which, minlength=S) > 0)])
        inf = np.inf
        t = np.full((N + 1, S + 1), inf)
        t[:, 0] = 0.0
        arg = {}
        ns = np.arange(N + 1)
        for j in range(1, S + 1):
            i = np.arange(j)
            cand = np.full(N + 1, inf)
            cand_choice: List[tuple] = [("idle",)] * (N + 1)
            for k, p in enumerate(self.pool):
                if edges[j] > p.capacity:
                    continue
                g = p.devices
                D = N // g
                if D == 0:
                    continue
                work = csum[k, j] - csum[k, i] + (p.pp - 1) * (p.seq_time([edges[j]])[0] + p.c)
                d = np.arange(1, D + 1)
                src = ns[:, None] - d[None, :] * g                         # (N+1, D): devices left
                prev = np.where((src >= 0)[..., None], t[np.clip(src, 0, N)][:, :, :j], inf)   # (N+1, D, j)
                val = np.maximum(prev, work[None, None, :] / d[None, :, None]).reshape(N + 1, D * j)
                flat = np.argmin(val, axis=1)
                best_k = val[ns, flat]
                better = best_k < cand                                      # first k wins ties, as before
                for n in np.flatnonzero(better):
                    cand[n] = best_k[n]
                    cand_choice[n] = (k, int(i[flat[n] % j]), int(d[flat[n] // j]))
            for n in range(1, N + 1):                                       # idle devices win ties
                if cand[n] < t[n - 1, j]:
                    t[n, j], arg[n, j] = cand[n], cand_choice[n]
                else:
                    t[n, j], arg[n, j] = t[n - 1, j], ("idle",)
        if not np.isfinite(t[N, S]):
            raise PlanError(f"Hydraulis cannot cover lengths up to {top} with {N} devices and this pool")
        replicas: List[Replica] = []
        n, j = N, S
        while j > 0:
            choice = arg[n, j]
            if choice[0] == "idle":
                n -= 1
                continue
            k, i, d = choice
            replicas += [Replica(self.pool[k], int(edges[i]), int(edges[j]))] * d
            n, j = n - d * self.pool[k].devices, i
        self.replicas = sorted(replicas, key=lambda r: (r.cost.capacity, r.hi))
        return self.replicas

    # ------------------------------------------------------------------ stage 1
    def dispatch(self, lengths: np.ndarray, replicas: Optional[Sequence[Replica]] = None) -> List[np.ndarray]:
        """Sequence indices per replica (module doc)."""
        replicas = list(replicas if replicas is not None else self.replicas)
        if not replicas:
            raise PlanError("no replicas: call build_replicas() first")
        caps = np.array([r.cost.capacity for r in replicas])
        if lengths.max() > caps.max():
            check_fits(lengths, [r.cost for r in replicas])
        rng = np.random.default_rng(self.seed)
        base = np.argsort(-lengths, kind="stable")
        A = np.array([r.cost.a for r in replicas])
        B = np.array([r.cost.b for r in replicas])
        C = np.array([r.cost.c for r in replicas])
        bubble = np.array([r.cost.pp - 1 for r in replicas], dtype=np.float64)
        best, best_time = None, np.inf
        for trial in range(self.shuffles + 1):
            order = base if trial == 0 else base[np.argsort(rng.permutation(base.size) // 4 +
                                                            np.arange(base.size), kind="stable")]
            load = np.zeros(len(replicas))
            longest = np.zeros(len(replicas))
            owner = np.empty(lengths.size, dtype=np.int64)
            for i in order:                         # vectorised over the replicas
                s = float(lengths[i])
                t = A * s * s + B * s
                first = load == 0
                top = np.maximum(longest, s)
                est = load + t + C * first + bubble * (A * top * top + B * top + C)
                est[caps < s] = np.inf
                r = int(np.argmin(est))
                load[r] += t[r] + (C[r] if first[r] else 0.0)
                longest[r] = top[r]
                owner[i] = r
            members = [np.flatnonzero(owner == r) for r in range(len(replicas))]
            # the greedy's own estimate: summed sequence costs + one c + the 1F1B bubble of the longest
            finish = float(np.max(np.where(load > 0, load + bubble * (A * longest ** 2 + B * longest + C), 0.0)))
            if finish < best_time:
                best, best_time = members, finish
        return [np.asarray(m, dtype=np.int64) for m in best]

    # ------------------------------------------------------------------ stage 2
    def _greedy_pack(self, cost: StrategyCost, lengths: np.ndarray, v: int) -> Optional[List[np.ndarray]]:
        order = np.argsort(-cost.seq_time(lengths), kind="stable")
        tokens = np.zeros(v, dtype=np.int64)
        load = np.zeros(v)
        bins: List[List[int]] = [[] for _ in range(v)]
        t = cost.seq_time(lengths)
        for i in order:
            ok = np.flatnonzero(tokens + lengths[i] <= cost.capacity)
            if ok.size == 0:
                return None
            j = int(ok[np.argmin(load[ok])])
            bins[j].append(int(i))
            tokens[j] += lengths[i]
            load[j] += t[i]
        return [np.asarray(b, dtype=np.int64) for b in bins if b]

    def _ilp(self, cost: StrategyCost, lengths: np.ndarray, t: np.ndarray, v: int,
             greedy: Optional[List[np.ndarray]]) -> tuple:
        """The packing ILP for ``v`` micro-batches: ``(micro-batches or None, status)``."""
        u = lengths.size
        n_cols = u * v + 1
        seq = np.repeat(np.arange(u), v)
        mb = np.tile(np.arange(v), u)
        col = seq * v + mb
        rows = [seq, u + mb, u + v + mb, u + v + np.arange(v)]          # once; memory; makespan; -M
        cols = [col, col, col, np.full(v, u * v)]
        vals = [np.ones(u * v), lengths[seq].astype(np.float64), t[seq], -np.ones(v)]
        A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(u + 2 * v, n_cols))
        lo = np.r_[np.ones(u), np.full(2 * v, -np.inf)]
        hi = np.r_[np.ones(u), np.full(v, float(cost.capacity)), np.zeros(v)]
        start = None
        if greedy is not None:
            start = np.zeros(n_cols)
            for j, b in enumerate(greedy):
                start[b * v + j] = 1
            start[-1] = max(t[b].sum() for b in greedy)
        integ = np.ones(n_cols, dtype=bool)
        integ[-1] = False
        c = np.zeros(n_cols)
        c[-1] = 1.0
        hi_col = np.ones(n_cols)
        hi_col[-1] = np.inf
        res = solve_milp(c, A, lo, hi, np.zeros(n_cols), hi_col, integ, time_limit=self.time_limit, start=start)
        if res.x is None:
            return None, res.status
        o = res.x[:-1].reshape(u, v) > 0.5
        return [np.flatnonzero(o[:, j]) for j in range(v) if o[:, j].any()], res.status

    def _try_ilp(self, greedy) -> bool:
        if greedy is None or not self.ilp_patience or self._no_gain < self.ilp_patience:
            return True
        self._skipped += 1
        return self._skipped % self.ilp_retry == 0

    def pack(self, cost: StrategyCost, lengths: np.ndarray) -> tuple:
        """``(micro-batches as index arrays into lengths, status)`` for one replica.

        For each ``v`` the greedy packing is tried first; the ILP runs only when ``v`` can still
        beat the best total (its lower bound ``Σ t + v c + (pp-1)(LB_v + c)``, ``LB_v = max(max t,
        Σ t / v)``) and the greedy makespan is more than ``bound_gap`` above ``LB_v`` (then the ILP
        could not gain more than that share).
        """
        u = lengths.size
        t = cost.seq_time(lengths)
        v0 = max(1, int(np.ceil(lengths.sum() / cost.capacity)))
        best, best_time, status = None, np.inf, "heuristic"
        for v in range(v0, min(u, v0 + 3) + 1):
            bound = max(float(t.max()), float(t.sum()) / v)
            if t.sum() + v * cost.c + (cost.pp - 1) * (bound + cost.c) >= best_time:
                continue
            greedy = self._greedy_pack(cost, lengths, v)
            cand, cand_status = greedy, "heuristic"
            makespan = np.inf if greedy is None else max(float(t[b].sum()) for b in greedy)
            if u <= self.max_ilp_sequences and v > 1 and makespan > bound * (1 + self.bound_gap) \
                    and self._try_ilp(greedy):
                ilp, ilp_status = self._ilp(cost, lengths, t, v, greedy)
                gain = ilp is not None and (greedy is None or cost.replica_time([lengths[b] for b in ilp]) <
                                            cost.replica_time([lengths[b] for b in greedy]))
                self._no_gain, self._skipped = (0, 0) if gain else (self._no_gain + 1, self._skipped)
                if gain or (ilp is not None and greedy is None):
                    cand, cand_status = ilp, ilp_status
            elif greedy is not None and makespan <= bound * (1 + self.bound_gap):
                cand_status = "optimal"               # within bound_gap of the lower bound
            if cand is None:
                continue
            total = cost.replica_time([lengths[b] for b in cand])
            if total < best_time:
                best, best_time, status = cand, total, cand_status
        if best is None:
            raise PlanError(f"cannot pack {u} sequences into {cost.label} micro-batches of {cost.capacity} tokens")
        return best, status

    def _plan_with(self, lengths: np.ndarray, replicas: Sequence[Replica], method: str) -> StepPlan:
        t0 = time.perf_counter()
        parts = self.dispatch(lengths, replicas)
        groups, statuses = [], set()
        for rep, idx in zip(replicas, parts):
            if idx.size == 0:
                continue
            mbs, status = self.pack(rep.cost, lengths[idx])
            statuses.add(status)
            groups.append(GroupWork(rep.cost, [idx[b] for b in mbs], lengths))
        if "time_limit" in statuses:
            warnings.warn(f"Hydraulis packing ILP hit its {self.time_limit:g}s time limit; kept the better of "
                          f"incumbent and greedy packing", RuntimeWarning, stacklevel=3)
        return StepPlan(method, [groups], solver_seconds=time.perf_counter() - t0,
                        status=", ".join(sorted(statuses)))

    def plan(self, lengths, *, rebuild: bool = True) -> StepPlan:
        """Stage 1 + stage 2 for one global batch.

        With ``rebuild`` (Hydraulis' dynamic strategies) the replica DP is also run on this batch's
        own lengths and the better of the two replica sets is used; the chosen set is kept (a
        kept set whose replicas cannot hold the batch's longest sequence is always rebuilt).
        """
        lengths = check_lengths(lengths)
        check_fits(lengths, self.pool)
        t0 = time.perf_counter()
        top = int(lengths.max())
        # a kept replica set that cannot hold this batch's longest sequence is replanned
        candidates = [self.replicas] if self.replicas and max(r.cost.capacity for r in self.replicas) >= top else []
        if rebuild or not candidates:
            saved = self.replicas
            rebuilt = self.build_replicas(lengths, lengths.size)
            self.replicas = saved
            key = lambda reps: sorted((r.cost.label, r.lo, r.hi) for r in reps)    # noqa: E731
            if not candidates or key(rebuilt) != key(candidates[0]):               # same set: plan it once
                candidates.append(rebuilt)
        plans = [(self._plan_with(lengths, reps, "hydraulis"), reps) for reps in candidates]
        best, reps = min(plans, key=lambda pr: pr[0].time)
        self.replicas = list(reps)
        best.solver_seconds = time.perf_counter() - t0
        return best

    def homogeneous(self, lengths, cost: StrategyCost) -> StepPlan:
        """Baseline: ``devices / (tp·pp)`` replicas of one strategy, same dispatch and packing."""
        lengths = check_lengths(lengths)
        check_fits(lengths, [cost])
        reps = [Replica(cost, 0, cost.capacity)] * (self.devices // cost.devices)
        return self._plan_with(lengths, reps, f"homogeneous-{cost.label}")
