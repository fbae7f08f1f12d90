r"""ProjPert-iso on CPU tensors in one numba kernel (compiled on first use, cached on disk).

The torch path of :func:`sgl.federated.defenses.projpert` is a chain of ~30 small ops (class
means, centred squares, closed-form targets, per-row scales, ``addcmul``); on the default WDL's
``[1024, 208]`` derivatives their dispatch costs more than their arithmetic. :func:`projpert_iso_host`
does the same math in three passes over ``g`` inside one call:

1. per-class column sums (float64) and counts, so :math:`\mu_1, \mu_0`;
2. per-class centred squares (two-pass, no cancellation), so population stds :math:`s_1, s_0`;
   then per column :math:`t=\max(|\mu_1-\mu_0|/\sqrt c,\ s_1,\ s_0)`,
   :math:`\sigma_c=\sqrt{\max(t^2-s_c^2,0)}`;
3. :math:`g'_{ij} = g_{ij} + z_{ij}\,\sigma_{y_i j}` in ``g``'s dtype.

Moments accumulate in float64 (the torch path in ``g``'s dtype), so the two paths agree up to
float rounding. Host-only: callers use it for CPU tensors and keep the torch ops elsewhere.

Example:
    >>> import torch
    >>> g = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    >>> y = torch.tensor([1.0, 1.0, 0.0, 0.0])
    >>> out = projpert_iso_host(g, y > 0.5, torch.zeros(4, 2), 1.0)   # zero noise: g unchanged
    >>> torch.equal(out, g)
    True
    >>> projpert_iso_host(g, torch.ones(4, dtype=torch.bool), torch.zeros(4, 2), 1.0) is None  # one class
    True
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from numba import njit

__all__ = ["projpert_iso_host", "host_kernel_applies", "load_host_kernel"]

#: dtypes the kernel is compiled for
HOST_DTYPES = (torch.float32, torch.float64)


@njit(cache=True, nogil=True)
def _projpert_iso(g, pos, z, inv_sqrt_c, out):  # pragma: no cover - compiled
    """Fill ``out [B, d]`` with ``g`` plus ProjPert-iso noise; False (``out`` untouched) for one class."""
    rows, d = g.shape
    sum1 = np.zeros(d)
    sum0 = np.zeros(d)
    n1 = 0
    for i in range(rows):
        if pos[i]:
            n1 += 1
            for j in range(d):
                sum1[j] += g[i, j]
        else:
            for j in range(d):
                sum0[j] += g[i, j]
    n0 = rows - n1
    if n1 == 0 or n0 == 0:
        return False
    mu1 = sum1 / n1
    mu0 = sum0 / n0
    sq1 = np.zeros(d)
    sq0 = np.zeros(d)
    for i in range(rows):
        if pos[i]:
            for j in range(d):
                e = g[i, j] - mu1[j]
                sq1[j] += e * e
        else:
            for j in range(d):
                e = g[i, j] - mu0[j]
                sq0[j] += e * e
    std1 = np.empty(d, dtype=g.dtype)
    std0 = np.empty(d, dtype=g.dtype)
    for j in range(d):
        s1 = math.sqrt(sq1[j] / n1)
        s0 = math.sqrt(sq0[j] / n0)
        t = max(abs(mu1[j] - mu0[j]) * inv_sqrt_c, max(s1, s0))
        std1[j] = math.sqrt(max(t * t - s1 * s1, 0.0))
        std0[j] = math.sqrt(max(t * t - s0 * s0, 0.0))
    for i in range(rows):
        std = std1 if pos[i] else std0
        for j in range(d):
            out[i, j] = g[i, j] + z[i, j] * std[j]
    return True


def host_kernel_applies(flat: torch.Tensor, noise: torch.Tensor, pos: Optional[torch.Tensor] = None) -> bool:
    """Whether :func:`projpert_iso_host` can take these tensors (CPU, float32/64, no autograd)."""
    return (flat.device.type == "cpu" and noise.device.type == "cpu" and flat.dtype in HOST_DTYPES
            and noise.dtype == flat.dtype and not flat.requires_grad and not noise.requires_grad
            and (pos is None or pos.device.type == "cpu"))


def projpert_iso_host(flat: torch.Tensor, pos: torch.Tensor, noise: torch.Tensor, c: float) -> Optional[torch.Tensor]:
    """ProjPert-iso of CPU derivatives ``flat [B, d]`` with labels ``pos [B]`` (bool), standard
    normal ``noise [B, d]`` and per-coordinate budget ``c``; ``None`` when the batch has one class."""
    g = flat.contiguous()
    z = noise.contiguous()
    out = torch.empty_like(g)
    done = _projpert_iso(g.numpy(), pos.reshape(-1).contiguous().numpy(), z.numpy(), 1.0 / math.sqrt(c),
                         out.numpy())
    return out if done else None


def load_host_kernel(dtype: torch.dtype = torch.float32) -> None:
    """Compile (or load from the disk cache) the kernel for ``dtype`` now, so no batch pays for it.

    The first numba call of a process costs about a second even from the cache.
    """
    if dtype in HOST_DTYPES:
        g = torch.zeros(2, 1, dtype=dtype)
        projpert_iso_host(g, torch.tensor([True, False]), g, 1.0)
