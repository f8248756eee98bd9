"""benchmarks/host_levels.py: a host speed level held for part of a run shows in the
extend-levels table; a missing results path is refused with one line."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.conftest import load_benchmark

hl = load_benchmark("host_levels")


def _run(d, spans_ms, tokens):
    d.mkdir(parents=True)
    end = np.cumsum(np.array(spans_ms) + 5.0) / 1e3
    pd.DataFrame({"step": range(len(spans_ms)), "mode": "extend", "part": "main", "batch_size": 1,
                  "num_extend_tokens": tokens, "gpu_start_s": end - np.array(spans_ms) / 1e3,
                  "gpu_end_s": end}).to_parquet(d / "steps.parquet")


def test_a_slow_stretch_shows_in_its_eighths(tmp_path):
    tokens = list(range(600, 680))
    base = [5.0 + t / 1000 for t in tokens]
    _run(tmp_path / "p-rate4-measured", base, tokens)
    _run(tmp_path / "p-rate8-measured", [s * (1.3 if i < 40 else 1.0) for i, s in enumerate(base)], tokens)
    rows = hl.extend_levels(tmp_path, "p")
    assert rows[-1] == "| 8 | 80 | 1.30 1.30 1.30 1.30 1.00 1.00 1.00 1.00 |"


def test_a_missing_results_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert hl.main([str(tmp_path / "nope.tar.gz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.tar.gz" in err[0]
