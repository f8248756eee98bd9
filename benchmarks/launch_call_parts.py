"""Where the verify launch call's host time goes, per batch size: the profiler's stall loop
(runtime/profile_host.py ``stall_phase``, rows at the context the profiler gives them) and an
engine cell (runtime/engine.py ``RuntimeEngine._launch_call``), with per-function timers
around the call's parts (KV pool, accept draws, graph replay, copies, events). Medians per
batch size, in microseconds, one JSON line per run. The timers add ~1 us per part.

    python benchmarks/launch_call_parts.py profiler --contexts 1024 --batch-sizes 1,16,64,128
    python benchmarks/launch_call_parts.py profiler --contexts 8192 --batch-sizes 1,16,64,128
    python benchmarks/launch_call_parts.py engine --scenario scenarios/h200/batch64.yaml --arm base

docs/measurements/h200-v17.md "The launch call's slope": the profiler's launch call grew with
batch three to four times as fast as the engine's; run the variants interleaved, on one
machine, at one host level (each run prints the host's reference work).

``--by-position`` (engine): the verify launches keyed by their position after the last
extend-only launch (``k1``: the first verify after a prefill, ``k2``, ``k3``, ``k4+``) instead
of by batch size; ``--lazy-accept-draws`` makes each request's accept draws inside the loop,
as the runtime did before ``AcceptanceModel.prepare`` (docs/measurements/h200-v20.md "The
first verify after a prefill": run both, interleaved, to see which part of the first
verify's excess the draws were):

    python benchmarks/launch_call_parts.py engine --scenario scenarios/h200/small-chunk.yaml --by-position
    python benchmarks/launch_call_parts.py engine --scenario scenarios/h200/small-chunk.yaml --by-position --lazy-accept-draws

``--extends`` (engine): the extend-only launch calls instead (key ``extend``), with
``ModelRunner.extend`` among the parts: the call less that part is the host work of the
engine's extend launch that the profiler's extend issue (``host.launch_per_extend_*``, timed
around ``ModelRunner.extend`` alone) does not hold; the simulator charges an extend-only
launch ``host.launch_s`` for it (sim.cost_model.CostModel.host). Run it beside the profiler
variant, whose stall is what ``host.launch_s`` is fitted from (docs/measurements/h200-v24.md
"The extend's charge, across rounds"):

    python benchmarks/launch_call_parts.py engine --scenario scenarios/h200/sharegpt-lengths.yaml --extends
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import specsched.runtime._requires_torch  # noqa: F401  (one line without torch)
from specsched.runtime.device import Device
from specsched.runtime.engine import RuntimeEngine
from specsched.runtime.graphs import GraphCache
from specsched.runtime.host_reference import reference_work
from specsched.runtime.kv_cache import ReqToTokenPool
from specsched.runtime.profile_host import HostPhases
from specsched.runtime.runner import ModelRunner
from specsched.runtime.spec_cycle import SpecCycle
from specsched.sim.device_tokens import DeviceTokens

PARTS = [(DeviceTokens, "step"), (ReqToTokenPool, "reserve"), (ReqToTokenPool, "hold"), (ReqToTokenPool, "release"),
         (ReqToTokenPool, "covers"), (SpecCycle, "_prepare"), (ModelRunner, "_run"), (GraphCache, "replay"),
         (Device, "h2d"), (Device, "copy_to_host"), (Device, "record"), (Device, "timing_mark"),
         (RuntimeEngine, "_sync_kv"), (ModelRunner, "extend")]


class Timers:
    """Accumulating timers around :data:`PARTS` (nested parts count in each) and one record
    per timed call."""

    def __init__(self) -> None:
        self.seg: dict[str, float] = {}
        self.calls: dict[int | str, list[dict[str, float]]] = {}
        for cls, name in PARTS:
            self._wrap(cls, name)

    def _wrap(self, cls: type, name: str) -> None:
        orig, label, seg = getattr(cls, name), f"{cls.__name__}.{name}", self.seg

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                seg[label] = seg.get(label, 0.0) + time.perf_counter() - t0

        setattr(cls, name, timed)

    def call(self, fn: Callable[..., Any], batch_of: Callable[..., int | str | None]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            self.seg.clear()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            rec = dict(self.seg)
            rec["total"] = time.perf_counter() - t0
            b = batch_of(*a, **k)
            if b is not None:
                self.calls.setdefault(b, []).append(rec)
            return out

        return timed

    def medians(self) -> dict[int | str, dict[str, float]]:
        out = {}
        for b, recs in sorted(self.calls.items()):
            keys = sorted({k for r in recs for k in r})
            out[b] = {k: round(statistics.median(r.get(k, 0.0) for r in recs) * 1e6, 1) for k in keys}
            out[b]["n"] = len(recs)
        return out


def reference_ms(n: int = 9) -> float:
    """The host's speed now: median thread CPU of runtime.host_reference.reference_work (ms)."""
    vals = []
    for _ in range(n):
        t0 = time.thread_time()
        reference_work()
        vals.append(time.thread_time() - t0)
    return round(statistics.median(vals) * 1e3, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("profiler", "engine"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="1b")
    ap.add_argument("--window", type=int, default=6)
    ap.add_argument("--contexts", default="8192", help="profiler: grid contexts (its rows sit past the largest)")
    ap.add_argument("--batch-sizes", default="1,16,128", help="profiler: the stall loop's batch sizes")
    ap.add_argument("--scenario", help="engine: scenario file")
    ap.add_argument("--arm", default="base")
    ap.add_argument("--by-position", action="store_true",
                    help="engine: key the verify launches by their position after the last extend-only launch")
    ap.add_argument("--extends", action="store_true",
                    help="engine: time the extend-only launch calls (key 'extend') instead of the verifies")
    ap.add_argument("--lazy-accept-draws", action="store_true",
                    help="engine: make each request's accept draws inside the loop (no AcceptanceModel.prepare)")
    args = ap.parse_args(argv)
    timers = Timers()
    ref0 = reference_ms()
    if args.what == "profiler":
        from specsched.runtime.profiler import _Profiler

        bs = sorted({int(x) for x in args.batch_sizes.split(",")})
        # the publish-wait loops' calls only: the no-overlap loop's (``host``: they end through
        # the engine's LoopHost, with its step record) are another call
        HostPhases._engine_verify_launch = timers.call(
            HostPhases._engine_verify_launch,
            lambda self, rows, tokens, plan, host=None: plan.batch_size if host is None else None)
        p = _Profiler(serializing={}, device=args.device, preset=args.preset, spec_window=args.window,
                      max_bs=bs[-1], contexts=[int(c) for c in args.contexts.split(",")], extend_tokens=[256],
                      cuda_graph_max_bs=bs[-1], repeats=15, progress=False, budget_s=600.0, batch_sizes=[bs[-1]],
                      prompt_len=None, forced_accept=2, seed=0)
        p.launch_bs = bs
        p.stall_phase()
        extra = {"launch_ctx": getattr(p, "launch_ctx", None), "stall_us": [round(s * 1e6) for s in p.stall_med],
                 "stall_calls_us": [[round(v * 1e6) for v in c] for c in p.stall_calls]}
    else:
        if not args.scenario:
            print("launch_call_parts: engine: --scenario is required", file=sys.stderr)
            return 2
        from specsched.sim.acceptance import AcceptanceModel
        from specsched.sim.config import load_scenario

        prepare = AcceptanceModel.prepare
        if args.lazy_accept_draws:
            AcceptanceModel.prepare = lambda self, rids, cycles: None
        eng = RuntimeEngine(load_scenario(args.scenario, args.arm), preset=args.preset, device=args.device)
        since_extend = [10**9]

        def verify_batch(op: Any) -> int | str | None:
            p = op.plan
            if op.part != "main":
                return None
            if p.num_extend == p.batch_size:
                since_extend[0] = 0
                return "extend" if args.extends else None
            if args.extends:
                return None
            since_extend[0] += 1
            if p.num_extend or p.mode.value != "verify":
                return None
            if not args.by_position:
                return p.batch_size
            return f"k{since_extend[0]}" if since_extend[0] < 4 else "k4+"

        eng._launch_call = timers.call(eng._launch_call, verify_batch)
        try:
            eng.run()  # on a GPU an unmeasured pass first, then the measured one
        finally:
            AcceptanceModel.prepare = prepare
        extra = {}
    print(json.dumps({"what": args.what, "args": vars(args), "reference_work_ms": [ref0, reference_ms()],
                      "parts_us": timers.medians(), **extra}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
