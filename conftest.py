"""Fixtures for everything pytest collects: tests/ and the docstring examples in sgl/."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Every test and doctest starts from the same random state, whatever ran before it."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Test workloads are tiny: on a busy 2-core machine, intra-op thread hand-offs made them
    10-40x slower than one thread (measured on the Cora GCN test: 143 s vs 12.7 s)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def pytest_collection_modifyitems(config, items):
    """``SGL_TEST_ORDER=reverse`` runs the suite in reversed collection order, ``random:SEED`` in a
    seeded shuffle: the suite must pass in any order (no test may rely on what ran before it)."""
    import os
    import random

    order = os.environ.get("SGL_TEST_ORDER", "").strip()
    if order == "reverse":
        items.reverse()
    elif order.startswith("random:"):
        random.Random(int(order.split(":", 1)[1])).shuffle(items)
    elif order:
        raise pytest.UsageError(f"SGL_TEST_ORDER must be 'reverse' or 'random:SEED', got {order!r}")
