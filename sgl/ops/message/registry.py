"""The registry of message operators by name, and :func:`get_message_op`."""
from __future__ import annotations

from typing import Any, Dict, Type, Union

from sgl.errors import ConfigError
from sgl.ops.message.attention import JKAttention, RecursiveAttention
from sgl.ops.message.base import MessageOperator
from sgl.ops.message.fixed import ConcatHops, LastHop, MaxHops, MeanHops, MinHops, SumHops, WeightedHops
from sgl.ops.message.learnable import GatedHops, LearnableWeightedHops, ProjectedConcat
from sgl.ops.message.nafs import NodeAdaptiveSmoothing

__all__ = ["MESSAGE_OPERATORS", "get_message_op"]


MESSAGE_OPERATORS: Dict[str, Type[MessageOperator]] = {
    cls.name: cls
    for cls in (LastHop, MeanHops, SumHops, MaxHops, MinHops, ConcatHops, ProjectedConcat, WeightedHops,
                LearnableWeightedHops, GatedHops, JKAttention, RecursiveAttention, NodeAdaptiveSmoothing)
}


def get_message_op(name: Union[str, MessageOperator], **kwargs: Any) -> MessageOperator:
    """Build a message operator by registry name; keyword arguments are its constructor's.

    ``get_message_op(**op.config())`` rebuilds ``op`` (with freshly initialised parameters).

        >>> get_message_op("weighted", alpha=0.1, end=3)
        WeightedHops(start=0, end=3, alpha=0.1)
        >>> get_message_op("jk_attention", in_features=16, num_hops=4).learnable
        True
        >>> sorted(MESSAGE_OPERATORS)[:4]
        ['concat', 'gate', 'jk_attention', 'last']
    """
    if isinstance(name, MessageOperator):
        if kwargs:
            raise ConfigError("pass either a message operator instance or a name with keyword arguments, not both")
        return name
    key = str(name).lower()
    if key not in MESSAGE_OPERATORS:
        raise ConfigError(f"unknown message operator {name!r}; choose one of {sorted(MESSAGE_OPERATORS)}")
    try:
        return MESSAGE_OPERATORS[key](**kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad arguments for message operator {key!r}: {exc}") from exc
