"""Who owns which feature: :class:`FieldSplit`, each party's view of a table, sample-id alignment.

In vertical federated learning every party holds *different columns of the same rows*. A
:class:`FieldSplit` names the parties in order (party 0 is the **active** party: it holds the
labels and the top model) and the columns each one owns; every column of the table must be owned
by exactly one party. :meth:`FieldSplit.views` cuts a :class:`~sgl.datasets.ctr.CTRData` into one
:class:`PartyView` per party (labels only in party 0's view), and :func:`check_aligned` verifies
that the parties' sample ids agree row for row (in deployment they come out of a private set
intersection; here they are the row numbers unless given).

Example:
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> data = make_synthetic_ctr(50, [10, 10, 10], num_dense=2, seed=0)
    >>> split = FieldSplit.from_dict({"guest": ["I1", "I2", "F1"], "host": ["F2", "F3"]})
    >>> [v.num_fields for v in split.views(data)], split.views(data)[1].labels is None
    ([1, 2], True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from sgl.errors import ConfigError

__all__ = ["FieldSplit", "PartyView", "check_aligned", "load_split", "default_split"]


@dataclass
class PartyView:
    """One party's columns of a CTR table (what that party may read).

    Attributes:
        name: the party's name.
        dense: float32 ``[N, D_p]`` (its dense columns).
        sparse: int64 ``[N, F_p]`` per-field ids (0 = unknown bucket), local to each field.
        field_dims: vocabulary size of each of its fields.
        field_names, dense_names: its column names.
        sample_ids: int64 ``[N]`` ids of the rows (aligned across parties).
        labels: float32 ``[N]`` for the active party, ``None`` for the others.
    """

    name: str
    dense: np.ndarray
    sparse: np.ndarray
    field_dims: List[int]
    field_names: List[str]
    dense_names: List[str]
    sample_ids: np.ndarray
    labels: Optional[np.ndarray] = None

    @property
    def num_fields(self) -> int:
        return len(self.field_dims)

    @property
    def num_dense(self) -> int:
        return int(self.dense.shape[1])

    def __len__(self) -> int:
        return int(self.sample_ids.shape[0])

    def rows(self, index: np.ndarray) -> "PartyView":
        """The rows ``index`` of this view (labels kept only where present)."""
        return PartyView(self.name, self.dense[index], self.sparse[index], list(self.field_dims),
                         list(self.field_names), list(self.dense_names), self.sample_ids[index],
                         None if self.labels is None else self.labels[index])


@dataclass
class FieldSplit:
    """An ordered mapping party name -> owned column names; party 0 is the active party.

    Column names are the table's ``dense_names`` (``I1``..) and ``field_names`` (``C1``..).
    """

    parties: Dict[str, List[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.parties, Mapping) or len(self.parties) < 2:
            raise ConfigError(f"a field split needs at least 2 parties (name -> list of columns), got "
                              f"{self.parties!r}")
        clean: Dict[str, List[str]] = {}
        for name, cols in self.parties.items():
            if isinstance(cols, str) or not isinstance(cols, Sequence) or not all(isinstance(c, str) for c in cols):
                raise ConfigError(f"party {name!r}: give its columns as a list of names, got {cols!r}")
            if not cols:
                raise ConfigError(f"party {name!r} owns no column; every party needs at least one")
            clean[str(name)] = list(cols)
        self.parties = clean

    @classmethod
    def from_dict(cls, parties: Mapping[str, Sequence[str]]) -> "FieldSplit":
        return cls(dict(parties))

    @property
    def names(self) -> List[str]:
        return list(self.parties)

    @property
    def num_parties(self) -> int:
        return len(self.parties)

    def validate(self, columns: Sequence[str]) -> None:
        """Raise :class:`ConfigError` unless every column in ``columns`` has exactly one owner."""
        owner: Dict[str, str] = {}
        known = set(columns)
        for name, cols in self.parties.items():
            for col in cols:
                if col not in known:
                    raise ConfigError(f"party {name!r} claims column {col!r}, which the table does not have; "
                                      f"columns are {', '.join(columns)}")
                if col in owner:
                    raise ConfigError(f"column {col!r} is owned twice (by {owner[col]!r} and {name!r}); "
                                      "give each column to exactly one party")
                owner[col] = name
        unowned = [c for c in columns if c not in owner]
        if unowned:
            raise ConfigError(f"column(s) {', '.join(unowned)} are owned by no party; add them to one party "
                              "of the split (every column needs exactly one owner)")

    def views(self, data, sample_ids: Optional[Sequence[np.ndarray]] = None) -> List[PartyView]:
        """One :class:`PartyView` per party of a :class:`~sgl.datasets.ctr.CTRData` (validated).

        ``sample_ids`` (one array per party, default: the row numbers) lets a test give parties
        ids that do not align; :func:`check_aligned` catches them.
        """
        dense_names, field_names = list(data.dense_names), list(data.field_names)
        self.validate(dense_names + field_names)
        if sample_ids is not None and len(sample_ids) != self.num_parties:
            raise ConfigError(f"sample_ids needs one array per party ({self.num_parties}), got {len(sample_ids)}")
        out = []
        for p, (name, cols) in enumerate(self.parties.items()):
            d_idx = [dense_names.index(c) for c in cols if c in dense_names]
            f_idx = [field_names.index(c) for c in cols if c in field_names]
            ids = np.arange(len(data), dtype=np.int64) if sample_ids is None else \
                np.asarray(sample_ids[p], dtype=np.int64).reshape(-1)
            out.append(PartyView(name, np.asarray(data.dense[:, d_idx], dtype=np.float32),
                                 np.asarray(data.sparse[:, f_idx], dtype=np.int64),
                                 [data.field_dims[i] for i in f_idx], [field_names[i] for i in f_idx],
                                 [dense_names[i] for i in d_idx], ids,
                                 np.asarray(data.labels, dtype=np.float32) if p == 0 else None))
        return out


def check_aligned(sample_ids: Sequence[np.ndarray], names: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`ConfigError` unless every party's sample ids equal party 0's, row for row.

    >>> try:
    ...     check_aligned([np.arange(3), np.array([0, 2, 1])])
    ... except ConfigError as err:
    ...     print(str(err)[:70])
    party 1's sample ids do not align with party 0's: row 1 holds id 2 the
    """
    names = list(names) if names is not None else [str(i) for i in range(len(sample_ids))]
    ref = np.asarray(sample_ids[0]).reshape(-1)
    for p in range(1, len(sample_ids)):
        ids = np.asarray(sample_ids[p]).reshape(-1)
        if ids.shape != ref.shape:
            raise ConfigError(f"party {names[p]}'s sample ids do not align with party {names[0]}'s: {ids.size} rows "
                              f"vs {ref.size}; intersect and order the ids (PSI) before training")
        bad = np.nonzero(ids != ref)[0]
        if bad.size:
            r = int(bad[0])
            raise ConfigError(f"party {names[p]}'s sample ids do not align with party {names[0]}'s: row {r} holds "
                              f"id {int(ids[r])} there but {int(ref[r])} at party {names[0]} ({bad.size} rows "
                              "differ); intersect and order the ids (PSI) before training")


def load_split(source: Union[str, Path, Mapping[str, Sequence[str]]]) -> FieldSplit:
    """A :class:`FieldSplit` from a mapping or a YAML/JSON file ``{party: [columns]}`` (order kept).

    A column list may use ranges such as ``"I1-I13"`` or ``"C1-C26"`` (same prefix).
    """
    if isinstance(source, Mapping):
        raw = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"field split file {path} does not exist; write a YAML mapping party -> [columns]")
        import yaml

        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"cannot parse the field split {path}: {exc}") from exc
        if not isinstance(raw, Mapping):
            raise ConfigError(f"the field split {path} must be a mapping party -> [columns], got {type(raw).__name__}")
    return FieldSplit({str(k): _expand(v) for k, v in raw.items()})


def _expand(cols: object) -> List[str]:
    if isinstance(cols, str):
        cols = [c.strip() for c in cols.split(",") if c.strip()]
    if not isinstance(cols, Sequence):
        raise ConfigError(f"columns must be a list of names, got {cols!r}")
    out: List[str] = []
    for col in cols:
        col = str(col)
        if "-" in col:
            lo, hi = col.split("-", 1)
            prefix = lo.rstrip("0123456789")
            if prefix and hi.startswith(prefix) and lo[len(prefix):].isdigit() and hi[len(prefix):].isdigit():
                out += [f"{prefix}{i}" for i in range(int(lo[len(prefix):]), int(hi[len(prefix):]) + 1)]
                continue
        out.append(col)
    return out


def default_split(data, parties: int = 2) -> FieldSplit:
    """The FDL convention: dense columns and the first categorical fields to the active party
    (``guest``), the categoricals shared out round-robin among ``parties - 1`` hosts.

    With no dense column the guest takes every ``parties``-th field.
    """
    if not isinstance(parties, int) or parties < 2:
        raise ConfigError(f"parties must be an integer >= 2, got {parties!r}")
    fields = list(data.field_names)
    hosts = parties - 1
    if len(fields) < hosts + (0 if data.num_dense else 1):
        raise ConfigError(f"{len(fields)} categorical fields cannot be shared among {parties} parties")
    split: Dict[str, List[str]] = {"guest": list(data.dense_names)}
    names = [f"host{h + 1}" if hosts > 1 else "host" for h in range(hosts)]
    for n in names:
        split[n] = []
    owners = names if data.num_dense else ["guest"] + names
    for i, f in enumerate(fields):
        split[owners[i % len(owners)]].append(f)
    return FieldSplit(split)
