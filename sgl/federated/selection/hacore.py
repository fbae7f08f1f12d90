"""HaCore: a weighted coreset from LSH bit signatures, clustered per class in Hamming space.

**Signatures.** Client ``p`` centres its columns and computes SimHash bits ``1[x^T r > 0]`` for its own
Gaussian hyperplanes ``r``; the total bit budget is split between clients in proportion to their
mean centred row norm (at least one bit each). For two rows at angle ``θ`` one bit differs with
probability ``θ / π``, so the Hamming distance of the concatenated signature grows with the angular
distance. :func:`hacore_coreset` adds a random offset to every hyperplane, ``1[x^T r + s r_0 > 0]``
(``s`` = the client's mean centred row norm, ``offset=0.5``; chosen on validation splits, see
``benchmarks/bench_fed_select.py``): plain SimHash cannot tell rows of one direction and different
norms apart, and a one-column client would give it only the sign. Only the bits
(``ceil(bits / 64)`` words per row) leave a client; each computes them in one compiled pass
(:mod:`sgl.federated.selection.signature_kernels`).

**Hamming k-center** (the default, ``method="kcenter"``; per class, ``k_c = round(k n_c / n)``): farthest-first
centres on the class's distinct signatures, each row weighted to its nearest centre
(:mod:`sgl.federated.selection.kcenter_kernels`). It covers each class's boundary as well as its middle; on
validation splits of six real sets it lost 0.37 points on average against k-medoids' 0.60 (docs/federated.md).

**Hamming k-medoids** (``method="kmedoids"``, the paper's rule; per class, a few alternating rounds), compiled loops
over the packed words (:mod:`sgl.federated.selection.hamming_kernels`; every class in one call, one thread:
at coreset sizes waking threads costs more than it saves on a shared machine):

- *assignment*, once per distinct signature (a medoid's own signature without a search), either by an
  exact popcount scan (vectorised; after the first round a row whose medoid stayed only compares the
  medoids that moved) or through HaCore's inverted index: each medoid is filed under the key made of
  ``index_bits`` signature bits (the most balanced ones), and a row probes every key within Hamming
  radius ``radius`` of its own and takes the nearest medoid found (the exact scan for rows that find
  none). ``index_bits=None`` lets a cost model pick the scan or 9 to 16 key bits; ``0`` is the scan;
- *medoid update* by bit counting: in a cluster of ``n`` rows with ``c_b`` ones at bit ``b``, a row's
  total Hamming distance to the cluster is ``sum_b c_b + sum_b x_b (n - 2 c_b)``, so every row's cost
  is one dot product, ``O(n · bits)`` instead of ``O(n^2)``.

The centres (or medoids), weighted by their cluster sizes, are the coreset. :func:`raw_kmedoids_coreset` is the
baseline: the same alternating k-medoids (same initial medoids, same rounds) on the raw features; both
take the per-class plan and initial medoids from :func:`initial_medoids`.

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
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError
from sgl.federated.selection.hamming_kernels import (
    auto_index_bits, coreset_classes, draw_initial, flip_masks, nearest_probe, nearest_scan,
)
from sgl.federated.selection.kcenter_kernels import kcenter_classes
from sgl.federated.selection.knn import check_parties
from sgl.federated.selection.raw_kmedoids import raw_kmedoids as _raw_kmedoids
from sgl.federated.selection.signature_kernels import client_stats, simhash_into

__all__ = ["Coreset", "allocate_bits", "bits_per_client", "client_planes", "cluster_signatures", "simhash_signatures",
           "simhash_words", "pack_bits", "hamming",
           "hamming_kmedoids", "raw_kmedoids", "initial_medoids", "hacore_coreset", "raw_kmedoids_coreset"]


@dataclass
class Coreset:
    """Row ids of the medoids, their weights (cluster sizes), and the seconds spent building it."""

    ids: np.ndarray
    weights: np.ndarray
    seconds: float


def bits_per_client(norms: Sequence[float], bits: int) -> List[int]:
    """Bits per client from the clients' mean centred row norms (largest remainders, at least 1 each)."""
    if bits < len(norms):
        raise ConfigError(f"bits={bits} cannot give each of the {len(norms)} clients a bit; raise bits")
    w = np.asarray(norms, dtype=np.float64) + 1e-12
    share = (bits - len(w)) * w / w.sum()
    out = np.floor(share).astype(int) + 1
    for i in np.argsort(-(share - np.floor(share)))[: bits - out.sum()]:
        out[i] += 1
    return out.tolist()


def allocate_bits(blocks: Sequence[np.ndarray], bits: int) -> List[int]:
    """Bits per client in proportion to its mean centred row norm (largest remainders, at least 1 each)."""
    return bits_per_client([client_stats(np.asarray(b, dtype=np.float64))[1] for b in blocks], bits)


def _check_offset(offset: float) -> None:
    if offset < 0 or not np.isfinite(offset):
        raise ConfigError(f"offset must be a finite number >= 0, got {offset!r}")


def client_planes(d: int, mean: np.ndarray, norm: float, b: int, seed: int, client: int,
                  offset: float) -> Tuple[np.ndarray, np.ndarray]:
    """Client ``client``'s ``b`` hyperplanes ``[b, d]`` and thresholds ``[b]``, from its own stream
    ``default_rng([seed, client])`` (they never leave it): bit ``t`` is ``1[x . rt[t] > shift[t]]``."""
    rng = np.random.default_rng([seed, client])
    rt = rng.normal(size=(b, d))
    shift = rt @ mean  # centring folds into the threshold: (x - m) . r > 0  <=>  x . r > m . r
    if offset > 0:
        shift -= offset * norm * rng.normal(size=b)
    return rt, shift


def _signature_words(blocks: Sequence[np.ndarray], bits: int, seed: int, offset: float) -> np.ndarray:
    stats = [client_stats(x) for x in blocks]  # each client: its column means and mean centred row norm
    words = np.zeros((len(blocks[0]), -(-bits // 64)), dtype=np.uint64)
    first = 0
    for p, (x, (m, norm), b) in enumerate(zip(blocks, stats, bits_per_client([s[1] for s in stats], bits))):
        rt, shift = client_planes(x.shape[1], m, norm, b, seed, p, offset)
        simhash_into(x, rt, shift, first, words)
        first += b
    return words


def simhash_words(blocks: Sequence[np.ndarray], bits: int, seed: int = 0, offset: float = 0.0) -> np.ndarray:
    """``uint64 [n, ceil(bits / 64)]``: the signatures of :func:`simhash_signatures`, packed as they leave
    the clients (bit ``j`` of a row is bit ``j % 64`` of word ``j // 64``), computed in one pass per client."""
    _check_offset(offset)
    return _signature_words([np.ascontiguousarray(b, dtype=np.float64) for b in blocks], bits, seed, offset)


def simhash_signatures(blocks: Sequence[np.ndarray], bits: int, seed: int = 0, offset: float = 0.0) -> np.ndarray:
    """``bool [n, bits]``: each client's SimHash bits ``1[x^T r + offset · s · r_0 > 0]`` of its centred columns
    ``x`` (``s`` = the client's mean centred row norm, ``r_0 ~ N(0, 1)`` per bit), concatenated.

    ``offset = 0`` is plain SimHash (angles only). ``offset > 0`` hashes the rows lifted by a constant
    coordinate, so a bit is a random hyperplane with a random offset: it also separates rows of the same
    direction and different norms, which plain SimHash cannot (a one-column client gives it one bit's
    worth of information, the sign)."""
    words = simhash_words(blocks, bits, seed, offset)
    return np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, :bits].astype(bool)


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


def _check_labels(labels, n: int, size: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},), one per row, got {y.shape}")
    _check_size(size, n)
    return y


def _assign(words: np.ndarray, med: np.ndarray, index_bits: int, radius: int,
            key_pos: Optional[np.ndarray] = None) -> np.ndarray:
    """Nearest medoid (position in ``med``) of every row: the inverted index (key = the signature bits at
    ``key_pos``, by default the first ``index_bits``, probed within Hamming ``radius``; an exact scan for
    rows whose probed buckets are all empty), or an exact popcount scan when ``index_bits == 0``."""
    med_words = np.ascontiguousarray(words[med])
    if index_bits == 0:
        return nearest_scan(words, med_words)[0]
    if key_pos is None:
        key_pos = np.arange(index_bits, dtype=np.int64)
    return nearest_probe(words, med_words, np.asarray(key_pos, dtype=np.int64), flip_masks(index_bits, radius))[0]


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
    """The cost model's key bits (:func:`sgl.federated.selection.hamming_kernels.auto_index_bits`)."""
    return int(auto_index_bits(k, distinct, nbits))


def _key_bits(bits: np.ndarray, index_bits: int, rng: np.random.Generator) -> np.ndarray:
    """The ``index_bits`` signature bits whose share of ones is nearest 1/2 (random order among ties): the
    keys then spread the medoids over the buckets (random offsets make some bits nearly constant)."""
    order = rng.permutation(bits.shape[1])
    balance = np.abs(2 * bits.sum(0, dtype=np.int64)[order] - len(bits))
    return np.sort(order[np.argsort(balance, kind="stable")[:index_bits]]).astype(np.int64)


@lru_cache(maxsize=32)
def _flip_table(nbits: int, index_bits: Optional[int], radius: int) -> Tuple[np.ndarray, np.ndarray]:
    """``flip_masks(b, radius)`` for every key width ``b`` the run may use, padded into one table."""
    widths = [index_bits] if index_bits is not None else [0] + list(range(min(9, nbits), min(nbits, 16) + 1))
    masks = {b: flip_masks(b, radius) for b in widths}
    table = np.zeros((max(widths) + 1, max(len(m) for m in masks.values())), dtype=np.int64)
    count = np.zeros(max(widths) + 1, dtype=np.int64)
    for b, m in masks.items():
        table[b, :len(m)], count[b] = m, len(m)
    table.flags.writeable = count.flags.writeable = False
    return table, count


def _kmedoids_words(words: np.ndarray, nbits: int, order: np.ndarray, starts: np.ndarray, ks: np.ndarray,
                    init: np.ndarray, iters: int, index_bits: Optional[int], radius: int,
                    perm: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    table, count = _flip_table(int(nbits), None if index_bits is None else int(index_bits), int(radius))
    return coreset_classes(words, int(nbits), order, starts, ks, init, int(iters),
                           -1 if index_bits is None else int(index_bits), table, count, perm)


def hamming_kmedoids(sig: np.ndarray, k: int, iters: int = 3, seed: int = 0, index_bits: Optional[int] = 9,
                     radius: int = 2) -> Tuple[np.ndarray, np.ndarray]:
    """``(medoid row ids [k], assignment [n] in 0..k-1)`` of k-medoids on boolean signatures ``[n, bits]``
    (initial medoids ``rng.choice(n, k)``, then the tie order of the key bits ``rng.permutation(bits)``)."""
    sig = np.asarray(sig, dtype=bool)
    n, nbits = sig.shape
    k = _check_size(k, n)
    _check_index_bits(index_bits, nbits)
    _check_rounds(iters, radius)
    rng = np.random.default_rng(seed)
    init = np.sort(rng.choice(n, k, replace=False)).astype(np.int64)
    perm = rng.permutation(nbits).astype(np.int64)
    return _kmedoids_words(pack_bits(sig), nbits, np.arange(n, dtype=np.int64), np.array([0, n], dtype=np.int64),
                           np.array([k], dtype=np.int64), init, iters, index_bits, radius, perm)


def raw_kmedoids(x: np.ndarray, k: int, iters: int = 3, seed: int = 0,
                 init: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The baseline: alternating k-medoids on raw features (full assignment; exact in-cluster medoid update,
    compiled as HaCore's rounds are: :mod:`sgl.federated.selection.raw_kmedoids`)."""
    return _raw_kmedoids(x, _check_size(k, len(x)), iters, seed, init)


def _class_codes(y: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(class code of every row in 0..C-1 (sorted label order), rows per class)``; integer labels of a
    small range by counting (``O(n)``), others through ``np.unique``."""
    if y.dtype.kind in "iub" and len(y):
        lo, hi = int(y.min()), int(y.max())
        if hi - lo <= 4 * len(y) + 1024:
            counts = np.bincount((y - lo).astype(np.int64), minlength=hi - lo + 1)
            present = counts > 0
            return (np.cumsum(present) - 1)[y - lo], counts[present]
    _, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    return codes.reshape(-1), counts


def initial_medoids(labels: np.ndarray, size: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                             np.ndarray]:
    """The per-class plan both coresets share: ``(order, starts, ks, init)``. Class ``c`` (in sorted label
    order) holds the rows ``order[starts[c]:starts[c + 1]]`` (ascending) and gets ``ks[c] = round(size ·
    n_c / n)`` medoids (at least 1, at most ``n_c``, ``size`` in all); its initial medoids are the positions
    ``init[sum(ks[:c]):sum(ks[:c + 1])]`` into its rows (ascending), ``k_c`` of ``n_c`` drawn uniformly
    without replacement (:func:`sgl.federated.selection.hamming_kernels.draw_initial`).

    Example:
        >>> order, starts, ks, init = initial_medoids(np.array([1, 0, 1, 1, 0, 1]), 3, seed=0)
        >>> order.tolist(), starts.tolist(), ks.tolist(), len(init)
        ([1, 4, 0, 2, 3, 5], [0, 2, 6], [1, 2], 3)
    """
    codes, counts = _class_codes(np.asarray(labels))
    if size < len(counts):
        raise ConfigError(f"a coreset of {size} rows cannot give each of the {len(counts)} classes a medoid; "
                          f"choose size >= {len(counts)}")
    ks = np.minimum(np.maximum(1, np.round(size * counts / counts.sum()).astype(np.int64)), counts)
    while ks.sum() > size:
        ks[np.argmax(ks)] -= 1
    while ks.sum() < size:
        ks[np.argmax(counts - ks)] += 1
    small = codes.astype(np.uint16) if len(counts) < 1 << 16 else codes  # stable sort of 16-bit ints: a radix sort
    order = np.argsort(small, kind="stable").astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return order, starts, ks, draw_initial(starts, ks, seed)


_METHODS = ("kcenter", "kmedoids")


def check_method(method: str) -> None:
    if method not in _METHODS:
        raise ConfigError(f"method must be one of {_METHODS}, got {method!r}")


def cluster_signatures(words: np.ndarray, bits: int, order: np.ndarray, starts: np.ndarray, ks: np.ndarray,
                       init: np.ndarray, seed: int, method: str = "kcenter", iters: int = 3,
                       index_bits: Optional[int] = None, radius: int = 2) -> Tuple[np.ndarray, np.ndarray]:
    """The label owner's half of HaCore: ``(row ids [size], cluster of every row)`` from the packed
    signatures and the per-class plan of :func:`initial_medoids`."""
    if method == "kcenter":
        return kcenter_classes(words, order, starts, ks, init)
    perm = np.random.default_rng(seed).permutation(bits).astype(np.int64)
    return _kmedoids_words(words, bits, order, starts, ks, init, iters, index_bits, radius, perm)


def hacore_coreset(blocks: Sequence, labels, size: int, bits: int = 128, iters: int = 3, seed: int = 0,
                   index_bits: Optional[int] = None, radius: int = 2, offset: float = 0.5,
                   method: str = "kcenter") -> Coreset:
    """HaCore: a per-class coreset in Hamming space of the clients' SimHash signatures; ``size`` rows in all.

    ``method="kcenter"`` (the default): farthest-first centres, each weighted by the rows nearest to it
    (:mod:`sgl.federated.selection.kcenter_kernels`); ``"kmedoids"``: the paper's Hamming k-medoids,
    ``iters`` alternating rounds, ``index_bits`` key bits of the inverted index (``None``: a cost model
    picks the exact scan or 9 to 16 bits; ``0``: the exact scan), probed within Hamming ``radius``.
    ``bits`` signature bits in all (split across clients); ``offset`` scales the hyperplanes' random
    offsets (``0``: plain SimHash). The defaults (k-center, 128 bits, offset 0.5) were chosen on
    validation splits (``benchmarks/bench_fed_select.py --hacore-validation``). Returns the rows' ids and
    their cluster sizes as weights."""
    start = time.perf_counter()
    check_method(method)
    xs = check_parties(blocks)
    y = _check_labels(labels, len(xs[0]), size)
    _check_index_bits(index_bits, bits)
    _check_rounds(iters, radius)
    _check_offset(offset)
    order, starts, ks, init = initial_medoids(y, size, seed)
    words = _signature_words(xs, bits, seed, offset)
    med, cluster = cluster_signatures(words, bits, order, starts, ks, init, seed, method, iters, index_bits, radius)
    return Coreset(med, np.bincount(cluster, minlength=len(med)).astype(np.float64), time.perf_counter() - start)


def raw_kmedoids_coreset(blocks: Sequence, labels, size: int, iters: int = 3, seed: int = 0) -> Coreset:
    """The baseline coreset: per-class alternating k-medoids on the concatenated raw features, from the
    initial medoids HaCore starts from (:func:`initial_medoids`)."""
    start = time.perf_counter()
    x = np.concatenate(check_parties(blocks), axis=1)
    y = _check_labels(labels, len(x), size)
    order, starts, ks, init = initial_medoids(y, size, seed)
    offs = np.concatenate([[0], np.cumsum(ks)])
    ids, weights = [], []
    for c, k in enumerate(ks):
        rows = order[starts[c]:starts[c + 1]]
        med, assign = _raw_kmedoids(x[rows], int(k), iters, seed, init[offs[c]:offs[c + 1]])
        ids.append(rows[med])
        weights.append(np.bincount(assign, minlength=int(k)))
    return Coreset(np.concatenate(ids), np.concatenate(weights).astype(np.float64), time.perf_counter() - start)
