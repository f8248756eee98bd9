"""One request as the scheduler sees it (SGLang's ``Req``, managers/schedule_batch.py).

Tokens are counted, not phases: a request tracks how many prompt tokens have been computed
(``prefill_done``) and how many output tokens are committed (``output_len``); its status is
derived from those counts plus the scheduler's bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ReqStatus(IntEnum):
    """Ordered lifecycle of a request.

    WAITING: in the waiting queue (never admitted, or retracted and re-queued).
    PREFILLING: admitted, prompt partly computed (a chunked request in progress).
    RUNNING: prompt computed; in the running (decode/verify) batch.
    FINISHED: all ``max_new_tokens`` committed (bench_serving runs with ignore_eos).
    """

    WAITING = 0
    PREFILLING = 1
    RUNNING = 2
    FINISHED = 3


# The members as module names, for the per-request paths: reading a member through its
# class costs ~0.1 us in CPython 3.11 (the enum metaclass defeats the attribute cache)
WAITING, PREFILLING, RUNNING, FINISHED = ReqStatus.WAITING, ReqStatus.PREFILLING, ReqStatus.RUNNING, ReqStatus.FINISHED


@dataclass(slots=True)
class Req:
    """A request: prompt length, output target and the scheduler's counters.

    Attributes:
        rid: id from the run's counter (never a class attribute).
        input_len: prompt tokens (>= 1).
        max_new_tokens: output tokens to generate (>= 1); bench_serving's ignore_eos means
            every request generates exactly this many.
        prefill_done: prompt (+ re-prefilled output, after a retraction) tokens whose KV is
            computed. Prefill is complete when it equals ``fill_len``.
        output_len: output tokens committed so far (the prefill commits the first).
        status: see :class:`ReqStatus`.
        kv_allocated: KV pool tokens held by this request.
        kv_len: sequence positions that have a KV slot, the request's own plus those the
            prefix cache holds for it (SGLang ``Req.kv.kv_allocated_len``); the speculative
            top-up (:meth:`sim.kv_ledger.KVLedger.top_up`) sizes from it.
        retractions: how many times this request was retracted (the decode batch out of KV,
            SGLang ``retract_decode``); a priority preemption is counted in ``preemptions``.
        spec_cycles: verify cycles this request took part in while not finished.
        preemptions: how many times a waiting request of higher priority preempted it
            (SGLang ``PrefillAdder.preempt_to_schedule``). Either way it leaves the batch
            to re-prefill: :attr:`requeues`.
        ignore_eos: sent with ignore_eos (bench_serving's random dataset does): it cannot
            stop early, so sglang 0.5.23 reserves its remaining output at ratio 1.0.
        priority: request priority (SGLang ``--enable-priority-scheduling``); None: the
            server's default.
        tokens: token ids (int64 array) when the workload shares prefixes: the prompt
            (``tokens[:input_len]``), possibly followed by the output the request will
            generate (a multi-turn conversation's next turn resends it); None: a prompt
            that shares nothing (the radix cache never matches it).
        cached_len: prompt tokens found in the prefix cache at the last match (SGLang
            ``prefix_len`` / ``num_matched_prefix_tokens``); 0 without a cache.
        last_node: the radix-tree node where that match ended (None without a cache).
        cache_protected_len: leading tokens of this request whose KV the prefix cache owns
            (matched at admission or handed over at a checkpoint; SGLang
            ``req.kv.cache_protected_len``); the request holds slots only past it.
        kv_transferred: prefill-decode disaggregation: the prompt's KV has reached the decode
            server (set by the executor; the prefill side's ``KVPoll.Success``, the decode
            side's ``pop_transferred``; :mod:`sim.scheduler_disagg`).
        sent_len: output tokens streamed to the client so far (SGLang ``send_token_offset``);
            behind ``output_len`` only under ``server.stream_interval`` > 1
            (:mod:`sim.output_streamer`).
        arrival_processed_tokens: the scheduler's prefill-token counter
            (:attr:`sim.scheduler.Scheduler.processed_tokens`) when this request last entered
            the waiting queue (SGLang ``Req.arrival_processed_tokens``, snapshot in
            ``Scheduler._add_request_to_queue``, again after a retraction or preemption);
            the hrrn order ages the request by how far the counter has moved since.
        routing_key: the key the client sent with the request (SGLang ``Req.routing_key``,
            from ``GenerateReqInput.routing_key``); None: sent without one. Read by the
            routing-key order (:class:`sim.schedule_policy.RoutingKey`).
        asked_no_output: the client asked ``max_new_tokens`` 0 (a trace row of 0 output
            tokens). The request still makes its prefill's one token here
            (``max_new_tokens`` 1: SGLang's forward gives it one and ``Req.check_finished``
            ends it there), but every budget reads SGLang's ``sampling_params.max_new_tokens``
            of 0 (:attr:`admission_max_new`): no output is reserved at admission
            (schedule_policy.py ``PrefillAdder.add_one_req``, ``add_one_req_ignore_eos``,
            ``_update_prefill_budget``) or while it runs
            (``_get_running_request_total_token_offset``).
    """

    rid: int
    input_len: int
    max_new_tokens: int
    prefill_done: int = 0
    output_len: int = 0
    status: ReqStatus = ReqStatus.WAITING
    kv_allocated: int = 0
    kv_len: int = 0
    retractions: int = 0
    spec_cycles: int = 0
    ignore_eos: bool = True
    priority: int | None = None
    tokens: Any = None
    cached_len: int = 0
    last_node: Any = None
    cache_protected_len: int = 0
    kv_transferred: bool = False
    sent_len: int = 0
    arrival_processed_tokens: int = 0
    routing_key: str | None = None
    asked_no_output: bool = False
    preemptions: int = 0

    @property
    def requeues(self) -> int:
        """Times the request left the running batch to re-prefill later: its retractions
        and priority preemptions (both ``release_req`` + re-queue in SGLang 0.5.23)."""
        return self.retractions + self.preemptions

    @property
    def fill_len(self) -> int:
        """Tokens whose KV a (re-)prefill must compute: prompt plus committed output.

        After a retraction SGLang re-prefills ``origin_input_ids + output_ids``.
        """
        return self.input_len + self.output_len

    @property
    def admission_max_new(self) -> int:
        """The ``max_new_tokens`` SGLang's budgets read (``sampling_params.max_new_tokens``):
        0 for a request that asked no output (:attr:`asked_no_output`), else
        ``max_new_tokens``."""
        return 0 if self.asked_no_output else self.max_new_tokens

    @property
    def extend_remaining(self) -> int:
        """Tokens still to extend before the request can decode."""
        return self.fill_len - self.prefill_done

    @property
    def remaining_output(self) -> int:
        """Output tokens still to commit."""
        return self.max_new_tokens - self.output_len

    @property
    def seq_len(self) -> int:
        """Current KV length (context) of the request."""
        return self.prefill_done if self.status <= ReqStatus.PREFILLING else self.input_len + self.output_len

    @property
    def finished(self) -> bool:
        return self.output_len >= self.max_new_tokens
