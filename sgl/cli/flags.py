"""CLI errors name CLI flags: the library's Python names are translated at the boundary.

The library checks its arguments once and names them as Python does (``batch_size must be
positive``); a command-line user typed ``--batch-size``. :func:`cli_message` rewrites an
error message for the command line: every option the user gave is named by its flag. The
one mapping is the parser itself (each option's ``dest`` and its flag) plus, per command,
``library_names`` (set with ``parser.set_defaults(library_names={dest: name})``) for the
flags whose value reaches the library under another name (``--link-val-ratio`` ->
``val_ratio``): such a name, which a config file also uses, is glossed the first time
(``--link-val-ratio (val_ratio) must be in [0, 1)``).

Only names the user set are rewritten, so an option of a ``KEY=VALUE`` list or a config file,
which the user wrote under its Python name, keeps that name, and so does a name the library
already glossed with its flag (``cache_dir (--cache-dir)``). A name with an underscore is
rewritten wherever it stands alone; a plain word (``lr``, ``hidden``) only where it is used as
a name: before ``must``, a comparison, ``=``, ``in [``, ``(``, or between backquotes.

    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--batch-size", type=int)
    >>> _ = parser.add_argument("--lr", type=float)
    >>> args = parser.parse_args(["--batch-size", "0", "--lr", "-1"])
    >>> cli_message("batch_size must be positive, got 0", parser, args)
    '--batch-size must be positive, got 0'
    >>> cli_message("need lr > 0, got lr=-1.0; the lr of SGC is 0.2", parser, args)
    'need --lr > 0, got --lr=-1.0; the lr of SGC is 0.2'
"""
from __future__ import annotations

import argparse
import re
from typing import Dict, Tuple

__all__ = ["given_flags", "cli_message"]

#: what follows a plain word that is used as an argument's name
_AS_NAME = r"(?=\s*(?:must\b|should\b|in [\[(]|[=<>(]|!=|≥|≤))"


def given_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Dict[str, str]:
    """``dest -> flag`` of every option of the chosen (sub)command whose value is not its default."""
    out: Dict[str, str] = {}
    for action in parser._actions:  # argparse keeps no public list of a parser's options
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None))
            if chosen is not None:
                out.update(given_flags(chosen, args))
        elif action.option_strings and action.dest not in ("help", "version"):
            value = getattr(args, action.dest, None)
            if value is not None and value is not False and value != [] and value != action.default:
                out[action.dest] = max(action.option_strings, key=len)
    return out


def _rename(message: str, name: str, flag: str, gloss: bool) -> str:
    """Replace ``name`` by ``flag`` (the first time by ``flag (name)`` when ``gloss``)."""
    word = re.escape(name)
    # a name the library already glossed with its flag ("cache_dir (--cache-dir)") stays
    glossed = rf"(?!\s*\({re.escape(flag)}(?![\w\-]))"
    if "_" in name:
        pattern = rf"`{word}`|(?<![\w\-.]){word}(?![\w\-]){glossed}"
    else:
        pattern = rf"`{word}`|(?<![\w\-.`'\"]){word}(?![\w\-`'\"]){glossed}{_AS_NAME}"
    pending = [gloss]

    def replace(match: "re.Match[str]") -> str:
        text = f"{flag} ({name})" if pending[0] else flag
        pending[0] = False
        return f"`{text}`" if match.group(0).startswith("`") else text

    return re.sub(pattern, replace, message)


def cli_message(message: str, parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """``message`` with the Python name of every option the user gave replaced by its flag."""
    library = getattr(args, "library_names", None) or {}
    names: Dict[str, Tuple[str, bool]] = {}
    for dest, flag in given_flags(parser, args).items():
        names[dest] = (flag, False)
        if dest in library:
            names[library[dest]] = (flag, True)
    for name in sorted(names, key=len, reverse=True):
        message = _rename(message, name, *names[name])
    return message
