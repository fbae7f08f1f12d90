"""Input checks shared by every public entry point that takes graph data.

Validation happens once, at the API boundary (the scikit-learn habit), so the
internal code can trust its arguments. Each check raises an :mod:`sgl.errors`
exception whose message says what was received, what was expected and how to
fix it. Scalar checks (integers, reals, probabilities, byte sizes) that every layer shares,
``sgl.systems`` included, live in :mod:`sgl._checks`.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from sgl.errors import FeatureError, GraphError

__all__ = [
    "as_tensor",
    "check_index_tensor",
    "check_node_ids",
    "check_features",
    "check_labels",
    "check_mask",
    "check_edge_weight",
    "check_edge_attr",
    "count_nonfinite",
]


def as_tensor(value: Any, name: str, error: type = GraphError) -> torch.Tensor:
    """Convert numpy arrays / lists to a tensor; reject anything else clearly."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise error(f"{name} has dtype object; pass a numeric numpy array or torch.Tensor")
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, (list, tuple)):
        try:
            return torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as exc:
            raise error(f"{name} could not be converted to a tensor: {exc}") from exc
    raise error(f"{name} must be a torch.Tensor or numpy array, got {type(value).__name__}")


def check_index_tensor(value: Any, name: str) -> torch.Tensor:
    """Return ``value`` as an int64 tensor; integer dtypes are widened, others rejected."""
    tensor = as_tensor(value, name)
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise GraphError(
            f"{name} has dtype {tensor.dtype}; node ids must be integers "
            f"(convert with .long() if the values are whole numbers)"
        )
    return tensor.to(torch.int64).contiguous()


def check_node_ids(ids: torch.Tensor, num_nodes: int, name: str) -> None:
    """Every id must lie in ``[0, num_nodes)``."""
    if ids.numel() == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        raise GraphError(f"{name} has negative node id {lo}; ids must be in [0, num_nodes)")
    if hi >= num_nodes:
        raise GraphError(
            f"{name} has node id {hi} but num_nodes={num_nodes}; ids must be in [0, num_nodes) "
            f"(pass num_nodes={hi + 1} or larger if the graph really has that many nodes)"
        )


def count_nonfinite(tensor: torch.Tensor, block_elements: int = 1 << 24) -> int:
    """Number of NaN/inf entries, without a full-size temporary.

    ``torch.isfinite`` on a whole 1M x 128 matrix allocates ~850 MB of temporaries; a NaN or
    inf anywhere makes the (allocation-free) sum non-finite, so that sum is the fast path,
    and only a non-finite sum (possibly just an overflow) triggers an exact blocked count.
    """
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return 0
    if bool(torch.isfinite(tensor.sum())):
        return 0
    flat = tensor.reshape(tensor.size(0), -1) if tensor.dim() > 1 else tensor.reshape(-1, 1)
    rows = max(1, block_elements // max(1, flat.size(1)))
    return sum(int((~torch.isfinite(flat[i:i + rows])).sum()) for i in range(0, flat.size(0), rows))


def _check_finite(tensor: torch.Tensor, name: str) -> None:
    bad = count_nonfinite(tensor)
    if bad:
        raise FeatureError(
            f"{name} contains {bad} NaN/inf value(s); clean or impute them before building the graph "
            f"(e.g. torch.nan_to_num)"
        )


def check_features(x: Any, num_nodes: int, name: str = "x") -> torch.Tensor:
    """Node features: 2-D floating tensor with ``num_nodes`` rows and only finite values."""
    tensor = as_tensor(x, name, FeatureError)
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(1)
    if tensor.dim() != 2:
        raise FeatureError(f"{name} must be 2-D [num_nodes, num_features], got shape {tuple(tensor.shape)}")
    if tensor.size(0) != num_nodes:
        raise FeatureError(
            f"{name} has {tensor.size(0)} rows but the graph has {num_nodes} nodes; "
            f"features need exactly one row per node"
        )
    if not tensor.is_floating_point():
        if tensor.dtype == torch.bool or tensor.is_complex():
            raise FeatureError(f"{name} has dtype {tensor.dtype}; features must be floating point")
        tensor = tensor.to(torch.float32)
    _check_finite(tensor, name)
    return tensor


def check_labels(y: Any, num_nodes: int, name: str = "y") -> torch.Tensor:
    """Labels: one entry (or row, for multi-label) per node; integer classes or floats."""
    tensor = as_tensor(y, name, FeatureError)
    if tensor.dim() == 0 or tensor.size(0) != num_nodes:
        raise FeatureError(
            f"{name} has shape {tuple(tensor.shape)} but the graph has {num_nodes} nodes; "
            f"labels need one entry per node (use -1 for unlabeled nodes)"
        )
    if tensor.dtype == torch.bool:
        tensor = tensor.long()
    elif not tensor.is_floating_point():
        tensor = tensor.to(torch.int64)
    else:
        _check_finite(tensor, name)
    return tensor


def check_mask(mask: Any, num_nodes: int, name: str) -> torch.Tensor:
    """Split masks are boolean vectors of length ``num_nodes`` (index lists are converted)."""
    tensor = as_tensor(mask, name, FeatureError)
    if tensor.dtype == torch.bool:
        if tensor.dim() != 1 or tensor.numel() != num_nodes:
            raise FeatureError(
                f"{name} has shape {tuple(tensor.shape)}; a boolean mask needs shape ({num_nodes},)"
            )
        return tensor
    if tensor.is_floating_point():
        raise FeatureError(f"{name} has dtype {tensor.dtype}; pass a bool mask or an integer index tensor")
    index = tensor.to(torch.int64).reshape(-1)
    try:
        check_node_ids(index, num_nodes, name)
    except GraphError as exc:
        raise FeatureError(str(exc)) from None
    out = torch.zeros(num_nodes, dtype=torch.bool, device=index.device)
    out[index] = True
    return out


def check_edge_weight(weight: Optional[Any], num_edges: int) -> Optional[torch.Tensor]:
    """Edge weights: 1-D, one per edge, finite floats."""
    if weight is None:
        return None
    tensor = as_tensor(weight, "edge_weight")
    if tensor.dim() != 1 or tensor.numel() != num_edges:
        raise GraphError(
            f"edge_weight has shape {tuple(tensor.shape)} but the graph has {num_edges} edges; "
            f"pass one weight per edge"
        )
    if not tensor.is_floating_point():
        tensor = tensor.to(torch.float32)
    if count_nonfinite(tensor):
        raise GraphError("edge_weight contains NaN/inf; every edge weight must be finite")
    return tensor.contiguous()


def check_edge_attr(attr: Optional[Any], num_edges: int) -> Optional[torch.Tensor]:
    """Edge features: ``[num_edges, ...]`` (one row per edge), any numeric dtype, finite when floating."""
    if attr is None:
        return None
    tensor = as_tensor(attr, "edge_attr")
    if tensor.dim() == 0 or tensor.size(0) != num_edges:
        raise GraphError(
            f"edge_attr has shape {tuple(tensor.shape)} but the graph has {num_edges} edges; "
            f"pass one row of edge features per edge, aligned with the edges"
        )
    if tensor.is_complex():
        raise GraphError(f"edge_attr has dtype {tensor.dtype}; edge features must be real numbers or booleans")
    if tensor.is_floating_point() and count_nonfinite(tensor):
        raise GraphError("edge_attr contains NaN/inf; clean the edge features (e.g. torch.nan_to_num)")
    return tensor.contiguous()
