"""``sgl datasets list`` and ``sgl models``: what the registries hold."""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    datasets = sub.add_parser("datasets", help="dataset registry")
    datasets_sub = datasets.add_subparsers(dest="datasets_command", required=True)
    datasets_sub.add_parser("list", help="list registered datasets")
    datasets.set_defaults(handler=cmd_datasets)
    sub.add_parser("models", help="list available models").set_defaults(handler=cmd_models)


def cmd_datasets(args: argparse.Namespace) -> int:
    import sgl.datasets

    rows = sgl.datasets.list_datasets()
    width = max(len(name) for name, _, _ in rows)
    for name, description, task in rows:
        print(f"{name:<{width}}  {task:<6}  {description}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from sgl.models import CTR_MODELS, MODELS

    print("graph models (sgl train --model NAME):")
    for name, (_, _, description) in sorted(MODELS.items()):
        print(f"  {name:<9} {description}")
    print("CTR models (sgl train --task ctr --model NAME):")
    for name, entry in sorted(CTR_MODELS.items()):
        print(f"  {name:<9} {entry[-1]}")
    return 0
