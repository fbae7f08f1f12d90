r"""Parameter-free graph operators: the "graph operator" stage of every SGAP model.

Each operator is a linear map :math:`M` on node signals (``[num_nodes, d]`` tensors),
built on :math:`\hat A_r = \tilde D^{r-1} \tilde A \tilde D^{-r}` with
:math:`\tilde A = A + I` (or ``A`` when ``self_loops=False``) and :math:`\tilde D` the
diagonal of :math:`\tilde A`'s row sums (weighted in-degrees in SGL's CSR convention):

* :class:`NormalizedAdjacency` — :math:`M = \hat A_r`. ``r=0.5`` is the symmetric GCN
  normalisation, ``r=0`` the row-stochastic neighbour mean :math:`\tilde D^{-1}\tilde A`,
  ``r=1`` the column-stochastic random-walk transition matrix :math:`\tilde A \tilde D^{-1}`.
* :class:`PersonalizedPageRank` — :math:`M = \alpha (I - (1-\alpha)\hat A_r)^{-1}`, by
  power iteration :math:`Z \leftarrow (1-\alpha)\hat A_r Z + \alpha X` to a tolerance.
* :class:`HeatKernel` — :math:`M = e^{-t(I - \hat A_r)} = e^{-t}\sum_k t^k \hat A_r^k / k!`,
  Taylor series truncated once the remaining mass is below ``tol``.

Sparse products use ``torch.sparse`` CSR kernels (MKL on x86 CPUs); nothing loops over
nodes in Python. Operators are immutable, hashable and serialisable through
:meth:`GraphOperator.config`, so the cache, the CLI and the search space share them.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.ops import NormalizedAdjacency
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    >>> op = NormalizedAdjacency(r=0.5)
    >>> op.apply(op.adjacency(g), torch.eye(2))
    tensor([[0.5000, 0.5000],
            [0.5000, 0.5000]])
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Dict, Union

import torch

from sgl.errors import ConfigError

__all__ = [
    "GraphOperator",
    "NormalizedAdjacency",
    "PersonalizedPageRank",
    "HeatKernel",
    "LazyAdjacency",
    "normalized_adjacency",
    "spmm",
    "row_normalize",
    "get_operator",
    "OPERATORS",
]


def _csr(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    with warnings.catch_warnings():
        # "CSR support is in beta" / "invariant checks disabled": we built the arrays ourselves.
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(indptr, indices, values, (n, n))


def row_normalize(x: torch.Tensor) -> torch.Tensor:
    """Divide every row by its sum (rows summing to 0 are left at 0), as GCN/SGC preprocess."""
    total = x.sum(dim=1, keepdim=True)
    return x / torch.where(total == 0, torch.ones_like(total), total)


def spmm(adj: Any, x: torch.Tensor) -> torch.Tensor:
    """Sparse CSR x dense product, on the device of ``adj``.

    On the CPU ``reduce="sum"`` selects ATen's row-parallel CSR kernel (written for GNN
    workloads), which writes straight into its output; plain ``torch.mm`` on CSR goes through
    a path that allocates a second output-sized buffer (measured: +512 MB peak on a 1M x 128
    product) and is no faster. Other devices take ``torch.sparse.mm`` without ``reduce`` (on
    CUDA: cuSPARSE's SpMM), which ATen implements only on the CPU. ``adj`` may also be any
    object with ``@`` (a :class:`sgl.ops.propagate_device.StreamedAdjacency`).
    """
    if not isinstance(adj, torch.Tensor):
        return adj @ x
    if adj.device.type == "cpu":
        return torch.sparse.mm(adj, x.contiguous(), reduce="sum")
    return torch.sparse.mm(adj, x.contiguous())


def _with_self_loops(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, n: int):
    """Append one diagonal entry at the end of every CSR row in O(E), without re-sorting."""
    device = indptr.device
    counts = indptr[1:] - indptr[:-1]
    row = torch.repeat_interleave(torch.arange(n, device=device), counts, output_size=indices.numel())
    new_indptr = indptr + torch.arange(n + 1, device=device)
    total = indices.numel() + n
    new_indices = torch.empty(total, dtype=indices.dtype, device=device)
    new_values = torch.empty(total, dtype=values.dtype, device=device)
    shifted = torch.arange(indices.numel(), device=device) + row
    new_indices[shifted] = indices
    new_values[shifted] = values
    loop_pos = new_indptr[1:] - 1
    new_indices[loop_pos] = torch.arange(n, device=device)
    new_values[loop_pos] = 1.0
    return new_indptr, new_indices, new_values


def normalized_adjacency(graph: Any, r: float = 0.5, self_loops: bool = True,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r"""Return :math:`\tilde D^{r-1}\tilde A\tilde D^{-r}` as a ``torch.sparse_csr`` tensor.

    Rows are destination nodes, so ``normalized_adjacency(g) @ X`` aggregates along edges.
    Nodes with zero degree get zero rows/columns (no division by zero). The matrix is built
    on the device of the graph's ``indptr``.
    """
    if not 0.0 <= float(r) <= 1.0:
        raise ConfigError(f"r must be in [0, 1] (0.5 = symmetric, 0 = row mean, 1 = random walk), got {r}")
    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    # unweighted graphs without added loops never materialise an all-ones value array
    values = None if graph.edge_weight is None and not self_loops else graph.edge_weight_or_ones().to(dtype)
    if self_loops:
        indptr, indices, values = _with_self_loops(indptr, indices, values, n)
    counts = indptr[1:] - indptr[:-1]
    if graph.edge_weight is None:
        deg = counts.to(dtype)  # unweighted: the degree is the row length (+1 for the loop)
    else:
        deg = torch.segment_reduce(values, "sum", lengths=counts, unsafe=True)
    nonzero = deg > 0
    left = torch.zeros(n, dtype=dtype, device=indptr.device)
    right = torch.zeros(n, dtype=dtype, device=indptr.device)
    left[nonzero] = deg[nonzero].pow(float(r) - 1.0)
    right[nonzero] = deg[nonzero].pow(-float(r))
    # per-edge value w * d_dst^(r-1) * d_src^(-r); the row factor expands without a row-id array
    norm_values = right[indices]
    norm_values.mul_(torch.repeat_interleave(left, counts, output_size=indices.numel()))
    if values is not None:
        norm_values.mul_(values)
    return _csr(indptr, indices, norm_values, n)


@dataclass(frozen=True)
class GraphOperator:
    """Base of the parameter-free graph operators.

    Subclasses define :meth:`apply`, the product ``M @ x`` given the prepared sparse
    matrix from :meth:`adjacency`. ``x`` may be any column block of the features:
    every operator acts on columns independently, which is what lets
    :func:`sgl.ops.propagate_hops` bound memory by processing column chunks.
    """

    r: float = 0.5
    self_loops: bool = True

    name = "base"

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.r) <= 1.0:
            raise ConfigError(f"r must be in [0, 1] (0.5 = symmetric, 0 = row mean, 1 = random walk), got {self.r}")

    def adjacency(self, graph: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The normalised sparse adjacency this operator multiplies by (built once per graph)."""
        return normalized_adjacency(graph, self.r, self.self_loops, dtype)

    def apply(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # abstract: each operator defines its product

    def workspace_factor(self) -> int:
        """How many ``[num_nodes, chunk]`` temporaries :meth:`apply` holds at once (for budgets)."""
        return 1

    def config(self) -> Dict[str, Any]:
        """JSON-serialisable description; ``get_operator(**op.config())`` rebuilds the operator."""
        return {"name": self.name, **asdict(self)}

    def cache_key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.config().items()))


@dataclass(frozen=True)
class NormalizedAdjacency(GraphOperator):
    r"""One hop of :math:`\hat A_r = \tilde D^{r-1}\tilde A\tilde D^{-r}`.

    Args:
        r (float): normalisation exponent in ``[0, 1]`` (0.5 symmetric, 1 random walk).
        self_loops (bool): add :math:`I` before normalising (default ``True``).
    """

    name = "adj"

    def apply(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return spmm(adj, x)


@dataclass(frozen=True)
class PersonalizedPageRank(GraphOperator):
    r"""Personalized PageRank diffusion :math:`\alpha (I - (1-\alpha)\hat A_r)^{-1} X`.

    Computed by power iteration :math:`Z_{t+1} = (1-\alpha)\hat A_r Z_t + \alpha X`
    (:math:`Z_0 = X`) until :math:`\max|Z_{t+1} - Z_t| \le` ``tol`` :math:`\cdot \max|X|`
    or ``max_iters`` steps.

    Args:
        alpha (float): teleport (restart) probability in ``(0, 1]``.
        r (float), self_loops (bool): as in :class:`NormalizedAdjacency`.
        tol (float): relative convergence tolerance.
        max_iters (int): iteration cap.
    """

    alpha: float = 0.15
    tol: float = 1e-6
    max_iters: int = 200

    name = "ppr"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < float(self.alpha) <= 1.0:
            raise ConfigError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.max_iters < 1 or self.tol <= 0:
            raise ConfigError(f"need max_iters >= 1 and tol > 0, got max_iters={self.max_iters}, tol={self.tol}")

    def workspace_factor(self) -> int:
        return 3

    def apply(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        alpha = float(self.alpha)
        scale = float(x.abs().max()) if x.numel() else 0.0
        z = x.clone()
        teleport = x * alpha
        for _ in range(self.max_iters):
            new = spmm(adj, z).mul_(1.0 - alpha).add_(teleport)
            delta = float((new - z).abs().max()) if new.numel() else 0.0
            z = new
            if delta <= self.tol * max(scale, 1e-30):
                break
        return z


@dataclass(frozen=True)
class HeatKernel(GraphOperator):
    r"""Heat kernel diffusion :math:`e^{-t(I-\hat A_r)} X = e^{-t}\sum_{k\ge0} \frac{t^k}{k!}\hat A_r^k X`.

    The series stops when the Poisson tail mass left out is below ``tol`` (for ``t=5``
    and ``tol=1e-6`` that is 19 terms).

    Args:
        t (float): diffusion time, ``> 0``.
        r (float), self_loops (bool): as in :class:`NormalizedAdjacency`.
        tol (float): truncation tolerance on the neglected series mass.
    """

    t: float = 5.0
    tol: float = 1e-6

    name = "heat"

    def __post_init__(self) -> None:
        super().__post_init__()
        if float(self.t) <= 0 or self.tol <= 0:
            raise ConfigError(f"need t > 0 and tol > 0, got t={self.t}, tol={self.tol}")

    def num_terms(self) -> int:
        """Smallest K with Poisson(t) mass beyond K below ``tol``."""
        t = float(self.t)
        coef, mass, k = math.exp(-t), math.exp(-t), 0
        while 1.0 - mass > self.tol and k < 10_000:
            k += 1
            coef *= t / k
            mass += coef
        return k

    def workspace_factor(self) -> int:
        return 3

    def apply(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        t = float(self.t)
        coef = math.exp(-t)
        term = x
        out = x * coef
        for k in range(1, self.num_terms() + 1):
            term = spmm(adj, term)
            coef *= t / k
            out.add_(term, alpha=coef)
        return out


@dataclass(frozen=True)
class LazyAdjacency(GraphOperator):
    r"""A lazy random-walk step :math:`(1-\alpha)\hat A_r + \alpha I` (SGL's ``PprGraphOp``).

    ``k`` hops of it interpolate between the raw features and :math:`\hat A_r^k X`; PaSca-V1
    uses it with ``alpha=0.1``.
    """

    alpha: float = 0.1

    name = "lazy"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= float(self.alpha) <= 1.0:
            raise ConfigError(f"alpha must be in [0, 1], got {self.alpha}")

    def workspace_factor(self) -> int:
        return 2

    def apply(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return spmm(adj, x).mul_(1.0 - float(self.alpha)).add_(x, alpha=float(self.alpha))


OPERATORS = {
    "adj": NormalizedAdjacency,
    "lazy": LazyAdjacency,
    "ppr": PersonalizedPageRank,
    "heat": HeatKernel,
}
_ALIASES = {"sym": ("adj", {"r": 0.5}), "gcn": ("adj", {"r": 0.5}), "rw": ("adj", {"r": 1.0}),
            "mean": ("adj", {"r": 0.0}), "laplacian": ("adj", {})}


def get_operator(name: Union[str, GraphOperator] = "adj", **kwargs: Any) -> GraphOperator:
    """Build an operator by name: ``adj`` (aliases ``sym``/``gcn``/``laplacian``, ``rw`` for r=1,
    ``mean`` for r=0), ``ppr`` or ``heat``; keyword arguments are the operator's fields.

        >>> get_operator("ppr", alpha=0.1)
        PersonalizedPageRank(r=0.5, self_loops=True, alpha=0.1, tol=1e-06, max_iters=200)
    """
    if isinstance(name, GraphOperator):
        if kwargs:
            raise ConfigError("pass either an operator instance or a name with keyword arguments, not both")
        return name
    key = str(name).lower()
    if key in _ALIASES:
        key, defaults = _ALIASES[key]
        kwargs = {**defaults, **kwargs}
    if key not in OPERATORS:
        raise ConfigError(
            f"unknown graph operator {name!r}; choose one of {sorted(list(OPERATORS) + list(_ALIASES))}"
        )
    cls = OPERATORS[key]
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad arguments for graph operator {key!r}: {exc}") from exc
