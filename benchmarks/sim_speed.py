"""Simulator speed: wall time and peak memory of whole runs (docs/performance.md).

Cases: the 256-request burst (``scenarios/burst256-ht.yaml``, every arm on request) and the
standard workload serving simulators are timed on: one instance, Llama-3-8B on one H200
(``profiles/h200-llama8b-roofline.yaml``), no speculative decoding, Poisson arrivals at
6 req/s, 1024 prompt / 256 output tokens (``scenarios/poisson8b-fixed.yaml``) or ShareGPT-like
lengths (``scenarios/poisson8b-sharegpt.yaml``), at 1,000, 10,000 and 100,000 requests.

Each case runs in a fresh subprocess (under ``/usr/bin/time -v`` when present), so the peak
RSS is the whole process's (interpreter, imports, the run, the result tables and the
summary). The child reports the run's own wall time (``SimEngine(...).run()``, which builds
the tables and the summary), the process peak RSS from ``getrusage`` and, with
``--tracemalloc``, the peak of Python allocations during the run.

Command cases (``cli-*``) time a whole ``specsched`` process instead: ``--help``, the one-line
error of a bad scenario (exit 2), and ``specsched run burst256-ht``; their figure is the
process's CPU (user + sys) and peak RSS.

``--targets`` runs every case issue 11 sets a target for and prints each against its target
(docs/performance.md): the burst's simulation and whole process, ``--help``, a bad
scenario's error, and the Poisson workload at 10k, 100k and 1M requests (1M takes minutes).

Usage::

    python benchmarks/sim_speed.py                       # every simulation case, 3 repeats
    python benchmarks/sim_speed.py --targets --repeat 1  # every target, against the target
    python benchmarks/sim_speed.py --cases burst256 poisson8b-fixed-100k
    python benchmarks/sim_speed.py --no-fast-forward --cases burst256
    python benchmarks/sim_speed.py --write-length-histograms   # scenarios/sharegpt-like-lengths-*.csv
    python benchmarks/sim_speed.py --bytecodes poisson8b-fixed-1k --records compact   # where a request's bytecodes go
    python benchmarks/sim_speed.py --bytecodes poisson8b-fixed-1k --records compact --lines   # ... by source line
    python benchmarks/sim_speed.py --instructions --cases burst256 cli-burst256-run   # valgrind: instructions
    python benchmarks/sim_speed.py --walk-replay poisson8b-fixed-1k --repeat 5        # the timing walk alone

``--instructions`` counts the instructions a case executes (valgrind's cachegrind, no cache
simulation), which load on a shared machine does not change: a simulation case's run (the
child process less the same child without the run: imports and the scenario's load are not
part of it) and a command's whole process. Its environment pins what would make the count
vary between identical runs: numpy's BLAS threads (``OPENBLAS_NUM_THREADS=1``: idle threads
spin at import) and the hash seed; each command runs once uncounted first, so its modules'
bytecode is cached (see :func:`run_cli_case`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specsched.sim.cli_types import positive_int

ROOT = Path(__file__).resolve().parent.parent

# name -> (scenario file, arm, num_requests override or None)
CASES: dict[str, tuple[str, str, int | None]] = {
    "burst256": ("scenarios/burst256-ht.yaml", "base", None),
    "burst256-stream_wait": ("scenarios/burst256-ht.yaml", "stream_wait", None),
    "burst256-waiting_aware": ("scenarios/burst256-ht.yaml", "waiting_aware", None),
    "burst256-both": ("scenarios/burst256-ht.yaml", "both", None),
    "poisson8b-fixed-1k": ("scenarios/poisson8b-fixed.yaml", "base", 1_000),
    "poisson8b-fixed-10k": ("scenarios/poisson8b-fixed.yaml", "base", 10_000),
    "poisson8b-fixed-100k": ("scenarios/poisson8b-fixed.yaml", "base", 100_000),
    "poisson8b-sharegpt-1k": ("scenarios/poisson8b-sharegpt.yaml", "base", 1_000),
    "poisson8b-sharegpt-10k": ("scenarios/poisson8b-sharegpt.yaml", "base", 10_000),
    "poisson8b-sharegpt-100k": ("scenarios/poisson8b-sharegpt.yaml", "base", 100_000),
    "poisson8b-fixed-1m": ("scenarios/poisson8b-fixed.yaml", "base", 1_000_000),
}
# whole `specsched` processes: name -> arguments ("{bad}": a scenario without a profile,
# "{out}": a scratch results folder) and the exit status expected
CLI_CASES: dict[str, tuple[list[str], int]] = {
    "cli-help": (["--help"], 0),
    "cli-bad-scenario": (["run", "{bad}"], 2),
    "cli-burst256-run": (["run", "burst256-ht", "-q", "--out", "{out}"], 0),
}
# issue 11's targets: case -> (measure, limit, unit): "run_cpu" the simulation's CPU s,
# "process_cpu" the whole process's CPU s, "peak_rss" MiB
TARGETS: dict[str, list[tuple[str, float]]] = {
    "burst256": [("run_cpu", 0.05)],
    "cli-burst256-run": [("process_cpu", 0.6)],
    "cli-help": [("process_cpu", 0.3)],
    "cli-bad-scenario": [("process_cpu", 0.5)],
    "poisson8b-fixed-10k": [("run_cpu", 0.8)],
    "poisson8b-fixed-100k": [("run_cpu", 5.0), ("peak_rss", 512.0)],
    "poisson8b-fixed-1m": [("run_cpu", 60.0), ("peak_rss", 4096.0)],
}
DEFAULT_CASES = [
    "burst256", "poisson8b-fixed-1k", "poisson8b-fixed-10k", "poisson8b-fixed-100k",
    "poisson8b-sharegpt-1k", "poisson8b-sharegpt-10k", "poisson8b-sharegpt-100k",
]

# ShareGPT-like length histograms: discretised lognormals (see docs/performance.md)
LENGTH_HISTOGRAMS = {
    # name: (median tokens, lognormal sigma, smallest, largest length, bins)
    "input": (130.0, 1.15, 4, 4096, 64),
    "output": (130.0, 0.95, 4, 2048, 64),
}


def length_histogram(median: float, sigma: float, lo: int, hi: int, bins: int):
    """A lognormal(median, sigma) discretised on ``bins`` log-spaced bins over [lo, hi].

    Returns (lengths, weights): each bin's rounded geometric centre (tokens, int) and its
    probability mass (the tails below ``lo`` and above ``hi`` folded into the end bins).
    """
    import numpy as np
    from scipy.stats import lognorm

    edges = np.unique(np.round(np.geomspace(lo, hi + 1, bins + 1)).astype(int))
    d = lognorm(s=sigma, scale=median)
    w = d.cdf(edges[1:] - 0.5) - d.cdf(edges[:-1] - 0.5)
    w[0] += d.cdf(edges[0] - 0.5)
    w[-1] += d.sf(edges[-1] - 0.5)
    lengths = np.round(np.sqrt(edges[:-1] * (edges[1:] - 1))).astype(int)
    return lengths, w / w.sum()


def write_length_histograms(out_dir: Path) -> None:
    """Write ``sharegpt-like-lengths-{input,output}.csv`` (columns length,weight)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, params in LENGTH_HISTOGRAMS.items():
        lengths, w = length_histogram(*params)
        path = out_dir / f"sharegpt-like-lengths-{name}.csv"
        rows = "".join(f"{n},{x:.9g}\n" for n, x in zip(lengths, w, strict=True))
        path.write_text("length,weight\n" + rows)
        mean = float((lengths * w).sum())
        print(f"{path}: {len(lengths)} bins, mean {mean:.1f} tokens, max {lengths.max()}")


# ----------------------------------------------------------------------------- child
def _load(case: str):
    from specsched.sim.config import deep_merge, load_scenario

    path, arm, n = CASES[case]
    sc = load_scenario(ROOT / path, arm)
    if n is not None:
        data = deep_merge(sc.model_dump(mode="json"), {"workload": {"num_requests": n}})
        sc = type(sc).model_validate(data)
    return sc


def child(case: str, fast_forward: bool, records: str | None, trace: bool, run: bool = True) -> dict:
    """Run one case in this process and return its measurements (``run=False``: everything
    but the run itself, the baseline that ``--instructions`` subtracts)."""
    import tracemalloc

    from specsched.sim.engine import SimEngine  # imports are not part of the run

    if "sharegpt" in case:
        import pandas  # noqa: F401  (a length-histogram workload reads its CSV with pandas)

    sc = _load(case)
    kwargs = {}
    # __init__'s own parameters: SimEngine's signature is __new__'s (scenario, *args, **kwargs),
    # where neither flag appears (the flags were ignored through it)
    params = inspect.signature(SimEngine.__init__).parameters
    if "fast_forward" in params:
        kwargs["fast_forward"] = fast_forward
    if records is not None and "records" in params:
        kwargs["records"] = records
    if not run:
        SimEngine(sc, **kwargs)
        return {"case": case, "run": False}
    if trace:
        tracemalloc.start()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, c0 = time.perf_counter(), time.process_time()
    eng = SimEngine(sc, **kwargs)
    res = eng.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    peak_py = tracemalloc.get_traced_memory()[1] if trace else None
    s = res.summary
    return {
        "case": case, "wall_s": wall, "cpu_s": cpu, "num_requests": sc.workload.num_requests,
        # the run's kernel share of its CPU and its page faults: a first run in a fresh
        # process maps every page it touches (docs/performance.md, the burst)
        "sys_s": r1.ru_stime - r0.ru_stime, "minor_faults": r1.ru_minflt - r0.ru_minflt,
        # the tables as held (no DataFrame: pandas' import would count in --instructions)
        "steps": int(res.extra["num_steps"] if "num_steps" in res.extra else len(res.table("steps"))),
        "chunks_rows": len(res.table("chunks")),
        "records": res.extra.get("records", "full"),
        "completed": s.get("completed"), "duration_s": s.get("duration"),
        "median_ttft_ms": s.get("median_ttft_ms"), "median_itl_ms": s.get("median_itl_ms"),
        "p99_itl_ms": s.get("p99_itl_ms"), "output_throughput": s.get("output_throughput"),
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tracemalloc_peak_mib": peak_py / 2**20 if peak_py is not None else None,
        "kwargs": kwargs,
    }


def bytecode_census(case: str, records: str | None, top: int = 30,
                    lines: bool = False) -> tuple[float, list[tuple[str, int]]]:
    """Bytecodes executed by one run of ``case`` (``sys.settrace`` opcode events, in this
    process; ~30x slower than the run, and deterministic, unlike CPU seconds on a shared
    machine): (bytecodes per request, the ``top`` functions as ("file:function", count)),
    with ``lines`` the ``top`` source lines instead ("file:line: source")."""
    from collections import Counter

    from specsched.sim.engine import SimEngine

    sc = _load(case)
    eng = SimEngine(sc, **({"records": records} if records else {}))
    counts: Counter = Counter()

    def tracer(frame, event, arg):
        frame.f_trace_opcodes = True
        key = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"

        def local(frame, event, arg):
            if event == "opcode":
                counts[(frame.f_code.co_filename, frame.f_lineno) if lines else key] += 1
            return local
        return local

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        eng.run()
    finally:
        sys.settrace(before)
    per_request = sum(counts.values()) / sc.workload.num_requests
    if not lines:
        return per_request, counts.most_common(top)
    import linecache

    return per_request, [(f"{Path(f).name}:{n}: {linecache.getline(f, n).strip()}", c)
                         for (f, n), c in counts.most_common(top)]


def walk_replay(case: str, repeat: int) -> dict:
    """The timing walks of one run of ``case`` (compact records), replayed alone.

    Every call the run makes to :func:`sim.plain_timeline.walk` (one per closed-form
    stretch) is kept with its arguments and result; with ``repeat`` >= 1 the calls are made
    once more and checked against the run's results (host times, sums, GPU start and end,
    last wait), then ``repeat`` more times, timed. Deterministic inputs for measuring the
    walk alone: its CPU seconds (the best timed replay), or its instructions (this mode
    under valgrind with ``--repeat 1`` and with ``--repeat R + 1``: the difference over R).
    Returns the walks, their iterations, whether the replay gave the run's results (None
    with ``repeat`` 0) and the best replay's CPU seconds (None with ``repeat`` 0)."""
    from specsched.sim import plain_timeline
    from specsched.sim.engine import SimEngine

    def summary(tm) -> tuple:
        return (tm.n, tm.T[: tm.n + 1], tm.blocked, tm.blocked_rows, tm.busy, tm.s0, tm.s_last,
                tm.e_last, tm.rw_last) if tm.n else (0,)

    sc = _load(case)
    walk = plain_timeline.walk
    calls: list[tuple[tuple, dict, tuple]] = []

    def keep(*args, **kwargs):
        tm = walk(*args, **kwargs)
        calls.append((args, kwargs, summary(tm)))
        return tm

    plain_timeline.walk = keep
    try:
        SimEngine(sc, records="compact").run()
    finally:
        plain_timeline.walk = walk
    same = None
    if repeat:
        same = all(summary(walk(*args, **kwargs)) == want for args, kwargs, want in calls)
    best = None
    for _ in range(repeat):
        c0 = time.process_time()
        for args, kwargs, _ in calls:
            walk(*args, **kwargs)
        cpu = time.process_time() - c0
        best = cpu if best is None or cpu < best else best
    return {"case": case, "walks": len(calls), "iterations": sum(w[0] for _, _, w in calls),
            "replay_matches_run": same, "replay_cpu_s": best}


# ---------------------------------------------------------------------------- parent
def run_case(case: str, args: argparse.Namespace) -> dict:
    """Run ``case`` in a subprocess; add the whole process's wall time and peak RSS."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    if not args.fast_forward:
        cmd.append("--no-fast-forward")
    if args.records:
        cmd += ["--records", args.records]
    if args.tracemalloc:
        cmd.append("--tracemalloc")
    timer = shutil.which("time") and Path("/usr/bin/time").exists()
    if timer:
        cmd = ["/usr/bin/time", "-v", *cmd]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    total = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{p.stdout}\n{p.stderr}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = total
    # the whole process's CPU (user + system): what a loaded machine does not inflate
    out["process_cpu_s"], rss = _time_v(p.stderr)
    out["peak_rss_mib"] = rss if rss is not None else out["maxrss_mib"]
    out["rss_source"] = "/usr/bin/time -v" if rss is not None else "getrusage(RUSAGE_SELF) in the child"
    return out


def _time_v(stderr: str) -> tuple[float | None, float | None]:
    """(user + sys CPU s, peak RSS MiB) from ``/usr/bin/time -v``'s report, None if absent."""
    u = re.search(r"User time \(seconds\): ([\d.]+)", stderr)
    k = re.search(r"System time \(seconds\): ([\d.]+)", stderr)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    cpu = float(u.group(1)) + float(k.group(1)) if u and k else None
    return cpu, (int(m.group(1)) / 1024 if m else None)


_WARM: set[str] = set()
"""Command cases run once (untimed) in this process (:func:`run_cli_case`)."""


def run_cli_case(case: str, scratch: Path) -> dict:
    """Run one ``specsched`` command in a fresh process (the installed console script next
    to this interpreter, else ``python -m specsched``); its CPU, wall time and peak RSS.
    The first call for a case runs it once untimed (the bytecode cache, see below)."""
    args, want_rc = CLI_CASES[case]
    bad = scratch / "bad.yaml"
    bad.write_text("name: bad\n")  # no profile: one line naming the file and key, exit 2
    args = [a.format(bad=bad, out=scratch / "out") for a in args]
    exe = Path(sys.executable).with_name("specsched")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "specsched"]
    if Path("/usr/bin/time").exists():
        cmd = ["/usr/bin/time", "-v", *cmd]
    # the command as an installed package runs it: from its modules' cached bytecode. With
    # PYTHONDONTWRITEBYTECODE set and no __pycache__ yet, every run would compile every
    # module again (~0.3 s of CPU on `run`), so the variable is dropped here and the first
    # run of a case (untimed) writes the cache
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if case not in _WARM:
        subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=scratch, env=env)
        _WARM.add(case)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=scratch, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != want_rc:
        raise RuntimeError(f"{case}: exit {p.returncode}, expected {want_rc}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    cpu, rss = _time_v(p.stderr)
    if cpu is None:  # no /usr/bin/time: the children's CPU from getrusage
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
        rss = ru.ru_maxrss / 1024  # the largest child's so far
    return {"case": case, "num_requests": None, "steps": None, "wall_s": None, "cpu_s": cpu,
            "process_wall_s": wall, "process_cpu_s": cpu, "peak_rss_mib": rss}


CACHEGRIND_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
"""What ``--instructions`` pins: counts then agree between identical runs to within a few
thousand instructions (docs/performance.md, seventh round)."""


def cachegrind_refs(stderr: str) -> int:
    """The instructions executed (``I refs``) from cachegrind's report on stderr.

    Raises:
        ValueError: the report has no such line (valgrind failed or is not cachegrind).
    """
    m = re.search(r"I\s+refs:\s+([\d,]+)", stderr)
    if m is None:
        raise ValueError(f"no instruction count in valgrind's report:\n{stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def _count(cmd: list[str], scratch: Path, cwd: Path, env: dict[str, str] | None = None) -> int:
    """Instructions of one process running ``cmd`` (run once uncounted first: bytecode cache)
    in ``env`` (default: this process's) with :data:`CACHEGRIND_ENV`."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(CACHEGRIND_ENV)
    subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    out = scratch / "cachegrind.out"
    p = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}", *cmd],
                       capture_output=True, text=True, cwd=cwd, env=env)
    if p.returncode not in (0, 2):   # a bad scenario's error exits 2 by design
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}:\n{p.stderr[-2000:]}")
    return cachegrind_refs(p.stderr)


def instructions(case: str, args: argparse.Namespace, scratch: Path) -> dict:
    """``case``'s instructions (module docstring): for a simulation case the run's (the child
    less the child without the run) and the child's; for a command case its process's."""
    if case in CLI_CASES:
        words, _ = CLI_CASES[case]
        bad = scratch / "bad.yaml"
        bad.write_text("name: bad\n")
        words = [a.format(bad=bad, out=scratch / "out") for a in words]
        exe = Path(sys.executable).with_name("specsched")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "specsched"]
        return {"case": case, "run": None, "process": _count([*cmd, *words], scratch, scratch)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    if not args.fast_forward:
        cmd.append("--no-fast-forward")
    if args.records:
        cmd += ["--records", args.records]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))  # as run_case
    with_run = _count(cmd, scratch, ROOT, env)
    without = _count([*cmd, "--no-run"], scratch, ROOT, env)
    return {"case": case, "run": with_run - without, "process": with_run}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()} ({interpreter_build()}), "
            f"{platform.system()} {platform.release()}")


def interpreter_build(maps: str | None = None, config_args: str | None = None) -> str:
    """How the running CPython was built, as far as can be seen from inside it: whether the
    interpreter runs from a shared ``libpython`` (``--enable-shared``: every call between
    its own functions goes through the dynamic linker's tables) or has it linked in
    (``/proc/self/maps``, or ``maps``), and the optimizing configure flags it names
    (``--enable-optimizations``: PGO, ``--with-lto``). A distribution may leave those flags out
    of its configuration data (Debian's CPython 3.11 does), so the mapping is the reliable half. The same
    tree ran the Poisson 10k case ~9 % faster under a static PGO build of CPython 3.11 than
    under a shared build without PGO on one machine (docs/performance.md): figures taken
    under different builds are not comparable."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            maps = ""
    if config_args is None:
        import sysconfig

        config_args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    if not maps:
        lib = "libpython unknown"
    else:
        lib = "libpython shared" if re.search(r"/libpython[\d.]*\.so", maps) else "libpython linked in"
    flags = [f for f in ("--enable-optimizations", "--with-lto") if f in config_args]
    return ", ".join([lib, *flags]) if flags else f"{lib}, configure names no PGO/LTO"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=None, choices=sorted(CASES) + sorted(CLI_CASES))
    ap.add_argument("--targets", action="store_true",
                    help="run every case with a target (issue 11) and print each against it")
    ap.add_argument("--repeat", type=positive_int, default=3, help="runs per case (the best wall time is reported)")
    ap.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                    help="step by step (no collapsed decode runs)")
    ap.add_argument("--records", choices=("auto", "full", "compact"), default=None,
                    help="what the run keeps (default: the engine's auto)")
    ap.add_argument("--tracemalloc", action="store_true", help="also report tracemalloc's peak (slows the run)")
    ap.add_argument("--json", type=Path, default=None, help="append the results as JSON lines here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-run", dest="run", action="store_false", help=argparse.SUPPRESS)
    ap.add_argument("--instructions", action="store_true",
                    help="count each case's instructions with valgrind (cachegrind) instead of timing it "
                         "(deterministic: load does not change the count)")
    ap.add_argument("--bytecodes", default=None, choices=sorted(CASES), metavar="CASE",
                    help="count the bytecodes one run of CASE executes, per function, and exit "
                         "(deterministic; ~30x slower than the run: use a 1k case)")
    ap.add_argument("--lines", action="store_true",
                    help="with --bytecodes: per source line (the 60 busiest), not per function")
    ap.add_argument("--walk-replay", default=None, choices=sorted(CASES), metavar="CASE",
                    help="keep the timing walks of one run of CASE, replay them once checked against "
                         "the run, then --repeat times timed (the walk alone; under valgrind with "
                         "--repeat 1 and R + 1 for its instructions), and exit")
    ap.add_argument("--write-length-histograms", action="store_true",
                    help="write scenarios/sharegpt-like-lengths-{input,output}.csv and exit")
    args = ap.parse_args(argv)
    if args.lines and not args.bytecodes:
        ap.error("--lines goes with --bytecodes CASE")
    if args.write_length_histograms:
        write_length_histograms(ROOT / "scenarios")
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.fast_forward, args.records, args.tracemalloc, args.run)))
        return 0
    if args.walk_replay:
        print(json.dumps(walk_replay(args.walk_replay, args.repeat)))
        return 0
    if args.bytecodes:
        if args.lines:
            per_request, top = bytecode_census(args.bytecodes, args.records, top=60, lines=True)
        else:
            per_request, top = bytecode_census(args.bytecodes, args.records)
        total = per_request * _load(args.bytecodes).workload.num_requests
        print(f"{args.bytecodes}: {per_request:,.0f} bytecodes a request")
        for name, n in top:
            print(f"{n / total:7.1%} {n / (total / per_request):9,.0f}  {name}")
        return 0
    cases = args.cases or (list(TARGETS) if args.targets else DEFAULT_CASES)
    if args.instructions:
        if shutil.which("valgrind") is None:
            ap.error("--instructions needs valgrind (cachegrind) on the PATH")
        print(f"# {time.strftime('%Y-%m-%d %H:%M')} on {machine()}; instructions (cachegrind), "
              + " ".join(f"{k}={v}" for k, v in CACHEGRIND_ENV.items()))
        print(f"{'case':<26} {'run M':>12} {'process M':>12}")
        with tempfile.TemporaryDirectory() as scratch:
            for case in cases:
                r = instructions(case, args, Path(scratch))
                run = f"{r['run'] / 1e6:>12,.1f}" if r["run"] is not None else f"{'-':>12}"
                print(f"{case:<26} {run} {r['process'] / 1e6:>12,.1f}", flush=True)
                if args.json:
                    with args.json.open("a") as f:
                        f.write(json.dumps(r) + "\n")
        return 0
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} on {machine()}")
    print(f"{'case':<26} {'requests':>8} {'steps':>9} {'run s':>8} {'run CPU s':>9} {'of it sys':>9} "
          f"{'faults':>7} {'process s':>9} {'proc CPU s':>10} {'peak RSS MiB':>12} {'load1':>6}")
    verdicts = []

    def fmt(v, spec):
        return format(v, spec) if v is not None else format("-", spec.split(".")[0])

    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            if case in CLI_CASES:
                runs = [run_cli_case(case, Path(scratch)) for _ in range(args.repeat)]
            else:
                runs = [run_case(case, args) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["cpu_s"])  # CPU: the loaded machine inflates walls
            best["wall_s_all"] = [r["wall_s"] for r in runs]
            best["cpu_s_all"] = [r["cpu_s"] for r in runs]
            best["peak_rss_mib_max"] = max(r["peak_rss_mib"] for r in runs)
            best["loadavg_1min"] = os.getloadavg()[0]
            print(f"{case:<26} {fmt(best['num_requests'], '>8')} {fmt(best['steps'], '>9')} "
                  f"{fmt(best['wall_s'], '>8.3f')} {best['cpu_s']:>9.3f} {fmt(best.get('sys_s'), '>9.3f')} "
                  f"{fmt(best.get('minor_faults'), '>7')} {best['process_wall_s']:>9.2f} "
                  f"{fmt(best['process_cpu_s'], '>10.2f')} {best['peak_rss_mib_max']:>12.0f} "
                  f"{best['loadavg_1min']:>6.1f}", flush=True)
            got = {"run_cpu": best["cpu_s"], "process_cpu": best["process_cpu_s"], "peak_rss": best["peak_rss_mib_max"]}
            for measure, limit in TARGETS.get(case, []) if args.targets else []:
                v = got[measure]
                verdicts.append(f"{case:<26} {measure:<12} {fmt(v, '>9.3f')} <= {limit:<8g} "
                                f"{'met' if v is not None and v <= limit else 'NOT met'}")
            if args.json:
                with args.json.open("a") as f:
                    f.write(json.dumps(best) + "\n")
    if verdicts:
        print("\n# targets (CPU s, peak RSS MiB)")
        print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
