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


@pytest.mark.filterwarnings("error::UserWarning")  # a file of bf16 points only: no empty fp8 legend
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


@pytest.mark.parametrize("args, says", [
    (["--report", "{tmp}/none.jsonl"], "none.jsonl"),
    (["--report", "{tmp}/bad.jsonl"], "bad.jsonl"),
    (["--report", "{tmp}/gpu.jsonl"], "no shipped GPU"),
    (["--out", "{tmp}/o.jsonl", "--dtypes", "fp16"], "--dtypes"),       # was measured as fp8, labelled fp16
    (["--out", "{tmp}/o.jsonl", "--tokens", "1,x"], "--tokens"),
    (["--out", "{tmp}/o.jsonl", "--tokens", "0"], "--tokens"),
    (["--out", "{tmp}/o.jsonl", "--reps", "0"], "--reps"),
    (["--out", "{tmp}/o.jsonl", "--plot", "{tmp}/p.png"], "--plot"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, says):
    """Bad input is refused before any GPU is looked for: one line naming it, exit 2, no file."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "bad.jsonl").write_text("not json\n")
    (tmp_path / "gpu.jsonl").write_text(json.dumps({"model": "m", "layer": "o", "out_features": 4, "in_features": 4,
                                                   "dtype": "bf16", "tokens": 1, "seconds": 1e-5, "gpu": "Foo"}) + "\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gemm_curve.py"),
                        *[a.format(tmp=tmp_path) for a in args]], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and says in err[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_report_of_timed_points_without_the_layer_shape_is_one_line(tmp_path, capsys):
    f = tmp_path / "g.jsonl"
    f.write_text('{"model": "m", "seconds": 0.001}\n')
    assert gemm_curve.report(f, None) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "without" in err[0] and "out_features" in err[0]


@pytest.mark.filterwarnings("error::UserWarning")  # a file of bf16 points only: no empty fp8 legend
def test_the_report_plot_folder_is_made(tmp_path):
    price = gemm_curve.model_seconds(_rows([(4096, 4096, "bf16", 64)]), "NVIDIA H200").iloc[0]
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps({"model": "m", "layer": "o", "out_features": 4096, "in_features": 4096,
                             "dtype": "bf16", "tokens": 64, "seconds": price, "gpu": "NVIDIA H200"}) + "\n")
    assert gemm_curve.report(f, tmp_path / "new" / "r.png") == 0
    assert (tmp_path / "new" / "r.png").exists()
