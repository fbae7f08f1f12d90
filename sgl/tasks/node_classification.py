"""Node classification on precomputed features: mini-batch training with early stopping.

The :class:`Trainer` trains the trainable part of an SGAP model on rows of its
precomputed features, picks the epoch with the best *validation* accuracy (never test),
and reports train/val/test accuracy and macro-F1 at that epoch. ``run_node_classification``
repeats it over seeds and returns a JSON-serialisable record.

Example:
    >>> import sgl
    >>> from sgl.models import SGC
    >>> from sgl.tasks import Trainer, TrainConfig
    >>> graph = sgl.datasets.load("karate")
    >>> model = SGC(graph.num_features, graph.num_classes)
    >>> result = Trainer(TrainConfig(epochs=50, progress=False)).fit(model, model.precompute(graph), graph)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import torch
import torch.nn.functional as F

from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError
from sgl.models.base import ScalableModel
from sgl.models.features import NodeFeatures, to_device
from sgl.tasks.config import TrainConfig
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.stats import peak_rss_mb, seed_everything, summarize  # noqa: F401 -- re-exported

__all__ = ["TrainConfig", "Trainer", "Distillation", "peak_rss_mb", "summarize", "seed_everything"]


@dataclass
class Distillation:
    """RLU's extra training signal: teacher probabilities on confident non-training nodes.

    The loss on a batch is ``gamma * mean_i[max_c P_ic * sum_c P_ic (log P_ic - log_softmax(out)_ic)]``,
    a KL divergence to the teacher weighted by the teacher's confidence (GAMLP eq. 12-15).
    """

    index: torch.Tensor
    probs: torch.Tensor
    gamma: float = 0.1

    def loss(self, logits: torch.Tensor, rows: Any, device: torch.device) -> torch.Tensor:
        teacher = self.probs[rows].to(device)
        log_student = F.log_softmax(logits, dim=1)
        kl = (teacher * (torch.log(teacher.clamp_min(1e-12)) - log_student)).sum(dim=1)
        return self.gamma * (teacher.max(dim=1).values * kl).mean()


def _split_index(graph: Any, name: str) -> torch.Tensor:
    mask = getattr(graph, f"{name}_mask", None)
    if mask is None or not bool(mask.any()):
        raise FeatureError(
            f"the graph has no {name} nodes ({name}_mask missing or empty); node classification needs "
            f"train/val/test masks — set graph.{name}_mask or load a dataset with a split"
        )
    return mask.nonzero().flatten()


class Trainer:
    """Train a model's trainable part on precomputed node features.

    Args:
        config (TrainConfig): optimisation settings.
    """

    def __init__(self, config: Optional[TrainConfig] = None) -> None:
        self.config = config or TrainConfig()

    def _train_epoch(self, model, features, train, y, optimizer, batch, generator, device, full_batch,
                     distillation) -> float:
        """One pass over the training nodes; returns the mean loss."""
        model.train()
        if full_batch:
            optimizer.zero_grad()
            logits = model(features)
            loss = F.cross_entropy(logits[train], y[train].to(device))
            if distillation is not None:
                n1, n2 = train.numel(), distillation.index.numel()
                loss = loss * n1 / (n1 + n2) + distillation.loss(logits[distillation.index.to(device)],
                                                                 slice(None), device) * n2 / (n1 + n2)
            loss.backward()
            optimizer.step()
            return float(loss.detach())
        order = train[torch.randperm(train.numel(), generator=generator)]
        steps = -(-order.numel() // batch)
        extra = None
        if distillation is not None:
            # as in GAMLP's RLU: both node sets are split over the same number of steps, so
            # every step mixes training and confident nodes in proportion to their sizes
            n2 = distillation.index.numel()
            steps = -(-(order.numel() + n2) // batch)
            extra = torch.randperm(n2, generator=generator)
        total = 0.0
        per_step1 = -(-order.numel() // steps)
        # BatchNorm cannot train on a single row: such a trailing batch is skipped
        has_batch_norm = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
        for step in range(steps):
            idx = order[step * per_step1:(step + 1) * per_step1]
            rows = extra[step * (-(-extra.numel() // steps)):(step + 1) * (-(-extra.numel() // steps))] \
                if extra is not None else idx[:0]
            n1, n2 = idx.numel(), rows.numel()
            if n1 == 0 or (has_batch_norm and n1 + n2 < 2):
                continue
            optimizer.zero_grad()
            nodes = idx if n2 == 0 else torch.cat([idx, distillation.index[rows]])
            out = model(to_device(features[nodes], device))  # one forward for both node sets
            loss = F.cross_entropy(out[:n1], y[idx].to(device))
            if n2:
                loss = loss * n1 / (n1 + n2) + distillation.loss(out[n1:], rows, device) * n2 / (n1 + n2)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        return total / max(1, steps)

    @torch.no_grad()
    def _predict(self, model: torch.nn.Module, features: Any, index: torch.Tensor,
                 device: torch.device) -> torch.Tensor:
        model.eval()
        if model.full_batch:
            return model(features).cpu()[index]
        chunks = [model(to_device(features[index[i:i + self.config.eval_batch_size]], device)).cpu()
                  for i in range(0, index.numel(), self.config.eval_batch_size)]
        return torch.cat(chunks)

    @torch.no_grad()
    def predict_all(self, model: torch.nn.Module, features: Any, graph: Any, device: torch.device) -> torch.Tensor:
        """Logits for every node, after the model's post-processing (if any)."""
        logits = self._predict(model, features, torch.arange(graph.num_nodes), device)
        return model.postprocess(graph, logits)

    def fit(self, model: torch.nn.Module, features: Any, graph: Any, seed: int = 0,
            distillation: Optional[Distillation] = None) -> Dict[str, Any]:
        """Train ``model`` on the training nodes; return metrics at the best validation epoch.

        ``distillation`` adds RLU's confidence-weighted KL term on extra nodes
        (see :class:`Distillation`).

        ``features`` is what ``model.precompute(graph)`` returned: a tensor, a
        :class:`~sgl.models.NodeFeatures`, or a :class:`~sgl.models.FullGraphInput` for
        full-batch message-passing models (``model.full_batch = True``).
        """
        if not isinstance(model, ScalableModel):
            raise ConfigError(f"{type(model).__name__} does not implement sgl.models.ScalableModel: the trainer "
                              f"needs precompute(graph), forward(batch), postprocess(graph, logits) and a "
                              f"full_batch attribute")
        full_batch = bool(model.full_batch)
        if isinstance(features, torch.Tensor):
            if features.dim() != 2:
                raise FeatureError(f"precomputed features must be 2-D [num_nodes, d], got {tuple(features.shape)}")
            features = NodeFeatures(features)
        if len(features) != graph.num_nodes:
            raise FeatureError(
                f"precomputed features have {len(features)} rows; expected [{graph.num_nodes}, d] (one per node)"
            )
        if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
            raise FeatureError("node classification needs integer labels graph.y of shape [num_nodes]")
        cfg = self.config
        seed_everything(seed)
        if hasattr(model, "reset_parameters"):  # an nn.Module method, not part of the protocol
            model.reset_parameters()
        device = get_device(cfg.device)
        model.to(device)
        if full_batch:
            features = features.to(device)
        y = graph.y
        train, val, test = (_split_index(graph, s) for s in ("train", "val", "test"))
        if bool((y[train] < 0).any()):
            raise FeatureError("some training nodes have label -1 (unlabeled); fix the train mask")
        out_classes = getattr(model, "num_classes", None)
        top = int(torch.cat([y[train], y[val], y[test]]).max())
        if out_classes is not None and top >= out_classes:
            raise FeatureError(f"labels go up to {top} but the model predicts {out_classes} classes; "
                               f"build it with num_classes={top + 1}")
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        batch = cfg.batch_size or train.numel()
        generator = torch.Generator().manual_seed(seed)

        best = {"val_acc": -1.0, "epoch": -1}
        best_state = None
        stale = 0
        bar = None
        if cfg.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.epochs, desc=f"train seed {seed}", leave=False, disable=None)
        start = time.perf_counter()
        for epoch in range(cfg.epochs):
            model.train()
            total_loss = self._train_epoch(model, features, train, y, optimizer, batch, generator, device,
                                           full_batch, distillation)
            if not math.isfinite(total_loss):
                raise FeatureError(f"training diverged (loss {total_loss}) at epoch {epoch}; lower the learning rate")
            val_acc = accuracy(self._predict(model, features, val, device), y[val])
            if val_acc > best["val_acc"]:
                best = {"val_acc": val_acc, "epoch": epoch}
                best_state = copy.deepcopy(model.state_dict())
                stale = 0
            else:
                stale += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{total_loss:.4f}", val=f"{val_acc:.4f}")
            if cfg.patience is not None and stale >= cfg.patience:
                break
        train_time = time.perf_counter() - start
        if bar is not None:
            bar.close()
        model.load_state_dict(best_state)
        result: Dict[str, Any] = {"seed": seed, "best_epoch": best["epoch"], "epochs_run": epoch + 1,
                                  "train_time_s": train_time}
        if full_batch:
            predict = lambda index: self._predict(model, features, index, device)  # noqa: E731
        else:
            all_logits = self.predict_all(model, features, graph, device)
            predict = lambda index: all_logits[index]  # noqa: E731
        for name, index in (("train", train), ("val", val), ("test", test)):
            logits = predict(index)
            result[f"{name}_acc"] = accuracy(logits, y[index])
            result[f"{name}_macro_f1"] = macro_f1(logits, y[index], graph.num_classes)
        evaluator = _ogb_evaluator(graph)
        if evaluator is not None:
            result["ogb_test_acc"] = evaluator(predict(test).argmax(1), y[test])
        return result


def _ogb_evaluator(graph: Any) -> Optional[Callable[[torch.Tensor, torch.Tensor], float]]:
    """OGB's official ``Evaluator`` for graphs loaded from an OGB dataset (``graph.ogb_name``)."""
    name = getattr(graph, "ogb_name", None)
    if not name:
        return None
    try:
        from ogb.nodeproppred import Evaluator
    except ImportError:
        return None
    evaluator = Evaluator(name=name)

    def evaluate(pred: torch.Tensor, target: torch.Tensor) -> float:
        out = evaluator.eval({"y_true": target.view(-1, 1), "y_pred": pred.view(-1, 1)})
        return float(out["acc"])

    return evaluate
