"""Atomic file writes: caches, checkpoints, graphs and search state are never half-written.

Every writer goes through :func:`atomic_write` (a file) or :func:`atomic_dir` (a folder):
data goes to a temporary sibling of the target, is flushed and fsync'ed, then
``os.replace``-d over the target, which is atomic on POSIX. A crash mid-write leaves the
previous file (or nothing) in place.

Two details make the results shareable and self-cleaning:

* **Permissions follow the umask**, as with a plain ``open(path, "w")``: ``mkstemp`` and
  ``mkdtemp`` create ``0600`` / ``0700`` entries, so before the rename a new file is set to
  ``0o666 & ~umask`` (a replaced file keeps its mode) and a folder to ``0o777 & ~umask``.
* **Temporaries name their owner**: ``.<target>.sgl-<host>-<pid>-<random>.tmp``. A process
  killed mid-write leaves its temporary behind; the next write of the same target removes
  the ones whose process is gone (same host, pid not running) and says so. Temporaries of
  live processes, of other hosts and of other programs are never touched.

    >>> import tempfile, os
    >>> from sgl.fileio import atomic_write
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_write(path, "w") as f:
    ...     _ = f.write("hello")
    >>> open(path).read()
    'hello'
    >>> oct(os.stat(path).st_mode & 0o777) == oct(0o666 & ~current_umask())
    True
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
import warnings
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Union

__all__ = ["atomic_write", "atomic_dir", "make_temp_dir", "remove_stale_temps", "current_umask", "pid_alive",
           "sha256_file", "user_cache_dir"]

PathLike = Union[str, os.PathLike]
Log = Optional[Callable[[str], None]]

# mkstemp/mkdtemp append 8 characters from this alphabet to the prefix
_RANDOM = r"[a-z0-9_]+"


def current_umask() -> int:
    """The process umask, read without changing it where ``/proc`` allows (no race with threads)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)  # fallback: read by setting, then restore at once
    os.umask(mask)
    return mask


def user_cache_dir() -> Path:
    """Folder for SGL's small per-user caches (machine calibrations): ``$SGL_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/sgl``, else ``~/.cache/sgl``. Not created here; writers create it.

    Example:
        >>> user_cache_dir().is_absolute()
        True
    """
    env = os.environ.get("SGL_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()
    return (base / "sgl").resolve()


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this machine and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    with contextlib.suppress(OSError, IndexError):
        with open(f"/proc/{pid}/stat") as handle:
            # the state letter follows the parenthesised command name, which may contain spaces
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    return True


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"


def _prefix(target: Path) -> str:
    return f".{target.name}.sgl-{_host()}-{os.getpid()}-"


def _stale_pattern(target: Path) -> "re.Pattern[str]":
    return re.compile(rf"^\.{re.escape(target.name)}\.sgl-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-{_RANDOM}\.(tmp|old)$")


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_symlink() and p.is_file())


def remove_stale_temps(target: PathLike, log: Log = None) -> List[Path]:
    """Remove the temporaries that killed SGL processes left next to ``target``; returns them.

    Only entries named by this module for this exact target (``.<name>.sgl-<host>-<pid>-*.tmp``
    or ``.old``) whose host is this one and whose pid no longer runs are removed. Each removal
    is reported through ``log`` (default: a ``UserWarning``).
    """
    target = Path(target)
    pattern, host, removed = _stale_pattern(target), _host(), []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or match["host"] != host or pid_alive(int(match["pid"])):
            continue
        path = Path(entry.path)
        try:
            size = _size(path)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:  # another process cleaned it first
            continue
        except OSError as exc:
            _report(log, f"could not remove {path}, left by a killed process (pid {match['pid']}): {exc}")
            continue
        removed.append(path)
        _report(log, f"removed {path} ({size / 2**20:.1f} MiB), a temporary left by a killed process "
                     f"(pid {match['pid']})")
    return removed


def _report(log: Log, message: str) -> None:
    if log is None:
        warnings.warn(message, UserWarning, stacklevel=4)
    else:
        log(message)


def make_temp_dir(target: PathLike, suffix: str = ".tmp", log: Log = None) -> Path:
    """A new owner-named folder next to ``target`` with umask permissions (stale ones removed first)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target, log)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=suffix, dir=target.parent))
    os.chmod(tmp, 0o777 & ~current_umask())
    return tmp


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success.

    The result has the permissions ``open(path, mode)`` would give it: those of the file it
    replaces, else ``0o666 & ~umask``.
    """
    if "w" not in mode:
        raise ValueError(f"atomic_write needs a write mode ('w' or 'wb'), got {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(target), suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            try:
                permissions = stat.S_IMODE(os.stat(target).st_mode)
            except OSError:
                permissions = 0o666 & ~current_umask()
            os.fchmod(handle.fileno(), permissions)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: PathLike) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; it replaces ``path`` only if the block succeeds."""
    target = Path(path)
    tmp = make_temp_dir(target)
    try:
        yield tmp
        if target.exists():
            # Another writer finished the same entry first: keep theirs, drop ours.
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256_file(path: PathLike, block: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(block), b""):
            digest.update(chunk)
    return digest.hexdigest()
