"""First-call cost of new extend shapes, per SDPA backend choice (a diagnostic for the GPU).

    python benchmarks/extend_shape_cost.py [--preset 1b] [--shapes 10] [--out FILE]

An extend forward's attention shape is (requests, longest extend, context rounded to 64):
nearly every Poisson arrival brings a new one. For ``--shapes`` new shapes (one and two
requests of ~500-1500 prompt tokens, as the poisson-nospec cell sends), times the host +
device wall of :meth:`runtime.runner.ModelRunner.extend` (synchronized before and after)
on its first and second call, once with SDPA's default choice (what a captured graph uses:
cuDNN on Hopper) and once with the eager choice :data:`runtime.layers.PLANLESS_SDPA`.
A backend that builds a plan per shape shows first calls far above second calls.

Prints one line per shape and a summary; exits 1 when the eager choice still pays a
first-call cost (first-call median above 1.5 x the second-call median + 2 ms) or its
probe does not report the planless backend, so a GPU session can stop before measuring.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
import torch
from specsched.runtime.device import Device
from specsched.runtime.environment import model_sdpa_probe
from specsched.runtime.layers import LlamaProxy, graphed_attention
from specsched.runtime.model import PRESETS, ModelRunner


def _shapes(n: int, seed: int, taken: set[tuple[int, ...]]) -> list[list[int]]:
    """``n`` extend batches (per-request lengths) whose attention shapes are all new."""
    rng = random.Random(seed)
    out: list[list[int]] = []
    while len(out) < n:
        lens = [rng.randint(512, 1536) for _ in range(1 + len(out) % 2)]
        key = (len(lens), max(lens), -(-max(lens) // 64))
        if key not in taken:
            taken.add(key)
            out.append(lens)
    return out


def _timed(dev: Device, runner: ModelRunner, lens: list[int], vocab: int) -> float:
    rows = [runner.add_request() for _ in lens]
    toks = torch.randint(0, vocab - 1, (sum(lens),), device=dev.torch_device)
    dev.synchronize("bench")
    t0 = time.perf_counter()
    runner.extend(rows, [0] * len(lens), lens, toks)
    dev.synchronize("bench")
    wall = time.perf_counter() - t0
    for r in rows:
        runner.free_request(r)
    return wall * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--shapes", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args()
    dev = Device(args.device, measure=True)
    cfg = PRESETS[args.preset]
    target = LlamaProxy(cfg, seed=0, device=dev.torch_device, dtype=dev.dtype)
    runner = ModelRunner(target, dev, max_reqs=8, max_context=1600)
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    probe = model_sdpa_probe(dev, cfg, 6)
    say("sdpa ran: " + ", ".join(f"{k}: {v}" for k, v in probe.items()))
    _timed(dev, runner, [300], cfg.vocab_size)  # module load, allocator, first kernels
    with graphed_attention():
        _timed(dev, runner, [300], cfg.vocab_size)
    taken: set[tuple[int, ...]] = set()
    summary: dict[str, tuple[float, float]] = {}
    for label, seed in (("default (graph choice)", 1), ("eager (planless)", 2)):
        firsts, seconds = [], []
        for lens in _shapes(args.shapes, seed, taken):
            if label.startswith("default"):
                with graphed_attention():
                    a, b = _timed(dev, runner, lens, cfg.vocab_size), _timed(dev, runner, lens, cfg.vocab_size)
            else:
                a, b = _timed(dev, runner, lens, cfg.vocab_size), _timed(dev, runner, lens, cfg.vocab_size)
            firsts.append(a)
            seconds.append(b)
            say(f"{label:<24} extend {lens!s:<14} first {a:7.2f} ms  second {b:7.2f} ms")
        summary[label] = (statistics.median(firsts), statistics.median(seconds))
    for label, (a, b) in summary.items():
        say(f"{label:<24} median first call {a:7.2f} ms, second {b:7.2f} ms, first-call cost {a - b:6.2f} ms")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    a, b = summary["eager (planless)"]
    ok = a <= 1.5 * b + 2.0 and probe.get("extend") in ("efficient", "fused_cpu", "math")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
