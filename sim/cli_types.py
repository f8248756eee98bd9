"""argparse value types shared by every command (sim, analysis and runtime alike).

A bad value becomes argparse's one-line usage error with exit 2, never a traceback.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (seeds, workers, batch sizes, repeats).

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 1 (argparse prints it, exit 2).
    """
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v
