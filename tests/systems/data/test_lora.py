"""Joint multi-LoRA fine-tuning: each adapter's gradient equals fine-tuning it alone (peft reference)."""
import copy

import pytest
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.systems.data.lm_eval import LMTrainConfig, tiny_llama
from sgl.systems.data.lora import MultiLoRALinear, add_multi_lora, joint_lora_loss, lora_parameters


def _base():
    torch.manual_seed(0)
    return tiny_llama(40, 32, LMTrainConfig(hidden=16, layers=2, heads=2, intermediate=24, seed=0))


def _alone_grads(base, layers_state, task, ids, rank, alpha):
    """Fine-tune adapter `task` alone with peft on its own (unpadded) samples; its LoRA gradients."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(copy.deepcopy(base), LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0,
                                                           target_modules=["q_proj", "v_proj"]))
    for name, module in model.named_modules():
        if name.endswith(("q_proj", "v_proj")) and hasattr(module, "lora_A"):
            key = name.split("base_model.model.")[-1]
            module.lora_A["default"].weight.data.copy_(layers_state[f"{key}.lora_A"][task])
            module.lora_B["default"].weight.data.copy_(layers_state[f"{key}.lora_B"][task])
    losses = []
    for row in ids:
        logits = model(input_ids=row[None]).logits[:, :-1]
        losses.append(F.cross_entropy(logits.transpose(1, 2), row[None, 1:], reduction="none"))
    loss = torch.cat([l.reshape(-1) for l in losses]).mean()
    loss.backward()
    out = {}
    for name, module in model.named_modules():
        if name.endswith(("q_proj", "v_proj")) and hasattr(module, "lora_A"):
            key = name.split("base_model.model.")[-1]
            out[f"{key}.lora_A"] = module.lora_A["default"].weight.grad
            out[f"{key}.lora_B"] = module.lora_B["default"].weight.grad
    return out


def test_joint_gradients_equal_per_adapter_gradients():
    torch.set_num_threads(1)
    base = _base()
    joint = copy.deepcopy(base)
    layers = add_multi_lora(joint, num_adapters=3, rank=4, alpha=8.0)
    torch.manual_seed(1)
    for layer in layers:  # non-zero B so that A gets a gradient too
        layer.lora_B.data.normal_(0, 0.1)
    state = {f"{n}.{p}": getattr(m, p).detach().clone() for n, m in joint.named_modules()
             if isinstance(m, MultiLoRALinear) for p in ("lora_A", "lora_B")}
    # three tasks with different lengths, mixed in one right-padded batch
    lengths = {0: [12, 9], 1: [30], 2: [5, 7, 6]}
    g = torch.Generator().manual_seed(2)
    samples = [(t, torch.randint(3, 40, (n,), generator=g)) for t, ns in lengths.items() for n in ns]
    width = max(s.numel() for _, s in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    mask = torch.zeros_like(ids)
    for r, (_, s) in enumerate(samples):
        ids[r, : s.numel()], labels[r, : s.numel()], mask[r, : s.numel()] = s, s, 1
    adapters = torch.tensor([t for t, _ in samples])
    joint_lora_loss(joint, ids, labels, adapters, mask).backward()
    assert all(p.grad is None for n, p in joint.named_parameters() if "lora_" not in n)
    for task in lengths:
        alone = _alone_grads(base, state, task, [s for t, s in samples if t == task], 4, 8.0)
        for name, module in joint.named_modules():
            if isinstance(module, MultiLoRALinear):
                for part in ("lora_A", "lora_B"):
                    got = getattr(module, part).grad[task]
                    assert torch.allclose(got, alone[f"{name}.{part}"], atol=1e-6, rtol=1e-4), (task, name, part)
    assert set(lora_parameters(joint, 0)) == set(state)


def test_fresh_adapters_start_from_the_base_and_bad_input():
    base = _base()
    joint = copy.deepcopy(base)
    add_multi_lora(joint, num_adapters=2, rank=2)
    x = torch.randint(0, 40, (2, 10))
    from sgl.systems.data.lora import set_adapters
    set_adapters(joint, torch.tensor([0, 1]))
    assert torch.allclose(joint(input_ids=x).logits, base(input_ids=x).logits, atol=1e-6)
    with pytest.raises(ConfigError, match="above the layer width 16"):
        MultiLoRALinear(torch.nn.Linear(16, 32), num_adapters=2, rank=17)
    with pytest.raises(ConfigError, match="adapter ids"):
        set_adapters(joint, torch.tensor([0, 2]))
    with pytest.raises(ConfigError, match="no nn.Linear named"):
        add_multi_lora(copy.deepcopy(base), 2, 2, target_modules=("nothing",))
