"""The KV token pool: how many KV slots (tokens) are free.

SGLang's ``token_to_kv_pool_allocator`` (mem_cache/allocator.py) hands out token slots; the
radix cache can make some evictable. The reference runs flush the radix cache before each
request, so no prefix is ever reused and nothing is evictable: the pool is a counter.
"""

from __future__ import annotations


class KVPoolExhausted(RuntimeError):
    """Raised when an allocation exceeds the free tokens (a scheduler bug, never user input)."""


class KVPool:
    """A pool of ``capacity`` KV token slots.

    Args:
        capacity: tokens (SGLang's max_total_num_tokens), >= 1.
    """

    __slots__ = ("capacity", "used", "peak")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"KV capacity must be >= 1 token, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self.peak = 0

    @property
    def available(self) -> int:
        """Free token slots."""
        return self.capacity - self.used

    def alloc(self, n: int) -> None:
        """Take ``n`` >= 0 slots. Raises KVPoolExhausted if fewer are free."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} tokens")
        if n > self.available:
            raise KVPoolExhausted(f"need {n} KV tokens, {self.available} free of {self.capacity}")
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    def free(self, n: int) -> None:
        """Return ``n`` >= 0 slots."""
        if n < 0 or n > self.used:
            raise ValueError(f"cannot free {n} tokens ({self.used} in use)")
        self.used -= n
