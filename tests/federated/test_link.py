"""The wide-area link model, the traffic meter and the in-process channel."""
import threading

import pytest
import torch

from sgl.errors import CommError, ConfigError
from sgl.federated import LocalChannel, TrafficMeter, WANLink


def test_link_prices_bandwidth_and_latency():
    link = WANLink(bandwidth_mbps=100, latency_ms=10)
    assert link.seconds(0) == pytest.approx(0.01)
    assert link.seconds(12_500_000) == pytest.approx(1.01)
    with pytest.raises(ConfigError, match="bandwidth_mbps"):
        WANLink(bandwidth_mbps=0)


def test_meter_takes_the_slowest_peer_per_round():
    meter = TrafficMeter(WANLink(8, 0))  # 1 byte per microsecond
    meter.log(1, 1000, "sent")
    meter.log(2, 3000, "received")
    meter.end_round()
    meter.end_round()  # an empty round is not a round
    assert meter.rounds == 1 and meter.link_seconds == pytest.approx(0.003)
    assert meter.bytes_sent == 1000 and meter.bytes_received == 3000


def test_local_channel_counts_bytes_and_times_out():
    a, b = LocalChannel.pair(timeout=0.2)
    t = threading.Thread(target=a.send, args=(torch.ones(3, 4, dtype=torch.float64), 1, "act"))
    t.start()
    assert b.recv(0, "act").dtype == torch.float64
    t.join()
    assert a.meter.bytes_sent == b.meter.bytes_received == 96
    with pytest.raises(CommError, match="timed out"):
        b.recv(0, "grad")
    with pytest.raises(ConfigError, match="unknown message kind"):
        a.send(torch.ones(1), 1, "secret")
