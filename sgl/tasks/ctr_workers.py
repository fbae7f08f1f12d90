"""CTR training over HET / HET-GMP workers (``--ctr-embedding het|hetgmp``): simulated, or one per process.

:func:`train_ctr_workers` trains a CTR model whose embedding is a
:class:`~sgl.embeddings.ProtocolEmbedding`, in the lock-step data-parallel schedule of HET's and
HET-GMP's workers. It runs the same schedule whether the ``W`` workers are simulated in one
process or are ``W`` processes over :mod:`sgl.comm` (``sgl train --procs W``), so both give the
same AUC for the same seed (``tests/tasks/test_ctr_workers.py`` checks 2 processes against the
simulator).

**Rounds.** HET: the epoch's shuffled training rows are cut into rounds of ``W x batch_size``
rows and worker ``w`` takes the ``w``-th of ``W`` equal parts (a last round of fewer than ``W``
rows is dropped). HET-GMP: worker ``w`` walks the training rows the partitioner gave it,
reshuffled every epoch; an epoch has as many rounds as the smallest worker has batches. Every
process draws every worker's order from the same generator.

**A round.** Every worker's forward (its lookups see the server as the previous round left
it), backward, the dense gradients averaged over the workers (added up in the simulator,
all-reduced over sgl.comm, then divided by ``W``), one optimizer step on the dense parameters,
then every worker's embedding step (pushes applied in worker order). The models must draw no
randomness (``dropout=0``, the default) for the two runs to agree.

**Epochs.** At the end of each epoch the workers flush what their caches and mirrors hold, and
the validation split is scored on the server's table (reads, not counted as traffic). The epoch
with the best validation AUC is kept: the dense parameters and the server's rows.

Example (two simulated HET workers):
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> from sgl.embeddings import build_embedding
    >>> from sgl.models.ctr import build_ctr_model
    >>> from sgl.tasks.ctr import CTRTrainConfig
    >>> train, val, test = make_synthetic_ctr(3000, [200, 50], num_dense=2, seed=0).split()
    >>> emb = build_embedding("het", 250, 8, workers=2, lr=0.5)
    >>> model = build_ctr_model("wdl", emb, 2, 8, 2, hidden=[16])
    >>> result = train_ctr_workers(model, train, val, test, CTRTrainConfig(epochs=3, lr=0.01, progress=False))
    >>> 0.6 < result["test_auc"] <= 1.0 and result["traffic_bytes"] > 0
    True
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, Iterator, List, Optional

import torch
import torch.nn.functional as F

from sgl import comm
from sgl.comm._wire import _comm_device
from sgl.errors import ConfigError

__all__ = ["train_ctr_workers", "worker_rounds", "is_protocol_model"]


def is_protocol_model(model: torch.nn.Module) -> bool:
    """Whether ``model``'s embedding is HET / HET-GMP workers (trained by :func:`train_ctr_workers`)."""
    from sgl.embeddings.protocol import ProtocolEmbedding

    return isinstance(getattr(model, "embedding", None), ProtocolEmbedding)


def worker_rounds(num_rows: int, num_workers: int, batch_size: int, owner: Optional[torch.Tensor],
                  generator: torch.Generator) -> Iterator[List[torch.Tensor]]:
    """One epoch's rounds: per round, the training rows of each of the ``num_workers`` workers.

    >>> g = torch.Generator().manual_seed(0)
    >>> [[len(rows) for rows in r] for r in worker_rounds(10, 2, 3, None, g)]
    [[3, 3], [2, 2]]
    >>> owner = torch.tensor([0, 0, 0, 1, 1, 0, 1, 0])
    >>> [[len(rows) for rows in r] for r in worker_rounds(8, 2, 2, owner, g)]   # worker 1 has 3 rows
    [[2, 2], [2, 1]]
    """
    if owner is None:
        order = torch.randperm(num_rows, generator=generator)
        per_round = num_workers * batch_size
        for start in range(0, num_rows, per_round):
            chunk = order[start:start + per_round]
            if chunk.numel() < num_workers:
                return
            yield list(chunk.tensor_split(num_workers))
        return
    mine = [(owner == w).nonzero().flatten() for w in range(num_workers)]
    orders = [rows[torch.randperm(rows.numel(), generator=generator)] for rows in mine]
    steps = min(math.ceil(rows.numel() / batch_size) for rows in mine)
    for s in range(steps):
        yield [rows[s * batch_size:(s + 1) * batch_size] for rows in orders]


def _average_gradients(params: List[torch.nn.Parameter], num_workers: int, distributed: bool) -> None:
    """The workers' mean dense gradient: summed over the ranks (one all-reduce), divided by ``W``.

    A parameter without a gradient is left alone (every rank runs the same model, so the same ones).
    """
    params = [p for p in params if p.grad is not None]
    grads = [p.grad for p in params]
    if not grads:
        return
    if distributed:
        flat = torch.cat([g.reshape(-1) for g in grads])
        flat = comm.all_reduce(flat.to(_comm_device(None)), op="sum").to(flat.device)
        grads = list(flat.split([g.numel() for g in grads]))
    for p, g in zip(params, grads):
        p.grad = g.reshape(p.shape).div_(num_workers)


def train_ctr_workers(model: torch.nn.Module, train: Any, val: Any, test: Any, config: Any = None,
                      seed: int = 0) -> Dict[str, Any]:
    """Train a CTR model over HET / HET-GMP workers (see the module docstring); every rank returns the same.

    Returns ``val_auc, val_logloss, test_auc, test_logloss, best_epoch, train_time_s,
    embedding_bytes`` (one worker's), ``traffic_bytes`` (all workers' protocol bytes) and ``workers``.
    """
    from tqdm.auto import tqdm

    from sgl.device import get_device
    from sgl.tasks.ctr import CTRTrainConfig, _mapped, _tensors, _to_device, evaluate_ctr

    config = config or CTRTrainConfig()
    if not is_protocol_model(model):
        raise ConfigError("train_ctr_workers trains a model whose embedding is HET / HET-GMP workers "
                          "(build_embedding('het' or 'hetgmp', ...)); use train_ctr for the other backends")
    if len(train) == 0:
        raise ConfigError("the training split is empty")
    device = get_device(config.device)
    model = model.to(device)
    emb = model.embedding
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    mapped = _mapped(train)
    if not mapped:
        dense, ids, labels = _tensors(train, device)
    generator = torch.Generator().manual_seed(seed)
    owner = emb.sample_owner
    if owner is not None and owner.numel() != len(train):
        raise ConfigError(f"the HET-GMP partition covers {owner.numel()} rows but the training split has "
                          f"{len(train)}; build the embedding from this split's global ids")

    def batch(rows: torch.Tensor):
        if mapped:
            return _to_device(train.batch(rows.cpu().numpy()), device)
        rows = rows.to(device)
        return dense[rows], ids[rows], labels[rows]

    best: Dict[str, Any] = {}
    best_score, best_state, stale = -math.inf, None, 0
    start = time.perf_counter()
    for epoch in range(config.epochs):
        model.train()
        rounds = worker_rounds(len(train), emb.num_workers, config.batch_size, owner, generator)
        for per_worker in tqdm(rounds, desc=f"epoch {epoch + 1}", leave=False,
                               disable=None if config.progress else True):
            losses = []
            for local, worker in enumerate(emb.worker_ids):
                emb.active = local
                x_dense, x_ids, y = batch(per_worker[worker])
                losses.append(F.binary_cross_entropy_with_logits(model(x_dense, x_ids), y))
            optimizer.zero_grad()
            torch.stack(losses).sum().backward()
            _average_gradients(params, emb.num_workers, emb.distributed)
            optimizer.step()
            emb.after_backward(optimizer)
        emb.flush()
        metrics = evaluate_ctr(model, val, config.eval_batch_size, device) if len(val) else \
            {"auc": float("nan"), "logloss": float("nan")}
        score = metrics["auc"] if not math.isnan(metrics["auc"]) else -metrics["logloss"]
        if best_state is None or score > best_score:
            best_score, stale = score, 0
            best = {"val_auc": metrics["auc"], "val_logloss": metrics["logloss"], "best_epoch": epoch + 1}
            best_state = ({k: v.detach().clone() for k, v in model.state_dict().items()}, emb.snapshot())
        else:
            stale += 1
            if config.patience is not None and stale >= config.patience:
                break
    train_time = time.perf_counter() - start
    model.load_state_dict(best_state[0])
    emb.restore(best_state[1])
    test_metrics = evaluate_ctr(model, test, config.eval_batch_size, device)
    traffic, pushed = emb.traffic_bytes(), emb.push_bytes()
    if emb.distributed:
        both = comm.all_reduce(torch.tensor([traffic, pushed], dtype=torch.int64, device=_comm_device(None)), op="sum")
        traffic, pushed = (int(v) for v in both.cpu())
    return {**best, "test_auc": test_metrics["auc"], "test_logloss": test_metrics["logloss"],
            "train_time_s": train_time, "embedding_bytes": emb.memory_bytes(), "traffic_bytes": traffic,
            "push_bytes": pushed, "workers": emb.num_workers}



def check_ctr_procs(config: Any) -> None:
    """``--task ctr`` on several processes (``procs > 1``): HET / HET-GMP workers, one per process.

    Registered in :data:`sgl.tasks.dist_config.DISTRIBUTED_TASKS`; the table backends (full,
    hash, CAFE ...) train in one process.
    """
    from sgl.embeddings.protocol import PROTOCOL_EMBEDDINGS

    why = f"procs={config.procs}"
    if config.ctr.embedding not in PROTOCOL_EMBEDDINGS:
        raise ConfigError(f"--ctr-embedding {config.ctr.embedding} trains in one process ({why}); on several "
                          f"processes --task ctr runs HET / HET-GMP workers: --ctr-embedding het or hetgmp, or "
                          f"remove --procs")
    workers = config.ctr.embedding_options.get("workers")
    if workers is not None and workers != config.procs:
        raise ConfigError(f"--ctr-embedding-option workers={workers} disagrees with procs={config.procs}: on several "
                          f"processes every process is one worker; drop the option or set it to {config.procs}")
    extra = [item for item in config.distributed.given() if not item.startswith("timeout=")]
    if extra:
        raise ConfigError(f"{', '.join(extra)} applies to node classification on several processes; --task ctr "
                          f"takes only timeout (seconds a collective may wait)")

