"""INV-CLOCK: the host hands control to SimPy until a time t and SimPy's clock lands on t
itself, or (where no float delay reaches t exactly) on the first time after it: never
before. A landing one unit in the last place early let a closed-loop client send its next
request before the previous one's last token (its recorded finish), so the requests table
showed more requests in flight than workload.concurrency (found by fuzzing: concurrency 37,
a clock at 0.011481739857293703 s, a delivery at 0.049201945018656414 s)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import simpy
from hypothesis import assume, example, given
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine


def _land(now: float, t: float) -> float:
    env = simpy.Environment(initial_time=now)
    env.timeout(SimEngine._delay_to(SimpleNamespace(env=env), t))
    env.run()
    return env.now


@given(st.floats(0.0, 1e4), st.floats(1e-12, 1e4))
@example(0.011481739857293703, 0.049201945018656414)
@example(1.0, 1.0 + 2**-52)   # a gap far below the clock's own precision: found at once
def test_inv_clock_simpy_lands_on_or_just_after_the_target(now: float, t: float) -> None:
    assume(t > now)
    at = _land(now, t)
    assert at >= t, (now, t, at)
    # the first reachable time: t itself when some delay reaches it, else at most a few units
    # in the last place after it
    assert at - t <= 4 * math.ulp(t), (now, t, at)


def test_inv_clock_a_gap_below_the_clocks_precision_is_found_at_once() -> None:
    """A target one unit in the last place after a clock of 9.5 s: many delays reach it
    (every one within half a unit of the clock's); the first found is taken, not the
    smallest (a search over 2**40 of them hung a bursty Poisson run)."""
    now = 9.5
    t = math.nextafter(now, math.inf)
    assert _land(now, t) == t


def test_inv_clock_the_exact_target_when_reachable() -> None:
    for now, t in ((0.0, 0.3), (1.0, 1.5), (0.1, 0.30000000000000004)):
        assert _land(now, t) == t
