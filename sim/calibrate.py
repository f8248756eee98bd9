"""Refit the MI355X profile to the reference figures and print the fit.

``specsched calibrate [--write]`` (or ``python -m specsched.sim.calibrate``). What is fitted, from
what (every figure is the base arm unless stated; they are carried in the scenarios'
``reference`` blocks, restated with their source in docs/reference-data.md):

1. host stall per verify (host.launch_s + host.sync_wakeup_s) = batch-1 wall per verify of
   the base arm (9.19 ms) minus the host-sync-fix arm (8.60 ms): the one paired figure
   given for calibration. gpu.verify at batch 1 = 8.60 ms (with the fix the host never
   blocks, so the wall is GPU work).
2. gpu.verify at batch 8, 32, 64 = 1 / (verify cycles/s) - host stall (closed form; the
   simulation then checks it).
3. By simulation (Nelder-Mead on the squared relative errors of seed means): the
   acceptance mean (batch-1 decode tok/s = 351.7 at 9.19 ms per verify), the per-request
   acceptance spread, the prefill cost per token and gpu.verify at batch 256, against the
   256 burst's output tok/s, median and max TTFT and median TPOT. Every simulated figure
   is the mean over ``--seeds`` seeds (1..K): a fit to one seed's draws of arrival order,
   lengths and accept lengths would carry that seed's luck into the profile.
4. gpu.draft_step (one draft-model forward, by tokens) keeps its share of the verify cycle
   at equal tokens (an assumption, named in the provenance): it follows the refit verify.
5. The context axis. Every reference cell runs ~4K-token prompts, so the figures fix each
   grid at one context only: gpu.verify (and gpu.draft_step) at the LL cells' mean context
   (:data:`VERIFY_CONTEXT`, prompts of 3891-4096 tokens plus half of 1024 outputs), gpu.extend
   at their keys per extend token (:data:`EXTEND_CONTEXT`, half a prompt, no prefix). Their
   growth with context, which no cell measures, is the analytic roofline's for the same
   model, GPU and TP (:data:`ANALYTIC`: the KV bytes each request reads and the attention
   work per extend token, :mod:`sim.analytic`): the second column is the first plus the
   analytic grid's difference between the two contexts, row by row, so the fitted values
   stay as fitted at the cells' context and a 32K-prompt what-if grows as that model
   reads its KV (before, one column priced every context alike).

The scenarios' acceptance blocks (a workload property) and the profile's values are
rewritten with ``--write``; the profile's provenance block says where each came from.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import numpy as np
import yaml
from scipy.optimize import minimize
from specsched.sim.bundled import profiles_dir, scenarios_dir
from specsched.sim.cli_types import positive_int, seed_count
from specsched.sim.config import Scenario, load_scenario, with_value
from specsched.sim.engine import run_scenario
from specsched.sim.metrics import error_pct
from specsched.sim.profile import Profile, load_profile
from specsched.sim.results import atomic_write_text

PROFILE = profiles_dir() / "mi355x-dsv41-flash-tp4.yaml"
LL_CELLS = {1: "batch1-ll", 8: "batch8-ll", 32: "batch32-ll", 64: "batch64-ll"}
BURST = "burst256-ht"
BURST_KEYS = ("output_throughput", "median_ttft_ms", "max_ttft_ms", "median_tpot_ms")
SEEDS = 5
"""Seeds (1..SEEDS) each simulated figure is averaged over, in the fit and the report."""
ANALYTIC = ("deepseek-v4-flash", "mi355x", 4)
"""(shipped model, GPU, TP) of System A (DeepSeek-V4.1-Flash on 4 MI355X, TP4/EP4): whose
analytic roofline gives the grids' growth with context (step 5)."""
VERIFY_CONTEXT = (4500.0, 32768.0)
"""gpu.verify / gpu.draft_step context columns (tokens per request): the LL cells' mean
context (3993.5-token prompts on average plus half of 1024 outputs) and 32K."""
EXTEND_CONTEXT = (2000.0, 32768.0)
"""gpu.extend context columns (keys per extend token, prefix plus half the extend): the
burst's prompts (3993.5 tokens on average, no prefix) and 32K."""


def analytic_growth() -> tuple[Any, Any]:
    """(verify, extend) interpolators of the analytic profile of :data:`ANALYTIC` (window 6,
    block drafter, as System A's DSpark): their context axes give step 5's growth."""
    from specsched.sim.analytic.gpus import load_gpu
    from specsched.sim.analytic.models import load_model
    from specsched.sim.analytic.writer import build_profile

    model, gpu, tp = ANALYTIC
    prof = Profile.model_validate(build_profile(load_model(model), load_gpu(gpu), tp, window=6, drafter="block"))
    return prof.gpu.verify.interpolator("gpu.verify"), prof.gpu.extend.interpolator("gpu.extend")


def with_growth(xs: list[float], first: list[float], interp: Any, cols: tuple[float, float]) -> list[list[float]]:
    """Rows ``[v, v + A(x, c1) - A(x, c0)]``: each fitted value ``v`` (at ``x``, context
    ``c0``) and the same plus the analytic grid ``A``'s growth from ``c0`` to ``c1``."""
    c0, c1 = cols
    return [[v, v + max(0.0, interp(x, c1) - interp(x, c0))] for x, v in zip(xs, first, strict=True)]


def seed_mean(sc: Scenario, profile: Profile, seeds: int = SEEDS) -> dict[str, float]:
    """Mean of every numeric summary figure over seeds 1..``seeds``."""
    runs = [run_scenario(sc, seed=k, profile=profile).summary for k in range(1, seeds + 1)]
    return {k: float(np.mean([r[k] for r in runs])) for k, v in runs[0].items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _scenario(name: str, arm: str = "base") -> Scenario:
    return load_scenario(scenarios_dir() / f"{name}.yaml", arm)


def closed_form(profile: Profile) -> dict[str, Any]:
    """Steps 1 and 2: the host stall and the LL verify grid from the reference figures."""
    b1 = _scenario(LL_CELLS[1])
    wall_base = b1.reference["base"]["verify_wall_ms"] / 1000
    wall_fix = b1.reference["stream_wait"]["verify_wall_ms"] / 1000
    stall = wall_base - wall_fix
    launch = stall - profile.host.sync_wakeup_s
    verify = {1: wall_fix}
    for b in (8, 32, 64):
        verify[b] = 1.0 / _scenario(LL_CELLS[b]).reference["base"]["verify_cycles_per_s"] - stall
    return {"stall": stall, "launch_s": launch, "verify": verify}


def draft_share(profile: Profile) -> float:
    """The drafter's share of a verify cycle: ``gpu.draft_step`` over ``gpu.verify`` at batch
    1 (step 4's assumption); 0 without a draft grid."""
    d, v = profile.gpu.draft_step, profile.gpu.verify
    return d.seconds[0][0] / v.seconds[0][0] if d is not None and v is not None else 0.0


def extend_grid(extend_16k: float, verify_1: float, profile: Profile, growth: tuple[Any, Any]) -> dict[str, Any]:
    """The extend grid at :data:`EXTEND_CONTEXT`: at the cells' column, linear in tokens
    through ``extend_16k`` at 16384 tokens, and never below one request's target forward,
    the batch-1 verify ``verify_1`` less the drafter's share of it (:func:`draft_share`). An
    extend forward reads every weight at least once, as the batch-1 verify's target forward
    over its window does: through the origin alone, a 64-token prompt cost 0.9 ms on the
    MI355X profile against 8.6 ms for a 6-token verify. That floor is a forward with no
    context to read (the batch-1 verify less its KV read at its column, from ``growth``'s
    analytic verify); at the extend's column it adds the attention work of that many keys
    per token. The second column is step 5's (:func:`with_growth`)."""
    verify_a, extend_a = growth
    c0 = EXTEND_CONTEXT[0]
    per_tok = extend_16k / 16384
    share = draft_share(profile)
    floor = verify_1 * (1.0 - share)
    knee = floor / per_tok
    if not 1.0 < knee < 16384:
        xs, first = [1, 16384], [per_tok, extend_16k]
    else:
        kv_read_1 = max(0.0, verify_a(1, VERIFY_CONTEXT[0]) - verify_a(1, 0.0)) * (1.0 - share)
        xs = [1.0, round(knee, 1), 16384.0]
        first = [floor + max(0.0, extend_a(x, c0) - extend_a(x, 0.0)) - kv_read_1 for x in xs[:2]] + [extend_16k]
    return {"x": xs, "context_len": list(EXTEND_CONTEXT), "seconds": with_growth(xs, first, extend_a, EXTEND_CONTEXT)}


def apply(profile: Profile, cf: dict[str, Any], extend_16k: float, verify_256: float,
          growth: tuple[Any, Any] | None = None) -> Profile:
    """A profile with the fitted values put in, each grid's second context column from
    ``growth`` (:func:`analytic_growth`; computed when not given)."""
    growth = growth if growth is not None else analytic_growth()
    p = with_value(profile, "host.launch_s", cf["launch_s"])
    g = p.gpu.verify
    xs = [1, 8, 32, 64, 256]
    first = [cf["verify"][b] for b in xs[:-1]] + [verify_256]
    secs = with_growth(xs, first, growth[0], VERIFY_CONTEXT)
    # each grid keeps the contexts its fitted column was measured over
    p = with_value(p, "gpu.verify", {"x": xs, "context_len": list(VERIFY_CONTEXT), "seconds": secs,
                                     "context_span": g.context_span})
    p = with_value(p, "gpu.extend", {**extend_grid(extend_16k, cf["verify"][1], profile, growth),
                                     "context_span": p.gpu.extend.context_span})
    inject_share = profile.gpu.draft_inject_per_token_s / (profile.gpu.extend.seconds[-1][0] / 16384 + profile.gpu.draft_inject_per_token_s)
    per_tok = extend_16k / 16384
    p = with_value(p, "gpu.draft_inject_per_token_s", per_tok * inject_share / (1 - inject_share))
    d, w0 = profile.gpu.draft_step, profile.gpu.verify_window
    if d is not None and w0 is not None:
        share = draft_share(profile)
        p = with_value(p, "gpu.draft_step", {"x": [b * w0 for b in xs], "context_len": list(VERIFY_CONTEXT),
                                             "seconds": [[share * v for v in r] for r in secs],
                                             "context_span": d.context_span})
    return p


def _acc(sc: Scenario, mean: float, spread: float) -> Scenario:
    return with_value(with_value(sc, "acceptance.mean_accept_length", mean), "acceptance.request_spread", spread)


def evaluate(profile: Profile, mean: float, spread: float, seeds: int = SEEDS) -> dict[str, dict[str, float]]:
    """Simulate every System-A base cell with these values; seed-mean summaries by cell."""
    return {name: seed_mean(_acc(_scenario(name), mean, spread), profile, seeds) for name in [*LL_CELLS.values(), BURST]}


def fit(verbose: bool = True, max_evals: int = 160, seeds: int = SEEDS) -> tuple[Profile, float, float, dict]:
    """Run the fit on seed means; returns (profile, mean_accept_length, request_spread,
    fit report)."""
    base = load_profile(str(PROFILE))
    cf = closed_form(base)
    b1 = _scenario(LL_CELLS[1])
    burst = _scenario(BURST)
    ref_b1 = b1.reference["base"]["decode_throughput"]
    ref_burst = burst.reference["base"]
    x0 = np.array([burst.acceptance.mean_accept_length, burst.acceptance.request_spread,
                   base.gpu.extend.seconds[-1][0], base.gpu.verify.seconds[-1][0]])
    scale = x0.copy()
    evals = [0]
    growth = analytic_growth()

    def objective(z: np.ndarray) -> float:
        mean, spread, ext, v256 = z * scale
        if not (1.0 < mean < 6.0 and 0 <= spread < 3 and ext > 0 and v256 > cf["verify"][64]):
            return 1e6
        prof = apply(base, cf, ext, v256, growth)
        s1 = seed_mean(_acc(b1, mean, spread), prof, seeds)
        sb = seed_mean(_acc(burst, mean, spread), prof, seeds)
        errs = [(s1["decode_throughput"] - ref_b1) / ref_b1]
        errs += [(sb[k] - ref_burst[k]) / ref_burst[k] for k in BURST_KEYS]
        loss = float(np.sum(np.square(errs)))
        evals[0] += 1
        if verbose and evals[0] % 10 == 0:
            print(f"  eval {evals[0]:3d}: loss {loss:.2e}  mean {mean:.3f} spread {spread:.3f} "
                  f"extend(16K) {ext * 1000:.1f} ms verify(256) {v256 * 1000:.2f} ms", file=sys.stderr)
        return loss

    res = minimize(objective, np.ones(4), method="Nelder-Mead",
                   options={"maxfev": max_evals, "xatol": 1e-4, "fatol": 1e-7, "initial_simplex": None})
    mean, spread, ext, v256 = res.x * scale
    prof = apply(base, cf, ext, v256, growth)
    # scipy's Nelder-Mead stops at maxfev calls (status 1) with its best vertex
    return prof, float(mean), float(spread), {"loss": float(res.fun), "evals": evals[0], "closed_form": cf,
                                              "capped": res.status == 1}


def report(profile: Profile, mean: float, spread: float, seeds: int = SEEDS) -> str:
    """Predicted (mean over seeds 1..``seeds``) vs reference for every System-A base-arm
    figure (and the batch-1 pair)."""
    # the note on its own line: after the header it made that line 105 characters (wrapped at 80)
    lines = [f"model: mean of {seeds} seeds", f"{'cell':<14}{'arm':<12}{'metric':<22}{'reference':>11}{'model':>11}{'error':>8}"]
    for name in [*LL_CELLS.values(), BURST]:
        sc0 = _scenario(name)
        for arm, refs in sc0.reference.items():
            s = seed_mean(_acc(_scenario(name, arm), mean, spread), profile, seeds)
            for k, ref in refs.items():
                lines.append(f"{name:<14}{arm:<12}{k:<22}{ref:>11.2f}{s[k]:>11.2f}{error_pct(s[k], ref):>+7.2f}%")
    return "\n".join(lines)


class _FlowListDumper(yaml.SafeDumper):
    """Lists of numbers on one line, mappings as blocks."""


_FlowListDumper.add_representer(
    list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def _round(v: Any) -> Any:
    """Six significant digits: the fit is not better than that."""
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def write(profile: Profile, mean: float, spread: float) -> None:
    """Rewrite the profile's fitted values (keeping its header comments and provenance) and
    the System-A scenarios' acceptance blocks."""
    text = PROFILE.read_text()
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    data = yaml.safe_load(text)
    dumped = profile.model_dump(mode="json", exclude={"path"})
    data["gpu"], data["host"] = _round(dumped["gpu"]), _round(dumped["host"])
    atomic_write_text(PROFILE, header + yaml.dump(data, Dumper=_FlowListDumper, sort_keys=False, width=100))
    for name in [*LL_CELLS.values(), BURST]:
        p = scenarios_dir() / f"{name}.yaml"
        t = p.read_text()
        t = re.sub(r"(\n  mean_accept_length: )[0-9.]+", rf"\g<1>{mean:.4f}", t)
        t = re.sub(r"(\n  request_spread: )[0-9.]+", rf"\g<1>{spread:.4f}", t)
        atomic_write_text(p, t)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``specsched calibrate [--report-only | --write]``: the MI355X reference fit."""
    if args.report_only:
        sc = _scenario(BURST)
        print(report(load_profile(str(PROFILE)), sc.acceptance.mean_accept_length, sc.acceptance.request_spread, args.seeds))
        return 0
    prof, mean, spread, info = fit(max_evals=args.max_evals, seeds=args.seeds)
    cf = info["closed_form"]
    print(f"host stall per verify: {cf['stall'] * 1000:.3f} ms (launch_s {cf['launch_s'] * 1000:.3f} ms)")
    print("gpu.verify (ms): " + ", ".join(f"bs {b}: {s[0] * 1000:.3f}" for b, s in zip(prof.gpu.verify.x, prof.gpu.verify.seconds, strict=True)))
    print(f"gpu.extend: {prof.gpu.extend.seconds[-1][0] * 1000:.1f} ms per 16384 tokens; "
          f"inject {prof.gpu.draft_inject_per_token_s * 1e6:.3f} us/token")
    print(f"acceptance: mean_accept_length {mean:.4f}, request_spread {spread:.4f}  "
          f"(loss {info['loss']:.2e} after {info['evals']} simulations)")
    if info["capped"]:
        print(f"stopped by --max-evals {args.max_evals}: the fit reached its cap before it converged; these are the "
              "best values evaluated (raise --max-evals to finish it)")
    print(report(prof, mean, spread, args.seeds))
    if args.write:
        write(prof, mean, spread)
        print(f"wrote {PROFILE} and the System-A scenarios' acceptance blocks")
    else:
        print("nothing written: add --write to store these values in the profile and scenarios")
    return 0


def add_arguments(c: argparse.ArgumentParser) -> None:
    """Add the reference fit's options to a ``calibrate`` parser (``--seeds`` and
    ``--max-evals`` are shared with ``--from``, analysis/calibrate_bench.py)."""
    c.add_argument("--write", action="store_true", help="write the fitted values into the profile and scenarios")
    c.add_argument("--report-only", action="store_true", help="only print predicted vs reference with the current files")
    c.add_argument("--max-evals", type=positive_int, default=160, help="objective evaluations the fit may run, a hard cap (each simulates two cells x --seeds; with --from, each "
                        "simulates every run x --seeds, and the start scan's and the Jacobians' count too); a fit the cap "
                        "stops keeps the best point evaluated and says so")
    c.add_argument("--seeds", type=seed_count, default=SEEDS, help="seeds (1..K) each simulated figure is averaged over")


def add_parsers(sub: Any) -> None:
    """Register ``calibrate`` with the reference fit alone (``python -m specsched.sim.calibrate``;
    the ``specsched`` CLI registers it with ``--from`` too, in analysis/calibrate_bench.py)."""
    c = sub.add_parser("calibrate", help="refit the MI355X profile to the reference figures and print the fit")
    add_arguments(c)
    c.set_defaults(func=cmd_calibrate)


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m specsched.sim.calibrate")
    add_parsers(p.add_subparsers(dest="cmd", required=True))
    a = p.parse_args(["calibrate", *sys.argv[1:]])
    sys.exit(a.func(a))
