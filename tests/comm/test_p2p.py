"""Tests for sgl.comm.p2p without a process group (the two-rank transfers run in test_collectives)."""
from __future__ import annotations

import pytest
import torch

import sgl.comm as comm
from sgl.errors import CommError


@pytest.mark.parametrize(
    "call",
    [
        lambda: comm.send(torch.ones(1), dst=1),
        lambda: comm.recv(torch.ones(1), src=1),
        lambda: comm.recv((2,), src=1),
    ],
    ids=["send", "recv-buffer", "recv-shape"],
)
def test_send_recv_need_init(call) -> None:
    with pytest.raises(CommError, match=r"not initialised.*Fix: call comm.init\(\)"):
        call()
