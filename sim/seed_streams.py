"""The seed keys of a run's random draws, allocated in one place.

Every seeded draw takes its generator from ``np.random.default_rng([seed, STREAM, ...])``
with a STREAM of its own below, so that changing one draw (more requests, another
distribution) does not shift another. A new draw takes a new number here.

numpy's ``SeedSequence`` pads the entropy with zero words up to its pool of 4: ``[s, k]``,
``[s, k, 0]`` and ``[s, k, 0, 0]`` are one generator. A key must therefore differ from every
other key in a word that is not a trailing zero (``tests/test_prefix_workload.py`` checks the
keys below).
"""

from __future__ import annotations

ARRIVALS = 1
"""Open-loop send times (sim/workload.py ``poisson_arrivals``, ``gamma_arrivals``): ``[seed, 1]``."""
LENGTHS = 2
"""Prompt and output lengths of a plain workload, and the output lengths of a
shared-prefix or multi_turn one (sim/workload.py ``make_requests``): ``[seed, 2]``."""
PREFIX = 3
"""Prefix workloads (sim/prefix_workload.py): ``[seed, 3]`` the generated-shared-prefix
lengths, token ids and shuffle; ``[seed, 3, 1, conversation, turn]`` a request's output token
ids; ``[seed, 3, 2]`` the multi_turn prompt stream (its lengths, then its token ids)."""
ACCEPT = 3
"""A request's accept-length draws (sim/acceptance.py): ``[seed, 3, rid]``. It shares the
first word with :data:`PREFIX`, so request 0's draws are the generated-shared-prefix stream's
generator and request 2's the multi_turn prompt stream's; kept so that every speculative
run's draws stay what they were."""
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
DP_ROOMS = 0xB007
"""A prefill server's bootstrap rooms under DP attention (sim/dp_attention.py): ``[seed, 0xB007]``."""
DISAGG_ROUTER = 0x50D
"""The prefill-decode router's random choices (sim/disaggregation.py): ``[seed, 0x50D]``."""

KEYS: dict[str, tuple[int, ...]] = {
    "arrivals": (ARRIVALS,), "lengths": (LENGTHS,), "prefix": (PREFIX,), "prefix_output_tokens": (PREFIX, 1),
    "multi_turn_prompts": (PREFIX, 2), "priorities": (PRIORITIES,), "think": (THINK,), "turns": (TURNS,),
    "zipf_groups": (ZIPF_GROUPS,), "dp_rooms": (DP_ROOMS,), "disagg_router": (DISAGG_ROUTER,),
}
"""Every key after the seed (a request's accept key adds its rid to (ACCEPT,); an output
token key adds conversation and turn to ``prefix_output_tokens``)."""
