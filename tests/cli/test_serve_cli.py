"""``sgl serve bench|students`` and ``sgl plan serving`` through ``sgl.cli.main.main``."""
import json
import re
import os
from pathlib import Path

import pytest

from sgl.cli.main import main


def _data():
    root = os.environ.get("SGL_TEST_DATA")
    if not root or not (Path(root) / "wikitext2" / "train.txt").is_file():
        pytest.skip("SGL_TEST_DATA is not set to the shared datasets folder")
    return root


def test_method_names_match_the_library():
    from sgl.cli.serve import METHOD_NAMES
    from sgl.systems.serving.kv import METHODS

    assert tuple(METHOD_NAMES) == tuple(METHODS)


def test_serve_bench_small(tmp_path, capsys):
    root = _data()
    out = tmp_path / "kv.json"
    rc = main(["serve", "bench", "--method", "pqcache", "streaming", "--budget", "0.1", "1.0", "--root", root,
               "--context", "200", "--steps", "4", "--contexts", "1", "--train-steps", "5", "--train-seq-len", "64",
               "--layers", "1", "--hidden", "32", "--heads", "2", "--kv-heads", "1", "--vocab-size", "300",
               "--documents", "20", "--bits", "4", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "pqcache" in text and "streaming" in text
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4
    full = [r for r in rows if r["budget"] == 1.0]
    assert all(r["agreement"] == 1.0 and r["output_error"] < 1e-5 for r in full)
    pq = next(r for r in rows if r["method"] == "pqcache" and r["budget"] == 0.1)
    assert pq["bytes_per_step_no_cache"] > 0 and 0 <= pq["lfu_hit_rate"] <= 1 and "slow-tier KV" in text


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "budget must be a number in (0.0, 1.0]"),
    (["--budget", "1.5"], "budget must be a number in (0.0, 1.0]"),
    (["--subvectors", "3"], "num_subvectors=3 does not divide the head dimension"),
    (["--cache-blocks", "-1"], "--cache-blocks must be an integer >= 0"),
    (["--recent-ratio", "2"], "--recent-ratio must be"),
])
def test_serve_bench_bad_input(argv, message, tmp_path, capsys):
    rc = main(["serve", "bench", "--root", str(tmp_path), "--hidden", "32", "--heads", "2", "--kv-heads", "1"]
              + argv)
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_serve_bench_unwritable_out(unwritable, tmp_path, capsys):
    rc = main(["serve", "bench", "--root", str(tmp_path), "--out", os.path.join(unwritable, "kv.json")])
    assert rc == 2 and "--out" in capsys.readouterr().err


def test_serve_students_small(tmp_path, capsys):
    root = _data()
    rc = main(["serve", "students", "--root", root, "--students", "2", "--teacher-layers", "2", "--hidden", "32",
               "--heads", "2", "--vocab-size", "400", "--max-len", "24", "--sentences", "400", "--teacher-steps",
               "10", "--student-steps", "5", "--requests", "30", "--out", str(tmp_path / "s.json")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "teacher accuracy" in text and "burst students+pruning" in text
    rec = json.loads((tmp_path / "s.json").read_text())
    assert set(rec["students_accuracy"]) == {"1", "2"}


def _tables(tmp_path):
    gpus = {"gpus": [{"name": "L4", "price_per_hour": 0.8, "available": 4},
                     {"name": "A100", "price_per_hour": 3.7, "available": 2}],
            "configs": [{"name": "L4x1", "gpus": {"L4": 1}, "throughput": {"chat": 3.0}},
                        {"name": "A100x1", "gpus": {"A100": 1}, "throughput": {"chat": 9.0, "long": 1.0}}]}
    work = {"workloads": [{"name": "chat", "requests": 5000}, {"name": "long", "requests": 200}]}
    (tmp_path / "g.json").write_text(json.dumps(gpus))
    (tmp_path / "w.json").write_text(json.dumps(work))
    return str(tmp_path / "g.json"), str(tmp_path / "w.json")


def test_plan_serving(tmp_path, capsys):
    g, w = _tables(tmp_path)
    rc = main(["plan", "serving", "--gpus", g, "--workload", w, "--budget", "6", "--out", str(tmp_path / "p.json")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "fleet:" in text and "best homogeneous" in text
    plan = json.loads((tmp_path / "p.json").read_text())["plan"]
    assert plan["price_per_hour"] <= 6 and plan["replicas"]["A100x1"] >= 1
    assert main(["plan", "serving", "--gpus", g, "--workload", w, "--makespan", "3600"]) == 0


def test_plan_serving_errors(tmp_path, capsys):
    g, w = _tables(tmp_path)
    assert main(["plan", "serving", "--gpus", g, "--workload", w, "--budget", "2"]) == 2
    assert "cheapest feasible budget is 3.7/h" in capsys.readouterr().err
    assert main(["plan", "serving", "--gpus", str(tmp_path / "none.json"), "--workload", w, "--budget", "5"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["plan", "serving", "--workload", w, "--budget", "5"]) == 2
    assert "--gpus" in capsys.readouterr().err


@pytest.mark.parametrize("mutate,message", [
    # the case a user hit: 'int' object is not iterable, with no field named
    (lambda g, w: g.__setitem__("gpus", 4), r'"gpus" in the --gpus file must be a list of objects, got int'),
    (lambda g, w: g["configs"][1].__setitem__("gpus", 1), r"configs\[1\] \('A100x1'\)\.gpus must be an object, got int"),
    (lambda g, w: g["gpus"][0].pop("price_per_hour"), r'gpus\[0\] \(\'L4\'\) has no "price_per_hour" field'),
    (lambda g, w: g["configs"].__setitem__(0, [1, 2]), r'"configs" in the --gpus file must be a list of objects, '
                                                       r"got a list holding a list"),
    (lambda g, w: w.pop("workloads"), r'the --workload file needs a top-level "workloads" list'),
    (lambda g, w: w["workloads"][1].__setitem__("requests", "many"), r"workloads\[1\] \('long'\)\.requests must be "
                                                                      r"a number, got a string 'many'"),
])
def test_plan_serving_names_the_malformed_field(mutate, message, tmp_path, capsys):
    g, w = _tables(tmp_path)
    gpus, work = json.loads(Path(g).read_text()), json.loads(Path(w).read_text())
    mutate(gpus, work)
    Path(g).write_text(json.dumps(gpus))
    Path(w).write_text(json.dumps(work))
    assert main(["plan", "serving", "--gpus", g, "--workload", w, "--budget", "5"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert "expected {" in err  # the expected shape is shown
