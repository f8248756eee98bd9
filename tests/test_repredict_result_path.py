"""repredict_h200 --result-path-from-runs: the runs' estimate is the loop's whole result path,
so it replaces every host.result_path_* / host.recv_path_* term of the profile (a profile
made with the terms would otherwise charge the path twice)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from tests.conftest import load_benchmark, tiny_profile

rp = load_benchmark("repredict_h200", "rp_result_path")


def _runs(tmp_path, monkeypatch, end_to_pass: list[float]):
    d = tmp_path / "a-measured"
    d.mkdir()
    for name in ("timeseries.parquet", "steps.parquet"):
        (d / name).write_bytes(b"")
    table = pd.DataFrame({"end->pass": end_to_pass, "batch_size": [4] * len(end_to_pass)})
    monkeypatch.setattr(rp, "_sibling", lambda name: SimpleNamespace(idle_launches=lambda run, gap: table))
    return [d]


@pytest.mark.parametrize("part", ["result", "recv"])
def test_the_estimate_replaces_the_whole_path(tmp_path, monkeypatch, part):
    dirs = _runs(tmp_path, monkeypatch, [5e-4, 6e-4, 7e-4])
    p = tiny_profile(sync_wakeup_s=5e-5, process_s=1e-4, schedule_s=5e-5, result_path_s=3e-4,
                     result_path_per_req_s=2e-6, recv_path_s=2e-4, recv_path_per_req_s=1e-6)
    got, _text = rp.result_path_from_runs(p, dirs, part)
    h = got.host
    est = 6e-4 - 5e-5 - 1e-4 - 5e-5
    key = "result_path_s" if part == "result" else "recv_path_s"
    assert getattr(h, key) == pytest.approx(est, rel=1e-12)
    others = [k for k in rp.RESULT_PATH_TERMS if k != key]
    assert [getattr(h, k) for k in others] == [0.0, 0.0, 0.0]


def test_a_part_without_the_estimate_is_refused(tmp_path, capsys):
    csv = tmp_path / "v.csv"
    csv.write_text("cell,arm,metric,predicted,measured,error_pct\n")
    argv = [str(csv), "--profile", "h200-1b", "--out", str(tmp_path / "o.csv"), "--result-path-part", "recv"]
    assert rp.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "repredict_h200: --result-path-part: needs --result-path-from-runs (the estimate it places)"]
