"""Fit profiles/mi355x-dsv4pro-agentic.yaml to System B's agentic cells and print the fit.

System B (DeepSeek-V4 Pro with DSpark on AMD MI355X, an "agentic" benchmark at fixed
concurrency 128 / 192 / 256) is described in docs/agentic.md, with every assumption and the
arithmetic that maps its per-GPU figures onto one simulated DP rank. Usage (from the repo
root)::

    python benchmarks/fit_agentic_profile.py              # fit, print the table
    python benchmarks/fit_agentic_profile.py --write      # ... and write the profile
    python benchmarks/fit_agentic_profile.py --report-only  # table, profile as is
    python benchmarks/fit_agentic_profile.py --layout pd --report-only --seeds 1,2,3  # the disaggregated reading

The cells simulate one 8-GPU instance of the 32-GPU deployment: 8 DP-attention ranks in
lock-step (``server.enable_dp_attention``, sim/dp_attention.py), multi-turn conversations
sent back to back, round-robin dispatch and each rank's radix cache (docs/agentic.md).

What is fitted, from what:

1. Stage A (scipy.optimize Nelder-Mead on the squared relative errors of the 27 base-arm
   figures, each the mean over ``--seeds``: mean/median/p90 TTFT, mean/median/p90 TPOT,
   output/total/request throughput of agentic-c128, -c192, -c256): ``gpu.extend`` (seconds
   per prompt token of one rank's 1024-token chunk, linear through the origin; the draft-KV
   injection is tied to it at a fixed share, as in System A) and ``gpu.verify`` at 1 and 16
   requests per rank (one DSpark cycle, linear in batch size). With ``--cells`` also the two
   cell values the reference does not state (KV pool per rank, per-request acceptance
   spread), written into the scenario files.
2. Stage B (``--pair``; bounded scalar minimisation): ``host.schedule_s`` from the c128
   ``output_size`` pair (differences of mean/median/p90 TTFT). Off by default: the profile
   keeps System A's host costs, and the pair is a prediction (docs/agentic.md).
3. With ``--pair``, stages A and B alternate (``--rounds``). The c192 and c256
   ``output_size`` arms are held out: printed as predictions, never fitted.
4. Stage A2 (``--free extend,accept,kv``; the current cells, docs/agentic.md section 11):
   Nelder-Mead (or ``--method gauss-newton``: fewer simulations) over a chosen few of
   ``gpu.extend``, the cells' mean accept length (``acceptance.mean_accept_length``), KV pool
   per rank (``server.max_total_num_tokens``), turn-0 prompt shape (``sigma``, the
   log-normal shape of the cells' ``<cell>-input-lengths.csv``, read back from the files)
   and the tokenizer's time per prompt token (``ingest``: ``host.ingest_per_token_s``, the
   HTTP server's chat-template render and encode; docs/agentic.md section 13), the verify
   line kept, on the same base-arm loss. Accept length, pool and prompt shape are
   cell values the reference does not state; ``--write`` puts them into every cell. The run
   length (``--conversations-per-client K``: K conversations per client, i.e. 3K turns) is
   discrete and chosen by probes (docs/agentic.md section 12); ``--write`` writes it too.
   The ``output_size`` arms are never part of any loss here.

Scenario settings are never special-cased here: every cell is simulated from its YAML as
``specsched run`` would. ``--set KEY=VALUE`` (dotted scenario keys, applied to every cell) and
``--profile-set KEY=VALUE`` (dotted profile keys, e.g. a second context column of
``gpu.extend``) are for exploring rejected alternatives (docs/agentic.md); ``--write`` refuses
to run with either.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError
from scipy.optimize import minimize, minimize_scalar
from specsched.sim.cli_types import positive_int
from specsched.sim.config import Scenario, deep_merge, load_scenario, with_value
from specsched.sim.engine import run_scenario
from specsched.sim.errors import ConfigError
from specsched.sim.metrics import error_pct
from specsched.sim.profile import Profile, load_profile
from specsched.sim.yaml_io import load_yaml_text

ROOT = Path(__file__).resolve().parent.parent

PROFILE = ROOT / "profiles" / "mi355x-dsv4pro-agentic.yaml"
CELLS = ("agentic-c128", "agentic-c192", "agentic-c256")
PAIR_CELL = "agentic-c128"
LAYOUTS = {
    # the colocated reading: one 8-rank DP-attention instance of four (docs/agentic.md sections 3-7)
    "colocated": (PROFILE, CELLS, PAIR_CELL),
    # prefill-decode disaggregation, 2 prefill + 2 decode servers (docs/agentic.md section 9)
    "pd": (ROOT / "profiles" / "mi355x-dsv4pro-agentic-pd.yaml",
           ("agentic-pd-c128", "agentic-pd-c192", "agentic-pd-c256"), "agentic-pd-c128"),
}
FIT_KEYS = (
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms",
    "output_throughput", "total_throughput", "request_throughput",
)
PAIR_KEYS = ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms")
EXTEND_TOKENS = 2048
"""One rank's chunk: chunked_prefill_size 16384 // 8 ranks."""
VERIFY_BS = (1, 16)
INJECT_SHARE = 0.05
"""Draft-KV injection as a share of the whole DSpark prefill cost per token (assumed, as for
System A: not separable from any reference figure)."""
PROMPT_SIGMA = 0.5
"""Log-normal shape of turn 0's prompt lengths. If TTFT scaled with the prompt alone, the c128
base arm's mean/median TTFT = 4.625/3.385 = 1.366 = exp(sigma^2 / 2) would give 0.79; in the
lock-step model queueing behind a rank's other prompts widens TTFT too, and probing 0.8 /
0.6 / 0.5 on c128 (seed 1) brought mean/median/p90 TTFT from -10/-20/+12 % to -16/-10/+5 %
(docs/agentic.md section 5)."""
WORKER_RUNS = 8
"""Runs a worker process makes before the pool is replaced (bounds its memory: a
worker's resident size grows with every run it makes)."""
PROMPT_CAP = 1_000_000
"""Longest prompt, tokens (assumed context limit)."""
PROMPT_POINTS = 100
"""Equal-weight quantile points of the prompt-length histogram."""


# ----------------------------------------------------------------------------- lengths
def implied_means(ref: dict[str, float]) -> tuple[float, float]:
    """(mean prompt, mean output) tokens per request (turn) from a cell's base reference:
    deployment throughput / request throughput (bench_serving divides all three by one
    duration)."""
    q = ref["request_throughput"]
    return (ref["total_throughput"] - ref["output_throughput"]) / q, ref["output_throughput"] / q


def prompt_histogram(mean: float, sigma: float = PROMPT_SIGMA, cap: int = PROMPT_CAP,
                     points: int = PROMPT_POINTS) -> np.ndarray:
    """Prompt lengths (equal weights): log-normal quantiles, capped at ``cap``, scaled so that
    the capped mean is ``mean``."""
    from scipy.stats import norm

    z = norm.ppf((np.arange(points) + 0.5) / points)
    base = np.exp(sigma * z)
    lo, hi = 1e-3, 1e9  # scale s with mean(min(s * base, cap)) == mean
    for _ in range(200):
        s = (lo * hi) ** 0.5
        if np.minimum(s * base, cap).mean() < mean:
            lo = s
        else:
            hi = s
    return np.round(np.minimum(s * base, cap)).astype(int)


def _mean_len(dist) -> float:
    """Mean of a uniform or fixed length distribution (what the cells use for tool results)."""
    if dist.kind == "fixed":
        return float(dist.value)
    lo = max(1, int(dist.value * dist.range_ratio))
    return (lo + dist.value) / 2


def first_prompt_lengths(sc: Scenario, sigma: float) -> np.ndarray:
    """Turn 0's prompt lengths of a cell (equal weights): log-normal of shape ``sigma`` whose
    mean makes the mean prompt over the conversation's turns the implied one (turn k adds
    k x (mean output + mean tool result) tokens)."""
    mean_in, mean_out = implied_means(sc.reference["base"])
    mt = sc.workload.multi_turn
    return prompt_histogram(mean_in - (mt.num_turns - 1) / 2 * (mean_out + _mean_len(mt.user_len)), sigma)


def lengths_csv(lengths: np.ndarray) -> str:
    return "length,weight\n" + "".join(f"{n},1\n" for n in lengths)


def sigma_of(path: Path) -> float:
    """The log-normal shape of a histogram :func:`prompt_histogram` wrote: the slope of
    log(length) over the normal quantile of its (uncapped) points."""
    from scipy.stats import norm

    lengths = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)[:, 0]
    z = norm.ppf((np.arange(len(lengths)) + 0.5) / len(lengths))
    keep = lengths < PROMPT_CAP
    return float(np.polyfit(z[keep], np.log(lengths[keep]), 1)[0])


def current_sigma() -> float:
    """The prompt shape the colocated cells' histograms were written with (they must agree)."""
    sig = {c: round(sigma_of(ROOT / "scenarios" / f"{c}-input-lengths.csv"), 3) for c in LAYOUTS["colocated"][1]}
    if len(set(sig.values())) != 1:
        raise SystemExit(f"the agentic cells' prompt histograms disagree on sigma: {sig}")
    return next(iter(sig.values()))


def write_lengths(overrides: dict[str, Any] | None = None, sigma: float | None = None) -> None:
    """Write scenarios/<cell>-input-lengths.csv (columns length,weight): turn 0's prompt
    lengths (:func:`first_prompt_lengths`), of shape ``sigma`` (default: as written now)."""
    sigma = current_sigma() if sigma is None else sigma
    for c in CELLS:
        sc = scenario(c, "base", overrides)
        lengths = first_prompt_lengths(sc, sigma)
        path = ROOT / "scenarios" / f"{c}-input-lengths.csv"
        path.write_text(lengths_csv(lengths))
        print(f"wrote {path.relative_to(ROOT)}: sigma {sigma}, mean {lengths.mean():.0f} (turn 0; per-turn mean "
              f"{implied_means(sc.reference['base'])[0]:.0f}), median {np.median(lengths):.0f}, max {lengths.max()}")


# --------------------------------------------------------------------------- scenarios
def scenario(name: str, arm: str = "base", overrides: dict[str, Any] | None = None) -> Scenario:
    """A cell's scenario with ``arm`` applied, plus optional dotted-key overrides (validated)."""
    sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml", arm)
    if not overrides:
        return sc
    data = deep_merge(sc.model_dump(mode="json"), overrides)
    return Scenario.model_validate(data)


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["server.enable_mixed_chunk=false", ...]`` -> nested override dict (values as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, text = item.partition("=")
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(text)
    return out


# ---------------------------------------------------------------------------- profile
def profile_sets(profile: Profile, items: list[str]) -> Profile:
    """``profile`` with ``["gpu.draft_inject_per_token_s=1e-6", ...]`` put in (values as YAML,
    validated as the profile loader validates them).

    Raises:
        ValueError: an item without ``=``, a key the profile does not have, or a value it
            refuses (the message names the item).
    """
    p = profile
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--profile-set {item!r}: expected KEY=VALUE (a dotted profile key)")
        node: Any = p.model_dump()
        for k in key.split("."):
            if not isinstance(node, dict) or k not in node:
                raise ValueError(f"--profile-set {item!r}: the profile has no key {key!r}")
            node = node[k]
        try:
            p = with_value(p, key, load_yaml_text(text, "--profile-set"))
        except ConfigError as e:
            raise ValueError(f"--profile-set {item!r}: {e.allowed}") from None
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ValueError(f"--profile-set {item!r}: refused ({where}: {err['msg']})") from None
    return p


def params_of(profile: Profile) -> np.ndarray:
    """Stage-A parameters of a profile: (extend s/token, verify(bs 1) s, verify(bs 16) s)."""
    g = profile.gpu
    ext = g.extend.seconds[-1][0] / g.extend.x[-1]
    v = {int(x): row[0] for x, row in zip(g.verify.x, g.verify.seconds, strict=True)}
    return np.array([ext, v[VERIFY_BS[0]], v[VERIFY_BS[1]]])


def apply(profile: Profile, theta: np.ndarray | None = None, schedule: float | None = None) -> Profile:
    """``profile`` with stage-A parameters ``theta`` and/or stage-B ``schedule`` put in."""
    p = profile
    if theta is not None:
        ext, v1, v8 = (float(t) for t in theta)
        p = with_value(p, "gpu.extend", {"x": [1, EXTEND_TOKENS], "context_len": [0.0],
                                  "seconds": [[ext], [ext * EXTEND_TOKENS]],
                                  "context_span": profile.gpu.extend.context_span})
        p = with_value(p, "gpu.draft_inject_per_token_s", ext * INJECT_SHARE / (1 - INJECT_SHARE))
        p = with_value(p, "gpu.verify", {"x": list(VERIFY_BS), "context_len": [0.0], "seconds": [[v1], [v8]],
                                  "context_span": profile.gpu.verify.context_span})
    if schedule is not None:
        p = with_value(p, "host.schedule_s", float(schedule))
    return p


# ------------------------------------------------------------------------- simulation
def _run_one(args: tuple[str, str, int, dict, dict]) -> dict[str, float]:
    name, arm, seed, prof, overrides = args
    sc = scenario(name, arm, overrides)
    s = run_scenario(sc, seed=seed, profile=Profile.model_validate(prof)).summary
    return {k: float(v) for k, v in s.items() if isinstance(v, (int, float))}


class Evaluator:
    """Runs (cell, arm) pairs for a profile, averaged over seeds, in a process pool."""

    def __init__(self, seeds: list[int], jobs: int, overrides: dict[str, Any] | None = None,
                 per_cell: dict[str, dict[str, Any]] | None = None) -> None:
        self.seeds = seeds
        self.overrides = overrides or {}
        self.per_cell = per_cell or {}
        """Overrides of one cell each (the run length, which scales with the concurrency)."""
        self.shape: dict[str, dict[str, Any]] = {}
        """Per-cell overrides of the prompt histograms being fitted (:func:`shape_overrides`)."""
        self.jobs = jobs
        self.per_seed: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        """The last call's values per (cell, arm) and summary key, one per seed, in seed order."""

    def __call__(self, profile: Profile, runs: list[tuple[str, str]], cells: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, float]]:
        """Summaries per (cell, arm); ``cells``: scenario values being fitted (applied on top
        of the files and of --set)."""
        prof = profile.model_dump(mode="json")
        ov = deep_merge(self.overrides, cells or {})

        def cell_ov(c: str) -> dict[str, Any]:
            return deep_merge(deep_merge(ov, self.per_cell.get(c, {})), self.shape.get(c, {}))

        tasks = [(c, a, s, prof, cell_ov(c)) for c, a in runs for s in self.seeds]
        if self.jobs > 1:  # fresh workers every WORKER_RUNS runs each: a worker's memory grows
            # with the runs it makes (one kept over ~75 runs reached 10.9 GB and was OOM-killed)
            results = []
            step = self.jobs * WORKER_RUNS
            for i in range(0, len(tasks), step):
                with ProcessPoolExecutor(self.jobs) as pool:
                    results += list(pool.map(_run_one, tasks[i:i + step]))
        else:
            results = [_run_one(t) for t in tasks]
        out: dict[tuple[str, str], dict[str, float]] = {}
        n = len(self.seeds)
        self.per_seed = {}
        for i, (c, a) in enumerate(runs):
            chunk = results[i * n:(i + 1) * n]
            self.per_seed[(c, a)] = {k: np.array([r.get(k, np.nan) for r in chunk]) for k in chunk[0]}
            out[(c, a)] = {k: float(np.mean([r[k] for r in chunk])) for k in chunk[0]}
        return out

    def close(self) -> None:
        """Nothing to release: each call's workers end with it (kept for the callers)."""


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` or ``"1-20"`` (or a mix, ``"1-5,9"``) -> seeds, in order, each once.

    Raises:
        ValueError: an item that is not a positive integer or an ascending range of them.
    """
    seeds: list[int] = []
    for item in text.split(","):
        lo, dash, hi = item.strip().partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError(f"--seeds {text!r}: {item!r} is not a seed or a range a-b of positive integers") from None
        if a < 1 or b < a:
            raise ValueError(f"--seeds {text!r}: {item!r} is not a seed or a range a-b of positive integers")
        seeds += [s for s in range(a, b + 1) if s not in seeds]
    return seeds


def standard_error_pct(values: np.ndarray) -> float:
    """Standard error of the mean of per-seed ``values``, as a percentage of that mean (nan
    with fewer than two seeds): the seed noise left in a figure the fit or the table uses."""
    v = np.asarray(values, float)
    if len(v) < 2 or not np.isfinite(v).all() or v.mean() == 0:
        return float("nan")
    return float(v.std(ddof=1) / np.sqrt(len(v)) / abs(v.mean()) * 100)


def paired_change_pct(base: np.ndarray, change: np.ndarray) -> tuple[float, float]:
    """An arm's change against the base arm, each seed with its own base (the two arms of a
    seed draw the same workload): (relative change of the means, %, and its standard error,
    %, from the per-seed relative changes; nan with fewer than two seeds)."""
    b, c = np.asarray(base, float), np.asarray(change, float)
    rel = (c - b) / b * 100
    se = float(rel.std(ddof=1) / np.sqrt(len(rel))) if len(rel) > 1 else float("nan")
    return float((c.mean() - b.mean()) / b.mean() * 100), se


def references(overrides: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """Reference figures per (cell, arm) from the scenarios' ``reference`` blocks."""
    out = {}
    for c in CELLS:
        for arm, figs in scenario(c, "base", overrides).reference.items():
            out[(c, arm)] = dict(figs)
    return out


def rel_errors(pred: dict[str, float], ref: dict[str, float], keys: tuple[str, ...]) -> list[float]:
    return [(pred[k] - ref[k]) / ref[k] for k in keys if k in ref]


def run_length_overrides(per_client: int, overrides: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per-cell overrides giving every client ``per_client`` conversations (the run length:
    num_conversations = per_client x concurrency, each of the cell's num_turns)."""
    out = {}
    for c in CELLS:
        w = scenario(c, "base", overrides).workload
        n = per_client * w.concurrency
        out[c] = {"workload": {"num_requests": n * w.multi_turn.num_turns, "multi_turn": {"num_conversations": n}}}
    return out


def shape_overrides(sigma: float, folder: Path, per_cell: dict[str, dict[str, Any]],
                    overrides: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per-cell overrides pointing turn 0's prompts at histograms of shape ``sigma``
    (:func:`first_prompt_lengths`), written into ``folder``."""
    out = {}
    for c in CELLS:
        sc = scenario(c, "base", deep_merge(overrides or {}, per_cell.get(c, {})))
        path = folder / f"{c}-sigma{sigma:.4f}.csv"
        path.write_text(lengths_csv(first_prompt_lengths(sc, sigma)))
        out[c] = {"workload": {"multi_turn": {"first_prompt_len": {"kind": "file", "path": str(path)}}}}
    return out


# ---------------------------------------------------------------------------------- fit
def cell_values(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fitted scenario values the cells share (KV pool, acceptance spread and mean); they
    must agree."""
    seen = {(sc.server.max_total_num_tokens, sc.acceptance.request_spread, sc.acceptance.mean_accept_length)
            for sc in (scenario(c, "base", overrides) for c in CELLS)}
    if len(seen) != 1:
        raise SystemExit("the agentic cells disagree on (max_total_num_tokens, request_spread, "
                         f"mean_accept_length): {sorted(seen)}")
    kv, spread, accept = seen.pop()
    return {"server": {"max_total_num_tokens": kv},
            "acceptance": {"request_spread": spread, "mean_accept_length": accept}}


def fit_base(ev: Evaluator, profile: Profile, cells: dict[str, Any], refs: dict, max_evals: int,
             verbose: bool, fit_cells: bool = True) -> tuple[Profile, dict[str, Any]]:
    """Stage A: Nelder-Mead over log(extend, verify(1), verify(16)[, KV pool, spread])."""
    kv0, sp0 = cells["server"]["max_total_num_tokens"], cells["acceptance"]["request_spread"]
    x0 = np.log(np.r_[params_of(profile), [kv0, max(sp0, 0.02)] if fit_cells else []])
    runs = [(c, "base") for c in CELLS]
    count = [0]

    def unpack(z: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        x = np.exp(z)
        if not fit_cells:
            return x, cells
        return x[:3], {"server": {"max_total_num_tokens": int(round(x[3]))},
                       "acceptance": {"request_spread": round(float(x[4]), 4),
                                      "mean_accept_length": cells["acceptance"]["mean_accept_length"]}}

    def loss(z: np.ndarray) -> float:
        theta, cv = unpack(z)
        if theta[2] < theta[1]:  # a larger verify batch is never faster
            return 1e3 + float(theta[1] - theta[2])
        if cv["acceptance"]["request_spread"] > 5:
            return 1e3
        try:
            preds = ev(apply(profile, theta), runs, cv)
        except Exception as e:  # e.g. a pool too small for the longest prompt: outside the domain
            if verbose:
                print(f"  A rejected {cv}: {e}", file=sys.stderr)
            return 1e3
        errs = [e for c in CELLS for e in rel_errors(preds[(c, "base")], refs[(c, "base")], FIT_KEYS)]
        val = float(np.sum(np.square(errs)))
        count[0] += 1
        if verbose and count[0] % 5 == 0:
            print(f"  A eval {count[0]:3d}: loss {val:.4f}  extend {theta[0] * 1e6:.3f} us/tok "
                  f"verify(1) {theta[1] * 1e3:.2f} ms verify(16) {theta[2] * 1e3:.2f} ms "
                  f"KV {cv['server']['max_total_num_tokens']} spread {cv['acceptance']['request_spread']}", file=sys.stderr)
        return val

    n = len(x0)
    simplex = np.vstack([x0] + [x0 + 0.12 * np.eye(n)[i] for i in range(n)])
    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"maxfev": max_evals, "xatol": 2e-3, "fatol": 1e-5, "initial_simplex": simplex})
    theta, cv = unpack(res.x)
    return apply(profile, theta), cv


def fit_extend(ev: Evaluator, profile: Profile, cells: dict[str, Any], refs: dict, max_evals: int,
               verbose: bool) -> Profile:
    """Stage A1 (``--extend-only``): ``gpu.extend`` alone, bounded scalar minimisation of the
    same loss as stage A, the verify line kept. With mixed chunks on (the cells' reading,
    docs/agentic.md section 10) nearly every forward of the instance carries some rank's
    chunk, so the chunk's cost sets TTFT, TPOT and throughput together and the verify cost
    is barely seen: one parameter is what the 27 figures identify."""
    th0 = params_of(profile)
    runs = [(c, "base") for c in CELLS]

    def loss(ext_us: float) -> float:
        preds = ev(apply(profile, np.r_[ext_us * 1e-6, th0[1:]]), runs, cells)
        errs = [e for c in CELLS for e in rel_errors(preds[(c, "base")], refs[(c, "base")], FIT_KEYS)]
        val = float(np.sum(np.square(errs)))
        if verbose:
            print(f"  A1 extend {ext_us:.3f} us/token: loss {val:.4f}, largest {max(abs(e) for e in errs) * 100:.1f}%, "
                  f"mean {np.mean(np.abs(errs)) * 100:.1f}%", file=sys.stderr, flush=True)
        return val

    res = minimize_scalar(loss, bounds=(12.0, 17.0), method="bounded", options={"xatol": 0.1, "maxiter": max_evals})
    return apply(profile, np.r_[res.x * 1e-6, th0[1:]])


FREE = ("extend", "accept", "kv", "sigma", "ingest")
"""Stage A2's parameters: gpu.extend (s per prompt token), acceptance.mean_accept_length,
server.max_total_num_tokens (per rank), the log-normal shape of turn 0's prompt lengths
(the cells' histograms, :func:`first_prompt_lengths`), host.ingest_per_token_s (the HTTP
server's chat-template render and encode per prompt token, one FIFO per instance: sim/
engine_clients.py ``Clients._ingest_s``; started from INGEST_START when the profile has 0)."""
INGEST_START = 1e-6
"""Starting value of host.ingest_per_token_s for a fit (s per prompt token; assumed: a
fast tokenizer encodes on the order of a million tokens a second on one core). The fit works
in log units, so it cannot start from the profile's 0."""


def fit_free(ev: Evaluator, profile: Profile, cells: dict[str, Any], refs: dict, names: list[str],
             max_evals: int, verbose: bool, sigma: float, folder: Path,
             method: str = "nelder-mead") -> tuple[Profile, dict[str, Any], float]:
    """Stage A2 (``--free``): minimise over log of the named parameters (a subset of
    :data:`FREE`), the verify line and everything else kept, stage A's base-arm loss (the
    27 figures, each a mean over the seeds), by Nelder-Mead or (``method="gauss-newton"``)
    by :func:`gauss_newton` on the 27 relative errors. ``sigma``: the prompt shape to start
    from (or to keep); its histograms go to ``folder``. Returns the profile, cell values and
    prompt shape at the best point seen; leaves ``ev.shape`` at that shape."""
    th0 = params_of(profile)
    start = {"extend": th0[0], "accept": cells["acceptance"]["mean_accept_length"],
             "kv": cells["server"]["max_total_num_tokens"], "sigma": sigma,
             "ingest": profile.host.ingest_per_token_s or INGEST_START}
    x0 = np.log([start[k] for k in names])
    runs = [(c, "base") for c in CELLS]
    best: list[Any] = [np.inf, None]

    def unpack(z: np.ndarray) -> tuple[Profile, dict[str, Any], float]:
        v = dict(zip(names, np.exp(z), strict=True))
        prof = apply(profile, np.r_[v.get("extend", th0[0]), th0[1:]])
        if "ingest" in v:
            prof = with_value(prof, "host.ingest_per_token_s", float(v["ingest"]))
        cv = deep_merge(cells, {})
        if "accept" in v:
            cv["acceptance"]["mean_accept_length"] = round(float(v["accept"]), 4)
        if "kv" in v:
            cv["server"]["max_total_num_tokens"] = int(round(v["kv"]))
        return prof, cv, round(float(v.get("sigma", sigma)), 4)

    def residuals(z: np.ndarray) -> np.ndarray | None:
        """The 27 relative errors at ``z``; None outside the domain."""
        prof, cv, sig = unpack(z)
        if not 1.0 <= cv["acceptance"]["mean_accept_length"] <= 6.0:  # within the verify window
            return None
        if not 0.05 <= sig <= 1.5:
            return None
        ev.shape = shape_overrides(sig, folder, ev.per_cell, ev.overrides)
        try:
            preds = ev(prof, runs, cv)
        except Exception as e:  # e.g. a pool too small for the longest prompt: outside the domain
            if verbose:
                print(f"  A2 rejected {cv}: {e}", file=sys.stderr)
            return None
        errs = np.array([e for c in CELLS for e in rel_errors(preds[(c, "base")], refs[(c, "base")], FIT_KEYS)])
        val = float(np.sum(np.square(errs)))
        if val < best[0]:
            best[:] = [val, z.copy()]
        if verbose:
            print(f"  A2 extend {params_of(prof)[0] * 1e6:.3f} us/tok accept {cv['acceptance']['mean_accept_length']} "
                  f"KV {cv['server']['max_total_num_tokens']} sigma {sig} ingest "
                  f"{prof.host.ingest_per_token_s * 1e9:.1f} ns/tok: loss {val:.4f}, largest "
                  f"{max(abs(e) for e in errs) * 100:.1f}%, mean {np.mean(np.abs(errs)) * 100:.1f}%",
                  file=sys.stderr, flush=True)
        return errs

    def loss(z: np.ndarray) -> float:
        r = residuals(z)
        return 1e3 if r is None else float(np.sum(np.square(r)))

    if method == "gauss-newton":
        fd = {"extend": 0.02, "accept": 0.03, "kv": 0.1, "sigma": 0.1, "ingest": 0.5}
        gauss_newton(residuals, x0, np.array([fd[k] for k in names]), max_evals, verbose)
    else:
        steps = {"extend": 0.04, "accept": 0.06, "kv": 0.2, "sigma": 0.3, "ingest": 0.7}
        n = len(x0)
        simplex = np.vstack([x0] + [x0 + steps[names[i]] * np.eye(n)[i] for i in range(n)])
        minimize(loss, x0, method="Nelder-Mead",
                 options={"maxfev": max_evals, "xatol": 5e-3, "fatol": 1e-4, "initial_simplex": simplex})
    prof, cv, sig = unpack(best[1] if best[1] is not None else x0)
    ev.shape = shape_overrides(sig, folder, ev.per_cell, ev.overrides)
    return prof, cv, sig


def gauss_newton(residuals, x0: np.ndarray, fd_steps: np.ndarray, max_evals: int, verbose: bool,
                 max_step: float = 0.2) -> np.ndarray:
    """Damped Gauss-Newton on ``residuals`` (z -> error vector, or None outside the domain)
    within ``max_evals`` calls: a forward-difference Jacobian (``fd_steps``, one call per
    parameter: large enough to step over the seed-mean's jitter), then steps of
    (J'J + lam diag(J'J)) d = -J'r, each component capped at ``max_step`` (log units); a
    step that lowers the loss is kept and the Jacobian updated by Broyden's rank-one rule
    (no new differences); one that does not raises lam tenfold. Fewer simulations than
    Nelder-Mead's simplex for the same descent when the 27 errors are smooth in the
    parameters. Returns the best point (the caller keeps it too)."""
    def call(z):
        r = residuals(z)
        return r, (np.inf if r is None else float(np.sum(np.square(r))))

    x, (r, f) = x0.copy(), call(x0)
    evals = 1
    if r is None:
        raise SystemExit("the starting point is outside the domain")
    n = len(x0)
    jac = np.zeros((len(r), n))
    for i in range(n):
        if evals >= max_evals:
            return x
        z = x.copy()
        z[i] += fd_steps[i]
        ri, _ = call(z)
        evals += 1
        if ri is None:
            z[i] = x[i] - fd_steps[i]
            ri, _ = call(z)
            evals += 1
            if ri is None:
                raise SystemExit(f"no difference step for parameter {i} stays in the domain")
        jac[:, i] = (ri - r) / (z[i] - x[i])
    lam = 0.1
    while evals < max_evals:
        a = jac.T @ jac
        d = np.linalg.solve(a + lam * np.diag(np.diag(a)), -jac.T @ r)
        d *= min(1.0, max_step / max(np.max(np.abs(d)), 1e-12))
        rn, fn = call(x + d)
        evals += 1
        if verbose:
            print(f"  GN step {np.round(d, 4)} (lam {lam}): loss {f:.4f} -> {fn:.4f}", file=sys.stderr, flush=True)
        if rn is not None and fn < f:
            jac += np.outer(rn - r - jac @ d, d) / (d @ d)   # Broyden
            x, r, f = x + d, rn, fn
            lam = max(lam / 3, 1e-3)
        else:
            lam *= 10
    return x


def fit_pair(ev: Evaluator, profile: Profile, cells: dict[str, Any], refs: dict, verbose: bool) -> Profile:
    """Stage B: host.schedule_s from the c128 (output_size - base) TTFT differences.

    Bounded above so that schedule + process work stays shorter than a batch-1 verify: then
    it is hidden behind the forward in decode (overlap) and exposed only after a blocking
    slot expansion, so the base arms alone cannot see it."""
    ref_b, ref_o = refs[(PAIR_CELL, "base")], refs[(PAIR_CELL, "output_size")]
    runs = [(PAIR_CELL, "base"), (PAIR_CELL, "output_size")]
    hi = 0.9 * params_of(profile)[1] - profile.host.process_s - 8 * profile.host.process_per_req_s

    def loss(s: float) -> float:
        preds = ev(apply(profile, schedule=s), runs, cells)
        pb, po = preds[runs[0]], preds[runs[1]]
        errs = [((po[k] - pb[k]) - (ref_o[k] - ref_b[k])) / ref_b[k] for k in PAIR_KEYS]
        val = float(np.sum(np.square(errs)))
        if verbose:
            print(f"  B schedule_s {s * 1e3:7.3f} ms: loss {val:.6f}", file=sys.stderr)
        return val

    res = minimize_scalar(loss, bounds=(0.0, hi), method="bounded", options={"xatol": 2e-4, "maxiter": 20})
    return apply(profile, schedule=float(res.x))


# ------------------------------------------------------------------------------- report
def table(ev: Evaluator, profile: Profile, cells: dict[str, Any] | None, refs: dict) -> tuple[str, dict]:
    """Predicted vs reference for every cell and arm (held-out arms: predictions only)."""
    runs = [(c, a) for c in CELLS for a in ("base", "output_size")]
    preds = ev(profile, runs, cells)
    lines = ["(* = held out: prediction only; se = standard error of the model's mean over the seeds, % of it)",
             f"{'cell':<14}{'arm':<13}{'metric':<20}{'reference':>11}{'model':>11}{'error':>9}{'se':>7}"]
    for c, a in runs:
        ref = refs.get((c, a))
        tag = a if ref else f"{a}*"
        for k in FIT_KEYS:
            p = preds[(c, a)][k]
            se = f"{standard_error_pct(ev.per_seed[(c, a)][k]):>6.1f}%"
            if ref and k in ref:
                lines.append(f"{c:<14}{tag:<13}{k:<20}{ref[k]:>11.4g}{p:>11.4g}{error_pct(p, ref[k]):>+8.1f}%{se}")
            else:
                lines.append(f"{c:<14}{tag:<13}{k:<20}{'-':>11}{p:>11.4g}{'':>9}{se}")
    for c in CELLS:
        b, o = ev.per_seed[(c, "base")], ev.per_seed[(c, "output_size")]
        d = "  ".join("{} {:+.2f} +- {:.2f}%".format(k.removesuffix('_ms'), *paired_change_pct(b[k], o[k]))
                      for k in FIT_KEYS)
        lines.append(f"{c} output_size vs base (model, +- se over paired seeds):     {d}")
    ref_b, ref_o = refs[(PAIR_CELL, "base")], refs[(PAIR_CELL, "output_size")]
    d = "  ".join(f"{k.removesuffix('_ms')} {(ref_o[k] - ref_b[k]) / ref_b[k] * 100:+.2f}%" for k in FIT_KEYS if k in ref_o)
    lines.append(f"{PAIR_CELL} output_size vs base (reference): {d}")
    errs = [e for c in CELLS for e in rel_errors(preds[(c, "base")], refs[(c, "base")], FIT_KEYS)]
    lines.append(f"base arms: largest error {max(abs(e) for e in errs) * 100:.1f}%, mean |error| "
                 f"{np.mean(np.abs(errs)) * 100:.1f}%, loss (sum of squared relative errors) {np.sum(np.square(errs)):.4f}")
    return "\n".join(lines), preds


def write(profile: Profile, cells: dict[str, Any], per_client: int | None = None, sigma: float | None = None) -> None:
    """Rewrite the profile's gpu and host blocks (keeping its header comments and provenance)
    and the cells' shared fitted values (server.max_total_num_tokens, acceptance.request_spread,
    mean accept length); with ``per_client`` the cells' run length (num_conversations,
    num_requests), with ``sigma`` their turn-0 prompt histograms."""
    kv, spread = cells["server"]["max_total_num_tokens"], cells["acceptance"]["request_spread"]
    accept = cells["acceptance"]["mean_accept_length"]
    text = PROFILE.read_text()
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    data = yaml.safe_load(text)
    dumped = profile.model_dump(mode="json", exclude={"path"})
    for block, keys in (("gpu", ("extend", "draft_inject_per_token_s", "verify")),
                        ("host", ("schedule_s", "ingest_per_token_s"))):
        for k in keys:  # the fitted values only: the file keeps its other keys as written
            data[block][k] = dumped[block][k]
    PROFILE.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100))
    for c in CELLS:
        p = ROOT / "scenarios" / f"{c}.yaml"
        t = p.read_text()
        for key, val in (("max_total_num_tokens", kv), ("request_spread", spread), ("mean_accept_length", accept)):
            t, n = re.subn(rf"(\n  {key}: )[0-9.e+-]+", rf"\g<1>{val}", t)
            if n != 1:
                raise SystemExit(f"{p}: expected one '  {key}:' line")
        if per_client is not None:
            w = scenario(c).workload
            n_conv = per_client * w.concurrency
            for key, val, indent in (("num_requests", n_conv * w.multi_turn.num_turns, "  "),
                                     ("num_conversations", n_conv, "    ")):
                t, n = re.subn(rf"(\n{indent}{key}: )[0-9]+", rf"\g<1>{val}", t)
                if n != 1:
                    raise SystemExit(f"{p}: expected one '{indent}{key}:' line")
        p.write_text(t)
    if sigma is not None:
        write_lengths(sigma=sigma)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the fitted values into the profile (and the KV pool into the cells)")
    ap.add_argument("--report-only", action="store_true", help="print the table with the files as they are")
    ap.add_argument("--max-evals", type=int, default=60, help="simulations per stage-A round")
    ap.add_argument("--rounds", type=int, default=1, help="stage A / stage B alternations")
    ap.add_argument("--seeds", default="1,2", help="seeds averaged per figure (comma-separated; a-b for a range)")
    ap.add_argument("--jobs", type=positive_int, default=2, help="worker processes")
    ap.add_argument("--pair", action="store_true", help="also fit host.schedule_s to the c128 output_size pair (stage B)")
    ap.add_argument("--extend-only", action="store_true", help="fit gpu.extend alone (bounded scalar search; the verify line kept)")
    ap.add_argument("--cells", action="store_true", help="also fit the cells' KV pool and acceptance spread")
    ap.add_argument("--free", metavar="NAMES", help="stage A2: fit these of " + ",".join(FREE)
                    + " (comma-separated; Nelder-Mead, the verify line kept)")
    ap.add_argument("--method", choices=("nelder-mead", "gauss-newton"), default="nelder-mead",
                    help="stage A2's optimizer (--free)")
    ap.add_argument("--write-lengths", action="store_true", help="(re)write scenarios/<cell>-input-lengths.csv and stop")
    ap.add_argument("--sigma", type=float, help="turn-0 prompt shape (log-normal sigma) to use instead of the histograms' own")
    ap.add_argument("--conversations-per-client", type=int, metavar="K",
                    help="run length: K conversations per client in every cell (num_conversations = K x concurrency)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario key in every cell (exploration only)")
    ap.add_argument("--profile-set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile key (dotted, value as YAML) before any fit (exploration only)")
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="colocated",
                    help="which reading of the cells: colocated (agentic-c*) or pd (agentic-pd-c*, disaggregated)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    global PROFILE, CELLS, PAIR_CELL
    PROFILE, CELLS, PAIR_CELL = LAYOUTS[a.layout]
    if a.write_lengths and a.layout != "colocated":
        ap.error("--write-lengths writes the colocated cells' histograms (the pd cells keep their own)")
    if a.write and (a.set or a.profile_set):
        ap.error("--write cannot be combined with --set or --profile-set: the profile must fit the scenarios as written")
    free = [n for n in a.free.split(",") if n] if a.free else []
    if any(n not in FREE for n in free) or (a.free is not None and not free):
        ap.error(f"--free: {a.free!r}; allowed: a comma-separated subset of {','.join(FREE)}")
    if a.sigma is not None and not 0.05 <= a.sigma <= 1.5:
        ap.error(f"--sigma: {a.sigma}; allowed: 0.05 to 1.5")
    if a.conversations_per_client is not None and a.conversations_per_client < 1:
        ap.error(f"--conversations-per-client: {a.conversations_per_client}; allowed: an integer >= 1")
    overrides = parse_sets(a.set)
    if a.write_lengths:
        write_lengths(overrides, a.sigma)
        return 0
    try:
        prof = profile_sets(load_profile(str(PROFILE)), a.profile_set)
    except ValueError as e:
        ap.error(str(e))
    per_cell = run_length_overrides(a.conversations_per_client, overrides) if a.conversations_per_client else {}
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as e:
        ap.error(str(e))
    ev = Evaluator(seeds, a.jobs, overrides, per_cell)
    refs = references(overrides)
    cells = cell_values(overrides)
    sigma = current_sigma() if a.sigma is None else a.sigma
    shapes = tempfile.TemporaryDirectory(prefix="agentic-shapes-")
    if a.sigma is not None:
        ev.shape = shape_overrides(sigma, Path(shapes.name), per_cell, overrides)
    try:
        if not a.report_only:
            for r in range(a.rounds):
                if free:
                    prof, cells, sigma = fit_free(ev, prof, cells, refs, free, a.max_evals, not a.quiet,
                                                  sigma, Path(shapes.name), a.method)
                elif a.extend_only:
                    prof = fit_extend(ev, prof, cells, refs, a.max_evals, not a.quiet)
                else:
                    prof, cells = fit_base(ev, prof, cells, refs, a.max_evals, not a.quiet, fit_cells=a.cells)
                if a.pair:
                    prof = fit_pair(ev, prof, cells, refs, not a.quiet)
                th = params_of(prof)
                print(f"round {r + 1}: extend {th[0] * 1e6:.4f} us/token ({1 / th[0]:.0f} tok/s), "
                      f"verify bs1 {th[1] * 1e3:.3f} ms, bs16 {th[2] * 1e3:.3f} ms, "
                      f"inject {prof.gpu.draft_inject_per_token_s * 1e6:.4f} us/token, "
                      f"host.schedule_s {prof.host.schedule_s * 1e3:.3f} ms, "
                      f"host.ingest_per_token_s {prof.host.ingest_per_token_s * 1e9:.1f} ns, KV pool "
                      f"{cells['server']['max_total_num_tokens']} tokens, request_spread "
                      f"{cells['acceptance']['request_spread']}, mean accept length "
                      f"{cells['acceptance']['mean_accept_length']}, prompt sigma {sigma}", flush=True)
        text, _ = table(ev, prof, cells, refs)
        print(text)
        if a.write:
            write(prof, cells, a.conversations_per_client, sigma if "sigma" in free or a.sigma is not None else None)
            print(f"wrote {PROFILE.relative_to(ROOT)} and the fitted cell values in {', '.join(CELLS)}")
    finally:
        ev.close()
        shapes.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
