"""Workload semantics: lengths (fixed, uniform range ratio, file histogram), bench_serving's
Poisson with max_concurrency (timer starts at slot acquisition), closed loop, burst ingest."""

from __future__ import annotations

import numpy as np
import pytest
from specsched.sim.config import LengthDist
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.workload import draw_lengths, poisson_arrivals, replay_send_times

from tests.conftest import make_scenario, tiny_profile


def test_uniform_lengths_follow_range_ratio():
    x = draw_lengths(LengthDist(kind="uniform", value=1000, range_ratio=0.5), 5000, np.random.default_rng(0), None, "k")
    assert x.min() >= 500 and x.max() <= 1000 and abs(x.mean() - 750) < 10


def test_file_histogram(tmp_path):
    f = tmp_path / "h.csv"
    f.write_text("length,weight\n10,1\n20,3\n")
    x = draw_lengths(LengthDist(kind="file", path=str(f)), 4000, np.random.default_rng(0), None, "k")
    assert set(np.unique(x)) == {10, 20} and abs((x == 20).mean() - 0.75) < 0.03
    bad = tmp_path / "b.csv"
    bad.write_text("len,w\n1,1\n")
    with pytest.raises(ConfigError, match="length,weight"):
        draw_lengths(LengthDist(kind="file", path=str(bad)), 3, np.random.default_rng(0), None, "workload.input_len")


@pytest.mark.parametrize(("text", "needle"), [
    ("length,weight\n10,1\n20,\n", "weight"),                        # an empty weight: NaN probabilities
    ("length,weight\n10,1\n20,1,3\n", "h.csv:3"),                    # a row of 3 fields: ParserError
    ("length,weight\n10,1\nabc,1\n", "length"),                       # text in a column: TypeError
    ("length,weight\n10,1\n99999999999999999999999,1\n", "length"),   # past int64: OverflowError
    ("", "length,weight"),                                            # empty: EmptyDataError
    ("length,weight\n10,1\n20,inf\n", "weight"),                      # an infinite weight: NaN probabilities
    ("length,weight\n10.5,1\n", "length"),                             # a fractional length, cut to 10 before
    ("length,weight\n\xff\xfe,1\n", "UTF-8"),
])
def test_a_bad_histogram_is_one_line_naming_its_file_and_column(tmp_path, text, needle):
    """Found by fuzzing the readers: each of these was a traceback (or silently cut)."""
    f = tmp_path / "h.csv"
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        draw_lengths(LengthDist(kind="file", path=str(f)), 3, np.random.default_rng(0), None, "workload.input_len")
    msg = str(e.value)
    assert msg.startswith(str(f)) and "\n" not in msg and needle in msg, msg


def test_poisson_gaps_have_the_requested_rate():
    t = poisson_arrivals(20000, 4.0, seed=1)
    assert abs(np.diff(t).mean() - 0.25) < 0.01


def test_poisson_max_concurrency_timer_starts_at_slot_acquisition():
    sc = make_scenario(workload={"kind": "poisson", "num_requests": 6, "request_rate": 1000.0, "max_concurrency": 1,
                                 "output_len": {"kind": "fixed", "value": 30}})
    res = SimEngine(sc, tiny_profile()).run()
    r = res.requests.sort_values("start_s")
    # one slot: each request starts when the previous finished (client queueing excluded)
    assert np.allclose(r["start_s"].to_numpy()[1:], r["finish_s"].to_numpy()[:-1])
    assert (r["ttft_s"] < 0.05).all()


def test_replayed_send_times_are_the_runs_own_start_times():
    # a run's finish times replayed through its clients give back each request's start:
    # the arrival, or the freed slot's time (one slot here, so each waits for the last)
    sc = make_scenario(workload={"kind": "poisson", "num_requests": 6, "request_rate": 1000.0, "max_concurrency": 1,
                                 "output_len": {"kind": "fixed", "value": 30}})
    r = SimEngine(sc, tiny_profile()).run().requests
    sent = replay_send_times(sc, dict(zip(r["rid"].tolist(), r["finish_s"].tolist(), strict=True)))
    assert sorted(sent) == sorted(r["rid"].tolist())
    assert np.allclose([sent[i] for i in r["rid"]], r["start_s"].to_numpy())


def test_closed_loop_keeps_concurrency_in_flight():
    sc = make_scenario(workload={"kind": "closed_loop", "num_requests": 12, "concurrency": 3})
    res = SimEngine(sc, tiny_profile()).run()
    r = res.requests
    t = np.linspace(r["start_s"].min() + 1e-6, r.nsmallest(9, "finish_s")["finish_s"].max() - 1e-6, 50)
    inflight = [((r["start_s"] <= x) & (r["finish_s"] > x)).sum() for x in t]
    assert max(inflight) == 3 and min(inflight) >= 2


def test_burst_requests_reach_the_scheduler_through_the_tokenizer_fifo():
    sc = make_scenario(workload={"kind": "burst", "num_requests": 16})
    eng = SimEngine(sc, tiny_profile(ingest_per_request_s=1e-3))
    res = eng.run()
    first = res.steps.iloc[0]
    # the first scheduling pass sees only the first request (the rest are still ingested)
    assert first["mode"] == "extend" and first["num_extend_tokens"] == 500
    assert (res.requests["start_s"] == 0).all()


def test_a_uniform_shift_of_the_send_times_changes_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_serving sends its first request at t = 0 (SGLang 0.5.23 benchmark/serving.py
    get_request) where ``poisson_arrivals`` sends it one gap later; every figure is measured
    from the first send, so shifting every send time by the first changes none."""
    import specsched.sim.workload as workload
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario

    from tests.conftest import ROOT

    sc = load_scenario(ROOT / "scenarios" / "poisson8b-fixed.yaml")
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"num_requests": 80})})
    before = run_scenario(sc, seed=3)
    drawn = workload.poisson_arrivals
    monkeypatch.setattr(workload, "poisson_arrivals", lambda n, rate, seed: (lambda t: t - t[0])(drawn(n, rate, seed)))
    after = run_scenario(sc, seed=3)
    assert after.requests["start_s"].min() == 0.0 < before.requests["start_s"].min()
    a, b = before.summary, after.summary
    assert a.keys() == b.keys()
    num = [k for k in a if isinstance(a[k], float)]
    assert [b[k] for k in num] == pytest.approx([a[k] for k in num], rel=1e-9, nan_ok=True)  # sums of shifted times
    assert {k: b[k] for k in a if k not in num} == {k: a[k] for k in a if k not in num}


def test_a_missing_length_histogram_names_its_path_key_and_where_it_was_looked_for(tmp_path):
    """A `file` length whose CSV is not there names workload.input_len.path (the key to fix,
    as a missing trace names workload.trace.path) and where it was looked for."""
    from specsched.sim.workload import histogram

    with pytest.raises(ConfigError) as e:
        histogram("nosuch.csv", tmp_path / "s.yaml", "workload.input_len")
    assert e.value.key == "workload.input_len.path" and e.value.value == "nosuch.csv"
    assert "beside the scenario" in str(e.value), str(e.value)
