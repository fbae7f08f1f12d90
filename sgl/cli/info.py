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
    models = sub.add_parser("models", help="list available models")
    models.add_argument("--presets", action="store_true",
                        help="list each model's per-dataset presets (what `sgl train` uses when no flag overrides "
                             "them) and their sources")
    models.set_defaults(handler=cmd_models)


def cmd_datasets(args: argparse.Namespace) -> int:
    import sgl.datasets

    rows = sgl.datasets.list_datasets()
    width = max(len(name) for name, _, _ in rows)
    for name, description, task in rows:
        print(f"{name:<{width}}  {task:<6}  {description}")
    return 0


def _settings(values: Any) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items()) or "-"


def cmd_presets() -> int:
    from sgl.models import list_presets

    rows = list_presets()
    print("presets (sgl train --model NAME --dataset DATASET uses them; an explicit flag overrides a value):")
    width = max(len(p.model) for p in rows)
    for p in rows:
        print(f"  {p.model:<{width}}  {p.dataset:<9} {p.source:<10}  model: {_settings(p.model_config)}; "
              f"train: {_settings(p.train)}")
        print(f"  {'':<{width}}  {'':<9} {'':<10}  source: {p.reference}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    if getattr(args, "presets", False):
        return cmd_presets()
    from sgl.models import CTR_MODELS, HETERO_MODELS, MODELS

    print("graph models (sgl train --model NAME):")
    for name, (_, _, description) in sorted(MODELS.items()):
        print(f"  {name:<9} {description}")
    print("heterogeneous graph models (sgl train --model NAME --dataset acm|imdb|ogbn-mag):")
    for name, (_, _, description) in HETERO_MODELS.items():
        print(f"  {name:<12} {description}")
    print("CTR models (sgl train --task ctr --model NAME):")
    for name, entry in sorted(CTR_MODELS.items()):
        print(f"  {name:<9} {entry[-1]}")
    return 0
