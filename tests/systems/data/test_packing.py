"""DataSculpt packing and its baselines: invariants, determinism, streaming, policies, bad input."""
import functools
import json

import numpy as np
import pytest

from sgl.errors import ConfigError, DatasetError
from sgl.systems.data import (PACK_METHODS, PackConfig, Packing, TfidfSvdEncoder, assign_clusters, bfd_assign,
                              concat_segments, greedy_assign, isodata_centroids, kmeans_centroids, pack_arrays,
                              pack_documents, pack_stream, packing_metrics, read_corpus, wikitext2_sections)
from sgl.systems.data.packing import split_overlong


@functools.lru_cache(maxsize=1)
def _sections(folder: str):
    texts, articles = wikitext2_sections(folder, "train")
    texts, articles = texts[:500], articles[:500]
    embeddings = TfidfSvdEncoder(32, seed=0).fit(texts[:250]).encode(texts)
    lengths = np.array([len(t.split()) for t in texts])
    return texts, articles, lengths, embeddings


@pytest.fixture
def sections(data_path):
    """The first 500 WikiText-2 training sections, article ids, word counts, embeddings (made once)."""
    return _sections(str(data_path("wikitext2", "train.txt").parent))


def _pack(sections, **config):
    texts, articles, lengths, embeddings = sections
    result = pack_arrays(lengths, embeddings, PackConfig(**config))
    result.metrics["label_homogeneity"] = packing_metrics(result.packing, None, articles)["homogeneity"]
    return result


def _check_invariants(result, n_docs, window):
    packing = result.packing.validate()
    assert packing.window_tokens().max() <= window
    # every document placed once, or reported as truncated (split over windows)
    pieces = np.bincount(packing.doc, minlength=n_docs)
    whole = np.flatnonzero(pieces == 1)
    assert set(np.flatnonzero(pieces != 1)) <= set(packing.truncated_docs())
    assert np.all(np.bincount(packing.doc, weights=packing.length, minlength=n_docs)[whole] ==
                  packing.doc_lengths[whole])
    assert result.metrics["docs_truncated"] == packing.truncated_docs().size


@pytest.mark.parametrize("method", PACK_METHODS)
def test_every_method_places_every_document_within_capacity(sections, method):
    texts = sections[0]
    result = _pack(sections, window=1024, method=method)
    _check_invariants(result, len(texts), 1024)
    assert result.packing.dropped_tokens == 0
    m = result.metrics
    assert 0.9 < m["fill_rate"] <= 1.0 and m["tokens"] == sum(len(t.split()) for t in texts)
    if method in ("datasculpt", "bfd"):
        # whole-document packers only cut documents longer than the window
        longer = sum(len(t.split()) > 1024 for t in texts)
        assert m["docs_truncated"] == longer


def test_datasculpt_windows_are_more_related_than_random(sections):
    ds = _pack(sections, window=1024, method="datasculpt").metrics
    rnd = _pack(sections, window=1024, method="random").metrics
    assert ds["intra_window_similarity"] > rnd["intra_window_similarity"] + 0.1
    assert ds["label_homogeneity"] > rnd["label_homogeneity"]
    assert ds["docs_truncated"] < rnd["docs_truncated"]
    assert ds["fill_rate"] > 0.95


def test_packing_is_deterministic_under_a_seed(sections):
    texts = sections[0][:120]
    a = pack_documents(texts, PackConfig(window=700, dim=16, seed=3, fit_docs=60)).packing
    b = pack_documents(texts, PackConfig(window=700, dim=16, seed=3, fit_docs=60)).packing
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("window", "doc", "start", "length"))
    for method in ("datasculpt", "iclm", "random"):
        a = _pack(sections, window=700, method=method, seed=3).packing
        b = _pack(sections, window=700, method=method, seed=3).packing
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("window", "doc", "start", "length"))
    c = _pack(sections, window=700, method="random", seed=4).packing
    assert not np.array_equal(a.doc, c.doc)


def test_streaming_equals_in_memory(sections, tmp_path):
    texts = sections[0]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with open(corpus / "a.jsonl", "w") as handle:
        for text in texts[:90]:
            handle.write(json.dumps({"text": text}) + "\n")
    for i, text in enumerate(texts[90:120]):
        (corpus / f"b{i:03d}.txt").write_text(text)
    cfg = PackConfig(window=900, dim=16, fit_docs=50, train_docs=80, num_clusters=4, seed=1)
    streamed = pack_stream(corpus, tmp_path / "work", cfg, chunk_size=7)
    memory = pack_documents(read_corpus(corpus), cfg)
    for field in ("window", "doc", "start", "length"):
        assert np.array_equal(getattr(streamed.packing, field), getattr(memory.packing, field)), field
    on_disk = Packing.from_jsonl(tmp_path / "work" / "windows.jsonl", memory.packing.doc_lengths, 900)
    assert np.array_equal(on_disk.doc, memory.packing.doc) and np.array_equal(on_disk.window, memory.packing.window)
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    assert report["metrics"]["documents"] == 120
    assert np.load(tmp_path / "work" / "clusters.npy").shape == (120,)


def test_overlong_policies():
    lengths = np.array([25, 4, 10, 3])
    full, items = split_overlong(lengths, 10, "split")
    assert full[0].tolist() == [0, 0] and full[1].tolist() == [0, 10]
    assert items[0].tolist() == [0, 1, 2, 3] and items[1].tolist() == [20, 0, 0, 0]
    assert items[2].tolist() == [5, 4, 10, 3]
    texts = ["w " * 25, "x " * 4, "y " * 10, "z " * 3]
    split = pack_documents(texts, PackConfig(window=10, method="datasculpt", num_clusters=1, dim=2))
    _check_invariants(split, 4, 10)
    assert split.packing.truncated_docs().tolist() == [0] and split.packing.dropped_tokens == 0
    cut = pack_documents(texts, PackConfig(window=10, method="bfd", overlong="truncate"))
    cut.packing.validate()
    assert cut.metrics["dropped_tokens"] == 15 and cut.packing.truncated_docs().tolist() == [0]
    with pytest.raises(DatasetError, match="longer than the window of 10 tokens"):
        pack_documents(texts, PackConfig(window=10, overlong="error"))


def test_bad_input_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="window"):
        PackConfig(window=0)
    with pytest.raises(ConfigError, match="window"):
        PackConfig(window=-5)
    with pytest.raises(DatasetError, match="empty"):
        pack_documents([], PackConfig(window=8))
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no non-empty document"):
        read_corpus(tmp_path)
    void = tmp_path / "void"
    void.mkdir()
    with pytest.raises(DatasetError, match="no \\*.jsonl"):
        read_corpus(void)
    with pytest.raises(DatasetError, match="not a folder"):
        read_corpus(tmp_path / "missing")
    with pytest.raises(ConfigError, match="method"):
        PackConfig(method="magic")


def test_greedy_prefers_the_related_window_and_never_overfills():
    # two seeds (the longest documents) in orthogonal directions; the rest follow their direction
    emb = np.array([[1, 0], [0, 1], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    lengths = np.array([6, 6, 2, 2, 2])
    windows, count = greedy_assign(emb, lengths, 10)
    assert count == 2 and windows[0] != windows[1]
    assert windows[2] == windows[0] and windows[3] == windows[1] and windows[4] == windows[0]
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(300, 8)).astype(np.float32)
    lengths = rng.integers(1, 50, 300)
    windows, count = greedy_assign(emb, lengths, 64)
    assert np.bincount(windows, weights=lengths).max() <= 64 and windows.max() == count - 1
    with pytest.raises(DatasetError, match="split overlong"):
        greedy_assign(emb[:1], np.array([65]), 64)


def test_bfd_matches_its_definition_and_concat_cuts():
    assert bfd_assign(np.array([5, 5, 4, 3, 2, 1]), 10).tolist() == [0, 0, 1, 1, 1, 1]
    assert bfd_assign(np.array([6, 5, 4, 3, 1]), 10).tolist() == [0, 1, 0, 1, 1]
    p = concat_segments(np.array([2, 0, 1]), np.array([3, 9, 4]), 5).validate()
    assert p.windows() == [[(2, 0, 4), (0, 0, 1)], [(0, 1, 2), (1, 0, 3)], [(1, 3, 5)], [(1, 8, 1)]]


def test_metrics_match_brute_force():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    win = np.array([0, 0, 0, 1, 1, 2, 2])
    p = Packing(10, win, np.arange(7), np.zeros(7, int), np.full(7, 3), np.full(7, 3))
    labels = np.array([1, 1, 2, 3, 3, 4, 5])
    m = packing_metrics(p, x, labels)
    expected = []
    for w in range(3):
        members = np.flatnonzero(win == w)
        sims = [x[a] @ x[b] for a in members for b in members if a < b]
        expected.append(np.mean(sims))
    assert m["intra_window_similarity"] == pytest.approx(np.mean(expected))
    assert m["homogeneity"] == pytest.approx((2 / 3 + 1 + 0.5) / 3)
    assert m["fill_rate"] == pytest.approx(21 / 30) and m["padding_tokens"] == 9
    with pytest.raises(DatasetError, match="capacity"):
        Packing(5, win, np.arange(7), np.zeros(7, int), np.full(7, 3), np.full(7, 3)).validate()


def test_clusterings_find_the_groups_and_isodata_splits_and_merges():
    rng = np.random.default_rng(0)
    centres = np.eye(6)[:3]
    x = np.concatenate([c + rng.normal(0, 0.05, (40, 6)) for c in centres]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    truth = np.repeat(np.arange(3), 40)
    labels = assign_clusters(x, kmeans_centroids(x, 3, seed=0))
    assert all(len(set(labels[truth == g])) == 1 for g in range(3)) and len(set(labels)) == 3
    split = isodata_centroids(x, 1, max_size=50, seed=0)  # one start centre of 120 members > max_size
    assert len(split) >= 3
    merged = isodata_centroids(x, 8, merge_cosine=0.9, seed=0)  # 8 start centres collapse to the 3 groups
    assert len(merged) == 3
