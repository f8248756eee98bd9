"""Import first in a script that needs torch (benchmarks/ on a device): without torch the
script ends in one line naming what to install, exit status 2, instead of a
ModuleNotFoundError traceback from whichever runtime module imports torch first.

``import specsched.runtime._requires_torch  # noqa: F401`` as the script's first specsched
import (a plain import, so import sorting keeps it above the ``from`` imports that need
torch). The check is the CLI's per command (:func:`sim.errors.require`); a script has no
command table to hook, so it runs when the script imports this module.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specsched.sim.errors import MissingDependency, require

try:
    require("torch", "this script")   # the script imports torch next anyway
except MissingDependency as _e:
    _script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "this script"
    print(f"{_script}: error: {_e}", file=sys.stderr)
    raise SystemExit(2) from None
