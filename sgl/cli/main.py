"""The ``sgl`` entry point: one parser, one subcommand module per command.

    sgl train --model sgc --dataset cora --root ~/data/planetoid --seeds 10
    sgl train --config run.json                 # reproduce a run (a config or a result record)
    sgl datasets list
    sgl models

Every command that reads a dataset takes ``--root DIR``; results are printed on lines that
start with the metric's name (``test accuracy: 81.0 ± 0.3 (10 seeds)``). Errors from bad
input are printed as one ``error:`` line with exit status 2, never as a traceback, and name
the flags the user typed (``--batch-size must be ...``, :func:`sgl.cli.flags.cli_message`).

The parsers import no library (no torch, no torch_geometric): ``sgl --help``, ``sgl --version``
and every ``--help`` start at once; a handler imports what it runs.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from sgl.cli import (
    ckpt, condense, data, federated, gbdt, info, memory, moe, motifs, plan, preprocess, search, secagg, serve, train, vend,
)
from sgl.cli.flags import cli_message
from sgl.errors import SGLError

__all__ = ["main", "build_parser"]

#: subcommand modules, each with ``register(subparsers)`` adding parsers whose
#: ``handler(args) -> int`` runs the command
COMMANDS = (train, info, search, preprocess, plan, vend, motifs, data, memory, ckpt, moe, serve, federated, condense,
            secagg, gbdt)


def build_parser() -> argparse.ArgumentParser:
    from sgl import __version__

    parser = argparse.ArgumentParser(prog="sgl", description="SGL — Scalable Graph Learning")
    parser.add_argument("--version", action="version", version=f"sgl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except SGLError as exc:
        print(f"error: {cli_message(str(exc), parser, args)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
