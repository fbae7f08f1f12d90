"""Paths of the command line, checked before any work starts.

A job that runs for an hour must not die at its last line because ``--out`` names a folder
that cannot be written, nor lose a search because its storage file cannot be created. Every
command checks each path it will write with :func:`check_output_path` before it loads a
dataset or trains anything, and each folder it reads with :func:`check_input_folder`; a bad
path is one :class:`~sgl.errors.ConfigError` naming the flag.

Nothing is created by a check: the folders are made by the writer when the work is done
(a write probe in the nearest existing folder is removed at once).

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_output_path(os.path.join(folder, "new", "run.json"), "file").name
    'run.json'
    >>> os.path.exists(os.path.join(folder, "new"))
    False
    >>> try:
    ...     check_output_path(folder, "file", "--out")
    ... except ConfigError as exc:
    ...     print(str(exc).replace(folder, "DIR"))
    --out DIR is a folder; give a file path inside it (e.g. DIR/run.json)
    >>> storage = os.path.join(folder, "studies", "cora.db")
    >>> search_results_folder(None, storage, "sgl-cora") == Path(folder, "studies", "search-sgl-cora")
    True
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

from sgl.errors import ConfigError

__all__ = ["check_output_path", "check_input_folder", "sqlite_path", "check_storage", "search_results_folder"]

PathLike = Union[str, "os.PathLike[str]"]
_EXAMPLE_FILE = {"--out": "run.json", "--storage": "study.db"}


def _writable(folder: Path) -> Optional[str]:
    """``None`` when a file can be created in ``folder``, else why not (permissions, read-only, ...)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".sgl-write-check-", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def check_output_path(path: PathLike, kind: str, flag: str = "--out") -> Path:
    """Check that ``path`` can be written as a ``kind`` (``"file"`` or ``"dir"``); returns it.

    Fails when ``path`` is a folder but a file is wanted (or the reverse), when a folder on
    the way is a file, or when the nearest existing folder is not writable (permissions,
    read-only file system). Missing folders are fine: the writer creates them.
    """
    if kind not in ("file", "dir"):
        raise ValueError(f"kind must be 'file' or 'dir', got {kind!r}")
    if path is None or not str(path).strip():
        raise ConfigError(f"{flag} is empty; give a {'file path' if kind == 'file' else 'folder'}")
    target = Path(path).expanduser()
    if target.exists():
        if kind == "file" and target.is_dir():
            example = _EXAMPLE_FILE.get(flag, "out.json")
            raise ConfigError(f"{flag} {path} is a folder; give a file path inside it (e.g. {target / example})")
        if kind == "dir" and not target.is_dir():
            raise ConfigError(f"{flag} {path} is a file; give a folder (a new one or an existing one)")
    folder = target if kind == "dir" and target.is_dir() else target.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is a file, so no folder can be made there; choose another path")
    why = _writable(existing)
    if why is not None:
        raise ConfigError(f"{flag} {path}: cannot write in folder {existing} ({why}); choose a writable path")
    return target


def check_input_folder(path: Optional[PathLike], flag: str = "--root") -> Optional[Path]:
    """A folder read by a command (``--root``): a file there is an error; a missing one is not
    (datasets download into it)."""
    if path is None:
        return None
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{flag} {path} is a file; give the folder that holds the dataset's files "
                          f"(for a graph of your own in one file, use --dataset file:{path})")
    return target


def sqlite_path(storage: Optional[str]) -> Optional[Path]:
    """The SQLite file of a ``--storage`` value (a path or ``sqlite:///PATH``); ``None`` for a
    server URL (``postgresql://...``), an in-memory SQLite URL or no storage."""
    if not storage:
        return None
    text = str(storage)
    if "://" not in text:
        return Path(text).expanduser()
    if text.startswith("sqlite:///") and len(text) > len("sqlite:///"):
        return Path(text[len("sqlite:///"):]).expanduser()
    return None


def check_storage(storage: Optional[str], flag: str = "--storage", must_exist: bool = False) -> Optional[str]:
    """Check the SQLite study file of a storage before a search starts; returns ``storage``.

    A search (``must_exist=False``) creates or extends the file: it must not be a folder and
    its folder must exist and be writable. ``sgl search show|export`` read it (``must_exist=True``): it
    must be an existing file. A server URL is checked by the database when it connects.
    """
    path = sqlite_path(storage)
    if path is None:
        return storage
    if not must_exist:
        check_output_path(path, "file", flag)
        if not path.parent.is_dir():  # SQLite creates the file, not its folder
            raise ConfigError(f"{flag} {storage}: folder {path.parent} does not exist; create it or choose another "
                              f"path for the study file")
    elif not path.exists():
        raise ConfigError(f"study file {storage} does not exist")
    elif path.is_dir():
        raise ConfigError(f"study file {storage} is a folder; give the study's SQLite file (e.g. study.db)")
    return storage


def search_results_folder(out: Optional[PathLike], storage: Optional[str], study: str) -> Path:
    """Where ``sgl search`` writes its front/trials tables: ``out`` when given, else
    ``search-<study>/`` beside the SQLite storage file (in the current folder only when there
    is no file: no storage, or a database server)."""
    if out:
        return Path(out).expanduser()
    path = sqlite_path(storage)
    base = path.parent if path is not None else Path(".")
    return base / f"search-{study}"
