"""The simulator: executes the scheduler loop's operations on a SimPy clock.

The host is one SimPy process driving :func:`sim.loop.scheduler_loop`; host work advances
the host's time by the cost model's host seconds. The forward stream is a FIFO timeline: a
launch starts when both the host has issued it and the previous forward has finished, and
lasts the cost model's GPU seconds, so the GPU idles exactly when the host is late. A host
block waits for an event's time (plus the wake-up cost if it really waited); a DSpark
prefill's slot-expansion block then holds the host for the profile's
``host.slot_expansion_s``, the GPU idle, before the injection is launched. Clients
(burst, closed loop, Poisson with max_concurrency) are SimPy processes; requests pass a
tokenizer FIFO (the profile's ingest time) before the scheduler sees them
(:mod:`sim.engine_clients`).

Speed (docs/performance.md):

- The host's clock runs ahead of SimPy's while no other event is due before it, and hands
  control to SimPy (a timeout landing exactly on the host's time) only when one is: the
  order in which things happen, and every time, are those of yielding at each host step.
- Fast-forward: at the top of the loop (the loop's ``FastForward`` op), a stretch of decode
  iterations that nothing outside can change (no arrival before it ends, no admission, no
  retraction, no finish a client reacts to) is computed at once by the scheduler
  (:meth:`sim.scheduler.Scheduler.decode_stretch`), timed by :mod:`sim.engine_stretch`
  (:mod:`sim.host_timeline`) and applied through the scheduler (``apply_stretch``); the
  loop goes on with the stretch's last forward in flight. The results are identical to
  the step-by-step path (``fast_forward=False``), which tests/test_sim_speed_equivalence.py
  checks (INV-7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import Scenario, ServerArgs, SyncMode, draft_tree, scenario_file
from specsched.sim.cost_model import CostModel
from specsched.sim.defaults import hardware_of
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.engine_clients import Clients
from specsched.sim.engine_stretch import MAX_RUN_CELLS, PLAIN_HORIZON, EngineStretch  # noqa: F401  (re-exported)
from specsched.sim.errors import ConfigError
from specsched.sim.gc_pause import collector_paused
from specsched.sim.grid_range import (
    AcceptanceBeyond,
    AcceptanceSiblingUnread,
    AcceptanceTreeCut,
    AcceptanceTreeShape,
    RangeNote,
    merged,
    write_warnings,
)
from specsched.sim.host_speed import scale_host
from specsched.sim.limits import check_hardware
from specsched.sim.loop import scheduler_loop
from specsched.sim.metrics import summarize_recorder
from specsched.sim.ops import (
    Deliver,
    FastForward,
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
from specsched.sim.profile import Profile, analytic_costs, load_profile
from specsched.sim.records import Recorder, RunResult, delivery_arrays
from specsched.sim.request import Req
from specsched.sim.scheduler import Deliveries, Scheduler, run_counts
from specsched.sim.served import output_cut_summary, served_requests, truncation_summary
from specsched.sim.steady_state import run_steady_summary
from specsched.sim.workload import make_requests, with_request_labels

AUTO_COMPACT_TOKENS = 1_000_000
"""``records="auto"`` keeps every chunk row up to this many output tokens in the run, and
switches to compact records above (docs/performance.md)."""


@dataclass(slots=True)
class SimHandle:
    """A launched forward on the simulated stream: GPU start/end (s) and its output."""

    plan: BatchPlan
    start: float
    end: float
    output: StepOutput | None


_LAST = simpy.events.NORMAL + 1
"""A SimPy priority after ``NORMAL`` (SimPy orders events due at one time by priority, then
by when they were scheduled)."""


class _AfterNow(simpy.Event):
    """An event due now, processed after every ``NORMAL`` or ``URGENT`` event due now,
    including those scheduled while it waits (a host lets the clients' zero-delay reactions
    to a delivery run first: :meth:`SimEngine._deliver`)."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, _LAST)


class Stalled(RuntimeError):
    """The loop made no progress while requests were outstanding (a model bug): a host
    looped without its clock moving, or every host slept with nothing left to wake it.
    ``policies``: the user policies the stalled run's server ran (set by :meth:`SimEngine.run`;
    a stall under one of them is the policy never admitting, not the model's bug)."""

    policies: tuple[str, ...] = ()


IDLE_PASSES = 100_000
"""Passes in a row that schedule nothing with nothing in flight and requests waiting (an
admission delay or a queue order holding them) before the host is taken to be idle until
the next send: SGLang's idle loop keeps polling ``recv_requests`` (managers/scheduler.py
``event_loop_overlap``: no batch, loop again), so a policy counting passes
(``max_delay_passes``) sees them all; with no send left to come, the server is stalled.
The simulator and the runtime both count them (sim/engine.py, runtime/engine.py)."""


class SimEngine(Clients, EngineStretch):
    """One simulated serving run.

    Args:
        scenario: a resolved scenario (arm applied).
        profile: its profile (loaded from ``scenario.profile`` when None).
        seed: overrides ``scenario.seed``.
        fast_forward: collapse decode stretches (identical results; False = step by step).
        records: ``full`` (every chunk, step and pass is a row), ``compact`` (requests table
            plus exact summary statistics; chunks/steps/timeseries empty) or ``auto``
            (compact above :data:`AUTO_COMPACT_TOKENS` output tokens). See
            :mod:`sim.records`.
    """

    shares_clock = False
    """Whether other hosts run on this engine's clock (a deployment's servers:
    :class:`sim.member_server.MemberServer`); a lone server with open arrivals is SimPy's
    only process and moves its clock without it (:meth:`_host`)."""

    def __new__(cls, scenario: Scenario, *args: Any, **kwargs: Any) -> SimEngine:
        # a prefill-decode disaggregated scenario, or data-parallel replicas, run as a
        # deployment of servers
        if cls is SimEngine and scenario.server.disaggregation is not None:
            from specsched.sim.disaggregation import PDEngine

            return super().__new__(PDEngine)
        if cls is SimEngine and scenario.server.dp_replicas > 1:
            from specsched.sim.dp_replicas import ReplicaEngine

            return super().__new__(ReplicaEngine)
        return super().__new__(cls)

    def __init__(self, scenario: Scenario, profile: Profile | None = None, seed: int | None = None,
                 *, fast_forward: bool = True, records: str = "auto") -> None:
        # the collector is off while the requests are built too, as during the run
        # (sim/gc_pause.py): a million-request workload is millions of long-lived objects,
        # over which the allocation-triggered collections walked for nothing (~0.9 s of a
        # 1M run's ~2.4 s of set-up, docs/performance.md)
        with collector_paused():
            self.scenario = scenario
            self.seed = scenario.seed if seed is None else seed
            # host work at the scenario's host speed (sim/host_speed.py; factor 1: this profile)
            self.profile = self._host_conditioned(profile or load_profile(scenario.profile, scenario.path or None))
            check_hardware(scenario, hardware_of(self.profile))   # weights that leave no KV pool: SGLang stops at start
            verifier = scenario.server.verifying_server()   # the accept lengths are drawn at its window and tree
            self.acceptance = AcceptanceModel(scenario.acceptance, verifier.accept_window, self.seed, draft_tree(verifier))
            w = scenario.workload
            self._finish_reacts = w.kind in ("closed_loop", "multi_turn") or (w.kind in ("poisson", "trace") and w.max_concurrency is not None)
            self._init_host(scenario.server, DeviceTokens(self.acceptance), fast_forward)
            self.specs = make_requests(scenario.workload, self.seed, scenario.path or None)
            self.offered_arrival_span_s: float | None = None   # set by _start_clients for poisson / trace
            # the requests as the server runs them (outputs cut, rejected rows marked), and the
            # (request, asked, run) of each cut output; turns past the context or pool refused
            self.specs, self.output_cuts = served_requests(scenario, self.specs, hardware_of(self.profile), self.seed)
            if records == "auto":
                tokens = sum(s.output_len for s in self.specs)
                records = "compact" if tokens > AUTO_COMPACT_TOKENS else "full"
            self.env = simpy.Environment()
            self.rec = Recorder(records)
            if w.kind == "trace":   # rows the server rejects (sim/served.py trace_aborts) count as failed
                self.rec.mark_aborted({s.index: s.abort for s in self.specs if s.abort is not None})
                self.rec.mark_no_text(s.index for s in self.specs if s.prefill_only)   # cut to max_new_tokens 0
            self._tokenizer_free = 0.0
            self._finish_events: dict[int, simpy.Event] = {}
            self._remaining = len(self.specs)
            self.all_done = self.env.event()

    def _host_conditioned(self, profile: Profile) -> Profile:
        """``profile`` at the scenario's host speed (``host.speed_factor``, ``host.reference_work_s``;
        sim/host_speed.py owns the scaling). Raises ConfigError when a run reference is given
        for a profile that records no host speed."""
        h = self.scenario.host
        try:
            return scale_host(profile, h.speed_factor, h.reference_work_s, h.launch_speed_factor,
                              h.launch_reference_work_s)
        except ValueError as e:
            field, value = (("host.launch_reference_work_s", h.launch_reference_work_s) if "launch" in str(e)
                            else ("host.reference_work_s", h.reference_work_s))
            raise ConfigError(scenario_file(self.scenario), field, value,
                              f"{e} (profile {profile.path or profile.name})") from None

    def _init_host(self, server: ServerArgs, device: DeviceTokens, fast_forward: bool) -> None:
        """One server's scheduler, cost model, device counts, host clock and forward stream
        (a disaggregated deployment has one per server: sim/disaggregation.py)."""
        self.server = server
        self.cost = CostModel(self.profile, server)
        self.device = device
        # the scenario's folder: where a user policy named by a module path is found when it
        # is not on sys.path (a worker process has only the scenario); the run's seed
        where = self.scenario.path or None
        self.sched = Scheduler(server, make_policy(server, self.seed, where), self.seed, where)
        if server.enable_dp_attention:
            # dp_size lock-step schedulers behind one scheduler's interface (sim/dp_attention.py)
            from specsched.sim.dp_attention import DPCost, DPDevice, DPGroup

            self.sched = DPGroup(server, self.seed, where)
            self.cost = DPCost(CostModel(self.profile, self.sched.rank_server), self.profile.gpu.dp_attention_sync_s,
                               server.dp_size)
            self.device = DPDevice(device)
        self.inbox: list[Req] = []
        # open arrivals (Poisson or trace without max_concurrency): no SimPy process; the
        # host takes them from these lists when its clock reaches them (_take_arrivals)
        self._arrive_at: list[float] = []   # time each request reaches the scheduler (s)
        self._arrive_specs: list = []       # ... and the request (the tokenizer's rejections left out)
        self._sent_at: list[float] = []     # ... and the time its client sent it (s)
        self._arrived = 0                   # how many have reached the scheduler
        self._next_arrival = math.inf       # _arrive_at[_arrived], inf when all have
        self._wake: simpy.Event | None = None
        self._solo = False                  # the host is SimPy's only process (_host)
        self._t = 0.0                       # the host's clock (>= env.now)
        self._gpu_free = 0.0
        self._forward_in_launch = self.profile.gpu.forward_in_launch   # CPU: _launch
        self._cross_queue_pending = False
        self._blocked_since_launch = 0.0
        self.host_blocked_s = 0.0
        self._inject_prepared = False   # the next inject launch follows a slot-expansion block
        self._last_output: StepOutput | None = None
        self._in_flight: SimHandle | None = None   # last launch whose results are pending
        self._decode_dt = 0.0                        # GPU seconds of the last decode/verify
        self._last_mode: ForwardMode | None = None   # the last main forward's (CostModel.after_step_ratio)
        self._after_step = self.profile.gpu.extend_after_step is not None
        # collapsed decode stretches record every step's tokens as delivered and receive at
        # every arrival; a stream interval above 1 holds tokens back (sim/output_streamer.py),
        # a recv interval above 1 requests (sim/recv_skipper.py): step by step then; so does
        # a device whose launch runs the forward (gpu.forward_in_launch: the collapsed
        # stretches overlap the host with the forward)
        self.fast_forward = (fast_forward and server.enable_overlap_schedule and not server.enable_dp_attention
                             and server.stream_interval == 1 and server.scheduler_recv_interval == 1
                             and not self._forward_in_launch)
        self._gpu_memo: dict[int, float] = {}
        self._seg_memo: dict[tuple[int, int, int], list] = {}   # plain_timeline.walk's segments
        # what every closed-form stretch hands plain_timeline.walk (the profile's, read once)
        self._wake_s = self.profile.host.sync_wakeup_s
        self._walk_tail = self._plain_tail if self._has_tail else None
        self._host_memo: dict[int, tuple[float, float, float]] = {}
        self._tail_memo: dict[int, float] = {}
        self._host_tab: list[np.ndarray] | None = None
        self._shapes: dict[int, tuple[tuple[int, ...], ...]] = {}
        self.ff_runs = 0
        self.ff_iterations = 0

    @property
    def requests_left(self) -> int:
        """Requests not finished yet (read by the CLI's progress bar from another thread)."""
        return self._remaining

    # ------------------------------------------------------------------ clock
    def _delay_to(self, t: float) -> float:
        """A delay d with env.now + d == t exactly (SimPy adds delays to its clock), or,
        where no float delay reaches t, the smallest one landing after it: never before t.
        Float addition rounds half to even, so when env.now's low bits are half a unit of
        t's last place, every other sum is unreachable; landing one unit early there let a
        closed-loop client send its next request before the last token of the one it
        waited for (INV-CLOCK, tests/test_sim_clock.py)."""
        now = self.env.now
        d = t - now
        while now + d < t:
            d = math.nextafter(d, math.inf)
        # down to the first delay reaching t, not the smallest: with a gap far below the
        # clock's precision, 2**40 delays may reach it
        while now + d > t:
            e = math.nextafter(d, -math.inf)
            if now + e < t:
                break
            d = e
        return d

    def _sync(self, t: float):
        """Hand control to SimPy until ``t``; the host's clock is then SimPy's: ``t``, or
        the first time after it SimPy's clock can reach (:meth:`_delay_to`)."""
        if t > self.env.now:
            yield self.env.timeout(self._delay_to(t))
            t = self.env.now
        self._t = t

    def _advance(self, dt: float):
        """Host work of ``dt`` seconds (dt > 0): the clock moves privately while nothing
        else is due before it ends, else SimPy runs what is due first."""
        t = self._t + dt
        if t < self.env.peek():
            self._t = t
        else:
            yield from self._sync(t)

    # ------------------------------------------------------------------- host
    def _launch(self, op: Launch) -> tuple[SimHandle, float]:
        """Put ``op``'s forward on the stream. Returns its handle and the host seconds the
        launch keeps the host busy after it (the caller advances the host's clock): the
        kernel issue of an eager forward (CostModel.issue) and the rest of a
        graph-replayed step's launch call (CostModel.launch_tail)."""
        now = self._t
        # an injection prepared inside the slot-expansion block issues without its preparation
        issue = self.cost.issue(op.plan, op.part, self._inject_prepared)
        self._inject_prepared = False
        cost = self.cost.gpu(op.plan, op.part, cross_queue=self._cross_queue_pending)
        gpu_s = cost.total_s
        self._cross_queue_pending = False
        # max(a, b) written out as b if b > a else a (its very comparison and choice):
        # builtin min/max parse their arguments through a tuple on every call in 3.11
        free = self._gpu_free
        start = free if free > now else now  # INV-6: one forward at a time on the stream
        # an eager forward's kernels run as the host issues them: it ends no earlier than
        # the issue does, and the host is busy issuing until then (below); on an idle
        # stream an extend's first kernels trail the launch (CostModel.idle_lead_s)
        lead = now + self.cost.idle_lead_s(op.plan, op.part)
        work_from = free if free > lead else lead
        if op.part == "main":
            if self._after_step and free > lead:
                # queued right behind the previous forward, an extend runs at the clock that
                # forward left (sim/profile.py GpuProfile.extend_after_step); x + 0.0 is x
                ratio = self.cost.after_step_ratio(op.plan, self._last_mode)
                gpu_s += cost.extend_s * (ratio - 1.0)
            self._last_mode = op.plan.mode
        end, issued = work_from + gpu_s, now + issue
        if issued > end:
            end = issued
        self._gpu_free = end
        # the inject launch belongs to the same step: its handle carries the step's output
        output = self.device.step(op.plan) if op.part == "main" else self._last_output
        plan = op.plan
        acc = dec = 0
        if output is not None and op.part == "main" and plan.num_extend < plan.batch_size:
            # a handful of ints: plain Python sums (numpy's call overhead dominates here)
            dec_n = output.counts()[plan.num_extend:]
            acc = sum(dec_n)
            dec = len(dec_n) - dec_n.count(0)
        # plan.mode itself: a ForwardMode is a str equal to its value (.value is a Python-level property)
        self.rec.step(plan.step, plan.mode, op.part, plan.batch_size, plan.num_extend_tokens,
                      start, end, self._blocked_since_launch, acc, dec)
        self._blocked_since_launch = 0.0
        self._last_output = output
        if plan.num_extend == 0:
            self._decode_dt = end - start
        handle = SimHandle(plan, start, end, output)
        self._in_flight = handle
        if self._forward_in_launch:   # the launch call returns when its forward has run (CPU)
            issue = end - now if end - now > issue else issue
        return handle, issue + self.cost.launch_tail(op.plan, op.part)  # the tail does not hold the forward

    def _block_until(self, t: float, wakeup: float):
        wait = t - self._t
        if wait > 0:
            wait += wakeup
            self.host_blocked_s += wait
            self._blocked_since_launch += wait
            yield from self._advance(wait)

    def _deliver(self, deliveries: Any):
        if type(deliveries) is Deliveries:  # the scheduler's: lists, recorded element-wise
            rid_list, fin_list = deliveries.rid_list, deliveries.fin_list
            self.rec.deliver_step(self._t, rid_list, deliveries.n_list, fin_list)  # INV-5
            done = [r for r, f in zip(rid_list, fin_list, strict=True) if f]
        else:
            rids, n, fin = delivery_arrays(deliveries)
            self.rec.deliver(self._t, rids, n, fin)  # INV-5: the host clock never goes back
            done = rids[fin].tolist()
        if done:
            pop = self._finish_events.pop
            waited = [ev for ev in (pop(rid, None) for rid in done) if ev is not None]
            self._remaining -= len(done)
            woken = bool(waited)
            if woken:
                yield from self._sync(self._t)  # clients react at the delivery time
                for ev in waited:
                    ev.succeed()
            # let the woken clients send now, before the loop's next receive: a closed-loop
            # client sends its next request when the last token arrives (a freed
            # max_concurrency slot likewise), and the next schedule() sees it
            # (runtime/engine.py _deliver then _recv; bench_serving's client). Without this
            # the request waited one more pass: a verify cycle of TTFT in every closed-loop
            # cell (window4-lowacc +53 % on H200 round 5). One event due now but after
            # every other event due now (_AfterNow), however long the clients' zero-delay
            # chains (slot release -> next client -> send) are. Not a loop while anything is
            # due now: two hosts of one clock (a disaggregated deployment's decode servers)
            # delivering at the same instant each kept the other's zero-delay wait due, and
            # the clock never moved (INV-PD-PROGRESS).
            if woken:
                yield _AfterNow(self.env)
        if self._remaining == 0 and not self.all_done.triggered:
            self.all_done.succeed()

    def _scheduler_loop(self) -> Any:
        """The scheduler's event loop this host executes (:func:`sim.loop.scheduler_loop`)."""
        return scheduler_loop(self.sched, self.server, fast_forward=self.fast_forward)

    def _host(self):
        loop = self._scheduler_loop()
        sched, cost, wake = self.sched, self.cost, self.profile.host.sync_wakeup_s
        slot_expansion = self.profile.host.slot_expansion_s
        rec = self.rec
        ts_rows = rec.full   # the timeseries rows are kept (full records)
        peek = self.env.peek
        # open arrivals: the host is SimPy's only process, so nothing is due before the run
        # ends (peek() is inf) and the host clock always just moves; off once all_done fires
        # (peek() on an empty queue raises and catches an IndexError: ~1 us a call)
        solo = self._solo = bool(self._arrive_at) and not self.shares_clock
        idle_spins = 0
        last_t = -1.0
        op = next(loop)
        while True:
            result: Any = None
            tp = type(op)
            if tp is HostWork:   # the most frequent op (three an iteration) first
                if op.kind == "schedule":
                    if ts_rows:
                        rec.pass_state(self._t, sched.num_running, len(sched.waiting), sched.kv.used)
                    else:   # compact records: no row, so the state is not read
                        rec.count_pass()
                dt = cost.host(op.kind, op.plan)
                if dt > 0:
                    # _advance inlined (three host works per iteration): no generator
                    # when the host clock just moves ahead of SimPy's
                    t = self._t + dt
                    if solo or t < peek():
                        self._t = t
                    else:
                        yield from self._sync(t)
            elif tp is FastForward:
                if self._next_arrival <= self._t:
                    self._take_arrivals()
                if not self.inbox:
                    jumped = self._fast_forward(op)
                    if jumped is not None:
                        # a stretch was applied: the loop goes on with its last forward in
                        # flight, the host at the stretch's end (_advance inlined)
                        result, t = jumped
                        if solo or t < peek():
                            self._t = t
                        else:
                            yield from self._sync(t)
            elif tp is Recv:
                if self._t == last_t:
                    idle_spins += 1
                    if idle_spins > IDLE_PASSES:
                        yield from self._poll_until_send(solo)
                        idle_spins = 0
                else:
                    idle_spins, last_t = 0, self._t
                if self._next_arrival <= self._t:
                    self._take_arrivals()
                result, self.inbox = self.inbox, []
            elif tp is Launch:
                result, busy = self._launch(op)
                if busy > 0:
                    t = self._t + busy   # _advance inlined, as for host work
                    if solo or t < peek():
                        self._t = t
                    else:
                        yield from self._sync(t)
            elif tp is Results:
                wait = op.handle.end - self._t
                if wait > 0:
                    # _block_until inlined (once per iteration): no generator when the host
                    # clock just moves ahead of SimPy's
                    wait += wake
                    self.host_blocked_s += wait
                    self._blocked_since_launch += wait
                    t = self._t + wait
                    if solo or t < peek():
                        self._t = t
                    else:
                        yield from self._sync(t)
                if op.handle is self._in_flight:
                    self._in_flight = None
                result = op.handle.output
            elif tp is Deliver:
                d = op.deliveries
                if type(d) is Deliveries and True not in d.fin_list:
                    # a step that completes no request: recorded, no client reacts (_deliver)
                    rec.deliver_step(self._t, d.rid_list, d.n_list, d.fin_list)  # INV-5
                    if self._remaining == 0 and not self.all_done.triggered:
                        self.all_done.succeed()
                        solo = self._solo = False
                else:
                    yield from self._deliver(d)
                    solo = self._solo = solo and not self.all_done.triggered
            elif tp is HostBlock:
                yield from self._block_until(op.handle.end, wake)
                if op.reason == "slot_expansion":
                    # the loop prepares the injection inside the block and its launch reuses
                    # the batch (runtime/engine.py _host_block): CostModel.issue(prepared=True)
                    self._inject_prepared = True
                if op.reason == "slot_expansion" and slot_expansion > 0:
                    # the rest of the expansion after the extend drained: its second
                    # round trip and the injection batch's indices, GPU idle (profile
                    # host.slot_expansion_s); the runtime counts the whole call as blocked
                    self.host_blocked_s += slot_expansion
                    self._blocked_since_launch += slot_expansion
                    yield from self._advance(slot_expansion)
            elif tp is StreamWait:
                # forward-stream wait: stream order already carries it; schedule-stream wait:
                # a wait pending in another queue during the next graph replay
                self._cross_queue_pending = op.from_stream == "schedule" and self.server.sync_mode is SyncMode.cross_queue_wait
            elif tp is WaitForWork:
                if self._remaining == 0:
                    return
                if self._arrive_at:
                    # open arrivals: nothing else reaches this host (no client process), so
                    # it sleeps until the next one
                    if not self.inbox:
                        if self._next_arrival == math.inf:
                            if self.shares_clock:
                                return   # the deployment's other servers finish the run
                            raise Stalled(f"no work at t={self._t:.6f}s with {self._remaining} requests left")
                        self._t = max(self._t, self._next_arrival)
                        self._take_arrivals()
                else:
                    yield from self._sync(self._t)
                    if not self.inbox:
                        self._wake = self.env.event()
                        yield self._wake
                        self._wake = None
                        self._t = self.env.now
            op = loop.send(result)

    def _poll_until_send(self, solo: bool):
        """The host idles in its receive loop (:data:`IDLE_PASSES` passes scheduled nothing,
        nothing in flight) until a request reaches it: the next open arrival, or what the
        clients' processes send. Raises :class:`Stalled` when nothing is left to come."""
        if solo:
            if self._next_arrival == math.inf:
                raise Stalled(f"no progress at t={self._t:.6f}s with {self._remaining} requests left")
            self._t = max(self._t, self._next_arrival)
            return
        polled_at = -math.inf   # when this host last let what was due run (_AfterNow)
        while not self.inbox and self._next_arrival > self._t:
            # what others send, or (a deployment's server with open arrivals) its next one
            nxt = min(self.env.peek(), self._next_arrival)
            if nxt == math.inf:
                raise Stalled(f"no progress at t={self._t:.6f}s with {self._remaining} requests left")
            if nxt > self._t:
                yield from self._sync(nxt)
            elif self._t > self.env.now:
                yield from self._sync(self._t)
            elif polled_at != self.env.now:   # due now (a client's zero-delay step): let SimPy run it
                polled_at = self.env.now
                yield _AfterNow(self.env)
                self._t = max(self._t, self.env.now)
            else:
                # still due now after that: other hosts polling at this instant (a deployment's
                # servers idle together), each of whose polls kept the others' due, so the clock
                # never moved; sleep until a request reaches this host (or its next open
                # arrival). With every host asleep and nothing due the run stalls (_run_clock).
                self._wake = self.env.event()
                yield (self._wake if self._next_arrival == math.inf
                       else self._wake | self.env.timeout(self._delay_to(self._next_arrival)))
                self._wake = None
                self._t = max(self._t, self.env.now)

    # ------------------------------------ fast-forward (the rest: sim/engine_stretch.py)
    def _stretch_applied(self, plan: BatchPlan, output: StepOutput, start: float, end: float, t: float,
                         n: int) -> tuple[tuple[BatchPlan, SimHandle], float]:
        """After a stretch of n iterations: its last forward (start, end s) is in flight and
        the host is at ``t``. Returns the loop's (plan, handle) and ``t`` (the caller moves
        the host's clock there)."""
        handle = SimHandle(plan, start, end, output)
        self._gpu_free = end
        self._last_mode = plan.mode
        self._last_output = output
        self._cross_queue_pending = False
        self._in_flight = handle
        self.ff_runs += 1
        self.ff_iterations += n
        return (plan, handle), t

    # -------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Run to completion (every request finished) and return the result tables.

        The cyclic garbage collector is off meanwhile (:mod:`sim.gc_pause`: a run makes
        millions of short-lived objects and almost no reference cycles) and restored after,
        also when the run raises. ``result.extra["range_notes"]``: where the run left its
        profile's measured grids (:meth:`range_notes`), for the caller to write once
        (:func:`sim.grid_range.write_warnings`)."""
        with collector_paused():
            try:
                result = self._run()
            except Stalled as e:
                e.policies = user_policy_specs(self.scenario.server)
                raise
        result.extra["range_notes"] = self.range_notes()
        if self.offered_arrival_span_s is not None:   # poisson / trace sends
            result.extra["offered_arrival_span_s"] = self.offered_arrival_span_s
        return result

    def range_notes(self) -> list[RangeNote]:
        """Every cost model's :meth:`sim.cost_model.CostModel.range_notes`, merged: one per
        profile, grid and axis, at the largest value any of them queried
        (:func:`sim.grid_range.merged`)."""
        notes = [n for cost in self.cost_models() for n in cost.range_notes()]
        acc, srv = self.acceptance, self.scenario.server.verifying_server()
        if srv.speculative_algorithm.enabled and acc.window > acc.measured_window:
            notes.append(AcceptanceBeyond(acc.window, acc.measured_window, acc.rate_decay,
                                          srv.speculative_algorithm.is_block, srv.speculative_algorithm.value))
        if (srv.speculative_algorithm.enabled and (srv.speculative_eagle_topk or 1) > 1
                and acc.measured_window > acc.window):
            notes.append(AcceptanceTreeCut(acc.measured_window, acc.window, self.scenario.acceptance.mean_accept_length,
                                           acc.mean, acc.window < srv.num_draft_forwards + 1))
        stated, run = self.scenario.acceptance.tree, draft_tree(srv)
        if stated is not None and run is not None and list(stated) != run and max(stated[0], run[0]) > 1:
            notes.append(AcceptanceTreeShape((stated[0], stated[1]), (run[0], run[1]), acc.mean,
                                             self.scenario.acceptance.sibling_rate))
        elif acc.tree is not None and run is not None and self.scenario.acceptance.mean_accept_length is None:
            # rank-1 rates turned into this tree's accept length by the tree model (a mean is
            # solved on the tree it was measured on, and drawn as stated there)
            notes.append(AcceptanceTreeShape(None, (run[0], run[1]), acc.mean, self.scenario.acceptance.sibling_rate))
        elif (stated is None and run is not None and run[0] > 1 and self.scenario.acceptance.sibling_rate is not None
              and self.scenario.acceptance.mean_accept_length is not None):
            notes.append(AcceptanceSiblingUnread((run[0], run[1]), self.scenario.acceptance.sibling_rate))
        return merged(notes)

    def cost_models(self) -> list[Any]:
        """The run's cost models (a :class:`sim.cost_model.CostModel`, or DP attention's
        :class:`sim.dp_attention.DPCost`); a disaggregated deployment has one per server."""
        return [self.cost]

    def _stall_detail(self) -> str:
        """What a :class:`Stalled` message adds: the scheduler's queues."""
        s = self.sched
        return f" (waiting {len(s.waiting)}, running {len(s.running)})"

    def _run_clock(self) -> None:
        """Run this engine's clock (its host, and what its clients started) until every
        request it owes has finished.

        Raises:
            Stalled: requests are unfinished and nothing is left to run.
        """
        self.env.process(self._host())
        try:
            self.env.run(until=self.all_done)
        except RuntimeError as e:
            # SimPy's own "no scheduled events left": every host sleeps, no client or
            # signal is due, and requests are unfinished (not an error raised by a process)
            if type(e) is not RuntimeError or self.all_done.triggered:
                raise
            raise Stalled(f"nothing left to run at t={self.env.now:.6f}s with {self._remaining} "
                          f"requests left{self._stall_detail()}") from None

    def _run(self) -> RunResult:
        self._start_clients()
        self._run_clock()
        spec = self.server.spec_window > 1
        extra = {
            rid: (self.acceptance.request_mean(rid) if spec else 1.0, r.spec_cycles, r.retractions, r.preemptions)
            for rid, r in self.sched.reqs.items()
        }
        self.rec.end_early(self.sched.oom_aborted)   # requests SGLang aborted out of memory
        (requests, chunks, steps, ts), summary = summarize_recorder(self.rec, extra)
        requests = with_request_labels(requests, self.specs)   # priority / routing-key classes, if sent
        # steady_state_serving's separate result: the full-run keys stay bench_serving's
        summary.update(run_steady_summary(self.scenario, requests, chunks if self.rec.level == "full" else None))
        summary.update(scenario=self.scenario.name, arm=self.scenario.arm, seed=self.seed, source="sim",
                       profile=self.profile.name, **run_counts(self.sched))
        if analytic_costs(self.profile):   # said in the report: estimates, not calibrated predictions
            summary["profile_costs"] = "analytic"
        if self.rec.num_steps:
            summary["host_blocked_s"] = self.host_blocked_s
        summary.update(output_cut_summary(self.output_cuts))   # outputs SGLang cuts to fit the pool
        summary.update(truncation_summary(self.scenario, self.specs))   # prompts --allow-auto-truncate cut
        info = {"records": self.rec.level, "num_steps": self.rec.num_steps, "num_passes": self.rec.num_passes,
                "fast_forward_runs": self.ff_runs, "fast_forward_iterations": self.ff_iterations}
        return RunResult(requests, chunks, steps, ts, summary, self.scenario, extra=info)


def run_scenario(scenario: Scenario, seed: int | None = None, profile: Profile | None = None, progress: bool = False,
                 warn: bool = True) -> RunResult:
    """Simulate ``scenario`` (one arm, one seed). See :class:`SimEngine`.

    ``warn``: write the run's range warnings to stderr when it ends, one line per grid and
    axis it left (:func:`sim.grid_range.write_warnings`); False leaves them to the caller
    (``result.extra["range_notes"]``), e.g. one that merges them over many runs.

    Raises:
        ConfigError: the profile cannot be found or is invalid.
        UnschedulableRequest: a request can never fit the KV pool.
    """
    result = SimEngine(scenario, profile, seed).run()
    if warn:
        write_warnings(result.extra["range_notes"])
    return result
