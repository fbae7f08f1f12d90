"""Key-value codecs: lossless keys, SketchML's bucket bounds, byte counts, bad input."""
import pytest
import torch

from sgl.comm.compress import (
    FP32Codec, MinMaxSketch, SketchMLCodec, Uniform8Codec, ZlibCodec, build_codec, decode_keys, encode_keys,
    pack_bits, unpack_bits,
)
from sgl.errors import CommError, ConfigError


def _gradients(n=600, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    keys = torch.randperm(50_000, generator=g)[:n]
    # skewed, mostly tiny values with a few large ones, like embedding gradients
    values = torch.randn(n, dim, generator=g) * torch.rand(n, 1, generator=g) ** 3 * 0.01
    return keys, values


@pytest.mark.parametrize("bits", [1, 3, 5, 8])
def test_pack_bits_roundtrip(bits):
    v = torch.randint(0, 1 << bits, (1001,), generator=torch.Generator().manual_seed(bits))
    packed = pack_bits(v, bits)
    assert packed.numel() == (1001 * bits + 7) // 8
    assert torch.equal(unpack_bits(packed, bits, 1001), v)


def test_delta_binary_keys_are_lossless_for_any_gaps():
    keys = torch.tensor([0, 1, 1, 255, 256, 70_000, 2**33 + 5, 2**40, 12])
    blob, order = encode_keys(keys)
    assert torch.equal(decode_keys(blob, keys.numel()), keys[order])
    assert torch.equal(keys[order], keys.sort().values)
    with pytest.raises(CommError, match="corrupt or truncated"):
        decode_keys(blob[:-1], keys.numel())


@pytest.mark.parametrize("codec", [FP32Codec(), ZlibCodec(), Uniform8Codec(), Uniform8Codec(key_coding="delta"),
                                   SketchMLCodec(), SketchMLCodec(ratio=None)])
def test_every_codec_decodes_every_key_and_counts_exactly(codec):
    keys, values = _gradients()
    counts = torch.randint(1, 300, (keys.numel(),), generator=torch.Generator().manual_seed(1))
    k, v, c = codec.decode(codec.encode(keys, values, counts))
    order = torch.argsort(keys) if codec.key_coding == "delta" else torch.arange(keys.numel())
    assert torch.equal(k, keys[order]) and torch.equal(c, counts[order])
    assert v.shape == values.shape
    if isinstance(codec, (FP32Codec, ZlibCodec)):
        assert torch.equal(v, values[order])


def test_sketchml_exact_ranks_decode_inside_their_bucket():
    keys, values = _gradients(seed=2)
    codec = SketchMLCodec(ratio=None)
    bucket, edges = codec.bucket_of(values[torch.argsort(keys)])
    _, v, _ = codec.decode(codec.encode(keys, values))
    v = v.reshape(-1)
    assert bool(((v >= edges[bucket]) & (v <= edges[bucket + 1])).all())


def test_sketchml_sketch_keeps_sign_group_and_never_overshoots():
    keys, values = _gradients(seed=3)
    codec = SketchMLCodec(ratio=0.3)
    sorted_values = values[torch.argsort(keys)].reshape(-1)
    bucket, edges = codec.bucket_of(sorted_values)
    _, v, _ = codec.decode(codec.encode(keys, values))
    got, _ = codec.bucket_of(v.reshape(-1))
    v = v.reshape(-1)
    assert torch.equal(got // codec.per, bucket // codec.per)            # same group
    assert bool(((v < 0) == (sorted_values < 0)).all())                    # same sign
    far = torch.maximum(edges[bucket].abs(), edges[bucket + 1].abs())
    assert bool((v.abs() <= far + 1e-12).all())                            # never beyond its own bucket
    assert (got != bucket).any()                                           # collisions did shrink some


def test_sketchml_bytes_are_far_below_fp32_and_uniform8():
    keys, values = _gradients(n=2000, dim=16, seed=4)
    fp32 = FP32Codec().encode(keys, values).numel()
    u8 = Uniform8Codec().encode(keys, values).numel()
    sk = SketchMLCodec().encode(keys, values).numel()
    assert fp32 == 24 + 2000 * (8 + 64)
    assert sk * 4 < fp32 and sk * 1.5 < u8


def test_uniform8_is_unbiased():
    values = torch.full((20_000, 1), 0.3)
    values[0] = 1.0  # the scale
    codec = Uniform8Codec(seed=5)
    _, v, _ = codec.decode(codec.encode(torch.arange(20_000), values))
    assert abs(float(v[1:].mean()) - 0.3) < 2e-4 and set(v[1:].unique().tolist()) != {0.3}


def test_minmax_sketch_answers_are_lower_bounds():
    g = torch.Generator().manual_seed(6)
    ranks = torch.randint(0, 32, (500,), generator=g)
    sketch = MinMaxSketch(2, 150, 32, seed=1)
    sketch.insert(torch.arange(500), ranks)
    got = sketch.query(torch.arange(500))
    assert bool((got <= ranks).all()) and bool((got == ranks).float().mean() > 0.3)


def test_bad_codec_input_is_refused():
    with pytest.raises(ConfigError, match="at least 0.05 cells per value"):
        SketchMLCodec(ratio=0.01)                       # a sketch smaller than its minimum
    with pytest.raises(ConfigError, match="at least one cell"):
        MinMaxSketch(2, 0, 32)
    with pytest.raises(ConfigError, match="multiple of groups"):
        SketchMLCodec(bins=100, groups=8)
    with pytest.raises(ConfigError, match="unknown key-value codec"):
        build_codec("gzip")
    with pytest.raises(ConfigError, match="1-D int64"):
        FP32Codec().encode(torch.tensor([1.0]), torch.ones(1, 2))
    with pytest.raises(ConfigError, match="n = 2 keys"):
        FP32Codec().encode(torch.tensor([1, 2]), torch.ones(3, 2))
    payload = SketchMLCodec().encode(*_gradients(n=50))
    with pytest.raises(CommError, match="same rows/ratio"):
        SketchMLCodec(ratio=0.5).decode(payload)          # the two ends disagree on the sketch
    with pytest.raises(CommError, match="does not match this codec"):
        FP32Codec().decode(payload)


@pytest.mark.parametrize("codec", [FP32Codec(), Uniform8Codec(), ZlibCodec(), SketchMLCodec()])
def test_an_empty_push_roundtrips(codec):
    k, v, c = codec.decode(codec.encode(torch.zeros(0, dtype=torch.int64), torch.zeros(0, 4), torch.zeros(0).long()))
    assert k.numel() == 0 and v.shape == (0, 4) and c.numel() == 0
