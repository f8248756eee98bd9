"""The radix prefix cache alone (SGLang mem_cache/radix_cache.py semantics): match, insert,
lock references, LRU eviction of unlocked leaves, evictable token counts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from specsched.sim.radix_cache import RadixCache


def test_match_insert_split():
    c = RadixCache()
    assert c.insert([1, 2, 3]) == 0
    assert c.insert([1, 2, 4, 5]) == 2  # shares [1, 2]: the edge splits
    assert c.total_size == 5 and c.evictable_size == 5
    n, node = c.match_prefix([1, 2, 3, 9])
    assert n == 3 and node.key.tolist() == [3]
    n, node = c.match_prefix([1, 2, 4])
    assert n == 3 and node.key.tolist() == [4]  # a match ending inside [4, 5] splits it
    assert c.match_prefix([7])[0] == 0


def test_page_size_aligns_matches_to_whole_pages():
    c = RadixCache(page_size=4)
    c.insert(list(range(10)))  # 8 tokens stored (2 pages)
    assert c.total_size == 8
    assert c.match_prefix(list(range(6)) + [99, 99])[0] == 4
    assert c.match_prefix(list(range(12)))[0] == 8


def test_locked_prefix_is_protected_and_not_evicted():
    c = RadixCache()
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 7, 8])
    _, node = c.match_prefix([1, 2, 3, 4])
    assert c.inc_lock_ref(node) == -4  # [1, 2] and [3, 4] become protected
    assert (c.evictable_size, c.protected_size) == (2, 4)
    assert c.evict(100) == 2  # only the unlocked leaf [7, 8]
    assert c.match_prefix([1, 2, 3, 4])[0] == 4
    assert c.dec_lock_ref(node) == 4
    assert c.evict(100) == 4 and c.total_size == 0


def test_lru_leaf_goes_first():
    c = RadixCache()
    c.insert([1, 1])
    c.insert([2, 2])
    c.insert([3, 3])
    c.match_prefix([1, 1])  # [1, 1] used most recently, [2, 2] least
    assert c.evict(1) == 2
    assert c.match_prefix([2, 2])[0] == 0
    assert c.match_prefix([1, 1])[0] == 2 and c.match_prefix([3, 3])[0] == 2


def test_evicting_a_leaf_exposes_its_parent():
    c = RadixCache()
    c.insert([1, 2, 3])
    c.insert([1, 2, 4])
    assert c.evict(2) == 2 and c.total_size == 2  # both leaves; [1, 2] is a leaf now
    assert c.evict(1) == 2 and c.total_size == 0


def test_dfs_weight_order_heavier_subtrees_first():
    c = RadixCache()
    c.insert([1] * 4 + [2] * 4)
    c.insert([1] * 4 + [3] * 4)
    c.insert([9] * 4)
    nodes = [c.match_prefix(t)[1] for t in ([9] * 4, [1] * 4 + [2] * 4, [1] * 4 + [3] * 4, [1] * 4 + [3] * 4, [5])]
    order = c.dfs_weight_order(nodes)
    # subtree [1]* holds 3 requests (one under [2]*, two under [3]*): it goes first, its
    # heavier child [3]* before [2]*; then [9]*; the unmatched request (root) last
    assert order == [2, 3, 1, 0, 4]


tokens = st.lists(st.integers(0, 3), min_size=0, max_size=12)


class RadixMachine(RuleBasedStateMachine):
    """Random inserts, matches, locks, unlocks and evictions against the named invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.page = 1
        self.c = RadixCache(self.page)
        self.locks: list = []

    @rule(t=tokens)
    def insert(self, t):
        before = self.c.total_size
        pre = self.c.insert(t)
        assert self.c.total_size == before + len(t) - pre
        # INV-RADIX-MATCH
        assert self.c.match_prefix(t)[0] == len(t)

    @rule(t=tokens)
    def lock(self, t):
        n, node = self.c.match_prefix(t)
        if n:
            self.c.inc_lock_ref(node)
            self.locks.append((t[:n], node))

    @precondition(lambda self: self.locks)
    @rule(i=st.integers(0, 100))
    def unlock(self, i):
        _, node = self.locks.pop(i % len(self.locks))
        self.c.dec_lock_ref(node)

    @rule(n=st.integers(0, 30))
    def evict(self, n):
        ev_before = self.c.evictable_size
        got = self.c.evict(n)
        assert got <= ev_before
        assert got >= min(n, ev_before) or self.c.evictable_size == 0
        # INV-RADIX-LOCK: every locked prefix is still fully cached
        for t, _ in self.locks:
            assert self.c.match_prefix(t)[0] == len(t)

    @invariant()
    def sizes_add_up(self):
        # INV-RADIX-SIZE
        assert self.c.evictable_size + self.c.protected_size == self.c.total_size
        assert self.c.evictable_size >= 0 and self.c.protected_size >= 0


TestRadixMachine = RadixMachine.TestCase
TestRadixMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


@settings(max_examples=100, deadline=None)
@given(seqs=st.lists(st.lists(st.integers(0, 5), max_size=16), max_size=10), page=st.sampled_from([1, 2, 4]))
def test_match_returns_the_longest_inserted_prefix(seqs, page):
    c = RadixCache(page)
    for s in seqs:
        c.insert(s)
    for q in seqs + [[0, 1, 2, 3]]:
        best = 0
        for s in seqs:
            n = 0
            while n < min(len(s), len(q)) and s[n] == q[n]:
                n += 1
            best = max(best, n // page * page)
        assert c.match_prefix(q)[0] == best
