"""How well the simulator's predictions hold on hardware, over every recorded GPU round.

Reads every ``validate*.csv`` (``validate.csv``, ``validate_conditioned.csv``, and the early
rounds' ``validate-run1.csv``/``validate-poisson.csv``...) under a measurements folder (default
``docs/measurements``): the per-call comparison ``benchmarks/gpu_validate.py`` writes, columns
``cell, arm, metric, predicted, measured, error_pct`` (error = predicted against measured, %).
Each row is tagged with

- its **round**: the folder ``h200`` is round 1, ``h200-vN`` round N (``h100-vN``: round N run on
  an H100 where no H200 came; its page says so); a ``vM`` subfolder is
  round M filed in an earlier round's folder (``h200-v11/v12``, ``h200-v7/v8``). Other folders
  (hold-out sweeps, ``*-eager``, ``host-per-term``) hold other formats and are not read;
- its **call**: the subfolder(s) below the round folder and the file's suffix (``a``,
  ``second-machine``, ``run1``, ``poisson``; ``-`` for the round folder's own ``validate.csv``);
- **plain** or **conditioned** (``validate_conditioned.csv``: re-predicted with each run's
  measured host speed, sim/host_speed.py);
- the **preset** (1b or 8b), from the first of: a profile file in the call's folder
  (``h200-8b*.yaml``), the ``profiled in ... -> PATH`` line of its ``gpu_validate*.log``, a
  ``preset`` line in ``environment.txt``, the ``--preset`` of the round page's
  ``gpu_validate.py`` command for that call (or the one value all its commands use);
  otherwise ``unknown``;
- the **profile** the call predicted with and whether it was **made on the same machine
  minutes before**: ``yes`` where the call's log says it profiled first or its ``--profile``
  is what a ``specsched profile`` command of the page wrote; ``same round`` where it is
  another call's profile of the same round (the same machine unless the page says otherwise);
  ``no`` where it is an earlier round's (``docs/measurements/h200-vN/...``); ``not recorded``
  otherwise. The call's log is ``gpu_validate.log`` (or ``-vN``, ``-SUFFIX``, ``-vN`` + the
  suffix's initial: ``gpu_validate-v3p.log`` for ``validate-poisson.csv``), its command the
  page's ``gpu_validate.py --out OUT/NAME`` with NAME ``vN``, the subfolder, ``vN`` + the
  subfolder, or ``vN`` + the suffix's initial.

Rows repeated verbatim (the same kind, cell, arm, metric, prediction and measurement, e.g. a
CSV copied into two folders) count once, in the earliest round. Only the five figures of issue 8's target
(:data:`specsched.runtime.cli_commands.TARGET_METRICS`) are scored; rows without a finite error
(a figure a cell does not have) are left out and counted.

Writes, each atomically and only after everything was read: ``scoreboard.md`` (per metric the
share within 5 % and the median |error|, by round and overall, plain and conditioned; per
cell the latest round's errors; the worst misses linked to their round's page; where each
call's tags came from) and three PNGs under ``scoreboard/`` (|error| ECDF per metric, share
within 5 % and median |error| by round, a cell x metric heatmap of the latest errors).

Usage::

    python benchmarks/h200_scoreboard.py                      # docs/measurements -> scoreboard.md
    python benchmarks/h200_scoreboard.py --docs DIR --out-md DIR/scoreboard.md

Bad input (a CSV missing a column, a value that is not a number, no CSV at all) is one line on
stderr naming the file and the column, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.analysis import change_scores
from specsched.runtime.cli_commands import TARGET_METRICS
from specsched.sim.atomic import atomic_write, atomic_write_text

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("cell", "arm", "metric", "predicted", "measured", "error_pct")
"""The columns every validate CSV must have (gpu_validate.py writes them)."""
WITHIN_PCT = 5.0
"""The target: |predicted - measured| / measured within 5 % (issue 8)."""
LABELS = {"median_ttft_ms": "median TTFT", "p90_ttft_ms": "p90 TTFT", "median_tpot_ms": "median TPOT",
          "median_itl_ms": "median ITL", "output_throughput": "output tok/s"}
_ROUND_DIR = re.compile(r"h[12]00(?:-v(\d+))?")
_SUB_ROUND = re.compile(r"v(\d+)")
_PRESET = re.compile(r"(?<![0-9a-z])(1b|8b)(?![0-9a-z])")


class BadInput(Exception):
    """A measurement file the scoreboard cannot read; the message is the one line to print."""


@dataclass(frozen=True)
class Call:
    """Where a validate CSV sits and what is known of the call that wrote it.

    Attributes:
        round: the round number (1 for ``h200``).
        page: the round's page, relative to the measurements folder (``h200-v29.md``), or its
            folder where no page exists.
        call: subfolder(s) and file suffix (``a``, ``run1``, ``-``).
        kind: ``plain`` or ``conditioned``.
        preset: ``1b``, ``8b`` or ``unknown``; ``preset_from`` says where it was read.
        profile: the ``--profile`` path the call used, the profile it made, or ``""``.
        fresh: ``yes``, ``same round``, ``no`` or ``not recorded`` (profile made on the same
            machine minutes before).
        summary: the count the call's own ``summary.md`` states (``"7 of 20"``, the plain or
            conditioned line as ``kind`` is), ``""`` where it has none: a cross-check.
    """

    round: int
    page: str
    call: str
    kind: str
    preset: str
    preset_from: str
    profile: str
    fresh: str
    summary: str


def _commands(md_text: str) -> list[dict[str, str]]:
    """The ``gpu_validate.py`` command lines of a round page, continuation lines joined:
    ``{'out': ..., 'preset': ..., 'profile': ...}`` (keys present where the option is)."""
    joined = re.sub(r"\\\n\s*", " ", md_text)
    cmds = []
    for line in joined.splitlines():
        if "gpu_validate.py --" not in line:
            continue
        cmd = {k: m.group(1).strip("`") for k in ("out", "preset", "profile")
               if (m := re.search(rf"--{k}\s+(\S+)", line))}
        cmds.append(cmd)
    return cmds


def _profiles_made(md_text: str) -> set[str]:
    """Paths a ``specsched profile ... --out PATH`` command of the round page wrote."""
    joined = re.sub(r"\\\n\s*", " ", md_text)
    return {m.group(1) for line in joined.splitlines() if "specsched profile" in line
            if (m := re.search(r"--out\s+(\S+)", line))}


def _describe(docs: Path, csv: Path) -> Call | None:
    """Tag a validate CSV with its round, call, preset and profile (see the module text);
    None for a file outside a round folder."""
    rel = csv.relative_to(docs)
    m = _ROUND_DIR.fullmatch(rel.parts[0])
    if m is None:
        return None
    rnd = int(m.group(1) or 1)
    sub = list(rel.parts[1:-1])
    if sub and (s := _SUB_ROUND.fullmatch(sub[0])):
        rnd = int(s.group(1))
    stem = csv.stem
    kind = "conditioned" if "conditioned" in stem else "plain"
    suffix = re.sub(r"^validate(_conditioned)?[-_]?", "", stem)
    call = "/".join(sub + ([suffix] if suffix else [])) or "-"
    page_md = docs / f"{rel.parts[0]}.md"
    page = page_md.name if page_md.exists() else f"{rel.parts[0]}/"
    md = page_md.read_text(encoding="utf-8", errors="replace") if page_md.exists() else ""
    folder = csv.parent
    cmds = _commands(md)
    # the names the rounds gave a call's --out and log: OUT/v3 + gpu_validate-v3.log, OUT/v3p +
    # gpu_validate-v3p.log for validate-poisson.csv, OUT/v28b for h200-v28/b, gpu_validate-run1.log
    if suffix:
        names, log_names = {f"v{rnd}{suffix[0]}"}, [f"gpu_validate-{suffix}.log", f"gpu_validate-v{rnd}{suffix[0]}.log"]
    else:
        names = {f"v{rnd}", *sub[-1:], *(f"v{rnd}{s}" for s in sub[-1:])}
        log_names = ["gpu_validate.log", f"gpu_validate-v{rnd}.log"]
    mine = [c for c in cmds if c.get("out", "").rstrip("/").rsplit("/", 1)[-1] in names]
    log = next((folder / n for n in log_names if (folder / n).is_file()), None)
    made = re.search(r"profiled in [\d.]+ s -> (\S+)", log.read_text(errors="replace")) if log else None

    preset, source = "unknown", "not recorded"
    yaml_presets = {p for y in folder.glob("h[12]00-*.yaml") for p in _PRESET.findall(y.name)}
    env = folder / "environment.txt"
    env_preset = re.search(r"preset\W+(1b|8b)\b", env.read_text(errors="replace")) if env.exists() else None
    md_presets = {c["preset"] for c in (mine or cmds) if "preset" in c}
    if len(yaml_presets) == 1:
        preset, source = yaml_presets.pop(), "profile file in the folder"
    elif made and _PRESET.search(Path(made.group(1)).name):
        preset, source = _PRESET.search(Path(made.group(1)).name).group(1), "gpu_validate log"
    elif env_preset:
        preset, source = env_preset.group(1), "environment.txt"
    elif len(md_presets) == 1:
        preset, source = md_presets.pop(), "round page command" + ("" if mine else "s")

    profile, fresh = "", "not recorded"
    env_profile = re.search(r"^profile\W+(docs/measurements/\S+)", env.read_text(errors="replace"), re.M) \
        if env.exists() else None
    # a call made by another script than gpu_validate names its profile in environment.txt
    used = next((c["profile"] for c in mine if "profile" in c), "") or (env_profile.group(1) if env_profile else "")
    if made:
        profile, fresh = made.group(1), "yes"
    elif used:
        profile = used
        made_here = _profiles_made(md)
        # a profile a call wrote under OUT/ comes back and is carried to the next call as its path below OUT/
        if used in made_here or f"OUT/{used}" in made_here:
            fresh = "yes"
        elif used.startswith(f"docs/measurements/{rel.parts[0]}/") or used.startswith("OUT/"):
            fresh = "same round"
        elif used.startswith("docs/measurements/"):
            fresh = "no"
    if not profile.startswith("docs/measurements/"):
        profile = Path(profile).name  # where the call wrote it on its machine says nothing here
    summary = ""
    if not suffix and (folder / "summary.md").is_file():
        label = "Within 5 % conditioned:" if kind == "conditioned" else "Within 5 %:"
        m = re.search(re.escape(label) + r" \*\*(\d+ of \d+)\*\*", (folder / "summary.md").read_text(errors="replace"))
        summary = m.group(1) if m else ""
    return Call(rnd, page, call, kind, preset, source, profile, fresh, summary)


def _read_csv(path: Path) -> pd.DataFrame:
    """One validate CSV, checked: every column of :data:`COLUMNS`, numbers where numbers go.

    Raises:
        BadInput: unreadable, a column missing, or a value that is not a number.
    """
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise BadInput(f"{path}: cannot be read as CSV ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from e
    for col in COLUMNS:
        if col not in df.columns:
            raise BadInput(f"{path}: column '{col}' is missing (needs {', '.join(COLUMNS)})")
    for col in ("predicted", "measured", "error_pct"):
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() & df[col].notna() & ~df[col].astype(str).str.strip().str.lower().isin(("nan", ""))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise BadInput(f"{path}: column '{col}' row {i + 2} value {df[col].iloc[i]!r} is not a number")
        df[col] = num
    return df[list(COLUMNS)]


DEDUP_KEY = ["kind", "cell", "arm", "metric", "predicted", "measured"]
"""Rows equal on these are one figure counted once (the earliest round's): a measurement is a
float from a run's results, so an equal one in another file is a copy, not a second run."""


def load_rows(docs: Path) -> tuple[pd.DataFrame, int, int]:
    """Every validate CSV under ``docs`` in a round folder, each row tagged with its :class:`Call`
    and ``file`` (relative to ``docs``), sorted by round and file; not de-duplicated.

    Returns:
        (rows, files read, files skipped outside round folders).

    Raises:
        BadInput: a malformed CSV, or no validate CSV at all.
    """
    csvs = sorted(p for p in docs.rglob("validate*.csv") if p.is_file())
    frames, skipped = [], 0
    for path in csvs:
        call = _describe(docs, path)
        if call is None:
            skipped += 1
            continue
        df = _read_csv(path)
        for k, v in call.__dict__.items():
            df[k] = v
        df["file"] = str(path.relative_to(docs))
        frames.append(df)
    if not frames:
        raise BadInput(f"{docs}: no validate*.csv in a round folder (h200, h200-vN, h100-vN)")
    return pd.concat(frames, ignore_index=True).sort_values(["round", "file"], kind="stable"), len(frames), skipped


def load(docs: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    """Every validate CSV under ``docs``, tagged and de-duplicated.

    Returns:
        (rows, counts): one row per distinct :data:`DEDUP_KEY` of a target metric with the :class:`Call` fields and ``abs_error_pct``; counts ``files``,
        ``rows_read``, ``duplicates`` (scored rows counted once), ``not_scored`` (non-target or
        non-finite rows),
        ``skipped_files`` (validate CSVs outside round folders).

    Raises:
        BadInput: a malformed CSV, or no validate CSV at all.
    """
    return score_rows(*load_rows(docs))


def score_rows(allrows: pd.DataFrame, files: int, skipped: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """:func:`load`'s result from :func:`load_rows`'s."""
    target = allrows[allrows.metric.isin(TARGET_METRICS) & np.isfinite(allrows.error_pct)]
    scored = target.drop_duplicates(subset=DEDUP_KEY, keep="first").copy()
    scored["abs_error_pct"] = scored.error_pct.abs()
    counts = {"files": files, "rows_read": len(allrows), "duplicates": len(target) - len(scored),
              "not_scored": len(allrows) - len(target), "skipped_files": skipped}
    return scored.reset_index(drop=True), counts


def share_table(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group and target metric: ``n``, ``within`` (count with |error| <= 5 %), ``share``
    (0-1) and ``median_abs`` (% ), plus an ``all`` metric pooling the five."""
    rows = []
    for tags, metric, sel in change_scores.by_group_and_metric(df, by, TARGET_METRICS):
        within = int((sel.abs_error_pct <= WITHIN_PCT).sum())
        rows.append({**tags, "metric": metric, "n": len(sel), "within": within,
                     "share": within / len(sel), "median_abs": float(sel.abs_error_pct.median())})
    return pd.DataFrame(rows, columns=[*by, "metric", "n", "within", "share", "median_abs"])


def latest(df: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, arm), the plain rows of the latest call that measured it: the highest round,
    its last call (by name) where a round measured it twice."""
    plain = df[df.kind == "plain"]
    last = plain.sort_values(["round", "call"], kind="stable").groupby(["cell", "arm"]).tail(1)[
        ["cell", "arm", "round", "call"]]
    return plain.merge(last, on=["cell", "arm", "round", "call"]).sort_values(["cell", "arm"], kind="stable")


def _fig_png(fig) -> bytes:
    """The figure as a PNG of 128 palette colours (a third of the RGBA file's bytes), closed."""
    import matplotlib.pyplot as plt
    from PIL import Image
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    buf.seek(0)
    out = io.BytesIO()
    Image.open(buf).convert("RGB").quantize(colors=128).save(out, format="PNG", optimize=True)
    return out.getvalue()


def plots(df: pd.DataFrame, by_round: pd.DataFrame, last: pd.DataFrame) -> dict[str, bytes]:
    """The three PNGs (name -> bytes): ``ecdf.png``, ``by-round.png``, ``latest-heatmap.png``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    plain = df[df.kind == "plain"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in TARGET_METRICS:
        x = np.sort(plain[plain.metric == m].abs_error_pct.to_numpy())
        ax.step(np.maximum(x, 0.01), np.arange(1, len(x) + 1) / len(x), where="post", label=f"{LABELS[m]} (n={len(x)})")
    ax.axvline(WITHIN_PCT, color="k", ls="--", lw=0.8)
    ax.set(xscale="log", xlabel="|error| % (log)", ylabel="share of figures at or below",
           title="Predicted vs measured, every round (plain)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    out["ecdf.png"] = _fig_png(fig)

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    br = by_round[by_round.kind == "plain"]
    for m in (*TARGET_METRICS, "all"):
        s = br[br.metric == m]
        kw = {"color": "k", "lw": 2} if m == "all" else {}
        a1.plot(s["round"], 100 * s.share, marker="o", ms=3, label=LABELS.get(m, "all five"), **kw)
        a2.plot(s["round"], s.median_abs, marker="o", ms=3, **kw)
    a1.set(ylabel="within 5 % (%)", ylim=(0, 100), title="By round (plain predictions)")
    a2.axhline(WITHIN_PCT, color="k", ls="--", lw=0.8)
    a2.set(yscale="log", ylabel="median |error| % (log)", xlabel="round")
    a1.legend(fontsize=7, ncol=3)
    for a in (a1, a2):
        a.grid(alpha=0.3)
    out["by-round.png"] = _fig_png(fig)

    rows = last.cell + " / " + last.arm + " (r" + last["round"].astype(str) + ", " + last.preset + ")"
    piv = last.assign(row=rows).pivot(index="row", columns="metric", values="error_pct")
    piv = piv[[m for m in TARGET_METRICS if m in piv.columns]]
    fig, ax = plt.subplots(figsize=(6.5, 0.19 * len(piv) + 1.2))
    im = ax.imshow(piv.to_numpy().clip(-30, 30), cmap="RdBu_r", vmin=-30, vmax=30, aspect="auto")
    ax.set_xticks(range(len(piv.columns)), [LABELS[m] for m in piv.columns], fontsize=7)
    ax.set_yticks(range(len(piv)), piv.index, fontsize=6)
    for (i, j), v in np.ndenumerate(piv.to_numpy()):
        if np.isfinite(v):
            ax.text(j, i, f"{v:+.0f}", ha="center", va="center", fontsize=5, color="w" if abs(v) > 20 else "k",
                    fontweight="bold" if abs(v) > WITHIN_PCT else "normal")
    fig.colorbar(im, ax=ax, label="error % (clipped at 30)", shrink=0.5)
    ax.set_title("Latest round per cell: error %", fontsize=9)
    out["latest-heatmap.png"] = _fig_png(fig)
    return out


def _pct(v: float) -> str:
    return f"{v:+.1f} %" if abs(v) <= WITHIN_PCT else f"**{v:+.1f} %**"


def page(df: pd.DataFrame, counts: dict[str, int], by_round: pd.DataFrame, overall: pd.DataFrame,
         last: pd.DataFrame, png_dir: str, command: str, pairs: pd.DataFrame | None = None) -> str:
    """The scoreboard page (markdown) from the tables :func:`share_table` and :func:`latest` made,
    and the section on changes (analysis/change_scores.py) where ``pairs`` is given."""
    def cell(t: pd.DataFrame, m: str) -> str:
        r = t[t.metric == m]
        return "" if r.empty else f"{100 * r.share.iloc[0]:.0f} % ({r.within.iloc[0]}/{r.n.iloc[0]}), {r.median_abs.iloc[0]:.1f} %"

    heads = [LABELS[m] for m in TARGET_METRICS] + ["all five"]
    lines = ["# H200 scoreboard: predictions against measurements, every round", "",
             f"Generated by `{command}` (no GPU) from every `validate*.csv` under docs/measurements/: "
             f"{counts['files']} files, {counts['rows_read']} rows read, {counts['duplicates']} repeated rows counted once, "
             f"{counts['not_scored']} rows not scored (figures outside the five of issue 8's target, or without a "
             "finite error). Error = predicted against measured; *plain* predicts with the profile alone, "
             "*conditioned* with each run's measured host speed (sim/host_speed.py). Each entry: share within "
             f"{WITHIN_PCT:.0f} % (count), median |error|. Do not edit by hand: regenerate.", "",
             "## Overall", "", "| predictions | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for kind in ("plain", "conditioned"):
        t = overall[overall.kind == kind]
        lines.append(f"| {kind} | " + " | ".join(cell(t, m) for m in (*TARGET_METRICS, "all")) + " |")
    key = ["round", "call", "cell", "arm", "metric"]
    cond_keys = df[df.kind == "conditioned"][key]
    paired = df[df.kind == "plain"].merge(cond_keys, on=key)
    t = share_table(paired, [])
    lines.append("| plain, the figures conditioned has | " + " | ".join(cell(t, m) for m in (*TARGET_METRICS, "all")) + " |")
    for preset in sorted(df.preset.unique()):
        t = share_table(df[(df.preset == preset) & (df.kind == "plain")], [])
        lines.append(f"| plain, preset {preset} | " + " | ".join(cell(t, m) for m in (*TARGET_METRICS, "all")) + " |")
    fresh = df[df.kind == "plain"].groupby("fresh")
    lines += ["", "Plain, by whether the profile was made on the same machine minutes before: " + "; ".join(
        f"{k}: {cell(share_table(g, []), 'all')}" for k, g in fresh) + ".", ""]
    lines += [f"![|error| ECDF per metric]({png_dir}/ecdf.png)", "", "## By round", "",
              "Plain predictions; the last column pools the five figures of the conditioned ones.", "",
              "| round | preset | fresh profile | " + " | ".join(heads) + " | conditioned, all five |",
              "|---|---|---|" + "---:|" * (len(heads) + 1)]
    for rnd, g in df.groupby("round", sort=True):
        t = by_round[(by_round["round"] == rnd) & (by_round.kind == "plain")]
        tc = by_round[(by_round["round"] == rnd) & (by_round.kind == "conditioned")]
        pg = g.page.iloc[0]
        lines.append(f"| [{rnd}]({pg}) | {', '.join(sorted(g.preset.unique()))} | {', '.join(sorted(g.fresh.unique()))} | "
                     + " | ".join(cell(t, m) for m in (*TARGET_METRICS, "all")) + f" | {cell(tc, 'all')} |")
    lines += ["", f"![by round]({png_dir}/by-round.png)", "", "## Per cell: the latest round", "",
              "Plain error per figure in the latest round that measured the cell's arm. Bold: beyond 5 %. "
              f"All of them: {cell(share_table(last, []), 'all')}.", "",
              "| cell | arm | round | call | preset | " + " | ".join(heads[:-1]) + " |",
              "|---|---|---|---|---|" + "---:|" * (len(heads) - 1)]
    for (c, a), g in last.groupby(["cell", "arm"], sort=True):
        by_m = dict(zip(g.metric, g.error_pct, strict=True))
        r = g.sort_values("round").iloc[-1]
        lines.append(f"| {c} | {a} | [{r['round']}]({r.page}) | {r.call} | {r.preset} | "
                     + " | ".join(_pct(by_m[m]) if m in by_m else "" for m in TARGET_METRICS) + " |")
    lines += ["", f"![latest per cell]({png_dir}/latest-heatmap.png)", "", "## Worst misses", "",
              "The 25 largest plain |errors| over every round.", "",
              "| round | call | preset | cell | arm | figure | predicted | measured | error |",
              "|---|---|---|---|---|---|---:|---:|---:|"]
    worst = df[df.kind == "plain"].sort_values("abs_error_pct", ascending=False, kind="stable").head(25)
    for _, r in worst.iterrows():
        lines.append(f"| [{r['round']}]({r.page}) | {r.call} | {r.preset} | {r.cell} | {r.arm} | {LABELS[r.metric]} | "
                     f"{r.predicted:.4g} | {r.measured:.4g} | {_pct(r.error_pct)} |")
    if pairs is not None and not pairs.empty:
        lines += ["", *change_scores.section(pairs, TARGET_METRICS, LABELS, f"{png_dir}/changes.png")]
    lines += ["", "## Where each call's tags come from", "",
              "The last column counts the call's plain figures within 5 % here, and what the call's own "
              "`summary.md` states (blank where it has none).", "",
              "| round | call | file(s) | preset | preset from | profile | made on the machine minutes before "
              "| within 5 % (summary.md) |",
              "|---|---|---|---|---|---|---|---:|"]
    for (rnd, call), g in df.groupby(["round", "call"], sort=True):
        r = g.iloc[0]
        files = ", ".join(sorted(g.file.unique()))
        prof = f"`{r.profile}`" if r.profile else "not recorded"
        plain = g[g.kind == "plain"]
        stated = plain.summary.iloc[0] if len(plain) else ""
        lines.append(f"| [{rnd}]({r.page}) | {call} | {files} | {r.preset} | {r.preset_from} | {prof} | {r.fresh} | "
                     f"{int((plain.abs_error_pct <= WITHIN_PCT).sum())} of {len(plain)}"
                     + (f" ({stated})" if stated else "") + " |")
    if counts["skipped_files"]:
        lines += ["", f"{counts['skipped_files']} validate CSV(s) outside a round folder were not read."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: read, score, write; exit 2 with one line on bad input."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default=str(ROOT / "docs" / "measurements"), help="the measurements folder")
    ap.add_argument("--out-md", default=None, help="the page (default DOCS/scoreboard.md); PNGs go beside it "
                    "in a folder of the page's name")
    args = ap.parse_args(argv)
    docs = Path(args.docs)
    out_md = Path(args.out_md) if args.out_md else docs / "scoreboard.md"
    try:
        if not docs.is_dir():
            raise BadInput(f"{docs}: not a folder")
        allrows, files, skipped = load_rows(docs)
        df, counts = score_rows(allrows, files, skipped)
    except BadInput as e:
        print(e, file=sys.stderr)
        return 2
    by_round = share_table(df, ["kind", "round"])
    overall = share_table(df, ["kind"])
    last = latest(df)
    pairs = change_scores.change_pairs(allrows[allrows.metric.isin(TARGET_METRICS)])
    png_dir = out_md.with_suffix("")
    pngs = plots(df, by_round, last)
    if not pairs.empty:
        pngs["changes.png"] = _fig_png(change_scores.scatter(pairs, TARGET_METRICS, LABELS))
    text = page(df, counts, by_round, overall, last, png_dir.name, "python benchmarks/h200_scoreboard.py", pairs)
    for name, data in pngs.items():
        atomic_write(png_dir / name, lambda tmp, data=data: tmp.write_bytes(data))
    atomic_write_text(out_md, text)
    o = overall[(overall.kind == "plain") & (overall.metric == "all")].iloc[0]
    c = overall[(overall.kind == "conditioned") & (overall.metric == "all")]
    print(f"{counts['files']} files, {len(df)} scored figures ({counts['duplicates']} repeated rows counted once); "
          f"plain within 5 %: {o.within}/{o.n} ({100 * o.share:.1f} %), median |error| {o.median_abs:.1f} %"
          + (f"; conditioned {c.within.iloc[0]}/{c.n.iloc[0]} ({100 * c.share.iloc[0]:.1f} %)" if not c.empty else "")
          + f" -> {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
