"""Out-of-core node classification from a disk store: the :class:`~sgl.tasks.RunConfig` path of
``sgl train --sampler lru|ginex|outre``.

``--sampler lru|ginex|outre --dataset store:DIR --memory-budget 256MB``: one
:class:`OutOfCoreTrainer` per seed over the store, every cache within the byte budget.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict

import numpy as np

from sgl.errors import ConfigError
from sgl.tasks.stats import summarize

__all__ = ["run_out_of_core", "out_of_core_train_defaults"]

#: training fields out-of-core training reads (the rest of TrainConfig must stay at its defaults)
_TRAIN_FIELDS = ("lr", "weight_decay", "epochs", "batch_size")


def out_of_core_train_defaults() -> Dict[str, Any]:
    from sgl.samplers.outofcore import OutOfCoreConfig

    return {name: OutOfCoreConfig.__dataclass_fields__[name].default for name in _TRAIN_FIELDS}


def run_out_of_core(config: Any, log: Callable[[str], None], progress: bool) -> Dict[str, Any]:
    from sgl.samplers.outofcore import OutOfCoreConfig, OutOfCoreTrainer
    from sgl.samplers.store import open_store

    s = config.sampler
    dataset = str(config.dataset)
    if not dataset.startswith("store:"):
        raise ConfigError(f"--sampler {s.name} trains out of core from a disk store: pass --dataset store:DIR "
                          f"(build DIR with `sgl preprocess --dataset {dataset} --out DIR`)")
    if config.model not in ("sage", "gcn"):
        raise ConfigError(f"out-of-core training runs the models sage or gcn, got --model {config.model!r}")
    options = dict(config.model_config)
    # every OutOfCoreConfig field that no other flag sets rides on --model-option (e.g. staleness=40 group_csr=true)
    set_by_flags = {"method", "fanouts", "memory_budget", "conv", "seed", "lr", "weight_decay", "epochs", "batch_size"}
    option_keys = set(OutOfCoreConfig.__dataclass_fields__) - set_by_flags
    unknown = set(options) - option_keys
    if unknown:
        raise ConfigError(f"unknown model option(s) {sorted(unknown)} for out-of-core training; valid: "
                          f"{', '.join(sorted(option_keys))}")
    train = config.train
    for name in ("patience", "device"):
        if getattr(train, name) is not None:
            raise ConfigError(f"--{name} does not apply to out-of-core training (it runs every epoch on the CPU)")
    store_path = dataset[len("store:"):]
    records = []
    for seed in config.seeds:
        cfg = OutOfCoreConfig(method=s.name, fanouts=s.fanouts or [10, 10], memory_budget=s.memory_budget,
                              conv=config.model, seed=seed, **options, lr=train.lr, weight_decay=train.weight_decay,
                              epochs=train.epochs, batch_size=train.batch_size)
        trainer = OutOfCoreTrainer(open_store(store_path, verify="size" if records else "checksum"), cfg)
        if not records:
            log(f"store: {store_path} ({trainer.store.num_nodes:,} nodes, {trainer.store.num_edges:,} edges, "
                f"{trainer.store.num_features} features); method {cfg.method}, budget {cfg.budget_bytes:,} bytes, "
                f"fan-outs {cfg.fanouts}, batch {cfg.batch_size}")
        records.append(trainer.fit(progress=progress))
    summary = {"test_acc": summarize([r["test_acc"] for r in records])}
    for key in ("bytes_per_epoch", "requests_per_epoch", "epoch_time_s"):
        summary[f"mean_{key}"] = float(np.mean([r[key] for r in records]))
    summary["peak_budget_bytes"] = max(r["peak_budget_bytes"] for r in records)
    summary["budget_bytes"] = records[0]["budget_bytes"]
    resolved = dataclasses.replace(config, sampler=dataclasses.replace(s, fanouts=list(cfg.fanouts)))
    return {"config": resolved.to_dict(), "runs": records, **summary}
