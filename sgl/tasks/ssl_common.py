"""Pieces shared by the self-supervised tasks: building models from CLI flags, summaries.

Example:
    >>> fmt_stat({"mean": 0.8312, "std": 0.0041}, 5)
    '83.1 ± 0.4 (5 seeds)'
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Dict, List, Optional

from sgl.errors import ConfigError
from sgl.options import key_values

__all__ = ["ssl_factory", "ssl_args_config", "seeds_from_args", "fmt_stat", "write_record"]


def fmt_stat(stat: Dict[str, float], seeds: int, scale: float = 100.0, unit: str = "seed") -> str:
    return f"{scale * stat['mean']:.1f} ± {scale * stat['std']:.1f} ({seeds} {unit}{'s' if seeds != 1 else ''})"


def ssl_args_config(args: argparse.Namespace) -> Dict[str, Any]:
    """Model-config overrides from the shared ``sgl train`` flags."""
    overrides = key_values(getattr(args, "model_option", None), "--model-option")
    for flag, key in (("hidden", "hidden"), ("dropout", "dropout"), ("lr", "lr"), ("weight_decay", "weight_decay"),
                      ("epochs", "epochs"), ("device", "device")):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[key] = value
    return overrides


def ssl_factory(name: str, in_features: int, overrides: Dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument factory of self-supervised model ``name`` (config checked right away)."""
    from sgl.models.ssl_baselines import build_ssl_model, ssl_model_config

    config = ssl_model_config(name, **overrides)
    return lambda: build_ssl_model(name, in_features, config)


def seeds_from_args(args: argparse.Namespace, default: int) -> List[int]:
    seeds = getattr(args, "seeds", None)
    seeds = default if seeds is None else seeds
    if seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {seeds}")
    return list(range(seeds))


def write_record(path: Optional[str], record: Dict[str, Any]) -> None:
    if not path:
        return
    from sgl.fileio import atomic_write

    with atomic_write(path, "w") as handle:
        json.dump(record, handle, indent=2)
    print(f"record: {path}")
