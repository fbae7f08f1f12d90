"""Train one design and measure every objective (see :mod:`sgl.search.objectives`), and the
multi-fidelity path: per-epoch validation reports to an :class:`EpochPruner` (successive
halving or Hyperband over training epochs) that stops unpromising trials early.

Example:
    >>> import sgl
    >>> from sgl.search import DesignSpace, DesignEvaluator
    >>> from sgl.tasks import TrainConfig
    >>> graph = sgl.datasets.load("karate")
    >>> space = DesignSpace()
    >>> evaluator = DesignEvaluator(graph, space, TrainConfig(lr=0.01, epochs=5, progress=False))
    >>> metrics = evaluator.evaluate(space.design_at(0))
    >>> sorted(metrics)
    ['accuracy', 'epoch_time', 'epochs_run', 'latency', 'memory', 'model_bytes', 'params', 'train_time']
"""
from __future__ import annotations

import math
import statistics
import time
import zlib
from dataclasses import replace
from typing import Any, Callable, Dict, List, Mapping, Optional

import torch

from sgl._checks import check_choice, check_int
from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.models import SGAPConfig, SGAPModel
from sgl.models.features import NodeFeatures
from sgl.search.cache import HopCache
from sgl.search.config import PRUNERS, search_train_config
from sgl.search.objectives import MemoryMeter
from sgl.models.accel.quant import model_bytes
from sgl.search.space import DesignSpace
from sgl.search.variants import deploy_variant
from sgl.tasks import Trainer
from sgl.tasks.config import TrainConfig
from sgl.tasks.metrics import accuracy

__all__ = ["DesignEvaluator", "EpochPruner", "PRUNERS"]

#: ``on_epoch(epochs_done, val_acc)``: called after every epoch's validation; may raise to stop.
EpochHook = Callable[[int, float], None]


class _ReportingTrainer(Trainer):
    """A :class:`~sgl.tasks.Trainer` that hands every epoch's validation accuracy to a hook.

    ``Trainer.fit`` validates once right after each training epoch; the logits of that
    prediction are scored here (the same accuracy the trainer selects its best epoch with),
    so reporting costs no extra forward pass and leaves the training bit-identical.
    """

    def __init__(self, config: TrainConfig, on_epoch: EpochHook, labels: torch.Tensor) -> None:
        super().__init__(config)
        self._on_epoch, self._labels = on_epoch, labels
        self._epochs, self._pending = 0, False

    def _train_epoch(self, *args: Any, **kwargs: Any) -> float:
        loss = super()._train_epoch(*args, **kwargs)
        self._epochs += 1
        self._pending = True  # the next prediction is this epoch's validation
        return loss

    def _predict(self, model, features, index, device):  # noqa: ANN001 -- Trainer's signature
        logits = super()._predict(model, features, index, device)
        if self._pending:
            self._pending = False
            self._on_epoch(self._epochs, accuracy(logits, self._labels[index]))
        return logits


def inference_latencies(trainer: Any, model: Any, features: Any, graph: Any, device: Any, repeats: int) -> list:
    """Wall-clock seconds of ``repeats`` full-graph inferences (synchronised on CUDA)."""
    latencies = []
    for _ in range(repeats):
        start = time.perf_counter()
        trainer.predict_all(model, features, graph, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        latencies.append(time.perf_counter() - start)
    return latencies


class DesignEvaluator:
    """Builds, trains and measures designs of ``space`` on ``graph``.

    Args:
        graph: a graph with features, labels and train/val/test masks.
        space (DesignSpace): the space the designs come from.
        train_config (TrainConfig): optimisation settings shared by all trials
            (default :func:`~sgl.search.config.search_train_config`).
        cache (HopCache, optional): shared precomputed hops (one is made if omitted).
        latency_repeats (int): inference is timed this many times; the median is reported.
    """

    def __init__(self, graph: Any, space: DesignSpace, train_config: Optional[TrainConfig] = None,
                 cache: Optional[HopCache] = None, latency_repeats: int = 3) -> None:
        self.graph = graph
        self.space = space
        self.train_config = train_config or search_train_config()
        self.cache = cache or HopCache(graph)
        self.latency_repeats = max(1, int(latency_repeats))

    def build(self, design: Mapping[str, Any]) -> SGAPModel:
        config = SGAPConfig(**self.space.to_model_config(design))
        return SGAPModel(self.graph.num_features, self.graph.num_classes, config)

    def evaluate(self, design: Mapping[str, Any], seed: int = 0,
                 on_epoch: Optional[EpochHook] = None) -> Dict[str, float]:
        """Train ``design`` once (seeded) and return its measured objectives.

        ``on_epoch(epochs_done, val_acc)`` is called after every epoch (the multi-fidelity
        path); an exception it raises (``optuna.TrialPruned``) ends the training there.
        """
        model = self.build(design)
        cfg = model.config
        config = replace(self.train_config, progress=False)
        trainer = Trainer(config) if on_epoch is None else _ReportingTrainer(config, on_epoch, self.graph.y)
        device = get_device(trainer.config.device)
        with MemoryMeter(device) as meter:
            hops, precompute_s = self.cache.get(cfg.to_dict(), cfg.k)
            start = time.perf_counter()
            features = NodeFeatures(hops) if model.message_op.learnable else NodeFeatures(model.message_op(hops))
            precompute_s += time.perf_counter() - start
            result = trainer.fit(model, features, self.graph, seed=seed)
            variant = self.space.variant_of(design)
            if variant == "plain":
                latencies = inference_latencies(trainer, model, features, self.graph, device, self.latency_repeats)
                deployed = {"accuracy": float(result["val_acc"]), "latency": statistics.median(latencies),
                            "model_bytes": float(model_bytes(model))}
            else:   # measured on the deployed variant (int8, pruned, distilled student)
                deployed = deploy_variant(variant, model, trainer, features, self.graph, device,
                                          self.latency_repeats, seed)
        return {
            "accuracy": deployed["accuracy"],
            "epoch_time": result["train_time_s"] / result["epochs_run"],
            "train_time": precompute_s + result["train_time_s"],
            "latency": deployed["latency"],
            "memory": meter.peak_mb,
            "model_bytes": deployed["model_bytes"],
            "epochs_run": float(result["epochs_run"]),
            "params": float(sum(p.numel() for p in model.parameters())),
        }


class EpochPruner:
    """Successive halving (asynchronous, ASHA) or Hyperband over training epochs.

    optuna's pruners refuse multi-objective studies, so this applies their rule to one
    fidelity signal, the best validation accuracy a trial has reached so far. With minimum
    resource :math:`r` (``min_epochs``), reduction factor :math:`\\eta` and bracket
    :math:`s`, a trial is judged after :math:`r\\eta^{s+k}` epochs (rung :math:`k`, below
    ``max_epochs``): among the :math:`n` values recorded at that rung by the trials of its
    bracket (itself included) it continues only when its value is at least the
    :math:`\\max(1, \\lfloor n/\\eta \\rfloor)`-th largest, i.e. in the top :math:`1/\\eta`
    (optuna's ``SuccessiveHalvingPruner``). ``halving`` uses bracket 0 only; ``hyperband``
    has :math:`B = \\lfloor\\log_\\eta(\\text{max}/r)\\rfloor + 1` brackets, trials assigned by
    a hash of the trial number in proportion to :math:`\\lceil B\\eta^{B-1-s}/(s+1)\\rceil`
    (optuna's ``HyperbandPruner``). Rung values are trial user attributes
    (``sgl_rung_<k>``), so pruning decisions survive a restart and are shared by every
    process on one storage.

    >>> pruner = EpochPruner("hyperband", min_epochs=2, max_epochs=60, reduction_factor=3)
    >>> pruner.brackets, pruner.rungs(0), pruner.rungs(2)
    (4, [2, 6, 18, 54], [18, 54])
    >>> EpochPruner.promotable(0.7, [0.9, 0.8, 0.7, 0.6], 3)   # top 1/3 of 4 values: the best one
    False
    >>> EpochPruner.promotable(0.8, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], 3)   # top 2 of 6
    True
    """

    def __init__(self, kind: str, min_epochs: int, max_epochs: int, reduction_factor: int = 3) -> None:
        self.kind = check_choice(kind, "pruner", PRUNERS[1:])
        self.min_epochs = check_int(min_epochs, "min_epochs", 1)
        self.max_epochs = check_int(max_epochs, "epochs", 1)
        self.reduction_factor = check_int(reduction_factor, "reduction_factor", 2)
        if self.min_epochs >= self.max_epochs:
            raise ConfigError(f"min_epochs ({self.min_epochs}) must be below the trials' epochs "
                              f"({self.max_epochs}) for a pruner to stop anything; lower --min-epochs")
        eta = self.reduction_factor
        if kind == "halving":
            self.brackets = 1
        else:  # floor(log_eta(max / min)) + 1, in integers (no float log rounding)
            self.brackets, top = 1, self.min_epochs * eta
            while top <= self.max_epochs:
                self.brackets, top = self.brackets + 1, top * eta
        count = self.brackets
        self.budgets = [math.ceil(count * eta ** (count - 1 - s) / (s + 1)) for s in range(count)]

    def bracket_of(self, number: int) -> int:
        """The bracket of trial ``number`` (deterministic, the same in every process)."""
        n = zlib.crc32(str(int(number)).encode()) % sum(self.budgets)
        for bracket, budget in enumerate(self.budgets):
            n -= budget
            if n < 0:
                return bracket
        return self.brackets - 1

    def rungs(self, bracket: int) -> List[int]:
        """Epoch counts after which a trial of ``bracket`` is judged (each below ``max_epochs``)."""
        out, epochs = [], self.min_epochs * self.reduction_factor ** bracket
        while epochs < self.max_epochs:
            out.append(epochs)
            epochs *= self.reduction_factor
        return out

    @staticmethod
    def promotable(value: float, competing: List[float], reduction_factor: int) -> bool:
        """Whether ``value`` is in the top ``1/reduction_factor`` of ``competing`` (which holds it)."""
        keep = max(1, len(competing) // reduction_factor)
        return value >= sorted(competing)[-keep]

    def should_prune(self, trial: Any, epochs_done: int, value: float) -> bool:
        """Record ``value`` if ``epochs_done`` is a rung of the trial's bracket and judge it there.

        ``trial`` is a running ``optuna.trial.Trial``; its rivals are the study's trials (any
        state) of the same bracket that recorded this rung.
        """
        bracket = self.bracket_of(trial.number)
        rungs = self.rungs(bracket)
        if epochs_done not in rungs:
            return False
        key = f"sgl_rung_{rungs.index(epochs_done)}"
        if math.isnan(value):
            return True
        trial.set_user_attr(key, float(value))
        competing = [float(t.user_attrs[key]) for t in trial.study.get_trials(deepcopy=False)
                     if t.number != trial.number and key in t.user_attrs and self.bracket_of(t.number) == bracket]
        return not self.promotable(float(value), competing + [float(value)], self.reduction_factor)
