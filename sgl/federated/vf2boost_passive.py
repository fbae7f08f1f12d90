"""The passive side of the VF2Boost / SecureBoost protocol (see :mod:`sgl.federated.vf2boost_party`).

A passive party holds bin codes of its own columns only. Per tree it receives the active party's
encrypted ``(g, h)`` (streamed in blocks under the concurrent protocol, accumulating the root
histogram block by block), builds the encrypted per-(feature, bin) histogram of each node the
active party asks for, packs it when packing is on, and applies the splits it owns. It never sees
a label, a gradient or the secret key. Host-only code (Python integers; tensors are the wire).

Example (the protocol in plaintext, parties as threads):
    >>> import threading, numpy as np
    >>> from sgl.federated.channel import LocalChannel
    >>> from sgl.federated.vf2boost import VF2BoostConfig
    >>> from sgl.federated.vf2boost_crypto import PlainCodec
    >>> from sgl.federated.vf2boost_party import ActiveParty, OPTIMISATIONS
    >>> from sgl.gbdt import GBDTConfig
    >>> a, b = LocalChannel.pair()
    >>> cfg = VF2BoostConfig(GBDTConfig(num_trees=1, max_depth=1, max_bins=2, min_child_weight=0.0), encrypt=False)
    >>> mine, theirs = np.array([[0], [0], [1], [1]]), np.array([[0], [1], [0], [1]])
    >>> passive = PassiveParty(b, theirs, 2, cfg, OPTIMISATIONS)
    >>> t = threading.Thread(target=passive.run); t.start()
    >>> log = ActiveParty(a, mine, np.array([0., 0., 1., 1.]), 2, cfg, PlainCodec(), 1, OPTIMISATIONS).train()
    >>> t.join(); log["trees"][0]["feature"].tolist()
    [0, -1, -1]
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

from sgl.errors import CommError
from sgl.federated.gbdt_packing import SlotPacker, pack_ciphertexts
from sgl.federated.paillier import public_key_from_tensor
from sgl.federated.vf2boost_crypto import PaillierCodec, PlainCodec
from sgl.federated.vf2boost_party import _LEVEL, _NEW_TREE, _SETUP, _SPLITS, _STOP, _ctrl, _Timer

__all__ = ["PassiveParty"]


class PassiveParty:
    """A party with columns only (bin codes ``[n, f]``): accumulates encrypted histograms, applies its
    own splits. It never sees a label, a gradient or the secret key."""

    def __init__(self, channel, codes: np.ndarray, num_bins: int, config: Any,
                 optimisations: Sequence[str], active: int = 0) -> None:
        self.channel, self.codes, self.num_bins = channel, codes, int(num_bins)
        self.config, self.opt, self.active = config, set(optimisations), active
        self.timer = _Timer()

    def run(self) -> Dict[str, Any]:
        start = time.perf_counter()
        op, encrypted, key_bits = self.channel.recv(self.active, "ctrl").tolist()
        key = self.channel.recv(self.active, "ctrl")
        if op != _SETUP:
            raise CommError(f"passive party expected the setup message, got opcode {op}")
        if encrypted:
            self.codec = PaillierCodec(public_key_from_tensor(key))
        else:
            self.codec = PlainCodec(key_bits)
        self.channel.send(_ctrl(self.codes.shape[1], self.num_bins), self.active, "ctrl")
        while True:
            msg = self.channel.recv(self.active, "ctrl").tolist()
            if msg[0] == _STOP:
                break
            if msg[0] == _NEW_TREE:
                self._receive_gradients(msg[1], msg[2])
            elif msg[0] == _LEVEL:
                self._send_histograms()
            elif msg[0] == _SPLITS:
                self._apply_splits(msg[1])
            else:
                raise CommError(f"passive party got unknown opcode {msg[0]}")
        self.timer.seconds["total"] = time.perf_counter() - start
        return {"stats": self.codec.stats.to_dict(), "seconds": dict(self.timer.seconds)}

    def _receive_gradients(self, slot_bits: int, num_blocks: int) -> None:
        self.slot_bits, self.root = slot_bits, None
        n = self.codes.shape[0]
        k = 1 if "packing" in self.opt else 2
        blocks, offset = [], 0
        for _ in range(num_blocks):
            block = self.codec.from_wire(self.channel.recv(self.active, "cipher"))
            rows = len(block) // k
            blocks.append(block if k == 1 else (block[:rows], block[rows:]))
            if "concurrent" in self.opt:  # the root histogram of the rows received so far
                t = time.perf_counter()
                self.root = self._accumulate(np.arange(offset, offset + rows), self.root, blocks[-1], offset)
                self.timer.add("accumulate", t)
            offset += rows
        self.cts = self._join(blocks, k)
        if self.root is None:
            t = time.perf_counter()
            self.root = self._accumulate(np.arange(n), None, self.cts, 0)
            self.timer.add("accumulate", t)

    @staticmethod
    def _join(blocks: List, k: int):
        if k == 1:
            return [c for b in blocks for c in b]
        return ([c for b in blocks for c in b[0]], [c for b in blocks for c in b[1]])

    def _accumulate(self, rows: np.ndarray, tables, cts, offset: int):
        """Add the ciphertexts of ``rows`` into per-(feature, bin) tables (``None`` = empty bin)."""
        f, B = self.codes.shape[1], self.num_bins
        streams = [cts] if "packing" in self.opt else list(cts)
        if tables is None:
            tables = [[None] * (f * B) for _ in streams]
        add = self.codec.add
        for stream, table in zip(streams, tables):
            if "reorder" in self.opt:  # bin by bin from a bin-sorted order
                for j in range(f):
                    codes = self.codes[rows, j].astype(np.int64)
                    order = np.argsort(codes, kind="stable")
                    for r, c in zip(rows[order].tolist(), codes[order].tolist()):
                        slot = j * B + c
                        ct = stream[r - offset]
                        table[slot] = ct if table[slot] is None else add(table[slot], ct)
            else:  # row by row, as the rows come
                codes = self.codes[rows].astype(np.int64) + np.arange(f)[None, :] * B
                for r, slots in zip(rows.tolist(), codes.tolist()):
                    ct = stream[r - offset]
                    for slot in slots:
                        table[slot] = ct if table[slot] is None else add(table[slot], ct)
        return tables

    def _send_histograms(self) -> None:
        row_node = self.channel.recv(self.active, "ids").cpu().numpy()
        build = self.channel.recv(self.active, "ids").tolist()
        self._last_rows = row_node
        ready = []
        for v in build:
            t = time.perf_counter()
            tables = self.root if v == 0 else self._accumulate(np.flatnonzero(row_node == v), None, self.cts, 0)
            message = self._finish(tables)
            self.timer.add("accumulate", t)
            if "concurrent" in self.opt:
                self._send_node(*message)
            else:
                ready.append(message)
        for message in ready:
            self._send_node(*message)

    def _send_node(self, nonempty, ciphertexts) -> None:
        if nonempty is not None:
            self.channel.send(torch.from_numpy(np.packbits(nonempty)), self.active, "ids")
        self.channel.send(self.codec.to_wire(ciphertexts), self.active, "cipher")

    def _finish(self, tables):
        """``(nonempty bins or None, ciphertexts)`` of one node's histogram.

        Without packing every bin goes (g table, then h table). With packing only the non-empty
        bins are packed, and a bitmap says which they are: the active party would learn which bins
        are empty anyway, from their decrypted zero sums."""
        if "packing" not in self.opt:
            zero = self.codec.zero
            return None, [zero if c is None else c for table in tables for c in table]
        nonempty = np.array([c is not None for c in tables[0]], dtype=bool)
        items = [c for c in tables[0] if c is not None]
        per = SlotPacker.for_key(self.codec.key_bits, self.slot_bits).slots // 2
        return nonempty, [_pack(items[i:i + per], 2 * self.slot_bits, self.codec) for i in range(0, len(items), per)]

    def _apply_splits(self, count: int) -> None:
        if not count:
            return
        splits = self.channel.recv(self.active, "ids").tolist()
        row_node = self._last_rows
        flags = np.zeros(self.codes.shape[0], dtype=np.uint8)
        for v, feature, b in splits:
            m = row_node == v
            flags[m] = self.codes[m, feature] <= b
        self.channel.send(torch.from_numpy(flags), self.active, "ids")


def _pack(items: list, width: int, codec) -> Any:
    return pack_ciphertexts(items, width, codec.shift, codec.add)
