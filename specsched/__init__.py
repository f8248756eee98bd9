"""specsched: predict, then measure, what an SGLang-style scheduler with speculative decoding
does to TTFT, TPOT and throughput.

Subpackages: :mod:`specsched.sim` (the discrete-event model and the one scheduler),
:mod:`specsched.runtime` (the same scheduler and loop on a GPU through PyTorch),
:mod:`specsched.analysis` (plots, comparisons, sweeps); :mod:`specsched.cli` is the command
line above the three.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specsched")
except PackageNotFoundError:  # running from a checkout that is not installed
    __version__ = "0+unknown"
