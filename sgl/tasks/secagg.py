"""Secure distributed counting with KVSAgg: every client is an :mod:`sgl.comm` process.

Each of ``clients`` processes holds one contiguous slice of a token stream and counts its words
(``ngram=1``) or word bigrams (``ngram=2``; key ``a * V + b``). The clients agree on a
:class:`~sgl.comm.compress.HyperIBLT` sized for the distinct keys of the *sum* (by default the
sum of every client's distinct keys, an upper bound of which only the total is revealed), encode
their counts, mask the table with X25519-agreed pairwise masks and send it to the server (rank 0),
which decodes the global counts: it learns the sum, not any client's set
(:func:`sgl.comm.compress.kvsagg_sum`). The parent process then checks the result against plain
counting and reports bytes per client beside dense masked aggregation over the whole key space
and plain (insecure) sparse aggregation, the global top-k keys and the times.

Example:
    >>> from sgl.tasks.secagg import secure_count
    >>> tokens = [0, 1, 2, 1, 0, 1, 2, 2, 1, 0] * 5
    >>> r = secure_count(tokens, vocab_size=3, clients=2, ngram=1, top=2, timeout=120)  # doctest: +SKIP
    >>> r["exact"], r["top_keys"]  # doctest: +SKIP
    (True, [1, 2])
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from sgl import comm
from sgl._checks import check_int
from sgl.errors import ConfigError, DatasetError

__all__ = ["secure_count", "read_tokens"]


def read_tokens(path: Any) -> Tuple[List[int], List[str]]:
    """Whitespace tokens of a text file (``<eos>`` after each line) as ids, and the vocabulary."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"no text file at {path}; pass --text PATH, or --root with wikitext2/train.txt under it")
    vocab: Dict[str, int] = {}
    ids: List[int] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            for word in line.split() + ["<eos>"]:
                ids.append(vocab.setdefault(word, len(vocab)))
    if len(ids) < 2:
        raise DatasetError(f"{path} holds no words to count")
    return ids, list(vocab)


def _keys(tokens: torch.Tensor, vocab_size: int, ngram: int) -> torch.Tensor:
    return tokens if ngram == 1 else tokens[:-1] * vocab_size + tokens[1:]


def _client(rank: int, world: int, tokens: torch.Tensor, vocab_size: int, ngram: int,
            expected_keys: Optional[int], timeout: float) -> Dict[str, Any]:
    from sgl.comm.compress import HyperIBLT, kvsagg_sum, table_bytes

    torch.set_num_threads(1)
    # slices overlap by one token so every bigram of the stream belongs to exactly one client
    bounds = np.linspace(0, tokens.numel() - (ngram - 1), world + 1).astype(int)
    part = tokens[bounds[rank]:bounds[rank + 1] + ngram - 1]
    start = time.perf_counter()
    keys, counts = torch.unique(_keys(part, vocab_size, ngram), return_counts=True)
    count_s = time.perf_counter() - start
    total = int(comm.all_reduce(comm.to_wire(torch.tensor([keys.numel()])), timeout=timeout).cpu()[0])
    iblt = HyperIBLT.for_keys(expected_keys or max(total, 1), key_space=vocab_size ** ngram, seed=0)
    start = time.perf_counter()
    result = kvsagg_sum(keys, counts, iblt, server=0, timeout=timeout, broadcast=False)
    out: Dict[str, Any] = {"distinct": int(keys.numel()), "count_s": count_s,
                           "aggregate_s": time.perf_counter() - start, "bytes": table_bytes(iblt),
                           "cells": iblt.num_cells}
    if rank == 0:
        out.update(ok=bool(result.ok), keys=result.keys.cpu(), values=result.values.reshape(-1).cpu(),
                   cells_left=int(result.cells_left))
    return out


def secure_count(tokens: Sequence[int], vocab_size: int, clients: int = 8, ngram: int = 1, top: int = 100,
                 expected_keys: Optional[int] = None, timeout: float = 600.0) -> Dict[str, Any]:
    """Count ``ngram``-grams of ``tokens`` over ``clients`` processes with KVSAgg; see the module docstring.

    Returns a record: ``exact`` (the decoded counts equal plain counting), ``top_keys`` / ``top_counts``
    (the ``top`` most frequent keys), ``distinct_keys``, ``bytes_per_client`` (KVSAgg), ``dense_bytes``
    (masked aggregation over the whole key space, computed: it cannot run at this size),
    ``plain_sparse_bytes`` (mean of a client's 8-byte key + count pairs, no security), the times.
    """
    clients = check_int(clients, "clients", 2)
    ngram = check_int(ngram, "ngram", 1, 2)
    top = check_int(top, "top", 1)
    vocab_size = check_int(vocab_size, "vocab_size", 1)
    if expected_keys is not None:
        expected_keys = check_int(expected_keys, "expected_keys", 1)
    ids = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
    if ids.dim() != 1 or ids.numel() < clients + ngram:
        raise ConfigError(f"need at least {clients + ngram} tokens for {clients} clients, got {ids.numel()}")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ConfigError(f"token ids must lie in [0, {vocab_size})")
    if vocab_size ** ngram > 2 ** 31 - 1:
        raise ConfigError(f"{vocab_size:,}^{ngram} keys exceed the HyperIBLT field (2^31 - 1); use a smaller "
                          f"vocabulary or ngram=1")
    start = time.perf_counter()
    from sgl.tasks.dist_run import rank_start_method

    ranks = comm.spawn(_client, clients, ids, vocab_size, ngram, expected_keys, timeout, timeout=timeout + 60,
                       start_method=rank_start_method())
    wall = time.perf_counter() - start
    server = ranks[0]
    truth_keys, truth_counts = torch.unique(_keys(ids, vocab_size, ngram), return_counts=True)
    exact = server["ok"] and torch.equal(server["keys"], truth_keys) and torch.equal(server["values"], truth_counts)
    k = min(top, truth_keys.numel())
    order = torch.topk(server["values"], min(k, server["values"].numel())).indices if server["ok"] else None
    truth_top = torch.topk(truth_counts, k).values
    record = {
        "clients": clients, "ngram": ngram, "key_space": vocab_size ** ngram, "distinct_keys": int(truth_keys.numel()),
        "client_distinct_keys": [r["distinct"] for r in ranks], "table_cells": server["cells"],
        "decoded": server["ok"], "exact": bool(exact), "cells_left": server["cells_left"],
        "top_keys": [] if order is None else server["keys"][order].tolist(),
        "top_counts": [] if order is None else server["values"][order].tolist(),
        "top_exact": bool(order is not None and torch.equal(server["values"][order].sort().values,
                                                             truth_top.sort().values)),
        "bytes_per_client": server["bytes"], "dense_bytes": 4 * vocab_size ** ngram + 32,
        "plain_sparse_bytes": float(np.mean([16 * r["distinct"] for r in ranks])),
        "aggregate_s": max(r["aggregate_s"] for r in ranks), "wall_s": wall,
    }
    return record
