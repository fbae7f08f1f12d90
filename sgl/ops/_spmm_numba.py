"""numba internals of :mod:`sgl.ops.kernels` (compiled on first use, cached on disk).

Half-precision storage arrives as 16-bit integer views: ``uint16`` holds bfloat16 bits,
``int16`` float16 bits (numba has no half type). Loads widen to the accumulator in
registers, stores round to nearest even.
"""
from __future__ import annotations

from typing import Optional

import numba
import numpy as np
import torch
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

_I8P = ir.IntType(8).as_pointer()


@intrinsic
def _prefetch(typingctx, arr, offset):
    """``llvm.prefetch(&arr.flat[offset], read, locality 3, data)``; a hint, never faults."""
    sig = types.void(arr, types.uint64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, _I8P), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _u32_as_f32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def _f32_as_u32(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _half_to_f32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.int16), codegen


@intrinsic
def _f32_to_half(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.int16(types.float32), codegen


def _load(a, j, c):
    """``a[j, c]`` widened to float32 (16-bit bfloat16/float16 bits decoded). This Python body is
    the reference meaning; compiled code uses the overload below."""
    v = a[j, c]
    if a.dtype == np.uint16:
        return np.array([np.uint32(v) << np.uint32(16)], dtype=np.uint32).view(np.float32)[0]
    if a.dtype == np.int16:
        return np.float32(np.array([v], dtype=np.int16).view(np.float16)[0])
    return v


def _store(a, i, c, v):
    """``a[i, c] = v`` rounded to nearest even into 16-bit storage (reference meaning, as ``_load``)."""
    if a.dtype == np.uint16:
        a[i, c] = torch.tensor([float(v)], dtype=torch.float32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)[0]
    elif a.dtype == np.int16:
        a[i, c] = np.array([v], dtype=np.float16).view(np.int16)[0]
    else:
        a[i, c] = v


@overload(_load, inline="always")
def _load_impl(a, j, c):
    if a.dtype == types.uint16:
        return lambda a, j, c: _u32_as_f32(np.uint32(a[j, c]) << np.uint32(16))
    if a.dtype == types.int16:
        return lambda a, j, c: _half_to_f32(a[j, c])
    return lambda a, j, c: a[j, c]


@overload(_store, inline="always")
def _store_impl(a, i, c, v):
    if a.dtype == types.uint16:
        def store_bf16(a, i, c, v):
            f = np.float32(v)
            if f != f:
                a[i, c] = np.uint16(0x7FC0)
            else:
                bits = _f32_as_u32(f)
                a[i, c] = np.uint16((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
                                    >> np.uint32(16))
        return store_bf16
    if a.dtype == types.int16:
        def store_half(a, i, c, v):
            a[i, c] = _f32_to_half(np.float32(v))
        return store_half

    def store_float(a, i, c, v):
        a[i, c] = v
    return store_float


@njit(parallel=True, cache=True, nogil=True, fastmath={"contract"})
def spmm(bounds, indptr, indices, values, loop, x, out, c0, c1, prefetch, lines, step):  # pragma: no cover - compiled
    """``out[i, c0:c1] = sum_e values[e] * x[indices[e], c0:c1] + loop[i] * x[i, c0:c1]``.

    Prefetching runs on the block's edge stream, not per row: while edge ``p`` is summed,
    the source row of edge ``p + prefetch`` is requested, whichever row it belongs to (with
    ~10 edges per row a per-row window leaves most edges unprefetched), and every one of
    its cache lines (``lines`` prefetches ``step`` elements apart, the last clamped to the
    row's end), not only the first. Column and row indices are unsigned so numba drops its
    negative-index wraparound checks, which otherwise keep LLVM from vectorising the
    column loop (measured 3x slower).
    """
    width = c1 - c0
    u0 = np.uint64(c0)
    d = np.uint64(x.shape[1])
    last_col = np.uint64(width - 1)
    ustep = np.uint64(step)
    flat = x.reshape(-1)
    has_loop = loop.size > 0
    for b in prange(bounds.size - 1):
        acc = np.empty(width, dtype=values.dtype)
        stop = indptr[bounds[b + 1]]
        for i in range(bounds[b], bounds[b + 1]):
            ui = np.uint64(i)
            for c in range(width):
                acc[c] = 0.0
            start = indptr[i]
            end = indptr[i + 1]
            for p in range(start, end):
                if prefetch > 0 and p + prefetch < stop:
                    base = np.uint64(indices[p + prefetch]) * d + u0
                    for line in range(lines):
                        _prefetch(flat, base + min(np.uint64(line) * ustep, last_col))
                j = np.uint64(indices[p])
                w = values[p]
                for c in range(width):
                    acc[c] += w * _load(x, j, u0 + np.uint64(c))
            if has_loop:
                w = loop[i]
                for c in range(width):
                    acc[c] += w * _load(x, ui, u0 + np.uint64(c))
            for c in range(width):
                _store(out, ui, u0 + np.uint64(c), acc[c])


@njit(parallel=True, cache=True, nogil=True)
def edge_values(bounds, indptr, indices, left, right, weights, scale, out):  # pragma: no cover - compiled
    """``out[e] = right[indices[e]] * left[i]`` (``* weights[e]`` when given, ``* scale[0]`` when
    ``scale`` is non-empty), rounded after each product in this order, the order of the torch
    expression it replaces, so the values are bit-identical."""
    has_w = weights.size > 0
    has_s = scale.size > 0
    for b in prange(bounds.size - 1):
        for i in range(bounds[b], bounds[b + 1]):
            li = left[i]
            for e in range(indptr[i], indptr[i + 1]):
                v = right[np.uint64(indices[e])] * li
                if has_w:
                    v = v * weights[e]
                if has_s:
                    v = v * scale[0]
                out[e] = v


def set_threads(threads: Optional[int]) -> int:
    """Run numba's parallel loops on ``threads`` (default torch's) threads, capped at numba's pool."""
    want = torch.get_num_threads() if threads is None else int(threads)
    workers = max(1, min(want, numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(workers)
    return workers
