r"""Message operators: combine precomputed hops into one feature matrix per node.

A scalable (SGAP) model precomputes the hops :math:`[X_0 = X, X_1 = \hat A X, \dots,
X_K = \hat A^K X]` once; a *message operator* then combines the rows of those hops for
a batch of nodes — a list of ``[B, d]`` tensors — into a single ``[B, d_out]`` tensor.
Operators without parameters (``learnable = False``) are applied once at precompute
time; learnable ones run on every mini-batch inside ``forward``.

Every operator uses the hops ``hops[start:end]`` (Python slice semantics, ``end=None``
means "to the last hop"); write :math:`\mathcal{K}` for the hop indices in that slice
and :math:`\alpha_{ik}` for per-node weights that sum to one over :math:`k`.

================================  ==============================================================
registry name (class)             output
================================  ==============================================================
``last`` (:class:`LastHop`)       :math:`X_{\max\mathcal{K}}` (SGC)
``mean`` / ``sum``                :math:`\frac{1}{|\mathcal{K}|}\sum_k X_k` (S²GC) / :math:`\sum_k X_k`
``max`` / ``min``                 elementwise max / min over :math:`k`
``concat``                        :math:`[X_{k_1} \| X_{k_2} \| \dots]` (SIGN), width :math:`d|\mathcal{K}|`
``projected_concat``              :math:`[\sigma(X_{k_1}W_{k_1}) \| \dots]`, width ``hidden`` :math:`\cdot|\mathcal{K}|`
``weighted``                      :math:`\sum_k w_k X_k`, fixed ``weights`` or GBP's :math:`w_k=\alpha(1-\alpha)^k`
``learnable_weighted``            :math:`\sum_k \mathrm{softmax}(\theta)_k X_k` (PaSca-V1 "simple")
``gate``                          :math:`\alpha_{ik} = \mathrm{softmax}_k(w^\top X_{ik} + b)` (PaSca-V2/V3)
``jk_attention``                  GAMLP JK attention (reference vector from all hops)
``recursive_attention``           GAMLP recursive attention
``nafs``                          NAFS node-adaptive smoothing weights (parameter-free)
================================  ==============================================================

The per-node operators (``gate``, ``jk_attention``, ``recursive_attention``, ``nafs``)
keep every node's scores in its own row from the first matrix product to the weighted
sum, so nodes are never mixed. (The original SGL reshaped hop-major score stacks with
``view(-1, K)``, which scrambles the JK attention across nodes.) Their ``forward``
takes ``return_weights=True`` to also return the ``[B, |K|]`` weights, and they keep a
detached copy of the latest weights in ``last_attention``.

Example:
    >>> import torch
    >>> from sgl.ops import get_message_op
    >>> hops = [torch.ones(4, 3), 2 * torch.ones(4, 3), 3 * torch.ones(4, 3)]
    >>> get_message_op("mean")(hops)[0]
    tensor([2., 2., 2.])
    >>> op = get_message_op("concat", start=1)
    >>> op(hops).shape, op.out_features(in_features=3, num_hops=3)
    (torch.Size([4, 6]), 6)
    >>> get_message_op(**op.config())
    ConcatHops(start=1, end=None)

One concept per module: :mod:`~sgl.ops.message.base` (the base class), ``fixed``
(parameter-free reducers), ``learnable`` (projections, learnable weights, gate),
``attention`` (GAMLP), ``nafs`` (NAFS, stationary features) and ``registry``.
"""
from sgl.ops.message.attention import JKAttention, RecursiveAttention
from sgl.ops.message.base import MessageOperator
from sgl.ops.message.fixed import (
    GBP_DEFAULT_ALPHA, ConcatHops, LastHop, MaxHops, MeanHops, MinHops, SumHops, WeightedHops,
)
from sgl.ops.message.learnable import GatedHops, LearnableWeightedHops, ProjectedConcat
from sgl.ops.message.nafs import NodeAdaptiveSmoothing, stationary_features
from sgl.ops.message.registry import MESSAGE_OPERATORS, get_message_op


__all__ = [
    "MessageOperator",
    "LastHop",
    "MeanHops",
    "SumHops",
    "MaxHops",
    "MinHops",
    "ConcatHops",
    "ProjectedConcat",
    "WeightedHops",
    "LearnableWeightedHops",
    "GatedHops",
    "JKAttention",
    "RecursiveAttention",
    "NodeAdaptiveSmoothing",
    "stationary_features",
    "get_message_op",
    "MESSAGE_OPERATORS",
]
