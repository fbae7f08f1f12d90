"""HaCore and PS-MI with one process per party: each party computes what it releases, the label owner the rest.

**HaCore** (:func:`hacore_with_parties`). Every party computes its column statistics and sends party 0
(the label owner) one number, its mean centred row norm. Party 0 splits the bit budget in proportion
and tells each party its share and where its bits start. Each party draws its hyperplanes from its own
stream (:func:`~sgl.federated.selection.hacore.client_planes`), computes its bits and sends only
those, ``ceil(b / 64)`` words per row. Party 0 places them, runs the per-class clustering
(:func:`~sgl.federated.selection.hacore.cluster_signatures`) and returns the coreset. Nothing else
crosses parties, and the coreset equals :func:`~sgl.federated.selection.hacore.hacore_coreset`'s on
the same blocks.

**PS-MI** (:func:`psmi_with_parties`). Each party sends its secret random projection
``X_p R_p / sqrt(r)`` (plus optional Gaussian noise) to party 0, which evaluates the coalition
utilities and the stratified Shapley values. The values equal
:func:`~sgl.federated.selection.psmi.psmi_values`'.

Both run over :class:`~sgl.federated.channel.Channel` (``sgl.comm`` processes with gloo, or threads) and
report every party's traffic meter.

Example (parties as threads over in-process queues):
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 120)
    >>> blocks = [y[:, None] + rng.normal(size=(120, 2)), rng.normal(size=(120, 3))]
    >>> out = hacore_with_parties(blocks, y, 12, backend="thread")
    >>> len(out["coreset"].ids), int(out["coreset"].weights.sum()), out["parties"][1]["bytes_sent"] > 0
    (12, 120, True)
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch

from sgl.federated.channel import Channel, CommChannel
from sgl.federated.selection.hacore import (
    Coreset, _check_labels, _check_offset, bits_per_client, check_method, client_planes, cluster_signatures,
    initial_medoids,
)
from sgl.federated.selection.knn import check_parties
from sgl.federated.selection.mi import check_labels
from sgl.federated.selection.psmi import (
    check_per_stratum, party_seed, random_projection, shapley_of_utility, utility_from_projections,
)
from sgl.federated.selection.remote import run_parties, single_thread_party
from sgl.federated.selection.signature_kernels import client_stats, simhash_into

__all__ = ["hacore_with_parties", "psmi_with_parties"]


def _own_bits(x: np.ndarray, b: int, seed: int, rank: int, offset: float, stats) -> np.ndarray:
    """``uint64 [n, ceil(b / 64)]``: this party's ``b`` bits, packed from bit 0."""
    mean, norm = stats
    words = np.zeros((len(x), -(-b // 64)), dtype=np.uint64)
    rt, shift = client_planes(x.shape[1], mean, norm, b, seed, rank, offset)
    simhash_into(x, rt, shift, 0, words)
    return words


def _place(words: np.ndarray, part: np.ndarray, first: int, b: int) -> None:
    """OR ``part``'s bits ``0..b-1`` into ``words`` at bits ``first..first+b-1`` (whole-word shifts)."""
    for j in range(part.shape[1]):
        src = part[:, j]
        pos = first + 64 * j
        w, s = pos // 64, np.uint64(pos % 64)
        words[:, w] |= src << s
        if s and w + 1 < words.shape[1]:
            words[:, w + 1] |= src >> (np.uint64(64) - s)


def _hacore_body(rank: int, world: int, channel: Channel, xs, labels, size: int, bits: int, seed: int,
                 offset: float, method: str, iters: int) -> Dict[str, Any]:
    x = xs[rank]
    stats = client_stats(x)
    if rank != 0:
        channel.send(torch.tensor([stats[1]], dtype=torch.float64), 0, "share")
        b, first = channel.recv(0, "ctrl").tolist()
        channel.send(torch.from_numpy(_own_bits(x, b, seed, rank, offset, stats).view(np.int64)), 0, "share")
        return {"traffic": channel.meter.summary()}
    start = time.perf_counter()
    norms = [stats[1]] + [float(channel.recv(p, "share")[0]) for p in range(1, world)]
    share = bits_per_client(norms, bits)
    firsts = np.concatenate([[0], np.cumsum(share)[:-1]]).astype(int)
    for p in range(1, world):
        channel.send(torch.tensor([share[p], firsts[p]], dtype=torch.int64), p, "ctrl")
    words = np.zeros((len(x), -(-bits // 64)), dtype=np.uint64)
    simhash_into(x, *client_planes(x.shape[1], stats[0], stats[1], share[0], seed, 0, offset), 0, words)
    for p in range(1, world):
        part = channel.recv(p, "share").cpu().numpy().view(np.uint64)
        _place(words, part, int(firsts[p]), share[p])
    order, starts, ks, init = initial_medoids(labels, size, seed)
    ids, cluster = cluster_signatures(words, bits, order, starts, ks, init, seed, method, iters)
    core = Coreset(ids, np.bincount(cluster, minlength=len(ids)).astype(np.float64), time.perf_counter() - start)
    return {"coreset": core, "bits": share, "traffic": channel.meter.summary()}


def _hacore_process(rank: int, world: int, xs, labels, *args: Any) -> Dict[str, Any]:
    single_thread_party()
    *rest, comm_timeout = args
    return _hacore_body(rank, world, CommChannel(timeout=comm_timeout), xs, labels if rank == 0 else None, *rest)


def hacore_with_parties(blocks: Sequence, labels, size: int, bits: int = 128, seed: int = 0, offset: float = 0.5,
                        method: str = "kcenter", iters: int = 3, backend: str = "process", timeout: float = 300.0,
                        comm_timeout: float = 60.0) -> Dict[str, Any]:
    """HaCore with one party per process (``backend="process"``, ``sgl.comm`` + gloo) or thread.

    Party 0 holds ``labels`` and its own columns. Returns ``{"coreset": Coreset (seconds at party 0,
    from the first message to the coreset), "bits": bits per party, "traffic": party 0's meter,
    "parties": every party's meter}``; the coreset equals ``hacore_coreset(blocks, labels, size, bits,
    seed=seed, offset=offset, method=method, iters=iters)``."""
    check_method(method)
    _check_offset(offset)
    xs = check_parties(blocks)
    y = _check_labels(labels, len(xs[0]), size)
    bits_per_client(np.ones(len(xs)), bits)  # refuses too few bits before any party starts
    logs = run_parties(_hacore_process, _hacore_body, xs, backend, timeout, comm_timeout, y, int(size), int(bits),
                       int(seed), float(offset), method, int(iters))
    out = dict(logs[0])
    out["parties"] = [log["traffic"] for log in logs]
    return out


def _psmi_body(rank: int, world: int, channel: Channel, xs, labels, k: int, proj_dim: int,
               per_stratum: Optional[int], seed: int, noise: float, lsh_tables: int, lsh_bits: int) -> Dict[str, Any]:
    z = random_projection(xs[rank], proj_dim, party_seed(seed, rank), noise)  # never leaves as X_p
    if rank != 0:
        channel.send(torch.from_numpy(np.ascontiguousarray(z)), 0, "share")
        return {"traffic": channel.meter.summary()}
    start = time.perf_counter()
    zs = [z] + [channel.recv(p, "share").cpu().numpy() for p in range(1, world)]
    utility, stats = utility_from_projections(zs, labels, k, seed, lsh_tables, lsh_bits)
    return {"result": shapley_of_utility(utility, stats, world, per_stratum, seed, start),
            "traffic": channel.meter.summary()}


def _psmi_process(rank: int, world: int, xs, labels, *args: Any) -> Dict[str, Any]:
    single_thread_party()
    *rest, comm_timeout = args
    return _psmi_body(rank, world, CommChannel(timeout=comm_timeout), xs, labels if rank == 0 else None, *rest)


def psmi_with_parties(blocks: Sequence, labels, k: int = 5, proj_dim: int = 8, per_stratum: Optional[int] = None,
                      seed: int = 0, noise: float = 0.0, lsh_tables: int = 0, lsh_bits: int = 4,
                      backend: str = "process", timeout: float = 300.0, comm_timeout: float = 60.0) -> Dict[str, Any]:
    """PS-MI with one party per process (or thread): ``{"result": ValuationResult, "traffic", "parties"}``;
    the values equal ``psmi_values`` with the same arguments."""
    xs = check_parties(blocks)
    y = check_labels(labels, len(xs[0]), k)
    check_per_stratum(per_stratum, len(xs))
    random_projection(xs[0][:1], proj_dim, 0, noise)  # refuses a bad proj_dim / noise before any process starts
    logs = run_parties(_psmi_process, _psmi_body, xs, backend, timeout, comm_timeout, y, int(k), int(proj_dim),
                       per_stratum, int(seed), float(noise), int(lsh_tables), int(lsh_bits))
    out = dict(logs[0])
    out["parties"] = [log["traffic"] for log in logs]
    return out
