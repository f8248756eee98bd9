"""validate --measured FILE --scenario S says when the scenario's arrivals are not the line's:
the request rate (finite against inf too), the concurrency cap and vLLM's burstiness.

The lines carry the keys SGLang 0.5.23 bench_serving writes (``benchmark/serving.py``
``benchmark()``: ``request_rate`` inf by default, written as ``Infinity``; ``max_concurrency``
null without a cap) and vLLM 0.11.0 ``vllm bench serve --save-result`` writes
(``vllm/benchmarks/serve.py`` ``main``: ``request_rate`` ``"inf"``, ``burstiness``,
``max_concurrency``); the figures are made up.
"""

from __future__ import annotations

import json

from specsched.cli import main

FIGURES = {"duration": 2.0, "completed": 8, "total_input_tokens": 8192, "total_output_tokens": 512,
           "request_throughput": 4.0, "output_throughput": 256.0, "mean_ttft_ms": 60.0, "median_ttft_ms": 55.0,
           "median_tpot_ms": 9.0, "median_itl_ms": 8.0}


def _sglang(rate: float, cap: int | None) -> dict:
    return {"tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": rate, "max_concurrency": cap,
            "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 64,
            "random_range_ratio": 1.0, "server_info": None, "accept_length": None, **FIGURES}


def _vllm(rate: float | str, burstiness: float) -> dict:
    return {"date": "20261201-100000", "endpoint_type": "vllm", "backend": "vllm", "label": None,
            "model_id": "m", "tokenizer_id": "m", "num_prompts": 8, "request_rate": rate, "burstiness": burstiness,
            "max_concurrency": None, "request_goodput": None, "total_token_throughput": 4352.0, **FIGURES}


SCENARIO = ("name: s\nprofile: h200-1b\nworkload:\n  {kind}\n  num_requests: 8\n"
            "  input_len: {{kind: fixed, value: 1024}}\n  output_len: {{kind: fixed, value: 64}}\n")


def _notes(tmp_path, capsys, line: dict, workload: str) -> list[str]:
    (tmp_path / "runs.jsonl").write_text(json.dumps(line) + "\n")
    (tmp_path / "s.yaml").write_text(SCENARIO.format(kind=workload))
    assert main(["validate", "--measured", "runs.jsonl:1", "--scenario", "s.yaml", "--seeds", "1", "--out", "o"]) == 0
    out = capsys.readouterr().out.splitlines()
    return [x for x in out if x.startswith("note: the scenario") and ("req/s" in x or "flight" in x or "burst" in x)]


HOW = "(`specsched scenario from-bench FILE --template S` writes the line's workload)"


def test_burst_scenario_against_a_line_at_a_rate(tmp_path, capsys, monkeypatch):
    """A burst scenario against a line sent at 8 req/s said nothing (only two finite rates
    were compared)."""
    monkeypatch.chdir(tmp_path)
    assert _notes(tmp_path, capsys, _sglang(8.0, None), "kind: burst") == [
        f"note: the scenario sends every request at once (request_rate inf), the measured run at 8 req/s {HOW}"]


def test_poisson_scenario_against_a_line_at_inf_with_a_cap(tmp_path, capsys, monkeypatch):
    """A Poisson scenario against a line at inf with --max-concurrency 4: both the rate and
    the cap are named."""
    monkeypatch.chdir(tmp_path)
    assert _notes(tmp_path, capsys, _sglang(float("inf"), 4), "kind: poisson\n  request_rate: 4") == [
        f"note: the scenario sends at 4 req/s, the measured run every request at once (request_rate inf) {HOW}",
        f"note: the scenario's cap on requests in flight is none, the measured run's 4 (bench_serving "
        f"--max-concurrency) {HOW}"]


def test_same_arrivals_say_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _notes(tmp_path, capsys, _sglang(float("inf"), 4), "kind: closed_loop\n  concurrency: 4") == []
    assert _notes(tmp_path, capsys, _sglang(float("inf"), None), "kind: burst") == []
    assert _notes(tmp_path, capsys, _vllm("inf", 0.5), "kind: burst") == []   # no gaps at inf: shapes nothing


def test_vllm_burstiness(tmp_path, capsys, monkeypatch):
    """vLLM --burstiness 0.5 at 2 req/s against a Poisson scenario at 2 req/s."""
    monkeypatch.chdir(tmp_path)
    assert _notes(tmp_path, capsys, _vllm(2.0, 0.5), "kind: poisson\n  request_rate: 2") == [
        f"note: the scenario's arrival gaps have burstiness 1, the measured run's 0.5 (vLLM --burstiness: the gamma "
        f"shape of the gaps; 1 is Poisson) {HOW}"]
