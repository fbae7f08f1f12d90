"""Spindle runtime with a Hugging Face Llama LM tower: the executed wavefront schedule on 2 gloo processes
equals the sequential single-process step (loss and every gradient), as with the TinyLM-style backbone."""
import pytest
import torch

pytest.importorskip("transformers")
from transformers import LlamaModel  # noqa: E402  (imported once here: the forked ranks inherit it)

from sgl import comm  # noqa: E402
from sgl.errors import PlanError  # noqa: E402
from sgl.systems.data.spindle import SpindleConfig, SpindlePlanner  # noqa: E402
from sgl.systems.data.spindle_hf import LlamaTower  # noqa: E402
from sgl.systems.data.spindle_model import MultiModalModel, spindle_dag, synthetic_batch  # noqa: E402
from sgl.systems.data.spindle_runtime import SpindleRuntime, big_pipeline_plan, spindle_exec_plan  # noqa: E402

TASKS = (("vqa", ("vision", "text"), 3), ("asr", ("audio",), 4))
ROWS = 5  # odd: the two ranks of a data-parallel operator get 3 and 2 rows
#: encoders scale poorly, backbones well: the planner mixes 1- and 2-device lanes
CURVES = {"vqa.vision": ((1, 2), (1.0, 0.9)), "vqa.text": ((1, 2), (0.6, 0.55)), "asr.audio": ((1, 2), (1.2, 1.0)),
          "vqa.llm": ((1, 2), (2.0, 1.0)), "asr.llm": ((1, 2), (1.6, 0.8)),
          "vqa.head": ((1, 2), (0.1, 0.1)), "asr.head": ((1, 2), (0.1, 0.1))}


def _model():
    torch.manual_seed(0)
    return MultiModalModel(TASKS, hidden=8, query_tokens=2, vocab=16, text_len=6, image_size=8, audio_len=64,
                           arch="hf-llama").double()


def _batch(model):
    return synthetic_batch(model, ROWS, seed=1, dtype=torch.float64)


def _worker(rank, world):
    torch.set_num_threads(1)
    model = _model()
    dag = spindle_dag(model, CURVES, ROWS)
    plans = {"spindle": spindle_exec_plan(dag, SpindlePlanner(dag, SpindleConfig(devices=world,
                                                                                devices_per_node=world)).plan(), world),
             "big pipeline": big_pipeline_plan(model, world)}
    out = {}
    for name, plan in plans.items():
        model = _model()
        loss = SpindleRuntime(model).step(plan, _batch(model))
        out[name] = (loss, {n: p.grad.clone() for n, p in model.named_parameters()}, plan.devices)
    return out


def test_hf_llama_tower_wavefront_equals_single_process():
    out = comm.spawn(_worker, 2, timeout=90, start_method="fork")
    model = _model()
    assert isinstance(model.module("vqa.llm"), LlamaTower)
    ref_loss = model.loss(_batch(model))
    ref_loss.backward()
    ref = {n: p.grad for n, p in model.named_parameters()}
    widths = {len(r) for r in out[0]["spindle"][2].values()}
    assert widths == {1, 2}, out[0]["spindle"][2]  # the plan really mixes 1- and 2-device operators
    for name in out[0]:
        for rank in range(2):
            loss, grads, _ = out[rank][name]
            assert loss == pytest.approx(float(ref_loss.detach()), rel=1e-12), name
            for n, g in ref.items():
                torch.testing.assert_close(grads[n], g, rtol=1e-9, atol=1e-12, msg=f"{name}: {n}")


def test_tower_is_the_llama_model_on_lifted_features():
    torch.manual_seed(0)
    tower = LlamaTower(16, 2, 3, 2).double()
    lm = LlamaModel(tower.config).double()
    missing = lm.load_state_dict({k: v for k, v in tower.state_dict().items() if not k.startswith("lift")},
                                 strict=False).missing_keys
    assert missing == ["embed_tokens.weight"]  # the tower takes lifted features, not token ids
    xs = [torch.randn(4, 16, dtype=torch.float64) for _ in range(2)]
    h = torch.cat([lift(x).view(4, 3, -1) for lift, x in zip(tower.lift, xs)], 1)
    torch.testing.assert_close(tower(*xs), lm(inputs_embeds=h).last_hidden_state.mean(1), rtol=1e-12, atol=1e-12)


def test_unknown_backbone_arch():
    with pytest.raises(PlanError, match="unknown backbone arch 'hf-mixtral'"):
        MultiModalModel(TASKS, arch="hf-mixtral")


def test_measure_refuses_an_unknown_arch_before_spawning():
    from sgl.systems.data.spindle_measure import measure_spindle

    with pytest.raises(PlanError, match="unknown backbone arch 'gpt2'"):
        measure_spindle(arch="gpt2")
