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
# profile as fitted (docs/agentic.md section 10), rounded up to the next whole percent. The
# fit targets 5-seed means of all three cells, not this run: the cells' mixed chunks and
# steady-state throughputs replaced section 5's hand probes of this seed, and four bounds
# wider than those probes' (TTFT mean and median, TPOT mean and median) are this model's
# seed-1 misses, not a tuning. Tighten these when the fit improves; never loosen them to pass.
TOLERANCE = {
    "mean_ttft_ms": 0.18, "median_ttft_ms": 0.05, "p90_ttft_ms": 0.05,       # reached -17.3 / -4.6 / -4.3 %
    "mean_tpot_ms": 0.11, "median_tpot_ms": 0.13, "p90_tpot_ms": 0.10,       # reached -10.8 / -12.8 / -9.5 %
    "output_throughput": 0.09, "total_throughput": 0.08, "request_throughput": 0.02,  # +8.5 / +7.8 / -1.3 %
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
    assert s.enable_mixed_chunk and sc.workload.steady_state_concurrency_ratio == 0.8  # docs/agentic.md section 10
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
    hit8 = run_scenario(sc).summary.get("cache_hit_rate", 0.0)
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
    """Removing the slot-expansion host block shortens every forward that carries a DSpark
    prefill chunk, for every rank of the lock-step instance."""
    base, fixed = _full("agentic-c128", "base"), _full("agentic-c128", "output_size")
    assert fixed["host_blocked_s"] < base["host_blocked_s"]
    # one prompt per rank, sent together: the two arms run the same forwards, each shorter
    # without the block (the full cell's two arms diverge after the first chunk: at seed 1
    # their mean TTFTs differ by less than the seed-to-seed spread, docs/agentic.md section 10)
    one = {arm: run_scenario(_reduced("agentic-c128", arm, conversations=8, turns=1)).summary
           for arm in ("base", "output_size")}
    assert one["output_size"]["mean_ttft_ms"] < one["base"]["mean_ttft_ms"]


PD_CELLS = ("agentic-pd-c128", "agentic-pd-c192", "agentic-pd-c256")


@pytest.mark.parametrize("cell", PD_CELLS)
def test_pd_cell_declares_the_layout_and_the_reference(cell):
    sc = load_scenario(_path(cell))
    d = sc.server.disaggregation
    assert d is not None and d.prefill.instances == 1 and d.decode.instances == 1   # half of 2P2D
    for role in ("prefill", "decode"):
        r = sc.server.role_server(role)
        assert r.enable_dp_attention and r.dp_size == 8 and r.disaggregation_mode == role
    assert sc.server.role_server("decode").disable_radix_cache
    assert load_scenario(_path(cell), "output_size").server.prefill_slot_expansion_sync is False
    assert set(FIT_KEYS) <= set(sc.reference["base"]) and len(sc.assumptions) >= 8
    assert ("output_size" in sc.reference) == (cell == "agentic-pd-c128")


def test_pd_cell_prefill_blocks_only_on_its_prefill_servers():
    """Disaggregated, the DSpark slot-expansion block stalls the prefill server's host only:
    the decode server runs no extend (no inject, no block) in either arm."""
    from specsched.sim.engine import SimEngine

    for arm in ("base", "output_size"):
        eng = SimEngine(_reduced("agentic-pd-c128", arm, conversations=4, turns=2))
        res = eng.run()
        assert res.summary["completed"] == 8
        assert (res.steps["num_extend_tokens"] == 0).all() and set(res.steps["part"]) == {"main"}
        steps = eng.prefill[0].rec.tables({})[2]
        inj = steps["part"] == "inject"
        # the slot-expansion HostBlock sits between an extend and its inject launch; the
        # engine books the blocked time on the inject
        assert inj.sum() > 0 and set(steps["mode"]) == {"extend"}
        assert int((steps["host_blocked_s"][inj] > 0).sum()) == (inj.sum() if arm == "base" else 0)
