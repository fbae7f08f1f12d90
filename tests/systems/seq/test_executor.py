"""The varlen step executor on 2 gloo processes equals a single-process step (loss and gradients)."""
import os

import numpy as np
import pytest
import torch

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.parallel import get_model_config
from sgl.systems.runtime.tiny_lm import TinyLM
from sgl.systems.seq import FlexSPPlanner, SeqStrategy, flexsp_cost_model
from sgl.systems.seq.exec_plan import as_exec_plan
from sgl.systems.seq.executor import VarlenStepExecutor, single_process_step
from sgl.systems.seq.plan import GroupWork, StepPlan

LENGTHS = [9, 4, 6, 3, 7, 5]


def _model():
    torch.manual_seed(0)
    return TinyLM(get_model_config("tiny")).double()


def _docs(lengths=LENGTHS, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g) for n in lengths]


def _mixed(strategy):
    """Phase 0: one degree-2 group; phase 1: two degree-1 groups (mixed SP degrees in one step)."""
    return {"devices": 2, "phases": [
        [{"strategy": strategy, "degree": 2, "sequence_ids": [[0, 1], [2]]}],
        [{"strategy": strategy, "degree": 1, "sequence_ids": [[3], [5]]},
         {"strategy": strategy, "degree": 1, "sequence_ids": [[4]]}]]}


def _flexsp_plan():
    model = flexsp_cost_model(2, 80)
    lengths = np.array(LENGTHS) * 1000                 # the planner's view: long enough to want SP
    plan = FlexSPPlanner(model.sp_pool(), 2, time_limit=0.5).plan(lengths)
    plan.validate(lengths, 2)
    return plan


def _sgd_two_steps(executor_or_none, plans, docs):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ex = VarlenStepExecutor(model, opt) if executor_or_none else None
    losses = []
    for plan in plans:
        if ex is None:
            losses.append(single_process_step(model, docs))
            opt.step()
        else:
            losses.append(ex.step(plan, docs).loss)
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


def _worker(rank, world):
    torch.set_num_threads(1)
    docs = _docs()
    out = {}
    for strategy in ("ulysses", "ring"):
        model = _model()
        res = VarlenStepExecutor(model).step(_mixed(strategy), docs)
        out[strategy] = (res.loss, {n: p.grad.clone() for n, p in model.named_parameters()})
    model = _model()
    res = VarlenStepExecutor(model).step(_flexsp_plan(), docs)
    out["flexsp"] = (res.loss, {n: p.grad.clone() for n, p in model.named_parameters()})
    out["switch"] = _sgd_two_steps(True, [_mixed("ulysses"), _mixed("ring")], docs)
    four = {"phases": [[{"strategy": "ulysses", "degree": 4, "sequence_ids": [[0, 1, 2, 3, 4, 5]]}]]}
    try:
        VarlenStepExecutor(_model()).step(four, docs)
        out["mismatch"] = None
    except PlanError as exc:
        out["mismatch"] = str(exc)
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return comm.spawn(_worker, 2, timeout=120)


@pytest.fixture(scope="module")
def reference():
    model = _model()
    loss = single_process_step(model, _docs())
    return loss, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("case", ["ulysses", "ring", "flexsp"])
def test_two_processes_equal_single_process(two_ranks, reference, case):
    ref_loss, ref_grads = reference
    for rank in range(2):
        loss, grads = two_ranks[rank][case]
        assert loss == pytest.approx(ref_loss, abs=1e-12)
        for name, g in ref_grads.items():
            assert torch.allclose(grads[name], g, atol=1e-10), (case, rank, name)


def test_strategy_switch_between_steps_equals_single_process(two_ranks):
    ref_losses, ref_params = _sgd_two_steps(None, [None, None], _docs())
    assert ref_losses[0] != pytest.approx(ref_losses[1])          # the update changed the model
    for rank in range(2):
        losses, params = two_ranks[rank]["switch"]
        assert losses == pytest.approx(ref_losses, abs=1e-12)
        for name, p in ref_params.items():
            assert torch.allclose(params[name], p, atol=1e-10), name


def test_plan_for_more_processes_is_refused_on_every_rank(two_ranks):
    for rank in range(2):
        assert "needs 4 devices but 2 processes" in two_ranks[rank]["mismatch"]


def test_wrong_normalisation_would_be_caught(reference):
    # the check can fail: a per-document mean differs from the global token mean
    docs = _docs()
    model = _model()
    per_doc = np.mean([single_process_step(model, [d]) for d in docs])
    assert abs(per_doc - reference[0]) > 1e-6


def test_single_process_executor_on_planner_plans():
    """FlexSP / Hydraulis / mesh / switching StepPlans convert; degree-1 groups run in one process."""
    from sgl.systems.seq import DynamicMeshPlanner, HydraulisPlanner, SwitchingPlanner
    model = flexsp_cost_model(2, 80)
    lengths = np.array(LENGTHS) * 1000
    hyd = HydraulisPlanner(model.sp_pool(), 2)
    hyd.build_replicas(lengths, len(lengths))
    plans = {"flexsp": _flexsp_plan(), "hydraulis": hyd.plan(lengths),
             "mesh": DynamicMeshPlanner(model, 2, groups="best").plan(lengths),
             "switch": SwitchingPlanner(model, 2, pool=model.sp_pool() + model.cp_pool()).plan([lengths]).plans[0]}
    for name, plan in plans.items():
        ep = as_exec_plan(plan, 2)
        assert ep.sequence_ids() == list(range(len(LENGTHS))), name
        assert ep.predicted_ms == pytest.approx(plan.time)
    cost = flexsp_cost_model(1, 80).strategy_cost(SeqStrategy())
    one = StepPlan("dp", [[GroupWork(cost, [np.array([0, 2]), np.array([1])], np.array(LENGTHS[:3]))]])
    docs = _docs(LENGTHS[:3])
    model_a, model_b = _model(), _model()
    res = VarlenStepExecutor(model_a).step(one, docs)
    assert res.loss == pytest.approx(single_process_step(model_b, docs), abs=1e-12)
    assert res.seconds > 0 and res.tokens == sum(LENGTHS[:3]) - 3


@pytest.mark.parametrize("plan, devices, message", [
    ({"devices": 4, "phases": [[{"strategy": "ulysses", "degree": 2, "sequence_ids": [[0]]}]]}, 2, "is for 4 devices"),
    ({"phases": [[{"strategy": "ring", "degree": 2, "devices": 3, "sequence_ids": [[0]]}]]}, 2, "does not divide"),
    ({"phases": [[{"strategy": "zigzag", "degree": 2, "sequence_ids": [[0]]}]]}, 2, "unknown strategy"),
    ({"phases": [[{"strategy": "ring", "degree": 2, "ranks": [0], "sequence_ids": [[0]]}]]}, 2, "distinct ranks"),
    ({"phases": [[{"strategy": "tp2-pp1-sp1-z3", "devices": 2, "sequence_ids": [[0]]}]]}, 2, "tp = pp = 1"),
    ({"phases": [[{"strategy": "ulysses", "degree": 1, "sequence_ids": [[0, 1]]},
                  {"strategy": "ulysses", "degree": 1, "sequence_ids": [[1]]}]]}, 2, "more than once"),
    ({"phases": [[{"strategy": "ulysses", "degree": 2, "sequence_ids": [[0]]}]]}, 1, "needs 2 devices but 1"),
    ({"steps": []}, 2, "needs 'phases'"),
])
def test_bad_plans_raise(plan, devices, message):
    with pytest.raises(PlanError, match=message):
        as_exec_plan(plan, devices)


def test_bad_sequences_raise():
    ex = VarlenStepExecutor(_model())
    plan = {"phases": [[{"strategy": "ulysses", "degree": 1, "sequence_ids": [[0, 7]]}]]}
    with pytest.raises(PlanError, match="names sequence 7"):
        ex.step(plan, _docs())
    with pytest.raises(PlanError, match="1-D integer token tensor"):
        ex.step({"phases": [[{"degree": 1, "sequence_ids": [[0]]}]]}, [torch.zeros(3)])
    with pytest.raises(PlanError, match="no next-token target"):
        ex.step({"phases": [[{"degree": 1, "sequence_ids": [[0]]}]]}, [torch.tensor([3])])


def _worker4(rank, world):
    torch.set_num_threads(1)
    docs = _docs()
    plan = {"phases": [[{"strategy": "ring", "degree": 4, "sequence_ids": [[0, 1]]}],
                       [{"strategy": "ulysses", "degree": 2, "sequence_ids": [[2, 3]]},
                        {"strategy": "ring", "degree": 1, "sequence_ids": [[4]]},
                        {"strategy": "ulysses", "degree": 1, "sequence_ids": [[5]]}]]}
    model = _model()
    res = VarlenStepExecutor(model).step(plan, docs)
    return res.loss, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="4 processes: set SGL_SLOW_TESTS=1")
def test_four_processes_mixed_degrees(reference):
    ref_loss, ref_grads = reference
    for loss, grads in comm.spawn(_worker4, 4, timeout=300):
        assert loss == pytest.approx(ref_loss, abs=1e-12)
        for name, g in ref_grads.items():
            assert torch.allclose(grads[name], g, atol=1e-10), name


def test_document_attention_equals_dense_varlen_forward_and_backward():
    from sgl.systems.seq.doc_attention import document_attention, length_buckets
    from sgl.systems.seq.varlen import cu_seqlens, varlen_attention

    g = torch.Generator().manual_seed(3)
    lengths = [1, 7, 130, 3, 200, 150, 2, 64]
    cu = cu_seqlens(lengths)
    q, k, v = (torch.randn(sum(lengths), 2, 8, dtype=torch.float64, generator=g, requires_grad=True)
               for _ in range(3))
    dy = torch.randn(sum(lengths), 2, 8, dtype=torch.float64, generator=g)
    ours = torch.autograd.grad((document_attention(q, k, v, cu) * dy).sum(), (q, k, v))
    dense = torch.autograd.grad((varlen_attention(q, k, v, cu) * dy).sum(), (q, k, v))
    for a, b in zip(ours, dense):
        assert torch.allclose(a, b, atol=1e-10)
    buckets = [sorted(b.tolist()) for b in length_buckets(torch.tensor(lengths))]
    assert buckets == [[0, 1, 3, 6, 7], [2, 4, 5]]          # padding within the documents' own s^2 (or 2^15)
