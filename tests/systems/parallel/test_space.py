import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import ClusterSpec, Strategy, enumerate_strategies, get_model_config


def test_galvatron_counts_for_8_devices():
    cluster = ClusterSpec(1, 8)
    counts = {pp: len(enumerate_strategies(cluster, pp, ckpt=False)) for pp in (1, 2, 4, 8)}
    assert counts == {1: 11, 2: 7, 4: 3, 8: 1}
    assert sum(len(enumerate_strategies(cluster, pp)) for pp in (1, 2, 4, 8)) == 44


def test_strategy_invariants():
    cluster = ClusterSpec(2, 8)
    for pp in (1, 2, 4, 8, 16):
        for s in enumerate_strategies(cluster, pp, sp_modes=(False, True)):
            assert s.pp * s.tp * s.dp == 16
            assert not (s.sdp and s.dp == 1)
            assert s.tp_consec or (s.tp > 1 and s.dp > 1)
            assert not (s.sp and s.tp == 1)


@pytest.mark.parametrize("space,check", [
    ("dp", lambda s: s.tp == 1 and s.pp == 1 and not s.sdp),
    ("sdp", lambda s: s.tp == 1 and s.pp == 1 and s.sdp),
    ("tp", lambda s: s.tp == 8 and s.pp == 1),
    ("3d", lambda s: not s.sdp and s.tp_consec),
    ("dp+tp", lambda s: s.pp == 1 and not s.sdp),
])
def test_sub_spaces(space, check):
    found = enumerate_strategies(ClusterSpec(1, 8), 1, space=space)
    assert found and all(check(s) for s in found)
    full = set(enumerate_strategies(ClusterSpec(1, 8), 1))
    assert set(found) <= full


def test_osdp_splits_only_on_sharded():
    out = enumerate_strategies(ClusterSpec(1, 4), 1, space="full", ckpt=False, max_tp=1, osdp_splits=(2, 4))
    assert {s.split for s in out if s.sdp} == {1, 2, 4}
    assert {s.split for s in out if not s.sdp} == {1}


@pytest.mark.parametrize("nodes,per_node", [(1, 6), (3, 8), (0, 8)])
def test_bad_cluster(nodes, per_node):
    with pytest.raises(PlanError, match="power of two"):
        ClusterSpec(nodes, per_node)


def test_devices_not_divisible_into_nodes():
    with pytest.raises(PlanError, match="not divisible"):
        ClusterSpec.from_devices(4, 8)
    with pytest.raises(PlanError, match="power of two"):
        ClusterSpec.from_devices(12)


def test_bad_space_and_pp():
    with pytest.raises(PlanError, match="unknown search space"):
        enumerate_strategies(ClusterSpec(1, 8), 1, space="zero")
    with pytest.raises(PlanError, match="pipeline degree"):
        enumerate_strategies(ClusterSpec(1, 8), 3)


def test_model_divisibility_errors():
    cfg = get_model_config("gpt-1.3b")   # vocab 50257 (Hsword/Hetu#74)
    with pytest.raises(PlanError, match="vocab_size=50257 is not divisible"):
        cfg.check_tp(4)
    llama13 = get_model_config("llama-13b")  # 40 heads
    with pytest.raises(PlanError, match="num_heads=40 is not divisible by tensor-parallel degree 16"):
        llama13.check_tp(16, vocab_tp=1)
    get_model_config("llama-7b").check_tp(8)


def test_label():
    assert Strategy(2, 2, 2, sdp=True, tp_consec=False, ckpt=True).label == "2-2-2f*c"
