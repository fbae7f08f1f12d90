"""`sgl condense` and `sgl train --model mlp --distill-from`: the acceleration commands."""
import json

import pytest

from sgl.cli import main


def test_condense_then_train_on_the_condensed_graph(tmp_path, capsys):
    out = tmp_path / "karate4.pt"
    assert main(["condense", "--dataset", "karate", "--nodes", "4", "--method", "kmeans", "--out", str(out)]) == 0
    assert "4 nodes" in capsys.readouterr().out
    record = tmp_path / "run.json"
    assert main(["train", "--model", "gcn", "--dataset", f"file:{out}", "--seeds", "1", "--epochs", "3",
                 "--no-progress", "--out", str(record)]) == 0
    data = json.loads(record.read_text())
    assert data["condensed_from"]["dataset"] == "karate" and 0.0 <= data["test_acc"]["mean"] <= 1.0


def test_condense_size_below_the_classes_is_an_error(tmp_path, capsys):
    assert main(["condense", "--dataset", "karate", "--nodes", "1", "--method", "kmeans",
                 "--out", str(tmp_path / "x.pt")]) == 2
    assert "at least one node" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_distill_from_a_teacher(tmp_path, capsys):
    teacher = tmp_path / "teacher.json"
    assert main(["train", "--model", "gcn", "--dataset", "karate", "--seeds", "1", "--epochs", "3", "--no-progress",
                 "--out", str(teacher)]) == 0
    record = tmp_path / "student.json"
    assert main(["train", "--model", "mlp", "--distill-from", str(teacher), "--dataset", "karate", "--seeds", "1",
                 "--epochs", "3", "--distill-hard-weight", "0.5", "--no-progress", "--out", str(record)]) == 0
    data = json.loads(record.read_text())
    assert data["config"]["distill"] == {"teacher": str(teacher), "hard_weight": 0.5, "temperature": 1.0,
                                         "inductive": 0.0}
    assert "teacher_test_acc" in data and "student_latency_us_per_node" in data


@pytest.mark.parametrize("argv, message", [
    (["--model", "sgc", "--distill-from", "gamlp"], "--model mlp"),
    (["--model", "mlp", "--distill-temperature", "2"], "need --distill-from"),
    (["--task", "link", "--model", "gcn", "--distill-from", "sgc"], "--distill-from"),
])
def test_distill_flag_errors(argv, message, capsys):
    assert main(["train", "--dataset", "karate", "--seeds", "1", "--epochs", "1", "--no-progress", *argv]) == 2
    assert message in capsys.readouterr().err
