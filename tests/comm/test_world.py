"""Tests for sgl.comm.world: init (arguments, environment, backends), rank queries, shutdown.

``test_world_of_one_in_process`` runs a real 1-rank Gloo group in this process.
"""
from __future__ import annotations

import doctest

import pytest
import torch

import sgl.comm as comm
from sgl.errors import CommError


def test_not_initialized_defaults() -> None:
    assert not comm.is_initialized()
    assert (comm.get_rank(), comm.get_world_size(), comm.get_local_rank()) == (0, 1, 0)
    assert comm.get_backend() is None


def test_init_missing_env(no_dist_env: None) -> None:
    with pytest.raises(CommError) as info:
        comm.init()
    msg = str(info.value)
    for name in ("RANK", "WORLD_SIZE", "torchrun", "rank", "world_size"):
        assert name in msg
    assert not comm.is_initialized()


def test_init_missing_master(no_dist_env: None) -> None:
    with pytest.raises(CommError, match="master_addr \\(env MASTER_ADDR\\) and master_port"):
        comm.init(rank=0, world_size=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rank": 2, "world_size": 2}, r"rank must be in \[0, 2\).*got rank=2"),
        ({"rank": -1, "world_size": 2}, r"got rank=-1"),
        ({"rank": 0, "world_size": 0}, "world_size must be >= 1"),
        ({"rank": "0", "world_size": 2}, "rank must be an int"),
        ({"rank": 0, "world_size": 2, "timeout": 0}, "positive number of seconds"),
        ({"rank": 0, "world_size": 2, "master_port": 70000}, r"\[1, 65535\]"),
    ],
)
def test_init_rejects_bad_arguments(no_dist_env: None, kwargs: dict, match: str) -> None:
    kwargs.setdefault("master_addr", "127.0.0.1")
    kwargs.setdefault("master_port", 29999)
    with pytest.raises(CommError, match=match):
        comm.init(**kwargs)
    assert not comm.is_initialized()


def test_init_bad_env_value(no_dist_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(CommError, match="RANK='zero' is not an integer"):
        comm.init(world_size=2)


def test_init_bad_backend(no_dist_env: None) -> None:
    with pytest.raises(CommError, match="backend 'smoke' is not available"):
        comm.init("smoke", rank=0, world_size=1)
    with pytest.raises(CommError, match="needs a CUDA device"):
        comm.init("nccl", rank=0, world_size=1, device="cpu")
    assert not comm.is_initialized()


def test_world_of_one_in_process(no_dist_env: None) -> None:
    """A real (Gloo, 1-rank) process group in this process, then shut down."""
    comm.init(rank=0, world_size=1, timeout=10)  # address and port default for a world of 1
    try:
        assert comm.is_initialized() and comm.get_backend() == "gloo"
        assert (comm.get_rank(), comm.get_world_size(), comm.get_local_rank()) == (0, 1, 0)
        comm.init(rank=0, world_size=1)  # same config: no-op
        with pytest.raises(CommError, match=r"already initialised as rank 0/1.*world_size=2"):
            comm.init(rank=0, world_size=2)
        t = torch.tensor([1.0, 3.0])
        assert comm.all_reduce(t, op="mean") is t and torch.equal(t, torch.tensor([1.0, 3.0]))
        assert torch.equal(comm.all_gather(torch.arange(3))[0], torch.arange(3))
        assert torch.equal(comm.all_to_all(torch.arange(3), input_splits=[3]), torch.arange(3))
        assert torch.equal(comm.all_to_all([torch.ones(2, 2)])[0], torch.ones(2, 2))
        comm.barrier(timeout=5)
        group = comm.new_group([0])
        assert torch.equal(comm.all_reduce(torch.ones(1), group=group), torch.ones(1))
        with pytest.raises(CommError, match="own rank"):
            comm.send(torch.ones(1), dst=0)
        with pytest.raises(CommError, match=r"src=1 is not a rank of the group \[0\]"):
            comm.recv((1,), src=1)
    finally:
        comm.shutdown()
    assert not comm.is_initialized() and comm.get_world_size() == 1


def test_docstring_examples_run() -> None:
    result = doctest.testmod(comm, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
