"""How the command line prints results and writes run records: one formatter, one writer.

    >>> format_stat({"mean": 0.8312, "std": 0.0041}, 5)
    '83.1 ± 0.4 (5 seeds)'
    >>> format_stat({"mean": 0.80123, "std": 0.0012}, 1, scale=1, digits=4)
    '0.8012 ± 0.0012 (1 seed)'
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

__all__ = ["format_stat", "write_record"]


def format_stat(stat: Dict[str, float], n: int, scale: float = 100.0, digits: int = 1, unit: str = "seed") -> str:
    """``mean ± std (n seeds)`` of a :func:`sgl.tasks.summarize` result (percent by default)."""
    return (f"{scale * stat['mean']:.{digits}f} ± {scale * stat['std']:.{digits}f} "
            f"({n} {unit}{'s' if n != 1 else ''})")


def write_record(path: Optional[str], record: Dict[str, Any]) -> None:
    """Write ``record`` as JSON to ``path`` atomically (nothing when ``path`` is empty)."""
    if not path:
        return
    from sgl.fileio import atomic_write

    with atomic_write(path, "w") as handle:
        json.dump(record, handle, indent=2, default=str)
    print(f"record: {path}")
