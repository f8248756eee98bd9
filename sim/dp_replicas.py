"""Data-parallel replicas: ``dp_size`` whole servers behind SGLang's DP controller.

What SGLang 0.5.23 does with ``--dp-size N`` and no attention DP (``attn_dp_size`` 1):

1. **N whole servers.** ``DataParallelController.launch_dp_schedulers``
   (managers/data_parallel_controller.py) launches one tensor-parallel group per DP rank
   (``launch_tensor_parallel_group``, each from its own ``base_gpu_id``), every one a
   ``Scheduler`` with the whole ``ServerArgs``: its own waiting queue, running batch, KV pool,
   radix cache, CUDA graphs and forward stream. Nothing is divided by ``dp_size``
   (``max_running_requests``, ``chunked_prefill_size`` and the pool are each replica's: the
   divisions are by ``attn_dp_size``, 1 here: model_executor/pool_configurator.py), and no
   forward waits for another replica's (no lock-step, unlike DP attention,
   :mod:`sim.dp_attention`). So each replica is simulated as the scenario's server with the
   scenario's profile (:class:`sim.member_server.MemberServer`): on the run's one clock, or,
   with open arrivals, on a clock of its own (:meth:`ReplicaEngine._host`).
2. **Dispatch.** ``load_balance_method`` (:mod:`sim.dp_dispatch`): ``auto`` resolves to
   ``round_robin`` on a server that is not a disaggregated prefill server
   (arg_groups/serving_hook.py ``handle_load_balance_method``); ``round_robin_scheduler`` sends
   each tokenized request to the next replica of a counter, in the order requests reach the
   controller (after the tokenizer), blind to prefixes and load. A request the tokenizer
   rejects never reaches it and takes no turn; one the scheduler rejects at its door (a trace
   row past the context) does. ``total_requests`` and ``total_tokens`` send it to the least
   loaded replica by the load snapshots the replicas publish (each replica's
   :class:`sim.dp_dispatch.LoadPublisher`, at its loop's publish points) and the controller
   reads at most every 20 ms, plus its own count of what it sent since
   (:class:`sim.dp_dispatch.LoadAware`). The dispatch then depends on every replica's state,
   so all replicas run on the run's clock, step by step (no collapsed decode stretches: a
   snapshot is due every 15th decode), and open arrivals are sent at their arrival times.
3. **One client.** bench_serving's clients, their ``--max-concurrency`` semaphore and the
   tokenizer FIFO are shared: a closed-loop client's next request goes wherever the counter
   points, so replicas interact through the clients only.

Results: requests and deliveries are the clients'; ``steps.parquet`` and
``timeseries.parquet`` hold every replica's forwards and passes, grouped by replica, with a
``dp_rank`` column (0-based, as SGLang's ``DP<d>`` log prefix); the step figures are per replica stream, pooled
(:func:`sim.disagg_records.deployment_step_summary`: verify cycles/s and decode steps/s one
replica's rate; ``gpu_busy_fraction`` the mean over replicas of each one's as a lone server
defines it, over the span of its own forwards); ``kv_peak_tokens`` and ``swa_peak_tokens``
are each the largest replica's peak; host blocked seconds, retractions, delayed passes and
cache hits are summed;
``dp_replicas`` says how many replicas ran.

Not modelled: ``follow_bootstrap_room`` (it routes a PD router's requests only), refused at
validation; replicas of a disaggregated server (each role's ``instances`` say that).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from specsched.sim.config import Scenario
from specsched.sim.disagg_records import deployment_step_summary
from specsched.sim.dp_dispatch import LoadPublisher, SnapshotBoard, make_dispatcher, resolve_method
from specsched.sim.engine import SimEngine, Stalled
from specsched.sim.member_server import MemberServer
from specsched.sim.ops import Launch, Recv, Results, WaitForWork
from specsched.sim.profile import Profile
from specsched.sim.request import Req
from specsched.sim.scheduler_sums import GroupKV, SchedulerSums
from specsched.sim.tables import column


class ReplicaEngine(SimEngine):
    """A run of ``server.dp_size`` data-parallel replicas (module docstring):
    ``SimEngine(scenario)`` builds one when ``server.dp_size > 1`` without
    ``enable_dp_attention``. Same arguments and result tables as :class:`sim.engine.SimEngine`.
    """

    def __init__(self, scenario: Scenario, profile: Profile | None = None, seed: int | None = None,
                 *, fast_forward: bool = True, records: str = "auto") -> None:
        super().__init__(scenario, profile, seed, fast_forward=fast_forward, records=records)
        self.rec.writer_column = "dp_rank"   # steps and timeseries rows say their replica
        one = self.server.model_copy(update={"dp_size": 1})   # each replica: the whole server
        n = self.server.dp_size
        self.lb_method = resolve_method(self.server.load_balance_method, self.server.disaggregation_mode)
        self.board = SnapshotBoard(n)   # what the replicas publish, what the controller reads
        self.dispatcher = make_dispatcher(self.lb_method, n, self.board)
        if self.dispatcher.reads_load:
            self.replicas: list[MemberServer] = [PublishingReplica(self, one, i, self.device, LoadPublisher(self.board, i))
                                                 for i in range(n)]
        else:
            self.replicas = [MemberServer(self, one, i, self.device, fast_forward) for i in range(n)]
        self.dispatched = [0] * n   # requests sent to each replica
        self._alone = False      # open arrivals: replicas run one after another (_host)
        self._force_shared_clock = False   # tests: every replica on the run's clock even then
        self.sched = _Replicas([r.sched for r in self.replicas])

    # -------------------------------------------------------------- dispatch
    def _arrive(self, req: Req) -> None:
        """The DP controller sends ``req`` to the replica its method picks now
        (:mod:`sim.dp_dispatch`)."""
        rank = self.dispatcher.choose(self.env.now, req.input_len)
        self.dispatched[rank] += 1
        self.replicas[rank]._arrive(req)

    def _open_arrivals(self, times: np.ndarray) -> None:
        """Open arrivals (no client waits for a reply): every arrival time is known now. Round
        robin: so is every replica's share: replica k gets the k-th, (k+N)-th, ... request to
        reach the controller, and takes them when its own clock reaches them (no SimPy process
        per request, as a lone server's host does). A load-aware method picks by the load at
        each arrival: one process sends them at their times (:meth:`_send_arrivals`)."""
        super()._open_arrivals(times)
        n = len(self.replicas)
        if self.dispatcher.reads_load:
            arrive, specs = self._arrive_at, self._arrive_specs
            self._arrive_at, self._arrive_specs, self._next_arrival = [], [], math.inf
            self.env.process(self._send_arrivals(arrive, specs))
            return
        self.dispatched = [len(self._arrive_at[k::n]) for k in range(n)]
        for k, r in enumerate(self.replicas):
            r._arrive_at, r._arrive_specs = self._arrive_at[k::n], self._arrive_specs[k::n]
            r._next_arrival = r._arrive_at[0] if r._arrive_at else r._next_arrival
        self.dispatcher.counter = len(self._arrive_at) % n
        self._arrive_at, self._arrive_specs = [], []
        if not self._force_shared_clock:
            # no replica can affect another: each runs on a clock of its own (_host)
            for r in self.replicas:
                r.own_clock(len(r._arrive_specs))
            self._alone = True   # after: requests_left (another thread) reads the replicas' counts

    def _send_arrivals(self, arrive: list[float], specs: list):
        """Open arrivals under a load-aware method: each reaches the controller at its time
        (its client's row was recorded at its send time: :meth:`_open_arrivals`)."""
        for t, spec in zip(arrive, specs, strict=True):
            if t > self.env.now:
                yield self.env.timeout(self._delay_to(t))
            self._arrive(self._req(spec))

    # -------------------------------------------------------------------- run
    def _host(self):
        """Every replica's host loop (the deployment itself has none): on the run's clock, or,
        with open arrivals, one replica after another, each on a clock of its own
        (:meth:`sim.member_server.MemberServer.own_clock`): then nothing one replica does
        reaches another (its arrivals are fixed, no client waits for a reply), and each
        collapses its decode stretches as a lone server does instead of cutting them at
        every other replica's event; the results are the same (INV-DP-REPLICA-ALONE,
        tests/test_dp_replicas.py)."""
        if self._alone:
            for r in self.replicas:
                if r._remaining:
                    try:
                        r._run_clock()
                    except Stalled as e:   # say whose requests are stuck
                        raise Stalled(f"replica {r.index} of {len(self.replicas)}: {e}") from None
            self._remaining = 0
            self.all_done.succeed()
        else:
            for r in self.replicas:
                self.env.process(r._host())
        yield self.env.timeout(0)

    @property
    def requests_left(self) -> int:
        """Requests not finished yet, over every replica (the CLI's progress bar)."""
        if self._alone:
            return sum(r._remaining for r in self.replicas)
        return self._remaining

    def _stall_detail(self) -> str:
        """Each replica's non-empty queues (a :class:`sim.engine.Stalled` message's tail)."""
        parts = [f"replica {r.index}: waiting {len(r.sched.waiting)}, running {len(r.sched.running)}"
                 for r in self.replicas if r.sched.waiting or r.sched.running]
        return f" ({'; '.join(parts) or 'every queue empty'})"

    def cost_models(self) -> list[Any]:
        """Every replica's cost model (their range notes merge into the run's)."""
        return [r.cost for r in self.replicas]

    def run(self):
        result = super().run()
        s = result.summary
        if s.get("completed"):
            start, finish = column(result.requests, "start_s", float), column(result.requests, "finish_s", float)
            deployment_step_summary([], [r.rec.stream for r in self.replicas],
                                    float(np.nanmin(start)), float(np.nanmax(finish)), s)
            s.pop("prefill_busy_fraction", None)   # no prefill servers: every replica runs both
            # each replica's busy fraction as a lone server's (over the span of its own
            # forwards: sim/metrics.py _step_summary_from_totals), the mean over replicas
            busy = [b for b in (r.rec.stream.busy_fraction() for r in self.replicas) if not math.isnan(b)]
            s["gpu_busy_fraction"] = float(np.mean(busy)) if busy else float("nan")
        if self.rec.num_steps:   # as a lone server's summary has it
            s["host_blocked_s"] = float(sum(r.host_blocked_s for r in self.replicas))
        s["dp_replicas"] = len(self.replicas)
        result.extra.update(fast_forward_runs=sum(r.ff_runs for r in self.replicas),
                            fast_forward_iterations=sum(r.ff_iterations for r in self.replicas))
        return result


class PublishingReplica(MemberServer):
    """A replica that publishes its load (:class:`sim.dp_dispatch.LoadPublisher`) where SGLang's
    scheduler does: at the top of every batch's result processing (managers/scheduler.py
    ``process_batch_result`` calls ``publish_load_snapshot``, forced after an extend batch) and
    on a pass that ran nothing (``on_idle``): going idle, and its last idle pass before the
    receive that ends it. Run step by step (no collapsed decode stretches): the publishes fall
    on single decode steps. The publisher reads this replica's scheduler only."""

    def __init__(self, deploy: SimEngine, server: Any, index: int, device: Any, publisher: LoadPublisher) -> None:
        super().__init__(deploy, server, index, device, fast_forward=False)
        self.publisher = publisher

    def _scheduler_loop(self):
        inner = super()._scheduler_loop()
        pub, sched = self.publisher, self.sched
        ran = True   # the pass so far launched or processed a batch, or went idle
        op = next(inner)
        while True:
            tp = type(op)
            if tp is Recv:
                if not ran:   # the last pass ran nothing with requests waiting: on_idle, not fully idle
                    pub.idle_pass(self._t, sched)
                ran = False
            elif tp is Launch or tp is Results:
                ran = True
            elif tp is WaitForWork:
                pub.idle_pass(self._t, sched)   # fully idle
                ran = True
            result = yield op
            if tp is Results:
                pub.batch_processed(self._t, sched, op.handle.plan.is_prefill)
            elif tp is WaitForWork:
                pub.idle_pass(self._t, sched)   # its last idle pass, then the receive
            op = inner.send(result)


class _Replicas(SchedulerSums):
    """What the run's summary reads of "the scheduler" (:func:`sim.scheduler.run_counts`),
    over the replicas: every request, summed counts, the largest KV and SWA peaks."""

    def __init__(self, scheds: list[Any]) -> None:
        self._scheds = scheds
        self.kv = GroupKV(scheds)

    @property
    def schedulers(self) -> list[Any]:
        return self._scheds

    @property
    def reqs(self) -> dict[int, Req]:
        out: dict[int, Req] = {}
        for s in self._scheds:
            out.update(s.reqs)
        return out
