"""The hybrid-parallel strategy space (Galvatron's decision tree).

One :class:`Strategy` is what a single Transformer layer runs with: pipeline degree ``pp``
(shared by the whole plan), tensor-parallel degree ``tp`` (Megatron TP, or Ulysses sequence
parallelism when ``sp``), data-parallel degree ``dp = N / (pp * tp)`` either replicated
(``sdp=False``, DDP or ZeRO-2 by ``default_dp_type``) or fully sharded (``sdp=True``,
ZeRO-3), whether the TP group takes consecutive ranks (``tp_consec``), activation
checkpointing (``ckpt``) and, in OSDP mode, how many slices a sharded layer's weights are
gathered in (``split``).

The tree prunes as Galvatron does: degrees are powers of two; PP is split first and is the
same for all layers; DP and SDP are not mixed inside one layer; ``tp_consec`` is only a
choice when both TP and DP exceed one.  For 8 devices this is 22 base strategies (11 with
pp=1, 7 with pp=2, 3 with pp=4, 1 with pp=8), 44 with checkpointing.

>>> from sgl.systems.parallel import ClusterSpec, enumerate_strategies
>>> cluster = ClusterSpec(num_nodes=1, devices_per_node=8)
>>> len(enumerate_strategies(cluster, pp=1, ckpt=False))
11
>>> sum(len(enumerate_strategies(cluster, pp=p)) for p in (1, 2, 4, 8))
44
>>> enumerate_strategies(cluster, pp=1, space="sdp")[0].label
'1-1-8f'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from sgl.errors import PlanError

__all__ = ["ClusterSpec", "Strategy", "SEARCH_SPACES", "enumerate_strategies", "is_power_of_two", "powers_of_two",
           "space_shards"]

SEARCH_SPACES = ("full", "3d", "dp+tp", "dp+pp", "dp", "sdp", "tp", "pp")


def space_shards(space: str) -> bool:
    """Whether ``space`` holds ZeRO-3 at all; only then may the embedding/LM head take it too.

    >>> [s for s in SEARCH_SPACES if space_shards(s)]
    ['full', 'sdp']
    """
    if space not in SEARCH_SPACES:
        raise PlanError(f"unknown search space {space!r}; choose one of {list(SEARCH_SPACES)}")
    return space in ("full", "sdp")


def is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and (n & (n - 1)) == 0


def powers_of_two(limit: int) -> List[int]:
    """1, 2, 4, ... up to and including ``limit``."""
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


@dataclass(frozen=True)
class ClusterSpec:
    """``num_nodes`` x ``devices_per_node`` accelerators; both powers of two.

    >>> ClusterSpec(2, 8).num_devices
    16
    >>> ClusterSpec(1, 6)
    Traceback (most recent call last):
    ...
    sgl.errors.PlanError: devices_per_node must be a power of two (1, 2, 4, 8, ...), got 6; Galvatron's strategy tree splits devices in halves
    """

    num_nodes: int = 1
    devices_per_node: int = 8

    def __post_init__(self) -> None:
        for field in ("num_nodes", "devices_per_node"):
            value = getattr(self, field)
            if not is_power_of_two(value):
                raise PlanError(
                    f"{field} must be a power of two (1, 2, 4, 8, ...), got {value!r}; "
                    "Galvatron's strategy tree splits devices in halves"
                )

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node

    @classmethod
    def from_devices(cls, num_devices: int, devices_per_node: int | None = None) -> "ClusterSpec":
        """``num_devices`` total, ``devices_per_node`` (default min(num_devices, 8)) per node."""
        if not is_power_of_two(num_devices):
            raise PlanError(f"number of devices must be a power of two, got {num_devices!r}")
        per_node = min(num_devices, 8) if devices_per_node is None else devices_per_node
        if not is_power_of_two(per_node):
            raise PlanError(f"devices_per_node must be a power of two, got {per_node!r}")
        if num_devices % per_node:
            raise PlanError(
                f"{num_devices} devices are not divisible into nodes of {per_node}; "
                "pass a device count that is a multiple of devices_per_node"
            )
        return cls(num_devices // per_node, per_node)


@dataclass(frozen=True, order=True)
class Strategy:
    """One layer's parallel strategy.  ``dp = devices / (pp * tp)``."""

    pp: int
    tp: int
    dp: int
    sdp: bool = False
    tp_consec: bool = True
    ckpt: bool = False
    sp: bool = False
    split: int = 1

    @property
    def label(self) -> str:
        """Galvatron-style ``pp-tp-dp`` with flags: ``f`` ZeRO-3, ``*`` strided TP, ``c`` ckpt, ``u`` Ulysses, ``/k`` split."""
        s = f"{self.pp}-{self.tp}-{self.dp}"
        if self.sdp:
            s += "f"
        if not self.tp_consec:
            s += "*"
        if self.sp:
            s += "u"
        if self.ckpt:
            s += "c"
        if self.split > 1:
            s += f"/{self.split}"
        return s

    @property
    def layout(self) -> tuple:
        """What decides how activations are laid out across devices (for transition costs)."""
        return (self.tp, self.tp_consec, self.sp)


def enumerate_strategies(
    cluster: ClusterSpec,
    pp: int,
    *,
    space: str = "full",
    ckpt: bool = True,
    max_tp: int | None = None,
    sp_modes: Sequence[bool] = (False,),
    tp_consec_choices: bool = True,
    osdp_splits: Sequence[int] = (),
) -> List[Strategy]:
    """All strategies of one pipeline degree in ``space`` (see :data:`SEARCH_SPACES`).

    ``ckpt`` adds the checkpointed twin of each strategy; ``sp_modes=(False, True)`` adds Ulysses
    SP next to Megatron TP; ``osdp_splits`` (e.g. ``(2, 4)``) adds OSDP's operator-split
    ZeRO-3 variants.
    """
    n = cluster.num_devices
    if space not in SEARCH_SPACES:
        raise PlanError(f"unknown search space {space!r}; choose one of {list(SEARCH_SPACES)}")
    if not is_power_of_two(pp) or pp > n:
        raise PlanError(f"pipeline degree must be a power of two <= {n} devices, got {pp!r}")
    per_stage = n // pp
    out: List[Strategy] = []
    for tp in powers_of_two(per_stage):
        if max_tp is not None and tp > max_tp:
            continue
        dp = per_stage // tp
        for sdp in ((False, True) if dp > 1 else (False,)):
            consecs = (True, False) if (tp > 1 and dp > 1 and tp_consec_choices) else (True,)
            for consec in consecs:
                for sp in (sp_modes if tp > 1 else (False,)):
                    for ck in ((False, True) if ckpt else (False,)):
                        splits = (1,) + tuple(k for k in osdp_splits if k > 1) if sdp else (1,)
                        for k in splits:
                            s = Strategy(pp, tp, dp, sdp, consec, ck, sp, k)
                            if _in_space(s, space, n):
                                out.append(s)
    return out


def _in_space(s: Strategy, space: str, n: int) -> bool:
    if space == "full":
        return True
    if space == "3d":
        return not s.sdp and s.tp_consec
    if space == "dp+tp":
        return s.pp == 1 and not s.sdp
    if space == "dp+pp":
        return s.tp == 1 and not s.sdp
    if space == "dp":
        return s.pp == 1 and s.tp == 1 and not s.sdp
    if space == "sdp":
        return s.pp == 1 and s.tp == 1 and (s.sdp or s.dp == 1)
    if space == "tp":
        return s.pp == 1 and s.tp == n
    if space == "pp":
        return s.tp == 1 and s.pp == n
    raise AssertionError(space)
