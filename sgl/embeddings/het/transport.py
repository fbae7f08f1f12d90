"""How a HET worker talks to the parameter server: one interface, two transports.

* :class:`LocalTransport` -- an in-process simulator over a shared
  :class:`~sgl.embeddings.het.server.ShardedServer`; deterministic, with exact
  byte accounting. Several workers share one server and run in any order.
* :class:`DistTransport` -- real processes over :mod:`sgl.comm` (Gloo on
  127.0.0.1 or any torch.distributed group): every rank is a worker *and*
  hosts server shard ``rank`` (rows ``k % world == rank``); a pull or push is
  one round of ``all_to_all``, so every rank must call :meth:`pull` /
  :meth:`push` the same number of times and in the same mode.

Bytes are counted per message as the protocol defines them: a key 8 B, a
version 8 B, an update count 8 B, a value ``4 * dim`` B (float32).  A versioned
pull sends ``(key, version)`` for every requested key and receives
``(position, version, value)`` for the refreshed ones; a version-less pull (the
no-cache parameter-server baseline) sends keys and receives one value per key.
A push sends ``(key, delta[, count])``.  The all-to-all size exchange of the
real transport (one int per peer) is not counted.

Compressed pushes: both transports take an optional ``compressor`` (a
:class:`~sgl.comm.compress.KVCodec`, e.g. SketchML's). A push then sends one ``uint8`` payload
per destination shard, encoded from ``(keys, deltas, counts)`` and decoded by the shard, and
:attr:`TrafficStats.bytes_sent` counts the payloads' real sizes. Pulls are not compressed.

Devices: a worker calls with tensors on its own device (its model's) and gets its replies
there; the server shards stay in host memory; what crosses :mod:`sgl.comm` lives on the
device its backend moves (``sgl.comm._wire._comm_device``: the rank's GPU under NCCL, the CPU
under Gloo).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from sgl import comm
from sgl._checks import check_int
from sgl.embeddings.base import check_scalar
from sgl.comm._wire import _comm_device
from sgl.comm.compress import KVCodec
from sgl.embeddings.het.server import (
    PullReply, ServerShard, ShardedServer, check_placement, shard_rows,
)
from sgl.errors import CommError, EmbeddingError

__all__ = ["TrafficStats", "Transport", "LocalTransport", "DistTransport"]

_ID_BYTES = 8


@dataclass
class TrafficStats:
    """Embedding traffic of one worker (bytes are exact protocol bytes)."""

    bytes_sent: int = 0
    bytes_received: int = 0
    pulls: int = 0
    pushes: int = 0
    keys_requested: int = 0
    rows_fetched: int = 0
    rows_pushed: int = 0
    #: Bytes of the pushes alone (part of ``bytes_sent``): what a push codec shrinks.
    push_bytes: int = 0
    #: Largest number of server updates a read was allowed to miss (-1: none).
    max_read_staleness: int = -1
    history: list[int] = field(default_factory=list, repr=False)

    @property
    def total_bytes(self) -> int:
        return self.bytes_sent + self.bytes_received

    def _pull(self, n_keys: int, versioned: bool, n_rows: int, dim: int, stale: int) -> None:
        self.pulls += 1
        self.keys_requested += n_keys
        self.rows_fetched += n_rows
        self.bytes_sent += n_keys * (_ID_BYTES + (8 if versioned else 0))
        self.bytes_received += n_rows * (4 * dim + (16 if versioned else 0))
        self.max_read_staleness = max(self.max_read_staleness, stale)

    def _push(self, n_rows: int, counted: bool, dim: int) -> None:
        self.pushes += 1
        self.rows_pushed += n_rows
        sent = n_rows * (_ID_BYTES + 4 * dim + (8 if counted else 0))
        self.bytes_sent += sent
        self.push_bytes += sent

    def _push_payload(self, n_rows: int, n_bytes: int) -> None:
        """A compressed push: ``n_bytes`` of payload for ``n_rows`` rows."""
        self.pushes += 1
        self.rows_pushed += n_rows
        self.bytes_sent += n_bytes
        self.push_bytes += n_bytes


class Transport(ABC):
    """Pull rows from / push deltas to the parameter server."""

    num_embeddings: int
    dim: int
    stats: TrafficStats

    @abstractmethod
    def pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int) -> PullReply:
        """Rows for ``keys`` (int64, unique).

        With ``versions`` (int64, -1 = not held) only rows that are new to the
        worker or more than ``bound`` updates behind come back; with
        ``versions=None`` every row comes back (no-cache baseline).
        """

    @abstractmethod
    def push(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None) -> None:
        """Add ``deltas`` to the rows ``keys`` and ``counts`` to their versions."""

    @abstractmethod
    def read(self, keys: torch.Tensor) -> torch.Tensor:
        """The server's current values of ``keys`` (int64, unique), on the keys' device.

        An evaluation read: not training traffic, so not counted in :attr:`stats`
        (collective for :class:`DistTransport`, like a pull).
        """


def _reply_to(reply: PullReply, device: torch.device) -> PullReply:
    """``reply`` with its tensors on ``device`` (the worker's)."""
    return PullReply(reply.positions.to(device), reply.values.to(device),
                     None if reply.versions is None else reply.versions.to(device), reply.max_staleness)


def _check_request(keys: torch.Tensor, versions: torch.Tensor | None, dim: int,
                   deltas: torch.Tensor | None = None) -> None:
    if keys.dtype != torch.int64 or keys.dim() != 1:
        raise EmbeddingError(f"transport: keys must be a 1-D int64 tensor, got {keys.dtype} {tuple(keys.shape)}.")
    if versions is not None and versions.shape != keys.shape:
        raise EmbeddingError(f"transport: versions shape {tuple(versions.shape)} != keys {tuple(keys.shape)}.")
    if deltas is not None and deltas.shape != (keys.numel(), dim):
        raise EmbeddingError(f"transport: deltas shape {tuple(deltas.shape)}, expected ({keys.numel()}, {dim}).")


class LocalTransport(Transport):
    """In-process transport of one simulated worker over a shared server.

    ``rank`` (optional) is the shard co-located with this worker (HET-GMP): its
    keys are read and written locally and not counted as traffic.

    >>> server = ShardedServer(100, 8, num_shards=2)
    >>> t = LocalTransport(server)
    >>> reply = t.pull(torch.tensor([3, 9]), torch.tensor([-1, -1]), bound=0)
    >>> reply.positions.tolist(), t.stats.total_bytes   # 2*(8+8) sent, 2*(16+32) received
    ([0, 1], 128)
    """

    def __init__(self, server: ShardedServer, rank: int | None = None, compressor: KVCodec | None = None) -> None:
        if rank is not None:
            rank = check_scalar(check_int, rank, f"LocalTransport: rank must be in [0, {server.num_shards}), got {rank}.",
                                0, server.num_shards - 1)
        self.server, self.rank = server, rank
        self.num_embeddings, self.dim = server.num_embeddings, server.dim
        self.compressor = compressor
        self.stats = TrafficStats()

    @property
    def local_shard(self) -> ServerShard | None:
        """The shard co-located with this worker (``None`` without a rank)."""
        return None if self.rank is None else self.server.shards[self.rank]

    def owner(self, keys: torch.Tensor) -> torch.Tensor:
        return self.server.owner(keys)

    def _remote(self, keys: torch.Tensor) -> torch.Tensor:
        if self.rank is None:
            return torch.ones(keys.numel(), dtype=torch.bool, device=keys.device)
        return self.server.owner(keys) != self.rank

    def pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int) -> PullReply:
        _check_request(keys, versions, self.dim)
        # the server is in host memory; the reply goes back to the worker's device
        host_keys = keys.cpu()
        reply = self.server.pull(host_keys, None if versions is None else versions.cpu(), bound)
        remote = self._remote(host_keys)
        self.stats._pull(int(remote.sum()), versions is not None, int(remote[reply.positions].sum()),
                         self.dim, reply.max_staleness)
        return _reply_to(reply, keys.device)

    def push(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None) -> None:
        _check_request(keys, None, self.dim, deltas)
        host_keys = keys.cpu()
        remote = self._remote(host_keys)
        if self.compressor is not None:  # the remote rows travel as one payload, decoded by the server
            owned = ~remote
            payload = self.compressor.encode(keys[remote.to(keys.device)], deltas[remote.to(deltas.device)],
                                             None if counts is None else counts[remote.to(counts.device)])
            r_keys, r_deltas, r_counts = self.compressor.decode(payload)
            keys_all = torch.cat([host_keys[owned], r_keys.cpu()])
            deltas_all = torch.cat([deltas.cpu()[owned], r_deltas.cpu()])
            counts_all = None if counts is None else torch.cat([counts.cpu()[owned], r_counts.cpu()])
            self.server.push(keys_all, deltas_all, counts_all)
            self.stats._push_payload(int(remote.sum()), payload.numel())
            return
        self.server.push(host_keys, deltas.cpu(), None if counts is None else counts.cpu())
        self.stats._push(int(remote.sum()), counts is not None, self.dim)

    def read(self, keys: torch.Tensor) -> torch.Tensor:
        return self.server.pull(keys.cpu(), None, 0).values.to(keys.device)


class DistTransport(Transport):
    """Transport over :mod:`sgl.comm`: each rank is a worker and hosts one server shard.

    Rank ``r`` hosts the rows ``k % world == r``, or ``placement[k] == r`` when
    a placement is given (HET-GMP).  ``count_local=False`` leaves traffic to
    the rank's own shard out of the byte counts (HET-GMP, where it is local
    memory); HET counts it, the server being logically remote.

    Calls are collective over ``group`` (default: the world).  A peer that dies
    or stops calling makes every other rank raise :class:`CommError` within
    ``timeout`` seconds, naming the operation and the call number.

    ``compressor`` (a :class:`~sgl.comm.compress.KVCodec`) encodes each destination's part of a
    push into one ``uint8`` payload (rows for the rank's own shard too, unless
    ``count_local=False``, where they stay in local memory, exact and uncounted).
    """

    def __init__(
        self, num_embeddings: int, dim: int, *, seed: int = 0, init_std: float = 0.01,
        placement: torch.Tensor | None = None, count_local: bool = True,
        group=None, timeout: float | None = None, compressor: KVCodec | None = None,
    ) -> None:
        if not comm.is_initialized():
            raise CommError(
                "DistTransport: sgl.comm is not initialised. Fix: call comm.init() (or run under "
                "comm.spawn / torchrun) before building the transport, or use LocalTransport."
            )
        self.group, self.timeout = group, timeout
        self.rank = comm.get_rank(group)
        self.world = comm.get_world_size(group)
        self.num_embeddings, self.dim = num_embeddings, dim
        self.placement = check_placement(placement, num_embeddings, self.world)
        self.count_local = count_local
        self.compressor = compressor
        self.shard = ServerShard(shard_rows(self.rank, self.world, num_embeddings, self.placement),
                                 dim, seed=seed, init_std=init_std)
        #: where the tensors that cross sgl.comm live (the rank's GPU under NCCL, else the CPU)
        self.comm_device = _comm_device(group)
        self.stats = TrafficStats()
        #: Largest staleness this rank's shard allowed for any reader.
        self.served_max_staleness = -1
        self._calls = 0

    @property
    def local_shard(self) -> ServerShard:
        return self.shard

    def owner(self, keys: torch.Tensor) -> torch.Tensor:
        """Rank of each key (on the keys' device)."""
        if self.placement is None:
            return keys % self.world
        return self.placement[keys.cpu()].to(keys.device)

    def _exchange(self, parts: list[torch.Tensor], what: str) -> list[torch.Tensor]:
        try:
            return comm.all_to_all(parts, group=self.group, timeout=self.timeout)  # type: ignore[return-value]
        except CommError as exc:
            raise CommError(
                f"HET DistTransport.{what} (call {self._calls}) on rank {self.rank}/{self.world}: "
                f"a peer rank died or stopped training ({exc}). Every rank must run the same "
                "number of steps; restart the job from the last checkpoint."
            ) from exc

    def _split(self, keys: torch.Tensor) -> tuple[torch.Tensor, list[int], int]:
        owner = self.owner(keys)
        order = torch.argsort(owner, stable=True)
        counts = torch.bincount(owner, minlength=self.world).tolist()
        remote = keys.numel() - (0 if self.count_local else counts[self.rank])
        return order, counts, remote

    def _pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int
              ) -> tuple[PullReply, int, int]:
        """One pull round; the reply (on the keys' device), keys and rows counted as remote."""
        wire = self.comm_device
        self._calls += 1
        keys_w = keys.to(wire)
        order, counts, remote = self._split(keys_w)
        k_sorted = keys_w[order]
        if versions is None:
            request = k_sorted.reshape(-1, 1)
        else:
            request = torch.stack([k_sorted, versions.to(wire)[order]], dim=1)
        incoming = self._exchange(list(request.split(counts)), "pull request")
        # Serve every source from our shard (host memory), answer on the wire device.
        meta_out, value_out = [], []
        for req in incoming:
            req = req.cpu()
            reply = self.shard.pull(req[:, 0], None if versions is None else req[:, 1], bound)
            self.served_max_staleness = max(self.served_max_staleness, reply.max_staleness)
            if versions is not None:
                meta_out.append(torch.stack([reply.positions, reply.versions], dim=1).to(wire))
            value_out.append(reply.values.to(wire))
        values_in = self._exchange(value_out, "pull reply")
        base = torch.tensor([0] + counts, device=wire).cumsum(0)
        if versions is None:
            values = torch.empty(keys.numel(), self.dim, device=wire)
            values[order] = torch.cat(values_in)
            positions, vers, n_rows = torch.arange(keys.numel(), device=wire), None, remote
        else:
            meta_in = self._exchange(meta_out, "pull reply")
            positions = torch.cat([order[base[s] + m[:, 0]] for s, m in enumerate(meta_in)])
            vers = torch.cat([m[:, 1] for m in meta_in])
            values = torch.cat(values_in)
            n_rows = positions.numel() - (0 if self.count_local else meta_in[self.rank].shape[0])
            sort = torch.argsort(positions)
            positions, vers, values = positions[sort], vers[sort], values[sort]
        return _reply_to(PullReply(positions, values, vers, -1), keys.device), remote, n_rows

    def pull(self, keys: torch.Tensor, versions: torch.Tensor | None, bound: int) -> PullReply:
        _check_request(keys, versions, self.dim)
        reply, remote, n_rows = self._pull(keys, versions, bound)
        self.stats._pull(remote, versions is not None, n_rows, self.dim, -1)
        return reply

    def read(self, keys: torch.Tensor) -> torch.Tensor:
        _check_request(keys, None, self.dim)
        return self._pull(keys, None, 0)[0].values

    def push(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None) -> None:
        _check_request(keys, None, self.dim, deltas)
        wire = self.comm_device
        self._calls += 1
        keys_w = keys.to(wire)
        order, split, remote = self._split(keys_w)
        if self.compressor is not None:
            self._push_compressed(keys_w[order], deltas.to(wire)[order],
                                  None if counts is None else counts.to(wire)[order], split, remote)
            return
        if counts is None:
            meta = keys_w[order].reshape(-1, 1)
        else:
            meta = torch.stack([keys_w[order], counts.to(wire)[order]], 1)
        meta_in = self._exchange(list(meta.split(split)), "push")
        deltas_in = self._exchange(list(deltas.to(wire)[order].split(split)), "push")
        # Apply in source-rank order (deterministic; matches the simulator's order), in host memory.
        m, d = torch.cat(meta_in).cpu(), torch.cat(deltas_in).cpu()
        if m.numel():
            self.shard.push(m[:, 0], d, None if counts is None else m[:, 1])
        self.stats._push(remote, counts is not None, self.dim)

    def _push_compressed(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor | None,
                         split: list[int], remote: int) -> None:
        """One push round of encoded payloads (``keys`` etc. already grouped by destination)."""
        codec = self.compressor
        exact = not self.count_local  # HET-GMP: the rank's own rows are local memory, sent exact
        k_parts, d_parts = keys.split(split), deltas.split(split)
        c_parts = [None] * self.world if counts is None else counts.split(split)
        payloads = [torch.zeros(0, dtype=torch.uint8, device=keys.device) if exact and dest == self.rank
                    else codec.encode(k_parts[dest], d_parts[dest], c_parts[dest]) for dest in range(self.world)]
        incoming = self._exchange(payloads, "push")
        parts = []
        for src, payload in enumerate(incoming):
            if exact and src == self.rank:
                parts.append((k_parts[src], d_parts[src], c_parts[src]))
            else:
                parts.append(codec.decode(payload))
        # apply in source-rank order, in host memory
        m = torch.cat([p[0] for p in parts]).cpu()
        if m.numel():
            d = torch.cat([p[1].reshape(-1, self.dim) for p in parts]).cpu()
            c = None if counts is None else torch.cat([p[2] for p in parts]).cpu()
            self.shard.push(m, d, c)
        self.stats._push_payload(remote, sum(p.numel() for dest, p in enumerate(payloads)
                                             if self.count_local or dest != self.rank))
