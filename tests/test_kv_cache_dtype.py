"""``profile --analytic --kv-cache-dtype``: an fp8 KV cache halves a token's KV bytes.

SGLang 0.5.23 sizes a token's KV as the cache dtype's element size times the layers' KV
heads x (head_dim + v_head_dim), or the MLA latent + rope dims (model_executor/
pool_configurator.py ``_compute_cell_size``: ``torch._utils._element_size(kv_cache_dtype)``).
``--kv-cache-dtype fp8_e4m3`` is the first what-if for long contexts: the pool holds about
twice the tokens and a decode step reads half the KV. Before, an analytic profile always
priced a bf16 cache and had no way to say otherwise.
"""

from __future__ import annotations

import pytest
import yaml

from specsched.cli import main


def _profile(tmp_path, name, *extra):
    out = tmp_path / f"{name}.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "--tp", "1", "-q",
                 "--out", str(out), *extra]) in (0, None)
    return yaml.safe_load(out.read_text())


def _decode_s(p, bs, ctx):
    d = p["gpu"]["decode"]
    return d["seconds"][d["x"].index(float(bs))][d["context_len"].index(float(ctx))]


def test_fp8_kv_halves_the_cell_and_the_long_context_decode_read(tmp_path):
    bf, f8 = _profile(tmp_path, "bf"), _profile(tmp_path, "f8", "--kv-cache-dtype", "fp8_e4m3")
    assert bf["hardware"]["kv_cell_bytes"] == 128 * 1024        # 32 layers x 8 heads x 256 x 2 B
    assert f8["hardware"]["kv_cell_bytes"] == 64 * 1024
    assert f8["hardware"]["weight_bytes"] == bf["hardware"]["weight_bytes"]
    ctx = max(bf["gpu"]["decode"]["context_len"])
    # batch 64 at the longest context: the KV read dominates, and half of it goes
    assert _decode_s(f8, 64, ctx) < 0.8 * _decode_s(bf, 64, ctx)
    # batch 1 at short context: the weights dominate, the step barely moves
    assert _decode_s(f8, 1, 1024) == pytest.approx(_decode_s(bf, 1, 1024), rel=0.05)
    assert f8["analytic"]["model"]["kv_cache_bytes"] == 1


def test_fp8_kv_doubles_the_default_pool(tmp_path, capsys):
    for name, extra in (("bf", ()), ("f8", ("--kv-cache-dtype", "fp8_e5m2"))):
        _profile(tmp_path, name, *extra)
        sc = {"name": name, "profile": str(tmp_path / f"{name}.yaml"),
              "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 64},
                           "output_len": {"kind": "fixed", "value": 4}}}
        (tmp_path / f"s{name}.yaml").write_text(yaml.safe_dump(sc))
        assert main(["run", str(tmp_path / f"s{name}.yaml"), "--out", str(tmp_path / f"o{name}")]) in (0, None)
    out = capsys.readouterr().out
    pools = [int(line.split("=")[1].split()[0]) for line in out.splitlines() if "max_total_num_tokens =" in line]
    assert len(pools) == 2 and pools[1] == pytest.approx(2 * pools[0], rel=0.01)


def test_an_unknown_kv_cache_dtype_is_one_line(tmp_path, capsys):
    assert main(["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "--kv-cache-dtype", "int4",
                 "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--kv-cache-dtype" in err[0] and "fp8_e4m3" in err[0]
    assert not (tmp_path / "x.yaml").exists()


def test_a_hybrid_swa_models_provenance_names_the_cache_dtype():
    """gpt-oss keeps its sliding-window layers in a second pool: its kv_cell_bytes provenance
    said "bf16 KV cache" whatever --kv-cache-dtype gave (the figure itself was fp8's)."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile

    arch = load_model("gpt-oss-20b")
    fp8 = build_profile(arch.model_copy(update={"kv_cache_bytes": 1}), load_gpu("H100"), 1)
    bf16 = build_profile(arch, load_gpu("H100"), 1)
    assert fp8["hardware"]["kv_cell_bytes"] == bf16["hardware"]["kv_cell_bytes"] / 2
    assert "fp8 KV cache" in fp8["provenance"]["hardware.kv_cell_bytes"], fp8["provenance"]["hardware.kv_cell_bytes"]
    assert "bf16 KV cache" in bf16["provenance"]["hardware.kv_cell_bytes"]


def _cfg_profile(tmp_path, capsys, cfg, gpu="H100", tp=1, *extra):
    import json

    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    out = tmp_path / "auto.yaml"
    capsys.readouterr()
    assert main(["profile", "--analytic", "--model", str(p), "--gpu", gpu, "--tp", str(tp), "--out", str(out),
                 *extra]) in (0, None)
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("--kv-cache-dtype auto ->")]
    return yaml.safe_load(out.read_text()), said


def _llama(**quant):
    from specsched.sim.analytic.models import shipped_models

    return {**shipped_models()["llama-3.1-8b"], **({"quantization_config": quant} if quant else {})}


@pytest.mark.parametrize(("quant", "fp8"), [
    ({}, False),
    # NVIDIA ModelOpt FP8 checkpoints (config.json flat format): kv_cache_scheme float/8 bits
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"type": "float", "num_bits": 8}}, True),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": "FP8"}, True),
    ({"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, True),     # no quant_method: the ModelOpt parser
    ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, True),
    ({"quant_method": "fp8", "kv_cache_quant_algo": "fp8"}, True),  # Fp8Config: upper() == "FP8"
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, False),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"type": "float", "num_bits": 4}}, False),
    # compressed-tensors' config class carries no kv_cache_quant_algo: auto keeps the model's dtype
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"type": "float", "num_bits": 8}}, False),
])
def test_auto_follows_the_checkpoints_kv_quantization(tmp_path, capsys, quant, fp8):
    """SGLang 0.5.23 mem_cache/kv_cache_dtype.py ``configure_kv_cache_dtype``: with ``auto``, a
    quantization config whose ``kv_cache_quant_algo`` is FP8 (ModelOpt's ``kv_cache_scheme`` or
    ``kv_cache_quant_algo``, Fp8Config's key) gets an fp8_e4m3 cache. Before, auto was bf16."""
    d, said = _cfg_profile(tmp_path, capsys, _llama(**quant))
    assert d["hardware"]["kv_cell_bytes"] == (64 if fp8 else 128) * 1024
    assert len(said) == 1 and said[0].split(":")[0].endswith("fp8_e4m3" if fp8 else "bf16"), said
    if fp8:
        assert "kv_cache_dtype.py" in said[0] and "fp8_e4m3" in d["provenance"]["model"]


@pytest.mark.parametrize("kv", ["FP8", None])
def test_a_modelopt_checkpoints_hf_quant_config_sets_its_weights_and_kv(tmp_path, capsys, kv):
    """nvidia/Llama-3.1-8B-Instruct-FP8's config.json states no quantization; its ModelOpt
    format is in hf_quant_config.json beside it, which SGLang reads from a local checkpoint
    (configs/model_config.py _parse_quant_hf_config; ModelOptFp8Config.from_config takes its
    kv_cache_quant_algo). Its config.json was priced as a bf16 model with a bf16 cache."""
    import json

    quant = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": kv}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    d, said = _cfg_profile(tmp_path, capsys, _llama())
    assert d["analytic"]["dtype"] == "fp8" and d["hardware"]["weight_bytes"] / 2**30 < 9
    assert d["hardware"]["kv_cell_bytes"] == (64 if kv else 128) * 1024
    assert said[0].split(":")[0].endswith("fp8_e4m3" if kv else "bf16"), said
    assert "hf_quant_config.json" in d["provenance"]["model"]
    # a config.json that states its own quantization keeps it (SGLang reads the file only then)
    d, _ = _cfg_profile(tmp_path, capsys, _llama(quant_method="fp8"))
    assert d["hardware"]["kv_cell_bytes"] == 128 * 1024 and "hf_quant_config" not in d["provenance"]["model"]


@pytest.mark.parametrize(("gpu", "sink", "fp8"), [("B200", False, True), ("RTX5090", False, True),
                                                  ("H200", False, False), ("MI355X", False, False),
                                                  ("B200", True, False)])
def test_auto_for_deepseek_sparse_attention_follows_the_gpu(tmp_path, capsys, gpu, sink, fp8):
    """arg_groups/overrides.py ``_dsa_kv_cache_dtype_default``: a DeepSeek DSA model (V3.2:
    ``index_topk`` in the config) gets fp8_e4m3 from compute capability 10 on, bf16 below (and
    on ROCm's gfx9) or with a learnable sink."""
    from specsched.sim.analytic.models import shipped_models

    cfg = {**shipped_models()["deepseek-v3"], "architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048,
           "index_n_heads": 64, "index_head_dim": 128, **({"learnable_sink": True} if sink else {})}
    d, said = _cfg_profile(tmp_path, capsys, cfg, gpu, 8)
    # the latent at the chosen dtype, plus the indexer's fp8 keys (128 + a 4-byte scale) on every layer
    assert d["hardware"]["kv_cell_bytes"] == (512 + 64) * 61 * (1 if fp8 else 2) + (128 + 4) * 61
    assert "_dsa_kv_cache_dtype_default" in said[0]
    # DeepSeek-V3 itself (no index_topk) keeps bf16 on a B200
    d, said = _cfg_profile(tmp_path, capsys, shipped_models()["deepseek-v3"], "B200", 8)
    assert d["hardware"]["kv_cell_bytes"] == (512 + 64) * 61 * 2 and said[0].split(":")[0].endswith("bf16")


def test_auto_for_deepseek_v4_is_fp8_and_an_explicit_type_wins(tmp_path, capsys):
    """arg_groups/overrides.py ``_deepseek_v4_kv_cache_dtype``: DeepseekV4ForCausalLM's auto is
    fp8_e4m3 on GPUs; ``--kv-cache-dtype bf16`` is taken as given and prints no choice."""
    from specsched.sim.analytic.models import shipped_models

    cfg = shipped_models()["deepseek-v4-flash"]
    auto, said = _cfg_profile(tmp_path, capsys, cfg, "MI355X", 4)
    assert said and "fp8_e4m3" in said[0] and "_deepseek_v4_kv_cache_dtype" in said[0]
    bf, said = _cfg_profile(tmp_path, capsys, cfg, "MI355X", 4, "--kv-cache-dtype", "bf16")
    assert not said and bf["hardware"]["kv_cell_bytes"] == 2 * auto["hardware"]["kv_cell_bytes"]
