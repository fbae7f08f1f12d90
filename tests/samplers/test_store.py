"""Disk-backed stores: round trip, I/O counting, bad stores, atomic finalize, preprocess CLI."""
import json

import numpy as np
import pytest
import torch

import sgl
from sgl.cli import main
from sgl.errors import StoreError
from sgl.samplers import NeighborSampler, StoreWriter, open_store, write_store
from sgl.samplers.store import ResidentRows


@pytest.fixture
def karate_store(tmp_path):
    graph = sgl.datasets.load("karate")
    return graph, write_store(graph, tmp_path / "karate")


def test_round_trip_and_counted_reads(karate_store):
    graph, path = karate_store
    store = open_store(path)
    assert np.array_equal(store.indptr, graph.indptr.numpy())
    assert torch.equal(store.y, graph.y) and torch.equal(store.train_mask, graph.train_mask)
    feats = store.features()
    ids = torch.tensor([5, 3, 4, 20, 3])
    assert torch.equal(feats.read(ids), graph.x[ids].float())
    # distinct rows 3, 4, 5, 20: 4 rows in 2 contiguous runs
    assert store.counter.stats("features") == {"bytes": 4 * 34 * 4, "requests": 2}


def test_sampling_from_disk_equals_in_memory_and_counts_adjacency(karate_store):
    graph, path = karate_store
    store = open_store(path)
    seeds = torch.tensor([0, 7, 33])
    disk = NeighborSampler(store.adjacency(), [4, 3]).sample(seeds, seed=1)
    mem = NeighborSampler(graph, [4, 3]).sample(seeds, seed=1)
    assert torch.equal(disk.n_id, mem.n_id)
    assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(disk.blocks, mem.blocks))
    frontier_rows = torch.unique(torch.cat([seeds, disk.n_id[:disk.blocks[0].num_dst]]))
    assert store.counter.stats("adjacency")["bytes"] > 0
    assert store.counter.stats("adjacency")["bytes"] <= int(graph.degree()[frontier_rows].sum()) * store.index_bytes * 2


def test_resident_rows_serve_without_disk_reads(karate_store):
    graph, path = karate_store
    store = open_store(path)
    adj = store.adjacency()
    adj.resident.append(ResidentRows.load(adj, np.arange(34), kind="cache_fill"))
    NeighborSampler(adj, [4, 3]).sample(torch.tensor([0, 1]), seed=0)
    assert store.counter.stats("adjacency")["bytes"] == 0
    assert store.counter.stats("cache_fill")["bytes"] == graph.num_edges * store.index_bytes


def test_resident_rows_with_a_shared_slot_map_release_cleanly(karate_store):
    graph, path = karate_store
    store = open_store(path)
    adj = store.adjacency()
    slot = np.full(34, -1, dtype=np.int64)
    first = ResidentRows.load(adj, np.array([3, 1, 2]), kind="group", slot=slot)
    # rows 1, 2, 3 are back to back in the CSR: one request; the shared map is not this set's bytes
    assert store.counter.stats("group") == {"bytes": int(graph.degree()[1:4].sum()) * store.index_bytes,
                                            "requests": 1}
    assert first.nbytes == first.values.nbytes + first.ptr.nbytes + first.nodes.nbytes
    assert np.array_equal(np.flatnonzero(slot >= 0), [1, 2, 3])
    first.release()
    assert (slot == -1).all() and first.nodes.size == 0
    second = ResidentRows.load(adj, np.array([0, 33]), kind="group", slot=slot)
    adj.resident.append(second)
    ptr = graph.indptr.numpy()
    positions = np.concatenate([np.arange(ptr[0], ptr[1]), np.arange(ptr[33], ptr[34])])
    got = adj.gather(np.array([0, 33]), positions)
    assert np.array_equal(got, graph.indices.numpy()[positions])
    assert store.counter.stats("adjacency")["bytes"] == 0
    assert store.counter.stats("group")["requests"] == 1 + 2  # rows 0 and 33 are two runs


def test_float16_store(tmp_path):
    graph = sgl.datasets.load("karate")
    store = open_store(write_store(graph, tmp_path / "s", feature_dtype="float16"))
    assert store.feature_row_bytes == 34 * 2
    assert torch.allclose(store.features().read(torch.arange(3)), graph.x[:3].float(), atol=1e-3)


def _edit_manifest(path, fn):
    manifest = path / "manifest.json"
    meta = json.loads(manifest.read_text())
    fn(meta)
    manifest.write_text(json.dumps(meta))


def test_truncated_file_is_rejected(karate_store):
    _, path = karate_store
    data = (path / "features.npy").read_bytes()
    (path / "features.npy").write_bytes(data[:-100])
    with pytest.raises(StoreError, match="truncated"):
        open_store(path)


def test_checksum_mismatch_is_rejected_and_size_mode_skips_it(karate_store):
    _, path = karate_store
    raw = bytearray((path / "features.npy").read_bytes())
    raw[-1] ^= 0xFF
    (path / "features.npy").write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="checksum"):
        open_store(path)
    open_store(path, verify="size")  # same size, same header: only the checksum can tell


def test_manifest_mismatch_and_wrong_dtype_are_rejected(karate_store, tmp_path):
    _, path = karate_store
    _edit_manifest(path, lambda m: m["arrays"]["indices"].__setitem__("shape", [999]))
    with pytest.raises(StoreError, match="shape"):
        open_store(path)
    graph = sgl.datasets.load("karate")
    other = write_store(graph, tmp_path / "other")
    # replace the features by a float64 file: the manifest's dtype no longer matches
    np.save(other / "features.npy", graph.x.double().numpy())
    _edit_manifest(other, lambda m: m["arrays"]["features"].__setitem__("bytes", (other / "features.npy").stat().st_size))
    with pytest.raises(StoreError, match="dtype"):
        open_store(other, verify="size")
    _edit_manifest(other, lambda m: m.__setitem__("feature_dtype", "int8"))
    with pytest.raises(StoreError, match="feature dtype"):
        open_store(other, verify="size")


@pytest.mark.parametrize("damage", ["no_manifest", "bad_json", "foreign", "missing_file", "no_folder"])
def test_missing_or_foreign_stores_are_rejected(karate_store, damage):
    _, path = karate_store
    if damage == "no_manifest":
        (path / "manifest.json").unlink()
    elif damage == "bad_json":
        (path / "manifest.json").write_text("{not json")
    elif damage == "foreign":
        _edit_manifest(path, lambda m: m.__setitem__("format", "something-else"))
    elif damage == "missing_file":
        (path / "indices.npy").unlink()
    else:
        path = path / "nope"
    with pytest.raises(StoreError):
        open_store(path)


def test_failed_write_leaves_nothing_that_looks_valid(tmp_path):
    target = tmp_path / "store"
    with pytest.raises(RuntimeError):
        with StoreWriter(target, num_nodes=10, num_edges=0, num_features=4) as writer:
            writer.features[:5] = 1.0
            raise RuntimeError("crash mid-write")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # the temporary folder is gone too
    # an unfinished writer (no finalize) is discarded on exit as well
    with StoreWriter(target, num_nodes=10, num_edges=0, num_features=4):
        pass
    assert not target.exists()


def test_overwrite_replaces_only_when_complete(karate_store):
    graph, path = karate_store
    with pytest.raises(StoreError, match="exists"):
        write_store(graph, path)
    with pytest.raises(RuntimeError):
        with StoreWriter(path, num_nodes=3, num_edges=0, num_features=1, overwrite=True):
            raise RuntimeError("crash")
    assert open_store(path).num_nodes == 34  # the old store is intact
    write_store(graph, path, feature_dtype="float16", overwrite=True)
    assert open_store(path).feature_dtype == "float16"


def test_preprocess_cli(tmp_path, capsys):
    out = tmp_path / "k"
    assert main(["preprocess", "--dataset", "karate", "--out", str(out), "--no-progress"]) == 0
    assert "checksums verified" in capsys.readouterr().out
    assert open_store(out).num_nodes == 34
    assert main(["preprocess", "--dataset", "karate", "--out", str(out), "--no-progress"]) == 2
    assert main(["preprocess", "--dataset", "mutag", "--out", str(tmp_path / "m"), "--no-progress"]) == 2
