"""Service-level objectives over a sweep: which points meet them, where along the swept
parameter a metric passes its bound, and the best point among those that meet them.

The question a rate or concurrency sweep is run for is rarely "which point has the most
tokens/s" (the highest rate, until the server saturates) but "how far can I push it while
p90 TTFT stays under 2 s and median TPOT under 50 ms": the capacity under an SLO that
capacity planners and SGLang's own ``bench_serving --goodput ttft:2000 tpot:50`` (per
request, ``benchmark/serving.py`` ``calculate_metrics``) judge a server by. Here an SLO
bounds a run's summary metric (a percentile or a mean, in bench_serving's units), the value
over seeds that the sweep's summary prints (:func:`analysis.sweep_summary.summarize_sweep`:
the pooled percentile of every seed's samples, or the mean over seeds).

A point "meets" an SLO when that value is within the bound; where the bound lies inside the
value's confidence interval over seeds the verdict is marked undecided (more seeds decide
it). Between two neighbouring points of a numeric axis where the verdict flips, the bound
is crossed; its place is estimated by linear interpolation of the metric between the two,
the only estimate two points give (say so: a knee between them can sit anywhere).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from specsched.sim.errors import ConfigError

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_PATTERN = re.compile(r"^\s*([A-Za-z0-9_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+|inf)\s*$")


@dataclass(frozen=True)
class Slo:
    """One objective: ``metric op bound``, e.g. ``p90_ttft_ms <= 2000``.

    Attributes:
        metric: a run summary key (bench_serving's names and units: ``p90_ttft_ms`` in ms,
            ``output_throughput`` in tok/s).
        op: ``<=``, ``<``, ``>=`` or ``>``.
        bound: the bound, in the metric's unit.
    """

    metric: str
    op: str
    bound: float

    def met(self, value: float) -> bool:
        """Whether ``value`` meets the objective; a missing (NaN) value does not."""
        return math.isfinite(value) and _OPS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:.12g}"


def parse_slo(text: str, known: Sequence[str], where: str = "<command line>", key: str = "--slo") -> Slo:
    """``"p90_ttft_ms<=2000"`` as an :class:`Slo`.

    Args:
        text: ``METRIC OP NUMBER`` (OP one of ``<= < >= >``; spaces allowed).
        known: the metric names allowed (a run summary's keys).
        where, key: what the error names as the file and the field.

    Raises:
        ConfigError: a malformed objective or an unknown metric (the line lists a few
            allowed names).
    """
    m = _PATTERN.match(text)
    if not m:
        raise ConfigError(where, key, text, "expected METRIC<=NUMBER (or <, >=, >), e.g. p90_ttft_ms<=2000 or "
                                            "output_throughput>=5000")
    metric, op, num = m.groups()
    if metric not in known:
        import difflib

        lower = {k.lower(): k for k in known}
        close = [lower[k] for k in difflib.get_close_matches(metric.lower(), list(lower), n=6, cutoff=0.5)]
        close = close or list(known)[:6]
        raise ConfigError(where, key, text, f"unknown metric {metric!r}: a run summary key, e.g. {', '.join(close)}")
    try:
        bound = float(num)
    except ValueError:
        raise ConfigError(where, key, text, "the bound must be a number") from None
    if not math.isfinite(bound):
        raise ConfigError(where, key, text, "the bound must be a finite number")
    if bound < 0:   # met by every point (>=) or by none (<=): it tells no point from another
        raise ConfigError(where, key, text, "the bound must be >= 0: every run summary metric is (latencies in ms, "
                                            "throughputs, counts)")
    return Slo(metric, op, bound)


@dataclass(frozen=True)
class PointVerdict:
    """Whether one sweep point meets every objective.

    Attributes:
        point: the point's id (the summary's ``point`` column).
        met: every objective met by the across-seeds value.
        undecided: the objectives whose bound lies inside the value's interval over seeds.
        missed: the objectives not met, with the value (NaN: no run had the metric).
    """

    point: Any
    met: bool
    undecided: tuple[Slo, ...]
    missed: tuple[tuple[Slo, float], ...]


def judge_points(summary: pd.DataFrame, slos: Sequence[Slo]) -> dict[Any, PointVerdict]:
    """Each point's :class:`PointVerdict` (keyed by point id, in the summary's order).

    Args:
        summary: :func:`analysis.sweep_summary.summarize_sweep`'s table, holding every
            objective's metric.
        slos: the objectives (at least one).
    """
    out: dict[Any, PointVerdict] = {}
    for pid in dict.fromkeys(summary["point"]):
        s = summary[summary["point"] == pid]
        missed, undecided = [], []
        for slo in slos:
            r = s[s["metric"] == slo.metric]
            v = float(r["value"].iloc[0]) if len(r) else float("nan")
            lo = float(r["ci_low"].iloc[0]) if len(r) else float("nan")
            hi = float(r["ci_high"].iloc[0]) if len(r) else float("nan")
            if not slo.met(v):
                missed.append((slo, v))
            if math.isfinite(lo) and math.isfinite(hi) and lo <= slo.bound <= hi:
                undecided.append(slo)
        out[pid] = PointVerdict(pid, not missed, tuple(undecided), tuple(missed))
    return out


def _value(summary: pd.DataFrame, pid: Any, metric: str) -> float:
    r = summary[(summary["point"] == pid) & (summary["metric"] == metric)]
    return float(r["value"].iloc[0]) if len(r) else float("nan")


def crossing(x0: float, v0: float, x1: float, v1: float, bound: float) -> float:
    """Where the line through ``(x0, v0)`` and ``(x1, v1)`` takes the value ``bound``: the
    linear estimate of where a metric passes its bound between two measured points; NaN when
    the two values are equal or not finite, or the bound is not between them."""
    if not all(math.isfinite(z) for z in (x0, v0, x1, v1)) or v0 == v1:
        return float("nan")
    t = (bound - v0) / (v1 - v0)
    return x0 + t * (x1 - x0) if 0.0 <= t <= 1.0 else float("nan")


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def slo_lines(summary: pd.DataFrame, slos: Sequence[Slo], x: str | None = None, unjudged: int = 0) -> list[str]:
    """The lines a sweep prints under its summary for ``slos``.

    One line with how many points meet every objective; then, per combination of the other
    varying parameters, along the numeric parameter ``x`` (default: the one the sweep plot
    puts on its x axis), the points that meet them and each place where the verdict flips
    between neighbours, with the objective that flips it and the interpolated crossing; then
    the highest ``output_throughput`` among the points that meet them; then the points left
    undecided by the seeds.

    Args:
        summary: :func:`analysis.sweep_summary.summarize_sweep`'s table with every
            objective's metric (and ``output_throughput`` for the best-point line).
        slos: the objectives.
        x: the swept parameter to walk along.
        unjudged: points of the sweep with no finished run (every run failed): not in
            ``summary``, so neither met nor missed; the first line counts them apart (a sweep
            with one of two points failed read "met at 1 of 1 point(s)").

    Returns:
        Lines of text (no trailing newline); empty for an empty summary.
    """
    from specsched.analysis.sweep_summary import SUMMARY_COLUMNS, _label, _number, _plain, _x_axis

    if summary.empty or not slos:
        return []
    verdict = judge_points(summary, slos)
    objectives = ", ".join(map(str, slos))
    met = [p for p, v in verdict.items() if v.met]
    lines = [f"SLOs {objectives}: met at {len(met)} of {len(verdict)} point(s)"
             + (f"; {unjudged} more point(s) with no finished run (every run failed), not judged" if unjudged else "")]
    for metric in dict.fromkeys(s.metric for s in slos):
        vals = summary.loc[summary["metric"] == metric, "value"].to_numpy(float)
        if not np.isfinite(vals).any():   # e.g. accept_length of runs without speculative decoding
            lines.append(f"  {metric}: no run of this sweep has a value for it, so no point meets its objective")
    params = [c for c in summary.columns if c not in ("point", *SUMMARY_COLUMNS)]
    varying = [p for p in params if summary[p].astype(str).nunique() > 1]
    x = x or _x_axis(summary, varying or params)
    firsts = summary.drop_duplicates("point").set_index("point")
    # inf (a burst's request_rate, bench_serving's --request-rate inf) is the far end of a rate
    # axis: walked to last, with no crossing interpolated towards it
    numeric = (x in varying and firsts[x].notna().all()
               and all(_plain(v) or (_number(v) and v == math.inf) for v in firsts[x]))
    others = [p for p in varying if p != x]
    groups = firsts.groupby(others, sort=False, dropna=False) if others else [((), firsts)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        tag = ", ".join(f"{p}={_label(v)}" for p, v in zip(others, key, strict=True))
        tag = f" ({tag})" if tag else ""
        if not numeric or len(g) < 2:
            continue
        g = g.sort_values(x, kind="stable")
        pids, xs = list(g.index), g[x].to_numpy(float)
        ok = [p for p in pids if verdict[p].met]
        at = ", ".join(_label(firsts.at[p, x]) for p in ok) or "none"
        lines.append(f"  along {x}{tag}: met at {at}")
        for a, b, xa, xb in zip(pids, pids[1:], xs, xs[1:], strict=False):
            if verdict[a].met == verdict[b].met:
                continue
            bad = b if verdict[a].met else a
            parts = []
            for slo, _ in verdict[bad].missed:   # the values in the order walked: at a, then at b
                va, vb = _value(summary, a, slo.metric), _value(summary, b, slo.metric)
                c = crossing(xa, va, xb, vb, slo.bound)
                where = f", crossed at ~{_fmt(c)} by linear interpolation" if math.isfinite(c) else ""
                parts.append(f"{slo.metric} {_fmt(va)} -> {_fmt(vb)} (bound {slo.bound:.12g}{where})")
            lines.append(f"    {'missed' if verdict[a].met else 'met'} from {x}={_label(firsts.at[b, x])} "
                         f"after {_label(firsts.at[a, x])}: " + "; ".join(parts))
    if len(lines) == 1 and met and varying:   # no numeric axis to walk: the points by name
        lines.append("  met at: " + "; ".join(" ".join(f"{q}={_label(firsts.at[p, q])}" for q in varying)
                                              for p in met))
    tput = summary[(summary["metric"] == "output_throughput") & summary["point"].isin(met)]
    tput = tput[np.isfinite(tput["value"].to_numpy(float))]
    if len(tput):
        best = tput.loc[tput["value"].idxmax()]
        name = " ".join(f"{p}={_label(best[p])}" for p in (varying or params))
        lines.append(f"highest output_throughput meeting them: {name}, {_fmt(float(best['value']))} tok/s")
    undecided = [(p, v) for p, v in verdict.items() if v.undecided]
    if undecided:
        names = []
        for p, v in undecided:
            at = " ".join(f"{q}={_label(firsts.at[p, q])}" for q in (varying or params)[:3])
            names.append(f"{at} ({', '.join(s.metric for s in v.undecided)})")
        lines.append("undecided by these seeds (the bound lies inside the value's interval over seeds; more seeds "
                     "decide them): " + "; ".join(names))
    return lines


def draw_bounds(axes_by_metric: dict[str, Any], slos: Sequence[Slo]) -> None:
    """Draw each objective's bound as a dashed red line on its metric's panel of a sweep
    plot, labelled with the objective (a panel that is not drawn is skipped). A panel's legend
    names its objectives only, unless it already holds the plot's legend of lines (the first
    panel): the lines' labels (one per arm, long names included) were repeated on every
    panel with a bound, over the lines."""
    bounds: dict[int, list[Any]] = {}
    had: dict[int, bool] = {}   # a panel's legend of lines, before any bound
    for slo in slos:
        ax = axes_by_metric.get(slo.metric)
        if ax is None:
            continue
        had.setdefault(id(ax), ax.get_legend() is not None)
        line = ax.axhline(slo.bound, color="tab:red", ls="--", lw=1.2, label=f"SLO {slo}")
        bounds.setdefault(id(ax), []).append(line)
        if had[id(ax)]:
            ax.legend(fontsize=8)
        else:
            ax.legend(handles=bounds[id(ax)], fontsize=8)
