"""NARS-SIGN and heterogeneous GAMLP on node types whose features differ in width (DBLP's layout:
authors 334-d bag of words, papers 4,231-d, terms 50-d vectors, venues featureless)."""
import pytest
import torch

from sgl.data import HeteroGraph
from sgl.errors import FeatureError
from sgl.models import build_model, default_train_config, model_config
from sgl.ops import align_type_features, fill_featureless, nars_propagate, sample_relation_subsets
from sgl.tasks import TrainConfig, Trainer


def _dblp_like(seed=0, n_author=120, n_paper=240, n_term=60, n_venue=4, classes=3):
    """Authors (target) write papers in their class's venue; features are class signal + noise, each
    type at its own width (author 12, paper 40, term 6; venues have none)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n_author) % classes
    paper_class = torch.randint(0, classes, (n_paper,), generator=g)
    writes = []
    for p in range(n_paper):  # each paper: 2 authors of its class
        pool = (y == paper_class[p]).nonzero().flatten()
        writes += [(int(pool[torch.randint(0, len(pool), (1,), generator=g)]), p) for _ in range(2)]
    ap = torch.tensor(writes).t()
    pt = torch.stack([torch.arange(n_paper).repeat(2), torch.randint(0, n_term, (2 * n_paper,), generator=g)])
    pv = torch.stack([torch.arange(n_paper), paper_class % n_venue])

    def feats(n, d, cls):
        return torch.randn(n, d, generator=g) + 0.3 * torch.nn.functional.one_hot(cls, d).float()

    x = {"author": feats(n_author, 12, y), "paper": feats(n_paper, 40, paper_class),
         "term": torch.randn(n_term, 6, generator=g)}
    perm = torch.randperm(n_author, generator=g)
    masks = {name: torch.zeros(n_author, dtype=torch.bool) for name in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][perm[:60]], masks["val_mask"][perm[60:90]], masks["test_mask"][perm[90:]] = True, True, True
    return HeteroGraph.from_edge_index(
        {"author": n_author, "paper": n_paper, "term": n_term, "venue": n_venue},
        {("author", "writes", "paper"): ap, ("paper", "has", "term"): pt, ("paper", "in", "venue"): pv},
        x_dict=x, target="author", y=y, **masks)


def test_alignment_is_per_type_blocks_and_propagation_stays_linear():
    graph = _dblp_like()
    aligned = align_type_features(graph.x_dict, max_width=256)
    assert {t: tuple(x.shape) for t, x in aligned.items()} == {"author": (120, 58), "paper": (240, 58),
                                                               "term": (60, 58)}
    assert torch.equal(aligned["paper"][:, 12:52], graph.x_dict["paper"])
    assert not aligned["paper"][:, :12].any() and not aligned["paper"][:, 52:].any()
    # hop features of the aligned input = the sum of each type's own propagation, and each of those
    # lives in its type's block: what a per-type projection W_t applied before propagating gives once
    # the first layer multiplies in (venues are filled with their papers' mean, in the paper block)
    filled = fill_featureless(graph, "mean", x_dict=aligned)
    subsets = sample_relation_subsets(graph, 4)
    hops = nars_propagate(graph, subsets, 2, filled)
    total = [torch.zeros_like(h) for h in hops]
    for t, (start, stop) in {"author": (0, 12), "paper": (12, 52), "term": (52, 58), "venue": (12, 52)}.items():
        only_t = {s: x if s == t else torch.zeros_like(x) for s, x in filled.items()}
        alone = nars_propagate(graph, subsets, 2, only_t)
        for i, hop in enumerate(alone):
            outside = torch.ones(hop.size(-1), dtype=torch.bool)
            outside[start:stop] = False
            assert not hop[..., outside].any(), t
            total[i] += hop
    for hop, ref in zip(hops, total):
        torch.testing.assert_close(hop, ref)


def test_a_type_wider_than_max_width_is_reduced_by_svd():
    g = torch.Generator().manual_seed(1)
    low_rank = torch.randn(50, 3, generator=g) @ torch.randn(3, 30, generator=g)
    x = {"a": low_rank, "b": torch.randn(20, 4, generator=g)}
    aligned = align_type_features(x, max_width=5, seed=0)
    assert aligned["a"].shape == (50, 9) and aligned["b"].shape == (20, 9)
    # a rank-3 matrix keeps all its structure in 5 SVD columns: the Gram matrix is preserved
    torch.testing.assert_close(aligned["a"][:, :5] @ aligned["a"][:, :5].t(), low_rank @ low_rank.t(),
                               rtol=1e-3, atol=1e-3)
    assert torch.equal(aligned["a"], align_type_features(x, max_width=5, seed=0)["a"])  # seeded


@pytest.mark.parametrize("name", ["nars-sign", "hetero-gamlp"])
def test_models_train_on_types_of_different_widths(name):
    torch.manual_seed(0)
    graph = _dblp_like()
    model = build_model(name, graph, graph.num_classes,
                        model_config(name, k=2, hidden=32, num_subsets=4, batch_norm=False))
    features = model.precompute(graph)
    cfg = TrainConfig(**{**default_train_config(name), "lr": 0.01, "epochs": 40, "patience": None,
                         "progress": False})
    result = Trainer(cfg).fit(model, features, graph, seed=0)
    assert result["test_acc"] > 0.6, result["test_acc"]  # 3 classes: chance is 1/3


def test_type_width_zero_keeps_the_old_error():
    graph = _dblp_like()
    model = build_model("nars-sign", graph, graph.num_classes, model_config("nars-sign", k=2, hidden=8,
                                                                              type_width=0))
    with pytest.raises(FeatureError, match="one feature width"):
        model.precompute(graph)
