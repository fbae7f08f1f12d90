"""Command-line option values: ``KEY=VALUE`` pairs and JSON/YAML config files.

Used by every module of ``sgl.cli``, so every ``--*-option`` flag
and every ``--config`` file is parsed the same way.

    >>> key_values(["k=3", "message-options={\\"alpha\\": 0.1}", "name=ppr"], "--model-option")
    {'k': 3, 'message_options': {'alpha': 0.1}, 'name': 'ppr'}
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from sgl.errors import ConfigError

__all__ = ["parse_value", "key_values", "read_config"]


def parse_value(text: str) -> Any:
    """A JSON value when ``text`` is one (``3``, ``true``, ``[1,2]``), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def key_values(items: Optional[Sequence[str]], flag: str) -> Dict[str, Any]:
    """``["a-b=1", ...]`` from a repeated ``flag`` -> ``{"a_b": 1, ...}``."""
    out: Dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = parse_value(value)
    return out


def read_config(path: str) -> Dict[str, Any]:
    """A JSON or YAML mapping; a result record written by ``--out`` yields its ``"config"``."""
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"config file {path!r} does not exist")
    text = file.read_text()
    try:
        if file.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise ConfigError(f"could not parse config file {path!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping, got {type(data).__name__}")
    return data.get("config", data)
