"""LobRA runtime: a replica plan's per-adapter gradients on 2 gloo processes equal training each adapter alone."""
import pytest
import torch
import torch.nn.functional as F

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.data.lobra_runtime import LobraRuntime, LobraStep, plan_step, rank_share, replica_layout
from sgl.systems.data.lora import add_multi_lora, set_adapters
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.runtime.tiny_lm import TinyLM
from sgl.systems.seq import SeqStrategy, StrategyCost

CFG = TransformerConfig("lobra-test", 1, 16, 2, 32, 32, 32)
LENGTHS = [23, 4, 17, 9, 30, 6, 12, 5]
TASKS = [0, 1, 2, 0, 0, 1, 1, 2]
POOL = [StrategyCost(SeqStrategy(), 1e-4, 1e-2, 0.5, 48, "dp1"),
        StrategyCost(SeqStrategy(sp=2), 5e-5, 5e-3, 0.7, 48, "dp2")]


def _model():
    torch.manual_seed(0)
    model = TinyLM(CFG)
    add_multi_lora(model, 3, 2, target_modules=("q", "v"))
    model.double()
    for m in model.modules():  # non-zero B so every LoRA factor gets a gradient
        if hasattr(m, "lora_B"):
            torch.nn.init.normal_(m.lora_B, std=0.1)
    return model


def _seqs():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 32, (n,), generator=g) for n in LENGTHS]


def _adapter_grads(model, t):
    return torch.cat([torch.cat([m.lora_A.grad[t].reshape(-1), m.lora_B.grad[t].reshape(-1)])
                      for m in model.modules() if hasattr(m, "lora_A")])


def _alone(t):
    """Fine-tuning adapter t alone: mean next-token loss over task t's sequences, one padded batch."""
    model, seqs = _model(), _seqs()
    mine = [s for s, k in zip(seqs, TASKS) if k == t]
    width = max(len(s) for s in mine)
    ids = torch.zeros(len(mine), width, dtype=torch.long)
    mask = torch.zeros(len(mine), width, dtype=torch.bool)
    for r, s in enumerate(mine):
        ids[r, :len(s)] = s
        mask[r, :len(s)] = True
    set_adapters(model, torch.full((len(mine),), t))
    logits = model(ids)[:, :-1]
    token = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    valid = mask[:, 1:]
    (token[valid].sum() / valid.sum()).backward()
    return _adapter_grads(model, t)


def _worker(rank, world, steps):
    torch.set_num_threads(1)
    out = {}
    for name, step in steps.items():
        model, seqs = _model(), _seqs()
        runtime = LobraRuntime(model, 3)
        runtime.backward(step, seqs, TASKS)
        grads = [_adapter_grads(model, t) for t in range(3)]
        trained = sorted({TASKS[i] for mb in rank_share(step, rank, LENGTHS) for i in mb})
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        runtime.train_step(step, seqs, TASKS, opt)
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])
        out[name] = (grads, trained, params)
    return out


def test_per_adapter_gradients_equal_training_each_adapter_alone():
    steps = {name: plan_step(POOL, replicas, LENGTHS, [8, 48], world=2)  # LobRA's dispatch, once, here
             for name, replicas in (("two 1-process replicas", {0: 2}), ("one 2-process replica", {1: 1}))}
    out = comm.spawn(_worker, 2, steps, timeout=60)
    ref = [_alone(t) for t in range(3)]
    for name in out[0]:
        for rank in range(2):
            grads = out[rank][name][0]
            for t in range(3):
                torch.testing.assert_close(grads[t], ref[t], rtol=1e-9, atol=1e-12, msg=f"{name}, task {t}")
        # the replicas stay identical after a replicated AdamW step
        torch.testing.assert_close(out[0][name][2], out[1][name][2], rtol=0, atol=0)
    # the 1-process replicas split the tasks: some adapter was trained on one rank only (the broadcast path)
    split = out[0]["two 1-process replicas"][1], out[1]["two 1-process replicas"][1]
    assert set(split[0]) != set(split[1])


def test_single_process_runtime_matches_alone():
    model, seqs = _model(), _seqs()
    step = plan_step(POOL, {0: 1}, LENGTHS, [8, 48], world=1)
    LobraRuntime(model, 3).backward(step, seqs, TASKS)
    for t in range(3):
        torch.testing.assert_close(_adapter_grads(model, t), _alone(t), rtol=1e-9, atol=1e-11)


def test_plan_device_count_must_match_world():
    with pytest.raises(PlanError, match="uses 4 devices but the world has 2"):
        replica_layout(POOL, {1: 2}, 2)
    with pytest.raises(PlanError, match="scheme 5"):
        replica_layout(POOL, {5: 1}, 2)
    with pytest.raises(PlanError, match="uses 2 devices but the world has 1"):
        plan_step(POOL, {0: 2}, LENGTHS, [8, 48], world=1)


def test_replica_naming_ranks_outside_the_world():
    step = LobraStep([(0,), (3,)], [[[0, 1]], [[2]]])
    with pytest.raises(PlanError, match=r"ranks \[3\] are outside the world of 2"):
        step.validate(2, 3)
    with pytest.raises(PlanError, match="exactly once"):
        LobraStep([(0,), (1,)], [[[0, 1]], [[1]]]).validate(2, 3)


def test_runtime_needs_lora_layers_and_task_ids():
    with pytest.raises(PlanError, match="add_multi_lora"):
        LobraRuntime(TinyLM(CFG), 3)
    model = _model()
    step = plan_step(POOL, {0: 1}, LENGTHS, [8, 48], world=1)
    with pytest.raises(PlanError, match="task id"):
        LobraRuntime(model, 3).backward(step, _seqs(), [0] * 7 + [5])
