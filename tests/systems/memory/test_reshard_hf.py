"""DCP resharding checkpoints of Hugging Face ``LlamaForCausalLM``: saved under DDP, restored under FSDP2 ZeRO-3.

(Restoring into TP, on 2 ranks, and a TP checkpoint into DDP run behind ``SGL_SLOW_TESTS``.)
"""
import json
import os

import pytest
import torch

pytest.importorskip("transformers")

from sgl import comm  # noqa: E402
from sgl.errors import ConfigError  # noqa: E402
from sgl.systems.memory import check_checkpoint, model_fingerprint, restore_worker, save_worker  # noqa: E402
from sgl.systems.runtime import ExecConfig  # noqa: E402
from sgl.systems.runtime.models import build_model  # noqa: E402

CFG = ExecConfig(arch="hf-llama", global_bsz=4, lr=1e-2).__dict__


def _save_then_restore(rank, world, directory, save_as="dp", restore_as=("sdp",)):
    saved = save_worker(rank, world, save_as, directory, CFG, 1)
    return saved, [restore_worker(rank, world, kind, directory, CFG) for kind in restore_as]


def test_ddp_checkpoint_of_hf_llama_restores_under_zero3(tmp_path):
    out = comm.spawn(_save_then_restore, 2, str(tmp_path), timeout=240, start_method="fork")
    meta = json.loads((tmp_path / "sgl-model.json").read_text())
    assert meta["architecture"]["model_type"] == "llama" and meta["layout"] == "dp"
    _equal_after_restore(*out[0])


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="two more 2-process runs; SGL_SLOW_TESTS=1")
def test_hf_llama_checkpoints_restore_into_tp_and_from_tp(tmp_path):
    out = comm.spawn(_save_then_restore, 2, str(tmp_path / "dp"), "dp", ("tp",), timeout=240, start_method="fork")
    _equal_after_restore(*out[0])
    out = comm.spawn(_save_then_restore, 2, str(tmp_path / "tp"), "tp", ("dp", "sdp"), timeout=240,
                     start_method="fork")
    _equal_after_restore(*out[0])


def _equal_after_restore(saved, restored):
    a = saved["full"]
    assert any(k.startswith("model.model.layers.0.self_attn") for k in a) and any(k.startswith("optim.") for k in a)
    for got in restored:
        b = got["full"]
        assert set(a) == set(b)
        assert all(torch.equal(a[k], b[k]) for k in a)              # parameters and Adam state, bit-equal
        assert got["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-5)
        assert got["step"] == 1


def test_checkpoint_of_another_architecture_is_refused_naming_both(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

    llama = model_fingerprint(build_model(ExecConfig(arch="hf-llama")), "tiny")
    (tmp_path / "sgl-model.json").write_text(json.dumps({**llama, "step": 2}))
    assert check_checkpoint(tmp_path, llama)["step"] == 2
    with torch.device("meta"):      # only shapes and config are read
        mixtral = MixtralForCausalLM(MixtralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                                   num_attention_heads=4, num_key_value_heads=4, vocab_size=256,
                                                   num_local_experts=4))
        wider = LlamaForCausalLM(LlamaConfig(hidden_size=128, intermediate_size=128, num_hidden_layers=4,
                                             num_attention_heads=4, num_key_value_heads=4, vocab_size=256))
    with pytest.raises(ConfigError, match=r"is of llama \(hidden_size=64.*this run builds mixtral \(.*"
                                          r"num_local_experts=4"):
        check_checkpoint(tmp_path, model_fingerprint(mixtral, "mixtral"))
    with pytest.raises(ConfigError, match="llama \\(hidden_size=64.*builds llama \\(hidden_size=128"):
        check_checkpoint(tmp_path, model_fingerprint(wider, "wide"))
