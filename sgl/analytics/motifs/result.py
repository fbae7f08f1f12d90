"""Per-vertex motif counts and graph totals: :class:`MotifCounts`, saved as ``.npz`` or ``.csv``."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np

from sgl.errors import ConfigError, DatasetError
from sgl.fileio import atomic_write

__all__ = ["MotifCounts", "MOTIF_SIZES"]

PathLike = Union[str, os.PathLike]

#: nodes per instance: a column of per-vertex counts sums to ``size * total``
MOTIF_SIZES: Dict[str, int] = {"edge": 2, "asym_edge": 2, "mutual_edge": 2}


def _size(name: str) -> int:
    return MOTIF_SIZES.get(name, 3)


@dataclass(eq=False)  # holds arrays: no elementwise ==
class MotifCounts:
    """How many instances of each motif contain each vertex, and how many the graph has.

    Args:
        names: the motifs, one per column (``edge, wedge, triangle`` or ``asym_edge,
            mutual_edge, M1 .. M13``).
        per_vertex: ``[num_vertices, len(names)]`` int64 counts of instances containing each vertex.
        totals: ``name -> number of instances`` in the whole graph.
        directed: whether the directed motifs were counted.
        vertices: the vertex id of every row (``None``: rows are vertices ``0 .. n-1``).

    Example:
        >>> import numpy as np
        >>> counts = MotifCounts(("edge", "triangle"), np.array([[2, 1], [2, 1], [2, 1]]),
        ...                      {"edge": 3, "triangle": 1}, directed=False)
        >>> counts["triangle"].tolist(), counts.totals["edge"]
        ([1, 1, 1], 3)
    """

    names: Tuple[str, ...]
    per_vertex: np.ndarray
    totals: Dict[str, int]
    directed: bool
    vertices: Optional[np.ndarray] = field(default=None)

    def __post_init__(self) -> None:
        self.names = tuple(self.names)
        self.per_vertex = np.asarray(self.per_vertex, dtype=np.int64)
        if self.per_vertex.ndim != 2 or self.per_vertex.shape[1] != len(self.names):
            raise ConfigError(f"per_vertex must have one column per motif ({len(self.names)}), "
                              f"got shape {self.per_vertex.shape}")
        if self.vertices is None:
            self.vertices = np.arange(self.per_vertex.shape[0], dtype=np.int64)
        self.totals = {name: int(self.totals[name]) for name in self.names}

    @property
    def num_vertices(self) -> int:
        return self.per_vertex.shape[0]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.names:
            raise KeyError(f"no motif {name!r} in these counts; they have {', '.join(self.names)}")
        return self.per_vertex[:, self.names.index(name)]

    def __repr__(self) -> str:
        totals = ", ".join(f"{name}={value:,}" for name, value in self.totals.items())
        return f"MotifCounts(num_vertices={self.num_vertices}, directed={self.directed}, {totals})"

    def consistent(self) -> bool:
        """True when every column sums to ``motif size × total`` (a check on a full-graph count)."""
        return all(int(self[name].sum()) == _size(name) * self.totals[name] for name in self.names)

    # ------------------------------------------------------------------ files
    def save(self, path: PathLike) -> None:
        """Write atomically: ``.npz`` (arrays, totals, names) or ``.csv`` (``vertex,<names>`` rows)."""
        suffix = os.fspath(path).rsplit(".", 1)[-1].lower() if "." in os.fspath(path) else ""
        if suffix == "npz":
            buffer = io.BytesIO()
            np.savez(buffer, names=np.array(self.names), per_vertex=self.per_vertex, vertices=self.vertices,
                     totals=np.array([self.totals[n] for n in self.names], dtype=np.int64),
                     directed=np.array(self.directed))
            with atomic_write(path, "wb") as handle:
                handle.write(buffer.getvalue())
        elif suffix == "csv":
            table = np.column_stack([self.vertices, self.per_vertex])
            with atomic_write(path, "w") as handle:
                handle.write(",".join(("vertex",) + self.names) + "\n")
                np.savetxt(handle, table, fmt="%d", delimiter=",")
        else:
            raise ConfigError(f"cannot write motif counts to {os.fspath(path)!r}: use a .npz or .csv file name")

    @classmethod
    def load(cls, path: PathLike) -> "MotifCounts":
        """Read a file written by :meth:`save` with a ``.npz`` name."""
        try:
            with np.load(path, allow_pickle=False) as data:
                names: Sequence[str] = [str(n) for n in data["names"]]
                totals = dict(zip(names, data["totals"].tolist()))
                return cls(tuple(names), data["per_vertex"], totals, bool(data["directed"]), data["vertices"])
        except FileNotFoundError:
            raise DatasetError(f"no motif counts at {os.fspath(path)}") from None
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"{os.fspath(path)} is not a motif-count .npz written by MotifCounts.save "
                               f"({type(exc).__name__}: {exc})") from exc
