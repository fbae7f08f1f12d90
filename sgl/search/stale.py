"""Trials of killed search workers: marked ``FAIL`` at once on their machine, by heartbeat elsewhere.

A worker killed mid-trial (``kill -9``, OOM killer, a pre-empted node) leaves its trial
``RUNNING`` in the storage. Two mechanisms end such trials:

* **Owner check, at once.** Each trial records its worker (:func:`worker_identity`: host, a
  token of the machine's process space, pid and the pid's start time). When a search starts,
  :func:`fail_dead_trials` marks ``FAIL`` every ``RUNNING`` trial whose worker ran in this
  process space and no longer exists (a reused pid is told apart by its start time).
* **Heartbeat, for other machines.** RDB storages (SQLite, PostgreSQL, MySQL) are opened with
  optuna's heartbeat: a running trial writes a heartbeat every :data:`HEARTBEAT_INTERVAL`
  seconds, and a trial silent for :data:`GRACE_PERIOD` seconds is marked ``FAIL`` by the next
  trial any worker starts; optuna then calls :func:`report_failed_trial`.

Either way the failed trial is reported on the ``sgl.search`` logger (printed on stderr when
logging is not configured); failed trials do not count towards the requested trial count.

Example:
    >>> owner = worker_identity()
    >>> owner_alive(owner), owner_alive({**owner, "machine": "another machine"})
    (True, None)
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import Any, Dict, List, Optional

from sgl.fileio import pid_alive

__all__ = ["WORKER_ATTR", "HEARTBEAT_INTERVAL", "GRACE_PERIOD", "worker_identity", "owner_alive",
           "fail_dead_trials", "report_failed_trial"]

#: the trial user attribute naming the worker that runs it
WORKER_ATTR = "sgl_worker"
#: seconds between two heartbeats of a running trial
HEARTBEAT_INTERVAL = 10
#: a running trial whose last heartbeat is older than this (seconds) belongs to a dead worker
GRACE_PERIOD = 30

logger = logging.getLogger("sgl.search")


def _read(path: str) -> Optional[str]:
    with contextlib.suppress(OSError):
        with open(path) as handle:
            return handle.read().strip()
    return None


def _machine_token() -> Optional[str]:
    """Boot id + pid namespace: two processes can see each other's pids iff their tokens match."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    return f"{boot}/{namespace}" if boot and namespace else None


def _start_time(pid: int) -> Optional[str]:
    """The process start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def worker_identity() -> Dict[str, Any]:
    """Who runs a trial: ``{"host", "machine", "pid", "started"}`` (JSON-serializable)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "machine": _machine_token(), "pid": pid, "started": _start_time(pid)}


def owner_alive(owner: Any) -> Optional[bool]:
    """Whether the worker ``owner`` still runs: ``None`` when this process cannot tell (another
    machine or container, or no ``/proc``), so only the heartbeat can."""
    if not isinstance(owner, dict) or not owner.get("machine") or owner.get("machine") != _machine_token():
        return None
    pid = owner.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    started = _start_time(pid)
    return started is None or owner.get("started") is None or started == owner["started"]


def report_failed_trial(study: Any, trial: Any) -> None:
    """optuna's heartbeat callback (and ours): say which trial of which worker was marked FAIL."""
    owner = trial.user_attrs.get(WORKER_ATTR) or {}
    who = f"pid {owner.get('pid')} on {owner.get('host')}" if owner else "an unknown worker"
    logger.warning("search: trial %d of study %r was left RUNNING by %s, which is gone; marked FAIL (it does not "
                   "count towards --trials)", trial.number, study.study_name, who)


def fail_dead_trials(study: Any) -> List[int]:
    """Mark ``FAIL`` the running trials of dead workers on this machine; returns their numbers."""
    import optuna

    failed = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if owner_alive(trial.user_attrs.get(WORKER_ATTR)) is not False:
            continue
        with contextlib.suppress(Exception):  # another worker may end it first (UpdateFinishedTrialError)
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
            failed.append(trial.number)
            report_failed_trial(study, trial)
    return failed
