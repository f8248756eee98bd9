"""SGLang 0.5.23's batch log lines, built part by part as its scheduler writes them, read back
field by field (analysis/server_log.py).

The parts and their order are 0.5.23's (``srt/managers/scheduler_components/metrics_reporter.py``
``report_prefill_stats``/``report_decode_stats``; the pool parts from
``pool_stats_observer.py`` ``get_prefill_usage_msg_parts``/``get_decode_usage_msg_parts``; the
logger prefix from ``srt/utils/common.py`` ``configure_logger`` with the rank prefix
``scheduler.py`` builds: `` DPn``, `` PPn``, `` ATTN_CPn``, `` MOE_DPn``, `` TPn``, `` EPn``,
each only when that parallelism is used). Every optional part is drawn on or off."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.analysis.server_log import parse_line

COUNT = st.integers(0, 10**6)
SHARE = st.floats(0, 1, allow_nan=False).map(lambda x: round(x, 2))
RATE = st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def prefix(draw):
    """``[date time{.ms}{ranks}] `` and, sometimes, a container runtime's prefix before it."""
    ms = f".{draw(st.integers(0, 999)):03d}" if draw(st.booleans()) else ""
    ranks = "".join(f" {name}{draw(st.integers(0, 15))}" for name in ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")
                    if draw(st.booleans()))
    # a container runtime's, a timestamped collector's, or Ray's actor prefix (0.5.23
    # srt/debug_utils/log_parser.py ``_PATTERN_DECODE`` allows "(Name pid=N, ip=A.B.C.D) ")
    outer = draw(st.sampled_from(["", "sglang-1  | ", "2026-03-02T08:01:00.000000000Z ",
                                  "(SchedulerActor pid=4242, ip=10.0.0.12) "]))
    return f"{outer}[2026-03-02 08:01:00{ms}{ranks}] ", ms, ranks.strip()


@st.composite
def pools(draw, decode: bool):
    """The pool parts (hybrid SWA, hybrid SSM, HiSparse on decode lines, else the plain one)
    and the token count and usage a reader takes from them (NaN where none is written)."""
    swa, ssm, hisparse = draw(st.booleans()), draw(st.booleans()), decode and draw(st.booleans())
    full, use = draw(COUNT), draw(SHARE)
    parts = []
    if swa:
        parts += [f"#full token: {full}", f"full token usage: {use:.2f}", f"#swa token: {draw(COUNT)}",
                  f"swa token usage: {draw(SHARE):.2f}"] if decode else \
                 [f"full token usage: {use:.2f}", f"swa token usage: {draw(SHARE):.2f}"]
    if ssm:
        if not swa:
            parts += [f"#full token: {full}", f"full token usage: {use:.2f}"] if decode else [f"full token usage: {use:.2f}"]
        if decode:
            parts.append(f"mamba num: {draw(COUNT)}")
        parts.append(f"mamba usage: {draw(SHARE):.2f}")
    extra = {"gpu_token": math.nan, "cpu_token": math.nan, "mamba_num": math.nan}
    if hisparse:
        extra["gpu_token"], extra["cpu_token"] = draw(COUNT), draw(COUNT)
        parts += [f"#gpu token: {extra['gpu_token']}", f"gpu token usage: {draw(SHARE):.2f}",
                  f"#cpu token: {extra['cpu_token']}", f"cpu token usage: {draw(SHARE):.2f}"]
    if ssm and decode:
        extra["mamba_num"] = int(next(p for p in parts if p.startswith("mamba num:")).split(": ")[1])
    if not parts:
        parts.append(f"#token: {full}, token usage: {use:.2f}" if decode else f"token usage: {use:.2f}")
    named = swa or ssm or not hisparse   # a line with only HiSparse pools names no full-pool count
    token = float(full) if decode and named else math.nan
    return ", ".join(parts) + ", ", token, use if named else math.nan, extra


@st.composite
def prefill_line(draw):
    head, _, ranks = draw(prefix())
    it = f" [{draw(st.integers(0, 10**7))}]" if draw(st.booleans()) else ""
    new_seq, new_tok, cached, run, queue, pending = (draw(COUNT) for _ in range(6))
    usage, _, use, _ = draw(pools(decode=False))
    msg = (f"Prefill batch{it}, #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, {usage}"
           f"#running-req: {run}, #queue-req: {queue}, #pending-token: {pending}, ")
    replay = draw(st.integers(1, 10**5)) if draw(st.booleans()) else None
    if replay:
        msg += f"#replay-token: {replay}, "
    pd = draw(st.booleans())
    boot = infl = opt = 0
    if pd:
        boot, infl, opt = draw(COUNT), draw(COUNT), draw(COUNT)
        msg += f"#bootstrap-req: {boot}, #inflight-req: {infl}, #optimistic-req: {opt}, "
    if draw(st.booleans()):
        msg += f"waiting-image-req: {draw(COUNT)}, "
    graph = draw(st.booleans())
    label = draw(st.sampled_from(["cuda graph", "cpu graph", "npu graph", "musa graph"]))
    tput = draw(RATE)
    msg += f"{label}: {graph}, input throughput (token/s): {tput:.2f}"
    if draw(st.booleans()):
        msg += f", est. prefill TFLOPS/s (per GPU): {draw(RATE):.2f}"
    if draw(st.booleans()):
        msg += f", fwd occupancy: {draw(SHARE) * 100:.2f}%, fwd+idle occupancy: {draw(SHARE) * 100:.2f}%"
    want = {"kind": "prefill", "rank": ranks, "new_seq": new_seq, "new_token": new_tok, "cached_token": cached,
            "token_usage": use, "running_req": run, "queue_req": queue, "pending_token": pending,
            "replay_token": replay if replay else math.nan, "graph": float(graph), "input_throughput": tput,
            "bootstrap_req": boot if pd else math.nan, "inflight_req": infl if pd else math.nan,
            "optimistic_req": opt if pd else math.nan}
    return head + msg, want


@st.composite
def decode_line(draw):
    head, _, ranks = draw(prefix())
    it = f" [{draw(st.integers(0, 10**7))}]" if draw(st.booleans()) else ""
    run = draw(COUNT)
    usage, token, use, extra = draw(pools(decode=True))
    msg = f"Decode batch{it}, #running-req: {run}, {usage}"
    acc = rate = cap = block = math.nan
    two = st.floats(1, 16).map(lambda x: round(x, 2))
    if draw(st.booleans()):   # speculative decoding
        acc, rate = draw(two), draw(SHARE)
        msg += f"accept len: {acc:.2f}, accept rate: {rate:.2f}, "
        if draw(st.booleans()):
            cap = draw(two)
            msg += f"cap len: {cap:.2f}, "
        if draw(st.booleans()):
            block = draw(two)
            msg += f"block accept len: {block:.2f}, "
        if draw(st.booleans()):   # DSpark's estimate (dspark_block_accept_estimator.py estimate_log_suffix)
            msg += f"est uncap acc len: {draw(st.floats(1, 16)):.2f} [{draw(st.floats(1, 8)):.2f}, {draw(st.floats(8, 16)):.2f}], "
    pd = draw(st.booleans())
    pre = (draw(SHARE), draw(COUNT), draw(COUNT), draw(COUNT))
    if pd:
        msg += f"pre-allocated usage: {pre[0]:.2f}, #prealloc-req: {pre[1]}, #transfer-req: {pre[2]}, "
        host = math.nan
        if draw(st.booleans()):
            host = draw(COUNT)
            msg += f"#host-receive-req: {host}, "
        msg += f"#retracted-req: {pre[3]}, "
    graph, gen, queue = draw(st.booleans()), draw(RATE), draw(COUNT)
    msg += f"cuda graph: {graph}, gen throughput (token/s): {gen:.2f}, #queue-req: {queue}"
    if draw(st.booleans()):
        msg += (f", est. decode TFLOPS/s (per GPU): {draw(RATE):.2f}, est. read BW (GB/s per GPU): {draw(RATE):.2f}, "
                f"est. write BW (GB/s per GPU): {draw(RATE):.2f}")
    want = {"kind": "decode", "rank": ranks, "running_req": run, "token": token, "token_usage": use,
            "accept_len": acc, "accept_rate": rate, "graph": float(graph), "gen_throughput": gen, "queue_req": queue,
            "prealloc_usage": pre[0] if pd else math.nan, "prealloc_req": pre[1] if pd else math.nan,
            "transfer_req": pre[2] if pd else math.nan, "retracted_req": pre[3] if pd else math.nan,
            "host_receive_req": host if pd else math.nan, "cap_len": cap, "block_accept_len": block, **extra}
    return head + msg, want


@settings(max_examples=150, deadline=None)
@given(st.one_of(prefill_line(), decode_line()))
def test_invariant_every_field_of_a_0523_batch_line_is_read_as_written(case):
    """Invariant: for any mix of 0.5.23's optional parts (iteration number, pool kinds, spec
    fields, PD counters, graph label, MFU and occupancy suffixes, logger prefix with ranks and
    milliseconds, an outer prefix), each field the line writes is read with its value, and a
    field it does not write is NaN."""
    line, want = case
    row = parse_line(line + "\n", 7)
    assert row is not None, line
    assert row["line"] == 7 and str(row["time"]).startswith("2026-03-02 08:01:00")
    for key, value in want.items():
        got = row.get(key, math.nan)
        if isinstance(value, float) and math.isnan(value):
            assert isinstance(got, float) and math.isnan(got), (key, got, line)
        else:
            assert got == pytest.approx(value), (key, got, line)


def test_a_line_without_ranks_or_milliseconds():
    """A single-GPU server without DP attention writes no rank (``scheduler.py`` adds `` TPn``
    only when tp_size > 1) and, without ``SGLANG_LOG_MS``, whole seconds."""
    row = parse_line("[2026-03-02 08:01:02] Decode batch, #running-req: 3, #token: 900, token usage: 0.01, "
                     "cuda graph: True, gen throughput (token/s): 120.00, #queue-req: 0\n", 1)
    assert row is not None and row["rank"] == "" and row["time"] == "2026-03-02 08:01:02"
    assert (row["running_req"], row["token"], row["graph"], row["gen_throughput"]) == (3, 900, 1.0, 120.0)


def test_a_last_line_cut_short_is_left_out_with_a_warning(tmp_path, capsys):
    """SGLang's logger ends every record with a newline, so a last line without one was cut
    (a log copied while the server wrote it, `head -c`, a disk filled): its last field reads
    short ('#token: 1' of 19920), and the whole fit was refused as a damaged line (more running
    requests than KV tokens). It is left out, named in a warning line; the same line whole is
    read."""
    from specsched.analysis.calibrate_bench import check_log_matches
    from specsched.analysis.server_log import parse_server_log
    from specsched.sim.server_args import ServerArgs

    from tests.conftest import ROOT

    whole = (ROOT / "tests" / "data" / "logs" / "sglang-0.5.23.log").read_text()
    cut = "[2026-03-02 08:01:03.600 TP0] Decode batch [260], #running-req: 16, #token: 1"
    p = tmp_path / "server.log"
    p.write_text(whole + cut)
    log = parse_server_log(p)
    n = whole.count("\n") + 1
    assert n not in log["line"].tolist() and len(log) == whole.count("batch [")
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {p}:{n}: left out: the last line is cut short")
    check_log_matches(log, str(p), ServerArgs())
    p.write_text(whole + cut + "9920, token usage: 0.05, cuda graph: True, gen throughput (token/s): 1066.67, "
                 "#queue-req: 0\n")
    assert n in parse_server_log(p)["line"].tolist() and capsys.readouterr().err == ""
