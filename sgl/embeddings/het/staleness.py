"""Bounded staleness: the write-back core shared by HET's cache and HET-GMP's mirrors.

A worker keeps *lines*, local copies of server rows (HET: its cache lines; HET-GMP: its
mirrors of remote rows).  Each line holds, as in HET (VLDB'22):

* ``keys``    -- the table row it copies (-1: an empty line);
* ``value``   -- the server value it last saw plus this worker's unpushed deltas;
* ``pending`` -- the unpushed deltas;
* ``version`` -- the server version its value reflects (-1: never fetched);
* ``updates`` -- local updates not yet pushed (the line's clock).

Reads: a pull sends each line's version and the server returns the rows more than
``bound`` updates ahead (:meth:`~sgl.embeddings.het.server.ServerShard.pull`);
:meth:`StaleLines.refresh` takes them in and re-applies the line's own pending deltas.
Writes: :meth:`StaleLines.accumulate` applies SGD deltas and names the lines holding more
than ``write_bound`` updates; :meth:`StaleLines.take` turns lines into a push
``(keys, deltas, counts)`` and marks them clean.  With ``bound = 0`` every read is fresh
and every update is pushed at once: synchronous sparse SGD.

:class:`StalenessConfig` holds the settings both configs share (table size, read and
write bounds, SGD step, what counts as an update) and their checks.

    >>> lines = StaleLines(torch.tensor([4, 9]), dim=2)
    >>> slots = torch.tensor([1, -1])                     # key 9 is line 1, key 3 has no line
    >>> lines.accumulate(slots, torch.ones(2, 2), torch.tensor([2, 1]), write_bound=1).tolist()
    [1]
    >>> keys, deltas, counts = lines.take(torch.tensor([1]))
    >>> keys.tolist(), deltas.tolist(), counts.tolist(), lines.version.tolist()
    ([9], [[1.0, 1.0]], [2], [-1, 1])
"""
from __future__ import annotations

import math
from typing import Literal

import torch

from sgl._checks import check_choice, check_int, check_real
from sgl.embeddings.base import check_scalar
from sgl.errors import ConfigError

__all__ = ["UPDATE_UNITS", "StalenessConfig", "StaleLines", "PushPart"]

#: What one update of a row is: one occurrence of its key in a batch, or one SGD step.
UPDATE_UNITS: tuple[str, ...] = ("step", "occurrence")

#: A push: row ids, their deltas ``[n, dim]`` and update counts.
PushPart = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class StalenessConfig:
    """The staleness settings of a worker config (a mixin of ``HETConfig`` and ``GMPConfig``).

    ``bound`` bounds reads and, unless ``push_bound`` is given, writes; ``lr`` is the SGD
    step of the table; ``update_unit`` says whether an update is one occurrence of a key in
    a batch or one SGD step on its row.  The ``_check_*`` methods raise
    :class:`~sgl.errors.ConfigError` named after the config class.
    """

    num_embeddings: int
    embedding_dim: int
    bound: int
    push_bound: int | None
    lr: float
    update_unit: Literal["step", "occurrence"]

    @property
    def write_bound(self) -> int:
        return self.bound if self.push_bound is None else self.push_bound

    def _check_int(self, name: str, minimum: int, what: str = "") -> None:
        value, who = getattr(self, name), type(self).__name__
        setattr(self, name, check_scalar(check_int, value, f"{who}.{name} must be an int >= {minimum}{what}, "
                                         f"got {value!r}.", minimum, error=ConfigError))

    def _check_table(self) -> None:
        self._check_int("num_embeddings", 1)
        self._check_int("embedding_dim", 1)

    def _check_bounds(self) -> None:
        self._check_int("bound", 0)
        if self.push_bound is not None:
            self._check_int("push_bound", 0)

    def _check_sgd(self) -> None:
        who = type(self).__name__
        check_scalar(check_choice, self.update_unit, f"{who}.update_unit must be 'step' or 'occurrence', got "
                     f"{self.update_unit!r}.", UPDATE_UNITS, error=ConfigError)
        check_scalar(check_real, self.lr, f"{who}.lr must be > 0, got {self.lr!r}.", 0.0, math.inf,
                     open_low=True, error=ConfigError)


class StaleLines:
    """Fixed slot arrays of lines (see the module docstring); ``keys`` gives each line's row.

    Methods take ``slots``: the line of each key of a batch (-1 = the key has no line). The
    lines live on the device of ``keys`` (the worker's: its model's device);
    :meth:`to_device` moves them.
    """

    #: the tensor attributes that :meth:`to_device` moves
    _TENSORS: tuple[str, ...] = ("keys", "value", "pending", "version", "updates")

    def __init__(self, keys: torch.Tensor, dim: int) -> None:
        n, device = keys.numel(), keys.device
        self.dim = dim
        self.keys = keys
        self.value = torch.zeros(n, dim, device=device)
        self.pending = torch.zeros(n, dim, device=device)
        self.version = torch.full((n,), -1, dtype=torch.int64, device=device)
        self.updates = torch.zeros(n, dtype=torch.int64, device=device)

    @property
    def device(self) -> torch.device:
        return self.keys.device

    def to_device(self, device: torch.device) -> None:
        """Move every line (and the subclass's state listed in ``_TENSORS``) to ``device``."""
        for name in self._TENSORS:
            setattr(self, name, getattr(self, name).to(device))

    def line_bytes(self) -> int:
        """Bytes of one line's staleness state: key, value, pending deltas, version, update count."""
        return 2 * self.dim * self.value.element_size() + 3 * 8

    def held_versions(self, slots: torch.Tensor) -> torch.Tensor:
        """The version a pull sends for each key: its line's, or -1 (not held)."""
        held = slots >= 0
        versions = torch.full((slots.numel(),), -1, dtype=torch.int64, device=slots.device)
        versions[held] = self.version[slots[held]]
        return versions

    def refresh(self, slots: torch.Tensor, got: torch.Tensor, values: torch.Tensor, versions: torch.Tensor,
                out: torch.Tensor, read: torch.Tensor) -> None:
        """Take in a pull reply: batch positions ``got`` came back with server ``values`` and ``versions``.

        A line holding the key takes the server value plus its own pending deltas; ``out``
        (the batch's values) and ``read`` (the version each value reflects) are filled in.
        """
        into = slots[got] >= 0
        s = slots[got[into]]
        self.value[s] = values[into] + self.pending[s]
        self.version[s] = versions[into]
        out[got] = values
        out[got[into]] = self.value[s]
        read[got] = versions

    def accumulate(self, slots: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor,
                   write_bound: int) -> torch.Tensor:
        """Apply the SGD ``deltas`` and ``counts`` updates of the held keys; the lines now due.

        A line is due once it holds more than ``write_bound`` unpushed updates.
        """
        held = slots >= 0
        s = slots[held]
        self.value[s] += deltas[held]
        self.pending[s] += deltas[held]
        self.updates[s] += counts[held]
        return s[self.updates[s] > write_bound]

    def take(self, lines: torch.Tensor) -> PushPart:
        """The push of ``lines`` (keys, pending deltas, update counts); they become clean.

        Their version advances by the updates pushed: the server will have applied them.
        """
        part = (self.keys[lines], self.pending[lines].clone(), self.updates[lines].clone())
        self.version[lines] += self.updates[lines]
        self.pending[lines] = 0.0
        self.updates[lines] = 0
        return part

    def dirty(self) -> torch.Tensor:
        """Lines with unpushed updates."""
        return (self.updates > 0).nonzero().flatten()

    def clear(self, lines: torch.Tensor) -> None:
        """Empty the state of ``lines`` (new keys enter them: nothing fetched, nothing pending)."""
        self.value[lines] = 0.0
        self.pending[lines] = 0.0
        self.version[lines] = -1
        self.updates[lines] = 0
