"""The simulator: executes the scheduler loop's operations on a SimPy clock.

The host is one SimPy process driving :func:`sim.loop.scheduler_loop`; host work advances
SimPy time by the cost model's host seconds. The forward stream is a FIFO timeline: a
launch starts when both the host has issued it and the previous forward has finished, and
lasts the cost model's GPU seconds, so the GPU idles exactly when the host is late. A host
block waits for an event's time (plus the wake-up cost if it really waited). Clients
(burst, closed loop, Poisson with max_concurrency) are SimPy processes; requests pass a
tokenizer FIFO (the profile's ingest time) before the scheduler sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import simpy

from sim.acceptance import AcceptanceModel
from sim.admission import make_policy
from sim.config import Scenario, SyncMode
from sim.cost_model import CostModel
from sim.device_tokens import DeviceTokens
from sim.loop import scheduler_loop
from sim.metrics import summarize
from sim.ops import Deliver, HostBlock, HostWork, Launch, Recv, Results, StreamWait, WaitForWork
from sim.plan import BatchPlan, StepOutput
from sim.profile import Profile, load_profile
from sim.records import Recorder, RunResult
from sim.request import Req
from sim.scheduler import Scheduler
from sim.workload import RequestSpec, make_requests, poisson_arrivals


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
    """

    def __init__(self, scenario: Scenario, profile: Profile | None = None, seed: int | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.profile = profile or load_profile(scenario.profile, scenario.path or None)
        self.server = scenario.server
        self.cost = CostModel(self.profile, self.server)
        self.acceptance = AcceptanceModel(scenario.acceptance, self.server.spec_window, self.seed)
        self.device = DeviceTokens(self.acceptance)
        self.sched = Scheduler(self.server, make_policy(self.server), self.seed)
        self.specs = make_requests(scenario.workload, self.seed, scenario.path or None)
        self.env = simpy.Environment()
        self.rec = Recorder()
        self.inbox: list[Req] = []
        self._wake: simpy.Event | None = None
        self._tokenizer_free = 0.0
        self._finish_events: dict[int, simpy.Event] = {}
        self._remaining = len(self.specs)
        self.all_done = self.env.event()
        self._gpu_free = 0.0
        self._cross_queue_pending = False
        self._blocked_since_launch = 0.0
        self.host_blocked_s = 0.0
        self._last_output: StepOutput | None = None

    # ---------------------------------------------------------------- clients
    def _send(self, spec: RequestSpec) -> simpy.Event:
        """A client sends a request now: its timer starts; it reaches the scheduler after
        the tokenizer FIFO. Returns the event fired when its last token is delivered."""
        now = self.env.now
        self.rec.request_sent(spec.index, spec.input_len, spec.output_len, now)
        done = self.env.event()
        self._finish_events[spec.index] = done
        ingest = self.profile.host.ingest_per_request_s
        self._tokenizer_free = max(now, self._tokenizer_free) + ingest
        req = Req(spec.index, spec.input_len, spec.output_len)
        ev = self.env.timeout(self._tokenizer_free - now)
        ev.callbacks.append(lambda _e, r=req: self._arrive(r))
        return done

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

    def _poisson_task(self, spec: RequestSpec, at: float, slots: simpy.Resource | None):
        yield self.env.timeout(at)
        if slots is None:
            yield self._send(spec)
            return
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
        else:
            times = poisson_arrivals(len(self.specs), w.request_rate, self.seed)
            slots = simpy.Resource(self.env, w.max_concurrency) if w.max_concurrency else None
            for spec, t in zip(self.specs, times, strict=True):
                self.env.process(self._poisson_task(spec, float(t), slots))

    # ------------------------------------------------------------------- host
    def _launch(self, op: Launch) -> SimHandle:
        now = self.env.now
        cost = self.cost.gpu(op.plan, op.part, cross_queue=self._cross_queue_pending)
        self._cross_queue_pending = False
        start = max(now, self._gpu_free)
        end = start + cost.total_s
        self._gpu_free = end
        # the inject launch belongs to the same step: its handle carries the step's output
        output = self.device.step(op.plan) if op.part == "main" else self._last_output
        plan = op.plan
        acc = dec = 0
        if output is not None and op.part == "main" and plan.num_extend < plan.batch_size:
            dec_n = output.committed[plan.num_extend:]
            acc = int(dec_n.sum())
            dec = int((dec_n > 0).sum())
        self.rec.steps.append((
            plan.step, plan.mode.value, op.part, plan.batch_size, plan.num_extend_tokens,
            start, end, self._blocked_since_launch, acc, dec,
        ))
        self._blocked_since_launch = 0.0
        self._last_output = output
        return SimHandle(plan, start, end, output)

    def _block_until(self, t: float, wakeup: float):
        wait = t - self.env.now
        if wait > 0:
            wait += wakeup
            self.host_blocked_s += wait
            self._blocked_since_launch += wait
            yield self.env.timeout(wait)

    def _host(self):
        loop = scheduler_loop(self.sched, self.server)
        sched, cost, wake = self.sched, self.cost, self.profile.host.sync_wakeup_s
        result: Any = None
        idle_spins = 0
        last_t = -1.0
        while True:
            op = loop.send(result)
            result = None
            if isinstance(op, Recv):
                result, self.inbox = self.inbox, []
                if self.env.now == last_t:
                    idle_spins += 1
                    if idle_spins > 100_000:
                        raise Stalled(f"no progress at t={self.env.now:.6f}s with {self._remaining} requests left")
                else:
                    idle_spins, last_t = 0, self.env.now
            elif isinstance(op, HostWork):
                if op.kind == "schedule":
                    self.rec.timeseries.append((self.env.now, sched.num_running, len(sched.waiting), sched.kv.used))
                dt = cost.host(op.kind, op.plan)
                if dt > 0:
                    yield self.env.timeout(dt)
            elif isinstance(op, Launch):
                result = self._launch(op)
            elif isinstance(op, HostBlock):
                yield from self._block_until(op.handle.end, wake)
            elif isinstance(op, StreamWait):
                # forward-stream wait: stream order already carries it; schedule-stream wait:
                # a wait pending in another queue during the next graph replay
                self._cross_queue_pending = op.from_stream == "schedule" and self.server.sync_mode is SyncMode.cross_queue_wait
            elif isinstance(op, Results):
                yield from self._block_until(op.handle.end, wake)
                result = op.handle.output
            elif isinstance(op, Deliver):
                now = self.env.now
                for d in op.deliveries:
                    self.rec.delivered(d.rid, now, d.n_tokens, d.finished)
                    if d.finished:
                        self._finish_events.pop(d.rid).succeed()
                        self._remaining -= 1
                if self._remaining == 0 and not self.all_done.triggered:
                    self.all_done.succeed()
            elif isinstance(op, WaitForWork):
                if self._remaining == 0:
                    return
                if not self.inbox:
                    self._wake = self.env.event()
                    yield self._wake
                    self._wake = None

    # -------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Run to completion (every request finished) and return the result tables."""
        self._start_clients()
        self.env.process(self._host())
        self.env.run(until=self.all_done)
        extra = {
            rid: (self.acceptance.request_mean(rid) if self.server.spec_window > 1 else 1.0, r.spec_cycles, r.retractions)
            for rid, r in self.sched.reqs.items()
        }
        requests, chunks, steps, ts = self.rec.tables(extra)
        summary = summarize(requests, chunks, steps)
        summary.update(
            scenario=self.scenario.name, arm=self.scenario.arm, seed=self.seed, source="sim",
            profile=self.profile.name, num_retractions=self.sched.num_retractions,
            num_delayed_passes=self.sched.num_delayed_passes, kv_peak_tokens=self.sched.kv.peak,
        )
        if not steps.empty:
            summary["host_blocked_s"] = self.host_blocked_s
        return RunResult(requests, chunks, steps, ts, summary, self.scenario)


def run_scenario(scenario: Scenario, seed: int | None = None, profile: Profile | None = None, progress: bool = False) -> RunResult:
    """Simulate ``scenario`` (one arm, one seed). See :class:`SimEngine`.

    Raises:
        ConfigError: the profile cannot be found or is invalid.
        UnschedulableRequest: a request can never fit the KV pool.
    """
    return SimEngine(scenario, profile, seed).run()
