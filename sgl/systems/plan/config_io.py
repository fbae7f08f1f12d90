"""Compatibility shim: :mod:`sgl.systems.parallel.config_io` under its old name."""
from sgl.systems.parallel.config_io import *  # noqa: F401,F403
from sgl.systems.parallel.config_io import __all__  # noqa: F401
