r"""Weight pruning: one-shot magnitude pruning and lottery tickets (Frankle & Carbin 2019).

Only the dense weight matrices are pruned (every 2-D parameter named ``weight``: the MLP of
an SGAP model, GCN/SAGE layers); biases, PReLU slopes and norms stay dense. The threshold is
global over layers (UGS's choice), so layers with small weights lose more.

* ``"magnitude"`` -- train dense, zero the smallest-magnitude ``sparsity`` of the weights,
  fine-tune the survivors (pruned entries stay zero).
* ``"lottery"`` -- train dense, take the same mask, **rewind** the survivors to their
  initial values :math:`\theta_0` and retrain (one shot; ``rounds > 1`` is iterative, pruning
  :math:`1-(1-s)^{1/R}` of the remaining weights per round).

Joint edge and weight masks (UGS) are in :mod:`sgl.tasks.ugs`.

Example:
    >>> import sgl
    >>> from sgl.models import SGC, SGCConfig
    >>> from sgl.tasks import TrainConfig
    >>> g = sgl.datasets.load("karate")
    >>> out = prune_model(lambda: SGC(g.num_features, 2), g, 0.5, TrainConfig(epochs=10, progress=False))
    >>> round(out["weight_sparsity"], 2)
    0.5
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch
from torch import nn

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError
from sgl.tasks.config import TrainConfig
from sgl.tasks.node_classification import Trainer

__all__ = ["check_sparsity", "prunable_weights", "magnitude_masks", "apply_weight_masks", "weight_sparsity",
           "prune_model", "PRUNE_METHODS"]

PRUNE_METHODS = ("magnitude", "lottery")


def check_sparsity(value: Any, name: str = "sparsity") -> float:
    """A pruned fraction in ``[0, 1)`` (1 would remove every weight or edge)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise ConfigError(f"{name} must be a fraction in [0, 1) (0.5 prunes half), got {value!r}")
    return float(value)


def prunable_weights(model: nn.Module) -> Dict[str, torch.Tensor]:
    """``name -> parameter`` of the dense weight matrices of ``model``."""
    out = {name: p for name, p in model.named_parameters() if name.rsplit(".", 1)[-1] == "weight" and p.dim() == 2}
    if not out:
        raise ConfigError(f"{type(model).__name__} has no weight matrix to prune")
    return out


def magnitude_masks(scores: Dict[str, torch.Tensor], sparsity: float,
                    current: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
    """Boolean keep-masks dropping the ``sparsity`` fraction of smallest ``|score|`` (global threshold).

    With ``current`` masks the fraction counts over *all* entries and already-pruned ones stay pruned.
    """
    sparsity = check_sparsity(sparsity)
    current = current or {n: torch.ones_like(s, dtype=torch.bool) for n, s in scores.items()}
    flat = torch.cat([torch.where(current[n], s.detach().abs(), torch.full_like(s, -1.0)).flatten()
                      for n, s in scores.items()])
    drop = int(round(sparsity * flat.numel()))
    if drop == 0:
        return {n: m.clone() for n, m in current.items()}
    order = torch.argsort(flat, stable=True)
    keep = torch.ones(flat.numel(), dtype=torch.bool, device=flat.device)
    keep[order[:drop]] = False
    out, start = {}, 0
    for name, s in scores.items():
        out[name] = keep[start:start + s.numel()].view_as(s) & current[name]
        start += s.numel()
    return out


def apply_weight_masks(model: nn.Module, masks: Dict[str, torch.Tensor]) -> List[Any]:
    """Zero the masked weights now and before every forward pass; returns the hook handles."""
    modules = dict(model.named_modules())
    handles = []
    for name, mask in masks.items():
        owner, _, attr = name.rpartition(".")
        module = modules[owner]

        def hook(mod: nn.Module, inputs: Any, attr: str = attr, mask: torch.Tensor = mask) -> None:
            with torch.no_grad():
                weight = getattr(mod, attr)
                weight.mul_(mask.to(weight.device, weight.dtype))

        hook(module, None)
        handles.append(module.register_forward_pre_hook(hook))
    return handles


def weight_sparsity(model: nn.Module) -> float:
    """Fraction of exact zeros among the prunable weights."""
    weights = prunable_weights(model)
    zeros = sum(int((w == 0).sum()) for w in weights.values())
    return zeros / max(1, sum(w.numel() for w in weights.values()))


class _Continue(nn.Module):
    """Delegates to a model but hides ``reset_parameters``, so the trainer fine-tunes instead of re-initialising."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model
        self.full_batch = model.full_batch
        self.num_classes = getattr(model, "num_classes", None)

    def precompute(self, graph: Any, x: Any = None, **options: Any) -> Any:
        return self.inner.precompute(graph, x, **options)

    def forward(self, batch: Any) -> torch.Tensor:
        return self.inner(batch)

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return self.inner.postprocess(graph, logits)


def prune_model(factory: Callable[[], nn.Module], graph: Any, sparsity: float, config: TrainConfig,
                method: str = "magnitude", seed: int = 0, rounds: int = 1, features: Any = None) -> Dict[str, Any]:
    """Dense training, then ``method`` pruning to ``sparsity``; returns dense and pruned metrics and the masks."""
    sparsity = check_sparsity(sparsity)
    check_choice(method, "pruning method", PRUNE_METHODS)
    rounds = check_int(rounds, "rounds", minimum=1)
    trainer = Trainer(config)
    model = factory()
    features = model.precompute(graph) if features is None else features
    dense = trainer.fit(model, features, graph, seed=seed)
    masks = None
    per_round = 1 - (1 - sparsity) ** (1 / rounds)
    result: Dict[str, Any] = {"dense_test_acc": dense["test_acc"], "dense_val_acc": dense["val_acc"]}
    for r in range(rounds):
        target = 1 - (1 - per_round) ** (r + 1)
        masks = magnitude_masks(prunable_weights(model), target, masks)
        if method == "lottery":  # rewind: fit() re-draws theta_0 from the same seed, the hooks mask it
            model = factory()
            handles = apply_weight_masks(model, {n: m for n, m in masks.items()})
            out = trainer.fit(model, features, graph, seed=seed)
        else:
            handles = apply_weight_masks(model, masks)
            out = trainer.fit(_Continue(model), features, graph, seed=seed)
        if r < rounds - 1:
            for handle in handles:
                handle.remove()
    result.update({"test_acc": out["test_acc"], "val_acc": out["val_acc"], "weight_sparsity": weight_sparsity(model),
                   "masks": masks, "model": model})
    return result
