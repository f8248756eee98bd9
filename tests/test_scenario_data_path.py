"""A data file a scenario names (a request trace, an agentic trace, a length histogram) is
found by one rule (sim.bundled.scenario_data_path): as given when it is a file, else beside
the scenario file, else a shipped example by name. Each reader kept its own copy of the rule."""

from __future__ import annotations

import pytest
from specsched.sim.bundled import scenario_data_path, scenarios_dir
from specsched.sim.config import TraceConfig
from specsched.sim.trace import load_trace
from specsched.sim.workload import histogram_lengths

SHIPPED = "sharegpt-like-lengths-output.csv"


def test_as_given_then_beside_the_scenario_then_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "sc" / "s.yaml"
    scenario.parent.mkdir()
    assert scenario_data_path(SHIPPED, scenario) == scenarios_dir() / SHIPPED
    assert scenario_data_path(SHIPPED, None) == scenarios_dir() / SHIPPED
    (scenario.parent / SHIPPED).write_text("length,weight\n7,1\n")
    assert scenario_data_path(SHIPPED, scenario) == scenario.parent / SHIPPED
    (tmp_path / SHIPPED).write_text("length,weight\n5,1\n")
    assert scenario_data_path(SHIPPED, scenario) == tmp_path.joinpath(SHIPPED).relative_to(tmp_path)
    missing = tmp_path / "none" / SHIPPED   # absolute: never looked for elsewhere
    assert scenario_data_path(missing, scenario) == missing
    assert scenario_data_path("none.csv", scenario).name == "none.csv"


def test_every_reader_prefers_the_file_beside_the_scenario(tmp_path):
    scenario = tmp_path / "s.yaml"
    assert set(histogram_lengths(SHIPPED, scenario, "workload.output_len").tolist()) != {7}
    (tmp_path / SHIPPED).write_text("length,weight\n7,1\n")
    assert set(histogram_lengths(SHIPPED, scenario, "workload.output_len").tolist()) == {7}
    shipped = load_trace(TraceConfig(path="trace-example-azure.csv", layout="azure"), scenario_path=scenario)
    (tmp_path / "trace-example-azure.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,11,3\n")
    local = load_trace(TraceConfig(path="trace-example-azure.csv", layout="azure"), scenario_path=scenario)
    assert len(local.input_len) == 1 != len(shipped.input_len)


def test_a_home_relative_path_in_a_scenario_is_the_users_home(tmp_path, monkeypatch):
    """`path: ~/traces/azure.csv` and `profile: ~/profiles/mine.yaml` in a scenario YAML (the
    shell expands ~ on a command line, YAML does not) were looked for as a folder named "~":
    "trace file does not exist", "no such profile file". They are the user's home, as the
    shell would read them."""
    from specsched.sim.bundled import profiles_dir
    from specsched.sim.profile import resolve_profile_path

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "t.csv").write_text("length,weight\n5,1\n")
    (tmp_path / "p.yaml").write_text((profiles_dir() / "h200-1b.yaml").read_text())
    monkeypatch.chdir(tmp_path.parent)
    assert scenario_data_path("~/t.csv", None) == tmp_path / "t.csv"
    assert resolve_profile_path("~/p.yaml") == tmp_path / "p.yaml"


def test_a_profile_named_without_its_suffix_points_at_the_file_beside(tmp_path, monkeypatch):
    """`profile: l70` with l70.yaml in the working folder (or beside the scenario) was refused
    listing the bundled profiles only; a bare name is a bundled profile, so it is still refused,
    but the line names the file that is there and the value to give."""
    from specsched.sim.errors import ConfigError
    from specsched.sim.profile import load_profile

    (tmp_path / "l70.yaml").write_text("name: l70\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_profile("l70", tmp_path / "sub" / "s.yaml")
    assert "profile: l70.yaml" in str(e.value), str(e.value)
    with pytest.raises(ConfigError) as e:
        load_profile("l70", tmp_path / "s.yaml")   # beside the scenario too
    assert "profile: l70.yaml" in str(e.value), str(e.value)
