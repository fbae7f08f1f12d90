"""The oracles of ``benchmarks/exp_propagation_ceiling.py`` compute what they claim to time: the cheapest
build gives Graph's CSR (int32), the gather oracle reads exactly every edge's source row, the stream
kernels write and read every element once."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import exp_propagation_ceiling as ceiling  # noqa: E402

from sgl.data import Graph  # noqa: E402


def _edges(n: int = 50, e: int = 400, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(2, e), dtype=np.int64)


def test_cheapest_build_is_graphs_csr_with_the_symmetric_scale():
    edge_index, n = _edges(), 60  # nodes 50..59 have no edges
    indptr, indices = np.empty(n + 1, np.int32), np.empty(edge_index.shape[1], np.int32)
    scale = np.empty(n, np.float32)
    ceiling.build(edge_index, n, 2, indptr, indices, scale)
    graph = Graph.from_edge_index(torch.from_numpy(edge_index), num_nodes=n)
    np.testing.assert_array_equal(indptr, graph.indptr.numpy())
    np.testing.assert_array_equal(indices, graph.indices.numpy())  # stable: input order inside each row
    deg = np.diff(graph.indptr.numpy()).astype(np.float32)
    expected = np.where(deg > 0, np.maximum(deg, 1) ** np.float32(-0.5), 0).astype(np.float32)
    np.testing.assert_allclose(scale, expected, rtol=1e-6)
    assert scale[-1] == 0.0


def test_gather_oracle_sums_every_edges_source_row_once():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 20)).astype(np.float32)
    indices = rng.integers(0, 50, 300).astype(np.int32)
    bounds = np.array([0, 100, 250, 300], dtype=np.int64)
    for prefetch in (0, 8):
        sink = np.zeros(3, np.float32)
        ceiling.gather(bounds, indices, x, prefetch, 2, 16, sink)
        expected = [x[indices[a:b]].sum() for a, b in zip(bounds[:-1], bounds[1:])]
        np.testing.assert_allclose(sink, expected, rtol=1e-4, atol=1e-4)


def test_fill_and_read_sum_touch_every_element():
    buf = np.zeros((33, 7), np.float32)
    ceiling.fill(buf, 2.0)
    assert (buf == 2.0).all()
    sink = np.zeros(4, np.float32)
    ceiling.read_sum(buf, sink)
    assert float(sink.sum()) == 2.0 * buf.size
    isink = np.zeros(3, np.int64)
    ceiling.read_sum(np.arange(10, dtype=np.int64).reshape(2, 5), isink)
    assert int(isink.sum()) == 45
