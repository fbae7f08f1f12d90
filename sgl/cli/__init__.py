"""The ``sgl`` command line: the only place in SGL that parses arguments.

Each subcommand lives in its own module and registers its parser with
``register(subparsers)``; its handler builds a typed config, calls one library function and
prints the result through :mod:`sgl.cli.report`:

* :mod:`sgl.cli.train` -- ``sgl train`` (a :class:`~sgl.tasks.RunConfig` -> :func:`sgl.tasks.run`)
* :mod:`sgl.cli.search` -- ``sgl search`` / ``search show`` / ``search export`` (PaSca)
* :mod:`sgl.cli.preprocess` -- ``sgl preprocess`` (disk stores)
* :mod:`sgl.cli.plan` -- ``sgl plan search|profile|show`` (Galvatron plans)
* :mod:`sgl.cli.info` -- ``sgl datasets list``, ``sgl models``

Errors from bad input are printed as one ``error:`` line with exit status 2.

    >>> from sgl.cli import build_parser
    >>> build_parser().parse_args(["train", "--model", "sgc", "--k", "3"]).k
    3
"""
from sgl.cli.main import build_parser, main

__all__ = ["main", "build_parser"]
