"""A byte-pair-encoding tokenizer trained here (Hugging Face ``tokenizers``), cached atomically.

No pretrained tokenizer can be downloaded, so the systems code trains its own on the train split:
:func:`train_tokenizer` returns a :class:`tokenizers.Tokenizer` with the special tokens
``<pad>`` (id 0), ``<unk>`` (1) and ``<eos>`` (2); with ``cache_dir`` the trained tokenizer is
stored as ``bpe-<key>.json`` (the key hashes the texts and the settings) and reloaded next time.
:func:`to_hf_tokenizer` wraps it as a ``transformers.PreTrainedTokenizerFast`` for ``generate()``
and Trainer users; :func:`encode_corpus` turns documents into one id stream, :func:`lm_blocks`
into ``[n, seq_len + 1]`` training rows (inputs ``[:, :-1]``, targets ``[:, 1:]``).

>>> tok = train_tokenizer(["the cat sat on the mat", "the dog sat"] * 20, vocab_size=40)
>>> ids = encode_corpus(tok, ["the cat sat"])
>>> tok.decode(ids[:-1].tolist())
'the cat sat'
>>> int(ids[-1]) == tok.token_to_id("<eos>")
True
>>> lm_blocks(torch.arange(10), seq_len=4).tolist()
[[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]]
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Union

import torch

from sgl._checks import check_int
from sgl.errors import ConfigError
from sgl.fileio import atomic_write

__all__ = ["train_tokenizer", "load_tokenizer", "encode_corpus", "lm_blocks", "to_hf_tokenizer",
           "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<pad>", "<unk>", "<eos>")


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - the [systems] extra installs it
        raise ConfigError("training a tokenizer needs the 'tokenizers' package: "
                          "pip install 'sgl[systems]'") from exc
    return tokenizers


def _key(texts: Sequence[str], vocab_size: int, min_frequency: int) -> str:
    # v2: Metaspace word marks (v1's "</w>" suffix trained to process-dependent ids)
    digest = hashlib.sha256(f"bpe-v2|{vocab_size}|{min_frequency}|{len(texts)}".encode())
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def train_tokenizer(texts: Sequence[str], vocab_size: int = 8192, *, min_frequency: int = 2,
                    cache_dir: Optional[Union[str, Path]] = None) -> Any:
    """Train a whitespace-pre-tokenized BPE tokenizer on ``texts`` (reloaded from ``cache_dir``);
    the same texts and settings give the same tokenizer in every process."""
    check_int(vocab_size, "vocab_size", minimum=len(SPECIAL_TOKENS) + 1)
    check_int(min_frequency, "min_frequency", minimum=1)
    texts = list(texts)
    if not texts or not any(t.strip() for t in texts):
        raise ConfigError("train_tokenizer: no text given (the corpus is empty)")
    path = None
    if cache_dir is not None:
        path = Path(cache_dir).expanduser() / f"bpe-{_key(texts, vocab_size, min_frequency)}.json"
        if path.is_file():
            return load_tokenizer(path)
    tk = _import_tokenizers()
    # Words are split on whitespace and marked at their start with "▁" (SentencePiece's
    # Metaspace) rather than at their end with a "</w>" suffix: the trainer numbers suffixed
    # symbols in hash-map order, which changed ids, and through tie-breaks even merges, from one
    # process to the next. With plain characters the alphabet is numbered in sorted order, so the
    # same texts give the same tokenizer in every process.
    tokenizer = tk.Tokenizer(tk.models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Sequence([tk.pre_tokenizers.WhitespaceSplit(),
                                                          tk.pre_tokenizers.Metaspace()])
    tokenizer.decoder = tk.decoders.Metaspace()
    trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                     special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "w") as handle:
            handle.write(tokenizer.to_str())
    return tokenizer


def load_tokenizer(path: Union[str, Path]) -> Any:
    """A tokenizer saved by :func:`train_tokenizer` (or any ``tokenizers`` JSON file)."""
    tk = _import_tokenizers()
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"tokenizer file {path} does not exist")
    return tk.Tokenizer.from_file(str(path))


def encode_corpus(tokenizer: Any, texts: Iterable[str], *, eos: bool = True) -> torch.Tensor:
    """One int64 id stream of all ``texts``, each followed by ``<eos>`` when ``eos``."""
    texts = [t for t in texts]
    eos_id = tokenizer.token_to_id("<eos>")
    if eos and eos_id is None:
        raise ConfigError("encode_corpus: the tokenizer has no <eos> token; pass eos=False")
    ids: List[int] = []
    for encoding in tokenizer.encode_batch(texts):
        ids.extend(encoding.ids)
        if eos:
            ids.append(eos_id)
    return torch.tensor(ids, dtype=torch.long)


def lm_blocks(ids: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Rows ``ids[i*seq_len : (i+1)*seq_len + 1]`` (consecutive rows share one id); drops the tail."""
    check_int(seq_len, "seq_len", minimum=1)
    ids = torch.as_tensor(ids).reshape(-1)
    rows = (ids.numel() - 1) // seq_len
    if rows < 1:
        raise ConfigError(f"lm_blocks: {ids.numel()} ids are too few for one block of seq_len={seq_len}")
    index = torch.arange(rows).unsqueeze(1) * seq_len + torch.arange(seq_len + 1)
    return ids[index]


def to_hf_tokenizer(tokenizer: Any) -> Any:
    """``transformers.PreTrainedTokenizerFast`` around a trained tokenizer (pad/unk/eos set)."""
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:  # pragma: no cover
        raise ConfigError("to_hf_tokenizer needs 'transformers': pip install 'sgl[systems]'") from exc
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<eos>", bos_token="<eos>")
