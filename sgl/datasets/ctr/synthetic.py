"""Seeded synthetic CTR data: Zipf-distributed ids and a planted logistic model."""
from __future__ import annotations

import math
from numbers import Real
from typing import Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.datasets.ctr._common import PathLike
from sgl.datasets.ctr.data import CTRData, transform_dense
from sgl.errors import ConfigError

__all__ = ["make_synthetic_ctr", "load_synthetic_ctr"]


def _zipf_sampler(n: int, a: float) -> np.ndarray:
    """CDF of a Zipf law truncated to ranks 1..n (p_k ∝ k^-a)."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-a)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def make_synthetic_ctr(num_rows: int, field_dims: Sequence[int], num_dense: int = 13, zipf_a: float = 1.1,
                       seed: int = 0, weight_scale: float = 1.0, interaction_rank: int = 4,
                       bias: float = -1.0) -> CTRData:
    r"""Seeded synthetic CTR data with Zipf-distributed ids and a planted logistic model.

    Field ``f`` draws ids ``1..field_dims[f]-1`` (0 stays the unused unknown bucket) with
    :math:`P(\text{rank } k) \propto k^{-a}`; ranks map to ids through a random permutation,
    so frequent ids are not simply the small ones. The label is Bernoulli of

    .. math:: \sigma\Big(b + \sum_f w_f[x_f] + \sum_{f<g} \langle v_f[x_f], v_g[x_g]\rangle
              + \beta^\top d\Big)

    with per-id weights :math:`w \sim N(0, s^2)`, rank-``interaction_rank`` pairwise factors
    :math:`v \sim N(0, s^2/(r\sqrt{F}))` and dense features :math:`d = \log(1+\text{LogNormal})`.
    Memory is O(N·F + Σ field_dims): it scales to millions of rows and ids.
    """
    num_rows = check_int(num_rows, "num_rows", 1)
    num_dense = check_int(num_dense, "num_dense", 0)
    check_int(interaction_rank, "interaction_rank", 0)
    if len(field_dims) == 0:
        raise ConfigError("field_dims must list at least one field")
    dims = [check_int(d, f"field_dims[{i}]", 2) for i, d in enumerate(field_dims)]
    if isinstance(zipf_a, bool) or not isinstance(zipf_a, Real) or zipf_a <= 0:
        raise ConfigError(f"zipf_a must be a positive number, got {zipf_a!r}")
    rng = np.random.default_rng(seed)
    num_fields = len(dims)
    sparse = np.empty((num_rows, num_fields), dtype=np.int64)
    logit = np.full(num_rows, float(bias))
    factors = np.zeros((num_rows, interaction_rank))
    factor_sq = np.zeros(num_rows)
    v_scale = weight_scale / math.sqrt(max(interaction_rank, 1) * math.sqrt(num_fields))
    for f, dim in enumerate(dims):
        cdf = _zipf_sampler(dim - 1, zipf_a)
        ranks = np.searchsorted(cdf, rng.random(num_rows), side="right")
        ranks = np.minimum(ranks, dim - 2)
        ids = rng.permutation(dim - 1)[ranks] + 1
        sparse[:, f] = ids
        w = rng.normal(0.0, weight_scale, size=dim)
        logit += w[ids]
        if interaction_rank:
            v = rng.normal(0.0, v_scale, size=(dim, interaction_rank))[ids]
            factors += v
            factor_sq += (v * v).sum(axis=1)
    if interaction_rank:  # sum over pairs f<g of <v_f, v_g> = ((Σv)^2 - Σv^2) / 2
        logit += 0.5 * ((factors * factors).sum(axis=1) - factor_sq)
    dense_raw = rng.lognormal(0.0, 1.0, size=(num_rows, num_dense))
    dense = transform_dense(dense_raw)
    if num_dense:
        beta = rng.normal(0.0, weight_scale / math.sqrt(num_dense), size=num_dense)
        logit += (dense - dense.mean(axis=0)) @ beta
    labels = (rng.random(num_rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    return CTRData(dense, sparse, labels, dims, [f"F{f + 1}" for f in range(num_fields)])


def load_synthetic_ctr(root: Optional[PathLike] = None, num_rows: int = 100_000,
                       field_dims: Optional[Sequence[int]] = None, num_fields: int = 8,
                       ids_per_field: int = 10_000, num_dense: int = 13, zipf_a: float = 1.1,
                       seed: int = 0) -> CTRData:
    """Registry entry ``synthetic-ctr``: :func:`make_synthetic_ctr` with ``num_fields`` fields of
    ``ids_per_field`` ids unless ``field_dims`` is given (``root`` is ignored: nothing is read)."""
    dims = list(field_dims) if field_dims is not None else [check_int(ids_per_field, "ids_per_field", 2)] * \
        check_int(num_fields, "num_fields", 1)
    return make_synthetic_ctr(num_rows, dims, num_dense=num_dense, zipf_a=zipf_a, seed=seed)
