"""Document embeddings for packing: TF-IDF + truncated SVD by default, any encoder pluggable.

An encoder has ``fit(texts) -> self`` and ``encode(texts) -> float32 [n, d]`` with unit rows
(cosine = dot product; an empty row stays zero and has cosine 0 with everything).
:class:`TfidfSvdEncoder` is latent semantic analysis: ``x = tfidf(text) V_d / ||.||`` with
``V_d`` the top-``d`` right singular vectors of the TF-IDF matrix of the *fit* documents
(scikit-learn ``TfidfVectorizer`` + ``TruncatedSVD``). Fitting on a fixed prefix of the corpus
is what lets a corpus larger than memory be encoded chunk by chunk with the same map.
:class:`HiddenStateEncoder` is the mean last hidden state of a Hugging Face model (DataSculpt
uses bge-m3; any ``transformers`` encoder or the small LM can stand in).

>>> enc = TfidfSvdEncoder(dim=2, seed=0).fit(["cats purr", "dogs bark", "cats and dogs", "cats"])
>>> x = enc.encode(["cats purr", "dogs bark"])
>>> x.shape, bool(abs(float((x * x).sum(1)[0]) - 1) < 1e-5)
((2, 2), True)
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import ConfigError, DatasetError

__all__ = ["Encoder", "TfidfSvdEncoder", "HiddenStateEncoder", "normalize_rows"]


class Encoder(Protocol):
    def fit(self, texts: Sequence[str]) -> "Encoder": ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as contiguous float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)


class TfidfSvdEncoder:
    """TF-IDF (sublinear tf, English-agnostic word tokens) followed by a rank-``dim`` SVD.

    ``x_i = normalize(tfidf(t_i) · V_dim)``; ``V_dim`` from ``TruncatedSVD(dim, random_state=seed)``
    on the fit texts. ``max_features`` caps the vocabulary (most frequent terms).
    """

    def __init__(self, dim: int = 64, *, max_features: int = 50_000, seed: int = 0) -> None:
        self.dim = check_int(dim, "dim", minimum=1)
        self.max_features = check_int(max_features, "max_features", minimum=2)
        self.seed = check_int(seed, "seed", minimum=0)
        self._vectorizer: Any = None
        self._svd: Any = None

    def fit(self, texts: Sequence[str]) -> "TfidfSvdEncoder":
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = list(texts)
        if not texts:
            raise DatasetError("TfidfSvdEncoder.fit: no documents to fit on")
        self._vectorizer = TfidfVectorizer(max_features=self.max_features, sublinear_tf=True,
                                           token_pattern=r"(?u)\b\w+\b", dtype=np.float32)
        try:
            matrix = self._vectorizer.fit_transform(texts)
        except ValueError as exc:  # empty vocabulary
            raise DatasetError(f"TfidfSvdEncoder.fit: the documents have no word ({exc})") from None
        components = min(self.dim, matrix.shape[1] - 1, matrix.shape[0] - 1)
        self._svd = None
        if components >= 1:
            self._svd = TruncatedSVD(n_components=components, random_state=self.seed, algorithm="randomized",
                                     n_iter=5).fit(matrix)
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._vectorizer is None:
            raise ConfigError("TfidfSvdEncoder.encode called before fit(texts)")
        matrix = self._vectorizer.transform(list(texts))
        dense = self._svd.transform(matrix) if self._svd is not None else matrix.toarray()
        out = np.zeros((dense.shape[0], self.dim), dtype=np.float32)
        out[:, : dense.shape[1]] = dense[:, : self.dim]
        return normalize_rows(out)


class HiddenStateEncoder:
    """Mean of a Hugging Face model's last hidden state over each document's first ``max_tokens`` ids.

    ``tokenizer`` is a ``tokenizers.Tokenizer``; ``model`` any ``transformers`` model that returns
    ``hidden_states`` (``output_hidden_states=True``). ``fit`` does nothing (the model is given).
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_tokens: int = 256, batch_size: int = 16) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        self.batch_size = check_int(batch_size, "batch_size", minimum=1)
        self.dim: Optional[int] = None

    def fit(self, texts: Sequence[str]) -> "HiddenStateEncoder":
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        rows = []
        self.model.eval()
        texts = list(texts)
        device = next(self.model.parameters()).device
        with torch.no_grad():
            for begin in range(0, len(texts), self.batch_size):
                encodings = self.tokenizer.encode_batch(texts[begin:begin + self.batch_size])
                ids = [e.ids[: self.max_tokens] or [0] for e in encodings]
                width = max(len(i) for i in ids)
                batch = torch.zeros(len(ids), width, dtype=torch.long, device=device)
                mask = torch.zeros(len(ids), width, device=device)
                for r, row in enumerate(ids):
                    batch[r, : len(row)] = torch.tensor(row, device=device)
                    mask[r, : len(row)] = 1
                out = self.model(input_ids=batch, attention_mask=mask.long(), output_hidden_states=True)
                hidden = out.hidden_states[-1]
                rows.append(((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).float().cpu().numpy())
        x = normalize_rows(np.concatenate(rows)) if rows else np.zeros((0, 1), np.float32)
        self.dim = x.shape[1]
        return x
