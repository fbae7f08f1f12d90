"""TransE embeddings for featureless node types (sgl.ops.hetero_embed, fill_featureless('transe'))."""
import pytest
import torch

from sgl.data import HeteroGraph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.models.hetero import HeteroGAMLPConfig, NARSConfig
from sgl.ops import fill_featureless
from sgl.ops.hetero_embed import transe_embeddings, transe_loss


def _graph(seed=0, num_papers=60, num_authors=40):
    """Two communities: authors of community c write papers of community c only."""
    g = torch.Generator().manual_seed(seed)
    pc = torch.arange(num_papers) % 2
    ac = torch.arange(num_authors) % 2
    src, dst = [], []
    for a in range(num_authors):
        pool = (pc == ac[a]).nonzero().flatten()
        for p in pool[torch.randperm(pool.numel(), generator=g)[:4]]:
            src.append(a)
            dst.append(int(p))
    return HeteroGraph.from_edge_index(
        {"paper": num_papers, "author": num_authors}, {("author", "writes", "paper"): torch.tensor([src, dst])},
        x_dict={"paper": torch.randn(num_papers, 8, generator=g) * 3.0}, target="paper", y=pc), ac


def _ranking_accuracy(hg, emb_author, emb_paper, relation):
    """How often a true (author, paper) pair is closer under TransE than the same author with a random paper."""
    ei = hg.edge_index(("author", "writes", "paper"))
    g = torch.Generator().manual_seed(1)
    fake = torch.randint(0, emb_paper.size(0), (ei.size(1),), generator=g)
    pos = (emb_author[ei[0]] + relation - emb_paper[ei[1]]).norm(dim=1)
    neg = (emb_author[ei[0]] + relation - emb_paper[fake]).norm(dim=1)
    return float((pos < neg).float().mean())


def test_transe_loss_matches_hand_computation():
    e = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    w = torch.tensor([[1.0, 0.0]])
    idx = torch.tensor
    # positive (0, r, 1): |0 + (1,0) - (1,0)| = 0; negative (0, r, 2): |(1,0) - (0,2)| = sqrt(5)
    assert float(transe_loss(e, w, (idx([0]), idx([0]), idx([1])), (idx([0]), idx([0]), idx([2])), 3.0)) == \
        pytest.approx(3.0 - 5 ** 0.5)
    # L1: |(1,-2)|_1 = 3 -> margin 3 - 3 = 0
    assert float(transe_loss(e, w, (idx([0]), idx([0]), idx([1])), (idx([0]), idx([0]), idx([2])), 3.0, p=1)) == 0.0


def test_transe_is_seeded_trains_and_learns_the_relation():
    hg, _ = _graph()
    history = []
    a = transe_embeddings(hg, 16, types=["author", "paper"], epochs=30, batch_size=64, lr=0.05, seed=3,
                          history=history)
    b = transe_embeddings(hg, 16, types=["author", "paper"], epochs=30, batch_size=64, lr=0.05, seed=3)
    c = transe_embeddings(hg, 16, types=["author", "paper"], epochs=30, batch_size=64, lr=0.05, seed=4)
    assert torch.equal(a["author"], b["author"]) and not torch.equal(a["author"], c["author"])
    assert len(history) == 30 and history[-1] < 0.5 * history[0]
    assert torch.allclose(a["author"].norm(dim=1), torch.ones(40), atol=1e-5)
    # the relation vector is not returned: recover it as the mean translation of the true edges
    ei = hg.edge_index(("author", "writes", "paper"))
    relation = (a["paper"][ei[1]] - a["author"][ei[0]]).mean(0)
    untrained = transe_embeddings(hg, 16, types=["author", "paper"], epochs=1, lr=1e-6, seed=3)
    r0 = (untrained["paper"][ei[1]] - untrained["author"][ei[0]]).mean(0)
    assert _ranking_accuracy(hg, a["author"], a["paper"], relation) > 0.8
    assert _ranking_accuracy(hg, untrained["author"], untrained["paper"], r0) < 0.7
    # the two author communities separate: same-community authors are closer than cross-community ones
    _, ac = _graph()
    d = torch.cdist(a["author"], a["author"])
    same = (ac[:, None] == ac[None, :]) & ~torch.eye(40, dtype=torch.bool)
    assert float(d[same].mean()) < float(d[ac[:, None] != ac[None, :]].mean())


def test_fill_featureless_transe_fills_only_missing_types_at_the_target_scale():
    hg, _ = _graph()
    x = fill_featureless(hg, "transe", seed=0)
    assert torch.equal(x["paper"], hg.x_dict["paper"])
    assert x["author"].shape == (40, 8)
    target_norm = float(hg.x_dict["paper"].norm(dim=1).mean())
    assert torch.allclose(x["author"].norm(dim=1), torch.full((40,), target_norm), rtol=1e-4)
    assert torch.equal(x["author"], fill_featureless(hg, "transe", seed=0)["author"])
    assert fill_featureless(hg, "transe", dim=4)["author"].shape == (40, 4)


def test_transe_bad_input():
    hg, _ = _graph()
    with pytest.raises(ConfigError, match="p must be 1"):
        transe_embeddings(hg, 8, p=3)
    with pytest.raises(ConfigError, match="TransE dim"):
        transe_embeddings(hg, 0)
    with pytest.raises(ConfigError, match="TransE lr"):
        transe_embeddings(hg, 8, lr=0.0)
    with pytest.raises(GraphError):
        transe_embeddings(hg, 8, types=["venue"])
    empty = HeteroGraph.from_edge_index({"p": 3, "a": 2}, {("a", "w", "p"): torch.zeros(2, 0, dtype=torch.long)},
                                        x_dict={"p": torch.randn(3, 2)}, target="p")
    with pytest.raises(ConfigError, match="needs edges"):
        transe_embeddings(empty, 4)
    bare = HeteroGraph.from_edge_index({"p": 3, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1], [0, 2]])}, target="p")
    with pytest.raises(FeatureError, match="needs dim"):
        fill_featureless(bare, "transe")
    assert transe_embeddings(hg, 8, types=[]) == {}


def test_models_select_transe_beside_the_other_fills():
    assert HeteroGAMLPConfig(featureless="transe").featureless == "transe"
    assert NARSConfig(featureless="transe").featureless == "transe"
    with pytest.raises(ConfigError, match="featureless"):
        HeteroGAMLPConfig(featureless="complex")
