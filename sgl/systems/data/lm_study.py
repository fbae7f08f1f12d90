"""The DataSculpt training study: WikiText-2 packed each way, one small LM per (method, seed).

:func:`packing_lm_study` tokenizes the WikiText-2 training *sections*
(:func:`~sgl.systems.data.corpus.wikitext2_sections`) with a BPE tokenizer trained on them,
packs them into ``window``-token contexts with every method, trains
:func:`~sgl.systems.data.lm_eval.tiny_llama` from scratch on each packing for the same number
of real tokens and the same seeds, and scores every model on the validation split: whole
articles at positions ``>= long_from`` and short sections (``< short_max`` tokens) alone.

Usage (minutes on a CPU; ``benchmarks/bench_data.py --part lm`` prints the table)::

    rows = packing_lm_study("../shared/datasets", methods=("datasculpt", "random"), seeds=(0, 1, 2))
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from sgl._checks import check_int
from sgl.systems.data.corpus import wikitext2_sections
from sgl.systems.data.datasculpt import PACK_METHODS, PackConfig, pack_arrays
from sgl.systems.data.embed import TfidfSvdEncoder
from sgl.systems.data.lm_eval import (LMTrainConfig, article_blocks, long_context_perplexity,
                                      short_document_perplexity, tiny_llama, train_packed_lm, windows_to_rows)

__all__ = ["packing_lm_study", "encode_each"]


def encode_each(tokenizer: Any, texts: Sequence[str]) -> List[torch.Tensor]:
    """One id tensor per text, each ending with ``<eos>``."""
    eos = tokenizer.token_to_id("<eos>")
    return [torch.tensor(e.ids + [eos], dtype=torch.long) for e in tokenizer.encode_batch(list(texts))]


def packing_lm_study(root: Any, *, methods: Sequence[str] = PACK_METHODS, seeds: Sequence[int] = (0, 1, 2),
                     window: int = 1024, long_from: int = 512, short_max: int = 512, vocab_size: int = 4096,
                     train: Optional[LMTrainConfig] = None, max_sections: Optional[int] = None,
                     max_eval_blocks: int = 64, cache_dir: Any = None,
                     log: Optional[Callable[[str], None]] = None,
                     on_row: Optional[Callable[[Dict[str, Any]], None]] = None,
                     done: Sequence[Dict[str, Any]] = ()) -> List[Dict[str, Any]]:
    """One row per (method, seed): packing metrics, training summary, ``ppl_long``, ``ppl_short``.

    Runs go seed by seed, every method within a seed, so a study cut short still compares all
    methods on the seeds it finished. ``on_row`` is called after each run (e.g. to save the rows
    so far); rows in ``done`` (from an earlier, interrupted study with the same settings) are
    kept and their (method, seed) runs skipped.
    """
    from sgl.systems.text import train_tokenizer, wikitext2_documents

    check_int(window, "window", minimum=8)
    train = train or LMTrainConfig()
    texts, articles = wikitext2_sections(root, "train")
    if max_sections is not None:
        texts, articles = texts[:max_sections], articles[:max_sections]
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size, cache_dir=cache_dir)
    doc_ids = encode_each(tokenizer, texts)
    lengths = np.array([d.numel() for d in doc_ids], dtype=np.int64)
    embeddings = TfidfSvdEncoder(64, seed=0).fit(texts).encode(texts)
    valid_articles = encode_each(tokenizer, wikitext2_documents(root, "valid"))
    blocks = article_blocks(valid_articles, window)[:max_eval_blocks]
    valid_sections, _ = wikitext2_sections(root, "valid")
    short = [d for d in encode_each(tokenizer, valid_sections) if d.numel() < short_max]
    vocab = tokenizer.get_vocab_size()
    rows: List[Dict[str, Any]] = [dict(r) for r in done]
    finished = {(r["method"], int(r["seed"])) for r in rows}
    packings = {}
    for method in methods:  # the packing is seed-independent (seed 0): only the model's seed varies
        packed = pack_arrays(lengths, embeddings, PackConfig(window=window, method=method, seed=0))
        packings[method] = (packed, windows_to_rows(packed.packing, doc_ids))
    for seed in seeds:
        for method in methods:
            if (method, int(seed)) in finished:
                continue
            packed, (ids, labels) = packings[method]
            started = time.perf_counter()
            config = replace(train, seed=int(seed))
            model = tiny_llama(vocab, window, config)
            summary = train_packed_lm(model, ids, labels, config)
            scores = long_context_perplexity(model, blocks, long_from, device=config.device)
            row = {"method": method, "seed": int(seed), "fill_rate": packed.metrics["fill_rate"],
                   "docs_truncated": packed.metrics["docs_truncated"],
                   "intra_window_similarity": packed.metrics["intra_window_similarity"],
                   **summary, **scores,
                   "ppl_short": short_document_perplexity(model, short, device=config.device),
                   "short_docs": len(short), "wall_s": time.perf_counter() - started}
            rows.append(row)
            if on_row is not None:
                on_row(row)
            if log is not None:
                log(f"{method} seed {seed}: ppl_long {row['ppl_long']:.2f}, ppl_short {row['ppl_short']:.2f}, "
                    f"{row['train_tokens']} tokens in {row['seconds']:.0f} s")
    return rows
