r"""The fast training path of heterogeneous GAMLP: packed hop features and batched per-hop layers.

:class:`PackedHopFeatures` keeps the NARS hops of every target node in *one* contiguous
``[n, (k+1)·S·d]`` tensor (hop-major, then subset, then feature), next to the label input
``[n, C]``. Indexing it gathers a mini-batch with one ``index_select`` per tensor (instead of
one advanced-indexing gather per hop) and hands the model ``[rows, label]`` -- two 2-D
tensors. :func:`packed_forward` then runs the same network as :meth:`HeteroGAMLP.forward`
without a Python loop over hops for the heavy parts:

* the NARS subset convolution of all hops at once, :math:`Z_{bl} = \sum_s w_{ls} \odot X_{bls}`
  (one fused numba pass each way, :func:`~sgl.models.hetero._packed_kernels.subset_mix`);
* the per-hop 2-layer MLPs (``pre_process``) as two ``torch.baddbmm`` over the stacked
  ``[k+1, d, hidden]`` / ``[k+1, hidden, hidden]`` weights, PReLU with the hops' own slopes;
* dropout masks drawn hop by hop, in the reference path's order, so a seeded run draws the
  same masks and trains to the same weights (tested to 1e-5 against the reference path).

The weights stay the reference modules' parameters (``state_dict`` unchanged); the stacked
copies are rebuilt on every call, which costs ``(k+1)·(d+hidden)·hidden`` floats.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Union

import torch

from sgl.models.dropout import dropout_slices
from sgl.models.hetero._packed_kernels import gather_rows, hop_prelu, subset_mix
from sgl.models.features import NodeFeatures

__all__ = ["PackedHopFeatures", "packed_forward"]


class PackedHopFeatures(NodeFeatures):
    """NARS hops packed into one ``[n, (k+1)·S·d]`` tensor, plus an optional ``[n, C]`` label input.

    ``data`` is still the list of hop views ``[n, S, d]`` (and the label tensor), so code that
    reads ``features.data`` (RLU's :meth:`HeteroGAMLP.with_label_input`) keeps working;
    ``features[index]`` returns ``[hop_rows, label_rows]`` (or ``[hop_rows]``).

    Example:
        >>> hops = [torch.randn(5, 2, 3) for _ in range(3)]
        >>> feats = PackedHopFeatures.from_hops(list(hops))   # from_hops empties the list it is given
        >>> rows = feats[torch.tensor([4, 0])]
        >>> rows[0].shape, bool((rows[0][0, 6:12].view(2, 3) == hops[1][4]).all())
        (torch.Size([2, 18]), True)
    """

    def __init__(self, packed: torch.Tensor, num_hops: int, num_subsets: int, width: int,
                 label: Union[torch.Tensor, None] = None) -> None:
        self.packed, self.label = packed, label
        self.num_hops, self.num_subsets, self.width = num_hops, num_subsets, width
        block = num_subsets * width
        views = [packed[:, l * block:(l + 1) * block].view(-1, num_subsets, width) for l in range(num_hops)]
        super().__init__(views + ([label] if label is not None else []))

    @classmethod
    def from_hops(cls, hops: List[torch.Tensor], label: Union[torch.Tensor, None] = None) -> "PackedHopFeatures":
        """Pack ``[n, S, d]`` hop tensors (the list is emptied as it is copied, so the peak is
        the packed tensor plus one hop)."""
        n, s, d = hops[0].shape
        num_hops = len(hops)
        packed = torch.empty(n, num_hops * s * d, dtype=hops[0].dtype)
        for l in range(num_hops):
            packed[:, l * s * d:(l + 1) * s * d] = hops[0].reshape(n, s * d)
            hops.pop(0)
        return cls(packed, num_hops, s, d, label)

    def with_label(self, label: torch.Tensor) -> "PackedHopFeatures":
        """The same packed hops (shared, not copied) with another label input."""
        return PackedHopFeatures(self.packed, self.num_hops, self.num_subsets, self.width, label)

    def __getitem__(self, index: torch.Tensor) -> List[torch.Tensor]:
        index = torch.as_tensor(index)
        if index.dtype == torch.bool:
            index = index.nonzero().flatten()
        rows = [gather_rows(self.packed, index)]
        if self.label is not None:
            rows.append(gather_rows(self.label, index))
        return rows

    def __repr__(self) -> str:
        return (f"PackedHopFeatures({self.num_hops} hops x [{self.num_nodes}, {self.num_subsets}, {self.width}]"
                f"{', label' if self.label is not None else ''})")


def is_packed_batch(batch: Sequence[torch.Tensor], num_hops: int) -> bool:
    """A batch from :class:`PackedHopFeatures` (2-D hop rows) rather than a list of ``[B, S, d]`` hops."""
    return len(batch) <= 2 and batch[0].dim() == 2 and len(batch) < num_hops + 1


def _pre_mlps(model: Any, z: torch.Tensor) -> torch.Tensor:
    """The per-hop 2-layer MLPs on ``z`` ``[H, B, d]`` as two batched matmuls -> ``[H, B, hidden]``."""
    pre = model.gamlp.pre
    w1 = torch.stack([m.layers[0].weight for m in pre]).transpose(1, 2)   # [H, d, hidden]
    b1 = torch.stack([m.layers[0].bias for m in pre]).unsqueeze(1)        # [H, 1, hidden]
    w2 = torch.stack([m.layers[1].weight for m in pre]).transpose(1, 2)
    b2 = torch.stack([m.layers[1].bias for m in pre]).unsqueeze(1)
    slopes = torch.cat([m.act.weight for m in pre])
    h = hop_prelu(torch.baddbmm(b1, z, w1), slopes)
    # one mask per hop in hop order: the reference path's FastDropout layers run once per hop
    h = dropout_slices(h, pre[0].dropout.p, model.training)
    return torch.baddbmm(b2, h, w2)


def _batched_ok(model: Any) -> bool:
    gamlp = model.gamlp
    return (gamlp.pre is not None and not model.config.batch_norm
            and all(len(m.layers) == 2 and m.act.weight.numel() == 1 and m.input_dropout.p == 0 for m in gamlp.pre))


def packed_forward(model: Any, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """:meth:`HeteroGAMLP.forward` on a :class:`PackedHopFeatures` batch (same outputs, same RNG use)."""
    gamlp = model.gamlp
    num_hops = model.config.k + 1
    rows = batch[0]
    weights = torch.stack(list(model.aggregator.weights))                   # [H, S, d]
    x = rows.view(rows.size(0), num_hops, weights.size(1), weights.size(2))
    z = subset_mix(x, weights)                                               # [H, B, d]
    if gamlp.input_dropout.p > 0 and model.training:
        z = dropout_slices(z, gamlp.input_dropout.p, True)
    hops = list(z.unbind(0))
    if _batched_ok(model):
        inputs = list(_pre_mlps(model, z).unbind(0))
    elif gamlp.pre is not None:
        inputs = [mlp(h) for mlp, h in zip(gamlp.pre, hops)]
    else:
        inputs = hops
    out = gamlp.attention(inputs)
    if gamlp.residual is not None:
        out = gamlp.output(gamlp.dropout(gamlp.act(out + gamlp.residual(hops[0]))))
    else:
        out = gamlp.output(out)
    if gamlp.label_mlp is not None and len(batch) > 1:
        out = out + gamlp.label_mlp(batch[1])
    return out
