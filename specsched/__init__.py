"""specsched: predict, then measure, what an SGLang-style scheduler with speculative decoding
does to TTFT, TPOT and throughput.

Subpackages: :mod:`specsched.sim` (the discrete-event model and the one scheduler),
:mod:`specsched.runtime` (the same scheduler and loop on a GPU through PyTorch),
:mod:`specsched.analysis` (plots, comparisons, sweeps); :mod:`specsched.cli` is the command
line above the three.
"""


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed distribution's metadata on first use:
    importing importlib.metadata and finding the distribution costs 20-30 ms of CPU, which
    every command paid at start-up while only ``specsched --version`` reads it."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("specsched")
    except PackageNotFoundError:  # running from a checkout that is not installed
        v = "0+unknown"
    globals()["__version__"] = v
    return v
