import json

import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import (BUILTIN_PROFILE_DIR, HardwareProfile, get_model_config, load_builtin_profiles,
                                  load_hardware_profile, load_model_profile, model_profile_names,
                                  save_hardware_profile, save_model_profile)


def test_builtin_a100_profiles_load():
    model, hw = load_builtin_profiles("llama-13b", 2, 8)
    assert model.param_mb == pytest.approx(1213.04, abs=0.01)
    assert model.ckpt_act_mb == 24.0 and set(model.act_mb) == {1, 2, 4, 8}
    # parameter_size is fp32 MB of one layer: matches the 13B layer's parameter count
    cfg = get_model_config("llama-13b")
    assert model.param_mb == pytest.approx(cfg.layer_params() * 4 / 2 ** 20, rel=0.01)
    assert hw.bandwidth(16, crosses_nodes=True) < hw.bandwidth(8, crosses_nodes=False)
    assert hw.bandwidth(4, crosses_nodes=True) == hw.allreduce_bw[(4, 0)]
    assert hw.overlap_coe > 1


def test_round_trip(tmp_path):
    cfg = get_model_config("llama-7b")
    model, hw = load_builtin_profiles(cfg)
    mem, comp = save_model_profile(model, tmp_path, cfg)
    assert (mem.name, comp.name) == model_profile_names(cfg)
    again = load_model_profile(mem, comp, cfg)
    assert again.act_mb == model.act_mb and again.other == model.other
    assert again.fwd_ms == model.fwd_ms and again.other_fwd_ms == pytest.approx(model.other_fwd_ms)
    save_hardware_profile(hw, tmp_path)
    hw2 = load_hardware_profile(tmp_path, 1, 8)
    assert hw2.allreduce_bw == hw.allreduce_bw and hw2.p2p_bw == hw.p2p_bw and hw2.overlap_coe == hw.overlap_coe


def test_galvatron2_files_with_raw_records_and_batch_keys(tmp_path):
    """Galvatron-2 files keep raw per-run records and per-vocab-TP tables; both must load."""
    data = json.loads((BUILTIN_PROFILE_DIR / "memory_profiling_bf16_hidden4096_head32_seqlen2048.json").read_text())
    data["1_1_8"] = {"layernum[1]_bsz8_rank0_ms": 918.79, "layernum[1]_bsz8_rank0_act": 457.3}
    data["other_memory_pp_off"] = {"model_states": {"1": 4258.0, "2": 2200.0}, "activation": {"1": 572.5}}
    (tmp_path / "mem.json").write_text(json.dumps(data))
    (tmp_path / "comp.json").write_text(json.dumps({
        "layernum[2]_bsz1_seq2048": 17.1, "layertype_0_bsz1_seq2048": 5.0, "layertype_0_bsz8_seq2048": 4.5,
        "layertype_other_bsz8_seq2048": 2.9, "layertype_0_bsz16_seq4096": 9.9}))
    prof = load_model_profile(tmp_path / "mem.json", tmp_path / "comp.json", "llama-7b")
    assert prof.fwd_ms == 4.5 and prof.other_fwd_ms == 2.9
    assert prof.other["pp_off"] == (4258.0, 572.5)


@pytest.mark.parametrize("content,match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"layertype_0": {"parameter_size": 1.0}}', "tp_activation_per_bsz_dict"),
    ('{"layertype_0": {"parameter_size": -1, "tp_activation_per_bsz_dict": {"1": 1, "checkpoint": 1}}}',
     "non-negative number"),
    ('{"layertype_0": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"1": 1}}}', "checkpoint"),
    ('{"layertype_0": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"x": 1, "checkpoint": 1}}}',
     "neither a TP degree"),
    ('{"layertype_0": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"1": 1, "checkpoint": 1}}}',
     "other_memory_pp_off"),
])
def test_malformed_memory_profile(tmp_path, content, match):
    (tmp_path / "mem.json").write_text(content)
    (tmp_path / "comp.json").write_text('{"layertype_0": 1.0}')
    with pytest.raises(PlanError, match=match):
        load_model_profile(tmp_path / "mem.json", tmp_path / "comp.json", "llama-7b")


def test_malformed_computation_and_hardware(tmp_path):
    mem = BUILTIN_PROFILE_DIR / "memory_profiling_bf16_hidden4096_head32_seqlen2048.json"
    (tmp_path / "comp.json").write_text('{"something": 1.0}')
    with pytest.raises(PlanError, match="no 'layertype_0' forward time"):
        load_model_profile(mem, tmp_path / "comp.json", "llama-7b")
    with pytest.raises(PlanError, match="does not exist"):
        load_model_profile(mem, tmp_path / "missing.json", "llama-7b")
    (tmp_path / "allreduce_bandwidth_1nodes_8gpus_per_node.json").write_text('{"allreduce_8": 3}')
    with pytest.raises(PlanError, match="unexpected key 'allreduce_8'"):
        load_hardware_profile(tmp_path, 1, 8)
    (tmp_path / "allreduce_bandwidth_1nodes_8gpus_per_node.json").write_text('{"allreduce_size_8_consec_1": 0}')
    with pytest.raises(PlanError, match="positive bandwidth"):
        load_hardware_profile(tmp_path, 1, 8)
    with pytest.raises(PlanError, match="does not exist"):
        load_hardware_profile(tmp_path, 4, 8)


def test_missing_group_bandwidth_is_explained():
    hw = HardwareProfile(1, 8, {(2, 1): 100.0}, {}, 1.0, source="x")
    with pytest.raises(PlanError, match="no all-reduce bandwidth for a group of 8"):
        hw.bandwidth(8, crosses_nodes=False)
