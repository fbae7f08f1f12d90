"""LobRA's dynamic plan executed on 2 gloo processes (HF Llama base): re-planned between steps, it trains the
adapters exactly as the static plan where the plan does not change, and a switch keeps the adapters' states."""
import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from transformers import LlamaForCausalLM  # noqa: E402,F401  (imported once here: the forked ranks inherit it)

from sgl import comm  # noqa: E402
from sgl.errors import PlanError  # noqa: E402
from sgl.systems.data.lobra_dynamic import dynamic_replay  # noqa: E402
from sgl.systems.data.lobra_dynamic_run import DynamicLobraPlanner, decode_step, encode_step, run_dynamic  # noqa: E402
from sgl.systems.data.lobra_models import build_lora_base  # noqa: E402
from sgl.systems.data.lobra_runtime import LobraRuntime, plan_step  # noqa: E402
from sgl.systems.parallel.model import TransformerConfig  # noqa: E402
from sgl.systems.seq import SeqStrategy, StrategyCost  # noqa: E402

CFG = TransformerConfig("lobra-dyn-test", 1, 16, 2, 32, 32, 64)
#: the quadratic term dominates: one long sequence favours the 2-process replica, many short ones two 1-process ones
POOL = [StrategyCost(SeqStrategy(), 1e-3, 1e-3, 0.1, 64, "dp1"),
        StrategyCost(SeqStrategy(sp=2), 5e-4, 5e-4, 0.1, 64, "dp2")]
SETS = [{0: 2}, {1: 1}]
BOUNDS = [8, 64]
STEPS = [[9, 5, 7, 4, 8, 9, 5, 6, 7, 4, 5, 6], [23, 4, 17, 9, 30, 6, 12, 5], [60, 5, 7, 4],
         [6, 5, 7, 4, 8, 9, 5, 6, 7, 4, 5, 6]]
CHOICES = [0, 1, 1, 0]  # the greedy plan on STEPS from SETS[0]: two switches, one step without a change


def _batches():
    g = torch.Generator().manual_seed(3)
    return [([torch.randint(0, 32, (n,), generator=g) for n in lens], [i % 3 for i in range(len(lens))])
            for lens in STEPS]


def _model():
    return build_lora_base(CFG, 3, 2, arch="hf-llama").double()


def _state(model, opt):
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])
    moments = torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in model.parameters() if p.requires_grad])
    return params.clone(), moments.clone()


def _worker(rank, world, static):
    torch.set_num_threads(1)
    out = {}
    for name in ("static 0", "static 1", "dynamic"):
        model = _model()
        runtime = LobraRuntime(model, 3, arch="hf-llama")
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        losses, states = [], []
        if name == "dynamic":
            planner = DynamicLobraPlanner(POOL, SETS, BOUNDS, world=world)
            for batch in _batches():  # one step at a time: re-planned before each
                r = run_dynamic(runtime, opt, planner, [batch])
                losses += r["loss"]
                states.append(_state(model, opt))
            out["choices"] = planner.choices
        else:
            for step, (seqs, tasks) in zip(static[name], _batches()):
                losses.append(runtime.train_step(step, seqs, tasks, opt))
                states.append(_state(model, opt))
        out[name] = (losses, states)
    return out


def test_dynamic_plan_executed_step_by_step_keeps_the_adapters():
    assert dynamic_replay(POOL, SETS, [np.array(s) for s in STEPS], BOUNDS, bandwidth_gbps=float("inf"))["choice"] \
        == CHOICES
    static = {f"static {k}": [plan_step(POOL, SETS[k], lens, BOUNDS, world=2, microbatch="tokens") for lens in STEPS]
              for k in (0, 1)}
    out = comm.spawn(_worker, 2, static, timeout=120, start_method="fork")
    for rank in range(2):
        r = out[rank]
        assert r["choices"] == CHOICES  # every rank ran rank 0's plan
        # before any switch the dynamic run is the static run of its set, bit for bit
        assert r["dynamic"][0][0] == r["static 0"][0][0]
        for a, b in zip(r["dynamic"][1][0], r["static 0"][1][0]):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        # across the switches (0 -> 1 -> 1 -> 0) adapters and AdamW moments carry on as under either static plan
        for k in range(len(STEPS)):
            for other in ("static 0", "static 1"):
                assert r["dynamic"][0][k] == pytest.approx(r[other][0][k], rel=1e-12)
                for a, b in zip(r["dynamic"][1][k], r[other][1][k]):
                    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12, msg=f"step {k} vs {other}")
    for a, b in zip(out[0]["dynamic"][1][-1], out[1]["dynamic"][1][-1]):  # replicas stay identical
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_step_code_round_trip_and_bad_input():
    planner = DynamicLobraPlanner(POOL, SETS, BOUNDS, world=2)
    index, step = planner.next(STEPS[2])
    back_index, back = decode_step(encode_step(index, step, len(STEPS[2])), POOL, planner.sets, 2)
    assert (back_index, back.replicas, back.work) == (index, step.replicas, step.work)
    with pytest.raises(PlanError, match="uses 2 devices but the world has 4"):
        DynamicLobraPlanner(POOL, SETS, BOUNDS, world=4)
    with pytest.raises(PlanError, match="at least one candidate"):
        DynamicLobraPlanner(POOL, [], BOUNDS, world=2)
    model = _model()
    with pytest.raises(PlanError, match="dynamic plan is for 2 processes but the world has 1"):
        run_dynamic(LobraRuntime(model, 3), torch.optim.SGD([p for p in model.parameters() if p.requires_grad], 0.1),
                    planner, _batches()[:1])
