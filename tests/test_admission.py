"""Admission-delay policies: each rule as SGLang's delayer defines it.

Sources: reference/sglang-scheduler-mechanics.md ("Min-free-slots delay") and
reference/mi355x-dspark-measurements.md (mechanism 2).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.admission import (
    AdmissionState,
    MinFreeSlots,
    MinFreeSlotsWaitingAware,
    NoDelay,
    auto_threshold,
    make_policy,
    resolve_threshold,
)
from specsched.sim.admission.demand_observed import DemandObserved
from specsched.sim.config import AdmissionDelay, ServerArgs

MAX_RR = 256


def st_(running: int, free: int, waiting: int, active: int | None = None) -> AdmissionState:
    """AdmissionState; active defaults to running (nothing finished-but-unfiltered)."""
    return AdmissionState(
        running_bs=running,
        num_allocatable_reqs=free,
        waiting_bs=waiting,
        active_running_bs=running if active is None else active,
    )


@st.composite
def states(draw, max_rr: int = MAX_RR) -> AdmissionState:
    running = draw(st.integers(0, max_rr))
    free = draw(st.integers(0, max_rr - running))
    waiting = draw(st.integers(0, 2 * max_rr))
    active = draw(st.integers(0, running))
    return AdmissionState(running, free, waiting, active)


# --- thresholds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_rr", "expected"),
    [(8, 2), (12, 2), (13, 3), (18, 3), (19, 4), (24, 4), (64, 4), (256, 4), (4096, 4)],
)
def test_auto_threshold_formula(max_rr: int, expected: int) -> None:
    assert auto_threshold(max_rr) == expected


@pytest.mark.parametrize("max_rr", [0, 1, 2, 5, 7])
def test_auto_threshold_disabled_below_8(max_rr: int) -> None:
    assert auto_threshold(max_rr) == 0


@given(st.integers(8, 100_000))
def test_auto_threshold_matches_formula_and_bounds(max_rr: int) -> None:
    f = auto_threshold(max_rr)
    assert f == min(4, max(2, (max_rr + 5) // 6))
    assert 2 <= f <= 4


def test_resolve_threshold_auto_when_none() -> None:
    assert resolve_threshold(256, None) == 4
    assert resolve_threshold(12, None) == 2
    assert resolve_threshold(7, None) == 0


@pytest.mark.parametrize(
    ("max_rr", "explicit", "expected"),
    [
        (256, 8, 8),  # newer SGLang: an explicit value wins over the auto value 4
        (256, 3, 3),
        (256, 1000, 256),  # capped at max_running_requests
        (6, 3, 3),  # explicit works even where auto is disabled
        (256, 1, 0),  # <= 1 disables
        (1, 5, 0),  # capped to 1 -> disabled
    ],
)
def test_resolve_threshold_explicit(max_rr: int, explicit: int, expected: int) -> None:
    assert resolve_threshold(max_rr, explicit) == expected



@pytest.mark.parametrize(
    ("max_rr", "explicit", "expected"),
    [
        (256, 8, 4),  # older code: an explicit value above the auto value 4 is cut to it
        (256, 3, 3),  # below it, it lowers the threshold
        (12, 8, 2),
        (6, 3, 0),  # auto disabled below 8: so is an explicit value
        (256, 1, 0),
    ],
)
def test_resolve_threshold_explicit_capped_at_auto_in_older_code(max_rr: int, explicit: int, expected: int) -> None:
    assert resolve_threshold(max_rr, explicit, explicit_rule="capped_at_auto") == expected


@settings(deadline=None)   # a loaded CI machine can deschedule one example past 200 ms
@given(st.integers(0, 5000), st.integers(1, 5000), st.booleans())
def test_an_explicit_threshold_capped_at_auto_never_exceeds_either_rule(max_rr: int, explicit: int, dflash: bool) -> None:
    """INV-THRESHOLD: under ``capped_at_auto`` an explicit value never raises the threshold
    above the automatic one or above 0.5.23's (``wins``); both rules agree when it is at
    most the automatic value, and unset they agree whatever it is."""
    older = resolve_threshold(max_rr, explicit, dflash, "capped_at_auto")
    newer = resolve_threshold(max_rr, explicit, dflash, "wins")
    assert older <= auto_threshold(max_rr) and older <= newer
    if explicit <= auto_threshold(max_rr):
        assert older == newer
    assert resolve_threshold(max_rr, None, dflash, "capped_at_auto") == resolve_threshold(max_rr, None, dflash, "wins")


# --- none -------------------------------------------------------------------------------


@given(states())
def test_none_never_delays(state: AdmissionState) -> None:
    p = NoDelay()
    assert p.name == "none"
    assert p.should_delay(state) is False
    p.on_prefill_admitted(3)
    assert p.should_delay(state) is False


# --- legacy min_free_slots --------------------------------------------------------------


def test_legacy_burst_253_running_3_free_delays() -> None:
    p = MinFreeSlots(MAX_RR)
    assert p.threshold == 4
    assert p.should_delay(st_(253, 3, 3)) is True


def test_legacy_252_running_4_free_admits() -> None:
    assert MinFreeSlots(MAX_RR).should_delay(st_(252, 4, 3)) is False


def test_legacy_ignores_waiting() -> None:
    p = MinFreeSlots(MAX_RR)
    assert p.should_delay(st_(254, 2, 1)) is True
    assert p.should_delay(st_(254, 2, 100)) is True


def test_legacy_nothing_running_admits() -> None:
    assert MinFreeSlots(MAX_RR).should_delay(st_(0, 0, 5)) is False


def test_legacy_disabled_below_8() -> None:
    p = MinFreeSlots(7)
    assert p.threshold == 0
    assert p.should_delay(st_(6, 1, 5)) is False


def test_legacy_explicit_threshold() -> None:
    p = MinFreeSlots(MAX_RR, 8)
    assert p.should_delay(st_(250, 6, 10)) is True
    assert p.should_delay(st_(248, 8, 10)) is False


@given(states(), st.one_of(st.none(), st.integers(1, 16)))
def test_legacy_rule_property(state: AdmissionState, explicit: int | None) -> None:
    p = MinFreeSlots(MAX_RR, explicit)
    t = resolve_threshold(MAX_RR, explicit)
    expected = t > 1 and state.running_bs > 0 and state.num_allocatable_reqs < t
    assert p.should_delay(state) is expected


# --- waiting-aware ----------------------------------------------------------------------


def test_waiting_aware_two_waiting_two_free_admits() -> None:
    assert MinFreeSlotsWaitingAware(MAX_RR).should_delay(st_(254, 2, 2)) is False


def test_waiting_aware_three_waiting_two_free_waits() -> None:
    assert MinFreeSlotsWaitingAware(MAX_RR).should_delay(st_(254, 2, 3)) is True


def test_waiting_aware_burst_253_3_admits() -> None:
    # The burst tail that the legacy rule holds for a whole decode.
    assert MinFreeSlots(MAX_RR).should_delay(st_(253, 3, 3)) is True
    assert MinFreeSlotsWaitingAware(MAX_RR).should_delay(st_(253, 3, 3)) is False


def test_waiting_aware_nothing_running_admits() -> None:
    assert MinFreeSlotsWaitingAware(MAX_RR).should_delay(st_(0, 0, 10)) is False


def test_waiting_aware_disabled_below_8() -> None:
    assert MinFreeSlotsWaitingAware(7).should_delay(st_(6, 1, 5)) is False


@given(states(), st.one_of(st.none(), st.integers(2, 16)))
def test_waiting_aware_equals_legacy_when_enough_wait(
    state: AdmissionState, explicit: int | None
) -> None:
    legacy = MinFreeSlots(MAX_RR, explicit)
    aware = MinFreeSlotsWaitingAware(MAX_RR, explicit)
    if state.waiting_bs < legacy.threshold:
        state = AdmissionState(
            state.running_bs, state.num_allocatable_reqs, legacy.threshold, state.active_running_bs
        )
    assert aware.should_delay(state) is legacy.should_delay(state)


@given(states())
def test_waiting_aware_never_delays_more_than_legacy(state: AdmissionState) -> None:
    if MinFreeSlotsWaitingAware(MAX_RR).should_delay(state):
        assert MinFreeSlots(MAX_RR).should_delay(state)


@given(states())
def test_waiting_aware_rule_property(state: AdmissionState) -> None:
    t = auto_threshold(MAX_RR)
    expected = state.running_bs > 0 and state.num_allocatable_reqs < min(t, state.waiting_bs)
    assert MinFreeSlotsWaitingAware(MAX_RR).should_delay(state) is expected


# --- demand_observed --------------------------------------------------------------------


@pytest.mark.parametrize(("target", "expected"), [(8, 2), (12, 2), (13, 3), (24, 4), (256, 4)])
def test_demand_auto_threshold_examples(target: int, expected: int) -> None:
    assert DemandObserved(MAX_RR).threshold_for(target) == expected


@pytest.mark.parametrize("target", [0, 1, 4, 7])
def test_demand_small_target_threshold_disabled(target: int) -> None:
    assert DemandObserved(MAX_RR).threshold_for(target) == 0


def test_demand_explicit_threshold_capped_at_target() -> None:
    p = DemandObserved(MAX_RR, min_free_slots=6)
    assert p.threshold_for(256) == 6
    assert p.threshold_for(4) == 4
    assert p.threshold_for(1) == 0


def _at_target(p: DemandObserved, target: int) -> None:
    """Teach ``p`` a target: observe a full batch of that size with one waiter, then an
    admission (which clears the pass that observation may have delayed)."""
    p.should_delay(st_(target, 0, 1))
    p.on_prefill_admitted(1)
    assert p.target_running_bs == target
    assert p.delayed_passes == 0


def test_demand_auto_threshold_applied_to_target() -> None:
    # Target 13 -> threshold 3 (not the 4 that max_running_requests=256 would give).
    p = DemandObserved(MAX_RR)
    _at_target(p, 13)
    assert p.should_delay(st_(11, 0, 5, active=10)) is True
    assert p.should_delay(st_(10, 0, 5, active=9)) is False
    assert p.target_running_bs == 13


def test_demand_target_24_threshold_4() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 24)
    # 3 below target, running includes 1 finished (no contraction): delay.
    assert p.should_delay(st_(21, 0, 5, active=20)) is True
    # 4 below target: admit by the free-slots rule.
    assert p.should_delay(st_(20, 0, 5, active=19)) is False
    assert p.target_running_bs == 24


def test_demand_target_12_threshold_2() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 12)
    assert p.should_delay(st_(11, 0, 5, active=10)) is True
    assert p.should_delay(st_(10, 0, 5, active=9)) is False


def test_demand_nothing_running_resets_and_admits() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 256)
    assert p.should_delay(st_(255, 1, 1)) is True
    assert p.delayed_passes == 1
    assert p.should_delay(st_(0, 256, 10)) is False
    assert p.target_running_bs == 0
    assert p.delayed_passes == 0


def test_demand_nothing_waiting_admits_and_keeps_state() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 256)
    assert p.should_delay(st_(255, 1, 1)) is True
    assert p.should_delay(st_(200, 56, 0)) is False
    assert p.target_running_bs == 256
    assert p.delayed_passes == 1


def test_demand_burst_tail_admits_by_growth() -> None:
    # The 256 burst at 253 running / 3 waiting: the legacy rule holds the 3 for a decode.
    p = DemandObserved(MAX_RR)
    assert p.should_delay(st_(253, 3, 3)) is False
    assert p.target_running_bs == 253
    assert MinFreeSlots(MAX_RR).should_delay(st_(253, 3, 3)) is True


def test_demand_growth_admits_even_below_threshold() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 100)
    # One slot above the seen target is demanded: growing, admit.
    assert p.should_delay(st_(100, 1, 1)) is False
    # Growth does not raise the target by itself; observing the new batch does.
    assert p.target_running_bs == 100
    # At the new size with no slot free it holds the target and delays.
    assert p.should_delay(st_(101, 0, 1)) is True
    assert p.target_running_bs == 101


def test_demand_steady_state_delays_until_threshold_free() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 256)
    assert p.should_delay(st_(255, 1, 5)) is True
    assert p.should_delay(st_(254, 2, 5)) is True
    assert p.should_delay(st_(253, 3, 5)) is True
    assert p.delayed_passes == 3
    assert p.should_delay(st_(252, 4, 5)) is False
    assert p.target_running_bs == 256


def test_demand_contraction_lowers_target_and_admits() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 256)
    # Demand fell: 200 running, nothing finished-but-unfiltered, 1 waiting.
    assert p.should_delay(st_(200, 56, 1)) is False
    assert p.target_running_bs == 201


def test_demand_no_contraction_with_unfiltered_finished() -> None:
    p = DemandObserved(MAX_RR, max_delay_passes=100)
    _at_target(p, 24)
    # running (21) != active (17): a finished request is still in the batch; target - running
    # = 3 < 4, so no admission although target - (active + refillable) = 6 >= 4.
    assert p.should_delay(st_(21, 1, 1, active=17)) is True
    assert p.target_running_bs == 24


def test_demand_contraction_needs_threshold_gap() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 24)
    # target - (active + refillable) = 24 - 22 = 2 < 4 and target - running = 3 < 4: delay.
    assert p.should_delay(st_(21, 1, 1)) is True
    assert p.target_running_bs == 24


def test_demand_max_delay_passes_forces_admission() -> None:
    p = DemandObserved(MAX_RR, max_delay_passes=3)
    _at_target(p, 256)
    s = st_(255, 1, 5)
    assert [p.should_delay(s) for _ in range(3)] == [True, True, True]
    assert p.should_delay(s) is False
    # Nothing admitted (e.g. KV-bound): the next pass still admits.
    assert p.should_delay(s) is False
    p.on_prefill_admitted(1)
    assert p.delayed_passes == 0
    assert p.should_delay(s) is True


def test_demand_default_max_delay_passes_is_target() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 12)
    s = st_(11, 0, 5, active=10)
    results = [p.should_delay(s) for _ in range(13)]
    assert results == [True] * 12 + [False]


def test_demand_on_prefill_admitted_zero_keeps_counter() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 256)
    p.should_delay(st_(255, 1, 5))
    p.on_prefill_admitted(0)
    assert p.delayed_passes == 1


def test_demand_disabled_below_8_never_delays() -> None:
    p = DemandObserved(7)
    for _ in range(10):
        assert p.should_delay(st_(7, 0, 5, active=6)) is False
    assert p.delayed_passes == 0


def test_demand_small_target_does_not_delay() -> None:
    p = DemandObserved(MAX_RR)
    _at_target(p, 6)
    assert p.should_delay(st_(6, 0, 5, active=5)) is False


def test_demand_explicit_threshold() -> None:
    p = DemandObserved(MAX_RR, min_free_slots=8, max_delay_passes=100)
    _at_target(p, 256)
    assert p.should_delay(st_(250, 0, 5, active=249)) is True
    assert p.should_delay(st_(248, 0, 5, active=247)) is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_running_requests": 0},
        {"max_running_requests": 8, "min_free_slots": 0},
        {"max_running_requests": 8, "max_delay_passes": 0},
    ],
)
def test_demand_rejects_bad_args(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        DemandObserved(**kwargs)


@given(st.lists(states(), min_size=1, max_size=40), st.one_of(st.none(), st.integers(1, 5)))
def test_demand_invariants(seq: list[AdmissionState], max_passes: int | None) -> None:
    p = DemandObserved(MAX_RR, max_delay_passes=max_passes)
    for s in seq:
        before = p.target_running_bs
        delayed = p.should_delay(s)
        if s.running_bs == 0:
            assert not delayed and p.target_running_bs == 0 and p.delayed_passes == 0
            continue
        if s.waiting_bs == 0:
            assert not delayed and p.target_running_bs == before
            continue
        assert p.target_running_bs >= 0
        assert p.target_running_bs <= MAX_RR
        if delayed:
            # Never delays a growing batch, and never beyond the pass limit.
            assert (
                s.active_running_bs + min(s.num_allocatable_reqs, s.waiting_bs)
                <= p.target_running_bs
            )
            assert p.target_running_bs - s.running_bs < p.threshold_for(p.target_running_bs)
            limit = max_passes if max_passes is not None else p.target_running_bs
            assert 1 <= p.delayed_passes <= limit


@given(st.lists(st.tuples(states(), st.booleans()), min_size=1, max_size=60), st.integers(1, 4))
def test_demand_delays_at_most_max_passes_between_admissions(
    seq: list[tuple[AdmissionState, bool]], max_passes: int
) -> None:
    p = DemandObserved(MAX_RR, max_delay_passes=max_passes)
    run = 0
    for s, admitted in seq:
        if p.should_delay(s):
            run += 1
            assert run <= max_passes
        elif s.running_bs == 0:
            run = 0
        elif admitted:
            p.on_prefill_admitted(1)
            run = 0


# --- make_policy ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        (AdmissionDelay.none, NoDelay),
        (AdmissionDelay.min_free_slots, MinFreeSlots),
        (AdmissionDelay.min_free_slots_waiting_aware, MinFreeSlotsWaitingAware),
        (AdmissionDelay.demand_observed, DemandObserved),
    ],
)
def test_make_policy_class_and_name(kind: AdmissionDelay, cls: type) -> None:
    p = make_policy(ServerArgs(admission_delay=kind))
    assert type(p) is cls
    assert p.name == kind.value


def test_make_policy_passes_thresholds() -> None:
    p = make_policy(
        ServerArgs(
            admission_delay=AdmissionDelay.min_free_slots, max_running_requests=64, min_free_slots=6
        )
    )
    assert isinstance(p, MinFreeSlots) and p.threshold == 6
    p = make_policy(
        ServerArgs(
            admission_delay=AdmissionDelay.min_free_slots_waiting_aware, max_running_requests=12,
            speculative_algorithm="dspark", speculative_num_draft_tokens=4,
        )
    )
    assert isinstance(p, MinFreeSlotsWaitingAware) and p.threshold == 2
    p = make_policy(
        ServerArgs(
            admission_delay=AdmissionDelay.demand_observed,
            max_running_requests=128,
            min_free_slots=5,
            max_delay_passes=7,
        )
    )
    assert isinstance(p, DemandObserved)
    assert (p.max_running_requests, p.min_free_slots, p.max_delay_passes) == (128, 5, 7)


def test_make_policy_fresh_state_per_call() -> None:
    server = ServerArgs(admission_delay=AdmissionDelay.demand_observed, speculative_algorithm="dspark",
                        speculative_num_draft_tokens=4)
    a = make_policy(server)
    a.should_delay(st_(100, 0, 1))
    b = make_policy(server)
    assert b is not a
    assert b.target_running_bs == 0 and a.target_running_bs == 100


@pytest.mark.parametrize(("algo", "expected"), [("none", 0), ("eagle", 0), ("mtp", 0), ("dspark", 4), ("dflash", 4)])
def test_automatic_threshold_only_for_the_dflash_family(algo: str, expected: int) -> None:
    # sglang 0.5.23 min_free_slots_delayer.py resolve_min_free_slots: unset, the legacy
    # formula applies to DFLASH/DSPARK only; other algorithms stay disabled (older code
    # applied it to every workload)
    win = 1 if algo == "none" else 4
    steps = {"speculative_num_steps": win - 1} if algo in ("eagle", "mtp") else {}   # a chain states its steps
    for kind in ("min_free_slots", "min_free_slots_waiting_aware"):
        p = make_policy(ServerArgs(admission_delay=kind, max_running_requests=256,
                                   speculative_algorithm=algo, speculative_num_draft_tokens=win, **steps))
        assert p.threshold == expected
    # an explicit value wins for every algorithm
    p = make_policy(ServerArgs(admission_delay="min_free_slots", min_free_slots=3))
    assert p.threshold == 3
    # the demand-observed rule resolves its threshold the same way
    d = make_policy(ServerArgs(admission_delay="demand_observed", max_running_requests=256,
                               speculative_algorithm=algo, speculative_num_draft_tokens=win, **steps))
    assert d.enabled == (expected > 0)
