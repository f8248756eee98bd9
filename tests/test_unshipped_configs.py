"""``specsched profile --analytic --model path/to/config.json`` with the config.json files of
three models the project does not ship, as their Hugging Face repositories publish them
(every key kept, the ones the parser does not read included): Mistral-7B-v0.1 (a
``sliding_window`` SGLang does not apply), Qwen2-57B-A14B (MoE with one wide shared expert,
``use_sliding_window: false``) and Gemma-2-9B (windowed even layers, embeddings tied
without saying so).

Named invariant INV-CONFIG-PARAMS: the weights the profile prices are the checkpoint's
parameters. Parameter counts as the model cards state them: Mistral-7B-v0.1 7.24B,
Gemma-2-9B 9.24B, Qwen2-57B-A14B 57.4B total and 14B activated per token (Hugging Face
model pages of mistralai/Mistral-7B-v0.1, google/gemma-2-9b, Qwen/Qwen2-57B-A14B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import from_hf_config, load_model
from specsched.sim.analytic.roofline import Parallel, kv_entries, weights_bytes
from specsched.sim.analytic.vision import vision_tower
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import ServerArgs, load_scenario
from specsched.sim.defaults import hardware_of, resolve_server
from specsched.sim.profile import load_profile

from specsched.cli import main

MISTRAL_7B_V01 = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
}

QWEN2_57B_A14B = {
    "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "decoder_sparse_step": 1, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 131072,
    "max_window_layers": 28, "model_type": "qwen2_moe", "moe_intermediate_size": 2560, "norm_topk_prob": False,
    "num_attention_heads": 28, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 20480, "sliding_window": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

GEMMA_2_9B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "sliding_window_size": 4096,
    "torch_dtype": "float32", "transformers_version": "4.42.0.dev0", "use_cache": True, "vocab_size": 256000,
}

PARAMS_B = {"mistral": (MISTRAL_7B_V01, 7.24), "qwen2-moe": (QWEN2_57B_A14B, 57.4), "gemma2": (GEMMA_2_9B, 9.24)}


def _config(tmp_path, cfg: dict, folder: str = "model") -> str:
    d = tmp_path / folder
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    return str(d / "config.json")


@pytest.mark.parametrize("name", list(PARAMS_B))
def test_the_profile_prices_the_checkpoints_parameters(tmp_path, name):
    """INV-CONFIG-PARAMS, within 0.5 % of the model card's count (bf16: 2 bytes each)."""
    cfg, billions = PARAMS_B[name]
    arch = load_model(_config(tmp_path, cfg))
    assert weights_bytes(arch, Parallel(tp=1)) / 2 / 1e9 == pytest.approx(billions, rel=5e-3)


def test_qwen2_moe_reads_its_experts_and_activates_14b_per_token(tmp_path):
    arch = load_model(_config(tmp_path, QWEN2_57B_A14B))
    assert (arch.num_experts, arch.experts_per_token, arch.moe_intermediate_size) == (64, 8, 2560)
    assert arch.shared_expert_intermediate_size == 20480 and arch.sliding_window is None
    # activated: everything but the 56 routed experts a token does not pick, per layer
    unpicked = arch.moe_layers * (arch.num_experts - arch.experts_per_token) * 3 * arch.hidden_size * 2560
    assert (weights_bytes(arch, Parallel(tp=1)) / 2 - unpicked) / 1e9 == pytest.approx(14.2, rel=0.02)


def test_mistral_attends_every_position_as_sglang_builds_it(tmp_path):
    """SGLang 0.5.23 runs MistralForCausalLM as models/llama.py, whose attention has no
    sliding window: the config's ``sliding_window: 4096`` capped the KV read at 4K tokens,
    so decode at 16K context was priced as if it read 4K."""
    arch = load_model(_config(tmp_path, MISTRAL_7B_V01))
    assert arch.sliding_window is None and kv_entries(arch, 16384) == 16384
    assert any("sliding_window 4096 not applied" in a for a in arch.assumptions)


@pytest.mark.parametrize("arch_name, heads, expected", [
    ("MistralForCausalLM", 32, 8), ("MixtralForCausalLM", 32, 8), ("Qwen2ForCausalLM", 32, 32),
    ("GemmaForCausalLM", 16, 16), ("LlamaForCausalLM", 32, 32)])
def test_a_missing_num_key_value_heads_takes_the_config_class_default(tmp_path, arch_name, heads, expected):
    """transformers' MistralConfig/MixtralConfig default ``num_key_value_heads`` to 8,
    Qwen2Config to 32, GemmaConfig to 16, LlamaConfig to the attention heads; SGLang loads the
    config through them. A Mistral-7B config without the key was read as 32 KV heads (4x the
    KV per token); an explicit null is the attention heads in every class."""
    cfg = {k: v for k, v in MISTRAL_7B_V01.items() if k != "num_key_value_heads"}
    cfg.update(architectures=[arch_name], num_attention_heads=heads, head_dim=128)
    assert load_model(_config(tmp_path, cfg)).num_kv_heads == expected
    assert load_model(_config(tmp_path, {**cfg, "num_key_value_heads": None}, "null")).num_kv_heads == heads


def test_a_missing_num_key_value_heads_whose_default_does_not_divide_is_one_line(tmp_path, capsys):
    cfg = {k: v for k, v in MISTRAL_7B_V01.items() if k != "num_key_value_heads"}
    cfg.update(architectures=["Qwen2ForCausalLM"], num_attention_heads=12, hidden_size=1536, head_dim=128)
    assert main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", "H200",
                 "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "num_key_value_heads = 32" in err and "default where the key is missing" in err
    assert len(err.splitlines()) == 1


def test_gemma2_windows_its_even_layers_and_ties_its_embeddings(tmp_path):
    """SGLang's models/gemma2.py computes logits from ``embed_tokens`` (no LM head weights)
    and windows layers 0, 2, 4, ... (21 of 42)."""
    arch = load_model(_config(tmp_path, GEMMA_2_9B))
    assert arch.tie_word_embeddings and arch.sliding_window == 4096
    assert kv_entries(arch, 8192) == pytest.approx(0.5 * 4096 + 0.5 * 8192)
    untied = load_model(_config(tmp_path, {**GEMMA_2_9B, "architectures": ["Gemma2Model"]}, "other"))
    assert weights_bytes(untied, Parallel(tp=1)) - weights_bytes(arch, Parallel(tp=1)) == 2 * 256000 * 3584


@pytest.mark.parametrize(("name", "tp"), [("mistral", 2), ("qwen2-moe", 4), ("gemma2", 2)])
def test_a_config_json_path_makes_a_profile_a_scenario_runs(tmp_path, capsys, name, tp):
    cfg, _ = PARAMS_B[name]
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", "H100", "--tp", str(tp),
                 "--out", str(out), "-q"]) == 0
    prof = load_profile(str(out))
    assert prof.hardware.gpu == "H100" and prof.hardware.tp_size == tp
    assert prof.hardware.architecture == cfg["architectures"][0]
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {out}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 256}}, output_len: {{kind: fixed, value: 8}}}}
""")
    assert main(["run", str(scn), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "Successful requests:                     4" in capsys.readouterr().out


def test_a_tp_that_does_not_split_qwen2_moes_28_heads_is_one_line(tmp_path, capsys):
    out = tmp_path / "never.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, QWEN2_57B_A14B), "--gpu", "H100", "--tp", "8",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tp = 8" in err and "28" in err and not out.exists()


ISSUE_GPUS = ["MI355X", "MI300X", "H100", "H200", "B200", "GB200", "A100-80G", "RTX 5090"]
ISSUE_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-30b-a3b", "deepseek-v3",
                "deepseek-v4-flash"]
"""What the analytic profiles must ship: the GPUs (as a user types them) and the models
(Llama-3.1-8B and 70B, Qwen2.5-7B, Qwen3-0.6B, a Qwen3 MoE, a DeepSeek-V3-class MLA + MoE
model, DeepSeek-V4-Flash)."""

SHIPPED_PARAMS_B = {"llama-3.1-8b": (8.03, None), "llama-3.1-70b": (70.6, None), "qwen2.5-7b": (7.61, None),
                    "qwen3-0.6b": (0.6, None), "qwen3-30b-a3b": (30.5, 3.3), "deepseek-v3": (671.0, 37.0)}
"""Total and activated parameters (billions) as the model cards state them (Hugging Face pages
of meta-llama/Llama-3.1-8B and -70B, Qwen/Qwen2.5-7B, Qwen/Qwen3-0.6B, Qwen/Qwen3-30B-A3B,
deepseek-ai/DeepSeek-V3)."""


def test_the_issues_gpus_and_models_are_shipped_with_their_sources():
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import shipped_models

    for name in ISSUE_GPUS:
        gpu = load_gpu(name)
        assert gpu.source.strip() and gpu.bf16_tflops > 0 and gpu.hbm_tbps > 0 and gpu.memory_mib > 0
    for name in ISSUE_MODELS:
        assert shipped_models()[name]["source"].strip()
        load_model(name)
    assert load_model("deepseek-v3").is_mla and load_model("deepseek-v3").is_moe
    assert load_model("qwen3-30b-a3b").is_moe


@pytest.mark.parametrize("name", list(SHIPPED_PARAMS_B))
def test_shipped_models_price_their_model_cards_parameters(name):
    """INV-CONFIG-PARAMS for the shipped table: total within 1 %, activated (every weight but
    the routed experts a token does not pick) within 3 %."""
    total, active = SHIPPED_PARAMS_B[name]
    arch = load_model(name)
    params = weights_bytes(arch, Parallel(tp=1)) / 2   # bf16 elements, whatever the checkpoint's dtype
    assert params / 1e9 == pytest.approx(total, rel=0.01)
    if active is not None:
        unpicked = arch.moe_layers * (arch.num_experts - arch.experts_per_token) * 3 * arch.hidden_size * arch.moe_intermediate_size
        assert (params - unpicked) / 1e9 == pytest.approx(active, rel=0.03)


def test_the_default_profile_name_holds_no_path_and_tells_configs_apart(tmp_path, monkeypatch):
    """A config.json's ``_name_or_path`` is often a Hub id (``Qwen/Qwen2-1.5B``): its slash put
    the default profile in a folder ``profiles/h200-Qwen/``. Two configs in one folder under
    their own file names were both named after the folder and overwrote each other."""
    monkeypatch.chdir(tmp_path)
    hub = {**MISTRAL_7B_V01, "_name_or_path": "mistralai/Mistral-7B-v0.1"}
    (tmp_path / "hub.json").write_text(json.dumps(hub))
    assert load_model(str(tmp_path / "hub.json")).name == "Mistral-7B-v0.1"
    local = {**MISTRAL_7B_V01, "_name_or_path": "/models/my-mistral/"}
    (tmp_path / "local.json").write_text(json.dumps(local))
    assert load_model(str(tmp_path / "local.json")).name == "my-mistral"
    (tmp_path / "a.json").write_text(json.dumps(MISTRAL_7B_V01))
    (tmp_path / "b.json").write_text(json.dumps(GEMMA_2_9B))
    assert load_model(str(tmp_path / "a.json")).name == "a" and load_model(str(tmp_path / "b.json")).name == "b"
    assert load_model(_config(tmp_path, MISTRAL_7B_V01, "Mistral-7B")).name == "Mistral-7B"
    assert main(["profile", "--analytic", "--model", str(tmp_path / "hub.json"), "--gpu", "H200", "-q"]) == 0
    written = [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "profiles").rglob("*.yaml")]
    assert written == ["profiles/h200-Mistral-7B-v0.1-tp1-bf16-analytic.yaml"]


QWEN3_235B_A22B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
    "max_window_layers": 94, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 1536,
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 94, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_sliding_window": False, "vocab_size": 151936,
}
"""Qwen/Qwen3-235B-A22B's config.json (a GQA model whose head_dim 128 is not hidden / heads = 64)."""


@pytest.mark.parametrize(("change", "key"), [
    ({"first_k_dense_replace": 95}, "first_k_dense_replace = 95"),   # was a 382-error pydantic traceback
    ({"architectures": 4}, "architectures = 4"),                     # was a TypeError traceback
    ({"rope_scaling": {"factor": 1e308}}, "rope_scaling.factor"),    # was an OverflowError traceback
])
def test_a_bad_moe_config_field_is_one_line_not_a_traceback(tmp_path, capsys, change, key):
    out = tmp_path / "never.yaml"
    code = main(["profile", "--analytic", "--model", _config(tmp_path, {**QWEN3_235B_A22B, **change}), "--gpu", "H200",
                 "--tp", "8", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1 and key in err and "config.json" in err


PHI_3_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "bos_token_id": 1, "eos_token_id": 32000,
    "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "pad_token_id": 32000, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32064,
}
"""microsoft/Phi-3-mini-4k-instruct's config.json (3.82B parameters on its model card)."""


@pytest.mark.parametrize(("arch_name", "window"), [
    ("Phi3ForCausalLM", 2047), ("MixtralForCausalLM", 4096), ("Starcoder2ForCausalLM", 4096),
    ("PhiMoEForCausalLM", 2047)])
def test_architectures_sglang_builds_without_a_window_read_every_position(tmp_path, arch_name, window):
    """SGLang 0.5.23 serves Phi-3 through models/llama.py (``Phi3ForCausalLM(LlamaForCausalLM)``)
    and builds Mixtral's, PhiMoE's and Starcoder2's ``RadixAttention`` without
    ``sliding_window_size``: a Phi-3-mini config's ``sliding_window: 2047`` capped the KV read at
    2K tokens, so decode past 2K context cost nothing more."""
    arch = load_model(_config(tmp_path, {**PHI_3_MINI_4K, "architectures": [arch_name], "sliding_window": window}))
    assert arch.sliding_window is None and kv_entries(arch, 8192) == 8192
    assert any(f"sliding_window {window} not applied" in a for a in arch.assumptions)


def test_phi3_minis_profile_prices_its_parameters_and_decode_grows_past_its_config_window(tmp_path):
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, PHI_3_MINI_4K), "--gpu", "H100",
                 "--out", str(out), "-q"]) == 0
    assert weights_bytes(load_model(_config(tmp_path, PHI_3_MINI_4K)), Parallel(tp=1)) / 2 / 1e9 == pytest.approx(
        3.82, rel=5e-3)
    dec = load_profile(str(out)).gpu.decode
    row = dec.seconds[dec.x.index(64.0)]
    at = {c: row[dec.context_len.index(c)] for c in (2048.0, 4096.0, 8192.0)}
    assert at[2048.0] < at[4096.0] < at[8192.0]   # every layer reads the whole KV (was flat from 2047 on)


QWEN2_5_72B = {
    "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 29568,
    "max_position_embeddings": 32768, "max_window_layers": 70, "model_type": "qwen2", "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False,
    "vocab_size": 152064,
}
"""Qwen/Qwen2.5-72B-Instruct's config.json (72.7B parameters on its model card)."""
AWQ = {"bits": 4, "group_size": 128, "modules_to_not_convert": None, "quant_method": "awq", "version": "gemm",
       "zero_point": True}
"""Qwen/Qwen2.5-72B-Instruct-AWQ's quantization_config."""
GPTQ_INT4 = {"bits": 4, "damp_percent": 0.01, "desc_act": False, "group_size": 128, "quant_method": "gptq",
             "static_groups": False, "sym": True, "true_sequential": True}
"""Qwen/Qwen2.5-*-Instruct-GPTQ-Int4's quantization_config."""
CT_FP8 = {"config_groups": {"group_0": {"input_activations": {"dynamic": True, "num_bits": 8, "type": "float"},
                                        "targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "channel",
                                                                           "type": "float"}}},
          "format": "float-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}
"""A compressed-tensors FP8-dynamic checkpoint's quantization_config (the llm-compressor format)."""
MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head"]}
"""An NVIDIA ModelOpt FP8 checkpoint's quantization_config."""


@pytest.mark.parametrize("quant", [AWQ, GPTQ_INT4])
def test_awq_and_gptq_int4_weights_are_priced_at_their_bits(tmp_path, quant):
    """SGLang 0.5.23 stores an AWQ/GPTQ linear as 4-bit values plus a 4-bit zero and a 16-bit
    scale per 128 input rows (awq/schemes/awq_linear.py ``create_weights``); the LM head and
    embeddings stay 16-bit. Priced as bf16 (with a note), Qwen2.5-72B-AWQ held 137 GiB."""
    bf16 = load_model(_config(tmp_path, QWEN2_5_72B, "bf16"))
    arch = load_model(_config(tmp_path, {**QWEN2_5_72B, "quantization_config": quant}, "q"))
    assert arch.weight_format == "int4" and not any("not modelled" in a for a in arch.assumptions)
    embed_head = 2 * bf16.vocab_size * bf16.hidden_size * 2   # bytes, untied
    linears = weights_bytes(bf16, Parallel(tp=1)) - embed_head
    expected = linears / 2 * (4 + 20 / 128) / 8 + embed_head
    assert weights_bytes(arch, Parallel(tp=1, dtype="int4")) == pytest.approx(expected, rel=2e-3)


def test_a_72b_awq_checkpoint_runs_on_one_h100(tmp_path, capsys):
    """The 72B AWQ checkpoint (about 41 GB) fits one 80 GB H100 with a KV pool; priced as bf16
    it was refused ('Not enough memory'). Decode at batch 1 reads about a quarter of the bf16
    bytes, so it is ~3x faster than the bf16 model's (TP1 on an MI300X, where both fit)."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, {**QWEN2_5_72B, "quantization_config": AWQ}),
                 "--gpu", "H100", "--out", str(out), "-q"]) == 0
    assert "not modelled" not in capsys.readouterr().err
    prof = load_profile(str(out))
    assert 36 < prof.hardware.weight_bytes / 2**30 < 41
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {out}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 256}}, output_len: {{kind: fixed, value: 8}}}}
""")
    assert main(["run", str(scn), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    for dtype in ("int4", "bf16"):
        assert main(["profile", "--analytic", "--model", _config(tmp_path, QWEN2_5_72B, "b"), "--gpu", "MI300X",
                     "--dtype", dtype, "--out", str(tmp_path / f"{dtype}.yaml"), "-q"]) == 0
    b1 = {d: load_profile(str(tmp_path / f"{d}.yaml")).gpu.decode.seconds[0][0] for d in ("int4", "bf16")}
    assert 2.5 < b1["bf16"] / b1["int4"] < 4


@pytest.mark.parametrize("quant", [CT_FP8, MODELOPT_FP8, {"quant_method": "fbgemm_fp8"}])
def test_fp8_checkpoints_of_other_formats_default_to_fp8_weights(tmp_path, capsys, quant):
    """ModelOpt FP8, compressed-tensors FP8 and fbgemm FP8 checkpoints were priced as bf16 with
    a 'not modelled' note: Llama-3.1-70B FP8 on two H100s held 66 GiB a rank and was said not
    to start. They now default to --dtype fp8, as a ``quant_method: fp8`` checkpoint does."""
    llama70 = {**QWEN2_5_72B, "architectures": ["LlamaForCausalLM"], "intermediate_size": 28672, "vocab_size": 128256}
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, {**llama70, "quantization_config": quant}),
                 "--gpu", "H100", "--tp", "2", "--out", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    prof = load_profile(str(out))
    assert "not modelled" not in err and "leave no KV pool" not in err
    assert prof.analytic["dtype"] == "fp8" and prof.hardware.weight_bytes / 2**30 < 36


GEMMA_3_27B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False},
}
"""google/gemma-3-27b-it's config.json: its text_config leans on Gemma3TextConfig's defaults
(no vocab_size, no layer_types; the legacy sliding_window_pattern 6 by default)."""


def test_gemma3_fills_its_config_class_defaults_and_keeps_one_global_layer_in_six(tmp_path):
    """transformers 5.19.0's Gemma3TextConfig (SGLang 0.5.23's pin) gives vocab_size 262208 and
    layer_types from sliding_window_pattern 6: layers 5, 11, ... attend globally. The file was
    refused for its missing vocab_size; with the key given, every layer was windowed."""
    arch = load_model(_config(tmp_path, GEMMA_3_27B_IT))
    assert arch.vocab_size == 262_208 and arch.sliding_window == 1024 and arch.tie_word_embeddings
    assert arch.swa_layer_fraction == pytest.approx(52 / 62)   # 10 global layers of 62
    assert kv_entries(arch, 8192) == pytest.approx(52 / 62 * 1024 + 10 / 62 * 8192)
    text = {**GEMMA_3_27B_IT["text_config"], "architectures": ["Gemma3ForCausalLM"], "sliding_window_pattern": 2,
            "vocab_size": 262_208}
    assert load_model(_config(tmp_path, text, "pattern2")).swa_layer_fraction == pytest.approx(0.5)


DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 2048, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2", "moe_intermediate_size": 1408,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 27, "num_key_value_heads": 16, "first_k_dense_replace": 1, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 102400,
}
"""deepseek-ai/DeepSeek-V2-Lite's config.json (the keys the shape needs; 15.7B parameters)."""


def test_an_mla_config_without_its_head_sizes_takes_deepseekv2configs_defaults(tmp_path):
    """A missing ``qk_rope_head_dim`` read as 0: the KV cache priced 512 elements a token a
    layer instead of 576. The defaults are the config class's (v_head_dim 128, not hidden /
    heads), and each is named in the profile's assumptions."""
    full = load_model(_config(tmp_path, DEEPSEEK_V2_LITE, "full"))
    cut = {k: v for k, v in DEEPSEEK_V2_LITE.items() if k not in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    lean = load_model(_config(tmp_path, cut, "lean"))
    assert (lean.qk_rope_head_dim, lean.qk_nope_head_dim, lean.v_head_dim) == (64, 128, 128)
    assert kv_entries(lean, Parallel(tp=1)) == kv_entries(full, Parallel(tp=1))
    assert weights_bytes(lean, Parallel(tp=1)) == weights_bytes(full, Parallel(tp=1))
    assert lean.q_lora_rank is None   # stated null: no query compression, not the class's 1536
    assert any("qk_rope_head_dim 64" in a for a in lean.assumptions)
    assert not any("DeepseekV2Config" in a for a in full.assumptions)


@pytest.mark.parametrize("dropped", ["kv_lora_rank", "moe_intermediate_size", "n_routed_experts"])
def test_a_deepseek_v2_config_without_a_shape_key_takes_deepseekv2configs_default(tmp_path, dropped):
    """DeepseekV2Config (transformers 5.19.0) defaults kv_lora_rank 512, moe_intermediate_size
    1407, n_routed_experts 64. Without ``kv_lora_rank`` the model was priced as multi-head
    attention (KV 216 KiB a token, not 30.4 KiB); without ``moe_intermediate_size`` every
    expert took the dense MLP's 10944 (224.8 GiB of weights); without ``n_routed_experts``
    it was dense. Each default is named in an assumption."""
    full = load_model(_config(tmp_path, DEEPSEEK_V2_LITE, "full"))
    lean = load_model(_config(tmp_path, {k: v for k, v in DEEPSEEK_V2_LITE.items() if k != dropped}, "lean"))
    default = {"kv_lora_rank": 512, "moe_intermediate_size": 1407, "n_routed_experts": 64}[dropped]
    assert any("DeepseekV2Config" in a and f"{dropped} {default}" in a for a in lean.assumptions)
    assert lean.kv_lora_rank == 512 and lean.num_experts == 64 and lean.moe_intermediate_size in (1407, 1408)
    assert kv_entries(lean, Parallel(tp=1)) == kv_entries(full, Parallel(tp=1))
    assert weights_bytes(lean, Parallel(tp=1)) == pytest.approx(weights_bytes(full, Parallel(tp=1)), rel=0.01)


def test_a_deepseek_config_keeps_its_own_expert_count_spelling_and_v3_takes_v3_defaults(tmp_path):
    """``num_experts`` is DeepseekV2Config's other name for n_routed_experts: it is not
    overridden by the class default. A deepseek_v3 config takes DeepseekV3Config's (first
    three layers dense, experts 2048 wide)."""
    cfg = {k: v for k, v in DEEPSEEK_V2_LITE.items() if k != "n_routed_experts"}
    assert load_model(_config(tmp_path, {**cfg, "num_experts": 32}, "alias")).num_experts == 32
    v3 = {k: v for k, v in DEEPSEEK_V2_LITE.items() if k not in ("moe_intermediate_size", "first_k_dense_replace")}
    arch = load_model(_config(tmp_path, {**v3, "model_type": "deepseek_v3"}, "v3"))
    assert (arch.moe_intermediate_size, arch.first_k_dense) == (2048, 3)
    assert any("DeepseekV3Config" in a for a in arch.assumptions)


def test_tie_word_embeddings_given_as_a_string_is_one_line(tmp_path, capsys):
    out = tmp_path / "never.yaml"
    cfg = {**MISTRAL_7B_V01, "tie_word_embeddings": "false"}
    code = main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", "H100", "--tp", "1",
                 "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1 and "tie_word_embeddings" in err


LLAVA_15_7B = {
    "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100, "image_token_index": 32000,
    "model_type": "llava", "pad_token_id": 32001, "projector_hidden_act": "gelu",
    "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
                    "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05,
                    "torch_dtype": "float16", "vocab_size": 32064},
    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.36.0.dev0",
    "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096, "model_type": "clip_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14, "projection_dim": 768,
                      "vocab_size": 32000},
    "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "vocab_size": 32064,
}
"""llava-hf/llava-1.5-7b-hf's config.json: its text_config leans on LlamaConfig's defaults."""


def test_a_llava_text_config_takes_llamaconfigs_defaults(tmp_path):
    """A Vicuna-7B inside: 32 layers of 4096, 32 heads, MLP 11008, its own vocabulary and context;
    the defaults named in an assumption line (it was refused for the missing hidden_size)."""
    arch = load_model(_config(tmp_path, LLAVA_15_7B))
    assert (arch.hidden_size, arch.num_layers, arch.num_heads, arch.num_kv_heads) == (4096, 32, 32, 32)
    assert (arch.intermediate_size, arch.vocab_size, arch.context_len) == (11008, 32064, 4096)
    assert any("LlamaConfig" in a and "hidden_size 4096" in a for a in arch.assumptions)
    assert weights_bytes(arch, Parallel(tp=1)) / 2 / 1e9 == pytest.approx(6.74, rel=0.02)   # Vicuna-7B's LM


def test_the_assumptions_a_config_needed_are_said_on_the_terminal(tmp_path, capsys):
    """A default filled in for a key the config leaves out (LlamaConfig's hidden_size for
    llava-1.5's text_config, DeepseekV2Config's kv_lora_rank) was written into the profile's
    provenance only; the command printed nothing about it."""
    cut = {k: v for k, v in DEEPSEEK_V2_LITE.items() if k != "kv_lora_rank"}
    for cfg, needle in ((LLAVA_15_7B, "hidden_size 4096"), (cut, "kv_lora_rank 512")):
        out = tmp_path / "p.yaml"
        assert main(["profile", "--analytic", "--model", _config(tmp_path, cfg, needle.split()[0]), "--gpu", "H200",
                     "--out", str(out), "-q"]) == 0
        notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: assumed: ")]
        assert len([x for x in notes if needle in x]) == 1, notes   # llava's vision tower has its own line
    assert main(["profile", "--analytic", "--model", _config(tmp_path, DEEPSEEK_V2_LITE, "full"), "--gpu", "H200",
                 "--out", str(tmp_path / "q.yaml"), "-q"]) == 0
    assert "note: assumed:" not in capsys.readouterr().err


def test_gemma3_context_length_takes_no_rope_factor_as_sglang_reads_it():
    """SGLang 0.5.23 get_context_length reads ``config.rope_scaling.get("factor")``; under
    transformers 5.19.0 a Gemma3TextConfig's rope_scaling is its rope_parameters by layer kind,
    with no top-level factor: gemma-3-27b-it is served at 131072 positions, not 8 x that.
    A llama's linear factor still multiplies."""
    arch = from_hf_config(GEMMA_3_27B_IT, "gemma-3-27b-it", "config.json")
    assert arch.context_len == 131_072
    text = {**GEMMA_3_27B_IT["text_config"], "architectures": ["Gemma3ForCausalLM"], "max_position_embeddings": 32768}
    assert from_hf_config(text, "g", "config.json").context_len == 32768
    llama = {**LLAVA_15_7B["text_config"], "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert from_hf_config(llama, "l", "config.json").context_len == 8192


def test_gemma3_names_the_defaults_it_takes():
    """gemma-3-27b-it states no vocab_size and no layer_types; gemma-3-4b-it's text_config no
    heads, head_dim or vocabulary either. Their Gemma3TextConfig defaults were taken unsaid
    (the llama and deepseek defaults are named); now each is in an assumption line."""
    arch = from_hf_config(GEMMA_3_27B_IT, "gemma-3-27b-it", "config.json")
    said = " ".join(arch.assumptions)
    assert "Gemma3TextConfig's defaults: vocab_size 262208" in said and "sliding_window_pattern 6 (the default)" in said
    assert "head_dim" not in said and "num_attention_heads" not in said   # the 27B states them
    four = {**GEMMA_3_27B_IT, "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                                               "model_type": "gemma3_text", "num_hidden_layers": 34,
                                               "sliding_window": 1024}}
    said = " ".join(from_hf_config(four, "gemma-3-4b-it", "config.json").assumptions)
    assert "num_attention_heads 8, num_key_value_heads 4, head_dim 256" in said
    full = {**GEMMA_3_27B_IT["text_config"], "vocab_size": 262_208, "layer_types": ["full_attention"] * 62,
            "architectures": ["Gemma3ForCausalLM"], "max_position_embeddings": 131072}
    assert from_hf_config(full, "g", "config.json").assumptions == []


CONFIGS = Path(__file__).parent / "data" / "configs"
"""Published multimodal config.json files (tests/data/configs/README.md names each source)."""

VLM_PARAMS_B = {
    "Qwen2-VL-7B-Instruct": 8.29, "Qwen2.5-VL-7B-Instruct": 8.29, "Qwen3-VL-8B-Instruct": 8.77,
    "gemma-3-27b-it": 27.43, "Mistral-Small-3.1-24B-Instruct-2503": 24.01, "Llama-3.2-11B-Vision-Instruct": 10.67,
    "InternVL3-8B": 7.94, "llava-1.5-7b-hf": 7.06,
}
"""Each checkpoint's parameters, vision tower included, as its Hugging Face model page counts
the safetensors (tests/data/configs/README.md)."""


def _vlm_profile(name: str, tp: int = 1, gpu: str = "H200") -> dict:
    return build_profile(load_model(str(CONFIGS / name / "config.json")), load_gpu(gpu), tp)


@pytest.mark.parametrize("name", list(VLM_PARAMS_B))
def test_a_vlm_profile_prices_the_whole_checkpoint_vision_tower_included(name):
    """INV-CONFIG-PARAMS for multimodal checkpoints: SGLang loads the vision tower (and
    projector) on every rank beside the language model, so the weights that size the KV pool
    are the checkpoint's, within 0.5 %. Only the language model was priced: 0.32-0.90B
    parameters short (0.7-1.8 GB per rank)."""
    hw = _vlm_profile(name)["hardware"]
    assert (hw["weight_bytes"] - hw["draft_weight_bytes"]) / 2 / 1e9 == pytest.approx(VLM_PARAMS_B[name], rel=5e-3)


def test_the_vision_towers_linears_split_over_the_tp_ranks_and_the_rest_is_whole_on_each():
    """Qwen2.5-VL's encoder and merger are column/row parallel (models/qwen2_5_vl.py): at TP4 a
    rank holds a quarter of them, plus the patch embedding and norms whole. Gemma 3's projector
    is a plain nn.Parameter (gemma3_mm.py), whole on each rank."""
    arch = load_model(str(CONFIGS / "Qwen2.5-VL-7B-Instruct" / "config.json"))
    assert arch.vision_params_replicated < 0.01 * arch.vision_params_sharded
    one, four = (_vlm_profile("Qwen2.5-VL-7B-Instruct", tp)["hardware"] for tp in (1, 4))
    lm = {tp: weights_bytes(arch, Parallel(tp=tp)) for tp in (1, 4)}
    vision1 = one["weight_bytes"] - one["draft_weight_bytes"] - lm[1]
    vision4 = four["weight_bytes"] - four["draft_weight_bytes"] - lm[4]
    assert vision4 == pytest.approx(2 * (arch.vision_params_sharded / 4 + arch.vision_params_replicated))
    assert vision1 / 4 < vision4 < vision1 / 3.9
    gemma = load_model(str(CONFIGS / "gemma-3-27b-it" / "config.json"))
    assert gemma.vision_params_replicated >= 1152 * 5376   # mm_input_projection_weight


@pytest.mark.parametrize("name", ["Qwen2.5-VL-7B-Instruct", "gemma-3-27b-it", "Mistral-Small-3.1-24B-Instruct-2503",
                                  "Llama-3.2-11B-Vision-Instruct", "InternVL3-8B"])
def test_text_only_serving_of_a_vlm_runs_with_the_pool_its_vision_tower_leaves(tmp_path, capsys, name):
    """``profile --analytic`` on the published config, then ``run`` a text-only scenario on it:
    the KV pool SGLang's memory rules give is the one left after the whole checkpoint, smaller
    than the language model alone leaves by the tower's bytes over a token's KV."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", str(CONFIGS / name / "config.json"), "--gpu", "H200",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert any(x.startswith("note: assumed: vision tower (") for x in err.splitlines()), err
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {out}
server: {{speculative_algorithm: none}}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 256}}, output_len: {{kind: fixed, value: 8}}}}
""")
    assert main(["run", str(scn), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "Successful requests:                     4" in capsys.readouterr().out
    hw = hardware_of(load_profile(str(out)))
    arch = load_model(str(CONFIGS / name / "config.json"))
    vision = 2 * (arch.vision_params_sharded + arch.vision_params_replicated)
    server = ServerArgs(speculative_algorithm="none")
    pool = resolve_server(server, hw, {"speculative_algorithm"})[0].max_total_num_tokens
    lm_pool = resolve_server(server, hw.model_copy(update={"weight_bytes": hw.weight_bytes - vision}),
                             {"speculative_algorithm"})[0].max_total_num_tokens
    assert load_scenario(str(scn)).server.max_total_num_tokens == pool   # what run serves with
    assert 0 < pool < lm_pool
    assert lm_pool - pool == pytest.approx(vision / hw.kv_cell_bytes, abs=2)


def test_internvls_llm_config_is_its_language_model():
    """SGLang reads a multimodal config's language model from thinker_config, llm_config,
    language_config or text_config, in that order (get_hf_text_config): InternVL keeps it in
    ``llm_config`` and was refused for a missing hidden_size."""
    arch = load_model(str(CONFIGS / "InternVL3-8B" / "config.json"))
    assert (arch.hidden_size, arch.num_layers, arch.num_kv_heads, arch.vocab_size) == (3584, 28, 4, 151674)
    assert arch.multimodal and arch.vision_layers == 24 and arch.architectures[0] == "InternVLChatModel"


def test_llama4s_vision_model_is_not_loaded_when_serving_text(tmp_path):
    """mllama4.py builds Llama 4's vision model only with --enable-multimodal (SGLang serves it
    text-only by default): no vision bytes, and a note says so. Gemma 3, also text-only by
    default, loads its tower whatever (gemma3_mm.py)."""
    text = {"hidden_size": 5120, "intermediate_size": 8192, "num_attention_heads": 40, "num_hidden_layers": 48,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048, "model_type": "llama4_text"}
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "text_config": text,
           "vision_config": {"hidden_size": 1408, "num_hidden_layers": 34, "intermediate_size": 5632}}
    arch = load_model(_config(tmp_path, cfg))
    assert arch.vision_params_sharded == arch.vision_params_replicated == 0
    assert any("vision_config not loaded" in a and "--enable-multimodal" in a for a in arch.assumptions)
    gemma = load_model(str(CONFIGS / "gemma-3-27b-it" / "config.json"))
    assert not gemma.multimodal and gemma.vision_params_sharded > 0


@pytest.mark.parametrize("missing", [None, "absent"])
def test_a_vlm_config_without_vision_config_says_its_tower_is_not_counted(tmp_path, missing):
    """A Qwen2.5-VL config with no (or a null) vision_config built a profile with no vision
    bytes and no word: SGLang still loads a tower (the class's default vision config), so the
    pool here is sized without it, and an assumption line says so."""
    cfg = json.loads((CONFIGS / "Qwen2.5-VL-7B-Instruct" / "config.json").read_text())
    if missing is None:
        cfg["vision_config"] = None
    else:
        del cfg["vision_config"]
    arch = load_model(_config(tmp_path, cfg))
    assert arch.vision_params_sharded == arch.vision_params_replicated == 0
    notes = [a for a in arch.assumptions if a.startswith("no vision_config")]
    assert len(notes) == 1 and "Qwen2_5_VLForConditionalGeneration" in notes[0], arch.assumptions
    full = load_model(str(CONFIGS / "Qwen2.5-VL-7B-Instruct" / "config.json"))
    assert not any(a.startswith("no vision_config") for a in full.assumptions)


@pytest.mark.parametrize(("change", "key"), [({"depth": "32"}, "vision_config.depth"),
                                              ({"hidden_size": 0}, "vision_config.hidden_size"),
                                              ({"out_hidden_size": -1}, "vision_config.out_hidden_size")])
def test_a_bad_vision_size_is_one_line_naming_it(tmp_path, capsys, change, key):
    cfg = json.loads((CONFIGS / "Qwen2.5-VL-7B-Instruct" / "config.json").read_text())
    cfg["vision_config"] = {**cfg["vision_config"], **change}
    out = tmp_path / "never.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", "H200", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and "config.json" in err[0] and not out.exists(), err


def test_gpt_oss_20bs_published_config_builds_the_shipped_profile(tmp_path):
    """openai/gpt-oss-20b's config.json as published (both expert-count spellings, yarn rope with
    original_max_position_embeddings, attention sinks' arch) gives the shipped entry's profile:
    alternating windowed layers in SGLang's hybrid SWA pool, mxfp4 experts, 131072 positions."""
    mine = build_profile(load_model(str(CONFIGS / "gpt-oss-20b" / "config.json")), load_gpu("H200"), 1)
    shipped = build_profile(load_model("gpt-oss-20b"), load_gpu("H200"), 1)
    assert mine["hardware"] == shipped["hardware"]
    assert mine["hardware"]["swa_kv_cell_bytes"] == mine["hardware"]["kv_cell_bytes"] == 12 * 8 * 128 * 2
    assert mine["hardware"]["context_len"] == 131072 and mine["analytic"]["dtype"] == "mxfp4"
    assert mine["gpu"]["decode"] == shipped["gpu"]["decode"]


def test_olmo3_windows_three_layers_in_four_as_sglangs_olmo3config_derives_them(tmp_path):
    """Olmo-3-7B: layer_types puts the 4096-token window on three layers of four, one KV pool
    (SGLang serves it as Olmo2ForCausalLM with hybrid SWA memory off, model_overrides/olmo2.py).
    A config without the list takes Olmo3Config's default pattern (configs/olmo3.py), where
    every layer was windowed and the global layers' KV read stopped growing at 4096."""
    cfg = json.loads((CONFIGS / "Olmo-3-1025-7B" / "config.json").read_text())
    arch = load_model(_config(tmp_path, cfg, "listed"))
    assert (arch.sliding_window, arch.swa_layer_fraction, arch.swa_pool_layers) == (4096, 0.75, None)
    assert arch.context_len == 65536   # yarn with original_max_position_embeddings: no factor
    assert weights_bytes(arch, Parallel(tp=1)) / 2 / 1e9 == pytest.approx(7.30, rel=5e-3)
    bare = load_model(_config(tmp_path, {k: v for k, v in cfg.items() if k != "layer_types"}, "bare"))
    assert bare.swa_layer_fraction == 0.75 and any("Olmo3Config" in a for a in bare.assumptions)
    assert kv_entries(bare, 16384) == pytest.approx(0.75 * 4096 + 0.25 * 16384)


@pytest.mark.parametrize(("name", "change", "key"), [
    ("Qwen3-Next-80B-A3B-Instruct", {}, "full_attention_interval"),
    ("Qwen3-Next-80B-A3B-Instruct", {"full_attention_interval": None,
                                     "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, "layer_types"),
    ("gemma-3n-E2B-it", {}, "hidden_size_per_layer_input"),
])
def test_layer_designs_the_roofline_does_not_price_are_one_line_naming_the_field(tmp_path, capsys, name, change, key):
    """Qwen3-Next's Gated DeltaNet layers were priced as 48 full-attention layers (96 KiB of KV a
    token, where 12 layers hold KV and 36 a recurrent state in SGLang's mamba pool); Gemma 3n was
    refused for its per-layer intermediate_size list with "must be a non-negative integer".
    Each is now refused in one line naming the key that marks the design; nothing is written."""
    cfg = json.loads((CONFIGS / name / "config.json").read_text())
    if "layer_types" in change:
        change = {**change, "layer_types": change["layer_types"] * (cfg["num_hidden_layers"] // 4)}
    cfg = {k: v for k, v in {**cfg, **change}.items() if v is not None}
    out = tmp_path / "never.yaml"
    assert main(["profile", "--analytic", "--model", _config(tmp_path, cfg), "--gpu", "H200", "--tp", "4",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f": {key} = " in err[0] and "not modelled" in err[0] and not out.exists(), err


def test_sglang_turns_chunked_prefill_off_for_mllama_after_sizing_memory_with_the_chunk(tmp_path):
    """A multimodal model SGLang cannot chunk (configs/model_config.py
    is_multimodal_chunked_prefill_supported: Mllama, LlavaLlamaForCausalLM, ...) gets
    --chunked-prefill-size -1 (arg_groups/model_hook.py _handle_model_capability_adjustments),
    run after handle_gpu_memory_settings sized mem_fraction_static with the default chunk. A
    text-only Llama-3.2-11B-Vision run chunked 8192-token prefills that SGLang runs whole."""
    prof = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", str(CONFIGS / "Llama-3.2-11B-Vision-Instruct" / "config.json"),
                 "--gpu", "H200", "--out", str(prof), "-q"]) == 0
    hw = hardware_of(load_profile(str(prof)))
    server, filled = resolve_server(ServerArgs(speculative_algorithm="none"), hw, {"speculative_algorithm"})
    assert server.chunked_prefill_size == -1
    assert any(r.key == "chunked_prefill_size" and "is_multimodal_chunked_prefill_supported" in r.why for r in filled)
    chunked = resolve_server(ServerArgs(speculative_algorithm="none", chunked_prefill_size=8192),
                             hw, {"speculative_algorithm", "chunked_prefill_size"})[0]
    assert server.max_total_num_tokens == chunked.max_total_num_tokens   # the reserve was sized with the chunk
    qwen = hardware_of(load_profile(str(tmp_path / "q.yaml")) if main(
        ["profile", "--analytic", "--model", str(CONFIGS / "Qwen2.5-VL-7B-Instruct" / "config.json"), "--gpu", "H200",
         "--out", str(tmp_path / "q.yaml"), "-q"]) == 0 else None)
    assert resolve_server(ServerArgs(), qwen, set())[0].chunked_prefill_size == 8192


@given(depth=st.integers(1, 64), hidden=st.integers(16, 4096), inter=st.integers(16, 16384),
       out=st.integers(16, 8192), tp=st.sampled_from([1, 2, 4, 8]))
@settings(max_examples=60, deadline=None)
def test_inv_vision_tp_a_rank_holds_its_share_of_the_split_linears_and_all_the_rest(depth, hidden, inter, out, tp):
    """INV-VISION-TP: a rank's vision bytes are bf16 x (split / tp + whole): the whole tower at
    TP1, never less than 1/tp of it, and no more at a larger TP."""
    cfg = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "hidden_size": 1024, "intermediate_size": 4096,
           "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 1000,
           "vision_config": {"depth": depth, "hidden_size": hidden, "intermediate_size": inter, "out_hidden_size": out}}
    arch = from_hf_config(cfg, "v", "config.json")
    tower = vision_tower(cfg, "Qwen2_5_VLForConditionalGeneration", 1024, "config.json")[0]
    assert (arch.vision_params_sharded, arch.vision_params_replicated) == (tower.sharded, tower.replicated)
    assert tower.bytes_per_rank(1) == 2 * tower.params
    assert 2 * tower.params / tp <= tower.bytes_per_rank(tp) <= tower.bytes_per_rank(max(1, tp // 2))


_VIT_KEYS = ("hidden_size", "num_hidden_layers", "intermediate_size", "patch_size", "image_size")
_CLASS_DEFAULTS = {   # transformers' vision config classes, as CLIP_VISION_DEFAULTS / SIGLIP_VISION_DEFAULTS
    "clip_vision_model": dict(zip(_VIT_KEYS, (768, 12, 3072, 32, 224), strict=True)),
    "siglip_vision_model": dict(zip(_VIT_KEYS, (768, 12, 3072, 16, 224), strict=True)),
}


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(_CLASS_DEFAULTS)), left_out=st.sets(st.sampled_from(_VIT_KEYS)))
def test_a_vision_config_leaving_out_sizes_counts_its_config_class_defaults(kind, left_out):
    """INV-VISION-DEFAULTS: a config.json written by ``save_pretrained`` leaves out the
    vision_config keys at their class's default (a SigLIP-B/16 at 224 is
    ``{"model_type": "siglip_vision_model"}``), which transformers fills back in before SGLang
    builds the tower: the count equals the one with them stated. They were counted at a
    ViT-L/14 at 336 (1024 wide, 24 layers): over three times the tower."""
    cfg = json.loads((CONFIGS / "llava-1.5-7b-hf" / "config.json").read_text())
    stated = {**cfg, "vision_config": {"model_type": kind, **_CLASS_DEFAULTS[kind]}}
    missing = {**cfg, "vision_config": {k: v for k, v in stated["vision_config"].items() if k not in left_out}}
    arch = "LlavaForConditionalGeneration"
    assert vision_tower(missing, arch, 4096, "c.json")[0] == vision_tower(stated, arch, 4096, "c.json")[0]


def test_a_mistral3_vision_config_without_model_type_is_pixtral():
    """Mistral3Config reads a vision_config without ``model_type`` as ``pixtral`` (LlavaConfig
    as ``clip_vision_model``): it was counted as a CLIP ViT."""
    cfg = json.loads((CONFIGS / "Mistral-Small-3.1-24B-Instruct-2503" / "config.json").read_text())
    bare = {**cfg, "vision_config": {k: v for k, v in cfg["vision_config"].items() if k != "model_type"}}
    arch = "Mistral3ForConditionalGeneration"
    assert vision_tower(bare, arch, 5120, "c.json")[0] == vision_tower(cfg, arch, 5120, "c.json")[0]


GLM4_9B_CHAT = {   # THUDM/glm-4-9b-chat config.json (trust_remote_code ChatGLM layout), shape keys
    "architectures": ["ChatGLMModel"], "model_type": "chatglm", "add_bias_linear": False, "add_qkv_bias": True,
    "ffn_hidden_size": 13696, "hidden_size": 4096, "kv_channels": 128, "multi_query_attention": True,
    "multi_query_group_num": 2, "num_attention_heads": 32, "num_layers": 40, "padded_vocab_size": 151552,
    "seq_length": 131072, "torch_dtype": "bfloat16"}


def test_a_chatglm_config_reads_as_sglangs_chatglmconfig_reads_it(tmp_path):
    """GLM-4-9B-chat (and ChatGLM2/3) publish a ChatGLM layout: num_layers, padded_vocab_size,
    ffn_hidden_size, kv_channels, multi_query_group_num. SGLang reads them through its own
    configs/chatglm.py ChatGLMConfig (attribute_map num_hidden_layers -> num_layers; vocab_size =
    padded_vocab_size) and configs/model_config.py get_total_num_kv_heads
    (multi_query_group_num); the profile refused the file for a missing num_hidden_layers.
    The weights are the model card's 9.4B parameters."""
    import json

    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.roofline import Parallel, weights_bytes

    p = tmp_path / "config.json"
    p.write_text(json.dumps(GLM4_9B_CHAT))
    a = load_model(str(p))
    assert (a.num_layers, a.vocab_size, a.num_kv_heads, a.head_dim) == (40, 151552, 2, 128)
    assert a.context_len == 131072
    params = weights_bytes(a, Parallel(tp=1, dtype="bf16")) / 2
    assert params == pytest.approx(9.40e9, rel=0.01)
