"""The specsched command line (the composition root above sim, analysis and runtime).

Commands are looked up in :data:`COMMANDS` and only the module of the command being run is
imported, so ``specsched --help`` and a bad scenario never import torch, matplotlib, dask or
scipy. Bad input (scenario, profile, arguments) prints one line naming the file, key, value
and what is allowed and exits with status 2, with nothing written; Ctrl-C prints one line
and exits with 130.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import inspect
import re
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from specsched.sim.cli_types import nonnegative_int, positive_int
from specsched.sim.errors import ConfigError

EXIT_BAD_INPUT = 2
_PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ENOENT, errno.EROFS, errno.ENOSPC, errno.EDQUOT})
"""OS errors of a path given on the command line that are the user's to change."""
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
PROGRESS_DELAY_S = 1.0  # a progress bar appears only for work that lasts longer

DESCRIPTION = ("Predict, then measure, what an SGLang-style scheduler with speculative decoding "
               "does to TTFT, TPOT and throughput.")

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("specsched.cli", "simulate one arm of a scenario and print a bench_serving-style table"),
    "compare": ("specsched.analysis.cli_commands", "run arms over seeds and compare them (bootstrap CIs)"),
    "sweep": ("specsched.analysis.cli_commands", "run a parameter grid x seeds into one parquet file"),
    "plot": ("specsched.analysis.cli_commands", "plot TTFT/TPOT/ITL distributions and timelines of results"),
    "schema": ("specsched.cli", "print every scenario key with its type, default and allowed values"),
    "calibrate": ("specsched.analysis.calibrate_bench", "refit a profile: to the MI355X reference figures, or --from bench_serving runs"),
    "measure": ("specsched.runtime.cli_commands", "run a scenario for real on a device (needs torch)"),
    "validate": ("specsched.runtime.cli_commands", "measure a scenario and simulate it: predicted vs measured"),
    "profile": ("specsched.runtime.cli_commands", "measure a device profile (needs torch), or write one with --analytic"),
    "doctor": ("specsched.runtime.cli_commands", "first-run check of a GPU machine: versions, capture, SDPA, sync costs"),
    "scenario": ("specsched.analysis.bench_cli", "make a scenario (from-bench: from a bench_serving result line)"),
    "validate-bench": ("specsched.analysis.bench_cli", "simulate and compare with a real server's bench_serving run"),
}
"""Command -> (module whose ``add_parsers`` registers it, one-line summary for ``--help``)."""

EXAMPLES: dict[str, list[str]] = {
    "run": ["specsched run burst256-ht",
            "specsched run scenarios/burst256-ht.yaml --arm waiting_aware --seed 2",
            "specsched run scenarios/batch8-ll.yaml --set server.chunked_prefill_size=8192 --out results/x"],
    "compare": ["specsched compare scenarios/burst256-ht.yaml --arms base,waiting_aware --seeds 5"],
    "sweep": ["specsched sweep scenarios/batch8-ll.yaml --grid server.sync_mode=host_block,stream_wait --seeds 3"],
    "plot": ["specsched plot results/burst256-ht/base-seed1 results/burst256-ht/waiting_aware-seed1"],
    "schema": ["specsched schema", "specsched schema --markdown > docs/scenario-reference.md"],
    "calibrate": ["specsched calibrate --report-only", "specsched calibrate --write",
                  "specsched calibrate --from runs.jsonl --profile h200-1b --out profiles/h200-1b-fitted.yaml"],
    "measure": ["specsched measure scenarios/h200/batch8.yaml --arm stream_wait --device cuda",
                "specsched measure scenarios/h200/batch8.yaml --device cpu --preset tiny --set workload.num_requests=4"],
    "validate": ["specsched validate scenarios/h200/batch8.yaml --profile profiles/h200-1b.yaml --device cuda",
                 "specsched validate --measured runs.jsonl:3 --scenario mine.yaml   # a real server's bench_serving run"],
    "profile": ["specsched profile --device cuda --preset 1b --graph-max-bs 128 --name h200-1b --out profiles/h200-1b.yaml",
                "specsched profile --analytic --model llama-3.1-8b --gpu H200 --tp 1 --out profiles/h200-l8.yaml"],
    "doctor": ["specsched doctor --device cuda", "specsched doctor --device cuda-as-hip --out doctor.md"],
    "scenario": ["specsched scenario from-bench runs.jsonl:3 --profile h200-1b --out mine.yaml",
                 "specsched scenario from-bench agentic.jsonl --profile h200-1b --dataset-path trace.json   # an agentic-trace run"],
    "validate-bench": ["specsched validate-bench runs.jsonl:3 --scenario mine.yaml --plot",
                       "specsched validate-bench runs.jsonl:3 --profile h200-1b"],
}

# modules registered when a command is not in COMMANDS (a command added elsewhere still works)
COMMAND_MODULES = ("specsched.cli", "specsched.analysis.calibrate_bench", "specsched.analysis.cli_commands",
                   "specsched.analysis.bench_cli", "specsched.runtime.cli_commands")


class HelpFormatter(argparse.HelpFormatter):
    """Wraps description paragraphs to the terminal; keeps indented lines (examples) and the
    lines of an ``examples:`` block as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in text.strip("\n").split("\n\n"):
            lines = para.splitlines()
            if any(line.startswith(" ") for line in lines) or lines[0].endswith(":"):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(x.strip() for x in lines), width,
                                         initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(out)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with a one-line error: ``specsched compare: error: argument
    --seeds: expected an integer >= 1, got 0`` and exit status 2, without the usage block
    (``COMMAND --help`` shows it); the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {' '.join(message.split())}\n")


def plain(text: str | None) -> str | None:
    """Help text without reStructuredText markup (````x````, ``:func:`x```` -> ``x``)."""
    if not text:
        return text
    text = inspect.cleandoc(text)
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "").replace("::\n", ":\n")


OUT_NAME_MAX = 80
"""Longest override suffix kept whole in a default results directory name; a longer one keeps
the overrides that fit, each whole, and ends with a hash of the full text (file systems limit a
name to 255 bytes)."""


def overrides_suffix(overrides: dict[str, Any]) -> str:
    """A readable, stable directory-name suffix for ``--set`` overrides (parsed, last wins).

    Keys sorted, so the same effective overrides always name the same directory:
    ``{"server.chunked_prefill_size": 8192}`` -> ``server.chunked_prefill_size=8192``; several
    are joined with ``+``. Characters unsafe in a file name become ``_``, and then (or when
    over :data:`OUT_NAME_MAX`) a short hash of the exact text keeps distinct overrides apart.
    """
    import hashlib
    import json

    def text(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=True, default=str)
    raw = "+".join(f"{k}={text(v)}" for k, v in sorted(overrides.items()))
    safe = re.sub(r"[^A-Za-z0-9._=+-]+", "_", raw)
    if safe != raw or len(safe) > OUT_NAME_MAX:
        # cut between overrides, so that each one the name shows is whole: a cut inside a value
        # (`workload.output_len.value=32` kept as `...value=3`) named another setting
        items, kept = safe.split("+"), ""
        for item in items:
            if len(f"{kept}+{item}" if kept else item) > OUT_NAME_MAX:
                break
            kept = f"{kept}+{item}" if kept else item
        safe = f"{kept or items[0][:OUT_NAME_MAX]}-{hashlib.sha1(raw.encode()).hexdigest()[:8]}"
    return safe


def default_out_dir(scenario_name: str, arm: str, seed: int, overrides: dict[str, Any] | None = None) -> Path:
    """Where ``run`` writes when no --out is given: results/<scenario>/<arm>-seed<N>, and for a
    what-if run (``--set``) <arm>-seed<N>+<overrides> (:func:`overrides_suffix`), so that it
    never overwrites the plain run it is compared with."""
    name = f"{arm}-seed{seed}"
    if overrides:
        name += "+" + overrides_suffix(overrides)
    return Path("results") / scenario_name / name


def simulate(scenario: Any, seed: int, progress: bool) -> Any:
    """Run the simulation, with a progress bar of finished requests when ``progress``.

    The simulation runs in a worker thread so that the main thread can draw the bar and
    take Ctrl-C at once (the simulation itself never checks for signals).
    """
    from specsched.sim.engine import SimEngine

    engine = SimEngine(scenario, seed=seed)
    if not progress:
        return engine.run()
    from tqdm import tqdm

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = engine.run()
        except BaseException as e:  # handed to the main thread
            box["error"] = e

    t = threading.Thread(target=work, name="simulate", daemon=True)
    t.start()
    total = len(engine.specs)  # a trace's length, not only num_requests
    t.join(PROGRESS_DELAY_S)  # no bar for a run that ends within a second
    if t.is_alive():
        with tqdm(total=total, desc="simulate", unit="req", file=sys.stderr, leave=False) as bar:
            while t.is_alive():
                bar.n = total - engine.requests_left
                bar.refresh()
                t.join(0.25)
    if "error" in box:
        raise box["error"]
    return box["result"]


def cmd_run(args: argparse.Namespace) -> int:
    """Simulate one arm of a scenario, print the table, write the results directory.

    The cyclic garbage collector is off for the whole command (:mod:`sim.gc_pause`), not
    only for the simulation: importing the models and the simulator, loading the scenario
    and writing the results make hundreds of thousands of objects and next to no
    garbage cycles, and the collections they set off were ~0.7 % of the command's
    instructions (docs/performance.md, ninth round). One run's worth of memory: nothing
    accumulates. Run as the program (:func:`script`), the collector stays off to the end.
    """
    from specsched.sim.gc_pause import collector_paused

    with collector_paused():
        return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    from specsched.analysis.cli_commands import show_progress
    from specsched.sim.limits import check_fits, check_size

    if args.set:
        from specsched.analysis.overrides import load_scenario_with_overrides

        scenario = load_scenario_with_overrides(args.scenario, args.arm, args.set)
    else:
        from specsched.sim.config import load_scenario

        scenario = load_scenario(args.scenario, args.arm)
    from specsched.analysis.overrides import (
        fixed_uniform_notes,
        parse_overrides,
        unread_in_file,
        unread_overrides,
        window_reset_warnings,
    )

    given = parse_overrides(args.set) if args.set else {}
    # before --seed: with_value validates a full dump, after which every key reads as set in the file
    notes = [*window_reset_warnings(scenario), *unread_overrides(scenario, given), *unread_in_file(scenario, given),
             *fixed_uniform_notes(scenario)]
    from specsched.sim.sglang_launch_args import launch_arg_notes

    notes[:0] = launch_arg_notes(scenario._launch_args_values, scenario._launch_args_left_out)
    if args.seed is not None:
        from specsched.sim.config import with_value

        scenario = with_value(scenario, "seed", args.seed)  # the saved scenario.yaml says so
    notes += check_size(scenario, args.max_requests)
    check_fits(scenario)
    from specsched.sim.profile import (
        context_length_note,
        drafter_kind_note,
        load_profile,
        standalone_drafter_note,
    )

    # a bad profile fails here, before any work; a good one may add a note
    profile = load_profile(scenario.profile, scenario.path or None)
    notes += [standalone_drafter_note(scenario, profile), drafter_kind_note(scenario, profile),
              context_length_note(scenario, profile)]
    from specsched.sim.report import format_report
    from specsched.sim.results import write_results

    if args.out:
        out = Path(args.out)
    else:
        from specsched.analysis.overrides import parse_overrides

        out = default_out_dir(scenario.name, args.arm, scenario.seed, parse_overrides(args.set or []))
    from specsched.sim.results import check_results_target

    check_results_target(out)  # an --out that is a file or another folder: refused before the run
    from specsched.sim.defaults import format_resolved

    # after the refusals (the --out check included): bad input stays one line (compare and sweep print
    # nothing before theirs either)
    resolved = format_resolved(scenario._resolved_defaults)
    if resolved:
        print(resolved)
    for note in notes:
        if note is not None:
            print(note, file=sys.stderr)
    t0 = time.perf_counter()
    result = simulate(scenario, scenario.seed, show_progress(args))
    wall = time.perf_counter() - t0
    from specsched.sim.grid_range import write_warnings

    write_warnings(result.extra["range_notes"])   # once, at the largest value the run reached
    # reference figures belong to the scenario as written: not shown for a modified one
    ref = None if args.set else scenario.reference.get(args.arm)
    unknown = [k for k in ref or {} if k not in result.summary]
    if unknown:   # a misspelt figure printed n/a against the reference: refused before anything is written
        from specsched.sim.errors import ConfigError

        metrics = sorted(k for k, v in result.summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        raise ConfigError(scenario.path or scenario.name, f"reference.{args.arm}.{unknown[0]}", ref[unknown[0]],
                          f"not a metric of the run; its metrics: {', '.join(metrics)}")
    from specsched.sim.bench_serving import bench_record

    print(format_report(result.summary, ref, bench=bench_record(result, details=False)))
    if result.extra.get("records") == "compact":
        from specsched.sim.engine import AUTO_COMPACT_TOKENS

        # the row reads n/a: its per-token times (chunks) are what compact records leave out
        print(f"note: Peak output token throughput is n/a: above {AUTO_COMPACT_TOKENS:,} output tokens a run keeps "
              "compact records (no per-token times, which bench_serving's whole-second peak counts); every other "
              "figure is the same as with full records", file=sys.stderr)
    from specsched.sim.defaults import kv_pool_note, spec_cap_note

    if (cap := spec_cap_note(scenario, result.table("timeseries"))) is not None:
        print(cap, file=sys.stderr)
    if (pool := kv_pool_note(scenario, result.summary)) is not None:
        print(pool, file=sys.stderr)
    from specsched.sim.dp_attention import dp_attention_layout_note

    if (layout := dp_attention_layout_note(scenario, profile)) is not None:
        print(layout, file=sys.stderr)
    write_results(result, out, fmt=args.format)
    print(f"simulated in {wall:.2f} s; results in {out}/")
    if args.set and scenario.reference.get(args.arm):
        # the section the plain run ends with is missing: say why, and how to set the two side by side
        from shlex import quote

        plain = default_out_dir(scenario.name, args.arm, scenario.seed)
        print(f"note: no reference figures: they were measured on {scenario.name} / {args.arm} as written, which --set "
              f"changes; beside the plain run: specsched plot {quote(str(plain))} {quote(str(out))}"
              + ("" if (plain / "summary.json").is_file() else
                 f" (after specsched run {quote(args.scenario)} --arm {quote(args.arm)})"))
    if (n := result.summary.get("requests_aborted")):
        print(f"warning: the server rejected {n} request(s) (an empty prompt, a prompt past max_req_input_len "
              "or the context length), "
              "as SGLang 0.5.23 does; they count as failed, as bench_serving's OpenAI-route backends count them "
              "(requests.error has SGLang's message; its native sglang backend counts each completed, TTFT 0.0, "
              "and validate compares such a line so)", file=sys.stderr)
    if (n := result.summary.get("requests_truncated")):
        print(f"warning: {n} prompt(s) truncated to what the server takes (the context length or max_req_input_len), "
              "as SGLang 0.5.23 does under --allow-auto-truncate (server.allow_auto_truncate)", file=sys.stderr)
    if (n := result.summary.get("requests_oom_aborted")):
        swa = " or its SWA pool (server.swa_full_tokens_ratio)" if scenario.server.swa_max_total_num_tokens else ""
        print(f"warning: {n} request(s) could not get KV for their next decode step even alone, and SGLang 0.5.23 "
              "aborts such a request (schedule_batch.py retract_decode: 'Out of memory even after retracting all "
              "other requests'); their clients keep the tokens streamed before (bench_serving counts them "
              f"completed); a larger KV pool (server.max_total_num_tokens){swa} avoids it", file=sys.stderr)
    if (n := result.summary.get("requests_output_clamped")):
        # SGLang cuts max_new_tokens to what the empty pool holds (scheduler.py init_req_max_new_tokens)
        from specsched.sim.served import cutting_server

        srv, key = cutting_server(scenario.server)
        print(f"warning: {n} request(s) had their output cut to fit the KV pool "
              f"({key}={srv.max_total_num_tokens}) or the context length, as SGLang cuts max_new_tokens "
              f"(init_req_max_new_tokens; finish reason length); the largest cut: "
              f"{result.summary['output_clamp_max_tokens']} tokens", file=sys.stderr)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the scenario reference (every key, type, default, allowed values, SGLang name)."""
    from specsched.sim.schema import render_markdown, render_text

    print(render_markdown() if args.markdown else render_text(), end="")
    return 0


def add_parsers(sub: Any) -> None:
    """Register ``run`` and ``schema``."""
    r = sub.add_parser("run", help=COMMANDS["run"][1],
                       description="Simulate one arm of a scenario: prints a bench_serving-style table "
                                   "and writes results/<scenario>/<arm>-seed<N>/ (requests, chunks, steps, "
                                   "timeseries tables, summary.json, the resolved scenario.yaml).")
    r.add_argument("scenario", help="scenario YAML file, or a bundled name (burst256-ht, h200/batch8)")
    r.add_argument("--arm", default="base", help="arm name from the scenario's arms (default base)")
    r.add_argument("--seed", type=nonnegative_int, default=None, help="seed (default: the scenario's)")
    r.add_argument("--out", default=None, help="results directory (default results/<scenario>/<arm>-seed<N>, "
                                               "with --set ...-seed<N>+<key>=<value>)")
    r.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="table format")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario key (repeatable), e.g. server.chunked_prefill_size=8192")
    r.add_argument("--max-requests", type=positive_int, default=None, metavar="N",
                   help="refuse workloads above N requests before allocating (default 2000000)")
    r.set_defaults(func=cmd_run)
    s = sub.add_parser("schema", help=COMMANDS["schema"][1],
                       description="Every scenario key: type, default, allowed values, unit and the SGLang "
                                   "argument it mirrors (the same text as docs/scenario-reference.md).")
    s.add_argument("--markdown", action="store_true", help="print the markdown page instead of plain text")
    s.set_defaults(func=cmd_schema)


def _register(sub: Any, module: str) -> str | None:
    """Import ``module`` and register its commands; returns the missing module's name when an
    optional part, or one of its optional dependencies, is not installed (else None)."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:  # an optional part, or its optional dependencies, not installed
        top = (e.name or "").split(".")[0]
        if e.name in (module, module.rsplit(".", 1)[0]) or top in ("torch", "distributed", "dask"):
            return top or module
        raise
    mod.add_parsers(sub)
    return None


def _command_in(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


class _Version(argparse.Action):
    """``--version``: prints the version, read only here (``specsched.__version__`` is
    looked up in the installed metadata on first use, which other commands skip)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> NoReturn:
        import specsched

        print(f"specsched {specsched.__version__}")
        parser.exit()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: the named command's module is imported and registered, the
    other commands are listed by name only (their modules stay unimported)."""
    fmt = HelpFormatter
    examples = "examples:\n" + "\n".join(f"  {e[0]}" for e in EXAMPLES.values())
    p = ArgumentParser(prog="specsched", description=DESCRIPTION, epilog=examples, formatter_class=fmt)
    p.add_argument("--version", action=_Version, nargs=0, default=argparse.SUPPRESS,
                   help="show the program's version number and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = _command_in(sys.argv[1:] if argv is None else argv)
    missing = None
    if command in COMMANDS:
        missing = _register(sub, COMMANDS[command][0])
    elif command is not None:  # unknown here: maybe registered by a module not in the table
        for module in COMMAND_MODULES:
            _register(sub, module)
    if command == "profile":
        from specsched.sim.analytic.cli import attach

        attach(sub)  # `profile --analytic`, with or without the runtime's measuring profile
    for name, (_, summary) in COMMANDS.items():
        if name not in sub.choices:
            sp = sub.add_parser(name, help=summary, add_help=False)
            if name == command:  # named but not registered: its module could not be imported
                from specsched.sim.errors import MissingDependency, refuse_missing

                sp.set_defaults(func=refuse_missing,
                                missing_dependency=MissingDependency(f"`specsched {name}`", missing or "an optional part"))
    for name, sp in sub.choices.items():
        sp.formatter_class = fmt
        summary = COMMANDS.get(name, ("", ""))[1]
        sp.description = plain(sp.description) or (summary[:1].upper() + summary[1:] + ".")
        if name in EXAMPLES and not sp.epilog:
            sp.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])
        if not any("--quiet" in a.option_strings for a in sp._actions):
            sp.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    _no_abbreviations(p)
    _one_value_each(p)
    return p


class _StoreOnce(argparse._StoreAction):
    """An option that keeps one value (``--server-log F``, ``--from F1 F2 ...``), refused when
    given again with another: argparse keeps the last, so ``--server-log prefill.log
    --server-log decode.log`` read decode.log alone and ``--from a.jsonl --from b.jsonl`` fitted
    b alone, without a word. The same value again is no conflict."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = getattr(self, "_given_in", None)
        if given is not None and given[0] is namespace and given[1] != values:
            def shown(v: Any) -> str:
                return " ".join(map(str, v)) if isinstance(v, list) else str(v)

            parser.error(f"{option_string} given twice ({shown(given[1])!r}, then {shown(values)!r}): it takes one "
                         + ("list: give every value after one " + option_string if isinstance(values, list)
                            else "value: give it once"))
        self._given_in = (namespace, values)
        super().__call__(parser, namespace, values, option_string)


def _one_value_each(parser: argparse.ArgumentParser) -> None:
    """Every option of one value (argparse's plain ``store``), in every command and
    subcommand, refuses a second, different value (:class:`_StoreOnce`)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                _one_value_each(sp)
        elif type(a) is argparse._StoreAction and a.option_strings:
            a.__class__ = _StoreOnce


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """Options only by their full names, in every command and subcommand: argparse took
    ``compare --seed 3`` for ``--seeds 3`` (three seeds, not the first seed 3)."""
    parser.allow_abbrev = False
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                _no_abbreviations(sp)


def _reader_went_away() -> int:
    """The reader of our output closed the pipe (``specsched ... | head``): stop quietly,
    as a command killed by SIGPIPE would (status 141), with stdout pointed at /dev/null so
    the interpreter's flush at exit does not raise again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13


def refuse_unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> NoReturn:
    """Refuse arguments the command does not take, in the command's own name, with the
    option each unknown one is closest to (``compare --seed 3``: ``--seeds``; ``run --seeds
    3``: ``--seed``). Options are never abbreviated (``allow_abbrev`` off), so a near name
    is refused here rather than read as another option."""
    import difflib

    cmd = parser
    while True:  # down to the (sub)command that was named: `scenario from-bench`
        sub = next((a for a in cmd._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or not isinstance(chosen := sub.choices.get(getattr(args, sub.dest, None)), argparse.ArgumentParser):
            break
        cmd = chosen
    options = [o for a in cmd._actions for o in a.option_strings if o.startswith("--")]
    near = [(t.split("=", 1)[0], m[0]) for t in extra if t.startswith("--")
            for m in [difflib.get_close_matches(t.split("=", 1)[0], options, n=1, cutoff=0.7)] if m]
    hint = ("" if not near else f"; did you mean {near[0][1]}?" if sum(t.startswith("--") for t in extra) == 1
            else f"; did you mean {', '.join(f'{m} (for {t})' for t, m in near)}?")
    cmd.error(f"unrecognized arguments: {' '.join(extra)}{hint} ({cmd.prog} --help lists its options)")


STDIN_RUN = re.compile(r"-:\d+")
"""``-:LINE``, one run of a result file read from the standard input (``sim.bench_serving.split_spec``)."""


def stdin_runs(argv: list[str]) -> list[str]:
    """``argv`` with each ``-:LINE`` word spelled ``/dev/stdin:LINE``, the path ``-`` is read
    as: argparse takes a word that starts with ``-`` for an option, so ``scenario from-bench
    -:2`` failed with "the following arguments are required: FILE[:LINE]" and ``--measured
    -:2`` with "expected one argument"."""
    if not any(isinstance(a, str) and STDIN_RUN.fullmatch(a) for a in argv):
        return argv
    from specsched.sim.bench_serving import STDIN_PATH  # numpy: imported only when needed

    return [f"{STDIN_PATH}:{a[2:]}" if isinstance(a, str) and STDIN_RUN.fullmatch(a) else a for a in argv]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, 130 on Ctrl-C)."""
    try:
        from specsched.sim.errors import MissingDependency

        argv = stdin_runs(sys.argv[1:] if argv is None else list(argv))
        parser = build_parser(argv)
        args, extra = parser.parse_known_args(argv)
        try:
            if extra:
                # a command registered without its optional dependency lacks that part's
                # options: say what to install rather than that they are unknown
                if getattr(args, "missing_dependency", None) is not None:
                    raise args.missing_dependency
                refuse_unrecognized(parser, args, extra)
            return int(args.func(args) or 0)
        except (ConfigError, MissingDependency) as e:
            if isinstance(e, ConfigError) and e.file == "<scenario>" and isinstance(getattr(args, "scenario", None), str):
                # raised mid-run, where only the server arguments are at hand: name the file
                e = ConfigError(args.scenario, e.key, e.value, e.allowed)
            print(f"specsched: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:
            return _reader_went_away()
        except Exception as e:
            from specsched.sim.scheduler import UnschedulableRequest

            if isinstance(e, UnschedulableRequest):
                # raised mid-run (a trace's or a conversation's lengths are met as the run
                # reaches them), where the scheduler knows no file: name the scenario's
                scenario = getattr(args, "scenario", None)
                where = f"{scenario}: " if isinstance(scenario, str) else ""
                print(f"specsched: error: {where}{e}", file=sys.stderr)
                return EXIT_BAD_INPUT
            from specsched.sim.engine import Stalled
            from specsched.sim.policy_loader import user_policy_failure

            failed = user_policy_failure(e)
            if failed is not None:  # the user's own policy code failed mid-run: its line, not ours
                print(f"specsched: error: {failed}", file=sys.stderr)
                return EXIT_BAD_INPUT
            if isinstance(e, Stalled) and e.policies:
                # the stalled run's own user policies (another arm's are not its); with only
                # shipped policies a stall is the model's bug (traceback below)
                print(f"specsched: error: {e}, under the user policy {', '.join(e.policies)}: "
                      "one that never admits a waiting request (delays every pass, or leaves it out of its order) "
                      "stalls the server", file=sys.stderr)
                return EXIT_BAD_INPUT
            if isinstance(e, (PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)):
                print(f"specsched: error: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
                return EXIT_BAD_INPUT
            if isinstance(e, OSError) and e.filename is not None and e.errno in _PATH_ERRNOS:
                # an --out the file system will not take: a name over its limit, a read-only
                # or full disk, a folder that cannot be made (/proc): one line, not a traceback
                print(f"specsched: error: cannot use {e.filename}: {e.strerror}", file=sys.stderr)
                return EXIT_BAD_INPUT
            raise
    except KeyboardInterrupt as e:
        # a command that knows what it kept says so: "specsched: interrupted: measurement stopped, nothing written"
        note = f": {e.args[0]}" if e.args and isinstance(e.args[0], str) else ""
        print(f"specsched: interrupted{note}", file=sys.stderr)
        return EXIT_INTERRUPTED


def script() -> int:
    """The ``specsched`` program (the console script and ``python -m specsched``): :func:`main`
    in a process that ends when it returns.

    For ``run`` two settings of the process's own, both measured on the 256-request burst
    (docs/performance.md, "Start-up of `specsched run`"):

    - numpy's OpenBLAS starts a thread per further core when numpy is imported, and on a
      2-core machine that thread spins ~60 ms of CPU waiting for work that a run never gives
      it (no BLAS call of the simulator is large enough to be split), so
      ``OPENBLAS_NUM_THREADS`` is 1 unless the environment sets it;
    - the cyclic garbage collector stays off to the process's end and what is alive then is
      frozen (``gc.freeze``): a collection after the run walks every object the imports and
      the run made (~20 ms of CPU when the run's pause ends, ~18 ms more in the interpreter's
      last collection at exit) to free some 1,400 objects of argparse's and the imports'
      cycles, which the process's end returns anyway.

    Other commands (many runs in one process, a device's measurement) keep both as they are.
    Returns the exit status, as :func:`main`.
    """
    if _command_in(sys.argv[1:]) != "run":
        return main()
    import gc
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.disable()
    try:
        return main()
    finally:
        gc.freeze()


if __name__ == "__main__":
    sys.exit(script())
