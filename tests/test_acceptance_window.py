"""Acceptance across verify windows: per-position rates measured at one window carry to
others (diminishing returns), old scenarios are unchanged, and a window sweep or a drafter
change moves verify cycles/s, TPOT and throughput the way the mechanism implies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel, extend_rates, mean_accept_length
from specsched.sim.config import AcceptanceConfig, load_scenario, with_value
from specsched.sim.engine import run_scenario

from tests.conftest import ROOT


def pop_mean(cfg: AcceptanceConfig, window: int) -> float:
    return AcceptanceModel(cfg, window, seed=1).mean


@settings(max_examples=40, deadline=None)
@given(target=st.floats(1.2, 5.5), spread=st.floats(0.0, 1.0), decay=st.floats(0.6, 1.0))
def test_mean_holds_at_its_window_and_longer_windows_add_ever_less(target, spread, decay):
    assume(target < 1 + sum(decay ** (i * (i + 1) / 2) for i in range(5)) - 0.05)
    try:
        cfg = AcceptanceConfig(mean_accept_length=target, request_spread=spread, window=6, rate_decay=decay)
        means = [pop_mean(cfg, w) for w in range(2, 11)]
    except ValueError as e:  # the per-request spread lowers the reachable mean below the bound above
        assert "out of reach" in str(e)
        reject()
    assert means[4] == pytest.approx(target, abs=1e-6)
    gains = np.diff(means)
    assert (gains >= -1e-12).all()                      # a longer window never accepts less
    assert (np.diff(gains) <= 1e-9).all()               # ... and each position adds less than the last
    assert all(1.0 <= m <= w for m, w in zip(means, range(2, 11), strict=True))


def test_scenarios_without_a_window_are_unchanged():
    """No ``window``: the rates are solved at the run's window (the old model), draw for draw."""
    cfg = AcceptanceConfig(mean_accept_length=3.2, request_spread=0.25)
    same = AcceptanceConfig(mean_accept_length=3.2, request_spread=0.25, window=6)
    a, b = AcceptanceModel(cfg, 6, 3), AcceptanceModel(same, 6, 3)
    np.testing.assert_array_equal(a.base_logits, b.base_logits)
    assert [a.draw(r, c) for r in range(5) for c in range(50)] == [b.draw(r, c) for r in range(5) for c in range(50)]
    assert np.ptp(a.base_logits) == 0                   # one constant rate, as before


def test_given_rates_are_cut_or_continued():
    assert extend_rates(np.array([0.9, 0.8, 0.7]), 2, 1.0).tolist() == [0.9, 0.8]
    assert extend_rates(np.array([0.9, 0.8]), 4, 0.5).tolist() == pytest.approx([0.9, 0.8, 0.4, 0.2])
    cfg = AcceptanceConfig(per_position_rates=[0.9, 0.8, 0.7])
    assert pop_mean(cfg, 3) == pytest.approx(mean_accept_length(np.array([0.9, 0.8])))


def test_histogram_measured_at_its_window_extends_past_it():
    hist = [0.2, 0.2, 0.2, 0.4]                          # measured at window 4
    short = pop_mean(AcceptanceConfig(histogram=hist), 4)
    longer = pop_mean(AcceptanceConfig(histogram=hist, window=4), 6)
    assert short == pytest.approx(sum(k * h for k, h in enumerate(hist, 1)))
    assert longer > short
    assert pop_mean(AcceptanceConfig(histogram=hist, window=4), 4) == pytest.approx(short)


def test_empty_rates_and_non_finite_histograms_are_refused():
    with pytest.raises(ValueError):
        AcceptanceConfig(per_position_rates=[])
    with pytest.raises(ValueError):
        AcceptanceConfig(histogram=[float("inf"), 1.0])


# ----------------------------------------------------------------- through the simulator
def _cell(window: int | None = None, algo: str | None = None, batch: int = 8):
    sc = load_scenario(ROOT / "scenarios" / f"batch{batch}-ll.yaml")
    sc = with_value(sc, "workload.num_requests", batch)
    sc = with_value(sc, "workload.output_len.value", 256)
    if window is not None:
        sc = with_value(sc, "server.speculative_num_draft_tokens", window)
    if algo is not None:
        sc = with_value(sc, "server.speculative_algorithm", algo)
    return run_scenario(sc).summary


def test_window_sweep_moves_cycles_and_has_an_optimum():
    """At batch 64 the verify forward is past its memory-bound regime: an interior optimum."""
    runs = {w: _cell(window=w, batch=64) for w in range(2, 9)}
    cycles = [runs[w]["verify_cycles_per_s"] for w in range(2, 9)]
    accept = [runs[w]["accept_length"] for w in range(2, 9)]
    tput = [runs[w]["decode_throughput"] for w in range(2, 9)]
    assert all(b < a for a, b in zip(cycles, cycles[1:], strict=False))   # more tokens per verify: slower cycles
    assert accept[-1] > accept[0]
    best = int(np.argmax(tput))
    assert 0 < best < len(tput) - 1                                        # neither the shortest nor the longest


def test_chain_drafter_is_slower_per_cycle_at_equal_acceptance():
    block, chain = _cell(window=6), _cell(window=6, algo="eagle")
    assert chain["verify_cycles_per_s"] < block["verify_cycles_per_s"]
    assert chain["median_tpot_ms"] > block["median_tpot_ms"]
    assert chain["output_throughput"] < block["output_throughput"]
