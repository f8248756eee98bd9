"""Is this host's CPU speed steady? A fixed workload timed back to back, in thread CPU time.

Host-paced figures (an eager cycle's kernel issue, an extend's launch, the host_block
stall) can only be predicted as well as the host keeps one speed. On rented H200 virtual
machines the same Python work took 1.1 ms or 2.0 ms of the thread's own CPU time, in
periods of seconds, with no steal, no CFS throttling and a steady reported clock
(docs/measurements/h200-v10.md). This probe measures that directly, without the runtime:
two fixed workloads alternate for ``--seconds`` (a pure-Python loop, and on a GPU 200
tiny kernel launches through torch's dispatcher), each timed by ``time.thread_time``.

    python benchmarks/host_speed_probe.py --seconds 75 --out OUT/host-speed.json

Prints per workload the percentiles of CPU ms per repetition and the median per 2.5 s
window, and the share of windows slower than 1.4x the fastest quartile's median. Writes
the raw rows (workload, start s, wall ms, CPU ms) as JSON, atomically.

A third workload, ``reference``, is the reference work every profile and measured run
times (runtime/host_reference.py). With ``--profile P.yaml`` (a profile holding
``host.reference_work_s``) the probe prints this host's speed against the profile's: the
``host.speed_factor`` to predict for this machine (docs/host-speed.md)::

    python benchmarks/host_speed_probe.py --seconds 20 --device cpu --profile P.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import numpy as np
from specsched.runtime.host_reference import reference_work, speed_summary

WINDOW_S = 2.5
SLOW_RATIO = 1.4


def python_work() -> int:
    """A fixed pure-Python loop (about 1 ms on a 2.1 GHz Xeon at its fast level)."""
    s = 0
    for i in range(20000):
        s += i * i % 7
    return s


def launch_work_factory(device: str) -> Callable[[], None] | None:
    """200 launches of a 16-element in-place add on ``device`` (None on CPU: no launches)."""
    if device == "cpu":
        return None
    import torch

    x = torch.zeros(16, device=device)

    def launch_work() -> None:
        for _ in range(200):
            x.add_(1.0)
    return launch_work


def probe(seconds: float, device: str) -> list[tuple[str, float, float, float]]:
    """Rows (workload, start perf_counter s, wall ms, thread CPU ms) for ``seconds``."""
    work: list[tuple[str, Callable]] = [("python", python_work), ("reference", reference_work)]
    launch = launch_work_factory(device)
    if launch is not None:
        import torch

        work.append(("launch", launch))
    rows = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for name, fn in work:
            c0, w0 = time.thread_time(), time.perf_counter()
            fn()
            w1, c1 = time.perf_counter(), time.thread_time()
            rows.append((name, w0, (w1 - w0) * 1e3, (c1 - c0) * 1e3))
        if launch is not None:
            torch.cuda.synchronize()
    return rows


def summarize(rows: list[tuple[str, float, float, float]]) -> str:
    """Per workload: CPU ms percentiles, per-window medians, and the share of slow windows."""
    lines = []
    for name in dict.fromkeys(r[0] for r in rows):
        a = np.array([(w0, cpu) for n, w0, _, cpu in rows if n == name])
        t, cpu = a[:, 0] - a[0, 0], a[:, 1]
        win = np.floor(t / WINDOW_S).astype(int)
        med = np.array([np.median(cpu[win == w]) for w in np.unique(win)])
        fast = float(np.median(np.sort(med)[: max(1, len(med) // 4)]))
        slow = float(np.mean(med > SLOW_RATIO * fast))
        p = np.percentile(cpu, [1, 10, 50, 90, 99])
        lines.append(f"{name}: {len(cpu)} repetitions; CPU ms p1/p10/p50/p90/p99 "
                     + "/".join(f"{v:.3f}" for v in p)
                     + f"; {slow:.0%} of {len(med)} windows of {WINDOW_S} s above {SLOW_RATIO} x {fast:.3f} ms")
        lines.append("  window medians (ms): " + " ".join(f"{m:.2f}" for m in med))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu (the Python workload only)")
    ap.add_argument("--out", help="write the raw rows here (JSON)")
    ap.add_argument("--profile", help="print this host's speed against this profile's host.reference_work_s")
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        print(f"host_speed_probe: --seconds {args.seconds}: must be > 0", file=sys.stderr)
        return 2
    ref = None
    if args.profile:
        from specsched.sim.errors import ConfigError
        from specsched.sim.profile import load_profile

        try:
            ref = load_profile(args.profile).host.reference_work_s
        except ConfigError as e:
            print(f"host_speed_probe: {e}", file=sys.stderr)
            return 2
        if ref is None:
            print(f"host_speed_probe: {args.profile}: host.reference_work_s: not set (profiles made before it was "
                  "recorded); allowed: a profile from `specsched profile` that records it", file=sys.stderr)
            return 2
    rows = probe(args.seconds, args.device)
    print(summarize(rows))
    if ref is not None:
        s = speed_summary([cpu / 1e3 for n, _, _, cpu in rows if n == "reference"], ref)
        print(f"host speed against {args.profile}: reference work {s['reference_work_s'] * 1e3:.3f} ms vs the "
              f"profile's {ref * 1e3:.3f} ms: host.speed_factor {s['speed_factor']:.3f} "
              f"({s['slow_share']:.0%} of samples slow)")
    if args.out:
        from specsched.sim.atomic import atomic_write_text

        atomic_write_text(args.out, json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
