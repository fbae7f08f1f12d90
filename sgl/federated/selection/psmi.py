"""PS-MI: value each party by Shapley values of the KNN mutual information of coalitions.

**Utility.** ``U(S) = I(X_S; Y)`` (:mod:`~sgl.federated.selection.mi`), ``U(∅) = 0``.

**Random projection instead of encryption.** Party ``p`` sends ``Z_p = X_p R_p / sqrt(r)`` with its own
Gaussian ``R_p`` (``d_p x r``, entries ``N(0, 1)``), never ``X_p``. Then ``E ||(x - x') R_p||^2 / r =
||x - x'||^2``: coalition distances, summed over members, are unbiased, and by Johnson–Lindenstrauss
within ``1 ± eps`` for ``r = O(log n / eps^2)``. Privacy: the Gaussian mechanism view of random
projection (Kenthapadi et al., 2013) — each released coordinate is a Gaussian in the row with variance
``||x||^2 / r``, and ``R_p`` stays secret, so a neighbouring row changes the release's distribution by a
bounded divergence: ``(eps, delta)``-DP holds when rows have bounded norm and enough noise is added
to ``Z_p`` (``noise``; 0 by default, i.e. no formal guarantee, only the projection's obfuscation).

**Stratified coalition sampling.** Shapley's value is the mean over sizes ``s = 1..m`` of
``E[U(T) | |T| = s, i ∈ T] - E[U(T) | |T| = s - 1, i ∉ T]``. For each size ``s`` we evaluate a set of
coalitions: all ``C(m, s)`` if that fits the budget ``per_stratum``, else ``per_stratum`` *cyclic*
coalitions ``{π_j, ..., π_{j+s-1}}`` of a random permutation ``π`` — every party is inside exactly
``s`` and outside exactly ``m - s`` of ``m`` of them, so no stratum mean is empty. With every coalition
the estimator equals the exact Shapley value; with ``per_stratum = m`` it evaluates about ``m (m - 1)``
coalitions instead of ``2^m - 1``.

**LSH pruning.** With ``lsh_tables > 0`` each coalition's projected rows are hashed by SimHash
(``lsh_bits`` random hyperplanes per table); a row's neighbour candidates are the rows sharing a
bucket in some table (rows with fewer than ``k + 1`` same-label candidates keep all rows). Distances
outside the candidates are never formed; ``pairs_fraction`` reports the share that were.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 150)
    >>> blocks = [y[:, None] + rng.normal(size=(150, 2)), rng.normal(size=(150, 2)), rng.normal(size=(150, 2))]
    >>> res = psmi_values(blocks, y, k=5, proj_dim=4)
    >>> int(np.argmax(res.values)), res.coalitions
    (0, 7)
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.federated.selection.knn import check_parties
from sgl.federated.selection.mi import check_labels, mi_from_distances

__all__ = ["ValuationResult", "random_projection", "exact_shapley", "stratified_coalitions", "stratified_shapley",
           "mi_utility", "psmi_values", "party_seed", "utility_from_projections", "shapley_of_utility"]


@dataclass
class ValuationResult:
    """Per-party values, distinct coalitions evaluated, seconds, bytes sent to the coordinator, pair share."""

    values: np.ndarray
    coalitions: int
    seconds: float
    bytes: int
    pairs_fraction: float = 1.0


def random_projection(x: np.ndarray, dim: int, seed: int, noise: float = 0.0) -> np.ndarray:
    """``x R / sqrt(dim)`` (``R`` Gaussian, seeded per party) plus optional Gaussian ``noise`` (std)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ConfigError(f"proj_dim must be a positive integer, got {dim!r}")
    if noise < 0:
        raise ConfigError(f"noise must be >= 0, got {noise}")
    rng = np.random.default_rng(seed)
    z = x @ rng.normal(size=(x.shape[1], dim)) / math.sqrt(dim)
    return z + rng.normal(scale=noise, size=z.shape) if noise > 0 else z


def exact_shapley(utility: Callable[[FrozenSet[int]], float], m: int) -> np.ndarray:
    """Shapley values by the definition: ``sum_S |S|! (m-|S|-1)! / m! (U(S ∪ i) - U(S))`` over all ``S``."""
    phi = np.zeros(m)
    for i in range(m):
        others = [j for j in range(m) if j != i]
        for s in range(m):
            w = math.factorial(s) * math.factorial(m - s - 1) / math.factorial(m)
            for sub in itertools.combinations(others, s):
                phi[i] += w * (utility(frozenset(sub) | {i}) - utility(frozenset(sub)))
    return phi


def stratified_coalitions(m: int, per_stratum: Optional[int], seed: int) -> List[FrozenSet[int]]:
    """The coalitions the stratified estimator evaluates (all of a size when they fit the budget)."""
    rng = np.random.default_rng(seed)
    out: List[FrozenSet[int]] = []
    for s in range(1, m + 1):
        if per_stratum is None or math.comb(m, s) <= per_stratum:
            out.extend(frozenset(c) for c in itertools.combinations(range(m), s))
            continue
        chosen: set = set()
        while len(chosen) < per_stratum:
            perm = rng.permutation(m)
            for j in range(m):
                if len(chosen) >= per_stratum:
                    break
                chosen.add(frozenset(int(perm[(j + t) % m]) for t in range(s)))
        out.extend(sorted(chosen, key=sorted))
    return out


def stratified_shapley(utility: Callable[[FrozenSet[int]], float], m: int, coalitions: Sequence[FrozenSet[int]]
                       ) -> np.ndarray:
    """``1/m sum_s (mean U over size-s coalitions with i - mean over size-(s-1) ones without i)``."""
    by_size: Dict[int, List[FrozenSet[int]]] = {0: [frozenset()]}
    for c in coalitions:
        by_size.setdefault(len(c), []).append(c)
    u = {c: utility(c) for cs in by_size.values() for c in cs}
    phi = np.zeros(m)
    for i in range(m):
        for s in range(1, m + 1):
            with_i = [u[c] for c in by_size.get(s, []) if i in c]
            without = [u[c] for c in by_size.get(s - 1, []) if i not in c]
            if not with_i or not without:
                raise ConfigError(f"stratum {s} has no coalition {'with' if not with_i else 'without'} party {i}; "
                                  "raise per_stratum")
            phi[i] += np.mean(with_i) - np.mean(without)
    return phi / m


def _lsh_candidates(z: np.ndarray, tables: int, bits: int, rng: np.random.Generator) -> np.ndarray:
    keys = (z @ rng.normal(size=(tables, z.shape[1], bits)) > 0)  # [tables, n, bits]
    codes = (keys * (1 << np.arange(bits))).sum(-1)
    return (codes[:, :, None] == codes[:, None, :]).any(axis=0)


def mi_utility(blocks: Sequence, labels, k: int = 5, proj_dim: Optional[int] = 8, seed: int = 0, noise: float = 0.0,
               lsh_tables: int = 0, lsh_bits: int = 4) -> Tuple[Callable[[FrozenSet[int]], float], Dict[str, float]]:
    """``(U, stats)``: the coalition utility on randomly projected features, and ``stats`` with the bytes the
    parties sent (``"bytes"``) and, once ``U`` ran with LSH, the pairs formed (``"pairs"``, ``"pairs_total"``)."""
    xs = check_parties(blocks)
    y = check_labels(labels, xs[0].shape[0], k)
    # proj_dim=None: the plaintext features themselves (the reference the projection approximates)
    zs = xs if proj_dim is None else [random_projection(x, proj_dim, party_seed(seed, p), noise)
                                      for p, x in enumerate(xs)]
    return utility_from_projections(zs, y, k, seed, lsh_tables, lsh_bits)


def party_seed(seed: int, party: int) -> int:
    """The seed of party ``party``'s secret projection."""
    return seed * 7919 + party


def _check_lsh(lsh_tables: int, lsh_bits: int) -> None:
    if lsh_tables < 0 or lsh_bits < 1:
        raise ConfigError(f"lsh_tables must be >= 0 and lsh_bits >= 1, got {lsh_tables}, {lsh_bits}")


def utility_from_projections(zs: Sequence[np.ndarray], y: np.ndarray, k: int = 5, seed: int = 0, lsh_tables: int = 0,
                             lsh_bits: int = 4) -> Tuple[Callable[[FrozenSet[int]], float], Dict[str, float]]:
    """The coordinator's half of :func:`mi_utility`: the utility on the projections ``zs`` the parties sent."""
    _check_lsh(lsh_tables, lsh_bits)
    n = len(y)
    stats = {"bytes": float(sum(z.size * 8 for z in zs)), "pairs": 0.0, "pairs_total": 0.0}
    sq = [np.maximum((z * z).sum(1)[:, None] + (z * z).sum(1)[None, :] - 2 * z @ z.T, 0.0) for z in zs]
    rng = np.random.default_rng(seed + 1)
    same = y[:, None] == y[None, :]
    cache: Dict[FrozenSet[int], float] = {}

    def utility(c: FrozenSet[int]) -> float:
        c = frozenset(c)
        if not c:
            return 0.0
        if c not in cache:
            d = sum(sq[p] for p in c)
            if lsh_tables:
                cand = _lsh_candidates(np.concatenate([zs[p] for p in sorted(c)], axis=1), lsh_tables, lsh_bits, rng)
                np.fill_diagonal(cand, False)
                cand[(cand & same).sum(axis=1) < k] = True
                stats["pairs"] += float(cand.sum())
                stats["pairs_total"] += float(n * (n - 1))
                d = np.where(cand, d, np.inf)
            cache[c] = mi_from_distances(d, y, k)
        return cache[c]

    return utility, stats


def psmi_values(blocks: Sequence, labels, k: int = 5, proj_dim: int = 8, per_stratum: Optional[int] = None,
                seed: int = 0, noise: float = 0.0, lsh_tables: int = 0, lsh_bits: int = 4) -> ValuationResult:
    """PS-MI values of the parties (``per_stratum=None``: every coalition, i.e. exact Shapley of ``U``)."""
    start = time.perf_counter()
    m = len(blocks)
    check_per_stratum(per_stratum, m)
    utility, stats = mi_utility(blocks, labels, k, proj_dim, seed, noise, lsh_tables, lsh_bits)
    return shapley_of_utility(utility, stats, m, per_stratum, seed, start)


def check_per_stratum(per_stratum: Optional[int], m: int) -> None:
    if per_stratum is not None and (isinstance(per_stratum, bool) or per_stratum < m):
        raise ConfigError(f"per_stratum must be None (all coalitions) or at least the number of parties ({m}) so "
                          f"that every party is inside and outside some coalition of each size; got {per_stratum!r}")


def shapley_of_utility(utility: Callable[[FrozenSet[int]], float], stats: Dict[str, float], m: int,
                       per_stratum: Optional[int], seed: int, start: float) -> ValuationResult:
    """The stratified Shapley values of ``utility`` as a :class:`ValuationResult` (``start``: the clock's start)."""
    coalitions = stratified_coalitions(m, per_stratum, seed)
    values = stratified_shapley(utility, m, coalitions)
    frac = stats["pairs"] / stats["pairs_total"] if stats["pairs_total"] else 1.0
    return ValuationResult(values, len(set(coalitions)), time.perf_counter() - start, int(stats["bytes"]), frac)
