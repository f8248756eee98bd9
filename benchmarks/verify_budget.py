"""Where the MI355X verify cycle's per-request cost could come from: a budget, in us per request.

``python benchmarks/verify_budget.py [--lo 32 --hi 64 --context 4608]``

The MI355X reference cells (DeepSeek-V4.1-Flash, TP4, DSpark window 6, real SGLang) grow
their verify cycle by 0.26 ms per request between batch 32 and 64 (1 / 41.10 -> 1 / 30.62
verify cycles/s); the analytic DeepSeek-V4-Flash TP4 profile grows by a third of that.
This prints, per request added to the batch:

- the analytic model's own terms (:func:`model_slope`): each :class:`ForwardCost` part of
  the target's verify forward and the drafter's forward over the block, differenced
  between two batch sizes at one context;
- costs the model does not have, each sized from SGLang 0.5.23's source and the model's
  shape (:func:`unmodelled`), with the file and function it comes from;
- the efficiency the two largest linear terms (TP all-reduce, routed-expert GEMMs) would
  have to fall to for either one alone to supply what is missing (:func:`required_efficiency`).

Nothing here is fitted; docs/analytic-profiles.md ("The verify's per-request term") holds
the table this prints.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml
from specsched.sim.analytic.gpus import GpuSpec, load_gpu
from specsched.sim.analytic.models import ModelArch, load_model
from specsched.sim.analytic.roofline import (
    BF16,
    Efficiency,
    ForwardCost,
    Parallel,
    decode_like,
    draft_arch,
    draft_forward,
    expert_params,
    extend,
    kv_cell_bytes,
    kv_entries,
)

ROOT = Path(__file__).resolve().parent.parent
REF_VERIFY_CYCLES_PER_S = {8: 66.78, 32: 41.10, 64: 30.62}
"""Base-arm verify cycles/s of the reference's batch cells (scenarios/batch*-ll.yaml)."""

V4 = {
    "window_size": 128,  # configs/deepseek_v4.py DeepSeekV4Config.window_size
    "index_topk": 512,  # DeepSeekV4Config.index_topk: compressed entries a CSA query attends
    "index_n_heads": 64,  # DeepSeekV4Config.index_n_heads
    "index_head_dim": 128,  # DeepSeekV4Config.index_head_dim
    "csa_ratio": 4,  # compress ratio of the indexed (CSA) layers (kernels/ops/attention/dsv4)
    "hc_mult": 4,  # DeepSeekV4Config.hc_mult: residual streams per token (models/deepseek_v4_mhc.py)
}
"""DeepSeek-V4 features the analytic model does not carry, from SGLang 0.5.23's config."""
FP32_MATRIX_TFLOPS_MI355X = 157.3
"""MI355X FP32 matrix peak (AMD Instinct MI355X datasheet): the DSpark Markov head's bias
GEMM runs in float32 unless SGLANG_DSPARK_OPT_MARKOV_W2_BF16 is set."""
MARKOV_RANK = 1024
"""Not in any source here (a checkpoint field, ``dspark_markov_rank``); an upper guess."""
LOGIT_PASSES = 6
"""Full-vocab float32 passes per position for sampling-based accept and the Markov step:
write, bias add, softmax, kept step logits, residual / sample (an upper count)."""


@dataclass(frozen=True)
class Line:
    """One row of the budget: what, seconds per request added, where it comes from."""

    item: str
    s_per_request: float
    source: str


def _parts(c: ForwardCost) -> dict[str, float]:
    return {"linear": c.linear_s, "experts": c.experts_s, "attention": c.attention_s,
            "lm_head+logits": c.lm_head_s, "allreduce": c.allreduce_s, "kernel overhead": c.overhead_s}


def model_slope(arch: ModelArch, gpu: GpuSpec, tp: int, window: int, context: float,
                lo: int, hi: int, eff: Efficiency | None = None) -> list[Line]:
    """The analytic cycle's growth per request between batch ``lo`` and ``hi``, by part.

    The cycle is what ``sim/analytic/writer.py build_profile`` writes for a block drafter:
    the target's verify over ``window`` tokens per request (``verify``) plus one draft
    forward over ``batch x window`` tokens (``draft_step``), at ``context`` committed tokens.
    Returns one :class:`Line` per :class:`ForwardCost` part of the target, then the drafter.
    """
    eff = eff or Efficiency()
    par = Parallel(tp, "bf16")
    v_lo, v_hi = (_parts(decode_like(arch, gpu, par, eff, b, window, context)) for b in (lo, hi))
    d = draft_arch(arch, 1)
    d_lo, d_hi = (draft_forward(d, gpu, par, eff, b * window, context, window).graph_s for b in (lo, hi))
    n = hi - lo
    lines = [Line(f"model: target {k}", (v_hi[k] - v_lo[k]) / n, "sim/analytic/roofline.py forward_cost")
             for k in v_lo]
    return lines + [Line("model: drafter forward over the block", (d_hi - d_lo) / n,
                         "sim/analytic/writer.py build_profile draft_step")]


def unmodelled(arch: ModelArch, gpu: GpuSpec, tp: int, window: int, context: float,
               eff: Efficiency | None = None) -> list[Line]:
    """Per-request costs of a DeepSeek-V4 DSpark cycle on MI355X that the analytic model
    does not count, each an upper estimate from SGLang 0.5.23's source (seconds per request).
    """
    eff = eff or Efficiency()
    bw = gpu.hbm_tbps * 1e12 * eff.hbm
    L, rows, vocab = arch.num_layers, window, arch.vocab_size
    entry = kv_cell_bytes(arch, tp) / L
    csa_keys = V4["window_size"] + V4["index_topk"]
    once = kv_entries(arch, context) * kv_cell_bytes(arch, tp)
    compressed = context / V4["csa_ratio"]
    idx_bytes = rows * compressed * (V4["index_head_dim"] + 4) * L
    idx_flops = rows * compressed * V4["index_n_heads"] * V4["index_head_dim"] * 2 * L
    peak8 = gpu.peak_flops("fp8") * eff.matmul
    gamma = window - 1
    markov_bytes = gamma * vocab * 4 * LOGIT_PASSES
    markov_flops = 2 * MARKOV_RANK * vocab * gamma
    return [
        Line("separate-row sparse attention (every layer CSA: each verified token reads its own "
             f"{V4['window_size']} + {V4['index_topk']} entries) beyond the model's one read per request",
             max(0.0, rows * csa_keys * entry * L - once) / bw,
             "kernels/ops/attention/dsv4/flydsl_v4nm/mla_v4_decode.py flydsl_mla_v4_grouped_pays (grouped "
             "streams only on HCA/SWA layers, from 32-64 requests); unified_kv_kernels/runtime.py"),
        Line(f"CSA indexer: each verified token scores context/{V4['csa_ratio']} index keys "
             f"({V4['index_n_heads']} heads x {V4['index_head_dim']}, fp8), every layer",
             max(idx_bytes / bw, idx_flops / peak8),
             "configs/deepseek_v4.py index_*; kernels/ops/attention/dsv4/fp4_indexer_hip.py, topk.py"),
        Line(f"hyper-connections: {V4['hc_mult']} float32 residual streams read and written per "
             "sub-layer per verified token",
             rows * L * 2 * 2 * V4["hc_mult"] * arch.hidden_size * 4 / bw,
             "configs/deepseek_v4.py hc_mult; models/deepseek_v4_mhc.py"),
        Line(f"DSpark Markov head: {gamma} serial draft steps, float32 bias GEMM (rank {MARKOV_RANK}) "
             f"and {LOGIT_PASSES} full-vocab passes per step",
             markov_bytes / bw + markov_flops / (FP32_MATRIX_TFLOPS_MI355X * 1e12 * eff.matmul),
             "models/deepseek_v4_dspark.py DSparkV4MarkovHead.step_bias; "
             "speculative/dspark_components/dspark_draft.py draft_markov_block"),
        Line("DSpark drafter attention over the whole context instead of its sliding window, per draft "
             "stage (one latent entry per position, every block row)",
             rows * context * entry / bw,
             "models/deepseek_v4_dspark.py DSparkAttention (compress_ratio 0, window_size from the draft "
             "config); the stage count (len(dspark_target_layer_ids)) is a checkpoint field"),
        Line(f"sampling accept: {LOGIT_PASSES} float32 full-vocab passes per verified position",
             rows * vocab * 4 * LOGIT_PASSES / bw,
             "speculative/dspark_components/dspark_verify.py accept_and_finalize; "
             "kernels/ops/speculative/dspark/blockwise_rejection"),
    ]


def host_exposure(cycle_s: float, batch: int, platform: str = "hip") -> Line:
    """The scheduler's per-request host work after a verify (``process_batch_result_decode``:
    output append, finish checks, ``stream_output``; and the next batch's scheduling),
    charged only where it is not hidden: under overlap scheduling it runs while the GPU runs
    the next cycle (``managers/scheduler.py event_loop_overlap``: ``run_batch`` of step N+1
    comes before ``process_batch_result`` of step N; with ``host_block`` the wait for step
    N+1's publish comes after both). It shows only when its total exceeds the cycle."""
    raw = yaml.safe_load((Path(str(resources.files("specsched.sim.analytic") / "data" / "host.yaml"))).read_text())
    h = raw[platform]
    per = h["process_per_req_s"] + h["schedule_per_req_s"]
    fixed = h["process_s"] + h["schedule_s"] + h["launch_s"]
    exposed = max(0.0, fixed + per * batch - cycle_s)
    return Line(f"host per-request work after a verify ({per * 1e6:.0f} us/request, hidden while "
                f"{fixed * 1e3:.1f} ms + batch x {per * 1e6:.0f} us < the {cycle_s * 1e3:.1f} ms cycle)",
                exposed / batch, "managers/scheduler_components/batch_result_processor.py "
                "process_batch_result_decode; managers/scheduler.py event_loop_overlap")


def required_efficiency(arch: ModelArch, gpu: GpuSpec, tp: int, window: int, missing_s: float,
                        eff: Efficiency | None = None) -> dict[str, float]:
    """The efficiency at which one linear term alone would add ``missing_s`` more per request.

    ``allreduce``: the interconnect factor that stretches the two TP all-reduces per layer
    over a request's ``window`` tokens by ``missing_s``; ``experts``: the fraction of fp8
    peak at which its routed-expert GEMM FLOPs take ``missing_s`` (their weight reads no
    longer grow once every expert is read).
    """
    eff = eff or Efficiency()
    link = gpu.tp_link_bytes_per_s(tp)
    ar_bytes = 2 * arch.num_layers * 2 * (tp - 1) / tp * window * arch.hidden_size * BF16
    ar_now = ar_bytes / (link * eff.interconnect)
    flops = 2 * window * arch.num_layers * arch.experts_per_token * expert_params(arch, tp)
    return {"allreduce": ar_bytes / (link * (ar_now + missing_s)),
            "experts": flops / (gpu.peak_flops("fp8") * missing_s)}


def budget(lo: int = 32, hi: int = 64, context: float = 4608.0, model: str = "deepseek-v4-flash",
           gpu_name: str = "MI355X", tp: int = 4, window: int = 6) -> tuple[list[Line], float, float]:
    """(every line, the reference's growth per request, the model's) between ``lo`` and ``hi``
    (both among :data:`REF_VERIFY_CYCLES_PER_S`), seconds per request."""
    arch, gpu = load_model(model), load_gpu(gpu_name)
    ref = (1 / REF_VERIFY_CYCLES_PER_S[hi] - 1 / REF_VERIFY_CYCLES_PER_S[lo]) / (hi - lo)
    lines = model_slope(arch, gpu, tp, window, context, lo, hi)
    modelled = sum(x.s_per_request for x in lines)
    lines += unmodelled(arch, gpu, tp, window, context)
    lines.append(host_exposure(1 / REF_VERIFY_CYCLES_PER_S[hi], hi))
    return lines, ref, modelled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lo", type=int, default=32, choices=sorted(REF_VERIFY_CYCLES_PER_S))
    ap.add_argument("--hi", type=int, default=64, choices=sorted(REF_VERIFY_CYCLES_PER_S))
    ap.add_argument("--context", type=float, default=4608.0,
                    help="committed tokens per request (default: 4K prompt + half of 1024 output)")
    a = ap.parse_args(argv)
    if a.hi <= a.lo:
        print(f"--hi {a.hi} must be above --lo {a.lo}", file=sys.stderr)
        return 2
    lines, ref, modelled = budget(a.lo, a.hi, a.context)
    print(f"verify cycle growth per added request, batch {a.lo} -> {a.hi}, DeepSeek-V4-Flash TP4 on MI355X, "
          f"window 6, context {a.context:g} (us per request)")
    for x in lines:
        print(f"{x.s_per_request * 1e6:9.1f}  {x.item}\n{'':11}[{x.source}]")
    extra = sum(x.s_per_request for x in lines) - modelled
    missing = ref - modelled
    print(f"{ref * 1e6:9.1f}  reference (measured cells)\n{modelled * 1e6:9.1f}  analytic model\n"
          f"{missing * 1e6:9.1f}  missing\n{extra * 1e6:9.1f}  all unmodelled candidates above together")
    ext = yaml.safe_load((ROOT / "profiles" / "mi355x-dsv41-flash-tp4.yaml").read_text())["gpu"]["extend"]
    prefill = ext["seconds"][-1][0] / ext["x"][-1]
    model_prefill = extend(load_model("deepseek-v4-flash"), load_gpu("MI355X"), Parallel(4, "bf16"), Efficiency(),
                           16384, 2048).graph_s / 16384
    print(f"per token: a verified token adds {ref / 6 * 1e6:.1f} us (measured; model {modelled / 6 * 1e6:.1f}, draft "
          f"included); a prefill token costs {prefill * 1e6:.1f} us on the same GPUs (profiles/mi355x-dsv41-flash-tp4.yaml "
          f"gpu.extend, fitted to the burst's TTFT; model {model_prefill * 1e6:.1f})")
    need = required_efficiency(load_model("deepseek-v4-flash"), load_gpu("MI355X"), 4, 6, missing)
    print(f"for one term alone to supply the missing {missing * 1e6:.0f} us: TP all-reduce at "
          f"{need['allreduce']:.0%} of the link figure (model: {Efficiency().interconnect:.0%}), or routed-expert "
          f"GEMMs at {need['experts']:.1%} of fp8 peak (model: {Efficiency().matmul:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
