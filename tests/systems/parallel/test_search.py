import math

import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import (BASELINES, Plan, PlanSearcher, PlanSearchConfig, TransformerConfig, format_plan,
                                  load_plan, save_plan)

FAST = dict(batch_sizes=(8, 16, 32), granularity_mb=64.0, max_chunks=16)


@pytest.fixture(scope="module")
def searcher_7b():
    return PlanSearcher(PlanSearchConfig(model="llama-7b", num_nodes=1, devices_per_node=8, memory_gb=40, **FAST))


def test_plan_is_consistent_and_within_budget(searcher_7b):
    for budget in (26, 40):
        plan = searcher_7b.search(budget).plan
        assert len(plan.strategies) == 32 and sum(plan.pp_division) == 32
        assert all(s.pp == plan.pp and s.pp * s.tp * s.dp == 8 for s in plan.strategies)
        assert max(plan.stage_memory_mb) <= budget * 1024
        time_ms, mems = searcher_7b.evaluate(plan)
        assert time_ms == pytest.approx(plan.time_ms) and mems == pytest.approx(plan.stage_memory_mb)


def test_monotone_in_budget(searcher_7b):
    throughputs = [searcher_7b.search(b).plan.throughput for b in (25, 28, 32, 40, 60, 80)]
    assert all(b >= a - 1e-9 for a, b in zip(throughputs, throughputs[1:])), throughputs
    assert throughputs[-1] > throughputs[0]


def test_infeasible_budget_names_smallest_feasible(searcher_7b):
    with pytest.raises(PlanError, match=r"smallest feasible budget is (\d+\.\d+) GB") as info:
        searcher_7b.search(8)
    smallest = float(info.value.args[0].rsplit("is ", 1)[1].split(" GB")[0])
    assert 8 < smallest < 40
    assert searcher_7b.search(smallest).plan.throughput > 0       # that budget does work
    with pytest.raises(PlanError, match="infeasible"):
        searcher_7b.search(smallest - 0.1)


def test_searched_beats_or_equals_every_baseline():
    searcher = PlanSearcher(PlanSearchConfig(model="llama-7b", num_nodes=2, devices_per_node=8, memory_gb=24, **FAST))
    ours = searcher.search().plan.throughput
    ratios = {}
    for name in BASELINES:
        try:
            ratios[name] = ours / searcher.search(baseline=name).plan.throughput
        except PlanError as exc:
            assert "smallest feasible budget" in str(exc)
    assert ratios and min(ratios.values()) >= 1.0 - 1e-9
    assert max(ratios.values()) > 1.1
    base = searcher.search(baseline="sdp").plan
    assert {(s.tp, s.pp, s.sdp) for s in base.strategies} == {(1, 1, True)}


def test_partitions_exact_is_best_and_bmw_not_worse_than_even():
    cfg = dict(model="llama-13b", num_nodes=2, devices_per_node=8, memory_gb=24, batch_sizes=(64,),
               granularity_mb=64.0, max_chunks=32, max_pp=4)
    results = {p: PlanSearcher(PlanSearchConfig(partition=p, **cfg)).search().plan.throughput
               for p in ("even", "memory", "bmw", "exact")}
    assert results["exact"] >= results["bmw"] - 1e-9
    assert results["bmw"] >= results["even"] - 1e-9 and results["bmw"] >= results["memory"] - 1e-9


def test_osdp_mode_mixes_shard_and_replicate():
    searcher = PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=30, mode="osdp", ckpt=False, **FAST))
    plan = searcher.search().plan
    assert plan.pp == 1 and all(s.tp == 1 for s in plan.strategies)
    sdp = searcher.search(baseline="sdp").plan
    assert plan.throughput >= sdp.throughput - 1e-9


def test_json_round_trip_keeps_predictions(searcher_7b, tmp_path):
    plan = searcher_7b.search(32).plan
    path = save_plan(plan, tmp_path)
    assert path.name == "galvatron_config_llama-7b_1nodes_8gpus_per_node_32GB_bf16.json"
    again = load_plan(path)
    assert again.strategies == plan.strategies and again.pp_division == plan.pp_division
    assert searcher_7b.evaluate(again)[0] == pytest.approx(plan.time_ms)
    text = format_plan(again)
    assert "samples/s" in text and "layers" in text


def test_galvatron_published_plan_shape_reads(searcher_7b):
    """The shape of Galvatron's shipped llama2-7b plan: ZeRO-3 everywhere, ckpt on the first 20 layers."""
    data = {"pp_deg": 1, "tp_sizes_enc": ",".join(["1"] * 32), "tp_consecutive_flags": ",".join(["1"] * 32),
            "dp_types_enc": ",".join(["1"] * 32), "use_sp": ",".join(["0"] * 32),
            "checkpoint": ",".join(["1"] * 20 + ["0"] * 12), "global_bsz": 16, "chunks": 1, "pp_division": "32",
            "pipeline_type": "pipedream_flush", "default_dp_type": "zero2", "vtp": 2, "vsp": 1, "embed_sdp": 1}
    plan = Plan.from_galvatron(data, num_devices=8)
    assert sum(s.ckpt for s in plan.strategies) == 20 and all(s.sdp and s.dp == 8 for s in plan.strategies)
    time_ms, mems = searcher_7b.evaluate(plan)
    assert time_ms > 0 and mems[0] > 0


@pytest.mark.parametrize("data,match", [
    ({"pp_deg": 1, "global_bsz": 8, "chunks": 1}, "tp_sizes_enc"),
    ({"pp_deg": 2, "tp_sizes_enc": "1,1,1", "global_bsz": 8, "chunks": 1, "pp_division": "2,2"}, "pp_division"),
    ({"pp_deg": 1, "tp_sizes_enc": "1,a", "global_bsz": 8, "chunks": 1}, "comma-separated"),
    ({"pp_deg": 1, "tp_sizes_enc": "3,3", "global_bsz": 8, "chunks": 1}, "does not divide"),
])
def test_bad_plan_json(data, match):
    with pytest.raises(PlanError, match=match):
        Plan.from_galvatron(data, num_devices=8)


def test_bad_search_inputs():
    with pytest.raises(PlanError, match="power of two"):
        PlanSearcher(PlanSearchConfig(num_nodes=1, devices_per_node=12))
    with pytest.raises(PlanError, match="unknown search space"):
        PlanSearcher(PlanSearchConfig(space="4d"))
    odd = TransformerConfig("odd", 4, 96, 6, 192, 1000, 16)
    with pytest.raises(PlanError, match="num_heads=6 is not divisible"):
        PlanSearcher(PlanSearchConfig(model=odd, max_tp=4))
    with pytest.raises(PlanError, match="positive"):
        PlanSearcher(PlanSearchConfig(memory_gb=0))


def test_estimated_profile_for_unprofiled_preset():
    searcher = PlanSearcher(PlanSearchConfig(model="llama2-70b", num_nodes=2, devices_per_node=8, memory_gb=80,
                                             batch_sizes=(16,), granularity_mb=256.0, max_chunks=16))
    assert "estimated" in searcher.cost.profile.source
    plan = searcher.search().plan
    assert plan.pp > 1 or any(s.tp > 1 or s.sdp for s in plan.strategies)
    assert math.isfinite(plan.time_ms)


def test_exact_partition_equals_enumeration():
    import itertools

    import numpy as np

    from sgl.systems.parallel.partition import exact_partition

    rng = np.random.default_rng(3)

    def pipeline(times, chunks):
        per = np.asarray(times) / chunks
        return per.sum() + ((chunks - 1) * per.max() if chunks > 1 else 0.0)

    for _ in range(60):
        pp, chunks = int(rng.integers(2, 5)), int(rng.integers(1, 9))
        layers = int(rng.integers(pp, 9))
        tables = np.full((pp, layers - pp + 2), np.inf)
        tables[:, 1:] = np.cumsum(rng.random((pp, layers - pp + 1)), axis=1) * rng.random((pp, 1)) * 3
        tables[rng.random(tables.shape) < 0.1] = np.inf
        best = np.inf
        for cuts in itertools.combinations(range(1, layers), pp - 1):
            division = [b - a for a, b in zip((0,) + cuts, cuts + (layers,))]
            if max(division) <= layers - pp + 1:
                best = min(best, pipeline([tables[k, n] for k, n in enumerate(division)], chunks))
        division = exact_partition(tables, layers, chunks)
        if not np.isfinite(best):
            assert division is None or not np.isfinite(
                pipeline([tables[k, n] for k, n in enumerate(division)], chunks))
            continue
        assert sum(division) == layers
        assert pipeline([tables[k, n] for k, n in enumerate(division)], chunks) == pytest.approx(best)


def test_ulysses_sp_space_round_trips():
    searcher = PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=40, sp_space="tp+sp", space="dp+tp", **FAST))
    strategies = searcher._strategies(1)
    assert any(s.sp for s in strategies) and all(s.tp > 1 for s in strategies if s.sp)
    plan = searcher.search().plan
    assert plan.throughput >= PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=40, space="dp+tp", **FAST)
                                               ).search().plan.throughput - 1e-9
    data = plan.to_galvatron()
    assert Plan.from_galvatron(data, num_devices=8).strategies == plan.strategies


def test_monotone_with_pipelines_on_two_nodes():
    searcher = PlanSearcher(PlanSearchConfig(model="llama-13b", num_nodes=2, devices_per_node=8, memory_gb=40,
                                             batch_sizes=(32, 64), granularity_mb=64.0, max_chunks=32))
    plans = [searcher.search(b).plan for b in (20, 24, 32, 48, 80)]
    assert any(p.pp > 1 for p in plans)
    throughputs = [p.throughput for p in plans]
    assert all(b >= a - 1e-9 for a, b in zip(throughputs, throughputs[1:])), throughputs


def test_tp_baseline_impossible_for_head_count():
    searcher = PlanSearcher(PlanSearchConfig(model="llama-13b", num_nodes=2, devices_per_node=8, memory_gb=40, **FAST))
    with pytest.raises(PlanError, match="num_heads=40"):
        searcher.search(baseline="tp")


def test_reserve_fraction_scales_the_budget():
    plain = PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=40, **FAST))
    reserved = PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=50, reserve_fraction=0.2, **FAST))
    assert reserved.search().plan.throughput == pytest.approx(plain.search().plan.throughput)
    with pytest.raises(PlanError, match=r"smallest feasible budget is (\d+\.\d+)") as info:
        reserved.search(10)
    smallest = float(info.value.args[0].rsplit("is ", 1)[1].split(" GB")[0])
    assert reserved.search(smallest).plan.throughput > 0
    with pytest.raises(PlanError, match="reserve_fraction"):
        PlanSearcher(PlanSearchConfig(reserve_fraction=1.0))
