"""Sequence-length lists, histograms and a seeded per-step global-batch sampler.

Length files (FlexSP's ``wikipedia.txt`` layout): one decimal integer per line; also a JSON
array (or ``{"lengths": [...]}``) and a ``.npy`` integer array.  Lengths of any text corpus come
from a tokenizer, which is any callable ``str -> list`` (an HF ``tokenizers`` encode wrapped in a
lambda, ``str.split`` for words).

A :class:`GlobalBatchSampler` draws each training step's global batch from the empirical
distribution: with a fixed sequence count per step (``batch_size``) or until a token budget is
filled (``tokens_per_step``, the way packed pre-training batches are made).  Draws are i.i.d.
with replacement from the length list, so the step batches reproduce the distribution and its
tail (the probability that a batch of ``B`` contains a length above ``x`` is
``1 - F(x)^B``); ``order="file"`` walks the list in file order instead (FlexSP's loader).

>>> import numpy as np
>>> from sgl.systems.seq import LengthHistogram, GlobalBatchSampler
>>> lengths = np.array([100, 200, 300, 4000, 120, 80, 90, 6000])
>>> hist = LengthHistogram.from_lengths(lengths, bins=[0, 128, 1024, 8192])
>>> hist.counts.tolist()
[4, 2, 2]
>>> sampler = GlobalBatchSampler(lengths, batch_size=4, seed=0)
>>> [len(b) for b in sampler.batches(3)]
[4, 4, 4]
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError, DatasetError

__all__ = ["read_lengths", "corpus_lengths", "LengthHistogram", "GlobalBatchSampler", "check_lengths"]

PathLike = Union[str, Path]


def check_lengths(lengths: Iterable[int], name: str = "lengths", *, allow_empty: bool = False) -> np.ndarray:
    """``lengths`` as a 1-D int64 array of positive values (the one check every planner uses)."""
    arr = np.asarray(list(lengths) if not isinstance(lengths, np.ndarray) else lengths)
    if arr.ndim != 1:
        raise DatasetError(f"{name} must be a 1-D list of sequence lengths, got shape {arr.shape}")
    if arr.size == 0:
        if allow_empty:
            return arr.astype(np.int64)
        raise DatasetError(f"{name} is empty: a batch needs at least one sequence")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.mod(arr, 1) == 0):
            raise DatasetError(f"{name} must hold integer token counts, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 1:
        bad = int(np.argmin(arr))
        raise DatasetError(f"{name}[{bad}] = {int(arr[bad])}: every sequence length must be >= 1")
    return arr


def read_lengths(path: PathLike, max_length: Optional[int] = None) -> np.ndarray:
    """Read a length list: text (one integer per line), ``.json`` or ``.npy``.

    ``max_length`` drops longer sequences (FlexSP skips them the same way). Errors name the
    file and the first bad line.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(f"length file {str(path)!r} does not exist; give a text file with one integer "
                        f"per line, a JSON array or a .npy array")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as err:
            raise DatasetError(f"{path}: not a readable .npy integer array ({err})") from None
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as err:
            raise DatasetError(f"{path}: not valid JSON ({err})") from None
        if isinstance(data, dict):
            data = data.get("lengths")
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON array of lengths or {{\"lengths\": [...]}}")
        arr = np.asarray(data)
    else:
        values: List[int] = []
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                text = line.strip()
                if not text:
                    continue
                try:
                    values.append(int(text))
                except ValueError:
                    raise DatasetError(f"{path}:{number}: expected one integer length per line, "
                                    f"got {text[:40]!r}") from None
        arr = np.asarray(values, dtype=np.int64)
    arr = check_lengths(arr, str(path))
    if max_length is not None:
        max_length = check_int(max_length, "max_length", 1)
        arr = arr[arr <= max_length]
        if arr.size == 0:
            raise DatasetError(f"{path}: no sequence is <= max_length={max_length}")
    return arr


def corpus_lengths(texts: Union[PathLike, Iterable[str]], tokenizer: Callable[[str], Sequence],
                   *, separator: str = "blank-line", min_tokens: int = 1) -> np.ndarray:
    """Token counts of the documents of a text corpus.

    ``texts`` is a file path or an iterable of documents. For a file, documents are separated by
    blank lines (``separator="blank-line"``), one per line (``"line"``), or split at WikiText's
    `` = Title = `` headings (``"heading"``). ``tokenizer`` is any callable ``str -> list``.
    Documents with fewer than ``min_tokens`` tokens are dropped.
    """
    if not callable(tokenizer):
        raise ConfigError(f"tokenizer must be a callable str -> list of tokens, got {type(tokenizer).__name__}")
    check_choice(separator, "separator", ("blank-line", "line", "heading"))
    if isinstance(texts, (str, Path)):
        path = Path(texts).expanduser()
        if not path.is_file():
            raise DatasetError(f"corpus file {str(path)!r} does not exist")
        docs = list(_split_documents(path.read_text(encoding="utf-8", errors="replace"), separator))
    else:
        docs = list(texts)
    counts = np.fromiter((len(tokenizer(doc)) for doc in docs), dtype=np.int64, count=len(docs))
    counts = counts[counts >= max(1, min_tokens)]
    if counts.size == 0:
        raise DatasetError("the corpus has no document with at least min_tokens tokens")
    return counts


def _split_documents(text: str, separator: str) -> Iterator[str]:
    if separator == "line":
        yield from (line for line in text.splitlines() if line.strip())
        return
    if separator == "heading":
        doc: List[str] = []
        for line in text.splitlines():
            s = line.strip()
            # a top-level WikiText heading is " = Title = " (one '=' each side)
            if s.startswith("= ") and s.endswith(" =") and not s.startswith("= ="):
                if doc:
                    yield "\n".join(doc)
                doc = []
            elif s:
                doc.append(s)
        if doc:
            yield "\n".join(doc)
        return
    for block in text.split("\n\n"):
        if block.strip():
            yield block


@dataclass(frozen=True)
class LengthHistogram:
    """Counts of lengths in bins ``[edges[i], edges[i+1])`` (the last bin is closed).

    ``fractions`` = counts / total; :meth:`expected` gives the expected number of sequences per
    bin in a batch of ``n``; :meth:`quantile` reads quantiles of the raw lengths it was built from.
    """

    edges: np.ndarray
    counts: np.ndarray
    total_tokens: np.ndarray   # sum of lengths per bin
    lengths: np.ndarray        # sorted raw lengths (for quantiles / exact bin members)

    @classmethod
    def from_lengths(cls, lengths: Iterable[int], bins: Union[int, Sequence[int]] = "log2") -> "LengthHistogram":
        """``bins``: explicit edges, a bin count (uniform), or ``"log2"`` (edges at powers of two)."""
        arr = np.sort(check_lengths(lengths))
        if isinstance(bins, str):
            check_choice(bins, "bins", ("log2",))
            top = int(np.ceil(np.log2(arr[-1] + 1)))
            edges = np.array([0] + [2 ** k for k in range(top + 1)], dtype=np.int64)
        elif isinstance(bins, (int, np.integer)):
            n = check_int(int(bins), "bins", 1)
            edges = np.unique(np.linspace(0, arr[-1] + 1, n + 1).round().astype(np.int64))
        else:
            edges = np.asarray(bins, dtype=np.int64)
            if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
                raise ConfigError("bins must be at least two increasing edges")
        idx = np.clip(np.searchsorted(edges, arr, side="right") - 1, 0, edges.size - 2)
        inside = (arr >= edges[0]) & (arr <= edges[-1])
        counts = np.bincount(idx[inside], minlength=edges.size - 1)
        tokens = np.bincount(idx[inside], weights=arr[inside], minlength=edges.size - 1)
        return cls(edges, counts.astype(np.int64), tokens, arr)

    @property
    def fractions(self) -> np.ndarray:
        return self.counts / max(1, int(self.counts.sum()))

    def expected(self, batch_size: int) -> np.ndarray:
        return self.fractions * batch_size

    def quantile(self, q: Union[float, Sequence[float]]) -> np.ndarray:
        return np.quantile(self.lengths, q)

    def summary(self) -> dict:
        """min / median / mean / p90 / p99 / max of the raw lengths (JSON-ready)."""
        a = self.lengths
        p50, p90, p99 = np.quantile(a, [0.5, 0.9, 0.99])
        return {"count": int(a.size), "min": int(a[0]), "median": float(p50), "mean": float(a.mean()),
                "p90": float(p90), "p99": float(p99), "max": int(a[-1])}


class GlobalBatchSampler:
    """Seeded per-step global batches drawn from a length distribution.

    Exactly one of ``batch_size`` (sequences per step) and ``tokens_per_step`` (draw until the
    next sequence would overflow the budget; at least one sequence per step) is given.
    ``max_length`` drops longer sequences from the pool first. ``order="random"`` draws i.i.d.
    with replacement (a fresh ``numpy`` generator seeded by ``seed``), ``"file"`` walks the list
    cyclically in its order. The same seed gives the same batches.
    """

    def __init__(self, lengths: Iterable[int], batch_size: Optional[int] = None, *,
                 tokens_per_step: Optional[int] = None, seed: int = 0, order: str = "random",
                 max_length: Optional[int] = None) -> None:
        pool = check_lengths(lengths)
        if (batch_size is None) == (tokens_per_step is None):
            raise ConfigError("give exactly one of batch_size (sequences per step) and tokens_per_step")
        self.batch_size = None if batch_size is None else check_int(batch_size, "batch_size", 1)
        self.tokens_per_step = None if tokens_per_step is None else check_int(tokens_per_step, "tokens_per_step", 1)
        self.order = check_choice(order, "order", ("random", "file"))
        self.seed = check_int(seed, "seed", 0)
        if max_length is not None:
            pool = pool[pool <= check_int(max_length, "max_length", 1)]
            if pool.size == 0:
                raise DatasetError(f"no sequence in the length list is <= max_length={max_length}")
        self.pool = pool

    def batches(self, steps: int) -> List[np.ndarray]:
        """The first ``steps`` global batches (each an int64 array of lengths)."""
        steps = check_int(steps, "steps", 1)
        gen = iter(self)
        return [next(gen) for _ in range(steps)]

    def __iter__(self) -> Iterator[np.ndarray]:
        """Endless batches; every new iterator restarts from the seed."""
        rng = np.random.default_rng(self.seed)
        cursor = 0
        n = self.pool.size
        while True:
            if self.batch_size is not None:
                if self.order == "random":
                    idx = rng.integers(0, n, self.batch_size)
                else:
                    idx = (cursor + np.arange(self.batch_size)) % n
                    cursor = int(idx[-1]) + 1
                yield self.pool[idx]
                continue
            chunk: List[int] = []
            total = 0
            while total < self.tokens_per_step:
                s = int(self.pool[rng.integers(0, n)] if self.order == "random" else self.pool[cursor % n])
                if chunk and total + s > self.tokens_per_step:
                    break           # in file order the sequence opens the next step
                cursor += 1
                chunk.append(s)
                total += s
            yield np.asarray(chunk, dtype=np.int64)

    def __repr__(self) -> str:
        size = f"batch_size={self.batch_size}" if self.batch_size else f"tokens_per_step={self.tokens_per_step}"
        return f"GlobalBatchSampler(pool={self.pool.size}, {size}, order={self.order!r}, seed={self.seed})"
