"""Prompts that share prefixes, as token ids: the radix cache's workloads.

bench_serving's generated-shared-prefix dataset (sglang benchmark/datasets/
generated_shared_prefix.py ``sample_generated_shared_prefix_requests``): ``num_groups``
system prompts of ``system_prompt_len`` random tokens; each group has
``prompts_per_group`` requests, each the group's system prompt followed by its own question
of ``question_len`` random tokens; lengths are drawn uniform in [len x range_ratio, len]
(``compute_random_lens``); the requests are shuffled unless ``ordered``. With
``num_turns`` > 1 a request is a conversation: turn k+1 resends turn k's prompt, its answer
and a new question (bench_serving ``wrap_multi_turn_request_func``; chat-template tokens are
not modelled).

Token ids are random draws from a 2^31 vocabulary, so prompts that are not meant to share
a prefix share none (a collision is a 2^-31 event per token). A request's output tokens are
a function of (seed, request, turn), so a later turn resends exactly what was generated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STREAM_PREFIX = 3
"""The seed stream for prefix workloads (arrivals and lengths use 1 and 2)."""
VOCAB = 1 << 31


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """One request's prompt as token ids.

    Attributes:
        index: send order.
        group: the system-prompt group it belongs to.
        tokens: int64 array, the prompt (system prompt + question, or a conversation's
            history + the new question).
        output_len: output tokens to generate.
        turn: 0-based turn within its conversation (0 for single-turn datasets).
        conversation: the conversation id (= the request's slot before shuffling).
    """

    index: int
    group: int
    tokens: np.ndarray
    output_len: int
    turn: int = 0
    conversation: int = 0

    @property
    def input_len(self) -> int:
        return len(self.tokens)


def random_lens(full_len: int, range_ratio: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """bench_serving ``compute_random_lens``: integers uniform in [max(len x ratio, 1), len]."""
    if full_len <= 0:
        return np.zeros(n, dtype=np.int64)
    return rng.integers(max(int(full_len * range_ratio), 1), full_len + 1, size=n)


def output_tokens(seed: int, conversation: int, turn: int, n: int) -> np.ndarray:
    """The ``n`` output token ids a request generates (deterministic per seed/conversation/turn)."""
    rng = np.random.default_rng([seed, STREAM_PREFIX, 1, conversation, turn])
    return rng.integers(0, VOCAB, size=n, dtype=np.int64)


def generated_shared_prefix(
    num_groups: int,
    prompts_per_group: int,
    system_prompt_len: int,
    question_len: int,
    output_len: int,
    seed: int,
    range_ratio: float = 1.0,
    num_turns: int = 1,
    ordered: bool = False,
) -> list[list[PromptTokens]]:
    """The dataset's conversations in send order; each a list of ``num_turns`` turns.

    Args:
        num_groups, prompts_per_group: groups and conversations per group (>= 1).
        system_prompt_len, question_len, output_len: tokens (>= 1 for the prompt parts).
        seed: the run's seed.
        range_ratio: lengths uniform in [len x range_ratio, len].
        num_turns: turns per conversation (>= 1).
        ordered: keep group order instead of shuffling.

    Returns:
        conversations[i][k]: turn k of the i-th conversation sent. Turn k's prompt is
        turn k-1's prompt + its output tokens + a new question.

    Raises:
        ValueError: a count or length < 1.
    """
    if min(num_groups, prompts_per_group, num_turns, system_prompt_len, question_len, output_len) < 1:
        raise ValueError("groups, prompts per group, turns and lengths must be >= 1")
    rng = np.random.default_rng([seed, STREAM_PREFIX])
    sys_lens = random_lens(system_prompt_len, range_ratio, num_groups, rng)
    q_lens = random_lens(question_len, range_ratio, num_groups * prompts_per_group * num_turns, rng)
    q_lens = q_lens.reshape(num_groups, prompts_per_group, num_turns)
    out_lens = random_lens(output_len, range_ratio, num_groups * prompts_per_group, rng)
    out_lens = out_lens.reshape(num_groups, prompts_per_group)
    systems = [rng.integers(0, VOCAB, size=int(n), dtype=np.int64) for n in sys_lens]
    convs: list[list[PromptTokens]] = []
    for g in range(num_groups):
        for p in range(prompts_per_group):
            conv = g * prompts_per_group + p
            history = systems[g]
            turns = []
            for t in range(num_turns):
                q = rng.integers(0, VOCAB, size=int(q_lens[g, p, t]), dtype=np.int64)
                prompt = np.concatenate([history, q])
                n_out = int(out_lens[g, p])
                turns.append(PromptTokens(0, g, prompt, n_out, t, conv))
                history = np.concatenate([prompt, output_tokens(seed, conv, t, n_out)])
            convs.append(turns)
    if not ordered:
        order = rng.permutation(len(convs))
        convs = [convs[i] for i in order]
    out, k = [], 0
    for conv in convs:
        row = []
        for t in conv:
            row.append(PromptTokens(k, t.group, t.tokens, t.output_len, t.turn, t.conversation))
            k += 1
        out.append(row)
    return out
