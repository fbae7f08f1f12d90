"""Sharded parameter server of HET: per-row values and per-row update versions.

Row ``k`` lives on shard ``k % num_shards`` by default, or on ``placement[k]``
when a placement is given (HET-GMP).
Each row carries a *version*: the number of updates the server has applied to
it so far (a per-row clock, as in HET), which the workers' caches compare
against to bound staleness.

The server is host-side state: its shards live in host memory whatever device the workers
train on; the transports (:mod:`sgl.embeddings.het.transport`) move requests to the host and
replies back to the worker's device.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl._checks import check_int
from sgl.embeddings.base import check_scalar
from sgl.errors import EmbeddingError

__all__ = ["init_rows", "check_placement", "shard_rows", "PullReply", "ServerShard", "ShardedServer"]

#: Rows are initialised in blocks of this many, each from its own seeded
#: generator, so a row's initial value depends only on (seed, row id) and not on
#: the sharding or on which process builds it.
_INIT_BLOCK = 4096


def init_rows(rows: torch.Tensor, dim: int, *, seed: int = 0, std: float = 0.01) -> torch.Tensor:
    """Deterministic initial values ``N(0, std^2)`` of the given table rows.

    >>> a = init_rows(torch.tensor([5, 7]), 4, seed=1)
    >>> b = init_rows(torch.arange(8), 4, seed=1)
    >>> bool(torch.equal(a, b[[5, 7]]))
    True
    """
    rows = rows.reshape(-1).to(torch.int64)
    out = torch.empty(rows.numel(), dim)
    if rows.numel() == 0:
        return out
    block = torch.div(rows, _INIT_BLOCK, rounding_mode="floor")
    for b in torch.unique(block).tolist():
        gen = torch.Generator().manual_seed((seed * 1_000_003 + int(b)) % (2**63))
        values = torch.randn(_INIT_BLOCK, dim, generator=gen) * std
        sel = block == b
        out[sel] = values[rows[sel] - b * _INIT_BLOCK]
    return out


def check_placement(placement: torch.Tensor | None, num_embeddings: int, num_shards: int
                    ) -> torch.Tensor | None:
    """Validate a row -> shard map (int64 ``[num_embeddings]`` in ``[0, num_shards)``)."""
    if placement is None:
        return None
    if not isinstance(placement, torch.Tensor) or placement.shape != (num_embeddings,):
        raise EmbeddingError(
            f"placement must be a tensor of shape ({num_embeddings},) (one shard per row), got "
            f"{tuple(placement.shape) if isinstance(placement, torch.Tensor) else type(placement).__name__}."
        )
    placement = placement.to(torch.int64)
    if placement.numel() and (int(placement.min()) < 0 or int(placement.max()) >= num_shards):
        raise EmbeddingError(
            f"placement values must be in [0, {num_shards}), got [{int(placement.min())}, "
            f"{int(placement.max())}]."
        )
    return placement


def shard_rows(shard: int, num_shards: int, num_embeddings: int,
               placement: torch.Tensor | None) -> torch.Tensor:
    """Sorted row ids owned by ``shard`` (``k % num_shards == shard`` by default)."""
    if placement is None:
        return torch.arange(shard, num_embeddings, num_shards)
    return (placement == shard).nonzero().flatten()


@dataclass
class PullReply:
    """A server's answer to a pull.

    ``positions`` index the request's keys that were answered (all keys when
    the request carried no versions), ``values`` are their rows, ``versions``
    their server versions (``None`` for a version-less pull) and
    ``max_staleness`` the largest ``server version - worker version`` among the
    keys that were *not* refreshed (-1 when there were none).
    """

    positions: torch.Tensor
    values: torch.Tensor
    versions: torch.Tensor | None
    max_staleness: int = -1


class ServerShard:
    """One shard: the master copy (value and version) of the table rows ``rows``.

    >>> shard = ServerShard(torch.tensor([2, 5, 8]), dim=4)
    >>> reply = shard.pull(torch.tensor([8, 2]), torch.tensor([-1, 0]), bound=0)
    >>> reply.positions.tolist(), tuple(reply.values.shape)   # key 2 is current
    ([0], (1, 4))
    """

    def __init__(self, rows: torch.Tensor, dim: int, *, seed: int = 0, init_std: float = 0.01) -> None:
        rows = rows.reshape(-1).to(torch.int64)
        if rows.numel() > 1 and not bool((rows[1:] > rows[:-1]).all()):
            raise EmbeddingError("ServerShard: rows must be strictly increasing row ids.")
        self.rows = rows
        self.weight = init_rows(self.rows, dim, seed=seed, std=init_std)
        self.version = torch.zeros(self.rows.numel(), dtype=torch.int64)

    def _local(self, keys: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.rows, keys.contiguous())

    def values_of(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Current ``(values, versions)`` of rows this shard owns (a local read)."""
        idx = self._local(keys)
        return self.weight[idx], self.version[idx]

    def pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int) -> PullReply:
        """Rows the worker must refresh: new to it (version -1) or more than ``bound`` behind."""
        idx = self._local(keys)
        if versions is None:
            return PullReply(torch.arange(keys.numel()), self.weight[idx], None)
        server = self.version[idx]
        lag = server - versions
        stale = (versions < 0) | (lag > bound)
        kept = lag[~stale]
        positions = stale.nonzero().flatten()
        return PullReply(
            positions, self.weight[idx[positions]], server[positions],
            int(kept.max()) if kept.numel() else -1,
        )

    def push(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None) -> None:
        """Apply ``w_k += delta`` in the given order and ``version_k += count``."""
        idx = self._local(keys)
        self.weight.index_add_(0, idx, deltas)
        if counts is not None:
            self.version.index_add_(0, idx, counts)


class ShardedServer:
    """All shards of an in-process parameter server (used by :class:`LocalTransport`).

    >>> server = ShardedServer(10, 4, num_shards=3)
    >>> server.push(torch.tensor([4]), torch.ones(1, 4), torch.tensor([2]))
    >>> server.versions()[4].item(), server.weights()[4].shape
    (2, torch.Size([4]))
    """

    def __init__(
        self, num_embeddings: int, dim: int, *, num_shards: int = 1,
        placement: torch.Tensor | None = None, seed: int = 0, init_std: float = 0.01,
    ) -> None:
        num_embeddings, dim, num_shards = (
            check_scalar(check_int, value, f"ShardedServer: {name} must be an int >= 1, got {value!r}.", 1)
            for name, value in (("num_embeddings", num_embeddings), ("dim", dim), ("num_shards", num_shards))
        )
        self.num_embeddings, self.dim, self.num_shards = num_embeddings, dim, num_shards
        self.placement = check_placement(placement, num_embeddings, num_shards)
        self.shards = [
            ServerShard(shard_rows(s, num_shards, num_embeddings, self.placement), dim,
                        seed=seed, init_std=init_std)
            for s in range(num_shards)
        ]

    def owner(self, keys: torch.Tensor) -> torch.Tensor:
        """Shard of each key (on the keys' device): ``placement[key]``, or ``key % num_shards`` by default."""
        if self.placement is None:
            return keys % self.num_shards
        return self.placement[keys.cpu()].to(keys.device)

    def _route(self, keys: torch.Tensor) -> list[torch.Tensor]:
        owner = self.owner(keys)
        return [(owner == s).nonzero().flatten() for s in range(self.num_shards)]

    def pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int) -> PullReply:
        positions, values, vers, stale = [], [], [], -1
        for shard, sel in zip(self.shards, self._route(keys)):
            if sel.numel() == 0:
                continue
            reply = shard.pull(keys[sel], None if versions is None else versions[sel], bound)
            positions.append(sel[reply.positions])
            values.append(reply.values)
            if reply.versions is not None:
                vers.append(reply.versions)
            stale = max(stale, reply.max_staleness)
        if not positions:
            return PullReply(
                torch.zeros(0, dtype=torch.int64), torch.zeros(0, self.dim),
                None if versions is None else torch.zeros(0, dtype=torch.int64),
            )
        pos = torch.cat(positions)
        order = torch.argsort(pos)
        return PullReply(
            pos[order], torch.cat(values)[order],
            None if versions is None else torch.cat(vers)[order], stale,
        )

    def push(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None) -> None:
        for shard, sel in zip(self.shards, self._route(keys)):
            if sel.numel():
                shard.push(keys[sel], deltas[sel], None if counts is None else counts[sel])

    def weights(self) -> torch.Tensor:
        """The full table ``[num_embeddings, dim]`` (a copy)."""
        out = torch.empty(self.num_embeddings, self.dim)
        for shard in self.shards:
            out[shard.rows] = shard.weight
        return out

    def versions(self) -> torch.Tensor:
        """Per-row update counts ``[num_embeddings]`` (a copy)."""
        out = torch.empty(self.num_embeddings, dtype=torch.int64)
        for shard in self.shards:
            out[shard.rows] = shard.version
        return out
