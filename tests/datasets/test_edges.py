import numpy as np

from sgl.datasets.edges import csr_graph, edges_to_csr


def test_undirected_dedup_self_loops():
    src, dst = np.array([0, 1, 1, 2, 2]), np.array([1, 2, 2, 2, 0])
    indptr, indices, ids = edges_to_csr(src, dst, 3, undirected=True, remove_self_loops=True)
    g = csr_graph(indptr, indices)
    assert sorted(map(tuple, g.edge_index.T.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert g.is_symmetric()
    # ids point back into the doubled input (>= 5 are reversed edges)
    both = np.concatenate([src, dst]), np.concatenate([dst, src])
    assert (both[0][ids] == indices).all()


def test_keep_everything():
    src, dst = np.array([0, 0, 1]), np.array([1, 1, 1])
    indptr, indices, ids = edges_to_csr(src, dst, 2, deduplicate=False)
    assert indptr.tolist() == [0, 0, 3] and indices.tolist() == [0, 0, 1] and ids.tolist() == [0, 1, 2]
