"""Backward-compatible path of :mod:`sgl.ops.message` (the message operators moved there).

New code imports from :mod:`sgl.ops` or :mod:`sgl.ops.message`.
"""
from sgl.ops.message import *  # noqa: F401,F403 -- the names of sgl.ops.message.__all__
from sgl.ops.message import GBP_DEFAULT_ALPHA  # noqa: F401
from sgl.ops.message import __all__  # noqa: F401 -- the same public names as before the move
from sgl.ops.message._common import (  # noqa: F401 -- private helpers, for old imports
    _PROJECTION_ACTIVATIONS,
    _SCORE_ACTIVATIONS,
    _check_choice,
    _check_int,
    _init_linear,
    _score_activation,
    _weighted_sum,
)
from sgl.ops.message.base import _LearnableOperator, _PerNodeWeighted  # noqa: F401
from sgl.ops.message.fixed import _sum  # noqa: F401
