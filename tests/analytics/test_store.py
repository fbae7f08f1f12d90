"""The SQLite edge store and VENDStore: queries, atomic updates, a killed writer, other writers, corrupt files."""
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from sgl.analytics.vend import EdgeStore, MemoryAdjacency, PairType, VENDCodes, VENDStore
from sgl.analytics.vend.evaluate import benchmark_store, sample_non_edges, sample_two_hop_non_edges
from sgl.datasets.powerlaw import chung_lu_edges
from sgl.errors import GraphError, StoreError

N = 3000


@pytest.fixture
def graph():
    edges = chung_lu_edges(N, avg_degree=14, seed=5)
    return edges, MemoryAdjacency.from_edges(edges, num_nodes=N)


@pytest.fixture
def db(tmp_path, graph):
    store = VENDStore.build(tmp_path / "g.db", graph[0], k=3, num_nodes=N)
    yield store
    store.close()


def _stored_edges(path):
    con = sqlite3.connect(path)
    try:
        return np.asarray(con.execute("SELECT u, v FROM edges").fetchall(), dtype=np.int64).reshape(-1, 2)
    finally:
        con.close()


def test_queries_match_the_graph(db, graph):
    edges, adj = graph
    rng = np.random.default_rng(0)
    pairs = np.concatenate([rng.integers(0, N, size=(5000, 2)), edges[:2000], edges[:50, ::-1]])
    truth = adj.has_edges(pairs[:, 0], pairs[:, 1])
    assert (db.store.has_edges(pairs[:, 0], pairs[:, 1]) == truth).all()
    assert (db.has_edges(pairs[:, 0], pairs[:, 1]) == truth).all()
    assert db.stats.store_queries < 0.5 * db.stats.queries and db.stats.certified > 0
    assert db.num_edges == adj.num_edges == len(edges)
    for u in (0, 17, int(np.bincount(edges.ravel()).argmax())):
        assert db.edges(u).tolist() == adj.neighbors(u).tolist()
    ptr, idx = db.store.neighbors_csr([5, 3, 5])
    ref_ptr, ref_idx = adj.neighbors_csr([5, 3, 5])
    assert ptr.tolist() == ref_ptr.tolist() and idx.tolist() == ref_idx.tolist()
    assert db.has_edge(*edges[0]) and db.store.has_edge(*edges[0])


def test_answer_neighbors_from_memory(tmp_path, graph):
    edges, _ = graph
    with VENDStore.build(tmp_path / "a.db", edges, k=3, num_nodes=N, answer_neighbors=True) as fast:
        answers = fast.has_edges(edges[:1000, 0], edges[:1000, 1])
        assert answers.all() and fast.stats.store_queries < 1000


def test_updates_are_transactions_and_persist(db, graph, tmp_path):
    edges, adj = graph
    rng = np.random.default_rng(1)
    for step in range(2):
        insert = rng.integers(0, N, size=(500, 2))
        insert = insert[insert[:, 0] != insert[:, 1]]
        delete = np.unique(np.sort(edges[rng.choice(len(edges), 500, replace=False)], axis=1), axis=0)
        delete = delete[adj.has_edges(delete[:, 0], delete[:, 1])]
        adj.apply(insert=insert, delete=delete)
        result = db.update(insert=insert, delete=delete)
        assert result.version == step + 1 and result.deleted == len(delete) and result.reencoded > 0
    assert db.num_edges == adj.num_edges
    u, v = np.divmod(adj._keys, N)
    assert not (db.codes.test_batch(u, v) == int(PairType.NonNeighbor)).any()
    path = db.path
    db.close()
    with VENDStore.open(path) as again:           # the persisted codes are the maintained ones
        assert again.store.version == 2
        assert (again.codes.words == db.codes.words).all()
        stored = _stored_edges(path)
        assert (np.sort(stored[:, 0] * N + stored[:, 1]) == adj._keys).all()


def test_bad_update_changes_nothing(db, graph):
    edges, _ = graph
    before = (db.store.version, db.num_edges, db.codes.words.copy())
    absent = sample_non_edges(db.store.has_edges, N, 1, seed=3)
    with pytest.raises(GraphError, match=rf"cannot delete edge \({absent[0, 0]}, {absent[0, 1]}\)"):
        db.update(insert=[[1, 2]], delete=np.concatenate([edges[:3], absent]))
    with pytest.raises(GraphError, match=f"vertex id {N}"):
        db.update(insert=[[0, N]])
    with pytest.raises(GraphError, match=r"shape \(E, 2\)"):
        db.update(insert=[0, 1, 2])
    assert (db.store.version, db.num_edges) == before[:2] and (db.codes.words == before[2]).all()
    assert db.has_edge(*edges[0])
    with pytest.raises(GraphError, match=f"vertex id {N + 5}"):
        db.has_edges([0], [N + 5])
    with pytest.raises(StoreError, match="inside"):
        db.store.apply_edges(insert=[[0, 1]])


def test_self_loops_and_duplicates(tmp_path):
    edges = np.array([[0, 0], [0, 1], [1, 0], [0, 1], [2, 3]])
    with VENDStore.build(tmp_path / "s.db", edges, k=1, num_nodes=5) as db:
        assert db.num_edges == 3 and db.has_edge(0, 0) and not db.has_edge(1, 1)
        assert db.update(insert=[[0, 1], [4, 4]]).inserted == 1 and db.num_edges == 4
        assert db.update(delete=[[0, 0], [0, 0]]).deleted == 1 and not db.has_edge(0, 0)


def test_another_writer_is_seen(db, tmp_path):
    pair = sample_non_edges(db.store.has_edges, N, 1, seed=9)[0]
    with VENDStore.open(db.path) as other:
        codes_pair = sample_non_edges(other.store.has_edges, N, 200, seed=4)
        certified = codes_pair[other.codes.test_batch(codes_pair[:, 0], codes_pair[:, 1]) == 2][0]
        db.update(insert=[certified])
        assert other.has_edge(*certified)       # the reader reloaded the codes before answering
        other.update(insert=[pair])             # ... and a writer that was behind catches up too
    assert db.has_edge(*pair) and db.has_edge(*certified)


_WRITER = """
import sys, numpy as np
from sgl.analytics.vend import VENDStore, MemoryAdjacency
path, n = sys.argv[1], int(sys.argv[2])
db = VENDStore.open(path)
adj = MemoryAdjacency.from_csr(*db.store.neighbors_csr(np.arange(n)))
rng = np.random.default_rng(0)
while True:
    insert = rng.integers(0, n, size=(400, 2))
    insert = insert[insert[:, 0] != insert[:, 1]]
    keys = adj._keys[rng.choice(adj._keys.size, 400, replace=False)]
    delete = np.unique(np.sort(np.stack(np.divmod(keys, n), axis=1), axis=1), axis=0)
    adj.apply(insert=insert, delete=delete)
    db.update(insert=insert, delete=delete)
    print(db.store.version, flush=True)
"""


def test_a_killed_writer_leaves_store_and_codes_consistent(db, tmp_path):
    path = str(db.path)
    db.close()
    child = subprocess.Popen([sys.executable, "-c", _WRITER, path, str(N)], stdout=subprocess.PIPE, text=True)
    try:
        committed = [int(child.stdout.readline()) for _ in range(2)]   # two batches are in
        time.sleep(0.05 + 0.3 * np.random.default_rng().random())     # then die at some instant of a batch
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with VENDStore.open(path) as again:            # quick_check runs on open
        assert again.store.version >= committed[-1]
        stored = _stored_edges(path)
        u, v = stored[:, 0], stored[:, 1]
        assert again.num_edges == int((u <= v).sum()) and (u < v).sum() == (u > v).sum()
        assert not (again.codes.test_batch(u, v) == int(PairType.NonNeighbor)).any()


def _build_bytes(tmp_path, name="x.db"):
    path = tmp_path / name
    VENDStore.build(path, chung_lu_edges(2000, seed=1), k=2, num_nodes=2000).close()
    return path


@pytest.mark.parametrize("damage", ["garbage", "truncated", "page", "foreign", "codes", "format"])
def test_a_corrupt_store_is_named_and_left_untouched(tmp_path, damage):
    path = _build_bytes(tmp_path)
    data = path.read_bytes()
    if damage == "garbage":
        data = np.random.default_rng(0).bytes(len(data))
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "page":
        page = 4096 * 5
        data = data[:page] + np.random.default_rng(1).bytes(4096) + data[page + 4096:]
    if damage in ("foreign", "codes", "format"):
        con = sqlite3.connect(path)
        if damage == "foreign":
            con.executescript("DROP TABLE codes; CREATE TABLE t(x);")
        elif damage == "codes":
            con.execute("UPDATE codes SET words = x'00' WHERE chunk = 0")
        else:
            con.execute("UPDATE meta SET value = 'something-else' WHERE key = 'format'")
        con.commit()
        con.close()
        data = path.read_bytes()
    else:
        path.write_bytes(data)
    with pytest.raises(StoreError, match=str(path)):
        VENDStore.open(path)
    assert path.read_bytes() == data
    with pytest.raises(StoreError, match="already exists"):
        VENDStore.build(path, np.array([[0, 1]]), k=1)
    assert path.read_bytes() == data


def test_missing_store_and_overwrite(tmp_path):
    with pytest.raises(StoreError, match="no edge store at"):
        VENDStore.open(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()
    path = _build_bytes(tmp_path)
    (tmp_path / "x.db-wal").write_bytes(b"stale log of an older store")
    with VENDStore.build(path, np.array([[0, 1], [1, 2]]), k=1, overwrite=True) as db:
        assert db.num_edges == 2 and db.num_nodes == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []   # no temporary left


def test_evaluation_helpers(db, graph):
    edges, adj = graph
    two_hop = sample_two_hop_non_edges(adj, 500, seed=0)
    assert not adj.has_edges(two_hop[:, 0], two_hop[:, 1]).any() and (two_hop[:, 0] != two_hop[:, 1]).all()
    ptr, idx = adj.neighbors_csr(np.arange(N))
    for a, c in two_hop[:20]:
        assert np.intersect1d(idx[ptr[a]:ptr[a + 1]], idx[ptr[c]:ptr[c + 1]]).size > 0
    path = db.path
    db.close()
    result = benchmark_store(path, queries=4000, repeats=1, seed=1)
    assert result.mismatches == 0 and result.queries == 4000
    assert 0.05 < result.store_share < 0.5 and result.certified_fraction > 0.5
    assert result.store_qps > 0 and result.vend_qps > 0


def test_edge_store_on_its_own(tmp_path):
    edges = chung_lu_edges(500, seed=2)
    codes = VENDCodes.from_edges(edges, k=1, num_nodes=500)
    from sgl.analytics.vend.adjacency import undirected_csr

    store = EdgeStore.create(tmp_path / "e.db", *undirected_csr(edges, 500), codes.words, kind="VENDCodes")
    with store:
        assert (store.read_codes() == codes.words).all() and store.version == 0
        new = sample_non_edges(store.has_edges, 500, 1, seed=0)
        with store.transaction():
            assert store.apply_edges(insert=new, delete=edges[:1]) == (1, 1)
        assert store.version == 1 and store.has_edge(*new[0]) and not store.has_edge(*edges[0])
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.apply_edges(insert=[[2, 3]])
                raise RuntimeError("abort")
        assert store.version == 1
