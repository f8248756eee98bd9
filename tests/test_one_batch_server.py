"""``python -m sglang.bench_one_batch_server --result-filename F`` lines as measured runs.

Each line is one batch of ``batch_size`` requests sent at once (SGLang 0.5.23
benchmark/one_batch_server.py ``run_one_case``); it was refused as "not bench_serving output".
Now ``scenario from-bench`` builds the burst, ``validate-bench`` compares the figures the line
measured (each with its own definition on both sides) and ``calibrate --from`` fits them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from specsched.sim.bench_serving import read_bench
from specsched.sim.errors import ConfigError

from specsched.cli import main

SWEEP = Path(__file__).parent / "data" / "bench" / "sglang-0.5.23-one-batch-sweep.jsonl"


def _lines() -> list[dict]:
    return [json.loads(x) for x in SWEEP.read_text().splitlines()]


def test_a_line_reads_as_one_batch_with_its_own_definitions():
    runs = read_bench(SWEEP)
    assert len(runs) == 3
    for run, line in zip(runs, _lines(), strict=True):
        bs, tin, tout = line["batch_size"], line["batch_size"] * line["input_len"], line["total_output_tokens"]
        s = run.summary
        assert s["completed"] == bs and s["duration"] == line["latency"]
        assert s["total_input_tokens"] == tin and s["total_output_tokens"] == tout
        assert s["output_throughput"] == pytest.approx(tout / line["latency"])   # bench_serving's: over the whole run
        assert s["total_throughput"] == line["overall_throughput"]
        assert s["max_ttft_ms"] == pytest.approx(line["last_ttft"] * 1000)
        assert s["decode_window_output_throughput"] == line["output_throughput"]
        assert s["decode_window_output_throughput"] == pytest.approx(tout / (line["latency"] - line["last_ttft"]), rel=1e-3)
        assert s["prefill_window_input_throughput"] == line["input_throughput"]
        # not measured by the line: not in the summary, so never compared
        assert "accept_length" not in s and "input_throughput" not in s and "median_ttft_ms" not in s
        assert run.args["request_rate"] == math.inf and run.args["random_range_ratio"] == 1.0
        assert (run.args["random_input_len"], run.args["random_output_len"]) == (line["input_len"], line["output_len"])


def test_from_bench_builds_the_burst(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", f"{SWEEP}:2", "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    sc = yaml.safe_load(Path("s.yaml").read_text())
    w = sc["workload"]
    assert w["kind"] == "burst" and w["num_requests"] == 8
    assert w["input_len"] == {"kind": "fixed", "value": 1024} and w["output_len"] == {"kind": "fixed", "value": 256}
    assert any("bench_one_batch_server" in a for a in sc["assumptions"])
    assert sc["reference"]["base"]["max_ttft_ms"] == pytest.approx(137.2)


def test_from_bench_runs_a_batch_above_the_default_limit_whole(tmp_path, monkeypatch):
    """bench_one_batch_server skips a batch above the server's running limit, so a written
    line ran whole: the scenario's max_running_requests is at least the batch."""
    monkeypatch.chdir(tmp_path)
    line = {**_lines()[0], "batch_size": 600, "total_output_tokens": 600 * 256}
    f = tmp_path / "big.jsonl"
    f.write_text(json.dumps(line) + "\n")
    assert main(["scenario", "from-bench", str(f), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    sc = yaml.safe_load(Path("s.yaml").read_text())
    assert sc["workload"]["num_requests"] == 600 and sc["server"]["max_running_requests"] == 600


def test_a_warmed_cache_is_named_in_the_assumptions(tmp_path, monkeypatch):
    """--cache-hit-rate R cached part of each prompt before the timed batch: the built
    scenario, which starts cold, says its TTFT figures read high for it; a cold line says
    nothing of it."""
    monkeypatch.chdir(tmp_path)
    for rate, said in ((0.4, True), (0.0, False)):
        f = tmp_path / f"c{rate}.jsonl"
        f.write_text(json.dumps({**_lines()[1], "cache_hit_rate": rate}) + "\n")
        assert main(["scenario", "from-bench", str(f), "--profile", "h200-1b", "--out", f"s{rate}.yaml"]) == 0
        notes = yaml.safe_load(Path(f"s{rate}.yaml").read_text())["assumptions"]
        assert any("cache_hit_rate 0.4" in a and "read high" in a for a in notes) == said


def test_calibrate_leaves_out_what_a_warmed_cache_shortened(tmp_path, monkeypatch, capsys):
    """A line whose --cache-hit-rate warm-up cached part of each prompt (SGLang 0.5.23
    one_batch_server.py _warmup_cache) timed a shorter prefill than the fit's cold scenario
    runs: calibrate fitted its max_ttft_ms and whole-latency figures without a word. Now one
    warning line names it and only its decode window is fitted; a cold line beside it fits whole."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")   # the fit table one line per row
    f = tmp_path / "mixed.jsonl"
    f.write_text(json.dumps(_lines()[1]) + "\n" + json.dumps({**_lines()[2], "cache_hit_rate": 0.5}) + "\n")
    assert main(["calibrate", "--from", str(f), "--profile", "h200-1b", "--seeds", "1", "--max-evals", "2",
                 "--out", "fitted.yaml"]) == 0
    out, err = capsys.readouterr()
    warned = [x for x in err.splitlines() if "cache_hit_rate" in x]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {f}:2: cache_hit_rate 0.5")
    assert all(k in warned[0] for k in ("max_ttft_ms", "prefill_window_input_throughput", "output_throughput"))
    rows = {tuple(x.split()[:2]) for x in out.splitlines() if x.startswith("mixed.jsonl:")}
    assert {("mixed.jsonl:1", "max_ttft_ms"), ("mixed.jsonl:1", "output_throughput"),
            ("mixed.jsonl:2", "decode_window_output_throughput")} <= rows
    timed_over_the_prefill = ("max_ttft_ms", "prefill_window_input_throughput", "duration", "output_throughput",
                              "total_throughput")
    assert not {("mixed.jsonl:2", k) for k in timed_over_the_prefill} & rows


def test_validate_bench_compares_what_the_line_measured(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["validate-bench", f"{SWEEP}:2", "--profile", "h200-1b", "--seeds", "1", "--out", "v"]) == 0
    out = capsys.readouterr().out
    rows = {r.split()[0]: r.split()[1:] for r in out.splitlines() if r and r.split()[0].replace("_", "").isalpha()}
    for k in ("duration", "output_throughput", "total_throughput", "max_ttft_ms", "prefill_window_input_throughput",
              "decode_window_output_throughput"):
        assert k in rows, k
    assert not {"median_ttft_ms", "mean_tpot_ms", "median_itl_ms", "input_throughput", "accept_length"} & set(rows)
    # the predicted side has the same definitions: its decode window = output / (duration - max TTFT)
    pred = {k: float(v[0]) for k, v in rows.items() if len(v) == 3 and k != "metric"}
    assert pred["decode_window_output_throughput"] == pytest.approx(
        pred["total_output_tokens"] / (pred["duration"] - pred["max_ttft_ms"] / 1000), rel=2e-3)
    assert pred["prefill_window_input_throughput"] == pytest.approx(
        pred["total_input_tokens"] / (pred["max_ttft_ms"] / 1000), rel=2e-3)


def test_accept_length_is_compared_only_where_the_line_has_one(tmp_path):
    line = {**_lines()[0], "acc_length": 2.71}
    f = tmp_path / "spec.jsonl"
    f.write_text(json.dumps(line) + "\n")
    assert read_bench(f)[0].summary["accept_length"] == 2.71


def test_calibrate_from_accepts_the_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--from", str(SWEEP), "--profile", "h200-1b", "--seeds", "1", "--max-evals", "4",
                 "--out", "fitted.yaml"]) == 0
    out = capsys.readouterr().out
    assert Path("fitted.yaml").is_file()
    assert "max_ttft_ms" in out and "decode_window_output_throughput" in out


@pytest.mark.parametrize(("change", "key"), [
    ({"last_ttft": 2.5}, "last_ttft"),            # at or past latency 2.4125
    ({"batch_size": None}, "batch_size"),
    ({"num_early_stopped": 3, "total_output_tokens": 1900}, "num_early_stopped"),
    ({"total_output_tokens": 2000}, "total_output_tokens"),
    ({"latency": 0}, "latency"),
])
def test_bad_batch_lines_are_one_clear_line(tmp_path, capsys, change, key):
    line = {**_lines()[1], **change}
    line = {k: v for k, v in line.items() if v is not None}
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(line) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(f)
    assert e.value.key == key
    assert main(["validate-bench", str(f), "--profile", "h200-1b", "--seeds", "1", "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0]


OFFLINE = [   # python -m sglang.bench_one_batch --batch-size 8 --input-len 1024 --output-len 16 / 1 --result-filename F
    {"run_name": "default", "batch_size": 8, "input_len": 1024, "output_len": 16, "prefill_latency": 0.1873,
     "prefill_throughput": 43737.32, "median_decode_latency": 0.00702, "median_decode_throughput": 1139.6,
     "total_latency": 0.2929, "overall_throughput": 28404.06},
    {"run_name": "default", "batch_size": 8, "input_len": 1024, "output_len": 1, "prefill_latency": 0.1869,
     "prefill_throughput": 43830.93, "total_latency": 0.1869, "overall_throughput": 43873.73},   # no decode step
]


@pytest.mark.parametrize("line", OFFLINE, ids=["decode", "prefill-only"])
def test_an_offline_one_batch_line_is_named_for_what_it_is(tmp_path, capsys, line):
    """``python -m sglang.bench_one_batch --result-filename`` (0.4.3, 0.4.6.post5
    ``bench_one_batch.py``, 0.5.23 ``benchmark/one_batch.py`` ``latency_test_run_once``) runs one
    static batch on the model in-process, no server: its run_name, batch_size, input_len and
    output_len passed it for a bench_one_batch_server line, refused as "latency = 'missing':
    must be a number > 0 (s from sending the batch to the end of its stream)"."""
    f = tmp_path / "result.jsonl"
    f.write_text(json.dumps(line) + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(f)
    assert "sglang.bench_one_batch" in str(e.value) and "latency = " not in str(e.value)
    out = tmp_path / "v"
    assert main(["validate-bench", str(f), "--profile", "h200-1b", "--seeds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "result.jsonl:1:" in err[0] and "no server or scheduler" in err[0], err
    assert not out.exists()
