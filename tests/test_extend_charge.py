"""benchmarks/extend_charge.py: an extend-only launch call read against the simulator's charge
(issue + host.launch_s) and its issue alone, raw and at the run's host level; bad input is
one line and exit 2. And repredict_h200's ``--extend-launch none`` what-if: an extend-only
launch loses its ``host.launch_s``, nothing else does."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from specsched.sim.cost_model import CostModel
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.server_args import ServerArgs

from tests.conftest import ROOT, load_benchmark, tiny_profile

ec = load_benchmark("extend_charge")
ISSUE_S, PER_TOKEN_S, LAUNCH_S = 5e-3, 1e-6, 0.5e-3


def _profile(level=0.3e-3):
    p = tiny_profile(launch_s=LAUNCH_S, launch_per_extend_s=ISSUE_S, launch_per_extend_token_s=PER_TOKEN_S,
                     reference_work_s=0.4e-3)
    data = p.model_dump(mode="python")
    data["host"]["reference_work_by_term"] = {"host.launch_per_extend_s": level}
    return type(p).model_validate(data)


def _run(d, calls_of, n=12, tokens=200, ref=0.3e-3):
    """A measured run of ``n`` prefills (extend, injection, two verifies); each extend's call
    is ``calls_of(issue at its tokens)``; the run's reference work ``ref``."""
    d.mkdir(parents=True)
    rows, calls = [], []
    for i in range(n):
        t = tokens + 10 * i
        rows += [("extend", "main", 1, t), ("extend", "inject", 1, t), ("verify", "main", 2, 0), ("verify", "main", 2, 0)]
        calls += [calls_of(ISSUE_S + PER_TOKEN_S * t), 1e-3, 0.9e-3, 0.9e-3]
    pd.DataFrame({"step": range(len(rows)), "mode": [r[0] for r in rows], "part": [r[1] for r in rows],
                  "batch_size": [r[2] for r in rows], "num_extend_tokens": [r[3] for r in rows]}).to_parquet(d / "steps.parquet")
    pd.DataFrame({"host_launch_s": np.asarray(calls)}).to_parquet(d / "host_probe.parquet")
    (d / "summary.json").write_text(json.dumps({"host_speed": {"reference_work_s": ref}}))
    return d


def test_a_call_of_issue_plus_launch_reads_one_charged_and_above_one_on_the_issue(tmp_path):
    run = _run(tmp_path / "a-base-measured", lambda issue: issue + LAUNCH_S)
    row = ec.run_charge(run, _profile())
    assert row["calls"] == 12
    assert row["x_charged"] == pytest.approx(1.0)
    assert row["x_issue"] == pytest.approx(np.median([1 + LAUNCH_S / (ISSUE_S + PER_TOKEN_S * (200 + 10 * i))
                                                      for i in range(12)]))
    assert row["level"] == pytest.approx(1.0)


def test_a_call_of_the_issue_alone_reads_below_one_charged(tmp_path):
    """What a double count looks like: the engine's call holds the issue only."""
    row = ec.run_charge(_run(tmp_path / "a-base-measured", lambda issue: issue), _profile())
    assert row["x_issue"] == pytest.approx(1.0)
    assert row["x_charged"] < 0.93


def test_the_runs_level_divides_the_ratios(tmp_path):
    """A run on a host 1.5x slower than the profile's extend phase (reference work 0.45 against
    0.3 ms) whose calls are 1.5x the charge reads 1.5 raw and 1 at its level."""
    run = _run(tmp_path / "a-base-measured", lambda issue: 1.5 * (issue + LAUNCH_S), ref=0.45e-3)
    row = ec.run_charge(run, _profile(level=0.3e-3))
    assert row["level"] == pytest.approx(1.5)
    assert row["x_charged"] == pytest.approx(1.5)
    assert row["x_charged_lvl"] == pytest.approx(1.0)


def test_few_extends_and_mismatched_files(tmp_path):
    assert ec.run_charge(_run(tmp_path / "a-base-measured", lambda i: i, n=3), _profile()) is None
    bad = _run(tmp_path / "b-base-measured", lambda i: i)
    pd.DataFrame({"host_launch_s": [1e-3]}).to_parquet(bad / "host_probe.parquet")
    with pytest.raises(ValueError, match="host_probe.parquet has 1 rows"):
        ec.run_charge(bad, _profile())


def test_cli_prints_each_set_and_bad_input_is_one_line(tmp_path):
    _run(tmp_path / "r" / "a-base-measured", lambda issue: issue + LAUNCH_S)
    prof = tmp_path / "p.yaml"
    prof.write_text(json.dumps(_profile().model_dump(mode="json", exclude={"path"})))
    ok = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "extend_charge.py"), "--runs", str(tmp_path / "r"),
                         str(prof)], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert "1 runs: x_issue" in ok.stdout and "x_charged 1.000" in ok.stdout
    for args in (["--runs", str(tmp_path / "none"), str(prof)], ["--runs", str(tmp_path / "r"), str(tmp_path / "no.yaml")],
                 ["--runs", str(tmp_path / "r"), str(prof), "--near", "0"],
                 ["--runs", str(tmp_path / "r"), str(prof), "--min-calls", "0"],
                 ["--runs", str(tmp_path / "r"), str(prof), "--csv", str(tmp_path / "no" / "out.csv")]):
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "extend_charge.py"), *args],
                           capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stdout == "" and not (tmp_path / "no").exists()   # refused before any run is read


def _plan(n_ext, n_dec):
    n = n_ext + n_dec
    return BatchPlan(step=0, mode=ForwardMode.EXTEND if not n_dec else ForwardMode.VERIFY, rids=tuple(range(n)),
                     extend_lens=tuple([100] * n_ext + [1] * n_dec), prefix_lens=tuple([0] * n_ext + [500] * n_dec),
                     num_extend=n_ext)


def test_repredict_what_if_drops_the_launch_of_extend_only_launches_only():
    rp = load_benchmark("repredict_h200", "rp_extend_launch")
    cm = CostModel(tiny_profile(launch_s=LAUNCH_S, launch_per_req_s=1e-5),
                   ServerArgs(speculative_algorithm="dspark", speculative_num_draft_tokens=4))
    host = rp.without_extend_launch(CostModel.host)
    ext, ver = _plan(2, 0), _plan(0, 3)
    assert CostModel.host(cm, "launch", ext) == pytest.approx(LAUNCH_S + 2e-5)
    assert host(cm, "launch", ext) == 0.0
    assert host(cm, "launch", ver) == pytest.approx(LAUNCH_S + 3e-5)
    for kind in ("schedule", "process"):
        assert host(cm, kind, ext) == CostModel.host(cm, kind, ext)
