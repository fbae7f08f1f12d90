"""The sampling and caching settings of out-of-core training: :class:`OutOfCoreSampling`.

One dataclass serves every :class:`~sgl.samplers.outofcore.OutOfCorePolicy`; ``method`` names the
policy (:data:`~sgl.samplers.outofcore.POLICIES`), which also checks the options that only it
takes. The optimisation settings (learning rate, epochs, batch size, ...) are a
:class:`~sgl.tasks.TrainConfig` held by the run config :class:`sgl.tasks.OutOfCoreConfig`.

    >>> s = OutOfCoreSampling(method="ginex", fanouts=[5, 5], memory_budget="64MiB")
    >>> s.budget_bytes, s.to_dict()["method"]
    (67108864, 'ginex')
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Union

from sgl._checks import check_bool, check_int, check_real, parse_bytes, with_message
from sgl.errors import ConfigError
from sgl.samplers.neighbor import check_fanouts
from sgl.samplers.outofcore.registry import policy_class

__all__ = ["OutOfCoreSampling", "positive_int"]


def positive_int(value: Any, name: str) -> int:
    """``value`` as an ``int >= 1``: ``"{name} must be a positive integer, got {value!r}"`` otherwise."""
    return with_message(f"{name} must be a positive integer, got {value!r}", check_int, value, minimum=1)


@dataclass
class OutOfCoreSampling:
    """How out-of-core batches are drawn and cached (only ``method`` differs between the policies)."""

    #: the cache policy: ``"lru"``, ``"ginex"`` or ``"outre"``
    method: str = "outre"
    fanouts: List[int] = field(default_factory=lambda: [10, 10])
    memory_budget: Union[str, int] = "256MB"
    #: share of the budget for the static neighbour cache (ginex, outre)
    neighbor_cache_fraction: float = 0.1
    #: OUTRE partitions (None: a group of ``group_size`` partitions holds about two batches)
    num_parts: Optional[int] = None
    #: partitions per group (OUTRE's default 20)
    group_size: int = 20
    #: OUTRE: FENNEL restreaming passes at most (stopping early, as OUTRE's partitioner does, once
    #: ``partition_patience`` passes in a row keep no more edges inside partitions); one streaming
    #: pass over shuffled ids keeps few edges inside, restreaming recovers the communities
    partition_passes: int = 3
    partition_patience: int = 2
    #: historical-embedding staleness bound in iterations (OUTRE's default 100)
    staleness: int = 100
    #: use the historical embedding cache (outre)
    embedding_cache: bool = True
    #: fraction of the feature+embedding share given to embeddings; None = automatic search
    embedding_fraction: Optional[float] = None
    #: OUTRE: share of the profiled first-hop nodes (ranked by embedding benefit) the embedding
    #: cache may hold; 1.0 = every node with a benefit (the split search alone decides)
    embedding_top: float = 1.0
    #: OUTRE: epochs of batches the profiling pass samples (OUTRE profiles one pass; on a graph
    #: with few batches per epoch more passes give steadier access counts)
    profile_epochs: int = 1
    #: OUTRE: load each partition group's CSR (the full neighbour lists of the group's nodes that
    #: the neighbour cache does not hold) when the group starts, and sample from it first; False
    #: reads each neighbour list on demand (the group CSR's bytes count as ``group_csr`` reads)
    group_csr: bool = False
    #: OUTRE: rank the feature cache by access frequency measured in a second profiling pass that
    #: simulates the embedding cache's pruning (False: frequencies of the unpruned pass)
    profile_pruned: bool = True
    #: Ginex superbatch in batches (0 = one epoch)
    superbatch: int = 0
    #: restart the caches as the official codes do: Ginex rebuilds its feature cache for every
    #: superbatch and fills it from storage with the superbatch's first distinct ids
    #: (run_ginex.py ``switch``/``fill_cache``); OUTRE empties its static feature cache and its
    #: embedding cache every epoch (run_main.py re-creates both). False keeps cached rows and
    #: embeddings across superbatches and epochs (warmer than either official code)
    reset_caches: bool = False
    #: OUTRE's feature cache: ``"static"`` (OUTRE's: the rows the profiling pass read most, filled
    #: on first miss) or ``"belady"`` (Ginex's policy over pre-sampled superbatches, the embedding
    #: cache's pruning planned ahead; batches, samples and training are identical to ``"static"``,
    #: only the feature reads differ). LRU and Ginex-like always use their own policy.
    feature_cache: str = "static"

    def __post_init__(self) -> None:
        policy = policy_class(self.method)
        self.fanouts = check_fanouts(self.fanouts)
        for name in ("group_size", "staleness", "profile_epochs", "partition_passes", "partition_patience"):
            setattr(self, name, positive_int(getattr(self, name), name))
        for name in ("embedding_cache", "group_csr", "profile_pruned", "reset_caches"):
            value = getattr(self, name)
            with_message(f"{name} must be true or false, got {value!r}", check_bool, value)
        self.budget_bytes = parse_bytes(self.memory_budget, "a memory budget")
        fraction = self.neighbor_cache_fraction
        with_message(f"neighbor_cache_fraction must be in [0, 1), got {fraction}", check_real, fraction,
                     0.0, 1.0, open_high=True)
        if self.embedding_fraction is not None:
            with_message(f"embedding_fraction must be in [0, 1] or None, got {self.embedding_fraction}",
                          check_real, self.embedding_fraction, 0.0, 1.0)
        with_message(f"embedding_top must be in (0, 1], got {self.embedding_top}", check_real, self.embedding_top,
                     0.0, 1.0, open_low=True)
        self.superbatch = with_message(f"superbatch must be >= 0 batches, got {self.superbatch}", check_int,
                                       self.superbatch, minimum=0)
        if self.feature_cache not in ("static", "belady"):
            raise ConfigError(f"feature_cache must be 'static' or 'belady', got {self.feature_cache!r}")
        policy.validate(self)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
