"""Lengths, histograms, the batch sampler and the a·s²+b·s+c cost model."""
import json

import numpy as np
import pytest

from sgl.errors import DatasetError, PlanError, ConfigError
from sgl.systems.seq import (GlobalBatchSampler, LengthHistogram, SeqStrategy, corpus_lengths, flexsp_cost_model,
                             hydraulis_pool, read_lengths)


def test_read_formats(tmp_path):
    (tmp_path / "a.txt").write_text("368\n99\n\n1330\n")
    (tmp_path / "a.json").write_text(json.dumps({"lengths": [368, 99, 1330]}))
    np.save(tmp_path / "a.npy", np.array([368, 99, 1330]))
    for name in ("a.txt", "a.json", "a.npy"):
        assert read_lengths(tmp_path / name).tolist() == [368, 99, 1330]
    assert read_lengths(tmp_path / "a.txt", max_length=400).tolist() == [368, 99]


def test_read_errors_name_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_text("12\nabc\n")
    with pytest.raises(DatasetError, match=r"bad.txt:2"):
        read_lengths(tmp_path / "bad.txt")
    (tmp_path / "zero.txt").write_text("12\n0\n")
    with pytest.raises(DatasetError, match=">= 1"):
        read_lengths(tmp_path / "zero.txt")
    with pytest.raises(DatasetError, match="does not exist"):
        read_lengths(tmp_path / "missing.txt")


def test_real_wikipedia_lengths(data_path):
    lengths = read_lengths(data_path("seqlen", "wikipedia.txt"))
    summary = LengthHistogram.from_lengths(lengths).summary()
    # the dataset README's figures
    assert summary["count"] == 1_000_000 and summary["median"] == 347 and summary["max"] == 1_823_777
    assert lengths[:5].tolist() == [368, 99, 1330, 945, 188]


def test_corpus_lengths_with_any_tokenizer(data_path, tmp_path):
    docs = corpus_lengths(data_path("wikitext2", "train.txt"), str.split, separator="heading")
    assert docs.size > 100 and docs.min() >= 1
    (tmp_path / "c.txt").write_text("a b c\n\nd e\n")
    assert corpus_lengths(tmp_path / "c.txt", str.split).tolist() == [3, 2]
    assert corpus_lengths(["x y", "z"], list).tolist() == [3, 1]
    with pytest.raises(ConfigError, match="callable"):
        corpus_lengths(["x"], tokenizer=None)


def test_histogram_bins():
    hist = LengthHistogram.from_lengths([1, 2, 3, 4, 100], bins="log2")
    assert hist.counts.sum() == 5 and hist.total_tokens.sum() == 110
    assert hist.fractions.sum() == pytest.approx(1.0)


def test_sampler_reproduces_distribution_and_tail():
    rng = np.random.default_rng(1)
    pool = np.concatenate([rng.integers(100, 2000, 9900), rng.integers(50_000, 60_000, 100)])
    batches = GlobalBatchSampler(pool, batch_size=256, seed=3).batches(200)
    drawn = np.concatenate(batches)
    assert abs(np.median(drawn) - np.median(pool)) / np.median(pool) < 0.05
    tail = np.mean(drawn >= 50_000)
    assert 0.006 < tail < 0.014              # pool tail share is 1%
    again = GlobalBatchSampler(pool, batch_size=256, seed=3).batches(200)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    other = GlobalBatchSampler(pool, batch_size=256, seed=4).batches(1)[0]
    assert not np.array_equal(other, batches[0])


def test_sampler_token_budget_and_file_order():
    pool = np.array([5, 3, 8, 2, 7])
    b = GlobalBatchSampler(pool, tokens_per_step=10, order="file").batches(3)
    assert [x.tolist() for x in b] == [[5, 3], [8, 2], [7, 5, 3]][:2] + [b[2].tolist()]
    assert all(x.sum() <= 10 or x.size == 1 for x in b)
    with pytest.raises(ConfigError, match="exactly one"):
        GlobalBatchSampler(pool, batch_size=2, tokens_per_step=5)
    with pytest.raises(DatasetError, match="empty"):
        GlobalBatchSampler([], batch_size=2)


def test_flexsp_preset_constants():
    model = flexsp_cost_model(devices=16, memory_gb=80)
    sp1 = model.strategy_cost(SeqStrategy(sp=1))
    assert sp1.a == pytest.approx(5.128e-6) and sp1.b == pytest.approx(0.1839576) and sp1.c == pytest.approx(629.3563)
    # ZeRO-3 over 16 devices: 7·16·1024/16 MB of states, (81920 - 7168) / 4.71 tokens per device
    assert sp1.capacity == int((80 * 1024 - 7 * 1024) / 4.71)
    sp4 = model.strategy_cost(SeqStrategy(sp=4))
    # a2a term of FlexSP: 4·2·L·h·2B/sp/bw per token
    assert sp4.b == pytest.approx(0.1839576 / 4 + 4 * 2 * 32 * 4096 * 2 / 2**20 / 4 / 137)
    ckpt = model.strategy_cost(SeqStrategy(sp=4, ckpt=True))
    assert ckpt.capacity > sp4.capacity and ckpt.b > sp4.b
    tp = model.strategy_cost(SeqStrategy(tp=2, sp=2, zero=2))
    assert tp.a == pytest.approx(5.128e-6 / 4)


def test_replica_time_counts_pipeline_bubble():
    pool = {p.label: p for p in hydraulis_pool(16)}
    pp4 = pool["tp1-pp4-sp1-z1"]
    t = [pp4.micro_batch_time([1000]), pp4.micro_batch_time([400, 300])]
    assert pp4.replica_time([[1000], [400, 300]]) == pytest.approx(sum(t) + 3 * max(t))
    # tp1-pp1 cannot hold a 7B model on 40 GB; larger TP holds longer sequences
    assert "tp1-pp1-sp1-z1" not in pool and pool["tp8-pp1-sp1-z1"].capacity > pool["tp2-pp1-sp1-z1"].capacity


def test_bad_strategies():
    with pytest.raises(PlanError, match="power of two"):
        SeqStrategy(sp=3)
    with pytest.raises(PlanError, match="either"):
        SeqStrategy(sp=2, cp=2)
    with pytest.raises(PlanError, match="needs 32 devices"):
        flexsp_cost_model(16).strategy_cost(SeqStrategy(sp=32))
