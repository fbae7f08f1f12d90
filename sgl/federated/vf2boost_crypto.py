"""Ciphertext arithmetic for VF2Boost and SecureBoost, with every operation counted (host-only code).

:class:`PaillierCodec` works on raw Paillier integers from ``phe`` keys (the ``[federated]``
extra) with ``gmpy2``: encryption of fixed-point integers (negative values as residues mod ``n``),
homomorphic addition (a product mod ``n^2``), multiplication of the plaintext by ``2^w`` (a power,
for packing) and decryption to a signed integer. The key owner may encrypt with the Chinese
remainder theorem over ``p^2`` and ``q^2`` (``crt=True``), the trick ``phe`` already uses to
decrypt. :class:`PlainCodec` has the same interface on plain integers: the protocol with
encryption switched off (the plaintext reference). Both count operations in :class:`CryptoStats`
and turn ciphertexts into fixed-width ``uint8`` tensors for :mod:`sgl.comm`.

Example:
    >>> codec = PlainCodec(key_bits=64)
    >>> c = codec.add(codec.encrypt([5])[0], codec.encrypt([-7])[0])
    >>> codec.decrypt(codec.from_wire(codec.to_wire([codec.shift(c, 4)]))), codec.stats.encryptions
    ([-32], 2)
"""
from __future__ import annotations

import secrets
import threading
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from sgl.errors import ConfigError
from sgl.federated.gbdt_packing import to_signed
from sgl.federated.paillier import require_phe

__all__ = ["CryptoStats", "PlainCodec", "PaillierCodec"]


@dataclass
class CryptoStats:
    """Counts of cryptographic operations (a homomorphic add is one ciphertext product).

    Example:
        >>> CryptoStats(encryptions=2).to_dict()["encryptions"]
        2
    """

    encryptions: int = 0
    decryptions: int = 0
    hom_adds: int = 0
    hom_shifts: int = 0
    precomputed: int = 0

    def to_dict(self) -> Dict[str, int]:
        return asdict(self)


class PlainCodec:
    """Identity "encryption" on Python integers: the protocol in plaintext, counted the same way.

    Example:
        >>> PlainCodec(64).decrypt([3, -4])
        [3, -4]
    """

    encrypted = False

    def __init__(self, key_bits: int = 1024) -> None:
        self.key_bits = int(key_bits)
        self.width = self.key_bits // 8 + 1
        self.zero = 0
        self.stats = CryptoStats()

    def precompute(self, count: int, idle: Optional[threading.Event] = None) -> None:
        """Nothing to precompute in plaintext."""

    def stop_precompute(self) -> None:
        """Nothing to stop."""

    def encrypt(self, values: Sequence[int]) -> List[int]:
        self.stats.encryptions += len(values)
        return [int(v) for v in values]

    def add(self, a: int, b: int) -> int:
        self.stats.hom_adds += 1
        return a + b

    def shift(self, c: int, bits: int) -> int:
        self.stats.hom_shifts += 1
        return c << bits

    def decrypt(self, ciphertexts: Sequence[int]) -> List[int]:
        self.stats.decryptions += len(ciphertexts)
        return [int(c) for c in ciphertexts]

    def to_wire(self, ciphertexts: Sequence[int]) -> torch.Tensor:
        raw = b"".join(int(c).to_bytes(self.width, "big", signed=True) for c in ciphertexts)
        return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).view(len(ciphertexts), self.width)

    def from_wire(self, tensor: torch.Tensor) -> List[int]:
        return [int.from_bytes(row.tobytes(), "big", signed=True) for row in tensor.cpu().numpy()]


class PaillierCodec:
    """Raw Paillier on ``phe`` keys: ``PaillierCodec(public_key, private_key=None, crt=False)``.

    Only the key owner (the active party) passes ``private_key``; it may then encrypt with CRT.

    Example:
        >>> import phe
        >>> pub, priv = phe.paillier.generate_paillier_keypair(n_length=512)
        >>> owner, other = PaillierCodec(pub, priv, crt=True), PaillierCodec(pub)
        >>> a, b = owner.encrypt([-3, 10])
        >>> owner.decrypt([other.add(other.shift(a, 8), b)])
        [-758]
    """

    encrypted = True

    def __init__(self, public_key: Any, private_key: Optional[Any] = None, crt: bool = False) -> None:
        require_phe()
        import gmpy2

        if crt and private_key is None:
            raise ConfigError("CRT encryption needs the private key: only the key owner can use it")
        self._gmpy2 = gmpy2
        self.public_key, self.private_key, self.crt = public_key, private_key, bool(crt)
        self.n = gmpy2.mpz(public_key.n)
        self.nsquare = self.n * self.n
        self.key_bits = int(public_key.n).bit_length()
        self.width = (2 * self.key_bits + 7) // 8
        self.zero = gmpy2.mpz(1)  # the encryption of 0 with randomness 1: the identity of the product
        self.stats = CryptoStats()
        self._pool: deque = deque()
        self._filler: Optional[threading.Thread] = None
        self._stop = threading.Event()
        if private_key is not None:
            p, q = gmpy2.mpz(private_key.p), gmpy2.mpz(private_key.q)
            self._p2, self._q2 = p * p, q * q
            # r^n mod p^2 needs only n mod phi(p^2) = n mod p(p-1)
            self._ep, self._eq = self.n % (p * (p - 1)), self.n % (q * (q - 1))
            self._p2_inv = gmpy2.invert(self._p2, self._q2)

    def public_key_tensor(self) -> torch.Tensor:
        """The public modulus as a ``uint8`` row (what the key owner sends)."""
        from sgl.federated.paillier import public_key_to_tensor

        return public_key_to_tensor(self.public_key)

    def _obfuscator(self, r):
        gmpy2 = self._gmpy2
        if not self.crt:
            return gmpy2.powmod(r, self.n, self.nsquare)
        xp = gmpy2.powmod(r, self._ep, self._p2)
        xq = gmpy2.powmod(r, self._eq, self._q2)
        return xp + self._p2 * ((xq - xp) * self._p2_inv % self._q2)

    def _fresh_obfuscator(self):
        return self._obfuscator(self._gmpy2.mpz(secrets.randbelow(int(self.n) - 1) + 1))

    def precompute(self, count: int, idle: Optional[threading.Event] = None) -> None:
        """Start filling, in a background thread, a pool of up to ``count`` obfuscators ``r^n``
        (they do not depend on the plaintext); :meth:`encrypt` takes from the pool first and uses
        each obfuscator once. With ``idle``, the thread works only while that event is set (the
        party sets it while it waits for a message), so it never competes with the party's work."""
        if self._filler is not None and self._filler.is_alive():
            return
        self._stop.clear()

        def fill() -> None:
            while len(self._pool) < count and not self._stop.is_set():
                if idle is not None and not idle.wait(timeout=0.05):
                    continue
                self._pool.append(self._fresh_obfuscator())
                self.stats.precomputed += 1

        self._filler = threading.Thread(target=fill, name="sgl-paillier-obfuscators", daemon=True)
        self._filler.start()

    def stop_precompute(self) -> None:
        self._stop.set()
        if self._filler is not None:
            self._filler.join()
        self._filler = None

    def encrypt(self, values: Sequence[int]) -> list:
        """Ciphertexts of signed integers (``|v| < n/2``), fresh randomness each."""
        gmpy2, n, nsq, pool = self._gmpy2, self.n, self.nsquare, self._pool
        out = []
        for v in values:
            m = gmpy2.mpz(int(v)) % n
            try:
                obfuscator = pool.popleft()
            except IndexError:
                obfuscator = self._fresh_obfuscator()
            out.append(gmpy2.mpz((n * m + 1) % nsq) * obfuscator % nsq)
        self.stats.encryptions += len(values)
        return out

    def add(self, a, b):
        self.stats.hom_adds += 1
        return a * b % self.nsquare

    def shift(self, c, bits: int):
        """The ciphertext of ``v * 2**bits`` from that of ``v``."""
        self.stats.hom_shifts += 1
        return self._gmpy2.powmod(c, 1 << int(bits), self.nsquare)

    def decrypt(self, ciphertexts: Sequence) -> List[int]:
        if self.private_key is None:
            raise ConfigError("only the key owner (the active party) can decrypt")
        self.stats.decryptions += len(ciphertexts)
        n = int(self.n)
        return [to_signed(self.private_key.raw_decrypt(int(c)), n) for c in ciphertexts]

    def to_wire(self, ciphertexts: Sequence) -> torch.Tensor:
        raw = b"".join(int(c).to_bytes(self.width, "big") for c in ciphertexts)
        return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).view(len(ciphertexts), self.width)

    def from_wire(self, tensor: torch.Tensor) -> list:
        mpz = self._gmpy2.mpz
        return [mpz(int.from_bytes(row.tobytes(), "big")) for row in tensor.cpu().numpy()]
