"""Steps lost for real: periodic async DCP checkpoints, a SIGKILL inside a save, resume on fewer processes."""
import json
import os

import pytest

from sgl.errors import ConfigError
from sgl.systems.memory.recovery import MARKER, checkpoint_dir, committed_steps, kill_and_resume, latest_checkpoint
from sgl.systems.runtime import ExecConfig, build_tiny_lm
from sgl.systems.runtime.executor import train_reference

SLOW = pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 2 then 1 process; SGL_SLOW_TESTS=1")


def test_killed_inside_a_save_resumes_on_fewer_processes_without_lost_or_repeated_steps(tmp_path):
    cfg = ExecConfig(global_bsz=8, steps=8)
    r = kill_and_resume(tmp_path, cfg, world=2, world_after=1, steps=8, every=2, kill_in_save=4)
    # Rank 1 died while its shards of the step-4 checkpoint were being written: that one is never loaded.
    assert 4 in r["uncommitted_after_kill"] and r["discarded"] == [4]
    assert r["checkpoint_step"] == 2 == r["resumed_start"]
    first, resumed = r["first_losses"], r["resumed_losses"]
    assert sorted(first) == list(range(1, r["last_step"] + 1)) and r["last_step"] >= 4
    assert r["steps_lost"] == r["last_step"] - 2
    assert sorted(resumed) == list(range(3, 9))          # starts right after the checkpoint, ends at the last step
    ref = train_reference(cfg)                            # one process, never interrupted
    assert [resumed[s] for s in range(3, 9)] == pytest.approx(ref[2:], rel=1e-5)
    assert [first[s] for s in sorted(first)] == pytest.approx(ref[:len(first)], rel=1e-5)
    assert committed_steps(tmp_path) == [2, 4, 6, 8]      # the resumed run (1 process) checkpoints on
    assert r["devices_used"] == 1 and r["plan"]["layers"] == ["1-1-1"] * 4


@SLOW
def test_outside_kill_mid_run(tmp_path):
    cfg = ExecConfig(global_bsz=8, steps=10)
    r = kill_and_resume(tmp_path, cfg, world=2, world_after=1, steps=10, every=2, kill_after=5)
    assert r["last_step"] >= 5 and r["checkpoint_step"] <= r["last_step"]
    assert sorted(r["resumed_losses"]) == list(range(r["checkpoint_step"] + 1, 11))
    assert [r["resumed_losses"][s] for s in range(r["checkpoint_step"] + 1, 11)] == \
        pytest.approx(train_reference(cfg)[r["checkpoint_step"]:], rel=1e-5)


def _fake(root, step, marker=True, metadata=True, shapes=None):
    folder = checkpoint_dir(root, step)
    folder.mkdir(parents=True)
    if metadata:
        (folder / ".metadata").write_bytes(b"x")
    if marker:
        (folder / MARKER).write_text(json.dumps({"model": "tiny", "shapes": shapes or {}, "step": step}))


def test_only_committed_whole_checkpoints_are_loaded(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    _fake(tmp_path, 2)
    _fake(tmp_path, 4, marker=False)       # save in flight / killed mid-save: DCP metadata but no commit
    _fake(tmp_path, 6, metadata=False)     # marker without DCP's metadata: not whole either
    (tmp_path / "step-junk").mkdir()
    assert committed_steps(tmp_path) == [2]
    assert latest_checkpoint(tmp_path) == (2, checkpoint_dir(tmp_path, 2))


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path):
    from sgl.systems.memory import check_checkpoint, model_fingerprint

    tiny = model_fingerprint(build_tiny_lm(ExecConfig()), "tiny")
    _fake(tmp_path, 2, shapes={"w": [3, 3]})
    with pytest.raises(ConfigError, match="other parameter shapes"):
        check_checkpoint(checkpoint_dir(tmp_path, 2), tiny, MARKER)
    with pytest.raises(ConfigError, match=f"no {MARKER}"):
        check_checkpoint(tmp_path, tiny, MARKER)


def test_kill_and_resume_needs_one_kind_of_kill(tmp_path):
    with pytest.raises(ConfigError, match="exactly one"):
        kill_and_resume(tmp_path, ExecConfig(), kill_after=2, kill_in_save=2)
    with pytest.raises(ConfigError, match="exactly one"):
        kill_and_resume(tmp_path, ExecConfig())
