"""Bytes on the wire: fixed-width bit packing and SketchML's delta-binary key coding.

Everything here is vectorised torch and runs on the device of its input; the results are
``uint8`` tensors that :mod:`sgl.comm` moves as they are.

* :func:`pack_bits` / :func:`unpack_bits` -- non-negative integers below ``2**bits`` packed
  ``bits`` to a value, little-endian within each byte group;
* :func:`encode_keys` / :func:`decode_keys` -- SketchML's key coding: sort the keys, take the
  gaps between neighbours, and write each gap in the fewest whole bytes (1, 2, 4 or 8) with a
  2-bit width flag per key (four flags a byte). Lossless for any int64 keys >= 0.

>>> import torch
>>> packed = pack_bits(torch.tensor([1, 0, 3, 2, 3]), 2)
>>> packed.dtype, packed.numel(), unpack_bits(packed, 2, 5).tolist()
(torch.uint8, 2, [1, 0, 3, 2, 3])
>>> keys = torch.tensor([1000, 3, 70000, 4])
>>> blob, order = encode_keys(keys)
>>> decode_keys(blob, 4).tolist(), order.tolist(), blob.numel()   # 1 flag byte + 1+1+2+4 gap bytes
([3, 4, 1000, 70000], [1, 3, 0, 2], 9)
"""
from __future__ import annotations

from typing import Tuple

import torch

from sgl.errors import CommError, ConfigError

__all__ = ["pack_bits", "unpack_bits", "encode_keys", "decode_keys", "bits_for"]

_WIDTHS = (1, 2, 4, 8)


def bits_for(levels: int) -> int:
    """Bits that hold ``levels`` distinct values (at least 1).

    >>> bits_for(1), bits_for(2), bits_for(32), bits_for(33)
    (1, 1, 5, 6)
    """
    return max(1, int(levels - 1).bit_length())


def pack_bits(values: torch.Tensor, bits: int) -> torch.Tensor:
    """``values`` (ints in ``[0, 2**bits)``) packed ``bits`` per value into ``uint8``."""
    if not 1 <= bits <= 8:
        raise ConfigError(f"pack_bits: bits must be in [1, 8], got {bits}")
    v = values.reshape(-1).to(torch.int64)
    if v.numel() == 0:
        return torch.zeros(0, dtype=torch.uint8, device=values.device)
    if bits == 8:
        return v.to(torch.uint8)
    shifts = torch.arange(bits, device=v.device)
    flat = ((v.unsqueeze(1) >> shifts) & 1).reshape(-1)
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    weights = 1 << torch.arange(8, device=v.device)
    return (flat.reshape(-1, 8) * weights).sum(1).to(torch.uint8)


def unpack_bits(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The ``count`` int64 values that :func:`pack_bits` packed at ``bits`` bits."""
    if packed.numel() * 8 < count * bits:
        raise CommError(f"unpack_bits: {packed.numel()} bytes cannot hold {count} values of {bits} bits; "
                        "the payload is truncated or was built with other parameters")
    if count == 0:
        return torch.zeros(0, dtype=torch.int64, device=packed.device)
    if bits == 8:
        return packed[:count].to(torch.int64)
    shifts = torch.arange(8, device=packed.device)
    flat = ((packed.to(torch.int64).unsqueeze(1) >> shifts) & 1).reshape(-1)[:count * bits]
    weights = 1 << torch.arange(bits, device=packed.device)
    return (flat.reshape(count, bits) * weights).sum(1)


def encode_keys(keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Delta-binary code of ``keys`` (int64 >= 0): the ``uint8`` blob and the sort order used.

    The blob is ``ceil(n / 4)`` flag bytes then each gap in 1, 2, 4 or 8 little-endian bytes;
    ``order`` is the permutation that sorted the keys (so values can follow them).
    """
    keys = keys.reshape(-1).to(torch.int64)
    if keys.numel() and int(keys.min()) < 0:
        raise ConfigError(f"encode_keys: keys must be >= 0, got min {int(keys.min())}")
    sorted_keys, order = torch.sort(keys, stable=True)
    gaps = torch.diff(sorted_keys, prepend=sorted_keys.new_zeros(1))
    # width code: 0 -> 1 byte, 1 -> 2, 2 -> 4, 3 -> 8
    code = (gaps >= (1 << 8)).long() + (gaps >= (1 << 16)).long() + (gaps >= (1 << 32)).long()
    width = torch.tensor(_WIDTHS, device=keys.device)[code]
    flags = pack_bits(code, 2)
    byte_idx = torch.arange(8, device=keys.device)
    all_bytes = (gaps.unsqueeze(1) >> (8 * byte_idx)) & 0xFF
    keep = byte_idx.unsqueeze(0) < width.unsqueeze(1)
    body = all_bytes[keep].to(torch.uint8)  # row-major: each gap's bytes in order
    return torch.cat([flags, body]), order


def decode_keys(blob: torch.Tensor, count: int) -> torch.Tensor:
    """The sorted keys that :func:`encode_keys` wrote into ``blob`` (``count`` of them)."""
    n_flags = (count * 2 + 7) // 8
    if blob.numel() < n_flags:
        raise CommError(f"decode_keys: {blob.numel()} bytes cannot hold the flags of {count} keys; the payload "
                        "is truncated")
    if count == 0:
        return torch.zeros(0, dtype=torch.int64, device=blob.device)
    code = unpack_bits(blob[:n_flags], 2, count)
    width = torch.tensor(_WIDTHS, device=blob.device)[code]
    body = blob[n_flags:].to(torch.int64)
    if body.numel() != int(width.sum()):
        raise CommError(f"decode_keys: the key section has {body.numel()} gap bytes but its flags announce "
                        f"{int(width.sum())}; the payload is corrupt or truncated")
    byte_idx = torch.arange(8, device=blob.device)
    keep = byte_idx.unsqueeze(0) < width.unsqueeze(1)
    matrix = torch.zeros(count, 8, dtype=torch.int64, device=blob.device)
    matrix[keep] = body
    gaps = (matrix << (8 * byte_idx)).sum(1)
    return torch.cumsum(gaps, 0)
