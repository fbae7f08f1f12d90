r"""One feature width for node types whose features differ in width (DBLP, IMDB-HGB, Freebase...).

NARS-style propagation sums features of *different* node types into one row, so every type it
touches needs the same width. Public heterogeneous sets rarely have that: on DBLP (MAGNN / PyG
layout) authors carry 334 bag-of-words features, papers 4,231, terms 50-d GloVe vectors. The
official NARS and SeHGNN code give each type a learned linear projection to a common width.

:func:`align_type_features` does the same without parameters in the precompute, exactly: each
type ``t`` gets its own block of columns in a common width :math:`D = \sum_t d_t`,

.. math:: \tilde X_t = [\,0 \;\; X_t \;\; 0\,] \in \mathbb{R}^{n_t \times D},

and since propagation is linear, every hop of :math:`\tilde X` is the concatenation of the
per-type contributions :math:`[P_{:,t} X_t]_t`. The model's first linear layer then holds one
weight block :math:`W_t` per type, so :math:`\tilde X W = \sum_t P_{:,t} X_t W_t`: the same as
projecting each type with a learned :math:`W_t` *before* propagating. To keep :math:`D` and the
precomputed hops small, a type wider than ``max_width`` is first reduced to ``max_width``
columns by a seeded truncated SVD (its top right singular vectors; a parameter-free PCA without
centring, which keeps sparse bag-of-words rows sparse in meaning).

Types whose widths already agree are returned unchanged.

Example:
    >>> import torch
    >>> x = {"author": torch.ones(2, 3), "paper": torch.ones(4, 5)}
    >>> aligned = align_type_features(x)
    >>> {t: tuple(v.shape) for t, v in aligned.items()}
    {'author': (2, 8), 'paper': (4, 8)}
    >>> aligned["author"][0].tolist()
    [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    >>> type_blocks({"author": 3, "paper": 5})
    {'author': (0, 3), 'paper': (3, 8)}
"""
from __future__ import annotations

from typing import Dict, Mapping, Tuple

import torch

from sgl._checks import check_int
from sgl.errors import FeatureError

__all__ = ["align_type_features", "type_blocks", "aligned_width"]


def _capped(widths: Mapping[str, int], max_width: int) -> Dict[str, int]:
    return {t: min(int(w), max_width) for t, w in widths.items()}


def type_blocks(widths: Mapping[str, int], max_width: int = 256) -> Dict[str, Tuple[int, int]]:
    """``{type: (start, stop)}`` columns of each type's block (types in the mapping's order,
    each at most ``max_width`` wide)."""
    check_int(max_width, "max_width", 1)
    blocks, start = {}, 0
    for t, w in _capped(widths, max_width).items():
        blocks[t] = (start, start + w)
        start += w
    return blocks


def aligned_width(widths: Mapping[str, int], max_width: int = 256) -> int:
    """The width :func:`align_type_features` gives these types (their own width when all agree)."""
    if len(set(widths.values())) <= 1:
        return int(next(iter(widths.values()), 0))
    return sum(_capped(widths, max_width).values())


def _reduce(x: torch.Tensor, width: int, seed: int) -> torch.Tensor:
    """``x`` projected on its top ``width`` right singular vectors (seeded randomized SVD)."""
    x = x.to_dense().float() if x.is_sparse else x.float()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        _, _, v = torch.svd_lowrank(x, q=width, niter=4)
    # a fixed sign per direction (largest-magnitude loading positive) so reruns agree exactly
    signs = torch.sign(v.gather(0, v.abs().argmax(0, keepdim=True))).clamp_min(0) * 2 - 1
    return x @ (v * signs)


def align_type_features(x_dict: Mapping[str, torch.Tensor], max_width: int = 256,
                        seed: int = 0) -> Dict[str, torch.Tensor]:
    """Every type's features in its own block of one common width (see the module docstring).

    Args:
        x_dict: ``{type: [n_t, d_t]}`` features (types without features are left out).
        max_width: a type wider than this is first reduced to ``max_width`` columns (truncated SVD).
        seed: seed of the randomized SVD.
    """
    check_int(max_width, "max_width", 1)
    for t, x in x_dict.items():
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise FeatureError(f"features of node type {t!r} must be a 2-D tensor [nodes, features], got "
                               f"{getattr(x, 'shape', type(x).__name__)}")
    widths = {t: int(x.size(1)) for t, x in x_dict.items()}
    if len(set(widths.values())) <= 1:
        return dict(x_dict)
    blocks = type_blocks(widths, max_width)
    total = aligned_width(widths, max_width)
    out = {}
    for t, x in x_dict.items():
        start, stop = blocks[t]
        values = _reduce(x, stop - start, seed) if widths[t] > max_width else x.float()
        row = torch.zeros(x.size(0), total, dtype=values.dtype, device=x.device)
        row[:, start:stop] = values
        out[t] = row
    return out
