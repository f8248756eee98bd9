"""specsched.runtime.device (streams, event ring, waits, copies, graphs) and runtime.sync_checker.

CPU by default; the Device tests also run on CUDA/HIP when a GPU is visible.
"""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.device import (  # noqa: E402
    Device,
    EventRing,
    EventRingExhausted,
    GraphCache,
    NullEvent,
    NullStream,
    StaleEventError,
    default_bs_buckets,
    detect_backend,
    pick_bucket,
)
from specsched.runtime.sync_checker import HostSyncError, SyncChecker  # noqa: E402

# every HIP branch also runs on CPU (cpu-as-hip) and, where a GPU is present, on it (cuda-as-hip)
DEVICES = ["cpu", "cpu-as-hip"] + (["cuda", "cuda-as-hip"] if torch.cuda.is_available() else [])


class FakeEvent:
    """A test double for a GPU event: completes only when the test says so."""

    def __init__(self) -> None:
        self.done = True
        self.records = 0

    def record(self, stream=None) -> None:  # noqa: ANN001
        self.done = False
        self.records += 1

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True


def fake_ring(size: int) -> tuple[EventRing, list[FakeEvent]]:
    made: list[FakeEvent] = []

    def make() -> FakeEvent:
        made.append(FakeEvent())
        return made[-1]

    return EventRing(size, make), made


def record(ring: EventRing, stream: str):
    ev = ring.acquire(stream)
    ev.event.record(None)
    return ev


# ------------------------------------------------------------------- backend, streams
def test_detect_backend_cpu_and_unsupported() -> None:
    assert detect_backend("cpu") == "cpu"
    with pytest.raises(ValueError, match="unsupported device type"):
        detect_backend("meta")


def test_cpu_device_has_three_null_streams_and_float32() -> None:
    dev = Device("cpu", backend="cpu")  # the native backend even when SPECSCHED_BACKEND forces hip
    assert dev.backend == "cpu" and not dev.is_gpu and dev.dtype == torch.float32
    for name in ("schedule", "forward", "copy"):
        assert isinstance(dev.stream(name), NullStream)
    assert dev.stream("copy") is not dev.stream("forward")
    with pytest.raises(KeyError, match="created once"):
        dev.stream("extra")
    assert dev.sglang_publish_wait == "stream_wait"
    assert dev.describe().startswith("cpu")


@pytest.mark.parametrize("name", [d for d in DEVICES if d.endswith("-as-hip")])
def test_hip_guard_checks_what_a_wait_does_not_its_name(name: str) -> None:
    dev = Device(name)
    assert dev.is_hip and dev.forced and dev.label == f"{name.split('-')[0]}-as-hip"
    assert dev.sglang_publish_wait == "host_block"
    with pytest.raises(ValueError, match="26646"):
        dev.wait_stream("schedule", "forward")
    # the same barrier spelled as a queued wait on the forward stream's event: refused too
    done = dev.record("forward")
    with pytest.raises(ValueError, match="26646"):
        dev.stream_wait("schedule", done)
    ev = dev.wait_stream("forward", "schedule")  # SGLang run_batch's direction is fine
    assert ev.stream == "schedule"
    dev.stream_wait("forward", done)  # a wait of the forward stream itself is fine
    # an arm that measures the barrier on purpose may issue it
    dev.allow_schedule_barrier = True
    dev.stream_wait("schedule", dev.record("forward"))
    dev.wait_stream("schedule", "forward")


@pytest.mark.parametrize("name", DEVICES)
def test_hip_layout_copies_on_the_forward_stream(name: str) -> None:
    dev = Device(name)
    assert (dev.stream("copy") is dev.stream("forward")) == dev.is_hip
    with dev.use("forward"):
        x = dev.h2d([1, 2, 3])
        hc = dev.copy_to_host({"x": x * 2})
        out = dev.wait_copy(hc)
    assert out["x"].tolist() == [2, 4, 6]
    # no cross-stream wait is queued for the copy where it shares the forward stream
    assert (dev.queued_waits.get("copy", 0) == 0) or not dev.is_hip
    assert dev.event_records["ring"] >= 1


def test_backend_override_is_validated_and_env_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="only 'hip'"):
        Device("cpu", backend="cuda")
    with pytest.raises(ValueError, match="as-hip"):
        Device("cpu-as-cuda")
    monkeypatch.setenv("SPECSCHED_BACKEND", "hip")
    assert Device("cpu").label == "cpu-as-hip"
    monkeypatch.delenv("SPECSCHED_BACKEND")
    assert Device("cpu").label == "cpu"


@pytest.mark.parametrize("name", DEVICES)
def test_device_counts_host_syncs_by_kind(name: str) -> None:
    dev = Device(name)
    with dev.use("forward"):
        x = torch.arange(6, device=dev.torch_device) * 2
        ev = dev.record("forward")
    dev.allow_schedule_barrier = True  # (refused on HIP otherwise; this test counts waits)
    dev.stream_wait("schedule", ev)  # queued: not a host sync
    assert dev.host_syncs == 0 and dev.queued_waits["schedule"] == 1
    dev.host_block(ev, "publish")
    hc = dev.copy_to_host({"x": x}, after=ev)
    out = dev.wait_copy(hc)
    assert out["x"].tolist() == [0, 2, 4, 6, 8, 10]
    assert out["x"].device.type == "cpu"
    dev.synchronize()
    assert dev.sync_counts == {"publish": 1, "results": 1, "device_synchronize": 1}
    assert dev.host_syncs == 3 and dev.sync_seconds["publish"] >= 0.0
    dev.reset_counters()
    assert dev.host_syncs == 0


@pytest.mark.parametrize("name", DEVICES)
def test_h2d_and_pinned(name: str) -> None:
    dev = Device(name)
    t = dev.h2d([[1, 2], [3, 4]])
    assert t.device == dev.torch_device and t.dtype == torch.int64 and t.shape == (2, 2)
    assert dev.h2d(torch.tensor([1.5]), torch.float32).device == dev.torch_device
    p = dev.pinned_empty((3,), torch.int32)
    assert p.device.type == "cpu" and p.is_pinned() == dev.is_gpu


def test_measure_mode_times_regions_off_mode_records_nothing() -> None:
    off = Device("cpu")
    with off.timed("x"):
        pass
    assert off.collect_timings() == []
    on = Device("cpu", measure=True)
    for i in range(3):
        with on.timed(f"r{i}"):
            torch.ones(100).sum()
    t = on.collect_timings()
    assert [n for n, _ in t] == ["r0", "r1", "r2"] and all(ms >= 0 for _, ms in t)
    assert on.collect_timings() == []


def test_null_event_elapsed_needs_records() -> None:
    a, b = NullEvent(), NullEvent()
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)
    a.record()
    b.record()
    assert a.elapsed_time(b) >= 0 and a.query()


# --------------------------------------------------------------------------- ring
def test_ring_raises_when_every_event_is_in_flight() -> None:
    ring, evs = fake_ring(3)
    handles = [record(ring, "forward") for _ in range(3)]
    assert [h.slot.index for h in handles] == [0, 1, 2]
    with pytest.raises(EventRingExhausted, match="in flight"):
        ring.acquire("forward")
    evs[0].done = True
    assert record(ring, "forward").slot.index == 0


def test_ring_skips_in_flight_slots() -> None:
    ring, evs = fake_ring(3)
    for _ in range(3):
        record(ring, "forward")
    evs[1].done = True  # slot 0 still running, slot 1 done
    h = record(ring, "forward")
    assert h.slot.index == 1
    assert ring.in_flight() == [0, 1, 2]


def test_ring_keeps_event_with_pending_wait_until_waiter_passes() -> None:
    """sglang #31072: an event another stream still waits on must not be re-recorded."""
    ring, evs = fake_ring(4)
    pub = record(ring, "schedule")
    ring.note_wait(pub, "forward")  # forward stream queued Event.wait(pub)
    evs[pub.slot.index].done = True  # the event itself completed...
    assert not ring.is_free(pub)  # ...but nothing proves forward passed its wait
    later = record(ring, "forward")  # forward records after the wait
    assert not ring.is_free(pub)
    evs[later.slot.index].done = True  # forward ran past the wait
    assert ring.is_free(pub)
    # a record on forward made *before* the wait proves nothing
    ring2, evs2 = fake_ring(4)
    early = record(ring2, "forward")
    pub2 = record(ring2, "schedule")
    ring2.note_wait(pub2, "forward")
    evs2[early.slot.index].done = evs2[pub2.slot.index].done = True
    assert not ring2.is_free(pub2)


def test_ring_stale_handle_raises() -> None:
    ring, evs = fake_ring(2)
    a = record(ring, "forward")
    evs[0].done = True
    record(ring, "forward")
    evs[1].done = True
    b = record(ring, "forward")  # re-records slot 0
    assert b.slot is a.slot and a.stale and not b.stale
    with pytest.raises(StaleEventError):
        _ = a.event


def test_ring_property_never_hands_out_an_event_in_flight() -> None:
    """Random record/wait/complete sequences against a ground-truth model of the GPU."""
    rng = random.Random(7)
    streams = ["schedule", "forward", "copy"]
    for trial in range(40):
        ring, evs = fake_ring(rng.randint(2, 6))
        queue: dict[str, list[tuple[str, object]]] = {s: [] for s in streams}  # pending items per stream
        waits_pending: dict[int, int] = {}  # slot index -> pending (not yet passed) waits
        handles = []
        for _ in range(200):
            r = rng.random()
            if r < 0.4:
                s = rng.choice(streams)
                try:
                    h = ring.acquire(s)
                except EventRingExhausted:
                    continue
                i = h.slot.index
                assert evs[i].done, f"trial {trial}: handed out slot {i} whose record is running"
                assert waits_pending.get(i, 0) == 0, f"trial {trial}: slot {i} has a pending wait"
                h.event.record(None)
                queue[s].append(("rec", i))
                handles.append(h)
            elif r < 0.6 and handles:
                h = rng.choice(handles)
                if h.stale:
                    continue
                s = rng.choice([x for x in streams if x != h.stream])
                ring.note_wait(h, s)
                queue[s].append(("wait", h.slot.index))
                waits_pending[h.slot.index] = waits_pending.get(h.slot.index, 0) + 1
            else:  # the GPU advances one stream by one item (a wait passes once its event is done)
                s = rng.choice(streams)
                if not queue[s]:
                    continue
                kind, i = queue[s][0]
                if kind == "rec":
                    evs[i].done = True
                    queue[s].pop(0)
                elif evs[i].done:
                    waits_pending[i] -= 1
                    queue[s].pop(0)


@pytest.mark.parametrize("name", DEVICES)
def test_device_ring_cycles_in_a_steady_loop(name: str) -> None:
    """An overlap-like loop (publish event, queued wait, launch, done, copy) never exhausts
    a small ring once results are consumed."""
    dev = Device(name, ring_size=8)
    x = torch.zeros(4, device=dev.torch_device)
    for _ in range(50):
        with dev.use("schedule"):
            pub = dev.record("schedule")
        dev.stream_wait("forward", pub)
        with dev.use("forward"):
            x += 1
            done = dev.record("forward")
        hc = dev.copy_to_host({"x": x}, after=done)
        dev.wait_copy(hc)
    assert dev.sync_counts["results"] == 50
    assert float(x[0]) == 50.0


# -------------------------------------------------------------------------- graphs
def test_buckets() -> None:
    assert pick_bucket(1, [1, 2, 4]) == 1 and pick_bucket(3, [4, 1, 2]) == 4 and pick_bucket(5, [1, 2, 4]) is None
    with pytest.raises(ValueError):
        pick_bucket(0, [1])
    b = default_bs_buckets(64)
    assert b[:6] == [1, 2, 4, 8, 12, 16] and b[-1] == 64
    assert default_bs_buckets(10) == [1, 2, 4, 8, 10]


@pytest.mark.parametrize("name", DEVICES)
def test_graph_cache_replays_on_static_buffers(name: str) -> None:
    dev = Device(name)
    inp = torch.zeros(4, device=dev.torch_device)
    out = torch.zeros(4, device=dev.torch_device)
    calls = []

    def fn() -> None:
        calls.append(1)
        out.copy_(inp * 2 + 1)

    cache = GraphCache(dev, warmup=2)
    with dev.use("forward"):
        cache.capture(("decode", 4), fn)
    assert ("decode", 4) in cache and cache.keys() == [("decode", 4)]
    for v in (1.0, 5.0):
        with dev.use("forward"):
            inp.fill_(v)
            cache.replay(("decode", 4))
        dev.synchronize()
        assert out.tolist() == [2 * v + 1] * 4
    assert cache.replays[("decode", 4)] == 2
    with pytest.raises(KeyError):
        cache.replay(("verify", 4))


# ---------------------------------------------------------------------- sync checker
def test_sync_checker_flags_repeat_interleave_without_output_size_only() -> None:
    vals, reps = torch.tensor([10, 20, 30]), torch.tensor([2, 0, 1])
    with SyncChecker() as chk:
        a = torch.repeat_interleave(vals, reps)
    assert chk.ops() == ["aten.repeat_interleave.Tensor"]
    with SyncChecker() as chk:
        b = torch.repeat_interleave(vals, reps, output_size=3)
    assert chk.events == []
    assert a.tolist() == b.tolist() == [10, 10, 30]


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (lambda x: x.sum().item(), "aten._local_scalar_dense.default"),
        (lambda x: bool(x[0] > 0), "aten._local_scalar_dense.default"),
        (lambda x: x.nonzero(), "aten.nonzero.default"),
        (lambda x: torch.where(x > 1), "aten.nonzero.default"),
        (lambda x: x.masked_select(x > 1), "aten.masked_select.default"),
        (lambda x: torch.unique(x), "aten._unique2.default"),
        (lambda x: x.cpu(), "Tensor.cpu"),
        (lambda x: x.tolist(), "Tensor.tolist"),
        (lambda x: x.numpy(), "Tensor.numpy"),
        (lambda x: x.to("cpu"), "Tensor.to(cpu)"),
    ],
)
def test_sync_checker_flags_host_reads(fn, op: str) -> None:  # noqa: ANN001
    x = torch.tensor([0, 1, 2, 3])
    with SyncChecker() as chk:
        fn(x)
    assert op in chk.ops()


def test_sync_checker_quiet_on_device_only_work_and_options() -> None:
    x = torch.arange(8)
    with SyncChecker() as chk:
        y = (x * 2).cumsum(0)
        torch.where(y > 3, y, -1)
        y.to(torch.float32)
        x.repeat_interleave(2)  # int repeats: size known on the host
        torch.argmax(y)
    assert chk.events == []
    with SyncChecker(cpu_reads=False) as chk:
        x.cpu()
        x.tolist()
    assert chk.events == []
    with pytest.raises(HostSyncError, match="nonzero"), SyncChecker(raise_on_sync=True):
        x.nonzero()
    chk = SyncChecker()
    with chk:
        x.sum().item()
    with pytest.raises(HostSyncError, match="1 host sync"):
        chk.assert_none()
    x.nonzero()  # outside the block: not recorded
    assert len(chk.events) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_sync_checker_flags_device_to_host_copy_on_gpu() -> None:
    from specsched.runtime.sync_checker import cuda_sync_debug

    x = torch.arange(4, device="cuda")
    with SyncChecker() as chk:
        x.cpu()
        torch.repeat_interleave(x, x)
    assert "aten._to_copy.default" in chk.ops() or "aten.copy_.default" in chk.ops()
    assert "aten.repeat_interleave.Tensor" in chk.ops()
    with pytest.raises(RuntimeError), cuda_sync_debug("error"):
        torch.repeat_interleave(x, x)
    with cuda_sync_debug("error"):
        torch.repeat_interleave(x, x, output_size=6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_sync_checker_flags_pageable_host_to_device_copies_on_gpu() -> None:
    x = torch.zeros(4, device="cuda")
    with SyncChecker() as chk:
        x[0] = 1.0  # a pageable 0-dim CPU source
        x.copy_(torch.ones(4))
    assert len([o for o in chk.ops() if "copy" in o]) >= 2
    with SyncChecker() as chk:
        x.select(0, 0).fill_(2.0)
        x.copy_(torch.ones(4).pin_memory(), non_blocking=True)
    assert chk.events == []


def test_collector_paused_collects_once_and_holds_cycles_until_the_capture_ends() -> None:
    """A capture must not be interrupted by an automatic collection freeing CUDA objects
    (SGLang 0.5.23 base_cuda_graph_runner.py ``freeze_gc``): the collector is off inside,
    nested pauses do not turn it back on early, and it is on again afterwards."""
    import gc
    import weakref

    from specsched.runtime.graphs import collector_paused

    class Node:
        pass

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a  # a dead cycle made during the capture
        ref = weakref.ref(a)
        del a, b
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        for _ in range(2000):  # allocations that would trigger a generation-0 collection
            _ = [Node() for _ in range(10)]
        assert ref() is not None
    assert gc.isenabled()
    gc.collect()
    assert ref() is None


def test_engine_captures_every_graph_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's warm-up runs its whole capture loop under one collector pause."""
    import gc

    from specsched.runtime.engine import RuntimeEngine
    from specsched.sim.server_args import ServerArgs

    seen: list[bool] = []
    monkeypatch.setattr(RuntimeEngine, "_capture_all", lambda self: seen.append(gc.isenabled()))
    monkeypatch.setattr(RuntimeEngine, "_warm_requests", lambda self: seen.append(gc.isenabled()))
    monkeypatch.setattr(RuntimeEngine, "_allocation", lambda self, *a: None)   # the out-of-memory label only
    eng = object.__new__(RuntimeEngine)
    eng.server = ServerArgs()
    RuntimeEngine.warmup(eng)
    assert seen == [False, True]


def test_serving_uses_one_intra_op_thread_on_a_gpu_and_the_profilers_count_on_cpu() -> None:
    """SGLang 0.5.23 ModelRunner.load_model: torch.set_num_threads(1) off CPU. On CPU the
    engine runs with the threads ``specsched profile`` runs with (1 by default; a count
    given, such as the one validate's profile records): it kept torch's default, and on a
    loaded 2-core box the measured steps were 10-65x slower than the profile's."""
    import torch
    from specsched.runtime.device import CPU_THREADS, serve_threads
    from specsched.runtime.engine import RuntimeEngine

    assert serve_threads(True) == 1
    assert serve_threads(False) == CPU_THREADS == 1 and serve_threads(False, 3) == 3
    before = torch.get_num_threads()
    from tests.conftest import make_scenario

    sc = make_scenario({"max_running_requests": 2}, {"kind": "burst", "num_requests": 1,
                                                     "input_len": {"kind": "fixed", "value": 8},
                                                     "output_len": {"kind": "fixed", "value": 2}})
    try:
        torch.set_num_threads(2)
        RuntimeEngine(sc, preset="tiny", device="cpu")
        assert torch.get_num_threads() == CPU_THREADS
        RuntimeEngine(sc, preset="tiny", device="cpu", cpu_threads=2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
