"""Full / hash / QR tables: shapes, exact bytes, collisions, bad ids and ratios."""
import math

import pytest
import torch

from sgl.embeddings import (EMBEDDINGS, FullEmbedding, HashEmbedding, QREmbedding, budget_bytes, build_embedding,
                            hash_ids)
from sgl.embeddings.tables import qr_split
from sgl.errors import EmbeddingError


@pytest.mark.parametrize("ratio", [1, 10, 100, 1000])
def test_every_backend_spends_exactly_the_budget(ratio):
    n, dim = 200_000, 16
    budget = budget_bytes(n, dim, ratio)
    assert budget == round(n / ratio) * dim * 4
    for kind in EMBEDDINGS:
        if kind == "full" and ratio != 1:
            continue
        options = {"field_dims": [150_000, 40_000, 10_000]} if kind == "hash-field" else {}
        emb = build_embedding(kind, n, dim, ratio=ratio, **options)
        params = sum(p.numel() * 4 for p in emb.parameters())
        assert emb.memory_bytes() == budget, kind
        assert params <= budget


def test_full_is_an_embedding_lookup():
    emb = FullEmbedding(10, 4)
    ids = torch.tensor([[0, 9], [3, 3]])
    assert torch.equal(emb(ids), emb.weight[ids])
    assert emb.memory_bytes() == 10 * 4 * 4


def test_hash_collisions_follow_the_hash():
    emb = HashEmbedding(1000, 4, rows=7)
    ids = torch.arange(1000)
    rows = hash_ids(ids, 7)
    assert rows.min() >= 0 and rows.max() < 7
    assert torch.bincount(rows, minlength=7).min() > 100  # spread over every row
    out = emb(ids[None, :])[0]
    same = (rows[:, None] == rows[None, :])
    assert torch.equal(torch.cdist(out, out) == 0, same)


def test_qr_pairs_are_unique_when_the_budget_allows():
    for n, rows in [(10_000, 1_000), (100_000, 700), (50, 100)]:
        q, m = qr_split(n, rows)
        assert q + m == rows and q * m >= n
    emb = QREmbedding.from_ratio(5_000, 8, ratio=10)
    assert emb.collision_free
    ids = torch.arange(5_000)
    pairs = torch.stack([(ids // emb.m) % emb.q, ids % emb.m], 1)
    assert torch.unique(pairs, dim=0).shape[0] == 5_000
    out = emb(ids[None])[0]
    assert torch.allclose(out[17], emb.quotient[17 // emb.m] + emb.remainder[17 % emb.m])


def test_qr_falls_back_to_halves_below_two_sqrt_n():
    q, m = qr_split(1_000_000, 100)
    assert (q, m) == (50, 50)
    emb = QREmbedding(1_000_000, 4, q, m)
    assert not emb.collision_free and emb(torch.tensor([[999_999]])).shape == (1, 1, 4)


@pytest.mark.parametrize("kind", ["full", "hash", "hash-field", "qr", "cafe", "cafe+"])
def test_negative_or_oversized_ids_raise(kind):
    options = {"field_dims": [9_000, 1_000]} if kind == "hash-field" else {}
    emb = build_embedding(kind, 10_000, 8, ratio=1 if kind == "full" else 10, **options)
    with pytest.raises(EmbeddingError, match=r"ids span \[-1, 3\]"):
        emb(torch.tensor([[-1, 3]]))
    with pytest.raises(EmbeddingError, match="num_embeddings=10000"):
        emb(torch.tensor([[0, 10_000]]))
    with pytest.raises(EmbeddingError, match="int64"):
        emb(torch.tensor([[0.5]]))


@pytest.mark.parametrize("ratio", [0, -3, float("nan"), float("inf"), 0.5, "10", True])
def test_bad_compression_ratios(ratio):
    with pytest.raises(EmbeddingError, match="compression ratio"):
        build_embedding("hash", 1000, 8, ratio=ratio)


def test_unknown_backend_and_bad_options():
    with pytest.raises(EmbeddingError, match="available: full, hash"):
        build_embedding("nope", 10, 2)
    with pytest.raises(EmbeddingError, match="full table has compression ratio 1"):
        build_embedding("full", 10, 2, ratio=10)
    with pytest.raises(EmbeddingError, match="bad option"):
        build_embedding("hash", 10, 2, ratio=2, colour="red")
    assert math.isclose(budget_bytes(10, 2, 3), 3 * 2 * 4)


def test_field_hash_keeps_collisions_inside_a_field():
    from sgl.embeddings import FieldHashEmbedding

    emb = FieldHashEmbedding.from_ratio(1_010, 4, ratio=10, field_dims=[1_000, 10], exempt_small=False)
    assert emb.rows == [100, 1] and emb.memory_bytes() == 101 * 4 * 4
    out = emb(torch.tensor([[7, 1_003], [107, 1_009]]))
    assert torch.equal(out[0, 0], out[1, 0]) and torch.equal(out[0, 1], out[1, 1])
    assert not torch.equal(out[0, 0], out[0, 1])
    with pytest.raises(EmbeddingError, match="field_dims summing"):
        FieldHashEmbedding.from_ratio(1_010, 4, ratio=10, field_dims=[5])
    with pytest.raises(EmbeddingError, match="cannot give each of 2 fields a row"):
        FieldHashEmbedding.from_ratio(1_010, 4, ratio=1_000, field_dims=[1_000, 10])
    with pytest.raises(EmbeddingError, match="2 fields"):
        emb(torch.tensor([[1, 2, 3]]))


def test_field_hash_keeps_small_fields_whole_as_the_cafe_artifact():
    """A field of n ids is compressed only when n > 2000 / ratio; smaller fields are paid first."""
    from sgl.embeddings import FieldHashEmbedding
    from sgl.embeddings.tables import field_rows

    dims = [50_000, 3_000, 150, 15, 2]
    for ratio, whole in [(10, {2, 3, 4}), (100, {3, 4}), (1_000, {4})]:
        total = round(sum(dims) / ratio)
        rows = field_rows(dims, total, ratio)
        assert sum(rows) == total
        assert {f for f in range(len(dims)) if rows[f] == dims[f]} == whole
        comp = [f for f in range(len(dims)) if f not in whole]
        assert rows[comp[0]] >= rows[comp[1]] >= 1  # the rest in proportion to the ids
        emb = FieldHashEmbedding.from_ratio(sum(dims), 4, ratio=ratio, field_dims=dims)
        assert emb.rows == rows and emb.memory_bytes() == budget_bytes(sum(dims), 4, ratio)
    # whole fields only while every compressed field keeps a row: 3 rows for fields of 2, 2, 1000
    assert field_rows([2, 2, 1_000], 3, ratio=1_000) == [1, 1, 1]
    assert field_rows([2, 2, 1_000], 5, ratio=1_000) == [2, 2, 1]
    emb = FieldHashEmbedding.from_ratio(1_004, 2, ratio=200, field_dims=[1_000, 4])
    ids = torch.tensor([[0, 1_000], [1, 1_001], [2, 1_002], [3, 1_003]])
    out = emb(ids)
    assert torch.unique(out[:, 1], dim=0).shape[0] == 4  # the 4-id field: one row per id
