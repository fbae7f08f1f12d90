"""Self-supervised pre-training: the one training loop of every model in :mod:`sgl.models.ssl`.

:func:`pretrain` seeds the run, resets the model's parameters, moves it to its config's device
and minimises ``model.loss(x, edge_index)`` on the whole graph with Adam for
``config.epochs`` epochs (``lr``, ``weight_decay`` from the model's config; a cosine
learning-rate decay when ``model.lr_schedule == "cosine"``, as GCMAE's code). It returns the
per-epoch losses; the trained model then gives frozen embeddings with ``model.embed(graph)``.

Example:
    >>> import sgl
    >>> from sgl.models.ssl import build_ssl_model
    >>> graph = sgl.datasets.load("karate")
    >>> model = build_ssl_model("gae", graph.num_features, hidden=8, epochs=3)
    >>> history = pretrain(model, graph, seed=0)
    >>> len(history), sorted(history[0]), model.embed(graph).shape
    (3, ['loss'], torch.Size([34, 8]))
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError
from sgl.tasks.stats import seed_everything

__all__ = ["pretrain", "run_pretraining"]

#: what :func:`pretrain` needs of a model (every model of :mod:`sgl.models.ssl` has it)
_SSL_MODEL_API = ("config", "reset_parameters", "inputs", "loss", "embed", "lr_schedule")


def pretrain(model: nn.Module, graph: Any, seed: int = 0, progress: bool = False,
             callback: Optional[Callable[[int, Any], None]] = None) -> List[Dict[str, float]]:
    """Pre-train self-supervised ``model`` on ``graph``; returns per-epoch ``{"loss", terms...}``.

    Args:
        model: a model of :mod:`sgl.models.ssl` (GCMAE, DGI, GAE, ...); its config gives
            ``epochs``, ``lr``, ``weight_decay`` and ``device``.
        graph: an :class:`sgl.data.Graph` with node features (for graph classification, the
            disjoint union of a collection's graphs).
        seed: seeds the parameters' initialisation and every random view of the run.
        progress: show a progress bar over epochs.
        callback: ``callback(epoch, model)`` after every epoch (e.g. to log a probe).

    Sets ``model.fit_time_s``; raises :class:`~sgl.errors.FeatureError` when the loss diverges.
    """
    missing = [name for name in _SSL_MODEL_API if not hasattr(model, name)]
    if missing:
        raise ConfigError(f"pretrain takes a self-supervised model of sgl.models.ssl; {type(model).__name__} "
                          f"lacks {', '.join(missing)}")
    cfg = model.config
    # python's and numpy's generators too: torch_geometric's negative sampling draws with random.sample
    seed_everything(seed)
    model.reset_parameters()
    device = get_device(cfg.device)
    model.to(device)
    x, edge_index = model.inputs(graph, device)
    return run_pretraining(model, x, edge_index, model.loss, epochs=cfg.epochs, lr=cfg.lr,
                           weight_decay=cfg.weight_decay, name=type(model).__name__,
                           cosine=model.lr_schedule == "cosine", progress=progress, callback=callback)


def run_pretraining(module: nn.Module, x: torch.Tensor, edge_index: torch.Tensor,
                    step: Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, Dict[str, torch.Tensor]]], *,
                    epochs: int, lr: float, weight_decay: float, name: str, cosine: bool = False,
                    progress: bool = False, callback: Optional[Callable[[int, Any], None]] = None
                    ) -> List[Dict[str, float]]:
    """The full-graph self-supervised optimisation loop behind :func:`pretrain`.

    Adam over ``module``'s parameters (cosine learning-rate decay when ``cosine``); each epoch
    ``step(x, edge_index)`` returns ``(loss, named terms)``. Returns per-epoch ``{"loss", terms...}``,
    sets ``module.fit_time_s`` and raises :class:`FeatureError` on a non-finite loss.
    """
    optimizer = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = (torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 0.5 * (1 + math.cos(math.pi * e / epochs)))
                if cosine else None)
    history: List[Dict[str, float]] = []
    loop = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        loop = tqdm(loop, desc=f"{name} pre-training", leave=False, disable=None)
    start = time.perf_counter()
    for epoch in loop:
        module.train()
        optimizer.zero_grad()
        loss, terms = step(x, edge_index)
        if not torch.isfinite(loss):
            raise FeatureError(f"{name} pre-training diverged (loss {float(loss.detach())}) at epoch {epoch}; "
                               f"lower lr or check the features for huge values")
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        history.append({"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in terms.items()}})
        if callback is not None:
            callback(epoch, module)
    module.fit_time_s = time.perf_counter() - start
    return history
