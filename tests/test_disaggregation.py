"""Prefill-decode disaggregation (sim/disaggregation.py, sim/scheduler_disagg.py).

Named invariants (docs/architecture.md):

- INV-PD-NOEXTEND: a decode server never runs an extend; every request still finishes once
  with exactly its output, its first token delivered by the decode server
  (disaggregation/decode.py ``_get_new_prebuilt_batch``: ForwardMode.PREBUILT, no forward).
- INV-PD-GATE: a prefill server starts a request only after its decode server reserved the
  prompt's KV (prefill.py ``pop_bootstrapped`` under the ``early`` allocation policy), and a
  prefill server never decodes (``get_next_disagg_prefill_batch_to_run``).
- INV-PD-PROGRESS: the run ends: servers delivering at one instant never hold the clock
  still; a request a decode server can never preallocate is refused (decode.py
  ``pop_preallocated`` would keep it waiting), and a run that cannot move raises Stalled.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from specsched.sim.admission import make_policy
from specsched.sim.config import ServerArgs
from specsched.sim.disagg_config import KVTransferCost
from specsched.sim.disagg_records import deployment_window
from specsched.sim.engine import SimEngine, Stalled
from specsched.sim.errors import ConfigError
from specsched.sim.request import Req
from specsched.sim.scheduler import Scheduler, UnschedulableRequest

from tests.conftest import make_scenario, tiny_profile
from tests.test_bad_input import _assert_refused
from tests.test_cli_and_io import small_scenario


def _profile(bytes_per_token: float = 1e5, link: float = 1e10, latency: float = 1e-3):
    return tiny_profile().model_copy(update={"kv_transfer": KVTransferCost(
        bytes_per_token=bytes_per_token, link_bytes_per_s=link, latency_s=latency)})


def _pd(prefill: int = 1, decode: int = 1, prefill_server: dict | None = None, decode_server: dict | None = None,
        **server) -> dict:
    return dict(server, disaggregation={"prefill": {"instances": prefill, "server": prefill_server or {}},
                                        "decode": {"instances": decode, "server": decode_server or {}}})


RUN_LIMIT_S = 60
"""Wall seconds one property example may take before it counts as hung (a few at most)."""


@contextmanager
def _hang_fails(seconds: int = RUN_LIMIT_S):
    """Fail the test (instead of hanging it) when the block runs longer than ``seconds``."""
    def _alarm(_sig, _frame):
        raise AssertionError(f"the run did not finish within {seconds} s (hung)")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _noextend_case(prefill, decode, dp, kv, spec, seed, kind, inp, out):
    """The INV-PD-NOEXTEND scenario: ``prefill`` and ``decode`` servers (the prefill ones with
    ``dp`` attention ranks, the decode ones with ``kv`` KV slots), 12 requests."""
    srv = _pd(prefill, decode, decode_server={"max_total_num_tokens": kv},
              prefill_server={"enable_dp_attention": dp > 1, "dp_size": dp})
    if not spec:
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    wl = {"kind": kind, "num_requests": 12, "input_len": {"kind": "uniform", "value": inp, "range_ratio": 0.5},
          "output_len": {"kind": "uniform", "value": out, "range_ratio": 0.5}}
    if kind == "closed_loop":
        wl["concurrency"] = 3
    if kind == "poisson":
        wl["request_rate"] = 50.0
    return make_scenario(srv, wl, {"mean_accept_length": 2.0} if spec else {"mean_accept_length": 1.0}, seed=seed)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefill=st.integers(1, 2), decode=st.integers(1, 3), dp=st.sampled_from([1, 2]),
       kv=st.integers(3_000, 20_000), spec=st.booleans(), seed=st.integers(0, 1000),
       kind=st.sampled_from(["burst", "closed_loop", "poisson"]),
       inp=st.integers(10, 1500), out=st.integers(1, 60))
# two decode servers whose first requests finish at one instant (the prefill's two DP ranks
# run in lock-step): each host's wait for the clients' reactions kept the other's due and
# the clock never moved (the run hung)
@example(prefill=1, decode=2, dp=2, kv=3000, spec=False, seed=422, kind="burst", inp=1070, out=1)
def test_inv_pd_noextend_decode_server_never_extends(prefill, decode, dp, kv, spec, seed, kind, inp, out):
    eng = SimEngine(_noextend_case(prefill, decode, dp, kv, spec, seed, kind, inp, out), _profile(), seed)
    with _hang_fails():
        res = eng.run()
    assert (res.steps["num_extend_tokens"] == 0).all()          # INV-PD-NOEXTEND
    assert set(res.steps["mode"]) <= {"verify", "decode"}
    req = res.requests
    assert len(req) == 12 and (req["output_len"] == [s.output_len for s in eng.specs]).all()
    assert (req["ttft_s"] > 0).all() and (req["ttft_s"] <= req["e2e_s"]).all()
    for p in eng.prefill:   # the prefill servers freed every prompt once sent (nothing decoded)
        for r in _ranks(p.sched):
            assert r.kv.used == sum(q.kv_allocated for q in r.reqs.values()) and not r.inflight
    for d in eng.decode:
        for r in _ranks(d.sched):
            assert r.kv.used == 0 and not r.prealloc_queue and not r.transfer_queue


def _ranks(sched):
    return getattr(sched, "ranks", [sched])


def test_pd_decode_servers_finishing_at_one_instant_do_not_hang():
    """INV-PD-PROGRESS: two decode servers stream their first finished requests at the same
    instant (the prefill server's two DP ranks finish in lock-step); the run ends (it hung:
    each host waited while anything else was due now, and the other's wait always was),
    every request once with its one output token."""
    sc = _noextend_case(prefill=1, decode=2, dp=2, kv=3000, spec=False, seed=422, kind="burst", inp=1070, out=1)
    eng = SimEngine(sc, _profile(), 422)
    with _hang_fails(30):
        res = eng.run()
    req = res.requests
    assert sorted(req["rid"]) == list(range(12)) and (req["output_len"] == 1).all()
    # the case's point: both decode servers finished a request at one time
    first = req.groupby(req["rid"] % 2)["finish_s"].min()
    assert first[0] == first[1]
    assert res.summary["completed"] == 12


def _one_request_pd(inp: int, kv: int = 3000, reserve: int | None = None) -> SimEngine:
    srv = _pd(1, 2, decode_server={"max_total_num_tokens": kv, **({} if reserve is None else {"num_reserved_decode_tokens": reserve})},
              speculative_algorithm="none", speculative_num_draft_tokens=1)
    wl = {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": inp},
          "output_len": {"kind": "fixed", "value": 1}}
    return SimEngine(make_scenario(srv, wl, {"mean_accept_length": 1.0}), _profile(), 1)


def test_decode_server_refuses_a_request_it_can_never_preallocate():
    """A prompt below the decode pool but above it with num_reserved_decode_tokens (2700 +
    512 > 3000): SGLang's pop_preallocated would stop at it for ever; the run ends with an
    UnschedulableRequest naming the decode server's pool instead of idling. 2488 + 512 fits
    exactly and runs."""
    with _hang_fails(30), pytest.raises(UnschedulableRequest, match=r"= 3212 KV slots.*max_total_num_tokens=3000"
                                                                    r".*server\.disaggregation\.decode\.server"):
        _one_request_pd(2700).run()
    with _hang_fails(30):
        assert _one_request_pd(2488).run().summary["completed"] == 4
    with _hang_fails(30), pytest.raises(UnschedulableRequest):
        _one_request_pd(2489).run()
    with _hang_fails(30):   # a smaller reservation fits the same prompt
        assert _one_request_pd(2700, reserve=100).run().summary["completed"] == 4


def test_a_request_over_the_decode_pool_names_the_decode_servers_key():
    """A prompt over the decode server's whole pool: the refusal names the key to change,
    server.disaggregation.decode.server.max_total_num_tokens, not the plain server's."""
    with _hang_fails(30), pytest.raises(UnschedulableRequest, match=r"cannot fit max_total_num_tokens=3000 "
                                                                    r"\(server\.disaggregation\.decode\.server\.max_total_num_tokens\)"):
        _one_request_pd(3100).run()


def test_pd_run_that_can_never_move_raises_stalled(monkeypatch):
    """Without the refusal (a model bug standing in), every server sleeps with requests
    left: the run raises Stalled naming the queues that hold them, never SimPy's bare
    "no scheduled events left" nor a hang."""
    monkeypatch.setattr(Scheduler, "_refuse_unpreallocatable", lambda self, r: None)
    with _hang_fails(30), pytest.raises(Stalled, match=r"4 requests left \(decode 0 rank 0: prealloc \[0, 2\]; "
                                                        r"decode 1 rank 0: prealloc \[1, 3\]\)"):
        _one_request_pd(2700).run()


def test_bad_decode_pool_is_one_line(tmp_path, capsys):
    """The CLI: a decode pool too small for a prompt and its reservation is refused before
    simulating (sim/limits.py), in one line naming the file, the key and the size needed."""
    # 4000-token prompts: 4000 + 64 output tokens fit a 4400-slot pool, 4000 + 512 reserved do not
    path = small_scenario(tmp_path, **{
        "chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {decode: {server: {max_total_num_tokens: 4400}}}",
        "mi355x-dsv41-flash-tp4.yaml": "mi355x-dsv4pro-agentic-pd.yaml",
        "{kind: uniform, value: 4096, range_ratio: 0.95}": "{kind: fixed, value: 4000}"})
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path),
                    "server.disaggregation.decode.server.max_total_num_tokens = 4400: must be at least 4512",
                    "num_reserved_decode_tokens=512")


def test_kv_transfer_time_shows_in_ttft():
    # one request, one chunk: TTFT = prefill + the last chunk's transfer + latency, so two
    # links differ in TTFT by exactly the transfer time of the prompt's KV
    sc = make_scenario(_pd(), {"num_requests": 1, "input_len": {"kind": "fixed", "value": 1000}})
    fast = SimEngine(sc, _profile(link=1e12, latency=0.0), 1).run()
    slow = SimEngine(sc, _profile(link=1e9, latency=0.004), 1).run()
    expect = 1000 * 1e5 / 1e9 - 1000 * 1e5 / 1e12 + 0.004
    got = slow.requests["ttft_s"].iloc[0] - fast.requests["ttft_s"].iloc[0]
    assert got == pytest.approx(expect, rel=1e-9)
    assert slow.summary["mean_kv_transfer_ms"] == pytest.approx((0.1 + 0.004) * 1e3)
    # the decode side's TPOT does not see the link
    assert slow.summary["mean_tpot_ms"] == pytest.approx(fast.summary["mean_tpot_ms"])


@pytest.mark.parametrize("mla,kv_heads,ratio", [(False, 4, 2.0), (False, 2, 1.0), (True, None, 1.0)])
def test_a_dp_attention_prefill_rank_sends_the_kv_heads_its_gpus_hold(mla, kv_heads, ratio):
    """kv_transfer.bytes_per_token is one GPU's KV shard at the profile's TP size. Under DP
    attention a rank's GPUs hold the KV heads of the attention TP size tp / dp
    (model_executor/pool_configurator.py get_num_kv_heads(attn_tp_size)), and each sends its
    own over its link: a TP4 group with 4 KV heads split into 2 ranks sends twice the bytes
    per GPU. The transfer was priced at the TP4 shard. Two KV heads (already replicated at
    attention TP 2) and MLA's latent (whole on every rank) keep it."""
    from specsched.sim.hardware import Hardware

    hw = Hardware(platform="cuda", tp_size=4, num_kv_heads=kv_heads, mla=mla)
    prof = _profile(link=1e9, latency=0.0).model_copy(update={"hardware": hw})
    wl = {"num_requests": 1, "input_len": {"kind": "fixed", "value": 1000}}
    plain = SimEngine(make_scenario(_pd(), wl), prof, 1).run()
    dp = SimEngine(make_scenario(_pd(enable_dp_attention=True, dp_size=2), wl), prof, 1).run()
    assert plain.summary["mean_kv_transfer_ms"] == pytest.approx(1000 * 1e5 / 1e9 * 1e3)
    assert dp.summary["mean_kv_transfer_ms"] == pytest.approx(ratio * plain.summary["mean_kv_transfer_ms"])


def test_colocated_prefill_stalls_decode_but_pd_does_not():
    # long prompts arriving while others decode: colocated, a running request's decode waits
    # for other requests' chunks (speculative decoding runs no mixed chunk); disaggregated,
    # its decode server never stops for a prefill, so TPOT is the verify cycle's alone
    wl = {"kind": "closed_loop", "concurrency": 4, "num_requests": 16,
          "input_len": {"kind": "uniform", "value": 8000, "range_ratio": 0.5}, "output_len": {"kind": "fixed", "value": 100}}
    base = {"max_prefill_tokens": 2048, "chunked_prefill_size": 1000}
    co = SimEngine(make_scenario(base, wl), _profile(), 1).run()
    pd_ = SimEngine(make_scenario(_pd(**base), wl), _profile(), 1).run()
    assert pd_.summary["mean_tpot_ms"] < 0.8 * co.summary["mean_tpot_ms"]
    assert (co.steps["num_extend_tokens"] > 0).any() and (pd_.steps["num_extend_tokens"] == 0).all()


def _decode_sched(**server) -> Scheduler:
    srv = ServerArgs.model_validate({"max_running_requests": 8, "max_total_num_tokens": 10_000, "chunked_prefill_size": 2048,
                                     "disaggregation_mode": "decode", "disable_radix_cache": True,
                                     "num_reserved_decode_tokens": 512, **server})
    return Scheduler(srv, make_policy(srv))


def test_prealloc_reserves_prompt_within_the_sglang_budget():
    # decode.py pop_preallocated: need max(prompt + 512, prompt + min(max_new, 4096) - retractable)
    # within available - max(512 x active, ...); FIFO, the first that does not fit stops the rest
    s = _decode_sched()
    started: list[int] = []
    s.handoff = lambda r: started.append(r.rid)
    for rid, inp in enumerate([3000, 6000, 100]):
        s.add_request(Req(rid, inp, 2000))
    s.schedule()
    # 3000 + 2000 - 0 = 5000 <= 10000 - 512 (one active) -> in; then 6000 + 2000 > free: stops
    assert started == [0]
    assert s.kv.used == 3000 and [r.rid for r in s.transfer_queue] == [0]
    assert [r.rid for r in s.prealloc_queue] == [1, 2]     # FIFO: 100 waits behind 6000
    # the transfer arrives: the prebuilt pass streams the first token and decodes it, no extend
    s.transfer_queue[0].kv_transferred = True
    plan = s.schedule()
    first = s.take_pass_deliveries()
    assert first.rid_list == [0] and first.n_list == [1] and plan.num_extend == 0 and plan.rids == (0,)


def test_prefill_server_holds_kv_until_sent_and_never_decodes():
    srv = ServerArgs.model_validate({"max_running_requests": 8, "max_total_num_tokens": 5_000, "chunked_prefill_size": 2048,
                                     "disaggregation_mode": "prefill"})
    s = Scheduler(srv, make_policy(srv))
    s.add_request(Req(0, 3000, 500))
    s.add_request(Req(1, 3000, 500))
    assert s.reqs[0].max_new_tokens == 1        # PrefillBootstrapQueue._process_req
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.config import AcceptanceConfig
    from specsched.sim.device_tokens import DeviceTokens
    dev = DeviceTokens(AcceptanceModel(AcceptanceConfig(), 1, 1))
    plans = []
    while True:
        plan = s.schedule()
        if plan is None:
            break
        plans.append(plan)
        s.process_result(plan, dev.step(plan))
    assert all(p.num_extend == p.batch_size for p in plans)      # INV-PD-GATE: no decode
    assert s.reqs[0].finished and s.inflight == [s.reqs[0]]
    assert not s.has_work and s.kv.used >= 3000                  # request 1 waits for the KV
    s.reqs[0].kv_transferred = True
    plan = s.schedule()
    assert plan is not None and plan.rids[0] == 1 and not s.inflight


@pytest.mark.parametrize(("case", "replace", "key"), [
    ("role-unknown-key", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {prefill: {server: {chunked_prefil_size: 8}}}"},
     "server.disaggregation.prefill.server.chunked_prefil_size"),
    ("role-bad-value", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {decode: {server: {max_total_num_tokens: -1}}}"},
     "server.disaggregation.decode.server.max_total_num_tokens"),
    ("role-sets-mode", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {decode: {server: {disaggregation_mode: prefill}}}"},
     "server.disaggregation.decode.server.disaggregation_mode"),
    ("instances-zero", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {decode: {instances: 0}}"},
     "server.disaggregation.decode.instances"),
    ("router", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {router_policy: cache_aware}"},
     "server.disaggregation.router_policy"),
    ("mode-by-hand", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation_mode: decode\n  disaggregation: {}"},
     "server.disaggregation_mode"),
    # SWA is refused with PD at scenario level (server.sliding_window_size); a role's own
    # server must not bypass it
    ("role-swa-decode", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {decode: {server: "
                                                        "{sliding_window_size: 128, max_total_num_tokens: 4000000}}}"},
     "server.disaggregation.decode.server.sliding_window_size = 128: not modelled"),
    ("role-swa-prefill", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {prefill: {server: "
                                                         "{sliding_window_size: 128}}}"},
     "server.disaggregation.prefill.server.sliding_window_size = 128: not modelled"),
    ("profile-without-kv-transfer", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  disaggregation: {}"},
     "kv_transfer"),
])
def test_bad_disaggregation_input(tmp_path, capsys, case, replace, key):
    path = small_scenario(tmp_path, **replace)
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", key)


def test_profile_kv_transfer_refuses_bad_values():
    with pytest.raises(ValueError):
        KVTransferCost(bytes_per_token=0, link_bytes_per_s=1e9)
    with pytest.raises(ConfigError, match="kv_transfer"):
        SimEngine(make_scenario(_pd()), tiny_profile(), 1)


@pytest.mark.parametrize("decode", [1, 3])
@pytest.mark.parametrize("spec", [True, False])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefill=st.integers(1, 2),
       records=st.sampled_from(["full", "compact"]), seed=st.integers(0, 1000))
def test_inv_pd_busy_per_stream(decode, prefill, spec, records, seed):
    """INV-PD-BUSY: the summary's busy fractions are per GPU stream (the mean over a role's
    servers), so each lies in [0, 1] however many servers share the deployment's records; a
    prefill server that ran prefills was busy; with speculative decoding each decode server's
    steady verify window gives a finite verify cycles/s (docs/disaggregation.md)."""
    srv = _pd(prefill, decode)
    if not spec:
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    wl = {"kind": "closed_loop", "concurrency": 2 * decode, "num_requests": 4 * decode,
          "input_len": {"kind": "fixed", "value": 300}, "output_len": {"kind": "fixed", "value": 24}}
    sc = make_scenario(srv, wl, {"mean_accept_length": 2.0 if spec else 1.0}, seed=seed)
    s = SimEngine(sc, _profile(), seed, records=records).run().summary
    assert s["completed"] == 4 * decode
    assert 0 < s["prefill_busy_fraction"] <= 1
    assert 0 < s["gpu_busy_fraction"] <= 1
    if spec:
        assert s["accept_length"] > 1
        assert 0 < s["verify_cycles_per_s"] < float("inf")
        assert s["decode_throughput"] > 0
    else:
        assert s["verify_cycles_per_s"] != s["verify_cycles_per_s"]   # NaN: no verify ran


def test_pd_busy_fraction_is_the_mean_over_decode_servers():
    """Three decode servers: the decode busy fraction is the mean of their streams' busy
    fractions over the deployment's window, never their sum (the reported bug: 2.887)."""
    wl = {"kind": "closed_loop", "concurrency": 6, "num_requests": 12,
          "input_len": {"kind": "fixed", "value": 300}, "output_len": {"kind": "fixed", "value": 40}}
    eng = SimEngine(make_scenario(_pd(1, 3), wl), _profile(), 1)
    res = eng.run()
    streams = [d.rec.stream for d in eng.decode]
    t0, t1 = deployment_window(streams + [p.rec.stream for p in eng.prefill],
                               res.requests["start_s"].min(), res.requests["finish_s"].max())
    busy = [st.busy_s / (t1 - t0) for st in streams]
    assert all(0 < b <= 1 for b in busy) and sum(busy) > 1   # the old summed figure exceeded 1
    assert res.summary["gpu_busy_fraction"] == pytest.approx(sum(busy) / 3)


def test_inv_pd_progress_a_resumed_request_restarts_at_its_committed_output():
    """INV-PD-PROGRESS: a decode server retracts a request while a decode of it is in flight
    (overlap); that forward's token is dropped (0.5.23 managers/scheduler_components/
    batch_result_processor.py ``process_batch_result_decode`` skips a retracted request)
    and the request resumes from its KV backup with the output it had.
    The device's count restarts there: it had counted the dropped token, so the request's
    last tokens were never committed and it decoded forever (the run hung)."""
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.acceptance_config import AcceptanceConfig
    from specsched.sim.device_tokens import DeviceTokens

    s = _decode_sched(num_reserved_decode_tokens=0, max_total_num_tokens=2_000)
    dev = DeviceTokens(AcceptanceModel(AcceptanceConfig(mean_accept_length=1.0), 1, seed=1))
    s.add_request(Req(0, 100, 5))
    s.schedule()
    s.transfer_queue[0].kv_transferred = True
    p1 = s.schedule()                      # the prebuilt first token, then a decode of request 0
    r = s.reqs[0]
    assert p1.rids == (0,) and r.output_len == 1
    out1 = dev.step(p1)                    # in flight: the device commits the second token
    s.running.remove(r)                    # retracted by the next pass, its decode still in flight
    s._retract_req(r)
    s._requeue([r])
    s.process_result(p1, out1)             # the in-flight token is dropped
    assert r.output_len == 1
    p2 = s.schedule()                      # resumed from the backup, decoded again
    assert p2.rids == (0,) and p2.resync_rids == (0,)
    s.process_result(p2, dev.step(p2))
    assert r.output_len == 2 and dev.committed[0] == 2
    while not r.finished:                  # and it finishes with its output
        p = s.schedule()
        assert p is not None and not p.resync_rids
        s.process_result(p, dev.step(p))
    assert r.output_len == 5


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reserve=st.sampled_from([0, 32, 512]), kv=st.sampled_from([3_000, 6_000]), spec=st.booleans(),
       seed=st.integers(0, 1000), kind=st.sampled_from(["burst", "poisson"]))
@example(reserve=0, kv=3_000, spec=True, seed=4, kind="poisson")
def test_inv_pd_progress_decode_servers_that_retract_finish_every_request(reserve, kv, spec, seed, kind):
    """INV-PD-PROGRESS with a small num_reserved_decode_tokens: the decode server
    preallocates more than its pool holds once the outputs grow, so it retracts and resumes
    requests (with the in-flight token dropped); every request still finishes once with its
    output (such runs hung, or ended Stalled with requests lost)."""
    srv = _pd(1, 1, decode_server={"max_total_num_tokens": kv, "num_reserved_decode_tokens": reserve})
    if not spec:
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    wl = {"kind": kind, "num_requests": 12, "input_len": {"kind": "uniform", "value": 600, "range_ratio": 0.5},
          "output_len": {"kind": "uniform", "value": 300, "range_ratio": 0.5}}
    if kind == "poisson":
        wl["request_rate"] = 200.0
    eng = SimEngine(make_scenario(srv, wl, {"mean_accept_length": 2.0} if spec else {"mean_accept_length": 1.0},
                                  seed=seed), _profile(), seed)
    with _hang_fails():
        res = eng.run()
    req = res.requests
    assert res.summary["completed"] == 12
    assert (req.sort_values("rid")["output_len"].to_numpy() == [q.output_len for q in eng.specs]).all()
    for d in eng.decode:
        for r in _ranks(d.sched):
            assert r.kv.used == 0 and not r.retracted_queue


def _pd_scenario(tmp_path, top: dict, prefill: dict, decode: dict, acceptance: dict | None = None):
    import yaml
    from specsched.sim.config import load_scenario

    raw = {"name": "pd", "profile": "h100-llama-3.1-8b-eagle3-analytic",
           "server": {**top, "disaggregation": {"prefill": {"instances": 1, "server": prefill},
                                                "decode": {"instances": 1, "server": decode}}},
           "acceptance": acceptance or {"mean_accept_length": 1.9},
           "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 300},
                        "output_len": {"kind": "fixed", "value": 20}}}
    p = tmp_path / "pd.yaml"
    p.write_text(yaml.safe_dump(raw))
    return load_scenario(p, "base")


@pytest.mark.parametrize("algo,window", [("eagle", 8), ("dspark", 8), ("dflash", 16)])
def test_a_role_that_turns_speculation_on_gets_sglangs_automatic_choice(tmp_path, algo, window):
    """Each role is its own SGLang server, whose speculative hook picks the drafter's
    settings when none is given (arg_groups/speculative_hook.py
    _auto_choose_speculative_params; _handle_dspark/_handle_dflash's block). A decode role
    that turned on speculation over a plain server was refused with
    'speculative_num_draft_tokens = 1: must be >= 2 ... or leave all three out for SGLang's
    automatic choice', though all three were left out."""
    sc = _pd_scenario(tmp_path, {}, {}, {"speculative_algorithm": algo})
    dec = sc.server.role_server("decode")
    assert dec.speculative_algorithm.value == algo
    assert dec.speculative_num_draft_tokens == window   # Llama: a 5-step topk-4 8-token tree
    assert not sc.server.role_server("prefill").speculative_algorithm.enabled
    assert not sc.server.speculative_algorithm.enabled


def test_a_role_that_turns_speculation_off_drops_the_automatic_choice(tmp_path):
    """The server's EAGLE settings SGLang chose (not the user) are not carried to a role that
    runs without speculation: it was refused with 'speculative_num_steps = 5: only a chain
    drafter ... has serial draft steps', a value the user never wrote."""
    sc = _pd_scenario(tmp_path, {"speculative_algorithm": "eagle"}, {"speculative_algorithm": "none"}, {})
    pre, dec = sc.server.role_server("prefill"), sc.server.role_server("decode")
    assert not pre.speculative_algorithm.enabled and pre.speculative_num_steps is None
    assert dec.speculative_algorithm.value == "eagle" and dec.speculative_num_draft_tokens == 8


def test_a_decode_role_that_drafts_over_a_plain_server_draws_its_accept_lengths(tmp_path):
    """The deployment drew accept lengths at the server section's verify window, 1 when
    only the decode role speculates: every verify committed one token (accept length
    1.00 against the scenario's 1.9). The decode servers verify, so their window is the one."""
    from specsched.sim.engine import run_scenario

    dsp = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}
    role = run_scenario(_pd_scenario(tmp_path, {}, {}, dsp), seed=1).summary
    both = run_scenario(_pd_scenario(tmp_path, dsp, {}, {}), seed=1).summary
    assert role["accept_length"] > 1.4
    assert role["accept_length"] == both["accept_length"]


def test_a_role_whose_speculation_differs_gets_its_own_running_limit(tmp_path):
    """SGLang resets max_running_requests to 48 on a server that speculates and leaves it
    unset (arg_groups/speculative_hook.py); a plain server's limit comes from its pool. A
    decode role that drafts over a plain section kept the section's pool limit (2048), and a
    plain role under a drafting section the section's 48."""
    on = _pd_scenario(tmp_path, {}, {}, {"speculative_algorithm": "dspark"})
    assert on.server.role_server("decode").max_running_requests == 48
    assert on.server.role_server("prefill").max_running_requests == on.server.max_running_requests > 48
    off = _pd_scenario(tmp_path, {"speculative_algorithm": "eagle"}, {}, {"speculative_algorithm": "none"})
    assert off.server.max_running_requests == 48 == off.server.role_server("prefill").max_running_requests
    assert off.server.role_server("decode").max_running_requests > 48
    given = _pd_scenario(tmp_path, {"max_running_requests": 7}, {}, {"speculative_algorithm": "dspark"})
    assert given.server.role_server("decode").max_running_requests == 7


def test_a_role_with_a_block_drafter_gets_its_own_admission_delay(tmp_path):
    """SGLang's scheduler builds the min-free-slots delayer from its own server's algorithm
    (managers/scheduler.py: resolve_min_free_slots(..., is_dflash_family=...)): a decode role
    running DSpark over a plain section had no delay, a plain role under a DSpark section had it."""
    on = _pd_scenario(tmp_path, {}, {}, {"speculative_algorithm": "dspark"})
    assert on.server.role_server("decode").admission_delay == "min_free_slots"
    assert on.server.role_server("prefill").admission_delay == "none"
    off = _pd_scenario(tmp_path, {"speculative_algorithm": "dspark"}, {"speculative_algorithm": "none"}, {})
    assert off.server.role_server("prefill").admission_delay == "none"
    assert off.server.role_server("decode").admission_delay == "min_free_slots"


def test_decode_prealloc_queue_takes_the_highest_priority_first():
    # decode.py DecodePreallocQueue.pop_preallocated: with enable_priority_scheduling the
    # queue is sorted by priority (stable; no priority: last) before the FIFO preallocation
    s = _decode_sched(enable_priority_scheduling=True)
    started: list[int] = []
    s.handoff = lambda r: started.append(r.rid)
    for rid, (inp, prio) in enumerate([(6000, 0), (3000, 5), (100, None)]):
        s.add_request(Req(rid, inp, 2000, priority=prio))
    s.schedule()
    # 3000 + 2000 <= 10000 - 512 -> in; then 6000 + 2000 > 7000 - 2 x 512: stops the rest
    assert started == [1]
    assert [r.rid for r in s.prealloc_queue] == [0, 2]


def test_decode_prealloc_queue_is_fifo_without_priority_scheduling():
    s = _decode_sched()
    started: list[int] = []
    s.handoff = lambda r: started.append(r.rid)
    for rid, (inp, prio) in enumerate([(6000, 0), (3000, 5)]):
        s.add_request(Req(rid, inp, 2000, priority=prio))
    s.schedule()
    assert started == [0] and [r.rid for r in s.prealloc_queue] == [1]


@pytest.mark.parametrize("priority", [True, False])
def test_decode_prebuilt_batch_takes_waiting_requests_in_priority_order(priority):
    # decode.py _get_new_prebuilt_batch: calc_priority sorts the waiting queue (priority,
    # then entry) before the free running slots take its head, with priority scheduling only
    s = _decode_sched(max_running_requests=1, enable_priority_scheduling=priority)
    for rid, prio in [(0, 1), (1, 9)]:   # preallocated one pass apart: transfer queue [0, 1]
        s.add_request(Req(rid, 100, 50, priority=prio))
        s.schedule()
    assert [r.rid for r in s.transfer_queue] == [0, 1]
    for r in s.transfer_queue:
        r.kv_transferred = True
    s.schedule()
    first = s.take_pass_deliveries()
    assert first.rid_list == ([1] if priority else [0])
    assert [r.rid for r in s.waiting] == ([0] if priority else [1])


def test_pd_fast_forward_counts_are_the_decode_servers_sums():
    """The deployment's ``fast_forward_runs`` / ``fast_forward_iterations`` are the sums of its
    servers' collapsed decode stretches (each server counts its own). Before, the deployment
    reported its own counters, which no stretch ever advances: always 0."""
    wl = {"kind": "poisson", "request_rate": 1000, "num_requests": 8,
          "input_len": {"kind": "fixed", "value": 300}, "output_len": {"kind": "fixed", "value": 200}}
    eng = SimEngine(make_scenario(_pd(1, 2), wl), _profile(), 1)
    res = eng.run()
    servers = eng.prefill + eng.decode
    assert sum(s.ff_iterations for s in servers) > 0
    assert res.extra["fast_forward_runs"] == sum(s.ff_runs for s in servers)
    assert res.extra["fast_forward_iterations"] == sum(s.ff_iterations for s in servers)


def test_the_acceptance_is_checked_at_the_decode_role_that_verifies(tmp_path):
    """The decode servers run the verifies, so the acceptance is read at their window and
    draft tree. A mean of 4.5 measured on a decode role of 5 steps (topk 4, 16 draft tokens)
    under a 3-step chain section was refused as 'exceeds the verify window,
    speculative_num_draft_tokens = 4' (the section's); under a 5-step section, a decode role
    of 3 draft tokens passed the check and the run died in a ValueError traceback
    ('mean_accept_length 4.5 outside [1, 3]')."""
    import numpy as np
    from specsched.sim.acceptance import AcceptanceModel
    from specsched.sim.config import draft_tree

    chain = {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 4}
    tree = {"speculative_num_steps": 5, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 16}
    acc = {"mean_accept_length": 4.5, "sibling_rate": 0.3}
    sc = _pd_scenario(tmp_path, chain, {}, tree, acc)
    dec = sc.server.role_server("decode")
    model = AcceptanceModel(sc.acceptance, dec.accept_window, 1, draft_tree(dec))
    assert model.mean == pytest.approx(4.5, abs=1e-6)
    assert np.mean([model.draw(r, c) for r in range(200) for c in range(20)]) == pytest.approx(4.5, abs=0.1)
    with pytest.raises(ConfigError, match="out of reach on the draft tree it was measured on .topk 4, 3 draft"):
        _pd_scenario(tmp_path, {**chain, **tree}, {}, {"speculative_num_draft_tokens": 3}, acc)
    long = {**chain, "speculative_num_steps": 5, "speculative_num_draft_tokens": 6}
    with pytest.raises(ConfigError, match="server.disaggregation.decode.server.speculative_num_draft_tokens = 3"):
        _pd_scenario(tmp_path, long, {}, {"speculative_num_steps": 2, "speculative_num_draft_tokens": 3},
                     {"mean_accept_length": 4.5})
    with pytest.raises(ConfigError, match="acceptance.mean_accept_length"):
        _pd_scenario(tmp_path, {}, {}, {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 3},
                     {"mean_accept_length": 3.5})


def test_a_decode_role_on_another_draft_tree_says_whose_accept_length_it_draws(tmp_path):
    """A decode role verifying a topk-4, 16-token tree under a chain section, with the
    acceptance stated on the chain (acceptance.tree [1, 6]), drew the tree model's accept
    length (3.75 against the chain's 3.21) and said nothing: the run's notes read the
    section's draft, not the decode servers'."""
    from specsched.sim.grid_range import AcceptanceTreeShape

    chain = {"speculative_algorithm": "eagle", "speculative_num_steps": 5, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 6}
    acc = {"per_position_rates": [0.75] * 5, "sibling_rate": 0.3, "tree": [1, 6]}
    sc = _pd_scenario(tmp_path, chain, {}, {"speculative_eagle_topk": 4, "speculative_num_draft_tokens": 16}, acc)
    notes = [n for n in SimEngine(sc).range_notes() if isinstance(n, AcceptanceTreeShape)]
    assert [(n.measured, n.run) for n in notes] == [((1, 6), (4, 16))] and notes[0].run_mean > 3.7
    same = _pd_scenario(tmp_path, chain, {}, {}, acc)
    assert not [n for n in SimEngine(same).range_notes() if isinstance(n, AcceptanceTreeShape)]


@pytest.mark.parametrize("spec", [False, True])
def test_decode_server_keeps_a_finishing_request_in_the_next_decode(spec):
    """SGLang 0.5.23 leaves a request whose in-flight step commits its last token out of the
    next decode only in the co-located overlap loop: ``Scheduler.event_loop_overlap`` sets
    ``enable_skip_finishing_decode`` and ``_dispatch_event_loop_once`` (managers/scheduler.py)
    clears it before any other loop, so ``_reqs_finishing_inflight`` returns nothing under
    ``event_loop_overlap_disagg_decode``. A decode server's finishing request rides one more
    decode (committing nothing); a co-located server's does not."""
    wl = {"kind": "closed_loop", "concurrency": 1, "num_requests": 3,
          "input_len": {"kind": "fixed", "value": 200}, "output_len": {"kind": "fixed", "value": 8}}
    srv = {} if spec else {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1}
    acc = {"mean_accept_length": 1.0, "request_spread": 0.0}   # one token per verify: 7 cycles a request
    for fast_forward in (True, False):
        pd_ = SimEngine(make_scenario(_pd(**srv), wl, acc), _profile(), 1, fast_forward=fast_forward).run()
        co = SimEngine(make_scenario(srv, wl, acc), _profile(), 1, fast_forward=fast_forward).run()
        co_steps = co.steps[co.steps["num_extend_tokens"] == 0]
        # 7 output tokens after the first: 7 steps each co-located, 8 on a decode server
        assert len(co_steps) == 3 * 7
        assert len(pd_.steps) == 3 * 8
        assert (pd_.steps["accepted_tokens"] == 0).sum() == 3
        assert int(pd_.summary["total_output_tokens"]) == 3 * 8


def _dp_decode_engine(tmp_path, top: dict, decode: dict):
    """A 1P1D deployment on an analytic Llama-3.1-8B TP2 H100 profile (a chain drafter),
    its decode server running DP attention over 2 ranks; the loaded scenario's engine."""
    import yaml
    from specsched.sim.analytic.cli import write_analytic_profile
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile
    from specsched.sim.config import load_scenario

    write_analytic_profile(build_profile(load_model("llama-3.1-8b"), load_gpu("H100"), 2, drafter="chain"), tmp_path / "p.yaml")
    raw = {"name": "pd", "profile": str(tmp_path / "p.yaml"),
           "server": {"speculative_algorithm": "eagle", **top,
                      "disaggregation": {"prefill": {"instances": 1, "server": {}},
                                         "decode": {"instances": 1, "server": {"enable_dp_attention": True, "dp_size": 2,
                                                                               **decode}}}},
           "acceptance": {"mean_accept_length": 1.9},
           "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 300},
                        "output_len": {"kind": "fixed", "value": 20}}}
    (tmp_path / "pd.yaml").write_text(yaml.safe_dump(raw))
    sc = load_scenario(tmp_path / "pd.yaml", "base")
    eng = SimEngine(sc, None, 1)
    return sc, [r for s in eng.decode for r in getattr(s.sched, "ranks", [s.sched])]


@pytest.mark.parametrize("top,decode,extra", [
    ({}, {}, 0),                                   # 48 (the speculative reset) comes after the hook: none
    ({"max_running_requests": 48}, {}, 48),        # stated: 24 a rank, <= 32: twice that
    ({}, {"max_running_requests": 128}, 0),        # stated on the role: 64 a rank, > 32: none
    ({}, {"max_running_requests": 16, "disaggregation_decode_extra_slots": 5}, 5),   # stated: as given
])
def test_decode_extra_slots_follow_the_stated_running_limit(tmp_path, top, decode, extra):
    """SGLang 0.5.23 sizes a decode server's extra req_to_token slots (requests in transfer,
    beside the running ones) in ``handle_pd_disaggregation`` (arg_groups/pd_disaggregation_hook.py),
    which the resolution pipeline (arg_groups/pipeline.py) runs before the speculative hook
    resets max_running_requests to 48 and before the pool's own limit is known: only a
    max_running_requests the launch states counts, 2 x its per-DP-rank share when that is at
    most 32, else none; ``--disaggregation-decode-extra-slots`` overrides it. A speculating
    decode server with DP attention 2 and no stated limit got 48 extra slots a rank (2 x 24),
    and preallocated (so started the prefills of) three times the requests SGLang does."""
    sc, ranks = _dp_decode_engine(tmp_path, top, decode)
    assert len(ranks) == 2
    assert {r._extra_slots for r in ranks} == {extra}
    # filled (0) only where the limit is left to SGLang; a stated one is read per rank
    filled = sc.server.role_server("decode").disaggregation_decode_extra_slots
    assert filled == (0 if not top and "max_running_requests" not in decode else decode.get("disaggregation_decode_extra_slots"))
