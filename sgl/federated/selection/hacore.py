"""HaCore: a weighted coreset from LSH bit signatures and k-medoids in Hamming space.

**Signatures.** Client ``p`` centres its columns and computes SimHash bits ``1[x^T r > 0]`` for its own
Gaussian hyperplanes ``r``; the total bit budget is split between clients in proportion to their
mean centred row norm (at least one bit each). For two rows at angle ``θ`` one bit differs with
probability ``θ / π``, so the Hamming distance of the concatenated signature grows with the angular
distance. :func:`hacore_coreset` adds a random offset to every hyperplane, ``1[x^T r + s r_0 > 0]``
(``s`` = the client's mean centred row norm, ``offset=1.0``; chosen on validation splits, see
``benchmarks/bench_fed_select.py``): plain SimHash cannot tell rows of one direction and different
norms apart, and a one-column client would give it only the sign. Only the bits
(``ceil(bits / 64)`` words per row) leave a client.

**Hamming k-medoids** (per class, ``k_c = round(k n_c / n)``, a few alternating rounds), compiled loops
over the packed words (:mod:`sgl.federated.selection.hamming_kernels`):

- *assignment* through an inverted index: each medoid is filed under the key made of ``index_bits``
  signature bits (the most balanced ones; 9, or with ``index_bits=None`` 9 to 16 or the exact scan,
  whichever a cost model finds cheapest);
  a row probes every key within Hamming radius ``radius`` of its own key and takes the nearest medoid
  found (exact popcount scan only for rows that find none); ``index_bits=0`` is the exact scan;
- *medoid update* by bit counting: in a cluster of ``n`` rows with ``c_b`` ones at bit ``b``, a row's
  total Hamming distance to the cluster is ``sum_b c_b + sum_b x_b (n - 2 c_b)``, so every row's cost
  is one dot product, ``O(n · bits)`` instead of ``O(n^2)``.

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
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.federated.selection.hamming_kernels import flip_masks, kmedoid_rounds, nearest_probe, nearest_scan
from sgl.federated.selection.knn import check_parties
from sgl.federated.selection.raw_kmedoids import raw_kmedoids as _raw_kmedoids

__all__ = ["Coreset", "allocate_bits", "simhash_signatures", "pack_bits", "hamming", "hamming_kmedoids",
           "raw_kmedoids", "hacore_coreset", "raw_kmedoids_coreset"]


@dataclass
class Coreset:
    """Row ids of the medoids, their weights (cluster sizes), and the seconds spent building it."""

    ids: np.ndarray
    weights: np.ndarray
    seconds: float


def _row_norm_mean(centred: np.ndarray) -> float:
    return float(np.sqrt(np.einsum("ij,ij->i", centred, centred)).mean())


def _allocate(weights: np.ndarray, bits: int) -> List[int]:
    if bits < len(weights):
        raise ConfigError(f"bits={bits} cannot give each of the {len(weights)} clients a bit; raise bits")
    w = np.asarray(weights, dtype=np.float64) + 1e-12
    share = (bits - len(w)) * w / w.sum()
    out = np.floor(share).astype(int) + 1
    for i in np.argsort(-(share - np.floor(share)))[: bits - out.sum()]:
        out[i] += 1
    return out.tolist()


def allocate_bits(blocks: Sequence[np.ndarray], bits: int) -> List[int]:
    """Bits per client in proportion to its mean centred row norm (largest remainders, at least 1 each)."""
    return _allocate(np.array([_row_norm_mean(b - b.mean(0)) for b in blocks]), bits)


def _project(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``x @ r`` in row chunks small enough for OpenBLAS to run each on one thread: at coreset sizes the
    product takes ~0.1 ms, and waking BLAS threads on a loaded machine costs up to 100x that."""
    rows = max(1, 200_000 // max(1, x.shape[1] * r.shape[1]))
    if len(x) <= rows:
        return x @ r
    return np.concatenate([x[i:i + rows] @ r for i in range(0, len(x), rows)])


def simhash_signatures(blocks: Sequence[np.ndarray], bits: int, seed: int = 0, offset: float = 0.0) -> np.ndarray:
    """``bool [n, bits]``: each client's SimHash bits ``1[x^T r + offset · s · r_0 > 0]`` of its centred columns
    ``x`` (``s`` = the client's mean centred row norm, ``r_0 ~ N(0, 1)`` per bit), concatenated.

    ``offset = 0`` is plain SimHash (angles only). ``offset > 0`` hashes the rows lifted by a constant
    coordinate, so a bit is a random hyperplane with a random offset: it also separates rows of the same
    direction and different norms, which plain SimHash cannot (a one-column client gives it one bit's
    worth of information, the sign)."""
    if offset < 0 or not np.isfinite(offset):
        raise ConfigError(f"offset must be a finite number >= 0, got {offset!r}")
    # centring folds into the projection, (x - m) r = x r - m r, and the norms, |x - m|^2 = |x|^2 - 2 x.m + |m|^2:
    # no centred copy of the data is made
    means = [x.mean(0) for x in blocks]
    norms = np.array([np.sqrt(np.maximum(np.einsum("ij,ij->i", x, x) - 2 * _project(x, m[:, None])[:, 0] + m @ m,
                                         0)).mean() for x, m in zip(blocks, means)])
    parts = []
    for p, (x, m, b) in enumerate(zip(blocks, means, _allocate(norms, bits))):
        rng = np.random.default_rng(seed * 1009 + p)
        r = rng.normal(size=(x.shape[1], b))
        shift = m @ r
        if offset > 0:
            shift -= offset * norms[p] * rng.normal(size=b)
        parts.append(_project(x, r) > shift)
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


def _nearest(words: np.ndarray, med_words: np.ndarray, index_bits: int, radius: int,
             key_pos: np.ndarray) -> np.ndarray:
    if index_bits == 0:
        return nearest_scan(words, med_words)[0]
    return nearest_probe(words, med_words, key_pos, flip_masks(index_bits, radius))[0]


def _assign(words: np.ndarray, med: np.ndarray, index_bits: int, radius: int,
            key_pos: Optional[np.ndarray] = None) -> np.ndarray:
    """Nearest medoid (position in ``med``) of every row: the inverted index (key = the signature bits at
    ``key_pos``, by default the first ``index_bits``, probed within Hamming ``radius``; an exact scan for
    rows whose probed buckets are all empty), or an exact popcount scan when ``index_bits == 0``."""
    if key_pos is None:
        key_pos = np.arange(index_bits, dtype=np.int64)
    return _nearest(words, np.ascontiguousarray(words[med]), index_bits, radius, np.asarray(key_pos, dtype=np.int64))


def _distinct(words: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``words`` and each row's index into them: a row's nearest medoid depends on its
    words only, so rows with one signature (common in low-dimensional data) are assigned once."""
    if words.shape[1] == 1:
        uniq, inv = np.unique(words[:, 0], return_inverse=True)
        return uniq[:, None], inv.reshape(-1)
    rows = np.ascontiguousarray(words).view(np.dtype((np.void, words.dtype.itemsize * words.shape[1])))[:, 0]
    uniq, inv = np.unique(rows, return_inverse=True)
    return np.ascontiguousarray(uniq.view(words.dtype).reshape(-1, words.shape[1])), inv.reshape(-1)


def _check_index_bits(index_bits: Optional[int], nbits: int) -> None:
    if index_bits is None:
        return
    if isinstance(index_bits, bool) or not isinstance(index_bits, (int, np.integer)) \
            or not 0 <= index_bits <= min(nbits, 24):
        raise ConfigError(f"index_bits must be None (auto) or an integer in [0, {min(nbits, 24)}], got {index_bits!r}")


def _check_rounds(iters: int, radius: int) -> None:
    for name, v in (("iters", iters), ("radius", radius)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ConfigError(f"{name} must be an integer >= 0, got {v!r}")


def _auto_index_bits(k: int, distinct: int, nbits: int) -> int:
    """Key bits by a cost model, in popcount comparisons: an exact scan costs ``distinct · k``; a probe
    round with ``b`` key bits visits ``min(distinct, 2^b) · F(b)`` buckets (``F(b) = 1 + b + b(b-1)/2`` keys
    within radius 2, about 7 comparisons each, measured) and compares ``distinct · k · F(b) / 2^b``
    medoids. 0 (the scan) when it is cheapest, else HaCore's 9 bits or more, up to 16."""
    best, best_cost = 0, float(distinct) * k
    for b in range(min(9, nbits), min(nbits, 16) + 1):
        f = 1 + b + b * (b - 1) / 2
        cost = 7 * min(distinct, 2 ** b) * f + distinct * k * f / 2 ** b
        if cost < best_cost:
            best, best_cost = b, cost
    return best


def _key_bits(bits: np.ndarray, index_bits: int, rng: np.random.Generator) -> np.ndarray:
    """The ``index_bits`` signature bits whose share of ones is nearest 1/2 (random order among ties): the
    keys then spread the medoids over the buckets (random offsets make some bits nearly constant)."""
    order = rng.permutation(bits.shape[1])
    balance = np.abs(2 * bits.sum(0, dtype=np.int64)[order] - len(bits))
    return np.sort(order[np.argsort(balance, kind="stable")[:index_bits]]).astype(np.int64)


def _kmedoids_words(words: np.ndarray, bits: np.ndarray, k: int, iters: int, seed: int,
                    index_bits: Optional[int], radius: int) -> Tuple[np.ndarray, np.ndarray]:
    """k-medoids on packed ``words`` (assignment) and the same signatures as ``uint8`` 0/1 ``bits`` (update)."""
    n, nbits = bits.shape
    rng = np.random.default_rng(seed)
    med = np.sort(rng.choice(n, k, replace=False))  # the same draw as raw_kmedoids: same initial medoids
    uniq, inv = _distinct(np.ascontiguousarray(words))
    if index_bits is None:
        index_bits = _auto_index_bits(k, len(uniq), nbits)
    key_pos = _key_bits(bits, index_bits, rng) if index_bits else np.zeros(0, dtype=np.int64)
    return kmedoid_rounds(uniq, inv, np.ascontiguousarray(bits), med.astype(np.int64), int(iters), key_pos,
                          flip_masks(index_bits, radius))


def hamming_kmedoids(sig: np.ndarray, k: int, iters: int = 3, seed: int = 0, index_bits: Optional[int] = 9,
                     radius: int = 2) -> Tuple[np.ndarray, np.ndarray]:
    """``(medoid row ids [k], assignment [n] in 0..k-1)`` of k-medoids on boolean signatures ``[n, bits]``."""
    sig = np.asarray(sig, dtype=bool)
    k = _check_size(k, len(sig))
    _check_index_bits(index_bits, sig.shape[1])
    _check_rounds(iters, radius)
    return _kmedoids_words(pack_bits(sig), sig.view(np.uint8), k, iters, seed, index_bits, radius)


def raw_kmedoids(x: np.ndarray, k: int, iters: int = 3, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The baseline: alternating k-medoids on raw features (full assignment; exact in-cluster medoid update,
    compiled as HaCore's rounds are: :mod:`sgl.federated.selection.raw_kmedoids`)."""
    return _raw_kmedoids(x, _check_size(k, len(x)), iters, seed)


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
                   index_bits: Optional[int] = None, radius: int = 2, offset: float = 1.0) -> Coreset:
    """HaCore: per-class Hamming k-medoids on the clients' SimHash signatures; ``size`` medoids in all.

    ``bits`` signature bits in all (split across clients), ``iters`` alternating rounds, ``index_bits``
    key bits of the inverted index (``None``: a cost model picks the exact scan or 9 to 16 bits; ``0``:
    the exact scan), probed within Hamming ``radius``; ``offset`` scales the hyperplanes' random offsets
    (``0``: plain SimHash). Returns the medoids' row ids and their cluster sizes as weights."""
    start = time.perf_counter()
    xs = check_parties(blocks)
    y = np.asarray(labels)
    _check_size(size, len(y))
    if y.shape != (len(xs[0]),):
        raise ConfigError(f"labels must have shape ({len(xs[0])},), got {y.shape}")
    _check_index_bits(index_bits, bits)
    _check_rounds(iters, radius)
    sig = simhash_signatures(xs, bits, seed, offset)
    words, sig = pack_bits(sig), sig.view(np.uint8)
    ids, w = _per_class(y, size, lambda rows, k, s: _kmedoids_words(words[rows], sig[rows], k, iters, s, index_bits,
                                                                    radius), seed)
    return Coreset(ids, w, time.perf_counter() - start)


def raw_kmedoids_coreset(blocks: Sequence, labels, size: int, iters: int = 3, seed: int = 0) -> Coreset:
    """The baseline coreset: per-class alternating k-medoids on the concatenated raw features."""
    start = time.perf_counter()
    x = np.concatenate(check_parties(blocks), axis=1)
    y = np.asarray(labels)
    _check_size(size, len(y))
    ids, w = _per_class(y, size, lambda rows, k, s: raw_kmedoids(x[rows], k, iters, s), seed)
    return Coreset(ids, w, time.perf_counter() - start)
