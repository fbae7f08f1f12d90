"""Malleus end to end on 2 gloo ranks: a rank doing 4x the GEMM work is measured as a straggler (slow: timing)."""
import os

import numpy as np
import pytest

from sgl import comm
from sgl.systems.seq.malleus import MalleusModel, MalleusPlanner
from sgl.systems.seq.straggler import measure_rates

pytestmark = pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="timing-based; set SGL_SLOW_TESTS=1")


def _measure(rank, world):
    import torch

    torch.set_num_threads(1)
    return measure_rates(size=384, repeats=7, work=4 if rank == 1 else 1)


def test_measured_straggler_is_planned_around():
    rates = comm.spawn(_measure, 2, timeout=120)[0]
    assert rates[0] == 1.0 and rates[1] > 2.0                     # 4x the work: clearly slower
    # the two measured ranks stand for two devices of a 16-device cluster (one per node half)
    cluster = np.ones(16)
    cluster[[0, 8]] = rates
    planner = MalleusPlanner(MalleusModel(), 16, tp=4, pp=2)
    assert planner.oblivious(cluster).step_ms / planner.plan(cluster).step_ms > 1.5
