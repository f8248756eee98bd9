"""A trace row SGLang 0.5.23 rejects in a prefill-decode disaggregated deployment runs as a
failed request, as a co-located server's does (tests/test_trace_aborts.py), with the same
outputs: the requests table's ``error`` column, NaN latencies, ``requests_aborted``, the
bench_serving line's ``errors`` (sim/served.py ``trace_aborts``).

The router sends the request to a prefill and a decode server at once. Each server's
tokenizer rejects a prompt past the context length (tokenizer_manager.py
``_validate_one_request``); each scheduler aborts a prompt of its ``max_req_input_len`` or more
(managers/utils.py ``validate_input_length`` -> ``Req.set_finish_with_abort``) and the
aborted request is retired at its disaggregation queue's door with no forward
(disaggregation/prefill.py ``PrefillBootstrapQueue.add`` and decode.py
``DecodePreallocQueue.add``: ``is_unadmitted_reject`` -> scheduler.py
``retire_unadmitted_request``). Before, such a trace was refused with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from specsched.sim.disagg_config import KVTransferCost
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.limits import check_fits
from specsched.sim.served import trace_aborts

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SERVER = {"max_running_requests": 16, "max_total_num_tokens": 4096, "chunked_prefill_size": 1024,
          "max_prefill_tokens": 2048, "cuda_graph_max_bs": 16, "speculative_algorithm": "none",
          "speculative_num_draft_tokens": 1, "admission_delay": "none",
          "disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1}}}
ROWS = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n"
        "2024-05-01 10:00:00.5,4095,2000\n2024-05-01 10:00:01.0,300,30\n2024-05-01 10:00:01.5,4090,5\n")
"""Rows 2 and 4 have prompts of at least max_req_input_len = 4096 - 6 = 4090 tokens on both
servers (one pool size)."""
MSG = ("Input length ({} tokens) exceeds the maximum allowed length (4090 tokens). "
       "Use a shorter input or enable --allow-auto-truncate.")


def _profile():
    return tiny_profile().model_copy(update={"kv_transfer": KVTransferCost(
        bytes_per_token=1e5, link_bytes_per_s=1e10, latency_s=1e-3)})


def _scenario(tmp_path, rows: str = ROWS, server: dict | None = None, **workload):
    (tmp_path / "t.csv").write_text(rows)
    return make_scenario(server={**SERVER, **(server or {})},
                         workload={"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": "azure"},
                                   "num_requests": None, "input_len": None, "output_len": None, **workload})


def test_prompts_past_max_req_input_len_fail_in_a_pd_deployment_and_the_rest_run(tmp_path):
    sc = _scenario(tmp_path)
    check_fits(sc)   # no longer refused before the run
    eng = SimEngine(sc, _profile())
    res = eng.run()
    req = res.requests.sort_values("rid")
    assert req["error"].tolist() == ["", MSG.format(4095), "", MSG.format(4090)]
    assert res.summary["completed"] == 2 and res.summary["requests_aborted"] == 2
    assert res.summary["total_input_tokens"] == 400 and res.summary["total_output_tokens"] == 50
    assert req["ttft_s"].isna().tolist() == [False, True, False, True]
    assert req["finish_s"].isna().tolist() == [False, True, False, True]
    # retired at both servers' doors: neither server ever held or ran them (no forward, unlike
    # a co-located server's one-token prefill)
    for s in eng.prefill + eng.decode:
        assert set(s.sched.reqs) <= {0, 2}
    assert set(res.chunks["rid"]) == {0, 2}
    # bench_serving's duration runs until the last response: the rejected row sent at 1.5 s
    assert res.summary["duration"] >= 1.5


def test_a_prompt_past_the_context_fails_at_both_tokenizers(tmp_path):
    rows = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n"
            "2024-05-01 10:00:00.1,1000,20\n2024-05-01 10:00:00.2,900,200\n")
    sc = _scenario(tmp_path, rows, server={"context_length": 1000})
    res = SimEngine(sc, _profile()).run()
    req = res.requests.sort_values("rid")
    errs = req["error"].tolist()
    assert errs[0] == ""
    assert errs[1] == "The input (1000 tokens) is longer than the model's context length (1000 tokens)."
    assert errs[2].startswith("Requested token count exceeds the model's maximum context length of 1000 tokens.")
    assert res.summary["completed"] == 1 and res.summary["requests_aborted"] == 2


def test_the_bench_serving_line_counts_a_pd_abort_as_a_failed_request(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "t.csv").write_text(ROWS)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h100-llama-3.1-8b-eagle3-analytic", "seed": 1,
                                 "server": SERVER,
                                 "workload": {"kind": "trace", "trace": {"path": str(tmp_path / "t.csv"),
                                                                         "layout": "azure"}}}))
    assert main(["run", str(y), "--out", str(out), "-q"]) == 0
    line = json.loads((out / "bench_serving.jsonl").read_text().splitlines()[0])
    assert line["completed"] == 2
    assert [bool(e) for e in line["errors"]] == [False, True, False, True]
    assert line["output_lens"][1] == 0 and "exceeds the maximum allowed length" in line["errors"][1]


def test_a_closed_loop_client_sends_its_next_request_after_a_pd_abort(tmp_path):
    res = SimEngine(_scenario(tmp_path, max_concurrency=1), _profile()).run()
    req = res.requests.sort_values("rid")
    assert res.summary["completed"] == 2 and res.summary["requests_aborted"] == 2
    assert req["start_s"].is_monotonic_increasing


def test_a_row_only_one_server_rejects_is_still_refused_naming_that_server(tmp_path):
    """A prompt between the two servers' max_req_input_len (role pools differ): the prefill
    server retires it, the decode server preallocates its KV and waits for a transfer that
    never comes (SGLANG_DISAGGREGATION_WAITING_TIMEOUT, disaggregation/common/conn.py); not
    modelled, refused before the run."""
    server = {"disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1,
              "server": {"max_total_num_tokens": 20000}}}}
    sc = _scenario(tmp_path, server=server)
    ins, outs = np.array([100, 4095, 300, 4090]), np.array([20, 2000, 30, 5])
    assert trace_aborts(sc, ins, outs, None) == [None] * 4
    with pytest.raises(ConfigError) as e:
        check_fits(sc)
    assert "prefill" in str(e.value) and "decode server" in str(e.value)


@pytest.mark.parametrize("policy", ["round_robin", "random"])
def test_the_router_picks_a_server_pair_for_a_rejected_row_too(tmp_path, policy):
    """The router picks a prefill and a decode server for every request before either sees
    it (the pair's bootstrap address goes into the request both get); the rejection comes
    from the servers. So a rejected row takes its turn of round_robin (and its draw of
    random), and the rows after it land where they would with a served row in its place."""
    served = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n"
              "2024-05-01 10:00:00.5,{}\n2024-05-01 10:00:01.0,300,30\n2024-05-01 10:00:01.5,200,5\n"
              "2024-05-01 10:00:02.0,150,8\n")
    server = {"disaggregation": {"prefill": {"instances": 2}, "decode": {"instances": 3},
                                 "router_policy": policy}}

    def homes(rows: str, sub: str) -> tuple[dict[int, int], ...]:
        eng = SimEngine(_scenario(tmp_path / sub, rows, server=server), _profile())
        eng.run()
        return tuple({rid: s.index for s in servers for rid in s.sched.reqs}
                     for servers in (eng.prefill, eng.decode))

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rejected, kept = homes(served.format("4095,20"), "a"), homes(served.format("120,20"), "b")
    for role, k in zip(rejected, kept, strict=True):
        assert 1 not in role
        assert role == {rid: i for rid, i in k.items() if rid != 1}


def test_a_one_server_rejection_names_the_argument_the_roles_differ_in(tmp_path):
    """The decode server truncates (its own --allow-auto-truncate) what the prefill server
    rejects: the refusal says the roles differ in allow_auto_truncate, not in their pools."""
    server = {"disaggregation": {"prefill": {"instances": 1}, "decode": {"instances": 1,
              "server": {"allow_auto_truncate": True}}}}
    with pytest.raises(ConfigError) as e:
        check_fits(_scenario(tmp_path, server=server))
    text = str(e.value)
    assert "the prefill server rejects it" in text and "differ in allow_auto_truncate" in text
    assert "max_total_num_tokens" not in text
