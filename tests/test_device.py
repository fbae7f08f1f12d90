"""Tests for sgl.device: precedence, accepted spellings and error messages."""
from __future__ import annotations

import doctest

import pytest
import torch

import sgl.device as device_mod
from sgl.device import ENV_VAR, default_backend, get_device
from sgl.errors import DeviceError, SGLError


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must not see a SGL_DEVICE set by whoever runs them."""
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture
def fake_two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend two GPUs are visible (only availability is queried, nothing allocated)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.parametrize("value", ["cpu", "CPU", "  cpu ", torch.device("cpu")])
def test_cpu_spellings(value: str | torch.device) -> None:
    assert get_device(value) == torch.device("cpu")


def test_auto_and_default_follow_cuda_availability(no_gpu: None) -> None:
    assert get_device("auto") == torch.device("cpu")
    assert get_device() == torch.device("cpu")


def test_auto_picks_cuda_when_available(fake_two_gpus: None) -> None:
    assert get_device("auto") == torch.device("cuda")
    assert get_device(None) == torch.device("cuda")


def test_cuda_with_index(fake_two_gpus: None) -> None:
    assert get_device("cuda") == torch.device("cuda")
    assert get_device("cuda:1") == torch.device("cuda", 1)
    assert get_device(torch.device("cuda", 0)) == torch.device("cuda", 0)


def test_env_var_used_when_no_argument(
    monkeypatch: pytest.MonkeyPatch, fake_two_gpus: None
) -> None:
    monkeypatch.setenv(ENV_VAR, "cpu")
    assert get_device() == torch.device("cpu")
    # The explicit argument wins over the environment.
    assert get_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setenv(ENV_VAR, "cuda:1")
    assert get_device() == torch.device("cuda", 1)


def test_blank_env_var_is_ignored(monkeypatch: pytest.MonkeyPatch, no_gpu: None) -> None:
    monkeypatch.setenv(ENV_VAR, "   ")
    assert get_device() == torch.device("cpu")


def test_bad_env_var_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "gpu")
    with pytest.raises(DeviceError, match=f"'gpu'.*environment variable {ENV_VAR}"):
        get_device()


@pytest.mark.parametrize(
    "value", ["tpu", "cuda:", "cuda:-1", "cuda:x", "cpu:0", "auto:1", "", "cuda:0:1"]
)
def test_malformed_strings(value: str) -> None:
    with pytest.raises(DeviceError) as info:
        get_device(value)
    msg = str(info.value)
    assert repr(value) in msg  # what was received
    assert '"cuda:N"' in msg  # what is valid
    assert "Fix:" in msg  # how to fix


@pytest.mark.parametrize("value", [0, 1.5, ["cpu"]])
def test_wrong_types(value: object) -> None:
    with pytest.raises(DeviceError, match="Expected a str"):
        get_device(value)  # type: ignore[arg-type]


def test_bare_int_suggests_cuda_string() -> None:
    with pytest.raises(DeviceError, match='device="cuda:1"'):
        get_device(1)  # type: ignore[arg-type]


def test_unsupported_torch_device_type() -> None:
    with pytest.raises(DeviceError, match="Unsupported device"):
        get_device(torch.device("meta"))


@pytest.mark.parametrize("value", ["cuda", "cuda:0", torch.device("cuda")])
def test_cuda_unavailable(no_gpu: None, value: str | torch.device) -> None:
    with pytest.raises(DeviceError, match=r"torch.cuda.is_available\(\) is False.*Fix:"):
        get_device(value)


def test_cuda_index_out_of_range(fake_two_gpus: None) -> None:
    with pytest.raises(DeviceError, match=r"GPU 2.*only 2 GPU\(s\).*cuda:0 \.\. cuda:1"):
        get_device("cuda:2")
    with pytest.raises(DeviceError, match="GPU 7"):
        get_device(torch.device("cuda", 7))


def test_device_error_is_sgl_error(no_gpu: None) -> None:
    with pytest.raises(SGLError):
        get_device("cuda")


def test_default_backend(fake_two_gpus: None) -> None:
    assert default_backend("cpu") == "gloo"
    assert default_backend("cuda:1") == "nccl"
    assert default_backend(torch.device("cpu")) == "gloo"


def test_default_backend_without_gpu(no_gpu: None) -> None:
    assert default_backend() == "gloo"
    with pytest.raises(DeviceError):
        default_backend("cuda")


def test_docstring_examples_run() -> None:
    result = doctest.testmod(device_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
