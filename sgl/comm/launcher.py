"""Local multi-process runs: :func:`spawn` runs a function in N processes with hard timeouts.

The children are started with the ``spawn`` method, so the function they run is found by its
module path (``_child_main`` here, ``fn`` wherever it is defined).
"""
from __future__ import annotations

import os
import pickle
import queue as queue_mod
import time
import traceback
from collections.abc import Callable
from typing import Any

from sgl.comm.world import _free_port, init, shutdown
from sgl.errors import CommError

__all__ = ["spawn"]


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout: float = 60.0,
    comm_timeout: float | None = None,
    start_method: str = "spawn",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` local processes.

    Each child gets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/
    ``MASTER_PORT`` set, is initialised with :func:`init` on 127.0.0.1 and a
    free port (so a further ``comm.init()`` inside ``fn`` is a no-op) and is
    shut down afterwards.  Returns the children's return values by rank
    (they must be picklable).  ``fn`` and ``args`` must be picklable too, so
    ``fn`` has to be a module-level function.

    ``timeout`` (seconds) bounds the whole run: children still running then
    are killed.  ``comm_timeout`` (default: ``timeout``) is the children's
    :func:`init` timeout and so the default of their collectives.

    Raises:
        CommError: a child raised (the message carries its traceback, and the error's
            ``rank_errors`` maps each failed rank to its exception's class name and message), died
            without reporting, or the run exceeded ``timeout``.
    """
    if not callable(fn):
        raise CommError(f"comm.spawn: fn must be callable, got {type(fn).__name__}.")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise CommError(f"comm.spawn: world_size must be an int >= 1, got {world_size!r}.")
    if not timeout > 0:
        raise CommError(f"comm.spawn: timeout must be > 0 seconds, got {timeout!r}.")
    comm_timeout = float(timeout if comm_timeout is None else comm_timeout)
    import torch.multiprocessing as mp  # local: only spawn needs it

    ctx = mp.get_context(start_method)
    results: queue_mod.Queue = ctx.Queue()
    port = _free_port()
    procs = []
    deadline = time.monotonic() + timeout
    try:
        for rank in range(world_size):
            proc = ctx.Process(
                target=_child_main,
                args=(fn, rank, world_size, args, backend, port, comm_timeout, results),
                name=f"sgl-comm-rank{rank}",
            )
            try:
                proc.start()
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise CommError(
                    f"comm.spawn: cannot send fn/args to the child processes ({exc}). "
                    "Fix: use a module-level function (no lambda or nested function) and "
                    "picklable arguments."
                ) from exc
            procs.append(proc)
        return _collect(procs, results, world_size, deadline, timeout)
    finally:
        _kill(procs)
        results.close()


def _child_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    args: tuple[Any, ...],
    backend: str,
    port: int,
    comm_timeout: float,
    results: Any,
) -> None:
    """Body of one :func:`spawn` child: init, run, report, shut down."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    try:
        init(
            backend,
            rank=rank,
            world_size=world_size,
            master_addr="127.0.0.1",
            master_port=port,
            timeout=comm_timeout,
        )
        value = fn(rank, world_size, *args)
        # Plain pickle (not the torch.multiprocessing reducer) so tensors are
        # copied by value and survive this process exiting.
        results.put((rank, True, pickle.dumps(value)))
    except BaseException as exc:  # noqa: BLE001 -- report everything, even SystemExit
        results.put((rank, False, (f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                                   type(exc).__name__, str(exc))))
    finally:
        # Flush the report into the pipe before tearing the process group down: a crash during
        # teardown (native code at exit) must not cut the message in half, which would leave the
        # parent blocked reading it and the queue's write lock held for the other ranks.
        try:
            results.close()
            results.join_thread()
        except Exception:  # noqa: BLE001 -- nothing more to report through it
            pass
        try:
            shutdown()
        except Exception:  # noqa: BLE001 -- the run's outcome is already reported
            pass


def _collect(
    procs: list[Any], results: Any, world_size: int, deadline: float, timeout: float
) -> list[Any]:
    """Wait for one report per rank; raise CommError on error, death or timeout."""
    values: dict[int, Any] = {}
    errors: dict[int, tuple[str, str]] = {}
    while len(values) + len(errors) < world_size and not errors:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            missing = sorted(set(range(world_size)) - set(values))
            raise CommError(
                f"comm.spawn: timed out after {timeout:g}s; rank(s) {missing} of {world_size} "
                "did not finish and were killed. Fix: look for a rank that skips a collective "
                "(deadlock) or raise `timeout` for slow work."
            )
        try:
            rank, ok, payload = results.get(timeout=min(0.1, remaining))
        except queue_mod.Empty:
            dead = [
                r for r, p in enumerate(procs)
                if p.exitcode is not None and r not in values and r not in errors
            ]
            if dead:
                # A report may still be in flight from a child that just exited.
                try:
                    rank, ok, payload = results.get(timeout=1.0)
                except queue_mod.Empty:
                    r = dead[0]
                    raise CommError(
                        f"comm.spawn: rank {r} of {world_size} exited with code "
                        f"{procs[r].exitcode} without reporting a result. Negative codes "
                        "mean killed by that signal (out of memory, crash in native code); "
                        "code 1 before fn ran usually means the child could not start: the "
                        "calling script needs an `if __name__ == '__main__':` guard and fn "
                        "must be importable (see the child's stderr)."
                    ) from None
            else:
                continue
        if ok:
            values[rank] = pickle.loads(payload)
        else:
            errors[rank] = payload
    if errors:
        rank = min(errors)
        summary, tb = errors[rank][:2]
        others = "".join(f"\n  rank {r}: {e[0]}" for r, e in sorted(errors.items()) if r != rank)
        error = CommError(
            f"comm.spawn: rank {rank} of {world_size} raised {summary}"
            + (f"\nOther failing ranks:{others}" if others else "")
            + f"\n\nTraceback in rank {rank}:\n{tb}"
        )
        # rank -> (exception class name, message): lets a caller re-raise a child's own error
        error.rank_errors = {r: (e[2], e[3]) for r, e in errors.items()}
        raise error
    # Everyone reported; give them a moment to shut down cleanly.
    for proc in procs:
        proc.join(max(0.0, min(5.0, deadline - time.monotonic())))
    return [values[r] for r in range(world_size)]


def _kill(procs: list[Any]) -> None:
    """Terminate, then kill, any child still alive."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
