"""Mini-batch (sampled) GNN training through the node-classification :class:`Trainer`.

:class:`MinibatchTrainer` is the same :class:`~sgl.tasks.Trainer` (same early stopping on
validation accuracy, same metrics and result record) with two steps replaced: an epoch
iterates a :class:`~sgl.samplers.NodeLoader` over the training nodes, and prediction runs
the model on sampled computation graphs of the nodes to score (all neighbours by default,
so evaluation is exact).

Example:
    >>> import sgl
    >>> from sgl.samplers import SampledGNN
    >>> from sgl.tasks import TrainConfig
    >>> from sgl.tasks.minibatch import MinibatchTrainer, SamplerConfig
    >>> g = sgl.datasets.load("karate")
    >>> model = SampledGNN(g.num_features, g.num_classes, hidden=8)
    >>> trainer = MinibatchTrainer(TrainConfig(lr=0.01, epochs=3, batch_size=4, progress=False),
    ...                            SamplerConfig(fanouts=[5, 5]))
    >>> result = trainer.fit(model, model.precompute(g), g)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from numbers import Integral
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.models.features import NodeFeatures
from sgl.samplers.loader import NodeLoader
from sgl.samplers.neighbor import NeighborSampler, check_fanouts
from sgl.samplers.subgraph import ClusterGCNSampler, GraphSAINTSampler, SubgraphLoader
from sgl.tasks.config import TrainConfig
from sgl.tasks.node_classification import Trainer
from sgl.tasks.stats import peak_rss_mb, seed_everything, summarize

__all__ = ["SamplerConfig", "MinibatchTrainer", "run_minibatch_node_classification"]

SAMPLERS = ("neighbor", "saint-node", "saint-edge", "saint-rw", "cluster")


@dataclass
class SamplerConfig:
    """How mini-batches are sampled.

    ``fanouts``: neighbours per hop, hop next to the seeds first (``"neighbor"``; for the
    subgraph samplers only its length, the number of layers, matters). ``eval_fanouts``: the
    same for validation/test (``None`` = every neighbour, exact inference).

    GraphSAINT (``saint-node`` / ``saint-edge`` / ``saint-rw``): ``saint_budget`` node draws,
    edge draws or walk roots per subgraph (default: the trainer's ``batch_size``),
    ``walk_length``, ``norm_samples`` pre-sampled subgraphs for the normalisation.
    Cluster-GCN (``cluster``): ``num_parts`` METIS clusters, ``clusters_per_batch``.
    """

    sampler: str = "neighbor"
    fanouts: List[int] = field(default_factory=lambda: [15, 10])
    replace: bool = False
    eval_fanouts: Optional[List[int]] = None
    num_workers: int = 0
    saint_budget: Optional[int] = None
    walk_length: int = 2
    norm_samples: int = 50
    num_parts: int = 32
    clusters_per_batch: int = 4

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        self.fanouts = check_fanouts(self.fanouts)
        if self.eval_fanouts is not None:
            self.eval_fanouts = check_fanouts(self.eval_fanouts)
            if len(self.eval_fanouts) != len(self.fanouts):
                raise ConfigError(f"eval_fanouts {self.eval_fanouts} must have as many hops as fanouts {self.fanouts}")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, Integral) or self.num_workers < 0:
            raise ConfigError(f"num_workers must be an integer >= 0, got {self.num_workers!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class MinibatchTrainer(Trainer):
    """A :class:`~sgl.tasks.Trainer` whose epochs iterate sampled mini-batches.

    Args:
        config: optimisation settings; ``batch_size`` is the number of seed nodes per batch.
        sampler_config: which sampler and fan-outs.
    """

    def __init__(self, config: Optional[TrainConfig] = None, sampler_config: Optional[SamplerConfig] = None) -> None:
        super().__init__(config)
        self.sampler_config = sampler_config or SamplerConfig()
        self._graph = None
        self._loader: Optional[NodeLoader] = None

    def fit(self, model: torch.nn.Module, features: Any, graph: Any, seed: int = 0, distillation: Any = None):
        if distillation is not None:
            raise ConfigError("RLU distillation is not supported with sampled mini-batch training")
        num_layers = getattr(model, "num_layers", len(self.sampler_config.fanouts))
        if num_layers != len(self.sampler_config.fanouts):
            raise ConfigError(f"the model has {num_layers} layers but fanouts {self.sampler_config.fanouts} "
                              f"sample {len(self.sampler_config.fanouts)} hops; give one fan-out per layer")
        sc = self.sampler_config
        self._graph = graph
        train = graph.train_mask.nonzero().flatten() if graph.train_mask is not None else torch.arange(0)
        batch_size = self.config.batch_size or max(1, train.numel())
        if sc.sampler == "neighbor":
            sampler = NeighborSampler(graph, sc.fanouts, replace=sc.replace)
            self._loader = NodeLoader(sampler, train if train.numel() else torch.arange(graph.num_nodes),
                                      batch_size=batch_size, shuffle=True, num_workers=sc.num_workers, seed=seed)
        elif sc.sampler == "cluster":
            self._loader = SubgraphLoader(ClusterGCNSampler(graph, sc.num_parts, sc.clusters_per_batch, seed=0),
                                          num_layers=len(sc.fanouts), seed=seed)
        else:
            saint = GraphSAINTSampler(graph, sc.sampler.split("-")[1], budget=sc.saint_budget or batch_size,
                                      walk_length=sc.walk_length, num_norm_samples=sc.norm_samples, seed=0)
            self._loader = SubgraphLoader(saint, num_layers=len(sc.fanouts), seed=seed)
        self._train_mask = torch.zeros(graph.num_nodes, dtype=torch.bool)
        self._train_mask[train] = True
        max_degree = int((graph.indptr[1:] - graph.indptr[:-1]).max()) if graph.num_edges else 1
        self._eval_sampler = NeighborSampler(graph, sc.eval_fanouts or [max(1, max_degree)] * len(sc.fanouts))
        try:
            return super().fit(model, features, graph, seed=seed)
        finally:
            self._graph = self._loader = None

    @staticmethod
    def _x(features: Any) -> torch.Tensor:
        return features.data if isinstance(features, NodeFeatures) else features

    def _train_epoch(self, model, features, train, y, optimizer, batch, generator, device, full_batch,
                     distillation) -> float:
        model.train()
        x = self._x(features)
        total, steps = 0.0, 0
        num_nodes, num_train = self._train_mask.numel(), max(1, int(self._train_mask.sum()))
        for mb in self._loader:
            rows = self._train_mask[mb.output_nodes]
            if not bool(rows.any()):
                continue
            optimizer.zero_grad()
            out = model(x[mb.n_id].to(device), [b.to(device) for b in mb.blocks])
            target = y[mb.output_nodes[rows]].to(device)
            if mb.node_norm is None:
                loss = F.cross_entropy(out[rows.to(device)], target)
            else:
                # GraphSAINT: sum_v norm_v * loss_v estimates the mean over all nodes of
                # loss_v * [v in train]; rescaled to the mean over training nodes
                per_node = F.cross_entropy(out[rows.to(device)], target, reduction="none")
                loss = (mb.node_norm[rows].to(device) * per_node).sum() * (num_nodes / num_train)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            steps += 1
        return total / max(1, steps)

    @torch.no_grad()
    def _predict(self, model: torch.nn.Module, features: Any, index: torch.Tensor,
                 device: torch.device) -> torch.Tensor:
        model.eval()
        x = self._x(features)
        chunks = []
        size = self.config.eval_batch_size
        for i in range(0, index.numel(), size):
            mb = self._eval_sampler.sample(index[i:i + size], seed=0)
            chunks.append(model(x[mb.n_id].to(device), [b.to(device) for b in mb.blocks]).cpu())
        return torch.cat(chunks)

    def predict_all(self, model, features, graph, device) -> torch.Tensor:
        return self._predict(model, features, torch.arange(graph.num_nodes), device)


def run_minibatch_node_classification(model_factory: Callable[[], torch.nn.Module], graph: Any,
                                      seeds: Sequence[int] = (0,), train_config: Optional[TrainConfig] = None,
                                      sampler_config: Optional[SamplerConfig] = None) -> Dict[str, Any]:
    """:func:`~sgl.tasks.run_node_classification` for sampled mini-batch training."""
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    trainer = MinibatchTrainer(train_config, sampler_config)
    start = time.perf_counter()
    features = model_factory().precompute(graph)
    precompute_time = time.perf_counter() - start
    runs = []
    for seed in seeds:
        seed_everything(seed)
        runs.append(trainer.fit(model_factory(), features, graph, seed=seed))
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs, "precompute_time_s": precompute_time,
                              "train_time_s": sum(r["train_time_s"] for r in runs), "peak_rss_mb": peak_rss_mb(),
                              "sampler": trainer.sampler_config.to_dict()}
    for key in ("train_acc", "val_acc", "test_acc", "test_macro_f1"):
        record[key] = summarize([r[key] for r in runs])
    return record
