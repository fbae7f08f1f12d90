"""Mini-batch GNN training under DDP on distributed neighbour sampling (DistDGL's trainer loop).

:func:`train_dist_minibatch` runs on every rank of a ``torchrun`` (or :func:`sgl.comm.spawn`)
job: it wraps the model in :class:`torch.nn.parallel.DistributedDataParallel`, samples each
step's batch with :class:`~sgl.samplers.DistNeighborSampler` over the rank's
:class:`~sgl.samplers.DistGraph`, and selects the epoch with the best *validation* accuracy, as
:class:`~sgl.tasks.Trainer` does; losses and accuracies are reduced over the ranks, so every rank
returns the same record.

**Batches.** Rank ``r`` trains on the training nodes it owns (its *shard*), reshuffled every
epoch by ``default_rng([seed, epoch, r, 2**30])``, in local batches of ``batch_size`` seeds. The
*global batch* of step ``s`` is the concatenation, in rank order, of the ranks' local batches
``s``; its sampling key comes from ``default_rng([seed, epoch, s])`` on every rank, so a node's
sampled neighbours are the same whichever rank samples it. DDP averages the ranks' gradients;
each rank scales its summed loss by ``world_size / global batch size``, so the update is exactly
that of the mean loss over the global batch. Ranks own different numbers of training nodes but
must run the same number of steps (``uneven``):

* ``"pad"`` (default): every epoch has as many steps as the largest shard needs; a rank whose
  shard is used up takes part with empty batches (they add nothing to loss or gradient), so
  no training node is skipped;
* ``"drop"``: as many steps as the smallest shard needs; the other ranks skip the rest of their
  (reshuffled) shard that epoch.

**One process, same numbers.** ``seed_shards=[s_0, s_1, ...]`` (only without other processes)
runs the same plan as ``len(seed_shards)`` ranks whose shards are the given node lists: each
step trains on the concatenation of the shards' batches. With the shards of a real run (each
rank's owned training nodes), per-epoch losses, validation accuracies and the selected epoch
match the multi-process run up to float summation order, when sampling is identical and the model
draws no randomness (``dropout=0``: dropout masks are drawn per row, in a layout-dependent order).

Example (one process; under torchrun every rank runs the same call):
    >>> import sgl
    >>> from sgl.samplers import DistGraph, SampledGNN
    >>> from sgl.tasks import TrainConfig
    >>> from sgl.tasks.minibatch import SamplerConfig
    >>> from sgl.tasks.dist_minibatch import train_dist_minibatch
    >>> g = sgl.datasets.load("karate")
    >>> model = SampledGNN(g.num_features, g.num_classes, hidden=8, dropout=0.0)
    >>> part = DistGraph.from_graph(g, x=model.precompute(g))
    >>> result = train_dist_minibatch(model, part, TrainConfig(lr=0.01, epochs=3, batch_size=4, progress=False),
    ...                               SamplerConfig(fanouts=[5, 5]))
    >>> len(result["epoch_loss"]), result["steps_per_epoch"], 0.0 <= result["test_acc"] <= 1.0
    (3, 2, True)
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
from sgl.comm._wire import _comm_device
from sgl.device import get_device
from sgl.errors import CommError, ConfigError, FeatureError, GraphError
from sgl.samplers.dist_graph import DistGraph
from sgl.samplers.distributed import DistNeighborSampler
from sgl.tasks.config import TrainConfig
from sgl.tasks.minibatch import SamplerConfig
from sgl.tasks.stats import seed_everything

__all__ = ["UNEVEN", "shard_batches", "train_dist_minibatch"]

UNEVEN = ("pad", "drop")


def shard_batches(shard: np.ndarray, shard_index: int, batch_size: int, steps: int, seed: int,
                  epoch: int) -> List[np.ndarray]:
    """Shard ``shard_index``'s local batches of one epoch: ``steps`` slices of its reshuffled
    nodes (empty once the shard is used up)."""
    order = shard[np.random.default_rng([seed, epoch, shard_index, 1 << 30]).permutation(shard.size)]
    return [order[s * batch_size:(s + 1) * batch_size] for s in range(steps)]


def _reduce(values: Sequence[float], op: str = "sum") -> np.ndarray:
    # on the device the backend moves (the rank's GPU under NCCL), back on the host for numpy
    values = torch.tensor(list(values), dtype=torch.float64, device=_comm_device(None))
    return comm.all_reduce(values, op=op).cpu().numpy()


def _shards(graph: DistGraph, seed_shards: Optional[Sequence[Any]]) -> Tuple[List[Tuple[int, np.ndarray]], List[int]]:
    """``([(shard index, sorted nodes)] of this rank, every shard's size)``."""
    if seed_shards is None:
        own = graph.split_nodes("train")
        sizes = [int(t) for t in comm.all_gather(torch.tensor([own.size], device=_comm_device(None)))]
        return [(graph.rank, own)], [int(s) for s in sizes]
    if comm.get_world_size() > 1:
        raise ConfigError("seed_shards emulates several ranks in one process; with several processes every rank "
                          "trains the training nodes it owns (leave seed_shards=None)")
    if isinstance(seed_shards, (str, bytes)) or not len(seed_shards):
        raise ConfigError("seed_shards must be a non-empty list of node-id lists, one per emulated rank")
    shards = []
    for i, nodes in enumerate(seed_shards):
        arr = np.asarray(nodes.cpu().numpy() if isinstance(nodes, torch.Tensor) else nodes).reshape(-1)
        if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() >= graph.num_nodes):
            raise GraphError(f"seed_shards[{i}] must hold node ids in [0, {graph.num_nodes})")
        shards.append((i, np.sort(arr.astype(np.int64))))
    every = np.concatenate([s for _, s in shards])
    if np.unique(every).size != every.size:
        raise GraphError("seed_shards overlap; each node may be in one shard only")
    return shards, [s.size for _, s in shards]


@torch.no_grad()
def _accuracy(model: torch.nn.Module, sampler: DistNeighborSampler, nodes: np.ndarray, chunk: int,
              device: torch.device) -> float:
    """Accuracy over every rank's ``nodes`` (equal numbers of collective sampling calls per rank)."""
    model.eval()
    chunks = int(_reduce([math.ceil(nodes.size / chunk)], "max")[0])
    correct = total = 0
    for c in range(chunks):
        mb = sampler.sample(nodes[c * chunk:(c + 1) * chunk], seed=0)
        pred = model(mb.x.to(device), [b.to(device) for b in mb.blocks]).argmax(1).cpu()
        correct += int((pred == mb.y.cpu()).sum())
        total += int(mb.y.numel())
    correct, total = _reduce([correct, total])
    return float(correct / total) if total else float("nan")


def train_dist_minibatch(model: torch.nn.Module, graph: DistGraph, train_config: Optional[TrainConfig] = None,
                         sampler_config: Optional[SamplerConfig] = None, seed: int = 0, uneven: str = "pad",
                         seed_shards: Optional[Sequence[Any]] = None,
                         timeout: Optional[float] = None, grad_compress: str = "none", grad_bits: int = 4,
                         powersgd_rank: int = 1) -> Dict[str, Any]:
    """Train ``model`` (e.g. :class:`~sgl.samplers.SampledGNN`) on every rank; see the module docstring.

    Args:
        model: a block model: ``model(x, blocks) -> logits`` of the last block's destinations,
            with ``num_layers`` = number of fan-outs.
        graph: this rank's :class:`~sgl.samplers.DistGraph` with labels, masks and the model's
            input features as ``x``: ``DistGraph.from_graph(g, x=model.precompute(g))``.
        train_config: Adam settings; ``batch_size`` is the *local* batch (global = ranks x it;
            ``None``: each shard in one batch); ``eval_batch_size`` seeds per evaluation call.
        sampler_config: ``sampler="neighbor"`` only, ``num_workers=0``; ``fanouts``, ``replace``,
            ``eval_fanouts`` (``None``: every neighbour, exact evaluation).
        seed: seeds the model, the batch order and the sampling keys.
        uneven: ``"pad"`` or ``"drop"`` (how ranks with fewer training nodes keep step).
        seed_shards: one process only: emulate ``len(seed_shards)`` ranks with these training shards.
        timeout: seconds every exchange may wait (``None``: :func:`sgl.comm.init`'s).

    Returns:
        ``{"epoch_loss": [...], "val_acc_history": [...], "best_epoch", "epochs_run", "train_acc",
        "val_acc", "test_acc"`` (at the best epoch) ``, "steps_per_epoch", "global_batch_size",
        "num_shards", "world_size", "train_time_s", "traffic"`` (this rank's
        :class:`~sgl.samplers.SamplerTraffic`) ``, "traffic_total"`` (summed over ranks) ``}``.
    """
    cfg, sc = train_config or TrainConfig(), sampler_config or SamplerConfig()
    if sc.sampler != "neighbor" or sc.num_workers:
        raise ConfigError(f"distributed training samples with DistNeighborSampler: use SamplerConfig(sampler="
                          f"'neighbor', num_workers=0), got sampler={sc.sampler!r}, num_workers={sc.num_workers}")
    if uneven not in UNEVEN:
        raise ConfigError(f"uneven must be one of {UNEVEN}, got {uneven!r}")
    if not isinstance(graph, DistGraph):
        raise ConfigError(f"train_dist_minibatch needs this rank's DistGraph, got {type(graph).__name__}")
    layers = getattr(model, "num_layers", len(sc.fanouts))
    if layers != len(sc.fanouts):
        raise ConfigError(f"the model has {layers} layers but fanouts {sc.fanouts} sample {len(sc.fanouts)} hops")
    if graph.x is None or graph.y is None:
        raise FeatureError("the DistGraph needs feature rows x and labels y: DistGraph.from_graph of a graph with both")
    world = comm.get_world_size()
    shards, sizes = _shards(graph, seed_shards)
    if uneven == "drop" and min(sizes) == 0:
        raise ConfigError(f"shard {sizes.index(0)} has no training node, so uneven='drop' leaves no step; use 'pad'")
    batch = cfg.batch_size or max(1, max(sizes))
    need = [math.ceil(n / batch) for n in sizes]
    steps = max(need) if uneven == "pad" else min(need)
    global_sizes = [sum(min(batch, max(0, n - s * batch)) for n in sizes) for s in range(steps)]
    if steps == 0:
        raise FeatureError("no rank owns a training node; the graph's train_mask is empty")
    top = int(_reduce([float(graph.y.max()) if graph.y.numel() else -1.0], "max")[0])
    if top >= getattr(model, "num_classes", top + 1):
        raise FeatureError(f"labels go up to {top} but the model predicts {model.num_classes} classes")

    device = get_device(cfg.device)
    seed_everything(seed)
    if hasattr(model, "reset_parameters"):
        model.reset_parameters()
    model.to(device)
    from sgl.tasks.grad_compress import check_grad_compress, grad_compress_report, register_grad_compress

    grad_compress = check_grad_compress(grad_compress, grad_bits, powersgd_rank)
    net = model
    if comm.is_initialized():
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    hook_state = register_grad_compress(net, grad_compress, grad_bits, powersgd_rank, seed=seed)
    sampler = DistNeighborSampler(graph, sc.fanouts, replace=sc.replace, timeout=timeout)
    full = [max(1, int(_reduce([graph.max_degree()], "max")[0]))] * len(sc.fanouts)
    evaluator = DistNeighborSampler(graph, sc.eval_fanouts or full, timeout=timeout)
    chunk = cfg.eval_batch_size
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    losses: List[float] = []
    history: List[float] = []
    best_acc, best_epoch, best_state, stale = -1.0, -1, None, 0
    bar = None
    if cfg.progress and comm.get_rank() == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, desc=f"dist train seed {seed}", leave=False, disable=None)
    start = time.perf_counter()
    for epoch in range(cfg.epochs):
        plans = [shard_batches(nodes, index, batch, steps, seed, epoch) for index, nodes in shards]
        sums = np.zeros(steps)
        for s in range(steps):
            mb = sampler.sample(np.concatenate([plan[s] for plan in plans]),
                                rng=np.random.default_rng([seed, epoch, s]))
            net.train()
            optimizer.zero_grad()
            out = net(mb.x.to(device), [b.to(device) for b in mb.blocks])
            loss_sum = F.cross_entropy(out, mb.y.to(device), reduction="sum")
            try:
                (loss_sum * (world / global_sizes[s])).backward()
            except RuntimeError as exc:
                if not comm.is_initialized():
                    raise
                raise CommError(f"the DDP gradient all-reduce failed on rank {comm.get_rank()} of {world} (epoch "
                                f"{epoch}, step {s}); a peer rank probably died or stopped training: {exc}") from exc
            optimizer.step()
            sums[s] = float(loss_sum.detach())
        sums = _reduce(sums.tolist())
        losses.append(float(np.mean(sums / np.asarray(global_sizes))))
        if not math.isfinite(losses[-1]):
            raise FeatureError(f"training diverged (loss {losses[-1]}) at epoch {epoch}; lower the learning rate")
        history.append(_accuracy(model, evaluator, graph.split_nodes("val"), chunk, device))
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
    if best_state is not None:
        model.load_state_dict(best_state)
    traffic = sampler.traffic.as_dict()
    total = _reduce(list(traffic.values()))
    result: Dict[str, Any] = {
        "seed": seed, "epoch_loss": losses, "val_acc_history": history, "best_epoch": best_epoch,
        "epochs_run": len(losses), "steps_per_epoch": steps, "global_batch_size": batch * len(sizes),
        "num_shards": len(sizes), "world_size": world, "uneven": uneven, "train_time_s": train_time,
        "traffic": traffic, "traffic_total": {k: int(v) for k, v in zip(traffic, total)}}
    for split in ("train", "val", "test"):
        result[f"{split}_acc"] = _accuracy(model, evaluator, graph.split_nodes(split), chunk, device)
    if grad_compress != "none":
        result.update(grad_compress_report(grad_compress, hook_state, grad_bits, powersgd_rank))
    return result
