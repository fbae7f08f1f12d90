"""``sgl federated train``: a thread-backend run on synthetic data, and a bad field split."""
from sgl.cli.main import main


def test_federated_train_prints_auc_rounds_and_attacks(capsys, tmp_path):
    out = tmp_path / "rec.json"
    code = main(["federated", "train", "--dataset", "synthetic-ctr", "--max-rows", "600", "--backend", "thread",
                 "--embed-dim", "4", "--hidden", "8", "--batch-size", "64", "--attack", "--defense", "projpert-iso",
                 "--sumkl-bound", "4", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "test auc:" in text and "rounds: 8" in text and "attack on party host" in text
    assert out.is_file()


def test_federated_train_rejects_a_split_with_an_unowned_column(capsys, tmp_path):
    split = tmp_path / "fields.yaml"
    split.write_text("guest: [I1-I4, F1]\nhost: [F2-F5]\n")
    code = main(["federated", "train", "--dataset", "synthetic-ctr", "--max-rows", "200", "--backend", "thread",
                 "--split", str(split)])
    assert code == 2 and "F6 are owned by no party" in capsys.readouterr().err


def test_federated_train_blindfl_flags_reach_the_config(capsys):
    # a key below 1024 bits is refused before any party starts (the message names the fix)
    code = main(["federated", "train", "--dataset", "synthetic-ctr", "--max-rows", "200", "--backend", "thread",
                 "--blindfl", "--key-bits", "512", "--passive-optimizer", "sgd"])
    assert code == 2 and "1024" in capsys.readouterr().err
