"""Re-predict recorded GPU runs with a profile's idle-lead tables as recorded and as the
profiler now fits them (runtime.profile_fit.neighbourhood_median), no GPU needed.

``python benchmarks/lead_smoothing.py CALL:PROFILE [CALL:PROFILE ...] [--out CSV]``: CALL is a
call folder under docs/measurements holding gpu_validate's ``results.tar.gz`` (each run's
``*-predicted/scenario.yaml`` is the exact scenario it was predicted with, ``*-measured/summary.json``
what the runtime measured); PROFILE the profile that call predicted with (relative to
docs/measurements). Every run is simulated twice, with the profile as it is and with its four
``host.*_lead_by_tokens`` tables smoothed, and the five target figures' errors against the
measurement are printed (and written to ``--out``), with the count within 5 % and the mean
|error| of each. A run whose scenario no longer loads is skipped and named.

``--per-point-from-provenance``: the "as recorded" side reads each table's per-point leads
from the profile's provenance (the medians the profiler took, span minus device, clamped at
0, a token count measured twice averaged) instead of its table: for a profile made since the
profiler smooths, the tables as measured before smoothing. Such a profile without it is refused
(its tables are smoothed already: the two sides would be smoothed once and twice).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from specsched.runtime.cli_commands import TARGET_METRICS
from specsched.runtime.profile_fit import neighbourhood_median
from specsched.sim.atomic import file_above

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "measurements"
TABLES = ("extend_idle_lead_by_tokens", "extend_own_idle_lead_by_tokens", "inject_idle_lead_by_tokens",
          "inject_unprepared_idle_lead_by_tokens")


def smoothed(profile: dict) -> dict:
    """The profile (a loaded YAML mapping) with every lead table the median over its neighbourhood."""
    out = copy.deepcopy(profile)
    for key in TABLES:
        table = out.get("host", {}).get(key)
        if table:
            table["seconds"] = neighbourhood_median(table["tokens"], table["seconds"])
    return out


_POINT = re.compile(r"(\d+): ([0-9.eE+-]+) ms / ([0-9.eE+-]+) ms(?: -> ([0-9.eE+-]+) ms)?")
"""A provenance point ``TOKENS: SPAN ms / DEVICE ms [-> LEAD ms]`` (runtime/profile_provenance.py;
the lead, where written, to four digits of its own rather than the difference of two rounded spans)."""


def per_point_from_provenance(profile: dict) -> dict:
    """The profile with each lead table rebuilt from the points its provenance records: per
    token count the mean of max(0, span - device) over its points (as the profiler fitted
    before smoothing). A table whose provenance holds no point is left as it is."""
    out = copy.deepcopy(profile)
    for key in TABLES:
        text = out.get("provenance", {}).get(f"host.{key}", "")
        table = out.get("host", {}).get(key)
        by: dict[float, list[float]] = {}
        for tok, span, dev, lead in _POINT.findall(text.split("[")[0]):
            by.setdefault(float(tok), []).append(float(lead) / 1e3 if lead else max(0.0, (float(span) - float(dev)) / 1e3))
        if table and by:
            toks = sorted(by)
            table.update(tokens=toks, seconds=[sum(by[t]) / len(by[t]) for t in toks])
    return out


def _predict(scenario: Path, profile: Path, out: Path) -> dict | None:
    proc = subprocess.run([sys.executable, "-m", "specsched", "run", str(scenario), "--set", f"profile={profile}",
                           "--out", str(out), "-q"], capture_output=True, text=True)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        print(f"skipped {scenario.parent.name}: {last}", file=sys.stderr)
        return None
    return json.loads((out / "summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calls", nargs="+", metavar="CALL:PROFILE")
    ap.add_argument("--out", type=Path, help="write every figure's errors here (CSV)")
    ap.add_argument("--per-point-from-provenance", action="store_true",
                    help="the 'as recorded' side: each lead table's points as its provenance records them")
    args = ap.parse_args(argv)
    calls = []
    for arg in args.calls:   # every argument checked before the first run
        call, sep, prof = arg.partition(":")
        tar, prof_path = DOCS / call / "results.tar.gz", DOCS / prof
        if not sep or not tar.is_file() or not prof_path.is_file():
            print(f"{arg}: needs CALL:PROFILE with {tar} and {prof_path} present", file=sys.stderr)
            return 2
        try:
            recorded, why = yaml.safe_load(prof_path.read_text()), "not a profile (a mapping with a host block)"
        except yaml.YAMLError as e:
            recorded, why = None, f"not YAML ({' '.join(str(e).split())})"
        if not isinstance(recorded, dict) or not isinstance(recorded.get("host"), dict):
            print(f"{arg}: {prof_path}: {why}", file=sys.stderr)
            return 2
        smoothed_since = [k for k in TABLES if "neighbourhood_median" in str(recorded.get("provenance", {}).get(f"host.{k}", ""))]
        if smoothed_since and not args.per_point_from_provenance:
            print(f"{arg}: the profile's lead tables are smoothed already (host.{smoothed_since[0]}'s provenance says "
                  "so): give --per-point-from-provenance to set the tables as measured against them", file=sys.stderr)
            return 2
        calls.append((call, tar, recorded))
    if args.out is not None and args.out.is_dir():
        print(f"--out {args.out}: a folder: give the CSV file's path, e.g. {args.out / 'rerun.csv'}", file=sys.stderr)
        return 2
    if args.out is not None and (above := file_above(args.out)) is not None:
        print(f"--out {args.out}: {above} is a file: it cannot hold the CSV", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i, (call, tar, recorded) in enumerate(calls):
            if args.per_point_from_provenance:
                recorded = per_point_from_provenance(recorded)
            profiles = {"as recorded": work / f"p{i}-recorded.yaml", "smoothed": work / f"p{i}-smoothed.yaml"}
            profiles["as recorded"].write_text(yaml.safe_dump(recorded))
            profiles["smoothed"].write_text(yaml.safe_dump(smoothed(recorded)))
            runs = work / f"c{i}"
            with tarfile.open(tar) as tf:
                tf.extractall(runs, filter="data")
            for pred in sorted(runs.rglob("*-predicted")):
                meas = pred.with_name(pred.name.removesuffix("-predicted") + "-measured")
                if not (meas / "summary.json").is_file():
                    continue
                measured = json.loads((meas / "summary.json").read_text())
                got = {k: _predict(pred / "scenario.yaml", p, work / "o" / f"{i}-{pred.name}-{k[:2]}")
                       for k, p in profiles.items()}
                if None in got.values():
                    continue
                for m in TARGET_METRICS:
                    if measured.get(m):
                        rows.append({"call": call, "run": pred.name.removesuffix("-predicted"), "metric": m,
                                     "measured": measured[m],
                                     **{f"error_{k.split()[-1]}": 100 * (v[m] / measured[m] - 1) for k, v in got.items()}})
    df = pd.DataFrame(rows)
    if df.empty:
        print("no run re-predicted", file=sys.stderr)
        return 2
    moved = df[(df.error_smoothed.abs() - df.error_recorded.abs()).abs() > 0.3]
    pd.set_option("display.width", 200)
    print("figures whose |error| moved by more than 0.3 points:")
    print(moved.round(2).to_string(index=False))
    for col in ("error_recorded", "error_smoothed"):
        e = df[col].abs()
        print(f"{col.split('_')[1]:>9}: within 5 % {int((e <= 5).sum())}/{len(e)}, mean |error| {e.mean():.2f} %, "
              f"median {e.median():.2f} %")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
