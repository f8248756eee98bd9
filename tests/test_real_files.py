"""What real servers and benchmarks write, read as written: the fixtures in tests/data/
(their sources are in tests/data/README.md) through every reader (bench_serving results,
scenario from-bench, validate-bench's comparison, SGLang server logs, calibrate --from)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.bench_cli import comparison_rows
from specsched.analysis.from_bench import scenario_from_bench
from specsched.analysis.server_log import decode_step_samples, parse_server_log, prefill_summary
from specsched.sim.bench_serving import (
    DETAIL_KEYS,
    INPUT_TOTAL_KEYS,
    ONE_BATCH,
    STEADY_LINE_KEYS,
    parse_run,
    read_bench,
    read_bench_one,
    to_run_data,
)
from specsched.sim.errors import ConfigError
from specsched.sim.steady_state import SUMMARY_KEYS

from specsched.cli import main

DATA = Path(__file__).parent / "data"
E2EL = re.compile(r"^(mean|median|std|p[\d.]+|percentiles)_e2el_ms$")
"""vLLM's e2el statistics, read under SGLang's e2e_latency names; other keys holding
``_e2el_ms`` (0.27+ ``probe_*_e2el_ms``, 0.30+ ``*_e2el_including_client_queue_ms``) are
other figures, kept as written."""
BENCH = sorted((DATA / "bench").iterdir())
LOGS = DATA / "logs"
_RENAMED = {"total_token_throughput": "total_throughput",
            # SGLang 0.1.24-0.2.11 (sglang/bench_serving.py benchmark()): the later names without units
            "total_input": "total_input_tokens", "total_output": "total_output_tokens",
            "total_output_retokenized": "total_output_tokens_retokenized", "mean_e2e_latency": "mean_e2e_latency_ms",
            "median_e2e_latency": "median_e2e_latency_ms", "median_ttft": "median_ttft_ms", "median_itl": "median_itl_ms",
            "output_token_throughput": "output_throughput", "benchmark_duration": "duration"}
_ONE_BATCH_RENAMED = {"input_throughput": "prefill_window_input_throughput",
                      "output_throughput": "decode_window_output_throughput"}
"""A ``bench_one_batch_server`` line's throughputs are other figures than bench_serving's of the
same names (0.5.23 one_batch_server.py ``run_one_case``: input over the window to the last first
token, output over the window after it), read under their own names."""


def _objs(path: Path) -> list[dict]:
    text = path.read_text()
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        pass
    dec, out, k = json.JSONDecoder(), [], 0   # indented objects one after another (or one)
    while text[k:].strip():
        k += len(text[k:]) - len(text[k:].lstrip())
        obj, k = dec.raw_decode(text, k)
        out.append(obj)
    return out


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.name)
def test_every_fixture_is_one_writers_self_consistent_run(path):
    """Each fixture is a run as its writer wrote it (tests/data/README.md): the reader finds
    nothing no single run gives (``_impossible``). The jq-indented vLLM runs carried one
    output and total throughput for both rates (969.3 tok/s at 50.9 s and at 14.2 s for
    25600 tokens), so every command reading them printed two warnings."""
    assert [n for r in read_bench(path) for n in r.notes] == []


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.name)
def test_invariant_every_key_of_every_layout_is_kept_and_nulls_are_missing(path):
    """Invariant (every fixture): each key of the file lands in args, summary, extra or
    details with its value (vLLM names mapped; input totals that count no prompt kept in
    extra as written); no null or NaN reaches args or summary."""
    runs = read_bench(path)
    objs = _objs(path)
    # a steady_state_serving record after its run's line is that run's steady_* figures
    steady = {j - 1: o for j, o in enumerate(objs) if j and STEADY_LINE_KEYS <= set(o)}
    objs = [o for j, o in enumerate(objs) if j not in {k + 1 for k in steady}]
    assert len(runs) == len(objs)
    for j, (run, obj) in enumerate(zip(runs, objs, strict=True)):
        for k, v in steady.get(j, {}).items():
            assert v is None and SUMMARY_KEYS[k] not in run.summary or run.summary[SUMMARY_KEYS[k]] == pytest.approx(v), k
        renamed = _RENAMED | (_ONE_BATCH_RENAMED if ONE_BATCH in run.extra else {})
        for k, v in obj.items():
            name = renamed.get(k, E2EL.sub(r"\1_e2e_latency_ms", k))
            if k in DETAIL_KEYS:
                assert run.details is not None or not isinstance(obj.get("ttfts"), list), k
                continue
            if v is None:
                assert name not in run.args and name not in run.summary, k
                continue
            where = [d for d in (run.args, run.summary, run.extra) if name in d]
            assert where, f"{k} lost"
            got = where[0][name]
            if name in INPUT_TOTAL_KEYS and name in run.extra:   # a multi-turn or fast-prepare line's
                got = run.extra[name]                            # input totals: kept as written in extra
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                assert got == pytest.approx(v) or (math.isinf(v) and math.isinf(got)), k
            elif name == "request_rate":
                assert got == (math.inf if v == "inf" else v)
            else:
                assert got == v, k
        for d in (run.args, run.summary):
            assert all(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in d.values())


def test_sglang_036_subset():
    a, b = read_bench(DATA / "bench" / "sglang-0.3.6.jsonl")
    assert "max_concurrency" not in a.args and "mean_ttft_ms" not in a.summary
    assert a.summary["median_ttft_ms"] == 61.2 and a.num_prompts == 100 and a.details is None
    assert b.args["request_rate"] == math.inf
    sc, _ = scenario_from_bench(a, "h200-1b")
    w = sc["workload"]
    assert (w["kind"], w["request_rate"], w["num_requests"]) == ("poisson", 8.0, 100)
    assert w["input_len"] == {"kind": "uniform", "value": 1024, "range_ratio": 0.0}
    assert scenario_from_bench(b, "h200-1b")[0]["workload"]["kind"] == "burst"


def test_sglang_0211_names_without_units_and_no_request_count(tmp_path, capsys, monkeypatch):
    """SGLang 0.1.24-0.2.11 append ``total_input``, ``median_ttft``, ``output_token_throughput``,
    ``benchmark_duration`` ... (ms and s as the later ``_ms``/``duration`` keys) and no
    ``completed``: read under the later names (they were refused as not bench_serving output);
    a scenario cannot be built without a request count, said in one line naming the key."""
    a, b = read_bench(DATA / "bench" / "sglang-0.2.11.jsonl")
    assert a.summary == {"duration": 31.76, "total_input_tokens": 51234, "total_output_tokens": 12789,
                         "total_output_tokens_retokenized": 12750, "output_throughput": 402.7,
                         "median_ttft_ms": 61.2, "median_itl_ms": 17.9, "mean_e2e_latency_ms": 2311.4,
                         "median_e2e_latency_ms": 2203.9}
    assert a.extra == {} and a.num_prompts is None
    assert (a.args["request_rate"], a.args["random_input_len"], b.args["request_rate"]) == (8.0, 1024, math.inf)
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", f"{DATA / 'bench' / 'sglang-0.2.11.jsonl'}:1", "--profile", "h200-1b",
                 "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sglang-0.2.11.jsonl:1: num_prompts" in err[0] and "--scenario" in err[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", [12.5, 1e20])
def test_a_token_count_that_is_no_whole_int64_is_refused(tmp_path, bad):
    """An ``input_lens`` entry with a fraction was cut to an integer, one past int64 became
    garbage, both silently: refused naming the entry."""
    obj = json.loads((DATA / "bench" / "sglang-0.4.6.post5-details.jsonl").read_text())
    obj["input_lens"][1] = bad
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert (e.value.file, e.value.key, e.value.value) == (f"{p}:1", "input_lens[1]", bad)


def test_a_failed_request_with_an_empty_error_text_is_failed(tmp_path):
    """bench_serving (0.3.0-0.5.x request functions) fails a reply other than 200 with the
    error ``response.reason or ""``: a reply without a reason phrase leaves the error text
    empty. Such a request (TTFT 0.0, output 0, as every failed one) was counted a success:
    not in ``failed``, and its prompt length and a 1-token output went into from-bench's
    length histograms."""
    obj = json.loads((DATA / "bench" / "sglang-0.4.6.post5-details.jsonl").read_text())
    obj["errors"][2] = ""   # request 2 failed (ttft 0.0, output_lens 0) without a reason phrase
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    (r,) = read_bench(p)
    assert r.details.ok.tolist() == [True, True, False, True]
    assert to_run_data(r).summary["failed"] == 1
    _, tables = scenario_from_bench(r, "h200-1b", lengths="details")
    assert sorted(tables["input"]["length"].tolist()) == [512, 640, 800]
    assert 1 not in tables["output"]["length"].tolist()


def test_a_stream_ended_before_its_first_token_is_a_success_as_the_line_counts_it(tmp_path):
    """SGLang 0.5.23's ``sglang`` client (benchmark/serving.py ``async_request_sglang_generate``)
    records a stream the server ended before its first token (an abort: its chunk and
    ``[DONE]`` bring no text, HTTP 200) as a success: ``ttft`` 0.0, no ITL, no error, and the
    ``output_len`` it started with, the asked length; ``calculate_metrics`` counts it in
    ``completed``. It was read as failed, against the line's own ``completed``: from-bench
    then sent one request fewer than the line completed."""
    obj = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text())
    obj["errors"][3], obj["output_lens"][3], obj["completed"] = "", 8, 3   # request 3: no token, counted
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    (r,) = read_bench(p)
    assert r.details.ok.tolist() == [True, True, False, True]
    assert int(r.details.ok.sum()) == r.summary["completed"] and to_run_data(r).summary["failed"] == 1


FLAVOURS = DATA / "bench" / "sglang-0.5.23-flavours.jsonl"
"""SGLang 0.5.23 ``benchmark/serving.py`` ``benchmark()`` lines, one per flavour of its
arguments (tests/data/README.md): random at a finite rate with details, random at inf
with ``--max-concurrency`` on an EAGLE3 server, sharegpt through the chat client with
details, generated-shared-prefix at a rate with a concurrency cap, random through the
completions client with a failed stream."""


@pytest.mark.parametrize("line", [1, 2, 3, 4, 5])
def test_each_0523_flavour_reads_back_its_own_figures(line):
    """Each flavour's figures as written, and, where the line has details, the requests the
    reader counts successful give back the line's own ``completed``, token totals and TTFT
    and ITL statistics (bench_serving's ``calculate_metrics`` takes them over its successful
    requests: a stream ended before its first token among them, TTFT 0.0)."""
    obj = json.loads(FLAVOURS.read_text().splitlines()[line - 1])
    r = read_bench_one(f"{FLAVOURS}:{line}")
    for k in ("completed", "duration", "total_output_tokens", "mean_ttft_ms", "p99_itl_ms", "max_concurrent_requests"):
        assert r.summary[k] == pytest.approx(obj[k]), k
    assert r.args["request_rate"] == obj["request_rate"] and r.args.get("max_concurrency") == obj["max_concurrency"]
    if obj["accept_length"] is not None:
        assert r.summary["accept_length"] == obj["accept_length"]
    d = r.details
    if d is None:
        assert "input_lens" not in obj
        return
    ok = d.ok
    assert int(ok.sum()) == obj["completed"] and r.num_prompts == len(obj["input_lens"])
    assert int(d.input_lens[ok].sum()) == obj["total_input_tokens"]
    assert int(d.output_lens[ok].sum()) == obj["total_output_tokens"]
    assert float(np.mean(d.ttfts[ok])) * 1000 == pytest.approx(obj["mean_ttft_ms"])
    assert float(np.median(d.ttfts[ok])) * 1000 == pytest.approx(obj["median_ttft_ms"])
    itl = np.concatenate([d.itls[i] for i in np.flatnonzero(ok)])
    assert float(np.mean(itl)) * 1000 == pytest.approx(obj["mean_itl_ms"])
    assert to_run_data(r).summary["failed"] == len(obj["input_lens"]) - obj["completed"]


def test_sglang_046_spec_line_without_details():
    (r,) = read_bench(DATA / "bench" / "sglang-0.4.6-eagle.jsonl")
    assert r.summary["accept_length"] == 3.02 and r.summary["p95_itl_ms"] == 19.9 and "p90_ttft_ms" not in r.summary
    sc, _ = scenario_from_bench(r, "h200-1b")
    assert sc["workload"]["max_concurrency"] == 32 and sc["workload"]["input_len"] == {"kind": "fixed", "value": 2000}


def test_sglang_0523_details_failed_requests_cache_report_and_goodput():
    r = read_bench_one(DATA / "bench" / "sglang-0.5.23-details.jsonl")
    assert r.num_prompts == 4 and r.summary["completed"] == 2
    assert r.summary["cache_hit_rate"] == pytest.approx(0.2499)
    assert r.extra["server_info"]["speculative_algorithm"] == "DSPARK"
    assert r.extra["cached_tokens"] == [0, 500, 0, 0] and r.extra["slo_attainment"] == 0.75
    assert r.details.ok.tolist() == [True, True, False, False]
    run = to_run_data(r)
    assert run.summary["failed"] == 2 and len(run.requests) == 2
    assert len(run.chunks) == 2 + 7 + 6                    # first token + one chunk per ITL gap
    rows = {row["metric"]: row for row in comparison_rows({"cache_hit_rate": 0.5}, r.summary)}
    assert rows["cache_hit_rate"]["error_pct"] == pytest.approx(100.08, abs=0.01)
    sc, _ = scenario_from_bench(r, "h200-1b")
    # the 2 successes are sent: bench_serving counts only them in completed and the throughputs
    assert sc["workload"] == {"kind": "closed_loop", "num_requests": 2, "concurrency": 4,
                              "input_len": {"kind": "uniform", "value": 1024, "range_ratio": 0.0},
                              "output_len": {"kind": "uniform", "value": 8, "range_ratio": 0.0}}
    assert sc["server"]["speculative_algorithm"] == "dspark" and sc["server"]["max_running_requests"] == 48


def test_sglang_0523_null_server_info_and_trace_replay_line():
    a, b = read_bench(DATA / "bench" / "sglang-0.5.23.jsonl")
    assert "accept_length" not in a.summary and a.extra["server_info"] is None and a.extra["tag"] is None
    sc, _ = scenario_from_bench(a, "h200-1b")
    assert sc["workload"]["kind"] == "poisson" and any("server_info" in n for n in sc["assumptions"])
    assert b.args["request_rate"] == "trace"
    with pytest.raises(ConfigError, match="trace"):
        scenario_from_bench(b, "h200-1b")


def test_vllm_073_benchmark_serving_writes_details_always():
    """vllm 0.7.3 sdist, benchmarks/benchmark_serving.py ``benchmark()`` (``result``) and
    ``main()`` (``result_json``: date, backend, model_id, tokenizer_id, best_of, num_prompts,
    request_rate ``"inf"``, burstiness, max_concurrency; ``"request_goodput:"`` with its colon,
    read as the newer ``request_goodput``; the per-request lists always; percentiles of
    ttft/tpot/itl only by default). 0.6.6 writes the same keys."""
    (old,) = read_bench(DATA / "bench" / "vllm-0.7.3-benchmark_serving.json")
    assert old.args["request_rate"] == math.inf and old.num_prompts == 3
    assert "request_goodput" in old.extra and "request_goodput:" not in old.extra and old.extra["best_of"] == 1 and to_run_data(old).summary["failed"] == 1
    assert "median_e2e_latency_ms" not in old.summary      # e2el is not in the default --percentile-metrics
    (ind,) = read_bench(DATA / "bench" / "vllm-indented.json")
    assert ind.args["request_rate"] == 2.0 and ind.details is not None


def test_vllm_085_benchmark_serving_without_save_detailed_and_with_metadata():
    """vllm 0.8.5 sdist, benchmarks/benchmark_serving.py ``main()``: no best_of; ``--metadata
    KEY=VALUE`` pairs as strings between num_prompts and request_rate; the per-request lists
    removed without ``--save-detailed``."""
    (r,) = read_bench(DATA / "bench" / "vllm-0.8.5-benchmark_serving.json")
    assert r.details is None and r.extra["hardware"] == "H200" and r.extra["tp"] == "1"
    assert r.args == {"backend": "vllm", "request_rate": 8.0, "max_concurrency": 32, "num_prompts": 200, "burstiness": 1.0}
    assert r.summary["total_throughput"] == 8724.0 and r.summary["p99_itl_ms"] == 25.9
    # vLLM writes no length arguments: fixed at the mean per completed request, and said so
    sc, tables = scenario_from_bench(r, "h200-1b")
    assert not tables and sc["workload"]["input_len"] == {"kind": "fixed", "value": round(204800 / 200)}
    assert sc["workload"]["output_len"] == {"kind": "fixed", "value": round(25600 / 200)}
    assert any("mean tokens per completed request" in n for n in sc["assumptions"])
    bare = read_bench_one(DATA / "bench" / "vllm-0.8.5-benchmark_serving.json")
    bare.summary.pop("total_input_tokens")
    with pytest.raises(ConfigError, match="details"):   # and without the totals, nothing to go on
        scenario_from_bench(bare, "h200-1b")


def test_vllm_bench_serve_0101_and_011_layouts():
    """``vllm bench serve`` (vllm/benchmarks/serve.py ``main``/``benchmark``): 0.10.1.1 writes
    endpoint_type and label but no backend, ``request_goodput`` without the colon; 0.11.0 adds
    backend, the peaks (max_output_tokens_per_s, max_concurrent_requests), and with
    ``--ramp-up-strategy`` the ramp keys and ``rps_change_events``; ``--append-result`` joins
    runs with a newline before each later one."""
    (a,) = read_bench(DATA / "bench" / "vllm-0.10.1.1-bench-serve.json")
    assert a.args["backend"] == "openai" and a.extra["endpoint_type"] == "openai" and a.extra["label"] is None
    assert "request_goodput" in a.extra and a.summary["median_ttft_ms"] == 51.0
    b, c = read_bench(DATA / "bench" / "vllm-0.11.0-bench-serve.json")
    assert b.summary["max_concurrent_requests"] == 31 and b.args["max_concurrency"] == 64
    assert c.extra["ramp_up_strategy"] == "linear" and len(c.extra["rps_change_events"]) == 3
    with pytest.raises(ConfigError, match="ramp"):      # the rate changed during the run
        scenario_from_bench(c, "h200-1b", lengths="args")


def test_vllm_bench_serve_033_detailed_spec_decode_and_send_times():
    """vllm 0.33.0 ``vllm bench serve`` (serve.py ``benchmark``): ``failed``, ``latencies``,
    ``start_times`` (perf_counter at each send), ``queue_times``, ``rtfx``, the
    ``spec_decode_*`` keys (acceptance_length = 1 + accepted / drafts, SGLang's accept length),
    ``--metric-percentiles 50,90,99.9`` keys; without ``--save-detailed`` latencies and
    queue_times stay while the other lists go."""
    a, b = read_bench(DATA / "bench" / "vllm-0.33.0-bench-serve.json")
    assert a.summary["accept_length"] == 2.846 and a.extra["spec_decode_acceptance_rate"] == 61.5
    assert a.summary["median_e2e_latency_ms"] == 61.4 and a.extra["p99.9_ttft_ms"] == 40.5
    assert a.summary["p90_ttft_ms"] == 38.6 and a.args["burstiness"] == 0.5
    run = to_run_data(a)
    assert run.summary["failed"] == 1 and len(run.requests) == 3
    assert run.requests["start_s"].tolist() == pytest.approx([0.0, 0.2409, 0.6121])   # sends, from the first
    assert run.requests["e2e_s"].tolist() == pytest.approx([0.0614, 0.0599, 0.074])    # the client's latencies
    assert run.chunks.loc[run.chunks["rid"] == 1, "time_s"].iloc[0] == pytest.approx(0.2409 + 0.0298)
    assert b.details is None and b.extra["latencies"] == [0.0614, 0.0599, 0.074, 0.0] and b.args["request_rate"] == math.inf
    assert to_run_data(b).summary["failed"] == 1


def test_vllm_bench_serve_034_probe_and_client_queue_figures_are_kept_as_written():
    """vllm 0.34.0 ``vllm bench serve`` (serve.py ``benchmark()``): ``--probe-request-rate``
    adds ``probe_completed``/``probe_failed``/``probe_{median,p99,max}_e2el_ms`` (0.27 on) and
    ``--percentile-metrics ...,client_queue_time,e2el_including_client_queue`` their
    statistics (0.30 on); ``latencies`` and ``queue_times`` stay without ``--save-detailed``.
    Only e2el's own statistics are SGLang's e2e latency: the probe keys were renamed to
    ``probe_*_e2e_latency_ms`` (an unknown key not kept as written)."""
    a, _ = read_bench(DATA / "bench" / "vllm-0.34.0-timed-trace-probe.json")
    assert a.summary["median_e2e_latency_ms"] == 403.5 and a.summary["p99_e2e_latency_ms"] == 409.9
    assert a.extra["probe_median_e2el_ms"] == 61.2 and a.extra["probe_max_e2el_ms"] == 70.5
    assert a.extra["p99_e2el_including_client_queue_ms"] == 528.8 and a.extra["median_client_queue_time_ms"] == 0.0
    assert not any(k.startswith("probe") and "e2e_latency" in k for k in a.extra)
    assert a.details is None and a.extra["queue_times"] == [0.0, 0.0, 0.12, 0.0]
    sc, _ = scenario_from_bench(a, "h200-1b")
    assert any("3 probe requests" in n for n in sc["assumptions"])   # load the scenario does not send


def test_a_vllm_timed_trace_line_replays_its_send_times_not_a_burst():
    """vllm bench serve ``--dataset-name timed_trace`` (0.23.0-0.34.0 ``serve.py``:
    ``self_timed``, ``get_request`` sleeps to each request's trace timestamp) writes
    ``request_rate: "inf"`` and no dataset name; its ``--save-detailed`` start_times spread
    over the run. It was built as a ``burst`` (every request at t=0): now its send times are
    replayed, said in the assumptions. A vLLM line at inf without send times is still a burst,
    with the caveat said."""
    _, b = read_bench(DATA / "bench" / "vllm-0.34.0-timed-trace-probe.json")
    assert b.args["request_rate"] == math.inf and "max_concurrency" not in b.args
    sc, tables = scenario_from_bench(b, "h200-1b")
    assert sc["workload"]["kind"] == "trace"
    assert tables["trace"]["timestamp"].tolist() == pytest.approx([0.0, 0.8, 1.9, 3.0])
    assert any("arrived over 3 s" in n for n in sc["assumptions"])
    # with --max-concurrency (0.30+: queue_times): a closed loop's requests all arrive at t=0
    # (send - slot wait), a timed trace's over the trace
    t0 = b.details.start_s
    looped = parse_run({**b.extra, **b.args, **b.summary, "max_concurrency": 1, "start_times": t0.tolist(),
                        "queue_times": t0.tolist(), "input_lens": b.details.input_lens.tolist(),
                        "output_lens": b.details.output_lens.tolist(), "ttfts": b.details.ttfts.tolist(),
                        "itls": [x.tolist() for x in b.details.itls]}, "x:1")
    sc, _ = scenario_from_bench(looped, "h200-1b")
    assert sc["workload"]["kind"] == "closed_loop" and any("timed_trace" in n for n in sc["assumptions"])
    waited = parse_run({**looped.extra, **looped.args, **looped.summary, "queue_times": [0.0, 0.1, 0.0, 0.2],
                        "input_lens": looped.details.input_lens.tolist(), "output_lens": looped.details.output_lens.tolist(),
                        "ttfts": looped.details.ttfts.tolist(), "itls": [x.tolist() for x in looped.details.itls]}, "x:1")
    sc, tables = scenario_from_bench(waited, "h200-1b")
    assert sc["workload"]["kind"] == "trace" and sc["workload"]["max_concurrency"] == 1
    assert tables["trace"]["timestamp"].tolist() == pytest.approx([0.0, 0.7, 1.9, 2.8])
    burst = parse_run({**{k: v for k, v in b.extra.items() if k != "start_times"}, **b.args, **b.summary}, "x:1")
    sc, _ = scenario_from_bench(burst, "h200-1b")
    assert sc["workload"]["kind"] == "burst" and any("timed_trace" in n for n in sc["assumptions"])
    (sg,) = read_bench(DATA / "bench" / "sglang-0.5.4.jsonl")   # SGLang has no timed_trace: no caveat
    assert not any("timed_trace" in n for n in scenario_from_bench(sg, "h200-1b")[0]["assumptions"])


def test_a_pooling_or_embedding_run_is_named_as_such(tmp_path, capsys, monkeypatch):
    """vllm bench serve on an embedding model writes EmbedBenchmarkMetrics' figures (0.34.0
    serve.py ``benchmark()``: duration, completed, total_input_tokens,
    total_input_sequences, request_throughput, input_sequence_throughput,
    total_token_throughput, latencies, queue_times, e2el statistics): it was compared as a
    run (e2e latency and throughputs against a generating server) and refused by from-bench
    for want of lengths; now one line naming what it is, exit 2, nothing written. So is
    SGLang's ``--backend sglang-embedding``/``vllm-embedding`` line (0.5.10 bench_serving.py
    ``is_embedding``, 0.5.23 benchmark/serving.py ``_EMBEDDING_BACKENDS``)."""
    obj = {"date": "20261201-110000", "endpoint_type": "openai-embeddings", "backend": "openai-embeddings",
           "label": None, "model_id": "e5", "tokenizer_id": "e5", "num_prompts": 4, "request_rate": "inf",
           "burstiness": 1.0, "max_concurrency": None, "duration": 0.21, "completed": 4, "total_input_tokens": 1024,
           "total_input_sequences": 4, "request_throughput": 19.05, "input_sequence_throughput": 19.05,
           "total_token_throughput": 4876.2, "latencies": [0.05, 0.06, 0.055, 0.052], "queue_times": [0.0] * 4,
           "mean_e2el_ms": 54.25, "median_e2el_ms": 53.5, "std_e2el_ms": 3.6, "p99_e2el_ms": 59.8}
    p = tmp_path / "embed.json"
    p.write_text(json.dumps(obj))
    monkeypatch.chdir(tmp_path)
    for argv in (["validate-bench", str(p), "--profile", "h200-1b", "--out", "v"],
                 ["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "embed.json:1" in err[0] and "a pooling (embedding) model" in err[0], err
        assert sorted(q.name for q in tmp_path.iterdir()) == ["embed.json"]
    # SGLang bench_serving --backend sglang-embedding (0.5.10 on): generation keys, no output token
    line = json.loads((DATA / "bench" / "sglang-0.5.10.jsonl").read_text().splitlines()[0])
    line.update(backend="sglang-embedding", random_output_len=0, total_output_tokens=0, output_throughput=0.0)
    with pytest.raises(ConfigError, match="pooling") as e:
        parse_run(line, "x:1")
    assert "bench_serving --backend sglang-embedding" in str(e.value) and "vllm bench serve" not in str(e.value)


@pytest.mark.parametrize("backend", [["sglang"], {"name": "sglang"}])
def test_a_backend_that_is_not_a_string_is_read_as_before_the_embedding_check(backend):
    """The embedding-backend check looked an unhashable ``backend`` (a hand-edited list or
    object) up in a set: a TypeError traceback where the line was read (backend str()'d)."""
    line = json.loads((DATA / "bench" / "sglang-0.5.10.jsonl").read_text().splitlines()[0])
    run = parse_run({**line, "backend": backend}, "x:1")
    assert run.args["backend"] == str(backend)


def test_a_vllm_detailed_line_replays_its_own_arrivals(tmp_path):
    """``from-bench --arrivals details``: vLLM 0.33's start_times less queue_times become a
    trace (successful requests, in arrival order, lengths as measured) with the line's
    max_concurrency; the trace runs; an SGLang line (no send times) is refused."""
    from specsched.analysis.from_bench import write_scenario
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import SimEngine

    a, _ = read_bench(DATA / "bench" / "vllm-0.33.0-bench-serve.json")
    sc, tables = scenario_from_bench(a, "h200-1b", arrivals="details")
    t = tables["trace"]
    assert t["timestamp"].tolist() == pytest.approx([0.0, 0.2409 - 9e-06 + 1.2e-05, 0.6121 - 1.1e-05 + 1.2e-05])
    assert t["input_length"].tolist() == [128] * 3 and t["output_length"].tolist() == [4] * 3
    assert sc["workload"]["kind"] == "trace" and sc["workload"]["max_concurrency"] == 8
    paths = write_scenario(sc, tables, tmp_path / "v.yaml")
    assert [q.name for q in paths] == ["v.yaml", "v-trace.csv"]
    res = SimEngine(load_scenario(tmp_path / "v.yaml")).run()
    assert sorted(res.requests["start_s"].round(6).tolist()) == pytest.approx(t["timestamp"].tolist())
    with pytest.raises(ConfigError, match="start_times"):
        scenario_from_bench(read_bench_one(DATA / "bench" / "sglang-0.5.1-details.jsonl"), "h200-1b", arrivals="details")


def test_a_vllm_pytorch_benchmark_record_is_named_as_such(tmp_path):
    """SAVE_TO_PYTORCH_BENCHMARK_FORMAT=1 makes vLLM write ``<result>.pytorch.json`` beside the
    result (benchmarks/benchmark_utils.py ``convert_to_pytorch_benchmark_format``): a list of
    records, not a result."""
    p = tmp_path / "r.pytorch.json"
    p.write_text(json.dumps([{"benchmark": {"name": "vLLM benchmark", "extra_info": {"args": {}}},
                              "model": {"name": "m"}, "metric": {"name": "median_ttft_ms", "benchmark_values": [3.0],
                                                                 "extra_info": {}}}]))
    with pytest.raises(ConfigError, match="pytorch.json"):
        read_bench(p)


def test_sglang_040_051_0510_layouts():
    """sglang 0.4.0 (bench_serving.py ``benchmark()``: 0.3's subset + max_concurrency), 0.5.1
    (``--output-details``: ``result | result_details``; no tag/server_info), 0.5.10 (tag,
    server_info, total_throughput, p90 of e2e latency only, the peaks)."""
    (a,) = read_bench(DATA / "bench" / "sglang-0.4.0.jsonl")
    assert a.args["max_concurrency"] == 64 and a.args["request_rate"] == 16.0 and "mean_ttft_ms" not in a.summary
    sc, _ = scenario_from_bench(a, "h200-1b")
    assert sc["workload"]["input_len"] == {"kind": "fixed", "value": 1024} and sc["workload"]["max_concurrency"] == 64
    (b,) = read_bench(DATA / "bench" / "sglang-0.5.1-details.jsonl")
    assert b.num_prompts == 3 and b.details.ok.tolist() == [True, True, False] and "tag" not in b.extra
    sc, _ = scenario_from_bench(b, "h200-1b")        # sharegpt: the shipped histograms
    assert sc["workload"]["input_len"]["kind"] == "file" and sc["workload"]["num_requests"] == 2   # the successes
    (c,) = read_bench(DATA / "bench" / "sglang-0.5.10.jsonl")
    assert c.summary["p90_e2e_latency_ms"] == 3790.1 and "p90_ttft_ms" not in c.summary
    sc, _ = scenario_from_bench(c, "h200-1b")
    assert sc["workload"]["input_len"] == {"kind": "uniform", "value": 2000, "range_ratio": 0.5}
    assert sc["server"]["max_running_requests"] == 256 and sc["server"]["chunked_prefill_size"] == 8192


def _with_server_info(path: Path, **keys: object) -> object:
    obj = json.loads((DATA / "bench" / path).read_text().splitlines()[0])
    obj["server_info"] = {**obj["server_info"], **keys}
    return parse_run(obj, f"{path}:1")


def test_cuda_graph_settings_are_read_as_each_version_reports_them():
    """/server_info's CUDA-graph settings (sglang ``ServerArgs``; bench_serving writes the dict
    into the line from 0.5.5): 0.5.14-0.5.23 hold them only in the resolved
    ``cuda_graph_config`` (``{"decode": {"backend", "max_bs", "bs"}, "prefill": ...}``,
    server_args.py ``_parse_cuda_graph_config``, 0.5.20+ arg_groups/cuda_graph_hook.py), which
    was dropped as an unknown key: the decode graph's largest batch fell to the model's
    default and an eager phase was simulated with graphs. 0.5.5-0.5.13 name
    ``cuda_graph_max_bs`` as the model does, but turn graphs off with ``disable_cuda_graph``
    and the prefill (piecewise) graph with ``enable_piecewise_cuda_graph`` (opt-in, default
    False, to 0.5.8) or ``disable_piecewise_cuda_graph`` (0.5.10-0.5.13), all dropped."""
    (a,) = read_bench(DATA / "bench" / "sglang-0.5.23-details.jsonl")
    sv = scenario_from_bench(a, "h200-1b")[0]["server"]
    assert sv["cuda_graph_max_bs"] == 160 and sv["disable_decode_cuda_graph"] is False
    assert sv["disable_prefill_cuda_graph"] is False and "cuda_graph_max_bs_prefill" not in sv
    cfg = a.extra["server_info"]["cuda_graph_config"]
    eager_prefill = _with_server_info("sglang-0.5.23-details.jsonl", cuda_graph_config={
        "decode": {**cfg["decode"], "bs": [1, 2, 4, 8]}, "prefill": {**cfg["prefill"], "backend": "disabled"}})
    sv = scenario_from_bench(eager_prefill, "h200-1b")[0]["server"]
    assert sv["disable_prefill_cuda_graph"] is True and sv["cuda_graph_bs"] == [1, 2, 4, 8]
    # 0.5.7 (server_args.py dataclass): no piecewise graph unless enabled; --disable-cuda-graph
    (b,) = read_bench(DATA / "bench" / "sglang-0.5.7-eagle3.jsonl")
    for keys, decode_off, prefill_off in (({"enable_piecewise_cuda_graph": False}, False, True),
                                          ({"enable_piecewise_cuda_graph": True, "piecewise_cuda_graph_max_tokens": 4096},
                                           False, False),
                                          ({"disable_cuda_graph": True, "enable_piecewise_cuda_graph": False}, True, True)):
        sc = scenario_from_bench(_with_server_info("sglang-0.5.7-eagle3.jsonl", **keys), "h200-llama8b-roofline")[0]
        sv = sc["server"]
        assert (sv.get("disable_decode_cuda_graph", False), sv["disable_prefill_cuda_graph"]) == (decode_off, prefill_off)
        assert sv["cuda_graph_max_bs"] == b.extra["server_info"]["cuda_graph_max_bs"]
        assert sv.get("cuda_graph_max_bs_prefill") == keys.get("piecewise_cuda_graph_max_tokens")
        assert not any("piecewise" in n and "no argument" in n for n in sc["assumptions"])
    sv = scenario_from_bench(_with_server_info("sglang-0.5.10.jsonl", disable_piecewise_cuda_graph=True), "h200-1b")[0]["server"]
    assert sv["disable_prefill_cuda_graph"] is True      # 0.5.10-0.5.13: the opt-out
    # 0.5.23 --cuda-graph-backend-decode disabled: the flat flag is folded into cuda_graph_config
    # (arg_groups/cuda_graph_hook.py parse_cuda_graph_config), so it is read, not "left out"
    flat = _with_server_info("sglang-0.5.23-details.jsonl", cuda_graph_backend_decode="disabled", cuda_graph_config={
        "decode": {**cfg["decode"], "backend": "disabled"}, "prefill": cfg["prefill"]})
    sc = scenario_from_bench(flat, "h200-1b")[0]
    assert sc["server"]["disable_decode_cuda_graph"] is True
    assert not any("cuda_graph_backend_decode" in n for n in sc["assumptions"] if "no argument" in n)


def test_a_file_saved_by_an_editor_with_a_byte_order_mark_and_crlf(tmp_path):
    p = tmp_path / "runs.jsonl"
    src = (DATA / "bench" / "sglang-0.3.6.jsonl").read_text()
    p.write_bytes(("\ufeff" + src.replace("\n", "\r\n")).encode())
    assert [r.summary["completed"] for r in read_bench(p)] == [100, 100]


def test_vllms_misspelt_request_throughput_is_read(tmp_path):
    """Early vLLM result files name the request throughput ``request_inthroughput``: read as
    ``request_throughput`` (it was left in ``extra`` and missing from every comparison)."""
    p = tmp_path / "v.json"
    p.write_text(json.dumps({"backend": "vllm", "num_prompts": 10, "request_rate": "inf", "duration": 2.0,
                             "completed": 10, "total_input_tokens": 1000, "total_output_tokens": 100,
                             "request_inthroughput": 5.0, "input_throughput": 500.0, "output_throughput": 50.0,
                             "mean_ttft_ms": 40.0, "median_ttft_ms": 39.0, "p99_ttft_ms": 60.0}))
    (r,) = read_bench(p)
    assert r.summary["request_throughput"] == 5.0 and r.extra["request_inthroughput"] == 5.0


def test_p50_stands_in_for_a_missing_median(tmp_path):
    p = tmp_path / "v.json"
    p.write_text(json.dumps({"completed": 3, "duration": 1.0, "p50_ttft_ms": 7.0, "mean_tpot_ms": float("nan")}))
    (r,) = read_bench(p)
    assert r.summary["median_ttft_ms"] == 7.0 and "mean_tpot_ms" not in r.summary


@settings(max_examples=40, deadline=None)
@given(bad=st.sampled_from([float("nan"), float("inf"), float("-inf"), None]),
       key=st.sampled_from(["mean_ttft_ms", "median_itl_ms", "output_throughput", "p99_e2e_latency_ms", "concurrency"]),
       extra=st.dictionaries(st.text("abcxyz_", min_size=1, max_size=8), st.one_of(st.none(), st.integers(), st.text(max_size=5)),
                             max_size=3))
def test_invariant_non_finite_and_null_metrics_are_missing_and_unknown_keys_are_kept(tmp_path_factory, bad, key, extra):
    """Invariant: NaN, Infinity and -Infinity (as Python's json writes them) or null in a metric
    leave it out of the summary; the other metrics read as written; unknown keys land in extra."""
    p = tmp_path_factory.mktemp("m") / "r.jsonl"
    obj = {**extra, "completed": 3, "duration": 2.0, "median_ttft_ms": 5.0, key: bad}
    p.write_text(json.dumps(obj) + "\n")
    (r,) = read_bench(p)
    assert key not in r.summary and r.summary["completed"] == 3 and r.summary["duration"] == 2.0
    assert all(r.extra[k] == v for k, v in extra.items() if k not in obj or obj[k] is v)


def test_a_named_line_reads_when_another_line_was_cut_short(tmp_path, capsys):
    """A run killed while appending leaves a truncated last line: the whole lines before it
    are still readable by number; the cut line itself is refused. The file without LINE is its
    one whole run, with a warning naming the cut line (it was refused: the file's one run
    could only be read as FILE:1). A cut line with a whole one after it is damage, refused."""
    p = tmp_path / "runs.jsonl"
    good = (DATA / "bench" / "sglang-0.4.0.jsonl").read_text()
    p.write_text(good + good[:120])
    assert read_bench_one(f"{p}:1").summary["completed"] == 100
    with pytest.raises(ConfigError, match="truncated"):
        read_bench_one(f"{p}:2")
    assert capsys.readouterr().err == ""
    assert read_bench_one(str(p)).source == f"{p}:1"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {p}:2: left out: the last line is cut short")
    p.write_text(good + good + good[:120])   # two whole runs: LINE is still needed, in one line
    with pytest.raises(ConfigError, match="the file has 2 runs"):
        read_bench_one(str(p))
    assert capsys.readouterr().err == ""
    p.write_text(good[:120] + "\n" + good)
    with pytest.raises(ConfigError, match="truncated"):
        read_bench_one(str(p))



def test_the_run_appended_after_a_cut_one_reads_on_its_line(tmp_path, capsys):
    """bench_serving appends each run as one ``file.write(json.dumps(result) + "\\n")``: a run
    killed while appending leaves its line unfinished, and the next run's line is appended
    right after it, on the same line. That line was refused as truncated, FILE:LINE could not
    name its whole run, and calibrate --from FILE refused every run of the file. The whole
    run is read as that line's, the cut text left out with a warning line."""
    from specsched.analysis.calibrate_bench import fit_runs

    good = (DATA / "bench" / "sglang-0.4.0.jsonl").read_text()
    one, two, three = (json.dumps({**json.loads(good), "duration": d,   # the throughput follows (else said as impossible)
                                   "output_throughput": json.loads(good)["total_output_tokens"] / d}) + "\n"
                       for d in (7.5, 8.5, 9.5))
    p = tmp_path / "runs.jsonl"
    p.write_text(one + two[:300] + two + three)
    r = read_bench_one(f"{p}:2")
    assert r.source == f"{p}:2" and r.summary["duration"] == 8.5
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {p}:2: left out: a run cut short before the run on this line")
    assert [x.source for x in fit_runs([str(p)])] == [f"{p}:1", f"{p}:2", f"{p}:3"]
    assert "cut short" in capsys.readouterr().err
    q = tmp_path / "nested.jsonl"   # cut inside a nested object, right after its "{"
    cut = good.index('"request_rate"')
    q.write_text(good[:cut] + '"server_info": {' + good)
    assert read_bench_one(str(q)).source == f"{q}:1"
    p.write_text(good + good[:300] + "\n" + good)   # a cut line ended by a newline is not an append: refused
    with pytest.raises(ConfigError, match="truncated"):
        read_bench_one(f"{p}:2")


# ------------------------------------------------------------------ server logs

def test_a_log_rotated_with_copytruncate_reads_past_its_hole_of_nuls(tmp_path):
    """``server > server.log`` (not ``>>``) rotated by logrotate's copytruncate: the server
    writes on at its old offset, so the file starts with a run of NULs joined to its next
    line; a crash can leave NULs after the last line. That line was refused as binary data,
    and with it the whole log; a NUL inside a line's text still is."""
    lines = (LOGS / "sglang-0.5.23.log").read_bytes().splitlines()
    batch = [i for i, x in enumerate(lines) if b" batch" in x]
    text = b"\n".join(lines[batch[0]:batch[-1] + 1])   # from a batch line to a batch line
    clean, p = tmp_path / "clean.log", tmp_path / "server.log"
    clean.write_bytes(text + b"\n")
    p.write_bytes(b"\x00" * 8192 + text + b"\x00" * 100 + b"\n")
    got, want = parse_server_log(p), parse_server_log(clean)
    assert len(got) >= 2 and got.equals(want)   # the hole joins the first line: every line keeps its number
    p.write_bytes(text.replace(b"#running-req", b"#running\x00-req", 1))
    with pytest.raises(ConfigError, match="binary data"):
        parse_server_log(p)


def test_sglang_036_and_046_logs_with_a_full_stop():
    log = parse_server_log(LOGS / "sglang-0.3.6.log")
    assert log["kind"].tolist() == ["prefill", "prefill", "decode", "decode", "decode"]
    assert log.loc[1, "cached_token"] == 512 and log["graph"].isna().all() and (log["rank"] == "TP0").all()
    assert decode_step_samples(log)["line"].tolist() == [8, 9]
    log = parse_server_log(LOGS / "sglang-0.4.6-eagle.log")
    assert log.loc[log["kind"] == "decode", "accept_len"].tolist() == [2.95, 3.05, 2.80]
    s = decode_step_samples(log)
    assert s["line"].tolist() == [4] and s.loc[0, "step_s"] == pytest.approx(3.05 / 190.12)


def test_a_decode_window_whose_batch_shrank_times_no_step(tmp_path):
    """SGLang 0.5.23 ``report_decode_stats`` (scheduler_components/metrics_reporter.py) logs a
    window's tokens over its 40 forwards but ``#running-req`` at the last one: a window in
    which requests finished ran larger batches than its line says, so tokens_per_step /
    gen throughput reads its step short. Only a line whose previous decode line (no prefill
    between) has the same count times a step; the shrunk window is left out."""
    step = {8: 0.0054, 6: 0.0053}               # seconds per decode step at each batch
    head = "[2026-11-30 12:00:{:02d}] "
    lines = [head.format(0) + "Prefill batch, #new-seq: 8, #new-token: 8192, #cached-token: 0, token usage: 0.01, "
             "#running-req: 0, #queue-req: 0"]
    # windows of 40 forwards: 8 throughout, 8 throughout, then 8 for 20 and 6 for 20 (two finished)
    windows = [[8] * 40, [8] * 40, [8] * 20 + [6] * 20, [6] * 40]
    for k, w in enumerate(windows):
        tokens, secs = sum(w), sum(step[b] for b in w)
        lines.append(head.format(k + 1) + f"Decode batch, #running-req: {w[-1]}, #token: {w[-1] * 1100}, "
                     f"token usage: 0.01, cuda graph: True, gen throughput (token/s): {tokens / secs:.4f}, #queue-req: 0")
    p = tmp_path / "server.log"
    p.write_text("\n".join(lines) + "\n")
    s = decode_step_samples(parse_server_log(p))
    assert s["running_req"].tolist() == [8, 6]      # the first window follows a prefill; the third shrank
    assert s["step_s"].tolist() == pytest.approx([step[8], step[6]], rel=1e-4)


def test_sglang_0523_log_ms_timestamps_iteration_numbers_and_suffixes():
    log = parse_server_log(LOGS / "sglang-0.5.23.log")
    assert len(log) == 5 and log.loc[0, "time"].microsecond == 4000
    assert log.loc[1, "input_throughput"] == 52510.25 and log.loc[0, "graph"] == 0.0
    d = log[log["kind"] == "decode"]
    assert d["graph"].tolist() == [1.0, 1.0, 1.0] and d["accept_len"].isna().all()
    s = decode_step_samples(log)
    assert s["line"].tolist() == [7, 8] and s["step_s"].tolist() == pytest.approx([16 / 1066.67] * 2)
    assert prefill_summary(log)["max_queue_req"] == 24


def test_sglang_0523_dp_ranks_interleaved_with_spec_and_swa_fields():
    log = parse_server_log(LOGS / "sglang-0.5.23-dspark-dp.log")
    assert sorted(set(log["rank"])) == ["DP0 TP0 EP0", "DP1 TP4 EP4"]
    assert log.loc[2, "token"] == 4400 and log.loc[2, "accept_rate"] == 0.44 and log.loc[5, "graph"] == 0.0
    s = decode_step_samples(log)             # each rank's second decode line follows its own first
    assert s["line"].tolist() == [5, 6]
    assert s["step_s"].tolist() == pytest.approx([2 * 4.0 / 400.0, 3.5 / 175.0])


def test_sglang_030_time_only_stamps_and_the_mixed_chunk_prefill_line():
    """sglang 0.3.0 srt/managers/tp_worker.py (``get_new_prefill_batch``: ``Prefill
    batch(mixed #running-req: N). ...`` when decodes ride along; ``print_decode_stats``) behind
    srt/utils.py ``configure_logger``'s ``datefmt="%H:%M:%S"`` (no date)."""
    log = parse_server_log(LOGS / "sglang-0.3.0.log")
    assert log["kind"].tolist() == ["prefill", "prefill", "decode", "decode", "decode"]
    assert log.loc[1, "running_req"] == 4 and log.loc[1, "mixed"] == 1.0 and log.loc[1, "new_token"] == 2048
    assert log.loc[0, "mixed"] != log.loc[0, "mixed"] and (log["rank"] == "TP0").all()
    assert str(log.loc[2, "time"]) == "1970-01-01 09:01:02"
    assert decode_step_samples(log)["line"].tolist() == [5, 6]


def test_prefill_decode_disaggregation_counters_of_each_version():
    """PD counters: 0.4.6 srt/managers/scheduler.py (prefill ``#unbootstrapped-req``,
    ``#transferring-req`` with a trailing space; decode ``pre-allocated usage``), 0.5.10
    srt/observability/scheduler_metrics_mixin.py (prefill ``#prealloc-req`` = the bootstrap
    queue, ``#inflight-req``; decode ``#prealloc-req``, ``#transfer-req``, ``#retracted-req``;
    hybrid-Mamba ``#full token``/``mamba usage``), 0.5.23 metrics_reporter.py (``#bootstrap-req``,
    ``#optimistic-req``, ``#replay-token``, DSpark's ``est uncap acc len: m [lo, hi]``)."""
    pre = parse_server_log(LOGS / "sglang-0.4.6-pd-prefill.log")
    assert pre["bootstrap_req"].tolist() == [3, 1] and pre["inflight_req"].tolist() == [0, 2]
    assert pre["queue_req"].tolist() == [5, 3]
    dec = parse_server_log(LOGS / "sglang-0.4.6-pd-decode.log")
    assert dec["prealloc_usage"].tolist() == [0.02, 0.01] and decode_step_samples(dec)["line"].tolist() == [2]
    pre = parse_server_log(LOGS / "sglang-0.5.10-pd-prefill.log")
    assert pre["bootstrap_req"].tolist() == [3, 1] and pre["prealloc_req"].isna().all() and pre["graph"].tolist() == [0, 0]
    dec = parse_server_log(LOGS / "sglang-0.5.10-pd-decode-mamba.log")
    assert dec["prealloc_req"].tolist() == [2, 0] and dec["transfer_req"].tolist() == [1, 0]
    assert dec["token"].tolist() == [52000, 53920] and dec["mamba_usage"].tolist() == [0.38, 0.38]
    log = parse_server_log(LOGS / "sglang-0.5.23-pd.log")
    assert log["kind"].tolist() == ["prefill", "prefill", "decode", "decode"]
    assert log.loc[1, "replay_token"] == 2048 and log.loc[1, "bootstrap_req"] == 2 and log.loc[1, "inflight_req"] == 4
    assert log.loc[2, "accept_len"] == 3.40 and log.loc[2, "prealloc_req"] == 4 and log.loc[2, "transfer_req"] == 2
    assert log.loc[2, "gen_throughput"] == 5210.0 and log.loc[3, "retracted_req"] == 0
    s = decode_step_samples(log)
    assert s["line"].tolist() == [4] and s.loc[0, "step_s"] == pytest.approx(64 * 3.38 / 5330.75)


def test_sglang_051_full_stop_with_cuda_graph_and_swa_pools():
    """sglang 0.5.1 srt/managers/scheduler_metrics_mixin.py: still ``Prefill batch.``, hybrid
    SWA usage on prefill lines (``full token usage``, ``swa token usage``) and decode lines
    (``#full token`` ...), ``cuda graph`` on decode lines only, a trailing ``, ``."""
    log = parse_server_log(LOGS / "sglang-0.5.1-swa-eagle.log")
    assert log["token_usage"].tolist() == [0.02, 0.04, 0.04, 0.04] and log["swa_token_usage"].tolist() == [0.05, 0.1, 0.1, 0.1]
    assert log.loc[2, "token"] == 17000 and log.loc[2, "swa_token"] == 4200 and log.loc[3, "queue_req"] == 0
    assert log["graph"].tolist()[2:] == [1.0, 1.0] and log["graph"].isna().tolist()[:2] == [True, True]
    assert decode_step_samples(log)["step_s"].tolist() == pytest.approx([8 * 3.20 / 1620.0])


def test_decode_line_with_and_without_spec_fields_reads_the_same_otherwise():
    from specsched.analysis.server_log import parse_line

    base = ("[2026-03-02 08:01:02 TP0] Decode batch, #running-req: 16, #token: 18640, token usage: 0.05, {}"
            "cuda graph: True, gen throughput (token/s): 1066.67, #queue-req: 0")
    plain = parse_line(base.format(""), 1)
    spec = parse_line(base.format("accept len: 3.10, accept rate: 0.42, cap len: 6.00, block accept len: 3.30, "), 1)
    assert "accept_len" not in plain and spec["accept_len"] == 3.10 and spec["accept_rate"] == 0.42
    assert spec["cap_len"] == 6.00 and spec["block_accept_len"] == 3.30
    spec_keys = ("accept_len", "accept_rate", "cap_len", "block_accept_len")
    assert {k: v for k, v in spec.items() if k not in spec_keys} == plain


def test_a_log_with_no_batch_lines_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch):
    with pytest.raises(ConfigError) as e:
        parse_server_log(LOGS / "no-batch-lines.log")
    assert "start-up lines only, no batch lines" in str(e.value)   # "The server is fired up ..."
    monkeypatch.chdir(tmp_path)
    argv = ["calibrate", "--from", str(DATA / "bench" / "sglang-0.4.6-eagle.jsonl"), "--profile", "h200-1b",
            "--params", "decode", "--server-log", str(LOGS / "no-batch-lines.log"), "--out", "fitted.yaml"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-batch-lines.log:2:" in err[0] and "no batch lines" in err[0]
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ traces

def test_public_trace_layouts():
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    t = DATA / "traces"
    az = load_trace(TraceConfig(path=str(t / "azure-2023-code.csv"), layout="azure"))
    assert az.arrival_s.tolist() == pytest.approx([0.0, 3.437851, 3.620142, 4.31941], abs=1e-6) and az.output_len[-1] == 0
    tz = load_trace(TraceConfig(path=str(t / "azure-2024-code-week.csv"), layout="azure"))   # times with a zone
    assert tz.arrival_s.tolist() == pytest.approx([0.0, 0.041282, 1.50928], abs=1e-6)   # epoch seconds in a float
    bg = load_trace(TraceConfig(path=str(t / "burstgpt.csv"), layout="burstgpt"))
    assert bg.arrival_s.tolist() == [0.0, 40.0, 113.0] and bg.input_len.tolist() == [472, 1087, 417]
    mc = load_trace(TraceConfig(path=str(t / "mooncake-conversation.jsonl"), layout="mooncake"))
    assert mc.prefix_reuse() == pytest.approx((12 * 512 + 6955) / (6955 + 6472 + 9014 + 1280))


def test_a_layout_with_one_column_renamed_keeps_its_other_names(tmp_path):
    """``columns`` override the layout's names one at a time: a BurstGPT export whose time
    column is called ``Time`` reads with ``layout: burstgpt, columns: {timestamp: Time}``."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    p = tmp_path / "b.csv"
    p.write_text((DATA / "traces" / "burstgpt.csv").read_text().replace("Timestamp,", "Time,", 1))
    t = load_trace(TraceConfig(path=str(p), layout="burstgpt", columns={"timestamp": "Time"}))
    assert t.arrival_s.tolist() == [0.0, 40.0, 113.0] and t.input_len.tolist() == [472, 1087, 417]
    cols, unit = TraceConfig(path="x", layout="mooncake", columns={"input_len": "prompt"}).resolved()
    assert (cols.timestamp, cols.input_len, cols.hash_ids, unit) == ("timestamp", "prompt", "hash_ids", "ms")


def test_a_trace_error_shows_the_timestamp_as_written(tmp_path):
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:45.00,396,9\n")
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="azure"))
    assert (e.value.file, e.value.key, e.value.value) == (f"{p}:3", "TIMESTAMP", "2023-11-16 18:15:45.00")
    assert "2023-11-16 18:15:46.68" in e.value.allowed


def test_a_csv_with_a_byte_order_mark_and_spaces(tmp_path):
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    p = tmp_path / "t.csv"
    p.write_bytes("\ufeffTIMESTAMP, ContextTokens, GeneratedTokens\r\n2024-01-01 00:00:00, 10, 2\r\n".encode())
    assert load_trace(TraceConfig(path=str(p), layout="azure")).input_len.tolist() == [10]


def test_a_csv_with_blank_lines_and_spaces_around_its_header_names(tmp_path):
    """A blank line (an editor's trailing one, CRLF or LF, or one between rows) is no request:
    it was read as a row of empty cells and refused ("<empty>: not a number"). Header names
    with spaces on both sides match as the header check matches them (pandas was handed the
    stripped names and refused the file as unreadable). Line numbers in errors still count
    the blank lines."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    az = (DATA / "traces" / "azure-2023-code.csv").read_text().splitlines()
    p = tmp_path / "t.csv"
    p.write_bytes(("\r\n".join([az[0], az[1], "", *az[2:]]) + "\r\n\r\n\r\n").encode())
    t = load_trace(TraceConfig(path=str(p), layout="azure"))
    assert t.arrival_s.tolist() == pytest.approx([0.0, 3.437851, 3.620142, 4.31941], abs=1e-6)
    assert load_trace(TraceConfig(path=str(p), layout="azure"), limit=2).input_len.tolist() == [374, 396]
    q = tmp_path / "h.csv"
    q.write_text("TIMESTAMP ,ContextTokens , GeneratedTokens \n" + "\n".join(az[1:]) + "\n")
    assert load_trace(TraceConfig(path=str(q), layout="azure")).input_len.tolist() == t.input_len.tolist()
    r = tmp_path / "bad.csv"
    r.write_text("\n".join([az[0], az[1], "", az[2].replace(",396,", ",x,")]) + "\n")
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(r), layout="azure"))
    assert (e.value.file, e.value.key, e.value.value) == (f"{r}:4", "ContextTokens", "x")


def test_gzipped_traces_and_result_files_read_as_their_plain_text(tmp_path):
    """A compressed copy (``gzip trace.jsonl``, ``gzip runs.jsonl``) reads as the file it was:
    both were refused as "not a text file". Found by the first bytes: ``.csv.gz`` is a CSV,
    ``.jsonl.gz`` a JSONL; a cut gzip file is refused in one line."""
    import gzip

    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    t = DATA / "traces"
    for name, layout in (("azure-2023-code.csv", "azure"), ("mooncake-conversation.jsonl", "mooncake")):
        z = tmp_path / f"{name}.gz"
        z.write_bytes(gzip.compress((t / name).read_bytes()))
        a, b = (load_trace(TraceConfig(path=str(f), layout=layout)) for f in (t / name, z))
        assert a.arrival_s.tolist() == b.arrival_s.tolist() and a.input_len.tolist() == b.input_len.tolist()
        assert a.prefix_reuse() == b.prefix_reuse()
    src = DATA / "bench" / "sglang-0.5.23-details.jsonl"
    z = tmp_path / "runs.jsonl.gz"
    z.write_bytes(gzip.compress(src.read_bytes()))
    (a,), (b,) = read_bench(src), read_bench(z)
    assert a.summary == b.summary and a.args == b.args and b.details.ttfts.tolist() == a.details.ttfts.tolist()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(z.read_bytes()[:60])
    with pytest.raises(ConfigError, match="cannot be read"):
        read_bench(cut)
    cut_trace = tmp_path / "cut.jsonl"
    cut_trace.write_bytes(gzip.compress((t / "mooncake-conversation.jsonl").read_bytes())[:60])
    with pytest.raises(ConfigError, match="cannot be read"):
        load_trace(TraceConfig(path=str(cut_trace), layout="mooncake"))


def _packed(kind: str, data: bytes, name: str = "runs.jsonl") -> bytes:
    """``data`` compressed as ``kind`` (gz, bz2, xz, zip: an archive of one file named ``name``)."""
    import bz2
    import gzip
    import io
    import lzma
    import zipfile

    if kind == "zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, data)
        return buf.getvalue()
    return {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](data)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zip"])
def test_a_compressed_result_file_or_log_works_in_every_command_a_trace_does(tmp_path, capsys, monkeypatch, kind):
    """A result file kept as ``runs.jsonl.bz2``, ``.xz`` or a ``.zip`` was refused as "not a
    text file" by ``validate --measured``, ``scenario from-bench`` and ``calibrate --from``
    (gzip alone was read), while a trace compressed so was replayed. Each now reads as its plain
    text, through the commands, and a server log alike; cut short, it is one line and exit 2,
    nothing written."""
    monkeypatch.chdir(tmp_path)
    src = DATA / "bench" / "sglang-0.4.6-eagle.jsonl"
    f = tmp_path / f"runs.jsonl.{kind}"
    f.write_bytes(_packed(kind, src.read_bytes()))
    (a,), (b,) = read_bench(src), read_bench(f)
    assert a.summary == b.summary and a.args == b.args
    log = tmp_path / f"server.log.{kind}"
    log.write_bytes(_packed(kind, (LOGS / "sglang-0.4.6-eagle.log").read_bytes(), "server.log"))
    assert parse_server_log(log).equals(parse_server_log(LOGS / "sglang-0.4.6-eagle.log"))
    capsys.readouterr()
    assert main(["scenario", "from-bench", f"{f}:1", "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    assert main(["validate", "--measured", f"{f}:1", "--scenario", "s.yaml", "--seeds", "1", "--out", "v"]) == 0
    assert "median_ttft_ms" in capsys.readouterr().out
    assert main(["calibrate", "--from", str(f), "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
                 "--max-evals", "2", "--server-log", str(log), "--out", "fitted.yaml", "-q"]) == 0
    assert f.name in yaml_text(tmp_path / "fitted.yaml") and log.name in yaml_text(tmp_path / "fitted.yaml")
    cut = tmp_path / f"cut.jsonl.{kind}"
    cut.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])
    capsys.readouterr()
    for argv in (["validate", "--measured", f"{cut}:1", "--scenario", "s.yaml", "--seeds", "1", "--out", "v2"],
                 ["scenario", "from-bench", f"{cut}:1", "--profile", "h200-1b", "--out", "s2.yaml"],
                 ["calibrate", "--from", str(cut), "--profile", "h200-1b", "--out", "f2.yaml"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and cut.name in err[0] and "cannot be read" in err[0], err
    assert not any((tmp_path / x).exists() for x in ("v2", "s2.yaml", "f2.yaml"))


def yaml_text(p: Path) -> str:
    """The text of ``p`` with YAML's folded lines joined (a long provenance string)."""
    return " ".join(p.read_text().split())


def test_other_benchmark_files_are_named_as_such(tmp_path):
    """Another SGLang 0.5.23 benchmark appends JSON lines with bench_serving-like keys:
    ``steady_state_serving --steady-state-output-file`` (the busiest window of a run:
    ``duration``, ``completed``, ``output_throughput`` of that window only); the diffusion
    server's ``multimodal_gen`` bench_serving writes ``duration``. They were read as
    bench_serving runs; they are refused, naming what they are (``bench_one_batch_server``
    lines are read as runs: tests/test_one_batch_server.py)."""
    steady = {"concurrency_ratio": 0.9, "window_start": 3.1, "window_end": 20.4, "duration": 17.3,
              "concurrency_threshold": 58, "completed": 410, "total_input": 420000, "input_throughput": 24277.5,
              "total_output": 104960.0, "total_output_retokenized": 104900.0, "output_throughput": 6067.0,
              "output_throughput_retokenized": 6063.5, "average_concurrency": 62.1, "peak_concurrency": 64,
              "peak_output_throughput": 6400.0}
    # sglang.multimodal_gen.benchmarks.bench_serving (a diffusion server), json.dump(metrics, indent=2):
    # its "duration" passed it for a bench_serving run, compared by its wall time alone
    diffusion = {"duration": 61.2, "completed_requests": 50, "completed_outputs": 50, "failed_requests": 0,
                 "throughput_qps": 0.82, "output_throughput_ops": 0.82, "latency_mean": 12.1, "latency_median": 11.9,
                 "latency_p50": 11.9, "latency_p90": 14.0, "latency_p95": 14.6, "latency_p99": 15.2,
                 "num_outputs_per_prompt": 1, "peak_memory_mb_max": 0, "peak_memory_mb_mean": 0,
                 "peak_memory_mb_median": 0}
    # genai-perf's profile_export_genai_perf.json: every metric an object; was refused as
    # "request_throughput = {...}: must be a number or null", the file never named
    genai = {"request_throughput": {"unit": "requests/sec", "avg": 12.3},
             "request_latency": {"unit": "ms", "avg": 4100.0, "p50": 4000.0, "p99": 6000.0},
             "time_to_first_token": {"unit": "ms", "avg": 45.1, "p50": 44.0, "p99": 80.0},
             "inter_token_latency": {"unit": "ms", "avg": 9.0}, "output_token_throughput": {"unit": "tokens/sec", "avg": 3000.0},
             "request_count": {"unit": "count", "avg": 100}, "input_config": {"model": ["m"]}}
    for name, obj, what in (("steady.jsonl", steady, "steady-state window"),
                            ("diffusion.json", diffusion, "sglang.multimodal_gen"), ("genai.json", genai, "genai-perf")):
        p = tmp_path / name
        p.write_text(json.dumps(obj, indent=2 if name.endswith(".json") else None) + "\n")
        with pytest.raises(ConfigError) as e:
            read_bench(p)
        assert e.value.file == f"{p}:1" and what in e.value.allowed


def test_a_steady_state_record_after_its_run_is_read_with_the_run(tmp_path):
    """``python -m sglang.benchmark.steady_state_serving --output-file F
    --steady-state-output-file F`` (SGLang 0.5.23 benchmark/steady_state_serving.py
    ``_run_with_capture``: bench_serving's ``benchmark()`` appends the run's line, then
    ``_append_metrics`` its ``SteadyStateMetrics``) leaves the run's window on the next line.
    The file was refused (the record read as a run); now it is one run whose summary holds
    the full-run figures as written and the window's under the ``steady_*`` keys a predicted
    run has, from-bench predicts the same window, and validate-bench compares it."""
    f = DATA / "bench" / "sglang-0.5.23-steady-state.jsonl"
    run, steady = _objs(f)
    got = read_bench_one(f)   # one run: no LINE needed
    assert got.source == f"{f}:1" and got.summary["completed"] == run["completed"] == 64
    assert got.summary["output_throughput"] == run["output_throughput"] and got.summary["duration"] == 9.6
    assert got.summary["steady_output_throughput"] == steady["output_throughput"]
    assert got.summary["steady_completed"] == 56 and got.summary["steady_concurrency_ratio"] == 0.8
    assert got.summary["steady_concurrency"] == steady["average_concurrency"]
    assert read_bench_one(f"{f}:1").summary == got.summary
    with pytest.raises(ConfigError) as e:   # naming the record: the run it belongs to
        read_bench_one(f"{f}:2")
    assert e.value.file == f"{f}:2" and f"{f}:1" in e.value.allowed
    sc, _ = scenario_from_bench(got, "h200-1b")
    assert sc["workload"]["steady_state_concurrency_ratio"] == 0.8
    rows = {r["metric"]: r for r in comparison_rows({"steady_output_throughput": 400.0}, got.summary)}
    assert rows["steady_output_throughput"]["measured"] == steady["output_throughput"]
    assert "steady_window_start_s" not in rows and "steady_concurrency_ratio" not in rows
    # two runs, each followed by its window: two runs
    p = tmp_path / "sweep.jsonl"
    p.write_text(f.read_text() * 2)
    a, b = read_bench(p)
    assert (a.source, b.source) == (f"{p}:1", f"{p}:3") and a.summary == b.summary
    # a window that cannot be the run's (cat of runs, then of windows): refused, naming it
    p.write_text(json.dumps(run) + "\n" + json.dumps({**steady, "completed": 500}) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file == f"{p}:2" and e.value.key == "completed" and "another run's" in e.value.allowed
    # a window after a window (no run before it) stays refused as a window
    p.write_text(f.read_text() + json.dumps(steady) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file == f"{p}:3" and "steady-state window" in e.value.allowed


def test_a_generated_text_with_a_unicode_line_separator_keeps_its_line_whole(tmp_path):
    """A writer that keeps non-ASCII as it is (``ensure_ascii=False``; serde_json) leaves
    U+2028 or U+0085 raw inside a generated text; ``str.splitlines`` broke the JSON line there
    and the run was refused as truncated. Lines end at newlines only."""
    obj = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text())
    obj["generated_texts"][0] = "first\u2028second\x85third"
    p = tmp_path / "r.jsonl"
    p.write_text((json.dumps(obj, ensure_ascii=False) + "\n") * 2, encoding="utf-8")
    a, b = read_bench(p)
    assert (a.source, b.source) == (f"{p}:1", f"{p}:2") and a.summary == b.summary
    assert read_bench_one(f"{p}:2").details.ttfts.tolist() == obj["ttfts"]


def test_bench_servings_printed_report_is_named_as_such(tmp_path):
    """A saved console report (bench_serving prints it under " Serving Benchmark Result ",
    0.5.23 ``benchmark/serving.py`` ``benchmark()``) is refused as what it is, not as a
    truncated JSON line."""
    p = tmp_path / "report.txt"
    p.write_text("\n" + " Serving Benchmark Result ".center(50, "=") + "\nBackend:   sglang\nMedian TTFT (ms):  40.1\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file == f"{p}:2" and "--output-file" in e.value.allowed and "truncated" not in e.value.allowed


def test_a_mooncake_trace_read_without_its_layout_is_said(tmp_path, capsys):
    """A Mooncake file under the default layout (custom: the same key names, time in s) ran
    its ms timestamps as seconds (arrivals 1000 times wider) and shared no prefix, without a
    word; now a warning names the layout to use. A custom layout that states its unit, or a
    file without hash_ids, says nothing."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    f = DATA / "traces" / "mooncake-conversation.jsonl"
    # the layout left to the default: read as Mooncake's (its columns), said in a note
    assert load_trace(TraceConfig(path=str(f))).arrival_s[2] == pytest.approx(3.052)
    assert "layout: mooncake" in capsys.readouterr().err
    # custom stated: as the scenario says, warned
    assert load_trace(TraceConfig(path=str(f), layout="custom")).arrival_s[2] == 3052.0
    err = capsys.readouterr().err
    assert "hash_ids" in err and "layout: mooncake" in err and str(f) in err
    csv = tmp_path / "m.csv"
    csv.write_text("timestamp,input_length,output_length,hash_ids\n0,600,5,1 2\n3052,700,6,1 3\n")
    load_trace(TraceConfig(path=str(csv), layout="custom"))
    assert "layout: mooncake" in capsys.readouterr().err
    load_trace(TraceConfig(path=str(f), time_unit="ms"))
    load_trace(TraceConfig(path=str(f), layout="mooncake"))
    plain = tmp_path / "p.jsonl"
    plain.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    load_trace(TraceConfig(path=str(plain)))
    assert capsys.readouterr().err == ""


def test_tab_and_semicolon_separated_traces(tmp_path):
    """A tab-separated export or a spreadsheet's semicolon-separated CSV reads as the comma
    one (the header was one unknown column: refused as missing TIMESTAMP)."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    src = DATA / "traces" / "burstgpt.csv"
    want = load_trace(TraceConfig(path=str(src), layout="burstgpt"))
    for sep, name in (("\t", "b.tsv"), (";", "b.csv")):
        p = tmp_path / name
        p.write_text(src.read_text().replace(",", sep))
        t = load_trace(TraceConfig(path=str(p), layout="burstgpt"))
        assert t.arrival_s.tolist() == want.arrival_s.tolist() and t.output_len.tolist() == want.output_len.tolist()


def test_a_trace_length_past_int64_is_refused(tmp_path):
    """A length of 1e300 (a float in a JSON row, integer-valued) passed the integer check and
    was cast to garbage; now refused naming the line."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                 '{"timestamp": 5, "input_length": 1e300, "output_length": 2}\n')
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert (e.value.file, e.value.key) == (f"{p}:2", "input_length")


def test_a_trace_in_local_time_across_a_daylight_saving_switch(tmp_path):
    """Times written with their UTC offset change offset at a daylight-saving switch; pandas
    refuses to mix offsets unless told to convert, and the trace was refused as "not a
    readable CSV". Read on one clock (UTC), the gaps are the real ones."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-03-31 01:59:59.5+01:00,10,2\n"
                 "2024-03-31 03:00:00.5+02:00,11,2\n2024-03-31 03:00:01+02:00,12,3\n")
    assert load_trace(TraceConfig(path=str(p), layout="azure")).arrival_s.tolist() == pytest.approx([0.0, 1.0, 1.5])


def test_a_date_in_a_seconds_column_says_which_time_unit_reads_it(tmp_path):
    """An Azure-like file under ``layout: custom`` (time unit s): the refusal names the unit
    that reads it."""
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    cols = {"timestamp": "TIMESTAMP", "input_len": "ContextTokens", "output_len": "GeneratedTokens"}
    path = str(DATA / "traces" / "azure-2023-code.csv")
    with pytest.raises(ConfigError, match="time_unit: datetime"):
        load_trace(TraceConfig(path=path, columns=cols))
    assert len(load_trace(TraceConfig(path=path, columns=cols, time_unit="datetime"))) == 4


# ------------------------------------------------------------------ bad input, every reader

def _trace_yaml(tmp_path, trace):
    import yaml

    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                 "workload": {"kind": "trace", "trace": {"path": str(trace), "layout": "mooncake"}}}))
    return str(y)


BAD = {
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
    "empty": b"",
    "truncated": b'{"completed": 3, "duration": 1.0, "median_ttft_ms": 4',
    "not-bench": b'{"hello": 1}\n',
}


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("command", ["validate-bench", "validate-measured", "from-bench", "calibrate", "run-trace", "server-log"])
def test_every_reader_refuses_bad_input_with_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, command, kind):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / f"bad-{kind}.jsonl"
    bad.write_bytes(BAD[kind])
    good = str(DATA / "bench" / "sglang-0.4.6-eagle.jsonl")
    argv = {
        "validate-bench": ["validate-bench", str(bad), "--profile", "h200-1b", "--out", "out"],
        "validate-measured": ["validate", "--measured", str(bad), "--profile", "h200-1b", "--out", "out"],
        "from-bench": ["scenario", "from-bench", str(bad), "--profile", "h200-1b", "--out", "out.yaml"],
        "calibrate": ["calibrate", "--from", str(bad), "--profile", "h200-1b", "--out", "out.yaml"],
        "run-trace": ["run", _trace_yaml(tmp_path, bad), "--out", "out"],
        "server-log": ["calibrate", "--from", good, "--profile", "h200-1b", "--server-log", str(bad), "--out", "out.yaml"],
    }[command]
    before = set(tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and bad.name in err[0], err
    assert set(tmp_path.iterdir()) == before


def test_a_directory_and_a_gzipped_log(tmp_path):
    import gzip

    with pytest.raises(ConfigError):
        read_bench(tmp_path)
    p = tmp_path / "server.log.gz"
    with gzip.open(p, "wt") as f:
        f.write((LOGS / "sglang-0.5.23.log").read_text())
    assert len(parse_server_log(p)) == 5
    renamed = tmp_path / "server.log.1"   # compressed under a name without .gz: read by its first bytes
    renamed.write_bytes(p.read_bytes())
    assert len(parse_server_log(renamed)) == 5
    q = tmp_path / "broken.log.gz"
    q.write_bytes(p.read_bytes()[:40])
    with pytest.raises(ConfigError, match="cannot be read"):
        parse_server_log(q)
    # damaged inside the deflate stream (not cut short): zlib raises its own error, which a
    # result file and a trace already refused in one line; the log reader let it out
    damaged = bytearray(gzip.compress((LOGS / "sglang-0.5.23.log").read_bytes() * 20))
    damaged[30:60] = bytes(b ^ 0xFF for b in damaged[30:60])
    q.write_bytes(bytes(damaged))
    with pytest.raises(ConfigError, match="cannot be read"):
        parse_server_log(q)


def test_log_line_numbers_are_an_editors_past_a_progress_bar(tmp_path):
    """The server redraws tqdm bars with a bare "\r" (capturing CUDA graphs at start-up);
    read as line ends they moved every later line number (``line``, and error locations)
    away from what an editor or ``grep -n`` shows. CRLF lines still read."""
    text = (LOGS / "sglang-0.5.23.log").read_text().splitlines()
    bar = "Capturing batches (bs=8):  50%|#####     | 1/2 [00:01<00:01]\rCapturing batches (bs=4): 100%|##########| 2/2"
    p = tmp_path / "s.log"
    p.write_bytes("\r\n".join([bar, *text, ""]).encode())
    log = parse_server_log(p)
    want = [i for i, t in enumerate([bar, *text], start=1) if " batch" in t and ("Prefill" in t or "Decode" in t)]
    assert log["line"].tolist() == want
    assert log["running_req"].tolist() == parse_server_log(LOGS / "sglang-0.5.23.log")["running_req"].tolist()


@settings(max_examples=60, deadline=None)
@given(running=st.integers(0, 4096), token=st.integers(0, 10**7), queue=st.integers(0, 10**5),
       gen=st.floats(0, 1e6, allow_nan=False), accept=st.one_of(st.none(), st.floats(1, 16, allow_nan=False)),
       iters=st.one_of(st.none(), st.integers(0, 10**9)), ms=st.booleans(), dated=st.booleans(),
       rank=st.sampled_from(["", " TP0", " DP3 TP24 EP24", " DP1 PP0 ATTN_CP0 MOE_DP0 TP8 EP8"]),
       outer=st.sampled_from(["", "sglang-1  | ", "2026-03-02T08:01:02.123456789Z stdout F ", "INFO: "]),
       label=st.sampled_from(["cuda graph", "cpu graph", "npu graph"]), swa=st.booleans(), stop=st.sampled_from([",", "."]))
def test_invariant_decode_lines_read_back_whatever_the_optional_parts(running, token, queue, gen, accept, iters, ms,
                                                                      dated, rank, outer, label, swa, stop):
    """Invariant: the fields a decode line states are read back exactly, whatever optional
    parts (iteration number, ms, 0.3.0's time-only stamp, ranks, an outer prefix, spec and SWA
    fields, graph label, 0.3-0.5.1's full stop) the versions add around them."""
    from specsched.analysis.server_log import parse_line

    stamp = ("2026-03-02 " if dated else "") + "08:01:02" + (".250" if ms else "")
    usage = (f"#full token: {token}, full token usage: 0.05, #swa token: 7, swa token usage: 0.01, " if swa
             else f"#token: {token}, token usage: 0.05, ")
    spec = f"accept len: {accept:.2f}, accept rate: 0.40, " if accept is not None else ""
    it = f" [{iters}]" if iters is not None else ""
    line = (f"{outer}[{stamp}{rank}] Decode batch{it}{stop} #running-req: {running}, {usage}{spec}"
            f"{label}: True, gen throughput (token/s): {gen:.2f}, #queue-req: {queue}\n")
    row = parse_line(line, 7)
    assert row["kind"] == "decode" and row["line"] == 7 and row["rank"] == rank.strip()
    assert (row["running_req"], row["token"], row["queue_req"]) == (running, token, queue)
    assert row["gen_throughput"] == pytest.approx(round(gen, 2)) and row["graph"] == 1.0
    assert row.get("accept_len") == (None if accept is None else pytest.approx(round(accept, 2)))
    assert row["time"] == (stamp if dated else "1970-01-01 " + stamp)


def test_validate_measured_is_validate_bench(tmp_path, capsys, monkeypatch):
    """``specsched validate --measured FILE[:LINE]`` (the issue's spelling) prints and writes
    what ``validate-bench`` does; without --measured, validate still wants a scenario."""
    monkeypatch.chdir(tmp_path)
    f = str(DATA / "bench" / "sglang-0.5.23-details.jsonl") + ":1"
    assert main(["validate", "--measured", f, "--profile", "h200-1b", "--seeds", "1", "--out", "a"]) == 0
    a = capsys.readouterr().out
    assert main(["validate-bench", f, "--profile", "h200-1b", "--seeds", "1", "--out", "b"]) == 0
    b = capsys.readouterr().out
    assert a.splitlines()[:-1] == b.splitlines()[:-1] and (tmp_path / "a" / "validate.csv").read_text() == (tmp_path / "b" / "validate.csv").read_text()
    assert main(["validate"]) == 2 and "scenario" in capsys.readouterr().err


def test_validate_with_a_scenario_at_another_rate_says_so(tmp_path, capsys, monkeypatch):
    """A --scenario runs as written; when its request rate is not the line's, one note says
    which two rates were compared (a held-out run compared at the scenario's default rate
    looked like a 55 % throughput miss)."""
    monkeypatch.chdir(tmp_path)
    line = str(Path(__file__).parents[1] / "docs/measurements/h200-v8-holdout/seeds/bench_serving/rate48-seed3-rep1.jsonl")
    sc = str(Path(__file__).parents[1] / "scenarios/h200/poisson-nospec.yaml")
    base = ["validate", "--measured", line, "--scenario", sc, "--seeds", "1", "--set", "workload.num_requests=8"]
    assert main([*base, "--out", "a"]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if "req/s" in x and x.startswith("note:")]
    assert notes == ["note: the scenario sends at 16 req/s, the measured run at 48 req/s "
                     "(`specsched scenario from-bench FILE --template S` writes the line's workload)"]
    assert main([*base, "--set", "workload.request_rate=48", "--out", "b"]) == 0
    assert "req/s" not in "".join(x for x in capsys.readouterr().out.splitlines() if x.startswith("note:"))


def test_validate_with_a_scenario_of_other_lengths_says_so(tmp_path, capsys, monkeypatch):
    """A --scenario runs as written; when its prompt or output lengths are not the ones the
    line's random dataset asked for (random_input_len, random_output_len, random_range_ratio),
    one note per side names both (a scenario at 2048-token prompts compared with a 1024-token
    run showed only a +100 % token total and every latency off, with no word why)."""
    monkeypatch.chdir(tmp_path)
    line = {"backend": "sglang", "dataset_name": "random", "request_rate": 8.0, "max_concurrency": None,
            "random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 1.0, "duration": 1.2,
            "completed": 8, "total_input_tokens": 8192, "total_output_tokens": 2048, "request_throughput": 6.7,
            "output_throughput": 1700.0, "median_ttft_ms": 40.0, "median_tpot_ms": 9.0, "median_itl_ms": 8.0,
            "accept_length": None}
    (tmp_path / "runs.jsonl").write_text(json.dumps(line) + "\n")

    def scenario(name: str, inp: str, out: str) -> str:
        (tmp_path / name).write_text(
            f"name: s\nprofile: h200-1b\nworkload:\n  kind: poisson\n  request_rate: 8\n  num_requests: 8\n"
            f"  input_len: {inp}\n  output_len: {out}\n")
        return name

    tokens = []   # the note on the token totals (tests/test_real_files_cli.py), apart

    def notes(sc: str, out: str) -> list[str]:
        assert main(["validate", "--measured", "runs.jsonl:1", "--scenario", sc, "--seeds", "1", "--out", out]) == 0
        said = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note:") and "length" in x]
        tokens[:] = [x for x in said if x.startswith("note: total_")]
        return [x for x in said if x not in tokens]

    same = scenario("same.yaml", "{kind: fixed, value: 1024}", "{kind: uniform, value: 256, range_ratio: 1.0}")
    assert notes(same, "a") == []
    other = scenario("other.yaml", "{kind: uniform, value: 2048, range_ratio: 0.5}", "{kind: fixed, value: 256}")
    assert notes(other, "b") == [
        "note: the scenario's input lengths are 2048 tokens at range ratio 0.5, the measured run's 1024 at range "
        "ratio 1 (bench_serving --random-input-len, --random-range-ratio; `specsched scenario from-bench FILE "
        "--template S` writes the line's workload)"]
    assert len(tokens) == 1 and tokens[0].startswith("note: total_input_tokens +") and "--scenario" in tokens[0]


def test_a_scenario_built_from_a_line_with_failures_gets_no_rate_note(tmp_path, capsys, monkeypatch):
    """A line with failed requests is built to send its successes at the rate x their share
    (from_bench): that is the line's load, so no note says the scenario runs at another rate
    (it named the built rate and the line's, and pointed at from-bench, which built it); a
    --scenario at an unrelated rate still gets the note."""
    monkeypatch.chdir(tmp_path)
    line = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    line["request_rate"] = 2.0   # 2 of its 4 requests failed: built at 1 req/s
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps(line) + "\n")
    assert main(["validate", "--measured", f"{f}:1", "--profile", "h200-1b", "--seeds", "1", "--out", "a"]) == 0
    out = capsys.readouterr().out
    assert "sends the 2 that succeeded, at 1 req/s" in out
    assert not [x for x in out.splitlines() if x.startswith("note:") and "req/s" in x]
    assert main(["validate", "--measured", f"{f}:1", "--profile", "h200-1b", "--seeds", "1", "--out", "b",
                 "--set", "workload.request_rate=5"]) == 0
    assert "note: the scenario sends at 5 req/s, the measured run at 2 req/s" in capsys.readouterr().out


def test_validate_replays_a_lines_own_send_times_as_calibrate_does(tmp_path, capsys, monkeypatch):
    """A line with send times (specsched's own, vllm bench serve --save-detailed) is predicted
    from those arrivals and lengths when the scenario is built from it (``--arrivals auto``,
    calibrate --from's default; analysis.calibrate_bench.replays): every predicted request is
    sent when the measured one was. ``--arrivals rate`` draws new arrivals at the line's rate."""
    import json

    import pandas as pd

    monkeypatch.chdir(tmp_path)
    # measured with arrival draw 2; predicted with seed 1, so drawn arrivals differ from the line's
    line = str(Path(__file__).parents[1] / "docs/measurements/h200-v18-holdout/machine-d/rate24-seed2-rep1.jsonl")
    sent = json.loads(Path(line).read_text().splitlines()[0])["start_times"]
    sent = [t - min(sent) for t in sent]
    for mode, out in (("auto", "a"), ("rate", "b")):
        assert main(["validate", "--measured", line, "--profile", "h200-1b", "--seeds", "1", "--seed", "1",
                     "--arrivals", mode, "--out", out]) == 0
        capsys.readouterr()
        req = pd.read_parquet(tmp_path / out / "predicted-seed1" / "requests.parquet").sort_values("rid")
        starts = (req["start_s"] - req["start_s"].min()).tolist()
        same = len(starts) == len(sent) and all(abs(a - b) < 1e-6 for a, b in zip(sorted(starts), sorted(sent), strict=True))
        assert same == (mode == "auto")


def test_validate_refuses_arrivals_with_a_scenario_and_notes_unreplayed_send_times(tmp_path, capsys, monkeypatch):
    """``--arrivals`` only applies to a scenario built from the line: with ``--scenario`` it was
    silently ignored (``--arrivals details`` then compared against new arrival draws). Now it is
    one line, exit 2, nothing written. A --scenario that draws arrivals while the line holds its
    send times gets a note (README's from-bench + validate --measured flow: +19.6 % throughput
    error on machine E's rate24-seed5 line from the draw alone, +1.8 % with the replay)."""
    monkeypatch.chdir(tmp_path)
    line = str(Path(__file__).parents[1] / "docs/measurements/h200-v22-holdout/machine-e/rate24-seed5-rep1.jsonl")
    assert main(["scenario", "from-bench", line, "--profile", "h200-1b", "--out", "drawn.yaml"]) == 0
    capsys.readouterr()
    for argv in (["validate", "--measured", line, "--scenario", "drawn.yaml", "--arrivals", "details", "--out", "x"],
                 ["validate-bench", line, "--scenario", "drawn.yaml", "--arrivals", "rate", "--out", "x"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--arrivals" in err[0] and "--scenario" in err[0]
        assert not (tmp_path / "x").exists()
    assert main(["validate", "--measured", line, "--scenario", "drawn.yaml", "--seeds", "1", "--out", "a"]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note:") and "send times" in x]
    assert len(notes) == 1 and "--arrivals details" in notes[0]
    assert main(["scenario", "from-bench", line, "--profile", "h200-1b", "--out", "replayed.yaml", "--arrivals", "details"]) == 0
    capsys.readouterr()
    assert main(["validate", "--measured", line, "--scenario", "replayed.yaml", "--seeds", "1", "--out", "b"]) == 0
    assert "send times" not in "".join(x for x in capsys.readouterr().out.splitlines() if x.startswith("note:"))


# ------------------------------------------------------------------ variants of the layouts above

def test_indented_runs_one_after_another_are_runs_by_their_first_line(tmp_path):
    """``jq . runs.json`` (or ``json.dump(result, f, indent=...)`` appended run after run)
    writes each run over many lines, one after another: neither JSONL nor one JSON value.
    It was refused as a truncated line 1 ("{"). Each run is named by the line it starts on."""
    f = DATA / "bench" / "vllm-0.8.5-jq-indented-runs.json"
    a, b = read_bench(f)
    assert (a.source, b.source) == (f"{f}:1", f"{f}:33")
    assert (a.args["request_rate"], b.args["request_rate"]) == (4.0, 16.0)
    assert read_bench_one(f"{f}:33").summary["duration"] == 14.2
    with pytest.raises(ConfigError, match="runs are on lines 1, 33"):
        read_bench(f, 2)
    cut = tmp_path / "cut.json"   # a copy cut short in its second run: the error is where it stops
    cut.write_text(f.read_text()[: f.read_text().index('"duration"', 600) + 5])
    with pytest.raises(ConfigError, match="cut.json:44: <line> = '\"dura'"):
        read_bench(cut)


def test_a_json_list_of_runs_on_one_line(tmp_path):
    f = tmp_path / "runs.json"
    runs = _objs(DATA / "bench" / "vllm-0.8.5-jq-indented-runs.json")
    f.write_text(json.dumps(runs))
    got = read_bench(f)
    assert [r.source for r in got] == [f"{f}:1", f"{f}:2"] and got[1].args["request_rate"] == 16.0


def test_an_indented_run_with_details_is_named_by_its_line(tmp_path):
    """``json.dump(result, f, indent=2)`` of an ``--output-details`` line puts each ``itls``
    list's last gap on a line of its own (``0.0084``: a JSON value by itself). Naming the second
    run read those bare numbers as JSONL lines and refused the file at line 1 (``{``), while
    reading every run found both."""
    src = _objs(DATA / "bench" / "sglang-0.5.23-details.jsonl")[0]
    f = tmp_path / "pretty.json"
    text = json.dumps(src, indent=2) + "\n"
    f.write_text(text + text.replace('"tag": ', '"tag": "second", "x": ', 1))
    second = text.count("\n") + 1
    assert [r.source for r in read_bench(f)] == [f"{f}:1", f"{f}:{second}"]
    run = read_bench_one(f"{f}:{second}")
    assert run.extra["tag"] == "second" and run.summary["completed"] == src["completed"]
    assert read_bench_one(f"{f}:1").extra["tag"] == src["tag"]


def test_percentile_pairs_of_vllms_metrics_dataclass():
    """``dataclasses.asdict`` of vLLM's BenchmarkMetrics keeps ``percentiles_{m}_ms`` as
    [[P, value], ...]: read as ``p{P}_{m}_ms`` (they were kept only as unknown keys, so no
    P90/P99 was compared)."""
    (r,) = read_bench(DATA / "bench" / "vllm-benchmark-metrics-asdict.json")
    assert r.summary["p99_ttft_ms"] == 77.0 and r.summary["p90_itl_ms"] == 13.0
    assert r.summary["p99_e2e_latency_ms"] == 1850.0 and r.extra["p99.9_tpot_ms"] == 14.6
    assert r.summary["median_ttft_ms"] == 38.5 and r.num_prompts == 198
    obj = json.loads((DATA / "bench" / "vllm-benchmark-metrics-asdict.json").read_text())
    obj["percentiles_ttft_ms"] = {"p50": 38.5, "90": 55.1, "99.0": 77.0, "p99.9": 81.2}   # the pairs as a dict
    (d,) = [parse_run(obj, "mem:1")]
    assert d.summary["p99_ttft_ms"] == 77.0 and d.summary["p90_ttft_ms"] == 55.1 and d.extra["p99.9_ttft_ms"] == 81.2
    with pytest.raises(ConfigError, match="percentile keys must be numbers"):
        parse_run(obj | {"percentiles_itl_ms": {"max": 3.0}}, "mem:1")


_GOOD = DATA / "bench" / "sglang-0.5.23-details.jsonl"


@pytest.mark.parametrize("change, message", [
    ({"completed": -5}, "completed = -5: must be >= 0"),
    ({"completed": 2.5}, "completed = 2.5: must be a whole number"),
    ({"duration": 0}, "duration = 0: must be > 0"),
    ({"duration": -1.0}, "duration = -1.0: must be > 0"),
    ({"median_ttft_ms": -3.0}, "median_ttft_ms = -3.0: must be >= 0"),
    ({"ttfts": [-0.1, 0.05, 0.0, 0.0]}, r"ttfts\[0\] = -0.1: a time must be >= 0"),
    ({"ttfts": [[0.04], [0.05], 0.0, 0.0]}, r"ttfts\[0\] = \[0.04\]: entries must be numbers"),   # was a traceback
    ({"itls": [[-0.01], [], [], []]}, r"itls\[0\]\[0\] = -0.01: a time must be >= 0"),
    ({"itls": [["0.01"], [], [], []]}, r"itls\[0\]\[0\] = '0.01': entries must be numbers"),
    # no writer puts a null (a failed request's figures are 0): it was read as a 0-token prompt, a
    # 0 ms TTFT among the measured ones, a request with no ITL
    ({"input_lens": [None, 128, 128, 128]}, r"input_lens\[0\] = None: entries must be numbers"),
    ({"ttfts": [None, 0.05, 0.0, 0.0]}, r"ttfts\[0\] = None: entries must be numbers"),
    ({"itls": [[0.01, None], [], [], []]}, r"itls\[0\]\[1\] = None: entries must be numbers"),
    ({"percentiles_ttft_ms": [99, 40.0]}, "percentiles_ttft_ms = .*: must be a list of \\[percentile"),
    ({"percentiles_ttft_ms": [[150, 40.0]]}, "percentiles_ttft_ms = .*: percentiles must be in \\[0, 100\\]"),   # was p150 kept
    ({"percentiles_ttft_ms": [[1e400, 40.0]]}, "percentiles_ttft_ms = .*: percentiles must be in \\[0, 100\\]"),   # was pinf kept
    ({"start_times": [1e300, 1.0, 2.0, 3.0]}, r"start_times\[0\] = 1e\+300: send times are the client's clock"),   # was a traceback
    ({"ttfts": [1e300, 0.05, 0.0, 0.0]}, r"ttfts\[0\] = 1e\+300: a time must be >= 0 and < 1e\+09"),
])
def test_a_damaged_line_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, change, message):
    """No writer puts a negative or fractional count, a run of no duration, a negative time or
    a list where a number goes: each was compared as measured (or crashed), now one line."""
    import re

    monkeypatch.chdir(tmp_path)
    obj = json.loads(_GOOD.read_text())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(obj | change) + "\n")
    before = set(tmp_path.iterdir())
    assert main(["validate", "--measured", str(bad), "--profile", "h200-1b", "--seeds", "1", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(f"bad.jsonl:1: {message}", err[0]), err
    assert set(tmp_path.iterdir()) == before


def test_per_request_times_in_ms_are_refused(tmp_path):
    """bench_serving's ``ttfts``/``itls`` are in s and the summary's medians in ms, over the
    same requests; a file whose lists were converted to ms read 1000x slow, silently."""
    obj = json.loads(_GOOD.read_text())
    f = tmp_path / "ms.jsonl"
    f.write_text(json.dumps(obj | {"ttfts": [t * 1000 for t in obj["ttfts"]]}) + "\n")
    with pytest.raises(ConfigError, match=r"ttfts \(their median, s\) = .*median_ttft_ms = .*a unit was changed"):
        read_bench(f)
    f.write_text(json.dumps(obj | {"itls": [[x * 1000 for x in i] for i in obj["itls"]]}) + "\n")
    with pytest.raises(ConfigError, match="itls"):
        read_bench(f)
    assert read_bench(_GOOD)[0].details is not None   # the file as written reads
    # SGLang 0.5.23 behind sglang-oai with speculative decoding: the summary's ITLs are each chunk's
    # gap over its tokens, the list keeps the gaps; 16 tokens a chunk still reads
    f.write_text(json.dumps(obj | {"median_itl_ms": obj["median_itl_ms"] / 16}) + "\n")
    assert read_bench(f)[0].details is not None


def _all_failed(tmp_path: Path) -> Path:
    """A 0.4.6.post5-0.5.14 line of a run whose every request failed: ``completed`` 0, NaN
    latency figures (numpy's mean of no requests), the failures in the details."""
    obj = json.loads(_GOOD.read_text())
    n = len(obj["input_lens"])
    obj |= {k: float("nan") for k in obj if k.endswith("_ms")}
    obj |= {"completed": 0, "total_output_tokens": 0, "output_throughput": 0.0, "request_throughput": 0.0,
            "output_lens": [0] * n,
            "ttfts": [0.0] * n, "itls": [[]] * n, "errors": ["Server disconnected"] * n}
    f = tmp_path / "failed.jsonl"
    f.write_text(json.dumps(obj) + "\n")
    return f


@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_a_run_where_every_request_failed_is_refused(tmp_path, capsys, monkeypatch, command):
    """Nothing was measured: validate printed its zeros as n/a beside a prediction, and
    calibrate --from fitted a loss of 0 and wrote the profile as fitted, unchanged."""
    monkeypatch.chdir(tmp_path)
    f = _all_failed(tmp_path)
    argv = {"validate": ["validate", "--measured", str(f), "--profile", "h200-1b", "--seeds", "1", "--out", "out"],
            "calibrate": ["calibrate", "--from", str(f), "--profile", "h200-1b", "--out", "p.yaml"]}[command]
    before = set(tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "failed.jsonl:1: completed = 0: every request of the run failed (4 failed)" in err[0], err
    assert set(tmp_path.iterdir()) == before


def test_calibrate_refuses_runs_without_any_fitted_metric(tmp_path, capsys, monkeypatch):
    """A 0.3.6 line cut to its token totals and e2e latencies has none of the fitted metrics:
    the fit had no residual and wrote the profile unchanged as fitted."""
    monkeypatch.chdir(tmp_path)
    obj = json.loads((DATA / "bench" / "sglang-0.3.6.jsonl").read_text().splitlines()[0])
    f = tmp_path / "e2e-only.jsonl"
    f.write_text(json.dumps({k: v for k, v in obj.items() if "ttft" not in k and "itl" not in k
                             and "throughput" not in k}) + "\n")
    assert main(["calibrate", "--from", str(f), "--profile", "h200-1b", "--out", "p.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--metrics" in err[0] and "median_e2e_latency_ms" in err[0], err
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("row, message", [
    ('{"timestamp": 0, "input_length": true, "output_length": 5}', "t.jsonl:1: input_length = 'true': not a number"),
    ('{"timestamp": 0, "input_length": 9, "output_length": false}', "t.jsonl:1: output_length = 'false': not a number"),
    ('{"timestamp": true, "input_length": 9, "output_length": 5}', "t.jsonl:1: timestamp = 'true': not a number"),
])
def test_a_json_true_or_false_in_a_trace_is_no_number(tmp_path, row, message):
    """A Mooncake-layout row with true where a length or time goes ran as a 1-token prompt
    (or at 1 ms) without a word: pandas reads true as 1."""
    from specsched.sim.trace import load_trace
    from specsched.sim.workload_config import TraceConfig

    f = tmp_path / "t.jsonl"
    f.write_text(row + '\n{"timestamp": 10, "input_length": 7, "output_length": 3}\n')
    with pytest.raises(ConfigError, match=message):
        load_trace(TraceConfig(path=str(f), layout="mooncake"))


def test_files_saved_by_windows_powershell_in_utf16(tmp_path):
    """Windows PowerShell 5's ``>`` writes UTF-16 with a byte-order mark and CRLF
    (``docker logs sglang > server.log``): a result file and a trace were refused as "not a
    text file", a log's lines read as binary. Each reads as its UTF-8 original (gzip too)."""
    import gzip

    from specsched.sim.trace import load_trace
    from specsched.sim.workload_config import TraceConfig

    def utf16(src: Path, gz: bool = False) -> Path:
        data = src.read_text(encoding="utf-8").replace("\n", "\r\n").encode("utf-16")
        dst = tmp_path / (src.name + (".gz" if gz else ""))
        dst.write_bytes(gzip.compress(data) if gz else data)
        return dst

    src = DATA / "bench" / "sglang-0.5.23-details.jsonl"
    for gz in (False, True):
        (a,), (b,) = read_bench(src), read_bench(utf16(src, gz))
        assert a.summary == b.summary and a.args == b.args and b.details.ttfts.tolist() == a.details.ttfts.tolist()
    for name, layout in (("azure-2023-code.csv", "azure"), ("mooncake-conversation.jsonl", "mooncake")):
        a = load_trace(TraceConfig(path=str(DATA / "traces" / name), layout=layout))
        b = load_trace(TraceConfig(path=str(utf16(DATA / "traces" / name)), layout=layout))
        assert a.arrival_s.tolist() == b.arrival_s.tolist() and a.input_len.tolist() == b.input_len.tolist()
    log = LOGS / "sglang-0.5.23.log"
    a, b = parse_server_log(log), parse_server_log(utf16(log))
    assert a.drop(columns="line").equals(b.drop(columns="line")) and a["line"].tolist() == b["line"].tolist()


@pytest.mark.parametrize("far", ["1e13", "1e300"])
def test_a_trace_row_far_from_the_rest_is_refused(tmp_path, capsys, monkeypatch, far):
    """A Mooncake row 1e13 ms after the first (a timestamp in us, or a typo) ran, then the
    peaks asked for 75 GiB (a MemoryError traceback); 1e300 overflowed int64. A trace spans at
    most 1e9 s, as a Poisson workload's num_requests / request_rate does."""
    monkeypatch.chdir(tmp_path)
    t = tmp_path / "t.jsonl"
    t.write_text('{"timestamp": 0, "input_length": 12, "output_length": 5}\n'
                 f'{{"timestamp": {far}, "input_length": 7, "output_length": 3}}\n')
    before = set(tmp_path.iterdir())
    assert main(["run", _trace_yaml(tmp_path, t), "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"t.jsonl:2: timestamp = {far if far == '1e300' else 10**13}" in err[0].replace("1e+300", "1e300")
    assert "at most 1e+09 s" in err[0]
    assert set(tmp_path.iterdir()) == before | {tmp_path / "s.yaml"}


def test_the_peaks_hold_the_occupied_seconds_only():
    """bench_serving's peaks count whole-second buckets; a run whose requests lie 1e8 s apart
    (a sparse trace) held 800 MB per array of buckets. Counted over the occupied seconds, the
    figures are the same and the memory a few KB."""
    import tracemalloc

    import pandas as pd
    from specsched.sim.bench_serving import _peaks

    req = pd.DataFrame({"rid": [0, 1, 2], "start_s": [0.0, 0.2, 1e8], "first_token_s": [0.1, 0.5, 1e8 + 0.1],
                        "finish_s": [1.5, 0.9, 1e8 + 2.2], "output_len": [3, 2, 2]})
    chunks = pd.DataFrame({"rid": [0, 0, 0, 1, 1, 2, 2], "time_s": [0.1, 0.6, 1.5, 0.5, 0.9, 1e8 + 0.1, 1e8 + 2.2],
                           "n_tokens": [1, 1, 1, 1, 1, 1, 1]})
    tracemalloc.start()
    got = _peaks(req, chunks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # second 0: requests 0 and 1 run; tokens at 0.1, 0.6 (rid 0) and 0.5, 0.9 (rid 1): 4
    assert got == {"max_concurrent_requests": 2, "max_output_tokens_per_s": 4.0}
    assert peak < 1 << 20


def test_every_reader_refuses_a_damaged_gzip_file_in_the_same_words(tmp_path):
    """A result file, a trace, an agentic trace and a server log cut short inside their
    gzip stream are refused alike (sim.bench_serving.unreadable); the log reader used to
    say only zlib's own words, without naming a damaged gzip file."""
    import gzip

    from specsched.sim.agentic_trace import load_agentic_trace
    from specsched.sim.config import TraceConfig
    from specsched.sim.trace import load_trace

    said = {}
    readers = {"bench": read_bench, "log": parse_server_log, "agentic": load_agentic_trace,
               "trace": lambda p: load_trace(TraceConfig(path=str(p), layout="mooncake"))}
    for name, read in readers.items():
        p = tmp_path / f"{name}.gz"
        p.write_bytes(gzip.compress(b"x" * 5000 + b"\n" * 5000)[:30])
        with pytest.raises(ConfigError) as err:
            read(p)
        said[name] = str(err.value).rsplit(p.name, 1)[-1]
    assert len(set(said.values())) == 1 and "a damaged or truncated gzip file" in said["log"], said


DATASETS = DATA / "bench" / "sglang-0.5.23-datasets.jsonl"


def test_input_totals_that_count_no_prompt_are_not_read_as_measured():
    """SGLang 0.5.23 writes ``total_input_tokens`` 0 for a multi-turn replay (agentic-trace,
    generated-shared-prefix with turns: ``calculate_metrics(input_requests=None)``) and one
    token a request with ``--gsp-fast-prepare``: those totals, the input throughput and
    ``total_throughput`` are not the prompts sent. Without details they are missing; with
    details they are the successful requests' ``input_lens`` (the server's counts) over the
    duration; either way the written values stay in ``extra``."""
    from specsched.sim.bench_serving import multi_turn_replay

    agentic, turns, fast, moon = read_bench(DATASETS)
    assert not set(INPUT_TOTAL_KEYS) & set(agentic.summary)
    assert {k: agentic.extra[k] for k in INPUT_TOTAL_KEYS} == {"total_input_tokens": 0, "input_throughput": 0.0,
                                                                "total_throughput": 8.0}
    for run in (turns, fast):
        d = run.details
        tin = int(d.input_lens[d.ok].sum())
        assert run.summary["total_input_tokens"] == tin > run.extra["total_input_tokens"]
        assert run.summary["input_throughput"] == pytest.approx(tin / run.summary["duration"])
        assert run.summary["total_throughput"] == pytest.approx((tin + run.summary["total_output_tokens"]) / run.summary["duration"])
    assert [multi_turn_replay(r) for r in (agentic, turns, fast, moon)] == [True, True, False, False]
    # a line whose prompts were counted is read as written
    assert moon.summary["total_input_tokens"] == 2650 and "total_input_tokens" not in moon.extra
    rows = comparison_rows({}, agentic.summary)
    assert rows and not {r["metric"] for r in rows} & set(INPUT_TOTAL_KEYS)


@pytest.mark.parametrize("line, key, needle", [
    (2, "total_input_tokens = 0", "multi-turn replay"),
    (4, "dataset_name = 'mooncake'", "--dataset-path TRACE.jsonl"),
])
def test_from_bench_refuses_replays_it_cannot_rebuild(tmp_path, capsys, monkeypatch, line, key, needle):
    """A generated-shared-prefix multi-turn line (no turn count in it) and a Mooncake replay
    (SGLang 0.5.23 sends it at the trace's timestamps while the line says ``Infinity``) were
    built into independent requests sent at the line's rate (a burst for Mooncake): refused in
    one line naming file:line, key and value; exit 2; nothing written. The Mooncake line's
    refusal names the option that supplies its trace file (``--dataset-path``)."""
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", f"{DATASETS}:{line}", "--profile", "h200-1b", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{DATASETS.name}:{line}: {key}" in err[0] and needle in err[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tag, name", [("h200/llama 8b: c=16", "h200_llama 8b: c=16"), (" ab\\\\cd ", "ab_cd"),
                                       ("..", "t-line1"), ("plain", "plain"),
                                       ("rate 4\nc=16\tfinal", "rate 4_c=16_final"), ("\x1b[1mbold", "_[1mbold"),
                                       ("a\u2028b\x85c\u2029", "a_b_c_"), ("x" * 300, "x" * 120),
                                       ("é" * 100, "é" * 60)])
def test_a_tag_with_a_separator_names_the_scenario_as_one_folder(tmp_path, capsys, monkeypatch, tag, name):
    """bench_serving's ``--tag`` is a free-form label; it names the built scenario (and its
    default file), which must be one folder name: a tag with ``/`` was refused as a bad
    ``name``, a key the line does not have; one with a newline or tab (``--tag "$(cat
    notes)"``) named files and results folders with control characters, printed over two
    lines; Unicode line breaks (U+2028, NEL) passed; a 300-character tag was taken whole and the
    run failed after simulating with "results/xxx...: File name too long". Invariant: the
    scenario is written under a name that is one path component of printable characters, short
    enough to name a results folder, and a changed tag is said."""
    monkeypatch.chdir(tmp_path)
    obj = json.loads((DATA / "bench" / "sglang-0.5.23.jsonl").read_text().splitlines()[0]) | {"tag": tag}
    (tmp_path / "t.jsonl").write_text(json.dumps(obj) + "\n")
    assert main(["scenario", "from-bench", "t.jsonl", "--profile", "h200-1b"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / f"{name}.yaml").is_file()
    assert ("a folder name made from the line's tag" in out) == (name != tag)


def test_retokenized_totals_reported_as_zero_are_not_read_as_measured():
    """SGLang 0.5.23's Rust client (``--rust-client``) with ``--disable-retokenize`` or
    ``--vocab-size`` reports the retokenized totals as 0 (its help text) while tokens were
    generated: compared, the prediction's retokenized total read as an infinite error.
    Missing instead, kept as written in ``extra``; a real 0 (no output) stays."""
    obj = json.loads((DATA / "bench" / "sglang-0.5.23.jsonl").read_text().splitlines()[0])
    run = parse_run(obj | {"total_output_tokens_retokenized": 0}, "t.jsonl:1")
    assert "total_output_tokens_retokenized" not in run.summary and run.extra["total_output_tokens_retokenized"] == 0
    assert run.summary["total_output_tokens"] == obj["total_output_tokens"]
    assert parse_run(obj, "t.jsonl:1").summary["total_output_tokens_retokenized"] == obj["total_output_tokens_retokenized"]
    none_out = parse_run(obj | {"total_output_tokens": 0, "total_output_tokens_retokenized": 0}, "t.jsonl:1")
    assert none_out.summary["total_output_tokens_retokenized"] == 0


def _gsp_line(n: int, details: tuple[int, int] | None = None) -> dict:
    """A 0.5.23 generated-shared-prefix line of ``n`` requests; with ``details`` (prompt,
    output tokens) every request's lists."""
    obj = json.loads((DATA / "bench" / "sglang-0.5.23.jsonl").read_text().splitlines()[0])
    obj |= {"dataset_name": "generated-shared-prefix", "completed": n, "total_input_tokens": n * 2178,
            "total_output_tokens": n * 256}
    if details is not None:
        obj |= {"input_lens": [details[0]] * n, "output_lens": [details[1]] * n, "ttfts": [0.039] * n,
                "itls": [[0.003] * (details[1] - 1)] * n, "generated_texts": [""] * n, "errors": [""] * n}
    return obj


@pytest.mark.parametrize("n, details, shared", [
    (1024, None, True), (1024, (2178, 256), True),
    (1024, (2178, 100), False),   # another --gsp-output-len
    (1024, (4200, 256), False),   # another --gsp-system-prompt-len
    (512, None, False),           # other group counts
])
def test_a_generated_shared_prefix_line_at_sglangs_defaults_shares_its_prefixes(n, details, shared):
    """SGLang's generated-shared-prefix line writes none of its --gsp-* arguments. One that
    matches 0.5.23's defaults (64 groups x 16 prompts = its request count; where it has details,
    256-token outputs and prompts of about 2048 + 128 tokens) is rebuilt as a
    ``shared_prefix`` workload with those defaults, said in the assumptions; any other keeps
    the lengths it gives, without shared prefixes (the prefix cache then finds nothing, as the
    note says)."""
    run = parse_run(_gsp_line(n, details), "g.jsonl:1")
    sc, tables = scenario_from_bench(run, "h200-1b")
    w = sc["workload"]
    assert ("shared_prefix" in w) == shared
    if shared:
        assert w["shared_prefix"]["num_groups"] * w["shared_prefix"]["prompts_per_group"] == w["num_requests"] == n
        assert w["output_len"] == {"kind": "fixed", "value": 256} and "input_len" not in w and not tables
        assert any("SGLang's defaults" in a for a in sc["assumptions"])
    else:
        assert any("share nothing" in a for a in sc["assumptions"])


@pytest.mark.parametrize("pd", [False, True])
def test_accept_length_from_server_info_when_the_backend_wrote_none(pd):
    """SGLang 0.5.23 writes ``accept_length`` null for a backend without "sglang" in its name
    (``--backend vllm`` against an SGLang server) but still writes /server_info; under PD
    disaggregation the accept length is in ``server_info.decode[0]`` (where bench_serving
    itself reads it). Either way the scenario decodes speculatively at that accept length."""
    obj = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text())
    info = obj["server_info"]
    assert info["internal_states"][0]["avg_spec_accept_length"] == 3.41
    if pd:
        info = {"prefill": [{k: v for k, v in info.items() if k != "internal_states"}], "decode": [info]}
    run = parse_run(obj | {"backend": "vllm", "accept_length": None, "server_info": info}, "a.jsonl:1")
    assert "accept_length" not in run.summary
    sc, _ = scenario_from_bench(run, "h200-1b")
    assert sc["server"]["speculative_algorithm"] != "none"
    acc = sc["acceptance"].get("mean_accept_length")
    assert acc == pytest.approx(3.41) or "per_position_rates" in sc["acceptance"]


NO_STREAM = DATA / "bench" / "sglang-0.5.23-disable-stream.jsonl"


@pytest.mark.parametrize("line", [1, 2])
def test_a_run_with_disable_stream_is_not_compared_on_first_tokens(line):
    """SGLang 0.5.23 bench_serving --disable-stream reads each reply whole: its "TTFT" is the
    request's latency, TPOT the microseconds after it, no ITL (0.0 statistics). Read as a
    streamed run, a prediction was compared 99 % off on TTFT and thousands of percent on
    TPOT. The three are kept as written, not read as measured; E2E and throughputs stay."""
    run = read_bench_one(f"{NO_STREAM}:{line}")
    assert not any(k in run.summary for k in ("median_ttft_ms", "mean_tpot_ms", "median_itl_ms", "p99_ttft_ms"))
    assert run.extra["streamed"] is False and run.extra["median_itl_ms"] == 0.0
    assert run.summary["median_e2e_latency_ms"] > 1000 and run.summary["output_throughput"] > 0
    data = to_run_data(run)
    if line == 1:   # the details: each reply's finish is its latency; no first token
        assert len(data.requests) == 4 and data.requests["ttft_s"].isna().all()
        assert data.requests["e2e_s"].to_numpy() == pytest.approx(run.details.ttfts)
    # a streamed line whose ITLs are 0 because every output was one token stays as it was
    obj = json.loads(NO_STREAM.read_text().splitlines()[1]) | {"total_output_tokens": 4}
    assert "median_ttft_ms" in parse_run(obj, "f:1").summary


def test_the_printed_comparison_keeps_its_columns_apart_whatever_the_figures():
    """validate's printed table ran a measured 0.001 into an error of +303824.40 % (one
    token, "0.001+303824.40%"), and a 14-digit figure into the one before it."""
    from specsched.analysis.bench_cli import format_rows

    rows = [{"metric": "mean_tpot_ms", "predicted": 2.03, "measured": 0.000668, "error_pct": 303824.4},
            {"metric": "total_input_tokens", "predicted": 12345678901.5, "measured": 98765432109.25, "error_pct": -87.5}]
    lines = format_rows(rows, "t").splitlines()
    assert len(lines[1].split()) == 4
    assert lines[2].split() == ["mean_tpot_ms", "2.030", "0.001", "+303824.40%"]
    assert lines[3].split() == ["total_input_tokens", "12345678901.500", "98765432109.250", "-87.50%"]


def test_the_printed_comparison_writes_whole_counts_without_decimals():
    """validate printed request and token counts as "completed 500.000 500.000" and
    "total_input_tokens 512000.000 512000.000"; a whole count is written as one now, in the
    printed table and in validate.md, while a mean over seeds of a count (86.667 peak
    requests) and every other figure keep three decimals."""
    from specsched.analysis.bench_cli import format_rows, markdown_rows

    rows = [{"metric": "completed", "predicted": 500.0, "measured": 500, "error_pct": 0.0},
            {"metric": "total_input_tokens", "predicted": 512000.0, "measured": 512000, "error_pct": 0.0},
            {"metric": "max_concurrent_requests", "predicted": 86.6666667, "measured": 35, "error_pct": 147.62},
            {"metric": "median_ttft_ms", "predicted": 32.0, "measured": 41.0, "error_pct": -21.95}]
    lines = format_rows(rows, "t").splitlines()
    assert lines[2].split() == ["completed", "500", "500", "+0.00%"]
    assert lines[3].split() == ["total_input_tokens", "512000", "512000", "+0.00%"]
    assert lines[4].split() == ["max_concurrent_requests", "86.667", "35", "+147.62%"]
    assert lines[5].split() == ["median_ttft_ms", "32.000", "41.000", "-21.95%"]
    assert "| completed | 500 | 500 | +0.00 % |" in markdown_rows(rows, "t")


def test_result_files_joined_without_a_newline_name_the_fix(tmp_path, capsys, monkeypatch):
    """vLLM writes its result with ``json.dump`` and no newline at the end, so ``cat a.json
    b.json > runs.json`` puts both runs on line 1. They were read as two runs "on lines 1, 1"
    that no FILE:LINE could name: ``FILE:1`` answered "the file has 2 runs: name one as
    FILE:LINE (lines 1, 1)" again. Naming such a line (or the file without one) is now one
    line saying how the runs are joined and how to split them; every run is still read
    where all are asked for (``calibrate --from FILE``)."""
    v = (DATA / "bench" / "vllm-0.8.5-benchmark_serving.json").read_text()
    assert not v.endswith("\n")
    f = tmp_path / "runs.json"
    f.write_text(v + v + "\n" + v)
    assert len(read_bench(f)) == 3
    assert read_bench_one(f"{f}:2").args["request_rate"] == 8.0
    for spec in (f"{f}:1", str(f)):
        with pytest.raises(ConfigError) as e:
            read_bench_one(spec)
        msg = str(e.value)
        assert "line 1 holds 2 runs" in msg and "jq -c" in msg, msg
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", f"{f}:1", "--profile", "h200-1b", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 1 holds 2 runs" in err[0] and not (tmp_path / "s.yaml").exists()


def test_a_vllm_server_log_is_named_for_what_it_is(tmp_path):
    """A vLLM server's log (its periodic metrics line: "Avg prompt throughput: ... tokens/s,
    Avg generation throughput: ..., Running: N reqs, ...", V0 vllm/engine/metrics.py
    LoggingStatLogger and V1 vllm/v1/metrics/loggers.py) has no SGLang batch line; it was
    refused as "not an SGLang server log (or logged with --log-level above info)", which sent
    the user to their log level."""
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 05-02 14:10:00 [api_server.py:1090] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
        "INFO 05-02 14:10:05 [loggers.py:118] Engine 000: Avg prompt throughput: 8123.4 tokens/s, Avg generation "
        "throughput: 963.2 tokens/s, Running: 32 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, "
        "Prefix cache hit rate: 0.0%\n")
    with pytest.raises(ConfigError) as e:
        parse_server_log(log)
    msg = str(e.value)
    assert "vLLM" in msg and "vllm.log:1" in msg and "--log-level" not in msg, msg   # its first line a vLLM one


def test_a_folder_given_as_the_server_log_is_named_as_a_folder(tmp_path):
    """--server-log logs/ (the folder the log is in) said "no such server log" of a folder that
    exists; it now says it is a folder and names what is in it."""
    (tmp_path / "server.log").write_text("")
    with pytest.raises(ConfigError, match=r"a folder, not a server log: name the log file in it; it holds server\.log"):
        parse_server_log(tmp_path)


def test_a_vllm_metadata_seed_label_is_kept_not_refused():
    """vLLM's --metadata seed=run-3 puts the string at the top of its result JSON: the whole
    line was refused as 'seed must be an integer or null'. An integer one is still the seed."""
    obj = _objs(DATA / "bench" / "vllm-0.7.3-benchmark_serving.json")[0]
    r = parse_run({**obj, "seed": "run-3"}, "f:1")
    assert "seed" not in r.args and r.extra["seed"] == "run-3"
    assert parse_run({**obj, "seed": "7"}, "f:1").args["seed"] == 7


def test_an_empty_zip_archive_is_named_as_such(tmp_path, capsys):
    """A zip of no file starts ``PK 05 06``, not a file header's ``PK 03 04``: it was read as
    text and refused as "not a complete JSON object" with its raw bytes shown."""
    import zipfile

    f = tmp_path / "runs.zip"
    with zipfile.ZipFile(f, "w"):
        pass
    assert main(["scenario", "from-bench", f"{f}:1", "--profile", "h200-1b", "--out", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an empty zip archive" in err[0] and "JSON" not in err[0], err
    assert not (tmp_path / "s.yaml").exists()


def test_a_server_log_or_a_trace_passed_as_a_result_file_is_named_as_such(tmp_path):
    """A server log or a trace CSV passed where a bench_serving result goes (``validate
    --measured server.log``) was refused as a JSON line cut short ("truncated?"); a bench
    stdout passed as ``--server-log`` as "not an SGLang server log". Each is named for what it
    is, with where it goes."""
    with pytest.raises(ConfigError) as e:
        read_bench(LOGS / "sglang-0.5.23.log")
    assert "server log" in e.value.allowed and "--server-log" in e.value.allowed and "truncated" not in e.value.allowed
    with pytest.raises(ConfigError) as e:
        read_bench(DATA / "traces" / "burstgpt.csv")
    assert "CSV" in e.value.allowed and "trace" in e.value.allowed and "truncated" not in e.value.allowed
    with pytest.raises(ConfigError) as e:   # a Mooncake trace (JSONL): its rows' keys
        read_bench(DATA / "traces" / "mooncake-conversation.jsonl")
    assert "trace" in e.value.allowed and "layout: mooncake" in e.value.allowed
    out = tmp_path / "bench.log"
    out.write_text((DATA / "stdout" / "vllm-0.7.3-stdout.log").read_text())
    with pytest.raises(ConfigError) as e:
        parse_server_log(out)
    assert "printed report" in e.value.allowed and "--from" in e.value.allowed


def test_result_files_each_with_a_byte_order_mark_joined_are_read(tmp_path):
    """``cat a.jsonl b.jsonl`` (or Windows' ``type a b > all``) of files an editor saved with a
    UTF-8 byte-order mark puts the second file's mark at the start of a line: that run was refused
    as a JSON line cut short, and with it the whole file."""
    one = (DATA / "bench" / "sglang-0.5.23.jsonl").read_text().splitlines()[0]
    f = tmp_path / "all.jsonl"
    f.write_bytes(("\ufeff" + one + "\r\n").encode() * 2)
    assert [r.source for r in read_bench(f)] == [f"{f}:1", f"{f}:2"]
    pretty = "\ufeff" + json.dumps(json.loads(one), indent=2) + "\n"   # indented runs so saved, joined
    f.write_text(pretty * 2)
    assert len(read_bench(f)) == 2


@pytest.mark.parametrize("name", ["vllm-0.33.0-bench-serve.json", "sglang-0.5.23-details.jsonl"])
def test_a_measured_folders_line_keeps_its_clients_semantics(tmp_path, name):
    """validate --measured writes the measured run as a results folder whose bench_serving.jsonl
    has backend specsched-...: read back, a vLLM run's per-chunk ITLs were read as per-token
    ones (specsched's own lines split chunks), and its requests counted as specsched counts
    them. The line keeps the client it came from, and reads back with its semantics."""
    from specsched.sim.bench_serving import (
        client_counting,
        details_itl_per_chunk,
        itl_per_chunk,
        read_bench,
        to_run_data,
    )
    from specsched.sim.results import write_results

    src = next(r for r in read_bench(DATA / "bench" / name) if r.details is not None)
    write_results(to_run_data(src), tmp_path / "measured")
    back = read_bench(tmp_path / "measured" / "bench_serving.jsonl")[0]
    assert back.args["backend"].startswith("specsched-")
    assert (itl_per_chunk(back), details_itl_per_chunk(back)) == (itl_per_chunk(src), details_itl_per_chunk(src))
    assert client_counting(back) == client_counting(src)
    assert back.details is not None and src.details is not None
    assert to_run_data(back).summary["itl_per_chunk"] == to_run_data(src).summary["itl_per_chunk"]


def test_a_server_log_is_told_from_every_benchmark_client_file():
    """:func:`is_server_log` (``calibrate --from`` takes a log among its files as the server
    log): every SGLang log layout is one, from 0.2's ``[gpu=0]`` lines to 0.5.23's, and no
    result file, printed report, trace or log without a batch line is."""
    from specsched.analysis.server_log import is_server_log

    logs = sorted((DATA / "logs").glob("sglang-*.log"))
    others = [*BENCH, *sorted((DATA / "stdout").iterdir()), *sorted((DATA / "report").iterdir()),
              *sorted((DATA / "traces").iterdir()), DATA / "logs" / "no-batch-lines.log",
              DATA / "logs" / "vllm-0.10.1.1-server.log", DATA / "logs" / "vllm-0.5.3-server.log"]
    assert logs and all(is_server_log(p) for p in logs)
    assert not [p.name for p in others if is_server_log(p)]
    assert not is_server_log(DATA / "logs") and not is_server_log(DATA / "no-such.log")


def test_a_pipeline_parallel_log_is_read_as_its_first_stages_batches(capsys):
    """SGLang 0.5.23 with --pp-size 2 logs every batch once per stage (``PP0 TP0`` and
    ``PP1 TP0``): they were read as twice the batches, each decode step a sample twice. The
    first stage's lines are read, with one warning that a pipeline's steps are not modelled."""
    log = parse_server_log(LOGS / "sglang-0.5.23-pp2.log")
    assert set(log["rank"]) == {"PP0 TP0"} and len(log) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 pipeline-parallel stages" in err[0] and "pp_size is not modelled" in err[0]
    assert prefill_summary(log)["prefill_batches"] == 2 and len(decode_step_samples(log)) == 2
    assert len(parse_server_log(LOGS / "sglang-0.5.23.log")) == 5 and not capsys.readouterr().err


def test_a_log_kept_as_docker_json_records_is_a_server_log_read_as_the_plain_one(tmp_path):
    """``docker logs`` prints the container's text; the json-file driver's own file
    (``<id>-json.log``, what a copied log often is) wraps each line in a record
    ``{"log": "...\\n", "stream": "stderr", "time": ...}``. Its batch lines read as the plain
    log's; ``calibrate --from`` took the file for a result (its first line a JSON object) and
    refused it as not bench_serving output."""
    from specsched.analysis.server_log import is_server_log

    plain = LOGS / "sglang-0.5.23.log"
    wrapped = tmp_path / "0123abcd-json.log"
    wrapped.write_text("".join(json.dumps({"log": line, "stream": "stderr", "time": f"2026-03-02T08:02:{i:02d}.5Z"}) + "\n"
                               for i, line in enumerate(plain.read_text().splitlines(keepends=True))))
    assert is_server_log(wrapped)
    cols = ["line", "time", "rank", "kind", "running_req", "queue_req", "token", "gen_throughput", "new_token"]
    assert parse_server_log(wrapped)[cols].equals(parse_server_log(plain)[cols])
    # where a result goes (validate --measured), it is named for what it is, at its first batch line
    with pytest.raises(ConfigError, match=r"json.log:4: .*an SGLang server log .*--server-log"):
        read_bench(wrapped)


@pytest.mark.parametrize(("text", "want"), [
    # 0.5.23: ServerArgs.resolved_dict(), a Python dict (entrypoints/engine.py _server_args_for_logging)
    ("{'model_path': 'm', 'tp_size': 2, 'cuda_graph_config': {'decode': {'max_bs': 48}}, 'page_size': 16}",
     {"model_path": "m", "tp_size": 2, "cuda_graph_config": {"decode": {"max_bs": 48}}, "page_size": 16}),
    # earlier releases: the dataclass's repr
    ("ServerArgs(model_path='m, n', tp_size=2, cuda_graph_bs=[1, 2, 4])",
     {"model_path": "m, n", "tp_size": 2, "cuda_graph_bs": [1, 2, 4]}),
    # a value whose repr is no Python: the other pairs kept
    ("{'tp_size': 2, 'algo': <SpeculativeAlgorithm.EAGLE: 'EAGLE'>, 'cfg': {'a': [1, 2]}, 'page_size': 16}",
     {"tp_size": 2, "cfg": {"a": [1, 2]}, "page_size": 16}),
    ("ServerArgs(model_path='m', tp_size=2, page_si", {"model_path": "m", "tp_size": 2}),   # cut short
    ("not python at all", {}),
])
def test_a_server_args_log_line_is_read_in_every_form_it_takes(text, want):
    from specsched.analysis.server_launch import server_args_text

    assert server_args_text(text) == want


def test_vllm_metadata_under_sglangs_dataset_argument_names_is_kept_as_a_label(tmp_path):
    """``vllm bench serve --metadata random_input_len=1024 random_range_ratio=0.5`` puts strings
    at the top of the result JSON (vLLM writes no dataset argument of its own). They were read
    as SGLang's arguments and the whole result refused ("must be a JSON number, not a
    string"). They are kept as written, said once, and the lengths come from the run's figures;
    an SGLang line holding such a string is still refused."""
    obj = json.loads((DATA / "bench" / "vllm-0.8.5-benchmark_serving.json").read_text())
    obj |= {"dataset_name": "random", "random_input_len": "1024", "random_output_len": "128", "random_range_ratio": "0.5"}
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(obj))
    (run,) = read_bench(f)
    assert not {"random_input_len", "random_output_len", "random_range_ratio"} & set(run.args)
    assert run.args["dataset_name"] == "random"
    assert (run.extra["random_input_len"], run.extra["random_range_ratio"]) == ("1024", "0.5")
    assert len(run.notes) == 1 and "vLLM --metadata labels" in run.notes[0]
    sc, _ = scenario_from_bench(run, "h200-1b")
    assert sc["workload"]["input_len"]["kind"] == "fixed"   # the run's means, not SGLang's random rule
    sglang = tmp_path / "sglang.jsonl"
    sglang.write_text(json.dumps(_objs(DATA / "bench" / "sglang-0.5.23.jsonl")[0] | {"random_input_len": "1024"}) + "\n")
    with pytest.raises(ConfigError, match="random_input_len = '1024': must be a JSON number"):
        read_bench(sglang)
