"""`sgl train --task ctr --compress`: HET pushes through a codec; the flag is refused where it does not apply."""
import json

import pytest

from sgl.cli import main

BASE = ["train", "--task", "ctr", "--seeds", "1", "--epochs", "1", "--no-progress",
        "--dataset-option", "num_rows=400", "--dataset-option", "ids_per_field=50"]


def test_compress_sketchml_trains_het_with_fewer_push_bytes(tmp_path, capsys):
    traffic = {}
    for codec in ("none", "sketchml"):
        out = tmp_path / f"{codec}.json"
        assert main(BASE + ["--ctr-embedding", "het", "--compress", codec, "--out", str(out)]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("embedding traffic:"))
        traffic[codec] = int(line.split()[2].replace(",", ""))
        assert f'"compress": "{codec}"' in out.read_text()           # the record replays the codec
    assert 0 < traffic["sketchml"] < 0.8 * traffic["none"]          # pulls are not compressed


@pytest.mark.parametrize("argv, text", [
    (["--ctr-embedding", "hash", "--compress", "sketchml"], "--ctr-embedding het or hetgmp"),
    (["--ctr-embedding", "het", "--ctr-embedding-option", "compress=gzip"], "compress must be one of"),
])
def test_compress_where_it_does_not_apply_is_an_error(argv, text, capsys):
    assert main(BASE + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and text in err


def test_compress_on_another_task_is_an_error(capsys):
    assert main(["train", "--seeds", "1", "--no-progress", "--compress", "sketchml"]) == 2
    assert "compress" in capsys.readouterr().err
