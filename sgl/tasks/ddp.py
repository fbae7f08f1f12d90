"""Data-parallel training of a scalable (SGAP) model on its precomputed features, under DDP.

:func:`train_ddp` runs on every rank of a ``torchrun`` (or :func:`sgl.comm.spawn`) job. The
model is wrapped in :class:`torch.nn.parallel.DistributedDataParallel`; every rank trains on
its *shard* of the training nodes; validation accuracy is reduced over the ranks, so the epoch
with the best validation accuracy (as :class:`~sgl.tasks.Trainer` selects it, never on test) is
the same on every rank, and so are the final train/val/test accuracy and macro-F1.

**Features and shards.** ``features`` holds the precomputed rows of ``nodes`` (global ids), or of
every node (``nodes=None``):

* every node (each rank precomputed the whole graph, ``precompute="local"``): rank ``r`` of
  ``W`` trains on the ``r``-th of ``W`` contiguous, near-equal slices of the sorted training
  nodes, and evaluates the ``r``-th slice of each evaluated split;
* ``nodes`` (this rank's rows of a distributed precompute,
  :func:`sgl.tasks.dist_precompute.precompute_features`): rank ``r`` trains on, and evaluates,
  the nodes it owns.

**Batches.** A rank reshuffles its shard every epoch (``default_rng([seed, epoch, r, 2**30])``,
as :func:`sgl.tasks.dist_minibatch.shard_batches`) and cuts it into local batches of
``batch_size`` rows (``None``: the whole shard in one batch). The *global batch* of step ``s``
is the concatenation, in rank order, of the ranks' local batches ``s``. DDP averages the ranks'
gradients and each rank scales its summed loss by ``world_size / global batch size``, so every
update is exactly that of the mean loss over the global batch. Ranks must take equal numbers of
steps (``uneven``): ``"pad"`` (default) runs as many steps as the largest shard needs, a rank
whose shard is used up joins with an empty batch (nothing is skipped); ``"drop"`` runs as many as
the smallest shard needs, the other ranks skip the rest of their reshuffled shard that epoch.

**One process, same numbers.** ``seed_shards=[s_0, s_1, ...]`` (one process, features of every
node) runs the same plan as ``len(seed_shards)`` ranks: each step trains on the concatenation of
the shards' batches. With the shards of a real run, per-epoch losses, validation accuracies and
the selected epoch equal the multi-process run's up to float summation order, for a model that
draws no randomness: dropout masks are drawn per rank (rank 0 from the seed's stream, rank ``r``
from its own), and batch norm normalises each rank's local batch (and leaves out a local batch of
one row, as :class:`~sgl.tasks.Trainer` skips a one-row batch).

Example (one process; under torchrun every rank makes the same call):
    >>> import sgl
    >>> from sgl.models import SGC
    >>> from sgl.tasks import TrainConfig
    >>> g = sgl.datasets.load("karate")
    >>> model = SGC(g.num_features, g.num_classes)
    >>> r = train_ddp(model, model.precompute(g), g, TrainConfig(epochs=5, batch_size=2, progress=False),
    ...               seed_shards=[[2, 4, 11, 19], [23, 25, 32, 33]])   # karate's training nodes, two "ranks"
    >>> len(r["epoch_loss"]), r["steps_per_epoch"], r["global_batch_size"]
    (5, 2, 4)
"""
from __future__ import annotations

import copy
import math
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from sgl import comm
from sgl.device import get_device
from sgl.errors import CommError, ConfigError, FeatureError, GraphError
from sgl.models.base import ScalableModel
from sgl.models.features import NodeFeatures, to_device
from sgl.tasks.config import TrainConfig
from sgl.tasks.dist_minibatch import UNEVEN, shard_batches
from sgl.tasks.grad_compress import check_grad_compress, grad_compress_report, register_grad_compress
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.node_classification import _ogb_evaluator, _split_index
from sgl.tasks.stats import seed_everything

__all__ = ["UNEVEN", "train_ddp", "check_world_size"]


def check_world_size(graph: Any, world_size: int) -> None:
    """ConfigError unless every one of ``world_size`` processes gets a node and a training node."""
    n = int(graph.num_nodes)
    if world_size > n:
        raise ConfigError(f"{world_size} processes for a graph of {n} nodes: every process needs at least one "
                          f"node; use at most {n} processes (--procs)")
    mask = getattr(graph, "train_mask", None)
    train = int(mask.sum()) if mask is not None else 0
    if 0 < train < world_size:
        raise ConfigError(f"{world_size} processes but the graph has only {train} training node(s): every process "
                          f"needs at least one to train on; use at most {train} processes (--procs)")


class _Rows:
    """Which nodes this rank trains/evaluates and where their feature rows are."""

    def __init__(self, num_nodes: int, nodes: Any, num_rows: int, world: int, rank: int) -> None:
        self.world, self.rank, self.pos = world, rank, None
        if nodes is None:
            if num_rows != num_nodes:
                raise FeatureError(f"precomputed features have {num_rows} rows; expected one per node "
                                   f"({num_nodes}), or pass nodes= (the global ids of the rows)")
            return
        nodes = torch.as_tensor(nodes).to(torch.int64).reshape(-1)
        if nodes.numel() != num_rows:
            raise FeatureError(f"nodes lists {nodes.numel()} ids but the features have {num_rows} rows")
        if nodes.numel() and (int(nodes.min()) < 0 or int(nodes.max()) >= num_nodes
                              or torch.unique(nodes).numel() != nodes.numel()):
            raise GraphError(f"nodes must be distinct ids in [0, {num_nodes})")
        self.pos = torch.full((num_nodes,), -1, dtype=torch.int64)
        self.pos[nodes] = torch.arange(nodes.numel())

    def mine(self, ids: torch.Tensor) -> torch.Tensor:
        if self.pos is None:
            return torch.tensor_split(ids, self.world)[self.rank]
        return ids[self.pos[ids] >= 0]

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return ids if self.pos is None else self.pos[ids]


def _wire(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the backend's device (the rank's GPU for NCCL, else where it is)."""
    if not comm.is_initialized():
        return t
    from sgl.comm._wire import _comm_device

    return t.to(_comm_device(None))


def _reduce(values: Sequence[float], op: str = "sum", timeout: Optional[float] = None) -> np.ndarray:
    summed = comm.all_reduce(_wire(torch.tensor(list(values), dtype=torch.float64)), op=op, timeout=timeout)
    return summed.cpu().numpy()


def _gather(t: torch.Tensor, timeout: Optional[float]) -> torch.Tensor:
    """Every rank's ``t`` (first dimensions may differ), concatenated in rank order, on the CPU."""
    return torch.cat([part.cpu() for part in comm.all_gather(_wire(t), timeout=timeout)])


def _shards(rows: _Rows, train: torch.Tensor, seed_shards: Any, num_nodes: int,
            timeout: Optional[float]) -> Tuple[List[Tuple[int, np.ndarray]], List[int]]:
    """``([(shard index, sorted training nodes)] of this rank, every shard's size)``."""
    if seed_shards is None:
        own = rows.mine(train).cpu().numpy()
        sizes = [int(t) for t in _gather(torch.tensor([own.size]), timeout)]
        return [(rows.rank, own)], sizes
    if rows.world > 1:
        raise ConfigError("seed_shards emulates several ranks in one process; with several processes every rank "
                          "trains its own shard (leave seed_shards=None)")
    if rows.pos is not None:
        raise ConfigError("seed_shards needs the features of every node (nodes=None)")
    if isinstance(seed_shards, (str, bytes)) or not len(seed_shards):
        raise ConfigError("seed_shards must be a non-empty list of node-id lists, one per emulated rank")
    shards = []
    for i, ids in enumerate(seed_shards):
        arr = np.asarray(ids.cpu().numpy() if isinstance(ids, torch.Tensor) else ids).reshape(-1)
        if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() >= num_nodes):
            raise GraphError(f"seed_shards[{i}] must hold node ids in [0, {num_nodes})")
        shards.append((i, np.sort(arr.astype(np.int64))))
    every = np.concatenate([s for _, s in shards])
    if np.unique(every).size != every.size:
        raise GraphError("seed_shards overlap; each node may be in one shard only")
    return shards, [s.size for _, s in shards]


def _has_unused_parameters(model: torch.nn.Module, features: NodeFeatures, device: torch.device,
                           timeout: Optional[float]) -> bool:
    """Whether some parameter gets no gradient (e.g. GAMLP's PReLU without residual): DDP must know."""
    model.eval()  # no dropout draw, no batch-norm statistics
    rows = torch.arange(min(2, len(features)))
    if rows.numel():
        model(to_device(features[rows], device)).sum().backward()
    unused = rows.numel() > 0 and any(p.requires_grad and p.grad is None for p in model.parameters())
    model.zero_grad(set_to_none=True)
    return bool(_reduce([float(unused)], "max", timeout)[0])


def _device(name: Optional[str]) -> torch.device:
    device = get_device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())  # the rank's GPU (comm.init sets it)
    return device


@torch.no_grad()
def _predict(model: torch.nn.Module, features: NodeFeatures, rows: torch.Tensor, chunk: int,
             device: torch.device) -> torch.Tensor:
    model.eval()
    out = [model(to_device(features[rows[i:i + chunk]], device)).cpu() for i in range(0, rows.numel(), chunk)]
    return torch.cat(out) if out else torch.zeros(0, getattr(model, "num_classes", 1))


def _postprocesses(model: Any) -> bool:
    """False when ``postprocess`` is the identity (SGAP without post-steps, GAMLP)."""
    from sgl.models import GAMLP, SGAPModel

    if isinstance(model, GAMLP):
        return False
    return not (isinstance(model, SGAPModel) and model.config.post_steps == 0)


def train_ddp(model: torch.nn.Module, features: Any, graph: Any, train_config: Optional[TrainConfig] = None, *,
              seed: int = 0, nodes: Any = None, uneven: str = "pad", seed_shards: Optional[Sequence[Any]] = None,
              timeout: Optional[float] = None, grad_compress: str = "none", grad_bits: int = 4,
              powersgd_rank: int = 1) -> Dict[str, Any]:
    """Train ``model``'s trainable part on every rank; see the module docstring.

    Args:
        model: a scalable model (:class:`~sgl.models.ScalableModel`, ``full_batch=False``).
        features: its precomputed rows (a tensor or :class:`~sgl.models.NodeFeatures`) of ``nodes``.
        graph: the whole graph (labels, split masks; ``postprocess`` reads its structure).
        train_config: Adam settings; ``batch_size`` is the *local* batch (global = ranks x it);
            ``None`` trains each shard in one batch (one step per epoch, as a full-batch Trainer).
        seed: seeds the model, the batch order and rank 0's dropout.
        nodes: global ids of ``features``' rows (``None``: every node, in order).
        uneven: ``"pad"`` or ``"drop"`` (how ranks with fewer training nodes keep step).
        seed_shards: one process only: emulate ``len(seed_shards)`` ranks with these training shards.
        timeout: seconds every reduction may wait (``None``: :func:`sgl.comm.init`'s).
        grad_compress, grad_bits, powersgd_rank: compression of the gradient all-reduce
            (:mod:`sgl.tasks.grad_compress`; several processes only).

    Returns:
        ``{"seed", "best_epoch", "epochs_run", "train_time_s", "{train,val,test}_acc",
        "{train,val,test}_macro_f1"`` (at the best epoch, after ``postprocess``) ``, "epoch_loss",
        "val_acc_history", "steps_per_epoch", "global_batch_size", "num_shards", "world_size",
        "uneven"}`` -- the same on every rank.
    """
    cfg = train_config or TrainConfig()
    grad_compress = check_grad_compress(grad_compress, grad_bits, powersgd_rank)
    if not isinstance(model, ScalableModel) or model.full_batch:
        raise ConfigError(f"train_ddp trains a scalable model on precomputed rows; {type(model).__name__} is "
                          f"{'a full-batch model' if isinstance(model, ScalableModel) else 'not a ScalableModel'}")
    if uneven not in UNEVEN:
        raise ConfigError(f"uneven must be one of {UNEVEN}, got {uneven!r}")
    if isinstance(features, torch.Tensor):
        if features.dim() != 2:
            raise FeatureError(f"precomputed features must be 2-D [num_rows, d], got {tuple(features.shape)}")
        features = NodeFeatures(features)
    if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
        raise FeatureError("node classification needs integer labels graph.y of shape [num_nodes]")
    world, rank = comm.get_world_size(), comm.get_rank()
    n, y = int(graph.num_nodes), graph.y
    rows = _Rows(n, nodes, len(features), world, rank)
    train, val, test = (_split_index(graph, s) for s in ("train", "val", "test"))
    if bool((y[train] < 0).any()):
        raise FeatureError("some training nodes have label -1 (unlabeled); fix the train mask")
    top = int(torch.cat([y[train], y[val], y[test]]).max())
    if top >= getattr(model, "num_classes", top + 1):
        raise FeatureError(f"labels go up to {top} but the model predicts {model.num_classes} classes; "
                           f"build it with num_classes={top + 1}")
    check_world_size(graph, world)
    shards, sizes = _shards(rows, train, seed_shards, n, timeout)
    if uneven == "drop" and min(sizes) == 0:
        raise ConfigError(f"shard {sizes.index(0)} has no training node, so uneven='drop' leaves no step; use 'pad'")
    batch = cfg.batch_size or max(1, max(sizes))
    need = [math.ceil(s / batch) for s in sizes]
    steps = max(need) if uneven == "pad" else min(need)
    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())

    def local(size: int, step: int) -> int:  # rows a shard trains on in a step (a lone row skips batch norm)
        count = min(batch, max(0, size - step * batch))
        return 0 if has_bn and count == 1 else count

    global_sizes = [sum(local(size, s) for size in sizes) for s in range(steps)]
    if not any(global_sizes):
        raise FeatureError("no training step has a row to train on; check the train mask and batch_size")

    device = _device(cfg.device)
    seed_everything(seed)
    if hasattr(model, "reset_parameters"):
        model.reset_parameters()
    model.to(device)
    net = model
    if comm.is_initialized():
        find_unused = _has_unused_parameters(model, features, device, timeout)
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=find_unused)
        if rank:  # rank 0 keeps the seed's stream; the others draw their own dropout masks
            torch.manual_seed(int(np.random.default_rng([seed, rank]).integers(1 << 62)))
    hook_state = register_grad_compress(net, grad_compress, grad_bits, powersgd_rank, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    chunk = cfg.eval_batch_size
    val_mine = rows.mine(val)

    losses: List[float] = []
    history: List[float] = []
    best_acc, best_epoch, best_state, stale = -1.0, -1, None, 0
    bar = None
    if cfg.progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, desc=f"ddp train seed {seed}", leave=False, disable=None)
    start = time.perf_counter()
    for epoch in range(cfg.epochs):
        plans = [shard_batches(ids, index, batch, steps, seed, epoch) for index, ids in shards]
        sums = np.zeros(steps)
        for s in range(steps):
            if not global_sizes[s]:
                continue  # every rank skips it: it would only train lone rows through batch norm
            parts = [torch.from_numpy(plan[s]) for plan in plans if not (has_bn and plan[s].size == 1)]
            idx = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)
            optimizer.zero_grad()
            # an empty batch still joins the gradient all-reduce; eval mode keeps it out of batch-norm statistics
            net.train(idx.numel() > 0)
            out = net(to_device(features[rows.rows(idx)], device))
            loss_sum = F.cross_entropy(out, y[idx].to(device), reduction="sum")
            try:
                (loss_sum * (world / global_sizes[s])).backward()
            except RuntimeError as exc:
                if not comm.is_initialized():
                    raise
                raise CommError(f"the DDP gradient all-reduce failed on rank {rank} of {world} (epoch {epoch}, step "
                                f"{s}); a peer rank probably died or stopped training: {exc}") from exc
            optimizer.step()
            sums[s] = float(loss_sum.detach())
        sums = _reduce(sums.tolist(), timeout=timeout)
        active = np.asarray(global_sizes) > 0
        losses.append(float(np.mean(sums[active] / np.asarray(global_sizes)[active])))
        if not math.isfinite(losses[-1]):
            raise FeatureError(f"training diverged (loss {losses[-1]}) at epoch {epoch}; lower the learning rate")
        pred = _predict(model, features, rows.rows(val_mine), chunk, device).argmax(1)
        correct, total = _reduce([float((pred == y[val_mine]).sum()), float(val_mine.numel())], timeout=timeout)
        history.append(float(correct / total))
        if history[-1] > best_acc:
            best_acc, best_epoch, best_state, stale = history[-1], epoch, copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", val=f"{history[-1]:.4f}")
        if cfg.patience is not None and stale >= cfg.patience:
            break
    train_time = time.perf_counter() - start
    if bar is not None:
        bar.close()
    model.load_state_dict(best_state)
    result: Dict[str, Any] = {"seed": seed, "best_epoch": best_epoch, "epochs_run": len(losses),
                              "train_time_s": train_time}
    result.update(_final_metrics(model, features, graph, rows, (train, val, test), chunk, device, timeout))
    result.update({"epoch_loss": losses, "val_acc_history": history, "steps_per_epoch": steps,
                   "global_batch_size": batch * len(sizes), "num_shards": len(sizes), "world_size": world,
                   "uneven": uneven})
    if grad_compress != "none":
        result.update(grad_compress_report(grad_compress, hook_state, grad_bits, powersgd_rank))
    return result


def _final_metrics(model: Any, features: NodeFeatures, graph: Any, rows: _Rows, splits: Tuple[torch.Tensor, ...],
                   chunk: int, device: torch.device, timeout: Optional[float]) -> Dict[str, Any]:
    """Train/val/test accuracy and macro-F1 (after ``postprocess``) from every rank's predictions."""
    n, y = int(graph.num_nodes), graph.y
    post = _postprocesses(model)
    # post-processing smooths over the graph: it needs every node's logits (gathered on every rank)
    ids = rows.mine(torch.arange(n) if post else torch.unique(torch.cat(splits)))
    logits = _predict(model, features, rows.rows(ids), chunk, device)
    all_ids = _gather(ids, timeout)
    gathered = _gather(logits if post else logits.argmax(1), timeout)
    if post:
        full = torch.zeros(n, logits.size(1), dtype=logits.dtype)
        full[all_ids] = gathered
        pred = model.postprocess(graph, full).argmax(1)
    else:
        pred = torch.full((n,), -1, dtype=torch.int64)
        pred[all_ids] = gathered
    out: Dict[str, Any] = {}
    for name, index in zip(("train", "val", "test"), splits):
        out[f"{name}_acc"] = accuracy(pred[index], y[index])
        out[f"{name}_macro_f1"] = macro_f1(pred[index], y[index], graph.num_classes)
    evaluator = _ogb_evaluator(graph)
    if evaluator is not None:
        out["ogb_test_acc"] = evaluator(pred[splits[2]], y[splits[2]])
    return out
