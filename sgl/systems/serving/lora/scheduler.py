"""LoRA-Inlaid's request scheduling on one base: output-length prediction, task grouping, bounded switching.

A simulated continuous-batching server runs one adapter at a time (a batch holds requests of
one task); a decode iteration of a batch of ``b`` costs ``a + c b`` seconds, admitting a
request costs ``p · input_len`` (prefill), switching the adapter costs ``switch_s``. Policies:

* ``fcfs``   requests are admitted strictly in arrival order; a request of another task at the
  head of the queue waits until the batch drains, then the server switches to its task;
* ``inlaid`` waiting requests are grouped by task; the server keeps its adapter while its group
  has work (filling the batch shortest-*predicted*-output first) and switches only when the
  group is empty or the oldest waiting request of another task has waited ``max_wait_s``
  (bounded starvation); it switches to the group with the most predicted work;
* ``mixed``  a batch holds requests of any task (gathered per-row LoRA,
  :class:`~sgl.systems.serving.lora.batched.MixedLoRABatch`): arrival order, never a switch;
  pass the step costs measured for a mixed batch (unmerged LoRA costs more per step).

Output lengths are predicted per task by least squares on ``(input_len, output_len)`` history
(:class:`OutputLengthPredictor`). A request meets its SLO when its latency is at most
``slo_scale`` times its latency alone on the server.

>>> reqs = [Request(i, "ab"[i % 2], 0.01 * i, 20, 10 + i % 3) for i in range(40)]
>>> fcfs = simulate(reqs, "fcfs", switch_s=0.05)
>>> inlaid = simulate(reqs, "inlaid", switch_s=0.05)
>>> inlaid["switches"] < fcfs["switches"], inlaid["makespan_s"] < fcfs["makespan_s"]
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_choice, check_int, check_real
from sgl.errors import ConfigError

__all__ = ["Request", "OutputLengthPredictor", "simulate", "POLICIES"]

POLICIES = ("fcfs", "inlaid", "mixed")


@dataclass(frozen=True)
class Request:
    id: int
    task: str
    arrival: float
    input_len: int
    output_len: int


class OutputLengthPredictor:
    """Per-task least-squares ``output ≈ u + v · input`` (the task mean when inputs do not vary)."""

    def __init__(self) -> None:
        self.coef: Dict[str, Tuple[float, float]] = {}

    def fit(self, history: Sequence[Request]) -> "OutputLengthPredictor":
        by: Dict[str, List[Request]] = {}
        for r in history:
            by.setdefault(r.task, []).append(r)
        for task, rs in by.items():
            x = np.array([r.input_len for r in rs], dtype=float)
            y = np.array([r.output_len for r in rs], dtype=float)
            if len(rs) >= 2 and x.std() > 0:
                v, u = np.polyfit(x, y, 1)
                self.coef[task] = (float(u), float(v))
            else:
                self.coef[task] = (float(y.mean()), 0.0)
        return self

    def predict(self, task: str, input_len: int) -> float:
        if task not in self.coef:
            return float(np.mean([u for u, _ in self.coef.values()])) if self.coef else 1.0
        u, v = self.coef[task]
        return max(1.0, u + v * input_len)


def simulate(requests: Sequence[Request], policy: str = "inlaid", *, max_batch: int = 8, step_s: float = 0.02,
             per_request_s: float = 0.002, prefill_s_per_token: float = 1e-4, switch_s: float = 0.1,
             max_wait_s: float = 2.0, slo_scale: float = 5.0,
             predictor: Optional[OutputLengthPredictor] = None) -> Dict[str, float]:
    """Serve ``requests`` under ``policy``; returns throughput, SLO attainment, latency, switches."""
    policy = check_choice(policy, "policy", POLICIES)
    max_batch = check_int(max_batch, "max_batch", minimum=1)
    for v, n in ((step_s, "step_s"), (per_request_s, "per_request_s"), (prefill_s_per_token, "prefill_s_per_token"),
                 (switch_s, "switch_s"), (max_wait_s, "max_wait_s")):
        check_real(v, n, 0.0)
    slo_scale = check_real(slo_scale, "slo_scale", 1.0)
    if not requests:
        raise ConfigError("simulate: no requests given")
    reqs = sorted(requests, key=lambda r: (r.arrival, r.id))
    predictor = predictor or OutputLengthPredictor().fit(reqs)
    n = len(reqs)
    clock, nxt, adapter, switches = 0.0, 0, None, 0
    waiting: List[Request] = []
    batch: Dict[int, int] = {}                      # request index -> tokens still to generate
    done = np.zeros(n)
    index = {r.id: i for i, r in enumerate(reqs)}

    def arrive():
        nonlocal nxt
        while nxt < n and reqs[nxt].arrival <= clock + 1e-12:
            waiting.append(reqs[nxt])
            nxt += 1

    while nxt < n or waiting or batch:
        arrive()
        if not batch and not waiting:
            clock = reqs[nxt].arrival
            continue
        # choose the adapter (a mixed batch serves every adapter at once)
        if waiting and (not batch) and policy != "mixed":
            if policy == "fcfs":
                want = waiting[0].task
            else:
                mine = [r for r in waiting if r.task == adapter]
                oldest = min(waiting, key=lambda r: r.arrival)
                if mine and not (oldest.task != adapter and clock - oldest.arrival >= max_wait_s):
                    want = adapter
                elif oldest.task != adapter and clock - oldest.arrival >= max_wait_s:
                    want = oldest.task
                else:
                    work: Dict[str, float] = {}
                    for r in waiting:
                        work[r.task] = work.get(r.task, 0.0) + predictor.predict(r.task, r.input_len)
                    want = max(work, key=lambda t: (work[t], -min(x.arrival for x in waiting if x.task == t)))
            if want != adapter:
                clock += switch_s if adapter is not None else 0.0
                switches += adapter is not None
                adapter = want
        # admit
        if policy == "mixed":
            while waiting and len(batch) < max_batch:
                r = waiting.pop(0)
                batch[index[r.id]] = r.output_len
                clock += prefill_s_per_token * r.input_len
        elif policy == "fcfs":
            while waiting and len(batch) < max_batch and waiting[0].task == adapter:
                r = waiting.pop(0)
                batch[index[r.id]] = r.output_len
                clock += prefill_s_per_token * r.input_len
        else:
            mine = sorted((r for r in waiting if r.task == adapter),
                          key=lambda r: (predictor.predict(r.task, r.input_len), r.arrival))
            for r in mine[: max_batch - len(batch)]:
                waiting.remove(r)
                batch[index[r.id]] = r.output_len
                clock += prefill_s_per_token * r.input_len
        if not batch:
            continue
        clock += step_s + per_request_s * len(batch)   # one decode iteration
        for i in list(batch):
            batch[i] -= 1
            if batch[i] == 0:
                done[i] = clock
                del batch[i]
    arrival = np.array([r.arrival for r in reqs])
    alone = np.array([prefill_s_per_token * r.input_len + r.output_len * (step_s + per_request_s) for r in reqs])
    lat = done - arrival
    return {"throughput": n / (done.max() - arrival.min()), "slo_attainment": float((lat <= slo_scale * alone).mean()),
            "mean_latency_s": float(lat.mean()), "p99_latency_s": float(np.percentile(lat, 99)),
            "switches": int(switches), "makespan_s": float(done.max() - arrival.min())}
