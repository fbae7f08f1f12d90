"""One exception hierarchy for SGL.

Every error raised at a public API boundary derives from :class:`SGLError`, so
callers can catch library errors with one ``except`` clause while still telling
the kinds apart::

    >>> import sgl
    >>> try:
    ...     sgl.datasets.load("no-such-dataset")
    ... except sgl.errors.DatasetError as err:
    ...     print(type(err).__name__)
    DatasetError

Messages say what was received, what was expected and how to fix it.
"""
from __future__ import annotations

__all__ = [
    "SGLError",
    "GraphError",
    "FeatureError",
    "DatasetError",
    "DownloadError",
    "ConfigError",
    "CommError",
    "DeviceError",
    "CacheError",
    "StoreError",
    "SearchError",
    "PlanError",
    "EmbeddingError",
]


class SGLError(Exception):
    """Base class of every exception SGL raises on bad input or state."""


class GraphError(SGLError, ValueError):
    """A graph's structure is invalid: ids out of range, wrong dtype, empty graph..."""


class FeatureError(SGLError, ValueError):
    """Node features, labels or masks do not match the graph (rows, dtype, NaN/inf)."""


class DatasetError(SGLError):
    """A dataset is unknown, missing, truncated or corrupt."""


class DownloadError(DatasetError):
    """A dataset file could not be downloaded or failed its checksum."""


class ConfigError(SGLError, ValueError):
    """A configuration value or command-line option is invalid."""


class CommError(SGLError, RuntimeError):
    """A torch.distributed operation failed, timed out or was called out of order."""


class DeviceError(SGLError, RuntimeError):
    """The requested device is unavailable or malformed."""


class CacheError(SGLError):
    """An on-disk cache entry is unreadable or does not match its key."""


class StoreError(DatasetError):
    """A disk-backed graph/feature store is truncated, corrupt or does not match its manifest."""


class SearchError(SGLError):
    """An auto-search study cannot be created, opened or resumed (bad storage URL, corrupt study)."""


class PlanError(ConfigError):
    """A parallel plan or its inputs are invalid or infeasible (device counts, memory budget, profiles)."""


class EmbeddingError(SGLError, ValueError):
    """An embedding table, sketch or cache got ids, budgets or ratios it cannot serve."""
