"""``sgl secagg bench``: KVSAgg counting over client processes equals plain counting."""
import json

from sgl.cli.main import main


def test_secagg_bench_counts_bigrams_exactly_over_two_clients(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat\nthe dog sat on the cat\n" * 20)
    out = tmp_path / "r.json"
    assert main(["secagg", "bench", "--text", str(text), "--clients", "2", "--ngram", "2", "--top", "3",
                 "--out", str(out), "--timeout", "60"]) == 0
    printed = capsys.readouterr().out
    assert "exact=True" in printed and "'sat on' 40" in printed
    record = json.loads(out.read_text())
    assert record["exact"] and record["top_exact"] and record["decoded"]
    assert record["top_counts"] == [40, 40, 40]  # "the cat", "sat on", "on the" (x2 per 2 lines) x 20
    assert record["bytes_per_client"] > 0 and len(record["client_distinct_keys"]) == 2


def test_secagg_bench_bad_input(tmp_path, capsys):
    assert main(["secagg", "bench"]) == 2
    assert "give --text PATH or --root" in capsys.readouterr().err
    assert main(["secagg", "bench", "--text", str(tmp_path / "missing.txt")]) == 2
    assert "no text file" in capsys.readouterr().err
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b\n")
    assert main(["secagg", "bench", "--text", str(tiny), "--clients", "8"]) == 2
    assert "need at least" in capsys.readouterr().err
