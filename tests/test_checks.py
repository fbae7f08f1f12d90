"""sgl._checks: the one home of scalar checks and byte sizes."""
import math

import pytest

from sgl._checks import check_bool, check_choice, check_int, check_probability, check_real, format_bytes, parse_bytes
from sgl.errors import ConfigError, PlanError


@pytest.mark.parametrize("text, expected", [
    ("512MB", 512 * 10**6), ("512MiB", 512 * 2**20), ("512 mb", 512 * 10**6), ("1.5GB", 1_500_000_000),
    ("2GiB", 2 * 2**30), ("200KB", 200_000), ("4KiB", 4096), ("3k", 3000), ("1TB", 10**12), ("1TiB", 2**40),
    ("4096", 4096), (4096, 4096), (1e3, 1000), ("1e3", 1000),
])
def test_parse_bytes_one_convention(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["lots", "-3MB", "0", 0, True, "5 parsecs", "1e999GB"])
def test_parse_bytes_rejects_clearly(bad):
    with pytest.raises(ConfigError):
        parse_bytes(bad)
    with pytest.raises(PlanError, match="budget"):
        parse_bytes(bad, "memory budget", error=PlanError)


def test_every_byte_size_in_sgl_uses_it():
    from sgl.cli.plan import parse_memory_gb
    from sgl.samplers import MemoryBudget
    from sgl.samplers import parse_bytes as samplers_parse_bytes

    assert MemoryBudget("512MB").total == 512 * 10**6 and MemoryBudget("512MiB").total == 512 * 2**20
    assert samplers_parse_bytes("512MB") == parse_bytes("512MB")
    assert parse_memory_gb("512MiB") == 0.5 and math.isclose(parse_memory_gb("512MB") * 2**30, 512e6)


def test_scalar_checks():
    assert check_int(3, "k", minimum=1) == 3
    for bad in (0, 2.0, True, "3"):
        with pytest.raises(ConfigError, match=r"k must be an integer >= 1, got"):
            check_int(bad, "k", minimum=1)
    with pytest.raises(ConfigError, match=r"in \[1, 4\]"):
        check_int(5, "heads", 1, 4)
    assert check_real(0.5, "p", 0, 1, open_high=True) == 0.5
    with pytest.raises(ConfigError, match=r"p must be a number in \[0, 1\), got 1"):
        check_real(1, "p", 0, 1, open_high=True)
    with pytest.raises(ConfigError, match="must be a number >= 0"):
        check_real(-1, "rate", 0)
    with pytest.raises(ConfigError, match="number"):
        check_real(float("nan"), "x")
    with pytest.raises(ConfigError, match=r"probability in \[0, 1\)"):
        check_probability(1.0, "dropout")
    with pytest.raises(ConfigError, match="True or False"):
        check_bool(1, "flag")
    with pytest.raises(ConfigError, match="one of 'a', 'b'"):
        check_choice("c", "mode", ("a", "b"))
    assert format_bytes(512 * 2**20) == "512.0 MiB" and format_bytes(10) == "10 B"
