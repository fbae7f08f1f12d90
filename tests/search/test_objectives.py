import pytest
import torch

from sgl.errors import ConfigError
from sgl.search import MemoryMeter, hypervolume_2d, pareto_front, parse_objectives


def test_parse_objectives():
    assert [o.name for o in parse_objectives("accuracy, latency,memory")] == ["accuracy", "latency", "memory"]
    assert parse_objectives(["epoch_time", "accuracy"])[1].direction == "maximize"
    with pytest.raises(ConfigError, match="unknown objective"):
        parse_objectives("accuracy,speed")
    with pytest.raises(ConfigError, match="at least two"):
        parse_objectives("accuracy")
    with pytest.raises(ConfigError, match="twice"):
        parse_objectives("accuracy,accuracy")


def test_pareto_front_by_hand():
    points = [(0.80, 3.0), (0.82, 5.0), (0.70, 1.0), (0.75, 4.0), (0.82, 5.0), (0.60, 1.0)]
    # (0.75, 4) is dominated by (0.80, 3); (0.60, 1) by (0.70, 1); equal points are both kept
    assert pareto_front(points, ["maximize", "minimize"]) == [0, 1, 2, 4]
    assert pareto_front([(1, 1), (2, 2)], ["minimize", "minimize"]) == [0]
    with pytest.raises(ConfigError):
        pareto_front([(1, 1)], ["up", "down"])


def test_hypervolume_by_hand():
    directions = ["maximize", "minimize"]
    ref = (0.5, 10.0)
    # one point: (0.9 - 0.5) * (10 - 2) = 3.2
    assert hypervolume_2d([(0.9, 2.0)], directions, ref) == pytest.approx(3.2)
    # two points: 0.3*(10-1) + (0.9-0.8)*(10-2) = 2.7 + 0.8 = 3.5; a dominated point changes nothing
    assert hypervolume_2d([(0.9, 2.0), (0.8, 1.0), (0.7, 5.0)], directions, ref) == pytest.approx(3.5)
    # points outside the reference box count for nothing
    assert hypervolume_2d([(0.4, 2.0), (0.9, 11.0)], directions, ref) == 0.0
    with pytest.raises(ConfigError):
        hypervolume_2d([(1, 2, 3)], ["minimize"] * 3, (0, 0, 0))


def test_memory_meter_sees_a_large_allocation():
    with MemoryMeter("cpu") as big:
        block = torch.ones(64 * 2**20 // 4)  # 64 MB, touched
        block.add_(1)
        del block
    with MemoryMeter("cpu") as small:
        torch.ones(16).sum()
    assert big.peak_mb >= 48
    assert small.peak_mb < 16
