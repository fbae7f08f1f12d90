"""KVSAgg in one process: exact HyperIBLT decodes, reported failures, masks, bad input."""
import pytest
import torch

from sgl.comm.compress import (
    FIELD_PRIME, HyperIBLT, PairwiseMasker, X25519Identity, aggregate_tables, check_specs, kvsagg_sum,
)
from sgl.errors import CommError, ConfigError


def _clients(n_clients=4, per_client=3000, key_space=10**9, seed=0):
    g = torch.Generator().manual_seed(seed)
    shared = torch.randint(0, key_space, (per_client // 2,), generator=g)
    sets = []
    for _ in range(n_clients):
        own = torch.randint(0, key_space, (per_client,), generator=g)
        keys = torch.unique(torch.cat([shared, own]))
        sets.append((keys, torch.randint(-50, 100, (keys.numel(),), generator=g)))
    return sets


def _plain_sum(sets):
    keys = torch.cat([k for k, _ in sets])
    values = torch.cat([v for _, v in sets])
    uniq, inv = torch.unique(keys, return_inverse=True)
    return uniq, torch.zeros(uniq.numel(), dtype=torch.int64).index_add_(0, inv, values), torch.bincount(inv)


def test_decodes_the_exact_sum_when_sized_for_the_keys():
    sets = _clients()
    keys, sums, counts = _plain_sum(sets)
    iblt = HyperIBLT.for_keys(keys.numel(), key_space=10**9, seed=3)
    out = iblt.decode(iblt.add(*[iblt.encode(k, v) for k, v in sets])).require()
    assert torch.equal(out.keys, keys) and torch.equal(out.values.reshape(-1), sums)
    assert torch.equal(out.counts, counts)


def test_undersized_table_reports_failure_never_a_wrong_sum():
    sets = _clients(seed=1)
    keys, sums, _ = _plain_sum(sets)
    truth = dict(zip(keys.tolist(), sums.tolist()))
    for cells_per_key in (1.1, 0.8, 0.3):
        iblt = HyperIBLT(int(cells_per_key * keys.numel() / 3), key_space=10**9, seed=3)
        out = iblt.decode(iblt.add(*[iblt.encode(k, v) for k, v in sets]))
        assert not out.ok and out.cells_left > 0
        # whatever was peeled is right
        assert all(truth.get(k) == v for k, v in zip(out.keys.tolist(), out.values.reshape(-1).tolist()))
        with pytest.raises(CommError, match="too small"):
            out.require()


def test_fixed_point_values_and_vectors():
    iblt = HyperIBLT.for_keys(10, key_space=100, value_dim=2, value_scale=2**16)
    a = iblt.encode(torch.tensor([1, 5]), torch.tensor([[0.5, -0.25], [1.0, 2.0]]))
    b = iblt.encode(torch.tensor([5]), torch.tensor([[-3.0, 0.125]]))
    out = iblt.decode(iblt.add(a, b)).require()
    assert out.keys.tolist() == [1, 5] and out.values.tolist() == [[0.5, -0.25], [-2.0, 2.125]]


def test_masks_cancel_only_in_the_full_sum_and_hide_each_client():
    sets = _clients(n_clients=3, per_client=500, seed=2)
    iblt = HyperIBLT.for_keys(2000, key_space=10**9, seed=1)
    ids = [X25519Identity.generate() for _ in sets]
    public = [i.public_bytes for i in ids]
    tables = [iblt.encode(k, v) for k, v in sets]
    masked = [PairwiseMasker(c, ids[c], public).mask(t) for c, t in enumerate(tables)]
    assert torch.equal(aggregate_tables(iblt, masked), iblt.add(*tables))          # masks cancel in the sum
    partial = aggregate_tables(iblt, masked[:2])
    assert (partial != iblt.add(*tables[:2])).float().mean() > 0.99               # not in a partial sum
    # the server's view of client 0 is uniform in Z_p whatever its input: the same table
    # masked under fresh keys, and an all-zero input, give values spread over the whole field
    for view in (masked[0], PairwiseMasker(0, ids[0], public).mask(torch.zeros_like(tables[0]))):
        u = view.double() / FIELD_PRIME
        assert abs(float(u.mean()) - 0.5) < 0.01 and abs(float(u.var()) - 1 / 12) < 0.005
        assert torch.histc(u, bins=10, min=0, max=1).min() > 0.09 * u.numel()
    corr = torch.corrcoef(torch.stack([masked[0].double().reshape(-1), tables[0].double().reshape(-1)]))[0, 1]
    assert abs(float(corr)) < 0.02


def test_single_process_kvsagg_sum_is_the_plain_set():
    iblt = HyperIBLT.for_keys(20, key_space=1000)
    out = kvsagg_sum(torch.tensor([9, 3]), torch.tensor([4, 5]), iblt)
    assert out.ok and out.keys.tolist() == [3, 9] and out.values.reshape(-1).tolist() == [5, 4]


def test_bad_input_is_refused():
    iblt = HyperIBLT.for_keys(100, key_space=1000)
    with pytest.raises(ConfigError, match="at least one"):
        HyperIBLT(0, key_space=10)                                  # a table smaller than its minimum
    with pytest.raises(ConfigError, match=">= 1.222"):
        HyperIBLT.for_keys(100, key_space=1000, cells_per_key=1.0)
    with pytest.raises(ConfigError, match="key_space"):
        HyperIBLT(10, key_space=2**40)
    with pytest.raises(ConfigError, match=r"in \[0, 1000\)"):
        iblt.encode(torch.tensor([1000]), torch.tensor([1]))
    with pytest.raises(ConfigError, match="unique"):
        iblt.encode(torch.tensor([1, 1]), torch.tensor([1, 2]))
    with pytest.raises(ConfigError, match="value_scale"):
        iblt.encode(torch.tensor([1]), torch.tensor([0.5]))
    other = HyperIBLT.for_keys(100, key_space=5000)                 # mismatched key spaces between clients
    with pytest.raises(ConfigError, match="key_space 1000 vs 5000"):
        check_specs([iblt.spec(), other.spec()])
    good = iblt.encode(torch.tensor([1]), torch.tensor([1]))
    with pytest.raises(CommError, match="client 1's table has shape"):   # a client sends a wrong-sized table
        aggregate_tables(iblt, [good, good[:-3]])
