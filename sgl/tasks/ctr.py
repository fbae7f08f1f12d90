"""CTR training: mini-batch BCE training of a CTR model, AUC and log-loss.

:func:`train_ctr` trains one model (Adam, shuffled mini-batches, model selection on the
validation AUC) and evaluates the best epoch on the test split. Between ``backward()`` and
``optimizer.step()`` it calls the embedding backend's ``after_backward(optimizer)``, where
CAFE/CAFE+ feed gradient norms to their sketch and migrate newly hot features. A model over
HET / HET-GMP workers (``--ctr-embedding het|hetgmp``) is trained in their lock-step schedule
by :func:`sgl.tasks.ctr_workers.train_ctr_workers` (``run_ctr(..., trainer=train_ctr_workers)``),
simulated in one process or one worker per process (``sgl train --procs N``).

Command line::

    sgl train --task ctr --model deepfm --dataset synthetic-ctr --ctr-embedding cafe --ctr-compression 100
    sgl train --task ctr --model dcn --dataset criteo --root ../shared/datasets/criteo_het_sampled --seeds 3
    sgl train --task ctr --ctr-embedding het --ctr-embedding-option workers=2 --ctr-embedding-option bound=10
    sgl train --task ctr --ctr-embedding het --procs 2          # the same two workers as two processes

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

import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.tasks.config import TrainConfig

__all__ = ["roc_auc", "log_loss", "CTRTrainConfig", "train_ctr", "evaluate_ctr", "run_ctr", "mapped_batches",
           "CTR_TRAIN_DEFAULTS"]


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


#: CTR training defaults (fields of :class:`~sgl.tasks.TrainConfig`): Adam at 1e-3, 3 epochs of 1024 rows
CTR_TRAIN_DEFAULTS: Dict[str, Any] = {"lr": 1e-3, "weight_decay": 0.0, "epochs": 3, "batch_size": 1024}


class CTRTrainConfig:
    """Optimisation settings for CTR models: a :class:`~sgl.tasks.TrainConfig` (with
    :data:`CTR_TRAIN_DEFAULTS`) plus ``block_rows``, the rows read at once from a memory-mapped store.

    Either pass ``train=TrainConfig(...)`` or its fields as keywords; the fields read through:

    >>> cfg = CTRTrainConfig(epochs=2, lr=0.01)
    >>> cfg.epochs, cfg.batch_size, cfg.train.lr, cfg.block_rows == 1 << 18
    (2, 1024, 0.01, True)
    """

    def __init__(self, train: Optional[TrainConfig] = None, block_rows: int = 1 << 18, **train_fields: Any) -> None:
        if train is not None and train_fields:
            raise ConfigError(f"pass train=TrainConfig(...) or its fields {sorted(train_fields)}, not both")
        self.train = train if train is not None else TrainConfig(**{**CTR_TRAIN_DEFAULTS, **train_fields})
        self.block_rows = block_rows
        for name in ("epochs", "batch_size", "eval_batch_size", "block_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")

    def __getattr__(self, name: str) -> Any:
        if name != "train" and "train" in self.__dict__ and name in TrainConfig.__dataclass_fields__:
            return getattr(self.__dict__["train"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CTRTrainConfig) and (self.train, self.block_rows) == (other.train, other.block_rows)

    def __repr__(self) -> str:
        return f"CTRTrainConfig(train={self.train!r}, block_rows={self.block_rows})"

    def to_dict(self) -> Dict[str, Any]:
        return {**self.train.to_dict(), "block_rows": self.block_rows}


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
        perm = torch.randperm(len(labels), generator=generator).cpu().numpy()
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
    probs = torch.cat(probs).cpu().numpy() if probs else np.zeros(0)
    labels = np.asarray(data.labels)
    return {"auc": roc_auc(probs, labels), "logloss": log_loss(probs, labels)}


def train_ctr(model: torch.nn.Module, train: Any, val: Any, test: Any, config: Optional[CTRTrainConfig] = None,
              seed: int = 0) -> Dict[str, Any]:
    """Train ``model`` on ``train``; keep the epoch with the best validation AUC; test it.

    Returns ``val_auc, val_logloss, test_auc, test_logloss, best_epoch, train_time_s,
    embedding_bytes`` (a model over HET / HET-GMP workers trains with
    :func:`~sgl.tasks.ctr_workers.train_ctr_workers` instead).
    """
    from tqdm.auto import tqdm

    from sgl.device import get_device

    config = config or CTRTrainConfig()
    if hasattr(getattr(model, "embedding", None), "worker_ids"):  # HET / HET-GMP workers (duck-typed: no cycle)
        raise ConfigError("this model's embedding is HET / HET-GMP workers: train it with "
                          "sgl.tasks.ctr_workers.train_ctr_workers (run_ctr(..., trainer=train_ctr_workers))")
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
            seeds: Sequence[int] = (0,), config: Optional[CTRTrainConfig] = None,
            trainer: Optional[Callable[..., Dict[str, Any]]] = None) -> Dict[str, Any]:
    """One fresh model per seed (``model_factory(seed)``, built after seeding); mean ± std of each metric.

    ``trainer`` (default :func:`train_ctr`) trains one model: ``trainer(model, train, val, test, config,
    seed)``; HET / HET-GMP workers take :func:`sgl.tasks.ctr_workers.train_ctr_workers`."""
    from sgl.tasks.stats import seed_everything, summarize

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("need at least one seed")
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        seed_everything(seed)
        runs.append({"seed": seed, **(trainer or train_ctr)(model_factory(seed), train, val, test, config, seed)})
    record: Dict[str, Any] = {"runs": runs}
    for key in ("test_auc", "test_logloss", "val_auc", "val_logloss", "train_time_s", "traffic_bytes", "push_bytes"):
        if key in runs[0]:
            record[key] = summarize([r[key] for r in runs])
    record["embedding_bytes"] = runs[0]["embedding_bytes"]
    if "workers" in runs[0]:
        record["workers"] = runs[0]["workers"]
    return record
