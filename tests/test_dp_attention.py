"""DP attention (sim/dp_attention.py): dp_size schedulers in lock-step.

Named invariants (docs/architecture.md):

- INV-DP-ONE: enable_dp_attention with dp_size 1 gives exactly the single scheduler's run.
- INV-DP-RANK: every rank keeps its own limits at every pass: running requests <= its
  max_running_requests (the server's // dp_size), KV used <= its pool, KV balance.
- INV-DP-LOCKSTEP: one forward of the group lasts its slowest rank's batch plus the sync,
  and with speculative decoding (no prefill coordination) no rank decodes in a forward in
  which any rank extends (managers/scheduler.py ``get_next_batch_to_run``).
- INV-DP-RR: requests reach the ranks round robin in arrival order
  (data_parallel_controller.py ``round_robin_scheduler``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.config import Scenario
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.dp_attention import DPCost, DPDevice, DPGroup, rank_server_args
from specsched.sim.engine import SimEngine
from specsched.sim.plan import ForwardMode
from specsched.sim.request import Req

from tests.conftest import (
    arrive_and_pass,
    make_scenario,
    tiny_profile,
    uniform_lengths,
    window_acceptance,
)
from tests.test_invariants import servers, workloads

RUNS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _scenario(args: dict, **server) -> Scenario:
    srv = dict(args["server"], **server)
    workload = uniform_lengths(args["workload"], args["inp"], args["out"])
    acc = window_acceptance(srv)
    return make_scenario(srv, workload, acc, seed=args["seed"])


runs = st.fixed_dictionaries({"server": servers, "workload": workloads, "inp": st.integers(1, 1200),
                              "out": st.integers(1, 120), "seed": st.integers(0, 10_000)})


@RUNS
@given(runs)
def test_inv_dp_one_rank_is_the_single_scheduler(args):
    plain = SimEngine(_scenario(args), tiny_profile(), args["seed"], fast_forward=False).run()
    group = SimEngine(_scenario(args, enable_dp_attention=True), tiny_profile(), args["seed"]).run()
    assert group.requests.equals(plain.requests)
    assert group.steps.equals(plain.steps)
    assert group.summary.keys() == plain.summary.keys()
    for k, v in plain.summary.items():
        w = group.summary[k]
        assert w == v or (v != v and w != w), k   # NaN where a figure is undefined


def test_rank_server_args_follow_sglang_division():
    # parallel_hook.py _handle_data_parallelism; kv_cache_configurator.py resolve_max_num_reqs
    srv = make_scenario({"enable_dp_attention": True, "dp_size": 16, "chunked_prefill_size": 16384,
                         "max_running_requests": 256, "max_total_num_tokens": 900_000}).server
    r = rank_server_args(srv)
    assert (r.chunked_prefill_size, r.max_running_requests) == (1024, 16)
    assert r.schedule_conservativeness == pytest.approx(0.3)
    assert r.max_total_num_tokens == 900_000 and r.max_prefill_tokens == srv.max_prefill_tokens
    assert rank_server_args(make_scenario({"enable_dp_attention": True, "dp_size": 1}).server).chunked_prefill_size == 2048


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(server=servers, dp=st.integers(2, 4), kv=st.integers(1_500, 10_000), coord=st.booleans(),
       lens=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 150)), min_size=1, max_size=24),
       arrive=st.lists(st.integers(0, 40), min_size=24, max_size=24), seed=st.integers(0, 10_000))
def test_inv_dp_rank_limits_lockstep_and_round_robin(server, dp, kv, coord, lens, arrive, seed):
    srv = dict(server, max_total_num_tokens=kv, enable_dp_attention=True, dp_size=dp,
               max_running_requests=max(server["max_running_requests"], dp), dp_spec_prefill_coordination=coord)
    if srv["chunked_prefill_size"] != -1:
        srv["chunked_prefill_size"] *= dp
    sc = make_scenario(srv, seed=seed, acceptance=window_acceptance(server))
    g = DPGroup(sc.server, seed)
    dev = DPDevice(DeviceTokens(AcceptanceModel(sc.acceptance, sc.server.spec_window, seed)))
    pending = sorted(((t, Req(i, a, b)) for i, ((a, b), t) in enumerate(zip(lens, arrive, strict=False))), key=lambda x: x[0])
    order = [r.rid for _, r in pending]
    split = sc.server.speculative_algorithm.enabled and not coord
    in_flight = None
    for p in range(5_000):
        done, in_flight = arrive_and_pass(g, dev, pending, p, in_flight)
        if done:
            break
        for rank in g.ranks:
            assert rank.num_running <= g.rank_server.max_running_requests                   # INV-DP-RANK
            assert 0 <= rank.kv.used <= rank.kv.capacity == kv
            assert rank.kv.used == sum(r.kv_allocated for r in rank.reqs.values())
        if in_flight is not None:
            plan = in_flight[0]
            assert len(plan.parts) == dp
            if split and plan.num_extend:                                                  # INV-DP-LOCKSTEP
                # a rank's own mixed chunk is its prefill batch; no rank runs a decode batch
                assert all(p.num_extend > 0 for _, p in plan.live)
    assert not g.has_work and all(rank.kv.used == 0 for rank in g.ranks)
    seen = [rid for rid in order if rid in g.rank_of]
    assert [g.rank_of[rid] for rid in seen] == [i % dp for i in range(len(seen))]           # INV-DP-RR
    assert all(r.output_len == r.max_new_tokens for r in g.reqs.values())


class _Spy(DPCost):
    """Records the parts' costs of every main launch."""

    def __init__(self, inner: DPCost) -> None:
        super().__init__(inner.cost, inner.sync_s)
        self.seen: list[float] = []

    def gpu(self, plan, part="main", cross_queue=False):
        c = super().gpu(plan, part, cross_queue)
        if part == "main":
            self.seen.append(max(self.cost.gpu(p, part, cross_queue).total_s for _, p in plan.live) + self.sync_s)
        return c


@RUNS
@given(runs, st.integers(2, 4), st.sampled_from([0.0, 1e-3]))
def test_inv_dp_lockstep_forward_lasts_the_slowest_rank_plus_sync(args, dp, sync):
    prof = tiny_profile()
    prof = prof.model_copy(update={"gpu": prof.gpu.model_copy(update={"dp_attention_sync_s": sync})})
    srv = {"enable_dp_attention": True, "dp_size": dp,
           "max_running_requests": max(args["server"]["max_running_requests"], dp)}
    c = args["server"]["chunked_prefill_size"]
    srv["chunked_prefill_size"] = c if c == -1 else c * dp
    eng = SimEngine(_scenario(args, **srv), prof, args["seed"])
    eng.cost = spy = _Spy(eng.cost)
    res = eng.run()
    main = res.steps[res.steps["part"] == "main"]
    dur = (main["gpu_end_s"] - main["gpu_start_s"]).to_numpy()
    assert len(dur) == len(spy.seen)
    # a forward is never shorter than its slowest rank plus the sync (longer only while
    # the host issues an eager forward, which the tiny profile does not)
    assert dur == pytest.approx(spy.seen, rel=1e-9, abs=1e-12)
    assert res.summary["completed"] == args["workload"]["num_requests"]


def test_spec_prefill_on_one_rank_idles_the_others_decode():
    """managers/scheduler.py get_next_batch_to_run: with speculative decoding and no prefill
    coordination, a prefill anywhere means an idle batch for every rank without one."""
    prof = tiny_profile()
    out = {}
    for coord in (False, True):
        sc = make_scenario({"enable_dp_attention": True, "dp_size": 2, "chunked_prefill_size": 500,
                            "dp_spec_prefill_coordination": coord},
                           {"kind": "closed_loop", "concurrency": 2, "num_requests": 8,
                            "input_len": {"kind": "uniform", "value": 4000, "range_ratio": 0.1},
                            "output_len": {"kind": "fixed", "value": 300}})
        res = SimEngine(sc, prof).run()
        main = res.steps[res.steps["part"] == "main"]
        ext = main[main["num_extend_tokens"] > 0]
        out[coord] = (ext["mode"].tolist(), int(ext["accepted_tokens"].sum()))
    assert set(out[False][0]) == {ForwardMode.EXTEND.value} and out[False][1] == 0
    assert ForwardMode.MIXED.value in out[True][0] and out[True][1] > 0


def _ht_burst(**ov):
    """The MI355X HT cell (a measured profile of the TP4 group), 64 requests of 512 outputs."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.bundled import scenarios_dir
    from specsched.sim.engine import run_scenario

    sc = load_scenario_with_overrides(scenarios_dir() / "burst256-ht.yaml", "base",
                                      {"workload.num_requests": 64, "server.max_running_requests": 64,
                                       "workload.output_len": {"kind": "fixed", "value": 512}, **ov})
    return run_scenario(sc, seed=1).summary["output_throughput"]


def test_dp_attention_on_a_measured_tp_group_profile_is_the_groups_forward():
    """A measured profile with hardware.tp_size 4 times the whole TP4 group's forward. Under
    DP attention the same four GPUs run every rank's requests and the MLP/MoE runs over all
    ranks' tokens (scheduler_components/dp_attn.py prepare_mlp_sync_batch_raw), so a
    forward is not one rank's batch on the whole group. Read per rank, dp_size 4 on the
    MI355X HT cell more than doubled the burst's output throughput (7,809 -> 17,500 tok/s);
    the profile does not say the model's attention is MLA, so no KV saving is credited."""
    from specsched.sim.dp_attention import tp_group_kv_ratio
    from specsched.sim.profile import load_profile

    plain = _ht_burst()
    dp4 = _ht_burst(**{"server.enable_dp_attention": True, "server.dp_size": 4})
    assert dp4 <= plain * 1.05
    prof = load_profile("mi355x-dsv41-flash-tp4")
    assert tp_group_kv_ratio(prof, 4) == 4.0 and tp_group_kv_ratio(prof, 2) == 2.0
    mla = prof.model_copy(update={"hardware": prof.hardware.model_copy(update={"mla": True})})
    assert tp_group_kv_ratio(mla, 4) == 1.0
    assert tp_group_kv_ratio(load_profile("mi355x-dsv4pro-agentic"), 8) is None  # tp_size 1: per rank


def test_dp_size_that_does_not_divide_a_measured_tp_group_is_refused(tmp_path, capsys):
    """SGLang asserts tp_size % dp_size == 0 with DP attention (arg_groups/parallel_hook.py
    handle_data_parallelism); a measured TP4 profile with dp_size 3 ran."""
    from specsched.sim.bundled import scenarios_dir

    from specsched.cli import main

    out = tmp_path / "res"
    rc = main(["run", str(scenarios_dir() / "burst256-ht.yaml"), "--set", "server.enable_dp_attention=true",
               "--set", "server.dp_size=3", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "server.dp_size = 3" in err and "TP size 4" in err and "allowed: 1, 2, 4" in err
    assert not out.exists()


def test_coordinated_spec_prefill_prices_no_injection_on_a_decoding_rank():
    """With dp_spec_prefill_coordination a rank decodes while another prefills in the same
    forward; only the prefilling rank's drafter injects its prompt's KV (the block drafter's
    prefill pass runs on the rank's own extend batch: speculative/dflash_worker.py
    forward_batch_generation with an extend batch). The decoding rank's zero-token injection
    was priced from the draft_inject grid below its first point, and every such run warned
    "draft inject tokens 0 below the profile's grid"."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.profile import Profile

    prof = Profile.model_validate(build_profile(load_model("llama-3.1-8b"), load_gpu("H100"), 2, "bf16"))
    sc = make_scenario({"enable_dp_attention": True, "dp_size": 2, "chunked_prefill_size": 512,
                        "dp_spec_prefill_coordination": True},
                       {"kind": "closed_loop", "concurrency": 4, "num_requests": 12,
                        "input_len": {"kind": "uniform", "value": 2000, "range_ratio": 0.2},
                        "output_len": {"kind": "fixed", "value": 60}})
    eng = SimEngine(sc, prof)
    res = eng.run()
    main = res.steps[res.steps["part"] == "main"]
    assert ForwardMode.MIXED.value in set(main["mode"])
    notes = [n for n in eng.range_notes() if "draft_inject" in str(n)]
    assert notes == []


def test_dflash_with_dp_attention_refuses_prefill_coordination():
    """SGLang 0.5.23 stops at start for DFLASH under DP attention with the coordination on
    (arg_groups/speculative_hook.py _handle_dflash: "DFLASH with dp attention requires
    SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=0"); the simulator ran it."""
    from specsched.sim.errors import FieldError

    srv = {"enable_dp_attention": True, "dp_size": 2, "speculative_algorithm": "dflash",
           "speculative_num_draft_tokens": 4}
    with pytest.raises(ValueError) as e:
        make_scenario({**srv, "dp_spec_prefill_coordination": True})
    assert "server.dp_spec_prefill_coordination" in str(e.value)
    assert isinstance(e.value.errors()[0]["ctx"]["error"], FieldError)
    make_scenario(srv)   # coordination off (0.5.23's default): runs
    make_scenario({**srv, "speculative_algorithm": "dspark", "dp_spec_prefill_coordination": True})


@pytest.mark.parametrize("where", ["server", "decode role"])
def test_standalone_drafter_under_dp_attention_is_refused(where):
    """SGLang 0.5.23 stops at start: "Currently standalone speculative decoding does not
    support dp attention" (arg_groups/speculative_hook.py _handle_eagle_family). The
    simulator ran it; refused naming the drafter, on a server and on a disaggregated role.
    EAGLE under DP attention still runs."""
    from pydantic import ValidationError
    from specsched.sim.config import ServerArgs

    sa = {"speculative_algorithm": "standalone", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}
    dp = {"enable_dp_attention": True, "dp_size": 2}
    if where == "server":
        with pytest.raises(ValidationError, match="standalone .* DP attention"):
            ServerArgs.model_validate({**sa, **dp})
    else:
        with pytest.raises(ValidationError, match="disaggregation.decode.server.speculative_algorithm .* DP attention"):
            ServerArgs.model_validate({**sa, "disaggregation": {"prefill": {"instances": 1},
                                                                "decode": {"instances": 1, "server": dp}}})
    ServerArgs.model_validate({**sa, "speculative_algorithm": "eagle", **dp})
    ServerArgs.model_validate(sa)


def test_a_lone_long_prompt_under_dp_attention_pays_its_rank_s_own_attention():
    """DP attention at dp = tp leaves each rank one GPU of attention TP (``num_heads //
    attn_tp_size`` heads on it), so a lone prompt's attention runs on its rank's GPU: the
    group's extend grid spread it over every GPU, and a 32K-token prompt of DeepSeek-V3 on 8 x
    H200 cost a third of its rank's attention alone. Balanced ranks
    cost what the grid says; one rank extending alone costs about ``dp`` times the grid's
    attention share; a rank's extra never goes below zero."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.dp_attention import RankAttention
    from specsched.sim.profile import Profile

    prof = Profile.model_validate(build_profile(load_model("deepseek-v3"), load_gpu("H200"), 8, "fp8"))
    ra = RankAttention(prof.analytic, 8)
    spread = ra._attention_s(ra.group_par, [8192], [24_000])
    lone = ra.extra_s([([8192], [24_000])])
    assert lone == pytest.approx(ra._attention_s(ra.rank_par, [8192], [24_000]) - spread)
    assert lone > 5 * spread   # about 7 x the grid's share (dp - 1), not 0
    balanced = ra.extra_s([([1024], [3000])] * 8)
    assert balanced == pytest.approx(0.0, abs=0.02 * ra._attention_s(ra.rank_par, [1024], [3000]))
    assert ra.extra_s([]) == 0.0


def test_dp_attention_prefill_of_one_long_prompt_is_slower_than_tp():
    """End to end (analytic DeepSeek-V3, 8 x H200): the TTFT of a lone 16K-token prompt under DP
    attention 8 is more than twice TP8's: the rank's own attention on its one GPU (about 1.4 s
    at 16K tokens) against the whole prefill spread over eight (about 0.5 s)."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.profile import Profile

    prof = Profile.model_validate(build_profile(load_model("deepseek-v3"), load_gpu("H200"), 8, "fp8"))

    def ttft(dp: bool, n: int) -> float:
        server = {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1, "tp_size": 8,
                  "max_running_requests": 64, "chunked_prefill_size": 8192, "max_prefill_tokens": 16384,
                  "max_total_num_tokens": 400_000}
        if dp:
            server |= {"enable_dp_attention": True, "dp_size": 8}
        sc = make_scenario(server, {"kind": "burst", "num_requests": n, "input_len": {"kind": "fixed", "value": 16384},
                                    "output_len": {"kind": "fixed", "value": 4}})
        return float(SimEngine(sc, prof).run().requests.ttft_s.max())

    tp1, dp1 = ttft(False, 1), ttft(True, 1)
    assert dp1 > 2 * tp1


def test_moe_rows_follow_sglang_dp_padding():
    """Rows each GPU's MoE runs under DP attention, and how many of them pick their experts on
    their own (sim/dp_attention.py moe_rows). A replayed graph pads each rank with its earlier
    tokens (decode_cuda_graph_runner.py: input_ids' tail is not refilled; model_runner.py
    _forward_raw replays before any eager padding), which route as tokens do; eager zero rows
    on a busy rank (forward_batch_info.py prepare_mlp_sync_batch: input id 0 at position 0)
    compute one hidden state and pick one top-k; an idle rank's eager rows are undefined
    (ForwardMode.IDLE attention returns an uninitialised tensor) and count one each; on ROCm
    every padded row's MoE input is zeroed (moe_transport.py _mask_dp_pad_rows). No padded
    row is masked from routing (ForwardBatch.moe_num_token_non_padded is None when
    attn_dp_size != 1)."""
    from specsched.sim.dp_attention import (
        CUSTOM_ALL_REDUCE_V2_MAX_BYTES,
        decode_pads_to_max_len,
        moe_rows,
    )

    row = 2 * 7168  # DeepSeek-V3's bf16 hidden state
    cuda = {"row_bytes": row, "ca_bytes": CUSTOM_ALL_REDUCE_V2_MAX_BYTES}
    # graph replays on CUDA: every padded row is a stale token, whatever the gather mode
    assert moe_rows([1] + [0] * 7, 1, 1, **cuda) == (8, 8)
    assert decode_pads_to_max_len([1] * 4 + [0] * 4, False, row, CUSTOM_ALL_REDUCE_V2_MAX_BYTES)
    assert moe_rows([1] * 4 + [0] * 4, 1, 1, **cuda) == (8, 8)
    assert moe_rows([9] + [8] * 7, 1, 12, **cuda) == (96, 96)
    assert moe_rows([8] * 7 + [4], 1, 8, spec=True, **cuda) == (64, 64)
    assert moe_rows([3] * 4 + [0] * 4, 1, 4, **cuda) == (32, 32)
    # attention TP 2 under a graph: no zero alignment row either
    assert moe_rows([1] * 4, 2, 2, **cuda) == (8, 8)
    # eager, beyond the custom all-reduce: balanced busy ranks gather MAX_LEN, their zero rows one draw
    big = CUSTOM_ALL_REDUCE_V2_MAX_BYTES // row // 8 + 1
    assert moe_rows([big + 1] + [big] * 7, 1, None, **cuda) == (8 * (big + 1), 8 * big + 1 + 1)
    # eager SUM_LEN: only the ranks' own rows reach the MoE
    assert moe_rows([9, 1] + [0] * 6, 1, None, **cuda) == (10, 10)
    # eager MAX_LEN with idle ranks: their rows are undefined, one draw each (the most they can read)
    assert moe_rows([4] * 6 + [0] * 2, 1, None, **cuda) == (32, 32)
    # eager attention TP 2 (dp 4 of tp 8): a rank's odd count is aligned up with a zero row
    assert moe_rows([3, 2, 2, 2], 2, None, **cuda) == (10, 9 + 1)
    # ROCm: every padded row, graph or eager, is one draw; no padding, no extra draw
    assert moe_rows([1] + [0] * 7, 1, 1, row_bytes=row, zeroes_pads=True) == (8, 2)
    assert moe_rows([4] * 6 + [0] * 2, 1, None, row_bytes=row, zeroes_pads=True) == (32, 25)
    assert moe_rows([2] * 8, 1, 2, row_bytes=row, zeroes_pads=True) == (16, 16)


def _dp8_decode_step(gpu: str, model: str = "deepseek-v3"):
    """The group decode step of the analytic ``model`` fp8 profile at TP8 with dp_size 8 on
    ``gpu``, as a function of each rank's request count (context 1024), and its DPCost."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.cost_model import CostModel
    from specsched.sim.dp_attention import GroupPlan
    from specsched.sim.plan import BatchPlan
    from specsched.sim.profile import Profile
    from specsched.sim.server_args import ServerArgs

    prof = Profile.model_validate(build_profile(load_model(model), load_gpu(gpu), 8, "fp8"))
    server = ServerArgs.model_validate({"speculative_algorithm": "none", "speculative_num_draft_tokens": 1,
                                        "tp_size": 8, "max_running_requests": 512, "enable_dp_attention": True,
                                        "dp_size": 8})
    dp = DPCost(CostModel(prof, rank_server_args(server)), 0.0, 8)

    def step(loads: list[int]) -> float:
        parts = tuple(BatchPlan(0, ForwardMode.DECODE, tuple(range(n)), (1,) * n, (1024,) * n) if n else None
                      for n in loads)
        return dp.gpu(GroupPlan(0, parts)).total_s

    return step, dp


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=8, max_size=8), st.integers(0, 7),
       st.sampled_from([("H200", "deepseek-v3"), ("MI355X", "deepseek-v3"), ("MI355X", "deepseek-v4-flash")]))
def test_dp_group_decode_never_cheaper_with_more_requests(loads, rank, where):
    """INV-DP-PAD-MONOTONE: adding a request to any rank of a DP-attention group never makes its
    decode step cheaper (the padded rows' pricing must not reward load; a rule that collapsed
    padded rows SGLang does not collapse made four busy ranks cheaper than two)."""
    step, _ = _dp8_decode_step(*where)
    if not any(loads):
        return
    more = list(loads)
    more[rank] += 1
    assert step(more) >= step(loads) - 1e-12


def test_rocm_padded_rows_read_their_experts_once():
    """One request on one of 8 DP-attention ranks (TP8, fp8). DeepSeek-V3: the seven idle
    ranks' graph rows are stale tokens and read experts as eight tokens do, on H200 and MI355X
    alike (deepseek_v2.py gathers padded rows as they are). DeepSeek-V4-Flash on MI355X: its
    MoE gather (deepseek_common/moe_transport.py, DeepSeek-V4 only) zeroes every padded row
    under _is_hip, so they pick one top-k together and the step reads the experts of 2 draws,
    not 8; on H200 the same model is not zeroed."""
    from specsched.sim.analytic.roofline import routed_experts_s

    for gpu in ("H200", "MI355X"):
        step, _ = _dp8_decode_step(gpu)
        assert step([1] + [0] * 7) == pytest.approx(step([1] * 8))
        assert step([1] * 4 + [0] * 4) == pytest.approx(step([1] * 8))
    step, _ = _dp8_decode_step("H200", "deepseek-v4-flash")
    assert step([1] + [0] * 7) == pytest.approx(step([1] * 8))
    step, dp = _dp8_decode_step("MI355X", "deepseek-v4-flash")
    pr = dp.pad_routing
    args = (pr.arch, pr.gpu, pr.par, pr.eff, 8.0)
    saving = routed_experts_s(*args) - routed_experts_s(*args, routed=2.0)
    assert saving > 1e-4
    assert step([1] + [0] * 7) == pytest.approx(step([1] * 8) - saving)
    assert routed_experts_s(*args, routed=8.0) == routed_experts_s(*args)


def test_dp_attention_on_a_model_sglang_does_not_lay_out_for_it_is_noted():
    """SGLang 0.5.23's models/llama.py never reads the attention TP size, so a Llama server with
    enable_dp_attention has no attention-DP layout; the run says its figures price the layout
    DP-aware models have (sim/dp_attention.py dp_attention_layout_note). DeepSeek-V3
    (deepseek_v2.py splits num_heads // attn_tp_size) and runs without DP attention get no note."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.dp_attention import dp_attention_layout_note
    from specsched.sim.profile import Profile

    def scenario(dp: int) -> Scenario:
        server = {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}
        if dp > 1:
            server |= {"enable_dp_attention": True, "dp_size": dp}
        return Scenario.model_validate({"name": "n", "profile": "analytic", "seed": 1, "server": server,
                                        "acceptance": {"mean_accept_length": 1.0},
                                        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 64},
                                                     "output_len": {"kind": "fixed", "value": 4}}})

    llama = Profile.model_validate(build_profile(load_model("llama-3.1-70b"), load_gpu("H100"), 8, "bf16"))
    dsv3 = Profile.model_validate(build_profile(load_model("deepseek-v3"), load_gpu("H200"), 8, "fp8"))
    note = dp_attention_layout_note(scenario(4), llama)
    assert note is not None and "models/llama.py" in note and "tp / dp = 2 GPUs" in note
    assert dp_attention_layout_note(scenario(1), llama) is None
    assert dp_attention_layout_note(scenario(4), dsv3) is None
