"""Compressed and secure communication: SketchML, TinyScript, KVSAgg and their baselines.

It sits on :mod:`sgl.comm` (below models and systems), so HET, HET-GMP, DDP, MoE and MEMO can
all use it. One concept per module:

* :mod:`~sgl.comm.compress.bitpack` -- bit packing and SketchML's delta-binary key code;
* :mod:`~sgl.comm.compress.codec` -- key-value codecs for sparse pushes: :class:`FP32Codec`
  (uncompressed), :class:`Uniform8Codec` (8-bit fixed point, stochastic rounding),
  :class:`ZlibCodec`; :func:`build_codec` by name;
* :mod:`~sgl.comm.compress.minmax` / :mod:`~sgl.comm.compress.sketchml` -- SketchML
  (quantile buckets, :class:`MinMaxSketch` of bucket indices, delta-binary keys);
  ``DistTransport(..., compressor=SketchMLCodec())`` compresses HET / HET-GMP pushes;
* :mod:`~sgl.comm.compress.tinyscript` -- TinyScript's Weibull-fitted non-uniform stochastic
  quantiser and the uniform (QSGD-style) baseline; :mod:`~sgl.comm.compress.hooks` -- a DDP
  communication hook and saved-tensor hooks for activations; :mod:`~sgl.comm.compress.kv_hook` --
  a DDP hook that sends sparse embedding gradients through a key-value codec (SketchML);
* :mod:`~sgl.comm.compress.iblt`, :mod:`~sgl.comm.compress.masks`,
  :mod:`~sgl.comm.compress.kvsagg` -- KVSAgg: HyperIBLT, X25519 pairwise masks, and
  :func:`kvsagg_sum` over sgl.comm ranks (no dropout recovery).

Bad parameters raise :class:`~sgl.errors.ConfigError`; malformed payloads and tables from
another process raise :class:`~sgl.errors.CommError`.

>>> import torch
>>> from sgl.comm.compress import SketchMLCodec
>>> codec = SketchMLCodec()
>>> keys, values = torch.arange(0, 3000, 3), torch.randn(1000, 16) * 1e-3
>>> k, v, _ = codec.decode(codec.encode(keys, values))
>>> torch.equal(k, keys), codec.encode(keys, values).numel() < (8 + 64) * 1000 / 4
(True, True)
"""
from sgl.comm.compress.bitpack import bits_for, decode_keys, encode_keys, pack_bits, unpack_bits
from sgl.comm.compress.codec import (
    KV_CODECS, FP32Codec, KVCodec, Uniform8Codec, ZlibCodec, build_codec, stochastic_round,
)
from sgl.comm.compress.minmax import MinMaxSketch
from sgl.comm.compress.sketchml import SketchMLCodec, quantile_edges
from sgl.comm.compress.tinyscript import (
    TinyScriptQuantizer, UniformQuantizer, build_quantizer, check_bits, fit_weibull, level_variance,
)
from sgl.comm.compress.hooks import QuantHookState, quantized_allreduce_hook, quantized_saved_tensors
from sgl.comm.compress.kv_hook import KVHookState, sparse_kv_hook
from sgl.comm.compress.iblt import FIELD_PRIME, PEEL_THRESHOLD, HyperIBLT, IBLTResult
from sgl.comm.compress.masks import PairwiseMasker, X25519Identity, prg_field
from sgl.comm.compress.kvsagg import aggregate_tables, check_specs, kvsagg_sum, table_bytes

__all__ = [
    "bits_for", "pack_bits", "unpack_bits", "encode_keys", "decode_keys",
    "KVCodec", "FP32Codec", "Uniform8Codec", "ZlibCodec", "KV_CODECS", "build_codec", "stochastic_round",
    "MinMaxSketch", "SketchMLCodec", "quantile_edges",
    "TinyScriptQuantizer", "UniformQuantizer", "build_quantizer", "check_bits", "fit_weibull", "level_variance",
    "QuantHookState", "quantized_allreduce_hook", "quantized_saved_tensors", "KVHookState", "sparse_kv_hook",
    "HyperIBLT", "IBLTResult", "FIELD_PRIME", "PEEL_THRESHOLD",
    "X25519Identity", "PairwiseMasker", "prg_field",
    "kvsagg_sum", "aggregate_tables", "check_specs", "table_bytes",
]
