r"""GCMAE: graph contrastive masked autoencoder (the model; its pre-training is a task).

GCMAE (Wang et al., "Generative and Contrastive Paradigms Are Complementary for Graph
Self-Supervised Learning", arXiv 2310.15523) trains one GNN encoder :math:`f` with four
losses:

* **MAE** (GraphMAE-style): a fraction ``mask_rate`` of nodes get their features replaced
  by a learnable mask token; :math:`H = f(\tilde X, A)`; the masked rows of
  :math:`H W_{e2d}` are zeroed again and a one-layer GNN decoder reconstructs :math:`X`.
  :func:`sce_loss` :math:`= \operatorname{mean}_{i \in M} (1 - \cos(\hat x_i, x_i))^{\gamma}`.
* **Adjacency reconstruction** of the *whole* graph from :math:`H` (not only masked
  edges): binary cross-entropy of the pair logits :math:`\cos(h_u, h_v) / \tau_a`, edges and
  non-edges weighted equally. On small graphs over all :math:`N^2` pairs
  (:func:`dense_adjacency_loss`, ``adj_mode="dense"``/``"auto"``); otherwise on up to
  ``adj_max_pos`` sampled edges and ``adj_neg_ratio`` times as many uniform node pairs per
  step (:func:`adjacency_loss`), an estimate of the same loss with memory linear in the sample.
* **Contrastive** (GRACE-style InfoNCE, :func:`info_nce`): two views through projection
  heads; by default the masked view and a view with dropped edges and feature columns;
  the official code's form (``cl_views="single"``, ``augmentation="drop_node"``) passes one
  drop-node view through both heads. Computed on at most ``cl_max_nodes`` random nodes per
  step (memory :math:`O(B^2)`).
* **Discrimination** against over-smoothing (:func:`variance_loss`, VICReg's variance
  term on a linear projection of :math:`H`):
  :math:`\operatorname{mean}_d \max(0, 1 - \sqrt{\operatorname{Var}_d + \epsilon})`.

:func:`~sgl.models.ssl.gcmae_config` holds named presets; ``gcmae_config("cora")`` is the
official Cora configuration (see :data:`~sgl.models.ssl.GCMAE_PRESETS`).

Total: :math:`L = w_{mae} L_{mae} + \lambda L_{cl} + \mu L_{adj} + \nu L_{std}`. Setting
weights to zero gives the ablations: :func:`~sgl.models.ssl.graphmae_config` (MAE only)
and :func:`~sgl.models.ssl.grace_config` (two augmented views, InfoNCE only). We follow the
paper's description, not two quirks of the official code (an operator-precedence slip in its InfoNCE
denominator, and swapped arguments in its adjacency BCE).

Example:
    >>> import sgl
    >>> from sgl.models.ssl import GCMAE, GCMAEConfig
    >>> from sgl.tasks.ssl_pretraining import pretrain
    >>> graph = sgl.datasets.load("karate")
    >>> model = GCMAE(graph.num_features, GCMAEConfig(hidden=16, epochs=3))
    >>> history = pretrain(model, graph, seed=0)
    >>> len(history), sorted(history[-1])
    (3, ['adj', 'cl', 'loss', 'mae', 'std'])
    >>> model.embed(graph).shape
    torch.Size([34, 16])
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv

from sgl.data import Graph
from sgl.models.ssl.augment import _drop_edges, _drop_feature_columns, drop_nodes
from sgl.models.ssl.config import GCMAEConfig
from sgl.models.ssl.encoder import GNNEncoder, _gat_propagate, _project
from sgl.models.ssl.inputs import check_ssl_model_args, ssl_inputs
from sgl.models.ssl.losses import adjacency_loss, dense_adjacency_loss, info_nce, sce_loss, variance_loss

__all__ = ["GCMAE"]


class GCMAE(nn.Module):
    r"""Graph contrastive masked autoencoder (see the module docstring for the losses).

    Args:
        in_features (int): node feature dimension.
        config (GCMAEConfig, optional): hyper-parameters (see also
            :func:`~sgl.models.ssl.graphmae_config`, :func:`~sgl.models.ssl.grace_config`).

    :meth:`loss` is one training step's objective; :func:`sgl.tasks.ssl_pretraining.pretrain`
    trains on one graph (for graph classification: the disjoint union of the collection's
    graphs) and returns per-epoch losses; :meth:`embed` returns the frozen encoder's node
    embeddings ``[N, hidden]``. The model never trains itself.
    """

    #: learning-rate schedule of the pre-training loop (GCMAE's code decays it on a cosine)
    lr_schedule = "cosine"

    def __init__(self, in_features: int, config: Optional[GCMAEConfig] = None) -> None:
        super().__init__()
        self.config = cfg = GCMAEConfig() if config is None else config
        check_ssl_model_args("GCMAE", in_features, cfg, GCMAEConfig)
        self.in_features = int(in_features)
        self.encoder = GNNEncoder(in_features, cfg.hidden, cfg.num_layers, cfg.encoder, cfg.heads, cfg.dropout,
                                  cfg.in_drop, cfg.attn_drop, cfg.negative_slope)
        self.mask_token = nn.Parameter(torch.zeros(1, in_features))
        self.encoder_to_decoder = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        if cfg.encoder == "gat":
            self.decoder = GATConv(cfg.hidden, in_features, heads=1, dropout=cfg.attn_drop,
                                   negative_slope=cfg.negative_slope)
        else:
            self.decoder = GCNConv(cfg.hidden, in_features)
        out = cfg.proj_out or cfg.hidden
        self.projector = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, out))
        self.projector2 = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, out))
        self.std_head = nn.Linear(cfg.hidden, cfg.hidden)
        self.std_act = nn.PReLU() if cfg.std_head == "prelu_norm" else None

    def __repr__(self) -> str:
        c = self.config
        return (f"GCMAE(in_features={self.in_features}, encoder={c.encoder}, hidden={c.hidden}, "
                f"num_layers={c.num_layers}, weights(mae={c.mae_weight}, cl={c.cl_weight}, adj={c.adj_weight}, "
                f"std={c.std_weight}))")

    def reset_parameters(self) -> None:
        self.encoder.reset_parameters()
        nn.init.zeros_(self.mask_token)
        for module in (self.encoder_to_decoder, self.decoder, self.std_head, *self.projector, *self.projector2):
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
        for module in (*self.projector, *self.projector2, self.std_act):
            if isinstance(module, nn.PReLU):
                nn.init.constant_(module.weight, 0.25)

    # -- inputs -----------------------------------------------------------------------
    def inputs(self, graph: Graph, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(x, edge_index)`` of ``graph`` on ``device``, prepared as the config says."""
        return ssl_inputs(graph, self.in_features, "GCMAE", device, self.config.normalize_features,
                          self.config.sparse_input)

    def _mask_sparse(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_mask` on a sparse COO ``x``: (masked input without the token, masked nodes, token nodes)."""
        cfg = self.config
        n, dev = x.size(0), x.device
        rows, cols = x.indices()
        values = x.values()
        perm = torch.randperm(n, device=dev)
        num_mask = max(1, int(cfg.mask_rate * n))
        masked = perm[:num_mask]
        is_masked = torch.zeros(n, dtype=torch.bool, device=dev)
        is_masked[masked] = True
        keep = ~is_masked[rows]
        parts = [(rows[keep], cols[keep], values[keep])]
        num_replace = int(cfg.replace_rate * num_mask)
        token_nodes = masked
        if num_replace:
            order = masked[torch.randperm(num_mask, device=dev)]
            token_nodes, noise_nodes = order[num_replace:], order[:num_replace]
            sources = torch.randint(0, n, (num_replace,), device=dev)
            indptr = torch.zeros(n + 1, dtype=torch.long, device=dev)
            indptr[1:] = torch.bincount(rows, minlength=n).cumsum(0)
            counts = indptr[sources + 1] - indptr[sources]
            starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
            offsets = torch.arange(int(counts.sum()), device=dev) - starts
            entries = torch.repeat_interleave(indptr[sources], counts) + offsets
            parts.append((torch.repeat_interleave(noise_nodes, counts), cols[entries], values[entries]))
        out = torch.sparse_coo_tensor(torch.stack([torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])]),
                                      torch.cat([p[2] for p in parts]), x.shape, check_invariants=False)
        return out, masked, token_nodes

    def _mask(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        n = x.size(0)
        perm = torch.randperm(n, device=x.device)
        num_mask = max(1, int(cfg.mask_rate * n))
        masked = perm[:num_mask]
        out = x.clone()
        num_replace = int(cfg.replace_rate * num_mask)
        if num_replace:
            # GraphMAE's replace trick: a few masked nodes get another node's features instead of the token
            order = masked[torch.randperm(num_mask, device=x.device)]
            token_nodes, noise_nodes = order[num_replace:], order[:num_replace]
            out[token_nodes] = 0.0
            out[noise_nodes] = x[torch.randint(0, n, (num_replace,), device=x.device)]
            out[token_nodes] += self.mask_token
        else:
            out[masked] = 0.0
            out[masked] += self.mask_token
        return out, masked

    # -- losses -------------------------------------------------------------------------
    def losses(self, x: torch.Tensor, edge_index: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The four loss terms (unweighted) for one training step on ``(x, edge_index)``."""
        cfg = self.config
        n = x.size(0)
        zero = x.new_zeros(())
        out = {"mae": zero, "cl": zero, "adj": zero, "std": zero}
        h_masked = None
        if cfg.mae_weight > 0 or cfg.cl_views == "masked":
            if x.is_sparse:
                if cfg.mask_rate > 0:
                    x_masked, masked, token_rows = self._mask_sparse(x)
                else:
                    x_masked, masked, token_rows = x, torch.arange(0, device=x.device), None
                h_masked = self.encoder(x_masked, edge_index, self.mask_token, token_rows)
            else:
                x_masked, masked = self._mask(x) if cfg.mask_rate > 0 else (x, torch.arange(0, device=x.device))
                h_masked = self.encoder(x_masked, edge_index)
            if cfg.mae_weight > 0:
                rep = self.encoder_to_decoder(h_masked)
                rep = rep.index_fill(0, masked, 0.0)
                if isinstance(self.decoder, GATConv):
                    if cfg.in_drop:
                        rep = F.dropout(rep, p=cfg.in_drop, training=self.training)
                    unmasked = torch.ones(n, dtype=torch.bool, device=x.device)
                    unmasked[masked] = False
                    # re-masked rows are zero: project only the others
                    proj = _project(self.decoder, rep, rows=unmasked.nonzero().flatten())
                    recon = _gat_propagate(self.decoder, proj, edge_index)
                else:
                    recon = self.decoder(rep, edge_index)
                target = x.index_select(0, masked).to_dense() if x.is_sparse else x[masked]
                out["mae"] = sce_loss(recon[masked], target, cfg.sce_alpha)
        if cfg.cl_weight > 0:
            second_head = self.projector if cfg.shared_projector else self.projector2
            if cfg.augmentation == "drop_node":
                # the views are induced subgraphs on different node sets, so the two views compared
                # are either one view through both heads ("single") or the masked view restricted
                # to the nodes the augmented view kept
                x_aug, ei_aug, kept = drop_nodes(x, edge_index, cfg.drop_node)
                h_aug = self.encoder(x_aug, ei_aug)
                if cfg.cl_views == "single":
                    first = h_aug
                elif cfg.cl_views == "masked":
                    first = h_masked[kept]
                else:
                    x2, ei2, kept2 = drop_nodes(x, edge_index, cfg.drop_node)
                    both = torch.zeros(n, 2, dtype=torch.long, device=x.device).fill_(-1)
                    both[kept, 0] = torch.arange(kept.numel(), device=x.device)
                    both[kept2, 1] = torch.arange(kept2.numel(), device=x.device)
                    common = (both >= 0).all(1)
                    h2 = self.encoder(x2, ei2)
                    first, h_aug = h2[both[common, 1]], h_aug[both[common, 0]]
            else:
                h_aug = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
                if cfg.cl_views == "single":
                    first = h_aug
                elif cfg.cl_views == "masked":
                    first = h_masked
                else:
                    first = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
            m = h_aug.size(0)
            nodes = torch.randperm(m, device=x.device)[:cfg.cl_max_nodes] if m > cfg.cl_max_nodes else slice(None)
            out["cl"] = info_nce(self.projector(first[nodes]), second_head(h_aug[nodes]), cfg.tau)
        h = h_masked if h_masked is not None else None
        if cfg.adj_weight > 0 or cfg.std_weight > 0:
            if h is None:
                h = self.encoder(x, edge_index)
            dense = cfg.adj_mode == "dense" or (cfg.adj_mode == "auto" and n <= cfg.adj_dense_max_nodes)
            if cfg.adj_weight > 0 and dense:
                out["adj"] = dense_adjacency_loss(h, edge_index, cfg.adj_temperature)
            elif cfg.adj_weight > 0 and edge_index.size(1) > 0:
                e = edge_index.size(1)
                pos = edge_index if e <= cfg.adj_max_pos else \
                    edge_index[:, torch.randint(0, e, (cfg.adj_max_pos,), device=x.device)]
                neg = torch.randint(0, n, (2, pos.size(1) * cfg.adj_neg_ratio), device=x.device)
                out["adj"] = adjacency_loss(h, pos, neg, cfg.adj_temperature)
            if cfg.std_weight > 0:
                z = self.std_head(h)
                if self.std_act is not None:
                    z = F.normalize(self.std_act(z), dim=1)
                out["std"] = variance_loss(z)
        return out

    def total_loss(self, terms: Dict[str, torch.Tensor]) -> torch.Tensor:
        cfg = self.config
        return (cfg.mae_weight * terms["mae"] + cfg.cl_weight * terms["cl"] + cfg.adj_weight * terms["adj"]
                + cfg.std_weight * terms["std"])

    def loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """The weighted total loss of one training step and its (unweighted) terms."""
        terms = self.losses(x, edge_index)
        return self.total_loss(terms), terms

    # -- inference ----------------------------------------------------------------------
    @torch.no_grad()
    def embed(self, graph: Graph) -> torch.Tensor:
        """Node embeddings ``[N, hidden]`` of the frozen encoder on the clean graph (CPU tensor)."""
        self.eval()
        device = next(self.parameters()).device
        x, edge_index = self.inputs(graph, device)
        return self.encoder(x, edge_index).cpu()
