"""An override that states the acceptance another way replaces the file's.

A scenario gives its acceptance one way: mean_accept_length, per_position_rates or
histogram. A what-if that measures it another way (``--set acceptance.histogram=...``, an
arm, a sweep axis) used to be deep-merged beside the file's source and refused with
"acceptance = '{...}': give only one of ...", a value that named nothing the user wrote."""

from __future__ import annotations

import pytest
import yaml
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.bundled import scenarios_dir
from specsched.sim.config import ConfigError, load_scenario

SCN = scenarios_dir() / "h200" / "batch1.yaml"   # acceptance: mean_accept_length 3.2394


@pytest.mark.parametrize("key,value", [
    ("acceptance.histogram", [0.2, 0.3, 0.5]),
    ("acceptance.per_position_rates", [0.8, 0.6]),
])
def test_set_of_another_acceptance_source_replaces_the_files(key, value):
    sc = load_scenario_with_overrides(SCN, "base", {key: value})
    acc = sc.acceptance
    assert getattr(acc, key.split(".")[1]) == value
    assert acc.mean_accept_length is None
    assert acc.request_spread == pytest.approx(0.2556)   # the file's other keys stay


def test_arm_with_another_acceptance_source_replaces_the_files(tmp_path):
    raw = yaml.safe_load(SCN.read_text())
    raw["arms"] = {"base": {}, "hist": {"acceptance": {"histogram": [0.5, 0.5]}}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw))
    sc = load_scenario(p, "hist")
    assert sc.acceptance.histogram == [0.5, 0.5] and sc.acceptance.mean_accept_length is None


def test_two_sources_in_one_place_name_them(tmp_path):
    raw = yaml.safe_load(SCN.read_text())
    raw["acceptance"]["histogram"] = [0.5, 0.5]
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load_scenario(p, "base")
    msg = str(e.value)
    assert "mean_accept_length" in msg and "histogram" in msg and "{...}" not in msg
