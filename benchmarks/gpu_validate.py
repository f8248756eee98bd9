"""Profile a GPU, then validate the simulator against the runtime on the scaled cells.

One command does everything that belongs together on a GPU machine:

    python benchmarks/gpu_validate.py --out OUTDIR [--preset 1b] [--cells batch1,batch8,...]

A round on one H200 in one call under ten minutes (profile on the machine that then runs
the cells, right before them: the host-paced parts of a profile, launch cost and eager
issue time, do not transfer between machines; docs/measurements/h200-v7-repredict.md):

    python benchmarks/gpu_validate.py --out OUT/round --max-bs 128 --budget 110 --deadline-s 500

1. ``runtime.profiler.profile_device`` runs the microbenchmarks and writes
   ``OUTDIR/h200-1b.yaml`` (the profile comes only from microbenchmarks, never from the
   scenario runs it is checked against);
2. for every scaled cell in ``scenarios/h200/`` and every arm (host_block / stream_wait x
   legacy / waiting-aware delay), measures the scenario with the runtime and simulates it
   with that profile;
3. writes ``validate.csv`` (cell, arm, metric, predicted, measured, error_pct),
   ``checks.md`` (the issue's targets: per-verify host-block vs stream-wait difference,
   GPU idle between verifies at batch 1, syncs counted, and every run that failed),
   ``results.tar.gz`` (every measured and predicted results directory),
   ``summary.md`` (the command, the times, and per metric how many figures are within
   5 %), ``host_probe.parquet`` in each measured results directory and a checks.md
   section: per launch call, its wall, the thread's CPU time, involuntary context
   switches and GC time, the eager verifies split into a fast and a slow level
   (runtime/host_probe.py), ``environment.txt`` (GPU clocks and power limit, CPU model) and
   ``gpu_validate.log`` (everything printed).
4. the host's speed per run (a fixed reference work's thread CPU time sampled over the
   run, runtime/host_reference.py) against the profile's ``host.reference_work_s``: in
   ``checks.md`` "Host speed per run", ``host_speed.parquet`` beside each measured run, and
   a second prediction conditioned on it (scenario ``host.reference_work_s``: each host term
   scaled by the run's reference work over the one it was measured at, the profile's
   ``host.reference_work_by_term``; one factor for a profile without it; sim/host_speed.py):
   ``validate_conditioned.csv`` and a section of ``summary.md``. The headline stays the
   microbenchmark-only prediction (docs/host-speed.md).

A run that fails (an exception in the runtime or the simulator) is reported on one line,
in checks.md and in the log, and the others go on with a fresh engine; validate.csv and
results.tar.gz are rewritten after every cell, and written once more at the end whatever
happened, so a run cut short keeps everything measured before it. ``--deadline-s`` stops
starting new runs once that many seconds have passed (a device call has a time limit).
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.runtime.cli_commands import (
    TARGET_METRICS,
    VALIDATE_METRICS,
    at_run_host_speed,
    itl_rung_note,
    validation_table,
)
from specsched.runtime.engine import RuntimeEngine
from specsched.runtime.host_probe import describe_launches, machine_counters
from specsched.runtime.host_reference import launch_call_reference, launch_speed_factor
from specsched.runtime.profile_harness import DEFAULT_EXTEND_LEAD_S
from specsched.sim.atomic import atomic_write, atomic_write_text
from specsched.sim.cli_types import nonnegative_int_list, positive_int_list
from specsched.sim.config import arm_names, load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.grid_range import warning_lines
from specsched.sim.profile import load_profile
from specsched.sim.results import write_results

ROOT = Path(__file__).resolve().parent.parent

CELLS = ["batch1", "batch8", "batch32", "batch64", "burst66", "poisson-nospec", "chunked-prefix", "window4-lowacc",
         "kv-retract", "above-graph-bs", "long-context"]
"""The default ``--cells``: the cells rounds 1-17 measured (a command without ``--cells`` keeps its meaning)."""

FIRST_ROUND = {"poisson-spec": 18, "window8-highacc": 18, "sharegpt-lengths": 18, "conc24-short": 18,
               "queue-chunked": 18,
               "gamma-bursty": 19, "window2-closed": 19, "maxrun8-overload": 19, "long-decode-nospec": 19,
               "small-chunk": 19,
               "window-sweep": 20,
               "mixed-chunk": 43, "lof-queue": 43,
               "priority-preempt": 45, "eagle-chain": 45,
               "shared-prefix": 46,
               "multi-turn": 48,
               "very-long-context": 51,
               "closed-loop-crossover": 56}
"""The round that first measured each cell added after round 17 (an out-of-sample check of the
profiler and the simulator: each was predicted before it ever ran). The summary counts each
round's new cells apart from every other cell."""

NEW_CELLS = list(FIRST_ROUND)
"""Cells added after round 17: named with ``--cells`` only, never in the default."""

KNOWN_CELLS = CELLS + NEW_CELLS
"""Every name ``--cells`` (and ``--poisson-cell``) accepts: a file scenarios/h200/NAME.yaml."""


def parse_cells(text: str) -> list[str]:
    """``--cells``: names separated by commas ("none" or empty: no cells).

    Raises:
        ValueError: a name not in :data:`KNOWN_CELLS` (the message lists them).
    """
    cells = [c for c in text.split(",") if c and c != "none"]
    unknown = [c for c in cells if c not in KNOWN_CELLS]
    if unknown:
        raise ValueError(f"unknown cell {', '.join(map(repr, unknown))}; known: {', '.join(KNOWN_CELLS)}")
    return cells


def verify_gaps(steps) -> tuple[float, float]:
    """(median wall per verify, median GPU idle between consecutive verifies) in ms, over
    consecutive verify steps at the full batch; NaN where no two such steps follow each other
    (an open-loop run whose batch moves with its arrivals)."""
    s = steps[steps["part"] == "main"].reset_index(drop=True)
    ver = (s["mode"] == "verify").to_numpy()
    full = s.loc[ver, "batch_size"].max()
    ok = ver[1:] & ver[:-1] & (s["batch_size"].to_numpy()[1:] == full) & (s["batch_size"].to_numpy()[:-1] == full)
    end = s["gpu_end_s"].to_numpy()
    start = s["gpu_start_s"].to_numpy()
    walls = np.diff(end)[ok]
    idle = (start[1:] - end[:-1])[ok]
    if not walls.size:
        return float("nan"), float("nan")
    return float(np.median(walls) * 1000), float(np.median(idle) * 1000)


def grid_reach_line(name: str, steps, grid_x: dict[str, float]) -> str | None:
    """One checks.md line when a run's decode/verify forwards (``steps``: its steps table)
    ran at batch sizes above the profile's step grid (``grid_x``: the largest measured batch
    of ``decode`` and ``verify``, the grids the simulator reads them from), else None.

    Those forwards are priced by :class:`sim.profile.GridInterp`'s linear extrapolation from
    the grid's last segment, which the step's cost does not follow (runtime.profile_harness
    ``grid_batch_sizes``: not linear between sizes). Round 28's poisson-nospec base ran its
    decode at batch 64 on a profile measured to 32: priced 6 % below what it ran, its TTFT
    29-32 % low (docs/measurements/h200-v28-poisson-nospec.md)."""
    parts = []
    for mode in ("decode", "verify"):
        top = grid_x.get(mode)
        if top is None:
            continue
        bs = np.asarray(steps["batch_size"])[np.asarray(steps["mode"]) == mode]
        above = bs[bs > top]
        if above.size:
            parts.append(f"{above.size} of {bs.size} {mode} forwards at batch {int(above.min())}..{int(above.max())}, "
                         f"above gpu.{mode}'s measured 1..{top:g} (priced by extrapolation; profile with "
                         f"max_bs >= {int(above.max())})")
    return f"- {name}: " + "; ".join(parts) if parts else None


def pre_run_warnings(jobs: list[Job], predict: Callable) -> list[str]:
    """Before any GPU time is spent: where each job's prediction (``predict(job, seed)`` at
    its scenario's seed) leaves the profile's measured grids, as the simulator's own range
    check words it (sim/grid_range.py: one line per grid and axis, the largest value
    reached and the measured range; what ``specsched run`` writes), each line prefixed by
    the job's name. Such a cell is predicted by extrapolation, so it is said up front."""
    lines = []
    for job in jobs:
        notes = predict(job, job.scenario.seed).extra["range_notes"]
        lines += [f"{job.label} {job.arm}: {line}" for line in warning_lines(notes)]
    return lines


def write_csv(path: Path, rows: list[dict], extra: tuple[str, ...] = ()) -> None:
    """``rows`` (cell, arm, metric, predicted, measured, error_pct, then ``extra`` columns)
    as CSV, replaced atomically."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["cell", "arm", "metric", "predicted", "measured", "error_pct", *extra])
            w.writeheader()
            w.writerows(rows)
    atomic_write(path, write)


def write_tarball(res_dir: Path, path: Path) -> None:
    """Every results directory under ``res_dir`` into ``path`` (gzip tar, replaced atomically)."""
    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:gz") as tar:
            if res_dir.exists():
                tar.add(res_dir, arcname="results")
    atomic_write(path, write)


@dataclass(slots=True)
class Job:
    """One measured + predicted run: ``label`` (cell or cell@rate), ``arm``, the scenario,
    and ``group`` (runs of one group share an engine: same model, pool and graphs)."""

    label: str
    arm: str
    scenario: object
    group: str
    result_name: str


@dataclass
class Validation:
    """Runs jobs one by one into ``out``; failures are recorded, never raised.

    Args:
        out: output folder (validate.csv, checks.md, results.tar.gz).
        measure: ``(job, engine or None) -> (RunResult, engine)``: measures a job, building an
            engine when given None.
        predict: ``(job, seed) -> RunResult``.
        deadline_s: start no job after this many seconds from construction (None: no limit).
        condition: ``(job, seed, speed_factor, launch_s) -> RunResult``: the prediction
            conditioned on the run's measured host speed (``speed_factor``: its reference work
            over ``reference_s``; ``launch_s``: its launch reference work's median, None when
            the run or the profile has none; sim/host_speed.py), or None (not made).
        reference_s: the profile's ``host.reference_work_s`` (the host speed it was measured
            at); a run's host-speed factor is its reference-work median over this.
        launch_reference_s: the profile's ``host.launch_reference_work_s`` (the launch path's
            speed it was measured at), or None: the launch path follows the reference work.
        launch_ref: the profile's own timing of the verify launch call per batch size
            (runtime.host_reference.launch_call_reference), or None: a second reading of a
            run's host speed, from its graph-replayed verify launch calls (checks.md).
        decode_launch_ref: the same for the decode launch call (``launch_call_reference(profile,
            "decode")``), read from a plain-decoding run's graph-replayed decode launches.
        grid_x: the largest batch the profile's ``gpu.decode`` / ``gpu.verify`` grids measured
            (keys ``decode``, ``verify``): each run whose forwards went above is named in
            checks.md (:func:`grid_reach_line`).
    """

    out: Path
    measure: Callable
    predict: Callable
    deadline_s: float | None = None
    condition: Callable | None = None
    reference_s: float | None = None
    launch_reference_s: float | None = None
    launch_ref: tuple | None = None
    decode_launch_ref: tuple | None = None
    grid_x: dict[str, float] = field(default_factory=dict)
    conditioned: list[dict] = field(default_factory=list)
    speed: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    checks: list[str] = field(default_factory=lambda: ["# GPU validation checks", ""])
    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    host: list[str] = field(default_factory=list)
    reach: list[str] = field(default_factory=list)
    itl_notes: list[str] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    @property
    def res_dir(self) -> Path:
        return self.out / "results"

    def run(self, jobs: list[Job]) -> None:
        """Measure and predict every job, group by group (one engine per group, rebuilt after a
        failure); after each group, rewrite validate.csv and results.tar.gz."""
        groups: dict[str, list[Job]] = {}
        for j in jobs:
            groups.setdefault(j.group, []).append(j)
        for group in groups.values():
            eng = None
            walls: dict[str, tuple[float, float, float, float]] = {}
            for job in group:
                name = f"{job.label} {job.arm}"
                if self.deadline_s is not None and time.perf_counter() - self.t0 > self.deadline_s:
                    self.skipped.append(name)
                    continue
                t0 = time.perf_counter()
                if eng is not None and hasattr(eng, "accepts") and not eng.accepts(job.scenario):
                    # an arm that resizes the model: this loop's name is the last one holding
                    # the old engine, so drop it here, or its device memory is still taken when
                    # the next engine sizes its pool against the free memory (engine_for)
                    eng = None
                    _free_device_memory()
                try:
                    eng = self._one(job, eng, walls, t0)
                except Exception as e:  # report, then go on with a fresh engine
                    eng = None
                    msg = f"{name}: {type(e).__name__}: {e}".splitlines()[0]
                    self.failures.append(msg)
                    print(f"FAILED {msg}", flush=True)
                    traceback.print_exc()
                    _free_device_memory()
                    continue
                write_csv(self.out / "validate.csv", self.rows, extra=INTERVAL_COLUMNS)  # a run cut short keeps what it measured
            if "stream_wait" in walls and "base" in walls:
                dm = walls["base"][0] - walls["stream_wait"][0]
                dp = walls["base"][2] - walls["stream_wait"][2]
                self.checks.append(
                    f"- {group[0].label}: host_block - stream_wait per verify: measured {dm:.3f} ms, predicted {dp:.3f} ms "
                    f"(difference {abs(dm - dp):.3f} ms); GPU idle between verifies: base {walls['base'][1]:.3f} ms, "
                    f"stream_wait {walls['stream_wait'][1]:.3f} ms of a {walls['stream_wait'][0]:.3f} ms verify "
                    f"({walls['stream_wait'][1] / walls['stream_wait'][0] * 100:.2f} %)")
            del eng
            _free_device_memory()
            self.save()

    def _one(self, job: Job, eng: object, walls: dict, t0: float) -> object:
        """Measure, predict and record one job; returns the engine (kept for the group)."""
        meas, eng = self.measure(job, eng)
        pred = self.predict(job, meas.summary["seed"])
        rows = [{"cell": job.label, "arm": job.arm, **r} for r in validation_table(pred.summary, meas.summary,
                                                                                    VALIDATE_METRICS)]
        cond_line = self._conditioned(job, meas)
        write_results(meas, self.res_dir / f"{job.result_name}-measured")
        add_measured_intervals(rows, meas, job.result_name)
        write_results(pred, self.res_dir / f"{job.result_name}-predicted")
        self._speed_samples(job, eng)
        try:  # a diagnostic: never fails the measured run
            self._host_probe(job, meas, pred, eng)
        except Exception as e:
            self.host.append(f"- {job.label} {job.arm}: probe not written: {type(e).__name__}: {e}".splitlines()[0])
        self.rows += rows
        if (reach := grid_reach_line(f"{job.label} {job.arm}", meas.steps, self.grid_x)) is not None:
            self.reach.append(reach)
        if (itl_note := itl_rung_note(pred, meas)) is not None:
            self.itl_notes.append(f"- {job.label} {job.arm}: {itl_note}")
        worst = max((abs(r["error_pct"]) for r in rows if r["error_pct"] == r["error_pct"]), default=float("nan"))
        line = f"{job.label:<17} {job.arm:<14} measured in {time.perf_counter() - t0:5.1f} s; worst |error| {worst:5.1f} %"
        if meas.summary.get("verify_cycles_per_s"):
            mw, mi = verify_gaps(meas.steps)
            pw, pi = verify_gaps(pred.steps)
            walls[job.arm] = (mw, mi, pw, pi)
            line += f"; verify wall {mw:.3f} ms (pred {pw:.3f})".replace("nan", "n/a")
        print(f"{line}; syncs {meas.summary.get('host_syncs')}; rows peak {meas.summary.get('request_rows_peak')}"
              + cond_line, flush=True)
        return eng

    def _conditioned(self, job: Job, meas: object) -> str:
        """The run's host speed against the profile's (``host_speed.speed_factor`` added to
        the measured summary), and the prediction conditioned on it: rows in
        ``self.conditioned``, a line in checks.md; returns a note for the progress line.
        Never fails the measured run."""
        hs = meas.summary.get("host_speed") or {}
        if not hs.get("reference_work_s"):
            return ""
        text = (f"- {job.label} {job.arm}: reference work median {hs['reference_work_s'] * 1e3:.3f} ms "
                f"(p10 / p90 {hs['reference_work_p10_s'] * 1e3:.3f} / {hs['reference_work_p90_s'] * 1e3:.3f}, "
                f"{int(hs['samples'])} samples, {hs['slow_share']:.0%} slow)")
        if not self.reference_s:
            self.speed.append(text + "; the profile has no host.reference_work_s")
            return ""
        factor = hs["reference_work_s"] / self.reference_s
        hs["speed_factor"] = factor
        text += f"; x{factor:.3f} the profile's {self.reference_s * 1e3:.3f} ms"
        launch_s = hs.get("launch_reference_work_s") if self.launch_reference_s else None
        if launch_s:
            hs["launch_path_factor"] = launch_s / self.launch_reference_s
            text += (f"; launch reference work {launch_s * 1e3:.3f} ms, x{hs['launch_path_factor']:.3f} the profile's "
                     f"{self.launch_reference_s * 1e3:.3f} ms (x{hs['launch_path_factor'] / factor:.3f} of the "
                     f"reference work's factor)")
        if self.condition is None:
            self.speed.append(text)
            return f"; host x{factor:.2f}"
        try:
            cond = self.condition(job, meas.summary["seed"], factor, launch_s)
        except Exception as e:  # a diagnostic: the headline prediction stands
            self.speed.append(text + f"; conditioned prediction failed: {type(e).__name__}: {e}".splitlines()[0])
            return f"; host x{factor:.2f}"
        rows = [{"cell": job.label, "arm": job.arm, **r, "speed_factor": factor}
                for r in validation_table(cond.summary, meas.summary, VALIDATE_METRICS)]
        self.conditioned += rows
        worst = max((abs(r["error_pct"]) for r in rows if r["metric"] in TARGETS and r["error_pct"] == r["error_pct"]),
                    default=float("nan"))
        self.speed.append(text + f"; conditioned prediction worst |error| {worst:.1f} %")
        return f"; host x{factor:.2f} (conditioned worst {worst:.1f} %)"

    def _speed_samples(self, job: Job, eng: object) -> None:
        """The run's host-speed samples to ``host_speed.parquet`` beside its measured steps."""
        samples = eng.host_speed_samples() if hasattr(eng, "host_speed_samples") else None
        if not samples or not samples.get("t_s"):
            return
        import pandas as pd

        pd.DataFrame(samples).to_parquet(self.res_dir / f"{job.result_name}-measured" / "host_speed.parquet",
                                         index=False)

    def _host_probe(self, job: Job, meas: object, pred: object, eng: object) -> None:
        """What the host thread did in each launch call (runtime/host_probe.py): the rows go
        to ``host_probe.parquet`` beside the measured steps, the levels and the run's
        counters (GC, machine steal, CPU MHz) to checks.md."""
        probe = eng.launch_probe() if hasattr(eng, "launch_probe") else None
        if not probe:
            return
        import pandas as pd

        steps = meas.steps
        frame = pd.DataFrame({c: steps[c].to_numpy() for c in ("step", "mode", "part", "batch_size")})
        frame = frame.assign(**{k: v[:len(frame)] for k, v in probe.items()})
        frame.to_parquet(self.res_dir / f"{job.result_name}-measured" / "host_probe.parquet", index=False)
        lines = describe_launches(steps, probe, job.scenario.server.cuda_graph_max_bs, pred.steps)
        for kind, ref in (("verify", self.launch_ref), ("decode", self.decode_launch_ref)):
            if ref is None:
                continue
            f = launch_speed_factor(frame["mode"], frame["part"], frame["batch_size"], frame["host_launch_cpu_s"],
                                    job.scenario.server.cuda_graph_max_bs, ref, step_mode=kind)
            if f is not None:
                lines.append(f"host speed from the graph-replayed {kind} launch calls: x{f:.3f} the profile's same "
                             "call (runtime.host_reference.launch_speed_factor)")
        counters = meas.summary.get("host_probe", {})
        run = ", ".join(f"{k} {v:.4g}" for k, v in counters.items())
        self.host += [f"- {job.label} {job.arm}: {run}"] + [f"  - {x}" for x in lines]

    def save(self) -> None:
        """validate.csv, checks.md (with failures and skipped runs) and results.tar.gz, now."""
        write_csv(self.out / "validate.csv", self.rows, extra=INTERVAL_COLUMNS)
        if self.conditioned:
            write_csv(self.out / "validate_conditioned.csv", self.conditioned, extra=("speed_factor",))
        lines = list(self.checks)
        if self.failures:
            lines += ["", "## Runs that failed", ""] + [f"- {f}" for f in self.failures]
        if self.skipped:
            lines += ["", "## Runs not started (deadline)", ""] + [f"- {s}" for s in self.skipped]
        if self.reach:
            lines += ["", "## Forwards above the profile's step grid (priced by extrapolation)", ""] + self.reach
        if self.itl_notes:
            lines += ["", "## Median ITLs from different deliveries (sim/metrics.py median_itl_rung)", ""] + self.itl_notes
        if self.speed:
            lines += ["", "## Host speed per run (runtime/host_reference.py: a fixed reference work's thread CPU "
                      "time sampled over the run, against the profile's host.reference_work_s)", ""] + self.speed
        if self.host:
            lines += ["", "## Host per launch call (runtime/host_probe.py; per run: GC, machine steal, CPU MHz)",
                      ""] + self.host
        atomic_write_text(self.out / "checks.md", "\n".join(lines) + "\n")
        write_tarball(self.res_dir, self.out / "results.tar.gz")


TARGETS = TARGET_METRICS
"""The figures the 5 % target is on (issue 8)."""


class _Tee:
    """Writes to a stream and to a log file (the round's ``gpu_validate.log``)."""

    def __init__(self, stream, log) -> None:
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.log.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.log.flush()
        self.stream.flush()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def environment_text() -> str:
    """GPU clocks and power limit (nvidia-smi) and the CPU model (lscpu), as found; a line
    saying so where a tool is missing."""
    out = []
    for cmd in (["nvidia-smi", "--query-gpu=name,driver_version,clocks.current.sm,clocks.current.memory,power.limit",
                 "--format=csv"], ["nproc"], ["lscpu"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
            text = r.stdout
        except (OSError, subprocess.SubprocessError) as e:
            text = f"{cmd[0]}: not available ({type(e).__name__})\n"
        if cmd[0] == "lscpu":
            text = "".join(line + "\n" for line in text.splitlines() if line.startswith(("Model name", "CPU MHz", "CPU max MHz")))
        out.append(text)
    # what tells host-side slowdowns apart (runtime/host_probe.py): quota, threads, clocks
    import torch

    omp = {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "KMP_", "GOMP_", "MKL_"))}
    out.append(f"torch intra-op threads {torch.get_num_threads()} (the runs use runtime.device.serve_threads); "
               f"OpenMP environment {omp or 'unset'}; "
               + ", ".join(f"{k} {v:.6g}" for k, v in machine_counters().items()) + "\n")
    return "".join(out)


INTERVAL_COLUMNS = ("measured_ci_low", "measured_ci_high")
"""validate.csv's columns of each measured figure's 95 % sampling interval (empty where none)."""


def add_measured_intervals(rows: list[dict], meas: object, name: str) -> None:
    """Give each row its measured figure's sampling interval (:data:`INTERVAL_COLUMNS`; the
    measured run's requests, :func:`analysis.measured_noise.run_intervals`), in place."""
    from specsched.analysis.measured_noise import run_intervals

    try:   # a diagnostic: never fails the measured run
        found = run_intervals(meas, [r["metric"] for r in rows])
    except Exception as e:
        print(f"no measured intervals for {name}: {type(e).__name__}: {e}".splitlines()[0], flush=True)
        found = {}
    for r in rows:
        r[INTERVAL_COLUMNS[0]], r[INTERVAL_COLUMNS[1]] = found.get(r["metric"], ("", ""))


def noise_line(rows: list[dict]) -> str | None:
    """The target figures outside 5 % whose prediction lies inside the measured figure's 95 %
    interval (one run's sampling noise over its requests: the miss is within what a rerun could
    measure), named; None when no row outside 5 % has an interval."""
    out = [r for r in rows if r["metric"] in TARGETS and r["error_pct"] == r["error_pct"] and abs(r["error_pct"]) > 5
           and isinstance(r.get(INTERVAL_COLUMNS[0]), float)]
    if not out:
        return None
    inside = [r for r in out if r[INTERVAL_COLUMNS[0]] <= r["predicted"] <= r[INTERVAL_COLUMNS[1]]]
    named = "; ".join(f"{r['cell']} {r['arm']} {r['metric']} {r['error_pct']:+.1f} % (measured {r['measured']:.3g}, "
                      f"interval {r[INTERVAL_COLUMNS[0]]:.3g}-{r[INTERVAL_COLUMNS[1]]:.3g})" for r in inside)
    return (f"Outside 5 % but inside the measured figure's 95 % interval (the run's own sampling noise, "
            f"analysis/measured_noise.py): **{len(inside)} of {len(out)}** such misses with an interval"
            + (f": {named}" if named else ""))


def within_line(rows: list[dict]) -> tuple[int, int, str]:
    """(figures within 5 %, figures, per-metric counts) over the target metrics of ``rows``."""
    t = [r for r in rows if r["metric"] in TARGETS and r["error_pct"] == r["error_pct"]]
    within = sum(abs(r["error_pct"]) <= 5 for r in t)
    per = ", ".join(f"{m} {sum(abs(r['error_pct']) <= 5 for r in t if r['metric'] == m)}/{sum(r['metric'] == m for r in t)}"
                    for m in TARGETS)
    return within, len(t), per


def new_cells_line(rows: list[dict]) -> str | None:
    """The 5 % count of the cells first measured in the latest round that ``rows`` has new cells
    of (:data:`FIRST_ROUND`; the out-of-sample figure in that round, and only there) beside all
    the other cells; None when ``rows`` has no cell of :data:`NEW_CELLS`."""
    rounds = {FIRST_ROUND[r["cell"].split("@")[0]] for r in rows if r["cell"].split("@")[0] in FIRST_ROUND}
    if not rounds:
        return None
    latest = max(rounds)
    new = [r for r in rows if FIRST_ROUND.get(r["cell"].split("@")[0]) == latest]
    old = [r for r in rows if FIRST_ROUND.get(r["cell"].split("@")[0]) != latest]
    w, n, _ = within_line(new)
    ow, on, _ = within_line(old)
    # "first measured in": the line stays true when a later round measures these cells again
    return (f"First measured in round {latest} ({', '.join(dict.fromkeys(r['cell'] for r in new))}): "
            f"**{w} of {n}** within 5 %; the other cells: **{ow} of {on}**")


def summary_text(rows: list[dict], argv: list[str], times: dict[str, float], failures: list[str],
                 skipped: list[str], conditioned: list[dict] | None = None) -> str:
    """summary.md: the command, the times, and per target metric how many figures are within
    5 %; with ``conditioned`` rows (the prediction at each run's measured host speed, rows
    with ``speed_factor``), the same count and a table for them below the headline."""
    lines = ["# GPU validation round", "", "```bash", "python benchmarks/gpu_validate.py " + shlex.join(argv), "```", "",
             ", ".join(f"{k} {v:.0f} s" for k, v in times.items()), ""]
    within, n, per = within_line(rows)
    lines.append(f"Within 5 %: **{within} of {n}** figures ({per})")
    if (noise := noise_line(rows)) is not None:
        lines += ["", noise]
    if (split := new_cells_line(rows)) is not None:
        lines += ["", split]
    lines += ["", "| cell | arm | " + " | ".join(TARGETS) + " |", "|---|---|" + "---|" * len(TARGETS)]
    for cell, arm in dict.fromkeys((r["cell"], r["arm"]) for r in rows):
        errs = {r["metric"]: r["error_pct"] for r in rows if r["cell"] == cell and r["arm"] == arm}
        cells = []
        for m in TARGETS:
            e = errs.get(m, float("nan"))
            cells.append(f"**{e:+.1f} %**" if abs(e) <= 5 else f"{e:+.1f} %")
        lines.append(f"| {cell} | {arm} | " + " | ".join(cells) + " |")
    if conditioned:
        w, n, per = within_line(conditioned)
        lines += ["", "## Conditioned on each run's measured host speed", "",
                  "The same figures predicted at the run's host speed (a fixed reference work's thread CPU time, "
                  "median over the run; the factor is over the profile's `host.reference_work_s`): each host term "
                  "scaled by the run's reference over the one that term was measured at (the profile's "
                  "`host.reference_work_by_term`; without it, by the factor; scenario `host.reference_work_s`, "
                  "sim/host_speed.py). The headline above stays the "
                  "microbenchmark-only prediction; a figure that meets 5 % only here missed because the host "
                  "changed speed, one that misses both is the model.", "",
                  f"Within 5 % conditioned: **{w} of {n}** figures ({per})", "",
                  *([split, ""] if (split := new_cells_line(conditioned)) is not None else []),
                  "| cell | arm | host factor | " + " | ".join(TARGETS) + " |", "|---|---|---|" + "---|" * len(TARGETS)]
        for cell, arm in dict.fromkeys((r["cell"], r["arm"]) for r in conditioned):
            rs = [r for r in conditioned if r["cell"] == cell and r["arm"] == arm]
            errs = {r["metric"]: r["error_pct"] for r in rs}
            cells = [f"**{e:+.1f} %**" if abs(e) <= 5 else f"{e:+.1f} %"
                     for e in (errs.get(m, float("nan")) for m in TARGETS)]
            lines.append(f"| {cell} | {arm} | {rs[0]['speed_factor']:.3f} | " + " | ".join(cells) + " |")
    if failures:
        lines += ["", "Failed: " + "; ".join(failures)]
    if skipped:
        lines += ["", "Not started (deadline): " + ", ".join(skipped)]
    return "\n".join(lines) + "\n"


def engine_for(job: Job, eng, make):
    """The engine to measure ``job`` with: ``eng`` set to the job's scenario when it can take
    it (:meth:`runtime.engine.RuntimeEngine.accepts`: same window, slots, graph limits and
    workload), else a fresh one from ``make(scenario)`` (an arm that resizes the model, as a
    window sweep's arms do). Freeing the old one's device memory is :meth:`Validation.run`'s:
    it holds the last name of the engine and drops it before the call."""
    if eng is not None and eng.accepts(job.scenario):
        eng.set_scenario(job.scenario)
        return eng
    return make(job.scenario)


def _free_device_memory() -> None:
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # a broken context: the next engine reports it
        pass


PROFILE_GRID_FLAGS = (("--contexts", [512, 1024, 2048, 4096, 8192], "committed contexts of the verify/decode grids"),
                      ("--extend-tokens", [256, 1024, 2048, 4096, 8192], "extend token counts"),
                      ("--extend-prefixes", [0, 1024, 2048, 4096, 8192], "cached prefixes of the extend grid"))
"""The profile's grid flags and their defaults (specsched profile's flags of the same names). The
defaults' KV pool (--max-bs 128 rows of 8K tokens for preset 8b) needs more than an H100 holds."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--cells", default=",".join(CELLS),
                    help=f"cells of scenarios/h200/ to measure, separated by commas (default: {','.join(CELLS)}); "
                         f"added after round 17, named only here: {','.join(NEW_CELLS)}")
    ap.add_argument("--profile", default=None, help="use this profile instead of profiling now")
    ap.add_argument("--max-bs", type=int, default=128)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run with --preset tiny")
    ap.add_argument("--reverse-arms", action="store_true", help="measure the arms in reverse order (checks order effects)")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="profiling time budget in seconds (default 240); repeats are trimmed (not below 3) to fit")
    ap.add_argument("--relevel-budget", type=float, default=0.0,
                    help="seconds allowed after profiling for running a host phase again while it sat on the slow "
                         "host level (runtime/profile_level.py; default 0: none)")
    ap.add_argument("--repeats", type=int, default=15, help="timed calls per profile measurement (default 15)")
    ap.add_argument("--extend-lead-ms", type=float, default=DEFAULT_EXTEND_LEAD_S * 1e3,
                    help="profile extends behind this many ms of the same call (specsched profile --extend-lead-ms; "
                         f"default {DEFAULT_EXTEND_LEAD_S * 1e3:g}, 0: behind an idle spin)")
    ap.add_argument("--smi", action="store_true", help="sample nvidia-smi's SM clock and power into OUT/smi.csv")
    ap.add_argument("--poisson-cell", default=None, help="also measure this cell at each of --rates (req/s)")
    ap.add_argument("--rates", default="8,16,32,64", help="request rates for --poisson-cell (default 8,16,32,64)")
    ap.add_argument("--poisson-requests", type=int, default=96, help="requests per Poisson run (default 96)")
    ap.add_argument("--poisson-first", action="store_true", help="measure the Poisson rates before the cells")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no run after this many seconds (profiling included); the rest is listed as skipped")
    for flag, default, what in PROFILE_GRID_FLAGS:
        ap.add_argument(flag, type=nonnegative_int_list if flag == "--extend-prefixes" else positive_int_list,
                        default=default,
                        help=f"{what} of the profile made first (default {','.join(map(str, default))}; an H100's "
                             "80 GiB needs smaller ones, e.g. --max-bs 64 --contexts 512,1024,2048,4096)")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    if not 0 <= args.extend_lead_ms <= 1000:
        ap.error(f"--extend-lead-ms: {args.extend_lead_ms}: must be between 0 and 1000")
    try:
        parse_cells(args.cells)
    except ValueError as e:
        ap.error(f"--cells: {e}")
    if args.poisson_cell and args.poisson_cell not in KNOWN_CELLS:
        ap.error(f"--poisson-cell: unknown cell {args.poisson_cell!r}; known: {', '.join(KNOWN_CELLS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    saved = sys.stdout, sys.stderr
    smi = _smi_sampler(out / "smi.csv") if args.smi else None
    with open(out / "gpu_validate.log", "a") as log:
        sys.stdout, sys.stderr = _Tee(saved[0], log), _Tee(saved[1], log)
        try:
            return _round(args, argv, out, t_start)
        finally:
            sys.stdout, sys.stderr = saved
            if smi is not None:
                smi.terminate()


def _smi_sampler(path: Path) -> subprocess.Popen | None:
    """``nvidia-smi`` sampling the SM clock, power, temperature and clock event reasons
    every 50 ms into ``path`` (CSV, no header: timestamp, clocks.sm MHz, power.draw W,
    temperature C, clocks_event_reasons.active), or None when nvidia-smi is missing. The
    loaded cells run under the power cap, ~6 % below boost on an H200
    (docs/measurements/h200-v32.md); the log's per-run unix wall marks line runs up with it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        print("--smi: nvidia-smi not found; no clock log", flush=True)
        return None
    with open(path, "w") as log:   # the child keeps its own descriptor; ours closes here
        return subprocess.Popen([exe, "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,"
                                 "clocks_event_reasons.active", "--format=csv,noheader,nounits", "-lms", "50"],
                                stdout=log, stderr=subprocess.STDOUT)


def _round(args: argparse.Namespace, argv: list[str], out: Path, t_start: float) -> int:
    """Profile (unless --profile), then measure and predict every job; see the module docstring."""
    (out / "environment.txt").write_text(environment_text())
    times: dict[str, float] = {}

    if args.profile:
        prof_path = Path(args.profile)
    else:
        from specsched.runtime.profiler import profile_device, write_profile

        try:
            d = profile_device(device=args.device, preset=args.preset, spec_window=6, max_bs=args.max_bs,
                               contexts=args.contexts, extend_tokens=args.extend_tokens,
                               extend_prefixes=args.extend_prefixes, cuda_graph_max_bs=128,
                               repeats=args.repeats, progress=False, budget_s=args.budget,
                               relevel_s=args.relevel_budget, extend_lead_s=args.extend_lead_ms / 1e3)
        except Exception as e:   # the device out of memory: one line naming what to lower, not a traceback
            from specsched.runtime.memory import is_device_oom

            if not is_device_oom(e):
                raise
            what = getattr(getattr(e, "allocation", None), "what", "the profile's buffers")
            print(f"gpu_validate: the device ran out of memory while profiling ({what}): lower --max-bs "
                  f"(now {args.max_bs}), --contexts (now {max(args.contexts)}), --extend-tokens or --extend-prefixes "
                  f"(now {max(args.extend_tokens)}, {max(args.extend_prefixes)}), or give --profile", file=sys.stderr)
            return 2
        d["name"] = f"h200-{args.preset}"
        prof_path = out / f"h200-{args.preset}.yaml"
        write_profile(d, prof_path)
        times["profile"] = time.perf_counter() - t_start
        print(f"profiled in {times['profile']:.0f} s -> {prof_path}", flush=True)
    profile = load_profile(str(prof_path))

    cell_jobs: list[Job] = []
    for cell in parse_cells(args.cells):
        path = ROOT / "scenarios" / "h200" / f"{cell}.yaml"
        arms = arm_names(path)[::-1] if args.reverse_arms else arm_names(path)
        cell_jobs += [Job(cell, arm, load_scenario(path, arm), cell, f"{cell}-{arm}") for arm in arms]
    rate_jobs: list[Job] = []
    if args.poisson_cell:
        from specsched.analysis.overrides import load_scenario_with_overrides

        path = ROOT / "scenarios" / "h200" / f"{args.poisson_cell}.yaml"
        for rate in [float(r) for r in args.rates.split(",")]:
            sc = load_scenario_with_overrides(path, "base", {"workload.request_rate": rate,
                                                             "workload.num_requests": args.poisson_requests})
            rate_jobs.append(Job(f"{args.poisson_cell}@{rate:g}", "base", sc, f"{args.poisson_cell}-rates",
                                 f"{args.poisson_cell}-rate{rate:g}"))

    def measure(job: Job, eng: RuntimeEngine | None) -> tuple:
        eng = engine_for(job, eng, lambda sc: RuntimeEngine(sc, preset=args.preset, device=args.device))
        t0 = time.time()
        res = eng.run()
        # unix seconds, to line the run up with --smi's clock and power samples
        print(f"run {job.result_name}: wall {t0:.3f} .. {time.time():.3f} unix s", flush=True)
        return res, eng

    predicted: dict[tuple[str, int], object] = {}

    def predict_ahead(job: Job, seed: int):
        # the pre-run range check's prediction, kept for the comparison after the run
        predicted[(job.result_name, seed)] = run_scenario(job.scenario, seed=seed, profile=profile, warn=False)
        return predicted[(job.result_name, seed)]

    def predict(job: Job, seed: int):
        hit = predicted.pop((job.result_name, seed), None)
        return hit if hit is not None else run_scenario(job.scenario, seed=seed, profile=profile, warn=False)

    def condition(job: Job, seed: int, factor: float, launch_s: float | None = None):
        # the run's reference work (and launch reference work): runtime/cli_commands.py at_run_host_speed
        sc = at_run_host_speed(job.scenario, profile, factor * profile.host.reference_work_s, launch_s)
        return run_scenario(sc, seed=seed, profile=profile, warn=False)

    grid_x = {m: float(g.x[-1]) for m, g in (("decode", profile.gpu.decode), ("verify", profile.gpu.verify))
              if g is not None}
    for line in pre_run_warnings(rate_jobs + cell_jobs, predict_ahead):
        print(line, flush=True)
    deadline = None if args.deadline_s is None else args.deadline_s - (time.perf_counter() - t_start)
    val = Validation(out, measure, predict, deadline, condition=condition, reference_s=profile.host.reference_work_s,
                     launch_reference_s=profile.host.launch_reference_work_s,
                     launch_ref=launch_call_reference(profile),
                     decode_launch_ref=launch_call_reference(profile, "decode"),
                     grid_x=grid_x)
    try:
        val.run(rate_jobs + cell_jobs if args.poisson_first else cell_jobs + rate_jobs)
    finally:
        val.save()  # whatever happened: the CSV, the checks and every results directory
    shutil.rmtree(val.res_dir, ignore_errors=True)
    rows = val.rows
    print("\n".join(val.checks[2:] + [f"FAILED {f}" for f in val.failures] + [f"skipped {s}" for s in val.skipped]))
    print(f"{'cell':<17} {'arm':<14}" + "".join(f"{m[:14]:>15}" for m in VALIDATE_METRICS))
    for cell, arm in dict.fromkeys((r["cell"], r["arm"]) for r in rows):
        errs = {r["metric"]: r["error_pct"] for r in rows if r["cell"] == cell and r["arm"] == arm}
        print(f"{cell:<17} {arm:<14}" + "".join(f"{errs.get(m, float('nan')):>+14.1f}%" for m in VALIDATE_METRICS))
    times["cells"] = time.perf_counter() - t_start - times.get("profile", 0.0)
    times["total"] = time.perf_counter() - t_start
    text = summary_text(rows, argv, times, val.failures, val.skipped, val.conditioned)
    (out / "summary.md").write_text(text)
    print(next(line for line in text.splitlines() if line.startswith("Within 5 %")))
    if val.conditioned:
        print(next(line for line in text.splitlines() if line.startswith("Within 5 % conditioned")))
    print(f"total {times['total']:.0f} s")
    return 1 if val.failures else 0


if __name__ == "__main__":
    sys.exit(main())
