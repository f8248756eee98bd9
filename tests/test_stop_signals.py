"""analysis.stop_signals: a signal while a pool's runs are awaited is recorded by the handler
and raised by the waiting loop between waits, never inside concurrent.futures' locks; every
future is given once, as it finishes."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.stop_signals import StopSignals, completed, stop_signals


@settings(max_examples=25, deadline=None)
@given(delays=st.lists(st.sampled_from([0.0, 0.001, 0.005, 0.02]), min_size=0, max_size=12))
def test_every_future_is_given_once(delays: list[float]) -> None:
    """INV: ``completed`` gives each future exactly once, each done when given."""
    with ThreadPoolExecutor(3) as ex:
        futures = [ex.submit(time.sleep, d) for d in delays]
        seen = []
        for f in completed(futures, StopSignals(), poll_s=0.01):
            assert f.done()
            seen.append(f)
    assert sorted(map(id, seen)) == sorted(map(id, futures)) and len(set(map(id, seen))) == len(futures)


def test_a_recorded_signal_stops_before_the_next_future_and_the_pool_still_shuts_down() -> None:
    stop = StopSignals()
    gate = threading.Event()
    with ThreadPoolExecutor(2) as ex:
        futures = [ex.submit(lambda: None), *(ex.submit(gate.wait, 5) for _ in range(3))]
        got = []
        with pytest.raises(KeyboardInterrupt):
            for f in completed(futures, stop, poll_s=0.01):
                got.append(f)
                stop(signal.SIGTERM, None)   # as the handler is called
        gate.set()
    assert got == futures[:1]
    assert all(f.done() for f in futures)   # the pool's threads finished: no lock was left held


def test_the_handler_records_the_first_signal_only_and_raises_nothing() -> None:
    stop = StopSignals()
    assert stop.received is None
    stop(signal.SIGTERM, None)
    stop(signal.SIGINT, None)
    assert stop.received == signal.SIGTERM


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="off the main thread nothing is installed, and the SIGTERM would end the test process")
def test_installed_for_the_block_and_restored_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_signals((signal.SIGTERM,)) as stop:
        os.kill(os.getpid(), signal.SIGTERM)   # recorded, not fatal
        deadline = time.monotonic() + 5
        while stop.received is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.received == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_recorded_as_the_last_future_is_handled_still_stops() -> None:
    stop = StopSignals()
    with ThreadPoolExecutor(1) as ex:
        futures = [ex.submit(lambda: None) for _ in range(2)]
        got = []
        with pytest.raises(KeyboardInterrupt):
            for f in completed(futures, stop, poll_s=0.01):
                got.append(f)
                if len(got) == 2:
                    stop(signal.SIGINT, None)
    assert len(got) == 2
