"""Documents to pack: WikiText-2 sections, folders of text files or JSONL, read whole or in chunks.

A *document* is one string. Packing needs its token count, which any callable ``str -> list``
gives (:func:`whitespace_tokens` by default; an HF ``tokenizers`` encoder via
:func:`tokenizer_lengths`). WikiText-2's 600 training articles average ~3,500 words, longer than
most context windows, so :func:`wikitext2_sections` cuts each article at its level-2 headings
(`` = = Section = = ``): 3,522 training sections (median 371 words), each labelled with its
article, which is the "domain" that packing homogeneity is measured against.

:func:`iter_corpus` reads a corpus folder in chunks of ``chunk_size`` documents, so a corpus
larger than memory can be streamed: ``*.jsonl`` files (one ``{"text": ...}`` per line), ``*.txt``
files (one document per file), both in file-name order, or a WikiText-2 folder (``train.txt``;
sections).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.txt").write_text("one two three")
>>> _ = (d / "b.jsonl").write_text('{"text": "four five"}\\n{"text": "six"}\\n')
>>> [len(chunk) for chunk in iter_corpus(d, chunk_size=2)]
[2, 1]
>>> [whitespace_tokens(t) for chunk in iter_corpus(d) for t in chunk]
[3, 2, 1]
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError, DatasetError

__all__ = ["wikitext2_sections", "iter_corpus", "read_corpus", "whitespace_tokens", "tokenizer_lengths",
           "document_lengths", "check_documents", "CORPUS_FORMATS"]

PathLike = Union[str, Path]
CORPUS_FORMATS = ("auto", "files", "jsonl", "txt", "wikitext2")
_SECTION = re.compile(r"^= = [^=].* = =$")


def whitespace_tokens(text: str) -> int:
    """Number of whitespace-separated tokens (WikiText-2 is word-tokenized already)."""
    return len(text.split())


def tokenizer_lengths(tokenizer: Any, eos: bool = True) -> Callable[[Sequence[str]], np.ndarray]:
    """A batch length function from a HF ``tokenizers.Tokenizer`` (``+1`` for ``<eos>`` when ``eos``)."""
    def lengths(texts: Sequence[str]) -> np.ndarray:
        return np.fromiter((len(e.ids) + int(eos) for e in tokenizer.encode_batch(list(texts))),
                           dtype=np.int64, count=len(texts))
    return lengths


def document_lengths(texts: Sequence[str], length_fn: Optional[Callable] = None) -> np.ndarray:
    """Token counts of ``texts``: ``length_fn`` is per text (``str -> int``) or batched (``list -> array``)."""
    if length_fn is None:
        return np.fromiter((whitespace_tokens(t) for t in texts), dtype=np.int64, count=len(texts))
    try:
        out = length_fn(list(texts))
        arr = np.asarray(out, dtype=np.int64)
        if arr.shape == (len(texts),):
            return arr
    except (TypeError, AttributeError):
        pass
    return np.fromiter((int(length_fn(t)) for t in texts), dtype=np.int64, count=len(texts))


def wikitext2_sections(root: PathLike, split: str = "train") -> Tuple[List[str], np.ndarray]:
    """``(sections, article_ids)``: every article cut at its `` = = Section = = `` headings.

    The first section keeps the article's title line; each later section starts with its
    heading. ``article_ids[i]`` is the index of the article section ``i`` came from.
    """
    from sgl.systems.text import wikitext2_documents

    sections: List[str] = []
    articles: List[int] = []
    for number, doc in enumerate(wikitext2_documents(root, split)):
        current: List[str] = []
        for line in doc.split("\n"):
            if _SECTION.match(line) and current:
                sections.append("\n".join(current))
                articles.append(number)
                current = []
            current.append(line)
        if current:
            sections.append("\n".join(current))
            articles.append(number)
    return sections, np.asarray(articles, dtype=np.int64)


def _detect(folder: Path) -> str:
    if (folder / "train.txt").is_file() and (folder / "valid.txt").is_file():
        return "wikitext2"
    if any(folder.glob("*.jsonl")) or any(folder.glob("*.txt")):
        return "files"
    raise DatasetError(f"corpus folder {folder} holds no *.jsonl or *.txt files (nor a WikiText-2 train.txt); "
                       f"give a folder of documents")


def _jsonl(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                text = record["text"] if isinstance(record, dict) else None
            except (ValueError, KeyError):
                text = None
            if not isinstance(text, str):
                raise DatasetError(f"{path}:{number}: expected a JSON object with a string field \"text\"")
            yield text


def _documents(folder: Path, fmt: str, split: str) -> Iterator[str]:
    if fmt == "wikitext2":
        yield from wikitext2_sections(folder, split)[0]
        return
    patterns = {"txt": ("*.txt",), "jsonl": ("*.jsonl",), "files": ("*.txt", "*.jsonl")}[fmt]
    for path in sorted(p for pattern in patterns for p in folder.glob(pattern)):
        if path.suffix == ".jsonl":
            yield from _jsonl(path)
        else:
            yield path.read_text(encoding="utf-8", errors="replace")


def iter_corpus(folder: PathLike, chunk_size: int = 10_000, fmt: str = "auto",
                split: str = "train") -> Iterator[List[str]]:
    """Chunks of at most ``chunk_size`` documents from a corpus folder (files in sorted order).

    Empty documents (whitespace only) are skipped; an empty corpus raises :class:`DatasetError`.
    """
    check_int(chunk_size, "chunk_size", minimum=1)
    check_choice(fmt, "fmt", CORPUS_FORMATS)
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise DatasetError(f"corpus {path} is not a folder; give a folder of *.txt / *.jsonl documents")
    fmt = _detect(path) if fmt == "auto" else fmt
    chunk: List[str] = []
    seen = 0
    for text in _documents(path, fmt, split):
        if not text.strip():
            continue
        chunk.append(text)
        if len(chunk) == chunk_size:
            seen += len(chunk)
            yield chunk
            chunk = []
    if chunk:
        seen += len(chunk)
        yield chunk
    if seen == 0:
        raise DatasetError(f"corpus {path} ({fmt}) has no non-empty document")


def read_corpus(folder: PathLike, fmt: str = "auto", split: str = "train") -> List[str]:
    """Every document of a corpus folder in memory (see :func:`iter_corpus`)."""
    return [text for chunk in iter_corpus(folder, fmt=fmt, split=split) for text in chunk]


def check_documents(texts: Sequence[str]) -> List[str]:
    """``texts`` as a non-empty list of strings (the packing entry points' check)."""
    if isinstance(texts, str):
        raise ConfigError("documents must be a list of strings, got one string")
    texts = list(texts)
    if not texts:
        raise DatasetError("the corpus is empty: give at least one document to pack")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise DatasetError(f"document {i} is a {type(text).__name__}, expected a string")
    return texts
