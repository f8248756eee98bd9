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

Layout (SGLang names, mem_cache/memory_pool.py and allocator.py):

- :class:`ReqToTokenPool`: ``req_to_token[row, position] -> KV slot`` (ReqToTokenPool),
  the free-slot list on the device (TokenToKVPoolAllocator, page_size 1), and per-row
  device state the overlap loop relays without the host (FutureMap,
  managers/overlap_utils.py): committed length ``seq_lens``, last sampled token
  ``last_token``, and the previous verify window for the drafter's KV catch-up.
  Row 0 and slot 0 are reserved padding (graph replays pad the batch with row 0).
- :class:`KVBuffers`: ``k, v[layer, slot, kv_head, head_dim]`` for one model
  (MHATokenToKVPool); the target and the drafter each have one, sharing the slot mapping
  (SGLang's draft worker shares req_to_token_pool, owns its token_to_kv_pool).

Attention has two paths that must agree (tests/test_runtime_model.py):

- paged (:func:`paged_attention`): gather the request's slots ``req_to_token[rows, :C]``,
  then SDPA (``attn_impl="sdpa"``) or an explicit float32 softmax (``"explicit"``) with a
  position mask; GQA folds the query heads sharing a KV head into the query axis, so KV is
  never expanded. Shapes are static given (batch, C), hence graphable.
- dense (:meth:`LlamaProxy.forward_dense`): a plain causal forward over a whole sequence,
  no cache: the reference.

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
