r"""The VF2Boost / SecureBoost protocol, active side: one active party (labels, key) and passive
parties (columns, :mod:`sgl.federated.vf2boost_passive`).

Per tree the active party computes ``g, h``, encodes them as fixed-point integers ``q`` (``F``
fractional bits) and sends their encryptions; a passive party adds, per node, feature and bin, the
ciphertexts of the node's rows (homomorphic additions) and sends the encrypted histograms back; the
active party decrypts them, finds the best split over every party's histograms (its own are
plaintext) with :func:`sgl.gbdt.split.find_best_split`, and asks the owner of a passive split for
the rows that go left. Depth-wise growth; node ids as in :class:`sgl.gbdt.tree.Tree`.

What the optimisations change (:data:`OPTIMISATIONS`; SecureBoost is none of them):

* ``packing``: one ciphertext per row holds ``q_h + q_g 2^w`` (half the encryptions), and a
  passive party packs the ``(g, h)`` pairs of ``K`` non-empty bins into one ciphertext by Horner's
  rule before sending, with a bitmap of the non-empty bins (:mod:`sgl.federated.gbdt_packing`):
  over ``2K`` times fewer decryptions and histogram bytes.
* ``reorder``: rows are accumulated bin by bin from a bin-sorted order, all at one fixed-point
  exponent, so no exponent scaling happens during accumulation; and of two siblings only the
  smaller is built: the active party gets the larger as parent minus smaller on decrypted integers.
* ``concurrent``: gradients stream in blocks, and the passive accumulates the root histogram of
  each block as it arrives; histograms go back node by node, so the active party decrypts one node
  while the passive accumulates the next; and while the active party waits for a message, a
  background thread precomputes the next tree's Paillier randomness ``r^n``.
* ``crt``: the active party, who holds the secret key, encrypts with CRT (not in the paper).

Host-only code: Python integers and numpy on the host; tensors are only the wire format.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from sgl.errors import ConfigError
from sgl.federated.gbdt_packing import SlotPacker, encode_fixed
from sgl.gbdt.loss import base_score, gradients
from sgl.gbdt.split import find_best_split, leaf_value

__all__ = ["ActiveParty", "OPTIMISATIONS"]

OPTIMISATIONS = ("packing", "reorder", "concurrent", "crt")
_SETUP, _NEW_TREE, _LEVEL, _SPLITS, _STOP = range(5)


def _ctrl(*values: int) -> torch.Tensor:
    return torch.tensor([int(v) for v in values], dtype=torch.int64)


class _Timer:
    def __init__(self) -> None:
        self.seconds: Dict[str, float] = defaultdict(float)

    def add(self, phase: str, start: float) -> None:
        self.seconds[phase] += time.perf_counter() - start


class ActiveParty:
    """Party 0: labels, its own bin codes ``[n, f0]``, the key pair (in ``codec``); grows the trees.

    ``train()`` runs the protocol with ``num_passive`` passive parties (ranks ``1..num_passive`` of
    ``channel``) and returns the trees as arrays, the counts and the per-phase seconds. A runnable
    example of both sides is in :mod:`sgl.federated.vf2boost_passive`; :func:`~sgl.federated.
    vf2boost.train_vf2boost` is the usual entry point.
    """

    def __init__(self, channel, codes: np.ndarray, labels: np.ndarray, num_bins: int, config: Any,
                 codec: Any, num_passive: int, optimisations: Sequence[str]) -> None:
        self.channel, self.codes, self.labels = channel, codes, labels
        self.num_bins, self.config, self.gbdt = int(num_bins), config, config.gbdt
        self.codec, self.peers, self.opt = codec, list(range(1, num_passive + 1)), set(optimisations)
        self.timer = _Timer()
        self.cipher_bytes = 0
        self._idle = threading.Event()  # set while this party waits for a message

    # -- wire helpers ------------------------------------------------------------------------
    def _send(self, tensor: torch.Tensor, peer: int, kind: str) -> None:
        self.channel.send(tensor, peer, kind)
        if kind == "cipher":
            self.cipher_bytes += tensor.numel()

    def _recv(self, peer: int, kind: str) -> torch.Tensor:
        self._idle.set()
        try:
            out = self.channel.recv(peer, kind)
        finally:
            self._idle.clear()
        if kind == "cipher":
            self.cipher_bytes += out.numel()
        return out

    # -- the protocol ------------------------------------------------------------------------
    def train(self) -> Dict[str, Any]:
        start = time.perf_counter()
        n = self.codes.shape[0]
        key = self.codec.public_key_tensor() if self.codec.encrypted else torch.zeros(1, dtype=torch.uint8)
        self.layout = [(0, self.codes.shape[1])]
        self.party_bins = {0: self.num_bins}
        for p in self.peers:
            self.channel.send(_ctrl(_SETUP, int(self.codec.encrypted), self.codec.key_bits), p, "ctrl")
            self.channel.send(key, p, "ctrl")
        for p in self.peers:
            f, b = self._recv(p, "ctrl").tolist()
            self.layout.append((p, int(f)))
            self.party_bins[p] = int(b)
            self.num_bins = max(self.num_bins, int(b))  # every histogram is padded to the widest party's bins
        score = np.full(n, base_score(self.gbdt.loss, self.labels))
        trees = []
        try:
            for t in range(self.gbdt.num_trees):
                self._more_trees = t + 1 < self.gbdt.num_trees
                tree, leaf_of_row = self._tree(score)
                trees.append(tree)
                score = score + tree["value"][leaf_of_row]
        finally:  # also on failure: a passive party waiting for the next order stops instead of timing out
            self.codec.stop_precompute()
            for p in self.peers:
                self.channel.send(_ctrl(_STOP), p, "ctrl")
        self.timer.seconds["total"] = time.perf_counter() - start
        return {"trees": trees, "base_score": base_score(self.gbdt.loss, self.labels), "layout": self.layout,
                "num_bins": self.num_bins, "stats": self.codec.stats.to_dict(), "cipher_bytes": self.cipher_bytes,
                "seconds": dict(self.timer.seconds), "traffic": self.channel.meter.summary()}

    def _encrypt_and_send(self, qg: np.ndarray, qh: np.ndarray, slot_bits: int) -> None:
        n = qg.shape[0]
        block = self.config.block_rows if "concurrent" in self.opt else n
        starts = list(range(0, n, block))
        for p in self.peers:
            self.channel.send(_ctrl(_NEW_TREE, slot_bits, len(starts)), p, "ctrl")
        for s in starts:
            t = time.perf_counter()
            g, h = qg[s:s + block].tolist(), qh[s:s + block].tolist()
            if "packing" in self.opt:
                cts = self.codec.encrypt([hv + (gv << slot_bits) for gv, hv in zip(g, h)])
            else:
                cts = self.codec.encrypt(g) + self.codec.encrypt(h)
            wire = self.codec.to_wire(cts)
            self.timer.add("encrypt", t)
            for p in self.peers:
                self._send(wire, p, "cipher")
        if "concurrent" in self.opt and self._more_trees:  # the next tree's randomness, made while waiting
            self.codec.precompute(n * (1 if "packing" in self.opt else 2), self._idle)

    def _tree(self, score: np.ndarray):
        g, h = gradients(self.gbdt.loss, self.labels, score)
        fb = self.config.frac_bits
        qg, qh = encode_fixed(g, fb), encode_fixed(h, fb)
        n = qg.shape[0]
        bound = n * max(int(np.abs(qg).max()), int(np.abs(qh).max()), 1)
        slot_bits = SlotPacker.slot_bits_for(bound)
        if slot_bits > 62:
            raise ConfigError(f"fixed-point sums need {slot_bits} bits (> 62); lower frac_bits (now {fb})")
        if "packing" in self.opt and (self.codec.key_bits - 2) // slot_bits < 2:
            raise ConfigError(f"a (g, h) pair needs 2 x {slot_bits} bits, more than a {self.codec.key_bits}-bit key "
                              "holds; lower frac_bits or turn packing off")
        self._encrypt_and_send(qg, qh, slot_bits)
        self.slot_bits = slot_bits
        nodes: Dict[str, List] = {k: [] for k in ("feature", "threshold_bin", "left", "right", "value", "gain",
                                                  "hess")}

        def new_node(rows_mask: np.ndarray) -> int:
            for k, v in zip(nodes, (-1, -1, -1, -1, 0.0, 0.0, 0.0)):
                nodes[k].append(v)
            G, H = int(qg[rows_mask].sum()), int(qh[rows_mask].sum())
            nodes["value"][-1] = self.gbdt.learning_rate * leaf_value(G / 2.0 ** fb, H / 2.0 ** fb,
                                                                       self.gbdt.reg_lambda)
            nodes["hess"][-1] = H / 2.0 ** fb
            return len(nodes["feature"]) - 1

        row_node = np.zeros(n, dtype=np.int64)
        level = [new_node(np.ones(n, dtype=bool))]
        hists: Dict[int, tuple] = {}
        pairs: List[tuple] = []  # (parent, left, right) of the previous level
        for _ in range(self.gbdt.max_depth):
            counts = np.bincount(row_node, minlength=len(nodes["feature"]))
            need = [v for v in level if counts[v] >= 2]
            build, derive = list(need), []
            if "reorder" in self.opt and pairs:
                build, derive = [], []
                for parent, left, right in pairs:
                    if left not in need and right not in need:
                        continue
                    small, big = (left, right) if counts[left] <= counts[right] else (right, left)
                    build.append(small)
                    if big in need:
                        derive.append((big, parent, small))
            if not need:
                break
            self._histograms(row_node, build, derive, hists, qg, qh)
            splits = {}
            t = time.perf_counter()
            for v in need:
                G, H = (hists[v][0] / 2.0 ** fb, hists[v][1] / 2.0 ** fb)
                s = find_best_split(G, H, reg_lambda=self.gbdt.reg_lambda, min_child_weight=self.gbdt.min_child_weight,
                                    min_split_gain=self.gbdt.min_split_gain)
                if s is not None:
                    splits[v] = s
            self.timer.add("split", t)
            go_left = self._place(row_node, splits)
            pairs, next_level = [], []
            for v in level:
                if v not in splits:
                    continue
                s = splits[v]
                in_v = row_node == v
                left, right = new_node(in_v & go_left), new_node(in_v & ~go_left)
                nodes["feature"][v], nodes["threshold_bin"][v], nodes["gain"][v] = s.feature, s.bin, s.gain
                nodes["value"][v] = 0.0  # only leaves carry values (as in sgl.gbdt's trees)
                nodes["left"][v], nodes["right"][v] = left, right
                row_node[in_v] = np.where(go_left[in_v], left, right)
                pairs.append((v, left, right))
                next_level += [left, right]
            hists = {v: hists[v] for v in splits}
            level = next_level
            if not level:
                break
        tree = {k: np.asarray(v, dtype=np.float64 if k in ("value", "gain", "hess") else np.int64)
                for k, v in nodes.items()}
        return tree, row_node

    def _own_histogram(self, mask: np.ndarray, qg: np.ndarray, qh: np.ndarray):
        f0, B = self.codes.shape[1], self.num_bins
        rows = np.flatnonzero(mask)
        keys = (np.arange(f0)[None, :] * B + self.codes[rows].astype(np.int64)).ravel()
        G, H = np.zeros(f0 * B, dtype=np.int64), np.zeros(f0 * B, dtype=np.int64)
        np.add.at(G, keys, np.repeat(qg[rows], f0))
        np.add.at(H, keys, np.repeat(qh[rows], f0))
        return G.reshape(f0, B), H.reshape(f0, B)

    def _histograms(self, row_node, build, derive, hists, qg, qh) -> None:
        """Own plaintext histograms plus the passive parties' decrypted ones for the ``build`` nodes;
        ``derive`` nodes are parent minus sibling."""
        for p in self.peers:
            self.channel.send(_ctrl(_LEVEL, len(build)), p, "ctrl")
            self.channel.send(torch.from_numpy(row_node.copy()), p, "ids")
            self.channel.send(torch.tensor(build, dtype=torch.int64), p, "ids")
        parts: Dict[int, List] = {v: [] for v in build}
        for v in build:
            t = time.perf_counter()
            parts[v].append(self._own_histogram(row_node == v, qg, qh))
            self.timer.add("split", t)
        for p, num_features in self.layout[1:]:
            for v in build:
                size = num_features * self.party_bins[p]
                nonempty = None
                if "packing" in self.opt:
                    bitmap = self._recv(p, "ids").cpu().numpy()
                    nonempty = np.unpackbits(bitmap, count=size).astype(bool)
                wire = self._recv(p, "cipher")
                t = time.perf_counter()
                parts[v].append(self._decode(self.codec.decrypt(self.codec.from_wire(wire)), num_features,
                                             self.party_bins[p], nonempty))
                self.timer.add("decrypt", t)
        for v in build:
            hists[v] = (np.concatenate([g for g, _ in parts[v]]), np.concatenate([h for _, h in parts[v]]))
        for big, parent, small in derive:
            hists[big] = (hists[parent][0] - hists[small][0], hists[parent][1] - hists[small][1])

    def _decode(self, values: List[int], num_features: int, num_bins: int, nonempty: Optional[np.ndarray] = None):
        """One passive party's ``(G, H)`` integer histograms ``[num_features, self.num_bins]`` (padded)."""
        size = num_features * num_bins
        if "packing" in self.opt:
            packer = SlotPacker.for_key(self.codec.key_bits, self.slot_bits)
            per, count = packer.slots // 2, int(nonempty.sum())
            digits: List[int] = []
            for i, packed in enumerate(values):
                digits += packer.unpack(packed, 2 * min(per, count - i * per))
            flat = np.zeros((size, 2), dtype=np.int64)
            flat[nonempty] = np.asarray(digits, dtype=np.int64).reshape(count, 2)
            G, H = flat[:, 1], flat[:, 0]
        else:
            flat = np.asarray(values, dtype=np.int64)
            G, H = flat[:size], flat[size:]
        pad = ((0, 0), (0, self.num_bins - num_bins))
        return (np.pad(G.reshape(num_features, num_bins), pad), np.pad(H.reshape(num_features, num_bins), pad))

    def _place(self, row_node: np.ndarray, splits: Dict[int, Any]) -> np.ndarray:
        """Rows that go left, for every node split this level (asking the owners of passive splits)."""
        go_left = np.zeros(row_node.shape[0], dtype=bool)
        owned: Dict[int, List] = {p: [] for p in self.peers}
        for v, s in splits.items():
            party, local = self._owner(s.feature)
            if party == 0:
                m = row_node == v
                go_left[m] = self.codes[m, local] <= s.bin
            else:
                owned[party].append([v, local, s.bin])
        for p in self.peers:
            self.channel.send(_ctrl(_SPLITS, len(owned[p])), p, "ctrl")
            if owned[p]:
                self.channel.send(torch.tensor(owned[p], dtype=torch.int64), p, "ids")
        for p in self.peers:
            if owned[p]:
                flags = self._recv(p, "ids").cpu().numpy().astype(bool)
                m = np.isin(row_node, [v for v, _, _ in owned[p]])
                go_left[m] = flags[m]
        return go_left

    def _owner(self, feature: int):
        for party, count in self.layout:
            if feature < count:
                return party, feature
            feature -= count
        raise ConfigError(f"split feature {feature} is beyond every party's columns")  # pragma: no cover
