import json
import math

import numpy as np
import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import (
    MESSAGE_OPERATORS,
    GatedHops,
    JKAttention,
    MessageOperator,
    NodeAdaptiveSmoothing,
    NormalizedAdjacency,
    RecursiveAttention,
    get_message_op,
    normalized_adjacency,
    propagate_hops,
    stationary_features,
)

B, D, NUM_HOPS = 9, 5, 4

# registry name -> constructor arguments that make it buildable for D features and NUM_HOPS hops
OP_KWARGS = {
    "last": {},
    "mean": {},
    "sum": {},
    "max": {},
    "min": {},
    "concat": {},
    "weighted": {"alpha": 0.3},
    "nafs": {},
    "projected_concat": {"in_features": D, "hidden": 3, "num_hops": NUM_HOPS},
    "learnable_weighted": {"num_hops": NUM_HOPS},
    "gate": {"in_features": D, "num_hops": NUM_HOPS},
    "jk_attention": {"in_features": D, "num_hops": NUM_HOPS, "hidden": 7, "num_layers": 2},
    "recursive_attention": {"in_features": D, "num_hops": NUM_HOPS},
}
LEARNABLE = ["projected_concat", "learnable_weighted", "gate", "jk_attention", "recursive_attention"]


@pytest.fixture(autouse=True)
def _one_thread():
    """These tensors are tiny: with intra-op threads on a busy shared machine, thread
    synchronisation costs ~100x the arithmetic (measured: 12 s vs 0.1 s for 100 steps)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_hops(n=B, d=D, k=NUM_HOPS, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, d, generator=gen, dtype=dtype) for _ in range(k)]


def perturb(op, scale=0.5, seed=1):
    """Move the parameters away from their initial values so attention is far from uniform."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in op.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return op


def py_act(name, s):
    if name == "sigmoid":
        return 1.0 / (1.0 + math.exp(-s))
    if name == "relu":
        return max(s, 0.0)
    return s if s >= 0 else 0.2 * s


def py_softmax(scores):
    top = max(scores)
    e = [math.exp(s - top) for s in scores]
    return [v / sum(e) for v in e]


def mix(alphas, rows):
    out = torch.zeros_like(rows[0])
    for a, row in zip(alphas, rows):
        out = out + a * row
    return out


# --------------------------------------------------------------------------- shapes, registry, config
def test_registry_names_and_flags():
    assert set(MESSAGE_OPERATORS) == set(OP_KWARGS)
    for name, cls in MESSAGE_OPERATORS.items():
        assert cls.name == name and issubclass(cls, MessageOperator)
        assert cls.learnable == (name in LEARNABLE)


@pytest.mark.parametrize("name", sorted(OP_KWARGS))
def test_output_shape_matches_out_features(name):
    op = get_message_op(name, **OP_KWARGS[name])
    out = op(make_hops())
    assert out.shape == (B, op.out_features(D, NUM_HOPS))
    assert torch.isfinite(out).all()


def test_out_features_values():
    assert get_message_op("concat").out_features(D, NUM_HOPS) == D * NUM_HOPS
    assert get_message_op("concat", start=1, end=3).out_features(D, NUM_HOPS) == 2 * D
    assert get_message_op("projected_concat", in_features=D, hidden=3, num_hops=NUM_HOPS,
                          start=2).out_features(D, NUM_HOPS) == 6
    for name in ("last", "mean", "weighted", "nafs", "gate", "jk_attention"):
        assert get_message_op(name, **OP_KWARGS[name]).out_features(D, NUM_HOPS) == D


@pytest.mark.parametrize("name", sorted(OP_KWARGS))
def test_config_round_trip(name):
    op = get_message_op(name, **OP_KWARGS[name], start=1)
    cfg = op.config()
    assert json.loads(json.dumps(cfg)) == cfg
    rebuilt = get_message_op(**cfg)
    assert type(rebuilt) is type(op) and rebuilt.config() == cfg and repr(rebuilt) == repr(op)
    rebuilt.load_state_dict(op.state_dict())
    op.eval(), rebuilt.eval()
    hops = make_hops()
    torch.testing.assert_close(rebuilt(hops), op(hops))


def test_get_message_op_passes_instances_through():
    op = get_message_op("mean")
    assert get_message_op(op) is op
    with pytest.raises(ConfigError):
        get_message_op(op, start=1)


def test_repr_is_one_line_with_hyperparameters():
    text = repr(get_message_op("jk_attention", in_features=4, num_hops=3, act="sigmoid"))
    assert text.startswith("JKAttention(") and "act='sigmoid'" in text and "\n" not in text


# --------------------------------------------------------------------------- parameter-free references
def test_reducers_match_direct_reference():
    hops = make_hops()
    stack = torch.stack(hops)
    torch.testing.assert_close(get_message_op("last")(hops), hops[-1])
    torch.testing.assert_close(get_message_op("sum")(hops), stack.sum(0))
    torch.testing.assert_close(get_message_op("mean")(hops), stack.mean(0))
    torch.testing.assert_close(get_message_op("max")(hops), stack.max(0).values)
    torch.testing.assert_close(get_message_op("min")(hops), stack.min(0).values)
    torch.testing.assert_close(get_message_op("concat")(hops), torch.hstack(hops))


def test_reducers_do_not_modify_inputs():
    hops = make_hops()
    before = [h.clone() for h in hops]
    for name in ("sum", "mean", "max", "min", "weighted", "nafs"):
        get_message_op(name)(hops)
    for h, b in zip(hops, before):
        assert torch.equal(h, b)


def test_weighted_explicit_and_gbp_weights():
    hops = make_hops()
    got = get_message_op("weighted", weights=[0.5, -1.0, 2.0, 0.25])(hops)
    torch.testing.assert_close(got, 0.5 * hops[0] - hops[1] + 2 * hops[2] + 0.25 * hops[3])
    alpha = 0.3
    expected = sum(alpha * (1 - alpha) ** k * hops[k] for k in range(NUM_HOPS))
    torch.testing.assert_close(get_message_op("weighted", alpha=alpha)(hops), expected)
    # the exponent is the hop's index in the full list, so start=2 begins at alpha (1-alpha)^2
    op = get_message_op("weighted", alpha=alpha, start=2)
    torch.testing.assert_close(op(hops), sum(alpha * (1 - alpha) ** k * hops[k] for k in (2, 3)))
    assert op.resolved_weights(NUM_HOPS) == pytest.approx([alpha * (1 - alpha) ** 2, alpha * (1 - alpha) ** 3])
    # no argument: SGL's GBP default alpha = 0.85
    assert get_message_op("weighted").alpha == 0.85


def test_nafs_cosine_matches_per_node_loop():
    hops = make_hops(dtype=torch.float64)
    hops[2][3] = 0.0  # an all-zero row must not produce NaN
    for start in (0, 1):
        op = NodeAdaptiveSmoothing(start=start)
        out, weights = op(hops, return_weights=True)
        used = hops[start:]
        for i in range(B):
            x0 = hops[0][i]  # NAFS compares with the un-smoothed features, whatever the slice
            cos = [float(h[i] @ x0) / ((float(h[i].norm()) + 1e-10) * (float(x0.norm()) + 1e-10)) for h in used]
            alphas = py_softmax(cos)
            assert weights[i].tolist() == pytest.approx(alphas, abs=1e-12)
            torch.testing.assert_close(out[i], mix(alphas, [h[i] for h in used]))
        assert torch.isfinite(out).all()


def test_nafs_stationary_matches_per_node_loop_and_needs_reference():
    hops = make_hops(dtype=torch.float64)
    x_inf = make_hops(k=1, dtype=torch.float64, seed=5)[0]
    op = NodeAdaptiveSmoothing(mode="stationary", temperature=2.0)
    out, weights = op(hops, reference=x_inf, return_weights=True)
    for i in range(B):
        dist = [float((h[i] - x_inf[i]).norm()) / 2.0 for h in hops]
        alphas = py_softmax(dist)
        assert weights[i].tolist() == pytest.approx(alphas, abs=1e-12)
        torch.testing.assert_close(out[i], mix(alphas, [h[i] for h in hops]))
    with pytest.raises(FeatureError, match="stationary_features"):
        op(hops)
    with pytest.raises(FeatureError, match="reference"):
        op(hops, reference=x_inf[:3])


def test_nafs_gives_more_weight_to_less_smoothed_hops():
    """On a real propagation the far hops drift towards the stationary state and lose weight."""
    g = sgl.datasets.load("synthetic", num_nodes=200, num_classes=2, num_features=8, seed=1)
    hops = propagate_hops(g, g.x, k=6)
    x_inf = stationary_features(g, g.x)
    for op, kwargs in ((NodeAdaptiveSmoothing(), {}), (NodeAdaptiveSmoothing("stationary"), {"reference": x_inf})):
        _, weights = op(hops, return_weights=True, **kwargs)
        mean_w = weights.mean(0)
        assert mean_w[0] > mean_w[-1]
        torch.testing.assert_close(weights.sum(1), torch.ones(g.num_nodes))


# --------------------------------------------------------------------------- per-node attention references
def jk_reference(op, used):
    out, weights = [], []
    w, b = op.attention.weight[0], float(op.attention.bias[0])
    for i in range(used[0].shape[0]):
        rows = [h[i] for h in used]
        h = torch.cat(rows)
        for layer, prelu in zip(op.ref_layers, op.ref_acts):
            h = layer.weight @ h + layer.bias
            h = torch.where(h >= 0, h, prelu.weight * h)
        scores = [py_act(op.act, float(w @ torch.cat([x, h])) + b) for x in rows]
        alphas = py_softmax(scores)
        weights.append(alphas)
        out.append(mix(alphas, rows))
    return torch.stack(out), torch.tensor(weights, dtype=used[0].dtype)


def recursive_reference(op, used):
    out, weights = [], []
    w, b = op.attention.weight[0], float(op.attention.bias[0])
    for i in range(used[0].shape[0]):
        rows = [h[i] for h in used]
        scores = [py_act(op.act, float(w @ torch.cat([rows[0], rows[0]])) + b)]
        for l in range(1, len(rows)):
            history = mix(py_softmax(scores), rows[:l])  # softmax over the RAW scores s_0..s_{l-1}
            scores.append(py_act(op.act, float(w @ torch.cat([history, rows[l]])) + b))
        alphas = py_softmax(scores)
        weights.append(alphas)
        out.append(mix(alphas, rows))
    return torch.stack(out), torch.tensor(weights, dtype=used[0].dtype)


def gate_reference(op, used):
    out, weights = [], []
    w, b = op.gate.weight[0], float(op.gate.bias[0])
    for i in range(used[0].shape[0]):
        rows = [h[i] for h in used]
        alphas = py_softmax([float(w @ x) + b for x in rows])
        weights.append(alphas)
        out.append(mix(alphas, rows))
    return torch.stack(out), torch.tensor(weights, dtype=used[0].dtype)


ATTENTION_CASES = [
    (JKAttention, jk_reference, {"hidden": 6, "num_layers": 2, "act": "sigmoid"}, 0),
    (JKAttention, jk_reference, {"hidden": 6, "num_layers": 3, "act": "relu"}, 0),
    (JKAttention, jk_reference, {"num_layers": 1, "act": "leaky_relu"}, 1),
    (RecursiveAttention, recursive_reference, {"act": "sigmoid"}, 0),
    (RecursiveAttention, recursive_reference, {"act": "relu"}, 0),
    (RecursiveAttention, recursive_reference, {"act": "leaky_relu"}, 1),
    (GatedHops, gate_reference, {}, 0),
    (GatedHops, gate_reference, {}, 2),
]


@pytest.mark.parametrize("cls, reference, kwargs, start", ATTENTION_CASES)
def test_attention_matches_per_node_loop(cls, reference, kwargs, start):
    op = perturb(cls(in_features=D, num_hops=NUM_HOPS, start=start, **kwargs)).double().eval()
    hops = make_hops(dtype=torch.float64)
    out, weights = op(hops, return_weights=True)
    with torch.no_grad():
        expected_out, expected_weights = reference(op, hops[start:])
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(weights.sum(1), torch.ones(B, dtype=torch.float64))
    torch.testing.assert_close(op.last_attention, weights.detach())
    # the weights really are node-specific (else a per-node check would be vacuous)
    assert weights.std(0).max() > 1e-3


@pytest.mark.parametrize("cls, reference, kwargs, start", ATTENTION_CASES[::3])
def test_attention_is_permutation_equivariant(cls, reference, kwargs, start):
    """Permuting the nodes permutes the outputs: no operator mixes rows of different nodes."""
    op = perturb(cls(in_features=D, num_hops=NUM_HOPS, start=start, **kwargs)).eval()
    hops = make_hops(n=31)
    perm = torch.randperm(31, generator=torch.Generator().manual_seed(3))
    out, weights = op(hops, return_weights=True)
    out_p, weights_p = op([h[perm] for h in hops], return_weights=True)
    torch.testing.assert_close(out_p, out[perm])
    torch.testing.assert_close(weights_p, weights[perm])
    # a node's output depends on its own rows only: changing node 0 leaves the others unchanged
    changed = [h.clone() for h in hops]
    for h in changed:
        h[0] += 10.0
    torch.testing.assert_close(op(changed)[1:], out[1:])


def test_attention_dropout_only_in_training():
    op = JKAttention(D, NUM_HOPS, att_dropout=0.5)
    hops = make_hops()
    op.eval()
    torch.testing.assert_close(op(hops), op(hops))
    op.train()
    torch.manual_seed(0)
    out_a = op(hops)
    assert not torch.allclose(out_a, op.eval()(hops))
    # the stored weights are the undropped ones and still sum to one
    op.train()(hops)
    torch.testing.assert_close(op.last_attention.sum(1), torch.ones(B))


def test_learnable_weighted_is_softmax_or_raw():
    hops = make_hops()
    op = get_message_op("learnable_weighted", num_hops=NUM_HOPS)
    torch.testing.assert_close(op(hops), torch.stack(hops).mean(0))  # theta = 0 starts at the mean
    with torch.no_grad():
        op.theta.copy_(torch.tensor([0.0, 1.0, -1.0, 2.0]))
    w = torch.softmax(op.theta.detach(), 0)
    torch.testing.assert_close(op(hops), sum(w[k] * hops[k] for k in range(NUM_HOPS)))
    raw = get_message_op("learnable_weighted", num_hops=NUM_HOPS, allow_negative=True, end=2)
    with torch.no_grad():
        raw.theta.copy_(torch.tensor([-2.0, 3.0]))
    torch.testing.assert_close(raw(hops), -2.0 * hops[0] + 3.0 * hops[1])
    raw.reset_parameters()
    torch.testing.assert_close(raw.theta.detach(), torch.tensor([0.5, 0.5]))


def test_projected_concat_matches_per_hop_linear():
    op = get_message_op("projected_concat", in_features=D, hidden=3, num_hops=NUM_HOPS, start=1, act=None)
    hops = make_hops()
    expected = torch.cat([hops[k] @ op.projections[k - 1].weight.T + op.projections[k - 1].bias for k in (1, 2, 3)], 1)
    torch.testing.assert_close(op(hops), expected)


# --------------------------------------------------------------------------- slicing
@pytest.mark.parametrize("start, end, used", [
    (0, None, [0, 1, 2, 3]), (1, None, [1, 2, 3]), (0, 2, [0, 1]), (1, 3, [1, 2]),
    (-2, None, [2, 3]), (0, -1, [0, 1, 2]), (3, 4, [3]),
])
def test_start_end_follow_python_slices(start, end, used):
    hops = make_hops()
    picked = [hops[k] for k in used]
    torch.testing.assert_close(get_message_op("last", start=start, end=end)(hops), picked[-1])
    torch.testing.assert_close(get_message_op("mean", start=start, end=end)(hops), torch.stack(picked).mean(0))
    torch.testing.assert_close(get_message_op("concat", start=start, end=end)(hops), torch.cat(picked, 1))
    op = get_message_op("gate", in_features=D, num_hops=NUM_HOPS, start=start, end=end)
    _, weights = op(hops, return_weights=True)
    assert weights.shape == (B, len(used))


def test_non_contiguous_hops_are_accepted():
    """propagate_hops(out_dir=...) returns column-major [n, d] views."""
    hops = make_hops()
    column_major = [h.t().contiguous().t() for h in hops]
    for name in sorted(OP_KWARGS):
        op = get_message_op(name, **OP_KWARGS[name]).eval()
        torch.testing.assert_close(op(column_major), op(hops))


# --------------------------------------------------------------------------- gradients and training
@pytest.mark.parametrize("name", LEARNABLE)
def test_gradients_reach_every_parameter(name):
    op = get_message_op(name, **OP_KWARGS[name])
    hops = make_hops()
    target = torch.randn(B, op.out_features(D, NUM_HOPS))
    ((op(hops) - target) ** 2).sum().backward()
    for pname, p in op.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_non_learnable_ops_have_no_parameters():
    for name, kwargs in OP_KWARGS.items():
        if name not in LEARNABLE:
            op = get_message_op(name, **kwargs)
            assert list(op.parameters()) == []
            op.reset_parameters()  # a no-op, but part of the interface


@pytest.fixture(scope="module")
def synthetic_hops():
    g = sgl.datasets.load("synthetic", num_nodes=600, num_classes=3, num_features=16, homophily=0.9,
                          feature_signal=0.3, seed=0)
    return g, propagate_hops(g, g.x, k=3)


@pytest.mark.parametrize("name, kwargs", [
    ("projected_concat", {"hidden": 16}),
    ("learnable_weighted", {}),
    ("gate", {}),
    ("jk_attention", {"hidden": 32}),
    ("recursive_attention", {}),
])
def test_linear_classifier_on_learnable_op_beats_majority(synthetic_hops, name, kwargs):
    g, hops = synthetic_hops
    torch.manual_seed(0)
    kwargs = {"num_hops": len(hops), **kwargs}
    if name != "learnable_weighted":
        kwargs["in_features"] = g.num_features
    op = get_message_op(name, **kwargs)
    classifier = torch.nn.Linear(op.out_features(g.num_features, len(hops)), g.num_classes)
    params = list(op.parameters()) + list(classifier.parameters())
    optimizer = torch.optim.Adam(params, lr=0.01)
    train, test = g.train_mask, g.test_mask
    train_hops = [h[train] for h in hops]
    for _ in range(100):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(classifier(op(train_hops)), g.y[train])
        loss.backward()
        optimizer.step()
    op.eval()
    with torch.no_grad():
        pred = classifier(op([h[test] for h in hops])).argmax(1)
    accuracy = (pred == g.y[test]).float().mean().item()
    majority = torch.bincount(g.y[test]).max().item() / int(test.sum())
    assert accuracy > majority + 0.15, (accuracy, majority)


# --------------------------------------------------------------------------- stationary state
def dense_power_limit(g, x, r, self_loops, steps=4000):
    m = normalized_adjacency(g, r=r, self_loops=self_loops, dtype=torch.float64).to_dense()
    return torch.linalg.matrix_power(m, steps) @ x


@pytest.mark.parametrize("r", [0.0, 0.5, 1.0])
def test_stationary_features_is_the_limit_of_propagation(small_graph, r):
    x = small_graph.x.double()
    torch.testing.assert_close(stationary_features(small_graph, x, r=r), dense_power_limit(small_graph, x, r, True))


def test_stationary_features_weighted_and_without_self_loops():
    # a triangle (non-bipartite, so the limit exists without self-loops) plus a weighted edge
    src = torch.tensor([0, 1, 1, 2, 2, 0, 2, 3])
    dst = torch.tensor([1, 0, 2, 1, 0, 2, 3, 2])
    weight = torch.tensor([1.0, 1.0, 2.0, 2.0, 0.5, 0.5, 3.0, 3.0], dtype=torch.float64)
    g = Graph.from_edge_index(torch.stack([src, dst]), num_nodes=4, edge_weight=weight)
    x = torch.randn(4, 3, dtype=torch.float64)
    for self_loops in (True, False):
        torch.testing.assert_close(stationary_features(g, x, r=0.3, self_loops=self_loops),
                                   dense_power_limit(g, x, 0.3, self_loops))


def test_stationary_features_rejects_directed_graphs():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    with pytest.raises(GraphError, match="symmetrize"):
        stationary_features(g, torch.ones(3, 2))
    with pytest.raises(FeatureError):
        stationary_features(Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]])))


# --------------------------------------------------------------------------- errors
def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="jk_attention"):
        get_message_op("no_such_op")


@pytest.mark.parametrize("name, kwargs", [
    ("mean", {"bogus": 1}),
    ("gate", {"num_hops": 3}),  # in_features missing
    ("jk_attention", {"in_features": 4, "num_hops": 3, "act": "tanh"}),
    ("jk_attention", {"in_features": 4, "num_hops": 3, "num_layers": 0}),
    ("recursive_attention", {"in_features": 4, "num_hops": 3, "att_dropout": 1.0}),
    ("projected_concat", {"in_features": 4, "hidden": 0, "num_hops": 3}),
    ("learnable_weighted", {"num_hops": 3, "allow_negative": "yes"}),
    ("nafs", {"mode": "euclid"}),
    ("nafs", {"temperature": 0}),
    ("last", {"start": 1.5}),
    ("weighted", {"weights": [1.0], "alpha": 0.5}),
    ("weighted", {"weights": []}),
    ("weighted", {"weights": [1.0, float("nan")]}),
])
def test_bad_arguments_raise_config_error(name, kwargs):
    with pytest.raises(ConfigError):
        get_message_op(name, **kwargs)


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.5, True, "0.5"])
def test_alpha_outside_unit_interval(alpha):
    with pytest.raises(ConfigError, match="alpha"):
        get_message_op("weighted", alpha=alpha)
    assert get_message_op("weighted", alpha=1.0).alpha == 1.0


def test_weights_length_mismatch():
    with pytest.raises(ConfigError, match="one weight per used hop"):
        get_message_op("weighted", weights=[1.0, 2.0], start=0, end=3)  # known at construction
    op = get_message_op("weighted", weights=[1.0, 2.0])
    with pytest.raises(FeatureError, match="one weight per used hop"):
        op(make_hops())  # 4 hops used, 2 weights


@pytest.mark.parametrize("name", sorted(OP_KWARGS))
def test_bad_hop_lists_raise_feature_error(name):
    op = get_message_op(name, **OP_KWARGS[name])
    hops = make_hops()
    bad_lists = [
        [],
        hops[:-1] + [torch.randn(B + 1, D)],  # different number of rows
        hops[:-1] + [torch.randn(B, D + 1)],  # different width
        hops[:-1] + [torch.randn(B)],  # not 2-D
        hops[:-1] + [torch.ones(B, D, dtype=torch.long)],  # not floating
        hops[:-1] + [np.ones((B, D))],  # not a tensor
        torch.stack(hops),  # one stacked tensor instead of a list
    ]
    for bad in bad_lists:
        with pytest.raises(FeatureError):
            op(bad)


@pytest.mark.parametrize("name", LEARNABLE)
def test_learnable_ops_check_hop_count_and_width(name):
    op = get_message_op(name, **OP_KWARGS[name])
    with pytest.raises(FeatureError, match="num_hops"):
        op(make_hops(k=NUM_HOPS + 1))
    if name != "learnable_weighted":
        with pytest.raises(FeatureError, match="in_features"):
            op(make_hops(d=D + 1))
    with pytest.raises(ConfigError):
        op.out_features(D, NUM_HOPS + 1)
    if name != "learnable_weighted":
        with pytest.raises(ConfigError):
            op.out_features(D + 1, NUM_HOPS)


def test_start_end_out_of_range():
    hops = make_hops()
    for start, end in [(4, None), (0, 5), (-5, None), (2, 9)]:
        with pytest.raises(FeatureError, match="hop"):
            get_message_op("mean", start=start, end=end)(hops)
        with pytest.raises(ConfigError):
            get_message_op("mean", start=start, end=end).out_features(D, NUM_HOPS)
    for start, end in [(2, 2), (3, 1), (-1, -2), (0, 0)]:
        with pytest.raises(ConfigError, match="selects no hop"):
            get_message_op("mean", start=start, end=end)
    # learnable ops know their hop count, so a bad slice fails when they are built
    with pytest.raises(ConfigError, match="hops"):
        get_message_op("gate", in_features=D, num_hops=3, start=3)
    with pytest.raises(ConfigError):
        get_message_op("jk_attention", in_features=D, num_hops=3, end=7)
