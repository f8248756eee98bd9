"""``python -m specsched`` runs the command line (the same as the ``specsched`` script)."""

import sys

from specsched.cli import script

sys.exit(script())
