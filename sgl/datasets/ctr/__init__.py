r"""Click-through-rate (CTR) data: Criteo, Avazu, MovieLens-100k as implicit CTR, synthetic.

Every loader returns a :class:`CTRData`: dense features (``log(x+1)`` already applied),
per-field categorical ids remapped to ``0..field_dims[f]-1`` where **0 is the unknown
bucket** (values never seen, seen fewer than ``min_count`` times, or missing), and 0/1
labels. :meth:`CTRData.global_ids` adds per-field offsets so all fields index one table of
``sum(field_dims)`` rows, which is what the embedding backends in :mod:`sgl.embeddings` take.

Text formats are read **streaming**, ``chunk_rows`` lines at a time: a first pass counts
per-field values (only the vocabulary is kept), a second pass encodes chunk by chunk, so a
45M-row Criteo file is never held as text. :func:`iter_ctr_chunks` yields encoded chunks
without concatenating them, for files whose encoded arrays do not fit in memory either.

Dense preprocessing (the Criteo convention of the HET/DeepCTR scripts): missing → 0,
``x > -1`` → ``log(x + 1)``, values ``<= -1`` (Criteo's ``I2`` has a few) are kept as they are.

Example:
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> data = make_synthetic_ctr(1000, field_dims=[50, 20, 8], num_dense=2, seed=0)
    >>> len(data), data.sparse.shape, data.field_dims
    (1000, (1000, 3), [50, 20, 8])
    >>> int(data.global_ids().max()) < sum(data.field_dims)
    True
    >>> train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
    >>> len(train), len(val), len(test)
    (800, 100, 100)

One concept per module: :mod:`~sgl.datasets.ctr.data` (:class:`CTRData`), ``text`` (formats
and the streaming reader), ``store`` (on-disk stores), ``loaders`` (Criteo, Avazu),
``movielens`` and ``synthetic``.
"""
from sgl.datasets.ctr._common import _DEFAULT_CHUNK, PathLike
from sgl.datasets.ctr.data import CTRData, _keep_or_convert, transform_dense
from sgl.datasets.ctr.loaders import (
    _CRITEO_FILES, _HET_FILES, _STORE_DOC, AUTO_STORE_BYTES, _load_text, _read_het_layout, _resolve, load_avazu,
    load_criteo,
)
from sgl.datasets.ctr.movielens import _AGE_BINS, _ML100K_FILES, _ML100K_URL, _read_table, load_movielens_100k
from sgl.datasets.ctr.store import STORE_VERSION, build_ctr_store, ctr_store_path, open_ctr_store
from sgl.datasets.ctr.synthetic import _zipf_sampler, load_synthetic_ctr, make_synthetic_ctr
from sgl.datasets.ctr.text import (
    _AVAZU_FIELDS, AVAZU_FORMAT, CRITEO_FORMAT, CTRFormat, _categorical_columns, _check_read_args, _concat, _frame,
    _header_names, _lines, _parse_numbers, _sniff, build_vocabulary, iter_ctr_chunks, read_ctr_file,
)

__all__ = [
    "CTRData",
    "CTRFormat",
    "CRITEO_FORMAT",
    "AVAZU_FORMAT",
    "make_synthetic_ctr",
    "build_vocabulary",
    "iter_ctr_chunks",
    "read_ctr_file",
    "load_criteo",
    "load_avazu",
    "load_movielens_100k",
    "load_synthetic_ctr",
    "transform_dense",
]
__all__ += ["build_ctr_store", "open_ctr_store", "ctr_store_path", "STORE_VERSION"]
