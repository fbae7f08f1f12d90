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

import os
from typing import Any, List, Optional

import numpy as np
import torch

from sgl.federated.channel import Channel
from sgl.federated.paillier import (
    generate_keypair, pack, public_key_from_tensor, public_key_to_tensor, require_phe, to_ring, truncate_shares, unpack,
)

__all__ = ["BlindSourceFeatureSide", "BlindSourceLabelSide", "CryptoStats", "source_inputs", "source_weight"]


class CryptoStats(dict):
    """Counts of cryptographic operations and the seconds spent in them (per party)."""

    def add(self, key: str, count: int = 1) -> None:
        self[key] = self.get(key, 0) + count


def source_inputs(dense: np.ndarray, sparse: np.ndarray, field_dims) -> tuple:
    """``(rows, coef)`` ``[B, F + D]`` of a passive party's columns for the source layer, in the
    output order of :class:`~sgl.federated.models.PartyBottom`: each categorical field's id offset
    into one table (``coef`` 1: Embed), then each dense column's weight row (``coef`` = value: MatMul).

    >>> source_inputs(np.array([[0.5]]), np.array([[2, 1]]), [3, 4])
    (array([[2, 4, 7]]), array([[1. , 1. , 0.5]]))
    """
    sparse, dense = np.asarray(sparse, dtype=np.int64), np.asarray(dense, dtype=np.float64)
    offsets = np.concatenate([[0], np.cumsum(field_dims)[:-1]]).astype(np.int64) if len(field_dims) else \
        np.zeros(0, dtype=np.int64)
    total = int(np.sum(field_dims)) if len(field_dims) else 0
    dense_rows = np.broadcast_to(total + np.arange(dense.shape[1]), dense.shape)
    rows = np.concatenate([sparse + offsets, dense_rows], axis=1)
    coef = np.concatenate([np.ones(sparse.shape, dtype=np.float64), dense], axis=1)
    return rows, coef


def source_weight(bottom) -> np.ndarray:
    """A passive :class:`~sgl.federated.models.PartyBottom`'s weight rows (embedding table, then the
    dense columns' vectors) as float64 ``[rows, k]``: the source layer's plaintext twin."""
    if bottom.mlp is not None or not bottom.embed_dense:
        raise ValueError("a BlindFL source layer is a passive bottom without an MLP")
    parts = []
    if bottom.embedding is not None:
        parts.append(bottom.embedding.weight.detach().double().cpu().numpy())
    if bottom.dense_vectors is not None:
        parts.append(bottom.dense_vectors.detach().double().cpu().numpy())
    return np.concatenate(parts, axis=0)


def _fixed(values: np.ndarray, frac_bits: int) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float64) * (1 << frac_bits)).astype(np.int64)


class BlindSourceFeatureSide:
    """Party A of the source layer: holds the features, ``U`` and :math:`[\\![V]\\!]`.

    ``num_rows`` weight rows (categorical ids of every field, offset, plus one row per dense
    column) of width ``embed_dim``. ``peer`` is party B's rank. ``init_weight`` (``[num_rows,
    embed_dim]``) starts ``U`` at a public, data-independent initialisation (B then starts ``V``
    at 0: ``random_init=False``), as a split-learning bottom owner knows its own initial weights;
    after the first update both shares are masked. Default: a random split nobody knows.
    """

    def __init__(self, channel: Channel, peer: int, num_rows: int, embed_dim: int, seed: Optional[int] = 0,
                 frac_bits: int = 16, init_std: float = 0.1, init_weight: Optional[np.ndarray] = None) -> None:
        self.phe = require_phe()
        self.channel, self.peer, self.frac_bits = channel, peer, frac_bits
        self.num_rows, self.embed_dim = int(num_rows), int(embed_dim)
        self.rng = np.random.default_rng(seed)
        self.stats = CryptoStats()
        self.public_key = public_key_from_tensor(channel.recv(peer, "cipher"))
        # W_init = U_0 + V_0 with both halves random: nobody knows the initial weights either
        if init_weight is not None:
            init_weight = np.asarray(init_weight, dtype=np.float64)
            if init_weight.shape != (self.num_rows, self.embed_dim):
                raise ValueError(f"init_weight must be [{self.num_rows}, {self.embed_dim}], got {init_weight.shape}")
            self.U = _fixed(init_weight, frac_bits)
        else:
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
        # masks come from the OS's cryptographic generator, never from the seeded one: a peer that knew
        # the seed could otherwise strip them
        mask = np.frombuffer(os.urandom(8 * len(encrypted)), dtype=np.int64).copy()
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
    """Party B of the source layer: holds the Paillier key pair and ``V``; gets the output Z.

    ``random_init=False`` starts ``V`` at 0 (A then starts ``U`` at its ``init_weight``).
    """

    def __init__(self, channel: Channel, peer: int, num_rows: int, embed_dim: int, key_bits: int = 2048,
                 seed: Optional[int] = 0, frac_bits: int = 16, init_std: float = 0.1,
                 random_init: bool = True) -> None:
        self.public_key, self.private_key = generate_keypair(key_bits)
        self.phe = require_phe()
        self.channel, self.peer, self.frac_bits = channel, peer, frac_bits
        self.num_rows, self.embed_dim = int(num_rows), int(embed_dim)
        self.rng = np.random.default_rng(seed)
        self.stats = CryptoStats()
        self.width = self.public_key.n.bit_length() // 4 + 1
        channel.send(public_key_to_tensor(self.public_key), peer, "cipher")
        self.V = _fixed(self.rng.normal(0, init_std / np.sqrt(2), (self.num_rows, self.embed_dim)), frac_bits) \
            if random_init else np.zeros((self.num_rows, self.embed_dim), dtype=np.int64)
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
