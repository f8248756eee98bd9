"""calibrate --from weighs a figure by its own run's sampling noise where that is wider than the
metric's: a median that falls on a step of its run's TTFT distribution moves 10-20 % between
reruns (docs/measurements/h100-v49.md), and was fitted as if it moved 6 %."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
from specsched.analysis.calibrate_bench import FitResult, sampling_se
from specsched.sim.bench_serving import read_bench_one

from specsched.cli import main


def _bimodal_line(path, n=40):
    """A bench_serving line (SGLang's keys, with details) whose requests wait 30 ms or 300 ms,
    half each: its median TTFT lies in the gap."""
    ttft = np.array([0.030, 0.300] * (n // 2))
    itls = [[0.005] * 7 for _ in range(n)]
    e2e = ttft + 0.035
    tpot = (e2e - ttft) / 7
    ms = 1e3
    line = {"backend": "sglang", "dataset_name": "random", "request_rate": 5.0, "max_concurrency": None,
            "random_input_len": 64, "random_output_len": 8, "random_range_ratio": 1.0, "num_prompts": n,
            "duration": 8.0, "completed": n, "total_input_tokens": 64 * n, "total_output_tokens": 8 * n,
            "output_throughput": 8 * n / 8.0, "request_throughput": n / 8.0,
            "mean_ttft_ms": float(ttft.mean() * ms), "median_ttft_ms": float(np.median(ttft) * ms),
            "p90_ttft_ms": float(np.percentile(ttft, 90) * ms), "mean_tpot_ms": float(tpot.mean() * ms),
            "median_tpot_ms": float(np.median(tpot) * ms), "median_itl_ms": 5.0, "mean_itl_ms": 5.0,
            "median_e2e_latency_ms": float(np.median(e2e) * ms),
            "input_lens": [64] * n, "output_lens": [8] * n, "ttfts": ttft.tolist(), "itls": itls,
            "generated_texts": [""] * n, "errors": [""] * n}
    path.write_text(json.dumps(line) + "\n")
    return path


def test_a_median_in_a_gap_has_a_wide_sampling_error_and_an_itl_none(tmp_path):
    run = read_bench_one(_bimodal_line(tmp_path / "r.jsonl"))
    got = dict(sampling_se([SimpleNamespace(run=run)], ["median_ttft_ms", "median_itl_ms", "output_throughput"]))
    src = run.source
    assert got[f"{src} median_ttft_ms"] > 0.3          # 30 ms or 300 ms: a factor 10 apart
    assert got[f"{src} median_itl_ms"] == 0.0 and got[f"{src} output_throughput"] == 0.0
    assert list(got) == [f"{src} {m}" for m in ("median_ttft_ms", "median_itl_ms", "output_throughput")]


def test_the_fit_says_which_residuals_it_weighed_by_their_runs_own_noise(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _bimodal_line(tmp_path / "r.jsonl")
    assert main(["calibrate", "--from", "r.jsonl", "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
                 "--max-evals", "2", "--out", "f.yaml"]) == 0
    out = capsys.readouterr().out
    said = next(x for x in out.splitlines() if x.startswith("prior"))
    assert "by their run's own sampling error" in said and "r.jsonl:1 median_ttft_ms" in said
    assert "median_itl_ms 0." not in said.split("sampling error")[1]


def test_the_weighting_text_without_sampled_residuals_is_unchanged():
    r = FitResult({}, None, [], [], 0.0, 0.0, 0, None, None, prior_sd={"decode": 0.07}, noise={"m": 0.01})
    assert r.weighting().endswith("m 0.0100") and "sampling" not in r.weighting()
    assert math.isclose(0.07, r.prior_sd["decode"])
