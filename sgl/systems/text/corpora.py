"""Readers for the real text sets the systems code trains and serves on: WikiText-2 and SST-2.

WikiText-2 is the tokenized word-level copy of PyTorch's word-language-model example: every
non-empty line is ``' ' + tokens + ' \\n'``. An article starts at a heading line `` = Title = ``
with a blank line before and after it (a plain pattern match also hits a few text lines), which
splits ``train/valid/test`` into exactly 600/60/60 documents. SST-2 is GLUE's ``sentence\\tlabel``
TSV with a header line.

``root`` may be the folder that holds ``wikitext2/`` (or ``sst2/``) or that folder itself.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "train.txt").write_text(" \\n = A = \\n \\n x y \\n \\n = B = \\n \\n z \\n")
>>> wikitext2_documents(d, "train")
['= A =\\nx y', '= B =\\nz']
>>> wikitext2_lines(d, "train")[:2]
['', '= A =']
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple, Union

import numpy as np

from sgl._checks import check_choice
from sgl.errors import DatasetError

__all__ = ["wikitext2_lines", "wikitext2_documents", "load_sst2", "resolve_text_root"]

PathLike = Union[str, Path]
_SPLITS = ("train", "valid", "test")
_HEADING = re.compile(r"^ = [^=].* = $")


def resolve_text_root(root: PathLike, name: str, probe: str) -> Path:
    """The folder holding ``probe``: ``root/name/probe`` or ``root/probe``; a clear error otherwise."""
    base = Path(root).expanduser()
    if base.is_file():
        raise DatasetError(f"--root {base} is a file; give the folder that holds {name}/ or {probe}")
    for folder in (base / name, base):
        if (folder / probe).is_file():
            return folder
    raise DatasetError(f"{name}: {probe} not found under {base} (looked in {base / name} and {base}); "
                       f"give the folder that holds {name}/")


def wikitext2_lines(root: PathLike, split: str = "train") -> List[str]:
    """Every line of one split, stripped (empty lines kept as ``''``)."""
    check_choice(split, "split", _SPLITS)
    folder = resolve_text_root(root, "wikitext2", f"{split}.txt")
    text = (folder / f"{split}.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.split("\n")[:-1]] if text.endswith("\n") else \
        [line.strip() for line in text.split("\n")]


def wikitext2_documents(root: PathLike, split: str = "train") -> List[str]:
    """The articles of one split (600/60/60), each its heading and non-empty lines joined by newlines."""
    folder = resolve_text_root(root, "wikitext2", f"{split}.txt")
    raw = (folder / f"{split}.txt").read_text(encoding="utf-8").split("\n")
    docs: List[List[str]] = []
    for i, line in enumerate(raw):
        blank_before = i > 0 and raw[i - 1].strip() == ""
        blank_after = i + 1 < len(raw) and raw[i + 1].strip() == ""
        if _HEADING.match(line.rstrip("\n")) and blank_before and blank_after:
            docs.append([line.strip()])
        elif line.strip() and docs:
            docs[-1].append(line.strip())
        elif line.strip():  # text before the first heading starts a document of its own
            docs.append([line.strip()])
    if not docs:
        raise DatasetError(f"{folder / (split + '.txt')}: no text found")
    return ["\n".join(doc) for doc in docs]


def load_sst2(root: PathLike, split: str = "train") -> Tuple[List[str], np.ndarray]:
    """``(sentences, labels)`` of GLUE SST-2 (``split`` = ``train`` or ``dev``); labels int64 0/1."""
    check_choice(split, "split", ("train", "dev"))
    folder = resolve_text_root(root, "sst2", f"{split}.tsv")
    path = folder / f"{split}.tsv"
    sentences, labels = [], []
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header[:2] != ["sentence", "label"]:
            raise DatasetError(f"{path}: expected the header 'sentence<TAB>label', found {header!r}")
        for number, line in enumerate(handle, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or parts[1] not in ("0", "1"):
                raise DatasetError(f"{path}, line {number}: expected 'sentence<TAB>0|1', found {line!r}")
            sentences.append(parts[0].strip())
            labels.append(int(parts[1]))
    return sentences, np.asarray(labels, dtype=np.int64)
