"""A run's saved scenario.yaml runs again from anywhere: the files it names by relative paths
(the profile, a trace, a length histogram, a policy file) are written relative to the results
folder, where the copy sits. They were saved as the original scenario named them, beside the
original scenario, and a rerun from the results folder failed ("trace file does not exist")."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from specsched.cli import main

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def test_a_saved_scenario_with_its_own_trace_and_profile_reruns_from_another_folder(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SCENARIOS / "trace-example-azure.csv", work / "mytrace.csv")
    text = (SCENARIOS / "trace-example.yaml").read_text()
    assert "path: trace-example-azure.csv" in text
    (work / "s.yaml").write_text(text.replace("path: trace-example-azure.csv", "path: mytrace.csv"))
    shutil.copy(SCENARIOS.parent / "profiles" / "h200-llama8b-roofline.yaml", work / "mine.yaml")
    data = yaml.safe_load((work / "s.yaml").read_text())
    data["profile"] = "mine.yaml"
    (work / "s.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["run", str(work / "s.yaml"), "--out", "r", "-q"]) == 0
    saved = elsewhere / "r" / "scenario.yaml"
    got = yaml.safe_load(saved.read_text())
    assert not Path(got["profile"]).is_absolute() and (saved.parent / got["profile"]).resolve() == (work / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["run", str(saved), "--out", "again", "-q"]) == 0, capsys.readouterr().err
    first = yaml.safe_load((elsewhere / "r" / "summary.json").read_text())
    second = yaml.safe_load((tmp_path / "again" / "summary.json").read_text())
    assert first["median_ttft_ms"] == second["median_ttft_ms"] and first["completed"] == second["completed"]
