"""A draft tree's accept length: what a wider EAGLE tree buys over a chain.

SGLang 0.5.23 builds a chain drafter's tree in ``speculative_num_steps`` draft steps
(speculative/spec_utils.py ``select_top_k_tokens``): step 1 keeps the ``topk`` best tokens
after the verified one; each later step expands every kept token into ``topk`` children and
keeps the ``topk`` best of those topk^2 by cumulative score (the product of the draft's
probabilities along the path). Of every candidate scored (topk + (steps - 1) x topk^2) the
``speculative_num_draft_tokens - 1`` best by score become the tree the target verifies
(speculative/eagle_utils.py ``organize_draft_results``), and the verify keeps the longest
root-to-leaf path that matches the target's own tokens (``eagle_sample``,
``verify_tree_greedy``).

The model (after the positional acceptance vectors of tree-based speculative decoding, e.g.
Sequoia): at depth d the target's token is the draft's rank-1 candidate with probability
p_d (the chain's per-position rate, ``acceptance.per_position_rates``), and otherwise each
next-ranked candidate catches a fraction ``theta`` (``acceptance.sibling_rate``) of what is
left: rank r >= 2 with probability (1 - p_d) theta (1 - theta)^(r - 2), theta capped where
rank 2 would be likelier than rank 1 (p_d < 1/2). The draft is taken
to be calibrated, so its scores rank the candidates as these probabilities do and the tree
SGLang selects is the one built from them. The target's path is one token per depth, so the
candidates of one depth are disjoint events: P(accept length > d) is the sum, over the
tree's nodes at depth d, of the product of their path's probabilities. A chain (topk 1) or
``theta`` 0 gives the chain's accept length exactly; a wider tree or more draft tokens never
accept less (tests/test_draft_tree.py).

All arrays are float64; depths count from 1 (the first draft token); no function here draws.
"""

from __future__ import annotations

import numpy as np

TREE_TOP_TOLERANCE = 1e-6
"""How far a stated mean accept length may exceed :func:`top_tree_mean` and still be read as
every draft accepted (the scenario's load check and the solver use the same bound)."""


def rank_rates(p: np.ndarray, theta: float, topk: int) -> np.ndarray:
    """P(the target's token is the draft's rank-r candidate | the path so far matched), for
    each depth d (rows, ``p``'s length) and rank r = 1..topk (columns): p_d for rank 1, then
    (1 - p_d) t (1 - t)^(r - 2) with t = min(theta, p_d / (1 - p_d)): a lower rank is never
    likelier than rank 1 (a draft ranks its candidates by its own probabilities). Shape
    (len(p), topk).

    Raises:
        ValueError: ``theta`` outside [0, 1] or ``topk`` < 1.
    """
    if not 0.0 <= theta <= 1.0:
        raise ValueError(f"sibling_rate {theta} outside [0, 1]")
    if topk < 1:
        raise ValueError(f"topk {topk} < 1")
    p = np.asarray(p, dtype=float)
    out = np.empty((len(p), topk))
    out[:, 0] = p
    if topk > 1:
        # a candidate is never likelier than a higher-ranked one (the draft ranks them so):
        # rank 2's share is capped at p_d / (1 - p_d), so it is at most p_d
        with np.errstate(divide="ignore"):
            th = np.minimum(theta, np.where(p < 1.0, p / np.maximum(1.0 - p, 1e-300), np.inf))
        out[:, 1:] = ((1.0 - p) * th)[:, None] * (1.0 - th)[:, None] ** np.arange(topk - 1)[None, :]
    return out


def tree_reach(p: np.ndarray, theta: float, topk: int, num_draft_tokens: int) -> np.ndarray:
    """P(accept length > d), d = 1..len(p), on the tree SGLang selects for ``topk`` and
    ``num_draft_tokens`` (the verified token plus ``num_draft_tokens - 1`` drafts) with
    ``len(p)`` draft steps. Shape (len(p),).

    Built as ``select_top_k_tokens`` and ``organize_draft_results`` build it, with each
    candidate's score the product of :func:`rank_rates` along its path (ties keep the
    earlier candidate, as the scores' order does).

    Raises:
        ValueError: ``num_draft_tokens`` < 1, or as :func:`rank_rates`.
    """
    depth = len(p)
    if num_draft_tokens < 1:
        raise ValueError(f"num_draft_tokens {num_draft_tokens} < 1")
    a = rank_rates(p, theta, topk)
    reach = np.zeros(depth)
    if depth == 0 or num_draft_tokens == 1:
        return reach
    # each step's candidates in SGLang's order (beam-major); the beams kept to expand next,
    # best first. A stable sort of the negated scores keeps the earlier of equal ones.
    scores = [a[0]]
    beams = a[0]
    for d in range(1, depth):
        expanded = (beams[:, None] * a[d][None, :]).ravel()
        scores.append(expanded)
        beams = expanded[np.argsort(-expanded, kind="stable")[:topk]]
    cands = np.concatenate(scores)
    depths = np.repeat(np.arange(depth), [len(s) for s in scores])
    pick = np.argsort(-cands, kind="stable")[: num_draft_tokens - 1]
    for s, d in zip(cands[pick].tolist(), depths[pick].tolist(), strict=True):
        reach[d] += s
    return np.minimum(reach, 1.0)


def tree_rates(p: np.ndarray, theta: float, topk: int, num_draft_tokens: int) -> np.ndarray:
    """The tree's accept length as conditional per-depth rates P(accept length > d |
    > d - 1), d = 1..len(p): the form :class:`sim.acceptance.AcceptanceModel` draws from
    (any accept-length distribution has one; a cycle's draw is independent of the last).
    A depth the tree does not reach has rate 0. Shape (len(p),)."""
    reach = tree_reach(p, theta, topk, num_draft_tokens)
    prev = np.concatenate(([1.0], reach[:-1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(prev > 0, reach / prev, 0.0)
    return np.clip(rates, 0.0, 1.0)


def tree_mean(p: np.ndarray, theta: float, topk: int, num_draft_tokens: int) -> float:
    """Mean accept length on that tree: 1 + sum_d P(accept length > d)."""
    return 1.0 + float(tree_reach(p, theta, topk, num_draft_tokens).sum())


def top_tree_mean(depth: int, decay: float, theta: float, topk: int, num_draft_tokens: int) -> float:
    """The most a tree of ``depth`` draft steps accepts on average when its rank-1 rates are
    p_1 x decay^(d - 1) at p_1 = 1: ``depth`` + 1 unless the tree has fewer draft tokens
    than steps or the rate decays. A stated mean above it cannot be solved for."""
    return tree_mean(decay ** np.arange(depth), theta, topk, num_draft_tokens)


def fit_sibling_rate(first: tuple[int, int, int, float], second: tuple[int, int, int, float]) -> tuple[float, float]:
    """A constant rank-1 rate p and the sibling rate theta that give two mean accept lengths
    measured with one drafter on two draft trees, each ``(topk, num_draft_tokens, depth,
    mean accept length)`` (depth: ``speculative_num_steps``). With them a scenario states
    ``per_position_rates: [p] * depth`` and ``sibling_rate: theta``. Requests are taken
    alike (no spread: a measured mean is a population's, fitted here as one request's).

    Raises:
        ValueError: a mean outside what its tree can accept, two trees that cannot tell
            theta (neither wider than a chain, or the same tree), or no theta in [0, 1]
            that gives both.
    """
    from scipy.optimize import brentq

    for k, n, d, m in (first, second):
        top = tree_mean(np.full(d, 1.0), 1.0, k, n)
        if not 1.0 < m < top:
            raise ValueError(f"mean accept length {m} outside (1, {top:g}) of topk {k}, {n} draft tokens, depth {d}")
    if max(first[0], second[0]) == 1 or first[:3] == second[:3]:
        raise ValueError("two different draft trees, one of them wider than a chain (topk > 1), tell the sibling rate")

    def p_for(theta: float, tree: tuple[int, int, int, float]) -> float:
        k, n, d, m = tree
        return brentq(lambda p: tree_mean(np.full(d, p), theta, k, n) - m, 1e-9, 1 - 1e-9, xtol=1e-12)

    def gap(theta: float) -> float:
        k, n, d, m = second
        return tree_mean(np.full(d, p_for(theta, first)), theta, k, n) - m

    lo, hi = gap(0.0), gap(1.0)
    if lo == 0.0:
        return p_for(0.0, first), 0.0
    if lo * hi > 0:
        raise ValueError(f"no sibling rate in [0, 1] gives both accept lengths ({first[3]:g} and {second[3]:g}): "
                         f"at 0 the second tree accepts {second[3] + lo:.3g}, at 1 {second[3] + hi:.3g}")
    theta = brentq(gap, 0.0, 1.0, xtol=1e-10)
    return p_for(theta, first), theta
