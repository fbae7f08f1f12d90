"""Steps lost to a failure, measured: periodic async DCP checkpoints, SIGKILL, restart on fewer processes.

:class:`PeriodicCheckpointer` issues :func:`dcp.async_save` of the model and Adam state into
``root/step-<s>`` after every ``every``-th step; training goes on while the shards are written.
DCP's coordinator (rank 0) writes ``.metadata`` only after every rank reported its shards
written, so when rank 0's save future is done the checkpoint is whole; rank 0 then writes the
commit marker ``sgl-complete.json`` (atomic rename), polled at each step boundary.  A checkpoint
without the marker (a save still in flight, or one whose process was killed mid-save) is never
loaded: :func:`latest_checkpoint` takes the highest committed step, and a restart removes the
uncommitted folders above it.

:func:`recovery_worker` is one rank of such a run (under :func:`sgl.comm.spawn`); it logs each
finished step (``log/attempt<a>-rank<r>.txt``, flushed per line, so a SIGKILL keeps it) and its
pid.  :func:`kill_and_resume` runs it on ``world`` processes, SIGKILLs one rank (the lost
device) once the job has finished ``kill_after`` steps, re-plans for ``world_after`` processes
with the plan search (:func:`~sgl.systems.memory.survivors.replan`) and resumes there from the last
committed checkpoint.  Steps lost = last step finished before the kill - the checkpoint's step.

>>> import tempfile
>>> latest_checkpoint(tempfile.mkdtemp()) is None
True
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from sgl import comm
from sgl._checks import check_int
from sgl.errors import CommError, ConfigError
from sgl.fileio import atomic_write
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.config import ExecConfig

__all__ = ["MARKER", "PeriodicCheckpointer", "checkpoint_dir", "committed_steps", "latest_checkpoint",
           "read_log", "recovery_worker", "kill_and_resume"]

MARKER = "sgl-complete.json"


def checkpoint_dir(root: Union[str, Path], step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def _folder_steps(root: Path) -> List[int]:
    out = []
    for d in root.glob("step-*"):
        try:
            out.append(int(d.name[5:]))
        except ValueError:
            continue
    return sorted(out)


def committed_steps(root: Union[str, Path]) -> List[int]:
    """Steps whose checkpoint is whole: commit marker and DCP's ``.metadata`` both present."""
    root = Path(root)
    return [s for s in _folder_steps(root)
            if (checkpoint_dir(root, s) / MARKER).exists() and (checkpoint_dir(root, s) / ".metadata").exists()]


def latest_checkpoint(root: Union[str, Path]) -> Optional[Tuple[int, Path]]:
    """(step, folder) of the highest committed checkpoint under ``root``, or None."""
    steps = committed_steps(root)
    return (steps[-1], checkpoint_dir(root, steps[-1])) if steps else None


class PeriodicCheckpointer:
    """Async DCP checkpoints every ``every`` steps with a commit marker written once the save is whole.

    A save of step ``s`` is issued after step ``s`` with ``s mod every = 0``; the next save waits
    for it (a rank holds at most one in flight).  With ``t_save`` the time a save takes and
    ``t_step`` a step's, a failure after step ``L`` loses ``L - c`` steps, ``c`` the last
    committed step: at most ``every - 1 + min(ceil(t_save / t_step), every)`` (a save slower than
    ``every`` steps makes the next one wait).
    """

    def __init__(self, root: Union[str, Path], every: int, meta: Dict[str, Any]) -> None:
        self.root = Path(root)
        self.every = check_int(every, "every", 1)
        self.meta = meta
        self.group = comm.new_group(list(range(comm.get_world_size())), backend="gloo")
        self.pending: Optional[Tuple[int, Any, float]] = None
        self.issue_s: List[float] = []
        self.save_s: List[float] = []

    def _commit(self) -> None:
        step, future, started = self.pending
        future.result()
        self.save_s.append(time.perf_counter() - started)
        if comm.get_rank() == 0:
            with atomic_write(checkpoint_dir(self.root, step) / MARKER, "w") as fh:
                json.dump({**self.meta, "step": step}, fh)
        self.pending = None

    def poll(self) -> None:
        """Commit the save in flight if it finished (no waiting)."""
        if self.pending is not None and self.pending[1].done():
            self._commit()

    def after_step(self, step: int, module: torch.nn.Module, opt: torch.optim.Optimizer) -> bool:
        """Call after step ``step`` finished; returns whether a save was issued."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        self.poll()
        if step % self.every:
            return False
        if self.pending is not None:
            self._commit()
        msd, osd = get_state_dict(module, opt)
        t0 = time.perf_counter()
        future = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=str(checkpoint_dir(self.root, step)),
                                process_group=self.group)
        self.issue_s.append(time.perf_counter() - t0)
        self.pending = (step, future, t0)
        return True

    def close(self) -> None:
        if self.pending is not None:
            self._commit()


def _log_paths(root: Path, attempt: int, rank: int) -> Tuple[Path, Path]:
    folder = root / "log"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"attempt{attempt}-rank{rank}.txt", folder / f"attempt{attempt}-rank{rank}.pid"


def read_log(root: Union[str, Path], attempt: int) -> Dict[int, float]:
    """{step: loss} of the steps any rank of ``attempt`` logged as finished."""
    out: Dict[int, float] = {}
    for path in sorted((Path(root) / "log").glob(f"attempt{attempt}-rank*.txt")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[int(parts[0])] = float(parts[1])
    return out


def _kill_self_mid_save(folder: Path, rank: int) -> None:
    """SIGKILL this process once its shard file of the save in flight exists (a kill inside a save)."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not list(folder.glob(f"__{rank}_*.distcp")):
        time.sleep(0.002)
    os.kill(os.getpid(), signal.SIGKILL)


def recovery_worker(rank: int, world: int, layout: Union[str, Plan], root: str, cfg_dict: Dict[str, Any],
                    steps: int, every: int, attempt: int = 0, kill_in_save: Optional[Tuple[int, int]] = None
                    ) -> Dict[str, Any]:
    """One rank: resume from the latest committed checkpoint under ``root`` (if any), train to ``steps``.

    ``kill_in_save=(rank, step)``: that rank SIGKILLs itself inside the save of ``step`` (fault injection).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    from sgl.systems.memory.reshard import _setup, _train_step, check_checkpoint, layout_name

    torch.set_num_threads(1)
    cfg = ExecConfig(**cfg_dict)
    base = Path(root)
    log_path, pid_path = _log_paths(base, attempt, rank)
    pid_path.write_text(str(os.getpid()))
    setup, opt, fingerprint = _setup(rank, world, layout, cfg, cfg.seed)
    latest = latest_checkpoint(base)
    start, restore_s = (latest[0] if latest else 0), 0.0
    discarded = [s for s in _folder_steps(base) if s > start]
    comm.barrier()
    if rank == 0:
        for s in discarded:  # uncommitted saves of the dead run: never loaded, removed before new ones
            shutil.rmtree(checkpoint_dir(base, s), ignore_errors=True)
    if latest is not None:
        folder = latest[1]
        check_checkpoint(folder, fingerprint, MARKER)
        t0 = time.perf_counter()
        for p in setup.module.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()  # creates Adam's state tensors, which the load overwrites
        opt.zero_grad(set_to_none=True)
        msd, osd = get_state_dict(setup.module, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=str(folder))
        set_state_dict(setup.module, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        comm.barrier()
        restore_s = time.perf_counter() - t0
    meta = {**fingerprint, "world": world, "layout": layout_name(layout), "config": cfg_dict}
    ckpt = PeriodicCheckpointer(base, every, meta)
    step_s = []
    with open(log_path, "a") as log:
        for step in range(start + 1, steps + 1):
            t0 = time.perf_counter()
            loss = _train_step(setup, opt, cfg, step - 1)
            step_s.append(time.perf_counter() - t0)
            log.write(f"{step} {loss!r}\n")
            log.flush()
            issued = ckpt.after_step(step, setup.module, opt)
            if issued and kill_in_save is not None and tuple(kill_in_save) == (rank, step):
                _kill_self_mid_save(checkpoint_dir(base, step), rank)
    ckpt.close()
    comm.barrier()
    return {"start": start, "restore_s": restore_s, "discarded": discarded, "issue_s": ckpt.issue_s,
            "save_s": ckpt.save_s, "step_s": step_s}


def _pid(root: Path, attempt: int, rank: int, deadline: float) -> int:
    path = root / "log" / f"attempt{attempt}-rank{rank}.pid"
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.01)
    raise CommError(f"rank {rank} of the run never wrote its pid to {path}")


def kill_and_resume(root: Union[str, Path], cfg: ExecConfig, *, world: int = 2, world_after: int = 1,
                    steps: int = 8, every: int = 2, kill_after: Optional[int] = None,
                    kill_in_save: Optional[int] = None, victim: int = 1, layout: Union[str, Plan] = "dp",
                    timeout: float = 300.0) -> Dict[str, Any]:
    """Run, SIGKILL rank ``victim``, re-plan for ``world_after`` processes and resume; the record of it.

    ``kill_after=k``: the driver SIGKILLs the victim once a rank has logged step ``k`` (an outside kill,
    wherever the victim then is); ``kill_in_save=s``: the victim kills itself inside the save of step ``s``.
    Returns ``last_step`` (finished before the kill), ``checkpoint_step``, ``steps_lost``, the attempts'
    logs and the resumed run's plan and timings.
    """
    from sgl.systems.memory.survivors import plan_layout, replan

    root = Path(root)
    if (kill_after is None) == (kill_in_save is None):
        raise ConfigError("give exactly one of kill_after (an outside SIGKILL) or kill_in_save (inside a save)")
    failure: List[BaseException] = []
    fault = (victim, kill_in_save) if kill_in_save is not None else None

    def first_run() -> None:
        try:
            comm.spawn(recovery_worker, world, layout, str(root), cfg.__dict__, steps, every, 0, fault,
                       timeout=timeout)
        except CommError as exc:
            failure.append(exc)

    thread = threading.Thread(target=first_run, daemon=True)
    t_start = time.monotonic()
    thread.start()
    deadline = t_start + timeout
    pid = _pid(root, 0, victim, deadline)
    pending_at_kill: List[int] = []
    if kill_after is not None:
        while time.monotonic() < deadline and thread.is_alive():
            done = read_log(root, 0)
            if done and max(done) >= kill_after:
                pending_at_kill = [s for s in _folder_steps(root) if s not in committed_steps(root)]
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.005)
    thread.join(max(1.0, deadline - time.monotonic()))
    if not failure:
        raise CommError("the run was not killed: it finished before the kill (raise steps or lower kill_after)")
    first = read_log(root, 0)
    latest = latest_checkpoint(root)
    checkpoint_step = latest[0] if latest else 0
    uncommitted = [s for s in _folder_steps(root) if s not in committed_steps(root)]
    plan = replan(world_after, model=cfg.model, batch_sizes=(cfg.global_bsz,), executable=True)
    t0 = time.perf_counter()
    resumed = comm.spawn(recovery_worker, plan["devices_used"], plan["plan"], str(root), cfg.__dict__, steps,
                         every, 1, None, timeout=timeout)
    second = read_log(root, 1)
    last = max(first) if first else 0
    return {"last_step": last, "checkpoint_step": checkpoint_step, "steps_lost": last - checkpoint_step,
            "first_losses": first, "resumed_losses": second, "resumed_start": resumed[0]["start"],
            "uncommitted_after_kill": uncommitted, "in_flight_at_kill": pending_at_kill,
            "discarded": resumed[0]["discarded"], "restore_s": max(r["restore_s"] for r in resumed),
            "resume_wall_s": time.perf_counter() - t0, "save_s": resumed[0]["save_s"],
            "issue_s": resumed[0]["issue_s"], "step_s": resumed[0]["step_s"], "plan": plan_layout(plan["plan"]),
            "devices_used": plan["devices_used"], "kill_error": str(failure[0]).splitlines()[0]}
