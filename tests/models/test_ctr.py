"""CTR models: shapes, the FM/cross/interaction formulas, any backend, learning, bad input."""
import pytest
import torch

from sgl.embeddings import build_embedding
from sgl.errors import ConfigError
from sgl.models.ctr import CTR_MODELS, DCN, DLRM, CTRModelConfig, DeepFM, build_ctr_model


@pytest.mark.parametrize("name", sorted(CTR_MODELS))
@pytest.mark.parametrize("kind", ["full", "hash", "qr", "cafe", "cafe+"])
def test_every_model_runs_on_every_backend(name, kind):
    emb = build_embedding(kind, 20_000, 8, ratio=1 if kind == "full" else 10)
    model = build_ctr_model(name, emb, num_fields=4, embed_dim=8, num_dense=3, hidden=[16])
    ids = torch.randint(0, 20_000, (5, 4))
    out = model(torch.randn(5, 3), ids)
    assert out.shape == (5,) and torch.isfinite(out).all()
    out.sum().backward()
    emb.after_backward()
    assert model.memory_bytes() >= emb.memory_bytes()


def test_deepfm_second_order_is_the_pairwise_sum():
    emb = build_embedding("full", 10, 4)
    model = DeepFM(emb, 3, 4, 0, CTRModelConfig(hidden=[2]))
    for p in list(model.first_order.parameters()) + list(model.deep.parameters()):
        torch.nn.init.zeros_(p)
    ids = torch.tensor([[1, 2, 3]])
    v = emb.weight[ids[0]]
    pairwise = sum(v[i] @ v[j] for i in range(3) for j in range(i + 1, 3))
    assert model(torch.zeros(1, 0), ids).item() == pytest.approx(pairwise.item(), rel=1e-5)


def test_dcn_cross_layer_formula():
    emb = build_embedding("full", 10, 2)
    model = DCN(emb, 1, 2, 1, CTRModelConfig(hidden=[3], num_cross=1))
    dense, ids = torch.tensor([[0.5]]), torch.tensor([[4]])
    x0 = torch.cat([emb.weight[4], dense[0]])
    x1 = x0 * (x0 @ model.cross_w[0]) + model.cross_b[0] + x0
    expected = model.out(torch.cat([x1, model.deep(x0[None])[0]]))
    assert model(dense, ids).item() == pytest.approx(expected.item(), rel=1e-5)


def test_dlrm_interactions_count_and_no_dense():
    model = DLRM(build_embedding("full", 10, 4), 3, 4, 0, CTRModelConfig(hidden=[8], bottom=[4]))
    assert model._rows.numel() == 6  # 4 vectors (bottom + 3 fields): 6 pairs
    assert model(torch.zeros(2, 0), torch.tensor([[1, 2, 3], [4, 5, 6]])).shape == (2,)


@pytest.mark.parametrize("name", sorted(CTR_MODELS))
def test_models_fit_a_planted_signal(name):
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2000, 2))
    labels = ((ids[:, 0] % 2) ^ (ids[:, 1] % 3 == 0)).float()
    model = build_ctr_model(name, build_embedding("full", 50, 8), 2, 8, 1, hidden=[32])
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    dense = torch.zeros(2000, 1)
    for _ in range(150):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(dense, ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3


def test_bad_configs_and_shapes():
    emb = build_embedding("full", 10, 4)
    with pytest.raises(ConfigError, match="unknown CTR model"):
        build_ctr_model("lr", emb, 2, 4, 0)
    with pytest.raises(ConfigError, match="unknown CTR model option"):
        build_ctr_model("wdl", emb, 2, 4, 0, hiden=[3])
    with pytest.raises(ConfigError, match="dim 4 but embed_dim=8"):
        build_ctr_model("wdl", emb, 2, 8, 0)
    model = build_ctr_model("wdl", emb, 2, 4, 1, hidden=[3])
    with pytest.raises(ConfigError, match=r"ids must be \[batch, 2\]"):
        model(torch.zeros(3, 1), torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ConfigError, match=r"dense must be \[3, 1\]"):
        model(torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ConfigError, match="dropout"):
        CTRModelConfig(dropout=1.5)
    base = CTRModelConfig(hidden=[7], num_cross=1)
    merged = build_ctr_model("dcn", emb, 2, 4, 0, config=base, dropout=0.1)
    assert merged.config.hidden == [7] and merged.config.num_cross == 1 and merged.config.dropout == 0.1
