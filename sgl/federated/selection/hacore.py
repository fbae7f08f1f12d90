"""HaCore: a weighted coreset from LSH bit signatures and k-medoids in Hamming space.

**Signatures.** Client ``p`` centres its columns and computes SimHash bits ``1[x^T r > 0]`` for its own
Gaussian hyperplanes ``r``; the total bit budget is split between clients in proportion to their
mean centred row norm (at least one bit each). For two rows at angle ``θ`` one bit differs with
probability ``θ / π``, so the Hamming distance of the concatenated signature grows with the angular
distance. Only the bits (``ceil(bits / 64)`` words per row) leave a client.

**Hamming k-medoids** (per class, ``k_c ∝`` class size, a few alternating rounds):

- *assignment* through an inverted index: each medoid is filed under the key made of ``index_bits``
  sampled signature bits; a row probes every key within Hamming radius ``radius`` of its own key and
  takes the nearest medoid found (exact popcount scan only for rows that find none); faiss's
  ``IndexBinaryHash`` is that index, ``IndexBinaryFlat`` the scan (``index_bits=0``);
- *medoid update* by bit counting: in a cluster of ``n`` rows with ``c_b`` ones at bit ``b``, a row's
  total Hamming distance to the cluster is ``sum_b c_b + sum_b x_b (n - 2 c_b)``, so every row's cost
  is one matrix–vector product, ``O(n · bits)`` instead of ``O(n^2)``.

The medoids, weighted by their cluster sizes, are the coreset. :func:`raw_kmedoids_coreset` is the
baseline: the same alternating k-medoids (same initial medoids, same rounds) on the raw features.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300)
    >>> blocks = [y[:, None] + rng.normal(size=(300, 3)), rng.normal(size=(300, 2))]
    >>> core = hacore_coreset(blocks, y, size=30, bits=64, seed=0)
    >>> len(core.ids), int(core.weights.sum())
    (30, 300)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.federated.selection.knn import check_parties

__all__ = ["Coreset", "allocate_bits", "simhash_signatures", "pack_bits", "hamming", "hamming_kmedoids",
           "raw_kmedoids", "hacore_coreset", "raw_kmedoids_coreset"]


@dataclass
class Coreset:
    """Row ids of the medoids, their weights (cluster sizes), and the seconds spent building it."""

    ids: np.ndarray
    weights: np.ndarray
    seconds: float


def allocate_bits(blocks: Sequence[np.ndarray], bits: int) -> List[int]:
    """Bits per client in proportion to its mean centred row norm (largest remainders, at least 1 each)."""
    if bits < len(blocks):
        raise ConfigError(f"bits={bits} cannot give each of the {len(blocks)} clients a bit; raise bits")
    w = np.array([np.linalg.norm(b - b.mean(0), axis=1).mean() for b in blocks]) + 1e-12
    share = (bits - len(blocks)) * w / w.sum()
    out = np.floor(share).astype(int) + 1
    for i in np.argsort(-(share - np.floor(share)))[: bits - out.sum()]:
        out[i] += 1
    return out.tolist()


def simhash_signatures(blocks: Sequence[np.ndarray], bits: int, seed: int = 0) -> np.ndarray:
    """``bool [n, bits]``: each client's SimHash bits of its centred columns, concatenated."""
    parts = []
    for p, (x, b) in enumerate(zip(blocks, allocate_bits(blocks, bits))):
        r = np.random.default_rng(seed * 1009 + p).normal(size=(x.shape[1], b))
        parts.append((x - x.mean(0)) @ r > 0)
    return np.concatenate(parts, axis=1)


def pack_bits(sig: np.ndarray) -> np.ndarray:
    """``uint64 [n, ceil(bits / 64)]`` words of a boolean signature matrix."""
    n, b = sig.shape
    padded = np.zeros((n, -(-b // 64) * 64), dtype=bool)
    padded[:, :b] = sig
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64)


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[len(a), len(b)]`` Hamming distances of packed signatures (popcount of XOR)."""
    return np.bitwise_count(a[:, None, :] ^ b[None, :, :]).sum(-1, dtype=np.int64)


def _check_size(size: int, n: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ConfigError(f"coreset size must be a positive integer, got {size!r}")
    if size > n:
        raise ConfigError(f"a coreset of {size} rows is larger than the data ({n} rows); choose size <= {n}")
    return int(size)


def _assign(words: np.ndarray, med: np.ndarray, index_bits: int, radius: int) -> np.ndarray:
    """Nearest medoid (position in ``med``) of every row: faiss's binary hash index (the inverted index:
    key = the first ``index_bits`` bits, probed within Hamming ``radius``), or an exact popcount scan."""
    import faiss

    codes = np.ascontiguousarray(words).view(np.uint8)
    dim = codes.shape[1] * 8
    flat = faiss.IndexBinaryFlat(dim)
    flat.add(codes[med])
    if index_bits == 0:
        return flat.search(codes, 1)[1][:, 0].astype(np.int64)
    index = faiss.IndexBinaryHash(dim, int(index_bits))
    index.nflip = int(radius)
    index.add(codes[med])
    best = index.search(codes, 1)[1][:, 0].astype(np.int64)
    miss = best < 0
    if miss.any():  # no medoid in any probed bucket: exact scan for those rows
        best[miss] = flat.search(codes[miss], 1)[1][:, 0]
    return best


def _cluster_sums(assign: np.ndarray, bits: np.ndarray, k: int) -> np.ndarray:
    """``[k, bits]``: the number of ones at each bit in each cluster (one sparse matrix product)."""
    from scipy.sparse import csr_matrix

    member = csr_matrix((np.ones(len(assign), dtype=np.float32), (assign, np.arange(len(assign)))),
                        shape=(k, len(assign)))
    return np.asarray(member @ bits)


def hamming_kmedoids(sig: np.ndarray, k: int, iters: int = 3, seed: int = 0, index_bits: int = 9,
                     radius: int = 2) -> Tuple[np.ndarray, np.ndarray]:
    """``(medoid row ids [k], assignment [n] in 0..k-1)`` of k-medoids on boolean signatures."""
    n = len(sig)
    k = _check_size(k, n)
    if not 0 <= index_bits <= min(sig.shape[1], 24):
        raise ConfigError(f"index_bits must be in [0, {min(sig.shape[1], 24)}], got {index_bits}")
    rng = np.random.default_rng(seed)
    med = np.sort(rng.choice(n, k, replace=False))
    sig = sig[:, rng.permutation(sig.shape[1])]  # the index keys on the first bits: make them a random sample
    words = pack_bits(sig)
    bits = sig.astype(np.float32)
    assign = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        assign = _assign(words, med, index_bits, radius)
        assign[med] = np.arange(k)
        counts = np.bincount(assign, minlength=k).astype(np.float32)
        ones = _cluster_sums(assign, bits, k)
        cost = (bits * (counts[assign, None] - 2 * ones[assign])).sum(1)  # + sum_b c_b, constant per cluster
        order = np.lexsort((cost, assign))
        first = np.searchsorted(assign[order], np.arange(k))
        med = order[first]
    assign = _assign(words, med, index_bits, radius)
    assign[med] = np.arange(k)
    return med, assign


def raw_kmedoids(x: np.ndarray, k: int, iters: int = 3, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The baseline: alternating k-medoids on raw features (full assignment; exact in-cluster medoid update)."""
    n = len(x)
    k = _check_size(k, n)
    med = np.sort(np.random.default_rng(seed).choice(n, k, replace=False))
    sq = (x * x).sum(1)
    x32 = np.ascontiguousarray(x, dtype=np.float32)

    def assign_to(med: np.ndarray) -> np.ndarray:  # faiss exact search, as HaCore's assignment uses faiss too
        import faiss

        index = faiss.IndexFlatL2(x.shape[1])
        index.add(x32[med])
        a = index.search(x32, 1)[1][:, 0].astype(np.int64)
        a[med] = np.arange(k)
        return a

    assign = assign_to(med)
    for _ in range(iters):
        new = med.copy()
        for c in range(k):
            members = np.flatnonzero(assign == c)
            xm = x[members]
            d = np.sqrt(np.maximum(sq[members][:, None] + sq[members][None, :] - 2 * xm @ xm.T, 0)).sum(1)
            new[c] = members[d.argmin()]
        med = new
        assign = assign_to(med)
    return med, assign


def _per_class(labels: np.ndarray, size: int, fit, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    classes, counts = np.unique(labels, return_counts=True)
    ks = np.maximum(1, np.round(size * counts / counts.sum()).astype(int))
    ks = np.minimum(ks, counts)
    while ks.sum() > size:
        ks[np.argmax(ks)] -= 1
    while ks.sum() < size:
        ks[np.argmax(counts - ks)] += 1
    ids, weights = [], []
    for c, kc in zip(classes, ks):
        rows = np.flatnonzero(labels == c)
        med, assign = fit(rows, int(kc), seed + int(kc))
        ids.append(rows[med])
        weights.append(np.bincount(assign, minlength=int(kc)))
    return np.concatenate(ids), np.concatenate(weights).astype(np.float64)


def hacore_coreset(blocks: Sequence, labels, size: int, bits: int = 64, iters: int = 3, seed: int = 0,
                   index_bits: int = 9, radius: int = 2) -> Coreset:
    """HaCore: per-class Hamming k-medoids on the clients' SimHash signatures; ``size`` medoids in all."""
    start = time.perf_counter()
    xs = check_parties(blocks)
    y = np.asarray(labels)
    _check_size(size, len(y))
    if y.shape != (len(xs[0]),):
        raise ConfigError(f"labels must have shape ({len(xs[0])},), got {y.shape}")
    sig = simhash_signatures(xs, bits, seed)
    ids, w = _per_class(y, size, lambda rows, k, s: hamming_kmedoids(sig[rows], k, iters, s, index_bits, radius),
                        seed)
    return Coreset(ids, w, time.perf_counter() - start)


def raw_kmedoids_coreset(blocks: Sequence, labels, size: int, iters: int = 3, seed: int = 0) -> Coreset:
    """The baseline coreset: per-class alternating k-medoids on the concatenated raw features."""
    start = time.perf_counter()
    x = np.concatenate(check_parties(blocks), axis=1)
    y = np.asarray(labels)
    _check_size(size, len(y))
    ids, w = _per_class(y, size, lambda rows, k, s: raw_kmedoids(x[rows], k, iters, s), seed)
    return Coreset(ids, w, time.perf_counter() - start)
