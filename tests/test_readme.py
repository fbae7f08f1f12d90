"""The README stays true: every ``sgl ...`` command in its shell blocks parses (and, for ``sgl train``,
builds its :class:`~sgl.tasks.RunConfig`, which rejects options the run would not read), it is at most
250 lines, and every relative link points to a file that exists (and, for ``page.md#anchor``, to a
heading of that page). Nothing is trained."""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: fenced blocks whose language marks them as shell (an unlabelled block counts as shell)
_SHELL = {"", "bash", "sh", "shell", "console"}
_SEPARATORS = {"&&", "||", ";", "|", "&"}
_REDIRECTS = {">", ">>", "<", "2>", "&>"}


def shell_blocks(markdown: str) -> List[str]:
    """The contents of the fenced code blocks of ``markdown`` whose language is a shell's."""
    return [body for lang, body in re.findall(r"^```([\w-]*)[^\n]*\n(.*?)^```", markdown, re.M | re.S)
            if lang.lower() in _SHELL]


def sgl_commands(markdown: str) -> List[str]:
    """Every ``sgl`` command in the shell blocks of ``markdown``: comments dropped, ``\\``-continued
    lines joined, ``a && b`` / ``a | b`` / ``a; b`` split, redirections (``> file``) and leading
    ``VAR=value`` assignments removed; each returned as one shell-quoted line starting with ``sgl``."""
    commands = []
    for block in shell_blocks(markdown):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens, current = list(lexer), []
            for token in tokens + [";"]:
                if token in _SEPARATORS:
                    words = [w for i, w in enumerate(current)
                             if w not in _REDIRECTS and (i == 0 or current[i - 1] not in _REDIRECTS)]
                    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                        words = words[1:]
                    if words and words[0] == "sgl":
                        commands.append(shlex.join(words))
                    current = []
                else:
                    current.append(token)
    return commands


def check_sgl_command(command: str, cwd: Path = ROOT) -> None:
    """Parse ``command`` with ``sgl``'s own parser, without running it; ``sgl train`` also builds its
    run config (unknown models and options that do not apply are errors there). A ``--config FILE``
    that does not exist in ``cwd`` (one the README's earlier commands write) is not read. Raises
    ``AssertionError`` naming the command and the parser's message."""
    from sgl.cli.main import build_parser
    from sgl.errors import SGLError

    words = shlex.split(command)
    assert words and words[0] == "sgl", f"not an sgl command: {command!r}"
    parser, err = _strict(build_parser()), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(words[1:])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise AssertionError(f"{command!r} does not parse: {err.getvalue().strip()}") from None
        return  # --help / --version
    if args.command == "train" and (args.config is None or (cwd / args.config).is_file()):
        from sgl.cli.train import build_run_config

        if args.config is not None:
            args.config = str(cwd / args.config)
        try:
            build_run_config(args)
        except SGLError as exc:
            raise AssertionError(f"{command!r} is rejected: {exc}") from None


def _strict(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` and its sub-parsers without prefix abbreviations: a README must spell every flag out
    (``--seed`` for ``--seeds`` works today but breaks when another ``--seed...`` flag appears)."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _strict(sub)
    return parser


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*_]{2,}|[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(markdown: str, base: Path) -> List[str]:
    """Relative links ``[text](target)`` of ``markdown`` whose file (under ``base``) or ``#anchor``
    (a heading of that Markdown file) does not exist."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        file = base / path
        if not file.exists():
            bad.append(target)
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+\s+(.*)$", file.read_text(encoding="utf-8"), re.M)
            if anchor not in {_slug(h) for h in headings}:
                bad.append(target)
    return bad


# ---------------------------------------------------------------------------- the README itself
README_TEXT = README.read_text(encoding="utf-8")
COMMANDS = sgl_commands(README_TEXT)


def test_readme_is_a_front_page():
    lines = README_TEXT.count("\n")
    assert lines <= 250, f"README.md has {lines} lines; keep it a front page (<= 250) and move detail to docs/"


def test_readme_shows_setup_first():
    first = shell_blocks(README_TEXT)[0].split()
    assert first[:2] == ["make", "demo"] and "make" in first[3:] and "test" in first[3:]


def test_readme_has_sgl_commands():
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_parses(command):
    check_sgl_command(command)


def test_readme_links_exist():
    assert broken_links(README_TEXT, README.parent) == []


# ---------------------------------------------------------------------------- the helpers
def test_extractor_splits_chains_and_drops_comments_and_redirects():
    text = ("intro\n```bash\nsgl models          # list\nsgl search export s.db --trial 5 > best.yaml && "
            "sgl train --config best.yaml\nSGL_DEVICE=cpu sgl train \\\n    --seeds 2\npython x.py\n```\n"
            "```python\nsgl = 1\n```\n")
    assert sgl_commands(text) == ["sgl models", "sgl search export s.db --trial 5", "sgl train --config best.yaml",
                                  "sgl train --seeds 2"]


@pytest.mark.parametrize("command, message", [
    ("sgl train --modle sgc --dataset cora", "unrecognized arguments: --modle"),     # misspelt flag
    ("sgl trian --model sgc", "invalid choice"),                                     # misspelt subcommand
    ("sgl plan search --model llama-7b --devices 8 --memroy 40GiB", "--memroy"),
    ("sgl train --model sage --dataset cora --sampler neighbor --k 3", "remove --k"),  # parses, but does not apply
    ("sgl train --model gamlpx --dataset cora", "unknown model"),
])
def test_a_bad_command_fails(command, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_sgl_command(command)


def test_a_readme_with_a_misspelt_flag_fails():
    bad = "```bash\nsgl train --model sgc --dataset cora --seed 3\n```\n"
    with pytest.raises(AssertionError, match="--seed"):
        for command in sgl_commands(bad):
            check_sgl_command(command)


def test_broken_links_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Title\n\n## Heterogeneous graphs\n", encoding="utf-8")
    text = ("[a](docs/page.md) [b](docs/page.md#heterogeneous-graphs) [c](docs/missing.md) "
            "[d](docs/page.md#nowhere) [e](https://example.org/x) [f](#local)")
    assert broken_links(text, tmp_path) == ["docs/missing.md", "docs/page.md#nowhere"]
