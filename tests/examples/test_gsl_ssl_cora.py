"""The RWGSL measurement script's pseudo-label sources (examples/gsl_ssl_cora.py)."""
import importlib.util
from pathlib import Path

import torch

import sgl

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "gsl_ssl_cora.py"


def _script():
    spec = importlib.util.spec_from_file_location("gsl_ssl_cora", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_combined_sources_average_their_probabilities():
    script = _script()
    g = sgl.datasets.load("karate")
    single, acc = script.ensemble_pseudo_labels(g, "builtin", [0])
    both, acc_both = script.ensemble_pseudo_labels(g, "builtin+builtin", [0])
    assert torch.allclose(single, both) and acc == acc_both
    assert torch.allclose(both.sum(1), torch.ones(g.num_nodes), atol=1e-5)
    mixed, _ = script.ensemble_pseudo_labels(g, "builtin+appnp", [0])
    appnp, _ = script.ensemble_pseudo_labels(g, "appnp", [0])
    assert torch.allclose(mixed, (single + appnp) / 2, atol=1e-6)
