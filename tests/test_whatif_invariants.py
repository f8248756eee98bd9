"""What-if invariants on analytic profiles (models and GPUs with no measured profile).

Directions and bounds the physics fixes, whatever the model, GPU or server arguments
(benchmarks/whatif_sanity.py runs the same questions as whole sweeps; docs/whatif-sanity.md):

- INV-W1 a captured graph is never slower than the eager forward it replaces: raising
  cuda_graph_max_bs never raises the GPU time of a step whose batch is a captured size (a
  batch padded up to the next captured size may cost more than running it eagerly when the
  GPU is compute-bound: the padded rows run every GEMM).
- INV-W2 fp8 weights never slow a decode step (half the bytes, at least the bf16 peak).
- INV-W3 a decode step's cost never falls when the batch or the context grows.
- INV-W4 a mixed step (enable_mixed_chunk) is one forward: it costs less than the extend
  and the decode forwards it replaces run back to back (the weights are read once; compared
  without prefill-graph bucket padding).
- INV-W5 a run conserves tokens and time: every request completes with the output it asked
  for, prefilled tokens = prompt tokens, GPU steps never overlap, busy fraction <= 1.
- What SGLang refuses or caps at start is refused or capped: weights that leave no KV pool,
  a request longer than the model's context, a stated KV pool no memory could hold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.cost_model import CostModel
from specsched.sim.engine import run_scenario
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import Profile
from specsched.sim.server_args import ServerArgs

from specsched.cli import main

# (model, GPU, TP): a small dense model, 8B and 70B dense, an MoE, on NVIDIA and AMD parts
SPREAD = [("qwen3-0.6b", "H100", 1), ("llama-3.1-8b", "H200", 1), ("llama-3.1-8b", "MI300X", 1),
          ("llama-3.1-70b", "H100", 8), ("qwen3-30b-a3b", "MI355X", 1), ("deepseek-v3", "H200", 8)]
_PROFILES: dict[tuple, Profile] = {}


def analytic(model: str, gpu: str, tp: int, dtype: str | None = None) -> Profile:
    key = (model, gpu, tp, dtype)
    if key not in _PROFILES:
        _PROFILES[key] = Profile.model_validate(build_profile(load_model(model), load_gpu(gpu), tp, dtype))
    return _PROFILES[key]


def cost(profile: Profile, **server) -> CostModel:
    srv = {"max_running_requests": 1024, "max_total_num_tokens": 1_000_000, **server}
    return CostModel(profile, ServerArgs.model_validate(srv))


shape = st.sampled_from(SPREAD)
batch = st.integers(1, 600)
context = st.integers(0, 60_000)


@settings(max_examples=60, deadline=None)
@given(shape, st.data(), context, st.sampled_from([1, 8, 64, 256]), st.sampled_from([1, 3]))
def test_w1_a_larger_graph_limit_never_slows_a_step(s, data, ctx, small, window):
    spec = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": window} if window > 1 else {}
    p = analytic(*s)
    hi_cost = cost(p, cuda_graph_max_bs=1024, **spec)
    bs = data.draw(st.sampled_from(hi_cost.graph_bs))
    lo = cost(p, cuda_graph_max_bs=small, **spec).step_s(bs, ctx)
    hi = hi_cost.step_s(bs, ctx)
    assert hi <= lo * (1 + 1e-6)  # 1 ns per ms: float summation order, not physics


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("llama-3.1-8b", "H200"), ("llama-3.1-8b", "MI300X"), ("llama-3.1-8b", "A100-80G"),
                        ("qwen3-30b-a3b", "MI355X"), ("qwen3-0.6b", "RTX5090")]), batch, context)
def test_w2_fp8_weights_never_slow_a_decode_step(mg, bs, ctx):
    bf16 = cost(analytic(*mg, 1, "bf16"), cuda_graph_max_bs=1024).step_s(bs, ctx)
    fp8 = cost(analytic(*mg, 1, "fp8"), cuda_graph_max_bs=1024).step_s(bs, ctx)
    assert fp8 <= bf16 * (1 + 1e-6)  # 1 ns per ms: float summation order, not physics


@settings(max_examples=60, deadline=None)
@given(shape, batch, context, st.integers(1, 64), st.integers(0, 8000))
def test_w3_a_step_never_gets_cheaper_with_more_work(s, bs, ctx, more_bs, more_ctx):
    c = cost(analytic(*s), cuda_graph_max_bs=256)
    assert c.step_s(bs + more_bs, ctx) >= c.step_s(bs, ctx) * (1 - 1e-6)
    assert c.step_s(bs, ctx + more_ctx) >= c.step_s(bs, ctx) * (1 - 1e-6)


def _mixed(ext: list[int], ext_prefix: list[int], dec_ctx: list[int]) -> BatchPlan:
    n = len(ext) + len(dec_ctx)
    return BatchPlan(0, ForwardMode.MIXED, tuple(range(n)), tuple(ext + [1] * len(dec_ctx)),
                     tuple(ext_prefix + dec_ctx), num_extend=len(ext))


@settings(max_examples=40, deadline=None)
@given(shape, st.lists(st.integers(16, 4096), min_size=1, max_size=3),
       st.lists(st.integers(10, 8000), min_size=1, max_size=48), st.booleans())
def test_w4_a_mixed_step_reads_the_weights_once(s, ext, dec_ctx, spec):
    """SGLang 0.5.23 schedule_batch.py ``mix_with_running``: the running requests join the
    extend batch as one-token extend rows (ForwardMode.MIXED) and the whole batch runs one
    extend forward. It used to cost, without speculative decoding, an extend forward plus a
    full decode forward: every weight read twice. Each row still reads its own KV in that
    forward (tests/test_mixed_step_kv.py), so the step costs at least the chunk's extend
    plus the rows' KV reads."""
    srv = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4} if spec else {}
    # prefill graphs off: a mixed step's extra rows may push its tokens into a larger
    # prefill-graph bucket, whose padded rows cost what they cost (real, not compared here)
    c = cost(analytic(*s), enable_mixed_chunk=True, disable_prefill_cuda_graph=True, **srv)
    plan = _mixed(ext, [0] * len(ext), dec_ctx)
    mixed = c.gpu(plan).total_s
    apart = c.extend_s(ext, [0] * len(ext)) + c.step_s(len(dec_ctx), float(np.mean(dec_ctx)))
    alone = c.extend_s(ext, [0] * len(ext))
    assert alone + c.rows_context_s(len(dec_ctx), float(np.mean(dec_ctx))) <= mixed * (1 + 1e-12)
    assert mixed < apart


# ------------------------------------------------------------------ whole runs

@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("whatif")
    for model, gpu, tp in SPREAD:
        write_analytic_profile(build_profile(load_model(model), load_gpu(gpu), tp), d / f"{model}-{gpu}-{tp}.yaml")
    base = {"name": "whatif", "profile": "PROFILE", "server": {"speculative_algorithm": "none"},
            "workload": {"kind": "poisson", "num_requests": 24, "request_rate": 4.0,
                         "input_len": {"kind": "uniform", "value": 2048, "range_ratio": 0.1},
                         "output_len": {"kind": "uniform", "value": 64, "range_ratio": 0.5}}}
    (d / "whatif.yaml").write_text(yaml.safe_dump(base))
    return d


def _run(d, s, seed=1, **ov):
    model, gpu, tp = s
    sc = load_scenario_with_overrides(d / "whatif.yaml", "base",
                                      {"profile": str(d / f"{model}-{gpu}-{tp}.yaml"), **ov})
    return run_scenario(sc, seed=seed), sc


server_knobs = st.fixed_dictionaries({}, optional={
    "server.chunked_prefill_size": st.sampled_from([64, 512, 4096, -1]),
    "server.cuda_graph_max_bs": st.sampled_from([1, 4, 32]),
    "server.enable_mixed_chunk": st.booleans(),
    "server.enable_overlap_schedule": st.booleans(),
    "server.max_running_requests": st.sampled_from([1, 3, 16]),
    "workload.request_rate": st.sampled_from([1.0, 50.0, math.inf]),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape, server_knobs, st.sampled_from(["none", "dspark", "eagle"]), st.integers(1, 3))
def test_w5_runs_conserve_tokens_and_time(scenario_file, s, knobs, alg, seed):
    ov = dict(knobs)
    if alg != "none":
        ov.update({"server.speculative_algorithm": alg, "server.speculative_num_draft_tokens": 3,
                   "acceptance": {"mean_accept_length": 2.0}})
        if alg == "eagle":   # a chain states its steps (SGLang refuses the window alone)
            ov["server.speculative_num_steps"] = 2
    r, sc = _run(scenario_file, s, seed, **ov)
    sm, st_, rq = r.summary, r.steps, r.requests
    assert int(sm["completed"]) == sc.workload.num_requests
    assert int(sm["total_output_tokens"]) == int(rq["output_len"].sum())
    main = st_[(st_["mode"] != "decode") & (st_["mode"] != "verify") & (st_["part"] == "main")]
    assert int(main["num_extend_tokens"].sum()) == int(rq["input_len"].sum())  # no retraction at this pool
    assert 0.0 <= sm["gpu_busy_fraction"] <= 1.0 + 1e-9
    assert not any(isinstance(v, float) and math.isinf(v) for v in sm.values())
    g0, g1 = st_["gpu_start_s"].to_numpy(float), st_["gpu_end_s"].to_numpy(float)
    o = np.argsort(g0, kind="stable")
    assert (g1 >= g0 - 1e-12).all() and (g0[o][1:] >= g1[o][:-1] - 1e-9).all()


def test_w4_mixed_chunk_costs_a_light_load_little_ttft(scenario_file):
    """End to end: with enable_mixed_chunk the running requests ride in the extend forward
    instead of a decode forward after it, so a prompt's first token comes barely later and
    the running requests' TPOT does not rise (mean of 3 seeds)."""
    s = ("llama-3.1-8b", "H200", 1)
    off = [_run(scenario_file, s, seed, **{"workload.request_rate": 8.0})[0].summary for seed in (1, 2, 3)]
    on = [_run(scenario_file, s, seed, **{"workload.request_rate": 8.0, "server.enable_mixed_chunk": True})[0].summary
          for seed in (1, 2, 3)]
    ttft_off, ttft_on = (np.mean([x["mean_ttft_ms"] for x in v]) for v in (off, on))
    tpot_off, tpot_on = (np.mean([x["mean_tpot_ms"] for x in v]) for v in (off, on))
    assert ttft_on < ttft_off * 1.05
    assert tpot_on <= tpot_off * 1.001


# ------------------------------------------------ what SGLang refuses or caps at start

def _refused(capsys, tmp_path, argv: list[str], *needles: str) -> None:
    out = tmp_path / "res"
    assert main([*argv, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("specsched: error: "), err
    for n in needles:
        assert n in err, (n, err)
    assert not out.exists()


def test_weights_that_leave_no_kv_pool_are_refused(scenario_file, tmp_path, capsys):
    """Llama-3.1-70B bf16 on one 80 GiB A100: SGLang stops at start ("Not enough memory",
    model_executor/pool_configurator.py). The run used to go on with the generic default
    pool of 724,000 tokens (232 GB of KV on an 80 GB GPU)."""
    prof = tmp_path / "l70-a100.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-70b"), load_gpu("A100-80G"), 1), prof)
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set", f"profile={prof}"],
             "hardware.weight_bytes", "Not enough memory")


def test_the_python_api_refuses_weights_that_leave_no_kv_pool_too(scenario_file, tmp_path):
    """``run_scenario`` / ``SimEngine`` (a notebook, a script) simulated Llama-3.1-70B bf16 on
    one 80 GiB A100 at the generic 724,000-token pool where the command line refused it."""
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario
    from specsched.sim.errors import ConfigError
    from specsched.sim.profile import load_profile

    prof = tmp_path / "l70-a100.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-70b"), load_gpu("A100-80G"), 1), prof)
    sc = load_scenario(scenario_file / "whatif.yaml")
    with pytest.raises(ConfigError, match="Not enough memory") as e:
        run_scenario(sc.model_copy(update={"profile": str(prof)}), profile=load_profile(str(prof)), warn=False)
    assert e.value.key == "hardware.weight_bytes"


def test_the_no_pool_figures_of_profile_and_run_agree(scenario_file, tmp_path, capsys):
    """A profile with a drafter: `profile --analytic` warned of 66.5 GiB of weights and `run`
    (no speculative decoding, so no drafter loaded) refused hardware.weight_bytes = '65.7 GiB',
    a value the field does not hold. Each now says which weights it counts."""
    prof = tmp_path / "l70-h100-2.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "2", "--out", str(prof)]) == 0
    warn = capsys.readouterr().err
    hw = yaml.safe_load(prof.read_text())["hardware"]
    total, draft = hw["weight_bytes"] / 2**30, hw["draft_weight_bytes"] / 2**30
    assert f"{total - draft:.1f} GiB of weights per rank (the drafter's {draft:.1f} GiB not counted)" in warn, warn
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set", f"profile={prof}"],
             f"hardware.weight_bytes = '{total:.1f} GiB'", f"{total - draft:.1f} GiB of them loaded without speculative")


def test_the_no_pool_refusal_offers_fp8_only_to_bf16_weights(scenario_file, tmp_path, capsys):
    """gpt-oss-120b mxfp4 on one RTX5090 was told to use fp8 weights, which are larger."""
    for dtype, fp8 in (("mxfp4", False), ("bf16", True)):
        prof = tmp_path / f"oss-{dtype}.yaml"
        write_analytic_profile(build_profile(load_model("gpt-oss-120b"), load_gpu("RTX5090"), 1, dtype), prof)
        _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set", f"profile={prof}"],
                 "hardware.weight_bytes", "Not enough memory", *(["--dtype fp8"] if fp8 else []))
        assert main(["run", str(scenario_file / "whatif.yaml"), "--set", f"profile={prof}", "--out",
                     str(tmp_path / "o"), "--quiet"]) == 2
        assert ("--dtype fp8" in capsys.readouterr().err) is fp8


@pytest.mark.parametrize(("prompt", "output", "key"), [(50_000, 64, "workload.input_len"),
                                                       (40_900, 200, "workload.output_len")])
def test_requests_longer_than_the_context_are_refused(scenario_file, tmp_path, capsys, prompt, output, key):
    """Qwen3-0.6B's context is 40,960 tokens: SGLang rejects a longer prompt, or a prompt
    plus max_new_tokens above it (managers/tokenizer_manager.py _validate_one_request).
    They used to be served."""
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set",
                                f"profile={scenario_file / 'qwen3-0.6b-H100-1.yaml'}",
                                "--set", f"workload.input_len={{kind: fixed, value: {prompt}}}",
                                "--set", f"workload.output_len={{kind: fixed, value: {output}}}"], key, "40960")


def test_a_pool_no_memory_holds_is_cut_to_the_profiled_pool(scenario_file):
    """SGLang takes min(--max-total-tokens, the profiled pool) (mem_cache/
    kv_cache_configurator.py _apply_token_constraints). A stated pool beyond every byte of
    the GPU is cut to the estimate; one that memory could hold is kept (the estimate is
    approximate)."""
    prof = str(scenario_file / "llama-3.1-70b-H100-8.yaml")
    default = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base", {"profile": prof}).server
    huge = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base",
                                        {"profile": prof, "server.max_total_num_tokens": 99_000_000})
    assert huge.server.max_total_num_tokens == default.max_total_num_tokens
    assert any(r.key == "max_total_num_tokens" and "capped" in r.why for r in huge._resolved_defaults)
    kept = default.max_total_num_tokens + 1000  # above the estimate, within the 80 GiB
    s = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base",
                                     {"profile": prof, "server.max_total_num_tokens": kept}).server
    assert s.max_total_num_tokens == kept


def test_the_battery_judges_directions_and_runs():
    """benchmarks/whatif_sanity.py: a step against the direction beyond the tolerance fails,
    within it passes; one small check runs end to end and passes."""
    from conftest import load_benchmark

    wb = load_benchmark("whatif_sanity")
    assert wb.judge([1.0, 2.0, 2.0], +1, 0.0, 0.0)[0]
    assert not wb.judge([1.0, 0.9], +1, 0.03, 0.0)[0]
    assert wb.judge([1.0, 0.98], +1, 0.03, 0.0)[0]
    assert not wb.judge([1.0, 1.1], -1, 0.03, 0.0)[0]
    assert not wb.judge([1.0, float("nan")], -1, 0.03, 0.0)[0]
    assert wb.main(["--seeds", "1", "--only", "tp_tpot"]) == 0


def test_compare_of_arms_without_speculation_reads_na(scenario_file, capsys):
    """`specsched compare` of two plain-decoding arms: verify_cycles_per_s is NaN in every
    run. The comparison's pivot dropped the all-NaN column and the command ended in a
    KeyError traceback; then the default table showed it as a row of n/a over 0 seeds."""
    import pandas as pd
    from specsched.analysis import compare

    rows = [(arm, s, m, v) for arm in ("base", "mixed") for s in (1, 2, 3)
            for m, v in (("output_throughput", 1000.0 + s + (arm == "mixed")), ("verify_cycles_per_s", float("nan")))]
    samples = pd.DataFrame(rows, columns=["arm", "seed", "metric", "value"])
    # asked for by name, the metric with no value reads n/a (no KeyError)
    table = compare.summarize_comparison(samples, ["output_throughput", "verify_cycles_per_s"])
    assert set(table["metric"]) == {"output_throughput", "verify_cycles_per_s"}
    assert table.loc[table["metric"] == "verify_cycles_per_s", "change_pct"].isna().all()
    # the default table leaves out a metric no arm has a value for (a row of n/a, 0 seeds)
    assert set(compare.summarize_comparison(samples)["metric"]) == {"output_throughput"}
    # and keeps it when one arm has it (speculation in one arm only)
    samples.loc[(samples["arm"] == "mixed") & (samples["metric"] == "verify_cycles_per_s"), "value"] = 90.0
    table = compare.summarize_comparison(samples)
    assert set(table["metric"]) == {"output_throughput", "verify_cycles_per_s"}


def test_the_profile_command_notes_weights_that_do_not_fit(tmp_path, capsys):
    """The profile is written (its costs hold), with a note that SGLang would not start."""
    out = tmp_path / "p.yaml"
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "A100-80G", "--out", str(out)]) == 0
    assert out.exists() and "leave no KV pool" in capsys.readouterr().err
    assert main(["profile", "--analytic", "--model", "llama-3.1-70b", "--gpu", "A100-80G", "--tp", "4",
                 "--out", str(out)]) == 0
    assert "leave no KV pool" not in capsys.readouterr().err


def test_dp_attention_on_a_tp_group_profile_gains_no_free_kv_bandwidth(scenario_file):
    """DP attention splits an analytic profile's TP group into attention ranks; the MLP still
    runs over every rank's tokens and a GQA request's KV is read by fewer GPUs, each reading
    more of it. It used to cost each forward as one rank's batch on the whole group: Llama-70B
    at TP8 with dp_size 8 decoded a burst 4.7x faster than without DP attention. MLA models
    (the latent is read whole by every TP rank) do gain where the KV read is large: each GPU
    reads only its rank's. Under DP attention each GPU holds the attention projections split
    over tp / dp GPUs (hardware.dp_attention_weight_bytes) and reads them every step."""
    from specsched.sim.dp_attention import tp_group_kv_ratio

    def burst(s, dp, prompt=512):
        ov = {"workload.request_rate": math.inf, "workload.num_requests": 192, "server.max_running_requests": 192,
              "workload.input_len": {"kind": "fixed", "value": prompt},
              "workload.output_len": {"kind": "fixed", "value": 128}}
        if dp > 1:
            ov.update({"server.enable_dp_attention": True, "server.dp_size": dp})
        return _run(scenario_file, s, 1, **ov)[0].summary["output_throughput"]

    gqa, mla = ("llama-3.1-70b", "H100", 8), ("deepseek-v3", "H200", 8)
    # GQA: nothing gained (each GPU also reads the attention weights split over 1 GPU, not 8)
    assert burst(gqa, 8) <= burst(gqa, 1) * 1.1
    # MLA: the KV read saved outweighs the attention weights each GPU then reads once the
    # contexts are long (8K-token prompts: +16 %); at 512-token prompts the two about cancel
    assert burst(mla, 8, 8192) > burst(mla, 1, 8192) * 1.05
    assert tp_group_kv_ratio(analytic(*gqa), 8) == 8.0 and tp_group_kv_ratio(analytic(*gqa), 2) == 2.0
    assert tp_group_kv_ratio(analytic(*mla), 8) == 1.0
    assert tp_group_kv_ratio(analytic("qwen3-0.6b", "H100", 1), 4) is None  # per-rank reading kept


def test_dp_attention_gpus_hold_and_read_the_attention_split_over_fewer_gpus(tmp_path):
    """Under --enable-dp-attention --dp-size d the attention projections split over the
    attention TP size tp / d (models/qwen3_moe.py, deepseek_v2.py: num_heads // attn_tp_size),
    so each GPU holds more of them: Qwen3-30B-A3B at TP4 holds 3x its TP4 share more at
    dp_size 4 (its q, k, v, o all split by heads). Those bytes leave the KV pool
    (kv_cache_configurator.py sizes it from the memory left after loading) and every decode
    step reads them. Neither was counted: a rank's pool and step were the TP split's."""
    from specsched.sim.defaults import attention_tp_hardware, kv_pool_tokens, mem_fraction_static_of
    from specsched.sim.dp_attention import dp_attention_weight_read_s

    prof = analytic("qwen3-30b-a3b", "H200", 4)
    extra = prof.hardware.dp_attention_weight_bytes
    assert set(extra) == {2, 4} and extra[4] == pytest.approx(3 * extra[2], rel=1e-6)
    # the pool SGLang leaves a rank: the weights plus the extra, the cell at 4 KV heads per GPU
    p = tmp_path / "q.yaml"
    write_analytic_profile(build_profile(load_model("qwen3-30b-a3b"), load_gpu("H200"), 4), p)
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {p.name}
server: {{enable_dp_attention: true, dp_size: 4}}
workload: {{kind: burst, num_requests: 8, input_len: {{kind: fixed, value: 64}}, output_len: {{kind: fixed, value: 8}}}}
""")
    sc = load_scenario_with_overrides(scn, "base")
    hw = prof.hardware
    mfs = mem_fraction_static_of(sc.server, hw)
    want = kv_pool_tokens(attention_tp_hardware(hw, 4), mfs, sc.server.page_size)
    assert sc.server.max_total_num_tokens == want
    assert attention_tp_hardware(hw, 4).weight_bytes == hw.weight_bytes + extra[4]
    assert want < kv_pool_tokens(hw.model_copy(update={"kv_cell_bytes": 4 * hw.kv_cell_bytes}), mfs, sc.server.page_size)
    # each decode step reads them at the datasheet bandwidth x the HBM efficiency
    gpu = prof.analytic["gpu"]
    assert dp_attention_weight_read_s(prof, 4) == pytest.approx(extra[4] / (gpu["hbm_tbps"] * 1e12 * 0.8))
    assert dp_attention_weight_read_s(prof, 1) == 0.0
    from specsched.sim.dp_attention import DPCost

    assert DPCost(cost(prof), 0.0, 4).attn_weight_s == dp_attention_weight_read_s(prof, 4)


def test_dp_attention_whose_attention_weights_leave_no_pool_is_refused(tmp_path, capsys):
    """Llama-3.1-70B bf16 at TP8 on A100-40Gs leaves a pool; with dp_size 8 each GPU also holds
    the whole attention (19.7 GiB more) and none is left, where SGLang stops ('Not enough
    memory'). The run went on with the fallback pool; it is refused in one line naming
    server.dp_size, and dp_size 2 runs."""
    p = tmp_path / "a.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-70b"), load_gpu("A100-40G"), 8), p)
    scn = tmp_path / "s.yaml"
    scn.write_text(f"""name: t
profile: {p.name}
workload: {{kind: burst, num_requests: 2, input_len: {{kind: fixed, value: 64}}, output_len: {{kind: fixed, value: 4}}}}
""")
    dp = ["--set", "server.enable_dp_attention=true", "--set"]
    assert main(["run", str(scn), *dp, "server.dp_size=8", "--quiet", "--out", str(tmp_path / "o8")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "server.dp_size = 8" in err and "no KV pool" in err, err
    assert not (tmp_path / "o8").exists()
    assert main(["run", str(scn), *dp, "server.dp_size=2", "--quiet", "--out", str(tmp_path / "o2")]) == 0


@pytest.mark.parametrize(("s", "dp"), [(("llama-3.1-8b", "H200", 1), 4), (("llama-3.1-70b", "H100", 8), 3)])
def test_dp_attention_ranks_that_do_not_divide_the_tp_group_are_refused(scenario_file, tmp_path, capsys, s, dp):
    """SGLang asserts tp_size % dp_size == 0 with DP attention (arg_groups/parallel_hook.py
    handle_data_parallelism). An analytic TP1 profile with dp_size 4 used to be read per rank,
    each rank timed on a GPU of its own: Llama-8B on one H100 decoded 17 % faster than
    without DP attention, on hardware that cannot run it."""
    model, gpu, tp = s
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set",
                                f"profile={scenario_file / f'{model}-{gpu}-{tp}.yaml'}",
                                "--set", "server.enable_dp_attention=true", "--set", f"server.dp_size={dp}"],
             "server.dp_size", f"TP size {tp}")


@pytest.mark.parametrize(("key", "value"), [("server.chunked_prefill_size", 100_000_000),
                                            ("server.cuda_graph_max_bs", 100_000)])
def test_a_reserve_larger_than_the_gpu_names_the_setting_not_the_weights(scenario_file, tmp_path, capsys, key, value):
    """SGLang's activation and graph reserve grows with chunked_prefill_size and
    cuda_graph_max_bs (arg_groups/memory_hook.py); one larger than the GPU was refused as
    'weights per rank leave no KV pool ... use more TP ranks', for an 8B model on an H200."""
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set",
                                f"profile={scenario_file / 'llama-3.1-8b-H200-1.yaml'}", "--set", f"{key}={value}"],
             key, "SGLang stops at start")
    assert "weight" not in capsys.readouterr().err


def test_the_reserve_refusal_counts_the_activation_tokens_sglang_reserves_for(scenario_file, tmp_path, capsys):
    """SGLang reserves activation memory for at least 2048 tokens whatever the chunk
    (arg_groups/memory_hook.py; sim.defaults.activation_tokens, which the pool and this
    message share): a 1024-token chunk's refusal said '1024 tokens x 1.5 MiB'."""
    _refused(capsys, tmp_path, ["run", str(scenario_file / "whatif.yaml"), "--set",
                                f"profile={scenario_file / 'llama-3.1-8b-H200-1.yaml'}",
                                "--set", "server.chunked_prefill_size=1024", "--set", "server.cuda_graph_max_bs=100000"],
             "server.cuda_graph_max_bs", "(2048 tokens x 1.5 MiB)")


def test_a_pool_stated_with_its_memory_fraction_is_the_smaller_of_the_two(scenario_file):
    """With both --max-total-tokens and --mem-fraction-static given, SGLang's pool is the
    smaller of the stated cap and the pool that fraction leaves (kv_cache_configurator.py
    _apply_token_constraints): stating mem_fraction_static 0.3 beside 800000 tokens ran 800000."""
    prof = str(scenario_file / "llama-3.1-70b-H100-8.yaml")
    frac = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base",
                                        {"profile": prof, "server.mem_fraction_static": 0.3}).server
    both = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base",
                                        {"profile": prof, "server.mem_fraction_static": 0.3,
                                         "server.max_total_num_tokens": 2 * frac.max_total_num_tokens})
    assert both.server.max_total_num_tokens == frac.max_total_num_tokens
    assert any(r.key == "max_total_num_tokens" and "smaller of --max-total-tokens" in r.why
               for r in both._resolved_defaults)
    below = load_scenario_with_overrides(scenario_file / "whatif.yaml", "base",
                                         {"profile": prof, "server.mem_fraction_static": 0.3,
                                          "server.max_total_num_tokens": frac.max_total_num_tokens // 2}).server
    assert below.max_total_num_tokens == frac.max_total_num_tokens // 2   # a cap below the pool is the pool
