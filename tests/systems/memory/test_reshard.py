"""Resharding checkpoints: a 4-process TP checkpoint restored on 2 (ZeRO-3) and 3 (DP) processes."""
import json
import os

import pytest
import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.memory import check_checkpoint, model_fingerprint, replan, restore_worker, save_worker
from sgl.systems.runtime import ExecConfig, build_tiny_lm

SLOW = pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 4+2+3 processes; SGL_SLOW_TESTS=1")


@SLOW
def test_four_process_tp_checkpoint_restores_bit_equal_on_two_and_three(tmp_path):
    cfg = ExecConfig(global_bsz=12).__dict__
    saved = comm.spawn(save_worker, 4, "tp", str(tmp_path), cfg, 1, timeout=240)
    for world, kind in ((2, "sdp"), (3, "dp")):
        restored = comm.spawn(restore_worker, world, kind, str(tmp_path), cfg, timeout=240)
        a, b = saved[0]["full"], restored[0]["full"]
        assert set(a) == set(b) and any(k.startswith("optim.") for k in a)  # Adam state came along
        assert all(torch.equal(a[k], b[k]) for k in a)                       # bit-equal after resharding
        assert restored[0]["next_loss"] == pytest.approx(saved[0]["next_loss"], rel=1e-6)
        assert restored[0]["step"] == 1


def test_checkpoint_of_another_model_is_refused(tmp_path):
    tiny = model_fingerprint(build_tiny_lm(ExecConfig()), "tiny")
    with pytest.raises(ConfigError, match="not an SGL sharded checkpoint"):
        check_checkpoint(tmp_path, tiny)
    other = model_fingerprint(torch.nn.Linear(3, 3), "linear")
    (tmp_path / "sgl-model.json").write_text(json.dumps({**other, "step": 1}))
    with pytest.raises(ConfigError, match="other parameter shapes"):
        check_checkpoint(tmp_path, tiny)
    (tmp_path / "sgl-model.json").write_text(json.dumps({**tiny, "step": 3}))
    assert check_checkpoint(tmp_path, tiny)["step"] == 3


def test_replan_for_the_devices_left():
    eight, six = replan(8, memory_gb=80), replan(6, memory_gb=80)
    assert eight["plan"].num_devices == 8 and six["plan"].num_devices == six["devices_used"] == 4
    with pytest.raises(ConfigError):
        replan(0)
