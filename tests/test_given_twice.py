"""The same file given twice to ``calibrate --from`` (``a.log a.log``, ``runs.jsonl ./runs.jsonl``,
a log named in ``--from`` and as ``--server-log``): read once, said in one line; it was a second
server log refused, or every run fitted twice with a line per run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from specsched.analysis.calibrate_bench import split_server_log

from specsched.cli import main

DATA = Path(__file__).parent / "data"


def test_a_server_log_given_twice_is_the_one_log(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "logs" / "sglang-0.5.23.log", "a.log")
    shutil.copy(DATA / "bench" / "sglang-0.3.6.jsonl", "r.jsonl")
    assert split_server_log(["r.jsonl", "a.log", "a.log"], None) == (["r.jsonl"], ["a.log"])
    assert split_server_log(["r.jsonl", "a.log"], "./a.log") == (["r.jsonl"], ["./a.log"])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("given again: read once" in x for x in err)


def test_a_result_file_given_twice_is_read_once_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "bench" / "sglang-0.3.6.jsonl", "r.jsonl")
    assert split_server_log(["r.jsonl", "./r.jsonl", "r.jsonl:2", "r.jsonl:2"], None) == (["r.jsonl"], [])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("given again (as r.jsonl): read once" in x for x in err)
    assert split_server_log(["r.jsonl:2", "r.jsonl:2", "r.jsonl:1"], None) == (["r.jsonl:2", "r.jsonl:1"], [])
    capsys.readouterr()
    argv = ["calibrate", "--from", "r.jsonl", "r.jsonl", "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
            "--max-evals", "1", "--out", "o.yaml"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "fit: each evaluation simulates 2 run(s)" in out
    assert [x for x in err.splitlines() if "r.jsonl" in x] == ["warning: r.jsonl: given again (as r.jsonl): read once"]
    assert "bench_serving runs r.jsonl:" in (tmp_path / "o.yaml").read_text()   # the provenance names it once


def test_a_copy_of_a_result_file_is_one_line_for_all_its_runs(tmp_path, capsys, monkeypatch):
    """Another file with the same runs (a copy, a compressed copy): its runs are left out as
    before, now in one line for the file (it was a line a run)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "bench" / "sglang-0.3.6.jsonl", "r.jsonl")
    shutil.copy(DATA / "bench" / "sglang-0.3.6.jsonl", "copy.jsonl")
    from specsched.analysis.calibrate_bench import fit_runs

    assert [r.source for r in fit_runs(["r.jsonl", "copy.jsonl"])] == ["r.jsonl:1", "r.jsonl:2"]
    err = [x for x in capsys.readouterr().err.splitlines() if "copy.jsonl" in x]
    assert len(err) == 1 and "copy.jsonl:1, copy.jsonl:2: left out: the same run(s) as r.jsonl:1, r.jsonl:2" in err[0]


def test_plot_draws_an_input_given_twice_once(tmp_path, capsys, monkeypatch):
    """``plot d.jsonl ./d.jsonl d.jsonl:1``: one run drawn three times, one curve over another
    under three labels. Drawn once, each repeat said in a line."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "bench" / "sglang-0.5.23-details.jsonl", "d.jsonl")
    assert main(["plot", "d.jsonl", "./d.jsonl", "d.jsonl:1", "--out", "p"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "given again" in x]
    assert err == ["warning: ./d.jsonl: given again (as d.jsonl): drawn once",
                   "warning: d.jsonl:1: given again (as d.jsonl): drawn once"]
    from specsched.analysis.cli_commands import _each_once

    assert _each_once(["d.jsonl:1", "d.jsonl:1", "d.jsonl"]) == ["d.jsonl:1", "d.jsonl"]   # a whole file after a line: drawn


@pytest.mark.parametrize("where", [["--server-log", "-"], ["-"]])
def test_a_server_log_piped_to_calibrate_is_the_fits_log(tmp_path, where):
    """``zcat server.log.gz | specsched calibrate --from runs.jsonl --server-log -`` (or ``--from
    runs.jsonl -``): ``-`` is the standard input for a server log too. It was "no such server
    log", and among ``--from``'s files the piped log was read as a result and refused."""
    import subprocess
    import sys

    shutil.copy(DATA / "bench" / "sglang-0.3.6.jsonl", tmp_path / "r.jsonl")
    argv = ["calibrate", "--from", "r.jsonl:1", *(["-"] if where == ["-"] else []), "--profile", "h200-1b",
            "--params", "decode", "--seeds", "1", "--max-evals", "1", "--out", "o.yaml",
            *(where if where != ["-"] else [])]
    done = subprocess.run([sys.executable, "-m", "specsched", *argv], input=(DATA / "logs" / "sglang-0.5.23.log").read_text(),
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Pure-decode samples:                     2" in done.stdout


def test_a_log_of_server_and_client_together_is_both_the_log_and_the_runs(tmp_path, capsys, monkeypatch):
    """``docker compose logs > all.log`` of the SGLang server and the bench_serving client: the
    server's batch lines and the client's printed report in one file. ``calibrate --from all.log``
    took it for the server log alone and refused the fit ("an SGLang server log alone"), while
    ``validate --measured all.log`` read its report. Now it is both, said in one line."""
    from tests.test_bench_printed_report import _NAMESPACE, _report

    monkeypatch.chdir(tmp_path)
    log = (DATA / "logs" / "sglang-0.5.23.log").read_text().splitlines()
    bench = [_NAMESPACE, "", *_report(accept=None)]
    lines = ([f"sglang-1  | {x}" for x in log[:4]] + [f"bench-1   | {bench[0]}"] + [f"sglang-1  | {x}" for x in log[4:]]
             + [f"bench-1   | {x}" for x in bench[1:]])
    (tmp_path / "all.log").write_text("\n".join(lines) + "\n")
    for extra in ([], ["--server-log", "all.log"]):
        assert split_server_log(["all.log"], extra[1] if extra else None) == (["all.log"], ["all.log"])
        assert main(["calibrate", "--from", "all.log", *extra, "--profile", "h200-1b", "--params", "decode",
                     "--seeds", "1", "--max-evals", "1", "--out", "o.yaml"]) == 0
        out = capsys.readouterr().out
        assert "Pure-decode samples:                     2" in out and "fit: each evaluation simulates 1 run(s)" in out


def test_of_one_run_given_twice_the_copy_with_the_per_request_lists_is_fitted(tmp_path, capsys, monkeypatch):
    """A run given as a line without ``--output-details`` and again as the line with them:
    the first was kept and the one carrying the per-request lists left out. The one with
    them (strictly more: its lengths, its send times) is fitted, and the warning says so."""
    import json

    monkeypatch.chdir(tmp_path)
    full = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    lists = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors", "start_times")
    plain = {k: v for k, v in full.items() if k not in lists}
    Path("runs.jsonl").write_text(json.dumps(plain) + "\n" + json.dumps(full) + "\n")
    from specsched.analysis.calibrate_bench import fit_runs

    runs = fit_runs(["runs.jsonl"])
    assert [r.source for r in runs] == ["runs.jsonl:2"] and runs[0].details is not None
    err = [x for x in capsys.readouterr().err.splitlines() if "runs.jsonl" in x]
    assert err == ["warning: runs.jsonl:1: left out: the same run(s) as runs.jsonl:2 (arguments and every figure "
                   "equal), which carry the per-request lists (--output-details): fitted once, from those"], err
    Path("both.jsonl").write_text(json.dumps(full) + "\n" + json.dumps(plain) + "\n")   # the lists first: kept
    assert [r.source for r in fit_runs(["both.jsonl"])] == ["both.jsonl:1"]
    assert "both.jsonl:2: left out: the same run(s) as both.jsonl:1 (arguments and every figure equal): fitted once" \
        in capsys.readouterr().err
