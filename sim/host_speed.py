"""The host's speed as a condition of a prediction: ``host.speed_factor`` of a scenario.

A profile's host terms (launch calls, an eager extend's and an eager cycle's kernel issue,
the injection's issue, the slot-expansion time, scheduler work, result processing, the
wake-up after a block) are seconds of CPU work timed on one machine at one moment. The
same Python work does not always take the same time: on rented H200 virtual machines a
fixed pure-Python loop took 1.1 or 2.0 ms of the thread's own CPU time, in periods of
seconds, with no steal, no throttling and a steady reported clock
(docs/measurements/h200-v10.md), and every host-paced figure (eager verify cycles above
``cuda_graph_max_bs``, Python-issued extends, the host_block stall, TTFT at light load)
moved with it by up to 1.8x. The GPU's forward times did not.

``host.speed_factor`` k says "host work takes k x the time the profile holds": every host
term the simulator charges is multiplied by k, every GPU term is left as it is. The
profiler records the speed it ran at (``host.reference_work_s`` of the profile: the thread
CPU time of a fixed reference work, :mod:`runtime.host_reference`) and each measured run
records its own (``host_speed`` in ``summary.json``); their ratio is the factor at which
the run's host ran against the profile's. A user whose machine is busier or slower than
the one profiled (another process on the cores, a smaller CPU, a laptop on battery) sets
the factor from the same reference work timed there.

Per-term conditioning (``host.reference_work_s`` of a scenario). One factor per run is
wrong when the profile measured its host terms at different host levels: the profiler runs
its phases one after another for minutes, and a rented H200 host switched between two
levels 1.8x apart meanwhile (round 11 measured the launch, sync and scheduler terms on the
fast level and the extend terms on the slow one; round 12 the reverse,
docs/measurements/h200-v11.md). A profile from ``specsched profile`` states, per host term,
the reference-work seconds of the phase that measured it (``host.reference_work_by_term``;
for a term taken as a lower quartile or minimum over points, the profile's fast level).
Given the run's own reference-work seconds ``r``, each term ``t`` is multiplied by
``r / ref(t)``, ``ref(t)`` its own reference (the profile's ``host.reference_work_s`` for a
term the map leaves out), times ``host.speed_factor``. A profile without the map is scaled
by ``r / host.reference_work_s`` throughout: the one-factor conditioning.

:func:`scale_host` makes the scaled profile (the one owner of host scaling);
:class:`sim.engine.SimEngine` applies the scenario's factor and reference when it builds
its cost model, so factor 1 without a reference leaves the profile object itself in place
(bit-identical results), as does a reference equal to every term's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from specsched.sim.strict import STRICT as _STRICT

if TYPE_CHECKING:  # sim.profile is not imported at run time here: sim.config imports this module
    from specsched.sim.profile import Profile

HOST_SECONDS = ("ingest_per_request_s", "ingest_per_token_s", "schedule_s", "schedule_per_req_s", "launch_s",
                "launch_per_req_s", "launch_tail_s", "launch_tail_per_req_s", "launch_per_extend_s", "launch_per_extend_token_s",
                "launch_per_inject_s", "launch_per_inject_token_s", "process_s", "process_per_req_s",
                "result_path_s", "result_path_per_req_s", "recv_path_s", "recv_path_per_req_s",
                "sync_wakeup_s", "extend_idle_lead_s", "slot_expansion_s", "inject_prepare_s")
"""``host.*`` fields that are host CPU time (scaled). Not scaled: ``cross_queue_penalty_s``
(a graph replay waiting on a second queue: the GPU's time) and ``reference_work_s`` (the
reference itself)."""

HOST_OPTIONAL_GROUPS = (
    ("decode_schedule_s", "decode_schedule_per_req_s", "decode_process_s", "decode_process_per_req_s"),
    ("decode_launch_s", "decode_launch_per_req_s"),
)
"""The optional ``host.*`` terms of a plain-decoding server, by the profiler phase that
measures them together (runtime/profile_host.py ``host_phase``: the scheduler's;
``stall_phase``: the decode launch's): a profile gives each group whole or not at all."""

HOST_OPTIONAL_SECONDS = tuple(f for group in HOST_OPTIONAL_GROUPS for f in group)
"""``host.*`` fields of host CPU time that a profile may leave out (None: not measured);
scaled where given."""

HOST_EAGER_EXTEND_SECONDS = ("launch_per_extend_eager_s", "launch_per_inject_eager_s")
"""``host.*`` fields a profile may give (None: not given) for an extend (and the drafter's
injection) that runs eagerly where the profile's ``launch_per_extend_s`` /
``launch_per_inject_s`` are the piecewise prefill graph's issue (analytic CUDA profiles:
:meth:`sim.cost_model.CostModel.issue`); host time of the launch path, scaled where given."""

GPU_HOST_SECONDS = ("eager_overhead_s", "eager_draft_overhead_s", "eager_host_issue_s", "eager_spec_issue_s")
"""``gpu.*`` fields that are the host's kernel issue of an eager step (scaled): an eager
decode step or spec cycle above ``cuda_graph_max_bs`` issues its kernels one by one from
Python (SGLang model_executor/runner/eager_runner.py), so its length above the graph
replay is host time (measured as eager minus graph at the same batch)."""


class HostConditions(BaseModel):
    """The ``host`` block of a scenario: the speed of the host the prediction is for."""

    model_config = _STRICT

    speed_factor: float = Field(
        1.0, gt=0.0, le=100.0,
        description="Host work takes this many times the profiled time: every host term of the profile (launch, "
                    "extend and injection issue, slot expansion, scheduler work, result processing, wake-up, eager "
                    "kernel issue) is multiplied by it; GPU times are not. 1: the host of the profile. Set it to a "
                    "run's measured host speed against the profile's (summary.json host_speed.speed_factor) to tell "
                    "'model wrong' from 'host changed' (docs/host-speed.md).")
    launch_speed_factor: float = Field(
        1.0, gt=0.0, le=100.0,
        description="The launch path's own speed, on top of speed_factor and the reference work: the profile's "
                    "launch-call and kernel-issue terms (host.launch_*, decode_launch_*, launch_tail_*, "
                    "launch_per_extend_*, launch_per_inject_*, gpu.eager_* issue) take this many times their time; "
                    "the scheduler's Python, wake-ups and idle leads do not. Torch dispatch and the driver's launch "
                    "do not follow the Python reference work across machines (docs/measurements/h200-v39.md: "
                    "x0.5-0.75 of it on two H200s). 1: as the rest of the host.")
    launch_reference_work_s: float | None = Field(
        None, gt=0.0, le=10.0,
        description="The launch path's speed of the run this prediction is for, as the thread CPU seconds of the "
                    "launch reference work (runtime/host_reference.py LaunchReferenceWork: small torch ops and "
                    "host-to-device copies; a run's summary.json host_speed.launch_reference_work_s). The launch "
                    "path's terms (as launch_speed_factor) are multiplied by this over the profile's own "
                    "(host.launch_reference_work_by_term, else host.launch_reference_work_s) instead of by the "
                    "reference work's ratio, then by speed_factor and launch_speed_factor. Needs a profile with "
                    "host.launch_reference_work_s. None: the launch path follows reference_work_s.")
    reference_work_s: float | None = Field(
        None, gt=0.0, le=10.0,
        description="The host speed of the run this prediction is for, as the thread CPU seconds of the reference "
                    "work (runtime/host_reference.py; a run's summary.json host_speed.reference_work_s). Each host "
                    "term of the profile is multiplied by this over the reference speed at which that term was "
                    "measured (profile host.reference_work_by_term; host.reference_work_s for terms it leaves out), "
                    "then by speed_factor. Needs a profile with host.reference_work_s. None: no conditioning.")


HOST_TABLES = ("extend_idle_lead_by_tokens", "inject_idle_lead_by_tokens", "extend_own_idle_lead_by_tokens",
               "inject_unprepared_idle_lead_by_tokens")
"""``host.*`` tables of host seconds by extend tokens (sim.profile.LeadTable): each
point's seconds scaled as one term."""

SCALED_TERMS = (*(f"host.{k}" for k in HOST_SECONDS), *(f"host.{k}" for k in HOST_OPTIONAL_SECONDS),
                *(f"host.{k}" for k in HOST_EAGER_EXTEND_SECONDS),
                *(f"host.{k}" for k in HOST_TABLES),
                *(f"gpu.{k}" for k in GPU_HOST_SECONDS))
"""Every term :func:`scale_host` scales, by its dotted profile key: the keys allowed in a
profile's ``host.reference_work_by_term``."""


LAUNCH_PATH_TERMS = frozenset({
    *(f"host.{k}" for k in ("launch_s", "launch_per_req_s", "launch_tail_s", "launch_tail_per_req_s",
                            "decode_launch_s", "decode_launch_per_req_s", "launch_per_extend_s",
                            "launch_per_extend_token_s", "launch_per_inject_s", "launch_per_inject_token_s",
                            *HOST_EAGER_EXTEND_SECONDS)),
    *(f"gpu.{k}" for k in GPU_HOST_SECONDS),
})
"""The host terms of the launch path (:data:`SCALED_TERMS` that are a launch call or a
forward's kernel issue: torch dispatch and the driver's launch more than the scheduler's
Python), which ``host.launch_speed_factor`` multiplies on top of the host's speed. Measured:
conditioned on the Python reference work alone, poisson-nospec's no-overlap arm was predicted
+12..+21 % on median TTFT on two H200 machines, and these terms at x0.75 (one machine) and
x0.5-0.6 (the other) of the reference work's factor brought it to +2..+10 %
(docs/measurements/h200-v39.md): the launch path runs at a speed of its own."""


def term_factors(profile: Profile, factor: float = 1.0, reference_s: float | None = None,
                 launch_factor: float = 1.0, launch_reference_s: float | None = None) -> dict[str, float]:
    """The multiplier of each host term (:data:`SCALED_TERMS`) for a run at ``reference_s``.

    Args:
        profile: a :class:`sim.profile.Profile`.
        factor: > 0, finite: ``host.speed_factor``, applied to every term.
        reference_s: the run's reference-work seconds (``host.reference_work_s`` of a
            scenario), or None: every term gets ``factor``.
        launch_factor: > 0, finite: ``host.launch_speed_factor``, applied on top to the
            launch path's terms (:data:`LAUNCH_PATH_TERMS`) only.
        launch_reference_s: the run's launch-reference-work seconds
            (``host.launch_reference_work_s`` of a scenario), or None. Given, a launch-path
            term's ratio is ``launch_reference_s / lref(term)`` (``lref`` from the profile's
            ``host.launch_reference_work_by_term``, else its ``host.launch_reference_work_s``)
            instead of the reference work's.

    Returns:
        dotted term -> ``factor * reference_s / ref(term)`` (times ``launch_factor`` for a
        launch-path term), ``ref(term)`` from the profile's ``host.reference_work_by_term``,
        else its ``host.reference_work_s``.

    Raises:
        ValueError: ``factor``, ``launch_factor``, ``reference_s`` or ``launch_reference_s``
            not finite and > 0, or a run reference given for a profile without its own
            (``host.reference_work_s``, ``host.launch_reference_work_s``: nothing to compare
            it with).
    """
    if not (factor > 0.0 and factor < float("inf")):
        raise ValueError(f"host speed factor must be finite and > 0, got {factor!r}")
    if not (launch_factor > 0.0 and launch_factor < float("inf")):
        raise ValueError(f"host launch speed factor must be finite and > 0, got {launch_factor!r}")
    k = _python_factors(profile, factor, reference_s)
    if launch_reference_s is not None:
        k.update(_launch_factors(profile, factor, launch_reference_s))
    if launch_factor != 1.0:
        k = {t: v * launch_factor if t in LAUNCH_PATH_TERMS else v for t, v in k.items()}
    return k


def _launch_factors(profile: Profile, factor: float, launch_reference_s: float) -> dict[str, float]:
    """The launch path's terms conditioned on the run's launch reference work."""
    return _referenced(LAUNCH_PATH_TERMS, factor, launch_reference_s, profile.host.launch_reference_work_s,
                       profile.host.launch_reference_work_by_term, "host launch reference work seconds",
                       "the profile records no launch-path speed (no host.launch_reference_work_s of its own: "
                       "profiles made before the launch reference work), so a run's launch reference work cannot "
                       "condition it; use host.launch_speed_factor")


def _python_factors(profile: Profile, factor: float, reference_s: float | None) -> dict[str, float]:
    """:func:`term_factors` before the launch path's own factor."""
    if reference_s is None:
        return dict.fromkeys(SCALED_TERMS, factor)
    return _referenced(SCALED_TERMS, factor, reference_s, profile.host.reference_work_s,
                       profile.host.reference_work_by_term, "host reference work seconds",
                       "the profile records no host speed (no host.reference_work_s of its own), so a run's "
                       "reference work cannot condition it; use host.speed_factor")


def _referenced(terms, factor: float, run_s: float, whole: float | None, by_term: dict[str, float] | None,
                what: str, missing: str) -> dict[str, float]:
    """Each of ``terms`` at ``factor * run_s / ref(term)``, ``ref`` from ``by_term`` else
    ``whole`` (a profile's reference work and its per-term map, Python or launch path).

    Raises:
        ValueError: ``run_s`` not finite and > 0 (named ``what``), or the profile has no
            ``whole`` (``missing``)."""
    if not (run_s > 0.0 and run_s < float("inf")):
        raise ValueError(f"{what} must be finite and > 0, got {run_s!r}")
    if not whole:
        raise ValueError(missing)
    by_term = by_term or {}
    return {t: factor * (run_s / by_term.get(t, whole)) for t in terms}


def scale_host(profile: Profile, factor: float = 1.0, reference_s: float | None = None,
               launch_factor: float = 1.0, launch_reference_s: float | None = None) -> Profile:
    """``profile`` with every host term multiplied by its factor of :func:`term_factors`
    (:data:`HOST_SECONDS`, the given :data:`HOST_OPTIONAL_SECONDS`, :data:`GPU_HOST_SECONDS`,
    the seconds of the :data:`HOST_TABLES`).

    Args:
        profile: a :class:`sim.profile.Profile`.
        factor: > 0 (``host.speed_factor``).
        reference_s: the run's reference-work seconds (``host.reference_work_s`` of a
            scenario) or None. When every term's multiplier is exactly 1 (factor 1 and no
            reference, or a reference equal to every term's own) ``profile`` itself is
            returned (no copy: results bit-identical).
        launch_factor: > 0 (``host.launch_speed_factor``): the launch path's terms only.
        launch_reference_s: the run's launch-reference-work seconds
            (``host.launch_reference_work_s`` of a scenario) or None: the launch path's terms
            at it over their own.

    Returns:
        A :class:`sim.profile.Profile` (a validated copy when some multiplier is not 1).

    Raises:
        ValueError: as :func:`term_factors`.
    """
    k = term_factors(profile, factor, reference_s, launch_factor, launch_reference_s)
    if all(v == 1.0 for v in k.values()):
        return profile
    data = profile.model_dump(mode="python")
    host, gpu = data["host"], data["gpu"]
    for f in HOST_SECONDS:
        host[f] = host[f] * k[f"host.{f}"]
    for f in (*HOST_OPTIONAL_SECONDS, *HOST_EAGER_EXTEND_SECONDS):
        if host.get(f) is not None:
            host[f] = host[f] * k[f"host.{f}"]
    for f in HOST_TABLES:
        if host.get(f) is not None:
            host[f]["seconds"] = [s * k[f"host.{f}"] for s in host[f]["seconds"]]
    for f in GPU_HOST_SECONDS:
        if gpu.get(f) is not None:
            gpu[f] = gpu[f] * k[f"gpu.{f}"]
    return type(profile).model_validate(data)
