"""Errors raised for bad user input (scenario, profile, CLI arguments)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class ConfigError(ValueError):
    """A scenario or profile value is missing, unknown or out of range.

    The message names the file, the key path (dotted), the offending value and what is
    allowed, e.g. ``scenarios/x.yaml: server.max_running_requests = -3: must be >= 1``.
    The CLI turns it into one line on stderr and exit code 2.
    """

    def __init__(self, file: str, key: str, value: object, allowed: str) -> None:
        self.file, self.key, self.value, self.allowed = file, key, value, allowed
        # args are the fields, so that type(e)(*e.args) rebuilds it: SimPy re-raises a
        # process's exception that way, and a process pool pickles it that way
        super().__init__(file, key, value, allowed)

    def __str__(self) -> str:
        return f"{self.file}: {self.key} = {self.value!r}: {self.allowed}"


def clipped(value: object, width: int = 60) -> object:
    """``value`` as an error line shows it: itself when its text is at most ``width``
    characters, else the first ``width - 3`` characters of its text and "..." (a whole list
    or line of a user's file would not be one line)."""
    text = str(value)
    return value if len(text) <= width else text[:width - 3] + "..."


class FieldError(ValueError):
    """Raised inside a model validator for a check across fields: names the dotted key (from
    the scenario's root), its value and what is allowed, so the loader's one-line message
    blames the right key instead of the whole section. A ``key`` that starts with "." is
    relative to the model that raises it (a block used under several keys, such as a length
    distribution): the loader prefixes the block's own dotted key."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        # args are the fields, as ConfigError's: a process pool pickles it so (with the
        # message as its one arg the pool's unpickling failed and broke the pool)
        super().__init__(key, value, allowed)

    def __str__(self) -> str:
        return f"{self.key} = {self.value!r}: {self.allowed}"


EXTRA_OF = {"torch": "runtime", "dask": "distributed", "distributed": "distributed"}
"""Optional dependency (top-level module) -> the pyproject extra that installs it."""


class MissingDependency(Exception):
    """A command needs an optional dependency that is not installed; the CLI prints the one
    line (what needs it, which module, how to install it) and exits 2."""

    def __init__(self, what: str, module: str) -> None:
        self.what, self.module = what, module
        extra = EXTRA_OF.get(module)
        how = (f"pip install 'specsched[{extra}]' (in a checkout: pip install -e '.[{extra}]')" if extra
               else f"pip install {module}")
        super().__init__(f"{what} needs {module}, which is not installed: {how}")


def require(module: str, what: str) -> None:
    """Import ``module`` (an optional dependency) or raise :class:`MissingDependency` naming
    ``what`` needs it. Call it where the dependency is used, not at import time."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as e:
        if (e.name or module).split(".")[0] != module.split(".")[0]:
            raise  # the module is there but one of its own imports failed: not ours to hide
        raise MissingDependency(what, module) from None


def refuse_missing(args: Any) -> int:
    """The function of a command registered without its optional dependency: raises the
    :class:`MissingDependency` its parser set as ``missing_dependency``."""
    raise args.missing_dependency


def one_line_on_bad_input(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Run a script's ``main(argv)``; a :class:`ConfigError` (a user's bad profile, file or
    key) or a :class:`MissingDependency` becomes its first line on stderr and exit status 2 instead of a traceback.

    Returns ``main``'s status, or 2. Other exceptions propagate."""
    try:
        return main(argv)
    except (ConfigError, MissingDependency) as e:
        print(str(e).splitlines()[0], file=sys.stderr)
        return 2
