"""A log that is not what a reader reads, named for what it is in one line: a vLLM server's
log, or an SGLang server log of start-up lines only (sim/server_log_kind.py), wherever a user
gives it (``--server-log``, among ``calibrate --from``'s files, ``validate --measured``,
``scenario from-bench``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specsched.analysis.server_log import parse_server_log
from specsched.sim.bench_serving import read_bench
from specsched.sim.errors import ConfigError

from specsched.cli import main

DATA = Path(__file__).parent / "data"
LOGS = DATA / "logs"
VLLM = LOGS / "vllm-0.10.1.1-server.log"
VLLM_V0 = LOGS / "vllm-0.5.3-server.log"
"""vLLM 0.4-0.6's V0 engine: its logger's ``INFO MM-DD HH:MM:SS file.py:N]`` prefix without the
opening bracket and without a process prefix, the V0 metrics line (``Running: N reqs, Swapped:
N reqs, Pending: N reqs``)."""
RUN = {"backend": "sglang", "dataset_name": "random", "request_rate": 8, "random_input_len": 64,
       "random_output_len": 8, "random_range_ratio": 1.0, "duration": 2.0, "completed": 16, "total_input_tokens": 1024,
       "total_output_tokens": 128, "median_ttft_ms": 20.0, "median_itl_ms": 5.0, "output_throughput": 64.0}


def _no_stats(tmp_path: Path, log: Path = VLLM) -> Path:
    """The vLLM log with ``--disable-log-stats`` (no periodic metrics line)."""
    f = tmp_path / "vllm.log"
    f.write_text("".join(x for x in log.read_text().splitlines(keepends=True) if "Avg prompt throughput" not in x))
    return f


def _metrics_only(tmp_path: Path) -> Path:
    """The V0 log's metrics lines alone (``grep metrics.py server.log``)."""
    f = tmp_path / "metrics.log"
    f.write_text("".join(x for x in VLLM_V0.read_text().splitlines(keepends=True) if "Avg prompt throughput" in x))
    return f


def _startup(tmp_path: Path) -> Path:
    f = tmp_path / "startup.log"
    f.write_text("".join((LOGS / "sglang-0.4.0-launch.log").read_text().splitlines(keepends=True)[:8]))
    return f


@pytest.mark.parametrize("make", [lambda t: VLLM, _no_stats, lambda t: VLLM_V0, lambda t: _no_stats(t, VLLM_V0),
                                  _metrics_only], ids=["v1", "v1-no-stats", "v0", "v0-no-stats", "v0-metrics-only"])
def test_a_vllm_log_is_named_as_one_wherever_it_is_given(tmp_path, capsys, monkeypatch, make):
    """A vLLM server's log (V1 0.10's and V0 0.4-0.6's prefix and metrics line), with or without its
    metrics line, as ``--server-log`` (it was "not an
    SGLang server log" without the metrics line), among ``calibrate --from``'s files and as
    ``validate --measured`` / ``scenario from-bench`` (it was "not a complete JSON object
    (truncated?)"): one line naming a vLLM server's log, exit 2, nothing written."""
    log = make(tmp_path)
    with pytest.raises(ConfigError, match="a vLLM server's log"):
        parse_server_log(log)
    with pytest.raises(ConfigError, match="a vLLM server's log"):
        read_bench(log)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.jsonl").write_text(json.dumps(RUN) + "\n")
    fit = ["calibrate", "--profile", "h200-1b", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml"]
    for argv in ([*fit, "--from", "run.jsonl", "--server-log", str(log)], [*fit, "--from", "run.jsonl", str(log)],
                 ["validate", "--measured", str(log), "--scenario", str(DATA.parent.parent / "scenarios" / "burst256-ht.yaml")],
                 ["scenario", "from-bench", str(log), "--profile", "h200-1b", "--out", "s.yaml"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "a vLLM server's log" in err[0] and f"{log.name}:" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run.jsonl", *([log.name] if log.parent == tmp_path else [])])


def test_an_sglang_log_of_start_up_lines_only_says_it_has_no_batch_lines(tmp_path, capsys, monkeypatch):
    """A log copied before the runs: its start-up lines and no batch line. As ``--server-log`` it
    was "not an SGLang server log"; among ``--from``'s files "not a complete JSON object
    (truncated?)". Now one line: an SGLang log of start-up lines only, no batch lines."""
    log = _startup(tmp_path)
    with pytest.raises(ConfigError, match="start-up lines only, no batch lines") as e:
        parse_server_log(log)
    assert str(e.value).startswith(f"{log}:1:")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.jsonl").write_text(json.dumps(RUN) + "\n")
    fit = ["calibrate", "--profile", "h200-1b", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml"]
    for argv in ([*fit, "--from", "run.jsonl", "--server-log", str(log)], [*fit, "--from", "run.jsonl", str(log)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "start-up lines only, no batch lines" in err[0], err
    assert not (tmp_path / "o.yaml").exists()


def test_an_sglang_log_without_batch_or_start_up_lines_is_not_named_a_benchmark_result(tmp_path, capsys, monkeypatch):
    """A stretch of an SGLang log with neither (``docker logs --tail``, ``--log-level warning``):
    every line starts with the logger's ``[date ...]`` prefix, and a line starting with "[" was
    taken for a JSON list: it was refused as "a benchmark result (bench_serving's --output-file,
    vLLM's result JSON) ... give it to --from". Now the refusal of a file without batch lines."""
    lines = (LOGS / "sglang-0.4.9-swa-eagle-dp.log").read_text().splitlines(keepends=True)
    log = tmp_path / "tail.log"
    log.write_text("".join(x for x in lines if "batch" not in x and "Load weight" not in x))
    with pytest.raises(ConfigError) as e:
        parse_server_log(log)
    msg = str(e.value)
    assert msg.startswith(f"{log}:1:") and "a benchmark result" not in msg, msg
    assert "SGLang's logger prefix" in msg and "no 'Prefill batch'/'Decode batch' line" in msg, msg
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.jsonl").write_text(json.dumps(RUN) + "\n")
    argv = ["calibrate", "--profile", "h200-1b", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml",
            "--from", "run.jsonl", "--server-log", str(log)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tail.log" in err[0] and "a benchmark result" not in err[0], err
    assert not (tmp_path / "o.yaml").exists()


def test_an_sglang_log_without_batch_or_start_up_lines_given_as_a_result_is_named_a_log(tmp_path, capsys, monkeypatch):
    """The same stretch of a log given where a bench_serving result goes (``calibrate --from``,
    ``validate --measured``): its first line's "[" was parsed as JSON and the file refused as "not
    a complete JSON object (Expecting ',' delimiter ...; truncated?)"."""
    lines = (LOGS / "sglang-0.4.9-swa-eagle-dp.log").read_text().splitlines(keepends=True)
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "tail.log"
    log.write_text("".join(x for x in lines if "batch" not in x and "Load weight" not in x))
    for argv in (["calibrate", "--profile", "h200-1b", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml",
                  "--from", str(log)],
                 ["validate", "--measured", str(log), "--profile", "h200-1b", "--out", "v"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{log}:1:" in err[0] and "SGLang's logger prefix" in err[0], err
        assert "Expecting" not in err[0] and "truncated" not in err[0], err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["tail.log"]


def test_vllms_benchmark_client_output_is_not_taken_for_its_server_log(tmp_path):
    """vLLM's client prints its logger's lines too: its stdout cut before the result block is
    not named a vLLM server's log."""
    text = (DATA / "stdout" / "vllm-0.34.0-stdout.log").read_text()
    cut = tmp_path / "bench.log"
    cut.write_text(text[: text.index("Serving Benchmark Result")].rsplit("\n", 1)[0] + "\n")
    with pytest.raises(ConfigError) as e:
        read_bench(cut)
    assert "vLLM server's log" not in str(e.value)


@pytest.mark.parametrize("name", ["sglang-0.5.23-details.jsonl", "vllm-indented.json", "vllm-0.8.5-jq-indented-runs.json"])
def test_a_result_file_given_as_the_server_log_is_named_a_result(name):
    """bench_serving's ``--output-file`` or vLLM's result JSON as ``--server-log``: it was "not an
    SGLang server log (or logged with --log-level above info)", which sent the user to the
    server's log level. One line names it a benchmark result and where it goes."""
    with pytest.raises(ConfigError) as e:
        parse_server_log(DATA / "bench" / name)
    msg = str(e.value)
    assert f"{name}:1:" in msg and "a benchmark result" in msg and "--from" in msg and "--log-level" not in msg
