"""Is a slow launch call the serving loop's context or the host's level? Two readings.

``runs RESULTS_DIR`` (no GPU): for every measured run (``DIR/*-measured`` with steps.parquet,
timeseries.parquet and host_probe.parquet) one row per launch call, and per run:

- the steady verify/decode calls (at least :data:`STEADY_K` main launches after the last
  extend, the same batch size as the previous one: the loop did the same work before each)
  over the run's median at their batch size, ``r``; their autocorrelation at lags of 1, 5,
  20 and 100 calls, over all of them and over those within +-20 % of the median (outside
  the slow spells). A cost of the loop's context (what ran just before the call) is the
  same before every steady call, so it leaves them uncorrelated; a level of the host that
  holds for tens of milliseconds makes neighbours alike;
- ``r`` by context: the first, second and third launch after an extend (``k1`` .. ``k3``),
  a batch size that changed from the previous launch, and the lowest / highest third of
  the host's work before the call (from the previous call's end to this one's start, less
  the time blocked in waits) and of the time blocked before it;
- each extend call over the run's median extend call of its size class against the steady
  verify calls' ``r`` within +-``--window-ms`` of it (``ext~verify``: the correlation of the
  logs), and each injection call against its own extend's (``inj~ext``). Calls of other
  kinds and shapes slow together when the host does.

``interleave --scenario S`` (a GPU): in one process, the profiler's own timings of the same
calls (:class:`runtime.profiler._Profiler`: the extend and injection issue with the GPU kept
busy, the verify launch in its tight loop and in its publish-wait loops) and a measured run
of the cell (:class:`runtime.engine.RuntimeEngine`), alternated ``--reps`` times and ending
with the profiler; each block prints the host's reference work. Per engine run, the
median of its calls over the profiler's blocks just before and after it (verify: the
steady calls at the profiler's batch sizes, interpolated as
``runtime.host_reference.launch_speed_factor`` does, and against its queued publish-wait
loop; extend and injection: each call over the profiler's issue at its tokens, the extend's
also over that issue plus the profiler's ``host.launch_s``, what the simulator charges an
extend launch). Seconds apart in one process, a cost of the serving loop's context shows as
an excess in every repetition (rounds 21-22: verify x1.1-1.4, extend x1.06-1.14, injection
x1.2-1.55 of the profile made minutes before); a host level shows as ratios near 1 with the
profiler's and the engine's calls moving together between repetitions.

    python benchmarks/launch_context.py runs OUT/v23x/results [--runs sharegpt,small-chunk]
    python benchmarks/launch_context.py interleave --scenario scenarios/h200/sharegpt-lengths.yaml \\
        [--arm base] [--reps 2] [--tokens 128,512] [--batch-sizes 1,16] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

STEADY_K = 4
"""A verify/decode launch this many main launches after the last extend is steady (the first
verify after a prefill draws nothing since AcceptanceModel.prepare but changes the batch;
the second tops up no KV: benchmarks/first_verify.py)."""
LAGS = (1, 5, 20, 100)
NEAR = 0.2
"""``r`` within this of 1 (log scale): outside the slow spells (runtime/host_probe.py SPELL_RATIO is 1.3)."""
TOKEN_BINS = (0, 64, 256, 1024, 4096, 10**9)
"""Extend size classes whose calls are compared with each other (the call is nearly flat in
tokens: h200-v22.md "Ruled out")."""


def launch_table(run: Path) -> pd.DataFrame:
    """One row per launch call of a measured run, in launch order: the steps table's columns,
    ``call_s`` (host_probe ``host_launch_s``), ``start_s`` (host: a main launch at its
    schedule pass, an injection at its extend's call end), ``before_s`` (from the previous
    call's end to this start), ``blocked_s`` (steps ``host_blocked_s``: the waits since the
    previous launch), ``k`` (main launches since the last extend; 0 for an extend, NaN for
    an injection and before the first extend) and ``prev_bs`` (the previous main
    decode/verify's batch size).

    Raises:
        ValueError: the run's files disagree (one pass per main launch, one probe row per step).
    """
    s = pd.read_parquet(run / "steps.parquet").reset_index(drop=True)
    hp = pd.read_parquet(run / "host_probe.parquet")
    ts = pd.read_parquet(run / "timeseries.parquet")
    if len(hp) != len(s):
        raise ValueError(f"{run}: host_probe.parquet has {len(hp)} rows, steps.parquet {len(s)}")
    main = (s.part == "main").to_numpy()
    if main.sum() != len(ts):
        raise ValueError(f"{run}: {len(ts)} schedule passes for {int(main.sum())} main launches")
    call = hp.host_launch_s.to_numpy(dtype=float)
    passes = iter(ts.time_s.to_numpy(dtype=float))
    start = np.empty(len(s))
    k = np.full(len(s), np.nan)
    prev_bs = np.full(len(s), np.nan)
    since, last_bs = np.nan, np.nan
    for i, (mode, part, bs) in enumerate(zip(s["mode"], s["part"], s["batch_size"], strict=True)):
        if part == "main":
            start[i] = next(passes)
            if mode == "extend":
                since = 0
            else:
                since += 1
                prev_bs[i] = last_bs
                last_bs = bs
            k[i] = since
        else:
            start[i] = start[i - 1] + call[i - 1]
    end = start + call
    t = s.assign(call_s=call, start_s=start, k=k, prev_bs=prev_bs, blocked_s=s.host_blocked_s.to_numpy(dtype=float))
    t["before_s"] = start - np.r_[np.nan, end[:-1]]
    return t


def steady_ratio(t: pd.DataFrame) -> pd.DataFrame:
    """The steady decode/verify calls of :func:`launch_table` (k >= :data:`STEADY_K`, the
    batch size of the previous one), with ``r``: the call over the median steady call at
    its batch size. Also every main decode/verify with ``r`` against the same medians
    (``steady`` marks which are)."""
    v = t[(t.part == "main") & t["mode"].isin(["verify", "decode"])].copy()
    v["steady"] = (v.k >= STEADY_K) & (v.batch_size == v.prev_bs)
    ref = v[v.steady].groupby("batch_size").call_s.median()
    v["r"] = v.call_s / v.batch_size.map(ref)
    return v


def autocorr(x: np.ndarray, lag: int) -> float:
    """Correlation of ``x[i]`` with ``x[i + lag]`` over the pairs where both are finite (NaN
    with fewer than 10 pairs)."""
    a, b = x[:-lag], x[lag:]
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 10 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 6 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _tertiles(v: pd.DataFrame, col: str) -> tuple[float, float]:
    x = v[col].to_numpy(dtype=float)
    if np.isfinite(x).sum() < 9:
        return float("nan"), float("nan")
    lo, hi = np.nanquantile(x, [1 / 3, 2 / 3])
    return float(v.r[x <= lo].median()), float(v.r[x >= hi].median())


def run_context(run: Path, window_s: float = 0.02) -> dict[str, float]:
    """The readings of one measured run (see the module docstring); NaN where the run has
    too few calls of a kind."""
    t = launch_table(run)
    v = steady_ratio(t)
    st = v[v.steady]
    lr = np.log(st.r.to_numpy(dtype=float))
    out: dict[str, float] = {"steady": float(len(st))}
    near = np.where(np.abs(lr) < np.log1p(NEAR), lr, np.nan)
    out["near_share"] = float(np.isfinite(near).mean()) if len(lr) else float("nan")
    for lag in LAGS:
        out[f"ac{lag}"] = autocorr(lr, lag)
        out[f"ac{lag}_near"] = autocorr(near, lag)
    for kk in (1, 2, 3):
        out[f"k{kk}"] = float(v.r[v.k == kk].median())
    moved = v[(v.k >= STEADY_K) & (v.batch_size != v.prev_bs)]
    out["bs_changed"] = float(moved.r.median()) if len(moved) else float("nan")
    st = st.assign(work_s=st.before_s - st.blocked_s)
    out["work_lo"], out["work_hi"] = _tertiles(st, "work_s")
    out["blocked_lo"], out["blocked_hi"] = _tertiles(st, "blocked_s")
    ext = t[(t.part == "main") & (t["mode"] == "extend")]
    if len(ext):
        size = pd.cut(ext.num_extend_tokens, TOKEN_BINS)
        er = ext.call_s / ext.groupby(size, observed=True).call_s.transform("median")
        tv, rv = st.start_s.to_numpy(), st.r.to_numpy(dtype=float)
        loc = []
        for t0 in ext.start_s:
            w = np.abs(tv - t0) < window_s
            loc.append(float(np.median(rv[w])) if w.sum() >= 3 else np.nan)
        out["ext~verify"] = _corr(np.log(er.to_numpy(dtype=float)), np.log(np.asarray(loc)))
        out["extends"] = float(np.isfinite(loc).sum())
    inj = t.index[t.part == "inject"]
    if len(inj):
        ic, ec = t.call_s[inj].to_numpy(), t.call_s[inj - 1].to_numpy()
        out["inj~ext"] = _corr(np.log(ic / np.median(ic)), np.log(ec / np.median(ec)))
    return out


def runs_cli(args: argparse.Namespace) -> int:
    root = Path(args.results)
    runs = sorted(p for p in root.glob("*-measured") if (p / "host_probe.parquet").is_file())
    if args.runs:
        keep = [x for x in args.runs.split(",") if x]
        runs = [p for p in runs if any(p.name.startswith(x) for x in keep)]
    if not runs:
        print(f"launch_context: no measured run with host_probe.parquet in {root}", file=sys.stderr)
        return 2
    rows = {}
    for p in runs:
        try:
            rows[p.name.removesuffix("-measured")] = run_context(p, args.window_ms / 1e3)
        except (ValueError, KeyError, OSError) as e:  # one unreadable run: said, the rest read
            print(f"launch_context: skipped {p}: {e}", file=sys.stderr)
    if not rows:
        print(f"launch_context: no run of {root} could be read", file=sys.stderr)
        return 2
    df = pd.DataFrame(rows).T
    cols = ["steady", "near_share", *[f"ac{x}" for x in LAGS], *[f"ac{x}_near" for x in LAGS[:3]], "k1", "k2", "k3",
            "bs_changed", "work_lo", "work_hi", "blocked_lo", "blocked_hi", "ext~verify", "inj~ext"]
    print(df.reindex(columns=cols).round(2).to_string())
    return 0


# --------------------------------------------------------------------------- interleave
def _profiler_block(p: Any) -> dict[str, Any]:
    """The profiler's timings of the calls (one pass of its extend phase at prefix 0 and of
    its launch phase, the publish-wait loops included), with the host's reference work."""
    from specsched.runtime.host_reference import reference_work

    def ref_ms() -> float:
        vals = []
        for _ in range(9):
            t0 = time.thread_time()
            reference_work()
            vals.append(time.thread_time() - t0)
        return statistics.median(vals) * 1e3

    r0 = ref_ms()
    p.extend_phase()
    p.launch_phase()
    return {"what": "profiler", "reference_work_ms": [round(r0, 4), round(ref_ms(), 4)],
            "tokens": list(p.ext_x),
            "extend_issue_ms": [round(p.ext_host[i][0] * 1e3, 4) for i in range(len(p.ext_x))],
            "inject_issue_ms": [round(p.inj_host[i][0] * 1e3, 4) for i in range(len(p.ext_x))],
            "batch_sizes": list(p.launch_bs),
            "verify_tight_ms": [round(x * 1e3, 4) for x in p.launch_med],
            # per batch size: block wall, block CPU, queued wall, queued CPU (runtime/profile_host.py)
            "verify_loops_ms": [[round(x * 1e3, 4) for x in c] for c in p.stall_calls],
            # the publish-wait stall's intercept: host.launch_s as the profile fits it (no wake-up)
            "launch_s_ms": round(p.stall_fit[0] * 1e3, 4)}


def _engine_block(eng: Any, window_ms: float) -> tuple[dict[str, Any], pd.DataFrame]:
    """One measured run of the engine's cell (``RuntimeEngine.run``: on a GPU an unmeasured
    pass, then the measured one): its summary line and its :func:`launch_table`."""
    import tempfile

    from specsched.runtime.host_reference import reference_work

    t0 = time.thread_time()
    reference_work()
    r0 = (time.thread_time() - t0) * 1e3
    res = eng.run()
    with tempfile.TemporaryDirectory() as d:
        run = Path(d)
        res.steps.to_parquet(run / "steps.parquet")
        res.timeseries.to_parquet(run / "timeseries.parquet")
        pd.DataFrame(eng.launch_probe()).to_parquet(run / "host_probe.parquet")
        t = launch_table(run)
        ctx = run_context(run, window_ms / 1e3)
    return {"what": "engine", "reference_work_ms": [round(r0, 4), round(res.summary["host_speed"].get(
        "reference_work_s", float("nan")) * 1e3, 4)], "launches": len(t),
        "steady_ac1": round(ctx["ac1"], 3), "steady_ac5": round(ctx["ac5"], 3)}, t


def engine_ratios(t: pd.DataFrame, prof: list[dict[str, Any]]) -> dict[str, float]:
    """An engine run's calls over the profiler's (the mean of the blocks in ``prof``, the
    ones just before and after it), medians per kind: ``verify`` (steady graph-replayed
    calls at batch sizes within the profiler's, its tight loop interpolated by batch size),
    ``verify_loop`` (against its queued publish-wait loop instead), ``extend`` and
    ``inject`` (each call over the profiler's issue interpolated at its tokens),
    ``extend_charged`` (the extend call over that issue plus the profiler's ``host.launch_s``:
    what the simulator charges an extend launch, sim.cost_model ``host("launch")`` +
    ``issue``). NaN where the run has no such call or the profiler no timing (CPU)."""
    bs = np.asarray(prof[0]["batch_sizes"], dtype=float)
    tight = np.mean([b["verify_tight_ms"] for b in prof], axis=0) / 1e3
    loop = np.mean([[c[2] for c in b["verify_loops_ms"]] for b in prof], axis=0) / 1e3
    tok = np.asarray(prof[0]["tokens"], dtype=float)
    ext = np.mean([b["extend_issue_ms"] for b in prof], axis=0) / 1e3
    inj = np.mean([b["inject_issue_ms"] for b in prof], axis=0) / 1e3
    launch = float(np.mean([b["launch_s_ms"] for b in prof])) / 1e3
    v = steady_ratio(t)
    v = v[v.steady & (v.batch_size >= bs[0]) & (v.batch_size <= bs[-1])]
    out = {}
    for name, ref in (("verify", tight), ("verify_loop", loop)):
        den = np.interp(v.batch_size.to_numpy(dtype=float), bs, ref)
        out[name] = float(np.median(v.call_s / den)) if len(v) and (den > 0).all() else float("nan")
    for name, part, ref, add in (("extend", "main", ext, 0.0), ("extend_charged", "main", ext, launch),
                                 ("inject", "inject", inj, 0.0)):
        e = t[(t["mode"] == "extend") & (t.part == part)]
        den = np.interp(e.num_extend_tokens.to_numpy(dtype=float), tok, ref)
        ok = len(e) and (den > 0).all()
        out[name] = float(np.median(e.call_s / (den + add))) if ok else float("nan")
    return out


def _finite(d: Any) -> Any:
    """``d`` with NaN floats as None (JSON has no NaN), recursively."""
    if isinstance(d, float):
        return None if d != d else d
    if isinstance(d, dict):
        return {k: _finite(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_finite(v) for v in d]
    return d


def interleave_cli(args: argparse.Namespace) -> int:
    from specsched.runtime.engine import RuntimeEngine
    from specsched.runtime.profiler import _Profiler
    from specsched.sim.config import load_scenario
    from specsched.sim.errors import ConfigError

    try:
        sc = load_scenario(args.scenario, args.arm)
    except (ConfigError, OSError, ValueError) as e:
        print(f"launch_context: {e}".splitlines()[0], file=sys.stderr)
        return 2
    tokens = [int(x) for x in args.tokens.split(",") if x]
    bs = sorted({int(x) for x in args.batch_sizes.split(",") if x})
    if not tokens or not bs or min(tokens) < 1 or bs[0] < 1:
        print("launch_context: --tokens and --batch-sizes need positive integers", file=sys.stderr)
        return 2
    window = sc.server.spec_window
    import torch
    from specsched.runtime.device import serve_threads

    # torch's intra-op threads as profile_device and the runtime's loop set them (1 on a GPU)
    torch.set_num_threads(serve_threads(not args.device.startswith("cpu")))
    p = _Profiler(serializing={}, device=args.device, preset=args.preset, spec_window=max(window, 2), max_bs=bs[-1],
                  contexts=[int(c) for c in args.contexts.split(",")], extend_tokens=tokens, extend_prefixes=[0],
                  cuda_graph_max_bs=max(bs[-1], sc.server.cuda_graph_max_bs), repeats=args.repeats, progress=False,
                  budget_s=10_000.0, batch_sizes=[bs[-1]], prompt_len=None, forced_accept=2, seed=0)
    p.launch_bs = bs
    eng = RuntimeEngine(sc, preset=args.preset, device=args.device)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")

    def emit(d: dict[str, Any]) -> None:
        # each line as it comes (a run cut short by a time limit keeps what it measured)
        line = json.dumps(_finite(d))
        print(line, flush=True)
        if out is not None:
            with out.open("a") as f:
                f.write(line + "\n")

    prof = [_profiler_block(p)]
    emit({**prof[-1], "rep": 0})
    for rep in range(1, args.reps + 1):
        run, table = _engine_block(eng, args.window_ms)
        prof.append(_profiler_block(p))
        ratios = engine_ratios(table, prof[-2:])
        emit({**run, "rep": rep, "over_profiler": {k: round(x, 4) for k, x in ratios.items()}})
        emit({**prof[-1], "rep": rep})
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("runs", help="read measured runs (no GPU)")
    r.add_argument("results", help="a results directory of CELL-ARM-measured runs")
    r.add_argument("--runs", default="", help="comma-separated name prefixes of the runs to read")
    r.add_argument("--window-ms", type=float, default=20.0, help="steady verifies this near an extend set its level")
    i = sub.add_parser("interleave", help="the profiler's calls and a measured cell, alternated in one process")
    i.add_argument("--scenario", required=True)
    i.add_argument("--arm", default="base")
    i.add_argument("--device", default="cuda")
    i.add_argument("--preset", default="1b")
    i.add_argument("--reps", type=int, default=2)
    i.add_argument("--tokens", default="128,512", help="the profiler's extend sizes (prefix 0)")
    i.add_argument("--batch-sizes", default="1,16", help="the profiler's verify launch batch sizes")
    i.add_argument("--contexts", default="8192", help="the profiler's grid contexts (its verify rows sit past the largest)")
    i.add_argument("--repeats", type=int, default=15)
    i.add_argument("--window-ms", type=float, default=20.0)
    i.add_argument("--out", default=None, help="also write the JSON lines here")
    args = ap.parse_args(argv)
    if args.cmd == "runs":
        return runs_cli(args)
    if args.reps < 1:
        print("launch_context: --reps must be >= 1", file=sys.stderr)
        return 2
    return interleave_cli(args)


if __name__ == "__main__":
    sys.exit(main())
