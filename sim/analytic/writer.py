"""Build a profile (the schema :mod:`sim.profile` reads) from a model, a GPU and a TP size.

Every grid cell is :mod:`sim.analytic.roofline` evaluated at that cell's shape, so the
same function fills any axis a profile grid has (batch, tokens per request, context).
The profile carries:

- ``hardware``: platform, GPU, TP, memory, weights and KV bytes per rank (what
  :mod:`sim.defaults` turns into SGLang's defaults and the KV pool);
- ``analytic``: every input (model shape, GPU figures, TP, dtype, window, drafter,
  efficiency factors) so :func:`regenerate` rebuilds it with refitted factors;
- ``provenance``: where each number comes from.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from specsched.sim.analytic.gpus import GpuSpec
from specsched.sim.analytic.models import ModelArch
from specsched.sim.analytic.roofline import (
    BF16,
    DSA_DENSE_PREFILL_KV_LEN,
    EFFICIENCY_SOURCES,
    FP4_BITS,
    FP4_LINEARS,
    Efficiency,
    ForwardCost,
    Parallel,
    attention_params,
    decode_like,
    draft_arch,
    draft_forward,
    eager_issue_per_kernel_s,
    extend,
    extend_issue_s,
    gpu_efficiency,
    indexer_cell_bytes,
    indexer_params,
    kernel_count,
    kv_cell_bytes,
    kv_pool_cell_bytes,
    prefill_runs_eager,
    weight_bytes_per_element,
    weights_bytes,
)
from specsched.sim.analytic.vision import VIT_L_HIDDEN, VIT_L_LAYERS
from specsched.sim.errors import ConfigError
from specsched.sim.profile import GpuProfile, Profile
from specsched.sim.server_args import SpecAlgorithm

BATCHES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024]
CONTEXTS = [0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
DRAFT_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192]
EXTEND_TOKENS = [1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
EXTEND_CONTEXTS = [0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
GATHER_WIDTH_BUCKET = 256
"""Positions the width of a gathered KV copy is rounded up to: the runtime's proxy gathers
``req_to_token[rows, :C]`` with C its graph context bucket covering the longest request, every
256 positions (runtime/engine.py; runtime/layers.py ``AttnBatch``). Written as
``gpu.attention_bucket`` of a profile whose attention gathers the KV (``kv_gather_passes`` > 0)."""


def check_tp(arch: ModelArch, tp: int, file: str) -> None:
    """TP must split the query heads evenly, and the KV heads (or be a multiple of them).

    Raises:
        ConfigError: naming ``--tp``, the value and what divides the heads.
    """
    if tp < 1:
        raise ConfigError("<command line>", "--tp", tp, "must be >= 1")
    allowed = [d for d in range(1, arch.num_heads + 1) if arch.num_heads % d == 0
               and (arch.is_mla or arch.num_kv_heads % d == 0 or d % arch.num_kv_heads == 0)]
    if tp not in allowed:
        kv = ("" if arch.is_mla else f" and divide num_key_value_heads {arch.num_kv_heads} or be a multiple of "
              "it (KV heads replicated)")
        raise ConfigError(file, "--tp", tp, f"must divide num_attention_heads {arch.num_heads}{kv}; "
                          f"allowed: {', '.join(map(str, allowed[:12]))}")


AITER_MOE_PADDING = 128
"""SGLang 0.5.23 layers/moe/utils.py ``AITER_PADDING_SIZE``: with ``SGLANG_USE_AITER=1`` on ROCm
the fp8 MoE experts' width is padded to it, and ``Fp8MoEMethod.create_weights`` skips its block
check when the checkpoint's blocks are this size (layers/quantization/fp8.py)."""


def fp8_block_misfits(arch: ModelArch, tp: int, platform: str = "cuda") -> list[str]:
    """The weights of a block-quantized FP8 checkpoint (``arch.fp8_weight_block``) whose share
    on one of ``tp`` ranks is not a whole number of blocks, each as ``name = size`` with the
    block it misses; empty when every share is whole (or the checkpoint has no blocks).

    SGLang 0.5.23 checks them as it creates the weights and stops the server:
    layers/quantization/fp8.py ``Fp8LinearMethod.validate_block_quant_shapes`` (a merged or
    column-split linear's output partitions % block_n: the QKV and gate/up projections, MLA's
    q_b/kv_b; a row-split linear's input partition % block_k when ``tp`` > 1: o_proj, down_proj)
    and ``Fp8MoEMethod.create_weights`` (the experts' ``intermediate_size_per_partition`` %
    block_n, and % block_k when ``tp`` > 1; skipped on ROCm with ``SGLANG_USE_AITER=1`` when
    the blocks are :data:`AITER_MOE_PADDING` wide, so a HIP profile of 128 x 128 blocks leaves
    the experts out and says so in an assumption). The TP shares follow linear.py
    (``QKVParallelLinear``: one KV head per rank once ``tp`` reaches the KV heads) at
    ``ep_size`` 1 (the experts split over all ``tp`` ranks). Replicated linears (MLA's
    ``fused_qkv_a_proj_with_mqa``) are not split and not checked."""
    if arch.fp8_weight_block is None:
        return []
    block_n, block_k = arch.fp8_weight_block
    split = tp > 1
    checks: list[tuple[str, float, bool]] = []   # (weight, its share on one rank, a row-split input)
    if not arch.fp8_routed_experts_only:
        heads = arch.num_heads / tp
        if arch.is_mla:
            qk = arch.qk_nope_head_dim + arch.qk_rope_head_dim
            checks += [("q_b_proj" if arch.q_lora_rank else "q_proj", heads * qk, False),
                       ("kv_b_proj", heads * (arch.qk_nope_head_dim + arch.v_head_dim), False),
                       ("o_proj", heads * arch.v_head_dim, True)]
        else:
            kv = max(1.0, arch.num_kv_heads / tp)
            checks += [("qkv_proj (q)", heads * arch.head_dim, False), ("qkv_proj (k)", kv * arch.head_dim, False),
                       ("qkv_proj (v)", kv * arch.v_head_dim, False), ("o_proj", heads * arch.v_head_dim, True)]
        if not arch.num_experts or arch.first_k_dense or arch.moe_layer_step > 1:
            dense = (arch.dense_intermediate_size or arch.intermediate_size) / tp
            checks += [("gate_up_proj", dense, False), ("down_proj", dense, True)]
        shared = arch.shared_expert_intermediate_size or arch.shared_experts * arch.moe_intermediate_size
        if arch.num_experts and shared:
            checks += [("shared experts' gate_up_proj", shared / tp, False), ("shared experts' down_proj", shared / tp, True)]
    aiter_pads = platform == "hip" and block_n == block_k == AITER_MOE_PADDING
    if arch.num_experts and not aiter_pads:
        experts = arch.moe_intermediate_size / tp
        checks += [("experts' gate/up (intermediate_size_per_partition)", experts, False),
                   ("experts' down (intermediate_size_per_partition)", experts, True)]
    out = []
    for name, share, row in checks:
        block = block_k if row else block_n
        if row and not split:
            continue
        if share % block:
            out.append(f"{name} {share:g} per rank is not a multiple of block_{'k' if row else 'n'} {block}")
    return out


def check_fp8_blocks(arch: ModelArch, tp: int, platform: str, file: str) -> ModelArch:
    """Refuse a TP size at which SGLang 0.5.23 cannot load the block-quantized FP8 checkpoint
    (:func:`fp8_block_misfits`), naming the first misfit and the TP sizes that load; return the
    model, with an assumption added where a HIP profile leaves the experts' check to AITER.

    Raises:
        ConfigError: naming ``--tp``, the value, the share that is not whole blocks and the
            sizes allowed.
    """
    bad = fp8_block_misfits(arch, tp, platform)
    if bad:
        ok = [d for d in range(1, arch.num_heads + 1) if arch.num_heads % d == 0
              and (arch.is_mla or arch.num_kv_heads % d == 0 or d % arch.num_kv_heads == 0)
              and not fp8_block_misfits(arch, d, platform)]
        raise ConfigError(file, "--tp", tp,
                          f"the checkpoint's FP8 weights are quantized in {arch.fp8_weight_block[0]} x "
                          f"{arch.fp8_weight_block[1]} blocks (quantization_config.weight_block_size) and its "
                          f"{bad[0]}: SGLang 0.5.23 stops loading it (layers/quantization/fp8.py "
                          f"validate_block_quant_shapes, Fp8MoEMethod.create_weights); allowed: "
                          f"{', '.join(map(str, ok[:12])) or 'none'}")
    if (arch.fp8_weight_block is not None and arch.num_experts and platform == "hip"
            and fp8_block_misfits(arch, tp, "cuda")):
        said = (f"SGLANG_USE_AITER=1: the experts' {arch.moe_intermediate_size / tp:g} columns per rank are not whole "
                f"{AITER_MOE_PADDING}-wide FP8 blocks, which SGLang 0.5.23 loads on ROCm only with AITER's padding "
                "(layers/quantization/fp8.py Fp8MoEMethod.create_weights; without it the server stops)")
        if said not in arch.assumptions:
            return arch.model_copy(update={"assumptions": [*arch.assumptions, said]})
    return arch


def _grid(xs: list[int], cs: list[int], f: Callable[[float, float], float]) -> dict[str, Any]:
    return {"x": [float(x) for x in xs], "context_len": [float(c) for c in cs],
            "seconds": [[float(f"{f(x, c):.6e}") for c in cs] for x in xs]}


def _host(platform: str) -> tuple[dict[str, float], dict[str, str]]:
    path = Path(str(resources.files("specsched.sim.analytic") / "data" / "host.yaml"))
    raw = yaml.safe_load(path.read_text())[platform]
    src = raw.pop("source")
    return raw, {f"host.{k}": v for k, v in src.items()}


KV_LINK_BYTES_PER_S = 4.0e10
"""Assumed KV-transfer link of one rank: one 400 Gb/s RDMA NIC per GPU at 80 % (the GPU
table has no inter-node link; the shipped MI355X prefill-decode profile assumes the same)."""
KV_LINK_LATENCY_S = 1.0e-3
"""Assumed fixed cost of one KV transfer (bootstrap done earlier; the completion poll)."""


def drafter_kind(algorithm: str) -> str | None:
    """The drafter kind an analytic profile prices for one of SGLang's
    ``--speculative-algorithm`` names (any case), from :class:`sim.server_args.SpecAlgorithm`:
    ``block`` for a block drafter that drafts the whole window in one forward (DSpark, DFlash),
    ``chain`` for one token per serial draft forward (EAGLE, EAGLE-3, NEXTN/MTP, STANDALONE);
    None for ``none`` or a name that is no algorithm."""
    try:
        algo = SpecAlgorithm(str(algorithm).lower())
    except ValueError:
        return None
    return None if not algo.enabled else "block" if algo.is_block else "chain"


def build_profile(arch: ModelArch, gpu: GpuSpec, tp: int = 1, dtype: str | None = None, *,
                  window: int = 6, drafter: str = "block", draft_layers: int = 1,
                  eff: Efficiency | None = None, name: str | None = None,
                  model_ref: str = "", draft_vocab: int | None = None,
                  draft_model: ModelArch | None = None) -> dict[str, Any]:
    """A profile mapping that validates as :class:`sim.profile.Profile`.

    Args:
        window: verify window (tokens verified per request) of the ``verify`` grid.
        drafter: ``block`` (one draft forward over the window: DSpark/DFlash) or ``chain``
            (one token per draft forward: EAGLE/MTP; serial steps come from ``draft_step``).
        draft_layers: decoder layers of the assumed drafter.
        draft_vocab: rows of the drafter's own LM head (an EAGLE-3 head's
            ``draft_vocab_size``); None: it uses the target's (:func:`roofline.draft_arch`).
        draft_model: a separate draft model (SGLang's STANDALONE drafter,
            ``--speculative-draft-model-path``): priced as that whole model (its own
            embedding, layers and LM head) at the target's TP, instead of ``draft_layers``
            target-shaped layers; its weights join the target's.
        dtype: ``bf16``, ``fp8``, ``mxfp4``, ``nvfp4`` or ``int4`` (default: the checkpoint's 4-bit
            format, fp8 for an fp8 checkpoint, else bf16).

    Raises:
        ConfigError: a TP size that does not divide the heads, or a bad window/drafter.
    """
    check_tp(arch, tp, model_ref or arch.name)
    arch = check_fp8_blocks(arch, tp, gpu.platform, model_ref or arch.name)
    if window < 2 or window > 64:
        raise ConfigError("<command line>", "--window", window, "must be in 2..64")
    if drafter not in ("block", "chain"):
        kind = drafter_kind(drafter)
        raise ConfigError("<command line>", "--drafter", drafter,
                          "allowed: block (SGLang's dspark, dflash) or chain (eagle, eagle3, nextn, mtp, standalone)"
                          + (f": for {drafter} give --drafter {kind}" if kind else ""))
    if draft_vocab is not None and not 1 <= draft_vocab <= arch.vocab_size:
        raise ConfigError("<command line>", "--draft-vocab", draft_vocab,
                          f"the drafter's LM head rows: 1..{arch.vocab_size} (the target's vocab_size)")
    if draft_model is not None:
        if draft_vocab is not None:
            raise ConfigError("<command line>", "--draft-vocab", draft_vocab,
                              "not with --draft-model: a draft model has its own LM head (its vocab_size)")
        check_tp(draft_model, tp, draft_model.name)   # SGLang runs the draft model at the target's TP
    dtype = dtype or arch.checkpoint_dtype
    eff = gpu_efficiency(gpu, eff)
    par = Parallel(tp=tp, dtype=dtype)
    draft = draft_arch(arch, draft_layers, draft_vocab) if draft_model is None else draft_model

    def dec(b: float, c: float) -> ForwardCost:
        return decode_like(arch, gpu, par, eff, b, 1, c)

    # profiles with a verify_window know the window and time the draft forward separately
    # (draft_step by tokens); older ones want one cycle, draft included, per batch size
    new_schema = "verify_window" in GpuProfile.model_fields
    q_draft = window if drafter == "block" else 1

    def ver(b: float, c: float) -> float:
        target = decode_like(arch, gpu, par, eff, b, window, c).graph_s
        return target if new_schema else target + decode_like(draft, gpu, par, eff, b, q_draft, c).graph_s

    def draft_step(x: float, c: float) -> float:
        # x: tokens of one draft forward (new schema: a block drafter's block of `window`
        # tokens per request reads each request's context once, a chain step one token per
        # request) or batch size (old schema: one token per request)
        per_request = window if new_schema and drafter == "block" else 1
        return draft_forward(draft, gpu, par, eff, x, c, per_request).graph_s

    from specsched.sim.defaults import memory_buckets

    graph_bs = memory_buckets(gpu.memory_mib, tp)[1]
    # eager (batch above cuda_graph_max_bs): kernels run as the host issues them one by one,
    # so a step lasts max(graph + per-kernel GPU extra, host issue) (sim/cost_model.py)
    kernels = kernel_count(arch, eff, tp, gpu)
    per_kernel_issue = eager_issue_per_kernel_s(eff)
    eager_overhead = kernels * eff.eager_gpu_per_kernel_s
    eager_issue = kernels * per_kernel_issue
    eager_draft_overhead = kernel_count(draft, eff, tp, gpu) * per_kernel_issue
    c_ref = 1024.0
    eager_factor = max(eager_issue, dec(graph_bs, c_ref).graph_s + eager_overhead) / dec(graph_bs, c_ref).graph_s
    host, host_prov = _host(gpu.platform)
    # an extend's (and the drafter's injection's) kernels are issued by the host as they run
    eager_prefill = prefill_runs_eager(arch, gpu)
    host["launch_per_extend_s"] = float(f"{extend_issue_s(arch, gpu, eff, tp):.6e}")
    host["launch_per_inject_s"] = float(f"{extend_issue_s(draft, gpu, eff, tp):.6e}")
    how = (f"eager prefill ({'not CUDA' if gpu.platform != 'cuda' else 'SGLang turns the prefill graphs off for ' + arch.name}"
           f"; SGLang 0.5.23 cuda_graph_config.py default_prefill_backend, cuda_graph_hook.py): every kernel x "
           f"{per_kernel_issue * 1e6:.2f} us" if eager_prefill else
           f"breakable prefill graph (CUDA's default): per layer one segment replay "
           f"({eff.graph_launch_s * 1e6:.0f} us) + {eff.breakable_eager_kernels_per_layer} eager attention kernels x "
           f"{per_kernel_issue * 1e6:.2f} us")
    host_prov["host.launch_per_extend_s"] = f"host issue of one target extend forward (roofline.extend_issue_s): {how}"
    host_prov["host.launch_per_inject_s"] = f"the same for the drafter's prompt injection ({draft.num_layers} layer(s))"
    if not eager_prefill:
        # an extend the piecewise graph cannot take (prefill graphs off, more tokens than the largest
        # captured size) runs through SGLang's eager runner: every kernel issued from Python
        host["launch_per_extend_eager_s"] = float(f"{kernel_count(arch, eff, tp, gpu, 1024.0) * per_kernel_issue:.6e}")
        host["launch_per_inject_eager_s"] = float(f"{kernel_count(draft, eff, tp, gpu, 1024.0) * per_kernel_issue:.6e}")
        host_prov["host.launch_per_extend_eager_s"] = (
            f"host issue of one target extend forward run eagerly: {kernel_count(arch, eff, tp, gpu, 1024.0)} kernels x "
            f"{per_kernel_issue * 1e6:.2f} us; used for an extend the prefill graph cannot take "
            "(disable_prefill_cuda_graph, more tokens than cuda_graph_max_bs_prefill, or padded over 2x: SGLang 0.5.23 "
            "model_executor/model_runner.py forward_extend falls back to eager_runner.execute)")
        host_prov["host.launch_per_inject_eager_s"] = "the same for the drafter's prompt injection"
    # under DP attention (dp | tp) the attention projections split over tp / dp GPUs, not tp:
    # the extra bytes each GPU then holds (and every forward reads)
    wb_attn = weight_bytes_per_element(arch, par, routed=False)
    dp_attn_w = {d: float(round(wb_attn * arch.num_layers * (attention_params(arch, tp // d) - attention_params(arch, tp))))
                 for d in range(2, tp + 1) if tp % d == 0 and arch.num_heads % (tp // d) == 0}
    dp_attn_w = {d: b for d, b in dp_attn_w.items() if b > 0}
    name = name or f"{gpu.name.lower()}-{arch.name}-tp{tp}-{dtype}-analytic"
    # the drafter shares the target's embedding, and its LM head unless it has its own (draft_vocab)
    shared_tables = ((1 if arch.tie_word_embeddings else 2) - (1 if draft_vocab is not None else 0)
                     if draft_model is None else 0)   # a draft model's tables are its own
    kv_word = "fp8" if arch.kv_cache_bytes == 1 else "bf16"   # --kv-cache-dtype (ModelArch.kv_cache_bytes)
    draft_w_bytes = weights_bytes(draft, par) - draft.vocab_size * arch.hidden_size / tp * 2 * shared_tables
    # the vision tower is loaded beside the language model (bf16, its linears split over the
    # ranks: sim/analytic/vision.py); it shrinks the KV pool but never enters a forward's cost
    vision_bytes = BF16 * (arch.vision_params_sharded / tp + arch.vision_params_replicated)
    w_bytes = weights_bytes(arch, par) + draft_w_bytes + vision_bytes
    today = datetime.date.today().isoformat()
    eff_d = eff.model_dump()
    prov = {
        "method": (f"analytic roofline (sim/analytic/roofline.py), {today}: per operator max(FLOPs / (peak x "
                   f"efficiency), bytes / (bandwidth x efficiency)), summed, plus TP all-reduces and launch gaps"),
        "model": f"{arch.name}: {arch.source}" + (f"; assumed: {'; '.join(arch.assumptions)}" if arch.assumptions else ""),
        "gpu": f"{gpu.name}: {gpu.source.strip()}",
        "gpu.extend": ("prefill of x tokens at mean attended context c (mean prefix + half the extend), "
                       "requests assumed 1024 tokens long (LM-head rows and prefix reads only)"),
        "gpu.decode": "one decode forward: batch x, every request reads its c KV entries; graph-replayed",
        "gpu.verify": (f"the target's verify forward over {window} tokens per request" if new_schema else
                       f"one speculative cycle, window {window}: the drafter's forward "
                       f"({'over the whole window' if drafter == 'block' else 'one token'}) plus the target's "
                       f"verify forward over {window} tokens per request"),
        "gpu.draft_step": (("one draft-model forward by its tokens x (batch x tokens per request): "
                            + (f"a block of {window} tokens per request, each request reading its context once "
                               "(roofline.draft_forward)" if drafter == "block" else
                               "one token per request (a chain step), each reading its context once")
                            + "; gpu.draft_step_tokens_per_request says which, so a forward of other tokens per "
                              "request (a topk-wide draft step, the draft extend over the verified window) is its "
                              "token part at context 0 plus one KV read per request (sim/cost_model.py draft_s)")
                           if new_schema else
                           "one extra serial draft forward of one token per request (chain drafters)"),
        "gpu.eager_overhead_s": (f"GPU-bound eager extra: {kernels} kernels x {eff.eager_gpu_per_kernel_s * 1e6:.1f} us "
                                 f"(analytic.efficiency.eager_gpu_per_kernel_s)"),
        "gpu.eager_host_issue_s": (f"host-bound eager issue of one target forward: {kernels} kernels x "
                                   f"{per_kernel_issue * 1e6:.2f} us (analytic.efficiency.eager_launch_per_kernel_s "
                                   f"{eff.eager_launch_per_kernel_s * 1e6:.1f} us at 2.1 GHz, scaled to host_ghz "
                                   f"{eff.host_ghz:g}); a speculative cycle's is gpu.eager_spec_issue_s. SGLang runs a "
                                   f"decode batch above cuda_graph_max_bs eagerly (model_executor/model_runner.py "
                                   f"forward_decode when the graph runner cannot run it): every kernel is a launch "
                                   f"from Python, the GPU runs each as it arrives, and the host issuing them cannot do "
                                   f"the scheduler's work meanwhile, so the overlap scheduler no longer hides it"),
        "gpu.eager_spec_issue_s": (f"host-bound eager issue of one speculative cycle: the target's {kernels} kernels "
                                   f"plus one draft forward's (gpu.eager_draft_overhead_s); the verify's sampling and "
                                   f"acceptance kernels are not counted"),
        "gpu.eager_draft_overhead_s": "each further serial (chain) draft forward issued eagerly: its kernels x the eager issue per kernel",
        "gpu.draft_inject": "DSpark prefill injection: the drafter's forward over the prompt tokens",
        "gpu.eager_factor": (f"max(eager host issue, graph + eager overhead) / graph decode time at batch {graph_bs} (SGLang's default "
                             f"decode graph limit here) and 1K context; used only by profiles without eager_overhead_s"),
        "drafter": (f"the draft model {draft_model.name} ({draft_model.num_layers} layers, its own embedding and LM head; "
                    f"SGLang's STANDALONE drafter at the target's TP, speculative/standalone_worker_v2.py) ({drafter} drafter); "
                    "its weights count in hardware.weight_bytes" if draft_model is not None else
                    f"assumed: {draft_layers} target-shaped {'MoE' if draft.is_moe else 'dense'} decoder layer(s) on "
                    + ("the target's LM head" if draft_vocab is None else
                       f"its own LM head of {draft_vocab} rows (an EAGLE-3 head's draft_vocab_size: SGLang 0.5.23 "
                       f"models/llama_eagle3.py ParallelLMHead(config.draft_vocab_size); the draft extend's fc over "
                       f"three target layers' hidden states is not counted)")
                    + f" ({drafter} drafter); its weights count in hardware.weight_bytes"),
        **{f"analytic.efficiency.{k}": v for k, v in EFFICIENCY_SOURCES.items()},
        **{f"analytic.efficiency.{k}": f"{v:g}: {gpu.name}'s own (data/gpus.yaml): {gpu.efficiency_source}"
           for k, v in gpu.efficiency.items() if getattr(eff, k) == v},
        **({"gpu.attention_width": (f"padded_max: the attention gathers a dense copy of the KV (analytic.efficiency."
                                    f"kv_gather_passes {eff.kv_gather_passes}) over one width for the batch, the longest "
                                    f"request's context rounded up to {GATHER_WIDTH_BUCKET} (writer.GATHER_WIDTH_BUCKET: "
                                    f"runtime/engine.py, runtime/layers.py AttnBatch), over every padded graph row")}
           if eff.kv_gather_passes else {}),
        "hardware.kv_cell_bytes": f"KV bytes per token per rank, {kv_word} KV cache "
                                  "(SGLang pool_configurator.py _compute_cell_size)",
        "hardware.weight_bytes": "weights per rank: target (every expert) plus drafter layers, bf16 embeddings",
        "hardware.draft_weight_bytes": ("the drafter's part of hardware.weight_bytes (its layers, and its own "
                                        "embedding/LM head where it does not share the target's): SGLang loads it "
                                        "only when the server speculates, so a plain run's KV pool has it too "
                                        "(mem_cache/kv_cache_configurator.py _profile_available_bytes)"),
        "hardware.context_mib": (f"the GPU table's context_mib for {gpu.name} (sim/analytic/data/gpus.yaml): "
                                 f"{gpu.context_mib:g} MiB assumed taken before SGLang measures free memory (driver "
                                 "context, NCCL/RCCL buffers; kv_cache_configurator.py _profile_available_bytes), not measured"),
        **host_prov,
        **({"dtype": _fp4_provenance(dtype, gpu)} if dtype in FP4_BITS else {}),
    }
    full_cell, swa_cell = kv_pool_cell_bytes(arch, tp)
    target_cell = full_cell   # what a prefill rank sends per token (kv_transfer)
    if arch.sparse_attention:
        prov.update(_dsa_provenance(arch, tp, kv_word))
    draft_cell, prov["hardware.draft_kv_cell_bytes"] = drafter_kv_cell_bytes(arch, draft, tp, drafter,
                                                                             draft_model is not None)
    if dp_attn_w:
        prov["hardware.dp_attention_weight_bytes"] = (
            "per --dp-size d with --enable-dp-attention: attention projection weights one GPU holds beyond "
            "hardware.weight_bytes, split over the attention TP size tp / d instead of tp "
            "(roofline.attention_params(tp / d) - attention_params(tp), x layers; models/deepseek_v2.py, "
            "qwen3_moe.py num_heads // attn_tp_size; SGLang's llama.py splits by the whole TP size)")
    prov["kv_transfer.bytes_per_token"] = (
        "hardware.kv_cell_bytes: each prefill rank sends its own shard of a token's KV to its decode peer over its "
        "own link (disaggregation/mooncake, nixl: per-rank transfers); a drafter's KV is not counted")
    prov["kv_transfer.link_bytes_per_s"] = ("assumed: one 400 Gb/s RDMA NIC per GPU at 80 % (writer.KV_LINK_BYTES_PER_S); "
                                            "the GPU table has no inter-node link. Read only by prefill-decode scenarios")
    prov["kv_transfer.latency_s"] = "assumed 1 ms per transfer (writer.KV_LINK_LATENCY_S): bootstrap done earlier, completion poll"
    if vision_bytes:
        prov["hardware.weight_bytes"] = (
            f"{prov['hardware.weight_bytes']}; plus the vision tower, {vision_bytes / 2**30:.3f} GiB per rank "
            f"({arch.vision_family}: {arch.vision_params_sharded / 1e6:.0f}M parameters split over the TP ranks, "
            f"{arch.vision_params_replicated / 1e6:.0f}M whole on each, bf16; counted from vision_config, "
            f"sim/analytic/vision.py), which SGLang loads on every rank before it sizes the KV pool "
            f"(kv_cache_configurator.py _profile_available_bytes). It is not read by any forward: only the "
            f"language model decodes")
    vlm_hw: dict[str, Any] = {}
    if arch.multimodal:
        factor = vlm_mem_fraction_factor(arch.vision_layers, arch.vision_hidden)
        vlm_hw = {"vlm_mem_fraction_factor": factor}
        vit = ("no vision_config: unchanged" if arch.vision_layers is None else
               f"vision_config {arch.vision_layers} layers of {arch.vision_hidden}")
        prov["hardware.vlm_mem_fraction_factor"] = (
            f"{arch.architectures[0] if arch.architectures else arch.name} is served as multimodal (sglang 0.5.23 "
            f"configs/model_config.py multimodal_model_archs): SGLang scales its own mem_fraction_static by "
            f"{factor:g} ({vit}; arg_groups/memory_hook.py adjust_mem_fraction_for_vlm: 0.95 x clamp(1 - 0.1 x "
            f"(layers x hidden^2 / ({VIT_L_LAYERS} x {VIT_L_HIDDEN}^2) - 1), 0.8, 1.05)), takes SGLANG_VLM_CACHE_SIZE_MB (100 MiB) "
            f"from the KV budget (kv_cache_configurator.py mm_runtime_reservation_gb) and, but for the "
            f"architectures validated for it, captures no prefill graphs (cuda_graph_hook.py "
            f"disable_breakable_cudagraph_if_incompatible). The vision encoder's time is not priced")
    swa_hw: dict[str, Any] = {}
    if arch.swa_pool_layers:
        full_layers = arch.num_layers - arch.swa_pool_layers
        swa_hw = {"swa_kv_cell_bytes": float(swa_cell), "sliding_window": arch.sliding_window}
        prov["hardware.kv_cell_bytes"] = (
            f"KV bytes per token per rank of the full pool: the {full_layers} full-attention layers, {kv_word} KV cache. "
            f"{arch.name} runs SGLang's hybrid SWA pool (sglang 0.5.23 configs/model_config.py is_hybrid_swa_model, "
            + ("get_hybrid_layer_ids: Llama 4's every fourth layer global, the others chunked local attention)"
               if arch.attention_chunk_size else
               "get_hybrid_layer_ids: layer_types' full_attention / sliding_attention layers)"))
        prov["hardware.swa_kv_cell_bytes"] = (
            f"KV bytes per token per rank of the SWA pool: the {arch.swa_pool_layers} sliding-window layers "
            f"(model_executor/pool_configurator.py HybridSWAPoolConfigurator). sim/defaults.py sizes the full pool "
            f"as SGLang does: available bytes // (kv_cell_bytes + swa_full_tokens_ratio x swa_kv_cell_bytes), "
            f"page-aligned (_recompute_cell_size, calculate_pool_sizes), and the SWA pool as "
            f"int(full x swa_full_tokens_ratio), page-aligned (_solve_pool_sizes; ratio 0.8 by default, "
            f"arg_groups/fields/schedule.py)")
        prov["hardware.sliding_window"] = (
            f"the windowed layers' window, {arch.sliding_window} tokens (config.json sliding_window; "
            f"configs/model_config.py _get_sliding_window_size): server.sliding_window_size by default")
        if arch.attention_chunk_size:
            prov["hardware.sliding_window"] = (
                f"the local layers' attention_chunk_size, {arch.sliding_window} tokens, which SGLang takes as the "
                "SWA pool's window (model_runner_components/load_model_utils.py resolve_sliding_window_size): "
                "server.sliding_window_size by default. A local layer attends only its own chunk "
                "(layers/attention/local_attention.py; roofline.py kv_entries)")
    return {
        "name": name,
        "device": f"{tp}x {gpu.name} ({gpu.platform}), {arch.name} {dtype}, TP{tp}, analytic roofline",
        "description": (f"Analytic roofline profile of {arch.name} on {tp}x {gpu.name} ({dtype}); not a "
                        f"measurement. Efficiency factors are a priori defaults (analytic.efficiency); "
                        f"refit them from measurements with sim.analytic.writer.regenerate."),
        "provenance": prov,
        "gpu": {
            "extend": _grid(EXTEND_TOKENS, EXTEND_CONTEXTS, lambda x, c: extend(arch, gpu, par, eff, x, c).graph_s),
            "draft_inject": _grid(EXTEND_TOKENS, EXTEND_CONTEXTS, lambda x, c: extend(draft, gpu, par, eff, x, c).graph_s),
            "verify": _grid(BATCHES, CONTEXTS, ver),
            **({"verify_window": window, "verify_includes_draft": False} if new_schema else {}),
            "draft_step": _grid(DRAFT_TOKENS if new_schema else BATCHES, CONTEXTS, draft_step),
            **({"draft_step_tokens_per_request": window if drafter == "block" else 1}
               if "draft_step_tokens_per_request" in GpuProfile.model_fields else {}),
            "decode": _grid(BATCHES, CONTEXTS, lambda b, c: dec(b, c).graph_s),
            **({"eager_overhead_s": float(f"{eager_overhead:.6e}"),
                "eager_draft_overhead_s": float(f"{eager_draft_overhead:.6e}")} if new_schema else {}),
            **({"eager_host_issue_s": float(f"{eager_issue:.6e}")} if "eager_host_issue_s" in GpuProfile.model_fields else {}),
            **({"eager_spec_issue_s": float(f"{eager_issue + eager_draft_overhead:.6e}")}
               if "eager_spec_issue_s" in GpuProfile.model_fields else {}),
            "eager_factor": round(eager_factor, 4),
            **({"attention_width": "padded_max", "attention_bucket": GATHER_WIDTH_BUCKET} if eff.kv_gather_passes else {}),
        },
        "host": host,
        "hardware": {
            "platform": gpu.platform, "gpu": gpu.name, "tp_size": tp, "memory_mib": gpu.memory_mib,
            "context_mib": gpu.context_mib,
            "weight_bytes": float(round(w_bytes)), "draft_weight_bytes": float(round(draft_w_bytes)),
            "kv_cell_bytes": float(full_cell),
            "draft_kv_cell_bytes": float(draft_cell),
            **swa_hw, **vlm_hw, "context_len": arch.context_len, "mla": arch.is_mla, "num_kv_heads": arch.num_kv_heads,
            **({"dp_attention_weight_bytes": dp_attn_w} if dp_attn_w else {}),
            **({"architecture": arch.architectures[0]} if arch.architectures else {}),
        },
        "kv_transfer": {"bytes_per_token": float(target_cell), "link_bytes_per_s": KV_LINK_BYTES_PER_S,
                        "latency_s": KV_LINK_LATENCY_S},
        "analytic": {
            "model": arch.model_dump(exclude={k for k, default in (("swa_pool_layers", None), ("weight_format", None),
                                                                    ("kv_cache_quant_algo", None), ("dsa", False),
                                                                    ("fp8_weight_block", None),
                                                                    ("learnable_sink", False), ("multimodal", False),
                                                                    ("vision_layers", None), ("vision_hidden", None),
                                                                    ("vision_params_sharded", 0),
                                                                    ("vision_params_replicated", 0),
                                                                    ("vision_family", None), ("moe_layer_step", 1),
                                                                    ("dense_intermediate_size", None),
                                                                    ("attention_chunk_size", None),
                                                                    ("cross_attention_layers", 0),
                                                                    ("index_topk", None), ("index_n_heads", None),
                                                                    ("index_head_dim", None),
                                                                    ("index_shared_layers", 0))
                                              if getattr(arch, k) == default}),
            # a GPU's own efficiency factors only where the table has them (a rebuild reads them back)
            "gpu": gpu.model_dump(exclude={"gfx_arch"} | (set() if gpu.efficiency else {"efficiency", "efficiency_source"})
                                  | {k for k, default in (("pcie_only", False), ("p2p", True)) if getattr(gpu, k) == default}
                                  | (set() if dtype in FP4_BITS else {"fp4_tflops"})), "tp": tp, "dtype": dtype,
            "window": window, "drafter": drafter, "draft_layers": draft_layers,
            **({"draft_vocab": draft_vocab} if draft_vocab is not None else {}),
            **({"draft_model": draft_model.model_dump()} if draft_model is not None else {}), "efficiency": eff_d,
        },
    }


def vlm_mem_fraction_factor(vision_layers: int | None, vision_hidden: int | None) -> float:
    """What SGLang 0.5.23 multiplies a multimodal model's own mem_fraction_static by
    (arg_groups/memory_hook.py ``adjust_mem_fraction_for_vlm``): 0.95 x clamp(1 - 0.1 x
    (complexity - 1), 0.8, 1.05), complexity = the ViT's layers x hidden^2 over a ViT-L/14's
    (:data:`~sim.analytic.vision.VIT_L_LAYERS` x :data:`~sim.analytic.vision.VIT_L_HIDDEN`^2, 24 x 1024^2); 1 without a vision_config."""
    if vision_layers is None or vision_hidden is None:
        return 1.0
    ratio = vision_layers * vision_hidden**2 / (VIT_L_LAYERS * VIT_L_HIDDEN**2)
    return round(0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0))), 6)


def drafter_kv_cell_bytes(arch: ModelArch, draft: ModelArch, tp: int, drafter: str,
                          draft_model: bool) -> tuple[int, str]:
    """The drafter's KV bytes per token per rank that SGLang 0.5.23 adds to the target's pool
    when the server speculates (``hardware.draft_kv_cell_bytes``), and where the rule is from.

    A chain drafter (EAGLE/EAGLE3/MTP heads, a STANDALONE draft model): the target's per-layer
    cell times the draft's layers, ``int(cell x draft_layers / layers)``
    (model_executor/pool_configurator.py ``DefaultPoolConfigurator.__init__``, EAGLE/STANDALONE
    branch: "assumes the draft shares the target's per-layer KV size"; the draft layers are
    the head's ``num_nextn_predict_layers`` or the draft config's ``num_hidden_layers``,
    model_runner_components/spec_aux_hidden_state.py). A block drafter (DSpark/DFlash):
    the draft's own cell from its attention geometry, KV heads per rank x (head_dim +
    v_head_dim) x draft layers x element size (speculative/dflash_utils.py
    ``dflash_draft_cell_size_per_token``, summed by ``scale_kv_cell_size_per_token_for_dflash``);
    the assumed drafter has the target's layer shape, so an MLA target's draft stores the
    latent. A hybrid SWA target: the draft's layers are full-attention layers of the
    target's full-layer geometry (``HybridSWAPoolConfigurator``: ``_draft_full_layers_num`` x
    ``_full_per_token``, or ``_draft_cell_size``; an EAGLE head's config is not hybrid)."""
    full, _ = kv_pool_cell_bytes(arch, tp)
    per_layer_full = kv_cell_bytes(arch, tp) / arch.num_layers   # one layer of the target's (full) geometry
    who = (f"the draft model's {draft.num_layers} layers" if draft_model else f"the drafter's {draft.num_layers} layer(s)")
    if arch.swa_pool_layers:
        return int(per_layer_full * draft.num_layers), (
            f"{who} as full-attention layers of the target's geometry (pool_configurator.py HybridSWAPoolConfigurator: "
            "_draft_full_layers_num x _full_per_token, or the DFLASH _draft_cell_size); counted only when the "
            "scenario speculates")
    if arch.sparse_attention and drafter == "chain" and not draft_model:
        # pool_configurator.py DefaultPoolConfigurator.__init__, DSA branch: the latent part scaled by
        # the draft's layers, plus the draft's indexer keys on every draft layer (allocate_all_layers)
        return int(kv_cell_bytes(arch, tp) * draft.num_layers / arch.num_layers) + int(
            indexer_cell_bytes(arch, draft.num_layers)), (
            f"{who}: the target's per-layer latent cell x {draft.num_layers} plus the draft's DSA indexer keys on "
            "each of its layers (pool_configurator.py DefaultPoolConfigurator, DSA branch: int(target_kv_size x "
            "draft layers / layers) + _compute_dsa_indexer_cell_size(allocate_all_layers=True)); counted only "
            "when the scenario speculates")
    if drafter == "chain" or draft_model:
        return int(full * draft.num_layers / arch.num_layers), (
            f"{who}: the target's per-layer cell x {draft.num_layers} (pool_configurator.py DefaultPoolConfigurator, "
            "EAGLE/STANDALONE branch: int(cell x draft layers / layers)); counted only when the scenario speculates")
    return int(kv_cell_bytes(draft, tp)), (
        f"{who} by its own attention geometry, KV heads per rank x (head_dim + v_head_dim) x layers x element size "
        "(speculative/dflash_utils.py dflash_draft_cell_size_per_token, added by pool_configurator.py's DFLASH branch); "
        "counted only when the scenario speculates")


def _dsa_provenance(arch: ModelArch, tp: int, kv_word: str) -> dict[str, str]:
    """Provenance lines of a DeepSeek sparse attention model's profile (``arch.index_topk``):
    the mechanism priced (roofline.py ``forward_cost``, ``indexer_s``) and the pool cell."""
    n, d, k = arch.index_n_heads, arch.index_head_dim, arch.index_topk
    per_layer = indexer_cell_bytes(arch, 1)
    shared = (f"; {arch.index_shared_layers} layer(s) reuse the previous top-k (configs/model_config.py "
              "dsa_layer_skips_topk): no indexer, no index keys (kv_cache_configurator.py _should_elide_dsa_index_k)"
              if arch.index_shared_layers else "")
    return {
        "dsa.attention": (
            f"DeepSeek sparse attention (index_topk {k}): each query's MLA attention reads only the {k} entries its "
            f"lightning indexer selects, all of them at a shorter context (SGLang 0.5.23 layers/attention/dsa_backend.py "
            f"forward_extend / forward_decode read topk_indices; dsa/dsa_indexer.py topk_transform). Decode, verify and "
            f"draft forwards: the absorbed MLA over min(context, {k}) entries, FLOPs and KV reads, so flat in context "
            f"past {k}; an extend whose requests exceed {DSA_DENSE_PREFILL_KV_LEN} tokens likewise (the sparse MLA "
            f"kernel in the absorbed form), a shorter one dense MHA as before (dsa_backend.py set_dsa_prefill_impl, "
            f"SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD {DSA_DENSE_PREFILL_KV_LEN}). Assumed: the queries of one "
            f"request (a verify window, an extend chunk) read their top-k sets' union at the cost of one set "
            f"(neighbouring queries select mostly the same positions; served from L2)"),
        "dsa.indexer": (
            f"the lightning indexer on {arch.indexer_layers} of {arch.num_layers} layers{shared}: per new token, "
            f"2 x {n} heads x {d} = {2 * n * d} FLOPs per attended position in fp8 (fp8 peak x analytic.efficiency."
            f"attention), and each request's {per_layer:g} index-key bytes per cached position and layer ({d} fp8 + "
            f"4 bytes of scale per 128) read at the attention's bandwidth; "
            f"max(compute, memory), added to the attention's time: separate kernels before it (dsa_indexer.py "
            f"Indexer.forward_cuda: fp8_paged_mqa_logits / fp8_mqa_logits, then topk_transform). Its heads are "
            f"whole on every rank (ReplicatedLinear wq_b), so it does not shrink with TP. A plain extend of requests "
            f"no longer than {k} skips the scoring (_should_skip_logits_computation); a CUDA decode scores at every "
            f"context. Its projections (wq_b, wk, weights_proj: {indexer_params(arch) * arch.num_layers / 1e6:.0f}M "
            f"parameters per rank, replicated) count in the linears and hardware.weight_bytes. Not counted: the fp32 "
            f"logits' write and read (8 bytes per query and position), the indexer's kernel launches"),
        "hardware.kv_cell_bytes": (
            f"KV bytes per token per rank, {kv_word} KV cache (SGLang pool_configurator.py _compute_cell_size): the "
            f"MLA latent, {kv_cell_bytes(arch, tp):g}, plus the DSA indexer's keys, {per_layer:g} bytes x "
            f"{arch.indexer_layers} layers = {indexer_cell_bytes(arch):g} (_compute_dsa_indexer_cell_size: index_head_dim "
            f"+ index_head_dim // 128 x 4, uint8, whatever the KV dtype)"),
    }


def _fp4_provenance(dtype: str, gpu: GpuSpec) -> str:
    """How a 4-bit format is priced (bytes by module, GEMM rate on ``gpu``)."""
    covers = "every decoder linear and routed expert" if FP4_LINEARS[dtype] else "the routed experts only"
    if dtype == "int4":
        return (f"int4 weights (AWQ/GPTQ w4a16) at {FP4_BITS[dtype]:g} bits each (4-bit values plus a 4-bit zero point "
                "and a 16-bit scale per 128 input rows; roofline.FP4_BITS) on every decoder linear and routed expert "
                "(SGLang 0.5.23 layers/quantization/awq/awq.py, gptq/gptq.py); embeddings, LM head, activations and "
                f"the KV cache bf16. The kernel dequantizes to bf16: those GEMMs at the bf16 peak ({gpu.bf16_tflops:g} "
                "TFLOP/s); decode is bandwidth-bound, so the bytes matter first")
    rate = (f"{gpu.name} multiplies FP4 natively, but SGLang's default mxfp4 MoE runner quantizes the activations "
            "to mxfp8 (flashinfer_mxfp4_moe_precision default; layers/moe/moe_runner/flashinfer_trtllm.py), and fp8 "
            f"by fp4 runs at the FP8 rate: those GEMMs at its FP8 peak ({gpu.fp8_tflops or gpu.bf16_tflops:g} TFLOP/s)"
            if gpu.fp4_tflops and dtype == "mxfp4" and gpu.platform == "cuda" else
            f"{gpu.name} multiplies FP4 natively: those GEMMs at its FP4 peak ({gpu.fp4_tflops:g} TFLOP/s)"
            if gpu.fp4_tflops else
            f"{gpu.name} has no FP4 tensor cores: the kernel dequantizes the 4-bit weights to bf16 and those "
            f"GEMMs run at the bf16 peak ({gpu.bf16_tflops:g} TFLOP/s)")
    return (f"{dtype} weights at {FP4_BITS[dtype]:g} bits each (4-bit values plus their block scales; "
            f"roofline.FP4_BITS) on {covers} (roofline.FP4_LINEARS, SGLang 0.5.23 layers/quantization/"
            f"{'mxfp4.py' if dtype == 'mxfp4' else 'modelopt_quant.py'}); other weights, activations and the KV cache "
            f"bf16. {rate}; decode is bandwidth-bound, so the bytes matter first")


EDITABLE_BLOCKS = ("gpu", "host")
"""Blocks of an analytic profile whose values a user or a calibration may change after the
writer made them (a grid scaled by ``specsched calibrate --from``, a host block measured on
the serving machine): :func:`regenerate` keeps such changes (:func:`carry_edits`)."""
EDIT_RTOL = 1e-6
"""Relative difference above which an input value counts as changed from the writer's (the
writer rounds every figure to 7 significant digits)."""


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a != b
    return abs(a - b) > EDIT_RTOL * max(abs(a), abs(b))


def _moved(edited: Any, base: Any, new: Any) -> tuple[Any, bool]:
    """(value, whether the input's edit was kept): ``new`` where the input equals the writer's
    ``base``; else the input moved by the writer's change (``edited x new / base``, per cell of a
    grid of the same shape; the input unchanged where ``base`` is 0 or not comparable)."""
    if isinstance(edited, dict) and isinstance(base, dict) and isinstance(new, dict) and "seconds" in base:
        if (edited.get("x") != base.get("x") or edited.get("context_len") != base.get("context_len")
                or not isinstance(edited.get("seconds"), list)):
            return edited, True

        def rows(e: Any, b: Any, n: Any) -> tuple[Any, bool]:
            if isinstance(b, list):
                if not isinstance(e, list) or len(e) != len(b):
                    return e, True
                out = [rows(x, y, z) for x, y, z in zip(e, b, n, strict=True)]
                return [v for v, _ in out], any(k for _, k in out)
            return _moved(e, b, n)

        secs, kept = rows(edited["seconds"], base["seconds"], new["seconds"])
        return ({**new, "seconds": secs} if kept else new), kept
    if not _differs(edited, base):
        return new, False
    if (isinstance(edited, (int, float)) and isinstance(base, (int, float)) and isinstance(new, (int, float))
            and not isinstance(edited, bool) and base):
        return edited * new / base, True
    return edited, True


def carry_edits(profile: Profile, base: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``new`` (the writer's profile at the changed efficiency) with the changes ``profile``
    made to the writer's values kept, and the dotted keys so kept.

    Within :data:`EDITABLE_BLOCKS`, a value of ``profile`` that equals the writer's at its own
    efficiency (``base``) takes ``new``'s; one that differs keeps its ratio to the writer's
    (a grid scaled x1.3 by a calibration stays x1.3 of the rebuilt grid; a measured host term
    moves only as far as the writer's own term moves); a key the writer does not write (a
    measured host's idle leads, ``gpu.attention_padding_cost``) is kept as it is. Without
    this, refitting an efficiency factor (``specsched calibrate --from --params
    analytic.efficiency.*``) rebuilt the profile from its inputs alone and silently replaced a
    measured or previously calibrated host block with ``host.yaml``'s assumptions."""
    out = {**new}
    kept: list[str] = []
    src = profile.model_dump(mode="json", exclude_none=True)
    own = profile.model_dump(mode="json", exclude_defaults=True)   # set by someone, not the schema's default
    for block in EDITABLE_BLOCKS:
        mine, b, n = src.get(block) or {}, base.get(block) or {}, new.get(block) or {}
        merged = {**n}
        for k, v in mine.items():
            if k not in b:
                if k not in n and k in (own.get(block) or {}):
                    merged[k] = v   # what the writer never writes: the user's
                    kept.append(f"{block}.{k}")
                continue
            merged[k], was = _moved(v, b[k], n.get(k, b[k]))
            if was:
                kept.append(f"{block}.{k}")
        out[block] = merged
    return out, kept


def regenerate(profile: Profile, **efficiency: float) -> dict[str, Any]:
    """Rebuild an analytic profile with some efficiency factors changed (what a calibration
    step calls after fitting them), keeping every other input, and every change made to its
    ``gpu`` and ``host`` values since the writer made them (:func:`carry_edits`; named in
    ``provenance.regenerate``).

    Raises:
        ConfigError: the profile was not written by the analytic writer, or a factor is
            unknown or out of range.
    """
    a = profile.analytic
    if not a:
        raise ConfigError(profile.path or profile.name, "analytic", "<missing>", "not an analytic profile")
    unknown = set(efficiency) - set(Efficiency.model_fields)
    if unknown:
        raise ConfigError(profile.path or profile.name, "analytic.efficiency", sorted(unknown)[0],
                          f"allowed: {', '.join(Efficiency.model_fields)}")
    eff0 = Efficiency.model_validate(a["efficiency"])
    eff = Efficiency.model_validate({**a["efficiency"], **efficiency})

    def build(e: Efficiency) -> dict[str, Any]:
        return build_profile(ModelArch.model_validate(a["model"]), GpuSpec.model_validate(a["gpu"]), a["tp"], a["dtype"],
                             window=a["window"], drafter=a["drafter"], draft_layers=a["draft_layers"], eff=e,
                             name=profile.name, draft_vocab=a.get("draft_vocab"),
                             draft_model=ModelArch.model_validate(a["draft_model"]) if a.get("draft_model") else None)

    new = build(eff)
    out, kept = carry_edits(profile, new if eff == eff0 else build(eff0), new)
    if kept:
        shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
        out["provenance"] = {**out.get("provenance", {}), "regenerate": (
            f"rebuilt from analytic inputs; the input profile's own values of {shown} kept, "
            "each moved by the ratio the rebuild moved the writer's value by")}
    return out
