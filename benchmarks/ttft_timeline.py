"""Where a measured run's TTFT goes, forward by forward, against the simulator's run of the
same scenario (no GPU needed).

The runtime drives the simulator's own Scheduler, so with the same scenario, arm and seed
both engines launch the same forwards (the script checks: mode, part, batch size and extend
tokens of every steps-table row). For each request the time to its first token is then a
sum over the forwards launched before its delivery: the GPU idle gap before each forward,
each forward's span up to the last one, and the host's lag from that last forward's start
to the delivery. The difference measured - simulated splits exactly into those terms,
grouped as:

- ``gap before extend`` / ``gap before verify``: GPU idle before a main launch;
- ``slot-expansion gap``: GPU idle between an extend's end and its draft injection's start
  (under ``prefill_slot_expansion_sync``: the host blocks until the extend drains, prepares
  the injection and launches it);
- ``extend span`` / ``inject span`` / ``verify span``: the forwards' GPU spans;
- ``delivery lag``: from the last forward's start to the first token's time stamp;
- ``send time (subtracted)``: TTFT counts from the request's send (0 in a burst).

Printed (markdown) per arm: the per-extend-step medians (main span, slot-expansion gap,
injection span, measured and simulated) and the split of the median and p90 request's TTFT
difference. ``--refit-slot-expansion`` also simulates with ``host.slot_expansion_s`` refitted
from the profile's own provenance by the current rule
(:func:`runtime.profile_fit.slot_expansion_fit`, the points read back with
:func:`runtime.profile_fit.slot_expansion_points_from_provenance`): the rule fixed after
round 15 no longer subtracts the injection's preparation from the measured gap.

    python benchmarks/ttft_timeline.py docs/measurements/h200-v15/results.tar.xz \\
        --profile docs/measurements/h200-v15/h200-1b.yaml --cell burst66 \\
        --arms stream_wait,both,base,waiting_aware --refit-slot-expansion

``RESULTS`` is a round's ``results.tar.xz`` (or ``.tar.gz``) or a directory holding
``CELL-ARM-measured/`` (or ``results/CELL-ARM-measured/``). The scenario is
``scenarios/h200/CELL.yaml`` with the arm applied. docs/measurements/h200-v15.md ("burst66
TTFT") has the output for round 15.
"""

from __future__ import annotations

import argparse
import lzma
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.bundled import scenarios_dir
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.profile import load_profile

KEY = ["step", "mode", "part", "batch_size", "num_extend_tokens"]
TERMS = ("gap before extend", "gap before verify", "slot-expansion gap", "extend span", "inject span",
         "verify span", "delivery lag", "send time (subtracted)")


def measured_dir(results: Path, cell: str, arm: str, tmp: Path) -> Path:
    """The run's measured results directory, extracted from an archive into ``tmp`` if
    needed.

    Raises:
        ConfigError: ``results`` does not exist, is not a readable tar archive, or holds no
            ``CELL-ARM-measured/``.
    """
    name = f"{cell}-{arm}-measured"
    if not results.exists():
        raise ConfigError("<command line>", "results", str(results),
                          "does not exist: give a round's results.tar.xz (or .tar.gz) or a directory")
    if results.is_dir():
        for d in (results / name, results / "results" / name):
            if d.is_dir():
                return d
        raise ConfigError(str(results), "--cell/--arms", f"{cell}/{arm}",
                          f"no {name}/ (nor results/{name}/) here{_runs_in(p.name for p in results.glob('**/*-measured'))}")
    try:
        with tarfile.open(results) as tar:
            names = [m.name for m in tar.getmembers()]
            members = [m for m in tar.getmembers() if f"/{name}/" in f"/{m.name}" and m.isfile()]
            if not members:
                runs = {part for n in names for part in Path(n).parts if part.endswith("-measured")}
                raise ConfigError(str(results), "--cell/--arms", f"{cell}/{arm}",
                                  f"no {name}/ in the archive{_runs_in(runs)}")
            tar.extractall(tmp, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as e:
        raise ConfigError("<command line>", "results", str(results),
                          f"not a readable tar archive ({type(e).__name__}); give a round's results.tar.xz "
                          "(or .tar.gz) or a directory") from None
    return tmp / Path(members[0].name).parent


def _runs_in(names) -> str:
    """``; runs: CELL-ARM, ...`` for the measured runs found, or nothing."""
    runs = sorted({n.removesuffix("-measured") for n in names})
    return f"; measured runs there: {', '.join(runs)}" if runs else "; no measured runs there"


def with_gaps(steps: pd.DataFrame) -> pd.DataFrame:
    """Steps with ``span`` and ``gap`` (GPU idle before the row, from the previous row's end
    or the run's start), in seconds."""
    s = steps.reset_index(drop=True).copy()
    s["span"] = s.gpu_end_s - s.gpu_start_s
    s["gap"] = s.gpu_start_s - s.gpu_end_s.shift(1).fillna(0.0)
    return s


def _gap_term(row) -> str:
    if row.part == "inject":
        return "slot-expansion gap"
    return "gap before extend" if row.mode == "extend" else "gap before verify"


def _span_term(row) -> str:
    return "inject span" if row.part == "inject" else ("extend span" if row.mode == "extend" else "verify span")


def ttft_split(steps: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Per request: the row of the last forward launched (GPU start) at or before its first
    token, and its TTFT as a sum of the :data:`TERMS` (seconds)."""
    s = with_gaps(steps)
    starts = s.gpu_start_s.to_numpy()
    gap_terms = [_gap_term(r) for r in s.itertuples()]
    span_terms = [_span_term(r) for r in s.itertuples()]
    out = []
    for r in requests.itertuples():
        last = int(np.searchsorted(starts, r.first_token_s, side="right")) - 1
        parts = dict.fromkeys(TERMS, 0.0)
        for i in range(last + 1):
            parts[gap_terms[i]] += s.gap[i]
            if i < last:
                parts[span_terms[i]] += s.span[i]
        parts["delivery lag"] = r.first_token_s - starts[last]
        # TTFT counts from the request's send (0 for every request of a burst), the sum
        # above from the run's start
        parts["send time (subtracted)"] = -r.start_s
        out.append({"rid": r.rid, "row": last, "ttft_s": r.ttft_s, **parts})
    return pd.DataFrame(out).set_index("rid")


def pick(requests: pd.DataFrame, q: float) -> int:
    """The request whose TTFT is the ``q`` quantile's lower neighbour (for an even count the
    median lies between two requests of one delivery in a burst)."""
    order = requests.sort_values(["ttft_s", "rid"])
    i = int(np.floor(q * (len(order) - 1)))
    return int(order.rid.iloc[i])


def step_table(m: pd.DataFrame, p: pd.DataFrame) -> pd.DataFrame:
    """Medians over the extend steps (ms): main span, slot-expansion gap, injection span."""
    rows = {}
    for name, s in (("measured", m), ("simulated", p)):
        s = with_gaps(s)
        ext = s[(s["mode"] == "extend") & (s.part == "main")]
        inj = s[s.part == "inject"]
        rows[name] = {"extend steps": len(ext), "extend span": ext.span.median() * 1e3,
                      "first extend span": ext.span.iloc[0] * 1e3 if len(ext) else np.nan,
                      "slot-expansion gap": inj.gap.median() * 1e3, "inject span": inj.span.median() * 1e3}
    return pd.DataFrame(rows)


def md(df: pd.DataFrame, fmt: str = "{:.2f}") -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for idx, row in df.iterrows():
        cells = [v if isinstance(v, str) else fmt.format(v) for v in row]
        lines.append(f"| {idx} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a round's results archive or directory")
    ap.add_argument("--profile", required=True, help="the round's profile")
    ap.add_argument("--cell", default="burst66", help="scenarios/h200/CELL.yaml (default burst66)")
    ap.add_argument("--arms", default="stream_wait", help="comma-separated arms (default stream_wait)")
    ap.add_argument("--refit-slot-expansion", action="store_true",
                    help="also simulate with host.slot_expansion_s refitted from the profile's provenance")
    args = ap.parse_args(argv)
    scenario = scenarios_dir() / "h200" / f"{args.cell}.yaml"
    if not scenario.is_file():
        cells = sorted(p.stem for p in scenario.parent.glob("*.yaml"))
        raise ConfigError("<command line>", "--cell", args.cell, f"no scenarios/h200/{args.cell}.yaml; "
                          f"allowed: {', '.join(cells)}")
    arms = [a for a in args.arms.split(",") if a]
    if not arms:
        raise ConfigError("<command line>", "--arms", args.arms, "comma-separated arm names of the scenario")
    for arm in arms:  # an unknown arm is refused here, before any run
        load_scenario_with_overrides(scenario, arm, {})
    if not args.results.exists():
        raise ConfigError("<command line>", "results", str(args.results),
                          "does not exist: give a round's results.tar.xz (or .tar.gz) or a directory")
    profile = load_profile(args.profile)
    variants = {"simulated": profile}
    if args.refit_slot_expansion:
        # imported here: runtime.profile_fit needs torch, the rest of the script does not
        from specsched.runtime.profile_fit import (
            refit_slot_expansion,
            slot_expansion_points_from_provenance,
        )

        refit = refit_slot_expansion(profile)
        if refit is None:
            print(f"ttft_timeline: {args.profile}: host.slot_expansion_s's provenance has no gap / preparation "
                  "medians to refit from", file=sys.stderr)
            return 2
        pts, new = slot_expansion_points_from_provenance(profile), refit.host.slot_expansion_s
        variants["refit"] = refit
        print(f"host.slot_expansion_s: {profile.host.slot_expansion_s * 1e3:.3f} ms as profiled, "
              f"{new * 1e3:.3f} ms refitted (points: "
              + ", ".join(f"{t}: {g * 1e3:.3f} / {q * 1e3:.3f}" for t, g, q in pts) + " ms gap / preparation)\n")
    with tempfile.TemporaryDirectory() as tmp:
        for arm in arms:
            d = measured_dir(args.results, args.cell, arm, Path(tmp))
            for f in ("steps.parquet", "requests.parquet"):
                if not (d / f).is_file():
                    raise ConfigError(str(args.results), f"{d.name}/{f}", "<missing>",
                                      "a measured run's results directory holds steps.parquet and requests.parquet")
            sc = load_scenario_with_overrides(scenario, arm, {})
            m_steps, m_req = pd.read_parquet(d / "steps.parquet"), pd.read_parquet(d / "requests.parquet")
            runs = {k: run_scenario(sc, seed=sc.seed, profile=p) for k, p in variants.items()}
            print(f"## {args.cell} {arm}\n")
            for k, r in runs.items():
                same = (len(r.steps) == len(m_steps)
                        and (r.steps[KEY].to_numpy() == m_steps[KEY].to_numpy()).all())
                if not same:
                    print(f"{k}: the forwards differ from the measured run's; step-by-step split skipped\n")
                    runs = {kk: rr for kk, rr in runs.items() if kk != k}
            if not runs:
                continue
            st = step_table(m_steps, runs.get("simulated", next(iter(runs.values()))).steps)
            for k, r in runs.items():
                if k != "simulated":
                    st[k] = step_table(m_steps, r.steps)["simulated"]
            print("Per extend step, medians (ms; counts for 'extend steps'):\n")
            print(md(st) + "\n")
            split_m = ttft_split(m_steps, m_req)
            for q, label in ((0.5, "median"), (0.9, "p90")):
                rid = pick(m_req, q)
                t = pd.DataFrame({"measured": split_m.loc[rid, list(TERMS)] * 1e3})
                for k, r in runs.items():
                    sp = ttft_split(r.steps, r.requests)
                    t[k] = sp.loc[rid, list(TERMS)] * 1e3
                    t[f"measured - {k}"] = t["measured"] - t[k]
                t.loc["TTFT"] = t.sum()
                print(f"{label} TTFT request (rid {rid}, first token after steps-table row "
                      f"{int(split_m.loc[rid, 'row'])}), ms:\n")
                print(md(t) + "\n")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """:func:`main`, a user's bad input (a file, a cell, an arm, a profile) as one line and exit 2."""
    from specsched.sim.errors import one_line_on_bad_input

    return one_line_on_bad_input(main, argv)


if __name__ == "__main__":
    sys.exit(cli())
