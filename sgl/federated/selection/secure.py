"""How the parties' partial distances are added up: in plaintext, or under Paillier encryption.

VF-MINE hides each party's partial distances from the aggregator: the parties share a key pair,
each encrypts its fixed-point partial distances, the aggregator multiplies ciphertexts (adds the
plaintexts) without the key, and only the *sums* are decrypted by a key holder. (The paper uses
CKKS through TenSEAL; we use the project's Paillier layer, :mod:`sgl.federated.paillier`, from the
``[federated]`` extra.) An aggregator is a callable ``[party arrays] -> total`` with
``value_bytes``, the bytes one value occupies on the wire, and ``operations``, a count of
encryptions and decryptions, so :func:`~sgl.federated.selection.knn.fagin_knn` can count traffic.
This is host-only code: distances arrive as numpy arrays.

Example:
    >>> import numpy as np
    >>> PlainSum()([np.array([1.0, 2.0]), np.array([0.5, 0.25])]).tolist()
    [1.5, 2.25]
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from sgl.errors import ConfigError

__all__ = ["PlainSum", "PaillierSum"]


class PlainSum:
    """Partial distances added in plaintext (8-byte floats on the wire)."""

    value_bytes = 8

    def __init__(self) -> None:
        self.operations: Dict[str, int] = {"encrypt": 0, "decrypt": 0}

    def __call__(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        return np.sum(np.stack([np.asarray(p, dtype=np.float64) for p in parts]), axis=0)

    def total(self, parties: Sequence, queries: np.ndarray, cand: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """The summed partial distances of the ``valid`` candidate entries (what Fagin's random access needs)."""
        return self([p.partial(queries, cand)[valid] for p in parties])


class PaillierSum:
    """Each party encrypts its non-negative partial distances (fixed point, ``frac_bits`` fraction bits);
    the aggregator adds ciphertexts; the key holder decrypts only the sums.

    Example:
        >>> import numpy as np
        >>> agg = PaillierSum(key_bits=1024)  # doctest: +SKIP
        >>> agg([np.array([1.5]), np.array([2.25])]).tolist(), agg.operations  # doctest: +SKIP
        ([3.75], {'encrypt': 2, 'decrypt': 1})
    """

    def __init__(self, key_bits: int = 1024, frac_bits: int = 24, public=None, private=None) -> None:
        from sgl.federated.paillier import generate_keypair

        if not 8 <= frac_bits <= 48:
            raise ConfigError(f"frac_bits must be in [8, 48], got {frac_bits}")
        if public is None:
            public, private = generate_keypair(key_bits)
        self.public, self._private = public, private
        self.frac_bits = int(frac_bits)
        self.value_bytes = 2 * (public.n.bit_length() + 7) // 8  # a ciphertext lives below n^2
        self.operations = {"encrypt": 0, "decrypt": 0}

    def encrypt(self, values: np.ndarray) -> List[int]:
        """Fixed-point Paillier ciphertexts of finite non-negative values (needs only the public key)."""
        values = np.ravel(np.asarray(values, dtype=np.float64))
        if (values < 0).any() or not np.isfinite(values).all():
            raise ConfigError("Paillier aggregation takes finite non-negative partial distances only")
        scaled = np.rint(values * (1 << self.frac_bits)).astype(object)
        self.operations["encrypt"] += len(scaled)
        return [self.public.raw_encrypt(int(v)) for v in scaled]

    def add(self, a: List[int], b: List[int]) -> List[int]:
        """The aggregator's step: the product of ciphertexts encrypts the sum (no key needed)."""
        nsq = self.public.nsquare
        return [x * y % nsq for x, y in zip(a, b)]

    def decrypt(self, cipher: List[int]) -> np.ndarray:
        """The key holder's step: the plaintext sums."""
        if self._private is None:
            raise ConfigError("this party holds only the public key; the key holder decrypts")
        self.operations["decrypt"] += len(cipher)
        return np.asarray([self._private.raw_decrypt(c) / (1 << self.frac_bits) for c in cipher], dtype=np.float64)

    def __call__(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        acc = self.encrypt(parts[0])
        for part in parts[1:]:
            acc = self.add(acc, self.encrypt(part))
        return self.decrypt(acc).reshape(np.shape(parts[0]))

    def total(self, parties: Sequence, queries: np.ndarray, cand: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """In one process: every party's partials encrypted, added as ciphertexts, the sums decrypted."""
        return self([p.partial(queries, cand)[valid] for p in parties])
