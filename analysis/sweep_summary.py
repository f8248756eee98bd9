"""A sweep's summary and its figure: one row per grid point with the key metrics across
seeds (with confidence intervals), and metric-vs-parameter lines.

Across seeds every metric is summarised as everywhere else (:func:`analysis.stats.across_seeds`):
a percentile of a latency is the percentile of the pooled samples of all seeds (from the
sweep's samples file, :mod:`analysis.sweep_store`), labelled "pooled", with a bootstrap
interval over seeds; any other metric is the mean over seeds with its Student-t interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from specsched.analysis.compare import ARRIVAL_SPAN, RATE_BOUND_METRICS, rate_bound
from specsched.analysis.stats import (
    PooledSamples,
    across_seeds,
    pct_change_ci,
    percentile_metric,
    seeds_to_resolve,
)

KEY_METRICS = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "median_itl_ms",
               "verify_cycles_per_s", "accept_length")
"""The metrics of the summary table and the plot, when the sweep has them (a run without
speculative decoding has no verify cycles or accept length: those columns are left out).
``accept_length`` is the mean accept length a run achieved (tokens committed by verify
steps per request decoding in them, :func:`specsched.sim.metrics` ``accept_length``; the
``accept len`` of SGLang's decode log lines), so a window sweep shows what each window buys
next to what it costs in verify cycles/s."""
SUMMARY_COLUMNS = ("metric", "across_seeds", "value", "ci_low", "ci_high", "seeds")
_TAIL = ("seed", "metric", "value", "point")


def parameters(table: pd.DataFrame) -> list[str]:
    """The columns that identify a point (``arm``, the grid keys, fixed overrides)."""
    return [c for c in table.columns if c not in ("scenario", *_TAIL)]


def summarize_sweep(table: pd.DataFrame, samples: pd.DataFrame | None = None,
                    metrics: Sequence[str] | None = None, confidence: float = 0.95,
                    n_resamples: int = 1000) -> pd.DataFrame:
    """One row per (point, metric): the metric over the point's seeds and its interval.

    Args:
        table: a sweep's tidy table (:func:`analysis.sweep.read_sweep`).
        samples: its samples (:func:`analysis.sweep_store.read_samples`); without them a
            percentile is the mean over seeds (``across_seeds = "mean"``).
        metrics: default :data:`KEY_METRICS` (those with a value in some run).
        confidence: interval level.
        n_resamples: bootstrap resamples for a pooled percentile's interval.

    Returns:
        Columns: ``point``, the parameter columns, then :data:`SUMMARY_COLUMNS`; points in
        the table's order.
    """
    finite = np.isfinite(pd.to_numeric(table["value"], errors="coerce").to_numpy(float))
    present = set(table.loc[finite, "metric"])   # a metric no run has (no speculation: no accept length) is left out
    metrics = [m for m in (metrics or KEY_METRICS) if m in present]
    params = parameters(table)
    by_point = {}
    if samples is not None and len(samples):
        for (pid, lat), g in samples.groupby(["point", "latency"], sort=False):
            by_point[(pid, lat)] = {int(s): (gg["value_ms"].to_numpy(float), gg["count"].to_numpy(np.int64))
                                    for s, gg in g.groupby("seed")}
    rows = []
    for pid in dict.fromkeys(table["point"]):
        t = table[table["point"] == pid]
        first = t.iloc[0]
        for m in metrics:
            v = t[t["metric"] == m].sort_values("seed")
            seeds = [int(s) for s in v["seed"]]
            pm = percentile_metric(m)
            pool = None
            if pm is not None:
                per = by_point.get((pid, pm[0]), {})
                if seeds and all(s in per for s in seeds):
                    pool = PooledSamples([per[s] for s in seeds])
            val, lo, hi = across_seeds(v["value"].to_numpy(float), pool, pm[1] if pool is not None else None,
                                       confidence, n_resamples=n_resamples)
            # the seeds the figure rests on: a seed whose value is NaN (no sample) counts for nothing
            used = len(seeds) if pool is not None else int(np.isfinite(v["value"].to_numpy(float)).sum())
            rows.append({"point": pid, **{p: first[p] for p in params}, "metric": m,
                         "across_seeds": "pooled" if pool is not None else "mean", "value": val,
                         "ci_low": lo, "ci_high": hi, "seeds": used})
    return pd.DataFrame(rows, columns=["point", *params, *SUMMARY_COLUMNS])


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _cell(v: Any) -> str:
    """A parameter's value as the table and the best-point line write it: ``null`` for a point
    swept at null (held as a missing value, which printed as ``<NA>``)."""
    return "null" if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v)) else str(v)


def _per_seed(table: pd.DataFrame | None, metric: str) -> dict[Any, dict[int, float]]:
    """``metric``'s value per point and seed in a sweep's tidy table (empty without one)."""
    if table is None or not len(table):
        return {}
    t = table[table["metric"] == metric]
    vals = pd.to_numeric(t["value"], errors="coerce").to_numpy(float)
    out: dict[Any, dict[int, float]] = {}
    for pid, seed, v in zip(t["point"], t["seed"], vals, strict=True):
        if math.isfinite(v):
            out.setdefault(pid, {})[int(seed)] = float(v)
    return out


def best_text(summary: pd.DataFrame, metric: str = "output_throughput",
              table: pd.DataFrame | None = None) -> str | None:
    """One line naming the point with the highest ``metric`` (tokens/s by default) and the
    points these seeds do not tell apart from it (a window sweep's neighbours of the best
    window usually are); None with fewer than two points or without the metric. Points are
    named by the parameters that vary.

    With the sweep's tidy ``table`` (per-seed values) a point is compared with the best as
    ``specsched compare`` compares two arms: every point of a sweep runs the same seeds, so
    seed s draws the same arrivals, lengths and acceptance at both points and the change is
    taken pair by pair (:func:`analysis.stats.pct_change_ci`, paired); a point whose paired
    interval of the change holds 0 is not told apart. Comparing with the best point's own
    interval instead, which holds the run-to-run spread that pairing cancels, called a
    +1 % change that compare resolves "not told apart". Without the table, or for a point
    with fewer than two seeds in common with the best, a point is not told apart when its
    value lies inside the best point's interval. Where more seeds would likely tell paired
    points apart, the line ends with about how many (:func:`analysis.stats.seeds_to_resolve`,
    the largest over those points)."""
    m = summary[(summary["metric"] == metric) & np.isfinite(summary["value"].to_numpy(float))]
    if len(m) < 2:
        return None
    params = [c for c in summary.columns if c not in ("point", *SUMMARY_COLUMNS)]
    params = [p for p in params if m[p].astype(str).nunique() > 1] or params

    def name(r: pd.Series) -> str:
        return " ".join(f"{p}={_cell(r[p])}" for p in params)

    best = m.loc[m["value"].idxmax()]
    unit = " tok/s" if metric.endswith("throughput") else ""
    text = f"highest {metric}: {name(best)}, {_num(best['value'])}{unit}"
    lo, hi = float(best["ci_low"]), float(best["ci_high"])
    if math.isfinite(lo) and math.isfinite(hi):
        text += f" [{_num(lo)}, {_num(hi)}]"
    per_seed = _per_seed(table, metric) if set(m["across_seeds"]) == {"mean"} else {}
    base = per_seed.get(best["point"], {})
    paired, inside = [], []
    needed: list[int | None] = []     # per paired point not told apart: seeds that would tell it apart
    for _, r in m.iterrows():
        if r["point"] == best["point"]:
            continue
        other = per_seed.get(r["point"], {})
        common = sorted(set(base) & set(other))
        if len(common) >= 2:
            pct, clo, chi = pct_change_ci([base[s] for s in common], [other[s] for s in common], paired=True)
            if not (clo > 0 or chi < 0):   # a NaN interval tells nothing apart either
                paired.append(f"{name(r)} ({_num(r['value'])}, {pct:+.2f} % [{clo:+.2f}, {chi:+.2f}])")
                needed.append(seeds_to_resolve([base[s] for s in common], [other[s] for s in common]))
        elif math.isfinite(lo) and math.isfinite(hi) and lo <= r["value"] <= hi:
            inside.append(f"{name(r)} ({_num(r['value'])})")
    # each point is named under the test that judged it: a point with fewer than two seeds
    # in common with the best (the others' values NaN) was not paired
    groups = []
    if paired:
        groups.append("(paired by seed, the change holds 0): " + ", ".join(paired))
    if inside:
        how = "inside that interval" + (", fewer than two seeds in common" if paired else "")
        groups.append(f"({how}): " + ", ".join(inside))
    if groups:
        text += "; not told apart by these seeds " + "; ".join(groups)
    resolvable = [n for n in needed if n is not None]
    if resolvable:
        # the next run's --seeds: an estimate from the per-seed spread these seeds show (a
        # tie that would need over MAX_SEEDS_SUGGESTED is left a tie)
        which = "them" if len(resolvable) == len(needed) else f"{len(resolvable)} of them"
        text += f"; about {max(resolvable)} seeds would tell {which} apart (--seeds {max(resolvable)})"
    if table is not None and metric in RATE_BOUND_METRICS and _all_rate_bound(table, m["point"]):
        text += (f"; but every point is rate-bound (each run ends within 10 % of its duration after its last "
                 f"arrival): its {metric} measures the arrivals offered, not what the server can serve; compare "
                 "the points by their latencies")
    return text


def _all_rate_bound(table: pd.DataFrame, points: Sequence[Any]) -> bool:
    """Whether every point's runs in the sweep's tidy ``table`` are rate-bound as ``compare``
    judges an arm (:func:`analysis.compare.rate_bound`: open-loop runs that kept pace with their
    arrivals, so their throughputs measure the arrival rate). A sweep over burstiness at one
    rate named its highest throughput at burstiness 0.25 (2,030 against 1,782 tok/s), a
    difference of when the last arrivals fell, which ``compare`` calls rate-bound. False where
    a point has no arrival span (closed loop, burst, a sweep file written before spans were
    kept)."""
    t = table[table["metric"].isin(("duration", ARRIVAL_SPAN))]
    if not len(t):
        return False
    wide = t.pivot_table(index=["point", "seed"], columns="metric", values="value", aggfunc="first")
    for pid in points:
        if pid not in wide.index.get_level_values(0) or not rate_bound(wide.loc[pid]):
            return False
    return True


def _wide(summary: pd.DataFrame) -> tuple[list[str], list[str], list[list[str]]]:
    params = [c for c in summary.columns if c not in ("point", *SUMMARY_COLUMNS)]
    metrics = list(dict.fromkeys(summary["metric"]))
    heads = []
    for m in metrics:
        how = set(summary.loc[summary["metric"] == m, "across_seeds"])
        heads.append(f"{m} (pooled)" if how == {"pooled"} else m)
    rows = []
    for pid in dict.fromkeys(summary["point"]):
        s = summary[summary["point"] == pid]
        cells = [_cell(s.iloc[0][p]) for p in params] + [str(int(s["seeds"].max()))]
        for m in metrics:
            r = s[s["metric"] == m].iloc[0]
            ci = "" if not math.isfinite(r["ci_low"]) else f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
            cells.append(_num(r["value"]) + ci)
        rows.append(cells)
    return [*params, "seeds"], heads, rows


def _rich_parts(summary: pd.DataFrame, title: str, confidence: float
                ) -> tuple[list[str], list[str], list[list[str]], str, str]:
    """(parameter columns with "seeds", metric headers, rows, title, caption) of
    :func:`to_rich_table`."""
    cols, heads, rows = _wide(summary)
    n = len(cols) - 1   # the parameter columns (then "seeds")
    fixed = [i for i in range(n) if len(rows) > 1 and len({r[i] for r in rows}) == 1]
    if fixed:   # a parameter equal at every point goes to the title: room for the metrics
        title += " (at every point: " + ", ".join(f"{cols[i]}={rows[0][i]}" for i in fixed) + ")"
        cols = [c for i, c in enumerate(cols) if i not in fixed]
        rows = [[v for i, v in enumerate(r) if i not in fixed] for r in rows]
    caption = (f"value [{confidence:.0%} CI] over seeds: mean; (pooled) = percentile of the pooled samples of all "
               "seeds, seed-bootstrap CI")
    return cols, heads, rows, title, caption


def print_summary(console: Any, summary: pd.DataFrame, title: str = "Sweep summary", confidence: float = 0.95) -> None:
    """Print the summary on ``console`` (rich): the table (:func:`to_rich_table`) where it fits
    the console's width, else one block per point headed by its parameters
    (``key=value``; :func:`analysis.narrow.print_table`): at 80 columns the metrics' columns
    were squeezed to six characters, every value and CI cut."""
    from specsched.analysis.narrow import print_table

    parts = _rich_parts(summary, title, confidence)
    cols, heads, rows, full_title, caption = parts
    keys = len(cols) - 1
    named = [([f"{c}={v}" for c, v in zip(cols[:keys], r[:keys], strict=True)] or [f"point {i + 1}"]) + r[keys:]
             for i, r in enumerate(rows)]
    header = [*cols, *heads] if keys else ["point", *cols, *heads]
    print_table(console, _rich_table(*parts), header, named, key_columns=max(keys, 1),
                title=full_title, caption=caption)


def to_rich_table(summary: pd.DataFrame, title: str = "Sweep summary", confidence: float = 0.95) -> Any:
    """The summary as a rich Table: one row per point, ``value [CI]`` per metric; a
    parameter with one value at every point (the arm, a ``--set`` key) is named in the
    title instead of a column."""
    return _rich_table(*_rich_parts(summary, title, confidence))


def _rich_table(cols: list[str], heads: list[str], rows: list[list[str]], title: str, caption: str) -> Any:
    from rich.table import Table

    t = Table(title=title, caption=caption)
    for c in cols:
        t.add_column(c, justify="left" if c != "seeds" else "right", overflow="fold")   # a long key folds, not cut
    for h in heads:
        t.add_column(h, justify="right")
    for r in rows:
        t.add_row(*r)
    return t


def to_markdown(summary: pd.DataFrame) -> str:
    """The summary as a markdown table (one line per point)."""
    cols, heads, rows = _wide(summary)
    header = [*cols, *heads]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if h in cols[:-1] else "---:" for h in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- figure

def _x_axis(summary: pd.DataFrame, params: list[str]) -> str | None:
    """The parameter on the x axis: the one with most distinct values, numeric first."""
    best, key = None, None
    for p in params:
        vals = summary[p].dropna().unique()
        numeric = pd.api.types.is_numeric_dtype(summary[p]) and not pd.api.types.is_bool_dtype(summary[p])
        k = (len(vals) > 1, numeric, len(vals))
        if key is None or k > key:
            best, key = p, k
    return best


def _plain(v: Any) -> bool:
    """A value that is a position on a numeric axis: finite and not negative (the scenario
    keys' negative values are sentinels: chunked_prefill_size -1 turns chunking off)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(v) and v >= 0


def _plain_axis(col: pd.Series) -> bool:
    return all(_plain(v) for v in col.dropna().unique())


def _label(v: Any) -> str:
    """A tick label: ``inf``, ``-1``, ``8192`` (an integral float without its ``.0``), ``null``
    for a point swept at null (``--grid server.prefill_max_requests=null,1,4``: SGLang's None),
    which the table holds as a missing value."""
    if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v)):
        return "null"
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def seeds_text(summary: pd.DataFrame) -> str:
    """The sweep plot's note on seeds and bands: "3 seeds per point" ("2 to 3 seeds per point"
    when points differ), and with one seed that no point has a band."""
    most = int(summary["seeds"].max()) if len(summary) else 0
    least = int(summary["seeds"].min()) if len(summary) else 0
    if most <= 1:
        return f"{most} seed per point: no confidence band"
    count = f"{most} seeds per point" if least == most else f"{least} to {most} seeds per point"
    return f"{count}; band = 95% CI: of the mean, or seed bootstrap of the pooled percentile"


def plot_sweep(summary: pd.DataFrame, x: str | None = None, slos: Sequence[Any] = ()) -> Any:
    """Metric-vs-parameter lines of a sweep summary (:func:`summarize_sweep`).

    One panel per metric; ``x`` (default: the parameter with most values, numeric first) on
    the horizontal axis (log scale when positive and spanning more than two decades); one
    line per combination of the other parameters, with its confidence band, each with its own
    colour, dash style and hollow marker (cycled: 28 series before a pair repeats; earlier
    series' markers larger) so that lines lying on top of each other stay readable; a
    parameter of whole numbers has its ticks at the swept values; percentile
    panels say "pooled over seeds". A parameter whose values are names (a sync mode, a
    policy) has no order between them: its points are markers with their intervals as error
    bars, side by side per combination, not joined by lines that would read as a trend. The
    value axis writes whole numbers (no offset such as "+1.5368e3" over ticks 0.015-0.055).
    Each of ``slos`` (:class:`analysis.slo.Slo`) draws its bound on its metric's panel.

    Returns:
        A matplotlib Figure.

    Raises:
        ValueError: an empty summary or an unknown ``x``.
    """
    from specsched.analysis.plots import LINESTYLES, MARKERS, _colors, metric_label, plt

    if summary.empty:
        raise ValueError("the sweep has no finished run to plot")
    params = [c for c in summary.columns if c not in ("point", *SUMMARY_COLUMNS)]
    x = x or _x_axis(summary, params)
    if x not in params:
        raise ValueError(f"x must be one of {params}, got {x!r}")
    others = [p for p in params if p != x and summary[p].nunique(dropna=False) > 1]
    metrics = list(dict.fromkeys(summary["metric"]))
    numeric = pd.api.types.is_numeric_dtype(summary[x]) and not pd.api.types.is_bool_dtype(summary[x])
    null = bool(summary[x].isna().any())
    tick = _label
    # a null point (SGLang's None) has no place on a numeric axis: its own tick, last
    cats = [] if numeric else list(dict.fromkeys(_label(v) for v in summary[x].dropna())) + ["null"] * null
    # names (no number among the values): no order between the points, no line through them
    named = not numeric and not any(_number(v) for v in summary[x].dropna())
    if (numeric or null) and all(_number(v) for v in summary[x].dropna()) and (null or not _plain_axis(summary[x])):
        # inf (a burst's request_rate) has no place on a numeric axis and was dropped; -1
        # (chunked_prefill_size off) sat below the smallest chunk: both go last, by name
        vals = sorted(summary[x].dropna().unique(), key=lambda v: (not _plain(v), v if _plain(v) else 0))
        cats, numeric = [_label(v) for v in vals] + ["null"] * null, False
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.9 * nrows), layout="constrained", squeeze=False)
    groups = list(summary.groupby(others, sort=False, dropna=False)) if others else [((), summary)]
    colors = _colors(len(groups))
    for ax, m in zip(axes.flat, metrics, strict=False):
        for k, (color, (key, g)) in enumerate(zip(colors, groups, strict=True)):
            ls, marker = LINESTYLES[k % len(LINESTYLES)], MARKERS[k % len(MARKERS)]
            d = g[g["metric"] == m]
            xs = d[x].to_numpy(float) if numeric else np.array([cats.index(tick(v)) for v in d[x]], float)
            order = np.argsort(xs, kind="stable")
            xs, ys = xs[order], d["value"].to_numpy(float)[order]
            lo, hi = d["ci_low"].to_numpy(float)[order], d["ci_high"].to_numpy(float)[order]
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{p}={_label(v)}" for p, v in zip(others, key, strict=True)) or "all points"
            band = np.isfinite(lo) & np.isfinite(hi)
            if named:
                # side by side within a category, error bars for the interval
                shift = (k - (len(groups) - 1) / 2) * min(0.6 / len(groups), 0.15)
                err = np.where(band, [ys - lo, hi - ys], 0.0)
                ax.errorbar(xs + shift, ys, yerr=np.clip(err, 0, None), fmt=marker, color=color, ms=5, capsize=3,
                            lw=1.2, label=label)
                continue
            # hollow markers, the earlier series' larger: a series lying on another's points
            # (two arms that agree) shows as a marker inside a marker, not one hiding the other
            ax.plot(xs, ys, color=color, ls=ls, marker=marker, ms=min(4 + 2 * (len(groups) - 1 - k), 10), mfc="none",
                    mew=1.2, lw=1.5, label=label)
            if band.any():
                ax.fill_between(xs[band], lo[band], hi[band], color=color, alpha=0.2, lw=0)
        pooled = set(summary.loc[summary["metric"] == m, "across_seeds"]) == {"pooled"}
        ax.set_title(metric_label(m) + ("\npooled over seeds" if pooled else ""), fontsize=10)
        ax.set_xlabel(x)
        if numeric:
            xv = summary[x].to_numpy(float)
            xv = xv[np.isfinite(xv)]
            if xv.size and xv.min() > 0 and xv.max() / xv.min() > 100:
                ax.set_xscale("log")
            elif 0 < len(np.unique(xv)) <= 12 and np.all(xv == np.round(xv)):
                # whole-number settings (a window, a chunk size): ticks at the swept values,
                # not 2.5, 3.5 between windows 2, 4 and 6
                ax.set_xticks(np.unique(xv), [_label(v) for v in np.unique(xv)])
        else:
            ax.set_xticks(range(len(cats)), cats, rotation=20 if len(cats) > 4 else 0)
            if named:
                ax.set_xlim(-0.5, len(cats) - 0.5)
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    if len(groups) > 1:
        axes.flat[0].legend(fontsize=8)
    if slos:
        from specsched.analysis.slo import draw_bounds

        draw_bounds(dict(zip(metrics, axes.flat, strict=False)), slos)
    note = seeds_text(summary)
    if named:
        note = note.replace("confidence band", "error bar").replace("band = ", "bars = ")
    # wrapped to the figure (about 60 characters a 5-inch panel at this size)
    import textwrap

    fig.suptitle(f"Sweep: metrics vs {x}\n" + textwrap.fill(f"({note})", width=60 * ncols), fontsize=10)
    return fig

