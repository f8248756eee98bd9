"""A measured run reports bench_serving steady_state_serving's separate result as a simulated
one does (sim/steady_state.py): with ``workload.steady_state_concurrency_ratio`` the runtime's
summary carried none of the ``steady_*`` keys, so ``specsched measure`` wrote no
``steady_state.jsonl`` and printed no Steady-State block for a scenario that asks for them."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402
from specsched.sim.results import write_results  # noqa: E402
from specsched.sim.steady_state import SUMMARY_KEYS  # noqa: E402

from tests.conftest import make_scenario, tiny_profile  # noqa: E402


def test_a_measured_run_has_the_steady_state_result(tmp_path) -> None:
    sc = make_scenario(workload={"kind": "closed_loop", "concurrency": 4, "num_requests": 12,
                                 "input_len": {"kind": "fixed", "value": 24},
                                 "output_len": {"kind": "uniform", "value": 24, "range_ratio": 0.5},
                                 "steady_state_concurrency_ratio": 0.5})
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    simulated = SimEngine(sc, tiny_profile()).run()
    keys = {k for k in simulated.summary if k.startswith("steady_")}
    assert set(SUMMARY_KEYS.values()) <= keys
    assert keys <= set(measured.summary)
    # the closed loop holds 4 in flight: the same threshold, the peak, under either clock
    for k in ("steady_concurrency_threshold", "steady_peak_concurrency"):
        assert measured.summary[k] == simulated.summary[k], k
    assert 0 < measured.summary["steady_duration"] <= measured.summary["duration"]
    write_results(measured, tmp_path / "m")
    assert (tmp_path / "m" / "steady_state.jsonl").is_file()


def test_a_measured_run_without_a_ratio_has_no_steady_keys() -> None:
    sc = make_scenario(workload={"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 16},
                                 "output_len": {"kind": "fixed", "value": 4}})
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    assert not [k for k in measured.summary if k.startswith("steady_") and k not in ("steady_verify_cycles",)]
