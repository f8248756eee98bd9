"""benchmarks/ttft_timeline.py: every bad input is one line and exit 2 (no traceback), and
the script needs torch only for --refit-slot-expansion."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, load_benchmark

timeline = load_benchmark("ttft_timeline")


def _refused(capsys, argv: list[str], *needles: str) -> str:
    assert timeline.cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_a_missing_archive_or_directory(tmp_path, capsys):
    _refused(capsys, [str(tmp_path / "nope.tar.xz"), "--profile", "h200-1b"], "nope.tar.xz", "does not exist")


def test_a_corrupt_archive(tmp_path, capsys):
    bad = tmp_path / "results.tar.xz"
    bad.write_bytes(b"not an archive")
    _refused(capsys, [str(bad), "--profile", "h200-1b"], str(bad), "not a readable tar archive")


def test_an_unknown_cell_lists_the_cells(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--cell", "burst67"], "--cell", "burst67", "burst66")


def test_an_unknown_arm_lists_the_arms(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--arms", "stream_wait,nope"], "nope", "stream_wait")


def test_a_run_missing_from_the_results_names_what_is_there(tmp_path, capsys):
    (tmp_path / "burst66-base-measured").mkdir()
    _refused(capsys, [str(tmp_path), "--profile", "h200-1b", "--arms", "both"], "burst66-both-measured",
             "measured runs there: burst66-base")


def test_a_missing_profile(tmp_path, capsys):
    _refused(capsys, [str(tmp_path), "--profile", str(tmp_path / "nope.yaml")], "nope.yaml")


@pytest.mark.parametrize("argv", [["--help"], ["/nonexistent", "--profile", "h200-1b"]])
def test_help_and_bad_input_need_no_torch(argv):
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['ttft_timeline.py', *{argv!r}]; runpy.run_path('benchmarks/ttft_timeline.py', run_name='__main__')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == (0 if argv == ["--help"] else 2), res.stderr
