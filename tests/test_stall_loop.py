"""The profiler's publish-wait stall loop runs the engine loop's cycle: launch the
scheduled verify, wait for the previous result, process it, schedule the next plan
(runtime.profile_host.HostPhases.stall_phase against sim/loop.py scheduler_loop)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from specsched.runtime.engine import LoopHost  # noqa: E402
from specsched.runtime.profile_host import HostPhases  # noqa: E402
from specsched.runtime.profiler import _Profiler  # noqa: E402
from specsched.sim.scheduler import Scheduler  # noqa: E402


def _profiler():
    return _Profiler(serializing={}, device="cpu", preset="tiny", spec_window=3, max_bs=2, contexts=[64],
                     extend_tokens=[16], cuda_graph_max_bs=2, repeats=1, progress=False, budget_s=60.0,
                     batch_sizes=[1, 2], prompt_len=None, forced_accept=1, seed=0)


def test_stall_loop_processes_and_schedules_between_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, object]] = []  # the plan objects themselves: identity is unique
    owner: dict[int, int] = {}  # plan -> the scheduler that returned it (one per batch size)
    launch, process, schedule = HostPhases._engine_verify_launch, Scheduler.process_result, Scheduler.schedule

    def spy_launch(self, rows, tokens, plan, host=None):
        events.append(("launch", plan))
        return launch(self, rows, tokens, plan, host)

    def spy_process(self, plan, output):
        events.append(("process", plan))
        return process(self, plan, output)

    def spy_schedule(self):
        plan = schedule(self)
        events.append(("schedule", plan))
        owner[id(plan)] = id(self)
        return plan

    p = _profiler()
    monkeypatch.setattr(HostPhases, "_engine_verify_launch", spy_launch)
    monkeypatch.setattr(Scheduler, "process_result", spy_process)
    monkeypatch.setattr(Scheduler, "schedule", spy_schedule)
    p.stall_phase()
    assert len(p.stall_med) == len(p.launch_bs) and min(p.stall_med) >= 0.0
    launched = [s for k, s in events if k == "launch"]
    processed = [s for k, s in events if k == "process"]
    # every plan launched is a plan the scheduler returned, each launched once and
    # processed exactly once, in launch order (no step left in flight at the end)
    assert launched and len({id(x) for x in launched}) == len(launched)
    ids = {id(x) for x in launched}
    done = [x for x in processed if id(x) in ids]  # (the set-up's own extends are processed too)
    assert len(done) == len(launched) and all(x is y for x, y in zip(launched, done, strict=True))
    # between two launches the loop processes the older step and schedules the next,
    # as the engine's loop does (not a tight loop of launches)
    idx = [i for i, (k, _) in enumerate(events) if k == "launch"]
    gaps = [{k for k, _ in events[a + 1 : b]} for a, b in zip(idx, idx[1:], strict=False)]
    assert all("schedule" in g for g in gaps)
    # only a run's first launch (2 runs, warm-up and timed, per pass of the queued and block
    # loops: 4 such passes per batch size) has no earlier result to process before the next
    # launch (the no-overlap loop processes each step before the next launch)
    assert sum("process" not in g for g in gaps) <= 8 * len(p.launch_bs)
    for i in idx:  # the plan launched is the one its scheduler returned last
        mine = owner[id(events[i][1])]
        last = next(x for k, x in reversed(events[:i]) if k == "schedule" and owner[id(x)] == mine)
        assert last is events[i][1]
    # the passes interleave the batch sizes (pass 1 ascending, pass 2 descending, ...), so a
    # host that drifts during the phase is not read as a per-request cost
    sizes = [x.batch_size for x in launched]
    runs = [s for j, s in enumerate(sizes) if j == 0 or s != sizes[j - 1]]
    assert runs == [1, 2, 1, 2, 1, 2, 1]


def test_no_overlap_stall_loop_runs_the_engines_result_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serial (no-overlap) loop launches each verify onto an idle stream after the whole
    result path, run by the engine's own code (runtime.engine.LoopHost): Results (wait and
    timing reads), process_result, Deliver, Recv, schedule() and the pass's stamp, in the
    order of sim/loop.py with overlap off; host.result_path_s is read off its walls."""
    events: list[str] = []
    launch = HostPhases._engine_verify_launch

    def spy_launch(self, rows, tokens, plan, host=None):
        events.append("launch" if host is None else "launch serial")
        return launch(self, rows, tokens, plan, host)

    def spy(name, fn):
        def wrapped(*a, **k):
            events.append(name)
            return fn(*a, **k)
        return wrapped

    monkeypatch.setattr(HostPhases, "_engine_verify_launch", spy_launch)
    for name in ("_results", "_deliver", "_recv", "_pass"):
        monkeypatch.setattr(LoopHost, name, spy(name, getattr(LoopHost, name)))
    monkeypatch.setattr(Scheduler, "process_result", spy("process", Scheduler.process_result))
    monkeypatch.setattr(Scheduler, "schedule", spy("schedule", Scheduler.schedule))
    p = _profiler()
    p.stall_phase()
    serial = [i for i, e in enumerate(events) if e == "launch serial"]
    # 2 passes x (warm-up + timed cycles) per batch size
    assert len(serial) >= 2 * len(p.launch_bs) * 4
    path = ["_results", "process", "_deliver", "_recv", "schedule", "_pass"]
    between = [events[a + 1 : b] for a, b in zip(serial, serial[1:], strict=False) if events[a + 1 : b] != []]
    whole = [e for e in between if e == path]
    # every serial launch but a pass's last is followed by the whole path before the next
    assert len(whole) >= len(serial) - 2 * 2 * len(p.launch_bs)
    # the queued and block loops (passes 1-2, before it) wait and process without it
    assert "_results" not in events[: serial[0]] and "_deliver" not in events[: serial[0]]
    assert len(p.serial_excess) == len(p.launch_bs)
    assert all(len(t) == 3 and min(t) >= 0.0 for t in p.serial_parts)


def test_the_stall_loop_times_decode_launches_on_decode_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """host.decode_launch_*: the same queued / block loops on a plain-decoding scheduler's
    decode plans, through the engine's decode launch (no accept draw, one position per row)."""
    from specsched.sim.plan import ForwardMode

    modes: list[ForwardMode] = []
    launch = HostPhases._engine_decode_launch

    def spy(self, rows, tokens, plan):
        modes.append(plan.mode)
        return launch(self, rows, tokens, plan)

    monkeypatch.setattr(HostPhases, "_engine_decode_launch", spy)
    p = _profiler()
    p.stall_phase()
    assert modes and set(modes) == {ForwardMode.DECODE}
    # 2 modes x 2 passes x (warm-up + timed cycles) per batch size
    assert len(modes) >= 4 * len(p.launch_bs) * 2
    assert len(p.decode_stall_med) == len(p.launch_bs) and min(p.decode_stall_med) >= 0.0
    assert len(p.decode_stall_fit) == 2
