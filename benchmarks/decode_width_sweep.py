"""Decode and spec-cycle time against the attention width, every 64 positions (GPU).

Why (docs/decode-width.md): on an H200 the runtime's loop ran decode at batch 64 and width
1280 in 5.13 ms, where the profile grid, timed at widths 1088 and 2112 (``context + 64``),
reads 5.27 ms at 1280 by linear interpolation; both engines picked width 1280 on the same
steps. If the step's cost is not linear between widths of different alignment (1088 is
17 x 64, 1280 is 5 x 256), a grid timed off the engine's lattice of context buckets
misreads every loop width. This sweep times the graph-replayed step at each width from
``--start`` to ``--stop`` every ``--step`` positions, at the given batch sizes, all
positions real KV (``--pad``: also with each request holding only half the width, the
rest the padding slot, as the loop's batches do), and prints ms per step and the
residual against the straight line through the widths that are multiples of 256.

    python benchmarks/decode_width_sweep.py --device cuda --preset 1b --batch 8,32,64 \\
        --start 1024 --stop 2112 --out OUT/width-sweep.csv

CPU (tiny preset) runs the same code path in seconds (tests/test_decode_width.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.runtime.device import Device
from specsched.runtime.microbench import time_calls
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner, draft_preset
from specsched.runtime.runner import CTX_BUCKET_STEP
from specsched.sim.results import atomic_write_text


def sweep(device: str | None, preset: str, batches: list[int], widths: list[int], window: int,
          repeats: int, pad: bool) -> pd.DataFrame:
    """Median seconds of one graph-replayed decode step and spec cycle per (batch, width,
    layout). ``layout`` ``full``: every request holds ``width - window`` tokens, each
    position a distinct KV slot; ``half``: each holds half the width (the rest of the
    width reads the padding slot, PAD_SLOT; one request stays at the full length, so the
    step still runs at width ``w``). Returns columns kind, batch, width (the bucket the
    step ran at), layout, mean_len, ms."""
    dev = Device(device, measure=True)
    cfg = PRESETS[preset]
    rows_needed = max(batches)
    top = max(widths)
    with dev.use("forward"):
        target = LlamaProxy(cfg, seed=0, device=dev.torch_device, dtype=dev.dtype)
        drafter = LlamaProxy(PRESETS[draft_preset(preset)], seed=1, device=dev.torch_device, dtype=dev.dtype)
        r = ModelRunner(target, dev, max_reqs=rows_needed, max_context=top, num_slots=rows_needed * top + 1,
                        drafter=drafter, spec_window=window, ctx_buckets=widths, bs_buckets=sorted(set(batches)))
        rows = [r.add_request() for _ in range(rows_needed)]
    out = []
    for layout in ("full", "half") if pad else ("full",):
        for w in widths:
            # the longest request's need (length + window) lands on bucket w exactly; under
            # "half" the others hold half the width
            longest = w - window
            lens = [longest] + [longest if layout == "full" else max(1, w // 2)] * (rows_needed - 1)
            with dev.use("forward"):
                for row in rows:
                    r.free_request(row)
                rows = [r.add_request() for _ in range(rows_needed)]
                r.pool.reserve(rows, [n + window for n in lens])
            for b in batches:
                sel = rows[:b]
                with dev.use("forward"):
                    sel_t, lens_t = dev.h2d(sel), dev.h2d(lens[:b])
                for kind in ("decode", "spec"):
                    def step(sel=sel, sel_t=sel_t, lens_t=lens_t, kind=kind, held=lens[:b]) -> None:
                        r.pool.seq_lens.index_copy_(0, sel_t, lens_t)
                        r.observe_lengths(sel, held)
                        if kind == "decode":
                            r.decode(sel, graph=dev.is_gpu)
                        else:
                            r.spec_cycle(sel, [1] * len(sel), graph=dev.is_gpu)
                    ts = time_calls(dev, step, repeats=repeats, warmup=3)
                    ran = r.context_bucket(longest + (1 if kind == "decode" else window))
                    real = sum(lens[:b]) / b
                    out.append((kind, b, ran, layout, real, statistics.median(ts) * 1e3))
    return pd.DataFrame(out, columns=["kind", "batch", "width", "layout", "mean_len", "ms"])


def residuals(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``line_ms`` (the straight line through the same kind/batch/layout's widths
    that are multiples of CTX_BUCKET_STEP, least squares) and ``resid_ms`` = ms - line_ms."""
    parts = []
    for _, g in df.groupby(["kind", "batch", "layout"]):
        on = g[g.width % CTX_BUCKET_STEP == 0]
        g = g.copy()
        if len(on) >= 2:
            slope, icpt = np.polyfit(on.width.to_numpy(float), on.ms.to_numpy(float), 1)
            g["line_ms"] = icpt + slope * g.width
        else:
            g["line_ms"] = float("nan")
        g["resid_ms"] = g.ms - g.line_ms
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--batch", default="8,32,64", help="comma-separated batch sizes")
    ap.add_argument("--start", type=int, default=1024)
    ap.add_argument("--stop", type=int, default=2112)
    ap.add_argument("--step", type=int, default=64)
    ap.add_argument("--window", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--pad", action="store_true", help="also time each width with half of it padding")
    ap.add_argument("--out", default=None, help="CSV to write (atomically)")
    a = ap.parse_args(argv)
    try:
        batches = sorted({int(x) for x in a.batch.split(",")})
    except ValueError:
        print(f"--batch: {a.batch!r}: allowed: comma-separated positive integers", file=sys.stderr)
        return 2
    if min(batches) < 1 or a.step < 64 or a.step % 64 or a.start % 64 or a.stop < a.start or a.window < 2:
        print("--batch >= 1, --start/--step multiples of 64, --stop >= --start, --window >= 2 required", file=sys.stderr)
        return 2
    widths = list(range(a.start, a.stop + 1, a.step))
    df = residuals(sweep(a.device, a.preset, batches, widths, a.window, a.repeats, a.pad))
    text = df.to_csv(index=False, float_format="%.4f")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(a.out), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
