"""Priority preemptions are reported beside retractions.

A preempted request (sglang 0.5.23 ``PrefillAdder.preempt_to_schedule``: released, its KV
freed without a cache insert, re-queued) is re-prefilled from scratch, like a retracted one.
The run's summary counted only the decode-side retractions, so a priority scenario printed
"Retractions: 0" while it prefilled more tokens than its prompts held and the requests
table showed re-prefilled requests. The summary now carries ``num_preemptions`` (when there
were any) and the report prints it.
"""

from __future__ import annotations

import yaml
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario

from specsched.cli import main


def _scenario(tmp_path, **server):
    prof = tmp_path / "p.yaml"
    write_analytic_profile(build_profile(load_model("qwen3-0.6b"), load_gpu("H100"), 1), prof)
    sc = {"name": "prio", "profile": str(prof),
          "server": {"enable_priority_scheduling": True, "max_running_requests": 4, **server},
          "workload": {"kind": "poisson", "num_requests": 60, "request_rate": 200.0, "priorities": [0, 100],
                       "input_len": {"kind": "fixed", "value": 256}, "output_len": {"kind": "fixed", "value": 64}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_the_summary_counts_preemptions_and_they_account_for_the_re_prefills(tmp_path):
    r = run_scenario(load_scenario(_scenario(tmp_path)), seed=1)
    s, rq, st = r.summary, r.requests, r.steps
    assert s["num_retractions"] == 0
    assert s["num_preemptions"] > 0
    assert int(rq["retractions"].sum()) == s["num_preemptions"] + s["num_retractions"]
    ext = st[(st["mode"] != "decode") & (st["mode"] != "verify") & (st["part"] == "main")]["num_extend_tokens"].sum()
    assert ext > rq["input_len"].sum()   # the preempted prompts were prefilled again


def test_no_preemption_no_key_and_the_report_prints_it(tmp_path, capsys):
    off = run_scenario(load_scenario(_scenario(tmp_path, disable_priority_preemption=True)), seed=1)
    assert "num_preemptions" not in off.summary
    assert main(["run", str(_scenario(tmp_path)), "--out", str(tmp_path / "o")]) in (0, None)
    assert "Priority preemptions:" in capsys.readouterr().out
