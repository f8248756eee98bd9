"""The requests as the server runs them, shared by every engine that replays a scenario
(the simulator and the runtime must run the same requests, or predicted and measured are
not the same run; :func:`served_requests`): SGLang's cut of ``max_new_tokens``
(:func:`output_cut`), the rows it rejects with its own error text (:func:`trace_aborts`),
the prompts it truncates under ``--allow-auto-truncate`` (:func:`auto_truncated`), a
multi-turn conversation's turns resending the cut answers (:func:`cut_turns`), the context
length the server runs with (:func:`context_length`), and the refusal of a turn that can
never run (:func:`check_turn_rows`, :func:`check_turn_context`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from specsched.sim.config import LengthDist, Scenario, scenario_file
from specsched.sim.errors import ConfigError
from specsched.sim.hardware import served_context_len
from specsched.sim.pool_fit import first_refusal, longest_prompt, max_req_input_len, never_fit_rows

if TYPE_CHECKING:
    from specsched.sim.hardware import Hardware


def served_requests(scenario: Scenario, specs: list, hw: Hardware | None,
                    seed: int | None = None) -> tuple[list, list[tuple[int, int, int]]]:
    """The requests as the server runs them, for every engine that replays ``scenario``
    (sim/engine.py ``SimEngine``, runtime/engine.py ``RuntimeEngine``: both must run the same
    requests, or predicted and measured are not the same run):

    * a ``multi_turn`` workload's turns are cut as SGLang cuts any request, each later turn
      resending the shorter answer (:func:`cut_turns`), then checked against the context
      length and the pool before the first event (:func:`check_turn_context`,
      :func:`check_turn_rows`);
    * a ``trace`` row's output, and a generated workload's request's, is cut as SGLang 0.5.23
      cuts ``max_new_tokens`` when the request reaches the scheduler (:func:`trace_output_cut`:
      scheduler.py ``init_req_max_new_tokens``): a request whose prompt fits the pool but whose
      output does not runs with the output the empty pool holds, finishing on length; one cut
      to 0 (under ``server.allow_auto_truncate``: :func:`auto_truncated`) is marked
      ``prefill_only`` and keeps the output it asked, which its client counts;
    * a ``trace`` row the server rejects (a prompt past the context or the pool's
      ``max_req_input_len``: :func:`trace_aborts`) carries SGLang's error text in its
      ``abort``; on a co-located server one the tokenizer rejects (:func:`is_tokenizer_rejection`)
      is marked ``tokenizer_reject`` and never reaches the scheduler, the others run as the
      scheduler's abort (:func:`sim.workload.scheduler_request`).

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
        specs, cuts = cut_turns(scenario, specs, hw, seed)
        check_turn_context(scenario, specs, hw, seed, asked={i: a for i, a, _ in cuts})
        check_turn_rows(scenario, specs, seed)
        return specs, cuts
    if w.kind != "trace":
        # a generated workload's outputs are cut the same way: none when its largest request
        # needs no cut (the cut only shrinks as the prompt grows); its prompts past the limits
        # are refused before the run (check_fits), so none is aborted or truncated
        i, o = largest_request(scenario)
        if int(trace_output_cut(scenario, np.array([i]), np.array([o]), hw)[0]) == o:
            return specs, cuts
    ins, outs = _spec_lengths(specs)
    if w.kind == "trace":
        aborts = trace_aborts(scenario, ins, outs, hw)
        kept, cut = served_rows(scenario, ins, outs, hw)
    else:
        aborts, kept, cut = [], ins, trace_output_cut(scenario, ins, outs, hw)
    # a deployment's router retires its rejected rows itself; on one server the tokenizer's
    # rejections never reach the scheduler
    one_server = scenario.server.disaggregation is None
    specs = list(specs)
    for k, text in enumerate(aborts):
        if text is not None:
            specs[k] = replace(specs[k], abort=text, tokenizer_reject=one_server and is_tokenizer_rejection(text))
    for k in np.flatnonzero(kept < ins).tolist():
        specs[k] = replace(specs[k], truncated_input=int(kept[k]))
    for k in np.flatnonzero(cut < outs).tolist():
        s = specs[k]
        if s.abort is None:
            cuts.append((s.index, s.output_len, int(cut[k])))
            # cut to 0 (allow_auto_truncate): served prefill only, no text; its client keeps
            # the output length it asked
            specs[k] = replace(s, output_len=int(cut[k])) if cut[k] > 0 else replace(s, prefill_only=True)
    return specs, cuts


EMPTY_PROMPT = "input_ids cannot be empty."
"""SGLang 0.5.23's error for a request whose prompt has no tokens (a trace row with 0 prompt
tokens: public traces log failed requests so): managers/io_struct.py
``GenerateReqInput._determine_batch_size``, run by ``normalize_batch_and_arguments`` at the
top of tokenizer_manager.py ``generate_request``, raises it as a ValueError that
entrypoints/http_server.py ``generate_request`` returns as the request's error, whatever
``--allow-auto-truncate`` says: the request never reaches the scheduler."""


TOKENIZER_ERRORS = (EMPTY_PROMPT, "The input (", "Requested token count exceeds the model's maximum context length")
"""How the errors of the requests SGLang 0.5.23 rejects before its scheduler begin
(:func:`server_rejections` writes them): an empty prompt's (:data:`EMPTY_PROMPT`,
managers/io_struct.py ``normalize_batch_and_arguments`` at the top of tokenizer_manager.py
``generate_request``), then tokenizer_manager.py ``_validate_one_request``'s two (a prompt of
the context or more, a prompt plus ``max_new_tokens`` past it), run by ``_tokenize_one_request``
before ``_send_one_request``: the ValueError goes back to the client from the HTTP handler, and
the scheduler runs no extend and allocates no KV for such a request. The scheduler's
``validate_input_length`` error begins "Input length (" instead: ``Req.set_finish_with_abort``
-> ``_add_request_to_queue``, a one-token prefill."""


def is_tokenizer_rejection(error: str) -> bool:
    """``error`` (a requests table's ``error`` text) is one SGLang returns before the request
    reaches its scheduler (:data:`TOKENIZER_ERRORS`), not the scheduler's abort: the
    OpenAI routes answer it with HTTP 400 instead of a stream (sim/bench_serving.py
    ``client_counting``)."""
    return error.startswith(TOKENIZER_ERRORS)


CUT_NOT_ENOUGH = ("; SGLang cuts the output to what the empty pool holds (scheduler.py init_req_max_new_tokens), "
                   "which still leaves no room here")


def output_cut(srv, ins: np.ndarray, outs: np.ndarray, ctx: int | None = None, cap: int | None = None) -> np.ndarray:
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
        cap: the pool's tokens (None: ``srv.max_total_num_tokens``; another size asks what
            the same server would serve with that pool).

    Returns:
        The outputs SGLang runs (int64 array, ``<= outs``).
    """
    ins, outs = np.asarray(ins, dtype=np.int64), np.asarray(outs, dtype=np.int64)
    page, cap = srv.page_size, srv.max_total_num_tokens if cap is None else cap
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


def served_rows(scenario: Scenario, ins: np.ndarray, outs: np.ndarray,
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

    A ``max_new_tokens`` cut to 0 (returned as 0) is served prefill only
    (schedule_batch.py ``Req.is_prefill_only``; scheduler.py ``init_req_max_new_tokens``
    writes the cut into ``sampling_params.max_new_tokens``): the request makes its prefill's
    token, which ``Req.check_finished`` caps at ``finished_len`` 0, so its stream brings no
    text (:func:`served_requests` marks it ``prefill_only``). Rows under the limits are as
    :func:`trace_output_cut` runs them."""
    ins, outs = np.asarray(ins, dtype=np.int64), np.asarray(outs, dtype=np.int64)
    ctx, _ = context_length(scenario, hw)
    cap = scenario.server.max_total_num_tokens
    if ctx is not None:
        ins = np.minimum(ins, ctx)
        outs = np.where(ins + outs > ctx, np.maximum(ctx - ins, 0), outs)
    served = output_cut(scenario.server, ins, outs, ctx)
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

    The run's results count both as failed requests (``success`` False, the text in
    ``errors``), as bench_serving's ``sglang-oai`` client does: the OpenAI routes answer the
    tokenizer's with HTTP 400 (serving_completions.py ``_handle_streaming_request`` checks a
    request before answering 200) and the scheduler's with an error chunk its client fails
    on. Its ``sglang-oai-chat`` client skips that chunk and counts the scheduler's abort
    completed, its native ``sglang`` client both (TTFT 0.0, the asked length): a comparison
    with such a line counts them so (:func:`sim.bench_serving.client_counting`). On a
    co-located server the tokenizer's rejection never reaches the scheduler
    (:func:`is_tokenizer_rejection`: no extend, no KV; the client gets the error when the
    tokenizer FIFO is done with it), the scheduler's runs as its abort (a one-token
    prefill). Under ``server.allow_auto_truncate`` no row is rejected:
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
    return trace_rejections(scenario, ins, outs, hw)[0]


def trace_rejections(scenario: Scenario, ins: np.ndarray, outs: np.ndarray,
                     hw: Hardware | None) -> tuple[list[str | None], list[tuple[int, str, str]]]:
    """:func:`trace_aborts` and :func:`one_server_rejections` of the same rows together, each
    server's checks (:func:`server_rejections`) run once for both: (the rows that fail, with
    their error text or None; the rows only one of a disaggregated deployment's two servers
    rejects, as (row, role, text))."""
    if len(ins) == 0:
        return [], []
    srv = scenario.server
    if srv.disaggregation is None:
        return server_rejections(srv, context_length(scenario, hw)[0], ins, outs), []
    prefill, decode = (_role_rejections(scenario, role, ins, outs, hw) for role in ("prefill", "decode"))
    both = [d if p is not None else None for p, d in zip(prefill, decode, strict=True)]
    one = [(k, "prefill" if p is not None else "decode", p if p is not None else d)
           for k, (p, d) in enumerate(zip(prefill, decode, strict=True)) if (p is None) != (d is None)]
    return both, one


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
    return trace_rejections(scenario, ins, outs, hw)[1]


def cut_turns(scenario: Scenario, specs: list, hw: Hardware | None,
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


def first_never_fit(scenario: Scenario, ins: np.ndarray, outs: np.ndarray) -> tuple[int, ConfigError, int] | None:
    """The first request (prompt ``ins``, output ``outs``) that a server of the scenario's
    deployment (:func:`_servers`) can never run (:func:`never_fit_rows`), as (its row, the
    refusal :func:`check_request_pool` gives it, how many more rows that server refuses), or None;
    for :func:`check_trace_rows` and :func:`check_turn_rows` to name in their own words."""
    w = scenario.workload
    for where, srv, holds_output in _servers(scenario.server):
        o_srv = outs if holds_output else np.ones_like(outs)
        decode = holds_output and srv.disaggregation_mode == "decode"
        bad = never_fit_rows(srv, ins, o_srv, w.ignore_eos, decode)
        if bad.any():
            k = int(np.argmax(bad))
            e = first_refusal(srv, where, int(ins[k]), int(o_srv[k]), w.ignore_eos, decode)
            return k, e, int(np.count_nonzero(bad)) - 1
    return None


def check_turn_rows(scenario: Scenario, specs: list, seed: int | None = None) -> None:
    """Refuse, before the first simulated event, a multi-turn workload whose turn (its prompt
    resending the conversation so far, as SGLang receives it) the server can never run
    (:func:`never_fit_rows`), naming the turn, its request and its lengths; as
    :func:`check_trace_rows` says for a trace (SGLang 0.5.23 aborts the prompt; an output is
    cut before, :func:`cut_turns`, and refused only if it does not fit even cut). Checked
    for the scenario's seed before a command runs (:func:`check_fits`) and for each run's own
    seed (``SimEngine``).

    Raises:
        ConfigError: naming ``workload.multi_turn``, the first such turn and the pool.
    """
    w = scenario.workload
    if w.kind != "multi_turn" or not specs:
        return
    found = first_never_fit(scenario, *_spec_lengths(specs))
    if found is not None:
        k, e, others = found
        s = specs[k]
        raise ConfigError(scenario_file(scenario), "workload.multi_turn", s.input_len,
                          f"turn {s.turn + 1} of a conversation (request {s.index + 1}, seed "
                          f"{scenario.seed if seed is None else seed}{f'; {others} more turns like it' if others else ''}) "
                          f"{'resends its history as' if s.turn else 'sends'} a prompt of {s.input_len} tokens with {s.output_len} output: "
                          f"{e.allowed}{CUT_NOT_ENOUGH if e.key == 'workload.output_len' else ''}; fewer turns "
                          "(multi_turn.num_turns) or shorter prompts and outputs")


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
            cut (:func:`cut_turns`): the tokenizer checks what a turn asks, before the cut.

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


def context_length(scenario: Scenario, hw: Hardware | None) -> tuple[int | None, str]:
    """The context length the server runs with and where it comes from, for the messages:
    the scenario's ``server.context_length`` (SGLang's ``--context-length``, which replaces
    the model's own: configs/model_config.py ``ModelConfig._derive_context_length``), else
    the profile's ``hardware.context_len``; (None, "") when neither says."""
    ctx = served_context_len(scenario.server.context_length, hw)
    if ctx is None:
        return None, ""
    return ctx, ("server.context_length" if scenario.server.context_length is not None else f"profile {scenario.profile}")


def largest_request(scenario: Scenario) -> tuple[int, int]:
    """The largest prompt and output a generated workload can draw (tokens)."""
    w = scenario.workload
    sp = w.shared_prefix
    # a generated-shared-prefix prompt is its group's system prompt + its question, each at most its length
    i = (sp.system_prompt_len + sp.question_len if sp is not None and w.input_len is None
         else max_len(w.input_len, scenario.path, "workload.input_len"))
    return i, max_len(w.output_len, scenario.path, "workload.output_len")


def max_len(dist: LengthDist, base: str | None, key: str) -> int:
    if dist.kind == "file":
        from specsched.sim.workload import histogram_lengths

        return int(histogram_lengths(dist.path, Path(base) if base else None, key).max())
    return int(dist.value)
