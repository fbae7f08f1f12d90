"""Selection with one process per party: the label owner coordinates, the others serve their distances.

Party 0 (the active party) holds the labels and its own columns and runs the selection; every other
party runs :func:`serve_party`, answering the two questions of Fagin's threshold algorithm over a
:class:`~sgl.federated.channel.Channel`: *sorted access* (a block of its nearest row ids per query
and the partial distance at the block's end) and *random access* (its partial distances to named
rows). No party ever sends its features; the channel's meter counts every byte.

Example (parties as threads over in-process queues):
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 80)
    >>> blocks = [rng.normal(size=(80, 2)), y[:, None] + rng.normal(size=(80, 2)) * 0.5]
    >>> select_with_parties(blocks, y, l=1, method="vfps_sm", backend="thread")["selected"]
    [1]
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import torch

from sgl.errors import CommError, ConfigError
from sgl.federated.channel import Channel, CommChannel, LocalChannel
from sgl.federated.selection.knn import LocalParty, check_parties

__all__ = ["RemoteParty", "RemotePaillierSum", "serve_party", "select_with_parties", "run_parties",
           "single_thread_party"]

_SORTED, _PARTIAL, _STOP, _PARTIAL_ENC, _DECRYPT = 1, 2, 3, 4, 5
_KEY_HOLDER = 1  # a passive party generates the Paillier key pair and decrypts only sums
_METHODS = ("vfps", "vfps_sm")


class RemoteParty:
    """The coordinator's handle on a party in another process or thread (same interface as LocalParty)."""

    def __init__(self, channel: Channel, peer: int, num_rows: int) -> None:
        self.channel, self.peer, self.num_rows = channel, int(peer), int(num_rows)

    def _ask(self, op: int, arg: int, *tensors: np.ndarray) -> None:
        self.channel.send(torch.tensor([op, arg], dtype=torch.int64), self.peer, "ctrl")
        for t in tensors:
            self.channel.send(torch.from_numpy(np.ascontiguousarray(t, dtype=np.int64)), self.peer, "ids")

    def sorted_block(self, queries: np.ndarray, depth: int) -> Tuple[np.ndarray, np.ndarray]:
        self._ask(_SORTED, depth, queries)
        ids = self.channel.recv(self.peer, "ids").cpu().numpy()
        last = self.channel.recv(self.peer, "share").cpu().numpy()
        return ids, last

    def partial(self, queries: np.ndarray, cand: np.ndarray) -> np.ndarray:
        self._ask(_PARTIAL, 0, queries, cand)
        return self.channel.recv(self.peer, "share").cpu().numpy()

    def stop(self) -> None:
        self._ask(_STOP, 0)


class RemotePaillierSum:
    """The coordinator as Paillier aggregator: parties send encrypted partial distances, the coordinator
    multiplies ciphertexts and has the key holder decrypt only the sums (VF-MINE's secure aggregation)."""

    def __init__(self, channel: Channel, cipher, key_holder: int = _KEY_HOLDER) -> None:
        self.channel, self.cipher, self.key_holder = channel, cipher, int(key_holder)
        self.value_bytes = cipher.value_bytes
        self.operations = cipher.operations

    def total(self, parties: Sequence, queries: np.ndarray, cand: np.ndarray, valid: np.ndarray) -> np.ndarray:
        from sgl.federated.paillier import pack, unpack

        acc = None
        for party in parties:
            if isinstance(party, RemoteParty):
                party._ask(_PARTIAL_ENC, 0, queries, cand)
                ct = unpack(self.channel.recv(party.peer, "cipher"))
            else:  # the coordinator's own columns
                ct = self.cipher.encrypt(party.partial(queries, cand)[valid])
            acc = ct if acc is None else self.cipher.add(acc, ct)
        self.channel.send(torch.tensor([_DECRYPT, 0], dtype=torch.int64), self.key_holder, "ctrl")
        self.channel.send(pack(acc, self.value_bytes), self.key_holder, "cipher")
        return self.channel.recv(self.key_holder, "share").cpu().numpy()


def serve_party(channel: Channel, party: LocalParty, coordinator: int = 0, cipher=None) -> None:
    """Answer the coordinator's sorted/random accesses (plain or encrypted) and, at the key holder,
    decryption requests, until the coordinator says stop."""
    from sgl.federated.paillier import pack, unpack

    while True:
        op, arg = channel.recv(coordinator, "ctrl").tolist()
        if op == _STOP:
            return
        if op == _DECRYPT:
            sums = cipher.decrypt(unpack(channel.recv(coordinator, "cipher")))
            channel.send(torch.from_numpy(sums), coordinator, "share")
            continue
        queries = channel.recv(coordinator, "ids").cpu().numpy()
        if op == _SORTED:
            ids, last = party.sorted_block(queries, int(arg))
            channel.send(torch.from_numpy(ids), coordinator, "ids")
            channel.send(torch.from_numpy(np.ascontiguousarray(last)), coordinator, "share")
        elif op == _PARTIAL:
            cand = channel.recv(coordinator, "ids").cpu().numpy()
            channel.send(torch.from_numpy(party.partial(queries, cand)), coordinator, "share")
        elif op == _PARTIAL_ENC:
            cand = channel.recv(coordinator, "ids").cpu().numpy()
            ct = cipher.encrypt(party.partial(queries, cand)[cand >= 0])
            channel.send(pack(ct, cipher.value_bytes), coordinator, "cipher")
        else:
            raise CommError(f"party {channel.rank} got unknown request {op} from the coordinator")


def _coordinate(channel: Channel, block: np.ndarray, labels, n: int, world: int, l: int, method: str,
                options: Dict[str, Any], cipher) -> Dict[str, Any]:
    from sgl.federated.selection.vfps import vfps_select
    from sgl.federated.selection.vfps_sm import vfps_sm_select

    remotes = [RemoteParty(channel, r, n) for r in range(1, world)]
    parties = [LocalParty(block)] + remotes
    if cipher is not None:
        options = dict(options, aggregate=RemotePaillierSum(channel, cipher))
    try:
        fn = vfps_select if method == "vfps" else vfps_sm_select
        res = fn(parties, labels, l, **options)
    finally:
        for r in remotes:
            r.stop()
    out = {"selected": res.selected, "scores": res.scores, "seconds": res.seconds, "evaluations": res.evaluations,
           "ledger_bytes": res.ledger.bytes, "traffic": channel.meter.summary(), "extra": res.extra}
    if cipher is not None:
        out["encryptions"] = cipher.operations["encrypt"]
    return out


def _setup_keys(rank: int, world: int, channel: Channel, key_bits: int):
    """The key holder makes a Paillier key pair and sends the public key to every other party."""
    from sgl.federated.paillier import generate_keypair, public_key_from_tensor, public_key_to_tensor
    from sgl.federated.selection.secure import PaillierSum

    if rank == _KEY_HOLDER:
        public, private = generate_keypair(key_bits)
        for peer in range(world):
            if peer != rank:
                channel.send(public_key_to_tensor(public), peer, "cipher")
        return PaillierSum(public=public, private=private)
    return PaillierSum(public=public_key_from_tensor(channel.recv(_KEY_HOLDER, "cipher")))


def _party_body(rank: int, world: int, channel: Channel, blocks, labels, l: int, method: str,
                options: Dict[str, Any], key_bits: int = 0) -> Dict[str, Any]:
    cipher = _setup_keys(rank, world, channel, key_bits) if key_bits else None
    if rank == 0:
        return _coordinate(channel, blocks[0], labels, len(blocks[0]), world, l, method, options, cipher)
    serve_party(channel, LocalParty(blocks[rank]), cipher=cipher)  # a passive party never sees the labels
    out = {"traffic": channel.meter.summary()}
    if cipher is not None:
        out["encryptions"] = cipher.operations["encrypt"]
    return out


def _process_party(rank: int, world: int, blocks, labels, l: int, method: str, options: Dict[str, Any],
                   key_bits: int, comm_timeout: float) -> Dict[str, Any]:
    single_thread_party()
    return _party_body(rank, world, CommChannel(timeout=comm_timeout), blocks, labels if rank == 0 else None, l,
                       method, options, key_bits)


def select_with_parties(blocks: Sequence, labels, l: int, method: str = "vfps", backend: str = "process",
                        timeout: float = 300.0, comm_timeout: float = 60.0, key_bits: int = 0,
                        **options: Any) -> Dict[str, Any]:
    """Run VF-PS (``method="vfps"``) or VFPS-SM (``"vfps_sm"``) with one party per process (or thread).

    Party 0 holds ``labels`` and coordinates; returns its result dict (``selected``, ``scores``,
    ``seconds``, ``evaluations``, ``ledger_bytes``, ``traffic``: party 0's channel meter) plus
    ``"parties"``: every party's traffic. ``key_bits`` (e.g. 1024; needs the ``[federated]`` extra)
    turns on VF-MINE's secure aggregation: party 1 makes a Paillier key pair, every party encrypts its
    partial distances of Fagin's candidates, party 0 adds ciphertexts and party 1 decrypts only sums
    (``"encryptions"`` per party in the logs). Party 1 learns the candidates' joint distances; the
    coordinator learns them too (it needs them to rank), but no single party's partial distances.
    """
    if method not in _METHODS:
        raise ConfigError(f"method must be one of {_METHODS}, got {method!r}")
    if options.get("aggregate") is not None:
        raise ConfigError("pass key_bits=1024 (or more) for encrypted aggregation across parties, not `aggregate`")
    if key_bits and (isinstance(key_bits, bool) or key_bits < 1024):
        raise ConfigError(f"key_bits must be 0 (plaintext) or >= 1024, got {key_bits!r}")
    xs = check_parties(blocks)
    logs = run_parties(_process_party, _party_body, xs, backend, timeout, comm_timeout,
                       np.asarray(labels), l, method, options, int(key_bits))
    out = dict(logs[0])
    out["parties"] = [log["traffic"] for log in logs]
    return out


def run_parties(process_fn, thread_fn, xs: Sequence[np.ndarray], backend: str, timeout: float, comm_timeout: float,
                labels, *args: Any) -> List[Any]:
    """Every party's log: ``process_fn(rank, world, xs, labels or None, *args, comm_timeout)`` in one
    ``sgl.comm.spawn`` process per party (``backend="process"``), or ``thread_fn(rank, world, channel, xs,
    labels or None, *args)`` in one thread per party over in-process queues (``"thread"``). Only party 0
    gets the labels. A party's error is re-raised here (the first non-timeout one, lowest rank first)."""
    if backend not in ("process", "thread"):
        raise ConfigError(f"backend must be 'process' or 'thread', got {backend!r}")
    world = len(xs)
    if world < 2:
        raise ConfigError(f"parties as processes need at least 2 parties, got {world}")
    if backend == "process":
        from sgl import comm

        return comm.spawn(process_fn, world, xs, labels, *args, comm_timeout, timeout=timeout,
                          comm_timeout=comm_timeout)
    channels = LocalChannel.group(world, timeout=comm_timeout)
    logs: List[Any] = [None] * world
    errors: Dict[int, BaseException] = {}

    def body(rank: int) -> None:
        try:
            logs[rank] = thread_fn(rank, world, channels[rank], xs, labels if rank == 0 else None, *args)
        except BaseException as exc:  # re-raised in the caller below
            errors[rank] = exc

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[min(errors, key=lambda r: (isinstance(errors[r], CommError), r))]
    return logs


def single_thread_party() -> None:
    """A party process uses one thread (torch and faiss): the parties share the machine's cores."""
    torch.set_num_threads(1)
    try:
        import faiss

        faiss.omp_set_num_threads(1)
    except ImportError:  # faiss is a core dependency; this only guards odd installs
        pass
