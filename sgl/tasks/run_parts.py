"""Parts every run path shares: the run record, the node-classification dataset check and the
sampled-training settings (used by :func:`sgl.tasks.run` and :mod:`sgl.tasks.dist_run`).

    >>> import sgl
    >>> describe(sgl.datasets.load("karate"))
    '34 nodes, 156 edges, 34 features, 2 classes, split 8/10/16'
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

from sgl.errors import ConfigError
from sgl.tasks.provenance import run_provenance
from sgl.tasks.run_config import RunConfig, SamplingConfig

__all__ = ["record", "check_node_dataset", "describe", "sampled_setup"]


def record(config: RunConfig, results: Dict[str, Any], data: Any) -> Dict[str, Any]:
    """``{"config": ..., **results}`` with the provenance of ``data`` (versions, dataset hash)."""
    from sgl.data import HeteroGraph

    hetero = isinstance(data, HeteroGraph)  # heterogeneous graphs hash themselves (all types and relations)
    return {"config": config.to_dict(), **results,
            **(run_provenance(data_hash=data.content_hash) if hetero else run_provenance(data))}


def check_node_dataset(name: str) -> None:
    """ConfigError when dataset ``name`` belongs to another task (graph classification, CTR)."""
    import sgl.datasets

    task = sgl.datasets.dataset_task(name) or "node"
    if str(name).lower().startswith("tu:"):
        task = "graph"
    if task != "node":
        kind = {"graph": "graph-classification", "ctr": "CTR (click-through-rate)"}.get(task, task)
        raise ConfigError(f"dataset {name!r} is a {kind} dataset; `sgl train` runs node "
                          f"classification unless you pass --task {task}")


def describe(graph: Any) -> str:
    """One line on a graph: nodes, edges, features, classes, split sizes."""
    return (f"{graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {graph.num_features} features, "
            f"{graph.num_classes} classes, split {'/'.join(map(str, graph.split_sizes()))}")


def sampled_setup(config: RunConfig) -> Any:
    """``(SamplerConfig, model options, resolved config)`` of sampled node classification."""
    from sgl.tasks.minibatch import SamplerConfig

    if config.model not in ("sage", "gcn"):
        raise ConfigError(f"--sampler trains the models sage or gcn, got --model {config.model!r}")
    s = config.sampler
    try:
        sampler_cfg = SamplerConfig(sampler=s.name, fanouts=s.fanouts or [15, 10], **s.options)
    except TypeError as exc:
        raise ConfigError(f"bad sampler option: {exc}") from None
    options = dict(config.model_config)
    options.setdefault("num_layers", len(sampler_cfg.fanouts))
    unknown = set(options) - {"hidden", "num_layers", "dropout", "normalize_features"}
    if unknown:
        raise ConfigError(f"unknown model option(s) {sorted(unknown)} for sampled {config.model}; "
                          f"valid: hidden, num_layers, dropout, normalize_features")
    extra = {k: v for k, v in sampler_cfg.to_dict().items() if k not in ("sampler", "fanouts")}
    resolved = dataclasses.replace(config, model_config=options,
                                   sampler=SamplingConfig(s.name, list(sampler_cfg.fanouts), options=extra))
    return sampler_cfg, options, resolved
