"""Paillier keys, fixed-point ring arithmetic and ciphertext packing for BlindFL (host-only code).

Uses the well-kept ``phe`` library (with ``gmpy2``), an optional dependency: ``pip install
'sgl[federated]'``. Ciphertexts (integers below ``n^2``) travel over :mod:`sgl.comm` as
fixed-width big-endian ``uint8`` tensors ``[count, 2 * key_bits / 8]``. Secret shares live in the
ring of 64-bit integers: numpy ``int64`` arithmetic wraps modulo ``2^64``.

Example:
    >>> import numpy as np
    >>> to_ring([2 ** 64 + 5, -3]).tolist()
    [5, -3]
    >>> truncate_shares(np.array([7 << 16], dtype=np.int64), np.array([0], dtype=np.int64), 16)
    (array([7]), array([0]))
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np
import torch

from sgl.errors import ConfigError

__all__ = ["require_phe", "generate_keypair", "public_key_from_tensor", "public_key_to_tensor", "pack", "unpack",
           "to_ring", "truncate_shares", "MIN_KEY_BITS"]

MIN_KEY_BITS = 1024
_MASK64 = (1 << 64) - 1


def require_phe() -> Any:
    """The ``phe`` module, or a :class:`ConfigError` naming the ``[federated]`` extra."""
    try:
        import phe  # noqa: F401 -- GPL: an optional extra only
    except ImportError as exc:
        raise ConfigError("BlindFL needs Paillier encryption from the optional `phe` package (with `gmpy2`); "
                          "install the extra: pip install 'sgl[federated]'") from exc
    return phe


def generate_keypair(key_bits: int = 2048) -> Tuple[Any, Any]:
    """A Paillier ``(public_key, private_key)`` of ``key_bits`` bits (at least 1024)."""
    if isinstance(key_bits, bool) or not isinstance(key_bits, int) or key_bits < MIN_KEY_BITS:
        raise ConfigError(f"Paillier key size must be an integer >= {MIN_KEY_BITS} bits, got {key_bits!r}; "
                          "smaller keys are breakable")
    phe = require_phe()
    return phe.paillier.generate_paillier_keypair(n_length=key_bits)


def public_key_to_tensor(public_key: Any) -> torch.Tensor:
    """The public modulus ``n`` as a ``uint8`` row (what the key owner sends)."""
    return pack([public_key.n], public_key.n.bit_length() // 8 + 1)


def public_key_from_tensor(tensor: torch.Tensor) -> Any:
    phe = require_phe()
    return phe.paillier.PaillierPublicKey(int.from_bytes(tensor.cpu().numpy().tobytes(), "big"))


def pack(values: Sequence[int], width: int) -> torch.Tensor:
    """``uint8 [len(values), width]``: each non-negative integer big-endian in ``width`` bytes."""
    raw = b"".join(int(v).to_bytes(width, "big") for v in values)
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).view(len(values), width)


def unpack(tensor: torch.Tensor) -> List[int]:
    """The integers :func:`pack` wrote."""
    arr = tensor.cpu().numpy()
    return [int.from_bytes(row.tobytes(), "big") for row in arr]


def to_ring(values: Sequence[int]) -> np.ndarray:
    """Python integers (any size, signed) reduced into the int64 ring (two's complement mod 2^64)."""
    out = [((int(v) & _MASK64) ^ (1 << 63)) - (1 << 63) for v in values]
    return np.asarray(out, dtype=np.int64)


def truncate_shares(a: np.ndarray, b: np.ndarray, bits: int) -> Tuple[np.ndarray, np.ndarray]:
    """SecureML local truncation of additive shares ``a + b = x (mod 2^64)`` by ``bits``: the results
    add up to ``x >> bits`` within 1, except with probability about ``|x| / 2^63``."""
    return a >> bits, -((-b) >> bits)
