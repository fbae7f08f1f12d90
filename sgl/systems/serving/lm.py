"""Tiny Hugging Face models trained here on real text (no weights can be downloaded).

:func:`train_tiny_llama` trains a ``LlamaForCausalLM`` (GQA, RoPE) on WikiText-2 with a BPE
tokenizer trained on the same split; :func:`tiny_llama_config` is its config. Trained weights
are cached under ``cache_dir`` by a key of every setting, so tests train once and benchmarks
reuse them. The serving code takes any ``transformers`` decoder: a user's real checkpoint works
the same way on a GPU.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Tuple, Union

import torch

from sgl._checks import check_choice, check_int, check_real
from sgl.fileio import atomic_write

__all__ = ["TinyLlamaSpec", "tiny_llama_config", "train_tiny_llama", "wikitext_ids", "warmup_linear"]


def warmup_linear(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first 10 % of ``steps``, then linear decay to 0 (any ``steps >= 1``)."""
    warm = max(1, steps // 10)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warm) * max(0.0, 1.0 - s / steps))


@dataclass(frozen=True)
class TinyLlamaSpec:
    """Size of the tiny decoder: ``heads / kv_heads`` query heads share one KV head (GQA)."""

    vocab_size: int = 2048
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 256
    max_positions: int = 4096


def tiny_llama_config(spec: TinyLlamaSpec = TinyLlamaSpec()) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
                       intermediate_size=spec.intermediate_size, num_hidden_layers=spec.layers,
                       num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
                       max_position_embeddings=spec.max_positions, pad_token_id=0, bos_token_id=2,
                       eos_token_id=2, tie_word_embeddings=True)


def wikitext_ids(root: Union[str, Path], split: str, tokenizer: Any) -> torch.Tensor:
    """WikiText-2 ``split`` as one id stream (articles joined by ``<eos>``)."""
    from sgl.systems.text import encode_corpus, wikitext2_documents

    return encode_corpus(tokenizer, wikitext2_documents(root, split))


def train_tiny_llama(root: Union[str, Path], *, spec: TinyLlamaSpec = TinyLlamaSpec(), steps: int = 200,
                     seq_len: int = 256, batch_size: int = 8, lr: float = 3e-3, seed: int = 0,
                     documents: Optional[int] = None, cache_dir: Optional[Union[str, Path]] = None,
                     progress: bool = False, train_attention: str = "eager") -> Tuple[Any, Any]:
    """``(model, tokenizer)``: a tiny Llama trained with AdamW on WikiText-2 train (cached).

    Loss is next-token cross-entropy on random ``seq_len`` windows; the model is returned in
    ``eval()`` mode with eager attention. ``documents`` keeps only the first articles (the
    tokenizer and the training stream; tests use it to train in seconds). ``train_attention``
    ``"sdpa"`` trains with fused attention (~3x faster on 2k windows here; the same maths up to
    rounding, cached under its own key).
    """
    from transformers import LlamaForCausalLM

    from sgl.systems.text import train_tokenizer, wikitext2_documents

    steps = check_int(steps, "steps", minimum=1)
    seq_len = check_int(seq_len, "seq_len", minimum=2)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_real(lr, "lr", 0.0, 1.0, open_low=True)
    train_attention = check_choice(train_attention, "train_attention", ("eager", "sdpa"))
    docs = wikitext2_documents(root, "train")
    if documents is not None:
        docs = docs[: check_int(documents, "documents", minimum=1)]
    tok = train_tokenizer(docs, vocab_size=spec.vocab_size, cache_dir=cache_dir)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_llama_config(spec))
    model.set_attn_implementation("eager")
    settings = [asdict(spec), steps, seq_len, batch_size, lr, seed, documents, "v1"]
    if train_attention != "eager":   # keeps the keys of models trained before the option existed
        settings.append(train_attention)
    key = hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:16]
    path = Path(cache_dir).expanduser() / f"tiny-llama-{key}.pt" if cache_dir is not None else None
    if path is not None and path.is_file():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), tok
    from sgl.systems.text import encode_corpus

    ids = encode_corpus(tok, docs)
    model.set_attn_implementation(train_attention)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = warmup_linear(opt, steps)
    model.train()
    loop = range(steps)
    if progress:
        from tqdm import tqdm
        loop = tqdm(loop, desc="tiny llama", leave=False)
    for _ in loop:
        start = torch.randint(0, ids.numel() - seq_len - 1, (batch_size,), generator=gen)
        rows = ids[start.unsqueeze(1) + torch.arange(seq_len)]
        loss = model(input_ids=rows, labels=rows).loss   # transformers shifts the labels itself
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    model.set_attn_implementation("eager")
    model.eval()
    if path is not None:
        with atomic_write(path) as handle:
            torch.save(model.state_dict(), handle)
    return model, tok
