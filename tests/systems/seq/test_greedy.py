"""The compiled greedy loops equal the Python loops they replaced; the MILP-patience policy."""
import numpy as np
import pytest

from sgl.systems.seq import flexsp_cost_model
from sgl.systems.seq._greedy import bin_assign, earliest_finish
from sgl.systems.seq.flexsp import FlexSPPlanner
from sgl.systems.seq.packing import assign


def _earliest_ref(order, lengths, load0, a, b, caps):
    tokens = np.zeros(len(load0), dtype=np.int64)
    load = np.array(load0, dtype=np.float64)
    owner = np.full(lengths.size, -1, dtype=np.int64)
    for i in order:
        s = float(lengths[i])
        finish = load + a * s * s + b * s
        finish[tokens + s > caps] = np.inf
        j = int(np.argmin(finish))
        if not np.isfinite(finish[j]):
            return owner, False
        owner[i] = j
        tokens[j] += int(s)
        load[j] = finish[j]
    return owner, True


def _bins_ref(order, lengths, weights, groups, capacity, method):
    tokens = np.zeros(groups, dtype=np.int64)
    load = np.zeros(groups)
    owner = np.full(lengths.size, -1, dtype=np.int64)
    for i in order:
        s = int(lengths[i])
        room = capacity - tokens
        fits = room >= s
        if method == "ffd":
            g = int(np.argmax(fits))
        elif method == "bfd":
            g = int(np.argmin(np.where(fits, room, np.iinfo(np.int64).max)))
        else:
            g = int(np.argmin(np.where(fits, load, np.inf)))
        if not fits[g]:
            return owner, False
        tokens[g] += s
        load[g] += weights[i]
        owner[i] = g
    return owner, True


@pytest.mark.parametrize("seed", range(6))
def test_earliest_finish_equals_python_loop(seed):
    rng = np.random.default_rng(seed)
    n, g = int(rng.integers(1, 300)), int(rng.integers(1, 12))
    lengths = rng.integers(1, 5000, n).astype(np.int64)
    lengths[: n // 5] = 1000                      # ties
    order = np.argsort(-lengths, kind="stable")
    a, b = rng.random(g) * 1e-6, rng.random(g)
    load0 = np.round(rng.random(g) * 3, 1)
    caps = rng.integers(2000, 20000 if seed % 2 else 200000, g).astype(np.float64)
    got, ok = earliest_finish(order, lengths, load0, a, b, caps)
    want, ok_ref = _earliest_ref(order, lengths, load0, a, b, caps)
    assert ok == ok_ref
    if ok:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("method", ["ffd", "bfd", "lpt"])
@pytest.mark.parametrize("seed", range(4))
def test_bin_assign_equals_python_loop(method, seed):
    rng = np.random.default_rng(seed)
    n, g = int(rng.integers(1, 400)), int(rng.integers(1, 16))
    lengths = rng.integers(1, 3000, n).astype(np.int64)
    weights = lengths.astype(np.float64) ** 1.5
    order = np.lexsort((np.arange(n), -lengths))
    capacity = int(lengths.sum() / g * (1.3 if seed % 2 else 0.9)) + 3000
    got, ok = bin_assign(order, lengths, weights, g, capacity, method)
    want, ok_ref = _bins_ref(order, lengths, weights, g, capacity, method)
    assert ok == ok_ref
    if ok:
        np.testing.assert_array_equal(got, want)
        bins = assign(lengths, g, capacity, method)
        if method == "lpt":                       # assign orders by weight (= length without time_of)
            want, _ = _bins_ref(order, lengths, lengths.astype(np.float64), g, capacity, method)
        assert sorted(np.concatenate(bins).tolist()) == list(range(n))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        for j, members in enumerate(bins):            # each bin in assignment order, never over capacity
            assert np.all(want[members] == j) and lengths[members].sum() <= capacity
            assert np.all(np.diff(rank[members]) > 0)


def test_milp_patience_skips_after_k_misses_and_keeps_the_plan():
    pool = flexsp_cost_model(devices=16, memory_gb=80).sp_pool()
    rng = np.random.default_rng(0)
    batches = [np.concatenate([rng.integers(500, 4000, 300), [60000, 30000]]) for _ in range(6)]
    plain = FlexSPPlanner(pool, 16, time_limit=0.05)
    patient = FlexSPPlanner(pool, 16, time_limit=0.05, milp_patience=2, milp_retry=3)
    statuses = []
    for b in batches:
        want, got = plain.plan(b), patient.plan(b)
        got.validate(b, 16)
        statuses.append(got.status)
        if "MILP skipped" in got.status:
            assert got.time >= want.time - 1e-9      # skipping can only lose what the MILP would win
    plain_status = [plain.plan(b).status for b in batches]
    if all(s.startswith("heuristic") for s in plain_status):
        assert any("MILP skipped" in s for s in statuses)
    with pytest.raises(Exception, match="milp_patience"):
        FlexSPPlanner(pool, 16, milp_patience=-1)


def test_mesh_fallback_never_loses_to_its_fallback_on_the_first_step_and_pays_mode_switches():
    from sgl.systems.seq import DynamicMeshPlanner
    from sgl.systems.seq.compare import best_static, static_pool
    model = flexsp_cost_model(devices=16, memory_gb=80)
    rng = np.random.default_rng(1)
    batches = [np.concatenate([rng.integers(200, 3000, 400), [150000]]) for _ in range(3)]
    static, static_ms = best_static(static_pool(model), batches, 16, 196608)
    pure = DynamicMeshPlanner(model, 16, max_length=196608, groups="ring", time_limit=0.05)
    mixed = DynamicMeshPlanner(model, 16, max_length=196608, groups="ring", time_limit=0.05, fallback=static)
    first = mixed.plan(batches[0])
    first.validate(batches[0], 16)
    assert first.time <= min(static_ms[0], pure.plan(batches[0]).time) + 1e-9
    modes = [first.status.startswith("fallback")]
    for b in batches[1:]:
        p = mixed.plan(b)
        p.validate(b, 16)
        modes.append(p.status.startswith("fallback"))
        if modes[-1] != modes[-2]:                      # a mode change is charged
            assert p.switch_ms >= mixed.mode_switch_ms() - 1e-9
    with pytest.raises(Exception, match="fallback"):
        DynamicMeshPlanner(model, 4, max_length=1000, fallback=static_pool(model)[-1])
