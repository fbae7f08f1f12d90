r"""Out-of-core training: the run config :class:`OutOfCoreConfig` and the loop :class:`OutOfCoreTrainer`.

The loop trains a :class:`~sgl.samplers.SampledGNN` on a disk store (:class:`~sgl.samplers.GraphStore`)
and talks only to an :class:`~sgl.samplers.outofcore.OutOfCorePolicy` (``"lru"``, ``"ginex"`` or
``"outre"``, :data:`~sgl.samplers.outofcore.POLICIES`), which brings every batch's data in through its
caches within one memory budget. The run config contains the policy's options
(:class:`~sgl.samplers.outofcore.OutOfCoreSampling`) and a :class:`~sgl.tasks.TrainConfig` with
out-of-core defaults; :meth:`OutOfCoreConfig.from_flat` reads the flat keyword set older code and
records use.

Devices: the store, the features and every cache (feature rows, adjacency, historical
embeddings) stay in host memory; the model, each batch (feature rows, blocks, labels) and the
historical embeddings it reads run on ``train.device`` (any device :func:`sgl.device.get_device`
accepts), copied there without blocking, through pinned host buffers when it is a GPU.

Example:
    >>> import tempfile, os, sgl
    >>> from sgl.samplers import write_store, open_store
    >>> store = open_store(write_store(sgl.datasets.load("karate"), os.path.join(tempfile.mkdtemp(), "k")))
    >>> cfg = OutOfCoreConfig.from_flat(method="outre", fanouts=[3, 3], batch_size=2, memory_budget="1MB",
    ...                                 epochs=2, hidden=8, num_parts=2, group_size=1)
    >>> cfg.sampling.method, cfg.train.epochs
    ('outre', 2)
    >>> trainer = OutOfCoreTrainer(store, cfg)
    >>> stats = trainer.train_epoch()
    >>> stats["bytes_read"] > 0, stats["batches"] == len(trainer.batches(0))
    (True, True)
"""
from __future__ import annotations

import copy
import time
from contextlib import closing
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError, FeatureError
from sgl.samplers.block import MiniBatch
from sgl.samplers.models import SampledGNN
from sgl.samplers.neighbor import NeighborSampler
from sgl.samplers.outofcore import OutOfCoreSampling, make_policy, needed_positions
from sgl.samplers.outofcore.config import positive_int
from sgl.samplers.store import GraphStore
from sgl.tasks.config import TrainConfig

__all__ = ["OutOfCoreConfig", "OutOfCoreTrainer", "run_out_of_core"]


@dataclass
class OutOfCoreConfig:
    """One out-of-core run: the policy's sampling/caching options, the optimisation settings and the model.

    ``train.batch_size`` is the seeds per batch (a positive integer here), ``train.eval_batch_size``
    the seeds per evaluation chunk, ``train.patience`` stops :meth:`OutOfCoreTrainer.fit` after that
    many epochs without a better validation accuracy, ``train.progress`` is :meth:`~OutOfCoreTrainer.fit`'s
    default progress bar. ``train.device`` is where the model and each batch run (the caches stay in host
    memory).
    """

    sampling: OutOfCoreSampling = field(default_factory=OutOfCoreSampling)
    train: TrainConfig = field(default_factory=lambda: OutOfCoreConfig.default_train())
    hidden: int = 64
    dropout: float = 0.5
    conv: str = "sage"
    seed: int = 0

    def __post_init__(self) -> None:
        self.train.batch_size = positive_int(self.train.batch_size, "batch_size")
        self.hidden = positive_int(self.hidden, "hidden")

    @staticmethod
    def default_train() -> TrainConfig:
        """Out-of-core's optimisation defaults: one epoch of batches of 1,000 seeds (not SGC's full batch)."""
        return TrainConfig(lr=0.01, weight_decay=5e-4, epochs=1, batch_size=1000, eval_batch_size=4096,
                           progress=False)

    @classmethod
    def flat_keys(cls) -> Tuple[str, ...]:
        """Every key :meth:`from_flat` takes: the sampling options, the train settings, the model's."""
        own = [f.name for f in fields(cls) if f.name not in ("sampling", "train")]
        return tuple([f.name for f in fields(OutOfCoreSampling)] + [f.name for f in fields(TrainConfig)] + own)

    @classmethod
    def from_flat(cls, **flat: Any) -> "OutOfCoreConfig":
        """Build from one flat keyword set (``method=..., fanouts=..., lr=..., batch_size=..., hidden=...``),
        the shape the command line and older records use; unset train settings keep out-of-core defaults."""
        unknown = set(flat) - set(cls.flat_keys())
        if unknown:
            raise ConfigError(f"unknown out-of-core option(s) {sorted(unknown)}; valid: "
                              f"{', '.join(sorted(cls.flat_keys()))}")
        sampling_keys = {f.name for f in fields(OutOfCoreSampling)}
        train_keys = {f.name for f in fields(TrainConfig)}
        sampling = OutOfCoreSampling(**{k: v for k, v in flat.items() if k in sampling_keys})
        for name in ("batch_size", "epochs"):  # this config's own messages, before TrainConfig's
            if name in flat:
                flat[name] = positive_int(flat[name], name)
        train = {**asdict(cls.default_train()), **{k: v for k, v in flat.items() if k in train_keys}}
        own = {k: v for k, v in flat.items() if k not in sampling_keys and k not in train_keys}
        return cls(sampling=sampling, train=TrainConfig(**train), **own)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "OutOfCoreConfig":
        """Inverse of :meth:`to_dict`."""
        rest = {k: v for k, v in data.items() if k not in ("sampling", "train")}
        return cls(sampling=OutOfCoreSampling(**data.get("sampling", {})),
                   train=TrainConfig(**{**asdict(cls.default_train()), **data.get("train", {})}), **rest)

    def to_dict(self) -> Dict[str, Any]:
        return {"sampling": self.sampling.to_dict(), "train": self.train.to_dict(),
                **{f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("sampling", "train")}}


def _split(store: GraphStore, name: str) -> np.ndarray:
    mask = getattr(store, f"{name}_mask")
    if mask is None or not bool(mask.any()):
        raise FeatureError(f"the store has no {name} nodes; write it from a graph with a {name}_mask")
    return mask.nonzero().flatten().cpu().numpy()


class OutOfCoreTrainer:
    """Train a :class:`SampledGNN` on a disk store with the policy ``config.sampling.method``.

    Construction runs the policy's preparation (sizing pass; OUTRE: partitioning, profiling
    and the cache split; caches sized to the budget). Preparation I/O is reported in
    ``self.prep`` and excluded from epoch figures, except Ginex's superbatch pre-sampling,
    which is part of every epoch.
    """

    needed_positions = staticmethod(needed_positions)

    def __init__(self, store: GraphStore, config: Optional[OutOfCoreConfig] = None,
                 model: Optional[SampledGNN] = None) -> None:
        from sgl.device import get_device

        self.store, self.cfg = store, config or OutOfCoreConfig()
        cfg = self.cfg
        #: where the model and each batch run (DeviceError now for a device that does not exist)
        self.device = get_device(cfg.train.device)
        if store.y is None:
            raise FeatureError("the store has no labels; write it from a graph with integer labels")
        self.train_nodes, self.val_nodes, self.test_nodes = (_split(store, s) for s in ("train", "val", "test"))
        torch.manual_seed(cfg.seed)
        self.model = model or SampledGNN(store.num_features, store.num_classes, hidden=cfg.hidden,
                                         num_layers=len(cfg.sampling.fanouts), dropout=cfg.dropout, conv=cfg.conv)
        self.model.to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.policy = make_policy(cfg.sampling, cfg.train.batch_size, cfg.seed)
        self.epoch = 0
        self.iteration = 0
        self._io_only = False
        start_bytes = store.counter.stats()["bytes"]
        start = time.perf_counter()
        self.prep: Dict[str, Any] = self.policy.prepare(store, self.train_nodes, self.model.last_input_width)
        self.prep.update(time_s=time.perf_counter() - start, bytes_read=store.counter.stats()["bytes"] - start_bytes)
        self.adjacency, self.features, self.budget = self.policy.adjacency, self.policy.features, self.policy.budget

    @property
    def cache(self) -> Any:
        """The policy's feature cache."""
        return self.policy.cache

    @property
    def emb_cache(self) -> Any:
        """The policy's historical embedding cache (None when it keeps none)."""
        return self.policy.emb_cache

    def _to_device(self, value: Any) -> Any:
        """A host tensor (or a block) on the training device: pinned, then copied without blocking on a
        GPU (torch's pinned-memory pool reuses the host buffers); itself on the CPU."""
        if self.device.type == "cpu":
            return value
        if self.device.type == "cuda":
            value = value.pin_memory()
        return value.to(self.device, non_blocking=True)

    def batches(self, epoch: int) -> List[np.ndarray]:
        """The seeds of every batch of ``epoch``."""
        return self.policy.batches(epoch)

    def _step(self, batch: MiniBatch, io_only: bool = False) -> float:
        """Fetch the batch's rows, train on it (``io_only``: skip the model, push placeholder rows so
        the embedding stamps that decide later pruning are the same) and update the caches."""
        model = self.model
        needed, rows, history = self.policy.gather(batch)  # host memory: the caches' rows
        computed = batch.computed_inputs
        if io_only:
            loss = float("nan")
            last_input = torch.zeros(computed.size, model.last_input_width, device=rows.device)
        else:
            x = torch.zeros(batch.n_id.numel(), self.store.num_features, device=rows.device)
            x[torch.from_numpy(needed)] = rows
            x = model.transform_features(self._to_device(x))
            blocks = [self._to_device(block) for block in batch.blocks]
            history = None if history is None else self._to_device(history)
            target = self._to_device(self.store.y[batch.output_nodes])
            model.train()
            self.optimizer.zero_grad()
            out = model(x, blocks, history)
            step_loss = F.cross_entropy(out, target)
            step_loss.backward()
            self.optimizer.step()
            loss = float(step_loss.detach())
            last_input = model.last_input[:computed.size]
        self.policy.finish_step(batch, last_input, self.iteration, working_bytes=rows.numel() * 4)
        self.iteration += 1
        return loss

    def train_epoch(self, io_only: bool = False) -> Dict[str, Any]:
        """One epoch; returns loss, time, and bytes/requests read from storage.

        ``io_only=True`` replays the epoch's storage traffic exactly (sampling, pruning, every
        cache) without the model's forward and backward passes: what is read depends only on the
        seeds, the samplers' random streams and the caches, never on the weights, so the byte and
        request figures equal a training epoch's (tested) at a fraction of the time. The loss is
        NaN, and the embedding cache then holds placeholder rows, so such a trainer refuses
        :meth:`evaluate`.
        """
        if io_only:
            self._io_only = True
        counter = self.store.counter
        before = {k: dict(v) for k, v in counter.by_kind().items()}
        emb = self.emb_cache
        emb_before = (emb.pulls, emb.pushes, emb.refreshes) if emb is not None else (0, 0, 0)
        start = time.perf_counter()
        epoch = self.epoch
        # dropout draws from torch's global generator: reseed per (seed, epoch) so an epoch does not
        # depend on what else ran in the process (e.g. another trainer compared against this one)
        torch.manual_seed(self.cfg.seed * 100_003 + epoch)
        with closing(self.policy.epoch(epoch, self.iteration)) as batches:  # closing: a group CSR is dropped
            losses = [self._step(batch, io_only) for batch in batches]
        elapsed = time.perf_counter() - start
        self.epoch += 1
        after = counter.by_kind()
        kinds = {k: {"bytes": v["bytes"] - before.get(k, {}).get("bytes", 0),
                     "requests": v["requests"] - before.get(k, {}).get("requests", 0)} for k, v in after.items()}
        kinds = {k: v for k, v in kinds.items() if v["bytes"] or v["requests"]}
        return {"epoch": epoch, "loss": float(np.mean(losses)), "time_s": elapsed, "batches": len(losses),
                "bytes_read": sum(v["bytes"] for v in kinds.values()),
                "requests": sum(v["requests"] for v in kinds.values()), "by_kind": kinds,
                "feature_hit_rate": self.cache.hits / max(1, self.cache.hits + self.cache.misses),
                "peak_budget_bytes": self.budget.peak,
                # historical embeddings: rows pulled (pruned subtrees), pushed, and pushes that replaced
                # an earlier (stale) value of the same node
                "embedding_pulls": (emb.pulls if emb is not None else 0) - emb_before[0],
                "embedding_pushes": (emb.pushes if emb is not None else 0) - emb_before[1],
                "embedding_refreshes": (emb.refreshes if emb is not None else 0) - emb_before[2]}

    def fit(self, eval_fanouts: Optional[Sequence[int]] = None, max_eval_nodes: Optional[int] = None,
            progress: Optional[bool] = None) -> Dict[str, Any]:
        """Train ``config.train.epochs`` epochs (fewer with ``train.patience``); report test accuracy at
        the best validation epoch, and the mean bytes/requests/time per epoch. ``progress`` defaults
        to ``config.train.progress``."""
        cfg = self.cfg
        best_val, best_state, best_epoch = -1.0, None, -1
        epochs = []
        bar = None
        if (cfg.train.progress if progress is None else progress):
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.train.epochs, desc=f"{cfg.sampling.method} seed {cfg.seed}", leave=False, disable=None)
        for _ in range(cfg.train.epochs):
            stats = self.train_epoch()
            val = self.evaluate("val", max_nodes=max_eval_nodes, fanouts=eval_fanouts)
            stats["val_acc"] = val
            epochs.append(stats)
            if val > best_val:
                best_val, best_epoch = val, stats["epoch"]
                best_state = copy.deepcopy(self.model.state_dict())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.3f}", val=f"{val:.3f}", MiB=f"{stats['bytes_read'] / 2**20:.1f}")
            if cfg.train.patience is not None and stats["epoch"] - best_epoch >= cfg.train.patience:
                break
        if bar is not None:
            bar.close()
        self.model.load_state_dict(best_state)
        test = self.evaluate("test", max_nodes=max_eval_nodes, fanouts=eval_fanouts)
        mean = lambda key: float(np.mean([e[key] for e in epochs]))  # noqa: E731
        return {"method": cfg.sampling.method, "seed": cfg.seed, "best_epoch": best_epoch, "val_acc": best_val,
                "test_acc": test, "bytes_per_epoch": mean("bytes_read"), "requests_per_epoch": mean("requests"),
                "epoch_time_s": mean("time_s"), "peak_budget_bytes": self.budget.peak,
                "budget_bytes": self.budget.total, "prep": {k: v for k, v in self.prep.items()},
                "epochs": [{k: v for k, v in e.items() if k != "by_kind"} for e in epochs]}

    @torch.no_grad()
    def evaluate(self, split: str = "test", max_nodes: Optional[int] = None,
                 fanouts: Optional[Sequence[int]] = None) -> float:
        """Accuracy on ``split`` with fresh (uncached) sampled inference in chunks of
        ``config.train.eval_batch_size`` seeds; its I/O is not counted in epoch figures (the counter is restored)."""
        if self._io_only:
            raise ConfigError("this trainer ran an io_only epoch (no training; its embedding cache holds placeholder "
                              "rows), so its accuracy means nothing; evaluate a trainer that ran train_epoch()")
        nodes = {"train": self.train_nodes, "val": self.val_nodes, "test": self.test_nodes}[split]
        if max_nodes is not None and nodes.size > max_nodes:
            nodes = np.sort(np.random.default_rng([self.cfg.seed, 99]).choice(nodes, max_nodes, replace=False))
        sampler = NeighborSampler(self.adjacency, list(fanouts) if fanouts else self.cfg.sampling.fanouts)
        counter = self.store.counter
        snapshot = {k: dict(v) for k, v in counter.by_kind().items()}
        self.model.eval()
        correct, chunk = 0, self.cfg.train.eval_batch_size
        try:
            for i in range(0, nodes.size, chunk):
                seeds = nodes[i:i + chunk]
                batch = sampler.sample(seeds, rng=np.random.default_rng([self.cfg.seed, 1 << 20, i]))
                x = self.model.transform_features(self._to_device(self.features.read(batch.n_id)))
                pred = self.model(x, [self._to_device(block) for block in batch.blocks]).argmax(1)
                correct += int((pred.cpu() == self.store.y[batch.output_nodes]).sum())
        finally:
            counter.reset()
            for kind, value in snapshot.items():
                counter.record(kind, value["bytes"], value["requests"])
        return correct / nodes.size


def run_out_of_core(config: Any, log: Any = None, progress: bool = False) -> Dict[str, Any]:
    """The out-of-core path of a :class:`~sgl.tasks.RunConfig` (``--sampler lru|ginex|outre
    --dataset store:DIR --memory-budget 256MB``): one trainer per seed over the store; returns the record."""
    from sgl.samplers.store import open_store
    from sgl.tasks.stats import summarize

    log = log or (lambda line: None)
    s = config.sampler
    dataset = str(config.dataset)
    if not dataset.startswith("store:"):
        raise ConfigError(f"--sampler {s.name} trains out of core from a disk store: pass --dataset store:DIR "
                          f"(build DIR with `sgl preprocess --dataset {dataset} --out DIR`)")
    if config.model not in ("sage", "gcn"):
        raise ConfigError(f"out-of-core training runs the models sage or gcn, got --model {config.model!r}")
    options = dict(config.model_config)
    # every OutOfCoreConfig option that no other flag sets rides on --model-option (e.g. staleness=40 group_csr=true)
    set_by_flags = {"method", "fanouts", "memory_budget", "conv", "seed"} | {f.name for f in fields(TrainConfig)}
    option_keys = set(OutOfCoreConfig.flat_keys()) - set_by_flags
    unknown = set(options) - option_keys
    if unknown:
        raise ConfigError(f"unknown model option(s) {sorted(unknown)} for out-of-core training; valid: "
                          f"{', '.join(sorted(option_keys))}")
    store_path = dataset[len("store:"):]
    records = []
    for seed in config.seeds:
        cfg = OutOfCoreConfig.from_flat(method=s.name, fanouts=s.fanouts or [10, 10], memory_budget=s.memory_budget,
                                        conv=config.model, seed=seed, **options, **asdict(config.train))
        trainer = OutOfCoreTrainer(open_store(store_path, verify="size" if records else "checksum"), cfg)
        if not records:
            log(f"store: {store_path} ({trainer.store.num_nodes:,} nodes, {trainer.store.num_edges:,} edges, "
                f"{trainer.store.num_features} features); method {cfg.sampling.method}, budget "
                f"{cfg.sampling.budget_bytes:,} bytes, fan-outs {cfg.sampling.fanouts}, batch {cfg.train.batch_size}")
        records.append(trainer.fit(progress=progress))
    summary: Dict[str, Any] = {"test_acc": summarize([r["test_acc"] for r in records])}
    for key in ("bytes_per_epoch", "requests_per_epoch", "epoch_time_s"):
        summary[f"mean_{key}"] = float(np.mean([r[key] for r in records]))
    summary["peak_budget_bytes"] = max(r["peak_budget_bytes"] for r in records)
    summary["budget_bytes"] = records[0]["budget_bytes"]
    from dataclasses import replace

    resolved = replace(config, sampler=replace(s, fanouts=list(cfg.sampling.fanouts)))
    return {"config": resolved.to_dict(), "runs": records, **summary}
