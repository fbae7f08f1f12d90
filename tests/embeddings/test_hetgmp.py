"""Tests for sgl.embeddings.hetgmp: bigraph, partitioner, replication, runtime (simulator)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sgl.embeddings.het import init_rows
from sgl.embeddings.hetgmp import (
    Bigraph, GMPConfig, PartitionConfig, partition_bigraph, random_partition, replica_priority,
    select_replicas, simulated_cluster, soft_count,
)
from sgl.errors import ConfigError, EmbeddingError


def zipf_ids(n: int, fields: int, vocab: int, seed: int, a: float = 1.1) -> np.ndarray:
    """Per-field Zipf ids with field offsets (one table of fields * vocab rows)."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, vocab + 1, dtype=np.float64) ** -a
    p /= p.sum()
    ids = np.stack([rng.permutation(vocab)[rng.choice(vocab, n, p=p)] for _ in range(fields)], 1)
    return ids + vocab * np.arange(fields)


def test_bigraph_matches_brute_force() -> None:
    ids = zipf_ids(300, 4, 50, seed=0)
    ids[:, 3] = ids[:, 2]  # a repeated id inside a sample is one edge
    g = Bigraph(ids)
    assert g.embed_ids.tolist() == sorted(set(ids.flatten().tolist()))
    for x in range(0, 300, 37):
        assert g.embed_ids[g.embeddings_of(x)].tolist() == sorted(set(ids[x].tolist()))
    for e in range(0, g.num_embeddings, 11):
        rows = np.flatnonzero((ids == g.embed_ids[e]).any(1))
        assert g.samples_of(e).tolist() == rows.tolist() and g.degree[e] == rows.size
    assert g.num_edges == sum(len(set(r)) for r in ids.tolist())
    assert g.compact(np.array([g.embed_ids[5], 10**9])).tolist() == [5, -1]
    with pytest.raises(EmbeddingError, match="2-D"):
        Bigraph(np.arange(5))
    with pytest.raises(EmbeddingError, match=">= 0"):
        Bigraph(np.array([[1, -2]]))
    with pytest.raises(EmbeddingError, match="integers"):
        Bigraph(np.ones((2, 2)))


def test_soft_count_models_batch_dedup() -> None:
    m, b = 200.0, 20
    s = soft_count(np.arange(0, 201), m, b)
    assert s[0] == 0 and np.isclose(s[-1], m / b)  # used by every sample: every batch fetches it
    assert np.all(np.diff(s) >= 0) and np.all(np.diff(s[:60]) > 0)  # increasing
    assert np.all(np.diff(s, 2) < 1e-12)  # concave: sharing an embedding in a batch pays
    # Monte Carlo: batches of b drawn with replacement from m samples, c of which use e
    rng = np.random.default_rng(0)
    for c in (1, 10, 60):
        hits = (rng.random((4000, b)) < c / m).any(1).mean()
        assert abs(hits * m / b - soft_count(np.array([c]), m, b)[0]) < 0.05 * m / b


def _clustered(n: int = 600, groups: int = 4, per_group: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    own = rng.integers(0, per_group, (n, 3)) + per_group * (np.arange(n) % groups)[:, None]
    shared = rng.integers(0, 10, (n, 1)) + per_group * groups  # ids every group uses
    return np.concatenate([own, shared], 1)


def test_partitioner_balances_and_beats_random() -> None:
    g = Bigraph(_clustered())
    cfg = PartitionConfig(num_parts=4, batch_size=16, imbalance=0.05)
    gmp = partition_bigraph(g, cfg)
    base = random_partition(g, 4, 16)
    assert gmp.sample_sizes().max() <= int(1.05 * 600 / 4)
    assert gmp.embedding_sizes().max() <= max(int(1.05 * g.num_embeddings / 4), 1)
    assert gmp.expected_remote_fetches() < 0.5 * base.expected_remote_fetches()
    # the baseline is what it says: id mod K and balanced random samples
    assert np.array_equal(base.embed_part, g.embed_ids % 4)
    assert np.ptp(base.sample_sizes()) <= 1
    # placement covers the whole table; rows outside the bigraph go to id mod K
    placement = gmp.placement(g.embed_ids.max() + 5)
    assert placement[g.embed_ids].tolist() == gmp.embed_part.tolist()
    assert placement[-1].item() == (g.embed_ids.max() + 4) % 4
    fetches = gmp.expected_fetches()
    assert fetches.shape == (4, 4) and np.all(fetches >= 0)
    with pytest.raises(ConfigError, match="fill 4 workers"):
        partition_bigraph(Bigraph(np.array([[1], [2]])), cfg)
    with pytest.raises(ConfigError, match="num_parts"):
        PartitionConfig(num_parts=0, batch_size=4)


def test_partitioner_on_real_criteo_sample(data_path) -> None:
    sparse = np.load(data_path("criteo_het_sampled", "sampled_sparse_feats.npy"))
    g = Bigraph(sparse[:4096])
    gmp = partition_bigraph(g, PartitionConfig(num_parts=4, batch_size=256, rounds=3))
    base = random_partition(g, 4, 256)
    assert gmp.expected_remote_fetches() < 0.6 * base.expected_remote_fetches()


def test_replicas_follow_priority_within_budget() -> None:
    g = Bigraph(_clustered())
    part = random_partition(g, 4, 16)
    pr = replica_priority(part)
    own = part.embed_part[None, :] == np.arange(4)[:, None]
    assert np.all(pr[own] == 0) and np.all(pr >= 0)
    reps = select_replicas(part, 7)
    for i, r in enumerate(reps):
        comp = g.compact(r.numpy())
        assert r.numel() == 7 and np.all(part.embed_part[comp] != i)
        top = np.sort(pr[i])[::-1][:7]
        assert np.allclose(pr[i, comp], top)  # the highest priorities, in order
    assert all(r.numel() == round(0.1 * g.num_embeddings) for r in select_replicas(part, 0.1))
    assert all(r.numel() == 0 for r in select_replicas(part, 0))
    for bad in (-1, 1.5, "10"):
        with pytest.raises(ConfigError, match="budget"):
            select_replicas(part, bad)


# --------------------------------------------------------------------------
# Runtime
# --------------------------------------------------------------------------
def _setup(bound: int, budget: int, seed: int = 0, unit: str = "step"):
    ids = _clustered(480, seed=seed)
    g = Bigraph(ids)
    part = partition_bigraph(g, PartitionConfig(num_parts=3, batch_size=8, rounds=2))
    rows = int(g.embed_ids.max()) + 1
    cfg = GMPConfig(rows, 4, bound=bound, lr=0.3, update_unit=unit)
    server, workers = simulated_cluster(cfg, part.placement(rows), select_replicas(part, budget), seed=5)
    labels = torch.from_numpy((ids[:, 0] % 2).astype(np.float32))
    per_worker = [np.flatnonzero(part.sample_part == w) for w in range(3)]
    return torch.from_numpy(ids), labels, per_worker, server, workers, rows


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(out.sum((1, 2)), y)


def test_bound0_matches_single_process_training() -> None:
    ids, labels, per_worker, server, workers, rows = _setup(bound=0, budget=15)
    table = init_rows(torch.arange(rows), 4, seed=5).requires_grad_(True)
    for r in range(12):
        batches = [torch.from_numpy(p[r * 8:(r + 1) * 8]) for p in per_worker]
        outs = [w(ids[b]) for w, b in zip(workers, batches)]
        ref_total = 0.0
        for out, b in zip(outs, batches):
            ref_out = F.embedding(ids[b], table)
            assert torch.allclose(out, ref_out, atol=1e-6), f"round {r}: lookups differ"
            ref_total = ref_total + _loss(ref_out, labels[b])
        for w, out, b in zip(workers, outs, batches):
            _loss(out, labels[b]).backward()
            w.step()
        ref_total.backward()
        with torch.no_grad():
            table += table.grad * -0.3
        table.grad = None
    assert sum(w.worker.mirror_reads for w in workers) > 0  # mirrors were exercised
    assert torch.allclose(server.weights(), table.detach(), atol=1e-6)


@pytest.mark.parametrize("bound", [0, 2, 5])
def test_mirror_staleness_bounded_and_no_update_lost(bound: int) -> None:
    ids, labels, per_worker, server, workers, rows = _setup(bound=bound, budget=30, unit="occurrence")
    worst, occurrences = -1, torch.zeros(rows, dtype=torch.long)
    for r in range(15):
        batches = [torch.from_numpy(p[r * 8:(r + 1) * 8]) for p in per_worker]
        outs = []
        for w, b in zip(workers, batches):
            outs.append(w(ids[b]))
            keys = torch.unique(ids[b])
            lag = int((server.versions()[keys] - w.worker.read_versions).max())
            assert lag <= bound
            worst = max(worst, lag)
            occurrences += torch.bincount(ids[b].flatten(), minlength=rows)
        for w, out, b in zip(workers, outs, batches):
            _loss(out, labels[b]).backward()
            w.step()
            assert int(torch.cat([w.worker.updates, torch.zeros(1, dtype=torch.long)]).max()) <= bound
    for w in workers:
        w.flush()
    assert torch.equal(server.versions(), occurrences)
    if bound:
        assert worst > 0


def test_mirrors_and_partitioning_cut_remote_traffic() -> None:
    def traffic(partitioned: bool, budget: int, bound: int) -> int:
        ids = _clustered(480)
        g = Bigraph(ids)
        part = (partition_bigraph(g, PartitionConfig(3, 8, rounds=2)) if partitioned
                else random_partition(g, 3, 8))
        rows = int(g.embed_ids.max()) + 1
        cfg = GMPConfig(rows, 4, bound=bound, lr=0.1)
        _, workers = simulated_cluster(cfg, part.placement(rows), select_replicas(part, budget))
        x = torch.from_numpy(ids)
        per_worker = [np.flatnonzero(part.sample_part == w) for w in range(3)]
        for r in range(10):
            outs = [w(x[torch.from_numpy(p[r * 8:(r + 1) * 8])]) for w, p in zip(workers, per_worker)]
            for w, out in zip(workers, outs):
                out.sum().backward()
                w.step()
        return sum(w.transport.stats.total_bytes for w in workers)

    base = traffic(False, 0, 0)
    gmp = traffic(True, 0, 0)
    gmp_mirrors = traffic(True, 20, 4)
    assert gmp < 0.6 * base and gmp_mirrors < gmp


def test_runtime_bad_inputs() -> None:
    cfg = GMPConfig(10, 2)
    placement = torch.arange(10) % 2
    with pytest.raises(ConfigError, match="one id list per worker"):
        simulated_cluster(cfg, placement, [torch.tensor([1])])
    with pytest.raises(EmbeddingError, match=r"mirror ids must be in \[0, 10\)"):
        simulated_cluster(cfg, placement, [torch.tensor([11]), torch.tensor([], dtype=torch.long)])
    with pytest.raises(EmbeddingError, match="placement values"):
        simulated_cluster(cfg, torch.full((10,), 3), [[], [], []], num_workers=3)
    _, (w0, _) = simulated_cluster(cfg, placement, [[], []])
    with pytest.raises(EmbeddingError, match=r"got values in \[0, 10\]"):
        w0(torch.tensor([[0, 10]]))
    for kwargs, match in [(dict(bound=-1), "bound"), (dict(lr=-1.0), "lr"),
                          (dict(update_unit="x"), "update_unit"), (dict(num_embeddings=0), "num_embeddings")]:
        with pytest.raises(ConfigError, match=match):
            GMPConfig(**{"num_embeddings": 10, "embedding_dim": 2, **kwargs})
