"""``specsched measure``, ``validate`` and ``profile``: the runtime's commands.

``measure SCENARIO`` runs a scenario on a device with the same scheduler and loop as the
simulator. ``validate SCENARIO --profile P`` runs it for real and simulates it with a
profile made by ``specsched profile`` on the same device (never fitted to the runs it is
checked against), and prints predicted vs measured with the % error.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specsched.sim.cli_types import nonnegative_int, seed_count

VALIDATE_METRICS = (
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "max_ttft_ms", "median_tpot_ms",
    "median_itl_ms", "mean_itl_ms", "output_throughput", "verify_cycles_per_s",
)
"""The metrics ``validate`` compares (bench_serving units)."""

TARGET_METRICS = ("median_ttft_ms", "p90_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")
"""The figures the 5 % hardware target is on (issue 8): a subset of :data:`VALIDATE_METRICS`."""


VALIDATE_CSV_COLUMNS = ("cell", "arm", "metric", "predicted", "measured", "error_pct", "seed", "overrides")
"""The columns of the validate.csv ``validate --out DIR`` appends to: one row per metric of
each validation, with the seed the run was measured and predicted with and its ``--set``
overrides (``KEY=VALUE``, as given, joined by ``; ``; empty for none), so that rows of
several validations in one file can be told apart and rerun. A file with the first six
columns only (written before the last two were added) is rewritten with them, its rows'
seed and overrides left empty."""

OLD_VALIDATE_CSV_COLUMNS = VALIDATE_CSV_COLUMNS[:6]


def validate_csv_header(path: Path) -> tuple[str, ...] | None:
    """The header of the validate.csv at ``path``: None where there is none (no file, or an
    empty one), else :data:`VALIDATE_CSV_COLUMNS` or :data:`OLD_VALIDATE_CSV_COLUMNS`.
    Checked before the measurement, so that a file rows cannot be added to stops the command
    with nothing run or written.

    Raises:
        ConfigError: naming the file and its header, when it is neither.
    """
    from specsched.sim.errors import ConfigError

    if not path.exists():
        return None
    try:
        with open(path, newline="") as f:
            header = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(str(path), "<header>", "<unreadable>", f"cannot be read ({e}); move it away or give "
                          "another --out") from None
    if not header:
        return None
    got = tuple(h.strip() for h in header)
    if got not in (VALIDATE_CSV_COLUMNS, OLD_VALIDATE_CSV_COLUMNS):
        raise ConfigError(str(path), "<header>", ",".join(got),
                          f"validate appends to a validate.csv with the columns {','.join(VALIDATE_CSV_COLUMNS)} "
                          "(or its first six); move the file away or give another --out")
    return got


def append_validate_rows(path: Path, header: tuple[str, ...] | None, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` (:data:`VALIDATE_CSV_COLUMNS` each) to the validate.csv at ``path``,
    whose header :func:`validate_csv_header` read; a file with the old six columns is
    rewritten whole (atomically) with the two new ones, its rows' left empty."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(VALIDATE_CSV_COLUMNS))
    if header == OLD_VALIDATE_CSV_COLUMNS:
        from specsched.analysis.io import atomic_write_text

        w.writeheader()
        with open(path, newline="") as f:
            old = list(csv.DictReader(f))
        for r in old:
            w.writerow({k: r.get(k, "") for k in VALIDATE_CSV_COLUMNS})
        w.writerows(rows)
        atomic_write_text(path, buf.getvalue())
        return
    if header is None:
        w.writeheader()
    w.writerows(rows)
    with open(path, "w" if header is None else "a", newline="") as f:
        f.write(buf.getvalue())


def check_device_and_preset(args: argparse.Namespace) -> None:
    """Refuse a --device or --preset that cannot run, in one line, before any model is built.

    Raises:
        ConfigError: a device other than cpu, cuda or cuda:N (ROCm/HIP is reached through
            torch's cuda API), a GPU index that is not visible, a GPU asked for where torch
            sees none, or an unknown preset.
    """
    import re

    from specsched.sim.errors import ConfigError

    dev = args.device
    if dev is not None:
        if dev.lower() in ("hip", "rocm", "gpu") or dev.lower().startswith(("hip:", "rocm:")):
            raise ConfigError("<command line>", "--device", dev, "use cuda or cuda:N (ROCm/HIP runs through torch's cuda API), or cpu")
        if not re.fullmatch(r"(cpu|cuda(:\d+)?)(-as-hip)?", dev):
            raise ConfigError("<command line>", "--device", dev,
                              "allowed: cpu, cuda, cuda:N, or <device>-as-hip (the HIP code paths on that device)")
    from specsched.runtime.model import PRESETS

    presets = [k for k in PRESETS if not k.endswith("-draft")]
    if args.preset is None:   # None on the parser, so that validate --measured can tell it was given
        args.preset = "1b"
    if args.preset not in presets:
        raise ConfigError("<command line>", "--preset", args.preset, f"allowed: {', '.join(presets)}")
    dev = dev.removesuffix("-as-hip") if dev is not None else None
    if dev is not None and dev.startswith("cuda"):
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ConfigError("<command line>", "--device", dev, "torch sees no GPU here (torch.cuda.is_available() is False); use cpu")
        idx = int(dev.partition(":")[2] or 0)
        if idx >= n:
            raise ConfigError("<command line>", "--device", dev, f"{n} GPU(s) visible: cuda:0 .. cuda:{n - 1}")


def _scenario(args: argparse.Namespace) -> Any:
    from specsched.analysis.overrides import load_scenario_with_overrides

    return load_scenario_with_overrides(args.scenario, args.arm, args.set or None)


def validation_table(predicted: dict[str, Any], measured: dict[str, Any], metrics: tuple[str, ...] = VALIDATE_METRICS) -> list[dict[str, Any]]:
    """Rows ``metric, predicted, measured, error_pct`` (:func:`sim.metrics.error_pct`)."""
    from specsched.sim.metrics import error_pct

    rows = []
    for m in metrics:
        p, q = predicted.get(m), measured.get(m)
        ok = isinstance(p, (int, float)) and isinstance(q, (int, float))
        rows.append({"metric": m, "predicted": p, "measured": q, "error_pct": error_pct(p, q) if ok else float("nan")})
    return rows


EXTRAPOLATED_MISS_PCT = 10.0
"""|error| (%) above which :func:`extrapolated_misses_note` ties a validate row to the
profile's grid exits."""


def extrapolated_misses_note(rows: list[dict[str, Any]], range_notes: list[Any]) -> str | None:
    """One ``note:`` line, printed under validate's table, when a figure misses by more than
    :data:`EXTRAPOLATED_MISS_PCT` while the prediction left its profile's measured grids
    (``range_notes``, :mod:`sim.grid_range`): the grids and axes, so the miss is read beside
    its likely cause. The range warnings themselves come after every table; a CPU profile made
    at contexts 64-256 run against contexts to ~1,200 missed throughput by +85-91 % with the
    warnings a screen below."""
    from specsched.sim.grid_range import GridExit, merged

    exits = [n for n in merged(range_notes) if isinstance(n, GridExit)]
    big = [r for r in rows if isinstance(r.get("error_pct"), float) and abs(r["error_pct"]) > EXTRAPOLATED_MISS_PCT]
    if not exits or not big:
        return None
    where = ", ".join(dict.fromkeys(f"{n.grid} {n.axis} {n.extent:g} ({'below' if n.below else 'past'} "
                                    f"{n.lo:g}-{n.hi:g})" for n in exits))
    return (f"note: {len(big)} figure(s) miss by over {EXTRAPOLATED_MISS_PCT:g} % while the prediction extrapolated "
            f"past the profile's measured grids ({where}; warnings below): a profile measured over the run's range "
            "(specsched profile --contexts / --extend-tokens) tells the model's miss from the extrapolation's")


def itl_rung_note(predicted: Any, measured: Any) -> str | None:
    """:func:`sim.metrics.median_itl_rung_note` for two run results (their ``chunks`` tables
    and summaries): one line when their median ITLs come from different kinds of delivery."""
    from specsched.sim.metrics import median_itl_rung_note

    def chunks(r: Any) -> Any:
        return r.table("chunks") if hasattr(r, "table") else r.chunks

    return median_itl_rung_note(chunks(predicted), chunks(measured), predicted.summary, measured.summary)


def format_validation(rows: list[dict[str, Any]], title: str) -> str:
    """A plain-text table of :func:`validation_table` rows; a metric neither run has (NaN or
    missing on both sides: ``verify_cycles_per_s`` without speculation) is left out."""
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and v == v

    out = [title, f"{'metric':<22}{'predicted':>14}{'measured':>14}{'error':>10}"]
    for r in rows:
        if not (num(r["predicted"]) or num(r["measured"])):
            continue
        p = f"{r['predicted']:.3f}" if num(r["predicted"]) else "n/a"
        q = f"{r['measured']:.3f}" if num(r["measured"]) else "n/a"
        e = f"{r['error_pct']:+.2f}%" if r["error_pct"] == r["error_pct"] else "n/a"
        out.append(f"{r['metric']:<22}{p:>14}{q:>14}{e:>10}")
    return "\n".join(out)


def nothing_written(*paths: Path) -> str:
    """What an interrupted command says it kept: nothing, and which of ``paths`` already
    held results that are left as they were."""
    kept = [str(p) for p in paths if p.exists()]
    return "nothing written" + (f" ({', '.join(kept)} left as it was)" if kept else "")


@contextmanager
def device_memory_refused(source: str) -> Iterator[None]:
    """The command boundary of a run on a device: the device running out of memory in the
    block (:func:`runtime.memory.is_device_oom`) becomes the one-line
    :func:`runtime.memory.device_oom_error` (the scenario file ``source``, what was being
    allocated, the device's total memory, the keys to lower; exit 2). The only place a run's
    out-of-memory error is caught; the block writes nothing, so nothing is half-written.

    Raises:
        ConfigError: for a device out-of-memory error; any other error propagates as it is.
    """
    try:
        yield
    except Exception as e:
        from specsched.runtime.memory import device_oom_error, is_device_oom

        if not is_device_oom(e):
            raise
        raise device_oom_error(e, source) from None


def profile_facts(profile: Any) -> tuple[str | None, str | None, int | None]:
    """What a profile says it was made on: its device kind (``cpu``, ``gpu``, or None for a
    device it does not name, such as a test's ``synthetic``), the proxy
    preset (``preset='tiny'`` in ``provenance.method``; None for a profile that names none,
    e.g. an analytic one) and torch's intra-op threads (``torch_threads: N`` in
    ``provenance.environment``; None where not recorded)."""
    import re

    prov = profile.provenance or {}
    dev = str(profile.device).lower()
    kind = ("cpu" if dev.startswith("cpu") else
            "gpu" if re.search(r"cuda|hip|rocm|nvidia|amd|gpu|\bh[12]00\b|\bmi\d{3}", dev) else None)
    preset = re.search(r"preset='([^']+)'", str(prov.get("method", "")))
    threads = re.search(r"torch_threads: (\d+)", str(prov.get("environment", "")))
    return kind, preset.group(1) if preset else None, int(threads.group(1)) if threads else None


def profile_mismatch(profile: Any, run_is_gpu: bool, run_device: str, preset: str) -> str | None:
    """One ``warning:`` line when ``profile`` was made on another kind of device (a GPU
    profile for a CPU run, or the reverse) or for another proxy preset than the run's;
    None when they agree (or the profile does not say). Not a refusal: a user may compare
    on purpose."""
    kind, p_preset, _ = profile_facts(profile)
    device_differs = kind is not None and kind != ("gpu" if run_is_gpu else "cpu")
    preset_differs = p_preset is not None and p_preset != preset
    if not (device_differs or preset_differs):
        return None
    what = " and ".join(w for w, d in (("device kind", device_differs), ("preset", preset_differs)) if d)
    return (f"warning: profile {profile.name} was made on {profile.device}"
            + (f" for preset {p_preset}" if p_preset is not None else "")
            + f"; this run measured {run_device} with preset {preset}: another {what}, so the prediction "
            "prices something else than was measured (specsched profile here makes a matching one)")


def print_resolved_defaults(sc: Any, profile: Any = None) -> None:
    """The block ``specsched run`` prints: the server values the scenario file did not state,
    filled for its hardware (:func:`sim.defaults.format_resolved`), so a measurement says what
    it runs. With ``profile`` (validate's ``--profile``, the costs of the device measured here)
    whose hardware is not the one the scenario's own profile names, one ``note:`` line more:
    the defaults, and so the measured server, follow the scenario's profile (the server the
    scenario describes), not the device's; a CPU run of an H200 cell runs the H200's
    defaults. ``specsched run --set profile=P`` fills them for P's hardware instead, so the two
    commands predict different servers when the defaults matter."""
    from specsched.sim.defaults import format_resolved, hardware_of, scenario_hardware

    resolved = format_resolved(sc._resolved_defaults)
    if resolved:
        print(resolved)
    if profile is None or not sc._resolved_defaults:
        return
    own, mine = scenario_hardware(sc), hardware_of(profile)

    def name(h: Any) -> str:
        return "no GPU it names: generic defaults" if h is None else f"{h.gpu or h.platform}, tp {h.tp_size}"

    def device(h: Any) -> tuple[Any, ...] | None:   # what the defaults are resolved from
        return None if h is None else (h.platform, h.gpu, h.tp_size)

    if device(own) != device(mine):
        print(f"note: the defaults above are for the scenario's profile ({sc.profile}: {name(own)}), not --profile "
              f"{profile.name} ({name(mine)}): measured and predicted run the scenario's server; for this device's "
              "defaults, state the keys in the scenario or --set them (`specsched run --set profile=...` fills them "
              + ("for that profile's device)" if mine is not None else
                 "with SGLang's generic ones, as for a profile that names no GPU, and lists none)"), file=sys.stderr)


def cmd_measure(args: argparse.Namespace) -> int:
    """Run a scenario on the device, print the bench_serving table, write the results."""
    from specsched.sim.errors import require

    require("torch", "`specsched measure` (the runtime)")
    from specsched.runtime.engine import RuntimeEngine
    from specsched.sim.report import format_report
    from specsched.sim.results import check_results_target, write_results

    from specsched.cli import default_out_dir

    check_device_and_preset(args)
    sc = _scenario(args)
    if args.out:
        out = Path(args.out)
    else:   # results/<scenario>/<arm>-seed<N>[+<overrides>]-measured: a --set run never overwrites another
        from specsched.analysis.overrides import parse_overrides

        seed = sc.seed if args.seed is None else args.seed
        plain = default_out_dir(sc.name, args.arm, seed, parse_overrides(args.set or []))
        out = plain.with_name(f"{plain.name}-measured")
    out = check_results_target(out)   # a file or another folder: refused before the run, as `run` does
    t0 = time.perf_counter()
    try:
        with device_memory_refused(str(sc.path or args.scenario)):
            engine = RuntimeEngine(sc, preset=args.preset, device=args.device, seed=args.seed,
                                   graphs=not args.no_graphs, backend=args.backend,
                                   allow_serializing=args.allow_serializing,
                                   progress=not getattr(args, "quiet", False))
            print_resolved_defaults(sc)   # after the engine's refusals: bad input stays one line
            res = engine.run()
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"measurement stopped, {nothing_written(out)}") from None
    from specsched.sim.bench_serving import bench_record

    print(format_report(res.summary, title="Measured (runtime)", bench=bench_record(res, details=False)))
    write_results(res, out)
    print(f"measured in {time.perf_counter() - t0:.1f} s; results in {out}/")
    return 0


def at_run_host_speed(sc, profile, reference_s: float, launch_s: float | None = None):
    """Scenario ``sc`` conditioned on a measured run's host speed: each host term at the run's
    reference-work seconds ``reference_s`` over its own (scenario ``host.reference_work_s``,
    sim/host_speed.py; a profile without ``host.reference_work_by_term`` by the one factor
    run / profile, INV-T4), and the launch path's terms at the run's launch reference work
    ``launch_s`` where the run and ``profile`` both have one (``host.launch_reference_work_s``:
    a factor would multiply on top of that reading's ratio)."""
    from specsched.sim.config import with_value

    if launch_s and profile.host.launch_reference_work_s:
        sc = with_value(sc, "host.launch_reference_work_s", launch_s)
    return with_value(sc, "host.reference_work_s", reference_s)


def cmd_validate(args: argparse.Namespace) -> int:
    """Measure a scenario and simulate it with a device profile; print predicted vs measured."""
    _check_mode_flags(args)
    if getattr(args, "measured", None):   # a real server's run instead of a measurement here: no torch
        from specsched.analysis.bench_cli import validate_measured

        if args.seeds is None:
            args.seeds = 3
        return validate_measured(args)
    from specsched.sim.errors import ConfigError, require

    if not args.scenario:
        raise ConfigError("<command line>", "scenario", "<missing>",
                          "give a scenario YAML, or --measured FILE[:LINE] for a real server's bench_serving run")
    if not args.profile:
        raise ConfigError("<command line>", "--profile", "<missing>",
                          "required: a profile made by `specsched profile` on the same device (e.g. specsched "
                          "profile --device cpu --preset tiny --out p.yaml), or --measured FILE[:LINE]")
    require("torch", "`specsched validate` measuring here (the runtime; --measured FILE needs no torch)")
    from specsched.runtime.engine import RuntimeEngine
    from specsched.sim.engine import run_scenario
    from specsched.sim.profile import load_profile
    from specsched.sim.results import check_results_target, write_results

    check_device_and_preset(args)
    sc = _scenario(args)
    profile = load_profile(args.profile)
    from specsched.sim.limits import check_context

    check_context(sc, args.profile)   # the prediction's model rejects a request past its context, as `run` says
    targets: list[Path] = []
    if args.out:   # a file, or results dirs beside other content: refused before the run, as `run` does
        out = Path(args.out)
        # the plain run <scenario>-<arm>; another seed or --set beside it, named as measure
        # names them (<arm>-seed<N>[+<overrides>]), never over it: validate.csv keeps both rows
        run = args.arm
        if args.set or (args.seed is not None and args.seed != sc.seed):
            from specsched.analysis.overrides import parse_overrides

            from specsched.cli import default_out_dir

            run = default_out_dir(sc.name, args.arm, sc.seed if args.seed is None else args.seed,
                                  parse_overrides(args.set or [])).name
        targets = [check_results_target(out / f"{sc.name}-{run}-{part}") for part in ("measured", "predicted")]
        csv_header = validate_csv_header(out / "validate.csv")
    p_kind, _, p_threads = profile_facts(profile)
    try:
        # on CPU, with the threads the profile was made with (a CPU profile records them):
        # a measurement runs as the profile it is compared with did (runtime.device.serve_threads)
        with device_memory_refused(str(sc.path or args.scenario)):
            engine = RuntimeEngine(sc, preset=args.preset, device=args.device, seed=args.seed,
                                   graphs=not args.no_graphs, backend=args.backend,
                                   allow_serializing=args.allow_serializing,
                                   progress=not getattr(args, "quiet", False),
                                   cpu_threads=p_threads if p_kind == "cpu" else None)
            print_resolved_defaults(sc, profile)   # after the engine's refusals: bad input stays one line
            measured = engine.run()
        predicted = run_scenario(sc, seed=measured.summary["seed"], profile=profile, warn=False)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"validation stopped, {nothing_written(*targets)}") from None
    mismatch = profile_mismatch(profile, engine.dev.is_gpu, engine.dev.describe(), args.preset)
    # one range warning per grid and axis for the command (the conditioned run's too)
    notes = list(predicted.extra["range_notes"])
    predicted.summary["profile"] = profile.name
    rows = validation_table(predicted.summary, measured.summary)
    label = f"{sc.name} / {args.arm}"
    print(format_validation(rows, f"validate {label} (profile {profile.name}; {measured.summary['source']})"))
    from specsched.analysis.measured_noise import interval_line, run_intervals

    if (noise := interval_line(rows, run_intervals(measured, [r["metric"] for r in rows]))) is not None:
        print(noise)   # a miss inside is within what a rerun could measure
    if (itl_note := itl_rung_note(predicted, measured)) is not None:
        print(f"note: {itl_note}")
    if (grid_note := extrapolated_misses_note(rows, notes)) is not None:
        print(grid_note)
    from specsched.analysis.plan_agreement import plan_agreement

    # one scheduler, two clocks: the same decisions wherever none waits on a clock
    print(plan_agreement(predicted.steps, measured.steps, predicted.summary, measured.summary).line())
    hs, ref = measured.summary.get("host_speed") or {}, profile.host.reference_work_s
    if ref and hs.get("reference_work_s"):
        # the run's host speed against the profile's (runtime/host_reference.py), and the
        # prediction at that speed: host changed vs model wrong (docs/host-speed.md)
        factor = hs["speed_factor"] = hs["reference_work_s"] / ref
        # each host term at the run's reference over its own (sim/host_speed.py; one factor
        # for a profile that does not say at which speed each term was measured)
        per_term = bool(profile.host.reference_work_by_term)
        launch_s, lref = hs.get("launch_reference_work_s"), profile.host.launch_reference_work_s
        cond = run_scenario(at_run_host_speed(sc, profile, hs["reference_work_s"], launch_s),
                            seed=measured.summary["seed"], profile=profile, warn=False)
        notes += cond.extra["range_notes"]
        how = "per host term" if per_term else "one factor"
        if launch_s and lref:
            how += f"; launch path x{launch_s / lref:.3f} the profile's launch reference work"
        print(format_validation(validation_table(cond.summary, measured.summary),
                                f"conditioned on the run's host speed: x{factor:.3f} the profile's (reference work "
                                f"{hs['reference_work_s'] * 1e3:.3f} vs {ref * 1e3:.3f} ms, {hs['slow_share']:.0%} "
                                f"of samples slow; {how})"))
    from specsched.sim.grid_range import write_warnings

    write_warnings(notes)
    if mismatch is not None:
        print(mismatch, file=sys.stderr)
    if not args.out:
        print("nothing written: give --out DIR to keep the measured and predicted results and validate.csv")
    else:
        write_results(measured, targets[0])
        write_results(predicted, targets[1])
        csv_path = out / "validate.csv"
        overrides = "; ".join(args.set or [])
        append_validate_rows(csv_path, csv_header, [{"cell": sc.name, "arm": args.arm, **r, "seed": measured.summary["seed"],
                                                     "overrides": overrides} for r in rows])
        print(f"results in {targets[0]}/ and {targets[1]}/; rows appended to {csv_path}")
    return 0


def _check_mode_flags(args: argparse.Namespace) -> None:
    """``validate`` measures here, or with ``--measured`` compares with a real server's run;
    each mode's flags do nothing in the other, and were dropped without a word (``--device
    cuda`` with --measured printed the table all the same).

    Raises:
        ConfigError: naming the first flag given that the mode does not use.
    """
    from specsched.sim.errors import ConfigError

    measuring = {"--device": args.device, "--preset": args.preset, "--no-graphs": args.no_graphs or None,
                 "--backend": args.backend, "--allow-serializing": args.allow_serializing or None}
    comparing = {"--scenario": args.scenario_file, "--seeds": args.seeds, "--plot": args.plot or None,
                 "--log-x": args.log_x or None, "--arrivals": args.arrivals,
                 **{f"--{k.replace('_', '-')}": getattr(args, k, None)
                    for k in ("dataset_path", "dataset_offset", "agentic_max_turns", "num_prompts",
                              "mooncake_num_rounds", "mooncake_slowdown_factor")}}
    if getattr(args, "measured", None):
        for flag, v in measuring.items():
            if v is not None:
                raise ConfigError("<command line>", flag, v, "not with --measured: nothing is measured here (the "
                                  "bench_serving line is the measurement; the prediction uses --profile)")
    else:
        for flag, v in comparing.items():
            if v is not None:
                raise ConfigError("<command line>", flag, v, "only with --measured FILE[:LINE] (a real server's "
                                  "bench_serving run); measuring here it would do nothing")


def _common(p: argparse.ArgumentParser, scenario_optional: bool = False) -> None:
    p.add_argument("scenario", nargs="?" if scenario_optional else None, help="scenario YAML file")
    p.add_argument("--arm", default="base", help="arm of the scenario (default base)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario key (repeatable), e.g. workload.num_requests=64")
    p.add_argument("--device", default=None, help="cuda, cpu (default: a GPU if available)")
    p.add_argument("--preset", default=None, help="proxy model preset (tiny, small, 1b, 8b; default 1b)")
    p.add_argument("--seed", type=nonnegative_int, default=None, help="seed (default: the scenario's)")
    p.add_argument("--no-graphs", action="store_true", help="run decode/verify eagerly")
    p.add_argument("--backend", choices=("hip",), default=None,
                   help="force the HIP code paths (stream layout, waits, barrier guard) on this device")
    p.add_argument("--allow-serializing", dest="allow_serializing", action="store_true",
                   help="measure even with AMD_SERIALIZE_KERNEL, AMD_SERIALIZE_COPY, HIP_LAUNCH_BLOCKING or "
                        "CUDA_LAUNCH_BLOCKING set (results stamped); refused otherwise")


def add_parsers(sub: Any) -> None:
    """Register ``measure``, ``validate`` and ``profile`` (the last when runtime.profiler exists)."""
    m = sub.add_parser("measure", help="run a scenario for real on a device (same scheduler and loop)")
    _common(m)
    m.add_argument("--out", default=None, help="results directory")
    m.set_defaults(func=cmd_measure)
    v = sub.add_parser("validate", help="measure a scenario and simulate it with a device profile: predicted vs measured",
                       description="Measure a scenario here and simulate it: predicted vs measured. With --measured "
                                   "FILE[:LINE], compare with a real server's bench_serving result instead (as "
                                   "`specsched validate-bench`): specsched validate --measured runs.jsonl:3 --scenario s.yaml")
    _common(v, scenario_optional=True)
    v.add_argument("--profile", default=None, help="profile made by `specsched profile` on the same device "
                                                   "(required unless --measured, where it overrides the scenario's)")
    v.add_argument("--out", default=None, help="measuring here: directory for both results and validate.csv (rows "
                                               "appended); with --measured: the folder validate-bench writes, its "
                                               "validate.csv replaced (default results/validate-bench/<file>-line<N>)")
    v.add_argument("--measured", metavar="FILE[:LINE]", help="a real server's bench_serving result to compare with "
                                                             "(SGLang JSONL or vLLM JSON; nothing is measured here)")
    v.add_argument("--scenario", dest="scenario_file", metavar="S", help="with --measured: the scenario YAML "
                                                                         "(default: built from the line with --profile)")
    v.add_argument("--seeds", type=seed_count, default=None,
                   help="with --measured: seeds to average the prediction over (default 3)")
    v.add_argument("--plot", action="store_true", help="with --measured: overlay the measured TTFT/TPOT/ITL distributions")
    v.add_argument("--log-x", action="store_true", help="with --measured: logarithmic latency axes in the plots")
    v.add_argument("--arrivals", choices=("auto", "rate", "details"), default=None,
                   help="with --measured and no scenario: auto (default) replays the line's own send times where "
                        "it has them, else draws at its rate (as validate-bench)")
    from specsched.analysis.bench_cli import add_agentic_options

    add_agentic_options(v)   # with --measured: an agentic-trace line's trace, as validate-bench takes it
    v.set_defaults(func=cmd_validate)
    try:
        from specsched.runtime.doctor import register_doctor_command
        from specsched.runtime.profiler import register_profile_command
    except ImportError as e:
        if (e.name or "").split(".")[0] != "torch":
            raise
        # without torch: `doctor` is still a command, and says what to install (`profile`
        # offers its analytic path alone: sim/analytic/cli.py attach)
        from specsched.sim.errors import MissingDependency, refuse_missing

        d = sub.add_parser("doctor", help="first-run check of a GPU machine (needs torch)")
        d.set_defaults(func=refuse_missing, missing_dependency=MissingDependency("`specsched doctor`", "torch"))
        return
    register_profile_command(sub)
    register_doctor_command(sub)
