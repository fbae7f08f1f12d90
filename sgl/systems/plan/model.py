"""Compatibility shim: :mod:`sgl.systems.parallel.model` under its old name."""
from sgl.systems.parallel.model import *  # noqa: F401,F403
from sgl.systems.parallel.model import __all__  # noqa: F401
