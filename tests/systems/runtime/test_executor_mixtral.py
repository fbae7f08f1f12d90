"""The executor on Hugging Face Mixtral and Qwen2-MoE (``arch="hf-mixtral"`` / ``"hf-qwen2-moe"``), experts
converted to SGL's MoELayer.

DDP, FSDP2 ZeRO-3, a 1F1B pipeline and TP (attention by the model's plan, experts replicated) on 2
gloo processes give the 1-process losses (routing is per token, so the split of the batch over
ranks changes nothing).
"""
from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("transformers")

from sgl.systems.moe import MoELayer  # noqa: E402
from sgl.systems.parallel import Plan, Strategy  # noqa: E402
from sgl.systems.runtime import ExecConfig, make_plan, run_plans, train_reference  # noqa: E402
from sgl.systems.runtime.models import MIXTRAL_EXPERTS, build_model, decoder_of  # noqa: E402

CFG = ExecConfig(model="tiny", arch="hf-mixtral", steps=3, global_bsz=8, chunks=2, lr=5e-2, seed=0)


def test_hf_mixtral_builds_converted_and_seeded():
    a, b = build_model(CFG), build_model(CFG)
    layers = decoder_of(a).layers
    assert all(isinstance(layer.mlp, MoELayer) for layer in layers)
    assert layers[0].mlp.cfg.num_experts == MIXTRAL_EXPERTS
    assert all((p == q).all() for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("arch", ["hf-mixtral", "hf-qwen2-moe"])
def test_two_process_plans_on_hf_moe_models_match_single_process_loss(arch):
    cfg = dataclasses.replace(CFG, arch=arch)
    reference = train_reference(cfg)
    assert max(reference) - min(reference) > 0.005
    named = {"ddp": (make_plan("dp", 2, cfg), cfg),
             "zero3": (make_plan("sdp", 2, cfg), cfg),
             "pp-1f1b": (make_plan("pp", 2, cfg), dataclasses.replace(cfg, schedule="1f1b")),
             # attention by the model's TP plan; the converted experts are replicated over the TP group
             "tp": (Plan(1, 2, 1, [4], 2, 8, [Strategy(1, 2, 1)] * 4), cfg)}
    results = run_plans([p for p, _ in named.values()], [c for _, c in named.values()], timeout=240,
                        start_method="fork")
    for name, reports in zip(named, results):
        for report in reports:
            assert report["losses"] == pytest.approx(reference, rel=0, abs=3e-5), name
