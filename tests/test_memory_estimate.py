"""The memory estimate before a run (sim/limits.py): it grows with the output tokens, as
measured (benchmarks/run_memory.py), and a long-output trace that may not fit the machine is
warned of; the request count alone is still what refuses a run."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from specsched.sim import limits
from specsched.sim.config import load_scenario

from specsched.cli import main


def _trace(tmp_path, n: int, output_len: int, rate: float = 8.0):
    t = tmp_path / "t.csv"
    t.write_text("timestamp,input_length,output_length\n" + "".join(f"{i / rate:.4f},512,{output_len}\n" for i in range(n)))
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump({"name": "long", "profile": "h200-llama8b-roofline", "seed": 1,
                                 "server": {"speculative_algorithm": "none", "max_total_num_tokens": 800000},
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv"}}}))
    return s


@given(st.integers(1, 10**7), st.integers(0, 10**11), st.integers(1, 10**9))
def test_invariant_the_ceiling_grows_with_the_output_tokens_and_the_floor_does_not(n, tokens, more):
    lo, hi = limits.memory_estimate(n, tokens)
    lo2, hi2 = limits.memory_estimate(n, tokens + more)
    assert lo == lo2 == n * limits.BYTES_PER_REQUEST and hi2 - hi >= more * limits.BYTES_PER_OUTPUT_TOKEN
    assert hi >= lo + tokens * limits.BYTES_PER_OUTPUT_TOKEN


def test_the_estimate_counts_a_long_output_tokens_records_not_1_kb_a_request():
    """1,000 requests of 32K output tokens kept ~1 KB each in the estimate (1 MB in all); one
    decoding at a time they keep one ITL pair a token, measured 15.3 B (500 KB a request)."""
    lo, hi = limits.memory_estimate(1000, 1000 * 32768)
    assert lo == 1000 * limits.BYTES_PER_REQUEST and hi >= 1000 * 32768 * 15.3


def test_a_long_output_trace_that_may_not_fit_is_warned_of_and_still_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(limits, "physical_memory_bytes", lambda: 512 * 2**20)
    long = load_scenario(str(_trace(tmp_path, 40, 32768)))
    (note,) = limits.check_size(long)
    assert note.startswith(f"warning: {long.path}: workload.num_requests") and "1,310,720 output tokens" in note
    assert "512.0 MiB" not in note and "this machine has 0.5 GiB" in note
    assert limits.check_size(load_scenario(str(_trace(tmp_path, 40, 128)))) == []
    assert main(["run", str(_trace(tmp_path, 40, 32768)), "--out", "r", "-q"]) == 0   # a warning, not a refusal
    err = capsys.readouterr().err
    assert err.count("warning: ") >= 1 and "1,310,720 output tokens may need up to" in err
    assert (tmp_path / "r" / "summary.json").exists()


def test_the_request_count_alone_still_refuses(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(limits, "physical_memory_bytes", lambda: 40 * limits.BYTES_PER_REQUEST)
    with pytest.raises(Exception, match="B per request"):
        limits.check_size(load_scenario(str(_trace(tmp_path, 41, 16))))


def test_the_measurement_script_runs(capsys):
    """benchmarks/run_memory.py (the measurement behind the constants) still runs end to end."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "run_memory.py"
    spec = importlib.util.spec_from_file_location("run_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--requests", "10", "20", "--outputs", "16"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[:2] for r in rows] == [["16", "10"], ["16", "20"]] and float(rows[1][2]) > 50   # MiB: a Python process


def test_a_sweeps_runs_at_once_count_together(tmp_path, capsys, monkeypatch):
    """A sweep runs up to --workers points at once, each keeping its own records: two runs
    that fit one at a time but not together were not warned of (the ceiling was one run's)."""
    monkeypatch.chdir(tmp_path)
    s = _trace(tmp_path, 40, 2048)
    one = limits.memory_estimate(40, 40 * 2048)[1]
    monkeypatch.setattr(limits, "physical_memory_bytes", lambda: int(one * 1.5))
    sc = load_scenario(str(s))
    assert limits.check_size(sc) == []
    (note,) = limits.check_size(sc, at_once=2)
    assert "a run, " in note and "for the 2 runs at once (--workers)" in note
    assert main(["sweep", str(s), "--grid", "server.chunked_prefill_size=4096,8192", "--workers", "2",
                 "--out", "w.parquet", "-q"]) == 0
    assert "for the 2 runs at once (--workers)" in capsys.readouterr().err
    assert main(["sweep", str(s), "--grid", "server.chunked_prefill_size=4096,8192", "--workers", "1",
                 "--out", "w1.parquet", "-q"]) == 0
    assert "warning: " not in capsys.readouterr().err
