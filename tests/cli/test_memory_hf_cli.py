"""``sgl memory trace|train`` and ``sgl ckpt save|reshard`` on a tiny Hugging Face Llama (``--arch hf-llama``)."""
import json
import math

import pytest

pytest.importorskip("transformers")

from sgl.cli.ckpt import saved_arch  # noqa: E402
from sgl.cli.main import main  # noqa: E402
from sgl.errors import ConfigError  # noqa: E402


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _error(capsys):
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    return err


def test_trace_of_an_hf_llama_step(tmp_path, capsys):
    assert main(["memory", "trace", "--arch", "hf-llama", "--batch", "2", "--seq", "16",
                 "--out", str(tmp_path / "t.json")]) == 0
    out = _json(capsys)
    # one forward and one backward span per decoder layer of the 4-layer preset
    assert out["arch"] == "hf-llama" and out["phases"] == 8 and out["requests"] > 100 and out["live_peak_bytes"] > 0


def test_train_hf_llama_memo_and_tsplit_match_the_library(tmp_path, capsys):
    from sgl.systems.memory import train_in_memory
    from sgl.systems.runtime import ExecConfig

    ref = train_in_memory(ExecConfig(arch="hf-llama", steps=1, global_bsz=2))["losses"][1]
    assert main(["memory", "train", "--arch", "hf-llama", "--steps", "1", "--batch", "2",
                 "--offload-ratio", "0.5"]) == 0
    memo = _json(capsys)
    assert memo["arch"] == "hf-llama" and memo["alpha"] == 0.5
    assert memo["losses"]["1"] == ref          # MEMO's forward is bit-identical to the plain model's
    args = ["memory", "train", "--arch", "hf-llama", "--batch", "2", "--tsplit-budget", "500kB",
            "--ssd", str(tmp_path / "ssd"), "--page-budget", "1MB"]
    assert main(args + ["--steps", "1"]) == 0
    split = _json(capsys)
    assert split["alpha"] is None and split["tsplit"]["modelled_peak"] <= 500e3
    assert set(split["tsplit"]["choice"]) == {f"l{i}.{p}" for i in range(4) for p in ("attn", "mlp")}
    assert split["first_step"] == 1 and split["losses"]["1"] == pytest.approx(ref, rel=1e-6)
    assert main(args + ["--steps", "2"]) == 0          # resumes from the paged store
    again = _json(capsys)
    assert again["first_step"] == 2 and list(again["losses"]) == ["2"] and math.isfinite(again["losses"]["2"])


@pytest.mark.parametrize("argv,message", [
    (["memory", "train", "--arch", "hf-llama", "--tsplit-budget", "1MB", "--offload-ratio", "0.5"],
     "MEMO's token-wise offload and TSPLIT both rewrite every decoder layer"),
    (["memory", "train", "--tsplit-budget", "lots"], "cannot read --tsplit-budget"),
])
def test_train_refuses_what_it_cannot_run(capsys, argv, message):
    assert main(argv) == 2
    assert message in _error(capsys)


@pytest.mark.parametrize("argv", [["memory", "trace", "--arch", "gpt2", "--out", "t.json"],
                                  ["memory", "train", "--arch", "hf-gpt2"],
                                  ["ckpt", "save", "--arch", "llama", "--out", "c"]])
def test_unknown_arch_is_refused_by_the_parser(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_hf_llama_checkpoint_saved_on_two_restores_under_zero3(tmp_path, capsys):
    ckpt = str(tmp_path / "c2")
    assert main(["ckpt", "save", "--arch", "hf-llama", "--devices", "2", "--layout", "dp", "--batch", "4",
                 "--out", ckpt, "--start-method", "fork", "--timeout", "240"]) == 0
    saved = _json(capsys)
    assert saved["arch"] == "hf-llama" and math.isfinite(saved["losses"][0])
    meta = json.loads((tmp_path / "c2" / "sgl-model.json").read_text())
    assert meta["architecture"]["model_type"] == "llama" and meta["config"]["arch"] == "hf-llama"
    # a mismatching --arch is refused before any process starts
    assert main(["ckpt", "reshard", "--from", ckpt, "--devices", "2", "--layout", "sdp", "--arch", "tiny"]) == 2
    assert "holds a hf-llama model (llama)" in _error(capsys)
    assert main(["ckpt", "reshard", "--from", ckpt, "--devices", "2", "--layout", "sdp", "--start-method", "fork",
                 "--timeout", "240"]) == 0       # the arch is read from the checkpoint
    out = _json(capsys)
    assert out["arch"] == "hf-llama" and out["layout"] == "sdp" and out["step"] == 1
    assert out["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-5)


def _meta(model_type=None, arch=None):
    meta = {"model": "tiny", "shapes": {}, "step": 1, "world": 2, "layout": "dp", "config": {"global_bsz": 4}}
    if model_type:
        meta["architecture"] = {"model_type": model_type}
    if arch:
        meta["config"]["arch"] = arch
    return meta


def test_saved_arch_reads_the_fingerprint():
    assert saved_arch(_meta(), "c") == "tiny"                        # written before --arch: TinyLM
    assert saved_arch(_meta("sgl-tinylm", "tiny"), "c") == "tiny"
    assert saved_arch(_meta("mixtral"), "c") == "hf-mixtral"
    assert saved_arch(_meta("qwen2_moe", "hf-qwen2-moe"), "c") == "hf-qwen2-moe"
    with pytest.raises(ConfigError, match="fingerprint is 'llama' \\(hf-llama\\) but its run config says arch 'tiny'"):
        saved_arch(_meta("llama", "tiny"), "c")
    with pytest.raises(ConfigError, match="holds a 'gpt2' model, which `sgl ckpt` cannot build"):
        saved_arch(_meta("gpt2"), "c")
    with pytest.raises(ConfigError, match="names arch 'hf-gpt2'"):
        saved_arch(_meta(arch="hf-gpt2"), "c")


def test_reshard_refuses_a_mismatching_arch_on_a_written_fingerprint(tmp_path, capsys):
    (tmp_path / "sgl-model.json").write_text(json.dumps(_meta("mixtral", "hf-mixtral")))
    assert main(["ckpt", "reshard", "--from", str(tmp_path), "--devices", "2", "--layout", "dp",
                 "--arch", "hf-llama"]) == 2
    assert "--arch hf-llama: checkpoint" in (err := _error(capsys)) and "holds a hf-mixtral model (mixtral)" in err
