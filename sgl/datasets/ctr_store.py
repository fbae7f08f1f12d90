"""Backward-compatible path of :mod:`sgl.datasets.ctr.store` (on-disk CTR stores moved there).

New code imports from :mod:`sgl.datasets` or :mod:`sgl.datasets.ctr`.
"""
from sgl.datasets.ctr._common import _DEFAULT_CHUNK, PathLike  # noqa: F401 -- re-exports
from sgl.datasets.ctr.data import CTRData  # noqa: F401
from sgl.datasets.ctr.store import (  # noqa: F401
    _ARRAYS,
    _MAX_BUCKETS,
    STORE_VERSION,
    _default_dir,
    _format_spec,
    _store_option,
    build_ctr_store,
    ctr_store_path,
    load_with_store,
    open_ctr_store,
)
from sgl.datasets.ctr.text import (  # noqa: F401
    CRITEO_FORMAT,
    CTRFormat,
    _check_read_args,
    build_vocabulary,
    iter_ctr_chunks,
)

__all__ = ["build_ctr_store", "open_ctr_store", "ctr_store_path", "STORE_VERSION"]
