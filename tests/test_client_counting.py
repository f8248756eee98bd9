"""A prediction is compared with a bench_serving line counting the requests the server
rejected or aborted as that line's client counted them (sim/bench_serving.py
``client_counting``; SGLang 0.5.23 benchmark/serving.py ``ASYNC_REQUEST_FUNCS``):

* ``sglang`` (``async_request_sglang_generate``): every rejection comes inside an HTTP 200
  stream and counts completed; an out-of-memory abort keeps the tokens it got;
* ``sglang-oai-chat`` (``async_request_openai_chat_completions``): the tokenizer's rejection is
  an HTTP 400 (serving_chat.py ``_handle_streaming_request`` kick-starts the stream), failed;
  the scheduler's abort and an out-of-memory abort arrive as a ``data: {"error": ...}`` chunk
  after HTTP 200 (``_generate_chat_stream``), which the client skips (no ``choices``): completed,
  with the output length asked (no ``usage`` chunk);
* ``sglang-oai`` (``async_request_openai_completions``): the same error chunk makes
  ``data["choices"][0]["text"]`` raise: failed, even after tokens arrived.

Before, the chat line was compared with the scheduler's aborts failed and the ``sglang-oai``
line with the out-of-memory aborts completed."""

from __future__ import annotations

import numpy as np
import pytest
from specsched.sim.bench_serving import (
    CHAT_COUNTING,
    COMPLETIONS_COUNTING,
    NATIVE_COUNTING,
    OOM_ABORT_MESSAGE,
    BenchRun,
    ClientCounting,
    client_counting,
    client_record,
)
from specsched.sim.engine import SimEngine

from tests.conftest import make_scenario, tiny_profile
from tests.test_oom_abort import _swa_corner
from tests.test_trace_aborts import ROWS, SERVER


@pytest.mark.parametrize("backend, counting", [("sglang", NATIVE_COUNTING), ("sglang-native", NATIVE_COUNTING),
                                               ("sglang-oai-chat", CHAT_COUNTING),
                                               ("sglang-oai", COMPLETIONS_COUNTING),
                                               ("specsched-sim", ClientCounting()), ("vllm", ClientCounting())])
def test_each_backend_names_its_clients_counting(backend, counting):
    assert client_counting(BenchRun("f:1", {"backend": backend}, {})) == counting


@pytest.fixture(scope="module")
def rejected(tmp_path_factory):
    """Row 2 (4095 + 2000 > the context 4096) is the tokenizer's rejection, row 4 (4090 >=
    max_req_input_len 4090) the scheduler's abort (sim/served.py ``trace_aborts``)."""
    d = tmp_path_factory.mktemp("t")
    (d / "t.csv").write_text(ROWS)
    sc = make_scenario(server={**SERVER, "context_length": 4096}, workload={
        "kind": "trace", "trace": {"path": str(d / "t.csv"), "layout": "azure"},
        "num_requests": None, "input_len": None, "output_len": None})
    return SimEngine(sc, tiny_profile()).run()


def test_the_chat_client_counts_the_schedulers_abort_completed_and_the_tokenizers_rejection_failed(rejected):
    res = rejected
    rec = {k: client_record(res, per_chunk_itl=False, counting=c)
           for k, c in (("native", NATIVE_COUNTING), ("chat", CHAT_COUNTING), ("oai", COMPLETIONS_COUNTING))}
    assert rec["native"]["completed"] == 4
    assert rec["oai"]["completed"] == res.summary["completed"] == 2
    # the chat client: the scheduler's abort (row 4, asking 5) completed at TTFT 0.0
    assert rec["chat"]["completed"] == 3
    assert rec["chat"]["total_output_tokens"] == 20 + 30 + 5
    assert rec["chat"]["total_input_tokens"] == 100 + 300 + 4090
    req = res.table("requests").frame().sort_values("rid")
    ttfts = [req["ttft_s"].iloc[0], req["ttft_s"].iloc[2], 0.0]
    assert rec["chat"]["mean_ttft_ms"] == pytest.approx(1000 * float(np.mean(ttfts)))


@pytest.fixture(scope="module")
def oom_run():
    eng = SimEngine(_swa_corner(), tiny_profile())
    res = eng.run()
    assert res.summary["requests_oom_aborted"] == 1
    (rid, got), = eng.sched.oom_aborted.items()
    return res, rid, got


def test_the_requests_table_keeps_what_an_oom_aborted_request_asked(oom_run):
    res, rid, got = oom_run
    req = res.table("requests").frame().set_index("rid")
    assert req.loc[rid, "oom_abort_asked_len"] == 200 and req.loc[rid, "output_len"] == got
    assert (req.drop(index=rid)["oom_abort_asked_len"] == -1).all()


def test_an_oom_abort_is_failed_by_the_completions_client_and_asked_by_the_chat_client(oom_run):
    res, rid, got = oom_run
    native = client_record(res, per_chunk_itl=False, counting=NATIVE_COUNTING)
    assert native["completed"] == 3 and native["total_output_tokens"] == 2 * 200 + got
    oai = client_record(res, per_chunk_itl=True, counting=COMPLETIONS_COUNTING)
    assert oai["completed"] == 2 and oai["total_output_tokens"] == 2 * 200
    chat = client_record(res, per_chunk_itl=True, counting=CHAT_COUNTING)
    assert chat["completed"] == 3 and chat["total_output_tokens"] == 3 * 200
    # the completions client's metrics leave the failed request's gaps out
    from specsched.sim.metrics import itl_stats

    chunks = res.table("chunks").frame()
    kept = itl_stats(chunks[chunks["rid"] != rid], per_chunk=True)
    assert oai["mean_itl_ms"] == pytest.approx(kept["mean_itl_ms"])
    assert chat["mean_itl_ms"] == pytest.approx(itl_stats(chunks, per_chunk=True)["mean_itl_ms"])
    # its TPOT over the length it asked, from the tokens it got
    req = res.table("requests").frame().set_index("rid")
    mine = (req.loc[rid, "e2e_s"] - req.loc[rid, "ttft_s"]) / (200 - 1)
    others = [(req.loc[r, "e2e_s"] - req.loc[r, "ttft_s"]) / 199 for r in req.index if r != rid]
    assert chat["mean_tpot_ms"] == pytest.approx(1000 * float(np.mean([mine, *others])))
    assert OOM_ABORT_MESSAGE.startswith("Out of memory even after retracting")
