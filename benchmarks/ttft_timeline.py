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

A single run's results directory (``specsched measure``, ``benchmarks/measure_sweep.py``:
``steps.parquet``, ``requests.parquet``, ``timeseries.parquet``, ``scenario.yaml``,
``summary.json``) is split request by request instead (:func:`first_token_split`), since a
run whose forwards differ from the simulator's (any Poisson run of a few thousand steps)
has no common steps table to split along: per request, around the extend whose GPU end
is the last at or before its first token,

- ``send to schedule pass``: from the request's send to the schedule pass that built that
  extend (the host finishing its iteration, queueing behind other prefills);
- ``schedule pass to extend start``: the host's issue of the extend up to its first
  kernel, or the forward still running on the GPU;
- ``extend span``: the extend's GPU span;
- ``extend end to first token``: the rest of the loop before the token reaches the client
  (the overlap loop processes a forward's results after launching the next one).

The four sum to the request's TTFT. ``--host-factors 1,1.25`` simulates the run's scenario
(its own seed) with ``host.speed_factor`` at each value; ``--condition-host`` sets
``host.reference_work_s`` to the run's own measured host speed (summary.json host_speed)::

    python benchmarks/ttft_timeline.py RUNS/rate4-seed1-rep1 --profile PROFILE --host-factors 1,1.25

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


CLOCK_TOLERANCE_S = 5e-4
"""A measured run's GPU times (timing events) and host times (perf_counter) are two clocks
that drift apart over a run: first tokens stamped up to 0.1 ms before their extend's end
event in 30 s runs on an H200 host. Well below any extend (5 ms or more on the proxy)."""
FIRST_TOKEN_TERMS = ("send to schedule pass", "schedule pass to extend start", "extend span",
                     "extend end to first token")


def first_token_split(steps: pd.DataFrame, requests: pd.DataFrame, timeseries: pd.DataFrame,
                      tolerance_s: float = 0.0) -> pd.DataFrame:
    """Per request (index ``rid``), its TTFT in :data:`FIRST_TOKEN_TERMS` (seconds) around
    the extend that gave its first token: the main-part extend row whose GPU end is the
    last at or before the first token (the token is read from that forward's results; the
    next forward may start before the delivery), within ``tolerance_s`` (a measured run:
    :data:`CLOCK_TOLERANCE_S`; a few of its requests whose delivery came within that of the
    next extend's end are then read against that extend). ``timeseries`` has one row per schedule pass that
    built a batch, i.e. per main-part steps row, in order; the pass's host time is where
    the loop built that extend. The terms sum to ``ttft_s``.

    Raises:
        ValueError: ``timeseries`` does not have one row per main-part steps row, or a
            request's first token precedes every extend.
    """
    main = steps[steps.part == "main"].reset_index(drop=True)
    if len(main) != len(timeseries):
        raise ValueError(f"{len(timeseries)} schedule passes for {len(main)} main forwards")
    ext = main.index[main["mode"] == "extend"].to_numpy()
    st, en = main.gpu_start_s.to_numpy(), main.gpu_end_s.to_numpy()
    passes = timeseries.time_s.to_numpy()
    out = []
    for r in requests.itertuples():
        j = int(np.searchsorted(en[ext], r.first_token_s + tolerance_s, side="right")) - 1
        if j < 0:
            raise ValueError(f"request {r.rid}: first token at {r.first_token_s:.6f} s before any extend")
        k = ext[j]
        out.append({"rid": r.rid, "ttft_s": r.ttft_s, "extend_tokens": int(main.num_extend_tokens[k]),
                    FIRST_TOKEN_TERMS[0]: passes[k] - r.start_s, FIRST_TOKEN_TERMS[1]: st[k] - passes[k],
                    FIRST_TOKEN_TERMS[2]: en[k] - st[k], FIRST_TOKEN_TERMS[3]: r.first_token_s - en[k]})
    return pd.DataFrame(out).set_index("rid")


def run_dir_report(d: Path, profile, host_factors: list[float], condition_host: bool) -> str:
    """Markdown: medians (ms) of :func:`first_token_split` of the measured run in ``d`` and
    of the simulator's runs of its scenario (its seed) at each ``host.speed_factor``, and
    the paired median difference (measured - simulated, same request) of each term."""
    import json

    from specsched.sim.config import load_scenario, with_value

    need = ("steps.parquet", "requests.parquet", "timeseries.parquet", "scenario.yaml", "summary.json")
    for f in need:
        if not (d / f).is_file():
            raise ConfigError(str(d), f, "<missing>", "a run's results directory holds " + ", ".join(need))
    summary = json.loads((d / "summary.json").read_text())
    sc = load_scenario(d / "scenario.yaml")
    ref = (summary.get("host_speed") or {}).get("reference_work_s") if condition_host else None
    if condition_host and ref is None:
        raise ConfigError(str(d / "summary.json"), "host_speed.reference_work_s", "<missing>",
                          "--condition-host needs the run's measured host speed")
    if ref is not None:
        sc = with_value(sc, "host.reference_work_s", ref)
    measured = first_token_split(pd.read_parquet(d / "steps.parquet"), pd.read_parquet(d / "requests.parquet"),
                                 pd.read_parquet(d / "timeseries.parquet"), CLOCK_TOLERANCE_S)
    cols = [*FIRST_TOKEN_TERMS, "ttft_s"]
    table = pd.DataFrame({"measured": measured[cols].median() * 1e3})
    for k in host_factors:
        r = run_scenario(with_value(sc, "host.speed_factor", k), seed=summary.get("seed", sc.seed), profile=profile)
        sim = first_token_split(r.steps, r.requests, r.timeseries)
        table[f"host x{k:g}"] = sim[cols].median() * 1e3
        both = measured.index.intersection(sim.index)
        table[f"measured - host x{k:g} (paired)"] = (measured.loc[both, cols] - sim.loc[both, cols]).median() * 1e3
    table = table.rename(index={"ttft_s": "TTFT"})
    cond = f", host conditioned on the run's reference work {ref * 1e3:.3f} ms" if ref is not None else ""
    return (f"## {d.name}\n\nPer request, medians (ms) around the extend that gave the first token "
            f"({len(measured)} requests{cond}):\n\n" + md(table) + "\n")


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
    ap.add_argument("--host-factors", default="1",
                    help="a single run's directory: comma-separated host.speed_factor values to simulate (default 1)")
    ap.add_argument("--condition-host", action="store_true",
                    help="a single run's directory: condition the host on the run's measured host speed")
    args = ap.parse_args(argv)
    if args.results.is_dir() and (args.results / "steps.parquet").is_file():
        try:
            factors = [float(x) for x in args.host_factors.split(",") if x]
        except ValueError:
            raise ConfigError("<command line>", "--host-factors", args.host_factors,
                              "comma-separated numbers > 0") from None
        if not factors or not all(k > 0 for k in factors):
            raise ConfigError("<command line>", "--host-factors", args.host_factors, "comma-separated numbers > 0")
        print(run_dir_report(args.results, load_profile(args.profile), factors, args.condition_host))
        return 0
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
