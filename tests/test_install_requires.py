"""The install keeps the user's torch: ``install_requires`` has floors, never an exact torch pin;
our own venv gets its CPU wheel through ``constraints.txt``, which the Makefile passes to pip."""
import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _requirements(section: str, key: str):
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line.split("#", 1)[0].strip() for line in config[section][key].splitlines()]
    return [line for line in lines if line]


def _pins_torch_exactly(requirement: str) -> bool:
    name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower()
    return name == "torch" and bool(re.search(r"(===?|~=|<)", requirement))


def test_the_pin_detector():
    assert _pins_torch_exactly("torch==2.13.0") and _pins_torch_exactly("torch ~= 2.13")
    assert _pins_torch_exactly("torch>=2.6,<2.14")
    assert not _pins_torch_exactly("torch>=2.6") and not _pins_torch_exactly("torch-geometric==2.5")


def test_install_requires_keeps_a_torch_floor_and_no_pin():
    requires = _requirements("options", "install_requires")
    torch_lines = [r for r in requires if re.match(r"torch\b(?![-_])", r)]
    assert torch_lines == ["torch>=2.6"], torch_lines
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    for extra, text in config["options.extras_require"].items():
        for requirement in (line.split("#", 1)[0].strip() for line in text.splitlines()):
            assert not _pins_torch_exactly(requirement), f"extra [{extra}] pins torch: {requirement}"


def test_our_venv_pins_torch_through_the_constraints_file():
    constraints = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^torch==\d+\.\d+\.\d+$", constraints, re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    assert "$(PIP) -e ." in makefile and "$(PIP) -e '.[test]'" in makefile


def test_pip_install_keeps_the_installed_torch(tmp_path):
    """``pip install .`` into an environment that already has a torch (this venv's) installs SGL and
    nothing else: no torch download, no replacement (a dry run, so nothing changes)."""
    import json
    import subprocess
    import sys

    import torch

    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--quiet",
                           "--report", str(report), str(ROOT)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    names = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    assert names == ["sgl"], f"pip would also install {names} next to torch {torch.__version__}"
