"""The Student Parallelism run: teacher vs boosted students on SST-2, at batch 1 and under a burst.

Trains a ``teacher_layers``-deep BERT teacher on SST-2 train (first ``train_sentences``),
distils ``num_students`` students of ``student_layers`` each, then reports dev accuracy of the
teacher and of the first ``k`` students, the median latency of one request alone (batch 1) for
the teacher and the stacked students, and a replay of bursty arrivals (dev sentences) served
by the teacher, by all students, and by the students with adaptive pruning. Latencies are
wall-clock on this machine: a calibration of the method, not a GPU figure.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch

from sgl._checks import check_int
from sgl.systems.serving.students.encoders import (accuracy, batched_logits, bert_config, encode_sentences,
                                                   train_classifier)
from sgl.systems.serving.students.ensemble import StudentEnsemble, distil_students
from sgl.systems.serving.students.load import AdaptivePruning, bursty_arrivals, replay

__all__ = ["StudentsConfig", "run_students"]


@dataclass
class StudentsConfig:
    root: Union[str, Path]
    num_students: int = 4
    teacher_layers: int = 6
    student_layers: int = 1
    hidden: int = 128
    heads: int = 4
    vocab_size: int = 4096
    max_len: int = 64
    train_sentences: Optional[int] = 20000
    teacher_steps: int = 400
    student_steps: int = 300
    batch_size: int = 32
    lr: float = 1e-3
    requests: int = 400
    max_batch: int = 32
    prune_step: int = 16
    seed: int = 0
    cache_dir: Optional[Union[str, Path]] = None

    def __post_init__(self) -> None:
        for name in ("num_students", "teacher_layers", "student_layers", "hidden", "heads", "teacher_steps",
                     "student_steps", "requests", "max_batch", "prune_step"):
            check_int(getattr(self, name), name, minimum=1)


def _latency_ms(fn, ids, mask, n: int = 60) -> float:
    times = []
    with torch.no_grad():
        for i in range(n):
            w = int(mask[i].sum())
            x, m = ids[i:i + 1, :w], mask[i:i + 1, :w]
            start = time.perf_counter()
            fn(x, m)
            times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times[5:])


def run_students(cfg: StudentsConfig) -> Dict[str, Any]:
    """Accuracy, batch-1 latency and burst replay of teacher vs students (see the module docstring)."""
    from sgl.systems.text import load_sst2, train_tokenizer

    train_s, train_y = load_sst2(cfg.root, "train")
    if cfg.train_sentences is not None:
        train_s, train_y = train_s[: cfg.train_sentences], train_y[: cfg.train_sentences]
    dev_s, dev_y = load_sst2(cfg.root, "dev")
    tok = train_tokenizer(train_s, vocab_size=cfg.vocab_size, cache_dir=cfg.cache_dir)
    ids, mask = encode_sentences(tok, train_s, cfg.max_len)
    dids, dmask = encode_sentences(tok, dev_s, cfg.max_len)
    tcfg = bert_config(tok.get_vocab_size(), cfg.teacher_layers, cfg.hidden, cfg.heads, cfg.max_len)
    scfg = bert_config(tok.get_vocab_size(), cfg.student_layers, cfg.hidden, cfg.heads, cfg.max_len)
    t0 = time.perf_counter()
    teacher = train_classifier(tcfg, ids, mask, train_y, steps=cfg.teacher_steps, batch_size=cfg.batch_size,
                               lr=cfg.lr, seed=cfg.seed)
    students = distil_students(teacher, scfg, ids, mask, train_y, num_students=cfg.num_students,
                               steps=cfg.student_steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed)
    train_s_elapsed = time.perf_counter() - t0
    wide = StudentEnsemble(students)
    teach = lambda i, m: teacher(input_ids=i, attention_mask=m).logits  # noqa: E731
    acc_teacher = accuracy(batched_logits(teach, dids, dmask), dev_y)
    acc_k = {k: accuracy(batched_logits(lambda i, m: wide(i, m, active=k), dids, dmask), dev_y)
             for k in range(1, cfg.num_students + 1)}
    lat_teacher = _latency_ms(teach, dids, dmask)
    lat_students = _latency_ms(lambda i, m: wide(i, m), dids, dmask)
    # a burst: requests replay dev sentences in order, arrivals from a two-state MMPP
    n = min(cfg.requests, len(dev_y))
    arrivals = bursty_arrivals(n, calm_rate=20.0, burst_rate=2000.0, mean_calm=0.5, mean_burst=0.1, seed=cfg.seed)

    def serve_with(fn):
        def serve(rows, active):
            m = dmask[rows]
            w = int(m.sum(1).max())
            with torch.no_grad():
                return fn(dids[rows, :w], m[:, :w], active).argmax(-1).cpu().numpy()
        return serve

    runs = {"teacher": replay(serve_with(lambda i, m, a: teach(i, m)), arrivals, max_batch=cfg.max_batch),
            "students": replay(serve_with(lambda i, m, a: wide(i, m, active=a)), arrivals, max_batch=cfg.max_batch,
                               num_students=cfg.num_students),
            "students+pruning": replay(serve_with(lambda i, m, a: wide(i, m, active=a)), arrivals,
                                       max_batch=cfg.max_batch,
                                       pruning=AdaptivePruning(cfg.num_students, cfg.prune_step))}
    labels = np.asarray(dev_y)[:n]
    burst = {name: {"mean_ms": r["mean_ms"], "p99_ms": r["p99_ms"], "throughput": r["throughput"],
                    "accuracy": float((r["predictions"] == labels).mean()),
                    "mean_active": float(np.mean(r["active"]))} for name, r in runs.items()}
    return {"teacher_accuracy": acc_teacher, "students_accuracy": acc_k, "latency_ms_batch1":
            {"teacher": lat_teacher, "students": lat_students}, "burst": burst, "train_seconds": train_s_elapsed,
            "config": {"teacher_layers": cfg.teacher_layers, "student_layers": cfg.student_layers,
                       "num_students": cfg.num_students, "hidden": cfg.hidden, "requests": n}}
