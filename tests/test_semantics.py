"""Semantics presets: each rule that differs between SGLang builds is a switch; a preset
names a set of values, and a scenario may override single rules."""

from __future__ import annotations

import pytest
from specsched.sim.semantics import PRESETS, SemanticsRules, resolve_rules


def test_presets_resolve_and_overrides_apply():
    r = resolve_rules("0.5.23")
    assert r.chunk_fill == "exact" and r.ignore_eos_full_reservation and r.retraction_order == "length"
    m = resolve_rules("mi355x-dsv41")
    assert m.chunk_fill == "stop_at_max_prefill_tokens" and not m.filter_finished_before_delay
    o = resolve_rules("mi355x-dsv41", {"chunk_fill": "exact"})
    assert o.chunk_fill == "exact" and o.retraction_order == "spec_batch_tail"
    assert set(PRESETS) >= {"0.5.23", "mi355x-dsv41"}
    assert all(isinstance(p, SemanticsRules) for p in PRESETS.values())


@pytest.mark.parametrize(("preset", "over", "fragment"), [
    ("0.4", None, "allowed: 0.5.23, mi355x-dsv41"),
    ("0.5.23", {"chunk_fil": "exact"}, "unknown rule 'chunk_fil'"),
    ("0.5.23", {"chunk_fill": "greedy"}, "rule chunk_fill"),
])
def test_bad_preset_or_rule_names_what_is_allowed(preset, over, fragment):
    with pytest.raises(ValueError, match=fragment):
        resolve_rules(preset, over)


@pytest.mark.parametrize("value", [0.5, 5, True])
def test_a_preset_that_yaml_reads_as_a_number_names_the_presets(value):
    # `sglang_semantics: 0.5` said only "must be a string", not which presets there are
    from specsched.sim.config import Scenario
    from specsched.sim.errors import ConfigError

    with pytest.raises((ConfigError, ValueError)) as e:
        Scenario.model_validate(dict(name="x", profile="mi355x-dsv41-flash-tp4",
                                     server=dict(sglang_semantics=value)))
    assert "allowed: 0.5.23, mi355x-dsv41" in str(e.value)
