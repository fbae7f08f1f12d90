"""Pipeline stage partitions: how many consecutive layers each of ``pp`` stages holds.

A pipeline with per-stage times ``T_k`` over ``chunks`` micro-batches takes
``sum_k t_k + (chunks - 1) * max_k t_k`` with ``t_k = T_k / chunks`` (1F1B / GPipe), which
:func:`pipeline_time` computes.  The splits the plan search offers:

* :func:`even_division` -- Galvatron's even split (extra layers on the last stages);
* :func:`minimax_partition` -- the split minimising the largest ``n_k * a_k + b_k``
  (Galvatron-BMW's memory-balanced start);
* :func:`refine_partition` -- Galvatron-BMW's refinement: move single boundary layers while
  the pipeline gets faster;
* :func:`exact_partition` -- the optimal split for the pipeline formula.

>>> even_division(10, 4)
[2, 2, 3, 3]
>>> import numpy as np
>>> tables = np.array([[np.inf, 1.0, 2.0, 3.0], [np.inf, 2.0, 4.0, 6.0]])   # stage 1 twice as slow
>>> exact_partition(tables, layers=3, chunks=1)
[2, 1]
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["pipeline_time", "even_division", "minimax_partition", "refine_partition", "exact_partition"]


def pipeline_time(times: Sequence[float], chunks: int) -> float:
    """Iteration time of stages taking ``times`` per iteration over ``chunks`` micro-batches."""
    if len(times) == 1:
        return float(times[0])
    per = np.asarray(times) / chunks
    return float(per.sum() + (chunks - 1) * per.max())


def even_division(layers: int, pp: int) -> List[int]:
    """``layers`` split into ``pp`` near-equal stages, the larger ones last."""
    base, extra = divmod(layers, pp)
    return [base + (1 if k >= pp - extra else 0) for k in range(pp)]


def minimax_partition(per_layer: Sequence[float], fixed: Sequence[float], layers: int) -> List[int]:
    """Contiguous split of ``layers`` into len(per_layer) stages minimising max(n_k * a_k + b_k)."""
    pp = len(per_layer)
    # best[k][r]: minimal max-stage-cost placing r layers in stages k.. (each >= 1 layer).
    inf = math.inf
    best = [[inf] * (layers + 1) for _ in range(pp + 1)]
    arg = [[0] * (layers + 1) for _ in range(pp + 1)]
    best[pp][0] = 0.0
    for k in range(pp - 1, -1, -1):
        for r in range(1, layers + 1):
            for n in range(1, r - (pp - k - 1) + 1):
                v = max(n * per_layer[k] + fixed[k], best[k + 1][r - n])
                if v < best[k][r]:
                    best[k][r], arg[k][r] = v, n
    division, r = [], layers
    for k in range(pp):
        n = arg[k][r]
        division.append(n)
        r -= n
    return division


def refine_partition(cost: Callable[[Sequence[int]], float], starts: Sequence[Sequence[int]],
                     fallback: Sequence[int]) -> Tuple[float, List[int]]:
    """Galvatron-BMW refinement: from each start, move one boundary layer at a time while
    ``cost`` drops; the best (cost, division) over the starts (``(inf, fallback)`` if none is finite)."""
    best: Tuple[float, List[int]] = (math.inf, list(fallback))
    for start in starts:
        current, t = list(start), cost(start)
        improved = True
        while improved:
            improved = False
            for k in range(len(current) - 1):
                for delta in (1, -1):
                    cand = list(current)
                    cand[k] -= delta
                    cand[k + 1] += delta
                    if min(cand) < 1:
                        continue
                    ct = cost(cand)
                    if ct < t - 1e-9:
                        current, t, improved = cand, ct, True
        if t < best[0]:
            best = (t, current)
    return best


def exact_partition(tables: np.ndarray, layers: int, chunks: int) -> Optional[List[int]]:
    """Contiguous split minimising ``sum_k t_k + (chunks - 1) * max_k t_k`` exactly.

    ``tables[k, n]`` is stage ``k``'s time per iteration with ``n`` layers (``t = T / chunks``).
    For every candidate bound ``M`` on the slowest stage, a DP over stages minimises the sum with
    each stage at most ``M``; ``sum + (chunks - 1) * M`` is exact at ``M`` = the true maximum, so
    the minimum over all candidates is the optimum.  Vectorised over ``M``.
    """
    pp = tables.shape[0]
    t = tables[:, : layers + 1] / chunks
    bounds = np.unique(t[np.isfinite(t)])
    if bounds.size == 0:
        return None
    inf = np.inf
    # g[m, r]: least sum for stages k.. using exactly r layers, every stage <= bounds[m].
    g = np.full((bounds.size, layers + 1), inf)
    g[:, 0] = 0.0
    choice = []
    for k in range(pp - 1, -1, -1):
        new = np.full_like(g, inf)
        arg = np.zeros(g.shape, dtype=np.int32)
        for n in range(1, min(layers, t.shape[1] - 1) + 1):
            tk = t[k, n]
            if not np.isfinite(tk):
                continue
            ok = bounds >= tk
            cand = np.full_like(g, inf)
            cand[ok, n:] = tk + g[ok, : layers + 1 - n]
            better = cand < new
            new[better] = cand[better]
            arg[better] = n
        g = new
        choice.append(arg)
    choice.reverse()
    total = g[:, layers] + (chunks - 1) * bounds
    m = int(np.argmin(total))
    if not np.isfinite(total[m]):
        return None
    division, r = [], layers
    for k in range(pp):
        n = int(choice[k][m, r])
        division.append(n)
        r -= n
    return division
