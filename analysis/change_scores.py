"""How well the simulator predicts what a change does, over every recorded GPU round.

A user of this tool asks "what does my change do": an admission rule, a sync point, a chunk
size, a draft window. The scoreboard (benchmarks/h200_scoreboard.py) scores each figure's
absolute error; this module scores the *change*: within one call's validate CSV, for a cell
measured with its ``base`` arm and another arm, the predicted change of each target figure
(predicted arm / predicted base - 1) against the measured change (measured arm / measured
base - 1). A profile's common error (a step 3 % slow in both arms) cancels in the change, so
this is the direct test of the mechanisms a change moves.

Scores, per figure and overall (:func:`change_table`):

- ``factor_err_pct``: the error of the change factor, (predicted arm / predicted base) /
  (measured arm / measured base) - 1, in %: about the gap in percentage points for a small
  change, and relative for a large one (a TTFT 5.4x the base predicted as 5.5x is 2 %, not
  17 points); ``within``: the pairs with ``|factor_err_pct| <= WITHIN_PCT``;
- direction: among pairs whose measured change is at least :data:`RESOLVED_PCT` in size, those
  predicted the same way, those predicted to stay put and those predicted the other way;
- ``null``: among pairs whose measured change is under :data:`NULL_PCT` in size (the change did
  nothing measurable), the share predicted under :data:`RESOLVED_PCT` in size.

Pairs whose arms the model predicts identical (:func:`same_plan`) are not scored: their
measured change is two runs of one plan, and :func:`noise_table` reads the noise floor of a
measured change from them.

Pairs are formed within one file only (an arm is compared with the base of its own run), and a
pair repeated verbatim in another file (a CSV copied into two folders) counts once, in the
earliest round, as the scoreboard counts figures.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

WITHIN_PCT = 2.0
"""A change factor predicted within this % of the measured one is counted as met: above the
median of how far two runs of one plan differ on the 8B H100/H200 cells (0.3-1.2 %), below
the p90 on TPOT, ITL and throughput (2.9-4.2 %) and above it on the TTFTs (1.1-1.5 %)
(:func:`noise_table`; docs/measurements/scoreboard.md)."""
RESOLVED_PCT = 3.0
"""A measured change at least this large (%) has a direction to agree with."""
NULL_PCT = 1.0
"""A measured change under this (%) in size is read as "no change"."""
BASE_ARM = "base"


def change_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """Every (arm, base) pair of one file's rows, per figure.

    Args:
        rows: validate rows with columns ``file, kind, round, call, page, preset, cell, arm,
            metric, predicted, measured`` (one file's rows share ``file``); figures other
            than the targets are the caller's to drop.

    Returns:
        one row per pair: the tags, ``cell, arm, metric``, ``pred_base``, ``pred_arm``,
        ``meas_base``, ``meas_arm``, ``pred_change_pct``, ``meas_change_pct``, ``gap_pp``
        (predicted minus measured change, points), ``factor_err_pct``, sorted by round and file; pairs whose base figure
        is zero or not finite are left out. De-duplicated on the four figures, cell, arm,
        metric and kind (the earliest round's kept).
    """
    keys = ["file", "kind", "cell", "metric"]
    base = rows[rows.arm == BASE_ARM][[*keys, "predicted", "measured"]].rename(
        columns={"predicted": "pred_base", "measured": "meas_base"})
    arms = rows[rows.arm != BASE_ARM].rename(columns={"predicted": "pred_arm", "measured": "meas_arm"})
    pairs = arms.merge(base, on=keys, how="inner")
    ok = (np.isfinite(pairs[["pred_base", "meas_base", "pred_arm", "meas_arm"]]).all(axis=1)
          & (pairs.pred_base != 0) & (pairs.meas_base != 0))
    pairs = pairs[ok].copy()
    pairs["pred_change_pct"] = 100.0 * (pairs.pred_arm / pairs.pred_base - 1.0)
    pairs["meas_change_pct"] = 100.0 * (pairs.meas_arm / pairs.meas_base - 1.0)
    pairs["gap_pp"] = pairs.pred_change_pct - pairs.meas_change_pct
    pairs["factor_err_pct"] = 100.0 * ((pairs.pred_arm / pairs.pred_base) / (pairs.meas_arm / pairs.meas_base) - 1.0)
    pairs = pairs.sort_values(["round", "file"], kind="stable")
    dedup = ["kind", "cell", "arm", "metric", "pred_base", "pred_arm", "meas_base", "meas_arm"]
    return pairs.drop_duplicates(subset=dedup, keep="first").reset_index(drop=True)


def by_group_and_metric(df: pd.DataFrame, by: list[str], metrics: tuple[str, ...], pooled: bool = True):
    """Yield (``{group column: value}``, metric, rows) for each group of ``df`` by ``by`` (all of
    ``df`` as one group when ``by`` is empty) and each of ``metrics`` the group has rows of,
    then, with ``pooled``, ``"all"`` with the group's every row: the iteration under every
    per-figure table here and in benchmarks/h200_scoreboard.py ``share_table``."""
    for keys, g in (df.groupby(by, sort=True) if by else [((), df)]):
        tags = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
        for metric in (*metrics, "all") if pooled else metrics:
            sel = g if metric == "all" else g[g.metric == metric]
            if not sel.empty:
                yield tags, metric, sel


def same_plan(pairs: pd.DataFrame) -> pd.Series:
    """The pairs whose two arms the model predicts identical (predicted change exactly 0): the
    arm changes nothing the model's mechanisms see in that cell (a delay gate that never
    binds), so the measured change is the two runs' own spread: the noise floor of a change."""
    return pairs.pred_change_pct == 0.0


def noise_table(pairs: pd.DataFrame, metrics: tuple[str, ...], by: list[str] | None = None) -> pd.DataFrame:
    """Over the :func:`same_plan` pairs, per group and figure: ``n``, ``median`` and ``p90`` of
    the measured |change| (%): how far two runs of one plan differ."""
    by = by or []
    out = []
    for tags, metric, sel in by_group_and_metric(pairs[same_plan(pairs)], by, metrics, pooled=False):
        x = sel.meas_change_pct.abs()
        out.append({**tags, "metric": metric, "n": len(x), "median": float(x.median()), "p90": float(x.quantile(0.9))})
    return pd.DataFrame(out, columns=[*by, "metric", "n", "median", "p90"])


def change_table(pairs: pd.DataFrame, metrics: tuple[str, ...], by: list[str] | None = None) -> pd.DataFrame:
    """Scores of the pairs the model predicts to differ (not :func:`same_plan`), per group and
    figure (and ``all`` pooling ``metrics``): ``n``; ``within`` (count with
    ``|factor_err_pct| <= WITHIN_PCT``) and ``share``; ``median_err`` (median |factor error|, %); among the
    ``resolved`` pairs (measured to move at least :data:`RESOLVED_PCT`): ``agree`` (predicted
    the same direction), ``missed`` (predicted under :data:`NULL_PCT`: "no change") and
    ``opposite`` (predicted at least :data:`NULL_PCT` the other way); ``nulls`` (measured to
    move under :data:`NULL_PCT`) and ``null_ok`` (of those, predicted under :data:`RESOLVED_PCT`)."""
    by = by or []
    out = []
    for tags, metric, sel in by_group_and_metric(pairs[~same_plan(pairs)], by, metrics):
        err = sel.factor_err_pct.abs()
        moved = sel[sel.meas_change_pct.abs() >= RESOLVED_PCT]
        same_sign = np.sign(moved.pred_change_pct) == np.sign(moved.meas_change_pct)
        small = moved.pred_change_pct.abs() < NULL_PCT
        still = sel[sel.meas_change_pct.abs() < NULL_PCT]
        out.append({**tags, "metric": metric, "n": len(sel),
                    "within": int((err <= WITHIN_PCT).sum()), "share": float((err <= WITHIN_PCT).mean()),
                    "median_err": float(err.median()), "resolved": len(moved),
                    "agree": int((same_sign & ~small).sum()), "missed": int(small.sum()),
                    "opposite": int((~same_sign & ~small).sum()),
                    "nulls": len(still), "null_ok": int((still.pred_change_pct.abs() < RESOLVED_PCT).sum())})
    return pd.DataFrame(out, columns=[*by, "metric", "n", "within", "share", "median_err", "resolved", "agree",
                                      "missed", "opposite", "nulls", "null_ok"])


def _err(v: float) -> str:
    return f"{v:+.1f} %" if abs(v) <= WITHIN_PCT else f"**{v:+.1f} %**"


def _entry(x) -> str:
    """One pair's table entry: predicted -> measured change and the factor error, or ``=``."""
    if x is None:
        return ""
    if x.pred_change_pct == 0.0:
        return f"= ({x.meas_change_pct:+.1f})"
    return f"{x.pred_change_pct:+.1f} -> {x.meas_change_pct:+.1f} ({_err(x.factor_err_pct)})"


def section(pairs: pd.DataFrame, metrics: tuple[str, ...], labels: dict[str, str], png: str) -> list[str]:
    """The scoreboard page's section on changes (markdown lines): the noise floor, the scores by
    kind and preset, per (cell, arm) the latest round's predicted and measured changes, the
    largest gaps; ``png`` is the scatter's path relative to the page."""
    heads = [labels[m] for m in metrics]

    def score(t: pd.DataFrame, m: str) -> str:
        r = t[t.metric == m]
        if r.empty:
            return ""
        r = r.iloc[0]
        return (f"{100 * r.share:.0f} % ({r.within}/{r.n}), {r.median_err:.1f} %; "
                f"{r.agree}/{r.missed}/{r.opposite} of {r.resolved}")

    lines = ["## What a change does: predicted against measured change", "",
             "Generated with the tables above (analysis/change_scores.py). Within one call, each arm is "
             "set against its cell's `base` arm: predicted change = predicted arm / predicted base - 1, "
             "measured change likewise; the error of the change factor = (predicted arm / predicted base) / "
             "(measured arm / measured base) - 1, about the gap in points for a small change and relative "
             "for a large one. "
             "A profile's error common to both arms cancels here, so this scores the mechanisms a change "
             "moves, which is what a user asks the tool.", "",
             "**Noise floor.** Where the model predicts the two arms identical (the arm changes nothing "
             "its mechanisms see in that cell, e.g. a delay gate that never binds), the measured change is "
             "two runs of one plan. Those pairs are not scored; their |measured change| (median, p90, count):", "",
             "| preset | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    noise = noise_table(pairs[pairs.kind == "plain"], metrics, ["preset"])
    for preset, g in noise.groupby("preset", sort=True):
        by_m = {r.metric: f"{r.median:.1f} %, {r.p90:.1f} % ({r.n})" for r in g.itertuples()}
        lines.append(f"| {preset} | " + " | ".join(by_m.get(m, "") for m in metrics) + " |")
    lines += ["", f"**Scores** of the pairs the model predicts to differ. Each entry: share with the change "
              f"factor within {WITHIN_PCT:.0f} % (count), median |factor error|; then, of the pairs measured to move at least "
              f"{RESOLVED_PCT:.0f} %, predicted the same way / predicted to stay within {NULL_PCT:.0f} % / "
              "predicted the other way.", "",
              "| predictions | " + " | ".join(heads) + " | all five |", "|---|" + "---:|" * (len(heads) + 1)]
    groups = [(k, pairs[pairs.kind == k]) for k in ("plain", "conditioned")]
    groups += [(f"plain, preset {p}", pairs[(pairs.kind == "plain") & (pairs.preset == p)])
               for p in sorted(pairs.preset.unique())]
    for name, g in groups:
        t = change_table(g, metrics)
        if not t.empty:
            lines.append(f"| {name} | " + " | ".join(score(t, m) for m in (*metrics, "all")) + " |")
    lines += ["", f"![predicted vs measured change]({png})", "",
              "**Per cell and arm, the latest round** (plain): predicted -> measured change (%), the "
              f"change factor's error, bold beyond {WITHIN_PCT:.0f} %; `=` marks a pair the model predicts "
              "identical (the measured change in brackets).", "",
              "| cell | arm | round | call | " + " | ".join(heads) + " |", "|---|---|---|---|" + "---|" * len(heads)]
    plain = pairs[pairs.kind == "plain"]
    last = plain.sort_values(["round", "call"], kind="stable").groupby(["cell", "arm"]).tail(1)[
        ["cell", "arm", "round", "call"]]
    for (c, a), g in plain.merge(last, on=["cell", "arm", "round", "call"]).groupby(["cell", "arm"], sort=True):
        by_m = {x.metric: x for x in g.itertuples()}
        first = g.iloc[0]
        lines.append(f"| {c} | {a} | [{first['round']}]({first.page}) | {first.call} | "
                     + " | ".join(_entry(by_m.get(m)) for m in metrics) + " |")
    lines += ["", "**The 20 largest change-factor errors** (plain, pairs the model predicts to differ):", "",
              "| round | call | preset | cell | arm | figure | predicted change | measured change | factor error |",
              "|---|---|---|---|---|---|---:|---:|---:|"]
    scored = plain[~same_plan(plain)]
    worst = scored.assign(a=scored.factor_err_pct.abs()).sort_values("a", ascending=False, kind="stable").head(20)
    for r in worst.itertuples():
        lines.append(f"| [{r.round}]({r.page}) | {r.call} | {r.preset} | {r.cell} | {r.arm} | {labels[r.metric]} | "
                     f"{r.pred_change_pct:+.1f} % | {r.meas_change_pct:+.1f} % | {_err(r.factor_err_pct)} |")
    return lines


def scatter(pairs: pd.DataFrame, metrics: tuple[str, ...], labels: dict[str, str]):
    """A matplotlib figure: predicted against measured change per figure (plain pairs the model
    predicts to differ), symmetric-log axes, the diagonal and the band of a change factor
    within WITHIN_PCT."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plain = pairs[(pairs.kind == "plain") & ~same_plan(pairs)]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    for m in metrics:
        s = plain[plain.metric == m]
        ax.scatter(s.meas_change_pct, s.pred_change_pct, s=6, alpha=0.5, label=f"{labels[m]} (n={len(s)})")
    most = float(plain[["meas_change_pct", "pred_change_pct"]].abs().max().max())   # NaN with no pair
    lim = max(most if np.isfinite(most) else 0.0, 10.0) * 1.1
    x = np.linspace(-lim, lim, 801)
    ax.plot(x, x, color="k", lw=0.8)
    band = WITHIN_PCT / 100.0
    ax.fill_between(x, (100 + x) * (1 - band) - 100, (100 + x) * (1 + band) - 100, color="k", alpha=0.1, lw=0)
    ax.set(xscale="symlog", yscale="symlog", xlim=(-lim, lim), ylim=(-lim, lim),
           xlabel="measured change % (symlog)", ylabel="predicted change % (symlog)",
           title="What each arm changes against its base, every round (plain)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


VERDICTS = ("agrees", "same direction", "predicted no change", "measured no change", "opposite")
"""How a predicted change stands against a measured one (:func:`verdict`)."""


def verdict(pred_change_pct: float, meas_change_pct: float, factor_err_pct: float) -> str:
    """One of :data:`VERDICTS`: ``agrees`` (change factor within :data:`WITHIN_PCT`), else by
    direction: the measured change under :data:`NULL_PCT` (``measured no change``), the
    predicted one under it (``predicted no change``), or the sign of each."""
    if abs(factor_err_pct) <= WITHIN_PCT:
        return "agrees"
    if abs(meas_change_pct) < NULL_PCT:
        return "measured no change"
    if abs(pred_change_pct) < NULL_PCT:
        return "predicted no change"
    return "same direction" if (pred_change_pct > 0) == (meas_change_pct > 0) else "opposite"


PER_CHUNK_ITL = ("the measured client records one ITL per streamed chunk, a verify cycle's accepted block, and the "
                 "prediction one per token")
"""Why :func:`measured_changes` leaves out an ITL figure of a speculating arm measured per chunk."""
NO_VALUE = "no measured value above 0 in both runs"
"""Why :func:`measured_changes` leaves out a figure one of the measured runs has no usable value of."""
NO_PREDICTION = "no predicted value above 0 in both arms"
"""Why :func:`measured_changes` leaves out a figure one of the arms predicts none or 0 of."""


def _usable(*vals) -> bool:
    """Every value a finite number above 0 (a change factor can be read from it)."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0 for v in vals)


def measured_changes(table: pd.DataFrame, measured: dict[str, dict[str, float]], speculating: Collection[str] = (),
                     per_chunk_itl: Collection[str] = (), left_out: dict[str, str] | None = None) -> pd.DataFrame:
    """A comparison's predicted changes beside a server's measured ones.

    Args:
        table: ``analysis.compare.summarize_comparison``'s table (one row per changed arm and
            metric: ``base_arm``, ``arm``, ``metric``, ``base_value``, ``arm_value``).
        measured: per arm, its measured run's summary (bench_serving keys and units); the
            base arm's must be there.
        speculating: the arms whose scenario decodes speculatively.
        per_chunk_itl: the arms whose measured run's ITL statistics are one gap per streamed
            chunk (:func:`sim.bench_serving.itl_per_chunk`). Where one of a pair's arms
            speculates and one of its runs is measured so, the ITL figures are left out: that
            client's ITL is a verify cycle's gap, the prediction's a token's, and an arm that
            moves the accept length moves the two differently.
        left_out: filled with each metric left out for a pair with a measured run and why
            (:data:`PER_CHUNK_ITL`, :data:`NO_VALUE`, :data:`NO_PREDICTION`), in the table's order.

    Returns:
        One row per changed arm with a measured run and metric both runs have a finite
        positive value for: ``arm, metric, pred_change_pct, meas_change_pct, factor_err_pct,
        verdict`` (:func:`verdict`), in the table's order.

    Raises:
        KeyError: the base arm has no measured run.
    """
    rows = []
    for r in table.itertuples():
        got, base = measured.get(r.arm), measured[r.base_arm]
        if got is None:
            continue
        if (str(r.metric).endswith("_itl_ms") and {r.arm, r.base_arm} & set(speculating)
                and {r.arm, r.base_arm} & set(per_chunk_itl)):
            if left_out is not None:
                left_out.setdefault(r.metric, PER_CHUNK_ITL)
            continue
        mb, ma = base.get(r.metric), got.get(r.metric)
        why = NO_VALUE if not _usable(mb, ma) else NO_PREDICTION if not _usable(r.base_value, r.arm_value) else None
        if why is not None:
            if left_out is not None:
                left_out.setdefault(r.metric, why)
            continue
        pred, meas = 100.0 * (r.arm_value / r.base_value - 1), 100.0 * (ma / mb - 1)
        err = 100.0 * ((r.arm_value / r.base_value) / (ma / mb) - 1)
        rows.append({"arm": r.arm, "metric": r.metric, "pred_change_pct": pred, "meas_change_pct": meas,
                     "factor_err_pct": err, "verdict": verdict(pred, meas, err)})
    return pd.DataFrame(rows, columns=["arm", "metric", "pred_change_pct", "meas_change_pct", "factor_err_pct",
                                       "verdict"])


def print_measured_changes(console, changes: pd.DataFrame, base_arm: str, sources: dict[str, str]) -> None:
    """Print :func:`measured_changes`'s table on ``console`` (rich), with the runs it read and
    what a measured change under the noise floor means."""
    from rich.table import Table
    from specsched.analysis.narrow import print_table

    header = ["metric", "arm", "predicted change", "measured change", "change factor error", "verdict"]
    rows = [[r.metric, r.arm, f"{r.pred_change_pct:+.1f} %", f"{r.meas_change_pct:+.1f} %",
             f"{r.factor_err_pct:+.1f} %", r.verdict] for r in changes.itertuples()]
    title = f"predicted against measured change, each arm against {base_arm}"
    caption = ("measured: " + "; ".join(f"{a} {s}" for a, s in sources.items())
               + f". Agrees: the change factor (arm / {base_arm}) within {WITHIN_PCT:.0f} % of the measured one. "
               "Two runs of one plan on an H100/H200 differ by 0.3-1.2 % (median) and 1-4 % (p90) on these figures "
               "with the 8B proxy, by up to 3 % and 9 % with the 1B one (docs/measurements/scoreboard.md, noise "
               "floor): a measured change that small is not resolved by "
               "one run per arm.")
    table = Table(*header, title=title, caption=caption, caption_justify="left")
    for row in rows:
        table.add_row(*row)
    print_table(console, table, header, rows, key_columns=2, title=title, caption=caption)
