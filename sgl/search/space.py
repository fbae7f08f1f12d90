"""PaSca's design space of scalable GNNs: every knob named and typed.

A *design* is one choice per knob (a plain ``dict`` of JSON values). It maps one-to-one
onto an :class:`sgl.models.SGAPConfig` — the model config that ``sgl train --model sgap``
accepts — so any searched design is reproducible with ``sgl train --config``.

Knobs (defaults = PaSca's space, Zhang et al. WWW'22, widened to every operator of the zoo):

========================  =====================================================================
``graph_op``              pre-propagation operator: normalised adjacency with r in {0, 0.5, 1}
                          (``adj_r0`` = D^-1 A, ``adj_r0.5`` = D^-1/2 A D^-1/2, ``adj_r1`` = A D^-1),
                          personalised PageRank (``ppr``, alpha 0.1) or heat kernel (``heat``, t 5)
``k``                     propagation steps, 1-10
``message``               message operator over the hops (all 13 of :data:`sgl.ops.MESSAGE_OPERATORS`)
``base_model``            ``mlp`` or ``resmlp``
``num_layers``            base-model layers, 1-10 (1 = logistic regression)
``hidden``                base-model width
``post_steps``            post-propagation steps of the predictions, 0-10 (0 = none)
``post_graph_op``         post operator (only when ``post_steps > 0``)
``post_message``          parameter-free post message operator (only when ``post_steps > 0``)
========================  =====================================================================

Example:
    >>> from sgl.search import DesignSpace
    >>> space = DesignSpace()
    >>> space.size >= 150_000
    True
    >>> design = space.design_at(12345)
    >>> space.index_of(design)
    12345
    >>> space.to_model_config(space.design_at(0))["graph_op"]
    'adj'
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from sgl._checks import check_int, check_probability, with_message
from sgl.errors import ConfigError
from sgl.ops.message_ops import MESSAGE_OPERATORS

__all__ = ["Knob", "DesignSpace", "GRAPH_OPERATORS", "POST_OPERATORS", "POST_MESSAGES", "Design"]

Design = Dict[str, Any]

#: pre-propagation operator choices -> SGAPConfig fields
GRAPH_OPERATORS: Dict[str, Dict[str, Any]] = {
    "adj_r0": {"graph_op": "adj", "r": 0.0},
    "adj_r0.5": {"graph_op": "adj", "r": 0.5},
    "adj_r1": {"graph_op": "adj", "r": 1.0},
    "ppr": {"graph_op": "ppr", "alpha": 0.1},
    "heat": {"graph_op": "heat", "t": 5.0},
}

#: post-propagation operator choices -> SGAPConfig fields (PaSca's post types: adjacency, PPR 0.1-0.3)
POST_OPERATORS: Dict[str, Dict[str, Any]] = {
    "adj": {"post_graph_op": "adj"},
    "ppr_a0.1": {"post_graph_op": "ppr", "post_alpha": 0.1},
    "ppr_a0.2": {"post_graph_op": "ppr", "post_alpha": 0.2},
    "ppr_a0.3": {"post_graph_op": "ppr", "post_alpha": 0.3},
}

#: parameter-free message operators that keep the class dimension (valid after post-propagation)
POST_MESSAGES: Tuple[str, ...] = ("last", "mean", "sum", "max", "min", "weighted")

# options a message operator needs beyond what SGAPModel fills in (GBP's geometric weights)
_MESSAGE_OPTIONS: Dict[str, Dict[str, Any]] = {"weighted": {"alpha": 0.85}}


@dataclass(frozen=True)
class Knob:
    """One named, typed dimension of the design space.

    ``choices`` lists the values in order; an integer range ``low..high`` is stored as its
    list of integers. ``active_when`` names a knob that must be > 0 for this one to matter
    (post-processing knobs depend on ``post_steps``).
    """

    name: str
    choices: Tuple[Any, ...]
    kind: str = "categorical"  # or "int"
    active_when: Optional[str] = None

    @property
    def low(self) -> Any:
        return self.choices[0]

    @property
    def high(self) -> Any:
        return self.choices[-1]

    def __len__(self) -> int:
        return len(self.choices)


def _int_range(name: str, value: Any) -> Tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ConfigError(f"{name} must be an integer range (low, high), got {value!r}")
    low, high = value
    if low > high:
        raise ConfigError(f"{name} range is inconsistent: low={low} > high={high}; give (low, high) with low <= high")
    return tuple(range(low, high + 1))


def _choices(name: str, value: Any, valid: Optional[Sequence[Any]] = None) -> Tuple[Any, ...]:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (tuple, list)) or len(value) == 0:
        raise ConfigError(f"{name} needs a non-empty list of choices, got {value!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{name} lists a choice twice: {list(value)}")
    if valid is not None:
        unknown = [v for v in value if v not in valid]
        if unknown:
            raise ConfigError(f"unknown {name} choice(s) {unknown}; valid: {list(valid)}")
    return tuple(value)


class DesignSpace:
    """The searchable space of SGAP designs (see the module docstring for the knobs).

    Every argument narrows or widens one knob: integer ranges as ``(low, high)``
    (inclusive), categorical knobs as lists. ``dropout`` is a knob too (fixed at 0.5
    by default; give several values to search it).

    Args:
        graph_ops: names from :data:`GRAPH_OPERATORS`.
        k: propagation steps range (low >= 1).
        messages: names from :data:`sgl.ops.MESSAGE_OPERATORS`.
        base_models: ``"mlp"`` and/or ``"resmlp"``.
        num_layers: base-model depth range (low >= 1).
        hidden: base-model widths (positive integers).
        post_steps: post-propagation steps range (low >= 0).
        post_graph_ops: names from :data:`POST_OPERATORS`.
        post_messages: names from :data:`POST_MESSAGES`.
        dropout: dropout values in ``[0, 1)``.
        variants: deployment variants from :data:`sgl.search.variants.VARIANTS` (``plain``, ``int8``,
            ``pruned``, ``distilled``); with more than one, ``variant`` is a knob and each trial is
            measured as that deployment.
    """

    def __init__(self, graph_ops: Sequence[str] = tuple(GRAPH_OPERATORS), k: Tuple[int, int] = (1, 10),
                 messages: Sequence[str] = tuple(sorted(MESSAGE_OPERATORS)),
                 base_models: Sequence[str] = ("mlp", "resmlp"), num_layers: Tuple[int, int] = (1, 10),
                 hidden: Sequence[int] = (32, 64, 128, 256), post_steps: Tuple[int, int] = (0, 10),
                 post_graph_ops: Sequence[str] = tuple(POST_OPERATORS),
                 post_messages: Sequence[str] = POST_MESSAGES,
                 dropout: Union[float, Sequence[float]] = 0.5, variants: Sequence[str] = ("plain",)) -> None:
        ks = _int_range("k", k)
        if ks[0] < 1:
            raise ConfigError(f"k (propagation steps) must start at >= 1, got {ks[0]}")
        layers = _int_range("num_layers", num_layers)
        if layers[0] < 1:
            raise ConfigError(f"num_layers must start at >= 1, got {layers[0]}")
        posts = _int_range("post_steps", post_steps)
        if posts[0] < 0:
            raise ConfigError(f"post_steps must start at >= 0, got {posts[0]}")
        widths = _choices("hidden", hidden)
        for h in widths:
            with_message(f"hidden sizes must be positive integers, got {list(widths)}", check_int, h, 1)
        rates = _choices("dropout", dropout)
        for p in rates:
            with_message(f"dropout values must lie in [0, 1), got {list(rates)}", check_probability, p)
        self.knobs: Tuple[Knob, ...] = (
            Knob("graph_op", _choices("graph_ops", graph_ops, tuple(GRAPH_OPERATORS))),
            Knob("k", ks, "int"),
            Knob("message", _choices("messages", messages, tuple(MESSAGE_OPERATORS))),
            Knob("base_model", _choices("base_models", base_models, ("mlp", "resmlp"))),
            Knob("num_layers", layers, "int"),
            Knob("hidden", widths),
            Knob("dropout", tuple(float(p) for p in rates)),
            Knob("post_steps", posts, "int"),
            Knob("post_graph_op", _choices("post_graph_ops", post_graph_ops, tuple(POST_OPERATORS)),
                 active_when="post_steps"),
            Knob("post_message", _choices("post_messages", post_messages, POST_MESSAGES),
                 active_when="post_steps"),
        )
        from sgl.search.variants import VARIANTS

        kinds = _choices("variants", variants, VARIANTS)
        if len(kinds) > 1:   # a one-variant space keeps its old knobs (and its stored studies' keys)
            self.knobs += (Knob("variant", kinds),)
        self._variants = kinds
        self._by_name = {knob.name: knob for knob in self.knobs}

    # ------------------------------------------------------------------ size and enumeration
    @property
    def size(self) -> int:
        """Number of knob combinations (the product of the knobs' cardinalities)."""
        return math.prod(len(knob) for knob in self.knobs)

    @property
    def num_distinct(self) -> int:
        """Number of distinct models: designs with ``post_steps = 0`` ignore the post knobs."""
        core = math.prod(len(knob) for knob in self.knobs if knob.active_when is None and knob.name != "post_steps")
        post_knobs = math.prod(len(knob) for knob in self.knobs if knob.active_when == "post_steps")
        steps = self._by_name["post_steps"].choices
        return core * sum(1 if s == 0 else post_knobs for s in steps)

    def design_at(self, index: int) -> Design:
        """The ``index``-th design in mixed-radix order (``0 <= index < size``)."""
        with_message(f"design index must be an integer in [0, {self.size}), got {index!r}", check_int, index,
                     0, self.size - 1)
        design = {}
        for knob in reversed(self.knobs):
            index, digit = divmod(index, len(knob))
            design[knob.name] = knob.choices[digit]
        return {knob.name: design[knob.name] for knob in self.knobs}

    def index_of(self, design: Mapping[str, Any]) -> int:
        """Inverse of :meth:`design_at`."""
        design = self.validate(design)
        index = 0
        for knob in self.knobs:
            index = index * len(knob) + knob.choices.index(design[knob.name])
        return index

    def sample(self, rng: Optional[random.Random] = None) -> Design:
        """A uniformly random design."""
        rng = rng or random.Random()
        return self.design_at(rng.randrange(self.size))

    # ------------------------------------------------------------------ validation / encoding
    def validate(self, design: Mapping[str, Any]) -> Design:
        """Check a design against the space; returns it as a plain dict in knob order."""
        if not isinstance(design, Mapping):
            raise ConfigError(f"a design is a mapping of knob -> value, got {type(design).__name__}")
        missing = [k.name for k in self.knobs if k.name not in design and k.active_when is None]
        unknown = sorted(set(design) - set(self._by_name))
        if missing or unknown:
            raise ConfigError(f"design has missing knob(s) {missing} / unknown knob(s) {unknown}; "
                              f"knobs: {[k.name for k in self.knobs]}")
        out = {}
        for knob in self.knobs:
            if knob.name not in design:  # an inactive post knob: any valid value
                out[knob.name] = knob.choices[0]
                continue
            value = design[knob.name]
            if value not in knob.choices:
                raise ConfigError(f"design value {knob.name}={value!r} is outside the space; choices: {list(knob.choices)}")
            out[knob.name] = knob.choices[knob.choices.index(value)]
        return out

    def canonical(self, design: Mapping[str, Any]) -> Design:
        """The design with inactive knobs reset to their first choice (equal models compare equal)."""
        design = self.validate(design)
        for knob in self.knobs:
            if knob.active_when is not None and design[knob.active_when] == 0:
                design[knob.name] = knob.choices[0]
        return design

    def encode(self, design: Mapping[str, Any]) -> Dict[str, Any]:
        """The optimizer's parameters for a design: active knobs only (what ``suggest`` would sample)."""
        design = self.canonical(design)
        return {k.name: design[k.name] for k in self.knobs
                if k.active_when is None or design[k.active_when] > 0}

    def decode(self, params: Mapping[str, Any]) -> Design:
        """Inverse of :meth:`encode`: a canonical design from optimizer parameters."""
        return self.canonical(params)

    def suggest(self, trial: Any) -> Design:
        """Sample a design through an optuna ``trial`` (define-by-run; post knobs are conditional)."""
        params: Dict[str, Any] = {}
        for knob in self.knobs:
            if knob.active_when is not None and params[knob.active_when] == 0:
                continue
            if len(knob) == 1:
                params[knob.name] = knob.choices[0]
            elif knob.kind == "int":
                params[knob.name] = trial.suggest_int(knob.name, knob.low, knob.high)
            else:
                params[knob.name] = trial.suggest_categorical(knob.name, list(knob.choices))
        return self.decode(params)

    # ------------------------------------------------------------------ model config
    def to_model_config(self, design: Mapping[str, Any]) -> Dict[str, Any]:
        """The :class:`~sgl.models.SGAPConfig` fields of a design (``sgl train --model sgap``)."""
        design = self.canonical(design)
        config: Dict[str, Any] = {**GRAPH_OPERATORS[design["graph_op"]], "k": design["k"],
                                  "message": design["message"],
                                  "message_options": dict(_MESSAGE_OPTIONS.get(design["message"], {})),
                                  "base_model": design["base_model"], "num_layers": design["num_layers"],
                                  "hidden": design["hidden"], "dropout": design["dropout"],
                                  "post_steps": design["post_steps"]}
        if design["message"] == "projected_concat":
            config["message_options"]["hidden"] = design["hidden"]
        if design["post_steps"] > 0:
            config.update(POST_OPERATORS[design["post_graph_op"]])
            config["post_message"] = design["post_message"]  # "weighted" = GBP's alpha 0.85
        return config

    def to_dict(self) -> Dict[str, Any]:
        """JSON form (``DesignSpace.from_dict`` rebuilds the space)."""
        out: Dict[str, Any] = {}
        names = {"graph_op": "graph_ops", "message": "messages", "base_model": "base_models",
                 "post_graph_op": "post_graph_ops", "post_message": "post_messages"}
        for knob in self.knobs:
            if knob.kind == "int":
                out[knob.name] = [knob.low, knob.high]
            else:
                out[names.get(knob.name, knob.name)] = list(knob.choices)
        if "variant" in out:
            out["variants"] = out.pop("variant")
        return out

    def variant_of(self, design: Mapping[str, Any]) -> str:
        """The deployment variant of ``design`` (the only one when the space has no variant knob)."""
        return design.get("variant", self._variants[0])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DesignSpace":
        if not isinstance(data, Mapping):
            raise ConfigError(f"a design space is a mapping of knob -> choices, got {type(data).__name__}")
        valid = {"graph_ops", "k", "messages", "base_models", "num_layers", "hidden", "post_steps",
                 "post_graph_ops", "post_messages", "dropout", "variants"}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise ConfigError(f"unknown design-space key(s) {unknown}; valid: {sorted(valid)}")
        kwargs = {key: (tuple(value) if key in ("k", "num_layers", "post_steps") and isinstance(value, list)
                        else value) for key, value in data.items()}
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"DesignSpace({self.size:,} designs, {self.num_distinct:,} distinct models)"
