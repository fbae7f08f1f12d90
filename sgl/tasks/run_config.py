"""``RunConfig``: one typed, serialisable description of a training run.

The same object is built by ``sgl train`` (from flags or ``--config FILE``), read back from a
run record (``record["config"]``) and passed to :func:`sgl.tasks.run`. Full-graph node
classification starts from the model's preset on the dataset (:func:`sgl.models.preset`) with
the explicit options on top, and records the resolved values, so a record replays exactly. It names the task,
the model and its config, the dataset, the seeds, the training settings (a
:class:`~sgl.tasks.TrainConfig`), and the optional parts of a run: a sampler (mini-batch or
out-of-core), graph structure learning, GAMLP's RLU, and a CTR embedding with its compression
ratio. An option that the chosen task does not read is a :class:`~sgl.errors.ConfigError`,
never silently dropped. Under task ``link`` a zoo model (``gcn``, ``sgc``, ``gamlp``...) is trained
as an encoder with a pair decoder (:mod:`sgl.tasks.link_supervised`, options
:data:`~sgl.tasks.link_supervised.LINK_OPTIONS`); a self-supervised one is evaluated as before.

Node classification by a self-supervised model (``model`` one of ``gcmae``, ``graphmae``,
``grace``, ``dgi``, ``gae``) pre-trains it on the whole graph and trains a linear probe on its
frozen embeddings (:func:`sgl.tasks.run_linear_probe`); its ``task_options`` are the probe's
(:data:`PROBE_OPTIONS`: by default the official GCMAE/GraphMAE protocol, Adam lr 0.01, weight
decay 1e-4, 400 epochs, best-validation epoch, raw embeddings).

``procs > 1`` runs on that many processes (``sgl train --procs N``, or torchrun's world) with the
settings of a :class:`~sgl.tasks.dist_config.DistributedConfig`; a run without a multi-process
path is refused (:mod:`sgl.tasks.dist_config`).

The serialised form (:meth:`RunConfig.to_dict`) keeps the flat layout of earlier records
(``structure_options``, ``embedding``, ``compression`` ...) so every record written before
still replays.

Example:
    >>> config = RunConfig.from_dict({"model": "sgc", "dataset": "karate", "seeds": 2, "train": {"epochs": 5}})
    >>> config.seeds, config.train.epochs, config.train.lr   # SGC's own default lr
    ([0, 1], 5, 0.2)
    >>> RunConfig.from_dict(config.to_dict()) == config
    True
    >>> RunConfig.from_dict({"task": "ctr", "rlu": {"stages": [10]}})
    Traceback (most recent call last):
    ...
    sgl.errors.ConfigError: rlu does not apply to --task ctr (GAMLP's RLU trains node classifiers); remove it
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.tasks.config import TrainConfig
from sgl.tasks.dist_config import DistributedConfig, check_procs
from sgl.tasks.distill_config import DistillConfig, check_distill_run
from sgl.tasks.rlu import RLUConfig

__all__ = ["RunConfig", "StructureConfig", "SamplingConfig", "CTRConfig", "TASKS", "seed_list",
           "OUT_OF_CORE_METHODS", "IN_MEMORY_SAMPLERS", "PROBE_OPTIONS"]

#: task -> (default model, default dataset, default number of seeds)
TASKS: Dict[str, tuple] = {
    "node": ("sgc", "karate", 10),
    "link": ("gcmae", "cora", 5),
    "cluster": ("gcmae", "cora", 5),
    "graph": ("gcmae", "mutag", 3),
    "ctr": ("deepfm", "synthetic-ctr", 3),
}
#: options of each self-supervised task (defaults)
SSL_TASK_OPTIONS: Dict[str, Dict[str, Any]] = {
    "link": {"val_ratio": 0.05, "test_ratio": 0.1},
    "cluster": {"n_init": 10},
    "graph": {"folds": 10, "pooling": "mean", "classifier": "svm"},
}
#: options of the linear probe of a self-supervised model under task "node" (defaults)
PROBE_OPTIONS: Dict[str, Any] = {"probe_epochs": 400, "probe_lr": 0.01, "probe_weight_decay": 1e-4,
                                 "probe_standardize": False}
IN_MEMORY_SAMPLERS = ("neighbor", "saint-node", "saint-edge", "saint-rw", "cluster")
OUT_OF_CORE_METHODS = ("lru", "ginex", "outre")


def seed_list(seeds: Union[int, Sequence[int]], flag: str = "--seeds") -> List[int]:
    """``3`` -> ``[0, 1, 2]``; a list of seeds is kept as it is (non-empty, integers)."""
    if isinstance(seeds, bool):
        raise ConfigError(f"{flag} must be a number of seeds or a list of seeds, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ConfigError(f"{flag} must be at least 1, got {seeds}")
        return list(range(seeds))
    try:
        out = [check_int(s, f"every seed in {flag}") for s in seeds]
    except TypeError:
        raise ConfigError(f"{flag} must be a number of seeds or a list of seeds, got {seeds!r}") from None
    if not out:
        raise ConfigError(f"{flag} must list at least one seed")
    return out


@dataclass
class StructureConfig:
    """Graph structure learning before training (``rwgsl`` or ``knn``; see docs/gsl_ssl.md).

    ``pseudo``: RWGSL's pseudo-labels from an ensemble of ``pseudo_seeds`` models of this zoo
    model trained on the training labels (instead of its built-in logistic regression).
    """

    name: str
    options: Dict[str, Any] = field(default_factory=dict)
    pseudo: Optional[str] = None
    pseudo_seeds: int = 5

    def __post_init__(self) -> None:
        if self.pseudo and str(self.name).lower() != "rwgsl":
            raise ConfigError("--structure-pseudo sets RWGSL's pseudo-labels: it needs --structure rwgsl")
        if isinstance(self.pseudo_seeds, bool) or not isinstance(self.pseudo_seeds, int) or self.pseudo_seeds < 1:
            raise ConfigError(f"--structure-pseudo-seeds must be a positive integer, got {self.pseudo_seeds!r}")


@dataclass
class SamplingConfig:
    """Mini-batch training on sampled subgraphs (``neighbor``, GraphSAINT, Cluster-GCN) or
    out-of-core training from a disk store (``lru``, ``ginex``, ``outre`` with ``memory_budget``).

    ``options``: further fields of :class:`sgl.tasks.minibatch.SamplerConfig` (in memory).
    """

    name: str
    fanouts: Optional[List[int]] = None
    memory_budget: Optional[Union[str, int]] = None
    options: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in IN_MEMORY_SAMPLERS + OUT_OF_CORE_METHODS:
            raise ConfigError(f"unknown sampler {self.name!r}; choose one of "
                              f"{', '.join(IN_MEMORY_SAMPLERS + OUT_OF_CORE_METHODS)}")
        if self.fanouts is not None:
            from sgl.samplers.neighbor import check_fanouts

            self.fanouts = list(check_fanouts(self.fanouts))
        if self.out_of_core:
            if not self.memory_budget:
                raise ConfigError(f"--sampler {self.name} needs --memory-budget (e.g. 256MB) for its caches")
            if self.options:
                raise ConfigError(f"sampler option(s) {sorted(self.options)} do not apply to out-of-core training; "
                                  f"its settings ride on --model-option")
        elif self.memory_budget:
            raise ConfigError("--memory-budget bounds the caches of out-of-core training (--sampler lru, ginex or "
                              "outre with --dataset store:DIR); in-memory sampled training keeps the whole graph "
                              "in memory")

    @property
    def out_of_core(self) -> bool:
        return self.name in OUT_OF_CORE_METHODS


@dataclass
class CTRConfig:
    """The CTR embedding: backend, compression ratio (searchable like any other field), width,
    backend options, and the train/val/test split fractions."""

    embedding: str = "full"
    compression: float = 1.0
    embed_dim: int = 16
    embedding_options: Dict[str, Any] = field(default_factory=dict)
    split: List[float] = field(default_factory=lambda: [0.8, 0.1, 0.1])
    #: rows read at once from a memory-mapped CTR store while training
    block_rows: int = 1 << 18

    def __post_init__(self) -> None:
        self.block_rows = check_int(self.block_rows, "block_rows", minimum=1)
        self.compression = check_real(self.compression, "the CTR compression ratio", 0.0, open_low=True)
        self.embed_dim = check_int(self.embed_dim, "the CTR embedding width (embed_dim)", minimum=1)
        self.split = [float(x) for x in self.split]
        if self.embedding in ("het", "hetgmp"):  # HET / HET-GMP workers: their options, before any data loads
            from sgl.embeddings.protocol import check_protocol_options

            check_protocol_options(self.embedding, self.compression, self.embedding_options)


#: keys of the flat serialised layout that belong to one part
_STRUCTURE_KEYS = {"structure": "name", "structure_options": "options", "structure_pseudo": "pseudo",
                   "structure_pseudo_seeds": "pseudo_seeds"}
_CTR_KEYS = tuple(f.name for f in fields(CTRConfig))


@dataclass
class RunConfig:
    """A whole run: see the module docstring. Build it with :meth:`from_dict` (defaults of the
    task and model filled in), or directly with a ready :class:`TrainConfig`."""

    task: str = "node"
    model: Optional[str] = None
    dataset: Optional[str] = None
    root: Optional[str] = None
    seeds: Union[int, List[int], None] = None
    model_config: Dict[str, Any] = field(default_factory=dict)
    dataset_options: Dict[str, Any] = field(default_factory=dict)
    #: training settings; node classification (None: the model family's defaults). The
    #: self-supervised tasks train with their model config's own lr/epochs and take none.
    train: Optional[TrainConfig] = None
    sampler: Optional[SamplingConfig] = None
    structure: Optional[StructureConfig] = None
    rlu: Optional[RLUConfig] = None
    ctr: Optional[CTRConfig] = None
    #: options of the self-supervised tasks: link val_ratio/test_ratio, cluster n_init,
    #: graph folds/pooling/classifier
    task_options: Dict[str, Any] = field(default_factory=dict)
    cache_dir: Optional[str] = None
    #: processes (``sgl train --procs N`` spawns them; under torchrun the world's size) and how
    #: they are used (:class:`~sgl.tasks.dist_config.DistributedConfig`; procs > 1 only)
    procs: int = 1
    distributed: Optional[DistributedConfig] = None
    #: distil a teacher into this (graph-free MLP) student (:mod:`sgl.tasks.distill`)
    distill: Optional[DistillConfig] = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"unknown task {self.task!r}; choose one of {', '.join(TASKS)}")
        model, dataset, seeds = TASKS[self.task]
        if self.model is None:
            # sampled and out-of-core training run GraphSAGE by default
            self.model = "sage" if self.sampler is not None else model
        self.dataset = dataset if self.dataset is None else self.dataset
        self.seeds = seed_list(seeds if self.seeds is None else self.seeds)
        self.model_config, self.dataset_options = dict(self.model_config), dict(self.dataset_options)
        if self._has_preset():
            from sgl.models import preset

            # the model's published/validated setting on this dataset, under the explicit options
            self.model_config = {**preset(self.model, self.dataset)[0], **self.model_config}
        self._check_parts()
        check_procs(self)

    def _has_preset(self) -> bool:
        """Full-graph node classification by a zoo model: a per-dataset preset may apply."""
        return self.task == "node" and self.sampler is None and not self.self_supervised

    @property
    def self_supervised(self) -> bool:
        """A self-supervised model: every cluster/graph run, a link run by ``gcmae``, ``graphmae``,
        ``grace``, ``dgi`` or ``gae``, and node classification by a linear probe on their embeddings."""
        if self.task in SSL_TASK_OPTIONS:
            return not self.supervised_link
        if self.task != "node":
            return False
        from sgl.models.ssl import SSL_MODELS

        return str(self.model).lower() in SSL_MODELS

    @property
    def supervised_link(self) -> bool:
        """Link prediction by a zoo model trained with a decoder (:mod:`sgl.tasks.link_supervised`)."""
        from sgl.models.ssl import SSL_MODELS

        return self.task == "link" and str(self.model).lower() not in SSL_MODELS

    # ------------------------------------------------------------------ validation
    def _not_for(self, what: str, why: str) -> ConfigError:
        return ConfigError(f"{what} does not apply to --task {self.task} ({why}); remove it")

    def _check_parts(self) -> None:
        if self.task == "node" and self.self_supervised:
            self._check_probe()
            return
        if self.supervised_link:
            from sgl.tasks.link_supervised import check_link_model, check_link_options

            check_link_model(self.model)
            for name in ("rlu", "structure", "sampler", "cache_dir", "ctr"):
                if getattr(self, name) is not None:
                    raise self._not_for(name, f"--model {self.model} is trained as a link encoder")
            self.task_options = check_link_options(self.task_options)
            self.train = self.train or self.default_train()
            return
        node = self.task == "node"
        if self.distill is not None:
            check_distill_run(self)
        if self.rlu is not None and (not node or self.sampler is not None):
            raise self._not_for("rlu", "GAMLP's RLU trains node classifiers" if not node else
                                "RLU distillation is not supported with sampled mini-batch training")
        if self.structure is not None and (not node or self.sampler is not None):
            raise self._not_for("structure", "structure learning runs before full-graph node classification"
                                if not node else "structure learning is not supported with --sampler")
        if self.sampler is not None and not node:
            raise self._not_for("sampler", "samplers train node classifiers")
        if self.cache_dir is not None and (not node or self.sampler is not None):
            raise self._not_for("cache_dir (--cache-dir)", "it caches propagated features of scalable models")
        if self.ctr is not None and self.task != "ctr":
            raise self._not_for("the CTR embedding", "it configures --task ctr")
        if self.task == "ctr" and self.ctr is None:
            self.ctr = CTRConfig()
        allowed = SSL_TASK_OPTIONS.get(self.task, {})
        unknown = set(self.task_options) - set(allowed)
        if unknown:
            raise self._not_for(f"task option(s) {sorted(unknown)}", f"it takes {sorted(allowed) or 'none'}")
        self.task_options = {**allowed, **self.task_options}
        if self.task in SSL_TASK_OPTIONS:
            if self.train is not None:
                raise self._not_for("train", "self-supervised models train with their own lr/epochs/weight_decay "
                                    "model options")
        elif self.train is None:
            self.train = self.default_train()
        if self.sampler is not None and not self.sampler.out_of_core and "k" in self.model_config:
            raise ConfigError("k (propagation hops) does not apply to sampled training: the number of sampled hops "
                              "is len(--fanouts); remove --k")

    def _check_probe(self) -> None:
        why = f"--model {self.model} is pre-trained on the whole graph, then probed linearly"
        for name in ("rlu", "structure", "sampler", "cache_dir", "ctr"):
            if getattr(self, name) is not None:
                raise self._not_for(name, why)
        if self.train is not None:
            raise self._not_for("train", "self-supervised models pre-train with their own lr/epochs/weight_decay "
                                "model options; the probe takes probe_lr, probe_epochs, probe_weight_decay")
        unknown = set(self.task_options) - set(PROBE_OPTIONS)
        if unknown:
            raise self._not_for(f"task option(s) {sorted(unknown)}", f"the linear probe takes {sorted(PROBE_OPTIONS)}")
        opts = {**PROBE_OPTIONS, **self.task_options}
        opts["probe_epochs"] = check_int(opts["probe_epochs"], "probe_epochs", minimum=1)
        opts["probe_lr"] = check_real(opts["probe_lr"], "probe_lr", 0.0, open_low=True)
        opts["probe_weight_decay"] = check_real(opts["probe_weight_decay"], "probe_weight_decay", 0.0)
        if not isinstance(opts["probe_standardize"], bool):
            raise ConfigError(f"probe_standardize must be true or false, got {opts['probe_standardize']!r}")
        self.task_options = opts

    def default_train(self, overrides: Optional[Mapping[str, Any]] = None) -> TrainConfig:
        """The model family's training defaults with ``overrides`` on top."""
        base: Dict[str, Any] = {}
        if self.task == "node" and self.sampler is None:
            from sgl.models import default_train_config, preset

            base = {**default_train_config(self.model), **preset(self.model, self.dataset)[1]}
        elif self.task == "node" and not self.sampler.out_of_core:
            from sgl.samplers.models import SampledGNN

            base = dict(SampledGNN.default_train_config)
        elif self.task == "node":
            from dataclasses import asdict

            from sgl.tasks.outofcore import OutOfCoreConfig

            base = asdict(OutOfCoreConfig.default_train())
        elif self.task == "ctr":
            from sgl.tasks.ctr import CTR_TRAIN_DEFAULTS

            base = dict(CTR_TRAIN_DEFAULTS)
        elif self.task == "link":
            from sgl.tasks.link_supervised import LINK_TRAIN_DEFAULTS

            base = dict(LINK_TRAIN_DEFAULTS)
        try:
            return TrainConfig(**{**base, **dict(overrides or {})})
        except TypeError as exc:
            raise ConfigError(f"bad training option: {exc}") from None

    # ------------------------------------------------------------------ (de)serialisation
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **overrides: Any) -> "RunConfig":
        """Read the flat layout written by :meth:`to_dict` (and by every earlier record);
        ``train`` may be partial (the model's defaults fill the rest)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a run config must be a mapping, got {type(data).__name__}")
        data = {**copy.deepcopy(dict(data)), **overrides}
        task = data.pop("task", None) or "node"
        valid = {"model", "dataset", "root", "seeds", "model_config", "dataset_options", "train", "sampler", "rlu",
                 "task_options", "cache_dir", "procs", "distributed", "distill", *_STRUCTURE_KEYS,
                 *(_CTR_KEYS if task == "ctr" else ())}
        unknown = set(data) - valid
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} in the run config; valid: {sorted(valid | {'task'})}")
        structure = {part: data.pop(key, None) for key, part in _STRUCTURE_KEYS.items()}
        structure = {part: value for part, value in structure.items() if value is not None}
        if "name" not in structure:  # StructureConfig checks the rest once it has a learner
            if structure.get("options"):
                raise ConfigError("--structure-option needs --structure rwgsl|knn")
            if structure.get("pseudo"):
                raise ConfigError("--structure-pseudo sets RWGSL's pseudo-labels: it needs --structure rwgsl")
        ctr = {key: data.pop(key) for key in _CTR_KEYS if key in data}
        train = data.pop("train", None)
        if task == "ctr" and isinstance(train, Mapping) and "block_rows" in train:
            train = dict(train)
            ctr.setdefault("block_rows", train.pop("block_rows"))
        rlu = data.pop("rlu", None)
        sampler = data.pop("sampler", None)
        distributed = data.pop("distributed", None)
        distill = data.pop("distill", None)
        if distill is not None and not isinstance(distill, Mapping):
            raise ConfigError(f"distill must be a mapping of DistillConfig fields, got {distill!r}")
        if distributed is not None and not isinstance(distributed, Mapping):
            raise ConfigError(f"distributed must be a mapping of DistributedConfig fields, got {distributed!r}")
        try:
            config = cls(task=task, train=TrainConfig() if train is not None else None,
                         structure=StructureConfig(**structure) if "name" in structure else None,
                         rlu=RLUConfig(**rlu) if rlu else None,
                         sampler=_sampling(sampler, data.get("model_config", {})),
                         ctr=CTRConfig(**ctr) if task == "ctr" else None,
                         distributed=DistributedConfig(**distributed) if distributed else None,
                         distill=DistillConfig(**distill) if distill else None, **data)
        except TypeError as exc:
            raise ConfigError(f"bad run config: {exc}") from None
        if train is not None:
            if not isinstance(train, Mapping):
                raise ConfigError(f"train must be a mapping of TrainConfig fields, got {train!r}")
            config.train = config.default_train(train)
            check_procs(config)  # again: the device is known now
        return config

    def to_dict(self) -> Dict[str, Any]:
        """The flat JSON layout of run records (``sgl train --config`` reads it back)."""
        out: Dict[str, Any] = {"task": self.task, "model": self.model, "dataset": self.dataset, "root": self.root,
                               "seeds": list(self.seeds), "model_config": copy.deepcopy(self.model_config),
                               "dataset_options": copy.deepcopy(self.dataset_options)}
        if self.train is not None:
            out["train"] = {k: v for k, v in self.train.to_dict().items() if k != "progress"}
        if self.task == "node":
            out["rlu"] = self.rlu.to_dict() if self.rlu is not None else None
            s = self.structure
            out.update({"structure": s.name if s else None, "structure_options": dict(s.options) if s else {},
                        "structure_pseudo": s.pseudo if s else None, "structure_pseudo_seeds": s.pseudo_seeds if s else 5})
            if self.sampler is not None:
                out["sampler"] = {"name": self.sampler.name, "fanouts": self.sampler.fanouts,
                                  "memory_budget": self.sampler.memory_budget, **copy.deepcopy(self.sampler.options)}
            if self.cache_dir is not None:
                out["cache_dir"] = self.cache_dir
        if self.ctr is not None:
            out.update(copy.deepcopy(self.ctr.__dict__))
        if self.task_options:
            out["task_options"] = dict(self.task_options)
        if self.distill is not None:
            out["distill"] = self.distill.to_dict()
        if self.procs != 1:  # one-process records keep their earlier layout
            out["procs"] = self.procs
            out["distributed"] = self.distributed.to_dict()
        return out


def _sampling(value: Any, model_config: Mapping[str, Any]) -> Optional[SamplingConfig]:
    """A sampler entry of a config: a name, or a mapping (records hold SamplerConfig's fields)."""
    if value is None:
        return None
    if isinstance(value, str):
        return SamplingConfig(value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"sampler must be a name or a mapping, got {value!r}")
    value = dict(value)
    name = value.pop("name", None) or value.pop("sampler", None)
    if name is None:
        raise ConfigError("a sampler mapping needs a name (e.g. {'name': 'neighbor', 'fanouts': [15, 10]})")
    value.pop("sampler", None)
    return SamplingConfig(name, fanouts=value.pop("fanouts", None), memory_budget=value.pop("memory_budget", None),
                          options=value)
