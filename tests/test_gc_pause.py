"""The cyclic garbage collector is off while a simulation runs (sim/gc_pause.py).

- the collector is off while the engine builds its requests and while it runs;
- the collector is restored after a run, also when the run raises, and a caller's own
  ``gc.disable()`` is left as it was (only the outermost pause re-enables);
- bounded memory, the condition for keeping it off: a run leaves a fixed handful of
  reference cycles, the same with 4x the requests (plain Poisson with collapsed stretches,
  and a speculative burst through the grid path and step by step).
"""

from __future__ import annotations

import gc

import pytest
from specsched.sim.engine import SimEngine
from specsched.sim.gc_pause import collector_paused

from tests.conftest import make_scenario, tiny_profile


def _poisson(n: int):
    wl = {"kind": "poisson", "num_requests": n, "request_rate": 50.0,
          "input_len": {"kind": "fixed", "value": 300}, "output_len": {"kind": "fixed", "value": 30}}
    return make_scenario({"speculative_algorithm": "none"}, wl)


def _burst(n: int):
    return make_scenario({"max_running_requests": 8, "chunked_prefill_size": 1000, "max_prefill_tokens": 1000},
                         {"num_requests": n})


def test_the_collector_is_off_during_a_run_and_restored_after(monkeypatch):
    seen = []
    real = SimEngine._run

    def spy(self):
        seen.append(gc.isenabled())
        return real(self)

    monkeypatch.setattr(SimEngine, "_run", spy)
    assert gc.isenabled()
    SimEngine(_poisson(3), tiny_profile()).run()
    assert seen == [False] and gc.isenabled()


def test_the_collector_is_off_while_the_engine_builds_its_requests(monkeypatch):
    """The workload's requests (millions of long-lived objects at 1M requests) are built
    with the collector off, as the run is; it is back on once the engine is built, also
    when building raises."""
    from specsched.sim import engine

    seen = []
    real = engine.make_requests

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(engine, "make_requests", spy)
    assert gc.isenabled()
    SimEngine(_poisson(3), tiny_profile())
    assert seen == [False] and gc.isenabled()

    def boom(*a, **k):
        assert not gc.isenabled()
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "make_requests", boom)
    with pytest.raises(RuntimeError, match="boom"):
        SimEngine(_poisson(3), tiny_profile())
    assert gc.isenabled()


def test_the_collector_is_restored_when_the_run_raises(monkeypatch):
    def boom(self):
        assert not gc.isenabled()
        raise RuntimeError("boom")

    monkeypatch.setattr(SimEngine, "_run", boom)
    with pytest.raises(RuntimeError, match="boom"):
        SimEngine(_poisson(3), tiny_profile()).run()
    assert gc.isenabled()


def test_a_caller_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    try:
        SimEngine(_poisson(3), tiny_profile()).run()
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()   # the inner pause found it off: left off
    assert gc.isenabled()


def test_only_a_capture_pause_collects_and_only_the_outermost():
    """The simulator's pause collects nothing on entry (its garbage is the next automatic
    collection's); a graph capture's (``collect``, runtime.graphs.collector_paused) collects
    the dead cycles made before it once, at the outermost pause, and none inside."""
    import weakref

    class Node:
        pass

    def dead_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    gc.collect()
    ref = dead_cycle()
    with collector_paused():
        assert ref() is not None and not gc.isenabled()
    with collector_paused(collect=True):
        assert ref() is None and not gc.isenabled()
        inner = dead_cycle()
        with collector_paused(collect=True):
            assert inner() is not None
    assert gc.isenabled()
    gc.collect()
    assert inner() is None


def _cycles_left(sc, **kwargs) -> int:
    """Objects in reference cycles a run leaves (its result dropped), found by a collection."""
    gc.collect()
    SimEngine(sc, tiny_profile(), **kwargs).run()
    return gc.collect()


@pytest.mark.parametrize("make, kwargs", [(_poisson, {}), (_burst, {}), (_burst, {"fast_forward": False})],
                         ids=["poisson", "burst", "burst-step-by-step"])
def test_a_run_leaves_no_cycles_that_grow_with_its_requests(make, kwargs):
    _cycles_left(make(4), **kwargs)          # first-use caches (imports, memos) out of the way
    small = _cycles_left(make(10), **kwargs)
    large = _cycles_left(make(40), **kwargs)
    assert large <= small + 10, (small, large)


def test_the_run_command_keeps_the_collector_off_until_it_has_written(tmp_path, monkeypatch):
    """`specsched run`: off while the scenario loads and the results are written (not only
    while the simulation runs), back on once the command returns, also when it fails."""
    from specsched.sim import config, results

    from specsched.cli import main
    from tests.test_cli_and_io import small_scenario

    seen = {}
    real_load, real_write = config.load_scenario, results.write_results

    def load(*a, **k):
        seen["load"] = gc.isenabled()
        return real_load(*a, **k)

    def write(*a, **k):
        seen["write"] = gc.isenabled()
        return real_write(*a, **k)

    monkeypatch.setattr(config, "load_scenario", load)
    monkeypatch.setattr(results, "write_results", write)
    assert main(["run", str(small_scenario(tmp_path)), "--out", str(tmp_path / "o"), "-q"]) == 0
    assert seen == {"load": False, "write": False} and gc.isenabled()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    assert main(["run", str(bad)]) == 2
    assert gc.isenabled()
