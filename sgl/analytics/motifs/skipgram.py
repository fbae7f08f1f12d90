r"""Skip-gram with negative sampling over vertex walks (DeepWalk / word2vec SGNS), in torch.

Every pair ``(c, o)`` of vertices at most ``window`` steps apart on a walk is a positive
example; negatives are drawn from the walk-frequency distribution raised to 3/4 (Mikolov et
al. 2013). With centre vectors ``u`` and context vectors ``v``, word2vec's loss with ``k``
negatives per pair is

.. math::

    \mathcal L(c, o) = -\log \sigma(u_c^\top v_o) - \sum_{i=1}^{k} \log \sigma(-u_c^\top v_{n_i}).

Each step here shares one draw of ``K = 4 k`` negatives among all pairs of the batch and
weights their terms by ``k / K``, which has the same expectation as ``k`` private negatives per
pair but turns the negative side into one dense ``[pairs, K]`` matrix product instead of
``k`` row gathers and scatters per pair (the batch-negative trick of PyTorch-BigGraph). Adam
minimises the mean over the batch; the centre vectors are the embedding. :class:`SkipGram` is the
model (it never trains itself); :func:`train_skipgram` is its training loop.

    >>> import numpy as np
    >>> walks = np.array([[0, 1, 0, 1], [2, 3, 2, 3]])
    >>> emb = train_skipgram(walks, 4, dim=8, window=1, epochs=30, seed=0)
    >>> emb.shape
    torch.Size([4, 8])
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sgl._checks import check_int, check_real
from sgl.device import get_device
from sgl.errors import FeatureError, GraphError

__all__ = ["SkipGram", "train_skipgram"]

#: negatives drawn per step = _SHARED x negatives-per-pair, shared by the step's pairs
_SHARED = 4


class SkipGram(nn.Module):
    """Centre and context embedding tables of the skip-gram model with negative sampling.

    Args:
        num_nodes (int): vocabulary size (vertices).
        dim (int): embedding width.

    Example:
        >>> import torch
        >>> model = SkipGram(5, 4)
        >>> loss = model.loss(torch.tensor([0, 1]), torch.tensor([1, 2]), torch.tensor([3, 4]), per_pair=1)
        >>> round(loss.item(), 4)   # context vectors start at zero: log 2 per term
        1.3863
    """

    def __init__(self, num_nodes: int, dim: int) -> None:
        super().__init__()
        self.num_nodes = check_int(num_nodes, "num_nodes", minimum=1)
        self.dim = check_int(dim, "dim", minimum=1)
        # dense gradients: torch's sparse-gradient path (coalesce + SparseAdam) was 10x slower on CPU
        self.center = nn.Embedding(self.num_nodes, self.dim)
        self.context = nn.Embedding(self.num_nodes, self.dim)
        self.reset_parameters()

    def reset_parameters(self, generator: Optional[torch.Generator] = None) -> None:
        """word2vec's initialisation: centres uniform in ``±0.5 / dim``, contexts zero."""
        with torch.no_grad():
            self.center.weight.uniform_(-0.5 / self.dim, 0.5 / self.dim, generator=generator)
            self.context.weight.zero_()

    def loss(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor,
             per_pair: float = 1.0) -> torch.Tensor:
        """Mean SGNS loss of ``[B]`` positive pairs against ``[K]`` negatives shared by the batch,
        each negative term weighted ``per_pair / K`` (``per_pair`` = word2vec's ``k``)."""
        u = self.center(center)
        positive = (u * self.context(context)).sum(-1)
        negative = u @ self.context(negatives).T
        return (F.softplus(-positive) + F.softplus(negative).sum(-1) * (per_pair / negatives.numel())).mean()

    def embeddings(self) -> torch.Tensor:
        """``[num_nodes, dim]`` centre vectors, detached, on the CPU."""
        return self.center.weight.detach().cpu().clone()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.num_nodes}, {self.dim})"


def _pairs(walks: torch.Tensor, window: int):
    centers, contexts = [], []
    padded = bool((walks < 0).any())
    for offset in range(1, min(window, walks.size(1) - 1) + 1):
        a, b = walks[:, :-offset].reshape(-1), walks[:, offset:].reshape(-1)
        if padded:
            keep = (a >= 0) & (b >= 0)
            a, b = a[keep], b[keep]
        centers += [a, b]
        contexts += [b, a]
    return torch.cat(centers), torch.cat(contexts)


def train_skipgram(walks: np.ndarray, num_nodes: int, dim: int = 64, window: int = 5, negatives: int = 5,
                   epochs: int = 1, batch_size: int = 256, lr: float = 0.01, seed: int = 0,
                   device: Optional[str] = None, progress: bool = False) -> torch.Tensor:
    """Train a :class:`SkipGram` on ``walks`` (``-1`` = padding) and return the centre vectors.

    Args:
        walks: ``[num_walks, length]`` vertex ids from :func:`~sgl.analytics.motifs.weighted_random_walks`.
        num_nodes, dim: vocabulary size and embedding width.
        window: context size (pairs up to ``window`` steps apart).
        negatives: negative samples per positive pair (``k``; each step draws ``4 k`` shared ones).
        epochs, batch_size, lr: passes over the walks, walks per step, Adam step size.
        seed: seeds the initialisation, the walk order and the negatives.
        device: where to train (``"cpu"``, ``"cuda"``, ``"auto"``; default ``$SGL_DEVICE``, else
            ``"auto"``: the GPU when there is one).
        progress: a progress bar over the steps.
    """
    from tqdm.auto import tqdm

    window = check_int(window, "window", minimum=1)
    negatives = check_int(negatives, "negatives", minimum=1)
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_real(lr, "lr", 0.0, open_low=True)
    walks_t = torch.as_tensor(np.asarray(walks), dtype=torch.long)
    if walks_t.dim() != 2 or walks_t.size(1) < 2:
        raise GraphError(f"walks must be [num_walks, length >= 2], got shape {tuple(walks_t.shape)}")
    if walks_t.numel() and int(walks_t.max()) >= num_nodes:
        raise GraphError(f"walks visit vertex {int(walks_t.max())} but num_nodes={num_nodes}")
    dev = get_device(device)
    generator = torch.Generator().manual_seed(seed)
    model = SkipGram(num_nodes, dim)
    model.reset_parameters(generator)
    model.to(dev)
    visits = torch.bincount(walks_t[walks_t >= 0], minlength=num_nodes).double()
    noise = torch.cumsum(visits ** 0.75, 0)
    noise = (noise / noise[-1]).float().to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    steps = (walks_t.size(0) + batch_size - 1) // batch_size
    with tqdm(total=epochs * steps, desc="skip-gram", disable=not progress, leave=False) as bar:
        for _ in range(epochs):
            order = torch.randperm(walks_t.size(0), generator=generator)
            for lo in range(0, walks_t.size(0), batch_size):
                center, context = _pairs(walks_t[order[lo:lo + batch_size]], window)
                bar.update()
                if center.numel() == 0:
                    continue
                draws = torch.rand(_SHARED * negatives, generator=generator).to(dev)
                negative = torch.searchsorted(noise, draws).clamp(max=num_nodes - 1)
                optimizer.zero_grad()
                loss = model.loss(center.to(dev), context.to(dev), negative, per_pair=negatives)
                if not torch.isfinite(loss):
                    raise FeatureError(f"skip-gram loss became {float(loss)}; lower lr (got {lr})")
                loss.backward()
                optimizer.step()
    return model.embeddings()
