"""The scheduler's event loop, written once as operations on an abstract device.

Source: SGLang managers/scheduler.py ``event_loop_overlap`` (and ``event_loop_normal``),
managers/overlap_utils.py (the publish wait), speculative/dspark_components (DSpark
prefill). Per iteration: receive requests; build the next batch; (spec only, and only
for a batch with decoding rows) wait for the previous forward's publish event, by blocking
the host (``host_block``) or by a queued wait (``stream_wait`` from the forward stream,
``cross_queue_wait`` from a separate schedule stream); prepare inputs and launch; for a
DSpark prefill, expand slots (repeat_interleave without output_size blocks the host until
the prefill forward drains) and launch the draft KV injection; then process the *previous*
batch's results (overlap: one step late) and deliver its tokens. With overlap off, results
are processed right after the launch.

Two details of the publish wait, read in sglang 0.5.20 (the last build whose DSpark prefill
has the blocking expansion) and 0.5.23:

- It is the wait in ``FutureMap.resolve_seq_lens_cpu`` / ``resolve_mixed_spec_tails``
  (managers/overlap_utils.py), which return at once for a batch without a speculative
  future, i.e. a prefill batch of new or chunked requests only: such a batch is prepared
  and launched while the previous forward runs. A decode/verify batch, or a mixed one
  (running requests as one-token rows), waits.
- A DSpark prefill records ``publish_ready`` (``on_publish``) right after the target
  forward and before the draft-KV injection (speculative/dspark_components/
  dspark_worker_v2.py ``_forward_prefill``): the next batch waits for the target forward
  only, and its launch queues behind the injection. Result processing waits for the
  injection too (the result copy is recorded after it, scheduler.py ``run_batch``).
  A chain drafter's prefill does the same with its draft extend over the prompt
  (speculative/eagle_worker_v2.py ``_forward_prefill_batch``: the target extend,
  ``on_publish``, then ``_draft_extend_for_prefill``, the draft model's forward over every
  prompt token), priced by the same ``inject`` launch (profile ``gpu.draft_inject``); the
  slot-expansion block is DSpark's only.

The simulator (:mod:`sim.engine`) executes these operations on a SimPy clock, the runtime
(:mod:`runtime.engine`) on a GPU. A sync mode is a choice of which operation is issued.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

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
from specsched.sim.recv_skipper import RecvSkipper
from specsched.sim.scheduler import Scheduler
from specsched.sim.server_args import ServerArgs, SyncMode

Op = Recv | FastForward | WaitForWork | HostWork | Launch | HostBlock | StreamWait | Results | Deliver


def _publish_wait(server: ServerArgs, handle: Any) -> Op:
    """The wait on the previous forward's publish event, per sync mode."""
    if server.sync_mode is SyncMode.host_block:
        return HostBlock(handle, "publish")
    if server.sync_mode is SyncMode.cross_queue_wait:
        return StreamWait(handle, "schedule")
    return StreamWait(handle, "forward")


def scheduler_loop(sched: Scheduler, server: ServerArgs, fast_forward: bool = False) -> Generator[Op, Any, None]:
    """The event loop as a generator of :mod:`sim.ops` operations.

    Runs until the executor closes it. Results sent back: a list of requests for ``Recv``,
    a handle for ``Launch``, a :class:`~sim.plan.StepOutput` for ``Results``, for
    ``FastForward`` (issued only with ``fast_forward``) the (plan, handle) then in flight or
    None, None otherwise.

    The loop holds one object per operation it issues every iteration (one per kind of host
    work and per launch part) and sets its fields before each yield, so an operation holds
    its pass's fields until the executor sends its result back, and the next one of its kind
    may be the same object with new fields: executors read an operation at once (as every
    one does), they do not keep it. Building an op is a Python ``__init__`` call per op,
    ~0.1-0.2 us, about eight an iteration; setting its fields is one attribute store each
    (docs/performance.md). The publish waits (speculative decoding only) are built as issued.
    """
    spec = server.speculative_algorithm.enabled
    block_drafter = server.speculative_algorithm.is_block
    overlap = server.enable_overlap_schedule
    # --scheduler-recv-interval: some passes take no new requests (sim/recv_skipper.py)
    skipper = RecvSkipper(server.scheduler_recv_interval) if server.scheduler_recv_interval > 1 else None
    plan = None   # the last pass's plan until this pass schedules (the skipper reads it)
    # (plan, handle whose results are pending, handle whose end is the publish event)
    in_flight: tuple[Any, Any, Any] | None = None
    # the operations, reused (docstring): fields set before each yield
    ff_op, recv_op, wait_op = FastForward(None, None), Recv(), WaitForWork()
    schedule_op, launch_work_op, process_op = HostWork("schedule", None), HostWork("launch", None), HostWork("process", None)
    launch_op, inject_op = Launch(None), Launch(None, "inject")
    results_op, deliver_op = Results(None), Deliver(None)
    while True:
        if fast_forward and in_flight is not None and in_flight[1] is in_flight[2]:
            # the executor may collapse a decode stretch: it applies its iterations through
            # the scheduler and hands back the forward it leaves in flight (not right after
            # a block drafter's prefill, whose publish precedes its injection's end)
            ff_op.plan, ff_op.handle = in_flight[0], in_flight[1]
            jumped = yield ff_op
            if jumped is not None:
                in_flight = (jumped[0], jumped[1], jumped[1])
        if skipper is None or skipper.should_recv(plan, idle=in_flight is None and not sched.has_work):
            for req in (yield recv_op):
                sched.add_request(req)
        plan = sched.schedule()
        # what the pass delivered while it was built: a decode server streams the first tokens
        # of the requests whose KV arrived (disaggregation/decode.py
        # process_batch_result_prebuilt); a request aborted out of memory ends
        # (schedule_batch.py retract_decode, scheduler.py send_abort_output)
        built = sched.take_pass_deliveries()
        if built:
            deliver_op.deliveries = built
            yield deliver_op
        handle = publish = None
        if plan is not None:
            schedule_op.plan = plan
            yield schedule_op
            if spec and in_flight is not None and plan.num_extend < plan.batch_size:
                # only a batch with decoding rows resolves the previous step's lengths
                yield _publish_wait(server, in_flight[2])
            launch_work_op.plan = plan
            yield launch_work_op
            launch_op.plan = plan
            handle = publish = yield launch_op
            if spec and plan.is_prefill and plan.num_extend:
                # the drafter's forward over the prompt, after the target's publish: a block
                # drafter's KV injection, a chain drafter's draft extend for prefill
                if block_drafter and server.prefill_slot_expansion_sync:
                    yield HostBlock(handle, "slot_expansion")
                inject_op.plan = plan
                handle = yield inject_op
            if not overlap:
                in_flight, handle = (plan, handle, publish), None
        if in_flight is not None:
            prev_plan, prev_handle, _ = in_flight
            results_op.handle = prev_handle
            output = yield results_op
            deliveries = sched.process_result(prev_plan, output)
            process_op.plan = prev_plan
            yield process_op
            if deliveries:
                deliver_op.deliveries = deliveries
                yield deliver_op
        in_flight = (plan, handle, publish) if handle is not None else None
        if plan is None and in_flight is None and not sched.has_work:
            yield wait_op
