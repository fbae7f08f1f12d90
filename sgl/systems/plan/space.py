"""Compatibility shim: :mod:`sgl.systems.parallel.space` under its old name."""
from sgl.systems.parallel.space import *  # noqa: F401,F403
from sgl.systems.parallel.space import __all__  # noqa: F401
