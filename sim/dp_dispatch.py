"""Which data-parallel replica a request goes to: SGLang 0.5.23's DP controller dispatch.

SGLang's ``DataParallelController`` (managers/data_parallel_controller.py) sends each
tokenized request to one replica by ``--load-balance-method``:

- ``round_robin`` (what ``auto`` resolves to on a server that is not a disaggregated prefill
  server: arg_groups/serving_hook.py ``handle_load_balance_method``): the next replica of a
  counter (``round_robin_scheduler``), blind to load.
- ``total_requests``: the replica whose count of running plus waiting requests is least
  (``DPBudget.dispatch``: ``total_requests.index(min(...))``, the lowest rank on a tie).
- ``total_tokens``: the replica whose token count is least, ties broken by the request
  count, then the lowest rank (``DPBudget.dispatch``).
- ``follow_bootstrap_room`` routes by the PD router's bootstrap room; a request without one
  (any request of a server that is not a disaggregated prefill server) fails its assert
  (``follow_bootstrap_room_scheduler``): not modelled (refused at validation).

The load a load-aware method reads is not the replicas' state but what each replica's
scheduler last *published* (:class:`LoadPublisher`, managers/load_snapshot.py
``LoadSnapshot``), and the controller's own copy of it (:class:`DPBudget`):

1. **What is counted** (managers/scheduler_components/load_inquirer.py ``get_loads``):
   ``num_running_reqs`` = the running batch's requests (``len(running_batch.reqs)``: a
   prefill batch still in flight is in neither count, nor is the chunked request),
   ``num_waiting_reqs`` = the waiting queue; ``num_total_tokens`` = the KV pool's tokens in
   use (``num_used_tokens``: capacity less free and evictable, pool_stats_observer.py) plus
   each waiting request's ``seqlen`` (prompt plus output so far).
2. **When it is published** (managers/scheduler.py ``publish_load_snapshot``, called at the
   top of ``process_batch_result``): after every extend (prefill or mixed) batch, forced; after
   every ``load_snapshot_publish_interval``-th other batch (default 15,
   arg_groups/fields/observability.py), a counter that every forced publish resets. An idle
   scheduler (``on_idle``) publishes on every pass of its loop when fully idle, and at most
   every ``LOAD_STALL_REFRESH_S`` = 50 ms while requests wait with no batch to run.
3. **When the controller reads it** (``refresh_load_budget``): before a dispatch, at most
   once every 20 ms (``time.perf_counter()`` against ``_last_refresh_time``); the first
   dispatch always reads. ``DPBudget.update_budget`` takes a replica's snapshot only when its
   timestamp is new (``last_timestamp``); otherwise its counts are left as they are.
4. **The controller's own increments**: each dispatch adds 1 request, and for
   ``total_tokens`` the prompt's length (``len(req.input_ids)``), to the chosen replica's
   counts (``DPBudget.dispatch``, "Increment the load of that worker by one as a heuristic"),
   until a new snapshot of that replica overwrites them. So a burst inside one 20 ms read
   interval spreads by these increments over the stale snapshot, and a replica that has
   published nothing since the burst keeps its increments across reads.

Idle publishing, as modelled: a fully idle replica republishes zeros on every pass, so every
read after it went idle sees zeros with a new timestamp; the sim publishes zeros when the
replica goes idle and again when its next request reaches it (its last idle pass), which
the controller's reads cannot tell apart from a publish on every pass.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

LOAD_AWARE = ("total_requests", "total_tokens")
"""The load-aware methods SGLang 0.5.23 has (managers/load_snapshot.py ``_LOAD_AWARE_METHODS``)."""

REFRESH_INTERVAL_S = 0.02
"""``refresh_load_budget``: "Throttle to at most once per 20ms" (data_parallel_controller.py)."""

PUBLISH_INTERVAL = 15
"""``load_snapshot_publish_interval``'s default: a snapshot every 15th non-extend batch
(arg_groups/fields/observability.py)."""

STALL_REFRESH_S = 0.05
"""``LOAD_STALL_REFRESH_S`` (managers/scheduler.py): the least time between two publishes of
a scheduler whose requests wait with no batch to run (``on_idle``, not fully idle)."""


def resolve_method(method: str, disaggregation_mode: str = "null") -> str:
    """``method`` as SGLang runs it: ``auto`` is ``follow_bootstrap_room`` on a disaggregated
    prefill server, else ``round_robin`` (arg_groups/serving_hook.py
    ``handle_load_balance_method``); any other value as given."""
    if method == "auto":
        return "follow_bootstrap_room" if disaggregation_mode == "prefill" else "round_robin"
    return method


class LoadSnapshot(NamedTuple):
    """The fields of SGLang's ``LoadSnapshot`` (managers/load_snapshot.py) the dispatch reads."""

    timestamp: float
    dp_rank: int
    num_running_reqs: int
    num_waiting_reqs: int
    num_total_tokens: int


def snapshot_of(sched: Any, t: float, rank: int) -> LoadSnapshot:
    """A scheduler's load as ``get_loads`` counts it (module docstring, 1), at time ``t``."""
    kv = sched.kv
    cache = sched.cache
    used = kv.used - (cache.evictable_size if cache is not None else 0)
    waiting = sched.waiting
    return LoadSnapshot(t, rank, len(sched.running), len(waiting),
                        used + sum(r.input_len + r.output_len for r in waiting))


class SnapshotBoard:
    """The shared-memory file of snapshots (managers/load_snapshot.py
    ``ShmLoadSnapshotWriter`` / ``ShmLoadSnapshotReader``): each replica's latest, written by
    that replica's publisher only, read whole by the controller."""

    def __init__(self, n: int) -> None:
        self._latest: list[LoadSnapshot] = [LoadSnapshot(0.0, i, 0, 0, 0) for i in range(n)]
        self.writes = 0

    def write(self, snap: LoadSnapshot) -> None:
        self._latest[snap.dp_rank] = snap
        self.writes += 1

    def read_all(self) -> list[LoadSnapshot]:
        return list(self._latest)


class LoadPublisher:
    """One replica's scheduler publishing its load (module docstring, 2): owned by the replica,
    called at its loop's publish points with its own scheduler."""

    def __init__(self, board: SnapshotBoard, rank: int, interval: int = PUBLISH_INTERVAL) -> None:
        self.board = board
        self.rank = rank
        self.interval = interval
        self.counter = 0                    # ``writer.publish_counter``
        self.last_stall = -math.inf         # ``_last_stall_publish_ts``

    def publish(self, t: float, sched: Any, force: bool) -> bool:
        """``publish_load_snapshot(force)``: True when a snapshot was written."""
        if not force:
            self.counter += 1
            if self.counter < self.interval:
                return False
        self.counter = 0
        self.board.write(snapshot_of(sched, t, self.rank))
        return True

    def batch_processed(self, t: float, sched: Any, extend: bool) -> None:
        """The top of ``process_batch_result``: forced after an extend batch."""
        self.publish(t, sched, force=extend)

    def idle_pass(self, t: float, sched: Any) -> None:
        """``on_idle``: a pass that ran no batch. Fully idle: a forced publish; requests
        waiting: a forced publish at most every :data:`STALL_REFRESH_S`."""
        if sched.has_work:
            if t - self.last_stall < STALL_REFRESH_S:
                return
            self.last_stall = t
        self.publish(t, sched, force=True)


class DPBudget:
    """The controller's copy of the replicas' loads (data_parallel_controller.py ``DPBudget``)."""

    def __init__(self, n: int) -> None:
        self.total_requests = [0] * n
        self.total_tokens = [0] * n
        self.last_timestamp = [0.0] * n

    def update(self, loads: list[LoadSnapshot]) -> None:
        """``update_budget``: take each replica's snapshot whose timestamp is new."""
        for s in loads:
            if s.timestamp == self.last_timestamp[s.dp_rank]:
                continue
            self.last_timestamp[s.dp_rank] = s.timestamp
            self.total_requests[s.dp_rank] = s.num_running_reqs + s.num_waiting_reqs
            self.total_tokens[s.dp_rank] = s.num_total_tokens

    def dispatch(self, method: str, estimated_tokens: int = 0) -> int:
        """``dispatch``: the least loaded replica, then its counts incremented."""
        if method == "total_requests":
            rank = self.total_requests.index(min(self.total_requests))
        elif method == "total_tokens":
            rank = min(range(len(self.total_tokens)), key=lambda i: (self.total_tokens[i], self.total_requests[i]))
        else:
            raise ValueError(f"not a load-aware method: {method}")
        self.total_requests[rank] += 1
        self.total_tokens[rank] += estimated_tokens
        return rank


class RoundRobin:
    """``round_robin_scheduler``: the next replica of a counter."""

    method = "round_robin"
    reads_load = False

    def __init__(self, n: int) -> None:
        self.n = n
        self.counter = 0

    def choose(self, now: float, input_len: int) -> int:
        rank = self.counter
        self.counter = (self.counter + 1) % self.n
        return rank


class LoadAware:
    """``total_requests_scheduler`` / ``total_tokens_scheduler`` behind ``dispatching_with_trace``:
    read the board at most every :data:`REFRESH_INTERVAL_S`, then :meth:`DPBudget.dispatch`."""

    reads_load = True

    def __init__(self, method: str, board: SnapshotBoard, n: int) -> None:
        if method not in LOAD_AWARE:
            raise ValueError(f"not a load-aware method: {method}")
        self.method = method
        self.board = board
        self.budget = DPBudget(n)
        self.last_refresh = -math.inf   # ``_last_refresh_time``: the first dispatch reads
        self.refreshes = 0

    def refresh(self, now: float) -> None:
        """``refresh_load_budget``."""
        if now - self.last_refresh < REFRESH_INTERVAL_S:
            return
        self.last_refresh = now
        self.refreshes += 1
        self.budget.update(self.board.read_all())

    def choose(self, now: float, input_len: int) -> int:
        self.refresh(now)
        return self.budget.dispatch(self.method, input_len if self.method == "total_tokens" else 0)


def make_dispatcher(method: str, n: int, board: SnapshotBoard) -> RoundRobin | LoadAware:
    """The dispatcher of a resolved method (:func:`resolve_method`)."""
    if method == "round_robin":
        return RoundRobin(n)
    return LoadAware(method, board, n)
