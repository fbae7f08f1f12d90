"""Malleus on Hugging Face Llama over gloo ranks: a TP group, a 2-stage pipeline and a live migration
train exactly as one process does; heads / KV heads a TP degree does not divide fail before spawning."""
import pytest
import torch

pytest.importorskip("transformers")

from sgl.errors import PlanError  # noqa: E402
from sgl.systems.seq.malleus import MalleusPlan  # noqa: E402
from sgl.systems.seq.malleus_runtime import (MalleusRunConfig, assemble_params, check_malleus_plan,  # noqa: E402
                                             run_malleus, train_reference)


def _plan(pipelines, layers, micro_batches, idle=()):
    return MalleusPlan(pipelines, layers, micro_batches, 0.0, [0.0] * len(pipelines), list(idle))


def _cfg(**kw):
    base = dict(arch="hf-llama", kv_heads=2, micro_batches=4, micro_batch_size=2, steps=3, lr=1e-2, dtype="float64")
    return MalleusRunConfig(**(base | kw))


def _assert_same_training(reports, cfg):
    ref_losses, ref_params = train_reference(cfg)
    assert len(set(ref_losses)) == len(ref_losses)               # the steps train (losses move)
    for report in reports:
        assert report["losses"] == pytest.approx(ref_losses, rel=1e-9, abs=1e-10)
    params = assemble_params(reports)
    assert set(params) == set(ref_params)
    assert any(isinstance(k[0], int) and k[1] == "self_attn.q_proj.weight" for k in params)   # HF naming
    for key, value in ref_params.items():
        torch.testing.assert_close(params[key], value, rtol=1e-9, atol=1e-10, msg=str(key))


#: the three runs share one spawn (each rank imports transformers once): (a) one TP group of 2 with
#: grouped-query attention -- each rank holds 2 of the 4 query heads and 1 of the 2 KV heads; (b) a
#: 2-stage pipeline with layers [1, 3]; (c) TP 2, then rank 0 twice as slow -> a live migration of
#: parameters and Adam moments to a 2-stage pipeline with layers [1, 3]
RUNS = {
    "tp": (_plan([[[0, 1]]], [[4]], [4]), _cfg(tp=2)),
    "pp": (_plan([[[0], [1]]], [[1, 3]], [4]), _cfg()),
    "migrate": (_plan([[[0, 1]]], [[4]], [4]), _cfg(tp=2, replan_at=1, replan_rates=(2.0, 1.0))),
}


def _worker(rank, world):
    from sgl.systems.seq.malleus_runtime import _worker as train

    return {name: train(rank, world, plan, cfg) for name, (plan, cfg) in RUNS.items()}


@pytest.fixture(scope="module")
def reports():
    from sgl import comm

    got = comm.spawn(_worker, 2, timeout=180)
    return {name: [r[name] for r in got] for name in RUNS}


def test_hf_tp_group_of_two_with_grouped_query_attention_equals_one_process(reports):
    shards = reports["tp"][1]["shards"]
    assert shards[(0, "self_attn.k_proj.weight")][4].shape == (16, 64)      # 1 KV head of 16 dims
    assert shards[(0, "self_attn.q_proj.weight")][2:4] == (32, 64)          # query heads 2, 3
    assert shards[(0, "mlp.down_proj.weight")][1] == 1                      # row-parallel: columns split
    _assert_same_training(reports["tp"], RUNS["tp"][1])


def test_hf_two_stage_pipeline_equals_one_process(reports):
    assert {k[0] for k in reports["pp"][0]["shards"]} == {"embed", 0}
    assert {k[0] for k in reports["pp"][1]["shards"]} == {1, 2, 3, "head"}
    _assert_same_training(reports["pp"], RUNS["pp"][1])


def test_hf_tp_group_migrates_live_to_a_pipeline_without_changing_training(reports):
    moved = reports["migrate"][0]["migration"]
    assert [[st["devices"] for st in p] for p in moved["plan"]["pipelines"]] == [[[0], [1]]]
    assert [st["layers"] for st in moved["plan"]["pipelines"][0]] == [1, 3]
    assert reports["migrate"][1]["migration"]["received_mb"] > 0
    _assert_same_training(reports["migrate"], RUNS["migrate"][1])


@pytest.mark.parametrize("kv_heads,world,match", [
    (4, 3, "num_attention_heads=4 is not divisible by the TP degree 3"),
    (1, 2, "num_key_value_heads=1 is not divisible by the TP degree 2"),
])
def test_hf_heads_a_tp_degree_does_not_divide_fail_before_spawning(kv_heads, world, match):
    cfg = _cfg(kv_heads=kv_heads)
    with pytest.raises(PlanError, match=match):
        check_malleus_plan(_plan([[list(range(world))]], [[4]], [4]), world, cfg)
    with pytest.raises(PlanError, match=match):
        run_malleus(_plan([[list(range(world))]], [[4]], [4]), cfg, world)


def test_hf_bad_config():
    with pytest.raises(PlanError, match="arch"):
        MalleusRunConfig(arch="gpt")
    with pytest.raises(PlanError, match="kv_heads applies to arch='hf-llama' only"):
        MalleusRunConfig(kv_heads=2)
    with pytest.raises(PlanError, match="kv_heads=3 must divide num_heads=4"):
        check_malleus_plan(_plan([[[0]]], [[4]], [4]), 1, _cfg(kv_heads=3))
    from sgl.systems.seq.malleus_measure import measure_malleus

    with pytest.raises(PlanError, match="arch"):
        measure_malleus(2, 2.0, arch="hf-mixtral")
