"""VFPS-SM: participant selection by a submodular KNN likelihood, chosen greedily.

The label owner scores how well a coalition ``S`` of parties predicts the labels by KNN: with
``c_i(S)`` of row ``i``'s ``k`` nearest rows (joint distances over ``S``) sharing its label and ``C``
classes, the Laplace-smoothed likelihood is ``L_i(S) = (c_i(S) + 1) / (k + C)`` and

.. math:: f(S) = \\sum_i L_i(S), \\qquad f(\\emptyset) = n / C.

The joint neighbours come from Fagin's threshold algorithm over ``S`` (only ids and candidates'
partial distances cross parties). The paper treats this KNN likelihood as submodular, so greedy
selection is near-optimal and *lazy* greedy (Minoux) re-evaluates only the candidates whose stale
gain could still win: after the first round of single-party searches (plain local faiss searches),
few coalitions are evaluated per pick. Where ``f`` is not exactly submodular lazy greedy is a
heuristic. VF-PS, by contrast, runs a label-aware Fagin search on a random, often large coalition
for every group test.

``objective="facility"`` is the purely local variant: each party's own-column KNN likelihood
``L_ip`` (no distance leaves a party, only neighbour ids go to the label owner) and the
facility-location function ``f(S) = sum_i max(1/C, max_{p in S} L_ip)``, which *is* monotone
submodular (greedy within ``1 - 1/e`` of the best ``l``-subset) and rewards parties that explain
different rows; Fagin's algorithm then scores the chosen coalition once (``extra["joint_likelihood"]``).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> blocks = [y[:, None] + rng.normal(size=(200, 2)), rng.normal(size=(200, 2)), rng.normal(size=(200, 2))]
    >>> vfps_sm_select(blocks, y, l=1, k=5).selected
    [0]
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.federated.selection.knn import Ledger, fagin_knn
from sgl.federated.selection.mi import check_labels
from sgl.federated.selection.vfps import SelectionResult, _queries, as_parties, check_choose

__all__ = ["knn_likelihoods", "facility_value", "greedy_select", "joint_likelihood", "lazy_greedy", "vfps_sm_select"]


def knn_likelihoods(parties: Sequence, labels: np.ndarray, k: int, queries: np.ndarray,
                    ledger: Optional[Ledger] = None) -> np.ndarray:
    """``[q, m]``: each party's smoothed local-KNN likelihood of each query row's label."""
    classes = int(labels.max()) + 1
    out = np.zeros((len(queries), len(parties)))
    for p, party in enumerate(parties):
        ids, _ = party.sorted_block(queries, k)
        if ledger is not None:  # the label owner sends the query ids, the party its neighbour ids
            ledger.add(ids.size * 8 + len(queries) * 8, 2)
            ledger.sorted_accesses += ids.size
        same = (labels[ids] == labels[queries][:, None]).sum(axis=1)
        out[:, p] = (same + 1.0) / (k + classes)
    return out


def facility_value(likelihood: np.ndarray, coalition: Sequence[int], floor: float) -> float:
    """``f(S)``: every row scored by the best likelihood among ``S`` (``floor`` for the empty set)."""
    if len(coalition) == 0:
        return float(floor * likelihood.shape[0])
    return float(np.maximum(likelihood[:, list(coalition)].max(axis=1), floor).sum())


def greedy_select(likelihood: np.ndarray, l: int, floor: float) -> Tuple[List[int], np.ndarray]:
    """Greedy maximisation of :func:`facility_value`: ``(chosen in order, marginal gain of each pick)``."""
    cur = np.full(likelihood.shape[0], floor)
    chosen: List[int] = []
    gains = []
    for _ in range(l):
        gain = np.maximum(likelihood - cur[:, None], 0.0).sum(axis=0)
        gain[chosen] = -np.inf
        best = int(np.argmax(gain))
        chosen.append(best)
        gains.append(gain[best])
        cur = np.maximum(cur, likelihood[:, best])
    return chosen, np.asarray(gains)


def joint_likelihood(parties: Sequence, coalition: Sequence[int], labels: np.ndarray, k: int,
                     queries: np.ndarray, ledger: Optional[Ledger] = None, aggregate=None) -> np.ndarray:
    """``[q]``: smoothed likelihood of each query's label under the coalition's joint KNN (Fagin's algorithm)."""
    classes = int(labels.max()) + 1
    if len(coalition) == 0:
        return np.full(len(queries), 1.0 / classes)
    res = fagin_knn([parties[p] for p in coalition], k, queries=queries, ledger=ledger, aggregate=aggregate)
    return ((labels[res.ids] == labels[queries][:, None]).sum(axis=1) + 1.0) / (k + classes)


def lazy_greedy(value, m: int, l: int) -> Tuple[List[int], List[float], int]:
    """Lazy greedy maximisation of a set function ``value(list) -> float`` (Minoux): stale marginal gains
    are upper bounds when ``value`` is submodular, so only the head of the queue is re-evaluated.
    Returns ``(chosen in order, gain of each pick, evaluations)``."""
    chosen: List[int] = []
    gains: List[float] = []
    base = value([])
    bound = {p: np.inf for p in range(m)}
    evaluations = 0
    for _ in range(l):
        fresh: dict = {}
        while True:
            p = max((q for q in bound if q not in chosen), key=lambda q: (bound[q], -q))
            if p in fresh:
                break
            bound[p] = value(chosen + [p]) - base
            fresh[p] = True
            evaluations += 1
        chosen.append(p)
        gains.append(bound[p])
        base += bound[p]
        del bound[p]
    return chosen, gains, evaluations


def vfps_sm_select(blocks: Sequence, labels, l: int, k: int = 5, num_queries: Optional[int] = None,
                   seed: int = 0, objective: str = "joint", verify: bool = True, aggregate=None) -> SelectionResult:
    """VFPS-SM: greedy maximisation of a submodular KNN likelihood of the labels.

    ``objective="joint"`` (default): ``f(S) = sum_i L_i(S)``, the smoothed likelihood of row ``i``'s label
    among its joint KNN under ``S`` found by Fagin's algorithm, maximised by lazy greedy (the paper argues
    this KNN likelihood is submodular; where it is not, lazy greedy is a heuristic). ``"facility"``: the
    local-KNN facility-location function above (exactly submodular; no cross-party distances; with
    ``verify`` the chosen coalition's joint likelihood is computed once by Fagin's algorithm).
    Scores: each party's marginal gain when it was picked (0 for the rest) for ``"joint"``, the
    first-round facility gains for ``"facility"``. ``aggregate`` adds partial distances (e.g. under
    Paillier) in every Fagin search.
    """
    start = time.perf_counter()
    parties = as_parties(blocks)
    m = len(parties)
    l = check_choose(l, m)
    y = check_labels(labels, parties[0].num_rows, k)
    if objective not in ("joint", "facility"):
        raise ConfigError(f"objective must be 'joint' or 'facility', got {objective!r}")
    if not isinstance(verify, bool):
        raise ConfigError(f"verify must be True or False, got {verify!r}")
    queries = _queries(len(y), num_queries, seed)
    ledger = Ledger()
    floor = 1.0 / (int(y.max()) + 1)
    if objective == "joint":
        chosen, gains, evaluations = lazy_greedy(
            lambda s: float(joint_likelihood(parties, sorted(s), y, k, queries, ledger, aggregate).sum()), m, l)
        scores = np.zeros(m)
        scores[chosen] = gains
        extra = {"objective": float(sum(gains)) + floor * len(queries),
                 "joint_likelihood": (float(sum(gains)) / len(queries) + floor)}
        return SelectionResult(sorted(chosen), scores, time.perf_counter() - start, evaluations, ledger, extra)
    lik = knn_likelihoods(parties, y, k, queries, ledger)
    chosen, _ = greedy_select(lik, l, floor)
    scores = np.maximum(lik - floor, 0.0).sum(axis=0)
    extra = {"objective": facility_value(lik, chosen, floor)}
    if verify:
        extra["joint_likelihood"] = float(joint_likelihood(parties, sorted(chosen), y, k, queries, ledger,
                                                           aggregate).mean())
    return SelectionResult(sorted(chosen), scores, time.perf_counter() - start, m + int(verify), ledger, extra)
