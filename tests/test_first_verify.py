"""benchmarks/first_verify.py: each decode/verify launch call's position after the last
extend, the requests that joined, and its excess over the steady calls of its batch size are
read exactly; bad input is one line and exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import load_benchmark

fv = load_benchmark("first_verify")


def _run(d, launches):
    """``launches``: (mode, part, batch size, call ms) in launch order."""
    d.mkdir(parents=True)
    steps = pd.DataFrame([(i, m, p, bs) for i, (m, p, bs, _) in enumerate(launches)],
                         columns=["step", "mode", "part", "batch_size"])
    steps.to_parquet(d / "steps.parquet")
    pd.DataFrame({"host_launch_s": [c / 1e3 for *_, c in launches]}).to_parquet(d / "host_probe.parquet")


def _launches():
    steady = [("verify", "main", 2, 1.0)] * 6
    prefill = [("extend", "main", 1, 9.0), ("extend", "inject", 1, 2.0)]
    after = [("verify", "main", 3, 1.5), ("verify", "main", 3, 0.7), ("verify", "main", 3, 1.1)]
    after += [("verify", "main", 3, 1.0)] * 5
    return steady + prefill + after


def test_positions_joiners_and_excess_are_read_exactly(tmp_path):
    _run(tmp_path / "c-base-measured", _launches())
    v = fv.launch_excess(tmp_path / "c-base-measured")
    assert list(v["k"])[6:9] == [1, 2, 3]
    first = v[v["k"] == 1].iloc[0]
    assert first["joined"] == 1 and first["excess_ms"] == pytest.approx(0.5)
    assert v[v["k"] == 2]["excess_ms"].iloc[0] == pytest.approx(-0.3)
    assert v[v["k"] == 3]["excess_ms"].iloc[0] == pytest.approx(0.1)
    s = fv.summary(v)
    assert s["k=1"] == "+0.500 (1)" and s["k=1 joined 1"] == "+0.500 (1)" and s["k=1 joined 2"] == "-"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert fv.main([str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    _run(tmp_path / "c-base-measured", _launches())
    pd.DataFrame({"host_launch_s": [0.001]}).to_parquet(tmp_path / "c-base-measured" / "host_probe.parquet")
    assert fv.main([str(tmp_path)]) == 2
    assert "host_probe.parquet has 1 rows" in capsys.readouterr().err


def test_a_table_without_its_columns_is_one_line_and_exit_2(tmp_path, capsys):
    d = tmp_path / "c-base-measured"
    _run(d, _launches())
    pd.DataFrame({"other": [0.001] * len(_launches())}).to_parquet(d / "host_probe.parquet")
    assert fv.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "host_launch_s" in err[0]
    (d / "steps.parquet").write_bytes(b"not parquet")
    assert fv.main([str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
