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


class AnonPeak:
    """Peak anonymous RSS (``RssAnon``: heap, not page-cache pages of mapped files), sampled by a
    background thread every ``interval`` seconds; use as a context manager, read ``peak_kb``.

    ``VmHWM`` also counts the pages of memory-mapped files the process has touched, which the
    kernel may drop at any time; ``RssAnon`` is the memory that has to stay.
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_kb = 0
        self._stop = None
        self._thread = None

    def __enter__(self) -> "AnonPeak":
        import threading

        self._stop = threading.Event()
        self.peak_kb = status_kb("RssAnon")

        def sample() -> None:
            while not self._stop.is_set():
                self.peak_kb = max(self.peak_kb, status_kb("RssAnon"))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, status_kb("RssAnon"))
