"""Figures for simulator and runtime results (matplotlib, Agg backend).

Every ``plot_*`` function takes data and returns a :class:`matplotlib.figure.Figure` that is
readable on its own (title, units on the axes, legend); :func:`save_figure` writes it as PNG
and SVG. Run inputs are ``RunResult`` objects (from ``sim.engine`` or read from a results
directory by :func:`analysis.io.read_results`), a list of them, or a mapping label -> run(s). Runs with the
same label (the arm, from ``summary['arm']``) are pooled, e.g. several seeds of one arm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from specsched.analysis.io import run_label, scenario_value  # noqa: E402
from specsched.analysis.stats import (  # noqa: E402
    across_seeds,
    ecdf,
    ecdf_band_halfwidth,
    percentile,
    percentile_metric,
)
from specsched.sim.atomic import atomic_write  # noqa: E402
from specsched.sim.metrics import itl_values  # noqa: E402

PERCENTILES = (50, 90, 99)
_PCT_STYLE = {50: ":", 90: "--", 99: "-."}
_P95_STYLE = (0, (6, 2, 1, 2, 1, 2))
"""The p95 a bench_serving line states, drawn beside the distributions' p50/p90/p99 (dash dot dot)."""
PREFILL_MODES = ("extend", "mixed")
VERIFY_MODES = ("verify", "decode")
GANTT_COLORS = {"prefill": "#d62728", "verify": "#1f77b4", "host": "#7f7f7f"}
LINESTYLES = ("-", "--", ":", "-.")
"""Line styles of a timeline's servers (decode server 0, 1, ...) and of a sweep plot's
series, cycled."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
"""Point markers of a sweep plot's series, cycled: with :data:`LINESTYLES` (4 and 7 entries)
the first 28 series each get their own pair, so lines that overlap stay told apart where
colour alone would not (tab10 repeats after 10; grey-scale prints)."""


# ---------------------------------------------------------------- inputs and helpers

def group_runs(runs: Any) -> dict[str, list[Any]]:
    """Normalise run inputs to ``{label: [run, ...]}`` in first-seen order.

    Accepts one run, a sequence of runs, or a mapping label -> run or list of runs. A run is
    any object with ``requests``/``summary`` attributes. Labels come from :func:`run_label`
    (the arm); runs of different scenarios get ``"scenario:arm"`` labels.

    Raises:
        ValueError: no runs given.
    """
    if isinstance(runs, Mapping):
        out = {str(k): list(v) if isinstance(v, (list, tuple)) else [v] for k, v in runs.items()}
    else:
        items = [runs] if hasattr(runs, "requests") else list(runs)
        names = {(getattr(r, "summary", None) or {}).get("scenario") for r in items}
        out = {}
        for r in items:
            label = run_label(r)
            if len(names) > 1:
                label = f"{(r.summary or {}).get('scenario', '?')}:{label}"
            out.setdefault(label, []).append(r)
    if not out or not any(out.values()):
        raise ValueError("no runs to plot")
    return out


def _requests_by_label(data: Any) -> dict[str, pd.DataFrame]:
    """Requests tables pooled per label; a DataFrame input is a requests table (optionally
    with an ``arm`` column)."""
    if isinstance(data, pd.DataFrame):
        if "arm" in data.columns:
            return {str(k): g for k, g in data.groupby("arm", sort=False)}
        return {"run": data}
    return {k: pd.concat([r.requests for r in v], ignore_index=True) for k, v in group_runs(data).items()}


def _colors(n: int) -> list[Any]:
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def _time_unit(values_s: Sequence[np.ndarray]) -> tuple[str, float]:
    """('ms', 1e3) for latencies under 2 s, else ('s', 1)."""
    m = max((float(np.nanmax(v)) for v in values_s if len(v) and np.isfinite(v).any()), default=0.0)
    return ("ms", 1e3) if m < 2.0 else ("s", 1.0)


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _scenario_title(runs: Mapping[str, list[Any]]) -> str:
    names = sorted({str((r.summary or {}).get("scenario", "")) for v in runs.values() for r in v} - {""})
    return f" - {', '.join(names)}" if names else ""


def save_figure(fig: Figure, path_stem: str | Path, dpi: int = 150) -> tuple[Path, Path]:
    """Write ``fig`` to ``<path_stem>.png`` and ``<path_stem>.svg``, each atomically.

    Each file goes through :func:`specsched.sim.atomic.atomic_write` (a reader never sees
    a partial file). Parent directories are created. A stem given with the suffix of one of
    the two formats (``--plot bars.png``) is taken without it: bars.png and bars.svg, not
    bars.png.png.

    Returns:
        ``(png_path, svg_path)``.
    """
    stem = Path(path_stem)
    if stem.suffix.lower() in (".png", ".svg"):
        stem = stem.with_suffix("")
    written = [atomic_write(stem.with_name(f"{stem.name}.{fmt}"),
                            lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=dpi))
               for fmt in ("png", "svg")]
    return written[0], written[1]


SUPTITLE_WIDTH = 110
"""Characters a figure title line holds on the 13-inch distribution figures at matplotlib's
default title size; a longer title is wrapped at word breaks."""


def _suptitle(fig: Figure, text: str) -> None:
    """``fig``'s title, wrapped to :data:`SUPTITLE_WIDTH` characters a line. The TPOT/ITL
    title of a measured per-chunk run and two long file names ran past both edges of the
    figure (centred, cut at the left and right)."""
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(text, SUPTITLE_WIDTH, break_on_hyphens=False, break_long_words=False)) or text)


def _pct_legend(p95: bool = False) -> list[Line2D]:
    """The percentile line styles; with ``p95``, the style of a stated p95 too."""
    out = [Line2D([], [], color="0.3", ls=_PCT_STYLE[q], label=f"p{q}") for q in PERCENTILES]
    if p95:
        out.insert(2, Line2D([], [], color="0.3", ls=_P95_STYLE, label="p95"))
    return out


BAND_MIN_SAMPLES = 10
"""Fewest samples of one run whose ECDF gets a confidence band (below it the band spans most
of the axis)."""


def _distribution_panels(
    ax_cdf: Any, ax_hist: Any, samples: Mapping[str, np.ndarray], what: str, unit: str,
    scale: float, log_x: bool, bins: int, runs: Mapping[str, int] | None = None,
    marks: Mapping[str, Mapping[float, float]] | None = None, band: bool = False,
) -> None:
    """ECDF + histogram of ``samples`` (seconds) per label, percentiles marked. ``runs``:
    label -> number of runs pooled in its samples (the legend says so when > 1). ``band``: shade
    the 95 % band of each single run's ECDF (:data:`BAND_MIN_SAMPLES` samples or more,
    :func:`analysis.stats.ecdf_band_halfwidth`): where another run of the same server could put
    its distribution by chance, so a prediction inside it is no evidence of a model error. For
    per-request samples (TTFT, TPOT), not ITL gaps, which are not independent. ``marks``:
    label -> {percentile: value (s)} of a run known only by its summary statistics (a
    bench_serving line without per-request details), drawn as crosses on the cumulative
    distribution at (value, percentile / 100) and as vertical lines on the histogram. Each
    label's line is wider than the next one's (1.6 points for the last, 1.2 more per label
    before it, at most 4), so coinciding distributions stay visible."""
    marks = {k: {q: v for q, v in m.items() if isinstance(v, (int, float)) and math.isfinite(v)}
             for k, m in (marks or {}).items()}
    marks = {k: m for k, m in marks.items() if m}
    if not samples and not marks:
        # a panel with nothing to draw (SGLang 0.4.0-0.4.1 lines state a median ITL but no
        # TPOT): said on the panel; its empty legend was a matplotlib UserWarning on stderr
        for ax in (ax_cdf, ax_hist):
            ax.text(0.5, 0.5, f"no {what} figure in the inputs", transform=ax.transAxes, ha="center",
                    va="center", color="0.4")
            ax.set_xticks([])
            ax.set_yticks([])
        ax_cdf.set_title(f"{what}: cumulative distribution")
        ax_hist.set_title(f"{what}: histogram")
        return
    colors = _colors(len(samples) + len(marks))
    finite = [v[np.isfinite(v)] * scale for v in samples.values()]
    finite += [np.array(list(m.values()), dtype=float) * scale for m in marks.values()]
    allv = np.concatenate(finite) if finite else np.empty(0)
    if log_x:
        allv = allv[allv > 0]
    if allv.size:
        lo, hi = float(allv.min()), float(allv.max())
        if log_x:
            edges = np.geomspace(lo, hi if hi > lo else lo * 10, bins + 1)
            if not np.all(np.diff(edges) > 0):  # values equal but for rounding: one decade
                edges = np.geomspace(lo, lo * 10, bins + 1)
        else:
            edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
            if not np.all(np.diff(edges) > 0):  # values equal but for rounding: no bin width
                edges = np.linspace(lo, lo + max(1.0, abs(lo)), bins + 1)
    else:
        edges = np.linspace(0, 1, bins + 1)
    # earlier arms drawn wider: two arms whose distributions coincide (a change that moves
    # only the tail) show as a line inside a line, not the last one hiding the first
    widths = [min(1.6 + 1.2 * (len(samples) - 1 - i), 4.0) for i in range(len(samples))]
    for lw, color, (label, v) in zip(widths, colors, samples.items(), strict=False):
        x = v[np.isfinite(v)] * scale
        if log_x:
            x = x[x > 0]
        xs, ys = ecdf(x)
        pcts = {q: percentile(x, q) for q in PERCENTILES}
        text = ", ".join(f"p{q} {_fmt(val)}" for q, val in pcts.items())
        k = (runs or {}).get(label, 1)
        pooled = f"pooled over {k} runs, " if k > 1 else ""
        ax_cdf.step(xs, ys, where="post", color=color, lw=lw, label=f"{label} ({pooled}n={x.size}; {text} {unit})")
        if band and k == 1 and x.size >= BAND_MIN_SAMPLES:
            h = ecdf_band_halfwidth(x.size)
            ax_cdf.fill_between(xs, np.clip(ys - h, 0, 1), np.clip(ys + h, 0, 1), step="post", color=color,
                                alpha=0.15, lw=0, label=f"{label}: 95 % band of one run (+-{h:.3f}, DKW)")
        ax_hist.hist(x, bins=edges, histtype="step", lw=lw, color=color, label=label)
        for q, val in pcts.items():
            if math.isfinite(val):
                ax_cdf.axvline(val, color=color, ls=_PCT_STYLE[q], lw=0.9, alpha=0.8)
                ax_cdf.plot([val], [q / 100], marker="o", ms=4, color=color)
                ax_hist.axvline(val, color=color, ls=_PCT_STYLE[q], lw=0.9, alpha=0.8)
    for color, (label, m) in zip(colors[len(samples):], marks.items(), strict=True):
        qs = sorted(m)
        xs = [m[q] * scale for q in qs]
        if log_x:
            qs, xs = [q for q, x in zip(qs, xs, strict=True) if x > 0], [x for x in xs if x > 0]
        text = ", ".join(f"p{q:g} {_fmt(x)}" for q, x in zip(qs, xs, strict=True))
        ax_cdf.plot(xs, [q / 100 for q in qs], ls="none", marker="X", ms=8, color=color,
                    label=f"{label} (the line's own percentiles, no per-request details; {text} {unit})")
        for q, x in zip(qs, xs, strict=True):
            ax_hist.axvline(x, color=color, ls=_PCT_STYLE.get(int(q), _P95_STYLE), lw=1.2, alpha=0.9)
    for q in PERCENTILES:
        ax_cdf.axhline(q / 100, color="0.85", lw=0.6, zorder=0)
    for ax in (ax_cdf, ax_hist):
        if log_x and allv.size:
            ax.set_xscale("log")
            # plain numbers (0.5, 2, 10 ms), and no minor labels to collide with them; over
            # more than three decades (ITL: 1 ms gaps and a 15 s prefill wait) the 1-2-5
            # labels ran into one another, so only the powers of ten are labelled there
            decades = math.log10(allv.max() / allv.min()) if allv.min() > 0 else 0.0
            subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0)
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{what} ({unit}{', log scale' if log_x else ''})")
        ax.grid(alpha=0.3)
    ax_cdf.set_ylabel("fraction of samples <= x")
    ax_cdf.set_ylim(0, 1.02)
    ax_hist.set_ylabel("count per bin")
    ax_cdf.set_title(f"{what}: cumulative distribution")
    ax_hist.set_title(f"{what}: histogram ({bins} bins)")
    ax_cdf.legend(loc="lower right", fontsize=8, title="arm (percentiles)", title_fontsize=8)
    handles = [Line2D([], [], color=c, lw=lw, label=lab) for lw, c, lab in zip(widths, colors, samples, strict=False)]
    handles += [Line2D([], [], color=c, ls="none", marker="X", label=f"{lab} (percentiles only)")
                for c, lab in zip(colors[len(samples):], marks, strict=True)]
    p95 = any(int(q) not in _PCT_STYLE for m in marks.values() for q in m)
    ax_hist.legend(handles=handles + _pct_legend(p95), loc="upper right", fontsize=8, title="arm / marker", title_fontsize=8)


# ---------------------------------------------------------------- distributions

SUMMARY_PERCENTILES = {50: "median", 90: "p90", 95: "p95", 99: "p99"}
"""The percentiles a bench_serving line's summary states for each latency, by the prefix of
its key (``median_ttft_ms``, ``p90_ttft_ms``, ...)."""


def summary_marks(runs: Any, metric: str) -> dict[str, dict[float, float]]:
    """label -> {percentile: value (s)} of ``metric`` (``ttft``, ``tpot``, ``itl``) from each
    run's summary statistics (:data:`SUMMARY_PERCENTILES`, ms in the summary), for runs known
    only by their summary (a bench_serving line without per-request details); several runs of
    one label are numbered. Runs with none of them are left out."""
    out: dict[str, dict[float, float]] = {}
    for label, rs in group_runs(runs).items():
        for i, r in enumerate(rs):
            s = r.summary or {}
            m = {}
            for q, prefix in SUMMARY_PERCENTILES.items():
                v = s.get(f"{prefix}_{metric}_ms")
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    m[float(q)] = float(v) / 1e3
            if m:
                out[label if len(rs) == 1 else f"{label} {i + 1}"] = m
    return out


def _marks_alone(runs: Any, marks: Any) -> bool:
    """No run to draw a distribution of (``runs`` None or an empty sequence) but ``marks``:
    the figure holds the marked runs' stated percentiles alone (a bench_serving line without
    per-request details plotted by itself).

    Raises:
        ValueError: neither runs nor marks.
    """
    empty = runs is None or (isinstance(runs, (list, tuple)) and not runs)
    if empty and not marks:
        raise ValueError("no runs to plot")
    return empty


def plot_ttft(runs: Any, log_x: bool = False, bins: int = 50, marks: Any = None) -> Figure:
    """TTFT per arm: cumulative distribution (left) and histogram (right) on one figure.

    Args:
        runs: runs (see :func:`group_runs`) or a requests DataFrame (``ttft_s`` column,
            optional ``arm`` column); none (an empty list) with ``marks``: the crosses alone.
        log_x: logarithmic x axis (and log-spaced bins); non-positive TTFTs are dropped.
        bins: histogram bins (shared by all arms).
        marks: runs known only by their summary statistics (bench_serving lines without
            per-request details, :func:`summary_marks`): their TTFT percentiles drawn as
            crosses beside the distributions.

    Returns:
        The figure. p50/p90/p99 of each arm are marked (dotted/dashed/dash-dot lines in the
        arm's colour) and written in the legend. Unit: ms if every TTFT is under 2 s, else s.
    """
    alone = _marks_alone(runs, marks)
    reqs = {} if alone else _requests_by_label(runs)
    samples = {k: v["ttft_s"].to_numpy(float) for k, v in reqs.items()}
    marked = summary_marks(marks, "ttft") if marks else {}
    unit, scale = _time_unit(list(samples.values()) + [np.array(list(m.values())) for m in marked.values()])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    frame = isinstance(runs, pd.DataFrame)
    counts = {k: len(v) for k, v in group_runs(runs).items()} if not (frame or alone) else None
    _distribution_panels(a, b, samples, "TTFT", unit, scale, log_x, bins, counts, marked, band=True)
    title = "" if frame else _scenario_title(group_runs(marks if alone else runs))
    _suptitle(fig, f"Time to first token by arm{title}")
    return fig


def per_chunk_itl(runs: Any) -> bool:
    """Whether a measured run among ``runs`` holds one ITL per streamed chunk (its client
    recorded them so: ``summary["itl_per_chunk"]``, :func:`sim.bench_serving.to_run_data`)."""
    return any(bool((r.summary or {}).get("itl_per_chunk")) for v in group_runs(runs).values() for r in v)


def plot_tpot_itl(runs: Any, log_x: bool = False, bins: int = 50, per_chunk: bool | None = None,
                  marks: Any = None) -> Figure:
    """TPOT and ITL distributions per arm (2 x 2: cumulative distributions and histograms).

    TPOT per request = (E2E - TTFT) / (output_len - 1) (``requests.tpot_s``; requests with one
    output token have none). ITL from ``chunks`` as bench_serving does it
    (:func:`sim.metrics.itl_values`: a chunk of n tokens adds n gaps of dt/n), or one gap per
    chunk with ``per_chunk``: as a measured client that records them so does
    (:func:`sim.bench_serving.itl_per_chunk`; with speculative decoding a chunk is a whole
    accepted block, and its gap the cycle, accept length times the split one).

    Args:
        runs: runs (see :func:`group_runs`); they need ``requests`` and ``chunks``. None (an
            empty list) with ``marks``: the crosses alone.
        log_x: logarithmic x axes for TPOT (ITL is always on a log axis).
        bins: histogram bins.
        per_chunk: ITL per chunk for every run; None = when a measured run among ``runs``
            recorded it so (:func:`per_chunk_itl`), so that a prediction is drawn as that
            run's client saw it (``marks`` included).
        marks: runs known only by their summary statistics (:func:`summary_marks`): their
            TPOT and ITL percentiles drawn as crosses beside the distributions.

    Returns:
        The figure, in ms. Percentiles of several runs of one arm are of the pooled
        samples (as in the compare table).
    """
    alone = _marks_alone(runs, marks)
    groups = {} if alone else group_runs(runs)
    if per_chunk is None:
        per_chunk = (not alone and per_chunk_itl(groups)) or bool(marks and per_chunk_itl(marks))
    tpot = {k: pd.concat([r.requests for r in v])["tpot_s"].to_numpy(float) for k, v in groups.items()}
    itl = {k: np.concatenate([itl_values(r.chunks, per_chunk=per_chunk) for r in v]) for k, v in groups.items()}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), layout="constrained")
    counts = {k: len(v) for k, v in groups.items()}
    _distribution_panels(axes[0, 0], axes[0, 1], tpot, "TPOT", "ms", 1e3, log_x, bins, counts,
                         summary_marks(marks, "tpot") if marks else None, band=True)
    # ITL always on a log axis: a few long gaps (a prefill between two decode steps) span
    # three or more decades above the typical gap and flatten a linear axis
    _distribution_panels(axes[1, 0], axes[1, 1], itl, "ITL per chunk" if per_chunk else "ITL", "ms", 1e3, True,
                         bins, counts, summary_marks(marks, "itl") if marks else None)
    what = "inter-token latency (one gap per streamed chunk, as the measured client records it)" if per_chunk \
        else "inter-token latency (per token)"
    _suptitle(fig, f"Time per output token (per request) and {what} by arm"
                 f"{_scenario_title(group_runs(marks) if alone else groups)}")
    return fig


# ---------------------------------------------------------------- one run over time

def plot_timeline(run: Any, t_range: tuple[float, float] | None = None) -> Figure:
    """Timeline of one run: running/waiting requests, KV use, and a Gantt strip of the GPU.

    Rows (shared time axis, seconds from run start):
      1. running and waiting requests after each scheduling pass (``timeseries``);
      2. KV pool tokens in use, with the pool capacity (``server.max_total_num_tokens``)
         when the scenario is known;
      3. Gantt strip from ``steps``: GPU busy with prefill (extend/mixed) forwards, GPU busy
         with verify/decode forwards, and host-blocked time. A step's ``host_blocked_s`` is
         the time the host spent blocked since its previous launch, so it is drawn ending at
         that forward's ``gpu_start_s`` (the launch follows the block by the host's launch
         cost); gaps in both GPU lanes are GPU idle.

    Args:
        run: one run (``RunResult``).
        t_range: optional ``(start_s, end_s)`` window to zoom into.

    Returns:
        The figure.
    """
    label = run_label(run)
    ts, steps = run.timeseries, run.steps
    fig, axes = plt.subplots(3, 1, figsize=(13, 8.5), sharex=True, layout="constrained",
                             gridspec_kw={"height_ratios": [2, 2, 1.2]})
    a1, a2, a3 = axes
    # a disaggregated run's tables are its decode servers' (docs/disaggregation.md), each its
    # own pass sequence and forward stream: one line per server (decode_server or dp_rank, where several)
    servers = _per_server(ts)
    for i, (name, rows) in enumerate(servers):
        ls = LINESTYLES[i % len(LINESTYLES)]
        a1.step(rows["time_s"], rows["running"], where="post", color="#2ca02c", ls=ls, label=f"running{name}")
        a1.step(rows["time_s"], rows["waiting"], where="post", color="#ff7f0e", ls=ls, label=f"waiting{name}")
    mrr = scenario_value(run, "server.max_running_requests")
    top = float(max(ts["running"].max(), ts["waiting"].max())) if len(ts) else 0.0
    title = "Requests running and waiting (after each scheduling pass)"
    if mrr and top >= 0.5 * mrr:   # as the pool capacity below: only where it does not flatten the curves
        a1.axhline(mrr, color="#2ca02c", ls=":", lw=0.9, label=f"max_running_requests = {mrr}")
    elif mrr:
        title += f"; max_running_requests {mrr} (off the scale)"
    a1.set_ylabel("requests")
    a1.set_title(title)
    a1.legend(loc="upper right", fontsize=8)
    for i, (name, rows) in enumerate(servers):
        a2.step(rows["time_s"], rows["kv_used_tokens"], where="post", color="#9467bd",
                ls=LINESTYLES[i % len(LINESTYLES)], label=f"KV tokens in use{name}")
    cap = scenario_value(run, "server.max_total_num_tokens")
    peak = float(ts["kv_used_tokens"].max()) if len(ts) else 0.0
    if cap:
        if peak >= 0.5 * cap:  # draw the capacity only where it does not flatten the curve
            a2.axhline(cap, color="#9467bd", ls=":", lw=0.9, label="pool capacity")
        a2.secondary_yaxis("right", functions=(lambda x: x / cap * 100, lambda p: p * cap / 100)).set_ylabel(
            "% of KV pool")
        a2.set_title(f"KV pool use (peak {peak:,.0f} tokens = {peak / cap:.1%} of the {int(cap):,}-token pool)")
    else:
        a2.set_title(f"KV pool use (peak {peak:,.0f} tokens)")
    a2.set_ylabel("KV tokens")
    a2.legend(loc="upper right", fontsize=8)
    lanes = [("prefill", "GPU busy: prefill\n(extend/mixed)"), ("verify", "GPU busy:\nverify/decode"), ("host", "host blocked")]
    modes = steps["mode"].astype(str)
    dur = (steps["gpu_end_s"] - steps["gpu_start_s"]).to_numpy(float)
    spans = {
        "prefill": (steps.loc[modes.isin(PREFILL_MODES), "gpu_start_s"], dur[modes.isin(PREFILL_MODES).to_numpy()]),
        "verify": (steps.loc[~modes.isin(PREFILL_MODES), "gpu_start_s"], dur[(~modes.isin(PREFILL_MODES)).to_numpy()]),
    }
    hb = steps["host_blocked_s"].to_numpy(float)
    pos = hb > 0
    spans["host"] = (steps["gpu_start_s"].to_numpy(float)[pos] - hb[pos], hb[pos])
    for y, (key, _) in enumerate(lanes):
        starts, widths = spans[key]
        a3.broken_barh(list(zip(np.asarray(starts, float), np.asarray(widths, float), strict=True)),
                       (y - 0.4, 0.8), facecolors=GANTT_COLORS[key], edgecolor="none")
    a3.set_yticks(range(len(lanes)), [name for _, name in lanes])
    a3.set_ylim(-0.6, len(lanes) - 0.4)
    a3.invert_yaxis()
    shares = [float((rows["gpu_end_s"] - rows["gpu_start_s"]).sum()) / span
              for _, rows in _per_server(steps)
              if len(rows) and (span := float(rows["gpu_end_s"].max() - rows["gpu_start_s"].min())) > 0]
    pd_run = scenario_value(run, "server.disaggregation") is not None
    whose = (f" (mean over {len(shares)} {SERVER_PLURALS[_server_column(steps) or 'decode_server']})"
             if len(shares) > 1
             else " (the decode server's; prefill servers' forwards are not recorded)" if pd_run else "")
    a3.set_title(f"GPU busy {np.mean(shares):.1%} of the span of the forwards{whose}; host blocked {hb.sum():.3g} s in all"
                 if shares else "GPU activity")
    a3.set_xlabel("time since run start (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
    if t_range is not None:
        a3.set_xlim(*t_range)
    scen = (run.summary or {}).get("scenario", "")
    fig.suptitle(f"Timeline of one run: {scen} arm {label}, seed {(run.summary or {}).get('seed', '?')}")
    return fig


SERVER_COLUMNS = {"decode_server": "decode server", "dp_rank": "DP rank"}
SERVER_PLURALS = {"decode_server": "decode servers", "dp_rank": "replicas"}
"""Columns naming the server that wrote each steps/timeseries row, where several did
(sim/records.py ``Recorder._grouped_by_writer``): a disaggregated deployment's decode server,
a data-parallel replica (sim/dp_replicas.py); and how a legend names one
(:data:`SERVER_PLURALS`: how a title names several)."""


def _server_column(table: pd.DataFrame) -> str | None:
    return next((c for c in SERVER_COLUMNS if c in table), None)


def _per_server(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``table`` (steps or timeseries) split by its server column (:data:`SERVER_COLUMNS`), as
    (label suffix ' (decode server i)' or ' (DP rank i)', rows); the whole table with no
    suffix where it has no such column (one server wrote it)."""
    col = _server_column(table)
    if col is None:
        return [("", table)]
    return [(f" ({SERVER_COLUMNS[col]} {int(k)})", rows) for k, rows in table.groupby(col, sort=True)]


# ---------------------------------------------------------------- verify cycle split

def verify_cycles(steps: pd.DataFrame) -> pd.DataFrame:
    """Wall time of each pure verify cycle split into GPU work and GPU idle (host stall).

    A cycle runs from the end of one verify forward to the end of the next (decode forwards
    in a run without speculative decoding). Its GPU work is the summed duration of the
    forwards in it (a separate draft forward counts), its stall is the rest (the GPU idles
    while the host blocks, wakes and launches). Cycles that contain a prefill (extend/mixed)
    forward are dropped.

    ``host_blocked_s`` is the host's blocked time inside the cycle's own wall time. A step
    records the blocking since the previous launch, which with overlap scheduling is the
    wait for a forward one or two before (after an extend, the extend's): summed by step it
    landed in later cycles and could exceed their wall. Each step's blocking is placed
    instead just before the end of the last forward that ended before the step started
    (the result the host waited for) and counted in the cycles it overlaps. The run's last
    cycles, whose wait no later launch records, are dropped.

    A table of several servers (its ``decode_server`` or ``dp_rank`` column) is split by
    server first: each is its own forward stream, so a cycle never runs from one server's
    verify to another's.

    Args:
        steps: a ``steps`` table.

    Returns:
        DataFrame ``batch_size, wall_s, gpu_s, stall_s, host_blocked_s`` (one row per cycle).
    """
    cols = ["batch_size", "wall_s", "gpu_s", "stall_s", "host_blocked_s"]
    if steps.empty:
        return pd.DataFrame(columns=cols)
    col = _server_column(steps)
    if col is not None:
        return pd.concat([verify_cycles(rows.drop(columns=col)) for _, rows in _per_server(steps)], ignore_index=True)
    s = steps.sort_values("gpu_start_s", kind="stable").reset_index(drop=True)
    mode = s["mode"].astype(str)
    is_v = mode.eq("verify")
    if not is_v.any():
        is_v = mode.eq("decode")
    grp = is_v.shift(1, fill_value=False).cumsum()
    s = s.assign(_g=grp, _dur=s["gpu_end_s"] - s["gpu_start_s"], _pre=mode.isin(PREFILL_MODES))
    agg = s.groupby("_g").agg(gpu_s=("_dur", "sum"), pre=("_pre", "any"))
    ver = s[is_v].set_index("_g")
    end = ver["gpu_end_s"]
    wall = end - end.shift(1)
    waited = _waited_end(s)
    blocked = _blocked_until(s, waited, end.to_numpy(float))
    out = pd.DataFrame({
        "batch_size": ver["batch_size"], "wall_s": wall, "gpu_s": agg.loc[ver.index, "gpu_s"],
        "host_blocked_s": np.diff(blocked, prepend=np.nan), "pre": agg.loc[ver.index, "pre"],
    })
    recorded = end <= waited[-1]
    out = out[out["wall_s"].notna() & ~out["pre"] & recorded]
    out["stall_s"] = (out["wall_s"] - out["gpu_s"]).clip(lower=0.0)
    return out[cols].reset_index(drop=True)


def _waited_end(s: pd.DataFrame) -> np.ndarray:
    """Per step (sorted by start): the end of the last forward that ended before it started,
    the result its launch waited for (its own start where none had ended)."""
    start = s["gpu_start_s"].to_numpy(float)
    ends = np.maximum.accumulate(s["gpu_end_s"].to_numpy(float))
    i = np.searchsorted(ends, start, side="left") - 1
    return np.where(i >= 0, ends[np.maximum(i, 0)], start)


def _blocked_until(s: pd.DataFrame, waited: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The host's blocked time before each time in ``t``: each step's ``host_blocked_s`` as
    one span ending at its ``waited`` (:func:`_waited_end`; the host's waits follow one
    another: the spans are taken as disjoint)."""
    b = s["host_blocked_s"].to_numpy(float)
    e = waited
    keep = b > 0
    b, e = b[keep], e[keep]
    order = np.argsort(e, kind="stable")
    b, e = b[order], e[order]
    before = np.concatenate([[0.0], np.cumsum(b)])
    k = np.searchsorted(e, t, side="right")        # spans wholly before t
    partial = np.zeros(len(t))
    inside = k < len(e)
    nxt = np.minimum(k, max(len(e) - 1, 0))
    if len(e):
        partial = np.where(inside, np.clip(t - (e[nxt] - b[nxt]), 0.0, b[nxt]), 0.0)
    return before[k] + partial


def _batch_bins(sizes: np.ndarray, max_bins: int = 10) -> tuple[np.ndarray, list[str]]:
    """Bin index per cycle and bin labels: exact sizes if few, else power-of-two ranges."""
    uniq = np.unique(sizes)
    if uniq.size <= max_bins:
        return np.searchsorted(uniq, sizes), [str(int(u)) for u in uniq]
    edges = [0, 1]
    while edges[-1] < sizes.max():
        edges.append(edges[-1] * 2)
    idx = np.searchsorted(edges, sizes, side="left")  # (edges[i-1], edges[i]]
    used = np.unique(idx)
    labels = [f"{edges[i - 1] + 1}-{edges[i]}" if edges[i] - edges[i - 1] > 1 else str(edges[i]) for i in used]
    return np.searchsorted(used, idx), labels


def cycle_kind(steps: pd.DataFrame) -> str | None:
    """What :func:`verify_cycles` times in ``steps``: ``verify`` (speculative decoding),
    ``decode`` (none), or None (neither forward)."""
    modes = set(steps["mode"].astype(str)) if len(steps) else set()
    return "verify" if "verify" in modes else "decode" if "decode" in modes else None


CYCLE_WORDS = {"verify": ("verify cycle", "the verify forward"), "decode": ("decode step", "the decode forward"),
               "mixed": ("step (verify cycle or decode step)", "the verify or decode forward")}
"""What the split plot calls a cycle and its forward, by :func:`cycle_kind` of its runs."""


def plot_verify_split(runs: Any) -> Figure:
    """Mean wall time per verify cycle, stacked as GPU work + host stall, by batch size; per
    decode step for runs without speculative decoding (titles and labels say which, "step"
    when the runs are of both kinds).

    One group of bars per batch size (or batch-size range), one stacked bar per arm; the
    number above a bar is the mean wall ms and the cycle count. Black ticks mark the mean,
    over the same cycles, of the host's blocked time inside each cycle's wall (so never
    above the bar; :func:`verify_cycles`). See :func:`verify_cycles`.

    Args:
        runs: runs (see :func:`group_runs`) or a ``steps`` DataFrame.

    Returns:
        The figure (ms on the y axis).

    Raises:
        ValueError: no run has a complete verify (or decode) cycle.
    """
    groups = {"run": [runs]} if isinstance(runs, pd.DataFrame) else group_runs(runs)
    cyc = {}
    kinds = set()
    for k, v in groups.items():
        tables = [r if isinstance(r, pd.DataFrame) else r.steps for r in v]
        frames = [(verify_cycles(t), cycle_kind(t)) for t in tables]
        frames = [(f, kind) for f, kind in frames if len(f)]
        if frames:
            cyc[k] = pd.concat([f for f, _ in frames], ignore_index=True)
            kinds.update(kind for _, kind in frames)
    if not cyc:
        raise ValueError("no complete verify/decode cycles in the steps")
    cycle, forward = CYCLE_WORDS[kinds.pop() if len(kinds) == 1 else "mixed"]
    allsizes = np.concatenate([c["batch_size"].to_numpy() for c in cyc.values()])
    _, labels = _batch_bins(allsizes)
    fig, ax = plt.subplots(figsize=(min(14, max(8, 0.8 * len(labels) * len(cyc) + 3)), 5.5), layout="constrained")
    colors = _colors(len(cyc))
    width = 0.8 / len(cyc)
    for j, c in enumerate(cyc.values()):
        b_all, _ = _batch_bins(np.concatenate([c["batch_size"].to_numpy(), allsizes]))
        b = b_all[: len(c)]
        g = c.assign(bin=b).groupby("bin").agg(gpu=("gpu_s", "mean"), stall=("stall_s", "mean"),
                                               hb=("host_blocked_s", "mean"), n=("wall_s", "size"))
        x = g.index.to_numpy() + (j - (len(cyc) - 1) / 2) * width
        ax.bar(x, g["gpu"] * 1e3, width, color=colors[j], edgecolor="black", lw=0.5)
        ax.bar(x, g["stall"] * 1e3, width, bottom=g["gpu"] * 1e3, color=colors[j], alpha=0.35,
               hatch="//", edgecolor="black", lw=0.5)
        ax.plot(x, g["hb"] * 1e3, ls="none", marker="_", ms=12, mew=2, color="black")
        for xi, tot, n in zip(x, (g["gpu"] + g["stall"]) * 1e3, g["n"], strict=True):
            ax.annotate(f"{tot:.3g}\n(n={n})", (xi, tot), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.12)   # room for the labels above the tallest bar
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel(f"batch size (requests in {forward})")
    short = cycle.split(" (")[0]   # "step" for runs of both kinds
    ax.set_ylabel(f"mean wall time per {short} (ms)")
    handles = [Patch(facecolor=colors[j], edgecolor="black", label=f"{k}: GPU work") for j, k in enumerate(cyc)]
    handles += [Patch(facecolor=colors[j], alpha=0.35, hatch="//", edgecolor="black", label=f"{k}: host stall (GPU idle)")
                for j, k in enumerate(cyc)]
    handles.append(Line2D([], [], ls="none", marker="_", ms=12, mew=2, color="black",
                          label=f"host blocked within the {short}'s wall (mean;\n"
                                "no cost while the GPU is busy)"))
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    title = _scenario_title(groups) if not isinstance(runs, pd.DataFrame) else ""
    what = cycle[0].upper() + cycle[1:]
    ax.set_title(f"{what} wall time: GPU work vs host stall, by batch size{title}")
    return fig


# ---------------------------------------------------------------- arms compared

_UNITS = {
    "output_throughput": ("Output throughput", "tok/s"),
    "input_throughput": ("Input throughput", "tok/s"),
    "total_throughput": ("Total throughput", "tok/s"),
    "request_throughput": ("Request throughput", "req/s"),
    "verify_cycles_per_s": ("Verify cycles per second", "cycles/s"),
    "accept_length": ("Accept length", "tokens/request/cycle"),
    "gpu_busy_fraction": ("GPU busy fraction", "fraction of duration"),
    "host_blocked_s": ("Host blocked time", "s"),
    "duration": ("Duration", "s"),
    "completed": ("Completed requests", "requests"),
    "decode_throughput": ("Decode throughput (steady batch)", "tok/s"),
    "verify_wall_ms": ("Wall per verify cycle", "ms"),
}


def metric_label(metric: str) -> str:
    """Readable name with unit for a summary key, e.g. ``p99_ttft_ms`` -> ``p99 TTFT (ms)``."""
    if metric in _UNITS:
        name, unit = _UNITS[metric]
        return f"{name} ({unit})"
    parts = metric.split("_")
    if len(parts) >= 3 and parts[-1] == "ms":
        stat = parts[0]
        what = "_".join(parts[1:-1]).replace("e2e_latency", "E2E latency").upper().replace("E2E LATENCY", "E2E latency")
        return f"{stat} {what} (ms)"
    return metric


def plot_arm_bars(samples: pd.DataFrame, metrics: Sequence[str] | None = None, confidence: float = 0.95,
                  latency: Mapping[tuple[str, int], Mapping[str, Any]] | None = None) -> Figure:
    """Arms compared as bars: each metric over seeds with its confidence interval.

    Args:
        samples: tidy per-run values with columns ``arm, seed, metric, value`` (as returned
            by :func:`analysis.compare.run_arms`).
        metrics: metrics to show (default: all in ``samples``), one panel each.
        confidence: level of the interval drawn as error bars (none with fewer than two
            seeds).
        latency: the runs' latency samples (``run_arms(..., with_samples=True)``): then a
            percentile is pooled over seeds with a bootstrap interval over seeds
            (:func:`analysis.stats.across_seeds`, as in the compare table); other metrics
            are means with a Student-t interval.

    Returns:
        The figure; each seed's value is drawn as a dot over its arm's bar.

    Raises:
        ValueError: missing columns or no data for the requested metrics.
    """
    need = {"arm", "seed", "metric", "value"}
    if not need <= set(samples.columns):
        raise ValueError(f"samples need columns {sorted(need)}, got {list(samples.columns)}")
    metrics = list(metrics) if metrics is not None else list(dict.fromkeys(samples["metric"]))
    data = samples[samples["metric"].isin(metrics)]
    if data.empty:
        raise ValueError(f"no samples for metrics {metrics}")
    arms = list(dict.fromkeys(data["arm"]))
    colors = _colors(len(arms))
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.8 * nrows), layout="constrained", squeeze=False)
    nseeds = data.groupby("arm")["seed"].nunique()
    for ax, metric in zip(axes.flat, metrics, strict=False):
        d = data[data["metric"] == metric]
        pm = percentile_metric(metric)
        for i, arm in enumerate(arms):
            rows = d[d["arm"] == arm]
            v = rows["value"].to_numpy(float)
            pool = None
            if pm is not None:
                from specsched.analysis.compare import pooled

                pool = pooled(latency, arm, [int(x) for x in rows["seed"]], pm[0])
            m, lo, hi = across_seeds(v, pool, pm[1] if pm else None, confidence)
            err = None if not math.isfinite(lo) else [[m - lo], [hi - m]]
            ax.bar(i, m, 0.6, color=colors[i], alpha=0.8, yerr=err, capsize=5, edgecolor="black", lw=0.5)
            jitter = (np.arange(v.size) - (v.size - 1) / 2) * (0.3 / max(v.size, 1))
            ax.plot(i + jitter, v, "o", ms=3, color="black", alpha=0.7)
        ax.set_xticks(range(len(arms)), arms, rotation=20 if len(arms) > 3 else 0)
        pooled_here = pm is not None and latency
        ax.set_title(metric_label(metric) + ("\npooled over seeds" if pooled_here else ""), fontsize=10)
        ax.set_ylabel(metric_label(metric).rsplit("(", 1)[-1].rstrip(")") if "(" in metric_label(metric) else "value")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles = [Patch(color=colors[i], label=f"{a} (n={nseeds.get(a, 0)} seeds)") for i, a in enumerate(arms)]
    handles.append(Line2D([], [], color="black", marker="|", ls="none", ms=10,
                          label=f"{confidence:.0%} CI (of the mean; of the pooled percentile: seed bootstrap)"))
    handles.append(Line2D([], [], color="black", marker="o", ls="none", ms=3, label="one seed"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=9)
    fig.suptitle(f"Arms compared: each metric over seeds (mean; percentiles pooled) with its {confidence:.0%} CI\n"
                 "(a paired change between arms is known more precisely: see the compare table)")
    return fig
