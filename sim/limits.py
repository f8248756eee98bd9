"""Size checks made before a run allocates anything (requests x per-request arrays).

A workload's memory grows with its request count: the request specs, the scheduler's
request objects, the per-request rows of the records and their summary arrays (about
:data:`BYTES_PER_REQUEST` each), and with its output tokens: the records keep every
inter-token latency, one (value, count) pair per delivery time a request has
(``sim.compact_records.ItlSamples``; a row per chunk in full records, which ``records="auto"``
keeps up to ``sim.engine.AUTO_COMPACT_TOKENS`` output tokens). Requests decoding together
share a pair a step, so a busy run keeps far less than a token's worth each; a request
decoding alone keeps one pair per token (:data:`BYTES_PER_OUTPUT_TOKEN`). Measured with
``python benchmarks/run_memory.py`` (peak RSS of ``specsched run`` on synthetic traces, the
8B roofline profile, no speculative decoding; slopes between two request counts), on the
2-core development machine:

=================================  ===========  ==============================================
trace (rate; output tokens)        requests     peak RSS; slope
=================================  ===========  ==============================================
100 req/s; 16                      3e5 / 1e6    508 / 1,329 MiB; 1,230 B a request
50 req/s; 32                       1e5 / 3e5    286 / 518 MiB; 1,218 B a request
8 req/s; 128 / 512                 1e4 / 4e4    2,232 / 2,091 B a request
8 req/s; 1K / 4K / 16K / 32K       2e3 / 8e3    6.0 / 10.9 / 11.5 / 19.7 KB a request (0.6-5.9 B a token)
0.002 req/s (one at a time); 16K   200 / 800    209 / 352 MiB; 15.2 B a token
0.001 req/s (one at a time); 32K   200 / 800    256 / 543 MiB; 15.3 B a token
0.002 req/s; 4K (full records)     100 / 200    321 / 435 MiB; 292 B a token
0.02 req/s; 128 / 256 (full)       1e3 / 2e3    601 / 271 B a token
=================================  ===========  ==============================================

So a typo such as ``num_requests: 100000000000`` is refused at once with the estimate instead
of failing inside numpy minutes later (the request count alone is the floor: a run needs at
least that), and a workload whose output tokens could take more than the machine's memory
when its requests decode one at a time (long-output traces: 8K-32K tokens a request) is
warned of before it runs (:func:`memory_estimate`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim.bundled import scenario_data_path
from specsched.sim.config import LengthDist, Scenario, scenario_file
from specsched.sim.errors import ConfigError
from specsched.sim.hardware import served_context_len
from specsched.sim.kv_ledger import KVLedger, last_top_up_target
from specsched.sim.prefill_adder import (
    CLIP_MAX_NEW_TOKENS,
    ceil_page,
    swa_never_admitted,
    swa_peak_tokens,
)
from specsched.sim.request import Req
from specsched.sim.scheduler_disagg import prealloc_need
from specsched.sim.server_args import swa_pool_tokens

if TYPE_CHECKING:
    from specsched.sim.hardware import Hardware

DEFAULT_MAX_REQUESTS = 2_000_000
"""Requests a run may have unless the user raises it (``--max-requests``)."""

BYTES_PER_REQUEST = 1536
"""Peak memory per request (bytes), besides its output tokens: 1,218 and 1,230 B measured
between 1e5 and 1e6 requests of 16-32 output tokens (module docstring; 2.1-2.2 KB at 128-512
tokens, the tokens' share included), rounded up."""

BYTES_PER_OUTPUT_TOKEN = 16
"""Peak memory per output token (bytes) at most: a request decoding alone keeps one ITL
pair (8-byte value, 4-byte count) per token; 15.2-15.3 B measured at 16K and 32K tokens a
request (module docstring). Requests decoding together keep 0.6-6 B a token."""

FULL_RECORD_BYTES_PER_TOKEN = 600
"""Peak memory per output token (bytes) at most while records are full (a chunk row per
delivery, a step and a timeseries row per forward; ``records="auto"`` keeps them up to
``sim.engine.AUTO_COMPACT_TOKENS`` output tokens): 271-601 B measured (module docstring)."""


def physical_memory_bytes() -> int | None:
    """The machine's physical memory (bytes), or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def memory_estimate(requests: int, output_tokens: int) -> tuple[int, int]:
    """The peak memory of a run (bytes): (floor, ceiling). The floor is the requests'
    (:data:`BYTES_PER_REQUEST` each), what any run of them needs; the ceiling adds the output
    tokens' records when every request decodes alone (:data:`BYTES_PER_OUTPUT_TOKEN` each, and
    :data:`FULL_RECORD_BYTES_PER_TOKEN` for those kept in full records). A run whose requests
    decode together needs little above the floor (module docstring).

    Args:
        requests: the run's requests.
        output_tokens: their output tokens in all.
    """
    from specsched.sim.engine import AUTO_COMPACT_TOKENS

    floor = requests * BYTES_PER_REQUEST
    full = min(output_tokens, AUTO_COMPACT_TOKENS) if output_tokens > 0 else 0
    return floor, floor + output_tokens * BYTES_PER_OUTPUT_TOKEN + full * FULL_RECORD_BYTES_PER_TOKEN


def _output_tokens(scenario: Scenario, n: int) -> int:
    """The output tokens of ``n`` requests of the scenario at most: a trace's own (the rows the
    run replays, read as it reads them), else ``n`` x the largest output length; 0 where the
    lengths are in a file read later (an agentic trace)."""
    w = scenario.workload
    if w.kind == "trace" and w.trace is not None:
        from specsched.sim.trace import load_trace

        return int(load_trace(w.trace, w.num_requests, scenario.path or None).output_len.sum())
    if w.output_len is None:
        return 0
    return n * _max_len(w.output_len, scenario.path, "workload.output_len")


def check_size(scenario: Scenario, max_requests: int | None = None, at_once: int = 1) -> list[str]:
    """Refuse a workload that is larger than ``max_requests`` or than this machine's memory;
    warn of one whose output tokens may take more than the machine's memory.

    Args:
        scenario: the resolved scenario.
        max_requests: the user's limit (None: :data:`DEFAULT_MAX_REQUESTS`).
        at_once: runs of it this machine holds at the same time (a sweep's worker processes):
            the warning's ceiling is theirs together (a sweep of two 15 GiB runs on a 23 GiB
            machine was not warned of).

    Returns:
        ``warning:`` lines for the caller to print (stderr): the workload's requests fit, but
        its output tokens, kept as each request's inter-token latencies, may need more memory
        than this machine has when its requests decode one at a time
        (:func:`memory_estimate`'s ceiling).

    Raises:
        ConfigError: naming ``workload.num_requests`` (or, for a multi_turn workload whose
            turn counts are drawn, ``workload.multi_turn.num_turns`` with num_conversations x
            its largest draw), its value, the memory estimate and the limit (or the machine's
            memory) it exceeds. A trace without ``num_requests`` is held to the limit by its
            rows (read as the run reads them, :func:`sim.trace.load_trace`).
    """
    limit = DEFAULT_MAX_REQUESTS if max_requests is None else max_requests
    if limit < 1:
        raise ConfigError("<command line>", "--max-requests", limit, "must be >= 1")
    n = scenario.workload.num_requests
    key = "workload.num_requests"
    mt = scenario.workload.multi_turn
    if n is None and mt is not None and mt.agentic_trace is None and isinstance(mt.num_turns, LengthDist):
        # turn counts drawn per conversation: at most num_conversations x the largest draw
        key = "workload.multi_turn.num_turns"
        n = mt.num_conversations * _max_len(mt.num_turns, scenario.path, key)
    file = scenario_file(scenario)
    shown: object = n if key == "workload.num_requests" else f"up to {n} requests"
    w = scenario.workload
    if n is None and w.kind == "trace" and w.trace is not None:
        # the file's rows, read as the run reads them (a large trace stays read for it; 32 B a row)
        from specsched.sim.trace import load_trace

        n = len(load_trace(w.trace, None, scenario.path or None))
        shown = f"<none: the trace's {n:,} rows>"
        if n > limit:
            raise ConfigError(file, key, "<none>", f"the trace {w.trace.path} has {n:,} rows, above the limit of "
                              f"{limit:,} requests: set workload.num_requests (the first N rows) or raise --max-requests")
    if n is None:   # an agentic trace without a limit: the file bounds its conversations
        return []
    need = n * BYTES_PER_REQUEST
    if n > limit:
        raise ConfigError(file, key, shown,
                          f"about {_gib(need)} of memory (~{BYTES_PER_REQUEST} B per request); above the "
                          f"limit of {limit:,} requests (raise it with --max-requests)")
    mem = physical_memory_bytes()
    if mem is not None and need > mem:
        raise ConfigError(file, key, shown,
                          f"about {_gib(need)} of memory (~{BYTES_PER_REQUEST} B per request); this machine "
                          f"has {_gib(mem)}")
    tokens = _output_tokens(scenario, n)
    high = memory_estimate(n, tokens)[1]
    runs = max(1, at_once)
    if mem is not None and high * runs > mem:
        together = f", {_gib(high * runs)} for the {runs} runs at once (--workers)" if runs > 1 else ""
        return [f"warning: {file}: {key} = {shown} with {tokens:,} output tokens may need up to {_gib(high)} of memory "
                f"a run{together} (~{BYTES_PER_REQUEST} B a request + ~{BYTES_PER_OUTPUT_TOKEN} B an output token when "
                f"requests decode one at a time: each token's inter-token latency is kept; far less when many decode "
                f"together); this machine has {_gib(mem)}"]
    return []


def _max_len(dist: LengthDist, base: str | None, key: str) -> int:
    if dist.kind == "file":
        from specsched.sim.workload import histogram_lengths

        return int(histogram_lengths(dist.path, Path(base) if base else None, key).max())
    return int(dist.value)


def check_fits(scenario: Scenario) -> None:
    """Refuse, before simulating, a request that can never fit the KV pool, naming the field
    that makes it too large (the scheduler's own check, :meth:`Scheduler.add_request`, would
    only say so when the request arrives); a request longer than the model's context; a
    profile whose weights leave no KV pool (both from the profile's ``hardware`` block,
    where it has one).

    Raises:
        ConfigError: naming ``workload.input_len`` or ``workload.output_len`` (their largest
            possible value) and what the pool or the context holds, or the profile's
            ``hardware.weight_bytes``.
    """
    from specsched.sim.defaults import scenario_hardware

    srv, w = scenario.server, scenario.workload
    hw = scenario_hardware(scenario)   # the profile's hardware block, read once for both checks
    _check_hardware(scenario, hw)
    _check_dp_divides_tp(scenario)
    if w.kind in ("trace", "multi_turn"):
        # lengths are in the file / grow with each turn: every row and turn is checked here,
        # against the context and the pools, before the first simulated event
        _context(scenario, hw)
        if w.kind == "trace" and w.trace is not None:
            check_trace_rows(scenario, hw)
        elif w.kind == "multi_turn":
            from specsched.sim.prefix_workload import warnings_unsaid
            from specsched.sim.workload import make_requests

            with warnings_unsaid():   # the run says them, once
                specs = make_requests(w, scenario.seed, scenario.path or None)
            served_requests(scenario, specs, hw)   # the turns as the server cuts them
        return
    file = scenario_file(scenario)
    i, o = _largest_request(scenario)
    # its output as SGLang cuts it (served_requests runs the cut); as asked where the cut leaves none
    o_served = int(trace_output_cut(scenario, np.array([i]), np.array([o]), hw)[0])
    try:
        if srv.disaggregation is None:
            _check_pool(file, srv, "server", i, o_served, w.ignore_eos)
        else:
            # each role's servers hold their own pool: a prefill server's copy of a request asks
            # for its first token only (PrefillBootstrapQueue._process_req), a decode server's
            # holds the whole context and is preallocated first
            _check_pool(file, srv.role_server("prefill"), "server.disaggregation.prefill.server", i, 1, w.ignore_eos)
            decode = srv.role_server("decode")
            _check_pool(file, decode, "server.disaggregation.decode.server", i, o_served, w.ignore_eos)
            _check_decode_prealloc(file, decode, i, o_served)
    except ConfigError as e:
        if e.key != "workload.output_len" or o_served == o:
            raise
        # name the output the scenario asks for; the check was of SGLang's cut of it
        raise ConfigError(e.file, e.key, o, f"SGLang cuts it to {o_served} (scheduler.py init_req_max_new_tokens), "
                          f"and {e.allowed}") from None
    _check_context(scenario, hw, i, o)   # the tokenizer rejects prompt + max_new_tokens past it: no cut


def check_pool(scenario: Scenario) -> None:
    """The KV-pool part of :func:`check_fits` alone, for one server (no disaggregation): a
    generated workload's largest request that the pool can never hold is refused, and a
    trace's rows as :func:`check_trace_rows` refuses them (their outputs cut as the run cuts
    them, with the context length of the scenario's profile where it has one, as
    ``specsched run`` reads it); a conversation's turns are checked when the run builds them
    (:func:`served_requests`). The runtime calls it before building the model
    (runtime/engine.py ``check_runnable``): the rest of :func:`check_fits` reads the profile's
    hardware for weights and memory, which the device measured there does not have.

    Raises:
        ConfigError: as :func:`check_fits` for the pool.
    """
    w = scenario.workload
    if w.kind == "trace" and w.trace is not None:
        from specsched.sim.defaults import scenario_hardware

        check_trace_rows(scenario, scenario_hardware(scenario))
        return
    if w.kind in ("trace", "multi_turn"):
        return
    from specsched.sim.defaults import scenario_hardware

    i, o = _largest_request(scenario)
    # the output as SGLang cuts it (served_requests), as check_fits checks it
    o = int(trace_output_cut(scenario, np.array([i]), np.array([o]), scenario_hardware(scenario))[0])
    _check_pool(scenario_file(scenario), scenario.server, "server", i, o, w.ignore_eos)


def _servers(srv) -> list[tuple[str, object, bool]]:
    """The servers whose pools a request must fit, as (scenario key, server arguments, whether
    it holds the request's output): the one server, or a disaggregated deployment's prefill
    server (its copy of a request asks for the first token only,
    ``PrefillBootstrapQueue._process_req``) and its decode server (the whole context), as
    :func:`check_fits` checks a generated workload."""
    if srv.disaggregation is None:
        return [("server", srv, True)]
    return [("server.disaggregation.prefill.server", srv.role_server("prefill"), False),
            ("server.disaggregation.decode.server", srv.role_server("decode"), True)]


def never_fit_rows(srv, ins: np.ndarray, outs: np.ndarray, ignore_eos: bool = True,
                   decode: bool = False) -> np.ndarray:
    """Which requests (prompt ``ins``, output ``outs``, token arrays) a server with
    arguments ``srv`` can never run, vectorized over the rows: exactly those
    :func:`_check_pool` refuses (and, with ``decode``, :func:`_check_decode_prealloc`), which
    are those the scheduler refuses when they arrive or finds stuck alone:
    :meth:`Scheduler.add_request` (page-rounded prompt + output clipped at
    CLIP_MAX_NEW_TOKENS + a page, and the window rule's in-flight verify slots
    (:func:`inflight_slots`), reach the pool; or the top-up rule's last top-up passes it,
    :func:`_top_up_past_pool`, or its first top-up passes the SWA pool,
    :func:`_swa_top_up_past_pool`),
    a prompt of ``pool - 6`` tokens or more (SGLang aborts it: :data:`INPUT_MARGIN`),
    ``_refuse_never_swa_admitted`` (sglang 0.5.23 mem_cache/prefill_budget.py
    ``SWAPrefillBudget.check_prefill`` never admits it), ``DecodeMemory._retract`` (prompt +
    output outgrow the pool by the last token) and ``Disagg._refuse_unpreallocatable``.

    Returns:
        A bool array, True for a row that can never run.
    """
    page, cap = srv.page_size, srv.max_total_num_tokens
    ahead = inflight_slots(srv)
    paged = -(-ins // page) * page
    new = np.minimum(outs, CLIP_MAX_NEW_TOKENS)
    bad = ((paged + page + ahead + new >= cap) | (ins + outs > cap) | (ins > longest_pool_prompt(srv))
           | _top_up_past_pool(srv, ins, outs) | _swa_top_up_past_pool(srv, ins, outs))
    if _ignore_eos_admits(srv, ignore_eos):
        bad |= _ignore_eos_never_admitted(srv, paged, outs)
    if decode:
        bad |= np.maximum(paged + srv.num_reserved_decode_tokens, ins + new) > cap   # prealloc_need
    if srv.swa_max_total_num_tokens:
        # SGLang's SWA admission rule is scalar: once per distinct (prompt, clipped output) of
        # the rows whose SWA peak can reach the pool (swa_peak_tokens is at most the larger of
        # the tokens allocated and the window, plus a page)
        eos_path = ignore_eos and srv.disable_radix_cache
        c = srv.chunked_prefill_size
        chunk = None if c <= 0 else c // srv.dp_size
        extend = ins if eos_path else paged
        allocated = extend if chunk is None else np.minimum(extend, chunk)
        left = np.flatnonzero(~bad & (np.maximum(allocated, srv.sliding_window_size) + page >= srv.swa_max_total_num_tokens))
        if len(left):
            pairs, inverse = np.unique(np.stack([ins[left], new[left]], axis=1), axis=0, return_inverse=True)
            never = np.array([swa_never_admitted(int(i) if eos_path else ceil_page(int(i), page), int(o), chunk,
                                                 srv.sliding_window_size, page, srv.swa_max_total_num_tokens,
                                                 ignore_eos_path=eos_path) for i, o in pairs], dtype=bool)
            bad[left] |= never[inverse.reshape(-1)]
        # a chunked prompt parked for want of SWA (lone_chunk_parked) holds at least the free
        # SWA less a page when it parks, and at most its prompt
        left = np.flatnonzero(~bad & (ins + page >= srv.swa_max_total_num_tokens) & (ins >= 1))
        if len(left) and srv.disable_radix_cache and srv.chunked_prefill_size > 0:
            pairs, inverse = np.unique(np.stack([ins[left], new[left]], axis=1), axis=0, return_inverse=True)
            parked = np.array([lone_chunk_parked(srv, int(i), int(o), ignore_eos=ignore_eos) is not None
                               for i, o in pairs], dtype=bool)
            bad[left] |= parked[inverse.reshape(-1)]
    return bad


def _ignore_eos_admits(srv, ignore_eos: bool) -> bool:
    """Whether a server with arguments ``srv`` admits a request sent with ``ignore_eos`` through
    ``add_one_req_ignore_eos`` with its projection: the prefix cache off (sglang 0.5.23
    ``add_one_req``), not a hybrid-SWA model (it skips the projection), not a disaggregated
    decode server (it preallocates instead: disaggregation/decode.py ``DecodePreallocQueue``)."""
    return (ignore_eos and srv.disable_radix_cache and not srv.swa_max_total_num_tokens
            and srv.disaggregation_mode != "decode")


def _ignore_eos_never_admitted(srv, paged: Any, outs: Any) -> Any:
    """Whether an ignore_eos request with the prefix cache off (page-rounded prompt ``paged``,
    output ``outs``; scalars or arrays) is never admitted, alone on an empty server, by
    sglang 0.5.23 schedule_policy.py ``PrefillAdder.add_one_req_ignore_eos``
    (:meth:`sim.prefill_adder.PrefillAdder.add_one_req_ignore_eos`): its projection keeps
    ``IGNORE_EOS_RESERVE_TOKENS`` free beyond the prompt, a page and the whole output, so the
    pool must exceed ``paged + page + output + 1``. SGLang's own cut of max_new_tokens
    (:func:`output_cut`: ``pool - paged - page - 1``) leaves exactly one token short of that:
    such a request waits for ever (a hybrid-SWA model skips the projection)."""
    from specsched.sim.prefill_adder import IGNORE_EOS_RESERVE_TOKENS

    return paged + srv.page_size + outs + IGNORE_EOS_RESERVE_TOKENS >= srv.max_total_num_tokens


def _first_refusal(srv, where: str, i: int, o: int, ignore_eos: bool, decode: bool) -> ConfigError:
    """The refusal :func:`_check_pool` (or :func:`_check_decode_prealloc`) gives a request
    that :func:`never_fit_rows` marks."""
    try:
        _check_pool("", srv, where, i, o, ignore_eos)
        if decode:
            _check_decode_prealloc("", srv, i, o)
    except ConfigError as e:
        return e
    raise AssertionError(f"never_fit_rows marks a request of {i} + {o} tokens that {where} holds")


_CUT_NOT_ENOUGH = ("; SGLang cuts the output to what the empty pool holds (scheduler.py init_req_max_new_tokens), "
                   "which still leaves no room here")


def output_cut(srv, ins: np.ndarray, outs: np.ndarray, ctx: int | None = None) -> np.ndarray:
    """The output length SGLang 0.5.23 gives each request (prompt ``ins``, asked output
    ``outs``, token arrays): its ``max_new_tokens`` after managers/scheduler.py
    ``init_req_max_new_tokens``, which every request passes when it reaches the scheduler.
    It is cut, with no error and no warning, to

    * ``max_req_len - input_len - 1``, where ``max_req_len = min(context_len - 1, pool - 1)``
      (managers/tp_worker.py, the worker's info), and
    * what the empty pool holds: ``pool - page_ceil(input_len) - page_size - 1``
      (mem_cache/allocator/base.py ``BaseTokenToKVPoolAllocator.max_new_tokens_for_memory``,
      with the scheduler's token capacity ``max_total_num_tokens``),

    and never below 0. The request then ends at that length with finish reason ``length``
    (managers/schedule_batch.py ``Req.check_finished``: ``FINISH_LENGTH``), ignore_eos or
    not; bench_serving counts the tokens it got. Only the prompt is refused (tokenizer_manager.py
    ``_validate_one_request``, managers/utils.py ``validate_input_length``), and a prompt +
    output past the context length already at the tokenizer (:func:`trace_aborts`).

    A hybrid sliding-window model's pools (a full and an SWA part, SGLang's
    SWATokenToKVPoolAllocator, mem_cache/allocator/swa.py) cut by the same rule: the
    allocator inherits ``max_new_tokens_for_memory`` from the base, given the full pool's
    capacity (``max_total_num_tokens``); only the one byte buffer of ``--enable-unified-memory``
    (unified_hybrid_swa.py ``UnifiedSWATokenToKVPoolAllocator``, off by default, not modelled)
    searches its admission rule instead. A cut output the SWA budget still never admits is
    refused by :func:`never_fit_rows`.

    Args:
        srv: the server arguments (``ServerArgs``).
        ins: prompts (tokens).
        outs: asked outputs (tokens).
        ctx: the context length the server runs with (None: not known, the pool alone).

    Returns:
        The outputs SGLang runs (int64 array, ``<= outs``).
    """
    ins, outs = np.asarray(ins, dtype=np.int64), np.asarray(outs, dtype=np.int64)
    page, cap = srv.page_size, srv.max_total_num_tokens
    max_req_len = cap - 1 if ctx is None else min(ctx - 1, cap - 1)
    paged = -(-ins // page) * page
    new = np.minimum(outs, np.minimum(max_req_len - ins - 1, cap - paged - page - 1))
    return np.maximum(new, 0)


def cutting_server(server) -> tuple[Any, str]:
    """The server whose pool cuts a request's output, and the scenario key of that pool: the
    one server, or under disaggregation a decode server (every server cuts a request when it
    reaches its scheduler, ``handle_generate_request`` -> ``init_req_max_new_tokens``, and the
    prefill server's copy asks for its first token only, disaggregation/prefill.py
    ``_process_req``)."""
    if server.disaggregation is None:
        return server, "server.max_total_num_tokens"
    return server.role_server("decode"), "server.disaggregation.decode.server.max_total_num_tokens"


def trace_output_cut(scenario: Scenario, ins: np.ndarray, outs: np.ndarray, hw: Hardware | None) -> np.ndarray:
    """A trace's outputs as the simulated server runs them: SGLang's cut (:func:`output_cut`)
    and nothing more. Every cut output passes the simulated admission, as SGLang's
    (scheduler.py ``init_req_max_new_tokens`` keeps the cut within ``PrefillAdder``'s budget).
    A disaggregated deployment's outputs are cut by its decode servers' pool
    (:func:`cutting_server`). A cut that
    leaves no output token is not applied (the row is refused by :func:`never_fit_rows`); a
    cut output whose last speculative top-up still passes the pool is refused there too
    (:func:`_top_up_past_pool`: SGLang aborts such a request near its end), and so is one a
    hybrid sliding-window model's SWA budget never admits (SGLang keeps it waiting)."""
    outs = np.asarray(outs, dtype=np.int64)
    srv, _ = cutting_server(scenario.server)
    cut = output_cut(srv, ins, outs, context_length(scenario, hw)[0])
    return np.where(cut >= 1, cut, outs)


def served_requests(scenario: Scenario, specs: list, hw: Hardware | None,
                    seed: int | None = None) -> tuple[list, list[tuple[int, int, int]]]:
    """The requests as the server runs them, for every engine that replays ``scenario``
    (sim/engine.py ``SimEngine``, runtime/engine.py ``RuntimeEngine``: both must run the same
    requests, or predicted and measured are not the same run):

    * a ``multi_turn`` workload's turns are cut as SGLang cuts any request, each later turn
      resending the shorter answer (:func:`_cut_turns`), then checked against the context
      length and the pool before the first event (:func:`check_turn_context`,
      :func:`check_turn_rows`);
    * a ``trace`` row's output, and a generated workload's request's, is cut as SGLang 0.5.23
      cuts ``max_new_tokens`` when the request reaches the scheduler (:func:`trace_output_cut`:
      scheduler.py ``init_req_max_new_tokens``): a request whose prompt fits the pool but whose
      output does not runs with the output the empty pool holds, finishing on length;
    * a ``trace`` row the server rejects (a prompt past the context or the pool's
      ``max_req_input_len``: :func:`trace_aborts`) carries SGLang's error text in its
      ``abort`` and runs as the scheduler's abort (:func:`sim.workload.scheduler_request`).

    Args:
        scenario: the resolved scenario.
        specs: its requests (``sim.workload.make_requests``).
        hw: the profile's hardware (its context length), or None.
        seed: the run's seed, for the messages.

    Returns:
        (the requests to run, one (request index, asked, run) triple per cut output).

    Raises:
        ConfigError: a turn past the context or the pool.
    """
    from dataclasses import replace

    w = scenario.workload
    cuts: list[tuple[int, int, int]] = []
    if w.kind == "multi_turn":
        specs, cuts = _cut_turns(scenario, specs, hw, seed)
        check_turn_context(scenario, specs, hw, seed, asked={i: a for i, a, _ in cuts})
        check_turn_rows(scenario, specs, seed)
        return specs, cuts
    if w.kind != "trace":
        # a generated workload's outputs are cut the same way: none when its largest request
        # needs no cut (the cut only shrinks as the prompt grows); its prompts past the limits
        # are refused before the run (check_fits), so none is aborted or truncated
        i, o = _largest_request(scenario)
        if int(trace_output_cut(scenario, np.array([i]), np.array([o]), hw)[0]) == o:
            return specs, cuts
    ins, outs = _spec_lengths(specs)
    if w.kind == "trace":
        aborts = trace_aborts(scenario, ins, outs, hw)
        kept, cut = _served_rows(scenario, ins, outs, hw)
    else:
        aborts, kept, cut = [], ins, trace_output_cut(scenario, ins, outs, hw)
    specs = list(specs)
    for k, text in enumerate(aborts):
        if text is not None:
            specs[k] = replace(specs[k], abort=text)
    for k in np.flatnonzero(kept < ins).tolist():
        specs[k] = replace(specs[k], truncated_input=int(kept[k]))
    for k in np.flatnonzero(cut < outs).tolist():
        s = specs[k]
        if s.abort is None:
            cuts.append((s.index, s.output_len, int(cut[k])))
            specs[k] = replace(s, output_len=int(cut[k]))
    return specs, cuts


def _served_rows(scenario: Scenario, ins: np.ndarray, outs: np.ndarray,
                 hw: Hardware | None) -> tuple[np.ndarray, np.ndarray]:
    """A trace's prompts and outputs as its server runs them: truncated under
    ``server.allow_auto_truncate`` on a co-located server (:func:`auto_truncated`), else the
    prompts as sent with SGLang's output cut (:func:`trace_output_cut`)."""
    if scenario.server.allow_auto_truncate and scenario.server.disaggregation is None:
        return auto_truncated(scenario, ins, outs, hw)
    return ins, trace_output_cut(scenario, ins, outs, hw)


def auto_truncated(scenario: Scenario, ins: np.ndarray, outs: np.ndarray,
                   hw: Hardware | None) -> tuple[np.ndarray, np.ndarray]:
    """The prompts and outputs (tokens, int64 arrays) a co-located server run with
    ``--allow-auto-truncate`` (``server.allow_auto_truncate``) runs of a trace's rows, where
    :func:`trace_aborts` would reject them, in the order SGLang 0.5.23 applies its steps:

    1. the tokenizer (managers/tokenizer_manager.py ``_validate_one_request``): a prompt of
       ``context_len`` tokens or more is cut to ``context_len`` tokens, then a
       ``max_new_tokens`` that passes the context with it to ``max(0, context_len - prompt)``;
    2. the scheduler's ``handle_generate_request`` cuts ``max_new_tokens``
       (``init_req_max_new_tokens``, :func:`output_cut`) on that prompt, *before*
    3. ``validate_input_length`` (managers/utils.py) cuts a prompt of ``max_req_input_len``
       tokens or more to ``max_req_input_len``: a prompt cut there keeps the output its
       longer length left (0 for most).

    A ``max_new_tokens`` of 0 still makes the one token of the prefill (schedule_batch.py
    ``Req.check_finished`` ends it on length after it), so the output is at least 1. Rows
    under the limits are as :func:`trace_output_cut` runs them."""
    ins, outs = np.asarray(ins, dtype=np.int64), np.asarray(outs, dtype=np.int64)
    ctx, _ = context_length(scenario, hw)
    cap = scenario.server.max_total_num_tokens
    if ctx is not None:
        ins = np.minimum(ins, ctx)
        outs = np.where(ins + outs > ctx, np.maximum(ctx - ins, 0), outs)
    served = np.maximum(output_cut(scenario.server, ins, outs, ctx), 1)
    return np.minimum(ins, max_req_input_len(cap, ctx)), served


def trace_aborts(scenario: Scenario, ins: np.ndarray, outs: np.ndarray, hw: Hardware | None) -> list[str | None]:
    """Which of a trace's rows (prompts ``ins``, asked outputs ``outs``) the server rejects,
    with the error text SGLang 0.5.23 returns (None for a row it serves), in the order its
    checks run (:func:`server_rejections`, one server):

    1. the tokenizer (managers/tokenizer_manager.py ``_validate_one_request``, without
       ``--allow-auto-truncate``): a prompt of ``context_len`` tokens or more, then a prompt
       plus ``max_new_tokens`` past ``context_len``, raise a ValueError: HTTP 400;
    2. the scheduler (managers/scheduler.py ``handle_generate_request`` ->
       managers/utils.py ``validate_input_length``): a prompt of ``max_req_input_len`` tokens
       or more (``min(context_len - 1, pool - 1) - 5``, managers/tp_worker.py; the pool's
       part is the one a trace replay meets, a production trace's long rows on a small
       pool) is aborted: :func:`sim.workload.scheduler_request` says how it runs.

    bench_serving counts both as failed requests (``success`` False, the text in
    ``errors``): the run's results leave them out as bench_serving's metrics do. On a
    co-located server both run as the scheduler's abort (a one-token prefill); the
    tokenizer's rejection does not reach the scheduler, which moves the run by one extend
    token per rejected row. Under ``server.allow_auto_truncate`` no row is rejected:
    :func:`auto_truncated` says what the server keeps.

    A disaggregated deployment's router sends each request to a prefill and a decode server at
    once; each runs both checks with its own arguments (its pool's ``max_req_input_len``). A row
    both reject fails: neither server runs anything for it, as a scheduler in either mode
    retires an aborted request at its disaggregation queue's door (disaggregation/prefill.py
    ``PrefillBootstrapQueue.add``, decode.py ``DecodePreallocQueue.add``: ``is_unadmitted_reject``
    -> managers/scheduler.py ``retire_unadmitted_request``, no forward), and the client gets the
    decode server's error (the one it streams from; both are HTTP 400). A row only one server
    rejects is not returned here: :func:`one_server_rejections` names it and
    :func:`check_trace_rows` refuses it.
    """
    n = len(ins)
    if n == 0:
        return []
    srv = scenario.server
    if srv.disaggregation is None:
        return server_rejections(srv, context_length(scenario, hw)[0], ins, outs)
    prefill, decode = (_role_rejections(scenario, role, ins, outs, hw) for role in ("prefill", "decode"))
    return [d if p is not None else None for p, d in zip(prefill, decode, strict=True)]


def _role_rejections(scenario: Scenario, role: str, ins: np.ndarray, outs: np.ndarray,
                     hw: Hardware | None) -> list[str | None]:
    """:func:`server_rejections` for a disaggregated deployment's ``role`` server."""
    srv = scenario.server.role_server(role)
    return server_rejections(srv, served_context_len(srv.context_length, hw), ins, outs)


def one_server_rejections(scenario: Scenario, ins: np.ndarray, outs: np.ndarray,
                          hw: Hardware | None) -> list[tuple[int, str, str]]:
    """The rows of a disaggregated deployment's trace that one of the two servers a request
    goes to rejects and the other does not (their pools' ``max_req_input_len`` or their
    context lengths differ, or only the other truncates: ``allow_auto_truncate``), as (row,
    the rejecting role, its error text); empty for a co-located server. SGLang 0.5.23 then
    leaves the other server's copy waiting for its
    peer: a decode server holds the request's preallocated KV until its transfer times out
    (disaggregation/common/conn.py ``_check_waiting_timeout``,
    ``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``), a prefill server's copy waits in its bootstrap
    queue for a decode server that never connects. Neither is modelled."""
    if scenario.server.disaggregation is None or len(ins) == 0:
        return []
    prefill, decode = (_role_rejections(scenario, role, ins, outs, hw) for role in ("prefill", "decode"))
    return [(k, "prefill" if p is not None else "decode", p if p is not None else d)
            for k, (p, d) in enumerate(zip(prefill, decode, strict=True)) if (p is None) != (d is None)]


EMPTY_PROMPT = "input_ids cannot be empty."
"""SGLang 0.5.23's error for a request whose prompt has no tokens (a trace row with 0 prompt
tokens: public traces log failed requests so): managers/io_struct.py
``GenerateReqInput._determine_batch_size``, run by ``normalize_batch_and_arguments`` at the
top of tokenizer_manager.py ``generate_request``, raises it as a ValueError that
entrypoints/http_server.py ``generate_request`` returns as the request's error, whatever
``--allow-auto-truncate`` says: the request never reaches the scheduler."""


def server_rejections(srv, ctx: int | None, ins: np.ndarray, outs: np.ndarray) -> list[str | None]:
    """One SGLang 0.5.23 server's rejections of requests (prompts ``ins``, asked outputs
    ``outs``, token arrays), the error text it returns or None, for a server with arguments
    ``srv`` and context length ``ctx`` (None: not known), in the order of its checks
    (:func:`trace_aborts`): an empty prompt's (:data:`EMPTY_PROMPT`, checked before the
    others), the tokenizer's (tokenizer_manager.py ``_validate_one_request``), then the
    scheduler's (managers/utils.py ``validate_input_length`` against
    :func:`max_req_input_len` of its pool). Under ``allow_auto_truncate`` only the empty
    prompts are rejected (the server truncates the others instead)."""
    n = len(ins)
    empty = [EMPTY_PROMPT if k == 0 else None for k in np.asarray(ins).tolist()]
    if srv.allow_auto_truncate or n == 0:
        return empty
    limit = max_req_input_len(srv.max_total_num_tokens, ctx)
    over_ctx = np.zeros(n, bool) if ctx is None else ins >= ctx
    total_ctx = np.zeros(n, bool) if ctx is None else ins + outs > ctx
    long_in = ins >= limit
    out: list[str | None] = empty
    for k in np.flatnonzero((over_ctx | total_ctx | long_in) & (ins > 0)).tolist():
        i, o = int(ins[k]), int(outs[k])
        if over_ctx[k]:
            out[k] = f"The input ({i} tokens) is longer than the model's context length ({ctx} tokens)."
        elif total_ctx[k]:
            out[k] = (f"Requested token count exceeds the model's maximum context length of {ctx} tokens. "
                      f"You requested a total of {i + o} tokens: {i} tokens from the input messages and {o} tokens "
                      "for the completion.")
        else:
            out[k] = (f"Input length ({i} tokens) exceeds the maximum allowed length ({limit} tokens). "
                      "Use a shorter input or enable --allow-auto-truncate.")
    return out


def _cut_turns(scenario: Scenario, specs: list, hw: Hardware | None,
               seed: int | None) -> tuple[list, list[tuple[int, int, int]]]:
    """A ``multi_turn`` workload's turns as the server runs them: each turn's output cut as
    SGLang cuts any request's (:func:`output_cut`, by the decode servers' pool under
    disaggregation, as :func:`trace_output_cut`), and every later turn of its conversation
    resending the shorter answer (bench_serving ``wrap_multi_turn_request_func`` appends the
    server's reply to the history), so its prompt is shorter by the tokens cut before it and
    its own cut is taken on that prompt. The turns are rebuilt from the served output lengths
    (:func:`sim.prefix_workload.multi_turn_conversations`, same plan and token streams), the
    request's priority kept. A cut that leaves no token is not applied (the turn is refused).

    Returns:
        (the turns to run, one (request index, asked, run) triple per cut output).
    """
    from dataclasses import replace

    if not specs:
        return specs, []
    srv, _ = cutting_server(scenario.server)
    ctx = context_length(scenario, hw)[0]
    ins, outs = _spec_lengths(specs)
    if not (output_cut(srv, ins, outs, ctx) < outs).any():
        return specs, []   # nothing cut: no later prompt changes either
    served = outs.copy()
    shorter = 0   # tokens cut from the conversation's earlier answers
    for k, s in enumerate(specs):   # conversation-major: each conversation's turns in order
        if s.turn == 0:
            shorter = 0
        cut = int(output_cut(srv, ins[k:k + 1] - shorter, outs[k:k + 1], ctx)[0])
        if cut >= 1:
            served[k] = cut
        shorter += int(outs[k] - served[k])
    from specsched.sim.prefix_workload import conversation_plan, multi_turn_conversations

    w = scenario.workload
    run_seed = scenario.seed if seed is None else seed
    base = Path(scenario.path) if scenario.path else None
    plan = conversation_plan(w.multi_turn, run_seed, base)
    rebuilt = [t for conv in multi_turn_conversations(w.multi_turn, served, run_seed, base, plan) for t in conv]
    out = [replace(s, input_len=r.input_len, output_len=r.output_len, tokens=r.tokens)
           for s, r in zip(specs, rebuilt, strict=True)]
    cuts = [(s.index, int(outs[k]), int(served[k])) for k, s in enumerate(specs) if served[k] < outs[k]]
    return out, cuts


def _spec_lengths(specs: list) -> tuple[np.ndarray, np.ndarray]:
    """The prompts and outputs (tokens, int64 arrays) of a run's requests."""
    ins = np.fromiter((s.input_len for s in specs), dtype=np.int64, count=len(specs))
    outs = np.fromiter((s.output_len for s in specs), dtype=np.int64, count=len(specs))
    return ins, outs


def _first_never_fit(scenario: Scenario, ins: np.ndarray, outs: np.ndarray) -> tuple[int, ConfigError, int] | None:
    """The first request (prompt ``ins``, output ``outs``) that a server of the scenario's
    deployment (:func:`_servers`) can never run (:func:`never_fit_rows`), as (its row, the
    refusal :func:`_check_pool` gives it, how many more rows that server refuses), or None;
    for :func:`check_trace_rows` and :func:`check_turn_rows` to name in their own words."""
    w = scenario.workload
    for where, srv, holds_output in _servers(scenario.server):
        o_srv = outs if holds_output else np.ones_like(outs)
        decode = holds_output and srv.disaggregation_mode == "decode"
        bad = never_fit_rows(srv, ins, o_srv, w.ignore_eos, decode)
        if bad.any():
            k = int(np.argmax(bad))
            e = _first_refusal(srv, where, int(ins[k]), int(o_srv[k]), w.ignore_eos, decode)
            return k, e, int(np.count_nonzero(bad)) - 1
    return None


def truncation_summary(scenario: Scenario, specs: list) -> dict[str, int]:
    """``requests_truncated``: how many prompts the server truncated (``server.allow_auto_truncate``,
    :func:`auto_truncated`); empty when none was."""
    if not scenario.server.allow_auto_truncate:
        return {}
    n = sum(1 for s in specs if getattr(s, "truncated_input", None) is not None)
    return {"requests_truncated": n} if n else {}


def output_cut_summary(cuts: list[tuple[int, int, int]]) -> dict[str, int]:
    """The summary keys of the outputs :func:`served_requests` cut: ``requests_output_clamped``
    (how many) and ``output_clamp_max_tokens`` (the largest cut, tokens); empty when none was."""
    if not cuts:
        return {}
    return {"requests_output_clamped": len(cuts), "output_clamp_max_tokens": max(a - b for _, a, b in cuts)}


def check_trace_rows(scenario: Scenario, hw: Hardware | None = None) -> None:
    """Refuse, before the first simulated event, a trace whose row (of the ``num_requests``
    replayed) the server can never run (:func:`never_fit_rows`), naming the trace file, the
    row's line, its column and value, the pool and how many rows are like it. One vectorized
    pass over the length columns of the trace the run replays (:func:`sim.trace.load_trace`
    keeps it; nothing is read twice).

    SGLang 0.5.23 does not wait on such a request: a prompt of ``max_req_input_len`` tokens or
    more (``min(context_len, pool) - 1 - 5``, tp_worker.py ``get_worker_info``) is aborted
    with an error (managers/utils.py ``validate_input_length``, from scheduler.py
    ``handle_generate_request``; truncated instead under ``--allow-auto-truncate``), and a
    longer output is cut to what the empty pool holds (scheduler.py
    ``init_req_max_new_tokens``, allocator ``max_new_tokens_for_memory``). A co-located
    server's aborted rows, and a disaggregated deployment's rows both its servers reject, run as
    SGLang runs them (:func:`trace_aborts`) and are not checked here; a row only one of a
    deployment's two servers rejects is refused (:func:`one_server_rejections`: SGLang's
    other server waits on it until a timeout, not modelled). A cut output is modelled
    (:func:`trace_output_cut`, as the run cuts it): a row is refused only if it does not fit
    even cut.

    Raises:
        ConfigError: ``<trace>:<line>: <column> = <value>: request k (of n such rows): ...``.
    """
    from specsched.sim.trace import load_trace

    w = scenario.workload
    tr = load_trace(w.trace, w.num_requests, scenario.path or None)
    columns, _ = w.trace.resolved()
    path = scenario_data_path(w.trace.path, scenario.path or None)
    halves = one_server_rejections(scenario, tr.input_len, tr.output_len, hw)
    if halves:
        k, role, text = halves[0]
        other = "decode" if role == "prefill" else "prefill"
        i = int(tr.input_len[k])
        line = f"{path}:{int(tr.lines[k])}" if tr.lines is not None else str(path)
        keys = [key for key in ("max_total_num_tokens", "context_length", "allow_auto_truncate")
                if getattr(scenario.server.role_server("prefill"), key) != getattr(scenario.server.role_server("decode"), key)]
        differ = " and ".join(keys) or "max_total_num_tokens or context_length"
        raise ConfigError(line, columns.input_len, i,
                          f"request {k + 1} ({columns.input_len} {i}, {columns.output_len} {int(tr.output_len[k])}"
                          f"{f'; {len(halves) - 1} more rows like it' if len(halves) > 1 else ''}): the {role} server "
                          f"rejects it ({text!r}) but the {other} server does not (server.disaggregation.{role}.server "
                          f"and server.disaggregation.{other}.server differ in {differ}); "
                          f"SGLang's {other} server then waits on the request until a disaggregation timeout "
                          f"(disaggregation/common/conn.py), which is not simulated; give both roles the same {differ}, "
                          "or drop or shorten those rows")
    served = np.flatnonzero([a is None for a in trace_aborts(scenario, tr.input_len, tr.output_len, hw)])
    found = _first_never_fit(scenario, *_served_rows(scenario, tr.input_len[served], tr.output_len[served], hw))
    if found is None:
        return
    k, e, others = found
    k = int(served[k])
    i, o = int(tr.input_len[k]), int(tr.output_len[k])
    key = columns.input_len if e.key == "workload.input_len" else columns.output_len
    line = f"{path}:{int(tr.lines[k])}" if tr.lines is not None else str(path)
    raise ConfigError(line, key, i if key == columns.input_len else o,
                      f"request {k + 1} ({columns.input_len} {i}, {columns.output_len} {o}"
                      f"{f'; {others} more rows like it' if others else ''}): {e.allowed}"
                      f"{_CUT_NOT_ENOUGH if key == columns.output_len else ''}; drop or shorten those rows")


def check_turn_rows(scenario: Scenario, specs: list, seed: int | None = None) -> None:
    """Refuse, before the first simulated event, a multi-turn workload whose turn (its prompt
    resending the conversation so far, as SGLang receives it) the server can never run
    (:func:`never_fit_rows`), naming the turn, its request and its lengths; as
    :func:`check_trace_rows` says for a trace (SGLang 0.5.23 aborts the prompt; an output is
    cut before, :func:`_cut_turns`, and refused only if it does not fit even cut). Checked
    for the scenario's seed before a command runs (:func:`check_fits`) and for each run's own
    seed (``SimEngine``).

    Raises:
        ConfigError: naming ``workload.multi_turn``, the first such turn and the pool.
    """
    w = scenario.workload
    if w.kind != "multi_turn" or not specs:
        return
    found = _first_never_fit(scenario, *_spec_lengths(specs))
    if found is not None:
        k, e, others = found
        s = specs[k]
        raise ConfigError(scenario_file(scenario), "workload.multi_turn", s.input_len,
                          f"turn {s.turn + 1} of a conversation (request {s.index + 1}, seed "
                          f"{scenario.seed if seed is None else seed}{f'; {others} more turns like it' if others else ''}) "
                          f"{'resends its history as' if s.turn else 'sends'} a prompt of {s.input_len} tokens with {s.output_len} output: "
                          f"{e.allowed}{_CUT_NOT_ENOUGH if e.key == 'workload.output_len' else ''}; fewer turns "
                          "(multi_turn.num_turns) or shorter prompts and outputs")


def _largest_request(scenario: Scenario) -> tuple[int, int]:
    """The largest prompt and output a generated workload can draw (tokens)."""
    w = scenario.workload
    sp = w.shared_prefix
    # a generated-shared-prefix prompt is its group's system prompt + its question, each at most its length
    i = (sp.system_prompt_len + sp.question_len if sp is not None and w.input_len is None
         else _max_len(w.input_len, scenario.path, "workload.input_len"))
    return i, _max_len(w.output_len, scenario.path, "workload.output_len")


def check_context(scenario: Scenario, profile: str | None = None) -> None:
    """Refuse a request longer than the model's context length, where the scenario or the
    profile knows it (``server.context_length``, SGLang's ``--context-length``, else
    ``hardware.context_len``, which ``profile --analytic`` writes from the model's
    ``max_position_embeddings``; :func:`context_length`): a generated workload's largest prompt and output, a trace's
    rows, a multi-turn conversation's turns. SGLang 0.5.23 rejects such a request
    (managers/tokenizer_manager.py ``_validate_one_request``). A profile without one (a
    measured grid profile) is not checked, and nothing is said. :func:`check_fits` checks it
    for ``run``, ``compare`` and ``sweep``, and for the commands that predict a real server's
    runs (``validate``, ``validate-bench``, ``calibrate --from``) with the profile they
    predict with (analysis/bench_cli.py ``check_built_fits``).

    Args:
        scenario: the resolved scenario.
        profile: the profile the runs use, name or path (None: the scenario's).

    Raises:
        ConfigError: naming the workload key (or the trace file and column) at fault, the
            length and the context length.
    """
    from specsched.sim.defaults import scenario_hardware

    if profile is not None:   # the runs' profile (its messages name it); its path as the scenario's relative one
        scenario = scenario.model_copy(update={"profile": profile})
    _context(scenario, scenario_hardware(scenario))


def context_length(scenario: Scenario, hw: Hardware | None) -> tuple[int | None, str]:
    """The context length the server runs with and where it comes from, for the messages:
    the scenario's ``server.context_length`` (SGLang's ``--context-length``, which replaces
    the model's own: configs/model_config.py ``ModelConfig._derive_context_length``), else
    the profile's ``hardware.context_len``; (None, "") when neither says."""
    ctx = served_context_len(scenario.server.context_length, hw)
    if ctx is None:
        return None, ""
    return ctx, ("server.context_length" if scenario.server.context_length is not None else f"profile {scenario.profile}")


def _context(scenario: Scenario, hw: Hardware | None) -> None:
    """:func:`check_context` with the profile's hardware read."""
    if context_length(scenario, hw)[0] is None:
        return
    w = scenario.workload
    if w.kind == "trace":
        return   # rows past the context fail as SGLang rejects them (trace_aborts, check_trace_rows)
    if w.kind == "multi_turn":
        from specsched.sim.workload import make_requests

        specs, cuts = _cut_turns(scenario, make_requests(w, scenario.seed, scenario.path or None), hw, None)
        check_turn_context(scenario, specs, hw, asked={i: a for i, a, _ in cuts})
    else:
        _check_context(scenario, hw, *_largest_request(scenario))


def _check_swa_pool(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True) -> None:
    """Refuse a prompt of ``i`` tokens with ``o`` output that a hybrid sliding-window
    server's SWA budget never admits, even with its SWA pool empty (sim/prefill_adder.py
    ``swa_never_admitted``: sglang 0.5.23 mem_cache/prefill_budget.py
    ``SWAPrefillBudget.check_prefill``, ``swa_never_fits``, ``_chunk_cap``; SGLang keeps
    such a request waiting forever). A prompt longer than the SWA pool passes with chunked
    prefill on: SGLang cuts its chunks to the free SWA and holds only the window between
    them, except an ignore_eos request with the prefix cache off, which is never cut
    (``add_one_req_ignore_eos``). Under DP attention the chunk is a rank's
    (dp_attention.py ``rank_server_args``)."""
    swa = srv.swa_max_total_num_tokens
    if not swa:
        return
    page, window, c = srv.page_size, srv.sliding_window_size, srv.chunked_prefill_size
    chunk = None if c <= 0 else c // srv.dp_size
    eos_path = ignore_eos and srv.disable_radix_cache
    extend, new = (i if eos_path else ceil_page(i, page)), min(o, CLIP_MAX_NEW_TOKENS)
    if not swa_never_admitted(extend, new, chunk, window, page, swa, ignore_eos_path=eos_path):
        return
    need = swa_peak_tokens(extend, new, chunk, window, page)
    head = (f"a prompt of {i} tokens with {o} output needs {need} SWA slots at admission "
            f"(estimate_swa_kv_tokens), not fewer than the SWA pool of {swa} "
            f"({where}.max_total_num_tokens x {where}.swa_full_tokens_ratio)")
    if chunk is None:
        raise ConfigError(file, "workload.input_len", i,
                          f"{head}, and {where}.chunked_prefill_size is -1: SGLang admits it only whole; "
                          "turn chunking on or enlarge the SWA pool")
    if eos_path:
        raise ConfigError(file, "workload.input_len", i,
                          f"{head}, and with {where}.disable_radix_cache and ignore_eos SGLang never cuts the "
                          f"chunk to the free SWA (add_one_req_ignore_eos); lower {where}.chunked_prefill_size "
                          "or enlarge the SWA pool")
    raise ConfigError(file, "workload.input_len", i,
                      f"{head}, and a first chunk cut to the pool less its decode headroom (min(output, "
                      f"{window}) + a page of {page}) has no page left; enlarge the SWA pool")


def lone_chunk_parked(srv, i: int, o: int, swa: int | None = None, ignore_eos: bool = True) -> int | None:
    """The prompt position at which a request with a prompt of ``i`` tokens and an output of
    ``o``, alone on a hybrid sliding-window server, gets no next chunk for ever, or None
    when its prompt completes. Only without a prefix cache and with chunking on: a chunk's
    SWA is then freed behind the window only as a later extend batch of the same request is
    prepared, and under the overlap schedule its first two extend batches free nothing
    (sglang 0.5.23 managers/schedule_batch.py ``ScheduleBatch.maybe_evict_swa``, the extend
    branch), so two chunks can fill the pool; the next chunk is offered only the free SWA
    less a page (mem_cache/prefill_budget.py ``SWAPrefillBudget.available_chunk_tokens``),
    nothing when none is left, and SGLang parks the request (``add_chunked_req``) with
    nothing that could free its slots. The walk takes the scheduler's own calls: the first
    chunk from :meth:`PrefillAdder.add_one_req` (cut to the free SWA when its peak never
    fits, ``_chunk_cap``), each later one from :meth:`PrefillAdder.add_chunked_req`, each
    extend freeing behind its window first (:meth:`KVLedger.evict_swa_extend`) before its
    reservation (:meth:`KVLedger.reserve`). ``swa``: the SWA pool (default the server's);
    the chunk is a DP rank's (``chunked_prefill_size // dp_size``)."""
    swa = srv.swa_max_total_num_tokens if swa is None else swa
    c = srv.chunked_prefill_size
    if not swa or not srv.disable_radix_cache or c <= 0 or i < 1:
        return None
    from specsched.sim.prefill_adder import PrefillAdder

    page, window = srv.page_size, srv.sliding_window_size or 0
    chunk = max(1, c // srv.dp_size)
    kv = KVLedger(1 << 62, srv.spec_kv_reserve, page, swa_capacity=swa, window=window,
                  swa_interval=srv.swa_eviction_interval, prefix_sharing=False,
                  swa_by_forward=srv.rules.swa_eviction_cadence == "forward_interval", paged=True)
    overlap = chunk if srv.enable_overlap_schedule else None
    r = Req(0, int(i), max(int(o), 1), ignore_eos=ignore_eos)
    first = True
    while r.prefill_done < r.input_len:
        adder = PrefillAdder.start(1 << 62, [], 1.0, 1 << 62, chunk, page, prefill_max_requests=None,
                                   chunk_fill=srv.rules.chunk_fill,
                                   ignore_eos_full_reservation=srv.rules.ignore_eos_full_reservation,
                                   swa=(kv.swa_available, window, swa), ignore_eos_path=True)
        if first:
            adder.add_one_req(r)
        else:
            adder.add_chunked_req(r)
        if not adder.can_run:
            return None if first else r.prefill_done   # never admitted: _check_swa_pool's refusal
        n = adder.can_run[-1][1]
        kv.evict_swa_extend(r, r.prefill_done, overlap)
        if n > kv.swa_available:
            return r.prefill_done
        kv.reserve(r, n)
        r.prefill_done += n
        first = False
    return None


def _least_swa_ratio(srv, first: int, holds: Callable[[int], bool]) -> float | None:
    """The smallest ``swa_full_tokens_ratio``, in steps of 1e-4 from ``first`` / 1e4 up to 1,
    whose SWA pool beside the server's full pool (:func:`sim.server_args.swa_pool_tokens`, the
    pool SGLang sizes at that ratio) ``holds``; None when none does."""
    for r in range(first, 10_001):
        if holds(swa_pool_tokens(srv.max_total_num_tokens, srv.page_size, r / 10_000)):
            return r / 10_000
    return None


def _check_parked_chunk(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True) -> None:
    """Refuse a prompt that, alone on the server, gets no next chunk for want of SWA slots
    (:func:`lone_chunk_parked`; SGLang parks it for ever, the simulator stopped partway:
    ``Scheduler._refuse_parked_chunk``), naming the smallest ``swa_full_tokens_ratio`` whose
    pool lets it through."""
    at = lone_chunk_parked(srv, i, o, ignore_eos=ignore_eos)
    if at is None:
        return
    cap, swa = srv.max_total_num_tokens, srv.swa_max_total_num_tokens
    ratio = _least_swa_ratio(srv, int(srv.swa_full_tokens_ratio * 10_000) + 1,
                             lambda pool: lone_chunk_parked(srv, i, o, pool, ignore_eos) is None)
    fix = (f"set {where}.swa_full_tokens_ratio to at least {ratio}" if ratio is not None
           else f"enlarge {where}.max_total_num_tokens")
    raise ConfigError(file, f"{where}.swa_full_tokens_ratio", srv.swa_full_tokens_ratio,
                      f"the SWA pool of {swa} ({where}.max_total_num_tokens = {cap} x {where}.swa_full_tokens_ratio, "
                      f"page-aligned) leaves a prompt of {i} tokens, alone, no SWA for its next chunk at position {at}: "
                      f"with {where}.disable_radix_cache a chunk's SWA is freed only as a later chunk is prepared, "
                      "not in the first two extend batches under the overlap schedule (schedule_batch.py "
                      "maybe_evict_swa), and SGLang parks the request for ever (prefill_budget.py "
                      f"available_chunk_tokens); {fix}, lower {where}.chunked_prefill_size or turn the radix cache on")


def inflight_slots(srv) -> int:
    """KV slots beside a request's page-rounded prompt, output and page that the scheduler
    asks free before it admits the request (:meth:`Scheduler.add_request`): under the older
    window rule of speculative decoding (``spec_kv_reservation: window``, each verify pass
    reserves its window), the verify slots of the two passes the overlap loop keeps in
    flight, ``2 x spec_window``; 0 otherwise. Without speculative decoding SGLang 0.5.23's
    admission charges nothing beyond the prompt, the output and a page (schedule_policy.py
    ``PrefillAdder.add_one_req``), and neither does the simulated one: a lone request holds
    at most prompt + output slots (its finishing step is not run again, scheduler.py
    ``_reqs_finishing_inflight``), below what the cut leaves (:func:`output_cut`). Under the
    top-up rule the bound is the last top-up (:func:`_top_up_past_pool`)."""
    window_rule = srv.spec_window > 1 and srv.rules.spec_kv_reservation != "topup"
    return 2 * srv.spec_window if window_rule else 0


def _top_up_past_pool(srv, ins, outs):
    """Whether a request (prompt ``ins``, output ``outs``; ints or int arrays) running alone
    asks, at its last verify pass, more KV than the pool holds under the top-up rule
    (:func:`sim.kv_ledger.last_top_up_target`): SGLang 0.5.23 then aborts it out of memory
    (schedule_batch.py ``retract_decode``); False without the top-up rule."""
    if not srv.spec_kv_reserve or srv.rules.spec_kv_reservation != "topup":
        return np.zeros_like(outs, dtype=bool) if isinstance(outs, np.ndarray) else False
    past = last_top_up_target(ins, outs, srv.spec_kv_reserve, srv.page_size) > srv.max_total_num_tokens
    return past & (outs >= 2)


def _lone_outputs(srv) -> int:
    """Outputs past which :func:`lone_swa_top_up` asks no more: the held SWA span repeats
    within a window and a few pages of tokens plus an eviction interval of passes (the
    interval counts tokens, or passes under the forward cadence; a pass commits
    ``spec_window`` tokens)."""
    k = srv.spec_window
    return (srv.sliding_window_size or 0) + 4 * srv.page_size + k * (srv.swa_eviction_interval + 4)


def lone_swa_top_up(srv, i: int, o: int) -> tuple[int, int]:
    """(SWA slots held, SWA slots needed) at the verify pass where a request with a prompt of
    ``i`` tokens and an output of ``o``, alone on the server, asks the SWA pool the most under
    the top-up rule: the sum the scheduler's decode check compares with the SWA pool
    (:meth:`Scheduler._decode_fits`: the pass's new pages, :meth:`KVLedger.swa_decode_need`,
    against what is free before that pass's SWA eviction). Built with the scheduler's own
    ledger calls, no second formula: the prompt is reserved chunk by chunk
    (``chunked_prefill_size`` per rank, whole with chunking off), each extend freeing the SWA
    behind its window first with the radix cache off (:meth:`KVLedger.evict_swa_extend`),
    the prompt handed to the tree with it on (:meth:`KVLedger.swa_prompt_cached`); then each
    pass checks, evicts behind the window (:meth:`KVLedger.evict_swa`) and tops the request
    up to ``ceil_page(committed + spec_kv_reserve)`` (:meth:`KVLedger.top_up`), every pass
    committing its whole verify window (``spec_window`` tokens: full acceptance, the most a
    pass moves the top-up target ahead of the last eviction, so the largest ask any
    acceptance makes), until the held span repeats (window, eviction interval and a few
    pages of passes) or the output ends. A first chunk the scheduler cuts to the free SWA
    (``_chunk_cap``) is not followed: it only frees more behind the window. (0, 0) without
    an SWA pool or a second output token (with 1, no pass is built). Under the older window
    rule (``spec_kv_reservation: window``, and plain decoding: a window of one token) each
    pass reserves its window instead of a top-up (:meth:`KVLedger.reserve_window`), checked
    the same way (:meth:`KVLedger.swa_decode_need`). Under the overlap schedule each pass is
    built before the previous one's result is processed (managers/scheduler.py
    ``event_loop_overlap``), so its check, eviction and top-up see the output a pass behind."""
    if not srv.swa_max_total_num_tokens or o < 2:
        return 0, 0
    topup = bool(srv.spec_kv_reserve) and srv.rules.spec_kv_reservation == "topup"
    i, page = int(i), srv.page_size
    cache = not srv.disable_radix_cache
    kv = KVLedger(1 << 62, srv.spec_kv_reserve if topup else 0, page, swa_capacity=1 << 62, window=srv.sliding_window_size or 0,
                  swa_interval=srv.swa_eviction_interval, prefix_sharing=cache,
                  swa_by_forward=srv.rules.swa_eviction_cadence == "forward_interval", paged=True)
    c = srv.chunked_prefill_size
    chunk = i if c <= 0 else max(1, c // srv.dp_size)
    overlap = max(c, 0) if srv.enable_overlap_schedule else None
    r = Req(0, i, int(o))
    forward = 0
    while r.prefill_done < i:
        n = min(chunk, i - r.prefill_done)
        if not cache:
            kv.evict_swa_extend(r, r.prefill_done, overlap)
        kv.reserve(r, n)
        r.prefill_done += n
        forward += 1
    if cache:
        kv.swa_prompt_cached(r)
    r.output_len = 1   # the prefill's token
    worst, k, last = (0, 0), srv.spec_window, min(int(o), _lone_outputs(srv))
    lagged, lag = srv.enable_overlap_schedule, 0
    while r.output_len < last:
        held, need = kv.swa_held(r), kv.swa_decode_need([r], k)
        if held + need > sum(worst):
            worst = (held, need)
        kv.evict_swa([r], forward)
        if topup:
            kv.top_up([r])
        else:
            kv.reserve_window([r], k)
        # under the overlap schedule the next pass is built before this one's result is
        # processed: its check, eviction and top-up see the output one pass behind
        r.output_len += lag if lagged else k
        lag = k
        forward += 1
    return worst


def _swa_top_up_past_pool(srv, ins, outs):
    """Whether a request (prompt ``ins``, output ``outs``; ints or int arrays) running alone
    can never get its first verify pass's SWA slots: what it holds and what the pass takes
    (:func:`lone_swa_top_up`) pass the SWA pool. SGLang 0.5.23 checks the same pass against
    min(full, SWA) free slots (mem_cache/allocator/base.py ``check_decode_capacity`` with
    mem_cache/allocator/swa.py ``SWATokenToKVPoolAllocator.available_size``) and, with the
    request alone, aborts it out of memory (managers/schedule_batch.py
    ``ScheduleBatch.retract_decode``); the simulator stops the run there
    (UnschedulableRequest). Needs an output of 2 or more (with 1, no pass is built)."""
    swa = srv.swa_max_total_num_tokens
    if isinstance(outs, np.ndarray):
        if not sum(lone_swa_top_up(srv, 1, 2)):   # no SWA pool (the need is a page or more with one)
            return np.zeros(outs.shape, dtype=bool)
        bad = np.zeros(outs.shape, dtype=bool)
        last, page = np.minimum(outs, _lone_outputs(srv)), srv.page_size
        # the walk holds at most every page up to its last target (committed <= prompt +
        # output walked) and the prompt's window lock: rows below that never reach the pool
        most = -(-(ins + last + max(srv.spec_kv_reserve, srv.spec_window)) // page) * page + ceil_page(srv.sliding_window_size or 0, page)
        left = np.flatnonzero((most > swa) & (outs >= 2))
        if len(left):
            pairs, inverse = np.unique(np.stack([ins[left], last[left]], axis=1), axis=0, return_inverse=True)
            past = np.array([sum(lone_swa_top_up(srv, int(i), int(o))) > swa for i, o in pairs], dtype=bool)
            bad[left] = past[inverse.reshape(-1)]
        return bad
    return sum(lone_swa_top_up(srv, ins, outs)) > swa


def _check_pool(file: str, srv, where: str, i: int, o: int, ignore_eos: bool = True) -> None:
    """Refuse a prompt of ``i`` and an output of ``o`` tokens that the pool of a server with
    arguments ``srv`` (named ``where`` in the scenario) can never hold."""
    page, cap = srv.page_size, srv.max_total_num_tokens
    pool = f"{where}.max_total_num_tokens"
    ahead = inflight_slots(srv)
    fixed = page + ahead  # a page of headroom plus the window rule's in-flight verify slots (Scheduler.add_request)
    prompt = ceil_page(i, page) + fixed
    if prompt >= cap:
        slots = f" and {ahead} verify slots" if ahead else ""
        raise ConfigError(file, "workload.input_len", i,
                          f"a prompt of {i} tokens needs {prompt} KV tokens (page-rounded, + a page{slots}); "
                          f"{pool} is {cap} and must exceed that (SGLang refuses an input "
                          "that reaches its limit: managers/utils.py validate_input_length)")
    if i > longest_pool_prompt(srv):
        raise ConfigError(file, "workload.input_len", i,
                          f"must be at most {longest_pool_prompt(srv)} tokens: {pool} is {cap}, and SGLang aborts a prompt "
                          f"of min(context_len, pool) - {INPUT_MARGIN} tokens or more (managers/tp_worker.py "
                          "max_req_input_len = min(context_len - 1, pool - 1) - 5; managers/utils.py validate_input_length)")
    _check_swa_pool(file, srv, where, i, o, ignore_eos)
    _check_parked_chunk(file, srv, where, i, o, ignore_eos)
    need = prompt + min(o, CLIP_MAX_NEW_TOKENS)
    if i + o > cap:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens: the KV pool holds the whole context by the last "
                          f"token; {pool} is {cap}")
    if need >= cap:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens need {need} KV tokens as the scheduler reserves them "
                          f"(output clipped at {CLIP_MAX_NEW_TOKENS}); {pool} is {cap} and must exceed that")
    if _ignore_eos_admits(srv, ignore_eos) and _ignore_eos_never_admitted(srv, ceil_page(i, page), o):
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens with the prefix cache off: SGLang's ignore_eos admission "
                          f"(schedule_policy.py add_one_req_ignore_eos) keeps 1 token free beyond the page-rounded "
                          f"prompt, a page and the whole output, which {pool} = {cap} does not hold even alone (its "
                          "cut of max_new_tokens, init_req_max_new_tokens, leaves one token short): the request "
                          "waits for ever; turn the radix cache on or shorten the output")
    if _top_up_past_pool(srv, i, o):
        target = last_top_up_target(i, o, srv.spec_kv_reserve, page)
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens: the last verify pass tops the request up to "
                          f"{target} KV positions (committed + {srv.spec_kv_reserve} reserved, page-rounded; "
                          f"allocation_sizing.py page_aligned_decode_alloc_lens), past {pool} = {cap}; SGLang aborts "
                          "it out of memory (schedule_batch.py retract_decode), which the simulator does not model")
    if _swa_top_up_past_pool(srv, i, o):
        held, need = lone_swa_top_up(srv, i, o)
        swa, total, fits = srv.swa_max_total_num_tokens, (cap // page) * page, held + need
        ratio = _least_swa_ratio(srv, -(-fits * 10_000 // total), lambda pool: pool >= fits)
        fix = (f"set {where}.swa_full_tokens_ratio to at least {ratio} (an SWA pool of {fits})" if ratio is not None
               else f"{pool} must be at least {fits} at a ratio of 1")
        if srv.spec_kv_reserve and srv.rules.spec_kv_reservation == "topup":
            ask = (f"its top-up to prompt + {srv.spec_kv_reserve} reserved positions (page-rounded; "
                   f"{where}.speculative_eagle_topk, speculative_num_steps and page_size = {page} size the reserve)")
            lower = ", or lower the speculative reserve"
        else:
            ask, lower = f"the pass's {srv.spec_window}-token window (page-rounded)", ""
        raise ConfigError(file, f"{where}.swa_full_tokens_ratio", srv.swa_full_tokens_ratio,
                          f"the SWA pool of {swa} ({pool} = {cap} x {where}.swa_full_tokens_ratio, page-aligned) "
                          f"cannot hold one request alone at its largest decode/verify pass: a prompt of {i} tokens holds "
                          f"{held} SWA slots and {ask} takes {need} more; SGLang aborts it out of memory (schedule_batch.py "
                          f"retract_decode); {fix}{lower}")
    beside = topup_beside_chunk_tokens(srv, i, o)
    if beside > cap:
        raise ConfigError(file, pool, cap,
                          f"must be at least {beside}: a running request's speculative top-up (prompt {i} + "
                          f"output {o} + {srv.spec_kv_reserve} reserved, page-rounded) beside a chunked prompt of "
                          f"{i} tokens; SGLang would abort the request out of memory")


def _check_decode_prealloc(file: str, srv, i: int, o: int) -> None:
    """Refuse a decode pool that can never preallocate the largest request: SGLang's
    ``DecodePreallocQueue.pop_preallocated`` (disaggregation/decode.py) needs
    ``max(prompt + num_reserved_decode_tokens, prompt + min(max_new_tokens, 4096))`` within
    the pool even when nothing else is active (``_required_admission_tokens``,
    ``_allocatable_token_budgets``), and a request it never preallocates waits at the head of
    the FIFO queue for ever (only a prompt above the pool is aborted,
    ``_check_if_req_exceed_kv_capacity``). The scheduler refuses the same request when it
    arrives (:meth:`sim.scheduler_disagg.Disagg._refuse_unpreallocatable`)."""
    cap, reserve = srv.max_total_num_tokens, srv.num_reserved_decode_tokens
    need = prealloc_need(ceil_page(i, srv.page_size), i, o, reserve)
    if need > cap:
        raise ConfigError(file, "server.disaggregation.decode.server.max_total_num_tokens", cap,
                          f"must be at least {need}: a decode server preallocates a prompt of {i} tokens plus "
                          f"num_reserved_decode_tokens={reserve} (or plus its output of up to {o} tokens) before "
                          "the prefill starts; SGLang would keep the request waiting for ever")


def _check_hardware(scenario: Scenario, hw: Hardware | None) -> None:
    """Refuse a profile whose weights leave no KV pool on its GPU: SGLang stops at start
    (model_executor/pool_configurator.py ``MemoryPoolConfig``: "Not enough memory").
    Without this the run silently kept the generic default pool (724,000 tokens)."""
    from specsched.sim.defaults import (
        activation_tokens,
        decode_graph_mib_per_bs,
        kv_pool_tokens,
        loaded_weight_bytes,
        mem_fraction_static_of,
    )

    if hw is None or hw.weight_bytes is None:
        return
    srv = scenario.server
    mfs = mem_fraction_static_of(srv, hw)
    if mfs <= 0:
        # the reserve alone takes the whole GPU: the settings it grows with are at fault,
        # not the weights (SGLang's reserve: arg_groups/memory_hook.py handle_gpu_memory_settings)
        act = activation_tokens(srv.chunked_prefill_size, srv.max_prefill_tokens)
        per_bs = decode_graph_mib_per_bs(srv.cuda_graph_max_bs, srv.attn_dp_size)
        graph_mib = srv.cuda_graph_max_bs * per_bs
        key, value = (("server.cuda_graph_max_bs", srv.cuda_graph_max_bs) if graph_mib > act * 1.5 else
                      ("server.chunked_prefill_size", srv.chunked_prefill_size) if srv.chunked_prefill_size > 0
                      else ("server.max_prefill_tokens", srv.max_prefill_tokens))
        raise ConfigError(scenario_file(scenario), key, value,
                          f"SGLang reserves activation and graph memory from chunked_prefill_size ({act} tokens x "
                          f"1.5 MiB) and cuda_graph_max_bs ({srv.cuda_graph_max_bs} x {per_bs:g} MiB) before the KV pool: "
                          f"more than one {hw.gpu or hw.platform} ({_gib((hw.memory_mib or 0) * 2**20)}) holds "
                          f"(mem_fraction_static {mfs}); SGLang stops at start")
    spec = srv.speculative_algorithm.enabled
    if kv_pool_tokens(hw, mfs, srv.page_size, speculative=spec) == 0:
        weights = loaded_weight_bytes(hw, spec)
        if srv.mem_fraction_static is not None:
            need = weights / (((hw.memory_mib or 0) - hw.context_mib) * 2**20)
            raise ConfigError(scenario_file(scenario), "server.mem_fraction_static", srv.mem_fraction_static,
                              f"leaves no KV pool beside {_gib(weights)} of weights per rank on one "
                              f"{hw.gpu or hw.platform} ({_gib((hw.memory_mib or 0) * 2**20)}): must be above "
                              f"{need:.3f}; SGLang stops at start ('Not enough memory')")
        loaded = "" if weights == hw.weight_bytes else (
            f"{_gib(weights)} of them loaded without speculative decoding (no drafter): ")
        raise ConfigError(scenario.profile, "hardware.weight_bytes", _gib(hw.weight_bytes),
                          f"{loaded}weights per rank leave no KV pool on one {hw.gpu or hw.platform} "
                          f"({_gib((hw.memory_mib or 0) * 2**20)}) at mem_fraction_static {mfs}: SGLang stops at start "
                          "('Not enough memory'); use more TP ranks (--tp)" + _narrower_dtype(scenario))


def _check_dp_divides_tp(scenario: Scenario) -> None:
    """Refuse DP attention whose rank count does not divide an analytic profile's TP group:
    SGLang asserts ``tp_size % attn_dp_size == 0`` at start (arg_groups/parallel_hook.py
    ``handle_data_parallelism``): the attention ranks split the group's GPUs. Such a profile
    used to be read per rank (sim/dp_attention.py ``tp_group_kv_ratio`` None), each rank
    timed as if it had the profile's whole group to itself: an 8B TP1 profile with dp_size 4
    decoded as if on four GPUs. A measured profile of a TP group (``hardware.tp_size`` above
    1) is checked the same way; one with ``tp_size`` 1 is a per-rank profile, read per rank
    as before."""
    from specsched.sim.profile import load_profile

    servers = [("server", scenario.server)]
    if scenario.server.disaggregation is not None:
        servers += [(f"server.disaggregation.{r}.server", scenario.server.role_server(r)) for r in ("prefill", "decode")]
    dp = [(where, s.dp_size) for where, s in servers if s.enable_dp_attention and s.dp_size > 1]
    if not dp:
        return
    try:
        prof = load_profile(scenario.profile, relative_to=scenario.path or None)
    except (ConfigError, OSError):
        return
    analytic, kind = prof.analytic, "analytic"
    tp = analytic.get("tp") if isinstance(analytic, dict) and analytic else None
    if tp is None and not analytic and prof.hardware is not None and prof.hardware.tp_size > 1:
        tp, kind = prof.hardware.tp_size, "measured TP-group"
    if not isinstance(tp, int) or tp < 1:
        return
    for where, size in dp:
        if tp % size:
            ok = [d for d in range(1, tp + 1) if tp % d == 0]
            raise ConfigError(scenario_file(scenario), f"{where}.dp_size", size,
                              f"must divide the TP size {tp} of the {kind} profile {scenario.profile} "
                              f"(allowed: {', '.join(map(str, ok))}): SGLang asserts tp_size % dp_size == 0 "
                              "with DP attention, whose ranks share the TP group's GPUs")


def _narrower_dtype(scenario: Scenario) -> str:
    """The no-pool refusal's second remedy: fp8 weights for a bf16 analytic profile only (an
    fp8 or 4-bit profile's weights are already narrower than fp8's; a measured profile's
    weights are the runtime's, which --dtype does not change)."""
    from specsched.sim.profile import load_profile

    try:
        analytic = load_profile(scenario.profile, relative_to=scenario.path or None).analytic
    except (ConfigError, OSError):
        return ""
    return " or fp8 weights (--dtype fp8)" if isinstance(analytic, dict) and analytic.get("dtype") == "bf16" else ""


INPUT_MARGIN = 6
"""Tokens below the context length at which SGLang 0.5.23's scheduler aborts a prompt: it
sets ``max_req_len = min(context_len - 1, kv_capacity - 1)`` and ``max_req_input_len =
max_req_len - 5`` (managers/tp_worker.py), and aborts an input of ``max_req_input_len``
tokens or more (managers/utils.py ``validate_input_length``, called from scheduler.py
``handle_generate_request``; truncated instead with ``--allow-auto-truncate``): a prompt of
``context_len - 6`` tokens or more, though the tokenizer let it through."""


def longest_prompt(ctx: int) -> int:
    """The longest prompt (tokens) a server of context length ``ctx`` serves: ``ctx - 7``
    (:data:`INPUT_MARGIN`; the tokenizer's own bound, ``< ctx``, is looser)."""
    return ctx - INPUT_MARGIN - 1


def max_req_input_len(pool: int, ctx: int | None) -> int:
    """SGLang 0.5.23's ``max_req_input_len`` (managers/tp_worker.py): ``min(context_len - 1,
    pool - 1) - 5``, the prompt length from which ``validate_input_length`` aborts (or, under
    ``--allow-auto-truncate``, truncates to); the pool's alone where the context is not known."""
    return longest_prompt(pool if ctx is None else min(ctx, pool)) + 1


def longest_pool_prompt(srv) -> int:
    """The longest prompt (tokens) a server with arguments ``srv`` holds in its pool: the
    longest it serves as sent (:func:`longest_prompt` of the pool), or under
    ``allow_auto_truncate`` one more, ``max_req_input_len`` itself, the length
    managers/utils.py ``validate_input_length`` truncates a longer prompt to and serves."""
    return longest_prompt(srv.max_total_num_tokens) + (1 if srv.allow_auto_truncate else 0)


def _prompt_limit_text(ctx: int, source: str) -> str:
    return (f"must be at most {longest_prompt(ctx)} tokens, the model's context length {ctx} ({source}) less "
            f"{INPUT_MARGIN}: SGLang aborts longer prompts (managers/tp_worker.py max_req_input_len = "
            "min(context_len - 1, pool - 1) - 5; managers/utils.py validate_input_length)")


def _check_context(scenario: Scenario, hw: Hardware | None, i: int, o: int) -> None:
    """Refuse a request longer than the context length the server runs with
    (:func:`context_length`): SGLang rejects the prompt (managers/tokenizer_manager.py
    ``_validate_one_request``: input >= context_len, or input + max_new_tokens > it)."""
    ctx, source = context_length(scenario, hw)
    if ctx is None:
        return
    file = scenario_file(scenario)
    if i > longest_prompt(ctx):
        raise ConfigError(file, "workload.input_len", i, _prompt_limit_text(ctx, source))
    if i + o > ctx:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens exceed the model's context length {ctx} "
                          f"({source}): SGLang rejects the request")


def check_turn_context(scenario: Scenario, specs: list, hw: Hardware | None, seed: int | None = None,
                       asked: dict[int, int] | None = None) -> None:
    """Refuse a multi-turn workload whose conversation grows a prompt (system prompt, first
    prompt, the earlier turns' outputs and user turns) past the model's context length, or
    whose prompt plus output passes it: SGLang 0.5.23 rejects that turn
    (managers/tokenizer_manager.py ``_validate_one_request``), which the simulator does not
    model; it was prefilled past the profile's grid. Checked for the scenario's seed before a
    command runs (:func:`check_fits`) and for each run's own seed (``SimEngine``).

    Args:
        scenario: the resolved scenario (its ``workload.kind`` is multi_turn).
        specs: the run's requests (:func:`sim.workload.make_requests`).
        hw: the profile's hardware (None or no ``context_len``: nothing checked).
        seed: the seed the requests were drawn with (None: the scenario's).
        asked: request index -> the output it asked, for the turns whose output the server
            cut (:func:`_cut_turns`): the tokenizer checks what a turn asks, before the cut.

    Raises:
        ConfigError: naming ``workload.multi_turn``, the first such turn's prompt, its turn
            number and conversation position, and the context length.
    """
    ctx, source = context_length(scenario, hw)
    if ctx is None or scenario.workload.kind != "multi_turn":
        return
    asked = asked or {}
    for s in specs:
        o = asked.get(s.index, s.output_len)
        if s.input_len > longest_prompt(ctx) or s.input_len + o > ctx:
            what = ("a prompt of" if s.input_len > longest_prompt(ctx)
                    else f"{o} output tokens after a prompt of")
            raise ConfigError(scenario_file(scenario), "workload.multi_turn", s.input_len,
                              f"turn {s.turn + 1} of a conversation (request {s.index + 1}, seed {scenario.seed if seed is None else seed}) "
                              f"reaches {what} {s.input_len} tokens; the model's context length {ctx} "
                              f"({source}; a prompt at most {longest_prompt(ctx)}): SGLang rejects the turn; fewer turns "
                              "(multi_turn.num_turns) or shorter prompts and outputs")


def topup_beside_chunk_tokens(srv, i: int, o: int) -> int:
    """KV tokens the pool needs so that a lone running request can always get its next
    speculative top-up while a second request is mid chunked prefill; 0 where the case
    cannot arise (no top-up reservation, no chunked prefill, or max_running_requests 1).

    sglang 0.5.23 charges a running request only its remaining output x new_token_ratio
    when admitting prefill (managers/schedule_policy.py
    ``PrefillAdder._get_running_request_total_token_offset``), not the ``spec_kv_reserve``
    positions its next top-up takes (mem_cache/allocation_sizing.py
    ``page_aligned_decode_alloc_lens``). A chunked prefill can so fill the pool; the chunked
    request is not in the running batch, so ``ScheduleBatch.retract_decode`` cannot free it
    and, with one request left that still does not fit, aborts that request ("Out of memory
    even after retracting all other requests"). The simulator does not model the abort:
    such a pool is refused before the run.

    Args:
        srv: the server arguments (``ServerArgs``).
        i: the largest prompt (tokens).
        o: the largest output (tokens).

    Returns:
        ``ceil_page(i + o + spec_kv_reserve)`` (the lone request's largest top-up target)
        plus ``ceil_page(i)`` (what the chunked request can hold), in tokens, or 0.
    """
    if (srv.spec_kv_reserve == 0 or srv.rules.spec_kv_reservation != "topup"
            or srv.chunked_prefill_size <= 0 or srv.max_running_requests < 2):
        return 0
    page = srv.page_size
    return ceil_page(i + o + srv.spec_kv_reserve, page) + ceil_page(i, page)
