"""ITL as the measuring client records it: SGLang's ``sglang`` backend splits a streamed chunk
of n tokens into n gaps of dt / n; its OpenAI-API backends and every vLLM client record one
gap per chunk. With speculative decoding a chunk is a whole accepted block, so comparing a
split prediction with a per-chunk measurement read the model as several times too fast."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from specsched.sim.bench_serving import itl_per_chunk, read_bench_one
from specsched.sim.metrics import itl_values

from specsched.cli import main

BENCH = Path(__file__).parent / "data" / "bench"


def test_per_chunk_itl_is_one_gap_per_later_chunk():
    chunks = pd.DataFrame({"rid": [0, 0, 0, 1, 1], "time_s": [0.0, 0.01, 0.03, 0.005, 0.02],
                           "n_tokens": [1, 4, 2, 1, 3]})
    assert sorted(itl_values(chunks)) == pytest.approx(sorted([0.0025] * 4 + [0.01] * 2 + [0.005] * 3))
    assert sorted(itl_values(chunks, per_chunk=True)) == pytest.approx([0.01, 0.015, 0.02])


@pytest.mark.parametrize(("name", "backend", "expected"), [
    ("sglang-0.5.23.jsonl", None, False), ("sglang-0.4.6-eagle.jsonl", None, False),
    ("sglang-0.5.23.jsonl", "sglang-oai", True), ("sglang-0.5.23.jsonl", "vllm", True),
    ("vllm-0.11.0-bench-serve.json", None, True), ("vllm-0.7.3-benchmark_serving.json", None, True),
    # a dump of vLLM's BenchmarkMetrics (no date, no backend) was compared as split gaps
    ("vllm-benchmark-metrics-asdict.json", None, True),
])
def test_which_clients_record_one_gap_per_chunk(tmp_path, name, backend, expected):
    f = BENCH / name
    if backend is not None:
        obj = json.loads(f.read_text().splitlines()[0])
        obj["backend"] = backend
        f = tmp_path / name
        f.write_text(json.dumps(obj) + "\n")
    assert itl_per_chunk(read_bench_one(f"{f}:1")) is expected


@pytest.mark.parametrize(("backend", "accept_length", "server_info", "expected"), [
    ("sglang-oai", 3.1, True, False), ("sglang-oai-chat", 3.1, True, False),
    ("sglang-oai", None, True, True), ("sglang-oai", 3.1, False, True), ("vllm", 3.1, True, True),
])
def test_sglang_oai_lines_of_a_speculating_server_report_split_itls_from_0_5_5(
        tmp_path, backend, accept_length, server_info, expected):
    """SGLang 0.5.5-0.5.23 calculate_metrics (use_retokenized_itl) spreads each chunk's gap over
    its tokens for the sglang-oai backends when accept_length > 0; 0.5.5 is the release that
    added server_info, so a line without it keeps the per-chunk reading."""
    obj = json.loads((BENCH / "sglang-0.5.23.jsonl").read_text().splitlines()[0])
    obj |= {"backend": backend, "accept_length": accept_length}
    if not server_info:
        obj.pop("server_info", None)
        obj.pop("tag", None)
    else:
        obj.setdefault("server_info", {})
    f = tmp_path / "line.jsonl"
    f.write_text(json.dumps(obj) + "\n")
    assert itl_per_chunk(read_bench_one(f"{f}:1")) is expected


def test_validate_predicts_the_itl_the_lines_client_records(tmp_path, capsys, monkeypatch):
    """The same EAGLE line measured through the sglang and the sglang-oai client: the second's
    predicted ITL is per chunk (the verify cycle), several times the split one; TPOT equal."""
    monkeypatch.chdir(tmp_path)
    line = json.loads((BENCH / "sglang-0.4.6-eagle.jsonl").read_text().splitlines()[0])
    tables = {}
    for backend in ("sglang", "sglang-oai"):
        Path(f"{backend}.jsonl").write_text(json.dumps(line | {"backend": backend}) + "\n")
        assert main(["validate", "--measured", f"{backend}.jsonl", "--profile", "h200-1b", "--seeds", "1",
                     "--set", "workload.num_requests=24", "--out", backend]) == 0
        tables[backend] = pd.read_csv(tmp_path / backend / "validate.csv").set_index("metric")["predicted"]
    out = capsys.readouterr().out
    assert out.count("records one ITL per streamed chunk") == 1
    split, chunk = tables["sglang"], tables["sglang-oai"]
    assert chunk["median_tpot_ms"] == pytest.approx(split["median_tpot_ms"])
    assert chunk["median_itl_ms"] > 1.5 * split["median_itl_ms"]
    assert np.isfinite(chunk["p99_itl_ms"])


def test_specsched_own_lines_are_split(tmp_path, monkeypatch):
    """A line specsched wrote (backend specsched-sim) holds split ITLs, as SGLang's sglang client."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "batch1-ll", "--set", "workload.num_requests=2", "--out", "r"]) == 0
    assert itl_per_chunk(read_bench_one("r/bench_serving.jsonl")) is False


def test_calibrate_predicts_the_itl_the_lines_client_records(tmp_path):
    """calibrate --from fits median ITL by default: a per-chunk line is fitted to a per-chunk
    prediction (a split one read the decode several times too fast)."""
    from specsched.analysis.calibrate_bench import cases_from_runs, predict
    from specsched.sim.bench_serving import parse_run
    from specsched.sim.profile import load_profile

    line = json.loads((BENCH / "sglang-0.4.6-eagle.jsonl").read_text().splitlines()[0]) | {"completed": 24}
    prof = load_profile("h200-1b")
    got = {}
    for backend in ("sglang", "sglang-oai"):
        case = cases_from_runs([parse_run(line | {"backend": backend}, f"{backend}:1")], "h200-1b", None, tmp_path)[0]
        got[backend] = predict(case, prof, 1)
    assert got["sglang-oai"]["median_tpot_ms"] == pytest.approx(got["sglang"]["median_tpot_ms"])
    assert got["sglang-oai"]["median_itl_ms"] > 1.5 * got["sglang"]["median_itl_ms"]


def _legend_texts(fig):
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_plot_draws_the_prediction_per_chunk_beside_a_per_chunk_file():
    """`validate-bench --plot` and `plot` drew the prediction's split ITL (n gaps of dt / n a
    chunk) beside a per-chunk file's gaps (one a chunk: the cycle): a speculative prediction
    read several times too fast there. Beside such a file every run's ITL is one gap per
    chunk; beside none, split as before."""
    from specsched.analysis import plots
    from specsched.sim.bench_serving import bench_record, parse_run, to_run_data
    from specsched.sim.engine import run_scenario

    from tests.conftest import make_scenario, tiny_profile

    sim = run_scenario(make_scenario(workload={"num_requests": 4, "output_len": {"kind": "fixed", "value": 30}}),
                       profile=tiny_profile())
    line = json.loads(json.dumps(bench_record(sim, details=True))) | {"backend": "vllm"}
    measured = to_run_data(parse_run(line, "m.jsonl:1"))
    assert measured.summary["itl_per_chunk"] is True
    chunk_n, split_n = len(itl_values(sim.chunks, per_chunk=True)), len(itl_values(sim.chunks))
    assert split_n > chunk_n   # accepted blocks of several tokens
    fig = plots.plot_tpot_itl({"predicted": [sim], "measured": [measured]})
    texts = _legend_texts(fig)
    assert any(t.startswith(f"predicted (n={chunk_n};") for t in texts), texts
    assert any(ax.get_title().startswith("ITL per chunk:") for ax in fig.axes) and "streamed chunk" in fig.get_suptitle()
    plots.plt.close(fig)
    fig = plots.plot_tpot_itl({"predicted": [sim]})   # no per-chunk file: split, as SGLang's client
    assert any(t.startswith(f"predicted (n={split_n};") for t in _legend_texts(fig))
    plots.plt.close(fig)


def test_a_split_summary_keeps_its_per_chunk_details_per_chunk():
    """SGLang 0.5.5-0.5.23 spreads a speculating sglang-oai line's ITL statistics over each
    chunk's retokenized tokens (``use_retokenized_itl``) but writes ``itls`` from
    ``output.itl``, one gap per chunk (benchmark/serving.py ``result_details``). The line's
    statistics are compared split; its details are per chunk, so the plot overlay must draw
    them (and the prediction beside them) per chunk: they were drawn as per-token gaps,
    accept length times too slow beside a split prediction."""
    from specsched.sim.bench_serving import parse_run, to_run_data

    obj = json.loads((BENCH / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    obj |= {"backend": "sglang-oai", "accept_length": 3.0}
    obj.setdefault("server_info", {})
    run = parse_run(obj, "f.jsonl:1")
    assert itl_per_chunk(run) is False   # the statistics: split
    assert to_run_data(run).summary["itl_per_chunk"] is True   # the details: per chunk
    obj["backend"] = "sglang"   # the native client splits its details too
    assert to_run_data(parse_run(obj, "f.jsonl:1")).summary["itl_per_chunk"] is False


@pytest.mark.parametrize(("name", "expected"), [
    ("sglang-0.2.11.jsonl", True), ("sglang-0.3.6.jsonl", True), ("sglang-0.4.0.jsonl", True),
    ("sglang-0.4.3.jsonl", True), ("sglang-0.4.6-eagle.jsonl", False), ("sglang-0.5.23.jsonl", False),
])
def test_sglang_backend_lines_before_0_4_4_record_one_gap_per_chunk(name, expected):
    """SGLang's ``sglang`` backend splits a chunk of n tokens into n gaps only from 0.4.3.post3
    (``async_request_sglang_generate``: ``output.itl.extend([adjust_itl] * num_new_tokens)``),
    the release that also first writes ``accept_length`` and ``p95_itl_ms``; 0.1.24-0.4.3.post2
    append one gap per chunk (``output.itl.append(timestamp - most_recent_timestamp)``; checked
    in the 0.4.3, 0.4.3.post2, 0.4.3.post3 and 0.4.4 wheels). Such a line was compared with a
    split prediction: with speculative decoding or a ``stream_interval`` above 1 (chunks of
    several tokens) its measured ITL read several times the model's."""
    assert itl_per_chunk(read_bench_one(f"{BENCH / name}:1")) is expected


def test_validate_of_a_pre_split_sglang_line_says_why_its_itl_is_per_chunk(tmp_path, capsys, monkeypatch):
    """The note named "SGLang's sglang backend splits a chunk" for a line of that very backend."""
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--measured", f"{BENCH / 'sglang-0.4.3.jsonl'}:1", "--profile", "h200-1b",
                 "--seeds", "1", "--out", "v"]) == 0
    out = capsys.readouterr().out
    assert "records one ITL per streamed chunk" in out and "before 0.4.3.post3" in out, out


def test_a_per_chunk_client_counts_chunks_in_its_peak_output_tokens_per_s():
    """bench_serving's ``max_output_tokens_per_s`` adds one token at start + TTFT and one more
    per entry of the request's ``itl`` list (SGLang 0.5.23 benchmark/serving.py
    ``calculate_metrics``; vllm bench serve's the same): a client that records one gap per
    chunk (``sglang-oai``, vLLM) counts chunks, not tokens. With speculative decoding a chunk
    is a verify cycle's accepted block, so the prediction (tokens) read the measured peak
    accept-length times low."""
    from specsched.sim.bench_serving import client_record
    from specsched.sim.config import load_scenario, with_value
    from specsched.sim.engine import run_scenario

    sc = with_value(load_scenario(Path(__file__).parents[1] / "scenarios" / "batch8-ll.yaml"), "workload.num_requests", 16)
    run = run_scenario(sc, warn=False)
    ch = run.chunks
    assert (ch["n_tokens"] > 1).any()   # speculative: chunks of several tokens
    t0 = run.requests["start_s"].min()
    expected = float(np.bincount(np.floor(ch["time_s"].to_numpy() - t0).astype(int)).max())
    split = client_record(run, False)["max_output_tokens_per_s"]
    assert client_record(run, True)["max_output_tokens_per_s"] == expected < split
    # sglang-oai of a speculating server, 0.5.5 on: ITL statistics split, the peaks still per chunk
    rec = client_record(run, False, per_chunk_tokens=True)
    assert rec["max_output_tokens_per_s"] == expected and rec["median_itl_ms"] == client_record(run, False)["median_itl_ms"]
