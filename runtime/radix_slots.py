"""The device KV slots of the radix prefix cache's nodes: what SGLang keeps in
``TreeNode.value`` (sglang 0.5.23 mem_cache/radix_cache.py).

One owner per piece of state: the scheduler's :class:`sim.radix_cache.RadixCache` owns which
tokens are cached (the tree, its locks, LRU and eviction, the same in the simulator); this
module owns only the slot indices of each node, keyed by node, and moves slots between the
request rows of :class:`runtime.kv_cache.ReqToTokenPool` and the tree as the tree tells it
(:class:`sim.radix_cache.NodeValues`):

- a request inserts its prefix (the scheduler's ``_checkpoint``, SGLang
  ``cache_unfinished_req`` / ``cache_finished_req``): the row's slots of the new leaf's
  positions become the leaf's value; the row's own copies of tokens the tree already had are
  freed and the row points at the tree's (``ReqToTokenPool.to_tree``);
- a node splits (SGLang ``_split_node``): its value splits at the same place;
- a node is evicted (SGLang ``evict``): its slots go back to the free list;
- a request admitted with a cached prefix (SGLang ``match_prefix`` -> ``device_indices``):
  its row's first positions point at the values along the matched path (:meth:`prefix`).

With KV pages (page_size > 1) every node's key, and so its value, is whole pages (the tree
cuts keys to pages: sim/radix_cache.py ``_aligned``); a request's partial last page never
enters the tree and stays in its row's own slots (the scheduler's ``_checkpoint`` stores
``len(tokens) // page_size * page_size`` positions).

So the device pool holds what the scheduler's KV ledger counts, ``tree`` included
(sim/kv_ledger.py ``to_tree``, ``release``, ``evicted`` make the same moves in counts).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from specsched.runtime.kv_cache import ReqToTokenPool
from specsched.sim.radix_cache import TreeNode


class TreeSlots:
    """Each tree node's KV slots (a device int64 tensor per node id), kept in step with the
    tree (set as the tree's :attr:`sim.radix_cache.RadixCache.values`).

    Args:
        pool: the device pool whose slots the nodes hold.
        row_of: the pool row of a request id (the inserting request's row).
    """

    def __init__(self, pool: ReqToTokenPool, row_of: Callable[[object], int]) -> None:
        self.pool = pool
        self.row_of = row_of
        self._values: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        """Slots the tree's nodes hold."""
        return sum(v.numel() for v in self._values.values())

    def prefix(self, node: TreeNode) -> torch.Tensor:
        """The slots of the path from the root to ``node`` (``[node.depth]``), in position order."""
        parts = []
        while node.parent is not None:
            parts.append(self._values[node.id])
            node = node.parent
        if not parts:
            return torch.zeros(0, dtype=torch.int64, device=self.pool.req_to_token.device)
        return torch.cat(parts[::-1])

    # sim.radix_cache.NodeValues
    def inserted(self, owner: object, node: TreeNode, present: int) -> None:
        row = self.row_of(owner)
        new = node.parent is not None and node.id not in self._values
        path = self.prefix(node.parent if new else node)   # the tree's slots before this insert
        value = self.pool.to_tree(row, present, node.depth, path)
        if new:
            self._values[node.id] = value

    def split(self, upper: TreeNode, lower: TreeNode) -> None:
        v = self._values.pop(lower.id)
        k = len(upper.key)
        self._values[upper.id] = v[:k]
        self._values[lower.id] = v[k:]

    def evicted(self, node: TreeNode) -> None:
        v = self._values.pop(node.id)
        self.pool.free_tree(v, v.numel())

    def clear(self) -> None:
        """Forget every node (a new pass starts with an empty tree): their slots return to
        the pool's free list."""
        for v in self._values.values():
            self.pool.free_tree(v, v.numel())
        self._values.clear()
