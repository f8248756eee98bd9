"""bench_serving's printed result block (its stdout kept as a log, or pasted) read as the run it
reports: the figures the result file would hold for it, under the same keys."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from specsched.sim.bench_serving import itl_per_chunk, read_bench, read_bench_one, vllm_client
from specsched.sim.errors import ConfigError

from specsched.cli import main

_NAMESPACE = ("Namespace(backend='sglang', base_url=None, host='0.0.0.0', port=30000, dataset_name='random', "
              "dataset_path='', num_prompts=200, sharegpt_output_len=None, random_input_len=512, "
              "random_output_len=128, random_range_ratio=1.0, request_rate=inf, max_concurrency=64, seed=1)")


def _report(rate="inf", concurrency=64, accept=3.12) -> list[str]:
    """A report as SGLang 0.5.23's benchmark() prints it (benchmark/serving.py: the same format
    calls, made-up figures)."""
    out = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    rows = [("Backend:", "sglang"), ("Traffic request rate:", rate),
            ("Max request concurrency:", concurrency if concurrency else "not set"), ("Successful requests:", 200)]
    out += [f"{a:<40} {b:<10}" for a, b in rows]
    out.append("{:<40} {:<10.2f}".format("Benchmark duration (s):", 30.12))
    out += [f"{a:<40} {b:<10}" for a, b in (("Total input tokens:", 102400), ("Total input text tokens:", 102400),
                                                     ("Total generated tokens:", 25600),
                                                     ("Total generated tokens (retokenized):", 25590))]
    out += [f"{a:<40} {b:<10.2f}" for a, b in (
        ("Request throughput (req/s):", 6.64), ("Input token throughput (tok/s):", 3399.73),
        ("Output token throughput (tok/s):", 849.93), ("Peak output token throughput (tok/s):", 1400.0))]
    out.append("{:<40} {:<10}".format("Peak concurrent requests:", 64))
    out.append("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", 4249.67))
    out.append("{:<40} {:<10.2f}".format("Concurrency:", 63.2))
    if accept:
        out.append("{:<40} {:<10.2f}".format("Accept length:", accept))
    out.append("{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"))
    for k, v in (("Mean", 9000.1), ("Median", 8990.0), ("P90", 9500.0), ("P95", 9600.0), ("P99", 9800.0)):
        out.append("{:<40} {:<10.2f}".format(f"{k} E2E Latency (ms):", v))
    for name, base in (("Time to First Token", 500.0), ("Time per Output Token (excl. 1st token)", 66.0),
                       ("Inter-Token Latency", 21.0)):
        out.append("{s:{c}^{n}}".format(s=name, n=50, c="-"))
        short = {"Time to First Token": "TTFT", "Inter-Token Latency": "ITL"}.get(name, "TPOT")
        for k, f in (("Mean", 1.0), ("Median", 0.95), ("P90", 1.3), ("P95", 1.4), ("P99", 1.8)):
            out.append("{:<40} {:<10.2f}".format(f"{k} {short} (ms):", base * f))
    out.append("{:<40} {:<10.2f}".format("Max ITL (ms):", 90.0))
    out.append("=" * 50)
    return out


def test_a_saved_stdout_is_read_as_the_run_it_reports(tmp_path):
    """It was refused ('rerun with --output-file'), though it holds every figure the result line
    has but server_info and the details: a benchmark that took hours had to be run again."""
    p = tmp_path / "bench.log"
    lines = [_NAMESPACE, "", "#Input tokens: 102400", "100%|##########| 200/200 [00:30<00:00,  6.64it/s]", "",
             *_report()]
    p.write_text("\n".join(lines) + "\n")
    (run,) = read_bench(p)
    assert run.source == f"{p}:6"   # named by its title's line
    assert run.args["backend"] == "sglang" and math.isinf(run.args["request_rate"]) and run.args["max_concurrency"] == 64
    assert run.args["dataset_name"] == "random" and run.args["random_input_len"] == 512
    assert run.args["random_range_ratio"] == 1.0
    s = run.summary
    assert s["completed"] == 200 and s["duration"] == 30.12 and s["total_output_tokens"] == 25600
    assert s["accept_length"] == 3.12 and s["p95_itl_ms"] == pytest.approx(29.4) and s["max_itl_ms"] == 90.0
    assert s["median_e2e_latency_ms"] == 8990.0 and s["max_concurrent_requests"] == 64
    assert run.details is None


def test_every_run_of_a_stdout_is_named_by_its_title_line(tmp_path):
    p = tmp_path / "sweep.log"
    a, b = _report(rate="4.0", concurrency=None, accept=None), _report(rate="trace")
    p.write_text("\n".join(["warming up", *a, "", *b]) + "\n")
    runs = read_bench(p)
    assert [r.source for r in runs] == [f"{p}:2", f"{p}:{3 + len(a)}"]
    assert runs[0].args["request_rate"] == 4.0 and "max_concurrency" not in runs[0].args   # "not set"
    assert "accept_length" not in runs[0].summary
    assert runs[1].args["request_rate"] == "trace"
    assert read_bench_one(f"{p}:{3 + len(a)}").args["request_rate"] == "trace"


def test_a_block_without_the_runs_size_is_still_refused_as_a_printed_report(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("\n".join(_report()[:3]) + "\n")   # cut after the rate: no request count, no duration
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file == f"{p}:1" and "--output-file" in e.value.allowed


def test_from_bench_builds_a_scenario_from_a_saved_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "bench.log"
    p.write_text("\n".join([_NAMESPACE, *_report()]) + "\n")
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml", "-q"]) == 0
    w = yaml.safe_load((tmp_path / "s.yaml").read_text())["workload"]
    assert w["kind"] == "closed_loop" and w["concurrency"] == 64 and w["num_requests"] == 200
    assert w["input_len"] == {"kind": "fixed", "value": 512} and w["output_len"] == {"kind": "fixed", "value": 128}


def test_a_report_under_a_log_drivers_prefix_and_an_args_echo_is_read(tmp_path):
    """``docker compose logs bench`` puts "bench-1  | " before each line; bench_serving versions
    that echo ``args=Namespace(...)`` (print(f"{args=}")) give the dataset arguments too."""
    p = tmp_path / "compose.log"
    lines = [f"bench-1  | args={_NAMESPACE}", *(f"bench-1  | {x}" for x in _report())]
    p.write_text("\n".join(lines) + "\n")
    (run,) = read_bench(p)
    assert run.source == f"{p}:2" and run.summary["completed"] == 200 and run.summary["p99_ttft_ms"] == 900.0
    assert run.args["dataset_name"] == "random" and run.args["random_output_len"] == 128


def test_the_cache_reports_hit_rate_is_read(tmp_path):
    """--cache-report prints its section inside the block (0.5.23 benchmark(): "Cache hit rate:"
    as "{:.1f}%"); the result file's cache_report.cache_hit_rate_pct is read as cache_hit_rate."""
    rep = _report()
    cache = ["{s:{c}^{n}}".format(s="Cache Hit Details", n=50, c="-"),
             "{:<40} {:<10}".format("Total prompt tokens:", 102400), "{:<40} {:<10}".format("Total cached tokens:", 12800),
             "{:<40} {:.1f}%".format("Cache hit rate:", 12.5), "{:<40} {:.1f}%".format("  Device:", 100.0)]
    p = tmp_path / "bench.log"
    p.write_text("\n".join(rep[:-1] + cache + rep[-1:]) + "\n")
    (run,) = read_bench(p)
    assert run.summary["cache_hit_rate"] == pytest.approx(0.125) and run.summary["completed"] == 200


def _steady(input_known: bool = True) -> list[str]:
    """The block SGLang 0.5.23's steady_state_serving prints after the report
    (benchmark/steady_state_serving.py ``_print_metrics``: the same format calls; the input
    rows one "N/A" row for a multi-turn replay; made-up figures)."""
    out = ["", "{s:{c}^{n}}".format(s=" Steady-State Result ", n=50, c="=")]
    out.append("{:<40} {:<10.2f}".format("Concurrency ratio:", 0.8))
    out.append("{:<40} {:<10.2f}".format("Measurement duration (s):", 25.31))
    out.append("{:<40} {:<10}".format("Minimum concurrency:", 52))
    out.append("{:<40} {:<10}".format("Completed requests:", 150))
    if input_known:
        out.append("{:<40} {:<10}".format("Input tokens:", 81920))
        out.append("{:<40} {:<10.2f}".format("Input token throughput (tok/s):", 3236.66))
    else:
        out.append("{:<40} {:<10}".format("Input token throughput (tok/s):", "N/A"))
    out.append("{:<40} {:<10.2f}".format("Generated tokens:", 22015.5))
    out.append("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", 869.84))
    out.append("{:<40} {:<10.2f}".format("Output throughput, retokenized (tok/s):", 869.5))
    out.append("{:<40} {:<10.2f}".format("Average concurrency:", 63.7))
    out.append("{:<40} {:<10}".format("Peak concurrency:", 64))
    out.append("{:<40} {:<10.2f}".format("Peak output throughput (tok/s):", 1398.0))
    out.append("=" * 50)
    return out


def test_a_steady_state_block_after_the_report_is_read_with_its_run(tmp_path):
    """``python -m sglang.benchmark.steady_state_serving`` prints bench_serving's report, then
    its "Steady-State Result" block (SGLang 0.5.23 steady_state_serving.py ``_run_with_capture``,
    ``_print_metrics``). Its figures were dropped (the report read alone); they are the run's
    ``steady_*`` figures, the report's whole-run ones unchanged, and in a sweep each block goes
    with the report before it."""
    p = tmp_path / "steady.log"
    a, b = _report(), _report(rate="4.0", concurrency=None, accept=None)
    p.write_text("\n".join([_NAMESPACE, *a, *_steady(), *b, *_steady(input_known=False)]) + "\n")
    one, two = read_bench(p)
    s = one.summary
    assert s["output_throughput"] == 849.93 and s["duration"] == 30.12 and s["completed"] == 200
    assert s["steady_output_throughput"] == 869.84 and s["steady_duration"] == 25.31
    assert s["steady_completed"] == 150 and s["steady_concurrency_threshold"] == 52
    assert s["steady_total_input"] == 81920 and s["steady_concurrency_ratio"] == 0.8
    assert "steady_window_start_s" not in s   # not printed
    assert two.source == f"{p}:{2 + len(a) + len(_steady())}" and "accept_length" not in two.summary
    assert "steady_total_input" not in two.summary and "steady_input_throughput" not in two.summary
    assert two.summary["steady_peak_output_throughput"] == 1398.0
    with pytest.raises(ConfigError) as e:   # the block's title names the run's report
        read_bench_one(f"{p}:{2 + len(a) + 1}")
    assert f"{p}:2" in e.value.allowed


def test_the_goodput_section_inside_the_report_leaves_the_runs_figures(tmp_path):
    """``--goodput`` prints its section inside the report (SGLang 0.5.23 benchmark/goodput.py
    ``print_goodput``, after ``Concurrency:``/``Accept length:``): its rows are no figure of the
    result file's and change none."""
    rep = _report()
    at = rep.index(next(x for x in rep if x.startswith("Accept length:"))) + 1
    goodput = ["{s:{c}^{n}}".format(s="Goodput", n=50, c="-"), "{:<40} {:<10}".format("SLOs (ms):", "ttft:500 tpot:60"),
               "{:<40} {:<10.2f}".format("Request goodput (req/s):", 5.1), "{:<40} {:<10.2f}".format("SLO attainment (%):", 76.5),
               "{:<40} {:<10.2f}".format("TTFT SLO attainment (%):", 80.0), "{:<40} {:<10.2f}".format("TPOT SLO attainment (%):", 90.0)]
    p, q = tmp_path / "a.log", tmp_path / "b.log"
    p.write_text("\n".join(rep) + "\n")
    q.write_text("\n".join([*rep[:at], *goodput, *rep[at:]]) + "\n")
    assert read_bench_one(q).summary == read_bench_one(p).summary


DATA = Path(__file__).parent / "data" / "stdout"


def test_vllms_printed_report_is_read_as_its_result_file_would_hold_it():
    """vLLM's ``vllm bench serve`` stdout (0.34.0 vllm/benchmarks/serve.py ``benchmark()``: the
    same title, no ``Backend:`` row, the rate and concurrency printed before the block and in it
    only when set, ``E2EL``, ``Failed requests:``, ``Acceptance length:``) was refused as a JSON
    line cut short at line 1. Every printed figure reads back under the key vLLM's result JSON
    gives it; the length arguments are not taken (vLLM's ``--random-range-ratio`` is not SGLang's)."""
    (r,) = read_bench(DATA / "vllm-0.34.0-stdout.log")
    assert r.source.endswith(":9")
    assert r.args == {"backend": "vllm", "dataset_name": "random", "request_rate": 2.0, "max_concurrency": 4,
                      "num_prompts": 8, "burstiness": 0.5}
    s = r.summary
    assert (s["completed"], s["duration"], s["total_input_tokens"], s["total_output_tokens"]) == (7, 4.35, 2688, 336)
    assert (s["request_throughput"], s["output_throughput"], s["total_throughput"]) == (1.61, 77.24, 695.17)
    assert (s["max_output_tokens_per_s"], s["max_concurrent_requests"]) == (112.0, 4.0)
    assert (s["mean_ttft_ms"], s["median_ttft_ms"], s["p99_ttft_ms"]) == (48.31, 45.12, 80.44)
    assert (s["mean_tpot_ms"], s["median_tpot_ms"], s["p99_tpot_ms"]) == (10.21, 10.05, 12.60)
    assert (s["mean_itl_ms"], s["median_itl_ms"], s["p99_itl_ms"]) == (10.19, 9.98, 21.35)
    assert (s["mean_e2e_latency_ms"], s["median_e2e_latency_ms"], s["p99_e2e_latency_ms"]) == (528.70, 520.02, 640.88)
    assert s["accept_length"] == 2.84 and r.extra["failed"] == 1
    assert r.num_prompts == 8
    assert vllm_client(r) and itl_per_chunk(r)   # vLLM's client: one ITL per chunk


def test_vllms_older_printed_report_at_inf_takes_the_rate_printed_before_it():
    """vLLM 0.7.3 ``benchmarks/benchmark_serving.py``: no failed, peak or rate rows in the block;
    ``Traffic request rate: inf`` and ``Maximum request concurrency: None`` printed before it."""
    (r,) = read_bench(DATA / "vllm-0.7.3-stdout.log")
    assert r.args["request_rate"] == math.inf and "max_concurrency" not in r.args
    assert r.args["dataset_name"] == "sharegpt" and "random_input_len" not in r.args
    assert (r.summary["completed"], r.summary["total_throughput"], r.summary["p99_itl_ms"]) == (6, 1142.99, 25.40)
    assert "mean_e2e_latency_ms" not in r.summary   # e2el is not in vLLM's default --percentile-metrics


def test_from_bench_builds_the_run_of_a_vllm_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = DATA / "vllm-0.34.0-stdout.log"
    assert main(["scenario", "from-bench", str(f), "--profile", "h200-1b", "--out", "v.yaml"]) == 0
    w = yaml.safe_load(open("v.yaml"))["workload"]
    # the 7 that succeeded, at 2 req/s x 7/8, gamma gaps of shape 0.5, at most 4 in flight
    assert (w["kind"], w["num_requests"], w["max_concurrency"], w["burstiness"]) == ("poisson", 7, 4, 0.5)
    assert w["request_rate"] == pytest.approx(2.0 * 7 / 8)


def test_a_stdout_cut_inside_its_block_is_refused_as_a_printed_report_at_its_title():
    """A stdout whose block was cut before ``Benchmark duration (s):`` (a run killed, a paste
    stopped short) was refused as a JSON line cut short at its first line ("INFO ..."), not as
    a printed report; the refusal names the block's title line."""
    import tempfile

    text = (DATA / "vllm-0.34.0-stdout.log").read_text()
    cut = text[: text.index("Benchmark duration")]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "bench.log"
        p.write_text(cut)
        with pytest.raises(ConfigError) as e:
            read_bench(p)
    assert e.value.file == f"{p}:9" and "--output-file" in e.value.allowed


def test_sglang_04s_misspelt_concurrency_row_is_read(tmp_path, monkeypatch):
    """SGLang 0.4.0-0.4.6 print ``Max reqeuest concurrency:`` (so spelt in ``sglang/bench_serving.py``
    ``benchmark()`` of the 0.4.0 and 0.4.6 wheels; 0.5.1 fixed it): the row was not read, so a
    closed loop of 64 at ``inf`` was built as a burst of every request."""
    rows = [r.replace("Max request concurrency:", "Max reqeuest concurrency:") for r in _report(accept=None)]
    p = tmp_path / "bench.log"
    p.write_text("\n".join(rows) + "\n")
    (run,) = read_bench(p)
    assert run.args["max_concurrency"] == 64
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml", "-q"]) == 0
    w = yaml.safe_load((tmp_path / "s.yaml").read_text())["workload"]
    assert (w["kind"], w["concurrency"]) == ("closed_loop", 64)


def test_a_vllm_stdout_of_a_ramp_up_run_is_refused_as_its_result_json_is(tmp_path, monkeypatch):
    """``vllm bench serve --ramp-up-strategy linear`` prints ``Traffic ramp-up strategy: linear.``
    in place of the rate (0.34.0 ``benchmark()``); its result JSON's ``ramp_up_strategy`` makes
    from-bench refuse it (the rate changed during the run). The printed run was built as a burst."""
    text = (DATA / "vllm-0.34.0-stdout.log").read_text()
    text = text.replace("Traffic request rate: 2.0", "Traffic ramp-up strategy: linear.\n"
                        "Will increase RPS from 1.0 to 4.0 RPS over the duration of the benchmark.")
    text = text.replace("Request rate configured (RPS):           2.00      \n", "")
    p = tmp_path / "ramp.log"
    p.write_text(text)
    (run,) = read_bench(p)
    assert run.extra["ramp_up_strategy"] == "linear" and "request_rate" not in run.args
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 2
    assert not (tmp_path / "s.yaml").exists()


def test_a_vllm_stdout_under_a_log_drivers_prefix_keeps_the_rate_printed_before_the_block(tmp_path):
    """``docker compose logs`` puts ``bench-1  | `` before every line: vLLM 0.7.3 prints its rate
    only before the block (``Traffic request rate: 8.0``), which was then not read, and the run
    at 8 req/s was built as a burst."""
    text = (DATA / "vllm-0.7.3-stdout.log").read_text().replace("Traffic request rate: inf", "Traffic request rate: 8.0")
    p = tmp_path / "compose.log"
    p.write_text("".join(f"bench-1  | {x}\n" for x in text.splitlines()))
    (run,) = read_bench(p)
    assert run.args["request_rate"] == 8.0 and run.args["burstiness"] == 1.0 and run.summary["completed"] == 6


def test_the_diffusion_benchmarks_printed_report_is_named_as_its_result_file_is(tmp_path):
    """SGLang 0.5.23's ``sglang.multimodal_gen`` bench_serving prints a block of the same title
    (``multimodal_gen/benchmarks/bench_serving.py``: ``Task:``, ``Successful requests: 8/8``,
    ``Latency Mean (s):``; no ``Backend:``): refused as its JSON is (an image/video generation
    benchmark), not as a request count written as a string."""
    def row(k, v):
        return f"{k:<40} {v:<15}"
    rows = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=60, c="="), row("Task:", "text-to-image"),
            "-" * 50, row("Benchmark duration (s):", "35.20"), row("Request rate:", "inf"),
            row("Successful requests:", "8/8"), row("Outputs per prompt:", "1"), "-" * 50,
            row("Request throughput (req/s):", "0.23"), row("Latency Mean (s):", "20.1"), "=" * 60]
    p = tmp_path / "diffusion.log"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(p)
    assert e.value.file == f"{p}:1" and "diffusion" in e.value.allowed


def test_the_goodput_section_is_read_as_the_result_file_holds_it(tmp_path):
    """--goodput prints its section after the accept length (0.5.23 benchmark/goodput.py
    ``print_goodput``): "SLOs (ms): ttft:200 tpot:20", request goodput, "SLO attainment (%):" and
    one per SLO. Only the request goodput was read (the SLOs and attainments, which the result
    file holds as ``goodput_slos_ms``, ``slo_attainment`` and ``slo_attainment_by_metric``,
    0-1, were dropped, so the prediction could not be judged by the same SLOs)."""
    rep = _report()
    at = next(i for i, x in enumerate(rep) if "End-to-End Latency" in x)
    good = ["{s:{c}^{n}}".format(s="Goodput", n=50, c="-"), "{:<40} {:<10}".format("SLOs (ms):", "ttft:200 tpot:20"),
            "{:<40} {:<10.2f}".format("Request goodput (req/s):", 6.12),
            "{:<40} {:<10.2f}".format("SLO attainment (%):", 92.5),
            "{:<40} {:<10.2f}".format("TTFT SLO attainment (%):", 95.0),
            "{:<40} {:<10.2f}".format("TPOT SLO attainment (%):", 97.5)]
    p = tmp_path / "bench.log"
    p.write_text("\n".join(rep[:at] + good + rep[at:]) + "\n")
    (run,) = read_bench(p)
    assert run.extra["goodput_slos_ms"] == {"ttft": 200.0, "tpot": 20.0}
    assert run.extra["request_goodput"] == pytest.approx(6.12) and run.extra["slo_attainment"] == pytest.approx(0.925)
    assert run.extra["slo_attainment_by_metric"] == pytest.approx({"ttft": 0.95, "tpot": 0.975})
    assert run.summary["completed"] == 200
