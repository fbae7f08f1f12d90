"""Plan JSON of every Galvatron version: current keys written, older ones read, nothing lost on re-save.

The fixtures follow the plan layouts documented in Galvatron's repositories (Hetu's Galvatron 1
``config2strategy``, Galvatron-2's search-engine output, Galvatron 3.0's runtime tests with
``cp_sizes_enc`` / ``vocab_sdp`` and the MoE keys); they are written here by hand.
"""
import dataclasses
import json

import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import (GALVATRON_PLAN_KEYS, Plan, PlanSearchConfig, PlanSearcher, format_plan, load_plan,
                                  save_plan)


def _enc(values):
    return ",".join(str(v) for v in values)


L = 32  # llama-7b layers
GALVATRON1 = {"pp_deg": 2, "tp_sizes_enc": _enc([2] * L), "tp_consecutive_flags": _enc([1] * L),
              "dp_types_enc": _enc([0] * 16 + [1] * 16), "global_bsz": 32, "chunks": 4, "pp_division": "16,16"}
GALVATRON2 = {"pp_deg": 1, "tp_sizes_enc": _enc([1] * L), "tp_consecutive_flags": _enc([1] * L),
              "dp_types_enc": _enc([1] * L), "use_sp": _enc([0] * L), "checkpoint": _enc([1] * 20 + [0] * 12),
              "global_bsz": 16, "chunks": 1, "pp_division": "32", "pipeline_type": "pipedream_flush",
              "default_dp_type": "zero2", "vtp": 2, "vsp": 1, "embed_sdp": 1}
GALVATRON3 = {"pp_deg": 1, "tp_sizes_enc": _enc([2] * L), "tp_consecutive_flags": _enc([1] * L),
              "cp_sizes_enc": _enc([1] * L), "dp_types_enc": _enc([0] * L), "use_sp": _enc([1] * L),
              "checkpoint": _enc([2] * 4 + [0] * 28), "global_bsz": 16, "chunks": 2, "pp_division": "32",
              "pipeline_type": "gpipe", "default_dp_type": "zero2", "vtp": 1, "vsp": 0, "vcp": 1, "vocab_sdp": 1}
GALVATRON3_MOE = dict(GALVATRON3, ep_sizes_enc=_enc([2] * L), tp_of_ep_sizes_enc=_enc([1] * L), dispatcher="alltoall")
FORMATS = {"galvatron1": GALVATRON1, "galvatron2": GALVATRON2, "galvatron3": GALVATRON3, "galvatron3-moe": GALVATRON3_MOE}


@pytest.fixture(scope="module")
def searcher():
    return PlanSearcher(PlanSearchConfig(model="llama-7b", num_nodes=1, devices_per_node=8, memory_gb=40,
                                         batch_sizes=(8, 16, 32), granularity_mb=64.0, max_chunks=16))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_load_and_resave_keeps_every_field_and_writes_current_keys(name, tmp_path, searcher):
    original = FORMATS[name]
    (tmp_path / "in.json").write_text(json.dumps(original))
    plan = load_plan(tmp_path / "in.json", num_devices=8)
    saved = json.loads(save_plan(plan, tmp_path / "out.json").read_text())
    changed = {k: (v, saved.get(k)) for k, v in original.items() if saved.get(k) != v}
    assert not changed, changed
    # what Galvatron 3.0's runtime needs is there, whichever version wrote the file
    assert set(GALVATRON_PLAN_KEYS) <= set(saved)
    assert saved["vocab_sdp"] == saved["embed_sdp"] == int(original.get("vocab_sdp", original.get("embed_sdp", 0)))
    again = load_plan(tmp_path / "out.json")
    assert again == plan
    assert json.loads(save_plan(again, tmp_path / "again.json").read_text()) == saved
    time_ms, mems = searcher.evaluate(again)
    assert time_ms > 0 and min(mems) > 0


def test_galvatron3_fields_are_understood():
    plan = Plan.from_galvatron(GALVATRON3_MOE, num_devices=8)
    assert plan.embed_sdp and not plan.vsp and plan.pipeline_type == "gpipe"
    assert plan.ckpt_modes[:5] == [2, 2, 2, 2, 0] and sum(s.ckpt for s in plan.strategies) == 4
    assert all(s.sp and s.tp == 2 and s.dp == 4 for s in plan.strategies)
    assert plan.extra == {"ep_sizes_enc": _enc([2] * L), "tp_of_ep_sizes_enc": _enc([1] * L), "dispatcher": "alltoall"}
    assert "carried from the file, not modelled: dispatcher, ep_sizes_enc, tp_of_ep_sizes_enc" in format_plan(plan)
    legacy = Plan.from_galvatron(GALVATRON2, num_devices=8)
    assert legacy.embed_sdp and legacy.vsp and legacy.vtp == 2 and legacy.layer_cp() == [1] * L


@pytest.mark.parametrize("model,nodes,budget,sp_space", [
    ("llama-7b", 2, 24, "tp"),        # the measurements: 23.64 -> 25.25 GB per stage
    ("llama-7b", 1, 24, "tp+sp"),     # 23.48 -> 26.66 GB
    ("llama-13b", 1, 40, "tp"),       # 39.30 -> 40.38 GB
])
def test_zero3_embedding_survives_the_galvatron3_file(model, nodes, budget, sp_space):
    searcher = PlanSearcher(PlanSearchConfig(model=model, num_nodes=nodes, devices_per_node=8, memory_gb=budget,
                                             sp_space=sp_space))
    plan = searcher.search().plan
    assert plan.embed_sdp, "the setting of the issue puts ZeRO-3 on the embedding/head"
    without = searcher.evaluate(dataclasses.replace(plan, embed_sdp=False))[1]
    assert max(without) > budget * 1024, "dropping it must break the budget, or this test shows nothing"
    data = plan.to_galvatron()
    assert Plan.from_galvatron(data).to_galvatron() == data          # our own files re-save unchanged too
    del data["embed_sdp"]                     # what Galvatron 3.0's runtime reads: vocab_sdp
    loaded = Plan.from_galvatron(data)
    assert loaded.embed_sdp
    time_ms, mems = searcher.evaluate(loaded)
    assert mems == pytest.approx(plan.stage_memory_mb) and max(mems) <= budget * 1024
    assert time_ms == pytest.approx(plan.time_ms)


def test_the_plans_own_default_dp_type_is_evaluated(searcher):
    zero3 = Plan.from_galvatron(dict(GALVATRON3, default_dp_type="zero3", vocab_sdp=0), num_devices=8)
    flagged = Plan.from_galvatron(dict(GALVATRON3, dp_types_enc=_enc([1] * L), vocab_sdp=1), num_devices=8)
    assert searcher.evaluate(zero3)[1] == pytest.approx(searcher.evaluate(flagged)[1])
    ddp = Plan.from_galvatron(dict(GALVATRON3, default_dp_type="ddp", vocab_sdp=0), num_devices=8)
    assert searcher.evaluate(ddp)[1][0] > searcher.evaluate(zero3)[1][0]


def test_ulysses_embedding_is_evaluated(searcher):
    megatron = Plan.from_galvatron(dict(GALVATRON2, vsp=0), num_devices=8)
    ulysses = Plan.from_galvatron(GALVATRON2, num_devices=8)
    assert searcher.evaluate(ulysses)[0] < searcher.evaluate(megatron)[0]


def test_context_parallel_plans_are_read_not_evaluated(searcher, tmp_path):
    data = dict(GALVATRON3, cp_sizes_enc=_enc([2] * L))
    plan = Plan.from_galvatron(data, num_devices=8)
    assert all(s.dp == 2 for s in plan.strategies)      # 8 / (tp 2 * cp 2)
    assert json.loads(save_plan(plan, tmp_path / "cp.json").read_text())["cp_sizes_enc"] == data["cp_sizes_enc"]
    assert " cp" in format_plan(plan).splitlines()[2]
    with pytest.raises(PlanError, match="context parallelism"):
        searcher.evaluate(plan)


@pytest.mark.parametrize("change,match", [
    ({"vocab_sdp": 1, "embed_sdp": 0}, "name the same setting"),
    ({"cp_sizes_enc": _enc([3] * L)}, "cp=3"),
    ({"checkpoint": _enc([3] * L)}, "takes values"),
    ({"vtp": 3}, "vtp=3"),
    ({"default_dp_type": "zero1"}, "default_dp_type"),
    ({"use_sp": "1,0"}, "as many entries"),
])
def test_bad_current_keys(change, match):
    with pytest.raises(PlanError, match=match):
        Plan.from_galvatron(dict(GALVATRON3, **change), num_devices=8)


def test_extra_cannot_shadow_plan_fields():
    plan = dataclasses.replace(Plan.from_galvatron(GALVATRON3, num_devices=8), extra={"vocab_sdp": 0})
    with pytest.raises(PlanError, match="Plan.extra"):
        plan.to_galvatron()


@pytest.mark.parametrize("model,nodes,budget", [("llama-7b", 2, 24), ("llama-7b", 1, 24), ("llama-13b", 1, 40)])
def test_space_3d_never_shards_the_embedding(model, nodes, budget):
    """In these settings the 3d search used to put ZeRO-3 on the embedding/head (Megatron 3D has none)."""
    config = dict(model=model, num_nodes=nodes, devices_per_node=8, memory_gb=budget)
    plan = PlanSearcher(PlanSearchConfig(space="3d", **config)).search().plan
    assert not plan.embed_sdp and not any(s.sdp for s in plan.strategies)
    assert plan.to_galvatron()["vocab_sdp"] == 0
    searcher = PlanSearcher(PlanSearchConfig(batch_sizes=(16, 32, 64), granularity_mb=64.0, **config))
    for baseline in ("3d", "dp", "tp"):
        try:
            assert not searcher.search(baseline=baseline).plan.embed_sdp, baseline
        except PlanError as exc:
            assert "smallest feasible budget" in str(exc) or "num_heads" in str(exc)
