"""A cluster as the MoE cost models see it: nodes x devices, intra/inter-node bandwidth, α–β all-to-all."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["Topology", "alltoall_time"]


@dataclass(frozen=True)
class Topology:
    r"""``nodes`` machines with ``devices_per_node`` devices each.

    Bandwidths are GB/s per device (defaults: LAER-MoE's shipped ``network_config.json``, intra
    216.27, inter 88.95); ``latency_s`` is the per-message α.  ``parse("4x8")`` is 4 nodes of 8.

    >>> Topology.parse("2x4").num_devices, Topology.parse("2x4").node_of(5)
    (8, 1)
    """

    nodes: int
    devices_per_node: int
    intra_gbps: float = 216.27
    inter_gbps: float = 88.95
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        check_int(self.nodes, "Topology.nodes", 1)
        check_int(self.devices_per_node, "Topology.devices_per_node", 1)
        check_real(self.intra_gbps, "Topology.intra_gbps", 0.0, open_low=True)
        check_real(self.inter_gbps, "Topology.inter_gbps", 0.0, open_low=True)
        check_real(self.latency_s, "Topology.latency_s", 0.0)

    @classmethod
    def parse(cls, text: str, **kw: float) -> "Topology":
        parts = str(text).lower().split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ConfigError(f"topology {text!r} must read NODESxDEVICES, e.g. 4x8")
        return cls(int(parts[0]), int(parts[1]), **kw)

    @classmethod
    def of(cls, num_devices: int, nodes: int, **kw: float) -> "Topology":
        """``num_devices`` split over ``nodes`` (which must divide it)."""
        check_int(num_devices, "num_devices", 1)
        check_int(nodes, "nodes", 1)
        if num_devices % nodes:
            raise ConfigError(f"{num_devices} devices cannot be split over {nodes} nodes evenly; "
                              "use a node count that divides the device count")
        return cls(nodes, num_devices // nodes, **kw)

    @property
    def num_devices(self) -> int:
        return self.nodes * self.devices_per_node

    def node_of(self, device: int | np.ndarray) -> int | np.ndarray:
        return device // self.devices_per_node

    def same_node(self) -> np.ndarray:
        """``[D, D]`` bool: devices ``i`` and ``j`` share a node."""
        n = np.arange(self.num_devices) // self.devices_per_node
        return n[:, None] == n[None, :]


def alltoall_time(volume: np.ndarray, topo: Topology, bytes_per_row: float) -> dict[str, float]:
    """Modelled time of an all-to-all moving ``volume[i, j]`` rows from device ``i`` to ``j``.

    Intra- and inter-node links run concurrently; each device's time on a link class is
    ``max(sent, received) * bytes / bandwidth`` and the collective ends with the slowest device:
    ``T = α + max(max_i intra_i / B_intra, max_i inter_i / B_inter)`` (the diagonal is local).
    """
    v = np.asarray(volume, dtype=np.float64)
    if v.shape != (topo.num_devices, topo.num_devices):
        raise ConfigError(f"volume matrix {v.shape} does not match the {topo.num_devices}-device topology")
    same = topo.same_node()
    off = ~np.eye(topo.num_devices, dtype=bool)
    intra, inter = np.where(same & off, v, 0.0), np.where(~same, v, 0.0)
    t_intra = np.maximum(intra.sum(1), intra.sum(0)).max() * bytes_per_row / (topo.intra_gbps * 1e9)
    t_inter = np.maximum(inter.sum(1), inter.sum(0)).max() * bytes_per_row / (topo.inter_gbps * 1e9)
    t_intra, t_inter = float(t_intra), float(t_inter)
    return {"time_s": topo.latency_s + max(t_intra, t_inter), "intra_bytes": float(intra.sum() * bytes_per_row),
            "inter_bytes": float(inter.sum() * bytes_per_row), "intra_time_s": t_intra, "inter_time_s": t_inter}
