"""``sgl vend build|query|bench`` end to end, and their errors (one ``error:`` line, exit status 2)."""
import json

import numpy as np
import pytest

from sgl.analytics.vend import MemoryAdjacency, VENDStore
from sgl.cli.main import main
from sgl.datasets.powerlaw import chung_lu_edges


@pytest.fixture
def edge_file(tmp_path):
    edges = chung_lu_edges(1500, avg_degree=10, seed=3)
    path = tmp_path / "graph.txt"
    path.write_text("# u v weight\n" + "\n".join(f"{u}\t{v}\t1.0" for u, v in edges.tolist()) + "\n")
    return path, edges


def _build(tmp_path, edge_file, *extra):
    out = tmp_path / "g.db"
    assert main(["vend", "build", "--dataset", f"edges:{edge_file[0]}", "--k", "2", "--out", str(out),
                 "--no-progress", *extra]) == 0
    return out


def test_build_query_bench(tmp_path, edge_file, capsys):
    out = _build(tmp_path, edge_file)
    text = capsys.readouterr().out
    edges = edge_file[1]
    assert f"{len(edges):,} edges" in text and "k=2 words per vertex" in text and "per million edges" in text
    u, v = edges[0]
    assert main(["vend", "query", str(out), str(u), str(v), "0", "1499"]) == 0
    lines = capsys.readouterr().out.splitlines()
    truth = MemoryAdjacency.from_edges(edges, num_nodes=1500).has_edges([0], [1499])[0]
    assert lines[0] == f"{u} {v}: edge (store)"
    assert lines[1].startswith(f"0 1499: {'edge' if truth else 'no edge'}")
    assert lines[2].startswith("queries: 2;")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("\n".join(f"{a} {b}" for a, b in edges[:5].tolist()) + "\n")
    assert main(["vend", "query", str(out), "--pairs", str(pairs)]) == 0
    assert capsys.readouterr().out.count(": edge (store)") == 5
    record = tmp_path / "bench.json"
    assert main(["vend", "bench", str(out), "--queries", "3000", "--repeats", "1", "--out", str(record)]) == 0
    text = capsys.readouterr().out
    assert "certified non-edges:" in text and "throughput: store" in text and "x)" in text
    result = json.loads(record.read_text())
    assert result["mismatches"] == 0 and result["speedup"] > 0 and result["queries"] == 3000


def test_build_from_a_registered_dataset_and_baseline_codes(tmp_path, capsys):
    out = tmp_path / "karate.db"
    assert main(["vend", "build", "--dataset", "karate", "--k", "1", "--codes", "range", "--out", str(out),
                 "--no-progress"]) == 0
    assert "34 vertices, 78 edges" in capsys.readouterr().out
    with VENDStore.open(out) as db:
        assert type(db.codes).__name__ == "RangeFilter" and db.has_edge(0, 1)


def test_facebook_build(tmp_path, data_path, capsys):
    path = data_path("snap_facebook_combined", "facebook_combined.txt")
    out = tmp_path / "fb.db"
    assert main(["vend", "build", "--dataset", f"edges:{path}", "--k", "5", "--out", str(out), "--no-progress"]) == 0
    assert "4,039 vertices, 88,234 edges" in capsys.readouterr().out
    assert main(["vend", "query", str(out), "0", "1", "0", "4038"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "0 1: edge (store)" and lines[1].startswith("0 4038: no edge")


@pytest.mark.parametrize("argv, message", [
    (["query", "{db}", "1", "2", "3"], "even number of ids"),
    (["query", "{db}"], "even number of ids"),
    (["query", "{db}", "0", "99999"], "pairs has vertex id 99999"),
    (["query", "{db}", "0", "1", "--pairs", "{edges}"], "not both"),
    (["query", "{missing}", "0", "1"], "no edge store at"),
    (["query", "{garbage}", "0", "1"], "garbage.db is not a readable SGL edge store"),
    (["bench", "{db}", "--non-edge-share", "1.5"], "--non-edge-share must be a number in [0.0, 1.0]"),
    (["bench", "{db}", "--queries", "0"], "--queries must be an integer >= 1"),
    (["build", "--dataset", "edges:{edges}", "--k", "0", "--out", "{new}"], "--k must be an integer >= 1"),
    (["build", "--dataset", "edges:{edges}", "--out", "{db}"], "already exists; pass overwrite=True (--overwrite)"),
    (["build", "--dataset", "edges:{missing}", "--out", "{new}"], "does not exist"),
    (["build", "--dataset", "no-such-set", "--out", "{new}"], "unknown dataset"),
    (["build", "--dataset", "karate", "--out", "{tmp}"], "is a folder"),
])
def test_errors(tmp_path, edge_file, capsys, argv, message):
    db = _build(tmp_path, edge_file)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(np.random.default_rng(0).bytes(8192))
    capsys.readouterr()
    names = {"db": db, "edges": edge_file[0], "missing": tmp_path / "missing.db", "garbage": garbage,
             "new": tmp_path / "new.db", "tmp": tmp_path}
    assert main(["vend"] + [a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert garbage.read_bytes() == np.random.default_rng(0).bytes(8192)
