"""Resharding checkpoints: a 4-process TP checkpoint restored on 2 (ZeRO-3) and on 3 processes (the plan search's plan)."""
import json
import os

import pytest
import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.memory import (SurvivorPlanSearcher, check_checkpoint, layout_plan, model_fingerprint, replan,
                               restore_worker, save_worker)
from sgl.systems.runtime import ExecConfig, build_tiny_lm

SLOW = pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 4+2+3 processes; SGL_SLOW_TESTS=1")


@SLOW
def test_four_process_tp_checkpoint_restores_bit_equal_on_two_and_on_three_through_the_plan_search(tmp_path):
    cfg = ExecConfig(global_bsz=12).__dict__
    saved = comm.spawn(save_worker, 4, "tp", str(tmp_path), cfg, 1, timeout=240)
    searched = replan(3, model="tiny", batch_sizes=(12,), executable=True)   # the plan search, 3 devices
    assert searched["devices_used"] == 3 and searched["plan"].num_devices == 3
    assert "tp=3" in searched["excluded"]                                    # 4 heads: TP3 cannot be built
    for world, layout in ((2, "sdp"), (3, searched["plan"])):
        restored = comm.spawn(restore_worker, world, layout, str(tmp_path), cfg, timeout=240)
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


def test_replan_searches_exactly_the_devices_left():
    six = replan(6, memory_gb=80, batch_sizes=(24,))
    assert six["devices_used"] == 6 and six["plan"].num_devices == 6 and "reason" not in six
    assert all(6 % (s.pp * s.tp) == 0 and s.pp * s.tp * s.dp == 6 for s in six["plan"].strategies)
    assert "num_heads=32" in six["excluded"]["tp=3"] and "tp=6" in six["excluded"]
    with pytest.raises(ConfigError):
        replan(0)


def test_survivor_search_is_the_plan_search_on_powers_of_two():
    from sgl.systems.parallel import PlanSearchConfig, PlanSearcher

    for memory in (16, 40):
        cfg = PlanSearchConfig(model="llama-7b", memory_gb=memory, batch_sizes=(16, 32), granularity_mb=64)
        ours, galvatron = SurvivorPlanSearcher(cfg, 8).search().plan, PlanSearcher(cfg).search().plan
        assert ours.throughput == pytest.approx(galvatron.throughput, rel=1e-12)
        assert [s.label for s in ours.strategies] == [s.label for s in galvatron.strategies]


def test_survivor_space_of_six_devices():
    from sgl.systems.parallel import PlanSearchConfig, Strategy

    s = SurvivorPlanSearcher(PlanSearchConfig(model="tiny", batch_sizes=(12,), granularity_mb=64), 6)
    space = set(s._strategies(1))
    assert Strategy(1, 2, 3) in space and Strategy(1, 1, 6, sdp=True) in space
    assert not any(x.tp in (3, 6) for x in space)        # 4 heads: TP must divide 4
    assert sorted({t.pp for t in s.tasks()}) == [1, 2, 3]
    assert "pp=6" in s.excluded and "layers" in s.excluded["pp=6"]
    with pytest.raises(ConfigError, match="full Galvatron space"):
        SurvivorPlanSearcher(PlanSearchConfig(model="tiny", space="3d"), 6)


def test_replan_for_the_restore_and_its_fallback():
    three = replan(3, model="tiny", batch_sizes=(12,), executable=True)
    plan = three["plan"]
    assert three["devices_used"] == 3 and plan.pp == 1 and {s.tp for s in plan.strategies} == {1}
    layout_plan(plan, 3, ExecConfig(global_bsz=12))                      # the executor can build it
    with pytest.raises(ConfigError, match="global batch 12"):
        layout_plan(plan, 3, ExecConfig(global_bsz=9))
    six = replan(6, model="tiny", batch_sizes=(12,), executable=True)
    assert six["devices_used"] == 6 and {s.dp * s.tp for s in six["plan"].strategies} == {6}
    # A global batch of 16 cannot be split 6 ways, 3 ways x TP2, nor run TP6/TP3 (4 heads): best plan on 4.
    odd = replan(6, model="tiny", batch_sizes=(16,), executable=True)
    assert odd["devices_used"] == 4 and "6 devices" in odd["reason"] and "5 devices" in odd["reason"]
    assert "num_heads=4" in odd["excluded"]["tp=3"]
