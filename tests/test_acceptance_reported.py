"""The accept length a run reports against the ``acceptance.mean_accept_length`` it was
given: the setting is the population mean of the requests' own means; the report is
verify-weighted like SGLang's ``avg_spec_accept_length`` (accepted tokens over verify rows,
managers/scheduler_components/metrics_reporter.py), so a per-request spread lowers the
report and only spread 0 makes the two agree (sim/acceptance_config.py)."""

from __future__ import annotations

import numpy as np
from specsched.sim.config import load_scenario, with_value
from specsched.sim.engine import run_scenario

from tests.conftest import ROOT

TARGET = 3.0


def _run(spread: float) -> tuple[float, float]:
    """(reported accept length, mean over requests of their own tokens per verify)."""
    sc = load_scenario(ROOT / "scenarios" / "batch8-ll.yaml")
    for key, value in (("acceptance.mean_accept_length", TARGET), ("acceptance.request_spread", spread),
                       ("workload.num_requests", 48)):
        sc = with_value(sc, key, value)
    r = run_scenario(sc, seed=3)
    q = r.requests
    per_request = float(np.mean((q["output_len"] - 1) / q["spec_cycles"]))
    return float(r.summary["accept_length"]), per_request


def test_reported_accept_length_matches_the_setting_only_without_spread():
    reported = {s: _run(s) for s in (0.0, 1.0, 2.0)}
    rep0, own0 = reported[0.0]
    assert abs(rep0 - TARGET) < 0.1 and abs(own0 - TARGET) < 0.15
    # the requests' own means stay near the setting at every spread ...
    for _, own in reported.values():
        assert abs(own - TARGET) < 0.35
    # ... while the verify-weighted report falls as the spread grows
    assert rep0 > reported[1.0][0] + 0.1 > reported[2.0][0] + 0.2
