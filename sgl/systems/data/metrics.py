"""Quality of a packing: fill, truncation, padding, intra-window similarity, homogeneity.

For a packing of ``N`` documents into ``W`` windows of capacity ``C``:

* ``fill_rate`` = placed tokens / (W·C); ``padding_tokens`` = W·C − placed tokens;
* ``docs_truncated`` = documents not placed whole in one window (and their fraction);
* ``intra_window_similarity`` = mean over windows with ≥ 2 documents of the mean pairwise
  cosine of their documents, ``(||Σ x||² − Σ ||x||²) / (m (m − 1))`` for unit rows ``x``;
* ``homogeneity`` (when document labels — e.g. the source article or the cluster — are given)
  = mean over windows of the share of the window's documents that carry its majority label.

>>> import numpy as np
>>> from sgl.systems.data.packing import Packing
>>> p = Packing(4, np.array([0, 0, 1]), np.array([0, 1, 2]), np.zeros(3, int), np.array([2, 2, 3]), np.array([2, 2, 3]))
>>> x = np.array([[1, 0], [1, 0], [0, 1]], dtype="float32")
>>> m = packing_metrics(p, x, labels=np.array([5, 5, 7]))
>>> m["fill_rate"], m["padding_tokens"], m["intra_window_similarity"], m["homogeneity"]
(0.875, 1, 1.0, 1.0)
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from sgl.systems.data.packing import Packing

__all__ = ["packing_metrics"]


def packing_metrics(packing: Packing, embeddings: Optional[np.ndarray] = None,
                    labels: Optional[np.ndarray] = None) -> Dict[str, float]:
    """The metrics of the module docstring as a JSON-ready dict."""
    tokens = packing.window_tokens()
    windows = packing.num_windows
    placed = int(tokens.sum())
    truncated = packing.truncated_docs()
    n_docs = int(packing.doc_lengths.size)
    out: Dict[str, float] = {
        "method": packing.method,
        "documents": n_docs,
        "windows": windows,
        "capacity": int(packing.capacity),
        "tokens": placed,
        "fill_rate": placed / (windows * packing.capacity) if windows else 0.0,
        "padding_tokens": int(windows * packing.capacity - placed),
        "docs_truncated": int(truncated.size),
        "truncated_fraction": truncated.size / n_docs if n_docs else 0.0,
        "dropped_tokens": packing.dropped_tokens,
    }
    # one entry per (window, document): a document split over windows counts in each of them
    pairs = np.unique(np.stack([packing.window, packing.doc], 1), axis=0)
    w, d = pairs[:, 0], pairs[:, 1]
    members = np.bincount(w, minlength=windows)
    multi = members >= 2
    if embeddings is not None:
        x = np.asarray(embeddings, dtype=np.float64)[d]
        sums = np.zeros((windows, x.shape[1]))
        np.add.at(sums, w, x)
        self_sq = np.bincount(w, weights=(x * x).sum(1), minlength=windows)
        m = members[multi].astype(np.float64)
        pair_mean = ((sums[multi] ** 2).sum(1) - self_sq[multi]) / (m * (m - 1))
        out["intra_window_similarity"] = float(pair_mean.mean()) if pair_mean.size else float("nan")
    if labels is not None:
        lab = np.asarray(labels)[d]
        _, lab_ids = np.unique(lab, return_inverse=True)
        combo = np.unique(np.stack([w, lab_ids], 1), axis=0, return_counts=True)
        best = np.zeros(windows)
        np.maximum.at(best, combo[0][:, 0], combo[1])
        out["homogeneity"] = float((best[members > 0] / members[members > 0]).mean())
    out["multi_document_windows"] = int(multi.sum())
    return out
