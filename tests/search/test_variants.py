"""PaSca's deployment variants: the space accepts int8 / pruned / distilled choices, and trials are
measured on the deployed variant (accuracy, latency, model bytes)."""
import pytest
import torch

import sgl
from sgl.cli.main import main
from sgl.errors import ConfigError
from sgl.search import VARIANTS, DesignEvaluator, DesignSpace, OBJECTIVES, search_train_config
from sgl.search.variants import sparse_bytes

SPACE = dict(graph_ops=["ppr"], k=(2, 2), messages=["last"], base_models=["mlp"], num_layers=(2, 2), hidden=[32],
             post_steps=(0, 0))


@pytest.fixture(scope="module")
def graph():
    return sgl.datasets.load("synthetic", num_nodes=300, num_features=16, num_classes=3, num_val=60, num_test=60,
                             seed=0)


def test_the_space_accepts_the_variants_as_a_knob():
    plain = DesignSpace(**SPACE)
    assert "variant" not in [k.name for k in plain.knobs]            # old spaces keep their knobs
    space = DesignSpace(**SPACE, variants=VARIANTS)
    assert space.num_distinct == 4 and {space.design_at(i)["variant"] for i in range(space.size)} == set(VARIANTS)
    again = DesignSpace.from_dict(space.to_dict())
    assert again.to_dict() == space.to_dict() and again.to_dict()["variants"] == list(VARIANTS)
    assert "variant" not in space.to_model_config(space.design_at(1)) and len(space.knobs) == len(plain.knobs) + 1
    assert OBJECTIVES["model_bytes"].direction == "minimize"
    with pytest.raises(ConfigError, match="variants"):
        DesignSpace(**SPACE, variants=["plain", "fp4"])


def test_trials_are_measured_on_the_deployed_variant(graph):
    space = DesignSpace(**SPACE, variants=VARIANTS)
    ev = DesignEvaluator(graph, space, search_train_config(epochs=20, patience=None, progress=False))
    designs = {space.design_at(i)["variant"]: space.design_at(i) for i in range(space.size)}
    out = {name: ev.evaluate(design, seed=0) for name, design in designs.items()}
    assert out["int8"]["model_bytes"] < 0.4 * out["plain"]["model_bytes"]          # int8 weights
    assert out["pruned"]["model_bytes"] < 0.7 * out["plain"]["model_bytes"]        # half the weights, bitmap
    for name, r in out.items():
        assert 0.0 <= r["accuracy"] <= 1.0 and r["latency"] > 0, name
    assert out["distilled"]["accuracy"] > 1.0 / 3 + 0.05                       # the student learned something


def test_sparse_bytes_takes_the_smallest_storage():
    lin = torch.nn.Linear(64, 64, bias=False)
    with torch.no_grad():
        lin.weight[:, 32:] = 0                                   # half zeros: bitmap 2,048 x 4 + 512 bytes
    assert sparse_bytes(lin) == 2048 * 4 + 4096 // 8


def test_cli_takes_variants(graph, tmp_path, capsys):
    assert main(["search", "--dataset", "synthetic", "--dataset-option", "num_nodes=200", "--trials", "2",
                 "--epochs", "3", "--variants", "plain,int8", "--objectives", "accuracy,model_bytes",
                 "--no-progress", "--out", str(tmp_path / "out")]) == 0
    assert "variant" in capsys.readouterr().out
    assert main(["search", "--dataset", "synthetic", "--trials", "1", "--variants", "plain,fp4"]) == 2
