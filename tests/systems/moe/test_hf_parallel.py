"""2-process runs of a converted Hugging Face Mixtral (one spawn for every variant): EP training
equals 1-process training, bucketed gradient sync equals the flat all-reduce, NetMoE / FSEP / LSH
apply to the converted model, and NetMoE's placement comes from the previous step's routing."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import sgl.comm as comm

pytest.importorskip("transformers")
# MixtralForCausalLM is imported here, before forking, so the ranks share the import (seconds).
from transformers import MixtralConfig, MixtralForCausalLM  # noqa: E402,F401

from sgl.systems.moe import moe_layers, netmoe_refined  # noqa: E402
from sgl.systems.moe.topology import Topology  # noqa: E402
from sgl.systems.moe.train import SampleContext, TrainSpec, _install, _loss, build_model, train_moe_lm  # noqa: E402
from tests.systems.moe.helpers import TIMEOUT  # noqa: E402

HF = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2).to_dict()
LAYOUTS = [[[0, 1, 2], [3]], [[1, 3], [0, 2]], [[0, 1, 2, 3], [2]]]
VARIANTS = {
    "ep": dict(dispatch="ep", bucket_mb=0.004),  # ~1k floats a bucket: several buckets per backward
    "ep-flat": dict(dispatch="ep", grad_sync="flat"),
    "netmoe": dict(dispatch="ep", placement="netmoe", netmoe_count_residual=False),
    "fsep": dict(dispatch="fsep", fsep_layouts=LAYOUTS),
    "lsh": dict(dispatch="lsh", lsh_hashes=1),
}


def _spec(**kw) -> TrainSpec:
    gen = torch.Generator().manual_seed(0)
    base = dict(model=None, moe=None, hf_config=HF, batches=torch.randint(0, 64, (3, 4, 9), generator=gen), lr=0.05,
                optimizer="sgd", dispatch="ep", record_grads=True, timeout=30.0)
    return TrainSpec(**{**base, **kw})


def _netmoe_steps(rank: int, world: int) -> tuple[list, list]:
    """Placement used at each of 3 forwards, and the placement solved from each forward's routing."""
    s = _spec(placement="netmoe", netmoe_count_residual=False)
    model = build_model(s)
    ctx = SampleContext()
    _install(model, s, ctx)
    d = next(moe_layers(model)).dispatcher
    used, solved = [], []
    for step in range(3):
        _loss(model, s.batches[step], rank, world, ctx)
        used.append(d.last_placement.copy())
        solved.append(netmoe_refined(d.last_counts, Topology.of(world, 1), tokens=0, rounds=0))
    return used, solved


def _all(rank: int, world: int) -> dict:
    out = {name: train_moe_lm(rank, world, _spec(**kw)) for name, kw in VARIANTS.items()}
    out["netmoe-steps"] = _netmoe_steps(rank, world)
    return out


@pytest.fixture(scope="module")
def runs():
    return comm.spawn(_all, 2, timeout=4 * TIMEOUT, start_method="fork")


@pytest.fixture(scope="module")
def reference():
    return train_moe_lm(0, 1, _spec(dispatch="local"))


def _same(ref: dict, got: dict) -> None:
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    for g_ref, g in zip(ref["grads"], got["grads"]):
        assert g_ref.keys() == g.keys()
        for k in g_ref:
            assert torch.allclose(g_ref[k], g[k], atol=1e-5, rtol=1e-4), k


@pytest.mark.parametrize("name", ["ep", "netmoe", "fsep"])
def test_two_process_training_of_converted_mixtral_equals_one_process(runs, reference, name):
    assert reference["loss"][0] != reference["loss"][-1]  # parameters moved between steps
    assert len(reference["grads"][0]) == sum(1 for _ in build_model(_spec(dispatch="local")).parameters())
    for r in runs:
        _same(reference, r[name])
    if name == "netmoe":
        assert sum(r["netmoe"]["moved_samples"] for r in runs) > 0


def test_bucketed_gradient_sync_equals_the_flat_all_reduce(runs):
    for r in runs:
        assert r["ep"]["loss"] == r["ep-flat"]["loss"]
        for g_b, g_f in zip(r["ep"]["grads"], r["ep-flat"]["grads"]):
            assert all(torch.equal(g_b[k], g_f[k]) for k in g_f)


def test_lsh_applies_to_the_converted_model(runs):
    for r in runs:
        assert r["lsh"]["sent_rows"] < r["lsh"]["routed_rows"]


def test_netmoe_uses_the_placement_solved_from_the_previous_step(runs):
    for r in runs:
        used, solved = r["netmoe-steps"]
        assert np.array_equal(used[0], np.arange(4) // 2)  # nothing solved before the first forward
        for t in (1, 2):
            assert np.array_equal(used[t], solved[t - 1])
    assert np.array_equal(runs[0]["netmoe-steps"][0][1], runs[1]["netmoe-steps"][0][1])  # ranks agree
