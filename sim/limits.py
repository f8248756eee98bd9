"""The checks a command makes before a run allocates anything: the workload's size against
this machine's memory (:func:`check_size`), and that the scenario can run at all
(:func:`check_fits`: the profile's weights leave a KV pool, DP attention divides the TP
group, every request or trace row fits the context and the pools). What the server does
with each request is :mod:`sim.served`'s (SGLang's cuts and rejections); whether one
request fits one server's pools is :mod:`sim.pool_fit`'s.

Size checks (requests x per-request arrays).

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
from specsched.sim.pool_fit import (
    INPUT_MARGIN,
    check_decode_prealloc,
    check_request_pool,
    longest_prompt,
)
from specsched.sim.served import (
    CUT_NOT_ENOUGH,
    check_turn_context,
    context_length,
    cut_turns,
    cutting_server,
    first_never_fit,
    largest_request,
    max_len,
    output_cut,
    served_requests,
    served_rows,
    trace_output_cut,
    trace_rejections,
)
from specsched.sim.server_args import chunk_pages_refusal

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
    return n * max_len(w.output_len, scenario.path, "workload.output_len")


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
        n = mt.num_conversations * max_len(mt.num_turns, scenario.path, key)
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

    w = scenario.workload
    hw = scenario_hardware(scenario)   # the profile's hardware block, read once for both checks
    check_hardware(scenario, hw)
    _check_dp_divides_tp(scenario)
    check_chunk_pages(scenario)
    if w.kind in ("trace", "multi_turn"):
        # lengths are in the file / grow with each turn: every row and turn is checked here,
        # against the context and the pools, before the first simulated event
        if w.kind == "multi_turn":
            from specsched.sim.prefix_workload import warnings_unsaid

            with warnings_unsaid():   # the run says them, once
                _check_turn_lengths(scenario, hw)   # before any token id is made
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
    try:
        _check_largest_request(scenario, hw)
    except ConfigError as e:
        raise _from_histogram(scenario, e) from None


HISTORY_BYTES_PER_TOKEN = 16
"""Peak bytes per token of a multi-turn workload's conversation histories while they are made
(sim/prefix_workload.py ``multi_turn_conversations``): an int64 token id in its parts and again
in the history they are joined into."""


HISTORY_PRECHECK_BYTES = 2**28
"""Token ids (bytes, at :data:`HISTORY_BYTES_PER_TOKEN`) a multi-turn workload's histories may
take before :func:`_check_turn_lengths` refuses from the lengths alone what the checks of the
made turns would refuse (below it those run, naming the first turn that fails)."""


def _check_turn_lengths(scenario: Scenario, hw: Hardware | None) -> None:
    """A ``multi_turn`` workload's turns checked from their lengths alone, before the
    conversations' token ids are made (8 bytes a token, each history whole): a system prompt
    of 2**31 tokens asked for 16 GiB (a MemoryError traceback) before the context check
    refused it. Where they would take more than :data:`HISTORY_PRECHECK_BYTES`, each
    conversation's last turn resends at least its turn-0 prompt, every later
    turn's new tokens and one output token per earlier turn: where that passes the longest
    prompt the context length serves, refused as :func:`check_turn_context` refuses the turn;
    where the pool can never hold it, as :func:`sim.served.check_turn_rows` does; where the
    histories' token ids exceed this machine's memory, refused with the estimate.

    Raises:
        ConfigError: naming ``workload.multi_turn``.
    """
    from specsched.sim.prefix_workload import conversation_plan

    mt = scenario.workload.multi_turn
    plan = conversation_plan(mt, scenario.seed, Path(scenario.path) if scenario.path else None)
    turns = plan.turns.astype(object)
    first = plan.firsts.astype(object) + mt.system_prompt_len
    if plan.news is not None:
        starts = np.concatenate([[0], np.cumsum(plan.turns)[:-1]]).astype(np.int64)
        new = np.add.reduceat(plan.news.astype(object), starts) - plan.news[starts] if len(starts) else first * 0
    else:
        width = plan.users.shape[1]
        used = np.arange(width)[None, :] < (plan.turns[:, None] - 1)
        new = (plan.users.astype(object) * used).sum(axis=1)
    last = first + new + (turns - 1)   # the last turn's prompt, at least (Python ints: no overflow)
    if not len(last):
        return
    need = int(sum(last)) * HISTORY_BYTES_PER_TOKEN
    if need <= HISTORY_PRECHECK_BYTES:
        return   # cheap to make: the checks of the turns themselves name the first one that fails
    c = int(np.argmax(last))
    ctx, source = context_length(scenario, hw)
    file = scenario_file(scenario)
    if ctx is not None and last[c] > longest_prompt(ctx):
        raise ConfigError(file, "workload.multi_turn", int(last[c]),
                          f"turn {int(turns[c])} of conversation {c + 1} (seed {scenario.seed}) reaches a prompt of at "
                          f"least {int(last[c])} tokens; the model's context length {ctx} ({source}; a prompt at most "
                          f"{longest_prompt(ctx)}): SGLang rejects the turn; fewer turns (multi_turn.num_turns) or "
                          "shorter prompts")
    longest = np.array([min(int(x), 2**63 - 1) for x in last], dtype=np.int64)
    found = first_never_fit(scenario, longest, np.ones(len(longest), dtype=np.int64))
    if found is not None:   # the pool can never hold the turn, even with one output token
        k, e, _ = found
        raise ConfigError(file, "workload.multi_turn", int(last[k]),
                          f"turn {int(turns[k])} of conversation {k + 1} (seed {scenario.seed}) resends a prompt of at "
                          f"least {int(last[k])} tokens: {e.allowed}; fewer turns (multi_turn.num_turns) or shorter prompts")
    mem = physical_memory_bytes()
    if mem is not None and need > mem:
        raise ConfigError(file, "workload.multi_turn", int(last[c]),
                          f"the conversations' histories (at least {int(sum(last)):,} tokens, the longest {int(last[c]):,}) "
                          f"take about {_gib(need)} of token ids (~{HISTORY_BYTES_PER_TOKEN} B a token); this machine "
                          f"has {_gib(mem)}: fewer or shorter conversations")


def _check_largest_request(scenario: Scenario, hw: Hardware | None) -> None:
    """:func:`check_fits` of a generated workload: its largest request against each server's
    pool and the context length."""
    srv, w = scenario.server, scenario.workload
    file = scenario_file(scenario)
    i, o = largest_request(scenario)
    # its output as SGLang cuts it (served_requests runs the cut); as asked where the cut leaves none
    o_served = int(trace_output_cut(scenario, np.array([i]), np.array([o]), hw)[0])
    served_at = _served_at(scenario, hw, i, o)
    try:
        if srv.disaggregation is None:
            check_request_pool(file, srv, "server", i, o_served, w.ignore_eos, served_at)
        else:
            # each role's servers hold their own pool: a prefill server's copy of a request asks
            # for its first token only (PrefillBootstrapQueue._process_req), a decode server's
            # holds the whole context and is preallocated first
            check_request_pool(file, srv.role_server("prefill"), "server.disaggregation.prefill.server", i, 1, w.ignore_eos)
            decode = srv.role_server("decode")
            check_request_pool(file, decode, "server.disaggregation.decode.server", i, o_served, w.ignore_eos,
                               served_at)
            check_decode_prealloc(file, decode, i, o_served)
    except ConfigError as e:
        raise _asked_output(e, o, o_served) from None
    _check_context(scenario, hw, i, o)   # the tokenizer rejects prompt + max_new_tokens past it: no cut


def _served_at(scenario: Scenario, hw: Hardware | None, i: int, o: int) -> Callable[[int], int]:
    """The output the scenario's cutting server (the decode server under PD) would serve a
    request of prompt ``i`` and asked output ``o`` with a pool of a given size
    (:func:`sim.served.output_cut`), for the least pool a refusal names."""
    srv, _ = cutting_server(scenario.server)
    ctx = context_length(scenario, hw)[0]

    def served(pool: int) -> int:
        cut = int(output_cut(srv, np.array([i]), np.array([o]), ctx, cap=pool)[0])
        return cut if cut >= 1 else o

    return served


def _asked_output(e: ConfigError, asked: int, served: int) -> ConfigError:
    """A pool refusal of SGLang's cut of the output (``served`` tokens) naming the output the
    scenario asks for (``asked``) and the cut; ``e`` itself for any other refusal."""
    if e.key != "workload.output_len" or served == asked:
        return e
    return ConfigError(e.file, e.key, asked, f"SGLang cuts it to {served} (scheduler.py init_req_max_new_tokens), "
                       f"and {e.allowed}")


def _from_histogram(scenario: Scenario, e: ConfigError) -> ConfigError:
    """``e``, a refusal of ``workload.input_len`` or ``workload.output_len`` at its largest
    value, naming the histogram file that value comes from where the length is a ``file``
    histogram (the scenario states no such number: it was named as
    ``workload.input_len = 5000`` with 5000 nowhere in the scenario); else ``e`` itself, as
    for a refusal of the histogram file (its value the path or header, not a length)."""
    w = scenario.workload
    dist = {"workload.input_len": w.input_len, "workload.output_len": w.output_len}.get(e.key)
    if dist is None or dist.kind != "file" or not isinstance(e.value, (int, np.integer)):
        return e
    return ConfigError(e.file, f"{e.key}.path", dist.path, f"its longest length is {e.value} tokens: {e.allowed}")


def check_pool(scenario: Scenario) -> None:
    """The KV-pool part of :func:`check_fits` alone, for one server (no disaggregation): a
    generated workload's largest request that the pool can never hold is refused, and a
    trace's rows as :func:`check_trace_rows` refuses them (their outputs cut as the run cuts
    them, with the context length of the scenario's profile where it has one, as
    ``specsched run`` reads it); a conversation's turns are checked when the run builds them
    (:func:`served_requests`). The runtime calls it, and :func:`check_context`, before
    building the model (runtime/engine.py ``check_runnable``): the rest of :func:`check_fits`
    reads the profile's hardware for weights and memory, which the device measured there
    does not have.

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

    i, o = largest_request(scenario)
    # the output as SGLang cuts it (served_requests), as check_fits checks it
    hw = scenario_hardware(scenario)
    o_served = int(trace_output_cut(scenario, np.array([i]), np.array([o]), hw)[0])
    try:
        check_request_pool(scenario_file(scenario), scenario.server, "server", i, o_served, w.ignore_eos,
                           _served_at(scenario, hw, i, o))
    except ConfigError as e:
        raise _from_histogram(scenario, _asked_output(e, o, o_served)) from None


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
    from specsched.sim.trace import load_trace, read_columns

    w = scenario.workload
    tr = load_trace(w.trace, w.num_requests, scenario.path or None)
    columns = read_columns(w.trace, scenario.path or None)
    path = scenario_data_path(w.trace.path, scenario.path or None)
    aborts, halves = trace_rejections(scenario, tr.input_len, tr.output_len, hw)
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
    served = np.flatnonzero([a is None for a in aborts])
    found = first_never_fit(scenario, *served_rows(scenario, tr.input_len[served], tr.output_len[served], hw))
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
                      f"{CUT_NOT_ENOUGH if key == columns.output_len else ''}; drop or shorten those rows")


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


def _context(scenario: Scenario, hw: Hardware | None) -> None:
    """:func:`check_context` with the profile's hardware read."""
    if context_length(scenario, hw)[0] is None:
        return
    w = scenario.workload
    if w.kind == "trace":
        return   # rows past the context fail as SGLang rejects them (trace_aborts, check_trace_rows)
    if w.kind == "multi_turn":
        from specsched.sim.workload import make_requests

        specs, cuts = cut_turns(scenario, make_requests(w, scenario.seed, scenario.path or None), hw, None)
        check_turn_context(scenario, specs, hw, asked={i: a for i, a, _ in cuts})
    else:
        _check_context(scenario, hw, *largest_request(scenario))


def check_hardware(scenario: Scenario, hw: Hardware | None) -> None:
    """Refuse a profile whose weights leave no KV pool on its GPU: SGLang stops at start
    (model_executor/pool_configurator.py ``MemoryPoolConfig``: "Not enough memory").
    Without this the run silently kept the generic default pool (724,000 tokens). Part of
    :func:`check_fits`, and run by every :class:`sim.engine.SimEngine` (the Python API
    simulated such a server at that pool where the command line refused it).

    Raises:
        ConfigError: naming ``hardware.weight_bytes``, ``server.mem_fraction_static`` or
            ``server.dp_size``, as :func:`check_fits`."""
    from specsched.sim.defaults import (
        activation_tokens,
        attention_tp_hardware,
        decode_graph_mib_per_bs,
        kv_pool_tokens,
        loaded_weight_bytes,
        mem_fraction_static_of,
    )

    if hw is None or hw.weight_bytes is None:
        return
    srv = scenario.server
    mfs = mem_fraction_static_of(srv, hw, given=scenario._server_given)
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
    # a DP-attention rank's GPUs also hold the attention split over tp / dp (sim/defaults.py
    # attention_tp_hardware): weights that leave a pool at the TP split may leave none then
    dp_hw = attention_tp_hardware(hw, srv.attn_dp_size)
    if (dp_hw is not hw and kv_pool_tokens(dp_hw, mfs, srv.page_size, speculative=spec) == 0
            and kv_pool_tokens(hw, mfs, srv.page_size, speculative=spec) != 0):
        raise ConfigError(scenario_file(scenario), "server.dp_size", srv.dp_size,
                          f"with DP attention each GPU holds the attention split over tp / dp = "
                          f"{hw.tp_size // srv.attn_dp_size} GPUs ({_gib(dp_hw.weight_bytes - hw.weight_bytes)} more "
                          f"weights per GPU, hardware.dp_attention_weight_bytes): {_gib(loaded_weight_bytes(dp_hw, spec))} "
                          f"leave no KV pool on one {hw.gpu or hw.platform} ({_gib((hw.memory_mib or 0) * 2**20)}) at "
                          f"mem_fraction_static {mfs}; SGLang stops at start ('Not enough memory'): use a smaller dp_size")
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


def _launched_servers(scenario: Scenario) -> list[tuple[str, Any]]:
    """(scenario key, server arguments) of each server SGLang launches for ``scenario``: the
    server, or under disaggregation its prefill and decode servers (the top-level server is
    then only the roles' template, never launched)."""
    if scenario.server.disaggregation is None:
        return [("server", scenario.server)]
    return [(f"server.disaggregation.{r}.server", scenario.server.role_server(r)) for r in ("prefill", "decode")]


def check_chunk_pages(scenario: Scenario) -> None:
    """Refuse a chunk budget that is not whole pages, as SGLang 0.5.23 refuses to start
    (arg_groups/validation_hook.py ``check_server_args``: "chunked_prefill_size must be
    divisible by page_size", on the resolved arguments, so on the page size SGLang's backend or
    model override sets; with DP attention on each rank's ``chunked_prefill_size // dp_size``,
    which arg_groups/parallel_hook.py ``_handle_data_parallelism`` divides first;
    :func:`sim.server_args.chunk_pages_refusal`). Checked with the run's other start-up checks,
    after the DP size's own, so the simulator's own unit runs may still cut chunks of any size
    at page boundaries."""
    servers = _launched_servers(scenario)
    for where, s in servers:
        ranks = s.dp_size if s.enable_dp_attention else 1
        why = chunk_pages_refusal(s.chunked_prefill_size, s.page_size, ranks, s.disaggregation_mode)
        if why is not None:
            raise ConfigError(scenario_file(scenario), f"{where}.chunked_prefill_size", s.chunked_prefill_size, why)


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

    servers = _launched_servers(scenario)
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
    # a generated workload's lengths are the scenario's own: SGLang truncates only sent rows
    truncate = (" (server.allow_auto_truncate cuts only a trace workload's rows, managers/tokenizer_manager.py "
                "_validate_one_request; shorten the lengths)" if scenario.server.allow_auto_truncate else "")
    if i > longest_prompt(ctx):
        raise ConfigError(file, "workload.input_len", i, _prompt_limit_text(ctx, source) + truncate)
    if i + o > ctx:
        raise ConfigError(file, "workload.output_len", o,
                          f"prompt {i} + output {o} tokens exceed the model's context length {ctx} "
                          f"({source}): SGLang rejects the request{truncate}")
