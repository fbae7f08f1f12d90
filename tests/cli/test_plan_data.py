"""``sgl plan lora`` and ``sgl plan spindle``: tables and JSON written, bad input as one error line."""
import json

import numpy as np
import pytest

from sgl.cli import main
from sgl.systems.data import SpindleOp, TaskDAG, ScalingCurve, validate_schedule, LinkModel


def _lengths(path, values):
    path.write_text("\n".join(str(int(v)) for v in values) + "\n")
    return path


def test_plan_lora_prints_and_writes_json(tmp_path, capsys):
    rng = np.random.default_rng(0)
    short = _lengths(tmp_path / "short.txt", rng.integers(8, 200, 500))
    long = _lengths(tmp_path / "long.txt", rng.integers(1000, 6000, 200))
    out = tmp_path / "lora.json"
    assert main(["plan", "lora", "--devices", "8", "--task", f"chat={short}:32", "--task", f"docs={long}:4",
                 "--steps", "2", "--calibration-steps", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "one homogeneous scheme" in text and "LobRA MILP + dispatch" in text and "GPU-seconds saved" in text
    data = json.loads(out.read_text())
    assert data["devices"] == 8 and data["steps"] == 2 and set(data["tasks"]) == {"chat", "docs"}
    assert data["lobra"]["gpu_seconds"] > 0 and data["homogeneous"]["gpu_seconds"] > 0
    assert data["saving"] == pytest.approx(1 - data["lobra"]["gpu_seconds"] / data["homogeneous"]["gpu_seconds"])
    # GPUs: every plan uses exactly the cluster
    assert data["lobra"]["devices"] == 8 and data["homogeneous"]["devices"] == 8
    # no plan beats the any-plan lower bound; the ceiling is the saving that bound would give
    assert "any-plan lower bound" in text and "ceiling for any plan" in text and data["microbatch"] == "tokens"
    assert data["lower_bound_gpu_seconds"] <= min(data["lobra"]["gpu_seconds"], data["homogeneous"]["gpu_seconds"])
    assert data["ceiling"] == pytest.approx(1 - data["lower_bound_gpu_seconds"] / data["homogeneous"]["gpu_seconds"])


def test_plan_lora_on_real_lengths(data_path, tmp_path, capsys):
    wiki = data_path("seqlen", "wikipedia.txt")
    short = _lengths(tmp_path / "short.txt", np.arange(5, 60))
    assert main(["plan", "lora", "--devices", "16", "--task", f"wiki={wiki}:4", "--task", f"sst={short}:16",
                 "--steps", "1", "--calibration-steps", "1", "--search", "0"]) == 0
    assert "LobRA MILP + dispatch" in capsys.readouterr().out


def test_plan_lora_pool_lora_by_default_and_full_on_request(tmp_path, capsys):
    rng = np.random.default_rng(1)
    short = _lengths(tmp_path / "short.txt", rng.integers(8, 200, 300))
    long = _lengths(tmp_path / "long.txt", rng.integers(1000, 5000, 100))
    runs = {}
    for pool in ("lora", "full", None):
        out = tmp_path / f"{pool}.json"
        extra = [] if pool is None else ["--pool", pool]
        assert main(["plan", "lora", "--devices", "8", "--task", f"chat={short}:16", "--task", f"docs={long}:2",
                     "--steps", "1", "--calibration-steps", "1", "--search", "256", "--out", str(out)] + extra) == 0
        text = capsys.readouterr().out
        assert "static-plan LP bound" in text and "any static replica set" in text
        runs[pool] = json.loads(out.read_text())
    assert runs[None]["pool"] == "lora" and runs[None]["rank"] == 16
    assert "LoRA rank 16, 2 adapters" in text
    # the frozen base leaves room for tp1-pp1 (full fine-tuning does not): more replica sets to choose from
    assert runs["lora"]["static_bound"]["sets"] > runs["full"]["static_bound"]["sets"] > 0
    assert any("tp1-pp1" in label for label in runs["lora"]["candidates"])
    assert not any("tp1-pp1" in label for label in runs["full"]["candidates"])
    for data in runs.values():
        st = data["static_bound"]
        assert st["gpu_seconds"] is not None and st["gpu_seconds"] <= data["lobra"]["gpu_seconds"] * (1 + 1e-9)
    assert main(["plan", "lora", "--devices", "8", "--task", f"a={short}:2", "--rank", "9000"]) == 2
    assert "layer width" in capsys.readouterr().err


@pytest.mark.parametrize("task, message", [("nofile", "NAME=FILE:COUNT"), ("a=x.txt:zero", "COUNT must be an integer"),
                                           ("a=x.txt:0", "at least 1"), ("a=/no/such.txt:4", "does not exist")])
def test_plan_lora_bad_task(task, message, capsys):
    assert main(["plan", "lora", "--devices", "8", "--task", task]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and "Traceback" not in err


def test_plan_lora_checks_out_before_work(tmp_path, capsys):
    lengths = _lengths(tmp_path / "l.txt", [10, 20])
    assert main(["plan", "lora", "--devices", "8", "--task", f"a={lengths}:2", "--search", "-1"]) == 2
    assert "--search" in capsys.readouterr().err
    assert main(["plan", "lora", "--devices", "8", "--task", f"a={lengths}:2",
                 "--out", str(lengths / "x.json")]) == 2   # its folder is a file
    assert "--out" in capsys.readouterr().err


def test_plan_spindle_builtin_and_file(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["plan", "spindle", "--dag", "builtin:mtmm", "--devices", "16", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "wave 0:" in text and "vs one big pipeline" in text and "vs even split" in text
    data = json.loads(out.read_text())
    assert len(data["ops"]) == 15 and data["makespan_s"] < data["baselines"]["one big pipeline"]
    assert "exact mapping" in text and data["mapping_used"] == "exact"
    # the written schedule replays against the DAG: dependencies and device exclusivity hold
    dag_file = tmp_path / "dag.json"
    ops = [SpindleOp("enc", "a", ScalingCurve((1, 2), (1.0, 0.6)), out_mb=100.0),
           SpindleOp("enc2", "b", ScalingCurve((1, 2), (0.5, 0.4))),
           SpindleOp("llm", "a", ScalingCurve((1, 2, 4), (4.0, 2.1, 1.2)), ("enc", "enc2"))]
    dag = TaskDAG(ops)
    dag_file.write_text(json.dumps(dag.to_dict()))
    out2 = tmp_path / "s2.json"
    assert main(["plan", "spindle", "--dag", str(dag_file), "--devices", "4", "--devices-per-node", "2",
                 "--out", str(out2)]) == 0
    sched = json.loads(out2.read_text())
    from sgl.systems.data.spindle_sim import Schedule, ScheduledOp
    entries = [ScheduledOp(dag.index[o["name"]], tuple(o["devices"]), o["start_s"], o["end_s"]) for o in sched["ops"]]
    validate_schedule(dag, Schedule(entries, 4), 4, LinkModel(2))


def test_plan_spindle_errors(tmp_path, capsys):
    cyclic = tmp_path / "cyc.json"
    cyclic.write_text(json.dumps({"ops": [{"name": "x", "gpus": [1], "times": [1.0], "deps": ["y"]},
                                          {"name": "y", "gpus": [1], "times": [1.0], "deps": ["x"]}]}))
    assert main(["plan", "spindle", "--dag", str(cyclic), "--devices", "4"]) == 2
    assert "cycle" in capsys.readouterr().err
    assert main(["plan", "spindle", "--dag", "builtin:nope", "--devices", "4"]) == 2
    assert "builtin:mtmm" in capsys.readouterr().err
    assert main(["plan", "spindle", "--dag", str(tmp_path / "none.json"), "--devices", "4"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["plan", "spindle", "--dag", "builtin:mtmm", "--devices", "0"]) == 2
    assert "devices" in capsys.readouterr().err
