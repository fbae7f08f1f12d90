"""Tests for sgl.embeddings.het.staleness, the write-back core of HET's cache and HET-GMP's mirrors."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from sgl.embeddings.het import EmbeddingCache, ShardedServer
from sgl.embeddings.het.staleness import StaleLines, StalenessConfig
from sgl.embeddings.hetgmp import GMPWorker
from sgl.errors import ConfigError


def test_accumulate_marks_lines_due_past_the_write_bound() -> None:
    lines = StaleLines(torch.tensor([3, 5, 8]), dim=2)
    slots = torch.tensor([0, -1, 2])  # the second key has no line
    deltas = torch.tensor([[1.0, 2.0], [9.0, 9.0], [0.5, 0.5]])
    due = lines.accumulate(slots, deltas, torch.tensor([1, 4, 3]), write_bound=2)
    assert due.tolist() == [2]  # 3 updates > 2; line 0 holds only 1
    assert lines.updates.tolist() == [1, 0, 3]
    assert torch.equal(lines.pending, torch.tensor([[1.0, 2.0], [0.0, 0.0], [0.5, 0.5]]))
    assert torch.equal(lines.value, lines.pending)  # value = last server value (0) + pending
    due = lines.accumulate(torch.tensor([0]), torch.ones(1, 2), torch.tensor([2]), write_bound=2)
    assert due.tolist() == [0]


def test_take_returns_the_push_and_cleans_the_lines() -> None:
    lines = StaleLines(torch.tensor([3, 5]), dim=2)
    lines.version[:] = torch.tensor([7, 1])
    lines.accumulate(torch.tensor([0, 1]), torch.ones(2, 2), torch.tensor([4, 2]), write_bound=0)
    keys, deltas, counts = lines.take(torch.tensor([0]))
    assert keys.tolist() == [3] and deltas.tolist() == [[1.0, 1.0]] and counts.tolist() == [4]
    assert lines.version.tolist() == [11, 1]  # advanced by the updates pushed
    assert lines.updates.tolist() == [0, 2] and lines.pending[0].abs().sum() == 0
    deltas += 1  # the push is a copy, not a view of the lines
    assert lines.pending[0].abs().sum() == 0
    assert lines.dirty().tolist() == [1]
    lines.clear(torch.tensor([1]))
    assert lines.dirty().numel() == 0 and lines.version.tolist() == [11, -1]


def test_refresh_reapplies_pending_deltas() -> None:
    lines = StaleLines(torch.tensor([3, 5]), dim=1)
    lines.version[:] = torch.tensor([2, 0])
    lines.accumulate(torch.tensor([0]), torch.tensor([[0.25]]), torch.tensor([1]), write_bound=5)
    slots = torch.tensor([0, -1, 1])  # batch keys 3 (line 0), 4 (no line), 5 (line 1)
    versions = lines.held_versions(slots)
    assert versions.tolist() == [2, -1, 0]
    out, read = torch.full((3, 1), -9.0), versions.clone()
    # the server answered positions 0 and 1; position 2 was fresh enough
    lines.refresh(slots, torch.tensor([0, 1]), torch.tensor([[1.0], [2.0]]), torch.tensor([6, 4]), out, read)
    assert out[:2, 0].tolist() == [1.25, 2.0] and out[2, 0] == -9.0
    assert read.tolist() == [6, 4, 0]
    assert lines.value[0].item() == 1.25 and lines.version.tolist() == [6, 0]


def test_pushes_through_the_core_lose_no_update() -> None:
    """Random write-backs at several bounds: after taking the dirty lines the server holds every delta."""
    rng = np.random.default_rng(0)
    for write_bound in (0, 1, 3):
        server = ShardedServer(10, 2, num_shards=2, init_std=0.0)
        lines = StaleLines(torch.arange(0, 10, 2), dim=2)  # rows 0, 2, .., 8 have a line
        lines.version[:] = 0  # fetched before any update
        total, updates = torch.zeros(10, 2), torch.zeros(10, dtype=torch.int64)
        for _ in range(30):
            keys = torch.from_numpy(np.sort(rng.choice(10, size=4, replace=False))).long()
            deltas, counts = torch.randn(4, 2), torch.from_numpy(rng.integers(1, 3, 4)).long()
            slots = torch.where(keys % 2 == 0, keys // 2, -1)
            total.index_add_(0, keys, deltas)
            updates.index_add_(0, keys, counts)
            due_keys, due_deltas, due_counts = lines.take(lines.accumulate(slots, deltas, counts, write_bound))
            assert int(lines.updates.max()) <= write_bound
            direct = slots < 0
            server.push(torch.cat([keys[direct], due_keys]), torch.cat([deltas[direct], due_deltas]),
                        torch.cat([counts[direct], due_counts]))
        server.push(*lines.take(lines.dirty()))
        assert torch.allclose(server.weights(), total, atol=1e-6)
        assert torch.equal(server.versions(), updates)
        assert torch.equal(lines.version, updates[lines.keys])  # the only writer: lines are current


def test_het_cache_and_gmp_mirrors_are_stale_lines() -> None:
    assert issubclass(EmbeddingCache, StaleLines) and issubclass(GMPWorker, StaleLines)
    lines = StaleLines(torch.full((4,), -1), dim=8)
    assert lines.line_bytes() == 2 * 8 * 4 + 3 * 8


@dataclass
class _Config(StalenessConfig):
    num_embeddings: int = 10
    embedding_dim: int = 2
    bound: int = 3
    push_bound: int | None = None
    lr: float = 0.1
    update_unit: str = "step"

    def __post_init__(self) -> None:
        self._check_table()
        self._check_bounds()
        self._check_sgd()


def test_config_checks_name_the_config_class() -> None:
    assert _Config().write_bound == 3 and _Config(push_bound=0).write_bound == 0
    assert type(_Config(num_embeddings=np.int64(4)).num_embeddings) is int
    for kwargs, message in [
        (dict(embedding_dim=0), "_Config.embedding_dim must be an int >= 1, got 0."),
        (dict(bound=-1), "_Config.bound must be an int >= 0, got -1."),
        (dict(push_bound=1.5), "_Config.push_bound must be an int >= 0, got 1.5."),
        (dict(update_unit="row"), "_Config.update_unit must be 'step' or 'occurrence', got 'row'."),
        (dict(lr=0.0), "_Config.lr must be > 0, got 0.0."),
    ]:
        with pytest.raises(ConfigError) as info:
            _Config(**kwargs)
        assert str(info.value) == message
