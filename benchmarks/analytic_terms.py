"""An analytic profile against a measured one, term by term, and re-predictions counted.

Two reports (docs/measurements/h200-analytic.md):

``terms MEASURED ANALYTIC``: every grid of the measured profile (``gpu.decode``, the
speculative cycle ``gpu.verify``, ``gpu.extend``, ``gpu.draft_inject``) read at its own cells
from both profiles, with the ratio measured / analytic, then each grid split into the parts
whose *shape* matters (the level at the smallest cell; growth per request with batch;
growth per request per 1K tokens of context at the smallest and largest batch; an extend's
growth per token and per prefix token), the eager terms and the host terms side by side.
A measured profile's cycle includes its draft forward (``verify_includes_draft``); an
analytic one's does not, so its cycle is ``verify(b, c) + draft_step(b x window, c)``, the
sum the simulator reads (sim/cost_model.py ``CostModel.step_s``).

``counts CSV [CSV ...]``: re-predictions written by benchmarks/repredict_h200.py, counted
per metric within 5 % and 10 % for the profile the round was predicted with (``old``) and
the one given to repredict (``new``).

    python benchmarks/analytic_terms.py terms docs/measurements/h200-v15/h200-1b.yaml \\
        docs/measurements/h200-analytic/h200-1b-analytic.yaml
    python benchmarks/analytic_terms.py counts OUT/a15.csv
    python benchmarks/analytic_terms.py refit MEASURED ANALYTIC --factors matmul,hbm,kernel_gap_s,attention \\
        --out FITTED.yaml

``refit``: the analytic efficiency refit path (sim/analytic/fit.py ``fit_efficiency``, then
``writer.regenerate``) with the measured profile's decode and extend cells as the measured
forwards: what a calibration from microbenchmarks gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.sim.host_speed import HOST_SECONDS
from specsched.sim.profile import Profile, load_profile

METRICS = ("median_ttft_ms", "p90_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


def _cells(grid) -> tuple[list[float], list[float], np.ndarray]:
    return list(grid.x), list(grid.context_len), np.asarray(grid.seconds, dtype=float)


def cycle_reader(p: Profile):
    """``f(batch, context)`` seconds of one graph-replayed speculative cycle, draft included."""
    g = p.gpu
    v = g.verify.interpolator("gpu.verify")
    if g.verify_includes_draft or g.draft_step is None:
        return v
    d = g.draft_step.interpolator("gpu.draft_step")
    w = g.verify_window or 1
    return lambda b, c: v(b, c) + d(b * w, c)


def grid_pairs(measured: Profile, analytic: Profile) -> dict[str, tuple[list[float], list[float], np.ndarray, np.ndarray]]:
    """Per grid: (x, contexts, measured seconds, analytic seconds at the same cells)."""
    out = {}
    readers = {
        "decode": (measured.gpu.decode, analytic.gpu.decode.interpolator("gpu.decode")),
        "cycle": (measured.gpu.verify, cycle_reader(analytic)),
        "extend": (measured.gpu.extend, analytic.gpu.extend.interpolator("gpu.extend")),
        "draft_inject": (measured.gpu.draft_inject, analytic.gpu.draft_inject.interpolator("gpu.draft_inject")),
    }
    for name, (grid, f) in readers.items():
        if grid is None:
            continue
        xs, cs, m = _cells(grid)
        a = np.array([[f(x, c) for c in cs] for x in xs])
        out[name] = (xs, cs, m, a)
    return out


def shape_terms(pairs) -> list[tuple[str, float, float]]:
    """(term, measured, analytic) of each grid's shape: level, batch and context slopes."""
    rows = []
    for name in ("decode", "cycle"):
        if name not in pairs:
            continue
        xs, cs, m, a = pairs[name]
        i1, ibig, j0, jbig = 0, len(xs) - 1, 0, len(cs) - 1
        i16 = xs.index(16.0) if 16.0 in xs else 0
        span = cs[jbig] - cs[j0]
        rows.append((f"{name}: batch {xs[i1]:g}, context {cs[j0]:g} (ms)", m[i1, j0] * 1e3, a[i1, j0] * 1e3))
        rows.append((f"{name}: per request added, batch {xs[i16]:g} -> {xs[ibig]:g} at context {cs[j0]:g} (us)",
                     (m[ibig, j0] - m[i16, j0]) / (xs[ibig] - xs[i16]) * 1e6,
                     (a[ibig, j0] - a[i16, j0]) / (xs[ibig] - xs[i16]) * 1e6))
        for i in (i1, xs.index(8.0) if 8.0 in xs else i1, i16, ibig):
            rows.append((f"{name}: per request per 1K context, batch {xs[i]:g} (us)",
                         (m[i, jbig] - m[i, j0]) / span / xs[i] * 1e9, (a[i, jbig] - a[i, j0]) / span / xs[i] * 1e9))
    for name in ("extend", "draft_inject"):
        if name not in pairs:
            continue
        xs, cs, m, a = pairs[name]
        k1 = xs.index(1024.0) if 1024.0 in xs else 0
        kbig = len(xs) - 1
        rows.append((f"{name}: {xs[k1]:g} tokens, context {cs[0]:g} (ms)", m[k1, 0] * 1e3, a[k1, 0] * 1e3))
        rows.append((f"{name}: per token, {xs[k1]:g} -> {xs[kbig]:g} tokens at context {cs[0]:g} (us)",
                     (m[kbig, 0] - m[k1, 0]) / (xs[kbig] - xs[k1]) * 1e6,
                     (a[kbig, 0] - a[k1, 0]) / (xs[kbig] - xs[k1]) * 1e6))
        span = cs[-1] - cs[0]
        for k in (k1, kbig):
            rows.append((f"{name}: per extend token per 1K prefix, {xs[k]:g} tokens (us)",
                         (m[k, -1] - m[k, 0]) / span / xs[k] * 1e9, (a[k, -1] - a[k, 0]) / span / xs[k] * 1e9))
    return rows


def scalar_terms(measured: Profile, analytic: Profile) -> list[tuple[str, float | None, float | None]]:
    """Eager and host terms of both profiles (ms), as the simulator reads them."""
    def ms(v):
        return None if v is None else v * 1e3

    gm, ga = measured.gpu, analytic.gpu
    spec_m = gm.eager_spec_issue_s if gm.eager_spec_issue_s is not None else gm.eager_host_issue_s
    rows = [("gpu.eager_overhead_s (ms)", ms(gm.eager_overhead_s), ms(ga.eager_overhead_s)),
            ("eager issue of a speculative cycle (ms)", ms(spec_m), ms(ga.eager_spec_issue_s)),
            ("gpu.eager_host_issue_s (ms)", ms(gm.eager_host_issue_s), ms(ga.eager_host_issue_s))]
    hm, ha = measured.host, analytic.host
    first = ("launch_per_extend_s", "launch_per_inject_s", "extend_idle_lead_s", "slot_expansion_s", "launch_s",
             "launch_tail_s", "launch_per_req_s", "schedule_s", "schedule_per_req_s", "process_s", "process_per_req_s",
             "sync_wakeup_s", "ingest_per_request_s")
    # then every other scalar host term the simulator charges (the result path, per token ...)
    for k in (*first, *(k for k in HOST_SECONDS if k not in first)):
        rows.append((f"host.{k} (ms)", ms(getattr(hm, k, None)), ms(getattr(ha, k, None))))
    return rows


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def print_terms(measured_path: str, analytic_path: str, out=sys.stdout) -> None:
    m, a = load_profile(measured_path), load_profile(analytic_path)
    pairs = grid_pairs(m, a)
    for name, (xs, cs, ms_, as_) in pairs.items():
        print(f"\n{name}: measured / analytic ms (ratio); rows {('batch' if name in ('decode', 'cycle') else 'tokens')}, "
              f"columns context", file=out)
        print("| | " + " | ".join(f"{c:g}" for c in cs) + " |", file=out)
        print("|---|" + "---|" * len(cs), file=out)
        for i, x in enumerate(xs):
            cells = " | ".join(f"{ms_[i, j] * 1e3:.2f} / {as_[i, j] * 1e3:.2f} ({ms_[i, j] / as_[i, j]:.2f})" for j in range(len(cs)))
            print(f"| {x:g} | {cells} |", file=out)
    print("\nshape terms | measured | analytic | ratio", file=out)
    print("|---|---|---|---|", file=out)
    for t, mv, av in shape_terms(pairs):
        print(f"| {t} | {mv:.4g} | {av:.4g} | {mv / av:.2f} |", file=out)
    print("\neager and host terms | measured | analytic | ratio", file=out)
    print("|---|---|---|---|", file=out)
    for t, mv, av in scalar_terms(m, a):
        r = "-" if mv is None or av in (None, 0) else f"{mv / av:.2f}"
        print(f"| {t} | {_f(mv)} | {_f(av)} | {r} |", file=out)


def count_within(df: pd.DataFrame, col: str, limits=(5.0, 10.0)) -> dict[str, list[int]]:
    """Per metric (and ``all``), how many rows have ``|col|`` within each limit (percent)."""
    out = {}
    rows = df[df.metric.isin(METRICS)]
    for metric in (*METRICS, "all"):
        sub = rows if metric == "all" else rows[rows.metric == metric]
        e = sub[col].abs().to_numpy()
        out[metric] = [int((e <= lim).sum()) for lim in limits] + [len(e)]
    return out


def read_repredict_csv(path: str) -> pd.DataFrame:
    """A repredict_h200.py CSV, or ValueError naming the file and the columns it needs
    (a YAML given by mistake gave pandas' 'Error tokenizing data' without the file)."""
    need = ("cell", "arm", "metric", "measured", "old_error_pct", "new_error_pct")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a repredict_h200.py CSV ({type(e).__name__}); "
                         f"columns needed: {', '.join(need)}") from None
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a repredict_h200.py CSV: no column {', '.join(missing)}; "
                         f"columns needed: {', '.join(need)}")
    return df


def print_counts(paths: list[str], out=sys.stdout) -> None:
    for p in paths:
        df = read_repredict_csv(p)
        old, new = count_within(df, "old_error_pct"), count_within(df, "new_error_pct")
        print(f"\n{p}\n| metric | old: within 5 % | within 10 % | new: within 5 % | within 10 % | of | new median error |",
              file=out)
        print("|---|---|---|---|---|---|---|", file=out)
        for metric in (*METRICS, "all"):
            sub = df[df.metric.isin(METRICS) if metric == "all" else df.metric == metric]
            med = float(np.median(sub.new_error_pct)) if len(sub) else float("nan")
            o, n = old[metric], new[metric]
            print(f"| {metric} | {o[0]} | {o[1]} | {n[0]} | {n[1]} | {n[2]} | {med:+.1f} % |", file=out)


def grid_observations(measured: Profile, kinds=("decode", "extend")) -> list:
    """The measured profile's grid cells as :class:`sim.analytic.fit.Observation`: decode
    cells by (batch, context), extend cells by (tokens, mean attended context), the shapes
    :func:`sim.analytic.fit.predict` reads. The speculative cycle is left out: a measured
    cycle holds the runtime's draft forward, which ``predict``'s verify does not."""
    from specsched.sim.analytic.fit import Observation

    obs = []
    for kind in kinds:
        grid = getattr(measured.gpu, kind)
        xs, cs, sec = _cells(grid)
        for i, x in enumerate(xs):
            for j, c in enumerate(cs):
                if kind == "decode":
                    obs.append(Observation("decode", int(x), 1, c, float(sec[i, j])))
                else:
                    obs.append(Observation("extend", 1, int(x), c, float(sec[i, j])))
    return obs


def refit(measured_path: str, analytic_path: str, factors: list[str], out: str) -> None:
    """Fit ``factors`` of the analytic profile to the measured profile's decode and extend
    cells (sim.analytic.fit.fit_efficiency), rebuild it (writer.regenerate), write ``out``."""
    from specsched.sim.analytic.cli import write_analytic_profile
    from specsched.sim.analytic.fit import fit_efficiency
    from specsched.sim.analytic.writer import regenerate

    m, a = load_profile(measured_path), load_profile(analytic_path)
    obs = grid_observations(m)
    eff, rms = fit_efficiency(a, obs, factors)
    fitted = {f: getattr(eff, f) for f in factors}
    d = regenerate(a, **fitted)
    d["name"] = Path(out).stem
    d["provenance"]["analytic.fit"] = (f"fit_efficiency of {', '.join(factors)} to the {len(obs)} decode and extend "
                                       f"cells of {measured_path}: " + ", ".join(f"{k} {v:.4g}" for k, v in fitted.items())
                                       + f"; RMS log error {rms:.3f}")
    write_analytic_profile(d, Path(out))
    before = [np.log(_predict(a, ob) / ob.seconds) for ob in obs]
    print(f"{out}: " + ", ".join(f"{k} {v:.4g}" for k, v in fitted.items())
          + f"; RMS log error {float(np.sqrt(np.mean(np.square(before)))):.3f} -> {rms:.3f} over {len(obs)} cells")


def _predict(profile: Profile, ob) -> float:
    from specsched.sim.analytic.fit import predict
    from specsched.sim.analytic.gpus import GpuSpec
    from specsched.sim.analytic.models import ModelArch
    from specsched.sim.analytic.roofline import Efficiency, Parallel

    a = profile.analytic
    return predict(ModelArch.model_validate(a["model"]), GpuSpec.model_validate(a["gpu"]),
                   Parallel(a["tp"], a["dtype"]), Efficiency.model_validate(a["efficiency"]), ob)


def print_runs(paths: list[str], out=sys.stdout) -> None:
    """Per run (cell, arm): each metric's measured value and, per CSV, the new prediction's
    error (the first CSV's ``old`` error too: the profile the round was predicted with)."""
    frames = [read_repredict_csv(p) for p in paths]
    base = frames[0]
    short = {"median_ttft_ms": "TTFT med", "p90_ttft_ms": "TTFT p90", "median_tpot_ms": "TPOT",
             "median_itl_ms": "ITL", "output_throughput": "tok/s"}
    heads = ["measured profile", *[Path(p).stem for p in paths]]
    print("| cell | arm | metric | measured | " + " | ".join(heads) + " |", file=out)
    print("|---|---|---|---:|" + "---:|" * len(heads), file=out)
    for (cell, arm), grp in base[base.metric.isin(METRICS)].groupby(["cell", "arm"], sort=False):
        for metric in METRICS:
            row = grp[grp.metric == metric]
            if row.empty:
                continue
            errs = [float(row.old_error_pct.iloc[0])]
            for f in frames:
                r = f[(f.cell == cell) & (f.arm == arm) & (f.metric == metric)]
                errs.append(float(r.new_error_pct.iloc[0]) if len(r) else float("nan"))
            print(f"| {cell} | {arm} | {short[metric]} | {float(row.measured.iloc[0]):.4g} | "
                  + " | ".join(f"{e:+.1f} %" for e in errs) + " |", file=out)


def graft_host(measured_path: str, analytic_path: str, out: str) -> None:
    """The analytic profile with the measured profile's ``host`` block and eager issue terms
    (the runtime's host: its launch, extend issue, idle leads), every GPU grid kept: splits
    a re-prediction's miss into the GPU model's and the host's."""
    import yaml
    from specsched.sim.analytic.cli import write_analytic_profile

    m = yaml.safe_load(Path(measured_path).read_text())
    d = yaml.safe_load(Path(analytic_path).read_text())
    # the two in the wrong order wrote a measured profile with an analytic one's host terms
    for path, doc, want in ((measured_path, m, False), (analytic_path, d, True)):
        if not isinstance(doc, dict) or ("analytic" in doc) is not want:
            raise ValueError(f"{path}: {'not an analytic profile' if want else 'an analytic profile'}: "
                             "give the measured profile first, then the analytic one")
    d["host"] = m["host"]
    for k in ("eager_host_issue_s", "eager_spec_issue_s"):
        d["gpu"].pop(k, None)
        if m["gpu"].get(k) is not None:
            d["gpu"][k] = m["gpu"][k]
    d["name"] = Path(out).stem
    d["provenance"]["host"] = f"grafted from {measured_path} (host block and eager issue), GPU grids analytic"
    write_analytic_profile(d, Path(out))
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("terms", help="a measured and an analytic profile, term by term")
    t.add_argument("measured")
    t.add_argument("analytic")
    c = sub.add_parser("counts", help="repredict_h200.py outputs counted within 5 / 10 %%")
    c.add_argument("csv", nargs="+")
    u = sub.add_parser("runs", help="per run and metric, the errors of several repredict_h200.py outputs")
    u.add_argument("csv", nargs="+")
    gh = sub.add_parser("graft-host", help="an analytic profile with a measured profile's host terms")
    gh.add_argument("measured")
    gh.add_argument("analytic")
    gh.add_argument("--out", required=True)
    r = sub.add_parser("refit", help="fit an analytic profile's factors to a measured profile's decode and extend cells")
    r.add_argument("measured")
    r.add_argument("analytic")
    r.add_argument("--factors", default="matmul,hbm,kernel_gap_s,attention")
    r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "terms":
            print_terms(args.measured, args.analytic)
        elif args.cmd == "graft-host":
            graft_host(args.measured, args.analytic, args.out)
        elif args.cmd == "runs":
            print_runs(args.csv)
        elif args.cmd == "refit":
            refit(args.measured, args.analytic, args.factors.split(","), args.out)
        else:
            print_counts(args.csv)
    except (OSError, ValueError, KeyError) as e:
        print(f"analytic_terms: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
