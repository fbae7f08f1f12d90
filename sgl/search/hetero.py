"""PaSca search over the heterogeneous decoupled models (NARS-SIGN, SeHGNN, heterogeneous GAMLP).

(Moved here from ``sgl.models.hetero.search``: a model module no longer imports the trainer and
the search engine.)

On a :class:`~sgl.data.HeteroGraph` the SGAP design space (graph operator, message operator,
post-propagation) does not apply: propagation is fixed by the relation subsets or metapaths.
What PaSca searches there is the rest of the design: the model family, the hop count ``k``,
the hidden width, dropout, the number of NARS relation subsets, the longest label metapath
and GAMLP's attention. :class:`HeteroDesignSpace` names those knobs (a knob that does not
apply to a design's model is ``None``), :class:`HeteroDesignEvaluator`
trains a design and measures the same objectives as :class:`sgl.search.DesignEvaluator`
(validation accuracy, epoch/train time, latency, memory), and :func:`search_parts` is what
:func:`sgl.search.run_search` calls to pick them for a heterogeneous graph.

Example:
    >>> space = HeteroDesignSpace(models=["nars-sign", "hetero-gamlp"], k=(1, 2), hidden=[16])
    >>> space.size, space.canonical({"model": "nars-sign", "k": 2, "hidden": 16, "dropout": 0.5,
    ...                               "num_subsets": 4, "label_hops": 2, "attention": "recursive"})["label_hops"] is None
    (108, True)
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from sgl._checks import check_int, check_probability, with_message
from sgl.errors import ConfigError

__all__ = ["HeteroDesignSpace", "HeteroDesignEvaluator", "search_parts", "SEARCHABLE"]

#: the models the heterogeneous space searches, and which of the optional knobs each uses
SEARCHABLE: Dict[str, Tuple[str, ...]] = {
    "nars-sign": ("num_subsets",),
    "sehgnn": ("label_hops",),
    "hetero-gamlp": ("num_subsets", "label_hops", "attention"),
}
_OPTIONAL = ("num_subsets", "label_hops", "attention")


def _int_range(name: str, value: Any, low: int) -> Tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value)):
        raise ConfigError(f"{name} must be an integer range (low, high), got {value!r}")
    if value[0] > value[1] or value[0] < low:
        raise ConfigError(f"{name} range must satisfy {low} <= low <= high, got {list(value)}")
    return tuple(range(value[0], value[1] + 1))


def _list(name: str, value: Any, valid: Optional[Sequence[Any]] = None) -> Tuple[Any, ...]:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (tuple, list)) or not value or len(set(value)) != len(value):
        raise ConfigError(f"{name} needs a non-empty list of distinct choices, got {value!r}")
    if valid is not None and any(v not in valid for v in value):
        raise ConfigError(f"unknown {name} choice(s) {[v for v in value if v not in valid]}; valid: {list(valid)}")
    return tuple(value)


class HeteroDesignSpace:
    """Knobs: ``model`` (:data:`SEARCHABLE`), ``k`` (hops, integer range), ``hidden``,
    ``dropout``, and the model-dependent ``num_subsets`` (NARS-SIGN, heterogeneous GAMLP),
    ``label_hops`` (longest label metapath, 0 = no label input; SeHGNN, heterogeneous GAMLP)
    and ``attention`` (heterogeneous GAMLP). The space holds
    :math:`|k|\\,|hidden|\\,|dropout| \\sum_m \\prod_{o \\in opt(m)} |o|` distinct designs.
    """

    kind = "hetero"

    def __init__(self, models: Sequence[str] = tuple(SEARCHABLE), k: Tuple[int, int] = (1, 4),
                 hidden: Sequence[int] = (64, 128, 256), dropout: Union[float, Sequence[float]] = (0.3, 0.5),
                 num_subsets: Sequence[int] = (2, 4, 8), label_hops: Tuple[int, int] = (0, 3),
                 attention: Sequence[str] = ("jk", "recursive")) -> None:
        self.choices: Dict[str, Tuple[Any, ...]] = {
            "model": _list("models", models, tuple(SEARCHABLE)),
            "k": _int_range("k", k, 1),
            "hidden": _list("hidden", hidden),
            "dropout": tuple(float(p) for p in _list("dropout", dropout)),
            "num_subsets": _list("num_subsets", num_subsets),
            "label_hops": _int_range("label_hops", label_hops, 0),
            "attention": _list("attention", attention, ("jk", "recursive")),
        }
        for h in self.choices["hidden"] + self.choices["num_subsets"]:
            with_message(f"hidden and num_subsets choices must be positive integers, got {h!r}", check_int, h, 1)
        for p in self.choices["dropout"]:
            with_message(f"dropout values must lie in [0, 1), got {p!r}", check_probability, p)
            if p >= 1:
                raise ConfigError(f"dropout values must lie in [0, 1), got {p!r}")

    @property
    def size(self) -> int:
        """Number of distinct designs (knobs a model does not use are not counted)."""
        common = len(self.choices["k"]) * len(self.choices["hidden"]) * len(self.choices["dropout"])
        per_model = 0
        for model in self.choices["model"]:
            count = 1
            for knob in SEARCHABLE[model]:
                count *= len(self.choices[knob])
            per_model += count
        return common * per_model

    def canonical(self, design: Mapping[str, Any]) -> Dict[str, Any]:
        """The design checked against the space, knobs its model does not use set to ``None``."""
        if not isinstance(design, Mapping) or design.get("model") not in self.choices["model"]:
            raise ConfigError(f"a heterogeneous design needs model in {list(self.choices['model'])}, got {design!r}")
        uses = SEARCHABLE[design["model"]]
        out: Dict[str, Any] = {}
        for name, choices in self.choices.items():
            if name in _OPTIONAL and name not in uses:
                out[name] = None   # does not apply to this model
                continue
            if name not in design:
                raise ConfigError(f"design misses knob {name!r}; knobs: {list(self.choices)}")
            if design[name] not in choices:
                raise ConfigError(f"design value {name}={design[name]!r} is outside the space; choices: {list(choices)}")
            out[name] = design[name]
        return out

    validate = canonical

    def suggest(self, trial: Any) -> Dict[str, Any]:
        """Sample a design through an optuna ``trial`` (model-dependent knobs are conditional)."""
        params: Dict[str, Any] = {}
        for name, choices in self.choices.items():
            if name in _OPTIONAL and name not in SEARCHABLE[params["model"]]:
                continue
            if len(choices) == 1:
                params[name] = choices[0]
            elif name in ("k", "label_hops"):
                params[name] = trial.suggest_int(name, choices[0], choices[-1])
            else:
                params[name] = trial.suggest_categorical(name, list(choices))
        return self.canonical(params)

    def model_name(self, design: Mapping[str, Any]) -> str:
        return self.canonical(design)["model"]

    def to_model_config(self, design: Mapping[str, Any]) -> Dict[str, Any]:
        """The model-config fields of a design (``sgl train --model <design's model>``)."""
        design = self.canonical(design)
        config = {"k": design["k"], "hidden": design["hidden"], "dropout": design["dropout"]}
        config.update({name: design[name] for name in SEARCHABLE[design["model"]]})
        return config

    def to_dict(self) -> Dict[str, Any]:
        """JSON form; :meth:`from_dict` rebuilds the space (``kind`` marks it heterogeneous)."""
        out: Dict[str, Any] = {"kind": self.kind}
        for name, choices in self.choices.items():
            key = "models" if name == "model" else name
            out[key] = [choices[0], choices[-1]] if name in ("k", "label_hops") else list(choices)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HeteroDesignSpace":
        data = {key: value for key, value in dict(data).items() if key != "kind"}
        valid = {"models", "k", "hidden", "dropout", "num_subsets", "label_hops", "attention"}
        if set(data) - valid:
            raise ConfigError(f"unknown heterogeneous design-space key(s) {sorted(set(data) - valid)}; "
                              f"valid: {sorted(valid)}")
        return cls(**{key: tuple(v) if key in ("k", "label_hops") and isinstance(v, list) else v
                      for key, v in data.items()})

    def __repr__(self) -> str:
        return f"HeteroDesignSpace({self.size:,} designs over {', '.join(self.choices['model'])})"


class _FeatureCache:
    """Precomputed features per (model, precompute-relevant settings); counts as HopCache does."""

    def __init__(self) -> None:
        self.store: Dict[str, Tuple[Any, float]] = {}
        self.propagations = 0
        self.hits = 0


class HeteroDesignEvaluator:
    """Builds, trains and measures designs of a :class:`HeteroDesignSpace` on a heterogeneous graph;
    returns the metrics of :meth:`sgl.search.DesignEvaluator.evaluate` (accuracy = validation)."""

    def __init__(self, graph: Any, space: HeteroDesignSpace, train_config: Any = None, cache: Any = None,
                 latency_repeats: int = 3) -> None:
        from sgl.search.config import search_train_config

        self.graph, self.space = graph, space
        self.train_config = train_config or search_train_config()
        self.cache = cache if isinstance(cache, _FeatureCache) else _FeatureCache()
        self.latency_repeats = max(1, int(latency_repeats))

    def build(self, design: Mapping[str, Any]) -> Any:
        from sgl.models import build_model, model_config

        name = self.space.model_name(design)
        return build_model(name, self.graph, self.graph.num_classes,
                           model_config(name, **self.space.to_model_config(design)))

    def _features(self, design: Mapping[str, Any], model: Any) -> Tuple[Any, float]:
        config = self.space.to_model_config(design)
        key = json.dumps([self.space.model_name(design), {k: v for k, v in config.items()
                                                          if k in ("k", "num_subsets", "label_hops")}])
        if key in self.cache.store:
            self.cache.hits += 1
            return self.cache.store[key]
        start = time.perf_counter()
        features = model.precompute(self.graph)
        self.cache.store[key] = (features, time.perf_counter() - start)
        self.cache.propagations += 1
        return self.cache.store[key]

    def evaluate(self, design: Mapping[str, Any], seed: int = 0, on_epoch: Any = None) -> Dict[str, float]:
        from sgl.device import get_device
        from sgl.search.evaluate import _ReportingTrainer
        from sgl.search.evaluate import inference_latencies
        from sgl.search.objectives import MemoryMeter
        from sgl.tasks import Trainer

        config = replace(self.train_config, progress=False)
        trainer = Trainer(config) if on_epoch is None else _ReportingTrainer(config, on_epoch, self.graph.y)
        device = get_device(trainer.config.device)
        with MemoryMeter(device) as meter:
            model = self.build(design)
            features, precompute_s = self._features(design, model)
            result = trainer.fit(model, features, self.graph, seed=seed)
            latencies = inference_latencies(trainer, model, features, self.graph, device, self.latency_repeats)
        return {
            "accuracy": float(result["val_acc"]),
            "epoch_time": result["train_time_s"] / max(result["epochs_run"], 1),
            "train_time": precompute_s + result["train_time_s"],
            "latency": statistics.median(latencies),
            "memory": meter.peak_mb,
            "epochs_run": float(result["epochs_run"]),
            "params": float(sum(p.numel() for p in model.parameters())),
        }


def search_parts(graph: Any, space: Any) -> Tuple[Any, type]:
    """``(space, evaluator class)`` for a search on ``graph``: a heterogeneous graph searches a
    :class:`HeteroDesignSpace` (the SGAP space's default is replaced; an SGAP space narrowed
    by the caller is an error), any other graph keeps ``space`` and the SGAP evaluator."""
    from sgl.data import HeteroGraph
    from sgl.search.evaluate import DesignEvaluator
    from sgl.search.space import DesignSpace

    if not isinstance(graph, HeteroGraph):
        if isinstance(space, HeteroDesignSpace):
            raise ConfigError("a heterogeneous design space needs a heterogeneous dataset (acm, imdb, ogbn-mag, ...)")
        return space, DesignEvaluator
    if isinstance(space, DesignSpace):
        if space.to_dict() != DesignSpace().to_dict():
            raise ConfigError("the SGAP design space (graph_ops, messages, post_steps, ...) does not apply to a "
                              "heterogeneous graph; give a heterogeneous space (keys: models, k, hidden, dropout, "
                              "num_subsets, label_hops, attention)")
        space = HeteroDesignSpace()
    return space, HeteroDesignEvaluator


def space_from_dict(data: Mapping[str, Any]) -> Any:
    """A stored space (``DesignSpace.to_dict`` or :meth:`HeteroDesignSpace.to_dict`) rebuilt."""
    if isinstance(data, Mapping) and data.get("kind") == HeteroDesignSpace.kind:
        return HeteroDesignSpace.from_dict(data)
    from sgl.search.space import DesignSpace

    return DesignSpace.from_dict(data)
