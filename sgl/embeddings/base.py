"""What every embedding backend shares: id validation, the byte budget of a compression ratio.

Scalar arguments are checked by :mod:`sgl._checks`; :func:`check_scalar` keeps the wording
the embedding errors have always had where those checks word it differently.

A backend is a :class:`torch.nn.Module` mapping global ids int64 ``[..., F]`` to
``[..., F, dim]`` floats, with :meth:`EmbeddingBackend.memory_bytes` (the exact bytes of its
parameters plus any auxiliary state such as a sketch) and :meth:`EmbeddingBackend.after_backward`
(called by the trainer between ``backward()`` and ``optimizer.step()``; adaptive backends
such as CAFE update their sketch there, static tables do nothing).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch
from torch import nn

from sgl._checks import check_int, check_real, with_message
from sgl.errors import EmbeddingError

__all__ = ["EmbeddingBackend", "check_ratio", "check_scalar", "budget_bytes", "copy_rows", "FLOAT_BYTES"]

#: bytes of one float32 parameter
FLOAT_BYTES = 4


def check_scalar(check: Callable[..., Any], value: Any, message: str, *args: Any,
                 error: type = EmbeddingError, **options: Any) -> Any:
    """:func:`sgl._checks.with_message` with the embeddings' argument order and error.

    >>> check_scalar(check_int, 0, "k must be a whole number >= 1, got 0", 1)
    Traceback (most recent call last):
    ...
    sgl.errors.EmbeddingError: k must be a whole number >= 1, got 0
    """
    return with_message(message, check, value, *args, error=error, **options)


def check_ratio(ratio: object) -> float:
    """A compression ratio must be a finite number ``>= 1`` (1 = no compression).

    >>> check_ratio(100)
    100.0
    """
    check_scalar(check_real, ratio, f"compression ratio must be a positive finite number (e.g. 10 for 10x), "
                 f"got {ratio!r}", 0.0, math.inf, open_low=True, open_high=True)
    if float(ratio) < 1:
        raise EmbeddingError(f"compression ratio {ratio!r} < 1 would use more memory than a full table; "
                             f"pass a ratio >= 1 (1 = full table)")
    return float(ratio)


def budget_bytes(num_embeddings: int, dim: int, ratio: float) -> int:
    """Bytes allowed at ``ratio``: ``max(1, round(num_embeddings / ratio))`` float32 rows of ``dim``.

    Rounding to whole rows lets every backend spend *exactly* the same bytes.

    >>> budget_bytes(1000, 16, 10)
    6400
    """
    num_embeddings = check_int(num_embeddings, "num_embeddings", 1, error=EmbeddingError)
    dim = check_int(dim, "dim", 1, error=EmbeddingError)
    rows = max(1, int(round(num_embeddings / check_ratio(ratio))))
    return rows * dim * FLOAT_BYTES


class EmbeddingBackend(nn.Module):
    """Base class: ids ``[..., F]`` (int64 in ``[0, num_embeddings)``) → ``[..., F, dim]``."""

    def __init__(self, num_embeddings: int, dim: int) -> None:
        super().__init__()
        self.num_embeddings = check_int(num_embeddings, "num_embeddings", 1, error=EmbeddingError)
        self.dim = check_int(dim, "dim", 1, error=EmbeddingError)

    def check_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Raise :class:`EmbeddingError` on a non-integer tensor or ids outside ``[0, num_embeddings)``."""
        if not isinstance(ids, torch.Tensor):
            raise EmbeddingError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dtype not in (torch.int64, torch.int32):
            raise EmbeddingError(f"ids must be int64 (or int32), got {ids.dtype}")
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= self.num_embeddings:
                raise EmbeddingError(f"ids span [{low}, {high}] but this table has num_embeddings="
                                     f"{self.num_embeddings}; ids must be in [0, {self.num_embeddings}) "
                                     f"(global ids: per-field ids + field offsets)")
        return ids.long()

    def memory_bytes(self) -> int:
        """Exact bytes of the parameters and auxiliary state (sketches, free lists)."""
        return sum(p.numel() * p.element_size() for p in self.parameters())

    def after_backward(self, optimizer: Optional[torch.optim.Optimizer] = None) -> None:
        """Hook between ``loss.backward()`` and ``optimizer.step()``; static tables do nothing."""

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, dim={self.dim}, bytes={self.memory_bytes():,}"


def copy_rows(optimizer: Optional[torch.optim.Optimizer], source: torch.Tensor, source_rows: torch.Tensor,
              target: torch.Tensor, target_rows: torch.Tensor) -> None:
    """``target[target_rows] = source[source_rows]`` together with their per-row optimizer state
    (Adam moments, ...), and zero the target rows' gradient: a migrated feature continues its
    training where it was instead of restarting its optimizer history (with Adam's shared step
    count, zeroed moments would make the first steps of the new row ~3x larger than usual)."""
    if target_rows.numel() == 0:
        return
    with torch.no_grad():
        target[target_rows] = source[source_rows]
        if target.grad is not None:
            target.grad[target_rows] = 0
        if optimizer is not None:
            source_state = optimizer.state.get(source, {})
            for name, value in optimizer.state.get(target, {}).items():
                if isinstance(value, torch.Tensor) and value.shape == target.shape:
                    origin = source_state.get(name)
                    value[target_rows] = origin[source_rows] if isinstance(origin, torch.Tensor) else 0
