"""NetMoE (ICLR'25): re-place training samples at the combine all-to-all to cut its modelled time.

Inputs: ``counts[s, d]`` = (token, expert) pairs of sample ``s`` served on device ``d`` at one
MoE layer, the original placement (sample ``s`` on device ``s // (S/D)``) and a
:class:`~sgl.systems.moe.topology.Topology`.  After the experts run, sample ``s``'s outputs can go
to any device ``p(s)`` (non-MoE layers are data-parallel, so the math is unchanged) as long as
every device keeps ``S/D`` samples; its residual stream (``tokens[s]`` rows) moves too.

Two exact assignment stages (our reconstruction of the paper's method, see
``shared/notes/systems_anchor.md`` §3.3):

1. nodes: ``cost(s, n) = sum_{d not in n} counts[s, d] + tokens[s] * [node(p0(s)) != n]``
   (inter-node rows), ``S/N`` slots per node;
2. devices of each node: ``cost(s, g) = sum_{d in n, d != g} counts[s, d] + tokens[s] * [p0(s) != g]``
   (intra-node rows, residual only when it did not already cross nodes), ``S/D`` slots each;

each solved with :func:`scipy.optimize.linear_sum_assignment` on the slot-expanded matrix.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from sgl.errors import ConfigError, DatasetError
from sgl.systems.moe.topology import Topology, alltoall_time

__all__ = ["netmoe_placement", "combine_volume", "placement_cost", "original_placement", "device_counts"]


def original_placement(num_samples: int, num_devices: int) -> np.ndarray:
    """Sample ``s`` on device ``s // (S/D)`` (the data loader's split)."""
    if num_samples % num_devices:
        raise ConfigError(f"{num_samples} samples cannot be spread evenly over {num_devices} devices; "
                          "use a global batch divisible by the device count")
    return np.arange(num_samples) // (num_samples // num_devices)


def device_counts(expert_counts: np.ndarray, num_devices: int) -> np.ndarray:
    """``[S, E]`` per-expert counts -> ``[S, D]`` per-device counts (experts split evenly, EP layout)."""
    c = _check_counts(expert_counts, "expert counts")
    s, e = c.shape
    if e % num_devices:
        raise ConfigError(f"a trace with {e} experts cannot be laid out on {num_devices} devices "
                        "(EP needs the device count to divide the expert count)")
    return c.reshape(s, num_devices, e // num_devices).sum(2)


def _check_counts(counts: np.ndarray, what: str) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 2:
        raise ConfigError(f"{what} must be a [samples, devices|experts] matrix, got shape {c.shape}")
    if (c < 0).any():
        raise DatasetError(f"{what} hold negative values (min {c.min()}); routing counts are >= 0")
    return c.astype(np.int64, copy=False)


def _tokens(counts: np.ndarray, tokens: np.ndarray | int | None) -> np.ndarray:
    if tokens is None:
        return np.zeros(counts.shape[0], dtype=np.int64)
    return np.broadcast_to(np.asarray(tokens, dtype=np.int64), (counts.shape[0],))


def netmoe_placement(counts: np.ndarray, topo: Topology, tokens: np.ndarray | int | None = None,
                     guard: bool = True) -> np.ndarray:
    """The new device of every sample (``[S]`` ints), ``S/D`` samples per device.

    ``counts`` is ``[S, D]`` per-device counts; ``tokens`` the residual rows per sample (0 to
    ignore the residual's move).  The stages minimise summed rows, the all-to-all ends with its
    slowest device: with ``guard`` the original placement is kept when the solution's modelled
    combine time is not lower (:func:`~sgl.systems.moe.netmoe_refine.netmoe_refined` adds
    min–max swap rounds on top).

    >>> c = np.array([[0, 5], [5, 0]])   # sample 0 uses device 1's experts, sample 1 device 0's
    >>> netmoe_placement(c, Topology(2, 1)).tolist()
    [1, 0]
    """
    c = _check_counts(counts, "routing counts")
    s, d = c.shape
    if d != topo.num_devices:
        raise ConfigError(f"routing counts cover {d} devices but the topology has {topo.num_devices} "
                        f"({topo.nodes}x{topo.devices_per_node}); record the trace on the same device count")
    p0 = original_placement(s, d)
    tok = _tokens(c, tokens)
    n, g = topo.nodes, topo.devices_per_node
    node_of_dev = np.arange(d) // g
    # Stage 1: samples -> nodes.
    per_node = c.reshape(s, n, g).sum(2)
    cost1 = per_node.sum(1, keepdims=True) - per_node + tok[:, None] * (node_of_dev[p0][:, None] != np.arange(n))
    rows, cols = linear_sum_assignment(np.repeat(cost1, s // n, axis=1))
    node = np.empty(s, dtype=np.int64)
    node[rows] = cols // (s // n)
    # Stage 2: each node's samples -> its devices.
    place = np.empty(s, dtype=np.int64)
    for k in range(n):
        members = np.flatnonzero(node == k)
        local = c[members][:, k * g:(k + 1) * g]
        moved_node = node_of_dev[p0[members]] != k
        stay = (p0[members][:, None] == (k * g + np.arange(g)))
        cost2 = local.sum(1, keepdims=True) - local + (tok[members] * ~moved_node)[:, None] * ~stay
        r2, c2 = linear_sum_assignment(np.repeat(cost2, len(members) // g, axis=1))
        place[members[r2]] = k * g + c2 // (len(members) // g)
    if guard and placement_cost(c, place, topo, 1.0, tok)["time_s"] >= placement_cost(c, p0, topo, 1.0, tok)["time_s"]:
        return p0
    return place


def combine_volume(counts: np.ndarray, placement: np.ndarray, tokens: np.ndarray | int | None = None) -> np.ndarray:
    """``[D, D]`` rows of the combine all-to-all: device ``d`` sends sample ``s``'s outputs to
    ``placement[s]``; the residual of ``s`` goes from its original device to ``placement[s]``."""
    c = _check_counts(counts, "routing counts")
    s, d = c.shape
    v = np.zeros((d, d), dtype=np.int64)
    np.add.at(v.T, placement, c)  # v[:, p(s)] += c[s, :]
    tok = _tokens(c, tokens)
    np.add.at(v, (original_placement(s, d), placement), tok)
    return v


def placement_cost(counts: np.ndarray, placement: np.ndarray, topo: Topology, bytes_per_row: float,
                   tokens: np.ndarray | int | None = None) -> dict[str, float]:
    """Modelled combine all-to-all (bytes intra/inter, time) under ``placement``."""
    return alltoall_time(combine_volume(counts, placement, tokens), topo, bytes_per_row)
