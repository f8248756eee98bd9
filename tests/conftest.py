"""Shared fixtures: a small synthetic profile and scenario builders (no reference data)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import assume
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import Scenario
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.profile import Profile
from specsched.sim.request import Req
from specsched.sim.scheduler import Scheduler, UnschedulableRequest

ROOT = Path(__file__).resolve().parent.parent

TINY_SPEC_SCENARIO = """name: t
profile: h200-1b
server: {max_running_requests: 2, chunked_prefill_size: 64, max_prefill_tokens: 64,
         speculative_algorithm: dspark, speculative_num_draft_tokens: 4, max_total_num_tokens: 5000}
acceptance: {mean_accept_length: 2.2}
workload: {kind: closed_loop, concurrency: 2, num_requests: 6, input_len: {kind: fixed, value: 48},
           output_len: {kind: fixed, value: 12}}
"""
"""A six-request DSpark closed loop small enough for the runtime's CPU engine with the tiny
preset (the launch-call benchmarks' engine runs)."""


def load_benchmark(name: str, module_name: str | None = None) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (not a package) as a fresh module, registered in
    ``sys.modules`` under ``module_name`` (default ``specsched_<name>``): dataclasses look
    their module up there."""
    spec = importlib.util.spec_from_file_location(module_name or f"specsched_{name}",
                                                  ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def tiny_profile(**host) -> Profile:
    """A made-up profile: 1 ms per 1K extend tokens, verify/decode 2 ms + 0.1 ms per request,
    a chain drafter's step 0.2 ms + 2 us per token."""
    h = dict(ingest_per_request_s=0.0, schedule_s=1e-4, launch_s=2e-4, process_s=1e-4,
             sync_wakeup_s=5e-5, cross_queue_penalty_s=1e-3)
    h.update(host)
    return Profile.model_validate({
        "name": "tiny", "device": "synthetic",
        "gpu": {
            "extend": {"x": [1, 1000], "seconds": [[1e-6], [1e-3]]},
            "draft_inject_per_token_s": 1e-7,
            "verify": {"x": [1, 100], "seconds": [[2e-3], [12e-3]]},
            "decode": {"x": [1, 100], "seconds": [[1e-3], [6e-3]]},
            "draft_step": {"x": [1, 100], "seconds": [[2e-4], [4e-4]]},
        },
        "host": h,
    })


def make_scenario(server: dict | None = None, workload: dict | None = None, acceptance: dict | None = None, seed: int = 1) -> Scenario:
    """A scenario dict validated into a Scenario (defaults: DSpark window 4, burst of 8). A chain
    drafter given its window without ``speculative_num_steps`` gets window - 1 steps, the chain
    of that window (SGLang refuses the window alone: arg_groups/speculative_hook.py
    ``_handle_eagle_family``)."""
    srv = {"max_running_requests": 16, "max_total_num_tokens": 200_000, "chunked_prefill_size": 2048,
           "max_prefill_tokens": 4096, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}
    srv.update(server or {})
    if (str(srv["speculative_algorithm"]).lower() in ("eagle", "eagle3", "nextn", "mtp", "standalone")
            and "speculative_num_steps" not in srv and isinstance(srv.get("speculative_num_draft_tokens"), int)):
        srv["speculative_num_steps"] = srv["speculative_num_draft_tokens"] - 1
    wl = {"kind": "burst", "num_requests": 8, "input_len": {"kind": "fixed", "value": 500},
          "output_len": {"kind": "fixed", "value": 40}}
    wl.update(workload or {})
    acc = {"mean_accept_length": 2.5, "request_spread": 0.3}
    acc.update(acceptance or {})
    return Scenario.model_validate({"name": "t", "profile": "tiny", "seed": seed, "server": srv,
                                    "workload": wl, "acceptance": acc})



def tiny_runtime_engine():
    """A runtime engine (tiny model, CPU, no warm-up) on the smallest burst that runs every
    launch kind: 3 requests of 40 prompt tokens (extends chunked at 64 tokens), 12 output
    tokens, DSpark window 4 (injections and verifies)."""
    from specsched.runtime.engine import RuntimeEngine

    sc = make_scenario({"max_running_requests": 4, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
                        "speculative_num_draft_tokens": 4, "max_total_num_tokens": 5000},
                       {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": 40},
                        "output_len": {"kind": "fixed", "value": 12}})
    return RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)


def window_acceptance(server: dict) -> dict:
    """The property tests' acceptance: mean accept length 1 + 0.6 x (window - 1), so a wider
    ``speculative_num_draft_tokens`` window accepts more tokens per verify."""
    return {"mean_accept_length": 1 + 0.6 * (server["speculative_num_draft_tokens"] - 1)}


def arrival_workloads(*, burst: int = 30, requests: int = 30, concurrency: int = 8, min_rate: float = 2.0):
    """The property tests' workloads, one of each arrival pattern: a burst of 1..``burst``
    requests, a closed loop of 1..``requests`` at 1..``concurrency`` clients, and Poisson
    arrivals of 1..``requests`` at ``min_rate``..500 req/s with or without a max_concurrency of
    1..8 (lengths left to the test: :func:`uniform_lengths`)."""
    return st.one_of(
        st.fixed_dictionaries({"kind": st.just("burst"), "num_requests": st.integers(1, burst)}),
        st.fixed_dictionaries({"kind": st.just("closed_loop"), "num_requests": st.integers(1, requests),
                               "concurrency": st.integers(1, concurrency)}),
        st.fixed_dictionaries({"kind": st.just("poisson"), "num_requests": st.integers(1, requests),
                               "request_rate": st.floats(min_rate, 500),
                               "max_concurrency": st.one_of(st.none(), st.integers(1, 8))}),
    )


def uniform_lengths(workload: dict, inp: int, out: int, input_ratio: float = 0.5) -> dict:
    """``workload`` with uniform prompt lengths around ``inp`` (range_ratio ``input_ratio``)
    and output lengths around ``out`` (range_ratio 0.3)."""
    return dict(workload, input_len={"kind": "uniform", "value": inp, "range_ratio": input_ratio},
                output_len={"kind": "uniform", "value": out, "range_ratio": 0.3})

@pytest.fixture
def profile() -> Profile:
    return tiny_profile()


def overlap_pass(sched, device, in_flight):
    """One pass of the overlap loop without a clock (sim/loop.py's order): schedule and
    launch the next plan (``device`` commits it), then process the plan in flight.

    Returns (the new in-flight (plan, StepOutput) or None, the deliveries or None)."""
    plan = sched.schedule()
    new = (plan, device.step(plan)) if plan is not None else None
    deliveries = sched.process_result(*in_flight) if in_flight is not None else None
    return new, deliveries


def clockless_scheduler(sc: Scenario, lens, arrive, seed: int):
    """A Scheduler and DeviceTokens for ``sc``, and the requests still to arrive: request i
    has (input, output) ``lens[i]`` and arrives at pass ``arrive[i]``.

    Returns (scheduler, device, pending: [(pass, Req)] sorted by pass)."""
    srv = sc.server
    sched = Scheduler(srv, make_policy(srv), seed)
    device = DeviceTokens(AcceptanceModel(sc.acceptance, srv.spec_window, seed))
    pending = sorted(((t, Req(i, a, b)) for i, ((a, b), t) in enumerate(zip(lens, arrive, strict=False))),
                     key=lambda x: x[0])
    return sched, device, pending


def assert_whole_pages(sched, page: int, radix: bool) -> None:
    """INV-2 in pages after a pass: the pool's use is within capacity and whole pages, every
    request holds whole pages, and with the radix cache off each holds exactly
    ceil_page(kv_len) (SGLang's paged allocator hands out and frees whole pages:
    mem_cache/allocator/paged.py)."""
    kv = sched.kv
    assert 0 <= kv.used <= kv.capacity
    assert kv.used % page == 0 and kv.tree % page == 0
    for r in sched.reqs.values():
        assert r.kv_allocated % page == 0
        if r.kv_len and not radix:
            assert r.kv_allocated == -(-r.kv_len // page) * page


def arrive_and_pass(sched, device, pending, p: int, in_flight):
    """Pass ``p`` of a clockless run: add the requests due by then, then one
    :func:`overlap_pass`. A request the server can never schedule makes hypothesis reject
    the example.

    Returns (done: nothing runs, waits or is still to arrive; the new in-flight step)."""
    while pending and pending[0][0] <= p:
        try:
            sched.add_request(pending.pop(0)[1])
        except UnschedulableRequest:
            assume(False)
    if in_flight is None and not sched.has_work and not pending:
        return True, None
    try:
        in_flight, _ = overlap_pass(sched, device, in_flight)
    except UnschedulableRequest:
        assume(False)
    return False, in_flight


def profile_with_faked_idle_lead(monkeypatch, tmp_path, fake, extend_tokens: str):
    """``specsched profile --device cpu --preset tiny`` with ``GpuPhases._idle_lead`` replaced
    by ``fake`` (the GPU's idle-lead medians, which a CPU cannot measure), at ``extend_tokens``
    (a comma list). Returns the written profile's path (the command must succeed)."""
    import argparse

    from specsched.runtime.profile_gpu import GpuPhases
    from specsched.runtime.profiler import register_profile_command

    monkeypatch.setattr(GpuPhases, "_idle_lead", fake)
    ap = argparse.ArgumentParser(prog="specsched")
    register_profile_command(ap.add_subparsers(dest="command", required=True))
    out = tmp_path / "p.yaml"
    a = ap.parse_args(["profile", "--device", "cpu", "--preset", "tiny", "--window", "3", "--max-bs", "2",
                       "--contexts", "64", "--extend-tokens", extend_tokens, "--graph-max-bs", "2", "--repeats", "3",
                       "--no-progress", "--out", str(out)])
    assert a.func(a) == 0
    return out


@pytest.fixture
def deadline():
    """Fail, rather than hang the suite, where a run never ends (60 s, SIGALRM)."""
    import signal

    def _expired(*_):
        raise TimeoutError("the run did not end within 60 s")
    old = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
