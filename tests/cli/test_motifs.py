"""``sgl motifs count|embed``: files written, totals printed, options that do not apply are errors."""
import subprocess
import sys

import numpy as np
import pytest
import torch

from sgl.analytics.motifs import MotifCounts
from sgl.cli import main

#: runs `sgl ARGS` in a fresh process and reports the heavy modules it imported
PROBE = ("import runpy, sys\nsys.argv = ['sgl'] + sys.argv[1:]\ntry:\n    runpy.run_module('sgl.cli', run_name='__main__')\n"
         "except SystemExit:\n    pass\nheavy = {m.split('.')[0] for m in sys.modules} & {'torch', 'scipy', 'numpy'}\n"
         "print('HEAVY=' + ','.join(sorted(heavy)), file=sys.stderr)")


def test_count_writes_per_vertex_counts_and_prints_totals(tmp_path, capsys):
    out = tmp_path / "karate.npz"
    assert main(["motifs", "count", "--dataset", "karate", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "triangle: 45" in text and "wedge:    393" in text and f"wrote {out}" in text
    counts = MotifCounts.load(out)
    assert counts.totals == {"edge": 78, "wedge": 393, "triangle": 45} and int(counts["triangle"][0]) == 18
    csv = tmp_path / "karate.csv"
    assert main(["motifs", "count", "--dataset", "karate", "--directed", "--engine", "scipy", "--out", str(csv),
                 "--no-progress"]) == 0
    assert "M4:          45" in capsys.readouterr().out
    header, first = csv.read_text().splitlines()[:2]
    assert header.startswith("vertex,asym_edge,mutual_edge,M1,") and first.split(",")[:3] == ["0", "0", "16"]


def test_count_on_facebook(data_path, tmp_path, capsys):
    folder = data_path("snap_facebook_combined")
    out = tmp_path / "fb.csv"
    assert main(["motifs", "count", "--dataset", "facebook", "--root", str(folder.parent), "--out", str(out),
                 "--no-progress"]) == 0
    assert "triangle: 1,612,010" in capsys.readouterr().out
    assert len(out.read_text().splitlines()) == 4040


@pytest.mark.parametrize("method,extra,width", [("features", [], 6), ("spectral", ["--dim", "4"], 4),
                                                ("walks", ["--dim", "8", "--walks-per-node", "2",
                                                           "--walk-length", "5"], 8),
                                                ("deepwalk", ["--dim", "8", "--walks-per-node", "2"], 8)])
def test_embed_writes_the_embedding(tmp_path, capsys, method, extra, width):
    for suffix in (".npy", ".pt"):
        out = tmp_path / f"emb{suffix}"
        assert main(["motifs", "embed", "--dataset", "karate", "--method", method, *extra, "--out", str(out),
                     "--no-progress"]) == 0
        assert f"34 x {width} ({method})" in capsys.readouterr().out
        emb = np.load(out) if suffix == ".npy" else torch.load(out).numpy()
        assert emb.shape == (34, width) and emb.dtype == np.float32 and np.isfinite(emb).all()


@pytest.mark.parametrize("argv,message", [
    (["embed", "--method", "features", "--dim", "8", "--out", "x.npy"], "does not use `--dim`"),
    (["embed", "--method", "spectral", "--walk-length", "3", "--out", "x.npy"], "does not use `--walk-length`"),
    (["embed", "--method", "deepwalk", "--mix", "0.2", "--out", "x.npy"], "does not use `--mix`"),
    (["embed", "--dim", "0", "--out", "x.npy"], "--dim must be an integer >= 1"),
    (["embed", "--out", "x.csv"], "must end in .npy or .pt"),
    (["count", "--out", "x.json"], "must end in .npz or .csv"),
    (["count", "--dataset", "karat", "--out", "x.npz"], "Did you mean 'karate'"),
])
def test_errors_are_one_line(tmp_path, capsys, argv, message):
    argv = ["motifs", argv[0], *(["--dataset", "karate"] if "--dataset" not in argv else []), *argv[1:]]
    argv = [str(tmp_path / a) if a.startswith("x.") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_collection_of_graphs_is_refused(data_path, tmp_path, capsys):
    root = data_path("tu")
    assert main(["motifs", "count", "--dataset", "mutag", "--root", str(root), "--out", str(tmp_path / "m.npz"),
                 "--no-progress"]) == 2
    assert "collection of graphs" in capsys.readouterr().err


def test_motifs_help_imports_no_heavy_library():
    out = subprocess.run([sys.executable, "-c", PROBE, "motifs", "embed", "--help"], capture_output=True,
                         text=True, timeout=120)
    line = [l for l in out.stderr.splitlines() if l.startswith("HEAVY=")]
    assert line == ["HEAVY="], out.stderr
    assert "usage: sgl motifs embed" in out.stdout
