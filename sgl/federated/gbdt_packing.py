r"""Fixed-point encoding and polynomial packing of signed integers into one big integer (VF2Boost).

A federated GBDT sums gradients ``g`` and hessians ``h`` under additively homomorphic encryption.
They are encoded as fixed-point integers :math:`q = \mathrm{round}(v\,2^F)` (``F`` fractional
bits). :class:`SlotPacker` puts ``k`` signed integers into slots of ``w`` bits of one integer,

.. math:: P(v_0, \dots, v_{k-1}) = \sum_j v_j\, 2^{j w},

a polynomial in :math:`2^w`. Packing is linear, so the sum of packed values is the packing of the
slot-wise sums, and it decodes exactly as long as every slot's sum stays inside
:math:`(-2^{w-1}, 2^{w-1})`: :meth:`SlotPacker.slot_bits_for` gives the width with that headroom.
Decoding reads balanced digits from the lowest slot up (a negative slot borrows one from the next,
which the decoder gives back), so no offsets are needed for negative gradients. Under Paillier the
same packing is done on ciphertexts by Horner's rule, :math:`c \leftarrow c^{2^w} \cdot c_j`
(:func:`pack_ciphertexts`); the total must stay below ``n / 2`` so that it decodes as a signed
value (:meth:`SlotPacker.for_key`).

Example:
    >>> packer = SlotPacker(slot_bits=8, slots=3)
    >>> a, b = packer.pack([5, -3, 100]), packer.pack([-7, -120, 20])
    >>> packer.unpack(a + b, 3)
    [-2, -123, 120]
    >>> encode_fixed([0.5, -0.25], 4).tolist()
    [8, -4]
"""
from __future__ import annotations

from typing import Callable, List, Sequence

import numpy as np

from sgl.errors import ConfigError

__all__ = ["SlotPacker", "encode_fixed", "decode_fixed", "to_signed", "pack_ciphertexts"]


def encode_fixed(values, frac_bits: int) -> np.ndarray:
    """``round(values * 2**frac_bits)`` as ``int64`` (the caller keeps sums below ``2**62``)."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ConfigError("cannot encode non-finite values (NaN or inf) as fixed point; check the gradients")
    scaled = np.rint(np.ldexp(arr, int(frac_bits)))
    if scaled.size and np.abs(scaled).max() >= 2.0 ** 62:
        raise ConfigError(f"fixed-point values overflow int64 with frac_bits={frac_bits}; lower frac_bits")
    return scaled.astype(np.int64)


def decode_fixed(values, frac_bits: int) -> np.ndarray:
    """The float64 values of fixed-point integers (inverse of :func:`encode_fixed` up to rounding)."""
    return np.ldexp(np.asarray(values, dtype=np.float64), -int(frac_bits))


def to_signed(value: int, modulus: int) -> int:
    """A residue mod ``modulus`` read as a signed integer in ``(-modulus/2, modulus/2]``."""
    value = int(value) % modulus
    return value - modulus if value > modulus // 2 else value


class SlotPacker:
    """``slots`` signed integers of ``slot_bits`` bits each in one Python integer.

    Args:
        slot_bits: width ``w`` of one slot (a slot holds values in ``(-2**(w-1), 2**(w-1))``).
        slots: how many slots one packed integer holds.

    Example:
        >>> SlotPacker.for_key(1024, SlotPacker.slot_bits_for(1000 * 2 ** 32)).slots
        23
    """

    def __init__(self, slot_bits: int, slots: int) -> None:
        if isinstance(slot_bits, bool) or not isinstance(slot_bits, int) or slot_bits < 2:
            raise ConfigError(f"slot_bits must be an integer >= 2, got {slot_bits!r}")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ConfigError(f"slots must be a positive integer, got {slots!r}")
        self.slot_bits, self.slots = slot_bits, slots
        self._base = 1 << slot_bits
        self._half = 1 << (slot_bits - 1)

    @staticmethod
    def slot_bits_for(max_abs_sum: int) -> int:
        """The narrowest slot that holds every signed sum of magnitude at most ``max_abs_sum``."""
        return int(max_abs_sum).bit_length() + 2

    @classmethod
    def for_key(cls, key_bits: int, slot_bits: int) -> "SlotPacker":
        """As many ``slot_bits`` slots as fit below ``n / 2`` of a ``key_bits`` Paillier modulus."""
        slots = (int(key_bits) - 2) // int(slot_bits)
        if slots < 1:
            raise ConfigError(f"a {slot_bits}-bit slot does not fit a {key_bits}-bit key; lower frac_bits "
                              "or use a larger key")
        return cls(int(slot_bits), slots)

    def pack(self, values: Sequence[int]) -> int:
        """:math:`\\sum_j v_j 2^{jw}` of at most ``slots`` signed values, each inside the slot range."""
        if len(values) > self.slots:
            raise ConfigError(f"{len(values)} values do not fit {self.slots} slots")
        out = 0
        for v in reversed(values):
            v = int(v)
            if not -self._half < v < self._half:
                raise ConfigError(f"value {v} does not fit a {self.slot_bits}-bit signed slot")
            out = (out << self.slot_bits) + v
        return out

    def unpack(self, packed: int, count: int) -> List[int]:
        """The ``count`` slot values of ``packed`` (a sum of packings decodes to slot-wise sums)."""
        out = []
        rest = int(packed)
        for _ in range(count):
            digit = rest & (self._base - 1)
            if digit >= self._half:
                digit -= self._base
            out.append(digit)
            rest = (rest - digit) >> self.slot_bits
        if rest != 0:
            raise ConfigError(f"packed value has {rest} left above {count} slots: a slot overflowed its "
                              f"{self.slot_bits} bits (more headroom needed)")
        return out


def pack_ciphertexts(ciphertexts: Sequence, slot_bits: int, shift: Callable, add: Callable):
    """Pack ciphertexts ``c_j`` (of values ``v_j``) into one of :math:`\\sum_j v_j 2^{jw}` by Horner's
    rule; ``shift(c, w)`` multiplies the plaintext by ``2**w`` and ``add`` adds two ciphertexts."""
    if not len(ciphertexts):
        raise ConfigError("nothing to pack")
    acc = ciphertexts[-1]
    for c in reversed(ciphertexts[:-1]):
        acc = add(shift(acc, slot_bits), c)
    return acc
