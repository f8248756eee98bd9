"""repredict_h200 --eager-from-calls: the extend phase's host terms put at the level of a run's
own eager launch calls; the factors are read exactly off the launches and move only the terms
of their group."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import load_benchmark, tiny_profile

rp = load_benchmark("repredict_h200", "rp_eager")
TABLE = {"tokens": [256.0, 1024.0], "seconds": [2e-3, 1e-3]}


def _profile():
    return tiny_profile(launch_s=1e-3, launch_per_extend_s=5e-3, launch_per_extend_token_s=1e-6,
                        launch_per_inject_s=1e-3, launch_per_inject_token_s=1e-7, inject_prepare_s=4e-4,
                        extend_idle_lead_s=1.5e-3, extend_idle_lead_by_tokens=TABLE,
                        inject_idle_lead_by_tokens=TABLE)


def _run(ext_factor: float, inj_factor: float, n: int = 10, prepared: bool = False):
    p = _profile().host
    rows, calls = [], []
    for i in range(n):
        tok = 500 + 10 * i
        rows += [(2 * i, "extend", "main", 1, tok), (2 * i, "extend", "inject", 1, tok), (2 * i + 1, "verify", "main", 4, 0)]
        issue = p.launch_per_extend_s + p.launch_per_extend_token_s * tok
        inj = p.launch_per_inject_s + p.launch_per_inject_token_s * tok - (p.inject_prepare_s if prepared else 0.0)
        calls += [p.launch_s + ext_factor * issue, inj_factor * inj, 2e-3]
    steps = pd.DataFrame(rows, columns=["step", "mode", "part", "batch_size", "num_extend_tokens"])
    return steps, pd.DataFrame({"host_launch_cpu_s": calls})


@pytest.mark.parametrize("prepared", [False, True])
def test_factors_are_the_runs_calls_over_the_simulated_host_time(prepared):
    steps, probe = _run(1.3, 1.6, prepared=prepared)
    fe, fi = rp.eager_call_factors(steps, probe, _profile(), prepared)
    assert fe == pytest.approx(1.3) and fi == pytest.approx(1.6)


def test_too_few_launches_give_no_factor_and_mismatched_tables_are_refused():
    steps, probe = _run(1.3, 1.6, n=5)
    assert rp.eager_call_factors(steps, probe, _profile(), False) == (None, None)
    with pytest.raises(ValueError, match="host_probe.parquet has 2 rows"):
        rp.eager_call_factors(steps, probe.iloc[:2], _profile(), False)


def test_each_factor_moves_its_own_terms_only():
    prof = _profile()
    new = rp.eager_level_profile(prof, 2.0, 3.0)
    a, b = prof.host.model_dump(), new.host.model_dump()
    moved = {k for k in a if a[k] != b[k]}
    assert moved == {"launch_per_extend_s", "launch_per_extend_token_s", "extend_idle_lead_s",
                     "extend_idle_lead_by_tokens", "launch_per_inject_s", "launch_per_inject_token_s",
                     "inject_prepare_s", "inject_idle_lead_by_tokens"}
    assert b["launch_per_extend_s"] == pytest.approx(2 * a["launch_per_extend_s"])
    assert b["extend_idle_lead_by_tokens"]["seconds"] == pytest.approx([4e-3, 2e-3])
    assert b["inject_idle_lead_by_tokens"]["seconds"] == pytest.approx([6e-3, 3e-3])
    assert b["inject_prepare_s"] == pytest.approx(3 * a["inject_prepare_s"])
    assert rp.eager_level_profile(prof, None, None).host.model_dump() == a


def test_needs_the_measured_runs(tmp_path, capsys):
    csv = tmp_path / "v.csv"
    csv.write_text("cell,arm,metric,predicted,measured,error_pct\n")
    assert rp.main([str(csv), "--profile", "h200-1b", "--out", str(tmp_path / "o.csv"), "--eager-from-calls"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "repredict_h200: --eager-from-calls: needs --measured-results (the runs' launch calls)"]
