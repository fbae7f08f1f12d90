"""Compatibility shim: the profiler moved to :mod:`sgl.systems.runtime.profiler`."""
from sgl.systems.runtime.profiler import *  # noqa: F401,F403
from sgl.systems.runtime.profiler import __all__  # noqa: F401
