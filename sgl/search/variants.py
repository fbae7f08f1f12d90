"""Deployment variants of a trained design: what PaSca's search can pick beside the architecture.

A design's ``variant`` knob (``DesignSpace(variants=...)``) says how the trained SGAP model is
deployed, and the trial's accuracy, latency and ``model_bytes`` are measured on that deployment:

===========  ====================================================================================
plain        the trained model as it is
int8         its linear layers quantised to int8 (:func:`sgl.models.accel.quantize_int8`)
pruned       50 % of its weights dropped by global magnitude, no retraining (one shot); bytes in
             the smallest of dense, CSR and a bitmap of the kept entries (:func:`sparse_bytes`)
distilled    a graph-free MLP student (:class:`~sgl.models.accel.GraphFreeMLP`) trained on the model's
             soft labels: inference reads raw features only, no propagated hops
===========  ====================================================================================

Accuracy is the validation accuracy of the deployed variant (the test split is never looked at).

>>> VARIANTS
('plain', 'int8', 'pruned', 'distilled')
"""
from __future__ import annotations

import copy
import statistics
import time
from dataclasses import replace
from typing import Any, Dict

import torch

from sgl.errors import ConfigError

__all__ = ["VARIANTS", "PRUNE_SPARSITY", "deploy_variant", "sparse_bytes"]

VARIANTS = ("plain", "int8", "pruned", "distilled")
#: the fraction of weights the ``pruned`` variant drops
PRUNE_SPARSITY = 0.5


def sparse_bytes(model: torch.nn.Module) -> int:
    """Bytes of ``model`` with every 2-D weight in its smallest storage: dense, CSR (values, int32
    column indices, row pointers) or a bitmap (the non-zero values plus one bit per entry)."""
    from sgl.models.accel.quant import model_bytes

    total = model_bytes(model)
    for p in model.parameters():
        if p.dim() == 2:
            dense = p.numel() * p.element_size()
            nnz = int((p != 0).sum())
            csr = nnz * (p.element_size() + 4) + (p.shape[0] + 1) * 4
            bitmap = nnz * p.element_size() + -(-p.numel() // 8)
            total -= dense - min(dense, csr, bitmap)
    return total


def _timed(fn, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _val_accuracy(logits: torch.Tensor, graph: Any) -> float:
    index = graph.val_mask.nonzero().flatten().cpu()
    return float((logits[index].argmax(-1).cpu() == graph.y[index].cpu()).float().mean())


def deploy_variant(variant: str, model: torch.nn.Module, trainer: Any, features: Any, graph: Any,
                   device: torch.device, repeats: int = 3, seed: int = 0) -> Dict[str, float]:
    """``{"accuracy", "latency", "model_bytes"}`` of ``variant`` of the trained ``model``."""
    from sgl.models.accel.quant import model_bytes

    if variant not in VARIANTS:
        raise ConfigError(f"unknown deployment variant {variant!r}; choose from {list(VARIANTS)}")
    if variant == "distilled":
        return _distilled(model, trainer, features, graph, device, repeats, seed)
    if variant == "int8":
        from sgl.models.accel.quant import quantize_int8

        deployed = quantize_int8(model)
        size = model_bytes(deployed)
    elif variant == "pruned":
        from sgl.tasks.prune import apply_weight_masks, magnitude_masks, prunable_weights

        deployed = copy.deepcopy(model)
        for handle in apply_weight_masks(deployed, magnitude_masks(prunable_weights(deployed), PRUNE_SPARSITY)):
            handle.remove()        # the zeros stay; no forward hook is needed at inference
        size = sparse_bytes(deployed)
    else:
        deployed, size = model, model_bytes(model)
    logits = trainer.predict_all(deployed, features, graph, device)
    latency = _timed(lambda: trainer.predict_all(deployed, features, graph, device), repeats)
    return {"accuracy": _val_accuracy(logits, graph), "latency": latency, "model_bytes": float(size)}


def _distilled(model: torch.nn.Module, trainer: Any, features: Any, graph: Any, device: torch.device,
               repeats: int, seed: int) -> Dict[str, float]:
    from sgl.models.accel import GraphFreeMLP
    from sgl.models.accel.quant import model_bytes
    from sgl.tasks.distill import fit_student

    soft = trainer.predict_all(model, features, graph, device)
    student = GraphFreeMLP(graph.num_features, graph.num_classes)
    inputs = student.precompute(graph)
    config = replace(trainer.config, **{k: v for k, v in GraphFreeMLP.default_train_config.items()
                                        if k in ("lr", "weight_decay")}, progress=False)
    fit_student(student, inputs, graph, soft, config, seed=seed)
    student.eval()
    x = inputs[torch.arange(graph.num_nodes)].to(device)

    @torch.no_grad()
    def predict() -> torch.Tensor:
        return student(x)

    logits = predict().cpu()
    return {"accuracy": _val_accuracy(logits, graph), "latency": _timed(predict, repeats),
            "model_bytes": float(model_bytes(student))}
