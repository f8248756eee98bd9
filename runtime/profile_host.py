"""Host phases of ``specsched profile``: the engine's verify launch and the publish-wait
stall, the event-sync wake-up, and the scheduler's own host costs."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import torch
from specsched.runtime.engine import LoopHost
from specsched.runtime.host_probe import HostProbe
from specsched.runtime.profile_fit import fit_line
from specsched.runtime.profile_harness import HOST_PROMPT, STALL_STEPS, WARMUP, Harness, _GpuBusy
from specsched.sim.acceptance import AcceptanceModel
from specsched.sim.admission import make_policy
from specsched.sim.config import AcceptanceConfig, Scenario, ServerArgs
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.loop import scheduler_loop
from specsched.sim.ops import Deliver, HostWork, Launch, Recv, Results
from specsched.sim.plan import ForwardMode
from specsched.sim.request import Req
from specsched.sim.scheduler import Scheduler
from specsched.sim.workload import make_requests


def _verify_scheduler(bs: int, window: int, seed: int, overlap: bool = True,
                      speculative: bool = True) -> tuple[Scheduler, DeviceTokens]:
    """A scheduler holding ``bs`` running DSpark requests (prompt :data:`HOST_PROMPT`, output
    long enough never to finish) and the device-token counter that commits their steps;
    the next ``schedule()`` returns a verify plan of all ``bs``. ``overlap``: the server's
    ``enable_overlap_schedule`` (its ``server`` is the one the loop runs with).
    ``speculative`` False: the same requests on a plain-decoding server (no speculative
    algorithm), whose next ``schedule()`` returns a decode plan of all ``bs``."""
    spec = {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": window} if speculative else {}
    server = ServerArgs(
        max_running_requests=bs, max_total_num_tokens=10**9, chunked_prefill_size=bs * HOST_PROMPT,
        max_prefill_tokens=bs * HOST_PROMPT, enable_overlap_schedule=overlap, **spec,
    )
    sched = Scheduler(server, make_policy(server), seed)
    tokens = DeviceTokens(AcceptanceModel(AcceptanceConfig(mean_accept_length=(1 + window) / 2), window, seed))
    for rid in range(bs):
        sched.add_request(Req(rid, HOST_PROMPT, 100_000))
    steady = ForwardMode.VERIFY if speculative else ForwardMode.DECODE
    for _ in range(8):
        plan = sched.schedule()
        if plan is None:
            break
        sched.process_result(plan, tokens.step(plan))
        if plan.mode is steady and plan.batch_size == bs:
            return sched, tokens
    raise RuntimeError(f"could not bring {bs} requests to a full {steady.value} batch (running {len(sched.running)})")


def _loop_host(dev: Any, bs: int, seed: int) -> LoopHost:
    """The engine's host side of the loop (:class:`runtime.engine.LoopHost`) for the stall
    loop's ``bs`` requests: a closed loop of ``bs`` clients whose requests are all sent and
    in flight (:func:`_verify_scheduler` holds them), so ``Recv`` polls and finds none, as in
    a closed-loop cell's steady state; deliveries go to its recorder. The scenario holds
    the clients only (the scheduler is :func:`_verify_scheduler`'s)."""
    sc = Scenario.model_validate({
        "name": "profile-stall-loop", "profile": "none", "seed": seed,
        "workload": {"kind": "closed_loop", "concurrency": bs, "num_requests": bs,
                     "input_len": {"kind": "fixed", "value": HOST_PROMPT},
                     "output_len": {"kind": "fixed", "value": 100_000}},
    })
    host = LoopHost(dev, sc, make_requests(sc.workload, seed), seed)
    # every client's request sent and recorded (the scheduler holds them already)
    sent = host._recv()
    if len(sent) != bs:
        raise RuntimeError(f"the stall loop's clients sent {len(sent)} of {bs} requests")
    return host


class HostPhases(Harness):
    """The host-time measurements of a profiling run."""

    def launch_phase(self) -> None:
        dev, runner = self.dev, self.runner
        busy = _GpuBusy(dev)
        self.busy_available = busy.available
        busy_s = 0.005
        self.launch_med: list[float] = []
        self.launch_forward_med: list[float] = []   # CPU only: the inline forward's part of each call
        self.launch_idle = 0
        self.launch_total = 0
        for b in self.launch_bs:
            self._progress(f"launch host time bs {b}")
            sched, tokens = _verify_scheduler(b, self.W, self.seed)
            plan = sched.schedule()
            assert plan is not None and plan.mode is ForwardMode.VERIFY and plan.batch_size == b
            with dev.use("forward"):
                rows, _ = self._new_rows(b, self.launch_ctx)

            fwd: list[float] = []   # CPU: the forward's own time in each call (it runs inline)

            def launch(rows=rows, tokens=tokens, plan=plan, fwd=fwd) -> Any:
                return self._engine_verify_launch(rows, tokens, plan, forward_s=fwd)[1]

            times: list[float] = []
            with dev.use("forward"):
                for _ in range(WARMUP):
                    dev.wait_copy(launch(), "profile")
                t0 = time.perf_counter()
                dev.wait_copy(launch(), "profile")
                est = time.perf_counter() - t0 + busy_s
                n = self.budget.repeats(f"launch bs {b}", est, self.repeats)
                fwd.clear()
                for _ in range(n):
                    marker = busy.occupy(busy_s)
                    t0 = time.perf_counter()
                    hc = launch()
                    times.append(time.perf_counter() - t0)
                    self.launch_total += 1
                    if marker is not None and marker.query():  # the GPU ran dry during the call
                        self.launch_idle += 1
                        busy_s = min(2 * busy_s, 0.2)
                    dev.wait_copy(hc, "profile")
                for row in rows:
                    runner.free_request(row)
            self.reps.setdefault("launch", []).append(n)
            if not dev.is_gpu:
                # the forward ran inside the call: its own time is device time (gpu.verify,
                # gpu.decode), not host time of the launch; keep the call less it
                self.launch_forward_med.append(statistics.median(fwd))
                times = [t - f for t, f in zip(times, fwd, strict=True)]
            self.launch_med.append(statistics.median(times))
            self._tick()
        self.launch_busy_s = busy_s
        self.launch_fit = fit_line(self.launch_bs, self.launch_med)
        self.stall_phase()

    def _engine_verify_launch(self, rows: list[int], tokens: DeviceTokens, plan: Any,
                              host: LoopHost | None = None, forward_s: list[float] | None = None) -> Any:
        """What runtime.engine.RuntimeEngine._launch does for a VERIFY plan: draw the
        accepts, replay the spec-cycle graph between two timing marks, record the ring
        event and start the result copy. Returns (ring event, host copy, the step's
        :class:`~sim.plan.StepOutput` for ``Scheduler.process_result``); with ``host``, the
        launch call ends as the engine's does (``LoopHost._launched``: marks, copy, step
        record) and its :class:`~runtime.engine.RtHandle` is returned. On CPU, with
        ``forward_s``, the forward's own time (``spec_cycle``, run inline) is appended to it."""
        dev = self.dev
        output = tokens.step(plan)
        forced = np.maximum(output.committed - 1, 0).tolist()
        start = self._timing_event()
        out = self.runner.spec_cycle(rows, forced, graph=True)
        if forward_s is not None and not dev.is_gpu:   # CPU: start is perf_counter, the forward ran inline
            forward_s.append(time.perf_counter() - start)
        if host is not None:
            return host._launched(plan, "main", start, output, out)
        done = dev.record("forward")  # the engine reuses the done event as the end mark
        return done, dev.copy_to_host({"committed": out.committed}, after=done), output

    def _engine_decode_launch(self, rows: list[int], tokens: DeviceTokens, plan: Any) -> Any:
        """What runtime.engine.RuntimeEngine._launch does for a plain DECODE plan (a server
        without speculative decoding): commit the step's token counts, replay the decode
        graph between two timing marks, record the ring event and start the result copy.
        No accept draw and no draft window: the part before the forward is queued is shorter
        than a verify launch's. Returns (ring event, host copy, the step's output)."""
        dev = self.dev
        output = tokens.step(plan)
        self._timing_event()
        out = self.runner.decode(rows, graph=True)
        done = dev.record("forward")
        return done, dev.copy_to_host({"committed": out.committed}, after=done), output

    def _serial_cycles(self, st: dict[str, Any], rows: list[int], n: int,
                       parts: list[tuple[float, float, float]] | None = None) -> float:
        """``n`` cycles of the engine's loop without overlap (sim/loop.py ``scheduler_loop``
        with ``enable_overlap_schedule`` off, the generator itself; runtime/engine.py runs
        it so for ``no_overlap`` arms): launch the verify, ``Results`` (the copy-done wait
        and the timing reads, ``LoopHost._results``), ``Scheduler.process_result``,
        ``Deliver`` (``LoopHost._deliver``), ``Recv`` (``LoopHost._recv``),
        ``Scheduler.schedule()`` and the pass's stamp (``LoopHost._pass``), then the next
        launch: every forward is launched onto an idle stream after the whole result path.
        Returns the wall per cycle, from one launch's start to the next's (the generator is
        left at a launch); appends per cycle the host stamps' parts to ``parts``: the
        Results call (its wait included), process_result to Deliver, Deliver to the pass's
        stamp."""
        host, gen, sched, tokens = st["host"], st["gen"], st["sched"], st["tokens"]
        op, result = st["op"], None
        launched = 0
        t0 = t_res = t_proc = t_del = 0.0
        while True:
            if op is None:
                op = gen.send(result)
                result = None
            tp = type(op)
            if tp is Launch:
                now = time.perf_counter()
                if launched == 0:
                    t0 = now
                elif t_del and parts is not None:
                    parts.append((t_proc - t_res, t_del - t_proc, st["t_pass"] - t_del))
                if launched == n:
                    st["op"] = op
                    return (now - t0) / n
                if op.plan.mode is not ForwardMode.VERIFY or op.plan.batch_size != len(rows):
                    raise RuntimeError(f"the stall loop's scheduler stopped returning a verify of {len(rows)}")
                result = self._engine_verify_launch(rows, tokens, op.plan, host)
                launched += 1
                t_del = 0.0
            elif tp is Results:
                t_res = time.perf_counter()
                result = host._results(op)
                t_proc = time.perf_counter()
            elif tp is Deliver:
                t_del = time.perf_counter()
                host._deliver(op)
            elif tp is Recv:
                result = host._recv()
            elif tp is HostWork:
                if op.kind == "schedule":
                    host._pass(sched)
                    st["t_pass"] = time.perf_counter()
            else:
                raise RuntimeError(f"the no-overlap stall loop met {tp.__name__}")
            op = None

    def _serial_state(self, b: int) -> dict[str, Any]:
        """The no-overlap loop of batch ``b``: its own scheduler (overlap off), the engine's
        host side (:func:`_loop_host`) and the loop generator, advanced to its first launch."""
        sched, tokens = _verify_scheduler(b, self.W, self.seed, overlap=False)
        gen = scheduler_loop(sched, sched.server)
        st: dict[str, Any] = {"sched": sched, "tokens": tokens, "host": _loop_host(self.dev, b, self.seed),
                              "gen": gen, "op": None, "t_pass": 0.0}
        op = next(gen)
        while type(op) is not Launch:  # Recv, the pass's stamp, the launch's host work
            if type(op) is Recv:
                op = gen.send(st["host"]._recv())
                continue
            if type(op) is HostWork and op.kind == "schedule":
                st["host"]._pass(sched)
            op = gen.send(None)
        st["op"] = op
        return st

    def stall_phase(self) -> None:
        """Three loops of the engine's verify cycle with lengths growing as in the engine (so
        every step also reserves the next window's KV slots, as the runtime does). Each
        cycle is the engine loop's (sim/loop.py ``scheduler_loop``): launch the scheduled
        plan, wait for the previous step's result copy, ``Scheduler.process_result`` on it,
        ``Scheduler.schedule()`` the next plan; so the launch runs after the same host work
        as in the engine, not in a tight loop of launches alone (round 7: the loop's
        publish-wait stall was 0.93-0.96 ms at batch 1-8 on one machine, this phase's 0.52
        ms when it timed launches alone):

        - queued: the previous step's result copy is processed after the next launch
          (overlap, stream_wait): its wall per cycle is a verify as the engine issues it;
          the excess over the bare graph replay of the grid is added to ``gpu.verify``;
        - block: the host blocks on the previous forward's event before each launch
          (host_block): block - queued is the publish-wait stall the simulator models as
          ``host.launch_s + host.sync_wakeup_s``;
        - queued / block on decode plans of a plain-decoding server (``dqueued``, ``dblock``:
          :meth:`_engine_decode_launch`): block - queued is a decode launch's stall, the
          simulator's ``host.decode_launch_s`` / ``decode_launch_per_req_s``. A decode launch
          draws no accepts and prepares one position per request, not the draft window
          (runtime/spec_cycle.py ``decode`` vs ``spec_cycle``); a no_overlap arm of a
          plain-decoding server pays it on every step's critical path (round 38: its decode
          steps took ~0.84 ms beyond the overlapped arm's, where the verify launch's terms
          charged ~1.44 ms, docs/measurements/h200-v38.md);
        - serial: the loop without overlap (:meth:`_serial_cycles`: the loop generator with
          ``enable_overlap_schedule`` off, its result path run by the engine's own
          :class:`runtime.engine.LoopHost`): each forward is launched onto an idle stream
          after the previous one's whole result path, as in a ``no_overlap`` arm and as
          after any forward the GPU drained. Per cycle serial - block is that path (the
          wait's copy, the timing reads, ``process_result``, Deliver, Recv, ``schedule()``,
          the pass's stamp) less the publish wait's own wake-up, which both pay:
          ``host.result_path_s`` (runtime.profile_fit.Fits.result_path_points, less the
          scheduler's own ``host.process_s`` and ``host.schedule_s``).

        Raises:
            RuntimeError: the scheduler stops returning a verify of the whole batch.
        """
        dev, runner = self.dev, self.runner
        n = STALL_STEPS
        # one scheduler per batch size, kept across passes; invariant between cycles: its
        # `nxt` is scheduled and not launched; the step launched last (its ring event,
        # copy, plan, output) is not processed yet
        state: dict[int, dict[str, Any]] = {}
        for b in self.launch_bs:
            sched, tokens = _verify_scheduler(b, self.W, self.seed)
            # the launch call's wall and thread CPU per mode (runtime/host_probe.py), to set
            # beside the engine's own (benchmarks/gpu_validate.py checks.md)
            dsched, dtokens = _verify_scheduler(b, self.W, self.seed, speculative=False)
            state[b] = {"sched": sched, "tokens": tokens, "nxt": [sched.schedule()], "walls": {},
                        "probes": {m: HostProbe() for m in ("queued", "block", "dqueued", "dblock")},
                        "dsched": dsched, "dtokens": dtokens, "dnxt": [dsched.schedule()]}
        # Every pass runs every batch size, alternating their order, and each mode keeps its
        # fastest pass: the host holds a slower level for seconds at a time (h200-v17.md
        # "The launch call's slope"; three interleaved repetitions on one H200 put this
        # loop's slope at 3.6-9.8 us per request), so batch sizes timed one after another
        # read the drift between them as a per-request cost.
        modes = ("queued", "block", "serial", "dqueued", "dblock") * 2
        for k, mode in enumerate(modes):
            for b in (self.launch_bs if k % 2 == 0 else self.launch_bs[::-1]):
                self._progress(f"publish-wait stall bs {b} ({mode}, pass {k + 1} of {len(modes)})")
                st = state[b]
                if mode == "serial":
                    with dev.use("forward"):
                        rows, _ = self._new_rows(b, self.launch_ctx)
                        if "serial" not in st:
                            st["serial"] = self._serial_state(b)
                        self._serial_cycles(st["serial"], rows, WARMUP)
                        dev.synchronize("profile")
                        st["walls"].setdefault(mode, []).append(
                            self._serial_cycles(st["serial"], rows, n, st.setdefault("parts", [])))
                        dev.synchronize("profile")
                        for row in rows:
                            runner.free_request(row)
                    continue
                decode = mode.startswith("d")
                pre = "d" if decode else ""
                with dev.use("forward"):
                    rows, _ = self._new_rows(b, self.launch_ctx)

                    def cycle(prev: Any, block: bool, rows=rows, sched=st[pre + "sched"], tokens=st[pre + "tokens"],
                              nxt=st[pre + "nxt"], b=b, probe=st["probes"][mode],
                              decode=decode) -> tuple[Any, Any, Any, Any]:
                        plan = nxt[0]
                        want = ForwardMode.DECODE if decode else ForwardMode.VERIFY
                        if plan is None or plan.mode is not want or plan.batch_size != b:
                            raise RuntimeError(f"the stall loop's scheduler stopped returning a {want.value} of {b}")
                        if block and prev is not None:
                            dev.host_block(prev[0], "profile")
                        probe.begin()
                        launch = self._engine_decode_launch if decode else self._engine_verify_launch
                        done, copy, output = launch(rows, tokens, plan)
                        probe.end()
                        if prev is not None:
                            dev.wait_copy(prev[1], "profile")
                            sched.process_result(prev[2], prev[3])
                        nxt[0] = sched.schedule()
                        return done, copy, plan, output

                    def drain(prev: Any, sched=st[pre + "sched"]) -> None:
                        dev.wait_copy(prev[1], "profile")
                        sched.process_result(prev[2], prev[3])

                    block = mode in ("block", "dblock")
                    prev = None
                    for _ in range(WARMUP):
                        prev = cycle(prev, block)
                    drain(prev)
                    dev.synchronize("profile")
                    prev = None
                    t0 = time.perf_counter()
                    for _ in range(n):
                        prev = cycle(prev, block)
                    dev.wait_copy(prev[1], "profile")
                    st["walls"].setdefault(mode, []).append((time.perf_counter() - t0) / n)
                    drain(prev)
                    dev.synchronize("profile")
                    for row in rows:
                        runner.free_request(row)
        # per launch batch size: median launch call wall / thread CPU, block then queued loop
        self.stall_calls: list[tuple[float, ...]] = []
        self.loop_med: list[float] = []
        self.stall_med: list[float] = []
        self.decode_stall_med: list[float] = []   # the same on decode plans (dblock - dqueued)
        self.decode_stall_calls: list[tuple[float, ...]] = []   # and their launch calls, as stall_calls
        # per launch batch size: the no-overlap loop's wall per cycle less the block loop's
        # (best pass each), and the medians of its host stamps' parts (_serial_cycles)
        self.serial_excess: list[float] = []
        self.serial_parts: list[tuple[float, ...]] = []
        for b in self.launch_bs:
            walls, probes = state[b]["walls"], state[b]["probes"]
            self.serial_excess.append(min(walls["serial"]) - min(walls["block"]))
            self.serial_parts.append(tuple(float(np.median(c)) for c in zip(*state[b]["parts"], strict=True)))
            self.stall_calls.append(tuple(statistics.median(v) for m in ("block", "queued")
                                          for v in (probes[m].wall, probes[m].cpu)))
            self.loop_med.append(min(walls["queued"]))
            self.stall_med.append(max(0.0, min(walls["block"]) - min(walls["queued"])))
            self.decode_stall_med.append(max(0.0, min(walls["dblock"]) - min(walls["dqueued"])))
            self.decode_stall_calls.append(tuple(statistics.median(v) for m in ("dblock", "dqueued")
                                                 for v in (probes[m].wall, probes[m].cpu)))
            self._tick()
        self.stall_fit = fit_line(self.launch_bs, self.stall_med)
        self.decode_stall_fit = fit_line(self.launch_bs, self.decode_stall_med)

    def sync_phase(self) -> None:
        self._progress("event-sync wake-up")
        dev = self.dev
        n = max(50, 5 * self.repeats)
        done_t, tiny_t = [], []
        with dev.use("forward"):
            x = torch.zeros(1, device=dev.torch_device)
            for _ in range(n):
                ev = dev.record("forward")
                dev.synchronize("profile")
                done_t.append(dev.host_block(ev, "profile"))
                x.add_(1)
                ev = dev.record("forward")
                tiny_t.append(dev.host_block(ev, "profile"))
        self.sync_n = n
        self.sync_done, self.sync_tiny = statistics.median(done_t), statistics.median(tiny_t)
        self.sync_wakeup = max(0.0, self.sync_tiny - self.sync_done)
        self._tick()

    def host_phase(self) -> None:
        """Median host time of ``Scheduler.schedule()`` and ``Scheduler.process_result`` per
        batch size, on verify plans of DSpark requests (host.schedule_*, process_*) and on
        decode plans of a plain-decoding server (host.decode_schedule_*, decode_process_*:
        a decode plan skips the draft windows' bookkeeping, and a no_overlap arm pays these
        on the critical path, docs/measurements/h200-nooverlap.md). The two kinds alternate
        per batch size, so a host level held for seconds falls on both alike."""
        n = max(50, 5 * self.repeats)
        self.host_n = n
        meds: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
        for b in self.host_bs:
            for speculative in (True, False):
                self._progress(f"scheduler host time bs {b} ({'verify' if speculative else 'decode'} plans)")
                sched, tokens = _verify_scheduler(b, self.W, self.seed, speculative=speculative)
                ts, tp = [], []
                for k in range(WARMUP + n):
                    t0 = time.perf_counter()
                    plan = sched.schedule()
                    t1 = time.perf_counter()
                    assert plan is not None and plan.batch_size == b
                    out = tokens.step(plan)
                    t2 = time.perf_counter()
                    sched.process_result(plan, out)
                    t3 = time.perf_counter()
                    if k >= WARMUP:
                        ts.append(t1 - t0)
                        tp.append(t3 - t2)
                meds[speculative][0].append(statistics.median(ts))
                meds[speculative][1].append(statistics.median(tp))
            self._tick()
        (self.sched_med, self.proc_med), (self.decode_sched_med, self.decode_proc_med) = meds[True], meds[False]
        self.sched_fit = fit_line(self.host_bs, self.sched_med)
        self.proc_fit = fit_line(self.host_bs, self.proc_med)
        self.decode_sched_fit = fit_line(self.host_bs, self.decode_sched_med)
        self.decode_proc_fit = fit_line(self.host_bs, self.decode_proc_med)
