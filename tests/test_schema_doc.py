"""docs/scenario-reference.md is what the models say (regenerate with
``specsched schema --markdown > docs/scenario-reference.md``)."""

from __future__ import annotations

from specsched.sim.config import LengthDist, Scenario
from specsched.sim.schema import keys, render_markdown

from tests.conftest import ROOT


def test_reference_page_is_in_sync_with_the_models():
    page = (ROOT / "docs" / "scenario-reference.md").read_text()
    assert page == render_markdown(), "regenerate: specsched schema --markdown > docs/scenario-reference.md"


def test_every_field_is_listed_with_type_and_default():
    listed = {k.key: k for k in keys()}
    for name in Scenario.model_fields:
        assert name in listed or name in ("arm", "path")
    for section in ("server", "acceptance", "workload"):
        model = Scenario.model_fields[section].annotation
        for name in model.model_fields:
            k = listed[f"{section}.{name}"]
            assert k.type == "section" or (k.type and k.default), k
    for name in LengthDist.model_fields:
        assert f"workload.input_len.{name}" in listed
    assert listed["server.max_running_requests"].sglang == "--max-running-requests"
    assert "dspark" in listed["server.speculative_algorithm"].allowed
    assert listed["server.chunked_prefill_size"].unit == "tokens"


def test_a_profile_path_is_read_from_the_current_directory_before_the_scenario_folder(tmp_path, monkeypatch):
    """What the ``profile`` key's description says: a relative path is looked up from the
    current directory first, then beside the scenario file, then among the bundled names."""
    from specsched.sim.profile import resolve_profile_path

    assert "else from the current directory, else from the scenario file's folder" in \
        Scenario.model_fields["profile"].description
    (tmp_path / "here").mkdir()
    (tmp_path / "sc").mkdir()
    scenario = tmp_path / "sc" / "s.yaml"
    (tmp_path / "sc" / "p.yaml").write_text("x")
    monkeypatch.chdir(tmp_path / "here")
    assert resolve_profile_path("p.yaml", scenario).resolve() == (tmp_path / "sc" / "p.yaml").resolve()
    (tmp_path / "here" / "p.yaml").write_text("x")
    assert resolve_profile_path("p.yaml", scenario).resolve() == (tmp_path / "here" / "p.yaml").resolve()
    assert resolve_profile_path("h200-1b", scenario).name == "h200-1b.yaml"
