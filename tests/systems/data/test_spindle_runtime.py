"""Spindle runtime: wavefront, big-pipeline and even-split executions on 2 gloo processes equal one process."""
import pytest
import torch

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.data.spindle import SpindleConfig, SpindlePlanner
from sgl.systems.data.spindle_model import MultiModalModel, calibrate_curves, spindle_dag, synthetic_batch
from sgl.systems.data.spindle_runtime import (ExecPlan, SpindleRuntime, big_pipeline_plan, even_split_plan,
                                              row_blocks, spindle_exec_plan)

TASKS = (("vqa", ("vision", "text"), 3), ("asr", ("audio",), 4))
ROWS = 5  # odd: the two ranks of a data-parallel operator get 3 and 2 rows
#: encoders scale poorly, backbones well: the planner mixes 1- and 2-device lanes
CURVES = {"vqa.vision": ((1, 2), (1.0, 0.9)), "vqa.text": ((1, 2), (0.6, 0.55)), "asr.audio": ((1, 2), (1.2, 1.0)),
          "vqa.llm": ((1, 2), (2.0, 1.0)), "asr.llm": ((1, 2), (1.6, 0.8)),
          "vqa.head": ((1, 2), (0.1, 0.1)), "asr.head": ((1, 2), (0.1, 0.1))}


def _model():
    torch.manual_seed(0)
    return MultiModalModel(TASKS, hidden=8, query_tokens=2, vocab=16, text_len=6, image_size=8,
                           audio_len=64).double()


def _batch(model):
    return synthetic_batch(model, ROWS, seed=1, dtype=torch.float64)


def _plans(model, world):
    dag = spindle_dag(model, CURVES, ROWS)
    result = SpindlePlanner(dag, SpindleConfig(devices=world, devices_per_node=world)).plan()
    crossed = ExecPlan({"vqa.vision": (1,), "vqa.text": (0, 1), "vqa.llm": (1, 0), "vqa.head": (0,),
                        "asr.audio": (0,), "asr.llm": (0, 1), "asr.head": (1,)},
                       ["asr.audio", "vqa.text", "vqa.vision", "asr.llm", "vqa.llm", "asr.head", "vqa.head"], world)
    return {"spindle": spindle_exec_plan(dag, result, world), "big pipeline": big_pipeline_plan(model, world),
            "even split": even_split_plan(model, world), "crossed": crossed}


def _worker(rank, world):
    torch.set_num_threads(1)
    out = {}
    for name, plan in _plans(_model(), world).items():
        model = _model()
        loss = SpindleRuntime(model).step(plan, _batch(model))
        out[name] = (loss, {n: p.grad.clone() for n, p in model.named_parameters()}, plan.devices)
    return out


def test_wavefront_execution_equals_single_process():
    out = comm.spawn(_worker, 2, timeout=60)
    model = _model()
    ref_loss = model.loss(_batch(model))
    ref_loss.backward()
    ref = {n: p.grad for n, p in model.named_parameters()}
    # the planner's plan really places operators on one device and on both
    widths = {len(r) for r in out[0]["spindle"][2].values()}
    assert widths == {1, 2}, out[0]["spindle"][2]
    for name in out[0]:
        for rank in range(2):
            loss, grads, _ = out[rank][name]
            assert loss == pytest.approx(float(ref_loss.detach()), rel=1e-12), name
            for n, g in ref.items():
                torch.testing.assert_close(grads[n], g, rtol=1e-9, atol=1e-12, msg=f"{name}: {n}")


def test_single_process_plans_and_row_blocks():
    assert row_blocks(5, (1, 0)) == [(1, 0, 3), (0, 3, 5)]
    model = _model()
    loss = SpindleRuntime(model).step(big_pipeline_plan(model, 1), _batch(model))
    assert loss == pytest.approx(float(_model().loss(_batch(model)).detach()), rel=1e-12)


def test_bad_plans():
    model = _model()
    with pytest.raises(PlanError, match="plan is for 2 devices but the world has 1"):
        SpindleRuntime(model).step(big_pipeline_plan(model, 2), _batch(model))
    plan = big_pipeline_plan(model, 1)
    plan.devices["asr.llm"] = (0, 3)
    with pytest.raises(PlanError, match=r"\[3\] are outside the world"):
        plan.validate(model, 1)
    plan = big_pipeline_plan(model, 1)
    plan.order = list(reversed(plan.order))
    with pytest.raises(PlanError, match="before its input"):
        plan.validate(model, 1)
    with pytest.raises(PlanError, match="one device per task"):
        even_split_plan(model, 1)
    with pytest.raises(PlanError, match="no scaling curve"):
        spindle_dag(model, {}, ROWS)
    with pytest.raises(PlanError, match="unknown modality"):
        MultiModalModel((("t", ("smell",), 2),))


def test_calibrated_curves_cover_every_operator():
    model = MultiModalModel(TASKS, hidden=8, query_tokens=2, vocab=16, text_len=6, image_size=8, audio_len=64)
    curves = calibrate_curves(model, synthetic_batch(model, 4), (1, 2), repeats=1)
    assert set(curves) == set(model.op_names())
    assert all(g == (1, 2) and min(t) > 0 for g, t in curves.values())
