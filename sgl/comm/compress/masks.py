"""Pairwise additive masks (Bonawitz et al., 2017) from X25519 key agreement and a ChaCha20 PRG.

Every client ``i`` holds an X25519 key pair and learns every other client's public key. For
each peer ``j`` both ends derive the same 32-byte seed ``HKDF-SHA256(X25519(sk_i, pk_j))``
(salted with both public keys and a ``round`` tag), expand it with ChaCha20 into a stream of
field elements of ``Z_p`` and add it to their table when ``i < j``, subtract it when ``i > j``.
Each mask appears once with ``+`` and once with ``-``, so the masks cancel exactly in the sum
of all clients' tables (mod ``p``), while one client's masked table is uniform in ``Z_p``
whatever its input (as long as one peer is honest).

**No dropout recovery.** If a client drops after the others masked, its pairwise masks do
not cancel and the sum is lost; Bonawitz's self-masks and Shamir-shared seeds are not
implemented. Every client must deliver its table.

Host-only: the key agreement and the keystream run on the CPU (``cryptography``); the mask is
then moved to the table's device.

>>> import torch
>>> keys = [X25519Identity.generate() for _ in range(3)]
>>> public = [k.public_bytes for k in keys]
>>> maskers = [PairwiseMasker(i, keys[i], public) for i in range(3)]
>>> tables = [torch.full((4, 2), 10 * (i + 1), dtype=torch.int64) for i in range(3)]
>>> masked = [m.mask(t) for m, t in zip(maskers, tables)]
>>> total = sum(masked) % FIELD_PRIME
>>> total.tolist()[0], bool((masked[0] != tables[0]).all())
([60, 60], True)
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import torch

from sgl.comm.compress.iblt import FIELD_PRIME
from sgl.errors import ConfigError

__all__ = ["X25519Identity", "PairwiseMasker", "prg_field", "FIELD_PRIME"]


def _crypto():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as exc:  # pragma: no cover - the [compress] extra
        raise ConfigError("KVSAgg's masks need the `cryptography` package: pip install 'sgl[compress]'") from exc
    return hashes, serialization, X25519PrivateKey, X25519PublicKey, Cipher, algorithms, HKDF


class X25519Identity:
    """One client's X25519 key pair (fresh per aggregation round, never reused across rounds)."""

    def __init__(self, private_key) -> None:
        _, serialization, *_ = _crypto()
        self._private = private_key
        self.public_bytes: bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @classmethod
    def generate(cls) -> "X25519Identity":
        """A fresh key pair from the operating system's CSPRNG."""
        return cls(_crypto()[2].generate())

    def shared_seed(self, peer_public: bytes, info: bytes) -> bytes:
        """32 bytes both ends derive: HKDF-SHA256 of the X25519 shared secret."""
        hashes, _, _, X25519PublicKey, _, _, HKDF = _crypto()
        if not isinstance(peer_public, (bytes, bytearray)) or len(peer_public) != 32:
            raise ConfigError(f"X25519 public keys are 32 bytes, got {len(peer_public) if peer_public else 0}")
        secret = self._private.exchange(X25519PublicKey.from_public_bytes(bytes(peer_public)))
        salt = b"".join(sorted([self.public_bytes, bytes(peer_public)]))
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"sgl-kvsagg-mask|" + info).derive(secret)


def prg_field(seed: bytes, count: int) -> torch.Tensor:
    """``count`` int64 elements of ``Z_p`` from the ChaCha20 keystream of ``seed`` (64-bit draws reduced
    mod ``p``: bias below ``2**-32``)."""
    _, _, _, _, Cipher, algorithms, _ = _crypto()
    stream = Cipher(algorithms.ChaCha20(seed, b"\x00" * 16), mode=None).encryptor()
    raw = np.frombuffer(stream.update(bytes(8 * count)), dtype=np.uint64)
    return torch.from_numpy((raw % np.uint64(FIELD_PRIME)).astype(np.int64))


class PairwiseMasker:
    """Masks client ``index``'s table so that the masks of all clients cancel in the sum.

    Args:
        index: this client's position in ``public_keys``.
        identity: its :class:`X25519Identity`.
        public_keys: every client's 32-byte public key, in client order.
        round_tag: a per-aggregation tag (bytes) mixed into the seeds.
    """

    def __init__(self, index: int, identity: X25519Identity, public_keys: Sequence[bytes],
                 round_tag: bytes = b"0") -> None:
        if not 0 <= index < len(public_keys) or public_keys[index] != identity.public_bytes:
            raise ConfigError(f"PairwiseMasker: client {index} of {len(public_keys)} must hold the key pair whose public "
                              "key is public_keys[index]")
        if len(set(bytes(p) for p in public_keys)) != len(public_keys):
            raise ConfigError("PairwiseMasker: two clients announced the same public key; every client needs its own")
        self.index = index
        self._seeds: List[tuple] = [(j, identity.shared_seed(pk, round_tag)) for j, pk in enumerate(public_keys)
                                    if j != index]

    def mask_for(self, numel: int) -> torch.Tensor:
        """The summed mask (``Z_p``, host memory) this client adds to ``numel`` entries."""
        total = torch.zeros(numel, dtype=torch.int64)
        for j, seed in self._seeds:
            m = prg_field(seed, numel)
            total += m if self.index < j else FIELD_PRIME - m
        return total % FIELD_PRIME

    def mask(self, table: torch.Tensor) -> torch.Tensor:
        """``table + mask (mod p)``, on the table's device."""
        m = self.mask_for(table.numel()).to(table.device).reshape(table.shape)
        return (table.to(torch.int64) + m) % FIELD_PRIME
