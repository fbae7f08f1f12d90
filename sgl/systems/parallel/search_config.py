"""What a plan search is asked for and what it returns.

:class:`PlanSearchConfig` holds every setting of a Galvatron / Galvatron-BMW / OSDP search
besides the profiles (which default to the shipped A100 files); :data:`PARTITIONS` and
:data:`BASELINES` name the stage splits and the pure baselines a search can take;
:class:`PlanSearchResult` is the best plan plus bookkeeping.

>>> config = PlanSearchConfig(model="llama-7b", memory_gb=24)
>>> config.validate()
>>> PlanSearchConfig(partition="greedy").validate()
Traceback (most recent call last):
    ...
sgl.errors.PlanError: unknown partition 'greedy'; choose one of ['bmw', 'even', 'memory', 'exact']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence

from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.parallel.space import SEARCH_SPACES, Strategy

__all__ = ["PlanSearchConfig", "PlanSearchResult", "BASELINES", "PARTITIONS"]

PARTITIONS = ("bmw", "even", "memory", "exact")


@dataclass
class PlanSearchConfig:
    """Everything a search needs besides profiles (which default to the shipped A100 files)."""

    model: str | TransformerConfig = "llama-7b"
    num_nodes: int = 1
    devices_per_node: int = 8
    memory_gb: float = 80.0
    space: str = "full"
    batch_sizes: Sequence[int] = (8, 16, 32, 64, 128, 256)
    max_chunks: int = 64
    max_tp: Optional[int] = None
    max_pp: Optional[int] = None
    ckpt: bool = True
    sp_space: str = "tp"                 # "tp" (Megatron only) or "tp+sp" (also Ulysses)
    tp_consec_choices: bool = True
    granularity_mb: float = 16.0
    partition: str = "exact"
    mode: str = "galvatron"              # or "osdp"
    osdp_splits: Sequence[int] = (2, 4)
    pipeline_type: str = "pipedream_flush"
    default_dp_type: str = "ddp"
    bct_fct_coe: float = 2.0
    bytes_per_value: int = 2             # 2: bf16 activations/gradients (GPU); 4: fp32 (CPU runs)
    reserve_fraction: float = 0.0        # budget share kept free (allocator cache, fragmentation)
    profile_dir: Optional[str] = None

    def validate(self) -> None:
        if self.space not in SEARCH_SPACES:
            raise PlanError(f"unknown search space {self.space!r}; choose one of {list(SEARCH_SPACES)}")
        if self.partition not in PARTITIONS:
            raise PlanError(f"unknown partition {self.partition!r}; choose one of {list(PARTITIONS)}")
        if self.mode not in ("galvatron", "osdp"):
            raise PlanError(f"mode must be 'galvatron' or 'osdp', got {self.mode!r}")
        if self.sp_space not in ("tp", "tp+sp"):
            raise PlanError(f"sp_space must be 'tp' or 'tp+sp', got {self.sp_space!r}")
        if not (isinstance(self.memory_gb, (int, float)) and self.memory_gb > 0):
            raise PlanError(f"memory budget must be a positive number of GB, got {self.memory_gb!r}")
        if not 0.0 <= self.reserve_fraction < 1.0:
            raise PlanError(f"reserve_fraction must be in [0, 1), got {self.reserve_fraction!r}")
        if not self.granularity_mb > 0:
            raise PlanError(f"granularity_mb must be > 0, got {self.granularity_mb!r}")
        if not self.batch_sizes or any(not isinstance(b, int) or b < 1 for b in self.batch_sizes):
            raise PlanError(f"batch_sizes must be positive ints, got {list(self.batch_sizes)!r}")


@dataclass
class PlanSearchResult:
    """Best plan plus bookkeeping: tasks evaluated and wall time."""

    plan: Plan
    tasks: int
    seconds: float


#: Pure baselines under the same cost model: (description, strategy filter, uniform layers).
BASELINES: Dict[str, Callable[[Strategy, int], bool]] = {
    "dp": lambda s, n: s.pp == 1 and s.tp == 1 and not s.sdp and s.split == 1,
    "sdp": lambda s, n: s.pp == 1 and s.tp == 1 and (s.sdp or s.dp == 1) and s.split == 1,
    "tp": lambda s, n: s.pp == 1 and s.tp == n and s.split == 1,
    "3d": lambda s, n: not s.sdp and s.tp_consec and not s.sp and s.split == 1,
}
