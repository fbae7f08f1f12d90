"""Distributed motif counting over 2 Gloo processes on 127.0.0.1 (sgl.comm.spawn) equals one process.

One spawned run counts several graphs (starting processes dominates the cost); edges are sharded
arbitrarily (not by owner), with duplicates on both ranks, so the tagging step is exercised.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sgl.comm as comm
from sgl.analytics.motifs import count_motifs, distributed_count_motifs, gather_counts
from sgl.errors import CommError, ConfigError, GraphError

RUN_TIMEOUT = 120.0


def _graphs():
    rng = np.random.default_rng(7)
    out = []
    for n, p in ((1, 0.0), (2, 1.0), (9, 0.5), (40, 0.12), (60, 0.3)):
        dense = rng.random((n, n)) < p
        out.append((np.array(np.nonzero(dense)), n))
    # a hub-and-spoke graph: skewed degrees make the reduced view matter
    hub = np.array([[0] * 30 + list(range(1, 30)), list(range(1, 31)) + list(range(2, 31))])
    out.append((hub, 31))
    return out


def _shard(edges: np.ndarray, rank: int, world: int) -> np.ndarray:
    keep = (np.arange(edges.shape[1]) % world == rank) | (np.arange(edges.shape[1]) % 5 == 0)
    return edges[:, keep]


def _count_rank(rank: int, world: int, graphs, chunk_size: int):
    results = []
    for edges, n in graphs:
        for directed in (False, True):
            local = distributed_count_motifs(_shard(edges, rank, world), n, directed=directed, chunk_size=chunk_size,
                                             timeout=30.0)
            full = gather_counts(local, timeout=30.0)
            results.append((local.vertices, full.per_vertex, full.vertices, full.totals))
    return results


def test_two_processes_equal_one_process():
    graphs = _graphs()
    ranks = comm.spawn(_count_rank, 2, graphs, 7, timeout=RUN_TIMEOUT, comm_timeout=30.0)
    k = 0
    for edges, n in graphs:
        matrix = sp.csr_matrix((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n, n))
        for directed in (False, True):
            reference = count_motifs(matrix, directed=directed)
            owned = np.concatenate([ranks[r][k][0] for r in range(2)])
            assert owned.tolist() == list(range(n))  # the blocks partition the vertices
            for r in range(2):
                _, per_vertex, vertices, totals = ranks[r][k]
                np.testing.assert_array_equal(per_vertex, reference.per_vertex, err_msg=f"n={n} {directed}")
                assert vertices.tolist() == list(range(n)) and totals == reference.totals
            k += 1


def _mismatched(rank: int, world: int):
    return distributed_count_motifs(np.zeros((2, 0), dtype=np.int64), 5 + rank, timeout=20.0)


def test_ranks_must_agree_on_the_graph():
    with pytest.raises(CommError, match="same num_nodes and directed"):
        comm.spawn(_mismatched, 2, timeout=RUN_TIMEOUT, comm_timeout=20.0)


def test_single_process_path_and_bad_edges():
    edges = np.array([[0, 0, 1, 2, 3], [1, 2, 2, 3, 3]])
    local = distributed_count_motifs(edges, 4, directed=True, chunk_size=1)
    reference = count_motifs(sp.csr_matrix((np.ones(5), (edges[0], edges[1])), shape=(4, 4)), directed=True)
    np.testing.assert_array_equal(local.per_vertex, reference.per_vertex)
    assert gather_counts(local) is local
    with pytest.raises(GraphError, match=r"ids must be in \[0, num_nodes\)"):
        distributed_count_motifs(edges, 3)
    with pytest.raises(GraphError, match=r"\[2, num_edges\]"):
        distributed_count_motifs(edges.T, 4)
    with pytest.raises(GraphError, match="integer vertex ids"):
        distributed_count_motifs(edges.astype(float), 4)
    with pytest.raises(GraphError, match="num_nodes must be an integer >= 1"):
        distributed_count_motifs(edges, 0)
    with pytest.raises(ConfigError, match="chunk_size"):
        distributed_count_motifs(edges, 4, chunk_size=0)
