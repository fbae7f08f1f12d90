"""Finding a dataset's raw files on disk and downloading the missing ones.

Every loader follows the same rules, so a user always knows where files go:

* ``root=None`` means ``$SGL_DATA`` (or ``~/.sgl/datasets``) and then the dataset's own
  subfolder, e.g. ``~/.sgl/datasets/cora/raw/``;
* a given ``root`` may hold the files directly (``root/ind.cora.x``) or in the PyG-style
  layout ``root/<name>/raw/`` (``root/<name>/`` is accepted too);
* missing files are downloaded into that folder through :func:`fetch`, which writes a
  temporary file and renames it only after the download (and its sha256, when known)
  succeeded, so an interrupted download never leaves a half-written file behind;
* a failed download raises :class:`sgl.errors.DownloadError` naming the URL, the exact
  files expected and the folder to put them in, for machines without internet access.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.download import find_folder, target_folder
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "demo" / "raw").mkdir(parents=True)
    >>> _ = (root / "demo" / "raw" / "a.txt").write_text("1")
    >>> find_folder(root, ["demo"], ["a.txt"]) == root / "demo" / "raw"
    True
    >>> target_folder(root, ["other"], ["b.txt"]) == root / "other" / "raw"
    True
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from sgl.errors import DatasetError, DownloadError
from sgl.fileio import atomic_write, sha256_file

__all__ = [
    "default_root",
    "find_folder",
    "target_folder",
    "fetch",
    "ensure_files",
    "extract_zip",
    "download_zip_folder",
    "corrupt_file_error",
]

PathLike = Union[str, os.PathLike]

#: Seconds a stalled connection may wait before the download is abandoned.
DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20


def default_root() -> Path:
    """Base folder for datasets when a loader gets ``root=None``: ``$SGL_DATA`` or ``~/.sgl/datasets``.

    Example:
        >>> from sgl.datasets import default_root
        >>> default_root().is_absolute()
        True
    """
    env = os.environ.get("SGL_DATA")
    base = Path(env) if env else Path("~/.sgl/datasets")
    return base.expanduser().resolve()


def _candidates(root: Optional[PathLike], folder_names: Sequence[str]) -> list:
    if root is None:
        base = default_root()
        out = []
        for name in folder_names:
            out += [base / name / "raw", base / name]
        return out
    root = Path(root).expanduser()
    out = [root]
    for name in folder_names:
        out += [root / name / "raw", root / name]
    return out


def find_folder(root: Optional[PathLike], folder_names: Sequence[str], files: Sequence[str]) -> Optional[Path]:
    """The first candidate folder holding every file in ``files``, or ``None``.

    Candidates, in order: ``root`` itself, ``root/<name>/raw``, ``root/<name>`` for each
    ``name`` in ``folder_names`` (with ``root=None``: the same under :func:`default_root`).
    """
    for folder in _candidates(root, folder_names):
        if all((folder / f).is_file() for f in files):
            return folder
    return None


def target_folder(root: Optional[PathLike], folder_names: Sequence[str], files: Sequence[str]) -> Path:
    """Where missing files should go (and be downloaded to).

    A folder that already holds some of the files wins (so a partial copy is completed in
    place); otherwise ``<root>/<first folder name>/raw``.
    """
    for folder in _candidates(root, folder_names):
        if any((folder / f).is_file() for f in files):
            return folder
    base = default_root() if root is None else Path(root).expanduser()
    return base / folder_names[0] / "raw"


def fetch(url: str, path: PathLike, sha256: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT) -> Path:
    """Download ``url`` to ``path`` atomically, checking its sha256 when given.

    The bytes go to a temporary sibling of ``path`` that is renamed over ``path`` only
    after the whole body arrived and matched ``sha256``; on any failure nothing is left
    behind and :class:`sgl.errors.DownloadError` names the URL and the reason.

    Example:
        >>> import tempfile, pathlib
        >>> from sgl.datasets import fetch
        >>> src = pathlib.Path(tempfile.mkdtemp()) / "src.txt"
        >>> _ = src.write_text("hi")
        >>> fetch(src.as_uri(), src.with_name("copy.txt")).read_text()
        'hi'
    """
    path = Path(path)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, atomic_write(path, "wb") as out:
            digest = hashlib.sha256()
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
            if sha256 is not None and digest.hexdigest() != sha256.lower():
                # Raising inside atomic_write discards the temporary file: the bad bytes never land.
                raise DownloadError(
                    f"could not download {url}: sha256 mismatch (got {digest.hexdigest()}, "
                    f"expected {sha256}); the server returned a different file"
                )
    except DownloadError:
        raise
    except Exception as exc:  # URLError, HTTPError, timeouts, connection resets, disk full...
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"could not download {url}: {reason}") from exc
    return path


def _file_list(files: Sequence[str]) -> str:
    return ", ".join(files)


def ensure_files(
    root: Optional[PathLike],
    folder_names: Sequence[str],
    files: Sequence[str],
    urls: Mapping[str, str],
    sha256: Optional[Mapping[str, str]] = None,
    download: bool = True,
) -> Path:
    """Return a folder holding all ``files``, downloading the missing ones from ``urls``.

    Raises:
        DownloadError: a download failed; the message names the URL, every expected file
            and the folder to put them in by hand.
        DatasetError: files are missing and ``download=False``.
    """
    found = find_folder(root, folder_names, files)
    if found is not None:
        return found
    folder = target_folder(root, folder_names, files)
    missing = [f for f in files if not (folder / f).is_file()]
    if not download:
        raise DatasetError(
            f"missing {_file_list(missing)} in {folder}{os.sep}; put the files "
            f"{_file_list(files)} there (or pass download=True)"
        )
    sha256 = sha256 or {}
    for name in missing:
        try:
            fetch(urls[name], folder / name, sha256.get(name))
        except DownloadError as exc:
            raise DownloadError(f"{exc}. Put the files {_file_list(files)} in {folder}{os.sep} and retry.") from exc
    return folder


def extract_zip(archive: PathLike, folder: PathLike) -> None:
    """Extract a zip archive into ``folder``; a corrupt archive raises :class:`DatasetError`.

    Members whose names would escape ``folder`` (absolute paths, ``..``) are rejected.
    """
    folder = Path(folder).resolve()
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                target = (folder / member.filename).resolve()
                if target != folder and folder not in target.parents:
                    raise DatasetError(f"{archive} contains {member.filename!r}, which points outside {folder}")
            zf.extractall(folder)
    except DatasetError:
        raise
    except Exception as exc:  # BadZipFile, CRC errors, truncated archives
        raise corrupt_file_error(archive, exc) from exc


def download_zip_folder(
    url: str,
    target: PathLike,
    member_folder: str,
    sha256: Optional[Mapping[str, str]] = None,
    last: Sequence[str] = (),
) -> Path:
    """Download a zip, extract it and move the files of its ``member_folder`` into ``target``.

    Everything happens in a temporary folder next to ``target``; a failed download,
    extraction or checksum (``sha256`` maps extracted file names to digests) leaves
    ``target`` untouched. A new ``target`` appears in one rename; into an existing one the
    files are moved one by one, the names in ``last`` at the end, so a loader that looks
    for those files never sees a half-filled folder.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        archive = fetch(url, tmp / "download.zip")
        extract_zip(archive, tmp / "extract")
        source = tmp / "extract" / member_folder
        if not source.is_dir():
            raise DatasetError(f"{url} does not contain the folder {member_folder!r}; the archive layout changed")
        for name, digest in (sha256 or {}).items():
            if (source / name).is_file() and sha256_file(source / name) != digest:
                raise DownloadError(f"could not download {url}: {name} in the archive failed its sha256 check")
        if not target.exists():
            os.replace(source, target)
        else:
            items = sorted(source.iterdir(), key=lambda item: item.name in last)
            for item in items:
                if not (target / item.name).exists():
                    os.replace(item, target / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def corrupt_file_error(path: PathLike, reason: object) -> DatasetError:
    """The one message for unreadable files: which file, why, and how to recover."""
    if isinstance(reason, BaseException):
        reason = f"{type(reason).__name__}: {reason}"
    return DatasetError(
        f"{path} is truncated or corrupt ({reason}); delete it and load the dataset again "
        f"to re-download it, or replace it with a good copy"
    )
