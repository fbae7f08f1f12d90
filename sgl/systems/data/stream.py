"""DataSculpt over a corpus larger than memory: documents in chunks, embeddings and index on disk.

:func:`pack_stream` makes two passes and never holds the texts:

1. read the corpus ``chunk_size`` documents at a time (:func:`~sgl.systems.data.corpus.iter_corpus`),
   fit the encoder on the first ``fit_docs`` documents (the only texts ever buffered), and append
   every chunk's token counts and unit embeddings to ``lengths.npy`` / ``embeddings.f32`` in
   ``workdir``;
2. pack from the memory-mapped embeddings (:func:`~sgl.systems.data.datasculpt.pack_arrays`:
   k-means on the first ``train_docs`` rows, assignment in chunks, then one cluster's rows at a
   time), and write ``centroids.faiss`` (the cluster index), ``clusters.npy``, ``windows.jsonl``
   (one window per line) and ``report.json``.

Held in memory: the segment table (4 int64 per document piece) and one cluster's embeddings.
Because the encoder, the k-means sample and the greedy are the same as in memory, the result
equals :func:`~sgl.systems.data.datasculpt.pack_documents` on the same documents (tested).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "docs.jsonl").write_text("".join(f'{{"text": "w{i % 3} x y"}}\\n' for i in range(9)))
>>> r = pack_stream(d, d / "work", PackConfig(window=7, num_clusters=2, dim=2), chunk_size=4)
>>> r.metrics["documents"], sorted(p.name for p in (d / "work").iterdir())[:3]
(9, ['centroids.faiss', 'clusters.npy', 'embeddings.f32'])
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Union

import numpy as np

from sgl._checks import check_int
from sgl.fileio import atomic_write
from sgl.systems.data.corpus import document_lengths, iter_corpus
from sgl.systems.data.datasculpt import PackConfig, PackResult, pack_arrays
from sgl.systems.data.embed import TfidfSvdEncoder

__all__ = ["pack_stream", "tqdm_progress"]

PathLike = Union[str, Path]


def tqdm_progress(enabled: bool) -> Optional[Callable]:
    """A ``(iterable, label) -> iterable`` progress wrapper (tqdm), or ``None`` when disabled."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return lambda iterable, label: tqdm(iterable, desc=label, leave=False)


def _encode_corpus(corpus: PathLike, workdir: Path, config: PackConfig, encoder: Any, length_fn, chunk_size: int,
                   fmt: str, split: str, progress) -> tuple:
    encoder = encoder if encoder is not None else TfidfSvdEncoder(config.dim, seed=config.seed)
    lengths: List[np.ndarray] = []
    buffer: List[str] = []
    fitted = False
    dim = None
    chunks = iter_corpus(corpus, chunk_size, fmt, split)
    if progress is not None:
        chunks = progress(chunks, "reading")
    with atomic_write(workdir / "embeddings.f32", "wb") as out:
        def emit(texts: List[str]) -> None:
            nonlocal dim
            x = encoder.encode(texts)
            dim = x.shape[1]
            out.write(np.ascontiguousarray(x, dtype=np.float32).tobytes())

        for chunk in chunks:
            lengths.append(document_lengths(chunk, length_fn))
            if fitted:
                emit(chunk)
                continue
            buffer.extend(chunk)
            if len(buffer) >= config.fit_docs:
                encoder.fit(buffer[: config.fit_docs])
                fitted = True
                emit(buffer)
                buffer = []
        if not fitted:
            encoder.fit(buffer[: config.fit_docs])
            emit(buffer)
    all_lengths = np.concatenate(lengths)
    with atomic_write(workdir / "lengths.npy", "wb") as handle:
        np.save(handle, all_lengths)
    embeddings = np.memmap(workdir / "embeddings.f32", dtype=np.float32, mode="r", shape=(all_lengths.size, dim))
    return all_lengths, embeddings


def pack_stream(corpus: PathLike, workdir: PathLike, config: PackConfig, *, encoder: Any = None,
                length_fn: Optional[Callable] = None, chunk_size: int = 10_000, fmt: str = "auto",
                split: str = "train") -> PackResult:
    """Pack a corpus folder read in chunks; every artefact lands in ``workdir`` (see the module docstring)."""
    check_int(chunk_size, "chunk_size", minimum=1)
    workdir = Path(workdir).expanduser()
    workdir.mkdir(parents=True, exist_ok=True)
    progress = None
    if config.progress:
        progress = tqdm_progress(True)
    started = time.perf_counter()
    lengths, embeddings = _encode_corpus(corpus, workdir, config, encoder, length_fn, chunk_size, fmt, split,
                                         progress)
    encode_s = time.perf_counter() - started
    result = pack_arrays(lengths, embeddings, config, progress)
    result.timings["encode"] = encode_s
    if result.centroids is not None:
        import faiss

        index = faiss.IndexFlatIP(result.centroids.shape[1])
        index.add(result.centroids)
        with atomic_write(workdir / "centroids.faiss", "wb") as handle:
            handle.write(faiss.serialize_index(index).tobytes())
        with atomic_write(workdir / "clusters.npy", "wb") as handle:
            np.save(handle, result.clusters)
    result.packing.to_jsonl(workdir / "windows.jsonl")
    with atomic_write(workdir / "report.json", "w") as handle:
        json.dump(result.report(), handle, indent=2, default=float)
    return result
