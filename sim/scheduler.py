"""The scheduler core: time-free, pure Python, shared by the simulator and the runtime.

Modelled on SGLang's scheduler (managers/scheduler.py ``get_next_batch_to_run``,
``_get_new_batch_prefill_raw``, ``update_running_batch``; managers/schedule_policy.py
``PrefillAdder``). Two calls, as in vLLM: :meth:`Scheduler.schedule` returns the next
:class:`~sim.plan.BatchPlan` (or None), :meth:`Scheduler.process_result` applies a
forward's :class:`~sim.plan.StepOutput`. It never reads a clock and never touches torch.

The overlap loop (:mod:`sim.loop`) calls ``schedule()`` for step N+1 *before* it calls
``process_result()`` for step N, so the scheduler sees results one step late, as SGLang's
overlap scheduler does: a request that finished at step k still rides step k+1 and is
filtered when step k+2 is built.

The collapsed decode path (the simulator's fast path) also goes through here:
:meth:`Scheduler.decode_stretch` decides whether the state is a decode-only stretch and has
:mod:`sim.decode_run` compute it; :meth:`Scheduler.apply_stretch` applies its first
iterations. Both paths build decode plans with :func:`sim.plan.decode_plan` and change KV
only through the ledger (:mod:`sim.kv_ledger`).

Invariants kept here (named in docs/architecture.md, tested in tests/test_invariants.py):
INV-1 running <= max_running_requests (admission caps the running slots); INV-2 KV within
capacity (a decode pass retracts until its reservation fits; the ledger refuses more);
INV-3 each request finishes once, with exactly its output length, and INV-4 tokens
conserved (process_result clips commits to max_new_tokens and skips finished and
retracted requests); INV-10 a forward holds <= max_running_requests requests;
INV-7 the collapsed stretch equals the passes it replaces.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from specsched.sim.admission import AdmissionPolicy, AdmissionState
from specsched.sim.config import ServerArgs
from specsched.sim.decode_run import DecodeRun
from specsched.sim.device_tokens import DeviceTokens
from specsched.sim.kv_ledger import KVLedger
from specsched.sim.new_token_ratio import NewTokenRatio
from specsched.sim.plan import BatchPlan, ForwardMode, StepOutput, decode_plan
from specsched.sim.prefill_adder import CLIP_MAX_NEW_TOKENS, AddResult, PrefillAdder, ceil_page
from specsched.sim.request import Req, ReqStatus
from specsched.sim.schedule_policy import SchedulePolicy


class UnschedulableRequest(RuntimeError):
    """A request can never run: its prompt plus reserved output exceeds the empty KV pool."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """Tokens that reach a client: ``n_tokens`` (>= 1) committed to request ``rid``;
    ``finished`` is True when they complete the request."""

    rid: int
    n_tokens: int
    finished: bool


class Deliveries:
    """The deliveries of one forward's results, as arrays (one entry per request that got
    tokens, in the plan's order). Iterating yields :class:`Delivery` objects.

    Attributes:
        rids: int array (n,), request ids.
        n_tokens: int array (n,), tokens delivered (>= 1).
        finished: bool array (n,), True where the tokens complete the request.
    """

    __slots__ = ("rids", "n_tokens", "finished")

    def __init__(self, rids: np.ndarray, n_tokens: np.ndarray, finished: np.ndarray) -> None:
        self.rids, self.n_tokens, self.finished = rids, n_tokens, finished

    def __len__(self) -> int:
        return len(self.rids)

    def __getitem__(self, i: int) -> Delivery:
        return Delivery(int(self.rids[i]), int(self.n_tokens[i]), bool(self.finished[i]))

    def __iter__(self) -> Iterator[Delivery]:
        for r, n, f in zip(self.rids.tolist(), self.n_tokens.tolist(), self.finished.tolist(), strict=True):
            yield Delivery(r, n, f)


class Scheduler:
    """One serving instance's scheduling decisions.

    Args:
        server: the server arguments (budgets, spec window, admission-delay choice).
        admission: the admission-delay policy (fresh state per run).
        seed: seeds the ``random`` schedule policy only.

    Read by executors: ``waiting``, ``running``, ``reqs``, ``kv`` (the ledger: ``used``,
    ``peak``, ``capacity``), ``num_running``, ``has_work``, ``decode_batch_reqs``; counters
    for the records: ``num_retractions``, ``num_delayed_passes``. Everything else is private.
    """

    def __init__(self, server: ServerArgs, admission: AdmissionPolicy, seed: int = 0) -> None:
        self.server = server
        self.admission = admission
        self.policy = SchedulePolicy(server.schedule_policy, seed)
        self.kv = KVLedger(server.max_total_num_tokens)
        self.ratio = NewTokenRatio(server.schedule_conservativeness)
        self.window = server.spec_window
        self.spec = server.speculative_algorithm.enabled
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.chunked_req: Req | None = None
        self.reqs: dict[int, Req] = {}
        self._last_prefill: list[Req] = []
        self.step = 0
        self.num_retractions = 0
        self.num_delayed_passes = 0

    # ------------------------------------------------------------------ inputs
    def add_request(self, req: Req) -> None:
        """A request reached the scheduler: append it to the waiting queue (FCFS order).

        Raises:
            UnschedulableRequest: its prompt plus reserved output can never fit the pool.
        """
        # what PrefillAdder charges (page-rounded prompt + clipped output + a page), plus the
        # verify reservations of the two steps the overlap loop keeps in flight
        page = self.server.page_size
        need = ceil_page(req.input_len, page) + min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS) + page + 2 * self.window
        if need >= self.kv.capacity:
            raise UnschedulableRequest(
                f"request {req.rid}: {req.input_len} prompt + {req.max_new_tokens} output tokens "
                f"(+ {2 * self.window} in-flight verify slots) cannot fit max_total_num_tokens={self.kv.capacity}"
            )
        req.status = ReqStatus.WAITING
        self.reqs[req.rid] = req
        self.waiting.append(req)

    @property
    def has_work(self) -> bool:
        """True while anything waits, runs or is being prefilled."""
        return bool(self.waiting or self.running or self.chunked_req or self._last_prefill)

    @property
    def num_running(self) -> int:
        """Requests holding a running slot (running batch + chunked request)."""
        return len(self.running) + (1 if self.chunked_req is not None else 0)

    @property
    def decode_batch_reqs(self) -> list[Req]:
        """The requests the next decode pass would hold: the running batch, then the last
        prefill batch's requests about to join it (a new list)."""
        return self.running + self._last_prefill

    # ---------------------------------------------------------------- schedule
    def schedule(self) -> BatchPlan | None:
        """Build the next forward (SGLang ``get_next_batch_to_run``).

        The last prefill batch joins the running batch; a new prefill batch runs if one can
        be formed (prefill has priority), otherwise the running batch decodes. Returns None
        when there is nothing to run.
        """
        if self._last_prefill:
            for r in self._last_prefill:
                # SGLang merges the last extend batch minus the chunked request, after
                # filtering finished (and retracted) requests out of it
                if r is self.chunked_req or r.status in (ReqStatus.WAITING, ReqStatus.FINISHED):
                    continue
                r.status = ReqStatus.RUNNING
                self.running.append(r)
            self._last_prefill = []
        plan = self._new_prefill_batch()
        if plan is None:
            plan = self._decode_batch()
        if plan is not None:
            self.step += 1
        return plan

    def _delays(self, running_bs: int, active_running_bs: int) -> bool:
        """The admission policy's decision for a pass with this running batch (requests,
        incl. finished ones not filtered yet; ``active_running_bs`` excludes them)."""
        return self.admission.should_delay(AdmissionState(
            running_bs=running_bs,
            num_allocatable_reqs=self.server.max_running_requests - running_bs,
            waiting_bs=len(self.waiting),
            active_running_bs=active_running_bs,
        ))

    def _new_prefill_batch(self) -> BatchPlan | None:
        s = self.server
        running_bs = len(self.running)
        full = running_bs >= s.max_running_requests
        if (full or not self.waiting) and self.chunked_req is None:
            return None
        if self.chunked_req is None:
            # min-free-slots check: skipped while a chunked request is in progress
            if self._delays(running_bs, sum(1 for r in self.running if not r.finished)):
                self.num_delayed_passes += 1
                return None
        allocatable = s.max_running_requests - running_bs  # INV-1: admissions fill free slots only
        if allocatable <= 0 and self.chunked_req is None:
            return None

        mixed = s.enable_mixed_chunk and bool(self.running)
        if mixed:
            # SGLang's mix_with_running: the running batch (finished requests filtered) rides
            # in the extend batch; the budgets shrink by its decode tokens. Its KV is reserved
            # only once the pass admits something (no double deduction, one ratio step).
            self.running = [r for r in self.running if not r.finished]
            mixed = bool(self.running)
        mixed_tokens = len(self.running) * self.window if mixed else 0

        adder = PrefillAdder.start(
            self.kv.available, self.running, self.ratio.value, s.max_prefill_tokens,
            s.chunked_prefill_size, s.page_size, mixed_tokens,
        )
        prev_chunked = self.chunked_req
        still_chunked = adder.add_chunked_req(prev_chunked) if prev_chunked is not None else False
        for req in self.policy.order(list(self.waiting)):
            if len(adder.can_run) >= allocatable:  # INV-1, INV-10 (can_run counts the chunked request)
                break
            if adder.add_one_req(req) is not AddResult.CONTINUE:
                break
        if not adder.can_run:
            return None
        decoders: list[Req] = []
        if mixed:
            decoders = self._filter_finished_and_reserve() or []

        admitted = [r for r, _ in adder.can_run if r is not prev_chunked]
        if admitted:
            ids = {id(r) for r in admitted}
            self.waiting = deque(r for r in self.waiting if id(r) not in ids)
            self.admission.on_prefill_admitted(len(admitted))
        rids, ext, pre, new, before, maxnew = [], [], [], [], [], []
        for r, n in adder.can_run:
            rids.append(r.rid)
            ext.append(n)
            pre.append(r.prefill_done)
            before.append(r.output_len)
            maxnew.append(r.max_new_tokens)
            self.kv.reserve(r, n)
            r.prefill_done += n
            r.status = ReqStatus.PREFILLING
            if r.prefill_done >= r.fill_len:
                new.append(r.rid)
        self.chunked_req = adder.new_chunked or (prev_chunked if still_chunked else None)
        self._last_prefill = [r for r, _ in adder.can_run]
        num_extend = len(rids)
        for r in decoders:
            rids.append(r.rid)
            ext.append(self.window)
            pre.append(r.seq_len)
            before.append(r.output_len)
            maxnew.append(r.max_new_tokens)
        if mixed:
            self._last_prefill.extend(decoders)
            self.running = []
        return BatchPlan(
            step=self.step,
            mode=ForwardMode.MIXED if decoders else ForwardMode.EXTEND,
            rids=tuple(rids), extend_lens=tuple(ext), prefix_lens=tuple(pre),
            num_extend=num_extend, chunked_rid=self.chunked_req.rid if self.chunked_req else None,
            new_rids=tuple(new), spec_window=self.window if decoders else 1,
            committed_before=tuple(before), max_new_tokens=tuple(maxnew),
        )

    def _filter_finished_and_reserve(self) -> list[Req] | None:
        """Filter finished requests, make room for one decode/verify step (retracting if the
        pool is short) and reserve ``window`` KV slots per request. Returns the decoders."""
        self.running = [r for r in self.running if not r.finished]
        if not self.running:
            return None
        need = len(self.running) * self.window
        if self.kv.available < need:
            self._retract(need)  # INV-2: make room before reserving
        else:
            self.ratio.on_decode_step()
        self.kv.reserve_window(self.running, self.window)
        return list(self.running)

    def _decode_batch(self) -> BatchPlan | None:
        """SGLang ``update_running_batch``: filter finished, check decode memory (retract or
        decay new_token_ratio), prepare one decode (or verify) step."""
        decoders = self._filter_finished_and_reserve()
        if decoders is None:
            self.ratio.on_idle()  # no batch runs this pass
            return None
        return decode_plan(self.step, self.spec, self.window, [r.rid for r in decoders],
                           [r.seq_len for r in decoders], [r.output_len for r in decoders],
                           [r.max_new_tokens for r in decoders])

    def _retract(self, need: int) -> None:
        """Retract running requests until one decode step fits (SGLang retract_decode).

        Order: spec decoding retracts from the back of the batch; otherwise the request with
        the most output goes first, ties broken by the shortest input. Retracted requests free
        their KV and re-queue; they re-prefill prompt + committed output later. The last
        request is never retracted (SGLang asserts there is room for it instead).

        Raises:
            UnschedulableRequest: one request alone cannot get its next step's KV.
        """
        if not self.spec:
            self.running.sort(key=lambda r: (r.output_len, -r.input_len))
        retracted: list[Req] = []
        while len(self.running) > 1 and self.kv.available < len(self.running) * self.window:
            r = self.running.pop()
            self.kv.retract(r)
            r.prefill_done = 0
            r.status = ReqStatus.WAITING
            r.retractions += 1
            retracted.append(r)
        if self.kv.available < len(self.running) * self.window:
            raise UnschedulableRequest(
                f"request {self.running[0].rid} alone cannot get KV for its next step "
                f"({self.kv.available} tokens free of {self.kv.capacity})")
        self.num_retractions += len(retracted)
        self.waiting.extend(retracted)
        bs = len(self.running)  # the batch after retraction, as its decoded and max_new sums
        decoded = sum(r.output_len for r in self.running)
        self.ratio.on_retract(decoded, bs, sum(r.max_new_tokens for r in self.running))

    # ------------------------------------------------------------------ results
    def process_result(self, plan: BatchPlan, output: StepOutput) -> Deliveries:
        """Apply a forward's committed tokens (SGLang ``process_batch_result``).

        Requests retracted since the plan was built, or already finished, are skipped (their
        tokens are discarded). Verify reservations not used are returned to the pool; a
        request that completes frees its KV. Returns the deliveries to clients (a
        :class:`Deliveries`: iterable of :class:`Delivery`, with array fields).
        """
        d_rid: list[int] = []
        d_n: list[int] = []
        d_fin: list[bool] = []
        window = plan.spec_window
        spec_step = window > 1
        committed = output.committed.tolist()
        reqs = self.reqs
        skip = (ReqStatus.WAITING, ReqStatus.FINISHED)
        returning: list[Req] = []    # decode entries with unused reserved slots
        unused_n: list[int] = []
        finished: list[Req] = []
        for i, rid in enumerate(plan.rids):
            r = reqs[rid]
            if r.status in skip:  # INV-3: a finished (or retracted) request takes no more tokens
                continue
            n = committed[i]
            if i >= plan.num_extend:
                unused = window - n
                if unused > 0:
                    returning.append(r)
                    unused_n.append(unused)
                if spec_step:
                    r.spec_cycles += 1
            if n <= 0:
                continue
            left = r.max_new_tokens - r.output_len
            if n > left:  # INV-3/INV-4: never past max_new_tokens (the device clips the same way)
                n = left
            r.output_len += n
            done = n == left
            d_rid.append(rid)
            d_n.append(n)
            d_fin.append(done)
            if done:
                r.status = ReqStatus.FINISHED
                finished.append(r)
        if returning:
            self.kv.commit(returning, unused_n)
        if finished:
            self.kv.free(finished)
        return Deliveries(np.array(d_rid, dtype=np.int64), np.array(d_n, dtype=np.int64),
                          np.array(d_fin, dtype=bool))

    # ------------------------------------------------------ collapsed decode stretch
    def decode_stretch(self, device: DeviceTokens, prev_plan: BatchPlan, prev_output: StepOutput,
                       max_iters: int, stop_at_finish: bool, finishes_left: int) -> DecodeRun | None:
        """The decode-only stretch that starts at this pass, computed at once, or None.

        Call at the top of the overlap loop with one forward in flight (``prev_plan``,
        launched; ``prev_output`` its commits, results not processed). A stretch is a run of
        passes in which nothing but decoding happens: no chunked request, no admission
        (nothing waits, or a stateless policy delays every pass or the batch is full), the
        in-flight forward is a decode/verify of the running batch or a prefill whose
        requests all complete, and no pass needs a retraction. Nothing is changed here.

        Args:
            device: the device's committed counts (read only).
            max_iters, stop_at_finish, finishes_left: see :meth:`sim.decode_run.DecodeRun.compute`.
        """
        if self.chunked_req is not None:
            return None
        n_wait = len(self.waiting)
        if n_wait and not getattr(self.admission, "stateless", False):
            return None  # a stateful policy's state would change at every delayed pass
        merged = self._last_prefill
        if merged:
            # the last forward is a prefill whose requests all complete and join the batch
            if (prev_plan.mode is not ForwardMode.EXTEND or prev_plan.chunked_rid is not None
                    or len(prev_plan.new_rids) != prev_plan.batch_size
                    or [r.rid for r in merged] != list(prev_plan.rids)
                    or any(r.status is not ReqStatus.PREFILLING for r in merged)):
                return None
            reqs = self.running + merged
        else:
            if prev_plan.num_extend or prev_plan.mode is ForwardMode.EXTEND:
                return None
            if [r.rid for r in self.running] != list(prev_plan.rids):
                return None
            reqs = list(self.running)
        m = len(reqs)
        if m == 0:
            return None
        if n_wait and m < self.server.max_running_requests:
            # the first pass must delay admission (checked before any array is built)
            if not self._delays(m, sum(1 for r in reqs if not r.finished)):
                return None
        return DecodeRun.compute(
            reqs, len(merged), device, prev_plan, prev_output, window=self.window, spec=self.spec,
            first_step=self.step, kv=self.kv, max_running_requests=self.server.max_running_requests,
            num_waiting=n_wait, delays=self._delays, max_iters=max_iters,
            stop_at_finish=stop_at_finish, finishes_left=finishes_left,
        )

    def apply_stretch(self, run: DecodeRun, n: int) -> tuple[BatchPlan, StepOutput]:
        """Apply the first ``n`` (1 <= n <= run.stop) iterations of ``run`` (from
        :meth:`decode_stretch`, state unchanged since), as n passes of schedule() and
        process_result() would: the prefill's requests join the batch, tokens are committed,
        requests finish, KV moves through the ledger, new_token_ratio decays once per pass,
        delayed admissions are counted. The device's counts are the caller's
        (``run.device_after(n)``).

        Returns:
            The forward left in flight: P_{n-1} and its output.

        Raises:
            ValueError: n out of range.
        """
        if not 1 <= n <= run.stop:
            raise ValueError(f"can apply 1..{run.stop} iterations, not {n}")
        last = n - 1
        for r in self._last_prefill:
            r.status = ReqStatus.RUNNING
        self._last_prefill = []
        outs, held, done, cycles = run.state_after(n)
        finished = ReqStatus.FINISHED
        for i, r in enumerate(run.reqs):
            r.output_len = outs[i]
            if cycles is not None:
                r.spec_cycles += cycles[i]
            if done[i]:
                r.status = finished
        self.kv.settle(run.reqs, held, int(run.kv.scheduled[last] - run.kv.freed[last]),
                       int(run.kv.scheduled[:n].max()))
        self.running = [r for r, keep in zip(run.reqs, run.member[last].tolist(), strict=True) if keep]
        ratio = self.ratio
        for _ in range(n):   # one decay per pass without retraction
            if ratio.value <= ratio.floor:
                break
            ratio.on_decode_step()
        if run.delayed is not None:
            self.num_delayed_passes += int(run.delayed[:n].sum())
        self.step += n
        return run.plan_at(last)
