"""Time one linear layer (a GEMM) against the number of tokens it multiplies, on a GPU.

The analytic cost model (sim/analytic/roofline.py ``forward_cost``) prices a linear layer as
``max(FLOPs / (peak x matmul), bytes / (HBM x hbm))``: it assumes both roofs are reached,
the weight read up to the ridge and the tensor peak above it. This benchmark measures what a
library GEMM (``torch.nn.functional.linear``: cuBLAS/cuBLASLt on CUDA, hipBLASLt on ROCm; fp8
through ``torch._scaled_mm`` with per-tensor scales) takes at each token count for the layer
shapes of real models, so the rule can be checked where it matters for serving: the
verify of a speculative window (batch x window tokens) and small chunked extends sit near
the ridge.

Each (shape, tokens) point is timed as a CUDA graph of many calls that cycle through enough
copies of the weight to exceed the L2 several times (a model's consecutive layers never hit
in L2), replayed after warm-up; the time per call is the replay's over the call count,
the median of ``--reps`` replays.

    python benchmarks/gemm_curve.py --out OUT/gemm.jsonl            # every preset shape, bf16 and fp8
    python benchmarks/gemm_curve.py --shapes llama8b --dtypes bf16 --tokens 1,64,256,4096

One JSON line per point: shape name, out/in features, dtype, tokens, seconds per call,
achieved TB/s (weight + activations in + out) and TFLOP/s, the GPU's name.

``--report FILE.jsonl`` (no GPU) reads such a file back and sets each point against the
analytic model's price of the same GEMM on the GPU it names (the shipped GPU table and the
default :class:`~specsched.sim.analytic.roofline.Efficiency`: the roofline plus one
``kernel_gap_s``, as ``forward_cost`` charges a kernel); it prints measured / model by token
count and, with ``--plot PNG``, draws the ratios there.

    python benchmarks/gemm_curve.py --report docs/measurements/h200-v25/gemm.jsonl.xz --plot OUT.png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

SHAPES = {
    # (out_features, in_features) of the linear layers of one decoder layer (and the LM head)
    "llama8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
                "lm_head": (128256, 4096)},
    "llama70b-tp4": {"qkv": (2560, 8192), "o": (8192, 2048), "gate_up": (14336, 8192), "down": (8192, 7168)},
    "qwen3-0.6b": {"qkv": (4096, 1024), "o": (1024, 2048), "gate_up": (6144, 1024), "down": (1024, 3072)},
    "proxy-1b": {"qkv": (3072, 2048), "o": (2048, 2048), "gate_up": (16384, 2048), "down": (2048, 8192)},
}
TOKENS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024, 1536, 2048,
          3072, 4096, 8192, 16384)
DTYPES = ("bf16", "fp8")
"""What ``--dtypes`` takes: bf16 (``linear``), fp8 (per-tensor scaled ``torch._scaled_mm``)."""
L2_CYCLE_BYTES = 512 * 2**20
"""Weight bytes one graph cycles through: several times an H200's 60 MB (MI355X: 256 MB
infinity cache), so each call reads its weight from HBM as a model's next layer does."""


def _time_point(torch, out_f: int, in_f: int, tokens: int, dtype: str, reps: int) -> float:
    dev = "cuda"
    elem = 1 if dtype == "fp8" else 2
    copies = max(2, math.ceil(L2_CYCLE_BYTES / (out_f * in_f * elem)))
    flops = 2.0 * tokens * out_f * in_f
    # enough calls for ~2 ms of work at 800 TFLOP/s or 4 TB/s, at least one full cycle
    est = max(flops / 8e14, out_f * in_f * elem / 4e12, 2e-6)
    calls = max(copies, min(4096, math.ceil(2e-3 / est)))
    calls = copies * math.ceil(calls / copies)
    x = torch.randn(tokens, in_f, device=dev, dtype=torch.bfloat16)
    if dtype == "bf16":
        ws = [torch.randn(out_f, in_f, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]

        def call(i):
            return torch.nn.functional.linear(x, ws[i % copies])
    else:
        xq = x.to(torch.float8_e4m3fn)
        ws = [(torch.randn(out_f, in_f, device=dev, dtype=torch.bfloat16) * 0.02).to(torch.float8_e4m3fn)
              for _ in range(copies)]
        one = torch.ones((), device=dev, dtype=torch.float32)

        def call(i):
            return torch._scaled_mm(xq, ws[i % copies].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(min(calls, 2 * copies)):
            call(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            call(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / calls)
    del g
    torch.cuda.empty_cache()
    times.sort()
    return times[len(times) // 2]


REPORT_KEYS = frozenset({"model", "layer", "out_features", "in_features", "dtype", "tokens", "seconds", "gpu"})
"""The keys of a timed point that ``--report`` reads (what ``--out`` writes per point)."""


def model_seconds(rows, gpu_name: str):
    """The analytic price of each measured point (seconds per call): ``max(FLOPs / (peak x
    matmul), bytes / (HBM x hbm)) + kernel_gap_s`` with the default efficiencies, on the
    shipped GPU whose name the measuring device reported.

    Raises:
        ValueError: no shipped GPU in ``gpu_name``.
    """
    from specsched.sim.analytic.gpus import find_gpu_in_text
    from specsched.sim.analytic.roofline import Efficiency

    gpu = find_gpu_in_text(gpu_name)
    if gpu is None:
        raise ValueError(f"no shipped GPU in the device name {gpu_name!r}")
    eff = Efficiency()
    elem = rows["dtype"].map({"bf16": 2, "fp8": 1})
    moved = rows.out_features * rows.in_features * elem + rows.tokens * (rows.in_features * elem + rows.out_features * 2)
    flops = 2.0 * rows.tokens * rows.out_features * rows.in_features
    peak = rows["dtype"].map(gpu.peak_flops) * eff.matmul
    mem = moved / (gpu.hbm_tbps * 1e12 * eff.hbm)
    return (flops / peak).combine(mem, max) + eff.kernel_gap_s


def report(path: Path, plot: Path | None) -> int:
    """Print measured / model per (dtype, model, layer) by token count; optionally plot it."""
    import pandas as pd

    try:
        rows = pd.read_json(path, lines=True)  # compression (.xz, .gz) from the suffix
    except (OSError, ValueError, EOFError) as e:   # missing, unreadable, not JSON lines
        print(f"gemm_curve: --report {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2
    rows = rows[rows["seconds"].notna()] if "seconds" in rows else rows.iloc[0:0]
    if rows.empty:
        print(f"gemm_curve: {path}: no timed points", file=sys.stderr)
        return 2
    missing = sorted(REPORT_KEYS - set(rows.columns))
    if missing:
        print(f"gemm_curve: --report {path}: timed points without {', '.join(missing)} "
              f"(a gemm_curve.py --out line has {', '.join(sorted(REPORT_KEYS))})", file=sys.stderr)
        return 2
    try:
        rows = rows.assign(model_s=model_seconds(rows, str(rows["gpu"].iloc[0])))
    except ValueError as e:
        print(f"gemm_curve: --report {path}: {e}", file=sys.stderr)
        return 2
    rows["ratio"] = rows["seconds"] / rows["model_s"]
    table = rows.pivot_table(index="tokens", columns=["dtype", "model", "layer"], values="ratio")
    with pd.option_context("display.width", 250, "display.max_columns", 60, "display.max_rows", 200):
        print(f"measured / model (roofline + kernel gap), {rows['gpu'].iloc[0]}")
        print(table.round(2).to_string())
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
        for ax, dtype in zip(axes, ("bf16", "fp8"), strict=True):
            points = rows[rows["dtype"] == dtype]
            for (model, layer), g in points.groupby(["model", "layer"]):
                ax.plot(g["tokens"], g["ratio"], marker=".", lw=0.8, label=f"{model} {layer}")
            ax.set_xscale("log", base=2)
            ax.axhline(1.0, color="k", lw=0.6)
            ax.set_title(f"{dtype}: measured / analytic price of one GEMM")
            ax.set_xlabel("tokens (GEMM rows)")
            # each panel's own legend: the fp8 panel's alone named no bf16 line, and on a
            # file without fp8 points matplotlib warned that it had nothing to show
            if points.empty:
                ax.text(0.5, 0.5, f"no {dtype} points", transform=ax.transAxes, ha="center", va="center")
            else:
                ax.legend(fontsize=6, ncol=2)
        axes[0].set_ylabel("measured / (roofline + kernel gap)")
        fig.tight_layout()
        plot.parent.mkdir(parents=True, exist_ok=True)
        tmp = plot.with_suffix(".tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        tmp.replace(plot)
        print(f"wrote {plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"presets, comma-separated: {', '.join(SHAPES)}")
    ap.add_argument("--dtypes", default="bf16,fp8", help="bf16, fp8 (per-tensor scaled, torch._scaled_mm)")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="token counts (GEMM rows)")
    ap.add_argument("--reps", type=int, default=5, help="replays per point; the median is kept")
    ap.add_argument("--out", type=Path, help="JSON lines, written as points finish")
    ap.add_argument("--report", type=Path, help="read a measured file back against the analytic model (no GPU)")
    ap.add_argument("--plot", type=Path, help="with --report: write the plot here")
    args = ap.parse_args(argv)
    if args.report is not None:
        return report(args.report, args.plot)
    if args.out is None:
        ap.error("--out is required to measure (or give --report FILE)")
    # every argument checked before a GPU is looked for: one line, exit 2, nothing written
    shapes = [s for s in args.shapes.split(",") if s]
    dtypes = [d for d in args.dtypes.split(",") if d]
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t]
    except ValueError:
        tokens = []
    for bad, what in (([s for s in shapes if s not in SHAPES], f"--shapes: unknown {{}}; allowed {sorted(SHAPES)}"),
                      ([d for d in dtypes if d not in DTYPES], f"--dtypes: unknown {{}}; allowed {list(DTYPES)}"),
                      (not tokens or min(tokens) < 1, f"--tokens {args.tokens!r}: give whole numbers from 1, comma-separated"),
                      (args.reps < 1, f"--reps {args.reps}: give 1 or more"),
                      (args.plot is not None, "--plot goes with --report")):
        if bad:
            print("gemm_curve: " + what.format(bad), file=sys.stderr)
            return 2
    import torch

    if not torch.cuda.is_available():
        print("gemm_curve: no GPU visible to torch", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with args.out.open("w") as f:
        for dtype in dtypes:
            for model in shapes:
                for layer, (out_f, in_f) in SHAPES[model].items():
                    for m in tokens:
                        try:
                            s = _time_point(torch, out_f, in_f, m, dtype, args.reps)
                        except RuntimeError as e:  # e.g. an fp8 GEMM the library refuses at this shape
                            f.write(json.dumps({"model": model, "layer": layer, "dtype": dtype, "tokens": m,
                                                "error": str(e).splitlines()[0][:200]}) + "\n")
                            continue
                        elem = 1 if dtype == "fp8" else 2
                        moved = out_f * in_f * elem + m * (in_f * elem + out_f * 2)
                        f.write(json.dumps({
                            "model": model, "layer": layer, "out_features": out_f, "in_features": in_f,
                            "dtype": dtype, "tokens": m, "seconds": s, "tbps": moved / s / 1e12,
                            "tflops": 2.0 * m * out_f * in_f / s / 1e12, "gpu": gpu}) + "\n")
                        f.flush()
                print(f"{dtype} {model}: done at {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
