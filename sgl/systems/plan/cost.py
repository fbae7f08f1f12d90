"""Compatibility shim: :mod:`sgl.systems.parallel.cost` under its old name."""
from sgl.systems.parallel.cost import *  # noqa: F401,F403
from sgl.systems.parallel.cost import __all__  # noqa: F401
