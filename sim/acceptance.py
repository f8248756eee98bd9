"""Accept lengths: tokens committed per request per verify cycle (1..window), seeded.

Definition as SGLang reports it (speculative/, bench_serving ``accept_length``): accepted
draft tokens plus the one token the target always contributes. The model: position i of the
draft (1..gamma) is accepted with probability p_i given that positions < i were (greedy
verification accepts the longest matching prefix), so accept length = 1 + the number of
leading accepted positions. Real prompts differ: each request draws a level z ~ N(0, 1) and
uses logit(p_i) + spread x z for all its cycles (this spread sets when a burst's requests
finish, hence when held requests get in).

Draws are keyed by (seed, request id, cycle index), so two arms, or the simulator and the
runtime (which forces the same values into its verify, as SGLANG_SIMULATE_ACC_LEN does),
see the same accept lengths for the same request.
"""

from __future__ import annotations

import math

import numpy as np
from specsched.sim import seed_streams
from specsched.sim.acceptance_config import AcceptanceConfig
from specsched.sim.draft_tree import TREE_TOP_TOLERANCE, top_tree_mean, tree_mean, tree_rates

_BLOCK = 256
_HERMITE = np.polynomial.hermite_e.hermegauss(32)


_LEAD8 = np.array([next((i for i in range(8) if not (b >> i) & 1), 8) for b in range(256)], dtype=np.int64)
_BITS8 = (1 << np.arange(8)).astype(np.uint8)


def leading_true(ok: np.ndarray) -> np.ndarray:
    """Per row of a bool array (rows, gamma): how many leading entries are True, i.e.
    ``where(ok.all(1), gamma, argmin(ok, 1))`` (accepted draft positions of a cycle)."""
    gamma = ok.shape[1]
    if 0 < gamma <= 8:
        return _LEAD8[ok.view(np.uint8) @ _BITS8[:gamma]]
    return np.where(ok.all(axis=1), gamma, np.argmin(ok, axis=1))


def mean_accept_length(rates: np.ndarray) -> float:
    """Mean accept length for conditional per-position rates p_1..p_gamma:
    1 + sum_k prod_{i<=k} p_i."""
    return 1.0 + float(np.cumprod(rates).sum())


def _expit1(x: float) -> float:
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:  # exp(-x) beyond a double: C's 1 / (1 + inf)
        return 0.0


def _logit1(p: float) -> float:
    if p < 0.3 or p > 0.65:
        return math.log(p / (1.0 - p))
    s = 2.0 * (p - 0.5)  # near 0.5, log(p / (1 - p)) loses digits
    return math.log1p(s) - math.log1p(-s)


def expit(x: np.ndarray) -> np.ndarray:
    """The logistic function 1 / (1 + exp(-x)), elementwise; float array of x's shape.

    Bit for bit scipy.special.expit (the same formula on the C library's ``exp``, which
    ``math.exp`` calls; numpy's own vectorised exp differs in the last bit). Written here
    because importing scipy.special costs ~0.2 s of CPU at every start of a spec run, and
    the arrays are a verify window long."""
    a = np.asarray(x, dtype=float)
    return np.array([_expit1(v) for v in a.ravel().tolist()], dtype=float).reshape(a.shape)


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) elementwise (log1p form in [0.3, 0.65]); bit for bit
    scipy.special.logit, without its import (see :func:`expit`). Float array of p's shape."""
    a = np.asarray(p, dtype=float)
    return np.array([_logit1(v) for v in a.ravel().tolist()], dtype=float).reshape(a.shape)


BRENTQ_RTOL = 4 * np.finfo(float).eps
"""scipy.optimize.brentq's default (and smallest allowed) relative tolerance."""


def brentq(f, a: float, b: float, xtol: float = 2e-12, rtol: float = BRENTQ_RTOL, maxiter: int = 100) -> float:
    """A root of ``f`` in [a, b] by Brent's method (R. P. Brent, Algorithms for
    Minimization without Derivatives, 1973, ch. 4): inverse quadratic (or secant) steps
    while they shrink the bracket fast enough, bisection otherwise.

    The iteration is scipy.optimize.brentq's, step for step (same tests, same float
    operations, same defaults), so it returns the very float scipy's does
    (tests/test_acceptance_window.py compares them); it is here so that a speculative run
    does not import scipy.optimize (~0.3 s of CPU) for one solve.

    Args:
        f: float -> float, continuous on [a, b].
        a, b: the bracket; f(a) and f(b) must differ in sign (or one be 0).
        xtol, rtol: stop when half the bracket is below (xtol + rtol |x|) / 2.
        maxiter: iterations before giving up.

    Raises:
        ValueError: f(a) and f(b) have the same sign.
        RuntimeError: no convergence within ``maxiter`` iterations.
    """
    xpre, xcur = float(a), float(b)
    fpre, fcur = float(f(xpre)), float(f(xcur))
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            # keep the best estimate in xcur
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # secant
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # inverse quadratic
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = float(f(xcur))
    raise RuntimeError(f"brentq: no convergence in {maxiter} iterations")


def _population_mean(base_logits: np.ndarray, spread: float,
                     tree_at: tuple[float, int, int] | None = None) -> float:
    """E over z ~ N(0,1) of the mean accept length with logits shifted by spread x z;
    with ``tree_at`` = (sibling_rate, topk, num_draft_tokens), on that draft tree
    (:func:`sim.draft_tree.tree_mean` of each node's rank-1 rates).

    Every quadrature node at once: row i is node i's rates, and each row's running
    product and sum are the operations :func:`mean_accept_length` makes on that node alone
    (the same floats; tests/test_sim_speed_equivalence.py checks it bit for bit)."""
    nodes, weights = _HERMITE
    rates = expit(np.asarray(base_logits, dtype=float)[None, :] + spread * nodes[:, None])
    if tree_at is None:
        means = 1.0 + np.cumprod(rates, axis=1).sum(axis=1)
    else:
        means = np.array([tree_mean(r, *tree_at) for r in rates])
    return float(np.dot(weights, means) / weights.sum())


def rates_from_histogram(hist: list[float], window: int) -> np.ndarray:
    """Conditional acceptance rates from P(accept length = k), k = 1..len(hist).

    p_i = P(L > i) / P(L >= i). Lengths beyond ``window`` are folded into ``window``.
    """
    h = np.zeros(window)
    for k, w in enumerate(hist, start=1):
        h[min(k, window) - 1] += w
    h = h / h.sum()
    tail = h[::-1].cumsum()[::-1]  # P(L >= k), k = 1..window
    rates = np.zeros(window - 1)
    for i in range(1, window):
        rates[i - 1] = tail[i] / tail[i - 1] if tail[i - 1] > 0 else 0.0
    return rates


def extend_rates(rates: np.ndarray, gamma: int, decay: float) -> np.ndarray:
    """Per-position rates for ``gamma`` draft positions from the first ``len(rates)``: cut
    when shorter, and continued past the last given rate as p_(i+1) = p_i x ``decay`` when
    longer (a drafter's later positions are no easier than its earlier ones; decay 1 keeps
    the last rate). Shape (gamma,)."""
    rates = np.asarray(rates, dtype=float)
    if gamma <= len(rates):
        return rates[:gamma].copy()
    tail = rates[-1] * decay ** np.arange(1, gamma - len(rates) + 1)
    return np.concatenate([rates, tail])


def logits_for_mean(target: float, window: int, spread: float, decay: float = 1.0,
                    tree_at: tuple[float, int, int] | None = None) -> np.ndarray:
    """Logits of per-position rates p_i = p_1 x decay^(i-1), i = 1..window-1, with p_1
    solved so that the population mean accept length at ``window`` (request levels spread
    in logit space) is ``target``. decay 1: a constant conditional rate, i.e. a truncated
    geometric accept length, in which position k adds p^k: the diminishing returns of a
    longer window. With ``tree_at`` = (sibling_rate, topk, num_draft_tokens) the rates are
    a draft's rank-1 rates and the mean is the one that draft tree accepts
    (sim/draft_tree.py). Shape (window - 1,).

    Raises:
        ValueError: ``target`` outside [1, window], or out of reach with this decay.
    """
    gamma = window - 1
    if not 1.0 <= target <= window:
        raise ValueError(f"mean_accept_length {target} outside [1, {window}]")
    if target >= window - 1e-9:
        return np.full(gamma, 30.0)
    if target <= 1.0 + 1e-9:
        return np.full(gamma, -30.0)
    shape = np.log(decay) * np.arange(gamma)
    if tree_at is not None:
        # a tree with fewer draft tokens than its depth, or a decaying rate, tops out lower
        top = top_tree_mean(gamma, decay, *tree_at)
        if target > top + TREE_TOP_TOLERANCE:   # the scenario's check refuses these at load
            raise ValueError(f"mean_accept_length {target} is out of reach on a draft tree of topk {tree_at[1]}, "
                             f"{tree_at[2]} draft tokens (at most {top:.6g})")
        if target >= top - 1e-9:
            return np.full(gamma, 30.0)

    def base_logits(x: float) -> np.ndarray:
        if decay == 1.0:
            return np.full(gamma, x)
        return logit(np.clip(expit(x) * np.exp(shape), 1e-12, 1 - 1e-12))

    f = lambda x: _population_mean(base_logits(x), spread, tree_at) - target  # noqa: E731
    if f(30.0) < 0:
        raise ValueError(f"mean_accept_length {target} is out of reach at window {window} with rate_decay {decay}")
    return base_logits(brentq(f, -30.0, 30.0, xtol=1e-10))


def _entropy(seed: int, rid: int, tag: int = seed_streams.ACCEPT) -> list[int] | np.ndarray:
    """A request's accept-draw seed ``[seed, tag, rid]``: ``seed_streams.key("accept", seed, rid)``
    at the default tag, built here without the lookup when both are one uint32 word: the same
    words as a uint32 array, so the same generator (tests/test_sim_speed_equivalence.py).
    ``tag`` ``seed_streams.SHARED_ACCEPT`` gives the old key ``[seed, 3, rid]`` (acceptance
    ``seed_key: shared``)."""
    if 0 <= seed < 1 << 32 and 0 <= rid < 1 << 32:
        return np.array((seed, tag, rid), dtype=np.uint32)
    if tag == seed_streams.ACCEPT:
        return seed_streams.key("accept", seed, rid)
    return [seed, tag, rid]


class AcceptanceModel:
    """Seeded accept-length draws for every request of one run.

    The per-position rates come from the scenario's acceptance section at the window it
    was measured at (``cfg.window``, default the run's window) and are carried to the run's
    window by :func:`extend_rates`, so a window sweep reuses one drafter's rates: a shorter
    window cuts the accept length's tail, a longer one adds positions whose rates keep
    falling (``cfg.rate_decay``) or stay at the last rate. Old scenarios (no ``window``)
    are unchanged.

    A chain drafter's draft tree (``tree``, with ``cfg.sibling_rate`` given) turns each
    request's per-depth rank-1 rates into the tree's accept length (sim/draft_tree.py
    :func:`~sim.draft_tree.tree_rates`), drawn as the same per-position form; a stated mean
    is solved on the tree it was measured on (``cfg.tree``, else ``tree``). Without
    ``sibling_rate`` the tree changes nothing here (the stated rates per depth).

    Args:
        cfg: the scenario's acceptance section.
        window: verify window (gamma + 1); accept lengths lie in 1..window.
        seed: the run seed. Request ``rid``'s draws come from the key ``[seed, tag, rid]``,
            ``tag`` by ``cfg.seed_key`` (sim/seed_streams.py ``ACCEPT``, ``SHARED_ACCEPT``).
        tree: ``(speculative_eagle_topk, speculative_num_draft_tokens)`` of the run's chain
            drafter (sim.config.draft_tree), or None (a block drafter, or no speculation).

    Raises:
        ValueError: ``mean_accept_length`` outside [1, measured window].
    """

    def __init__(self, cfg: AcceptanceConfig, window: int, seed: int,
                 tree: tuple[int, int] | list[int] | None = None) -> None:
        self.window = window
        measured = tuple(cfg.tree) if cfg.tree is not None else (tuple(tree) if tree is not None else None)
        # the tree model only where a tree is wider than a chain: a chain's draws stay the
        # stated rates' own, bit for bit
        self.sibling_rate = cfg.sibling_rate
        self.tree = (tuple(tree) if cfg.sibling_rate is not None and tree is not None and measured is not None
                     and max(tree[0], measured[0]) > 1 else None)
        self.measured_tree = measured if self.tree is not None else None
        self.seed = seed
        self.spread = cfg.request_spread
        self.tag = seed_streams.ACCEPT if cfg.seed_key == "accept" else seed_streams.SHARED_ACCEPT
        gamma = window - 1
        ref = cfg.window or window
        # the last window whose every position's rate the acceptance states (beyond it the
        # rates are continued, extend_rates): given rates state len + 1, a histogram len
        self.measured_window = (len(cfg.per_position_rates) + 1 if cfg.per_position_rates is not None
                                else (cfg.window or len(cfg.histogram)) if cfg.histogram is not None else ref)
        self.rate_decay = cfg.rate_decay
        if gamma <= 0:
            self.base_logits = np.zeros(0)
        elif cfg.per_position_rates is not None:
            rates = extend_rates(np.array(cfg.per_position_rates), gamma, cfg.rate_decay)
            self.base_logits = logit(np.clip(rates, 1e-6, 1 - 1e-6))
        elif cfg.histogram is not None:
            rates = rates_from_histogram(cfg.histogram, ref)
            if cfg.window is not None:
                rates = extend_rates(rates, gamma, cfg.rate_decay)
            self.base_logits = logit(np.clip(rates, 1e-6, 1 - 1e-6))
        else:
            target = cfg.mean_accept_length if cfg.mean_accept_length is not None else 1.0
            tree_at = None if self.measured_tree is None else (self.sibling_rate, *self.measured_tree)
            logits = logits_for_mean(target, ref, self.spread, cfg.rate_decay, tree_at)
            if ref != window:
                logits = logit(np.clip(extend_rates(expit(logits), gamma, cfg.rate_decay), 1e-12, 1 - 1e-12))
            self.base_logits = logits
        self._levels: dict[int, float] = {}
        self._rates: dict[int, np.ndarray] = {}
        self._draws: dict[int, np.ndarray] = {}
        self._sums: dict[int, np.ndarray] = {}   # rid -> running sums of its draws (0 first)
        self._means: dict[int, float] = {}
        self._rngs: dict[int, np.random.Generator] = {}

    @property
    def mean(self) -> float:
        """Population mean accept length (over request levels)."""
        if self.window <= 1:
            return 1.0
        tree_at = None if self.tree is None else (self.sibling_rate, *self.tree)
        return _population_mean(self.base_logits, self.spread, tree_at)

    def _rng(self, rid: int) -> np.random.Generator:
        g = self._rngs.get(rid)
        if g is None:
            g = np.random.default_rng(_entropy(self.seed, rid, self.tag))
            self._rngs[rid] = g
            self._levels[rid] = float(g.standard_normal())
            self._rates[rid] = expit(self.base_logits + self.spread * self._levels[rid])
            if self.tree is not None:
                self._rates[rid] = tree_rates(self._rates[rid], self.sibling_rate, *self.tree)
            self._draws[rid] = np.zeros(0, dtype=np.int64)
        return g

    def level(self, rid: int) -> float:
        """The request's level z (its logit shift is spread x z)."""
        self._rng(rid)
        return self._levels[rid]

    def request_mean(self, rid: int) -> float:
        """The request's own mean accept length (kept once computed)."""
        m = self._means.get(rid)
        if m is None:
            self._rng(rid)
            m = self._means[rid] = mean_accept_length(self._rates[rid]) if self.window > 1 else 1.0
        return m

    def _ensure(self, rid: int, n: int) -> np.ndarray:
        """The request's draws, at least ``n`` of them. They come in blocks of 256 cycles;
        several blocks are drawn in one call (the same uniforms, in the same order, as one
        call per block)."""
        d = self._draws.get(rid)
        if d is not None and n <= len(d):
            return d
        g = self._rng(rid)
        d = self._draws[rid]
        blocks = -(-(n - len(d)) // _BLOCK)
        u = g.random((blocks * _BLOCK, self.window - 1))
        d = np.concatenate([d, 1 + leading_true(u < self._rates[rid])])
        self._draws[rid] = d
        return d

    def draw(self, rid: int, cycle: int) -> int:
        """Accept length of request ``rid`` at its verify cycle ``cycle`` (0-based), in 1..window."""
        if self.window <= 1:
            return 1
        d = self._draws.get(rid)
        if d is None or cycle >= len(d):
            d = self._ensure(rid, cycle + 1)
        return int(d[cycle])

    def made(self, rid: int, cycle: int) -> int | None:
        """:meth:`draw` of ``(rid, cycle)`` when that draw is made already, else None
        (nothing is drawn here: the caller can make several requests' draws at once with
        :meth:`prepare` first)."""
        if self.window <= 1:
            return 1
        d = self._draws.get(rid)
        if d is None or cycle >= len(d):
            return None
        return int(d[cycle])

    def _ensure_many(self, rids: list[int], counts: list[int]) -> None:
        """:meth:`_ensure` for many requests at once: request ``rids[i]`` gets at least
        ``counts[i]`` draws. Each request's generator fills its own rows of one uniform
        array, in the same call order and sizes as :meth:`_ensure` would (so the same
        uniforms); the comparison with each request's rates and the leading-position count
        then run once over all rows instead of once per request. The uniforms are made in
        one buffer, reused from request to request (fresh memory for each costs more than
        the draws)."""
        gamma = self.window - 1
        todo: list[tuple[int, int]] = []   # (rid, rows to draw)
        total = 0
        draws = self._draws
        for rid, n in zip(rids, counts, strict=True):
            d = draws.get(rid)
            have = 0 if d is None else len(d)
            if n > have:
                rows = -(-(n - have) // _BLOCK) * _BLOCK
                todo.append((rid, rows))
                total += rows
        if len(todo) < 2:
            for rid, rows in todo:
                self._ensure(rid, len(draws.get(rid, ())) + rows)
            return
        ok = np.empty((total, gamma), dtype=bool)
        buf = np.empty((max(rows for _, rows in todo), gamma))
        at = 0
        for rid, rows in todo:
            u = buf[:rows]
            self._rng(rid).random(out=u)
            np.less(u, self._rates[rid], out=ok[at : at + rows])
            at += rows
        new = leading_true(ok)
        new += 1
        at = 0
        for rid, rows in todo:
            draws[rid] = np.concatenate((draws[rid], new[at : at + rows]))
            at += rows

    def prepare(self, rids: list[int], cycles: list[int]) -> None:
        """Make each request's generator and its first ``cycles[i]`` draws now (whole
        blocks, as :meth:`draw` would make them later: the same values), so that no
        :meth:`draw` of those cycles makes any.

        For the runtime, which draws each verify's accept lengths inside its launch call
        (sim.device_tokens.DeviceTokens.step): a request's first draw there (a generator and
        a block, made with the host's caches cold after the prefill's eager issue) took
        0.15-0.39 ms (quartiles) in a CPU run of the runtime's loop against 0.04-0.07 ms
        warm, and the first verify launch call after a prefill takes 0.35-0.6 ms more than
        the others on H200 hosts, more the more requests join (docs/measurements/h200-v20.md,
        "The first verify after a prefill"): host time SGLang's forced acceptance does not
        spend (0.5.23 speculative/spec_utils.py ``generate_simulated_accept_index``: one
        length per batch, no state per request).
        Requests are drawn 64 at a time (the uniforms of 64 requests' blocks at most)."""
        if self.window <= 1:
            return
        if len(rids) != len(cycles):
            raise ValueError(f"prepare: {len(rids)} requests, {len(cycles)} cycle counts")
        for i in range(0, len(rids), 64):
            self._ensure_many(list(rids[i : i + 64]), [max(1, int(c)) for c in cycles[i : i + 64]])

    def drawn(self, rid: int) -> int:
        """Accept lengths made so far for request ``rid`` (0 before its first draw)."""
        d = self._draws.get(rid)
        return 0 if d is None else len(d)

    def draws(self, rids: np.ndarray, first_cycles: np.ndarray, n: int) -> np.ndarray:
        """Accept lengths of cycles ``first_cycles[i] .. first_cycles[i] + n - 1`` of request
        ``rids[i]``: int array of shape (n, len(rids)) (the same values :meth:`draw` gives;
        a transposed view: each request's n draws are contiguous)."""
        if self.window <= 1 or n == 0:
            return np.ones((n, len(rids)), dtype=np.int64)
        rid_l, cyc = rids.tolist(), first_cycles.tolist()
        self._ensure_many(rid_l, [c + n for c in cyc])
        draws = self._draws
        return np.stack([draws[rid][c : c + n] for rid, c in zip(rid_l, cyc, strict=True)]).T

    def _running_sums(self, rid: int) -> np.ndarray:
        """int (draws + 1,): 0, then the request's accept lengths summed cycle by cycle
        (kept, and extended when its draws are)."""
        d = self._draws.get(rid)
        if d is None:
            return np.zeros(1, dtype=np.int64)
        s = self._sums.get(rid)
        if s is None or len(s) <= len(d):
            done = 0 if s is None else len(s) - 1
            ext = np.cumsum(d[done:])
            ext += 0 if s is None else int(s[-1])
            s = np.concatenate((np.zeros(1, dtype=np.int64) if s is None else s, ext))
            self._sums[rid] = s
        return s

    def cumulative(self, rids: np.ndarray, first_cycles: np.ndarray, n: int, out: np.ndarray,
                   limits: np.ndarray | None = None) -> np.ndarray:
        """Accept lengths summed from each request's first cycle on: ``out[j, i]`` = the sum
        of request ``rids[i]``'s accept lengths at cycles ``first_cycles[i] ..
        first_cycles[i] + j - 1``, j = 0..n (so ``out[0]`` = 0), capped at ``limits[i]``
        when given (int (m,): a request's output tokens left), written into ``out``, int
        (n + 1, len(rids)), and returned.

        The same integers as ``np.minimum(np.cumsum(draws(rids, first_cycles, n), axis=0),
        limits)`` below a row of zeros. With ``limits`` a request draws only until its sum
        reaches its limit (every accept length is >= 1, so at most ``limit`` cycles; its
        later sums are capped whatever they would be): first about the cycles it needs (its
        own mean accept length, with a margin), then all n for the few that fell short.
        Draws are a request's own seeded sequence, so drawing fewer of them now changes no
        value drawn later. The sums are taken along the rows of an (m, n) grid that holds
        each request's draws from its first cycle (contiguous, zeros past its last draw:
        its later sums stay at its last, which reaches its limit) and laid into ``out`` in
        one transposed copy.
        """
        if self.window <= 1 or n == 0:
            out[:] = np.arange(n + 1, dtype=np.int64)[:, None]
            if limits is not None:
                np.minimum(out, limits, out=out)
            return out
        rid_l, cyc = rids.tolist(), first_cycles.tolist()
        if limits is None:
            self._ensure_many(rid_l, [c + n for c in cyc])
        else:
            lim = limits.tolist()
            self._ensure_many(rid_l, [c + min(n, int(x / self.request_mean(r) * 1.05) + 32) if x > 0 else 0
                                      for r, c, x in zip(rid_l, cyc, lim, strict=True)])
        draws = self._draws
        acc = np.zeros((len(rid_l), n), dtype=np.int64)
        for i, (rid, c) in enumerate(zip(rid_l, cyc, strict=True)):
            d = draws.get(rid)
            if d is not None:
                seg = d[c : c + n]
                acc[i, : len(seg)] = seg
        np.cumsum(acc, axis=1, out=acc)
        if limits is not None:
            reached = acc[:, -1].tolist()
            short = [i for i, (rid, c, x) in enumerate(zip(rid_l, cyc, lim, strict=True))
                     if x > 0 and reached[i] < x and len(draws.get(rid, ())) < c + n]
            if short:
                self._ensure_many([rid_l[i] for i in short], [cyc[i] + n for i in short])
                for i in short:
                    acc[i] = draws[rid_l[i]][cyc[i] : cyc[i] + n]
                acc[short] = np.cumsum(acc[short], axis=1)
        out[0] = 0
        out[1:] = acc.T
        if limits is not None:
            np.minimum(out, limits, out=out)
        return out



def verifies_to_deliver(model: AcceptanceModel, rid: int, tokens: int) -> int:
    """Verify cycles request ``rid`` needs to commit ``tokens`` tokens under ``model``'s
    draws: the least n whose first n accept lengths sum to ``tokens`` or more (0 for
    ``tokens`` <= 0). A request that ends inside a cycle's accepted block still ran that
    cycle (the block is cut at its output length)."""
    if tokens <= 0 or model.window <= 1:
        return max(tokens, 0)
    n = -(-tokens // model.window)   # no fewer than at full acceptance
    while True:
        model._ensure(rid, n)
        hit = np.flatnonzero(model._running_sums(rid)[1:] >= tokens)
        if len(hit):
            return int(hit[0]) + 1
        n *= 2


def recorded_seed_key(cfg: AcceptanceConfig, window: int, seed: int, rids: np.ndarray,
                      verify_tokens: np.ndarray, verifies: np.ndarray,
                      tree: tuple[int, int] | list[int] | None = None) -> str | None:
    """The ``seed_key`` (AcceptanceConfig) whose draws a recorded run followed, read from its
    requests: request ``rids[i]`` committed ``verify_tokens[i]`` tokens by verifies (its
    output less the prefill's token) in ``verifies[i]`` cycles; arrays of shape (n,).

    A run of the runtime forces the accept lengths of its own seed key on the GPU, so each
    request's verify count is what that key's draws need (:func:`verifies_to_deliver`);
    another key's draws give another count for most requests. Returns the key that gives
    the recorded count for the most requests, if that is more than half of them; else None
    (not a forced run, or another acceptance than ``cfg``). ``tree``: the run's draft tree,
    as :class:`AcceptanceModel` takes it."""
    n = len(rids)
    if n == 0 or window <= 1:
        return None
    best, hits = None, 0
    for k in ("accept", "shared"):
        model = AcceptanceModel(cfg.model_copy(update={"seed_key": k}), window, seed, tree)
        got = sum(verifies_to_deliver(model, int(r), int(t)) == int(v)
                  for r, t, v in zip(rids, verify_tokens, verifies, strict=True))
        if got > hits:
            best, hits = k, got
    return best if 2 * hits > n else None
