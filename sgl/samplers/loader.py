"""``NodeLoader``: iterate mini-batches of seed nodes through any sampler.

The loader cuts ``input_nodes`` into batches (shuffled per epoch when ``shuffle``), samples
each with its own numpy generator seeded by ``(seed, epoch, batch index)`` — so a batch's
sample does not depend on ``num_workers`` or on the order batches are produced in — and
optionally attaches features ``x[n_id]`` and labels ``y[output_nodes]``. With
``num_workers > 0`` sampling runs in ``torch.utils.data.DataLoader`` worker processes.

Example:
    >>> import sgl
    >>> from sgl.samplers import NeighborSampler, NodeLoader
    >>> g = sgl.datasets.load("karate")
    >>> loader = NodeLoader(NeighborSampler(g, [5, 5]), g.train_mask.nonzero().flatten(), batch_size=2,
    ...                     x=g.x, y=g.y, seed=0)
    >>> batch = next(iter(loader))
    >>> batch.x.shape[0] == batch.n_id.numel(), batch.y.shape
    (True, torch.Size([2]))
    >>> len(loader) == -(-int(g.train_mask.sum()) // 2)
    True
"""
from __future__ import annotations

from numbers import Integral
from typing import Any, Iterator, List, Optional

import numpy as np
import torch

from sgl.errors import ConfigError, GraphError
from sgl.samplers.block import MiniBatch

__all__ = ["NodeLoader"]


class _BatchDataset(torch.utils.data.Dataset):
    def __init__(self, loader: "NodeLoader", batches: List[np.ndarray], epoch: int) -> None:
        self.loader, self.batches, self.epoch = loader, batches, epoch

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> MiniBatch:
        return self.loader._make(self.batches[i], self.epoch, i)


class NodeLoader:
    """Mini-batches of seed nodes, sampled by ``sampler.sample(seeds, rng=...)``.

    Args:
        sampler: a :class:`~sgl.samplers.NeighborSampler` (or anything with ``sample(seeds, rng=)``).
        input_nodes: seed node ids (index tensor) or a boolean mask.
        batch_size: seeds per batch.
        shuffle: reshuffle the seeds every epoch.
        drop_last: drop a trailing partial batch.
        x, y: optional features / labels (tensors, or any object indexable by an id tensor, such
            as a :class:`~sgl.samplers.FeatureStore`) attached to each batch.
        num_workers: sampling worker processes (0 = in the main process).
        seed: base seed; epoch ``e`` batch ``i`` uses ``numpy.random.default_rng([seed, e, i])``.
    """

    def __init__(self, sampler: Any, input_nodes: Any, batch_size: int = 512, shuffle: bool = False,
                 drop_last: bool = False, x: Any = None, y: Optional[torch.Tensor] = None,
                 num_workers: int = 0, seed: int = 0) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, Integral) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, Integral) or num_workers < 0:
            raise ConfigError(f"num_workers must be an integer >= 0, got {num_workers!r}")
        nodes = torch.as_tensor(input_nodes)
        if nodes.dtype == torch.bool:
            nodes = nodes.nonzero().flatten()
        nodes = nodes.reshape(-1).long()
        if nodes.numel() == 0:
            raise GraphError("input_nodes is empty; the loader needs at least one seed node")
        self.sampler, self.input_nodes = sampler, nodes.numpy()
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), bool(shuffle), bool(drop_last)
        self.x, self.y, self.num_workers, self.seed = x, y, int(num_workers), int(seed)
        self.epoch = 0

    def __len__(self) -> int:
        n = self.input_nodes.size
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batches(self, epoch: int) -> List[np.ndarray]:
        nodes = self.input_nodes
        if self.shuffle:
            nodes = nodes[np.random.default_rng([self.seed, epoch, 1 << 30]).permutation(nodes.size)]
        out = [nodes[i:i + self.batch_size] for i in range(0, nodes.size, self.batch_size)]
        if self.drop_last and out and out[-1].size < self.batch_size:
            out.pop()
        return out

    def _make(self, seeds: np.ndarray, epoch: int, index: int) -> MiniBatch:
        batch = self.sampler.sample(seeds, rng=np.random.default_rng([self.seed, epoch, index]))
        if self.x is not None:
            batch.x = self.x[batch.n_id]
        if self.y is not None:
            batch.y = self.y[batch.output_nodes]
        return batch

    def __iter__(self) -> Iterator[MiniBatch]:
        epoch = self.epoch
        self.epoch += 1
        batches = self._batches(epoch)
        if self.num_workers == 0:
            for i, seeds in enumerate(batches):
                yield self._make(seeds, epoch, i)
            return
        loader = torch.utils.data.DataLoader(_BatchDataset(self, batches, epoch), batch_size=None,
                                             shuffle=False, num_workers=self.num_workers)
        yield from loader

    def __repr__(self) -> str:
        return (f"NodeLoader({self.sampler!r}, num_seeds={self.input_nodes.size}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, num_workers={self.num_workers})")
