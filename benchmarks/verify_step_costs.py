"""Every verify step of a recorded run, its batch rebuilt and priced by the simulator's cost model.

Per graph-replayed verify step (``steps.parquet``, mode verify, part main) the batch is
rebuilt from the run's own records: the requests whose first token came before the step
ended and whose last came after it (``requests.parquet``), each at its prompt plus the tokens
delivered before the step ended (``chunks.parquet``: the committed length the engine's
length bound holds, accepted drafts of the step before included). Steps whose rebuilt batch
size differs from the recorded one are left out. Each kept step is priced by
``CostModel.step_s`` of its batch size, mean and longest context, with the server of the
scenario the run ran (its ``scenario.yaml`` at the arm it names; else
scenarios/h200/CELL.yaml at ARM), under each ``--profile``
(``NAME=PATH``; ``NAME=PATH+excess``: the profile with ``gpu.verify``'s excess refitted at the
stall loop's width, runtime.profile_fit.refit_verify_excess), and the medians set beside the
measured durations by batch size and, with ``--by-width``, by the width the runtime
attended over (``round_up(longest + window, gpu.attention_bucket)``). On a predicted run
the cost model's own profile gives back the simulated durations (docs/measurements/h200-v26.md,
"The verify excess").

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
from specsched.sim.bundled import scenarios_dir
from specsched.sim.config import load_scenario
from specsched.sim.cost_model import CostModel
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile


def rebuild(run: Path) -> pd.DataFrame:
    """Per verify step of ``run``: recorded batch size ``bs``, rebuilt size ``n``, duration
    ``ms``, the rebuilt contexts' ``mean`` and ``longest``."""
    st = pd.read_parquet(run / "steps.parquet")
    rq = pd.read_parquet(run / "requests.parquet")
    ch = pd.read_parquet(run / "chunks.parquet").sort_values("time_s", kind="stable")
    got = {r: (g.time_s.to_numpy(), np.cumsum(g.n_tokens.to_numpy())) for r, g in ch.groupby("rid")}
    v = st[(st["mode"] == "verify") & (st["part"] == "main")]
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


def table(steps: pd.DataFrame, names: list[str], by: str) -> pd.DataFrame:
    g = steps.groupby(by).agg(steps=("ms", "size"), measured_ms=("ms", "median"), **{n: (n, "median") for n in names})
    for n in names:
        g[f"{n} %"] = (g[n] / g.measured_ms - 1) * 100
    return g.round(2)


def _scenario(run: Path, cell: str, arm: str):
    """The scenario ``run`` ran: its own ``scenario.yaml`` at the arm it names (a rate sweep's
    runs are named CELL-rateR-measured, no arm), else scenarios/h200/CELL.yaml at ARM.

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
        return load_scenario(own, str(arm))
    return load_scenario(scenarios_dir() / "h200" / f"{cell}.yaml", arm)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="results directories CELL-ARM-measured (or -predicted)")
    ap.add_argument("--profile", action="append", required=True, metavar="NAME=PATH[+excess]")
    ap.add_argument("--by-width", type=int, metavar="BS", help="also the medians by attention width at this batch size")
    args = ap.parse_args(argv)
    try:
        profiles = {}
        for spec in args.profile:
            name, sep, path = spec.partition("=")
            if not sep or not name:
                raise ConfigError(spec, "--profile", spec, "NAME=PATH or NAME=PATH+excess")
            profiles[name] = _profile(path)
        for run in args.runs:
            parts = run.name.rsplit("-", 2)
            if len(parts) != 3 or parts[2] not in ("measured", "predicted") or not (run / "steps.parquet").is_file():
                raise ConfigError(str(run), "run", run.name, "a results directory CELL-ARM-measured or -predicted")
            missing = [f for f in ("requests.parquet", "chunks.parquet") if not (run / f).is_file()]
            if missing:
                raise ConfigError(str(run), "run", ", ".join(missing), "missing: the batches are rebuilt from them")
            sc = _scenario(run, parts[0], parts[1])
            steps = rebuild(run)
            kept = steps[steps.n == steps.bs]
            print(f"{run.name}: {len(kept)} of {len(steps)} verify steps rebuilt at their recorded batch size")
            kept = price(kept, sc.server, profiles)
            print(table(kept, list(profiles), "bs").to_string())
            if args.by_width:
                bucket = next(iter(profiles.values())).gpu.attention_bucket
                w = ((kept.longest + sc.server.spec_window + bucket - 1) // bucket) * bucket
                sel = kept.assign(width=w)[kept.bs == args.by_width]
                print(f"batch {args.by_width} by attention width:")
                print(table(sel, list(profiles), "width").to_string())
    except ConfigError as e:
        print(f"verify_step_costs: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
