"""Waiting-queue order (SGLang's SchedulePolicy, managers/schedule_policy.py ``calc_priority``).

Each order is a class with the interface a user-written one has (docs/policies.md):
``from_server(server, seed=0, **params)`` builds it for one run; ``order(waiting, ctx)``
returns the waiting requests in admission order (a new list holding the same requests).
``waiting`` is in queue-entry order (arrivals, then re-queued retractions), so a stable
sort keeps SGLang's ``wait_queue_entry_time`` tie-break. Except for an order whose class
sets ``sorts_queue_in_place`` (the shipped lpm, dfs-weight, hrrn and routing-key): SGLang
sorts its waiting queue in place (``SchedulePolicy.calc_priority``) and those have no
entry-time tie-break, so the Scheduler keeps the queue in the order they returned, and the next pass
hands them that order with later arrivals and re-queued requests behind it.

Shipped (SGLang's names):

- ``fcfs``: queue order; with priority scheduling, by priority then entry order
  (``_sort_by_priority_and_fcfs``).
- ``lof``: longest output (max_new_tokens) first, by priority first when enabled.
- ``random``: a seeded shuffle.
- ``shortest-prefill-first``: least uncached prefill work first
  (``_sort_by_shortest_prefill``: max(1, prompt + output - cached)), duplicates of a
  prefix another waiting request is about to cache last.
- ``lpm``: longest cached prefix first (``_sort_by_longest_prefix``), with the same
  in-batch deprioritisation; falls back to fcfs above 128 waiting
  (``WAITING_QUEUE_PREFIX_MATCH_MAX``) and without a prefix cache.
- ``dfs-weight``: depth-first over the radix tree, heavier subtrees first
  (``_sort_by_dfs_weight``); fcfs without a prefix cache.
- ``hrrn``: highest response ratio next with token-based aging (``_sort_by_hrrn``): by
  descending (prefill tokens processed since the request entered the queue) / (its uncached
  prompt tokens), requests with nothing to prefill first, the in-batch deprioritised last,
  ties by rid; fcfs above 128 waiting and without a prefix cache, as lpm.
- ``routing-key``: requests whose routing key the running batch holds first, the most held
  key first (``_sort_by_routing_key``); see :class:`RoutingKey`.
"""

from __future__ import annotations

import random as _random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from specsched.sim.request import Req

if TYPE_CHECKING:
    from specsched.sim.radix_cache import RadixCache

WAITING_QUEUE_PREFIX_MATCH_MAX = 128
"""lpm and hrrn sort like fcfs when more requests than this wait (SGLang)."""
FCFS_ABOVE_128 = frozenset({"lpm", "hrrn"})
"""The orders ``_determine_active_policy`` turns into fcfs above 128 waiting."""
CACHE_AWARE = frozenset({"lpm", "dfs-weight", "hrrn", "shortest-prefill-first"})
"""SGLang's ``CacheAwarePolicy`` members: ``calc_priority`` matches every waiting request."""
IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD = 32
"""A request with at most this many cached tokens is checked against the other waiting ones."""
IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 32
"""... and goes last if it shares at least this many tokens with an earlier waiting request."""
WAITING_PREFIX_REFRESH_INTERVAL = 32
"""A cache-agnostic order refreshes the waiting prefixes' LRU time every this many passes
(sglang 0.5.23 schedule_policy.py ``WAITING_PREFIX_REFRESH_INTERVAL``)."""

REQUIRED_METHODS = ("from_server", "order")
"""What a class named by ``server.schedule_policy`` must have."""


@dataclass(frozen=True)
class QueueContext:
    """What an order sees besides the waiting requests at one prefill pass.

    Attributes:
        running: the running batch (read only).
        prefix_cache: the radix prefix cache, or None when it is off. Each waiting
            request's ``cached_len`` (tokens it would reuse) and ``last_node`` were set by
            matching it just before this call.
        processed_tokens: extend (prefill) tokens of every forward launched so far, a
            counter that only grows (sglang 0.5.23 ``Scheduler.processed_tokens_counter``,
            what ``calc_priority`` receives as ``processed_tokens``). Each waiting request's
            ``arrival_processed_tokens`` is the counter when it entered the queue.
    """

    running: Sequence[Req] = ()
    prefix_cache: RadixCache | None = field(default=None)
    processed_tokens: int = 0


class QueueOrder(Protocol):
    """A waiting-queue order."""

    name: str

    @classmethod
    def from_server(cls, server: Any, seed: int = 0, **params: Any) -> QueueOrder:
        """A fresh instance for one run."""
        ...

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        """The waiting requests in admission order (a new list of the same requests)."""
        ...


class QueueOrderBase:
    """Convenience base for a user order: subclass it and write ``order``.

    ``from_server(server, seed, **params)`` calls ``cls(**params)``, keeps the server
    arguments as ``self.server`` and a seeded ``random.Random`` as ``self.rng``.
    """

    name: ClassVar[str] = "custom"
    server: Any
    rng: _random.Random

    @classmethod
    def from_server(cls, server: Any, seed: int = 0, **params: Any) -> QueueOrderBase:
        obj = cls(**params)
        obj.server = server
        obj.rng = _random.Random(seed)
        return obj

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        raise NotImplementedError


def unset_priority(low_first: bool) -> int:
    """The priority SGLang gives a request sent without one under priority scheduling, the
    lowest there is: ``sys.maxsize`` when lower values go first, else ``-sys.maxsize - 1``
    (sglang 0.5.23 managers/scheduler.py ``Scheduler._set_or_validate_priority``, as the
    request enters the queue). The queue's sort and priority preemption read it."""
    return sys.maxsize if low_first else -sys.maxsize - 1


def _priority_key(priority_first: bool, low_first: bool):
    sign = 1 if low_first else -1
    default = unset_priority(low_first)

    def key(r: Req) -> int:
        if not priority_first:
            return 0
        p = r.priority if r.priority is not None else default
        return p * sign

    return key


class Fcfs:
    """First come, first served (with priority scheduling: priority, then entry order)."""

    name = "fcfs"

    def __init__(self, priority: bool = False, low_priority_values_first: bool = False) -> None:
        self.priority = priority
        self._key = _priority_key(priority, low_priority_values_first)

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> Fcfs:
        return cls(getattr(server, "enable_priority_scheduling", False),
                   getattr(server, "schedule_low_priority_values_first", False))

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        return sorted(waiting, key=self._key) if self.priority else list(waiting)


class Lof(Fcfs):
    """Longest output first (``_sort_by_longest_output``: ``-sampling_params.max_new_tokens``,
    0 for a request that asked no output: ``Req.admission_max_new``), by priority first when
    enabled."""

    name = "lof"

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        key = self._key
        return sorted(waiting, key=lambda r: (key(r), -r.admission_max_new))


class RandomOrder:
    """A seeded shuffle (``_sort_randomly``)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self._rng = _random.Random(seed)

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> RandomOrder:
        return cls(seed)

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        out = list(waiting)
        self._rng.shuffle(out)
        return out


def in_batch_deprioritized(waiting: Sequence[Req], page_size: int = 1) -> set[int]:
    """Rids SGLang's ``_compute_prefix_matches`` defers: a request that found at most 32
    cached tokens but shares >= 32 tokens with an earlier waiting request (which will
    cache them), so only one of a cold group prefills its shared prefix at a time."""
    from specsched.sim.radix_cache import RadixCache

    tree = RadixCache(page_size)
    out: set[int] = set()
    for r in waiting:
        if r.tokens is None or r.cached_len > IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD:
            continue
        full = r.tokens
        if tree.match_prefix(full)[0] >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD:
            out.add(r.rid)
        else:
            tree.insert(full)
    return out


def prefill_work(r: Req) -> int:
    """Uncached tokens a (re-)prefill must compute: max(1, prompt + output - cached)."""
    return max(1, r.fill_len - r.cached_len)


class ShortestPrefillFirst:
    """Least uncached prefill work first (sglang 0.5.23 ``_sort_by_shortest_prefill``)."""

    name = "shortest-prefill-first"

    def __init__(self, page_size: int = 1) -> None:
        self.page_size = page_size

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> ShortestPrefillFirst:
        return cls(getattr(server, "page_size", 1))

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        dep = in_batch_deprioritized(waiting, self.page_size) if ctx.prefix_cache is not None else set()
        return sorted(waiting, key=lambda r: (r.rid in dep, prefill_work(r)))


def shortest_prefill_chunk_limit(chunked: Req, waiting: Sequence[Req], budget: int, page_size: int) -> int | None:
    """Cap the in-flight chunk to leave room for shorter waiting requests (sglang 0.5.23
    ``SchedulePolicy.shortest_prefill_chunk_limit``, shortest-prefill-first only).

    ``waiting`` in policy order; ``budget`` the pass's chunk budget (tokens). Returns the
    page-aligned cap, or None when nothing shorter waits or the budget is under 2 pages.
    """
    if budget < 2 * page_size:
        return None
    remaining = chunked.extend_remaining
    reserved = 0
    for r in waiting:
        work = prefill_work(r)
        charge = -(-work // page_size) * page_size
        if work >= remaining or reserved + charge > budget - page_size:
            break
        reserved += charge
    if not reserved:
        return None
    return (budget - reserved) // page_size * page_size


class _PrefixMatchingOrder:
    """What SGLang's prefix-matching orders (lpm, hrrn) share (managers/schedule_policy.py
    ``SchedulePolicy.calc_priority``): without a prefix cache the policy is FCFS
    (``_validate_and_adjust_policy``; with priority scheduling, by priority then entry
    order); above 128 waiting it is fcfs over the queue as the last sort left it
    (``_determine_active_policy``, ``sorts_queue_in_place``); otherwise the waiting requests
    are sorted by the subclass's ``_sort``, with the in-batch deprioritisation of
    ``_compute_prefix_matches`` (:func:`in_batch_deprioritized`)."""

    sorts_queue_in_place: ClassVar[bool] = True

    def __init__(self, page_size: int = 1, fcfs: Fcfs | None = None) -> None:
        self.page_size = page_size
        self._fcfs = fcfs if fcfs is not None else Fcfs()

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> _PrefixMatchingOrder:
        return cls(getattr(server, "page_size", 1), Fcfs.from_server(server))

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        if ctx.prefix_cache is None:
            return self._fcfs.order(waiting, ctx)
        if len(waiting) > WAITING_QUEUE_PREFIX_MATCH_MAX:
            return list(waiting)
        return self._sort(waiting, ctx, in_batch_deprioritized(waiting, self.page_size))

    def _sort(self, waiting: list[Req], ctx: QueueContext, deprioritized: set[int]) -> list[Req]:
        raise NotImplementedError


class Lpm(_PrefixMatchingOrder):
    """Longest cached prefix first (``_sort_by_longest_prefix``); fcfs above 128 waiting
    or without a prefix cache (``_determine_active_policy``, ``_validate_and_adjust_policy``).

    Above 128 waiting, fcfs means the queue as it stands (``calc_priority`` leaves it
    unsorted): the order the last lpm sort left, then later arrivals. Equal prefixes keep
    that order too (``sorts_queue_in_place``). Without a prefix cache the policy *is* FCFS
    (``_validate_and_adjust_policy``), so priority scheduling's order applies
    (``_sort_by_priority_and_fcfs``)."""

    name = "lpm"

    def _sort(self, waiting: list[Req], ctx: QueueContext, deprioritized: set[int]) -> list[Req]:
        return sorted(waiting, key=lambda r: float("inf") if r.rid in deprioritized else -r.cached_len)


class DfsWeight:
    """Depth-first over the radix tree, heavier subtrees first (``_sort_by_dfs_weight``);
    fcfs without a prefix cache (``_validate_and_adjust_policy``; with priority scheduling,
    by priority then entry order). Requests at one node keep the queue's order, which is the
    last pass's (``sorts_queue_in_place``)."""

    name = "dfs-weight"
    sorts_queue_in_place: ClassVar[bool] = True

    def __init__(self, fcfs: Fcfs | None = None) -> None:
        self._fcfs = fcfs if fcfs is not None else Fcfs()

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> DfsWeight:
        return cls(Fcfs.from_server(server))

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        tree = ctx.prefix_cache
        if tree is None:
            return self._fcfs.order(waiting, ctx)
        idx = tree.dfs_weight_order([r.last_node if r.last_node is not None else tree.root for r in waiting])
        return [waiting[i] for i in idx]


def uncached_prompt(r: Req) -> int:
    """Prompt tokens a request must still prefill: prompt minus its cached prefix, at least 0
    (sglang 0.5.23 ``SchedulePolicy._uncached_len``: the prompt alone, not the output a
    retracted request re-prefills, so a retracted request whose prompt is all cached has none)."""
    n = r.input_len - r.cached_len
    return n if n > 0 else 0


def hrrn_key(r: Req, processed_tokens: int, deprioritized: set[int]) -> tuple[float, int]:
    """Sort key of ``hrrn`` (sglang 0.5.23 ``SchedulePolicy._sort_by_hrrn``).

    The response ratio of classic HRRN, 1 + waited / service time, measured in tokens: the
    wait is the prefill tokens the server processed since the request entered the queue,
    the service time its uncached prompt. Higher ratio first; a request with no uncached
    prompt first of all, one the in-batch check defers last; ties by rid."""
    if r.rid in deprioritized:
        return (float("inf"), r.rid)
    work = uncached_prompt(r)
    if work == 0:
        return (float("-inf"), r.rid)
    waited = processed_tokens - r.arrival_processed_tokens
    return (-(waited if waited > 0 else 0) / work, r.rid)


class Hrrn(_PrefixMatchingOrder):
    """Highest response ratio next, aged in prefill tokens (sglang 0.5.23
    managers/schedule_policy.py ``SchedulePolicy._sort_by_hrrn``, ``CacheAwarePolicy.HRRN``).

    A short prompt wins while everyone has waited about as long; a long prompt's ratio grows
    with every token the server prefills for others, so it is not starved. Cache-aware, as lpm:
    the in-batch deprioritisation of ``_compute_prefix_matches``; fcfs (the queue as the last
    sort left it, ``sorts_queue_in_place``) above 128 waiting (``_determine_active_policy``),
    and fcfs with priority scheduling's order without a prefix cache
    (``_validate_and_adjust_policy`` turns the policy into FCFS).

    SGLang's rids are random hex strings, so its rid tie-break is arbitrary; the run's rids
    count up in arrival order, which makes equal ratios keep arrival order here."""

    name = "hrrn"

    def _sort(self, waiting: list[Req], ctx: QueueContext, deprioritized: set[int]) -> list[Req]:
        done = ctx.processed_tokens
        return sorted(waiting, key=lambda r: hrrn_key(r, done, deprioritized))


class RoutingKey:
    """Routing-key affinity (sglang 0.5.23 managers/schedule_policy.py
    ``SchedulePolicy._sort_by_routing_key``, ``CacheAgnosticPolicy.ROUTING_KEY``): count the
    routing keys of the running batch; when it holds any, sort the waiting queue by (key
    held: first; then more running requests with that key first; then the key's text), the
    requests whose key the batch does not hold (or that have none) after them, by their key's
    text (no key as ""). Python's sort is stable, so one key's requests keep their queue
    order. SGLang sorts the queue in place and skips the sort when the batch holds no key,
    so the queue keeps the last sort's order with later arrivals behind it
    (``sorts_queue_in_place``). Priority scheduling does not enter this order. Requests get
    their keys from ``workload.routing_keys``; without keys the order is the queue's."""

    name = "routing-key"
    sorts_queue_in_place: ClassVar[bool] = True

    @classmethod
    def from_server(cls, server: Any, seed: int = 0) -> RoutingKey:
        return cls()

    def order(self, waiting: list[Req], ctx: QueueContext) -> list[Req]:
        held = Counter(r.routing_key for r in ctx.running if r.routing_key)
        if not held:
            return waiting

        def key(r: Req) -> tuple[int, int, str]:
            k = r.routing_key
            if k and k in held:
                return (0, -held[k], k)
            return (1, 0, k or "")

        return sorted(waiting, key=key)


SHIPPED: dict[str, type] = {
    "fcfs": Fcfs,
    "lof": Lof,
    "random": RandomOrder,
    "shortest-prefill-first": ShortestPrefillFirst,
    "lpm": Lpm,
    "dfs-weight": DfsWeight,
    "hrrn": Hrrn,
    "routing-key": RoutingKey,
}
"""Shipped orders by ``server.schedule_policy`` name (SGLang's names)."""


def checked_order(order: Any, waiting: Any, spec: str) -> list[Req]:
    """A user order's answer, checked: waiting requests, each at most once (leaving some
    out holds them back for this pass). SGLang sorts its waiting queue in place
    (``SchedulePolicy.calc_priority``), so it cannot admit a request twice or one that is
    not waiting; a user order that returned one corrupted the KV ledger mid-run
    ('stretch KV: ... !='), and one that returned None raised a TypeError.

    Raises:
        ConfigError: ``server.schedule_policy`` named, with what ``order`` returned.
    """
    from specsched.sim.errors import ConfigError

    def bad(what: str) -> ConfigError:
        return ConfigError("<scenario>", "server.schedule_policy", spec,
                           f"order() must return waiting requests, each at most once; it returned {what}")

    if order is None or isinstance(order, (str, bytes, dict)):
        raise bad(type(order).__name__)
    try:
        out = list(order)
    except TypeError:
        raise bad(f"a {type(order).__name__}") from None
    ids = {id(r) for r in waiting}
    seen: set[int] = set()
    for r in out:
        if id(r) not in ids:
            raise bad(f"{r!r:.60}, which is not waiting")
        if id(r) in seen:
            raise bad(f"request {getattr(r, 'rid', r)} twice")
        seen.add(id(r))
    return out


def make_queue_order(server: Any, seed: int = 0, scenario_path: str | None = None) -> QueueOrder:
    """Build the order named by ``server.schedule_policy`` (a shipped name or a user class
    ``module.path:Class`` / ``file.py:Class``; ``schedule_policy_params`` as keywords), through
    :func:`sim.policy_loader.make_named_policy`, as the admission-delay policy is built.

    Raises:
        ConfigError: the class does not import, lacks the interface, or rejects the params.
    """
    from specsched.sim.policy_loader import make_named_policy

    return make_named_policy(server, "schedule_policy", SHIPPED, REQUIRED_METHODS, "orders", seed, scenario_path)

