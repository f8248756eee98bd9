"""Workloads: request lengths and client behaviour, seeded (bench_serving semantics).

Lengths: ``fixed``; ``uniform`` as bench_serving's random dataset (an integer uniform in
[max(1, int(value x range_ratio)), value]); ``file``: a CSV histogram (columns
``length,weight``) drawn with replacement; a ``trace`` workload reads lengths and arrival
times from its file (:mod:`sim.trace`). Arrivals: :func:`arrival_times` gives the open-loop
send times; :class:`Clients` is bench_serving's client side for a caller that owns the
clock (the runtime's wall clock); the simulator runs the same behaviour as SimPy
processes. Randomness is split by purpose (lengths, arrivals) so that changing one does not
shift the other.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.random  # noqa: F401  (imported with the module, not on a run's first draw)
from specsched.sim import seed_streams
from specsched.sim.bundled import scenario_data_path
from specsched.sim.config import LengthDist, Scenario, WorkloadConfig
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.frozen_slots import become, writable_twin
from specsched.sim.input_files import is_input_file, read_input
from specsched.sim.request import Req


@dataclass(frozen=True, slots=True, init=False)
class RequestSpec:
    """One request to send: ``index`` (send order), prompt and output lengths (tokens), for
    a trace its arrival time (s from the first request; None otherwise), the prompt's token
    ids when the workload shares prefixes (an int64 array, or for a trace with block ids a
    :class:`sim.trace_prefix.BlockTokens` that builds them when sliced; None otherwise) and
    its priority (None: the server's default), its 0-based turn within its conversation
    (multi_turn; 0 for a request that is not part of one), its routing key (None: sent
    without one), for a request the server rejects (:func:`sim.served.served_requests`) the
    error text the client gets back (None: it is served) and whether the tokenizer rejects it
    (``tokenizer_reject``: it never reaches the scheduler; False for the scheduler's abort, a
    one-token prefill), and for a prompt the server truncates (``server.allow_auto_truncate``)
    the tokens it keeps (None: the whole prompt; ``input_len`` stays the prompt sent, which
    bench_serving counts) and whether the server cut its ``max_new_tokens`` to 0 there
    (``prefill_only``: served as a request asking no output, though ``output_len`` stays the
    length asked, which its client counts: no text reaches it)."""

    index: int
    input_len: int
    output_len: int
    arrival_s: float | None = None
    tokens: np.ndarray | None = None
    priority: int | None = None
    turn: int = 0
    routing_key: str | None = None
    abort: str | None = None
    truncated_input: int | None = None
    tokenizer_reject: bool = False
    prefill_only: bool = False

    def __init__(self, index: int, input_len: int, output_len: int, arrival_s: float | None = None,
                 tokens: np.ndarray | None = None, priority: int | None = None, turn: int = 0, routing_key: str | None = None,
                 abort: str | None = None, truncated_input: int | None = None, tokenizer_reject: bool = False,
                 prefill_only: bool = False) -> None:
        # one C call for the fields, not one a field (sim/frozen_slots.py); frozen once built
        become(self, "__class__", _SpecFields)
        self.index = index
        self.input_len = input_len
        self.output_len = output_len
        self.arrival_s = arrival_s
        self.tokens = tokens
        self.priority = priority
        self.turn = turn
        self.routing_key = routing_key
        self.abort = abort
        self.truncated_input = truncated_input
        self.tokenizer_reject = tokenizer_reject
        self.prefill_only = prefill_only
        self.__class__ = RequestSpec

    @property
    def served_lengths(self) -> tuple[int, int]:
        """(prompt, output) tokens the server runs: an aborted request's one-token prompt and
        one token (:func:`scheduler_request`), a truncated prompt's kept tokens
        (``server.allow_auto_truncate``: :func:`sim.served.served_requests`), else the
        request's own."""
        if self.abort is not None:
            return 1, 1
        out = 1 if self.prefill_only else max(self.output_len, 1)
        return (self.input_len if self.truncated_input is None else self.truncated_input), out


_SpecFields = writable_twin(RequestSpec)


def scheduler_request(spec: RequestSpec, ignore_eos: bool) -> Req:
    """The scheduler's request for a sent ``spec`` (both engines build it here, so a field a
    workload draws reaches the simulated and the measured scheduler alike).

    A request the server aborts (``spec.abort``) reaches the scheduler as SGLang 0.5.23 queues
    it: managers/scheduler.py ``handle_generate_request`` -> ``Req.set_finish_with_abort``
    (managers/schedule_batch.py) replaces its prompt by one token "to skip the long prefill"
    and sets ``to_finish``, so it joins a prefill batch with one extend token, produces one
    token and finishes there with an error; bench_serving counts it as failed.

    A request asking 0 output tokens (a trace row; ``max_new_tokens`` 0) runs as one token:
    SGLang 0.5.23 serves it prefill only. Its prefill's forward gives the batch a next token
    (managers/tp_worker.py: a dummy zero token when the batch ``is_prefill_only``,
    managers/schedule_batch.py ``Req.is_prefill_only``, which is False with speculative
    decoding on, and a sampled one then), and ``Req.update_finish_state`` finishes it at once
    with ``finished_len`` 0 (``len(output_ids) >= max_new_tokens``; a stop token capped to 0 by
    ``_cap_finished_len_at_max_new_tokens``): it holds its prompt's KV until that prefill's
    results, and its client gets no text (``completion_tokens`` 0). Under overlap scheduling
    it sits out the next decode as a one-token request does (``Req.next_output_finishes_by_length``:
    ``len(output_ids) + 1 >= max_new_tokens`` holds for both; managers/scheduler.py
    ``_reqs_finishing_inflight``), and a running batch of such requests only runs no decode
    (``get_next_batch_to_run``: ``not running_batch.is_prefill_only``). Its admission reserves
    no output token (``Req.asked_no_output``: schedule_policy.py ``PrefillAdder.add_one_req``
    charges ``min(max(max_new_tokens - len(output_ids), 0), CLIP_MAX_NEW_TOKENS)``, 0), and its
    prefill allocates the prompt's KV only (schedule_batch.py ``ScheduleBatch.prepare_for_extend``),
    as any request's. The records keep the
    asked 0 (:meth:`sim.records.Recorder.request_sent`), which the latencies read as
    bench_serving does (:func:`sim.metrics.request_latencies`). A request the server cut to
    ``max_new_tokens`` 0 (``spec.prefill_only``, under ``--allow-auto-truncate``) runs the same
    way; its records keep the length it asked, and its token reaches no client
    (:meth:`sim.records.Recorder.mark_no_text`)."""
    if spec.abort is None and spec.truncated_input is None and spec.output_len > 0 and not spec.prefill_only:
        # most runs' requests
        return Req(spec.index, spec.input_len, spec.output_len, tokens=spec.tokens, ignore_eos=ignore_eos,
                   priority=spec.priority, routing_key=spec.routing_key)
    tokens = spec.tokens if spec.abort is None or spec.tokens is None else np.zeros(1, np.int64)
    return Req(spec.index, *spec.served_lengths, tokens=tokens, ignore_eos=ignore_eos,
               priority=spec.priority, routing_key=spec.routing_key,
               asked_no_output=(spec.output_len == 0 or spec.prefill_only) and spec.abort is None)


def with_request_labels(requests: Any, specs: list[RequestSpec]) -> Any:
    """The requests table (:class:`~sim.tables.Columns`) with the labels the workload sent,
    where any request carries one: ``priority`` (float: NaN for a request sent without one,
    the server's default) and ``routing_key`` ("" for none), by request id. A what-if on a
    priority or routing-key policy is then read per class; a run without labels is returned
    unchanged (its table has neither column)."""
    from specsched.sim.tables import Columns

    prio = {s.index: s.priority for s in specs if s.priority is not None}
    keys = {s.index: s.routing_key for s in specs if s.routing_key is not None}
    if not prio and not keys:
        return requests
    rid = requests["rid"].tolist()
    cols = dict(requests.data)
    if prio:
        cols["priority"] = np.array([prio.get(r, np.nan) for r in rid], dtype=float)
    if keys:
        cols["routing_key"] = np.array([keys.get(r, "") for r in rid], dtype=object)
    return Columns(cols)


MAX_HISTOGRAM_LENGTH = 1 << 62
"""A histogram length at or past this is refused (the lengths are held as int64)."""


def histogram(path: str, base: Path | None, key: str) -> tuple[np.ndarray, np.ndarray]:
    """A ``file`` length histogram as (lengths int64 (n,), probabilities (n,) summing to 1);
    ``path`` as a scenario names it (a shipped histogram by name too).

    Raises:
        ConfigError: a missing or malformed histogram file.
    """
    p = scenario_data_path(path, base)   # a shipped histogram (sharegpt-like-lengths-*.csv) by name too
    if not is_input_file(p):
        raise ConfigError(str(base or "<scenario>"), f"{key}.path", path, "length histogram file does not exist (looked for "
                          "it as given, beside the scenario and among the shipped examples)")
    lengths, weights = _histogram_rows(p, key)
    w = np.asarray(weights, dtype=float)
    total = w.sum()
    if lengths and np.isfinite(total) and total <= 0:
        raise ConfigError(str(p), key, path, "its weights sum to 0: at least one weight must be > 0")
    if not lengths or not np.isfinite(total) or total <= 0:
        raise ConfigError(str(p), key, path, "needs columns length,weight and >= 1 row, weights >= 0 with a positive sum")
    return np.asarray(lengths, dtype=np.int64), w / total


def _histogram_rows(p: Path, key: str) -> tuple[list[int], list[float]]:
    """A histogram CSV's (lengths, weights), each cell checked: one line naming the file's line
    and column for anything else (a short or long row, text, a fractional or int64-overflowing
    length, a negative, empty or non-finite weight were tracebacks, NaN probabilities, or
    lengths cut to an integer)."""
    import csv

    try:
        text = read_input(p, "a length histogram (CSV with columns length,weight)").decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(str(p), key, f"byte {e.start}", "not UTF-8 text; a CSV with columns length,weight") from None
    rows = csv.reader(text.splitlines())
    header = [h.strip() for h in next(rows, [])]
    if "length" not in header or "weight" not in header:
        raise ConfigError(str(p), key, header, "CSV needs columns length,weight and >= 1 row")
    il, iw = header.index("length"), header.index("weight")
    lengths: list[int] = []
    weights: list[float] = []
    for n, row in enumerate(rows, start=2):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise ConfigError(f"{p}:{n}", "<row>", clipped(",".join(row)), f"{len(row)} fields; the header has {len(header)}")
        cell = row[il].strip()
        try:
            x = float(cell)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and x == int(x) and 1 <= x < MAX_HISTOGRAM_LENGTH):
            raise ConfigError(f"{p}:{n}", "length", clipped(cell), f"must be a whole number of tokens >= 1 and below {MAX_HISTOGRAM_LENGTH:.0e}")
        cell_w = row[iw].strip()
        try:
            y = float(cell_w)
        except ValueError:
            y = math.nan
        if not (math.isfinite(y) and y >= 0):
            raise ConfigError(f"{p}:{n}", "weight", clipped(cell_w), "must be a finite number >= 0")
        lengths.append(int(cell) if cell.lstrip("+-").isdigit() else int(x))
        weights.append(y)
    return lengths, weights


def histogram_lengths(path: str, base: Path | None, key: str) -> np.ndarray:
    """The lengths a ``file`` histogram can draw (for size checks before a run).

    Raises:
        ConfigError: a missing or malformed histogram file.
    """
    return histogram(path, base, key)[0]


def draw_lengths(dist: LengthDist, n: int, rng: np.random.Generator, base: Path | None, key: str) -> np.ndarray:
    """``n`` token lengths (int array, >= 1) from ``dist``.

    Raises:
        ConfigError: a ``file`` histogram that is missing or malformed.
    """
    if dist.kind == "fixed":
        return np.full(n, dist.value, dtype=np.int64)
    if dist.kind == "uniform":
        lo = max(1, int(dist.value * dist.range_ratio))
        return rng.integers(lo, dist.value + 1, size=n)
    lengths, p = histogram(dist.path, base, key)
    return rng.choice(lengths, size=n, p=p)


def make_requests(cfg: WorkloadConfig, seed: int, scenario_path: str | None = None) -> list[RequestSpec]:
    """The run's requests in send order (seeded by ``seed``; lengths stream; priorities and
    routing keys, when ``workload.priorities`` / ``workload.routing_keys`` are given, each
    from its own stream)."""
    specs = _make_requests(cfg, seed, scenario_path)
    if cfg.priorities:
        prng = seed_streams.rng("priorities", seed)
        pr = prng.choice(np.array(cfg.priorities, dtype=np.int64), size=len(specs))
        specs = [replace(s, priority=int(p)) for s, p in zip(specs, pr, strict=True)]
    if cfg.routing_keys:
        # one draw per request that starts a conversation (every request of a single-turn
        # workload): a multi_turn conversation's later turns keep its key, as a session's
        # client sends one key with every turn (the specs are conversation-major)
        starts = sum(1 for s in specs if s.turn == 0)
        pick = iter(seed_streams.rng("routing_keys", seed).integers(0, len(cfg.routing_keys), size=starts))
        keyed, key = [], None
        for s in specs:
            if s.turn == 0:
                key = cfg.routing_keys[int(next(pick))]
            keyed.append(replace(s, routing_key=key))
        specs = keyed
    return specs


def check_replayed_files(scenario: Scenario) -> None:
    """Read the files a scenario's workload replays, as its run reads them: a ``trace``
    workload's trace (:func:`sim.trace.load_trace`, up to ``num_requests`` rows) and an
    ``agentic_trace`` (:func:`sim.prefix_workload.conversation_plan`), so that a bad row (a
    negative or decreasing timestamp, a missing column, a truncated file) is refused before a
    command that runs many (compare, sweep) starts one, as ``run`` refuses it. A trace of
    ``sim.trace.KEEP_MIN_BYTES`` or more stays read, so the runs that follow in this process
    do not read it again.

    Raises:
        ConfigError: as those readers.
    """
    cfg, path = scenario.workload, scenario.path or None
    if cfg.kind == "trace" and cfg.trace is not None:
        from specsched.sim.trace import load_trace

        load_trace(cfg.trace, cfg.num_requests, path)
    elif cfg.multi_turn is not None and cfg.multi_turn.agentic_trace is not None:
        from specsched.sim.prefix_workload import conversation_plan

        conversation_plan(cfg.multi_turn, scenario.seed, Path(path) if path else None)


def _make_requests(cfg: WorkloadConfig, seed: int, scenario_path: str | None) -> list[RequestSpec]:
    if cfg.kind == "trace":
        from specsched.sim.trace import load_trace

        tr = load_trace(cfg.trace, cfg.num_requests, scenario_path)
        return [RequestSpec(i, int(a), int(b), float(t), tr.prompt_tokens(i)) for i, (a, b, t)
                in enumerate(zip(tr.input_len.tolist(), tr.output_len.tolist(), tr.arrival_s.tolist(), strict=True))]
    rng = seed_streams.rng("lengths", seed)
    base = Path(scenario_path) if scenario_path else None
    if cfg.multi_turn is not None:
        from specsched.sim.prefix_workload import conversation_plan, multi_turn_conversations

        plan = conversation_plan(cfg.multi_turn, seed, base)
        outs = draw_lengths(cfg.output_len, plan.total, rng, base, "workload.output_len")
        return [s for conv in multi_turn_conversations(cfg.multi_turn, outs, seed, base, plan) for s in conv]
    if cfg.shared_prefix is not None:
        from specsched.sim.prefix_workload import shared_prefix_requests

        outs = draw_lengths(cfg.output_len, cfg.num_requests, rng, base, "workload.output_len")
        return shared_prefix_requests(cfg.shared_prefix, outs, seed)
    ins = draw_lengths(cfg.input_len, cfg.num_requests, rng, base, "workload.input_len")
    outs = draw_lengths(cfg.output_len, cfg.num_requests, rng, base, "workload.output_len")
    # Python ints through tolist() (int() of each numpy scalar costs ~0.2 us a value)
    return [RequestSpec(i, int(a), int(b)) for i, (a, b) in enumerate(zip(ins.tolist(), outs.tolist(), strict=True))]


def poisson_arrivals(n: int, request_rate: float, seed: int) -> np.ndarray:
    """Send times (s) of ``n`` requests with exponential gaps of mean 1/request_rate, the
    first one gap after t = 0. SGLang's bench_serving (0.5.23 benchmark/serving.py
    ``get_request``) sends its first at once and sleeps after each; every figure here is
    measured from the first send (:func:`sim.metrics.summarize`'s duration, TTFT from each
    send), so the uniform shift changes none."""
    rng = seed_streams.rng("arrivals", seed)
    return np.cumsum(rng.exponential(1.0 / request_rate, size=n))


def gamma_arrivals(n: int, request_rate: float, burstiness: float, seed: int) -> np.ndarray:
    """Send times (s) with gamma gaps of shape ``burstiness`` and mean 1/request_rate (scale
    1 / (request_rate x burstiness)): vLLM benchmark_serving's ``--burstiness`` (1 is Poisson,
    < 1 burstier, > 1 more regular; infinite: every gap exactly 1/request_rate, as vllm 0.33
    ``get_request`` does). SGLang 0.5.23's bench_serving has no such option."""
    if math.isinf(burstiness):
        return np.arange(1, n + 1, dtype=float) / request_rate
    rng = seed_streams.rng("arrivals", seed)
    return np.cumsum(rng.gamma(burstiness, 1.0 / (request_rate * burstiness), size=n))


def arrival_times(cfg: WorkloadConfig, specs: list[RequestSpec], seed: int) -> np.ndarray:
    """Send times (s) of an open-loop workload (poisson or trace), one per spec.

    Poisson with no burstiness (or 1.0) draws the same exponential gaps as
    :func:`poisson_arrivals`; a trace's are its rows' (already scaled). With
    ``normalize_arrivals`` the drawn times are rescaled so the last is at
    num_requests / request_rate (vllm 0.10.0+ ``get_request``: ``target_total_delay_s``)."""
    if cfg.kind == "trace":
        return np.array([s.arrival_s for s in specs], dtype=float)
    if cfg.burstiness is None or cfg.burstiness == 1.0:
        t = poisson_arrivals(len(specs), cfg.request_rate, seed)
    else:
        t = gamma_arrivals(len(specs), cfg.request_rate, cfg.burstiness, seed)
    if getattr(cfg, "normalize_arrivals", False) and len(t) and t[-1] > 0 and math.isfinite(cfg.request_rate):
        t *= len(t) / cfg.request_rate / t[-1]   # vllm bench serve: the last send at n / rate
    return t


@dataclass(frozen=True)
class Conversations:
    """A multi_turn workload's conversations as its clients send them, for both engines'
    clients (the simulator's SimPy processes, sim/engine_clients.py, and :class:`Clients`
    for a caller that owns the clock): one owner of which turns form a conversation, the
    think times between them and when conversations start.

    bench_serving's multi-turn client (SGLang 0.5.23 benchmark/serving.py
    ``wrap_multi_turn_request_func``, inside ``limited_request_func``'s semaphore) sends a
    conversation's rounds one after another, each when the previous one's reply is complete;
    a conversation holds its concurrency slot from its first send to its last reply. The
    think time before a later turn is this project's (bench_serving sends at once: 0).

    Attributes:
        turns: conversation c's requests in turn order (``turns[c][t]``), conversation-major
            as :func:`make_requests` sends them (a conversation starts at each turn 0).
        pauses: float (conversations, most turns - 1): the pause (s) before turn t >= 1 of
            conversation c is ``pauses[c, t - 1]`` (:func:`sim.prefix_workload.think_times`).
        starts: with ``workload.request_rate``, each conversation's start time (s; all 0 for
            an infinite rate: bench_serving's ``get_request``), each then waiting for a slot;
            None: ``concurrency`` clients each take the next conversation when their last
            one ends.
        slots: conversations in flight at most (None: no cap, with a request rate only).
    """

    turns: list[list[RequestSpec]]
    pauses: np.ndarray
    starts: np.ndarray | None
    slots: int | None

    @classmethod
    def of(cls, w: WorkloadConfig, specs: list[RequestSpec], seed: int) -> Conversations:
        from specsched.sim.prefix_workload import think_times

        turns: list[list[RequestSpec]] = []
        for spec in specs:   # a conversation starts at each turn 0 (their own turn counts)
            if spec.turn == 0:
                turns.append([])
            turns[-1].append(spec)
        most = max((len(c) for c in turns), default=1)
        pauses = think_times(w.multi_turn, seed, (len(turns), most - 1))
        if w.request_rate is None:
            return cls(turns, pauses, None, w.concurrency)
        starts = (poisson_arrivals(len(turns), w.request_rate, seed) if math.isfinite(w.request_rate)
                  else np.zeros(len(turns)))
        return cls(turns, pauses, starts, w.concurrency or None)

    def pause(self, c: int, t: int) -> float:
        """Seconds conversation ``c``'s client thinks before sending turn ``t`` >= 1."""
        return float(self.pauses[c, t - 1])


class Clients:
    """bench_serving's clients (bench_serving.py: get_request and the max_concurrency
    semaphore) for a caller that owns the clock: burst (all sent at 0), closed loop (C in
    flight, a finished request replaced at once), Poisson with max_concurrency (a request is
    sent when it has arrived and a slot is free; its timer starts then), and multi-turn
    conversations (:class:`Conversations`: a conversation takes a slot when it starts and a
    slot is free, sends turn 0 then, and each later turn when the previous turn finished plus
    its think time; its slot frees when its last turn finishes), as the simulator's client
    processes send them (sim/engine_clients.py ``_conversations``).

    A request's send time is bench_serving's: its arrival time, or when a concurrency slot
    freed (the finishing request's last delivery) if later, not when the caller's loop
    next polls (:meth:`due_timed`); the caller reports each finish with its time.

    Args:
        scenario: its ``workload`` decides the kind, concurrency and rate.
        specs: the requests (:func:`make_requests`), sent in index order.
        seed: the run's seed (open-loop send times, :func:`arrival_times`).

    Times are seconds from the run's start.
    """

    def __init__(self, scenario: Scenario, specs: list[RequestSpec], seed: int) -> None:
        w = scenario.workload
        self.kind = w.kind
        self.pending: list[tuple[float, int]] = []  # (arrival time, index) not yet sent
        self.queue: list[tuple[float, int]] = []  # arrived (time, index), waiting for a slot
        self.slots = None
        self.conversations: Conversations | None = None
        if w.kind == "multi_turn":
            self._start_conversations(Conversations.of(w, specs, seed))
            return
        if w.kind == "burst":
            self.pending = [(0.0, s.index) for s in specs]
        elif w.kind == "closed_loop":
            self.slots = w.concurrency
            self.queue = [(0.0, s.index) for s in specs]
        else:
            times = arrival_times(w, specs, seed)
            self.pending = [(float(t), s.index) for s, t in zip(specs, times, strict=True)]
            self.slots = w.max_concurrency
        heapq.heapify(self.pending)
        self.in_flight = 0
        # times the free concurrency slots freed, oldest first (all free at 0)
        self._free_at: deque[float] | None = deque([0.0] * self.slots) if self.slots else None

    def _start_conversations(self, conv: Conversations) -> None:
        """Multi-turn state: ``pending`` holds (start time, conversation) not yet started,
        ``queue`` the started ones waiting for a slot (in start order: the semaphore's FIFO),
        ``_turns_due`` (send time, order, request index) of turns released and not yet sent
        (ties in the order they were released), ``_active`` the conversations holding a slot."""
        self.conversations = conv
        self._turn_of = {s.index: (c, t) for c, turns in enumerate(conv.turns) for t, s in enumerate(turns)}
        self._turns_due: list[tuple[float, int, int]] = []
        self._released = 0
        self._active = 0
        self.in_flight = 0
        self.slots = conv.slots
        if conv.starts is None:
            self.queue = [(0.0, c) for c in range(len(conv.turns))]
        else:
            self.pending = [(float(t), c) for c, t in enumerate(conv.starts.tolist())]
        self._free_at = deque([0.0] * self.slots) if self.slots else None

    def _release(self, at: float, index: int) -> None:
        heapq.heappush(self._turns_due, (at, self._released, index))
        self._released += 1

    def _start_queued(self) -> None:
        """Started conversations waiting for a slot take the free ones, in start order: each
        releases its turn 0, sent when it started or its slot freed, if later."""
        conv = self.conversations
        while self.queue and (self.slots is None or self._active < self.slots):
            t, c = self.queue.pop(0)
            if self._free_at is not None:
                t = max(t, self._free_at.popleft())
            self._active += 1
            self._release(t, conv.turns[c][0].index)

    def _due_turns(self, now: float) -> list[tuple[int, float]]:
        while self.pending and self.pending[0][0] <= now:
            self.queue.append(self.pending.pop(0))
        self._start_queued()
        out = []
        while self._turns_due and self._turns_due[0][0] <= now:
            t, _, i = heapq.heappop(self._turns_due)
            out.append((i, t))
            self.in_flight += 1
        return out

    def due(self, now: float) -> list[int]:
        """Indices of requests sent at or before ``now``."""
        return [i for i, _ in self.due_timed(now)]

    def due_timed(self, now: float) -> list[tuple[int, float]]:
        """(index, send time) of requests sent at or before ``now``: each one's arrival, or
        the time the slot it takes freed if later (both <= ``now``); a conversation's later
        turn, its previous turn's finish plus the think time."""
        if self.conversations is not None:
            return self._due_turns(now)
        while self.pending and self.pending[0][0] <= now:
            self.queue.append(heapq.heappop(self.pending))
        out = []
        while self.queue and (self.slots is None or self.in_flight < self.slots):
            t, i = self.queue.pop(0)
            if self._free_at is not None:
                t = max(t, self._free_at.popleft())
            out.append((i, t))
            self.in_flight += 1
        return out

    def finished(self, at: float = 0.0, index: int | None = None) -> None:
        """Request ``index`` completed at time ``at`` (its last delivery): its concurrency slot
        frees; a conversation's turn instead releases the next turn (sent at ``at`` plus the
        think time), and its last turn frees the conversation's slot. A multi-turn workload
        needs ``index``; the others ignore it."""
        self.in_flight -= 1
        conv = self.conversations
        if conv is not None:
            if index is None:
                raise ValueError("a multi-turn client needs the finished request's index")
            c, t = self._turn_of[index]
            if t + 1 < len(conv.turns[c]):
                self._release(at + conv.pause(c, t + 1), conv.turns[c][t + 1].index)
                return
            self._active -= 1
        if self._free_at is not None:
            self._free_at.append(at)
        if conv is not None and conv.starts is None:
            # the client whose conversation ended takes the next one and sends its turn 0 at
            # once (sim/engine_clients.py ``_conversations``): among turns released at the
            # same time it goes where its client's finish was reported, as the simulator's
            # clients resume in the order their finishes were delivered. With start times
            # the conversation instead waits on the semaphore, granted after the other
            # finishes delivered with this one (:meth:`_due_turns`)
            self._start_queued()

    def next_time(self) -> float | None:
        """When the next request will be sent if nothing finishes first (None: never)."""
        if self.conversations is not None:
            free = self.slots is None or self._active < self.slots
            times = [self._turns_due[0][0]] if self._turns_due else []
            if free and (self.queue or self.pending):
                times.append(0.0 if self.queue else self.pending[0][0])
            return min(times) if times else None
        if self.queue and (self.slots is None or self.in_flight < self.slots):
            return 0.0
        if self.pending and (self.slots is None or self.in_flight < self.slots):
            return self.pending[0][0]
        return None


def replay_send_times(scenario: Scenario, finish_s: dict[int, float]) -> dict[int, float]:
    """bench_serving's send time (s) of every request of a finished run of ``scenario``:
    its :class:`Clients` replayed over the run's recorded finish times.

    Args:
        scenario: the run's scenario (its workload and seed give the requests and arrivals).
        finish_s: request index -> the time (s) its last token was delivered.

    Returns request index -> send time (s): the arrival, or the freed slot's time if later.
    Used to re-time runs recorded before the runtime stamped send times.
    """
    clients = Clients(scenario, make_requests(scenario.workload, scenario.seed, scenario.path or None), scenario.seed)
    out = dict(clients.due_timed(0.0))
    for i, t in sorted(finish_s.items(), key=lambda kv: kv[1]):
        clients.finished(t, i)
        out.update(clients.due_timed(t))
    out.update(clients.due_timed(float("inf")))
    return out
