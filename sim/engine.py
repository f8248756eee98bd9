"""The simulator: executes the scheduler loop's operations on a SimPy clock.

The host is one SimPy process driving :func:`sim.loop.scheduler_loop`; host work advances
the host's time by the cost model's host seconds. The forward stream is a FIFO timeline: a
launch starts when both the host has issued it and the previous forward has finished, and
lasts the cost model's GPU seconds, so the GPU idles exactly when the host is late. A host
block waits for an event's time (plus the wake-up cost if it really waited). Clients
(burst, closed loop, Poisson with max_concurrency) are SimPy processes; requests pass a
tokenizer FIFO (the profile's ingest time) before the scheduler sees them.

Speed (docs/performance.md):

- The host's clock runs ahead of SimPy's while no other event is due before it, and hands
  control to SimPy (a timeout landing exactly on the host's time) only when one is: the
  order in which things happen, and every time, are those of yielding at each host step.
- Fast-forward: at the top of the loop (the loop's ``FastForward`` op), a stretch of decode
  iterations that nothing outside can change (no arrival before it ends, no admission, no
  retraction, no finish a client reacts to) is computed at once by the scheduler
  (:meth:`sim.scheduler.Scheduler.decode_stretch`), timed here (:mod:`sim.host_timeline`)
  and applied through the scheduler (``apply_stretch``); the loop goes on with the
  stretch's last forward in flight. The results are identical to the step-by-step path
  (``fast_forward=False``), which tests/test_sim_speed_equivalence.py checks (INV-7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy
from specsched.sim import host_timeline, plain_timeline, stretch_records
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import Scenario, SyncMode
from specsched.sim.cost_model import CostModel
from specsched.sim.decode_run import DecodeRun
from specsched.sim.device_tokens import DeviceTokens
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
from specsched.sim.plain_run import PlainRun
from specsched.sim.plan import BatchPlan, ForwardMode, StepOutput
from specsched.sim.profile import Profile, load_profile
from specsched.sim.records import Recorder, RunResult, delivery_arrays
from specsched.sim.request import Req
from specsched.sim.scheduler import Deliveries, Scheduler
from specsched.sim.workload import RequestSpec, arrival_times, make_requests

AUTO_COMPACT_TOKENS = 1_000_000
"""``records="auto"`` keeps every chunk row up to this many output tokens in the run, and
switches to compact records above (docs/performance.md)."""
MAX_RUN_CELLS = 1 << 18
"""A fast-forward computes at most this many (iteration x request) cells at once."""
PLAIN_HORIZON = 1 << 62
"""A closed-form stretch (:mod:`sim.plain_run`) is not bounded ahead: it is timed until the next event."""


@dataclass(slots=True)
class SimHandle:
    """A launched forward on the simulated stream: GPU start/end (s) and its output."""

    plan: BatchPlan
    start: float
    end: float
    output: StepOutput | None


class Stalled(RuntimeError):
    """The loop made no progress while requests were outstanding (a model bug)."""


class SimEngine:
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

    def __init__(self, scenario: Scenario, profile: Profile | None = None, seed: int | None = None,
                 *, fast_forward: bool = True, records: str = "auto") -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.profile = profile or load_profile(scenario.profile, scenario.path or None)
        self.server = scenario.server
        self.cost = CostModel(self.profile, self.server)
        self.acceptance = AcceptanceModel(scenario.acceptance, self.server.spec_window, self.seed)
        self.device = DeviceTokens(self.acceptance)
        self.sched = Scheduler(self.server, make_policy(self.server), self.seed)
        if self.server.enable_dp_attention:
            # dp_size lock-step schedulers behind one scheduler's interface (sim/dp_attention.py)
            from specsched.sim.dp_attention import DPCost, DPDevice, DPGroup

            self.sched = DPGroup(self.server, self.seed)
            self.cost = DPCost(CostModel(self.profile, self.sched.rank_server), self.profile.gpu.dp_attention_sync_s)
            self.device = DPDevice(self.device)
        self.specs = make_requests(scenario.workload, self.seed, scenario.path or None)
        if records == "auto":
            tokens = sum(s.output_len for s in self.specs)
            records = "compact" if tokens > AUTO_COMPACT_TOKENS else "full"
        self.env = simpy.Environment()
        self.rec = Recorder(records)
        self.inbox: list[Req] = []
        self._wake: simpy.Event | None = None
        self._tokenizer_free = 0.0
        self._finish_events: dict[int, simpy.Event] = {}
        self._remaining = len(self.specs)
        self.all_done = self.env.event()
        self._t = 0.0                       # the host's clock (>= env.now)
        self._gpu_free = 0.0
        self._cross_queue_pending = False
        self._blocked_since_launch = 0.0
        self.host_blocked_s = 0.0
        self._last_output: StepOutput | None = None
        self._in_flight: SimHandle | None = None   # last launch whose results are pending
        self._decode_dt = 0.0                        # GPU seconds of the last decode/verify
        w = scenario.workload
        self._finish_reacts = w.kind in ("closed_loop", "multi_turn") or (w.kind in ("poisson", "trace") and w.max_concurrency is not None)
        self.fast_forward = fast_forward and self.server.enable_overlap_schedule and not self.server.enable_dp_attention
        self._gpu_memo: dict[int, float] = {}
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
        """A delay d with env.now + d == t exactly (SimPy adds delays to its clock)."""
        now = self.env.now
        d = t - now
        while now + d < t:
            d = math.nextafter(d, math.inf)
        while now + d > t:
            d = math.nextafter(d, -math.inf)
        return d

    def _sync(self, t: float):
        """Hand control to SimPy until exactly ``t``; the host's clock is then ``t``."""
        if t > self.env.now:
            yield self.env.timeout(self._delay_to(t))
        self._t = t

    def _advance(self, dt: float):
        """Host work of ``dt`` seconds (dt > 0): the clock moves privately while nothing
        else is due before it ends, else SimPy runs what is due first."""
        t = self._t + dt
        if t < self.env.peek():
            self._t = t
        else:
            yield from self._sync(t)

    def _advance_to(self, t: float):
        if t < self.env.peek():
            self._t = t
        else:
            yield from self._sync(t)

    # ---------------------------------------------------------------- clients
    def _send(self, spec: RequestSpec) -> simpy.Event:
        """A client sends a request now: its timer starts; it reaches the scheduler after
        the tokenizer FIFO (at once when that takes no time: the scheduler's next receive
        sees it, as the runtime's does). Returns the event fired when its last token is
        delivered."""
        now = self.env.now
        self.rec.request_sent(spec.index, spec.input_len, spec.output_len, now)
        done = self.env.event()
        self._finish_events[spec.index] = done
        ingest = self.profile.host.ingest_per_request_s
        self._tokenizer_free = max(now, self._tokenizer_free) + ingest
        req = self._req(spec)
        if self._tokenizer_free <= now:
            self._arrive(req)
        else:
            ev = self.env.timeout(self._tokenizer_free - now)
            ev.callbacks.append(lambda _e, r=req: self._arrive(r))
        return done

    def _req(self, spec: RequestSpec) -> Req:
        """The scheduler's request for a sent one (prompt tokens when prefixes are shared)."""
        return Req(spec.index, spec.input_len, spec.output_len, tokens=spec.tokens,
                   ignore_eos=self.scenario.workload.ignore_eos, priority=spec.priority)

    def _arrive(self, req: Req) -> None:
        self.inbox.append(req)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _burst(self):
        for spec in self.specs:
            self._send(spec)
        yield self.env.timeout(0)

    def _closed_loop(self, queue: list[RequestSpec]):
        while queue:
            yield self._send(queue.pop(0))

    def _conversations(self, queue: list[list[RequestSpec]], pauses: np.ndarray):
        """One multi-turn client (bench_serving's semaphore around
        ``wrap_multi_turn_request_func``): takes the next conversation, sends its turns one
        after another, each when the previous one's last token arrived plus a think time."""
        n_turns = pauses.shape[1] + 1
        while queue:
            conv = queue.pop(0)
            for t, spec in enumerate(conv):
                if t:
                    pause = float(pauses[spec.index // n_turns, t - 1])
                    if pause > 0:
                        yield self.env.timeout(pause)
                yield self._send(spec)

    def _poisson_open(self, times: np.ndarray):
        """Poisson sends without a concurrency limit: one process walks the send times and
        delivers each request to the scheduler when the tokenizer FIFO releases it (the
        times :meth:`_send` would give; no process per request)."""
        ingest = self.profile.host.ingest_per_request_s
        for spec, t_send in zip(self.specs, times.tolist(), strict=True):
            self._tokenizer_free = max(t_send, self._tokenizer_free) + ingest
            t_arrive = t_send + (self._tokenizer_free - t_send)
            if t_arrive > self.env.now:
                yield self.env.timeout(self._delay_to(t_arrive))
            self.rec.request_sent(spec.index, spec.input_len, spec.output_len, t_send)
            self._arrive(self._req(spec))

    def _poisson_limited(self, times: np.ndarray, slots: simpy.Resource):
        """Poisson sends with max_concurrency: at each send time a client waits for a slot."""
        for spec, t in zip(self.specs, times.tolist(), strict=True):
            if t > self.env.now:
                yield self.env.timeout(self._delay_to(t))
            self.env.process(self._limited_client(spec, slots))

    def _limited_client(self, spec: RequestSpec, slots: simpy.Resource):
        with slots.request() as slot:
            yield slot
            yield self._send(spec)

    def _start_clients(self) -> None:
        w = self.scenario.workload
        if w.kind == "burst":
            self.env.process(self._burst())
        elif w.kind == "closed_loop":
            queue = list(self.specs)
            for _ in range(min(w.concurrency, len(queue))):
                self.env.process(self._closed_loop(queue))
        elif w.kind == "multi_turn":
            from specsched.sim.prefix_workload import think_times

            mt = w.multi_turn
            convs = [self.specs[c * mt.num_turns:(c + 1) * mt.num_turns] for c in range(mt.num_conversations)]
            pauses = think_times(mt, self.seed)
            for _ in range(min(w.concurrency, len(convs))):
                self.env.process(self._conversations(convs, pauses))
        else:
            times = arrival_times(w, self.specs, self.seed)
            if w.max_concurrency:
                self.env.process(self._poisson_limited(times, simpy.Resource(self.env, w.max_concurrency)))
            else:
                self.env.process(self._poisson_open(times))

    # ------------------------------------------------------------------- host
    def _launch(self, op: Launch):
        """Put ``op``'s forward on the stream; returns (as a generator's value) its handle.
        The host stays busy for the kernel issue of an eager forward (CostModel.issue), and
        for the rest of a graph-replayed step's launch call (CostModel.launch_tail)."""
        now = self._t
        issue = self.cost.issue(op.plan, op.part)
        cost = self.cost.gpu(op.plan, op.part, cross_queue=self._cross_queue_pending)
        self._cross_queue_pending = False
        start = max(now, self._gpu_free)  # INV-6: one forward at a time on the stream
        # an eager forward's kernels run as the host issues them: it ends no earlier than
        # the issue does, and the host is busy issuing until then (below); on an idle
        # stream an extend's first kernels trail the launch (CostModel.idle_lead_s)
        work_from = max(now + self.cost.idle_lead_s(op.plan, op.part), self._gpu_free)
        end = max(work_from + cost.total_s, now + issue)
        self._gpu_free = end
        # the inject launch belongs to the same step: its handle carries the step's output
        output = self.device.step(op.plan) if op.part == "main" else self._last_output
        plan = op.plan
        acc = dec = 0
        if output is not None and op.part == "main" and plan.num_extend < plan.batch_size:
            # a handful of ints: plain Python sums (numpy's call overhead dominates here)
            dec_n = output.committed.tolist()[plan.num_extend:]
            acc = sum(dec_n)
            dec = len(dec_n) - dec_n.count(0)
        self.rec.step(plan.step, plan.mode.value, op.part, plan.batch_size, plan.num_extend_tokens,
                      start, end, self._blocked_since_launch, acc, dec)
        self._blocked_since_launch = 0.0
        self._last_output = output
        if plan.num_extend == 0:
            self._decode_dt = end - start
        handle = SimHandle(plan, start, end, output)
        self._in_flight = handle
        busy = issue + self.cost.launch_tail(op.plan, op.part)  # the tail does not hold the forward
        if busy > 0:
            yield from self._advance(busy)
        return handle

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
            yield from self._sync(self._t)  # clients react at the delivery time
            woken = False
            for rid in done:
                ev = self._finish_events.pop(rid, None)
                if ev is not None:
                    ev.succeed()
                    woken = True
                self._remaining -= 1
            # let the woken clients send now, before the loop's next receive: a closed-loop
            # client sends its next request when the last token arrives (a freed
            # max_concurrency slot likewise), and the next schedule() sees it
            # (runtime/engine.py _deliver then _recv; bench_serving's client). Without this
            # the request waited one more pass: a verify cycle of TTFT in every closed-loop
            # cell (window4-lowacc +53 % on H200 round 5). Zero-delay steps only: each
            # client's chain (slot release -> next client -> send) is finite.
            while woken and self.env.peek() <= self.env.now:
                yield self.env.timeout(0)
        if self._remaining == 0 and not self.all_done.triggered:
            self.all_done.succeed()

    def _host(self):
        loop = scheduler_loop(self.sched, self.server, fast_forward=self.fast_forward)
        sched, cost, wake = self.sched, self.cost, self.profile.host.sync_wakeup_s
        rec = self.rec
        peek = self.env.peek
        idle_spins = 0
        last_t = -1.0
        op = next(loop)
        while True:
            result: Any = None
            tp = type(op)
            if tp is FastForward:
                if not self.inbox:
                    result = yield from self._fast_forward(op)
            elif tp is Recv:
                result, self.inbox = self.inbox, []
                if self._t == last_t:
                    idle_spins += 1
                    if idle_spins > 100_000:
                        raise Stalled(f"no progress at t={self._t:.6f}s with {self._remaining} requests left")
                else:
                    idle_spins, last_t = 0, self._t
            elif tp is HostWork:
                if op.kind == "schedule":
                    rec.pass_state(self._t, sched.num_running, len(sched.waiting), sched.kv.used)
                dt = cost.host(op.kind, op.plan)
                if dt > 0:
                    # _advance inlined (three host works per iteration): no generator
                    # when the host clock just moves ahead of SimPy's
                    t = self._t + dt
                    if t < peek():
                        self._t = t
                    else:
                        yield from self._sync(t)
            elif tp is Launch:
                result = yield from self._launch(op)
            elif tp is Results:
                wait = op.handle.end - self._t
                if wait > 0:
                    # _block_until inlined (once per iteration): no generator when the host
                    # clock just moves ahead of SimPy's
                    wait += wake
                    self.host_blocked_s += wait
                    self._blocked_since_launch += wait
                    t = self._t + wait
                    if t < peek():
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
                else:
                    yield from self._deliver(d)
            elif tp is HostBlock:
                yield from self._block_until(op.handle.end, wake)
            elif tp is StreamWait:
                # forward-stream wait: stream order already carries it; schedule-stream wait:
                # a wait pending in another queue during the next graph replay
                self._cross_queue_pending = op.from_stream == "schedule" and self.server.sync_mode is SyncMode.cross_queue_wait
            elif tp is WaitForWork:
                if self._remaining == 0:
                    return
                yield from self._sync(self._t)
                if not self.inbox:
                    self._wake = self.env.event()
                    yield self._wake
                    self._wake = None
                    self._t = self.env.now
            op = loop.send(result)

    # ----------------------------------------------------------- fast-forward
    def _fast_forward(self, op: FastForward):
        """Collapse the decode stretch that starts here, if any (module docstring).

        Returns (as a generator's value) the (plan, handle) left in flight, or None when
        nothing was collapsed (the loop goes on step by step)."""
        h = op.handle
        t0 = self._t
        t_next = self.env.peek()
        if t_next <= t0 or h.output is None:
            return None
        sched = self.sched
        batch = sched.decode_batch_reqs
        if not batch or self.cost.eager_issue_s(len(batch)) > 0:
            # an eager step keeps the host busy issuing it (CostModel.issue): step by step
            return None
        # a closed-form stretch (no speculative decoding) costs the same at any length
        # (its costs are keyed on the mean context: not under padded attention)
        plain = sched.window == 1 and not sched.spec and not self.cost.padded_attention
        horizon = PLAIN_HORIZON if plain else self._horizon(h, t0, t_next, batch)
        run = sched.decode_stretch(self.device, h.plan, h.output, horizon, stop_at_finish=self._finish_reacts,
                                   finishes_left=self._remaining, closed_form=plain)
        if run is None:
            return None
        if type(run) is PlainRun:
            rec = self.rec
            tm = plain_timeline.walk(run, t0, h.end, t_next, self.profile.host.sync_wakeup_s, self._plain_gpu,
                                     self._plain_host, self.host_blocked_s, rec.step_totals.busy_s, rec.full,
                                     tail=self._plain_tail if self._has_tail else None)
            n = tm.n
            if n < 1:
                return None
            plan, output = sched.apply_stretch(run, n)
            self.device.set_state(run.rid_list, run.outcome(n).device, None)
            b0 = self._blocked_since_launch
            self.host_blocked_s = tm.blocked            # every wait added in order (walk)
            self._blocked_since_launch = tm.rw_last
            self._finished_in_run(stretch_records.plain_run(rec, run, tm, b0, len(sched.waiting)))
            return (yield from self._stretch_applied(plan, output, tm.s_last, tm.E[n - 1], tm.T[n], n))
        k = run.stop
        c, hs, hl, hp = self._run_costs(run, k)
        spec = self.server.speculative_algorithm.enabled
        publish_block = spec and self.server.sync_mode is SyncMode.host_block
        ht = None
        if self._has_tail:
            tails = [self._plain_tail(b) for b in range(int(run.batch_size[:k].max()) + 1)]
            ht = np.asarray(tails)[run.batch_size[:k]]
        tl = host_timeline.run_times(t0, h.end, hs, hl, hp, c, self.profile.host.sync_wakeup_s, publish_block, ht=ht)
        # every Recv of the stretch (at T_1 .. T_{n-1}) must come before the next event
        n = int(np.searchsorted(tl.T[:k], t_next, side="left"))
        if tl.T[n] == t_next:
            n -= 1
        if n < 1:
            return None
        plan, output = sched.apply_stretch(run, n)
        self.device.set_state(run.rids.tolist(), *run.device_after(n))
        self._record_run(run, tl, n)
        return (yield from self._stretch_applied(plan, output, float(tl.S[n - 1]), float(tl.E[n - 1]),
                                                 float(tl.T[n]), n))

    def _stretch_applied(self, plan: BatchPlan, output: StepOutput, start: float, end: float, t: float, n: int):
        """After a stretch of n iterations: its last forward (start, end s) is in flight and
        the host is at ``t``. Returns (as a generator's value) the loop's (plan, handle)."""
        handle = SimHandle(plan, start, end, output)
        self._gpu_free = end
        self._last_output = output
        self._cross_queue_pending = False
        self._in_flight = handle
        self.ff_runs += 1
        self.ff_iterations += n
        yield from self._advance_to(t)
        return plan, handle

    def _plain_gpu(self, bs: int, ctx_sum: int, key: int) -> float:
        """GPU seconds of a decode of ``bs`` requests, contexts summing to ``ctx_sum``
        (``key``: the mean context in tens, rounded; see :meth:`_run_costs`)."""
        code = bs * (1 << 40) + key
        v = self._gpu_memo.get(code)
        if v is None:
            v = self._shape_cost(code, bs, ctx_sum, key * 10.0)
        return v

    @property
    def _has_tail(self) -> bool:
        h = self.profile.host
        return h.launch_tail_s > 0 or h.launch_tail_per_req_s > 0

    def _plain_tail(self, bs: int) -> float:
        """Host seconds of a decode/verify launch call of ``bs`` requests after its forward
        is queued (CostModel.launch_tail), memoized."""
        v = self._tail_memo.get(bs)
        if v is None:
            v = self._tail_memo[bs] = self.cost.launch_tail(self._shape_plan(bs, 0)) if bs > 0 else 0.0
        return v

    def _plain_host(self, bs: int) -> tuple[float, float, float]:
        """Host seconds (schedule, launch, process) of a decode pass of ``bs`` requests."""
        v = self._host_memo.get(bs)
        if v is None:
            plan = self._shape_plan(bs, 0)
            v = self._host_memo[bs] = tuple(self.cost.host(kind, plan) for kind in ("schedule", "launch", "process"))
        return v

    def _horizon(self, h: SimHandle, t0: float, t_next: float, batch: list[Req]) -> int:
        """How many iterations to compute: enough to reach the next event (or to finish
        every request of the decode ``batch``), within :data:`MAX_RUN_CELLS`."""
        cap = max(2, MAX_RUN_CELLS // max(len(batch), 1))
        if math.isfinite(t_next):
            dt = max(self._decode_dt or (h.end - h.start), 1e-9)
            k = int((t_next - t0) / (0.75 * dt)) + 2
        else:
            left = max((r.max_new_tokens - r.output_len for r in batch), default=1)
            k = left + 3
        return max(2, min(k, cap))

    def _run_costs(self, run: DecodeRun, k: int) -> tuple[np.ndarray, ...]:
        """GPU seconds (c) and host seconds (hs, hl, hp) of a run's first k iterations,
        from the cost model, one call per distinct batch shape. A decode/verify forward's
        cost depends on (batch size, mean context rounded to 10 tokens) only (GridInterp's
        key); contexts are integer sums over the batch, so the rounding below is Python's
        round(x, -1) exactly (checked for every shape first seen)."""
        bs = run.batch_size[:k]
        if self.cost.padded_attention:
            # the cost depends on (batch size, padded width of the longest context)
            b, w = self.cost.attention_bucket, self.cost.window
            cmax = ((run.inp + run.H[:k]) * run.member[:k]).max(axis=1)
            key = -(-(cmax + w) // b) * b
            ctx = key - w
            code = bs * (1 << 40) + key.astype(np.int64)
        else:
            ctx = run.ctx_sum[:k]
            key = np.rint(ctx / bs / 10.0)
            code = bs * (1 << 40) + key.astype(np.int64)
        # one cost per segment of equal shape, spread with np.repeat (no per-segment
        # numpy scalar indexing or slice assignment: a stretch has ~k/10 segments)
        seg = np.flatnonzero(code[1:] != code[:-1]) + 1
        seg = np.concatenate(([0], seg))
        memo = self._gpu_memo
        vals = []
        for i, cj in enumerate(code[seg].tolist()):
            v = memo.get(cj)
            if v is None:
                lo = int(seg[i])
                v = self._shape_cost(cj, int(bs[lo]), int(ctx[lo]), float(key[lo]) * 10.0)
            vals.append(v)
        c = np.repeat(np.array(vals, dtype=np.float64), np.diff(seg, append=k))
        pbs = run.process_batch_size[:k]
        tab = self._host_table(max(int(bs[0]), int(pbs[0])))   # batch sizes only shrink in a run
        hs, hl, hp = tab[0][bs], tab[1][bs], tab[2][pbs]
        if np.isnan(hs).any() or np.isnan(hp).any():
            self._fill_host_table(np.concatenate((bs, pbs)))
            hs, hl, hp = tab[0][bs], tab[1][bs], tab[2][pbs]
        return c, hs, hl, hp

    def _shape_cost(self, code: int, bs: int, ctx_sum: int, key: float) -> float:
        """GPU seconds of a decode/verify forward of ``bs`` requests whose contexts sum to
        ``ctx_sum`` (memoized under ``code``); under padded attention ``ctx_sum`` is the
        longest request's context instead (the one-request plan below carries it as max)."""
        if not self.cost.padded_attention and round(ctx_sum / bs, -1) != key:
            raise AssertionError(f"context rounding differs at ({bs}, {ctx_sum})")
        cross = self.server.speculative_algorithm.enabled and self.server.sync_mode is SyncMode.cross_queue_wait
        v = self._gpu_memo[code] = self.cost.gpu(self._shape_plan(bs, ctx_sum), "main", cross_queue=cross).total_s
        return v

    def _shape_plan(self, bs: int, ctx_sum: int) -> BatchPlan:
        """A decode/verify plan of ``bs`` requests whose contexts sum to ``ctx_sum``."""
        w = self.server.spec_window
        mode = ForwardMode.VERIFY if self.server.speculative_algorithm.enabled else ForwardMode.DECODE
        shape = self._shapes.get(bs)
        if shape is None:
            shape = self._shapes[bs] = (tuple(range(bs)), (w,) * bs, (0,) * (bs - 1))
        return BatchPlan(step=0, mode=mode, rids=shape[0], extend_lens=shape[1],
                         prefix_lens=(ctx_sum,) + shape[2], spec_window=w)

    def _host_table(self, max_bs: int) -> list[np.ndarray]:
        """Host seconds of schedule / launch / process by batch size (NaN where not yet
        asked of the cost model; see :meth:`_fill_host_table`)."""
        tab = self._host_tab
        if tab is None or len(tab[0]) <= max_bs:
            n = max(2 * max_bs, 64)
            new = [np.full(n + 1, np.nan) for _ in range(3)]
            if tab is not None:
                for t, old in zip(new, tab, strict=True):
                    t[: len(old)] = old
            tab = self._host_tab = new
        return tab

    def _fill_host_table(self, sizes: np.ndarray) -> None:
        """Ask the cost model for the host seconds of batch sizes not in the table yet."""
        tab = self._host_tab
        # sorted(set()) is np.unique's list (np.unique imports numpy.ma, ~5 ms, on first use)
        for b in sorted(set(sizes[np.isnan(tab[0][sizes]) | np.isnan(tab[2][sizes])].tolist())):
            plan = self._shape_plan(b, 0)
            for t, kind in zip(tab, ("schedule", "launch", "process"), strict=True):
                t[b] = self.cost.host(kind, plan)

    def _record_run(self, run: DecodeRun, tl: host_timeline.Timeline, n: int) -> None:
        """Record the first n iterations of a collapsed run (the rows the step-by-step
        path would have written)."""
        pw, rw = tl.pw[:n], tl.rw[:n]
        b0 = self._blocked_since_launch
        if pw.any() or rw.any():
            terms = np.empty(2 * n + 1)
            terms[0] = self.host_blocked_s
            terms[1::2], terms[2::2] = pw, rw
            self.host_blocked_s = float(np.cumsum(terms)[-1])
        self._blocked_since_launch = float(rw[-1])
        self._finished_in_run(stretch_records.grid_run(self.rec, run, tl, n, b0, len(self.sched.waiting)))

    def _finished_in_run(self, rids: list[int]) -> None:
        for rid in rids:
            self._finish_events.pop(rid, None)   # nobody waits (the run stops at finishes clients react to)
        self._remaining -= len(rids)

    # -------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Run to completion (every request finished) and return the result tables."""
        self._start_clients()
        self.env.process(self._host())
        self.env.run(until=self.all_done)
        spec = self.server.spec_window > 1
        extra = {
            rid: (self.acceptance.request_mean(rid) if spec else 1.0, r.spec_cycles, r.retractions)
            for rid, r in self.sched.reqs.items()
        }
        (requests, chunks, steps, ts), summary = summarize_recorder(self.rec, extra)
        summary.update(
            scenario=self.scenario.name, arm=self.scenario.arm, seed=self.seed, source="sim",
            profile=self.profile.name, num_retractions=self.sched.num_retractions,
            num_delayed_passes=self.sched.num_delayed_passes, kv_peak_tokens=self.sched.kv.peak,
        )
        kv = self.sched.kv
        if kv.swa_capacity:  # hybrid sliding-window: SGLang logs "swa token usage" = used / pool
            summary.update(swa_peak_tokens=kv.swa_peak, swa_token_usage_peak=kv.swa_peak / kv.swa_capacity)
        hit, new = self.sched.cache_hit_tokens, self.sched.cache_input_tokens
        if hit:  # SGLang's cache hit rate: hit / (hit + computed) over first-attempt prefills
            summary["cache_hit_rate"] = hit / (hit + new)
        if self.rec.num_steps:
            summary["host_blocked_s"] = self.host_blocked_s
        info = {"records": self.rec.level, "num_steps": self.rec.num_steps, "num_passes": self.rec.num_passes,
                "fast_forward_runs": self.ff_runs, "fast_forward_iterations": self.ff_iterations}
        return RunResult(requests, chunks, steps, ts, summary, self.scenario, extra=info)


def run_scenario(scenario: Scenario, seed: int | None = None, profile: Profile | None = None, progress: bool = False) -> RunResult:
    """Simulate ``scenario`` (one arm, one seed). See :class:`SimEngine`.

    Raises:
        ConfigError: the profile cannot be found or is invalid.
        UnschedulableRequest: a request can never fit the KV pool.
    """
    return SimEngine(scenario, profile, seed).run()
