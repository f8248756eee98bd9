"""The ``plot``, ``compare`` and ``sweep`` subcommands of the ``specsched`` CLI.

``sim.cli`` calls :func:`add_parsers` with its subparsers object; each subcommand sets
``func`` (``args -> exit code``). Bad input raises :class:`sim.errors.ConfigError`, which
the CLI reports on one line with exit code 2.

Examples::

    specsched plot results/burst-base results/burst-fix --out plots --log-x
    specsched compare scenarios/burst256.yaml --arms base,fix --seeds 5 --markdown cmp.md
    specsched sweep scenarios/burst256.yaml --grid server.chunked_prefill_size=8192,16384 \\
        --grid arm=base,fix --seeds 3 --out results/chunk.parquet --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsched.sim.cli_types import nonnegative_float, positive_int, seed_count
from specsched.sim.errors import ConfigError

_CLI = "<command line>"


def _list_arg(text: str, flag: str, example: str) -> list[str]:
    """The items of a comma-separated option; ``example`` is that option's own, for the refusal."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise ConfigError(_CLI, flag, text, f"expected a comma-separated list, e.g. {example}")
    return items


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars only on a terminal, and not with --quiet or --no-progress."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return False
    return sys.stderr.isatty()


REPLAYED_FILE_KEYS = ("workload.trace", "workload.multi_turn.agentic_trace")
"""Scenario keys under which a sweep's grid changes the file a run replays or how it is read
(:func:`sim.workload.check_replayed_files`): each such grid value is checked before any run."""


def check_workload(scenario: str, arm: str, overrides: dict[str, Any], max_requests: int | None,
                   at_once: int = 1) -> None:
    """Refuse, before any run starts, a workload too large to allocate, a request that can
    never fit the KV pool (sim/limits.py) or a bad row of a replayed trace
    (:func:`sim.workload.check_replayed_files`), for the scenario with its overrides; warn of
    one whose ``at_once`` runs together may pass this machine's memory
    (:func:`sim.limits.check_size`)."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.limits import check_fits, check_size
    from specsched.sim.workload import check_replayed_files

    sc = load_scenario_with_overrides(scenario, arm, overrides)
    notes = check_size(sc, max_requests, at_once)
    check_fits(sc)
    check_replayed_files(sc)
    for note in notes:   # after the refusals: bad input stays one line
        print(note, file=sys.stderr)


def _print_scenario_notes(scenarios: list[Any], arms: list[str] | None = None,
                          inert_axes: Mapping[str, list[Any]] | None = None) -> None:
    """The ``note:`` lines a command running many scenarios (``compare``'s arms, ``sweep``'s)
    prints once before its runs: the SGLang launch arguments they name, left out or read as
    server keys (:func:`sim.sglang_launch_args.launch_arg_notes`); for arms (``scenarios``' names,
    ``arms``) and sweep axes (``inert_axes``: axis -> values) that differ only in such
    arguments, that they will predict the same (:func:`inert_only_notes`); and their profiles
    whose costs are an analytic estimate (:func:`sim.profile.analytic_profiles_note`)."""
    from specsched.sim.profile import (
        analytic_profiles_note,
        context_length_note,
        drafter_kind_note,
        load_profile,
        standalone_drafter_note,
    )
    from specsched.sim.sglang_launch_args import launch_arg_notes

    values = {k: v for s in scenarios for k, v in s._launch_args_values.items()}
    drafter = []
    for s in scenarios:
        with contextlib.suppress(ConfigError):   # a profile that does not load: the run names it
            profile = load_profile(s.profile, s.path or None)
            drafter += [standalone_drafter_note(s, profile), drafter_kind_note(s, profile),
                        context_length_note(s, profile)]
    for note in (*launch_arg_notes(values, (k for s in scenarios for k in s._launch_args_left_out)),
                 *inert_only_notes(scenarios, arms or [s.arm for s in scenarios], inert_axes or {}),
                 analytic_profiles_note(scenarios), *dict.fromkeys(drafter)):
        if note is not None:
            print(note, file=sys.stderr)


def inert_only_notes(scenarios: list[Any], arms: list[str], inert_axes: Mapping[str, list[Any]]) -> list[str]:
    """One ``note:`` line for each group of ``arms`` (named, with their loaded ``scenarios``)
    whose scenarios are the same but for SGLang launch arguments that are left out (inert, or
    at the value the model runs), and one for each sweep axis in ``inert_axes`` (an inert
    launch argument -> its values): such arms or points run, and predict the same, since
    what tells them apart never reaches the model. Said, not refused: a user may want one as
    a control (the same prediction twice, over the same seeds)."""
    from specsched.sim.sglang_launch_args import SPELLINGS

    notes = []
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(scenarios):
        same = json.dumps(s.model_dump(mode="json", exclude={"arm"}), sort_keys=True, default=str)
        groups.setdefault(same, []).append(i)
    for idx in groups.values():
        given = [scenarios[i]._launch_args_values for i in idx]
        keys = [k for k in dict.fromkeys(k for g in given for k in g)
                if len({json.dumps(g[k] if k in g else "<unset>", default=str) for g in given}) > 1
                and k.rsplit(".", 1)[-1] not in SPELLINGS]   # read as server keys: they reach the model
        if len(idx) > 1 and keys:
            notes.append(f"note: arms {', '.join(arms[i] for i in idx)} differ only in SGLang launch arguments that "
                         f"do not reach the model ({', '.join(keys)}, left out): they will predict the same "
                         "(run anyway, e.g. as a control)")
    for axis, vals in inert_axes.items():
        notes.append(f"note: sweep axis {axis} ({', '.join(map(str, vals))}) is an SGLang launch argument with no "
                     "effect on the prediction, left out: its points will predict the same (run anyway, e.g. as a "
                     "control)")
    return notes


def _all_load(scenario: str, arm: str, base: dict[str, Any], key: str, values: list[Any]) -> bool:
    """Whether the scenario loads at every value of the sweep axis ``key`` (an unmodelled SGLang
    launch argument: each value that loads is one the model runs, so its points predict the
    same; one that does not is refused when its point runs, with no note before)."""
    from specsched.analysis.overrides import Layered, load_scenario_with_overrides

    try:
        for v in values:
            load_scenario_with_overrides(scenario, arm, Layered({key: v}, base))
    except ConfigError:
        return False
    return True


def ignore_sigint(streams: dict | None = None) -> None:
    """Worker processes leave Ctrl-C to the parent (which stops them): no traceback each.
    ``streams``: the parent's piped inputs already read (:func:`sim.input_files.streams_read`:
    a trace given as ``<(zcat trace.csv.gz)`` exists in the parent only)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if streams:
        from specsched.sim.input_files import adopt_streams

        adopt_streams(streams)


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, etc."""
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


# ---------------------------------------------------------------- plot

def _is_scenario_file(path: str) -> bool:
    """Whether ``path`` is a scenario YAML file (a .yaml/.yml file whose top level is a mapping
    with a ``workload`` key, which every scenario has); False for a results directory, a
    bench_serving result file, a profile, or a file that cannot be read as YAML."""
    p = Path(path)
    if p.suffix.lower() not in (".yaml", ".yml") or not p.is_file():
        return False
    import yaml

    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "workload" in data


def _each_once(inputs: list[str]) -> list[str]:
    """``inputs`` (results directories, bench_serving ``FILE[:LINE]``) with each given again
    (:func:`sim.bench_serving.given_before`) left out, said in a ``warning:`` line: it was drawn
    twice, one curve over the other under two labels."""
    from specsched.sim.bench_serving import given_before

    kept: list[str] = []
    for d in inputs:
        again = given_before(d, kept)
        if again is not None:
            print(f"warning: {d}: given again (as {again}): drawn once", file=sys.stderr)
            continue
        kept.append(d)
    return kept


def cmd_plot(args: argparse.Namespace) -> int:
    """``plot``: figures for one or more results directories (PNG + SVG each), or for a sweep.

    ``specsched plot SWEEP.parquet`` draws the sweep's key metrics against its parameter
    (``sweep_<name>`` in ``--out``, default ``./plots/``, where the plot of several runs
    goes too; the default ``sweep-<scenario>.parquet`` gives ``sweep-<scenario>``).

    Writes ``ttft`` and ``tpot_itl`` (the distributions of the inputs with per-request
    details; a bench_serving line without them, said in one line, is drawn by its stated
    median/p90/p95/p99 as crosses, alone when nothing else is drawn; the ITL one gap per
    streamed chunk for every run when a measured file's client recorded it so; a
    bench_serving FILE of several runs, a sweep, gives every run, one colour each:
    ``analysis.bench_cli.load_plot_inputs``), ``verify_split``
    (when the runs have verify/decode cycles)
    and one ``timeline_<arm>_seed<seed>`` per run into ``--out`` (default
    ``<RESULTS_DIR>/plots`` for one directory (``plots/<FILE>`` for one bench_serving file); for several, a folder of ``./plots`` named
    after them, ``plots/base-seed1_vs_fix-seed1``, so that another set never lands on
    it). Each file is written atomically; files of an earlier plot that are replaced, and
    figures in the folder that this plot did not write, are named on stderr.
    """
    from rich.console import Console
    from specsched.analysis import plots
    from specsched.analysis.bench_cli import load_plot_inputs  # a bench_serving FILE[:LINE] too
    from specsched.analysis.io import run_label
    from tqdm import tqdm

    if args.out:   # a file, or a path under one: refused before any input is read ("cannot write ...: File exists")
        from specsched.sim.atomic import file_above

        above = Path(args.out) if Path(args.out).exists() and not Path(args.out).is_dir() else file_above(args.out)
        if above is not None:
            raise ConfigError(_CLI, "--out", args.out, f"{above} is a file: plot writes its figures into a folder; "
                              "give a folder (a new one is made)")
    if len(args.results_dirs) == 1 and args.results_dirs[0].endswith(".parquet") and Path(args.results_dirs[0]).is_file():
        return _plot_sweep(args)
    for d in args.results_dirs:   # read as a bench_serving file: "not a complete JSON object ...; truncated?"
        if _is_scenario_file(d):
            raise ConfigError(_CLI, "RESULTS_DIR", d, "a scenario, not results: plot takes a results directory or a "
                              f"bench_serving result file (FILE[:LINE]); `specsched run {d}` simulates it into "
                              "results/<scenario>/<arm>-seed<N>/, which plot takes")
    sweeps = [d for d in args.results_dirs if d.endswith(".parquet") and Path(d).is_file()]
    if sweeps:   # it was read as a bench_serving file: "not a text file"
        raise ConfigError(_CLI, "RESULTS_DIR", sweeps[0], "a sweep file is plotted alone (specsched plot SWEEP.parquet), "
                          "not beside other inputs")
    if getattr(args, "slo", None):   # it was taken and not a word said of it
        raise ConfigError(_CLI, "--slo", args.slo[0], "objectives judge the points of a sweep: plot SWEEP.parquet "
                          "--slo ... (results directories and bench_serving files are plotted without them)")
    args.results_dirs = _each_once(args.results_dirs)
    bar = tqdm(total=2 * len(args.results_dirs) + 3, desc="plot", unit="step", file=sys.stderr, leave=False,
               disable=not show_progress(args))
    runs, detailed, summary_only, summary_names = [], [], [], []
    for d in args.results_dirs:
        got = load_plot_inputs(d)
        if len(got) > 1:   # a bench_serving file of several runs (a sweep): all of them, one colour each
            print(f"note: {d} holds {len(got)} runs: all drawn, one colour each, labelled by their line and what "
                  "differs between them (FILE:LINE draws one)", file=sys.stderr)
        for r in got:
            runs.append(r)
            if r.requests.empty:
                # its summary alone (a line without details, or the measured run validate wrote of
                # one): no distribution to draw (drawn, its curves were empty, "n=0"); its stated
                # percentiles are crosses beside the other inputs' distributions
                summary_only.append(r)
                if len(got) == 1:
                    summary_names.append(d)
                elif r is next(x for x in got if x.requests.empty):   # one line for the file's runs
                    n = sum(x.requests.empty for x in got)
                    summary_names.append(f"{d} ({n} of its {len(got)} runs)" if n < len(got) else d)
            else:
                detailed.append(r)
        bar.update(1)
    label_what_ifs(runs)
    marked = {m: plots.summary_marks(summary_only, m) if summary_only else {} for m in ("ttft", "tpot", "itl")}
    for d in summary_names:   # one line an input (a sweep file's runs without details together)
        print(f"note: {d} has no per-request details (SGLang --output-details, vLLM --save-detailed): "
              + ("its stated median, p90, p95 and p99 TTFT, TPOT and ITL are drawn as crosses"
                 + (" beside the other inputs' distributions" if detailed else "")
                 if any(marked.values()) else "it states no TTFT, TPOT or ITL percentile to draw"), file=sys.stderr)
    if not detailed and not any(marked.values()) and all(r.steps.empty and r.timeseries.empty for r in runs):
        raise ConfigError(_CLI, "RESULTS_DIR", args.results_dirs[0], "nothing to draw: no input has per-request "
                          "details, stated TTFT/TPOT/ITL percentiles or a timeline")
    out = Path(args.out) if args.out else default_plot_dir(args.results_dirs)
    console = Console(stderr=True, soft_wrap=True)
    written: list[Path] = []
    before = figure_files(out)

    def save(fig: Any, name: str) -> None:
        written.extend(plots.save_figure(fig, out / name))
        plots.plt.close(fig)
        bar.update(1)

    if detailed or marked["ttft"]:
        save(plots.plot_ttft(detailed, log_x=args.log_x, marks=summary_only), "ttft")
    if detailed or marked["tpot"] or marked["itl"]:
        # ITL per chunk for every run when a measured file's client recorded it so (like with like)
        save(plots.plot_tpot_itl(detailed, log_x=args.log_x, marks=summary_only), "tpot_itl")
    try:
        save(plots.plot_verify_split(runs), "verify_split")
    except ValueError as e:
        console.print(f"[yellow]verify_split skipped: {e}[/yellow]")
    seen: dict[str, int] = {}
    for r in runs:
        if r.steps.empty and r.timeseries.empty:   # a client-side measurement has no timeline
            continue
        name = f"timeline_{_slug(run_label(r))}_seed{(r.summary or {}).get('seed', 'x')}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += f"_{seen[name]}"
        save(plots.plot_timeline(r), name)
    bar.close()
    for p in written:
        print(p)
    note_replaced(out, before, written)
    return 0


def label_what_ifs(runs: list[Any]) -> None:
    """Relabel results directories of one scenario and arm that are not seeds of one run, so
    that ``plot`` draws them apart instead of pooling them as seeds of one arm (their
    ``summary['arm']``, the label every figure reads): runs whose scenarios differ beyond the
    seed (``specsched run --set`` what-ifs, written to ``<arm>-seed<N>+<overrides>/``) take
    their folder's name without ``-seed<N>`` (``base+server.chunked_prefill_size=16384``), and
    runs from different sources (``validate --out``'s ``-measured`` and ``-predicted``) add
    where they ran (``base [sim]``, ``base [runtime:cuda]``). Seeds of one setting keep the
    arm's label and pool; runs without a results directory (a bench_serving line) are left as
    they are."""
    import json

    from specsched.analysis.io import run_label

    def setting(r: Any) -> str:
        sc = r.scenario if isinstance(r.scenario, dict) else {}
        # the seed, and where the scenario file was read from (a run from another folder)
        return json.dumps({k: v for k, v in sc.items() if k not in ("seed", "path")}, sort_keys=True, default=str)

    def source(r: Any) -> str:
        return str((r.summary or {}).get("source", "?")).split(" (")[0]

    groups: dict[tuple[str, str], list[Any]] = {}
    for r in runs:
        if getattr(r, "path", None) is not None and isinstance(getattr(r, "scenario", None), dict):
            groups.setdefault((str((r.summary or {}).get("scenario")), run_label(r)), []).append(r)
    for group in groups.values():
        settings = len({setting(r) for r in group}) > 1
        sources = len({source(r) for r in group}) > 1
        for r in group:
            label = run_label(r)
            if settings:
                label = re.sub(r"-seed\d+", "", Path(r.path).name, count=1) or label
            if sources:
                label += f" [{source(r)}]"
            r.summary["arm"] = label


PLOT_DIR_NAME_MAX = 80
"""Longest default plot folder name kept whole; a longer one is cut and ends with a hash of
the inputs (file systems limit a name to 255 bytes)."""


def default_plot_dir(inputs: list[str]) -> Path:
    """Where ``plot`` writes without ``--out``: ``<RESULTS_DIR>/plots`` for one results
    directory, ``plots/<FILE>[-lineN]`` for one bench_serving file; for several,
    ``plots/<a>_vs_<b>...`` named after the inputs' folder names (with their parent's name
    when two are alike, ``FILE-lineN`` for a bench_serving line; an arm's seeds together,
    ``base-seeds1-5``, :func:`_seeds_together`), so that plotting another set never
    overwrites this one."""
    import hashlib

    paths = [Path(i.rstrip("/")) for i in inputs]

    def label(p: Path, parents: int) -> str:
        spec = re.match(r"^(.*):(\d+)$", str(p))   # a bench_serving FILE:LINE
        if spec and not p.is_dir():
            p = Path(f"{spec.group(1)}-line{spec.group(2)}")
        parts = p.resolve().parts[-1 - parents:]
        return _slug("_".join(parts))
    if len(inputs) == 1:
        # a results directory holds its own plots; a bench_serving file (FILE[:LINE]) is no
        # folder: its plots go to plots/<file>[-lineN] (beside it they made "runs.jsonl:1/plots")
        return paths[0] / "plots" if paths[0].is_dir() else Path("plots") / label(paths[0], 0)
    labels = [label(p, 0) for p in paths]
    if len(set(labels)) < len(labels):
        labels = [label(p, 1) for p in paths]
    name = "_vs_".join(_seeds_together(labels))
    if len(name) > PLOT_DIR_NAME_MAX:
        digest = hashlib.sha1("\0".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:8]
        name = f"{name[:PLOT_DIR_NAME_MAX]}-{digest}"
    return Path("plots") / name


def _seeds_together(labels: list[str]) -> list[str]:
    """Plot folder labels with the seeds of one run name together: ``base-seed1`` ...
    ``base-seed5`` (the runs ``compare --seeds 5`` keeps, which ``plot`` pools per arm) read
    ``base-seeds1-5`` (``base-seeds1_3`` for seeds that are no range), in first-seen order;
    labels not ending in ``-seed<N>`` are kept as they are."""
    seeds: dict[str, list[int]] = {}
    out: list[str | tuple[str]] = []
    for lab in labels:
        m = re.match(r"^(.*)-seed(\d+)$", lab)
        if m is None:
            out.append(lab)
            continue
        if m.group(1) not in seeds:
            seeds[m.group(1)] = []
            out.append((m.group(1),))
        seeds[m.group(1)].append(int(m.group(2)))

    def said(stem: str) -> str:
        ns = sorted(set(seeds[stem]))
        if len(ns) == 1:
            return f"{stem}-seed{ns[0]}"
        run = ns == list(range(ns[0], ns[-1] + 1))
        return f"{stem}-seeds{ns[0]}-{ns[-1]}" if run else f"{stem}-seeds" + "_".join(map(str, ns))
    return [said(x[0]) if isinstance(x, tuple) else x for x in out]


def figure_files(folder: Path) -> set[Path]:
    """The PNG and SVG files in ``folder`` (none when it does not exist)."""
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.suffix in (".png", ".svg") and p.is_file()}


def note_replaced(folder: Path, before: set[Path], written: list[Path]) -> None:
    """One line on stderr when a plot replaced files that were there, and one naming the
    figures in ``folder`` that this plot did not write (an earlier plot's, now stale
    beside the new ones)."""
    new = set(written)
    replaced = sorted(p.name for p in before & new)
    others = sorted(p.name for p in before - new)
    if replaced:
        print(f"note: replaced {len(replaced)} file(s) of an earlier plot in {folder}/", file=sys.stderr)
    if others:
        print(f"note: {len(others)} other figure file(s) in {folder}/ are not from this plot: {', '.join(others)}",
              file=sys.stderr)


def _plot_sweep(args: argparse.Namespace) -> int:
    """``plot SWEEP.parquet``: metric-vs-parameter lines (``sweep_<stem>.png/.svg``, or
    ``<stem>.png/.svg`` when the stem already starts with "sweep")."""
    from specsched.analysis import plots
    from specsched.analysis.sweep import read_sweep
    from specsched.analysis.sweep_store import read_samples
    from specsched.analysis.sweep_summary import plot_sweep, summarize_sweep

    path = Path(args.results_dirs[0])
    table = read_sweep(path)
    slos = parse_slos(getattr(args, "slo", None), known=sorted(set(table["metric"])))
    summary = summarize_sweep(table, read_samples(path), metrics=_summary_metrics(slos))
    if summary.empty:
        raise ConfigError(str(path), "<runs>", 0, "the sweep has no finished run to plot")
    # ./plots, as for several runs (default_plot_dir): every figure of more than one run lands
    # there, one run's in its own folder
    out = Path(args.out) if args.out else Path("plots")
    stem = path.name[: -len(".parquet")] if path.name.endswith(".parquet") else path.stem
    fig = plot_sweep(summary, slos=slos)
    if slos:
        from specsched.analysis.slo import slo_lines

        print("\n".join(slo_lines(summary, slos)))
    before = figure_files(out)
    name = _slug(stem) if stem.startswith("sweep") else f"sweep_{_slug(stem)}"   # not sweep_sweep-x
    written = list(plots.save_figure(fig, out / name))
    for p in written:
        print(p)
    plots.plt.close(fig)
    note_replaced(out, before & set(written), written)  # other sweeps' figures share the folder
    return 0


# ---------------------------------------------------------------- compare

def _measured_arms(specs: Sequence[str], arms: Sequence[str]) -> dict[str, tuple[Any, str]]:
    """``compare --measured ARM=RUN`` read: per arm, (its run as ``analysis.bench_cli.load_run_or_bench``
    gives it, RUN as given).

    Raises:
        ConfigError: not ``ARM=RUN``, an arm not in ``--arms`` or given twice, no measured run of
            the base arm (the first of ``--arms``) while another arm has one, the base arm's run
            alone, one run given for two arms (``FILE`` and ``FILE:1`` of a one-run file are one
            run), or a run that cannot be read (the reader's one line).
    """
    from specsched.analysis.bench_cli import load_run_or_bench
    from specsched.sim.bench_serving import split_spec

    out: dict[str, tuple[Any, str]] = {}
    seen: dict[tuple[str, str | None], str] = {}
    for spec in specs:
        arm, sep, run = spec.partition("=")
        if not sep or not arm or not run:
            raise ConfigError(_CLI, "--measured", spec, "ARM=RUN: an arm of --arms, '=', a bench_serving "
                              "FILE[:LINE] or a results directory")
        if arm not in arms:
            raise ConfigError(_CLI, "--measured", spec, f"arm '{arm}' is not in --arms ({', '.join(arms)})")
        if arm in out:
            raise ConfigError(_CLI, "--measured", spec, f"arm '{arm}' is given twice: one measured run per arm")
        data = load_run_or_bench(run)
        if Path(run).is_dir():
            key: tuple[str, str | None] = (str(Path(run).resolve()), None)
        else:   # the line the reader took: FILE and FILE:1 of a one-run file are one run
            key = (str(split_spec(run)[0].resolve()), str(data.summary.get("source", "")).rsplit(":", 1)[-1])
        if key in seen:
            raise ConfigError(_CLI, "--measured", spec, f"arms '{seen[key]}' and '{arm}' name one run: a change is "
                              "measured between two runs, one per arm")
        seen[key] = arm
        out[arm] = (data, run)
    if out and arms[0] not in out:
        raise ConfigError(_CLI, "--measured", ", ".join(specs), f"give the base arm's run too (--measured "
                          f"{arms[0]}=RUN): a change is measured against it")
    if len(out) == 1:
        raise ConfigError(_CLI, "--measured", ", ".join(specs), f"give another arm's run too (--measured "
                          f"{arms[1]}=RUN): the base arm's run alone measures no change")
    return out


def _measured_itl_per_chunk(run: Any) -> bool:
    """Whether a measured run's ITL statistics are one gap per streamed chunk
    (:func:`sim.bench_serving.itl_per_chunk`): a bench_serving line's, as read, or a results
    directory's, by the bench_serving line it holds (``validate --out``'s measured side names
    its client there); False for a run that says nothing of its client (the simulator's, the
    runtime's: split as SGLang's)."""
    from specsched.sim.bench_serving import MEASURED_CLIENT, itl_per_chunk, read_bench_one

    client = (getattr(run, "extra", None) or {}).get(MEASURED_CLIENT)
    if isinstance(client, dict):
        return bool(client.get("itl_per_chunk"))
    line = Path(run.path) / "bench_serving.jsonl" if getattr(run, "path", None) else None
    if line is None or not line.is_file():
        return False
    try:
        return itl_per_chunk(read_bench_one(line))
    except ConfigError:   # a line this reader does not take: its client is not known
        return False


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare``: run arms over seeds, print the comparison, keep each run's results
    directory (``<DIR>/<arm>-seed<N>``, as ``specsched run`` names it), optionally write
    CSV/markdown/plot."""
    from rich.console import Console
    from specsched.analysis import compare
    from specsched.analysis.overrides import load_scenario_with_overrides, parse_overrides

    from specsched.cli import default_out_dir

    arms = _list_arg(args.arms, "--arms", "base,fix")
    if len(dict.fromkeys(arms)) < 2:
        raise ConfigError("<command line>", "--arms", args.arms, "give at least two different arms, the first is the base")
    metrics = _list_arg(args.metrics, "--metrics", "output_throughput,median_ttft_ms") if args.metrics else None
    from specsched.sim.atomic import file_above

    for opt, val, example in (("--csv", args.csv, "compare.csv"), ("--markdown", args.markdown, "compare.md"),
                              ("--plot", args.plot, None)):
        # found before the runs, not by the write after them ("cannot write DIR: Is a directory")
        if val and example and Path(val).is_dir():
            raise ConfigError(_CLI, opt, val, f"a folder: give a file, e.g. {Path(val) / example}")
        if val and (above := file_above(val)) is not None:
            raise ConfigError(_CLI, opt, val, f"{above} is a file: it cannot hold what {opt} writes")
    scenarios = compare.check_arms(args.scenario, arms, args.seeds, parse_overrides(args.set))  # names --arms, not --arm
    from specsched.analysis.bench_cli import refuse_out_over_inputs
    from specsched.sim.bundled import resolve_scenario_path
    from specsched.sim.profile import resolve_profile_path

    path = resolve_scenario_path(args.scenario)
    inputs = [("the scenario", path), *(("the profile", resolve_profile_path(sc.profile, path)) for sc in scenarios)]
    for opt, val in (("--csv", args.csv), ("--markdown", args.markdown)):
        if val:   # the table written over the scenario it compared
            try:
                refuse_out_over_inputs(Path(val), inputs)
            except ConfigError as e:
                raise ConfigError(_CLI, opt, val, e.allowed) from None
    measured = _measured_arms(args.measured, arms)   # read before the runs: a bad file costs no simulation
    for arm in arms:
        check_workload(args.scenario, arm, parse_overrides(args.set), args.max_requests)
    from specsched.analysis.overrides import unread_everywhere

    for note in unread_everywhere(args.scenario, [(a, parse_overrides(args.set)) for a in arms], parse_overrides(args.set)):
        print(note, file=sys.stderr)
    _print_scenario_notes(scenarios, arms)
    out_dirs = None
    if not args.no_save:
        name = load_scenario_with_overrides(args.scenario, arms[0], parse_overrides(args.set)).name
        root = Path(args.out) if args.out else default_out_dir(name, arms[0], 0).parent
        overrides = parse_overrides(args.set)

        def out_dirs(arm: str, seed: int) -> Path:
            return root / default_out_dir(name, arm, seed, overrides).name
        root.mkdir(parents=True, exist_ok=True)   # an unwritable place fails now, before any run
        from specsched.sim.results import check_results_target

        for arm in arms:   # a folder in the way (a file, another folder) too
            seed0 = load_scenario_with_overrides(args.scenario, arm, overrides).seed
            for i in range(args.seeds):
                check_results_target(out_dirs(arm, seed0 + i))
    executor = None
    if args.workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from specsched.sim.input_files import streams_read

        executor = ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=ignore_sigint, initargs=(streams_read(),))
    try:
        samples, latency = compare.run_arms(args.scenario, arms, args.seeds, overrides=parse_overrides(args.set),
                                            executor=executor, progress=show_progress(args), with_samples=True,
                                            out_dirs=out_dirs)
    except BaseException:
        if executor is not None:  # Ctrl-C: stop the workers now instead of finishing their runs
            import signal

            from specsched.analysis.stop_signals import stop_pool, stop_signals

            with stop_signals((signal.SIGINT,)):   # a second Ctrl-C must not cut the stop short
                stop_pool(executor)
            executor = None
        raise
    finally:
        if executor is not None:
            executor.shutdown()
    table = compare.summarize_comparison(samples, metrics, latency=latency, min_change_pct=args.min_change)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=200)
    from specsched.sim.defaults import format_differing

    # a default SGLang fills differently per arm (max_running_requests 48 with speculation)
    # is a difference the table would otherwise pin on the arms' own settings
    differ = format_differing(list(zip(arms, scenarios, strict=True)), "arms")
    if differ:
        print(differ)
    compare.print_comparison(console, table, title=f"{Path(args.scenario).name}: arms compared over {args.seeds} seed(s)")
    if (note := compare.aborted_note(samples)) is not None:
        print(note, file=sys.stderr)
    for note in compare.kv_pool_notes(samples, list(zip(arms, scenarios, strict=True))):
        print(note, file=sys.stderr)
    if measured:
        from specsched.analysis import change_scores

        summaries = {a: dict(r.summary) for a, (r, _) in measured.items()}
        speculating = {a for a, sc in zip(arms, scenarios, strict=True) if sc.server.speculative_algorithm.enabled}
        left_out: dict[str, str] = {}
        per_chunk = {a for a, (r, _) in measured.items() if _measured_itl_per_chunk(r)}
        changes = change_scores.measured_changes(table, summaries, speculating, per_chunk, left_out)
        if len(changes):
            change_scores.print_measured_changes(console, changes, arms[0],
                                                 {a: src for a, (_, src) in measured.items()})
        if left_out:
            print("note: --measured: not compared: " + "; ".join(f"{m} ({why})" for m, why in left_out.items()),
                  file=sys.stderr)
    if args.csv:
        compare.write_csv(table, args.csv)
    if args.markdown:
        from specsched.analysis.io import atomic_write_text

        atomic_write_text(args.markdown, compare.to_markdown(table))
    if args.plot:
        from specsched.analysis import plots  # matplotlib only when a figure is asked for

        fig = plots.plot_arm_bars(samples, list(dict.fromkeys(table["metric"])) or metrics, latency=latency)
        for p in plots.save_figure(fig, args.plot):
            print(p, file=sys.stderr)
        plots.plt.close(fig)
    if out_dirs is not None:
        seeds = sorted(int(x) for x in set(samples["seed"]))
        suffix = out_dirs(arms[0], 0).name.split("-seed0", 1)[1]
        span = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}..{seeds[-1]}"
        # plot pools the runs of one arm (analysis/plots.py), so several seeds are named by a glob,
        # as the table pools them; one seed by its folder
        def seeds_glob(arm: str) -> str:
            d = out_dirs(arm, 0)
            stem = d.name[: len(d.name) - len(suffix) - 1]   # "<arm>-seed", less the 0
            return shlex.quote(str(d.parent / stem)) + "*" + (shlex.quote(suffix) if suffix else "")

        runs = ([str(out_dirs(a, seeds[0])) for a in arms[:2]] if len(seeds) == 1 else
                [seeds_glob(a) for a in arms[:2]])
        pooled = "" if len(seeds) == 1 else " (each arm's seeds pooled, as the table pools them)"
        print(f"runs kept in {root}/ as <arm>-seed<N>{suffix} (arms {', '.join(arms)}; seeds {span}); "
              f"e.g. specsched plot {' '.join(runs)}{pooled}")
    return 0


# ---------------------------------------------------------------- sweep

def cmd_sweep(args: argparse.Namespace) -> int:
    """``sweep``: run a grid x seeds into a tidy parquet; exit 1 if any run failed, 130 after
    Ctrl-C and 143 after SIGTERM (finished runs saved; the same command resumes)."""
    from rich.console import Console
    from specsched.analysis.overrides import (
        Layered,
        check_key,
        parse_grid,
        parse_overrides,
        unread_everywhere,
    )
    from specsched.analysis.sweep import SweepInterrupted, run_sweep

    grid = parse_grid(args.grid)
    slos = parse_slos(args.slo)   # a typo in an objective fails before any run
    for key, values in grid.items():  # a typo fails here, with a suggestion, before any run
        if key != "arm":
            check_key(key, _CLI, values[0] if len(values) == 1 else values)
    if args.scheduler is not None and not re.match(r"^[a-z][a-z0-9+]*://\S+$", args.scheduler):
        raise ConfigError(_CLI, "--scheduler", args.scheduler, "expected a Dask scheduler address like tcp://host:8786")
    out = Path(args.out) if args.out else Path("results") / f"sweep-{Path(args.scenario).stem}.parquet"
    if out.is_dir():   # a results folder was read as a parquet dataset ("Could not read schema from ...")
        raise ConfigError(_CLI, "--out", str(out), f"a folder: the sweep is one file, e.g. {out / 'sweep.parquet'}")
    if out.suffix.lower() != ".parquet":   # parquet written under a .csv name, and x.csv.samples.parquet beside it
        raise ConfigError(_CLI, "--out", str(out), "the sweep writes a parquet file (and <name>.samples.parquet beside "
                          f"it): give a name ending in .parquet, e.g. {out.with_suffix('.parquet')}")
    from specsched.analysis.sweep import refuse_seed_axis
    from specsched.sim.bundled import resolve_scenario_path

    refuse_seed_axis(grid)
    base = parse_overrides(args.set)
    arms = grid.get("arm", [args.arm])
    sizes = grid.get("workload.num_requests", [None])
    # every value of an axis that changes the file a run replays (another trace, its unit or
    # layout: read differently), each with the largest request count
    files = {k: v for k, v in grid.items() if k.startswith(REPLAYED_FILE_KEYS)}
    # the runs a local process pool holds at once (a Dask cluster's workers are other machines)
    runs = math.prod(len(v) for k, v in grid.items() if k != "arm") * len(arms) * args.seeds
    at_once = 1 if args.scheduler is not None else min(runs, args.workers or os.cpu_count() or 1)
    axes = {k: v for k, v in grid.items() if k != "arm"}
    first = {k: v[0] for k, v in axes.items()}   # the --set keys may need an axis to make a scenario
    for arm in arms:  # the largest point of each arm; a --grid axis wins over --set
        for combo in itertools.product(*files.values()):
            point = Layered({**first, **({"workload.num_requests": max(sizes)} if sizes != [None] else {}),
                             **dict(zip(files, combo, strict=True))}, base)
            check_workload(args.scenario, str(arm), point, args.max_requests, at_once)
    # each point's overrides on the --set layer, as run_sweep merges them (Layered)
    points = [(str(arm), Layered(dict(zip(axes, combo, strict=True)), base))
              for arm in arms for combo in itertools.product(*axes.values())]
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.analysis.sweep import check_point

    loaded: set[tuple[str, str]] = set()
    for arm, over in points:   # a point `run` would refuse: one line before any note
        check_point(load_scenario_with_overrides(args.scenario, arm, over), loaded)
    for note in unread_everywhere(args.scenario, points, [*base, *axes]):
        print(note, file=sys.stderr)
    from specsched.sim.sglang_launch_args import is_inert, unmodelled

    # a profile axis' values are named by its runs
    _print_scenario_notes([_set_only(args.scenario, str(arm), base, first) for arm in arms],
                          [str(arm) for arm in arms], {k: v for k, v in axes.items() if is_inert(k.rsplit(".", 1)[-1])
                           or (unmodelled(k.rsplit(".", 1)[-1]) is not None and len(v) > 1
                               and _all_load(args.scenario, str(arms[0]), base, k, v))})
    differ = sweep_defaults_differ(args.scenario, grid, points)
    console = Console(stderr=True, soft_wrap=True)
    try:
        report = run_sweep(str(resolve_scenario_path(args.scenario)), grid, args.seeds, out, executor=args.scheduler,
                           resume=not args.no_resume, arm=args.arm, overrides=parse_overrides(args.set),
                           progress=show_progress(args),
                           max_workers=args.workers)
    except SweepInterrupted as e:
        r = e.report
        done = f"{r.ran} run(s) done now saved in {r.path}" if r is not None else f"finished runs saved in {out}"
        console.print(f"specsched: sweep stopped by {signal_name(e.signum)}: {done}; run the same command to resume",
                      markup=False, highlight=False)
        return 128 + e.signum
    if differ:
        print(differ)
    table = report.table
    others = set(table["point"]) - set(report.points) if len(table) else set()
    if others:
        # the file keeps the points of earlier sweeps into it; the summary, its best point and the
        # objectives are this command's grid (every seed of those points in the file)
        table = table[table["point"].isin(report.points)]
        print(f"note: {report.path} also holds {len(others)} point(s) of earlier sweeps outside this --grid; the "
              "summary below is this grid's points (every point is in the file)", file=sys.stderr)
    _print_sweep_summary(report.path, table, slos, _unfinished_points(report))
    console.print(f"{report.path}: {report.ran} run(s) done now, {report.skipped} already there, "
                  f"{len(report.failed)} failed")
    from specsched.analysis.sweep_store import bench_path

    bench = bench_path(report.path)
    if bench.exists():
        n_lines = sum(1 for _ in bench.open(encoding="utf-8"))
        n_runs = report.table.groupby(["point", "seed"]).ngroups if len(report.table) else 0
        said = ("every run as a bench_serving line" if n_lines >= n_runs else
                f"{n_lines} of the table's {n_runs} runs as bench_serving lines (the others ran before sweeps "
                "wrote them, or their file was removed: --no-resume runs every point again)")
        console.print(f"{bench}: {said}", markup=False, highlight=False)
    for f in report.failed:
        console.print(f"[red]failed[/red] {f.describe()}", markup=True, highlight=False)
    if report.failed:
        console.print(f"details: {report.path.with_name(report.path.name + '.failures.json')}")
    return 1 if report.failed else 0


def _set_only(scenario: str, arm: str, base: dict[str, Any], first: dict[str, Any]) -> Any:
    """``arm`` of ``scenario`` loaded with a sweep's ``--set`` keys (``base``), else, where those
    alone make no valid scenario, with each grid axis at its first value too (``first``):
    ``--set server.speculative_algorithm=eagle --grid acceptance.mean_accept_length=2,3`` on a
    file without speculation has no acceptance until the axis gives one, and was refused
    before any point ran though every point is valid."""
    from specsched.analysis.overrides import Layered, load_scenario_with_overrides

    try:
        return load_scenario_with_overrides(scenario, arm, base)
    except ConfigError:
        if not first:
            raise
        return load_scenario_with_overrides(scenario, arm, Layered(first, base))


def sweep_defaults_differ(scenario: str, grid: dict[str, list[Any]], points: list[tuple[str, dict[str, Any]]]) -> str:
    """:func:`sim.defaults.format_differing` over a sweep's (arm, overrides) ``points``,
    each named by its values of the axes with more than one value (``arm=mtp
    server.chunked_prefill_size=4096``, or ``arm=mtp`` for all of that arm's points); empty for more than
    :data:`analysis.overrides.UNREAD_CHECK_POINTS` points (each is loaded)."""
    from specsched.analysis.overrides import UNREAD_CHECK_POINTS, load_scenario_with_overrides
    from specsched.sim.defaults import format_differing

    if len(points) > UNREAD_CHECK_POINTS:
        return ""
    varying = [k for k, v in grid.items() if len(v) > 1]
    labelled = []
    for arm, over in points:
        at = {**over, "arm": arm}
        labelled.append(({k: at[k] for k in varying} or arm, load_scenario_with_overrides(scenario, arm, over)))
    return format_differing(labelled, "grid points")


def parse_slos(texts: list[str] | None, known: Any = None) -> list[Any]:
    """``--slo`` values as :class:`analysis.slo.Slo` objects; ``known``: the metric names
    allowed (default: bench_serving's metric keys, the sweep summary's key metrics and each latency's max).

    Raises:
        ConfigError: a malformed objective or an unknown metric.
    """
    if not texts:
        return []
    from specsched.analysis.slo import parse_slo
    from specsched.analysis.sweep_summary import KEY_METRICS
    from specsched.sim.bench_serving import METRIC_KEYS
    from specsched.sim.metrics import LATENCY_METRICS

    # every run's summary also holds the maximum of each latency (the plot of its sweep takes them)
    known = list(known) if known is not None else list(dict.fromkeys(
        [*METRIC_KEYS, *KEY_METRICS, *(f"max_{m}_ms" for m in LATENCY_METRICS)]))
    return [parse_slo(t, known) for t in texts]


def _summary_metrics(slos: list[Any]) -> list[str]:
    """The sweep summary's metrics: the key metrics, then each objective's metric."""
    from specsched.analysis.sweep_summary import KEY_METRICS

    return list(dict.fromkeys([*KEY_METRICS, *(s.metric for s in slos)]))


def _unfinished_points(report: Any) -> int:
    """Points of a sweep none of whose runs finished (each failed): in ``report.failed`` and
    not in its table (whose ``point`` column is each point's :func:`analysis.sweep.point_id`)."""
    from specsched.analysis.sweep import point_id

    done = set() if report.table is None or not len(report.table) else set(report.table["point"])
    return len({point_id(f.params) for f in report.failed} - done)


def _print_sweep_summary(path: Path, table: Any, slos: list[Any] | None = None, unjudged: int = 0) -> None:
    """The sweep's summary table (one row per point, key metrics with CIs) on stdout, and
    with ``slos`` which points meet them (:func:`analysis.slo.slo_lines`; ``unjudged`` points
    had no finished run)."""
    from rich.console import Console
    from specsched.analysis.sweep_store import read_samples
    from specsched.analysis.sweep_summary import best_text, print_summary, summarize_sweep

    if table is None or not len(table):
        return
    summary = summarize_sweep(table, read_samples(path), metrics=_summary_metrics(slos or []))
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table
        console = Console(width=200)
    print_summary(console, summary, title=f"{path.name}: one row per point")
    best = best_text(summary, table=table)
    if best:   # wrapped to the console's width as the table is; its brackets are not markup
        console.print(best, markup=False, highlight=False)
    if slos:
        from specsched.analysis.slo import slo_lines

        for line in slo_lines(summary, slos, unjudged=unjudged):
            console.print(line, markup=False, highlight=False)
    rejected = table[(table["metric"] == "requests_aborted") & (table["value"] > 0)]
    if len(rejected):   # a point whose server rejected requests reads faster over the rest
        print(f"warning: the server rejected requests at {rejected['point'].nunique()} point(s) (requests_aborted in "
              f"the table): their latencies and throughputs are over the completed requests only, as bench_serving's "
              "are, so a point that rejects more looks faster", file=sys.stderr)


# ---------------------------------------------------------------- registration

def add_parsers(subparsers: Any) -> None:
    """Register ``plot``, ``compare`` and ``sweep`` on an ``argparse`` subparsers object.

    Each parser sets ``func``: ``func(args) -> int`` (exit code). The functions raise
    :class:`sim.errors.ConfigError` for bad input (the caller maps it to exit code 2).
    """
    p = subparsers.add_parser("plot", help="plot TTFT/TPOT/ITL distributions, timelines and verify split of results directories",
                              description=cmd_plot.__doc__)
    p.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR",
                   help="results directories or bench_serving FILE[:LINE] (one per run; seeds of one arm are pooled; --set what-ifs and measured vs predicted runs of it are drawn apart), "
                        "or one sweep parquet file (metric-vs-parameter lines)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: RESULTS_DIR/plots for one run, plots/FILE for one "
                                                "bench_serving file; "
                                                "for several, plots/<a>_vs_<b>/ named after them; for a sweep "
                                                "file, plots/)")
    p.add_argument("--log-x", action="store_true", help="logarithmic latency axes")
    p.add_argument("--slo", action="append", default=[], metavar="METRIC<=BOUND",
                   help="a sweep file: draw the objective's bound on its metric's panel and print which points "
                        "meet it (repeatable; as sweep --slo)")
    p.set_defaults(func=cmd_plot)

    c = subparsers.add_parser("compare", help="run arms over seeds and compare them (bootstrap CIs)",
                              description="Run each arm with seeds scenario.seed + i and compare every arm with "
                                          "the first (mean, % change, paired bootstrap CI of the % change).")
    c.add_argument("scenario", metavar="SCENARIO", help="scenario YAML file")
    c.add_argument("--arms", required=True, help="comma-separated arms, the first is the base (e.g. base,fix)")
    c.add_argument("--seeds", type=seed_count, default=5, metavar="K", help="seeds per arm (default 5; 1 gives no CI)")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key for every arm (repeatable), e.g. workload.num_requests=32")
    c.add_argument("--metrics", help="comma-separated summary keys (default: throughput, TTFT stats, median TPOT/ITL, verify cycles/s, accept length; a metric no run has a value for is left out)")
    c.add_argument("--csv", metavar="F", help="write the table as CSV")
    c.add_argument("--markdown", metavar="F", help="write the table as markdown")
    c.add_argument("--plot", metavar="STEM", help="write bars with CIs to STEM.png and STEM.svg")
    c.add_argument("--out", metavar="DIR", help="where each run's results directory is kept, as <arm>-seed<N> "
                                                "(default results/<scenario>, where specsched run writes)")
    c.add_argument("--no-save", action="store_true", help="keep no run folders (only the table)")
    c.add_argument("--min-change", type=nonnegative_float, default=1.0, metavar="PCT",
                   help="smallest change in %% called better or worse (default 1); the change's spread "
                        "over seeds raises it per metric; smaller changes are 'same'")
    c.add_argument("--workers", type=positive_int, default=1, metavar="N", help="parallel processes (default 1)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    c.add_argument("--max-requests", type=positive_int, default=None, metavar="N",
                   help="refuse workloads above N requests before running (default 2000000)")
    c.add_argument("--measured", action="append", default=[], metavar="ARM=RUN",
                   help="a server's measured run of ARM: a bench_serving result FILE[:LINE] or a results "
                        "directory (repeatable; the base arm's too): prints each arm's predicted change beside "
                        "the measured one, e.g. --measured base=runs.jsonl:1 --measured fix=runs.jsonl:2")
    c.set_defaults(func=cmd_compare)

    s = subparsers.add_parser("sweep", help="run a parameter grid x seeds into one tidy parquet file",
                              description="Run every combination of the --grid axes with K seeds. Keys are dotted "
                                          "scenario keys (server.chunked_prefill_size) or 'arm'; values are YAML.")
    s.add_argument("scenario", metavar="SCENARIO", help="scenario YAML file")
    s.add_argument("--grid", nargs="+", action="extend", default=[], required=True, metavar="KEY=V1,V2",
                   help="an axis: dotted key = comma-separated values (repeatable)")
    s.add_argument("--seeds", type=seed_count, default=1, metavar="K", help="seeds per point (default 1)")
    s.add_argument("--out", metavar="F", help="parquet file (default results/sweep-<scenario>.parquet)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario key at every point (repeatable; a --grid axis wins)")
    s.add_argument("--arm", default="base", help="arm of points without an 'arm' axis (default base)")
    s.add_argument("--scheduler", metavar="tcp://host:port", help="run on a Dask scheduler instead of local processes")
    s.add_argument("--workers", type=positive_int, default=None, metavar="N", help="local processes (default: CPU count)")
    s.add_argument("--no-resume", action="store_true", help="ignore and overwrite runs already in --out")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--slo", action="append", default=[], metavar="METRIC<=BOUND",
                   help="a service-level objective on a run summary metric in bench_serving's units (repeatable), "
                        "e.g. --slo p90_ttft_ms<=2000 --slo median_tpot_ms<=50: the summary says which points meet "
                        "them, where along the swept parameter a metric crosses its bound, and the highest "
                        "output_throughput among the points that meet them")
    s.add_argument("--max-requests", type=positive_int, default=None, metavar="N",
                   help="refuse workloads above N requests before running (default 2000000)")
    s.set_defaults(func=cmd_sweep)
