"""argparse value types shared by every command (sim, analysis and runtime alike).

A bad value becomes one line naming the option, the value and what is allowed
(``specsched compare: error: argument --seeds: expected an integer >= 1, got 0``), exit
status 2, never a traceback (the CLI's parser prints no usage block for it).
"""

from __future__ import annotations

import argparse

from specsched.sim.atomic import is_path_component


def _int(text: str, low: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {v}")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (seed counts, workers, batch sizes, repeats).

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 1 (argparse reports it, exit 2).
    """
    return _int(text, 1)


MAX_SEEDS = 100_000
"""Most seeds a command takes (``--seeds``): each seed is a whole simulated run, so 100,000 of
the smallest shipped cell already take hours, while a sweep builds its list of runs up front
(``--seeds 99999999999`` grew it by ~50 MB a second, silently, towards running out of memory)."""


def seed_count(text: str) -> int:
    """argparse type of ``--seeds``: an integer from 1 to :data:`MAX_SEEDS`.

    Raises:
        argparse.ArgumentTypeError: not an integer, < 1 or > MAX_SEEDS (argparse reports it,
            exit 2).
    """
    v = _int(text, 1)
    if v > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_SEEDS:,} seeds (each is a whole run), got {v}")
    return v


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a seed: numpy's generators take any such integer).

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 0 (argparse reports it, exit 2).
    """
    return _int(text, 0)


def _int_list(text: str, low: int) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers, e.g. 1024,4096") from None
    if not vals or min(vals) < low:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers >= {low}")
    return vals


def positive_int_list(text: str) -> list[int]:
    """argparse type: comma-separated integers >= 1 (a profile's contexts, extend token counts).

    Raises:
        argparse.ArgumentTypeError: empty, not integers, or one < 1."""
    return _int_list(text, 1)


def nonnegative_int_list(text: str) -> list[int]:
    """argparse type: comma-separated integers >= 0 (a profile's cached prefixes, 0 = none).

    Raises:
        argparse.ArgumentTypeError: empty, not integers, or one < 0."""
    return _int_list(text, 0)


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (a percentage threshold).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or < 0 (argparse reports it, exit 2).
    """
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return v


def positive_number(text: str) -> float:
    """argparse type: a finite number > 0 (a duration, a size, a rate).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or <= 0 (argparse reports it, exit 2).
    """
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return v


def file_name(text: str) -> str:
    """argparse type: a name that becomes one file or folder name (``--name`` of a profile,
    whose default output is ``profiles/<name>.yaml``): not empty, no path separator, not
    ``.`` or ``..`` (``--name ../../x`` wrote two folders above profiles/).

    Raises:
        argparse.ArgumentTypeError: a name that is not one path component (exit 2).
    """
    if not text.strip() or not is_path_component(text):
        raise argparse.ArgumentTypeError(f"expected a file name (no / or \\, not . or ..), got {text!r}")
    return text
