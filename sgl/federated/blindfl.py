r"""BlindFL (SIGMOD 2022): a federated source layer from Paillier encryption and secret sharing.

The source layer maps the **feature party** A's columns to field outputs exactly like a passive
bottom model without an MLP (:class:`~sgl.federated.models.PartyBottom`): output field ``f`` of
row ``i`` is :math:`Z_{i,f} = c_{i,f}\,W_{d_{i,f}}`, where for a categorical field ``d`` is the
row of its id (``c = 1``: **Embed**) and for a dense column ``d`` is the column's weight row and
``c = x`` (**MatMul**). Neither party sees W: it is split additively in the ring
:math:`\mathbb Z_{2^{64}}` (fixed point, ``frac_bits`` fractional bits), ``W = U + V``; A holds
``U`` and :math:`[\![V]\!]` encrypted under B's key, the **label party** B holds ``V`` and the key.

* Forward: A computes :math:`[\![cV]\!]` homomorphically, subtracts a uniform ring mask ``R``,
  re-randomises the ciphertexts and sends them; B decrypts its share :math:`cV - R`. A sends
  its share :math:`cU + R`; B adds the two and gets Z, the layer's output (and nothing else).
* Backward: B encrypts :math:`\nabla Z` and sends it; A computes, for **every** weight row
  (touched or not, so the update does not reveal which ids occurred),
  :math:`[\![\eta\sum c\,\nabla Z]\!]`, subtracts a uniform mask Φ, re-randomises and sends; B
  decrypts. Both truncate their shares (SecureML) and update ``U`` and ``V``; B sends
  :math:`[\![\Delta V]\!]` so A can keep :math:`[\![V]\!]` current.

A sees only ciphertexts under B's key; B sees uniformly masked shares, Z and its own V. Plain
SGD with learning rate :math:`\eta`. Host-only code (Python integers); B's outputs are torch tensors.

Example (two threads; 1024-bit keys, the minimum):
    >>> import threading, numpy as np, torch
    >>> from sgl.federated.channel import LocalChannel
    >>> a, b = LocalChannel.pair()
    >>> out = {}
    >>> def feature_side():
    ...     layer = BlindSourceFeatureSide(a, peer=1, num_rows=3, embed_dim=2, seed=0)
    ...     layer.forward(np.array([[0, 2]]), np.array([[1.0, 0.5]]))
    ...     out["U"] = layer.weight_share()
    >>> t = threading.Thread(target=feature_side); t.start()
    >>> label = BlindSourceLabelSide(b, peer=0, num_rows=3, embed_dim=2, key_bits=1024, seed=1)
    >>> z = label.forward(); t.join()
    >>> w = (out["U"] + label.weight_share()).astype(np.float64) / 2 ** 16
    >>> bool(np.allclose(z.numpy(), [[w[0], 0.5 * w[2]]], atol=1e-4))
    True
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np
import torch

from sgl.federated.channel import Channel
from sgl.federated.paillier import (
    generate_keypair, pack, public_key_from_tensor, public_key_to_tensor, require_phe, to_ring, truncate_shares, unpack,
)

__all__ = ["BlindSourceFeatureSide", "BlindSourceLabelSide", "CryptoStats"]


class CryptoStats(dict):
    """Counts of cryptographic operations and the seconds spent in them (per party)."""

    def add(self, key: str, count: int = 1) -> None:
        self[key] = self.get(key, 0) + count


def _fixed(values: np.ndarray, frac_bits: int) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float64) * (1 << frac_bits)).astype(np.int64)


class BlindSourceFeatureSide:
    """Party A of the source layer: holds the features, ``U`` and :math:`[\\![V]\\!]`.

    ``num_rows`` weight rows (categorical ids of every field, offset, plus one row per dense
    column) of width ``embed_dim``. ``peer`` is party B's rank.
    """

    def __init__(self, channel: Channel, peer: int, num_rows: int, embed_dim: int, seed: int = 0,
                 frac_bits: int = 16, init_std: float = 0.1) -> None:
        self.phe = require_phe()
        self.channel, self.peer, self.frac_bits = channel, peer, frac_bits
        self.num_rows, self.embed_dim = int(num_rows), int(embed_dim)
        self.rng = np.random.default_rng(seed)
        self.stats = CryptoStats()
        self.public_key = public_key_from_tensor(channel.recv(peer, "cipher"))
        # W_init = U_0 + V_0 with both halves random: nobody knows the initial weights either
        self.U = _fixed(self.rng.normal(0, init_std / np.sqrt(2), (self.num_rows, self.embed_dim)), frac_bits)
        self.V_enc = self._receive_ciphertexts(self.num_rows * self.embed_dim)
        self._saved: Optional[tuple] = None

    def weight_share(self) -> np.ndarray:
        return self.U.copy()

    def _receive_ciphertexts(self, count: int) -> List[Any]:
        values = unpack(self.channel.recv(self.peer, "cipher"))
        if len(values) != count:
            raise ValueError(f"expected {count} ciphertexts, got {len(values)}")
        return [self.phe.EncryptedNumber(self.public_key, v, 0) for v in values]

    def _send_masked(self, encrypted: List[Any]) -> np.ndarray:
        """Subtract a uniform ring mask from each ciphertext, re-randomise, send; return the mask."""
        mask = self.rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=len(encrypted),
                                 dtype=np.int64, endpoint=True)
        out = []
        for enc, m in zip(encrypted, mask.tolist()):
            masked = enc - m
            masked.obfuscate()
            out.append(masked.ciphertext(be_secure=False))
        self.stats.add("obfuscations", len(out))
        self.channel.send(pack(out, self.public_key.n.bit_length() // 4 + 1), self.peer, "cipher")
        return mask

    def forward(self, rows: np.ndarray, coef: np.ndarray) -> None:
        """Send B this batch's masked share of ``Z[i, f] = coef[i, f] * W[rows[i, f]]``.

        ``rows``/``coef``: ``[B, F]`` weight-row indices and coefficients (1 for a categorical
        field, the value for a dense column).
        """
        rows = np.asarray(rows, dtype=np.int64)
        q = _fixed(coef, self.frac_bits)
        k = self.embed_dim
        encrypted = []
        for r, c in zip(rows.reshape(-1).tolist(), q.reshape(-1).tolist()):
            encrypted += [self.V_enc[r * k + j] * c for j in range(k)]
        self.stats.add("multiplications", len(encrypted))
        mask = self._send_masked(encrypted)
        share = q[..., None] * self.U[rows] + mask.reshape(*rows.shape, k)  # wraps mod 2^64
        self.channel.send(torch.from_numpy(share), self.peer, "share")
        self._saved = (rows, q)

    def backward(self, lr: float) -> None:
        """Receive :math:`[\\![\\nabla Z]\\!]`, send B its masked share of the update of every row."""
        rows, q = self._saved
        k = self.embed_dim
        grads = self._receive_ciphertexts(rows.size * k)
        lr_q = int(round(lr * (1 << self.frac_bits)))
        zero = self.public_key.encrypt(0, r_value=1)
        acc: List[Any] = [zero] * (self.num_rows * k)
        for n, (r, c) in enumerate(zip(rows.reshape(-1).tolist(), q.reshape(-1).tolist())):
            for j in range(k):
                acc[r * k + j] = acc[r * k + j] + grads[n * k + j] * (c * lr_q)
        self.stats.add("multiplications", rows.size * k)
        phi = self._send_masked(acc)  # every row: B cannot tell which ids occurred
        delta_a, _ = truncate_shares(phi, np.zeros_like(phi), 2 * self.frac_bits)
        self.U = self.U - delta_a.reshape(self.num_rows, k)
        delta_v = self._receive_ciphertexts(self.num_rows * k)
        self.V_enc = [v - d for v, d in zip(self.V_enc, delta_v)]


class BlindSourceLabelSide:
    """Party B of the source layer: holds the Paillier key pair and ``V``; gets the output Z."""

    def __init__(self, channel: Channel, peer: int, num_rows: int, embed_dim: int, key_bits: int = 2048,
                 seed: int = 0, frac_bits: int = 16, init_std: float = 0.1) -> None:
        self.public_key, self.private_key = generate_keypair(key_bits)
        self.phe = require_phe()
        self.channel, self.peer, self.frac_bits = channel, peer, frac_bits
        self.num_rows, self.embed_dim = int(num_rows), int(embed_dim)
        self.rng = np.random.default_rng(seed)
        self.stats = CryptoStats()
        self.width = self.public_key.n.bit_length() // 4 + 1
        channel.send(public_key_to_tensor(self.public_key), peer, "cipher")
        self.V = _fixed(self.rng.normal(0, init_std / np.sqrt(2), (self.num_rows, self.embed_dim)), frac_bits)
        self._send_encrypted(self.V.reshape(-1))
        self._shape: Optional[tuple] = None

    def weight_share(self) -> np.ndarray:
        return self.V.copy()

    def _send_encrypted(self, values: np.ndarray) -> None:
        cts = [self.public_key.encrypt(int(v)).ciphertext(be_secure=False) for v in values.tolist()]
        self.stats.add("encryptions", len(cts))
        self.channel.send(pack(cts, self.width), self.peer, "cipher")

    def _receive_plain(self) -> np.ndarray:
        values = unpack(self.channel.recv(self.peer, "cipher"))
        self.stats.add("decryptions", len(values))
        n = self.public_key.n
        plain = [self.private_key.raw_decrypt(v) for v in values]
        return to_ring([m - n if m > n // 2 else m for m in plain])  # signed representative, then the ring

    def forward(self) -> torch.Tensor:
        """This batch's layer output ``Z [B, F, k]`` (float32), reconstructed from both shares."""
        mine = self._receive_plain()
        theirs = self.channel.recv(self.peer, "share").cpu().numpy()
        self._shape = theirs.shape
        z = (theirs + mine.reshape(theirs.shape)).astype(np.float64) / float(1 << (2 * self.frac_bits))
        return torch.from_numpy(z.astype(np.float32))

    def backward(self, grad: torch.Tensor, lr: float) -> None:
        """Send :math:`[\\![\\nabla Z]\\!]`, receive the masked update, apply B's half, share
        :math:`[\\![\\Delta V]\\!]` with A."""
        gq = _fixed(grad.detach().cpu().numpy().reshape(self._shape), self.frac_bits)
        self._send_encrypted(gq.reshape(-1))
        share = self._receive_plain()
        _, delta_b = truncate_shares(np.zeros_like(share), share, 2 * self.frac_bits)
        self.V = self.V - delta_b.reshape(self.num_rows, self.embed_dim)
        self._send_encrypted(delta_b)
