"""SGL — Scalable Graph Learning.

A PyG-style library for graph and recommendation learning at scale::

    >>> import sgl
    >>> graph = sgl.datasets.load("karate")
    >>> graph.num_nodes
    34
"""
from sgl import errors

__version__ = "0.1.0"

__all__ = ["Graph", "errors", "datasets", "ops", "__version__"]


def __getattr__(name):
    # Subpackages load on first use so `import sgl` stays light (no scipy/tqdm at import).
    import importlib

    if name == "Graph":  # lazy too: `import sgl.systems` must not load graph code (DESIGN.md layering)
        from sgl.data import Graph

        globals()["Graph"] = Graph
        return Graph
    if name in ("datasets", "ops", "data", "models", "tasks", "comm", "device", "cli", "fileio", "search",
                "samplers", "embeddings", "analytics", "systems"):
        module = importlib.import_module(f"sgl.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'sgl' has no attribute {name!r}")
