"""A radix prefix cache over token ids: SGLang's ``RadixCache`` (mem_cache/radix_cache.py)
without the KV slot indices, which the simulator does not need.

Requests whose prompts share a prefix share its KV: a finished (or checkpointed) request's
tokens are inserted into the tree; a new request matches its longest cached prefix and
only extends the rest. A node that no running request holds (``lock_ref == 0``) is
*evictable*: its tokens still occupy the KV pool but count as available to the admission
budget (SGLang ``PrefillBudget._available_and_evictable``) and are evicted leaf first, least
recently used first, when the pool needs room (``RadixCache.evict``).

Differences from SGLang, on purpose: the access clock is a counter (deterministic, no wall
time); values are lengths only. Page size > 1 aligns keys to whole pages as SGLang does.

Slot values live with whoever holds the KV, not here: SGLang's nodes carry ``value`` (the
KV slot indices of their tokens); the tree here stays the one owner of *which* tokens are
cached, and an optional :class:`NodeValues` listener (the runtime's
:class:`runtime.radix_slots.TreeSlots`) is told of every change that moves slots: a node
inserted (whose tokens' slots the inserting request hands over), a node split (its value
splits at the same place: SGLang ``RadixCache._split_node``), a node evicted (its slots go
back to the free list: SGLang ``RadixCache.evict`` -> ``token_to_kv_pool_allocator.free``).
The simulator sets none and counts slots in the KV ledger only.

Invariants (checked by tests/test_radix_cache.py):
- INV-RADIX-SIZE: ``evictable_size + protected_size == total_size`` (tokens in the tree).
- INV-RADIX-LOCK: eviction never removes a node that a lock holds, nor its ancestors.
- INV-RADIX-MATCH: after ``insert(t)``, ``match_prefix(t)`` returns the page-aligned length of t.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count
from typing import Protocol

import numpy as np


class NodeValues(Protocol):
    """What keeps the KV slots of the tree's nodes (the values SGLang's ``TreeNode.value``
    holds), notified by :class:`RadixCache` as the tree changes."""

    def inserted(self, owner: object, node: TreeNode, present: int) -> None:
        """``owner`` (what the caller passed to :meth:`RadixCache.insert_from`, a request
        id) inserted the path ending at ``node``; its first ``present`` tokens were there
        already (the owner's own copies of those are duplicates), the rest is a new leaf
        ``node`` made of the owner's slots for positions ``present .. node.depth - 1``."""

    def split(self, upper: TreeNode, lower: TreeNode) -> None:
        """``upper`` took the first ``len(upper.key)`` tokens of ``lower``'s edge."""

    def evicted(self, node: TreeNode) -> None:
        """``node`` left the tree: its slots are free."""


class TreeNode:
    """One edge of the tree: ``key`` (token ids, int64 array) and its subtree.

    Attributes:
        key: the token ids on the edge from the parent (length >= 1, whole pages).
        children: child nodes by their first page (first token id when page_size is 1).
        parent: the parent node (None for the root).
        lock_ref: running requests holding this node (and so every ancestor).
        last_access: logical time of the last match or insert through this node.
        id: creation order (breaks LRU ties deterministically).
        depth: tokens on the path from the root to the end of this edge.
    """

    __slots__ = ("key", "children", "parent", "lock_ref", "last_access", "id", "depth")

    def __init__(self, key: np.ndarray, parent: TreeNode | None, node_id: int) -> None:
        self.key = key
        self.depth = len(key) + (parent.depth if parent is not None else 0)
        self.children: dict[object, TreeNode] = {}
        self.parent = parent
        self.lock_ref = 0
        self.last_access = 0
        self.id = node_id


class RadixCache:
    """The prefix tree and its evictable / protected token counts.

    Args:
        page_size: KV page size (tokens); keys are cut to whole pages.

    Attributes:
        evictable_size: tokens in nodes no lock holds (can be evicted).
        protected_size: tokens in locked nodes.
        values: the :class:`NodeValues` listener that keeps each node's KV slots (None: no
            slots kept, the simulator).
    """

    def __init__(self, page_size: int = 1) -> None:
        self.values: NodeValues | None = None
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.page_size = page_size
        self._ids = count()
        self._clock = 0
        self.root = TreeNode(np.zeros(0, dtype=np.int64), None, next(self._ids))
        self.root.lock_ref = 1  # the root is never evicted
        self.evictable_size = 0
        self.protected_size = 0
        # nodes without children (id -> node): eviction looks at these only, not the whole
        # tree (a long prompt checkpointed chunk by chunk is a chain of hundreds of nodes)
        self._leaves: dict[int, TreeNode] = {}

    # ----------------------------------------------------------------- helpers
    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _aligned(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        a = np.asarray(tokens, dtype=np.int64)
        n = len(a) // self.page_size * self.page_size
        return a[:n]

    def _child_key(self, key: np.ndarray) -> object:
        return int(key[0]) if self.page_size == 1 else tuple(key[: self.page_size].tolist())

    def _match_len(self, a: np.ndarray, b: np.ndarray) -> int:
        """Common prefix length of a and b in whole pages."""
        n = min(len(a), len(b))
        if n == 0:
            return 0
        neq = a[:n] != b[:n]
        m = int(neq.argmax())  # the first difference (0 when there is none: checked below)
        if not neq[m]:
            m = n
        return m // self.page_size * self.page_size

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Split ``child``'s edge at ``at`` tokens; returns the new upper node."""
        upper = TreeNode(child.key[:at], child.parent, next(self._ids))
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        child.parent.children[self._child_key(child.key)] = upper
        child.key = child.key[at:]
        child.parent = upper
        upper.children[self._child_key(child.key)] = child
        if self.values is not None:
            self.values.split(upper, child)
        return upper

    # ------------------------------------------------------------------ public
    def match_prefix(self, tokens: Sequence[int] | np.ndarray) -> tuple[int, TreeNode]:
        """The longest cached prefix of ``tokens``.

        Returns:
            (matched tokens, page-aligned; the node where the match ends). The nodes on the
            path count as used now (LRU). A match ending inside an edge splits it, as
            SGLang's ``_match_prefix_helper`` does.
        """
        key = self._aligned(tokens)
        t = self._tick()
        node = self.root
        node.last_access = t
        matched = 0
        while matched < len(key):
            child = node.children.get(self._child_key(key[matched:]))
            if child is None:
                break
            m = self._match_len(child.key, key[matched:])
            child.last_access = t
            if m < len(child.key):
                if m > 0:
                    node = self._split(child, m)
                    matched += m
                break
            node = child
            matched += m
        return matched, node

    def insert(self, tokens: Sequence[int] | np.ndarray) -> int:
        """Add ``tokens`` (page-aligned) to the tree. New tokens are evictable.

        Returns:
            how many leading tokens were already in the tree (SGLang ``InsertResult.prefix_len``:
            the caller frees its own copies of those).
        """
        return self.insert_from(tokens)[0]

    def insert_from(self, tokens: Sequence[int] | np.ndarray, start: TreeNode | None = None,
                    start_len: int = 0, owner: object = None) -> tuple[int, TreeNode]:
        """:meth:`insert`, also returning the node where the inserted sequence ends (what
        ``match_prefix(tokens)`` would return right after).

        ``start``: a node whose path from the root is ``tokens[:start_len]`` (a request's
        held prefix, which cannot be evicted while held): the walk starts there instead of
        at the root; the nodes above it count as used now, as a walk from the root would
        make them. A ``start`` whose path is not ``start_len`` tokens long is ignored.

        ``owner``: who holds the KV of ``tokens`` (a request id), told to :attr:`values`
        (SGLang ``RadixCache.insert`` with the request's slot indices as ``value``).
        """
        key = self._aligned(tokens)
        t = self._tick()
        node, done = self.root, 0
        if start is not None and 0 < start_len <= len(key) and start.depth == start_len:
            node, done = start, start_len
            n = start
            while n is not self.root:
                n.last_access = t
                n = n.parent
        node.last_access = t
        self.root.last_access = t
        while done < len(key):
            child = node.children.get(self._child_key(key[done:]))
            if child is None:
                new = TreeNode(key[done:].copy(), node, next(self._ids))
                new.last_access = t
                node.children[self._child_key(new.key)] = new
                self._leaves.pop(node.id, None)
                self._leaves[new.id] = new
                self.evictable_size += len(new.key)
                if self.values is not None:
                    self.values.inserted(owner, new, done)
                return done, new
            m = self._match_len(child.key, key[done:])
            child.last_access = t
            if m < len(child.key):
                child = self._split(child, m)
            node = child
            done += m
        if self.values is not None:
            self.values.inserted(owner, node, done)
        return done, node

    def inc_lock_ref(self, node: TreeNode) -> int:
        """A running request holds ``node`` (and its ancestors). Returns the change in
        evictable tokens (<= 0)."""
        delta = 0
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            node = node.parent
        return delta

    def move_lock(self, old: TreeNode | None, new: TreeNode) -> None:
        """A request that holds ``old`` (None: nothing) holds ``new`` instead:
        :meth:`inc_lock_ref` of ``new`` then :meth:`dec_lock_ref` of ``old``, with the same
        result; when ``new`` is ``old`` or below it (a chunked prefill's next checkpoint)
        only the edges between them change."""
        if old is None:
            self.inc_lock_ref(new)
            return
        n = new
        while n.depth > old.depth:
            n = n.parent
        if n is not old:
            self.inc_lock_ref(new)
            self.dec_lock_ref(old)
            return
        n = new
        while n is not old:
            if n.lock_ref == 0:
                self.evictable_size -= len(n.key)
                self.protected_size += len(n.key)
            n.lock_ref += 1
            n = n.parent

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Release a hold taken by :meth:`inc_lock_ref`. Returns the change in evictable
        tokens (>= 0).

        Raises:
            ValueError: the node is not locked (a scheduler bug).
        """
        delta = 0
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError("dec_lock_ref on an unlocked node")
            if node.lock_ref == 1:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
                delta += len(node.key)
            node.lock_ref -= 1
            node = node.parent
        return delta

    def evict(self, num_tokens: int) -> int:
        """Evict least recently used unlocked leaves until ``num_tokens`` are freed or
        nothing evictable is left (SGLang ``RadixCache.evict``, LRU strategy).

        Returns:
            tokens evicted (may exceed ``num_tokens`` by part of a leaf: whole nodes go).
        """
        heap = [(n.last_access, n.id, n) for n in self._evictable_leaves()]
        heapq.heapify(heap)
        evicted = 0
        while evicted < num_tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[self._child_key(leaf.key)]
            del self._leaves[leaf.id]
            if parent is not self.root and not parent.children:
                self._leaves[parent.id] = parent
            evicted += len(leaf.key)
            self.evictable_size -= len(leaf.key)
            if self.values is not None:
                self.values.evicted(leaf)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, parent.id, parent))
        return evicted

    def _evictable_leaves(self) -> list[TreeNode]:
        return [n for n in self._leaves.values() if n.lock_ref == 0]

    @property
    def total_size(self) -> int:
        """Tokens stored in the tree."""
        total, stack = 0, list(self.root.children.values())
        while stack:
            n = stack.pop()
            total += len(n.key)
            stack.extend(n.children.values())
        return total

    def dfs_weight_order(self, nodes: Sequence[TreeNode]) -> list[int]:
        """Indices of ``nodes`` (each request's matched node) in SGLang's dfs-weight order
        (mem_cache/base_prefix_cache.py ``_dfs_weight_order``): walk the tree depth first,
        heavier subtrees (more waiting requests below) first; a node's own requests come
        after its subtree's."""
        at: dict[int, list[int]] = {}
        for i, n in enumerate(nodes):
            at.setdefault(id(n), []).append(i)
        weight: dict[int, int] = {}
        # iterative post-order for the weights (trees can be deep)
        stack: list[tuple[TreeNode, bool]] = [(self.root, False)]
        while stack:
            n, seen = stack.pop()
            if seen:
                weight[id(n)] = len(at.get(id(n), ())) + sum(weight[id(c)] for c in n.children.values())
            else:
                stack.append((n, True))
                stack.extend((c, False) for c in n.children.values())
        order: list[int] = []
        walk: list[tuple[TreeNode, bool]] = [(self.root, False)]
        while walk:
            n, seen = walk.pop()
            if seen:
                order.extend(at.get(id(n), ()))
                continue
            walk.append((n, True))
            kids = sorted(n.children.values(), key=lambda c: (-weight[id(c)], c.id))
            walk.extend((c, False) for c in reversed(kids))
        if len(order) < len(nodes):  # nodes evicted since they were matched: last, in order
            seen = set(order)
            order.extend(i for i in range(len(nodes)) if i not in seen)
        return order
