r"""What *any* sample placement could achieve at the combine all-to-all: an exact lower bound.

NetMoE (:func:`~sgl.systems.moe.netmoe.netmoe_placement`) picks a device ``p(s)`` for every
sample ``s`` with exactly ``S/D`` samples per device.  With ``c[s, d]`` the sample's rows on
device ``d``, ``c_n[s] = sum_{d in n} c[s, d]``, ``t_s`` its residual rows and ``n_0(s)`` the
node it starts on, placing ``s`` on node ``n`` costs the inter-node rows

.. math::
    u_n(s) = \sum_{m \ne n} c_m[s] + t_s\,[n_0(s) \ne n].

Relaxations, each valid for every balanced placement (so their maximum is too):

* **rows** — drop the slot capacity: every sample on its cheapest node,
  ``R = sum_s min_n u_n(s)`` (intra-node rows alike, cheapest device per sample);
* **time** — the α–β model ends with the busiest device, and a maximum is at least a mean:
  ``T_inter >= R / D``; node ``n`` holds exactly ``S/N`` samples, so it *receives* at least the
  ``S/N`` smallest ``u_n(s)`` and *sends* ``w_n(s) = c_n[s] + t_s [n_0(s) = n]`` for every sample
  it does not keep, at least ``sum_s w_n(s)`` minus its ``S/N`` largest; one of its ``G`` devices
  carries at least ``1/G`` of each.  ``T >= α + max(T_inter, T_intra)`` with each term ``bytes/B``.

**LP** (:func:`placement_lp_bound`) — the tightest of them: the exact min–max problem as a
linear program over fractional placements ``x[s, j] in [0, 1]`` (``sum_j x = 1``,
``sum_s x = S/D``) minimising ``T >= `` every device's sent and received rows on each link class
divided by its bandwidth; with ``integral=True`` it is the exact optimum (a MILP, small cases).

``t_s = 0`` gives the bound for every start placement and either residual accounting (residual
rows only add), so ``lower_bound(..., tokens=0) / original time`` is a ceiling on the cut any
placement policy can make.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from sgl.errors import ConfigError
from sgl.systems.moe.netmoe import _check_counts, _tokens, original_placement
from sgl.systems.moe.topology import Topology

__all__ = ["placement_lower_bound", "placement_lp_bound", "relaxed_nodes"]


def _validated(counts: np.ndarray, topo: Topology) -> np.ndarray:
    c = _check_counts(counts, "routing counts")
    if c.shape[1] != topo.num_devices:
        raise ConfigError(f"routing counts cover {c.shape[1]} devices but the topology has {topo.num_devices}; "
                          "record the trace on the same device count")
    return c


def _node_costs(c: np.ndarray, topo: Topology, tok: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``u[s, n]`` (inter rows if ``s`` sits on ``n``) and ``w[s, n]`` (rows ``n`` sends if ``s`` leaves it)."""
    s, _ = c.shape
    n = topo.nodes
    per_node = c.reshape(s, n, topo.devices_per_node).sum(2)
    home = (start // topo.devices_per_node)[:, None] == np.arange(n)
    u = per_node.sum(1, keepdims=True) - per_node + tok[:, None] * ~home
    w = per_node + tok[:, None] * home
    return u, w


def relaxed_nodes(counts: np.ndarray, topo: Topology, tokens: np.ndarray | int | None = None) -> np.ndarray:
    """Every sample's cheapest node with no slot capacity (the inter-rows relaxation's minimiser).

    >>> relaxed_nodes(np.array([[0, 5], [1, 4], [3, 0], [2, 2]]), Topology(2, 1), tokens=0).tolist()
    [1, 1, 0, 0]
    """
    c = _validated(counts, topo)
    start = original_placement(c.shape[0], topo.num_devices)
    u, _ = _node_costs(c, topo, _tokens(c, tokens), start)
    return u.argmin(1)


def placement_lower_bound(counts: np.ndarray, topo: Topology, bytes_per_row: float,
                          tokens: np.ndarray | int | None = None) -> dict[str, float]:
    """Lower bounds on the combine all-to-all of *every* placement with ``S/D`` samples per device.

    ``counts`` ``[S, D]`` as for :func:`~sgl.systems.moe.netmoe.netmoe_placement` (samples start
    on ``s // (S/D)``); returns ``inter_bytes`` and ``intra_bytes`` (capacity relaxed) and
    ``time_s`` (the larger of the link-class bounds, see the module docstring).

    >>> c = np.array([[0, 4], [4, 0]])  # each sample's experts are on the other device
    >>> placement_lower_bound(c, Topology(2, 1), 1.0, tokens=0)["inter_bytes"]
    0.0
    """
    c = _validated(counts, topo)
    s, d = c.shape
    tok = _tokens(c, tokens)
    start = original_placement(s, d)
    n, g = topo.nodes, topo.devices_per_node
    u, w = _node_costs(c, topo, tok, start)
    inter_rows = float(u.min(1).sum())
    k = s // n  # samples every node holds
    recv = np.sort(u, axis=0)[:k].sum(0)  # node n receives at least its k cheapest samples' rows
    send = w.sum(0) - np.sort(w, axis=0)[s - k:].sum(0)  # and sends what the others leave behind
    inter_dev = max(inter_rows / d, float(recv.max()) / g, float(send.max()) / g) if n > 1 else 0.0
    # Intra-node rows of s on device j: its node's other devices' rows, plus the residual when it
    # starts on the same node but another device.
    node_of = np.arange(d) // g
    same = node_of[:, None] == node_of[None, :]
    intra = c @ same.astype(np.int64) - c  # [S, D]: rows from j's node-mates
    intra = intra + tok[:, None] * ((node_of[start][:, None] == node_of[None, :]) & (start[:, None] != np.arange(d)))
    intra_rows = float(intra.min(1).sum())
    t_inter = inter_dev * bytes_per_row / (topo.inter_gbps * 1e9)
    t_intra = (intra_rows / d) * bytes_per_row / (topo.intra_gbps * 1e9) if g > 1 else 0.0
    return {"time_s": topo.latency_s + max(t_inter, t_intra), "inter_bytes": inter_rows * bytes_per_row,
            "intra_bytes": intra_rows * bytes_per_row, "inter_time_s": t_inter, "intra_time_s": t_intra}


def placement_lp_bound(counts: np.ndarray, topo: Topology, bytes_per_row: float,
                       tokens: np.ndarray | int | None = None, integral: bool = False,
                       time_limit: float | None = None) -> dict[str, float]:
    """The min–max combine time over fractional (``integral=False``: a lower bound for every
    placement) or integral balanced placements (the exact optimum; a MILP, for small cases).

    Returns ``time_s`` and, for the integral problem, the best ``placement`` found, whether it is
    ``optimal`` and the solver's ``dual_bound_s`` (a lower bound when ``time_limit`` cut it short).

    >>> c = np.array([[0, 4], [4, 0]])
    >>> placement_lp_bound(c, Topology(2, 1), 1.0, tokens=0)["time_s"]
    0.0
    """
    c = _validated(counts, topo)
    s, d = c.shape
    tok = _tokens(c, tokens).astype(np.float64)
    start = original_placement(s, d)
    g, n = topo.devices_per_node, topo.nodes
    node_of = np.arange(d) // g
    cf = c.astype(np.float64)
    per_node = cf.reshape(s, n, g).sum(2)
    # Variables: x[s, j] (s*d), y[s, m] = sum_{j in m} x[s, j] (s*n), T.
    nx, ny = s * d, s * n
    iy, it = nx, nx + ny
    xi = lambda ss, j: ss * d + j  # noqa: E731
    yi = lambda ss, m: iy + ss * n + m  # noqa: E731
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0

    def add(cs: np.ndarray, vs: np.ndarray, low: float, high: float) -> None:
        nonlocal r
        rows.extend([r] * len(cs))
        cols.extend(cs.tolist())
        vals.extend(vs.tolist())
        lo.append(low)
        hi.append(high)
        r += 1

    ss = np.arange(s)
    for k in range(s):  # every sample placed once
        add(xi(k, np.arange(d)), np.ones(d), 1.0, 1.0)
    for j in range(d):  # S/D samples per device
        add(xi(ss, j), np.ones(s), s / d, s / d)
    for k in range(s):  # y = node sums of x
        for m in range(n):
            add(np.r_[xi(k, np.arange(m * g, (m + 1) * g)), yi(k, m)], np.r_[np.ones(g), -1.0], 0.0, 0.0)
    # T in inter-node row units (well scaled for the solver); seconds = T * bytes / B_inter.
    b_inter, b_intra = 1.0, topo.inter_gbps / topo.intra_gbps
    sec = bytes_per_row / (topo.inter_gbps * 1e9)
    for i in range(d):
        m = node_of[i]
        own = cf[:, i] + tok * (start == i)  # rows device i sends for a sample, wherever it goes
        if n > 1:  # inter sent: own * (1 - y[s, m]);  inter received by j = i
            add(np.r_[yi(ss, m), it], np.r_[-own * b_inter, -1.0], -np.inf, -own.sum() * b_inter)
            into = per_node.sum(1) - per_node[:, m] + tok * (node_of[start] != m)
            add(np.r_[xi(ss, i), it], np.r_[into * b_inter, -1.0], -np.inf, 0.0)
        if g > 1:  # intra sent: own * (y[s, m] - x[s, i]);  intra received
            add(np.r_[yi(ss, m), xi(ss, i), it], np.r_[own * b_intra, -own * b_intra, -1.0], -np.inf, 0.0)
            mates = per_node[:, m] - cf[:, i] + tok * ((node_of[start] == m) & (start != i))
            add(np.r_[xi(ss, i), it], np.r_[mates * b_intra, -1.0], -np.inf, 0.0)
    a = sparse.csr_array((vals, (rows, cols)), shape=(r, it + 1))
    cost = np.zeros(it + 1)
    cost[it] = 1.0
    integ = np.zeros(it + 1)
    if integral:
        integ[:nx] = 1
    opts = {} if time_limit is None else {"time_limit": float(time_limit)}
    res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=integ,
               bounds=Bounds(np.zeros(it + 1), np.r_[np.ones(nx + ny), np.inf]), options=opts)
    if res.x is None:
        raise ConfigError(f"the placement LP did not solve ({res.message}); raise time_limit")
    out: dict[str, float] = {"time_s": topo.latency_s + float(res.x[it]) * sec}
    if integral:
        out["placement"] = res.x[:nx].reshape(s, d).argmax(1)  # type: ignore[assignment]
        out["optimal"] = bool(res.success and res.status == 0)
        dual = getattr(res, "mip_dual_bound", None)
        out["dual_bound_s"] = topo.latency_s + float(dual if dual is not None else 0.0) * sec
    return out
