"""Input files that are not regular files, as a user hands them over: process substitution
(``--measured <(zcat runs.jsonl.gz)`` is ``/dev/fd/N``, a pipe), ``/dev/stdin``, a named pipe,
``/dev/null``. Each reader of a user's file (scenario YAML, bench_serving results, a trace
named in a scenario, an SGLang server log) reads a pipe once, though the command reads the
file more than once (sim/input_files.py), and gets the same result as from the file; an
empty input is one line naming it, exit 2, nothing written; a policy file that is a pipe is
refused in one line (Python imports files)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
from pathlib import Path

import pandas as pd
import pytest
from specsched.sim import input_files
from specsched.sim.errors import ConfigError

from specsched.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
BENCH = DATA / "bench" / "sglang-0.4.6-eagle.jsonl"
LOG = DATA / "logs" / "sglang-0.4.6-eagle.log"


@pytest.fixture
def pipe():
    """``pipe(data)`` -> ``/dev/fd/N``, the read end of a pipe a thread fills with ``data`` and
    closes, as bash's ``<(cat FILE)`` hands it: a second open reads nothing."""
    fds: list[int] = []
    threads: list[threading.Thread] = []

    def make(data: bytes) -> str:
        r, w = os.pipe()
        fds.append(r)

        def fill() -> None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            finally:
                os.close(w)
        t = threading.Thread(target=fill, daemon=True)
        t.start()
        threads.append(t)
        return f"/dev/fd/{r}"

    def close(path: str) -> None:   # the pipe is gone: its number is free for the next one
        r = int(path.rsplit("/", 1)[1])
        fds.remove(r)
        os.close(r)

    make.close = close   # type: ignore[attr-defined]
    yield make
    for t in threads:
        t.join(timeout=5)
    for r in fds:
        os.close(r)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# ------------------------------------------------------------------ the module


def test_a_pipe_is_read_once_and_its_bytes_kept_a_new_pipe_under_the_same_name_is_read_anew(pipe):
    p = pipe(b"first\n")
    assert input_files.is_input_file(p) and input_files.is_stream(p)
    assert input_files.read_input(p, "x") == b"first\n"
    assert input_files.read_input(p, "x") == b"first\n"   # the pipe itself has nothing left
    with input_files.open_text(p, "x") as f:
        assert f.read() == "first\n"
    pipe.close(p)
    q = pipe(b"second\n")   # the lowest free descriptor: often the same /dev/fd/N
    assert input_files.read_input(q, "x") == b"second\n"
    # the file itself is not a stream; a folder and a missing path are no input
    assert not input_files.is_stream(BENCH) and input_files.is_input_file(BENCH)
    assert not input_files.is_input_file(DATA) and not input_files.is_input_file(DATA / "nope")


def test_gzip_and_utf16_arrive_through_a_pipe_as_from_a_file(pipe):
    text = "a,b\n1,2\n"
    with input_files.open_text(pipe(gzip.compress(text.encode())), "x") as f:
        assert f.read() == text
    with input_files.open_text(pipe(text.encode("utf-16")), "x") as f:
        assert f.read() == text


def test_an_empty_input_is_refused_naming_it_and_what_was_expected(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    for p in ("/dev/null", tmp_path / "e.jsonl"):
        with pytest.raises(ConfigError) as e:
            input_files.read_input(p, "a bench_serving result file")
        assert str(e.value) == f"{p}: <file> = '0 bytes': empty, expected a bench_serving result file"
        with pytest.raises(ConfigError, match="empty, expected a trace"):
            input_files.open_text(p, "a trace")


# ------------------------------------------------------------------ through the commands


def test_validate_measured_from_a_pipe_equals_the_file(tmp_path, capsys, monkeypatch, pipe):
    """``specsched validate --measured <(cat F):1 --profile P``: the command reads the line for
    the scenario and again for the measured figures; both from the one read of the pipe."""
    monkeypatch.chdir(tmp_path)
    small = ["--profile", "h200-1b", "--seeds", "1", "--set", "workload.num_requests=4"]
    assert main(["validate", "--measured", f"{BENCH}:1", *small, "--out", "a"]) == 0
    assert main(["validate", "--measured", f"{pipe(BENCH.read_bytes())}:1", *small, "--out", "b"]) == 0
    capsys.readouterr()
    a, b = (pd.read_csv(tmp_path / d / "validate.csv") for d in "ab")
    assert a["measured"].tolist() == pytest.approx(b["measured"].tolist(), nan_ok=True)
    assert a["predicted"].tolist() == pytest.approx(b["predicted"].tolist(), nan_ok=True)


def test_from_bench_and_validate_bench_from_pipes(tmp_path, capsys, monkeypatch, pipe):
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "from-bench", str(BENCH), "--profile", "h200-1b", "--out", "a.yaml"]) == 0
    assert main(["scenario", "from-bench", pipe(BENCH.read_bytes()), "--profile", "h200-1b", "--out", "b.yaml"]) == 0
    a, b = ((tmp_path / f"{x}.yaml").read_text().splitlines() for x in "ab")
    assert a[4:] == b[4:] and len(a) > 10   # all but the name, description and source (the file's name)
    assert main(["validate-bench", pipe(BENCH.read_bytes()), "--scenario", "a.yaml", "--seeds", "1", "--out", "v"]) == 0
    capsys.readouterr()
    measured = pd.read_csv(tmp_path / "v" / "validate.csv").set_index("metric")["measured"]
    assert measured["median_ttft_ms"] == pytest.approx(json.loads(BENCH.read_text().splitlines()[0])["median_ttft_ms"])


@contextlib.contextmanager
def stdin_from(data: bytes):
    """Descriptor 0 reads ``data`` from a pipe inside the block (``cat F | specsched ...``)."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    saved = os.dup(0)
    try:
        os.dup2(r, 0)
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)


def test_a_scenario_from_stdin_runs_as_the_file(tmp_path, capsys, monkeypatch):
    """``cat s.yaml | specsched run /dev/stdin``: /dev/stdin is the pipe on descriptor 0."""
    monkeypatch.chdir(tmp_path)
    scenario = ROOT / "scenarios" / "h200" / "batch8.yaml"
    assert main(["run", str(scenario), "--out", "a"]) == 0
    with stdin_from(scenario.read_bytes()):
        assert main(["run", "/dev/stdin", "--out", "b"]) == 0
    capsys.readouterr()
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    keys = ("mean_ttft_ms", "median_itl_ms", "output_throughput", "completed")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_a_trace_and_a_server_log_from_pipes(tmp_path, capsys, monkeypatch, pipe):
    """A trace named in a scenario (``--set workload.trace.path=<(zcat t.csv.gz)``; read by
    the check before the run and again by the run) and ``calibrate --from <(..) --server-log
    <(..)``: the same requests, the same log lines as from the files."""
    monkeypatch.chdir(tmp_path)
    azure = ROOT / "scenarios" / "trace-example-azure.csv"
    mooncake = ROOT / "scenarios" / "trace-example-mooncake.jsonl"
    assert main(["run", "trace-example", "--set", "workload.num_requests=50", "--out", "a"]) == 0
    assert main(["run", "trace-example", "--set", "workload.num_requests=50",
                 "--set", f"workload.trace.path={pipe(gzip.compress(azure.read_bytes()))}", "--out", "b"]) == 0
    # no name to tell the layout by: a JSON line is told by its "{"
    assert main(["run", "trace-example", "--arm", "mooncake", "--set", "workload.num_requests=50",
                 "--set", f"workload.trace.path={pipe(mooncake.read_bytes())}", "--out", "c"]) == 0
    a, b, c = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "abc")
    assert a["total_input_tokens"] == b["total_input_tokens"] == c["total_input_tokens"] > 0
    assert a["mean_ttft_ms"] == b["mean_ttft_ms"]
    argv = ["calibrate", "--profile", "h200-1b", "--params", "decode", "--seeds", "1", "--max-evals", "1"]
    assert main([*argv, "--from", str(BENCH), "--server-log", str(LOG), "--out", "a.yaml"]) == 0
    file_out = capsys.readouterr().out
    assert main([*argv, "--from", pipe(BENCH.read_bytes()), "--server-log", pipe(LOG.read_bytes()), "--out", "b.yaml"]) == 0
    pipe_out = capsys.readouterr().out
    said = [x for x in file_out.splitlines() if x.startswith("server-log")]
    assert said and said == [x for x in pipe_out.splitlines() if x.startswith("server-log")]


def test_a_piped_trace_reaches_the_worker_processes(tmp_path, capsys, monkeypatch, pipe):
    """``compare --workers 2``: spawned workers have no /dev/fd/N of the parent's; they get its bytes."""
    monkeypatch.chdir(tmp_path)
    azure = ROOT / "scenarios" / "trace-example-azure.csv"
    assert main(["compare", "trace-example", "--arms", "base,double_rate", "--seeds", "1", "--workers", "2",
                 "--set", "workload.num_requests=40", "--set", f"workload.trace.path={pipe(azure.read_bytes())}",
                 "--no-save"]) == 0
    assert "double_rate" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "run-trace", "validate-measured", "from-bench", "calibrate", "server-log"])
def test_dev_null_is_one_line_empty_expected_exit_2_nothing_written(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    argv = {
        "run": ["run", "/dev/null", "--out", "out"],
        "run-trace": ["run", "trace-example", "--set", "workload.trace.path=/dev/null", "--out", "out"],
        "validate-measured": ["validate", "--measured", "/dev/null", "--profile", "h200-1b", "--out", "out"],
        "from-bench": ["scenario", "from-bench", "/dev/null", "--profile", "h200-1b", "--out", "out.yaml"],
        "calibrate": ["calibrate", "--from", "/dev/null", "--profile", "h200-1b", "--out", "out.yaml"],
        "server-log": ["calibrate", "--from", str(BENCH), "--profile", "h200-1b", "--server-log", "/dev/null",
                       "--out", "out.yaml"],
    }[command]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith("specsched: error: /dev/null: ") and "empty, expected " in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_policy_file_that_is_a_pipe_is_refused_in_one_line(tmp_path, capsys, monkeypatch, pipe):
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "rules.py"
    os.mkfifo(fifo)   # never opened: the refusal looks, it does not read
    for spec in (f"{pipe(b'x = 1')}:MyDelay", "rules.py:MyDelay"):
        assert main(["run", "h200/batch8", "--set", f"server.admission_delay={spec}", "--out", "out"]) == 2
        line = _one_line(capsys)
        assert "server.admission_delay" in line and "not a regular file" in line and "importable" in line, line
        assert not (tmp_path / "out").exists()


def test_a_piped_profile_gives_the_hardware_defaults_the_file_gives(tmp_path, capsys, monkeypatch, pipe):
    """``--set profile=<(cat P.yaml)``: the profile's hardware (the server defaults SGLang
    fills for it) is read from the pipe too; resolving /dev/fd/N named the pipe, no file,
    and the defaults were silently left out."""
    monkeypatch.chdir(tmp_path)
    prof = ROOT / "profiles" / "h200-1b.yaml"
    assert main(["run", "h200/batch8", "--set", f"profile={prof}", "--out", "a"]) == 0
    from_file = capsys.readouterr().out
    assert main(["run", "h200/batch8", "--set", f"profile={pipe(prof.read_bytes())}", "--out", "b"]) == 0
    from_pipe = capsys.readouterr().out
    head = "server defaults for this hardware"
    assert head in from_file
    assert from_pipe.split("\n=")[0] == from_file.split("\n=")[0]


def test_calibrate_prints_the_server_log_summary_as_lines_with_n_a_for_a_missing_figure(tmp_path, capsys, monkeypatch):
    """The summary of a decode server's log (prefill-decode disaggregation: no prefill line, so
    no prefill batch to average) is printed as labelled lines; the missing figures read n/a, and
    no Python dict or NaN reaches the user."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "server.log"
    log.write_text("".join(x for x in LOG.read_text().splitlines(keepends=True) if "Prefill batch" not in x))
    assert main(["calibrate", "--profile", "h200-1b", "--params", "decode", "--seeds", "1", "--max-evals", "1",
                 "--from", str(BENCH), "--server-log", str(log), "--out", "a.yaml", "-q"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower().replace("nanosecond", "") and "{'" not in out, out
    said = {x.split(":")[0].strip(): x.split()[-1] for x in out.splitlines() if x.startswith("  ") and ":" in x}
    assert said["Prefill batches"] == "0" and said["Mean new tokens per prefill batch"] == "n/a", out
    assert float(said["Mean accept length (tokens/step)"]) > 1, out


def test_calibrate_refuses_an_out_that_is_its_input_profile(tmp_path, capsys, monkeypatch):
    """``calibrate --from runs --profile my.yaml --out my.yaml`` wrote the fitted profile over the
    profile it started from, silently: refused before the fit, in one line naming --out and
    the profile; the file is left as it was."""
    from specsched.sim.profile import resolve_profile_path

    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "my.yaml"
    mine.write_bytes(resolve_profile_path("h200-1b").read_bytes())
    before = mine.read_bytes()
    assert main(["calibrate", "--from", str(BENCH), "--profile", "my.yaml", "--params", "decode", "--seeds", "1",
                 "--max-evals", "1", "--out", str(mine), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and str(mine) in err and "input profile" in err, err
    assert mine.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["my.yaml"]


def test_a_profile_fitted_to_stdin_or_a_pipe_names_it_as_the_reader_does(tmp_path, capsys, monkeypatch, pipe):
    """``calibrate --from -`` wrote ``bench_serving runs -`` into the fitted profile's
    provenance, and ``--from <(zcat runs.gz)`` the pipe's number (``63``): a stream is named
    by the path it was read from (``/dev/stdin``, ``/dev/fd/N``), as the reader's warnings and
    the fit's report now names its runs too (it said ``stdin:1``, ``63:1``); a file keeps its
    name."""
    import yaml

    monkeypatch.chdir(tmp_path)
    argv = ["--profile", "h200-1b", "--params", "decode", "--seeds", "1", "--max-evals", "1"]
    with stdin_from(BENCH.read_bytes()):
        assert main(["calibrate", "--from", "-", *argv, "--out", "a.yaml"]) == 0
    assert "/dev/stdin:1 " in capsys.readouterr().out   # the report's row (it was "stdin:1")
    fd = pipe(BENCH.read_bytes())
    assert main(["calibrate", "--from", fd, *argv, "--out", "b.yaml"]) == 0
    assert f"{fd}:1 " in capsys.readouterr().out
    a, b = (yaml.safe_load((tmp_path / f).read_text())["provenance"]["calibrate.from"] for f in ("a.yaml", "b.yaml"))
    assert "bench_serving runs /dev/stdin:" in a, a
    assert f"bench_serving runs {fd}:" in b, b
