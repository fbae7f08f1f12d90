"""Model profiles in Galvatron 3.0's layout (``*_all.json``, entries keyed by sequence length) and the legacy one.

The 3.0 fixtures follow the format documented in Galvatron's "Search Engine Usage" page and
its shipped ``*_all.json`` / visualizer files; they are written here by hand.
"""
import json

import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import (ClusterSpec, CostModel, OtherOption, TransformerConfig, get_model_config,
                                  load_builtin_profiles, load_model_profile, model_profile_names, save_model_profile)

CFG = get_model_config("llama-7b")   # seq 2048
ACTS = {"1": 301.25, "2": 182.5, "4": 123.0, "8": 93.5, "checkpoint": 16.0}
SP_ACTS = {"1": 430.0, "2": 215.0, "4": 107.5, "8": 53.75, "checkpoint": 16.0}


def _other(states1, act1):
    return {"model_states": {str(d): states1 / d * 1.1 if d > 1 else states1 for d in (1, 2, 4, 8)},
            "activation": {str(d): act1 / d for d in (1, 2, 4, 8)}}


def galvatron3_memory(seqs=(2048, 4096), sp_only=False):
    data = {"model_config": {"dim": 4096, "n_heads": 32, "n_layers": 32},
            "1_1_8": {"layernum[1]_bsz8_seq2048_rank0_ms": 918.5}}          # raw records are ignored
    modes = [("_sp", SP_ACTS)] if sp_only else [("", ACTS), ("_sp", SP_ACTS)]
    for suffix, acts in modes:
        data["layertype_0" + suffix] = {str(s): {"parameter_size": 773.25, "tp_activation_per_bsz_dict": acts}
                                        for s in seqs}
        for key, (states, act) in (("other_memory_pp_off", (4258.0, 572.5)),
                                   ("other_memory_pp_on_first", (2157.0, 46.5)),
                                   ("other_memory_pp_on_last", (2285.0, 184.5))):
            data[key + suffix] = {str(s): _other(states, act * (2 if suffix else 1)) for s in seqs}
    return data


GALVATRON3_COMPUTATION = {"layernum[2]_bsz1_seq2048": 17.1, "layertype_0_bsz1_seq2048": 5.0,
                          "layertype_other_bsz1_seq2048": 9.6, "layertype_0_bsz8_seq2048": 4.5,
                          "layertype_other_bsz8_seq2048": 2.9, "layertype_0_bsz8_seq4096": 9.9,
                          "layertype_other_bsz8_seq4096": 5.0}


def _write(tmp_path, memory, computation, layout="galvatron3"):
    mem_name, comp_name = model_profile_names(CFG, layout=layout)
    (tmp_path / mem_name).write_text(json.dumps(memory))
    (tmp_path / comp_name).write_text(json.dumps(computation))
    return tmp_path / mem_name, tmp_path / comp_name


def test_reads_galvatron3_files(tmp_path):
    mem, comp = _write(tmp_path, galvatron3_memory(), GALVATRON3_COMPUTATION)
    assert mem.name == "memory_profiling_bf16_llama-7b_all.json"
    prof = load_model_profile(mem, comp, CFG)
    assert prof.param_mb == 773.25 and prof.ckpt_act_mb == 16.0
    assert prof.act_mb == {1: 301.25, 2: 182.5, 4: 123.0, 8: 93.5}
    assert prof.act_sp_mb[8] == 53.75
    assert (prof.fwd_ms, prof.other_fwd_ms, prof.batch_size) == (4.5, 2.9, 8)   # largest batch at seq 2048
    assert prof.other["pp_off"] == (4258.0, 572.5)
    assert prof.other_memory("pp_off", 2) == pytest.approx((4258.0 / 2 * 1.1, 572.5 / 2))
    assert prof.other_memory("pp_off", 2, sp=True)[1] == pytest.approx(572.5)       # the _sp table
    # the searcher finds Galvatron 3.0 names in a profile folder
    found, _ = load_builtin_profiles(CFG, directory=tmp_path)
    assert found.act_mb == prof.act_mb and found.other_vtp == prof.other_vtp


def test_sequence_length_is_chosen_by_the_model(tmp_path):
    mem, comp = _write(tmp_path, galvatron3_memory(seqs=(4096,)), GALVATRON3_COMPUTATION)
    with pytest.raises(PlanError, match=r"no entry for sequence length 2048 \(it holds \[4096\]\)"):
        load_model_profile(mem, comp, CFG)
    mem, comp = _write(tmp_path, galvatron3_memory(), GALVATRON3_COMPUTATION)
    with pytest.raises(PlanError, match=r"sequence lengths \[2048, 4096\]; pass the model"):
        load_model_profile(mem, comp)
    long = TransformerConfig(**{**CFG.to_dict(), "seq_length": 4096})
    assert load_model_profile(mem, comp, long).fwd_ms == 9.9


def test_sequence_parallel_only_file(tmp_path):
    """Galvatron 3.0 profiles with sequence parallelism by default; such a file has only _sp tables."""
    mem, comp = _write(tmp_path, galvatron3_memory(sp_only=True), GALVATRON3_COMPUTATION)
    prof = load_model_profile(mem, comp, CFG)
    assert prof.act_mb == prof.act_sp_mb == {1: 430.0, 2: 215.0, 4: 107.5, 8: 53.75}
    assert prof.other["last"] == (2285.0, 369.0)


def _galvatron3_lookup(memory, computation, seq, vtp, sequence_parallel):
    """What Galvatron 3.0's static-mode search reads, per its documented format (integer keys, by seq)."""
    def ints(d):
        return {int(k) if str(k).isdigit() else k: ints(v) for k, v in d.items()} if isinstance(d, dict) else d

    memory, suffix = ints(memory), "_sp" if sequence_parallel else ""
    layer = memory["layertype_0" + suffix][seq]
    other = {key: memory[f"other_memory_{key}{suffix}"][seq] for key in ("pp_off", "pp_on_first", "pp_on_last")}
    fwd = [t for k, t in computation.items() if k.startswith("layertype_0_")]
    head = [t for k, t in computation.items() if k.startswith("layertype_other_")]
    return (layer["parameter_size"], layer["tp_activation_per_bsz_dict"][vtp], layer["tp_activation_per_bsz_dict"]["checkpoint"],
            {k: (o["model_states"][vtp], o["activation"][vtp]) for k, o in other.items()}, fwd, head)


def test_files_we_write_are_what_galvatron3_reads(tmp_path):
    ours, _ = load_builtin_profiles(CFG)             # shipped legacy A100 files
    mem, comp = save_model_profile(ours, tmp_path, CFG)
    assert (mem.name, comp.name) == ("memory_profiling_bf16_llama-7b_all.json",
                                     "computation_profiling_bf16_llama-7b_all.json")
    memory, computation = json.loads(mem.read_text()), json.loads(comp.read_text())
    for sp in (False, True):
        for vtp in (1, 2, 4, 8):
            param, act, ckpt, other, fwd, head = _galvatron3_lookup(memory, computation, 2048, vtp, sp)
            assert param == ours.param_mb and ckpt == ours.ckpt_act_mb
            assert act == ours.activation(vtp, sp=sp)
            assert other["pp_off"] == pytest.approx(ours.other_memory("pp_off", vtp))
    assert fwd == [ours.fwd_ms] and head == [pytest.approx(ours.other_fwd_ms)]
    again = load_model_profile(mem, comp, CFG)
    assert again.act_mb == ours.act_mb and again.act_sp_mb == ours.act_sp_mb and again.other == ours.other
    assert again.fwd_ms == ours.fwd_ms


def test_round_trip_both_layouts_keeps_per_degree_tables(tmp_path):
    mem, comp = _write(tmp_path, galvatron3_memory(), GALVATRON3_COMPUTATION)
    prof = load_model_profile(mem, comp, CFG)
    for layout in ("galvatron3", "legacy"):
        out = tmp_path / layout
        out.mkdir()
        paths = save_model_profile(prof, out, CFG, layout=layout)
        assert tuple(p.name for p in paths) == model_profile_names(CFG, layout=layout)
        again = load_model_profile(*paths, CFG)
        assert again.other_vtp == prof.other_vtp and again.other_sp_vtp == prof.other_sp_vtp   # JSON floats are exact
        assert again.act_mb == prof.act_mb and again.act_sp_mb == prof.act_sp_mb
        assert (again.fwd_ms, again.other_fwd_ms) == (prof.fwd_ms, prof.other_fwd_ms)
    legacy = json.loads((tmp_path / "legacy" / model_profile_names(CFG, layout="legacy")[0]).read_text())
    assert "parameter_size" in legacy["layertype_0"] and legacy["other_memory_pp_off"]["model_states"]["2"] > 0
    with pytest.raises(PlanError, match="unknown profile layout"):
        save_model_profile(prof, tmp_path, CFG, layout="galvatron4")


def test_cost_model_uses_the_profiled_vocab_tp_memory(tmp_path):
    prof = load_model_profile(*_write(tmp_path, galvatron3_memory(), GALVATRON3_COMPUTATION), CFG)
    _, hw = load_builtin_profiles(CFG)
    cost = CostModel(CFG, prof, hw, ClusterSpec(1, 8))
    memory = cost.other_cost(OtherOption(vtp=2, sdp=False), pp=1, stage=0, global_bsz=8, chunks=1)[0]
    # 4258 * 1.1 / 2 states + 572.5 / 2 activation per sample x 2 samples per device (dp 4)
    assert memory == pytest.approx(4258.0 * 1.1 / 2 + 572.5 / 2 * 2)


@pytest.mark.parametrize("memory,match", [
    ({"layertype_0": {"2048": {"parameter_size": 1.0}}}, "tp_activation_per_bsz_dict"),
    ({"layertype_0": {}}, "neither parameter_size"),
    ({"layertype_0": {"2048": 3}}, "must be an object"),
])
def test_malformed_galvatron3_memory(tmp_path, memory, match):
    with pytest.raises(PlanError, match=match):
        load_model_profile(*_write(tmp_path, memory, GALVATRON3_COMPUTATION), CFG)


def test_malformed_galvatron3_tables(tmp_path):
    data = galvatron3_memory()
    data["other_memory_pp_off"]["2048"]["model_states"] = {"one": 1.0}
    with pytest.raises(PlanError, match="not a vocabulary-TP degree"):
        load_model_profile(*_write(tmp_path, data, GALVATRON3_COMPUTATION), CFG)
    with pytest.raises(PlanError, match="forward times for sequence lengths"):
        load_model_profile(*_write(tmp_path, galvatron3_memory(seqs=(2048,)), GALVATRON3_COMPUTATION))
