"""System B agentic cells (scenarios/agentic-c*.yaml, profiles/mi355x-dsv4pro-agentic.yaml).

Checks that the cells load and run, that the ``output_size`` arm never blocks the host for
DSpark slot expansion while the base arm does, and that the base arm reproduces the fitted
reference figures within the tolerance the fit reached (docs/agentic.md gives the table).
"""

from __future__ import annotations

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
# Largest |relative error| per figure over the three cells after the fit (seed 1, the
# scenarios' seed; docs/agentic.md has the table), rounded up to the next whole percent.
# Tighten these when the fit improves; never loosen them to pass.
TOLERANCE = {
    "mean_ttft_ms": 0.18, "median_ttft_ms": 0.18, "p90_ttft_ms": 0.18,      # reached 17.7 / 17.6 / 17.0 % (median: 16.8 % before the batch_is_full latch)
    "mean_tpot_ms": 0.08, "median_tpot_ms": 0.16, "p90_tpot_ms": 0.20,      # reached 7.7 / 15.5 / 19.3 %
    "output_throughput": 0.13, "total_throughput": 0.16, "request_throughput": 0.17,  # 12.3 / 15.3 / 16.1 %
}


def _path(cell: str) -> Path:
    return ROOT / "scenarios" / f"{cell}.yaml"


def _reduced(cell: str, arm: str, per_slot: int = 2) -> Scenario:
    """The cell with ``per_slot`` requests per concurrency slot (a short run)."""
    sc = load_scenario(_path(cell), arm)
    n = per_slot * sc.workload.concurrency
    return Scenario.model_validate(deep_merge(sc.model_dump(mode="json"), {"workload": {"num_requests": n}}))


@pytest.mark.parametrize("cell", CELLS)
def test_cell_declares_both_arms_and_the_reference(cell):
    sc = load_scenario(_path(cell))
    assert sc.workload.kind == "closed_loop"
    assert sc.server.prefill_slot_expansion_sync is True
    assert load_scenario(_path(cell), "output_size").server.prefill_slot_expansion_sync is False
    assert set(FIT_KEYS) <= set(sc.reference["base"])
    assert len(sc.assumptions) >= 5
    if cell == "agentic-c128":
        assert {"mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms"} <= set(sc.reference["output_size"])
    else:
        assert "output_size" not in sc.reference  # held out


@pytest.mark.parametrize("arm", ["base", "output_size"])
@pytest.mark.parametrize("cell", CELLS)
def test_cell_runs_to_completion(cell, arm):
    sc = _reduced(cell, arm)
    res = run_scenario(sc)
    s = res.summary
    assert s["completed"] == sc.workload.num_requests
    assert s["concurrency"] <= sc.workload.concurrency + 1e-9
    assert s["total_output_tokens"] == res.requests["output_len"].sum()
    for k in FIT_KEYS:
        assert s[k] > 0


def _inject_blocks(cell: str, arm: str) -> tuple[int, int]:
    """(inject launches, inject launches preceded by a host block) in a short run.

    The loop issues the slot-expansion HostBlock between a DSpark prefill's extend launch and
    its inject launch, and the engine books the blocked time on the next launch: the inject.
    """
    steps = run_scenario(_reduced(cell, arm, per_slot=1)).steps
    inj = steps[steps["part"] == "inject"]
    return len(inj), int((inj["host_blocked_s"] > 0).sum())


@pytest.mark.parametrize("cell", ["agentic-c128", "agentic-c256"])
def test_output_size_arm_never_blocks_for_slot_expansion(cell):
    n_base, blocked_base = _inject_blocks(cell, "base")
    n_os, blocked_os = _inject_blocks(cell, "output_size")
    assert n_base > 0 and n_os > 0
    assert blocked_base == n_base  # every DSpark prefill chunk blocks the host in the base arm
    assert blocked_os == 0


def test_base_arm_within_fitted_tolerance():
    misses = []
    for cell in CELLS:
        sc = load_scenario(_path(cell))
        s = run_scenario(sc).summary
        for k in FIT_KEYS:
            ref = sc.reference["base"][k]
            err = (s[k] - ref) / ref
            if abs(err) > TOLERANCE[k]:
                misses.append(f"{cell} {k}: model {s[k]:.4g} vs reference {ref:.4g} ({err:+.1%}, tolerance {TOLERANCE[k]:.0%})")
    assert not misses, "\n".join(misses)


def test_output_size_lowers_c128_mean_ttft_as_calibrated():
    """host.schedule_s was fitted to the c128 pair: the model reaches -3.9 % mean TTFT
    (measured -9.3 %, docs/agentic.md section 6); it must keep at least -3.8 %."""
    base = run_scenario(load_scenario(_path("agentic-c128"))).summary
    fixed = run_scenario(load_scenario(_path("agentic-c128"), "output_size")).summary
    assert fixed["mean_ttft_ms"] / base["mean_ttft_ms"] - 1 <= -0.038
    assert fixed["host_blocked_s"] < base["host_blocked_s"]
