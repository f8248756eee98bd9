"""What-if sanity battery: the sweeps a user runs on a model and GPU with no measured
profile, checked against directions and bounds the physics fixes (docs/whatif-sanity.md).

``python benchmarks/whatif_sanity.py [--seeds 3] [--out docs/whatif-sanity.md] [--only NAME,...]``
writes analytic profiles (``specsched profile --analytic``: default efficiency factors,
nothing fitted) for a spread of models and GPUs into a temporary folder, runs a Poisson
what-if scenario with SGLang's defaults for each, sweeps one server or workload knob per
check, and compares the mean over seeds with the direction the mechanism must give:

- ``rate_ttft``: a higher request rate never lowers mean TTFT (queueing only adds waits).
- ``graph_bs_tpot``: a larger ``cuda_graph_max_bs`` never raises TPOT (a captured graph is
  never slower than the eager forward it replaces: sim/cost_model.py ``step_s``).
- ``fp8_tpot``: fp8 weights never slow a bandwidth-bound decode (half the bytes).
- ``kv_retractions``: a larger KV pool never adds retractions (more room before
  ``ScheduleBatch.retract_decode`` must free any).
- ``chunk``: every chunk size prefills exactly the prompt tokens; a larger chunk never
  raises a lone request's TTFT (fewer forwards over the same tokens).
- ``accept_tpot``: at a fixed window and cost, a higher accept length never raises TPOT.
- ``tp_tpot*``: more TP ranks never slow a lone request's decode of a bandwidth-bound 70B.
- ``gpu_tpot``: a GPU with more HBM bandwidth never slows a lone request's decode;
  ``host_ghz_tpot``: a faster host never slows eager (host-issued) decode steps.
- ``closed_loop_*``: more concurrent clients never lower output tok/s nor mean TTFT.
- ``input_ttft``: a longer prompt never lowers TTFT at light load.
- ``overlap_tpot``: overlap scheduling never raises TPOT; ``eager_tpot``: graphs off never
  lowers it; ``spec_noaccept``: a drafter whose drafts are never accepted never beats plain
  decoding.
- ``dp_attention_gqa``: DP attention never buys a GQA model's burst more than seed noise
  (its KV is read per GPU either way; only MLA's replicated latent is split).
- ``running_tput``: a larger ``max_running_requests`` never lowers a burst's output tok/s
  while the KV pool is not the limit.
- ``bounds`` (every run above): no inf in the summary, GPU busy fraction <= 1, GPU steps
  never overlap, prefilled tokens = prompt tokens (+ re-prefills after retraction), output
  tokens = requested, every request completes, and no decode step of a dense model is
  shorter than its weights read at the datasheet bandwidth, no extend shorter than its
  FLOPs (2 per parameter per token) at the datasheet peak (the roofline).

A check passes when each step of the sweep moves the metric the allowed way or by no more
than ``tol`` (relative) + ``atol`` (absolute): seed noise, judged on means over seeds.
Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import Efficiency
from specsched.sim.analytic.writer import build_profile
from specsched.sim.atomic import atomic_write_text
from specsched.sim.cli_types import seed_count
from specsched.sim.engine import run_scenario

ROOT = Path(__file__).resolve().parent.parent

PROFILES: dict[str, tuple] = {
    "qwen3-0.6b/H100": ("qwen3-0.6b", "H100", 1, None),
    "llama-8b/H200": ("llama-3.1-8b", "H200", 1, None),
    "llama-8b/H200/fp8": ("llama-3.1-8b", "H200", 1, "fp8"),
    "llama-8b/H100": ("llama-3.1-8b", "H100", 1, None),
    "llama-8b/MI300X": ("llama-3.1-8b", "MI300X", 1, None),
    "llama-8b/MI300X/fp8": ("llama-3.1-8b", "MI300X", 1, "fp8"),
    "llama-70b/H100/tp4": ("llama-3.1-70b", "H100", 4, None),
    "llama-70b/H100/tp8": ("llama-3.1-70b", "H100", 8, None),
    "llama-70b/H200/tp8": ("llama-3.1-70b", "H200", 8, None),
    "llama-70b/MI355X/tp8": ("llama-3.1-70b", "MI355X", 8, None),
    "qwen3-30b-a3b/MI355X": ("qwen3-30b-a3b", "MI355X", 1, None),
    "qwen3-30b-a3b/MI355X/fp8": ("qwen3-30b-a3b", "MI355X", 1, "fp8"),
    "deepseek-v3/H200/tp8": ("deepseek-v3", "H200", 8, "fp8"),
    "llama-70b/H200/tp2": ("llama-3.1-70b", "H200", 2, None),
    "llama-70b/H200/tp4": ("llama-3.1-70b", "H200", 4, None),
    "llama-70b/MI355X/tp2": ("llama-3.1-70b", "MI355X", 2, None),
    "llama-70b/MI355X/tp4": ("llama-3.1-70b", "MI355X", 4, None),
    "qwen3-0.6b/H100/3.5GHz": ("qwen3-0.6b", "H100", 1, None, 3.5),
    "qwen3-0.6b/H100/5GHz": ("qwen3-0.6b", "H100", 1, None, 5.0),
}
"""Label -> (model, GPU, TP, dtype[, host GHz]): a small dense model, 8B and 70B dense at
TP1/2/4/8, MoE, on NVIDIA and AMD parts; the host clock where a check varies it."""

SPREAD = ["qwen3-0.6b/H100", "llama-8b/H200", "llama-70b/H100/tp8", "llama-70b/MI355X/tp8",
          "qwen3-30b-a3b/MI355X", "deepseek-v3/H200/tp8"]
"""The profiles every generic check runs on."""

BASE = {
    "name": "whatif", "description": "what-if sanity probe", "profile": "PROFILE", "seed": 1,
    "server": {"speculative_algorithm": "none"},
    "workload": {"kind": "poisson", "num_requests": 150, "request_rate": 2.0,
                 "input_len": {"kind": "fixed", "value": 1024}, "output_len": {"kind": "fixed", "value": 128}},
}
ACCEPT = {"per_position_rates": [0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5], "window": 8}
"""A drafter's per-position acceptance (assumed), carried to every window."""


@dataclass
class Check:
    """One sweep: ``name`` over ``values`` of ``knob`` on ``profiles``, ``metric`` must move
    ``direction`` (+1 never down, -1 never up) within ``tol`` relative + ``atol``."""

    name: str
    profiles: list[str]
    knob: str
    values: list[Any]
    metric: str
    direction: int
    fixed: dict[str, Any] = field(default_factory=dict)
    tol: float = 0.03
    atol: float = 0.0
    per_profile_knob: Callable[[str], list[Any]] | None = None


@dataclass
class Outcome:
    check: str
    profile: str
    values: list[Any]
    means: list[float]
    ok: bool
    why: str = ""


class Battery:
    """Profiles on disk, runs memoised by (profile, overrides), and the bounds every run
    must satisfy."""

    def __init__(self, work: Path, seeds: int) -> None:
        self.work = work
        self.seeds = seeds
        self.scn = work / "whatif.yaml"
        self.scn.write_text(yaml.safe_dump(BASE, sort_keys=False))
        self._paths: dict[str, Path] = {}
        self._weights: dict[str, float | None] = {}
        self._flops: dict[str, float | None] = {}
        self._memo: dict[tuple, dict[str, float]] = {}
        self.bound_failures: list[str] = []
        self.runs = 0

    def profile(self, label: str) -> Path:
        if label not in self._paths:
            model, gpu, tp, dtype, *ghz = PROFILES[label]
            arch, spec = load_model(model), load_gpu(gpu)
            d = build_profile(arch, spec, tp, dtype, eff=Efficiency(host_ghz=ghz[0]) if ghz else None)
            path = self.work / (label.replace("/", "_") + ".yaml")
            write_analytic_profile(d, path)
            self._paths[label] = path
            # dense models read every weight each decode step (MoE: only the chosen experts)
            self._weights[label] = None if arch.is_moe else d["hardware"]["weight_bytes"] / (spec.hbm_tbps * 1e12)
            # a dense prefill does 2 FLOPs per parameter per token at best at the datasheet peak
            params = d["hardware"]["weight_bytes"] / (1.0 if (dtype or "bf16") == "fp8" else 2.0)
            self._flops[label] = None if arch.is_moe else 2 * params / spec.peak_flops(dtype or "bf16")
        return self._paths[label]

    def run(self, label: str, overrides: dict[str, Any]) -> dict[str, float]:
        """Mean summary over seeds 1..seeds (bounds checked on every seed)."""
        key = (label, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
        if key in self._memo:
            return self._memo[key]
        ov = {"profile": str(self.profile(label)), **overrides}
        sc = load_scenario_with_overrides(self.scn, "base", ov)
        sums: dict[str, list[float]] = {}
        for seed in range(1, self.seeds + 1):
            r = run_scenario(sc, seed=seed)
            self.runs += 1
            self._bounds(label, overrides, seed, r, sc)
            for k, v in r.summary.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    sums.setdefault(k, []).append(float(v))
        out = {k: float(np.mean(v)) for k, v in sums.items()}
        self._memo[key] = out
        return out

    def _bounds(self, label: str, ov: dict[str, Any], seed: int, r: Any, sc: Any) -> None:
        s, st, rq = r.summary, r.steps, r.requests
        where = f"{label} {ov} seed {seed}"
        bad = []
        inf = [k for k, v in s.items() if isinstance(v, float) and math.isinf(v)]
        if inf:
            bad.append(f"inf in {inf}")
        if s["gpu_busy_fraction"] > 1 + 1e-9:
            bad.append(f"gpu_busy_fraction {s['gpu_busy_fraction']:.4f} > 1")
        g0, g1 = st["gpu_start_s"].to_numpy(float), st["gpu_end_s"].to_numpy(float)
        if (g1 < g0 - 1e-12).any():
            bad.append("a step ends before it starts")
        order = np.argsort(g0, kind="stable")
        if len(g0) > 1 and (g0[order][1:] < g1[order][:-1] - 1e-9).any():
            bad.append("two GPU steps overlap")
        n = sc.workload.num_requests
        if int(s["completed"]) != n:
            bad.append(f"{int(s['completed'])} of {n} completed")
        if int(s["total_output_tokens"]) != int(rq["output_len"].sum()):
            bad.append("output tokens != requested")
        main = st[st["mode"].isin(["extend", "mixed"]) & (st["part"] == "main")]
        # a retracted request re-prefills its prompt and the output it had (SGLang Req.fill_ids)
        if s["num_retractions"] == 0 and int(main["num_extend_tokens"].sum()) != int(rq["input_len"].sum()):
            bad.append(f"prefilled {int(main['num_extend_tokens'].sum())} != prompt tokens {int(rq['input_len'].sum())}")
        t_min = self._weights.get(label)
        dec = st[st["mode"] == "decode"]
        if t_min is not None and len(dec):
            shortest = float((dec["gpu_end_s"] - dec["gpu_start_s"]).min())
            if shortest < 0.9 * t_min:  # 0.9: the embedding table is not read in full
                bad.append(f"decode step {shortest * 1e3:.3f} ms < weights at datasheet bandwidth {t_min * 1e3:.3f} ms")
        per_token = self._flops.get(label)
        if per_token is not None and len(main):
            dur = (main["gpu_end_s"] - main["gpu_start_s"]).to_numpy(float)
            # 0.8: embedding, LM head rows; a mixed step's decode rows only add to its time
            floor = 0.8 * per_token * main["num_extend_tokens"].to_numpy(float)
            if (dur < floor).any():
                i = int(np.argmax(floor - dur))
                bad.append(f"extend of {int(main['num_extend_tokens'].iloc[i])} tokens in {dur[i] * 1e3:.3f} ms < its "
                           f"FLOPs at datasheet peak {floor[i] / 0.8 * 1e3:.3f} ms")
        for b in bad:
            self.bound_failures.append(f"{where}: {b}")


def checks() -> list[Check]:
    """The battery (see the module docstring)."""
    spec = {"server.speculative_algorithm": "dspark", "server.max_running_requests": 48, "acceptance": ACCEPT}
    return [
        Check("rate_ttft", SPREAD, "workload.request_rate", [0.5, 1, 2, 4, 8, 16], "mean_ttft_ms", +1,
              tol=0.05, atol=0.5),
        Check("graph_bs_tpot", SPREAD, "server.cuda_graph_max_bs", [1, 4, 16, 64, 256], "mean_tpot_ms", -1,
              fixed={"workload.request_rate": 4.0}, tol=0.02),
        Check("graph_bs_tpot_heavy", SPREAD, "server.cuda_graph_max_bs", [8, 32, 128, 512], "mean_tpot_ms", -1,
              fixed={"workload.request_rate": 32.0}, tol=0.03),
        Check("fp8_tpot", ["llama-8b/H200", "llama-8b/MI300X", "qwen3-30b-a3b/MI355X"], "profile_dtype",
              ["bf16", "fp8"], "mean_tpot_ms", -1, fixed={"workload.request_rate": 1.0}),
        Check("kv_retractions", SPREAD, "server.max_total_num_tokens", [8000, 16000, 32000, 64000, 128000],
              "num_retractions", -1, tol=0.15, atol=2.0,
              fixed={"workload.request_rate": 16.0, "workload.num_requests": 200, "workload.ignore_eos": False,
                     "workload.input_len": {"kind": "uniform", "value": 1024, "range_ratio": 0.5},
                     "workload.output_len": {"kind": "uniform", "value": 2048, "range_ratio": 0.0}}),
        Check("chunk_ttft", SPREAD, "server.chunked_prefill_size", [256, 1024, 4096, 16384], "mean_ttft_ms", -1,
              fixed={"workload.request_rate": 0.2, "workload.num_requests": 20,
                     "workload.input_len": {"kind": "fixed", "value": 12000}}, tol=0.02),
        Check("accept_tpot_block", SPREAD, "acceptance.mean_accept_length", [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
              "mean_tpot_ms", -1, fixed={**spec, "server.speculative_num_draft_tokens": 4, "acceptance": {},
                                         "workload.request_rate": 4.0}, tol=0.02),
        Check("accept_tpot_chain", SPREAD, "acceptance.mean_accept_length", [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
              "mean_tpot_ms", -1, fixed={**spec, "server.speculative_algorithm": "eagle",
                                         "server.speculative_num_draft_tokens": 4, "acceptance": {},
                                         "workload.request_rate": 4.0}, tol=0.02),
        Check("tp_tpot", ["llama-70b/H100/tp4"], "profile_label", ["llama-70b/H100/tp4", "llama-70b/H100/tp8"],
              "mean_tpot_ms", -1, fixed={"workload.request_rate": 0.5}),
        Check("tp_tpot_h200", ["llama-70b/H200/tp2"], "profile_label",
              ["llama-70b/H200/tp2", "llama-70b/H200/tp4", "llama-70b/H200/tp8"],
              "mean_tpot_ms", -1, fixed={"workload.request_rate": 0.5}),
        Check("tp_tpot_mi355x", ["llama-70b/MI355X/tp2"], "profile_label",
              ["llama-70b/MI355X/tp2", "llama-70b/MI355X/tp4", "llama-70b/MI355X/tp8"],
              "mean_tpot_ms", -1, fixed={"workload.request_rate": 0.5}),
        Check("gpu_tpot", ["llama-8b/H100"], "profile_label", ["llama-8b/H100", "llama-8b/H200"],
              "mean_tpot_ms", -1, fixed={"workload.request_rate": 0.5}),
        Check("host_ghz_tpot", ["qwen3-0.6b/H100"], "profile_label",
              ["qwen3-0.6b/H100", "qwen3-0.6b/H100/3.5GHz", "qwen3-0.6b/H100/5GHz"], "mean_tpot_ms", -1,
              fixed={"workload.request_rate": 8.0, "server.cuda_graph_max_bs": 1}),
        Check("dp_attention_gqa", ["llama-70b/H100/tp8", "llama-70b/MI355X/tp8"], "server.dp_size", [1, 2, 8],
              "output_throughput", -1, tol=0.05,
              fixed={"server.enable_dp_attention": True, "workload.request_rate": float("inf"),
                     "workload.num_requests": 256, "server.max_running_requests": 256}),
        Check("closed_loop_tput", SPREAD, "workload.concurrency", [1, 2, 4, 8, 16, 32], "output_throughput", +1,
              fixed={"workload.kind": "closed_loop", "workload.request_rate": None, "workload.num_requests": 96}),
        Check("closed_loop_ttft", SPREAD, "workload.concurrency", [1, 2, 4, 8, 16, 32], "mean_ttft_ms", +1,
              fixed={"workload.kind": "closed_loop", "workload.request_rate": None, "workload.num_requests": 96},
              tol=0.05, atol=0.5),
        Check("input_ttft", SPREAD, "workload.input_len", [{"kind": "fixed", "value": v} for v in (64, 512, 2048, 8192)],
              "mean_ttft_ms", +1, fixed={"workload.request_rate": 0.5, "workload.num_requests": 40}, tol=0.02),
        Check("overlap_tpot", SPREAD, "server.enable_overlap_schedule", [False, True], "mean_tpot_ms", -1,
              fixed={"workload.request_rate": 4.0}, tol=0.01),
        Check("eager_tpot", SPREAD, "server.disable_decode_cuda_graph", [False, True], "mean_tpot_ms", +1,
              fixed={"workload.request_rate": 4.0}, tol=0.01),
        Check("spec_noaccept", SPREAD, "server.speculative_algorithm", ["none", "dspark", "eagle"], "mean_tpot_ms", +1,
              fixed={"server.max_running_requests": 48, "server.speculative_num_draft_tokens": 4,
                     "acceptance": {"mean_accept_length": 1.0}, "workload.request_rate": 1.0}, tol=0.01),
        Check("running_tput", SPREAD, "server.max_running_requests", [1, 4, 16, 64, 256], "output_throughput", +1,
              fixed={"workload.request_rate": float("inf"), "workload.num_requests": 256}, tol=0.02),
    ]


def _overrides(chk: Check, label: str, value: Any) -> tuple[str, dict[str, Any]]:
    """The profile and the overrides of one point of a sweep."""
    ov = dict(chk.fixed)
    if chk.knob == "profile_dtype":
        return (label if value == "bf16" else f"{label}/fp8"), ov
    if chk.knob == "profile_label":
        return value, ov
    if chk.knob == "server.speculative_algorithm" and value == "none":
        ov = {k: v for k, v in ov.items() if not k.startswith("acceptance") and k != "server.speculative_num_draft_tokens"}
    if chk.knob.startswith("acceptance.") and "acceptance" in ov:
        ov["acceptance"] = {**ov["acceptance"], chk.knob.split(".", 1)[1]: value}
        return label, ov
    ov[chk.knob] = value
    return label, ov


def judge(means: list[float], direction: int, tol: float, atol: float) -> tuple[bool, str]:
    """Whether each step keeps the direction within tolerance; the worst step otherwise."""
    for i in range(1, len(means)):
        a, b = means[i - 1], means[i]
        if any(map(math.isnan, (a, b))):
            return False, f"NaN at step {i}"
        slack = tol * abs(a) + atol
        if direction > 0 and b < a - slack:
            return False, f"step {i}: {a:.4g} -> {b:.4g} (falls)"
        if direction < 0 and b > a + slack:
            return False, f"step {i}: {a:.4g} -> {b:.4g} (rises)"
    return True, ""


def run_battery(seeds: int, only: set[str] | None, work: Path) -> tuple[list[Outcome], Battery]:
    bat = Battery(work, seeds)
    outs: list[Outcome] = []
    for chk in checks():
        if only and chk.name not in only:
            continue
        for label in chk.profiles:
            means, err = [], ""
            for v in chk.values:
                prof, ov = _overrides(chk, label, v)
                try:
                    means.append(bat.run(prof, ov)[chk.metric])
                except Exception as e:  # a crash is a finding, not the end of the battery
                    err = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                    means.append(float("nan"))
                    break
            ok, why = judge(means, chk.direction, chk.tol, chk.atol) if not err else (False, err)
            outs.append(Outcome(chk.name, label, list(chk.values), means, ok, why))
            print(f"{'PASS' if ok else 'FAIL'} {chk.name:20s} {label:26s} "
                  + " ".join(f"{m:.4g}" for m in means) + (f"  {why}" if why else ""), flush=True)
    return outs, bat


def _fmt_value(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("value", v))
    return str(v)


def report(outs: list[Outcome], bat: Battery, seeds: int, elapsed: float) -> str:
    """The markdown results page."""
    lines = [
        "# What-if sanity battery: results",
        "",
        f"`python benchmarks/whatif_sanity.py --seeds {seeds}`: {bat.runs} simulator runs, {elapsed:.0f} s. "
        "Analytic profiles (default factors) for each label's model, GPU, TP and dtype; a Poisson "
        "scenario (1024 prompt / 128 output tokens) with SGLang's defaults for that hardware; one "
        "knob swept per row; the mean over seeds of the metric must move the stated way "
        "(the checks and tolerances: the script's docstring).",
        "",
        "| check | profile | values | mean over seeds | verdict |",
        "|---|---|---|---|---|",
    ]
    by_check: dict[str, Check] = {c.name: c for c in checks()}
    for o in outs:
        c = by_check[o.check]
        arrow = "never down" if c.direction > 0 else "never up"
        vals = ", ".join(_fmt_value(v) for v in o.values)
        means = ", ".join(f"{m:.4g}" for m in o.means)
        verdict = "pass" if o.ok else f"**FAIL** {o.why}"
        lines.append(f"| {o.check} ({c.metric} {arrow}) | {o.profile} | {c.knob}: {vals} | {means} | {verdict} |")
    lines += ["", "## Bounds on every run", ""]
    if bat.bound_failures:
        lines += [f"- **FAIL** {b}" for b in bat.bound_failures[:50]]
    else:
        lines.append(f"All {bat.runs} runs: no inf, busy fraction <= 1, no overlapping GPU steps, prefilled = "
                     "prompt tokens, output = requested, every request completed, dense decode steps at or "
                     "above the weight read at datasheet bandwidth, dense extends at or above their FLOPs at "
                     "datasheet peak.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=seed_count, default=3, help="seeds per point (the mean is judged; default 3)")
    ap.add_argument("--only", default="", help="comma-separated check names (default: all)")
    ap.add_argument("--out", default=None, help="write the results page here (e.g. docs/whatif-sanity-results.md)")
    a = ap.parse_args(argv)
    only = {s for s in a.only.split(",") if s} or None
    names = [c.name for c in checks()]
    if only and not only <= set(names):
        ap.error(f"--only {a.only}: unknown check(s) {', '.join(sorted(only - set(names)))}; allowed: "
                 f"{', '.join(dict.fromkeys(names))}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outs, bat = run_battery(a.seeds, only, Path(tmp))
    elapsed = time.perf_counter() - t0
    for b in bat.bound_failures:
        print(f"FAIL bounds {b}")
    failed = sum(not o.ok for o in outs) + len(bat.bound_failures)
    print(f"{len(outs) - sum(not o.ok for o in outs)} of {len(outs)} sweeps pass; "
          f"{len(bat.bound_failures)} bound failures; {bat.runs} runs in {elapsed:.0f} s")
    if a.out:
        atomic_write_text(a.out, report(outs, bat, a.seeds, elapsed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
