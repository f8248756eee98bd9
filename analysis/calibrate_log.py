"""Fit a profile to SGLang server logs alone (``specsched calibrate --from server.log``).

A production server's log without bench_serving runs still times its decode steps: SGLang
0.5.23 logs a ``Decode batch`` line every ``decode_log_interval`` forwards
(managers/scheduler_components/metrics_reporter.py ``report_decode_stats``) with the batch
(``#running-req``), the KV it holds (``#token``), the accept length of a speculative server
(``accept len``) and the window's tokens over its wall time (``gen throughput (token/s)``).
:func:`analysis.server_log.decode_step_samples` keeps the lines that time pure decode steps
(an unchanged batch since the previous line, no queue); each is one sample of the decode (or
verify) step time at that batch and context, the same samples that join a fit with runs
(``calibrate --from RUNS --server-log LOG``, :func:`analysis.calibrate_bench._log_residuals`).

What those samples determine is the step's GPU time: the ``decode`` group (``gpu.decode``,
``gpu.verify``, ``gpu.draft_step``; :data:`analysis.calibrate_bench.LOG_ONLY_PARAMS`), a
speculative server's steps priced as verifies of the window at the logged accept length
(:class:`analysis.calibrate_bench.DecodeStepPricer`). They do not determine:

- ``prefill``: a ``Prefill batch`` line times no step: its ``input throughput`` is the
  batch's new tokens over the time since the previous prefill line, decode steps between
  included (``report_prefill_stats``: ``gap_latency = now - last_prefill_stats_tic``);
- ``host`` and ``idle_lead``: a step is the GPU's forward overlapped with the host's
  per-step work (added to it without the overlap scheduler), one time a decode line does not
  split; the host's extend issue and idle leads never appear in a pure decode window.

These stay at the profile's values, said in the report and in the fitted profile's
provenance; naming one in ``--params`` is refused.

The fit is least squares on the log factors (:class:`analysis.factor_fit.LogFactorFit`, the
core of the fit with runs too: scipy ``least_squares``, forward differences of
:data:`analysis.factor_fit.JAC_STEP`) of log(predicted / logged) step time per sample.
With a prior (``--prior``, default :data:`analysis.calibrate_bench.PRIOR_SD`'s ``decode``)
each sample's error is divided by the samples' scatter about their mean error at the profile
(one sample's noise: a factor moves every GPU-paced step's log error alike, so the scatter is
the factor's to leave), plus log(factor) / sd: the most probable factor given the log and
the profile. Pricing a log is a cost model lookup per distinct step, no simulation: an
evaluation takes milliseconds to about a second for a day's log, so the search runs to tighter
tolerances than the fit with runs, and the fit is the best point evaluated, a Jacobian's step
included.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from specsched.analysis.calibrate_bench import (
    GROUPS,
    LOG_ONLY_DEFAULT,
    LOG_ONLY_PARAMS,
    NOISE_FLOOR,
    FitCase,
    FitResult,
    _log_residuals,
    cases_from_runs,
    format_fit_table,
    input_name,
    parse_prior,
    scale_profile,
    terminal_width,
    write_profile,
)
from specsched.analysis.factor_fit import CapReached, LogFactorFit
from specsched.sim.errors import ConfigError

NOT_FROM_LOGS = {
    "prefill": "a 'Prefill batch' line times no step (its input throughput is the batch's tokens over the time since "
               "the previous prefill line, decode steps between included: metrics_reporter.py report_prefill_stats)",
    "host": "a decode line's step is the GPU's forward with the host's per-step work overlapped (or added without "
            "the overlap scheduler): one time, which the line does not split",
    "idle_lead": "the host's extend issue and idle leads never run inside a pure decode window",
}
"""The :data:`analysis.calibrate_bench.GROUPS` a server log's decode lines do not determine,
and why (said in the report, the provenance and a ``--params`` refusal)."""


def _step_errors(samples: Any, profile: Any, server: Any) -> np.ndarray:
    """log(predicted / logged) step seconds of each sample (the server-log term of a fit with
    runs, :func:`analysis.calibrate_bench._log_residuals`, without its 1 / sqrt(n))."""
    return _log_residuals(samples, profile, server) * math.sqrt(len(samples))


def stand_in_run(logs: Sequence[tuple[str, Any]], samples: Any) -> Any:
    """A bench_serving run standing in for the logs' server, so that its scenario is built as
    a fit with runs builds one from a line whose server_info the log's launch gave
    (:func:`analysis.calibrate_bench.with_log_server`, ``analysis.from_bench.scenario_from_bench``):
    the first log's ``server_args=`` settings as its ``server_info`` and the decode lines' mean
    accept length as its ``accept_length`` (a speculative server without a launch line gets
    the drafter a run's line would). Its workload is a placeholder: only the server prices
    the log's steps. Named by the first log and its first sampled line."""
    from specsched.sim.bench_serving import BenchRun

    path, log = logs[0]
    info = log.attrs.get("server_info")
    acc = [a for _, lg in logs for a in lg.loc[lg["kind"] == "decode", "accept_len"].dropna() if a > 0]
    summary: dict[str, float] = {"completed": 1.0}
    if acc:
        summary["accept_length"] = float(np.mean(acc))
    args = {"backend": "sglang", "dataset_name": "random", "request_rate": math.inf, "num_prompts": 1,
            "random_input_len": 128, "random_output_len": 128, "random_range_ratio": 1.0}
    return BenchRun(source=f"{path}:{int(samples['line'].iloc[0])}", args=args, summary=summary,
                    extra={"server_info": info} if isinstance(info, dict) and info else {})


def refuse_log_params(params: Sequence[str]) -> None:
    """Refuse a parameter a server log's decode lines cannot determine (anything but
    :data:`analysis.calibrate_bench.LOG_ONLY_PARAMS`), naming why for the groups of
    :data:`NOT_FROM_LOGS`.

    Raises:
        ConfigError: the first such parameter."""
    for p in params:
        if p in LOG_ONLY_PARAMS:
            continue
        why = NOT_FROM_LOGS.get(p, "it prices no decode or verify step" if p in GROUPS or not p.startswith("gpu.")
                                else "not a decode or verify step's term")
        raise ConfigError("<command line>", "--params", p,
                          f"not determined by server logs alone ({why}); their decode lines determine "
                          f"{', '.join(LOG_ONLY_PARAMS)}: fit {p} with bench_serving runs of the server "
                          "(--from RUNS.jsonl LOG) or leave it out")


def refuse_unmoved_params(params: Sequence[str], profile: Any, samples: Any, server: Any, names: str) -> None:
    """Refuse a parameter that changes the price of no sampled step on this profile and server:
    ``gpu.decode`` for a speculative server's verify steps, ``gpu.draft_step`` for a plain
    one's, any of them where every step is priced host-paced.

    Raises:
        ConfigError: the first such parameter."""
    base = _step_errors(samples, profile, server)
    kind = "verify" if server.speculative_algorithm.enabled else "decode"
    for p in params:
        moved = _step_errors(samples, scale_profile(profile, {p: 2.0}), server)
        if np.allclose(moved, base, rtol=0.0, atol=1e-12):
            raise ConfigError("<command line>", "--params", p,
                              f"prices none of the {len(samples)} pure-decode step(s) of {names} on this profile and "
                              f"server (the cost model prices their {kind} steps from other terms, or as host-paced), "
                              "so the log cannot determine it; fit "
                              f"{'gpu.verify' if kind == 'verify' else 'gpu.decode'} or decode")


def fit_log(samples: Any, profile: Any, params: Sequence[str], server: Any, *, prior_sd: dict[str, float] | None = None,
            max_evals: int = 60, progress: Any = None) -> FitResult:
    """Least squares of the log factors of ``params`` on the samples' step-time errors
    (module docstring); the result as a fit with runs gives it, with no run (``before`` and
    ``after`` empty), the log's mean squared log error as both the loss and the log term, and
    :attr:`FitResult.log_only` set.

    Args:
        samples: :func:`analysis.server_log.decode_step_samples` of the logs, at least one.
        profile: the starting profile (factors 1).
        params: parameters (:data:`analysis.calibrate_bench.LOG_ONLY_PARAMS`).
        server: the server pricing the steps (``sim.server_args.ServerArgs``).
        prior_sd: parameter -> standard deviation of its log factor (None: no prior, the
            mean squared log error is minimised).
        max_evals: evaluations allowed, the Jacobians' included (a hard cap: the best point
            evaluated is kept and :attr:`FitResult.capped` says so).
        progress: callable(eval index, objective, factors) or None.
    """
    n = len(samples)
    prior = np.array([(prior_sd or {}).get(p, math.inf) for p in params])
    weighed = bool(np.isfinite(prior).any())
    sigma = 1.0
    if weighed:
        # one sample's noise: the scatter of the errors about their mean at the profile (a
        # factor moves every GPU-paced step's log error alike, leaving the scatter)
        at_profile = _step_errors(samples, scale_profile(profile, dict.fromkeys(params, 1.0)), server)
        sigma = max(float(np.std(at_profile, ddof=1)) if n > 1 else 0.0, NOISE_FLOOR)

    def errors(z: np.ndarray) -> np.ndarray:
        return _step_errors(samples, scale_profile(profile, dict(zip(params, np.exp(z).tolist(), strict=True))), server)

    def evaluated(count: int, z: np.ndarray) -> None:
        progress(count, lsq.loss(z), np.exp(z))

    lsq = LogFactorFit(errors, prior, max_evals, scale=sigma if weighed else math.sqrt(n),
                       on_new=evaluated if progress is not None else None)
    z0 = np.zeros(len(params))
    r0 = lsq.residuals(z0)
    capped = ""
    try:
        if lsq.solve(z0, xtol=1e-4, ftol=1e-6)[1]:
            capped = "fit"
    except CapReached:
        capped = "fit"
    best = lsq.best()   # the best point evaluated, a Jacobian's step included
    r1 = lsq.residuals(best)
    cov = None
    try:
        cov = lsq.covariance(best)
    except CapReached:
        capped = capped or "covariance"
    factors = dict(zip(params, np.exp(best).tolist(), strict=True))
    msle0, msle1 = float(np.mean(r0 ** 2)), float(np.mean(r1 ** 2))
    return FitResult(factors, scale_profile(profile, factors), [], [], msle0, msle1, len(lsq.evaluated), msle0, msle1,
                     prior_sd={p: float(v) for p, v in zip(params, prior, strict=True) if math.isfinite(v)},
                     noise={"server-log decode step": sigma} if weighed else {}, cov=cov, figures=n,
                     max_evals=max_evals, capped=capped, log_only=True,
                     objective_before=lsq.loss(z0) if weighed else None,
                     objective_after=lsq.loss(best) if weighed else None)


def _band(b: float) -> str:
    """The #running-req band of a sample in the table: 1, 2-3, 4-7, 8-15, ..."""
    lo = 1 << max(int(math.floor(math.log2(max(b, 1)))), 0)
    return f"{lo}" if lo == 1 else f"{lo}-{2 * lo - 1}"


def log_fit_table(samples: Any, profile: Any, fitted: Any, server: Any) -> list[dict[str, Any]]:
    """Rows of :func:`analysis.calibrate_bench.format_fit_table` for a log-only fit: one per log
    and ``#running-req`` band (1, 2-3, 4-7, ...; in that order), the geometric means of the
    logged and predicted step times (ms) of its samples before and after the fit, and their
    errors in % (exp of the mean log error, the fit's own measure); the run column names the
    log, the band and the sample count."""
    before = np.exp(_step_errors(samples, profile, server)) * samples["step_s"].to_numpy()
    after = np.exp(_step_errors(samples, fitted, server)) * samples["step_s"].to_numpy()
    metric = "verify_step_ms" if server.speculative_algorithm.enabled else "decode_step_ms"
    frame = samples.assign(before=before, after=after, band=[_band(b) for b in samples["running_req"]],
                           lo=[int(_band(b).split("-")[0]) for b in samples["running_req"]])
    rows = []
    for (log, lo), g in frame.groupby(["log", "lo"], sort=False):
        measured = float(np.exp(np.log(g["step_s"]).mean())) * 1e3
        row = {"run": f"{input_name(log)} #running-req {g['band'].iloc[0]} ({len(g)} steps)", "metric": metric,
               "measured": measured, "no_error": None}
        for k in ("before", "after"):
            row[k] = float(np.exp(np.log(g[k]).mean())) * 1e3
            row[f"error_{k}_pct"] = (row[k] / measured - 1) * 100
        rows.append((str(log), lo, row))
    order = list(dict.fromkeys(str(x) for x in samples["log"]))
    return [r for _, _, r in sorted(rows, key=lambda t: (order.index(t[0]), t[1]))]


def cmd_calibrate_logs(args: argparse.Namespace, given_params: str | None) -> int:
    """``specsched calibrate --from LOG [LOG ...] --profile P --out NEW`` (or ``--server-log``
    without runs): the decode factor fitted to the logs' pure-decode lines (module docstring)."""
    from specsched.analysis.bench_cli import refuse_out_over_inputs
    from specsched.analysis.calibrate_bench import (
        check_log_matches,
        check_logs_same_launch,
        say_log_parallelism,
    )
    from specsched.analysis.from_bench import SETUP_MISMATCH
    from specsched.analysis.server_log import (
        decode_step_samples,
        format_log_summary,
        parse_server_log,
        prefill_summary,
    )
    from specsched.sim.profile import load_profile, resolve_profile_path

    paths = list(args.server_log)
    if args.metrics:   # a log has no bench_serving figure
        raise ConfigError("<command line>", "--metrics", args.metrics, "names bench_serving figures, and server logs "
                          "alone have none (their decode lines' step times are fitted): leave --metrics out, or give "
                          "the runs (--from RUNS.jsonl LOG)")
    refuse_out_over_inputs(Path(args.out), [*(("a server log", f) for f in paths),
                                            ("the scenario template", args.scenario_template),
                                            ("the input profile (--profile)", resolve_profile_path(args.profile))])
    params = [p.strip() for p in given_params.split(",") if p.strip()] if given_params else list(LOG_ONLY_DEFAULT)
    refuse_log_params(params)
    profile = load_profile(args.profile)
    scale_profile(profile, dict.fromkeys(params, 1.0))   # a key this profile lacks, refused before the fit
    import pandas as pd

    logs = [(path, parse_server_log(path)) for path in paths]
    check_logs_same_launch([(path, log.attrs.get("server_info")) for path, log in logs])
    parts = []
    for path, log in logs:
        steps = decode_step_samples(log)
        if not len(steps):
            n = int((log["kind"] == "decode").sum())
            have = (f"{n} 'Decode batch' line(s), none timing a pure decode step" if n else
                    "no 'Decode batch' line (a prefill-decode prefill server's log)")
            raise ConfigError(path, "Decode batch", have,
                              "a fit from server logs alone needs 'Decode batch' lines each logged right after another "
                              "decode line of its rank with the same #running-req, #queue-req 0, a #token (or "
                              "#full token) and a gen throughput above 0 (an unchanged batch over one "
                              "decode_log_interval); give the log of a server that decoded so, or bench_serving runs "
                              "of the server (--from RUNS.jsonl LOG)")
        parts.append(steps.assign(log=path))
    samples = pd.concat(parts, ignore_index=True)
    names = ", ".join(input_name(p) for p in paths)
    with tempfile.TemporaryDirectory() as tmp:
        case: FitCase = cases_from_runs([stand_in_run(logs, samples)], args.profile, args.scenario_template,
                                        Path(tmp))[0]
    server = case.scenario.server
    for path, log in logs:
        say_log_parallelism(log, path, profile, args.profile)
        check_log_matches(log, path, server, log_only=True)
    from specsched.analysis.calibrate_bench import refuse_decode_via_verify

    refuse_decode_via_verify(params, profile, [case])
    refuse_unmoved_params(params, profile, samples, server, names)
    info = logs[0][1].attrs.get("server_info")
    steps_of = "log's" if len(logs) == 1 else "logs'"
    if args.scenario_template:
        print(f"server: the template {Path(args.scenario_template).name} prices the {steps_of} steps")
    elif info:
        print(f"server: the launch settings of {input_name(logs[0][0])} (its server_args= line, {len(info)} keys) price "
              f"the {steps_of} steps")
    else:
        print(f"server: {input_name(logs[0][0])} has no server_args= line: specsched's defaults for the profile price "
              f"the {steps_of} steps (state the server with --scenario-template)")
    for note in case.scenario.assumptions:
        if "says the server decoded speculatively" in note:   # the drafter assumed for the accept lengths
            print(note.replace("the line's accept_length", "the logs' mean accept len").replace("the line ", "the log "))
        elif note.startswith(SETUP_MISMATCH) and not note.startswith(f"{SETUP_MISMATCH}acceptance"):
            print(f"warning: {names}: {note.removeprefix(SETUP_MISMATCH)}", file=sys.stderr)
    spec = server.speculative_algorithm
    print(f"server: {'speculative ' + spec.value + ', verify window ' + str(server.spec_window) if spec.enabled else 'plain decode'}"
          f", overlap scheduler {'on' if server.enable_overlap_schedule else 'off'}")
    for path, log in logs:
        print(f"server log {path}:")
        for line in format_log_summary(prefill_summary(log), int((samples["log"] == path).sum())):
            print(f"  {line}")
    kept = [g for g in NOT_FROM_LOGS if g not in params]
    print(f"not fitted: {', '.join(kept)}: server logs alone do not determine them; left at the profile's values "
          f"({'; '.join(f'{g}: {NOT_FROM_LOGS[g]}' for g in kept)})")
    print(f"fit: {len(samples)} pure-decode step(s) of {len(logs)} log(s), no bench_serving run; at most "
          f"{args.max_evals} evaluations (--max-evals)")

    def progress(i: int, loss: float, f: np.ndarray) -> None:
        if i % 5 == 0 or i == 1:
            print(f"  eval {i:3d}/{args.max_evals}: objective {loss:.4g}  "
                  + "  ".join(f"{p} x{v:.3f}" for p, v in zip(params, f, strict=True)))

    from specsched.sim.profile import analytic_costs

    prior = parse_prior(args.prior, params, analytic=analytic_costs(profile))
    result = fit_log(samples, profile, params, server, prior_sd=prior, max_evals=args.max_evals, progress=progress)
    print(format_fit_table(log_fit_table(samples, profile, result.profile, server), terminal_width()))
    if result.prior_sd:
        print(result.weighting())
    print(f"factors: {result.factors_text()}; {result.loss_text()} ({result.evals} evaluations)")
    for line in result.stopped() + result.identifiability():
        print(line)
    print(f"server-log decode steps: mean squared log error {result.log_before:.4g} -> {result.log_after:.4g}")
    out = write_profile(result, args.out, args.name or Path(args.out).stem, [], paths, args.seeds, [],
                        log_steps=len(samples), kept=[f"{g} ({NOT_FROM_LOGS[g]})" for g in kept])
    print(f"wrote {out}")
    return 0
