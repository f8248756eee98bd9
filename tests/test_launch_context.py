"""benchmarks/launch_context.py: the launch table is read exactly from a run's steps, passes
and launch calls; a host level that holds for tens of calls and a cost of the loop's context
leave different marks (neighbouring steady calls alike, extends slow with the verifies
around them; or neither); an engine run's calls over the profiler's blocks; the
interleaved GPU reading runs end to end on the CPU; bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT, load_benchmark
from tests.conftest import TINY_SPEC_SCENARIO as SCENARIO

lc = load_benchmark("launch_context")


def _write(d, steps, calls, blocked=None):
    """A measured run: ``steps`` as (mode, part, batch_size, tokens); main launches at their
    schedule pass, each pass 0.1 ms after the previous call's end (plus ``blocked``)."""
    d.mkdir(parents=True)
    n = len(steps)
    blocked = np.zeros(n) if blocked is None else np.asarray(blocked, dtype=float)
    passes, t = [], 0.0
    for (_mode, part, _bs, _tok), c, b in zip(steps, calls, blocked, strict=True):
        if part == "main":
            t += 1e-4 + b
            passes.append(t)
        t += c
    pd.DataFrame({"step": range(n), "mode": [s[0] for s in steps], "part": [s[1] for s in steps],
                  "batch_size": [s[2] for s in steps], "num_extend_tokens": [s[3] for s in steps],
                  "gpu_start_s": 0.0, "gpu_end_s": 0.0, "host_blocked_s": blocked}).to_parquet(d / "steps.parquet")
    pd.DataFrame({"time_s": passes}).to_parquet(d / "timeseries.parquet")
    pd.DataFrame({"host_launch_s": np.asarray(calls, dtype=float)}).to_parquet(d / "host_probe.parquet")


def _pattern(cycles=60, verifies=10):
    """A prefill (extend + injection) then ``verifies`` verifies of batch 4, ``cycles`` times."""
    steps = []
    for _ in range(cycles):
        steps += [("extend", "main", 1, 200), ("extend", "inject", 1, 200)]
        steps += [("verify", "main", 4, 0)] * verifies
    return steps


BASE = {"main": 6e-3, "inject": 1.5e-3, "verify": 1e-3}


def _calls(steps, factor):
    return [BASE["verify" if m == "verify" else p] * f for (m, p, _b, _t), f in zip(steps, factor, strict=True)]


def test_launch_table_reads_starts_positions_and_gaps_exactly(tmp_path):
    steps = [("verify", "main", 4, 0), ("extend", "main", 1, 100), ("extend", "inject", 1, 100),
             ("verify", "main", 5, 0), ("verify", "main", 5, 0)]
    calls = [0.001, 0.006, 0.0015, 0.0012, 0.0011]
    _write(tmp_path / "c-base-measured", steps, calls, blocked=[0, 0.002, 0, 0, 0.0005])
    t = lc.launch_table(tmp_path / "c-base-measured")
    # passes: 0.1 ms; 1.1 + 2.0 + 0.1 ms; then after the injection's end; ...
    assert t.start_s.tolist() == pytest.approx([1e-4, 3.2e-3, 9.2e-3, 1.08e-2, 1.26e-2])
    assert t.before_s.iloc[1:].tolist() == pytest.approx([2.1e-3, 0.0, 1e-4, 6e-4])
    assert t.k.iloc[[1, 3, 4]].tolist() == [0, 1, 2] and np.isnan(t.k.iloc[2])
    assert t.prev_bs.iloc[4] == 5 and t.prev_bs.iloc[3] == 4


def test_a_host_level_makes_neighbours_alike_and_slows_every_kind_together(tmp_path):
    steps = _pattern()
    rng = np.random.default_rng(0)
    # slow stretches of 40 launches at x1.4, every kind of call in them
    slow = ((np.arange(len(steps)) // 40) % 3 == 1)
    factor = np.where(slow, 1.4, 1.0) * np.exp(rng.normal(0, 0.03, len(steps)))
    _write(tmp_path / "c-base-measured", steps, _calls(steps, factor))
    f = lc.run_context(tmp_path / "c-base-measured", window_s=0.02)
    assert f["ac1"] > 0.6 and f["ac5"] > 0.5
    assert f["ext~verify"] > 0.6 and f["inj~ext"] > 0.6


def test_a_cost_of_the_loops_context_leaves_steady_calls_uncorrelated(tmp_path):
    steps = _pattern()
    rng = np.random.default_rng(0)
    factor = np.exp(rng.normal(0, 0.03, len(steps)))
    # the first verify after a prefill pays for what ran before it (x1.4), every time
    first = [i for i in range(1, len(steps)) if steps[i][0] == "verify" and steps[i - 1][1] == "inject"]
    factor[first] *= 1.4
    _write(tmp_path / "c-base-measured", steps, _calls(steps, factor))
    f = lc.run_context(tmp_path / "c-base-measured", window_s=0.02)
    assert abs(f["ac1"]) < 0.25 and abs(f["ac5"]) < 0.25
    assert f["k1"] == pytest.approx(1.4, rel=0.05) and f["k3"] == pytest.approx(1.0, rel=0.05)
    assert abs(f["ext~verify"]) < 0.4


def test_engine_calls_over_the_profilers_blocks_before_and_after():
    t = pd.DataFrame({"mode": ["extend", "extend"] + ["verify"] * 6, "part": ["main", "inject"] + ["main"] * 6,
                      "batch_size": [1, 1, 8, 8, 8, 8, 8, 8], "num_extend_tokens": [300, 300] + [0] * 6,
                      "call_s": [0.0066, 0.0018, 1e-3, 1e-3, 1e-3, 1.2e-3, 1.2e-3, 1.2e-3],
                      "k": [0, np.nan, 1, 2, 3, 4, 5, 6], "prev_bs": [np.nan, np.nan, np.nan, 8, 8, 8, 8, 8]})
    blk = {"batch_sizes": [1, 16], "verify_tight_ms": [0.9, 1.3], "verify_loops_ms": [[0, 0, 1.0, 0], [0, 0, 1.4, 0]],
           "tokens": [100, 500], "extend_issue_ms": [5.0, 6.0], "inject_issue_ms": [1.0, 2.0], "launch_s_ms": 0.5}
    after = dict(blk, verify_tight_ms=[1.1, 1.5], launch_s_ms=0.7)
    r = lc.engine_ratios(t, [blk, after])
    # steady verifies: k >= 4 at batch 8 (1.2 ms); tight loop at 8 = 1.0 + 7/15 * 0.4 ms (mean of the two blocks)
    assert r["verify"] == pytest.approx(1.2 / (1.0 + 7 / 15 * 0.4))
    assert r["verify_loop"] == pytest.approx(1.2 / (1.0 + 7 / 15 * 0.4))
    assert r["extend"] == pytest.approx(6.6 / 5.5)
    assert r["extend_charged"] == pytest.approx(6.6 / 6.1)
    assert r["inject"] == pytest.approx(1.8 / 1.5)


def test_runs_prints_a_row_per_run_and_refuses_an_empty_directory(tmp_path):
    steps = _pattern(cycles=20)
    _write(tmp_path / "r" / "c-base-measured", steps, _calls(steps, np.ones(len(steps))))
    ok = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_context.py"), "runs", str(tmp_path / "r")],
                        capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "c-base" in ok.stdout and "ext~verify" in ok.stdout
    # a run whose files disagree (a probe row short) is named and skipped; the others are read
    _write(tmp_path / "r" / "d-base-measured", steps, _calls(steps, np.ones(len(steps))))
    pd.read_parquet(tmp_path / "r" / "d-base-measured" / "host_probe.parquet").iloc[:-1].to_parquet(
        tmp_path / "r" / "d-base-measured" / "host_probe.parquet")
    mixed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_context.py"), "runs",
                            str(tmp_path / "r")], capture_output=True, text=True, cwd=ROOT)
    assert mixed.returncode == 0 and "c-base" in mixed.stdout and "d-base" not in mixed.stdout
    assert len(mixed.stderr.strip().splitlines()) == 1 and "d-base-measured" in mixed.stderr
    (tmp_path / "e").mkdir()
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_context.py"), "runs", str(tmp_path / "e")],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1




def test_interleave_alternates_the_profiler_and_the_engine_on_cpu(tmp_path):
    pytest.importorskip("torch")
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "new" / "lc.jsonl"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_context.py"), "interleave", "--scenario",
                        str(sc), "--device", "cpu", "--preset", "tiny", "--reps", "1", "--tokens", "16,48",
                        "--batch-sizes", "1,2", "--contexts", "64", "--repeats", "3", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [d["what"] for d in lines] == ["profiler", "engine", "profiler"]
    assert len(lines[0]["verify_tight_ms"]) == 2 and len(lines[0]["verify_loops_ms"]) == 2
    # the CPU has no issue/device split: the extend ratios are unknown (null), the verify's a number
    assert lines[1]["over_profiler"]["extend"] is None and lines[1]["over_profiler"]["verify"] > 0
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "launch_context.py"), "interleave", "--scenario",
                          str(tmp_path / "none.yaml"), "--device", "cpu"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
