r"""TransE embeddings for the featureless node types of a heterogeneous graph.

The leaderboard entries on ogbn-mag (NARS, GAMLP, SeHGNN) give the featureless types
(author, institution, field) knowledge-graph embeddings trained on the graph's own triples
before propagating. This is TransE (Bordes et al., 2013): every node :math:`v` (all types)
gets :math:`e_v \in \mathbb{R}^d`, every relation :math:`r` gets :math:`w_r`, and for each
edge :math:`(h, r, t)` and a corrupted edge :math:`(h', r, t')` (head or tail replaced by a
uniformly drawn node *of the same type*) the margin loss

.. math:: \mathcal{L} = \max\big(0,\ \gamma + \lVert e_h + w_r - e_t \rVert_p
                                  - \lVert e_{h'} + w_r - e_{t'} \rVert_p\big)

is minimised by mini-batch Adam for a few epochs, entity rows renormalised to unit length
after each step (TransE's constraint). Seeded: the same graph and seed give the same rows.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["transe_embeddings", "transe_loss"]


def _triples(hg: Any, offsets: Dict[str, int]) -> tuple:
    heads, rels, tails = [], [], []
    for r, etype in enumerate(hg.edge_types):
        src_type, _, dst_type = etype
        ei = hg.edge_index(etype)
        heads.append(ei[0] + offsets[src_type])
        tails.append(ei[1] + offsets[dst_type])
        rels.append(torch.full((ei.size(1),), r, dtype=torch.int64))
    return torch.cat(heads), torch.cat(rels), torch.cat(tails)


def transe_loss(entity: torch.Tensor, relation: torch.Tensor, pos: Sequence[torch.Tensor],
                neg: Sequence[torch.Tensor], margin: float, p: int = 2) -> torch.Tensor:
    r"""Mean margin loss :math:`\max(0, \gamma + d(h, r, t) - d(h', r, t'))` of a batch.

    Example:
        >>> e, w = torch.eye(3), torch.zeros(1, 3)
        >>> h, r, t = torch.tensor([0]), torch.tensor([0]), torch.tensor([0])
        >>> float(transe_loss(e, w, (h, r, t), (h, r, torch.tensor([1])), margin=1.0))  # 1 + 0 - sqrt(2) < 0
        0.0
    """
    h, r, t = pos
    nh, nr, nt = neg
    d_pos = (entity[h] + relation[r] - entity[t]).norm(p=p, dim=1)
    d_neg = (entity[nh] + relation[nr] - entity[nt]).norm(p=p, dim=1)
    return torch.relu(margin + d_pos - d_neg).mean()


def transe_embeddings(hg: Any, dim: int, *, types: Optional[Sequence[str]] = None, epochs: int = 5,
                      margin: float = 1.0, lr: float = 0.01, batch_size: int = 4096, p: int = 2,
                      seed: int = 0, scale: Optional[float] = None, progress: bool = False,
                      history: Optional[List[float]] = None) -> Dict[str, torch.Tensor]:
    """TransE rows ``{type: [n_type, dim]}`` for ``types`` (default: the featureless types).

    ``scale`` multiplies the unit-norm rows (e.g. the mean row norm of the target features,
    so the filled types mix with the given ones at a comparable size); ``history``, when a
    list, receives the mean loss of every epoch.

    Example:
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 3}, {("a", "w", "p"): torch.tensor([[0, 1, 2], [0, 1, 3]])},
        ...     x_dict={"p": torch.randn(4, 8)}, target="p")
        >>> out = transe_embeddings(g, 8, epochs=2, seed=0)
        >>> sorted(out), tuple(out["a"].shape), bool(torch.allclose(out["a"].norm(dim=1), torch.ones(3)))
        (['a'], (3, 8), True)
    """
    check_int(dim, "TransE dim", 1)
    check_int(epochs, "TransE epochs", 1)
    check_int(batch_size, "TransE batch_size", 1)
    check_real(margin, "TransE margin", 0.0)
    check_real(lr, "TransE lr", 0.0, open_low=True)
    if p not in (1, 2):
        raise ConfigError(f"TransE p must be 1 (L1 distance) or 2 (L2), got {p}")
    types = list(hg.featureless_types() if types is None else [hg.check_node_type(t) for t in types])
    if not types:
        return {}
    if not hg.edge_types or hg.num_edges == 0:
        raise ConfigError("TransE needs edges (triples) to train on; this graph has none")
    offsets, total = {}, 0
    for t in hg.node_types:
        offsets[t] = total
        total += hg.num_nodes_dict[t]
    heads, rels, tails = _triples(hg, offsets)
    counts = torch.tensor([hg.num_nodes_dict[t] for t in hg.node_types])
    starts = torch.tensor([offsets[t] for t in hg.node_types])
    type_of = torch.repeat_interleave(torch.arange(len(counts)), counts)

    generator = torch.Generator().manual_seed(seed)
    bound = 6.0 / dim ** 0.5   # TransE's uniform(-6/sqrt(d), 6/sqrt(d)) initialisation
    entity = torch.nn.Embedding(total, dim, sparse=True)
    relation = torch.nn.Embedding(len(hg.edge_types), dim, sparse=True)
    with torch.no_grad():
        entity.weight.copy_(torch.rand(total, dim, generator=generator) * 2 * bound - bound)
        relation.weight.copy_(torch.rand(len(hg.edge_types), dim, generator=generator) * 2 * bound - bound)
        relation.weight.div_(relation.weight.norm(dim=1, keepdim=True).clamp_min(1e-12))
        entity.weight.div_(entity.weight.norm(dim=1, keepdim=True).clamp_min(1e-12))
    with torch.enable_grad():   # callers (fill_featureless) may run under no_grad
        weight = _train(entity, relation, (heads, rels, tails), type_of, starts, counts, generator,
                        epochs=epochs, margin=margin, lr=lr, batch_size=batch_size, p=p, progress=progress,
                        history=history)
    factor = 1.0 if scale is None else float(scale)
    return {t: weight[offsets[t]:offsets[t] + hg.num_nodes_dict[t]].clone() * factor for t in types}


def _train(entity: torch.nn.Embedding, relation: torch.nn.Embedding, triples: tuple, type_of: torch.Tensor,
           starts: torch.Tensor, counts: torch.Tensor, generator: torch.Generator, *, epochs: int, margin: float,
           lr: float, batch_size: int, p: int, progress: bool, history: Optional[List[float]]) -> torch.Tensor:
    heads, rels, tails = triples
    num_relations = relation.weight.size(0)
    optimizer = torch.optim.SparseAdam(list(entity.parameters()) + list(relation.parameters()), lr=lr)
    num = heads.numel()
    loop = range(epochs)
    if progress:
        from tqdm import tqdm

        loop = tqdm(loop, desc="TransE", unit="epoch")
    for _ in loop:
        order = torch.randperm(num, generator=generator)
        total_loss, batches = 0.0, 0
        for begin in range(0, num, batch_size):
            idx = order[begin:begin + batch_size]
            h, r, t = heads[idx], rels[idx], tails[idx]
            # corrupt the head or the tail with a node of the same type (type-constrained negatives)
            corrupt_head = torch.rand(idx.numel(), generator=generator) < 0.5
            victim = torch.where(corrupt_head, h, t)
            vt = type_of[victim]
            repl = starts[vt] + (torch.rand(idx.numel(), generator=generator) * counts[vt]).long()
            nh, nt = torch.where(corrupt_head, repl, h), torch.where(corrupt_head, t, repl)
            optimizer.zero_grad()
            # gather through the embedding modules so the gradients are sparse
            rows = torch.cat([h, t, nh, nt]).unique()
            sub = entity(rows)
            local = torch.searchsorted(rows, torch.cat([h, t, nh, nt])).view(4, -1)
            loss = transe_loss(sub, relation(torch.arange(num_relations)), (local[0], r, local[1]),
                               (local[2], r, local[3]), margin, p)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                w = entity.weight[rows]
                entity.weight[rows] = w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)
            total_loss += float(loss.detach())
            batches += 1
        if history is not None:
            history.append(total_loss / max(batches, 1))
    return entity.weight.detach()
