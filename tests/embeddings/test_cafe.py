"""HotSketch / HotSketch+ invariants, top-k recall vs SpaceSaving and Count-Min, CAFE embeddings."""
import numpy as np
import pytest
import torch

from sgl.embeddings import (CAFEEmbedding, CAFEPlusEmbedding, CountMinTopK, HotSketch, HotSketchPlus, SpaceSaving,
                            budget_bytes, build_embedding, hash_ids, split_budget)
from sgl.embeddings.hotsketch import EMPTY_KEY, bucket_of
from sgl.errors import EmbeddingError


def zipf_stream(n_items, universe, a, seed):
    rng = np.random.default_rng(seed)
    p = np.arange(1, universe + 1, dtype=np.float64) ** -a
    return rng.permutation(universe)[rng.choice(universe, size=n_items, p=p / p.sum())]


def check_partition(sketch):
    keys, hot_ids = sketch.hot_assignments()
    free = sketch.free_ids()
    assert len(set(hot_ids.tolist())) == len(hot_ids), "a hot id is assigned twice"
    assert len(set(keys.tolist())) == len(keys), "a key holds two hot ids"
    assert sorted(hot_ids.tolist() + free.tolist()) == list(range(sketch.num_hot)), "free + assigned != hot table"
    assert (sketch.scores >= 0).all()
    stored = sketch.keys[sketch.keys != EMPTY_KEY]
    assert len(np.unique(stored)) == len(stored), "a key sits in two slots"
    rows, _ = np.nonzero(sketch.keys != EMPTY_KEY)
    assert (bucket_of(sketch.keys[sketch.keys != EMPTY_KEY], sketch.num_buckets) == rows).all()


def test_hotsketch_invariants_under_random_inserts_and_decays():
    rng = np.random.default_rng(0)
    sketch = HotSketch(num_buckets=16, num_hot=16, threshold=4.0, decay_factor=0.7, decay_every=2.0)
    ever_hot = {}
    for step in range(300):
        ids = zipf_stream(64, 500, 1.1, step)
        keys, hot = sketch.insert(ids, rng.random(64).astype(np.float32) * 2)
        released_keys, released_hot = sketch.pop_released()
        for key in released_keys.tolist():
            ever_hot.pop(key, None)
        for key, h in zip(keys.tolist(), hot.tolist()):
            assert key not in ever_hot, "a hot key was promoted again without being demoted"
            ever_hot[key] = h
        if step % 50 == 49:
            demoted, _ = sketch.decay(0.5)
            for key in demoted.tolist():
                ever_hot.pop(key, None)
        check_partition(sketch)
        assigned_keys, assigned_ids = sketch.hot_assignments()
        assert dict(zip(assigned_keys.tolist(), assigned_ids.tolist())) == ever_hot


def test_hotsketch_promotes_at_threshold_and_decay_demotes():
    sketch = HotSketch(num_buckets=4, num_hot=2, threshold=3.0, decay_every=0)
    keys, hot = sketch.insert(np.array([10, 10]), np.ones(2))
    assert keys.size == 0 and sketch.query(np.array([10]))[1][0] == 2.0
    keys, hot = sketch.insert(np.array([10, 11, 11, 11]), np.ones(4))
    assert keys.tolist() == [10, 11] and sorted(hot.tolist()) == [0, 1] and sketch.num_free == 0
    sketch.insert(np.array([12, 12, 12, 12]), np.ones(4))  # no free id left: 12 stays cold
    assert sketch.query(np.array([12]))[0][0] == -1
    sketch.insert(np.array([10] * 10), np.ones(10))
    demoted, ids = sketch.decay(0.5)  # 10: 13 -> 6.5 stays; 11: 3 -> 1.5 demoted
    assert demoted.tolist() == [11] and sketch.query(np.array([11]))[0][0] == -1
    assert sketch.query(np.array([10]))[0][0] >= 0
    check_partition(sketch)
    keys, _ = sketch.insert(np.array([12]), np.ones(1))  # its freed id is reused
    assert keys.tolist() == [12]


def test_hotsketch_full_bucket_inherits_or_drops():
    sketch = HotSketch(num_buckets=1, num_hot=1, threshold=100.0, decay_every=0)
    sketch.insert(np.array([1, 2, 3, 4]), np.array([5.0, 1.0, 2.0, 3.0]))
    sketch.insert(np.array([9]), np.array([1.0]))  # replaces key 2 (score 1) and inherits it
    hot, score = sketch.query(np.array([2, 9]))
    assert score.tolist() == [0.0, 2.0]
    sketch.threshold = 2.0
    sketch.insert(np.array([9]), np.array([0.0]))  # 9 reaches the threshold: hot
    assert sketch.query(np.array([9]))[0][0] == 0
    sketch.scores[:] = [5.0, 1.0, 5.0, 5.0]  # the hot slot is now the smallest: an insert is dropped
    sketch.insert(np.array([77]), np.array([1.0]))
    assert sketch.query(np.array([77]))[1][0] == 0.0 and sketch.query(np.array([9]))[0][0] == 0


def test_automatic_decay_runs_when_due():
    sketch = HotSketch(num_buckets=2, num_hot=2, threshold=1.0, decay_factor=0.1, decay_every=1.0)
    sketch.insert(np.array([1, 2, 3]), np.ones(3))  # 3 > 1*2*1: the next insert decays first
    assert sketch.num_free == 0
    sketch.insert(np.array([5]), np.array([0.5]))
    released, _ = sketch.pop_released()
    assert sorted(released.tolist()) == [1, 2] and sketch.num_free == 2


def test_hotsketch_plus_invariants_and_threshold_tracks_top_k():
    stream = zipf_stream(60_000, 5_000, 1.1, seed=1)
    sketch = HotSketchPlus(num_buckets=45, num_hot=50, num_filter_buckets=5, threshold=1.0, alpha=1.001,
                           adjust_every=5)
    for start in range(0, stream.size, 500):
        sketch.insert(stream[start:start + 500], np.ones(500))
        sketch.step()
        check_partition(sketch)
    assert sketch.num_free == 0 and sketch.threshold > 1.0  # raised from 1 to the 50th-largest score
    hot_keys, _ = sketch.hot_assignments()
    true = np.argsort(-np.bincount(stream, minlength=5_000), kind="stable")[:50]
    assert len(set(hot_keys.tolist()) & set(true.tolist())) >= 40


def test_global_time_decay_rescales_without_changing_effective_scores():
    sketch = HotSketchPlus(num_buckets=4, num_hot=4, num_filter_buckets=1, threshold=1.0, alpha=1.9,
                           adjust_every=0)
    sketch.insert(np.array([3, 3, 3]), np.ones(3))
    rescaled = False
    for _ in range(16):  # 1.9^16 > 1e4: one rescale happens on the way
        before = sketch.effective_scores().max()
        sketch.step()
        rescaled |= sketch.scale < 1.9
        # each step divides every old score by alpha, with or without the rescale
        assert sketch.effective_scores().max() == pytest.approx(before / 1.9, rel=1e-4)
    assert rescaled and sketch.scale < 1e4
    sketch.insert(np.array([4]), np.ones(1))  # a new insert weighs 1 in current units
    hot, score = sketch.query(np.array([3, 4]))
    assert score[1] / sketch.scale == pytest.approx(1.0, rel=1e-4)
    assert score[0] / sketch.scale == pytest.approx(3.0 / 1.9 ** 16, rel=1e-3)


@pytest.mark.parametrize("a", [1.05, 1.1, 1.3])
def test_topk_recall_at_equal_bytes(a):
    """CAFE+'s sketch (LRU filter + automatic threshold) beats SpaceSaving and Count-Min+heap of
    the same bytes on every skew; plain HotSketch (fixed threshold 20) beats Count-Min and stays
    within 0.05 of SpaceSaving (measured: level with it at a <= 1.1, below it at a = 1.3)."""
    k, universe = 100, 20_000
    stream = zipf_stream(100_000, universe, a, seed=3)
    true = set(np.argsort(-np.bincount(stream, minlength=universe), kind="stable")[:k].tolist())
    recall = {}
    plain = HotSketch(num_buckets=k, num_hot=k, threshold=20.0, decay_every=0)
    plain.insert(stream, np.ones(stream.size))
    plus = HotSketchPlus(num_buckets=90, num_hot=k, num_filter_buckets=10, threshold=1.0, alpha=1.0)
    for start in range(0, stream.size, 1000):
        plus.insert(stream[start:start + 1000], np.ones(1000))
        plus.step()
    budget = plain.memory_bytes()
    assert plus.memory_bytes() <= budget
    ss = SpaceSaving.from_bytes(budget)
    ss.insert(stream, np.ones(stream.size))
    cm = CountMinTopK.from_bytes(budget, k)
    cm.insert(stream, np.ones(stream.size))
    assert ss.memory_bytes() <= budget and cm.memory_bytes() <= budget
    for name, sketch in (("hotsketch", plain), ("hotsketch+", plus), ("spacesaving", ss), ("countmin", cm)):
        recall[name] = len(true & set(sketch.top_k(k).tolist())) / k
    print(a, recall)
    assert recall["hotsketch+"] >= max(recall["spacesaving"], recall["countmin"])
    assert recall["hotsketch"] >= recall["countmin"]
    assert recall["hotsketch"] >= recall["spacesaving"] - 0.05


def test_cafe_forward_uses_hot_rows_and_migrates_hash_rows():
    emb = CAFEEmbedding(1_000, 4, num_hot=8, hash_rows=5, threshold=2.5, use_frequency=True)
    ids = torch.tensor([[7, 8], [7, 9]])
    out = emb(ids)
    cold = emb.hash_weight[hash_ids(torch.tensor(7), 5)]
    assert torch.equal(out[0, 0], cold)
    optimizer = torch.optim.Adam(emb.parameters(), lr=0.1)
    out.sum().backward()
    emb.after_backward(optimizer)  # 7 counted twice: 2 < 2.5, still cold
    assert emb.sketch.query(np.array([7]))[0][0] == -1
    optimizer.step()
    optimizer.zero_grad()
    out = emb(ids)
    out.sum().backward()
    emb.after_backward(optimizer)  # 7 reaches 4 >= 2.5: hot, its hash row copied over
    hot_id = int(emb.sketch.query(np.array([7]))[0][0])
    assert hot_id >= 0
    assert torch.equal(emb.hot_weight[hot_id], emb.hash_weight[hash_ids(torch.tensor(7), 5)])
    assert torch.all(emb.hot_weight.grad[hot_id] == 0)
    assert torch.equal(emb(ids)[0, 0], emb.hot_weight[hot_id])


def test_gradient_norm_importance_is_normalised_to_mean_one():
    emb = CAFEEmbedding(100, 2, num_hot=4, hash_rows=3, threshold=1e6)
    ids = torch.tensor([[1, 2, 3, 3]])
    out = emb(ids)
    (out * torch.tensor([[1.0], [2.0], [3.0], [3.0]])).sum().backward()
    keys, values = emb.importance()
    assert keys.tolist() == [1, 2, 3]
    assert values.sum() == pytest.approx(4.0) and values[2] / values[0] == pytest.approx(6.0)


def test_budget_split_and_exact_bytes():
    for ratio in (10, 100, 1000):
        budget = budget_bytes(1_000_000, 16, ratio)
        for emb in (CAFEEmbedding.from_ratio(1_000_000, 16, ratio), CAFEPlusEmbedding.from_ratio(1_000_000, 16, ratio)):
            assert emb.memory_bytes() == budget
            params = sum(p.numel() * 4 for p in emb.parameters())
            assert params + emb.sketch.memory_bytes() == budget
            assert emb.num_hot <= emb.sketch.num_buckets <= emb.num_hot + 3
    hot, buckets, filters, hash_rows, medium = split_budget(64_000, 16, 0.3, 1 / 9, 0.5)
    assert buckets == hot
    assert hot * 64 + (hot + filters) * 48 + hot * 4 + (hash_rows + medium) * 64 == 64_000
    assert 0.3 * 64_000 <= (hash_rows + medium) * 64 <= 0.3 * 64_000 + 16 * 64 + 116


def test_budget_smaller_than_the_sketch():
    with pytest.raises(EmbeddingError, match="smaller than the sketch"):
        split_budget(150, 16, 0.5)
    with pytest.raises(EmbeddingError, match="smaller than the sketch"):
        CAFEEmbedding.from_ratio(100, 16, ratio=100)
    with pytest.raises(EmbeddingError, match="hash_rate"):
        split_budget(64_000, 16, 1.5)
    with pytest.raises(EmbeddingError, match="sketch keys"):
        HotSketch(4, 4, 1.0).insert(np.array([-1]), np.ones(1))
    with pytest.raises(EmbeddingError, match="importance"):
        HotSketch(4, 4, 1.0).insert(np.array([1]), np.array([-1.0]))


def test_cafe_plus_medium_features_add_a_second_row():
    emb = CAFEPlusEmbedding(1_000, 4, num_hot=2, hash_rows=5, num_filter_buckets=1, medium_rows=3,
                            threshold=10.0, adjust_every=0, use_frequency=True)
    optimizer = torch.optim.SGD(emb.parameters(), lr=0.0)
    for _ in range(3):  # 3 occurrences of id 5: medium (>= 2 = 0.2*10) but not hot
        out = emb(torch.tensor([[5]]))
        out.sum().backward()
        emb.after_backward(optimizer)
    hot, medium = emb.lookup(torch.tensor([5, 6]))
    assert hot.tolist() == [-1, -1] and medium.tolist() == [True, False]
    expected = emb.hash_weight[hash_ids(torch.tensor(5), 5)] + emb.medium_weight[hash_ids(torch.tensor(5), 3, 1)]
    assert torch.allclose(emb(torch.tensor([[5]]))[0, 0], expected)


def test_migration_carries_the_hash_rows_optimizer_state():
    emb = CAFEEmbedding(1_000, 4, num_hot=4, hash_rows=3, threshold=1.5, use_frequency=True)
    optimizer = torch.optim.Adam(emb.parameters(), lr=0.01)
    ids = torch.tensor([[11]])
    for _ in range(2):  # first step: 11 is cold (count 1); second: promoted after backward
        optimizer.zero_grad()
        emb(ids).sum().backward()
        emb.after_backward(optimizer)
        optimizer.step() if _ == 0 else None
    hot_id = int(emb.sketch.query(np.array([11]))[0][0])
    row = int(hash_ids(torch.tensor(11), 3))
    state_hot, state_hash = optimizer.state[emb.hot_weight], optimizer.state[emb.hash_weight]
    assert hot_id >= 0
    assert torch.equal(state_hot["exp_avg"][hot_id], state_hash["exp_avg"][row])
    assert torch.equal(state_hot["exp_avg_sq"][hot_id], state_hash["exp_avg_sq"][row])
    assert state_hash["exp_avg_sq"][row].abs().sum() > 0


@pytest.mark.parametrize("kind", ["cafe", "cafe+"])
@pytest.mark.parametrize("ratio", [10, 100, 1000])
def test_field_layout_spends_exactly_the_budget(kind, ratio):
    dims = [150_000, 40_000, 9_000, 900, 100]
    emb = build_embedding(kind, sum(dims), 16, ratio=ratio, cold="field", field_dims=dims, hash_rate=0.5)
    assert emb.memory_bytes() == budget_bytes(sum(dims), 16, ratio)
    whole = [f for f, (r, d) in enumerate(zip(emb.layout.rows, dims)) if r == d]
    assert whole == [f for f, d in enumerate(dims) if d <= 2000 / ratio]


def test_field_layout_reads_per_field_rows_and_keeps_whole_fields_out_of_the_sketch():
    dims = [5_000, 100]
    emb = CAFEEmbedding.from_ratio(sum(dims), 4, ratio=10, cold="field", field_dims=dims, hash_rate=0.5,
                                   threshold=0.5)
    rows = emb.layout.rows
    assert rows[1] == 100 and rows[0] == emb.hash_rows - 100
    ids = torch.tensor([[3, 5_000 + 7], [3 + rows[0], 5_000 + 7]])
    out = emb(ids)
    assert torch.equal(out[0, 0], emb.hash_weight[3]) and torch.equal(out[1, 0], out[0, 0])  # id mod rows_0
    assert torch.equal(out[0, 1], emb.hash_weight[rows[0] + 7])                              # whole field
    (out * torch.randn_like(out)).sum().backward()
    emb.after_backward()
    hot, _ = emb.sketch.query(np.array([3, 3 + rows[0], 5_007]))
    assert hot[0] >= 0 and hot[1] >= 0 and hot[2] == -1  # compressed ids become hot, whole-field ids never
    # a newly hot id starts from its own field's cold row
    assert torch.equal(emb.hot_weight[hot[0]], emb.hash_weight[3])
    out2 = emb(ids)
    assert torch.equal(out2[0, 1], emb.hash_weight[rows[0] + 7])


def test_field_layout_importance_is_normalised_per_field():
    dims = [5_000, 5_000]
    emb = CAFEEmbedding.from_ratio(sum(dims), 4, ratio=10, cold="field", field_dims=dims, hash_rate=0.5)
    ids = torch.tensor([[1, 5_001], [2, 5_002], [2, 5_003]])
    out = emb(ids)
    (out[:, 0] * 100.0 + out[:, 1] * torch.tensor([1.0, 2.0, 3.0])[:, None]).sum().backward()
    keys, values = emb.importance()
    per_key = dict(zip(keys.tolist(), values.tolist()))
    assert per_key[1] + per_key[2] == pytest.approx(3.0) and per_key[5_001] + per_key[5_002] + per_key[5_003] == \
        pytest.approx(3.0)
    assert per_key[5_003] == pytest.approx(3 * 3 / 6)


def test_field_layout_bad_inputs():
    with pytest.raises(EmbeddingError, match="field_dims summing"):
        CAFEEmbedding.from_ratio(1_000, 4, ratio=10, cold="field", field_dims=[10])
    with pytest.raises(EmbeddingError, match="cold must be"):
        CAFEEmbedding.from_ratio(1_000, 4, ratio=10, cold="fields")
