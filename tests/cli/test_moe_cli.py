"""``sgl moe train|plan``: JSON outputs, the trace it writes, bad input as one error line."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from sgl.cli import main
from sgl.systems.moe.traces import load_trace, save_trace, synthetic_trace


def test_train_writes_summary_and_trace_that_plan_reads(data_path, tmp_path, capsys):
    root = data_path("wikitext2")
    out, trace = tmp_path / "run.json", tmp_path / "trace.npz"
    assert main(["moe", "train", "--root", str(root), "--procs", "1", "--steps", "3", "--batch-size", "8",
                 "--vocab-size", "256", "--num-layers", "1", "--max-documents", "20", "--val-batches", "1",
                 "--lr", "0.01", "--cache-dir", str(tmp_path / "tok"), "--trace-out", str(trace), "--out", str(out),
                 "--no-progress"]) == 0
    summary = json.loads(out.read_text())
    assert summary["final_loss"] < summary["first_loss"] and np.isfinite(summary["val_loss"])
    assert summary["routed_rows"] == 3 * 8 * 64 * 2  # dropless: every (token, choice) dispatched
    tr = load_trace(trace)
    assert tr.shape == (3, 1, 8, 8) and (tr.counts.sum(-1) == 64 * 2).all()
    capsys.readouterr()
    assert main(["moe", "plan", "--trace", str(trace), "--topology", "2x2", "--out", str(tmp_path / "p.json")]) == 0
    text = capsys.readouterr().out
    assert "NetMoE combine all-to-all: time x" in text and "laer" in text
    report = json.loads((tmp_path / "p.json").read_text())
    assert report["netmoe"]["time_ratio"] <= 1.0 + 1e-9
    b = report["balance"]
    # both re-layouts start from plain EP and never model slower than it; which of the two wins on a
    # 3-step trace depends on the trace (their ranking is tested on a controlled skew in test_planners)
    assert b["laer"]["time_s"] <= b["static"]["time_s"] + 1e-12
    assert b["flexmoe"]["time_s"] <= b["static"]["time_s"] + 1e-12
    assert set(b) >= {"static", "flexmoe", "laer"}


def test_plan_on_a_synthetic_trace_and_on_the_laer_artifact(data_path, tmp_path, capsys):
    path = save_trace(synthetic_trace(1, 2, 32, 16, tokens=64, top_k=2, affinity=0.9, seed=0), tmp_path / "s.npz")
    assert main(["moe", "plan", "--trace", str(path), "--topology", "2x4", "--ceiling"]) == 0
    text = capsys.readouterr().out
    ratio = float(text.split("time x")[1].split(",")[0])
    assert ratio < 0.9  # strong per-sample affinity: NetMoE cuts the modelled combine time
    ceiling = float(text.split("ceiling of any placement: time x")[1].split()[0])
    assert ceiling <= ratio + 1e-3  # no placement beats the bound
    csv = data_path("moe_traces", "token_analysis_backup.csv")
    assert main(["moe", "plan", "--laer-csv", str(csv), "--model", "mixtral-8x7b-e8k2", "--topology", "4x8",
                 "--out", str(tmp_path / "laer.json")]) == 0
    report = json.loads((tmp_path / "laer.json").read_text())
    assert report["balance"]["laer"]["imbalance"] < report["balance"]["static"]["imbalance"]
    assert set(report["measured_imbalance"]) == {"FSDP", "FLEX", "LAER"}


@pytest.mark.parametrize("argv,message", [
    (["--topology", "3x1"], "cannot share evenly"),
    (["--topology", "2by4"], "NODESxDEVICES"),
    (["--topology", "1x8"], "not divisible by 8 devices"),
])
def test_plan_bad_topology_is_one_error_line(tmp_path, capsys, argv, message):
    path = save_trace(synthetic_trace(1, 1, 4, 8, tokens=8, top_k=1, affinity=0.5), tmp_path / "t.npz")
    assert main(["moe", "plan", "--trace", str(path)] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and len(err.strip().splitlines()) == 1


def test_bad_trace_and_bad_train_options(tmp_path, capsys, a_file):
    bad = tmp_path / "neg.npz"
    meta = {"format": "sgl-moe-trace", "version": 1, "num_experts": 2, "top_k": 1, "tokens_per_sample": 4}
    np.savez(bad, counts=-np.ones((1, 1, 2, 2), dtype=np.int64), meta=json.dumps(meta))
    assert main(["moe", "plan", "--trace", str(bad), "--topology", "1x2"]) == 2
    assert "negative" in capsys.readouterr().err
    assert main(["moe", "train", "--root", str(tmp_path), "--out", str(tmp_path)]) == 2  # a folder as --out
    assert "--out" in capsys.readouterr().err
    assert main(["moe", "train", "--root", str(tmp_path), "--top-k", "9", "--dispatch", "ep"]) == 2
    assert "top_k=9 exceeds num_experts=8" in capsys.readouterr().err
    assert main(["moe", "train", "--root", str(tmp_path), "--balance", "laer"]) == 2  # checked before any data
    assert "needs dispatch='fsep'" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="starts torchrun (set SGL_SLOW_TESTS=1)")
def test_train_under_torchrun(data_path, tmp_path):
    import shutil
    import subprocess
    import sys

    from sgl.comm import _free_port

    root = data_path("wikitext2")
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    out = tmp_path / "run.json"
    cmd = [torchrun, "--nproc-per-node", "2", "--master-port", str(_free_port()), "-m", "sgl.cli", "moe", "train",
           "--launcher", "torchrun", "--root", str(root), "--steps", "2", "--batch-size", "4", "--vocab-size", "256",
           "--num-layers", "1", "--max-documents", "20", "--val-batches", "1", "--cache-dir", str(tmp_path / "tok"),
           "--no-progress", "--out", str(out)]
    subprocess.run(cmd, check=True, timeout=300, capture_output=True)
    summary = json.loads(out.read_text())
    assert summary["procs"] == 2 and summary["routed_rows"] == 2 * 4 * 64 * 2


def _train_two_procs(root, tmp_path, *extra):
    out = tmp_path / "run.json"
    argv = ["moe", "train", "--root", str(root), "--procs", "2", "--steps", "3", "--batch-size", "4",
            "--vocab-size", "256", "--num-layers", "1", "--max-documents", "20", "--val-batches", "1",
            "--cache-dir", str(tmp_path / "tok"), "--no-progress", "--timeout", "120", "--start-method", "fork",
            "--out", str(out), *extra]
    assert main(argv) == 0
    return json.loads(out.read_text())


def test_train_lsh_and_fsep_under_two_processes(data_path, tmp_path, capsys):
    root = data_path("wikitext2")
    lsh = _train_two_procs(root, tmp_path, "--dispatch", "lsh", "--lsh-hashes", "1", "--lsh-proj-dim", "2")
    assert lsh["procs"] == 2 and lsh["dispatch"] == "lsh"
    assert lsh["routed_rows"] == 3 * 4 * 64 * 2  # every (token, choice) of the 3 global batches
    assert 0 < lsh["sent_rows"] <= 8 * 2 * 3 * 2 * 2  # <= 4 buckets x 8 experts x 3 steps x 2 ranks (+val)
    assert np.isfinite(lsh["val_loss"]) and lsh["final_loss"] < lsh["first_loss"]
    fsep = _train_two_procs(root, tmp_path, "--dispatch", "fsep", "--balance", "laer", "--capacity-factor", "1.0")
    assert fsep["procs"] == 2 and fsep["dispatch"] == "fsep"
    assert fsep["layout_changes"] == 2  # LAER planned after steps 1 and 2, each applied a step later
    assert fsep["dropped_pairs"] > 0 and fsep["sent_rows"] == fsep["routed_rows"] == 3 * 4 * 64 * 2 - fsep["dropped_pairs"]
    # Capacity per expert per rank: one process with the batch cut into 2 capacity groups is the same run.
    one = _train_two_procs(root, tmp_path, "--procs", "1", "--capacity-factor", "1.0", "--capacity-groups", "2")
    assert one["dropped_pairs"] == fsep["dropped_pairs"]
    assert one["loss"] == pytest.approx(fsep["loss"], rel=1e-5)
    glob = _train_two_procs(root, tmp_path, "--procs", "1", "--capacity-factor", "1.0", "--capacity-groups", "1")
    # One global capacity is another definition: it drops other pairs (the counts alone can coincide), so the
    # run differs beyond the tolerance that made the 2-group run equal to the 2-process one.
    assert glob["loss"] != pytest.approx(fsep["loss"], rel=1e-5)
    assert np.isfinite(fsep["val_loss"]) and fsep["final_loss"] < fsep["first_loss"]
    text = capsys.readouterr().out
    assert "moe train: 2 procs, dispatch lsh" in text and "dispatch fsep, placement none, balance laer" in text


def test_train_takes_a_transformers_config_file(data_path, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    root = data_path("wikitext2")
    cfg = tmp_path / "mixtral.json"
    transformers.MixtralConfig(vocab_size=256, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                               max_position_embeddings=64).to_json_file(str(cfg))
    out = tmp_path / "run.json"
    assert main(["moe", "train", "--root", str(root), "--model", f"hf:{cfg}", "--precision", "bf16", "--procs", "1",
                 "--steps", "3", "--batch-size", "4", "--seq-len", "16", "--max-documents", "20", "--val-batches", "1",
                 "--lr", "0.01", "--cache-dir", str(tmp_path / "tok"), "--out", str(out), "--no-progress"]) == 0
    summary = json.loads(out.read_text())
    assert summary["hf_model_type"] == "mixtral" and summary["precision"] == "bf16"
    assert summary["config"]["vocab_size"] == 256 and np.isfinite(summary["val_loss"])
    assert summary["routed_rows"] == 3 * 4 * 16 * 2  # Mixtral's top-2 over 4 experts, dropless
    capsys.readouterr()
    llama = tmp_path / "llama.json"
    transformers.LlamaConfig(vocab_size=64).to_json_file(str(llama))
    assert main(["moe", "train", "--root", str(root), "--model", f"hf:{llama}", "--procs", "1"]) != 0
    err = capsys.readouterr().err
    assert "model_type='llama' is not supported" in err and "MixtralForCausalLM" in err
