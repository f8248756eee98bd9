"""Every verify step of a recorded run, its batch rebuilt and priced by the simulator's cost model.

Per graph-replayed verify step (``steps.parquet``, mode verify, part main; a run without
speculative decoding: every decode step, mode decode) the batch is
rebuilt from the run's own records: the requests whose first token came before the step
ended and whose last came after it (``requests.parquet``), each at its prompt plus the tokens
delivered before the step ended (``chunks.parquet``: the committed length the engine's
length bound holds, accepted drafts of the step before included). Steps whose rebuilt batch
size differs from the recorded one are left out. Each kept step is priced by
``CostModel.step_s`` of its batch size, mean and longest context, with the server of the
scenario the run ran (its ``scenario.yaml`` at the arm it names; else
scenarios/h200/CELL.yaml at ARM; then each ``--set KEY=VALUE``), under each ``--profile``
(``NAME=PATH``; ``NAME=PATH+excess``: the profile with ``gpu.verify``'s excess refitted at the
stall loop's width, runtime.profile_fit.refit_verify_excess), and the medians set beside the
measured durations by batch size and, with ``--by-width``, by the width the runtime
attended over (``round_up(longest + window, gpu.attention_bucket)``); ``--by-graph-batch``: by the
graph batch each step was padded to instead of its batch size; ``--padding``: how the first
profile's error moves with the padding positions of the steps' dense attention within one graph
batch and width (:func:`padding_points`), per run and over all runs given. Runs made before the runtime
captured SGLang's graph batch sizes (up to H200 round 28) padded to 1, 2, 4, 8, 12, 16, 24, ...:
``--set server.cuda_graph_bs=[1,2,4,8,12,16,24,32,40,48,56,64]``. On a predicted run
the cost model's own profile gives back the simulated durations (docs/measurements/h200-v26.md,
"The verify excess").

``--extends``: every extend-only forward instead (mode extend, part main, no decode rows), its
requests rebuilt from the records (:func:`rebuild_extends`) and priced by
``CostModel.extend_s`` at their prompt lengths, prefix 0, and the drafter's injection behind
it where the profile has ``gpu.draft_inject``; tables by the prefill graph bucket the extend
replays (``CostModel.extend_bucket``), one-request extends and all
(docs/measurements/h200-extend-buckets.md).

    python benchmarks/verify_step_costs.py RESULTS/sharegpt-lengths-base-measured \\
        --profile recorded=docs/measurements/h200-v26/h200-8b.yaml \\
        --profile refit=docs/measurements/h200-v26/h200-8b.yaml+excess --by-width 16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.bundled import scenarios_dir
from specsched.sim.cost_model import CostModel
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile


def rebuild(run: Path) -> pd.DataFrame:
    """Per verify (or decode) step of ``run``: recorded batch size ``bs``, rebuilt size ``n``, duration
    ``ms``, the rebuilt contexts' ``mean`` and ``longest``."""
    st = pd.read_parquet(run / "steps.parquet")
    rq = pd.read_parquet(run / "requests.parquet")
    ch = pd.read_parquet(run / "chunks.parquet").sort_values("time_s", kind="stable")
    got = {r: (g.time_s.to_numpy(), np.cumsum(g.n_tokens.to_numpy())) for r, g in ch.groupby("rid")}
    v = st[st["mode"].isin(("verify", "decode")) & (st["part"] == "main")]
    out = []
    for s in v.itertuples():
        end = s.gpu_end_s
        live = rq[(rq.first_token_s < end) & (rq.finish_s > end)]
        ctx = []
        for r in live.itertuples():
            ts, cum = got.get(r.rid, (np.array([]), np.array([])))
            k = int(np.searchsorted(ts, end, side="left"))
            ctx.append(int(r.input_len) + (int(cum[k - 1]) if k else 0))
        out.append((int(s.batch_size), len(ctx), (end - s.gpu_start_s) * 1e3,
                    float(np.mean(ctx)) if ctx else 0.0, max(ctx) if ctx else 0))
    return pd.DataFrame(out, columns=["bs", "n", "ms", "mean", "longest"])


def rebuild_extends(run: Path) -> pd.DataFrame:
    """Per extend-only forward of ``run`` (steps.parquet mode extend, part main, no decoding
    rows): recorded batch size ``bs`` and tokens ``tokens``, the rebuilt prompt lengths
    ``lens`` (the ``bs`` earliest-arrived requests, started by the step's start, whose first
    token came at or after its end; requests.parquet), ``ok`` (they sum to the recorded tokens:
    no cached prefix, no chunk), the forward's GPU span ``ms`` and its injection's ``inj_ms``
    (part inject of the same step; NaN without one). Prefixes are taken as 0 (``ok`` false
    otherwise). The first step (the cold first forward) is left out."""
    st = pd.read_parquet(run / "steps.parquet")
    rq = pd.read_parquet(run / "requests.parquet").sort_values("start_s", kind="stable")
    inj = st[(st["mode"] == "extend") & (st["part"] == "inject")]
    inj_ms = dict(zip(inj.step, (inj.gpu_end_s - inj.gpu_start_s) * 1e3, strict=True))
    ext = st[(st["mode"] == "extend") & (st["part"] == "main") & (st.step > st.step.min())]
    if "decoding_reqs" in ext:
        ext = ext[ext.decoding_reqs == 0]
    out = []
    for s in ext.itertuples():
        live = rq[(rq.first_token_s >= s.gpu_end_s - 1e-6) & (rq.start_s <= s.gpu_start_s + 1e-3)]
        lens = tuple(int(x) for x in live.input_len.head(int(s.batch_size)))
        ok = len(lens) == int(s.batch_size) and sum(lens) == int(s.num_extend_tokens)
        out.append((int(s.batch_size), int(s.num_extend_tokens), lens, ok, (s.gpu_end_s - s.gpu_start_s) * 1e3,
                    inj_ms.get(s.step, float("nan"))))
    return pd.DataFrame(out, columns=["bs", "tokens", "lens", "ok", "ms", "inj_ms"])


def price_extends(steps: pd.DataFrame, server, profiles: dict[str, object]) -> pd.DataFrame:
    """``steps`` (of :func:`rebuild_extends`, ``ok`` rows) with one ms column per profile
    (``CostModel.extend_s`` at prefix 0), ``NAME inj`` where the profile has an injection
    grid, and ``bucket``: the token bucket the extend replays (0: eager)."""
    steps = steps.copy()
    for name, prof in profiles.items():
        cm = CostModel(prof, server)
        steps[name] = [cm.extend_s(ln, (0,) * len(ln)) * 1e3 for ln in steps.lens]
        if cm.inject is not None:
            steps[f"{name} inj"] = [cm.extend_s(ln, (0,) * len(ln), inject=True) * 1e3 for ln in steps.lens]
        steps["bucket"] = [cm.extend_bucket(t) or 0 for t in steps.tokens]
    return steps


def _profile(spec: str):
    from specsched.runtime.profile_fit import refit_verify_excess  # torch: only with +excess

    path, _, how = spec.partition("+")
    p = load_profile(path)
    if how == "excess":
        refit = refit_verify_excess(p)
        if refit is None:
            raise ConfigError(path, "provenance.gpu.verify", "<no excess>", "an excess taken at the grid's last column")
        p = refit
    elif how:
        raise ConfigError(spec, "--profile", how, "PATH or PATH+excess")
    return p


def price(steps: pd.DataFrame, server, profiles: dict[str, object]) -> pd.DataFrame:
    """``steps`` (of :func:`rebuild`, matched rows) with one ms column per profile."""
    steps = steps.copy()
    for name, prof in profiles.items():
        cm = CostModel(prof, server)
        steps[name] = [cm.step_s(int(r.bs), r.mean, r.longest) * 1e3 for r in steps.itertuples()]
    return steps


def padding_points(steps: pd.DataFrame, server, profile, name: str, min_steps: int = 10,
                   outlier_ms: float = 0.5) -> pd.DataFrame:
    """Per step of ``steps`` (of :func:`price`): its graph batch ``P``, attention width ``W``,
    and, within its (P, W) cell, ``xd`` and ``ed``: how far its padding cost ``x`` and the
    error of profile column ``name`` (measured less priced, ms) sit from the cell's mean and
    median.

    Under ``gpu.attention_width: padded_max`` a step attends ``P x W`` positions (runtime/
    spec_cycle.py ``_prepare``, runtime/layers.py ``paged_attention``): ``n (mean + window)``
    hold the requests' own KV, the rest the padding slot (runtime/kv_cache.py ``PAD_SLOT``, and
    the padded graph rows whole). The profile's grid was timed with every position real; at
    one (P, W) its price falls with the padding by ``1 - gpu.attention_padding_cost`` of what
    the padding would cost were it real (:func:`padding_read`). ``x`` = padding positions
    times the grid's cost per row-position at (P, W): what they cost were they as dear as real
    KV (ms).
    Cells of fewer than ``min_steps`` steps are left out, and steps whose error leaves the
    cell's median by more than ``outlier_ms`` (a step the host or an extend held up)."""
    cm = CostModel(profile, server)
    grid, off = cm.step_grid, cm.width_offset
    rows = []
    for r in steps.itertuples():
        p_ = cm.padded_batch(int(r.bs)) or int(r.bs)
        w = cm.attention_width(int(r.longest))
        c = w - off
        per_pos = (grid(p_, c + 128) - grid(p_, c - 128)) / 256 / p_ * 1e3
        pad = p_ * w - r.n * (r.mean + server.spec_window)
        rows.append((p_, w, per_pos * pad, r.ms - getattr(r, name)))
    d = pd.DataFrame(rows, columns=["P", "W", "x", "err"])
    d = d[d.groupby(["P", "W"]).x.transform("size") >= min_steps]
    d = d.assign(xd=d.x - d.groupby(["P", "W"]).x.transform("mean"),
                 ed=d.err - d.groupby(["P", "W"]).err.transform("median"))
    return d[d.ed.abs() <= outlier_ms]


def padding_slope(points: pd.DataFrame) -> float:
    """The least-squares slope of ``ed`` on ``xd`` (:func:`padding_points`, one run's or
    several runs' together): how much more (+) or less (-) a padding position costs than the
    priced profile charges for it, in units of a real position (:func:`padding_read`); NaN
    without two distinct points."""
    if len(points) < 2 or not points.xd.std() > 0:
        return float("nan")
    return float(np.polyfit(points.xd, points.ed, 1)[0])


def padding_read(points: pd.DataFrame, charged: float) -> float:
    """What a padding position costs against a real one, read from the steps: the profile's
    ``gpu.attention_padding_cost`` (``charged``; 1 without the field) plus
    :func:`padding_slope`. The price of a step at one graph batch and width falls by
    ``(1 - charged) x`` as its padding cost ``x`` (:func:`padding_points`) grows
    (sim.cost_model.CostModel.step_column), the measured duration by ``(1 - true) x``, so
    the error's slope on ``x`` is ``true - charged``. (Up to round 31 the script printed
    ``1 + slope``, right only for profiles without the field: round 31's steps, priced at
    0.734, read 1.04 that way and 0.77 this way.)"""
    return charged + padding_slope(points)


def table(steps: pd.DataFrame, names: list[str], by: str) -> pd.DataFrame:
    g = steps.groupby(by).agg(steps=("ms", "size"), measured_ms=("ms", "median"), **{n: (n, "median") for n in names})
    for n in names:
        g[f"{n} %"] = (g[n] / g.measured_ms - 1) * 100
    return g.round(2)


def _scenario(run: Path, cell: str, arm: str, overrides: list[str] | None = None):
    """The scenario ``run`` ran: its own ``scenario.yaml`` at the arm it names (a rate sweep's
    runs are named CELL-rateR-measured, no arm), else scenarios/h200/CELL.yaml at ARM; then
    ``overrides`` (``"key=value"``, analysis.overrides).

    Raises:
        ConfigError: the scenario cannot be read or has no such arm.
    """
    own = run / "scenario.yaml"
    if own.is_file():
        import yaml

        try:
            named = yaml.safe_load(own.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(str(own), "<file>", "", f"not YAML ({str(e).splitlines()[0]})") from e
        arm = named.get("arm") or "base" if isinstance(named, dict) else "base"
        return load_scenario_with_overrides(own, str(arm), overrides)
    return load_scenario_with_overrides(scenarios_dir() / "h200" / f"{cell}.yaml", arm, overrides)


def _print_extends(run: Path, server, profiles: dict[str, object]) -> None:
    steps = rebuild_extends(run)
    kept = price_extends(steps[steps.ok], server, profiles)
    print(f"{run.name}: {len(kept)} of {len(steps)} extend forwards rebuilt at their recorded tokens (prefix 0)")
    names = [c for c in kept.columns if c in profiles or (c.endswith(" inj") and c[:-4] in profiles)]
    one = kept[kept.bs == 1]
    print("one request, by bucket:")
    print(table(one, [n for n in names if not n.endswith(" inj")], "bucket").to_string())
    inj = [n for n in names if n.endswith(" inj")]
    if inj and one.inj_ms.notna().any():
        print("its injection, by bucket:")
        print(table(one.assign(ms=one.inj_ms), inj, "bucket").to_string())
    print("two or more requests, by bucket:")
    print(table(kept[kept.bs > 1], [n for n in names if not n.endswith(" inj")], "bucket").to_string())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="results directories CELL-ARM-measured (or -predicted)")
    ap.add_argument("--profile", action="append", required=True, metavar="NAME=PATH[+excess]")
    ap.add_argument("--by-width", type=int, metavar="BS", help="also the medians by attention width at this batch size")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                    help="scenario override (repeatable): what the runtime ran with that the run's scenario does not "
                         "say, e.g. server.cuda_graph_bs=[1,2,4,8,12,16,24,32,40,48,56,64] for runs made before it "
                         "captured SGLang's graph batch sizes")
    ap.add_argument("--padding", action="store_true",
                    help="also how the first profile's error moves with the steps' padding positions, within one "
                         "graph batch and width (padding_slope), per run and pooled over the runs")
    ap.add_argument("--by-graph-batch", action="store_true",
                    help="tables by the graph batch each step was padded to (CostModel.padded_batch), not by batch size")
    ap.add_argument("--extends", action="store_true",
                    help="the extend-only forwards instead, priced by CostModel.extend_s, by prefill graph bucket")
    args = ap.parse_args(argv)
    try:
        profiles = {}
        for spec in args.profile:
            name, sep, path = spec.partition("=")
            if not sep or not name:
                raise ConfigError(spec, "--profile", spec, "NAME=PATH or NAME=PATH+excess")
            profiles[name] = _profile(path)
        pooled: list[pd.DataFrame] = []
        for run in args.runs:
            parts = run.name.rsplit("-", 2)
            if len(parts) != 3 or parts[2] not in ("measured", "predicted") or not (run / "steps.parquet").is_file():
                raise ConfigError(str(run), "run", run.name, "a results directory CELL-ARM-measured or -predicted")
            missing = [f for f in ("requests.parquet", "chunks.parquet") if not (run / f).is_file()]
            if missing:
                raise ConfigError(str(run), "run", ", ".join(missing), "missing: the batches are rebuilt from them")
            sc = _scenario(run, parts[0], parts[1], args.overrides)
            if args.extends:
                _print_extends(run, sc.server, profiles)
                continue
            steps = rebuild(run)
            kept = steps[steps.n == steps.bs]
            print(f"{run.name}: {len(kept)} of {len(steps)} verify/decode steps rebuilt at their recorded batch size")
            kept = price(kept, sc.server, profiles)
            by = "bs"
            if args.by_graph_batch:
                cm = CostModel(next(iter(profiles.values())), sc.server)
                kept = kept.assign(graph_bs=[cm.padded_batch(int(b)) or int(b) for b in kept.bs])
                by = "graph_bs"
            print(table(kept, list(profiles), by).to_string())
            if args.padding:
                first = next(iter(profiles))
                pts = padding_points(kept, sc.server, profiles[first], first)
                pooled.append(pts)
                cells = pts.groupby(["P", "W"]).apply(padding_slope, include_groups=False)
                charged = profiles[first].gpu.attention_padding_cost
                print(f"{first}: a padding position costs {padding_read(pts, charged):.2f} of a real one "
                      f"({len(pts)} steps; the profile charges {charged:.3f}); by graph batch and width "
                      f"(slope against the profile's charge):")
                print(cells.round(3).to_string())
            if args.by_width:
                bucket = next(iter(profiles.values())).gpu.attention_bucket
                w = ((kept.longest + sc.server.spec_window + bucket - 1) // bucket) * bucket
                sel = kept.assign(width=w)[kept.bs == args.by_width]
                print(f"batch {args.by_width} by attention width:")
                print(table(sel, list(profiles), "width").to_string())
        if len(pooled) > 1:
            both = pd.concat(pooled)
            charged = next(iter(profiles.values())).gpu.attention_padding_cost
            print(f"all runs: a padding position costs {padding_read(both, charged):.2f} of a real one "
                  f"({len(both)} steps)")
    except ConfigError as e:
        print(f"verify_step_costs: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
