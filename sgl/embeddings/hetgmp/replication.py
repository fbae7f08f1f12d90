r"""Replication of remote embeddings (mirrors) by priority, within a storage budget.

Worker ``i`` keeps, besides the embeddings it is root of, mirrors of the remote
embeddings with the highest priority (HET-GMP reference code)

.. math:: P_i(e) = C[i, root(e)]\; S(cnt_i(e))^2 \;\Bigl(\frac{1}{\deg e} + \frac{1}{cnt_i(e)}\Bigr),
   \qquad cnt_i(e) > 0,\ root(e) \ne i,

favouring rows the worker reads in many batches (``S``) and that few others
update (``1/deg``), so a mirror saves many fetches and costs few syncs.
"""
from __future__ import annotations

import numpy as np
import torch

from sgl._checks import check_int, check_real
from sgl.embeddings.base import check_scalar
from sgl.embeddings.hetgmp.partition import Partition, soft_count
from sgl.errors import ConfigError

__all__ = ["replica_priority", "select_replicas"]


def replica_priority(partition: Partition) -> np.ndarray:
    """``P[i, e]`` for every worker and compact embedding (0 where not eligible)."""
    g = partition.graph
    cnt = partition.counts()
    m = g.num_samples / partition.num_parts
    s = soft_count(cnt, m, partition.batch_size)
    c = partition.cost_matrix[:, partition.embed_part]  # C[i, root(e)]
    with np.errstate(divide="ignore", invalid="ignore"):
        pr = c * s**2 * (1.0 / np.maximum(g.degree, 1)[None, :] + 1.0 / cnt)
    eligible = (cnt > 0) & (partition.embed_part[None, :] != np.arange(partition.num_parts)[:, None])
    return np.where(eligible, pr, 0.0)


def select_replicas(partition: Partition, budget: int | float) -> list[torch.Tensor]:
    """Table ids each worker mirrors, highest priority first.

    ``budget`` is the number of mirror rows per worker (``int``) or a fraction of
    the bigraph's embeddings (``float`` in ``[0, 1]``, HET-GMP's ``store_rate``).

    >>> import numpy as np
    >>> from sgl.embeddings.hetgmp import Bigraph, random_partition
    >>> part = random_partition(Bigraph(np.array([[0, 1], [1, 2], [0, 3], [2, 3]])), 2, 1)
    >>> [r.numel() for r in select_replicas(part, 1)]
    [1, 1]
    """
    n_embed = partition.graph.num_embeddings
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise ConfigError(f"select_replicas: budget must be an int (rows) or a float fraction, got {budget!r}.")
    if isinstance(budget, float):
        check_scalar(check_real, budget, f"select_replicas: a fractional budget must be in [0, 1], got {budget}.",
                     0.0, 1.0, error=ConfigError)
        rows = int(round(budget * n_embed))
    else:
        rows = check_scalar(check_int, budget, f"select_replicas: budget must be >= 0 rows, got {budget}.", 0,
                            error=ConfigError)
    pr = replica_priority(partition)
    out = []
    for i in range(partition.num_parts):
        cand = np.flatnonzero(pr[i] > 0)
        order = cand[np.argsort(-pr[i, cand], kind="stable")][:rows]
        out.append(torch.from_numpy(partition.graph.embed_ids[order].astype(np.int64)))
    return out
