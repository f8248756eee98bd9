"""A trace row or a multi-turn conversation's turn the server can never run is refused before
the first simulated event: one line naming the trace file and line (or the turn), the column,
the value and the pool; exit 2; nothing written. The up-front check refuses exactly the rows
the scheduler would never schedule (sim/pool_fit.py ``never_fit_rows``). A co-located server's
trace row whose prompt SGLang rejects (past ``max_req_input_len`` or the context length) is
not refused: it runs as SGLang's abort and counts as failed (tests/test_trace_aborts.py), as does
a disaggregated deployment's row both its servers reject (tests/test_pd_trace_aborts.py); a row
only one of them rejects is refused."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine, Stalled
from specsched.sim.errors import ConfigError
from specsched.sim.pool_fit import check_request_pool, never_fit_rows
from specsched.sim.scheduler import UnschedulableRequest
from specsched.sim.served import trace_aborts, trace_output_cut
from specsched.sim.server_args import ServerArgs

import specsched.cli as cli
from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SERVER = {"max_running_requests": 16, "max_total_num_tokens": 4096, "chunked_prefill_size": 1024,
          "max_prefill_tokens": 2048, "cuda_graph_max_bs": 16, "speculative_algorithm": "none",
          "admission_delay": "none"}


@pytest.fixture
def no_simulation(monkeypatch):
    """``specsched run`` must refuse before it simulates anything."""
    def refuse(*a, **k):
        raise AssertionError("simulated a run the server can never finish")
    monkeypatch.setattr(cli, "simulate", refuse)


PD = {"disaggregation": {"prefill": {"instances": 1, "server": {}}, "decode": {"instances": 1, "server": {}}}}
"""A 1P1D deployment of SERVER's servers (each role's pool 4096 tokens)."""


def _run(tmp_path, capsys, workload: dict, server: dict | None = None) -> list[str]:
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1,
                                 "server": {**SERVER, **(server or {})}, "workload": workload}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert not (tmp_path / "out").exists()
    return capsys.readouterr().err.strip().splitlines()


def test_a_disaggregated_trace_row_only_its_prefill_server_rejects_is_named_up_front(tmp_path, capsys, no_simulation):
    # line 4 is blank (no request): the row that cannot run is on line 5, request 3 (a long
    # output alone is cut to fit, as SGLang cuts it: tests/test_output_cut.py). A row both
    # servers reject fails as SGLang fails it (tests/test_pd_trace_aborts.py); here the decode
    # servers' pool is larger, so only the prefill server rejects the prompt and the decode
    # server would wait on it until a disaggregation timeout (not simulated): refused
    (tmp_path / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2024-05-01 10:00:00.0,100,20\n2024-05-01 10:00:00.5,3000,2000\n\n"
                                    "2024-05-01 10:00:01.0,4095,2000\n2024-05-01 10:00:01.5,4094,2000\n"
                                    "2024-05-01 10:00:02.0,100,20\n")
    pd_ = {"disaggregation": {"prefill": {"instances": 1, "server": {}},
                              "decode": {"instances": 1, "server": {"max_total_num_tokens": 20000}}}}
    err = _run(tmp_path, capsys, {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}, pd_)
    assert len(err) == 1, err
    assert "t.csv:5: ContextTokens = 4095: request 3 (ContextTokens 4095, GeneratedTokens 2000; 1 more rows" in err[0]
    assert "the prefill server rejects it ('Input length (4095 tokens) exceeds the maximum allowed length (4090" in err[0]
    assert "but the decode server does not" in err[0]


def test_a_disaggregated_mooncake_prompt_only_its_decode_server_rejects_is_named_up_front(tmp_path, capsys,
                                                                                           no_simulation):
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
                                      '{"timestamp": 9, "input_length": 4095, "output_length": 1, "hash_ids": [2]}\n')
    pd_ = {"disaggregation": {"prefill": {"instances": 1, "server": {"max_total_num_tokens": 20000}},
                              "decode": {"instances": 1, "server": {}}}}
    err = _run(tmp_path, capsys, {"kind": "trace", "trace": {"path": "t.jsonl", "layout": "mooncake"}}, pd_)
    assert len(err) == 1 and "t.jsonl:2: input_length = 4095: request 2 " in err[0], err
    assert "the decode server rejects it" in err[0] and "but the prefill server does not" in err[0]


MULTI_TURN = {"kind": "multi_turn", "concurrency": 2, "output_len": {"kind": "fixed", "value": 200},
              "multi_turn": {"num_conversations": 2, "num_turns": 5, "system_prompt_len": 200,
                             "first_prompt_len": {"kind": "fixed", "value": 1000},
                             "user_len": {"kind": "fixed", "value": 500}, "think_time_s": 1.0}}


LONG_TURNS = {**MULTI_TURN, "multi_turn": {**MULTI_TURN["multi_turn"], "user_len": {"kind": "fixed", "value": 600}}}
"""Turn 5 resends 200 + 1000 + 4 x (200 + 600) = 4400 tokens, a prompt SGLang aborts on a
pool of 4096 (a prompt of 4000 with 200 output is cut instead: tests/test_output_cut.py)."""


def test_a_late_turn_past_the_pool_is_named_up_front(tmp_path, capsys, no_simulation):
    err = _run(tmp_path, capsys, LONG_TURNS)
    assert len(err) == 1, err
    assert "s.yaml: workload.multi_turn = 4400: turn 5 of a conversation (request 5, seed 1; 1 more turns" in err[0]
    assert "max_total_num_tokens is 4096" in err[0]


def test_a_late_turn_is_refused_for_each_runs_seed_before_its_first_event():
    sc = make_scenario(server=SERVER, workload={**LONG_TURNS, "num_requests": None, "input_len": None})
    with pytest.raises(ConfigError) as e:
        SimEngine(sc, tiny_profile(), seed=7)
    assert e.value.key == "workload.multi_turn" and "seed 7" in e.value.allowed


def _pool(cap: int, page: int, spec: bool, swa: float | None = None, chunk: int = 128) -> ServerArgs:
    kw = {"max_total_num_tokens": cap, "page_size": page, "chunked_prefill_size": chunk, "max_prefill_tokens": 256,
          "speculative_algorithm": "dspark" if spec else "none", "speculative_num_draft_tokens": 4 if spec else 1}
    if swa is not None:
        kw.update(sliding_window_size=32, swa_full_tokens_ratio=swa)
    return ServerArgs(**kw)


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(64, 3000), page=st.sampled_from([1, 16, 64]), spec=st.booleans(),
       swa=st.one_of(st.none(), st.floats(0.1, 1.0)), chunk=st.sampled_from([-1, 64, 512]),
       eos=st.booleans(), radix=st.booleans(),
       rows=st.lists(st.tuples(st.integers(1, 6000), st.integers(1, 9000)), min_size=1, max_size=6))
def test_never_fit_rows_is_exactly_the_pool_check(cap, page, spec, swa, chunk, eos, radix, rows):
    """Invariant: the vectorized pass marks exactly the rows the per-request check refuses."""
    try:
        srv = _pool(cap, page, spec, swa, chunk).model_copy(update={"disable_radix_cache": not radix})
    except Exception:   # a pool the server arguments refuse (an SWA pool below a page, say)
        return
    ins, outs = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    marked = never_fit_rows(srv, ins, outs, eos)
    for k, (i, o) in enumerate(rows):
        try:
            check_request_pool("f", srv, "server", i, o, eos)
            refused = False
        except ConfigError as e:
            refused = e.key != "server.max_total_num_tokens"   # the two-request top-up check is pool-wide
        assert marked[k] == refused, (i, o)


@settings(max_examples=40, deadline=None)
@given(cap=st.integers(200, 700), page=st.sampled_from([1, 16]), spec=st.booleans(), radix=st.booleans(),
       rows=st.lists(st.tuples(st.integers(1, 500), st.integers(1, 300)), min_size=1, max_size=3))
def test_up_front_refusal_is_exactly_what_the_scheduler_never_schedules(tmp_path_factory, cap, page, spec, radix, rows):
    """Invariant: a random small trace's rows marked by the up-front check (on the outputs cut
    as SGLang cuts them, ``trace_output_cut``; the rows SGLang aborts, ``trace_aborts``, left
    out) are the rows the simulated server refuses (UnschedulableRequest) or never admits
    (the ignore_eos admission with the prefix cache off: a cut output leaves it one token
    short, a stall); an aborted row runs and fails; every other row runs to the last token of
    its cut output (no false refusal)."""
    srv = {"max_total_num_tokens": cap, "page_size": page, "chunked_prefill_size": 128, "max_prefill_tokens": 256,
           "disable_radix_cache": not radix}
    if not spec:
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    d = tmp_path_factory.mktemp("t")
    sc0 = make_scenario(server=srv)
    ins, outs = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    cut = trace_output_cut(sc0, ins, outs, None)
    aborted = [a is not None for a in trace_aborts(sc0, ins, outs, None)]
    marked = never_fit_rows(sc0.server, ins, cut) & ~np.array(aborted)
    for k, (i, o) in enumerate(rows):
        p = d / f"r{k}.csv"
        p.write_text(f"timestamp,input_length,output_length\n0,{i},{o}\n")
        sc = make_scenario(server=srv, workload={"kind": "trace", "trace": {"path": str(p)}, "num_requests": None,
                                                 "input_len": None, "output_len": None})
        try:
            res = SimEngine(sc, tiny_profile()).run()
        except (UnschedulableRequest, Stalled):   # Stalled: the ignore_eos admission never admits it
            assert marked[k], (i, o)
            continue
        assert not marked[k], (i, o)
        if aborted[k]:
            assert res.summary["completed"] == 0 and res.summary["requests_aborted"] == 1
        else:
            assert res.requests["output_len"].tolist() == [int(cut[k])] and res.summary["completed"] == 1


def test_the_bundled_8b_profile_rejects_a_row_past_the_models_context_length(tmp_path, capsys):
    """profiles/h200-llama8b-roofline.yaml states Llama-3.1-8B's context length (131072,
    hardware.context_len), so a trace row past it is rejected as SGLang's tokenizer rejects it
    (tokenizer_manager.py ``_validate_one_request``), before the pool is even asked: it fails
    with SGLang's message (it ran before, extrapolating the cost grid; then it was refused)."""
    (tmp_path / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2024-05-01 10:00:00.0,100,20\n2024-05-01 10:00:00.5,200000,20\n")
    big = {**SERVER, "max_total_num_tokens": 800000}
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1,
                                 "server": big, "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 0
    req = pd.read_parquet(tmp_path / "out" / "requests.parquet")
    assert req["error"].tolist() == ["", "The input (200000 tokens) is longer than the model's context length (131072 tokens)."]
    assert np.isnan(req["ttft_s"].iloc[1]) and not np.isnan(req["ttft_s"].iloc[0])


@pytest.mark.parametrize(("prompt", "aborted"), [(131065, False), (131066, True), (131071, True)])
def test_a_prompt_within_six_tokens_of_the_context_length_is_aborted_as_sglang_aborts_it(
        tmp_path, capsys, prompt, aborted):
    """SGLang 0.5.23 aborts a prompt of max_req_input_len = min(context_len - 1, pool - 1) - 5
    tokens or more (managers/tp_worker.py, managers/utils.py validate_input_length), though
    the tokenizer's own check (< context_len) passes it: with context 131072, 131065 tokens are
    served and 131066 are not (before, everything under 131072 ran; then 131066 was refused)."""
    (tmp_path / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    f"2024-05-01 10:00:00.0,100,2\n2024-05-01 10:00:00.5,{prompt},1\n")
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1,
                                 "server": {**SERVER, "max_total_num_tokens": 800000, "chunked_prefill_size": 8192,
                                            "max_prefill_tokens": 16384},
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    from specsched.sim.config import load_scenario
    from specsched.sim.limits import check_fits
    check_fits(load_scenario(str(y)))   # nothing refused up front
    if aborted:
        res = SimEngine(load_scenario(str(y))).run()
        err = res.requests["error"].tolist()
        assert err[0] == "" and err[1].startswith(f"Input length ({prompt} tokens) exceeds the maximum allowed length "
                                                  "(131066 tokens).")
        assert res.summary["completed"] == 1


def _eagle_swa(ratio: float, radix: bool = True, out: int = 64):
    """EAGLE with speculative_eagle_topk 4 at page_size 256: each request keeps 4096 positions
    reserved past its committed KV (ServerArgs.spec_kv_reserve), in both pools of a hybrid
    sliding-window model."""
    return make_scenario(server={"max_total_num_tokens": 6000, "page_size": 256, "sliding_window_size": 128,
                                 "swa_full_tokens_ratio": ratio, "speculative_algorithm": "eagle",
                                 "speculative_eagle_topk": 4, "speculative_num_steps": 3,
                                 "speculative_num_draft_tokens": 8, "disable_radix_cache": not radix},
                         workload={"num_requests": 3, "output_len": {"kind": "fixed", "value": out}})


@pytest.mark.parametrize("radix", [True, False])
def test_an_swa_pool_too_small_for_one_requests_speculative_top_up_is_refused_before_the_run(radix):
    """An SWA pool of 2816 (6000 x 0.5, page-aligned) cannot hold one request's top-up of
    4096 reserved positions: SGLang aborts it out of memory (retract_decode), and the
    simulator stopped partway before it modelled the abort. The check before the run refuses
    it in one line naming the ratio and the ratio that fits, sized by the scheduler's own
    ledger: at that ratio the run completes, a page below it every request is aborted,
    exactly as the check says."""
    from specsched.sim.limits import check_fits

    sc = _eagle_swa(0.5, radix)
    assert sc.server.spec_kv_reserve == 4096 and sc.server.swa_max_total_num_tokens == 2816
    with pytest.raises(ConfigError, match=r"server.swa_full_tokens_ratio = 0.5: the SWA pool of 2816 .*"
                                          r"speculative_eagle_topk.*at least (0\.\d+)") as e:
        check_fits(sc)
    assert "\n" not in str(e.value)
    ratio = float(re.search(r"ratio to at least (0\.\d+)", str(e.value)).group(1))
    fits = _eagle_swa(ratio, radix)
    check_fits(fits)
    res = SimEngine(fits, tiny_profile()).run()
    assert res.summary["completed"] == 3
    below = _eagle_swa(ratio - 256 / 5888, radix)   # a page smaller
    with pytest.raises(ConfigError):
        check_fits(below)
    # run anyway, a page below it: SGLang aborts each request, alone, out of memory
    # (retract_decode), exactly where the check said
    res = SimEngine(below, tiny_profile()).run()
    assert res.summary["requests_oom_aborted"] == 3 and res.summary["completed"] == 3
    # each stream ends short of its 64 tokens; one ended before its first token reads as
    # bench_serving records it: TTFT 0.0 and the asked length (benchmark/serving.py)
    short = (res.requests["output_len"] < 64) | ((res.requests["ttft_s"] == 0) & (res.requests["output_len"] == 64))
    assert short.all()


def test_the_cli_refuses_an_swa_pool_too_small_for_the_top_up_before_writing(tmp_path, capsys):
    sc = _eagle_swa(0.5)
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(sc.model_dump(mode="json", exclude_none=True)))
    assert main(["run", str(f), "--out", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "server.swa_full_tokens_ratio" in err and "alone cannot" not in err, err
    assert not (tmp_path / "res").exists()


def _parked(ratio: float, sem: str | None = None, algo: str = "none"):
    """A lone 3000-token prompt in chunks of 2048 on a hybrid sliding-window model with the
    radix cache off under the overlap schedule: its first two extend batches free no SWA."""
    srv = {"max_total_num_tokens": 20000, "page_size": 1, "sliding_window_size": 128,
           "swa_full_tokens_ratio": ratio, "speculative_algorithm": algo, "disable_radix_cache": True,
           "enable_overlap_schedule": True}
    if algo == "eagle":
        srv.update(speculative_eagle_topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4)
    if sem:
        srv["sglang_semantics"] = sem
    return make_scenario(server=srv, workload={"num_requests": 1, "input_len": {"kind": "fixed", "value": 3000},
                                               "output_len": {"kind": "fixed", "value": 300}})


@pytest.mark.parametrize("sem,algo", [(None, "none"), ("mi355x-dsv41", "none")])
def test_a_chunked_prompt_parked_for_want_of_swa_is_refused_before_the_run(sem, algo):
    """Without a prefix cache under the overlap schedule a request's first two extend batches
    free no SWA (schedule_batch.py ScheduleBatch.maybe_evict_swa): two chunks fill a
    2100-slot SWA pool, the third never gets a slot (SWAPrefillBudget.available_chunk_tokens)
    and SGLang parks the request for ever. The check before the run let it through and the run
    stopped partway ("its chunked prefill holds 2099 SWA slots"); now it refuses it, naming the
    ratio, and the smallest ratio it names runs to the end."""
    from specsched.sim.limits import check_fits
    from specsched.sim.scheduler_decode import UnschedulableRequest

    sc = _parked(0.105, sem, algo)
    with pytest.raises(UnschedulableRequest, match="chunked prefill holds"):
        SimEngine(sc, tiny_profile()).run()
    with pytest.raises(ConfigError, match=r"server.swa_full_tokens_ratio = 0.105: .*chunk.*at least (0\.\d+)") as e:
        check_fits(sc)
    assert "\n" not in str(e.value)
    ratio = float(re.search(r"ratio to at least (0\.\d+)", str(e.value)).group(1))
    fits = _parked(ratio, sem, algo)
    check_fits(fits)
    assert SimEngine(fits, tiny_profile()).run().summary["completed"] == 1
    with pytest.raises(UnschedulableRequest):
        SimEngine(_parked(round(ratio - 0.0001, 4), sem, algo), tiny_profile()).run()


def test_never_fit_rows_marks_the_rows_a_parked_chunk_would_stop():
    from specsched.sim.pool_fit import lone_chunk_parked

    srv = _parked(0.105).server
    ins, outs = np.array([3000, 2000, 2100, 4100, 1000]), np.array([300, 300, 1, 300, 300])
    marked = never_fit_rows(srv, ins, outs)
    assert marked.tolist() == [lone_chunk_parked(srv, int(i), int(o)) is not None for i, o in zip(ins, outs, strict=True)]
    assert marked[0] and not marked[1] and not marked[4]


def test_an_swa_pool_too_small_for_a_lone_verify_window_is_refused_under_the_window_rule():
    """Under the window rule (the mi355x-dsv41 build reserves each verify pass's window, no
    top-up) a lone 3000-token prompt with the radix cache off holds its whole prompt in the
    SWA pool at its first verify pass, which then needs its window more: on a 3002-slot pool
    the run stopped ("alone cannot get SWA slots for the next step") where the check before
    it said nothing. The check now walks the window rule too; the ratio it names runs."""
    from specsched.sim.limits import check_fits
    from specsched.sim.scheduler_decode import UnschedulableRequest

    sc = _parked(0.1501, "mi355x-dsv41", "eagle")
    assert sc.server.rules.spec_kv_reservation == "window"
    with pytest.raises(UnschedulableRequest, match="alone cannot get SWA slots"):
        SimEngine(sc, tiny_profile()).run()
    with pytest.raises(ConfigError, match=r"server.swa_full_tokens_ratio = 0.1501: .*4-token window.*at least (0\.\d+)") as e:
        check_fits(sc)
    ratio = float(re.search(r"ratio to at least (0\.\d+)", str(e.value)).group(1))
    fits = _parked(ratio, "mi355x-dsv41", "eagle")
    check_fits(fits)
    assert SimEngine(fits, tiny_profile()).run().summary["completed"] == 1


def test_the_lone_swa_walk_lags_a_pass_under_the_overlap_schedule():
    """Under the overlap schedule the next verify pass is built before the last one's result
    is processed, so its SWA check sees the output a pass behind. The walk counted every
    pass's tokens at once and refused a 310-slot SWA pool for a lone 300-token prompt
    (308 held + 4 asked) that the run serves at every acceptance."""
    from specsched.sim.limits import check_fits

    srv = {"max_total_num_tokens": 20000, "page_size": 1, "sliding_window_size": 128, "swa_full_tokens_ratio": 0.0155,
           "speculative_algorithm": "eagle", "speculative_eagle_topk": 1, "speculative_num_steps": 3,
           "speculative_num_draft_tokens": 4, "disable_radix_cache": True, "enable_overlap_schedule": True}
    for acc in (1.0, 4.0):
        sc = make_scenario(server=srv, workload={"num_requests": 1, "input_len": {"kind": "fixed", "value": 300},
                                                 "output_len": {"kind": "fixed", "value": 600}},
                           acceptance={"mean_accept_length": acc, "request_spread": 0.0})
        assert sc.server.swa_max_total_num_tokens == 310
        check_fits(sc)
        assert SimEngine(sc, tiny_profile()).run().summary["completed"] == 1


@pytest.mark.parametrize("lengths", ["10,1\n5000,1\n", "10,1\n200000,1\n"])   # past the pool; past the context
def test_a_histogram_length_past_the_limits_is_named_with_its_file(tmp_path, capsys, no_simulation, lengths):
    """A generated workload's prompt past the pool or the context is refused before the run
    (its lengths are the scenario's choice). From a ``file`` histogram the refusal named
    ``workload.input_len = 5000``, a number the scenario does not hold; it names the
    histogram file and its longest length, with the limit, in one line."""
    (tmp_path / "lens.csv").write_text("length,weight\n" + lengths)
    longest = int(lengths.strip().splitlines()[-1].split(",")[0])
    err = _run(tmp_path, capsys, {"kind": "poisson", "request_rate": 4, "num_requests": 8,
                                  "input_len": {"kind": "file", "path": "lens.csv"},
                                  "output_len": {"kind": "fixed", "value": 20}},
               {"max_total_num_tokens": 4096 if longest < 10000 else 800000})
    assert len(err) == 1, err
    assert err[0].startswith(f"specsched: error: {tmp_path / 's.yaml'}: workload.input_len.path = 'lens.csv': "
                             f"its longest length is {longest} tokens: "), err[0]
    assert ("max_total_num_tokens is 4096" if longest < 10000 else "context length 131072") in err[0]


@pytest.mark.parametrize(("text", "why"), [("length,weight\n100,0\n200,0\n", "weights sum to 0"),
                                           ("len,w\n100,1\n", "CSV needs columns length,weight")])
def test_a_malformed_histogram_is_not_read_as_its_longest_length(tmp_path, capsys, no_simulation, text, why):
    """A histogram whose weights are all 0, or without the length,weight columns, was named
    'its longest length is lens.csv tokens' (or "... is ['len', 'w'] tokens"): the refusal of
    the file itself was rewritten as a refusal of a length. It names the file and what is wrong."""
    (tmp_path / "lens.csv").write_text(text)
    err = _run(tmp_path, capsys, {"kind": "burst", "num_requests": 4, "input_len": {"kind": "file", "path": "lens.csv"},
                                  "output_len": {"kind": "fixed", "value": 20}})
    assert len(err) == 1, err
    assert "longest length" not in err[0] and why in err[0] and "lens.csv" in err[0], err[0]


@settings(max_examples=25, deadline=None)
@given(i=st.integers(16, 200), o=st.integers(8, 200), page=st.sampled_from([1, 16]), below=st.integers(1, 150))
@example(i=64, o=64, page=16, below=66)
def test_the_least_pool_a_refusal_names_is_not_refused_for_the_same_reason(i, o, page, below):
    """Invariant: a "must be at least N" refusal of the pool names a pool that passes that
    rule. SGLang cuts a request's output to what the pool holds (init_req_max_new_tokens), so a
    least pool computed for the output cut at a small pool was too small once the output grew
    back (130 tokens: "at least 192"; 192: "at least 208")."""
    from specsched.sim.config import load_scenario, with_value
    from specsched.sim.limits import check_fits

    base = load_scenario("h200/kv-retract")
    sc = with_value(with_value(with_value(base, "workload.input_len.value", i), "workload.output_len.value", o),
                    "server.page_size", page)
    need = None
    for pool in (max(8, i + below), 2 * i + o):
        try:
            check_fits(with_value(sc, "server.max_total_num_tokens", pool))
        except ConfigError as e:
            m = re.search(r"must be at least (\d+): a running request's speculative top-up", str(e))
            if m:
                need = int(m.group(1))
                break
    if need is None:
        return
    try:
        check_fits(with_value(sc, "server.max_total_num_tokens", need))
    except ConfigError as e:
        assert "speculative top-up" not in str(e), str(e)
