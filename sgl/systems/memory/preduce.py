"""Partial-reduce: average parameters among whichever ``P`` workers are ready, not all of them.

After each local SGD step a worker calls :meth:`PartialReduce.reduce`: it takes the next place in
a global arrival order kept by a ``torch.distributed`` TCPStore (``store.add``, atomic), and the
first ``P`` arrivals at the open group ``g`` fill it and open ``g + 1`` (``store.compare_set``).
Every member posts ``(rank, version)`` under its place (a few bytes of control), waits for the
others of its group and averages with *staleness-aware* weights::

    w_i = (1 + s_i)^-1 / sum_j (1 + s_j)^-1,   s_i = max_j v_j - v_i,   v_new = max_j v_j + 1

so a slow worker's older model counts less.  A worker blocks inside its group, so it can never
take two places of one group (no worker is averaged with itself); a group closes short when
every worker outside it has finished (the end of a run).  Group generation avoids isolation as
Hetu's scheduler does: every ``connect_every``-th group stays open until the groups of its window
link all workers (union-find), so fast workers cannot keep averaging only among themselves.  Heterogeneity is simulated by per-rank delays.

The parameters themselves move through real process groups: under :mod:`sgl.comm` every subset
of two or more workers gets a group at start-up (:func:`sgl.comm.new_group`, ``2^W - W - 1`` of
them, so ``W <= 6``), and a closed group computes ``Σ_i w_i p_i`` with one ``all_reduce`` (sum)
on its members' group, on the wire device of the backend (the GPU under NCCL). Without a process
group (threads sharing a store, the tests) the parameters travel through the store instead.

>>> import torch
>>> [round(w, 3) for w in staleness_weights([3, 3, 1]).tolist()]   # weights 1, 1, 1/3
[0.429, 0.429, 0.143]
"""
from __future__ import annotations

import itertools
import json
import pickle
import time
from datetime import timedelta
from typing import Any, Dict, FrozenSet, List, Sequence, Tuple

import numpy as np
import torch

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["PartialReduce", "staleness_weights", "regression_problem", "preduce_worker", "sync_worker"]


def staleness_weights(versions: Sequence[int]) -> torch.Tensor:
    v = torch.tensor(list(versions), dtype=torch.float32)
    w = 1.0 / (1.0 + (v.max() - v))
    return w / w.sum()


class PartialReduce:
    """Group-of-``P`` averaging over a TCPStore among ``world`` workers.

    Args:
        store: a ``torch.distributed`` store shared by the workers (TCPStore).
        rank, world: this worker and the number of workers.
        group_size: ``P``, the workers averaged together (``1 <= P <= world``).
        connect_every: every ``connect_every``-th group is a *connecting* group: it stays open
            past ``P`` members until the groups since the last connecting group, together with
            it, link every worker (union-find over their members, as Hetu's scheduler does), so
            no worker or clique drifts in isolation.  ``0`` turns this off.
        timeout: seconds a worker waits for its group.
        transport: ``"group"`` (parameters through :mod:`sgl.comm` process groups; needs
            ``sgl.comm`` initialised, ``world <= 6``), ``"store"`` (through the store), or
            ``"auto"``: groups when ``sgl.comm`` is initialised, else the store.
    """

    #: the largest world whose every subset gets a process group at start-up
    MAX_GROUP_WORLD = 6

    def __init__(self, store: Any, rank: int, world: int, group_size: int, connect_every: int = 0,
                 timeout: float = 60.0, transport: str = "auto") -> None:
        from sgl import comm
        self.world = check_int(world, "world size", 1)
        self.rank = check_int(rank, "rank", 0, world - 1)
        self.P = check_int(group_size, "partial-reduce group size P", 1)
        if self.P > self.world:
            raise ConfigError(f"partial-reduce group size P={self.P} exceeds the world size {self.world}; "
                              "use P <= number of workers")
        self.connect_every = check_int(connect_every, "connect_every", 0)
        self.store, self.timeout = store, timeout
        self.groups: List[List[int]] = []
        if transport not in ("auto", "group", "store"):
            raise ConfigError(f"transport must be 'auto', 'group' or 'store', got {transport!r}")
        if transport == "auto":
            transport = "group" if comm.is_initialized() else "store"
        if transport == "group":
            if not comm.is_initialized() or comm.get_world_size() != self.world:
                raise ConfigError("partial-reduce transport='group' needs sgl.comm initialised with "
                                  f"{self.world} ranks (run the workers under sgl.comm.spawn)")
            if self.world > self.MAX_GROUP_WORLD:
                raise ConfigError(f"partial-reduce over process groups creates one group per subset of workers: "
                                  f"world {self.world} > {self.MAX_GROUP_WORLD}; use transport='store'")
        self.transport = transport
        self._pgs: Dict[FrozenSet[int], Any] = {}
        if transport == "group":   # collective creation: every rank, the same subsets in the same order
            for n in range(2, self.world + 1):
                for members in itertools.combinations(range(self.world), n):
                    self._pgs[frozenset(members)] = comm.new_group(list(members))

    def _count(self, key: str) -> int:
        return int(self.store.add(key, 0))

    def _connecting(self, g: int) -> bool:
        return self.connect_every > 0 and (g + 1) % self.connect_every == 0

    def _linked(self, g: int, present: List[int]) -> bool:
        """Do the groups since the last connecting one, plus ``present``, link all live workers?"""
        parent = list(range(self.world))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        groups = [json.loads(self.store.get(f"preduce/m{h}")) for h in range(max(g - self.connect_every + 1, 0), g)
                  if self.store.check([f"preduce/m{h}"])]
        for members in groups + [present]:
            for r in members[1:]:
                parent[find(r)] = find(members[0])
        done = [r for r in range(self.world) if self.store.check([f"preduce/done/{r}"])]
        roots = {find(r) for r in range(self.world) if r not in done}
        return len(roots) <= 1

    def _close(self, g: int, n: int) -> None:
        self.store.compare_set(f"preduce/g{g}/size", "", str(n))
        self.store.compare_set("preduce/cur", str(g), str(g + 1))

    def reduce(self, params: torch.Tensor, version: int) -> Tuple[torch.Tensor, int]:
        """Join the open group, post ``params``, wait for the group, return the weighted average."""
        deadline = time.monotonic() + self.timeout
        flat = params.detach().contiguous()
        data = b"" if self.transport == "group" else flat.cpu().numpy().tobytes()
        payload = pickle.dumps((self.rank, int(version), data))
        while True:
            g = self._count("preduce/cur")
            cap = self.world if self._connecting(g) else self.P
            pos = int(self.store.add(f"preduce/g{g}/n", 1)) - 1
            closed = self.store.check([f"preduce/g{g}/size"])
            if pos >= cap or (closed and pos >= int(self.store.get(f"preduce/g{g}/size"))):
                time.sleep(0.0005)  # full or closed: "cur" moves on, take a place in the next group
                continue
            self.store.set(f"preduce/g{g}/{pos}", payload)
            if not self._connecting(g) and pos == self.P - 1:
                self._close(g, self.P)
            while not self.store.check([f"preduce/g{g}/size"]):
                n = min(cap, self._count(f"preduce/g{g}/n"))
                keys = [f"preduce/g{g}/{j}" for j in range(n)]
                present = ([pickle.loads(self.store.get(k))[0] for k in keys] if self._connecting(g)
                           and self.store.check(keys) else None)
                if present is not None and len(present) >= self.P and self._linked(g, present):
                    self._close(g, n)
                elif self._count("preduce/done") + n >= self.world:
                    # Everyone outside this group has finished: close it short rather than wait forever
                    # (no one else can arrive; a member cannot arrive twice while it waits here).
                    self._close(g, n)
                elif time.monotonic() > deadline:
                    raise ConfigError(f"partial-reduce: group {g} did not fill within {self.timeout}s")
                else:
                    time.sleep(0.0005)
            size = int(self.store.get(f"preduce/g{g}/size"))
            if pos < size:
                break
        keys = [f"preduce/g{g}/{j}" for j in range(size)]
        self.store.wait(keys, timedelta(seconds=self.timeout))
        entries = [pickle.loads(self.store.get(k)) for k in keys]
        ranks = [e[0] for e in entries]
        if pos == 0:
            self.store.set(f"preduce/m{g}", json.dumps(ranks))
        self.groups.append(ranks)
        w = staleness_weights([e[1] for e in entries])
        if self.transport == "group":
            out = self._group_average(flat, ranks, float(w[pos]))
        else:
            dtype = flat.cpu().numpy().dtype
            stacked = torch.stack([torch.from_numpy(np.frombuffer(e[2], dtype=dtype).copy()) for e in entries])
            out = (w.to(stacked.dtype)[:, None] * stacked).sum(0).view_as(flat)
        if int(self.store.add(f"preduce/g{g}/read", 1)) == size:  # the last reader frees the payloads
            for k in keys:
                self.store.delete_key(k)
        return out.to(params.device), max(e[1] for e in entries) + 1

    def _group_average(self, flat: torch.Tensor, ranks: List[int], weight: float) -> torch.Tensor:
        """``Σ_i w_i p_i`` over ``ranks``: one sum all-reduce of ``w_mine p_mine`` on their process group."""
        from sgl import comm

        if len(ranks) == 1:
            return flat.clone()
        buf = comm.to_wire(flat * weight, self._pgs[frozenset(ranks)])
        return comm.all_reduce(buf, op="sum", group=self._pgs[frozenset(ranks)], timeout=self.timeout)

    def finish(self) -> None:
        """Tell the others this worker takes no more places (call once, after its last step)."""
        self.store.set(f"preduce/done/{self.rank}", "1")
        self.store.add("preduce/done", 1)


def regression_problem(seed: int = 0, n: int = 512, d: int = 16) -> Tuple[torch.Tensor, torch.Tensor]:
    """A noisy linear regression ``y = X w* + 0.01 e`` (the small problem the runs converge on)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=gen)
    w = torch.randn(d, 1, generator=gen)
    return x, x @ w + 0.01 * torch.randn(n, 1, generator=gen)


def _local_steps(rank: int, world: int, steps: int, delay: float, lr: float, seed: int, reduce) -> Dict[str, Any]:
    x, y = regression_problem(seed)
    xs, ys = x[rank::world], y[rank::world]
    w = torch.zeros(x.shape[1], 1, device=x.device)
    gen = torch.Generator(x.device).manual_seed(seed * 1000 + rank)
    curve, t0, version = [], time.perf_counter(), 0
    for _ in range(steps):
        idx = torch.randint(0, len(xs), (32,), generator=gen, device=x.device)
        grad = 2 * xs[idx].T @ (xs[idx] @ w - ys[idx]) / len(idx)
        time.sleep(delay)  # this rank's compute speed
        w, version = reduce(w - lr * grad, grad, version)
        curve.append((time.perf_counter() - t0, float(((x @ w - y) ** 2).mean())))
    return {"curve": curve, "w": w}


def preduce_worker(rank: int, world: int, group_size: int, steps: int, delays: Sequence[float], lr: float = 0.05,
                   seed: int = 0, store: Any = None, connect_every: int = 0,
                   transport: str = "auto") -> Dict[str, Any]:
    """One worker of a partial-reduce run (under :func:`sgl.comm.spawn`, or threads with ``store``)."""
    if store is None:
        import torch.distributed as dist

        store = dist.distributed_c10d._get_default_store()
    pr = PartialReduce(store, rank, world, group_size, connect_every, transport=transport)
    out = _local_steps(rank, world, steps, delays[rank], lr, seed,
                       lambda w, g, v: pr.reduce(w, v))
    pr.finish()
    from sgl import comm

    comm.barrier()  # rank 0 hosts the store: nobody leaves while others still use it (no-op without comm)
    out["groups"] = pr.groups
    return out


def sync_worker(rank: int, world: int, steps: int, delays: Sequence[float], lr: float = 0.05,
                seed: int = 0) -> Dict[str, Any]:
    """The synchronous baseline: all-reduce (mean) of gradients every step, via :mod:`sgl.comm`."""
    from sgl import comm

    def reduce(w_new: torch.Tensor, grad: torch.Tensor, version: int):
        g = comm.all_reduce(grad.clone(), op="mean")
        return w_new + lr * grad - lr * g, version + 1

    return _local_steps(rank, world, steps, delays[rank], lr, seed, reduce)
