"""An on-disk undirected edge store in SQLite, with the VEND codes kept in the same database.

One file, three tables (the schema a graph-database user would recognise from an adjacency
index):

* ``edges(u, v)`` — ``PRIMARY KEY (u, v) WITHOUT ROWID``: the clustered B-tree is the index;
  each undirected edge is stored in both directions, so ``edges(u)`` is one range scan;
* ``codes(chunk, words)`` — the VEND codes, 1,024 vertices' ``uint64`` words per row;
* ``meta(key, value)`` — format, ``num_nodes``, ``num_edges``, ``k``, the code kind and an
  update ``version``.

The database runs in WAL mode with ``synchronous=FULL``: an update batch is one ``BEGIN
IMMEDIATE ... COMMIT`` transaction that changes edges, codes and meta together, so a writer
killed at any instant leaves the previous or the next consistent state, never a mix. A store is
built in a temporary sibling file and renamed into place. A file that is not a readable store
raises :class:`~sgl.errors.StoreError` naming it, and is never written to.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "g.db")
    >>> indptr, indices = np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1])
    >>> store = EdgeStore.create(path, indptr, indices, np.zeros((3, 1), np.uint64), kind="VENDCodes")
    >>> store.has_edge(0, 1), store.has_edge(0, 2), store.edges(1).tolist(), store.num_edges
    (True, False, [0, 2], 2)
    >>> store.close()
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple, Union

import numpy as np

from sgl.analytics.vend.adjacency import as_edge_array, as_pairs, as_vertex_ids
from sgl.errors import GraphError, StoreError

__all__ = ["EdgeStore", "STORE_FORMAT"]

PathLike = Union[str, os.PathLike]
STORE_FORMAT = "sgl-vend-store"
_FORMAT_VERSION = 2    # 2: VENDCodes bitmaps carry a hash count (version 1 held one-hash codes)
_CHUNK = 1024          # vertices per codes row
_BATCH = 200_000       # pairs per json_each query
_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE edges(u INTEGER NOT NULL, v INTEGER NOT NULL, PRIMARY KEY (u, v)) WITHOUT ROWID",
    "CREATE TABLE codes(chunk INTEGER PRIMARY KEY, words BLOB NOT NULL)",
)


def _json_ids(values: np.ndarray) -> str:
    return json.dumps(np.asarray(values, dtype=np.int64).tolist())


class EdgeStore:
    """An undirected edge set on disk (SQLite) plus the persisted VEND codes; see the module docstring.

    Open one with :meth:`open`, make one with :meth:`create` (or
    :meth:`sgl.analytics.vend.VENDStore.build`, which also computes the codes).
    """

    def __init__(self, path: Path, connection: sqlite3.Connection, meta: Dict[str, str]) -> None:
        self.path = path
        self._con = connection
        self._meta = meta
        self.num_nodes = int(meta["num_nodes"])
        self.k = int(meta["k"])
        self.kind = meta["kind"]
        self._in_transaction = False

    # -- creating and opening -------------------------------------------------------------------
    @classmethod
    def create(cls, path: PathLike, indptr: np.ndarray, indices: np.ndarray, words: np.ndarray, *, kind: str,
               overwrite: bool = False, progress: bool = False) -> "EdgeStore":
        """Write a new store for the sorted symmetric neighbour lists ``indptr/indices`` and ``words``.

        The file is built next to ``path`` and renamed over it only when complete; an existing
        ``path`` is kept unless ``overwrite=True``.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise StoreError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
        indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
        n = indptr.size - 1
        words = np.ascontiguousarray(words, dtype=np.uint64)
        if words.shape[0] != n:
            raise StoreError(f"codes have {words.shape[0]} rows but the graph has {n} vertices")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                cls._fill(con, indptr, indices, words, kind, progress)
            finally:
                con.close()
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            for side in ("-wal", "-shm"):  # an old store's log must never be replayed onto the new file
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{side}")
            os.replace(tmp, path)
        except BaseException:
            for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm", f"{tmp}-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
            raise
        return cls.open(path, verify=False)

    @staticmethod
    def _fill(con: sqlite3.Connection, indptr: np.ndarray, indices: np.ndarray, words: np.ndarray, kind: str,
              progress: bool) -> None:
        n, k = indptr.size - 1, words.shape[1]
        con.execute("PRAGMA journal_mode=OFF")   # a half-built temporary file is simply deleted
        con.execute("PRAGMA synchronous=OFF")
        con.execute("BEGIN")
        for statement in _SCHEMA:
            con.execute(statement)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=rows.size, desc="edge store", unit="row", leave=False, disable=None)
        step = 1_000_000
        for start in range(0, rows.size, step):  # sorted (u, v): appends to the B-tree
            part = slice(start, start + step)
            con.executemany("INSERT INTO edges VALUES (?, ?)", zip(rows[part].tolist(), indices[part].tolist()))
            if bar is not None:
                bar.update(rows[part].size)
        if bar is not None:
            bar.close()
        con.executemany("INSERT INTO codes VALUES (?, ?)",
                        ((c, words[c * _CHUNK:(c + 1) * _CHUNK].tobytes()) for c in range(-(-n // _CHUNK))))
        meta = {"format": STORE_FORMAT, "format_version": _FORMAT_VERSION, "num_nodes": n, "k": k, "kind": kind,
                "num_edges": int(np.count_nonzero(rows <= indices)), "version": 0}
        con.executemany("INSERT INTO meta VALUES (?, ?)", ((key, str(value)) for key, value in meta.items()))
        con.execute("COMMIT")
        con.execute("PRAGMA journal_mode=WAL")

    @classmethod
    def open(cls, path: PathLike, *, verify: bool = True) -> "EdgeStore":
        """Open an existing store. ``verify`` also runs SQLite's ``quick_check`` (one pass over the file).

        Raises :class:`~sgl.errors.StoreError` naming the file when it is missing, not a store,
        or damaged; the file is only read until it has passed these checks.
        """
        path = Path(path)
        if not path.is_file():
            raise StoreError(f"no edge store at {path}; build one with `sgl vend build ... --out {path}` "
                             f"or VENDStore.build")
        con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            meta = cls._check(path, con, verify)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
        except BaseException:
            con.close()
            raise
        return cls(path, con, meta)

    @staticmethod
    def _check(path: Path, con: sqlite3.Connection, verify: bool) -> Dict[str, str]:
        hint = "it was left untouched; rebuild it with `sgl vend build` (or restore a copy)"
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "edges", "codes"} <= tables:
                raise StoreError(f"{path} is an SQLite database but not an SGL edge store (tables: "
                                 f"{', '.join(sorted(tables)) or 'none'}); {hint}")
            meta = dict(con.execute("SELECT key, value FROM meta"))
            if meta.get("format") != STORE_FORMAT or meta.get("format_version") != str(_FORMAT_VERSION):
                raise StoreError(f"{path} has format {meta.get('format')!r} version {meta.get('format_version')!r}, "
                                 f"expected {STORE_FORMAT!r} version {_FORMAT_VERSION}; {hint}")
            missing = {"num_nodes", "k", "kind", "num_edges", "version"} - set(meta)
            if missing:
                raise StoreError(f"{path} lacks the meta entries {sorted(missing)}; {hint}")
            n, k = int(meta["num_nodes"]), int(meta["k"])
            sizes = dict(con.execute("SELECT chunk, length(words) FROM codes"))
            expected = {c: min(_CHUNK, n - c * _CHUNK) * k * 8 for c in range(-(-n // _CHUNK))}
            if sizes != expected:
                raise StoreError(f"{path} has damaged VEND codes ({len(sizes)} chunks, expected {len(expected)} "
                                 f"of {k} words per vertex for {n} vertices); {hint}")
            if verify:
                result = [row[0] for row in con.execute("PRAGMA quick_check")]
                if result != ["ok"]:
                    raise StoreError(f"{path} is damaged (SQLite quick_check: {'; '.join(result[:3])}); {hint}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} is not a readable SGL edge store ({exc}); {hint}") from exc
        except ValueError as exc:
            raise StoreError(f"{path} has unreadable meta values ({exc}); {hint}") from exc
        return meta

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "EdgeStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"edge store {self.path} failed: {exc}") from exc

    # -- reading --------------------------------------------------------------------------------
    def meta(self) -> Dict[str, str]:
        """The meta table as read now (``num_edges`` and ``version`` change with updates)."""
        with self._guard():
            return dict(self._con.execute("SELECT key, value FROM meta"))

    @property
    def num_edges(self) -> int:
        return int(self.meta()["num_edges"])

    @property
    def version(self) -> int:
        """Committed update batches since the store was built."""
        return int(self.meta()["version"])

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection commits."""
        return int(self._con.execute("PRAGMA data_version").fetchone()[0])

    def has_edge(self, u: int, v: int) -> bool:
        u, v = (int(x[0]) for x in as_pairs([u], [v], self.num_nodes))
        with self._guard():
            return self._con.execute("SELECT 1 FROM edges WHERE u = ? AND v = ?", (u, v)).fetchone() is not None

    def has_edges(self, u: Any, v: Any) -> np.ndarray:
        """Whether each ``(u[i], v[i])`` is an edge: index lookups joined against a JSON array of pair keys."""
        u, v = as_pairs(u, v, self.num_nodes)
        out = np.zeros(u.size, dtype=bool)
        keys = u * self.num_nodes + v
        # one string of hit positions per batch: far cheaper than one Python row per hit
        sql = ("SELECT group_concat(j.key) FROM json_each(?) AS j JOIN edges AS e "
               "ON e.u = j.value / ? AND e.v = j.value % ?")
        with self._guard():
            for start in range(0, keys.size, _BATCH):
                (hits,) = self._con.execute(sql, (_json_ids(keys[start:start + _BATCH]), self.num_nodes,
                                                  self.num_nodes)).fetchone()
                if hits:
                    out[np.array(hits.split(","), dtype=np.int64) + start] = True
        return out

    def edges(self, u: int) -> np.ndarray:
        """The sorted neighbours of ``u``."""
        u = int(as_vertex_ids([u], self.num_nodes, "u")[0])
        with self._guard():
            rows = self._con.execute("SELECT v FROM edges WHERE u = ? ORDER BY v", (u,)).fetchall()
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    def neighbors_csr(self, vertices: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: the sorted neighbour list of each of ``vertices``, in order."""
        vertices = as_vertex_ids(vertices, self.num_nodes, "vertices")
        wanted = np.unique(vertices)
        src, dst = [], []
        sql = "SELECT u, v FROM edges WHERE u IN (SELECT value FROM json_each(?)) ORDER BY u, v"
        with self._guard():
            for start in range(0, wanted.size, _BATCH):
                rows = np.asarray(self._con.execute(sql, (_json_ids(wanted[start:start + _BATCH]),)).fetchall(),
                                  dtype=np.int64).reshape(-1, 2)
                src.append(rows[:, 0])
                dst.append(rows[:, 1])
        src = np.concatenate(src) if src else np.zeros(0, np.int64)
        dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
        lo, hi = np.searchsorted(src, vertices), np.searchsorted(src, vertices, side="right")
        indptr = np.zeros(vertices.size + 1, dtype=np.int64)
        np.cumsum(hi - lo, out=indptr[1:])
        return indptr, dst[np.repeat(lo - indptr[:-1], hi - lo) + np.arange(indptr[-1])]

    def read_codes(self) -> np.ndarray:
        """The persisted codes, ``(num_nodes, k)`` ``uint64``."""
        with self._guard():
            blobs = [blob for (blob,) in self._con.execute("SELECT words FROM codes ORDER BY chunk")]
        words = np.frombuffer(b"".join(blobs), dtype=np.uint64)
        if words.size != self.num_nodes * self.k:
            raise StoreError(f"{self.path} holds {words.size} code words, expected {self.num_nodes * self.k}")
        return words.reshape(self.num_nodes, self.k).copy()

    # -- writing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator["EdgeStore"]:
        """``BEGIN IMMEDIATE`` .. ``COMMIT`` (``ROLLBACK`` on any error); the unit of an update batch."""
        if self._in_transaction:
            raise StoreError(f"{self.path}: transactions do not nest")
        with self._guard():
            self._con.execute("BEGIN IMMEDIATE")
        self._in_transaction = True
        try:
            yield self
            with self._guard():
                self._con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
                self._con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            raise
        finally:
            self._in_transaction = False

    def _require_transaction(self) -> None:
        if not self._in_transaction:
            raise StoreError(f"{self.path}: writes must run inside `with store.transaction():`")

    def apply_edges(self, insert: Any = None, delete: Any = None) -> Tuple[int, int]:
        """Delete, then insert, undirected edges (inside a transaction); returns ``(inserted, deleted)``.

        Deleting an edge that is not in the store raises :class:`~sgl.errors.GraphError`; the
        surrounding transaction then rolls back, so nothing changes.
        """
        self._require_transaction()
        insert = as_edge_array(insert if insert is not None else [], "insert")
        delete = as_edge_array(delete if delete is not None else [], "delete")
        for name, pairs in (("insert", insert), ("delete", delete)):
            as_vertex_ids(pairs, self.num_nodes, name)
        with self._guard():
            deleted = 0
            if delete.size:
                present = self.has_edges(delete[:, 0], delete[:, 1])
                if not present.all():
                    u, v = delete[np.argmin(present)]
                    raise GraphError(f"cannot delete edge ({u}, {v}): it is not in the store {self.path} "
                                     f"({int((~present).sum())} of {len(delete)} deletions name absent edges)")
                delete = np.unique(np.sort(delete, axis=1), axis=0)
                both = np.concatenate([delete, delete[:, ::-1]]).tolist()
                self._con.executemany("DELETE FROM edges WHERE u = ? AND v = ?", both)
                deleted = len(delete)
            inserted = 0
            if insert.size:
                insert = np.unique(np.sort(insert, axis=1), axis=0)
                inserted = self._con.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?)", insert.tolist()).rowcount
                self._con.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?)", insert[:, ::-1].tolist())
            self._con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'num_edges'",
                              (inserted - deleted,))
        return inserted, deleted

    def write_codes(self, vertices: Any, words: np.ndarray) -> None:
        """Replace the persisted codes of ``vertices`` (inside a transaction)."""
        self._require_transaction()
        vertices = as_vertex_ids(vertices, self.num_nodes, "vertices")
        words = np.asarray(words, dtype=np.uint64).reshape(vertices.size, self.k)
        with self._guard():
            for chunk in np.unique(vertices // _CHUNK).tolist():
                (blob,) = self._con.execute("SELECT words FROM codes WHERE chunk = ?", (chunk,)).fetchone()
                block = np.frombuffer(blob, dtype=np.uint64).reshape(-1, self.k).copy()
                mine = vertices // _CHUNK == chunk
                block[vertices[mine] - chunk * _CHUNK] = words[mine]
                self._con.execute("UPDATE codes SET words = ? WHERE chunk = ?", (block.tobytes(), chunk))

    def __repr__(self) -> str:
        return f"EdgeStore({str(self.path)!r}, num_nodes={self.num_nodes}, k={self.k})"
