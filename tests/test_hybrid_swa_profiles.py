"""Analytic profiles of models SGLang serves with a hybrid SWA KV pool (gpt-oss: sliding and
full layers alternate): the profile carries the window and the per-pool KV bytes, and
sim/defaults.py sizes the full and SWA pools from memory as sglang 0.5.23
model_executor/pool_configurator.py ``HybridSWAPoolConfigurator`` does."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from specsched.sim.analytic.models import from_hf_config, load_model, shipped_models

from specsched.cli import main

LAYER = 8 * (64 + 64) * 2  # gpt-oss: 8 KV heads x (head_dim + v_head_dim) x bf16, per layer, TP1


def test_gpt_oss_keeps_its_sliding_layers_in_the_swa_pool():
    """gpt-oss alternates sliding (window 128) and full layers: 12 of 24 (36: 18) in SGLang's
    SWA pool (configs/model_config.py SWA_SINK_ARCHS, get_hybrid_layer_ids)."""
    arch = load_model("gpt-oss-20b")
    assert arch.swa_pool_layers == 12 and arch.sliding_window == 128 and arch.swa_layer_fraction == 0.5
    assert load_model("gpt-oss-120b").swa_pool_layers == 18
    assert load_model("llama-3.1-8b").swa_pool_layers is None


def test_gemma3_and_mistral_keep_one_pool():
    """SGLang turns the hybrid pool off for Gemma 2/3 (model_overrides/gemma2_gemma3.py) and
    has none for an all-sliding Mistral (not in is_hybrid_swa_model's list)."""
    base = {**shipped_models()["llama-3.1-8b"], "num_hidden_layers": 6, "sliding_window": 512}
    gemma = from_hf_config({**base, "architectures": ["Gemma3ForCausalLM"],
                            "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, "g", "c.json")
    mistral = from_hf_config({**base, "architectures": ["MistralForCausalLM"]}, "m", "c.json")
    assert gemma.swa_pool_layers is None and mistral.swa_pool_layers is None
    opt_in = from_hf_config({**base, "is_hybrid_swa": True,
                             "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, "o", "c.json")
    assert opt_in.swa_pool_layers == 5


@pytest.mark.parametrize("patch, key", [
    ({"sliding_window": 0}, "sliding_window"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 11}, "layer_types"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 13}, "layer_types"),
])
def test_bad_window_or_layer_types_length_is_one_line_exit_2(tmp_path, patch, key):
    cfg = {**shipped_models()["gpt-oss-20b"], **patch}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["profile", "--analytic", "--model", str(p), "--gpu", "H200", "--out", str(tmp_path / "o.yaml")])
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and str(p) in lines[0]
    assert not (tmp_path / "o.yaml").exists()
