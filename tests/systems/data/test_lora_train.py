"""Joint multi-LoRA fine-tuning end to end: each adapter moves exactly as if trained alone; losses fall."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.data.lm_eval import LMTrainConfig, tiny_llama
from sgl.systems.data.lora import MultiLoRALinear
from sgl.systems.data.lora_train import pad_rows, task_batches, train_joint_lora, train_lora_alone

_SMALL = LMTrainConfig(hidden=32, layers=1, heads=2, intermediate=64, seed=3)


def _adapters(model):
    return [(m.lora_A.detach().clone(), m.lora_B.detach().clone()) for m in model.modules()
            if isinstance(m, MultiLoRALinear)]


def _check_joint_equals_alone(tasks, vocab, context, steps=4, per_task=3):
    joint = train_joint_lora(tiny_llama(vocab, context, _SMALL), tasks, steps=steps, per_task=per_task, rank=4,
                             lr=1e-2, seed=1)["model"]
    base_frozen = tiny_llama(vocab, context, _SMALL).state_dict()
    got = _adapters(joint)
    for t in range(len(tasks)):
        alone = _adapters(train_lora_alone(tiny_llama(vocab, context, _SMALL), tasks, t, steps=steps,
                                           per_task=per_task, rank=4, lr=1e-2, seed=1))
        for (ja, jb), (aa, ab) in zip(got, alone):
            torch.testing.assert_close(ja[t], aa[t], rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(jb[t], ab[t], rtol=1e-4, atol=1e-6)
            assert jb[t].abs().max() > 0  # it did train
    for name, value in joint.state_dict().items():  # the base stayed frozen
        if "lora_" not in name:
            torch.testing.assert_close(value, base_frozen[name.replace(".base.", ".")])


def test_joint_training_equals_each_adapter_alone_synthetic():
    g = torch.Generator().manual_seed(0)
    tasks = [[torch.randint(3, 50, (int(n),), generator=g) for n in torch.randint(4, 20, (8,), generator=g)]
             for _ in range(2)]
    _check_joint_equals_alone(tasks, 50, 32, steps=3)


def test_joint_training_on_sst2_and_wikitext2(data_path, tmp_path):
    from sgl.systems.text import load_sst2, train_tokenizer, wikitext2_lines

    sentences, labels = load_sst2(data_path("sst2").parent, "train")
    sst = [f"{s} => {'positive' if y else 'negative'}" for s, y in zip(sentences[:300], labels[:300])]
    wiki = [line for line in wikitext2_lines(data_path("wikitext2").parent, "train")[:3000] if len(line) > 80][:300]
    tok = train_tokenizer(sst + wiki, vocab_size=600, cache_dir=tmp_path)
    eos = tok.token_to_id("<eos>")

    def enc(texts):
        return [torch.tensor(e.ids[:63] + [eos]) for e in tok.encode_batch(texts)]

    tasks, held = [enc(sst[:250]), enc(wiki[:250])], [enc(sst[250:]), enc(wiki[250:])]
    vocab = tok.get_vocab_size()
    _check_joint_equals_alone(tasks, vocab, 64, steps=3)
    log = train_joint_lora(tiny_llama(vocab, 64, _SMALL), tasks, steps=25, per_task=8, rank=8, lr=1e-2,
                           eval_tasks=held)
    assert all(a < b for a, b in zip(log["after"], log["before"])), (log["before"], log["after"])


def test_errors_and_padding():
    ids, labels, mask = pad_rows([torch.tensor([5, 6, 7]), torch.tensor([8])])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and labels.tolist()[1] == [8, -100, -100]
    assert mask.sum().item() == 4
    with pytest.raises(ConfigError, match="at least one sequence"):
        task_batches([[torch.tensor([1, 2])], []], steps=1, per_task=1)
    with pytest.raises(ConfigError, match="rank"):
        train_joint_lora(tiny_llama(20, 8, _SMALL), [[torch.tensor([3, 4, 5])]], steps=1, per_task=1, rank=64)
