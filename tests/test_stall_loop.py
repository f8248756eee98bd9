"""The profiler's publish-wait stall loop runs the engine loop's cycle: launch the
scheduled verify, wait for the previous result, process it, schedule the next plan
(runtime.profile_host.HostPhases.stall_phase against sim/loop.py scheduler_loop)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from specsched.runtime.profile_host import HostPhases  # noqa: E402
from specsched.runtime.profiler import _Profiler  # noqa: E402
from specsched.sim.scheduler import Scheduler  # noqa: E402


def test_stall_loop_processes_and_schedules_between_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, object]] = []  # the plan objects themselves: identity is unique
    owner: dict[int, int] = {}  # plan -> the scheduler that returned it (one per batch size)
    launch, process, schedule = HostPhases._engine_verify_launch, Scheduler.process_result, Scheduler.schedule

    def spy_launch(self, rows, tokens, plan):
        events.append(("launch", plan))
        return launch(self, rows, tokens, plan)

    def spy_process(self, plan, output):
        events.append(("process", plan))
        return process(self, plan, output)

    def spy_schedule(self):
        plan = schedule(self)
        events.append(("schedule", plan))
        owner[id(plan)] = id(self)
        return plan

    p = _Profiler(serializing={}, device="cpu", preset="tiny", spec_window=3, max_bs=2, contexts=[64],
                  extend_tokens=[16], cuda_graph_max_bs=2, repeats=1, progress=False, budget_s=60.0,
                  batch_sizes=[1, 2], prompt_len=None, forced_accept=1, seed=0)
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
    # only a run's first launch (2 runs, warm-up and timed, per mode: 4 modes per batch
    # size) has no earlier result to process before the next launch
    assert sum("process" not in g for g in gaps) <= 8 * len(p.launch_bs)
    for i in idx:  # the plan launched is the one its scheduler returned last
        mine = owner[id(events[i][1])]
        last = next(x for k, x in reversed(events[:i]) if k == "schedule" and owner[id(x)] == mine)
        assert last is events[i][1]
    # the passes interleave the batch sizes (pass 1 ascending, pass 2 descending, ...), so a
    # host that drifts during the phase is not read as a per-request cost
    sizes = [x.batch_size for x in launched]
    runs = [s for j, s in enumerate(sizes) if j == 0 or s != sizes[j - 1]]
    assert runs == [1, 2, 1, 2, 1]
