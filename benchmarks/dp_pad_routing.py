"""DP attention on an analytic MoE profile: the group's decode step and end-to-end runs, with
and without DP attention (docs/dp-attention.md, "Padded rows at the MoE").

Builds an analytic fp8 profile on 8 GPUs at TP8 (as ``specsched profile --analytic --model
deepseek-v3 --gpu H200 --tp 8 --dtype fp8`` writes it; ``--model`` and ``--gpu`` pick another
shipped model and GPU, e.g. deepseek-v4-flash on MI355X, where SGLang zeroes the padded rows)
and prints

- the group's decode forward (GPU ms, sync excluded) for a few per-rank loads at context
  1024, priced by :class:`sim.dp_attention.DPCost`, beside the rows that reach each GPU's
  MoE and the rows routed independently (:func:`sim.dp_attention.moe_rows`);
- closed-loop runs of 1, 4, 8 and 64 clients and a 512-request burst (1024-token prompts,
  256 output tokens, no speculative decoding): median TPOT and output tok/s at TP8 and with
  ``dp_size`` 8.

    python benchmarks/dp_pad_routing.py [--model deepseek-v4-flash] [--gpu MI355X]

Server settings of every run: no speculative decoding, max_running_requests 512,
chunked_prefill_size 8192, max_prefill_tokens 16384, each layout's default KV pool.
"""

from __future__ import annotations

import argparse

import numpy as np
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import Scenario
from specsched.sim.cost_model import CostModel
from specsched.sim.dp_attention import DPCost, GroupPlan, rank_server_args
from specsched.sim.engine import SimEngine
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import Profile
from specsched.sim.server_args import ServerArgs

SERVER = {"speculative_algorithm": "none", "speculative_num_draft_tokens": 1, "tp_size": 8,
          "max_running_requests": 512, "chunked_prefill_size": 8192, "max_prefill_tokens": 16384}
# no max_total_num_tokens: each layout gets the pool SGLang derives from its memory (under DP
# attention the key is per rank, so one figure for both would give dp_size 8 eight times the pool)
LOADS = {"1 request on 1 rank": [1] + [0] * 7, "1 request on each of 4 ranks": [1] * 4 + [0] * 4,
         "1 on each of 8": [1] * 8, "8 on each of 8": [8] * 8, "9 on one, 8 on the others": [9] + [8] * 7,
         "64 on each of 8": [64] * 8}


def group_step_ms(prof: Profile, loads: list[int], ctx: int = 1024) -> tuple[float, tuple]:
    """The group's decode forward for per-rank request counts ``loads`` (GPU ms, no sync)."""
    server = ServerArgs.model_validate(SERVER | {"enable_dp_attention": True, "dp_size": len(loads)})
    dp = DPCost(CostModel(prof, rank_server_args(server)), 0.0, len(loads))
    parts = tuple(BatchPlan(0, ForwardMode.DECODE, tuple(range(n)), (1,) * n, (ctx,) * n) if n else None
                  for n in loads)
    plan = GroupPlan(0, parts)
    pr = getattr(dp, "pad_routing", None)
    rows = pr.rows(plan) if pr is not None else None
    return dp.gpu(plan).total_s * 1e3, rows


def run(prof: Profile, dp: int, workload: dict) -> tuple[float, float]:
    server = SERVER | ({"enable_dp_attention": True, "dp_size": dp} if dp > 1 else {})
    sc = Scenario.model_validate({"name": "dp-pad", "profile": "analytic", "seed": 1, "server": server,
                                  "workload": workload, "acceptance": {"mean_accept_length": 1.0}})
    res = SimEngine(sc, prof).run()
    tpot = float(np.nanmedian(res.requests.tpot_s)) * 1e3
    return tpot, float(res.summary["output_throughput"])


def main() -> None:
    ap = argparse.ArgumentParser(description="DP attention on an analytic fp8 MoE profile on 8 GPUs: the "
                                 "group's decode step by per-rank load, and runs at TP8 and dp_size 8.")
    ap.add_argument("--gpu", default="H200", help="a shipped GPU name (default H200)")
    ap.add_argument("--model", default="deepseek-v3", help="a shipped MoE model name (default deepseek-v3)")
    ap.add_argument("--context", type=int, default=1024, help="context of the priced steps (default 1024)")
    args = ap.parse_args()
    prof = Profile.model_validate(build_profile(load_model(args.model), load_gpu(args.gpu), 8, "fp8"))
    print("| load (requests per rank) | group decode, GPU ms | MoE rows / routed independently |")
    print("|---|---:|---|")
    for name, loads in LOADS.items():
        ms, rows = group_step_ms(prof, loads, args.context)
        print(f"| {name} | {ms:.2f} | {'' if rows is None else f'{rows[0]} / {rows[1]:g}'} |")
    lens = {"input_len": {"kind": "fixed", "value": 1024}, "output_len": {"kind": "fixed", "value": 256}}
    cases = {f"{c} client{'s' if c > 1 else ''}": {"kind": "closed_loop", "concurrency": c, "num_requests": max(16, 2 * c)}
             for c in (1, 4, 8, 64)}
    cases["burst of 512"] = {"kind": "burst", "num_requests": 512}
    print()
    print("| workload | TP8 median TPOT ms | TP8 tok/s | dp 8 median TPOT ms | dp 8 tok/s |")
    print("|---|---:|---:|---:|---:|")
    for name, wl in cases.items():
        t1, x1 = run(prof, 1, wl | lens)
        t8, x8 = run(prof, 8, wl | lens)
        print(f"| {name} | {t1:.2f} | {x1:,.0f} | {t8:.2f} | {x8:,.0f} |")


if __name__ == "__main__":
    main()
