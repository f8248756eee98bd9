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
