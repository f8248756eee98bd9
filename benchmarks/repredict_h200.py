"""Predict the recorded H200 measurements again with another profile (no GPU needed).

The measured side of a validation (``validate*.csv`` written by benchmarks/gpu_validate.py:
cell, arm, metric, predicted, measured, error_pct) stays as it was measured; the predicted
side is simulated again from the scenario (scenarios/h200/CELL.yaml, arm; ``CELL@RATE``
rows are the Poisson runs at that request rate with --poisson-requests requests) with
``--profile``. Prints and writes old and new errors side by side.

    python benchmarks/repredict_h200.py docs/measurements/h200-v2/validate-run1.csv \\
        docs/measurements/h200-v2/validate-run2.csv \\
        --profile docs/measurements/h200-v2/h200-1b-refit.yaml \\
        --out docs/measurements/h200-v2/repredict-refit.csv

``--mean``: with several CSVs of the same cells (repeated runs, e.g. ``validate.csv`` and
``validate-run2.csv``), the measured side is their mean per (cell, arm, metric), and the
run-to-run spread (|run - mean| / mean, largest over runs) is printed and written per row
(``run_spread_pct``): no prediction can be held to less than the measurement repeats.
Without it the last file's row wins.

``--measured-results DIR`` (the measured results directories, e.g. an extracted
``results.tar.gz``: ``DIR/CELL-ARM-measured`` or ``DIR/CELL-rateR-measured``): the measured
TTFT figures are recomputed from each run's ``requests.parquet`` with bench_serving's send
times (sim.workload.Clients: the arrival, or the freed slot's time) instead of the
recorded start, for runs made before the runtime stamped send times (it stamped the
loop's next poll, leaving the wait to it out of TTFT). Rows changed are marked.

With ``--measured-results`` each run is predicted with the accept draws the runtime forced
on it: runs made before the accept draws had a seed key of their own ran the old key's
(acceptance ``seed_key: shared``), read per run from its requests' verify counts
(:func:`with_recorded_accept_key`; ``--set acceptance.seed_key=...`` instead sets it for all).

``--host-speed`` (with ``--measured-results``): also predict every run conditioned on the
host speed it was measured at (scenario ``host.speed_factor``, sim/host_speed.py;
docs/host-speed.md), and print both counts. Each run's factor comes from, in order:

1. ``reference``: its ``summary.json`` ``host_speed.reference_work_s`` over the profile's
   ``host.reference_work_s`` (rounds made with runtime/host_reference.py);
2. ``launch``: its ``host_probe.parquet`` (round 10 on): the median over its graph-replayed
   verify launch calls (batch <= the scenario's cuda_graph_max_bs) of the call's thread CPU
   over the profile's own timing of the same call at the same batch size (the engine's
   verify launch, medians in the provenance of ``host.launch_s``;
   runtime.host_reference.launch_speed_factor). Runs without a graph-replayed verify (the
   plain-decoding cells: their decode launch is another call) get none.
   ``--launch-reference round-p25`` / ``round-median`` instead divide by the round's own
   lower quartile / median of the same (mode, batch size) calls over every run given
   (decode launches included): the host's speed against the round's fast / typical level,
   a sensitivity check of the reference (docs/measurements/h200-v10-host-speed.md);
3. ``none``: factor 1 (round 9 and earlier have no per-run host reading).

``--speed-source launch`` skips 1, so a round with both readings (round 11 on) can be
conditioned on each in turn and the two compared.

Written per row: ``speed_factor``, ``speed_source``, ``cond_predicted``, ``cond_error_pct``.

``--per-term`` (with ``--host-speed``): a third prediction, each host term scaled by the
run's reference work over the reference speed at which that term was measured (scenario
``host.reference_work_s``, profile ``host.reference_work_by_term``, sim/host_speed.py).
Profiles written before the structured field get it from their provenance text
(runtime.host_reference.term_references_from_provenance: per-phase medians, the p10 as the
fast level). A run read from its launch calls (round 10: no reference work anywhere) has
the factor applied to the launch phase's terms only, the ones timed on the same call at the
same level; the other phases' levels are unknown and their terms are left as profiled.
Written per row: ``term_predicted``, ``term_error_pct``; printed: the three counts, per
metric and for the GPU-paced arms (stream_wait, both) apart from the rest.

``--refit-slot-expansion``: ``host.slot_expansion_s`` refitted from the profile's own
provenance by the current rule (the measured gap less the wake-up; profiles up to round 15
subtracted the injection's preparation too, docs/measurements/h200-v15.md "burst66 TTFT").

``--refit-eager-issue``: ``gpu.eager_host_issue_s`` refitted from the eager points its own
provenance records by the current rule (runtime.profile_fit.fast_level_issue: the lower quartile
of the points on the fast level; profiles up to round 29 took the lower quartile of all points,
which came from the slow level when fewer than a quarter were fast, docs/measurements/
h200-v29-eager.md).

``--inject-prepare-from-provenance``: ``host.inject_prepare_s`` (the injection's preparation,
which the inject launch after a slot-expansion block does not repeat) taken from the
preparation medians of the profile's own ``host.slot_expansion_s`` provenance, for profiles
made before the field existed (runtime.profile_fit.refit_inject_prepare).

``--verify-excess-at-loop-width``: ``gpu.verify`` refitted from its own provenance with the
verify excess taken against the bare cycle at the stall loop's own attention width
(runtime.profile_fit.refit_verify_excess), for profiles whose excess was taken against the
grid's last column, 320 positions narrower (docs/measurements/h200-v26.md, "The verify excess").

``--launch-per-req-from-runs`` (with ``--measured-results``): an ESTIMATE, read from the runs,
not a microbenchmark prediction. The profiler times the verify launch on rows past the
largest grid context (8257 positions), each step reserving its own window, where its launch
call grows with batch three to four times as fast as the engine's at the cells' 1-2K
(docs/measurements/h200-v17.md "The launch call's slope"); the provenance holds no stall
timed as the engine launches to refit from. So
``host.launch_per_req_s`` is scaled by the engine's launch call slope over batch size (the
runs' ``host_probe.parquet``: per run and batch size with at least 20 graph-replayed verify
launches, the median thread CPU; one line through all of them) over the profiler's own
stall-loop launch call slope (block-loop walls in the provenance of ``host.launch_s``), the
ratio the stall's per-request part is assumed to share. ``host.launch_s`` stays.

``--result-path-from-runs DIR`` (measured results directories, as ``--measured-results``, which
it does not need): an ESTIMATE, read from the runs,
not a microbenchmark prediction. Profiles made before ``host.result_path_s`` /
``host.recv_path_s`` (the loop's host path from a step's results to the next schedule pass,
runtime/profile_host.py ``stall_phase``'s no-overlap loop) hold nothing that times it: no
profiler loop of theirs ran the delivery, the receive or the timing reads. So the path is
read off the runs' forwards launched onto an idle stream (benchmarks/idle_launch_split.py
``idle_launches``, a gap over 0.2 ms; every ``DIR/*-measured`` run): per forward, its
``end->pass`` (the previous forward's end to the schedule pass that built it) less what the
simulator already charges there (``host.sync_wakeup_s``, ``host.process_*`` and
``host.schedule_*`` at the forward's batch size), the median over the forwards whose
``end->pass`` is under 2 ms (an idle server's wait for a request is longer). The whole
estimate is charged before the delivery (``host.result_path_s``), or after it
(``host.recv_path_s``) with ``--result-path-part recv``; no per-request part; the profile's other
``host.result_path_*`` / ``host.recv_path_*`` terms are set to 0.

``--drop-result-path``: the profile's ``host.result_path_*`` and ``host.recv_path_*`` set to 0
(the simulator as it was before the terms), to set a round profiled with them beside the same
round without them.

``--extend-level launch`` (with ``--per-term``, a cross-check for profiles made before the
extend terms' reference was their prefix-0 column's samples): the extend phase's terms get,
instead of the phase's median, the reference work at which the runs' own extend launch calls
(``host_probe.parquet``, mode extend, part main; runs with at least 9) take as long as the
profile's extend issue at 1024 tokens: a line through (run's reference work, the run's median
call thread CPU) read at the profile's value (:func:`extend_issue_reference`). A reading of
the same call timed by the profiler and by the runs, as round 10's launch factor; not fitted
to any figure.

``--eager-from-calls`` (with ``--measured-results``): AFTER THE FACT, a reading of the run,
not a prediction. Each run predicted again with the host terms of the profile's extend phase
at the level of the run's own eager launches (:func:`eager_call_factors`): the extend's issue
and idle leads (:data:`EAGER_EXTEND_TERMS`) times the median over its extend launches of
(launch call - ``host.launch_s``) / issue at its tokens (the simulator's host time for that
launch is ``launch_s`` + issue), the injection's terms (:data:`EAGER_INJECT_TERMS`) times the
median of its inject launch call over its issue (less the preparation where a slot-expansion
block prepared it). Where the runs' eager issue ran at another level than the profile's
extend phase, this says what the simulator gives at the level they ran at
(docs/measurements/h200-v20.md "small-chunk base"). Written per row: ``eager_extend_factor``,
``eager_inject_factor``, ``eager_predicted``, ``eager_error_pct``.

``--fast-level``: also predict every cell with each host term put at the profile's fast level
(the median of the fastest quarter of its reference-work samples, :func:`profile_fast_level`):
scenario ``host.reference_work_s`` set to that level, so each term is scaled by the fast level
over the reference work of the phase that measured it (``host.reference_work_by_term``, or
its provenance). A profile that does not say at which level its terms were measured is left
as it is. Written per row: ``fast_level_s``, ``fast_predicted``, ``fast_error_pct``; printed:
within 5 %, mean |error| and the misses by sign (run slower or faster than predicted),
unconditioned and at the fast level. ``--one-level median`` puts every term at the profile's
median level (``host.reference_work_s``) instead, a sensitivity check. docs/host-speed.md
"One level for every host term" holds what this gave on rounds 11-23.

``--set KEY=VALUE`` (repeatable): a scenario override applied to every cell, for what the
measured runtime ran with that the cell's file does not say. Rounds made before the runtime
captured SGLang's graph batch sizes (runtime/engine.py; up to round 28) padded every
decode/verify batch to 1, 2, 4, 8, 12, 16, 24, ... whatever the drafter:
``--set server.cuda_graph_bs=[1,2,4,8,12,16,24,32,40,48,56,64]`` for cells running up to 64
(docs/measurements/h200-v27.md, "The verify cycle by batch size").

``--extend-launch none``: a what-if on issue 8's question whether the simulator charges part
of an extend's launch twice: an extend-only launch (no decode/verify rows) is charged its
kernel issue only, without ``host.launch_s + host.launch_per_req_s x batch`` (the loop's
``HostWork("launch")``, sim.cost_model.CostModel.host), which the profiler fits from its verify
stall loop. Tested on rounds 11-24 and not adopted (docs/measurements/h200-v24.md "The
extend's charge, across rounds": 1070 -> 1021 of 1525 figures within 5 %).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.analysis.overrides import check_key, load_scenario_with_overrides, parse_overrides
from specsched.runtime.cli_commands import TARGET_METRICS
from specsched.runtime.host_reference import (
    FAST_TERMS,
    PHASE_TERMS,
    launch_call_reference,
    launch_speed_factor,
    term_references_from_provenance,
)
from specsched.runtime.profile_fit import (
    refit_eager_issue,
    refit_inject_prepare,
    refit_slot_expansion,
    refit_verify_excess,
)
from specsched.sim.acceptance import recorded_seed_key
from specsched.sim.bundled import scenarios_dir
from specsched.sim.config import draft_tree, with_value
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.host_speed import SCALED_TERMS
from specsched.sim.metrics import error_pct
from specsched.sim.profile import load_profile
from specsched.sim.results import atomic_write_text
from specsched.sim.workload import replay_send_times

TARGETS = TARGET_METRICS  # the figures the 5 % target is on (issue 8)

EAGER_EXTEND_TERMS = ("launch_per_extend_s", "launch_per_extend_token_s", "extend_idle_lead_s",
                      "extend_idle_lead_by_tokens", "extend_own_idle_lead_by_tokens")
"""Host terms of the extend's eager launch (the extend phase), scaled by the extend factor."""

EAGER_INJECT_TERMS = ("launch_per_inject_s", "launch_per_inject_token_s", "inject_prepare_s", "slot_expansion_s",
                      "inject_idle_lead_by_tokens", "inject_unprepared_idle_lead_by_tokens")
"""Host terms of the drafter injection's eager launch, scaled by the injection factor."""


def without_extend_launch(host):
    """``CostModel.host`` with an extend-only launch's ``"launch"`` host work at 0 (the
    ``--extend-launch none`` what-if); every other kind and plan as ``host`` gives it."""

    def host_fn(self, kind, plan):
        if kind == "launch" and plan.num_extend >= plan.batch_size:
            return 0.0
        return host(self, kind, plan)

    return host_fn


def eager_call_factors(steps: pd.DataFrame, probe: pd.DataFrame, profile, prepared: bool,
                       min_calls: int = 9) -> tuple[float | None, float | None]:
    """(extend, injection) factors of a measured run (``steps.parquet`` and its
    ``host_probe.parquet``, row for row): the median over its extend-only launches (mode
    extend, part main) of (launch call thread CPU - ``host.launch_s``) / (launch_per_extend_s
    + launch_per_extend_token_s x tokens), and over its inject launches of the call over
    launch_per_inject_s + launch_per_inject_token_s x tokens (less ``host.inject_prepare_s``
    when ``prepared``: a slot-expansion block prepared the injection). None where fewer than
    ``min_calls`` launches or a zero issue."""
    if len(steps) != len(probe):
        raise ValueError(f"host_probe.parquet has {len(probe)} rows, steps.parquet {len(steps)}")
    h = profile.host
    mode, part = steps["mode"].to_numpy(), steps["part"].to_numpy()
    tok = steps["num_extend_tokens"].to_numpy(dtype=float)
    call = probe["host_launch_cpu_s"].to_numpy(dtype=float)

    def median_ratio(sel: np.ndarray, num: np.ndarray, den: np.ndarray) -> float | None:
        ok = sel & (den > 0) & np.isfinite(num)
        return float(np.median(num[ok] / den[ok])) if ok.sum() >= min_calls else None

    ext = median_ratio((mode == "extend") & (part == "main"), call - h.launch_s,
                       h.launch_per_extend_s + h.launch_per_extend_token_s * tok)
    inj_issue = h.launch_per_inject_s + h.launch_per_inject_token_s * tok - (h.inject_prepare_s if prepared else 0.0)
    inj = median_ratio(part == "inject", call, inj_issue)
    return ext, inj


def eager_level_profile(profile, extend: float | None, inject: float | None):
    """``profile`` with :data:`EAGER_EXTEND_TERMS` times ``extend`` and
    :data:`EAGER_INJECT_TERMS` times ``inject`` (tables: their seconds); None leaves a group."""
    data = profile.model_dump(mode="python")
    host = data["host"]
    for terms, f in ((EAGER_EXTEND_TERMS, extend), (EAGER_INJECT_TERMS, inject)):
        if f is None:
            continue
        for k in terms:
            v = host.get(k)
            if isinstance(v, dict):
                v["seconds"] = [x * f for x in v["seconds"]]
            elif v is not None:
                host[k] = v * f
    return type(profile).model_validate(data)


def with_recorded_accept_key(sc, d: Path):
    """``sc`` with the acceptance ``seed_key`` the measured run ``d`` was forced with
    (sim.acceptance.recorded_seed_key over its ``requests.parquet``: each request's verify
    count against each key's draws), so that its prediction draws the accept lengths the GPU
    ran; ``sc`` as it is when the run says nothing (no file, no verify counts, no key
    matches). Runs made before the accept draws had a seed key of their own were forced
    with ``shared``: predicted with today's key they draw other lengths, and at batch 1 the
    median ITL (cycle / k, token-weighted) moves a whole step between k = 5 and 4 when the
    share of tokens in k >= 5 blocks crosses one half (docs/measurements/h200-v27.md)."""
    f = d / "requests.parquet"
    if not f.is_file():
        return sc
    r = pd.read_parquet(f)
    if "spec_cycles" not in r:
        return sc
    r = r[r.spec_cycles.notna() & (r.output_len > 0)]
    key = recorded_seed_key(sc.acceptance, sc.server.accept_window, sc.seed, r.rid.to_numpy(),
                            r.output_len.to_numpy() - 1, r.spec_cycles.to_numpy(), draft_tree(sc.server))
    return sc if key is None or key == sc.acceptance.seed_key else with_value(sc, "acceptance.seed_key", key)


def send_time_ttft(sc, requests: pd.DataFrame) -> dict[str, float]:
    """TTFT figures (ms) of a measured run, timed from each request's send time."""
    sent = replay_send_times(sc, dict(zip(requests.rid.tolist(), requests.finish_s.tolist(), strict=True)))
    v = (requests.first_token_s.to_numpy() - np.array([sent[r] for r in requests.rid.tolist()])) * 1e3
    return {"mean_ttft_ms": float(v.mean()), "median_ttft_ms": float(np.median(v)),
            "p90_ttft_ms": float(np.percentile(v, 90)), "max_ttft_ms": float(v.max())}


def launch_speed_factors(probes: dict[str, pd.DataFrame], graph_max_bs: dict[str, int], q: float = 25.0) -> dict[str, float]:
    """Per run, its host speed against the round's fast level, from the per-launch probe.

    Args:
        probes: run name -> its ``host_probe.parquet`` (columns mode, part, batch_size,
            host_launch_cpu_s; one row per launch).
        graph_max_bs: run name -> its scenario's cuda_graph_max_bs (graph replays at or below).

    Returns:
        run name -> median over its graph-replayed decode/verify launch calls of thread CPU /
        the ``q``-th percentile of the same (mode, batch size) calls over every run; runs
        without such calls are left out.
    """
    calls = []
    for name, hp in probes.items():
        g = hp[hp["mode"].isin(["decode", "verify"]) & (hp["part"] == "main")
               & (hp["batch_size"] <= graph_max_bs[name])]
        g = g[np.isfinite(g["host_launch_cpu_s"])]
        calls.append(g.assign(run=name)[["run", "mode", "batch_size", "host_launch_cpu_s"]])
    if not calls:
        return {}
    c = pd.concat(calls, ignore_index=True)
    if c.empty:
        return {}
    fast = c.groupby(["mode", "batch_size"])["host_launch_cpu_s"].transform(lambda v: np.percentile(v, q))
    c = c.assign(ratio=c["host_launch_cpu_s"] / fast)
    return {str(k): float(v) for k, v in c.groupby("run")["ratio"].median().items()}


def run_speed(d: Path, profile, launch: dict[str, float], use_reference: bool = True) -> tuple[float, str]:
    """(factor, source) of the measured run in ``d`` (module docstring, ``--host-speed``);
    ``use_reference`` False skips the reference work (``--speed-source launch``)."""
    import json

    ref = profile.host.reference_work_s
    if use_reference and ref and (d / "summary.json").is_file():
        hs = json.loads((d / "summary.json").read_text()).get("host_speed") or {}
        if hs.get("reference_work_s"):
            return hs["reference_work_s"] / ref, "reference"
    if d.name in launch:
        return launch[d.name], "launch"
    return 1.0, "none"


GPU_PACED_ARMS = ("stream_wait", "both")
"""Arms whose loop the GPU paces (overlapped, never blocking the host on the GPU)."""


def per_term_profile(profile):
    """``profile`` with ``host.reference_work_by_term`` (its own, else read back from its
    provenance); None when neither says at which speed each term was measured."""
    if profile.host.reference_work_by_term:
        return profile
    by_term = term_references_from_provenance(profile)
    if by_term is None or not profile.host.reference_work_s:
        return None
    data = profile.model_dump(mode="python")
    data["host"]["reference_work_by_term"] = by_term
    return type(profile).model_validate(data)


def profile_fast_level(profile) -> float | None:
    """The profile's fast host level (reference-work seconds): the level of its
    :data:`runtime.host_reference.FAST_TERMS` in ``host.reference_work_by_term`` (or in the one
    :func:`per_term_profile` reads back from the provenance), which the profiler sets to the
    median of the fastest quarter of all its samples. None when the profile does not say."""
    tp = per_term_profile(profile)
    if tp is None:
        return None
    by_term = tp.host.reference_work_by_term
    vals = {by_term[t] for t in FAST_TERMS if t in by_term}
    return min(vals) if vals else None


def one_level_inputs(profile, level: str = "fast"):
    """(profile with ``host.reference_work_by_term``, scenario ``host.reference_work_s``) that put
    every host term at one level (``--fast-level``): ``level`` "fast" the profile's fast level
    (:func:`profile_fast_level`), "median" its ``host.reference_work_s``. None when the profile
    does not say at which level its terms were measured."""
    fast, tp = profile_fast_level(profile), per_term_profile(profile)
    if fast is None or tp is None:
        return None
    return tp, (fast if level == "fast" else profile.host.reference_work_s)


def slower_than_predicted(metric: str, err: float) -> bool:
    """Whether an error (predicted against measured, %) says the run was slower than predicted:
    predicted shorter for a time, higher for a throughput."""
    return err > 0 if ("throughput" in metric or metric.endswith("_per_s")) else err < 0


def extend_issue_reference(dirs: list[Path], profile, min_calls: int = 9) -> tuple[float, int] | None:
    """(reference-work seconds, runs used) at which the runs' extend launch calls take the
    profile's extend issue at 1024 tokens (``--extend-level launch``), or None with fewer than
    three runs that have a reference-work reading and ``min_calls`` extend launches."""
    import json

    pts = []
    for d in dirs:
        if d is None or not (d / "host_probe.parquet").is_file() or not (d / "summary.json").is_file():
            continue
        ref = (json.loads((d / "summary.json").read_text()).get("host_speed") or {}).get("reference_work_s")
        hp = pd.read_parquet(d / "host_probe.parquet")
        cpu = hp[(hp["mode"] == "extend") & (hp["part"] == "main")]["host_launch_cpu_s"].dropna()
        if ref and len(cpu) >= min_calls:
            pts.append((ref, float(cpu.median())))
    if len(pts) < 3:
        return None
    x, y = np.array(pts).T
    slope, icpt = np.polyfit(x, y, 1)
    issue = profile.host.launch_per_extend_s + 1024 * profile.host.launch_per_extend_token_s
    return (float((issue - icpt) / slope), len(pts)) if slope > 0 else None


def launch_phase_profile(profile, factor: float):
    """(profile, run reference) that scale the launch phase's terms by ``factor`` and leave
    the rest: a unit reference for the launch terms, ``factor`` for every other one."""
    launch = set(PHASE_TERMS["launch"])
    data = profile.model_dump(mode="python")
    data["host"]["reference_work_s"] = 1.0
    data["host"]["reference_work_by_term"] = {t: (1.0 if t in launch else factor) for t in SCALED_TERMS}
    return type(profile).model_validate(data), factor


def stall_call_slope(profile) -> float | None:
    """Seconds per request of the profiler's stall-loop launch call: np.polyfit over batch size
    of the block loops' median walls its provenance of ``host.launch_s`` gives ("bs B block W us /
    C us"); None when it gives fewer than two."""
    import re

    text = (getattr(profile, "provenance", None) or {}).get("host.launch_s", "")
    pairs = re.findall(r"bs (\d+) block ([\d.e+]+) us / [\d.e+]+ us", text)
    if len(pairs) < 2:
        return None
    return float(np.polyfit([float(b) for b, _ in pairs], [float(w) * 1e-6 for _, w in pairs], 1)[0])


def engine_call_slope(probes: dict[str, pd.DataFrame], graph_max_bs: dict[str, int],
                      min_calls: int = 20) -> tuple[float, int] | None:
    """(seconds per request, points) of the engine's graph-replayed verify launch call over
    batch size: one line through the median thread CPU of every (run, batch size) with at
    least ``min_calls`` such launches; None with fewer than two batch sizes."""
    pts = []
    for name, hp in probes.items():
        v = hp[(hp["mode"] == "verify") & (hp["part"] == "main") & (hp["batch_size"] <= graph_max_bs[name])]
        for bs, g in v.groupby("batch_size"):
            if len(g) >= min_calls:
                pts.append((float(bs), float(g["host_launch_cpu_s"].median())))
    if len({b for b, _ in pts}) < 2:
        return None
    a = np.array(pts)
    return float(np.polyfit(a[:, 0], a[:, 1], 1)[0]), len(pts)


def launch_per_req_from_runs(profile, probes: dict[str, pd.DataFrame], graph_max_bs: dict[str, int]):
    """(``profile`` with ``host.launch_per_req_s`` scaled by the engine's launch call slope
    over the profiler's stall-loop one, the text that says so) or None when either slope is
    missing or the profiler's is not positive. An estimate read from the runs (module
    docstring, ``--launch-per-req-from-runs``)."""
    prof, eng = stall_call_slope(profile), engine_call_slope(probes, graph_max_bs)
    if prof is None or eng is None or prof <= 0:
        return None
    ratio = max(0.0, eng[0] / prof)
    data = profile.model_dump(mode="python")
    old = profile.host.launch_per_req_s
    data["host"]["launch_per_req_s"] = old * ratio
    text = (f"host.launch_per_req_s ESTIMATED from the runs' launch calls (not a microbenchmark): "
            f"{old * 1e6:.2f} -> {old * ratio * 1e6:.2f} us (engine's call {eng[0] * 1e6:.2f} us/request over "
            f"{eng[1]} (run, batch) medians; the profiler's stall-loop call {prof * 1e6:.2f} us/request; x{ratio:.3f})")
    return type(profile).model_validate(data), text


def _sibling(name: str):
    """``benchmarks/<name>.py`` imported as a module (benchmarks/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_repredict_{name}", Path(__file__).parent / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RESULT_PATH_TERMS = ("result_path_s", "result_path_per_req_s", "recv_path_s", "recv_path_per_req_s")
"""The profile's ``host.*`` fields of the loop's result path (``--drop-result-path``)."""

RESULT_PATH_CAP_S = 2e-3
"""``--result-path-from-runs`` reads forwards whose ``end->pass`` is under this: the loop's
result path (0.16-0.41 ms medians on H200 rounds 19-20) and not an idle server's wait."""


def result_path_from_runs(profile, dirs: list[Path], part: str = "result", gap_s: float = 2e-4):
    """(``profile`` with ``host.result_path_s`` (``part`` "result") or ``host.recv_path_s``
    ("recv") set to the path estimated from the runs and the other :data:`RESULT_PATH_TERMS`
    set to 0 (the estimate is the whole path), the text that says so) or None when no
    run has a forward launched onto an idle stream with its schedule pass. An estimate read
    from the runs (module docstring, ``--result-path-from-runs``)."""
    split = _sibling("idle_launch_split")
    h = profile.host
    vals: list[np.ndarray] = []
    used = 0
    for d in dirs:
        if d is None or not (d / "timeseries.parquet").is_file() or not (d / "steps.parquet").is_file():
            continue
        try:
            t = split.idle_launches(d, gap_s)
        except ValueError:
            continue
        ep = t["end->pass"].to_numpy()
        bs = t["batch_size"].to_numpy(dtype=float)
        ok = (ep > 0) & (ep < RESULT_PATH_CAP_S)
        if not ok.any():
            continue
        charged = (h.sync_wakeup_s + h.process_s + h.schedule_s + (h.process_per_req_s + h.schedule_per_req_s) * bs)
        vals.append((ep - charged)[ok])
        used += 1
    if not vals:
        return None
    v = np.concatenate(vals)
    est = max(0.0, float(np.median(v)))
    key = "result_path_s" if part == "result" else "recv_path_s"
    data = profile.model_dump(mode="python")
    # the estimate is the whole path: a profile's own result-path terms would charge it twice
    for k in RESULT_PATH_TERMS:
        data["host"][k] = 0.0
    data["host"][key] = est
    text = (f"host.{key} ESTIMATED from the runs' forwards launched onto an idle stream (not a microbenchmark): "
            f"{est * 1e3:.3f} ms (median over {len(v)} forwards of {used} runs of end->pass less the wake-up, "
            f"process and schedule the profile charges; p25 / p75 {np.percentile(v, 25) * 1e3:.3f} / "
            f"{np.percentile(v, 75) * 1e3:.3f} ms)")
    return type(profile).model_validate(data), text


def _verify_refit_said(old, new) -> str:
    row = [round((n - o) * 1e3, 3) for n, o in zip((r[0] for r in new.gpu.verify.seconds),
                                                   (r[0] for r in old.gpu.verify.seconds), strict=True)]
    return f"gpu.verify refitted at the loop's width: ms added by batch size (first column): {row}"


PROVENANCE_REFITS = (
    # (option, refit from the profile's provenance (None: nothing to refit), what the provenance lacks then,
    #  the line said after a refit); applied in this order
    ("refit_slot_expansion", refit_slot_expansion,
     "host.slot_expansion_s's provenance has no gap / preparation medians",
     lambda old, new: (f"host.slot_expansion_s refitted from the provenance: {old.host.slot_expansion_s * 1e3:.3f} -> "
                       f"{new.host.slot_expansion_s * 1e3:.3f} ms")),
    ("inject_prepare_from_provenance", refit_inject_prepare,
     "host.slot_expansion_s's provenance has no gap / preparation medians",
     lambda old, new: f"host.inject_prepare_s from the provenance: {new.host.inject_prepare_s * 1e3:.3f} ms"),
    ("verify_excess_at_loop_width", refit_verify_excess,
     "gpu.verify's provenance has no excess taken at the grid's last column", _verify_refit_said),
    ("refit_eager_issue", refit_eager_issue,
     "gpu.eager_host_issue_s's provenance has no kept busy / idle medians per eager point",
     lambda old, new: (f"gpu.eager_host_issue_s refitted from the provenance: {old.gpu.eager_host_issue_s * 1e3:.3f} -> "
                       f"{new.gpu.eager_host_issue_s * 1e3:.3f} ms")),
)
"""The profile refits an option asks for, each read back from the profile's own provenance."""


VALIDATE_COLUMNS = ("cell", "arm", "metric", "measured")


def read_validate_csv(path: str) -> pd.DataFrame:
    """A gpu_validate ``validate.csv`` (columns cell, arm, metric, predicted, measured,
    error_pct; one row per figure).

    Raises:
        ValueError: the file cannot be read, lacks one of :data:`VALIDATE_COLUMNS`, or has no
            rows; the message names the file and what is missing (one line).
    """
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot be read as a validate.csv ({type(e).__name__}: {e})".splitlines()[0]) from None
    missing = [c for c in VALIDATE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: column {missing[0]!r} missing; a validate.csv has {', '.join(VALIDATE_COLUMNS)}")
    if df.empty:
        raise ValueError(f"{path}: no rows: nothing to re-predict")
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--poisson-requests", type=int, default=96)
    ap.add_argument("--measured-results", type=Path, help="measured results directories (TTFT from send times)")
    ap.add_argument("--mean", action="store_true", help="measured = mean over the CSVs (repeated runs of the same cells)")
    ap.add_argument("--host-speed", action="store_true",
                    help="also predict each run at its measured host speed (needs --measured-results)")
    ap.add_argument("--speed-source", choices=("auto", "launch"), default="auto",
                    help="auto: the reference work where recorded, else the launch calls; launch: the launch calls "
                         "only (to set the two readings side by side)")
    ap.add_argument("--launch-reference", choices=("profile", "round-p25", "round-median"), default="profile",
                    help="what a run's launch calls are read against when it has no reference-work reading")
    ap.add_argument("--per-term", action="store_true",
                    help="also predict each run with every host term scaled by the run's reference work over that "
                         "term's own (profile host.reference_work_by_term, or its provenance); needs --host-speed")
    ap.add_argument("--extend-level", choices=("phase", "launch"), default="phase",
                    help="with --per-term: the extend terms' reference from the profile (phase) or read from the runs' "
                         "extend launch calls against the profile's extend issue (launch; a cross-check)")
    ap.add_argument("--launch-per-req-from-runs", action="store_true",
                    help="ESTIMATE host.launch_per_req_s from the runs' launch calls: scaled by the engine's call slope "
                         "over the profiler's stall-loop call slope (needs --measured-results; not a microbenchmark)")
    ap.add_argument("--result-path-from-runs", type=Path, metavar="DIR",
                    help="ESTIMATE the loop's result path (host.result_path_s) from the forwards launched onto an idle "
                         "stream of the runs DIR/*-measured (not a microbenchmark)")
    ap.add_argument("--drop-result-path", action="store_true",
                    help="set host.result_path_* and host.recv_path_* to 0 (the prediction without the loop's result path)")
    ap.add_argument("--result-path-part", choices=("result", "recv"), default=None,
                    help="with --result-path-from-runs: charge the estimate before the delivery (host.result_path_s) or "
                         "after it (host.recv_path_s)")
    ap.add_argument("--verify-excess-at-loop-width", action="store_true",
                    help="refit gpu.verify's excess against the bare cycle at the stall loop's own width")
    ap.add_argument("--inject-prepare-from-provenance", action="store_true",
                    help="set host.inject_prepare_s from the preparation medians of the profile's "
                         "host.slot_expansion_s provenance (profiles made before the field existed)")
    ap.add_argument("--eager-from-calls", action="store_true",
                    help="AFTER THE FACT: also predict each run with the extend phase's host terms at the level of "
                         "its own extend and inject launch calls (needs --measured-results)")
    ap.add_argument("--refit-eager-issue", action="store_true",
                    help="gpu.eager_host_issue_s refitted from its provenance's eager points by the current rule "
                         "(runtime.profile_fit.fast_level_issue)")
    ap.add_argument("--refit-slot-expansion", action="store_true",
                    help="refit host.slot_expansion_s from the profile's provenance by the current rule "
                         "(runtime.profile_fit.slot_expansion_fit: the gap less the wake-up; profiles up to round 15 "
                         "also subtracted the injection's preparation)")
    ap.add_argument("--extend-launch", choices=("launch_s", "none"), default="launch_s",
                    help="what an extend-only launch pays before its issue: host.launch_s as the simulator does, or "
                         "nothing (a what-if, not adopted)")
    ap.add_argument("--fast-level", action="store_true",
                    help="also predict every cell with each host term put at the profile's fast level (its fastest "
                         "quarter of reference-work samples; host.reference_work_by_term)")
    ap.add_argument("--one-level", choices=("fast", "median"), default="fast",
                    help="with --fast-level: the one level every term is put at: the profile's fast level, or its "
                         "median (host.reference_work_s: the level a typical sample sat at)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                    help="scenario override for every cell (repeatable; analysis.overrides): what the measured "
                         "runtime ran with that the cell's file does not say, e.g. the graph sizes of rounds made "
                         "before the runtime captured SGLang's list, server.cuda_graph_bs=[1,2,4,8,12,16,24,32,40,48,56,64]")
    args = ap.parse_args(argv)
    try:
        extra = parse_overrides(args.overrides)
        for key, value in extra.items():
            check_key(key, "--set", value)
    except ConfigError as e:
        print(f"repredict_h200: {e}", file=sys.stderr)
        return 2
    if args.host_speed and args.measured_results is None:
        print("repredict_h200: --host-speed: needs --measured-results (the runs' host readings)", file=sys.stderr)
        return 2
    if args.launch_per_req_from_runs and args.measured_results is None:
        print("repredict_h200: --launch-per-req-from-runs: needs --measured-results (the runs' launch calls)",
              file=sys.stderr)
        return 2
    if args.result_path_part is not None and args.result_path_from_runs is None:
        print("repredict_h200: --result-path-part: needs --result-path-from-runs (the estimate it places)",
              file=sys.stderr)
        return 2
    if args.eager_from_calls and args.measured_results is None:
        print("repredict_h200: --eager-from-calls: needs --measured-results (the runs' launch calls)", file=sys.stderr)
        return 2
    if args.per_term and not args.host_speed:
        print("repredict_h200: --per-term: needs --host-speed (the runs' host readings)", file=sys.stderr)
        return 2
    try:
        runs = [read_validate_csv(p) for p in args.csv]
    except ValueError as e:
        print(f"repredict_h200: {e}", file=sys.stderr)
        return 2
    measured = pd.concat(runs, ignore_index=True)
    spread: dict[tuple, float] = {}
    if args.mean and len(runs) > 1:
        key = ["cell", "arm", "metric"]
        mean = measured.groupby(key, sort=False).measured.mean()
        dev = (measured.set_index(key).measured - mean).abs() / mean.abs() * 100
        spread = dev.groupby(level=[0, 1, 2]).max().to_dict()
        measured = measured.drop_duplicates(key, keep="last").set_index(key)
        measured["measured"] = mean
        measured = measured.reset_index()
    measured = measured.drop_duplicates(["cell", "arm", "metric"], keep="last")
    profile = load_profile(args.profile)
    for flag, refit_fn, lacks, said in PROVENANCE_REFITS:
        if not getattr(args, flag):
            continue
        refit = refit_fn(profile)
        if refit is None:
            print(f"repredict_h200: --{flag.replace('_', '-')}: {args.profile}: {lacks}", file=sys.stderr)
            return 2
        print(said(profile, refit))
        profile = refit
    term_profile = per_term_profile(profile) if args.per_term else None
    if args.extend_launch == "none":
        from specsched.sim.cost_model import CostModel

        CostModel.host = without_extend_launch(CostModel.host)
        print("extend-only launches charged their issue only (no host.launch_s)")
    runs = []
    for (cell, arm), grp in measured.groupby(["cell", "arm"], sort=False):
        name, _, rate = cell.partition("@")
        overrides = {"workload.request_rate": float(rate), "workload.num_requests": args.poisson_requests} if rate else {}
        overrides.update(extra)
        sc = load_scenario_with_overrides(scenarios_dir() / "h200" / f"{name}.yaml", arm, overrides)
        d = (args.measured_results / (f"{name}-rate{rate}-measured" if rate else f"{cell}-{arm}-measured")
             if args.measured_results is not None else None)
        if d is not None and "acceptance.seed_key" not in extra:
            sc = with_recorded_accept_key(sc, d)
        runs.append((cell, arm, grp, sc, d))
    shared = sum(sc.acceptance.seed_key == "shared" for *_, sc, _ in runs)
    if shared:
        print(f"accept draws: {shared} of {len(runs)} runs were forced with the shared seed key [seed, 3, rid] "
              "and are predicted with it (acceptance.seed_key)")
    if args.launch_per_req_from_runs:
        probes = {d.name: pd.read_parquet(d / "host_probe.parquet") for *_, d in runs if (d / "host_probe.parquet").is_file()}
        got = launch_per_req_from_runs(profile, probes, {d.name: sc.server.cuda_graph_max_bs for *_, sc, d in runs})
        if got is None:
            print(f"repredict_h200: --launch-per-req-from-runs: {args.profile}: no stall-loop launch calls in the "
                  "provenance of host.launch_s, or runs without graph-replayed verify launches at two batch sizes",
                  file=sys.stderr)
            return 2
        profile, text = got
        print(text)
        if term_profile is not None:
            term_profile = per_term_profile(profile)
    if args.drop_result_path and args.result_path_from_runs is not None:
        print("repredict_h200: --drop-result-path and --result-path-from-runs: choose one", file=sys.stderr)
        return 2
    if args.drop_result_path:
        data = profile.model_dump(mode="python")
        for k in RESULT_PATH_TERMS:
            data["host"][k] = 0.0
        profile = type(profile).model_validate(data)
        print("host.result_path_* and host.recv_path_* set to 0")
        if term_profile is not None:
            term_profile = per_term_profile(profile)
    if args.result_path_from_runs is not None:
        got = result_path_from_runs(profile, sorted(args.result_path_from_runs.glob("*-measured")), args.result_path_part or "result")
        if got is None:
            print(f"repredict_h200: --result-path-from-runs: {args.result_path_from_runs}: no measured run with a forward "
                  "launched onto an idle stream and its schedule pass (timeseries.parquet)", file=sys.stderr)
            return 2
        profile, text = got
        print(text)
        if term_profile is not None:
            term_profile = per_term_profile(profile)
    if term_profile is not None and args.extend_level == "launch":
        got = extend_issue_reference([d for *_, d in runs], profile)
        if got is None:
            print("repredict_h200: --extend-level launch: fewer than 3 runs with extend launches and a reference "
                  "work reading", file=sys.stderr)
            return 2
        if not got[0] > 0:
            # a fit over few runs can go through zero: no reference to condition on
            print(f"repredict_h200: --extend-level launch: the extend launch calls of {got[1]} runs give a reference "
                  f"work of {got[0] * 1e3:.3f} ms (must be > 0); condition by phase instead", file=sys.stderr)
            return 2
        data = term_profile.model_dump(mode="python")
        data["host"]["reference_work_by_term"].update(dict.fromkeys(PHASE_TERMS["extend"], got[0]))
        term_profile = type(term_profile).model_validate(data)
        print(f"extend terms' reference from {got[1]} runs' extend launch calls: {got[0] * 1e3:.3f} ms")
    launch: dict[str, float] = {}
    if args.host_speed:
        probes = {d.name: pd.read_parquet(d / "host_probe.parquet") for *_, d in runs if (d / "host_probe.parquet").is_file()}
        gmax = {d.name: sc.server.cuda_graph_max_bs for *_, sc, d in runs}
        ref = launch_call_reference(profile)
        if args.launch_reference != "profile":
            launch = launch_speed_factors(probes, gmax, 25.0 if args.launch_reference == "round-p25" else 50.0)
        elif ref is not None:
            for name, hp in probes.items():
                f = launch_speed_factor(hp["mode"], hp["part"], hp["batch_size"], hp["host_launch_cpu_s"], gmax[name], ref)
                if f is not None:
                    launch[name] = f
    fast_s, fast_profile = None, None
    if args.fast_level:
        got = one_level_inputs(profile, args.one_level)
        fast_profile, fast_s = got if got is not None else (None, None)
        print(f"{args.one_level} level: {fast_s * 1e3:.3f} ms; terms' levels (ms): " + ", ".join(
            f"{t} {v * 1e3:.3f}" for t, v in sorted(fast_profile.host.reference_work_by_term.items()))
              if fast_s is not None else "fast level: the profile does not say at which level its terms were "
              "measured; left as it is")
    rows = []
    for cell, arm, grp, sc, d in runs:
        pred = run_scenario(sc, seed=sc.seed, profile=profile).summary
        fast = {}
        if args.fast_level:
            fast = (run_scenario(with_value(sc, "host.reference_work_s", fast_s), seed=sc.seed, profile=fast_profile)
                    if fast_s is not None else run_scenario(sc, seed=sc.seed, profile=profile)).summary
        fixed: dict[str, float] = {}
        if d is not None and (d / "requests.parquet").is_file():
            fixed = send_time_ttft(sc, pd.read_parquet(d / "requests.parquet"))
        cond, factor, source = {}, 1.0, "none"
        if args.host_speed:
            factor, source = run_speed(d, profile, launch, args.speed_source != "launch")
            cond = run_scenario(with_value(sc, "host.speed_factor", factor), seed=sc.seed, profile=profile).summary
        term = {}
        if args.per_term:
            if source == "reference" and term_profile is not None:
                tp, ref_s = term_profile, factor * profile.host.reference_work_s
            elif source == "launch":
                tp, ref_s = launch_phase_profile(profile, factor)
            else:
                tp, ref_s = profile, None
            term = run_scenario(with_value(sc, "host.reference_work_s", ref_s), seed=sc.seed, profile=tp).summary
        eager, fe, fi = {}, None, None
        if args.eager_from_calls and d is not None and (d / "host_probe.parquet").is_file():
            try:
                fe, fi = eager_call_factors(pd.read_parquet(d / "steps.parquet"),
                                            pd.read_parquet(d / "host_probe.parquet"), profile,
                                            sc.server.prefill_slot_expansion_sync)
            except ValueError as e:
                print(f"repredict_h200: --eager-from-calls: {d}: {e}", file=sys.stderr)
                return 2
            if fe is not None or fi is not None:
                eager = run_scenario(sc, seed=sc.seed, profile=eager_level_profile(profile, fe, fi)).summary
        for r in grp.itertuples():
            new = pred.get(r.metric)
            meas = fixed.get(r.metric, r.measured)
            rows.append({"cell": cell, "arm": arm, "metric": r.metric, "measured": meas,
                         "recorded_measured": r.measured, "ttft_from_send": r.metric in fixed,
                         "old_predicted": r.predicted, "old_error_pct": error_pct(r.predicted, meas) if fixed or spread else r.error_pct, "new_predicted": new,
                         "new_error_pct": error_pct(new, meas) if new is not None else float("nan"),
                         "run_spread_pct": spread.get((cell, arm, r.metric), float("nan"))})
            if args.host_speed:
                c = cond.get(r.metric)
                rows[-1].update(speed_factor=factor, speed_source=source, cond_predicted=c,
                                cond_error_pct=error_pct(c, meas) if c is not None else float("nan"))
            if args.per_term:
                c = term.get(r.metric)
                rows[-1].update(term_predicted=c, term_error_pct=error_pct(c, meas) if c is not None else float("nan"))
            if args.fast_level:
                c = fast.get(r.metric)
                rows[-1].update(fast_level_s=fast_s, fast_predicted=c,
                                fast_error_pct=error_pct(c, meas) if c is not None else float("nan"))
            if args.eager_from_calls:
                c = eager.get(r.metric)
                rows[-1].update(eager_extend_factor=fe, eager_inject_factor=fi, eager_predicted=c,
                                eager_error_pct=error_pct(c, meas) if c is not None else float("nan"))
        print(f"{cell:<18} {arm:<14} " + " ".join(
            f"{m[:12]:>12} {rows[-len(grp):][[x['metric'] for x in rows[-len(grp):]].index(m)]['new_error_pct']:+6.1f}%"
            for m in TARGETS if m in set(grp.metric)), flush=True)
    df = pd.DataFrame(rows)
    atomic_write_text(Path(args.out), df.to_csv(index=False))
    t = df[df.metric.isin(TARGETS)]
    print("\nmetric              within 5 % (old -> new)   median |error| (old -> new)")
    for m in TARGETS:
        s = t[t.metric == m]
        print(f"{m:<20} {int((s.old_error_pct.abs() <= 5).sum()):>3} -> {int((s.new_error_pct.abs() <= 5).sum()):<3} "
              f"of {len(s):<5} {s.old_error_pct.abs().median():6.1f} % -> {s.new_error_pct.abs().median():5.1f} %")
    print(f"all five: {int((t.old_error_pct.abs() <= 5).sum())} -> {int((t.new_error_pct.abs() <= 5).sum())} of {len(t)} within 5 %")
    if args.host_speed:
        print("\nconditioned on each run's host speed (speed_factor; source: reference / launch / none)")
        for m in TARGETS:
            s = t[t.metric == m]
            print(f"{m:<20} {int((s.new_error_pct.abs() <= 5).sum()):>3} -> {int((s.cond_error_pct.abs() <= 5).sum()):<3} "
                  f"of {len(s):<5} {s.new_error_pct.abs().median():6.1f} % -> {s.cond_error_pct.abs().median():5.1f} %")
        print(f"all five: {int((t.new_error_pct.abs() <= 5).sum())} -> {int((t.cond_error_pct.abs() <= 5).sum())} of "
              f"{len(t)} within 5 % (unconditioned -> conditioned); sources: "
              + ", ".join(f"{k} {v}" for k, v in t.drop_duplicates(['cell', 'arm']).speed_source.value_counts().items()))
    if args.per_term:
        print_three_way(t)
    if args.fast_level:
        print_fast_level(t)
    if args.eager_from_calls:
        print("\nAFTER THE FACT: at the level of each run's own eager launch calls (extend, injection factors)")
        for (cell, arm), g in t.groupby(["cell", "arm"], sort=False):
            fe, fi = g.eager_extend_factor.iloc[0], g.eager_inject_factor.iloc[0]
            print(f"{cell:<18} {arm:<14} x{fe:.2f} x{fi:.2f} " + " ".join(
                f"{m[:12]:>12} {g[g.metric == m].eager_error_pct.iloc[0]:+6.1f}%" for m in TARGETS if m in set(g.metric)))
        print(f"all five: {int((t.new_error_pct.abs() <= 5).sum())} -> {int((t.eager_error_pct.abs() <= 5).sum())} of "
              f"{len(t)} within 5 % (unconditioned -> at the runs' eager level)")
    if spread:
        print("\nrun-to-run spread of the measurement (largest |run - mean| / mean), by metric: median, max, rows above 5 %")
        for m in TARGETS:
            sp = t[t.metric == m].run_spread_pct
            print(f"{m:<20} {sp.median():5.1f} % {sp.max():6.1f} % {int((sp > 5).sum()):>3} of {len(sp)}")
    return 0


def print_fast_level(t: pd.DataFrame) -> None:
    """Unconditioned against at the fast level: within 5 %, mean |error|, and the misses
    (|error| > 5 %) by sign, per metric and in all."""
    def line(s: pd.DataFrame, col: str) -> str:
        e = s[col]
        miss = s[e.abs() > 5]
        slow = sum(slower_than_predicted(m, v) for m, v in zip(miss.metric, miss[col], strict=True))
        return (f"{int((e.abs() <= 5).sum()):>3} of {len(s):<3} mean |err| {e.abs().mean():5.1f} %  misses: "
                f"{slow:>2} run slower, {len(miss) - slow:>2} run faster")

    print("\nat the profile's fast level (unconditioned | fast level): within 5 %, mean |error|, misses by sign")
    for m in TARGETS:
        s = t[t.metric == m]
        print(f"{m:<20} {line(s, 'new_error_pct')} | {line(s, 'fast_error_pct')}")
    print(f"{'all five':<20} {line(t, 'new_error_pct')} | {line(t, 'fast_error_pct')}")


def print_three_way(t: pd.DataFrame) -> None:
    """Within-5 % counts: unconditioned, one factor per run, per term; per metric and for the
    GPU-paced arms apart from the rest."""
    cols = (("new_error_pct", "unconditioned"), ("cond_error_pct", "one factor"), ("term_error_pct", "per term"))

    def counts(s: pd.DataFrame) -> str:
        return " ".join(f"{int((s[c].abs() <= 5).sum()):>13}" for c, _ in cols) + f" of {len(s)}"

    print("\nwithin 5 %            " + " ".join(f"{n:>13}" for _, n in cols))
    for m in TARGETS:
        print(f"{m:<21} " + counts(t[t.metric == m]))
    gpu = t.arm.isin(GPU_PACED_ARMS)
    print(f"{'GPU-paced arms':<21} " + counts(t[gpu]))
    print(f"{'other arms':<21} " + counts(t[~gpu]))
    print(f"{'all five':<21} " + counts(t))


if __name__ == "__main__":
    sys.exit(main())
