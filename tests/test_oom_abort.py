"""A request that cannot get KV for its next decode step even alone is aborted, as SGLang 0.5.23
does (managers/schedule_batch.py ``ScheduleBatch.retract_decode``: "Out of memory even after
retracting all other requests in the decode batch. Aborting the last request."), instead of
stopping the run. Its client keeps the tokens streamed before: bench_serving counts the request
completed with that output (benchmark/serving.py ``async_request_sglang_generate``; the abort
chunk adds no token). The older retraction rule's build failed the allocation instead, and the
simulator still stops there.

The case: EAGLE chain 4 on a hybrid sliding-window model (window 128, pages of 1, radix cache on,
overlap on) with 3000-token prompts and an SWA pool of 430: the check before the run passes
(a lone request at full acceptance fits), and the acceptance drawn leaves one request's SWA
evictions lined up so that, alone, its next verify does not fit.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.limits import check_fits
from specsched.sim.records import Recorder
from specsched.sim.scheduler import UnschedulableRequest

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile
from tests.test_sim_speed_equivalence import assert_same_run


def _swa_corner(n: int = 3, **extra):
    srv = {"max_running_requests": 4, "max_total_num_tokens": 100_000, "chunked_prefill_size": 1024,
           "max_prefill_tokens": 4096, "page_size": 1, "sliding_window_size": 128,
           "swa_full_tokens_ratio": 430 / 100_000, "disable_radix_cache": False, "enable_overlap_schedule": True,
           "speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
           "speculative_num_draft_tokens": 4}
    srv.update(extra)
    return make_scenario(srv, {"kind": "burst", "num_requests": n, "input_len": {"kind": "fixed", "value": 3000},
                               "output_len": {"kind": "fixed", "value": 200}})


def test_a_lone_request_short_of_kv_is_aborted_and_the_run_goes_on():
    sc = _swa_corner()
    check_fits(sc)   # the check before the run cannot see it: it depends on the acceptance drawn
    eng = SimEngine(sc, tiny_profile())
    res = eng.run()
    s = res.summary
    assert s["requests_oom_aborted"] == 1 and s["completed"] == 3
    req = res.requests
    (k,) = np.flatnonzero(req["output_len"].to_numpy() < 200)
    rid = int(req["rid"].iloc[k])
    got = eng.sched.oom_aborted[rid]
    # its row: the tokens its client got, all delivered before its finish, and no more
    assert req["output_len"].iloc[k] == got < 200
    chunks = res.chunks
    mine = chunks[chunks["rid"] == rid]
    assert int(mine["n_tokens"].sum()) == got and (mine["n_tokens"] > 0).all()
    assert req["finish_s"].iloc[k] >= mine["time_s"].max()
    assert s["total_output_tokens"] == 2 * 200 + got
    # everything it held came back: the pools end empty
    kv = eng.sched.kv
    assert kv.available == kv.capacity and kv.swa_used == 0


@pytest.mark.parametrize("records", ["full", "compact"])
def test_the_abort_is_the_same_step_by_step_and_collapsed(records):
    # INV-7 with an abort in the run: the same decisions, times to 1e-12 (sums in another order)
    fast, step = (SimEngine(_swa_corner(5), tiny_profile(), records=records, fast_forward=ff).run()
                  for ff in (True, False))
    assert fast.summary["requests_oom_aborted"] >= 1
    assert_same_run(step, fast, rel=1e-12)


def test_the_older_retraction_rule_still_stops_the_run():
    # its build kept the last request and failed the allocation ("No space left for only one
    # request"): a crash of the server, not an abort the run could go on from
    sc = _swa_corner(semantics_rules={"retraction_stop": "decode_steps_headroom"})
    with pytest.raises(UnschedulableRequest, match="cannot get SWA slots"):
        SimEngine(sc, tiny_profile()).run()


def test_an_end_without_tokens_adds_no_chunk_and_no_inter_token_latency():
    for level in ("full", "compact"):
        rec = Recorder(level)
        for rid in (0, 1):
            rec.request_sent(rid, 10, 5, 0.0)
        rec.deliver_step(1.0, [0, 1], [1, 1], [False, False])
        rec.deliver_step(2.0, [0, 1], [2, 0], [False, True])   # request 1 ends with what it had
        rec.deliver(3.0, np.array([0]), np.array([2]), np.array([True]))
        rec.end_early({1: 1})
        req, chunks, _, _ = rec.tables({})
        assert req["output_len"].tolist() == [5, 1]
        assert req["finish_s"].tolist() == [3.0, 2.0] and req["first_token_s"].tolist() == [1.0, 1.0]
        if level == "full":
            assert chunks["n_tokens"].tolist() == [1, 1, 2, 2] and chunks["rid"].tolist() == [0, 1, 0, 0]
        else:
            values, weights = rec.itl.arrays()   # request 0's four later tokens only
            assert sorted(zip(values.tolist(), weights.tolist(), strict=True)) == [(0.5, 2), (0.5, 2)]


def test_an_end_before_the_first_token_is_what_bench_servings_client_records():
    """A stream the server ends before its first token (the abort chunk and ``[DONE]`` bring
    no text, HTTP 200): SGLang 0.5.23's client (benchmark/serving.py
    ``async_request_sglang_generate``) keeps its initial ``output_len``, the asked
    ``max_new_tokens``, its ``ttft`` 0.0 and no ITL, and counts it a success
    (``calculate_metrics``: in ``completed``, its 0.0 among the TTFTs, its asked length in
    the output total, a TPOT sample). Its row had output_len 0 (no TPOT, 0 tokens in the
    total), and the line written from it was read back as one failed request."""
    from specsched.sim.bench_serving import _details_of, parse_run
    from specsched.sim.metrics import summarize

    rec = Recorder("full")
    for rid in (0, 1):
        rec.request_sent(rid, 10, 5, 0.0)
    rec.deliver_step(1.0, [0], [1], [False])
    rec.deliver_step(2.0, [0, 1], [4, 0], [True, True])   # request 1 aborted with nothing streamed
    rec.end_early({1: 0})
    req, chunks, steps, _ = rec.tables({})
    assert req["output_len"].tolist() == [5, 5] and req["ttft_s"].tolist() == [1.0, 0.0]
    s = summarize(req, chunks, steps)
    assert s["completed"] == 2 and s["total_output_tokens"] == 10
    assert s["mean_ttft_ms"] == pytest.approx(500.0)
    assert s["mean_tpot_ms"] == pytest.approx((250.0 + 500.0) / 2)   # (2 - 1) / 4 s and (2 - 0) / 4 s
    d = _details_of(req, chunks)
    assert d["output_lens"] == [5, 5] and d["ttfts"] == [1.0, 0.0] and d["itls"][1] == [] and d["errors"] == ["", ""]
    back = parse_run({"completed": 2, "duration": 2.0, **d}, "r.jsonl:1")
    assert back.details.ok.tolist() == [True, True]


def test_the_run_command_warns_of_the_aborts(tmp_path, capsys):
    prof = tmp_path / "tiny.yaml"
    prof.write_text(yaml.safe_dump(tiny_profile().model_dump(mode="json", exclude_none=True)))
    data = _swa_corner().model_dump(mode="json", exclude_none=True)
    data["profile"] = str(prof)
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data))
    assert main(["run", str(f), "--out", str(tmp_path / "res")]) == 0
    out = capsys.readouterr()
    assert "Aborted out of memory:" in out.out
    warn = [line for line in out.err.splitlines() if "aborts such a request" in line]
    assert len(warn) == 1 and "1 request(s)" in warn[0] and "server.swa_full_tokens_ratio" in warn[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(swa=st.integers(395, 520), n=st.integers(1, 5), out=st.integers(2, 200), seed=st.integers(0, 1000),
       overlap=st.booleans(), radix=st.booleans())
def test_inv_oom_an_aborted_request_ends_with_what_it_committed_and_holds_nothing(swa, n, out, seed, overlap,
                                                                                   radix):
    """INV-OOM: on SWA pools around a lone request's edge, a run is refused before it starts
    or runs to its end (never stopped partway under 0.5.23's rules); a request aborted out of
    memory ends once, before its output is complete, with the tokens it was delivered; the
    pools end empty."""
    from specsched.sim.errors import ConfigError

    sc = _swa_corner(n, swa_full_tokens_ratio=swa / 100_000, enable_overlap_schedule=overlap,
                     disable_radix_cache=not radix)
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(
        update={"output_len": sc.workload.output_len.model_copy(update={"value": out})}), "seed": seed})
    try:
        check_fits(sc)
    except ConfigError:
        return
    eng = SimEngine(sc, tiny_profile(), seed)
    res = eng.run()
    assert res.summary["completed"] == n
    req, chunks = res.requests, res.chunks
    got = chunks.groupby("rid")["n_tokens"].sum().reindex(req["rid"], fill_value=0).to_numpy()
    # a request that got no token keeps the length it asked for (bench_serving's client does)
    assert (req["output_len"].to_numpy() == np.where(got == 0, out, got)).all()
    aborted = eng.sched.oom_aborted
    assert res.summary.get("requests_oom_aborted", 0) == len(aborted)
    for rid, k in aborted.items():
        assert k < out and int(req.loc[req["rid"] == rid, "output_len"].iloc[0]) == (k or out)
    assert (req.loc[~req["rid"].isin(list(aborted)), "output_len"] == out).all()
    kv = eng.sched.kv
    assert kv.available == kv.capacity and kv.swa_used == 0
