"""More static replica sets for LobRA where they are too many to enumerate (32, 64 GPUs).

On 16 GPUs :func:`~sgl.systems.data.lobra_bound.replica_sets` lists every set (43 of them) and
LobRA's static choice is exhaustive; on 32 GPUs there are 2,804 and on 64 many more, and the
whole-cluster MILP rarely gets near its optimum in its time limit. This module adds candidates
in two ways, both scored on the **calibration batches only**:

* :func:`rounded_sets`: the static LP's real-valued replica counts (the LP of
  :func:`~sgl.systems.data.lobra_bound.step_time_bound` with ``replicas=None``, averaged over
  the calibration batches) rounded to integer sets with ``Σ replicas·GPUs = N`` that hold the
  longest sequence (each fractional count once rounded up, the rest down, the GPUs left over
  filled by the largest remaining deficit);
* :func:`local_search`: best-improvement hill climbing over replica sets from given starts; a
  move trades one scheme's GPUs for another's (one replica of ``g`` GPUs for ``g / g'`` replicas
  of a ``g'``-GPU scheme, or the reverse), and a set is scored by :func:`greedy_ms`, the
  calibration batches replayed with the greedy dispatch
  :func:`~sgl.systems.data.lobra.lpt_dispatch` (milliseconds per set, no MILP; the per-set LP
  bound :func:`surrogate_ms` is the other choice, but on 32 GPUs it ranks many-small-replica sets
  first that replay slower than the homogeneous one). The best ``keep`` sets it saw are
  returned, for the caller to replay with the real dispatcher on the same calibration batches.

>>> import numpy as np
>>> from sgl.systems.data.lobra_pool import lora_pool
>>> pool = lora_pool(16, adapters=3)
>>> calib = [np.array([120, 300, 900, 4000, 15000] * 4)]
>>> sets = search_candidates(pool, 16, 15000, calib, starts=[{9: 2}], max_evals=20, keep=3)
>>> all(sum(pool[s].devices * r for s, r in rep.items()) == 16 for rep in sets)
True
>>> all(any(pool[s].capacity >= 15000 for s in rep) for rep in sets)
True
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.data.lobra_bound import _step_lp, step_time_bound

__all__ = ["lp_counts", "rounded_sets", "surrogate_ms", "neighbours", "local_search", "search_candidates"]


def _key(rep: Mapping[int, int]) -> tuple:
    return tuple(sorted((int(s), int(r)) for s, r in rep.items() if r > 0))


def _valid(pool: Sequence, rep: Mapping[int, int], devices: int, longest: int) -> bool:
    return (sum(pool[s].devices * r for s, r in rep.items()) == devices and all(r >= 0 for r in rep.values())
            and any(r > 0 and pool[s].capacity >= longest for s, r in rep.items()))


def lp_counts(pool: Sequence, devices: int, steps: Sequence[np.ndarray], longest: int) -> Dict[int, float]:
    """The real-valued replica counts of the static LP, averaged over ``steps`` (the best home per step)."""
    devices = check_int(devices, "devices", minimum=1, error=PlanError)
    schemes = [s for s, p in enumerate(pool) if p.devices <= devices]
    total: Dict[int, float] = dict.fromkeys(schemes, 0.0)
    used = 0
    for lengths in steps:
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.size == 0:
            continue
        best, counts = np.inf, {}
        for home in (s for s in schemes if pool[s].capacity >= int(lengths.max())):
            out: dict = {}
            t = _step_lp(pool, schemes, lengths, None, devices, home, longest, counts_out=out)
            if t < best and out:
                best, counts = t, out
        if counts:
            used += 1
            for s, r in counts.items():
                total[s] += r
    if used == 0:
        raise PlanError("the static LP has no solution on these steps; check that a scheme holds the longest sequence")
    return {s: r / used for s, r in total.items()}


def _fill(pool: Sequence, rep: Dict[int, int], target: Mapping[int, float], devices: int) -> Dict[int, int]:
    """Add replicas until N GPUs are used: positive deficits ``target − rep`` first, then schemes the LP uses."""
    left = devices - sum(pool[s].devices * r for s, r in rep.items())
    while left > 0:
        fits = [s for s in target if pool[s].devices <= left]
        if not fits:
            break
        s = max(fits, key=lambda k: (target[k] - rep.get(k, 0) > 1e-9, target[k] > 1e-6,
                                     target[k] - rep.get(k, 0), -pool[k].devices, -k))
        rep[s] = rep.get(s, 0) + 1
        left -= pool[s].devices
    return rep


def rounded_sets(pool: Sequence, counts: Mapping[int, float], devices: int, longest: int) -> List[Dict[int, int]]:
    """Integer replica sets near real-valued ``counts`` (``Σ r·g = devices``, holding ``longest``)."""
    floor = {s: int(np.floor(r + 1e-9)) for s, r in counts.items()}
    variants = [(dict(floor), None)]
    for s, r in counts.items():  # each fractional count rounded up once (kept up while over budget)
        if r - floor[s] > 1e-6:
            variants.append(({**floor, s: floor[s] + 1}, s))
    holders = [s for s in counts if pool[s].capacity >= longest]
    if holders:  # a set must keep a replica that holds the longest sequence
        h = max(holders, key=lambda k: (counts[k], -pool[k].devices))
        variants += [({**v, h: max(v.get(h, 0), 1)}, up) for v, up in list(variants)]
    out: List[Dict[int, int]] = []
    for v, up in variants:
        while sum(pool[s].devices * r for s, r in v.items()) > devices:  # over: drop the largest surplus
            held = sum(v.get(h, 0) for h in holders)
            drop = [k for k in v if v[k] > 0 and k != up and (k not in holders or held > 1)]
            if not drop:
                break
            s = max(drop, key=lambda k: (v[k] - counts[k], pool[k].devices))
            v[s] -= 1
        rep = {s: r for s, r in _fill(pool, v, counts, devices).items() if r > 0}
        if _valid(pool, rep, devices, longest) and rep not in out:
            out.append(rep)
    return out


def surrogate_ms(pool: Sequence, rep: Mapping[int, int], steps: Sequence[np.ndarray]) -> float:
    """``Σ_steps step_time_bound(rep)`` (ms): the per-set LP lower bound on ``steps`` (inf if a step does not fit)."""
    try:
        return float(sum(step_time_bound(pool, np.asarray(x), dict(rep)) for x in steps))
    except PlanError:
        return float("inf")


def greedy_ms(pool: Sequence, rep: Mapping[int, int], steps: Sequence[np.ndarray]) -> float:
    """``Σ_steps`` step time (ms) of :func:`~sgl.systems.data.lobra.lpt_dispatch` (inf if a sequence fits no replica).

    A real dispatch (longest first to the replica finishing it earliest, micro-batches first-fit
    decreasing), so with ``lpt=True`` the dispatcher's replay of ``rep`` is never slower.
    """
    from sgl.systems.data.lobra import lpt_dispatch, step_time

    try:
        return float(sum(step_time(pool, lpt_dispatch(pool, dict(rep), x)) for x in steps))
    except PlanError:
        return float("inf")


def neighbours(pool: Sequence, rep: Mapping[int, int], longest: int) -> List[Dict[int, int]]:
    """Sets one move away: ``m`` replicas of scheme ``s`` traded for the same GPUs of scheme ``t``.

    A move takes one replica of ``s`` and gives ``g_s / g_t`` of ``t`` (``g_t`` divides ``g_s``),
    or takes ``g_t / g_s`` replicas of ``s`` for one of ``t``; sets that no longer hold ``longest``
    are left out.
    """
    out: List[Dict[int, int]] = []
    for s, r in sorted(rep.items()):
        if r <= 0:
            continue
        gs = pool[s].devices
        for t, q in enumerate(pool):
            if t == s:
                continue
            if gs % q.devices == 0:
                take, give = 1, gs // q.devices
            elif q.devices % gs == 0 and r >= q.devices // gs:
                take, give = q.devices // gs, 1
            else:
                continue
            new = dict(rep)
            new[s] = r - take
            new[t] = new.get(t, 0) + give
            new = {k: v for k, v in new.items() if v > 0}
            if any(pool[k].capacity >= longest for k in new) and new not in out:
                out.append(new)
    return out


def local_search(pool: Sequence, devices: int, longest: int, steps: Sequence[np.ndarray],
                 starts: Iterable[Mapping[int, int]], *, max_evals: int = 300, keep: int = 6,
                 score: str = "greedy") -> List[tuple]:
    """Hill climbing on ``score``; the ``keep`` best ``(score_ms, set)`` seen, best first.

    ``score``: ``"greedy"`` (:func:`greedy_ms`, a real greedy dispatch; default) or ``"lp"``
    (:func:`surrogate_ms`, the per-set LP bound: a bound, but a poor ranking on 32 GPUs, where it
    favours many small replicas that replay slower than the homogeneous set).

    From each valid start in turn, move to the best neighbour while it lowers the score; at most
    ``max_evals`` distinct sets are scored in all (cached), so the search stops early on a budget.
    """
    check_int(max_evals, "max_evals", minimum=1, error=PlanError)
    check_int(keep, "keep", minimum=1, error=PlanError)
    check_choice(score, "score", ("greedy", "lp"), error=PlanError)
    rate = greedy_ms if score == "greedy" else surrogate_ms
    seen: Dict[tuple, float] = {}

    def value_of(rep):
        k = _key(rep)
        if k not in seen:
            if len(seen) >= max_evals:
                return None
            seen[k] = rate(pool, rep, steps)
        return seen[k]

    for start in starts:
        current = {s: r for s, r in start.items() if r > 0}
        if not _valid(pool, current, devices, longest):
            continue
        value = value_of(current)
        while value is not None:
            best, best_value = None, value
            for rep in neighbours(pool, current, longest):
                v = value_of(rep)
                if v is None:
                    break
                if v < best_value - 1e-9:
                    best, best_value = rep, v
            if best is None:
                break
            current, value = best, best_value
        if len(seen) >= max_evals:
            break
    ranked = sorted((v, k) for k, v in seen.items() if np.isfinite(v))
    return [(v, dict(k)) for v, k in ranked[:keep]]


def search_candidates(pool: Sequence, devices: int, longest: int, steps: Sequence[np.ndarray],
                      starts: Sequence[Mapping[int, int]] = (), *, max_evals: int = 300,
                      keep: int = 6, score: str = "greedy") -> List[Dict[int, int]]:
    """Rounded static-LP sets, then :func:`local_search` from them and ``starts``: the ``keep`` best sets.

    Every set returned uses exactly ``devices`` GPUs and holds ``longest``; ``steps`` should be
    calibration batches (never the replayed ones).
    """
    seeds = rounded_sets(pool, lp_counts(pool, devices, steps, longest), devices, longest)
    found = local_search(pool, devices, longest, steps, list(seeds) + [dict(s) for s in starts],
                         max_evals=max_evals, keep=keep, score=score)
    return [rep for _, rep in found]
