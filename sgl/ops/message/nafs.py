"""NAFS node-adaptive feature smoothing and the over-smoothed limit it can compare hops with."""
from __future__ import annotations

import math
from numbers import Real
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops.message._common import _check_choice
from sgl.ops.message.base import _PerNodeWeighted

__all__ = ["NodeAdaptiveSmoothing", "stationary_features"]


class NodeAdaptiveSmoothing(_PerNodeWeighted):
    r"""NAFS node-adaptive feature smoothing (Zhang et al., ICML 2022), parameter-free.

    Each node weights its hops by how far each hop still is from over-smoothing:
    :math:`\alpha_{ik} = \mathrm{softmax}_k(c_{ik} / T)` and
    :math:`Z_i = \sum_k \alpha_{ik} X_{ik}`, with one of two scores :math:`c_{ik}`:

    * ``mode="cosine"`` (default) — :math:`c_{ik} = \cos(X_{ik}, X_{i0})`, the similarity
      to the node's un-smoothed features. This is what the released NAFS scripts compute
      (node clustering / link prediction: ``softmax(cat(cos(features, fea_k)))`` per node)
      and what SGL's ``OverSmoothDistanceWeightedOp`` copies. It needs nothing beyond the
      hops, so it is the default. By default the reference is ``hops[0]`` of the full list
      (even when ``start > 0``); pass ``reference`` to use other rows.
    * ``mode="stationary"`` — the paper's *over-smoothing distance*
      :math:`c_{ik} = \lVert X_{ik} - X_{i}^{(\infty)} \rVert_2` to the stationary state
      :math:`X^{(\infty)} = \lim_k \hat A^k X` that infinite smoothing converges to. A larger
      distance means the hop is less over-smoothed and gets a larger weight, the same
      direction as the cosine score. ``reference`` must hold the rows of
      :math:`X^{(\infty)}`; compute them once at precompute time with
      :func:`stationary_features`. We could not retrieve the paper's equation text, so
      this mode follows its stated definition (distance to the stationary state, softmax
      over hops) and has not been checked line by line against it. Distances depend on the
      feature scale; use ``temperature`` to sharpen or flatten the weights.

    Fully vectorised: one pass over the hops, and no Python loop over nodes (SGL looped
    over every node and hop in Python).

    Args:
        mode (str): ``"cosine"`` or ``"stationary"``.
        temperature (float): :math:`T > 0` (1 in NAFS).
        start, end: hop slice.

    Example:
        >>> import torch
        >>> from sgl.ops import NodeAdaptiveSmoothing
        >>> x0 = torch.tensor([[1.0, 0.0]]); x1 = torch.tensor([[0.0, 1.0]])
        >>> out, w = NodeAdaptiveSmoothing()([x0, x1], return_weights=True)
        >>> w  # softmax of cosines (1, 0)
        tensor([[0.7311, 0.2689]])
    """

    name = "nafs"

    def __init__(self, mode: str = "cosine", temperature: float = 1.0,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(start, end)
        self.mode = _check_choice(mode, "mode", ("cosine", "stationary"))
        if isinstance(temperature, bool) or not isinstance(temperature, Real) or not float(temperature) > 0 \
                or not math.isfinite(float(temperature)):
            raise ConfigError(f"temperature must be a positive number, got {temperature!r}")
        self.temperature = float(temperature)
        self.last_attention = None

    def hop_weights(self, hops: List[Tensor], reference: Optional[Tensor] = None) -> Tensor:
        if reference is None:
            raise FeatureError(
                "NodeAdaptiveSmoothing(mode='stationary') needs reference=X_inf rows "
                "(compute them with sgl.ops.stationary_features(graph, x))"
            )
        if self.mode == "cosine":
            # NAFS adds 1e-10 to the norms so all-zero rows score 0 instead of NaN
            ref_norm = reference.norm(dim=1).add_(1e-10)
            scores = torch.stack([(hop * reference).sum(1) / (hop.norm(dim=1).add_(1e-10) * ref_norm)
                                  for hop in hops], dim=1)
        else:
            scores = torch.stack([(hop - reference).norm(dim=1) for hop in hops], dim=1)
        return torch.softmax(scores / self.temperature, dim=1)

    def forward(self, hops: Sequence[Tensor], reference: Optional[Tensor] = None,
                return_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Weighted sum of the selected hops.

        Args:
            hops: ``[X_0, ..., X_K]`` rows, each ``[B, d]``.
            reference: ``[B, d]``; the un-smoothed rows for ``"cosine"`` (default ``hops[0]``)
                or the stationary rows :math:`X^{(\\infty)}` for ``"stationary"`` (required).
            return_weights: also return the ``[B, |K|]`` weights.
        """
        used = self._select(hops)
        if reference is None and self.mode == "cosine":
            reference = hops[0]
        if reference is not None and (not isinstance(reference, Tensor) or reference.shape != used[0].shape):
            shape = tuple(reference.shape) if isinstance(reference, Tensor) else type(reference).__name__
            raise FeatureError(f"reference must be a tensor of the hops' shape {tuple(used[0].shape)}, got {shape}")
        weights = self.hop_weights(used, reference)
        out = self._mix(used, weights)
        return (out, weights) if return_weights else out

    def combine(self, hops: List[Tensor]) -> Tensor:
        return self._mix(hops, self.hop_weights(hops, hops[0] if self.mode == "cosine" else None))

    def hparams(self) -> Dict[str, Any]:
        return {"mode": self.mode, "temperature": self.temperature}


@torch.no_grad()
def stationary_features(graph: Any, x: Optional[Tensor] = None, r: float = 0.5,
                        self_loops: bool = True) -> Tensor:
    r"""The over-smoothed limit :math:`X^{(\infty)} = \lim_{k\to\infty} \hat A_r^k X` in closed form.

    For an undirected graph and :math:`\hat A_r = \tilde D^{r-1}\tilde A\tilde D^{-r}`
    (:class:`sgl.ops.NormalizedAdjacency`), :math:`\hat A_r` is similar to the symmetric
    :math:`\tilde D^{-1/2}\tilde A\tilde D^{-1/2}`, whose powers converge on every connected
    component :math:`C` to the projection onto :math:`\tilde D^{1/2}\mathbf 1_C`. Hence

    .. math::
        X^{(\infty)}_i = \frac{\tilde d_i^{\,r}}{\sum_{j \in C(i)} \tilde d_j}
                         \sum_{j\in C(i)} \tilde d_j^{\,1-r} X_j

    with :math:`\tilde d` the (weighted) degree including the self-loop. That is NDLS's /
    NAFS's :math:`\hat A^{\infty}_{ij} = \tilde d_i^{\,r}\tilde d_j^{\,1-r}/(2m+n)`, taken
    per component so disconnected graphs are handled. Cost: :math:`O(E + nd)`, no
    iteration. Without self-loops a bipartite component oscillates and has no limit; the
    formula then gives the average of the even and odd powers' limits.

    Args:
        graph: an undirected :class:`sgl.data.Graph`.
        x (Tensor, optional): ``[num_nodes, d]`` features (default ``graph.x``).
        r (float): normalisation exponent of the operator, in ``[0, 1]``.
        self_loops (bool): whether the operator adds self-loops.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> from sgl.ops import stationary_features
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
        >>> stationary_features(g, torch.tensor([[1.0], [3.0]])).round(decimals=4)
        tensor([[2.],
                [2.]])
    """
    from scipy.sparse.csgraph import connected_components

    from sgl.data.validation import check_features

    if not 0.0 <= float(r) <= 1.0:
        raise ConfigError(f"r must be in [0, 1], got {r}")
    x = graph.x if x is None else x
    if x is None:
        raise FeatureError("the graph has no features; pass x=[num_nodes, d]")
    x = check_features(x, graph.num_nodes)
    if not x.is_floating_point():
        x = x.float()
    if not graph.is_symmetric():
        raise GraphError(
            "stationary_features needs an undirected graph (the limit formula assumes a symmetric "
            "adjacency); call graph.symmetrize() first"
        )
    num_components, labels = connected_components(graph.to_scipy("csr"), directed=False)
    labels = torch.from_numpy(labels).long()
    deg = graph.degree("in", weighted=True).to(torch.float64) + (1.0 if self_loops else 0.0)
    has_edges = deg > 0
    left = torch.where(has_edges, deg.clamp_min(1e-300).pow(float(r)), torch.zeros_like(deg))
    right = torch.where(has_edges, deg.clamp_min(1e-300).pow(1.0 - float(r)), torch.zeros_like(deg))
    volume = torch.zeros(num_components, dtype=torch.float64).index_add_(0, labels, deg)
    # nodes of zero degree (only possible without self-loops) have A^k X = 0 for k >= 1
    scale = torch.where(has_edges, left / volume[labels].clamp_min(1e-300), torch.zeros_like(deg))
    pooled = torch.zeros(num_components, x.size(1), dtype=x.dtype)
    pooled.index_add_(0, labels, x * right.to(x.dtype).unsqueeze(1))
    return pooled[labels].mul_(scale.to(x.dtype).unsqueeze(1))
