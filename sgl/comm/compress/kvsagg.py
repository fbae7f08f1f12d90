"""KVSAgg: secure aggregation of key-value sets over :mod:`sgl.comm` (honest-but-curious server).

Every rank is a client with a sparse set ``(keys, values)``; one rank (``server``, default 0)
also plays the server. One call of :func:`kvsagg_sum` runs the protocol:

1. each client draws a fresh X25519 key pair; public keys and the agreed
   :class:`~sgl.comm.compress.HyperIBLT` parameters are all-gathered, and every client checks
   that all clients use the same key space and table (else :class:`~sgl.errors.ConfigError`);
2. each client encodes its set into the table (:meth:`HyperIBLT.encode`), adds its pairwise
   masks (:class:`~sgl.comm.compress.PairwiseMasker`) and sends the masked table (int32 entries
   of ``Z_p``, ``4 * cells * (3 + dim)`` bytes) to the server only;
3. the server checks every table's shape (a wrong one is a :class:`~sgl.errors.CommError`
   naming the client), adds them mod ``p`` -- the masks cancel -- and peels the sum.

The server learns the summed values of every key and **how many clients hold each key**
(the ``count`` field), and nothing else about one client's set. There is **no dropout
recovery**: every client must deliver its table (see :mod:`sgl.comm.compress.masks`). A
failed decode (a table too small for the distinct keys of the sum) is reported as
``ok=False`` -- never a wrong sum.

Example (one process: the identity world; see ``tests/comm/compress`` for 2 and 4 ranks):
    >>> import torch
    >>> iblt = HyperIBLT.for_keys(50, key_space=1000)
    >>> out = kvsagg_sum(torch.tensor([3, 500]), torch.tensor([2, 7]), iblt)
    >>> out.ok, out.keys.tolist(), out.values.reshape(-1).tolist()
    (True, [3, 500], [2, 7])
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch

from sgl import comm
from sgl.comm._wire import _comm_device
from sgl.comm.compress.iblt import FIELD_PRIME, HyperIBLT, IBLTResult
from sgl.comm.compress.masks import PairwiseMasker, X25519Identity
from sgl.errors import ConfigError

__all__ = ["kvsagg_sum", "aggregate_tables", "check_specs", "table_bytes"]

_SPEC_NAMES = ("rows", "width", "key_space", "value_dim", "seed", "value_scale*1000")


def table_bytes(iblt: HyperIBLT) -> int:
    """Bytes one client sends: its masked table (int32 field elements) and its 32-byte public key."""
    return 4 * iblt.shape[0] * iblt.shape[1] + 32


def check_specs(specs: Sequence[Sequence[int]]) -> None:
    """Refuse clients whose HyperIBLT parameters (key space, table size, hashes) differ."""
    first = list(specs[0])
    for client, spec in enumerate(specs):
        if list(spec) != first:
            diff = [f"{name} {a} vs {b}" for name, a, b in zip(_SPEC_NAMES, first, spec) if a != b]
            raise ConfigError(f"KVSAgg: client {client} uses a different table than client 0 ({', '.join(diff)}). "
                              "Every client must agree on key_space, rows, width, value_dim, value_scale and seed "
                              "before aggregating (build the HyperIBLT from the same arguments everywhere).")


def aggregate_tables(iblt: HyperIBLT, tables: Sequence[torch.Tensor]) -> torch.Tensor:
    """The server's step: check each client's (masked) table and add them mod ``p``."""
    if not tables:
        raise ConfigError("KVSAgg: no client tables to aggregate")
    checked = [iblt.check_table(t, f"client {i}'s table") for i, t in enumerate(tables)]
    total = torch.zeros(iblt.shape, dtype=torch.int64, device=checked[0].device)
    for t in checked:
        total = (total + t.to(total.device)) % FIELD_PRIME
    return total


def _public_to_tensor(identity: X25519Identity, spec: List[int], device: torch.device) -> torch.Tensor:
    pk = torch.frombuffer(bytearray(identity.public_bytes), dtype=torch.uint8).to(torch.int64)
    return torch.cat([torch.tensor(spec, dtype=torch.int64), pk]).to(device).reshape(1, -1)


def kvsagg_sum(keys: torch.Tensor, values: torch.Tensor, iblt: HyperIBLT, *, server: int = 0, group=None,
               timeout: Optional[float] = None, round_tag: bytes = b"0", broadcast: bool = True
               ) -> Optional[IBLTResult]:
    """Securely sum every rank's ``(keys, values)`` set (collective over ``group``).

    Returns the decoded sum (:class:`~sgl.comm.compress.IBLTResult`) on every rank with
    ``broadcast=True``, on the server only otherwise (``None`` elsewhere).
    """
    rank, world = comm.get_rank(group), comm.get_world_size(group)
    if not 0 <= server < world:
        raise ConfigError(f"kvsagg_sum: server must be a rank in [0, {world}), got {server}")
    wire = _comm_device(group) if comm.is_initialized() else keys.device
    identity = X25519Identity.generate()
    spec = iblt.spec()
    everyone = torch.cat(comm.all_gather(_public_to_tensor(identity, spec, wire), group=group,
                                         timeout=timeout)).cpu()
    check_specs([row[:len(spec)].tolist() for row in everyone])
    public = [bytes(row[len(spec):].to(torch.uint8).tolist()) for row in everyone]
    table = iblt.encode(keys, values)
    masked = PairwiseMasker(rank, identity, public, round_tag).mask(table) if world > 1 else table
    empty = torch.zeros(0, iblt.shape[1], dtype=torch.int32, device=wire)
    parts = [masked.to(torch.int32).to(wire) if dest == server else empty for dest in range(world)]
    incoming = comm.all_to_all(parts, group=group, timeout=timeout) if world > 1 else parts
    result = None
    if rank == server:
        result = iblt.decode(aggregate_tables(iblt, incoming))
    if not broadcast:
        return result
    if world == 1:
        return result
    packed = _pack(result, iblt, wire) if rank == server else torch.zeros(0, dtype=torch.int64, device=wire)
    gathered = comm.all_gather(packed, group=group, timeout=timeout)
    return _unpack(gathered[server].cpu(), iblt, keys.device)


def _pack(result: IBLTResult, iblt: HyperIBLT, device: torch.device) -> torch.Tensor:
    values = result.values
    if iblt.value_scale is not None:  # fixed point back to the field's integers for the wire
        values = torch.round(values * iblt.value_scale).to(torch.int64)
    head = torch.tensor([int(result.ok), result.cells_left, result.keys.numel()], dtype=torch.int64)
    body = torch.cat([result.keys.cpu().reshape(-1, 1), result.counts.cpu().reshape(-1, 1), values.cpu()], 1)
    return torch.cat([head, body.reshape(-1)]).to(device)


def _unpack(flat: torch.Tensor, iblt: HyperIBLT, device: torch.device) -> IBLTResult:
    ok, left, n = flat[:3].tolist()
    body = flat[3:].reshape(n, 2 + iblt.value_dim)
    values = body[:, 2:]
    if iblt.value_scale is not None:
        values = values.to(torch.float64) / iblt.value_scale
    return IBLTResult(bool(ok), body[:, 0].to(device), values.to(device), body[:, 1].to(device), int(left))
