"""The hop allocation strategy (sgl.ops.allocation): forced by SGL_HUGE_PAGES, else measured once and cached."""
import json

import pytest
import torch

from sgl.errors import ConfigError
from sgl.ops import allocation


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No forced strategy, no choice remembered by this process, a private cache folder and a
    calibration that counts its calls (and never runs the real timing)."""
    monkeypatch.delenv("SGL_HUGE_PAGES", raising=False)
    monkeypatch.setattr(allocation, "_CHOSEN", None)
    monkeypatch.setenv("SGL_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def calibrate(nbytes=allocation.CALIBRATION_BYTES, rounds=3):
        calls.append(nbytes)
        return {"strategy": "populate", "seconds": {"touch": 2.0, "populate": 1.0}, "bytes": nbytes}

    monkeypatch.setattr(allocation, "calibrate_allocation", calibrate)
    return calls


@pytest.mark.parametrize("value, expected", [("0", "plain"), ("1", "populate"), ("touch", "touch"),
                                             ("Populate", "populate"), ("off", "plain")])
def test_environment_forces_the_strategy_without_calibrating(fresh, monkeypatch, value, expected):
    monkeypatch.setenv("SGL_HUGE_PAGES", value)
    assert allocation.allocation_strategy() == expected
    assert fresh == [] and not allocation.allocation_cache_path().exists()


def test_bad_environment_value_is_a_clear_error(fresh, monkeypatch):
    monkeypatch.setenv("SGL_HUGE_PAGES", "yes please")
    with pytest.raises(ConfigError, match="SGL_HUGE_PAGES"):
        allocation.allocation_strategy()


def test_calibrated_once_then_read_from_the_cache(fresh, monkeypatch):
    assert allocation.allocation_strategy() == "populate"
    path = allocation.allocation_cache_path()
    data = json.loads(path.read_text())
    entry = data["machines"][allocation.machine_fingerprint()]
    assert entry["strategy"] == "populate" and entry["seconds"] == {"touch": 2.0, "populate": 1.0}
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 1  # remembered in-process
    monkeypatch.setattr(allocation, "_CHOSEN", None)  # a new process on the same machine
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 1  # read back, not re-measured
    assert allocation.allocation_strategy(refresh=True) == "populate" and len(fresh) == 2
    monkeypatch.setenv("SGL_HUGE_PAGES", "auto")
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 2


def test_an_entry_from_an_earlier_boot_is_measured_again(fresh, monkeypatch):
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 1
    monkeypatch.setattr(allocation, "_CHOSEN", None)
    monkeypatch.setattr(allocation, "_boot_id", lambda: "another-boot")
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 2
    entry = json.loads(allocation.allocation_cache_path().read_text())["machines"][allocation.machine_fingerprint()]
    assert entry["boot_id"] == "another-boot"


def test_other_machines_entries_are_kept(fresh):
    path = allocation.allocation_cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "machines": {"other|host": {"strategy": "touch"}}}))
    assert allocation.allocation_strategy() == "populate"
    machines = json.loads(path.read_text())["machines"]
    assert machines["other|host"] == {"strategy": "touch"} and allocation.machine_fingerprint() in machines


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"version": 99, "machines": {}}',
                                     b'{"version": 1, "machines": {"KEY": {"strategy": "fastest"}}}'])
def test_corrupt_cache_is_ignored_and_rewritten_atomically(fresh, content):
    path = allocation.allocation_cache_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content.replace(b"KEY", allocation.machine_fingerprint().encode()))
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 1
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["machines"][allocation.machine_fingerprint()]["strategy"] == "populate"
    assert sorted(p.name for p in path.parent.iterdir()) == ["allocation.json"]  # no temporaries left


def test_unwritable_cache_keeps_the_choice_for_the_process(fresh, monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("SGL_CACHE_DIR", str(blocker / "sub"))  # its parent is a file: cannot be created
    assert allocation.allocation_strategy() == "populate"
    assert allocation.allocation_strategy() == "populate" and len(fresh) == 1


@pytest.mark.parametrize("strategy", allocation.ALLOCATION_STRATEGIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_strategy_gives_a_writable_contiguous_buffer(strategy, dtype):
    n, d = 40_000, 64  # above the 2 MiB huge-page threshold in both dtypes
    buf = allocation.empty_rows(n, d, dtype, strategy=strategy)
    assert buf.shape == (n, d) and buf.dtype == dtype and buf.is_contiguous() and buf.device.type == "cpu"
    buf.fill_(1.5)
    assert float(buf[-1, -1]) == 1.5 and float(buf.double().sum()) == 1.5 * n * d
    with pytest.raises(ConfigError, match="strategy"):
        allocation.empty_rows(n, d, dtype, strategy="huge")


def test_small_buffers_never_calibrate(fresh):
    assert allocation.empty_rows(10, 10, torch.float32).shape == (10, 10)
    assert fresh == []


def test_real_calibration_returns_a_strategy_and_its_timings():
    result = allocation.calibrate_allocation(nbytes=4 * 2**20, rounds=1)
    assert result["strategy"] in allocation.ALLOCATION_STRATEGIES
    if result["strategy"] != "plain":
        assert set(result["seconds"]) == {"touch", "populate", "plain"}
        assert all(v > 0 for v in result["seconds"].values())
