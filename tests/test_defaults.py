"""SGLang's hardware-derived server defaults (sim/defaults.py), one platform at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.bundled import bundled_scenario_names
from specsched.sim.config import AdmissionDelay, SyncMode, load_scenario
from specsched.sim.defaults import (
    auto_max_running_requests,
    kv_pool_tokens,
    mem_fraction_static,
    memory_buckets,
)
from specsched.sim.hardware import Hardware


def _scenario(tmp_path: Path, model: str, gpu: str, tp: int, server: str = "") -> Path:
    prof = tmp_path / f"{gpu}-{model}-tp{tp}.yaml"
    write_analytic_profile(build_profile(load_model(model), load_gpu(gpu), tp), prof)
    scn = tmp_path / f"s-{gpu}-{tp}.yaml"
    scn.write_text(f"""name: t
profile: {prof.name}
server: {{{server}}}
acceptance: {{mean_accept_length: 2.0}}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 64}}, output_len: {{kind: fixed, value: 8}}}}
""")
    return scn


def test_h200_gets_sglangs_h200_defaults(tmp_path):
    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1))
    s = sc.server
    assert (s.chunked_prefill_size, s.cuda_graph_max_bs) == (8192, 256)
    assert s.sync_mode is SyncMode.cross_queue_wait  # a queued Event.wait on CUDA
    assert s.enable_overlap_schedule and not s.prefill_slot_expansion_sync
    # reserved = 512 + 8192 x 1.5 + 1/8 GiB + 256 x 2 + 58 prefill graph sizes x 8 = 13904 MiB
    hw = Hardware(platform="cuda", memory_mib=143771)
    assert mem_fraction_static(hw, 8192, 16384, 256) == round((143771 - 13904) / 143771, 3)
    # KV pool = free memory before weights x 0.903 - weights, over 128 KiB per token
    from specsched.sim.profile import load_profile

    hw_p = load_profile(sc.profile, relative_to=sc.path).hardware
    weights = hw_p.weight_bytes - hw_p.draft_weight_bytes   # no drafter loaded without speculation
    assert s.max_total_num_tokens == int(((143771 - 1024) * 2**20 * 0.903 - weights) // 131072)
    assert s.max_running_requests == auto_max_running_requests(s.max_total_num_tokens, 131072)
    assert {r.key for r in sc._resolved_defaults} >= {"chunked_prefill_size", "max_total_num_tokens"}


def test_h200_speculative_decoding_runs_48_requests(tmp_path):
    scn = _scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                    "speculative_algorithm: dspark, speculative_num_draft_tokens: 4")
    s = load_scenario(scn).server
    assert s.max_running_requests == 48 and s.admission_delay == AdmissionDelay.min_free_slots


def test_deepseek_v4_keeps_its_model_default_under_speculation(tmp_path):
    """SGLang's model hook sets DeepSeek-V4's 256 before the speculative hook, whose reset to
    48 applies only to an unset value; other models with DSpark still get 48, and a value
    the file gives wins over both."""
    spec = "speculative_algorithm: dspark, speculative_num_draft_tokens: 8"
    v4 = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 8, spec)).server
    assert v4.max_running_requests == 256
    v3 = load_scenario(_scenario(tmp_path, "deepseek-v3", "MI355X", 8, spec)).server
    assert v3.max_running_requests == 48
    given_ = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 8,
                                     spec + ", max_running_requests: 40")).server
    assert given_.max_running_requests == 40


def test_mi355x_gets_the_hip_defaults(tmp_path):
    s = load_scenario(_scenario(tmp_path, "deepseek-v3", "MI355X", 8)).server
    assert (s.chunked_prefill_size, s.cuda_graph_max_bs) == (16384, 512)
    assert s.sync_mode is SyncMode.host_block  # a host-blocking synchronize on HIP


def test_small_gpu_gets_the_small_buckets(tmp_path):
    s = load_scenario(_scenario(tmp_path, "qwen3-0.6b", "RTX5090", 1)).server
    assert (s.chunked_prefill_size, s.cuda_graph_max_bs) == (4096, 48)
    assert memory_buckets(32607, 4) == (4096, 160)
    assert memory_buckets(16 * 1024, 1) == (2048, 8)
    assert memory_buckets(40 * 1024, 1) == (4096, 32)
    assert memory_buckets(None, 1) == (4096, 160)


def test_the_file_wins_and_a_given_running_limit_caps_the_graph(tmp_path):
    scn = _scenario(tmp_path, "llama-3.1-8b", "H200", 1, "chunked_prefill_size: 1024, max_running_requests: 32")
    sc = load_scenario(scn)
    assert sc.server.chunked_prefill_size == 1024 and sc.server.max_running_requests == 32
    assert sc.server.cuda_graph_max_bs == 32  # SGLang cuts a default graph size to the limit
    assert "chunked_prefill_size" not in {r.key for r in sc._resolved_defaults}
    # the printed reason says the limit cut it: "SGLang's decode graph limit on H200" alone read as
    # H200's own limit being 32 (it is 256; arg_groups/memory_hook.py handle_gpu_memory_settings)
    why = next(r.why for r in sc._resolved_defaults if r.key == "cuda_graph_max_bs")
    assert "is 256, lowered to the given max_running_requests 32" in why, why
    high = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, "max_running_requests: 1000"))
    why = next(r.why for r in high._resolved_defaults if r.key == "cuda_graph_max_bs")
    assert high.server.cuda_graph_max_bs == 256 and "lowered" not in why, why


def test_set_overrides_resolve_after_they_apply(tmp_path):
    from specsched.analysis.overrides import load_scenario_with_overrides

    scn = _scenario(tmp_path, "llama-3.1-8b", "H200", 1)
    sc = load_scenario_with_overrides(scn, "base", {"server.speculative_algorithm": "eagle",
                                                    "server.speculative_num_draft_tokens": 3,
                                                    "server.speculative_num_steps": 2})
    assert sc.server.max_running_requests == 48


@pytest.mark.parametrize("name", [n for n in bundled_scenario_names() if not n.startswith("h200/")])
def test_shipped_mi355x_and_roofline_cells_keep_their_settings(name):
    """The reference cells state every hardware-derived setting: resolution changes nothing
    that moves their results (the roofline cells run without speculation, where the
    publish wait and slot expansion do not exist)."""
    raw = load_scenario(name, resolve_defaults=False).server
    res = load_scenario(name).server
    diff = {k for k in type(raw).model_fields if getattr(raw, k) != getattr(res, k)}
    if "semantics_rules" in diff:
        # 0.5.23 on an MI355X (gfx95) fills chunks in raw tokens (test_gfx95_chunk_fill.py),
        # which differs from its page-rounded fill only with pages above one token
        assert (raw.rules.chunk_fill, res.rules.chunk_fill, res.page_size) == ("exact", "exact_tokens", 1)
        diff.discard("semantics_rules")
    if raw.speculative_algorithm.enabled:
        assert diff == set()
    else:
        assert diff <= {"sync_mode", "prefill_slot_expansion_sync"}


@given(a=st.floats(1024, 400_000), b=st.floats(1024, 400_000), tp=st.sampled_from([1, 2, 4, 8]))
def test_more_memory_never_gives_smaller_defaults(a, b, tp):
    lo, hi = sorted((a, b))
    assert memory_buckets(lo, tp)[0] <= memory_buckets(hi, tp)[0]
    hw = Hardware(platform="cuda", memory_mib=hi, weight_bytes=8e9, kv_cell_bytes=65536)
    pool = kv_pool_tokens(hw, mem_fraction_static(hw, 8192, 16384, 256))
    assert pool >= 0


def test_an_unknown_device_keeps_the_scenario_as_written():
    from specsched.sim.defaults import apply_hardware_defaults

    from tests.conftest import make_scenario, tiny_profile

    sc = make_scenario()
    out, filled = apply_hardware_defaults(sc, profile=tiny_profile())  # device "synthetic"
    assert filled == [] and out.server == sc.server


@pytest.mark.parametrize(("model", "gpu", "tp", "algo", "want"), [
    ("llama-3.1-8b", "H100", 1, "eagle3", (5, 4, 8)),
    ("llama-3.1-8b", "H100", 1, "standalone", (3, 1, 4)),
    ("deepseek-v3", "H200", 8, "nextn", (3, 1, 4)),
    ("qwen3-30b-a3b", "H200", 1, "eagle", (3, 1, 4)),
])
def test_a_chain_drafter_given_no_setting_gets_sglangs_own_choice(tmp_path, model, gpu, tp, algo, want):
    """SGLang 0.5.23 picks steps/topk/draft tokens itself when none is given
    (arg_groups/speculative_hook.py _auto_choose_speculative_params: 5/4/8 for Llama, 3/1/4
    for DeepSeek and the rest, 3/1/4 for STANDALONE); the run says what it chose. Before,
    such a scenario was refused (speculative_num_draft_tokens 1)."""
    sc = load_scenario(_scenario(tmp_path, model, gpu, tp, f"speculative_algorithm: {algo}"))
    s = sc.server
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == want
    assert s.accept_window == want[0] + 1
    filled = {r.key: r.value for r in sc._resolved_defaults}
    assert (filled["speculative_num_steps"], filled["speculative_eagle_topk"]) == want[:2]


def test_standalones_automatic_choice_is_not_said_to_follow_the_model(tmp_path):
    """STANDALONE gets (3, 1, 4) whatever the model (sglang 0.5.23 arg_groups/speculative_hook.py
    _auto_choose_speculative_params returns it before reading the architecture); its note said
    "SGLang's choice for LlamaForCausalLM", as if a Llama target chose it. EAGLE on Llama does
    follow the model (5, 4, 8) and says so."""
    alone = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1, "speculative_algorithm: standalone"))
    why = {r.key: r.why for r in alone._resolved_defaults}["speculative_num_steps"]
    assert "LlamaForCausalLM" not in why and "STANDALONE, whatever the model" in why
    eagle = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1, "speculative_algorithm: eagle"))
    assert "LlamaForCausalLM" in {r.key: r.why for r in eagle._resolved_defaults}["speculative_num_steps"]


def test_a_given_chain_setting_is_kept_and_no_hardware_gets_the_fallback(tmp_path):
    """The steps given: nothing is chosen for the others here (the window's own rules apply);
    a profile with no hardware block: SGLang's fallback 3/1/4."""
    from specsched.sim.config import ServerArgs

    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1,
                                 "speculative_algorithm: eagle, speculative_num_steps: 5"))
    assert (sc.server.speculative_num_steps, sc.server.speculative_num_draft_tokens) == (5, 6)
    assert "speculative_eagle_topk" not in {r.key for r in sc._resolved_defaults}
    bare = ServerArgs.model_validate({"speculative_algorithm": "EAGLE3"})
    assert (bare.speculative_num_steps, bare.speculative_eagle_topk, bare.speculative_num_draft_tokens) == (3, 1, 4)
    assert not {"speculative_num_steps", "speculative_num_draft_tokens"} & bare.model_fields_set
    assert ServerArgs.model_validate({"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}).speculative_num_steps is None


def test_a_decode_servers_reserve_follows_its_running_requests_not_the_chunk():
    """SGLang 0.5.23 arg_groups/memory_hook.py: a decode server's activation tokens are
    max(running requests x draft tokens, 2048) and it captures no prefill graphs; a prefill
    server captures no decode graphs. On an H200 with a 16K chunk the colocated reserve is
    512 + 24576 + 128 + 512 + 8 per prefill graph; the decode server's 512 + 3072 + 128 + 512,
    floored at 10 GiB."""
    from specsched.sim.defaults import prefill_graph_sizes

    hw = Hardware(platform="cuda", memory_mib=143771)
    mem = 143771
    both = 512 + 16384 * 1.5 + 128 + 512 * 2 + prefill_graph_sizes(16384) * 8
    assert mem_fraction_static(hw, 16384, 16384, 512) == round((mem - both) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 512, role="decode", decode_tokens=48 * 4) == round((mem - 10240) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 512, role="decode", decode_tokens=2048 * 4) == round(
        (mem - (512 + 8192 * 1.5 + 128 + 512 * 2)) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 512, role="prefill") == round((mem - (both - 512 * 2)) / mem, 3)


def test_dp_attention_reserves_graph_padding_per_rank():
    """reserve_for_graph_mb: with DP attention 3 MiB more per decode graph batch and rank
    (4.5 above batch 300), so the KV pool shrinks; none on a prefill server."""
    hw = Hardware(platform="hip", memory_mib=294912, tp_size=8)
    mem = 294912
    base = 512 + 16384 * 1.5 + 1024 + 256 * 2
    assert mem_fraction_static(hw, 16384, 16384, 256) == round((mem - base) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 256, attn_dp_size=8) == round((mem - base - 256 * 8 * 3) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 512, attn_dp_size=8) == round(
        (mem - (base + 256 * 2) - 512 * 8 * 4.5) / mem, 3)
    assert mem_fraction_static(hw, 16384, 16384, 256, role="prefill", attn_dp_size=8) == round(
        (mem - (base - 256 * 2)) / mem, 3)


def test_each_disaggregated_role_gets_the_pool_its_reserve_leaves(tmp_path):
    """A PD scenario that states no pool: the decode server's (small activation reserve, no
    prefill graphs) is larger than the prefill server's, each from its own
    mem_fraction_static; a role that states its own pool keeps it, and so does every role
    when the scenario's server states one."""
    pd = "disaggregation: {prefill: {instances: 1}, decode: {instances: 1}}"
    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, pd))
    pre, dec = (sc.server.role_server(r).max_total_num_tokens for r in ("prefill", "decode"))
    assert dec > pre > 0
    filled = {r.key: r.value for r in sc._resolved_defaults}
    assert filled["disaggregation.decode.server.max_total_num_tokens"] == dec
    assert filled["disaggregation.prefill.server.max_total_num_tokens"] == pre
    kept = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                   "disaggregation: {prefill: {instances: 1}, decode: {instances: 1, "
                                   "server: {max_total_num_tokens: 50000}}}"))
    assert kept.server.role_server("decode").max_total_num_tokens == 50000
    assert kept.server.role_server("prefill").max_total_num_tokens == pre
    stated = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, f"max_total_num_tokens: 70000, {pd}"))
    assert {stated.server.role_server(r).max_total_num_tokens for r in ("prefill", "decode")} == {70000}


def test_a_stated_pool_no_memory_holds_is_cut_to_each_roles_own_pool(tmp_path):
    """--max-total-tokens is an upper bound each SGLang server applies to the pool its own
    memory settings leave (mem_cache/kv_cache_configurator.py _apply_token_constraints: the
    smaller of the two). A PD scenario stating a pool no GPU could hold (a scenario written
    for a larger machine, run with --set profile=...) used to cut both roles to the
    colocated server's pool; each role is now cut to the pool its own reserve leaves
    (arg_groups/memory_hook.py handle_gpu_memory_settings by serving mode), the same pools it
    gets when no pool is stated."""
    pd = "disaggregation: {prefill: {instances: 1}, decode: {instances: 1}}"
    own = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, pd))
    want = {r: own.server.role_server(r).max_total_num_tokens for r in ("prefill", "decode")}
    huge = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, f"max_total_num_tokens: 99000000, {pd}"))
    got = {r: huge.server.role_server(r).max_total_num_tokens for r in ("prefill", "decode")}
    assert got == want and got["decode"] > got["prefill"]
    filled = {r.key: r.value for r in huge._resolved_defaults}
    assert filled["disaggregation.decode.server.max_total_num_tokens"] == want["decode"]
    # a role's own overrides stating such a pool: cut the same way (it ran with a 99M-token pool)
    role = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                   "disaggregation: {prefill: {instances: 1}, decode: {instances: 1, "
                                   "server: {max_total_num_tokens: 99000000}}}"))
    assert role.server.role_server("decode").max_total_num_tokens == want["decode"]
    assert role.server.role_server("prefill").max_total_num_tokens == want["prefill"]


def test_a_dp_attention_ranks_pool_is_sized_by_its_kv_heads_per_gpu(tmp_path):
    """SGLang sizes a DP-attention rank's KV cell with the KV heads one GPU holds at the
    attention TP size tp / dp (model_executor/pool_configurator.py get_num_kv_heads(attn_tp_size);
    configs/model_config.py: max(1, kv_heads // tp)). Qwen3-30B-A3B (4 KV heads) at TP4 with
    dp_size 4 holds all 4 heads on each GPU, not 1: each rank's pool was filled with the TP4
    cell, 4.8M tokens per rank on H200s, 4x what the memory holds. At TP8 the model already
    replicates its one head per GPU, so dp_size 2 leaves the cell as it is."""
    import yaml

    def pool(tp, extra=""):
        sc = load_scenario(_scenario(tmp_path, "qwen3-30b-a3b", "H200", tp, extra))
        return sc.server.max_total_num_tokens

    base = pool(4)
    dp4 = pool(4, "enable_dp_attention: true, dp_size: 4")
    # the reserves differ a little with DP attention (graph padding per rank); the cell 4x
    assert 0.2 * base < dp4 < 0.26 * base
    hw = Hardware(**yaml.safe_load((tmp_path / "H200-qwen3-30b-a3b-tp4.yaml").read_text())["hardware"])
    assert dp4 * 4 * hw.kv_cell_bytes / 2**30 < hw.memory_mib / 1024 - hw.weight_bytes / 2**30
    q8 = pool(8)
    assert 0.9 * q8 < pool(8, "enable_dp_attention: true, dp_size: 2") <= q8


def test_a_huge_chunk_counts_its_prefill_graph_sizes_without_listing_them(tmp_path, capsys):
    """A fuzzed scenario's chunked_prefill_size of 2**63 (or 1e23) listed every 512th prefill
    graph size up to it: an OverflowError or a MemoryError traceback while loading. Such a
    chunk is now refused in one line (above 2**31 - 1, SGLang's int32 KV slot index); the
    count still takes any size."""
    from specsched.sim.defaults import prefill_graph_sizes

    from specsched.cli import main

    def listed(m):
        sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
                 + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, m + 1, 512)))
        return sum(1 for s in sizes if s <= m)

    assert [prefill_graph_sizes(m) for m in range(0, 9000, 7)] == [listed(m) for m in range(0, 9000, 7)]
    assert prefill_graph_sizes(2**63) == listed(4096) + (2**63 - 4608) // 512 + 1
    for chunk in ("9223372036854775808", "100000000000000000000000"):
        assert main(["run", "scenarios/h200/batch1.yaml", "--set", f"server.chunked_prefill_size={chunk}",
                     "--quiet", "--out", str(tmp_path / chunk)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"server.chunked_prefill_size = {chunk}" in err and "2147483647" in err, err
    assert main(["run", "scenarios/h200/batch1.yaml", "--set", "server.chunked_prefill_size=2147483647",
                 "--quiet", "--out", str(tmp_path / "top")]) == 0


def test_defaults_that_differ_between_arms_are_named_once(tmp_path):
    """compare/sweep name every filled-in default whose value is not the same in all arms:
    SGLang's 48 running requests for a speculative arm against the base arm's pool-derived
    default reads as speculation collapsing at high concurrency unless it is said. Defaults
    the arms share are not named, an arm that sets the key says so (and what it moves), and
    arms that differ in nothing filled give no block."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.defaults import format_differing

    scn = _scenario(tmp_path, "llama-3.1-8b", "H200", 1)
    scn.write_text(scn.read_text() + """arms:
  mtp: {server: {speculative_algorithm: dspark, speculative_num_draft_tokens: 4}}
  capped: {server: {max_running_requests: 64}}
  chunk: {server: {chunked_prefill_size: 4096}}
  acc: {acceptance: {mean_accept_length: 3.0}}
""")
    arms = {a: load_scenario_with_overrides(scn, a) for a in ("base", "mtp", "capped", "chunk", "acc")}
    base_mrr = arms["base"].server.max_running_requests
    assert base_mrr > 48
    text = format_differing([(a, arms[a]) for a in ("base", "mtp")])
    lines = text.splitlines()
    assert lines[0].startswith("server defaults that differ between arms")
    mrr = [x for x in lines if x.strip().startswith("max_running_requests:")]
    assert mrr == [f"  max_running_requests: base: {base_mrr} (from the KV pool and context length 131072); "
                   "mtp: 48 (SGLang's reset for speculative decoding)"]
    assert not any(x.strip().startswith(("chunked_prefill_size", "sync_mode")) for x in lines)
    assert "capped: 64 (set); mtp: 48 (" in format_differing([(a, arms[a]) for a in ("capped", "mtp")])
    assert format_differing([(a, arms[a]) for a in ("base", "acc")]) == ""
    # an arm's own setting moves what is derived from it: the pool, and the requests it holds
    chunk = format_differing([(a, arms[a]) for a in ("base", "chunk")])
    assert "chunked_prefill_size: base: 8192 (SGLang's default" in chunk and "chunk: 4096 (set)" in chunk
    assert "\n  max_total_num_tokens: base: " in chunk
    # a grid point is named by the axis values its group shares
    sweep = format_differing([({"arm": a, "x": x}, arms[a]) for a in ("base", "mtp") for x in (1, 2)], "grid points")
    assert "max_running_requests: arm=base: " in sweep and "; arm=mtp: 48 (" in sweep


@pytest.mark.parametrize("model, gpu, tp, server, want", [
    ("llama-3.1-8b", "B200", 1, "", 64),             # trtllm_mha
    ("llama-3.1-8b", "GB200", 1, "", 64),
    ("llama-3.1-8b", "B200", 1, "speculative_algorithm: eagle", 1),   # topk unset: flashinfer
    ("llama-3.1-8b", "B200", 1, "speculative_algorithm: eagle, speculative_eagle_topk: 1, "
     "speculative_num_steps: 3, speculative_num_draft_tokens: 4", 64),
    ("llama-3.1-8b", "B200", 1, "speculative_algorithm: dflash", 64),
    ("deepseek-v3", "B200", 8, "", 64),              # trtllm_mla
    ("deepseek-v3", "B200", 8, "speculative_algorithm: nextn", 64),
    ("llama-3.1-8b", "H200", 1, "", 1),              # fa3
    ("llama-3.1-8b", "RTX5090", 1, "", 1),           # SM120: flashinfer
    ("llama-3.1-8b", "MI355X", 1, "", 1),            # aiter
    ("llama-3.1-8b", "B200", 1, "page_size: 16", 16),
])
def test_sm100_default_attention_backends_take_pages_of_64(tmp_path, model, gpu, tp, server, want):
    # sglang 0.5.23 arg_groups/model_override_base.py get_default_attn_backend: trtllm_mha on SM100
    # for MHA models with no speculation (or topk given 1, or DFLASH); model_overrides/deepseek_v2.py:
    # trtllm_mla for DeepSeek-V3 on SM100; overrides.py _mla_backend_page_constraints: both move
    # page_size 1 to 64; _page_size_default: 1 otherwise
    sc = load_scenario(_scenario(tmp_path, model, gpu, tp, server))
    assert sc.server.page_size == want
    assert sc.server.max_total_num_tokens % want == 0


@pytest.mark.parametrize("architecture", ["", "LlamaForCausalLM", "GptOssForCausalLM"])
@pytest.mark.parametrize("given_topk", [None, 1, 4])
@pytest.mark.parametrize("algo", ["none", "eagle", "dflash"])
def test_the_default_page_size_and_the_page_snap_read_one_backend(architecture, given_topk, algo):
    # One decision of SGLang's attention backend (page_bound_backend) gives both the default page
    # size and the snap of a given one: an SM100 MHA profile that does not name its model (a
    # measured one) had a default of 64 pages (as if trtllm_mha) while a given page of 8 was kept
    # (backend not known), two answers for one server
    from specsched.sim.defaults import (
        BACKEND_PAGE_SIZES,
        default_page_size,
        page_bound_backend,
        page_size_snap,
    )
    from specsched.sim.server_args import ServerArgs

    hw = Hardware(platform="cuda", gpu="B200", memory_mib=183359, architecture=architecture)
    kw: dict = {} if algo == "none" else {"speculative_algorithm": algo}
    given = set(kw)
    if given_topk is not None and algo == "eagle":
        kw.update(speculative_eagle_topk=given_topk, speculative_num_steps=3,
                  speculative_num_draft_tokens=max(4, given_topk + 1))
        given |= {"speculative_eagle_topk"}
    srv = ServerArgs(**kw)
    page = default_page_size(srv, hw, given)
    backend = page_bound_backend(srv, hw, given)
    assert page == (64 if backend in BACKEND_PAGE_SIZES else 1)
    paged = ServerArgs(**kw, page_size=8)   # a given page can change the backend (topk 1 over pages)
    snap = page_size_snap(paged, hw, given | {"page_size"})
    assert (snap is not None) == (page_bound_backend(paged, hw, given | {"page_size"}) in BACKEND_PAGE_SIZES)
    if not architecture:
        assert (page, snap) == (1, None)


@pytest.mark.parametrize("model, gpu, tp, server, want", [
    ("deepseek-v3", "B200", 8, "page_size: 1", 64),     # trtllm_mla takes 32 or 64
    ("deepseek-v3", "B200", 8, "page_size: 16", 64),
    ("deepseek-v3", "B200", 8, "page_size: 32", 32),
    ("llama-3.1-8b", "B200", 1, "page_size: 8", 64),     # trtllm_mha takes 16, 32, 64, 128
    ("llama-3.1-8b", "B200", 1, "page_size: 128", 128),
    ("llama-3.1-8b", "B200", 1, "page_size: 8, speculative_algorithm: eagle", 8),   # flashinfer
    ("deepseek-v3", "H200", 8, "page_size: 16", 16),    # fa3
])
def test_a_given_page_size_the_backend_cannot_take_becomes_64(tmp_path, model, gpu, tp, server, want):
    # sglang 0.5.23 arg_groups/overrides.py _mla_backend_page_constraints (run from
    # attention_hook.py handle_attention_backend_compatibility): a page size trtllm_mla or
    # trtllm_mha does not support is changed to 64 with a warning, given or not
    from specsched.sim.defaults import apply_hardware_defaults

    sc = load_scenario(_scenario(tmp_path, model, gpu, tp, server))
    assert sc.server.page_size == want
    assert sc.server.max_total_num_tokens % want == 0
    if want == 64:
        filled = apply_hardware_defaults(load_scenario(sc.path, resolve_defaults=False))[1]
        assert any(r.key == "page_size" and "changes page_size" in r.why for r in filled)


@pytest.mark.parametrize("model, gpu, tp, server, refused", [
    ("deepseek-v3", "B200", 8, "speculative_eagle_topk: 4, speculative_num_steps: 3, speculative_num_draft_tokens: 8",
     "trtllm_mla"),
    ("deepseek-v3", "B200", 8, "speculative_eagle_topk: 1, speculative_num_steps: 3, speculative_num_draft_tokens: 4",
     None),
    ("deepseek-v3", "H200", 8, "speculative_eagle_topk: 4, speculative_num_steps: 3, speculative_num_draft_tokens: 8",
     None),                                           # fa3 runs a tree
    ("llama-3.1-8b", "MI300X", 1, "page_size: 16, speculative_eagle_topk: 4, speculative_num_steps: 3, "
     "speculative_num_draft_tokens: 8", "aiter"),
    ("llama-3.1-8b", "MI300X", 1, "page_size: 16", "aiter"),        # SGLang's automatic topk 4 for Llama
    ("llama-3.1-8b", "MI300X", 1, "speculative_eagle_topk: 4, speculative_num_steps: 3, "
     "speculative_num_draft_tokens: 8", None),        # pages of one token
    ("llama-3.1-8b", "B200", 1, "page_size: 64, speculative_eagle_topk: 4, speculative_num_steps: 3, "
     "speculative_num_draft_tokens: 8", None),        # flashinfer
    ("gpt-oss-20b", "B200", 1, "speculative_eagle_topk: 4, speculative_num_steps: 3, "
     "speculative_num_draft_tokens: 8", "trtllm_mha"),   # gpt-oss's own backend on SM100
])
def test_a_draft_tree_is_refused_where_sglang_refuses_it(tmp_path, model, gpu, tp, server, refused):
    # sglang 0.5.23 arg_groups/speculative_hook.py _handle_eagle_family: speculative_eagle_topk > 1
    # with page_size > 1 raises ValueError on any attention backend but flashinfer, fa3 and triton
    from specsched.sim.errors import ConfigError

    path = _scenario(tmp_path, model, gpu, tp, "speculative_algorithm: eagle, " + server)
    if refused is None:
        load_scenario(path)
        return
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.key == "server.speculative_eagle_topk" and refused in str(e.value)


def test_a_disaggregated_roles_draft_tree_is_refused_where_sglang_refuses_it(tmp_path):
    # each role is its own SGLang server: a decode role drafting with a tree on DeepSeek-V3 on
    # B200 (trtllm_mla, pages of 64) fails to start as a colocated one does
    from specsched.sim.errors import ConfigError

    tree = "{speculative_algorithm: nextn, speculative_eagle_topk: 4, speculative_num_steps: 3, " \
        "speculative_num_draft_tokens: 8}"
    path = _scenario(tmp_path, "deepseek-v3", "B200", 8,
                     "disaggregation: {prefill: {instances: 1}, decode: {instances: 1, server: " + tree + "}}")
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.key == "server.disaggregation.decode.server.speculative_eagle_topk" and "trtllm_mla" in str(e.value)


def test_a_plain_server_loads_no_drafter_and_a_speculative_one_does(tmp_path):
    # sglang 0.5.23: the draft worker (and its weights) exists only with a speculative algorithm;
    # mem_cache/kv_cache_configurator.py _profile_available_bytes sizes the pool from the free
    # memory after what is loaded, and pool_configurator.py DefaultPoolConfigurator adds the
    # drafter's KV per token (EAGLE/STANDALONE branch) only then
    from specsched.sim.profile import load_profile

    plain = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1))
    hw = load_profile(plain.profile, relative_to=plain.path).hardware
    assert 0 < hw.draft_weight_bytes < hw.weight_bytes
    budget = (81559 - 1024) * 2**20 * 0.83
    assert plain.server.max_total_num_tokens == int((budget - (hw.weight_bytes - hw.draft_weight_bytes)) // 131072)
    spec = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1, "speculative_algorithm: eagle"))
    assert spec.server.max_total_num_tokens == int((budget - hw.weight_bytes) // (131072 + 4096))


def test_dp_attention_keeps_the_automatic_running_limit_per_rank(tmp_path):
    # sglang 0.5.23 mem_cache/kv_cache_configurator.py resolve_max_num_reqs: a given
    # max_running_requests becomes max(1, N // attn_dp_size) per DP worker, but the automatic
    # one, min(clamp(pool / context_len x 512, 2048, 4096), pool // 2), is each worker's own
    from specsched.sim.dp_attention import rank_server_args

    dp = "enable_dp_attention: true, dp_size: 8"
    auto = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8, dp)).server
    rank = rank_server_args(auto)
    assert rank.max_running_requests == auto_max_running_requests(auto.max_total_num_tokens, 163840)
    given = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8, dp + ", max_running_requests: 256")).server
    assert rank_server_args(given).max_running_requests == 32
    spec = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8, dp + ", speculative_algorithm: nextn")).server
    assert rank_server_args(spec).max_running_requests == 48 // 8


def _vlm(tmp_path: Path, cfg: dict) -> Path:
    import json

    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "config.json"


def test_a_multimodal_model_gets_sglangs_vlm_memory_rules(tmp_path):
    # sglang 0.5.23 arg_groups/memory_hook.py adjust_mem_fraction_for_vlm (x 0.95 x clamp(1 - 0.1 x
    # (ViT layers x hidden^2 / (24 x 1024^2) - 1), 0.8, 1.05)), cuda_graph_hook.py
    # disable_breakable_cudagraph_if_incompatible (no prefill graphs for a multimodal model not
    # validated for them), kv_cache_configurator.py mm_runtime_reservation_gb (100 MiB)
    from specsched.sim.analytic.models import from_hf_config, shipped_models
    from specsched.sim.defaults import kv_pool_tokens

    text = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k not in ("architectures", "source")}
    llava = from_hf_config({"architectures": ["LlavaForConditionalGeneration"], "text_config": text,
                            "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24}}, "llava", "config.json")
    hw = Hardware.model_validate(build_profile(llava, load_gpu("H100"), 1)["hardware"])
    assert hw.vlm_mem_fraction_factor == 0.95
    no_prefill_graphs = 512 + 8192 * 1.5 + 128 + 256 * 2
    mfs = round((81559 - max(no_prefill_graphs, 10240)) / 81559, 3) * 0.95
    assert mem_fraction_static(hw, 8192, 16384, 256) == pytest.approx(mfs, rel=1e-12)
    text_hw = hw.model_copy(update={"vlm_mem_fraction_factor": None})
    budget = (81559 - 1024) * 2**20 * mfs - (hw.weight_bytes - hw.draft_weight_bytes)
    assert kv_pool_tokens(hw, mfs) == int((budget - 100 * 2**20) // hw.kv_cell_bytes)
    assert kv_pool_tokens(text_hw, mfs) == int(budget // hw.kv_cell_bytes)
    qwen_vl = from_hf_config({**text, "architectures": ["Qwen2_5_VLForConditionalGeneration"],
                              "vision_config": {"depth": 32, "hidden_size": 1280}}, "q", "config.json")
    assert qwen_vl.vision_layers == 24   # SGLang reads num_hidden_layers, 24 when absent
    gemma3 = from_hf_config({"architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
                             "vision_config": {}}, "g", "config.json")
    assert not gemma3.multimodal   # served text-only unless --enable-multimodal (model_config.py)


def test_a_bad_vision_config_is_one_line(tmp_path, capsys):
    from specsched.sim.analytic.models import shipped_models

    from specsched.cli import main

    text = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k not in ("architectures", "source")}
    for outer, key in (({"vision_config": {"hidden_size": "x"}}, "vision_config.hidden_size"),
                       ({"vision_config": [1]}, "vision_config"), ({"text_config": [1]}, "text_config")):
        cfg = _vlm(tmp_path, {"architectures": ["LlavaForConditionalGeneration"], "text_config": text, **outer})
        out = tmp_path / "p.yaml"
        assert main(["profile", "--analytic", "--model", str(cfg), "--gpu", "H100", "--tp", "1", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and key in err[0] and "config.json" in err[0] and not out.exists()


@pytest.mark.parametrize(("model", "gpu", "tp", "off"), [
    ("deepseek-v3", "B200", 8, True),    # trtllm_mla: disable_prefill_cuda_graph_for_deepseek_trtllm_mla
    ("deepseek-v3", "H200", 8, False),   # fa3 keeps the breakable prefill graphs
    ("llama-3.1-8b", "B200", 1, False),
])
def test_sglang_turns_prefill_graphs_off_where_its_hooks_do(tmp_path, model, gpu, tp, off):
    sc = load_scenario(_scenario(tmp_path, model, gpu, tp))
    assert sc.server.disable_prefill_cuda_graph is off
    given = load_scenario(_scenario(tmp_path, model, gpu, tp, "disable_prefill_cuda_graph: false"))
    assert given.server.disable_prefill_cuda_graph is False


def test_a_multimodal_model_runs_its_prefill_eagerly(tmp_path):
    # arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible: "multimodal model"
    from specsched.sim.analytic.models import from_hf_config, shipped_models

    text = {k: v for k, v in shipped_models()["llama-3.1-8b"].items() if k not in ("architectures", "source")}
    llava = from_hf_config({"architectures": ["LlavaForConditionalGeneration"], "text_config": text}, "llava", "c")
    prof = tmp_path / "llava.yaml"
    write_analytic_profile(build_profile(llava, load_gpu("H100"), 1), prof)
    scn = tmp_path / "s.yaml"
    scn.write_text(f"name: t\nprofile: {prof.name}\nworkload: {{kind: burst, num_requests: 2, input_len: "
                   "{kind: fixed, value: 64}, output_len: {kind: fixed, value: 4}}\n")
    assert load_scenario(scn).server.disable_prefill_cuda_graph is True


@pytest.mark.parametrize(("model", "gpu", "tp", "server", "scaled"), [
    ("llama-3.1-8b", "MI300X", 1, "", True),                         # MHA: aiter, context 131072
    ("llama-3.1-8b", "MI355X", 1, "context_length: 8192", False),    # not above 8192
    ("deepseek-v3", "MI300X", 8, "", True),                          # MLA, 128 // 8 = 16 KV heads: aiter
    ("deepseek-v3", "MI300X", 4, "", False),                         # 32 per rank: triton
    ("llama-3.1-8b", "H100", 1, "", False),
])
def test_aiter_long_context_takes_085_of_the_fraction(tmp_path, model, gpu, tp, server, scaled):
    # sglang 0.5.23 arg_groups/attention_hook.py handle_attention_backend_compatibility: with
    # attention_backend aiter and context_len > 8192, mem_fraction_static x 0.85 (after
    # handle_gpu_memory_settings); model_override_base.py get_default_attn_backend: aiter on HIP
    # for MHA, for MLA when get_num_kv_heads(tp) is 16 or 128, else triton
    from specsched.sim.defaults import mem_fraction_static_of, scenario_hardware

    sc = load_scenario(_scenario(tmp_path, model, gpu, tp, server))
    hw = scenario_hardware(sc)
    s = sc.server
    plain = mem_fraction_static(hw, s.chunked_prefill_size, s.max_prefill_tokens, s.cuda_graph_max_bs)
    assert mem_fraction_static_of(s, hw) == pytest.approx(plain * (0.85 if scaled else 1.0), rel=1e-12)
    given = s.model_copy(update={"mem_fraction_static": 0.8})   # a given fraction is scaled too
    assert mem_fraction_static_of(given, hw) == pytest.approx(0.8 * (0.85 if scaled else 1.0), rel=1e-12)


def test_a_decode_servers_reserve_reads_only_a_given_draft_token_count(tmp_path):
    # sglang 0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings (decode role):
    # activation tokens = max((max_running_requests or graph max_bs) x
    # (speculative_num_draft_tokens or 1), 2048), computed before handle_speculative_decoding
    # picks the draft tokens (arg_groups/pipeline.py), so an auto-chosen count is not in it
    pd = ("speculative_algorithm: eagle, max_running_requests: 1024, "
          "disaggregation: {prefill: {instances: 1}, decode: {instances: 1}}")
    auto = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, pd)).server
    assert auto.speculative_num_draft_tokens == 8   # SGLang's (5, 4, 8) for Llama
    hw = Hardware(platform="cuda", memory_mib=143771)
    want = mem_fraction_static(hw, 8192, 16384, 256, role="decode", decode_tokens=1024)
    assert want == round((143771 - 10240) / 143771, 3)   # max(1024 x 1, 2048) tokens: the 10 GiB floor
    stated = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, pd.replace(
        "eagle,", "eagle, speculative_num_steps: 5, speculative_eagle_topk: 4, speculative_num_draft_tokens: 8,"))).server
    assert stated.role_server("decode").max_total_num_tokens < auto.role_server("decode").max_total_num_tokens


def test_a_measured_rocm_profile_without_its_architecture_is_not_scaled_for_aiter():
    # the shipped MI355X profiles (DeepSeek-V4: SGLang's dsv4 backend, not aiter) name no architecture
    from specsched.sim.defaults import hip_aiter_backend

    hw = Hardware(platform="hip", memory_mib=294912, context_len=65536)
    assert not hip_aiter_backend(hw)
    assert hip_aiter_backend(hw.model_copy(update={"architecture": "LlamaForCausalLM"}))
    assert not hip_aiter_backend(hw.model_copy(update={"architecture": "DeepseekV4ForCausalLM"}))


def test_the_speculative_reset_to_48_is_noted_when_requests_queue_behind_it(tmp_path):
    """A queue behind SGLang's reset to 48 (filled in, not stated) is said after the run; a
    stated 48, or no queue, says nothing."""
    import pandas as pd
    from specsched.sim.defaults import spec_cap_note

    spec = "speculative_algorithm: dspark, speculative_num_draft_tokens: 4"
    filled = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, spec))
    stated = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1, spec + ", max_running_requests: 48"))
    queued = pd.DataFrame({"running": [10, 48, 48], "waiting": [0, 7, 3]})
    drained = pd.DataFrame({"running": [10, 48, 40], "waiting": [0, 0, 0]})
    note = spec_cap_note(filled, queued)
    assert note is not None and "up to 7 waiting" in note and "server.max_running_requests" in note
    assert spec_cap_note(filled, drained) is None and spec_cap_note(stated, queued) is None
    # the prefill ramp's queue (47 waiting at 17 running) is not the cap's: while 48 ran, 16 waited
    ramp = pd.DataFrame({"running": [17, 48, 48, 30], "waiting": [47, 16, 9, 40]})
    note = spec_cap_note(filled, ramp)
    assert note is not None and "48 running with up to 16 waiting" in note, note
    assert spec_cap_note(filled, pd.DataFrame({"running": [17, 48], "waiting": [47, 0]})) is None


def _kv_bound_run(tmp_path, capsys, pool: int, max_running: int = 1024) -> tuple[str, dict, Any]:
    """The bundled 8B Poisson line (1,024-token prompts, 256 output, 6 req/s), 60 requests, at a
    KV pool of ``pool`` tokens: (what ``run`` wrote to stderr, its summary, its timeseries)."""
    import json

    import pandas as pd

    from specsched.cli import main

    out = tmp_path / f"pool{pool}-cap{max_running}"
    assert main(["run", "scenarios/poisson8b-fixed.yaml", "--set", f"server.max_total_num_tokens={pool}",
                 "--set", f"server.max_running_requests={max_running}", "--set", "workload.num_requests=60",
                 "--quiet", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    return err, json.loads((out / "summary.json").read_text()), pd.read_parquet(out / "timeseries.parquet")


def test_a_run_whose_kv_pool_caps_the_batch_below_max_running_requests_says_so(tmp_path, capsys, monkeypatch):
    """A pool of 6,000 tokens holds ~4 requests of 1,024 + 256 tokens: requests queue while 4
    run against max_running_requests 1024, and the note names the pool, the peak against the
    cap and the passes KV stopped; the same line at a pool of 800,000 (nothing waits for KV),
    or with max_running_requests at 4 (the cap binds first), says nothing."""
    import re

    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    err, summary, ts = _kv_bound_run(tmp_path, capsys, 6000)
    notes = [line for line in err.splitlines() if "the KV pool, not max_running_requests" in line]
    assert len(notes) == 1, err
    note = notes[0]
    m = re.search(r"with at most (\d+) running \(max_running_requests 1024\) and up to (\d+) waiting; "
                  r"([\d,]+) admission passes stopped for lack of KV tokens .* in a pool of 6,000 tokens", note)
    assert m is not None, note
    ran, waited, passes = int(m[1]), int(m[2]), int(m[3].replace(",", ""))
    assert ran == int(ts["running"].max()) < 1024   # the pool's peak, the run's own
    assert 0 < waited <= int(ts["waiting"].max())
    assert passes == summary["kv_refused_passes"] > 0
    assert "server.max_total_num_tokens" in note and "--tp" in note
    for pool, cap in ((800000, 1024), (6000, 4)):
        err, summary, ts = _kv_bound_run(tmp_path, capsys, pool, cap)
        assert "KV pool" not in err and "kv_refused_passes" not in summary
        if cap == 4:   # the queue is there, the cap's
            assert int(ts["running"].max()) == 4 and int(ts["waiting"].max()) > 0


def test_a_block_drafters_topk_is_reset_to_one_and_said():
    """SGLang 0.5.23 overrides DSpark's and DFlash's speculative_eagle_topk to 1 with a warning
    (arg_groups/speculative_hook.py _handle_dspark/_handle_dflash): a run with topk 4 was the
    same as with 1, and nothing said so."""
    from specsched.sim.defaults import block_drafter_resets
    from specsched.sim.server_args import ServerArgs

    srv = ServerArgs(speculative_algorithm="dspark", speculative_num_draft_tokens=6, speculative_eagle_topk=4)
    out, said = block_drafter_resets(srv, set(srv.model_fields_set))
    assert out.speculative_eagle_topk == 1 and [r.key for r in said] == ["speculative_eagle_topk"]
    assert "_handle_dspark" in said[0].why and "speculative_eagle_topk=4" in said[0].why
    chain = ServerArgs(speculative_algorithm="eagle", speculative_num_steps=3, speculative_eagle_topk=4,
                       speculative_num_draft_tokens=8)
    assert block_drafter_resets(chain, set(chain.model_fields_set)) == (chain, [])


@pytest.mark.parametrize("model, gpu, tp, page, want", [
    ("deepseek-v3", "B200", 8, 16, 64),     # trtllm_mla takes 32 or 64
    ("deepseek-v3", "B200", 8, 32, 32),
    ("llama-3.1-8b", "B200", 1, 8, 64),     # trtllm_mha takes 16, 32, 64, 128
    ("deepseek-v3", "H200", 8, 16, 16),     # fa3
])
def test_a_disaggregated_roles_page_size_the_backend_cannot_take_becomes_64(tmp_path, model, gpu, tp, page, want):
    # each role is its own SGLang server, whose attention hook changes a page size trtllm_mla or
    # trtllm_mha cannot take to 64 as a colocated server's (arg_groups/overrides.py
    # _mla_backend_page_constraints); a decode role's page_size 16 on B200 ran at 16
    from specsched.sim.defaults import apply_hardware_defaults

    # (the section states it too: roles of different page sizes are refused)
    path = _scenario(tmp_path, model, gpu, tp, f"page_size: {page}, disaggregation: {{prefill: {{instances: 1}}, "
                     f"decode: {{instances: 1, server: {{page_size: {page}}}}}}}")
    sc = load_scenario(path)
    assert sc.server.role_server("decode").page_size == want
    assert sc.server.role_server("decode").max_total_num_tokens % want == 0
    filled = {r.key: r for r in apply_hardware_defaults(load_scenario(path, resolve_defaults=False))[1]}
    snapped = filled.get("disaggregation.decode.server.page_size")
    assert (snapped is not None and "changes page_size" in snapped.why) == (want != page)


@pytest.mark.parametrize("section, prefill, decode, want", [
    # a prefill role without speculation runs trtllm_mha on B200 (get_default_attn_backend),
    # which changes the section's page_size 8 to 64; the speculative decode role keeps 8
    ("page_size: 8, speculative_algorithm: eagle", "{speculative_algorithm: none}", "{}", (64, 8)),
    # and the other way round: the section's own snap is not the drafting decode role's
    ("page_size: 8, speculative_algorithm: none", "{}", "{speculative_algorithm: eagle}", (64, 8)),
    # no page size given: the role without speculation gets trtllm_mha's default of 64
    ("speculative_algorithm: eagle", "{speculative_algorithm: none}", "{}", (64, 1)),
    # the section's own tree settings are not the plain prefill role's
    ("page_size: 8, speculative_algorithm: eagle, speculative_eagle_topk: 4, speculative_num_steps: 3, "
     "speculative_num_draft_tokens: 8", "{speculative_algorithm: none}", "{}", (64, 8)),
])
def test_a_roles_page_size_follows_its_own_attention_backend(tmp_path, section, prefill, decode, want):
    """Each role is its own SGLang server: its speculative settings pick its attention backend
    (arg_groups/model_override_base.py get_default_attn_backend), whose page rule
    (overrides.py _mla_backend_page_constraints) applies to it alone. The roles then disagree,
    and SGLang's decode side refuses a prefill server of another page size
    (disaggregation/common/conn.py try_ensure_parallel_info): refused at load, naming both."""
    from specsched.sim.defaults import apply_hardware_defaults
    from specsched.sim.errors import ConfigError

    path = _scenario(tmp_path, "llama-3.1-8b", "B200", 1, f"{section}, disaggregation: "
                     f"{{prefill: {{instances: 1, server: {prefill}}}, decode: {{instances: 1, server: {decode}}}}}")
    raw = load_scenario(path, resolve_defaults=False)
    with pytest.raises(ConfigError, match=rf"page_size is {want[0]} and the decode server's {want[1]} .*Page size mismatch"):
        apply_hardware_defaults(raw)


def test_a_role_stating_nothing_that_picks_a_backend_has_the_sections_page_size(tmp_path):
    path = _scenario(tmp_path, "llama-3.1-8b", "B200", 1, "page_size: 8, speculative_algorithm: none, disaggregation: "
                     "{prefill: {instances: 1, server: {chunked_prefill_size: 4096}}, decode: {instances: 1}}")
    s = load_scenario(path).server
    assert s.role_server("prefill").page_size == s.role_server("decode").page_size == 64


def test_disaggregated_roles_of_different_page_sizes_are_refused(tmp_path):
    from specsched.sim.errors import ConfigError

    path = _scenario(tmp_path, "llama-3.1-8b", "H200", 1, "disaggregation: {prefill: {instances: 1}, "
                     "decode: {instances: 1, server: {page_size: 16}}}")
    with pytest.raises(ConfigError, match=r"server.disaggregation.decode.server.page_size = 16: the prefill server's "
                                          r"page_size is 1 and the decode server's 16"):
        load_scenario(path)


@pytest.mark.parametrize("algo", ["dspark", "dflash"])
@pytest.mark.parametrize("steps", [3, 100])
def test_a_block_drafters_draft_steps_are_reset_to_one_and_said(tmp_path, capsys, monkeypatch, algo, steps):
    """SGLang 0.5.23 overrides a block drafter's speculative_num_steps other than 1 to 1 with a
    warning (arg_groups/speculative_hook.py _handle_dspark/_handle_dflash: "only supports
    speculative_num_steps == 1"), as it does its topk. The value was dropped before the reset
    could see it: a run with steps 3 said nothing, and steps 100 (past the window) too."""
    from specsched.cli import main

    path = _scenario(tmp_path, "llama-3.1-8b", "H100", 1,
                     f"speculative_algorithm: {algo}, speculative_num_draft_tokens: 6, speculative_num_steps: {steps}")
    sc = load_scenario(path)
    said = {r.key: r.why for r in sc._resolved_defaults}
    assert sc.server.speculative_num_steps == 1 and sc.server.num_draft_forwards == 1
    assert f"speculative_num_steps={steps} to 1" in said["speculative_num_steps"], said
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--out", "out", "-q"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "speculative_num_steps" in ln]
    assert len(lines) == 1 and f"speculative_num_steps={steps}" in lines[0] and "= 1" in lines[0], out
    one = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H100", 1,
                                  f"speculative_algorithm: {algo}, speculative_num_draft_tokens: 6, "
                                  "speculative_num_steps: 1"))
    assert "speculative_num_steps" not in {r.key for r in one._resolved_defaults}


def test_a_roles_block_drafter_steps_and_topk_are_reset_and_said_naming_the_role(tmp_path):
    """Each disaggregated role is its own SGLang server, whose speculative hook overrides a
    block drafter's speculative_num_steps and speculative_eagle_topk other than 1 to 1 with a
    warning (arg_groups/speculative_hook.py _handle_dspark/_handle_dflash). Given in a role's
    overrides they were kept silently; the server section's same values were said."""
    pd = ("speculative_algorithm: dspark, speculative_num_draft_tokens: 4, disaggregation: {prefill: {instances: 1, "
          "server: {speculative_num_steps: 3}}, decode: {instances: 1, server: {speculative_eagle_topk: 4, "
          "speculative_num_steps: 1}}}")
    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, pd))
    said = {r.key: r for r in sc._resolved_defaults if "speculative_" in r.key and "draft_tokens" not in r.key}
    assert set(said) == {"disaggregation.prefill.server.speculative_num_steps",
                         "disaggregation.decode.server.speculative_eagle_topk"}, said
    assert all(r.value == 1 for r in said.values())
    pre = said["disaggregation.prefill.server.speculative_num_steps"].why
    assert "speculative_num_steps=3" in pre and "the prefill server" in pre and "_handle_dspark" in pre
    assert "speculative_eagle_topk=4" in said["disaggregation.decode.server.speculative_eagle_topk"].why
    assert sc.server.role_server("prefill").speculative_num_steps == 1
    assert sc.server.role_server("decode").speculative_eagle_topk == 1
    # a role that turns a block drafter on over a server without one; a chain role keeps its own
    on = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                 "disaggregation: {prefill: {instances: 1}, decode: {instances: 1, server: "
                                 "{speculative_algorithm: dflash, speculative_eagle_topk: 2}}}"))
    (r,) = [r for r in on._resolved_defaults if r.key.endswith("speculative_eagle_topk")]
    assert r.key == "disaggregation.decode.server.speculative_eagle_topk" and "for dflash on the decode server" in r.why
    chain = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                    "speculative_algorithm: eagle, disaggregation: {prefill: {instances: 1}, decode: "
                                    "{instances: 1, server: {speculative_num_steps: 2, speculative_eagle_topk: 1, "
                                    "speculative_num_draft_tokens: 3}}}"))
    assert not [r for r in chain._resolved_defaults if r.key.startswith("disaggregation.")
                and r.key.endswith(("_num_steps", "_eagle_topk"))]
    assert chain.server.role_server("decode").speculative_num_steps == 2


@pytest.mark.parametrize("algo", ["dspark", "dflash"])
@pytest.mark.parametrize("key, value", [("speculative_num_steps", 0), ("speculative_num_steps", -2),
                                        ("speculative_eagle_topk", 0), ("speculative_eagle_topk", -1),
                                        ("speculative_eagle_topk", 100)])
def test_a_block_drafters_zero_or_negative_steps_are_reset_and_said_as_sglang_does(tmp_path, algo, key, value):
    """SGLang 0.5.23's _handle_dspark/_handle_dflash (arg_groups/speculative_hook.py) override
    any speculative_num_steps / speculative_eagle_topk with int(value) != 1 to 1 with a
    warning, 0 and negatives included; the field's >= 1 (topk <= 64) refused them. Reset and
    said, on the server section and on a disaggregated role."""
    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                 f"speculative_algorithm: {algo}, speculative_num_draft_tokens: 4, {key}: {value}"))
    assert getattr(sc.server, key) == 1
    (r,) = [r for r in sc._resolved_defaults if r.key == key]
    assert r.value == 1 and f"{key}={value} to 1 for {algo}" in r.why
    pd = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                 f"speculative_algorithm: {algo}, speculative_num_draft_tokens: 4, disaggregation: "
                                 f"{{prefill: {{instances: 1}}, decode: {{instances: 1, server: {{{key}: {value}}}}}}}"))
    (r,) = [r for r in pd._resolved_defaults if r.key.endswith(key)]
    assert r.key == f"disaggregation.decode.server.{key}" and f"{key}={value} to 1 for {algo} on the decode" in r.why
    assert getattr(pd.server.role_server("decode"), key) == 1


@pytest.mark.parametrize("key, value", [("speculative_num_steps", 0), ("speculative_num_steps", -1),
                                        ("speculative_eagle_topk", 0)])
def test_a_chain_drafters_zero_or_negative_steps_are_still_refused(tmp_path, key, value):
    """A chain drafter's steps and topk keep the field's range: SGLang's EAGLE-family hook
    resets no such value (its MTP draft path refuses steps < 1: _handle_iquest_q1_mtp_draft)."""
    from specsched.sim.errors import ConfigError

    with pytest.raises(ConfigError, match=key):
        load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                f"speculative_algorithm: eagle, speculative_num_draft_tokens: 4, {key}: {value}"))


@pytest.mark.parametrize("value", [0, -2, 3])
def test_draft_steps_without_an_algorithm_are_ignored_whatever_their_value(tmp_path, value):
    """Without a speculative algorithm SGLang 0.5.23 reads no speculative_num_steps: the field
    is an unchecked Optional[int] (arg_groups/fields/spec.py) and only the per-algorithm
    handlers of arg_groups/speculative_hook.py ``handle_speculative_decoding`` (run when
    ``speculative_algorithm`` is set) look at it. Values >= 1 were dropped, 0 and negatives
    refused; each is dropped, on the server section and on a disaggregated role."""
    base = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1))
    sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, f"speculative_num_steps: {value}"))
    assert sc.server.speculative_num_steps is None and sc.server.model_dump() == base.server.model_dump()
    pd = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, "disaggregation: {prefill: {instances: 1}, "
                                 f"decode: {{instances: 1, server: {{speculative_num_steps: {value}}}}}}}"))
    assert pd.server.role_server("decode").speculative_num_steps is None


def test_the_pool_line_names_the_chunk_size_its_memory_fraction_reserves_for(tmp_path):
    """Raising chunked_prefill_size 8192 -> 16384 on 4x H100 cut the default KV pool by 39 %
    (SGLang reserves 1.5 MiB of activations per chunk token before the pool), and the printed
    line said only 'mem_fraction_static 0.666': it now names the chunk size and the graph
    batch the fraction was computed from."""
    for chunk in (8192, 16384):
        sc = load_scenario(_scenario(tmp_path, "llama-3.1-70b", "H100", 4, f"chunked_prefill_size: {chunk}"))
        (pool,) = [r for r in sc._resolved_defaults if r.key == "max_total_num_tokens"]
        assert f"chunked_prefill_size {chunk}" in pool.why and "cuda_graph_max_bs 512" in pool.why, pool.why


def test_deepseek_v4_runs_256_token_pages_and_no_prefill_graphs(tmp_path):
    """sglang 0.5.23 arg_groups/model_overrides/deepseek_v4.py ``_deepseek_v4_overrides`` declares
    page_size 256 for DeepSeek-V4 on CUDA and ROCm, over a given one too; arg_groups/cuda_graph_hook.py
    ``disable_breakable_cudagraph_if_incompatible`` turns its prefill graphs off on CUDA in
    ``handle_cuda_graph_config``, before ``handle_gpu_memory_settings`` would reserve for them."""
    from specsched.sim.defaults import breakable_prefill_graphs_off, page_size_snap
    from specsched.sim.profile import load_profile

    sc = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "B200", 4))
    s = sc.server
    assert s.page_size == 256 and s.disable_prefill_cuda_graph and s.prefill_graph_tokens == []
    hw = load_profile(sc.profile, relative_to=sc.path).hardware
    assert breakable_prefill_graphs_off(hw) and hw.mla
    # 512 + 16384 x 1.5 + 4/8 GiB + 512 x 2: no MLA prefill-graph 1.5 GiB
    mfs = round((183359 - (512 + 16384 * 1.5 + 512 + 1024)) / 183359, 3)
    assert mem_fraction_static(hw, 16384, 16384, 512) == mfs == 0.855
    assert s.max_total_num_tokens == kv_pool_tokens(hw, mfs, 256) and s.max_total_num_tokens % 256 == 0
    assert {r.key for r in sc._resolved_defaults} >= {"page_size", "disable_prefill_cuda_graph"}
    hip = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4)).server
    assert hip.page_size == 256
    given_ = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4, "page_size: 64"))
    assert given_.server.page_size == 256
    assert any(r.key == "page_size" and "_deepseek_v4_overrides" in r.why for r in given_._resolved_defaults)
    # another MLA model keeps its pages and, on Hopper, its prefill graphs and their reserve
    v3 = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8)).server
    assert v3.page_size == 1 and not v3.disable_prefill_cuda_graph
    assert page_size_snap(hip, hw.model_copy(update={"platform": "hip", "gpu": "MI355X"}), {"page_size"}) is None


def test_a_stated_graph_switch_drops_its_reserve(tmp_path):
    """arg_groups/memory_hook.py ``reserve_for_graph_mb`` reserves for a phase's graphs only when its
    backend is not DISABLED (``--disable-decode-cuda-graph``, ``--disable-prefill-cuda-graph``), and
    for the prefill sizes a server states (``cuda_graph_bs_prefill``, ``cuda_graph_max_bs_prefill``)."""
    from specsched.sim.defaults import mem_fraction_static_of

    hw = Hardware(platform="cuda", memory_mib=143771)
    base = 512 + 8192 * 1.5 + 128
    assert mem_fraction_static(hw, 8192, 16384, 256) == round((143771 - base - 512 - 58 * 8) / 143771, 3)
    assert mem_fraction_static(hw, 8192, 16384, 256, decode_graphs=False) == round((143771 - base - 58 * 8) / 143771, 3)
    assert mem_fraction_static(hw, 8192, 16384, 256, prefill_graphs=False) == round((143771 - base - 512) / 143771, 3)
    assert mem_fraction_static(hw, 8192, 16384, 256, prefill_graph_count=3) == round((143771 - base - 512 - 24) / 143771, 3)
    plain = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1)).server
    for server, want in (("disable_decode_cuda_graph: true", mem_fraction_static(hw, 8192, 16384, 256, decode_graphs=False)),
                         ("disable_prefill_cuda_graph: true", mem_fraction_static(hw, 8192, 16384, 256, prefill_graphs=False)),
                         ("cuda_graph_max_bs_prefill: 1024", mem_fraction_static(hw, 8192, 16384, 256, prefill_graph_count=38))):
        sc = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, server))
        assert mem_fraction_static_of(sc.server, hw, given=sc._server_given) == want
        assert sc.server.max_total_num_tokens > plain.max_total_num_tokens
    # a DeepSeek-V3 server on SM100: its prefill graphs are turned off after the reserve was taken
    b200 = load_scenario(_scenario(tmp_path, "deepseek-v3", "B200", 8))
    from specsched.sim.profile import load_profile

    bhw = load_profile(b200.profile, relative_to=b200.path).hardware
    assert b200.server.disable_prefill_cuda_graph
    assert mem_fraction_static_of(b200.server, bhw, given=b200._server_given) == mem_fraction_static(bhw, 16384, 16384, 512)
    assert mem_fraction_static(bhw, 16384, 16384, 512) < mem_fraction_static(bhw, 16384, 16384, 512, prefill_graphs=False)


@pytest.mark.parametrize("server, key", [
    ("speculative_algorithm: eagle", "server.speculative_eagle_topk"),
    ("speculative_algorithm: eagle, speculative_num_steps: 3, speculative_eagle_topk: 2, speculative_num_draft_tokens: 4",
     "server.speculative_eagle_topk"),
    ("speculative_algorithm: nextn", "server.speculative_algorithm"),
    ("speculative_algorithm: eagle3, speculative_num_steps: 3, speculative_eagle_topk: 1", "server.speculative_algorithm"),
])
def test_deepseek_v4_starts_only_with_eagle_topk_one_or_dspark(tmp_path, server, key):
    """sglang 0.5.23 arg_groups/deepseek_v4_hook.py ``apply_deepseek_v4_defaults`` asserts the launch's
    algorithm is EAGLE or DSPARK and EAGLE's topk is 1, before the speculative hook's aliases and
    automatic choice: SGLang does not start, so the scenario is refused in one line naming the key."""
    from specsched.sim.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4, server))
    assert e.value.key == key and "apply_deepseek_v4_defaults" in str(e.value)
    ok = load_scenario(_scenario(tmp_path, "deepseek-v4-flash", "MI355X", 4,
                                 "speculative_algorithm: eagle, speculative_num_steps: 3, speculative_eagle_topk: 1"))
    assert ok.server.spec_window == 4
    # another model keeps SGLang's automatic choice
    v3 = load_scenario(_scenario(tmp_path, "deepseek-v3", "MI355X", 8, "speculative_algorithm: nextn")).server
    assert (v3.speculative_num_steps, v3.speculative_eagle_topk, v3.speculative_num_draft_tokens) == (3, 1, 4)


def test_a_set_running_limit_is_cut_to_half_the_pool(tmp_path):
    """sglang 0.5.23 mem_cache/kv_cache_configurator.py ``resolve_max_num_reqs``: a limit that is set
    (given, the speculative reset's 48, a model hook's) is min(limit // DP ranks, pool // 2) too,
    not only the automatic one."""
    spec = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                   "speculative_algorithm: eagle, max_total_num_tokens: 64"))
    assert spec.server.max_running_requests == 32
    assert any(r.key == "max_running_requests" and "resolve_max_num_reqs" in r.why for r in spec._resolved_defaults)
    given_ = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1,
                                     "max_running_requests: 100, max_total_num_tokens: 150")).server
    assert given_.max_running_requests == 75
    roomy = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, "speculative_algorithm: eagle")).server
    assert roomy.max_running_requests == 48


def test_mla_prefill_graphs_stop_at_8192_tokens(tmp_path):
    """sglang 0.5.23 arg_groups/memory_hook.py ``handle_gpu_memory_settings``: an MLA model's default
    prefill graph limit is min(8192, chunked_prefill_size); other models capture up to the chunk."""
    v3 = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8, "chunked_prefill_size: 16384")).server
    assert v3.cuda_graph_max_bs_prefill == 8192 and v3.prefill_graph_tokens[-1] == 8192
    at_8k = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8)).server
    assert at_8k.cuda_graph_max_bs_prefill is None and at_8k.prefill_graph_tokens[-1] == 8192
    stated = load_scenario(_scenario(tmp_path, "deepseek-v3", "H200", 8,
                                     "chunked_prefill_size: 16384, cuda_graph_max_bs_prefill: 16384")).server
    assert stated.prefill_graph_tokens[-1] == 16384
    llama = load_scenario(_scenario(tmp_path, "llama-3.1-8b", "H200", 1, "chunked_prefill_size: 16384")).server
    assert llama.cuda_graph_max_bs_prefill is None and llama.prefill_graph_tokens[-1] == 16384


def test_the_memory_before_loading_is_the_gpu_tables_assumption(tmp_path):
    """The memory taken before SGLang measures free memory (kv_cache_configurator.py
    ``_profile_available_bytes``) is not knowable from a datasheet: the GPU table states the
    assumption (gpus.yaml ``context_mib``), the analytic profile carries it with its provenance,
    and the KV pool follows it."""
    from specsched.sim.profile import load_profile

    gpu = load_gpu("H200")
    assert gpu.context_mib == 1024
    prof = tmp_path / "p.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), gpu, 1), prof)
    p = load_profile(str(prof))
    assert "context_mib" in p.hardware.model_fields_set and p.hardware.context_mib == gpu.context_mib
    assert "gpus.yaml" in p.provenance["hardware.context_mib"]
    more = tmp_path / "more.yaml"
    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), gpu.model_copy(update={"context_mib": 4096}), 1), more)
    hw, hw4 = p.hardware, load_profile(str(more)).hardware
    assert hw4.context_mib == 4096
    assert kv_pool_tokens(hw4, 0.903) < kv_pool_tokens(hw, 0.903)
    assert kv_pool_tokens(hw, 0.903) - kv_pool_tokens(hw4, 0.903) == pytest.approx(3072 * 2**20 * 0.903 / 131072, abs=1)


def test_compare_names_the_arm_whose_kv_pool_capped_the_batch(tmp_path, capsys, monkeypatch):
    """`specsched compare` prints run's KV-pool note for the arm whose pool capped the batch
    (6,000 tokens: ~4 of 1,024 + 256), and none for the arm with room (800,000)."""
    from specsched.cli import main
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    sc = tmp_path / "pools.yaml"
    text = (ROOT / "scenarios" / "poisson8b-fixed.yaml").read_text()
    arms = "\narms:\n  base: {}\n  roomy:\n    server: {max_total_num_tokens: 800000}\n" \
           "  tight:\n    server: {max_total_num_tokens: 6000}\n"
    sc.write_text(text.split("\narms:")[0] + arms)
    assert main(["compare", str(sc), "--arms", "roomy,tight", "--seeds", "1", "--no-save",
                 "--set", "workload.num_requests=40"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "the KV pool, not max_running_requests" in line]
    assert len(notes) == 1 and notes[0].startswith("note: arm tight: ") and "a pool of 6,000 tokens" in notes[0], notes


@pytest.mark.parametrize("sets, said", [
    ({}, "at most 13 running (max_running_requests 32) and up to 10 waiting; 26 admission passes stopped for "
         "lack of KV tokens (SGLang's PrefillAdder: NO_TOKEN) in a pool of 14,000 tokens (max_total_num_tokens)"),
    ({"server.enable_dp_attention": True, "server.dp_size": 2, "server.tp_size": 2},
     "at most 13 running on one DP-attention rank (max_running_requests 32: 16 a rank) and up to 10 waiting; "
     "26 admission passes stopped for lack of KV tokens (SGLang's PrefillAdder: NO_TOKEN) in a pool of 14,000 tokens "
     "a rank"),
    ({"server.dp_size": 2}, "at most 13 running on one of the 2 DP replicas (max_running_requests 32)"),
])
def test_the_kv_pool_note_says_a_dp_rank_s_counts_as_one_rank_s(sets, said):
    """The scheduler's counts are one scheduler's under DP (a DP-attention rank's, a replica's:
    the largest one's peaks): the note set a rank's 13 running against the server's 32 (a rank
    runs at most 16) and did not say the pool is each rank's."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.defaults import kv_pool_note

    from tests.conftest import ROOT

    sc = load_scenario_with_overrides(ROOT / "scenarios" / "h200" / "kv-retract.yaml", "base", sets)
    note = kv_pool_note(sc, {"kv_refused_passes": 26, "kv_refused_running_peak": 13, "kv_refused_waiting_peak": 10})
    assert said in note, note


def test_the_kv_pool_note_does_not_give_a_refused_pass_s_running_as_the_run_s_most():
    """Short prompts first filled max_running_requests 12; longer ones later found the pool
    full with 9 running. The note said "at most 9 requests ran (max_running_requests 12)": the
    peak of the passes KV stopped, given as the run's, which ran 12 at once."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.defaults import kv_pool_note
    from specsched.sim.engine import run_scenario

    from tests.conftest import ROOT

    sc = load_scenario_with_overrides(ROOT / "scenarios" / "h200" / "kv-retract.yaml", "base", {
        "workload.kind": "poisson", "workload.request_rate": 20, "workload.num_requests": 120,
        "workload.input_len.kind": "uniform", "workload.input_len.value": 6000, "workload.input_len.range_ratio": 0.005,
        "workload.output_len.value": 64, "server.max_running_requests": 12, "server.max_total_num_tokens": 30000})
    res = run_scenario(sc, seed=sc.seed)
    peak = res.summary["kv_refused_running_peak"]
    assert peak < int(res.table("timeseries")["running"].max()) == 12
    note = kv_pool_note(sc, res.summary)
    assert f"at most {peak} requests ran" not in note and f"kept requests out with at most {peak} running" in note
