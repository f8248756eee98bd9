"""Parameter sweeps: every grid point x seed, on any concurrent.futures-style executor.

A grid maps dotted scenario keys (``server.chunked_prefill_size``) to lists of values; the
special key ``arm`` picks the scenario's arm per point. Every combination (a *point*) runs
with seeds ``scenario.seed + i``. Results go to one tidy parquet file, one row per run and
metric::

    scenario | arm | <one column per grid key> | seed | metric | value | point

``point`` is the canonical JSON of the point's parameters (arm included); it is how a
resumed sweep recognises the runs it already has.

Nothing finished is lost: before any run starts the sweep takes the lock of ``<out>`` (a
second sweep on the same file waits, saying so) and opens its run log ``.<out>.runs.jsonl``
beside it (an unwritable location is refused then, not after the work). Each finished run is
appended to the log and flushed to disk at once; the parquet file is rewritten atomically at
checkpoints and at the end, after which the log is removed. A sweep killed at any point
(even ``kill -9``) leaves the last complete parquet file plus the log, and the next
(resumed) sweep takes both. SIGINT and SIGTERM stop the workers, save, and raise
:class:`SweepInterrupted`. Runs that raise are reported as :class:`FailedPoint` (and in
``<out>.failures.json``) and are retried by the next resumed sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from specsched.analysis.compare import ARRIVAL_SPAN, OPEN_LOOP_KINDS
from specsched.analysis.io import atomic_write_parquet, atomic_write_text, read_parquet_table
from specsched.analysis.overrides import Layered, check_key, load_scenario_with_overrides
from specsched.analysis.runner import Runner, RunOutcome, RunTask, execute
from specsched.analysis.stop_signals import completed, stop_pool, stop_signals
from specsched.analysis.sweep_store import (
    METRIC_COLUMNS,
    append_run,
    bench_path,
    bench_text,
    check_writable,
    empty_samples,
    merge,
    read_bench_file,
    read_run_log,
    read_samples,
    run_log_path,
    samples_path,
)
from specsched.sim.atomic import target_lock
from specsched.sim.bundled import scenario_data_path
from specsched.sim.config import SCENARIO_FILE
from specsched.sim.errors import ConfigError
from specsched.sim.grid_range import write_labelled_warnings
from specsched.sim.input_files import (
    adopt_streams,
    is_input_file,
    is_stream,
    open_input,
    read_input,
    streams_read,
    unreadable,
)
from specsched.sim.limits import check_fits
from specsched.sim.policy_loader import USER_POLICY_FILES, user_policy_specs
from specsched.sim.profile import load_profile, resolve_profile_path
from specsched.sim.workload_config import LengthDist
from tqdm.auto import tqdm

META_KEY = "specsched.sweep"
CONNECT_TIMEOUT_S = 10
"""Seconds to wait for a Dask scheduler given by address."""
BASE_COLUMNS = ("scenario", "arm")
TAIL_COLUMNS = ("seed", "metric", "value", "point")


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by SIGINT or SIGTERM after saving every finished run and stopping its
    workers. ``signum``: the signal; ``report``: the :class:`SweepReport` of what was saved."""

    def __init__(self, signum: int, report: SweepReport | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.report = signum, report


def point_labels(points: Sequence[str]) -> dict[str, str]:
    """Each point's name by the parameters that differ between the points (an arm or a
    ``--set`` value every point shares does not name one): ``{key: "server.x=1/arm=a"}``,
    ``points`` the JSON keys of the points' parameters."""
    params = {k: json.loads(k) for k in points}
    varied = [k for k in dict.fromkeys(k for p in params.values() for k in p)
              if len({json.dumps(p.get(k)) for p in params.values()}) > 1]
    return {key: "/".join(f"{k}={p.get(k)}" for k in varied) for key, p in params.items()}


@dataclass(frozen=True)
class FailedPoint:
    """A run that raised: its grid parameters (arm included), seed and the error text."""

    params: dict[str, Any]
    seed: int
    error: str

    def describe(self) -> str:
        """One line: ``arm=base server.x=1 seed=3: RuntimeError: ...``."""
        p = " ".join(f"{k}={json.dumps(v)}" for k, v in self.params.items())
        return f"{p} seed={self.seed}: {self.error.splitlines()[0] if self.error else ''}"


@dataclass
class SweepReport:
    """Outcome of :func:`run_sweep`.

    Attributes:
        path: the parquet file.
        table: everything in it (finished runs of this and earlier resumed sweeps).
        ran: runs completed now; skipped: runs already in the file (resume);
        failed: runs that raised now (not in the file; retried on resume).
        points: the point ids of this sweep's grid (:func:`point_id`), in grid order: the
            file may hold other points of earlier sweeps into it.
    """

    path: Path
    table: pd.DataFrame
    ran: int = 0
    skipped: int = 0
    failed: list[FailedPoint] = field(default_factory=list)
    points: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no run failed in this sweep."""
        return not self.failed


def point_id(params: Mapping[str, Any]) -> str:
    """Canonical JSON of a point's parameters (sorted keys): the resume identity."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"), default=str)


def grid_points(grid: Mapping[str, Sequence[Any]], arm: str = "base") -> list[dict[str, Any]]:
    """Every combination of the grid's values, first key slowest, as ``{"arm": ..., key: v}``.

    The ``arm`` axis, if present, overrides the ``arm`` argument. An empty grid gives one
    point (the scenario itself).

    Raises:
        ConfigError: an axis without values.
    """
    for k, v in grid.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or len(v) == 0:
            raise ConfigError("<command line>", k, v, "a grid axis needs a non-empty list of values")
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        p = dict(zip(keys, combo, strict=True))
        points.append({"arm": p.pop("arm", arm), **p})
    return points


def _column(values: list[Any]) -> pd.Series:
    """Typed column for one parameter: bool/int/float/str when uniform, else JSON text."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if kinds and kinds <= {bool}:
        return pd.Series(values, dtype="boolean")
    if kinds and kinds <= {int}:
        return pd.Series(values, dtype="Int64")
    if kinds and kinds <= {int, float}:
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64")
    if kinds <= {str}:
        return pd.Series(values, dtype="object")
    return pd.Series([None if v is None else json.dumps(v, sort_keys=True) for v in values], dtype="object")


def _build_table(rows: pd.DataFrame, order: Mapping[str, int]) -> pd.DataFrame:
    """Rebuild param columns from ``point`` and sort by grid order, seed, metric."""
    if rows.empty:
        return pd.DataFrame(columns=[*BASE_COLUMNS, *TAIL_COLUMNS])
    params = [json.loads(p) for p in rows["point"]]
    keys = list(dict.fromkeys(k for p in params for k in p if k != "arm"))
    out = pd.DataFrame({"scenario": rows["scenario"].to_numpy(object), "arm": [p.get("arm") for p in params]})
    for k in keys:
        out[k] = _column([p.get(k) for p in params])
    out["seed"] = rows["seed"].to_numpy("int64")
    out["metric"] = rows["metric"].to_numpy(object)
    out["value"] = rows["value"].to_numpy("float64")
    out["point"] = rows["point"].to_numpy(object)
    rank = out["point"].map(lambda p: order.get(p, len(order)))
    out = out.assign(_rank=rank, _pos=range(len(out)))
    out = out.sort_values(["_rank", "seed", "metric", "_pos"], kind="stable")
    return out.drop(columns=["_rank", "_pos"]).reset_index(drop=True)


def _file_sha(path: Path) -> str:
    return hashlib.sha256(read_input(path, SCENARIO_FILE)).hexdigest()   # a piped scenario read once


def _data_files(sc: Any) -> list[str]:
    """The data files a scenario's workload reads, as written: a trace, an agentic trace,
    length histograms (``kind: file``)."""
    w = sc.workload
    given = [w.trace.path] if w.trace is not None else []
    mt = w.multi_turn
    dists = [w.input_len, w.output_len, *((mt.num_turns, mt.first_prompt_len, mt.user_len) if mt is not None else ())]
    given += [d.path for d in dists if isinstance(d, LengthDist) and d.kind == "file" and d.path]
    if mt is not None and mt.agentic_trace is not None:
        given.append(mt.agentic_trace.path)
    return given


def _file_hash(p: Path, expected: str) -> str:
    """SHA-256 of the file's bytes as stored (a compressed trace's compressed bytes), read in
    blocks: a trace may be large."""
    h = hashlib.sha256()
    try:
        with open_input(p, expected) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise unreadable(p, e) from None
    return h.hexdigest()


def _input_shas(scenarios: Iterable[Any]) -> dict[str, str]:
    """The SHA-256 of each profile, data file (:func:`_data_files`) and user policy file
    (docs/policies.md) the points read, by its resolved path. A profile written again under
    the same name (``specsched profile --analytic ... --out`` for another GPU, ``calibrate
    --from ... --out`` refitting it), a trace regenerated in place or a policy class edited
    between two sweeps changes every prediction while the scenario file stays the same:
    resumed, the runs made with the old file were kept as the new one's."""
    shas: dict[str, str] = {}

    def add(p: Path, expected: str) -> None:
        key = str(p if is_stream(p) else Path(p).resolve())   # the same file from another folder
        if key not in shas and is_input_file(p):
            shas[key] = _file_hash(p, expected)

    specs: set[str] = set()
    for sc in scenarios:
        add(resolve_profile_path(sc.profile, sc.path or None), "a YAML profile")
        for given in _data_files(sc):
            add(scenario_data_path(given, sc.path or None), "a data file")
        srv = sc.server
        roles = [srv.role_server(r) for r in ("prefill", "decode")] if srv.disaggregation is not None else []
        specs.update(spec for x in (srv, *roles) for spec in user_policy_specs(x))
    for src, spec in list(USER_POLICY_FILES.items()):   # loaded when the points were validated
        if spec in specs:
            add(Path(src), "a policy file")
    return shas


def _check_same_inputs(out: Path, old: Mapping[str, str] | None, new: Mapping[str, str]) -> None:
    """Refuse to resume ``out`` when a profile, data or policy file its runs read has changed since
    (:func:`_input_shas`); a file written before inputs were recorded resumes as before."""
    for p, sha in new.items():
        if isinstance(old, Mapping) and old.get(p) not in (None, sha):
            raise ConfigError(str(out), "<resume>", p,
                              "its runs were made with a different version of this file; "
                              "use --no-resume to overwrite it or choose another --out")


def read_sweep(path: str | Path) -> pd.DataFrame:
    """Read a sweep parquet written by :func:`run_sweep`.

    Raises:
        ConfigError: the file is unreadable or lacks the sweep columns.
    """
    return read_parquet_table(path, (*BASE_COLUMNS, *TAIL_COLUMNS), "a sweep file")


def _sweep_meta(path: Path) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(META_KEY.encode())
    return json.loads(raw) if raw else {}


def _resolve_executor(executor: Any, max_workers: int | None) -> tuple[Executor, list[Any]]:
    """-> (executor, things to close). str = Dask scheduler address; Client -> its executor."""
    if executor is None:
        ex = ProcessPoolExecutor(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_worker_init, initargs=(os.getpid(), streams_read()))
        return ex, [ex]
    if isinstance(executor, str):
        try:
            from distributed import Client
        except ImportError:  # pragma: no cover - optional dependency
            raise ConfigError("<command line>", "--scheduler", executor,
                              "needs dask[distributed] (pip install 'specsched[distributed]')") from None
        try:
            client = Client(executor, timeout=f"{CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError) as e:
            raise ConfigError("<command line>", "--scheduler", executor, f"cannot connect ({e})") from None
        ex = client.get_executor()
        return ex, [ex, client]
    if hasattr(executor, "get_executor"):
        return executor.get_executor(), []  # a distributed.Client
    if hasattr(executor, "submit"):
        return executor, []
    raise TypeError(f"executor must be None, a scheduler address, a distributed.Client or an Executor, got {executor!r}")


def _close(things: list[Any], cancel: bool) -> None:
    for t in things:
        if isinstance(t, ProcessPoolExecutor):
            if cancel:
                stop_pool(t)
            else:
                t.shutdown(wait=True)
        elif isinstance(t, Executor):
            t.shutdown(wait=not cancel)  # Dask's ClientExecutor has no cancel_futures
        else:
            t.close()


def _worker_init(parent: int, streams: dict | None = None) -> None:
    """In each pool worker: the parent handles Ctrl-C (and stops the workers), and a worker
    whose parent is gone (killed with -9) exits instead of running on. ``streams``: the
    parent's piped inputs already read (:func:`sim.input_files.streams_read`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    adopt_streams(streams or {})

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def check_point(scenario: Any, profiles: set[tuple[str, str]] | None = None) -> Any:
    """Refuse a sweep point as ``specsched run`` refuses it before simulating: a profile it
    cannot load, a request the KV pool or the model's context can never hold
    (:func:`sim.limits.check_fits`). ``profiles``: (profile, scenario path) pairs already
    loaded, skipped and added to. Returns ``scenario``.

    Raises:
        ConfigError: naming the key and the point's value."""
    key = (scenario.profile, scenario.path)
    if profiles is None or key not in profiles:
        load_profile(scenario.profile, relative_to=scenario.path or None)
        if profiles is not None:
            profiles.add(key)
    check_fits(scenario)
    return scenario


def refuse_seed_axis(grid: Mapping[str, Sequence[Any]]) -> None:
    """Refuse ``seed`` as a grid axis: it is the runs' own column of the sweep's table (an axis
    of it shared that column, the table's rows unnamed) and every point already runs the seeds
    ``scenario.seed + 0..K-1`` of ``--seeds K`` (a seed axis' points overlapped: 1, 2 and 2, 3).

    Raises:
        ConfigError: ``grid`` has a ``seed`` axis.
    """
    if "seed" in grid:
        raise ConfigError("<command line>", "seed", ",".join(map(str, grid["seed"])),
                          "not a grid axis: every point runs seeds scenario.seed + 0..K-1 with --seeds K; "
                          "--set seed=N moves the first")


def run_sweep(
    scenario_path: str | Path,
    grid: Mapping[str, Sequence[Any]],
    seeds: int,
    out: str | Path,
    executor: Any = None,
    resume: bool = True,
    *,
    arm: str = "base",
    overrides: Mapping[str, Any] | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    checkpoint_s: float = 30.0,
    max_workers: int | None = None,
) -> SweepReport:
    """Run every grid point x seed and write one tidy parquet file.

    Args:
        scenario_path: scenario YAML file.
        grid: dotted key -> list of values (YAML-typed: ints, floats, strings, ...); key
            ``arm`` chooses the arm per point. Keys are checked against the scenario model.
        seeds: runs per point; run i uses seed ``scenario.seed + i`` of the point's scenario.
        out: the parquet file to write (parents created).
        executor: None: a process pool (``max_workers`` processes, spawn start method);
            ``"tcp://host:port"``: a Dask scheduler (``distributed.Client(address)``);
            a ``distributed.Client``; or any ``concurrent.futures.Executor``. Executors
            passed in are not shut down.
        resume: keep the runs already in ``out`` and skip them (their scenario file must be
            unchanged); False starts afresh and overwrites ``out``.
        arm: the arm of points without an ``arm`` axis.
        overrides: fixed dotted key -> value applied to every point (grid axes win); they
            are part of each point's parameters (columns of the table, resume identity).
        runner: ``runner(scenario, seed)`` (default ``sim.engine.run_scenario``); must be
            picklable for process/Dask executors (a module-level function).
        progress: show a tqdm progress bar.
        checkpoint_s: rewrite ``out`` at most this often while runs finish.
        max_workers: size of the default process pool (default: CPU count).

    Returns:
        A :class:`SweepReport` (table, counts, failed runs). Failed runs are also written to
        ``<out>.failures.json`` (removed when a sweep ends with no failure).

    Raises:
        ConfigError: bad scenario, grid key or value (every point is validated before any
            run starts), ``seeds < 1``, an unreadable ``out``, or an ``out`` produced from
            a different scenario file while ``resume`` is on.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError("<command line>", "--seeds", seeds, "must be an integer >= 1")
    path = Path(scenario_path)
    out = Path(out)
    fixed = dict(overrides or {})
    for key in [*fixed, *grid]:
        if key != "arm":
            check_key(key, str(path))
    if "arm" in fixed:
        raise ConfigError("<command line>", "arm", fixed["arm"], "choose the arm with arm= (or a grid axis 'arm')")
    refuse_seed_axis(grid)
    points = [{"arm": p["arm"], **{k: v for k, v in fixed.items() if k not in grid}, **p} for p in grid_points(grid, arm)]
    scenarios = []
    profiles: set[tuple[str, str]] = set()
    for p in points:
        # the --set keys are the layer every point starts from, the grid's values the point's own
        # (a moved window carries the acceptance from the --set scenario's window)
        overrides = Layered({k: v for k, v in p.items() if k in grid and k != "arm"}, fixed)
        scenarios.append(check_point(load_scenario_with_overrides(path, p["arm"], overrides), profiles))
    ids = [point_id(p) for p in points]
    order = {pid: i for i, pid in enumerate(ids)}
    sha = _file_sha(path)
    meta = {META_KEY: json.dumps({"scenario_path": str(path), "scenario_sha256": sha,
                                  "input_sha256": _input_shas(scenarios),
                                  "grid": {k: list(v) for k, v in grid.items()}, "seeds": seeds}, default=str)}

    check_writable(out)
    with target_lock(out, "running a sweep into"):
        # opened under the lock: a sweep that held it before removes its log when done
        log_fd = os.open(run_log_path(out), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            return _run_locked(path, out, ids, scenarios, seeds, sha, meta, order, log_fd, executor, resume,
                               runner, progress, checkpoint_s, max_workers, tuple(k for k in fixed if k not in grid))
        finally:
            os.close(log_fd)


def _check_same_parameters(out: Path, old_points: Iterable[str], ids: list[str]) -> None:
    """Refuse to add a sweep to a file holding a sweep over other parameters (grid axes and
    --set keys): one file is one sweep. Appended, the two mixed in one table with a missing
    value for each one's absent axis (read as null), its best point was named across both,
    and the plot had no axis for them.

    Raises:
        ConfigError: naming ``out``, the parameters it holds and this sweep's, and the
            ``--out`` to give (:func:`other_out`).
    """
    def keys(pid: str) -> tuple[str, ...]:
        return tuple(sorted(k for k in json.loads(pid) if k != "arm"))

    held = {keys(p) for p in set(old_points)}
    new = keys(ids[0]) if ids else ()
    if held and held != {new}:
        def says(ks: tuple[str, ...]) -> str:
            return ", ".join(ks) or "no parameter (the arm only)"
        raise ConfigError(str(out), "<resume>", says(new),
                          f"holds a sweep over {'; '.join(says(k) for k in sorted(held))}, not this one's parameters: "
                          f"give --out {other_out(out, new, held)} (a new file; plot that one), or --no-resume to "
                          "overwrite this one")


def new_set_values(out: Path, old_points: Iterable[str], ids: list[str], set_keys: Sequence[str]) -> list[str]:
    """Note lines for ``--set`` keys this sweep gives a value the file's runs were not made at
    (e.g. ``workload.num_requests`` 32 where they ran 64). The file then holds both as points of
    one sweep, as more values of a grid axis would extend it, and the summary names its best point
    across them; said, since a --set value reads as the sweep's fixed condition, not an axis."""
    old = [json.loads(p) for p in set(old_points)]
    new = json.loads(ids[0]) if ids and old else {}
    lines = []
    for key in set_keys:
        held = sorted({json.dumps(p.get(key), default=str) for p in old}, key=lambda v: (len(v), v))
        mine = json.dumps(new.get(key), default=str)
        # 2 and 2.0 are one value (the point ids differ by the type parse_overrides gives them)
        if held and all(json.loads(h) != json.loads(mine) for h in held):
            lines.append(f"note: {out} holds runs at {key} = {', '.join(held)}; this sweep adds {key} = {mine}: "
                         "one sweep now, whose summary and best point span both (give another --out to keep them apart)")
    return lines


def other_out(out: Path, new: Sequence[str], held: Iterable[Sequence[str]]) -> Path:
    """A sweep file name beside ``out`` for a sweep over the parameters ``new`` (dotted keys)
    where ``out`` holds one over ``held``: ``out``'s stem plus the last part of each key the
    held sweep lacks (all of ``new`` when none, ``arm`` for an arm-only sweep), e.g.
    ``results/sweep-batch8-ll-speculative_num_draft_tokens.parquet`` beside a sync-mode
    sweep; ``-2``, ``-3``, ... appended while that name exists."""
    old = {k for ks in held for k in ks}
    tag = "-".join(k.rsplit(".", 1)[-1] for k in (sorted(set(new) - old) or sorted(new))) or "arm"
    stem = f"{out.stem}-{tag}"
    path, n = out.with_name(f"{stem}.parquet"), 1
    while path.exists():
        n += 1
        path = out.with_name(f"{stem}-{n}.parquet")
    return path


def _run_locked(path: Path, out: Path, ids: list[str], scenarios: list[Any], seeds: int, sha: str,
                meta: dict[str, str], order: dict[str, int], log_fd: int, executor: Any, resume: bool,
                runner: Runner | None, progress: bool, checkpoint_s: float,
                max_workers: int | None, set_keys: tuple[str, ...] = ()) -> SweepReport:
    """:func:`run_sweep` once the points are validated and ``out``'s lock is held
    (``set_keys``: the ``--set`` keys, not grid axes)."""
    log = run_log_path(out)
    columns = METRIC_COLUMNS
    existing = pd.DataFrame(columns=columns)
    existing_samples = read_samples(out) if resume else empty_samples()
    existing_bench = read_bench_file(out) if resume else {}
    if resume and out.exists():
        existing = read_sweep(out)
        old = _sweep_meta(out)
        if old.get("scenario_sha256") not in (None, sha):
            raise ConfigError(str(out), "<resume>", str(path),
                              "was produced from a different version of the scenario file; "
                              "use --no-resume to overwrite it or choose another --out")
        mine = json.loads(meta[META_KEY])
        _check_same_inputs(out, old.get("input_sha256"), mine["input_sha256"])
        if isinstance(old.get("input_sha256"), dict):   # the kept runs' inputs stay recorded
            mine["input_sha256"] = {**old["input_sha256"], **mine["input_sha256"]}
            meta = {META_KEY: json.dumps(mine, default=str)}
        existing = existing[columns]
    # runs a killed sweep finished after its last save
    logged, logged_samples, logged_bench = read_run_log(log) if resume else (existing.iloc[:0], empty_samples(), {})
    if resume:
        if len(logged):
            existing = merge([existing, logged], ["point", "seed"])
            existing_samples = merge([existing_samples, logged_samples], ["point", "seed"])
            if existing_samples is None:
                existing_samples = empty_samples()
            existing_bench.update(logged_bench)
    else:
        os.ftruncate(log_fd, 0)
    _check_same_parameters(out, existing["point"], ids)
    for line in new_set_values(out, existing["point"], ids, set_keys):
        print(line, file=sys.stderr)
    done = set(zip(existing["point"], existing["seed"].astype(int), strict=True))

    tasks = []
    skipped = 0
    for pid, sc in zip(ids, scenarios, strict=True):
        for i in range(seeds):
            if (pid, sc.seed + i) in done:
                skipped += 1
            else:
                tasks.append(RunTask(sc, sc.seed + i, key=pid, runner=runner))

    failed: list[FailedPoint] = []
    name_of = {pid: sc.name for pid, sc in zip(ids, scenarios, strict=True)}
    # the arrival span of an open-loop point's runs, for the summary's rate-bound reading
    # (analysis.compare.rate_bound), as compare keeps it
    open_loop = {pid for pid, sc in zip(ids, scenarios, strict=True) if sc.workload.kind in OPEN_LOOP_KINDS}

    def checkpoint() -> pd.DataFrame:
        # the run log is the record of what finished (a run is logged before anything else
        # happens to it, so a signal between the two cannot lose it)
        rows, smp, logged_lines = read_run_log(log)
        rows = merge([existing, rows], ["point", "seed"])
        smp = merge([existing_samples, smp], ["point", "seed"])
        atomic_write_parquet(smp if smp is not None else empty_samples(), samples_path(out))
        t = _build_table(rows if rows is not None else existing, order)
        # the table's runs, in its order: a line of a run the table does not hold (another
        # sweep's, left beside a table that was removed) is not this sweep's
        runs = list(dict.fromkeys(zip(t["point"], t["seed"].astype(int), strict=True)))
        lines = {**existing_bench, **logged_lines}
        if any(k in lines for k in runs):
            atomic_write_text(bench_path(out), bench_text(lines, runs))
        else:   # no run with a line: no file (an older one would be another sweep's)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bench_path(out))
        atomic_write_parquet(t, out, meta)
        return t

    notes: list = []   # (range note, the point whose run gave it)

    def record(o: RunOutcome) -> None:
        notes.extend((n, o.key) for n in o.range_notes)
        if o.ok:
            if o.key in open_loop and o.arrival_span_s is not None and o.metrics is not None:
                o.metrics[ARRIVAL_SPAN] = o.arrival_span_s
            append_run(log_fd, name_of[o.key], o)
        else:
            failed.append(FailedPoint(json.loads(o.key), o.seed, o.error or ""))

    ran = 0
    stopped_by: int | None = None
    if tasks:
        ex, owned = _resolve_executor(executor, max_workers)
        futures: list[Future] = []
        cancel = True
        bar = tqdm(total=len(tasks), desc="sweep", unit="run", disable=not progress)
        last = time.monotonic()
        with stop_signals() as sig:
            try:
                futures = [ex.submit(execute, t) for t in tasks]
                by_future = dict(zip(futures, tasks, strict=True))
                for f in completed(futures, sig):
                    try:
                        o = f.result()
                    except Exception as e:  # noqa: BLE001 - worker died, pool broken, ...
                        t = by_future[f]
                        o = RunOutcome(t.key, t.seed, error=f"{type(e).__name__}: {e}")
                    record(o)
                    ran += o.ok
                    bar.update()
                    if failed:
                        bar.set_postfix(failed=len(failed))
                    if time.monotonic() - last >= checkpoint_s:
                        checkpoint()
                        last = time.monotonic()
                cancel = False
            except KeyboardInterrupt:   # from completed() (a signal after the last run too), or a runner's own
                stopped_by = sig.received or signal.SIGINT
            finally:
                bar.close()
                # once for the sweep: per grid and axis, the largest value any run reached
                labels = point_labels(ids)
                write_labelled_warnings([(n, labels[k]) for n, k in notes], [labels[k] for k in ids], "points")
                for f in futures:
                    f.cancel()
                _close(owned, cancel)
                final = checkpoint()
    else:
        final = checkpoint() if (not out.exists() or not resume or len(logged)) else \
            _build_table(existing, order)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(log)

    fail_path = out.with_name(out.name + ".failures.json")
    if failed:
        atomic_write_text(fail_path, json.dumps([asdict(f) for f in failed], indent=2, default=str) + "\n")
    elif fail_path.exists():
        os.unlink(fail_path)
    report = SweepReport(path=out, table=final, ran=ran, skipped=skipped, failed=failed, points=list(ids))
    if stopped_by is not None:
        raise SweepInterrupted(stopped_by, report)
    return report
