"""The ``workload`` block of a scenario: how requests reach the server (bench_serving
semantics): kind, lengths, shared prefixes, multi-turn conversations, replayed traces.

Requests are made from it by :mod:`sim.workload`, :mod:`sim.prefix_workload` and
:mod:`sim.trace`. Re-exported by :mod:`sim.config`.
"""

from __future__ import annotations

import math
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, field_validator, model_validator
from specsched.sim.errors import FieldError
from specsched.sim.strict import STRICT as _STRICT

MAX_REQUEST_TOKENS = 2**31 - 1
"""Most tokens a length a scenario states may have (a prompt, an output, a system prompt, a
question, a trace's hash block or reply): SGLang 0.5.23 keeps a request's tokens in KV slots
whose index is int32 (mem_cache/memory_pool.py ``ReqToTokenPool``: ``req_to_token`` int32), so
no request of 2**31 tokens or more, nor any part of one, can run. 2**63 and above overflowed
the simulator's int64 length arrays (an OverflowError traceback)."""
MAX_PRIORITY = 2**63 - 1
"""Largest magnitude of a request priority (``workload.priorities``): the simulator keeps them
in int64 arrays (the request table's priority column); one past it raised OverflowError."""
MAX_ARRIVAL_SPAN_S = 1e9
"""Longest expected arrival span (num_requests / request_rate) a scenario may ask for (s), and
the longest think time between two turns of a conversation (1e308 s overflowed the
simulated clock to infinity, an OverflowError traceback mid-run)."""


class LengthDist(BaseModel):
    """Token lengths: ``fixed`` (value), ``uniform`` (bench_serving random: uniform integer in
    [max(1, int(value x range_ratio)), value], SGLang benchmark/datasets/common.py
    compute_random_lens; range_ratio 0 draws from [1, value]), or ``file`` (a histogram CSV
    with columns length,weight). A key the kind does not read (range_ratio but on uniform,
    path but on file, value on file) is refused unless it is at its default."""

    model_config = _STRICT

    kind: Literal["fixed", "uniform", "file"] = Field("fixed", description="fixed, uniform (bench_serving's 'random' dataset; 'random' is accepted as a synonym) or file.")
    value: int | None = Field(None, ge=1, le=MAX_REQUEST_TOKENS, description="fixed: the length; uniform: the largest length. At most 2**31 - 1 (SGLang's KV slot index is int32).")
    range_ratio: float = Field(1.0, ge=0.0, le=1.0, description="uniform: the smallest length is max(1, int(value x range_ratio)); 0 = from 1. Left out: 1.0, every length = value (bench_serving's --random-range-ratio defaults to 0.0: state range_ratio: 0.0 for its default draw).")
    path: str | None = Field(None, description="file: CSV with columns length,weight (relative to the scenario file).")

    @field_validator("kind", mode="before")
    @classmethod
    def _bench_serving_name(cls, v: object) -> object:
        return "uniform" if v == "random" else v

    @model_validator(mode="after")
    def _fields(self) -> LengthDist:
        if self.kind in ("fixed", "uniform") and self.value is None:
            raise ValueError(f"kind {self.kind!r} needs 'value'")
        if self.kind == "file" and not self.path:
            raise ValueError("kind 'file' needs 'path'")
        for key, readers in LENGTH_KEYS_READ_BY.items():
            value = getattr(self, key)
            if self.kind not in readers and value != type(self).model_fields[key].default:
                # a value equal to the default is what the kind does anyway (fixed is uniform
                # at ratio 1) and what a full dump of the model writes: not refused
                kind = f"kind is {self.kind!r}" + (", the default" if "kind" not in self.model_fields_set else "")
                raise FieldError(f".{key}", value, f"read only by kind{'s' if len(readers) > 1 else ''} "
                                 f"{' and '.join(readers)} ({kind}): remove it"
                                 + (f", or set kind: {readers[0]}" if len(readers) == 1 else ""))
        return self


LENGTH_KEYS_READ_BY: dict[str, tuple[str, ...]] = {
    "value": ("fixed", "uniform"), "range_ratio": ("uniform",), "path": ("file",)}
"""The kinds of :class:`LengthDist` that read each key (sim/workload.py draw_lengths); a
key given to another kind, at a value other than its default, is refused: it would change
nothing (range_ratio on a fixed length still sends one length)."""


class SharedPrefixConfig(BaseModel):
    """bench_serving's generated-shared-prefix dataset (sim/prefix_workload.py): ``num_groups``
    system prompts of ``system_prompt_len`` tokens, ``prompts_per_group`` requests each (the
    system prompt + a question of ``question_len`` tokens); lengths uniform in
    [len x range_ratio, len]; shuffled unless ``ordered``. ``group_distribution: zipf`` with
    ``zipf_alpha`` draws each request's group by rank instead (0.5.23's
    ``--gsp-group-distribution zipf --gsp-zipf-alpha``): a few hot prefixes and a long tail."""

    model_config = _STRICT

    num_groups: int = Field(ge=1)
    prompts_per_group: int = Field(ge=1)
    system_prompt_len: int = Field(ge=1, le=MAX_REQUEST_TOKENS, description="Tokens of each group's system prompt (at most 2**31 - 1: SGLang's KV slot index is int32).")
    question_len: int = Field(ge=1, le=MAX_REQUEST_TOKENS, description="Tokens of each request's question (at most 2**31 - 1).")
    range_ratio: float = Field(1.0, gt=0.0, le=1.0)
    ordered: bool = False
    group_distribution: Literal["uniform", "zipf"] = Field("uniform", description="uniform: every group gets prompts_per_group requests; zipf: each request's group drawn with probability proportional to 1 / rank^zipf_alpha (group 0 the hottest), bench_serving 0.5.23 --gsp-group-distribution.")
    zipf_alpha: float | None = Field(None, gt=0.0, allow_inf_nan=False, description="The Zipf exponent (> 0): required with group_distribution zipf, refused with uniform (--gsp-zipf-alpha).")
    send_routing_key: bool = Field(False, description="Each request carries its system-prompt group as its routing key, requests of one prefix sharing one key (bench_serving 0.5.23 --gsp-send-routing-key, datasets/generated_shared_prefix.py: sent as the X-SMG-Routing-Key header, which the server's OpenAI-compatible endpoints read, serving_base.py extract_routing_key). Read by server.schedule_policy routing-key; not with workload.routing_keys.")

    @model_validator(mode="after")
    def _zipf_alpha_with_zipf(self):
        if self.group_distribution == "zipf" and self.zipf_alpha is None:
            raise FieldError("workload.shared_prefix.zipf_alpha", None,
                             "group_distribution zipf needs zipf_alpha, a number > 0")
        if self.group_distribution == "uniform" and self.zipf_alpha is not None:
            raise FieldError("workload.shared_prefix.zipf_alpha", self.zipf_alpha,
                             "only meaningful with group_distribution zipf (remove it, or set group_distribution: zipf)")
        return self


AGENTIC_REPLY_LEN = 220
"""Tokens of the original assistant reply assumed inside each growth of an agentic trace's
``prompt_tokens`` (sglang 0.5.23 benchmark/datasets/agentic_trace.py
``DEFAULT_AGENTIC_OUTPUT_LEN``: "the ~220-token average assistant reply of OpenHands-style
agentic traces", the per-turn output bench_serving asks for when --sharegpt-output-len is
not given)."""


class AgenticTraceConfig(BaseModel):
    """An agentic trace to replay as conversations (SGLang 0.5.23 bench_serving
    ``--dataset-name agentic-trace``, benchmark/datasets/agentic_trace.py
    ``AgenticTraceDataset.load``; read by sim/agentic_trace.py): a JSON file
    ``{"metadata": ..., "conversations": [[{"messages": [...], "prompt_tokens": N}, ...], ...]}``
    (OpenHands / SWE-smith style). Each conversation keeps its own turns (those with
    messages, at most ``max_turns``); turn 0's prompt is its ``prompt_tokens``; each later
    turn resends the history (the prompt and the simulated reply) plus new tokens = the
    growth of ``prompt_tokens`` since the previous turn less ``trace_reply_len`` (the reply
    the trace's own run got, which the file does not hold), at least 1. The conversation
    list is rotated by ``offset`` (modulo its length) and at most
    ``multi_turn.num_conversations`` usable conversations are taken (bench_serving's
    --dataset-offset and --num-prompts). The file is streamed: only each turn's token count
    is kept, never the message text."""

    model_config = _STRICT

    path: str = Field(description="The trace JSON (beside the scenario, as given, or a shipped example by name; gzip, bzip2, xz or a zip of one file read as it streams).")
    max_turns: int | None = Field(None, ge=1, description="At most this many turns per conversation (bench_serving --agentic-max-turns; None: all).")
    offset: int = Field(0, description="Rotate the conversation list by this many entries first, modulo its length (bench_serving --dataset-offset).")
    trace_reply_len: int = Field(AGENTIC_REPLY_LEN, ge=0, le=MAX_REQUEST_TOKENS, description="Tokens of the trace's own assistant reply assumed in each prompt_tokens growth (default 220: agentic_trace.py DEFAULT_AGENTIC_OUTPUT_LEN, the traces' average reply); a later turn's new tokens = growth - trace_reply_len, at least 1. At most 2**31 - 1 (SGLang's KV slot index is int32).")


class MultiTurnConfig(BaseModel):
    """Multi-turn conversations that resend their history (sim/prefix_workload.py
    ``multi_turn_conversations``; bench_serving's multi-turn replay,
    ``wrap_multi_turn_request_func``): turn 0's prompt is a shared system prompt of
    ``system_prompt_len`` tokens plus ``first_prompt_len`` tokens of its own; turn k's prompt
    is turn k-1's prompt + its output + ``user_len`` new tokens (a user message or tool
    result). ``num_turns`` is a count (every conversation the same) or a length-style
    distribution drawn once per conversation (seeded), so conversations differ in length.
    With ``agentic_trace`` the turn counts and per-turn prompt growth come from a trace file
    instead (``first_prompt_len``, ``user_len`` and ``num_turns`` are then
    left out, and ``num_conversations`` is an upper limit). A conversation holds one
    concurrency slot from its first send to its last token (bench_serving's semaphore wraps
    the whole conversation); between a turn's last token and the next turn's send the client
    thinks for ``think_time_s`` (fixed, or exponential with that mean). Output lengths per
    turn come from ``workload.output_len``."""

    model_config = _STRICT

    num_conversations: int | None = Field(None, ge=1, description="Conversations sent in all (with a fixed num_turns, workload.num_requests = num_conversations x num_turns); with agentic_trace, at most this many (bench_serving --num-prompts; None: every usable one).")
    num_turns: int | LengthDist | None = Field(None, description="Turns (requests) per conversation: a count >= 1, or a distribution ({kind: uniform, value: 12, range_ratio: 0.25}, fixed or a length,weight histogram file) drawn per conversation. Left out with agentic_trace.")
    system_prompt_len: int = Field(0, ge=0, le=MAX_REQUEST_TOKENS, description="Tokens of a system prompt every conversation starts with (shared: one radix-tree prefix; at most 2**31 - 1, SGLang's KV slot index is int32). With agentic_trace, carved out of turn 0's prompt_tokens.")
    first_prompt_len: LengthDist | None = Field(None, description="Turn 0's own prompt tokens after the system prompt (one draw per conversation). Left out with agentic_trace.")
    user_len: LengthDist | None = Field(None, description="New tokens appended to the history at each later turn (one draw per turn). Left out with agentic_trace.")
    think_time_s: float = Field(0.0, ge=0.0, le=MAX_ARRIVAL_SPAN_S, description="Client pause between a turn's last token and the next turn's send (s); at most 1e9 s, the longest arrival span simulated.")
    think_time_dist: Literal["fixed", "exponential"] = Field("fixed", description="fixed: every pause is think_time_s; exponential: pauses drawn with mean think_time_s (seeded). With fixed pauses every later turn arrives at the same phase of the step that delivered its previous answer, so TTFT figures hinge on that phase (1 ms of pause moved a median TTFT 4-8 % in docs/measurements/h100-v48.md): read them over --seeds, or use exponential.")
    dp_ranks: int = Field(1, ge=1, description="The simulated instance is one of this many DP-attention ranks behind SGLang's default round-robin dispatch (0.5.23 data_parallel_controller.py round_robin_scheduler, which ignores prefixes): a later turn lands on the rank that holds its history with probability 1 / dp_ranks; otherwise only the shared system prompt can hit. Refused where a server runs DP attention (server.enable_dp_attention), whose ranks are simulated.")
    agentic_trace: AgenticTraceConfig | None = Field(None, description="Replay a bench_serving agentic-trace file's conversations (their own turn counts and prompt growth) instead of drawing them.")

    @field_validator("num_turns", mode="before")
    @classmethod
    def _turns_not_bool(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("num_turns must be a count >= 1 or a length distribution")
        return v

    @model_validator(mode="after")
    def _source(self) -> MultiTurnConfig:
        if self.think_time_dist != "fixed" and self.think_time_s == 0:
            raise FieldError("workload.multi_turn.think_time_dist", self.think_time_dist,
                             "draws pauses with mean think_time_s, which is 0 (every pause 0): set think_time_s > 0, "
                             "or think_time_dist: fixed (a fixed pause, here none)")
        if isinstance(self.num_turns, int) and self.num_turns < 1:
            raise FieldError("workload.multi_turn.num_turns", self.num_turns, "must be >= 1 (or a distribution)")
        if self.agentic_trace is not None:
            for key in ("num_turns", "first_prompt_len", "user_len"):
                if getattr(self, key) is not None:
                    raise FieldError(f"workload.multi_turn.{key}", getattr(self, key),
                                     "comes from the agentic trace: leave it out with agentic_trace")
            return self
        for key in ("num_conversations", "num_turns", "first_prompt_len", "user_len"):
            if getattr(self, key) is None:
                raise FieldError(f"workload.multi_turn.{key}", None, "required (or give agentic_trace)")
        return self

    @property
    def fixed_turns(self) -> int | None:
        """The turns of every conversation when they are one count, else None (drawn or read)."""
        return self.num_turns if isinstance(self.num_turns, int) and self.agentic_trace is None else None


class TraceColumns(BaseModel):
    """Column (CSV) or key (JSONL) names of a trace's arrival time, prompt and output length."""

    model_config = _STRICT

    timestamp: str = Field("timestamp", description="Arrival time column.")
    input_len: str = Field("input_length", description="Prompt length column (tokens).")
    output_len: str = Field("output_length", description="Output length column (tokens).")
    hash_ids: str | None = Field(None, description="Column of prompt block ids (Mooncake's hash_ids: a JSON list per row; in a CSV a JSON list or ids separated by spaces/semicolons): requests sharing leading ids share those prompt blocks in the prefix cache. None: prompts share nothing.")


TRACE_LAYOUTS: dict[str, tuple[TraceColumns, str]] = {
    "azure": (TraceColumns(timestamp="TIMESTAMP", input_len="ContextTokens", output_len="GeneratedTokens"), "datetime"),
    "mooncake": (TraceColumns(timestamp="timestamp", input_len="input_length", output_len="output_length",
                              hash_ids="hash_ids"), "ms"),
    "burstgpt": (TraceColumns(timestamp="Timestamp", input_len="Request tokens", output_len="Response tokens"), "s"),
}
"""Public production trace layouts: the Azure LLM inference traces (CSV, TIMESTAMP as a date
and time) and Mooncake's (JSONL, timestamp in ms, hash_ids = ids of the prompt's 512-token
blocks, fed to the radix prefix cache; a row without hash_ids shares nothing) and BurstGPT's
(CSV: Timestamp in s from the trace's start, Request tokens, Response tokens; its other
columns, Model, Total tokens and Log Type, are not read; a failed request's 0 response
tokens is sent as 1)."""


class TraceConfig(BaseModel):
    """A request trace to replay (:mod:`sim.trace`): one request per row, in arrival order.

    ``layout`` picks the column names and time unit of a public trace (``azure``,
    ``mooncake``, ``burstgpt``); ``columns``/``time_unit`` given explicitly win over the
    layout's, name by name (``columns: {timestamp: Time}`` keeps the layout's other names).
    Arrival = (timestamp - first timestamp) x ``time_scale`` (bench_serving's
    ``--slowdown-factor`` semantics: 2 replays at half the rate). The file is read once,
    streamed, at most ``workload.num_requests`` rows (with ``sort``: every row, then the
    first ``num_requests`` by time).
    """

    model_config = _STRICT

    path: str = Field(description="CSV or JSONL file: beside the scenario, as given, or a shipped example by name.")
    format: Literal["auto", "csv", "jsonl"] = Field("auto", description="auto: by suffix (.jsonl/.json -> jsonl, else csv).")
    layout: Literal["custom", "azure", "mooncake", "burstgpt"] = Field("custom", description="azure: TIMESTAMP (date-time), ContextTokens, GeneratedTokens; mooncake: timestamp (ms), input_length, output_length, hash_ids; burstgpt: Timestamp (s), Request tokens, Response tokens; custom: columns. Left unset (with no columns or time_unit), a file whose columns are exactly one of these layouts' is read as it, said in a note.")
    columns: TraceColumns | None = Field(None, description="Column names (default: the layout's).")
    time_unit: Literal["s", "ms", "us", "ns", "datetime"] | None = Field(None, description="Unit of the timestamp column (default: the layout's, else s). A first timestamp of 1e11 s or more in this unit (an epoch time in a finer unit) is refused, naming the unit that reads it as a date.")
    time_scale: float = Field(1.0, gt=0, description="Multiplies every arrival time (2 = half the rate).")
    block_size: int = Field(512, ge=1, le=MAX_REQUEST_TOKENS, description="Prompt tokens per hash_ids block (Mooncake: 512); at most 2**31 - 1, the most tokens of one request (SGLang's KV slot index is int32).")
    sort: bool = Field(False, description="Replay the rows in timestamp order (ties in file order) instead of refusing a decreasing timestamp: a log written as requests finish. The whole file is read; num_requests then takes the first N by time.")

    def resolved(self) -> tuple[TraceColumns, str]:
        """(columns, time unit) after applying the layout."""
        cols, unit = TRACE_LAYOUTS.get(self.layout, (TraceColumns(), "s"))
        if self.columns is not None:   # the names given, over the layout's
            cols = cols.model_copy(update={k: getattr(self.columns, k) for k in self.columns.model_fields_set})
        return cols, self.time_unit or unit


class WorkloadConfig(BaseModel):
    """How requests reach the server (bench_serving semantics).

    burst: ``num_requests`` sent at t=0 (they reach the scheduler spaced by the profile's
        tokenizer/IPC ingest time). closed_loop: ``concurrency`` in flight, each finished
        request replaced at once, ``num_requests`` in all. poisson: gaps at ``request_rate``
        req/s, exponential, or gamma with shape ``burstiness`` and mean 1/request_rate when
        burstiness is given (vLLM benchmark_serving's --burstiness; SGLang 0.5.23's
        bench_serving has none), at most ``max_concurrency`` in flight; the client timer
        starts when the concurrency slot is acquired. trace: arrival times and lengths from
        ``trace`` (:class:`TraceConfig`), at most ``num_requests`` rows, at most
        ``max_concurrency`` in flight. multi_turn: ``concurrency`` conversations in flight,
        each a closed loop of turns that resend their history (``multi_turn``,
        :class:`MultiTurnConfig`); with ``request_rate`` the conversations start at that rate
        (exponential gaps, bench_serving's ``get_request`` over its multi-turn rows), at most
        ``concurrency`` of them in flight (None: no cap).
    """

    model_config = _STRICT

    kind: Literal["burst", "closed_loop", "poisson", "trace", "multi_turn"] = Field(description="Client behaviour: burst, closed_loop, poisson, trace or multi_turn (see above).")
    num_requests: int | None = Field(None, ge=1, description="Requests sent in all (trace: the first N rows, default all; shared_prefix: num_groups x prompts_per_group, filled in when left out; multi_turn: the conversations' turns, likewise).")
    concurrency: int | None = Field(None, ge=1, description="closed_loop: requests kept in flight; multi_turn: conversations in flight (with request_rate: at most this many; None: no cap).")
    request_rate: float | None = Field(None, gt=0, allow_inf_nan=True, description="Poisson arrival rate, requests/s; .inf sends every request at t=0 (bench_serving's --request-rate inf), still capped by max_concurrency. multi_turn: conversations started per second (each then sends its turns back to back).")
    burstiness: float | None = Field(None, gt=0, allow_inf_nan=True, description="poisson: gamma shape of the gaps, mean 1/request_rate (vLLM's --burstiness; 1 = exponential; .inf = every gap exactly 1/request_rate).")
    normalize_arrivals: bool = Field(False, description="poisson: rescale the drawn send times so the last one falls at exactly num_requests / request_rate, as `vllm bench serve` does from 0.10.0 (vllm/benchmarks/serve.py get_request, target_total_delay_s; 0.9.2 did not); SGLang's bench_serving does not.")
    max_concurrency: int | None = Field(None, ge=1, description="poisson, trace: most requests in flight (None: no cap).")
    input_len: LengthDist | None = Field(None, description="Prompt lengths (not for trace; or shared_prefix).")
    output_len: LengthDist | None = Field(None, description="Output lengths (every request generates exactly this many tokens: ignore_eos; not for trace).")
    trace: TraceConfig | None = Field(None, description="trace: the file to replay and its columns.")
    shared_prefix: SharedPrefixConfig | None = Field(None, description="Prompts that share prefixes, bench_serving's generated-shared-prefix dataset (replaces input_len).")
    multi_turn: MultiTurnConfig | None = Field(None, description="multi_turn: the conversations (replaces input_len).")
    priorities: list[Annotated[int, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)]] | None = Field(None, min_length=1, description="Request priorities, one drawn uniformly per request (seeded); read with server.enable_priority_scheduling. Each within +-(2**63 - 1) (an int64).")
    routing_keys: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(None, min_length=1, description="Routing keys (the routing_key a client sends with each request, SGLang's GenerateReqInput.routing_key: a tenant, an adapter, a session), one drawn uniformly per request (seeded; per conversation under multi_turn, its turns sharing it as a session does); list a key twice to draw it twice as often. Read by server.schedule_policy routing-key.")
    steady_state_concurrency_ratio: float | None = Field(None, gt=0.0, le=1.0, description="bench_serving steady_state_serving's --steady-state-concurrency-ratio: adds its separate steady-state result, read over the longest span with at least this share of the peak in flight (sim/steady_state.py): the summary's steady_* keys, a Steady-State Result block in the report and steady_state.jsonl in the results folder; every whole-run figure (throughputs included) stays bench_serving's. None: no steady-state result.")
    ignore_eos: bool = Field(True, description="Requests sent with ignore_eos (bench_serving's random and shared-prefix datasets do): every request generates its output length, and sglang 0.5.23 reserves its remaining output at ratio 1.0.")

    @field_validator("request_rate", "burstiness", mode="before")
    @classmethod
    def _infinity_spelled_as_text(cls, v: object) -> object:
        """``inf`` written as bench_serving's command line has it (``--request-rate inf``) is
        text in YAML: refused with what to write instead (YAML's infinity is ``.inf``)."""
        if isinstance(v, str) and v.strip().lower().lstrip("+") in ("inf", "infinity"):
            raise ValueError("write .inf (YAML's infinity, bench_serving's --request-rate inf) or a number > 0")
        return v

    @model_validator(mode="before")
    @classmethod
    def _bench_serving_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "num_prompts" in data and "num_requests" not in data:
            data = {("num_requests" if k == "num_prompts" else k): v for k, v in data.items()}
        mt = data.get("multi_turn") if isinstance(data, dict) else None
        if isinstance(mt, dict) and data.get("num_requests") is None and mt.get("agentic_trace") is None:
            c, t = mt.get("num_conversations"), mt.get("num_turns")
            if (isinstance(c, int) and isinstance(t, int) and not isinstance(t, bool) and c >= 1 and t >= 1):
                # num_requests defaults to every turn of every conversation; a bad count is
                # left for the block's own validation to name
                data = {**data, "num_requests": c * t}
        sp = data.get("shared_prefix") if isinstance(data, dict) else None
        if isinstance(sp, dict) and data.get("num_requests") is None:
            g, k = sp.get("num_groups"), sp.get("prompts_per_group")
            if all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in (g, k)):
                data = {**data, "num_requests": g * k}   # as bench_serving makes them; a bad count is the block's to name
        return data

    @model_validator(mode="after")
    def _one_source_of_routing_keys(self) -> WorkloadConfig:
        if self.routing_keys and self.shared_prefix is not None and self.shared_prefix.send_routing_key:
            raise FieldError("workload.routing_keys", self.routing_keys,
                             "not with workload.shared_prefix.send_routing_key (the prefix group is each request's key); "
                             "drop one of the two")
        return self

    @model_validator(mode="after")
    def _kind_fields(self) -> WorkloadConfig:
        if self.kind == "trace":
            if self.trace is None:
                raise ValueError("kind 'trace' needs a 'trace' block (path; layout or columns)")
            if self.shared_prefix is not None:
                raise ValueError("'shared_prefix' does not apply to kind 'trace'")
            return self
        mt = self.multi_turn
        if (mt is None) != (self.kind != "multi_turn"):
            raise ValueError("kind 'multi_turn' needs a 'multi_turn' block" if mt is None
                             else f"'multi_turn' is read only by kind 'multi_turn' (kind is {self.kind!r})")
        if mt is not None:
            if self.input_len is not None or self.shared_prefix is not None:
                raise ValueError("multi_turn gives the prompts: drop 'input_len' / 'shared_prefix'")
            # conversations start at once or at exponential gaps (bench_serving get_request),
            # their slots are 'concurrency': these keys would be accepted and ignored
            for key in ("burstiness", "max_concurrency", "trace"):
                if getattr(self, key) is not None:
                    raise FieldError(f"workload.{key}", getattr(self, key) if key != "trace" else "<block>",
                                     "not read by kind 'multi_turn' (conversations in flight: 'concurrency'; "
                                     "started at exponential gaps: 'request_rate')")
            if self.normalize_arrivals:
                raise FieldError("workload.normalize_arrivals", True, "applies to kind 'poisson' only")
            if self.concurrency is None and self.request_rate is None:
                raise ValueError("multi_turn needs 'concurrency' (conversations in flight) or 'request_rate' "
                                 "(conversations started per second)")
            rate = self.request_rate
            if rate is not None and rate != rate:
                raise FieldError("workload.request_rate", rate, "must be a number > 0 (or .inf)")
            if rate is not None and mt.num_conversations is not None and mt.num_conversations / rate > MAX_ARRIVAL_SPAN_S:
                raise FieldError("workload.request_rate", rate, f"{mt.num_conversations} conversations would start over "
                                 f"about {mt.num_conversations / rate:.3g} s; at most {MAX_ARRIVAL_SPAN_S:.0e} s is simulated")
            if mt.fixed_turns is None:
                if self.num_requests is not None:
                    raise FieldError("workload.num_requests", self.num_requests, "the requests are the conversations' "
                                     "turns, drawn or read from the agentic trace: leave num_requests out")
                if self.output_len is None:
                    raise ValueError("kind 'multi_turn' needs 'output_len' (per turn)")
                return self
            n = mt.num_conversations * mt.fixed_turns
            if self.num_requests != n:
                raise FieldError("workload.num_requests", self.num_requests, f"multi_turn makes {n} requests "
                                 f"(num_conversations x num_turns); num_requests must equal it: leave it out or set {n} (fewer "
                                 "requests: set workload.multi_turn.num_conversations)")
            if self.output_len is None:
                raise ValueError("kind 'multi_turn' needs 'output_len' (per turn)")
            return self
        sp = self.shared_prefix
        if sp is not None:
            if self.input_len is not None:
                raise ValueError("give one of 'input_len' and 'shared_prefix', not both")
            if self.num_requests != sp.num_groups * sp.prompts_per_group:
                raise FieldError("workload.num_requests", self.num_requests, f"shared_prefix makes "
                                 f"{sp.num_groups * sp.prompts_per_group} requests (num_groups x prompts_per_group); "
                                 f"num_requests must equal it: leave it out or set {sp.num_groups * sp.prompts_per_group} (fewer "
                                 "requests: set workload.shared_prefix.num_groups)")
        for key in ("num_requests", "output_len") + (("input_len",) if sp is None else ()):
            if getattr(self, key) is None:
                raise ValueError(f"kind {self.kind!r} needs '{key}'")
        if self.trace is not None:
            raise ValueError(f"'trace' is read only by kind 'trace' (kind is {self.kind!r})")
        if self.kind == "closed_loop" and self.concurrency is None:
            raise ValueError("closed_loop needs 'concurrency'")
        if self.kind == "poisson" and self.request_rate is None:
            raise ValueError("poisson needs 'request_rate'")
        if self.burstiness is not None and self.kind != "poisson":
            raise ValueError("'burstiness' applies to kind 'poisson' only")
        if self.burstiness is not None and self.burstiness != self.burstiness:
            raise FieldError("workload.burstiness", self.burstiness, "must be a number > 0 (or .inf)")
        rate, shape = self.request_rate, self.burstiness
        if (shape is not None and rate is not None and not math.isinf(shape) and not math.isinf(rate)
                and not math.isfinite(1.0 / (rate * shape))):
            # vLLM's gap scale 1 / (request_rate x burstiness) overflows: every gap is NaN
            # (numpy's gamma at an infinite scale), and the run waited forever on NaN times
            least = 1.0 / sys.float_info.max / rate
            raise FieldError("workload.burstiness", shape, f"the gamma gaps' scale 1 / (request_rate x burstiness) "
                             f"overflows at request_rate {rate:g}: above {least:.3g}")
        if self.normalize_arrivals and self.kind != "poisson":
            raise ValueError("'normalize_arrivals' applies to kind 'poisson' only")
        rate = self.request_rate
        if rate is not None and rate != rate:
            raise FieldError("workload.request_rate", rate, "must be a number > 0 (or .inf)")
        if rate is not None and self.num_requests / rate > MAX_ARRIVAL_SPAN_S:
            raise FieldError("workload.request_rate", rate, f"{self.num_requests} requests would arrive over about "
                             f"{self.num_requests / rate:.3g} s; at most {MAX_ARRIVAL_SPAN_S:.0e} s is simulated")
        return self
