"""Analytic profiles: shapes, roofline physics, the writer and `specsched profile --analytic`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import gpu_table, load_gpu
from specsched.sim.analytic.models import from_hf_config, load_model, shipped_models
from specsched.sim.analytic.roofline import (
    Efficiency,
    Parallel,
    decode_like,
    draft_arch,
    extend,
    kernel_count,
    kv_cell_bytes,
    kv_entries,
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
        assert p.analytic["efficiency"] == EFF.model_dump() | gpu.efficiency   # the GPU's own over the defaults
        assert all(k in p.provenance for k in ("model", "gpu", "gpu.decode", "analytic.efficiency.hbm"))


def test_shapes_match_their_configs():
    assert round(weights_bytes(L8, Parallel()) / 2) == 8_030_261_248  # Llama-3.1-8B parameter count
    assert kv_cell_bytes(L8, 1) == 131_072
    assert kv_cell_bytes(L8, 8) == 131_072 / 8
    assert kv_cell_bytes(L8, 16) == 131_072 / 8  # 8 KV heads replicate beyond TP 8
    v3 = load_model("deepseek-v3")
    assert kv_cell_bytes(v3, 8) == (512 + 64) * 61 * 2  # MLA latent, replicated on every rank
    assert 640e9 < weights_bytes(v3, Parallel(dtype="fp8")) < 700e9  # 671B parameters in fp8


PUBLISHED_PARAMETERS = {
    # the model cards' parameter counts (Hugging Face pages, safetensors totals), in billions
    "llama-3.1-405b": 405.9, "llama-3.3-70b": 70.55, "llama-3.2-1b": 1.236, "llama-3.2-3b": 3.213,
    "qwen2.5-14b": 14.77, "qwen2.5-32b": 32.76, "qwen2.5-72b": 72.71, "qwen3-4b": 4.02, "qwen3-8b": 8.19,
    "qwen3-14b": 14.77, "qwen3-32b": 32.76, "qwen3-235b-a22b": 235.09, "mixtral-8x7b": 46.70, "deepseek-r1": 671.0,
}


@pytest.mark.parametrize(("model", "billions"), sorted(PUBLISHED_PARAMETERS.items()))
def test_a_shipped_shape_has_its_model_cards_parameter_count(model, billions):
    """Each shipped shape, restated from its config.json, adds up to the parameter count its
    model card publishes (within 0.1 %, the cards' rounding): a wrong layer count, width or
    head count would move it by far more."""
    n = weights_bytes(load_model(model), Parallel()) / 2
    assert n == pytest.approx(billions * 1e9, rel=1e-3)


def test_batch_one_decode_is_the_weight_read():
    """Batch 1, no context: the forward is the weight read at the achieved bandwidth plus
    the graph launch and one gap per kernel; nothing else is large."""
    c = decode_like(L8, H200, Parallel(), EFF, 1, 1, 0)
    read = weights_bytes(L8, Parallel()) - 2 * L8.vocab_size * L8.hidden_size  # the embedding is gathered, not read
    weights_s = read / (H200.hbm_tbps * 1e12 * EFF.hbm)
    assert c.overhead_s == pytest.approx(EFF.graph_launch_s + kernel_count(L8, EFF) * EFF.kernel_gap_s)
    assert weights_s * 0.99 < c.graph_s - c.overhead_s < weights_s * 1.15


@pytest.mark.parametrize("gpu", ["L40S", "H800", "A100-40G", "MI325X"])
def test_more_datacenter_gpus_are_shipped_with_their_datasheet_rates(gpu):
    """L40S, H800, A100-40G and MI325X were refused as unknown GPUs. Each batch-1 decode is
    its weight read at its own bandwidth (within the other terms' share), and the H800 differs
    from the H100 only in its NVLink (200 GB/s per direction), so only its all-reduces cost more."""
    g = load_gpu(gpu)
    c = decode_like(L8, g, Parallel(), EFF, 1, 1, 0)
    read = weights_bytes(L8, Parallel()) - 2 * L8.vocab_size * L8.hidden_size
    weights_s = read / (g.hbm_tbps * 1e12 * EFF.hbm)
    assert weights_s * 0.99 < c.graph_s - c.overhead_s < weights_s * 1.15
    if gpu == "H800":
        h100 = load_gpu("H100")
        l70 = load_model("llama-3.1-70b")
        a, b = (decode_like(l70, x, Parallel(tp=8), EFF, 64, 1, 1024) for x in (g, h100))
        assert a.linear_s == b.linear_s and a.allreduce_s > b.allreduce_s


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


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), tokens=st.integers(1, 20_000))
def test_an_xgmi_mesh_gives_a_tp_group_only_its_links(tp, tokens):
    """Invariant: on a fully connected mesh a TP group reaches its peers over tp - 1 of the
    links, so its all-reduces cost at least what the same GPU behind a switch pays, and the
    same once the group spans every link (TP8 of 7 links)."""
    mi355 = load_gpu("MI355X")
    switch = mi355.model_copy(update={"mesh_links": None})
    v3 = load_model("deepseek-v3")
    mesh_s = decode_like(v3, mi355, Parallel(tp=tp), EFF, tokens, 1, 1024).allreduce_s
    switch_s = decode_like(v3, switch, Parallel(tp=tp), EFF, tokens, 1, 1024).allreduce_s
    assert mesh_s >= switch_s * (1 - 1e-12)
    assert (mesh_s == pytest.approx(switch_s)) == (tp == 8)
    assert mi355.tp_link_bytes_per_s(tp) == pytest.approx(mi355.link_gbps * 1e9 * (tp - 1) / 7)


@settings(max_examples=40, deadline=None)
@given(gpu=st.sampled_from(["H100", "H200", "B200", "MI300X", "MI355X", "A100-80G"]),
       tokens=st.integers(1, 20_000))
def test_a_tp_group_beyond_one_node_all_reduces_across_the_network(gpu, tokens):
    """Invariant: a TP group larger than one node's NVLink/xGMI domain (8 GPUs on HGX and the
    AMD platforms) never all-reduces faster than the node's own TP8 does for the same
    tokens, and each call pays the inter-node latency: SGLang 0.5.23 turns its custom
    all-reduce off when the group spans nodes (distributed/device_communicators/
    custom_all_reduce_utils.py ``can_use_custom_all_reduce_with_nvlink``), so NCCL carries
    it over the NICs. Before, TP16 all-reduced at the intra-node link and latency."""
    g = load_gpu(gpu)
    v3 = load_model("deepseek-v3")
    per_call = {tp: decode_like(v3, g, Parallel(tp=tp), EFF, tokens, 1, 1024).allreduce_s / (2 * v3.num_layers)
                for tp in (8, 16)}
    assert per_call[16] >= per_call[8] * (1 - 1e-12)
    assert per_call[16] >= EFF.internode_allreduce_latency_s > EFF.allreduce_latency_s
    # within a node nothing changes: the ring over the node's link, the custom all-reduce's latency
    assert per_call[8] == pytest.approx(EFF.allreduce_latency_s + 2 * 7 / 8 * tokens * v3.hidden_size * 2
                                        / (g.tp_link_bytes_per_s(8) * EFF.interconnect))


def test_profile_says_when_its_tp_group_spans_nodes(tmp_path, capsys):
    """The NIC figure is an assumption, so the command names it when it prices one."""
    for tp, said in ((8, False), (16, True)):
        assert main(["profile", "--analytic", "--model", "deepseek-v3", "--gpu", "H200", "--tp", str(tp),
                     "--out", str(tmp_path / f"p{tp}.yaml")]) == 0
        err = capsys.readouterr().err
        assert ("TP16 spans 2 nodes of 8 H200" in err) == said and ("50 GB/s NIC" in err) == said


@pytest.mark.parametrize("gpu, nccl_from", [("RTX5090", 2), ("L40S", 4)])
def test_pcie_only_gpus_all_reduce_through_nccl_where_sglangs_custom_all_reduce_declines(tmp_path, capsys, gpu,
                                                                                         nccl_from):
    """SGLang 0.5.23's custom all-reduce turns itself off for more than two GPUs without NVLink
    and where CUDA P2P is unavailable (distributed/device_communicators/custom_all_reduce_utils.py
    ``can_use_custom_all_reduce_with_nvlink``): an L40S (PCIe, P2P) keeps it at TP2 only, an RTX
    5090 (GeForce: no P2P) never has it. Such a group's all-reduce pays NCCL's latency
    (``internode_allreduce_latency_s``) over the PCIe link. Before, every TP size within a node
    was priced with the custom all-reduce's 10 us."""
    g = load_gpu(gpu)
    for tp in (2, 4, 8):
        per_call = decode_like(L8, g, Parallel(tp=tp), EFF, 1, 1, 1024).allreduce_s / (2 * L8.num_layers)
        ring = 2 * (tp - 1) / tp * L8.hidden_size * 2 / (g.link_gbps * 1e9 * EFF.interconnect)
        latency = EFF.internode_allreduce_latency_s if tp >= nccl_from else EFF.allreduce_latency_s
        assert per_call == pytest.approx(latency + ring)
        assert main(["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", gpu, "--tp", str(tp),
                     "--out", str(tmp_path / f"p{tp}.yaml")]) == 0
        err = capsys.readouterr().err
        assert (f"TP{tp} on {g.name}: SGLang's custom all-reduce is off" in err) == (tp >= nccl_from)
    # NVLink parts keep the custom all-reduce at every TP size within the node
    assert all(H200.custom_allreduce(tp) for tp in (2, 4, 8)) and not H200.custom_allreduce(16)


def test_a_tp_group_spreads_evenly_over_the_nodes_it_spans():
    """SGLang's --nnodes runs tp_size / nnodes ranks per node: TP12 on 8-GPU nodes is 2 x 6
    (it read as 1.5 nodes of 8)."""
    h = load_gpu("H100")
    assert [h.tp_nodes(tp) for tp in (1, 8, 12, 16, 24, 7)] == [(1, 1), (8, 1), (6, 2), (8, 2), (8, 3), (7, 1)]


def test_hopper_keeps_the_all_reduce_unfused_when_the_tp_group_spans_nodes():
    """SGLang 0.5.23 auto-enables FlashInfer's all-reduce fusion on SM 90 only within one node
    (arg_groups/overrides.py ``_flashinfer_allreduce_fusion_auto_enable``: ``nnodes == 1 or
    is_sm100``): DeepSeek-V3 at TP16 on H200s launches the all-reduce kernels, on B200s not."""
    v3 = load_model("deepseek-v3")
    b200 = load_gpu("B200")
    assert kernel_count(v3, EFF, 16, H200) == kernel_count(v3, EFF, 8, H200) + 2 * v3.num_layers
    assert kernel_count(v3, EFF, 16, b200) == kernel_count(v3, EFF, 8, b200)


def test_kernel_count_follows_the_architecture():
    """An MLA+MoE layer launches more kernels than a dense GQA layer (SGLang's model code);
    a dense model counts kernels_per_layer per layer plus 4."""
    v3, q = load_model("deepseek-v3"), load_model("qwen3-0.6b")
    assert kernel_count(q, EFF) == q.num_layers * EFF.kernels_per_layer + 4
    assert kernel_count(v3, EFF) == (v3.num_layers * (EFF.kernels_per_layer + EFF.mla_extra_kernels)
                                     + v3.moe_layers * EFF.moe_extra_kernels + 4)


@pytest.mark.parametrize("model", sorted(shipped_models()))
def test_all_reduce_kernels_launch_only_under_tp(model):
    """SGLang's all-reduce returns its input at world size 1 (parallel_state.py), so a TP1
    forward launches none; any larger TP adds allreduce_kernels_per_layer per layer."""
    arch = load_model(model)
    one, two, eight = (kernel_count(arch, EFF, tp) for tp in (1, 2, 8))
    assert two == eight == one + arch.num_layers * EFF.allreduce_kernels_per_layer


def test_hopper_and_blackwell_fuse_the_moe_models_all_reduce_into_the_next_norm():
    """SGLang 0.5.23 auto-enables FlashInfer's all-reduce fusion on SM 90/100 for DeepSeek
    and Qwen3-MoE at TP > 1 (one kernel for all-reduce + add + RMSNorm), up to 2048 tokens;
    dense Llama keeps separate all-reduces, and ROCm and TP1 never fuse."""
    v3, moe = load_model("deepseek-v3"), load_model("qwen3-30b-a3b")
    mi355, b200 = load_gpu("MI355X"), load_gpu("B200")
    for arch in (v3, moe):
        unfused = kernel_count(arch, EFF, 8, mi355)
        assert kernel_count(arch, EFF, 8, H200) == kernel_count(arch, EFF, 8, b200) == unfused - 2 * arch.num_layers
        assert kernel_count(arch, EFF, 8, H200, tokens=4096) == unfused
        assert kernel_count(arch, EFF, 1, H200) == kernel_count(arch, EFF, 1, mi355)
    assert kernel_count(L8, EFF, 8, H200) == kernel_count(L8, EFF, 8, mi355)
    assert kernel_count(v3, EFF, 8, load_gpu("A100-80G")) == kernel_count(v3, EFF, 8, mi355)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 64), w=st.integers(2, 8))
def test_an_moe_target_drafts_with_moe_layers_that_touch_more_experts_over_a_longer_block(batch, w):
    """Invariant: an MoE target's draft layer is an MoE layer (SGLang's MTP/DSpark stages), so
    a block draft over more tokens touches at least as many experts; a dense target's
    drafter stays dense."""
    v3 = load_model("deepseek-v3")
    d = draft_arch(v3, 1)
    assert d.is_moe and d.moe_layers == 1 and not draft_arch(L8, 1).is_moe
    par = Parallel(tp=8, dtype="fp8")
    gpu = load_gpu("MI355X")
    short = decode_like(d, gpu, par, EFF, batch, w, 1024).experts_s
    long = decode_like(d, gpu, par, EFF, batch, w + 1, 1024).experts_s
    assert long >= short > 0


def test_eager_steps_are_host_issue_bound_at_small_batch():
    """The profile's eager terms: the host issues every kernel (kernels x the eager issue
    per kernel), which exceeds a small graph step; the GPU-bound extra is per kernel too."""
    q = load_model("qwen3-0.6b")
    g = Profile.model_validate(build_profile(q, load_gpu("RTX5090"), 1)).gpu
    n = kernel_count(q, EFF)
    assert g.eager_host_issue_s == pytest.approx(n * EFF.eager_launch_per_kernel_s, rel=1e-5)
    assert g.eager_overhead_s == pytest.approx(n * EFF.eager_gpu_per_kernel_s, rel=1e-5)
    assert g.eager_host_issue_s > g.decode.seconds[0][0]


@settings(max_examples=20, deadline=None)
@given(ghz=st.floats(0.5, 10))
def test_eager_issue_is_cpu_work_that_scales_with_the_host_clock(ghz):
    """Issuing kernels eagerly is single-threaded host work: its time scales with
    REFERENCE_HOST_GHZ / host_ghz; the graph-replayed grids do not move with the host."""
    from specsched.sim.analytic.roofline import REFERENCE_HOST_GHZ

    q, gpu = load_model("qwen3-0.6b"), load_gpu("RTX5090")
    ref = Profile.model_validate(build_profile(q, gpu, 1)).gpu
    g = Profile.model_validate(build_profile(q, gpu, 1, eff=Efficiency(host_ghz=ghz))).gpu
    assert g.eager_host_issue_s == pytest.approx(ref.eager_host_issue_s * REFERENCE_HOST_GHZ / ghz, rel=1e-4)
    assert g.decode.seconds == ref.decode.seconds and g.eager_overhead_s == ref.eager_overhead_s


def test_logits_cost_grows_with_the_rows_that_need_them():
    """Verify needs logits for every window position: the LM head plus the logits' gather
    and full-vocab passes grow with the window (tp 8), more than the LM-head weight read."""
    v3, gpu = load_model("deepseek-v3"), load_gpu("MI355X")
    par = Parallel(tp=8, dtype="fp8")
    one = decode_like(v3, gpu, par, EFF, 64, 1, 1024).lm_head_s
    eight = decode_like(v3, gpu, par, EFF, 64, 8, 1024).lm_head_s
    assert eight > one * 1.5


def test_regenerate_scales_with_the_efficiency_it_is_given():
    p = Profile.model_validate(build_profile(L8, H200, 1))
    slow = Profile.model_validate(regenerate(p, hbm=EFF.hbm / 2))
    assert slow.analytic["efficiency"]["hbm"] == EFF.hbm / 2
    fixed = EFF.graph_launch_s + kernel_count(L8, EFF) * EFF.kernel_gap_s  # launch gaps do not scale with bandwidth
    assert slow.gpu.decode.seconds[0][0] - fixed == pytest.approx(2 * (p.gpu.decode.seconds[0][0] - fixed), rel=0.1)
    with pytest.raises(ConfigError, match="analytic.efficiency"):
        regenerate(p, nonsense=1.0)


def test_regenerate_keeps_a_measured_host_and_a_calibrated_grid():
    """Refitting an efficiency factor rebuilds the grids from the analytic inputs; values
    changed since the writer made them (a host block measured on the serving machine, a grid
    a calibration scaled) must survive it, moved only by the rebuild's own change, and the
    untouched values must follow the rebuild. Before, the rebuild wrote host.yaml's assumed
    host over a measured one (calibrate --from --params analytic.efficiency.* did that at
    every evaluation)."""
    p = build_profile(L8, H200, 1)
    edited = {**p, "host": {**p["host"], "launch_per_extend_s": 9.8e-3, "extend_idle_lead_s": 2.6e-3},
              "gpu": {**p["gpu"], "verify": {**p["gpu"]["verify"],
                                             "seconds": [[1.3 * v for v in row] for row in p["gpu"]["verify"]["seconds"]]}}}
    slow = regenerate(Profile.model_validate(edited), matmul=EFF.matmul / 2)
    plain = regenerate(Profile.model_validate(p), matmul=EFF.matmul / 2)
    assert slow["host"]["launch_per_extend_s"] == pytest.approx(
        9.8e-3 * plain["host"]["launch_per_extend_s"] / p["host"]["launch_per_extend_s"])   # matmul moves no issue: 9.8 ms
    assert slow["host"]["launch_per_extend_s"] == pytest.approx(9.8e-3)
    assert slow["host"]["extend_idle_lead_s"] == 2.6e-3                              # a term the writer never writes
    assert slow["host"]["schedule_s"] == plain["host"]["schedule_s"]                  # untouched: the writer's
    big = -1   # the largest batch: compute-bound, so the halved matmul moved it
    assert plain["gpu"]["verify"]["seconds"][big][0] > 1.5 * p["gpu"]["verify"]["seconds"][big][0]
    assert slow["gpu"]["verify"]["seconds"][big][0] == pytest.approx(1.3 * plain["gpu"]["verify"]["seconds"][big][0])
    assert slow["gpu"]["decode"] == plain["gpu"]["decode"]
    assert "host.launch_per_extend_s" in slow["provenance"]["regenerate"]
    assert "regenerate" not in plain["provenance"]
    Profile.model_validate(slow)


def test_config_json_reads_like_the_shipped_entry(tmp_path):
    cfg = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k != "source"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    arch = load_model(str(path))
    assert arch.model_dump(exclude={"name", "source"}) == L8.model_dump(exclude={"name", "source"})


def test_a_checkpoint_folder_reads_its_config_json(tmp_path, capsys):
    """The model's folder, as SGLang's --model-path takes it (a Hugging Face snapshot with its
    config.json), was "not a config.json file nor a shipped model"; it reads the config.json in
    it, named after the folder. A folder without one still says what it looked for."""
    cfg = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k != "source"}
    folder = tmp_path / "My-Llama-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    for path in (str(folder), str(folder) + "/"):
        arch = load_model(path)
        assert arch.name == "My-Llama-8B"
        assert arch.model_dump(exclude={"name", "source"}) == L8.model_dump(exclude={"name", "source"})
    (tmp_path / "empty").mkdir()
    assert main(["profile", "--analytic", "--model", str(tmp_path / "empty"), "--gpu", "H100",
                 "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config.json" in err[0] and "folder" in err[0], err


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
    assert "--dtype" in _bad(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "H200", "--dtype", "int8")
    assert "--host-ghz = 0.0" in _bad(tmp_path, capsys, "--model", "llama-3.1-8b", "--gpu", "H200", "--host-ghz", "0")
    # a missing --gpu or --model says what to give (it printed "--gpu = None")
    err = _bad(tmp_path, capsys, "--model", "llama-3.1-8b")
    assert "--gpu = '<missing>'" in err and "H100, H200" in err
    err = _bad(tmp_path, capsys, "--gpu", "H200")
    assert "--model = '<missing>'" in err and "config.json" in err and "llama-3.1-8b" in err


BAD_CONFIGS = {
    "num_key_value_heads": (0, 5),            # must divide num_attention_heads 32
    "num_attention_heads": (30,),             # 4096 / 30 is not whole and no head_dim is given
    "head_dim": (0,),
    "hidden_size": ("4096", -1, True),        # not a non-negative integer
    "num_hidden_layers": (0, None),           # None: the key left out
    "vocab_size": (None,),
    "intermediate_size": (None,),
    "max_position_embeddings": (0,),         # was a pydantic traceback (hardware.context_len)
    "sliding_window": (0,),                  # was read as a 0-token window: attention free at any context
    "swa_layer_fraction": ("half", 2),       # was a ValueError traceback
    "layer_types": ("sliding_attention", [1, 2], []),
}


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from([(k, v) for k, vs in BAD_CONFIGS.items() for v in vs]))
def test_a_bad_config_json_is_one_line_naming_file_key_value(tmp_path_factory, case):
    """Every config.json mistake: one line naming the file, the key and the value, exit 2,
    no profile written (the invariant the bad-input target states)."""
    import contextlib
    import io

    key, value = case
    cfg = dict(shipped_models()["llama-3.1-8b"])
    if value is None:
        del cfg[key]
    else:
        cfg[key] = value
    d = tmp_path_factory.mktemp("cfg")
    path, out = d / "config.json", d / "never.yaml"
    path.write_text(json.dumps(cfg))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["profile", "--analytic", "--model", str(path), "--gpu", "H200", "--out", str(out)])
    line = err.getvalue().strip()
    assert code == 2 and not out.exists() and len(line.splitlines()) == 1 and "Traceback" not in line
    assert str(path) in line and (key in line or "head_dim" in line)


def test_moe_config_with_more_picked_than_routed_experts_is_refused(tmp_path, capsys):
    cfg = {**shipped_models()["qwen3-30b-a3b"], "num_experts_per_tok": 200}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    err = _bad(tmp_path, capsys, "--model", str(path), "--gpu", "H200")
    assert "num_experts_per_tok = 200" in err and "1..128" in err


def test_a_model_whose_steps_no_profile_holds_is_one_line_naming_it(tmp_path, capsys):
    """A config of 10**9 layers built a profile whose extend took 191634 s, past the 3600 s a
    profile holds: 567 pydantic errors in a traceback. One line names the model file, the
    profile key and value, and nothing is written."""
    cfg = {**shipped_models()["llama-3.1-8b"], "num_hidden_layers": 10**9}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    err = _bad(tmp_path, capsys, "--model", str(path), "--gpu", "H100")
    assert str(path) in err and "gpu." in err and "3600" in err, err
    assert not (tmp_path / "p.yaml").exists()


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


def test_prefill_is_issued_kernel_by_kernel_where_sglang_runs_it_without_graphs():
    """SGLang 0.5.23 runs prefill eagerly off CUDA (and for DeepSeek-V4 everywhere): the
    extend's host issue is every kernel x the eager issue per kernel; CUDA's breakable prefill
    graph issues only a segment replay and the attention kernels per layer."""
    from specsched.sim.analytic.roofline import eager_issue_per_kernel_s, extend_issue_s

    v4, v3 = load_model("deepseek-v4-flash"), load_model("deepseek-v3")
    # DeepSeek-V3 on B200 (SM100) gets trtllm_mla, which turns prefill graphs off
    # (cuda_graph_hook.py disable_prefill_cuda_graph_for_deepseek_trtllm_mla); on H200 (fa3) it keeps them
    for arch, gpu, eager in [(v3, load_gpu("MI355X"), True), (v4, load_gpu("B200"), True), (v3, load_gpu("B200"), True),
                             (v3, load_gpu("H200"), False)]:
        h = Profile.model_validate(build_profile(arch, gpu, 8)).host
        full = kernel_count(arch, EFF, 8, gpu, 1024) * eager_issue_per_kernel_s(EFF)
        assert h.launch_per_extend_s == pytest.approx(extend_issue_s(arch, gpu, EFF, 8), rel=1e-5)
        assert (h.launch_per_extend_s == pytest.approx(full, rel=1e-5)) is eager
        assert 0 < h.launch_per_inject_s < h.launch_per_extend_s
    q = Profile.model_validate(build_profile(load_model("qwen3-0.6b"), load_gpu("RTX5090"), 1)).host
    per = eager_issue_per_kernel_s(EFF)
    assert q.launch_per_extend_s == pytest.approx(28 * (EFF.graph_launch_s + 2 * per) + EFF.graph_launch_s, rel=1e-5)


def test_an_eager_prefill_issue_delays_first_tokens_when_the_gpu_would_finish_sooner(tmp_path):
    """Short prompts on ROCm: the extend's GPU time is below its kernel-by-kernel issue, so
    the issue sets when the first token comes; zeroing the issue makes TTFT shorter."""
    import yaml
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario

    prof = build_profile(load_model("qwen3-0.6b"), load_gpu("MI300X"), 1)
    ttft = []
    for issue in (prof["host"]["launch_per_extend_s"], 0.0):
        p = {**prof, "host": {**prof["host"], "launch_per_extend_s": issue}}
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({
            "name": "t", "profile": str(tmp_path / "p.yaml"),
            "workload": {"kind": "poisson", "request_rate": 20, "num_requests": 30,
                         "input_len": {"kind": "fixed", "value": 64}, "output_len": {"kind": "fixed", "value": 8}}}))
        ttft.append(run_scenario(load_scenario(tmp_path / "s.yaml"), seed=1).summary["median_ttft_ms"])
    assert ttft[0] > ttft[1] + 0.5 * prof["host"]["launch_per_extend_s"] * 1e3


@pytest.mark.parametrize("how", [{"disable_prefill_cuda_graph": True}, {"cuda_graph_max_bs_prefill": 32}])
def test_an_extend_without_its_prefill_graph_is_issued_kernel_by_kernel_on_cuda(tmp_path, how):
    """SGLang 0.5.23 runs an extend the piecewise prefill graph cannot take (prefill graphs
    disabled, or more tokens than the largest captured size) through its eager runner
    (model_executor/model_runner.py forward_extend: ``prefill_cuda_graph_runner.can_run_graph``
    else ``eager_runner.execute``): every kernel issued from Python, not one segment replay per
    layer. On an analytic CUDA profile ``server.disable_prefill_cuda_graph: true`` changed no
    figure (Qwen3-0.6B on an H100, 64-token prompts: median TTFT 3.45 ms either way); the
    eager issue (host.launch_per_extend_eager_s) now sets when a short prompt's first token comes."""
    import yaml
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario

    prof = build_profile(load_model("qwen3-0.6b"), load_gpu("H100"), 1)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(prof))
    ttft = []
    for server in ({}, how):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({
            "name": "t", "profile": str(tmp_path / "p.yaml"), "server": server,
            "workload": {"kind": "poisson", "request_rate": 20, "num_requests": 30,
                         "input_len": {"kind": "fixed", "value": 64}, "output_len": {"kind": "fixed", "value": 8}}}))
        ttft.append(run_scenario(load_scenario(tmp_path / "s.yaml"), seed=1).summary["median_ttft_ms"])
    eager, graph = prof["host"]["launch_per_extend_eager_s"], prof["host"]["launch_per_extend_s"]
    assert eager > 2 * graph
    assert ttft[1] > ttft[0] + 0.5 * (eager - graph) * 1e3


def test_an_eager_speculative_cycle_issues_the_draft_forward_too():
    """Above every captured batch a DSpark cycle's host issues the target's verify and the
    draft forward kernel by kernel; a plain decode step of the same profile only the
    target's. Host-bound at small batch, so the cycle lasts the larger issue."""
    from specsched.sim.analytic.roofline import eager_issue_per_kernel_s
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel

    q, gpu = load_model("qwen3-0.6b"), load_gpu("RTX5090")
    p = Profile.model_validate(build_profile(q, gpu, 1))
    per = eager_issue_per_kernel_s(EFF)
    target, draft = kernel_count(q, EFF, 1, gpu) * per, kernel_count(draft_arch(q, 1), EFF, 1, gpu) * per
    base = {"cuda_graph_max_bs": 8, "max_running_requests": 64}
    plain = CostModel(p, ServerArgs(**base))
    spec = CostModel(p, ServerArgs(**base, speculative_algorithm="dspark", speculative_num_draft_tokens=6))
    assert plain.eager_issue_s(9) == pytest.approx(target, rel=1e-5)
    assert spec.eager_issue_s(9) == pytest.approx(target + draft, rel=1e-5)
    assert spec.eager_issue_s(8) == 0.0  # graph-replayed
    assert spec.step_s(9, 256) >= target + draft - 1e-9


def test_disable_decode_cuda_graph_runs_every_decode_batch_eagerly():
    """SGLang's decode graph switch off: a batch of 1 is issued kernel by kernel like one
    above cuda_graph_max_bs; with it on, the same batch replays a graph."""
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel

    q = load_model("qwen3-0.6b")
    p = Profile.model_validate(build_profile(q, load_gpu("MI300X"), 1))
    on, off = (CostModel(p, ServerArgs(disable_decode_cuda_graph=flag)) for flag in (False, True))
    assert on.padded_batch(1) == 1 and off.padded_batch(1) is None
    assert on.eager_issue_s(1) == 0.0 and off.eager_issue_s(1) == p.gpu.eager_host_issue_s
    assert off.step_s(1, 512) >= p.gpu.eager_host_issue_s > on.step_s(1, 512)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 128), w=st.integers(2, 8), c=st.sampled_from([512, 2048, 8192]))
def test_a_block_draft_forward_reads_each_requests_kv_once(batch, w, c):
    """Invariant (INV-AD1): a block drafter's forward over ``batch x w`` tokens (SGLang's
    DFlash draft block is one TARGET_VERIFY forward of ``batch`` requests) grows with
    context by the KV read of ``batch`` requests, the same as a verify of ``w`` tokens per
    request of the draft model, and ``w`` times less than ``batch x w`` one-token requests
    (a chain step's reading, which the block drafter's grid used before)."""
    from specsched.sim.analytic.roofline import draft_forward

    d, par = draft_arch(L8, 2), Parallel()
    block = [draft_forward(d, H200, par, EFF, batch * w, ctx, w) for ctx in (c, 2 * c)]
    verify = [decode_like(d, H200, par, EFF, batch, w, ctx) for ctx in (c, 2 * c)]
    chain = [draft_forward(d, H200, par, EFF, batch * w, ctx, 1) for ctx in (c, 2 * c)]
    grow = block[1].attention_s - block[0].attention_s
    assert grow == pytest.approx(verify[1].attention_s - verify[0].attention_s, rel=1e-9)
    kv = batch * c * kv_cell_bytes(d, 1) / (H200.hbm_tbps * 1e12 * EFF.hbm)
    assert grow == pytest.approx(kv, rel=0.05)  # the KV read dominates a draft's attention
    assert chain[1].attention_s - chain[0].attention_s == pytest.approx(w * grow, rel=0.05)


def test_the_written_block_draft_step_is_the_block_forward():
    """The analytic writer's ``gpu.draft_step`` cell at ``batch x window`` tokens, which the
    cost model reads for a block drafter's draft forward, is that forward with the block per
    request (INV-AD1), not ``batch x window`` one-token requests."""
    from specsched.sim.analytic.roofline import draft_forward

    q, w = load_model("qwen3-0.6b"), 6
    g = build_profile(q, H200, 1, window=w, draft_layers=2)["gpu"]["draft_step"]
    d = draft_arch(q, 2)
    for x in (64, 384):
        for c in (1024, 8192):
            cell = g["seconds"][g["x"].index(float(x))][g["context_len"].index(float(c))]
            assert cell == pytest.approx(draft_forward(d, H200, Parallel(), EFF, x, c, w).graph_s, rel=1e-5)
            assert cell < draft_forward(d, H200, Parallel(), EFF, x, c, 1).graph_s


def _ctx_growth(eff, batch, gpu=H200, arch=None):
    """Seconds per context token per request a decode step of ``batch`` requests grows by."""
    arch = arch or load_model("llama-3.1-8b")
    s = [decode_like(arch, gpu, Parallel(), eff, batch, 1, c).attention_s for c in (1024, 9216)]
    return (s[1] - s[0]) / 8192 / batch


@settings(max_examples=40, deadline=None)
@given(b1=st.integers(1, 64), b2=st.integers(1, 64))
def test_an_unsplit_decode_attention_streams_one_block_per_request_and_kv_head(b1, b2):
    """Invariant (INV-AK1): with split-KV (SGLang's kernels) a request's KV read costs the same
    per token at any batch; without it the kernel runs batch x KV-heads blocks, so per request
    the read costs ``SMs / blocks`` times more until the blocks fill the SMs, then the same at
    every larger batch (the one-block-per-SM rate), and never less than with split-KV."""
    split, unsplit = EFF, Efficiency(attention_split_kv=False)
    kvh, sms = L8.num_kv_heads, H200.sms
    assert _ctx_growth(split, b1) == pytest.approx(_ctx_growth(split, b2), rel=1e-9)
    g1, g2 = _ctx_growth(unsplit, b1), _ctx_growth(unsplit, b2)
    assert min(g1, g2) >= _ctx_growth(split, b1) * (1 - 1e-9)
    lo, hi = sorted((b1, b2))
    glo, ghi = _ctx_growth(unsplit, lo), _ctx_growth(unsplit, hi)
    if hi * kvh <= sms:  # both below one block per SM: the rate grows with the blocks
        assert glo == pytest.approx(ghi * hi / lo, rel=1e-6)
    elif lo * kvh >= sms:  # both at the SM limit: flat per request
        assert glo == pytest.approx(ghi, rel=1e-6)
    else:
        assert glo >= ghi * (1 - 1e-9)
    rate = sms * unsplit.unsplit_attention_cta_gbps * 1e9
    assert _ctx_growth(unsplit, 64) == pytest.approx(kv_cell_bytes(L8, 1) / rate, rel=1e-3)


@settings(max_examples=20, deadline=None)
@given(passes=st.integers(0, 4), batch=st.integers(1, 128))
def test_a_gathered_kv_copy_adds_its_passes_at_the_hbm_rate(passes, batch):
    """Invariant (INV-AK2): ``kv_gather_passes`` HBM passes over the attended KV before the
    kernel (the runtime's proxy copies req_to_token[rows, :C] out: read + write) add exactly
    that many reads of the context at the HBM figure, in a decode and in an extend."""
    base, gath = Efficiency(attention_split_kv=False), Efficiency(attention_split_kv=False, kv_gather_passes=passes)
    bw = H200.hbm_tbps * 1e12 * EFF.hbm
    extra = (_ctx_growth(gath, batch) - _ctx_growth(base, batch))
    assert extra == pytest.approx(passes * kv_cell_bytes(L8, 1) / bw, rel=1e-6, abs=1e-18)
    e0, e1 = (extend(L8, H200, Parallel(), e, 1024, 2560).attention_s for e in (base, gath))
    assert e1 - e0 == pytest.approx(passes * 2048 * kv_cell_bytes(L8, 1) / bw, rel=1e-6, abs=1e-15)


def test_attention_kernel_option_on_the_command_line(tmp_path, capsys):
    """``--attention gather-unsplit`` writes the runtime proxy's attention into the profile
    (regenerate keeps it); an unknown kernel, or an unsplit one on a GPU without an SM count,
    is one line, exit 2, nothing written."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "qwen3-0.6b", "--gpu", "H200", "--attention", "gather-unsplit",
                 "--out", str(out)]) == 0
    p = load_profile(str(out))
    assert p.analytic["efficiency"]["attention_split_kv"] is False and p.analytic["efficiency"]["kv_gather_passes"] == 2
    assert regenerate(p)["analytic"]["efficiency"]["kv_gather_passes"] == 2
    capsys.readouterr()
    for args in (["--gpu", "H200", "--attention", "flash"], ["--gpu", "B200", "--attention", "paged-unsplit"]):
        bad = tmp_path / "bad.yaml"
        assert main(["profile", "--analytic", "--model", "qwen3-0.6b", *args, "--out", str(bad)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--attention" in err[0] and not bad.exists(), err


def test_a_gathered_kv_copy_spans_the_batchs_widest_context():
    """A profile whose attention gathers the KV (``--attention gather-unsplit``, the runtime's
    proxy) gathers one width for the whole batch, the longest request's rounded up to the
    runtime's 256-position bucket: a batch of one long and seven short requests costs what
    eight long ones cost; with SGLang's paged attention it costs the mean context."""
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel

    q = load_model("qwen3-0.6b")
    paged = Profile.model_validate(build_profile(q, H200, 1))
    gather = Profile.model_validate(build_profile(q, H200, 1, eff=Efficiency(attention_split_kv=False,
                                                                             kv_gather_passes=2)))
    assert gather.gpu.attention_width == "padded_max" and gather.gpu.attention_bucket == 256
    assert paged.gpu.attention_width == "per_request"
    args = ServerArgs(cuda_graph_max_bs=8, max_running_requests=8)
    cm_p, cm_g = CostModel(paged, args), CostModel(gather, args)
    mixed = (8192 + 7 * 512) / 8
    assert cm_g.step_s(8, mixed, 8192) == pytest.approx(cm_g.step_s(8, 8192, 8192), rel=1e-9)
    assert cm_g.step_s(8, mixed, 8192) > 1.5 * cm_g.step_s(8, mixed, mixed)
    assert cm_p.step_s(8, mixed) < cm_p.step_s(8, 8192)


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 64), data=st.data(), keys=st.floats(1, 200_000))
def test_layer_types_decide_which_layers_the_window_caps(layers, data, keys):
    """INV: with ``layer_types`` (Gemma 3, gpt-oss), only its "sliding_attention" layers read
    at most the window; the others read every position (SGLang builds each layer from
    ``config.layer_types[layer_id]``). Before, every layer was windowed, so a Gemma-like
    model's attention at long context cost as if it had no global layer."""
    kinds = data.draw(st.lists(st.sampled_from(["sliding_attention", "full_attention"]), min_size=layers, max_size=layers))
    cfg = {**shipped_models()["llama-3.1-8b"], "num_hidden_layers": layers, "sliding_window": 1024, "layer_types": kinds,
           "architectures": ["Gemma3ForCausalLM"]}
    arch = from_hf_config(cfg, "x", "config.json")
    k = kinds.count("sliding_attention")
    if k == 0:
        assert arch.sliding_window is None and kv_entries(arch, keys) == keys
    else:
        assert arch.swa_layer_fraction == pytest.approx(k / layers)
        assert kv_entries(arch, keys) == pytest.approx(k / layers * min(keys, 1024) + (1 - k / layers) * keys)
    assert min(keys, 1024) - 1e-9 <= kv_entries(arch, keys) <= keys + 1e-9


def test_gemma2_windows_its_even_layers_and_one_name_is_one_architecture():
    cfg = {**shipped_models()["llama-3.1-8b"], "num_hidden_layers": 26, "sliding_window": 4096,
           "architectures": "Gemma2ForCausalLM", "assumptions": "one line"}
    arch = from_hf_config(cfg, "g", "config.json")
    assert arch.architectures == ["Gemma2ForCausalLM"] and arch.assumptions == ["one line"]
    assert arch.swa_layer_fraction == pytest.approx(13 / 26)   # layers 0, 2, ..., 24 (models/gemma2.py)


@pytest.mark.parametrize(("model", "tp", "text"), [
    ("deepseek-v3", 3, "--tp = 3: must divide num_attention_heads 128; allowed: 1, 2, 4, 8, 16, 32, 64, 128"),
    ("llama-3.1-8b", 3, "--tp = 3: must divide num_attention_heads 32 and divide num_key_value_heads 8 or be a "
                        "multiple of it (KV heads replicated); allowed: 1, 2, 4, 8, 16, 32"),
])
def test_a_tp_that_does_not_split_the_heads_reads_as_one_sentence(tmp_path, capsys, model, tp, text):
    """MLA has no KV-head rule: its line read "must divide num_attention_heads 128 and allowed: ..."."""
    assert text in _bad(tmp_path, capsys, "--model", model, "--gpu", "H200", "--tp", str(tp))


@pytest.mark.parametrize(("quant", "fp8", "note"), [
    ({"quant_method": "mxfp4"}, False, False), ({"quant_method": "bitsandbytes", "load_in_4bit": True}, False, True),
    ({"quant_method": "awq", "bits": 4}, False, False), ({"quant_method": "gptq", "bits": 8}, False, True),
    ("fp8", True, False), ({"quant_method": "fp8"}, True, False), (None, False, False),
])
def test_a_quantization_the_roofline_does_not_price_is_said(tmp_path, capsys, quant, fp8, note):
    """A 4-bit checkpoint was priced as bf16 without a word (and a quantization_config given as
    a bare string was ignored); now the profile's provenance and stderr say it."""
    cfg = {**shipped_models()["llama-3.1-8b"], "quantization_config": quant}
    arch = from_hf_config(cfg, "q", "config.json")
    assert arch.fp8_native is fp8
    assert any("not modelled" in a for a in arch.assumptions) is note
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["profile", "--analytic", "--model", str(path), "--gpu", "H200", "--out", str(tmp_path / "p.yaml")]) == 0
    err = capsys.readouterr().err
    assert ("note: quantization_config" in err) is note
    assert ("is not modelled" in load_profile(str(tmp_path / "p.yaml")).provenance["model"]) is note


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "..", ""])
def test_a_profile_name_is_one_file_name(tmp_path, monkeypatch, capsys, name):
    """The default output is profiles/<name>.yaml: --name ../../x wrote two folders above it."""
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H200", "--name", name, "-q"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--name" in err and "Traceback" not in err, err
    assert not list(tmp_path.rglob("*.yaml")) and not list(tmp_path.parent.parent.glob("escaped*"))


GPT_OSS_CHECKPOINT_GIB = {"gpt-oss-20b": 12.8, "gpt-oss-120b": 60.8}
"""Checkpoint sizes from the gpt-oss model card (OpenAI, 2025, table 1): 20.91B parameters in
12.8 GiB, 116.83B in 60.8 GiB, the MoE weights in mxfp4 and the rest in bf16."""


@pytest.mark.parametrize("name", list(GPT_OSS_CHECKPOINT_GIB))
def test_mxfp4_experts_are_priced_at_their_checkpoint_size(name):
    """gpt-oss's experts were priced as bf16 (40 GiB for the 20b where its checkpoint is
    12.8 GiB); at 4.25 bits per expert weight the weights match the checkpoint within 3 %."""
    arch = load_model(name)
    assert arch.weight_format == "mxfp4"
    assert not any("not modelled" in a for a in arch.assumptions)
    gib = weights_bytes(arch, Parallel(tp=1, dtype="mxfp4")) / 2**30
    assert gib == pytest.approx(GPT_OSS_CHECKPOINT_GIB[name], rel=0.03)
    # tensor parallelism shards the experts and the rest alike
    assert weights_bytes(arch, Parallel(tp=2, dtype="mxfp4")) < 0.55 * weights_bytes(arch, Parallel(tp=1, dtype="mxfp4"))


@pytest.mark.parametrize("gpu", ["H200", "B200"])
def test_an_mxfp4_checkpoint_gets_a_larger_kv_pool_and_a_shorter_decode(tmp_path, gpu):
    """The default dtype of an mxfp4 checkpoint is mxfp4: fewer weight bytes leave more of the
    GPU to the KV pool, and a batch-1 decode reads fewer bytes, so it is shorter."""
    from specsched.sim.defaults import kv_pool_tokens, mem_fraction_static, memory_buckets
    from specsched.sim.hardware import Hardware

    arch, g = load_model("gpt-oss-20b"), load_gpu(gpu)
    fp4, bf16 = build_profile(arch, g), build_profile(arch, g, dtype="bf16")
    assert fp4["analytic"]["dtype"] == "mxfp4" and "mxfp4" in fp4["name"]
    assert fp4["hardware"]["weight_bytes"] < 0.4 * bf16["hardware"]["weight_bytes"]

    def pool(d):
        hw = Hardware.model_validate(d["hardware"])
        chunk, graph = memory_buckets(hw.memory_mib, hw.tp_size)
        return kv_pool_tokens(hw, mem_fraction_static(hw, chunk, 16384, graph))

    assert pool(fp4) > pool(bf16) > 0
    extra_gib = (bf16["hardware"]["weight_bytes"] - fp4["hardware"]["weight_bytes"]) / 2**30
    assert extra_gib > 25
    dec = fp4["gpu"]["decode"]
    i, j = dec["x"].index(1.0), dec["context_len"].index(1024.0)
    assert dec["seconds"][i][j] < 0.8 * bf16["gpu"]["decode"]["seconds"][i][j]
    # at batch 1 the experts' time is their bytes: 4.25 bits a weight where bf16 is 16
    par = {d: Parallel(tp=1, dtype=d) for d in ("mxfp4", "bf16")}
    e = {d: decode_like(arch, g, par[d], Efficiency(), 1, 1, 1024).experts_s for d in par}
    assert e["mxfp4"] == pytest.approx(e["bf16"] * 4.25 / 16)
    assert "mxfp4" in fp4["provenance"]["dtype"]
    # the profile validates and regenerates to the same numbers
    path = tmp_path / "p.yaml"
    from specsched.sim.analytic.cli import write_analytic_profile

    write_analytic_profile(fp4, path)
    again = regenerate(load_profile(str(path)))
    assert again["gpu"]["decode"] == fp4["gpu"]["decode"]
    assert again["hardware"]["weight_bytes"] == fp4["hardware"]["weight_bytes"]


def test_fp4_gemms_run_at_the_fp4_peak_only_where_the_gpu_has_one():
    """An extend is compute-bound: its mxfp4 expert GEMMs run at B200's FP8 peak (SGLang's
    default mxfp4 MoE runner quantizes the activations to mxfp8, and fp8 x fp4 runs at the FP8
    rate; they were priced at its FP4 peak), nvfp4 linears at its FP4 peak, while on H200 (no
    FP4 tensor cores: dequantized to bf16) only the bytes shrink. On MI355X AITER runs mxfp4
    experts as w4a4: the FP4 peak. Attention projections of an mxfp4 checkpoint stay at the
    bf16 rate either way."""
    arch, eff = load_model("gpt-oss-120b"), Efficiency()
    assert load_gpu("H200").fp4_tflops is None
    b200 = load_gpu("B200")
    assert b200.peak_flops("mxfp4") == b200.peak_flops("fp8") and b200.peak_flops("nvfp4") == 2 * b200.peak_flops("fp8")
    assert load_gpu("MI355X").peak_flops("mxfp4") == load_gpu("MI355X").fp4_tflops * 1e12
    for gpu in ("H200", "B200"):
        g = load_gpu(gpu)
        fp4 = extend(arch, g, Parallel(tp=1, dtype="mxfp4"), eff, 8192, 4096)
        bf16 = extend(arch, g, Parallel(tp=1, dtype="bf16"), eff, 8192, 4096)
        assert fp4.linear_s == pytest.approx(bf16.linear_s)
        if gpu == "B200":
            assert fp4.experts_s < 0.6 * bf16.experts_s
        else:
            assert fp4.experts_s == pytest.approx(bf16.experts_s)


@pytest.mark.parametrize(("quant", "fmt"), [
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]}, "mxfp4"),
    ({"quant_method": "modelopt_fp4"}, "nvfp4"), ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, None), ("mxfp4", "mxfp4"), ({"quant_method": "awq"}, "int4"),
    ({"quant_method": "gptq", "bits": 4}, "int4"), ({"quant_method": "gptq", "bits": 8}, None),
    # no quant_method (SGLang's _parse_quant_hf_config sends it to the ModelOpt parser), flat or
    # nested as an hf_quant_config.json: these were priced as bf16 without a word
    ({"quant_algo": "NVFP4"}, "nvfp4"), ({"quantization": {"quant_algo": "NVFP4"}}, "nvfp4"),
    ({"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4"}}, "nvfp4"),
])
def test_a_4bit_checkpoint_is_read_from_its_quantization_config(quant, fmt):
    cfg = {**shipped_models()["qwen3-30b-a3b"], "quantization_config": quant}
    arch = from_hf_config(cfg, "q", "config.json")
    assert arch.weight_format == fmt
    if fmt:
        full = weights_bytes(arch, Parallel(tp=1, dtype="bf16"))
        four = weights_bytes(arch, Parallel(tp=1, dtype=fmt))
        # nvfp4 also covers the attention and router linears, mxfp4 only the experts
        assert four < full / 2.5
        if fmt == "nvfp4":
            assert four < weights_bytes(arch, Parallel(tp=1, dtype="mxfp4"))


LLAMA_PROFILE_SHA256 = {
    ("H200", 1, None): "731e6428c7eb393c9c59ee76fd0d1d6ce25c783266526069302b808e483ae3e9",
    ("B200", 2, None): "72945d1ad20905b988f96e54f9bb7d1348f2218c1d4bbc7381313cb1523747ab",
    # fp8: the grids where the LM head's GEMM is compute-bound moved when it went to the bf16
    # peak (test_the_lm_head_runs_at_bf16_whatever_the_weight_format); it was
    # 4a13a691ea1247c1e60f04755357180ae23200460a224af6ad86d65bbd06416b
    ("H200", 1, "fp8"): "0c38683765e5823b47ab427da4c77bea1d3fef20492d2d02e35aeb03d11a9911",
    ("MI355X", 1, None): "7ab7851e8ce4852b1a921159e1b5ea340922de59363a8dcf2e6edd6404dd37a4",
}
"""SHA-256 of llama-3.1-8b's profile as written before 4-bit weights were priced, less the
dated method line and the GPU's datasheet text (B200's and MI355X's now cite their FP4 peak)."""


def _digest(d):
    import hashlib

    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize(("gpu", "tp", "dtype"), list(LLAMA_PROFILE_SHA256))
def test_a_bf16_or_fp8_profile_is_unchanged_by_the_4bit_formats(gpu, tp, dtype):
    """Regression: every number and every other line of a bf16 or fp8 Llama profile is what it
    was before, on GPUs with an FP4 peak (B200, MI355X) too: fp4_tflops is not written there."""
    d = build_profile(load_model("llama-3.1-8b"), load_gpu(gpu), tp, dtype)
    assert "fp4_tflops" not in d["analytic"]["gpu"] and "dtype" not in d["provenance"]
    # added since: the draft grid's tokens per request and the sentence saying so (nothing else)
    assert d["gpu"].pop("draft_step_tokens_per_request") == 6
    d["provenance"]["gpu.draft_step"] = d["provenance"]["gpu.draft_step"].split("; gpu.draft_step_tokens_per_request")[0]
    # and the KV-transfer cost a prefill-decode what-if reads, with its three provenance lines
    assert d.pop("kv_transfer")["bytes_per_token"] == d["hardware"]["kv_cell_bytes"]
    for k in ("bytes_per_token", "link_bytes_per_s", "latency_s"):
        d["provenance"].pop(f"kv_transfer.{k}")
    # and the KV cache's element size (--kv-cache-dtype; auto is bf16, 2 bytes)
    assert d["analytic"]["model"].pop("kv_cache_bytes") == 2
    # and the drafter's KV, counted in the pool when a scenario speculates (one of the 32 layers)
    assert d["hardware"].pop("draft_kv_cell_bytes") == d["hardware"]["kv_cell_bytes"] / 32
    d["provenance"].pop("hardware.draft_kv_cell_bytes")
    # and the drafter's weights, loaded only when a scenario speculates (one decoder layer, sharing
    # the target's embedding and LM head)
    assert 0 < d["hardware"].pop("draft_weight_bytes") < d["hardware"]["weight_bytes"] / 30
    d["provenance"].pop("hardware.draft_weight_bytes")
    # and the KV heads (ROCm's default attention backend for MLA depends on them)
    assert d["hardware"].pop("num_kv_heads") == 8
    # and the node a TP group spans beyond (its NICs and the inter-node all-reduce latency)
    assert (d["analytic"]["gpu"].pop("node_gpus"), d["analytic"]["gpu"].pop("nic_gbps")) == (8, 50)
    d["analytic"]["efficiency"].pop("internode_allreduce_latency_s")
    d["provenance"].pop("analytic.efficiency.internode_allreduce_latency_s")
    # and, above TP1, the attention weights each GPU holds beyond its TP share under DP attention
    dp_w = d["hardware"].pop("dp_attention_weight_bytes", None)
    assert (dp_w is None) == (tp == 1) and (d["provenance"].pop("hardware.dp_attention_weight_bytes", None) is None) == (tp == 1)
    # and the memory taken before loading, written from the GPU table's stated assumption (it was
    # the same 1 GiB, read from the Hardware default, with the same provenance sentence)
    assert d["hardware"].pop("context_mib") == d["analytic"]["gpu"].pop("context_mib") == 1024
    assert "gpus.yaml" in d["provenance"]["hardware.context_mib"]
    d["provenance"]["hardware.context_mib"] = ("assumed 1 GiB taken before SGLang measures free memory "
                                               "(driver context, NCCL/RCCL buffers)")
    # and the issue of an extend (injection) that runs eagerly, beside the prefill graph's
    # (where the prefill graph is the default: CUDA)
    for k in ("extend", "inject"):
        eager = d["host"].pop(f"launch_per_{k}_eager_s", None)
        assert eager is None if gpu == "MI355X" else eager > d["host"][f"launch_per_{k}_s"]
        assert (d["provenance"].pop(f"host.launch_per_{k}_eager_s", None) is None) == (gpu == "MI355X")
    full = _digest({**d, "provenance": {k: v for k, v in d["provenance"].items() if k != "method"}})
    for k in ("method", "gpu"):
        d["provenance"].pop(k)
    d["analytic"]["gpu"].pop("source")
    assert _digest(d) == LLAMA_PROFILE_SHA256[gpu, tp, dtype]
    if gpu == "H200":  # untouched datasheet text: byte for byte, the date aside
        assert full == {None: "db362322571b60a3a7bf46cd3e55aecd01466cdb7237720c7f9ec1196fa5198f",
                        # fp8 was a37cb0f020707690936e09687412d76d825e3144dec2892d1749664eddcce040
                        # before the LM head went to the bf16 peak (above)
                        "fp8": "5b7118fb56396eb3472ef42100269439386e846b0b6e2bede632ae4f940d32ee"}[dtype]


@pytest.mark.parametrize(("model", "quant", "dtype", "said", "unsaid"), [
    # an unpriced checkpoint format with --dtype given is priced in that format, not as bf16
    ("llama-3.1-8b", {"quant_method": "bitsandbytes", "load_in_4bit": True}, "nvfp4", "weights priced as nvfp4",
     "priced as bf16"),
    # mxfp4 quantizes routed experts only (SGLang Mxfp4Config.get_quant_method): a dense model stays bf16
    ("llama-3.1-8b", None, "mxfp4", "every weight is priced as bf16", None),
    ("gpt-oss-20b", None, "mxfp4", None, "not modelled"),
])
def test_a_dtype_note_says_how_the_weights_are_priced(tmp_path, capsys, model, quant, dtype, said, unsaid):
    """--dtype nvfp4 on a gptq checkpoint said 'weights priced as bf16' while pricing nvfp4;
    --dtype mxfp4 on a dense model wrote an 'mxfp4' profile priced as bf16 without a word."""
    cfg = {**shipped_models()[model], "quantization_config": quant}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["profile", "--analytic", "--model", str(path), "--gpu", "H200", "--dtype", dtype,
                 "--out", str(tmp_path / "p.yaml")]) == 0
    err = capsys.readouterr().err
    prov = load_profile(str(tmp_path / "p.yaml")).provenance["model"]
    if said:
        assert said in err and said in prov
    if unsaid:
        assert unsaid not in err and unsaid not in prov


def test_the_no_pool_note_offers_fp8_only_to_bf16_weights(tmp_path, capsys):
    """A 4-bit profile with no KV pool was told to try --dtype fp8, whose weights are larger."""
    for dtype, fp8 in (("mxfp4", False), ("bf16", True)):
        assert main(["profile", "--analytic", "--model", "gpt-oss-120b", "--gpu", "RTX5090", "--dtype", dtype,
                     "--out", str(tmp_path / "p.yaml")]) == 0
        err = capsys.readouterr().err
        assert "leave no KV pool" in err
        assert ("--dtype fp8" in err) is fp8


_CHAIN_L8 = None


def _chain_l8() -> Profile:
    global _CHAIN_L8
    if _CHAIN_L8 is None:
        _CHAIN_L8 = Profile.model_validate(build_profile(L8, load_gpu("H100"), 1, window=4, drafter="chain"))
    return _CHAIN_L8


@settings(max_examples=30, deadline=None)
@given(bs=st.sampled_from([1, 8, 24, 64]), topk=st.integers(2, 8), extra=st.integers(0, 20))
def test_a_draft_tree_reads_each_requests_kv_once_per_draft_forward(bs, topk, extra):
    """INV-DK1: a chain drafter's draft forwards read each request's KV once, however many
    tokens a request carries in them (topk branches per draft step: FA3's cascade draft
    decode over the shared prefix; num_draft_tokens in the draft extend after verify: one
    extend row per request, speculative/eagle_worker_v2.py _draft_extend_for_decode). So a
    cycle grows with context exactly as a topk-1 chain of the same steps does: the verify's
    context part is per request too. Before, the tree read it topk (and num_draft_tokens)
    times over."""
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel

    p = _chain_l8()
    steps = 3
    ndt = min(64, steps + 1 + extra, steps * topk + 1)

    def growth(k: int, n: int) -> float:
        s = ServerArgs(speculative_algorithm="eagle3", speculative_num_steps=steps, speculative_eagle_topk=k,
                       speculative_num_draft_tokens=n, cuda_graph_max_bs=256, max_total_num_tokens=10**6)
        cm = CostModel(p, s)
        return cm.step_s(bs, 8000) - cm.step_s(bs, 1000)

    chain = growth(1, steps + 1)
    assert chain > 0
    assert growth(topk, ndt) == pytest.approx(chain, rel=1e-6)


def test_an_eagle3_head_computes_logits_over_its_own_draft_vocab():
    """EAGLE-3 heads carry their own LM head of draft_vocab_size rows (SGLang 0.5.23
    models/llama_eagle3.py ParallelLMHead(config.draft_vocab_size)): a batch-1 draft step
    then reads (128256 - 32000) x 4096 bf16 weights fewer and makes as many fewer logits
    (LOGIT_PASS_BYTES each), at the HBM rate; the head's rows count in the weights once;
    regenerate keeps it; a head larger than the target's vocab is refused on one line."""
    from specsched.sim.analytic.roofline import LOGIT_PASS_BYTES, Efficiency

    h100 = load_gpu("H100")
    full = build_profile(L8, h100, 1, window=4, drafter="chain")
    own = build_profile(L8, h100, 1, window=4, drafter="chain", draft_vocab=32000)
    cut = 128256 - 32000
    bw = h100.hbm_tbps * 1e12 * Efficiency().hbm

    def cell(d, x, c):
        g = d["gpu"]["draft_step"]
        return g["seconds"][g["x"].index(float(x))][g["context_len"].index(float(c))]

    assert cell(full, 1, 1024) - cell(own, 1, 1024) == pytest.approx((2 * 4096 + LOGIT_PASS_BYTES) * cut / bw, rel=1e-3)
    assert full["gpu"]["verify"] == own["gpu"]["verify"] and full["gpu"]["decode"] == own["gpu"]["decode"]
    assert own["hardware"]["weight_bytes"] - full["hardware"]["weight_bytes"] == pytest.approx(32000 * 4096 * 2, abs=2)
    again = regenerate(Profile.model_validate(own), matmul=0.7)
    assert again["gpu"]["draft_step"] == own["gpu"]["draft_step"] and again["analytic"]["draft_vocab"] == 32000
    with pytest.raises(ConfigError, match="--draft-vocab"):
        build_profile(L8, h100, 1, drafter="chain", draft_vocab=200000)


def test_a_chain_drafters_prefill_runs_its_draft_extend_over_the_prompt(tmp_path):
    """SGLang 0.5.23 runs the draft model over every prompt token after a chain drafter's
    target prefill (speculative/eagle_worker_v2.py _forward_prefill_batch ->
    _draft_extend_for_prefill), before the first token's results are read: a lone request's
    TTFT grows by that forward (gpu.draft_inject at the prompt's tokens) over plain decoding's.
    Before, only a block drafter's prefill paid its drafter's forward."""
    import yaml
    from specsched.sim.analytic.cli import write_analytic_profile
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario

    prof = tmp_path / "l8.yaml"
    write_analytic_profile(build_profile(L8, load_gpu("H100"), 1, window=4, drafter="chain"), prof)
    ttft = {}
    for algo in ("none", "eagle"):
        server = {"speculative_algorithm": algo, "max_running_requests": 4}
        if algo != "none":
            server |= {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
        sc = {"name": algo, "profile": str(prof), "server": server, "acceptance": {"mean_accept_length": 2.0},
              "workload": {"kind": "burst", "num_requests": 1, "input_len": {"kind": "fixed", "value": 4096},
                           "output_len": {"kind": "fixed", "value": 4}}}
        (tmp_path / f"{algo}.yaml").write_text(yaml.safe_dump(sc))
        ttft[algo] = run_scenario(load_scenario(tmp_path / f"{algo}.yaml"), seed=1).summary["median_ttft_ms"] / 1e3
    g = load_profile(str(prof)).gpu.draft_inject.interpolator()
    assert ttft["eagle"] - ttft["none"] >= 0.9 * g(4096, 2048) > 0


def test_an_analytic_profile_runs_a_prefill_decode_what_if(tmp_path, capsys):
    """Prefill-decode disaggregation needs the profile's kv_transfer; analytic profiles wrote
    none, so every PD what-if on a model with no measured profile was refused ('kv_transfer =
    None'). The writer now states the rank's KV bytes per token (hardware.kv_cell_bytes)
    and an assumed 400 Gb/s NIC per GPU, with their provenance. Decode servers that never
    stop for a prefill give a shorter TPOT than the colocated server at the same load."""
    import yaml

    prof = Profile.model_validate(build_profile(load_model("qwen2.5-7b"), H200, 1, "bf16"))
    assert prof.kv_transfer is not None
    assert prof.kv_transfer.bytes_per_token == prof.hardware.kv_cell_bytes
    assert "kv_transfer.link_bytes_per_s" in prof.provenance
    pfile = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "qwen2.5-7b", "--gpu", "H200", "--out", str(pfile)]) == 0
    sc = {"name": "pd", "profile": str(pfile),
          "server": {"disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1}}},
          "workload": {"kind": "poisson", "request_rate": 10.0, "num_requests": 60,
                       "input_len": {"kind": "uniform", "value": 2048, "range_ratio": 0.5},
                       "output_len": {"kind": "uniform", "value": 128, "range_ratio": 0.5}}}
    f = tmp_path / "pd.yaml"
    f.write_text(yaml.safe_dump(sc))
    capsys.readouterr()
    tpot = {}
    for name, extra in (("pd", []), ("colocated", ["--set", "server.disaggregation=null"])):
        out = tmp_path / name
        assert main(["run", str(f), *extra, "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
        summary = yaml.safe_load((next(out.rglob("summary.json"))).read_text())
        assert summary["completed"] == 60
        tpot[name] = summary["median_tpot_ms"]
    assert tpot["pd"] < tpot["colocated"]


@pytest.mark.parametrize(("model", "said"), [("deepseek-v3", True), ("qwen3-0.6b", False)])
def test_an_moe_or_mla_profile_says_its_step_has_no_public_anchor(tmp_path, capsys, model, said):
    """A DeepSeek-V3 profile printed 7.6 ms a batch-1 step with no caveat, though no public
    figure checks an MoE/MLA step (dense batch-1 steps are checked within ~5 %)."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", model, "--gpu", "H200", "--tp", "8" if said else "1",
                 "--out", str(out)]) == 0
    assert ("no public figure here checks an MoE/MLA" in capsys.readouterr().err) is said


@pytest.mark.parametrize(("extra", "want"), [
    ({}, 131072),                                                           # max_position_embeddings
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 262144),     # x factor
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),     # llama3: factor 1
    ({"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 131072),
    ({"rope_scaling": None}, 131072),
    ({"seq_length": 8192}, 8192),                                           # earlier key wins
    ({"max_sequence_length": 4096, "seq_length": 8192}, 4096),
    ({"max_position_embeddings": None}, 2048),                              # none: 2048
])
def test_context_length_is_derived_as_sglang_does(extra, want):
    # sglang 0.5.23 utils/hf_transformers/common.py get_context_length: the first of
    # CONTEXT_LENGTH_KEYS (max_sequence_length, seq_length, max_seq_len, model_max_length,
    # max_position_embeddings), times rope_scaling.factor unless original_max_position_embeddings
    # is in rope_scaling or rope_type is llama3; 2048 without any
    cfg = {**shipped_models()["llama-3.1-8b"], **extra}
    assert from_hf_config(cfg, "x", "config.json").context_len == want


@pytest.mark.parametrize(("extra", "key"), [
    ({"rope_scaling": {"factor": "big"}}, "rope_scaling.factor"),
    ({"rope_scaling": {"factor": 0}}, "rope_scaling.factor"),
    ({"rope_scaling": [2.0]}, "rope_scaling"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"seq_length": "8k"}, "seq_length"),
])
def test_a_bad_context_key_is_one_config_error(extra, key):
    from specsched.sim.errors import ConfigError

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        from_hf_config({**shipped_models()["llama-3.1-8b"], **extra}, "x", "config.json")


def test_prefill_runs_eager_where_sglang_turns_the_prefill_graphs_off():
    # cuda_graph_hook.py disable_prefill_cuda_graph_for_deepseek_trtllm_mla (DeepSeek-V3 on SM100)
    # and disable_breakable_cudagraph_if_incompatible ("multimodal model", unless in
    # model_config.py multimodal_breakable_cuda_graph_supported_model_archs)
    from specsched.sim.analytic.roofline import prefill_runs_eager

    dsv3 = load_model("deepseek-v3")
    assert prefill_runs_eager(dsv3, load_gpu("B200")) and not prefill_runs_eager(dsv3, load_gpu("H200"))
    text = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k != "source"}
    llava = from_hf_config({"architectures": ["LlavaForConditionalGeneration"], "text_config": text}, "l", "c")
    assert llava.architectures[0] == "LlavaForConditionalGeneration"   # SGLang's hf_config.architectures[0]
    assert prefill_runs_eager(llava, load_gpu("H100"))
    qwen35 = from_hf_config({"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text}, "q", "c")
    assert not prefill_runs_eager(qwen35, load_gpu("H100"))
    assert not prefill_runs_eager(load_model("llama-3.1-8b"), load_gpu("B200"))


@pytest.mark.parametrize("name, key", [
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"), ("Meta-Llama-3.1-8B", "llama-3.1-8b"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"), ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
    ("LLAMA-3.1-8B", "llama-3.1-8b"), ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b"), ("Qwen/Qwen3-32B", "qwen3-32b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("llama-3.1-8b-xyz", None), ("Qwen/Qwen3-72B", None), ("deepseek-ai/DeepSeek-V3.1", None),
])
def test_a_hugging_face_id_of_a_shipped_architecture_reads_as_it(name, key):
    """A user types the Hub id they serve; a tune, format or date tag does not change the
    shapes, while another size or an unknown tag stays refused (listing the shipped names)."""
    from specsched.sim.analytic.models import load_model, shipped_key

    assert shipped_key(name) == key
    if key is None:
        with pytest.raises(ConfigError, match="nor a shipped model"):
            load_model(name)
    else:
        assert load_model(name).name == key


@pytest.mark.parametrize("name", ["nvidia/Llama-3.1-8B-Instruct-FP8", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
                                  "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "Llama-3.1-8B-Instruct-W8A8-FP8",
                                  "Qwen/Qwen3-30B-A3B-FP8"])
def test_a_hub_id_that_states_fp8_prices_fp8_weights(tmp_path, capsys, name):
    """An FP8 checkpoint's id was read as the shipped bf16 model and priced as bf16 without a
    word: nvidia/Llama-3.1-8B-Instruct-FP8 held 15.36 GiB on an H100 and decoded at 6.6 ms
    (batch 1, 1K context) where its fp8 weights are ~8.7 GiB and ~4 ms. SGLang serves a
    checkpoint in its own format; the profile is now the one --dtype fp8 writes, and the note
    says why and that the name does not tell the KV cache's format."""
    key = "qwen3-30b-a3b" if "Qwen" in name else "llama-3.1-8b"
    out, ref = tmp_path / "named.yaml", tmp_path / "fp8.yaml"
    assert main(["profile", "--analytic", "--model", name, "--gpu", "H100", "--out", str(out)]) == 0
    note = capsys.readouterr().out.splitlines()[0]
    assert main(["profile", "--analytic", "--model", key, "--gpu", "H100", "--dtype", "fp8", "--out", str(ref)]) == 0
    named, fp8 = load_profile(str(out)), load_profile(str(ref))
    assert named.analytic["dtype"] == "fp8" and named.hardware.weight_bytes == fp8.hardware.weight_bytes
    assert named.gpu.decode.seconds == fp8.gpu.decode.seconds and named.name == fp8.name
    assert "priced as fp8, as its FP8 tag states" in note and "--kv-cache-dtype fp8_e4m3" in note, note
    assert name in named.analytic["model"]["source"]


@pytest.mark.parametrize("dtype", ["bf16", "int4", "nvfp4", "mxfp4"])
def test_a_dtype_that_contradicts_an_fp8_hub_id_is_refused(tmp_path, capsys, dtype):
    """--dtype bf16 with an -FP8 id wrote a bf16 profile of an FP8 checkpoint; SGLang serves
    such a checkpoint as fp8 (configs/model_config.py _verify_quantization). One line naming
    --dtype, exit 2, nothing written; --dtype fp8 is taken."""
    out = tmp_path / "x.yaml"
    assert main(["profile", "--analytic", "--model", "nvidia/Llama-3.1-8B-Instruct-FP8", "--gpu", "H100",
                 "--dtype", dtype, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and not out.exists()
    assert f"--dtype = {dtype!r}" in err and "FP8" in err and "allowed: fp8" in err
    assert main(["profile", "--analytic", "--model", "nvidia/Llama-3.1-8B-Instruct-FP8", "--gpu", "H100",
                 "--dtype", "fp8", "--out", str(out)]) == 0


def test_a_hub_id_that_states_bf16_prices_bf16_weights(tmp_path):
    """unsloth/gpt-oss-20b-BF16 (a bf16 conversion, no quantization_config) was read as the
    shipped gpt-oss-20b and priced with its mxfp4 experts: 13 GiB where it holds ~39 GiB."""
    arch = load_model("unsloth/gpt-oss-20b-BF16")
    assert arch.checkpoint_dtype == "bf16" and load_model("gpt-oss-20b").checkpoint_dtype == "mxfp4"
    assert load_model("deepseek-ai/DeepSeek-V3-BF16").checkpoint_dtype == "bf16"
    assert load_model("deepseek-ai/DeepSeek-V3-0324").checkpoint_dtype == "fp8"
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").checkpoint_dtype == "bf16"


def test_a_config_file_wins_over_a_hub_id_of_the_same_path(tmp_path, monkeypatch):
    """A folder laid out as the Hub id (``meta-llama/Llama-3.1-8B-Instruct`` holding a file
    of that name) is read as the file, not as the shipped model its name resembles."""
    from specsched.sim.analytic.models import load_model, shipped_models

    cfg = dict(shipped_models()["llama-3.1-8b"], num_hidden_layers=3)
    (tmp_path / "meta-llama").mkdir()
    (tmp_path / "meta-llama" / "Llama-3.1-8B-Instruct").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").num_layers == 3


@pytest.mark.parametrize("given,suggested", [
    ("NVIDIA H200", "H200"),          # what nvidia-smi prints
    ("H100-SXM", "H100"),
    ("A100-80GB", "A100-80G"),
    ("A100", "A100-80G or A100-40G"),
    ("AMD Instinct MI300X", "MI300X"),
])
def test_an_unknown_gpu_name_suggests_the_shipped_one(given, suggested):
    """A GPU spelt as nvidia-smi or a datasheet spells it was refused with the bare list;
    the refusal now names the shipped GPU it most likely means (not taken silently: an
    H100 PCIe or NVL has other datasheet figures than the shipped SXM H100)."""
    from specsched.sim.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_gpu(given)
    assert f"did you mean {suggested}?" in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unrelated_gpu_name_gets_no_suggestion():
    from specsched.sim.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_gpu("T4")
    assert "did you mean" not in str(e.value) and "shipped: MI355X" in str(e.value)


def test_quiet_analytic_profile_prints_only_the_file_it_wrote(tmp_path, capsys):
    """``specsched profile --analytic ... -q`` printed its five-line summary all the same: the
    -q every command takes ("no progress output") did nothing here. It leaves the line naming
    the file written; notes and warnings still go to stderr."""
    from specsched.cli import main

    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "qwen3-30b-a3b", "--gpu", "H100", "--tp", "2", "--out", str(out),
                 "-q"]) == 0
    o, err = capsys.readouterr()
    assert o.splitlines() == [f"wrote {out}"]
    assert "note:" in err and out.exists()


@pytest.mark.parametrize("bs", [1, 32])
def test_the_draft_extend_after_verify_runs_the_whole_verify_window(bs):
    """SGLang 0.5.23 runs a chain drafter's draft extend after each verify over
    speculative_num_draft_tokens tokens per request, whatever was accepted
    (speculative/eagle_worker_v2.py ``_draft_extend_for_decode``: num_tokens_per_req =
    num_draft_tokens; eagle_worker_common.py ``prepare_for_draft_extend``:
    extend_num_tokens = bs x num_draft_tokens, extend_lens all num_draft_tokens), then
    num_steps - 1 draft decode steps of topk tokens per request. So a cycle's draft forwards
    are one of num_draft_tokens per request (not accepted + 1, nor num_steps + 1) and
    num_steps - 1 of topk, over the graph's padded rows, each request's KV read once."""
    from specsched.sim.config import ServerArgs
    from specsched.sim.cost_model import CostModel

    steps, topk, ndt = 3, 2, 6   # ndt differs from steps + 1 and from the accept window
    s = ServerArgs(speculative_algorithm="eagle3", speculative_num_steps=steps, speculative_eagle_topk=topk,
                   speculative_num_draft_tokens=ndt, cuda_graph_max_bs=256, max_total_num_tokens=10**6)
    cm = CostModel(_chain_l8(), s)
    assert not cm.draft_in_verify
    calls: list[tuple[int, int, int]] = []
    real = cm.draft_s

    def spy(rows: int, requests: int, per_request: int, ctx: float) -> float:
        calls.append((rows, requests, per_request))
        return real(rows, requests, per_request, ctx)

    cm.draft_s = spy
    cm.step_s(bs, 2000)
    rows = cm.padded_batch(bs)
    assert calls == [(rows, bs, ndt), (rows, bs, topk)] and cm.extra_draft_steps == steps - 1


@pytest.mark.parametrize("dtype", ["fp8", "mxfp4", "nvfp4", "int4"])
def test_the_lm_head_runs_at_bf16_whatever_the_weight_format(dtype):
    """SGLang 0.5.23 quantizes LinearBase and FusedMoE modules only (layers/quantization/
    fp8.py ``Fp8Config.get_quant_method``; the 4-bit configs likewise): the LM head, a
    ``VocabParallelEmbedding``, stays bf16, its GEMM at the bf16 peak. A verify with 2048
    logit rows is compute-bound there; under fp8 it was priced at the fp8 peak, half the
    time of the same bf16 GEMM."""
    gpu = load_gpu("B200")
    bf16 = decode_like(L8, gpu, Parallel(tp=1, dtype="bf16"), EFF, 256, 8, 1024).lm_head_s
    other = decode_like(L8, gpu, Parallel(tp=1, dtype=dtype), EFF, 256, 8, 1024).lm_head_s
    assert other == pytest.approx(bf16, rel=1e-12)


def test_a_gpus_own_efficiency_prices_its_gemms_and_an_explicit_factor_wins():
    """CDNA 3 parts reach a lower share of their BF16 peak in GEMMs than the 0.70 default (an
    H100 figure): the table's MI300X/MI325X entries carry their own ``matmul`` (with its
    source), so a compute-bound prefill is priced at it; a factor given explicitly (the command
    line's, a refit's, a stored profile's) still wins, and every table entry names real factors."""
    from specsched.sim.analytic.roofline import Efficiency, gpu_efficiency

    for g in gpu_table().values():           # a typo in the table fails here, not in a user's run
        assert gpu_efficiency(g).model_dump().keys() == Efficiency().model_dump().keys()
    mi300x, h100 = load_gpu("MI300X"), load_gpu("H100")
    assert gpu_efficiency(mi300x).matmul == mi300x.efficiency["matmul"] < Efficiency().matmul
    assert gpu_efficiency(h100) == Efficiency()
    assert gpu_efficiency(mi300x, Efficiency(matmul=0.6)).matmul == 0.6
    assert gpu_efficiency(mi300x, Efficiency(host_ghz=3.0)).matmul == mi300x.efficiency["matmul"]
    arch = load_model("llama-3.1-8b")
    p = build_profile(arch, mi300x, 1)
    assert p["analytic"]["efficiency"]["matmul"] == mi300x.efficiency["matmul"]
    assert "MI300X's own" in p["provenance"]["analytic.efficiency.matmul"]
    # the 1K-token prefill, compute-bound: the datasheet's 1.32x peak over an H100 no longer makes
    # it faster there (it was 18.7 ms against 23.7 ms)
    ext = {g: extend(arch, load_gpu(g), Parallel(), gpu_efficiency(load_gpu(g)), 1024, 1.0).graph_s
           for g in ("MI300X", "H100")}
    assert ext["MI300X"] > ext["H100"]
