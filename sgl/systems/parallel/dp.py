"""Layer-wise dynamic program over (memory, strategy), vectorised with numpy.

For layers ``i = 0..L-1`` with per-strategy time ``intra[i, s]``, integer memory
``mem[i, s]`` (units of the search granularity) and a transition cost ``inter[c', c]``
between the layout classes of consecutive strategies, Galvatron's recurrence is

    f_i(v, s) = intra[i, s] + min_{s'} f_{i-1}(v - mem[i, s], s') + inter[cls(s'), cls(s)]

where ``f_i(v, s)`` is the least time of layers ``0..i`` ending in ``s`` using at most ``v``
memory units.  Because the transition only depends on layout classes, the inner minimum
is taken in two steps -- per class, then across classes -- so one layer costs
``O(V * (S + C^2))`` instead of ``O(V * S^2)``.

>>> import numpy as np
>>> from sgl.systems.parallel.dp import solve_layers, brute_force_layers
>>> intra = np.array([[3.0, 1.0], [4.0, 1.0]]); mem = np.array([[1, 2], [1, 2]])
>>> inter = np.zeros((2, 2)); classes = np.array([0, 1])
>>> solve_layers(intra, mem, classes, inter, budget=3).choice   # room for one fast layer only
[0, 1]
>>> brute_force_layers(intra, mem, classes, inter, budget=3).time
4.0
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from sgl.errors import PlanError

__all__ = ["LayerDPResult", "solve_layers", "brute_force_layers", "best_time_by_budget"]


@dataclass
class LayerDPResult:
    """Best per-layer strategy indices, their total time and memory units (``inf`` time if infeasible)."""

    time: float
    memory: int
    choice: List[int]


def _check(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray) -> None:
    if intra.ndim != 2 or intra.shape != mem.shape:
        raise PlanError(f"intra and mem must both be (layers, strategies); got {intra.shape} and {mem.shape}")
    if classes.shape != (intra.shape[1],):
        raise PlanError(f"classes must have one entry per strategy ({intra.shape[1]}), got shape {classes.shape}")
    c = int(classes.max()) + 1 if classes.size else 0
    if inter.shape != (c, c):
        raise PlanError(f"inter must be ({c}, {c}) for {c} layout classes, got {inter.shape}")
    if (mem < 0).any():
        raise PlanError("layer memory units must be >= 0")


def _forward(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray, budget: int,
             keep_args: bool, record_each_layer: bool):
    """Run the recurrence; returns final table, back-pointers, and per-layer best-by-budget."""
    n_layers, n_strat = intra.shape
    n_cls = inter.shape[0]
    V = budget + 1
    members = [np.flatnonzero(classes == c) for c in range(n_cls)]
    f = np.full((V, n_strat), np.inf, dtype=intra.dtype)
    for s in range(n_strat):
        if mem[0, s] < V:
            f[mem[0, s]:, s] = intra[0, s]
    args = []
    per_layer = [f.min(axis=1)] if record_each_layer else None
    # Strategies sorted by class so the per-class minimum is one reduceat; a gather with
    # padded rows (inf) applies every strategy's memory shift at once.
    order = np.argsort(classes, kind="stable")
    starts = np.searchsorted(classes[order], np.arange(n_cls))
    present = np.isin(np.arange(n_cls), classes)
    rows = np.arange(V)[:, None]
    for i in range(1, n_layers):
        # h[v, c'] = min over strategies of class c'; then g[v, c] = min_c' h + inter[c', c].
        if keep_args:
            h = np.empty((V, n_cls))
            h_arg = np.full((V, n_cls), -1, dtype=np.int32)
            for c, idx in enumerate(members):
                if idx.size == 0:
                    h[:, c] = np.inf
                    continue
                sub = f[:, idx]
                j = sub.argmin(axis=1)
                h[:, c] = sub[np.arange(V), j]
                h_arg[:, c] = idx[j]
        else:
            h = np.full((V, n_cls), np.inf, dtype=f.dtype)
            h[:, present] = np.minimum.reduceat(f[:, order], starts[present], axis=1)
        total = h[:, :, None] + inter[None, :, :]
        if keep_args:
            g_arg = total.argmin(axis=1).astype(np.int32)
            g = np.take_along_axis(total, g_arg[:, None, :], axis=1)[:, 0, :]
        else:
            g = total.min(axis=1)
        pad = int(mem[i].max())
        g_pad = np.vstack([np.full((pad, n_cls), np.inf, dtype=g.dtype), g]) if pad else g
        src = rows - mem[i][None, :] + pad
        f = intra[i][None, :] + g_pad[src, classes[None, :]]
        if keep_args:
            args.append((h_arg, g_arg))
        if record_each_layer:
            per_layer.append(f.min(axis=1))
    return f, args, per_layer


def solve_layers(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray,
                 budget: int) -> LayerDPResult:
    """Least-time strategy per layer with total memory units <= ``budget``."""
    intra = np.asarray(intra, dtype=float)
    mem = np.asarray(mem, dtype=np.int64)
    classes = np.asarray(classes, dtype=np.int64)
    inter = np.asarray(inter, dtype=float)
    _check(intra, mem, classes, inter)
    if budget < 0:
        return LayerDPResult(float("inf"), 0, [])
    f, args, _ = _forward(intra, mem, classes, inter, int(budget), keep_args=True, record_each_layer=False)
    v = int(budget)
    s = int(f[v].argmin())
    best = float(f[v, s])
    if not np.isfinite(best):
        return LayerDPResult(float("inf"), 0, [])
    choice = [s]
    for i in range(intra.shape[0] - 1, 0, -1):
        v -= int(mem[i, s])
        h_arg, g_arg = args[i - 1]
        c_prev = int(g_arg[v, classes[s]])
        s = int(h_arg[v, c_prev])
        choice.append(s)
    choice.reverse()
    used = int(sum(mem[i, c] for i, c in enumerate(choice)))
    return LayerDPResult(best, used, choice)


def _forward_fast(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray,
                  budget: int) -> np.ndarray:
    """The recurrence without back-pointers, tables laid out (strategy, budget) so every step is
    a contiguous vector operation over the budget axis."""
    n_layers, n_strat = intra.shape
    n_cls = inter.shape[0]
    V = budget + 1
    order = np.argsort(classes, kind="stable")
    present = np.flatnonzero(np.isin(np.arange(n_cls), classes))
    starts = np.searchsorted(classes[order], present)
    inter_p = inter[present]                     # rows: classes that exist
    pad = int(mem.max()) if mem.size else 0
    f = np.full((n_strat, V), np.inf, dtype=intra.dtype)
    for s in range(n_strat):
        if mem[0, s] < V:
            f[s, mem[0, s]:] = intra[0, s]
    out = np.empty((n_layers, V), dtype=intra.dtype)
    out[0] = f.min(axis=0)
    g_pad = np.full((n_cls, pad + V), np.inf, dtype=intra.dtype)
    for i in range(1, n_layers):
        h = np.minimum.reduceat(f[order], starts, axis=0)          # (present classes, V)
        for c in range(n_cls):
            g_pad[c, pad:] = (h + inter_p[:, c:c + 1]).min(axis=0)
        for s in range(n_strat):
            lo = pad - int(mem[i, s])
            np.add(g_pad[classes[s], lo:lo + V], intra[i, s], out=f[s])
        out[i] = f.min(axis=0)
    return out


def best_time_by_budget(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray,
                        budget: int) -> np.ndarray:
    """``out[n-1, v]``: least time of the first ``n`` layers within ``v`` memory units.

    One pass gives every prefix length, which is what pipeline partitioning needs.
    """
    # float32 halves the memory traffic of the (budget x strategies) tables; times are ms.
    intra = np.asarray(intra, dtype=np.float32)
    mem = np.asarray(mem, dtype=np.int64)
    classes = np.asarray(classes, dtype=np.int64)
    inter = np.asarray(inter, dtype=np.float32)
    _check(intra, mem, classes, inter)
    if budget < 0:
        return np.full((intra.shape[0], 1), np.inf)
    return _forward_fast(intra, mem, classes, inter, int(budget))


def brute_force_layers(intra: np.ndarray, mem: np.ndarray, classes: np.ndarray, inter: np.ndarray,
                       budget: int, max_combinations: int = 2_000_000) -> LayerDPResult:
    """Enumerate every assignment (for tests and tiny cases)."""
    intra = np.asarray(intra, dtype=float)
    mem = np.asarray(mem, dtype=np.int64)
    classes = np.asarray(classes, dtype=np.int64)
    inter = np.asarray(inter, dtype=float)
    n_layers, n_strat = intra.shape
    if n_strat ** n_layers > max_combinations:
        raise PlanError(f"brute force over {n_strat}^{n_layers} assignments exceeds {max_combinations}")
    best: Optional[LayerDPResult] = None
    for combo in itertools.product(range(n_strat), repeat=n_layers):
        used = int(sum(mem[i, s] for i, s in enumerate(combo)))
        if used > budget:
            continue
        t = float(sum(intra[i, s] for i, s in enumerate(combo)))
        t += float(sum(inter[classes[a], classes[b]] for a, b in zip(combo, combo[1:])))
        if best is None or t < best.time - 1e-12:
            best = LayerDPResult(t, used, list(combo))
    return best or LayerDPResult(float("inf"), 0, [])
