"""Analytic profiles of models SGLang serves with a hybrid SWA KV pool (gpt-oss: sliding and
full layers alternate): the profile carries the window and the per-pool KV bytes, and
sim/defaults.py sizes the full and SWA pools from memory as sglang 0.5.23
model_executor/pool_configurator.py ``HybridSWAPoolConfigurator`` does."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import from_hf_config, load_model, shipped_models
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import load_scenario
from specsched.sim.defaults import (
    auto_max_running_requests,
    kv_pool_tokens,
    kv_token_bytes,
    mem_fraction_static,
)
from specsched.sim.engine import run_scenario
from specsched.sim.hardware import Hardware

from specsched.cli import main

LAYER = 8 * (64 + 64) * 2  # gpt-oss: 8 KV heads x (head_dim + v_head_dim) x bf16, per layer, TP1


def _write(tmp_path: Path, model: str = "gpt-oss-20b", gpu: str = "H200", tp: int = 1, server: str = "",
           workload: str = "", hardware: dict | None = None) -> Path:
    d = build_profile(load_model(model), load_gpu(gpu), tp)
    d["hardware"].update(hardware or {})
    write_analytic_profile(d, tmp_path / "p.yaml")
    wl = workload or "{kind: burst, num_requests: 4, input_len: {kind: fixed, value: 64}, output_len: {kind: fixed, value: 8}}"
    scn = tmp_path / "s.yaml"
    scn.write_text(f"name: t\nprofile: p.yaml\nserver: {{{server}}}\nworkload: {wl}\n")
    return scn


def test_gpt_oss_keeps_its_sliding_layers_in_the_swa_pool():
    """gpt-oss alternates sliding (window 128) and full layers: 12 of 24 (36: 18) in SGLang's
    SWA pool (configs/model_config.py SWA_SINK_ARCHS, get_hybrid_layer_ids)."""
    arch = load_model("gpt-oss-20b")
    assert arch.swa_pool_layers == 12 and arch.sliding_window == 128 and arch.swa_layer_fraction == 0.5
    assert load_model("gpt-oss-120b").swa_pool_layers == 18
    assert load_model("llama-3.1-8b").swa_pool_layers is None


def test_gpt_oss_20b_profile_splits_the_kv_bytes_between_the_full_and_swa_pools():
    """12 full + 12 windowed layers (layer_types): each pool gets its layers' bytes, and the
    window is the config's 128 (SGLang ModelConfig._get_sliding_window_size)."""
    hw = build_profile(load_model("gpt-oss-20b"), load_gpu("H200"), 1)["hardware"]
    assert hw["kv_cell_bytes"] == 12 * LAYER and hw["swa_kv_cell_bytes"] == 12 * LAYER
    assert hw["sliding_window"] == 128


def test_gpt_oss_on_h200_gets_sglangs_full_and_swa_pools(tmp_path):
    """Full pool = available // (full + 0.8 x SWA bytes), page-aligned; SWA pool =
    int(full x 0.8); the window is set so the run uses the SWA pool. With one pool of every
    layer (what the profile gave before, and what sliding_window_size: null still gives,
    SGLang's --disable-hybrid-swa-memory) the pool is 21.6/24 of that."""
    sc = load_scenario(_write(tmp_path))
    s = sc.server
    assert s.sliding_window_size == 128 and s.swa_full_tokens_ratio == 0.8
    hw = Hardware.model_validate(yaml.safe_load((tmp_path / "p.yaml").read_text())["hardware"])
    mfs = mem_fraction_static(hw, s.chunked_prefill_size, s.max_prefill_tokens, s.cuda_graph_max_bs)
    rest = ((hw.memory_mib - hw.context_mib) * 2**20) * mfs - (hw.weight_bytes - hw.draft_weight_bytes)  # no drafter
    assert s.max_total_num_tokens == int(rest // (12 * LAYER + 0.8 * 12 * LAYER))
    assert s.swa_max_total_num_tokens == int(s.max_total_num_tokens * 0.8)
    one = load_scenario(_write(tmp_path, server="sliding_window_size: null")).server
    assert one.sliding_window_size is None
    assert one.max_total_num_tokens == int(rest // (24 * LAYER))
    assert s.max_total_num_tokens / one.max_total_num_tokens == pytest.approx(24 / 21.6, rel=1e-4)
    # max_running_requests follows the full pool (kv_cache_configurator.py resolve_max_num_reqs)
    assert s.max_running_requests == auto_max_running_requests(s.max_total_num_tokens, 131072)


@settings(max_examples=40, deadline=None)
@given(ratio=st.floats(0.05, 1.0), page=st.sampled_from([1, 16, 64]), full=st.integers(1, 40), swa=st.integers(1, 40))
def test_both_pools_fit_the_memory_and_the_full_pool_is_the_largest_that_does(ratio, page, full, swa):
    """INV: full x full_bytes + swa x swa_bytes <= available bytes, with swa = int(full x
    ratio) page-aligned; one more page of full tokens would not fit at the ratio (SGLang's
    cell size full + ratio x swa)."""
    hw = Hardware(platform="cuda", memory_mib=80 * 1024, weight_bytes=30 * 2**30,
                  kv_cell_bytes=full * LAYER, swa_kv_cell_bytes=swa * LAYER, sliding_window=128)
    mfs = 0.85
    n = kv_pool_tokens(hw, mfs, page, ratio)
    rest = (80 * 1024 - 1024) * 2**20 * mfs - 30 * 2**30
    swa_tokens = int(n * ratio) // page * page
    assert n % page == 0 and n * full * LAYER + swa_tokens * swa * LAYER <= rest
    assert (n + page) * kv_token_bytes(hw, ratio) > rest
    assert kv_pool_tokens(hw, mfs, page, None) <= n  # one pool of every layer holds fewer


def test_a_burst_holds_more_tokens_at_once_with_the_hybrid_pools(tmp_path):
    """11 requests of 900 + 1000 tokens on a GPU whose memory leaves 20,000 tokens of every
    layer: with one pool at most 20,000 are ever held, so the burst waits for room; with the
    hybrid pools the full pool holds 22,222 tokens, the burst holds more than one pool could,
    and the SWA pool keeps only each request's window (far below its 17,777)."""
    hw = Hardware.model_validate(build_profile(load_model("gpt-oss-20b"), load_gpu("H200"), 1)["hardware"])
    mfs = mem_fraction_static(hw, 8192, 16384, 256)  # H200 defaults (chunk 8192, graph 256)
    weights = (hw.memory_mib - hw.context_mib) * 2**20 * mfs - 20_000 * 24 * LAYER
    wl = ("{kind: burst, num_requests: 11, input_len: {kind: fixed, value: 900}, "
          "output_len: {kind: fixed, value: 1000}}")
    one = load_scenario(_write(tmp_path, server="sliding_window_size: null", workload=wl,
                               hardware={"weight_bytes": weights, "draft_weight_bytes": 0}))
    assert one.server.max_total_num_tokens == 20_000
    r1 = run_scenario(one).summary
    both = load_scenario(_write(tmp_path, workload=wl, hardware={"weight_bytes": weights, "draft_weight_bytes": 0}))
    assert both.server.max_total_num_tokens == 22_222 and both.server.swa_max_total_num_tokens == 17_777
    r2 = run_scenario(both).summary
    assert r1["completed"] == r2["completed"] == 11
    assert r1["kv_peak_tokens"] <= 20_000 < r2["kv_peak_tokens"] <= 22_222
    assert r2["swa_peak_tokens"] < r2["kv_peak_tokens"] / 2


def test_a_pure_full_model_profile_is_unchanged():
    """Llama has no window: no SWA keys in the profile, every layer's bytes in one pool."""
    d = build_profile(load_model("llama-3.1-8b"), load_gpu("H200"), 1)
    assert "swa_kv_cell_bytes" not in d["hardware"] and "sliding_window" not in d["hardware"]
    assert "swa_pool_layers" not in d["analytic"]["model"]
    assert d["hardware"]["kv_cell_bytes"] == 32 * 8 * 256 * 2


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


@pytest.mark.parametrize("server, key", [
    ("disaggregation: {prefill: {instances: 1}, decode: {instances: 1}}", "server.disaggregation"),
    ("max_total_num_tokens: 150", "server.swa_full_tokens_ratio"),  # SWA pool 120 <= window + page
])
def test_a_filled_window_the_run_cannot_take_is_one_line_naming_the_scenario(tmp_path, server, key):
    """The window the profile fills must pass the checks a written one passes: one line
    naming the scenario file and the key, exit 2 (it was a pydantic traceback)."""
    scn = _write(tmp_path, server=server)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(scn)])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in lines[0]
    assert str(scn.name) in lines[0] and key in lines[0]
