"""``sgl data pack``: the windows and report written, metrics printed, bad input as one error line."""
import json
import os

import numpy as np
import pytest

from sgl.cli import main


def _corpus(folder, n=40):
    folder.mkdir()
    rng = np.random.default_rng(0)
    topics = [["cat", "purr", "fur", "paw"], ["ship", "sail", "sea", "port"], ["vote", "law", "court", "state"]]
    with open(folder / "docs.jsonl", "w") as handle:
        for i in range(n):
            words = rng.choice(topics[i % 3], size=int(rng.integers(5, 40)))
            handle.write(json.dumps({"text": " ".join(words)}) + "\n")
    return folder


@pytest.mark.parametrize("method", ["datasculpt", "bfd", "random", "iclm"])
def test_pack_writes_windows_and_report(tmp_path, capsys, method):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    assert main(["data", "pack", "--corpus", str(corpus), "--window", "64", "--method", method, "--clusters", "3",
                 "--dim", "4", "--chunk-size", "7", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "packed 40 documents into" in text and f"wrote {out / 'windows.jsonl'}" in text
    report = json.loads((out / "report.json").read_text())["metrics"]
    windows = [json.loads(line) for line in (out / "windows.jsonl").read_text().splitlines()]
    assert len(windows) == report["windows"] and max(w["tokens"] for w in windows) <= 64
    assert sum(w["tokens"] for w in windows) == report["tokens"]
    placed = sorted({seg[0] for w in windows for seg in w["segments"]})
    assert placed == list(range(40))
    if method == "datasculpt":
        assert report["homogeneity"] == 1.0 and report["docs_truncated"] == 0


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="SGL_SLOW_TESTS=1: packs all of WikiText-2 (~15 s)")
def test_pack_on_wikitext2(data_path, tmp_path, capsys):
    folder = data_path("wikitext2", "train.txt").parent
    out = tmp_path / "wt2"
    assert main(["data", "pack", "--corpus", str(folder), "--window", "4096", "--method", "bfd", "--out", str(out),
                 "--no-progress", "--dim", "8"]) == 0
    report = json.loads((out / "report.json").read_text())["metrics"]
    assert report["documents"] == 3522 and report["fill_rate"] > 0.99


def test_bad_input_is_one_error_line(tmp_path, capsys, a_file):
    corpus = _corpus(tmp_path / "corpus")
    assert main(["data", "pack", "--corpus", str(corpus), "--window", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--window" in capsys.readouterr().err
    assert main(["data", "pack", "--corpus", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "--corpus" in capsys.readouterr().err
    assert main(["data", "pack", "--corpus", str(corpus), "--out", str(a_file)]) == 2
    assert "error: --out" in capsys.readouterr().err
    assert main(["data", "pack", "--corpus", str(corpus), "--window", "8", "--overlong", "error",
                 "--out", str(tmp_path / "o")]) == 2
    assert "longer than the window of 8 tokens" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.jsonl").write_text("\n")
    assert main(["data", "pack", "--corpus", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "no non-empty document" in capsys.readouterr().err
