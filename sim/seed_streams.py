"""The seed keys of a run's random draws, allocated in one place.

Every seeded draw takes its generator from :func:`rng` (``np.random.default_rng`` of the
words ``[seed, *tag, *index]``): a stream of its own, so that changing one draw (more
requests, another distribution) does not shift another. A new draw takes a new entry in
:data:`STREAMS`.

numpy's ``SeedSequence`` pads the entropy with zero words up to its pool of 4: ``[s, k]``,
``[s, k, 0]`` and ``[s, k, 0, 0]`` are one generator. Keys are therefore distinct by
construction, not by luck of the numbers:

* each stream kind has a tag (its words after the seed) and a fixed count of index words
  (a request id; a conversation and a turn), each an int in [0, 2**32) (one word), so all
  keys of one kind have one length and differ in an index word;
* no tag is a prefix of another (checked at import), so keys of two kinds differ in a tag
  word that both have, before any padding.

Within one run the seed is one value, so its words are the same leading words of every key.
A request's accept key was ``[seed, 3, rid]``, which shared the tag 3 of the prefix
workloads: request 0 drew the generated-shared-prefix stream's numbers (``[seed, 3, 0]``),
request 2 the multi_turn prompt stream's (``[seed, 3, 2]``); request 1's ``[seed, 3, 1]`` missed
the output tokens' ``[seed, 3, 1, 0, 0]`` only because a fifth word is mixed in, zero or not.
It has a tag of its own now (:data:`ACCEPT`); every other key gives the generator it gave before (the
generated-shared-prefix tag ``(3, 0)`` is the old ``[seed, 3]``, padded, for a seed below 2**64).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

ARRIVALS = 1
"""Open-loop send times (sim/workload.py ``poisson_arrivals``, ``gamma_arrivals``): ``[seed, 1]``."""
LENGTHS = 2
"""Prompt and output lengths of a plain workload, and the output lengths of a
shared-prefix or multi_turn one (sim/workload.py ``make_requests``): ``[seed, 2]``."""
PREFIX = 3
"""Prefix workloads (sim/prefix_workload.py): ``[seed, 3, 0]`` (numpy's ``[seed, 3]``) the
generated-shared-prefix lengths, token ids and shuffle; ``[seed, 3, 1, conversation, turn]`` a
request's output token ids; ``[seed, 3, 2]`` the multi_turn prompt stream (its lengths, then
its token ids)."""
PRIORITIES = 4
"""Request priorities (sim/workload.py ``make_requests``): ``[seed, 4]``."""
THINK = 5
"""Multi-turn think times (sim/prefix_workload.py): ``[seed, 5]``."""
TURNS = 6
"""Drawn turn counts per conversation (``multi_turn.num_turns`` as a distribution): ``[seed, 6]``."""
ZIPF_GROUPS = 7
"""Each generated-shared-prefix request's group under ``group_distribution: zipf``
(sim/prefix_workload.py ``group_assignment``): ``[seed, 7]``. It used ``[seed, 3, 2]``, the
multi_turn prompt stream's key."""
ACCEPT = 8
"""A request's accept-length draws (sim/acceptance.py): ``[seed, 8, rid]``. It was
``[seed, 3, rid]``, which collided with the prefix streams (see the module docstring)."""
SHARED_ACCEPT = PREFIX
"""The accept draws' old tag: ``[seed, 3, rid]``, the key of every run made before :data:`ACCEPT`
(acceptance ``seed_key: shared``). Not a stream of :data:`STREAMS` (it is the prefix tag): kept
only so that a run recorded with those draws, which the runtime forced on the GPU, can be
predicted again with the same ones."""
ROUTING_KEYS = 9
"""Each request's routing key (sim/workload.py ``make_requests``, ``workload.routing_keys``): ``[seed, 9]``."""
DP_ROOMS = 0xB007
"""A prefill server's bootstrap rooms under DP attention (sim/dp_attention.py): ``[seed, 0xB007]``."""
DISAGG_ROUTER = 0x50D
"""The prefill-decode router's random choices (sim/disaggregation.py): ``[seed, 0x50D]``."""


class Stream(NamedTuple):
    """A stream kind: the words after the seed, and the names of its index words."""

    tag: tuple[int, ...]
    index: tuple[str, ...] = ()


STREAMS: dict[str, Stream] = {
    "arrivals": Stream((ARRIVALS,)), "lengths": Stream((LENGTHS,)), "prefix": Stream((PREFIX, 0)),
    "prefix_output_tokens": Stream((PREFIX, 1), ("conversation", "turn")),
    "multi_turn_prompts": Stream((PREFIX, 2)), "priorities": Stream((PRIORITIES,)), "think": Stream((THINK,)),
    "routing_keys": Stream((ROUTING_KEYS,)),
    "turns": Stream((TURNS,)), "zipf_groups": Stream((ZIPF_GROUPS,)), "accept": Stream((ACCEPT,), ("rid",)),
    "dp_rooms": Stream((DP_ROOMS,)), "disagg_router": Stream((DISAGG_ROUTER,)),
}
"""Every stream kind of a run by name."""

_WORD = 1 << 32


def _check_prefix_free(streams: dict[str, Stream]) -> None:
    """Raise if a tag is a prefix of another (or equal to it), or a word is not one uint32."""
    names = list(streams)
    for i, a in enumerate(names):
        ta = streams[a].tag
        if not ta or not all(isinstance(w, int) and 0 <= w < _WORD for w in ta):
            raise ValueError(f"seed stream {a!r}: tag {ta} must be one or more ints in [0, 2**32)")
        for b in names[i + 1:]:
            tb = streams[b].tag
            n = min(len(ta), len(tb))
            if ta[:n] == tb[:n]:
                raise ValueError(f"seed streams {a!r} {ta} and {b!r} {tb}: one tag is a prefix of the other")


_check_prefix_free(STREAMS)


def key(name: str, seed: int, *index: int) -> np.ndarray | list[int]:
    """The entropy of stream ``name``'s generator: the words ``[seed, *tag, *index]``.

    Handed to numpy as a uint32 array when the seed is one word (SeedSequence takes those
    words as they are; from a list it converts each int in Python, a few us a generator),
    else as a list (numpy splits the seed into its words): the same entropy either way.

    Raises:
        KeyError: an unknown stream.
        ValueError: not the stream's count of index words, or an index word outside
            [0, 2**32) (a longer one would give the key another length), or a negative seed.
    """
    s = STREAMS[name]
    if len(index) != len(s.index):
        raise ValueError(f"seed stream {name!r} takes {len(s.index)} index words {s.index}, got {len(index)}")
    for n, v in zip(s.index, index, strict=True):
        if not 0 <= v < _WORD:
            raise ValueError(f"seed stream {name!r}: {n} must be in [0, 2**32), got {v}")
    if seed < 0:
        raise ValueError(f"a seed must be >= 0, got {seed}")
    if seed < _WORD:
        return np.array((seed, *s.tag, *index), dtype=np.uint32)
    return [seed, *s.tag, *index]


def rng(name: str, seed: int, *index: int) -> np.random.Generator:
    """The generator of stream ``name`` (:data:`STREAMS`) for ``seed`` and its index words."""
    return np.random.default_rng(key(name, seed, *index))
