"""Packed windows to LM rows, training for a token budget, and the long/short perplexities."""
import math

import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.data import PackConfig, pack_arrays
from sgl.systems.data.lm_eval import (IGNORE, LMTrainConfig, article_blocks, long_context_perplexity,
                                      short_document_perplexity, tiny_llama, train_packed_lm, windows_to_rows)


class _Uniform(torch.nn.Module):
    """Equal logits everywhere: every perplexity must equal the vocabulary size."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask=None):
        class Out:
            logits = torch.zeros(*input_ids.shape, self.vocab) + self.dummy
        return Out()


def _docs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [torch.tensor(rng.integers(3, 30, rng.integers(5, 60)).tolist() + [2]) for _ in range(n)]


def test_windows_to_rows_places_every_segment_and_masks_padding():
    docs = _docs()
    lengths = np.array([d.numel() for d in docs])
    packing = pack_arrays(lengths, None, PackConfig(window=64, method="bfd")).packing
    ids, labels = windows_to_rows(packing, docs)
    assert ids.shape == (packing.num_windows, 64)
    assert int((labels != IGNORE).sum()) == int(lengths.sum())
    assert torch.all(ids[labels == IGNORE] == 0)
    w0 = [seg for seg in packing.windows()[0]]
    expected = torch.cat([docs[d][s:s + n] for d, s, n in w0])
    assert torch.equal(ids[0, :expected.numel()], expected)
    with pytest.raises(ConfigError, match="ids but the packing"):
        windows_to_rows(packing, [d[:2] for d in docs])


def test_uniform_model_scores_the_vocabulary_size():
    blocks = torch.randint(0, 50, (3, 32))
    scores = long_context_perplexity(_Uniform(50), blocks, long_from=16)
    assert scores["ppl_long"] == pytest.approx(50, rel=1e-5) and scores["ppl_early"] == pytest.approx(50, rel=1e-5)
    assert short_document_perplexity(_Uniform(50), _docs(5), batch_size=2) == pytest.approx(50, rel=1e-5)
    with pytest.raises(ConfigError, match="long_from"):
        long_context_perplexity(_Uniform(50), blocks, long_from=32)
    with pytest.raises(ConfigError, match="no held-out document"):
        article_blocks([torch.arange(10)], 32)
    assert article_blocks([torch.arange(70), torch.arange(10)], 32).shape == (2, 32)


def test_training_meets_the_token_budget_learns_and_is_seeded():
    torch.set_num_threads(1)
    pattern = torch.arange(3, 19).repeat(16)  # a periodic stream: learnable in a few steps
    rows = pattern[:8 * 32].view(8, 32)
    labels = rows.clone()
    labels[:, 28:] = IGNORE
    config = LMTrainConfig(hidden=16, layers=1, heads=2, intermediate=32, batch_size=2, lr=1e-2, warmup_steps=2,
                           train_tokens=1200, seed=5)
    model = tiny_llama(32, 32, config)
    before = long_context_perplexity(model, rows, long_from=16)["ppl_long"]
    summary = train_packed_lm(model, rows, labels, config)
    after = long_context_perplexity(model, rows, long_from=16)["ppl_long"]
    assert 1200 <= summary["train_tokens"] < 1200 + 54 and summary["steps"] == math.ceil(1200 / 54)
    assert after < before / 2
    again = tiny_llama(32, 32, config)
    assert train_packed_lm(again, rows, labels, config)["final_loss"] == pytest.approx(summary["final_loss"])
    with pytest.raises(ConfigError, match="divisible"):
        LMTrainConfig(hidden=10, heads=4)
