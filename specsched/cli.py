"""The ``specsched`` command line.

``specsched run SCENARIO [--arm A] [--seed N] [--out DIR]`` simulates one arm and prints a
bench_serving-style table; ``compare``, ``plot`` and ``sweep`` come from :mod:`analysis`;
``profile``, ``measure`` and ``validate`` from :mod:`runtime` (each registers its own
subcommands). Bad input (scenario, profile, arguments) prints one line naming the file, key,
value and what is allowed, and exits with status 2; no result files are left behind.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from specsched.sim.errors import ConfigError

EXIT_BAD_INPUT = 2


def default_out_dir(scenario_name: str, arm: str, seed: int) -> Path:
    """Where ``run`` writes when no --out is given: results/<scenario>/<arm>-seed<N>."""
    return Path("results") / scenario_name / f"{arm}-seed{seed}"


def cmd_run(args: argparse.Namespace) -> int:
    """Simulate one arm of a scenario, print the table, write the results directory."""
    from specsched.sim.config import load_scenario
    from specsched.sim.engine import run_scenario
    from specsched.sim.report import format_report
    from specsched.sim.results import write_results

    if args.set:
        from specsched.analysis.overrides import load_scenario_with_overrides

        scenario = load_scenario_with_overrides(args.scenario, args.arm, args.set)
    else:
        scenario = load_scenario(args.scenario, args.arm)
    seed = scenario.seed if args.seed is None else args.seed
    t0 = time.perf_counter()
    result = run_scenario(scenario, seed=seed)
    wall = time.perf_counter() - t0
    # reference figures belong to the scenario as written: not shown for a modified one
    ref = None if args.set else scenario.reference.get(args.arm)
    print(format_report(result.summary, ref))
    out = Path(args.out) if args.out else default_out_dir(scenario.name, args.arm, seed)
    write_results(result, out, fmt=args.format)
    print(f"simulated in {wall:.2f} s; results in {out}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand registered."""
    p = argparse.ArgumentParser(prog="specsched", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="simulate one arm of a scenario")
    r.add_argument("scenario", help="scenario YAML file")
    r.add_argument("--arm", default="base", help="arm name from the scenario's arms (default base)")
    r.add_argument("--seed", type=int, default=None, help="seed (default: the scenario's)")
    r.add_argument("--out", default=None, help="results directory (default results/<scenario>/<arm>-seed<N>)")
    r.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="table format")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario key (repeatable), e.g. server.chunked_prefill_size=8192")
    r.set_defaults(func=cmd_run)
    for module in ("specsched.sim.calibrate", "specsched.analysis.cli_commands", "specsched.analysis.bench_cli",
                   "specsched.runtime.cli_commands"):
        try:
            mod = importlib.import_module(module)
        except ImportError as e:  # an optional part, or its optional dependencies, not installed
            if e.name and (e.name in (module, module.rsplit(".", 1)[0]) or e.name.split(".")[0] in ("torch", "distributed", "dask")):
                continue
            raise
        mod.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from specsched.sim.scheduler import UnschedulableRequest

    try:
        return int(args.func(args) or 0)
    except (ConfigError, UnschedulableRequest) as e:
        print(f"specsched: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
