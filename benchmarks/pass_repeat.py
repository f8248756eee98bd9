"""Does one scenario measure the same on every pass? (a diagnostic for the GPU)

    python benchmarks/pass_repeat.py [--cell poisson-nospec] [--rate 16] [--requests 128] [--passes 3]
        [--eager-prefill] [--no-gc-frozen]

Builds one engine, warms it up (graphs, one request), then measures the scenario
``--passes`` times with Python's garbage collector as it is, and ``--passes`` times with it
frozen and disabled (``gc.freeze(); gc.disable()``). Per pass prints median / p90 TTFT,
median TPOT, the median extend span on the GPU, the median host time from an extend's
scheduling pass to the next one (host-paced extends: about the span + 2 ms), the median
decode step, and the collections the collector ran. Round 4 found the same scenario's
extends 15 ms on a fresh engine and 25 ms on its eighth pass. ``--eager-prefill`` sets
``server.disable_prefill_cuda_graph`` (the runtime before round 5: every extend kernel
issued from Python); ``--no-gc-frozen`` skips the frozen-collector passes.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.analysis.overrides import load_scenario_with_overrides
from specsched.runtime.engine import RuntimeEngine

ROOT = Path(__file__).resolve().parent.parent


def _pass_line(label: str, res, seconds: float, collections: int) -> str:
    s = res.steps.reset_index(drop=True)
    t = res.timeseries["time_s"].to_numpy()
    span = (s["gpu_end_s"] - s["gpu_start_s"]).to_numpy() * 1000
    ext = (s["num_extend_tokens"] > 0).to_numpy()
    dec = (s["mode"] == "decode").to_numpy()
    host_dt = [(t[i + 1] - t[i]) * 1000 for i in range(len(t) - 1) if ext[i]]
    m = res.summary
    return (f"{label:<10} TTFT med {m['median_ttft_ms']:6.1f} p90 {m['p90_ttft_ms']:6.1f}  TPOT med {m['median_tpot_ms']:5.2f}  "
            f"extend span {statistics.median(span[ext]):5.1f} ms  host {statistics.median(host_dt):5.1f} ms  "
            f"decode {statistics.median(span[dec]):4.2f} ms  gc {collections:4d}  wall {seconds:5.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell", default="poisson-nospec")
    ap.add_argument("--rate", type=float, default=16.0)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--eager-prefill", action="store_true", help="server.disable_prefill_cuda_graph: eager extends")
    ap.add_argument("--no-gc-frozen", action="store_true", help="only the passes with the collector as it is")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args()
    over = {"workload.request_rate": args.rate, "workload.num_requests": args.requests}
    if args.eager_prefill:
        over["server.disable_prefill_cuda_graph"] = True
    sc = load_scenario_with_overrides(ROOT / "scenarios" / "h200" / f"{args.cell}.yaml", "base", over)
    eng = RuntimeEngine(sc, preset=args.preset, device=args.device)
    t0 = time.perf_counter()
    eng.warmup()
    eng._warmed = True
    r = eng.runner
    lines: list[str] = [f"{'eager' if args.eager_prefill else 'piecewise'} extends: {len(r.device.graphs.keys())} graph "
                        f"keys, warm-up {time.perf_counter() - t0:.1f} s"]
    print(lines[0], flush=True)
    for mode in ("gc on",) if args.no_gc_frozen else ("gc on", "gc frozen"):
        if mode == "gc frozen":
            gc.collect()
            gc.freeze()
            gc.disable()
        for i in range(args.passes):
            before = sum(st["collections"] for st in gc.get_stats())
            t0 = time.perf_counter()
            res = eng._execute()
            n = sum(st["collections"] for st in gc.get_stats()) - before
            lines.append(_pass_line(f"{mode} {i + 1}", res, time.perf_counter() - t0, n))
            print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
