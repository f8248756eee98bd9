"""Where a run left its profile's measured grids: the one owner of the range warning.

A profile times forwards on grids (``gpu.extend``, ``gpu.decode``, ``gpu.verify``,
``gpu.draft_step``, ``gpu.draft_inject``), each measured over a range of its two axes.
:class:`sim.profile.GridInterp` prices a query beyond that range by linear extrapolation
(on the context axis from the last segment's non-negative slope: a decode/verify forward
reads every context token's KV once, so its time grows linearly with context; on the batch or
token axis by the least-squares line through its points from half the last one up) and records
the largest such query per axis. A profile that times no eager step prices a batch above
``cuda_graph_max_bs`` as an unpadded graph replay (SGLang runs it eagerly, kernel by kernel:
model_executor/cuda_graph_runner.py ``can_run``).

Those records, from every cost model of a run (one per server of a disaggregated
deployment, two under DP attention with an analytic profile) or of several runs (the arms
and seeds of ``specsched compare``, the points of a sweep), become one warning line per
profile, grid and axis, naming the largest value reached and the measured range
(:func:`warning_lines`), written once when the run or command ends (:func:`write_warnings`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

_EXTEND_CONTEXT = "keys per extend token, prefix plus half the extend"
ROWS_READ = " (the KV read of extends' cached prefixes and mixed steps' running rows)"
"""Suffix of the decode/verify grid's name where the cost model reads it for a KV read other
than a decode/verify step's own (sim/cost_model.py ``rows_context_s``): an extend's requests
reading their cached prefixes, a mixed step's running rows reading their contexts. Its context
warnings name that read, so a short cached prefix is not reported as a verify's context; its
batch axis is warned with the grid's own steps (one line) where the steps run on that grid."""
AXIS_NAMES = {
    "gpu.decode": ("batch", "tokens per request"),
    "gpu.verify": ("batch", "tokens per request"),
    "gpu.draft_step": ("tokens", "tokens per request"),
    "gpu.extend": ("tokens", _EXTEND_CONTEXT),
    "gpu.draft_inject": ("tokens", _EXTEND_CONTEXT),
}
"""Per grid, the name of its ``x`` axis and what its ``context_len`` axis counts
(sim.profile.GpuProfile). A decode/verify batch replayed from a graph is read at its
captured size (10 running requests replay the graph of 12: batch 12), and a verify at a
window ``W`` other than the grid's ``W0`` at ``batch x W / W0`` for its token work
(sim/cost_model.py ``step_s``)."""

PADDED_WIDTH_COUNTS = ("the batch's attention width: its longest request's context padded up to the profile's "
                       "bucket, gpu.attention_width padded_max")
"""What the decode/verify grids' context axis counts under ``gpu.attention_width:
padded_max`` (sim/cost_model.py ``attention_width``): the dense attention's one width for
the batch, which can lie well past any request's own context."""


@dataclass(frozen=True)
class GridExit:
    """The largest query beyond one axis of one grid of a profile.

    Attributes:
        profile: the profile's name.
        grid: the profile key of the grid, e.g. ``gpu.decode``.
        axis: ``x`` or ``context_len`` (the grid's field names).
        extent: the largest queried value beyond the range (requests, tokens); with
            ``below``, the smallest under it.
        lo, hi: the axis' first and last measured points.
        context_counts: what the context axis counted for this query, where it is not
            :data:`AXIS_NAMES`'s (a ``padded_max`` profile reads its decode/verify grid at the
            batch's padded attention width, not at a request's context).
        below: the query fell under the first point: on the context axis, under the
            ``context_span`` a grid states (its ``lo``-``hi``; any grid), where no
            measurement was made either; on the token axis (the extend and injection grids
            only, :meth:`sim.cost_model.CostModel.range_notes`) the grid continues the
            line through its points up to twice the first (a fixed cost plus a per-token one,
            :class:`sim.profile.GridInterp`), at most the first point's time. Each forward
            still runs every layer, graph piece and eager attention kernel whatever its
            tokens: on H200 round 31 (docs/measurements/h200-v31.md, sharegpt-lengths) a grid
            starting at 256 tokens priced 36 extends of 13-254 tokens at 3.8 ms of device time
            (median) by its first segment, unwarned; their GPU spans were 8.0-11.9 ms (bound
            there by the host's issue, so their device time stays unmeasured).
        columns: ``(first, last)`` context columns of a grid that states the contexts its
            measurements spanned (``context_span``, then ``lo``-``hi``). One column
            (first = last) is read at every context: the line says the query was priced at
            it, not extrapolated. Several: past ``hi`` the figure comes from columns no
            measurement made (their provenance says where from).
        x_window: ``(W, W0)`` when the decode/verify grid's batch axis was read for a window
            ``W`` longer than the grid's ``W0``: the batch is then ``requests x W / W0``, the
            token work of the longer window (sim/cost_model.py ``step_s``), which can exceed
            ``max_running_requests`` and be fractional; the line says how many requests it was.
    """

    profile: str
    grid: str
    axis: str
    extent: float
    lo: float
    hi: float
    below: bool = False
    context_counts: str | None = None
    x_window: tuple[int, int] | None = None
    columns: tuple[float, float] | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.profile, self.grid, self.axis + (" below" if self.below else "")

    def line(self) -> str:
        """The warning line, e.g. ``warning: profile h200-1b: decode batch 96 beyond the
        profile's grid (1-64): extrapolated linearly by the line through its points from half its
        last one up``, or
        ``warning: profile h200-8b: extend tokens 13 below the profile's grid (256-8192):
        extrapolated by the line through its first doubling, at most its first point's time``."""
        base = self.grid.removesuffix(ROWS_READ)
        x_name, counts = AXIS_NAMES.get(base, ("x", "tokens per request"))
        if base != self.grid:   # the grid read for other rows' KV (ROWS_READ)
            counts = "mean tokens per request read"
        counts = self.context_counts or counts
        grid = self.grid.removeprefix("gpu.").replace("_", " ")
        if self.below and self.axis == "context_len":
            first, last = self.columns or (self.lo, self.hi)
            how = ("priced at its one column, so the KV read's change with context is not in the figure"
                   if first == last else
                   f"extrapolated linearly below its first column {first:g}" if self.extent < first else
                   f"priced by its columns from {first:g}, which no measurement made")
            return (f"warning: profile {self.profile}: {grid} context {self.extent:g} below the contexts its "
                    f"measurements spanned ({self.lo:g}-{self.hi:g}; {counts}): {how} "
                    "(the profile's provenance says where its growth with context comes from)")
        if self.below:
            return (f"warning: profile {self.profile}: {grid} {x_name} {self.extent:g} below the profile's grid "
                    f"({self.lo:g}-{self.hi:g}): extrapolated by the line through its first doubling, "
                    "at most its first point's time")
        if self.axis == "x":
            what, why = f"{grid} {x_name}", ""
            if self.x_window is not None:
                w, w0 = self.x_window
                why = (f" ({self.extent * w0 / w:g} requests at window {w}, read as batch {self.extent * w0 / w:g} x "
                       f"{w}/{w0} on a grid timed at window {w0})")
        else:
            what, why = f"{grid} context", f" ({counts}; KV bytes read grow linearly with context)"
            if self.columns is not None and self.columns[0] != self.columns[1]:
                past = (f"past its last column {self.columns[1]:g}, extrapolated linearly"
                        if self.extent > self.columns[1] else
                        f"priced by its columns to {self.columns[1]:g}, which no measurement made")
                return (f"warning: profile {self.profile}: {what} {self.extent:g} beyond the contexts its "
                        f"measurements spanned ({self.lo:g}-{self.hi:g}; {counts}): {past} "
                        "(the profile's provenance says where its growth with context comes from)")
            if self.columns is not None:   # one column, read flat
                return (f"warning: profile {self.profile}: {what} {self.extent:g} beyond the contexts its one "
                        f"measured column spanned ({self.lo:g}-{self.hi:g}; {counts}): priced at that column, "
                        "so the KV read's growth with context is not in the figure; profile more context "
                        "columns (specsched profile --contexts) or fit an analytic profile")
        how = ("by the line through its points from half its last one up" if self.axis == "x"
               else "from the last measured segment")
        return (f"warning: profile {self.profile}: {what} {self.extent:g} beyond the profile's grid "
                f"({self.lo:g}-{self.hi:g}): extrapolated linearly {how}{why}")


@dataclass(frozen=True)
class EagerUnpriced:
    """Eager decode/verify steps the profile cannot price (it times no eager step).

    Attributes:
        profile: the profile's name.
        why: which steps run eagerly, e.g. ``batches above server.cuda_graph_max_bs (64) run eagerly``.
    """

    profile: str
    why: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.profile, "eager", ""

    def line(self) -> str:
        return (f"warning: profile {self.profile}: {self.why}, and the profile times no eager step "
                "(gpu.eager_factor 1, no gpu.eager_overhead_s or gpu.eager_host_issue_s): they are priced as "
                "graph replays without padding, so eager can come out faster than a graph")


@dataclass(frozen=True)
class DecodeFromVerify:
    """Plain decoding priced on a profile that times no decode forward: its ``gpu.verify``
    read at window 1 (sim/cost_model.py ``CostModel.step_at``). A profile fitted on
    speculative runs only (the MI355X reference's) can still answer "what without
    speculation?"; the answer carries whatever a verify cycle runs besides the target
    forward and the draft forward.

    Attributes:
        profile: the profile's name.
        window: the verify grid's window ``W0`` (``gpu.verify_window``).
        draft_removed: the grid's draft forward was taken out (``gpu.draft_step`` given).
    """

    profile: str
    window: int
    draft_removed: bool

    @property
    def key(self) -> tuple[str, str, str]:
        return self.profile, "decode-from-verify", ""

    def line(self) -> str:
        draft = ("less its draft forward (gpu.draft_step)" if self.draft_removed
                 else "with its draft forward still in (no gpu.draft_step to take it out)")
        return (f"warning: profile {self.profile}: no gpu.decode, so each plain decode step is priced as a "
                f"verify of window 1 on gpu.verify (its token work at batch x 1/{self.window}, each request's "
                f"KV read kept) {draft}; a verify's own sampling and acceptance work stays in: time decode "
                f"steps (specsched profile) and give them as gpu.decode to price them (calibrate --from refuses a "
                f"decode factor for runs like this one: it would rescale gpu.verify)")


@dataclass(frozen=True)
class AcceptanceBeyond:
    """A verify window longer than the one the scenario's acceptance states rates for
    (sim/acceptance.py ``AcceptanceModel.measured_window``): its later positions' rates are
    continued from the last stated one (``extend_rates``: x ``rate_decay`` a position), so
    what the longer window gains rests on that continuation, not on a measurement.

    Attributes:
        window: the longest verify window run.
        measured: the window the acceptance states.
        rate_decay: ``acceptance.rate_decay``.
        block: the drafter is a block drafter (DSpark, DFlash), whose window SGLang ties to
            the draft checkpoint's block size.
        algorithm: the speculative algorithm's name (``dflash`` words the block-size line
            for DFlash; any other block drafter's is DSpark's).
    """

    window: int
    measured: int
    rate_decay: float
    block: bool
    algorithm: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return "", "acceptance", ""

    def line(self) -> str:
        decay = ("the same rate" if self.rate_decay == 1 else f"x {self.rate_decay:g} a position")
        if not self.block:
            block = ""
        elif self.algorithm == "dflash":
            # sglang 0.5.23 _handle_dflash: the window is the block size, taken from
            # --speculative-num-draft-tokens or --speculative-dflash-block-size as given, the draft
            # checkpoint's block_size read only when neither is
            block = ("; SGLang's DFlash takes the window as its block size (--speculative-num-draft-tokens or "
                     "--speculative-dflash-block-size, arg_groups/speculative_hook.py _handle_dflash) without "
                     "checking it against the draft checkpoint's block_size: a drafter at a block size it may not "
                     "have been trained for")
        else:
            block = ("; SGLang runs a DSpark window other than the draft checkpoint's block size + 1 only with "
                     "--speculative-dspark-block-size (arg_groups/speculative_hook.py _handle_dspark), a drafter "
                     "at a block size it was not trained for")
        first = self.measured + 1
        positions = (f"position {first} continues" if first == self.window
                     else f"positions {first}-{self.window} continue")
        return (f"warning: acceptance: verify window {self.window} is longer than the {self.measured} the acceptance "
                f"states rates for: {positions} the last stated rate "
                f"({decay}, acceptance.rate_decay), so the longer window's gain is extrapolated{block}")


@dataclass(frozen=True)
class AcceptanceTreeCut:
    """A draft tree (``speculative_eagle_topk`` > 1) run below the window its acceptance states
    rates for: the tree accepts at most ``speculative_num_steps + 1`` tokens per verify (its
    depth + the bonus token, whatever its node count ``speculative_num_draft_tokens``), so the
    stated rates past that depth are cut and the run's mean accept length falls below the
    stated one. A window copied from the node count reads as such a cut.

    Attributes:
        measured: the window the acceptance states (``acceptance.window``, or its rates' length).
        depth: ``speculative_num_steps + 1``, the most tokens one verify accepts (or
            ``speculative_num_draft_tokens``, a tree of fewer drafts than steps: ``capped``).
        stated: the stated mean accept length (None: rates or a histogram were given).
        run_mean: the population mean accept length the run draws from.
        capped: the tree's draft tokens, not its steps, bound the depth.
    """

    measured: int
    depth: int
    stated: float | None
    run_mean: float
    capped: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return "", "acceptance-tree", ""

    def line(self) -> str:
        run = f"{self.run_mean:.3g}"
        if self.stated is not None:
            # as many digits as tell the run's mean from the stated one (3.396, not 3.4 again)
            digits = next((k for k in range(3, 7) if f"{self.run_mean:.{k}g}" != f"{self.stated:g}"), 6)
            run = f"{self.run_mean:.{digits}g}"
        stated = f" instead of the stated {self.stated:g}" if self.stated is not None else ""
        return (f"warning: acceptance: acceptance.window {self.measured} is longer than the most a draft tree accepts "
                + (f"per verify, speculative_num_draft_tokens = {self.depth} (a tree of fewer drafts than its steps "
                   f"accepts no deeper than its drafts, + the bonus token)" if self.capped else
                   f"per verify, speculative_num_steps + 1 = {self.depth} (its depth + the bonus token, whatever "
                   f"speculative_num_draft_tokens says)")
                + f": the stated rates are cut there and the run's mean accept "
                f"length is {run}{stated}; a tree's acceptance is measured at its depth + 1 "
                f"(acceptance.window {self.depth})")


@dataclass(frozen=True)
class AcceptanceTreeShape:
    """A chain drafter run on another draft tree than the one its acceptance was measured on
    (``acceptance.tree``, pinned by an arm, ``--set`` or sweep axis that moved
    ``speculative_eagle_topk`` or ``speculative_num_draft_tokens``): the run prices the
    run's tree (its draft steps over ``topk`` candidates, a verify over its nodes) but draws
    the stated per-depth rates, so its accept length is the measured tree's. SGLang 0.5.23
    verifies a tree by keeping the longest root-to-leaf path that matches the target
    (speculative/eagle_utils.py ``eagle_sample``, ``verify_tree_greedy_func`` over every
    candidate of each depth): more candidates accept more, by an amount only a measurement
    on that tree gives.

    With ``acceptance.sibling_rate`` the accept length is carried to the run's tree by the
    tree model (sim/draft_tree.py), and the line says that instead.

    With ``sibling_rate`` and no other measured tree (``measured`` None), the stated
    ``per_position_rates`` are the draft's rank-1 rates and the run's accept length on its
    own tree is the tree model's: the line says that.

    Attributes:
        measured: ``[topk, draft tokens]`` the acceptance states, or None (rank-1 rates on
            the run's own tree).
        run: ``[topk, draft tokens]`` the run drafts.
        run_mean: the population mean accept length the run draws from.
        sibling_rate: ``acceptance.sibling_rate``, or None.
    """

    measured: tuple[int, int] | None
    run: tuple[int, int]
    run_mean: float
    sibling_rate: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return "", "acceptance-tree-shape", f"{self.run[0]:04d}-{self.run[1]:04d}"

    def line(self) -> str:
        k1, n1 = self.run
        if self.measured is None:
            return (f"warning: acceptance: per_position_rates are the draft's rank-1 rates per depth; on this run's "
                    f"draft tree (speculative_eagle_topk {k1}, {n1} draft tokens) its accept length "
                    f"({self.run_mean:.3g}) is the tree model's, each next-ranked candidate catching "
                    f"acceptance.sibling_rate {self.sibling_rate:g} of what the higher ones miss (sim/draft_tree.py), "
                    f"not a measurement on this tree")
        k0, n0 = self.measured
        if self.sibling_rate is not None:
            return (f"warning: acceptance: measured on a draft of speculative_eagle_topk {k0}, "
                    f"speculative_num_draft_tokens {n0} (acceptance.tree); this run drafts topk {k1}, {n1} tokens: "
                    f"its accept length ({self.run_mean:.3g}) is the tree model's, each next-ranked candidate "
                    f"catching acceptance.sibling_rate {self.sibling_rate:g} of what the higher ones miss "
                    f"(sim/draft_tree.py), not a measurement on this tree")
        return (f"warning: acceptance: measured on a draft of speculative_eagle_topk {k0}, "
                f"speculative_num_draft_tokens {n0} (acceptance.tree); this run drafts topk {k1}, {n1} tokens: "
                f"the cost is this tree's but the accept length ({self.run_mean:.3g}) is carried per depth from the "
                f"measured one, while SGLang's tree verify keeps the longest matching path over every candidate "
                f"(speculative/eagle_utils.py eagle_sample), so a wider tree accepts more than this run draws: "
                f"state the acceptance measured on this tree (acceptance.tree [{k1}, {n1}])")


@dataclass(frozen=True)
class AcceptanceSiblingUnread:
    """``acceptance.sibling_rate`` given beside a ``mean_accept_length`` with no
    ``acceptance.tree``: the mean is taken as measured on the run's own draft tree and drawn as
    stated there (:class:`sim.acceptance.AcceptanceModel`), so the sibling rate leaves the mean
    as stated (only the draws' per-depth shape follows the tree model).
    A user who switched a scenario to a wider EAGLE tree by ``--set`` and added a sibling rate
    expects the tree to accept more; the line says what to state for that.

    Attributes:
        run: ``[topk, draft tokens]`` the run drafts.
        sibling_rate: the unread ``acceptance.sibling_rate``.
    """

    run: tuple[int, int]
    sibling_rate: float

    @property
    def key(self) -> tuple[str, str, str]:
        return "", "acceptance-sibling-unread", f"{self.run[0]:04d}-{self.run[1]:04d}"

    def line(self) -> str:
        k, n = self.run
        return (f"warning: acceptance: sibling_rate {self.sibling_rate:g} leaves the mean accept length as stated: "
                f"mean_accept_length is taken as measured on this run's own draft tree (speculative_eagle_topk {k}, "
                f"{n} draft tokens), only its draws' shape follows the tree model; to carry it from the tree it was "
                "measured on, state that tree (acceptance.tree [topk, draft tokens]), or give per_position_rates as "
                "the draft's rank-1 rates")


RangeNote = GridExit | EagerUnpriced | DecodeFromVerify | AcceptanceBeyond | AcceptanceTreeCut | AcceptanceTreeShape | AcceptanceSiblingUnread


def merged(notes: Iterable[RangeNote]) -> list[RangeNote]:
    """One note per (profile, grid, axis and side): the largest extent of a :class:`GridExit`
    beyond its grid, the smallest under it, the first :class:`EagerUnpriced` of a profile;
    sorted by (profile, grid, axis), so runs finishing in any order (a pool's) give the same
    lines."""
    out: dict[tuple[str, str, str], RangeNote] = {}
    for n in notes:
        old = out.get(n.key)
        if old is None or (isinstance(n, GridExit) and isinstance(old, GridExit)
                           and (n.extent < old.extent if n.below else n.extent > old.extent)) or (
                isinstance(n, AcceptanceBeyond) and isinstance(old, AcceptanceBeyond) and n.window > old.window):
            out[n.key] = n
    return [out[k] for k in sorted(out)]


def warning_lines(notes: Iterable[RangeNote]) -> list[str]:
    """One line per (profile, grid, axis) of ``notes`` (:func:`merged`)."""
    return [n.line() for n in merged(notes)]


def write_warnings(notes: Iterable[RangeNote], out: TextIO | None = None) -> list[str]:
    """Write :func:`warning_lines` of ``notes`` to ``out`` (default: the stderr of the
    moment of the call) and return them."""
    return _print_lines(warning_lines(notes), out)


def _print_lines(lines: list[str], out: TextIO | None) -> list[str]:
    """Print ``lines`` to ``out`` (default: the stderr of the moment of the call); return them."""
    stream = sys.stderr if out is None else out
    for line in lines:
        print(line, file=stream)
    return lines


def write_labelled_warnings(notes: Sequence[tuple[RangeNote, str]], labels: Sequence[str], what: str,
                            most: int = 6, out: TextIO | None = None) -> list[str]:
    """:func:`write_warnings` for a command of several runs (a sweep's points, a comparison's
    arms): each line names the runs' labels it came from when not every label's runs gave it,
    so a window sweep's "verify window 8 is longer than the 4 the acceptance states" does not
    read as if every point ran window 8.

    Args:
        notes: (range note, the label of the run that gave it) pairs.
        labels: every label, in the command's order (a label may repeat: counted once).
        what: what the labels name, plural ("points", "arms").
        most: labels named before the rest are counted.

    Returns:
        The lines written, in :func:`merged`'s order."""
    where: dict[tuple[str, str, str], dict[str, None]] = {}
    for n, label in notes:
        where.setdefault(n.key, {})[label] = None
    every = list(dict.fromkeys(labels))
    lines = []
    for n in merged(n for n, _ in notes):
        gave = [x for x in every if x in where[n.key]]
        line = n.line()
        if len(gave) < len(every) and all(every):
            more = f" and {len(gave) - most} more" if len(gave) > most else ""
            line += f" (at {len(gave)} of {len(every)} {what}: {', '.join(gave[:most])}{more})"
        lines.append(line)
    return _print_lines(lines, out)
