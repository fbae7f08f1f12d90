"""HaCore and PS-MI with parties as threads and processes: the same results as in one process, and only
what each party releases crosses."""
import numpy as np
import pytest

from sgl.errors import ConfigError
from sgl.federated.selection import hacore_coreset, hacore_with_parties, psmi_values, psmi_with_parties


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return [y[:, None] + rng.normal(size=(n, 3)), rng.normal(size=(n, 5)), rng.normal(size=(n, 1)) + y[:, None]], y


@pytest.mark.parametrize("method, bits", [("kcenter", 128), ("kmedoids", 100)])
def test_hacore_with_parties_equals_one_process(method, bits):
    blocks, y = _data()
    ref = hacore_coreset(blocks, y, 30, bits=bits, seed=3, method=method)
    out = hacore_with_parties(blocks, y, 30, bits=bits, seed=3, method=method, backend="thread")
    assert np.array_equal(out["coreset"].ids, ref.ids) and np.array_equal(out["coreset"].weights, ref.weights)
    assert sum(out["bits"]) == bits
    # each passive party sends one norm and its own bits only (ceil(b / 64) words per row), nothing else
    for p in (1, 2):
        b = out["bits"][p]
        assert out["parties"][p]["bytes_sent"] == 8 + 150 * 8 * -(-b // 64)


def test_hacore_with_parties_runs_as_processes():
    blocks, y = _data(90)
    out = hacore_with_parties(blocks[:2], y, 15, seed=1, backend="process", timeout=120.0, comm_timeout=60.0)
    ref = hacore_coreset(blocks[:2], y, 15, seed=1)
    assert np.array_equal(out["coreset"].ids, ref.ids) and out["parties"][1]["bytes_sent"] > 0


def test_psmi_with_parties_equals_one_process():
    blocks, y = _data(120, seed=1)
    ref = psmi_values(blocks, y, k=5, proj_dim=4, per_stratum=3, seed=2)
    out = psmi_with_parties(blocks, y, k=5, proj_dim=4, per_stratum=3, seed=2, backend="thread")
    assert np.allclose(out["result"].values, ref.values) and out["result"].coalitions == ref.coalitions
    assert out["parties"][1]["bytes_sent"] == 120 * 4 * 8  # the projection, float64


def test_party_runs_refuse_bad_input():
    blocks, y = _data(60)
    with pytest.raises(ConfigError, match="backend"):
        hacore_with_parties(blocks, y, 10, backend="mpi")
    with pytest.raises(ConfigError, match="at least 2 parties"):
        hacore_with_parties(blocks[:1], y, 10, backend="thread")
    with pytest.raises(ConfigError, match="larger than the data"):
        hacore_with_parties(blocks, y, 61, backend="thread")
    with pytest.raises(ConfigError, match="method"):
        hacore_with_parties(blocks, y, 10, method="kmeans", backend="thread")
    with pytest.raises(ConfigError, match="per_stratum"):
        psmi_with_parties(blocks, y, per_stratum=1, backend="thread")
    with pytest.raises(ConfigError, match="proj_dim"):
        psmi_with_parties(blocks, y, proj_dim=0, backend="thread")
