"""CTR training: mini-batch BCE training of a CTR model, AUC and log-loss, the ``sgl train --task ctr`` CLI.

:func:`train_ctr` trains one model (Adam, shuffled mini-batches, model selection on the
validation AUC) and evaluates the best epoch on the test split. Between ``backward()`` and
``optimizer.step()`` it calls the embedding backend's ``after_backward(optimizer)``, where
CAFE/CAFE+ feed gradient norms to their sketch and migrate newly hot features.

Command line::

    sgl train --task ctr --model deepfm --dataset synthetic-ctr --ctr-embedding cafe --ctr-compression 100
    sgl train --task ctr --model dcn --dataset criteo --root ../shared/datasets/criteo_het_sampled --seeds 3

Example:
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> from sgl.embeddings import build_embedding
    >>> from sgl.models.ctr import build_ctr_model
    >>> train, val, test = make_synthetic_ctr(3000, [200, 50], num_dense=2, seed=0).split()
    >>> model = build_ctr_model("wdl", build_embedding("hash", 250, 8, ratio=2), 2, 8, 2, hidden=[16])
    >>> result = train_ctr(model, train, val, test, CTRTrainConfig(epochs=10, lr=0.01, progress=False))
    >>> 0.6 < result["test_auc"] <= 1.0   # the planted logistic model is learnable
    True
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.options import key_values, read_config

__all__ = ["roc_auc", "log_loss", "CTRTrainConfig", "train_ctr", "evaluate_ctr", "run_ctr", "mapped_batches",
           "add_train_arguments", "cli_train"]


def roc_auc(scores: Any, labels: Any) -> float:
    """Area under the ROC curve (ties count half), from ranks; NaN when one class is absent.

    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1).astype(bool)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_loss(probs: Any, labels: Any, eps: float = 1e-7) -> float:
    """Mean binary cross-entropy of probabilities (clipped to ``[eps, 1-eps]``).

    >>> round(log_loss([0.9, 0.2], [1, 0]), 4)
    0.1643
    """
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), eps, 1 - eps)
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    if p.size == 0:
        return float("nan")
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


@dataclass
class CTRTrainConfig:
    """Optimisation settings for CTR models (Adam on every parameter)."""

    lr: float = 1e-3
    weight_decay: float = 0.0
    epochs: int = 3
    batch_size: int = 1024
    eval_batch_size: int = 65536
    patience: Optional[int] = None
    device: Optional[str] = None
    progress: bool = True
    block_rows: int = 1 << 18

    def __post_init__(self) -> None:
        if not self.lr > 0 or self.weight_decay < 0:
            raise ConfigError(f"need lr > 0 and weight_decay >= 0, got lr={self.lr}, weight_decay={self.weight_decay}")
        for name in ("epochs", "batch_size", "eval_batch_size", "block_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.patience is not None and (not isinstance(self.patience, int) or self.patience < 1):
            raise ConfigError(f"patience must be a positive integer or None, got {self.patience!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _tensors(data: Any, device: torch.device):
    return (torch.from_numpy(data.dense).to(device), torch.from_numpy(data.global_ids()).to(device),
            torch.from_numpy(data.labels).to(device))


def _mapped(data: Any) -> bool:
    return bool(getattr(data, "is_mapped", False))


def _to_device(arrays: Any, device: torch.device):
    return tuple(torch.from_numpy(a).to(device) for a in arrays)


def _block_size(batch_size: int, block_rows: int) -> int:
    """``block_rows`` rounded up to whole batches."""
    return max(1, math.ceil(block_rows / batch_size)) * batch_size


def mapped_batches(data: Any, batch_size: int, block_rows: int, generator: torch.Generator):
    """Row batches of a memory-mapped :class:`~sgl.datasets.ctr.CTRData`, block-shuffled.

    Each epoch visits the blocks of about ``block_rows`` consecutive rows (rounded up to whole
    batches) in a random order, reads one block sequentially and shuffles its rows; so every
    row is used once per epoch and memory holds one block. (A store's rows are already in a
    random order on disk, so blocks are random samples too.) Yields ``(dense, ids, labels)``
    numpy arrays.
    """
    n = len(data)
    block = _block_size(batch_size, block_rows)
    for b in torch.randperm(math.ceil(n / block), generator=generator).tolist():
        dense, ids, labels = data.batch(slice(b * block, min(n, (b + 1) * block)))
        perm = torch.randperm(len(labels), generator=generator).numpy()
        for i in range(0, len(perm), batch_size):
            rows = perm[i:i + batch_size]
            yield dense[rows], ids[rows], labels[rows]


@torch.no_grad()
def evaluate_ctr(model: torch.nn.Module, data: Any, batch_size: int = 65536,
                 device: Optional[torch.device] = None) -> Dict[str, float]:
    """``{"auc", "logloss"}`` of ``model`` on a :class:`~sgl.datasets.ctr.CTRData`
    (a memory-mapped one is read ``batch_size`` rows at a time)."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    if _mapped(data):
        probs = [torch.sigmoid(model(*_to_device(data.batch(slice(i, i + batch_size))[:2], device))).cpu()
                 for i in range(0, len(data), batch_size)]
    else:
        dense, ids, labels = _tensors(data, device)
        probs = [torch.sigmoid(model(dense[i:i + batch_size], ids[i:i + batch_size])).cpu()
                 for i in range(0, len(data), batch_size)]
    model.train(was_training)
    probs = torch.cat(probs).numpy() if probs else np.zeros(0)
    labels = np.asarray(data.labels)
    return {"auc": roc_auc(probs, labels), "logloss": log_loss(probs, labels)}


def train_ctr(model: torch.nn.Module, train: Any, val: Any, test: Any, config: Optional[CTRTrainConfig] = None,
              seed: int = 0) -> Dict[str, Any]:
    """Train ``model`` on ``train``; keep the epoch with the best validation AUC; test it.

    Returns ``val_auc, val_logloss, test_auc, test_logloss, best_epoch, train_time_s,
    embedding_bytes``.
    """
    from tqdm.auto import tqdm

    from sgl.device import get_device

    config = config or CTRTrainConfig()
    if len(train) == 0:
        raise ConfigError("the training split is empty")
    device = get_device(config.device)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    mapped = _mapped(train)
    if not mapped:
        dense, ids, labels = _tensors(train, device)
    generator = torch.Generator().manual_seed(seed)
    embedding = getattr(model, "embedding", None)
    hook = getattr(embedding, "after_backward", None)
    best: Dict[str, Any] = {}
    best_score = -math.inf
    best_state = None
    best_sketch = None
    stale = 0
    start = time.perf_counter()
    for epoch in range(config.epochs):
        model.train()
        if mapped:
            batches = (_to_device(arrays, device) for arrays in
                       mapped_batches(train, config.batch_size, config.block_rows, generator))
            total = _mapped_batch_count(len(train), config.batch_size, config.block_rows)
        else:
            order = torch.randperm(len(train), generator=generator).to(device)
            batches = ((dense[rows], ids[rows], labels[rows]) for rows in
                       (order[i:i + config.batch_size] for i in range(0, len(train), config.batch_size)))
            total = math.ceil(len(train) / config.batch_size)
        for x_dense, x_ids, y in tqdm(batches, total=total, desc=f"epoch {epoch + 1}", leave=False,
                                      disable=None if config.progress else True):
            loss = F.binary_cross_entropy_with_logits(model(x_dense, x_ids), y)
            optimizer.zero_grad()
            loss.backward()
            if hook is not None:
                hook(optimizer)
            optimizer.step()
        metrics = evaluate_ctr(model, val, config.eval_batch_size, device) if len(val) else \
            {"auc": float("nan"), "logloss": float("nan")}
        score = metrics["auc"] if not math.isnan(metrics["auc"]) else -metrics["logloss"]
        if best_state is None or score > best_score:
            best_score = score
            best = {"val_auc": metrics["auc"], "val_logloss": metrics["logloss"], "best_epoch": epoch + 1}
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best_sketch = _sketch_state(embedding)
            stale = 0
        else:
            stale += 1
            if config.patience is not None and stale >= config.patience:
                break
    train_time = time.perf_counter() - start
    model.load_state_dict(best_state)
    _restore_sketch(embedding, best_sketch)
    test_metrics = evaluate_ctr(model, test, config.eval_batch_size, device)
    bytes_ = embedding.memory_bytes() if hasattr(embedding, "memory_bytes") else None
    return {**best, "test_auc": test_metrics["auc"], "test_logloss": test_metrics["logloss"],
            "train_time_s": train_time, "embedding_bytes": bytes_}


def _mapped_batch_count(n: int, batch_size: int, block_rows: int) -> int:
    block = _block_size(batch_size, block_rows)
    full, rest = divmod(n, block)
    return full * (block // batch_size) + math.ceil(rest / batch_size)


def _sketch_state(embedding: Any) -> Any:
    """A copy of a sketch's arrays (the hot-id assignment is part of a CAFE model's state)."""
    sketch = getattr(embedding, "sketch", None)
    if sketch is None:
        return None
    import copy

    return copy.deepcopy(sketch)


def _restore_sketch(embedding: Any, sketch: Any) -> None:
    if sketch is not None:
        embedding.sketch = sketch


def run_ctr(model_factory: Callable[[int], torch.nn.Module], train: Any, val: Any, test: Any,
            seeds: Sequence[int] = (0,), config: Optional[CTRTrainConfig] = None) -> Dict[str, Any]:
    """One fresh model per seed (``model_factory(seed)``, built after seeding); mean ± std of each metric."""
    from sgl.tasks.node_classification import seed_everything, summarize

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("need at least one seed")
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        seed_everything(seed)
        runs.append({"seed": seed, **train_ctr(model_factory(seed), train, val, test, config, seed)})
    record: Dict[str, Any] = {"runs": runs}
    for key in ("test_auc", "test_logloss", "val_auc", "val_logloss", "train_time_s"):
        record[key] = summarize([r[key] for r in runs])
    record["embedding_bytes"] = runs[0]["embedding_bytes"]
    return record


# --------------------------------------------------------------------------- command line


def add_train_arguments(group: argparse._ArgumentGroup) -> None:
    """Flags only ``--task ctr`` reads (the shared ones — --model, --dataset, --lr... — exist already)."""
    group.add_argument("--ctr-embedding", help="embedding backend: full (default), hash, qr, cafe, cafe+")
    group.add_argument("--ctr-compression", type=float, help="compression ratio of the backend (default 1; e.g. 100)")
    group.add_argument("--ctr-embed-dim", type=int, help="embedding width (default 16)")
    group.add_argument("--ctr-embedding-option", action="append", metavar="KEY=VALUE",
                       help="embedding backend option, e.g. threshold=50 or hash_rate=0.3")
    group.add_argument("--ctr-split", help="train,val,test fractions (default 0.8,0.1,0.1)")


_DEFAULTS: Dict[str, Any] = {"model": "deepfm", "dataset": "synthetic-ctr", "root": None, "seeds": 3,
                             "embedding": "full", "compression": 1.0, "embed_dim": 16, "embedding_options": {},
                             "model_config": {}, "dataset_options": {}, "train": {}, "split": [0.8, 0.1, 0.1]}


def _config(args: argparse.Namespace) -> Dict[str, Any]:
    config = json.loads(json.dumps(_DEFAULTS))
    if getattr(args, "config", None):
        loaded = read_config(args.config)
        if not isinstance(loaded, dict) or set(loaded) - set(config):
            raise ConfigError(f"config {args.config} must be a mapping with keys from {sorted(config)}")
        config.update(loaded)
    for key in ("model", "dataset", "root", "seeds"):
        if getattr(args, key, None) is not None:
            config[key] = getattr(args, key)
    for key, flag in (("embedding", "ctr_embedding"), ("compression", "ctr_compression"),
                      ("embed_dim", "ctr_embed_dim")):
        if getattr(args, flag, None) is not None:
            config[key] = getattr(args, flag)
    config["embedding_options"].update(key_values(getattr(args, "ctr_embedding_option", None),
                                                   "--ctr-embedding-option"))
    config["model_config"].update(key_values(getattr(args, "model_option", None), "--model-option"))
    if getattr(args, "hidden", None) is not None:
        config["model_config"]["hidden"] = [args.hidden, args.hidden]
    if getattr(args, "dropout", None) is not None:
        config["model_config"]["dropout"] = args.dropout
    config["dataset_options"].update(key_values(getattr(args, "dataset_option", None), "--dataset-option"))
    for key in ("lr", "weight_decay", "epochs", "batch_size", "patience", "device"):
        if getattr(args, key, None) is not None:
            config["train"][key] = getattr(args, key)
    if getattr(args, "ctr_split", None):
        try:
            config["split"] = [float(x) for x in args.ctr_split.split(",")]
        except ValueError as exc:
            raise ConfigError(f"--ctr-split expects three comma-separated fractions, got {args.ctr_split!r}") from exc
    if isinstance(config["seeds"], int):
        if config["seeds"] < 1:
            raise ConfigError(f"--seeds must be at least 1, got {config['seeds']}")
        config["seeds"] = list(range(config["seeds"]))
    return config


def cli_train(args: argparse.Namespace) -> int:
    """``sgl train --task ctr``: load a CTR dataset, split it, train over seeds, print AUC and log-loss."""
    import sgl.datasets
    from sgl.embeddings import build_embedding
    from sgl.fileio import atomic_write
    from sgl.models.ctr import build_ctr_model, ctr_model_config

    config = _config(args)
    task = sgl.datasets.dataset_task(config["dataset"])
    if task is not None and task != "ctr":
        ctr_names = sorted(name.lower() for name, _, t in sgl.datasets.list_datasets() if t == "ctr")
        raise ConfigError(f"dataset {config['dataset']!r} is a {task} dataset; --task ctr needs one of "
                          f"{', '.join(ctr_names)}")
    data = sgl.datasets.load(config["dataset"], root=config["root"], **config["dataset_options"])
    if not all(hasattr(data, a) for a in ("global_ids", "field_dims", "split")):  # duck-typed: CTRData
        raise ConfigError(f"dataset {config['dataset']!r} did not load as CTR data")
    model_cfg = ctr_model_config(**config["model_config"])
    try:
        train_cfg = CTRTrainConfig(**{**config["train"], "progress": not getattr(args, "no_progress", False)})
    except TypeError as exc:
        raise ConfigError(f"bad training option: {exc}") from exc
    train, val, test = data.split(tuple(config["split"]), seed=0)
    print(f"dataset: {config['dataset']} ({len(data):,} rows, {data.num_fields} fields, {data.num_dense} dense, "
          f"{data.num_embeddings:,} ids, CTR {data.labels.mean():.3f}, split {len(train)}/{len(val)}/{len(test)})")

    def factory(seed: int) -> torch.nn.Module:
        options = dict(config["embedding_options"])
        if config["embedding"] in ("hash", "cafe", "cafe+"):
            options.setdefault("seed", seed)
        if config["embedding"] == "hash-field" or options.get("cold") == "field":
            options.setdefault("field_dims", list(data.field_dims))   # per-field layouts need the field sizes
        embedding = build_embedding(config["embedding"], data.num_embeddings, config["embed_dim"],
                                    ratio=config["compression"], **options)
        return build_ctr_model(config["model"], embedding, data.num_fields, config["embed_dim"], data.num_dense,
                               model_cfg)

    print(f"model: {config['model']} over {factory(0).embedding!r}")
    record = run_ctr(factory, train, val, test, config["seeds"], train_cfg)
    n = len(config["seeds"])
    record = {"config": {**config, "model_config": model_cfg.to_dict(),
                         "train": {k: v for k, v in train_cfg.to_dict().items() if k != "progress"}}, **record}

    def fmt(stat: Dict[str, float]) -> str:
        return f"{stat['mean']:.4f} ± {stat['std']:.4f} ({n} seed{'s' if n != 1 else ''})"

    print(f"test AUC: {fmt(record['test_auc'])}")
    print(f"test log-loss: {fmt(record['test_logloss'])}")
    print(f"validation AUC: {fmt(record['val_auc'])}")
    print(f"embedding memory: {record['embedding_bytes']:,} bytes; training {record['train_time_s']['mean']:.2f} s "
          f"per seed")
    if getattr(args, "out", None):
        with atomic_write(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
        print(f"record: {args.out}")
    return 0
