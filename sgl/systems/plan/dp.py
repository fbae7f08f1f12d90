"""Compatibility shim: :mod:`sgl.systems.parallel.dp` under its old name."""
from sgl.systems.parallel.dp import *  # noqa: F401,F403
from sgl.systems.parallel.dp import __all__  # noqa: F401
