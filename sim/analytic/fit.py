"""Refit an analytic profile's efficiency factors to measured forward times.

A calibration step hands :func:`fit_efficiency` the forwards it measured (decode, verify or
extend, each with its shape and seconds) and the factors to free; it returns the factors
that minimise the squared log error of the roofline against them (scipy least squares),
and :func:`sim.analytic.writer.regenerate` rebuilds the profile with them. Fit on means of
repeated measurements, never one sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from specsched.sim.analytic.gpus import GpuSpec
from specsched.sim.analytic.models import ModelArch
from specsched.sim.analytic.roofline import Efficiency, Parallel, decode_like, draft_arch, extend
from specsched.sim.errors import ConfigError
from specsched.sim.profile import Profile

BOUNDS = {"matmul": (0.02, 1.0), "attention": (0.02, 1.0), "hbm": (0.02, 1.0), "interconnect": (0.02, 1.0),
          "allreduce_latency_s": (0.0, 1e-3), "kernel_gap_s": (0.0, 1e-4), "graph_launch_s": (0.0, 1e-2),
          "eager_launch_per_kernel_s": (0.0, 1e-3), "eager_gpu_per_kernel_s": (0.0, 1e-4)}
"""Factors that can be fitted and their allowed ranges."""


@dataclass(frozen=True)
class Observation:
    """One measured forward (mean seconds over repeats).

    kind: ``decode``, ``verify`` (target forward over ``tokens`` per request) or ``extend``
        (``tokens`` extend tokens in all, ``context`` their mean attended context).
    batch: requests (decode/verify; ignored for extend).
    """

    kind: str
    batch: int
    tokens: int
    context: float
    seconds: float


def predict(arch: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, ob: Observation) -> float:
    """The roofline's seconds for one observation's shape."""
    if ob.kind == "extend":
        return extend(arch, gpu, par, eff, ob.tokens, ob.context).graph_s
    if ob.kind in ("decode", "verify"):
        return decode_like(arch, gpu, par, eff, ob.batch, ob.tokens, ob.context).graph_s
    if ob.kind == "draft":
        return decode_like(draft_arch(arch, 1), gpu, par, eff, ob.batch, ob.tokens, ob.context).graph_s
    raise ConfigError("<observations>", "kind", ob.kind, "allowed: decode, verify, extend, draft")


def fit_efficiency(profile: Profile, observations: Sequence[Observation],
                   factors: Sequence[str] = ("matmul", "hbm", "kernel_gap_s")) -> tuple[Efficiency, float]:
    """Fit ``factors`` of an analytic profile's efficiency to ``observations``.

    Returns:
        (the fitted Efficiency, with the other factors as in the profile; RMS log error).

    Raises:
        ConfigError: not an analytic profile, an unknown factor, or no observations.
    """
    from scipy.optimize import least_squares

    a = profile.analytic
    if not a:
        raise ConfigError(profile.path or profile.name, "analytic", "<missing>", "not an analytic profile")
    bad = [f for f in factors if f not in BOUNDS]
    if bad:
        raise ConfigError("<fit>", "factors", bad[0], f"allowed: {', '.join(BOUNDS)}")
    if not observations:
        raise ConfigError("<fit>", "observations", 0, "need at least one measured forward")
    arch, gpu = ModelArch.model_validate(a["model"]), GpuSpec.model_validate(a["gpu"])
    par = Parallel(tp=a["tp"], dtype=a["dtype"])
    base = a["efficiency"]
    lo = np.array([BOUNDS[f][0] for f in factors])
    hi = np.array([BOUNDS[f][1] for f in factors])
    x0 = np.clip([base[f] for f in factors], lo + 1e-12, hi)
    measured = np.log([ob.seconds for ob in observations])

    def eff_of(x: np.ndarray) -> Efficiency:
        return Efficiency.model_validate({**base, **dict(zip(factors, map(float, x), strict=True))})

    def resid(x: np.ndarray) -> np.ndarray:
        e = eff_of(x)
        return np.log([predict(arch, gpu, par, e, ob) for ob in observations]) - measured

    res = least_squares(resid, x0, bounds=(lo, hi), x_scale=np.maximum(x0, 1e-6))
    return eff_of(res.x), float(np.sqrt(np.mean(res.fun ** 2)))
