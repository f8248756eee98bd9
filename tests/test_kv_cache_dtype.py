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
