"""Small helpers every task shares: seeding, the seed summary, peak memory.

    >>> summarize([0.5, 1.0])
    {'mean': 0.75, 'std': 0.3535533905932738}
"""
from __future__ import annotations

import platform
import resource
import statistics
from typing import Dict, Sequence

import torch

__all__ = ["seed_everything", "summarize", "peak_rss_mb"]


def seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (ru_maxrss, platform-corrected)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if platform.system() == "Darwin" else peak / 1024


def summarize(values: Sequence[float]) -> Dict[str, float]:
    """Mean and the unbiased (sample) standard deviation, as the OGB leaderboard reports."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}
