"""Analytic profiles against the two public measurements (docs/analytic-profiles.md).

``python benchmarks/public_cases.py [--seeds 3] [--out DIR]`` writes analytic profiles
(default efficiency factors, nothing fitted to these cases) and scenarios into DIR, runs
them with the server defaults SGLang picks on that hardware, and prints predicted vs
reported (mean over seeds):

- P1 (AMD-AGI/Infera issue #74): 8x MI355X, TP8, DSpark with 7 draft tokens vs no
  speculation, random 1024 input / 128 output tokens, closed loop at concurrency 4..64 with
  4 x concurrency prompts; output tok/s.
- P2 (SGLang issues #40346 / #33483): Qwen3-0.6B on one RTX 5090, 1000 requests of 128 /
  256 tokens at 50 req/s, cuda_graph_max_bs 48 vs 128; median TPOT.
- The MI355X reference cells (scenarios/batch*-ll.yaml, burst256-ht.yaml, base arm) with
  their measured profile swapped for the analytic DeepSeek-V4-Flash TP4 profile: how close
  an unfitted analytic profile lands on measured figures of the same model and GPU.
- P1 with the measured reference profile (profiles/mi355x-dsv41-flash-tp4.yaml, DSpark arm
  only: it has no plain-decode grid): what the reference's own measured costs predict.
- P2 again at other host clocks (``--host-ghz``, default 3.5 and 5.0 GHz): the eager issue
  is host CPU work, and the case does not say which host ran it.
- Published decode figures (the ``decode`` entries of benchmarks/public_measurements.yaml,
  each with its source): one request's decode rate from the analytic model with default factors.

- P1 again with decode and verify run without graphs (``p1-eager``: a hypothesis about
  how P1 ran, not SGLang 0.5.23's default).

``--cases p1,p1-eager,p2,published,ref`` picks the checks.

Neither case states bench_serving's --random-range-ratio: lengths are taken as stated
(range ratio 1); ``--range-ratio 0`` runs bench_serving's default (lengths uniform in
[1, stated]; sglang benchmark/datasets/common.py compute_random_lens) instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import brentq
from specsched.analysis.closed_loop import closed_loop_split, crossover
from specsched.sim.acceptance import mean_accept_length
from specsched.sim.analytic.cli import write_analytic_profile
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import Efficiency
from specsched.sim.analytic.writer import build_profile
from specsched.sim.cli_types import positive_int
from specsched.sim.config import load_scenario
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
REF_CELLS = ["batch1-ll", "batch8-ll", "batch32-ll", "batch64-ll", "burst256-ht"]
P1_CONC = [4, 8, 16, 32, 64]
P1_REPORTED = {"none": [56.78, 241.69, 427.86, 689.22, 972.37], "dspark": [147.90, 328.58, 471.74, 685.25, 879.84]}
P2_REPORTED = {48: (5.44, 5.51), 128: (2.64, 2.64)}
P1_GAMMA = 7
"""P1's DSpark draft tokens (verify window 8)."""
REF_ACCEPT = (3.2394, 6)
"""The MI355X reference cells' DSpark acceptance (mean accept length 3.24 at window 6, fitted
on real text: scenarios/batch1-ll.yaml). P1 states no acceptance; this is the assumption."""


def rate_for(mean: float, gamma: int) -> float:
    """The constant per-position acceptance rate whose mean accept length is ``mean``."""
    return brentq(lambda r: mean_accept_length(np.full(gamma, r)) - mean, 1e-6, 1 - 1e-9)


def missing_split(d_plain: float, d_spec: float, out_len: float, window: int, accept: float) -> dict[str, tuple[float, float]]:
    """Read what a prediction misses in ``b`` (:func:`closed_loop_split`) as one cost the two
    arms share plus one term of a given form, solving two equations for two unknowns.

    ``d_plain``, ``d_spec``: reported minus predicted ``b`` of each arm (s). Every concurrent
    request costs the others ``P`` (the same in both arms: its prefill) plus ``n x d``,
    where ``n`` counts what the request puts through the target over its lifetime:

    - ``per_token``: a cost per token in every decode or verify forward: ``n`` is
      ``out_len`` decode tokens without speculation, ``window x out_len / accept`` verified
      tokens with it;
    - ``per_request``: a cost per request in every step or cycle, whatever its tokens:
      ``n`` is ``out_len`` steps, ``out_len / accept`` cycles.

    Returns ``{form: (P, d)}`` in seconds; a negative ``P`` or ``d`` means that form cannot
    produce the two misses. A form whose two counts are equal (every draft token accepted,
    ``accept == window``; or ``accept == 1``) cannot separate ``P`` from ``d`` and is left out.
    """
    out = {}
    for form, n_spec in (("per_token", window * out_len / accept), ("per_request", out_len / accept)):
        if abs(n_spec - out_len) < 1e-9 * out_len:
            continue
        d = (d_spec - d_plain) / (n_spec - out_len)
        out[form] = (d_plain - out_len * d, d)
    return out


def _write(path: Path, d: dict) -> Path:
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def _mean(scn: Path, key: str, seeds: int) -> float:
    sc = load_scenario(scn)
    return float(np.mean([run_scenario(sc, seed=s).summary[key] for s in range(1, seeds + 1)]))


def _length(value: int, range_ratio: float) -> dict:
    """The workload length spec for bench_serving's random lengths at ``range_ratio``."""
    if range_ratio >= 1.0:
        return {"kind": "fixed", "value": value}
    return {"kind": "uniform", "value": value, "range_ratio": range_ratio}


def p1(out: Path, seeds: int, model: str, range_ratio: float = 1.0, profile: Path | None = None,
       eager: bool = False) -> list[tuple]:
    """Predicted vs reported output tok/s for P1 with ``model`` on 8x MI355X (or with a
    given measured ``profile``: DSpark arm only, its window as measured). ``eager``: decode
    and verify without graphs (``disable_decode_cuda_graph``), a hypothesis about how P1
    ran, not SGLang 0.5.23's default (which captures decode graphs on ROCm too)."""
    if profile is None:
        prof = out / f"p1-{model}.yaml"
        write_analytic_profile(build_profile(load_model(model), load_gpu("MI355X"), 8, window=P1_GAMMA + 1), prof)
        arms, gamma = ("none", "dspark"), P1_GAMMA
    else:
        prof, arms, gamma = profile, ("dspark",), 5
    rate = rate_for(REF_ACCEPT[0], REF_ACCEPT[1] - 1)
    rows = []
    for i, c in enumerate(P1_CONC):
        for arm in arms:
            server = {"speculative_algorithm": arm}
            if eager:
                server["disable_decode_cuda_graph"] = True
            if arm == "dspark":
                server["speculative_num_draft_tokens"] = gamma + 1
            if profile is not None:
                server["max_total_num_tokens"] = 724_000  # the reference's SWA pool (the profile states no KV bytes)
            sc = {"name": f"p1-{model}-c{c}-{arm}{'-eager' if eager else ''}", "profile": str(prof), "server": server,
                  "workload": {"kind": "closed_loop", "concurrency": c, "num_requests": 4 * c,
                               "input_len": _length(1024, range_ratio),
                               "output_len": _length(128, range_ratio)}}
            if arm == "dspark":
                sc["acceptance"] = {"per_position_rates": [round(rate, 4)] * gamma, "request_spread": 0.2556}
            pred = _mean(_write(out / f"{sc['name']}.yaml", sc), "output_throughput", seeds)
            rows.append((model, c, arm, P1_REPORTED[arm][i], pred))
    return rows


def reference_cells(out: Path, seeds: int) -> list[tuple]:
    """The MI355X reference cells' base arm with the analytic DeepSeek-V4-Flash TP4 profile
    in place of their measured one (everything else as the cell states it): (cell, metric,
    reference, predicted mean over seeds)."""
    prof = out / "ref-deepseek-v4-flash-mi355x-tp4.yaml"
    write_analytic_profile(build_profile(load_model("deepseek-v4-flash"), load_gpu("MI355X"), 4, window=6), prof)
    rows = []
    for cell in REF_CELLS:
        d = yaml.safe_load((ROOT / "scenarios" / f"{cell}.yaml").read_text())
        refs = d.pop("reference")["base"]
        d.pop("arms", None)
        d["profile"] = str(prof)
        sc = load_scenario(_write(out / f"ref-{cell}.yaml", d))
        runs = [run_scenario(sc, seed=s).summary for s in range(1, seeds + 1)]
        rows += [(cell, k, ref, float(np.mean([r[k] for r in runs]))) for k, ref in refs.items()]
    return rows


def p2(out: Path, seeds: int, range_ratio: float = 1.0, host_ghz: float | None = None,
       graph_sizes: tuple[int, ...] = (48, 128)) -> list[tuple]:
    """Predicted vs reported median TPOT for P2 (``host_ghz``: the serving host's clock the
    eager issue is scaled to; None: the profile's default, the measured 2.1 GHz host)."""
    eff = Efficiency(host_ghz=host_ghz) if host_ghz else None
    tag = f"-{host_ghz:g}ghz" if host_ghz else ""
    prof = out / f"p2-qwen3-0.6b-rtx5090{tag}.yaml"
    write_analytic_profile(build_profile(load_model("qwen3-0.6b"), load_gpu("RTX5090"), 1, eff=eff), prof)
    rows = []
    for gbs in graph_sizes:
        sc = {"name": f"p2-graph{gbs}{tag}", "profile": str(prof), "server": {"cuda_graph_max_bs": gbs},
              "workload": {"kind": "poisson", "request_rate": 50, "num_requests": 1000,
                           "input_len": _length(128, range_ratio),
                           "output_len": _length(256, range_ratio)}}
        scn = load_scenario(_write(out / f"{sc['name']}.yaml", sc))
        per_seed = [run_scenario(scn, seed=s).summary["median_tpot_ms"] for s in range(1, seeds + 1)]
        rows.append((gbs, P2_REPORTED[gbs], float(np.mean(per_seed)), per_seed))
    return rows


def published() -> list[tuple]:
    """Predicted vs published decode tok/s for the ``decode`` entries of
    benchmarks/public_measurements.yaml (one request: 1 / graph-replayed decode step at the
    mean context; benchmarks/public_measurements.py prints them with the step's terms)."""
    spec = importlib.util.spec_from_file_location("_public_measurements", ROOT / "benchmarks" / "public_measurements.py")
    pm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pm)
    data = pm.load()
    return [(f"{m['id']} ({m['model']} {m['dtype']} TP{m['tp']}, batch {m['batch']})", m["gpu"], m["figure"], p["tok_s"],
             f"{m['source']}; confidence {m['confidence'].split(':')[0].split(' ')[0]}") for m, p in pm.decode_rows(data)]


def mean_length(value: int, range_ratio: float) -> float:
    """Mean of bench_serving's random lengths: uniform integers in
    [max(int(value x range_ratio), 1), value] (sglang benchmark/datasets/common.py
    ``compute_random_lens``); ``value`` itself at range ratio 1."""
    lo = max(int(value * range_ratio), 1) if range_ratio < 1.0 else value
    return (lo + value) / 2


def _print_split(rows: list[tuple], range_ratio: float = 1.0) -> None:
    """P1's closed-loop split (:func:`closed_loop_split`, concurrency 8-64: the public note
    calls the concurrency-4 row a warm-up effect) for the reported figures and each model,
    with the mean output length the range ratio gives (the reported rows are read the same
    way, as if they had run with it)."""
    out_len = mean_length(128, range_ratio)
    print(f"  closed-loop split, concurrency 8-64, mean output {out_len:g} tokens: a = lone request's lifetime "
          "(ms per output token), b = ms each concurrent request adds; crossover = where DSpark stops winning")
    split: dict[tuple[str, str], tuple[float, float]] = {}
    for who in ["reported"] + sorted({r[0] for r in rows}):
        for arm in ("none", "dspark"):
            pts = [(c, rep if who == "reported" else pred) for model, c, a_, rep, pred in rows
                   if a_ == arm and c >= 8 and (who == "reported" or model == who)
                   and (who != "reported" or model == rows[0][0])]
            if len(pts) >= 2:
                split[who, arm] = closed_loop_split([p[0] for p in pts], [p[1] for p in pts], out_len)
    for (who, arm), (a_, b_) in split.items():
        print(f"  {who:<20}{arm:>8}  a {a_ / out_len * 1e3:6.1f} ms/token  b {b_ * 1e3:6.1f} ms")
    for who in dict.fromkeys(w for w, _ in split):
        if (who, "none") in split and (who, "dspark") in split:
            x = crossover(split[who, "none"], split[who, "dspark"])
            print(f"  {who:<20} crossover: {'none' if x is None else f'{x:.0f}'}")
    accept = mean_accept_length(np.full(P1_GAMMA, rate_for(REF_ACCEPT[0], REF_ACCEPT[1] - 1)))
    for who in dict.fromkeys(w for w, _ in split):
        if who == "reported" or (who, "none") not in split or (who, "dspark") not in split:
            continue
        miss = [split["reported", arm][1] - split[who, arm][1] for arm in ("none", "dspark")]
        forms = missing_split(*miss, out_len, P1_GAMMA + 1, accept)
        print(f"  {who:<20} missing b: plain {miss[0] * 1e3:.1f} ms, DSpark {miss[1] * 1e3:.1f} ms; as shared P + "
              f"n x d (accept {accept:.2f}): " + "; ".join(
                  f"{form} P {pp * 1e3:.1f} ms, d {dd * 1e3:.3f} ms" for form, (pp, dd) in forms.items()))


CASES = ("p1", "p1-eager", "p2", "published", "ref")


def _cases(text: str) -> list[str]:
    """argparse type of --cases: known names only (a typo ran nothing and exited 0)."""
    names = [x for x in text.split(",") if x]
    bad = [x for x in names if x not in CASES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"expected names among {', '.join(CASES)}, got {text!r}")
    return names


def _ghz_list(text: str) -> list[float]:
    """argparse type of --host-ghz: positive finite clocks (a word was a traceback)."""
    try:
        vals = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GHz numbers > 0, comma-separated, got {text!r}") from None
    if not all(np.isfinite(v) and v > 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected GHz numbers > 0, comma-separated, got {text!r}")
    return vals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=positive_int, default=3, help="seeds per point (default 3)")
    ap.add_argument("--out", default=None, help="where the profiles and scenarios go (default: a temp dir)")
    ap.add_argument("--models", default="deepseek-v4-flash,deepseek-v3", help="P1 models (comma-separated)")
    ap.add_argument("--range-ratio", type=float, default=1.0,
                    help="bench_serving --random-range-ratio for both cases (default 1: lengths as stated)")
    ap.add_argument("--skip-reference", action="store_true", help="skip the MI355X reference-cell check")
    ap.add_argument("--cases", type=_cases, default=",".join(CASES),
                    help=f"which checks to run (comma-separated; default all: {', '.join(CASES)})")
    ap.add_argument("--host-ghz", type=_ghz_list, default="3.5,5.0",
                    help="P2 also at these host clocks (GHz, comma-separated; the eager issue scales with them)")
    a = ap.parse_args(argv)
    for m in a.models.split(","):
        try:
            load_model(m)
        except ConfigError as e:
            ap.error(f"argument --models: {e}")
    cases = set(a.cases)
    if a.skip_reference:
        cases.discard("ref")
    out = Path(a.out or tempfile.mkdtemp(prefix="public-cases-"))
    out.mkdir(parents=True, exist_ok=True)
    rr = a.range_ratio
    if "p1" in cases:
        print(f"P1: output tok/s, 8x MI355X TP8, mean of {a.seeds} seeds, range ratio {rr:g}")
        print(f"{'model':<22}{'conc':>5}{'arm':>8}{'reported':>10}{'predicted':>11}{'error':>8}")
        rows = [r for m in a.models.split(",") for r in p1(out, a.seeds, m, rr)]
        rows += p1(out, a.seeds, "measured-ref-tp4", rr, profile=ROOT / "profiles" / "mi355x-dsv41-flash-tp4.yaml")
        for model, c, arm, rep, pred in rows:
            print(f"{model:<22}{c:>5}{arm:>8}{rep:>10.1f}{pred:>11.1f}{(pred - rep) / rep * 100:>+7.0f}%")
        _print_split(rows, rr)
    if "p1-eager" in cases:
        print(f"P1 if decode and verify ran without graphs (disable_decode_cuda_graph: a hypothesis, not SGLang's "
              f"default), mean of {a.seeds} seeds")
        rows = [r for m in a.models.split(",") for r in p1(out, a.seeds, m, rr, eager=True)]
        for model, c, arm, rep, pred in rows:
            print(f"{model:<22}{c:>5}{arm:>8}{rep:>10.1f}{pred:>11.1f}{(pred - rep) / rep * 100:>+7.0f}%")
        _print_split(rows, rr)
    if "p2" in cases:
        print(f"P2: median TPOT (ms), Qwen3-0.6B on RTX 5090, mean of {a.seeds} seeds, range ratio {rr:g}")
        for gbs, rep, pred, per_seed in p2(out, a.seeds, rr):
            print(f"cuda_graph_max_bs {gbs:>4}: reported {rep[0]:.2f}-{rep[1]:.2f}, predicted {pred:.2f} "
                  f"(seeds: {', '.join(f'{x:.2f}' for x in per_seed)})")
        for ghz in a.host_ghz:
            for gbs, rep, pred, per_seed in p2(out, a.seeds, rr, host_ghz=ghz, graph_sizes=(48,)):
                print(f"cuda_graph_max_bs {gbs:>4}, host at {ghz:g} GHz: reported {rep[0]:.2f}-{rep[1]:.2f}, "
                      f"predicted {pred:.2f} (seeds: {', '.join(f'{x:.2f}' for x in per_seed)})")
    if "published" in cases:
        print("Published decode figures: tok/s, predicted by the analytic model with default factors")
        for label, gpu, pub, pred, src in published():
            print(f"{label} on {gpu}: published {pub:.1f}, predicted {pred:.1f} ({(pred - pub) / pub * 100:+.0f} %); {src}")
    if "ref" in cases:
        print(f"MI355X reference cells (base arm), analytic DeepSeek-V4-Flash TP4 profile, mean of {a.seeds} seeds")
        ref_rows = reference_cells(out, a.seeds)
        for cell, k, ref, pred in ref_rows:
            print(f"{cell:<12}{k:<22}{ref:>10.2f}{pred:>11.2f}{(pred - ref) / ref * 100:>+7.0f}%")
        cyc = {int(cell[5:-3]): (1e3 / ref, 1e3 / pred) for cell, k, ref, pred in ref_rows if k == "verify_cycles_per_s"}
        bs = sorted(cyc)
        print("  verify cycle (ms) by batch, reference / predicted: "
              + ", ".join(f"{b}: {cyc[b][0]:.1f} / {cyc[b][1]:.1f}" for b in bs)
              + "; ms per added request: "
              + ", ".join(f"{b0}->{b1}: {(cyc[b1][0] - cyc[b0][0]) / (b1 - b0):.2f} / "
                          f"{(cyc[b1][1] - cyc[b0][1]) / (b1 - b0):.2f}" for b0, b1 in zip(bs, bs[1:], strict=False)))
    print(f"profiles and scenarios in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
