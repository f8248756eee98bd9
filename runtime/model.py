"""A Llama-style decoder proxy with a paged KV cache, the forwards an SGLang-style scheduler
issues (extend, decode, verify), a block drafter and the speculative cycle.

Why a proxy: the runtime measures what the *scheduler* does to TTFT/TPOT (host waits,
overlap, admission), so the forward only needs the right shape of work: per-token
weight reads and FLOPs that scale with the batch's tokens, attention that scales with
context, a KV cache addressed the way SGLang addresses it, and no host syncs except the
ones the loop issues on purpose. Weights are random (seeded, nothing downloaded), so real
acceptance is ~0; :meth:`ModelRunner.spec_cycle` therefore takes ``forced_accept`` (SGLang's
SGLANG_SIMULATE_ACC_LEN): every draft/verify kernel still runs, only the committed count
is forced.

Layout and attention are described where they live: the paged KV cache and its pools in
:mod:`runtime.kv_cache`, the two attention paths that must agree (paged and dense,
tests/test_runtime_model.py) in :mod:`runtime.layers`.

Cost honesty: the gather reads and writes the context KV once more than a paged kernel
(FlashInfer/FA3 read it in place), so long-context, large-batch steps cost more than in
SGLang (8b, batch 64, 4K context on an H200: ~19 ms of a 51 ms cycle is the gather);
batch-1 steps are dominated by weight reads and kernel count instead. Attention also runs
over the padded context bucket ``C``. Measured numbers: see :data:`PRESETS`.

Model-size presets: :data:`PRESETS` (see its docstring for the per-verify estimates).

This module gathers the public names of the pieces, one concept each:
:mod:`runtime.model_config` (shapes, presets, roofline estimate), :mod:`runtime.layers`
(layers, attention, :class:`LlamaProxy`), :mod:`runtime.kv_cache` (KV buffers and pools),
:mod:`runtime.runner` (requests, extend, inject, graphs) and :mod:`runtime.spec_cycle`
(decode, verify, the speculative cycle).
"""

from __future__ import annotations

from specsched.runtime.kv_cache import (
    CTX_ALIGN,
    PAD_ROW,
    PAD_SLOT,
    KVBuffers,
    PoolExhausted,
    ReqToTokenPool,
    expand_slots,
)
from specsched.runtime.layers import (
    AttnBatch,
    AttnImpl,
    DecoderLayer,
    LlamaProxy,
    RMSNorm,
    apply_rope,
    paged_attention,
    position_mask,
    rope_cos_sin,
)
from specsched.runtime.model_config import PRESETS, ModelConfig, draft_preset, verify_cycle_cost
from specsched.runtime.runner import ExtendOut, ModelRunner, RaggedBatch, default_ctx_buckets
from specsched.runtime.spec_cycle import SpecCycle, StepOut, VerifyOut

__all__ = [
    "CTX_ALIGN", "PAD_ROW", "PAD_SLOT", "PRESETS", "AttnBatch", "AttnImpl", "DecoderLayer", "ExtendOut",
    "KVBuffers", "LlamaProxy", "ModelConfig", "ModelRunner", "PoolExhausted", "RMSNorm", "RaggedBatch",
    "ReqToTokenPool", "SpecCycle", "StepOut", "VerifyOut", "apply_rope", "default_ctx_buckets", "draft_preset",
    "expand_slots", "paged_attention", "position_mask", "rope_cos_sin", "verify_cycle_cost",
]
