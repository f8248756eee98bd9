"""Fit a profile to a real server's bench_serving runs (``specsched calibrate --from``).

The free parameters are multipliers on groups of profile values (a real GPU runs the same
kernels at a different speed than the microbenchmarks or roofline that made the profile;
one factor per group keeps each grid's measured shape):

- ``prefill``: ``gpu.extend``, ``gpu.draft_inject``, ``gpu.draft_inject_per_token_s``
  (prefill / extend forwards);
- ``decode``: ``gpu.verify``, ``gpu.decode``, ``gpu.draft_step`` (decode / verify forwards);
  refused for runs without speculative decoding on a profile with no ``gpu.decode``, whose
  plain decode is read from ``gpu.verify`` (:func:`refuse_decode_via_verify`);
- ``host``: every host term ``host.speed_factor`` scales (:data:`sim.host_speed.SCALED_TERMS`:
  the scheduler's work, launch calls, the extends' and injections' kernel issue, idle
  leads, slot expansion, wake-up, eager kernel issue): a host that runs the loop's Python
  slower runs all of it slower. Scaling only the scheduler's terms left an extend's issue
  (the longest host term of a prefill, and what paces the first token at light load:
  docs/measurements/h200-v17-holdout/README.md) to be absorbed by ``prefill``, a GPU term
  that also costs throughput at saturation;
- ``analytic.efficiency.<name>`` (``matmul``, ``attention``, ``hbm``, ...): an analytic
  profile's efficiency factor (``specsched profile --analytic``), multiplied (fractions of a
  peak capped at 1) and the profile rebuilt from it (``sim.analytic.writer.regenerate``);
- any other numeric or grid key of the profile by its dotted name, scaled the same way.

Each bench_serving run becomes a scenario (:mod:`analysis.from_bench`; ``--scenario-template``
gives the server and acceptance blocks when the lines lack ``server_info``). The objective is
the sum over runs and metrics (default median TTFT, median ITL, output tok/s) of the squared
log ratio of the prediction (mean over ``--seeds`` seeds, the same seeds at every evaluation)
to the measurement, each divided by its standard error (:func:`residual_noise`: the
measured figure's, from the spread between runs at one load or one run's seed scatter, and
the seed mean's),
plus a Gaussian prior on each log factor around the profile (``--prior``, :data:`PRIOR_SD`):
the most probable factors given the runs and the profile. Several factors move a light-load
median TTFT alike (an extend's GPU time, the host's issue of it), so the runs alone leave
the split between them free, and a least-squares fit without the prior can put a host
shortfall on a GPU factor that then costs throughput at saturation
(docs/measurements/h200-v17-holdout/README.md); the prior moves the factor that is known to
vary between machines (the host) before the ones that are not. scipy's ``least_squares`` on
the log factors, from the profile and from the best point of a coarse scan of each factor the
prior lets move far (:func:`fit`; a light-load TTFT is flat in the host until the host paces
the extend, so a local fit from the profile alone could stop there). SGLang server logs
(``--server-log``, one or one per launch) add their pure-decode steps (:func:`analysis.server_log.decode_step_samples`):
the cost model's step time at the logged batch size and context vs the logged one, as one
more term. The fit report gives each run's error before and after, and each factor's
standard error (Gauss-Newton: the residual scatter left at the solution through the
Jacobian): a factor the runs do not pin down shows a large one. The written profile is the
input with the factors applied and a provenance entry naming the files.

A run whose line has send times (``start_times``) is replayed with its own arrivals
(:func:`cases_from_runs`); a line without them gets arrivals drawn at its rate.

The MI355X reference fit (``sim/calibrate.py``) is a different, closed procedure; this module
shares only its subcommand name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from specsched.analysis.bench_cli import add_agentic_options, agentic_args
from specsched.analysis.factor_fit import JAC_STEP, CapReached, LogFactorFit
from specsched.sim.atomic import refuse_file_out
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.host_speed import HOST_TABLES, SCALED_TERMS
from specsched.sim.input_files import same_input
from specsched.sim.sglang_launch_args import same_setting

GROUPS: dict[str, tuple[str, ...]] = {
    "prefill": ("gpu.extend", "gpu.draft_inject", "gpu.draft_inject_per_token_s"),
    "decode": ("gpu.verify", "gpu.decode", "gpu.draft_step"),
    # every term sim.host_speed scales (host.speed_factor): a slower host runs all of its
    # Python slower, the extends' and injections' kernel issue as much as the scheduler
    "host": SCALED_TERMS,
    "idle_lead": ("host.extend_idle_lead_s", *(f"host.{t}" for t in HOST_TABLES)),
}
DEFAULT_PARAMS = "prefill,decode,host"
"""``--params`` when not given, with bench_serving runs."""
LOG_ONLY_PARAMS = ("decode", *GROUPS["decode"])
"""What a server log's decode lines alone determine (:mod:`analysis.calibrate_log`): the
decode/verify step's GPU terms, the ``decode`` group and its keys."""
LOG_ONLY_DEFAULT = ("decode",)
"""``--params`` when not given, fitting server logs alone."""
FIT_METRICS = ("median_ttft_ms", "median_itl_ms", "output_throughput")
ONE_BATCH_FIT_METRICS = ("max_ttft_ms", "decode_window_output_throughput")
"""Added to :data:`FIT_METRICS` by :func:`default_fit_metrics` where a run has them (a
``bench_one_batch_server`` line: sim/bench_serving.py ``one_batch_line``)."""
PRIOR_SD: dict[str, float] = {"prefill": 0.07, "decode": 0.07, "host": 0.3}
"""Default prior standard deviation of each group's log factor (``--prior``): how far the
group's true value on the user's machine may be from the profile's, before any run is seen:
how much a profile made on one machine moves on another of the same GPU type.

GPU terms (``prefill``, ``decode``): 0.07, the largest difference seen between two H200s in
one GPU-paced figure: the 8b preset's batch-1 speculative cycle, identical work on both,
measured 8.83 ms on round 26's machine and 9.50 ms on round 27's (log 0.073;
docs/measurements/h200-v27.md, "After the verify-width fix"). The 1b proxy's decode fitted
x0.997..x1.014 across three other H200s (docs/measurements/h200-v15-holdout,
h200-v17-holdout); with round 27's the root mean square of these differences is about 0.04,
but four machines say little about the tail, and a prior tighter than a difference already
seen holds the fit off it. No pair of machines has measured the extends apart from the
cycle; ``prefill`` takes ``decode``'s value (one GPU's clocks and memory run both).
The host's Python moves a lot: a fixed reference work took 1.1 or 2.0 ms on the same
rented H200 in periods of seconds (docs/measurements/h200-v10.md), 0.25..0.50 ms within one
sweep (h200-v17-holdout): 0.3. A parameter not named here has no prior unless ``--prior``
gives one."""
ANALYTIC_PRIORS = ("host",)
"""The :data:`PRIOR_SD` entries ``--prior default`` keeps on an analytic profile
(:func:`parse_prior`): the host's; its GPU factors are the runs' alone."""
NOISE_SEEDS = 4
"""Seeds simulated at the profile (at least; ``--seeds`` when more) for each case's seed
scatter (:func:`seed_scatter`), when a prior weighs the residuals: three degrees of freedom a
case, pooled over the cases. The first ``--seeds`` of them are the profile's prediction."""
PRIOR_HELD_SD = 2.0
"""An unidentified factor within this many prior standard deviations of the profile is
reported as held by the prior (:meth:`FitResult.identifiability`); further out, the runs
moved it."""
NOISE_FLOOR = 1e-3
"""Smallest per-metric noise (log units) :func:`metric_noise` returns: a bench_serving
line's millisecond figures carry three decimals, 0.1 % of a 1 ms ITL."""
EFFICIENCY_PREFIX = "analytic.efficiency."
"""Parameters ``analytic.efficiency.<name>`` multiply an analytic profile's efficiency factor
and rebuild its grids from it."""
SCAN_SD = 2.5
"""Half-width of the start scan (:func:`fit`) in prior standard deviations: a factor the prior
makes e^-3 as probable as the profile's (host, SD 0.3: x0.47..x2.12)."""
UNPINNED_SE = 2 * JAC_STEP
"""A factor whose standard error (log units) exceeds this is reported as not identified
(:meth:`FitResult.identifiability`): the runs pin it no closer than twice the fit's own
finite-difference step, the smallest change the fit resolves."""
COLLINEAR = 0.9
"""|correlation| of two factors' estimates above which the report says the runs fix only
their combination (:meth:`FitResult.identifiability`)."""
UNEXPLAINED_SE = 5.0
"""A fitted figure left this many standard errors of one run (its seed scatter) from the
measurement after the fit is named (:func:`unexplained_runs`): a normal residual exceeds 5
standard errors once in about 1.7 million; the misses a fit leaves on consistent runs stay
under it (the 8b proxy's rate sweep with an analytic profile: none named, while a repeat with
a doubled median TTFT was named at 8 and 73 standard errors; docs/measurements/h200-analytic-holdout.md)."""
SCAN_NO_PRIOR = math.log(2.5)
"""Half-width of the start scan, in log factor, of a parameter without a prior (x0.4..x2.5)."""


def scan_grid(half: float) -> np.ndarray:
    """The start scan's log factors for a parameter of half-width ``half``: an odd number
    of points (the profile's value is one) no closer together than twice :data:`JAC_STEP`,
    the local fit's reach from a point (a Jacobian step each way): a closer grid re-finds what
    the local fit from the best point sees, at one evaluation a point. Empty when no point
    but the profile's fits (the local fit sees the whole range): the GPU factors under their
    default prior (+-0.175); the host's (+-0.75) has 7 points, a parameter without a prior
    (+-0.92) 9."""
    k = int(half // (2 * JAC_STEP))
    return np.linspace(-half, half, 2 * k + 1) if k else np.zeros(0)


def _scale_node(node: Any, f: float) -> Any:
    if isinstance(node, dict) and "seconds" in node:   # a Grid: 2-D (rows of values) or 1-D
        return {**node, "seconds": [[v * f for v in row] if isinstance(row, list) else row * f
                                    for row in node["seconds"]]}
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return node * f
    return node


def _regenerate(profile: Any, eff: dict[str, float]) -> Any:
    """An analytic profile rebuilt with efficiency factors multiplied (``sim.analytic.writer.
    regenerate``); fractions of a peak are capped at their allowed maximum (1)."""
    from specsched.sim.analytic.roofline import Efficiency
    from specsched.sim.analytic.writer import regenerate
    from specsched.sim.profile import Profile

    base = (profile.analytic or {}).get("efficiency")
    if not base:
        raise ConfigError(profile.path or profile.name, "--params", next(iter(eff)),
                          "an efficiency factor needs an analytic profile (specsched profile --analytic)")
    props = {k: v for k, v in Efficiency.model_json_schema()["properties"].items()
             if v.get("type") in ("number", "integer")}  # a switch (attention_split_kv) is no factor
    new = {}
    for key, f in eff.items():
        field_name = key[len(EFFICIENCY_PREFIX):]
        if field_name not in props:
            raise ConfigError(profile.path or profile.name, "--params", key, f"allowed: {', '.join(EFFICIENCY_PREFIX + k for k in props)}")
        v = base[field_name] * f
        cap = props[field_name].get("maximum")
        v = min(v, cap) if cap is not None else v
        new[field_name] = int(round(v)) if props[field_name].get("type") == "integer" else v
    return Profile.model_validate({**regenerate(profile, **new), "path": profile.path})


def scale_profile(profile: Any, factors: dict[str, float]) -> Any:
    """A copy of ``profile`` with each parameter's values multiplied by its factor.

    Args:
        profile: a ``sim.profile.Profile``.
        factors: parameter name (a :data:`GROUPS` key or a dotted profile key) -> multiplier.

    Raises:
        ConfigError: a parameter that names no numeric or grid value of the profile.
    """
    from specsched.sim.profile import Profile

    eff = {k: f for k, f in factors.items() if k.startswith(EFFICIENCY_PREFIX)}
    if eff:
        profile = _regenerate(profile, eff)
    data = profile.model_dump(mode="json")
    for name, f in factors.items():
        if name in eff:
            continue
        paths = GROUPS.get(name, (name,))
        hit = False
        for dotted in paths:
            parent, keys = data, dotted.split(".")
            for k in keys[:-1]:
                parent = parent.get(k) if isinstance(parent, dict) else None
                if parent is None:
                    break
            if not isinstance(parent, dict) or parent.get(keys[-1]) is None:
                continue
            new = _scale_node(parent[keys[-1]], f)
            hit = hit or new is not parent[keys[-1]]
            parent[keys[-1]] = new
        if not hit:
            raise ConfigError(profile.path or profile.name, "--params", name,
                              f"no numeric or grid value to scale; groups: {', '.join(GROUPS)} or a dotted profile key")
    return Profile.model_validate(data)


def refuse_decode_via_verify(params: Sequence[str], profile: Any, cases: list[FitCase]) -> None:
    """Refuse a ``decode`` factor fitted to runs that decode plainly on a profile with no
    ``gpu.decode``.

    Such a profile prices each plain decode step as a verify of window 1 on its
    ``gpu.verify`` (sim/cost_model.py ``CostModel.decode_via_verify``): a profile fitted on
    speculative runs only, such as the MI355X reference's. The ``decode`` group scales
    ``gpu.verify`` and ``gpu.draft_step`` (there is no decode grid to scale), so plain runs
    would move every speculative prediction of the profile by what a plain decode step
    measured, and the verify's own sampling and acceptance work, which the window-1 price
    keeps, would be fitted into the verify grid. A dotted key the user names (``gpu.verify``)
    is theirs to scale and is not refused.

    Raises:
        ConfigError: ``decode`` is among ``params``, the profile has a ``gpu.verify`` but no
            ``gpu.decode``, and a case's server runs no speculative decoding (the first such
            run is named).
    """
    g = profile.gpu
    if "decode" not in params or g.decode is not None or g.verify is None:
        return
    plain = [c for c in cases if not c.scenario.server.speculative_algorithm.enabled]
    if not plain:
        return
    raise ConfigError(profile.path or profile.name, "--params", "decode",
                      f"the profile has no gpu.decode, so the plain decode of {plain[0].run.source}"
                      f"{f' and {len(plain) - 1} other run(s)' if len(plain) > 1 else ''} is priced from its "
                      "gpu.verify at window 1, and a decode factor would rescale gpu.verify and every speculative "
                      "prediction with it: time decode steps (specsched profile) and give them as gpu.decode, fit "
                      "without decode (--params prefill,host), or fit speculative runs")


@dataclass
class FitCase:
    """One measured run and the scenario that reproduces it."""

    run: Any          # sim.bench_serving.BenchRun
    scenario: Any     # sim.config.Scenario

    @property
    def label(self) -> str:
        """The run as the fit's table names it: ``FILE:LINE`` without its folders, or for the
        bench_serving.jsonl of a results directory (every run's line has that name)
        ``<scenario>/<run>/bench_serving.jsonl:LINE``."""
        file, _, line = self.run.source.rpartition(":")
        path = Path(file)
        if path.name == "bench_serving.jsonl" and (path.parent / "summary.json").is_file():
            return f"{path.parent.parent.absolute().name}/{path.parent.name}/{path.name}:{line}"
        return f"{input_name(path)}:{line}"


def input_name(path: str | Path, line: int | None = None) -> str:
    """An input of the fit as its report and the fitted profile's provenance name it: the
    file's name without its folders (``runs.jsonl``, ``runs.jsonl:3`` with ``line``), or, for
    a stream, the path it was read from, as the reader's warnings and refusals name it: the
    standard input (``-``, :data:`sim.bench_serving.STDIN`) is ``/dev/stdin``, a process
    substitution ``/dev/fd/63``; their last part (``-``, ``stdin``, ``63``) names nothing the
    user gave."""
    from specsched.sim.bench_serving import STDIN_PATH
    from specsched.sim.input_files import is_stream

    p = Path(path)
    name = str(p) if p == STDIN_PATH or is_stream(p) else p.name
    return name if line is None else f"{name}:{line}"


def input_names(specs: Sequence[str | Path]) -> list[str]:
    """:func:`input_name` of each of ``specs`` (``FILE[:LINE]``), where two would read alike
    (``r4/bench_serving.jsonl`` and ``r8/bench_serving.jsonl``: every results directory's line has
    that name) with as many of their folders as tell them apart: the provenance named both
    ``bench_serving.jsonl``."""
    from specsched.sim.bench_serving import split_spec

    items = [split_spec(s) for s in specs]
    depth = [1] * len(items)

    def named(p: Path, line: int | None, d: int) -> str:
        if d == 1:
            return input_name(p, line)
        text = "/".join(p.absolute().parts[-d:])
        return text if line is None else f"{text}:{line}"

    names = [named(p, line, d) for (p, line), d in zip(items, depth, strict=True)]
    for _ in range(16):
        alike = {n for n in names if names.count(n) > 1}
        if not alike:
            break
        depth = [d + 1 if n in alike else d for n, d in zip(names, depth, strict=True)]
        names = [named(p, line, d) for (p, line), d in zip(items, depth, strict=True)]
    return names


ARRIVALS = ("auto", "rate", "details")
"""How a fit case's arrivals are made: ``details`` replays the run's own send times (the
line's ``start_times``), ``rate`` draws new ones at its request rate, ``auto`` replays where
the line has send times and draws otherwise."""


def replays(run: Any, arrivals: str = "auto") -> bool:
    """Whether a case for ``run`` replays the run's own arrivals (:data:`ARRIVALS`). An
    agentic-trace line never does under ``auto``: it is rebuilt from its trace, conversation
    by conversation (its send times are turns that wait for the previous turn's reply)."""
    from specsched.analysis.from_bench import AGENTIC_DATASET

    if run.args.get("dataset_name") == AGENTIC_DATASET:
        return arrivals == "details"   # refused by scenario_from_bench, in one line
    has = run.details is not None and run.details.start_s is not None
    return arrivals == "details" or (arrivals == "auto" and has and not closed_loop_sends(run))


def closed_loop_sends(run: Any) -> bool:
    """Whether ``run``'s send times are its own server's replies rather than arrivals: a
    concurrency run (``request_rate`` inf with ``max_concurrency`` C) sends a request when a
    slot frees, i.e. when an earlier one finishes (bench_serving ``benchmark``: every request
    is created at once at rate inf and waits on the ``max_concurrency`` semaphore), and its
    line has no ``queue_times`` to take that wait off (vLLM 0.30 on writes them; arrival =
    send - wait: :func:`analysis.from_bench._trace_workload`). Replayed as arrivals, such send
    times carry the measured server's speed into every prediction: a faster profile still
    gets each request no sooner than the measured server freed its slot, so its output tok/s
    cannot rise above the measured one's (the 8b proxy's analytic profile on a concurrency-8
    run: decode x0.8 moved output tok/s +3.5 % replayed, +20 % as the closed loop;
    docs/measurements/h200-analytic-holdout.md). Such a line is fitted as the closed loop
    it was (``auto``); ``--arrivals details`` still replays it."""
    rate = run.args.get("request_rate")
    queued = run.extra.get("queue_times")
    return (isinstance(rate, float) and math.isinf(rate) and bool(run.args.get("max_concurrency"))
            and not (isinstance(queued, list) and run.details is not None and run.details.start_s is not None
                     and len(queued) == len(run.details.start_s)))


def cases_from_runs(runs: Sequence[Any], profile: str, template: str | None, workdir: Path,
                    arrivals: str = "auto", agentic: dict[str, Any] | None = None,
                    overrides: Sequence[str] = ()) -> list[FitCase]:
    """Scenarios for bench_serving runs (length histograms or traces, where needed, go to
    ``workdir``).

    A run whose line has send times (``start_times``: ``vllm bench serve --save-detailed``,
    and specsched's own lines) is replayed with those arrivals and its measured lengths
    (``arrivals`` ``auto`` or ``details``): near saturation the median TTFT of a run of a few
    hundred requests depends on the particular arrival draw as much as on the server (the
    hold-out in docs/real-servers.md), and the fit should not explain one draw's luck with a
    cost factor. Lines without send times (SGLang's) get arrivals drawn at their rate, and a
    concurrency run whose send times are slot releases (:func:`closed_loop_sends`) is the
    closed loop it was.
    ``agentic`` (``dataset_path``, ``dataset_offset``, ``agentic_max_turns``,
    ``num_conversations``) is passed to every agentic-trace line, whose trace bench_serving
    does not write into the line. ``overrides`` (``"key=value"``, analysis.overrides) are
    applied to every run's scenario: what the measured server ran with that neither the line
    nor the template says (e.g. ``server.cuda_graph_bs`` of a server that captured other
    graph sizes than SGLang's default list).

    Raises:
        ConfigError: ``arrivals`` is ``details`` and a line has no send times, or a line
            cannot be turned into a scenario (:func:`analysis.from_bench.scenario_from_bench`).
    """
    from specsched.analysis.from_bench import (
        TRACE_OPTIONS,
        scenario_from_bench,
        trace_option_datasets,
        trace_options_for,
        write_scenario,
    )
    from specsched.analysis.overrides import load_scenario_with_overrides

    agentic = agentic or {}
    for k, v in agentic.items():   # each line takes the options of its own dataset; one no line takes is refused
        if v is not None and runs and not any(r.args.get("dataset_name") in trace_option_datasets(k) for r in runs):
            names = sorted({str(r.args.get("dataset_name", "<missing>")) for r in runs})
            raise ConfigError("<command line>", TRACE_OPTIONS[k], v, "applies to a line with dataset_name "
                              f"{' or '.join(map(repr, trace_option_datasets(k)))} (the runs' are "
                              f"{', '.join(map(repr, names))})")
    out = []
    for i, run in enumerate(runs):
        mode = "details" if replays(run, arrivals) else "rate"
        sc, tables = scenario_from_bench(run, profile, template=template, name=f"fit{i}", arrivals=mode,
                                         **trace_options_for(run, agentic), state_with="--scenario-template")
        path = write_scenario(sc, tables, workdir / f"fit{i}.yaml")[0]
        out.append(FitCase(run, load_scenario_with_overrides(path, overrides=overrides)))
    return out


PIN_TOLERANCE = 0.002
"""How close (relative) the simulated accept length must come to the line's before
:func:`pin_acceptance` stops adjusting: well under one seed's scatter of it (~1-2 % for a
run of 128 requests), so what is left moves no fitted factor."""


def pin_acceptance(cases: Sequence[FitCase], profile: Any, seeds: int,
                   max_steps: int = 3) -> tuple[list[FitCase], list[str]]:
    """The cases with each speculative scenario's ``acceptance.mean_accept_length`` set so that
    its simulated runs accept what the line measured, and one note per case changed.

    A line's ``accept_length`` is an observation of the run (SGLang: /server_info's
    ``avg_spec_accept_length``, accepted tokens over verify rows, internal_state.py
    ``_average_accept_length``), not a speed, and a fit that left it at the template's
    value moved the speed factors to make up the difference: on a Poisson sweep of the 8b
    proxy with speculation (docs/measurements/h100-v55-spec-holdout) the template's 3.239
    accepted 3.18 in the seed mean against the runs' 3.122, the fit slowed decode by 3 % to
    match their throughput, and that carried the knee's median TTFT to +13.6 %. The
    scenario's mean is over requests' own means, and the reported figure weights each
    request by its verifies and cuts each request's last verify at its output length
    (sim/acceptance_config.py), so the mean that reproduces a measured figure is solved
    for: each step scales the mean by measured / simulated (the seed mean at ``profile``,
    the same seeds the fit uses), at most ``max_steps`` steps, until within
    :data:`PIN_TOLERANCE`. Acceptance draws do not depend on timing, so the result holds at
    every factor the fit tries. Cases without a measured accept length, without a drafter,
    or whose acceptance is given as per-position rates or a histogram are returned as they
    are (those state their own shape; only a mean has one number to solve)."""
    from specsched.analysis.from_bench import _accept_length
    from specsched.sim.config import with_value

    out, notes = [], []
    for case in cases:
        measured = _accept_length(case.run)
        sc = case.scenario
        nominal = sc.acceptance.mean_accept_length
        if measured is None or nominal is None or not sc.server.speculative_algorithm.enabled:
            out.append(case)
            continue
        window = float(sc.server.spec_window)
        start, simulated = nominal, None
        for step in range(max_steps + 1):
            simulated = predict(case, profile, seeds).get("accept_length")
            if (not isinstance(simulated, (int, float)) or not simulated > 0
                    or abs(simulated / measured - 1) <= PIN_TOLERANCE or step == max_steps):
                break
            solved = min(max(nominal * measured / simulated, 1.0), window)
            if solved == nominal:   # at a bound already: no mean accepts the measured figure
                break
            nominal = solved
            case = FitCase(case.run, with_value(sc, "acceptance.mean_accept_length", nominal))
        if nominal != start:
            notes.append(f"{case.label}: acceptance.mean_accept_length {start:.3f} -> {nominal:.3f}, so that the "
                         f"simulated runs accept the line's measured {measured:.3f} (simulated {simulated:.3f}; "
                         "a mean over requests, which the verify-weighted figure SGLang reports sits below)")
        out.append(case)
    return out, notes


def refuse_template_speculation(cases: Sequence[FitCase], template: str | None) -> None:
    """Refuse a fit whose ``--scenario-template`` contradicts what a line says of speculative
    decoding (:func:`analysis.from_bench.speculation_mismatch`): a template without a drafter
    for a run whose server drafted (an accept length above 1, a drafter in server_info), or
    one with a drafter for a run whose server_info says none ran. Such a fit is refused, not
    warned of: every factor is fitted to close the gap, so the drafter's speedup (or a
    verify's cost the server never paid) goes into the decode factor, and the profile written
    is wrong for the template's server and the run's alike; a warning beside a profile that
    is then used elsewhere is easily lost. ``scenario from-bench`` and ``validate`` only
    predict, so they warn instead. A line that does not say (a null accept length and no
    server_info's speculative_algorithm) is fitted with the template's.

    Raises:
        ConfigError: naming the first such line, its key and value.
    """
    from specsched.analysis.from_bench import line_speculation, speculation_mismatch

    if template is None:
        return
    name = Path(template).name
    for c in cases:
        if speculation_mismatch(c.run, c.scenario.server, c.scenario.acceptance, "") is None:
            continue
        said, key, value = line_speculation(c.run)
        if said:
            why = (f"the line's server decoded speculatively, but --scenario-template {name} runs no drafter: the fit "
                   "would take the drafter's speedup into its decode factor and write a profile wrong for both servers; "
                   "give a template with the server's drafter and acceptance (server.speculative_algorithm, "
                   "acceptance), or leave --scenario-template out (the drafter is then assumed from the line)")
        else:
            why = (f"the line's server ran no drafter, but --scenario-template {name} runs speculative_algorithm "
                   f"{c.scenario.server.speculative_algorithm.value!r}: the fit would take the verify's cost, which the "
                   "server never paid, into its factors; give a template without a drafter, or leave this line out")
        raise ConfigError(c.run.source, key, value, why)


def predict_seed(case: FitCase, profile: Any, k: int) -> dict[str, Any]:
    """The bench_serving metrics of ``case``'s scenario under ``profile`` at seed
    ``case.scenario.seed + k``; the ITL one gap per streamed chunk when the run's client
    records it so (:func:`sim.bench_serving.itl_per_chunk`), and the peak output tokens per
    second one token per chunk when its raw ITLs are per chunk
    (:func:`sim.bench_serving.details_itl_per_chunk`); requests the server rejected
    and aborted counted as the run's client counts them (:func:`sim.bench_serving.client_counting`)."""
    from specsched.sim.bench_serving import (
        client_counting,
        client_record,
        details_itl_per_chunk,
        itl_per_chunk,
    )
    from specsched.sim.engine import run_scenario

    run = run_scenario(case.scenario, seed=case.scenario.seed + k, profile=profile, warn=False)
    _keep_range_notes(run.extra["range_notes"])
    return client_record(run, itl_per_chunk(case.run), details_itl_per_chunk(case.run),
                         client_counting(case.run))


_RANGE_NOTES: list[Any] = []
"""Where this process's simulations left their profile's grids (sim/grid_range.py notes),
merged: a fit simulates every case at every evaluation, and each simulation's range warning
written as it ended said the same line once a simulation. The command writes them once
(:func:`take_range_notes`)."""


def _keep_range_notes(notes: Sequence[Any]) -> None:
    from specsched.sim.grid_range import merged

    _RANGE_NOTES[:] = merged([*_RANGE_NOTES, *notes])


def take_range_notes() -> list[Any]:
    """The range notes the simulations of this process (and of its fit's worker processes,
    handed back with their records) kept since the last call, merged; the store is emptied."""
    notes, _RANGE_NOTES[:] = list(_RANGE_NOTES), []
    return notes


def predict_seeds(case: FitCase, profile: Any, seeds: int) -> list[dict[str, Any]]:
    """Per seed k < ``seeds``, :func:`predict_seed`."""
    return [predict_seed(case, profile, k) for k in range(seeds)]


def predict(case: FitCase, profile: Any, seeds: int) -> dict[str, Any]:
    """Seed-mean bench_serving metrics of ``case``'s scenario under ``profile``
    (:func:`predict_seeds`)."""
    from specsched.analysis.bench_cli import mean_summary

    return mean_summary(predict_seeds(case, profile, seeds))


def seed_scatter(per_case: Sequence[Sequence[dict[str, Any]]], metrics: Sequence[str]) -> dict[str, float]:
    """Per metric, the standard deviation of the log of one run's figure over seeds, pooled
    over the cases whose seeds differ (``per_case[i]``: case i's per-seed records,
    :func:`predict_seeds`); a metric no case scatters is left out. What the server's own randomness (acceptance
    draws; arrivals and lengths where a case draws them) moves one run's figure by, with the
    case's arrivals and lengths held as the fit holds them."""
    out = {}
    for m in metrics:
        ss, dof = 0.0, 0
        for recs in per_case:
            v = np.array([math.log(r[m]) for r in recs
                          if isinstance(r.get(m), (int, float)) and r[m] > 0 and math.isfinite(r[m])])
            # a case whose seeds agree draws nothing (plain decoding of replayed arrivals):
            # it says nothing of the scatter, and pooled in, its zero spread with its
            # degrees of freedom shrank the others' (half the cases: by sqrt(2))
            if len(v) > 1 and np.ptp(v) > 0:
                ss += float(((v - v.mean()) ** 2).sum())
                dof += len(v) - 1
        if dof:
            out[m] = math.sqrt(ss / dof)
    return out


def residual_noise(measured_sd: dict[str, float], scatter: dict[str, float], seeds: int,
                   metrics: Sequence[str]) -> dict[str, float]:
    """Per metric, the standard error (log units) of a residual log(predicted / measured):
    the measured figure's (one run: the spread between runs at one load where
    ``measured_sd`` has it, :func:`metric_noise`, else one run's seed scatter, ``scatter``,
    at least the figure's spread between repeats on one machine, :data:`RUN_TO_RUN_NOISE`)
    and the prediction's (a mean over ``seeds`` seeds: scatter / sqrt(seeds)) in
    quadrature; at least :data:`NOISE_FLOOR`. Neither depends on how far the profile is
    from the runs: a residual 10 times its standard error is a miss to fit, whatever its
    size."""
    out = {}
    for m in metrics:
        sd = scatter.get(m, 0.0)
        # one run's figure also moves between repeats of the same requests on the same
        # machine, which no seed scatter holds (run_to_run_noise)
        single = measured_sd.get(m, max(sd, run_to_run_noise(m)))
        out[m] = max(math.sqrt(single ** 2 + sd ** 2 / max(seeds, 1)), NOISE_FLOOR)
    return out


RUN_TO_RUN_NOISE = {"median_ttft_ms": 0.060, "ttft_ms": 0.008, "tpot_ms": 0.012, "itl_ms": 0.008,
                    "throughput": 0.006, "verify_cycles_per_s": 0.004}
"""Standard deviation (log units) of one measured run's figure between repeats of the same
requests (same cell, seed and machine), per kind of figure: measured on an H200, the
runtime's 8B proxy, docs/measurements/h200-v42 c1 and c2 (sharegpt-lengths and gamma-bursty,
base and host_block arms: 4 pairs each, RMS of the pair's log difference over sqrt 2). A
median TTFT moves most: it falls between the few requests whose first token waits on the
host or on a long prompt (5.7-13 % between the pairs); means, tails, TPOT, ITL and
throughputs 0.4-1.2 %. The seed scatter of a simulated run holds none of it (the same seed
gives the same requests), so a fit that took it as one run's noise weighed a closed loop's
median TTFT 30 times its ITL (:func:`residual_noise`)."""


def run_to_run_noise(metric: str) -> float:
    """:data:`RUN_TO_RUN_NOISE` of a bench_serving metric: its own entry, else its kind's (the
    latency after the statistic's prefix, any throughput), else 0."""
    if metric in RUN_TO_RUN_NOISE:
        return RUN_TO_RUN_NOISE[metric]
    if metric.endswith("throughput"):
        return RUN_TO_RUN_NOISE["throughput"]
    kind = metric.split("_", 1)[1] if "_" in metric else metric
    return RUN_TO_RUN_NOISE.get(kind, 0.0)


def decode_step_seconds(profile: Any, server: Any, batch: int, context: float) -> float:
    """Predicted wall seconds of one decode/verify step of ``batch`` requests at mean
    ``context`` tokens: GPU time, and the host's per-step work overlapped with it when the
    overlap scheduler is on (max of the two; a verify step's schedule and launch wait for the
    previous forward under the host-blocking publish wait, so only its result processing
    overlaps), added to it when off. An approximation of the
    loop's timing for comparing with the log's steady decode throughput
    (:class:`DecodeStepPricer`, which prices many steps on one cost model)."""
    pricer = DecodeStepPricer(profile, server)
    return pricer.seconds(*pricer.shape(batch, context))


class DecodeStepPricer:
    """Prices decode/verify steps of ``server`` under ``profile`` (:func:`decode_step_seconds`)
    on one cost model, and says which steps cost the same (:meth:`price_key`), so that a
    server log's samples are priced once per distinct step (:func:`_log_residuals`).

    A step is its shape (:meth:`shape`): ``b`` requests whose contexts sum to ``ctx_sum``
    tokens, held by the first request (as the log gives only the mean). Its price is a function
    of the shape, the profile and the server only."""

    def __init__(self, profile: Any, server: Any) -> None:
        from specsched.sim.cost_model import CostModel
        from specsched.sim.plan import ForwardMode

        self.server = server
        self.mode = ForwardMode.VERIFY if server.speculative_algorithm.enabled else ForwardMode.DECODE
        self.dp = server.dp_size if server.enable_dp_attention and server.dp_size > 1 else 1
        if self.dp > 1:
            # DP attention: each rank logs its own batch, and every rank's step is one lock-step
            # forward of the group (sim/dp_attention.py DPCost): the ranks taken as alike
            from specsched.sim.dp_attention import DPCost, rank_server_args

            self.cost: Any = DPCost(CostModel(profile, rank_server_args(server)), profile.gpu.dp_attention_sync_s,
                                    server.dp_size)
        else:
            self.cost = CostModel(profile, server)

    @staticmethod
    def shape(batch: float, context: float) -> tuple[int, int]:
        """(requests, their summed context in tokens) of a step of ``batch`` requests (rounded,
        at least 1) at mean ``context`` tokens."""
        b = max(int(round(batch)), 1)
        return b, int(context * b)

    def seconds(self, b: int, ctx_sum: int) -> float:
        """Wall seconds of the step of shape (``b``, ``ctx_sum``) (:func:`decode_step_seconds`)."""
        from specsched.sim.plan import BatchPlan, ForwardMode
        from specsched.sim.server_args import SyncMode

        w = self.server.spec_window
        plan = BatchPlan(step=0, mode=self.mode, rids=tuple(range(b)), extend_lens=(w,) * b,
                         prefix_lens=(ctx_sum,) + (0,) * (b - 1), spec_window=w)
        if self.dp > 1:
            from specsched.sim.dp_attention import GroupPlan

            plan = GroupPlan(step=0, parts=(plan,) * self.dp)
        gpu = self.cost.gpu(plan, "main").total_s
        pre = self.cost.host("schedule", plan) + self.cost.host("launch", plan)
        post = self.cost.host("process", plan)
        if not self.server.enable_overlap_schedule:
            return gpu + pre + post
        if self.mode is ForwardMode.VERIFY and self.server.sync_mode is SyncMode.host_block:
            # a verify batch's host blocks on the previous forward's publish event before it
            # schedules and launches the next (sim/loop.py _publish_wait: SGLang 0.5.23
            # managers/overlap_utils.py FutureMap.resolve_seq_lens_cpu); only the previous
            # batch's result processing overlaps the forward. Priced as max(gpu, host) such a
            # step read the launch's 0.5 ms short (h200-1b, DSpark window 4: 3.28 for 3.80 ms)
            return pre + max(gpu, post)
        return max(gpu, pre + post)

    def price_key(self, b: int, ctx_sum: int) -> tuple[Any, ...]:
        """A key two step shapes share only where :meth:`seconds` gives both the same price.

        On one server (no DP attention) a decode/verify plan's GPU time is
        ``CostModel.step_at(b, column)`` with ``column`` = ``CostModel.step_column(b, ctx_sum /
        b, longest)`` (sim/cost_model.py ``_decode`` -> ``step_s``: the grid's context column,
        the mean context rounded to 10 tokens; under ``padded_max`` attention from the
        longest request's context, here ``ctx_sum``) and no cross-queue penalty, and its host
        terms depend on ``b`` alone (``CostModel.host``): the key is (``b``, ``column``).
        Under DP attention the group's forward reads its own column (``DPCost``): the key is
        the shape itself."""
        if self.dp > 1:
            return b, ctx_sum
        return b, self.cost.step_column(b, ctx_sum / b, ctx_sum if self.cost.padded_attention else None)


@dataclass
class FitResult:
    """Factors found, the profile with them, per-run predictions before and after."""

    factors: dict[str, float]
    profile: Any
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    loss_before: float
    loss_after: float
    evals: int
    log_before: float | None = None
    log_after: float | None = None
    history: list[float] = field(default_factory=list)
    prior_sd: dict[str, float] = field(default_factory=dict)
    """The prior's standard deviation of each log factor (empty: no prior)."""
    noise: dict[str, float] = field(default_factory=dict)
    """Each metric's noise (log units) its residuals were divided by (empty: unweighted)."""
    sampled: list[str] = field(default_factory=list)
    """``RUN:LINE metric SE`` of each residual divided by its run's own sampling noise instead,
    being wider than the metric's (:func:`sampling_se`)."""
    cov: np.ndarray | None = None
    """Covariance of the log factors (params x params, the order of ``factors``): the
    residuals' scatter left at the solution, s^2 = sum(r^2) / (n - p), times (J^T J)^-1 with J
    the fit's Jacobian there; None when there are no more residuals than parameters."""
    figures: int | None = None
    """Fitted figures (residuals, the server log's steps included; the prior's not)."""
    log_only: bool = False
    """Fitted to server logs alone (:func:`analysis.calibrate_log.fit_log`): the fitted figures
    are the logs' pure-decode steps, not runs (:meth:`identifiability` asks for more of those)."""
    unexplained: list[str] = field(default_factory=list)
    """Lines naming fitted figures left far outside one run's randomness (:func:`unexplained_runs`)."""
    max_evals: int | None = None
    """The cap on evaluations the fit ran under (``--max-evals``)."""
    capped: str = ""
    """What the cap on evaluations stopped: "" (nothing), ``"fit"`` (the search: the factors are
    the best point evaluated, not a converged fit), ``"interrupted"`` (Ctrl-C or SIGTERM during
    an evaluation: the same, and no standard errors) or ``"covariance"`` (only the Jacobian at
    the fit that the standard errors need: :attr:`cov` is None)."""
    interrupted_by: str = "Ctrl-C"
    """What interrupted the fit, when :attr:`capped` is ``"interrupted"``: ``"Ctrl-C"`` or a
    signal's name (``"SIGTERM"``: :func:`sigterm_interrupts`)."""
    objective_before: float | None = None
    objective_after: float | None = None
    """With a prior: the objective the fit lowers (each residual over its metric's standard
    error, plus the prior's terms) at the profile and at the fit. :attr:`loss_before` and
    :attr:`loss_after` are the plain squared log errors, which such a fit may raise (a run
    with a wide standard error traded for one with a narrow one, or the prior holding a
    factor back): reported alone, "loss 16.2 -> 16.23" read as a fit that made things worse."""

    def loss_text(self) -> str:
        """``loss A -> B`` for the report and the provenance, with the weighted objective
        beside it when the fit had a prior."""
        text = f"loss {self.loss_before:.4g} -> {self.loss_after:.4g}"
        if self.objective_before is not None and self.objective_after is not None:
            text += (f" (squared log errors; the weighted objective the fit lowers, errors over their standard errors "
                     f"plus the prior: {self.objective_before:.4g} -> {self.objective_after:.4g})")
        return text

    def stopped(self) -> list[str]:
        """The line saying that the cap on evaluations stopped the fit (or its standard
        errors), for the report and the fitted profile's provenance; empty when it did not."""
        if self.capped == "fit":
            return [f"stopped by --max-evals {self.max_evals}: the cap on evaluations was reached before the fit "
                    f"converged; the factors are the best of the {self.evals} point(s) evaluated (raise --max-evals to "
                    "finish it)"]
        if self.capped == "interrupted":
            return [f"interrupted ({self.interrupted_by}) after {self.evals} evaluation(s): the factors are the best point "
                    "evaluated, not a converged fit, and have no standard errors (run again to finish it)"]
        if self.capped == "covariance":
            return [f"no standard errors: the fit converged, but the Jacobian there needs more evaluations than "
                    f"--max-evals {self.max_evals} left (raise --max-evals for them)"]
        return []

    def weighting(self) -> str:
        """How the fit weighed the runs against the profile, for the report and the fitted
        profile's provenance: the prior's standard deviations and each metric's noise, or
        ``no prior``."""
        if not self.prior_sd:
            return "no prior"
        return ("prior (log-factor standard deviations) " + ", ".join(f"{k} {v:g}" for k, v in self.prior_sd.items())
                + "; residuals divided by each metric's standard error (log units) "
                + ", ".join(f"{k} {v:.4f}" for k, v in self.noise.items())
                + ("; by their run's own sampling error where it is wider (one run's requests as a sample: "
                   + ", ".join(self.sampled) + ")" if self.sampled else ""))

    def factor_se_pct(self) -> dict[str, float]:
        """Standard error of each factor, % (of the log factor: ~relative), from :attr:`cov`;
        empty without it. Large = the runs do not pin that parameter down."""
        if self.cov is None:
            return {}
        return {k: 100.0 * math.sqrt(max(float(self.cov[i, i]), 0.0)) for i, k in enumerate(self.factors)}   # inf: unmoved

    def factors_text(self) -> str:
        """The fitted factors as the report and the written profile's provenance give them:
        ``prefill x1.0370 (+-12.4 %), ...``. A factor no fitted figure moves has no finite
        standard error: ``(+-n/a: no fitted figure moves it)`` (it read "+-inf %")."""
        se = self.factor_se_pct()

        def one(k: str, v: float) -> str:
            if k not in se:
                return f"{k} x{v:.4f}"
            if not math.isfinite(se[k]):
                return f"{k} x{v:.4f} (+-n/a: no fitted figure moves it)"
            return f"{k} x{v:.4f} (+-{se[k]:.1f} %)"

        return ", ".join(one(k, v) for k, v in self.factors.items())

    def correlation(self) -> np.ndarray | None:
        """Correlation of the log factors' estimates (:attr:`cov` scaled to unit diagonal); a
        parameter the runs do not move has none (nan). None without :attr:`cov`."""
        if self.cov is None:
            return None
        d = np.sqrt(np.where(np.isfinite(np.diag(self.cov)) & (np.diag(self.cov) > 0), np.diag(self.cov), np.nan))
        with np.errstate(invalid="ignore"):
            return self.cov / np.outer(d, d)

    def _held(self, k: str) -> str:
        """What set an unidentified factor ``k``, for :meth:`identifiability`: the prior
        (within :data:`PRIOR_HELD_SD` of its standard deviations of the profile), or, when
        the fit moved it further, that the runs did, with the noise their residuals were
        weighed by: residuals of deterministic predictions (plain decoding of replayed
        arrivals) with no repeated load have only :data:`NOISE_FLOOR` as their noise, which
        leaves the prior no weight, and the factor lands wherever the search left it."""
        if k not in self.prior_sd:
            return ""
        sds = abs(math.log(self.factors[k])) / self.prior_sd[k]
        if sds <= PRIOR_HELD_SD:
            return " (the prior held it)"
        floor = sorted(m for m, v in self.noise.items() if v <= NOISE_FLOOR)
        why = (f"the residuals of {', '.join(floor)} are weighed at the {NOISE_FLOOR:g} noise floor (no seed "
               "scatter, no repeated load), which leaves the prior no weight; repeat a load, or leave "
               f"{k} out of --params"
               if floor else "the runs outweighed the prior")
        return f" (x{self.factors[k]:.3g}, {sds:.1f} prior standard deviations from the profile: {why})"

    def identifiability(self) -> list[str]:
        """One line per thing the runs could not tell apart, for the report and the written
        profile's provenance (empty: every factor pinned):

        - no covariance (as many fitted figures as factors, or fewer: :attr:`figures`):
          nothing is left to tell how well any factor is pinned (the line asks for runs at
          more loads, or, :attr:`log_only`, for more of the log's decode lines);
        - a factor whose standard error exceeds :data:`UNPINNED_SE`, or that no fitted
          figure moves: the runs leave it free (with a prior, the prior set it);
        - two factors whose estimates correlate beyond :data:`COLLINEAR`: the runs move
          them alike and fix only a combination (a light-load TTFT is an extend's GPU time
          plus its host issue: ``prefill`` against ``host``), so the split between them is
          the start's or the prior's, and loads where the two act differently (saturation)
          are predicted with a split the runs never saw."""
        names = list(self.factors)
        if self.cov is None and self.capped and (self.figures or 0) > len(names):
            return []   # the cap, not the runs, left no covariance: :meth:`stopped` says so
        if self.cov is None:
            have = f"{self.figures} fitted figure(s)" if self.figures is not None else "no more fitted figures than factors"
            more = ("give a log with more pure-decode 'Decode batch' lines (decode batches at more #running-req sizes)"
                    if self.log_only else "give runs at more loads")
            return [f"not identified: {have} for {len(names)} factor(s) ({', '.join(names)}): nothing left to judge "
                    f"how well each is pinned; {more} or fit fewer --params"]
        out = []
        se = self.factor_se_pct()
        for k in names:
            held = self._held(k)
            if math.isinf(se[k]):
                out.append(f"not identified: {k}: no fitted figure moves it{held}")
            elif se[k] > 100 * UNPINNED_SE:
                out.append(f"not identified: {k}: the runs pin it to +-{se[k]:.0f} % only{held}")
        corr = self.correlation()
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                c = corr[i, j]
                if np.isfinite(c) and abs(c) > COLLINEAR:
                    out.append(f"not separable: {names[i]} and {names[j]} move the fitted figures alike "
                               f"(correlation {c:+.2f}): the runs fix only their combination")
        return out

    def prediction_se_pct(self, elasticity: dict[str, float]) -> float | None:
        """Standard error, %, the factors' uncertainty gives a prediction whose log moves by
        ``elasticity[p]`` per unit log factor p (sqrt(g^T cov g)); None without :attr:`cov`."""
        if self.cov is None:
            return None
        g = np.array([elasticity.get(k, 0.0) for k in self.factors])
        free = np.isinf(np.diag(self.cov))
        if (g[free] != 0).any():
            return math.inf   # the figure moves with a parameter the runs do not move
        ok = ~free
        return 100.0 * math.sqrt(max(float(g[ok] @ self.cov[np.ix_(ok, ok)] @ g[ok]), 0.0))


def _terms(cases: list[FitCase], preds: list[dict[str, Any]], metrics: Sequence[str]) -> list[float]:
    out = []
    for c, p in zip(cases, preds, strict=True):
        for m in metrics:
            q, v = c.run.summary.get(m), p.get(m)
            if q and v and q > 0 and v > 0 and math.isfinite(v):
                out.append(math.log(v / q))
            elif q:
                out.append(5.0)   # a prediction that lost the metric counts as far off
    return out


def _same(a: dict[str, Any], b: dict[str, Any], metrics: Sequence[str]) -> bool:
    """Whether two predictions of a case have the same figures for ``metrics``."""
    return all(a.get(m) == b.get(m) for m in metrics)


def _term_metrics(cases: list[FitCase], metrics: Sequence[str]) -> list[str]:
    """The metric of each residual :func:`_terms` gives, in its order."""
    return [m for c in cases for m in metrics if c.run.summary.get(m)]


def sampling_se(cases: list[FitCase], metrics: Sequence[str]) -> list[tuple[str, float]]:
    """Per residual of :func:`_terms` (in its order), ``(RUN:LINE metric, standard error)``: the
    standard error in log units of the measured figure as one sample of its run's requests,
    from its 95 % interval (:func:`analysis.measured_noise.measured_intervals`:
    ``log(high / low) / (2 x 1.96)``), 0 where the run has none (no per-request details, an
    ITL or a throughput). A median TTFT that falls on a step of its run's distribution (two
    thirds of the requests hit a cached prefix and wait 34 ms, the rest 40-700 ms) moves 10-20 %
    between reruns (docs/measurements/h100-v49.md) where the metric's pooled noise says 6 %."""
    from scipy import stats
    from specsched.analysis.measured_noise import CONFIDENCE, measured_intervals

    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    out = []
    for c in cases:
        given = [m for m in metrics if c.run.summary.get(m)]
        found = measured_intervals(c.run, given)
        for m in given:
            lo, hi = found.get(m, (0.0, 0.0))
            se = math.log(hi / lo) / (2 * z) if lo > 0 and hi > lo else 0.0
            out.append((f"{c.run.source} {m}", se))
    return out


def _log_residuals(samples: Any, profile: Any, server: Any) -> np.ndarray:
    """log(predicted / logged) step seconds per sample, / sqrt(n): their squares sum to the
    mean squared log error (one term, whatever the log's length).

    Each distinct step is priced once (:meth:`DecodeStepPricer.price_key`): samples of one
    shape, or of shapes the cost model reads at the same grid column, share their price, the
    same number :func:`decode_step_seconds` gives each. A day's log (180,000 pure-decode
    samples, 16,000 distinct steps) was priced sample by sample, a cost model built for each:
    117 s an evaluation, 1 s so (docs/real-servers.md)."""
    if samples is None or len(samples) == 0:
        return np.zeros(0)
    pricer = DecodeStepPricer(profile, server)
    by_key: dict[tuple[Any, ...], float] = {}
    by_shape: dict[tuple[int, int], float] = {}
    pred = np.empty(len(samples))
    for i, (b, c) in enumerate(zip(samples["running_req"], samples["context"], strict=True)):
        shape = pricer.shape(b, c)
        price = by_shape.get(shape)
        if price is None:
            key = pricer.price_key(*shape)
            price = by_key.get(key)
            if price is None:
                price = by_key[key] = pricer.seconds(*shape)
            by_shape[shape] = price
        pred[i] = price
    return np.log(pred / samples["step_s"].to_numpy()) / math.sqrt(len(samples))


LOAD_EXTRA_KEYS = ("ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "model_id", "tokenizer_id",
                   "batch_size", "input_len", "output_len", "cache_hit_rate")
"""The workload arguments a line holds outside ``BenchRun.args`` (:func:`run_load`): vLLM's
request-rate ramp and the model and tokenizer it served (vllm/benchmarks/serve.py ``main``
writes them beside ``num_prompts``, ``request_rate``, ``burstiness`` and ``max_concurrency``);
a ``bench_one_batch_server`` line's batch and lengths (SGLang 0.5.23
benchmark/one_batch_server.py ``BenchOneCaseResult.dump_to_jsonl``) and its ``cache_hit_rate``
(the server's cached share of the case's prompt tokens, ``calculate_cache_hit_rate``), which its
``--cache-hit-rate`` warm-up sets (``_warmup_cache``): the one trace of that argument the line keeps."""


def run_load(run: Any) -> dict[str, Any]:
    """What ``run`` measured apart from its results: every argument of its line that sets the
    workload or the server, by name, None where the line does not say (missing is missing).

    ``run.args`` (:data:`sim.bench_serving.ARG_KEYS`: backend, dataset, request rate,
    concurrency, ``num_prompts`` or a one-batch line's batch size, burstiness, the dataset
    lengths and range ratio) but its ``seed`` (another draw of the same load), the workload
    arguments kept in ``run.extra`` (:data:`LOAD_EXTRA_KEYS`), the layout of a
    ``bench_one_batch_server`` line (:data:`sim.bench_serving.ONE_BATCH`), and the server: the
    SGLang 0.5.23 ``ServerArgs`` fields its ``server_info`` states, less those that cannot change
    a figure (:func:`sim.sglang_launch_args.is_inert`: ports, logging, seeds, ...; not the
    scheduler's live ``internal_states``, the ``startup_time`` or the version), each server's
    under prefill-decode disaggregation. Results, tags, dates and seeds are left out."""
    from specsched.sim.bench_serving import ARG_KEYS, ONE_BATCH

    out = {k: run.args.get(k) for k in ARG_KEYS if k != "seed"}
    out |= {k: run.extra.get(k) for k in (*LOAD_EXTRA_KEYS, ONE_BATCH)}
    out["server_info"] = _server_settings(run.extra.get("server_info"))
    return out


def _server_settings(info: Any) -> Any:
    """The server arguments a line's ``server_info`` states (:func:`run_load`); None without one."""
    from specsched.sim.sglang_launch_args import FIELDS, is_inert

    if not isinstance(info, dict):
        return None
    if isinstance(info.get("prefill"), list) or isinstance(info.get("decode"), list):   # PD: one a server
        return {role: [_server_settings(i) for i in info[role]] if isinstance(info.get(role), list) else None
                for role in ("prefill", "decode")}
    return {k: v for k, v in info.items() if k in FIELDS and not is_inert(k)}


def same_load(a: Any, b: Any) -> bool:
    """Whether runs ``a`` and ``b`` are repeats of one load: every argument :func:`run_load`
    reads equal, each by :func:`sim.sglang_launch_args.same_setting` (``8192`` is ``8192.0``;
    None only None), so a line that states an argument and one that does not are two loads."""
    return same_setting(run_load(a), run_load(b))


def metric_noise(cases: list[FitCase], metrics: Sequence[str] = FIT_METRICS) -> dict[str, float]:
    """Per metric, the spread (standard deviation of the log) of the measured figure between
    runs at one load (:func:`same_load`: repeats or other arrival draws, every argument but
    the seed equal), pooled over the loads with two runs or more; at least
    :data:`NOISE_FLOOR`. A metric with no load measured twice is left out. What one run
    of a load can differ from another: a fit should not chase a residual smaller than
    that, and a metric that scatters less (a median ITL) weighs more than one that
    scatters more (a median TTFT). Runs that differ in any other argument are no repeats:
    an input-length sweep at one concurrency, or a ``bench_one_batch_server`` batch-size
    sweep (rate inf, no concurrency), pooled as repeats of their rate and concurrency,
    made the spread between input lengths the noise (~100 % in log units) and every factor
    read as not identified."""
    loads: list[tuple[dict[str, Any], list[FitCase]]] = []   # each load (run_load) and its runs
    for c in cases:
        load = run_load(c.run)
        group = next((g for first, g in loads if same_setting(first, load)), None)
        if group is None:
            loads.append((load, [c]))
        else:
            group.append(c)
    out = {}
    for m in metrics:
        groups = [np.array([math.log(q) for c in g if (q := c.run.summary.get(m)) and q > 0]) for _, g in loads]
        groups = [v for v in groups if len(v) > 1]
        dof = sum(len(g) - 1 for g in groups)
        if dof:
            var = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / dof
            out[m] = max(math.sqrt(var), NOISE_FLOOR)
    return out


def parse_prior(text: str | None, params: Sequence[str], *, analytic: bool = False) -> dict[str, float]:
    """``--prior``: ``default`` (:data:`PRIOR_SD` for the fitted parameters it names),
    ``none``, or ``NAME=SD,...`` (standard deviations of log factors, > 0).

    ``default`` is a statement about a profile measured by microbenchmarks on the same kind
    of GPU: its GPU terms moved 0.3-7 % between machines (:data:`PRIOR_SD`). A profile written by ``specsched
    profile --analytic`` (``analytic`` True) has no such evidence for its GPU terms: they come
    from datasheet peaks and efficiency factors and were tens of percent off the measured
    H200 grids (docs/measurements/h200-analytic.md), so ``default`` puts no prior on them
    (``prefill``, ``decode``, ``analytic.efficiency.*``) and the runs alone set them. Its
    ``host`` keeps the host's prior: the host block is no roofline output but the same kind
    of per-call host cost a measured profile has (``host.yaml``), and a light-load sweep
    cannot tell it from ``prefill`` (a first token waits for the extend's GPU time and its
    host issue alike): on the 8b proxy's rate sweep the two correlated at -0.98 and the runs
    pinned the host to +-1800 %, so without a prior its factor was wherever the search
    stopped (x0.16-x0.31 between seed counts) and the held-out median TTFT moved with it;
    with it the fit's GPU factors stay where the runs put them and the hold-out went from
    10.5 to 8.5 % (5 seeds; docs/measurements/h200-analytic-holdout.md).

    Raises:
        ConfigError: a malformed entry, an SD not > 0, a name not fitted, or one given twice
            (the last SD silently won).
    """
    if text is None or text == "none":
        return {}
    if text == "default":
        kept = ANALYTIC_PRIORS if analytic else PRIOR_SD
        return {p: PRIOR_SD[p] for p in params if p in kept}
    out = {}
    for item in text.split(","):
        name, _, v = item.partition("=")
        try:
            sd = float(v)
        except ValueError:
            sd = float("nan")
        if not (sd > 0 and math.isfinite(sd)):
            raise ConfigError("<command line>", "--prior", item, "NAME=SD with SD > 0 (the log factor's prior "
                              "standard deviation), 'default' or 'none'")
        if name not in params:
            raise ConfigError("<command line>", "--prior", item, f"{name!r} is not fitted; fitted: {', '.join(params)}")
        if name in out:
            raise ConfigError("<command line>", "--prior", text, f"{name!r} is given twice; one SD per fitted factor")
        out[name] = sd
    return out


_WORKER: dict[str, Any] = {}
"""A simulation worker's state (:func:`_simulator`): the cases, the profile, the parameter
names, and the last scaled profile with its factors."""


class Terminated(KeyboardInterrupt):
    """A signal other than SIGINT (SIGTERM) received during a fit, raised where Ctrl-C raises
    KeyboardInterrupt (:func:`sigterm_interrupts`); ``args[0]`` is the signal's name."""


class _Interrupts:
    """The handler of SIGINT and SIGTERM while a fit runs (:func:`sigterm_interrupts`).

    Before the fit's first point, or while an evaluation simulates (``defer`` False), a
    signal raises at once: KeyboardInterrupt for SIGINT, :class:`Terminated` for SIGTERM, so
    that a long simulation stops now. Between evaluations (``defer`` True, set by the fit
    once it has a point to keep) it is only recorded in ``received`` and the fit stops at its
    next evaluation: raised there (in scipy's search, or while the residuals are weighed) it
    left the fit with nothing written."""

    def __init__(self) -> None:
        self.defer = False
        self.received: str | None = None

    def reset(self) -> None:
        self.defer, self.received = False, None

    def __call__(self, signum: int, _frame: Any) -> None:
        import signal

        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self.defer:
            self.received = self.received or name
            return
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(name)


_INTERRUPTS = _Interrupts()
"""The one handler a fit in this process consults (:func:`sigterm_interrupts` installs it)."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside: SIGTERM stops a fit as Ctrl-C does (:class:`_Interrupts`), so that a fit
    stopped by ``timeout``, a job scheduler's time limit or ``kill`` ends at the best point
    evaluated, said and written (:func:`fit`), instead of dying with nothing written.
    Installed in the main thread only (elsewhere nothing changes); the previous handlers are
    restored on exit. Worker processes forked inside inherit it: a SIGTERM sent to the whole
    process group ends their simulation the same way."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _INTERRUPTS.reset()
    old = {s: signal.signal(s, _INTERRUPTS) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        _INTERRUPTS.reset()


def _worker_init(cases: list[FitCase], profile: Any, params: Sequence[str]) -> None:
    import signal
    import threading

    _WORKER.update(cases=cases, profile=profile, params=list(params), factors=None, scaled=None, busy=False)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _worker_signal)


def _worker_signal(signum: int, _frame: Any) -> None:
    """SIGINT or SIGTERM in a worker process (Ctrl-C and a scheduler's SIGTERM reach the whole
    process group): a simulation running stops, raised back to the fit as the parent's own
    signal (:class:`_Interrupts`); an idle worker exits quietly (it printed a traceback from
    its queue's read)."""
    import signal

    if not _WORKER.get("busy"):
        raise SystemExit(0)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signal.Signals(signum).name)


def _worker_run(task: tuple[int, int, tuple[float, ...]]) -> tuple[dict[str, Any], list[Any]]:
    """One seed of one case under the profile scaled by ``factors`` (:func:`predict_seed`),
    with the range notes the worker kept since its last task (:func:`take_range_notes`), for
    the parent to write once."""
    i, k, factors = task
    _WORKER["busy"] = True
    try:
        if _WORKER["factors"] != factors:
            _WORKER["scaled"] = scale_profile(_WORKER["profile"], dict(zip(_WORKER["params"], factors, strict=True)))
            _WORKER["factors"] = factors
        return predict_seed(_WORKER["cases"][i], _WORKER["scaled"], k), take_range_notes()
    finally:
        _WORKER["busy"] = False


@contextlib.contextmanager
def _simulator(cases: list[FitCase], profile: Any, params: Sequence[str], jobs: int, seeds: int = 1) -> Iterator[Any]:
    """``simulate(factors, scaled profile, seeds per case)`` -> per case, its per-seed records
    (:func:`predict_seeds`): in this process, or with ``jobs`` > 1 spread over that many
    worker processes (at most the CPUs, and the simulations an evaluation of ``seeds`` a case
    runs), every (case, seed) of an evaluation at once. The same seeds and the
    same scaled profile give the same records either way (a worker scales the profile from
    the same factors)."""
    # never more workers than an evaluation has simulations (at the profile: up to
    # NOISE_SEEDS a case) nor than the machine has CPUs: a forked pool starts every worker at
    # once, and --jobs 100000 forked that many copies of this process
    import os

    jobs = min(jobs, len(cases) * max(NOISE_SEEDS, seeds), os.cpu_count() or 1)
    if jobs <= 1:
        yield lambda factors, prof, counts: [predict_seeds(c, prof, k) for c, k in zip(cases, counts, strict=True)]
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init,
                             initargs=(cases, profile, list(params))) as pool:
        def simulate(factors: tuple[float, ...], prof: Any, counts: Sequence[int]) -> list[list[dict[str, Any]]]:
            futures = [pool.submit(_worker_run, (i, k, factors)) for i, n in enumerate(counts) for k in range(n)]
            try:
                done = [f.result() for f in futures]
            except KeyboardInterrupt:   # stopped: the evaluation's queued simulations are not waited for
                for f in futures:
                    f.cancel()
                raise
            _keep_range_notes([n for _, notes in done for n in notes])
            recs = iter(rec for rec, _ in done)
            return [[next(recs) for _ in range(n)] for n in counts]

        yield simulate


def fit(cases: list[FitCase], profile: Any, params: Sequence[str], *, seeds: int = 3,
        metrics: Sequence[str] = FIT_METRICS, log_samples: Any = None, max_evals: int = 60,
        progress: Any = None, prior_sd: dict[str, float] | None = None,
        noise: dict[str, float] | None = None, jobs: int = 1) -> FitResult:
    """Least squares (:class:`analysis.factor_fit.LogFactorFit`: scipy ``least_squares``, trust
    region, forward differences of :data:`JAC_STEP` in log space) on the log factors of ``params``;
    residuals are the log ratios of predicted to measured metrics (module docstring).

    Starts: the profile, and the best point of a coarse scan (:func:`scan_grid` factors over
    +-:data:`SCAN_SD` prior standard deviations, or +-:data:`SCAN_NO_PRIOR` without a prior)
    of each parameter whose scan reaches past the local fit's, the widest first,
    each from the best so far. The fit is the lowest objective among both local fits' ends
    and their starts. Why: the objective can be flat around the profile and fall only far from
    it (a host 1.8x slower than the profile's leaves a light-load TTFT unmoved up to x1.2:
    docs/measurements/h200-v22-holdout/README.md), where a trust region from the profile sees
    no slope and stops; and it has steps (a run's decode turning host-paced moves its ITL at
    once), where a start past one cannot see a minimum just behind it.

    Args:
        cases: runs with their scenarios.
        profile: the starting profile (factors 1).
        params: parameter names (:data:`GROUPS` keys or dotted profile keys).
        seeds: seeds averaged per prediction (the same at every evaluation).
        metrics: bench_serving metrics compared (those a line lacks are skipped).
        log_samples: :func:`analysis.server_log.decode_step_samples` of a server log, or None.
        max_evals: objective evaluations allowed, a hard cap (each simulates every case x
            seeds): the start scan's, the local fits' and their Jacobians', and the Jacobian at
            the fit the standard errors need all count (scipy's ``max_nfev`` counts only the
            local fits' own). Reached, the fit is the best point evaluated
            (:attr:`FitResult.capped` says what the cap stopped).
        progress: callable(eval index, loss, factors) or None; the loss is the one the fit
            compares points by (its weighted residuals and prior terms squared; without a
            prior the residuals' own), so the lowest one reported is the best point evaluated.
        prior_sd: parameter -> standard deviation of its log factor around 1 (the
            profile's value): a Gaussian prior, one more residual log(factor) / sd per
            parameter, so the fit is the most probable factors given the runs and the
            profile (maximum a posteriori). A direction the runs do not pin down (two
            factors that move the same metric the same way) stays at the profile, and a
            shortfall goes to the parameter the prior allows to move most. None: no prior.
        jobs: worker processes the simulations of an evaluation are spread over (1: this
            process); the fit is the same.
        noise: metric -> one measured run's noise in log units (:func:`metric_noise`: the
            spread between runs at one load). With a prior each residual is divided by its
            standard error (:func:`residual_noise`: this, or where missing one run's seed
            scatter over :data:`NOISE_SEEDS` seeds at the profile, and the seed mean's), so
            the prior weighs against the runs in the same units; without one, by ``noise``
            as given (metrics missing: 1).

    Raises:
        ConfigError: a parameter the profile does not have, or whose values are all 0 there;
            ``decode`` for runs without speculative decoding on a profile with no
            ``gpu.decode`` (:func:`refuse_decode_via_verify`).
    """
    scale_profile(profile, {p: 1.0 for p in params})   # fail fast on a bad name
    refuse_decode_via_verify(params, profile, cases)
    same = profile.model_dump(mode="json")
    for p in params:   # a parameter whose every value is 0 here: no factor moves it
        if not p.startswith(EFFICIENCY_PREFIX) and scale_profile(profile, {p: 2.0}).model_dump(mode="json") == same:
            raise ConfigError(profile.path or profile.name, "--params", p,
                              "every value it scales is 0 in this profile: no factor can move it (fit another)")
    with _simulator(cases, profile, params, jobs, seeds) as simulate:
        return _fit(cases, profile, params, simulate, seeds=seeds, metrics=metrics, log_samples=log_samples,
                    max_evals=max_evals, progress=progress, prior_sd=prior_sd, noise=noise)


def _fit(cases: list[FitCase], profile: Any, params: Sequence[str], simulate: Any, *, seeds: int,
         metrics: Sequence[str], log_samples: Any, max_evals: int, progress: Any,
         prior_sd: dict[str, float] | None, noise: dict[str, float] | None) -> FitResult:
    """:func:`fit`'s work, its simulations through ``simulate`` (:func:`_simulator`)."""
    from specsched.analysis.bench_cli import mean_summary

    server = cases[0].scenario.server
    # each point's predictions and server-log residuals, by LogFactorFit.key
    predicted: dict[tuple[float, ...], tuple[list[dict[str, Any]], np.ndarray]] = {}
    # progress reports the loss the fit compares points by, which needs the residuals'
    # weights: the first evaluation, which sets them, is reported once they are known
    unreported: list[tuple[int, np.ndarray]] = []
    interrupted: list[str] = []   # Ctrl-C or SIGTERM during an evaluation: the fit ends at the best point so far

    def report(i: int, z: np.ndarray) -> None:
        if lsq.scale is None:
            unreported.append((i, z))
            return
        progress(i, lsq.loss(z), np.exp(z))

    def residuals(z: np.ndarray, runs: list[list[dict[str, Any]]] | None = None) -> np.ndarray:
        if interrupted:
            raise CapReached
        factors = tuple(np.exp(z).tolist())
        prof = scale_profile(profile, dict(zip(params, factors, strict=True)))
        if runs is None:
            _INTERRUPTS.defer = False   # a signal now stops the simulation at once
            try:
                if _INTERRUPTS.received:   # received between evaluations (_Interrupts)
                    raise Terminated(_INTERRUPTS.received)
                runs = simulate(factors, prof, case_seeds)
            except KeyboardInterrupt as e:
                # a long fit stopped by hand (or by a job scheduler's or `timeout`'s
                # SIGTERM: sigterm_interrupts) keeps what it found, as the cap does;
                # before its first point there is nothing to keep (raised on)
                if not lsq.evaluated:
                    raise
                interrupted.append(e.args[0] if isinstance(e, Terminated) and e.args else "Ctrl-C")
                raise CapReached from None
            finally:
                _INTERRUPTS.defer = bool(lsq.evaluated)
        preds = [mean_summary(r[:seeds]) for r in runs]
        lr = _log_residuals(log_samples, prof, server)
        predicted[lsq.key(z)] = (preds, lr)
        return np.r_[_terms(cases, preds, metrics), lr]

    def evaluated(count: int, z: np.ndarray) -> None:
        _INTERRUPTS.defer = True   # a point to keep: a signal between evaluations waits for the next one
        if progress is not None:
            report(count, z)

    term_metrics = _term_metrics(cases, metrics)
    prior = np.array([(prior_sd or {}).get(p, math.inf) for p in params])
    lsq = LogFactorFit(residuals, prior, max_evals, on_new=evaluated)
    z0 = np.zeros(len(params))
    weighed = bool(np.isfinite(prior).any())
    # at the profile, the seeds the scatter needs (the first ``seeds`` of them are the
    # prediction every evaluation makes, so the cache holds the same figures)
    runs0 = simulate((1.0,) * len(params), scale_profile(profile, {p: 1.0 for p in params}),
                     [max(seeds, NOISE_SEEDS) if weighed else seeds] * len(cases))
    # a case whose seeds gave the same figures draws nothing (plain decoding of replayed
    # arrivals and lengths): one seed is its mean at every evaluation, exactly
    case_seeds = [1 if len(r) > 1 and all(_same(r[0], x, metrics) for x in r[1:]) else seeds for r in runs0]
    r0 = lsq.residuals(z0, runs0)
    before, lr0 = predicted[lsq.key(z0)]
    noise = dict(noise or {})
    if weighed:
        # each residual over its own standard error (residual_noise): the runs' spread at
        # one load where measured, else one run's seed scatter, and the prediction's. Not the
        # residuals' own scatter at the profile: that made a 10 % miss weigh as much as a
        # 0.1 % one, and a prior of 2 % then held a factor the runs all wanted moved 7 %
        # (docs/measurements/h200-v27.md, the hold-out with the refitted profile)
        noise = residual_noise(noise, seed_scatter(runs0, sorted(set(term_metrics))), seeds,
                               sorted(set(term_metrics) | set(noise)))
    scale = np.array([noise.get(m, 1.0) for m in term_metrics])
    wider: list[str] = []
    if weighed:
        # a figure whose own run says it could move more by chance (a median on a step of its
        # distribution) weighs by that: its residual over the larger of the two
        own = sampling_se(cases, metrics)
        for i, (label, se) in enumerate(own):
            if se > scale[i]:
                scale[i] = se
                wider.append(f"{label} {se:.3f}")
    lsq.scale = np.r_[scale, np.ones(len(lr0))]   # the server log's term is its mean squared error as it is
    for i, z in unreported:
        report(i, z)
    # one run's randomness as the simulator has it (its seed scatter with the run's own
    # arrivals and lengths, and the seed mean's): what a run's residual after the fit is
    # judged against (unexplained_runs). Not the measured spread between runs at one load:
    # an outlier among them would widen it and hide itself
    scatter = seed_scatter(runs0, sorted(set(term_metrics)))
    own_se = {m: sd * math.sqrt(1 + 1 / max(seeds, 1)) for m, sd in scatter.items()}

    # the start: a coarse scan of each parameter the prior lets move further than the local
    # fit's step can see (the widest first, the others held at the best so far). A slower
    # host leaves a light-load TTFT unmoved until its issue outlasts the GPU's work, so the
    # objective is flat around the profile and falls only a few tens of percent away
    # (docs/measurements/h200-v22-holdout/README.md): a trust region started at the profile
    # with 10 % finite differences sees no slope there and stops at a local minimum
    start = z0.copy()
    half = np.where(np.isfinite(prior), SCAN_SD * prior, SCAN_NO_PRIOR)
    capped = ""
    try:
        for i in sorted(range(len(params)), key=lambda k: -half[k]):
            if not len(scan_grid(half[i])):
                continue
            grid = []
            for v in scan_grid(half[i]):
                z = start.copy()
                z[i] = float(np.clip(v, *lsq.bounds))
                grid.append((lsq.loss(z), abs(z[i]), z))
            start = min(grid, key=lambda t: t[:2])[2]   # a tie: the factor nearest the profile's
    except CapReached:
        capped = "fit"
    # a local fit from the profile and one from the scan's best: the objective has steps (a
    # run whose decode turns host-paced moves its ITL at once), and a start past one sees
    # only its side; the lower of the two ends (or of the starts) is the fit. Both run: on
    # round 27's runs the fit from the profile started above where the other ended and
    # still ended lower (decode x1.04, host x1.08 against x1.01, x1.59: a slower host and a
    # slower decode both lengthen the ITL there)
    ends = []
    for s in ([] if capped else [z0, start] if np.any(start != z0) else [z0]):
        try:
            end, out_of_evals = lsq.solve(s, xtol=1e-3, ftol=1e-3)
        except CapReached:
            capped = "fit"
            break
        if out_of_evals:
            capped = "fit"
        ends += [(lsq.loss(end), end), (lsq.loss(s), s)]
    if interrupted:
        capped = "interrupted"
    # capped: the best point evaluated, whichever stage it came from
    z = lsq.best() if capped else min(ends, key=lambda t: t[0])[1]
    r1 = lsq.residuals(z)
    after, lr1 = predicted[lsq.key(z)]
    cov = None
    try:
        cov = lsq.covariance(z, term_metrics + ["server log"] * len(lr1))
    except CapReached:
        capped = capped or ("interrupted" if interrupted else "covariance")
    factors = dict(zip(params, np.exp(z).tolist(), strict=True))
    has_log = log_samples is not None and len(log_samples) > 0
    return FitResult(factors, scale_profile(profile, factors), before, after, float(np.sum(r0 ** 2)),
                     float(np.sum(r1 ** 2)), len(lsq.evaluated), float(np.sum(lr0 ** 2)) if has_log else None,
                     float(np.sum(lr1 ** 2)) if has_log else None,
                     prior_sd={p: float(v) for p, v in zip(params, prior, strict=True) if math.isfinite(v)},
                     noise=noise if np.isfinite(prior).any() or noise else {}, sampled=wider,
                     cov=cov, figures=len(r1),
                     unexplained=unexplained_runs([c.label for c in cases for m in metrics if c.run.summary.get(m)],
                                                  r1[:len(term_metrics)], term_metrics, own_se,
                                                  stopped=(f"the fit stopped at --max-evals {max_evals}" if capped == "fit"
                                                           else "the fit was interrupted" if capped == "interrupted"
                                                           else None)),
                     max_evals=max_evals, capped=capped, interrupted_by=interrupted[0] if interrupted else "Ctrl-C",
                     objective_before=lsq.loss(z0) if weighed else None, objective_after=lsq.loss(z) if weighed else None)


def unexplained_runs(labels: Sequence[str], resid: np.ndarray, term_metrics: Sequence[str],
                     own_se: dict[str, float], stopped: str | None = None) -> list[str]:
    """One line per fitted figure the fit leaves more than :data:`UNEXPLAINED_SE` standard
    errors away (``resid``: log(predicted / measured) after the fit, in :func:`_terms`'
    order, ``labels`` and ``term_metrics`` its run and metric; ``own_se``: a run's standard
    error per metric from the simulator's seed scatter, metrics without one are not judged):
    a run that disagrees with the others and the
    profile (one slow run among repeats at one load, a file of another server) pulls every
    factor while looking like any other run in the table. ``stopped``: what stopped the fit
    before it converged ("the fit stopped at --max-evals 2", or was interrupted), None when it
    converged: the factors are then not the fit's, so a miss left may be the unfinished
    search's rather than the run's, and the line says so instead of blaming the run (after
    ``--max-evals 2`` every factor read x1.000 and each figure was named "check the run")."""
    out = []
    for lab, m, r in zip(labels, term_metrics, resid, strict=True):
        se = own_se.get(m)
        if se and se > 0:
            # a figure the seeds do not move (fixed lengths under light load: every TTFT the same)
            # scatters by rounding alone; judged by that, a miss read "253273013490863 standard
            # errors (0.0 %)": a run's own figure is known no closer than its file's digits
            se = max(se, NOISE_FLOOR)
        if se and se > 0 and abs(r) > UNEXPLAINED_SE * se:
            why = (": the other runs and the profile do not account for it; check the run, or fit without it"
                   if stopped is None else
                   f"; {stopped} before converging, so this may be the unfinished fit's miss, not the run's: "
                   "fit again with a larger --max-evals before checking the run")
            out.append(f"unexplained: {lab} {m} {math.expm1(r) * 100:+.1f} % after the fit, {abs(r) / se:.0f} standard "
                       f"errors of one run ({se * 100:.1f} %){why}")
    return out


NO_ERROR_WHY = {
    "measured_zero": "measured 0 (an error relative to 0 has no value; bench_serving writes 0 for a figure with no "
                     "sample, e.g. every ITL statistic of a run whose outputs were one token): not fitted",
    "not_predicted": "the prediction has no finite value (the simulated runs gave no sample of it): fitted as far off",
}
"""Why a row of :func:`fit_table` has no error, by the key it gives in ``no_error``."""


def fit_table(cases: list[FitCase], result: FitResult, metrics: Sequence[str] = FIT_METRICS) -> list[dict[str, Any]]:
    """Rows ``run, metric, measured, before, error_before_pct, after, error_after_pct, no_error``:
    the errors in %, (predicted - measured) / measured x 100, NaN where there is none, and then
    ``no_error`` a key of :data:`NO_ERROR_WHY` saying why (a measured 0, a prediction that is
    missing or not finite: a relative error of either read "+inf%" or "n/a" without a word)."""
    rows = []
    for c, b, a in zip(cases, result.before, result.after, strict=True):
        for m in metrics:
            q = c.run.summary.get(m)
            if q is None:
                continue
            row = {"run": c.label, "metric": m, "measured": q, "before": b.get(m), "after": a.get(m), "no_error": None}
            for k in ("before", "after"):
                v = row[k]
                finite = isinstance(v, (int, float)) and math.isfinite(v)
                row[f"error_{k}_pct"] = (v - q) / q * 100 if finite and q else float("nan")
                if not q:
                    row["no_error"] = "measured_zero"
                elif not finite:
                    row["no_error"] = row["no_error"] or "not_predicted"
            rows.append(row)
    return rows


def format_fit_table(rows: list[dict[str, Any]], width: int | None = None) -> str:
    """Plain-text table of :func:`fit_table`: one line per run and metric; where those lines
    are wider than ``width`` characters (a terminal's: long result file names, such as vLLM's
    ``openai-8.0qps-concurrency32-Llama-3.1-8B-20250101-120000.json:1``, made lines of 140
    that wrapped into each other at 80), each run's name on its own line with its metrics
    indented below it (76 characters). ``width`` None: one line each, however long. An error
    the table cannot give (``no_error``) reads ``n/a``, and one line under the table per reason
    names its figures and says why (:data:`NO_ERROR_WHY`)."""
    w = max([len("run"), *(len(r["run"]) for r in rows)]) + 2   # whole file:line names, one column apart

    def num(v: Any) -> str:
        return f"{v:>12.3f}" if isinstance(v, (int, float)) and v == v else f"{'n/a':>12}"

    def err(v: Any) -> str:
        return f"{v:>+8.1f}%" if v == v else f"{'n/a':>9}"

    def figures(r: dict[str, Any]) -> str:
        return (f"{r['metric']:<20}{num(r['measured'])}{num(r['before'])}{err(r['error_before_pct'])}"
                f"{num(r['after'])}{err(r['error_after_pct'])}")

    head = f"{'metric':<20}{'measured':>12}{'before':>12}{'error':>9}{'after':>12}{'error':>9}"
    # each n/a error said once under the table, with the figures it stands for
    why: dict[str, list[str]] = {}
    for r in rows:
        if r.get("no_error") in NO_ERROR_WHY:
            why.setdefault(r["no_error"], []).append(f"{r['run']} {r['metric']}")
    notes = [f"n/a: {', '.join(figs)}: {NO_ERROR_WHY[k]}" for k, figs in why.items()]
    if width is None or w + len(head) <= width:
        return "\n".join([f"{'run':<{w}}{head}", *(f"{r['run']:<{w}}{figures(r)}" for r in rows), *notes])
    out = ["run", f"  {head}"]
    for i, r in enumerate(rows):
        if i == 0 or r["run"] != rows[i - 1]["run"]:
            out.append(r["run"])
        out.append(f"  {figures(r)}")
    return "\n".join([*out, *notes])


def terminal_width() -> int | None:
    """The width tables are fitted to: ``COLUMNS`` where set, else the terminal's when
    standard output is one; None when piped or captured (a log keeps one line per row)."""
    import shutil

    return shutil.get_terminal_size((0, 0)).columns or None


def write_profile(result: FitResult, out: str | Path, name: str, files: Sequence[str], logs: Sequence[str], seeds: int,
                  metrics: Sequence[str], *, log_steps: int | None = None, kept: Sequence[str] = ()) -> Path:
    """Write the fitted profile (atomically) with a provenance entry naming the files: the runs
    and the server logs whose decode steps joined the fit. Without ``files`` the fit was to the
    logs alone (:mod:`analysis.calibrate_log`): ``log_steps`` pure-decode steps, and ``kept``
    names the parameters they do not determine, left as in the input profile."""
    import yaml
    from specsched.analysis.io import atomic_write_text

    data = result.profile.model_dump(mode="json", exclude={"path"})
    data["name"] = name
    prov = dict(data.get("provenance") or {})
    fac = result.factors_text()
    from specsched.sim.config import dotted_value

    runs = ", ".join(input_names(files))
    named = f"server log{'s' if len(logs) > 1 else ''} {', '.join(input_names(logs))}"
    if files:
        head = (f"fitted by `specsched calibrate --from` to bench_serving runs {runs}"
                + (f" and {named}" if logs else "")
                + f": factors {fac} on {', '.join(metrics)} (mean of {seeds} seeds); ")
    else:
        head = (f"fitted by `specsched calibrate --from` to the decode lines of SGLang {named} alone ({log_steps} "
                f"pure-decode steps, no bench_serving run): factors {fac} on the logged step times; "
                + (f"not determined by decode lines, as in the input profile: {'; '.join(kept)}; " if kept else ""))
    # a fit to server logs alone leaves prefill and host as they were: its own key, so a
    # profile whose other costs are still an analytic estimate is said to be one
    # (sim.profile.analytic_costs reads calibrate.from as "fitted to measured runs")
    prov["calibrate.from" if files else "calibrate.from_logs"] = (head
                              + f"{result.weighting()}; "
                              + f"{result.loss_text()} in {result.evals} evaluations"
                              + "".join(f"; {line}" for line in
                                        result.stopped() + result.identifiability() + result.unexplained))
    for k, v in result.factors.items():
        for dotted in GROUPS.get(k, (k,)):
            if dotted_value(data, dotted) is None:   # a group's key this profile does not have
                continue
            prov[dotted] = f"{prov.get(dotted, 'as in the input profile')}; scaled x{v:.4f} by calibrate --from"
    data["provenance"] = prov
    return atomic_write_text(out, yaml.safe_dump(data, sort_keys=False, width=110))


def check_log_matches(log: Any, path: str, server: Any, log_only: bool = False) -> None:
    """The log's decode steps are priced with the fitted scenarios' server (:func:`fit`): a log
    whose decode lines state an accept length (SGLang logs ``accept len`` on every decode
    line of a speculative server and on none of a plain one: 0.5.23
    managers/scheduler_components/metrics_reporter.py ``report_decode_stats``) came from a server that
    verified drafts, and a log without one from a server that decoded plainly. Priced the
    other way, each logged step (running x accept len tokens) was fitted as a plain decode
    step of the running requests (or the reverse), moving the decode factor by the verify
    step's cost, silently.

    A decode line with more running requests than KV tokens (``#token``) is damaged (3,000,000
    requests were priced as one batch at every evaluation: minutes); running requests above
    the server's ``max_running_requests`` are said (the log is of a larger server than the
    one the runs are predicted with).

    A log whose decode lines come from several DP-attention ranks (SGLang's ``DP<d> TP<t>``
    prefix: each line one rank's batch) is refused for a server without DP attention: a rank's 4 requests were priced as a
    whole 4-request server, silently. A log of data-parallel replicas (``--dp-size`` without DP
    attention: every DP rank logs the same TP index, ``analysis.server_log.replica_ranks``) is one whole
    server's batch a line: read so, with a warning where the runs are predicted with another
    number of replicas (it was refused as a DP-attention log), and refused for a DP-attention
    server. Lines holding more KV tokens than the server's pool are said (a larger pool than
    the runs are predicted with).

    ``log_only``: the fit has no runs (:mod:`analysis.calibrate_log`): the running cap, the
    pool and the replica count, which only the runs' predictions read, are not compared (they
    warned of "the runs" a fit from logs alone does not have); each line's step is priced
    from its own batch and #token.

    Raises:
        ConfigError: the log and the server disagree on speculative decoding or on DP
            attention, or a decode line runs more requests than it holds KV tokens.
    """
    from specsched.analysis.server_log import (
        decode_dp_ranks,
        dp_attention_ranks,
        kv_tokens,
        replica_ranks,
    )

    decode = log[log["kind"] == "decode"]
    held = kv_tokens(decode)
    bad = decode[decode["running_req"] > held]
    if len(bad):   # each running request holds at least one KV token: the line is damaged
        i = bad.index[0]
        name = "#token" if "token" not in bad or np.isfinite(bad.at[i, "token"]) else "#cpu token"
        raise ConfigError(f"{path}:{int(bad['line'].iloc[0])}", "#running-req", float(bad["running_req"].iloc[0]),
                          f"more than the line's {name} ({float(held[i]):g}): every running request "
                          "holds at least one KV token")
    most = decode["running_req"].max()
    n_dp = dp_attention_ranks(log)
    # under DP attention a line is one rank's batch, and each rank runs at most
    # max_running_requests // the attention-DP size (SGLang 0.5.23 mem_cache/kv_cache_configurator.py
    # resolve_max_num_reqs): the rank's cap is the figure to compare, not the server's total
    cap = max(1, server.max_running_requests // n_dp) if n_dp > 1 else server.max_running_requests
    if most > cap and not log_only:
        per = (f"{cap} per DP rank ({server.max_running_requests} max_running_requests over {n_dp} DP-attention ranks)"
               if n_dp > 1 else f"{cap} (max_running_requests)")
        print(f"warning: {path}: decode lines run up to {most:g} requests{' on one DP rank' if n_dp > 1 else ''}, the "
              f"fitted scenarios' server at most {per}: the runs are predicted with another server "
              "than the log's; give --scenario-template with its server arguments", file=sys.stderr)
    pool = server.max_total_num_tokens
    most_kv = float(np.nanmax(held)) if len(held) and np.isfinite(held).any() else 0.0
    if pool and most_kv > pool and not log_only:
        # a line's #token is what its server's (or DP rank's, or replica's) pool held: more than
        # the fitted scenarios' pool is a larger server than the one the runs are predicted with
        print(f"warning: {path}: decode lines hold up to {most_kv:g} KV tokens (#token), more than the fitted "
              f"scenarios' pool of {pool} (max_total_num_tokens): the runs are predicted with a smaller pool than "
              "the log's server had (retractions and admission differ); give --scenario-template with its "
              "max_total_num_tokens", file=sys.stderr)
    # SGLang prefixes a DP-attention rank's lines "DP<d> TP<t>" (srt/utils.py configure_logger
    # with the scheduler's prefix when dp_size > 1): each line is one rank's batch, which
    # decode_step_seconds prices as one rank of a lock-step group only when the server has it
    ranks = decode_dp_ranks(log)
    dp = server.dp_size if server.enable_dp_attention else 1
    if len(ranks) and ranks.nunique() > 1 and replica_ranks(decode.loc[ranks.index, "rank"]):
        # --dp-size without DP attention: independent replicas, each its own TP group counted
        # from TP0 (data_parallel_controller.py launch_tensor_parallel_group), so each line is
        # its replica's whole batch, priced as a whole server's step
        at = int(log.loc[ranks.index[0], "line"])
        if dp > 1:
            raise ConfigError(f"{path}:{at}", "rank", str(log.loc[ranks.index[0], "rank"]),
                              f"the log's server ran {ranks.nunique()} data-parallel replicas (each DP rank its own "
                              "TP group, from TP0), not DP attention, which the fitted scenarios' server runs: "
                              "each replica's batch was priced as one rank of a lock-step group")
        _check_accept_len(decode, path, server)
        if server.dp_replicas != ranks.nunique() and not log_only:
            # the runs are predicted with the scenarios' replicas (sim/dp_replicas.py)
            print(f"warning: {path}: the log's server ran {ranks.nunique()} data-parallel replicas (--dp-size without "
                  "DP attention: each DP rank its own TP group, from TP0); each decode line is its replica's whole "
                  f"batch and is timed so, while the runs are predicted with {server.dp_replicas} (server.dp_size "
                  f"{server.dp_size}): give --scenario-template with dp_size {ranks.nunique()}", file=sys.stderr)
        _say_shared_prefix_contexts(log, path)
        return
    if len(ranks) and ranks.nunique() > 1 and dp == 1:
        # several DP ranks' decode lines (one rank's alone may be a server launched with its own
        # DP rank, SGLANG_DP_RANK, whose batch is its whole server's)
        at = int(log.loc[ranks.index[0], "line"])
        raise ConfigError(f"{path}:{at}", "rank", str(log.loc[ranks.index[0], "rank"]),
                          f"the log's server ran DP attention ({ranks.nunique()} DP ranks logging their own batches), "
                          "the fitted scenarios' server does not: each rank's batch was priced as a whole server's; "
                          "give --scenario-template with server.enable_dp_attention and dp_size")
    _check_accept_len(decode, path, server)
    _say_shared_prefix_contexts(log, path)   # once the log is taken: a refusal stays one line


def say_log_parallelism(log: Any, path: str, profile: Any, profile_name: str) -> None:
    """One ``warning:`` line when the server log's launch ran another tensor-parallel size than
    ``profile`` prices (its ``server_args=`` line's ``tp_size``; the profile's
    ``hardware.tp_size``), or a pipeline (``pp_size`` above 1, which no profile prices: the model
    has no pipeline stages), naming both values. The log's decode steps are priced at the
    profile's setup: a TP8 server's steps fitted to a TP1 profile move the decode factor by
    the TP split, silently (runs without a server_info of their own got the log's and said it,
    :func:`with_log_server`; runs with one, or a ``--scenario-template``, compared only the
    runs' own). With DP attention ``tp_size`` counts every rank of the group and is not
    compared (docs/dp-attention.md). A pipeline whose stages the log's prefixes name (``PP1``)
    is said already by :func:`analysis.server_log.first_pipeline_stage`."""
    info = log.attrs.get("server_info") or {}
    hw = getattr(profile, "hardware", None)

    def count(key: str) -> int | None:
        v = info.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    tp, pp = count("tp_size"), count("pp_size")
    dp_attention = bool(info.get("enable_dp_attention")) or (count("attn_dp_size") or 1) > 1
    staged = "rank" in log and log["rank"].astype(str).str.contains(r"\bPP\d+\b").any()
    other = []
    if tp is not None and hw is not None and not dp_attention and tp != hw.tp_size:
        other.append(f"tp_size {tp} (the profile's hardware.tp_size {hw.tp_size})")
    if pp is not None and pp > 1 and not staged:
        other.append(f"pp_size {pp} (the profile's 1: pipeline stages are not modelled)")
    if other:
        print(f"warning: {path}: the log's server ran {' and '.join(other)}, by its server_args= line; the profile "
              f"{profile_name} prices another setup, and the log's decode steps are priced at the profile's: give a "
              f"profile of the log's server (specsched profile --analytic --tp {tp or getattr(hw, 'tp_size', 1)} ...) or the log of "
              "a server like the profile's", file=sys.stderr)


SHARED_PREFIX_WARN_SHARE = 0.05
"""Cached share of the log's prefill prompt tokens from which :func:`_say_shared_prefix_contexts`
speaks. With a share c of cached prompt tokens, however shared, the contexts read short by about
c / (1 - c) at most (5 % at 0.05); bench_serving's warmup alone makes each run's first request
a hit (0.5.23 benchmark/serving.py sends a copy of the first prompt before the clock starts,
without flushing the cache unless ``--flush-cache``), 1/N of a run of N requests' prompts,
which is no prefix shared by running requests."""


def _say_shared_prefix_contexts(log: Any, path: str) -> None:
    """One ``warning:`` line when the log's prefill lines found prompt tokens in the prefix
    cache. A decode line's ``#token`` is the pool's used KV (0.5.23
    scheduler_components/pool_stats_observer.py: capacity less the free and the evictable
    tokens), where a prefix that running requests share is held once while each of them
    attends to all of it (a decode kernel reads every request's own page table); so
    :func:`analysis.server_log.decode_step_samples`' context, ``#token / #running-req``, is short
    of what a step reads wherever running requests share a prefix (64 sharing a 2048-token
    system prompt: 384 tokens for 2304), and the step is priced too fast. The log does not
    say whether the cached prefixes were shared by requests running together (a system
    prompt) or each request's own (a conversation's earlier turns), so it is said, not
    corrected."""
    p = log[log["kind"] == "prefill"]
    cached, new = p["cached_token"].fillna(0).sum(), p["new_token"].fillna(0).sum()
    if not cached > 0 or cached / (cached + new) < SHARED_PREFIX_WARN_SHARE:
        return
    seqs = p.loc[p["cached_token"] > 0, "new_seq"].sum()
    per = f", {cached / seqs:.0f} a new sequence" if seqs > 0 else ""
    print(f"warning: {path}: the log's prefill lines found {100 * cached / (cached + new):.1f} % of their prompt tokens in "
          f"the prefix cache{per}: where requests running together share such a prefix, #token holds it once while "
          "each request attends to all of it, so a decode line's context (#token / #running-req) reads short and its "
          "step is priced too fast, pulling the fitted decode factor up; fit without --server-log, or with a log of "
          "requests that share no prefix, if the runs' requests shared one", file=sys.stderr)


def _check_accept_len(decode: Any, path: str, server: Any) -> None:
    """The log's decode lines and the fitted server agree on speculative decoding
    (:func:`check_log_matches`)."""
    acc = decode["accept_len"].dropna()
    spec = server.speculative_algorithm.enabled
    if len(acc) and not spec:
        raise ConfigError(f"{path}:{int(decode.loc[acc.index[0], 'line'])}", "accept len", float(acc.iloc[0]),
                          "the log's server decoded speculatively, the fitted scenarios' server does not: give "
                          "--scenario-template with its speculative_algorithm (or lines whose server_info names it)")
    if spec and not len(acc) and len(decode):
        raise ConfigError(f"{path}:{int(decode['line'].iloc[0])}", "accept len", "<missing>",
                          f"the fitted scenarios' server decodes speculatively ({server.speculative_algorithm.value}), "
                          "but no decode line of the log states an accept length (SGLang logs one on every "
                          "decode line of a speculative server): the log is another server's")


def default_fit_metrics(runs: Sequence[Any]) -> list[str]:
    """The metrics ``calibrate --from`` fits without ``--metrics``: :data:`FIT_METRICS`, with
    ``mean_itl_ms`` in place of ``median_itl_ms`` when a run decoded speculatively (its
    ``accept_length`` above 1) and every run states a mean ITL, and each of
    :data:`ONE_BATCH_FIT_METRICS` some run has (a ``bench_one_batch_server`` line).

    Why: a speculative verify delivers 1..window tokens at once and bench_serving splits a
    chunk of n tokens into n gaps of interval / n, so ITL values cluster on rungs and the
    median sits on one of them (sim/metrics.py ``median_itl_rung``). The fit's objective in
    the median is then a step function of the decode factor; the mean is smooth. On H200
    round 31's poisson-spec rate runs (docs/measurements/h200-v31.md, fitted at 8-12 req/s,
    held out 16-24), fitting mean ITL left the held-out median ITL at +3.8 / -12.4 % and mean
    ITL at +0.8 / -4.4 %, against -0.7 / -14.9 % and -2.3 / -5.8 % fitting the median.
    """
    spec = any(isinstance(r.summary.get("accept_length"), (int, float)) and r.summary["accept_length"] > 1.0
               for r in runs)
    has_mean = all(isinstance(r.summary.get("mean_itl_ms"), (int, float)) for r in runs)
    out = list(FIT_METRICS)
    if spec and has_mean:
        out = [("mean_itl_ms" if m == "median_itl_ms" else m) for m in FIT_METRICS]
    # a bench_one_batch_server line has no TTFT or ITL statistic: its batch's last first token
    # (prefill) and its decode window's throughput (decode) stand in; each run's residuals are
    # taken over the metrics it has (_terms), so bench_serving runs beside it fit as before
    out += [m for m in ONE_BATCH_FIT_METRICS if any(m in r.summary for r in runs)]
    return out


def fit_runs(specs: list[str], arrivals: str = "auto", trace: dict[str, Any] | None = None,
             template: str | None = None) -> list[Any]:
    """The runs ``calibrate --from`` fits, read from ``FILE[:LINE]`` specs.

    A run named by its line must have been measured (:func:`sim.bench_serving.require_measured`).
    Of a file given whole (a sweep appended run after run) two kinds of line are left out with
    a ``warning:`` line each, the rest fitted: a run whose every request failed (``completed``
    0: the server fell over at the sweep's top rate; there is nothing to fit in it), and a
    last line cut short (:func:`sim.bench_serving.read_bench` ``left_out``). Both refused
    every run of the file before. Likewise a replay that no line can rebuild at ``arrivals``
    (SGLang's ``request_rate: "trace"``, ``mooncake`` and multi-turn lines, which hold neither
    the trace nor their send times: :func:`analysis.from_bench.replay_refusal`; a results file
    that held one among rate runs was refused whole, with advice to write a trace workload, which
    a fit cannot take; a ``mooncake`` line named by FILE:LINE, or a file of only such lines, is
    built from ``--dataset-path`` as ``scenario from-bench`` builds it). With the trace given
    (``trace``: :func:`analysis.bench_cli.agentic_args`, its ``dataset_path`` set) a file's
    ``mooncake`` lines are fitted too, each rebuilt from that trace (they were left out whatever
    the command line gave); two or more such lines get one ``warning:`` line, since the slowdown
    factor and rounds given apply to all of them and no line writes its own. An
    ``agentic-trace`` line without the trace is left out as a mooncake one is (it stopped the
    fit of the whole file); mooncake and agentic-trace lines beside each other with one trace
    given are refused (the one file was read as both). Without ``template``, a speculative
    line whose accept length is null (:func:`analysis.from_bench.null_accept_length`: SGLang
    writes null until its first decode log line) is left out too (it stopped the whole fit).
    A file with no run left is still refused. A run read
    twice (equal arguments and figures: one file compressed two ways, a line named and its
    file given whole) is fitted once, with a ``warning:`` line; where only a later copy
    carries the per-request lists (``--output-details``), that copy is the one fitted. A ``bench_one_batch_server``
    line whose ``--cache-hit-rate`` warm-up cached part of each prompt is fitted without the
    figures that warm-up shortened, with a ``warning:`` line (:func:`_without_warm_cache_figures`).

    Raises:
        ConfigError: as :func:`sim.bench_serving.read_bench`; a named run, or every run of a
            file, with ``completed`` 0.
    """
    from specsched.analysis.from_bench import (
        AGENTIC_DATASET,
        MOONCAKE_DATASET,
        null_accept_length,
        replay_refusal,
    )
    from specsched.sim.bench_serving import read_bench, require_measured, split_spec, warn_notes

    traced = bool((trace or {}).get("dataset_path"))

    def refusal(r: Any) -> Any:
        if template is None:   # a speculative line with a null accept length: nothing to verify at
            why = null_accept_length(r, "--scenario-template")
            if why is not None:
                return why
        if replays(r, arrivals):
            return None
        if r.args.get("dataset_name") == MOONCAKE_DATASET:   # rebuilt from the trace given (scenario_from_bench)
            return None if traced else ConfigError(
                r.source, "dataset_name", MOONCAKE_DATASET, "a Mooncake trace replay, rebuilt from the trace it read, "
                "which the line does not name: give it with --dataset-path TRACE.jsonl (and the run's "
                "--mooncake-num-rounds / --mooncake-slowdown-factor where not the defaults) to fit this line")
        if r.args.get("dataset_name") == AGENTIC_DATASET and not traced:   # as a mooncake line: left out
            return ConfigError(r.source, "dataset_name", AGENTIC_DATASET, "an agentic-trace replay, rebuilt from "
                               "the trace it read, which the line does not name: give it with --dataset-path "
                               "TRACE.json to fit this line")
        return replay_refusal(r)

    out = []
    seen: dict[str, int] = {}   # a run's arguments and figures -> its index in out
    for spec in specs:
        path, line = split_spec(spec)
        skipped: list[str] = []
        runs = read_bench(path, line, left_out=skipped if line is None else None)
        skipped += [note for r in runs for note in r.notes]
        measured = [r for r in runs if r.summary.get("completed") != 0]
        if line is not None or not measured:
            measured = [require_measured(r) for r in runs]
        skipped += [f"{r.source}: left out: completed = 0 (every request of the run failed: nothing measured to fit)"
                    for r in runs if r.summary.get("completed") == 0]
        why = {id(r): refusal(r) for r in measured} if line is None else {}
        if any(e is None for e in why.values()):   # else refused when its scenario is built
            skipped += [f"{e.file}: left out: {e.key} = {e.value!r}: {e.allowed}"
                        for e in why.values() if e is not None]
            measured = [r for r in measured if why[id(r)] is None]
        warn_notes(skipped)
        twice, richer = [], []
        for r in measured:
            # the same run given twice (one file compressed two ways, a line named and its file
            # given whole) would weigh double in the fit
            key = json.dumps([r.args, r.summary], sort_keys=True, default=str)
            if key in seen:
                first = out[seen[key]]
                if r.details is not None and first.details is None:   # the copy with the per-request lists is kept
                    richer.append((first.source, r.source))
                    out[seen[key]] = r
                else:
                    twice.append((r.source, first.source))
                continue
            seen[key] = len(out)
            out.append(r)
        if twice:   # one line for the file, however many of its runs
            print(f"warning: {', '.join(a for a, _ in twice)}: left out: the same run(s) as {', '.join(b for _, b in twice)} "
                  "(arguments and every figure equal): fitted once", file=sys.stderr)
        if richer:
            print(f"warning: {', '.join(a for a, _ in richer)}: left out: the same run(s) as "
                  f"{', '.join(b for _, b in richer)} (arguments and every figure equal), which carry the per-request "
                  "lists (--output-details): fitted once, from those", file=sys.stderr)
    mooncake = [r.source for r in out if r.args.get("dataset_name") == MOONCAKE_DATASET]
    agentic = [r.source for r in out if r.args.get("dataset_name") == AGENTIC_DATASET]
    if mooncake and agentic:   # one --dataset-path cannot be both traces
        raise ConfigError("<command line>", "--dataset-path", (trace or {}).get("dataset_path"),
                          f"one trace for the mooncake line(s) {', '.join(mooncake)} and the agentic-trace line(s) "
                          f"{', '.join(agentic)}, which read different files: fit each kind in its own call, naming "
                          "its lines as FILE:LINE")
    if len(mooncake) > 1:
        t = trace or {}
        print(f"warning: {', '.join(mooncake)}: mooncake lines, each rebuilt from {t.get('dataset_path')} at "
              f"--mooncake-slowdown-factor {t.get('mooncake_slowdown_factor') or 1.0:g} and --mooncake-num-rounds "
              f"{t.get('mooncake_num_rounds') or ('from --num-prompts' if t.get('num_conversations') else 1)} (no "
              "line writes its own): where the runs differed in these, fit them in separate calls", file=sys.stderr)
    _say_running_accept_lengths(out)
    return [_without_warm_cache_figures(r) for r in out]


def _without_warm_cache_figures(run: Any) -> Any:
    """``run`` less the figures a ``bench_one_batch_server --cache-hit-rate`` warm-up shortened
    (:func:`analysis.from_bench.warmed_cache`, :data:`analysis.from_bench.WARM_CACHE_FIGURES`:
    the batch's last first token and the figures over the whole latency), said in one
    ``warning:`` line; any other run as it is. The fit's scenario of such a line starts from an
    empty cache and prefills every prompt whole, so those figures would be fitted as a faster
    prefill (they were, without a word); its decode window's throughput stays."""
    import dataclasses

    from specsched.analysis.from_bench import WARM_CACHE_FIGURES, warmed_cache

    hit = warmed_cache(run)
    gone = [k for k in WARM_CACHE_FIGURES if k in run.summary] if hit is not None else []
    if not gone:
        return run
    print(f"warning: {run.source}: cache_hit_rate {hit:g}: a bench_one_batch_server --cache-hit-rate warm-up cached "
          "part of each prompt before the timed batch, which the fit's scenario prefills whole from an empty cache: "
          f"its {', '.join(gone)} (timed over that prefill) are left out of the fit", file=sys.stderr)
    return dataclasses.replace(run, summary={k: v for k, v in run.summary.items() if k not in gone})


def _say_running_accept_lengths(runs: Sequence[Any]) -> None:
    """One ``warning:`` line per server launch that wrote two or more of ``runs`` with an
    accept length. SGLang's bench_serving (0.5.23 benchmark/serving.py ``benchmark()``) writes
    ``accept_length`` from /server_info's ``internal_states[0].avg_spec_accept_length``, the
    scheduler's accepted tokens over verify forwards since launch (managers/scheduler_components
    internal_state.py ``_average_accept_length``), reset only by /flush_cache (scheduler.py
    ``flush_cache`` -> ``metrics_reporter.reset_metrics``, which bench_serving calls with
    ``--flush-cache``); so a sweep appended by one launch holds running means, each later run's
    over the runs before it too, and the fit predicts each run at that. A launch is known by
    ``server_info.startup_time`` (its ``decode[0]`` under PD disaggregation)."""
    from specsched.analysis.from_bench import _accept_length, _line_server_info

    launches: dict[float, list[str]] = {}
    for r in runs:
        info = _line_server_info(r)
        t = info.get("startup_time") if isinstance(info, dict) else None
        if isinstance(t, (int, float)) and not isinstance(t, bool) and _accept_length(r) is not None \
                and r.extra.get("spec_decode_acceptance_length") is None:   # vLLM's is the run's own
            launches.setdefault(float(t), []).append(r.source)
    for t, sources in launches.items():
        if len(sources) > 1:
            print(f"warning: {', '.join(sources)}: one server launch (server_info startup_time {t:.3f}) decoding "
                  "speculatively: SGLang's accept_length is its running mean since launch (avg_spec_accept_length, "
                  "reset only by bench_serving --flush-cache), so each later run is predicted at the mean over the "
                  "runs before it too; where acceptance changed between them (another dataset, temperature), state "
                  "each run's with --scenario-template", file=sys.stderr)


def with_log_server(runs: list[Any], info: dict[str, Any] | None, path: str) -> list[Any]:
    """``runs`` with the server log's launch settings as the ``server_info`` of each run whose
    line has none (SGLang wrote none before 0.5.5, and none when /server_info was unreachable):
    the log's ``server_args=`` line and the scheduler's start-up line
    (:meth:`analysis.server_launch.Launch.server_info`) are the server the runs measured, read as a
    line's server_info is read (``analysis.from_bench``). Such runs were predicted at specsched's
    defaults (a 724000-token pool, 16384-token chunks, 256 running requests where the profile
    has no hardware block) while the log's decode steps were priced at the log's own batches.
    Said in one line; runs with a server_info of their own keep it."""
    import dataclasses

    if not info:
        return runs
    _say_other_launch(runs, info, path)
    bare = [r for r in runs if not isinstance(r.extra.get("server_info"), dict)]
    if not bare:
        return runs
    keys = ", ".join(k for k in ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens") if k in info)
    print(f"server: {len(bare)} of {len(runs)} run(s) have no server_info: the server log's launch settings stand in "
          f"for it ({path}: {len(info)} keys{', ' + keys if keys else ''})")
    ids = {id(r) for r in bare}
    return [dataclasses.replace(r, extra={**r.extra, "server_info": info}) if id(r) in ids else r for r in runs]


def _say_other_launch(runs: list[Any], info: dict[str, Any], path: str) -> None:
    """One ``warning:`` line naming the server arguments a run's own server_info states at
    another value than the server log's launch does (both read as ``scenario from-bench`` reads a
    line's, :func:`analysis.from_bench.line_server_args`, and compared by the one rule,
    :func:`sim.sglang_launch_args.same_setting`): the log is of another launch than that run
    measured, and its decode steps are priced with the run's server. They were taken without a
    word."""
    import dataclasses

    from specsched.analysis.from_bench import line_server_args

    for r in runs:
        own = r.extra.get("server_info")
        if not isinstance(own, dict):
            continue
        ran = line_server_args(r)
        logged = line_server_args(dataclasses.replace(r, extra={**r.extra, "server_info": info}))
        other = [k for k in ran if k in logged and not same_setting(ran[k], logged[k])]
        if other:
            said = ", ".join(f"{k} {clipped(repr(ran[k]), 30)} (log {clipped(repr(logged[k]), 30)})" for k in other)
            print(f"warning: {r.source}: its server_info ran {said}: the server log {path} is of another launch; its "
                  "decode steps are priced with the run's server", file=sys.stderr)
            return   # one line: the first run that differs names the launch


def split_server_log(from_files: list[str], server_logs: str | Sequence[str] | None) -> tuple[list[str], list[str]]:
    """``--from`` files less the SGLang server logs among them, and the logs the fit takes
    (``--server-log``'s first, in the order given); a file given twice (however spelt:
    :func:`sim.input_files.same_input`), or a line of a file given whole, is kept once, said in
    a ``warning:`` line (its runs, or its decode steps, were fitted twice).

    A user hands the fit everything the real servers left, ``--from runs.jsonl server.log``:
    a log (:func:`analysis.server_log.is_server_log`, a file named without ``:LINE``) is a
    server log (it was refused as "not a bench_serving result"). A sweep whose server was
    relaunched for each run leaves one log a run: every one joins the fit
    (:func:`check_logs_same_launch` refuses logs of launches the model prices differently).

    ``--from`` holding nothing but logs gives no runs: the log-only fit
    (:func:`cmd_calibrate_logs`) takes them (it was refused: "SGLang server logs alone")."""
    from specsched.analysis.server_log import is_server_log, printed_report_line
    from specsched.sim.bench_serving import given_before, split_spec

    given = [server_logs] if isinstance(server_logs, str) else list(server_logs or [])
    logs: list[str] = []
    for f in given:
        again = next((g for g in logs if same_input(f, g)), None)
        if again is not None:
            print(f"warning: {f}: the server log {again} given again: read once", file=sys.stderr)
            continue
        logs.append(f)
    runs: list[str] = []
    for f in from_files:
        path, line = split_spec(f)
        again = given_before(f, runs)
        if again is not None:   # `--from runs.jsonl runs.jsonl`: each run was fitted twice
            print(f"warning: {f}: given again (as {again}): read once", file=sys.stderr)
            continue
        if line is None and is_server_log(path):
            known = next((g for g in logs if same_input(path, g)), None)
            if known is not None:   # `--from runs.jsonl a.log a.log`
                if known in given and printed_report_line(path) is not None:   # --server-log ALL --from ALL
                    runs.append(f)
                else:
                    print(f"warning: {f}: the server log {known} given again: read once", file=sys.stderr)
                continue
            logs.append(f)
            if printed_report_line(path) is not None:   # `docker compose logs` of server and client
                print(f"{f}: an SGLang server log holding bench_serving's printed report too: its batch lines join the "
                      "fit as the server log, its reports as runs")
                runs.append(f)
        else:
            runs.append(f)
    return runs, logs


LAUNCH_KEYS_PRICED = ("tp_size", "pp_size", "enable_dp_attention", "dp_size", "speculative_algorithm",
                      "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                      "cuda_graph_max_bs", "disable_cuda_graph", "kv_cache_dtype", "attention_backend")
"""The launch settings :func:`fit` prices a logged decode step with (the parallel layout, the
verify window and drafter, the captured graphs, the KV dtype and kernel): two server logs that
state one of them differently are not steps of one server, and are refused together."""


def check_logs_same_launch(infos: Sequence[tuple[str, dict[str, Any] | None]]) -> None:
    """Several server logs join one fit only as launches of one server: their decode steps are
    all priced with the fitted scenarios' server (:func:`fit`), so a log of a TP4 launch beside
    one of TP8, or of EAGLE beside a plain launch, was fitted as the same step, moving the
    decode factor between them. Each log's ``server_args=`` line (``log.attrs["server_info"]``,
    :mod:`analysis.server_launch`) is compared with the first log's on
    :data:`LAUNCH_KEYS_PRICED` by :func:`sim.sglang_launch_args.same_setting`; a log without a
    launch line is not compared. Launches differing elsewhere (the pool, the chunk, the port) are
    fine: a step's cost does not depend on them.

    Raises:
        ConfigError: two logs' launches state one of :data:`LAUNCH_KEYS_PRICED` differently,
            naming both logs, the key and both values."""
    stated = [(p, i) for p, i in infos if isinstance(i, dict) and i]
    if len(stated) < 2:
        return
    first, ref = stated[0]
    for path, info in stated[1:]:
        for k in LAUNCH_KEYS_PRICED:
            if k in ref and k in info and not same_setting(ref[k], info[k]):
                raise ConfigError(path, f"server_args {k}", repr(info[k]),
                                  f"the same as the first server log's ({first}: {ref[k]!r}): every log's decode steps "
                                  "are priced as one server's; fit each launch's runs and log separately")


def cmd_calibrate_from(args: argparse.Namespace) -> int:
    """``specsched calibrate --from F1 F2 ... --profile P --out NEW``."""
    from specsched.analysis.server_log import (
        decode_step_samples,
        format_log_summary,
        parse_server_log,
        prefill_summary,
    )
    from specsched.sim.profile import load_profile

    if not args.profile:
        raise ConfigError("<command line>", "--profile", "<missing>", "calibrate --from needs --profile (the profile to fit)")
    if not args.out:
        raise ConfigError("<command line>", "--out", "<missing>", "calibrate --from needs --out NEW.yaml")
    refuse_file_out(args.out, "the fitted profile", "fitted.yaml")   # found before the fit, not after it
    from specsched.sim.profile import refuse_replacing_non_profile

    refuse_replacing_non_profile(args.out)
    take_range_notes()   # this command's simulations' only
    given_params = args.params
    if args.params is None:
        args.params = DEFAULT_PARAMS
    params = [p.strip() for p in args.params.split(",") if p.strip()]
    if not params:   # "$PARAMS" unset: a fit of no factor ended in a numpy traceback after its first evaluation
        raise ConfigError("<command line>", "--params", args.params, "expected a comma-separated list of prefill, "
                          "decode, host, idle_lead or dotted profile keys")
    args.from_files, args.server_log = split_server_log(args.from_files or [], args.server_log)
    if not args.from_files:   # server logs alone: their decode lines are what there is to fit
        from specsched.analysis.calibrate_log import cmd_calibrate_logs

        return cmd_calibrate_logs(args, given_params)
    runs = fit_runs(args.from_files, args.arrivals, agentic_args(args), template=args.scenario_template)
    from specsched.analysis.bench_cli import refuse_out_over_inputs
    from specsched.sim.bench_serving import split_spec
    from specsched.sim.profile import resolve_profile_path

    # the measured runs, the log, the template and the profile fitted: the fitted profile written
    # over one of them lost it (over --profile: the profile the fit started from, silently)
    refuse_out_over_inputs(Path(args.out), [*(("a bench_serving result file", split_spec(f)[0]) for f in args.from_files),
                                            *(("a server log", f) for f in args.server_log),
                                            ("the scenario template", args.scenario_template),
                                            ("the input profile (--profile)", resolve_profile_path(args.profile))])
    profile = load_profile(args.profile)
    # a name that scales nothing, refused before the progress lines (it was refused by the first evaluation)
    scale_profile(profile, dict.fromkeys(params, 1.0))
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    else:
        metrics = default_fit_metrics(runs)
        if "mean_itl_ms" in metrics:
            print("metrics: mean_itl_ms in place of median_itl_ms (the runs decoded speculatively: a median ITL sits "
                  "on one rung of interval / tokens and jumps between rungs; --metrics to choose)")
    if not any(r.summary.get(m) for r in runs for m in metrics):   # nothing to fit: the fit would write the profile as is
        have = sorted({k for r in runs for k in r.summary})
        raise ConfigError("<command line>", "--metrics", ",".join(metrics),
                          f"no run has any of them; the runs have {', '.join(have[:12]) or 'no metric'}")
    import pandas as pd

    logs = [(path, parse_server_log(path)) for path in args.server_log]
    check_logs_same_launch([(path, log.attrs.get("server_info")) for path, log in logs])
    if logs and args.scenario_template is None:
        runs = with_log_server(runs, logs[0][1].attrs.get("server_info"), logs[0][0])
    with tempfile.TemporaryDirectory() as tmp:
        cases = cases_from_runs(runs, args.profile, args.scenario_template, Path(tmp), args.arrivals,
                                agentic_args(args))
        refuse_template_speculation(cases, args.scenario_template)   # a fit that would absorb a drafter's speedup
        refuse_decode_via_verify(params, profile, cases)   # before anything is said or simulated
        cases, pinned = pin_acceptance(cases, profile, args.seeds)   # an observation, not a speed to fit
        for note in pinned:
            print(f"acceptance: {note}")
        from specsched.analysis.bench_cli import check_built_fits
        from specsched.analysis.from_bench import SETUP_MISMATCH

        for c in cases:   # what `run` refuses (a request past the context, DP ranks the TP group cannot split)
            check_built_fits(c.scenario, args.profile, c.run.source)   # each scenario built from its line
        said_tp = False
        for c in cases:   # the line's server is not the profile's (another TP size, model): as validate warns
            for note in c.scenario.assumptions:
                if note.startswith(SETUP_MISMATCH):
                    print(f"warning: {c.run.source}: {note.removeprefix(SETUP_MISMATCH)}", file=sys.stderr)
                    said_tp = said_tp or " prices tp_size " in note
        timed: list[str] = []   # the logs whose decode steps join the fit
        parts = []
        for path, log in logs:
            if not said_tp:
                say_log_parallelism(log, path, profile, args.profile)
            steps = decode_step_samples(log)
            if len(steps):
                check_log_matches(log, path, cases[0].scenario.server)
            print(f"server log {path}:")
            for line in format_log_summary(prefill_summary(log), len(steps)):
                print(f"  {line}")
            if not len(steps):
                # nothing of the log enters the fit: said, and the profile is not named as fitted to it
                why = ("it has no decode line: a prefill-decode prefill server's log" if not (log["kind"] == "decode").any()
                       else "each decode line had requests queued, followed a prefill line of its rank, or states no "
                       "#token (#full token, HiSparse #cpu token) or gen throughput")
                rest = "the runs alone" if len(logs) == 1 else "the runs and the other logs"
                print(f"warning: {path}: no decode line times a pure decode step ({why}): the fit uses {rest}",
                      file=sys.stderr)
                continue
            timed.append(path)
            parts.append(steps)
        samples = pd.concat(parts, ignore_index=True) if parts else None
        from specsched.analysis.from_bench import MOONCAKE_DATASET

        mooncake = sum(c.run.args.get("dataset_name") == MOONCAKE_DATASET for c in cases)
        n_replay = sum(c.scenario.workload.kind == "trace" for c in cases) - mooncake
        n_loop = sum(closed_loop_sends(c.run) and c.scenario.workload.kind != "trace" for c in cases)
        loops = (f" ({n_loop} concurrency run(s) as the closed loops they were: their send times are slot "
                 "releases, not arrivals)" if n_loop else "")
        if mooncake:   # sent at the trace's timestamps, neither the line's send times nor its rate
            print(f"arrivals: {mooncake} mooncake run(s) at the trace's timestamps ({args.dataset_path})")
        rest, other = len(cases) - mooncake, "other " if mooncake else ""
        if rest and n_replay == rest:
            print(f"arrivals: all {n_replay} {other}runs replay their own send times")
        elif rest and n_replay == 0:
            print(f"arrivals: all {rest} {other}runs draw at their rate{loops}")
        elif rest:
            print(f"arrivals: {n_replay} of {rest} {other}runs replay their own send times, the others draw at "
                  f"their rate{loops}")

        best: list[Any] = []   # (loss, factors) of the lowest loss so far
        started = time.perf_counter()
        print(f"fit: each evaluation simulates {len(cases)} run(s) x {args.seeds} seed(s); at most "
              f"{args.max_evals} evaluations (--max-evals)")

        def progress(i: int, loss: float, f: np.ndarray) -> None:
            # the evaluation just made is wherever the search probes (a scan point, a
            # Jacobian step); the lowest so far is what the fit has found
            if not best or loss < best[0]:
                best[:] = [loss, f]
            if i % 5 == 0 or i == 1:
                def text(x: np.ndarray) -> str:
                    return "  ".join(f"{p} x{v:.3f}" for p, v in zip(params, x, strict=True))
                each = (time.perf_counter() - started) / i
                left = (args.max_evals - i) * each
                print(f"  eval {i:3d}/{args.max_evals}: objective {loss:.4g}  {text(f)};  best so far: {best[0]:.4g}  "
                      f"{text(best[1])}  ({each:.1f} s an evaluation; at most {left / 60:.1f} min more)")

        from specsched.sim.profile import analytic_costs

        prior = parse_prior(args.prior, params, analytic=analytic_costs(profile))
        with sigterm_interrupts():   # SIGTERM (timeout, a job scheduler) ends the fit as Ctrl-C does
            result = fit(cases, profile, params, seeds=args.seeds, metrics=metrics, log_samples=samples,
                         max_evals=args.max_evals, progress=progress, prior_sd=prior, jobs=args.jobs,
                         noise=metric_noise(cases, metrics) if prior else None)
        print(format_fit_table(fit_table(cases, result, metrics), terminal_width()))
    from specsched.sim.grid_range import write_warnings

    write_warnings(take_range_notes())   # once for the command, at the largest value any simulation reached
    if result.prior_sd:
        print(result.weighting())
    print(f"factors: {result.factors_text()}; {result.loss_text()} ({result.evals} evaluations)")
    for line in result.stopped() + result.identifiability() + result.unexplained:
        print(line)
    if result.log_before is not None:
        print(f"server-log decode steps: mean squared log error {result.log_before:.4g} -> {result.log_after:.4g}")
    out = write_profile(result, args.out, args.name or Path(args.out).stem, args.from_files, timed, args.seeds,
                        metrics)
    print(f"wrote {out}")
    return 0


def add_arguments(c: argparse.ArgumentParser) -> None:
    """Add ``--from`` and its options to the ``calibrate`` parser (``--seeds`` and
    ``--max-evals`` are the parser's own, shared with the MI355X fit)."""
    from specsched.sim.cli_types import positive_int

    g = c.add_argument_group("fit to a real server's bench_serving runs (--from)")
    g.add_argument("--from", dest="from_files", nargs="+", metavar="FILE[:LINE]",
                   help="bench_serving result files (every line of a FILE without :LINE); an SGLang server log "
                        "among them is taken as --server-log; server logs alone fit the decode factor to their "
                        "'Decode batch' lines")
    g.add_argument("--profile", help="profile to fit (name or path)")
    g.add_argument("--scenario-template", help="scenario giving server and acceptance when the lines lack server_info")
    g.add_argument("--params", default=None,
                   help="free parameters: prefill, decode, host (multipliers) or dotted profile keys (default "
                        f"{DEFAULT_PARAMS}; from server logs alone {','.join(LOG_ONLY_DEFAULT)}, the one group their decode "
                        "lines determine)")
    g.add_argument("--metrics", default=None,
                   help=f"metrics fitted (default {','.join(FIT_METRICS)}; for runs that decoded speculatively "
                        "mean_itl_ms in place of median_itl_ms: their ITLs cluster at interval / tokens and the "
                        "median jumps between clusters)")
    g.add_argument("--arrivals", choices=ARRIVALS, default="auto",
                   help="replay each run's own send times (details; the line's start_times), draw arrivals at its "
                        "rate (rate), or replay where the line has send times (auto, the default)")
    g.add_argument("--prior", default="default",
                   help="prior on the log factors around the profile: 'default' (prefill 0.07, decode 0.07, host 0.3; on an analytic profile host 0.3 only), "
                        "'none' (unregularised), or NAME=SD,...; with a prior each residual is divided by its standard "
                        "error: the measured figure's (the spread of runs at one load, else one run's seed scatter) "
                        "and the seed mean's")
    g.add_argument("--server-log", "--log", dest="server_log", nargs="+", metavar="LOG",
                   help="SGLang server logs (one, or one per launch of a sweep that relaunched the server): their "
                        "pure-decode 'Decode batch' lines join the fit (--log: the same)")
    add_agentic_options(g)   # agentic-trace lines: the trace the runs replayed, as from-bench takes it
    g.add_argument("--jobs", type=positive_int, default=1,
                   help="worker processes an evaluation's simulations (runs x seeds) are spread over, at most "
                        "this machine's CPUs; the fit is the same (default 1: this process)")
    g.add_argument("--out", help="fitted profile to write")
    g.add_argument("--name", help="name of the fitted profile (default: --out's stem)")


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``specsched calibrate``: ``--from`` fits to a real server's runs; otherwise the MI355X
    reference fit (sim/calibrate.py)."""
    if args.from_files or args.server_log:   # --server-log alone: the log-only fit (cmd_calibrate_logs)
        return cmd_calibrate_from(args)
    from specsched.sim.calibrate import cmd_calibrate as cmd_reference

    return cmd_reference(args)


def add_parsers(sub: Any) -> None:
    """Register ``specsched calibrate``: the reference fit's options and ``--from``'s."""
    from specsched.sim.calibrate import add_arguments as add_reference_arguments

    c = sub.add_parser("calibrate", help="refit a profile: to the MI355X reference figures, or --from a real server's runs")
    add_reference_arguments(c)
    add_arguments(c)
    c.set_defaults(func=cmd_calibrate)
