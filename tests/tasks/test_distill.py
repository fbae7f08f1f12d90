import json

import pytest
import torch
from torch.overrides import TorchFunctionMode

from sgl.errors import ConfigError
from sgl.models import build_model, model_config
from sgl.tasks import RunConfig, TrainConfig, run
from sgl.tasks.distill import DistillConfig, distillation_loss, fit_student, inductive_split


@pytest.fixture
def graph(homophilous_graph):
    return homophilous_graph


class _Recorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.pointers = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for value in list(args) + list((kwargs or {}).values()):
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(t, torch.Tensor) and t.numel():
                    self.pointers.add(t.data_ptr())
        return func(*args, **(kwargs or {}))


def test_kl_is_zero_for_equal_logits():
    logits = torch.randn(5, 3)
    assert float(distillation_loss(logits, logits)) == pytest.approx(0.0, abs=1e-6)
    assert float(distillation_loss(logits, torch.randn(5, 3), temperature=2.0)) > 0


def test_student_follows_the_teacher_and_inference_touches_no_graph_tensor(graph):
    teacher_logits = torch.nn.functional.one_hot(graph.y, 3).float() * 5  # a perfect teacher
    student = build_model("mlp", graph.num_features, 3, model_config("mlp", hidden=32))
    result = fit_student(student, student.precompute(graph), graph, teacher_logits,
                         TrainConfig(lr=0.01, weight_decay=0.0, epochs=60, progress=False), seed=0)
    majority = float((graph.y == graph.y.mode().values).float().mean())
    assert result["test_acc"] > majority + 0.2
    student.eval()
    x = graph.x[graph.test_mask].clone()
    held = (graph.indptr, graph.indices, graph.edge_index)  # kept alive: their memory cannot be reused meanwhile
    graph_tensors = {t.data_ptr() for t in held}
    with torch.no_grad(), _Recorder() as recorder:
        student(student.inputs(x))
    assert recorder.pointers and not recorder.pointers & graph_tensors


def test_inductive_split_hides_test_nodes(graph):
    observed_graph, observed, hidden = inductive_split(graph, 0.2, seed=0)
    test = graph.test_mask.nonzero().flatten()
    assert hidden.numel() == round(0.2 * test.numel()) and bool(torch.isin(hidden, test).all())
    assert not bool(torch.isin(hidden, observed).any())
    assert observed_graph.num_nodes == graph.num_nodes - hidden.numel()


def test_run_records_teacher_student_and_latency(tmp_path):
    teacher = tmp_path / "sgc.json"  # a teacher's run record: its config (5 epochs) is replayed
    teacher.write_text(json.dumps({"config": {"model": "sgc", "dataset": "karate", "train": {"epochs": 5}}}))
    config = RunConfig.from_dict({"model": "mlp", "dataset": "karate", "seeds": 1, "train": {"epochs": 5},
                                  "distill": {"teacher": str(teacher), "inductive": 0.25}})
    assert RunConfig.from_dict(config.to_dict()) == config
    record = run(config, progress=False)
    first = record["runs"][0]
    for key in ("teacher_test_acc", "ind_test_acc", "teacher_ind_test_acc", "student_latency_us_per_node",
                "teacher_latency_us_per_node"):
        assert key in first
    assert record["config"]["distill"]["teacher"] == str(teacher) and record["teacher"]["train"]["epochs"] == 5


def test_bad_teachers_and_students(tmp_path):
    record = tmp_path / "teacher.json"
    record.write_text(json.dumps({"config": {"model": "sgc", "dataset": "cora"}}))
    with pytest.raises(ConfigError, match="same dataset"):
        run(RunConfig.from_dict({"model": "mlp", "dataset": "karate", "seeds": 1,
                                 "distill": {"teacher": str(record)}}), progress=False)
    with pytest.raises(ConfigError, match="--model mlp"):
        RunConfig.from_dict({"model": "sgc", "dataset": "karate", "distill": {"teacher": "gamlp"}})
    with pytest.raises(ConfigError, match="graph model"):
        run(RunConfig.from_dict({"model": "mlp", "dataset": "karate", "seeds": 1,
                                 "distill": {"teacher": "mlp"}}), progress=False)
    with pytest.raises(ConfigError, match="distill-hard-weight"):
        DistillConfig("sgc", hard_weight=1.5)
