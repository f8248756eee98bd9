"""Extends of several requests in one chunk, timed as the profiler times its grid, beside what
a profile predicts for them (a diagnostic for the GPU; runs on CPU too, for its own test).

    python benchmarks/extend_layout_probe.py --device cuda --preset 8b --profile P.yaml \
        [--scenario scenarios/h200/small-chunk.yaml] [--out FILE.csv]

Why: small-chunk base's TTFT miss (-7 / -9 % in rounds 37-38) comes from its two-request
512-token extends (the end of one prompt and the start of the next in one chunk): predicted
22.72 ms against 24.88 measured, where its single-request 512-token extends are within 0.5 %
(docs/measurements/NEXT-ROUND.md). The profiler's extend grid holds one request per row
below ``gpu.extend_layout_len``, so the cost model reads a two-request chunk off one-request
rows at its dense keys per token (sim/cost_model.py ``dense_keys_per_token``). This probe
times such chunks directly.

For each layout (requests as ``extend@prefix``), the extend is timed as the profiler's
extend grid is (runtime/profile_gpu.py ``extend_phase``: device time with the GPU kept busy
by a spin, then behind ``extend_lead_s`` of itself), with the profiler's own runner (the
same preset, prefill graphs and SDPA choice), and the prediction is
:meth:`sim.cost_model.CostModel.extend_s` of ``--profile`` under the scenario's server
arguments. Where the profile holds ``gpu.extend_split`` (the profiler's unequal two-request
extends, runtime/profile_gpu.py ``split_phase``), the prediction includes the time the
cost model adds for padded requests (:meth:`sim.cost_model.CostModel.unequal_extend_s`),
shown apart as ``split_term_ms`` (0 without the field, for one request and for equal
lengths), so a round with and without it shows what the term takes off the error. Writes a
CSV (layout, requests, tokens, dense keys per token, measured ms, predicted ms, of it the
split term ms, error %) atomically and prints it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
import torch
from specsched.runtime.profiler import _Profiler
from specsched.sim.config import load_scenario
from specsched.sim.cost_model import CostModel, dense_keys_per_token
from specsched.sim.profile import load_profile

LAYOUTS = (
    # one request: the grid's own kind of row, as a control
    ((512, 0),), ((512, 512),), ((512, 1024),), ((512, 1536),),
    # two requests, one ending its prompt and the next starting: what small-chunk's chunks hold
    ((64, 1900), (448, 0)), ((128, 1700), (384, 0)), ((256, 1536), (256, 0)), ((384, 1300), (128, 0)),
    ((448, 1536), (64, 0)),
    # two requests of equal length and prefix: no padded query rows
    ((256, 0), (256, 0)), ((256, 1024), (256, 1024)),
)
"""Layouts timed: per request ``(extend tokens, prefix tokens)``."""


def parse_layout(text: str) -> tuple[tuple[int, int], ...]:
    """``"64@1900+448@0"`` -> ``((64, 1900), (448, 0))``.

    Raises:
        ValueError: not ``E@P`` terms joined by ``+`` with E >= 1 and P >= 0."""
    out = []
    for term in text.split("+"):
        e, _, p = term.partition("@")
        e_i, p_i = int(e), int(p or 0)
        if e_i < 1 or p_i < 0:
            raise ValueError(f"layout term {term!r}: allowed: E@P with E >= 1 extend tokens, P >= 0 prefix tokens")
        out.append((e_i, p_i))
    return tuple(out)


def _label(layout: tuple[tuple[int, int], ...]) -> str:
    return "+".join(f"{e}@{p}" for e, p in layout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="8b")
    ap.add_argument("--profile", required=True, help="the profile whose prediction is set beside the timing")
    ap.add_argument("--scenario", default="scenarios/h200/small-chunk.yaml",
                    help="its server arguments price the extends (prefill graphs, chunk size)")
    ap.add_argument("--layouts", default=None, help="E@P+E@P,... (default: the built-in set)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--graph-max-bs", type=int, default=128)
    ap.add_argument("--out", default=None, help="CSV to write (atomically)")
    args = ap.parse_args(argv)
    try:
        layouts = [parse_layout(x) for x in args.layouts.split(",")] if args.layouts else list(LAYOUTS)
    except ValueError as e:
        print(f"extend_layout_probe: error: --layouts: {e}", file=sys.stderr)
        return 2
    profile = load_profile(args.profile)
    scenario = load_scenario(args.scenario)
    cost = CostModel(profile, scenario.server)
    longest = max(p + e for lay in layouts for e, p in lay)
    prof = _Profiler(serializing={}, device=args.device, preset=args.preset, spec_window=scenario.server.speculative_num_draft_tokens or 2,
                     max_bs=8, contexts=[longest], extend_tokens=[512], cuda_graph_max_bs=args.graph_max_bs,
                     repeats=args.repeats, progress=False, budget_s=600.0, batch_sizes=[1, 2], prompt_len=None,
                     forced_accept=1, seed=0)
    from specsched.runtime.profile_gpu import _GpuBusy

    prof.busy = _GpuBusy(prof.dev)
    r, gen = prof.runner, torch.Generator().manual_seed(0)
    rows_out = []
    for lay in layouts:
        lens, pre = [e for e, _ in lay], [p for _, p in lay]
        with prof.dev.use("forward"):
            rows = [r.add_request() for _ in lay]
            for row, p in zip(rows, pre, strict=True):
                if p:
                    r.pool.reserve([row], [p])
        toks = torch.randint(0, prof.cfg.vocab_size - 1, (sum(lens),), generator=gen)

        def ext(rows=rows, pre=pre, lens=lens, toks=toks) -> None:
            r.extend(rows, pre, lens, toks)

        label = _label(lay)
        dev_s, _ = prof._device_and_host(f"extend {label}", "extend", ext)
        spin = statistics.median(dev_s)
        lead = prof._behind_same(f"extend {label}", "extend_lead", ext, spin)
        measured = statistics.median(lead or dev_s)
        predicted = cost.extend_s(lens, pre)
        split = cost.unequal_extend_s(lens, pre) if cost.padded_extend else 0.0
        keys = dense_keys_per_token(lens, pre, profile.gpu.extend_attention_bucket)
        rows_out.append({"layout": label, "requests": len(lay), "tokens": sum(lens), "dense_keys_per_token": round(keys, 1),
                         "measured_ms": measured * 1e3, "predicted_ms": predicted * 1e3, "split_term_ms": split * 1e3,
                         "error_pct": (predicted / measured - 1) * 100})
        for row in rows:
            r.free_request(row)
        print(f"{label:<22} {len(lay)} req {sum(lens):5d} tok  keys/token {keys:7.1f}  measured {measured * 1e3:8.3f} ms"
              f"  predicted {predicted * 1e3:8.3f} ms (split term {split * 1e3:6.3f})  {(predicted / measured - 1) * 100:+6.1f} %",
              flush=True)
    if args.out:
        import pandas as pd

        out = Path(args.out)
        tmp = out.with_name(out.name + ".tmp")
        pd.DataFrame(rows_out).to_csv(tmp, index=False)
        tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
