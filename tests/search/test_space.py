import random

import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.models import SGAPConfig, SGAPModel, build_model, model_config
from sgl.ops import MESSAGE_OPERATORS
from sgl.search import GRAPH_OPERATORS, POST_MESSAGES, POST_OPERATORS, DesignSpace


def test_default_space_size_is_pascas_order():
    space = DesignSpace()
    # 5 operators x 10 k x 13 messages x 2 bases x 10 layers x 4 widths x 1 dropout x 11 post steps x 4 x 6
    assert space.size == 5 * 10 * 13 * 2 * 10 * 4 * 1 * 11 * 4 * 6
    assert space.num_distinct == 5 * 10 * 13 * 2 * 10 * 4 * (1 + 10 * 4 * 6)
    assert space.num_distinct >= 150_000
    assert {k.name for k in space.knobs} == {"graph_op", "k", "message", "base_model", "num_layers", "hidden",
                                             "dropout", "post_steps", "post_graph_op", "post_message"}
    assert set(space._by_name["message"].choices) == set(MESSAGE_OPERATORS)


def test_index_round_trip_and_mixed_radix_order():
    space = DesignSpace()
    rng = random.Random(0)
    for index in [0, 1, space.size - 1] + [rng.randrange(space.size) for _ in range(200)]:
        assert space.index_of(space.design_at(index)) == index
    first, second = space.design_at(0), space.design_at(1)
    assert [k for k in first if first[k] != second[k]] == ["post_message"]  # last knob varies fastest
    with pytest.raises(ConfigError, match="design index"):
        space.design_at(space.size)


def test_encode_decode_round_trip_and_inactive_post_knobs():
    space = DesignSpace()
    rng = random.Random(1)
    for _ in range(300):
        design = space.sample(rng)
        params = space.encode(design)
        assert space.decode(params) == space.canonical(design)
        if design["post_steps"] == 0:
            assert "post_graph_op" not in params and "post_message" not in params
    a = dict(space.design_at(0), post_steps=0, post_message="max")
    b = dict(space.design_at(0), post_steps=0, post_message="min")
    assert space.canonical(a) == space.canonical(b)  # same model


@pytest.mark.parametrize("message", sorted(MESSAGE_OPERATORS))
def test_every_message_maps_to_a_runnable_sgap_config(message):
    space = DesignSpace()
    graph = sgl.datasets.load("karate")
    design = dict(space.design_at(0), message=message, k=3, num_layers=2, hidden=32, post_steps=2,
                  post_graph_op="ppr_a0.3", post_message="weighted")
    config = space.to_model_config(design)
    # the same dict is what `sgl train --model sgap` accepts
    model = build_model("sgap", graph.num_features, graph.num_classes, model_config("sgap", **config))
    out = model(model.precompute(graph)[torch.arange(graph.num_nodes)])
    assert out.shape == (graph.num_nodes, graph.num_classes)
    assert model.postprocess(graph, out).shape == out.shape


@pytest.mark.parametrize("op", sorted(GRAPH_OPERATORS))
def test_operator_choices(op):
    config = DesignSpace().to_model_config(dict(DesignSpace().design_at(0), graph_op=op))
    model = SGAPModel(4, 2, SGAPConfig(**config))
    expected = GRAPH_OPERATORS[op]
    assert model.graph_op.name == expected["graph_op"]
    for key in ("r", "alpha", "t"):
        if key in expected:
            assert getattr(model.graph_op, key) == expected[key]


def test_narrowed_space_serialises():
    space = DesignSpace(graph_ops=["ppr"], k=(2, 4), messages=["gate", "last"], num_layers=(1, 3), hidden=[16],
                        post_steps=(0, 2), post_graph_ops=["adj"], post_messages=["last"], dropout=[0.2, 0.5])
    assert space.size == 1 * 3 * 2 * 2 * 3 * 1 * 2 * 3 * 1 * 1
    again = DesignSpace.from_dict(space.to_dict())
    assert again.to_dict() == space.to_dict() and again.size == space.size
    assert POST_MESSAGES and set(POST_OPERATORS) >= {"adj"}


@pytest.mark.parametrize("kwargs, match", [
    ({"messages": []}, "non-empty"),
    ({"k": (5, 2)}, "inconsistent"),
    ({"k": (0, 3)}, "k .* >= 1"),
    ({"num_layers": (0, 2)}, "num_layers"),
    ({"post_steps": (-1, 2)}, "post_steps"),
    ({"hidden": [0, 16]}, "positive"),
    ({"dropout": [1.0]}, r"\[0, 1\)"),
    ({"messages": ["attention"]}, "unknown messages"),
    ({"graph_ops": ["adj_r2"]}, "unknown graph_ops"),
    ({"messages": ["last", "last"]}, "twice"),
    ({"k": "3-5"}, "integer range"),
])
def test_bad_bounds_raise_config_error(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DesignSpace(**kwargs)


def test_bad_designs_and_dicts():
    space = DesignSpace(k=(1, 3))
    with pytest.raises(ConfigError, match="outside the space"):
        space.validate(dict(space.design_at(0), k=9))
    with pytest.raises(ConfigError, match="unknown knob"):
        space.validate(dict(space.design_at(0), width=3))
    with pytest.raises(ConfigError, match="unknown design-space key"):
        DesignSpace.from_dict({"layers": [1, 2]})
