r"""Distillation of any zoo teacher into a graph-free MLP student (GLNN, Zhang et al. ICLR 2022).

Per seed: train the teacher (its own preset and training defaults, or the config of its run
record), take its logits for every node the student may see, and train the student on

.. math::
    \mathcal L = \lambda\, \mathrm{CE}(y_{\text{train}}, s) + (1-\lambda)\, T^2\,
    \mathrm{KL}\big(\mathrm{softmax}(t/T)\,\|\,\mathrm{softmax}(s/T)\big)

(hard labels on the training nodes, soft labels on all observed nodes; GLNN's default is
:math:`\lambda = 0`, :math:`T = 1`). The epoch is chosen on validation accuracy.

With ``inductive > 0`` that fraction of the test nodes is hidden (GLNN's ``test_ind``):
teacher and student train on the graph without them; afterwards the student classifies them
from their features alone, while the teacher must propagate over the whole graph first.
Both per-node inference latencies are measured and reported, as is accuracy on those nodes.

Example:
    >>> import sgl
    >>> from sgl.tasks import RunConfig, run
    >>> record = run(RunConfig.from_dict({"model": "mlp", "dataset": "karate", "seeds": 1,
    ...                                   "train": {"epochs": 5}, "distill": {"teacher": "sgc"}}), progress=False)
    >>> sorted(k for k in record["runs"][0] if k.startswith("teacher_"))[:2]
    ['teacher_latency_us_per_node', 'teacher_test_acc']
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError
from sgl.models.features import NodeFeatures, to_device
from sgl.tasks.config import TrainConfig
from sgl.tasks.distill_config import DistillConfig, check_distill_run  # noqa: F401 -- re-exported
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.node_classification import Trainer, _split_index
from sgl.tasks.stats import peak_rss_mb, seed_everything, summarize

__all__ = ["DistillConfig", "check_distill_run", "distillation_loss", "fit_student", "inductive_split",
           "run_distillation", "per_node_latency"]


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """:math:`T^2\\,\\mathrm{KL}(\\mathrm{softmax}(t/T) \\| \\mathrm{softmax}(s/T))`, mean over rows (0 when equal)."""
    log_s = F.log_softmax(student / temperature, dim=1)
    log_t = F.log_softmax(teacher / temperature, dim=1)
    return F.kl_div(log_s, log_t, reduction="batchmean", log_target=True) * temperature ** 2


# ---------------------------------------------------------------------------- teacher
def teacher_run_config(distill: DistillConfig, student: Any) -> Any:
    """The teacher's :class:`~sgl.tasks.RunConfig`: its run record's, or a zoo model's on the student's dataset."""
    from sgl.tasks.run_config import RunConfig

    source = distill.teacher
    if os.path.isfile(source):
        try:
            with open(source, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--distill-from {source!r} is not a readable run record (JSON from sgl train --out): "
                              f"{exc}") from None
        if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
            raise ConfigError(f"--distill-from {source!r} has no 'config' entry; pass a record written by "
                              f"`sgl train --out` or a model name")
        config = RunConfig.from_dict({**record["config"], "seeds": list(student.seeds)})
        if str(config.dataset).lower() != str(student.dataset).lower() or config.dataset_options != \
                student.dataset_options:
            raise ConfigError(f"the teacher in {source!r} was trained on dataset {config.dataset!r} "
                              f"{config.dataset_options or ''}, the student trains on {student.dataset!r} "
                              f"{student.dataset_options or ''}; distil from a teacher of the same dataset")
    else:
        if source.lower() in ("mlp",):
            raise ConfigError("--distill-from mlp: the teacher must be a graph model (gamlp, sgc, gcn, sage ...)")
        config = RunConfig.from_dict({"model": source, "dataset": student.dataset, "root": student.root,
                                      "dataset_options": student.dataset_options, "seeds": list(student.seeds),
                                      "train": {"device": student.train.device}})
    if config.task != "node" or config.sampler is not None or config.structure is not None or \
            config.self_supervised or getattr(config, "distill", None) is not None:
        raise ConfigError(f"the teacher must be a full-graph node classifier of the zoo; {source!r} is not")
    return config


def _train_teacher(config: Any, graph: Any, seed: int, progress: bool) -> Any:
    from sgl.models import build_model, model_config

    cfg = model_config(config.model, **config.model_config)
    factory = lambda: build_model(config.model, graph.num_features, graph.num_classes, cfg)  # noqa: E731
    trainer = Trainer(dataclasses.replace(config.train, progress=progress))
    teacher = factory()
    features = teacher.precompute(graph)
    if config.rlu is not None:
        from sgl.tasks.rlu import train_rlu

        result = train_rlu(lambda: teacher, graph, trainer.config, config.rlu, seed=seed, features=features)
    else:
        result = trainer.fit(teacher, features, graph, seed=seed)
    device = get_device(trainer.config.device)
    logits = trainer.predict_all(teacher, features, graph, device)
    return teacher, logits, result


# ---------------------------------------------------------------------------- student
def fit_student(student: torch.nn.Module, features: Any, graph: Any, soft_logits: torch.Tensor,
                config: TrainConfig, hard_weight: float = 0.0, temperature: float = 1.0, seed: int = 0,
                soft_nodes: Optional[torch.Tensor] = None) -> Dict[str, Any]:
    """Train ``student`` on hard labels (training nodes) and ``soft_logits`` (``soft_nodes``, default all).

    ``features`` are the student's inputs (``student.precompute(graph)``); returns the
    train/val/test metrics at the best validation epoch, like :meth:`Trainer.fit`.
    """
    if soft_logits.shape != (graph.num_nodes, student.num_classes):
        raise FeatureError(f"teacher logits have shape {tuple(soft_logits.shape)}; expected "
                           f"[{graph.num_nodes}, {student.num_classes}]")
    features = features if isinstance(features, NodeFeatures) else NodeFeatures(features)
    seed_everything(seed)
    student.reset_parameters()
    device = get_device(config.device)
    student.to(device)
    y = graph.y
    train, val, test = (_split_index(graph, s) for s in ("train", "val", "test"))
    soft = torch.arange(graph.num_nodes) if soft_nodes is None else soft_nodes.cpu()
    optimizer = torch.optim.Adam(student.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    batch = config.batch_size or soft.numel()
    steps = -(-soft.numel() // batch)
    trainer = Trainer(config)
    best, best_state, stale, start = (-1.0, -1), None, 0, time.perf_counter()
    for epoch in range(config.epochs):
        student.train()
        order = soft[torch.randperm(soft.numel(), generator=generator)]
        hard = train[torch.randperm(train.numel(), generator=generator)]
        per_hard = -(-hard.numel() // steps)
        for step in range(steps):
            rows = order[step * batch:(step + 1) * batch]
            labelled = hard[step * per_hard:(step + 1) * per_hard]
            optimizer.zero_grad()
            out = student(to_device(features[torch.cat([rows, labelled])], device))
            loss = (1.0 - hard_weight) * distillation_loss(out[:rows.numel()], soft_logits[rows].to(device),
                                                          temperature)
            if hard_weight > 0 and labelled.numel():
                loss = loss + hard_weight * F.cross_entropy(out[rows.numel():], y[labelled].to(device))
            loss.backward()
            optimizer.step()
        val_acc = accuracy(trainer._predict(student, features, val, device), y[val])
        if val_acc > best[0]:
            best, best_state, stale = (val_acc, epoch), copy.deepcopy(student.state_dict()), 0
        else:
            stale += 1
        if config.patience is not None and stale >= config.patience:
            break
    student.load_state_dict(best_state)
    result: Dict[str, Any] = {"seed": seed, "best_epoch": best[1], "epochs_run": epoch + 1,
                              "train_time_s": time.perf_counter() - start}
    for name, index in (("train", train), ("val", val), ("test", test)):
        logits = trainer._predict(student, features, index, device)
        result[f"{name}_acc"] = accuracy(logits, y[index])
        result[f"{name}_macro_f1"] = macro_f1(logits, y[index], graph.num_classes)
    return result


# ---------------------------------------------------------------------------- inductive split and latency
def inductive_split(graph: Any, ratio: float, seed: int = 0) -> Any:
    """``(observed_graph, observed_ids, hidden_ids)``: ``ratio`` of the test nodes hidden (GLNN's test_ind).

    The observed graph is induced on the other nodes, so it shares no node or edge with the hidden ones.
    """
    test = _split_index(graph, "test")
    generator = torch.Generator().manual_seed(seed)
    count = int(round(ratio * test.numel()))
    if count < 1 or count >= test.numel():
        raise ConfigError(f"--distill-inductive {ratio} hides {count} of {test.numel()} test nodes; pick a fraction "
                          f"that hides at least one and leaves at least one")
    hidden = test[torch.randperm(test.numel(), generator=generator)[:count]].sort().values
    keep = torch.ones(graph.num_nodes, dtype=torch.bool)
    keep[hidden] = False
    observed = keep.nonzero().flatten()
    return graph.subgraph(observed), observed, hidden


def per_node_latency(predict: Callable[[], Any], num_nodes: int, repeats: int = 3) -> float:
    """Microseconds per node of ``predict()`` (best of ``repeats`` after one warm-up call)."""
    predict()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        predict()
        best = min(best, time.perf_counter() - start)
    return best / max(1, num_nodes) * 1e6


def _teacher_predict(teacher: Any, graph: Any, nodes: torch.Tensor, trainer: Trainer, device: Any) -> torch.Tensor:
    """What serving new nodes costs the teacher: propagate over the whole graph, then predict."""
    features = teacher.precompute(graph)
    if teacher.full_batch:
        return trainer._predict(teacher, features.to(device), nodes, device)
    if getattr(getattr(teacher, "config", None), "post_steps", 0):
        return trainer.predict_all(teacher, features, graph, device)[nodes]
    return trainer._predict(teacher, features, nodes, device)


def run_distillation(config: Any, graph: Any, student_factory: Callable[[], Any], log: Callable[[str], None],
                     progress: bool = False) -> Dict[str, Any]:
    """Teacher then student, per seed of ``config`` (a RunConfig with ``distill``); the results of a run record."""
    from sgl.models.accel.positional import inductive_positions

    distill = config.distill
    teacher_config = teacher_run_config(distill, config)
    log(f"teacher: {teacher_config.model} {teacher_config.model_config} (train {teacher_config.train.to_dict()})")
    full = graph
    hidden = None
    if distill.inductive > 0:
        graph, observed, hidden = inductive_split(full, distill.inductive, seed=0)
        log(f"inductive: {hidden.numel()} test nodes hidden from training; {graph.num_nodes} observed")
    runs: List[Dict[str, Any]] = []
    student_trainer = Trainer(config.train)
    device = get_device(config.train.device)
    precompute_start = time.perf_counter()
    student = student_factory()
    features = student.precompute(graph)
    precompute_time = time.perf_counter() - precompute_start
    for seed in config.seeds:
        teacher, logits, teacher_result = _train_teacher(teacher_config, graph, seed, progress)
        student = student_factory()
        result = fit_student(student, features, graph, logits, config.train, distill.hard_weight,
                             distill.temperature, seed)
        result["teacher_test_acc"] = teacher_result["test_acc"]
        result["teacher_val_acc"] = teacher_result["val_acc"]
        nodes = hidden if hidden is not None else _split_index(full, "test")
        positions = None
        if student.config.positional_dim:
            known = features.data[:, student.in_features:]
            positions = inductive_positions(full, known, observed, hidden) if hidden is not None \
                else known[nodes]
        student.eval()
        serve = lambda: student(student.inputs(full.x[nodes].to(device), positions))  # noqa: E731
        with torch.no_grad():
            result["student_latency_us_per_node"] = per_node_latency(serve, nodes.numel())
            teacher_serve = lambda: _teacher_predict(teacher, full, nodes, student_trainer, device)  # noqa: E731
            result["teacher_latency_us_per_node"] = per_node_latency(teacher_serve, nodes.numel(), repeats=1)
            if hidden is not None:
                result["ind_test_acc"] = accuracy(serve().cpu(), full.y[hidden])
                result["teacher_ind_test_acc"] = accuracy(teacher_serve().cpu(), full.y[hidden])
        result["latency_speedup"] = result["teacher_latency_us_per_node"] / result["student_latency_us_per_node"]
        runs.append(result)
    record: Dict[str, Any] = {"seeds": list(config.seeds), "runs": runs, "precompute_time_s": precompute_time,
                              "train_time_s": sum(r["train_time_s"] for r in runs), "peak_rss_mb": peak_rss_mb(),
                              "teacher": teacher_config.to_dict()}
    keys = ["train_acc", "val_acc", "test_acc", "test_macro_f1", "teacher_test_acc", "student_latency_us_per_node",
            "teacher_latency_us_per_node", "latency_speedup"]
    keys += ["ind_test_acc", "teacher_ind_test_acc"] if hidden is not None else []
    for key in keys:
        record[key] = summarize([r[key] for r in runs])
    return record
