"""The bit layout of a VEND code: K 64-bit words per vertex, and vectorised field access.

A vertex's code is ``P = 64 K`` bits; bit ``i`` is bit ``i % 64`` of word ``i // 64`` (least
significant first), and a field of ``w`` bits at offset ``o`` holds bits ``o .. o + w - 1``.
With ``VB = bitlen(num_nodes - 1)`` bits per vertex id there are two kinds of code:

* **decodable** (degree ``<= max_exact``): bit 0 = 1, a count of ``CB`` bits, then the sorted
  neighbour ids, ``VB`` bits each: the code *is* the neighbour list;
* **windowed** (higher degree): bit 0 = 0, a 2-bit block type (``FULL_HASH``, ``LEFT``,
  ``MIDDLE``, ``RIGHT``), the window size ``b`` in ``LB`` bits, then (``hashes="optimal"`` only) the
  bitmap's hash count ``h - 1`` in ``HB = 4`` bits, ``b`` consecutive ids of the sorted neighbour
  list, and a bitmap over the ``H = P - 3 - LB - HB - b VB`` remaining bits in which every other
  neighbour ``y`` sets the bits :func:`bitmap_slots` ``(y, H, i)``, ``i < h``. ``hashes="one"`` is the
  paper's layout: ``HB = 0`` and ``h = 1`` (the bit :func:`bitmap_slot` ``(y, H)``).

Every field is at most 62 bits wide, so it spans at most two words; :func:`read_bits` /
:func:`get_field` and :func:`or_field` read and write one field for many (row, offset) pairs at once.

    >>> layout = CodeLayout(num_nodes=4039, k=2)
    >>> layout.bits, layout.id_bits, layout.max_exact, layout.max_window
    (128, 12, 10, 10)
    >>> CodeLayout(num_nodes=4039, k=2, hashes="optimal").window_base - layout.window_base
    4
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError

__all__ = ["CodeLayout", "FULL_HASH", "LEFT", "MIDDLE", "RIGHT", "get_field", "read_bits", "or_field", "hash_ids", "bitmap_slot",
           "bitmap_slots", "hash_keys", "HEADER_BITS", "HASH_CHOICES", "MAX_HASHES"]

#: block types of a windowed code (bits 1-2)
FULL_HASH, LEFT, MIDDLE, RIGHT = 0, 1, 2, 3
#: bit 0 (decodable flag) + the 2-bit block type of a windowed code
HEADER_BITS = 3
#: bitmap variants: the paper's one hash function, or ``h`` per vertex (stored in the code)
HASH_CHOICES = ("one", "optimal")
#: width of the hash-count field of an ``"optimal"`` windowed code (it stores ``h - 1``)
_HASH_COUNT_BITS = 4
MAX_HASHES = 2 ** _HASH_COUNT_BITS
_MAX_ID_BITS = 62
_U64 = np.uint64


@dataclass(frozen=True)
class CodeLayout:
    """Field widths and offsets of the codes for ``num_nodes`` vertices and ``k`` words each;
    ``hashes`` (``"one"`` or ``"optimal"``) is the bitmap variant of a windowed code."""

    num_nodes: int
    k: int
    hashes: str = "one"

    def __post_init__(self) -> None:
        check_int(self.k, "k (machine words per vertex)", minimum=1)
        check_int(self.num_nodes, "num_nodes", minimum=1)
        check_choice(self.hashes, "hashes", HASH_CHOICES)
        if self.id_bits > _MAX_ID_BITS:
            raise ConfigError(f"num_nodes={self.num_nodes} needs {self.id_bits}-bit ids; VEND codes "
                              f"support at most 2^{_MAX_ID_BITS} vertices")

    @property
    def bits(self) -> int:
        """``P = 64 k`` bits per vertex."""
        return 64 * self.k

    @property
    def id_bits(self) -> int:
        """``VB``: bits per stored vertex id."""
        return max(1, (self.num_nodes - 1).bit_length())

    @property
    def count_bits(self) -> int:
        """``CB``: width of a decodable code's neighbour count."""
        return ((self.bits - 1) // self.id_bits).bit_length()

    @property
    def exact_base(self) -> int:
        """Bit offset of a decodable code's first id."""
        return 1 + self.count_bits

    @property
    def max_exact(self) -> int:
        """Largest degree stored exactly (``MAXK``)."""
        return (self.bits - self.exact_base) // self.id_bits

    @property
    def size_bits(self) -> int:
        """``LB``: width of a windowed code's window-size field."""
        return ((self.bits - HEADER_BITS) // self.id_bits).bit_length()

    @property
    def hash_count_bits(self) -> int:
        """``HB``: width of a windowed code's hash-count field (0 for one hash)."""
        return _HASH_COUNT_BITS if self.hashes == "optimal" else 0

    @property
    def hash_count_offset(self) -> int:
        """Bit offset of the hash-count field (``h - 1``)."""
        return HEADER_BITS + self.size_bits

    @property
    def window_base(self) -> int:
        """Bit offset of a windowed code's first window id."""
        return HEADER_BITS + self.size_bits + self.hash_count_bits

    @property
    def max_window(self) -> int:
        """Largest window (ids) a windowed code can hold."""
        return (self.bits - self.window_base) // self.id_bits

    def hash_bits(self, window: np.ndarray) -> np.ndarray:
        """``H``: bitmap bits left beside a window of ``window`` ids."""
        return self.bits - self.window_base - np.asarray(window, dtype=np.int64) * self.id_bits


def hash_ids(ids: np.ndarray, salt: int = 0) -> np.ndarray:
    """A fixed 64-bit mix of vertex ids (the splitmix64 finaliser), as ``uint64``.

    The bitmap hashes ids instead of taking ``id mod H`` so that the neighbours of a vertex,
    often consecutive ids (ego networks, crawl orders), do not fill consecutive bits.
    """
    x = np.asarray(ids, dtype=np.int64).astype(_U64) + _U64((0x9E3779B97F4A7C15 * (salt + 1)) % 2**64)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def hash_keys(ids: np.ndarray):
    """``(h32, step)`` of each id: the top and (odd) bottom halves of :func:`hash_ids`, as ``uint64``."""
    x = hash_ids(ids)
    return x >> _U64(32), (x & _U64(0xFFFFFFFF)) | _U64(1)


def bitmap_slots(keys, buckets, i: int) -> np.ndarray:
    """Bit ``floor(g_i * H / 2^32)`` of hash function ``i``, ``g_i = (h32 + i * step) mod 2^32``.

    ``keys`` is :func:`hash_keys` of the ids (double hashing, Kirsch and Mitzenmacher); ``i = 0``
    is :func:`bitmap_slot`. Every ``g_i`` is a 32-bit value independent of ``H``, so the slots of one
    hash function are monotone in ``g_i`` for every bitmap size, as for one hash.
    """
    high, step = keys
    g = (high + _U64(i) * step) & _U64(0xFFFFFFFF)
    return ((g * np.asarray(buckets, dtype=_U64)) >> _U64(32)).astype(np.int64)


def bitmap_slot(ids: np.ndarray, buckets) -> np.ndarray:
    """The bitmap bit ``floor(h32(id) * H / 2^32)`` of each id in a bitmap of ``buckets`` (``H``) bits.

    ``h32`` is the top half of :func:`hash_ids`. Multiply-shift range reduction instead of
    ``mod H``: the slot is monotone in ``h32`` for every ``H``, so neighbours sorted once by
    ``h32`` stay grouped by slot for every window size the encoder tries.
    """
    high = hash_ids(ids) >> _U64(32)
    return ((high * np.asarray(buckets, dtype=_U64)) >> _U64(32)).astype(np.int64)


def read_bits(words: np.ndarray, start: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """The ``width``-bit fields (``uint64``) at bit ``offsets`` of the codes starting at word ``start``.

    ``words`` must end with one padding word (a field's high part is read from the next word
    unconditionally, which keeps this branch-free); ``offsets + width`` stays inside the code.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    word = start + (offsets >> 6)
    shift = (offsets & 63).astype(_U64)
    value = words[word] >> shift
    if width > 1:
        # shifting by (63 - s) then 1 is a shift by 64 - s that gives 0 for s = 0, as it must
        value |= (words[word + 1] << (_U64(63) - shift)) << _U64(1)
    return value & _U64((1 << width) - 1)


def get_field(words: np.ndarray, k: int, rows: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """:func:`read_bits` for the codes of ``rows`` (row ``r`` = ``words[r*k:(r+1)*k]``), as ``int64``."""
    start = np.asarray(rows, dtype=np.int64) * k
    return read_bits(words, start, np.broadcast_to(offsets, start.shape), int(width)).astype(np.int64)


def or_field(words: np.ndarray, k: int, rows: np.ndarray, offsets: np.ndarray, width, values) -> None:
    """OR ``values`` (each ``< 2**width``) into the fields at ``offsets`` of ``rows``, in place."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return
    width = np.broadcast_to(np.asarray(width, dtype=np.int64), rows.shape)
    values = np.broadcast_to(np.asarray(values, dtype=np.int64), rows.shape).astype(_U64)
    offsets = np.broadcast_to(np.asarray(offsets, dtype=np.int64), rows.shape)
    word, shift = rows * k + (offsets >> 6), (offsets & 63).astype(_U64)
    np.bitwise_or.at(words, word, values << shift)
    spill = shift.astype(np.int64) + width > 64
    if spill.any():
        np.bitwise_or.at(words, word[spill] + 1, values[spill] >> (_U64(64) - shift[spill]))
