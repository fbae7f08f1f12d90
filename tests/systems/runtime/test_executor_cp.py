"""Ring context parallelism, Ulysses and Megatron sequence parallelism in the executor on HF Llama.

One forked 2-process world runs every variant: the executor's losses over two Adam steps and one
step's gradients, each against the single-process model on the whole batch.  The 4-process
combinations with data parallelism / ZeRO-3 are behind ``SGL_SLOW_TESTS``.
"""
import dataclasses
import os

import pytest
import torch

pytest.importorskip("transformers")

from sgl import comm  # noqa: E402
from sgl.errors import PlanError  # noqa: E402
from sgl.systems.parallel import Plan, Strategy  # noqa: E402
from sgl.systems.runtime import ExecConfig, batch_for_step, plan_worker, run_plans, train_reference  # noqa: E402
from sgl.systems.runtime.cp import flat_plan, sequence_setup, shard_tokens  # noqa: E402
from sgl.systems.runtime import lm_loss  # noqa: E402
from sgl.systems.runtime.models import build_model  # noqa: E402
from sgl.systems.runtime.parallelize import parallelize  # noqa: E402

CFG = ExecConfig(model="tiny", arch="hf-llama", steps=2, global_bsz=4, chunks=1, lr=1e-2, seed=0)
S = Strategy
RING = Plan(1, 2, 1, [4], 1, 4, [S(1, 1, 1)] * 4, cp_sizes=[2] * 4, vcp=2)
ULYSSES = Plan(1, 2, 1, [4], 1, 4, [S(1, 2, 1, sp=True)] * 4, vsp=True)
MEGATRON_SP = Plan(1, 2, 1, [4], 1, 4, [S(1, 2, 1)] * 4)
SP_CFG = dataclasses.replace(CFG, sequence_parallel=True)
PLANS = {"ring": (RING, CFG), "ulysses": (ULYSSES, CFG), "megatron-sp": (MEGATRON_SP, SP_CFG)}
# losses only: CP under ZeRO-3 (FSDP2 over the dp x cp ranks), Megatron SP with vocabulary TP
MORE = {"ring+zero3": (Plan(1, 2, 1, [4], 1, 4, [S(1, 1, 1, sdp=True)] * 4, cp_sizes=[2] * 4, vcp=2, embed_sdp=True),
                       CFG),
        "megatron-sp+vtp": (Plan(1, 2, 1, [4], 1, 4, [S(1, 2, 1)] * 4, vtp=2), SP_CFG)}


def _grads(rank, world, name):
    """Full (gathered) gradients of one step of plan ``name`` on the first batch, and layer 0's output shape."""
    plan, cfg = PLANS[name]
    model = build_model(cfg)
    device = torch.device("cpu")
    tokens = batch_for_step(cfg, 0, device)
    shapes = []
    model.model.layers[0].register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    if name == "megatron-sp":
        setup = parallelize(model, plan, rank, world, device, sequence_parallel=True)
        lm_loss(model(tokens).logits, tokens).backward()
    else:
        seq = sequence_setup(model, plan, world, device)
        setup = parallelize(model, flat_plan(plan, world), rank, world, device)
        seq.loss(setup.module, seq.local_batch(tokens)).backward()
    grads = {n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).clone()
             for n, p in model.named_parameters()}
    return grads, shapes[0]


def _all(rank, world):
    out = {name: plan_worker(rank, world, plan.to_galvatron(), dataclasses.asdict(cfg))
           for name, (plan, cfg) in {**PLANS, **MORE}.items()}
    out["grads"] = {name: _grads(rank, world, name) for name in PLANS}
    return out


def _reference_grads(cfg):
    model = build_model(cfg)
    tokens = batch_for_step(cfg, 0)
    lm_loss(model(tokens).logits, tokens).backward()
    return {n: p.grad for n, p in model.named_parameters()}


@pytest.fixture(scope="module")
def runs():
    return comm.spawn(_all, 2, timeout=240, start_method="fork")


@pytest.fixture(scope="module")
def reference():
    return train_reference(CFG), _reference_grads(CFG)


@pytest.mark.parametrize("name", list(PLANS) + list(MORE))
def test_sequence_split_plans_match_the_single_process_loss(runs, reference, name):
    losses = reference[0]
    assert max(losses) - min(losses) > 0.005
    for report in runs:
        assert report[name]["losses"] == pytest.approx(losses, rel=0, abs=3e-5), name


@pytest.mark.parametrize("name", list(PLANS))
def test_sequence_split_gradients_equal_the_single_process_gradients(runs, reference, name):
    ref = reference[1]
    for report in runs:
        got, shape = report["grads"][name]
        assert shape == (4, 16, 64)          # each rank's hidden states hold half of every sequence
        assert set(got) == set(ref)
        for key in ref:
            assert torch.allclose(got[key], ref[key], atol=2e-6, rtol=1e-4), (name, key)


def test_shard_tokens_keeps_global_positions_and_refuses_uneven_lengths():
    tokens = torch.arange(8).view(1, 8)
    local, pos = shard_tokens(tokens, 1, 2)
    assert local.tolist() == [[4, 5, 6, 7]] and pos.tolist() == [[4, 5, 6, 7]]
    with pytest.raises(PlanError, match="sequence length 8 is not divisible by the sequence-parallel degree 3"):
        shard_tokens(tokens, 0, 3)


@pytest.mark.parametrize("plan,cfg,match", [
    (Plan(1, 8, 1, [4], 1, 8, [S(1, 8, 1, sp=True)] * 4, vsp=True), CFG,
     "num_heads=4 is not divisible by the degree 8"),
    (RING, dataclasses.replace(CFG, arch="tiny"), "arch='hf-llama'"),
    (Plan(1, 2, 1, [4], 1, 4, [S(1, 1, 2)] * 4), SP_CFG, "shards Megatron-TP layers; the plan's layers have tp=1"),
    (MEGATRON_SP, dataclasses.replace(SP_CFG, arch="tiny"), "Megatron sequence parallelism runs on Hugging Face"),
    (Plan(1, 2, 1, [4], 1, 4, [S(1, 1, 1)] * 2 + [S(1, 1, 2)] * 2, cp_sizes=[2, 2, 1, 1]), CFG,
     "one cp degree for all layers"),
    (Plan(1, 4, 1, [4], 1, 4, [S(1, 2, 1)] * 4, cp_sizes=[2] * 4), CFG, "together with tensor"),
    (Plan(1, 2, 1, [4], 1, 4, [S(1, 2, 1, sp=True)] * 2 + [S(1, 2, 1)] * 2), CFG, "use_sp must be the same"),
    (Plan(1, 2, 1, [4], 1, 4, [S(1, 1, 1)] * 4, cp_sizes=[2] * 4), CFG, "vcp=1 must be the layers' cp degree 2"),
])
def test_sequence_plans_the_executor_cannot_run_raise_plan_errors(plan, cfg, match):
    with pytest.raises(PlanError, match=match):
        run_plans([plan], cfg)


def test_sequence_length_the_degree_does_not_divide_is_refused(monkeypatch):
    from sgl.systems.parallel import model as pm
    from sgl.systems.runtime.plans import check_plan

    odd = dataclasses.replace(pm.get_model_config("tiny"), seq_length=33)
    monkeypatch.setattr(ExecConfig, "model_config", lambda self: odd)
    with pytest.raises(PlanError, match="sequence length 33 is not divisible by the degree 2"):
        check_plan(RING, 2, CFG)
    with pytest.raises(PlanError, match="pipeline parallelism pp=2"):
        check_plan(Plan(1, 4, 2, [2, 2], 1, 4, [S(2, 1, 1)] * 4, cp_sizes=[2] * 4, vcp=2), 4, CFG)
    with pytest.raises(PlanError, match="sequence length 33 is not divisible by tp=2"):
        check_plan(MEGATRON_SP, 2, SP_CFG)


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"),
                    reason="4 processes (~30 s on 2 busy cores); set SGL_SLOW_TESTS=1 to run")
def test_four_process_sequence_plans_with_data_parallelism_match_single_process_loss():
    cfg = dataclasses.replace(CFG, global_bsz=8)
    reference = train_reference(cfg)
    plans = {
        "ring cp2 x dp2": (Plan(1, 4, 1, [4], 1, 8, [S(1, 1, 2)] * 4, cp_sizes=[2] * 4, vcp=2), cfg),
        "ulysses sp2 x zero3 dp2": (Plan(1, 4, 1, [4], 1, 8, [S(1, 2, 2, sdp=True, sp=True)] * 4, vsp=True), cfg),
        "ulysses sp2 x dp2 strided": (Plan(1, 4, 1, [4], 1, 8, [S(1, 2, 2, tp_consec=False, sp=True)] * 4), cfg),
        "megatron sp tp2 x dp2": (Plan(1, 4, 1, [4], 1, 8, [S(1, 2, 2)] * 4), dataclasses.replace(cfg,
                                                                                          sequence_parallel=True)),
    }
    out = run_plans([p for p, _ in plans.values()], [c for _, c in plans.values()], timeout=500, start_method="fork")
    for name, reports in zip(plans, out):
        assert len(reports) == 4
        for report in reports:
            assert report["losses"] == pytest.approx(reference, rel=0, abs=3e-5), name


@pytest.mark.parametrize("kind", ["ring", "ulysses"])
def test_swapped_attention_equals_sdpa_on_one_process_with_grouped_query_heads(kind):
    from transformers import LlamaConfig, LlamaForCausalLM

    from sgl.systems.runtime.cp import enable_sequence_attention

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                         attn_implementation="sdpa"))
    tokens = torch.randint(0, 256, (3, 16), generator=torch.Generator().manual_seed(0))
    ref = model(tokens).logits
    enable_sequence_attention(model, kind, None, 1)
    assert model.config._attn_implementation == f"sgl_{kind}"
    assert torch.allclose(model(tokens).logits, ref, atol=1e-5)
