"""A trace row whose prompt fits the KV pool but whose output does not runs with its output
cut as SGLang 0.5.23 cuts ``max_new_tokens`` (managers/scheduler.py
``init_req_max_new_tokens``: ``min(max_req_len - input - 1, pool - page_ceil(input) - page - 1)``),
instead of a refusal; only a prompt SGLang aborts is refused. The run counts the cut requests
(summary ``requests_output_clamped``, ``output_clamp_max_tokens``) and says so in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.engine import SimEngine
from specsched.sim.pool_fit import never_fit_rows
from specsched.sim.server_args import ServerArgs

import specsched.cli as cli  # noqa: F401
from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SERVER = {"max_running_requests": 16, "max_total_num_tokens": 4096, "chunked_prefill_size": 1024,
          "max_prefill_tokens": 2048, "cuda_graph_max_bs": 16, "speculative_algorithm": "none",
          "admission_delay": "none"}
ROWS = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n2024-05-01 10:00:00.5,3000,2000\n"


def _scenario(tmp_path, rows: str, profile: str = "h200-llama8b-roofline", **server) -> str:
    (tmp_path / "t.csv").write_text(rows)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": profile, "seed": 1,
                                 "server": {**SERVER, **server},
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    return str(y)


def test_a_trace_row_with_too_long_an_output_runs_with_sglangs_cut(tmp_path, capsys):
    # pool 4096, page 1: SGLang cuts to 4096 - 3000 - 1 - 1 = 1094 output tokens (max_req_len
    # 4095 - 3000 - 1 = 1094 too), and so does the simulator (it ran 1092: its admission kept 2
    # decode slots in flight beside the request, which SGLang's PrefillAdder does not charge)
    from specsched.sim.served import output_cut

    assert output_cut(ServerArgs(**SERVER), np.array([3000]), np.array([2000])).tolist() == [1094]
    y = _scenario(tmp_path, ROWS)
    assert main(["run", y, "--out", str(tmp_path / "out"), "-q", "--format", "csv"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    warn = [e for e in err if "output cut" in e]
    assert len(warn) == 1 and "1 request(s)" in warn[0] and "largest cut: 906 tokens" in warn[0], err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["requests_output_clamped"] == 1 and summary["output_clamp_max_tokens"] == 906
    req = pd.read_csv(tmp_path / "out" / "requests.csv").sort_values("rid")
    assert req["output_len"].tolist() == [20, 1094]


def test_bench_serving_output_lens_are_the_cut_outputs(tmp_path):
    from specsched.sim.bench_serving import bench_record

    (tmp_path / "t.csv").write_text(ROWS)
    sc = make_scenario(server=SERVER, workload={"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"),
                       "layout": "azure"}, "num_requests": None, "input_len": None, "output_len": None})
    res = SimEngine(sc, tiny_profile()).run()
    rec = bench_record(res, details=True)
    assert sorted(rec["output_lens"]) == [20, 1094]
    assert rec["total_output_tokens"] == 1114


def test_a_prompt_sglang_aborts_fails_beside_the_cut_rows(tmp_path, capsys):
    # the long output (line 3) is cut; the prompt of 4095 tokens (line 4) is aborted by SGLang
    # (managers/utils.py validate_input_length): it runs as a failed request
    # (tests/test_trace_aborts.py; it was refused in one line before)
    y = _scenario(tmp_path, ROWS + "2024-05-01 10:00:01.0,4095,1\n")
    assert main(["run", y, "--out", str(tmp_path / "out"), "-q"]) == 0
    req = pd.read_parquet(tmp_path / "out" / "requests.parquet").sort_values("rid")
    assert req["error"].ne("").tolist() == [False, False, True]
    assert req["output_len"].tolist()[:2] == [20, 1094]


def test_a_row_the_context_length_rejects_fails(tmp_path, capsys):
    y = _scenario(tmp_path, ROWS, context_length=3500)
    assert main(["run", y, "--out", str(tmp_path / "out"), "-q"]) == 0
    req = pd.read_parquet(tmp_path / "out" / "requests.parquet").sort_values("rid")
    assert req["error"].tolist()[1].startswith("Requested token count exceeds the model's maximum context length "
                                               "of 3500 tokens. You requested a total of 5000 tokens")


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(64, 20000), page=st.sampled_from([1, 16, 64]), spec=st.booleans(),
       ctx=st.one_of(st.none(), st.integers(64, 40000)),
       rows=st.lists(st.tuples(st.integers(1, 20000), st.integers(1, 30000)), min_size=1, max_size=6))
def test_the_cut_is_sglangs_and_a_cut_request_fits_unless_sglang_aborts_it(cap, page, spec, ctx, rows):
    """Invariant: the simulator runs exactly SGLang's cut (``output_cut``), with and without
    speculative decoding: nothing of its own is taken off; every request whose prompt the
    server takes (a cut of at least one token) fits the pool after the cut (the scheduler's
    own check, ``never_fit_rows``; a prompt of pool - 6 tokens or more SGLang aborts),
    except, under the top-up rule, one whose last top-up
    (committed + spec_kv_reserve, page-rounded) passes the pool, which SGLang aborts
    (schedule_batch.py retract_decode); a request within SGLang's bounds (``paged + page +
    output < pool``, ``input + output < max_req_len``) is unchanged; an output is never
    lengthened."""
    from specsched.sim.served import output_cut, trace_output_cut

    srv = {"max_total_num_tokens": cap, "page_size": page, "chunked_prefill_size": 128, "max_prefill_tokens": 256,
           "context_length": ctx}
    if not spec:
        srv.update(speculative_algorithm="none", speculative_num_draft_tokens=1)
    try:
        sc = make_scenario(server=srv)
    except Exception:   # server arguments the scenario refuses
        return
    s = sc.server
    ins, outs = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    sg = output_cut(s, ins, outs, ctx)
    run = trace_output_cut(sc, ins, outs, None)
    assert (run <= outs).all() and (sg <= outs).all() and (sg >= 0).all()
    cut = sg >= 1
    assert (run[cut] == sg[cut]).all() and (run[~cut] == outs[~cut]).all()
    taken = cut & (ins <= cap - 7)   # SGLang aborts a longer prompt (validate_input_length)
    reserve = s.spec_kv_reserve if s.rules.spec_kv_reservation == "topup" else 0
    aborted = (reserve > 0) & (run >= 2) & (-(-(ins + run - 2 + reserve) // page) * page > cap)
    assert (never_fit_rows(s, ins[taken], run[taken]) == aborted[taken]).all()
    if not spec:
        assert not aborted.any()
    paged = -(-ins // page) * page
    max_req_len = cap - 1 if ctx is None else min(ctx - 1, cap - 1)
    within = (paged + page + outs < cap) & (ins + outs < max_req_len)
    assert (sg[within] == outs[within]).all()
    assert (sg[~within] < outs[~within]).all()


SPEC = {**SERVER, "speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4}


def test_with_speculative_decoding_the_cut_is_sglangs_where_the_last_top_up_fits(tmp_path):
    # page 16, DSpark with 4 draft tokens (top-up reserve 8): SGLang cuts 3000 + 2000 to
    # 4096 - 3008 - 16 - 1 = 1071, whose last top-up, ceil16(3000 + 1069 + 8) = 4080, fits:
    # the row runs with SGLang's output (it ran 1063: the admission kept 8 slots beside it)
    (tmp_path / "t.csv").write_text(ROWS)
    sc = make_scenario(server={**SPEC, "page_size": 16}, workload={
        "kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"}, "num_requests": None,
        "input_len": None, "output_len": None})
    for seed in (1, 2, 3):
        res = SimEngine(sc.model_copy(update={"seed": seed}), tiny_profile()).run()
        assert sorted(res.requests["output_len"].tolist()) == [20, 1071]


def test_with_speculative_decoding_a_cut_row_whose_last_top_up_passes_the_pool_is_refused(tmp_path, capsys,
                                                                                         monkeypatch):
    # page 1, reserve 8: SGLang's cut 1094 leaves the last top-up at 3000 + 1092 + 8 = 4100
    # positions, past the pool of 4096: SGLang aborts the request near its end (retract_decode:
    # "Out of memory even after retracting all other requests"), which is not modelled
    def refuse(*a, **k):
        raise AssertionError("simulated a run the server aborts")
    monkeypatch.setattr(cli, "simulate", refuse)
    y = _scenario(tmp_path, ROWS, speculative_algorithm="dspark", speculative_num_draft_tokens=4)
    doc = yaml.safe_load(open(y))
    doc["acceptance"] = {"mean_accept_length": 2.5}
    open(y, "w").write(yaml.safe_dump(doc))
    assert main(["run", y, "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.csv:3: GeneratedTokens = 2000: request 2 " in err[0], err
    assert "4100 KV positions" in err[0] and "retract_decode" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_last_top_up_at_the_pool_runs_and_one_token_more_is_refused(seed):
    # page 1, reserve 8, pool 4096, prompt 3000: an output of 1090 tops up at most to
    # 3000 + 1088 + 8 = 4096 positions and runs whatever the acceptance draws; 1091 is refused
    from specsched.sim.scheduler_decode import UnschedulableRequest

    def run(o):
        sc = make_scenario(server=SPEC, seed=seed, workload={"kind": "burst", "num_requests": 1,
                           "input_len": {"kind": "fixed", "value": 3000}, "output_len": {"kind": "fixed", "value": o}})
        return SimEngine(sc, tiny_profile()).run()

    assert run(1090).requests["output_len"].tolist() == [1090]
    with pytest.raises(UnschedulableRequest, match="retract_decode"):
        run(1091)


def test_the_runtime_runs_the_cut_outputs_the_simulator_runs(tmp_path):
    # predicted and measured must be the same run: the runtime builds its requests with the
    # simulator's function (sim/served.py served_requests), so a trace row whose output SGLang
    # cuts runs cut there too (it stopped with UnschedulableRequest when the row reached the
    # scheduler)
    pytest.importorskip("torch")
    from specsched.runtime.engine import RuntimeEngine

    (tmp_path / "t.csv").write_text(ROWS)
    sc = make_scenario(server=SERVER, workload={"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"),
                       "layout": "azure", "time_scale": 0.01}, "num_requests": None, "input_len": None,
                       "output_len": None})
    predicted = SimEngine(sc, tiny_profile()).run()
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    lens = [sorted(r.table("requests").frame()["output_len"].tolist()) for r in (predicted, measured)]
    assert lens[0] == lens[1] == [20, 1094]
    assert measured.summary["requests_output_clamped"] == predicted.summary["requests_output_clamped"] == 1
    assert measured.summary["output_clamp_max_tokens"] == 906


def _trace_run(tmp_path, server: dict, profile=None):
    (tmp_path / "t.csv").write_text(ROWS)
    sc = make_scenario(server={**SERVER, **server}, workload={
        "kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"}, "num_requests": None,
        "input_len": None, "output_len": None})
    from specsched.sim.limits import check_fits

    check_fits(sc)   # refused here before, as a row the simulator did not cut
    return SimEngine(sc, profile or tiny_profile()).run()


def test_a_sliding_window_models_trace_row_is_cut_as_sglang_cuts_it(tmp_path):
    # SGLang's SWATokenToKVPoolAllocator (separate full and SWA pools, the default) inherits
    # the base allocator's max_new_tokens_for_memory with the full pool's capacity: 1094 on
    # the full pool of 4096, whatever the SWA pool (it was refused: "SGLang would cut ... not
    # modelled")
    res = _trace_run(tmp_path, {"sliding_window_size": 128, "swa_full_tokens_ratio": 0.5})
    assert sorted(res.requests["output_len"].tolist()) == [20, 1094]
    assert res.summary["requests_output_clamped"] == 1


def test_a_disaggregated_trace_row_is_cut_by_the_decode_servers_pool(tmp_path):
    # every server cuts a request when it reaches its scheduler (handle_generate_request ->
    # init_req_max_new_tokens, any disaggregation mode); the prefill server's copy asks for one
    # token: the decode server's pool of 4096 cuts 2000 to 1094 (it was refused)
    from tests.test_disaggregation import _pd, _profile

    big = {"max_total_num_tokens": 200_000}
    res = _trace_run(tmp_path, _pd(prefill_server=big, decode_server={"max_total_num_tokens": 4096},
                                   max_total_num_tokens=200_000), _profile())
    assert sorted(res.requests["output_len"].tolist()) == [20, 1094]
    assert res.summary["requests_output_clamped"] == 1


TURNS = {"kind": "multi_turn", "concurrency": 2, "output_len": {"kind": "fixed", "value": 200},
         "num_requests": None, "input_len": None,
         "multi_turn": {"num_conversations": 2, "num_turns": 5, "system_prompt_len": 200,
                        "first_prompt_len": {"kind": "fixed", "value": 1000},
                        "user_len": {"kind": "fixed", "value": 500}, "think_time_s": 1.0}}


def test_a_turn_is_cut_as_sglang_cuts_any_request(tmp_path):
    # turn 5 resends 200 + 1000 + 4 x (200 + 500) = 4000 tokens: SGLang cuts its 200 output to
    # 4096 - 4000 - 2 = 94 (it was refused: "SGLang would cut ... not modelled")
    sc = make_scenario(server=SERVER, workload=TURNS)
    from specsched.sim.limits import check_fits

    check_fits(sc)
    res = SimEngine(sc, tiny_profile()).run()
    req = res.requests.sort_values("rid")
    assert req["output_len"].tolist() == [200, 200, 200, 200, 94] * 2
    assert res.summary["requests_output_clamped"] == 2 and res.summary["output_clamp_max_tokens"] == 106


def test_the_next_turn_resends_the_cut_answer(tmp_path):
    # a sixth turn resends 4000 + 94 (the cut answer, not the 200 asked) + 500 = 4594 tokens,
    # a prompt SGLang aborts on this pool: refused, naming that prompt
    from specsched.sim.errors import ConfigError

    six = {**TURNS, "multi_turn": {**TURNS["multi_turn"], "num_turns": 6}}
    with pytest.raises(ConfigError) as e:
        SimEngine(make_scenario(server=SERVER, workload=six), tiny_profile())
    assert e.value.key == "workload.multi_turn" and e.value.value == 4594
    assert "turn 6 of a conversation" in e.value.allowed


def test_the_cut_warning_of_a_disaggregated_run_names_the_decode_servers_pool(tmp_path, capsys):
    """The decode servers' pool cuts the output (above), so the warning names that key and
    value (it named the top-level pool, 200,000 here, which cut nothing)."""
    y = _scenario(tmp_path, ROWS, profile="h100-llama-3.1-8b-eagle3-analytic", max_total_num_tokens=200_000,
                  disaggregation={"prefill": {"instances": 1, "server": {}},
                                  "decode": {"instances": 1, "server": {"max_total_num_tokens": 4096}}})
    assert main(["run", y, "--out", str(tmp_path / "out"), "-q"]) == 0
    warn = [e for e in capsys.readouterr().err.splitlines() if "output cut" in e]
    assert len(warn) == 1 and "server.disaggregation.decode.server.max_total_num_tokens=4096" in warn[0], warn


def test_a_generated_workloads_outputs_are_cut_as_sglang_cuts_them(tmp_path, capsys):
    """A burst whose outputs the pool cannot hold runs with SGLang's cut (init_req_max_new_tokens
    cuts every request's max_new_tokens, whatever sent it), where it was refused; only the
    requests past the cut are cut (uniform outputs), each to what the empty pool holds after
    its own prompt."""
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1, "server": SERVER,
                                 "workload": {"kind": "burst", "num_requests": 12,
                                              "input_len": {"kind": "uniform", "value": 1000, "range_ratio": 0.5},
                                              "output_len": {"kind": "uniform", "value": 4000, "range_ratio": 0.25}}}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 0
    warn = [e for e in capsys.readouterr().err.splitlines() if "output cut" in e]
    assert len(warn) == 1, warn
    req = pd.read_parquet(tmp_path / "out" / "requests.parquet").sort_values("rid")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    from specsched.sim.config import load_scenario
    from specsched.sim.workload import make_requests

    specs = make_requests(load_scenario(str(y)).workload, 1, None)
    asked = np.array([s.output_len for s in specs])
    ins = np.array([s.input_len for s in specs])
    served = np.minimum(asked, 4096 - ins - 2)   # page 1: min(max_req_len - in - 1, pool - in - 1 - 1)
    assert req["output_len"].tolist() == served.tolist()
    assert 0 < summary["requests_output_clamped"] == int((served < asked).sum()) < 12
    assert summary["completed"] == 12


def test_a_cut_the_ignore_eos_admission_never_takes_is_refused_not_stalled(tmp_path, capsys):
    """With the prefix cache off, SGLang admits an ignore_eos request by its projection
    (schedule_policy.py add_one_req_ignore_eos), which keeps one token free beyond the prompt, a
    page and the whole output; its own cut of max_new_tokens leaves exactly one token short, so
    such a request waits for ever. The run stalled with a traceback (a cut generated output, and
    a trace row as well); it is refused up front naming the output asked."""
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1,
                                 "server": {**SERVER, "max_total_num_tokens": 3000, "disable_radix_cache": True},
                                 "workload": {"kind": "burst", "num_requests": 4, "input_len": {"kind": "fixed", "value": 900},
                                              "output_len": {"kind": "fixed", "value": 3000}}}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workload.output_len = 3000: SGLang cuts it to 2098" in err[0], err
    assert "add_one_req_ignore_eos" in err[0] and not (tmp_path / "out").exists()
    y2 = _scenario(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,2950,301\n",
                   max_total_num_tokens=3000, disable_radix_cache=True)
    assert main(["run", y2, "--out", str(tmp_path / "out2"), "-q"]) == 2
    assert "add_one_req_ignore_eos" in capsys.readouterr().err
    # with the radix cache on, the same cut runs (add_one_req reserves the clipped output)
    y.write_text(y.read_text().replace("disable_radix_cache: true", "disable_radix_cache: false"))
    assert main(["run", str(y), "--out", str(tmp_path / "out3"), "-q"]) == 0
