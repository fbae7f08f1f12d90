"""WikiText-2 / SST-2 readers and the trained BPE tokenizer (real files via SGL_TEST_DATA)."""
import pytest
import torch

from sgl.errors import ConfigError, DatasetError
from sgl.systems.text import (encode_corpus, lm_blocks, load_sst2, load_tokenizer, to_hf_tokenizer,
                              train_tokenizer, wikitext2_documents, wikitext2_lines)


def test_wikitext2_documents_match_the_published_counts(data_path):
    root = data_path("wikitext2")
    assert [len(wikitext2_documents(root, s)) for s in ("train", "valid", "test")] == [600, 60, 60]
    assert len(wikitext2_lines(root.parent, "valid")) == 3760
    words = sum(len(line.split()) + 1 for line in wikitext2_lines(root, "valid"))
    assert words == 217_646  # tokens counting one <eos> per line, as the README states


def test_sst2_reader(data_path):
    sentences, labels = load_sst2(data_path("sst2"), "dev")
    assert len(sentences) == len(labels) == 872
    assert set(labels.tolist()) == {0, 1}


def test_tokenizer_round_trip_and_cache(tmp_path):
    texts = ["the quick brown fox jumps over the lazy dog"] * 30 + ["a fox and a dog"] * 30
    first = train_tokenizer(texts, vocab_size=60, cache_dir=tmp_path)
    files = list(tmp_path.glob("bpe-*.json"))
    assert len(files) == 1
    again = train_tokenizer(texts, vocab_size=60, cache_dir=tmp_path)
    assert again.to_str() == first.to_str()
    assert load_tokenizer(files[0]).encode("the lazy fox").ids == first.encode("the lazy fox").ids
    ids = encode_corpus(first, ["the lazy fox", "a dog"])
    eos = first.token_to_id("<eos>")
    assert (ids == eos).sum() == 2 and ids[-1] == eos
    assert first.decode(first.encode("the lazy fox").ids) == "the lazy fox"
    hf = to_hf_tokenizer(first)
    assert hf("a dog")["input_ids"] == first.encode("a dog").ids and hf.pad_token_id == 0


def test_lm_blocks_overlap_by_one():
    blocks = lm_blocks(torch.arange(11), seq_len=5)
    assert blocks.tolist() == [[0, 1, 2, 3, 4, 5], [5, 6, 7, 8, 9, 10]]


def test_bad_inputs(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        train_tokenizer(["", " "], vocab_size=50)
    with pytest.raises(ConfigError, match="too few"):
        lm_blocks(torch.arange(3), seq_len=5)
    with pytest.raises(DatasetError, match="train.txt not found"):
        wikitext2_documents(tmp_path, "train")
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\tx\n")
    with pytest.raises(DatasetError, match="line 3"):
        load_sst2(tmp_path, "dev")
    with pytest.raises(ConfigError):
        wikitext2_lines(tmp_path, "validation")


_VOCAB_SCRIPT = """
import json, sys
from sgl.systems.text import train_tokenizer
texts = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen liquor jugs",
         "sphinx of black quartz judge my vow", "how vexingly quick daft zebras jump"] * 10
tok = train_tokenizer(texts, vocab_size=80)
print(json.dumps(sorted(tok.get_vocab().items())))
"""


def test_token_ids_are_the_same_in_every_process():
    """``tokenizers`` numbers the BPE alphabet in hash-map order, which differs per process; the same
    texts must still give the same ids (the joint-LoRA test on SST-2 failed under load because of it)."""
    import json
    import subprocess
    import sys

    runs = [json.loads(subprocess.run([sys.executable, "-c", _VOCAB_SCRIPT], check=True, capture_output=True,
                                      text=True, timeout=120).stdout) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    vocab = dict(runs[0])
    assert [vocab["<pad>"], vocab["<unk>"], vocab["<eos>"]] == [0, 1, 2]
    assert sorted(vocab.values()) == list(range(len(vocab)))
