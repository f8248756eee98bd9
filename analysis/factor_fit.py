"""The least-squares core of the profile fits (``specsched calibrate --from``).

Both fits, to bench_serving runs (:func:`analysis.calibrate_bench.fit`, a server log's
decode steps optionally added) and to server logs alone (:func:`analysis.calibrate_log.fit_log`),
solve one problem. The unknowns are the log factors ``z`` (p,) of the fitted parameters
(``exp(z)`` multiplies each parameter's profile values; z = 0 is the profile), bounded to
:data:`FACTOR_RANGE`. The fit minimises

    sum_i (r_i(z) / scale_i) ** 2  +  sum_j (z_j / sd_j) ** 2

with ``r(z)`` (n,) the fit's residuals in log units (log(predicted / measured)), ``scale``
each residual's standard error (or any divisor the caller weighs by), and the second sum a
Gaussian prior on each log factor around the profile, standard deviation ``sd_j`` (a
parameter with sd inf has no prior row): the most probable factors given the measurements
and the profile. scipy's ``least_squares`` (trust region reflective) searches it, with the
objective's Jacobian: the residuals' forward differences over :data:`JAC_STEP` divided by
``scale``, and the prior rows' own (1 / sd_j on the diagonal).

:class:`LogFactorFit` holds what both fits share: every residual evaluation (a simulation
of every run, or a pricing of every logged step) made once per point and counted against a
hard cap, the Jacobian, the search, the best point evaluated, and the factors' covariance
at the solution (:func:`covariance`). What the fits do differently stays with them: the
residuals and their weights, the bench fit's start scan, its two starts and Ctrl-C, and
each fit's tolerances (:meth:`LogFactorFit.solve`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

FACTOR_RANGE = (0.1, 10.0)
"""Bounds of each fitted factor (its log factor within their logs)."""
JAC_STEP = 0.1
"""Finite-difference step of the fit's Jacobian, in log factor (about 10 %)."""


class CapReached(Exception):
    """A fit asked for one evaluation more than its ``max_evals`` (:meth:`LogFactorFit.residuals`)."""


def covariance(jac: np.ndarray, resid: np.ndarray, groups: Sequence[str] | None = None) -> np.ndarray | None:
    """Covariance of least-squares parameters (``jac`` n x p, ``resid`` n) from the scatter
    the residuals leave: each group's (``groups[i]`` names residual i's metric) own variance
    s_g^2 = sum over the group of r^2 / (n_g (n - p) / n), through the sandwich
    (J^T J)^+ J^T diag(s^2) J (J^T J)^+: a metric that scatters more (a median TTFT of a few
    hundred requests) than another (a median ITL) does not lend its scatter to the parameters
    the other pins. One group = Gauss-Newton's s^2 (J^T J)^+. None when n <= p."""
    n, p = jac.shape
    if n <= p:
        return None
    groups = list(groups) if groups is not None else [""] * n
    r2 = resid ** 2
    var = np.empty(n)
    for g in set(groups):
        idx = np.array([k == g for k in groups])
        var[idx] = r2[idx].sum() / (idx.sum() * (n - p) / n)
    a = np.linalg.pinv(jac.T @ jac)
    cov = a @ (jac.T * var) @ jac @ a
    dead = np.linalg.norm(jac, axis=0) < 1e-12   # a parameter no residual moves: not pinned at all
    cov[dead, :] = 0.0
    cov[:, dead] = 0.0
    cov[dead, dead] = np.inf
    return cov


class LogFactorFit:
    """Weighted least squares with a Gaussian prior on the log factors (module docstring).

    Args:
        residuals: ``residuals(z, *args)`` -> r (n,), log(predicted / measured) at the log
            factors z (p,); called once per distinct point (z rounded to 12 decimals), with
            the ``args`` :meth:`residuals` was given. It may raise :class:`CapReached` to end
            the fit early, as the cap does (the bench fit does on Ctrl-C).
        prior_sd: (p,) standard deviation of each log factor's prior (inf: no prior).
        max_evals: evaluations allowed, a hard cap: every point evaluated counts, the
            Jacobians' and the caller's own (scipy's ``max_nfev`` counts only its search's).
        scale: the residuals' divisors in the objective, (n,) or one for all; None until
            the caller sets :attr:`scale` (the bench fit weighs its residuals by noise it
            learns at the first point), and needed before the objective is.
        on_new: ``on_new(count, z)`` after each new evaluation (count: evaluations so far),
            or None.

    Raises (every method that evaluates): :class:`CapReached` for an evaluation past
    ``max_evals``.
    """

    def __init__(self, residuals: Callable[..., np.ndarray], prior_sd: np.ndarray, max_evals: int, *,
                 scale: float | np.ndarray | None = None, on_new: Callable[[int, np.ndarray], None] | None = None
                 ) -> None:
        self._residuals = residuals
        self.prior_sd = prior_sd
        self.max_evals = max_evals
        self.scale = scale
        self.on_new = on_new
        self.bounds = tuple(math.log(x) for x in FACTOR_RANGE)
        """(lower, upper) bounds of each log factor."""
        self.evaluated: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}
        """:meth:`key` of each point evaluated -> (its log factors, its residuals), in evaluation order."""

    @staticmethod
    def key(z: np.ndarray) -> tuple[float, ...]:
        """The cache key of log factors ``z``: rounded to 12 decimals."""
        return tuple(np.round(z, 12))

    def residuals(self, z: np.ndarray, *args: Any) -> np.ndarray:
        """r(z) (n,): evaluated once per point (``args`` passed to the residual function then),
        then read back."""
        key = self.key(z)
        if key not in self.evaluated:
            if len(self.evaluated) >= self.max_evals:
                raise CapReached
            point = np.array(z, dtype=float)
            self.evaluated[key] = (point, self._residuals(point, *args))
            if self.on_new is not None:
                self.on_new(len(self.evaluated), point)
        return self.evaluated[key][1]

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """dr/dz (n x p) by forward differences over :data:`JAC_STEP` in each log factor
        (backward where the step would pass the upper bound): wide enough to step over the
        jitter a discrete-event prediction has at a fixed seed set (a 0.1 % step measures
        that jitter)."""
        r = self.residuals(z)
        cols = []
        for i in range(len(z)):
            dz = np.zeros_like(z)
            dz[i] = JAC_STEP if z[i] + JAC_STEP <= self.bounds[1] else -JAC_STEP
            cols.append((self.residuals(z + dz) - r) / dz[i])
        return np.column_stack(cols)

    def objective(self, z: np.ndarray) -> np.ndarray:
        """The rows scipy squares and sums (n + k,): r(z) / scale, then z_j / sd_j of the k
        parameters with a prior."""
        prior = (z / self.prior_sd)[np.isfinite(self.prior_sd)]
        return np.r_[self.residuals(z) / self.scale, prior]

    def objective_jac(self, z: np.ndarray) -> np.ndarray:
        """The Jacobian of :meth:`objective` ((n + k) x p)."""
        prior = np.diag(1.0 / self.prior_sd)[np.isfinite(self.prior_sd)]
        return np.r_[self.jacobian(z) / np.reshape(self.scale, (-1, 1)), prior]

    def loss(self, z: np.ndarray) -> float:
        """The objective's sum of squares at ``z``: what the fit lowers, and compares points by."""
        return float(np.sum(self.objective(z) ** 2))

    def solve(self, start: np.ndarray, *, xtol: float, ftol: float) -> tuple[np.ndarray, bool]:
        """scipy ``least_squares`` from ``start`` within :attr:`bounds` (``max_nfev`` the cap).

        ``xtol`` and ``ftol`` are scipy's: the bench fit stops at 1e-3 (each evaluation
        simulates every run, with seed jitter below that), the log-only fit at 1e-4 and
        1e-6 (a deterministic pricing of the logged steps, milliseconds an evaluation).

        Returns:
            (the search's end (p,), whether scipy's own count of evaluations ran out first).
        """
        from scipy.optimize import least_squares

        res = least_squares(self.objective, start, jac=self.objective_jac, bounds=self.bounds,
                            max_nfev=self.max_evals, x_scale=1.0, xtol=xtol, ftol=ftol)
        return res.x, res.status == 0

    def best(self) -> np.ndarray:
        """The point evaluated with the lowest :meth:`loss` (the first of equal ones), whatever
        stage evaluated it (a Jacobian's step included)."""
        return min((z for z, _ in self.evaluated.values()), key=self.loss)

    def covariance(self, z: np.ndarray, groups: Sequence[str] | None = None) -> np.ndarray | None:
        """The log factors' covariance at ``z`` (p x p): :func:`covariance` of the unweighted
        residuals there through their Jacobian (the prior's rows left out), ``groups`` naming
        each residual's metric. None, without evaluating the Jacobian, when there are no more
        residuals than factors."""
        r = self.residuals(z)
        if len(r) <= len(z):
            return None
        return covariance(self.jacobian(z), r, groups)
