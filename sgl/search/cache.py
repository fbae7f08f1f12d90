"""Precomputed hops shared by the trials of a search.

Propagation is parameter-free, so two designs with the same graph operator need the same
hops ``X, MX, ..., M^k X``. :class:`HopCache` keeps them per operator: a trial asking for
``k`` hops gets a slice when at least ``k`` are stored, and only the missing hops are
computed otherwise (hop ``i`` is ``M`` applied to hop ``i-1`` for every operator we have).
The measured cost of each hop is stored with it, so a trial's ``train_time`` objective
still includes the precompute it would have paid alone.

Example:
    >>> import sgl
    >>> from sgl.search import HopCache
    >>> graph = sgl.datasets.load("karate")
    >>> cache = HopCache(graph)
    >>> hops, seconds = cache.get({"graph_op": "adj", "r": 0.5}, 3)
    >>> hops2, _ = cache.get({"graph_op": "adj", "r": 0.5}, 2)   # a slice: nothing recomputed
    >>> len(hops), len(hops2), cache.propagations
    (4, 3, 1)
"""
from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Tuple, Union

import torch

from sgl._checks import check_int, format_bytes, parse_bytes, with_message
from sgl.errors import ConfigError
from sgl.ops import get_operator, propagate_hops, row_normalize

__all__ = ["HopCache"]


class HopCache:
    """Per-operator hop lists with least-recently-used eviction under ``max_bytes``.

    Args:
        graph: the graph (with ``graph.x``).
        normalize_features (bool): row-normalise ``graph.x`` first (as SGAP models do).
        max_bytes (int or str): budget for stored hops (bytes, or a size such as ``"4GiB"``,
            :func:`sgl._checks.parse_bytes`); the least recently used operator's hops are
            dropped when a new entry would exceed it (one entry is always kept).

    Attributes:
        propagations (int): how many times hops were actually computed (misses and extensions).
        hits (int): requests served entirely from the cache.
    """

    def __init__(self, graph: Any, normalize_features: bool = True, max_bytes: Union[int, str] = 4 * 2**30) -> None:
        if graph.x is None:
            raise ConfigError("the graph has no node features (graph.x); a search needs features to propagate")
        self.max_bytes = parse_bytes(max_bytes, "max_bytes")
        self.graph = graph
        self.x = row_normalize(graph.x) if normalize_features else graph.x
        self.propagations = 0
        self.hits = 0
        self._entries: "OrderedDict[str, Tuple[List[torch.Tensor], List[float]]]" = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(operator: Mapping[str, Any]) -> str:
        return get_operator(**_operator_kwargs(operator)).cache_key()

    def _bytes(self) -> int:
        return sum(sum(h.numel() * h.element_size() for h in hops[1:]) for hops, _ in self._entries.values())

    def get(self, operator: Mapping[str, Any], k: int) -> Tuple[List[torch.Tensor], float]:
        """``(hops[0..k], seconds)``: the hops and the measured time to compute ``k`` of them."""
        with_message(f"k must be a non-negative integer, got {k!r}", check_int, k, 0)
        op = get_operator(**_operator_kwargs(operator))
        key = op.cache_key()
        with self._lock:
            hops, seconds = self._entries.pop(key, ([self.x], [0.0]))
            if len(hops) > k:
                self.hits += 1
            else:
                start = time.perf_counter()
                more = propagate_hops(self.graph, hops[-1], k - len(hops) + 1, op)[1:]
                elapsed = time.perf_counter() - start
                per_hop = elapsed / len(more)
                seconds = seconds + [seconds[-1] + per_hop * (i + 1) for i in range(len(more))]
                hops = hops + more
                self.propagations += 1
            self._entries[key] = (hops, seconds)
            while len(self._entries) > 1 and self._bytes() > self.max_bytes:
                self._entries.popitem(last=False)
            return hops[:k + 1], seconds[k]

    def __repr__(self) -> str:
        return (f"HopCache({len(self._entries)} operator(s), {format_bytes(self._bytes())}, "
                f"propagations={self.propagations}, hits={self.hits})")


def _operator_kwargs(operator: Mapping[str, Any]) -> Dict[str, Any]:
    """SGAPConfig-style fields (graph_op, r, alpha, t, self_loops) -> get_operator kwargs."""
    if not isinstance(operator, Mapping) or "graph_op" not in operator:
        raise ConfigError(f"operator must be a mapping with 'graph_op', got {json.dumps(operator, default=str)}")
    name = operator["graph_op"]
    kwargs: Dict[str, Any] = {"name": name, "r": operator.get("r", 0.5),
                              "self_loops": operator.get("self_loops", True)}
    if name in ("ppr", "lazy"):
        kwargs["alpha"] = operator.get("alpha", 0.1)
    if name == "heat":
        kwargs["t"] = operator.get("t", 5.0)
    return kwargs
