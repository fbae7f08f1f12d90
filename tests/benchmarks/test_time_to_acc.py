"""The time-to-accuracy race of ``benchmarks/bench_models.py --time-to-acc`` (issue 27, item 3)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_models  # noqa: E402
import time_to_acc  # noqa: E402

import sgl  # noqa: E402

TINY = ["--time-to-acc", "--model", "sgc", "--nodes", "3000", "--features", "16", "--classes", "4",
        "--max-epochs", "4", "--threads", "1", "--sampled-batch", "64", "--evals-per-epoch", "2",
        "--score-nodes", "300", "--fanouts", "5,5", "--eval-fanouts", "5,5"]


def test_score_subset_is_fixed_and_inside_the_split() -> None:
    graph = sgl.datasets.load("synthetic", num_nodes=600, num_val=100, num_test=200, seed=0)
    a, b = time_to_acc.score_subset(graph, 50), time_to_acc.score_subset(graph, 50)
    assert torch.equal(a, b) and a.numel() == 50 and bool(graph.test_mask[a].all())
    val = time_to_acc.score_subset(graph, 50, split="val")
    assert bool(graph.val_mask[val].all())
    assert time_to_acc.score_subset(graph, 0).numel() == 200


def test_early_stop_changes_no_time_to_target() -> None:
    """Stopping the baselines at the SGL model's best leaves the target and every method's
    epochs-to-target as in the full run, and never runs a baseline longer."""
    full = bench_models.main(TINY + ["--no-early-stop"])
    early = bench_models.main(TINY)
    target = min(r["best_acc"] for r in full)
    assert min(r["best_acc"] for r in early) == pytest.approx(target)
    for a, b in zip(full, early):
        assert a["model"] == b["model"]
        assert a["epochs_to_target"] == b["epochs_to_target"] is not None  # everyone reaches the lowest best
        assert b["epochs_run"] <= a["epochs_run"]
        assert [acc for _, acc, _ in b["curve"]] == [acc for _, acc, _ in a["curve"]][:len(b["curve"])]
    assert not early[0]["stopped_early"]  # the SGL model always runs every epoch
    # scores after every half epoch: 2 per epoch for the sampled baselines (several batches)
    first_epoch = [e for _, _, e in full[1]["curve"] if e <= 1.0]
    assert len(first_epoch) == 2 and first_epoch[0] < 1.0 and first_epoch[-1] == 1.0
