"""Trace rows with a length of 0, as public traces have them (BurstGPT logs failed requests
with ``Response tokens`` 0; Azure and BurstGPT rows with 0 prompt tokens), run as SGLang 0.5.23
serves them instead of refusing the trace:

* a prompt of 0 tokens is rejected by the server before it reaches the scheduler
  (managers/io_struct.py ``GenerateReqInput._determine_batch_size``: ``input_ids cannot be
  empty.``, a ValueError the HTTP server returns as an error): the row fails, as bench_serving
  counts a failed request, with or without ``--allow-auto-truncate``;
* an output of 0 tokens is served (sampling_params.py allows ``max_new_tokens`` 0): the
  request's prefill runs and it finishes there.

A malformed length (negative, fractional, missing) still refuses the trace with one line."""

from __future__ import annotations

import pytest
import yaml
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.trace import load_trace
from specsched.sim.workload_config import TraceConfig

from specsched.cli import main
from tests.conftest import make_scenario, tiny_profile

SERVER = {"max_running_requests": 16, "max_total_num_tokens": 4096, "chunked_prefill_size": 1024,
          "max_prefill_tokens": 2048, "cuda_graph_max_bs": 16, "speculative_algorithm": "none",
          "admission_delay": "none"}
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,100,20\n"
         "2024-05-01 10:00:00.5,0,20\n2024-05-01 10:00:01.0,300,0\n2024-05-01 10:00:01.5,200,10\n")
BURSTGPT = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "0,ChatGPT,100,20,120,Conversation log\n1,ChatGPT,50,0,50,Conversation log\n"
            "2,GPT-4,0,0,0,Conversation log\n3,ChatGPT,80,8,88,Conversation log\n")
EMPTY = "input_ids cannot be empty."


def _scenario(tmp_path, rows: str, layout: str, **server):
    (tmp_path / "t.csv").write_text(rows)
    return make_scenario(server={**SERVER, **server}, workload={
        "kind": "trace", "trace": {"path": str(tmp_path / "t.csv"), "layout": layout},
        "num_requests": None, "input_len": None, "output_len": None})


@pytest.mark.parametrize("truncate", [False, True])
def test_an_empty_prompt_fails_with_sglangs_message_and_the_rest_run(tmp_path, truncate):
    res = SimEngine(_scenario(tmp_path, AZURE, "azure", allow_auto_truncate=truncate), tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    assert req["error"].tolist() == ["", EMPTY, "", ""]
    assert res.summary["completed"] == 3 and res.summary["requests_aborted"] == 1
    assert req["ttft_s"].isna().tolist() == [False, True, False, False]


def test_burstgpt_rows_with_zero_lengths_replay(tmp_path):
    res = SimEngine(_scenario(tmp_path, BURSTGPT, "burstgpt"), tiny_profile()).run()
    req = res.table("requests").frame().sort_values("rid")
    # the 0-response row with a prompt is served; the 0/0 row's empty prompt is rejected
    assert req["error"].tolist() == ["", "", EMPTY, ""]
    assert res.summary["completed"] == 3


def test_the_trace_says_in_one_line_how_many_prompts_were_empty(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(AZURE)
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline", "seed": 1, "server": SERVER,
                                 "workload": {"kind": "trace", "trace": {"path": "t.csv", "layout": "azure"}}}))
    assert main(["run", str(y), "--out", str(tmp_path / "out"), "-q"]) == 0
    err = capsys.readouterr().err.splitlines()
    empty = [e for e in err if "0 prompt tokens" in e]
    assert len(empty) == 1 and "1 of 4" in empty[0] and "ContextTokens" in empty[0] and "rejects" in empty[0], err
    assert not any(e.startswith("specsched: error") for e in err), err
    rejected = [e for e in err if "rejected" in e]
    assert len(rejected) == 1 and "1 request(s)" in rejected[0] and "empty prompt" in rejected[0], err


@pytest.mark.parametrize("value,allowed", [("-1", ">= 0"), ("2.5", "integer"), ("", "")])
def test_a_malformed_prompt_length_still_refuses_the_trace(tmp_path, value, allowed):
    (tmp_path / "t.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 10:00:00.0,{value},20\n")
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(tmp_path / "t.csv"), layout="azure"))
    assert ":2" in str(e.value) and "ContextTokens" in str(e.value) and allowed in str(e.value)


@pytest.mark.parametrize("server, eos", [({}, True), ({"disable_radix_cache": True}, True),
                                         ({"disable_radix_cache": True}, False)],
                         ids=["add_one_req", "add_one_req_ignore_eos", "no_ignore_eos"])
def test_a_request_asking_no_output_reserves_no_output_token_at_admission(tmp_path, server, eos):
    """SGLang 0.5.23 admits a request of ``max_new_tokens`` 0 with no output reserved:
    schedule_policy.py ``PrefillAdder.add_one_req`` charges ``extend + min(max(max_new_tokens -
    len(output_ids), 0), CLIP_MAX_NEW_TOKENS)`` (0) to the KV budget, ``_update_prefill_budget``
    likewise, and ``add_one_req_ignore_eos`` leaves it out of its projection
    (``tokens_left <= 0``). Its prefill allocates the prompt only (schedule_batch.py
    ``ScheduleBatch.prepare_for_extend``: ``extend_num_tokens``), and it finishes on the
    prefill's token (``Req.is_prefill_only``; ``check_finished`` at ``max_new_tokens`` 0).
    Three 300-token prompts asking 0 tokens then fit one prefill of a 904-token pool
    (each charges 300 + a page of 1: 3 x 301 = 903 < 904); they ran as one-token requests,
    charging 302 each, and the third waited for a pool of 907 (910 on the ignore_eos path)."""
    d = tmp_path
    (d / "t.csv").write_text("timestamp,input_length,output_length\n" + "0,300,0\n" * 3)
    sc = make_scenario(server={"max_total_num_tokens": 904, "chunked_prefill_size": 4096, "max_prefill_tokens": 4096,
                               "speculative_algorithm": "none", "admission_delay": "none", "page_size": 1, **server},
                       workload={"kind": "trace", "trace": {"path": str(d / "t.csv")}, "ignore_eos": eos,
                                 "num_requests": None, "input_len": None, "output_len": None})
    eng = SimEngine(sc, tiny_profile())
    res = eng.run()
    steps = res.table("steps").frame()
    assert int(steps["num_extend_tokens"].iloc[0]) == 900
    assert res.summary["completed"] == 3
    assert eng.sched.kv.peak <= 900   # the prompts' KV, no output slot
