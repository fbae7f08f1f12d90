"""Fixtures of the command-line tests: paths a command cannot write."""
import os
import sys

import pytest


@pytest.fixture
def unwritable(tmp_path):
    """A folder nobody can create files in: chmod 0500 for a normal user, /proc for root."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o500)
        yield str(folder)
        folder.chmod(0o700)
    elif sys.platform.startswith("linux") and os.path.isdir("/proc"):
        yield "/proc"
    else:
        pytest.skip("running as root without /proc: no folder is unwritable")


@pytest.fixture
def a_file(tmp_path):
    """An existing plain file (given where a folder is wanted)."""
    path = tmp_path / "notes.txt"
    path.write_text("a file, not a folder")
    return path
