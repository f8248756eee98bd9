"""The steady plain-decode window: decode steps/s of a run without speculative decoding.

The plain counterpart of "verify cycles/s" (sim/compact_records.py
``StepTotals.steady_decode_window``): consecutive main decode steps at the run's largest
decode batch, no other main launch between. The same figure, to the bit, whether the
decode was collapsed in closed form (sim/plain_run.py, sim/plain_timeline.py) or stepped,
with full or compact records.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.compact_records import StepTotals
from specsched.sim.engine import SimEngine
from specsched.sim.metrics import summarize
from specsched.sim.report import format_report

from tests.conftest import ROOT, make_scenario, tiny_profile

# a hand-made steps table: decode at 4 (3 rows), a prefill, decode at 4 (2 rows, an inject
# part between them, which does not break the run), decode at 3 (2 rows), a verify
_ROWS = [
    ("decode", "main", 4, 0.0, 1.0), ("decode", "main", 4, 1.0, 2.0), ("decode", "main", 4, 2.0, 3.5),
    ("extend", "main", 1, 3.5, 4.0),
    ("decode", "main", 4, 4.0, 5.0), ("decode", "inject", 4, 5.0, 5.2), ("decode", "main", 4, 5.2, 6.5),
    ("decode", "main", 3, 6.5, 7.0), ("decode", "main", 3, 7.0, 7.5),
]


def _table() -> pd.DataFrame:
    df = pd.DataFrame(_ROWS, columns=["mode", "part", "batch_size", "gpu_start_s", "gpu_end_s"])
    df["host_blocked_s"] = 0.0
    df["accepted_tokens"] = df["batch_size"]
    df["decoding_reqs"] = df["batch_size"]
    return df


def test_decode_window_counts_consecutive_main_decode_steps_at_the_largest_batch():
    st = StepTotals()
    st.add_table(_table())
    # at batch 4: 2 intervals over 1.0 -> 3.5 and 1 over 5.0 -> 6.5 (the prefill breaks it)
    assert st.steady_decode_window() == (3, 4.0)
    one = StepTotals()
    for m, p, bs, s, e in _ROWS:
        one.add_one(m, p, bs, s, e, 0.0, bs, bs)
    assert one.steady_decode_window() == (3, 4.0)
    # a closed-form stretch gives its runs of one batch size (the last two rows of batch 4
    # and the two of batch 3) and continues the open run
    run = StepTotals()
    for m, p, bs, s, e in _ROWS[:5]:
        run.add_one(m, p, bs, s, e, 0.0, bs, bs)
    run.add_decode_run(3, 5.2, 7.5, 0.0, 0.0, 3, [(4, 1, 6.5, 6.5), (3, 2, 7.0, 7.5)])
    assert run.steady_decode_window() == (3, 4.0)
    out = summarize(pd.DataFrame({"rid": [0], "start_s": [0.0], "first_token_s": [1.0], "finish_s": [7.5],
                                  "input_len": [10], "output_len": [8]}),
                    pd.DataFrame({"rid": [0], "time_s": [1.0], "n_tokens": [1]}), _table())
    assert out["decode_steps_per_s"] == 3 / 4.0 and out["decode_step_ms"] == 1000.0 * 4.0 / 3
    assert math.isnan(out["verify_cycles_per_s"])


def _naive(steps: pd.DataFrame) -> float:
    """Decode steps/s by the definition, interval by interval, from a full steps table."""
    main = steps[steps["part"] == "main"]
    top = main.loc[main["mode"] == "decode", "batch_size"].max()
    mode, bs, end = main["mode"].to_numpy(), main["batch_size"].to_numpy(), main["gpu_end_s"].to_numpy()
    ok = (mode[1:] == "decode") & (mode[:-1] == "decode") & (bs[1:] == top) & (bs[:-1] == top)
    return ok.sum() / np.diff(end)[ok].sum()


@pytest.mark.parametrize("name", ["batch8-ll.yaml", "burst256-ht.yaml"])
def test_a_plain_run_reports_decode_steps_per_s_the_same_on_every_path(name):
    sets = ["server.speculative_algorithm=none"]
    if name.startswith("burst"):   # fewer and shorter requests: the step-by-step path is slow
        sets += ["workload.num_requests=64", "workload.output_len.value=400"]
    sc = load_scenario_with_overrides(str(ROOT / "scenarios" / name), "base", sets)
    runs = {(ff, rec): SimEngine(sc, fast_forward=ff, records=rec).run()
            for ff in (True, False) for rec in ("full", "compact")}
    fast = runs[True, "compact"]
    assert fast.extra["fast_forward_iterations"] > 0.9 * fast.extra["num_passes"]   # collapsed
    got = {k: r.summary["decode_steps_per_s"] for k, r in runs.items()}
    assert len(set(got.values())) == 1, got     # bit-identical
    rate = got[True, "full"]
    assert math.isfinite(rate) and rate == pytest.approx(_naive(runs[False, "full"].steps), rel=1e-12)
    # one step's wall: the median ITL of a plain decode at the full batch
    assert 1000.0 / rate == pytest.approx(fast.summary["median_itl_ms"], rel=0.02)
    text = format_report(fast.summary)
    assert f"{'Decode steps/s (steady batch):':<41}{rate:>9.2f}" in text


def test_a_speculative_run_has_no_decode_steps_figure():
    sc = make_scenario(workload={"num_requests": 4})
    res = SimEngine(sc, tiny_profile()).run()
    assert math.isfinite(res.summary["verify_cycles_per_s"])
    assert math.isnan(res.summary["decode_steps_per_s"]) and math.isnan(res.summary["decode_step_ms"])
    assert "Decode steps/s" not in format_report(res.summary)


def test_a_plain_deployment_pools_its_decode_servers_windows():
    """Prefill-decode: each decode server's steady decode window, pooled (sim/disagg_records.py
    ``deployment_step_summary``), equal on the collapsed and the step-by-step path."""
    from tests.test_disaggregation import _pd, _profile

    sc = make_scenario(_pd(1, 2, speculative_algorithm="none", speculative_num_draft_tokens=1),
                       {"num_requests": 12, "input_len": {"kind": "fixed", "value": 300},
                        "output_len": {"kind": "fixed", "value": 200}}, seed=3)
    fast = SimEngine(sc, _profile()).run().summary
    step = SimEngine(sc, _profile(), fast_forward=False).run().summary
    assert math.isfinite(fast["decode_steps_per_s"]) and math.isnan(fast["verify_cycles_per_s"])
    assert fast["decode_steps_per_s"] == pytest.approx(step["decode_steps_per_s"], rel=1e-12)
    assert fast["decode_step_ms"] == pytest.approx(1000.0 / fast["decode_steps_per_s"], rel=1e-12)


def test_more_decode_steps_per_second_is_better_in_a_comparison():
    from specsched.analysis import compare

    row = {"metric": "decode_steps_per_s", "change_pct": 3.0, "ci_low_pct": 2.0, "ci_high_pct": 4.0, "noise_pct": 0.5}
    assert compare.verdict(row) == "better"
    assert compare.verdict({**row, "metric": "decode_step_ms"}) == "worse"
