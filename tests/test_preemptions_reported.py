"""Priority preemptions are reported beside retractions.

A preempted request (sglang 0.5.23 ``PrefillAdder.preempt_to_schedule``: released, its KV
freed without a cache insert, re-queued) is re-prefilled from scratch, like a retracted one.
The run's summary counted only the decode-side retractions, so a priority scenario printed
"Retractions: 0" while it prefilled more tokens than its prompts held and the requests
table showed re-prefilled requests. The summary now carries ``num_preemptions`` (when there
were any) and the report prints it. The requests table keeps the same split: ``retractions``
and ``preemptions`` per request, where ``retractions`` had counted both.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.workload import make_requests

from specsched.cli import main


def _scenario(tmp_path, workload=None, **server):
    prof = tmp_path / "p.yaml"
    write_analytic_profile(build_profile(load_model("qwen3-0.6b"), load_gpu("H100"), 1), prof)
    sc = {"name": "prio", "profile": str(prof),
          "server": {"enable_priority_scheduling": True, "max_running_requests": 4, **server},
          "workload": {"kind": "poisson", "num_requests": 60, "request_rate": 200.0, "priorities": [0, 100],
                       "input_len": {"kind": "fixed", "value": 256}, "output_len": {"kind": "fixed", "value": 64},
                       **(workload or {})}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_the_summary_counts_preemptions_and_they_account_for_the_re_prefills(tmp_path):
    r = run_scenario(load_scenario(_scenario(tmp_path)), seed=1)
    s, rq, st = r.summary, r.requests, r.steps
    assert s["num_retractions"] == 0
    assert s["num_preemptions"] > 0
    assert int(rq["retractions"].sum()) == 0 and int(rq["preemptions"].sum()) == s["num_preemptions"]
    ext = st[(st["mode"] != "decode") & (st["mode"] != "verify") & (st["part"] == "main")]["num_extend_tokens"].sum()
    assert ext > rq["input_len"].sum()   # the preempted prompts were prefilled again


def test_the_requests_table_splits_retractions_from_preemptions(tmp_path, capsys):
    """requests.parquet's ``retractions`` counted priority preemptions too, while the report
    printed "Retractions" and "Priority preemptions" apart (a priority run: "Retractions: 0"
    beside a column summing to 82). Under a small pool (requests that may stop early admitted
    on the decayed new-token ratio) the run both retracts and preempts: each column sums to
    its own summary count, and a request's row says which happened to it."""
    path = _scenario(tmp_path, {"ignore_eos": False, "output_len": {"kind": "fixed", "value": 256}},
                     max_total_num_tokens=2000)
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--seed", "1"]) in (0, None)
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    rq = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    assert s["num_retractions"] > 0 and s["num_preemptions"] > 0
    assert int(rq["retractions"].sum()) == s["num_retractions"]
    assert int(rq["preemptions"].sum()) == s["num_preemptions"]
    assert f"Retractions: {s['num_retractions']}" in " ".join(out.split())
    assert rq["preemptions"].dtype.kind == "i" and rq["retractions"].dtype.kind == "i"
    # the low-priority class is the one preempted
    assert (rq.loc[rq["preemptions"] > 0, "priority"] == 0).all()


def test_no_preemption_no_key_and_the_report_prints_it(tmp_path, capsys):
    off = run_scenario(load_scenario(_scenario(tmp_path, disable_priority_preemption=True)), seed=1)
    assert "num_preemptions" not in off.summary
    assert main(["run", str(_scenario(tmp_path)), "--out", str(tmp_path / "o")]) in (0, None)
    assert "Priority preemptions:" in capsys.readouterr().out


def test_the_runtime_reports_preemptions_as_the_simulator_does(tmp_path, capsys):
    """``specsched measure`` on the CPU runtime runs the simulator's Scheduler, which
    preempted, but its summary lacked ``num_preemptions``: the measured report printed
    "Retractions: 0" and no preemption line beside a prediction that had one. Four low-priority
    requests fill the running slots; a high-priority one arrives while they decode (600 tokens
    each, over a second on the tiny model) and preempts one, measured and predicted alike."""
    pytest.importorskip("torch")
    (tmp_path / "t.csv").write_text("timestamp,input_length,output_length\n" + "0,64,600\n" * 4 + "0.25,64,20\n")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "prio", "profile": "h200-1b",
        "server": {"enable_priority_scheduling": True, "max_running_requests": 4, "speculative_algorithm": "none"},
        "workload": {"kind": "trace", "trace": {"path": "t.csv"}, "priorities": [0, 100]}}))
    sc = load_scenario(path)
    # the seed whose draw gives the four first requests priority 0 and the last 100
    seed = next(k for k in range(1, 500)
                if [r.priority for r in make_requests(sc.workload, k, sc.path)] == [0, 0, 0, 0, 100])
    assert main(["measure", str(path), "--device", "cpu", "--preset", "tiny", "--seed", str(seed),
                 "--out", str(tmp_path / "m")]) in (0, None)
    out = capsys.readouterr().out
    measured = json.loads((tmp_path / "m" / "summary.json").read_text())
    predicted = run_scenario(sc, seed=seed, warn=False).summary
    assert measured["source"].startswith("runtime:cpu")
    assert measured["num_preemptions"] >= 1 and predicted["num_preemptions"] >= 1
    line = next(x for x in out.splitlines() if x.startswith("Priority preemptions:"))
    assert int(line.split()[-1]) == measured["num_preemptions"]
    rq = pd.read_parquet(tmp_path / "m" / "requests.parquet")
    assert int(rq["retractions"].sum()) == measured["num_retractions"]
    assert int(rq["preemptions"].sum()) == measured["num_preemptions"]


def test_the_requests_table_carries_each_requests_priority_and_routing_key():
    """A priority what-if could not be read per class: the requests table had neither the
    priority nor the routing key the client sent. Both are columns where the workload sends
    them (simulated and measured alike: with_request_labels), absent where it does not."""
    from specsched.sim.engine import SimEngine
    from specsched.sim.workload import make_requests

    from tests.conftest import make_scenario, tiny_profile

    sc = make_scenario({"enable_priority_scheduling": True},
                       {"kind": "poisson", "num_requests": 30, "request_rate": 100.0, "priorities": [0, 100],
                        "routing_keys": ["a", "b", "c"]})
    req = SimEngine(sc, tiny_profile()).run().table("requests").frame().sort_values("rid")
    sent = {s.index: s for s in make_requests(sc.workload, sc.seed, None)}
    assert req["priority"].tolist() == [float(sent[r].priority) for r in req["rid"]]
    assert req["routing_key"].tolist() == [sent[r].routing_key for r in req["rid"]]
    assert set(req["priority"]) == {0.0, 100.0} and set(req["routing_key"]) == {"a", "b", "c"}
    plain = SimEngine(make_scenario(), tiny_profile()).run().table("requests")
    assert "priority" not in plain.columns and "routing_key" not in plain.columns
