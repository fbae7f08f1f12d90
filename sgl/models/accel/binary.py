r"""1-bit binarised features and weights (Bi-GCN, Wang et al. CVPR 2021), as a drop-in layer.

:class:`BinaryLinear` computes

.. math::
    y = \big(\beta \odot \mathrm{sign}(\tilde x)\big)\,\big(\alpha \odot \mathrm{sign}(W)\big)^{\top} + b,
    \qquad \alpha_o = \tfrac{1}{n_{in}}\lVert W_{o,:}\rVert_1,\quad \beta_v = \tfrac{1}{d}\lVert \tilde x_{v,:}\rVert_1,

with :math:`\tilde x` each row of the input standardised (Bi-GCN's inductive normalisation),

so weights take the values :math:`\pm\alpha_o` per output row and each input row the values
:math:`\pm\beta_v` (XNOR-Net scaling). Training uses straight-through estimators: the weight
gradient passes through the sign, the input gradient only where :math:`|x| \le 1`. The
arithmetic here is still float: the memory gain (32x for the weights, ``1 bit + one scale``)
is what :func:`binary_bytes` reports; a speed-up needs bit-packed XNOR/popcount kernels,
which PyTorch does not have.

Example:
    >>> import torch
    >>> from sgl.models import MLP
    >>> model = binarize(MLP(8, 16, 3, num_layers=2))
    >>> model(torch.randn(4, 8)).shape
    torch.Size([4, 3])
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from sgl.errors import ConfigError

__all__ = ["BinaryLinear", "binarize", "binary_bytes"]


class _SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, clip: bool) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        ctx.clip = clip
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return (grad * (x.abs() <= 1).to(grad.dtype) if ctx.clip else grad), None


def _binary(x: torch.Tensor, dim: int, clip: bool) -> torch.Tensor:
    return _SignSTE.apply(x, clip) * x.abs().mean(dim=dim, keepdim=True)


class BinaryLinear(nn.Linear):
    """``nn.Linear`` with 1-bit weights and inputs (see the module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = _binary(self.weight, 1, clip=False)
        # Bi-GCN's inductive row standardisation: non-negative inputs (bag-of-words, propagated
        # features, ReLU outputs) would otherwise all binarise to +1
        x = (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + 1e-5)
        return nn.functional.linear(_binary(x, -1, clip=True), weight, self.bias)


def binarize(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose ``nn.Linear`` layers are :class:`BinaryLinear` (same weights).

    Train the copy (quantisation-aware) for accuracy; binarising a trained model without
    retraining loses most of it.
    """
    model = copy.deepcopy(model)
    count = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                layer = BinaryLinear(child.in_features, child.out_features, bias=child.bias is not None,
                                     device=child.weight.device, dtype=child.weight.dtype)
                layer.load_state_dict(child.state_dict())
                setattr(module, child_name, layer)
                count += 1
    if count == 0:
        raise ConfigError(f"{type(model).__name__} has no quantisable layer (no nn.Linear) to binarise")
    return model


def binary_bytes(model: nn.Module) -> int:
    """Bytes of ``model`` with every :class:`BinaryLinear` weight stored as bits plus one scale per row."""
    total = 0
    for module in model.modules():
        for name, tensor in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            if isinstance(module, BinaryLinear) and name == "weight":
                total += (tensor.numel() + 7) // 8 + tensor.size(0) * 4
            else:
                total += tensor.numel() * tensor.element_size()
    return total
