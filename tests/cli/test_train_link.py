"""`sgl train --task link` with a zoo model: encoder + decoder, its flags, its record, its errors."""
import json

import pytest

from sgl.cli import main

BASE = ["train", "--task", "link", "--dataset", "karate", "--seeds", "2", "--no-progress"]


def test_gcn_trains_and_prints_every_metric(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(BASE + ["--model", "gcn", "--epochs", "3", "--hidden", "8", "--link-hits-k", "5,10",
                        "--link-neg-ratio", "2", "--link-embed-dim", "16", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert any(line.split()[:3] == ["link", "metric", "validation"] for line in lines), text
    for name in ("auc", "ap", "hits@5", "hits@10", "mrr"):
        assert any(line.split()[0] == name and line.count("±") == 2 for line in lines if line.strip()), name
    assert "(2 seeds; random 85%/5%/10% edge split, epoch chosen on validation auc" in text
    record = json.loads(out.read_text())
    assert record["config"]["task_options"] == {"val_ratio": None, "test_ratio": None, "neg_ratio": 2.0,
                                                "decoder": "dot", "decoder_layers": None, "hits_k": [5, 10],
                                                "embed_dim": 16}
    assert record["config"]["train"]["epochs"] == 3 and record["config"]["model_config"]["hidden"] == 8
    assert {"test_auc", "test_ap", "test_hits@5", "test_hits@10", "test_mrr", "dataset_hash"} <= set(record)
    assert len(record["runs"]) == 2 and "val_hits@10" in record["runs"][0]
    again = tmp_path / "again.json"
    assert main(["train", "--config", str(out), "--no-progress", "--out", str(again)]) == 0

    def outcome(path):
        return [{k: v for k, v in r.items() if not k.endswith("time_s")} for r in json.loads(path.read_text())["runs"]]

    assert outcome(again) == outcome(out)  # the record replays its run


def test_scalable_encoder_with_hops_mlp_decoder_and_mini_batches(capsys):
    assert main(BASE + ["--model", "sgc", "--k", "3", "--link-decoder", "mlp", "--batch-size", "32",
                        "--epochs", "3", "--link-val-ratio", "0.1", "--link-test-ratio", "0.2"]) == 0
    text = capsys.readouterr().out
    assert "k=3" in text and "-> mlp decoder" in text and "random 70%/10%/20%" in text


@pytest.mark.parametrize("extra, message", [
    (["--model", "gcn", "--link-neg-ratio", "0"], "--link-neg-ratio (neg_ratio) must be a number > 0.0, got 0.0"),
    (["--model", "gcn", "--link-val-ratio", "1.2"], "--link-val-ratio (val_ratio) must be a number in [0.0, 1.0)"),
    (["--model", "gcn", "--link-hits-k", "10,x"], "--link-hits-k expects comma-separated integers"),
    (["--model", "gcn", "--link-hits-k", "0"], "every K in --link-hits-k (hits_k) must be an integer >= 1, got 0"),
    (["--model", "gcn", "--link-embed-dim", "1"], "--link-embed-dim (embed_dim) must be an integer >= 2"),
    (["--model", "gcn", "--sampler", "neighbor"], "--sampler does not apply to --task link"),
    (["--model", "gcn", "--probe-epochs", "3"], "--probe-epochs does not apply"),
    (["--model", "gae", "--link-decoder", "mlp"], "--link-decoder does not apply to --task link --model gae"),
    (["--link-hits-k", "10"], "--link-hits-k does not apply to --task link --model gcmae"),
    (["--model", "gcnn"], "unknown model 'gcnn' for --task link"),
])
def test_errors_name_the_flag(extra, message, capsys):
    assert main(BASE + extra) == 2
    assert message in capsys.readouterr().err


def test_unknown_decoder_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(BASE + ["--model", "gcn", "--link-decoder", "cosine"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'cosine'" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--link-decoder", "mlp"], ["--link-neg-ratio", "2"], ["--link-hits-k", "5"],
                                  ["--link-embed-dim", "8"]])
def test_link_flags_are_refused_under_task_node(flag, capsys):
    assert main(["train", "--dataset", "karate", "--model", "gcn", "--no-progress"] + flag) == 2
    assert f"{flag[0]} does not apply to --task node" in capsys.readouterr().err


def test_cora_reports_auc_ap_and_hits(data_path, capsys):
    root = data_path("planetoid")
    assert main(["train", "--task", "link", "--model", "gcn", "--dataset", "cora", "--root", str(root), "--seeds", "1",
                 "--epochs", "30", "--model-option", "normalize_features=false", "--link-decoder", "mlp",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split()}
    assert {"auc", "ap", "hits@20", "hits@50", "hits@100", "mrr"} <= set(rows)
    assert float(rows["auc"][4]) > 80.0 and float(rows["ap"][4]) > 80.0  # test column, percent
    assert "2,708 nodes, 10,556 edges" in text
