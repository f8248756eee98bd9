"""Outputs of one token: TPOT and ITL as bench_serving writes them.

SGLang 0.5.23 benchmark/serving.py ``calculate_metrics`` collects a TPOT only for outputs of
more than one token and writes ``np.mean(tpots or 0) * 1000`` (likewise median, std, p90-p99,
and every ITL statistic over ``itls or 0``): a run whose every output is one token reports
0.0, and its result block prints "Mean TPOT (ms): 0.00". specsched wrote null and printed
n/a, so a dashboard reading bench_serving.jsonl as numbers broke on a prefill-only scenario.
summary.json keeps NaN (no TPOT exists); only the bench_serving record follows bench_serving.
"""

from __future__ import annotations

import json
import math

import yaml
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile

from specsched.cli import main


def _run(tmp_path, out_len, capsys):
    prof = tmp_path / "p.yaml"
    write_analytic_profile(build_profile(load_model("qwen3-0.6b"), load_gpu("RTX5090"), 1), prof)
    sc = {"name": "one-token", "profile": str(prof),
          "workload": {"kind": "poisson", "num_requests": 20, "request_rate": 10.0,
                       "input_len": {"kind": "fixed", "value": 128}, "output_len": {"kind": "fixed", "value": out_len}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    out = tmp_path / f"o{out_len}"
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(out)]) in (0, None)
    text = capsys.readouterr().out
    return json.loads((out / "bench_serving.jsonl").read_text()), json.loads((out / "summary.json").read_text()), text


def test_one_token_outputs_write_zero_tpot_and_itl_as_bench_serving(tmp_path, capsys):
    rec, summ, text = _run(tmp_path, 1, capsys)
    for k in ("mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "std_tpot_ms", "mean_itl_ms", "p95_itl_ms", "max_itl_ms"):
        assert rec[k] == 0.0, k
    assert rec["completed"] == 20 and rec["mean_ttft_ms"] > 0
    assert summ["mean_tpot_ms"] is None or math.isnan(summ["mean_tpot_ms"])   # the summary keeps "none"
    assert "Mean TPOT (ms):                          0.00" in text


def test_longer_outputs_are_unchanged(tmp_path, capsys):
    rec, summ, _ = _run(tmp_path, 8, capsys)
    assert rec["mean_tpot_ms"] == summ["mean_tpot_ms"] > 0
