"""Measure one scenario with the runtime at several request rates (or client concurrencies),
seeds and repeats.

The data a hold-out check of ``specsched calibrate --from`` needs (docs/real-servers.md):
a Poisson rate sweep, several draws of the arrivals (seeds) and repeats of the same draw (the
device's run-to-run spread), every run a results directory whose ``bench_serving.jsonl``
holds the per-request lists and send times (``start_times``), so a fit replays the arrivals
each run met.

    python benchmarks/measure_sweep.py scenarios/h200/poisson-nospec.yaml --device cuda \\
        --rates 4,8,16,32,48,64 --seeds 1,2 --repeats 2 --set workload.num_requests=128 \\
        --out OUT/sweep [--deadline-s 540]

A closed-loop sweep as bench_serving runs one (``--request-rate inf --max-concurrency C``)
takes ``--concurrencies 2,4,8,...`` instead of ``--rates``; the requests stay the scenario's
(set ``workload.num_requests`` once for the sweep), so one engine serves every concurrency.

One engine per seed (the seed decides the model's weights, the lengths and the arrivals);
its model, pool and graphs are reused across rates and repeats (``RuntimeEngine.set_scenario``),
each run after the engine's unmeasured pass. Repeats go round the whole rate list, so a drift
of the device over the call shows as a difference between repeats, not between rates.
Writes ``OUT/runs/rate<R>-seed<S>-rep<K>/`` (``conc<C>-...`` in a concurrency sweep; results directories, also packed into
``OUT/results.tar.gz``), ``OUT/sweep.csv`` (rate, seed, repeat and the headline metrics of
every run) and ``OUT/bench_serving/`` (each run's bench_serving line, one file a run, for
``benchmarks/calibrate_holdout.py``) and ``OUT/sweep.log`` (everything printed). Each run's
folder also holds ``host_probe.parquet``: what the host thread did in each launch call (wall,
thread CPU, switches, GC; runtime/host_probe.py), rows aligned with ``steps.parquet``, as
``gpu_validate.py`` writes it: the rented H200's host runs at two speeds for seconds at a time,
and a run's hold-out error follows the level it met (docs/real-servers.md, seeds 1-5). A run that fails is reported on one line and the next
starts with a fresh engine; ``--deadline-s`` starts no run after that many seconds.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tarfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from specsched.analysis.io import atomic_write, atomic_write_text
from specsched.analysis.overrides import load_scenario_with_overrides, parse_overrides
from specsched.sim.bench_serving import bench_line
from specsched.sim.cli_types import positive_int
from specsched.sim.errors import ConfigError, MissingDependency, require

COLUMNS = ("rate", "max_concurrency", "seed", "repeat", "median_ttft_ms", "p90_ttft_ms", "median_itl_ms", "mean_tpot_ms",
           "output_throughput", "duration")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


@dataclass(frozen=True)
class LoadPoint:
    """One load of a sweep: a Poisson request rate (req/s) or, at ``--request-rate inf``, a
    client concurrency; ``overrides`` are the scenario keys that set it."""
    name: str
    overrides: tuple[str, ...]
    max_concurrency: int | None = None


def concurrency_overrides(kind: str, c: int) -> tuple[str, ...]:
    """The scenario keys that run a workload of ``kind`` at client concurrency ``c``: a
    closed loop's and a multi-turn workload's ``concurrency`` (they read no
    ``max_concurrency``: set there, it was ignored and every point ran at the file's
    concurrency under another point's name), a trace's ``max_concurrency`` (its own send
    times), and otherwise ``--request-rate inf --max-concurrency c`` (a burst sends as that
    without the cap)."""
    if kind in ("closed_loop", "multi_turn"):
        return (f"workload.concurrency={c}",)
    if kind == "trace":
        return (f"workload.max_concurrency={c}",)
    return (*(("workload.kind=poisson",) if kind == "burst" else ()), "workload.request_rate=.inf",
            f"workload.max_concurrency={c}")


def load_points(rates: str | None, concurrencies: str | None, kind: str = "poisson") -> list[LoadPoint]:
    """The sweep's loads from ``--rates`` or ``--concurrencies`` (comma-separated), the latter
    for a workload of ``kind`` (:func:`concurrency_overrides`)."""
    if concurrencies is not None:
        return [LoadPoint(f"conc{c}", concurrency_overrides(kind, c), c) for c in _ints(concurrencies)]
    return [LoadPoint(f"rate{r:g}", (f"workload.request_rate={r:g}",)) for r in _floats(rates or "")]


def write_sweep_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` (:data:`COLUMNS`) as CSV, replaced atomically."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    atomic_write(path, write)


def write_launch_probe(eng: object, res: object, directory: Path) -> None:
    """``directory/host_probe.parquet``: the engine's per-launch host readings of its last run
    (``RuntimeEngine.launch_probe``) beside the run's step, mode, part and batch size (row i =
    steps row i); nothing when the engine keeps none."""
    probe = eng.launch_probe() if hasattr(eng, "launch_probe") else None
    if not probe:
        return
    import pandas as pd

    steps = res.steps
    frame = pd.DataFrame({c: steps[c].to_numpy() for c in ("step", "mode", "part", "batch_size")})
    frame = frame.assign(**{k: list(v[:len(frame)]) for k, v in probe.items()})
    atomic_write(directory / "host_probe.parquet", lambda tmp: frame.to_parquet(tmp, index=False))


def pack(run_dir: Path, path: Path) -> None:
    """Every results directory under ``run_dir`` into ``path`` (gzip tar, replaced atomically)."""
    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(run_dir, arcname=run_dir.name)
    atomic_write(path, write)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--arm", default="base")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scenario override (repeatable)")
    load = ap.add_mutually_exclusive_group(required=True)
    load.add_argument("--rates", help="request rates, req/s, comma-separated")
    load.add_argument("--concurrencies", help="client concurrencies (bench_serving --max-concurrency at "
                                              "--request-rate inf), comma-separated")
    ap.add_argument("--seeds", default="1", help="seeds, comma-separated (default 1)")
    ap.add_argument("--repeats", type=positive_int, default=1, help="runs of each rate and seed (default 1)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--deadline-s", type=float, default=None, help="start no run after this many seconds")
    a = ap.parse_args(argv)
    try:
        require("torch", "measuring (this script)")
    except MissingDependency as e:   # one line, not the runtime's ModuleNotFoundError traceback
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    from specsched.runtime.engine import RuntimeEngine
    from specsched.sim.results import write_results

    t0 = time.perf_counter()
    try:   # a bad scenario, override, rate or concurrency: one line, before anything is written
        seeds = _ints(a.seeds)
        base = parse_overrides(a.set)
        kind = load_scenario_with_overrides(a.scenario, a.arm, a.set).workload.kind if a.concurrencies else "poisson"
        points = load_points(a.rates, a.concurrencies, kind)
        scenarios = {p: load_scenario_with_overrides(a.scenario, a.arm, [*a.set, *p.overrides]) for p in points}
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    except ValueError as e:   # a list entry that is not a number
        ap.exit(2, f"{ap.prog}: error: --rates/--concurrencies/--seeds: {e}\n")
    runs_dir, lines_dir = a.out / "runs", a.out / "bench_serving"
    runs_dir.mkdir(parents=True, exist_ok=True)
    lines_dir.mkdir(parents=True, exist_ok=True)
    log = open(a.out / "sweep.log", "a")

    def say(text: str) -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    rows: list[dict] = []
    failures: list[str] = []
    say(f"scenario {a.scenario} arm {a.arm}, overrides {base or 'none'}; {', '.join(p.name for p in points)}, "
          f"seeds {seeds}, {a.repeats} repeat(s)")
    for seed in seeds:
        eng = None
        for rep in range(1, a.repeats + 1):
            for r in points:
                name = f"{r.name}-seed{seed}-rep{rep}"
                if a.deadline_s is not None and time.perf_counter() - t0 > a.deadline_s:
                    say(f"skipped {name} (deadline)")
                    continue
                try:
                    if eng is None or not eng.accepts(scenarios[r]):   # another engine where the load resizes one
                        eng = RuntimeEngine(scenarios[r], preset=a.preset, device=a.device, seed=seed)
                    else:
                        eng.set_scenario(scenarios[r])
                    t = time.perf_counter()
                    res = eng.run()
                except Exception as e:  # report, go on with a fresh engine
                    eng = None
                    failures.append(f"{name}: {type(e).__name__}: {e}".splitlines()[0])
                    say(f"FAILED {failures[-1]}\n{traceback.format_exc()}")
                    continue
                write_results(res, runs_dir / name)
                write_launch_probe(eng, res, runs_dir / name)
                atomic_write_text(lines_dir / f"{name}.jsonl", bench_line(res) + "\n")
                s = res.summary
                rows.append({"rate": scenarios[r].workload.request_rate, "max_concurrency": r.max_concurrency,
                             "seed": seed, "repeat": rep, **{k: s.get(k) for k in COLUMNS[4:]}})
                write_sweep_csv(a.out / "sweep.csv", rows)
                say(f"{name:<24} {time.perf_counter() - t:5.1f} s  median TTFT {s['median_ttft_ms']:8.2f} ms  "
                      f"median ITL {s['median_itl_ms']:.3f} ms  {s['output_throughput']:8.0f} tok/s")
    pack(runs_dir, a.out / "results.tar.gz")
    shutil.rmtree(runs_dir, ignore_errors=True)
    say(f"{len(rows)} runs in {time.perf_counter() - t0:.0f} s" + (f"; {len(failures)} failed" if failures else ""))
    log.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
