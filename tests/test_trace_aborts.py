"""A trace row a co-located SGLang 0.5.23 server rejects runs as the server runs it and counts
as failed, as bench_serving counts it (sim/served.py ``trace_aborts``): a prompt of
``max_req_input_len`` tokens or more is aborted by the scheduler (managers/utils.py
``validate_input_length`` -> ``Req.set_finish_with_abort``: its prompt replaced by one token,
it finishes after that one-token prefill), and a prompt past the context length (or prompt +
output past it) is rejected by the tokenizer (tokenizer_manager.py ``_validate_one_request``).
Before, such a trace was refused with exit 2, so a production trace with a few long rows could
not be replayed on a small pool or a short-context model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.pool_fit import longest_prompt
from specsched.sim.served import trace_aborts

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SERVER = {"max_running_requests": 16, "max_total_num_tokens": 4096, "chunked_prefill_size": 1024,
          "max_prefill_tokens": 2048, "cuda_graph_max_bs": 16, "speculative_algorithm": "none",
          "admission_delay": "none"}
ROWS = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n"
        "2024-05-01 10:00:00.5,4095,2000\n2024-05-01 10:00:01.0,300,30\n2024-05-01 10:00:01.5,4090,5\n")
"""Rows 2 and 4 have prompts of at least max_req_input_len = 4096 - 6 = 4090 tokens."""


def _trace_scenario(tmp_path, rows: str = ROWS, **workload):
    (tmp_path / "t.csv").write_text(rows)
    return make_scenario(server=SERVER, workload={"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"),
                         "layout": "azure"}, "num_requests": None, "input_len": None, "output_len": None, **workload})


def test_prompts_past_max_req_input_len_fail_with_sglangs_message_and_the_rest_run(tmp_path):
    res = SimEngine(_trace_scenario(tmp_path), tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    msg = "Input length ({} tokens) exceeds the maximum allowed length (4090 tokens). Use a shorter input or enable --allow-auto-truncate."
    assert req["error"].tolist() == ["", msg.format(4095), "", msg.format(4090)]
    assert res.summary["completed"] == 2 and res.summary["requests_aborted"] == 2
    # bench_serving's totals are over the successful requests (calculate_metrics)
    assert res.summary["total_input_tokens"] == 400 and res.summary["total_output_tokens"] == 50
    # bench_serving's duration runs until the last response, the rejected row sent at 1.5 s too
    assert res.summary["duration"] >= 1.5 > float(req["finish_s"].max())
    assert req["ttft_s"].isna().tolist() == [False, True, False, True]
    # the scheduler ran each abort as a one-token prefill (set_finish_with_abort: "set it to one
    # token to skip the long prefill"), not the long prompt
    steps = res.table("steps").frame()
    assert steps["num_extend_tokens"].sum() == 100 + 300 + 2 * 1
    # an aborted request's token is not a delivery of the run
    assert set(res.table("chunks").frame()["rid"]) == {0, 2}


def test_the_bench_serving_line_counts_an_abort_as_a_failed_request(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "t.csv").write_text(ROWS)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1, "server": SERVER,
                                 "workload": {"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"}}}))
    assert main(["run", str(y), "--out", str(out), "-q"]) == 0
    line = json.loads((out / "bench_serving.jsonl").read_text().splitlines()[0])
    assert line["completed"] == 2
    assert [bool(e) for e in line["errors"]] == [False, True, False, True]
    assert line["output_lens"][1] == 0 and line["ttfts"][1] == 0.0
    assert "exceeds the maximum allowed length" in line["errors"][1]


@pytest.mark.parametrize("records", ["full", "compact"])
def test_a_line_of_the_native_client_is_compared_with_the_rejections_counted_completed(tmp_path, records):
    """bench_serving's ``sglang`` backend (its default; the native /generate route) gets a
    rejection as a stream with HTTP 200 (SGLang 0.5.23 http_server.py ``generate_request``:
    the tokenizer's ValueError sent as an error message inside the stream, the scheduler's
    abort as the last output, no text), and ``async_request_sglang_generate`` counts it a
    success: TTFT 0.0, its asked output length, no ITL. Its line's completed, totals and TTFT
    statistics hold the rejected requests; the prediction compared with it left them out
    (completed 2 against 4). The OpenAI clients fail them, as the run's own figures do."""
    from specsched.sim.bench_serving import NATIVE_COUNTING, client_record

    res = SimEngine(_trace_scenario(tmp_path), tiny_profile(), records=records).run()
    plain = client_record(res, per_chunk_itl=False)
    native = client_record(res, per_chunk_itl=False, counting=NATIVE_COUNTING)
    assert plain["completed"] == res.summary["completed"] == 2
    assert native["completed"] == 4 and native["total_output_tokens"] == 20 + 2000 + 30 + 5
    assert native["total_input_tokens"] == 100 + 4095 + 300 + 4090
    req = res.table("requests").frame().sort_values("rid")
    ttfts = [req["ttft_s"].iloc[0], 0.0, req["ttft_s"].iloc[2], 0.0]
    assert native["mean_ttft_ms"] == pytest.approx(1000 * float(np.mean(ttfts)))
    assert native["duration"] == pytest.approx(plain["duration"])
    for k in ("mean_itl_ms", "median_itl_ms", "p99_itl_ms"):   # a rejection adds no gap
        assert native[k] == plain[k]
    assert native["request_throughput"] == pytest.approx(4 / plain["duration"])


def test_the_run_says_in_one_line_that_requests_were_rejected(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(ROWS)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1, "server": SERVER,
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 0
    warn = [e for e in capsys.readouterr().err.splitlines() if "rejected" in e]
    assert len(warn) == 1 and "2 request(s)" in warn[0] and "bench_serving" in warn[0], warn


def test_a_closed_loop_client_sends_its_next_request_after_an_abort(tmp_path):
    # bench_serving's semaphore slot frees when the error comes back: the run does not stall,
    # and the next request is sent at the abort's finish, not later
    res = SimEngine(_trace_scenario(tmp_path, max_concurrency=1), tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    assert res.summary["completed"] == 2
    assert req["start_s"].is_monotonic_increasing


def test_the_runtime_runs_the_aborts_the_simulator_runs(tmp_path):
    # one scheduler, two clocks: the runtime builds its requests with the simulator's
    # function (sim/served.py served_requests), so the same rows fail there
    pytest.importorskip("torch")
    from specsched.runtime.engine import RuntimeEngine

    sc = _trace_scenario(tmp_path, trace={"path": str(tmp_path / "t.csv"), "layout": "azure", "time_scale": 0.01})
    predicted = SimEngine(sc, tiny_profile()).run()
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    errs = [r.table("requests").frame().sort_values("rid")["error"].ne("").tolist() for r in (predicted, measured)]
    assert errs[0] == errs[1] == [False, True, False, True]
    assert measured.summary["completed"] == predicted.summary["completed"] == 2


@pytest.mark.parametrize("limit", [None, 1], ids=["open", "max_concurrency"])
def test_the_runtime_sends_a_row_the_tokenizer_rejects_to_no_scheduler(tmp_path, limit):
    # the measured run skips the tokenizer's rejection as the simulated one does
    # (tokenizer_manager.py _validate_one_request): the scheduler extends only the others
    pytest.importorskip("torch")
    from specsched.runtime.engine import RuntimeEngine

    sc = _trace_scenario(tmp_path, trace={"path": str(tmp_path / "t.csv"), "layout": "azure", "time_scale": 0.01},
                         **({} if limit is None else {"max_concurrency": limit}))
    sc = sc.model_copy(update={"server": sc.server.model_copy(update={"context_length": 4096})})
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    assert measured.summary["completed"] == 2 and measured.summary["requests_aborted"] == 2
    assert measured.table("steps").frame()["num_extend_tokens"].sum() == 100 + 300 + 1


def test_a_run_without_rejections_writes_no_error_column(tmp_path):
    res = SimEngine(_trace_scenario(tmp_path, rows=ROWS.replace("4095", "409").replace("4090", "400")), tiny_profile()).run()
    assert "error" not in res.table("requests").columns and "requests_aborted" not in res.summary


@settings(max_examples=40, deadline=None)
@given(cap=st.integers(300, 900), ctx=st.one_of(st.none(), st.integers(200, 1200)),
       rows=st.lists(st.tuples(st.integers(1, 1300), st.integers(1, 400)), min_size=1, max_size=4))
def test_every_row_either_completes_or_fails_with_the_rule_that_rejects_it(tmp_path_factory, cap, ctx, rows):
    """Invariant: every row of a random trace ends exactly once, completed or failed; a row
    fails exactly when SGLang rejects it (a prompt of max_req_input_len = min(ctx, pool) - 6
    tokens or more, or prompt + output past the context); ``trace_aborts`` says so row by row."""
    d = tmp_path_factory.mktemp("t")
    body = "".join(f"{k * 0.01},{i},{o}\n" for k, (i, o) in enumerate(rows))
    (d / "t.csv").write_text("timestamp,input_length,output_length\n" + body)
    server = {"max_total_num_tokens": cap, "chunked_prefill_size": 128, "max_prefill_tokens": 256,
              "speculative_algorithm": "none", "speculative_num_draft_tokens": 1}
    if ctx is not None:
        server["context_length"] = ctx
    sc = make_scenario(server=server, workload={"kind": "trace", "trace": {"path": str(d / "t.csv")},
                                                "num_requests": None, "input_len": None, "output_len": None})
    ins, outs = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    limit = longest_prompt(cap if ctx is None else min(cap, ctx))
    expected = [i > limit or (ctx is not None and i + o > ctx) for i, o in rows]
    assert [a is not None for a in trace_aborts(sc, ins, outs, None)] == expected
    res = SimEngine(sc, tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    failed = req["error"].ne("").tolist() if "error" in req.columns else [False] * len(rows)
    assert failed == expected
    assert req["finish_s"].notna().tolist() == [not f for f in failed]
    assert res.summary["completed"] + res.summary.get("requests_aborted", 0) == len(rows)


def test_allow_auto_truncate_serves_the_rows_it_would_reject_with_the_prompt_cut(tmp_path):
    """SGLang's --allow-auto-truncate (server.allow_auto_truncate): a prompt of max_req_input_len
    tokens or more is cut to max_req_input_len (managers/utils.py validate_input_length) and
    served; nothing fails. The client still counts the prompt it sent (bench_serving prompt_len)."""
    sc = _trace_scenario(tmp_path)
    sc = sc.model_copy(update={"server": sc.server.model_copy(update={"allow_auto_truncate": True})})
    res = SimEngine(sc, tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    assert "error" not in req.columns and res.summary["completed"] == 4
    assert res.summary["requests_truncated"] == 1   # row 4's 4090 tokens are max_req_input_len already
    assert req["input_len"].tolist() == [100, 4095, 300, 4090]   # as sent
    # the scheduler prefilled the kept prompts: 4090 tokens each for rows 2 and 4
    assert res.table("steps").frame()["num_extend_tokens"].sum() == 100 + 4090 + 300 + 4090
    # their outputs are cut as any request's on the prompt as it reached the scheduler
    # (init_req_max_new_tokens runs before validate_input_length truncates): 4095 tokens leave
    # none, 4090 leave 4. The request cut to max_new_tokens 0 is served prefill only
    # (Req.is_prefill_only): its stream brings no text, so the client keeps the output length
    # it asked (2000) and TTFT 0.0 (benchmark/serving.py: output_len starts at the asked
    # length and changes only on a chunk with text); it was counted with one token and the
    # prefill's TTFT
    assert req["output_len"].tolist() == [20, 2000, 30, 4]
    assert req["ttft_s"].iloc[1] == 0.0 and req["finish_s"].iloc[1] > 0
    assert 1 not in set(res.table("chunks").frame()["rid"])
    assert res.summary["total_output_tokens"] == 20 + 2000 + 30 + 4


def test_allow_auto_truncate_cuts_a_prompt_past_the_context_then_its_output():
    """The tokenizer first cuts a prompt of context_len tokens or more to context_len and a
    max_new_tokens past the context to max(0, context_len - prompt) (tokenizer_manager.py
    _validate_one_request); the scheduler cuts max_new_tokens on that prompt
    (init_req_max_new_tokens: max_req_len - prompt - 1), then the prompt to max_req_input_len
    (validate_input_length, after). A max_new_tokens of 0 is served
    prefill only (the first row)."""
    from specsched.sim.served import auto_truncated

    sc = make_scenario(server={**SERVER, "max_total_num_tokens": 100_000, "context_length": 2000,
                               "allow_auto_truncate": True})
    ins, outs = auto_truncated(sc, np.array([5000, 1990, 1500, 100]), np.array([50, 50, 800, 50]), None)
    assert ins.tolist() == [1994, 1990, 1500, 100]       # max_req_input_len = 2000 - 6
    assert outs.tolist() == [0, 8, 498, 50]              # max_req_len 1999: 1999 - 1990 - 1, 1999 - 1500 - 1


@settings(max_examples=30, deadline=None)
@given(cap=st.integers(300, 900), ctx=st.one_of(st.none(), st.integers(200, 1200)),
       rows=st.lists(st.tuples(st.integers(1, 1300), st.integers(1, 400)), min_size=1, max_size=4))
def test_under_allow_auto_truncate_every_row_completes_within_the_limits(tmp_path_factory, cap, ctx, rows):
    """Invariant: with --allow-auto-truncate no row fails; each is served with its prompt cut to
    at most max_req_input_len and an output of at most the one asked; one cut to
    max_new_tokens 0 streams no text, and its client keeps the length it asked (TTFT 0.0)."""
    d = tmp_path_factory.mktemp("t")
    (d / "t.csv").write_text("timestamp,input_length,output_length\n"
                             + "".join(f"{k * 0.01},{i},{o}\n" for k, (i, o) in enumerate(rows)))
    server = {"max_total_num_tokens": cap, "chunked_prefill_size": 128, "max_prefill_tokens": 256,
              "speculative_algorithm": "none", "speculative_num_draft_tokens": 1, "allow_auto_truncate": True}
    if ctx is not None:
        server["context_length"] = ctx
    sc = make_scenario(server=server, workload={"kind": "trace", "trace": {"path": str(d / "t.csv")},
                                                "num_requests": None, "input_len": None, "output_len": None})
    res = SimEngine(sc, tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    assert "error" not in req.columns and res.summary["completed"] == len(rows)
    limit = longest_prompt(cap if ctx is None else min(cap, ctx)) + 1
    extended = res.table("steps").frame()["num_extend_tokens"].sum()
    assert extended == sum(min(i, limit) for i, _ in rows)
    assert all(1 <= o <= a for o, (_, a) in zip(req["output_len"].tolist(), rows, strict=True))
    silent = set(req["rid"][req["ttft_s"] == 0.0])
    assert silent.isdisjoint(set(res.table("chunks").frame()["rid"]))


def test_a_run_whose_every_request_was_rejected_still_lists_the_errors(tmp_path):
    """bench_serving writes its per-request lists, errors included, when every request failed;
    the line had completed 0 and no errors (no token was delivered, so no chunk)."""
    from specsched.sim.bench_serving import bench_record

    res = SimEngine(_trace_scenario(tmp_path, rows="TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,5000,20\n"
                                                    "2024-05-01 10:00:00.1,6000,20\n"),
                    tiny_profile()).run()
    rec = bench_record(res)
    assert rec["completed"] == 0 and res.summary["requests_aborted"] == 2
    assert [e.split(" (")[0] for e in rec["errors"]] == ["Input length", "Input length"]
    assert rec["input_lens"] == [5000, 6000] and rec["output_lens"] == [0, 0] and rec["ttfts"] == [0.0, 0.0]


@pytest.mark.parametrize("limit", [None, 1], ids=["open", "max_concurrency"])
def test_a_row_the_tokenizer_rejects_never_reaches_the_scheduler(tmp_path, limit):
    """SGLang 0.5.23 rejects a prompt + max_new_tokens past the context length in the
    tokenizer (managers/tokenizer_manager.py ``_validate_one_request`` raises a ValueError in
    ``_tokenize_one_request``, before ``_send_one_request``): the scheduler never sees the
    request, so it runs no extend and holds no KV for it. Only a prompt the scheduler's
    ``validate_input_length`` refuses (managers/scheduler.py ``handle_generate_request``)
    is queued as an abort of one token (``Req.set_finish_with_abort``). Row 2 (4095 + 2000 >
    4096) is the tokenizer's, row 4 (4090 >= max_req_input_len 4090) the scheduler's; before,
    both ran a one-token prefill."""
    server = {**SERVER, "context_length": 4096}
    (tmp_path / "t.csv").write_text(ROWS)
    workload = {"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"},
                "num_requests": None, "input_len": None, "output_len": None}
    if limit is not None:
        workload["max_concurrency"] = limit
    eng = SimEngine(make_scenario(server=server, workload=workload), tiny_profile())
    res = eng.run()
    req = res.table("requests").frame().sort_values("rid")
    assert req["error"].str.startswith("Requested token count").tolist() == [False, True, False, False]
    assert req["error"].str.startswith("Input length").tolist() == [False, False, False, True]
    assert res.summary["completed"] == 2 and res.summary["requests_aborted"] == 2
    assert res.table("steps").frame()["num_extend_tokens"].sum() == 100 + 300 + 1
    assert 1 not in eng.sched.reqs and 3 in eng.sched.reqs
    if limit is not None:   # the client's slot frees when the tokenizer's error returns
        assert req["start_s"].is_monotonic_increasing
