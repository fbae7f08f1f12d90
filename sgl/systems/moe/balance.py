"""Expert re-layout planners on token-count traces: static EP, FlexMoE (SIGMOD'23) and LAER-MoE.

A *layout* is ``A[e, d]`` = replicas of expert ``e`` on device ``d``; every device has ``slots``
expert slots (``A.sum(0) == slots``).  Inputs are ``loads[i, e]`` = tokens device ``i`` routes to
expert ``e``.  Token routing is LAER's locality-first rule: tokens of ``(i, e)`` are split over
``e``'s replicas on ``i``'s node (weighted by replica count) if it has any, else over all of
them.  The time model (LAER-MoE, our reading of ``prefetch/solver.py``):

    T = 4 * T_comm + (3 + ckpt) * max_j T_comp[j],
    T_comm = max_i sum_j tokens[i, j] * M_token / bw(i, j),   T_comp[j] = tokens_j * v_comp

(4 all-to-alls per iteration: dispatch and combine, forward and backward; 3 compute passes,
one more with recomputation).  See ``shared/notes/systems_anchor.md`` §3.5–3.6.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError, DatasetError
from sgl.systems.moe.topology import Topology

__all__ = ["CostParams", "static_layout", "route_tokens", "iteration_time", "layout_stats",
           "flexmoe_plan", "laer_replicas", "laer_placement", "laer_plan"]


@dataclass(frozen=True)
class CostParams:
    """Per-token bytes (``2 * hidden`` in bf16), seconds per token of expert compute, recompute flag."""

    bytes_per_token: float = 2 * 4096
    seconds_per_token: float = 2.35e-6  # Mixtral-8x7B expert MLP (6*h*f FLOPs) at ~150 TFLOP/s
    ckpt: bool = False
    expert_bytes: float = 3 * 4096 * 14336 * 2  # one expert's bf16 weights (FlexMoE migration)

    def __post_init__(self) -> None:
        check_real(self.bytes_per_token, "bytes_per_token", 0.0, open_low=True)
        check_real(self.seconds_per_token, "seconds_per_token", 0.0, open_low=True)


def _check_loads(loads: np.ndarray, topo: Topology) -> np.ndarray:
    x = np.asarray(loads, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != topo.num_devices:
        raise ConfigError(f"loads must be [devices={topo.num_devices}, experts], got shape {x.shape}; "
                          "the trace was recorded on a different device count than the topology")
    if (x < 0).any():
        raise DatasetError(f"token loads hold negative values (min {x.min()}); counts are >= 0")
    return x


def static_layout(num_experts: int, topo: Topology, slots: int) -> np.ndarray:
    """Plain EP (+ expert data parallelism): device ``d`` hosts experts ``(d*slots + c) % E``."""
    n = topo.num_devices
    if (n * slots) % num_experts:
        raise ConfigError(f"{n} devices x {slots} slots cannot hold {num_experts} experts evenly")
    a = np.zeros((num_experts, n), dtype=np.int64)
    for d in range(n):
        for c in range(slots):
            a[(d * slots + c) % num_experts, d] += 1
    return a


def route_tokens(loads: np.ndarray, layout: np.ndarray, topo: Topology) -> np.ndarray:
    """``[D, D]`` tokens sent from device ``i`` to ``j`` under locality-first routing."""
    x = _check_loads(loads, topo)
    a = np.asarray(layout, dtype=np.float64)
    if a.shape != (x.shape[1], topo.num_devices):
        raise ConfigError(f"layout {a.shape} does not match {x.shape[1]} experts x {topo.num_devices} devices")
    if (a.sum(1) < 1).any():
        raise ConfigError(f"experts {np.flatnonzero(a.sum(1) < 1).tolist()} have no replica in the layout")
    same = topo.same_node().astype(np.float64)  # [i, j]
    local = a[:, None, :] * same[None, :, :]  # [e, i, j] replicas of e on i's node
    local_sum = local.sum(2, keepdims=True)
    spread = np.where(local_sum > 0, local / np.maximum(local_sum, 1e-300), (a / a.sum(1, keepdims=True))[:, None, :])
    return np.einsum("ie,eij->ij", x, spread)


def iteration_time(loads: np.ndarray, layout: np.ndarray, topo: Topology, cost: CostParams) -> dict[str, float]:
    """Modelled MoE iteration time and the device loads it implies."""
    t = route_tokens(loads, layout, topo)
    bw = np.where(topo.same_node(), topo.intra_gbps, topo.inter_gbps) * 1e9
    np.fill_diagonal(bw, np.inf)
    comm = (t * cost.bytes_per_token / bw).sum(1).max()
    load = t.sum(0)
    comp = load.max() * cost.seconds_per_token
    return {"time_s": float(4 * comm + (3 + int(cost.ckpt)) * comp), "comm_s": float(comm), "comp_s": float(comp),
            "max_load": float(load.max()), "mean_load": float(load.mean()),
            "imbalance": float(load.max() / max(load.mean(), 1e-12))}


def layout_stats(loads: np.ndarray, layout: np.ndarray, topo: Topology, cost: CostParams) -> dict[str, float]:
    return iteration_time(loads, layout, topo, cost)


def flexmoe_plan(loads: np.ndarray, layout: np.ndarray, topo: Topology, cost: CostParams,
                 rounds: int = 16, amortize_steps: int = 10) -> np.ndarray:
    """FlexMoE's heuristic: move a slot from the coldest shrinkable expert to the hottest one.

    Each round takes the expert with the largest per-replica load (hot) and the one with the
    smallest that still has more than one replica (cold), gives one of cold's slots (on its
    least-loaded device, not already hosting hot when possible) to hot, and keeps the move only
    if the modelled gain over ``amortize_steps`` iterations exceeds the migration time of one
    expert's weights over the inter-node link.  At most ``rounds`` moves.
    """
    check_int(rounds, "rounds", 0)
    x = _check_loads(loads, topo)
    a = np.array(layout, dtype=np.int64)
    migrate = cost.expert_bytes / (topo.inter_gbps * 1e9)
    best = iteration_time(x, a, topo, cost)["time_s"]
    expert_load = x.sum(0)
    node = np.arange(topo.num_devices) // topo.devices_per_node
    for _ in range(rounds):
        reps = a.sum(1)
        per = expert_load / reps
        hot = int(np.argmax(per))
        shrinkable = np.flatnonzero(reps > 1)
        shrinkable = shrinkable[shrinkable != hot]
        if shrinkable.size == 0:
            break
        cold = int(shrinkable[np.argmin(per[shrinkable])])
        dev_load = route_tokens(x, a, topo).sum(0)
        trial = a.copy()
        for k in range(topo.nodes):  # one slot per node, so hot stays spread over the nodes
            hosts = np.flatnonzero((trial[cold] > 0) & (node == k))
            if hosts.size == 0 or trial[cold].sum() <= 1:
                continue
            free_of_hot = hosts[trial[hot, hosts] == 0]
            pool = free_of_hot if free_of_hot.size else hosts
            d = int(pool[np.argmin(dev_load[pool])])
            trial[cold, d] -= 1
            trial[hot, d] += 1
        t = iteration_time(x, trial, topo, cost)["time_s"]
        moved = int(np.abs(trial - a).sum() // 2)
        if (best - t) * amortize_steps <= moved * migrate:
            break
        a, best = trial, t
    return a


def laer_replicas(expert_load: np.ndarray, topo: Topology, slots: int) -> np.ndarray:
    """Replica counts by a max-heap on load per replica (one per node first when it fits)."""
    e, n, nodes = len(expert_load), topo.num_devices, topo.nodes
    total = n * slots
    if total < e:
        raise ConfigError(f"{n} devices x {slots} slots cannot host {e} experts; add slots")
    # One replica per node first (locality) when that leaves at least half the slots to the heap.
    start = nodes if 2 * e * nodes <= total else 1
    reps = np.full(e, start, dtype=np.int64)
    left = total - reps.sum()
    heap = [(-expert_load[i] / reps[i], i) for i in range(e)]
    heapq.heapify(heap)
    while left > 0 and heap:
        _, i = heapq.heappop(heap)
        step = nodes if reps[i] >= nodes and left >= nodes else 1  # stay spread over nodes
        step = min(step, n - reps[i], left)
        if step <= 0:
            continue  # already on every device
        reps[i] += step
        left -= step
        heapq.heappush(heap, (-expert_load[i] / reps[i], i))
    if left:
        raise ConfigError(f"cannot use all {total} slots with {e} experts (at most one replica per device)")
    return reps


def laer_placement(reps: np.ndarray, expert_load: np.ndarray, topo: Topology, slots: int) -> np.ndarray:
    """Greedy LPT placement: heaviest replicas first, to the node with the fewest replicas of that
    expert, then the least-loaded device with a free slot not already hosting it."""
    e, n, g = len(reps), topo.num_devices, topo.devices_per_node
    a = np.zeros((e, n), dtype=np.int64)
    free = np.full(n, slots, dtype=np.int64)
    dev_load = np.zeros(n)
    items = sorted(((expert_load[i] / reps[i], i) for i in range(e) for _ in range(reps[i])), key=lambda t: (-t[0], t[1]))
    node = np.arange(n) // g
    for load, i in items:
        ok = free > 0
        fresh = ok & (a[i] == 0)
        cand = fresh if fresh.any() else ok
        per_node = np.bincount(node, weights=a[i], minlength=topo.nodes)
        key = per_node[node] * 1e18 + dev_load  # fewest replicas of i on the node, then least load
        key = np.where(cand, key, np.inf)
        d = int(np.argmin(key))
        a[i, d] += 1
        free[d] -= 1
        dev_load[d] += load
    return a


def laer_plan(loads: np.ndarray, topo: Topology, slots: int, cost: CostParams, candidates: int = 4,
              seed: int = 0) -> np.ndarray:
    """LAER-MoE's planner: proportional, even and perturbed replica counts; keep the fastest layout.

    The plain EP layout it would replace is a candidate too (when the slots hold the experts
    evenly), so a re-layout is never modelled slower than not re-laying out."""
    x = _check_loads(loads, topo)
    expert_load = x.sum(0)
    e, n = x.shape[1], topo.num_devices
    rng = np.random.default_rng(seed)
    options = [laer_replicas(expert_load, topo, slots)]
    if (n * slots) % e == 0:
        options.append(np.full(e, n * slots // e, dtype=np.int64))
    for _ in range(candidates):
        options.append(laer_replicas(expert_load * rng.uniform(0.8, 1.2, e), topo, slots))
    layouts = [laer_placement(reps, expert_load, topo, slots) for reps in options]
    if (n * slots) % e == 0:
        layouts.append(static_layout(e, topo, slots))
    best, best_t = None, np.inf
    for a in layouts:
        t = iteration_time(x, a, topo, cost)["time_s"]
        if t < best_t:
            best, best_t = a, t
    return best
