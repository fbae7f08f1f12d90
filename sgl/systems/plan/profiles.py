"""Compatibility shim: :mod:`sgl.systems.parallel.profiles` under its old name."""
from sgl.systems.parallel.profiles import *  # noqa: F401,F403
from sgl.systems.parallel.profiles import __all__  # noqa: F401
