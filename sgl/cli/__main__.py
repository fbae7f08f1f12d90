"""``python -m sgl.cli ...`` runs the ``sgl`` command line."""
import sys

from sgl.cli.main import main

sys.exit(main())
