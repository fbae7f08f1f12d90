"""Former name of ``gamlp_mag.py`` (heterogeneous GAMLP+RLU on ogbn-mag), kept so old commands
work: ``python examples/ogb/ogbn_mag.py ...`` runs ``gamlp_mag.py`` with the same options."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gamlp_mag import PAPER, PRESET, build_config, cli, main  # noqa: E402,F401

if __name__ == "__main__":
    cli()
