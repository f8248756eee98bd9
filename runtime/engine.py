"""The runtime: the simulator's scheduler and loop, executed on a real device with PyTorch.

The same :class:`sim.scheduler.Scheduler` builds every batch and the same
:func:`sim.loop.scheduler_loop` issues every operation; this module only executes the
operations with torch streams, events and graphs (:mod:`runtime.device`) over the proxy
model (:mod:`runtime.model`):

| op | here |
|---|---|
| ``Recv`` / ``WaitForWork`` | requests whose client sent them by now (host clock) / sleep until the next send |
| ``HostWork`` | nothing: the host's real work is the Python that runs |
| ``Launch(main)`` | extend (chunked prefill) and/or decode or a speculative cycle on the forward stream, graph-replayed up to ``cuda_graph_max_bs``; a ring event marks its end; the result copy starts on the copy stream |
| ``Launch(inject)`` | the drafter's forward over the prompt (a block drafter's KV injection, a chain drafter's draft extend for prefill) |
| ``HostBlock(publish)`` | ``event.synchronize()`` on the previous forward (SGLang on HIP) |
| ``HostBlock(slot_expansion)`` | ``repeat_interleave`` without ``output_size``: blocks until the extend drains |
| ``StreamWait`` | ``stream.wait_event``: on the forward stream (stream order), or on the schedule stream, then the forward stream waits on it (a cross-queue wait) |
| ``Results`` | wait for the copy-done event, return the step's output |
| ``Deliver`` | tokens reach clients: host time stamps, bench_serving's definitions |

Random weights accept nothing, so each verify commits the accept length drawn from the
same seeded stream the simulator uses (:class:`sim.device_tokens.DeviceTokens`), forced
into the verify as SGLANG_SIMULATE_ACC_LEN does: every draft and verify kernel still runs.

Measurement: host times with ``time.perf_counter``; each forward's GPU start and end from
timing events (measurement mode only; hip-vs-cuda.md item 9) resolved after the run.
Results are a :class:`sim.records.RunResult`, the same format as a simulated run (the
summary also holds the run's ``host_probe`` counters: GC collections, machine steal
seconds, CPU MHz; and ``host_speed``: a fixed reference work's thread CPU time sampled
over the run, :mod:`runtime.host_reference`). What the host thread did in each launch call (:mod:`runtime.host_probe`)
is :meth:`RuntimeEngine.launch_probe`, one row per steps-table row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from specsched.runtime.device import Device, HostCopy, RingEvent, serve_threads
from specsched.runtime.environment import check_serializing, environment, model_sdpa_probe
from specsched.runtime.host_probe import HostProbe
from specsched.runtime.host_reference import LaunchReferenceWork, SpeedSampler
from specsched.runtime.memory import LOWER_KEYS, Allocation, allocating, check_fits, estimate
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.runtime.radix_slots import TreeSlots
from specsched.runtime.runner import CTX_BUCKET_STEP, engine_context_width
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import Scenario, SyncMode, draft_tree
from specsched.sim.defaults import scenario_hardware
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.engine import IDLE_PASSES, Stalled
from specsched.sim.loop import scheduler_loop
from specsched.sim.metrics import summarize_recorder
from specsched.sim.ops import (
    Deliver,
    HostBlock,
    HostWork,
    Launch,
    Recv,
    Results,
    StreamWait,
    WaitForWork,
)
from specsched.sim.plan import BatchPlan, ForwardMode, StepOutput
from specsched.sim.policy_loader import user_policy_specs
from specsched.sim.records import Recorder, RunResult, delivery_arrays
from specsched.sim.request import Req
from specsched.sim.scheduler import Scheduler, run_counts
from specsched.sim.served import output_cut_summary, served_requests, truncation_summary
from specsched.sim.steady_state import run_steady_summary
from specsched.sim.workload import Clients, make_requests, scheduler_request, with_request_labels
from tqdm.auto import tqdm

_TOKENS_STREAM = 4


@dataclass(slots=True)
class RtHandle:
    """A launched forward: its end event, result copy, output and timing events."""

    plan: BatchPlan
    done: RingEvent
    copy: HostCopy | None
    output: StepOutput


class LoopHost:
    """The runtime loop's host work around a forward that is not the forward itself: the end
    of the launch call (end mark, result copy, step record), the result path (``Results``:
    the copy-done wait and the timing reads; ``Deliver``; ``Recv``) and the schedule pass's
    stamp. :class:`RuntimeEngine` runs its loop with it; the profiler's no-overlap stall loop
    (runtime/profile_host.py ``HostPhases.stall_phase``) runs the same methods between its
    forwards, so ``host.result_path_s`` times this code, not a copy of it.

    State: ``dev`` and ``scenario`` (set by ``__init__``, or by RuntimeEngine's own);
    ``rec``, ``clients``, ``specs``, the pending timing marks and the progress bar (None),
    set by :meth:`_reset_loop_host`; ``t0`` (the run's start, perf_counter) and ``_ref`` (the
    run's first timing mark), set by :meth:`_start_clock`.
    """

    dev: Device
    scenario: Scenario

    def __init__(self, dev: Device, scenario: Scenario, specs: list, seed: int) -> None:
        # RuntimeEngine builds its own state (its __init__ and _reset_run_state) and does not call this
        self.dev, self.scenario = dev, scenario
        self._reset_loop_host(specs, seed)
        self._start_clock()

    def _reset_loop_host(self, specs: list, seed: int) -> None:
        self.rec = Recorder("full")
        # rows the server rejects (sim/served.py trace_aborts) count as failed: the scheduler's
        # run as SGLang's abort, the tokenizer's never reach the scheduler (_recv)
        self.rec.mark_aborted({s.index: s.abort for s in specs if s.abort is not None})
        self.rec.mark_no_text(s.index for s in specs if s.prefill_only)   # served prefill only, no text
        self.clients = Clients(self.scenario, specs, seed)
        self.specs = specs
        self._blocked = 0.0
        self._timing: list[tuple[int, Any, Any]] = []
        self._step_index: dict[int, int] = {}
        self.remaining = len(specs)
        self._bar: Any = None

    def _start_clock(self) -> None:
        """The run's time origin: a timing mark on the forward stream and the host's clock."""
        self._ref = self._timing_event()
        self.t0 = time.perf_counter()

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def _timing_event(self) -> Any:
        return self.dev.timing_mark()

    def _launched(self, plan: BatchPlan, part: str, start: Any, output: StepOutput,
                  step_out: Any) -> RtHandle:
        """The end of a launch call after the forward's kernels are queued: the done event
        (the end mark too on a GPU), the result copy (decode/verify rows only), the pending
        timing marks and the step's record."""
        # on a GPU the ring's done event (timing-enabled in measurement mode) is the end
        # mark too: one event record fewer per step (each is a barrier packet on HIP)
        end = None if self.dev.is_gpu else self._timing_event()
        done = self.dev.record("forward")
        if end is None:
            end = done.event
        copy = self.dev.copy_to_host({"committed": step_out.committed}, after=done) if step_out is not None else None
        self._timing.append((self.rec.num_steps, start, end))
        handle_index = self.rec.num_steps
        acc = dec = 0
        if part == "main" and plan.num_extend < plan.batch_size:
            d = output.committed[plan.num_extend:]
            acc, dec = int(d.sum()), int((d > 0).sum())
        # GPU times come from the timing events after the run (_resolve_timing)
        self.rec.step(plan.step, plan.mode.value, part, plan.batch_size, plan.num_extend_tokens,
                      0.0, 0.0, self._blocked, acc, dec)
        self._blocked = 0.0
        h = RtHandle(plan, done, copy, output)
        self._step_index[id(h)] = handle_index
        return h

    def _results(self, op: Results) -> StepOutput:
        h: RtHandle = op.handle
        t0 = time.perf_counter()
        if h.copy is not None:
            self.dev.wait_copy(h.copy)
        else:
            self.dev.host_block(h.done, "results")
        self._blocked += time.perf_counter() - t0
        # every forward queued up to h is complete: resolve their marks now (the ones after
        # h are still running; their done events stay in the ring until the next Results)
        done_upto = [t for t in self._timing if t[0] <= self._step_index[id(h)]]
        if done_upto:
            rest = [t for t in self._timing if t[0] > self._step_index[id(h)]]
            self._timing = done_upto
            self._resolve_timing(self._ref)
            self._timing = rest
        return h.output

    def _deliver(self, op: Deliver) -> None:
        rids, n, fin = delivery_arrays(op.deliveries)
        now = self._now()
        self.rec.deliver(now, rids, n, fin)
        for rid in rids[fin].tolist():   # a conversation's turn releases its next one (sim.workload.Clients)
            self.clients.finished(now, rid)
            if self._bar is not None:
                self._bar.update(1)
            self.remaining -= 1

    def _recv(self) -> list[Req]:
        now = self._now()
        out = []
        # the timer starts when the client sent it (bench_serving), not when the loop polls:
        # a request that arrives while the host issues a forward or blocks waits in between
        due = self.clients.due_timed(now)
        while due:
            rejected = 0
            for i, sent in due:
                s = self.specs[i]
                self.rec.request_sent(s.index, s.input_len, s.output_len, sent)
                if s.tokenizer_reject:
                    # the tokenizer's rejection never reaches the scheduler (sim/served.py
                    # is_tokenizer_rejection): its error returns at once, its slot frees
                    self.clients.finished(sent, i)
                    self.remaining -= 1
                    rejected += 1
                    if self._bar is not None:
                        self._bar.update(1)
                    continue
                out.append(scheduler_request(s, self.scenario.workload.ignore_eos))
            due = self.clients.due_timed(now) if rejected else []
        return out

    def _pass(self, sched: Scheduler) -> None:
        """The schedule pass's stamp (``HostWork("schedule")``, after ``Scheduler.schedule()``)."""
        self.rec.pass_state(self._now(), sched.num_running, len(sched.waiting), sched.kv.used)

    def _resolve_timing(self, ref: Any) -> None:
        """Turn the pending steps' start/end marks into seconds since the run's start.
        Called when every pending forward is known complete (after a Results wait: stream
        order), before the ring can re-record the done events used as end marks."""
        for i, start, end in self._timing:
            if self.dev.is_gpu:
                s, e = ref.elapsed_time(start) / 1000.0, ref.elapsed_time(end) / 1000.0
            else:
                s, e = start - self.t0, end - self.t0
            self.rec.set_step_times(i, s, e)
        self._timing = []


def served_for(scenario: Scenario, seed: int) -> tuple[list, list[tuple[int, int, int]]]:
    """``scenario``'s requests at ``seed`` as the server runs them, what the simulator runs
    (:func:`sim.served.served_requests`: the output cuts, truncations and rejections that the
    server's ``context_length``, ``allow_auto_truncate`` and pool decide).

    Returns:
        (the request specs, one (request index, asked, run) triple per cut output).

    Raises:
        ConfigError: a multi-turn turn past the context or the pool.
    """
    return served_requests(scenario, make_requests(scenario.workload, seed, scenario.path or None),
                           scenario_hardware(scenario), seed)


# workload fields that only time the client's sends (bench_serving's --request-rate and
# --max-concurrency; a closed loop's concurrency): an engine's model, pool, rows and graphs do
# not depend on them
_SEND_TIMING = {"request_rate": None, "max_concurrency": None}


def _sends_aside(w: Any) -> Any:
    """Workload ``w`` without the fields that only time its sends (:data:`_SEND_TIMING`; a
    closed loop's ``concurrency`` too: its clients are the run's, its requests the same)."""
    return w.model_copy(update={**_SEND_TIMING, **({"concurrency": None} if w.kind == "closed_loop" else {})})


def _served_key(specs: list) -> list:
    """What a served request list fixes for an engine: every field but the prompt's token
    ids (a function of the workload, compared apart) and the send time (the clients')."""
    from dataclasses import replace

    return [replace(s, tokens=None, arrival_s=None) for s in specs]


def device_kv_shape(srv: Any, specs: list) -> tuple[int, int, int]:
    """(positions per request row, request rows, device KV slots) the runtime allocates for a
    server and its served requests, so that the device holds whatever the scheduler's KV
    ledger holds (:meth:`RuntimeEngine._sync_kv` mirrors it slot for slot).

    - A row maps a request's positions: its longest prompt + output, plus what speculative
      decoding keeps reserved past the committed KV (``ServerArgs.spec_kv_reserve``: with an
      EAGLE tree on pages that is 2 x whole pages x topk, far above 4 windows), in whole pages
      (a request holds ceil_page of its KV on a paged pool), plus a page and 64 positions of
      margin (an aborted row runs 1 + 1).
    - The pool is ``max_total_num_tokens``, no more than the rows can map plus what the radix
      cache can keep after its requests leave: every token it holds is on the path of a
      request that gives token ids (sim/scheduler.py ``_cache_finished`` caches only those),
      so the tree of all their sequences bounds it (shared prefixes counted once, as the
      cache holds them). With shared prefixes and few rows the tree held more than the rows
      could map and the device pool ran out (``PoolExhausted``) where the simulator ran.

    Returns: ints; the slot count includes the padding slot 0."""
    page = max(1, srv.page_size)
    longest = max(sum(s.served_lengths) for s in specs)
    reserve = max(4 * srv.spec_window, srv.spec_kv_reserve)
    max_ctx = -(-(longest + reserve) // page) * page + page + 64
    max_reqs = srv.max_running_requests + 8
    cacheable = 0
    if not srv.disable_radix_cache:
        from specsched.sim.radix_cache import RadixCache

        union = RadixCache(page)
        for s in specs:
            if s.tokens is not None:
                union.insert(s.tokens)
        cacheable = union.evictable_size
    slots = min(srv.max_total_num_tokens, max_reqs * max_ctx + cacheable) + 1
    return max_ctx, max_reqs, slots


WARMUP_PROMPT = 64
"""Prompt tokens of the warm-up request (:meth:`RuntimeEngine._warm_requests`), fewer when
the KV pool holds less."""


def check_runnable(scenario: Scenario) -> None:
    """Refuse, in one line and before any model is built, a scenario whose features the
    runtime does not run (docs/runtime.md "Simulated only"): a chunk budget of part pages
    (SGLang refuses to start: :func:`sim.limits.check_chunk_pages`), prefill-decode disaggregation,
    DP attention over more than one rank (one device runs one rank), data-parallel replicas, and a
    request that can never fit the KV pool (:func:`sim.limits.check_pool`) or is longer than
    the server's context length (:func:`sim.limits.check_context`: ``server.context_length``,
    else the scenario's profile's ``hardware.context_len``), both what ``specsched run``
    refuses, or a pool too small for the warm-up request's verify windows.

    Raises:
        ConfigError: naming the scenario file, the key, its value and what the runtime runs.
    """
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_chunk_pages, check_context, check_pool

    srv, file = scenario.server, str(scenario.path or scenario.name)
    if srv.disaggregation is not None:
        raise ConfigError(file, "server.disaggregation", "{...}",
                          "prefill-decode disaggregation is simulated only (one device runs one server)")
    if srv.enable_dp_attention and srv.dp_size > 1:
        raise ConfigError(file, "server.dp_size", srv.dp_size,
                          "DP attention over more than one rank is simulated only: the runtime runs one rank on one "
                          "device; measure with dp_size: 1, or predict with specsched run")
    if srv.dp_replicas > 1:
        raise ConfigError(file, "server.dp_size", srv.dp_size,
                          "data-parallel replicas are simulated only: the runtime runs one server on one device; "
                          "measure one replica with dp_size: 1 (and 1/dp_size of the request rate), or predict with "
                          "specsched run")
    check_chunk_pages(scenario)   # SGLang starts only with whole-page chunks, as `specsched run` refuses others
    check_pool(scenario)
    check_context(scenario)   # a request past the server's context length, as `specsched run` refuses it
    need = 1 + 4 * srv.spec_window   # a 1-token warm-up prompt and its verify windows (_warm_requests)
    if srv.max_total_num_tokens < need:
        raise ConfigError(file, "server.max_total_num_tokens", srv.max_total_num_tokens,
                          f"the runtime's warm-up request needs {need} KV tokens (a prompt and 4 windows of "
                          f"{srv.spec_window}); give at least that")


def _known_outputs(specs: list) -> bool:
    """Whether any request's token ids go past its prompt: a multi-turn turn's output, which
    the next turn resends (sim/prefix_workload.py ``multi_turn_conversations``). The runtime
    then feeds those ids as the request decodes (:meth:`runtime.kv_cache.ReqToTokenPool.forced`),
    so the history's KV that the next turn reads from the prefix cache is that of the ids
    the tree matched."""
    return any(s.tokens is not None and len(s.tokens) > s.served_lengths[0] for s in specs)


class RuntimeEngine(LoopHost):
    """One measured run of a scenario on a device.

    Args:
        scenario: a resolved scenario (arm applied). Its ``profile`` is not used: times are
            measured.
        preset: model preset of :data:`runtime.model.PRESETS` (the drafter is
            :func:`runtime.model.draft_preset`).
        device: ``"cuda"``, ``"cpu"`` or None (GPU if available).
        seed: overrides the scenario's (acceptance, lengths, arrivals, weights).
        graphs: replay graphs for decode/verify batches up to ``cuda_graph_max_bs``, and
            (CUDA) extends and draft injections piecewise at the scenario's
            ``prefill_graph_tokens`` buckets (SGLang 0.5.23's default on CUDA, off on HIP;
            ``server.disable_prefill_cuda_graph`` turns that part off).
        warmup: capture graphs and run one warm-up request before measuring (bench_serving
            sends one warm-up request too); on a GPU, also run the whole scenario once
            unmeasured, so first-use costs (kernel selection for new extend shapes, pinned
            staging buffers, allocator growth) stay out of the numbers.
        cpu_threads: torch intra-op threads on CPU (default the profiler's,
            :data:`runtime.device.CPU_THREADS`; :func:`runtime.device.serve_threads`).

    Raises:
        ValueError: an unknown preset.
        ConfigError: a scenario the runtime cannot measure (:func:`check_runnable`).
    """

    def __init__(self, scenario: Scenario, *, preset: str = "1b", device: str | None = None,
                 seed: int | None = None, graphs: bool = True, warmup: bool = True,
                 backend: str | None = None, allow_serializing: bool = True, progress: bool = False,
                 cpu_threads: int | None = None) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(k for k in PRESETS if not k.endswith('-draft'))}")
        srv = scenario.server
        check_runnable(scenario)
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.server = srv
        self.serializing = check_serializing(allow_serializing)
        self.dev = Device(device, measure=True, backend=backend)
        torch.set_num_threads(serve_threads(self.dev.is_gpu, cpu_threads))
        self.progress = progress
        self.window = srv.spec_window
        # the requests the simulator runs for this scenario: a trace's outputs cut as SGLang
        # cuts them (sim/served.py served_requests)
        self.specs, self.output_cuts = served_for(scenario, self.seed)
        max_ctx, max_reqs, slots = device_kv_shape(srv, self.specs)
        est = estimate(PRESETS[preset], PRESETS[draft_preset(preset)] if srv.speculative_algorithm.enabled else None,
                       slots=slots, max_reqs=max_reqs, max_context=max_ctx, window=self.window,
                       chunk_tokens=min(max(s.served_lengths[0] for s in self.specs), srv.chunked_prefill_size
                                        if srv.chunked_prefill_size > 0 else 10**9),
                       dtype_bytes=self.dev.dtype.itemsize, graph_max_bs=srv.cuda_graph_max_bs,
                       graphs=graphs and self.dev.is_gpu,
                       prefill_graph_tokens=max(self._prefill_buckets(graphs), default=0))
        check_fits(est, preset=preset, slots=slots, is_gpu=self.dev.is_gpu, torch_device=self.dev.torch_device,
                   source=str(scenario.path or scenario.name), configured=srv.max_total_num_tokens,
                   max_context=max_ctx)
        self.memory_estimate = est
        torch.manual_seed(self.seed)
        dt = self.dev.dtype
        with allocating(self._allocation(f"the weights of preset {preset}", "--preset", preset)):
            target = LlamaProxy(PRESETS[preset], seed=self.seed, device=self.dev.torch_device, dtype=dt)
            drafter = (LlamaProxy(PRESETS[draft_preset(preset)], seed=self.seed + 1, device=self.dev.torch_device,
                                  dtype=dt) if srv.speculative_algorithm.enabled else None)
        self.vocab = target.cfg.vocab_size
        # context buckets every 256 positions up to a width on that lattice too: every step's
        # attention width is round_up(need, 256), what the simulator charges
        # (CostModel.attention_width), the widest bucket included
        width = engine_context_width(max_ctx)
        ctx_buckets = list(range(CTX_BUCKET_STEP, width + 1, CTX_BUCKET_STEP))
        # decode/verify graphs at the batch sizes SGLang captures for this server (with
        # speculative decoding 1..8, 10..32 step 2, ...: arg_groups/cuda_graph_hook.py
        # generate_decode_cuda_graph_batch_sizes), the ones the simulator pads a batch to
        # (CostModel.padded_batch); a batch above the largest runs eagerly, as there
        with allocating(self._allocation(f"the KV pool of {slots - 1} tokens (and its {max_reqs} request rows of "
                                         f"{width} positions)", "server.max_total_num_tokens",
                                         srv.max_total_num_tokens)):
            self.runner = ModelRunner(target, self.dev, max_reqs=max_reqs, max_context=width, num_slots=slots,
                                      drafter=drafter, spec_window=self.window if drafter is not None else 1,
                                      drafter_kind="block" if srv.speculative_algorithm.is_block else "chain",
                                      topk=(srv.speculative_eagle_topk or 1) if drafter is not None and
                                      not srv.speculative_algorithm.is_block else 1,
                                      num_steps=srv.speculative_num_steps if drafter is not None and
                                      not srv.speculative_algorithm.is_block else None,
                                      ctx_buckets=ctx_buckets, bs_buckets=srv.graph_batch_sizes, external_kv=True,
                                      prefill_graph_tokens=self._prefill_buckets(graphs),
                                      token_ids=_known_outputs(self.specs))
        self.preset = preset
        self._env: dict[str, str] | None = None
        self.graphs = graphs and self.dev.is_gpu
        self.do_warmup = warmup
        self._warmed = False
        self.token_gen = torch.Generator().manual_seed(self.seed * 1000 + _TOKENS_STREAM)
        # prompt tokens are made on the device: a host tensor of a new size each prefill
        # would need new pinned staging memory inside the measured loop
        self.device_gen = torch.Generator(device=self.dev.torch_device).manual_seed(self.seed * 1000 + _TOKENS_STREAM)
        # prompt ids of the requests that have them (shared prefixes), on the device once,
        # within the vocabulary: the extend feeds them (_prompt_tokens)
        ignore_eos = scenario.workload.ignore_eos
        self._prompt_ids = {s.index: torch.as_tensor(np.asarray(t) % self.vocab, dtype=torch.int64,
                                                     device=self.dev.torch_device)
                            for s in self.specs if (t := scheduler_request(s, ignore_eos).tokens) is not None}
        self._reset_run_state()

    def _allocation(self, what: str, key: str, value: object) -> Allocation:
        """What the block about to run allocates (:class:`runtime.memory.allocating`): a device
        out-of-memory error raised in it is said at the command boundary with these words."""
        lower = ("a smaller --preset",) if key == "--preset" else LOWER_KEYS
        return Allocation(what, key, value, lower, self.dev.torch_device)

    def _prefill_buckets(self, graphs: bool) -> list[int]:
        """Extend token buckets replayed piecewise: the scenario's ``prefill_graph_tokens``
        on CUDA with graphs on; none on CPU and on HIP, where SGLang 0.5.23's prefill graph
        backend defaults to disabled (model_executor/cuda_graph_config.py
        ``default_prefill_backend``: breakable only when ``is_cuda()``)."""
        if not (graphs and self.dev.is_gpu) or self.dev.is_hip:
            return []
        return self.server.prefill_graph_tokens

    def accepts(self, scenario: Scenario) -> bool:
        """Whether :meth:`set_scenario` can take ``scenario``: the same window, running
        slots, KV pool (max_total_num_tokens bounds the device pool), captured graph batch
        sizes and extend buckets, drafter and workload (the request rate, the client's
        max_concurrency and a closed loop's concurrency may differ: they only time the sends), and the same requests as the
        server runs them (an arm's ``context_length`` or ``allow_auto_truncate`` cuts other
        outputs), i.e. what sizes the model, the KV pool, the request rows and the captured
        graphs."""
        a, b = self.scenario, scenario
        if not (a.server.spec_window == b.server.spec_window
                and a.server.max_running_requests == b.server.max_running_requests
                and a.server.max_total_num_tokens == b.server.max_total_num_tokens
                and a.server.cuda_graph_max_bs == b.server.cuda_graph_max_bs
                and a.server.graph_batch_sizes == b.server.graph_batch_sizes
                and a.server.prefill_graph_tokens == b.server.prefill_graph_tokens
                and a.server.speculative_algorithm == b.server.speculative_algorithm
                and _sends_aside(a.workload) == _sends_aside(b.workload)):
            return False
        try:
            specs, _ = served_for(scenario, self.seed)
        except ValueError:   # a turn past the context or the pool: a fresh engine says so
            return False
        return _served_key(specs) == _served_key(self.specs)

    def set_scenario(self, scenario: Scenario) -> None:
        """Measure another arm (or request rate, or client concurrency) with the same model,
        KV pool and graphs.

        Raises:
            ConfigError: a scenario the runtime does not run (:func:`check_runnable`),
                refused as the constructor refuses it; the engine keeps the scenario it had.
            ValueError: the scenario differs in what sizes the model or what it serves
                (window, running slots, graph batch sizes, served requests: :meth:`accepts`).
        """
        check_runnable(scenario)
        if not self.accepts(scenario):
            raise ValueError("set_scenario needs the same window, slots, KV pool, graph batch sizes, workload and "
                             "served requests (the request rate and max_concurrency may differ); build a new engine")
        self.scenario, self.server = scenario, scenario.server

    # ------------------------------------------------------------------ state
    def _reset_run_state(self) -> None:
        srv = self.server
        # drawn at the accept window, as the simulator draws them: a draft tree verifies
        # spec_window nodes but accepts at most num_steps drafts of one path
        self.acceptance = AcceptanceModel(self.scenario.acceptance, srv.accept_window, self.seed,
                                          draft_tree(self.server))
        # every request's accept draws made here, off the clock: drawn lazily, a request's
        # first draw ran inside its first verify's launch call (AcceptanceModel.prepare says
        # what it cost); a verify commits at least one token, so output_len cycles suffice
        self.acceptance.prepare([s.index for s in self.specs], [s.output_len for s in self.specs])
        self.tokens = DeviceTokens(self.acceptance)
        where = self.scenario.path or None   # a user policy's module: found beside the scenario too
        self.sched = Scheduler(srv, make_policy(srv, self.seed, where), self.seed, where)
        self._reset_loop_host(self.specs, self.seed)
        # rows the previous pass (the unmeasured one, or another arm) still holds go back to
        # the pool: the new pass's ledger starts empty, so must the device pool
        for row in getattr(self, "rows", {}).values():
            self.runner.free_request(row)
        if getattr(self, "tree_slots", None) is not None:
            self.tree_slots.clear()   # the new pass's tree starts empty
        self.rows: dict[int, int] = {}
        self._row_requeues: dict[int, int] = {}   # rid -> its retractions + preemptions when its row was taken
        # the device slots of the radix cache's nodes (runtime/radix_slots.py): the tree
        # tells them every insert, split and eviction
        self.tree_slots = None
        if self.sched.cache is not None:
            self.tree_slots = TreeSlots(self.runner.pool, self.rows.__getitem__)
            self.sched.cache.values = self.tree_slots
        self._rows_peak = 0
        self._extend_tokens: dict[int, torch.Tensor] = {}
        self._prepared: dict[int, Any] = {}
        # the schedule-stream barrier is refused on HIP unless this arm measures it
        self.dev.allow_schedule_barrier = self.server.sync_mode is SyncMode.cross_queue_wait
        self._cross_queue = False
        # per-launch host readings (runtime/host_probe.py): diagnostics, not compared
        # and the host's speed over the run, the Python work's and the launch path's (runtime/host_reference.py)
        self.probe = HostProbe(SpeedSampler(launch_work=LaunchReferenceWork(self.dev.torch_device, self.dev.dtype)))

    def _sync_kv(self, plan: BatchPlan) -> None:
        """Make the device pool hold, row by row, what the scheduler's KV ledger holds now
        (``Req.kv_allocated`` after the ``schedule()`` that built ``plan`` and every
        ``process_result`` so far): rows of retracted and finished requests are freed,
        verify windows the ledger returned are released, new reservations mapped. The
        device thus never holds more than max_total_num_tokens, and a retraction frees the
        same slots in both engines (SGLang retract_decode / release_kv_cache).

        With the radix cache a request's first ``cache_protected_len`` positions are the
        tree's (its row points at the tree's slots, :mod:`runtime.radix_slots`) and
        ``kv_allocated`` counts the slots it owns past them; a new row of a request that
        matched a cached prefix points at the matched nodes' slots (SGLang
        ``prepare_for_extend`` writes ``req_to_token[row, :prefix_len]`` from
        ``match_prefix``'s indices).

        Called before the plan's forward is queued; every forward that still reads a freed
        slot was queued earlier on the same stream, so it finishes with it first.
        """
        r, reqs = self.runner, self.sched.reqs
        n = plan.num_extend
        # rows the ledger let go of first (requests finished or retracted since the last
        # forward): the scheduler admitted this plan's new requests into those rows
        gone = [rid for rid in self.rows
                if (reqs[rid].kv_allocated == 0 and reqs[rid].cache_protected_len == 0)
                or reqs[rid].requeues != self._row_requeues[rid]]
        for rid in gone:
            r.free_request(self.rows.pop(rid))
        for rid, p in zip(plan.rids[:n], plan.prefix_lens[:n], strict=True):
            row = self.rows.get(rid)
            if row is not None and p == 0:  # re-prefill after a retraction: a fresh row
                r.free_request(self.rows.pop(rid))
                row = None
            if row is None:
                self.rows[rid] = row = r.add_request()
                self._row_requeues[rid] = reqs[rid].requeues
                r.pool.set_ids(row, self._prompt_ids.get(rid))   # a multi-turn output's ids, fed as it decodes
                if p:   # a cached prefix: the tree's slots
                    node = reqs[rid].last_node
                    if self.tree_slots is None or node is None or node.depth != p:
                        raise RuntimeError(f"request {rid}: extends after a {p}-token prefix the prefix cache "
                                           "does not hold for it")
                    r.pool.attach(row, self.tree_slots.prefix(node), p)
        self._rows_peak = max(self._rows_peak, len(self.rows))
        r.pool.hold(list(self.rows.values()), [reqs[rid].kv_allocated for rid in self.rows])

    # -------------------------------------------------------------- launches
    def _launch(self, op: Launch) -> RtHandle:
        self.probe.begin()
        try:
            return self._launch_call(op)
        finally:
            self.probe.end()

    def _launch_call(self, op: Launch) -> RtHandle:
        plan, r = op.plan, self.runner
        if self._cross_queue:
            # the wait queued on the schedule stream now gates the forward stream
            self.dev.wait_stream("forward", "schedule")
            self._cross_queue = False
        start = self._timing_event()
        if op.part == "inject":
            n = plan.num_extend
            rows = [self.rows[rid] for rid in plan.rids[:n]]
            prep = self._prepared.pop(plan.step, None)
            if prep is None:
                prep = r.prepare_inject(rows, list(plan.prefix_lens[:n]), list(plan.extend_lens[:n]), sync=False)
            r.inject(prep, self._extend_tokens.pop(plan.step))
            output = self._last_output
            step_out = None
        else:
            self._sync_kv(plan)
            output = self.tokens.step(plan)
            self._last_output = output
            step_out = None
            n = plan.num_extend
            if n:
                rows = [self.rows[rid] for rid in plan.rids[:n]]
                total = int(sum(plan.extend_lens[:n]))
                toks = torch.randint(0, self.vocab - 1, (total,), generator=self.device_gen,
                                     device=self.dev.torch_device)
                if self._prompt_ids:
                    self._prompt_tokens(toks, plan)
                new = set(plan.new_rids)
                ext = r.extend(rows, list(plan.prefix_lens[:n]), list(plan.extend_lens[:n]), toks,
                               completes=[rid in new for rid in plan.rids[:n]])
                if self.server.speculative_algorithm.enabled:
                    # the drafter's forward over the prompt (Launch inject): a block drafter's
                    # KV injection, a chain drafter's draft extend for prefill
                    # (speculative/eagle_worker_v2.py _draft_extend_for_prefill)
                    self._extend_tokens[plan.step] = ext.tokens
            if n < plan.batch_size:
                rows = [self.rows[rid] for rid in plan.rids[n:]]
                graph = (self.graphs and not self.server.disable_decode_cuda_graph
                         and plan.batch_size - n <= self.server.cuda_graph_max_bs)
                if plan.mode is ForwardMode.DECODE or self.window <= 1:
                    step_out = r.decode(rows, graph=graph)
                else:
                    forced = np.maximum(output.committed[n:] - 1, 0).tolist()
                    step_out = r.spec_cycle(rows, forced, graph=graph)
        return self._launched(plan, op.part, start, output, step_out)

    def _prompt_tokens(self, toks: torch.Tensor, plan: BatchPlan) -> None:
        """Write into ``toks`` (the extend's input ids, request-major) the prompt ids of the
        requests that have them (a workload that shares prefixes): a cached prefix's KV is
        then the KV of the tokens the tree matched. Positions past the prompt (a retracted
        request's re-prefilled output) keep their random ids, but where the workload knows
        the output (a multi-turn turn: its ids are fed as it decodes, :func:`_known_outputs`)."""
        off = 0
        for rid, p, e in zip(plan.rids[:plan.num_extend], plan.prefix_lens[:plan.num_extend],
                             plan.extend_lens[:plan.num_extend], strict=True):
            ids = self._prompt_ids.get(rid)
            if ids is not None and p < ids.numel():
                k = min(e, ids.numel() - p)
                toks[off:off + k] = ids[p:p + k]
            off += e

    def _host_block(self, op: HostBlock) -> None:
        h: RtHandle = op.handle
        if op.reason == "publish":
            self._blocked += self.dev.host_block(h.done, "publish")
            return
        # DSpark prefill slot expansion without output_size: the repeat_interleave itself
        # blocks until the queued extend drains (counted by the runner as slot_expansion)
        plan = h.plan
        n = plan.num_extend
        rows = [self.rows[rid] for rid in plan.rids[:n]]
        t0 = time.perf_counter()
        self._prepared[plan.step] = self.runner.prepare_inject(
            rows, list(plan.prefix_lens[:n]), list(plan.extend_lens[:n]), sync=True)
        self._blocked += time.perf_counter() - t0

    def _wait_for_work(self) -> bool:
        nxt = self.clients.next_time()
        if nxt is None:
            return False
        delay = nxt - self._now()
        if delay > 0:
            time.sleep(delay)
        return True

    def _poll_until_send(self) -> None:
        """:data:`sim.engine.IDLE_PASSES` passes scheduled nothing with requests waiting (a
        user's delay or order holding them): the loop idles until the next send, as SGLang's
        polls ``recv_requests``; with none left to come (every request sent, or a closed
        loop's clients waiting on requests that never run) the server is stalled, which the
        simulator reports too (``SimEngine._poll_until_send``)."""
        if self.clients.next_time() is None:
            raise Stalled(f"no progress at t={self._now():.6f}s with {self.remaining} requests left")
        self._wait_for_work()

    # ------------------------------------------------------------------- run
    def warmup(self) -> None:
        """Capture the graphs of every (batch, context) bucket and extend token bucket the
        run can use and run one
        request through extend and a few steps, all before the measurement (a capture
        inside the loop would cost device synchronizations)."""
        from specsched.runtime.graphs import collector_paused

        with collector_paused():  # one collection for the whole capture loop
            self._capture_all()
        srv = self.server
        with allocating(self._allocation(f"a forward of the warm-up request (the KV pool of "
                                         f"{srv.max_total_num_tokens} tokens and the graphs already allocated)",
                                         "server.max_total_num_tokens", srv.max_total_num_tokens)):
            self._warm_requests()

    def _capture_all(self) -> None:
        """Capture every decode/verify (batch, context) bucket and extend bucket the run can reach."""
        r, srv = self.runner, self.server
        if self.graphs:
            kind = "spec" if self.window > 1 else "decode"
            ctx_need = max(sum(s.served_lengths) for s in self.specs) + 2 * self.window
            limit = min(srv.max_running_requests + 1, srv.cuda_graph_max_bs)
            keys = []
            for c in r.ctx_buckets:
                keys += [(c, b) for b in r.bs_buckets if b <= max(limit, 1)]
                if c >= ctx_need:
                    break
            with allocating(self._allocation(f"the {kind} graphs captured up to cuda_graph_max_bs "
                                             f"{srv.cuda_graph_max_bs} (batches up to {max(limit, 1)}, contexts up to "
                                             f"{ctx_need})", "server.cuda_graph_max_bs", srv.cuda_graph_max_bs)):
                # largest first, as SGLang captures (runner/decode_cuda_graph_runner.py
                # _capture_one_stream: reversed(capture_bs), "so cuda graphs share memory
                # better"): the smaller graphs' temporaries reuse the shared pool's blocks the
                # largest freed; smallest first, each larger graph found no free block big
                # enough and grew the pool by its own
                for c, b in sorted(keys, reverse=True):
                    # decode replays without forced accepts: capture the key it looks up
                    r.capture(kind, b, min(c, ctx_need), forced=kind == "spec")
            # every extend bucket the run can reach: one prefill batch holds at most
            # max_prefill_tokens and one chunk, and never more than all prompts together
            most = min(sum(s.served_lengths[0] for s in self.specs), srv.max_prefill_tokens,
                       srv.chunked_prefill_size if srv.chunked_prefill_size > 0 else 10**9)
            with allocating(self._allocation(f"the piecewise prefill graphs up to {most} tokens",
                                             "server.cuda_graph_max_bs_prefill",
                                             max(srv.prefill_graph_tokens, default=0))):
                r.capture_prefill(most)

    def _warm_requests(self) -> None:
        """One request through extend and three steps, then freed (first-use costs off the
        clock): a prompt of :data:`WARMUP_PROMPT` tokens, fewer where the KV pool holds less."""
        r = self.runner
        # within the pool (check_runnable leaves room for one token and the windows)
        n = max(1, min(WARMUP_PROMPT, r.pool.num_free_slots - 4 * self.window))
        rows = [r.add_request()]
        r.pool.hold(rows, [n + 4 * self.window])
        toks = torch.randint(0, self.vocab - 1, (n,), generator=self.token_gen)
        r.extend(rows, [0], [n], toks)
        for _ in range(3):
            if self.window > 1:
                r.spec_cycle(rows, [0], graph=self.graphs)
            else:
                r.decode(rows, graph=self.graphs)
        for row in rows:
            r.free_request(row)
        self.dev.synchronize("warmup")

    def run(self) -> RunResult:
        """Execute the scenario; returns the measured :class:`sim.records.RunResult`
        (``summary["source"] = "runtime:<device>"``)."""
        srv = self.server
        forward = self._allocation(f"a forward of the run (batches of up to {srv.max_running_requests} requests, "
                                   f"prefill chunks of up to {srv.chunked_prefill_size} tokens)",
                                   "server.max_running_requests", srv.max_running_requests)
        try:
            if self.do_warmup:
                if not self._warmed:
                    self.warmup()
                    self._warmed = True
                if self.dev.is_gpu:
                    with allocating(forward):
                        self._execute()  # an unmeasured pass over the same scenario
            with allocating(forward):
                return self._execute()
        except Stalled as e:   # a stall under the run's own user policy is the policy's (specsched/cli.py)
            e.policies = user_policy_specs(self.scenario.server)
            raise

    def _execute(self) -> RunResult:
        self._reset_run_state()
        self.dev.reset_counters()
        loop = scheduler_loop(self.sched, self.server)
        # a progress line for long (CPU) measurements; off when not a terminal
        self._bar = (tqdm(total=len(self.specs), desc=f"measure {self.scenario.name}", unit="req", leave=False,
                          disable=None) if self.progress else None)
        self.probe.start()
        with self.dev.use("forward"):
            self._start_clock()
            ref = self._ref
            result: Any = None
            idle = 0   # passes in a row with nothing received, launched or resolved
            while True:
                op = loop.send(result)
                result = None
                if isinstance(op, Recv):
                    result = self._recv()
                    idle = 0 if result else idle + 1
                    if idle > IDLE_PASSES:
                        self._poll_until_send()
                        idle = 0
                elif isinstance(op, HostWork):
                    if op.kind == "schedule":
                        self._pass(self.sched)
                elif isinstance(op, Launch):
                    result = self._launch(op)
                    idle = 0
                elif isinstance(op, HostBlock):
                    self._host_block(op)
                elif isinstance(op, StreamWait):
                    if op.from_stream == "schedule":
                        self.dev.stream_wait("schedule", op.handle.done)
                        self._cross_queue = True
                    else:
                        self.dev.stream_wait("forward", op.handle.done)
                elif isinstance(op, Results):
                    result = self._results(op)
                    idle = 0
                elif isinstance(op, Deliver):
                    self._deliver(op)
                    if self.remaining == 0:
                        break
                elif isinstance(op, WaitForWork):
                    if self.remaining == 0 or not self._wait_for_work():
                        break
            self.dev.synchronize("end")
        self.probe.stop()
        if self._bar is not None:
            self._bar.close()
        self._resolve_timing(ref)
        return self._result()

    def launch_probe(self) -> dict[str, list[float]]:
        """Per launch call of the last run, in the order of its steps table's rows: the
        call's wall, the thread's CPU time, involuntary context switches and GC seconds in
        it (:meth:`runtime.host_probe.HostProbe.columns`); row i is the steps table's row i
        (both are in launch order)."""
        return self.probe.columns(self.rec.num_steps)

    def host_speed_samples(self) -> dict[str, list[float]]:
        """The last run's host-speed samples (:mod:`runtime.host_reference`): ``t_s`` (seconds
        since the run's start, negative for the one taken just before it) and
        ``reference_work_s`` (thread CPU seconds of the reference work) and
        ``launch_reference_work_s`` (of the launch reference work, sampled right after)."""
        sp = self.probe.speed
        return {"t_s": [t - self.t0 for t in sp.times], "reference_work_s": list(sp.seconds),
                "launch_reference_work_s": list(sp.launch_seconds)}

    def environment(self) -> dict[str, str]:
        """The provenance stamp of this run (:func:`runtime.environment.environment`), with
        the SDPA backend probed once on the preset's real shapes."""
        if self._env is None:
            sdpa = model_sdpa_probe(self.dev, self.runner.target.cfg, max(self.window, 2))
            self._env = environment(self.dev, sdpa=sdpa, serializing=self.serializing)
        return self._env

    def _result(self) -> RunResult:
        extra = {rid: (self.acceptance.request_mean(rid) if self.window > 1 else 1.0, r.spec_cycles, r.retractions,
                       r.preemptions)
                 for rid, r in self.sched.reqs.items()}
        self.rec.end_early(self.sched.oom_aborted)   # requests SGLang aborted out of memory
        (requests, chunks, steps, ts), summary = summarize_recorder(self.rec, extra)
        requests = with_request_labels(requests, self.specs)   # priority / routing-key classes, if sent
        # steady_state_serving's separate result, as the simulator's summary carries it
        summary.update(run_steady_summary(self.scenario, requests, chunks))
        summary.update(
            host_probe=self.probe.summary(), host_speed=self.probe.speed_summary(),
            scenario=self.scenario.name, arm=self.scenario.arm, seed=self.seed,
            source=f"runtime:{self.dev.describe()}", preset=self.preset,
            **run_counts(self.sched),   # the same counts as the simulator's summary (preemptions, SWA peak, cache hit rate)
            **output_cut_summary(self.output_cuts),
            **truncation_summary(self.scenario, self.specs),
            request_rows_peak=self._rows_peak,
            host_blocked_s=float(sum(self.dev.sync_seconds.values())),
            host_syncs=dict(self.dev.sync_counts), queued_waits=dict(self.dev.queued_waits),
            event_records=dict(self.dev.event_records),
            event_records_per_step=(sum(self.dev.event_records.values()) / max(1, self.rec.num_steps)),
            backend=self.dev.label,
            environment=self.environment(),
            memory_estimate=self.memory_estimate.describe(),
            schedule_barrier=("measured on purpose (sync_mode cross_queue_wait): the schedule stream waits on "
                              "forward work, a barrier refused on HIP otherwise" if self.dev.allow_schedule_barrier
                              else "none"),
        )
        return RunResult(requests, chunks, steps, ts, summary, self.scenario)


def measure_scenario(scenario: Scenario, **kw: Any) -> RunResult:
    """Run ``scenario`` for real (see :class:`RuntimeEngine` for the keyword arguments)."""
    return RuntimeEngine(scenario, **kw).run()
