"""A tiny Llama trained once per session on WikiText-2 (cached under a tmp dir)."""
import pytest
import torch


@pytest.fixture(scope="session")
def serving_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("serving_cache")


@pytest.fixture(scope="session")
def _wikitext_root():
    import os
    from pathlib import Path

    root = os.environ.get("SGL_TEST_DATA")
    if not root or not (Path(root) / "wikitext2" / "train.txt").is_file():
        pytest.skip("SGL_TEST_DATA is not set to the shared datasets folder (wikitext2)")
    return Path(root)


@pytest.fixture(scope="session")
def tiny_llama(_wikitext_root, serving_cache):
    """``(model, tokenizer, test ids)``: 2 layers, 4 query heads over 2 KV heads, 40 steps of training."""
    from sgl.systems.serving.lm import TinyLlamaSpec, train_tiny_llama

    torch.set_num_threads(1)
    spec = TinyLlamaSpec(vocab_size=1024, hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128)
    model, tok = train_tiny_llama(_wikitext_root, spec=spec, steps=40, seq_len=128, batch_size=4,
                                  documents=80, cache_dir=serving_cache)
    from sgl.systems.text import encode_corpus, wikitext2_documents

    return model, tok, encode_corpus(tok, wikitext2_documents(_wikitext_root, "test")[:10])
