"""Prompts that share prefixes, as token ids: the radix cache's workloads.

bench_serving's generated-shared-prefix dataset (sglang benchmark/datasets/
generated_shared_prefix.py ``sample_generated_shared_prefix_requests``): ``num_groups``
system prompts of ``system_prompt_len`` random tokens; each group has
``prompts_per_group`` requests, each the group's system prompt followed by its own question
of ``question_len`` random tokens; lengths are drawn uniform in [len x range_ratio, len]
(``compute_random_lens``); the requests are shuffled unless ``ordered``. With
``group_distribution`` ``zipf`` (0.5.23 ``--gsp-group-distribution zipf --gsp-zipf-alpha A``)
each request's system prompt is drawn by rank instead, group g (0-based) with probability
proportional to 1 / (g + 1)^A (``_zipf_group_probs``), from a draw stream of its own so the
question and system-prompt pool is the same as the uniform run's; hot groups then hit the
radix cache more often than cold ones. With
``num_turns`` > 1 a request is a conversation: turn k+1 resends turn k's prompt, its answer
and a new question (bench_serving ``wrap_multi_turn_request_func``; chat-template tokens are
not modelled).

Token ids are random draws from a 2^31 vocabulary, so prompts that are not meant to share
a prefix share none (a collision is a 2^-31 event per token). A request's output tokens are
a function of (seed, request, turn), so a later turn resends exactly what was generated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from specsched.sim import seed_streams

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
    rng = seed_streams.rng("prefix_output_tokens", seed, conversation, turn)
    return rng.integers(0, VOCAB, size=n, dtype=np.int64)


def zipf_group_probs(num_groups: int, alpha: float) -> np.ndarray:
    """Rank-Zipf probabilities, float (num_groups,): group g (0-based, rank g + 1) has weight
    1 / (g + 1)^alpha, normalized (bench_serving 0.5.23 ``generated_shared_prefix.py``
    ``_zipf_group_probs``; group 0 is the hottest)."""
    w = 1.0 / np.arange(1, num_groups + 1, dtype=np.float64) ** alpha
    return w / w.sum()


def group_assignment(num_groups: int, prompts_per_group: int, seed: int, distribution: str = "uniform",
                     zipf_alpha: float | None = None) -> np.ndarray:
    """Each conversation slot's system-prompt group, int (num_groups x prompts_per_group,).

    ``uniform``: slot s belongs to group s // prompts_per_group (the legacy layout). ``zipf``:
    each slot's group drawn with :func:`zipf_group_probs`, from its own stream
    (:data:`sim.seed_streams.ZIPF_GROUPS`), separate from the prompt stream, the
    lengths and token draws, as bench_serving 0.5.23 keeps its own ``default_rng(seed)`` for it
    so the prompt pool is the uniform run's.

    Raises:
        ValueError: an unknown distribution; ``zipf`` without a finite alpha > 0; an alpha
            given with ``uniform`` (0.5.23 ``_validate_parsed_gsp_args`` refuses both).
    """
    if distribution == "uniform":
        if zipf_alpha is not None:
            raise ValueError("zipf_alpha is only meaningful with group_distribution zipf")
        return np.repeat(np.arange(num_groups), prompts_per_group)
    if distribution != "zipf":
        raise ValueError(f"group_distribution must be 'uniform' or 'zipf', got {distribution!r}")
    if zipf_alpha is None or not np.isfinite(zipf_alpha) or zipf_alpha <= 0:
        raise ValueError(f"group_distribution zipf needs zipf_alpha, a finite number > 0, got {zipf_alpha!r}")
    rng = seed_streams.rng("zipf_groups", seed)
    return rng.choice(num_groups, size=num_groups * prompts_per_group, replace=True,
                      p=zipf_group_probs(num_groups, zipf_alpha))


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
    group_distribution: str = "uniform",
    zipf_alpha: float | None = None,
) -> list[list[PromptTokens]]:
    """The dataset's conversations in send order; each a list of ``num_turns`` turns.

    Args:
        num_groups, prompts_per_group: groups and conversations per group (>= 1).
        system_prompt_len, question_len, output_len: tokens (>= 1 for the prompt parts).
        seed: the run's seed.
        range_ratio: lengths uniform in [len x range_ratio, len].
        num_turns: turns per conversation (>= 1).
        ordered: keep group order instead of shuffling.
        group_distribution: ``uniform`` (every group gets ``prompts_per_group`` requests) or
            ``zipf`` (each request's group drawn by rank, bench_serving 0.5.23
            ``sample_generated_shared_prefix_requests``; the question pool is unchanged).
        zipf_alpha: the Zipf exponent (> 0, finite), required with ``zipf``, refused otherwise.

    Returns:
        conversations[i][k]: turn k of the i-th conversation sent. Turn k's prompt is
        turn k-1's prompt + its output tokens + a new question.

    Raises:
        ValueError: a count or length < 1; an unknown ``group_distribution``; ``zipf``
            without a finite ``zipf_alpha`` > 0, or a ``zipf_alpha`` with ``uniform``.
    """
    if min(num_groups, prompts_per_group, num_turns, system_prompt_len, question_len, output_len) < 1:
        raise ValueError("groups, prompts per group, turns and lengths must be >= 1")
    assignment = group_assignment(num_groups, prompts_per_group, seed, group_distribution, zipf_alpha)
    rng = seed_streams.rng("prefix", seed)
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
            group = int(assignment[conv])
            history = systems[group]
            turns = []
            for t in range(num_turns):
                q = rng.integers(0, VOCAB, size=int(q_lens[g, p, t]), dtype=np.int64)
                prompt = np.concatenate([history, q])
                n_out = int(out_lens[g, p])
                turns.append(PromptTokens(0, group, prompt, n_out, t, conv))
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


def shared_prefix_requests(cfg, output_lens: np.ndarray, seed: int) -> list:
    """The requests of a ``workload.shared_prefix`` block (:class:`sim.workload_config.SharedPrefixConfig`)
    in send order, as :class:`sim.workload.RequestSpec` with their prompt tokens; output
    lengths come from ``workload.output_len`` (``output_lens``, one per request); with
    ``send_routing_key`` each request's routing key names its group (``group-<g>``: bench_serving
    sends ``<run id>_<timestamp>_<g>``, one key per prefix group all the same)."""
    from specsched.sim.workload import RequestSpec

    convs = generated_shared_prefix(cfg.num_groups, cfg.prompts_per_group, cfg.system_prompt_len,
                                    cfg.question_len, 1, seed, cfg.range_ratio, 1, cfg.ordered,
                                    cfg.group_distribution, cfg.zipf_alpha)
    key = cfg.send_routing_key   # the group as the routing key (--gsp-send-routing-key)
    return [RequestSpec(i, c[0].input_len, int(output_lens[i]), tokens=c[0].tokens,
                        routing_key=f"group-{c[0].group}" if key else None) for i, c in enumerate(convs)]


@dataclass(frozen=True)
class ConversationPlan:
    """The shape of a multi_turn workload's conversations before any token is drawn.

    Attributes:
        turns: int (n,), turns per conversation.
        firsts: int (n,), turn 0's own prompt tokens (after the shared system prompt).
        users: int (n, u) or None: each later turn's new tokens, row c's first turns[c] - 1
            entries used (drawn); None when ``news`` gives them.
        news: int (sum(turns),) or None: every turn's new tokens in request order, a
            conversation's first entry unused (an agentic trace).
        notes: what was assumed in reading a trace (for the run's log and from-bench).
        stream_state: the prompt stream's state after the plan's draws, where the
            conversations' token ids continue (:func:`multi_turn_conversations`).
    """

    turns: np.ndarray
    firsts: np.ndarray
    users: np.ndarray | None = None
    news: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    stream_state: dict | None = None

    def token_stream(self, seed: int) -> np.random.Generator:
        """The prompt stream where the plan's draws left it (a fresh generator each call, so
        one plan gives the same tokens every time)."""
        rng = prompt_stream(seed)
        if self.stream_state is not None:
            rng.bit_generator.state = self.stream_state
        return rng

    @property
    def total(self) -> int:
        return int(self.turns.sum())

    def user(self, c: int, t: int, start: int) -> int:
        """New tokens of turn t >= 1 of conversation c (whose first request is ``start``)."""
        return int(self.news[start + t]) if self.news is not None else int(self.users[c, t - 1])


_WARNED: set[tuple[str, str]] = set()


_UNSAID: list[bool] = [False]


@contextmanager
def warnings_unsaid() -> Iterator[None]:
    """Inside, warnings about a trace are neither said nor marked said: a check before the run
    (sim/served.py ``check_turn_rows``) reads the conversations the run says them for."""
    _UNSAID[0] = True
    try:
        yield
    finally:
        _UNSAID[0] = False


def _warn_once(path: str, lines: list[str]) -> None:
    """Each warning about a trace on stderr once per process (a run reads it per seed)."""
    import sys

    if _UNSAID[0]:
        return
    for line in lines:
        if (path, line) not in _WARNED:
            _WARNED.add((path, line))
            print(f"warning: {path}: {line}", file=sys.stderr)


def prompt_stream(seed: int) -> np.random.Generator:
    """The multi_turn workload's prompt stream: its drawn lengths, then its token ids."""
    return seed_streams.rng("multi_turn_prompts", seed)


def conversation_plan(cfg, seed: int, base=None) -> ConversationPlan:
    """Turn counts and per-turn prompt growth of a ``workload.multi_turn`` block.

    Drawn (``first_prompt_len``, ``user_len``; ``num_turns`` a count, or a distribution drawn
    per conversation from :data:`sim.seed_streams.TURNS`), or read from ``agentic_trace``
    (:func:`sim.agentic_trace.load_agentic_trace`): each conversation's kept turns; turn 0's
    own tokens = its ``prompt_tokens`` less the shared ``system_prompt_len``; later turns'
    new tokens = the ``prompt_tokens`` growth less ``trace_reply_len`` per original turn, at
    least 1. The draws come from :func:`prompt_stream`; the plan keeps where they left it.

    Raises:
        ConfigError: a bad trace or histogram; a trace conversation whose first prompt is
            shorter than ``system_prompt_len``.
    """
    from specsched.sim.errors import ConfigError
    from specsched.sim.workload import draw_lengths

    rng = prompt_stream(seed)
    at = cfg.agentic_trace
    if at is not None:
        from specsched.sim.agentic_trace import load_agentic_trace

        tr = load_agentic_trace(at.path, max_turns=at.max_turns, offset=at.offset, limit=cfg.num_conversations,
                                scenario_path=base)
        news, clipped = tr.new_tokens(at.trace_reply_len)
        firsts = tr.prompt_tokens[tr.turn_offsets[:-1]] - cfg.system_prompt_len
        if len(firsts) and firsts.min() < 1:
            c = int(np.argmin(firsts))
            raise ConfigError(str(base or "<scenario>"), "workload.multi_turn.system_prompt_len", cfg.system_prompt_len,
                              f"must be below every conversation's first prompt_tokens (conversation "
                              f"{int(tr.source_index[c])} of {at.path} starts with {int(tr.prompt_tokens[tr.turn_offsets[c]])})")
        notes = [f"agentic trace {at.path}: {len(tr)} conversations, turns min {int(tr.num_turns.min())} max "
                 f"{int(tr.num_turns.max())} mean {tr.num_turns.mean():.1f}"]
        warn = []
        if cfg.system_prompt_len == 0 and tr.shared_system_note():
            warn.append(tr.shared_system_note())
        if clipped:
            warn.append(f"{clipped} later turn(s) grew by at most trace_reply_len ({at.trace_reply_len}) tokens: "
                        "sent with 1 new token")
        _warn_once(str(at.path), warn)
        return ConversationPlan(tr.num_turns.astype(np.int64), firsts.astype(np.int64), None, news,
                                tuple(notes + warn), rng.bit_generator.state)
    n_conv = cfg.num_conversations
    if isinstance(cfg.num_turns, int):
        turns = np.full(n_conv, cfg.num_turns, dtype=np.int64)
    else:
        trng = seed_streams.rng("turns", seed)
        turns = draw_lengths(cfg.num_turns, n_conv, trng, base, "workload.multi_turn.num_turns").astype(np.int64)
    firsts = draw_lengths(cfg.first_prompt_len, n_conv, rng, base, "workload.multi_turn.first_prompt_len")
    width = max(int(turns.max()) - 1, 1)
    users = draw_lengths(cfg.user_len, n_conv * width, rng, base, "workload.multi_turn.user_len").reshape(n_conv, width)
    return ConversationPlan(turns, firsts, users, stream_state=rng.bit_generator.state)


def multi_turn_conversations(cfg, output_lens, seed: int, base=None, plan: ConversationPlan | None = None) -> list[list]:
    """The conversations of a ``workload.multi_turn`` block (:class:`sim.workload_config.MultiTurnConfig`)
    as :class:`sim.workload.RequestSpec` lists, conversation-major (request index = the
    turns of the conversations before + turn; conversation x num_turns + turn when every
    conversation has num_turns).

    Turn 0's prompt = the shared system prompt + its own first prompt; turn k's prompt =
    turn k-1's prompt + turn k-1's output tokens (:func:`output_tokens`) + its new tokens
    (``user_len``, or an agentic trace's growth: :func:`conversation_plan`) (bench_serving
    ``wrap_multi_turn_request_func`` appends the server's reply and the next round's messages
    to the history it resends). Each spec's ``tokens`` is its prompt followed by the output
    it will generate: a view into one history array per conversation (no copy per turn), so
    that the finished turn can offer its output to the prefix cache.

    Args:
        cfg: the multi_turn block.
        output_lens: int array (total turns,), output tokens per turn, in request-index order.
        seed: the run's seed (token ids and the lengths drawn here).
        base: the scenario's folder (length histograms, the trace file).
        plan: the conversations' shape (:func:`conversation_plan`; made here when None).

    With ``dp_ranks`` > 1 (round-robin dispatch over DP ranks) turn t >= 1 lands on the
    rank of turn t-1 with probability 1 / dp_ranks (seeded draw); the simulated rank sees
    the full history of a turn only when that turn or the next one stays on it. Another
    turn's ``tokens`` is the system prompt plus one token of its own: the radix cache can
    share the system prompt only (the rest of its prompt shares nothing here).

    Returns:
        conversations[c][t]: the RequestSpec of turn t of conversation c.
    """
    from specsched.sim.workload import RequestSpec

    plan = plan or conversation_plan(cfg, seed, base)
    rng = plan.token_stream(seed)   # token ids continue the stream after the plan's draws
    n_conv = len(plan.turns)
    max_turns = int(plan.turns.max()) if n_conv else 1
    system = rng.integers(0, VOCAB, size=cfg.system_prompt_len, dtype=np.int64)
    out_lens = np.asarray(output_lens, dtype=np.int64)
    if len(out_lens) != plan.total:
        raise ValueError(f"{len(out_lens)} output lengths for {plan.total} turns")
    # stays[c, t]: turn t is routed to the rank that served turn t-1 (turn 0 always)
    stays = np.ones((n_conv, max_turns), dtype=bool)
    if cfg.dp_ranks > 1 and max_turns > 1:
        stays[:, 1:] = rng.random((n_conv, max_turns - 1)) < 1.0 / cfg.dp_ranks
    convs = []
    start = 0
    for c in range(n_conv):
        n_turns = int(plan.turns[c])
        parts = [system, rng.integers(0, VOCAB, size=int(plan.firsts[c]), dtype=np.int64)]
        bounds = []  # (prompt end, output end) per turn in the history
        end = len(system) + int(plan.firsts[c])
        for t in range(n_turns):
            if t:
                u = plan.user(c, t, start)
                parts.append(rng.integers(0, VOCAB, size=u, dtype=np.int64))
                end += u
            n_out = int(out_lens[start + t])
            parts.append(output_tokens(seed, c, t, n_out))
            bounds.append((end, end + n_out))
            end += n_out
        if cfg.dp_ranks == 1:
            history = np.concatenate(parts)
            convs.append([RequestSpec(start + t, p, o - p, tokens=history[:o], turn=t)
                          for t, (p, o) in enumerate(bounds)])
            start += n_turns
            continue
        # whole histories only for the turns the rank can reuse (memory: most turns of a
        # many-rank deployment leave the rank); a turn that arrives from another rank starts
        # a new lineage (one token after the system prompt differs), so it hits nothing of
        # what this rank cached for the conversation before
        keep = [bool(t and stays[c, t]) or bool(t + 1 < n_turns and stays[c, t + 1]) for t in range(n_turns)]
        full = np.concatenate(parts)
        lineage: np.ndarray | None = full
        row = []
        for t, (p, o) in enumerate(bounds):
            if t and not stays[c, t]:
                lineage = None
            if keep[t]:
                if lineage is None:
                    lineage = full.copy()
                    lineage[len(system)] = rng.integers(0, VOCAB)
                toks = lineage[:o]
            else:
                toks = np.concatenate([system, rng.integers(0, VOCAB, size=1, dtype=np.int64)])
            row.append(RequestSpec(start + t, p, o - p, tokens=toks, turn=t))
        convs.append(row)
        start += n_turns
    return convs


def think_times(cfg, seed: int, shape: tuple[int, int] | None = None) -> np.ndarray:
    """Client pauses (s) before each later turn, float (conversations, most turns - 1):
    ``think_time_s`` each (fixed) or exponential draws with that mean (seeded). ``shape``
    defaults to (num_conversations, num_turns - 1) of a fixed turn count; row c's first
    turns - 1 entries are conversation c's pauses."""
    if shape is None:
        shape = (cfg.num_conversations, max(cfg.num_turns - 1, 0))
    if cfg.think_time_dist == "fixed" or cfg.think_time_s == 0:
        return np.full(shape, float(cfg.think_time_s))
    rng = seed_streams.rng("think", seed)
    return rng.exponential(cfg.think_time_s, size=shape)
