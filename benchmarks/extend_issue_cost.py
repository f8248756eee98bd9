"""Host issue time vs GPU time of one extend, eager and piecewise (a diagnostic for the GPU).

    python benchmarks/extend_issue_cost.py [--preset 1b] [--tokens 100,256,700,1024,2000,4096]
        [--prefix 0] [--repeats 10] [--out FILE]

For each extend size (one request per 1024 tokens, at ``--prefix`` cached tokens) and each
path, :meth:`runtime.runner.ModelRunner.extend` followed by the drafter's
``prepare_inject + inject`` (the block drafter of the preset) is timed three ways:

- ``host``: ``perf_counter`` around the call while the GPU is kept busy by a spin kernel
  queued first, so nothing waits on the device: the host's issue time, which a busy loop
  overlaps with the previous forward;
- ``gpu``: timing events around the same call (the spin still queued before them): device
  time alone;
- ``idle``: synchronize, call, synchronize: what one extend from an idle queue costs,
  max(host, gpu) plus the latency between them.

``eager`` runs every kernel from Python (``disable_prefill_cuda_graph``); ``piecewise`` runs
the body from graphs at SGLang 0.5.23's token buckets (runtime/prefill_graph.py), padded
up. An extend is host-paced when ``host > gpu``. Medians over ``--repeats``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
import torch
from specsched.runtime.device import Device
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.runtime.prefill_graph import prefill_token_buckets
from specsched.runtime.profile_harness import _GpuBusy


def _int_list(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--tokens", type=_int_list, default=[100, 256, 700, 1024, 2000, 4096])
    ap.add_argument("--prefix", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=16384, help="largest bucket (cuda_graph_max_bs_prefill)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args()
    dev = Device(args.device, measure=True)
    if not dev.is_gpu:
        print("extend_issue_cost.py needs a GPU (the CPU has no issue/device split)", file=sys.stderr)
        return 2
    cfg = PRESETS[args.preset]
    per = 1024
    rows_max = max(-(-t // per) for t in args.tokens)
    ctx = args.prefix + per + 64
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    with dev.use("forward"):
        target = LlamaProxy(cfg, seed=0, device=dev.torch_device, dtype=dev.dtype)
        drafter = LlamaProxy(PRESETS[draft_preset(args.preset)], seed=1, device=dev.torch_device, dtype=dev.dtype)
        runner = ModelRunner(target, dev, max_reqs=rows_max + 1, max_context=ctx, drafter=drafter, spec_window=4,
                             prefill_graph_tokens=prefill_token_buckets(args.max_tokens))
        busy = _GpuBusy(dev)
        graphs = dict(runner.piecewise)
        say(f"{dev.describe()}  preset {args.preset}  prefix {args.prefix}  buckets up to {args.max_tokens}")
        for t in args.tokens:
            n = -(-t // per)
            lens = [t // n + (1 if i < t % n else 0) for i in range(n)]
            rows = [runner.add_request() for _ in range(n)]
            pre = [args.prefix] * n
            toks = torch.randint(0, cfg.vocab_size - 1, (t,), device=dev.torch_device)

            def call(rows=rows, pre=pre, lens=lens, toks=toks) -> None:
                e = runner.extend(rows, pre, lens, toks)
                runner.inject(runner.prepare_inject(rows, pre, lens, sync=False), e.tokens)

            for mode in ("eager", "piecewise"):
                runner.piecewise = graphs if mode == "piecewise" else {}
                for _ in range(3):  # capture (piecewise) and first-call costs
                    call()
                dev.synchronize("bench")
                t0 = time.perf_counter()
                call()
                dev.synchronize("bench")
                spin = 2 * (time.perf_counter() - t0) + 0.002
                host, gpu, idle = [], [], []
                for _ in range(args.repeats):
                    busy.occupy(spin)
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    h0 = time.perf_counter()
                    call()
                    host.append((time.perf_counter() - h0) * 1e3)
                    b.record()
                    b.synchronize()
                    gpu.append(a.elapsed_time(b))
                    t0 = time.perf_counter()
                    call()
                    dev.synchronize("bench")
                    idle.append((time.perf_counter() - t0) * 1e3)
                hm, gm, im = statistics.median(host), statistics.median(gpu), statistics.median(idle)
                bucket = runner.prefill_bucket(t) if mode == "piecewise" else None
                say(f"{t:6d} tok ({n} x {lens[0]:4d})  {mode:<9} bucket {bucket or '-':>5}  host {hm:6.2f} ms  "
                    f"gpu {gm:6.2f} ms  idle {im:6.2f} ms  {'host-paced' if hm > gm else 'gpu-paced'}")
            for r in rows:
                runner.free_request(r)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
