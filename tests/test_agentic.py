"""System B agentic cells (scenarios/agentic-c*.yaml, profiles/mi355x-dsv4pro-agentic.yaml).

The cells are one 8-GPU DP-attention instance of four (docs/agentic.md): multi-turn
conversations dispatched round robin over 8 lock-step ranks. Checks that the cells load
and run, that the ``output_size`` arm never blocks the host for DSpark slot expansion while
the base arm does, that round robin leaves the radix cache about one hit in eight, and that
the c128 base arm reproduces the reference within the tolerance the fit reached.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import Scenario, deep_merge, load_scenario
from specsched.sim.engine import run_scenario

ROOT = Path(__file__).resolve().parent.parent
CELLS = ("agentic-c128", "agentic-c192", "agentic-c256")
FIT_KEYS = (
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms",
    "output_throughput", "total_throughput", "request_throughput",
)
# |relative error| per figure of agentic-c128 at seed 1 (the scenario's seed) with the
# profile and cell values as fitted (docs/agentic.md section 11), rounded up to the next whole
# percent. The fit targets 5-seed means of all three cells, not this run: seed 1 is one draw
# of 64 turn-0 prompts and of the requests' accept lengths. The accept draws moved to a key
# of their own (sim/seed_streams.py ACCEPT; they had shared the prefix streams' key), which
# moved seed 1 (errors before -> after): mean TTFT -17.5 -> -15.7 %, median TTFT -13.5 ->
# -2.6 %, p90 TTFT -1.8 -> -2.8 %, mean / median / p90 TPOT -7.9 / -10.6 / -11.0 -> -4.3 /
# -6.5 / -9.0 %, output / total tok/s +6.4 / +5.5 -> +2.2 / +1.5 %, request throughput -2.8 ->
# -7.1 % (5-seed mean -7.7 -> -8.8 %). The bounds are the new seed 1's, by the same rule.
# The cells then moved from steady-window to whole-run throughputs (docs/agentic.md section
# 17: the window counted 15 % more tokens per completed request than the requests carry), which
# moved seed 1's throughputs (before -> after): output +2.2 -> -0.1 %, total +1.5 -> -5.7 %,
# request -7.1 -> -0.1 %; the latencies are the same run's. The total-throughput bound is the
# new reading's, not a loosening of the fit.
# Tighten these when the fit improves; never loosen them to pass.
TOLERANCE = {
    "mean_ttft_ms": 0.16, "median_ttft_ms": 0.03, "p90_ttft_ms": 0.03,       # reached -15.7 / -2.6 / -2.8 %
    "mean_tpot_ms": 0.05, "median_tpot_ms": 0.07, "p90_tpot_ms": 0.10,       # reached -4.3 / -6.5 / -9.0 %
    "output_throughput": 0.01, "total_throughput": 0.06, "request_throughput": 0.01,  # -0.1 / -5.7 / -0.1 %
}


def _path(cell: str) -> Path:
    return ROOT / "scenarios" / f"{cell}.yaml"


def _reduced(cell: str, arm: str, conversations: int = 8, turns: int = 2) -> Scenario:
    """The cell with a few short conversations (a quick run)."""
    sc = load_scenario(_path(cell), arm)
    wl = {"concurrency": conversations, "num_requests": conversations * turns,
          "multi_turn": {"num_conversations": conversations, "num_turns": turns}}
    return Scenario.model_validate(deep_merge(sc.model_dump(mode="json"), {"workload": wl}))


@cache
def _full(cell: str, arm: str) -> dict:
    return run_scenario(load_scenario(_path(cell), arm)).summary


@pytest.mark.parametrize("cell", CELLS)
def test_cell_declares_dp_attention_both_arms_and_the_reference(cell):
    sc = load_scenario(_path(cell))
    assert sc.workload.kind == "multi_turn"
    s = sc.server
    assert s.enable_dp_attention and s.dp_size == 8 and s.dp_spec_prefill_coordination
    assert s.enable_mixed_chunk  # docs/agentic.md section 10
    # whole-run throughputs, as bench_serving prints them for a multi-turn replay (section 17)
    assert sc.workload.steady_state_concurrency_ratio is None
    assert s.prefill_slot_expansion_sync is True
    assert load_scenario(_path(cell), "output_size").server.prefill_slot_expansion_sync is False
    assert set(FIT_KEYS) <= set(sc.reference["base"])
    assert len(sc.assumptions) >= 8
    if cell == "agentic-c128":
        assert {"mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms"} <= set(sc.reference["output_size"])
    else:
        assert "output_size" not in sc.reference  # held out


@pytest.mark.parametrize("arm", ["base", "output_size"])
def test_cell_runs_to_completion(arm):
    sc = _reduced("agentic-c256", arm)
    res = run_scenario(sc)
    s = res.summary
    assert s["completed"] == sc.workload.num_requests
    assert s["concurrency"] <= sc.workload.concurrency + 1e-9
    assert s["total_output_tokens"] == res.requests["output_len"].sum()
    for k in FIT_KEYS:
        assert s[k] > 0
    steps = res.steps
    inj = steps[steps["part"] == "inject"]
    # the slot-expansion HostBlock sits between a DSpark prefill's extend and its inject
    # launch; the engine books the blocked time on the inject
    blocked = int((inj["host_blocked_s"] > 0).sum())
    assert len(inj) > 0
    assert blocked == (len(inj) if arm == "base" else 0)


def test_round_robin_leaves_about_one_history_hit_in_eight():
    """A later turn finds its history on its rank only when round robin sends it back there
    (data_parallel_controller.py round_robin_scheduler): the hit rate stays far below the
    one-rank conversation's."""
    sc = _reduced("agentic-c128", "base", conversations=16, turns=3)
    big = {"server": {"max_total_num_tokens": 12_000_000}}  # every history fits: only routing misses
    sc = Scenario.model_validate(deep_merge(sc.model_dump(mode="json"), big))
    one = Scenario.model_validate(deep_merge(sc.model_dump(mode="json"), {"server": {"dp_size": 1}}))
    hit8 = run_scenario(sc).summary["cache_hit_rate"]
    hit1 = run_scenario(one).summary["cache_hit_rate"]
    assert hit1 > 0.5
    assert hit8 < 0.5 * hit1


def test_c128_base_arm_within_fitted_tolerance():
    sc = load_scenario(_path("agentic-c128"))
    s = _full("agentic-c128", "base")
    misses = []
    for k in FIT_KEYS:
        ref = sc.reference["base"][k]
        err = (s[k] - ref) / ref
        if abs(err) > TOLERANCE[k]:
            misses.append(f"{k}: model {s[k]:.4g} vs reference {ref:.4g} ({err:+.1%}, tolerance {TOLERANCE[k]:.0%})")
    assert not misses, "\n".join(misses)


def test_output_size_lowers_c128_mean_ttft():
    """Removing the slot-expansion host block lets the injection follow each chunk's extend
    at once, on every rank of the lock-step instance (with the block, the host wakes first).
    One prompt per rank, sent together: the two arms run the same forwards. (The full cell's
    two arms diverge after the first chunk; the host's total blocked time is no measure
    either: without the block it waits for the previous chunk's results instead, sglang's
    one-step-late result processing. docs/agentic.md section 11.)"""
    one = {arm: run_scenario(_reduced("agentic-c128", arm, conversations=8, turns=1))
           for arm in ("base", "output_size")}
    assert one["output_size"].summary["mean_ttft_ms"] < one["base"].summary["mean_ttft_ms"]
    for arm, res in one.items():
        s = res.steps.reset_index(drop=True)
        inj = s.index[s["part"] == "inject"]
        gap = s.loc[inj, "gpu_start_s"].to_numpy() - s.loc[inj - 1, "gpu_end_s"].to_numpy()
        assert ((gap > 0) if arm == "base" else (gap == 0)).all()


# ------------------------------------------------------------- the fit's helpers (no runs)
def _fit_module():
    from tests.conftest import load_benchmark

    return load_benchmark("fit_agentic_profile")


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(0.1, 1.2), mean=st.floats(2e4, 4e5))
def test_prompt_shape_is_read_back_from_the_histogram(tmp_path_factory, sigma, mean):
    """INV-A1: the prompt shape the fit writes (``prompt_histogram``) is the one it reads back
    (``sigma_of``), so a refit starts where the files are; the capped mean is the implied one."""
    fit = _fit_module()
    lengths = fit.prompt_histogram(mean, sigma)
    path = tmp_path_factory.mktemp("h") / "lengths.csv"
    path.write_text(fit.lengths_csv(lengths))
    assert abs(fit.sigma_of(path) - sigma) < 2e-3
    assert abs(lengths.mean() - mean) / mean < 1e-3


def test_gauss_newton_finds_a_linear_least_squares_minimum_within_its_budget():
    """The fit's Gauss-Newton stage reaches the minimum of linear residuals (three
    parameters, 27 errors) in 1 + 3 difference calls and a few steps, and never exceeds
    ``max_evals`` calls."""
    import numpy as np

    fit = _fit_module()
    rng = np.random.default_rng(3)
    a, target = rng.normal(size=(27, 3)), np.array([0.1, -0.05, 0.2])
    b = a @ target + 0.01 * rng.normal(size=27)
    calls = []

    def residuals(z):
        calls.append(z)
        return a @ z - b

    x = fit.gauss_newton(residuals, np.zeros(3), np.full(3, 0.02), max_evals=8, verbose=False)
    best = np.linalg.lstsq(a, b, rcond=None)[0]
    assert len(calls) <= 8
    assert np.sum((a @ x - b) ** 2) <= np.sum((a @ best - b) ** 2) * 1.01


def test_run_length_scales_conversations_with_the_concurrency():
    fit = _fit_module()
    per_cell = fit.run_length_overrides(4)
    for cell in CELLS:
        w = load_scenario(_path(cell)).workload
        ov = per_cell[cell]["workload"]
        assert ov["multi_turn"]["num_conversations"] == 4 * w.concurrency
        assert ov["num_requests"] == 4 * w.concurrency * w.multi_turn.num_turns


def test_profile_set_overrides_a_profile_key_and_refuses_unknown_keys_and_bad_values():
    """``--profile-set`` (exploration only) puts a dotted profile value in, validated as the
    loader validates it; an unknown key or a refused value is a ValueError naming the item,
    which the command line turns into one line and exit 2, as it does with ``--write``."""
    fit = _fit_module()
    from specsched.sim.profile import load_profile

    prof = load_profile(str(fit.PROFILE))
    grid = "{x: [1, 2048], context_len: [0, 150000], seconds: [[1.0e-5, 1.4e-5], [0.02, 0.03]]}"
    p = fit.profile_sets(prof, [f"gpu.extend={grid}", "gpu.draft_inject_per_token_s=6e-7"])
    assert list(p.gpu.extend.context_len) == [0, 150000]
    assert p.gpu.extend.seconds[1][1] == pytest.approx(0.03)
    assert p.gpu.draft_inject_per_token_s == pytest.approx(6e-7)
    assert prof.gpu.extend.context_len == [0.0]  # the loaded profile is left as it was
    for bad, says in (("gpu.nosuch=1", "no key 'gpu.nosuch'"), ("gpu.eager_factor=abc", "gpu.eager_factor"),
                      ("gpu.extend", "expected KEY=VALUE"), ("gpu.eager_factor=[1", "not valid YAML")):
        with pytest.raises(ValueError, match=says):
            fit.profile_sets(prof, [bad])
    for argv in (["--report-only", "--profile-set", "gpu.nosuch=1"], ["--write", "--profile-set", "gpu.eager_factor=1"]):
        with pytest.raises(SystemExit) as e:
            fit.main(argv)
        assert e.value.code == 2


def test_seed_ranges_and_the_seed_noise_of_a_figure():
    """``--seeds 1-20`` is seeds 1 to 20; a bad item is one line, exit 2. The table's standard
    error is that of the mean over the seeds (sd / sqrt(n), % of the mean), and an arm's change
    is taken seed by seed against its own base (paired: a seed's two arms share the workload),
    so a change common to every seed has no standard error even when the seeds differ."""
    import numpy as np

    fit = _fit_module()
    assert fit.parse_seeds("1-5,9,3") == [1, 2, 3, 4, 5, 9]
    assert fit.parse_seeds("7") == [7]
    for bad in ("0-3", "5-2", "x", "1,,2"):
        with pytest.raises(ValueError, match="--seeds"):
            fit.parse_seeds(bad)
        with pytest.raises(SystemExit) as e:
            fit.main(["--report-only", "--seeds", bad])
        assert e.value.code == 2
    v = np.array([90.0, 100.0, 110.0, 100.0])
    assert fit.standard_error_pct(v) == pytest.approx(np.std(v, ddof=1) / 2 / 100 * 100)
    assert np.isnan(fit.standard_error_pct(v[:1]))
    base = np.array([100.0, 200.0, 400.0])
    change, se = fit.paired_change_pct(base, base * 0.9)
    assert change == pytest.approx(-10.0) and se == pytest.approx(0.0, abs=1e-12)
    change, se = fit.paired_change_pct(base, base[::-1])  # the seeds' own spread, not a change
    assert se > 10
