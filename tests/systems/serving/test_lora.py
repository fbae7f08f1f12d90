"""LoRA-Inlaid: multi-task GPTQ on a WikiText-trained tiny Llama with per-task peft adapters."""
import copy

import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.lora import (MultiLoRAServer, MultiTaskQuantizer, OutputLengthPredictor, Request, gptq,
                                      rtn, simulate, train_adapters)

#: the stated bound: mean per-token KL(float || quantized) of the 4-bit group-32 multi-task base
KL_BOUND_4BIT = 0.02


@pytest.fixture(scope="module")
def lora(tiny_llama, _wikitext_root):
    from sgl.systems.text import encode_corpus, lm_blocks, load_sst2, wikitext2_documents

    model, tok, _ = tiny_llama
    sents, labels = load_sst2(_wikitext_root, "train")
    blocks = lambda texts: lm_blocks(encode_corpus(tok, texts), 48)[:24]  # noqa: E731
    tasks = {"wiki": blocks(wikitext2_documents(_wikitext_root, "valid")[:6]),
             "positive": blocks([s for s, y in zip(sents[:2000], labels[:2000]) if y == 1]),
             "negative": blocks([s for s, y in zip(sents[:2000], labels[:2000]) if y == 0])}
    peft_model = train_adapters(copy.deepcopy(model), {k: v[:16] for k, v in tasks.items()}, rank=4, steps=15)
    return peft_model, tasks


@torch.no_grad()
def _kl(model, adapter, blocks, reference):
    model.set_adapter(adapter)
    logp = torch.log_softmax(model(input_ids=blocks).logits, -1)
    return float(torch.nn.functional.kl_div(logp, reference, log_target=True, reduction="none").sum(-1).mean())


def test_shared_base_within_bound_on_every_task(lora):
    model, tasks = lora
    ref = {}
    with torch.no_grad():
        for t, b in tasks.items():
            model.set_adapter(t)
            ref[t] = torch.log_softmax(model(input_ids=b[:16]).logits, -1)
    q = MultiTaskQuantizer(model, bits=4, group_size=32)
    for t, b in tasks.items():
        q.add_task(t, [b[:8], b[8:16]], adapter=t)
    q.quantize()
    kls = {t: _kl(model, t, b[:16], ref[t]) for t, b in tasks.items()}
    assert all(0 < v < KL_BOUND_4BIT for v in kls.values()), kls
    # 3 bits: GPTQ with every task's Hessian beats round-to-nearest on every task's calibration set
    q.bits = 3
    q.quantize()
    g3 = {t: _kl(model, t, b[:16], ref[t]) for t, b in tasks.items()}
    q.quantize(method="rtn")
    r3 = {t: _kl(model, t, b[:16], ref[t]) for t, b in tasks.items()}
    assert all(g3[t] < r3[t] for t in tasks), (g3, r3)
    quant, fp16 = q.memory_bytes()
    assert quant < 0.75 * fp16
    q.restore()
    assert _kl(model, "wiki", tasks["wiki"][:16], ref["wiki"]) < 1e-8


def test_adding_a_task_is_incremental(lora):
    model, tasks = lora
    q = MultiTaskQuantizer(model, bits=4, group_size=32)
    q.add_task("wiki", [tasks["wiki"][:8]], adapter="wiki")
    q.quantize()
    old = {n: h.clone() for n, h in q.hessians["wiki"].items()}
    q.add_task("positive", [tasks["positive"][:8]], adapter="positive")   # calibrates the new task only
    assert all(torch.equal(old[n], q.hessians["wiki"][n]) for n in old)
    q.quantize()
    name = next(iter(q.layers))
    expect = gptq(q.float_weights[name], (old[name] + q.hessians["positive"][name]) / 2, 4, 32)
    torch.testing.assert_close(q.layers[name].weight, expect)
    with pytest.raises(ConfigError, match="already calibrated"):
        q.add_task("wiki", [tasks["wiki"][:8]])
    q.restore()


def test_gptq_grid_errors_and_rtn():
    w = torch.randn(8, 48)
    with pytest.raises(ConfigError, match="does not divide"):
        rtn(w, 4, 32)
    with pytest.raises(ConfigError, match="hessian must be"):
        gptq(w, torch.eye(8), 4, 16)
    assert rtn(w, 8, 16).sub(w).abs().max() < 0.05
    assert torch.unique(rtn(w, 2, 48)[0]).numel() <= 4


def test_unknown_adapter_is_an_error(lora):
    model, tasks = lora
    server = MultiLoRAServer(model)
    assert set(server.adapters) == set(tasks)
    out = server.generate("positive", tasks["positive"][:1, :10], max_new_tokens=3)
    assert out.shape == (1, 13)
    with pytest.raises(ConfigError, match="unknown adapter 'legal'; loaded adapters"):
        server.generate("legal", tasks["wiki"][:1, :10])


def test_scheduler_groups_tasks_and_beats_fcfs():
    import numpy as np

    rng = np.random.default_rng(0)
    tasks = ["a", "b", "c"]
    reqs = []
    for i in range(300):
        t = tasks[int(rng.integers(3))]
        inp = int(rng.integers(10, 200))
        reqs.append(Request(i, t, float(i * 0.01), inp, int({"a": 5, "b": 20, "c": 60}[t] + inp // 10)))
    pred = OutputLengthPredictor().fit(reqs[:100])
    assert abs(pred.predict("c", 100) - 70) < 1.0           # the linear law (up to the floor) recovered
    fcfs = simulate(reqs, "fcfs", switch_s=0.05, predictor=pred)
    inlaid = simulate(reqs, "inlaid", switch_s=0.05, predictor=pred)
    assert inlaid["switches"] < fcfs["switches"] / 3
    assert inlaid["throughput"] > fcfs["throughput"]
    assert inlaid["slo_attainment"] >= fcfs["slo_attainment"]
    with pytest.raises(ConfigError, match="policy must be one of"):
        simulate(reqs, "lifo")
