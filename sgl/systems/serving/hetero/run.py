"""Execute a heterogeneous serving plan on this machine: one process per replica, real forwards.

:func:`run_serving_plan` starts one :func:`sgl.comm.spawn` process per replica of a
:class:`~sgl.systems.serving.hetero.milp.ServingPlan`. Each serves its share of every workload
type with a tiny Hugging Face ``LlamaForCausalLM`` (batched prefill of the prompts, then greedy
decode steps with the KV cache) and stands in for its GPU type by a known slowdown: after each
real compute step it waits (``wait="busy"``, the default: a busy-wait that holds the core, as
:func:`~sgl.systems.seq.straggler.inject_straggler` does; ``wait="sleep"``: the core is released,
as a replica on its own GPU would leave the other replicas alone, but each step after a sleep
starts cold and runs slower than calibrated, so measured makespans overshoot), so that a
request of type ``w`` on config ``c`` takes

    t_{c,w} = K / θ_{c,w},      K = max_{c', w'} t_{w'} θ_{c',w'}

seconds, where ``θ`` is the problem's throughput table and ``t_w`` the measured real time per
request of type ``w`` on this machine (calibrated in the same run, before the clock starts).
``K`` is the largest, so every slowdown factor ``K / (θ_{c,w} t_w)`` is ``>= 1``, and the
fastest (config, type) pair runs at this machine's real speed. The table's time scale maps to
this machine by ``K``: the plan's modelled makespan here is ``max_c K Σ_w x_{c,w} N_w / θ_{c,w} / n_c``
for the ``N_w`` requests executed; the measured makespan is the wall time from a common barrier
to the last replica's last request.

Request counts are scaled down from the problem's ``R_w`` (``requests`` in total, split in
proportion, largest remainder); a type's requests go to configs by the plan's split ``x_{c,w}``
(largest remainder) and round-robin over a config's replicas. Replicas share this machine's
cores: more replicas than cores measure time-sharing, not the plan, hence ``max_replicas``.

>>> from sgl.systems.serving.hetero.spec import DeployConfig, GPUType, ServingProblem, Workload
>>> prob = ServingProblem([GPUType("big", 3.0, 1), GPUType("small", 1.0, 2)],
...     [DeployConfig("big", {"big": 1}, {"short": 20.0, "long": 10.0}),
...      DeployConfig("small", {"small": 1}, {"short": 10.0, "long": 1.0})],
...     [Workload("short", 60), Workload("long", 20)])
>>> from sgl.systems.serving.hetero.milp import plan_serving
>>> plan = plan_serving(prob, budget=4.0)
>>> plan.replicas, round(plan.makespan_s, 2)
({'big': 1, 'small': 1}, 3.33)
>>> assign_requests(plan, prob, {"short": 9, "long": 3})["small#0"]["short"].tolist()
[4, 5, 6, 7, 8]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from sgl._checks import check_choice, check_int, check_real
from sgl.errors import PlanError
from sgl.systems.serving.hetero.milp import ServingPlan
from sgl.systems.serving.hetero.spec import ServingProblem
from sgl.systems.serving.lm import TinyLlamaSpec

__all__ = ["ReplicaRun", "ServingRun", "run_serving_plan", "assign_requests", "scale_requests"]

#: a small decoder: a run takes seconds on two CPU cores
RUN_SPEC = TinyLlamaSpec(vocab_size=512, hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128,
                         max_positions=1024)


@dataclass
class ReplicaRun:
    """One replica's measured run: its config, the request ids it served per type, its makespan (s),
    the slowdown factor per type and the real (unslowed) compute seconds inside the makespan.

    >>> r = ReplicaRun("small#0", "small", {"short": [4, 5]}, 0.5, {"short": 2.0}, 0.2)
    >>> round(r.makespan_s - r.compute_s, 3)   # standing in for the slower GPU (and overhead)
    0.3
    """

    replica: str
    config: str
    served: Dict[str, List[int]]
    makespan_s: float
    slowdown: Dict[str, float]
    compute_s: float = 0.0


@dataclass
class ServingRun:
    """A plan executed: per-replica runs, measured and modelled makespans on this machine (s).

    ``modelled_s`` is the plan's makespan on this machine (``K ×`` the table's, for the executed
    requests); ``plan_makespan_s`` is the planner's own figure for the full workload;
    ``request_time_s`` the calibrated real seconds per request of each type; ``scale_s`` is ``K``.

    >>> run = ServingRun([ReplicaRun("big#0", "big", {"short": [0, 1]}, 0.4, {"short": 1.0}, 0.4)],
    ...                  0.4, 0.5, 3.3, {"short": 2}, {"short": 0.2}, 4.0)
    >>> run.to_dict()["replicas"][0]["served"], round(run.makespan_s / run.modelled_s, 2)
    ({'short': 2}, 0.8)
    """

    replicas: List[ReplicaRun]
    makespan_s: float
    modelled_s: float
    plan_makespan_s: float
    requests: Dict[str, int]
    request_time_s: Dict[str, float]
    scale_s: float
    extra: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"makespan_s": self.makespan_s, "modelled_s": self.modelled_s,
                "plan_makespan_s": self.plan_makespan_s, "requests": self.requests,
                "request_time_s": self.request_time_s, "scale_s": self.scale_s,
                "replicas": [{"replica": r.replica, "config": r.config, "makespan_s": r.makespan_s,
                              "compute_s": r.compute_s,
                              "served": {w: len(ids) for w, ids in r.served.items()}, "slowdown": r.slowdown}
                             for r in self.replicas]}


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers ``>= 0`` summing to ``total`` in proportion to ``weights`` (Hamilton's method)."""
    share = total * weights / weights.sum()
    out = np.floor(share).astype(int)
    order = np.argsort(-(share - out), kind="stable")
    out[order[: total - int(out.sum())]] += 1
    return out


def scale_requests(problem: ServingProblem, total: int) -> Dict[str, int]:
    """``total`` requests split over the problem's workload types in proportion to ``R_w``
    (every type with requests gets at least one)."""
    total = check_int(total, "requests", minimum=1, error=PlanError)
    names = [w.name for w in problem.workloads if w.requests > 0]
    if total < len(names):
        raise PlanError(f"requests={total} cannot cover {len(names)} workload types; give at least {len(names)}")
    weights = np.array([w.requests for w in problem.workloads if w.requests > 0], dtype=float)
    counts = 1 + _largest_remainder(total - len(names), weights)
    return dict(zip(names, counts.tolist()))


def _check_plan(plan: ServingPlan, problem: ServingProblem, requests: Dict[str, int],
                max_replicas: Optional[int] = None) -> None:
    if not isinstance(plan, ServingPlan):
        raise PlanError(f"plan must be a ServingPlan (from plan_serving / plan_min_cost), got {type(plan).__name__}")
    if not isinstance(problem, ServingProblem):
        raise PlanError(f"problem must be a ServingProblem, got {type(problem).__name__}")
    configs = {c.name: c for c in problem.configs}
    unknown = sorted(set(plan.replicas) - set(configs))
    if unknown:
        raise PlanError(f"the plan's config(s) {unknown} are not in the problem; known: {sorted(configs)}")
    for name, n in plan.replicas.items():
        check_int(n, f"replicas of config {name!r}", minimum=0, error=PlanError)
    total = sum(plan.replicas.values())
    if total < 1:
        raise PlanError("the plan has no replicas; nothing can serve the requests")
    if max_replicas is not None and total > max_replicas:
        raise PlanError(f"the plan has {total} replicas but at most max_replicas={max_replicas} processes run "
                        f"here (each replica is a process on this machine's cores); plan a smaller fleet or "
                        f"raise max_replicas on a machine with more cores")
    for c, shares in plan.split.items():
        if plan.replicas.get(c, 0) < 1:
            raise PlanError(f"the plan's split sends work to config {c!r}, which has no replicas in the plan")
        for w, x in shares.items():
            if w not in requests and not any(wl.name == w for wl in problem.workloads):
                raise PlanError(f"the plan's split names unknown workload {w!r}")
            if x > 0 and w not in configs[c].throughput:
                raise PlanError(f"the plan sends workload {w!r} to config {c!r}, which has no throughput for it")
    for w, n in requests.items():
        if n <= 0:
            continue
        cover = sum(float(s.get(w, 0.0)) for s in plan.split.values())
        if abs(cover - 1.0) > 1e-3:
            raise PlanError(f"the plan's split covers {cover:.3f} of workload {w!r}, not 1: every request must be "
                            f"served once; use a plan from plan_serving/plan_min_cost for this problem")


def assign_requests(plan: ServingPlan, problem: ServingProblem, requests: Mapping[str, int]
                    ) -> Dict[str, Dict[str, np.ndarray]]:
    """Replica name (``config#i``) -> workload type -> request ids (ids run over types in order)."""
    if not isinstance(problem, ServingProblem):
        raise PlanError(f"problem must be a ServingProblem, got {type(problem).__name__}")
    requests = {str(w): check_int(n, f"requests of {w!r}", minimum=0, error=PlanError) for w, n in requests.items()}
    known = {w.name for w in problem.workloads}
    if set(requests) - known:
        raise PlanError(f"requests name unknown workload(s) {sorted(set(requests) - known)}; known: {sorted(known)}")
    _check_plan(plan, problem, requests)
    names = [c for c in plan.replicas if plan.replicas[c] > 0]
    out = {f"{c}#{i}": {w: [] for w in requests} for c in names for i in range(plan.replicas[c])}
    start = 0
    for w, n in requests.items():
        ids = np.arange(start, start + n)
        start += n
        if n == 0:
            continue
        shares = np.array([float(plan.split.get(c, {}).get(w, 0.0)) for c in names])
        counts = _largest_remainder(n, shares)
        offset = 0
        for c, k in zip(names, counts):
            mine = ids[offset: offset + k]
            offset += k
            for i in range(plan.replicas[c]):
                out[f"{c}#{i}"][w] = mine[i:: plan.replicas[c]]
    return {r: {w: np.asarray(v, dtype=np.int64) for w, v in ws.items()} for r, ws in out.items()}


def _prompts(ids: np.ndarray, prompt_len: int, vocab: int, seed: int, device: torch.device) -> torch.Tensor:
    """Deterministic prompts: request ``i``'s tokens come from a generator seeded by ``seed + i``."""
    rows = [torch.randint(3, vocab, (prompt_len,), generator=torch.Generator().manual_seed(seed + int(i)))
            for i in ids]
    return torch.stack(rows).to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class _IdleSlowdown:
    """Like :class:`~sgl.systems.seq.straggler.Straggler`, but the extra ``(factor - 1)×`` is slept.

    A sleep overshoots by tens of microseconds, so the owed time is accumulated and slept once it
    reaches ``min_sleep_s``, and the overshoot is paid back from the next debt.
    """

    factor: float
    min_sleep_s: float = 2e-3
    owed: float = 0.0

    def slow_down(self, rank: int, seconds: float) -> float:
        self.owed += (self.factor - 1.0) * seconds
        if self.owed >= self.min_sleep_s:
            t0 = time.perf_counter()
            time.sleep(self.owed)
            self.owed -= time.perf_counter() - t0
        return seconds * self.factor

    def settle(self) -> None:
        """Sleep what is still owed (at the end of a replica's work)."""
        if self.owed > 0:
            time.sleep(self.owed)
        self.owed = 0.0


def _serve_batch(model: Any, prompts: torch.Tensor, new_tokens: int, straggler: Any, device: torch.device) -> float:
    """Batched prefill + greedy decode, each step slowed by ``straggler``; the real compute seconds."""
    total = 0.0
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model(input_ids=prompts, use_cache=True)
        _sync(device)
        dt = time.perf_counter() - t0
        total += dt
        if straggler is not None:
            straggler.slow_down(0, dt)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(new_tokens - 1):
            t0 = time.perf_counter()
            out = model(input_ids=nxt, cache=out.cache, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            _sync(device)
            dt = time.perf_counter() - t0
            total += dt
            if straggler is not None:
                straggler.slow_down(0, dt)
    return total


def _replica_main(rank: int, world: int, work: List[Tuple[str, str, Dict[str, np.ndarray]]],
                  thr: Dict[str, Dict[str, float]], shapes: Dict[str, Tuple[int, int]], batch: int,
                  calib_batches: int, seed: int, device: Optional[str], threads: int, wait: str,
                  given: Optional[Dict[str, float]]) -> dict:
    from transformers import LlamaForCausalLM

    from sgl import comm
    from sgl.device import get_device
    from sgl.systems.seq.straggler import inject_straggler
    from sgl.systems.serving.lm import tiny_llama_config

    torch.set_num_threads(threads)
    dev = get_device(device)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_llama_config(RUN_SPEC)).to(dev).eval()
    model.set_attn_implementation("eager")
    name, config, mine = work[rank]
    types = sorted(shapes)
    # calibration: real wall seconds per request of each type at full speed (after one warm-up batch),
    # prompt building included, as in the timed run
    per_req = []
    for w in types if given is None else ():
        p_len, new = shapes[w]
        probe = np.arange(batch) + 10 ** 6
        _serve_batch(model, _prompts(probe, p_len, RUN_SPEC.vocab_size, seed, dev), new, None, dev)
        times = []
        for _ in range(calib_batches):
            t0 = time.perf_counter()
            _serve_batch(model, _prompts(probe, p_len, RUN_SPEC.vocab_size, seed, dev), new, None, dev)
            times.append(time.perf_counter() - t0)
        per_req.append(float(np.median(times)) / batch)
    if given is None:
        wire = comm.wire_device()
        gathered = torch.stack(comm.all_gather(torch.tensor([per_req], dtype=torch.float64, device=wire))).cpu()
        t_w = dict(zip(types, gathered.reshape(world, len(types)).mean(0).tolist()))
    else:
        t_w = {w: given[w] for w in types}
    scale = max(t_w[w] * v for c in thr.values() for w, v in c.items() if w in t_w)
    slow = {w: max(1.0, scale / (thr[config][w] * t_w[w])) for w in types if w in thr[config]}
    comm.barrier()
    t0 = time.perf_counter()
    served: Dict[str, List[int]] = {}
    compute = 0.0
    for w in types:
        ids = mine.get(w, np.zeros(0, dtype=np.int64))
        served[w] = ids.tolist()
        if len(ids) == 0:
            continue
        straggler = inject_straggler(0, slow[w]) if wait == "busy" else _IdleSlowdown(slow[w])
        p_len, new = shapes[w]
        for s in range(0, len(ids), batch):
            compute += _serve_batch(model, _prompts(ids[s: s + batch], p_len, RUN_SPEC.vocab_size, seed, dev),
                                    new, straggler, dev)
        if isinstance(straggler, _IdleSlowdown):
            straggler.settle()
    elapsed = time.perf_counter() - t0
    return {"replica": name, "config": config, "served": served, "makespan_s": elapsed, "slowdown": slow,
            "compute_s": compute,
            "request_time_s": t_w, "scale_s": scale}


def run_serving_plan(plan: ServingPlan, problem: ServingProblem, *, requests: Union[int, Mapping[str, int]] = 32,
                     shapes: Optional[Mapping[str, Tuple[int, int]]] = None, batch_size: int = 4,
                     max_replicas: int = 4, calib_batches: int = 5,
                     request_time_s: Optional[Mapping[str, float]] = None, seed: int = 0, device: Optional[str] = None,
                     threads: int = 1, wait: str = "busy", timeout: float = 300.0) -> ServingRun:
    """Execute ``plan`` for ``problem`` on this machine (see the module docstring) and measure it.

    ``requests``: the total to execute (split over types in proportion to ``R_w``) or a count per
    type. ``shapes``: per type ``(prompt tokens, new tokens)`` (default ``(32, 4)``). Each replica
    runs ``threads`` torch threads on ``device`` (default: :func:`sgl.device.get_device`); ``wait``
    (``"sleep"`` or ``"busy"``) is how the emulated slowdown spends its time. ``request_time_s``
    (seconds per request of each type, e.g. another run's ``request_time_s``) skips the
    calibration, so two plans can run on the same emulated machine.
    Raises :class:`~sgl.errors.PlanError` for a plan with more than ``max_replicas`` replicas, a
    split that does not cover a workload type once, or a config/type the problem does not know.
    """
    max_replicas = check_int(max_replicas, "max_replicas", minimum=1, error=PlanError)
    batch_size = check_int(batch_size, "batch_size", minimum=1, error=PlanError)
    calib_batches = check_int(calib_batches, "calib_batches", minimum=1, error=PlanError)
    threads = check_int(threads, "threads", minimum=1, error=PlanError)
    wait = check_choice(wait, "wait", ("sleep", "busy"), error=PlanError)
    timeout = check_real(timeout, "timeout", 0.0, open_low=True, error=PlanError)
    if not isinstance(problem, ServingProblem):
        raise PlanError(f"problem must be a ServingProblem, got {type(problem).__name__}")
    counts = scale_requests(problem, requests) if isinstance(requests, int) else dict(requests)
    _check_plan(plan, problem, counts, max_replicas)
    assigned = assign_requests(plan, problem, counts)
    shapes = dict(shapes or {})
    for w in counts:
        p_len, new = shapes.get(w, (32, 4))
        shapes[w] = (check_int(p_len, f"prompt tokens of {w!r}", minimum=1, error=PlanError),
                     check_int(new, f"new tokens of {w!r}", minimum=1, error=PlanError))
        if p_len + new > RUN_SPEC.max_positions:
            raise PlanError(f"shape of {w!r}: {p_len} + {new} tokens exceed the model's "
                            f"{RUN_SPEC.max_positions} positions")
    shapes = {w: s for w, s in shapes.items() if w in counts}
    given = None
    if request_time_s is not None:
        missing = sorted(set(shapes) - set(request_time_s))
        if missing:
            raise PlanError(f"request_time_s has no calibrated time for workload(s) {missing}")
        given = {w: check_real(request_time_s[w], f"request_time_s of {w!r}", 0.0, open_low=True, error=PlanError)
                 for w in shapes}
    thr = {c.name: dict(c.throughput) for c in problem.configs}
    work = [(r, r.rsplit("#", 1)[0], ids) for r, ids in assigned.items()]
    from sgl import comm

    outs = comm.spawn(_replica_main, len(work), work, thr, shapes, batch_size, calib_batches, seed, device, threads,
                      wait, given, timeout=timeout)
    t_w, scale = outs[0]["request_time_s"], outs[0]["scale_s"]
    runs = [ReplicaRun(o["replica"], o["config"], o["served"], o["makespan_s"], o["slowdown"], o["compute_s"])
            for o in outs]
    modelled = max(scale * sum(float(plan.split.get(c, {}).get(w, 0.0)) * n / thr[c][w]
                               for w, n in counts.items() if float(plan.split.get(c, {}).get(w, 0.0)) > 0)
                   / plan.replicas[c] for c in plan.replicas if plan.replicas[c] > 0)
    return ServingRun(runs, max(r.makespan_s for r in runs), modelled, plan.makespan_s, counts, t_w, scale)
