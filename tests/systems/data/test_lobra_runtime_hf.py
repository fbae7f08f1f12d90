"""LobRA runtime on a frozen Hugging Face Llama: a replica plan's per-adapter gradients on 2 gloo processes
equal training each adapter alone (the TinyLM test's property, on ``arch="hf-llama"``)."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
from transformers import LlamaForCausalLM  # noqa: E402,F401  (imported here once: the forked ranks inherit it)

from sgl import comm  # noqa: E402
from sgl.errors import ConfigError, PlanError  # noqa: E402
from sgl.systems.data.lobra_models import build_lora_base, lora_targets  # noqa: E402
from sgl.systems.data.lobra_runtime import LobraRuntime, plan_step, rank_share  # noqa: E402
from sgl.systems.data.lora import MultiLoRALinear, set_adapters  # noqa: E402
from sgl.systems.data.lora_train import pad_rows  # noqa: E402
from sgl.systems.parallel.model import TransformerConfig  # noqa: E402
from sgl.systems.seq import SeqStrategy, StrategyCost  # noqa: E402

CFG = TransformerConfig("lobra-hf-test", 1, 16, 2, 32, 32, 32)
LENGTHS = [23, 4, 17, 9, 30, 6, 12, 5]
TASKS = [0, 1, 2, 0, 0, 1, 1, 2]
POOL = [StrategyCost(SeqStrategy(), 1e-4, 1e-2, 0.5, 48, "dp1"),
        StrategyCost(SeqStrategy(sp=2), 5e-5, 5e-3, 0.7, 48, "dp2")]


def _model():
    model = build_lora_base(CFG, 3, 2, arch="hf-llama", targets=("q", "v", "w2")).double()
    for m in model.modules():  # non-zero B so every LoRA factor gets a gradient
        if isinstance(m, MultiLoRALinear):
            torch.nn.init.normal_(m.lora_B, std=0.1)
    return model


def _seqs():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 32, (n,), generator=g) for n in LENGTHS]


def _adapter_grads(model, t):
    return torch.cat([torch.cat([m.lora_A.grad[t].reshape(-1), m.lora_B.grad[t].reshape(-1)])
                      for m in model.modules() if isinstance(m, MultiLoRALinear)])


def _alone(t):
    """Fine-tuning adapter t alone: the model's own padded forward, mean next-token loss over task t's tokens."""
    model = _model()
    mine = [s for s, k in zip(_seqs(), TASKS) if k == t]
    ids, _, mask = pad_rows(mine)
    set_adapters(model, torch.full((len(mine),), t))
    logits = model(ids, attention_mask=mask).logits[:, :-1]
    token = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    valid = mask[:, 1:].bool()
    (token[valid].sum() / valid.sum()).backward()
    return _adapter_grads(model, t)


def _worker(rank, world, steps):
    torch.set_num_threads(1)
    out = {}
    for name, step in steps.items():
        model, seqs = _model(), _seqs()
        runtime = LobraRuntime(model, 3, arch="hf-llama")
        runtime.backward(step, seqs, TASKS)
        grads = [_adapter_grads(model, t) for t in range(3)]
        trained = sorted({TASKS[i] for mb in rank_share(step, rank, LENGTHS) for i in mb})
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        runtime.train_step(step, seqs, TASKS, opt)
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])
        out[name] = (grads, trained, params)
    return out


def test_hf_llama_per_adapter_gradients_equal_training_each_adapter_alone():
    steps = {name: plan_step(POOL, replicas, LENGTHS, [8, 48], world=2)
             for name, replicas in (("two 1-process replicas", {0: 2}), ("one 2-process replica", {1: 1}))}
    out = comm.spawn(_worker, 2, steps, timeout=90, start_method="fork")  # children inherit transformers
    ref = [_alone(t) for t in range(3)]
    for name in out[0]:
        for rank in range(2):
            for t in range(3):
                torch.testing.assert_close(out[rank][name][0][t], ref[t], rtol=1e-9, atol=1e-12,
                                           msg=f"{name}, rank {rank}, task {t}")
        torch.testing.assert_close(out[0][name][2], out[1][name][2], rtol=0, atol=0)
    split = out[0]["two 1-process replicas"][1], out[1]["two 1-process replicas"][1]
    assert set(split[0]) != set(split[1])  # some adapter trained on one rank only: the broadcast path ran


def test_targets_map_by_name_and_bad_input():
    model = _model()
    wrapped = {n.rsplit(".", 1)[1] for n, m in model.named_modules() if isinstance(m, MultiLoRALinear)}
    assert wrapped == {"q_proj", "v_proj", "down_proj"}
    assert lora_targets("tiny", ("q", "v")) == ("q", "v")
    with pytest.raises(ConfigError, match="not TinyLM linears"):
        lora_targets("hf-llama", ("q_proj",))
    with pytest.raises(ConfigError, match="LobRA runs arch"):
        build_lora_base(CFG, 3, 2, arch="hf-mixtral")
    with pytest.raises(PlanError, match="arch='tiny' but the model is LlamaForCausalLM"):
        LobraRuntime(model, 3, arch="tiny")


def test_measure_and_calibration_take_the_arch():
    from sgl.systems.data.lobra_measure import calibrate_lora_cost, measure_lobra

    with pytest.raises(ConfigError, match="LobRA runs arch"):  # before any process starts
        measure_lobra({"a": [5, 9]}, {"a": 2}, arch="gpt2")
    cost = calibrate_lora_cost(CFG, tasks=2, rank=2, max_len=32, repeats=1, arch="hf-llama")
    assert set(cost) == {"a", "b", "c"} and all(v >= 0 for v in cost.values())
