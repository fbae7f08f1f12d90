r"""Min–max refinement of a sample placement: pairwise swaps that lower the modelled combine time.

NetMoE's two assignment stages minimise *summed* rows; the α–β all-to-all ends with the busiest
device.  On traces with little per-sample affinity the summed optimum is the original placement
while the min–max optimum is not (see :mod:`~sgl.systems.moe.netmoe_bound`).  This local search
starts from any balanced placement and applies, round by round, the swap of two samples on
different devices that lowers

.. math::
    T = \max\big(\max_i \max(\mathrm{sent}^{inter}_i, \mathrm{recv}^{inter}_i) / B_{inter},\
                 \max_i \max(\mathrm{sent}^{intra}_i, \mathrm{recv}^{intra}_i) / B_{intra}\big)

the most (exactly, every candidate swap evaluated on all ``4 D`` device loads), until none does
or ``rounds`` swaps were made.  Swaps keep ``S/D`` samples per device; the time never rises.
"""
from __future__ import annotations

import numpy as np

from sgl._checks import check_int
from sgl.errors import ConfigError
from sgl.systems.moe.netmoe import _check_counts, _tokens, combine_volume, netmoe_placement, original_placement
from sgl.systems.moe.topology import Topology

__all__ = ["refine_placement", "netmoe_refined"]


def netmoe_refined(counts: np.ndarray, topo: Topology, tokens: np.ndarray | int | None = None,
                   rounds: int = 0) -> np.ndarray:
    """:func:`~sgl.systems.moe.netmoe.netmoe_placement` (guarded), then ``rounds`` swap rounds."""
    place = netmoe_placement(counts, topo, tokens)
    return refine_placement(counts, place, topo, tokens, rounds) if rounds else place


def refine_placement(counts: np.ndarray, placement: np.ndarray, topo: Topology,
                     tokens: np.ndarray | int | None = None, rounds: int = 64) -> np.ndarray:
    """Best-improvement swaps from ``placement`` (``[S]`` devices, samples start on ``s // (S/D)``).

    >>> c = np.array([[4, 0, 0, 0], [0, 0, 0, 4], [4, 0, 0, 0], [0, 0, 0, 4]])
    >>> topo = Topology(2, 2, intra_gbps=10.0, inter_gbps=1.0)
    >>> refine_placement(c, np.arange(4), topo, tokens=0).tolist()  # 1 and 2 swap: their rows stay intra-node
    [0, 2, 1, 3]
    """
    check_int(rounds, "refinement rounds", 0)
    c = _check_counts(counts, "routing counts").astype(np.float64)
    s, d = c.shape
    p = np.asarray(placement, dtype=np.int64).copy()
    if p.shape != (s,):
        raise ConfigError(f"placement has shape {p.shape}; give one device per sample, shape ({s},)")
    tok = _tokens(c, tokens).astype(np.float64)
    node = np.arange(d) // topo.devices_per_node
    same = node[:, None] == node[None, :]
    inter = (~same).astype(np.float64)
    intra = (same & ~np.eye(d, dtype=bool)).astype(np.float64)
    scale = np.array([1.0, 1.0, topo.inter_gbps / topo.intra_gbps, topo.inter_gbps / topo.intra_gbps])
    x = c.copy()
    x[np.arange(s), original_placement(s, d)] += tok  # rows each source device sends for sample s
    v = combine_volume(counts, p, tokens).astype(np.float64)
    # Loads [4, D] in inter-row units: inter sent, inter received, intra sent, intra received.
    loads = np.stack([(v * inter).sum(1), (v * inter).sum(0), (v * intra).sum(1), (v * intra).sum(0)]) * scale[:, None]
    # add[a, j] [4, D]: the loads sample a adds when it sits on device j.
    eye = np.eye(d)
    add = np.stack([x[:, None, :] * inter.T[None], (x @ inter)[:, :, None] * eye[None],
                    x[:, None, :] * intra.T[None], (x @ intra)[:, :, None] * eye[None]], 2) * scale[None, None, :, None]
    chunk = max(1, (1 << 22) // max(1, s * 4 * d))  # bound the [chunk, S, 4, D] candidate block
    for _ in range(rounds):
        current = loads.max()
        own = add[np.arange(s), p]  # [S, 4, D]
        at_other = add[:, p]  # [S(a), S(b), 4, D]: a moved onto b's device
        best, best_ab = current * (1 - 1e-12), None
        for lo in range(0, s, chunk):
            hi = min(s, lo + chunk)
            delta = (at_other[lo:hi] - own[lo:hi, None]) + (at_other[:, lo:hi].transpose(1, 0, 2, 3) - own[None])
            new = (loads[None, None] + delta).max(axis=(2, 3))
            new[p[lo:hi, None] == p[None, :]] = np.inf
            k = int(np.argmin(new))
            if new.flat[k] < best:
                best, best_ab = float(new.flat[k]), (lo + k // s, k % s)
        if best_ab is None:
            break
        a, b = best_ab
        loads = loads + (add[a, p[b]] - own[a]) + (add[b, p[a]] - own[b])
        p[a], p[b] = p[b], p[a]
    return p
