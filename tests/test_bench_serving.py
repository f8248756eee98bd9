"""bench_serving result files: tolerant reading (SGLang JSONL old and new, vLLM JSON), the
bench_serving.jsonl every run writes, the round trips, and bad input (exit 2, one line,
nothing written)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.bench_serving import (
    _WHOLE,
    METRIC_KEYS,
    RESULT_KEYS,
    bench_record,
    parse_run,
    read_bench,
    read_bench_one,
    to_run_data,
)
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.results import write_results

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SGLANG_0523 = {
    "tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": 4.0, "max_concurrency": 16,
    "sharegpt_output_len": None, "random_input_len": 1000, "random_output_len": 200, "random_range_ratio": 0.5,
    "server_info": {"max_running_requests": 48, "chunked_prefill_size": 4096, "speculative_algorithm": None,
                    "max_total_num_tokens": 300000, "disable_overlap_schedule": False, "model_path": "x"},
    "duration": 30.5, "completed": 3, "total_input_tokens": 2400, "total_input_text_tokens": 2400,
    "total_output_tokens": 450, "total_output_tokens_retokenized": 449, "request_throughput": 0.098,
    "input_throughput": 78.7, "output_throughput": 14.75, "total_throughput": 93.4,
    "mean_ttft_ms": 40.0, "median_ttft_ms": 38.0, "std_ttft_ms": 5.0, "p90_ttft_ms": 45.0, "p95_ttft_ms": 46.0,
    "p99_ttft_ms": 47.0, "mean_tpot_ms": 10.0, "median_tpot_ms": 10.0, "std_tpot_ms": 1.0, "p90_tpot_ms": 11.0,
    "p95_tpot_ms": 11.5, "p99_tpot_ms": 12.0, "mean_itl_ms": 10.0, "median_itl_ms": 9.5, "std_itl_ms": 2.0,
    "p90_itl_ms": 12.0, "p95_itl_ms": 13.0, "p99_itl_ms": 20.0, "concurrency": 1.5, "accept_length": None,
    "max_output_tokens_per_s": 80.0, "max_concurrent_requests": 3, "a_future_key": {"x": 1},
    "input_lens": [800, 900, 700], "output_lens": [150, 100, 200], "ttfts": [0.04, 0.038, 0.042],
    "itls": [[0.01] * 149, [0.009] * 99, [0.011] * 199], "generated_texts": ["", "", ""], "errors": ["", "", ""],
}
SGLANG_03 = {  # 0.3.x: a subset, p99 only, no details
    "backend": "sglang", "dataset_name": "sharegpt", "request_rate": float("inf"), "max_concurrency": None,
    "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 0.0,
    "duration": 12.0, "completed": 100, "total_input_tokens": None, "mean_ttft_ms": 900.0, "median_ttft_ms": 800.0,
}
VLLM = {
    "date": "20250101-000000", "backend": "vllm", "model_id": "m", "tokenizer_id": "m", "num_prompts": 3,
    "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2, "duration": 5.0, "completed": 3,
    "total_input_tokens": 30, "total_output_tokens": 12, "request_throughput": 0.6, "request_goodput:": None,
    "output_throughput": 2.4, "total_token_throughput": 8.4, "mean_ttft_ms": 20.0, "median_ttft_ms": 19.0,
    "std_ttft_ms": 1.0, "p99_ttft_ms": 25.0, "mean_e2el_ms": 300.0, "median_e2el_ms": 290.0, "p99_e2el_ms": 400.0,
    "input_lens": [10, 10, 10], "output_lens": [4, 4, 0], "ttfts": [0.02, 0.019, 0.0],
    "itls": [[0.1, 0.1, 0.1], [0.1, 0.1, 0.1], []], "generated_texts": ["a", "b", ""], "errors": ["", "", "timeout"],
}


def _jsonl(tmp_path, *objs, name="runs.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return p


def test_reads_sglang_old_and_new_lines_tolerantly(tmp_path):
    p = _jsonl(tmp_path, SGLANG_03, SGLANG_0523)
    old, new = read_bench(p)
    assert old.args["request_rate"] == math.inf and old.args["dataset_name"] == "sharegpt"
    assert "total_input_tokens" not in old.summary and old.details is None      # null = missing
    assert old.num_prompts == 100                                                 # completed: no num_prompts
    assert new.summary["p95_itl_ms"] == 13.0 and "accept_length" not in new.summary
    assert new.extra["a_future_key"] == {"x": 1} and new.extra["server_info"]["max_running_requests"] == 48
    assert new.num_prompts == 3 and new.details.itls[2].shape == (199,)
    assert read_bench(p, 2)[0].source.endswith(":2")


def test_reads_vllm_json_with_its_names(tmp_path):
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(VLLM, indent=2))
    (run,) = read_bench(p)
    assert run.summary["total_throughput"] == 8.4 and run.summary["median_e2e_latency_ms"] == 290.0
    assert run.args["request_rate"] == math.inf and run.args["num_prompts"] == 3 and run.args["burstiness"] == 1.0
    data = to_run_data(run)
    assert len(data.requests) == 2 and data.summary["failed"] == 1               # the failed request is left out
    assert np.allclose(data.requests["ttft_s"], [0.02, 0.019])
    assert np.allclose(data.requests["finish_s"], [0.32, 0.319])


def test_details_become_requests_and_per_token_chunks(tmp_path):
    run = read_bench_one(_jsonl(tmp_path, SGLANG_0523))
    data = to_run_data(run)
    assert data.requests["output_len"].tolist() == [150, 100, 200]
    assert len(data.chunks) == 150 + 100 + 200                                   # TTFT chunk + one per ITL
    from specsched.sim.metrics import itl_values

    assert np.allclose(np.sort(itl_values(data.chunks)), np.sort(np.concatenate(run.details.itls)))


@pytest.mark.parametrize("content, key", [
    (json.dumps(SGLANG_0523)[:200] + "\n", "<line>"),                             # truncated line
    ('{"model": "x", "prompt": "hi"}\n', "<keys>"),                              # not bench_serving output
    ("just text\n", "<line>"),
    (json.dumps({**SGLANG_03, "completed": "many"}) + "\n", "completed"),         # wrong type
    (json.dumps({**SGLANG_03, "completed": "120"}) + "\n", "completed"),          # a number as a string
    (json.dumps({**SGLANG_03, "median_ttft_ms": " 12.5"}) + "\n", "median_ttft_ms"),
    (json.dumps({**SGLANG_03, "max_concurrency": "16"}) + "\n", "max_concurrency"),
    (json.dumps({**SGLANG_0523, "ttfts": [0.1]}) + "\n", "ttfts"),               # details of other length
])
def test_bad_files_fail_with_one_line_and_write_nothing(tmp_path, capsys, monkeypatch, content, key):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(SGLANG_03) + "\n" + content)
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.key == key and str(p) + ":2" in e.value.file
    for argv in (["validate-bench", f"{p}:2", "--scenario", "x.yaml"],
                 ["scenario", "from-bench", f"{p}:2", "--profile", "h200-1b", "--out", "s.yaml"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "bad.jsonl:2" in err[0] and "Traceback" not in err[0]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.jsonl"]


BIG = "1" + "0" * 400   # an integer past a float's range (and 4,300 digits: past Python's int parsing)


@pytest.mark.parametrize("text, key", [
    (json.dumps(SGLANG_0523).replace('"max_concurrency": 16', f'"max_concurrency": {BIG}'), "max_concurrency"),
    (json.dumps(SGLANG_0523).replace('"ttfts": [0.04', f'"ttfts": [{BIG}'), "ttfts[0]"),
    (json.dumps(SGLANG_0523).replace('"input_lens": [800', f'"input_lens": [{BIG}'), "input_lens[0]"),
    (json.dumps(SGLANG_0523).replace('"max_concurrency": 16', '"max_concurrency": 1' + "0" * 5000), "max_concurrency"),
    ("[" * 100_000 + "]" * 100_000, "<line>"),
])
def test_a_number_past_a_float_or_nesting_past_the_stack_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch,
                                                                                     text, key):
    """No writer puts them there, but a damaged file did: an integer of hundreds of digits
    raised OverflowError at its first float() (4,300 digits: ValueError in the JSON reader),
    and deeply nested brackets RecursionError, each a traceback."""
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "bad.jsonl"
    p.write_text(text + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.key == key and e.value.file.endswith("bad.jsonl:1")
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.jsonl:1" in err[0] and key in err[0]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.jsonl"]


def test_several_runs_need_a_line(tmp_path):
    p = _jsonl(tmp_path, SGLANG_03, SGLANG_0523)
    with pytest.raises(ConfigError, match="FILE:LINE"):
        read_bench_one(p)
    with pytest.raises(ConfigError, match="lines 1, 2"):
        read_bench(p, 5)


def _sim_run(workload, seed=3):
    sc = make_scenario(workload=workload, server={"speculative_algorithm": "none", "speculative_num_draft_tokens": 1})
    return SimEngine(sc, tiny_profile(), seed=seed).run()


@pytest.mark.parametrize("workload", [
    {"kind": "poisson", "num_requests": 24, "request_rate": 50.0, "max_concurrency": 6,
     "input_len": {"kind": "uniform", "value": 400, "range_ratio": 0.5}, "output_len": {"kind": "uniform", "value": 30, "range_ratio": 0.5}},
    {"kind": "closed_loop", "num_requests": 12, "concurrency": 4},
    {"kind": "burst", "num_requests": 9},
])
def test_round_trip_simulated_run_reads_back_to_the_same_summary(tmp_path, workload):
    res = _sim_run(workload)
    out = write_results(res, tmp_path / "run")
    (back,) = read_bench(out / "bench_serving.jsonl")
    shared = [k for k in METRIC_KEYS if k in res.summary and res.summary[k] == res.summary[k]]
    assert len(shared) >= 30
    for k in shared:
        assert back.summary[k] == pytest.approx(res.summary[k], rel=1e-12), k
    assert back.num_prompts == workload["num_requests"]
    # the per-request details read back into the same TTFTs
    data = to_run_data(back)
    assert np.allclose(np.sort(data.requests["ttft_s"]), np.sort(res.requests["ttft_s"]))
    # and the send times (vLLM's start_times key), relative to the first send; a burst has none to say
    starts = np.sort(res.requests["start_s"].to_numpy())
    if (starts > 0).any():
        assert np.allclose(np.sort(data.requests["start_s"]), starts - starts.min())
    else:
        assert back.details.start_s is None


def test_a_file_without_send_times_is_not_given_any():
    """An SGLang line (no send times: each request's clock starts at its own send) written
    back holds no start_times: the zeros to_run_data puts there are not send times."""
    from pathlib import Path

    (run,) = read_bench(Path(__file__).parent / "data" / "bench" / "sglang-0.5.23-details.jsonl")
    assert run.details.start_s is None
    rec = bench_record(to_run_data(run))
    assert "ttfts" in rec and "start_times" not in rec


_num = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(METRIC_KEYS), _num, min_size=1), st.sampled_from([1.5, math.inf, "trace"]))
def test_invariant_any_metric_subset_reads_back_unchanged(metrics, rate):
    """Invariant: parse(json(line)) keeps every metric and the rate exactly (any subset)."""
    # request and token counts are whole numbers in every writer (a fraction is refused)
    metrics = {k: float(math.ceil(v)) if k in _WHOLE else v for k, v in metrics.items()}
    line = json.loads(json.dumps({"completed": 1, **metrics, "request_rate": rate}))
    run = parse_run(line, "mem:1")
    for k, v in metrics.items():
        assert run.summary[k] == v
    assert run.args["request_rate"] == rate


def test_bench_record_has_bench_serving_units(tmp_path):
    res = _sim_run({"kind": "closed_loop", "num_requests": 6, "concurrency": 2})
    rec = bench_record(res)
    assert rec["request_rate"] == math.inf and rec["max_concurrency"] == 2 and rec["dataset_name"] == "random"
    assert rec["random_range_ratio"] == 1.0 and rec["random_input_len"] == 500
    assert rec["mean_ttft_ms"] == pytest.approx(res.requests["ttft_s"].mean() * 1000)
    assert len(rec["itls"]) == 6 and all(len(x) == 39 for x in rec["itls"])
    assert rec["ttfts"][0] == pytest.approx(float(res.requests.sort_values("rid")["ttft_s"].iloc[0]))
    assert rec["accept_length"] is None                                          # no spec: null, as SGLang writes
    assert 1 <= rec["max_concurrent_requests"] <= 6 and rec["max_output_tokens_per_s"] > 0
    # SGLang 0.5.23's keys first, in its order, each present (a dashboard indexing one found it
    # missing: sharegpt_output_len, total_input_text/vision_tokens), then specsched's own
    assert list(rec)[:len(RESULT_KEYS)] == list(RESULT_KEYS)
    assert rec["sharegpt_output_len"] is None and rec["total_input_vision_tokens"] == 0
    assert rec["total_input_text_tokens"] == rec["total_input_tokens"] == res.summary["total_input_tokens"]
    assert list(rec).index("ttfts") > list(rec).index("num_prompts") > len(RESULT_KEYS) - 1


def test_a_burst_has_its_peaks_though_every_request_starts_at_zero():
    # bench_serving 0.5.23 calculate_metrics: every request of a burst runs in second 0
    res = _sim_run({"kind": "burst", "num_requests": 9})
    assert (res.requests["start_s"] == 0).all()
    rec = bench_record(res, details=False)
    assert rec["max_concurrent_requests"] == 9 and rec["max_output_tokens_per_s"] > 0
    assert rec["p95_ttft_ms"] == res.summary["p95_ttft_ms"]   # the summary has every P95 now


def test_a_runs_peaks_are_counted_once_for_the_table_and_the_file(monkeypatch):
    # `specsched run` prints the table (a record without details) and writes bench_serving.jsonl
    # (another record): the peaks walk every token, ~50 ms on the 256 burst, so the run keeps them
    import specsched.sim.bench_serving as bs

    res = _sim_run({"kind": "burst", "num_requests": 9})
    calls = []
    real = bs._peaks
    monkeypatch.setattr(bs, "_peaks", lambda *a: calls.append(1) or real(*a))
    first, again = bench_record(res, details=False), bench_record(res)
    assert len(calls) == 1
    assert first["max_output_tokens_per_s"] == again["max_output_tokens_per_s"] > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n_req=st.integers(1, 12))
def test_peaks_are_bench_serving_0523s(seed, n_req):
    """_peaks against bench_serving 0.5.23's definition written out as a loop
    (sglang/benchmark/serving.py ``calculate_metrics``, with the ITLs of
    ``async_request_sglang_generate``: a chunk of n tokens after dt adds n latencies dt / n)."""
    import pandas as pd
    from specsched.sim.bench_serving import _peaks

    rng = np.random.default_rng(seed)
    reqs, rows = [], []
    for rid in range(n_req):
        start = float(rng.uniform(0, 3))
        t = start + float(rng.uniform(0.05, 1.5))
        times, sizes = [t], [1]
        for _ in range(int(rng.integers(0, 30))):
            t += float(rng.uniform(0.01, 0.6))
            times.append(t)
            sizes.append(int(rng.integers(1, 5)))
        rows += [(rid, x, k) for x, k in zip(times, sizes, strict=True)]
        reqs.append((rid, start, times[0], times[-1], sum(sizes)))
    requests = pd.DataFrame(reqs, columns=["rid", "start_s", "first_token_s", "finish_s", "output_len"])
    chunks = pd.DataFrame(sorted(rows, key=lambda r: r[1]), columns=["rid", "time_s", "n_tokens"])
    t0 = min(r[1] for r in reqs)
    n = int(np.ceil(max(r[3] for r in reqs) - t0)) + 1
    tokens, running = np.zeros(n), np.zeros(n)
    for rid, start, first, finish, _ in reqs:
        mine = [(x, k) for r, x, k in rows if r == rid]
        itl = [a for (x0, _), (x1, k) in zip(mine[:-1], mine[1:], strict=True) for a in [(x1 - x0) / k] * k]
        cur = start + (first - start)
        times = [cur]
        for a in itl:
            cur += a
            times.append(cur)
        for x in times:
            if 0 <= int(x - t0) < n:
                tokens[int(x - t0)] += 1
        for sec in range(int(start - t0), min(int(finish - t0) + 1, n)):
            running[sec] += 1
    assert _peaks(requests, chunks) == {"max_output_tokens_per_s": float(tokens.max()),
                                        "max_concurrent_requests": int(running.max())}
    assert _peaks(requests, chunks.iloc[:0]) == {"max_concurrent_requests": int(running.max())}


def test_peaks_of_runs_far_apart_are_the_larger_of_each_alone():
    """Two requests a billion seconds apart (a trace spanning decades): the peaks are counted
    over the occupied seconds only (no array of one slot a second), and equal the larger of
    each request's own peaks."""
    import pandas as pd
    from specsched.sim.bench_serving import _peaks

    def one(rid, start, sizes):
        times = start + 0.2 + np.cumsum([0.0] + [0.05] * (len(sizes) - 1))
        req = (rid, start, times[0], times[-1], sum(sizes))
        return req, [(rid, float(x), k) for x, k in zip(times, sizes, strict=True)]

    a, ra = one(0, 0.0, [1] + [3] * 40)
    b, rb = one(1, 1e9, [1] + [2] * 60)
    cols_r, cols_c = ["rid", "start_s", "first_token_s", "finish_s", "output_len"], ["rid", "time_s", "n_tokens"]
    alone = [_peaks(pd.DataFrame([r], columns=cols_r), pd.DataFrame(c, columns=cols_c)) for r, c in ((a, ra), (b, rb))]
    both = _peaks(pd.DataFrame([a, b], columns=cols_r), pd.DataFrame(ra + rb, columns=cols_c))
    assert both == {"max_output_tokens_per_s": max(x["max_output_tokens_per_s"] for x in alone),
                    "max_concurrent_requests": 1}
    assert alone[0]["max_output_tokens_per_s"] != alone[1]["max_output_tokens_per_s"]


def test_a_cut_json_line_keeps_the_position(tmp_path):
    p = tmp_path / "cut.jsonl"
    p.write_text(json.dumps(SGLANG_03) + "\n" + '{"completed": 3, "model_id": "x\n')
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file.endswith("cut.jsonl:2") and "column 30" in str(e.value)
    assert "starting at;" not in str(e.value)


@pytest.mark.parametrize("after", ["whole run", "nothing"])
def test_a_first_line_cut_short_is_named_not_the_line_after_it(tmp_path, capsys, monkeypatch, after):
    """A file whose first line is a run cut short, then a line end (and a whole run, or nothing):
    the refusal named line 2, the whole run or "<end of file>", as the line not complete JSON.
    It names line 1, where the run is cut."""
    monkeypatch.chdir(tmp_path)
    line = json.dumps(SGLANG_03)
    cut = line[:line.index(', "', len(line) // 2)]   # after a whole value: JSON then expects "," on line 2
    (tmp_path / "cut.jsonl").write_text(cut + "\n" + (line + "\n" if after == "whole run" else ""))
    with pytest.raises(ConfigError) as e:
        read_bench(tmp_path / "cut.jsonl")
    assert e.value.file.endswith("cut.jsonl:1") and e.value.value == clipped(cut)
    assert main(["scenario", "from-bench", "cut.jsonl", "--profile", "h200-llama8b-roofline", "--out", "s.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cut.jsonl:1: <line>" in err[0] and "truncated?" in err[0], err
    assert not (tmp_path / "s.yaml").exists()


@pytest.mark.parametrize("what", ["results/nothing", "results/nothing.jsonl", "results/nothing.jsonl:3"])
def test_plot_of_a_missing_path_says_what_it_looked_for(tmp_path, capsys, monkeypatch, what):
    monkeypatch.chdir(tmp_path)
    assert main(["plot", what]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0]
    assert "results directory" in err[0] and "bench_serving result file" in err[0]
    assert not any(tmp_path.iterdir())


def test_details_without_itls_or_latencies_leave_tpot_and_e2e_unknown(tmp_path):
    # a line with per-request lengths and TTFTs but no itls and no latencies (a slimmed
    # --output-details line) does not say when a request finished: its TPOT and E2E are
    # unknown, not 0 ms (a TPOT CDF of the measured run at 0 in `specsched plot`)
    line = {k: v for k, v in SGLANG_0523.items() if k != "itls"}
    data = to_run_data(read_bench_one(_jsonl(tmp_path, line)))
    assert len(data.requests) == 3
    assert np.allclose(data.requests["ttft_s"], [0.04, 0.038, 0.042])
    assert data.requests["tpot_s"].isna().all() and data.requests["e2e_s"].isna().all()
    assert len(data.chunks) == 3                                                  # the first tokens only


def test_a_folder_given_as_a_result_file_says_it_is_a_folder(tmp_path, capsys, monkeypatch):
    # `calibrate --from DIR` said "no such file" of a folder that exists
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    _jsonl(tmp_path / "runs", SGLANG_0523)
    with pytest.raises(ConfigError) as e:
        read_bench(tmp_path / "runs")
    assert "no such file" not in e.value.allowed and "folder" in e.value.allowed and "runs.jsonl" in e.value.allowed
    assert main(["calibrate", "--from", "runs", "--profile", "h200-1b", "--out", "f.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "folder" in err[0] and not (tmp_path / "f.yaml").exists()


@pytest.mark.parametrize("spec", ["runs.jsonl", "runs.jsonl:1"])
def test_plot_of_one_bench_serving_file_writes_under_plots_not_beside_the_file(tmp_path, capsys, monkeypatch, spec):
    # one input was taken as a results directory: `plot runs.jsonl` failed with "Not a
    # directory", `plot runs.jsonl:1` made a folder named "runs.jsonl:1" beside the file
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    _jsonl(tmp_path / "m", SGLANG_0523)
    assert main(["plot", f"m/{spec}"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["runs.jsonl"]
    written = sorted(p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("ttft.png"))
    assert written == ["plots"]


def test_plot_draws_the_percentiles_of_a_file_without_details_as_crosses(tmp_path, capsys, monkeypatch):
    """A bench_serving line without per-request details (SGLang's default: no
    --output-details) has no distribution: ``plot`` drew empty curves for it, then left it
    out of the TTFT/TPOT/ITL figures, so ``plot RESULTS runs.jsonl:3`` showed the prediction
    alone. Its stated median, p90, p95 and p99 are now crosses beside the other inputs'
    distributions, said in one line. Alone (nothing else to draw) the line's crosses are the
    figure (it was "nothing to draw", exit 2); a line stating no TTFT/TPOT/ITL percentile
    still is."""
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_run_or_bench

    monkeypatch.chdir(tmp_path)
    _jsonl(tmp_path, SGLANG_0523, name="full.jsonl")
    _jsonl(tmp_path, SGLANG_03, name="bare.jsonl")
    assert main(["plot", "full.jsonl", "bare.jsonl", "--out", "p"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "bare.jsonl" in x]
    assert len(err) == 1 and "no per-request details" in err[0] and "crosses" in err[0]
    assert (tmp_path / "p" / "ttft.png").exists() and (tmp_path / "p" / "tpot_itl.png").exists()
    bare = load_run_or_bench("bare.jsonl")
    want = {q: bare.summary[f"{k}_ttft_ms"] for q, k in ((50, "median"), (90, "p90"), (95, "p95"), (99, "p99"))
            if isinstance(bare.summary.get(f"{k}_ttft_ms"), float)}
    assert want
    fig = plots.plot_ttft([load_run_or_bench("full.jsonl")], marks=[bare])
    crosses = [ln for ln in fig.axes[0].lines if ln.get_marker() == "X"]
    assert len(crosses) == 1
    unit = 1.0 if fig.axes[0].get_xlabel().startswith("TTFT (ms") else 1e-3
    assert list(crosses[0].get_xdata()) == pytest.approx([want[q] * unit for q in sorted(want)])
    assert list(crosses[0].get_ydata()) == pytest.approx([q / 100 for q in sorted(want)])
    plots.plt.close(fig)
    assert main(["plot", "bare.jsonl", "--out", "q"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "bare.jsonl" in x]
    assert len(err) == 1 and "crosses" in err[0] and "beside" not in err[0], err
    # 0.3.x states a median TTFT only: a TTFT figure of its cross, no TPOT/ITL figure
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["ttft.png", "ttft.svg"]
    fig = plots.plot_ttft([], marks=[bare])
    crosses = [ln for ln in fig.axes[0].lines if ln.get_marker() == "X"]
    assert len(crosses) == 1 and list(crosses[0].get_ydata()) == [0.5] and not fig.axes[1].patches
    plots.plt.close(fig)
    _jsonl(tmp_path, {k: v for k, v in SGLANG_03.items() if not k.endswith("_ms")}, name="none.jsonl")
    assert main(["plot", "none.jsonl", "--out", "r"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "nothing to draw" in err[-1] and not (tmp_path / "r").exists()


def test_plot_of_a_line_without_details_draws_its_ttft_tpot_and_itl_percentiles_alone(tmp_path, capsys, monkeypatch):
    """SGLang 0.5.23's line without --output-details states median/p90/p95/p99 of TTFT, TPOT
    and ITL: ``plot F:L`` of it alone said "nothing to draw"; both figures now hold its
    crosses, one per latency panel."""
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_run_or_bench

    monkeypatch.chdir(tmp_path)
    f = Path(__file__).parent / "data" / "bench" / "sglang-0.5.23.jsonl"
    assert main(["plot", f"{f}:1", "--out", "p"]) == 0
    capsys.readouterr()
    assert {p.name for p in (tmp_path / "p").iterdir()} >= {"ttft.png", "tpot_itl.png"}
    run = load_run_or_bench(f"{f}:1")
    assert run.requests.empty
    fig = plots.plot_tpot_itl([], marks=[run])
    for ax, metric in ((fig.axes[0], "tpot"), (fig.axes[2], "itl")):
        (x,) = [ln for ln in ax.lines if ln.get_marker() == "X"]
        assert list(x.get_xdata()) == pytest.approx([run.summary[f"{k}_{metric}_ms"]
                                                     for k in ("median", "p90", "p95", "p99")])
    plots.plt.close(fig)


def test_a_line_with_an_itl_but_no_tpot_figure_says_so_on_the_empty_panel(tmp_path, capsys, monkeypatch):
    """SGLang 0.4.0's line states a median ITL and no TPOT: the TPOT panels had nothing to
    draw, and their empty legend printed a matplotlib UserWarning (with a source line) on
    stderr. The empty panels now say there is no TPOT figure; nothing else is printed."""
    import warnings

    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_run_or_bench

    monkeypatch.chdir(tmp_path)
    f = Path(__file__).parent / "data" / "bench" / "sglang-0.4.0.jsonl"
    run = load_run_or_bench(str(f))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.plot_tpot_itl([], marks=[run])
    texts = [t.get_text() for ax in fig.axes[:2] for t in ax.texts]
    assert texts == ["no TPOT figure in the inputs"] * 2
    assert [ln.get_marker() for ln in fig.axes[2].lines if ln.get_marker() == "X"] == ["X"]
    plots.plt.close(fig)
    assert main(["plot", str(f), "--out", "p"]) == 0
    assert "Warning" not in capsys.readouterr().err


def test_a_stream_ended_before_its_first_token_is_a_request_row_without_a_token(tmp_path):
    # sglang 0.5.23's client (benchmark/serving.py async_request_sglang_generate) records a
    # stream the server ends before any text as a success with TTFT 0.0 and the asked
    # output length; calculate_metrics counts its 0.0 in the TTFT statistics, so the
    # requests table (the CDFs `specsched plot` overlays) keeps it, with no token row
    line = dict(SGLANG_0523, ttfts=[0.04, 0.0, 0.042], itls=[[0.01] * 149, [], [0.011] * 199])
    data = to_run_data(read_bench_one(_jsonl(tmp_path, line)))
    assert len(data.requests) == 3
    assert np.allclose(sorted(data.requests["ttft_s"]), [0.0, 0.04, 0.042])
    assert set(data.chunks["rid"]) == {0, 2}
    assert len(data.chunks) == 150 + 200


def test_validate_bench_of_two_runs_own_lines_writes_two_folders(tmp_path, monkeypatch):
    """Every results directory's line is named bench_serving.jsonl, so `validate-bench
    results/a/base-seed1/bench_serving.jsonl` and then `.../b/base-seed1/bench_serving.jsonl`
    both wrote results/validate-bench/bench_serving-line1: the second replaced the first's
    table and runs without a word. A results directory's line is named by its run's folder."""
    import yaml

    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({
            "name": name, "profile": "h200-1b",
            "workload": {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": 200},
                         "output_len": {"kind": "fixed", "value": 8}}}))
        assert main(["run", f"{name}.yaml", "-q"]) == 0
    for name in ("a", "b"):
        assert main(["validate-bench", f"results/{name}/base-seed1/bench_serving.jsonl", "--profile", "h200-1b",
                     "--seeds", "1"]) == 0
    made = sorted(p.name for p in (tmp_path / "results" / "validate-bench").iterdir())
    assert made == ["a-base-seed1-line1", "b-base-seed1-line1"], made


def test_validate_bench_out_holding_validates_appended_table_is_refused(tmp_path, monkeypatch, capsys):
    """`specsched validate CELL --device cpu --out vout` appends its rows to vout/validate.csv
    (cell, arm, metric, ...); `validate-bench FILE --out vout` then wrote its own table over it
    without a word, the rows of every earlier device validation lost. It is refused before the
    runs, as validate refuses another table's header."""
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({
        "name": "a", "profile": "h200-1b",
        "workload": {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": 200},
                     "output_len": {"kind": "fixed", "value": 8}}}))
    assert main(["run", "a.yaml", "-q"]) == 0
    (tmp_path / "vout").mkdir()
    table = "cell,arm,metric,predicted,measured,error_pct,seed,overrides\nh200-batch8,base,mean_ttft_ms,1,2,-50,1,\n"
    (tmp_path / "vout" / "validate.csv").write_text(table)
    capsys.readouterr()
    assert main(["validate-bench", "results/a/base-seed1/bench_serving.jsonl", "--profile", "h200-1b", "--seeds", "1",
                 "--out", "vout"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "validate.csv" in err[0], err
    assert (tmp_path / "vout" / "validate.csv").read_text() == table
    assert sorted(p.name for p in (tmp_path / "vout").iterdir()) == ["validate.csv"]
    # its own table is replaced as before: the same comparison run again
    assert main(["validate-bench", "results/a/base-seed1/bench_serving.jsonl", "--profile", "h200-1b", "--seeds", "1",
                 "--out", "own"]) == 0
    assert main(["validate-bench", "results/a/base-seed1/bench_serving.jsonl", "--profile", "h200-1b", "--seeds", "1",
                 "--out", "own"]) == 0


def _details_line(tmp_path, **change):
    from tests.conftest import ROOT

    obj = json.loads((ROOT / "tests/data/bench/sglang-0.5.23-details.jsonl").read_text())
    for k, v in change.items():
        if v is None:
            obj.pop(k)
        else:
            obj[k] = v
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(obj) + "\n")
    return p


@pytest.mark.parametrize("key", ["input_lens", "ttfts", "output_lens"])
def test_per_request_lists_without_a_needed_one_are_dropped_with_a_warning(tmp_path, capsys, key):
    """A line with output_lens and itls but no input_lens (or no ttfts) lost every per-request
    list without a word: plots said the line had no details. The lists are still left out
    (each request's prompt, output and first token are needed), with one warning line naming
    the file, the line and the missing key."""
    p = _details_line(tmp_path, **{key: None})
    run = read_bench_one(str(p))
    assert run.details is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {p}:1: ") and f"no {key}" in err[0]


def test_a_consistent_line_reads_without_a_warning(tmp_path, capsys):
    read_bench_one(str(_details_line(tmp_path)))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("change", "said"), [
    ({"duration": 0.05}, "duration"),
    ({"completed": 5, "num_prompts": 4, "input_lens": None, "output_lens": None, "ttfts": None, "itls": None,
      "generated_texts": None, "errors": None, "cached_tokens": None, "cached_tokens_details": None}, "num_prompts"),
    ({"output_throughput": 30.0}, "output_throughput"),
    # completed / duration is 2 / 0.82 = 2.44 here: written 3.5, a throughput joined from another run
    ({"request_throughput": 3.5}, "request_throughput 3.5 is not completed / duration = "),
])
def test_an_impossible_line_is_said_in_one_warning(tmp_path, capsys, change, said):
    """A line whose figures cannot come from one run (its duration shorter than its mean
    end-to-end latency, more requests completed than sent, an output throughput other than
    total_output_tokens / duration past rounding, a request throughput other than completed /
    duration) was read as measured without a word: the
    file was edited or cut. One warning line names the file, the line and the figures; the
    line is still read."""
    p = _details_line(tmp_path, **change)
    run = read_bench_one(str(p))
    assert run.summary["completed"] >= 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {p}:1: ") and said in err[0]


def test_a_stream_ended_before_its_first_token_has_no_latency_of_0(tmp_path):
    """bench_serving (0.5.23 benchmark/serving.py ``calculate_metrics``) counts a stream the
    server ended before its first token as completed: its TTFT 0.0 in the TTFT statistics,
    no ITL, its latency (the client's clock at the stream's last chunk, not in the file) in the
    E2E statistics and latency / (n - 1) in the TPOT ones. Its row held E2E 0 and TPOT 0,
    figures bench_serving never measured, which the E2E and TPOT percentiles a line without
    them takes from the requests table (bench_record) and the TPOT CDF counted; they are
    unknown (NaN), its TTFT 0.0 kept."""
    line = {k: v for k, v in SGLANG_0523.items() if not k.startswith(("p90_", "p95_"))}
    line.update(ttfts=[0.04, 0.0, 0.042], itls=[[0.01] * 149, [], [0.011] * 199])
    data = to_run_data(read_bench_one(_jsonl(tmp_path, line)))
    row = data.requests.set_index("rid").loc[1]
    assert row["ttft_s"] == 0.0 and math.isnan(row["e2e_s"]) and math.isnan(row["tpot_s"])
    rec = bench_record(data, details=False)
    e2e = sorted(data.requests["e2e_s"].dropna() * 1000.0)
    assert e2e == pytest.approx([1530.0, 2231.0])   # the two requests whose latency the lists give
    assert rec["p95_e2e_latency_ms"] == pytest.approx(float(np.percentile(e2e, 95)))
    assert rec["p95_tpot_ms"] == pytest.approx(float(np.percentile([10.0, 11.0], 95)))


def test_lists_that_count_other_successes_than_completed_are_said(tmp_path, capsys):
    """bench_serving's ``completed`` counts its client's ``success`` flags, which the file does
    not hold; the reader counts a request successful by its row (no error text, and a first
    token or an output length). Where the two counts differ, one warning names the file, the
    line and both counts (the lists are read as they say)."""
    line = dict(SGLANG_0523, errors=["", "", "Bad Gateway: "], output_lens=[150, 100, 0], ttfts=[0.04, 0.038, 0.0],
                itls=[[0.01] * 149, [0.009] * 99, []])
    run = read_bench_one(_jsonl(tmp_path, line))
    assert int(run.details.ok.sum()) == 2 and run.summary["completed"] == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {tmp_path / 'runs.jsonl'}:1: completed 3, ") and " 2 " in err[0], err
    read_bench_one(_jsonl(tmp_path, SGLANG_0523))
    assert capsys.readouterr().err == ""


def test_a_prefill_only_request_is_a_success_as_the_line_counts_it(tmp_path, capsys):
    """A request sent with ``max_new_tokens`` 0 (served prefill only) comes back from SGLang
    0.5.23's client (benchmark/serving.py ``async_request_sglang_generate``) with HTTP 200, no
    text, ``ttft`` 0.0, ``output_len`` 0 and ``success`` True; ``calculate_metrics`` counts it
    in ``completed`` (its only test is ``success``; the output length does not enter it). It
    was read as failed, and the line warned that its lists count other successes than its
    own ``completed``."""
    line = dict(SGLANG_0523, output_lens=[150, 100, 0], ttfts=[0.04, 0.038, 0.0], itls=[[0.01] * 149, [0.009] * 99, []],
                total_output_tokens=250, output_throughput=250 / 30.5, total_output_tokens_retokenized=250)
    run = read_bench_one(_jsonl(tmp_path, line))
    assert capsys.readouterr().err == ""
    assert run.details.ok.tolist() == [True, True, True] and int(run.details.ok.sum()) == run.summary["completed"]
    data = to_run_data(run)
    assert data.summary["failed"] == 0 and sorted(data.requests["output_len"].tolist()) == [0, 100, 150]


def test_plot_of_the_measured_folder_of_a_line_without_details_draws_crosses_not_an_empty_curve(tmp_path, capsys,
                                                                                                 monkeypatch):
    """``validate --measured`` writes the measured run as a results folder (``OUT/measured``);
    of a line without details its requests table is empty, and ``plot OUT/predicted-seed1
    OUT/measured`` drew it as an empty curve ("n=0; p50 n/a"), as files were drawn before. It
    is now drawn by its percentiles, as the file is."""
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_run_or_bench
    from specsched.sim.bench_serving import read_bench_one, to_run_data
    from specsched.sim.results import write_results

    monkeypatch.chdir(tmp_path)
    _jsonl(tmp_path, SGLANG_0523, name="full.jsonl")
    _jsonl(tmp_path, SGLANG_03, name="bare.jsonl")
    write_results(to_run_data(read_bench_one("bare.jsonl")), tmp_path / "measured")
    seen = []
    monkeypatch.setattr(plots, "plot_ttft", lambda runs, log_x=False, marks=None, _f=plots.plot_ttft:
                        seen.append((len(runs), len(marks or []))) or _f(runs, log_x=log_x, marks=marks))
    assert main(["plot", "full.jsonl", "measured", "--out", "p"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "measured" in x]
    assert len(err) == 1 and "crosses" in err[0]
    assert seen == [(1, 1)]
    assert load_run_or_bench("measured").requests.empty


def test_plot_of_a_sweep_file_overlays_every_run_labelled_by_its_rate(tmp_path, capsys, monkeypatch):
    """A rate sweep appends one line per run to one --output-file (``for r in 1 2 4; do
    bench_serving --request-rate $r --output-file sweep.jsonl``). ``plot sweep.jsonl`` was
    refused ("the file has 3 runs: name one as FILE:LINE"); every run is now drawn, one
    colour each, labelled by its line and what differs (the rate), and runs without details
    by their stated percentiles."""
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_plot_inputs

    monkeypatch.chdir(tmp_path)
    bare = {k: v for k, v in SGLANG_0523.items()
            if k not in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")}
    _jsonl(tmp_path, SGLANG_0523 | {"request_rate": 1.0}, SGLANG_0523 | {"request_rate": 4.0},
           bare | {"request_rate": float("inf")}, name="sweep.jsonl")
    runs = load_plot_inputs("sweep.jsonl")
    assert [r.summary["arm"] for r in runs] == ["line 1: rate 1/s", "line 2: rate 4/s", "line 3: rate inf/s"]
    assert [r.requests.empty for r in runs] == [False, False, True]
    seen = []
    monkeypatch.setattr(plots, "plot_ttft", lambda runs, log_x=False, marks=None, _f=plots.plot_ttft:
                        seen.append(_f(runs, log_x=log_x, marks=marks)) or seen[-1])
    assert main(["plot", "sweep.jsonl", "--out", "p"]) == 0
    err = capsys.readouterr().err
    assert err.count("holds 3 runs") == 1 and err.count("1 of its 3 runs") == 1, err
    legend = [t.get_text() for t in seen[0].axes[0].get_legend().get_texts()]
    assert [x.split(" (")[0] for x in legend] == ["line 1: rate 1/s", "line 2: rate 4/s", "line 3: rate inf/s"]
    assert (tmp_path / "p" / "ttft.png").exists() and (tmp_path / "p" / "tpot_itl.png").exists()
    assert len(load_plot_inputs("sweep.jsonl:2")) == 1
    # a concurrency sweep: the cap, or none; lengths a dataset does not use are not labels
    _jsonl(tmp_path, SGLANG_0523 | {"max_concurrency": 8}, bare | {"max_concurrency": None},
           bare | {"dataset_name": "sharegpt", "max_concurrency": 8}, name="conc.jsonl")
    assert [r.summary["arm"] for r in load_plot_inputs("conc.jsonl")] == [
        "line 1: concurrency 8, random", "line 2: no concurrency cap, random", "line 3: concurrency 8, sharegpt"]


def test_a_long_figure_title_stays_inside_the_figure():
    """The TPOT/ITL title of a measured per-chunk run (vLLM's client) with two runs' names ran
    past both edges of the figure: centred, it was cut at the left and the right."""
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_run_or_bench

    f = Path(__file__).parent / "data" / "bench" / "vllm-0.7.3-benchmark_serving.json"
    runs = {"vllm-0.7.3-benchmark_serving:measured": [load_run_or_bench(str(f))],
            "vllm-0.7.3-benchmark_serving-line1:base": [load_run_or_bench(str(f))]}
    for fig in (plots.plot_tpot_itl(runs), plots.plot_ttft(runs)):
        fig.canvas.draw()
        box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig._suptitle.get_text())
        plots.plt.close(fig)


@pytest.mark.parametrize("depth", [100_000, 3000])
def test_json_nested_past_pythons_limit_is_named_so_not_a_cut_line(tmp_path, capsys, depth):
    """A result line holding brackets nested past Python's recursion limit (a damaged or hostile
    file) is whole JSON: it was refused as "not a complete JSON object (...; truncated?)", which
    sent the user looking for a cut. One line naming the nesting, exit 2, nothing written."""
    line = json.loads((Path(__file__).parent / "data" / "bench" / "sglang-0.3.6.jsonl").read_text().splitlines()[0])
    f = tmp_path / "deep.jsonl"
    f.write_text(json.dumps(line)[:-1] + ', "tag": ' + "[" * depth + "]" * depth + "}\n")
    assert main(["scenario", "from-bench", str(f), "--profile", "h200-1b", "--out", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "deep.jsonl:1" in err[0] and "nested deeper than Python's recursion limit" in err[0]
    assert "truncated" not in err[0] and not (tmp_path / "s.yaml").exists()


def test_a_file_cut_inside_its_last_character_keeps_its_whole_runs(tmp_path):
    """A writer that keeps non-ASCII text as it is (``json.dumps(r, ensure_ascii=False)``) killed
    while appending can stop inside a character's bytes: the whole file was refused as "not a
    text file", its whole runs with it. The cut line is left out as any cut line is; a byte that
    is not text before the end is named at its line."""
    line = json.loads((Path(__file__).parent / "data" / "bench" / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    line["generated_texts"] = ["café"] * len(line["generated_texts"])
    text = (json.dumps(line, ensure_ascii=False) + "\n") * 2
    data = text.encode()
    f = tmp_path / "cut.jsonl"
    f.write_bytes(data[: data.rindex("é".encode()) + 1])
    left: list[str] = []
    (run,) = read_bench(f, left_out=left)
    assert run.source == f"{f}:1" and len(left) == 1 and "cut.jsonl:2: left out: the last line is cut short" in left[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data[: len(data) // 2] + b"\xff" + data[len(data) // 2:])
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: <bytes> = 'ff': not UTF-8 text"):
        read_bench(bad)


def test_old_vllm_goodput_key_with_its_colon_is_read_as_the_newer_one():
    """vLLM's benchmarks/benchmark_serving.py 0.6.6-0.9.0 writes its goodput as
    ``"request_goodput:"`` (the colon in the key); vllm bench serve 0.9.2 on as
    ``request_goodput``. The older key was kept as an unknown one: validate said nothing of it,
    while the newer got its "not compared" note. Read under the one name."""
    from specsched.sim.bench_serving import measured_goodput, parse_run

    old = {"date": "20250601-120000", "backend": "vllm", "best_of": 1, "num_prompts": 20, "request_rate": 4.0,
           "duration": 5.0, "completed": 20, "total_input_tokens": 2000, "total_output_tokens": 400,
           "request_throughput": 4.0, "request_goodput:": 3.2, "output_throughput": 80.0, "median_ttft_ms": 30.0}
    run = parse_run(old, "old.json:1")
    assert run.extra.get("request_goodput") == 3.2 and "request_goodput:" not in run.extra
    assert measured_goodput(run) == {"request_goodput": 3.2}
    new = {k: v for k, v in old.items() if k not in ("request_goodput:", "best_of")} | {"request_goodput": 3.2}
    assert measured_goodput(parse_run(new, "new.json:1")) == measured_goodput(run)
