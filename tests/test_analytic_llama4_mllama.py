"""Analytic profiles of Llama 4 (interleaved MoE layers, chunked local attention in a hybrid
SWA pool) and Mllama (cross-attention layers), checked against what SGLang 0.5.23 builds.

The configs are tests/data/configs/Llama-4-Scout-17B-16E-Instruct,
Llama-4-Maverick-17B-128E-Instruct and Llama-3.2-11B-Vision-Instruct (README there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import (
    Efficiency,
    Parallel,
    decode_like,
    kv_entries,
    weights_bytes,
)
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import ServerArgs
from specsched.sim.defaults import SWA_FULL_TOKENS_RATIO, resolve_server
from specsched.sim.hardware import Hardware

from specsched.cli import main

CONFIGS = Path(__file__).parent / "data" / "configs"
SCOUT = CONFIGS / "Llama-4-Scout-17B-16E-Instruct" / "config.json"
MAVERICK = CONFIGS / "Llama-4-Maverick-17B-128E-Instruct" / "config.json"
MLLAMA = CONFIGS / "Llama-3.2-11B-Vision-Instruct" / "config.json"

LLAMA4_TEXT_PARAMS_B = {SCOUT: 107.77, MAVERICK: 400.71}
"""The language model's parameters: the model pages' 109B (Scout) and 402B (Maverick) less the
vision tower and projector (~0.85B), which SGLang does not load when serving text (models/
mllama4.py ``has_vision``). Per layer: attention 5120 x (40 + 2 x 8 + 40) x 128; an MoE layer
experts x 3 x 5120 x 8192 plus a shared expert of the same width and a 5120 x experts router;
a dense layer 3 x 5120 x 16384; embedding and LM head 2 x 202048 x 5120."""


def _write(tmp_path: Path, cfg: dict) -> str:
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir(exist_ok=True)
    p.write_text(json.dumps(cfg))
    return str(p)


def _hw(path: Path | str, tp: int = 8) -> Hardware:
    return Hardware.model_validate(build_profile(load_model(str(path)), load_gpu("H200"), tp)["hardware"])


@pytest.mark.parametrize("path", list(LLAMA4_TEXT_PARAMS_B))
def test_llama4_prices_its_interleaved_moe_layers_dense_mlps_and_shared_expert(path):
    """SGLang 0.5.23 models/llama4.py: layer i is MoE when (i + 1) % interleave_moe_layer_step
    == 0 (``Llama4DecoderLayer._is_moe_layer``), a dense layer's MLP is intermediate_size_mlp
    wide, an MoE layer has a shared expert of intermediate_size beside the routed ones
    (``Llama4MoE.shared_expert``). Every layer was priced as MoE without the shared expert:
    Maverick held 185 GiB a rank at TP8 (twice its checkpoint) and was said not to start."""
    arch = load_model(str(path))
    step = 1 if path == SCOUT else 2
    assert (arch.moe_layers, arch.dense_layers) == (48 // step, 48 - 48 // step)
    assert arch.dense_mlp_width == 16384 and (arch.shared_experts, arch.shared_expert_intermediate_size) == (1, 8192)
    assert weights_bytes(arch, Parallel(tp=1)) / 2 / 1e9 == pytest.approx(LLAMA4_TEXT_PARAMS_B[path], rel=2e-3)
    assert weights_bytes(arch, Parallel(tp=8)) < 100 * 2**30   # bf16 Maverick fits eight H200s


@pytest.mark.parametrize("path", list(LLAMA4_TEXT_PARAMS_B))
def test_llama4_keeps_its_local_layers_kv_in_the_swa_pool(path):
    """SGLang 0.5.23 serves Llama4ForConditionalGeneration with a hybrid SWA pool
    (configs/model_config.py ``is_hybrid_swa_model``): layer i global, in the full pool, when
    (i + 1) % 4 == 0, else local, in the SWA pool (``get_hybrid_layer_ids``), the window being
    attention_chunk_size (load_model_utils.py ``resolve_sliding_window_size``). At TP8 a rank
    holds one KV head: 12 x 256 x 2 bytes in the full pool, 36 x 256 x 2 in the SWA pool, and
    the full pool's tokens cost 12 + 0.8 x 36 layers (pool_configurator.py
    ``HybridSWAPoolConfigurator``). One 48-layer pool gave 20 % fewer tokens."""
    hw = _hw(path)
    assert (hw.kv_cell_bytes, hw.swa_kv_cell_bytes, hw.sliding_window) == (12 * 512, 36 * 512, 8192)
    server, _ = resolve_server(ServerArgs(speculative_algorithm="none"), hw, {"speculative_algorithm"})
    one_pool = hw.model_copy(update={"kv_cell_bytes": 48 * 512, "swa_kv_cell_bytes": None, "sliding_window": None})
    single = resolve_server(ServerArgs(speculative_algorithm="none"), one_pool, {"speculative_algorithm"})[0]
    assert server.sliding_window_size == 8192
    ratio = (48 * 512) / (12 * 512 + SWA_FULL_TOKENS_RATIO * 36 * 512)
    assert server.max_total_num_tokens == pytest.approx(single.max_total_num_tokens * ratio, rel=1e-4)


def test_a_llama4_text_only_architecture_keeps_one_pool_and_global_attention(tmp_path):
    """``Llama4ForCausalLM`` is neither a local-attention model nor a hybrid SWA one in SGLang
    0.5.23 (configs/model_config.py ``is_local_attention_model``, ``is_hybrid_swa_model``): one
    pool, every layer global, and a note says the chunk is not applied."""
    cfg = json.loads(SCOUT.read_text())
    text = {**cfg["text_config"], "architectures": ["Llama4ForCausalLM"]}
    arch = load_model(_write(tmp_path, text))
    assert arch.swa_pool_layers is None and arch.sliding_window is None and arch.attention_chunk_size is None
    assert any("attention_chunk_size 8192 not applied" in a for a in arch.assumptions)


@given(keys=st.floats(1, 2**20))
@settings(max_examples=60, deadline=None)
def test_inv_chunked_attention_reads_the_chunk_so_far_never_more_than_a_window(keys):
    """INV-CHUNK: a local layer's query attends the positions of its own chunk
    (layers/attention/local_attention.py): every key up to the chunk, half a chunk on average
    past it; a global layer every key. So a Llama 4 layer reads no more than a sliding window
    of the chunk would, and past the first chunk less."""
    arch = load_model(str(SCOUT))
    windowed = arch.model_copy(update={"attention_chunk_size": None})
    got = kv_entries(arch, keys)
    assert got <= kv_entries(windowed, keys) + 1e-9
    local = keys if keys <= 8192 else 4096
    assert got == pytest.approx(0.75 * local + 0.25 * keys)


def test_maverick_in_an_fp8_checkpoint_builds_a_profile_at_half_the_weights(tmp_path):
    """A compressed-tensors FP8 quantization_config (fp8 weights in every group; the form the
    project reads as SGLang does, models.py ``fp8_checkpoint``) on the Maverick shape: about
    half the bf16 weights a rank, a larger pool, and the same KV split."""
    cfg = json.loads(MAVERICK.read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "float-quantized",
                                  "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                      "type": "float", "num_bits": 8, "strategy": "channel"}}}}
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", _write(tmp_path, cfg), "--gpu", "H200", "--tp", "8",
                 "--out", str(out), "-q"]) == 0
    hw = Hardware.model_validate(yaml.safe_load(out.read_text())["hardware"])
    bf16 = _hw(MAVERICK)
    assert 0.49 < hw.weight_bytes / bf16.weight_bytes < 0.52
    assert (hw.kv_cell_bytes, hw.swa_kv_cell_bytes) == (bf16.kv_cell_bytes, bf16.swa_kv_cell_bytes)
    assert hw.swa_kv_cell_bytes == 36 * 512 and hw.weight_bytes < 50 * 2**30


@pytest.mark.parametrize(("key", "value"), [
    ("attention_chunk_size", 0), ("attention_chunk_size", "8192"), ("attention_chunk_size", -1),
    ("attention_chunk_size", 8192.5), ("attention_chunk_size", True),
    ("interleave_moe_layer_step", "2"), ("interleave_moe_layer_step", -1),
    ("intermediate_size_mlp", 0), ("cross_attention_layers", [3, 3]), ("cross_attention_layers", [48]),
    ("cross_attention_layers", 3),
])
def test_a_bad_llama4_or_mllama_layer_key_is_one_line(tmp_path, capsys, key, value):
    """Bad input names the file, the key, the value and what is allowed, in one line, exit 2,
    and writes no profile."""
    cfg = json.loads(SCOUT.read_text())
    cfg["text_config"][key] = value
    out = tmp_path / "never.yaml"
    assert main(["profile", "--analytic", "--model", _write(tmp_path, cfg), "--gpu", "H200", "--tp", "8",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{key} = " in err[0] and "config.json" in err[0] and not out.exists(), err
    assert "must be" in err[0]


def test_mllama_sizes_every_pool_slot_over_all_its_layers_cross_attention_included():
    """SGLang 0.5.23 has no separate pool for Mllama's encoder KV: the pool's cell spans every
    one of text_config.num_hidden_layers (model_runner_components/layer_setup.py
    ``num_effective_layers``, pool_configurator.py ``_compute_cell_size``), cross-attention
    layers included, and an image's encoder tokens take slots of the same pool beside the
    text's (managers/schedule_batch.py ``prepare_encoder_info_extend``: encoder_out_cache_loc
    and decoder out_cache_loc from one allocation). So a token costs 40 layers' KV:
    40 x 8 heads x (128 + 128) x 2 bytes at TP1."""
    hw = _hw(MLLAMA, tp=1)
    assert hw.kv_cell_bytes == 40 * 8 * 256 * 2 and hw.swa_kv_cell_bytes is None
    assert load_model(str(MLLAMA)).cross_attention_layers == 8


def test_mllama_decode_reads_the_text_context_on_its_self_attention_layers_only(tmp_path):
    """models/mllama.py: the eight cross-attention layers (text_config.cross_attention_layers)
    attend the encoder's tokens, of which a text-only batch has none (``MllamaTextModel.forward``
    skips them when encoder_lens are all 0; a replayed decode graph runs them over 0 keys), so a
    decode's KV read grows with context on 32 of the 40 layers. It was priced on all 40."""
    cfg = json.loads(MLLAMA.read_text())
    arch = load_model(str(MLLAMA))
    cfg["text_config"] = {k: v for k, v in cfg["text_config"].items() if k != "cross_attention_layers"}
    plain = load_model(_write(tmp_path, cfg))
    gpu, par, eff = load_gpu("H200"), Parallel(tp=1), Efficiency()
    grow = {a.cross_attention_layers: decode_like(a, gpu, par, eff, 64, 1, 8192).attention_s
            - decode_like(a, gpu, par, eff, 64, 1, 4096).attention_s for a in (arch, plain)}
    assert grow[8] == pytest.approx(grow[0] * 32 / 40, rel=1e-6)
    assert weights_bytes(arch, par) == weights_bytes(plain, par)   # the cross layers' weights are all loaded
