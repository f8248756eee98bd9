"""A run on a profile whose costs are an analytic estimate (a roofline) says so in its
report, so that its figures are not read as a calibrated prediction; measured profiles and
profiles fitted to a server's runs are not flagged."""

from __future__ import annotations

import json

import pytest
from specsched.sim.profile import analytic_costs, load_profile

from specsched.cli import main

ANALYTIC = {"h200-llama8b-roofline", "h100-llama-3.1-8b-eagle3-analytic"}
MEASURED = {"h200-1b", "h200-1b-v2", "mi355x-dsv41-flash-tp4", "mi355x-dsv4pro-agentic", "mi355x-dsv4pro-agentic-pd"}
LINE = "Profile costs:                           analytic estimate, not measured"


@pytest.mark.parametrize("name", sorted(ANALYTIC | MEASURED))
def test_each_shipped_profile_is_analytic_or_measured_by_its_provenance(name):
    assert analytic_costs(load_profile(name)) == (name in ANALYTIC)


def test_a_profile_fitted_to_a_servers_runs_is_not_analytic_any_more():
    """``calibrate --from`` keeps an analytic profile's ``analytic`` block and method and adds
    ``calibrate.from``: its costs are then fitted to measured runs."""
    prof = load_profile("h100-llama-3.1-8b-eagle3-analytic")
    fitted = prof.model_copy(update={"provenance": {**prof.provenance, "calibrate.from": "fitted to runs.jsonl"}})
    assert analytic_costs(prof) and not analytic_costs(fitted)


@pytest.mark.parametrize("profile, flagged", [("h200-llama8b-roofline", True), ("h200-1b", False)])
def test_the_run_report_says_in_one_line_that_analytic_costs_are_not_measured(tmp_path, capsys, profile, flagged):
    """The roofline profile's runs printed the same report as a measured profile's: nothing
    said its figures were estimates. The report (and summary.json) says so for analytic
    profiles only."""
    argv = ["run", "trace-example", "--arm", "first100", "--set", f"profile={profile}", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count(LINE) == (1 if flagged else 0), out
    assert "Profile costs" in out if flagged else "Profile costs" not in out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary.get("profile_costs") == ("analytic" if flagged else None)


@pytest.mark.parametrize("profile, flagged", [("h200-llama8b-roofline", True), ("h200-1b", False)])
def test_compare_and_sweep_say_it_once_for_an_analytic_profile(tmp_path, capsys, profile, flagged):
    """compare and sweep print tables of many runs without the run report: one note line says
    the profile's costs are an analytic estimate (they said nothing)."""
    import yaml

    sc = {"name": "flag", "profile": profile, "server": {"max_running_requests": 4},
          "workload": {"kind": "burst", "num_requests": 6, "input_len": {"kind": "fixed", "value": 40},
                       "output_len": {"kind": "fixed", "value": 12}},
          "arms": {"small": {"server": {"max_running_requests": 2}}}}
    f = tmp_path / "flag.yaml"
    f.write_text(yaml.safe_dump(sc))
    note = f"note: profile {profile}: costs are an analytic estimate"
    assert main(["compare", str(f), "--arms", "base,small", "--seeds", "1", "--no-save"]) == 0
    err = capsys.readouterr().err
    assert err.count(note) == (1 if flagged else 0), err
    assert main(["sweep", str(f), "--grid", "server.max_running_requests=2,4", "--seeds", "1",
                 "--out", str(tmp_path / "sw.parquet"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count(note) == (1 if flagged else 0), err
