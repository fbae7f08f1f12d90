"""The sample–embedding bigraph of HET-GMP.

Sample nodes are the rows of a CTR data set, embedding nodes the distinct ids
they contain; an edge says "this sample looks up this embedding".  Stored as
CSR both ways (sample -> embeddings, embedding -> samples) over *compact*
embedding indices ``0..num_embeddings-1``; :attr:`Bigraph.embed_ids` maps them
back to the table's row ids.
"""
from __future__ import annotations

import numpy as np
import torch

from sgl.errors import EmbeddingError

__all__ = ["Bigraph"]


class Bigraph:
    """Incidence between samples and the embeddings they use.

    >>> g = Bigraph(np.array([[10, 3], [3, 7], [10, 10]]))
    >>> g.num_samples, g.num_embeddings, g.embed_ids.tolist()
    (3, 3, [3, 7, 10])
    >>> g.degree.tolist()        # samples per embedding (a repeated id counts once)
    [2, 1, 2]
    >>> g.embeddings_of(2).tolist()
    [2]
    """

    def __init__(self, ids: np.ndarray | torch.Tensor) -> None:
        if isinstance(ids, torch.Tensor):
            ids = ids.detach().cpu().numpy()
        ids = np.asarray(ids)
        if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
            raise EmbeddingError(
                f"Bigraph: ids must be a non-empty 2-D array [num_samples, num_fields], got shape {ids.shape}."
            )
        if not np.issubdtype(ids.dtype, np.integer):
            raise EmbeddingError(f"Bigraph: ids must be integers, got dtype {ids.dtype}.")
        if ids.min() < 0:
            raise EmbeddingError(f"Bigraph: ids must be >= 0, got minimum {int(ids.min())}.")
        n, f = ids.shape
        self.embed_ids, compact = np.unique(ids.astype(np.int64), return_inverse=True)
        compact = compact.reshape(n, f).astype(np.int64)
        compact.sort(axis=1)
        keep = np.ones_like(compact, dtype=bool)
        keep[:, 1:] = compact[:, 1:] != compact[:, :-1]  # one edge per (sample, embedding)
        self.num_samples, self.num_embeddings = n, int(self.embed_ids.size)
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(keep.sum(1), out=self.indptr[1:])
        self.indices = compact[keep]
        samples = np.repeat(np.arange(n, dtype=np.int64), keep.sum(1))
        order = np.argsort(self.indices, kind="stable")
        self.degree = np.bincount(self.indices, minlength=self.num_embeddings).astype(np.int64)
        self.eptr = np.zeros(self.num_embeddings + 1, dtype=np.int64)
        np.cumsum(self.degree, out=self.eptr[1:])
        self.esamples = samples[order]

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    def embeddings_of(self, sample: int) -> np.ndarray:
        """Compact embedding indices of one sample."""
        return self.indices[self.indptr[sample]:self.indptr[sample + 1]]

    def samples_of(self, embedding: int) -> np.ndarray:
        """Samples that use one (compact) embedding."""
        return self.esamples[self.eptr[embedding]:self.eptr[embedding + 1]]

    def compact(self, ids: np.ndarray) -> np.ndarray:
        """Compact indices of table ids (-1 for ids not in the bigraph)."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self.embed_ids, ids).clip(max=max(self.num_embeddings - 1, 0))
        return np.where(self.embed_ids[pos] == ids, pos, -1)

    def __repr__(self) -> str:
        return (f"Bigraph(num_samples={self.num_samples}, num_embeddings={self.num_embeddings}, "
                f"num_edges={self.num_edges})")
