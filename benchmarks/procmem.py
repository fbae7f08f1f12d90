"""Process memory readings shared by the benchmarks (Linux ``/proc``): current and peak RSS."""
from __future__ import annotations


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB (``VmRSS`` current, ``VmHWM`` peak); 0 when absent."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak() -> None:
    """Reset ``VmHWM`` to the current RSS, so the next peak covers only what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass
