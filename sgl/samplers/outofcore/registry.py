"""Out-of-core cache policies by name: :data:`POLICIES`, :func:`policy_class`, :func:`make_policy`.

    >>> policy_class("ginex").__name__, METHODS
    ('GinexPolicy', ('lru', 'ginex', 'outre'))
"""
from __future__ import annotations

from typing import Any, Dict, Type

from sgl.errors import ConfigError
from sgl.samplers.outofcore.ginex import GinexPolicy
from sgl.samplers.outofcore.lru import LRUPolicy
from sgl.samplers.outofcore.outre import OUTREPolicy
from sgl.samplers.outofcore.policy import OutOfCorePolicy

__all__ = ["POLICIES", "METHODS", "policy_class", "make_policy"]

#: method name -> policy class
POLICIES: Dict[str, Type[OutOfCorePolicy]] = {cls.name: cls for cls in (LRUPolicy, GinexPolicy, OUTREPolicy)}
#: the method names, in the order the docs list them
METHODS = tuple(POLICIES)


def policy_class(method: str) -> Type[OutOfCorePolicy]:
    """The policy class registered as ``method``."""
    if not isinstance(method, str) or method not in POLICIES:
        raise ConfigError(f"unknown out-of-core method {method!r}; choose one of {', '.join(POLICIES)}")
    return POLICIES[method]


def make_policy(sampling: Any, batch_size: int, seed: int) -> OutOfCorePolicy:
    """A fresh policy for ``sampling.method`` (an :class:`~sgl.samplers.outofcore.OutOfCoreSampling`)."""
    return policy_class(sampling.method)(sampling, batch_size, seed)
