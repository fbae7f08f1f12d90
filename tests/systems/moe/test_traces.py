"""Routing traces on disk, the LAER artifact's loads, and the WikiText-2 MoE workload (tiny)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sgl.errors import ConfigError, DatasetError
from sgl.systems.moe.traces import RoutingTrace, load_laer_loads, load_trace, save_trace, synthetic_trace


def test_trace_round_trip_and_foreign_writer(tmp_path):
    tr = synthetic_trace(2, 3, 8, 4, tokens=16, top_k=2, affinity=0.5, seed=1)
    assert tr.counts.sum(-1).max() == 32
    back = load_trace(save_trace(tr, tmp_path / "t.npz"))
    assert np.array_equal(back.counts, tr.counts) and back.top_k == 2 and back.source == tr.source
    # Another writer using only numpy and the documented keys
    meta = {"format": "sgl-moe-trace", "version": 1, "num_experts": 4, "top_k": 1, "tokens_per_sample": 3,
            "source": "elsewhere", "note": "kept"}
    np.savez(tmp_path / "other.npz", counts=np.ones((1, 1, 2, 4), dtype=np.int32) // 2, meta=json.dumps(meta))
    other = load_trace(tmp_path / "other.npz")
    assert other.num_experts == 4 and other.extra == {"note": "kept"}


def test_bad_trace_files_raise(tmp_path):
    with pytest.raises(DatasetError, match="negative"):
        RoutingTrace(-np.ones((1, 1, 2, 4), dtype=np.int64), 1, 4)
    with pytest.raises(DatasetError, match="steps, layers"):
        RoutingTrace(np.ones((2, 4), dtype=np.int64), 1, 4)
    with pytest.raises(DatasetError, match="more than"):
        RoutingTrace(np.full((1, 1, 1, 2), 5), 1, 4)
    meta = {"format": "sgl-moe-trace", "version": 1, "num_experts": 2, "top_k": 1, "tokens_per_sample": 4}
    np.savez(tmp_path / "neg.npz", counts=-np.ones((1, 1, 1, 2), dtype=np.int64), meta=json.dumps(meta))
    with pytest.raises(DatasetError, match="negative"):
        load_trace(tmp_path / "neg.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="not an sgl-moe-trace"):
        load_trace(tmp_path / "junk.npz")
    with pytest.raises(DatasetError, match="does not exist"):
        load_trace(tmp_path / "missing.npz")


def test_laer_loads_from_the_artifact(data_path):
    csv = data_path("moe_traces", "token_analysis_backup.csv")
    loads = load_laer_loads(csv, "mixtral-8x7b-e8k2", "FSDP")
    assert loads.shape == (10, 32, 32)
    assert (loads.sum(-1) == 1_048_576).all()  # 524,288 tokens x top-2 per (layer, iteration)
    with pytest.raises(ConfigError, match="no rows"):
        load_laer_loads(csv, "no-such-model")
