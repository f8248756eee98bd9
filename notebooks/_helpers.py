"""Helpers for notebooks/predicted_vs_measured.ipynb: find measured results, pair them with
predicted ones, tabulate the errors and draw the two figures analysis.plots does not have
(a parity plot and a bar chart of % error).

Two layouts of a measurements directory (default ``docs/measurements/h200``) are read, alone
or together:

- results directories (``summary.json`` + tables, read with :func:`analysis.io.read_results`)
  named ``<cell>-<arm>-measured`` and ``<cell>-<arm>-predicted``, at any depth. A directory
  without that suffix is classified by its ``summary['source']`` (``runtime:<device>`` =
  measured, ``sim`` = predicted) and keyed by ``summary['scenario']``/``summary['arm']``;
- ``validate.csv`` files with columns ``cell, arm, metric, predicted, measured[, error_pct]``
  (``specsched validate`` adds ``seed, overrides``, not read here).

``error_pct`` is ``100 (predicted - measured) / measured`` (the sign convention of
docs/fidelity.md: positive = the model predicts more). A ``validate.csv`` value is kept as
given; it is computed only where the column is missing or empty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from specsched.analysis.io import read_results
from specsched.analysis.plots import metric_label
from specsched.sim.metrics import error_pct
from specsched.sim.records import RunResult

KINDS = ("measured", "predicted")
VALIDATE_COLUMNS = ("cell", "arm", "metric", "predicted", "measured", "error_pct")
PREFERRED_METRICS = (
    "output_throughput", "median_ttft_ms", "p99_ttft_ms", "max_ttft_ms", "median_tpot_ms",
    "median_itl_ms", "verify_cycles_per_s", "decode_throughput", "verify_wall_ms",
    "accept_length", "gpu_busy_fraction",
)
"""Summary keys compared between a measured and a predicted results directory (when both
have a finite value)."""


@dataclass
class Measurements:
    """What a measurements directory holds.

    Attributes:
        root: the directory searched.
        pairs: ``(cell, arm) -> {"measured": RunResult, "predicted": RunResult}`` (either side may
            be missing when only one was found).
        validate: rows of every ``validate.csv`` found (:data:`VALIDATE_COLUMNS` + ``file``).
        skipped: ``path: reason`` for each directory or file that could not be used.
    """

    root: Path
    pairs: dict[tuple[str, str], dict[str, RunResult]] = field(default_factory=dict)
    validate: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=[*VALIDATE_COLUMNS, "file"]))
    skipped: list[str] = field(default_factory=list)

    @property
    def complete_pairs(self) -> dict[tuple[str, str], dict[str, RunResult]]:
        """The pairs with both a measured and a predicted run."""
        return {k: v for k, v in self.pairs.items() if all(kind in v for kind in KINDS)}

    @property
    def empty(self) -> bool:
        """True when nothing comparable was found (no complete pair, no validate.csv row)."""
        return not self.complete_pairs and self.validate.empty


def classify(name: str, summary: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(cell, arm, kind)`` of a results directory named ``name`` with ``summary``.

    The name's suffix ``-measured``/``-predicted`` wins; otherwise ``summary['source']``
    decides (``runtime...`` = measured, ``sim`` = predicted). Cell and arm come from the name
    ``<cell>-<arm>`` when the summary's arm (arm names have no ``-``) ends it, else from the
    summary's ``scenario``/``arm``, else the name is split at its last ``-``.

    Returns:
        None when the kind cannot be told.
    """
    kind = None
    stem = name
    for k in KINDS:
        if name.endswith(f"-{k}"):
            kind, stem = k, name[: -len(k) - 1]
            break
    if kind is None:
        source = str(summary.get("source", ""))
        if source.startswith("runtime"):
            kind = "measured"
        elif source == "sim":
            kind = "predicted"
        else:
            return None
        cell, arm = summary.get("scenario"), summary.get("arm")
        if cell and arm:
            return str(cell), str(arm), kind
    arm = str(summary.get("arm") or "")
    if arm and stem.endswith(f"-{arm}") and len(stem) > len(arm) + 1:
        return stem[: -len(arm) - 1], arm, kind
    if "-" in stem:
        cell, arm = stem.rsplit("-", 1)
        return cell, arm, kind
    return stem, arm or "base", kind


def read_validate_csv(path: str | Path) -> pd.DataFrame:
    """Read one ``validate.csv`` (header names are stripped and lower-cased).

    Returns:
        :data:`VALIDATE_COLUMNS` + ``file``; ``error_pct`` filled where missing.

    Raises:
        ValueError: a required column is missing.
    """
    df = pd.read_csv(path)
    df.columns = [str(c).strip().lower() for c in df.columns]
    missing = [c for c in VALIDATE_COLUMNS[:-1] if c not in df.columns]
    if missing:
        raise ValueError(f"missing columns {', '.join(missing)} (has {', '.join(df.columns)})")
    for c in ("predicted", "measured"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    computed = error_pct(df["predicted"], df["measured"])
    if "error_pct" in df.columns:
        df["error_pct"] = pd.to_numeric(df["error_pct"], errors="coerce").fillna(computed)
    else:
        df["error_pct"] = computed
    for c in ("cell", "arm", "metric"):
        df[c] = df[c].astype(str).str.strip()
    df["file"] = str(path)
    return df[[*VALIDATE_COLUMNS, "file"]]




def find_measurements(root: str | Path) -> Measurements:
    """Search ``root`` (recursively) for results directories and ``validate.csv`` files.

    Unreadable directories or files are listed in ``skipped`` rather than raised, so one bad
    entry does not hide the rest. A missing ``root`` gives an empty :class:`Measurements`.
    """
    root = Path(root)
    found = Measurements(root=root)
    if not root.is_dir():
        return found
    for summary in sorted(root.rglob("summary.json")):
        d = summary.parent
        try:
            run = read_results(d)
        except Exception as e:  # noqa: BLE001 - report and go on
            found.skipped.append(f"{d}: {e}")
            continue
        key = classify(d.name, run.summary)
        if key is None:
            found.skipped.append(f"{d}: cannot tell measured from predicted (name or summary['source'])")
            continue
        cell, arm, kind = key
        slot = found.pairs.setdefault((cell, arm), {})
        if kind in slot:
            found.skipped.append(f"{d}: a second {kind} run of {cell}/{arm} (kept {slot[kind].path})")
            continue
        slot[kind] = run
    frames = []
    for csv in sorted(root.rglob("validate.csv")):
        try:
            frames.append(read_validate_csv(csv))
        except Exception as e:  # noqa: BLE001
            found.skipped.append(f"{csv}: {e}")
    if frames:
        found.validate = pd.concat(frames, ignore_index=True)
    return found


def pair_table(pairs: Mapping[tuple[str, str], Mapping[str, Any]],
               metrics: Sequence[str] = PREFERRED_METRICS) -> pd.DataFrame:
    """Predicted vs measured summary values of complete pairs, one row per metric.

    Returns:
        :data:`VALIDATE_COLUMNS` + ``file`` (the measured directory); metrics without a
        finite value on both sides are left out.
    """
    rows = []
    for (cell, arm), runs in pairs.items():
        if not all(k in runs for k in KINDS):
            continue
        ms, ps = runs["measured"].summary, runs["predicted"].summary
        for m in metrics:
            try:
                mv, pv = float(ms.get(m)), float(ps.get(m))
            except (TypeError, ValueError):
                continue
            if math.isfinite(mv) and math.isfinite(pv):
                rows.append((cell, arm, m, pv, mv, float(error_pct(pv, mv)),
                             str(getattr(runs["measured"], "path", "") or "")))
    return pd.DataFrame(rows, columns=[*VALIDATE_COLUMNS, "file"])


def comparison_table(found: Measurements, metrics: Sequence[str] = PREFERRED_METRICS) -> pd.DataFrame:
    """Every predicted/measured value found: the ``validate.csv`` rows, then the metrics of
    results-directory pairs that no ``validate.csv`` row already gives (same cell, arm,
    metric). Column ``from`` says which."""
    v = found.validate.assign(**{"from": "validate.csv"})
    p = pair_table(found.complete_pairs, metrics).assign(**{"from": "results dirs"})
    if not v.empty:
        have = set(zip(v["cell"], v["arm"], v["metric"], strict=True))
        p = p[[(c, a, m) not in have for c, a, m in zip(p["cell"], p["arm"], p["metric"], strict=True)]]
    frames = [f for f in (v, p) if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[*VALIDATE_COLUMNS, "file", "from"])
    return pd.concat(frames, ignore_index=True)


def describe(found: Measurements) -> str:
    """A few lines: what was found where (for the notebook's output)."""
    lines = [f"measurements directory: {found.root}"]
    if not found.root.is_dir():
        return lines[0] + " (does not exist)"
    comp = found.complete_pairs
    lines.append(f"results-directory pairs (measured + predicted): {len(comp)}"
                 + (f" ({', '.join(f'{c}/{a}' for c, a in comp)})" if comp else ""))
    for (c, a), runs in found.pairs.items():
        if (c, a) not in comp:
            lines.append(f"  unpaired: {c}/{a} has only {', '.join(runs)}")
    sources = sorted({str(r.summary.get("source")) for runs in comp.values() for r in runs.values()})
    if sources:
        lines.append(f"sources: {', '.join(sources)}")
    if not found.validate.empty:
        files = sorted(set(found.validate["file"]))
        lines.append(f"validate.csv rows: {len(found.validate)} from {', '.join(files)}")
    for s in found.skipped:
        lines.append(f"  skipped {s}")
    return "\n".join(lines)


def _label(row: Any) -> str:
    return f"{row['cell']} / {row['arm']}"


_NAMES = {"decode_throughput": "Decode throughput, steady batch (tok/s)",
          "verify_wall_ms": "Wall per verify cycle (ms)"}


def metric_name(metric: str) -> str:
    """Readable metric name with unit (:func:`analysis.plots.metric_label`, plus two keys
    it does not know)."""
    return _NAMES.get(metric) or metric_label(metric)


def plot_parity(table: pd.DataFrame, title: str = "Predicted vs measured",
                band_pct: Sequence[float] = (3.0, 10.0), ncols: int = 4) -> Figure:
    """Parity plot, one panel per metric: measured (x) vs predicted (y), one point per
    cell/arm (marker and colour), in the metric's own unit.

    The diagonal is perfect agreement; the shaded bands are +-``band_pct`` %. Each panel's
    range covers its points and the widest band, so a few-% error stays visible; a panel
    whose values span more than 10x gets log axes.
    """
    t = table[np.isfinite(table["predicted"].astype(float)) & np.isfinite(table["measured"].astype(float))]
    metrics = list(dict.fromkeys(t["metric"]))
    if not metrics:
        fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
        ax.text(0.5, 0.5, "no finite predicted/measured pairs", ha="center", transform=ax.transAxes)
        ax.set_title(title)
        return fig
    groups = list(dict.fromkeys(t.apply(_label, axis=1)))
    cmap = plt.get_cmap("tab10")
    markers = "osD^v<>phX*"
    ncols = max(1, min(ncols, len(metrics)))
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.5 * nrows + 0.8), layout="constrained",
                             squeeze=False)
    widest = max(band_pct) / 100 if band_pct else 0.05
    for ax, metric in zip(axes.flat, metrics, strict=False):
        d = t[t["metric"] == metric]
        vals = np.concatenate([d["predicted"].to_numpy(float), d["measured"].to_numpy(float)])
        lo, hi = float(vals.min()), float(vals.max())
        log = lo > 0 and hi / lo > 10  # cells of very different scale: log axes
        if log:
            lo, hi = lo / (1 + 2 * widest), hi * (1 + 2 * widest)
            x = np.geomspace(lo, hi, 50)
        else:
            lo, hi = min(lo, lo * (1 - widest)), max(hi, hi * (1 + widest))
            pad = 0.05 * (hi - lo) if hi > lo else abs(hi) * 0.1 or 1.0
            lo, hi = lo - pad, hi + pad
            x = np.linspace(lo, hi, 2)
        for b, alpha in zip(sorted(band_pct, reverse=True), (0.08, 0.16), strict=False):
            ax.fill_between(x, x * (1 - b / 100), x * (1 + b / 100), color="0.3", alpha=alpha, lw=0)
        ax.plot(x, x, color="black", lw=0.8)
        for _, r in d.iterrows():
            g = groups.index(_label(r))
            ax.plot(r["measured"], r["predicted"], ls="none", ms=7, mec="black", mew=0.5,
                    marker=markers[g % len(markers)], color=cmap(g % 10))
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(metric_name(metric) + (", log axes" if log else ""), fontsize=9)
        ax.set_xlabel("measured", fontsize=8)
        ax.set_ylabel("predicted", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles = [plt.Line2D([], [], ls="none", marker=markers[i % len(markers)], color=cmap(i % 10), mec="black",
                          label=g) for i, g in enumerate(groups)]
    handles.append(plt.Line2D([], [], color="black", lw=0.8, label="predicted = measured"))
    handles += [plt.Rectangle((0, 0), 1, 1, color="0.3", alpha=a, label=f"within +-{b:g} %")
                for b, a in zip(sorted(band_pct, reverse=True), (0.08, 0.24), strict=False)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8)
    fig.suptitle(title)
    return fig


def plot_error_bars(table: pd.DataFrame, title: str = "Prediction error",
                    band_pct: float = 3.0) -> Figure:
    """Horizontal bars of ``error_pct`` per (cell, arm, metric), grouped by metric.

    Positive = the model predicts more than was measured. The shaded band is +-``band_pct``
    % (the tolerance tests/test_fidelity.py holds the fitted figures to).
    """
    t = table[np.isfinite(table["error_pct"].astype(float))].copy()
    t["_order"] = t["metric"].map({m: i for i, m in enumerate(dict.fromkeys(t["metric"]))})
    t = t.sort_values(["_order", "cell", "arm"], kind="stable")
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.32 * len(t) + 1.5)), layout="constrained")
    if t.empty:
        ax.text(0.5, 0.5, "no finite errors", ha="center", transform=ax.transAxes)
        ax.set_title(title)
        return fig
    groups = list(dict.fromkeys(t.apply(_label, axis=1)))
    cmap = plt.get_cmap("tab10")
    y = np.arange(len(t))
    colors = [cmap(groups.index(_label(r)) % 10) for _, r in t.iterrows()]
    ax.barh(y, t["error_pct"], color=colors, edgecolor="black", lw=0.4)
    ax.axvspan(-band_pct, band_pct, color="0.3", alpha=0.12, lw=0, label=f"+-{band_pct:g} %")
    ax.axvline(0, color="black", lw=0.8)
    for yi, v in zip(y, t["error_pct"], strict=True):
        ax.annotate(f"{v:+.1f}%", (v, yi), xytext=(3 if v >= 0 else -3, 0), textcoords="offset points",
                    ha="left" if v >= 0 else "right", va="center", fontsize=7)
    ax.set_yticks(y, [f"{metric_name(m)}  [{c}/{a}]" for m, c, a in zip(t["metric"], t["cell"], t["arm"], strict=True)],
                  fontsize=7)
    ax.invert_yaxis()
    span = float(np.nanmax(np.abs(t["error_pct"]))) if len(t) else 1.0
    ax.set_xlim(-max(span * 1.35, band_pct * 2), max(span * 1.35, band_pct * 2))
    ax.set_xlabel("error = 100 (predicted - measured) / measured  (%)")
    ax.grid(axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(i % 10), label=g) for i, g in enumerate(groups)]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.3", alpha=0.12, label=f"+-{band_pct:g} %"))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title)
    return fig

