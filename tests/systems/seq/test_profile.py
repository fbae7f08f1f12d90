"""Machine profile (``sgl plan calibrate``): fits, file round trip, bad files, planners driven by it, CLI."""
import json
import os

import numpy as np
import pytest

from sgl.cli import main
from sgl.errors import PlanError
from sgl.systems.parallel.model import get_model_config
from sgl.systems.seq import (DynamicMeshPlanner, FlexSPPlanner, HydraulisPlanner, MalleusPlanner, SeqStrategy,
                             SwitchingPlanner, flexsp_cost_model)
from sgl.systems.seq.calibrate import COMPUTE_PARTS, LINKS, fit_relative
from sgl.systems.seq.profile import FORMAT_VERSION, MachineProfile, predict_step_ms
from sgl.systems.seq.profile_fit import _fit

CFG = get_model_config("tiny")
LENGTHS = [64, 128, 256, 512]
SIZES = [2**12, 2**16, 2**20]
# the "true" machine the synthetic samples come from (ms, ms/token, ms/token^2; s, s/byte)
A_ATTN, A1_ATTN, A0_ATTN = 2e-5, 1e-3, 0.3
ALPHA2, BETA = 0.02, 2.5
LINK = {"all_reduce": (3e-4, 1e-9), "all_to_all": (8e-4, 2e-9), "send_recv": (1.5e-4, 5e-10)}


def _synthetic_results():
    """What two calibration workers return on a noiseless machine with the constants above."""
    s = np.asarray(LENGTHS, dtype=float)
    layers = CFG.num_layers
    attention = A_ATTN * s * s + A1_ATTN * s + A0_ATTN
    model = layers * A_ATTN * s * s + ALPHA2 * s + BETA
    compute = {"attention": attention, "linear": 0.003 * s + 0.4, "head": 0.001 * s + 0.2, "model": model}
    compute = {k: [[float(v)] * 3 for v in vals] for k, vals in compute.items()}
    compute.update(saved_mb=(0.03 * s + 1e-5 * s * s).tolist(), optimizer=[1.5, 1.6, 1.4], device="cpu")
    # at 2 ranks: Ulysses splits the quadratic work evenly, contiguous causal ring shards give the last rank 3/4
    compute["strategies"] = {"ulysses": [[float(v)] * 3 for v in A_ATTN / 2 * s * s + 0.002 * s + 1.0],
                             "ring": [[float(v)] * 3 for v in 0.75 * A_ATTN * s * s + 0.001 * s + 0.8]}
    links = {op: [[1e3 * (a + b * m)] * 3 for m in SIZES] for op, (a, b) in LINK.items()}
    return [(compute, links), (compute, links)]


@pytest.fixture(scope="module")
def profile():
    return _fit(CFG, _synthetic_results(), LENGTHS, SIZES, threads=1, world_size=2)


def test_fit_recovers_the_terms_and_predicts_the_samples(profile):
    assert set(COMPUTE_PARTS) == {"attention", "linear", "head", "model"} and set(LINKS) == set(LINK)
    assert profile.attention_ms_per_token2 == pytest.approx(A_ATTN, rel=1e-4)
    assert profile.alpha2 == pytest.approx(ALPHA2, rel=1e-4)
    assert profile.micro_batch_ms == pytest.approx(BETA, rel=1e-4)
    assert profile.head_ms_per_token == pytest.approx(0.001, rel=1e-4)
    for term in (profile.attention_ms_per_token2, profile.linear_ms_per_token, profile.head_ms_per_token,
                 profile.micro_batch_ms, profile.optimizer_ms, profile.act_mb_per_token):
        assert term > 0
    for op, (a, b) in LINK.items():
        assert profile.links[op].alpha_s == pytest.approx(a, rel=1e-4)
        assert profile.links[op].beta_s_per_byte == pytest.approx(b, rel=1e-4)
        assert profile.links[op].ms(2**20) == pytest.approx(1e3 * (a + b * 2**20), rel=1e-6)
    measured = profile.samples["compute_ms"]["model"]
    fitted = [profile.micro_batch_ms_of([s]) for s in LENGTHS]
    assert np.allclose(fitted, measured, rtol=1e-3)
    assert profile.act_mb_per_token == pytest.approx(0.03 + 1e-5 * 512)    # the most per token, at 512
    assert profile.optimizer_ms == pytest.approx(1.4)                   # the fastest of the repeats
    assert profile.sp_quadratic_factor == pytest.approx(1.0, rel=1e-3)
    assert profile.cp_quadratic_factor == pytest.approx(1.5, rel=1e-3)


def test_strategy_factors_never_fall_below_an_even_split():
    results = _synthetic_results()
    s = np.asarray(LENGTHS, dtype=float)
    for compute, _ in results:          # (both ranks share one dict) a Ulysses rank "faster" than its share: noise
        compute["strategies"]["ulysses"] = [[float(v)] * 3 for v in A_ATTN / 8 * s * s + 1.0]
    profile = _fit(CFG, results, LENGTHS, SIZES, threads=1, world_size=2)
    assert profile.sp_quadratic_factor == 1.0 and profile.samples["fits"]["ulysses"][0] == pytest.approx(A_ATTN / 8)


def test_fit_relative_weights_every_sample_alike_and_rejects_too_few():
    m = np.array([1e3, 1e6, 1e8])
    t = 0.5 + 1e-6 * m
    alpha, beta = fit_relative(np.stack([np.ones(3), m], 1), t)
    assert alpha == pytest.approx(0.5, rel=1e-6) and beta == pytest.approx(1e-6, rel=1e-6)
    with pytest.raises(PlanError, match="cannot fit 3 terms to 2 samples"):
        fit_relative(np.ones((2, 3)), np.ones(2))


def test_profile_round_trips_through_its_file(profile, tmp_path):
    path = tmp_path / "sub" / "machine.json"
    profile.save(path)
    assert not [p for p in path.parent.iterdir() if p.name != "machine.json"]      # no temporaries left
    again = MachineProfile.load(path)
    assert again.to_dict() == profile.to_dict()
    assert again.links["all_to_all"] == profile.links["all_to_all"]
    a = profile.seq_cost_model(4, 1.0).strategy_cost(SeqStrategy(sp=2))
    b = again.seq_cost_model(4, 1.0).strategy_cost(SeqStrategy(sp=2))
    assert (a.a, a.b, a.c, a.capacity) == (b.a, b.b, b.c, b.capacity)


def test_bad_profile_files_get_clear_errors(profile, tmp_path):
    data = profile.to_dict()
    old = tmp_path / "old.json"
    old.write_text(json.dumps(dict(data, format_version=FORMAT_VERSION + 1)))
    with pytest.raises(PlanError, match=r"format version 2.*re-run `sgl plan calibrate"):
        MachineProfile.load(old)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({k: v for k, v in data.items() if k not in ("links", "micro_batch_ms")}))
    with pytest.raises(PlanError, match=r"lacks the fields \['micro_batch_ms', 'links'\]"):
        MachineProfile.load(partial)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(PlanError, match="cannot read machine profile"):
        MachineProfile.load(broken)
    with pytest.raises(PlanError, match="does not exist: write one with `sgl plan calibrate"):
        MachineProfile.load(tmp_path / "missing.json")
    links = tmp_path / "links.json"
    links.write_text(json.dumps(dict(data, links={"all_reduce": {"alpha": 1}})))
    with pytest.raises(PlanError, match="malformed links"):
        MachineProfile.load(links)
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps(dict(data, micro_batch_ms=-1.0)))
    with pytest.raises(PlanError, match="micro_batch_ms"):
        MachineProfile.load(negative)


def test_measured_terms_reach_the_cost_model(profile):
    model = profile.seq_cost_model(4, memory_gb=1.0)
    hw, layers = model.hardware, CFG.num_layers
    assert hw.alpha1 == pytest.approx(layers * A_ATTN, rel=1e-4) and hw.beta == profile.micro_batch_ms
    dp = model.strategy_cost(SeqStrategy())
    sp2 = model.strategy_cost(SeqStrategy(sp=2))
    cp2 = model.strategy_cost(SeqStrategy(cp=2))
    # Ulysses: 8 all-to-alls per layer, each alpha + beta * (s/2 tokens * hidden * 4 bytes)
    a2a_alpha, a2a_beta = LINK["all_to_all"]
    assert sp2.c == pytest.approx(BETA + 8 * layers * 1e3 * a2a_alpha, rel=1e-4)
    assert sp2.b - dp.b / 2 == pytest.approx(8 * layers * CFG.hidden_size * 4 / 2 * 1e3 * a2a_beta, rel=1e-4)
    assert sp2.a == pytest.approx(dp.a / 2, rel=1e-3) and cp2.a == pytest.approx(dp.a / 2 * 1.5, rel=1e-3)
    # ring: one K/V message per hop forward and one back, no overlap on this machine
    p_alpha, p_beta = LINK["send_recv"]
    assert cp2.c == pytest.approx(BETA + 2 * layers * 1e3 * p_alpha, rel=1e-4)
    assert cp2.b - dp.b / 2 == pytest.approx(2 * 2 * layers * CFG.hidden_size * 4 / 2 * 1e3 * p_beta, rel=1e-4)
    # the published presets have no latency terms: unchanged
    preset = flexsp_cost_model(8)
    assert preset.strategy_cost(SeqStrategy(sp=4)).c == preset.hardware.beta


def test_profile_drives_the_planners_and_predicts_their_steps(profile):
    devices, batch = 4, np.array([900, 400, 300, 200, 120, 90, 60, 30])
    model = profile.seq_cost_model(devices, memory_gb=1.0)
    plan = FlexSPPlanner(model.sp_pool(), devices).plan(batch)
    plan.validate(batch, devices)
    fixed = profile.gradient_sync_ms(devices) + profile.optimizer_ms
    assert profile.gradient_sync_ms(1) == 0.0 and profile.gradient_sync_ms(devices) > 0
    assert profile.predict_step_ms(plan, devices, 1.0, barrier=True) == pytest.approx(plan.time + fixed)
    assert profile.predict_step_ms(plan, devices, 1.0, barrier=True, optimizer=False) == pytest.approx(
        plan.time + fixed - profile.optimizer_ms)
    assert predict_step_ms(plan, model) <= plan.time + 1e-9              # busiest device <= sum of phase maxima
    # a plan made under another cost model is re-costed with the profile's
    published = FlexSPPlanner(flexsp_cost_model(devices, 80).sp_pool(), devices).plan(batch)
    expected = sum(max(model.strategy_cost(g.cost.strategy).replica_time([g.lengths[mb] for mb in g.micro_batches])
                       for g in phase) for phase in published.phases)
    assert predict_step_ms(published, model, barrier=True) == pytest.approx(expected)
    assert expected != pytest.approx(published.time)
    with pytest.raises(PlanError, match="more than the cost model's 2 devices"):
        predict_step_ms(FlexSPPlanner(model.sp_pool(), devices).homogeneous(batch, 1), profile.seq_cost_model(2, 1.0))
    hydra = HydraulisPlanner(profile.hydraulis_pool(devices, 1.0), devices)
    hydra.build_replicas(batch, batch.size)
    hydra.plan(batch).validate(batch, devices)
    DynamicMeshPlanner(model, devices, max_length=900).plan(batch).validate(batch, devices)
    assert len(SwitchingPlanner(model, devices).plan([batch, batch[:3]]).plans) == 2
    malleus = profile.malleus_model(tokens=256, micro_batches=8, memory_gb=1.0)
    assert malleus.layers == CFG.num_layers and malleus.tp_overhead[1] == 0.0 < malleus.tp_overhead[2]
    assert malleus.layer_ms == pytest.approx(A_ATTN * 256**2 + profile.linear_ms_per_token * 256 + BETA / 4
                                             + profile.head_ms_per_token * 256 / 4)
    rates = np.array([2.0, 1.0, 1.0, 1.0])
    planner = MalleusPlanner(malleus, devices, tp=1, pp=2, node_size=4)
    assert planner.plan(rates).step_ms < planner.oblivious(rates).step_ms


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"),
                    reason="times the machine, ~10 s; the profile round trip is tested without it; set SGL_SLOW_TESTS=1 to run")
def test_cli_calibrate_quick_writes_a_loadable_profile(tmp_path, capsys):
    out = tmp_path / "machine.json"
    assert main(["plan", "calibrate", "--out", str(out), "--quick"]) == 0
    text = capsys.readouterr().out
    assert "measured ms" in text and "all_to_all" in text and f"wrote {out}" in text
    measured = MachineProfile.load(out)
    assert measured.samples["lengths"] == [16, 32, 64] and measured.world_size == 2
    assert measured.fingerprint["cpu_count"] >= 1 and measured.model["name"] == "tiny"
    assert all(np.isfinite(v) and v >= 0 for v in (measured.alpha1, measured.alpha2, measured.micro_batch_ms))
    assert measured.act_mb_per_token > 0 and measured.optimizer_ms > 0
    assert len(measured.samples["raw"]["links"]) == 2 and measured.links["send_recv"].alpha_s >= 0


def test_cli_planners_take_a_profile_and_reject_bad_ones(profile, tmp_path, capsys):
    path = tmp_path / "machine.json"
    profile.save(path)
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(x) for x in [900, 400, 300, 200, 120, 90, 60, 30] * 4) + "\n")
    seq = ["plan", "seq", "--lengths", str(lengths), "--devices", "4", "--memory", "1", "--steps", "1",
           "--batch-size", "8", "--time-limit", "0.1", "--profile", str(path)]
    for method in ("flexsp", "hydraulis"):
        assert main(seq + ["--method", method]) == 0
        assert f"profile {path}" in capsys.readouterr().out
    assert main(["plan", "straggler", "--devices", "4", "--tp", "1", "--pp", "2", "--node-size", "4",
                 "--rates", "2,1,1,1", "--micro-batches", "8", "--memory", "1", "--profile", str(path),
                 "--tokens", "256"]) == 0
    assert "ms per layer and 256-token micro-batch" in capsys.readouterr().out
    old = tmp_path / "old.json"
    old.write_text(json.dumps(dict(profile.to_dict(), format_version=0)))
    assert main(seq[:-1] + [str(old)]) == 2
    assert "re-run `sgl plan calibrate" in capsys.readouterr().err
    assert main(seq + ["--calibrate", "tiny"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["plan", "straggler", "--devices", "4", "--tp", "1", "--rates", "1,1,1,1", "--tokens", "8"]) == 2
    assert "--tokens sizes the micro-batch of a --profile" in capsys.readouterr().err
    assert main(["plan", "calibrate", "--out", str(tmp_path), "--quick"]) == 2        # a folder, checked first
    assert "--out" in capsys.readouterr().err
    assert main(["plan", "calibrate", "--out", str(tmp_path / "m.json"), "--threads", "0"]) == 2
    assert "--threads must be an integer >= 1" in capsys.readouterr().err
    assert main(["plan", "calibrate", "--out", str(tmp_path / "m.json"), "--model", "no-such-model"]) == 2
    assert "unknown model" in capsys.readouterr().err and not (tmp_path / "m.json").exists()


def test_executor_fits_round_trip_and_cost_plans(profile, tmp_path):
    from dataclasses import replace

    from sgl.systems.seq import SeqStrategy
    from sgl.systems.seq.fitted_cost import FittedCostModel

    assert profile.fitted_cost_model(2) is None                       # calibrated without the executor
    fitted = replace(profile, strategy_fits={"budget": 512, "devices": 2,
                                             "fits": {"ulysses:1": [1e-4, 0.02, 2.0, 5.0],
                                                      "ulysses:2": [5e-5, 0.03, 40.0, 0.0]}})
    loaded = MachineProfile.load(fitted.save(tmp_path / "fits.json"))
    assert loaded.strategy_fits == fitted.strategy_fits
    model = loaded.fitted_cost_model(2)
    assert isinstance(model, FittedCostModel) and model.budget == 512
    assert model.capacity(SeqStrategy(sp=2)) == 1024                    # budget x degree
    cost = model.strategy_cost(SeqStrategy(sp=2))
    assert cost.c == pytest.approx(40.0)
    bad = replace(profile, strategy_fits={"fits": {"ulysses": [1, 2, 3, 4]}})
    with pytest.raises(PlanError, match="strategy_fits"):
        bad.fitted_cost_model(2)
