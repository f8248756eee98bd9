"""Roofline time of one forward on one TP rank, from a model shape and a GPU's datasheet.

Per-operator roofline (the LLMCompass / Vidur analytic style): each operator group takes
``max(FLOPs / (peak x matmul efficiency), bytes / (bandwidth x HBM efficiency))`` and the
groups add up, plus the TP all-reduces and the per-forward launch overheads:

- dense linears (attention projections, dense MLP, shared experts, router): weights read
  once per forward, activations streamed, ``2 x tokens x params`` FLOPs;
- routed experts: only the experts some token of the batch picked are read (expected
  ``E (1 - (1 - k/E)^T)`` distinct of ``E`` for ``T`` tokens), ``2 x T x k x params``;
- attention core: every request's KV read once (bytes linear in context), FLOPs
  ``2 x T x keys x (qk + v) x heads`` with ``keys`` the mean attended positions per query
  (quadratic in extend tokens); MLA decode/verify uses the absorbed form over the latent
  (SGLang's MLA decode path), MLA extend the expanded per-head form;
- DeepSeek sparse attention (``arch.index_topk``): the MLA attention reads at most
  ``index_topk`` entries per query, and a lightning indexer, a separate kernel before it,
  scores every cached position in fp8 (:func:`dsa_attention_s`);
- LM head on the positions whose logits are needed, then the logits' TP all-gather and
  the full-vocab passes before sampling (bytes per logit ``LOGIT_PASS_BYTES``);
- TP: two all-reduces per layer (after attention and after the MLP) of ``T x hidden``
  bf16, ring cost ``2 (tp - 1) / tp x bytes / link`` plus a per-call latency, where
  ``link`` is what a TP group reaches (on an xGMI mesh, ``tp - 1`` of the 7 links);
- a replayed graph pays a launch plus ``kernel_gap_s`` per kernel (measured on an H200:
  what small-batch forwards of many small kernels cost beyond their bytes); kernel counts
  follow the architecture (GQA, MLA, MoE: counted in SGLang's model code);
- eager execution (batches above cuda_graph_max_bs) runs each kernel as the host issues it:
  ``max(graph + kernels x eager_gpu_per_kernel_s, kernels x eager issue per kernel)``, the
  issue per kernel being single-threaded CPU work scaled by the host's clock ``host_ghz``
  (host-bound at small batch; what makes the runaway of public-cases P2).

The achieved fractions live in :class:`Efficiency`, written into the profile's
``analytic.efficiency`` block so calibration can refit them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field
from specsched.sim.analytic.gpus import GpuSpec
from specsched.sim.analytic.models import (
    MM_PREFILL_GRAPH_ARCHS,
    NO_BREAKABLE_PREFILL_ARCHS,
    TRTLLM_MLA_ARCHS,
    ModelArch,
)
from specsched.sim.errors import ConfigError

BF16 = 2  # bytes of a bf16 element (activations, KV cache)
REFERENCE_HOST_GHZ = 2.1
"""CPU clock of the host ``eager_launch_per_kernel_s`` was measured on (the H200 machine's
vCPUs report 2100 MHz: docs/measurements/h200-v4/cpu-diag.txt)."""
LOGIT_PASS_BYTES = 12
DSA_INDEX_QUANT_BLOCK = 128
"""Index-K elements per fp8 scale (SGLang 0.5.23 mem_cache/memory_pool.py
``DSATokenToKVPool.quant_block_size``)."""
DSA_INDEX_SCALE_BYTES = 4
"""Bytes of one index-K scale (a float32 stored in the uint8 buffer:
model_executor/pool_configurator.py ``_compute_dsa_indexer_cell_size``, ``// quant_block_size * 4``)."""
DSA_DENSE_PREFILL_KV_LEN = 2048
"""A DSA extend whose longest request is at most this long runs dense MHA (MHA_ONE_SHOT)
rather than the sparse MLA kernel (layers/attention/dsa_backend.py ``set_dsa_prefill_impl``:
``max_kv_len <= SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD``, 2048 by default,
environ.py)."""
"""HBM bytes per logit after the LM head: the gathered bf16 logits written (2), read and
copied to float32 (2 + 4), read again by argmax or softmax (4); sampling adds more."""


class Efficiency(BaseModel):
    """Achieved fractions of datasheet peaks and fixed overheads (refittable).

    Defaults are a priori values for current datacenter parts, not fitted to any case in
    this repository; :data:`EFFICIENCY_SOURCES` says where each comes from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    matmul: float = Field(0.70, gt=0, le=1, description="fraction of dense tensor peak reached by GEMMs")
    attention: float = Field(0.50, gt=0, le=1, description="fraction of bf16 peak reached by attention kernels")
    hbm: float = Field(0.80, gt=0, le=1, description="fraction of HBM bandwidth reached by streaming reads")
    interconnect: float = Field(0.75, gt=0, le=1, description="fraction of link bandwidth reached by all-reduce")
    allreduce_latency_s: float = Field(10e-6, ge=0, description="fixed cost of one all-reduce call")
    internode_allreduce_latency_s: float = Field(30e-6, ge=0, description="fixed cost of one NCCL all-reduce call: a "
                                                 "TP group that spans nodes (NCCL over the NICs), or one SGLang's "
                                                 "custom all-reduce declines within a node (PCIe-only GPUs)")
    kernels_per_layer: int = Field(12, ge=1, description="kernels one dense GQA decoder layer launches at TP1")
    allreduce_kernels_per_layer: int = Field(2, ge=0, description="TP all-reduce kernels per layer (only when tp > 1)")
    mla_extra_kernels: int = Field(10, ge=0, description="kernels an MLA attention block adds over a GQA one")
    moe_extra_kernels: int = Field(12, ge=0, description="kernels an MoE block adds over a dense MLP")
    kernel_gap_s: float = Field(2.4e-6, ge=0, description="per-kernel cost in a replayed graph beyond its roofline time")
    graph_launch_s: float = Field(20e-6, ge=0, description="graph replay launch per forward")
    eager_launch_per_kernel_s: float = Field(17.8e-6, ge=0, description="host time to issue one kernel eagerly, "
                                             "on a host at REFERENCE_HOST_GHZ")
    host_ghz: float = Field(REFERENCE_HOST_GHZ, gt=0, le=10, description="the serving host's CPU clock (single-core), GHz")
    eager_gpu_per_kernel_s: float = Field(1.0e-6, ge=0, description="GPU-side cost per kernel of eager over graph when GPU-bound")
    breakable_eager_kernels_per_layer: int = Field(2, ge=0, description="kernels a breakable prefill graph issues "
                                                   "eagerly per layer (KV store + attention), each between two "
                                                   "replayed segments")
    attention_split_kv: bool = Field(True, description="decode/verify attention splits each request's KV over "
                                     "blocks to fill the GPU (SGLang's FA3/FlashInfer defaults); false: one block per "
                                     "(request, KV head), see attention_kv_bandwidth")
    unsplit_attention_cta_gbps: float = Field(16.0, gt=0, description="KV bytes/s one block of an unsplit decode "
                                              "attention kernel streams, GB/s")
    kv_gather_passes: int = Field(0, ge=0, description="extra HBM passes over the attended KV before the attention "
                                  "kernel (0: read in place from the paged cache; 2: gathered into a dense copy)")

def gpu_efficiency(gpu: GpuSpec, eff: Efficiency | None = None) -> Efficiency:
    """The efficiency factors a profile of ``gpu`` is built with: the GPU table's own values
    (:attr:`GpuSpec.efficiency`) over the defaults, and the factors ``eff`` was given
    explicitly (a command-line choice, a refit, a stored profile's) over both.

    Raises:
        pydantic.ValidationError: a GPU table entry names an unknown factor or a value out of
            range (the table's own error, checked by tests/test_analytic.py).
    """
    given = eff.model_dump(exclude_unset=True) if eff is not None else {}
    return Efficiency(**(gpu.efficiency | given))


EFFICIENCY_SOURCES = {
    "matmul": "0.70: typical achieved fraction of dense bf16/fp8 peak for large GEMMs in cuBLAS/hipBLASLt "
              "benchmarks on H100/MI300-class parts (0.6-0.8); one value for every GPU",
    "attention": "0.50: FlashAttention-2/3-class prefill kernels reach roughly 40-70 % of bf16 peak",
    "hbm": "0.80: streaming kernels (decode GEMV, paged attention) reach roughly 75-90 % of datasheet HBM bandwidth",
    "interconnect": "0.75: NCCL/RCCL all-reduce bus bandwidth is roughly 70-85 % of the per-direction link figure",
    "allreduce_latency_s": "10 us: small-message custom all-reduce (one-shot) latency, order of magnitude",
    "internode_allreduce_latency_s": ("30 us: small-message NCCL all-reduce latency between two nodes over RDMA NICs "
                                      "(nccl-tests all_reduce_perf at a few KB on 2 x 8 GPUs reports some tens of us), "
                                      "order of magnitude, assumed. SGLang 0.5.23 turns its custom all-reduce off when "
                                      "the TP group spans nodes (distributed/device_communicators/"
                                      "custom_all_reduce_utils.py can_use_custom_all_reduce_with_nvlink), so every "
                                      "all-reduce of such a group is NCCL's. The same figure prices NCCL within a "
                                      "node where that function turns the custom all-reduce off: more than two "
                                      "PCIe-only GPUs, or no CUDA P2P (gpus.GpuSpec.custom_allreduce); NCCL's "
                                      "small-message latency over PCIe is of the same order (tens of us), assumed"),
    "kernels_per_layer": ("12: a dense GQA layer in SGLang 0.5.23 at TP1 (models/qwen3.py, llama.py): fused add-rmsnorm "
                          "x2, qkv_proj, q/k norm (one fused kernel on CUDA: models/utils.py apply_qk_norm), rope, "
                          "KV store, attention, o_proj, gate_up, silu_and_mul, down"),
    "allreduce_kernels_per_layer": ("2: the all-reduces after attention and after the MLP, launched only when tp > 1 "
                                    "(distributed/parallel_state.py GroupCoordinator.all_reduce returns its input "
                                    "when world_size == 1); none on SM 90/100 for the MoE architectures whose "
                                    "all-reduce SGLang fuses into the next add + RMSNorm (roofline.allreduce_fused)"),
    "mla_extra_kernels": ("10: SGLang 0.5.23 MLA absorbed decode (models/deepseek_common/attention_forward_methods/"
                          "forward_mla.py forward_absorb_prepare/core) launches ~18 kernels where GQA launches ~8: fused "
                          "q_a/kv_a projection, two latent norms, q_b_proj, absorbed bmm w_kc (+layout copy), rope, "
                          "latent KV store, MLA decode (split + reduce), bmm w_vc, o_proj, fp8 activation quant per fp8 "
                          "GEMM; DeepSeek-V4's hyper-connections, compressor and indexer kernels are not counted"),
    "moe_extra_kernels": ("12: SGLang 0.5.23 DeepseekV2MoE / fused_moe_triton: router GEMM, grouped top-k, "
                          "moe_align_block_size, activation quant x2, grouped GEMM w13 and w2, silu_and_mul, moe_sum, "
                          "shared expert gate_up/act/down + add (15) in place of a dense MLP's 3"),
    "kernel_gap_s": ("2.4 us: measured on an H200 (docs/measurements/h200-v2.md, profiles/h200-1b-v2.yaml): the "
                     "runtime's 16-layer 1B proxy decodes batch 1 at 512 context in 2.177 ms as a CUDA graph, of "
                     "which weight reads at 80 % of 4.8 TB/s are 0.64 ms; the remaining 1.53 ms over its 638 kernels "
                     "(counted with a TorchDispatchMode on the same code) is 2.4 us per kernel. Unmeasured on HIP "
                     "(graph dispatch on ROCm is reported slower on other parts): the CUDA figure is used"),
    "graph_launch_s": "20 us: one graph replay's host launch",
    "eager_launch_per_kernel_s": ("17.8 us at 2.1 GHz: measured on an H200 machine (profiles/h200-1b-v2.yaml "
                                  "gpu.eager_host_issue_s) whose vCPUs report 2100 MHz: an eager spec cycle of the 1B "
                                  "proxy is host-bound at 14.43 ms for its 812 kernels (Python + PyTorch dispatch + "
                                  "launch per op, single-threaded)"),
    "host_ghz": ("the serving host's single-core clock (default: the 2.1 GHz host the eager figure was measured "
                 "on). Issuing a kernel eagerly is single-threaded CPU work (the Python interpreter, PyTorch's "
                 "dispatcher, the driver's launch), so the eager issue per kernel is scaled by 2.1 / host_ghz; "
                 "a first-order model that ignores per-clock (IPC) differences between CPUs"),
    "breakable_eager_kernels_per_layer": ("2: SGLang 0.5.23's breakable prefill graph (CUDA's default prefill "
                                          "backend) replays each layer's non-attention work as captured segments and "
                                          "runs attention eagerly between them (layers/radix_attention.py forward -> "
                                          "_eager_attention, an eager_on_graph break): the KV store and the ragged "
                                          "prefill kernel, issued from Python like any eager kernel"),
    "eager_gpu_per_kernel_s": ("1.0 us: measured on an H200 (profiles/h200-1b-v2.yaml gpu.eager_overhead_s): eager "
                               "minus graph when GPU-bound is 0.81 ms over the same 812 kernels"),
    "attention_split_kv": ("true: SGLang 0.5.23 splits a decode's KV over thread blocks (layers/attention/"
                           "flashattention_backend.py num_splits 0 lets FA3 size SplitKV to the GPU; FlashInfer's plan "
                           "splits the same way); false for SGLang's --enable-deterministic-inference (num_splits 1) and "
                           "for the runtime's proxy (torch SDPA over the gathered KV: runtime/layers.py paged_attention)"),
    "unsplit_attention_cta_gbps": ("16 GB/s: measured on an H200 (profiles/h200-1b-v2.yaml gpu.decode, the runtime's 1B "
                                   "proxy, torch SDPA on cuDNN without split-KV, 8 KV heads): the decode step grows with "
                                   "context by 272, 145, 81 and 49 ns per token per request at batch 1, 2, 4 and 8; less "
                                   "the gather's two passes over 32 KiB at 80 % of 4.8 TB/s (17 ns) the kernel streams "
                                   "128, 253, 512 and 1012 GB/s, i.e. 16.1, 16.0, 16.1 and 15.9 GB/s per (request, KV "
                                   "head) block. Unmeasured on other GPUs: the H200 figure is used"),
    "kv_gather_passes": ("0: SGLang's attention kernels read the paged KV cache in place; the runtime's proxy gathers "
                         "req_to_token[rows, :C] into a dense [B, C] copy first (runtime/kv_cache.py KVCache.gather, "
                         "advanced indexing: one read and one write of the attended KV), 2"),
}
"""Where each default efficiency comes from (copied into the profile's provenance)."""


@dataclass(frozen=True)
class Parallel:
    """How the model is laid out: TP size and the weight/GEMM dtype (``bf16``, ``fp8``, or a
    4-bit format of :data:`FP4_BITS` on the modules it covers)."""

    tp: int = 1
    dtype: str = "bf16"


@dataclass(frozen=True)
class ForwardCost:
    """Seconds of one forward, split by where they go (graph-replayed unless ``eager``)."""

    linear_s: float
    experts_s: float
    attention_s: float
    lm_head_s: float
    allreduce_s: float
    overhead_s: float
    eager_s: float

    @property
    def graph_s(self) -> float:
        return self.linear_s + self.experts_s + self.attention_s + self.lm_head_s + self.allreduce_s + self.overhead_s


FP4_BITS = {"mxfp4": 4.25, "nvfp4": 4.5, "int4": 4 + 20 / 128}
"""Bits per weight of the 4-bit formats, scales included. ``mxfp4``: an e2m1 value (4 bits,
two packed per uint8) plus one e8m0 scale (8 bits) per 32 values along K: SGLang 0.5.23
layers/quantization/mxfp4.py ``Mxfp4MoEMethod.create_weights`` (``w13_weight`` [E, 2I, H/2]
uint8, ``w13_weight_scale`` [E, 2I, H/32] uint8, likewise ``w2``). ``nvfp4``: e2m1 plus one
fp8 (e4m3) scale per 16 values (modelopt_quant.py ``ModelOptFp4Config``, group_size 16).
``int4`` (AWQ/GPTQ w4a16): a 4-bit integer plus, per 128 input rows (models.py ``INT4_GROUP``),
one 4-bit zero point and one 16-bit scale (awq/schemes/awq_linear.py ``create_weights``:
``qweight``, ``qzeros`` int32-packed, ``scales`` in the activation dtype); no GPU multiplies
it natively, so its GEMMs run at the bf16 rate (the kernel dequantizes)."""
FP4_LINEARS = {"mxfp4": False, "nvfp4": True, "int4": True}
"""Whether the format covers the dense linears too, or only the routed experts.
``mxfp4``: experts only: ``Mxfp4Config.get_quant_method`` gives a FusedMoE the mxfp4 method
and every LinearBase the unquantized one (no quant method on CUDA, UnquantizedLinearMethod on
HIP or when listed in ``modules_to_not_convert``), and gpt-oss builds its router with
``quant_config=None`` (models/gpt_oss.py); embeddings and LM head stay bf16. ``nvfp4``:
ModelOpt quantizes every LinearBase and FusedMoE not in its exclude list
(``ModelOptFp4Config.get_quant_method``); the exclude list is not read here (attention is
priced in 4 bits too) and embeddings and LM head stay bf16. ``int4``: every LinearBase and
FusedMoE not in ``modules_to_not_convert`` (awq/awq.py ``AWQConfig.get_quant_method``,
gptq/gptq.py), the list not read; embeddings and LM head stay bf16."""


def gemm_dtype(dtype: str, routed: bool) -> str:
    """The dtype whose tensor peak a GEMM runs at: a 4-bit format on the modules it covers
    (:data:`FP4_LINEARS`), bf16 on the others."""
    if dtype in FP4_BITS and not (routed or FP4_LINEARS[dtype]):
        return "bf16"
    return dtype


def weight_bytes_per_element(arch: ModelArch, par: Parallel, routed: bool) -> float:
    """Bytes per weight: 1 for fp8 weights (``--dtype fp8``, or an fp8 checkpoint's routed
    experts), :data:`FP4_BITS` / 8 for a 4-bit format on the modules it covers
    (:data:`FP4_LINEARS`), else 2."""
    if par.dtype == "fp8":
        return 1.0
    if gemm_dtype(par.dtype, routed) in FP4_BITS:
        return FP4_BITS[par.dtype] / 8
    if routed and arch.fp8_native and arch.fp8_routed_experts_only:
        return 1.0
    return BF16


def attention_params(arch: ModelArch, tp: int) -> float:
    """Attention projection weights one rank holds for one layer (elements)."""
    h, heads = arch.hidden_size, arch.num_heads / tp
    if arch.is_mla:
        kvl, rope = arch.kv_lora_rank or 0, arch.qk_rope_head_dim
        q = (h * arch.q_lora_rank + arch.q_lora_rank * heads * arch.qk_head_dim) if arch.q_lora_rank else h * heads * arch.qk_head_dim
        kv_a = h * (kvl + rope)  # replicated on every rank
        kv_b = kvl * heads * (arch.qk_nope_head_dim + arch.v_head_dim)
        return q + kv_a + kv_b + heads * arch.v_head_dim * h + indexer_params(arch)
    kvh = arch.kv_heads_per_rank(tp)
    return h * heads * arch.head_dim + 2 * h * kvh * arch.head_dim + heads * arch.v_head_dim * h


def indexer_params(arch: ModelArch) -> float:
    """The DSA lightning indexer's projections one rank holds for one layer (elements),
    averaged over the layers (only :attr:`ModelArch.indexer_layers` build one): ``wq_b``
    (q_lora_rank -> heads x head_dim), ``wk`` (hidden -> head_dim) and ``weights_proj``
    (hidden -> heads), every one a ReplicatedLinear (SGLang 0.5.23
    layers/attention/dsa/dsa_indexer.py ``Indexer.__init__``; fused as ``wk_weights_proj`` on
    CUDA, the same size), so whole on every TP rank. Priced at the linears' weight bytes."""
    if not arch.sparse_attention:
        return 0.0
    n, d = arch.index_n_heads, arch.index_head_dim
    per = (arch.q_lora_rank or arch.hidden_size) * n * d + arch.hidden_size * (d + n)
    return per * arch.indexer_layers / arch.num_layers


def dense_mlp_params(arch: ModelArch, tp: int) -> tuple[float, float]:
    """(dense-layer MLP, MoE-layer shared experts + router) weights per rank for one layer.

    A dense layer's MLP is ``arch.dense_mlp_width`` wide (Llama 4's ``intermediate_size_mlp``:
    SGLang 0.5.23 models/llama4.py ``Llama4DecoderLayer`` builds its non-MoE layers' ``LlamaMLP``
    from it; Llama 4's shared expert is ``intermediate_size`` wide, ``Llama4MoE.shared_expert``)."""
    h = arch.hidden_size
    dense = 3 * h * arch.dense_mlp_width / tp
    if not arch.is_moe:
        return dense, 0.0
    shared_i = arch.shared_expert_intermediate_size or arch.shared_experts * arch.moe_intermediate_size
    return dense, 3 * h * shared_i / tp + h * arch.num_experts


def expert_params(arch: ModelArch, tp: int) -> float:
    """One routed expert's weights on one rank (TP-sharded experts, SGLang's default ep_size 1)."""
    return 3 * arch.hidden_size * arch.moe_intermediate_size / tp


def routed_experts_s(arch: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, tokens: float,
                     routed: float | None = None) -> float:
    """Seconds of one forward's routed experts on one rank (0 for a dense model): the GEMMs of
    ``tokens`` rows (``2 x tokens x k x params``) or the weights of the experts they pick,
    read once, whichever is longer, in every MoE layer.

    The experts read are the distinct ones among ``routed`` independent top-k draws (expected
    ``E (1 - (1 - k/E)^routed)`` of ``E``): ``tokens`` by default, every row routed as a token
    of its own. Rows that compute the same hidden state pick the same top-k and count as one
    draw (padded rows of a DP-attention gather: sim/dp_attention.py :func:`moe_rows`)."""
    if not arch.is_moe:
        return 0.0
    t = tokens
    n = t if routed is None else routed
    e, k = arch.num_experts, arch.experts_per_token
    active = e * (1 - (1 - k / e) ** n)
    ep = expert_params(arch, par.tp)
    ewb = weight_bytes_per_element(arch, par, routed=True)
    peak_experts = gpu.peak_flops(gemm_dtype(par.dtype, routed=True)) * eff.matmul
    bw = gpu.hbm_tbps * 1e12 * eff.hbm
    return arch.moe_layers * max(2 * t * k * ep / peak_experts, ewb * active * ep / bw)


def weights_bytes(arch: ModelArch, par: Parallel) -> float:
    """All weights one rank holds (bytes): layers, every routed expert, embedding and LM head
    (vocab-parallel)."""
    tp = par.tp
    wb = weight_bytes_per_element(arch, par, routed=False)
    dense_mlp, shared = dense_mlp_params(arch, tp)
    per_layer = attention_params(arch, tp)
    total = wb * (arch.num_layers * per_layer + arch.dense_layers * dense_mlp + arch.moe_layers * shared)
    total += weight_bytes_per_element(arch, par, routed=True) * arch.moe_layers * arch.num_experts * expert_params(arch, tp)
    emb = arch.vocab_size * arch.hidden_size / tp
    norms = (2 * arch.num_layers + 1) * arch.hidden_size  # RMSNorm weights, replicated
    return total + BF16 * (emb * (1 if arch.tie_word_embeddings else 2) + norms)


def kv_entries(arch: ModelArch, keys: float) -> float:
    """KV entries one layer reads for a query attending ``keys`` positions, averaged over
    layers: the sliding window caps them on windowed layers; a compressed history adds one
    entry per ``kv_compress_ratio`` positions beyond the window.

    Chunked local attention (``arch.attention_chunk_size``, Llama 4) is not a sliding window:
    a local layer's query attends the positions from the start of its own chunk (SGLang 0.5.23
    layers/attention/local_attention.py splits each sequence into ``attention_chunk_size``
    blocks the kernel sees as separate sequences), ``keys mod chunk`` of them. Within the first
    chunk that is ``keys``; past it the count saw-tooths between 0 and the chunk, and is priced
    at its mean over a chunk, half the chunk (a smooth figure the profile's context grid can
    interpolate; the exact count at a multiple of the chunk would be near 0)."""
    w = arch.sliding_window
    if w is None:
        return keys
    if arch.attention_chunk_size:
        windowed = keys if keys <= w else w / 2
    else:
        windowed = min(keys, w) + (max(0.0, keys - w) / arch.kv_compress_ratio if arch.kv_compress_ratio else 0.0)
    f = arch.swa_layer_fraction
    return f * windowed + (1 - f) * keys


def kv_cell_bytes(arch: ModelArch, tp: int) -> float:
    """KV cache bytes per token on one rank, all layers, at the cache's element size
    (``arch.kv_cache_bytes``: 2 bf16, 1 fp8) (SGLang pool_configurator.py
    ``_compute_cell_size``: MLA stores the latent, replicated; MHA/GQA splits KV heads)."""
    if arch.is_mla:
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) * arch.num_layers * arch.kv_cache_bytes
    return arch.kv_heads_per_rank(tp) * (arch.head_dim + arch.v_head_dim) * arch.num_layers * arch.kv_cache_bytes


def kv_pool_cell_bytes(arch: ModelArch, tp: int) -> tuple[float, float]:
    """(full pool, SWA pool) KV bytes per token on one rank for a hybrid SWA model
    (``arch.swa_pool_layers`` set): each layer's bytes times the full-attention layers, and
    times the sliding-window layers (SGLang pool_configurator.py
    ``HybridSWAPoolConfigurator``: ``_full_per_token x full_layers_num`` and
    ``_swa_per_token x swa_layers_num``, one layer's KV heads x (head_dim + v_head_dim) x
    the KV dtype's bytes, the SWA layers' heads and dims being the model's own unless the
    config gives ``swa_head_dim``). A model with one pool: (all layers, 0)."""
    total = kv_cell_bytes(arch, tp)
    if not arch.swa_pool_layers:
        return total + indexer_cell_bytes(arch), 0.0
    per_layer = total / arch.num_layers
    full_layers = arch.num_layers - arch.swa_pool_layers
    index = indexer_cell_bytes(arch) / max(arch.indexer_layers, 1) * full_layers
    return per_layer * full_layers + index, per_layer * arch.swa_pool_layers


def indexer_cell_bytes(arch: ModelArch, layers: int | None = None) -> float:
    """The DSA lightning indexer's key bytes per token on one rank (0 without DSA):
    ``index_head_dim`` fp8 bytes plus a 4-byte scale per 128 (132 for DeepSeek-V3.2), on each
    of ``layers`` (default :attr:`ModelArch.indexer_layers`: the layers that reuse the
    previous top-k get no rows, SGLang 0.5.23's default ``_should_elide_dsa_index_k``).
    Replicated, not split over TP ranks. SGLang counts it in the KV pool's per-token cell
    (model_executor/pool_configurator.py ``_compute_cell_size``: ``cell_size +=
    _compute_dsa_indexer_cell_size``, uint8 elements, whatever ``--kv-cache-dtype``)."""
    if not arch.sparse_attention:
        return 0.0
    d = arch.index_head_dim
    per_layer = d + d // DSA_INDEX_QUANT_BLOCK * DSA_INDEX_SCALE_BYTES
    return float(per_layer * (arch.indexer_layers if layers is None else layers))


def attention_kv_bandwidth(arch: ModelArch, gpu: GpuSpec, eff: Efficiency, tp: int, requests: float) -> float:
    """Bytes/s at which a decode or verify attention kernel reads the KV cache.

    With split-KV (``eff.attention_split_kv``, SGLang's default kernels) the kernel cuts each
    request's KV into chunks over enough thread blocks to fill the GPU, and streams it at the
    HBM figure (``hbm_tbps x hbm``) whatever the batch. Without it a decode attention kernel
    runs one thread block per (request, KV head), the query heads that share the KV head
    folded into the block's rows (GQA packing: runtime/layers.py ``paged_attention``,
    FA3's PackGQA), and each block walks its KV serially. So the kernel streams at
    ``blocks x unsplit_attention_cta_gbps``, blocks = requests x KV heads per rank, at most one
    block per SM at a time (``gpu.sms``), and never above the HBM figure. This is the
    low-occupancy decode that Flash-Decoding was made for (Dao, Haziza, Massa, Sizov, 2023:
    FlashAttention parallelises over batch and heads only, so a small decode batch leaves
    most of the GPU idle). Measured on an H200 (the runtime's 1B proxy, 8 KV heads): the step's
    growth with context per request falls 5.6x from batch 1 to 8 and is flat from batch 16 on
    (:data:`EFFICIENCY_SOURCES` ``unsplit_attention_cta_gbps``; docs/measurements/h200-analytic.md).
    """
    bw = gpu.hbm_tbps * 1e12 * eff.hbm
    if eff.attention_split_kv:
        return bw
    if gpu.sms is None:
        raise ConfigError(gpu.name, "sms", "<missing>", "an attention without split-KV needs the GPU's SM count "
                          "(sim/analytic/data/gpus.yaml)")
    blocks = max(1.0, requests) * (1 if arch.is_mla else arch.kv_heads_per_rank(tp))
    return min(bw, min(blocks, gpu.sms) * eff.unsplit_attention_cta_gbps * 1e9)


def forward_cost(arch: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, *, tokens: float,
                 requests: float, keys: float, kv_read: float, logits: float, absorbed_mla: bool,
                 decode: bool = False) -> ForwardCost:
    """Seconds of one forward on one rank.

    Args:
        tokens: new tokens in the forward (batch x tokens per request).
        requests: requests in the forward (each reads its KV once).
        keys: mean positions each new token attends (causal: prefix + half the extend).
        kv_read: positions of KV each request reads from the cache.
        logits: positions whose logits are computed (LM head rows).
        absorbed_mla: MLA in the absorbed form (decode/verify) rather than expanded (extend).
        decode: a decode, verify or draft forward (a few queries per request), whose KV read
            runs at :func:`attention_kv_bandwidth`; an extend's at the HBM figure.

    Returns:
        :class:`ForwardCost`; ``graph_s`` when replayed as a graph, ``eager_s`` when eager.
    """
    tp = par.tp
    t = max(tokens, 1.0)
    peak_mm = gpu.peak_flops(gemm_dtype(par.dtype, routed=False)) * eff.matmul
    # the LM head stays bf16 under every weight format: it is a VocabParallelEmbedding, which
    # SGLang 0.5.23's quantization configs give no quantized method (layers/quantization/
    # fp8.py Fp8Config.get_quant_method covers LinearBase and FusedMoE only; the 4-bit ones
    # likewise), so its GEMM runs at the bf16 peak as its weights are read as bf16 below
    peak_lm = gpu.peak_flops("bf16") * eff.matmul
    peak_attn = gpu.bf16_tflops * 1e12 * eff.attention
    bw = gpu.hbm_tbps * 1e12 * eff.hbm
    L, h = arch.num_layers, arch.hidden_size
    wb = weight_bytes_per_element(arch, par, routed=False)

    # dense linears + activations streamed through them
    attn_p = attention_params(arch, tp)
    dense_mlp, shared = dense_mlp_params(arch, tp)
    lin_params = L * attn_p + arch.dense_layers * dense_mlp + arch.moe_layers * shared
    # the MLP activations' width averaged over the layers: a dense layer's MLP, an MoE layer's routed experts
    mlp_width = (arch.dense_layers * arch.dense_mlp_width
                 + arch.moe_layers * arch.moe_intermediate_size * arch.experts_per_token) / L
    act_bytes = t * L * BF16 * (12 * h + 3 * mlp_width / tp)
    linear_s = max(2 * t * lin_params / peak_mm, (wb * lin_params + act_bytes) / bw)

    experts_s = routed_experts_s(arch, gpu, par, eff, t)

    heads = arch.num_heads / tp
    eff_keys = kv_entries(arch, keys)
    read_keys = kv_entries(arch, kv_read)
    # DeepSeek sparse attention: a request of more than DSA_DENSE_PREFILL_KV_LEN tokens
    # extends through the sparse MLA kernel (absorbed, over the top-k), a decode always
    sparse = arch.sparse_attention and (absorbed_mla or kv_read + t / max(requests, 1.0) > DSA_DENSE_PREFILL_KV_LEN)
    if sparse:
        eff_keys, read_keys = min(eff_keys, arch.index_topk), min(read_keys, arch.index_topk)
    if arch.is_mla and (absorbed_mla or sparse):
        per_key = 2 * (2 * arch.kv_lora_rank + arch.qk_rope_head_dim)
    else:
        per_key = 2 * (arch.qk_head_dim + arch.v_head_dim)
    # Mllama's cross-attention layers attend the encoder's tokens, none in a text-only forward
    # (models/mllama.py MllamaTextModel.forward; their cell share is still in the pool)
    self_layers = arch.self_attention_layers
    attn_flops = self_layers * t * eff_keys * heads * per_key
    cell = kv_cell_bytes(arch, tp) * self_layers / L
    ctx_bytes = requests * read_keys * cell
    kv_bytes = ctx_bytes + t * cell
    kv_bw = attention_kv_bandwidth(arch, gpu, eff, tp, requests) if decode else bw
    # a gathered copy of the attended KV (eff.kv_gather_passes: read + write) before the kernel
    attention_s = max(attn_flops / peak_attn, kv_bytes / kv_bw) + eff.kv_gather_passes * ctx_bytes / bw
    attention_s += indexer_s(arch, gpu, eff, tokens=t, requests=requests, keys=keys, kv_read=kv_read,
                             decode=decode, kv_bw=kv_bw)

    lm_params = arch.vocab_size * h / tp
    lm_head_s = max(2 * max(logits, 1.0) * lm_params / peak_lm, BF16 * lm_params / bw)
    # the rows x vocab logits after the LM head: TP all-gather of the vocab shards, then the
    # full-vocab passes before sampling (SGLang layers/logits_processor.py _get_logits:
    # tensor-parallel all-gather, copy into a float32 buffer; layers/sampler.py: argmax, or
    # softmax + top-k/top-p sampling, over the full vocab)
    vocab_bytes = max(logits, 1.0) * arch.vocab_size
    lm_head_s += LOGIT_PASS_BYTES * vocab_bytes / bw
    if tp > 1:
        lm_head_s += collective_s(gpu, eff, tp, BF16 * vocab_bytes, all_reduce=False)

    allreduce_s = 2 * L * collective_s(gpu, eff, tp, t * h * BF16) if tp > 1 else 0.0
    kernels = kernel_count(arch, eff, tp, gpu, t)
    overhead_s = eff.graph_launch_s + kernels * eff.kernel_gap_s
    gpu_s = linear_s + experts_s + attention_s + lm_head_s + allreduce_s + overhead_s
    # eager: kernels run as the host issues them (host-bound below the GPU time)
    eager_s = max(gpu_s + kernels * eff.eager_gpu_per_kernel_s, kernels * eager_issue_per_kernel_s(eff))
    return ForwardCost(linear_s, experts_s, attention_s, lm_head_s, allreduce_s, overhead_s, eager_s)


def indexer_s(arch: ModelArch, gpu: GpuSpec, eff: Efficiency, *, tokens: float, requests: float, keys: float,
              kv_read: float, decode: bool, kv_bw: float) -> float:
    """Seconds of the DSA lightning indexer in one forward on one rank (0 without DSA).

    Each new token's query scores every cached position it attends, on each of
    :attr:`ModelArch.indexer_layers`: ``2 x index_n_heads x index_head_dim`` FLOPs per key
    (``keys`` per query), in fp8, at the GPU's fp8 peak times ``eff.attention``; each request
    reads the index keys of its ``kv_read`` cached positions (:func:`indexer_cell_bytes` per
    token, 132 bytes a layer for DeepSeek-V3.2) and the new tokens' are written, at the
    attention's bandwidth ``kv_bw``. Its heads are not split over TP ranks (``wq_b`` is a
    ReplicatedLinear): every rank runs the whole indexer. SGLang 0.5.23 runs it as kernels
    of its own before the sparse attention (layers/attention/dsa/dsa_indexer.py
    ``Indexer.forward_cuda`` -> ``_get_topk_paged``: ``fp8_paged_mqa_logits`` then
    ``topk_transform``; ``_get_topk_ragged``: ``fp8_mqa_logits`` for an extend; the attention
    backend then reads ``topk_indices``), so its time adds to the attention's rather than
    overlapping it: ``max(FLOPs / (fp8 peak x attention), bytes / kv_bw)``.

    A plain extend whose requests are all at most ``index_topk`` long skips the logits (only
    the new keys are stored: ``_should_skip_logits_computation``); a decode, verify or draft
    forward on CUDA scores the whole context at every length (the dense/sparse graph variants
    are ROCm's: layers/attention/graph_variants.py ``create_attention_graph_variants``).
    Not counted: the fp32 logits' write and the top-k's read of them (8 bytes per query and
    key, ~6 % of the key bytes in a decode), and the indexer's small kernels' launch gaps.
    """
    if not arch.sparse_attention:
        return 0.0
    if not decode and kv_read + tokens / max(requests, 1.0) <= arch.index_topk:
        return tokens * indexer_cell_bytes(arch) / kv_bw
    flops = arch.indexer_layers * tokens * keys * 2 * arch.index_n_heads * arch.index_head_dim
    index_bytes = (requests * kv_read + tokens) * indexer_cell_bytes(arch)
    peak = gpu.peak_flops("fp8") * eff.attention
    return max(flops / peak, index_bytes / kv_bw)


def collective_s(gpu: GpuSpec, eff: Efficiency, tp: int, size: float, all_reduce: bool = True) -> float:
    """Seconds of one TP collective over ``size`` bytes: an all-reduce (the layers'), or an
    all-gather of ``size`` bytes in all (the LM head's vocab shards).

    Within one node (``tp`` <= ``gpu.node_gpus``) a ring over the node's link
    (:meth:`GpuSpec.tp_link_bytes_per_s`) plus the custom all-reduce's latency
    (``allreduce_latency_s``). A group that spans nodes runs hierarchically, as NCCL does:
    the ring inside each node over its link, and between the nodes each GPU's 1/``node_gpus``
    share of the data over its NIC (``gpu.nic_gbps``), with NCCL's inter-node latency
    (``internode_allreduce_latency_s``): SGLang 0.5.23 turns its custom all-reduce off when
    the group spans nodes (distributed/device_communicators/custom_all_reduce_utils.py
    ``can_use_custom_all_reduce_with_nvlink``). The same function turns it off within a node
    for more than two PCIe-only GPUs and without CUDA P2P (:meth:`GpuSpec.custom_allreduce`:
    an RTX 5090 at TP2 and up, an L40S above TP2): such a group's ring runs over its PCIe
    ``link_gbps`` with the same NCCL latency. Not modelled: a GB200 rack's per-tray hosts
    (its 72-GPU NVLink domain counts as one node), multi-node NVLink all-reduce kernels, and
    NCCL's staging through host memory where P2P is absent (priced as the PCIe ring).
    """
    inside, nodes = gpu.tp_nodes(tp)
    ring = (2.0 if all_reduce else 1.0) * (inside - 1) / inside * size / (gpu.tp_link_bytes_per_s(inside) * eff.interconnect)
    if nodes <= 1:
        return (eff.allreduce_latency_s if gpu.custom_allreduce(tp) else eff.internode_allreduce_latency_s) + ring
    across = (2.0 if all_reduce else 1.0) * (nodes - 1) / nodes * size / inside / (gpu.nic_gbps * 1e9 * eff.interconnect)
    return eff.internode_allreduce_latency_s + ring + across


ALLREDUCE_FUSION_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM", "GptOssForCausalLM",
    "GlmMoeDsaForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "MistralLarge3ForCausalLM",
    "Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration", "Qwen3NextForCausalLM",
    "Qwen4ExpForConditionalGeneration", "KimiK25ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3",
})
"""Architectures for which SGLang 0.5.23 turns on FlashInfer's all-reduce fusion by itself
(arg_groups/overrides.py ``_FLASHINFER_ALLREDUCE_FUSION_ARCHS``)."""
FUSE_ALLREDUCE_MAX_TOKENS = 2048
"""Forwards of more tokens run the all-reduce unfused (layers/layer_boundary/residual/
add_norm.py ``FUSE_ALLREDUCE_MAX_BATCH_SIZE``)."""


def allreduce_fused(arch: ModelArch, gpu: GpuSpec | None, tp: int, tokens: float = 1.0) -> bool:
    """Whether each TP all-reduce runs fused with the residual add + RMSNorm that follows it
    (one kernel instead of two). SGLang 0.5.23 auto-enables FlashInfer's all-reduce fusion
    on SM 90 and 100 for the architectures in :data:`ALLREDUCE_FUSION_ARCHS` when tp > 1
    within one node on SM 90 (arg_groups/overrides.py ``_flashinfer_allreduce_fusion_auto_enable``:
    ``nnodes == 1 or is_sm100``; attention DP, which turns it off too, is not modelled here),
    and uses it for forwards of up
    to :data:`FUSE_ALLREDUCE_MAX_TOKENS` tokens (add_norm.py ``flashinfer_ar_fusion_applies``)."""
    return (tp > 1 and gpu is not None and gpu.compute_capability in (90, 100)
            and tokens <= FUSE_ALLREDUCE_MAX_TOKENS
            and (tp <= gpu.node_gpus or gpu.compute_capability == 100)
            and bool(ALLREDUCE_FUSION_ARCHS.intersection(arch.architectures)))


def kernel_count(arch: ModelArch, eff: Efficiency | None = None, tp: int = 1, gpu: GpuSpec | None = None,
                 tokens: float = 1.0) -> int:
    """Kernels one forward launches: per layer ``kernels_per_layer`` (a dense GQA layer at
    TP1), plus ``allreduce_kernels_per_layer`` when ``tp`` > 1 (none when the all-reduces are
    fused into the following add + RMSNorm kernels on ``gpu`` for a forward of ``tokens``:
    :func:`allreduce_fused`),
    ``mla_extra_kernels`` on MLA layers and ``moe_extra_kernels`` on MoE layers, plus
    embedding, final norm, LM head and sampling."""
    eff = eff or Efficiency()
    ar = eff.allreduce_kernels_per_layer if tp > 1 and not allreduce_fused(arch, gpu, tp, tokens) else 0
    per = arch.num_layers * (eff.kernels_per_layer + ar + (eff.mla_extra_kernels if arch.is_mla else 0))
    return per + arch.moe_layers * eff.moe_extra_kernels + 4


def eager_issue_per_kernel_s(eff: Efficiency) -> float:
    """Host seconds to issue one kernel eagerly on the profile's host: the measured figure
    scaled by the clock ratio ``REFERENCE_HOST_GHZ / host_ghz`` (single-threaded CPU work)."""
    return eff.eager_launch_per_kernel_s * REFERENCE_HOST_GHZ / eff.host_ghz


def prefill_runs_eager(arch: ModelArch, gpu: GpuSpec) -> bool:
    """Whether SGLang 0.5.23 runs this model's extend (prefill) forwards without graphs on
    ``gpu``: always off CUDA (model_executor/cuda_graph_config.py ``default_prefill_backend``:
    breakable on CUDA, disabled elsewhere, so on ROCm every extend is issued kernel by
    kernel) and for :data:`~sim.analytic.models.NO_BREAKABLE_PREFILL_ARCHS` on CUDA as well; a multimodal model
    not validated for them (cuda_graph_hook.py ``disable_breakable_cudagraph_if_incompatible``,
    :data:`~sim.analytic.models.MM_PREFILL_GRAPH_ARCHS`); DeepSeek-V3 on SM100, whose default
    trtllm_mla turns them off (``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``)."""
    archs = set(arch.architectures)
    sm100 = gpu.platform == "cuda" and (gpu.compute_capability or 0) // 10 == 10
    return (gpu.platform != "cuda" or bool(NO_BREAKABLE_PREFILL_ARCHS & archs)
            or (arch.multimodal and not MM_PREFILL_GRAPH_ARCHS & archs)
            or (sm100 and arch.is_mla and bool(TRTLLM_MLA_ARCHS & set(arch.architectures[:1]))))


def extend_issue_s(arch: ModelArch, gpu: GpuSpec, eff: Efficiency, tp: int, tokens: float = 1024.0) -> float:
    """Host seconds to issue one extend forward of ``arch`` (the profile's
    ``host.launch_per_extend_s``; the drafter's injection: ``launch_per_inject_s``).

    The host issues the extend's kernels while the GPU runs them, so this is loop time the
    overlap scheduler cannot hide (sim/cost_model.py ``CostModel.issue``). Eager
    (:func:`prefill_runs_eager`): every kernel of the forward, ``kernel_count x`` the eager
    issue per kernel (the same per-kernel figure as an eager decode; the runtime's 1B proxy
    measured 15.3 ms per eager extend on the 2.1 GHz H200 host, profiles/h200-1b-v2.yaml
    ``host.launch_per_extend_s``, ~860 kernels x 17.8 us). Breakable graph (CUDA's
    default): per layer one segment replay (``graph_launch_s``) and the eagerly issued
    attention kernels (``breakable_eager_kernels_per_layer``), plus the last segment.
    """
    per = eager_issue_per_kernel_s(eff)
    if prefill_runs_eager(arch, gpu):
        return kernel_count(arch, eff, tp, gpu, tokens) * per
    return arch.num_layers * (eff.graph_launch_s + eff.breakable_eager_kernels_per_layer * per) + eff.graph_launch_s


def draft_arch(target: ModelArch, layers: int, vocab: int | None = None) -> ModelArch:
    """The assumed drafter: ``layers`` decoder layers of the target's own layer type on the
    target's vocabulary and LM head.

    A dense target gets dense layers (EAGLE heads on Llama/Qwen). An MoE target's draft
    layers are MoE layers like its own: SGLang 0.5.23 builds the DeepSeek MTP layer as a
    DeepseekV2DecoderLayer whose ``_is_layer_sparse`` is always true for ``is_nextn``
    (models/deepseek_v2.py, deepseek_nextn.py), and the DeepSeek-V4 DSpark stages as
    DeepseekV4 decoder layers with the target's routed experts unless the draft config
    overrides them (models/deepseek_v4_dspark.py ``_dspark_stage_config``). So a draft
    forward over ``batch x window`` tokens touches experts the way a verify does.

    ``vocab``: the drafter's own LM head rows, where it has one. An EAGLE-3 head computes its
    logits over the checkpoint's ``draft_vocab_size`` (SGLang 0.5.23 models/llama_eagle3.py:
    ``ParallelLMHead(config.draft_vocab_size, ...)``, mapped back to the target's tokens by
    ``hot_token_id``; speculative/eagle_worker_v2.py ``init_lm_head`` keeps it unless the
    checkpoint has none), 32000 rows for the Llama-3.1-8B EAGLE-3 heads against the target's
    128256. None: the target's LM head (EAGLE-2, MTP/NEXTN: ``set_embed_and_head``).
    """
    # every draft layer is a self-attention layer and, for an MoE target, an MoE one (Llama 4's
    # interleaved dense layers and Mllama's cross-attention layers are the target's own)
    update = {"name": f"{target.name}-draft{layers}", "num_layers": layers, "first_k_dense": 0,
              "moe_layer_step": 1, "cross_attention_layers": 0, "index_shared_layers": 0}
    if vocab is not None:
        update["vocab_size"] = vocab
    return target.model_copy(update=update)


def decode_like(arch: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, batch: float,
                per_request: int, context: float) -> ForwardCost:
    """A decode (``per_request`` = 1) or verify forward: ``batch`` requests, each with
    ``per_request`` new tokens on ``context`` committed tokens; logits for every new token."""
    return forward_cost(arch, gpu, par, eff, tokens=batch * per_request, requests=batch,
                        keys=context + (per_request + 1) / 2, kv_read=context,
                        logits=batch * per_request, absorbed_mla=True, decode=True)


def draft_forward(draft: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, tokens: float,
                  context: float, per_request: int = 1) -> ForwardCost:
    """One draft-model forward of ``tokens`` new tokens, ``per_request`` of them per request
    (the profile's ``gpu.draft_step`` cell at ``tokens``), on ``context`` committed tokens.

    A block drafter (DSpark/DFlash, ``per_request`` = the window) drafts the whole block of
    each request in one forward: SGLang 0.5.23 runs it as a ``TARGET_VERIFY`` forward of
    ``bs`` requests over ``bs x block_size`` tokens (speculative/dflash_worker_v2.py, the
    draft block's ``ForwardBatch``; the runtime's proxy likewise, runtime/spec_cycle.py
    ``_draft_dev``: one forward over every row's block), so each request's KV is read once
    per forward, as in a verify, not once per drafted token. A chain drafter's serial step
    (EAGLE/MTP) carries one token per request (``per_request`` 1). The requests are
    ``tokens / per_request`` (at least one).
    """
    requests = max(1.0, tokens / per_request)
    return forward_cost(draft, gpu, par, eff, tokens=tokens, requests=requests,
                        keys=context + (min(per_request, tokens) + 1) / 2, kv_read=context,
                        logits=tokens, absorbed_mla=True, decode=True)


def extend(arch: ModelArch, gpu: GpuSpec, par: Parallel, eff: Efficiency, tokens: float,
           mean_keys: float, request_tokens: int = 1024) -> ForwardCost:
    """A prefill forward of ``tokens`` extend tokens whose mean attended context is
    ``mean_keys`` (the cost model's query: mean prefix + half the mean extend length).
    Requests are taken as ``request_tokens`` long (an assumption: only the LM-head rows and
    the prefix KV reads depend on it), with the prefix that gives ``mean_keys``."""
    per_req = min(tokens, request_tokens, max(1.0, 2 * mean_keys)) if mean_keys > 0 else min(tokens, request_tokens)
    n = max(1.0, math.ceil(tokens / max(per_req, 1.0)))
    prefix = max(0.0, mean_keys - per_req / 2)
    return forward_cost(arch, gpu, par, eff, tokens=tokens, requests=n, keys=max(mean_keys, 1.0),
                        kv_read=prefix, logits=n, absorbed_mla=False)
