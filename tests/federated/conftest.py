"""Shared fixtures of the sgl.federated tests: one torch thread (the parties run side by side)."""
import numpy as np
import pytest
import torch

from sgl.datasets.ctr import CTRData


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def separable_toy(n: int = 900, seed: int = 0) -> CTRData:
    """Labels decided by the host's field F2 (ids < 4: ~20% positives); the host also owns 2 dense columns."""
    rng = np.random.default_rng(seed)
    sparse = rng.integers(0, 20, size=(n, 3))
    dense = rng.normal(size=(n, 2)).astype(np.float32)
    labels = (sparse[:, 1] < 4).astype(np.float32)
    return CTRData(dense, sparse, labels, [20, 20, 20], ["F1", "F2", "F3"])


TOY_SPLIT = {"guest": ["F1"], "host": ["I1", "I2", "F2", "F3"]}
