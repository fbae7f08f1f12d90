r"""Static int8 inference straight from int8 hops, and its fp32 twin with the same fusion.

:func:`quantize_int8` quantises activations per batch and leaves GAMLP's hop attention fp32.
Here the hops stored by :class:`Int8NodeFeatures` (codes :math:`Q_l`, per-column scales
:math:`s_l`, :math:`X_l \approx Q_l\,\mathrm{diag}(s_l)`) go straight into an int8 GEMM
(``torch._int_mm``, int32 accumulation): every linear map :math:`W` that reads a hop is
folded with that hop's scales, :math:`W' = W\,\mathrm{diag}(s_l)`, and quantised per output
row, :math:`W' \approx \mathrm{diag}(t)\,\hat W`, so :math:`X_l W^\top \approx (Q_l \hat W^\top)\,
\mathrm{diag}(t)` and the hops are never dequantised (static quantisation: no per-batch
activation scales).

For GAMLP every map that reads a hop is moved in front of the hop-weighted sum:

.. math::
    W_1 \textstyle\sum_l \alpha_{il} X_{il} = \sum_l \alpha_{il} (W_1 X_{il}), \qquad
    w^\top h_{il} = \sum_{j<l} a_{ij} (w^\top X_{ij}),

so one GEMM per hop, :math:`X_l [W_1; w_{\mathrm{hist}}; w_{\mathrm{hop}}]^\top` (JK attention:
:math:`[W_1; w_{:d}; R_{1,l}]` with :math:`R_{1,l}` the hop's block of the reference MLP's first
layer), replaces the ``d``-wide attention and sum; the recursion then runs on ``[B, K]``
scalars. PaSca's learnable messages (``learnable_weighted``, ``gate``) fold the same way
(:class:`StaticHopMix`). For an SGAP model with a parameter-free message (SGC, SIGN, S2GC,
GBP, APPNP, NAFS) and a graph-free MLP the plan is the base MLP itself, its first layer
reading the int8 features. :func:`fuse_fp32` builds the same plans in fp32 (the fair
baseline). Folding makes a weight row span the columns' ranges, so a layer whose single
int8 code per weight errs too much keeps a second int8 matrix of rounding residuals
(``split_weights``; see :func:`quantize_static_int8`).

Example:
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> from sgl.models import GAMLP, GAMLPConfig
    >>> from sgl.models.accel import Int8NodeFeatures
    >>> model = GAMLP(6, 3, GAMLPConfig(k=2, hidden=8, attention="recursive")).eval()
    >>> hops = [torch.rand(10, 6) for _ in range(3)]
    >>> hops8 = Int8NodeFeatures.quantize(hops)
    >>> static = quantize_static_int8(model, hops8, split_weights=True)
    >>> rows = torch.arange(4)
    >>> bool((static(hops8.codes_at(rows)) - model(hops)[:4]).abs().max() < 0.05)
    True
    >>> bool(torch.allclose(fuse_fp32(model)([h[rows] for h in hops]), model([h[rows] for h in hops]), atol=1e-5))
    True
"""
from __future__ import annotations

import copy
from typing import List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sgl.errors import ConfigError, FeatureError
from sgl.models.accel.quant import Int8NodeFeatures
from sgl.models.mlp import MLP, ResMLP

#: split a folded weight into two int8 matrices when one code per weight errs by more than this
#: (relative Frobenius error of the layer's output on calibration rows)
SPLIT_TOL = 0.02

__all__ = ["SPLIT_TOL", "quantize_static_int8", "fuse_fp32", "FoldedLinear", "StaticGAMLP", "StaticMLP",
           "StaticHopMix"]

Batch = Union[Tensor, Sequence[Tensor]]


class FoldedLinear(nn.Module):
    r""":math:`x W^\top` (no bias) for ``x`` as int8 codes with per-column ``scale`` (int8 GEMM), or
    fp32 ``x`` when ``scale`` is None (fp32 GEMM, the baseline).

    Example:
        >>> w, x = torch.randn(4, 6), torch.randn(3, 6)
        >>> s = x.abs().amax(0) / 127
        >>> q = torch.round(x / s).to(torch.int8)
        >>> bool((FoldedLinear(w, s)(q) - x @ w.T).abs().max() < 0.1)
        True
    """

    def __init__(self, weight: Tensor, scale: Optional[Tensor] = None, split: Union[bool, str] = True,
                 calibration: Optional[Tensor] = None, tol: float = SPLIT_TOL) -> None:
        super().__init__()
        weight = weight.detach().float()
        self.out_features, self.int8 = int(weight.size(0)), scale is not None
        self.single_error = None
        if scale is None:
            self.register_buffer("weight", weight.clone())
            return
        folded = weight * scale.to(weight.device, weight.dtype)[None, :]
        row_scale = folded.abs().amax(dim=1) / 127.0
        row_scale = torch.where(row_scale > 0, row_scale, torch.ones_like(row_scale))
        exact = folded / row_scale[:, None]
        high = torch.round(exact).clamp_(-127, 127)
        if split == "auto":
            if calibration is None:
                raise ConfigError("split='auto' needs calibration codes (rows of the int8 features)")
            rows = calibration[:, :weight.size(1)].float()
            reference = rows @ folded.t()
            self.single_error = float((rows @ (high * row_scale[:, None]).t() - reference).norm()
                                      / reference.norm().clamp_min(1e-30))
            split = self.single_error > tol
        self.split = bool(split)
        pad = -self.out_features % 8  # int8 GEMM kernels want the output width a multiple of 8
        codes = [high]
        if self.split:  # the residual in [-1/2, 1/2] as a second int8 matrix: ~15-bit weights
            codes.append(torch.round((exact - high) * 254.0).clamp_(-127, 127))
        stacked = torch.cat([F.pad(c, (0, -c.size(1) % 8, 0, pad)) for c in codes], dim=0).to(torch.int8)
        self.in_features = int(weight.size(1))
        self.register_buffer("qweight", stacked.t().contiguous())  # [in + pad, (out + pad) * (1 + split)]
        self.register_buffer("row_scale", row_scale)

    def forward(self, x: Tensor) -> Tensor:
        if not self.int8:
            return x @ self.weight.t()
        if x.dtype != torch.int8:
            raise FeatureError(f"this layer reads int8 codes (Int8NodeFeatures.codes_at), got {x.dtype}")
        width = x.size(1)  # the features' own width, or stored with zero padding to a multiple of 8
        if width not in (self.in_features, self.qweight.size(0)):
            raise FeatureError(f"this layer reads {self.in_features} columns, got {width}")
        acc = torch._int_mm(x, self.qweight if width == self.qweight.size(0) else self.qweight[:width]).float()
        n = self.out_features
        if self.split:
            half = acc.size(1) // 2
            return (acc[:, :n] + acc[:, half:half + n] * (1.0 / 254.0)) * self.row_scale
        return acc[:, :n] * self.row_scale


def _mlp_tail(mlp: nn.Module, first: Tensor) -> Tensor:
    """The rest of an (eval-mode) MLP/ResMLP given its first layer's output ``first`` (bias included)."""
    if len(mlp.layers) == 1:
        return first
    h = mlp.act(mlp.norms[0](first))
    previous, x = h, mlp.dropout(h)
    for layer, norm in zip(mlp.layers[1:-1], mlp.norms[1:]):
        h = mlp.act(norm(layer(x)))
        if isinstance(mlp, ResMLP):
            h = h + previous
        previous, x = h, mlp.dropout(h)
    return mlp.layers[-1](x)


def _without_first(mlp: nn.Module) -> "tuple[nn.Module, nn.Parameter]":
    """A copy of ``mlp`` whose first layer (now folded into a :class:`FoldedLinear`) is dropped, and its bias."""
    mlp = copy.deepcopy(mlp)
    bias = mlp.layers[0].bias
    mlp.layers[0] = nn.Identity()
    return mlp, bias


def _check_mlp(mlp: nn.Module, owner: str) -> None:
    if type(mlp) not in (MLP, ResMLP):
        raise ConfigError(f"static int8 folds the first layer of an MLP/ResMLP; {owner} has {type(mlp).__name__}")


class StaticMLP(nn.Module):
    """An MLP whose first layer reads int8 codes (or fp32 rows): SGC, SIGN, SGAP models with a
    parameter-free message, graph-free students. Built by :func:`quantize_static_int8` / :func:`fuse_fp32`."""

    def __init__(self, mlp: nn.Module, scale: Optional[Tensor], split: Union[bool, str] = True,
                 calibration: Optional[Tensor] = None, tol: float = SPLIT_TOL) -> None:
        super().__init__()
        _check_mlp(mlp, "the model")
        self.first = FoldedLinear(mlp.layers[0].weight, scale, split, calibration, tol)
        self.mlp, self.bias = _without_first(mlp)

    def forward(self, x: Tensor) -> Tensor:
        return _mlp_tail(self.mlp, self.first(x) + self.bias)


class StaticGAMLP(nn.Module):
    """GAMLP's inference with every hop-reading map in one GEMM per hop (see the module docstring)."""

    def __init__(self, model: nn.Module, scales: Optional[Sequence[Tensor]], split: Union[bool, str] = True,
                 calibration: Optional[Sequence[Tensor]] = None, tol: float = SPLIT_TOL) -> None:
        super().__init__()
        cfg = model.config
        if cfg.pre_process or cfg.residual:
            raise ConfigError("static int8 folds GAMLP's output layer through the hop sum; pre_process=True and "
                              "residual=True put a non-linearity in between -- use quantize_int8 (dynamic)")
        _check_mlp(model.output, "GAMLP's output")
        att, d, num_hops = model.attention, model.in_features, model.k + 1
        if att.num_used != num_hops:
            raise ConfigError("static int8 needs GAMLP's attention over all hops")
        self.num_hops, self.recursive = num_hops, cfg.attention == "recursive"
        first, w = model.output.layers[0].weight, att.attention.weight[0]
        self.width = int(first.size(0))
        maps = []
        for hop in range(num_hops):
            if self.recursive:
                rows = [first, w[None, :d], w[None, d:]]
            else:
                rows = [first, w[None, :d], att.ref_layers[0].weight[:, hop * d:(hop + 1) * d]]
            scale = None if scales is None else scales[hop]
            sample = None if calibration is None else calibration[hop]
            maps.append(FoldedLinear(torch.cat(rows, dim=0), scale, split, sample, tol))
        self.maps = nn.ModuleList(maps)
        self.model = model = copy.deepcopy(model)
        model.output, self.out_bias = _without_first(model.output)
        self.ref_bias = None
        if not self.recursive:
            self.ref_bias = model.attention.ref_layers[0].bias
            model.attention.ref_layers[0] = nn.Identity()
        self.label_scale = None if scales is None or model.label_mlp is None else scales[num_hops]

    def forward(self, batch: Sequence[Tensor]) -> Tensor:
        model, width = self.model, self.width
        att = model.attention
        y = torch.stack([m(x) for m, x in zip(self.maps, batch[:self.num_hops])], dim=1)  # [B, L, width + ...]
        u, first_half = y[..., :width], y[..., width]  # X_l W_1^T and X_l w_{:d}
        bias = att.attention.bias
        if self.recursive:  # w^T [h_l || X_l] = sum_j a_j X_j w_{:d} + X_l w_{d:}
            second_half = y[..., width + 1]
            scores = [att.score_act(first_half[:, 0] + second_half[:, 0] + bias)]
            for hop in range(1, self.num_hops):
                a = torch.softmax(torch.stack(scores, dim=1), dim=1)
                scores.append(att.score_act((a * first_half[:, :hop]).sum(1) + second_half[:, hop] + bias))
        else:
            ref = y[..., width + 1:].sum(1) + self.ref_bias
            ref = att.ref_acts[0](ref)
            for layer, prelu in zip(att.ref_layers[1:], att.ref_acts[1:]):
                ref = prelu(layer(ref))
            ref_term = ref @ att.attention.weight[0, model.in_features:] + bias
            scores = [att.score_act(first_half[:, hop] + ref_term) for hop in range(self.num_hops)]
        alpha = torch.softmax(torch.stack(scores, dim=1), dim=1)
        out = _mlp_tail(model.output, (alpha.unsqueeze(-1) * u).sum(1) + self.out_bias)
        if model.label_mlp is not None:
            label = batch[self.num_hops]
            if self.label_scale is not None:
                label = label[:, :self.label_scale.numel()].float() * self.label_scale
            out = out + model.label_mlp(label)
        return out


class StaticHopMix(nn.Module):
    """An SGAP model whose learnable message mixes hops linearly before its MLP (PaSca's
    ``learnable_weighted``, shared weights :math:`\\beta_k`; ``gate``, per-node softmax of
    :math:`w^\\top X_{ik} + b`): :math:`W_1 \\sum_k \\beta_{ik} X_{ik} = \\sum_k \\beta_{ik} (W_1 X_{ik})`,
    one GEMM per used hop (the gate's row appended), as in :class:`StaticGAMLP`."""

    def __init__(self, model: nn.Module, scales: Optional[Sequence[Tensor]], split: Union[bool, str] = True,
                 calibration: Optional[Sequence[Tensor]] = None, tol: float = SPLIT_TOL) -> None:
        super().__init__()
        op, base = model.message_op, model.base
        _check_mlp(base, "the model")
        self.used = list(op.hop_range(op.num_hops))
        self.gated = op.name == "gate"
        first = base.layers[0].weight
        self.width = int(first.size(0))
        rows = torch.cat([first, op.gate.weight], dim=0) if self.gated else first
        self.maps = nn.ModuleList(
            FoldedLinear(rows, None if scales is None else scales[hop], split,
                         None if calibration is None else calibration[hop], tol) for hop in self.used)
        self.op = copy.deepcopy(op)
        if self.gated:
            self.op.gate = None  # folded into the maps, only its bias is read
            self.register_buffer("gate_bias", op.gate.bias.detach().clone())
        self.base, self.bias = _without_first(base)

    def forward(self, batch: Sequence[Tensor]) -> Tensor:
        y = torch.stack([m(batch[hop]) for m, hop in zip(self.maps, self.used)], dim=1)  # [B, K, width (+1)]
        if self.gated:
            weights = torch.softmax(y[..., self.width] + self.gate_bias, dim=1)
        else:
            weights = self.op.current_weights().to(y.dtype).expand(y.size(0), -1)
        return _mlp_tail(self.base, (weights.unsqueeze(-1) * y[..., :self.width]).sum(1) + self.bias)


def _plan(model: nn.Module, scales: Optional[List[Tensor]], split: Union[bool, str] = True,
          calibration: Optional[List[Tensor]] = None, tol: float = SPLIT_TOL) -> nn.Module:
    from sgl.models.accel.student import GraphFreeMLP
    from sgl.models.base import SGAPModel
    from sgl.models.gamlp import GAMLP

    if model.training:
        raise ConfigError("static int8 is for inference: call model.eval() first")
    if isinstance(model, GAMLP):
        return StaticGAMLP(model, scales, split, calibration, tol)
    if isinstance(model, SGAPModel) and type(model).forward is SGAPModel.forward and model.message_op.learnable:
        if model.config.message not in ("learnable_weighted", "gate"):
            raise ConfigError(f"static int8 covers SGAP messages that are parameter-free, learnable_weighted or "
                              f"gate; {model.config.message!r} is not -- use quantize_int8 (dynamic)")
        return StaticHopMix(model, scales, split, calibration, tol)
    if scales is not None and len(scales) != 1:
        raise FeatureError(f"{type(model).__name__} reads one feature tensor, got {len(scales)} int8 hops")
    scale = None if scales is None else scales[0]
    sample = None if calibration is None else calibration[0]
    if isinstance(model, SGAPModel) and type(model).forward is SGAPModel.forward:
        return StaticMLP(model.base, scale, split, sample, tol)
    if isinstance(model, GraphFreeMLP):
        return StaticMLP(model.base, scale, split, sample, tol)
    if type(model) in (MLP, ResMLP):
        return StaticMLP(model, scale, split, sample, tol)
    raise ConfigError(f"no static int8 plan for {type(model).__name__}: it covers GAMLP, SGAP models (sgc, sign, "
                      f"pasca-v1..v3, ...), graph-free MLPs -- use quantize_int8 (dynamic)")


def quantize_static_int8(model: nn.Module, features: Int8NodeFeatures, split_weights: Union[bool, str] = "auto",
                         tol: float = SPLIT_TOL, calibration_rows: int = 1024) -> nn.Module:
    """Inference module reading ``features.codes_at(rows)`` (int8) directly; see the module docstring.

    ``split_weights``: folding per-column hop scales makes a row's weights span the columns'
    ranges, so one int8 code per weight can be coarse (SIGN on Cora: 41% output error, 2
    points lost). ``True`` stores each folded weight as two int8 matrices, codes and their
    rounding residual (about 15-bit weights, a GEMM twice as wide); ``False`` never does;
    ``"auto"`` splits a layer when its single-code output on ``calibration_rows`` evenly
    spaced rows of ``features`` (no labels read) errs by more than ``tol`` (relative).

    Raises :class:`~sgl.errors.ConfigError` for a model in training mode or without a plan
    (learnable SGAP messages, GAMLP with ``pre_process``/``residual``, models without an MLP).
    """
    if not isinstance(features, Int8NodeFeatures):
        raise FeatureError(f"static int8 needs Int8NodeFeatures (Int8NodeFeatures.quantize(features)), got "
                           f"{type(features).__name__}")
    if split_weights not in (True, False, "auto"):
        raise ConfigError(f"split_weights must be True, False or 'auto', got {split_weights!r}")
    if not tol > 0 or calibration_rows < 1:
        raise ConfigError(f"need tol > 0 and calibration_rows >= 1, got {tol}, {calibration_rows}")
    device = features.codes[0].device
    rows = torch.linspace(0, features.num_nodes - 1, min(calibration_rows, features.num_nodes), device=device)
    with torch.no_grad():
        return _plan(model, list(features.scales), split_weights, list(features.codes_at(rows.long())) if
                     features.is_hops else [features.codes_at(rows.long())], tol).eval()


def fuse_fp32(model: nn.Module) -> nn.Module:
    """The fp32 twin of :func:`quantize_static_int8` (same fusion, fp32 GEMMs), reading fp32 rows."""
    with torch.no_grad():
        return _plan(model, None).eval()
