"""sglang 0.5.23 fills prefill chunks in raw tokens on gfx95 GPUs (MI350X/MI355X):
managers/schedule_policy.py ``_use_exact_chunk_fill`` is ``SGLANG_EXACT_CHUNK_FILL`` (srt/environ.py,
default on) and ``is_gfx95_supported()``. The simulator picks the rule from the profile's GPU
(sim.defaults.gfx95_exact_chunk_fill) when a scenario under the 0.5.23 preset leaves
``semantics_rules.chunk_fill`` out; other presets and a given rule stay as they are."""

from __future__ import annotations

import pytest
from specsched.sim.config import ServerArgs
from specsched.sim.defaults import resolve_server
from specsched.sim.hardware import Hardware


def _hw(gpu: str, platform: str) -> Hardware:
    return Hardware(platform=platform, gpu=gpu, tp_size=4, memory_mib=294912)


@pytest.mark.parametrize(("gpu", "platform", "want"), [
    ("MI355X", "hip", "exact_tokens"),   # gfx950
    ("MI300X", "hip", "exact"),          # gfx942: _use_exact_chunk_fill is False
    ("H200", "cuda", "exact"),
])
def test_the_0523_preset_fills_chunks_in_raw_tokens_on_gfx95_only(gpu: str, platform: str, want: str) -> None:
    server, filled = resolve_server(ServerArgs(), _hw(gpu, platform), set())
    assert server.rules.chunk_fill == want
    assert any(r.key == "semantics_rules.chunk_fill" for r in filled) == (want == "exact_tokens")


def test_a_given_rule_and_the_reference_builds_preset_are_kept_on_gfx95() -> None:
    given = ServerArgs(semantics_rules={"chunk_fill": "exact"})
    assert resolve_server(given, _hw("MI355X", "hip"), {"semantics_rules"})[0].rules.chunk_fill == "exact"
    ref = ServerArgs(sglang_semantics="mi355x-dsv41")
    assert resolve_server(ref, _hw("MI355X", "hip"), set())[0].rules.chunk_fill == "stop_at_max_prefill_tokens"
    other = ServerArgs(semantics_rules={"retraction_order": "spec_batch_tail"})
    rules = resolve_server(other, _hw("MI355X", "hip"), {"semantics_rules"})[0].rules
    assert rules.chunk_fill == "exact_tokens" and rules.retraction_order == "spec_batch_tail"
