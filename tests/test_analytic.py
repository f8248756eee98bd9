"""Analytic profiles: shapes, roofline physics, the writer and `specsched profile --analytic`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import gpu_table, load_gpu
from specsched.sim.analytic.models import load_model, shipped_models
from specsched.sim.analytic.roofline import (
    Efficiency,
    Parallel,
    decode_like,
    extend,
    kernel_count,
    kv_cell_bytes,
    weights_bytes,
)
from specsched.sim.analytic.writer import build_profile, regenerate
from specsched.sim.errors import ConfigError
from specsched.sim.profile import Profile, load_profile

from specsched.cli import main

EFF = Efficiency()
L8 = load_model("llama-3.1-8b")
H200 = load_gpu("H200")


@pytest.mark.parametrize("model", sorted(shipped_models()))
def test_every_shipped_model_gives_a_valid_profile_on_every_gpu(model):
    arch = load_model(model)
    tp = 8 if arch.num_heads % 8 == 0 and arch.num_heads >= 64 else 1
    for gpu in gpu_table().values():
        p = Profile.model_validate(build_profile(arch, gpu, tp))
        assert p.hardware is not None and p.hardware.weight_bytes > 0 and p.hardware.kv_cell_bytes > 0
        assert p.analytic["efficiency"] == EFF.model_dump()
        assert all(k in p.provenance for k in ("model", "gpu", "gpu.decode", "analytic.efficiency.hbm"))


def test_shapes_match_their_configs():
    assert round(weights_bytes(L8, Parallel()) / 2) == 8_030_261_248  # Llama-3.1-8B parameter count
    assert kv_cell_bytes(L8, 1) == 131_072
    assert kv_cell_bytes(L8, 8) == 131_072 / 8
    assert kv_cell_bytes(L8, 16) == 131_072 / 8  # 8 KV heads replicate beyond TP 8
    v3 = load_model("deepseek-v3")
    assert kv_cell_bytes(v3, 8) == (512 + 64) * 61 * 2  # MLA latent, replicated on every rank
    assert 640e9 < weights_bytes(v3, Parallel(dtype="fp8")) < 700e9  # 671B parameters in fp8


def test_batch_one_decode_is_the_weight_read():
    """Batch 1, no context: the forward is the weight read at the achieved bandwidth plus
    the graph launch and one gap per kernel; nothing else is large."""
    c = decode_like(L8, H200, Parallel(), EFF, 1, 1, 0)
    read = weights_bytes(L8, Parallel()) - 2 * L8.vocab_size * L8.hidden_size  # the embedding is gathered, not read
    weights_s = read / (H200.hbm_tbps * 1e12 * EFF.hbm)
    assert c.overhead_s == pytest.approx(EFF.graph_launch_s + kernel_count(L8, EFF) * EFF.kernel_gap_s)
    assert weights_s * 0.99 < c.graph_s - c.overhead_s < weights_s * 1.15


def test_long_prefill_is_the_matmul_compute():
    tokens = 32768
    c = extend(L8, H200, Parallel(), EFF, tokens, 1.0)
    flops = 2 * tokens * (weights_bytes(L8, Parallel()) / 2 - L8.vocab_size * L8.hidden_size * 2)
    assert c.linear_s == pytest.approx(flops / (H200.bf16_tflops * 1e12 * EFF.matmul), rel=0.02)


def test_attention_is_quadratic_in_extend_tokens():
    a = extend(L8, H200, Parallel(), EFF, 8192, 4096).attention_s
    b = extend(L8, H200, Parallel(), EFF, 16384, 8192).attention_s
    assert b == pytest.approx(4 * a, rel=0.05)


def test_moe_reads_only_the_experts_it_routes_to():
    moe = load_model("qwen3-30b-a3b")
    one = decode_like(moe, H200, Parallel(), EFF, 1, 1, 0).experts_s
    full = decode_like(moe, H200, Parallel(), EFF, 512, 1, 0).experts_s
    assert full > 8 * one  # 8 of 128 experts at batch 1, nearly all at batch 512


def test_tp_splits_weights_and_adds_all_reduce():
    l70 = load_model("llama-3.1-70b")
    t1 = decode_like(l70, H200, Parallel(tp=1), EFF, 8, 1, 1024)
    t8 = decode_like(l70, H200, Parallel(tp=8), EFF, 8, 1, 1024)
    assert t8.linear_s < t1.linear_s / 6 and t8.allreduce_s > 0 == t1.allreduce_s


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 1023), c=st.integers(0, 100_000), db=st.integers(1, 200), dc=st.integers(1, 10_000))
def test_decode_time_grows_with_batch_and_context(b, c, db, dc):
    """Invariant: more requests or more context never makes a forward faster."""
    t = decode_like(L8, H200, Parallel(), EFF, b, 1, c).graph_s
    assert decode_like(L8, H200, Parallel(), EFF, b + db, 1, c).graph_s >= t
    assert decode_like(L8, H200, Parallel(), EFF, b, 1, c + dc).graph_s >= t
    assert decode_like(L8, H200, Parallel(), EFF, b, 6, c).graph_s >= t  # verifying 6 tokens >= 1


def test_regenerate_scales_with_the_efficiency_it_is_given():
    p = Profile.model_validate(build_profile(L8, H200, 1))
    slow = Profile.model_validate(regenerate(p, hbm=EFF.hbm / 2))
    assert slow.analytic["efficiency"]["hbm"] == EFF.hbm / 2
    fixed = EFF.graph_launch_s + kernel_count(L8, EFF) * EFF.kernel_gap_s  # launch gaps do not scale with bandwidth
    assert slow.gpu.decode.seconds[0][0] - fixed == pytest.approx(2 * (p.gpu.decode.seconds[0][0] - fixed), rel=0.1)
    with pytest.raises(ConfigError, match="analytic.efficiency"):
        regenerate(p, nonsense=1.0)


def test_config_json_reads_like_the_shipped_entry(tmp_path):
    cfg = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k != "source"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    arch = load_model(str(path))
    assert arch.model_dump(exclude={"name", "source"}) == L8.model_dump(exclude={"name", "source"})


def test_cli_writes_a_profile_a_scenario_can_run(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "qwen3-0.6b", "--gpu", "rtx-5090", "--out", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.hardware.gpu == "RTX5090" and prof.hardware.platform == "cuda"
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {out}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 64}}, output_len: {{kind: fixed, value: 8}}}}
""")
    assert main(["run", str(scn), "--out", str(tmp_path / "r")]) == 0
    text = capsys.readouterr().out
    assert "cuda_graph_max_bs = 48" in text and "chunked_prefill_size = 4096" in text


def _bad(tmp_path, capsys, *args):
    out = tmp_path / "never.yaml"
    code = main(["profile", "--analytic", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    assert "--gpu = 'H300'" in _bad(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "H300")
    assert "--model = 'llama-9'" in _bad(tmp_path, capsys, "--model", "llama-9", "--gpu", "H200")
    err = _bad(tmp_path, capsys, "--model", "qwen2.5-7b", "--gpu", "H200", "--tp", "3")
    assert "--tp = 3" in err and "allowed: 1, 2, 4, 28" in err
    cfg = dict(shipped_models()["llama-3.1-8b"])
    del cfg["num_attention_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    err = _bad(tmp_path, capsys, "--model", str(path), "--gpu", "H200")
    assert str(path) in err and "num_attention_heads" in err and "<missing>" in err
    path.write_text("{not json")
    assert "not valid JSON" in _bad(tmp_path, capsys, "--model", str(path), "--gpu", "H200")
    assert "--dtype" in _bad(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "H200", "--dtype", "int4")


def test_fit_recovers_the_efficiencies_that_made_the_measurements():
    """Refit (what calibration calls): forwards timed with known factors give them back."""
    from specsched.sim.analytic.fit import Observation, fit_efficiency, predict

    p = Profile.model_validate(build_profile(L8, H200, 1))
    true = Efficiency(matmul=0.5, hbm=0.6, kernel_gap_s=4e-6)
    shapes = [("decode", b, 1, c) for b in (1, 8, 64) for c in (0, 4096)] + [("extend", 1, x, x / 2) for x in (4096, 16384)]
    obs = [Observation(k, b, q, c, predict(L8, H200, Parallel(), true, Observation(k, b, q, c, 1.0))) for k, b, q, c in shapes]
    fitted, rms = fit_efficiency(p, obs)
    assert rms < 1e-3
    for f in ("matmul", "hbm", "kernel_gap_s"):
        assert getattr(fitted, f) == pytest.approx(getattr(true, f), rel=0.02), f
    with pytest.raises(ConfigError, match="factors"):
        fit_efficiency(p, obs, factors=("speed",))
