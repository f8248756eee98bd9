"""The loop's operations and the sync modes, as the SimPy engine executes them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.admission import NoDelay
from specsched.sim.config import ServerArgs
from specsched.sim.engine import SimEngine
from specsched.sim.loop import scheduler_loop
from specsched.sim.ops import HostBlock, Launch, Recv, StreamWait
from specsched.sim.request import Req
from specsched.sim.scheduler import Scheduler

from tests.conftest import make_scenario, tiny_profile


def ops_of_one_spec_iteration(sync_mode: str, slot_sync: bool = True) -> list[type]:
    server = ServerArgs(speculative_algorithm="dspark", speculative_num_draft_tokens=4, sync_mode=sync_mode,
                        prefill_slot_expansion_sync=slot_sync)
    s = Scheduler(server, NoDelay())
    loop = scheduler_loop(s, server)
    kinds, result = [], None
    op = next(loop)
    assert isinstance(op, Recv)
    op = loop.send([Req(0, 100, 50)])
    # iterate: prefill, then the first verify
    for _ in range(14):
        kinds.append(type(op))
        if isinstance(op, Launch):
            result = object()
        elif type(op).__name__ == "Results":
            from specsched.sim.plan import StepOutput
            result = StepOutput(np.ones(1, dtype=np.int64))
        elif isinstance(op, Recv):
            result = []
        else:
            result = None
        op = loop.send(result)
    return kinds


def test_host_block_mode_blocks_before_the_verify_launch():
    kinds = ops_of_one_spec_iteration("host_block")
    # prefill: launch, slot-expansion block, inject launch; then the verify waits by blocking
    assert kinds.count(HostBlock) == 2 and StreamWait not in kinds


@pytest.mark.parametrize("mode", ["stream_wait", "cross_queue_wait"])
def test_queued_modes_never_block_for_publish(mode):
    kinds = ops_of_one_spec_iteration(mode)
    assert kinds.count(HostBlock) == 1 and StreamWait in kinds  # only the slot expansion


def test_output_size_removes_the_slot_expansion_block():
    kinds = ops_of_one_spec_iteration("stream_wait", slot_sync=False)
    assert HostBlock not in kinds


def verify_walls(sync_mode: str, **host) -> tuple[float, float]:
    prof = tiny_profile(**host)
    sc = make_scenario({"sync_mode": sync_mode}, {"kind": "closed_loop", "concurrency": 1, "num_requests": 2,
                                                  "output_len": {"kind": "fixed", "value": 200}})
    res = SimEngine(sc, prof).run()
    v = res.steps[(res.steps["mode"] == "verify") & (res.steps["batch_size"] == 1)]
    gpu = float((v["gpu_end_s"] - v["gpu_start_s"]).median())
    return 1000.0 / res.summary["verify_cycles_per_s"], gpu * 1000


def test_host_block_costs_gpu_plus_wakeup_plus_launch():
    wall_block, gpu = verify_walls("host_block")
    wall_queued, gpu2 = verify_walls("stream_wait")
    # tiny profile: verify at bs 1 = 2 ms; wake 0.05 ms + launch 0.2 ms
    assert gpu == pytest.approx(2.0, rel=1e-6) and gpu2 == pytest.approx(2.0, rel=1e-6)
    assert wall_block == pytest.approx(2.0 + 0.05 + 0.2, rel=1e-6)
    assert wall_queued == pytest.approx(2.0, rel=1e-6)


def test_queued_wait_costs_max_of_gpu_and_host_when_host_is_slower():
    # host work per iteration 3 ms > 2 ms GPU: the queued wait runs at the host's pace
    wall_queued, _ = verify_walls("stream_wait", schedule_s=1e-3, launch_s=1e-3, process_s=1e-3)
    wall_block, _ = verify_walls("host_block", schedule_s=1e-3, launch_s=1e-3, process_s=1e-3)
    assert wall_queued == pytest.approx(3.0, rel=1e-6)
    # blocking: process + schedule (2 ms) overlap the 2 ms forward, which has ended when the
    # host arrives (no wake-up); the 1 ms launch after the wait leaves the GPU idle
    assert wall_block == pytest.approx(2.0 + 1.0, rel=1e-6)


def test_cross_queue_penalty_applies_to_every_verify():
    wall, gpu = verify_walls("cross_queue_wait")
    assert gpu == pytest.approx(2.0 + 1.0, rel=1e-6)  # penalty 1 ms per graph step
    assert wall == pytest.approx(3.0, rel=1e-6)


def _prefill_gaps(slot_sync: bool, sync_mode: str = "host_block", **host) -> tuple[np.ndarray, np.ndarray, float]:
    """Per request: the GPU idle gap between its extend's end and its injection's start (ms),
    its TTFT (ms), and the run's host_blocked_s (s)."""
    sc = make_scenario({"sync_mode": sync_mode, "prefill_slot_expansion_sync": slot_sync},
                       {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
                        "output_len": {"kind": "fixed", "value": 30}})
    res = SimEngine(sc, tiny_profile(**host)).run()
    s = res.steps.reset_index(drop=True)
    inj = s.index[s["part"] == "inject"]
    gaps = (s.loc[inj, "gpu_start_s"].to_numpy() - s.loc[inj - 1, "gpu_end_s"].to_numpy()) * 1e3
    return gaps, res.requests["ttft_s"].to_numpy() * 1e3, res.summary["host_blocked_s"]


@pytest.mark.parametrize("sync_mode", ["host_block", "stream_wait"])
@pytest.mark.parametrize("extra_ms", [0.3, 1.4])
def test_slot_expansion_holds_the_host_before_the_injection(sync_mode, extra_ms):
    """host.slot_expansion_s: after the slot-expansion block (extend end + wake-up) the host
    works this long with the GPU idle before the injection launches (round 7 on an H200: the
    loop's GPU idled 0.74-1.6 ms there, the simulator 0); every first token comes that much
    later, and the runtime counts it as blocked (the whole prepare_inject(sync=True) call)."""
    g0, t0, b0 = _prefill_gaps(True, sync_mode)
    g1, t1, b1 = _prefill_gaps(True, sync_mode, slot_expansion_s=extra_ms / 1e3)
    assert g0 == pytest.approx([0.05] * 3, abs=1e-9)  # the wake-up alone
    assert g1 == pytest.approx(g0 + extra_ms, abs=1e-9)
    assert t1 == pytest.approx(t0 + extra_ms, abs=1e-9)
    assert b1 == pytest.approx(b0 + 3 * extra_ms / 1e3, abs=1e-12)


def test_slot_expansion_costs_nothing_with_output_size():
    """A build that passes output_size (SGLang 0.5.23) never blocks there: the profile's
    slot_expansion_s does not apply."""
    g0, t0, _ = _prefill_gaps(False)
    g1, t1, _ = _prefill_gaps(False, slot_expansion_s=2e-3)
    assert np.array_equal(g0, g1) and np.array_equal(t0, t1)


@settings(max_examples=25, deadline=None)
@given(x_ms=st.floats(0.0, 3.0), sync_mode=st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
       n=st.integers(1, 6), concurrency=st.integers(1, 3), seed=st.integers(1, 50))
def test_every_injection_trails_its_extend_by_the_slot_expansion(x_ms, sync_mode, n, concurrency, seed):
    """Invariant: with the slot-expansion sync, every injection starts no earlier than its
    extend's end + wake-up + host.slot_expansion_s (the host is still expanding slots);
    without the sync the field changes nothing at all."""
    wl = {"kind": "closed_loop", "concurrency": concurrency, "num_requests": n,
          "output_len": {"kind": "fixed", "value": 12}}
    prof = tiny_profile(slot_expansion_s=x_ms / 1e3)
    res = SimEngine(make_scenario({"sync_mode": sync_mode, "prefill_slot_expansion_sync": True}, wl, seed=seed),
                    prof).run()
    s = res.steps.reset_index(drop=True)
    inj = s.index[s["part"] == "inject"]
    assert len(inj) > 0
    gaps = s.loc[inj, "gpu_start_s"].to_numpy() - s.loc[inj - 1, "gpu_end_s"].to_numpy()
    assert (gaps >= 5e-5 + x_ms / 1e3 - 1e-12).all()
    off = make_scenario({"sync_mode": sync_mode, "prefill_slot_expansion_sync": False}, wl, seed=seed)
    a, b = SimEngine(off, prof).run(), SimEngine(off, tiny_profile()).run()
    assert a.steps.equals(b.steps) and a.requests.equals(b.requests)


def _op_trace(server: ServerArgs, reqs: list[Req], iterations: int) -> list[tuple[str, str]]:
    """(op type, reason/part) of the first ``iterations`` loop operations, each forward's
    results one committed token per row."""
    from specsched.sim.plan import StepOutput

    s = Scheduler(server, NoDelay())
    loop = scheduler_loop(s, server)
    op, out, handles = next(loop), [], {}
    op = loop.send(reqs)
    for _ in range(iterations):
        tag = getattr(op, "reason", getattr(op, "part", ""))
        out.append((type(op).__name__, tag))
        result = None
        if isinstance(op, Launch):
            result = object()
            handles[id(result)] = op.plan
        elif type(op).__name__ == "Results":
            result = StepOutput(np.ones(handles[id(op.handle)].batch_size, dtype=np.int64))
        elif isinstance(op, Recv):
            result = []
        op = loop.send(result)
    return out


def test_a_prefill_only_batch_does_not_wait_for_the_publish():
    """sglang 0.5.20 / 0.5.23 ``FutureMap.resolve_seq_lens_cpu`` returns at once for a batch
    without a speculative future (a prefill of new or chunked requests only): the second
    chunk of a prompt is launched with no publish wait, while the first chunk still runs;
    the verify that follows the last chunk waits. (The loop used to wait before every
    speculative launch.)"""
    server = ServerArgs(speculative_algorithm="dspark", speculative_num_draft_tokens=4, sync_mode="host_block",
                        chunked_prefill_size=1024, max_prefill_tokens=1024, prefill_slot_expansion_sync=False)
    trace = _op_trace(server, [Req(0, 1500, 50)], 30)
    launches = [i for i, (t, part) in enumerate(trace) if t == "Launch" and part == "main"]
    assert len(launches) >= 3  # chunk 1, chunk 2, first verify
    waits = [i for i, (t, why) in enumerate(trace) if t == "HostBlock" and why == "publish"]
    assert not [w for w in waits if w < launches[1]]          # chunk 2: no wait
    assert [w for w in waits if launches[1] < w < launches[2]]  # the verify: waits


def _first_verify_after_prefill(**server) -> tuple[float, float, float]:
    """(extend end, injection end, first verify's GPU start) in ms of a lone 1000-token
    DSpark prompt under host_block (tiny profile: extend 1 ms, injection 0.1 ms, wake-up
    0.05 ms, launch 0.2 ms)."""
    sc = make_scenario({"sync_mode": "host_block", **server},
                       {"kind": "closed_loop", "concurrency": 1, "num_requests": 1,
                        "input_len": {"kind": "fixed", "value": 1000}, "output_len": {"kind": "fixed", "value": 20}})
    s = SimEngine(sc, tiny_profile()).run().steps.reset_index(drop=True)
    inj = int(s.index[s["part"] == "inject"][0])
    ver = int(s.index[(s["mode"] == "verify") & (s.index > inj)][0])
    return (s.loc[inj - 1, "gpu_end_s"] * 1e3, s.loc[inj, "gpu_end_s"] * 1e3, s.loc[ver, "gpu_start_s"] * 1e3)


@pytest.mark.parametrize("slot_sync", [False, True])
def test_the_publish_after_a_dspark_prefill_is_the_target_forward(slot_sync):
    """dspark_worker_v2.py ``_forward_prefill`` records publish_ready (``on_publish``) after
    the target forward and before the draft-KV injection: the next verify's host wakes at
    the extend's end, not the injection's, and launches behind the injection (here the wake
    and launch outlast the 0.1 ms injection, so the verify starts 0.25 ms after the extend;
    the old loop waited for the injection: 0.35 ms). With the slot-expansion sync the host
    is busy after the extend anyway (inject launch, schedule): the verify starts when that
    work and the launch are done (the same in both loops: the gap the sync leaves is the
    host work after the drain, hidden behind the injection where that is longer)."""
    ext_end, inj_end, ver = _first_verify_after_prefill(prefill_slot_expansion_sync=slot_sync)
    if not slot_sync:
        assert inj_end == pytest.approx(ext_end + 0.1, abs=1e-9)
        assert ver == pytest.approx(ext_end + 0.05 + 0.2, abs=1e-9)
    else:
        # wake 0.05, then the injection is queued (0.1 ms on the GPU), schedule 0.1, launch
        # 0.2: the publish (the extend's end) is long past, no second wake-up
        assert ver == pytest.approx(ext_end + 0.05 + 0.1 + 0.2, abs=1e-9)


def _inject_spans(slot_sync: bool, sync_mode: str = "host_block", **host) -> tuple[np.ndarray, np.ndarray]:
    """Per request: its injection's GPU span (ms) and its TTFT (ms)."""
    sc = make_scenario({"sync_mode": sync_mode, "prefill_slot_expansion_sync": slot_sync},
                       {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
                        "output_len": {"kind": "fixed", "value": 30}})
    res = SimEngine(sc, tiny_profile(**host)).run()
    s = res.steps
    inj = s[s["part"] == "inject"]
    return (inj["gpu_end_s"] - inj["gpu_start_s"]).to_numpy() * 1e3, res.requests["ttft_s"].to_numpy() * 1e3


@pytest.mark.parametrize("sync_mode", ["host_block", "stream_wait"])
def test_injection_prepared_in_the_slot_expansion_block_is_not_prepared_again(sync_mode):
    """host.inject_prepare_s: the loop prepares the injection inside the slot-expansion block
    (runtime/engine.py _host_block keeps the prepare_inject(sync=True) batch; the inject
    launch reuses it), so that launch issues host.launch_per_inject_s less the preparation,
    which slot_expansion_s already holds (H200 round 18, sharegpt-lengths: the loop's inject
    launch call 0.94 ms after the block, 1.60 ms without it). An issue-bound injection
    (10 ms issue) ends the preparation sooner; every first token comes that much sooner."""
    host = {"launch_per_inject_s": 10e-3, "slot_expansion_s": 1e-3}
    s0, t0 = _inject_spans(True, sync_mode, **host)
    s1, t1 = _inject_spans(True, sync_mode, inject_prepare_s=0.8e-3, **host)
    assert s0 == pytest.approx([10.0] * 3, abs=1e-9)
    assert s1 == pytest.approx(s0 - 0.8, abs=1e-9)
    assert t1 == pytest.approx(t0 - 0.8, abs=1e-9)


def test_injection_without_the_block_pays_its_preparation():
    """Without the slot-expansion sync the inject launch prepares the batch itself
    (prepare_inject(sync=False) inside the launch): inject_prepare_s changes nothing."""
    host = {"launch_per_inject_s": 10e-3}
    s0, t0 = _inject_spans(False, **host)
    s1, t1 = _inject_spans(False, inject_prepare_s=0.8e-3, **host)
    assert np.array_equal(s0, s1) and np.array_equal(t0, t1)


@settings(max_examples=20, deadline=None)
@given(prep_ms=st.floats(0.0, 4.0), issue_ms=st.floats(0.0, 3.0), n=st.integers(1, 5), seed=st.integers(1, 50))
def test_inject_issue_after_a_block_is_the_launch_less_the_preparation_never_negative(prep_ms, issue_ms, n, seed):
    """Invariant: after a slot-expansion block the injection's issue is
    max(0, launch_per_inject_s - inject_prepare_s): no injection ends earlier than its launch's
    device work allows, and a preparation longer than the whole launch takes nothing more."""
    wl = {"kind": "closed_loop", "concurrency": 2, "num_requests": n, "output_len": {"kind": "fixed", "value": 10}}
    sc = make_scenario({"sync_mode": "host_block", "prefill_slot_expansion_sync": True}, wl, seed=seed)
    a = SimEngine(sc, tiny_profile(launch_per_inject_s=issue_ms / 1e3, inject_prepare_s=prep_ms / 1e3)).run()
    b = SimEngine(sc, tiny_profile(launch_per_inject_s=max(0.0, issue_ms - prep_ms) / 1e3)).run()
    assert np.allclose(a.steps["gpu_end_s"], b.steps["gpu_end_s"], rtol=0, atol=1e-12)
    assert (a.requests["ttft_s"].to_numpy() > 0).all()


@settings(max_examples=40, deadline=None)
@given(overlap=st.booleans(), spec=st.sampled_from(["none", "dspark"]),
       sync_mode=st.sampled_from(["host_block", "stream_wait", "cross_queue_wait"]),
       lens=st.lists(st.tuples(st.integers(1, 1500), st.integers(1, 12)), min_size=1, max_size=5),
       chunk=st.sampled_from([-1, 512]), iterations=st.integers(20, 120))
def test_reused_ops_hold_their_pass_fields_when_issued(overlap, spec, sync_mode, lens, chunk, iterations):
    """The loop reuses one object per op (sim/loop.py) and sets its fields before each
    yield: read when issued (as every executor reads them), each op holds its own pass's
    values: a pass's schedule and launch host work and its launches carry the plan the
    scheduler just built, a Results a handle the executor gave one of that plan's launches
    (the last pass's under overlap), the process host work after it that same plan; a
    Deliver the deliveries of the results just processed."""
    from specsched.sim.ops import Deliver, HostWork, Results
    from specsched.sim.plan import StepOutput

    server = ServerArgs(enable_overlap_schedule=overlap, speculative_algorithm=spec,
                        speculative_num_draft_tokens=4 if spec != "none" else None, sync_mode=sync_mode,
                        chunked_prefill_size=chunk, max_prefill_tokens=2048)
    s = Scheduler(server, NoDelay())
    loop = scheduler_loop(s, server)
    assert type(next(loop)) is Recv
    op = loop.send([Req(i, p, o) for i, (p, o) in enumerate(lens)])
    plan_of: dict[int, object] = {}   # id(handle) -> the plan launched with it
    handles = []                      # every handle given (their ids stay theirs)
    scheduled = results_plan = None
    seen: dict[type, set[int]] = {}
    for _ in range(iterations):
        seen.setdefault(type(op), set()).add(id(op))
        result = None
        if type(op) is HostWork:
            if op.kind == "schedule":
                scheduled = op.plan
            elif op.kind == "launch":
                assert op.plan is scheduled
            else:
                assert op.plan is results_plan
        elif type(op) is Launch:
            assert op.plan is scheduled
            result = object()
            handles.append(result)
            plan_of[id(result)] = op.plan   # an injection's handle stands for its plan's results
        elif type(op) is Results:
            results_plan = plan_of[id(op.handle)]
            result = StepOutput(np.ones(results_plan.batch_size, dtype=np.int64))
        elif type(op) is Deliver:
            assert op.deliveries
        elif type(op) is Recv:
            result = []
        elif type(op).__name__ == "WaitForWork":
            break
        op = loop.send(result)
    # one object per op the loop issues every iteration (and per kind of host work)
    assert len(seen.get(Results, ())) <= 1 and len(seen.get(HostWork, ())) <= 3
