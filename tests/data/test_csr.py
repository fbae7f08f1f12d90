"""The destination-grouped CSR build: the parallel counting sort gives scipy's (stable) arrays."""
import numpy as np
import pytest
import torch

from sgl.data import csr as csr_mod
from sgl.data.csr import csr_from_coo


def _stable_reference(src, dst, n):
    order = np.argsort(dst.numpy(), kind="stable")
    counts = np.bincount(dst.numpy(), minlength=n)
    return np.concatenate([[0], np.cumsum(counts)]), src.numpy()[order], order


@pytest.mark.parametrize("need_order", [True, False])
@pytest.mark.parametrize("threads", [2, 3])
def test_parallel_counting_sort_equals_stable_sort(monkeypatch, need_order, threads):
    monkeypatch.setattr(csr_mod, "PARALLEL_MIN_EDGES", 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        n, e = 50, 1000  # many duplicates and empty rows stress the per-thread offsets
        src = torch.from_numpy(rng.integers(0, n, e))
        dst = torch.from_numpy(rng.integers(0, n // 2, e))
        assert csr_mod._parallel_csr(src, dst, n, need_order) is not None  # the parallel path runs
        indptr, indices, order = csr_from_coo(src, dst, n, need_order=need_order)
    finally:
        torch.set_num_threads(previous)
    ref_ptr, ref_idx, ref_order = _stable_reference(src, dst, n)
    assert indptr.tolist() == ref_ptr.tolist()
    assert indices.tolist() == ref_idx.tolist()
    if need_order:
        assert order.tolist() == ref_order.tolist()
    else:
        assert order is None


def test_small_or_sparse_graphs_keep_the_sequential_sort(monkeypatch):
    src, dst = torch.tensor([0, 2, 1]), torch.tensor([1, 0, 0])
    assert csr_mod._parallel_csr(src, dst, 3, True) is None  # below PARALLEL_MIN_EDGES
    monkeypatch.setattr(csr_mod, "PARALLEL_MIN_EDGES", 1)
    # fewer edges than twice the nodes: per-thread counters would outweigh the edges
    assert csr_mod._parallel_csr(torch.arange(10), torch.arange(10), 10, True) is None
