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

:func:`scale_host` makes the scaled profile; :class:`sim.engine.SimEngine` applies the
scenario's factor when it builds its cost model, so factor 1 leaves the profile object
itself in place (bit-identical results).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from specsched.sim.strict import STRICT as _STRICT

if TYPE_CHECKING:  # sim.profile is not imported at run time here: sim.config imports this module
    from specsched.sim.profile import Profile

HOST_SECONDS = ("ingest_per_request_s", "schedule_s", "schedule_per_req_s", "launch_s", "launch_per_req_s",
                "launch_tail_s", "launch_tail_per_req_s", "launch_per_extend_s", "launch_per_extend_token_s",
                "launch_per_inject_s", "launch_per_inject_token_s", "process_s", "process_per_req_s",
                "sync_wakeup_s", "extend_idle_lead_s", "slot_expansion_s")
"""``host.*`` fields that are host CPU time (scaled). Not scaled: ``cross_queue_penalty_s``
(a graph replay waiting on a second queue: the GPU's time) and ``reference_work_s`` (the
reference itself)."""

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


def scale_host(profile: Profile, factor: float) -> Profile:
    """``profile`` with every host term multiplied by ``factor`` (:data:`HOST_SECONDS`,
    :data:`GPU_HOST_SECONDS`, the ``host.extend_idle_lead_by_tokens`` table's seconds).

    Args:
        profile: a :class:`sim.profile.Profile`.
        factor: > 0; 1 returns ``profile`` itself (no copy: results bit-identical).

    Returns:
        A :class:`sim.profile.Profile` (a validated copy when ``factor`` != 1).

    Raises:
        ValueError: ``factor`` not finite and > 0.
    """
    if not (factor > 0.0 and factor < float("inf")):
        raise ValueError(f"host speed factor must be finite and > 0, got {factor!r}")
    if factor == 1.0:
        return profile
    data = profile.model_dump(mode="python")
    host, gpu = data["host"], data["gpu"]
    for k in HOST_SECONDS:
        host[k] = host[k] * factor
    if host.get("extend_idle_lead_by_tokens") is not None:
        t = host["extend_idle_lead_by_tokens"]
        t["seconds"] = [s * factor for s in t["seconds"]]
    for k in GPU_HOST_SECONDS:
        if gpu.get(k) is not None:
            gpu[k] = gpu[k] * factor
    return type(profile).model_validate(data)
