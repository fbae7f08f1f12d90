"""VF-MINE / VF-PS: choose ``l`` of ``m`` parties by group-testing Shapley values of a KNN MI utility.

VF-MINE estimates the utility of a coalition ``S`` of parties as ``I(X_S; Y)`` with the KNN estimator
of :mod:`~sgl.federated.selection.mi`, the joint neighbours found by Fagin's threshold algorithm over
the coalition's parties (:func:`~sgl.federated.selection.knn.fagin_knn`), so only ids and the
partial distances of candidates cross parties. VF-PS ranks parties by their Shapley values of that
utility, estimated by group testing (Jia et al., 2019): ``T`` tests each draw a size ``s`` with
probability ``q(s) ∝ 1/s + 1/(m - s)`` and a uniform coalition of that size, and with
``Z = sum_s (1/s + 1/(m - s))``,

.. math:: \\widehat{\\phi_i - \\phi_j} = \\frac{Z}{T} \\sum_t U(S_t) (\\beta_{ti} - \\beta_{tj}),
          \\qquad \\phi_i = \\frac{1}{m}\\Big(U(N) + \\sum_j \\widehat{\\phi_i - \\phi_j}\\Big),

the least-squares values with ``sum_i phi_i = U(N)``. The ``l`` parties of highest value are chosen.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> blocks = [y[:, None] + rng.normal(size=(200, 2)), rng.normal(size=(200, 2)), rng.normal(size=(200, 2))]
    >>> vfps_select(blocks, y, l=1, k=5, seed=0).selected
    [0]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence

import numpy as np
from scipy.special import digamma

from sgl.errors import ConfigError
from sgl.federated.selection.knn import Ledger, LocalParty, check_parties, fagin_knn
from sgl.federated.selection.mi import check_labels

__all__ = ["SelectionResult", "as_parties", "check_choose", "vf_mine", "group_testing_values", "vfps_select"]


@dataclass
class SelectionResult:
    """The chosen parties (ascending), per-party scores, wall time, utility evaluations and traffic."""

    selected: List[int]
    scores: np.ndarray
    seconds: float
    evaluations: int
    ledger: Ledger = field(default_factory=Ledger)
    extra: Dict[str, float] = field(default_factory=dict)


def as_parties(blocks: Sequence) -> list:
    """Arrays become :class:`LocalParty` (validated: no NaN, at least one column); party objects pass."""
    if len(blocks) == 0:
        raise ConfigError("no parties given; pass one feature block per party")
    if all(hasattr(b, "sorted_block") for b in blocks):
        return list(blocks)
    return [LocalParty(b) for b in check_parties(blocks)]


def check_choose(l: int, m: int) -> int:
    if isinstance(l, bool) or not isinstance(l, (int, np.integer)):
        raise ConfigError(f"l (parties to choose) must be an integer, got {l!r}")
    if not 1 <= l <= m:
        raise ConfigError(f"cannot choose l={l} of m={m} parties; l must be in [1, {m}]")
    return int(l)


def _queries(n: int, num_queries: Optional[int], seed: int) -> np.ndarray:
    if num_queries is None or num_queries >= n:
        return np.arange(n)
    if num_queries < 1:
        raise ConfigError(f"num_queries must be >= 1, got {num_queries}")
    return np.sort(np.random.default_rng(seed).choice(n, num_queries, replace=False))


def vf_mine(parties: Sequence, coalition: Sequence[int], labels: np.ndarray, k: int = 5,
            queries: Optional[np.ndarray] = None, ledger: Optional[Ledger] = None, aggregate=None) -> float:
    """VF-MINE: ``I(X_S; Y)`` for the coalition ``S`` (party indices) by label-aware Fagin KNN
    (``aggregate``: how partial distances are added, e.g. :class:`~sgl.federated.selection.secure.PaillierSum`)."""
    if len(coalition) == 0:
        return 0.0
    res = fagin_knn([parties[p] for p in coalition], k, queries=queries, labels=labels, ledger=ledger,
                    aggregate=aggregate)
    q = np.arange(len(labels)) if queries is None else queries
    _, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
    n = len(labels)
    return float(digamma(n) - digamma(counts[inv[q]]).mean() + digamma(k) - digamma(res.kth_rank).mean())


def group_testing_values(utility: Callable[[FrozenSet[int]], float], m: int, tests: int,
                         seed: int = 0) -> np.ndarray:
    """Group-testing Shapley estimates of ``utility`` over ``m`` players from ``tests`` random coalitions."""
    if m == 1:
        return np.array([utility(frozenset([0]))])
    rng = np.random.default_rng(seed)
    sizes = np.arange(1, m)
    q = 1.0 / sizes + 1.0 / (m - sizes)
    z = q.sum()
    beta = np.zeros((tests, m))
    u = np.zeros(tests)
    for t in range(tests):
        s = rng.choice(sizes, p=q / z)
        members = rng.choice(m, s, replace=False)
        beta[t, members] = 1.0
        u[t] = utility(frozenset(int(i) for i in members))
    d = z / tests * (u @ beta)  # phi_i - phi_j ~ d_i - d_j
    return (utility(frozenset(range(m))) + m * d - d.sum()) / m


def vfps_select(blocks: Sequence, labels, l: int, k: int = 5, tests: Optional[int] = None,
                num_queries: Optional[int] = None, seed: int = 0, aggregate=None) -> SelectionResult:
    """VF-PS: the ``l`` parties of highest group-testing Shapley value of the VF-MINE utility.

    ``blocks`` are the parties' feature arrays (rows aligned) or party objects with sorted access;
    ``tests`` defaults to ``2 m``; ``num_queries`` samples the rows whose neighbours are searched;
    ``aggregate=PaillierSum()`` adds partial distances under encryption, as VF-MINE does.
    """
    start = time.perf_counter()
    parties = as_parties(blocks)
    m = len(parties)
    l = check_choose(l, m)
    y = check_labels(labels, parties[0].num_rows, k)
    tests = 2 * m if tests is None else int(tests)
    if tests < 1:
        raise ConfigError(f"tests must be >= 1, got {tests}")
    queries = _queries(len(y), num_queries, seed)
    ledger, cache = Ledger(), {}

    def utility(coalition: FrozenSet[int]) -> float:
        if coalition not in cache:
            cache[coalition] = vf_mine(parties, sorted(coalition), y, k, queries, ledger, aggregate)
        return cache[coalition]

    values = group_testing_values(utility, m, tests, seed)
    chosen = sorted(int(i) for i in np.argsort(-values, kind="stable")[:l])
    return SelectionResult(chosen, values, time.perf_counter() - start, len(cache), ledger)

