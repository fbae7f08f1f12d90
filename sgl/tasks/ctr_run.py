"""The CTR path of a :class:`~sgl.tasks.RunConfig` (``sgl train --task ctr``): in one process, or as one
rank of ``--procs N`` (HET / HET-GMP workers over :mod:`sgl.comm`).

:func:`run_ctr_config` loads the CTR data, splits it, builds one model per seed over the
configured embedding backend and trains it (:func:`sgl.tasks.ctr.run_ctr`; HET and HET-GMP
workers with :func:`sgl.tasks.ctr_workers.train_ctr_workers`). :func:`run_ctr_rank` is what every
rank runs under ``procs > 1`` (registered in :data:`sgl.tasks.dist_config.DISTRIBUTED_TASKS`):
the same path, in a world where the embedding builds this rank's worker.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict

from sgl.errors import ConfigError

__all__ = ["run_ctr_config", "run_ctr_rank"]


def run_ctr_config(config: Any, log: Callable[[str], None]) -> Dict[str, Any]:
    """Train ``config`` (task ``ctr``) over its seeds; the run record."""
    import sgl.datasets
    from sgl.embeddings import PROTOCOL_EMBEDDINGS, build_embedding
    from sgl.models.ctr import build_ctr_model, ctr_model_config
    from sgl.tasks.ctr import CTRTrainConfig, run_ctr
    from sgl.tasks.ctr_workers import train_ctr_workers
    from sgl.tasks.run_parts import record

    task = sgl.datasets.dataset_task(config.dataset)
    if task is not None and task != "ctr":
        ctr_names = sorted(name.lower() for name, _, t in sgl.datasets.list_datasets() if t == "ctr")
        raise ConfigError(f"dataset {config.dataset!r} is a {task} dataset; --task ctr needs one of "
                          f"{', '.join(ctr_names)}")
    data = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    if not all(hasattr(data, a) for a in ("global_ids", "field_dims", "split")):  # duck-typed: CTRData
        raise ConfigError(f"dataset {config.dataset!r} did not load as CTR data")
    model_cfg = ctr_model_config(**config.model_config)
    ctr = config.ctr
    train, val, test = data.split(tuple(ctr.split), seed=0)
    log(f"dataset: {config.dataset} ({len(data):,} rows, {data.num_fields} fields, {data.num_dense} dense, "
        f"{data.num_embeddings:,} ids, CTR {data.labels.mean():.3f}, split {len(train)}/{len(val)}/{len(test)})")
    workers = ctr.embedding in PROTOCOL_EMBEDDINGS

    def factory(seed: int) -> Any:
        options = dict(ctr.embedding_options)
        if ctr.embedding in ("hash", "cafe", "cafe+", *PROTOCOL_EMBEDDINGS):
            options.setdefault("seed", seed)
        if ctr.embedding == "hetgmp":  # HET-GMP partitions the training rows over its workers
            options.update(train_ids=train.global_ids(), batch_size=config.train.batch_size)
        if ctr.embedding == "hash-field" or options.get("cold") == "field":
            options.setdefault("field_dims", list(data.field_dims))   # per-field layouts need the field sizes
        embedding = build_embedding(ctr.embedding, data.num_embeddings, ctr.embed_dim, ratio=ctr.compression,
                                    **options)
        return build_ctr_model(config.model, embedding, data.num_fields, ctr.embed_dim, data.num_dense, model_cfg)

    log(f"model: {config.model} over {factory(0).embedding!r}")
    results = run_ctr(factory, train, val, test, config.seeds, CTRTrainConfig(train=config.train,
                                                                              block_rows=ctr.block_rows),
                      trainer=train_ctr_workers if workers else None)
    return record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, data)


def run_ctr_rank(config: Any, log: Callable[[str], None], progress: bool) -> Dict[str, Any]:
    """One process of ``sgl train --task ctr --ctr-embedding het|hetgmp --procs N`` (every rank runs it).

    :func:`sgl.tasks.dist_run.run_distributed` spawns the processes (or joins torchrun's) and
    initialises :mod:`sgl.comm`; the embedding sees the world and builds this rank's worker over
    :class:`~sgl.embeddings.het.DistTransport`, and every rank returns the same record.
    """
    return run_ctr_config(config, log)
