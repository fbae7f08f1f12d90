"""Real text for the systems code: WikiText-2 / SST-2 readers and a BPE tokenizer trained here.

>>> from sgl.systems.text import train_tokenizer, encode_corpus, lm_blocks
>>> tok = train_tokenizer(["a b a b c"] * 10, vocab_size=20)
>>> lm_blocks(encode_corpus(tok, ["a b c"]), seq_len=2).shape[1]
3
"""
from sgl.systems.text.corpora import load_sst2, resolve_text_root, wikitext2_documents, wikitext2_lines
from sgl.systems.text.tokenizer import (SPECIAL_TOKENS, encode_corpus, lm_blocks, load_tokenizer,
                                        to_hf_tokenizer, train_tokenizer)

__all__ = ["wikitext2_lines", "wikitext2_documents", "load_sst2", "resolve_text_root", "train_tokenizer",
           "load_tokenizer", "encode_corpus", "lm_blocks", "to_hf_tokenizer", "SPECIAL_TOKENS"]
