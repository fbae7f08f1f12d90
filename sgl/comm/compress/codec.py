"""Key-value codecs: what a sparse push ``(keys, values[, counts])`` becomes on the wire.

A :class:`KVCodec` turns int64 ``keys`` ``[n]``, float ``values`` ``[n]`` or ``[n, dim]`` and
optional non-negative int ``counts`` ``[n]`` into one ``uint8`` tensor and back. The payload is
a 24-byte header (n, dim, key coding, count width, key bytes, count bytes as int32), the key
section (raw int64, or SketchML's delta-binary code), the counts in the fewest whole bytes
that hold their maximum, and the codec's value section. ``payload.numel()`` is exactly the
number of bytes that cross the wire.

Codecs here (the baselines of SketchML; :class:`~sgl.comm.compress.SketchMLCodec` is in its own
module):

* :class:`FP32Codec` -- uncompressed: raw int64 keys and float32 values;
* :class:`Uniform8Codec` -- norm-scaled 8-bit fixed point with true stochastic rounding
  (``round(v / max|v| * 127)`` up with probability equal to the remainder; unbiased);
* :class:`ZlibCodec` -- ``zlib`` of the uncompressed payload (lossless; host-only).

Decoding returns keys in the order the key section holds them: as sent for ``raw`` keys,
ascending for ``delta`` keys (values and counts follow their keys).

>>> import torch
>>> keys, values = torch.tensor([7, 2, 9]), torch.tensor([[0.5, -1.0], [0.25, 0.0], [1.0, 2.0]])
>>> codec = FP32Codec()
>>> payload = codec.encode(keys, values, torch.tensor([1, 3, 2]))
>>> k, v, c = codec.decode(payload)
>>> k.tolist(), torch.equal(v, values), c.tolist(), payload.numel()   # 24 + 3*8 + 3*1 + 6*4
([7, 2, 9], True, [1, 3, 2], 75)
>>> k, v, _ = Uniform8Codec(key_coding="delta").decode(Uniform8Codec(key_coding="delta").encode(keys, values))
>>> k.tolist(), float((v - values[[1, 0, 2]]).abs().max()) <= 2.0 / 127
([2, 7, 9], True)
"""
from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from sgl.comm.compress.bitpack import decode_keys, encode_keys
from sgl.errors import CommError, ConfigError

__all__ = ["KVCodec", "FP32Codec", "Uniform8Codec", "ZlibCodec", "KV_CODECS", "build_codec",
           "stochastic_round"]

_HEADER = 6  # int32 fields
_KEY_CODINGS = ("raw", "delta")
_COUNT_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

Decoded = Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]


def stochastic_round(x: torch.Tensor, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``floor(x)`` plus 1 with probability ``x - floor(x)``: unbiased, ``E[round(x)] = x``.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> r = stochastic_round(torch.full((20000,), 2.25), g)
    >>> sorted(set(r.tolist())), abs(float(r.mean()) - 2.25) < 0.02
    ([2.0, 3.0], True)
    """
    low = torch.floor(x)
    u = torch.rand(x.shape, device=x.device, generator=generator)
    return low + (u < (x - low)).to(x.dtype)


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


class KVCodec(ABC):
    """Encode ``(keys, values[, counts])`` into one ``uint8`` payload and back.

    Args:
        key_coding: ``"raw"`` (8 bytes a key, order kept) or ``"delta"`` (SketchML's sorted
            delta-binary code).
        seed: seeds the codec's random rounding (a generator per device, advanced per call).
    """

    name = "kv"

    def __init__(self, key_coding: str = "raw", seed: int = 0) -> None:
        if key_coding not in _KEY_CODINGS:
            raise ConfigError(f"{type(self).__name__}: key_coding must be one of {_KEY_CODINGS}, got {key_coding!r}")
        self.key_coding = key_coding
        self.seed = int(seed)
        self._generators: Dict[str, torch.Generator] = {}

    def generator(self, device: torch.device) -> torch.Generator:
        """This codec's random generator on ``device`` (created, seeded, on first use)."""
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]

    # -- the value section: what subclasses define -------------------------------------------
    @abstractmethod
    def encode_values(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``values`` ``[n, dim]`` (float32, in key-section order) as ``uint8``."""

    @abstractmethod
    def decode_values(self, keys: torch.Tensor, blob: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        """The float32 ``[n, dim]`` values of :meth:`encode_values`."""

    # -- framing --------------------------------------------------------------------------------
    def encode(self, keys: torch.Tensor, values: torch.Tensor, counts: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The payload of one message (``uint8``, on ``values``' device)."""
        keys, values, counts, squeeze = _check_kv(keys, values, counts)
        n, dim = values.shape
        device = values.device
        keys = keys.to(device)
        if self.key_coding == "delta":
            key_blob, order = encode_keys(keys)
            keys, values = keys[order], values[order]
            counts = None if counts is None else counts.to(device)[order]
        else:
            key_blob = _bytes_of(keys)
        width, count_blob = 0, torch.zeros(0, dtype=torch.uint8, device=device)
        if counts is not None:
            top = int(counts.max()) if n else 0
            width = next(w for w in (1, 2, 4, 8) if top < (1 << (8 * w - (0 if w == 1 else 1))))
            count_blob = _bytes_of(counts.to(device).to(_COUNT_DTYPES[width]))
        value_blob = self.encode_values(keys, values.to(torch.float32))
        header = torch.tensor([n, dim * (-1 if squeeze else 1), _KEY_CODINGS.index(self.key_coding), width,
                               key_blob.numel(), count_blob.numel()], dtype=torch.int32, device=device)
        return torch.cat([_bytes_of(header), key_blob, count_blob, value_blob])

    def decode(self, payload: torch.Tensor) -> Decoded:
        """``(keys, values, counts)`` of one payload; ``counts`` is ``None`` when none were sent."""
        if payload.dtype != torch.uint8 or payload.dim() != 1 or payload.numel() < 4 * _HEADER:
            raise CommError(f"{type(self).__name__}.decode: expected a 1-D uint8 payload of at least "
                            f"{4 * _HEADER} bytes, got {payload.dtype} {tuple(payload.shape)}")
        n, sdim, coding, width, key_len, count_len = payload[:4 * _HEADER].clone().view(torch.int32).tolist()
        dim, squeeze = abs(sdim), sdim < 0
        if coding != _KEY_CODINGS.index(self.key_coding) or width not in (0, 1, 2, 4, 8) or n < 0 or \
                4 * _HEADER + key_len + count_len > payload.numel():
            raise CommError(f"{type(self).__name__}.decode: the payload header (n={n}, key coding {coding}, count "
                            f"width {width}) does not match this codec (key_coding={self.key_coding!r}); both ends "
                            "must use the same codec and parameters")
        at = 4 * _HEADER
        key_blob = payload[at:at + key_len]
        at += key_len
        if self.key_coding == "delta":
            keys = decode_keys(key_blob, n)
        else:
            keys = key_blob.clone().view(torch.int64)
        counts = None
        if width:
            counts = payload[at:at + count_len].clone().view(_COUNT_DTYPES[width]).to(torch.int64)
        at += count_len
        values = self.decode_values(keys, payload[at:], n, dim)
        return keys, (values.reshape(n) if squeeze else values), counts

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key_coding={self.key_coding!r})"


def _check_kv(keys: torch.Tensor, values: torch.Tensor, counts: Optional[torch.Tensor]
              ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], bool]:
    if not isinstance(keys, torch.Tensor) or keys.dim() != 1 or keys.dtype != torch.int64:
        raise ConfigError(f"codec: keys must be a 1-D int64 tensor, got {getattr(keys, 'dtype', type(keys))} "
                          f"{tuple(getattr(keys, 'shape', ()))}")
    if not isinstance(values, torch.Tensor) or not values.is_floating_point() or values.dim() not in (1, 2) \
            or values.shape[0] != keys.numel():
        raise ConfigError(f"codec: values must be a float tensor [n] or [n, dim] with n = {keys.numel()} keys, got "
                          f"{getattr(values, 'dtype', type(values))} {tuple(getattr(values, 'shape', ()))}")
    if counts is not None and (counts.shape != keys.shape or counts.is_floating_point()
                               or (counts.numel() and int(counts.min()) < 0)):
        raise ConfigError(f"codec: counts must be non-negative ints shaped like keys {tuple(keys.shape)}, got "
                          f"{counts.dtype} {tuple(counts.shape)}")
    squeeze = values.dim() == 1
    return keys, values if not squeeze else values.reshape(-1, 1), counts, squeeze


class FP32Codec(KVCodec):
    """Uncompressed float32 values (4 bytes each)."""

    name = "none"

    def encode_values(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return _bytes_of(values)

    def decode_values(self, keys: torch.Tensor, blob: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        if blob.numel() != 4 * n * dim:
            raise CommError(f"FP32Codec.decode: value section has {blob.numel()} bytes, expected {4 * n * dim}")
        return blob.clone().view(torch.float32).reshape(n, dim)


class Uniform8Codec(KVCodec):
    """Norm-scaled 8-bit fixed point: ``q = sround(v / max|v| * 127)``, one float32 scale per message."""

    name = "uniform8"

    def encode_values(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        scale = values.abs().max() if values.numel() else values.new_zeros(())
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = stochastic_round(values / safe * 127, self.generator(values.device)).clamp(-127, 127)
        return torch.cat([_bytes_of(scale.reshape(1)), _bytes_of(q.to(torch.int8))])

    def decode_values(self, keys: torch.Tensor, blob: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        if blob.numel() != 4 + n * dim:
            raise CommError(f"Uniform8Codec.decode: value section has {blob.numel()} bytes, expected {4 + n * dim}")
        scale = blob[:4].clone().view(torch.float32)
        return blob[4:].clone().view(torch.int8).to(torch.float32).reshape(n, dim) * (scale / 127)


class ZlibCodec(KVCodec):
    """``zlib`` (level 6) of the whole :class:`FP32Codec` payload. Host-only: compresses in host memory
    and returns the payload on the input's device."""

    name = "zlib"

    def __init__(self, level: int = 6, key_coding: str = "raw", seed: int = 0) -> None:
        super().__init__(key_coding, seed)
        self.level = int(level)
        self._raw = FP32Codec(key_coding)

    def encode(self, keys: torch.Tensor, values: torch.Tensor, counts: Optional[torch.Tensor] = None) -> torch.Tensor:
        raw = self._raw.encode(keys, values, counts)
        packed = zlib.compress(raw.cpu().numpy().tobytes(), self.level)
        return torch.frombuffer(bytearray(packed), dtype=torch.uint8).to(raw.device)

    def decode(self, payload: torch.Tensor) -> Decoded:
        try:
            raw = zlib.decompress(payload.cpu().numpy().tobytes())
        except zlib.error as exc:
            raise CommError(f"ZlibCodec.decode: not a zlib stream ({exc})") from exc
        return self._raw.decode(torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy()).to(payload.device))

    # the value section is FP32Codec's (encode/decode above wrap the whole framed payload)
    def encode_values(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return self._raw.encode_values(keys, values)

    def decode_values(self, keys: torch.Tensor, blob: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        return self._raw.decode_values(keys, blob, n, dim)


#: ``--compress`` names -> codec classes (SketchML registers itself on import of the package)
KV_CODECS: Dict[str, type] = {"none": FP32Codec, "uniform8": Uniform8Codec, "zlib": ZlibCodec}


def build_codec(name: str, **options) -> Optional[KVCodec]:
    """The codec called ``name`` (``none`` gives ``None``: no compression), built with ``options``.

    >>> build_codec("uniform8"), build_codec("none")
    (Uniform8Codec(key_coding='raw'), None)
    """
    key = str(name).lower()
    if key not in KV_CODECS:
        raise ConfigError(f"unknown key-value codec {name!r}; choose one of {', '.join(sorted(KV_CODECS))}")
    return None if key == "none" else KV_CODECS[key](**options)
