"""Shared prompt prefixes of a trace: Mooncake's ``hash_ids`` as prompt token ids.

The Mooncake traces (FAST'25 release, ``*_trace.jsonl``) give each request ``hash_ids``:
one id per 512-token block of its prompt, the same id for the same block content after
the same prefix (the trace's README; the ids are remapped prefix-chained block hashes), so
two requests whose first k ids agree share their first k x 512 prompt tokens. SGLang's
radix cache (mem_cache/radix_cache.py ``RadixCache.match_prefix``) reuses exactly such
shared prefixes, so a request here carries token ids that reproduce the sharing:

- token ``j`` of block ``b`` (``j`` < block_size) is ``hash_ids[b] x block_size + j``: equal
  blocks after an equal prefix give equal token ids, different blocks differ;
- tokens past the last block (a prompt longer than its blocks) are negative ids unique to
  the request, so they share nothing.

The ids are built on demand (:class:`BlockTokens`): a request holds a view of its block ids,
not its tokens (a Mooncake prompt averages about 12K tokens, 100 KB as int64; a trace has
tens of thousands of them). The radix cache asks for a slice when it matches or inserts and
keeps only the tokens it stores.

Note: SGLang's own ``bench_serving --dataset-name mooncake`` sends a different workload for
the same file: each block becomes the text ``f"{hash_id}" + " hi" x 128`` (roughly 130
tokens, not 512) and ``input_length`` is not used (benchmark/datasets/mooncake.py
``get_mooncake_request_over_time``). This module models the trace as it describes itself.
"""

from __future__ import annotations

import numpy as np

MOONCAKE_BLOCK_SIZE = 512
"""Tokens per ``hash_ids`` block in the Mooncake traces."""
_TAIL_STRIDE = 1 << 32   # a request's unique tail ids: -(1 + index x 2^32 + position)


class BlockTokens:
    """A request's prompt token ids (int64, length ``n``), built from its block ids when
    sliced or converted (``np.asarray``); see the module docstring for the id scheme.

    Args:
        ids: block ids (int array, ids >= 0): the request's own, or the whole trace's with
            ``lo``/``hi`` naming the request's part (no view object per request).
        n: prompt length in tokens (>= 1).
        index: the request's index in the trace (makes its unshared tail unique).
        block_size: tokens per block (>= 1).
        lo, hi: the request's ids are ``ids[lo:hi]`` (default all), at most
            ceil(n / block_size) of them.
    """

    __slots__ = ("ids", "lo", "hi", "n", "index", "block_size")

    def __init__(self, ids: np.ndarray, n: int, index: int, block_size: int, lo: int = 0, hi: int | None = None) -> None:
        self.ids, self.lo, self.hi = ids, int(lo), len(ids) if hi is None else int(hi)
        self.n, self.index, self.block_size = int(n), int(index), int(block_size)

    @property
    def blocks(self) -> np.ndarray:
        """The request's block ids (a view)."""
        return self.ids[self.lo:self.hi]

    def __len__(self) -> int:
        return self.n

    def _build(self, lo: int, hi: int) -> np.ndarray:
        pos = np.arange(lo, hi, dtype=np.int64)
        b = pos // self.block_size
        shared = b < self.hi - self.lo
        out = np.empty(len(pos), dtype=np.int64)
        out[shared] = np.asarray(self.ids[self.lo + b[shared]], dtype=np.int64) * self.block_size + pos[shared] % self.block_size
        out[~shared] = -(1 + self.index * _TAIL_STRIDE + pos[~shared])
        return out

    def __getitem__(self, key: slice | int) -> np.ndarray | int:
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.n)
            if step == 1:
                return self._build(lo, max(lo, hi))
            return self._build(0, self.n)[key]
        i = range(self.n)[key]   # IndexError as a sequence raises it
        return int(self._build(i, i + 1)[0])

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        a = self._build(0, self.n)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"BlockTokens(n={self.n}, blocks={self.hi - self.lo}, block_size={self.block_size})"


def blocks_needed(input_len: np.ndarray, block_size: int) -> np.ndarray:
    """Blocks that hold a prompt of ``input_len`` tokens: ceil(input_len / block_size)."""
    return -(-np.asarray(input_len, dtype=np.int64) // block_size)


def prefix_reuse(input_len: np.ndarray, hash_ids: np.ndarray, offsets: np.ndarray, block_size: int) -> float:
    """The share of prompt tokens an unbounded prefix cache would serve, requests taken in
    order, each finished before the next (the trace's own reuse; an upper bound for a run).

    A request reuses its leading blocks whose chain of ids an earlier request had (a trie of
    id chains), a block only as far as an earlier request filled it (a prompt's last block
    may be partial), at most ``input_len - 1`` tokens (one token is always computed: the
    limit of SGLang's ``match_prefix`` call in ``Req.init_next_round_input``); page size 1.

    Args:
        input_len: prompt tokens per request, int (n,).
        hash_ids: every request's block ids, concatenated, int (m,).
        offsets: request i's ids are ``hash_ids[offsets[i]:offsets[i+1]]``, int (n + 1,).
        block_size: tokens per block.

    Returns:
        reused tokens / prompt tokens (0.0 for an empty trace).
    """
    trie: dict[tuple[int, int], list[int]] = {}   # (parent, id) -> [node, most tokens of it seen]
    reused = 0
    ids = hash_ids.tolist()
    for i, n in enumerate(np.asarray(input_len).tolist()):
        node, got, matching = 0, 0, True
        for k, h in enumerate(ids[offsets[i]:offsets[i + 1]]):
            own = min(block_size, n - k * block_size)
            if own <= 0:
                break
            entry = trie.get((node, h))
            if entry is None:
                entry = trie[(node, h)] = [len(trie) + 1, 0]
            if matching:
                got += min(entry[1], own)
                matching = entry[1] >= own == block_size
            entry[1] = max(entry[1], own)
            node = entry[0]
        reused += max(0, min(got, n - 1))
    total = int(np.sum(input_len))
    return reused / total if total else 0.0
