"""benchmarks/gemm_curve.py's report: each measured GEMM set against the analytic price of the
same GEMM on the GPU the file names (roofline + one kernel gap, default efficiencies)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.roofline import Efficiency

from tests.conftest import load_benchmark

gemm_curve = load_benchmark("gemm_curve")


def _rows(points):
    return pd.DataFrame([{"out_features": o, "in_features": i, "dtype": d, "tokens": m} for o, i, d, m in points])


def test_model_price_is_the_roofline_of_the_larger_roof_plus_one_kernel_gap():
    gpu, eff = load_gpu("H200"), Efficiency()
    rows = _rows([(4096, 4096, "bf16", 1), (28672, 4096, "bf16", 16384), (4096, 4096, "fp8", 16384)])
    got = gemm_curve.model_seconds(rows, "NVIDIA H200").tolist()
    mem_1 = (4096 * 4096 * 2 + 1 * (4096 * 2 + 4096 * 2)) / (gpu.hbm_tbps * 1e12 * eff.hbm)
    flop_big = 2.0 * 16384 * 28672 * 4096 / (gpu.peak_flops("bf16") * eff.matmul)
    flop_fp8 = 2.0 * 16384 * 4096 * 4096 / (gpu.peak_flops("fp8") * eff.matmul)
    assert got == pytest.approx([mem_1 + eff.kernel_gap_s, flop_big + eff.kernel_gap_s, flop_fp8 + eff.kernel_gap_s])
    assert got[2] < got[1] / 6  # fp8 runs at twice the bf16 peak on a 7x smaller GEMM


def test_report_prints_measured_over_model_and_writes_the_plot(tmp_path, capsys):
    price = gemm_curve.model_seconds(_rows([(4096, 4096, "bf16", 64)]), "NVIDIA H200").iloc[0]
    f = tmp_path / "gemm.jsonl"
    line = {"model": "m", "layer": "o", "out_features": 4096, "in_features": 4096, "dtype": "bf16",
            "tokens": 64, "seconds": 1.5 * price, "gpu": "NVIDIA H200"}
    f.write_text(json.dumps(line) + "\n" + json.dumps({**line, "tokens": 128, "seconds": None, "error": "x"}) + "\n")
    assert gemm_curve.report(f, tmp_path / "r.png") == 0
    out = capsys.readouterr().out
    assert "1.5" in out.split("measured / model")[1]
    assert (tmp_path / "r.png").stat().st_size > 0


def test_report_of_a_file_without_timed_points_is_refused(tmp_path, capsys):
    f = tmp_path / "gemm.jsonl"
    f.write_text(json.dumps({"model": "m", "layer": "o", "dtype": "fp8", "tokens": 1, "error": "refused"}) + "\n")
    assert gemm_curve.report(f, None) == 2
    assert "no timed points" in capsys.readouterr().err
