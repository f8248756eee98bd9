"""benchmarks/sim_speed.py --bytecodes: the census counts the bytecodes of the run itself
(a small Poisson run: its collapsed stretches' walk is among the top functions; nothing is
counted after the run: the tracer before it is back)."""

from __future__ import annotations

import sys
from pathlib import Path

from specsched.sim.config import deep_merge

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import sim_speed  # noqa: E402


def test_census_counts_the_runs_bytecodes(monkeypatch):
    load = sim_speed._load

    def small(case):
        sc = load(case)
        return type(sc).model_validate(deep_merge(sc.model_dump(mode="json"), {"workload": {"num_requests": 30}}))

    monkeypatch.setattr(sim_speed, "_load", small)
    before = sys.gettrace()
    per_request, top = sim_speed.bytecode_census("poisson8b-fixed-1k", "compact", top=10)
    assert sys.gettrace() is before
    names = [name for name, _ in top]
    assert "plain_timeline.py:walk" in names
    assert per_request > 1_000
    assert sum(n for _, n in top) <= per_request * 30


def test_census_by_line_names_the_walks_lines(monkeypatch, capsys):
    """--lines: the same count per source line ("file:line: source"); the busiest lines of a
    small Poisson run include the walk's, and the lines sum to at most the run's count."""
    load = sim_speed._load

    def small(case):
        sc = load(case)
        return type(sc).model_validate(deep_merge(sc.model_dump(mode="json"), {"workload": {"num_requests": 30}}))

    monkeypatch.setattr(sim_speed, "_load", small)
    per_request, top = sim_speed.bytecode_census("poisson8b-fixed-1k", "compact", top=40, lines=True)
    by_function, _ = sim_speed.bytecode_census("poisson8b-fixed-1k", "compact", top=1)
    assert per_request == by_function
    assert any(name.startswith("plain_timeline.py:") and "t = t + hs" in name for name, _ in top)
    assert sum(n for _, n in top) <= per_request * 30
    try:
        sim_speed.main(["--lines"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("--lines without --bytecodes was accepted")
    assert "--lines goes with --bytecodes" in capsys.readouterr().err


def test_instructions_read_cachegrinds_count_and_the_baseline_runs_nothing(monkeypatch):
    """--instructions: the count is cachegrind's I refs (commas dropped); the baseline child
    builds the engine but never runs it (the run's instructions are the difference)."""
    import pytest
    from specsched.sim.engine import SimEngine

    report = "==1== I   refs:      2,209,732,593\n==1== \n"
    assert sim_speed.cachegrind_refs(report) == 2_209_732_593
    with pytest.raises(ValueError, match="no instruction count"):
        sim_speed.cachegrind_refs("valgrind: command not found")

    def no_run(self):
        raise AssertionError("the baseline child ran the simulation")

    monkeypatch.setattr(SimEngine, "run", no_run)
    assert sim_speed.child("burst256", True, None, False, run=False) == {"case": "burst256", "run": False}


def test_the_child_passes_records_and_step_by_step_to_the_engine(monkeypatch):
    """--records and --no-fast-forward reach the engine the child builds (SimEngine's
    signature is its ``__new__``'s, where neither keyword is named)."""
    import functools

    from specsched.sim.engine import SimEngine

    seen = {}
    init = SimEngine.__init__

    @functools.wraps(init)   # the child reads the keywords it may pass from this signature
    def spy(self, scenario, *args, **kwargs):
        seen.update(kwargs)
        init(self, scenario, *args, **kwargs)

    monkeypatch.setattr(SimEngine, "__init__", spy)
    sim_speed.child("burst256", False, "compact", False, run=False)
    assert seen == {"fast_forward": False, "records": "compact"}


def test_walk_replay_replays_the_runs_walks(monkeypatch):
    """--walk-replay: every timing walk of the run is kept and made again with the same
    results; the walk is the module's own again afterwards; repeat 0 times nothing. A walk
    that answers differently on replay is reported (not silently timed)."""
    from specsched.sim import plain_timeline

    load = sim_speed._load

    def small(case):
        sc = load(case)
        return type(sc).model_validate(deep_merge(sc.model_dump(mode="json"), {"workload": {"num_requests": 30}}))

    monkeypatch.setattr(sim_speed, "_load", small)
    walk = plain_timeline.walk
    got = sim_speed.walk_replay("poisson8b-fixed-1k", 2)
    assert plain_timeline.walk is walk
    assert got["walks"] > 5 and got["iterations"] > got["walks"]
    assert got["replay_matches_run"] is True and got["replay_cpu_s"] > 0
    none = sim_speed.walk_replay("poisson8b-fixed-1k", 0)
    assert none["replay_cpu_s"] is None and none["replay_matches_run"] is None

    calls = []

    def drifting(*args, **kwargs):   # a walk whose answer changes after the run
        tm = walk(*args, **kwargs)
        calls.append(1)
        if len(calls) > got["walks"] and tm.n:
            tm.busy += 1.0
        return tm

    monkeypatch.setattr(plain_timeline, "walk", drifting)
    assert sim_speed.walk_replay("poisson8b-fixed-1k", 1)["replay_matches_run"] is False


def test_the_header_says_how_the_interpreter_was_built():
    """A shared libpython is seen in the process's mappings, a linked-in one by its absence;
    the optimizing configure flags are named (figures under different builds differ by ~9 %)."""
    shared = "7f00-7f10 r-xp 0 08:01 1 /opt/py/lib/libpython3.11.so.1.0\n7f10-7f20 r--p 0 08:01 2 /usr/lib/libc.so.6\n"
    static = "5500-5600 r-xp 0 08:01 1 /usr/bin/python3.11\n7f10-7f20 r--p 0 08:01 2 /usr/lib/libc.so.6\n"
    assert sim_speed.interpreter_build(shared, "'--enable-shared' '--prefix=/opt/py'") == \
        "libpython shared, configure names no PGO/LTO"
    assert sim_speed.interpreter_build(static, "'--enable-optimizations' '--with-lto'") == \
        "libpython linked in, --enable-optimizations, --with-lto"
    assert sim_speed.interpreter_build("", "") == "libpython unknown, configure names no PGO/LTO"
    assert "Python" in sim_speed.machine() and "libpython" in sim_speed.machine()
