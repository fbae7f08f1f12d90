"""Student Parallelism on SST-2: boosted students, the stacked wide model, pruning under bursts."""
import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.students import (AdaptivePruning, StudentEnsemble, batched_logits, bert_config,
                                          bursty_arrivals, distil_students, encode_sentences, replay,
                                          train_classifier)


@pytest.fixture(scope="module")
def sst2(_wikitext_root):
    from sgl.systems.text import load_sst2, train_tokenizer

    torch.set_num_threads(1)
    sents, labels = load_sst2(_wikitext_root, "train")
    sents, labels = sents[:1000], labels[:1000]
    tok = train_tokenizer(sents, vocab_size=500)
    ids, mask = encode_sentences(tok, sents, max_len=24)
    teacher = train_classifier(bert_config(500, 2, hidden=32, heads=2, max_len=24), ids, mask, labels, steps=60,
                               batch_size=32, lr=3e-3)
    # pure residual fitting (no label term), so every added student must move closer to the teacher
    students = distil_students(teacher, bert_config(500, 1, hidden=32, heads=2, max_len=24), ids, mask, labels,
                               num_students=3, steps=40, lr=3e-3, ce_weight=0.0)
    return teacher, students, ids, mask, labels


def test_wide_model_equals_each_student_and_the_stacked_sum(sst2):
    _, students, ids, mask, _ = sst2
    ens = StudentEnsemble(students)
    x, m = ids[:16], mask[:16]                      # padded rows: the mask must be honoured
    assert bool((m == 0).any())
    per = ens.each(x, m)
    with torch.no_grad():
        for i, s in enumerate(students):
            torch.testing.assert_close(per[i], s(input_ids=x, attention_mask=m).logits, rtol=1e-4, atol=1e-5)
    for k in (1, 2, 3):
        torch.testing.assert_close(ens(x, m, active=k), per[:k].sum(0))
    with pytest.raises(ConfigError, match="active must be"):
        ens(x, m, active=0)
    with pytest.raises(ConfigError, match="at least one student"):
        StudentEnsemble([])


def test_boosting_fits_the_teacher_residual(sst2):
    teacher, students, ids, mask, labels = sst2
    ens = StudentEnsemble(students)
    t = batched_logits(lambda i, m: teacher(input_ids=i, attention_mask=m).logits, ids, mask)
    errs = [float(((batched_logits(lambda i, m: ens(i, m, active=k), ids, mask) - t) ** 2).mean())
            for k in (1, 2, 3)]
    spread = float(((t - t.mean(0)) ** 2).mean())     # the error of the best constant prediction
    assert errs[0] < spread and errs[2] < errs[1] < errs[0], (errs, spread)


def test_pruning_never_below_one_and_drops_under_bursts(sst2):
    _, students, ids, mask, _ = sst2
    policy = AdaptivePruning(3, step=4)
    assert [policy.active(q) for q in (0, 3, 4, 8, 12, 10_000)] == [3, 3, 2, 1, 1, 1]
    ens = StudentEnsemble(students)
    arrivals = bursty_arrivals(120, calm_rate=20, burst_rate=5000, mean_calm=0.5, mean_burst=0.05, seed=1)

    def serve(rows, active):
        m = mask[rows]
        w = int(m.sum(1).max())
        return ens(ids[rows, :w], m[:, :w], active=active).argmax(-1).numpy()

    out = replay(serve, arrivals, max_batch=8, pruning=policy)
    assert out["active"].min() >= 1 and out["active"].max() <= 3
    assert (out["active"] < 3).any() and (out["active"] == 3).any()
    assert out["latency_ms"].min() >= 0 and out["p99_ms"] >= out["mean_ms"] * 0.5
    full = replay(serve, arrivals, max_batch=8, num_students=3)
    assert (full["active"] == 3).all()


def test_arrivals_are_bursty_and_checked():
    t = bursty_arrivals(2000, calm_rate=10, burst_rate=1000, mean_calm=1.0, mean_burst=0.1, seed=0)
    gaps = np.diff(t)
    assert np.all(gaps >= 0)
    assert gaps.std() / gaps.mean() > 1.5            # over-dispersed vs Poisson (CV = 1)
    with pytest.raises(ConfigError, match="burst_rate"):
        bursty_arrivals(10, burst_rate=0)
    with pytest.raises(ConfigError, match="num_students"):
        AdaptivePruning(0)
