"""Counts on the benchmark scripts' command lines (runs, workers) are refused below 1 in one
argparse line, exit 2: ``--repeats 0`` measured nothing and ``--jobs 0`` reached the process
pool as a traceback (and ``--jobs -1`` silently ran in one process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("script", "args", "option"), [
    ("measure_sweep.py", ["scenarios/h200/poisson-nospec.yaml", "--rates", "8", "--repeats", "0", "--out", "OUT"],
     "--repeats"),
    ("measure_sweep.py", ["scenarios/h200/poisson-nospec.yaml", "--rates", "8", "--repeats", "-1", "--out", "OUT"],
     "--repeats"),
    ("fit_agentic_profile.py", ["--report-only", "--jobs", "0"], "--jobs"),
    ("fit_agentic_profile.py", ["--report-only", "--jobs", "-3"], "--jobs"),
])
def test_count_below_one_is_refused(tmp_path, script, args, option):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"argument {option}: expected an integer >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("load", [["--concurrencies", "0"], ["--rates", "-4"], ["--rates", "eight"]])
def test_a_bad_load_of_a_sweep_is_one_line_and_nothing_written(tmp_path, load):
    """measure_sweep: a concurrency or rate the scenario refuses, or one that is not a number,
    is one line and exit 2 before any folder is made (it was a ConfigError traceback)."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "measure_sweep.py"),
                           "scenarios/h200/poisson-nospec.yaml", *load, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(("script", "args", "said"), [
    # sim_speed: a min() of no timings (ValueError traceback)
    ("sim_speed.py", ["--targets", "--repeat", "0"], "argument --repeat: expected an integer >= 1"),
    ("sim_speed.py", ["--targets", "--repeat", "-1"], "argument --repeat: expected an integer >= 1"),
    # whatif_sanity: every run failed ("0 of 94 sweeps pass", KeyError), or a misspelt check
    # name checked nothing and passed ("0 of 0 sweeps pass", exit 0)
    ("whatif_sanity.py", ["--seeds", "0"], "argument --seeds: expected an integer >= 1"),
    ("whatif_sanity.py", ["--seeds", "-1"], "argument --seeds: expected an integer >= 1"),
    ("whatif_sanity.py", ["--only", "rate_ttf"], "--only"),
    # fuzz: no time ran no case and exited 0
    ("fuzz.py", ["--minutes", "0"], "argument --minutes: expected a number > 0"),
    ("fuzz.py", ["--minutes", "-1"], "argument --minutes: expected a number > 0"),
    ("fuzz.py", ["--batch", "0"], "argument --batch: expected an integer >= 1"),
    # run_memory: a ZeroDivisionError traceback, or a run failing mid-table
    ("run_memory.py", ["--outputs", "0"], "argument --outputs: expected an integer >= 1"),
    ("run_memory.py", ["--outputs", "-5"], "argument --outputs: expected an integer >= 1"),
    ("run_memory.py", ["--requests", "0", "0"], "argument --requests: expected an integer >= 1"),
    ("run_memory.py", ["--requests", "100", "100"], "--requests"),
    ("run_memory.py", ["--rate", "0"], "argument --rate: expected a number > 0"),
    ("run_memory.py", ["--input-len", "0"], "argument --input-len: expected an integer >= 1"),
    # trace_stream: an empty trace, then a CalledProcessError traceback
    ("trace_stream.py", ["--mb", "0"], "argument --mb: expected a number > 0"),
    ("trace_stream.py", ["--mb", "-1"], "argument --mb: expected a number > 0"),
])
def test_a_benchmark_option_out_of_range_is_one_line(script, args, said):
    """The benchmark scripts the README lists refuse an option no run can use in one argparse
    line, exit 2, before running anything."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"{script}: error:") or "error:" in proc.stderr
