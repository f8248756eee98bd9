"""``python -m specsched`` runs the command line (the same as the ``specsched`` script)."""

import sys

from specsched.cli import main

sys.exit(main())
