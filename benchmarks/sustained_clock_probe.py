"""Does a forward run slower right after heavy GPU work than after the profiler's spin? (GPU.)

`specsched profile` times every forward queued behind a ``torch.cuda._sleep`` spin
(runtime/profile_gpu.py ``GpuPhases._kept_busy``, runtime/profile_harness.py ``_GpuBusy``): the
SMs spin, the matrix units idle, so the GPU starts the timed forward from a low-power state. The
loop runs its forwards back to back. H200 round 31 (docs/measurements/h200-v31.md) priced the
loop's extends -0.2..-0.5 % after a verify at batch <= 16 and -2..-4.5 % after another extend or a
verify at batch 48-64. This probe times one extend-sized stack of matrix products (the 8b
proxy's projections, 32 layers, ``--tokens`` rows: about an 8b extend's GEMM work) after:

- ``spin``: a 50 ms spin, as the profiler times it;
- ``after_heavy``: two of the same stacks back to back (an extend after an extend);
- ``after_mid``: ``--mid-rows`` rows (a verify at batch 64, window 6: 384) for ~50 ms;
- ``after_light``: 64 rows (a plain decode at batch 64, memory-bound) for ~50 ms;
- ``sustained``: the last of ``--sustain-s`` seconds of stacks back to back.

Each condition ``--repeats`` times, interleaved, the GPU idle 0.3 s between repeats (a
``time.sleep``: the power state relaxes); device times from CUDA events around the timed stack
alone. With ``--smi`` it also samples ``nvidia-smi`` (SM clock, power, temperature, clock event
reasons) every 20 ms into ``OUT/smi.csv`` and writes each repeat's wall-clock start, so the
clocks can be read per condition. Prints the median per condition and its ratio to ``spin``.
Written for H200 round 32 (docs/measurements/h200-v31.md, "Requested next"); not run yet.

    python benchmarks/sustained_clock_probe.py --out OUT --smi
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--mid-rows", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--sustain-s", type=float, default=2.0)
    ap.add_argument("--smi", action="store_true")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("sustained_clock_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smi = None
    if args.smi:
        smi = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
             "clocks_event_reasons.active", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=open(out / "smi.csv", "w"), stderr=subprocess.STDOUT)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    hidden, inter, qkv = 4096, 14336, 6144
    layers = [(torch.randn(hidden, qkv, device=dev, dtype=torch.bfloat16) * 0.02,
               torch.randn(hidden, hidden, device=dev, dtype=torch.bfloat16) * 0.02,
               torch.randn(hidden, 2 * inter, device=dev, dtype=torch.bfloat16) * 0.02,
               torch.randn(inter, hidden, device=dev, dtype=torch.bfloat16) * 0.02) for _ in range(32)]
    xs = {n: torch.randn(n, hidden, device=dev, dtype=torch.bfloat16) for n in (args.tokens, args.mid_rows, 64)}

    def stack(n: int) -> None:
        x = xs[n]
        for wq, wo, wgu, wd in layers:
            torch.mm(x, wq)
            torch.mm(x, wo)
            gu = torch.mm(x, wgu)
            torch.mm(gu[:, :inter], wd)

    def run_for(n: int, seconds: float) -> None:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        stack(n)
        b.record()
        b.synchronize()
        one = a.elapsed_time(b) / 1e3
        for _ in range(max(1, int(seconds / one))):
            stack(n)

    cycles_per_s = None
    torch.cuda._sleep(1000)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(10_000_000)
    b.record()
    b.synchronize()
    cycles_per_s = 10_000_000 / (a.elapsed_time(b) / 1e3)
    for n in xs:  # warm-up
        stack(n)
    torch.cuda.synchronize()

    def before(cond: str) -> None:
        if cond == "spin":
            torch.cuda._sleep(int(0.05 * cycles_per_s))
        elif cond == "after_heavy":
            stack(args.tokens)
            stack(args.tokens)
        elif cond == "after_mid":
            run_for(args.mid_rows, 0.05)
        elif cond == "after_light":
            run_for(64, 0.05)
        elif cond == "sustained":
            run_for(args.tokens, args.sustain_s)

    conds = ["spin", "after_heavy", "after_mid", "after_light", "sustained"]
    times: dict[str, list[float]] = {c: [] for c in conds}
    marks = []
    for rep in range(args.repeats):
        for cond in conds:
            time.sleep(0.3)
            torch.cuda.synchronize()
            t_wall = time.time()
            before(cond)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            stack(args.tokens)
            b.record()
            b.synchronize()
            times[cond].append(a.elapsed_time(b))
            marks.append({"rep": rep, "cond": cond, "wall_start": t_wall, "wall_end": time.time(),
                          "ms": times[cond][-1]})
    if smi is not None:
        time.sleep(0.2)
        smi.terminate()
    (out / "marks.json").write_text(json.dumps(marks))
    base = statistics.median(times["spin"])
    print(f"stack of {args.tokens} rows x 32 layers; median ms over {args.repeats} repeats")
    for c in conds:
        m = statistics.median(times[c])
        print(f"{c:12s} {m:8.3f} ms  x{m / base:.4f}  (min {min(times[c]):.3f}, max {max(times[c]):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
