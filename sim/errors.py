"""Errors raised for bad user input (scenario, profile, CLI arguments)."""

from __future__ import annotations

import sys
from collections.abc import Callable


class ConfigError(ValueError):
    """A scenario or profile value is missing, unknown or out of range.

    The message names the file, the key path (dotted), the offending value and what is
    allowed, e.g. ``scenarios/x.yaml: server.max_running_requests = -3: must be >= 1``.
    The CLI turns it into one line on stderr and exit code 2.
    """

    def __init__(self, file: str, key: str, value: object, allowed: str) -> None:
        self.file, self.key, self.value, self.allowed = file, key, value, allowed
        super().__init__(f"{file}: {key} = {value!r}: {allowed}")


class FieldError(ValueError):
    """Raised inside a model validator for a check across fields: names the dotted key (from
    the scenario's root), its value and what is allowed, so the loader's one-line message
    blames the right key instead of the whole section."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key} = {value!r}: {allowed}")


def one_line_on_bad_input(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Run a script's ``main(argv)``; a :class:`ConfigError` (a user's bad profile, file or
    key) becomes its first line on stderr and exit status 2 instead of a traceback.

    Returns ``main``'s status, or 2. Other exceptions propagate."""
    try:
        return main(argv)
    except ConfigError as e:
        print(str(e).splitlines()[0], file=sys.stderr)
        return 2
