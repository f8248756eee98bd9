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
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from specsched.runtime.device import Device, default_bs_buckets, pick_bucket
from torch import nn

PAD_ROW = 0
PAD_SLOT = 0
CTX_ALIGN = 64
"""Attention context widths are multiples of this (aligned strides for the fused SDPA
kernels, e.g. cuDNN's on H200)."""


def _round_up(n: int, k: int = CTX_ALIGN) -> int:
    return -(-n // k) * k
AttnImpl = Literal["sdpa", "explicit"]


# ------------------------------------------------------------------------------ configs
@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Shape of a Llama-style decoder (RMSNorm, RoPE, GQA attention, SwiGLU MLP).

    Attributes:
        num_layers: decoder layers.
        hidden_size: model width.
        num_heads: query heads.
        num_kv_heads: key/value heads (GQA; divides ``num_heads``).
        intermediate_size: SwiGLU width.
        vocab_size: tokens (embedding rows; untied LM head).
        head_dim: per-head width (0: ``hidden_size // num_heads``).
        rope_theta: RoPE base.
        rms_norm_eps: RMSNorm epsilon.
        name: preset name (informational).

    Raises:
        ValueError: non-positive sizes, heads not dividing, odd head_dim.
    """

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    head_dim: int = 0
    rope_theta: float = 500_000.0
    rms_norm_eps: float = 1e-5
    name: str = ""

    def __post_init__(self) -> None:
        for k in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "intermediate_size", "vocab_size"):
            if getattr(self, k) < 1:
                raise ValueError(f"ModelConfig.{k} must be >= 1, got {getattr(self, k)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads {self.num_kv_heads} must divide num_heads {self.num_heads}")
        if self.head_dim == 0:
            if self.hidden_size % self.num_heads:
                raise ValueError(f"num_heads {self.num_heads} must divide hidden_size {self.hidden_size} (or give head_dim)")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def layer_matmul_params(self) -> int:
        """Weights one layer multiplies per token (q, k, v, o, gate, up, down)."""
        h, d = self.hidden_size, self.head_dim
        attn = h * self.num_heads * d * 2 + h * self.num_kv_heads * d * 2
        return attn + 3 * h * self.intermediate_size

    @property
    def matmul_params(self) -> int:
        """Weights multiplied per token: all layers plus the LM head."""
        return self.num_layers * self.layer_matmul_params + self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """All parameters (matmul weights, embedding table, norms)."""
        norms = (2 * self.num_layers + 1) * self.hidden_size
        return self.matmul_params + self.vocab_size * self.hidden_size + norms

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV cache bytes per token (all layers, K and V)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    def forward_cost(self, num_tokens: int, context: int, batch: int = 1, dtype_bytes: int = 2) -> tuple[float, float]:
        """Estimated (FLOPs, bytes moved) of one forward.

        FLOPs = 2 x matmul_params x tokens + 4 x layers x heads x head_dim x context x
        tokens (QK^T and PV). Bytes = matmul weights once + the batch's context KV once
        (a paged kernel's traffic; this proxy's gather adds ~2x the KV term).
        """
        flops = 2.0 * self.matmul_params * num_tokens
        flops += 4.0 * self.num_layers * self.num_heads * self.head_dim * context * num_tokens
        nbytes = float(self.matmul_params * dtype_bytes) + batch * context * self.kv_bytes_per_token(dtype_bytes)
        return flops, nbytes


def verify_cycle_cost(
    target: ModelConfig,
    drafter: ModelConfig | None,
    batch: int,
    window: int,
    context: int,
    *,
    dtype_bytes: int = 2,
    peak_flops: float = 7.9e14,
    peak_bytes_per_s: float = 4.3e12,
) -> dict[str, float]:
    """Roofline estimate of one speculative cycle (draft forward + target verify).

    The draft forward carries 2 x window positions per request (the previous window's
    KV catch-up plus the new block, see :meth:`ModelRunner.spec_cycle`); the verify carries
    ``window``. Defaults are an H200's measured bf16 matmul rate (~790 TFLOP/s) and copy
    bandwidth (~4.3 TB/s) from the device notes.

    Returns:
        ``flops``, ``bytes``, ``est_ms`` (sum over the two forwards of max(compute, memory)),
        ``target_ms``, ``draft_ms``.
    """
    tf, tb = target.forward_cost(batch * window, context, batch, dtype_bytes)
    t_ms = 1e3 * max(tf / peak_flops, tb / peak_bytes_per_s)
    df = db = d_ms = 0.0
    if drafter is not None:
        df, db = drafter.forward_cost(batch * 2 * window, context, batch, dtype_bytes)
        d_ms = 1e3 * max(df / peak_flops, db / peak_bytes_per_s)
    return {"flops": tf + df, "bytes": tb + db, "est_ms": t_ms + d_ms, "target_ms": t_ms, "draft_ms": d_ms}


_LLAMA_VOCAB = 128_256

PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(2, 64, 4, 2, 128, 256, name="tiny"),
    "tiny-draft": ModelConfig(1, 64, 4, 2, 128, 256, name="tiny-draft"),
    "small": ModelConfig(4, 256, 8, 2, 512, 2048, name="small"),
    "small-draft": ModelConfig(1, 256, 8, 2, 512, 2048, name="small-draft"),
    "1b": ModelConfig(16, 2048, 32, 8, 8192, _LLAMA_VOCAB, name="1b"),
    "1b-draft": ModelConfig(2, 2048, 32, 8, 8192, _LLAMA_VOCAB, name="1b-draft"),
    "8b": ModelConfig(32, 4096, 32, 8, 14336, _LLAMA_VOCAB, name="8b"),
    "8b-draft": ModelConfig(2, 4096, 32, 8, 14336, _LLAMA_VOCAB, name="8b-draft"),
}
"""Model-size presets, target and drafter pairs (``name`` and ``name + "-draft"``).

- ``tiny`` (~0.1 M params, 2 layers, width 64, vocab 256): CPU tests, float32.
- ``small`` (~3 M): CPU smoke runs of the engine.
- ``1b`` (Llama-3.2-1B shape: 16 layers, width 2048, 32 heads, 8 KV heads, SwiGLU 8192,
  vocab 128256; 1.24 G matmul params, 1.50 G with the untied embedding).
- ``8b`` (Llama-3.1-8B shape: 32 layers, width 4096, 32/8 heads, SwiGLU 14336; 7.5 G
  matmul params, 8.0 G in all). KV: 128 KiB per token in bf16, so 256 x 4K tokens need
  128 GiB: size the pool for the cell (an H200 holds ~0.9 M tokens beside the weights).
- Drafters (``-draft``): 2 layers of the target's width, same vocab.

Estimate (:func:`verify_cycle_cost`; roofline at 790 TFLOP/s bf16 and 4.3 TB/s), one
cycle = drafter forward over 2 x W positions + target verify over W, W = 8, context 4K:
``8b`` batch 1: 15.0 GB of weights + 0.5 GB KV, 0.12 TFLOP -> 4.1 ms, memory-bound;
batch 64: 7.7 TFLOP + 34 GB KV -> 14 ms. ``1b`` batch 1: 0.8 ms.

Measured on one H200 (torch 2.11 + CUDA 13, bf16, graphs, context 4096, W = 8, forced
accept 2; :mod:`runtime.microbench`), ms per step:

    preset  batch  spec cycle        decode
    1b      1      3.7 (eager 13.3)  3.1
    8b      1      11.3 (eager 21.0) 9.6
    8b      8      13.9
    8b      32     28.2
    8b      64     51.1              36.2

So ``8b`` is the stand-in for the reference cells (MI355X, big MoE, TP4: 9.2 ms per
verify cycle at batch 1, 15 / 24 / 33 ms at batch 8 / 32 / 64), ``1b`` for host-bound
arms. Where the gap to the roofline goes (profiled): at batch 1 the weight GEMVs take
~4 ms, cuDNN's flash SDPA ~90 us per layer (no split-KV for a handful of queries over 4K
keys) and ~40 small kernels per layer the rest; at batch 64 the KV gather of the paged
path takes ~19 ms of the 51 (a paged kernel reading the cache in place would remove it).
"""


def draft_preset(name: str) -> str:
    """Name of the drafter preset paired with target preset ``name``.

    Raises:
        KeyError: no such pair.
    """
    d = f"{name}-draft"
    if name not in PRESETS or d not in PRESETS:
        raise KeyError(f"no drafter preset for {name!r}; presets: {sorted(PRESETS)}")
    return d


# ------------------------------------------------------------------------------ layers
class RMSNorm(nn.Module):
    """RMSNorm (``F.rms_norm``, a fused kernel on recent CUDA builds; SGLang uses a fused
    RMSNorm too: layers/layernorm.py)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables for a forward's tokens, computed once and shared by all layers.

    Args:
        positions: ``[T]`` int64 token positions (any value; -1 for padding is fine).
        inv_freq: ``[head_dim // 2]`` float32.

    Returns:
        ``(cos, sin)``, each ``[T, 1, head_dim // 2]`` float32.
    """
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    return freqs.cos()[:, None, :], freqs.sin()[:, None, :]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (Llama's rotate-half convention), computed in float32.

    Args:
        x: ``[T, heads, head_dim]``.
        cos, sin: from :func:`rope_cos_sin`.

    Returns:
        ``[T, heads, head_dim]`` in ``x``'s dtype.
    """
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class DecoderLayer(nn.Module):
    """One pre-norm Llama layer: RMSNorm -> GQA attention -> residual -> RMSNorm -> SwiGLU.

    Q/K/V and gate/up are fused matmuls, as SGLang's QKVParallelLinear and
    MergedColumnParallelLinear (layers/linear.py): fewer, larger kernels.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.input_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.qkv_proj = nn.Linear(h, (cfg.num_heads + 2 * cfg.num_kv_heads) * d, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * d, h, bias=False)
        self.post_attention_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.gate_up_proj = nn.Linear(h, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, h, bias=False)
        self._split = (cfg.num_heads * d, cfg.num_kv_heads * d, cfg.num_kv_heads * d)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Projections of ``x`` (``[T, hidden]``): q ``[T, heads, D]`` and k ``[T, kv_heads, D]``
        after RoPE, v ``[T, kv_heads, D]``."""
        t = x.shape[0]
        q, k, v = self.qkv_proj(x).split(self._split, dim=-1)
        q = apply_rope(q.reshape(t, cfg.num_heads, cfg.head_dim), cos, sin)
        k = apply_rope(k.reshape(t, cfg.num_kv_heads, cfg.head_dim), cos, sin)
        return q, k, v.reshape(t, cfg.num_kv_heads, cfg.head_dim)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


@dataclass(slots=True)
class AttnBatch:
    """Paged-attention metadata of one forward, built once and shared by all layers.

    The forward's T tokens belong to B requests; queries are laid out padded as
    ``[B, Q]`` (Q = most tokens of any request in the forward).

    Attributes:
        slots: ``[B, C]`` int64 KV slots of positions ``0..C-1`` of each request
            (``req_to_token[rows, :C]``); C is the context bucket (static under graphs).
        mask: ``[B, 1, Q, C]`` bool, True where query (b, q) may attend key position c:
            ``c <= position(b, q)``, plus ``c == 0`` so padded queries never see an empty
            row (their output is discarded).
        out_loc: ``[T]`` int64 slot each new token's K/V is written to.
        q_index: ``[B * Q]`` int64 flat token index of each padded query (T = padding),
            or None when the layout is uniform (T == B * Q, request-major).
        tok_index: ``[T]`` int64 padded index of each token, or None when uniform.
        batch: B.
        q_len: Q.
    """

    slots: torch.Tensor
    mask: torch.Tensor
    out_loc: torch.Tensor
    q_index: torch.Tensor | None
    tok_index: torch.Tensor | None
    batch: int
    q_len: int
    _folded: dict[int, torch.Tensor] = field(default_factory=dict)

    def folded_mask(self, rep: int) -> torch.Tensor:
        """The mask for GQA-folded queries (``[B, 1, rep * Q, C]``), built once per
        forward and reused by every layer."""
        m = self._folded.get(rep)
        if m is None:
            b, _, qn, c = self.mask.shape
            m = self.mask if rep == 1 else self.mask[:, :, None].expand(b, 1, rep, qn, c).reshape(b, 1, rep * qn, c)
            self._folded[rep] = m
        return m


def position_mask(q_pos: torch.Tensor, context: int) -> torch.Tensor:
    """``[B, 1, Q, C]`` bool mask: key position c visible to query (b, q) iff
    ``c <= q_pos[b, q]`` or ``c == 0``. ``q_pos``: ``[B, Q]`` int64 (-1 = padding)."""
    kp = torch.arange(context, device=q_pos.device)
    return ((kp[None, None, :] <= q_pos[:, :, None]) | (kp == 0)[None, None, :]).unsqueeze(1)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, impl: AttnImpl) -> torch.Tensor:
    """Masked attention. q ``[B, h, Q, D]``, k/v ``[B, h, C, D]``, mask ``[B, 1, Q, C]``."""
    if impl == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if impl == "explicit":
        scale = 1.0 / math.sqrt(q.shape[-1])
        s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
        s = s.masked_fill(~mask, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v.float()).to(q.dtype)
    raise ValueError(f"attn_impl must be 'sdpa' or 'explicit', got {impl!r}")


def paged_attention(
    q: torch.Tensor, k_ctx: torch.Tensor, v_ctx: torch.Tensor, attn: AttnBatch, impl: AttnImpl = "sdpa"
) -> torch.Tensor:
    """Attention of a forward's queries over gathered paged context.

    GQA without expanding KV: the ``rep = heads / kv_heads`` query heads that share a KV
    head are folded into the query axis (``[B, kv_heads, rep * Q, D]``).

    Args:
        q: ``[T, heads, head_dim]`` queries (after RoPE).
        k_ctx, v_ctx: ``[B, C, kv_heads, head_dim]`` gathered context (this forward's own
            K/V already written into the cache, so they are included).
        attn: the forward's :class:`AttnBatch`.
        impl: ``"sdpa"`` (torch SDPA) or ``"explicit"`` (float32 softmax; O(heads x Q x C)
            memory, a reference).

    Returns:
        ``[T, heads * head_dim]`` in q's dtype.
    """
    b, qn = attn.batch, attn.q_len
    _, h, d = q.shape
    hkv = k_ctx.shape[2]
    rep = h // hkv
    if attn.q_index is None:
        qp = q.view(b, qn, h, d)
    else:
        qp = torch.cat([q, q.new_zeros(1, h, d)])[attn.q_index].view(b, qn, h, d)
    qf = qp.view(b, qn, hkv, rep, d).permute(0, 2, 3, 1, 4).reshape(b, hkv, rep * qn, d)
    kf = k_ctx.permute(0, 2, 1, 3)
    vf = v_ctx.permute(0, 2, 1, 3)
    out = _attend(qf, kf, vf, attn.folded_mask(rep), impl)  # [B, hkv, rep*Q, D]
    out = out.view(b, hkv, rep, qn, d).permute(0, 3, 1, 2, 4).reshape(b * qn, h * d)
    if attn.tok_index is not None:
        out = out[attn.tok_index]
    return out


class KVBuffers:
    """One model's KV cache: ``k, v[layer, slot, kv_head, head_dim]`` (SGLang's
    MHATokenToKVPool, mem_cache/memory_pool.py). Slot 0 is the padding slot.

    Args:
        cfg: the model's config.
        num_slots: token slots (incl. the padding slot).
        device: torch device.
        dtype: cache dtype (the model's).
    """

    def __init__(self, cfg: ModelConfig, num_slots: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.num_layers, num_slots, cfg.num_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes held (K and V)."""
        return 2 * self.k.numel() * self.k.element_size()

    def write(self, layer: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k, v`` (``[T, kv_heads, head_dim]``) at slots ``loc`` (``[T]`` int64)."""
        self.k[layer][loc] = k
        self.v[layer][loc] = v

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V at ``slots`` (``[B, C]``): two ``[B, C, kv_heads, head_dim]`` tensors."""
        return self.k[layer][slots], self.v[layer][slots]


# ------------------------------------------------------------------------------- model
class LlamaProxy(nn.Module):
    """A Llama-style decoder with random weights, run over a paged KV cache.

    Weights: linear ``N(0, 1/fan_in)``, embedding ``N(0, 1)``, norms 1; drawn on the
    target device from ``torch.Generator(device).manual_seed(seed)`` (no downloads, fast
    for the 8B preset). Same seed and device give the same weights.

    Args:
        cfg: the shape (see :data:`PRESETS`).
        seed: weight seed.
        device: torch device (default CPU).
        dtype: parameter dtype (default float32; the runtime uses ``Device.dtype``:
            bf16 on GPU).

    Attributes:
        attn_impl: ``"sdpa"`` or ``"explicit"`` for the paged path.
    """

    def __init__(
        self,
        cfg: ModelConfig,
        *,
        seed: int = 0,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.attn_impl: AttnImpl = "sdpa"
        dev = torch.device(device) if device is not None else torch.device("cpu")
        with torch.device("meta"):
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
            self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
            self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.to_empty(device=dev)
        self._init_weights(seed, dev, dtype)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=dev) / cfg.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    @torch.no_grad()
    def _init_weights(self, seed: int, dev: torch.device, dtype: torch.dtype) -> None:
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                w = torch.ones(p.shape, device=dev)
            elif name == "embed_tokens.weight":
                w = torch.randn(p.shape, generator=g, device=dev)
            else:
                w = torch.randn(p.shape, generator=g, device=dev) / math.sqrt(p.shape[1])
            p.data = w.to(dtype)
            p.requires_grad_(False)

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttnBatch, kv: KVBuffers) -> torch.Tensor:
        """Run the layers over a batch's new tokens, writing their K/V into ``kv``.

        Args:
            input_ids: ``[T]`` int64.
            positions: ``[T]`` int64 RoPE positions.
            attn: paged metadata (slots to write/read, mask).
            kv: this model's :class:`KVBuffers`.

        Returns:
            ``[T, hidden]`` final-normed hidden states (model dtype).
        """
        cfg = self.cfg
        x = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        for i, layer in enumerate(self.layers):
            q, k, v = layer.qkv(layer.input_layernorm(x), cos, sin, cfg)
            kv.write(i, attn.out_loc, k, v)
            k_ctx, v_ctx = kv.gather(i, attn.slots)
            x = x + layer.o_proj(paged_attention(q, k_ctx, v_ctx, attn, self.attn_impl))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head: ``[..., hidden]`` -> ``[..., vocab]`` float32."""
        return self.lm_head(hidden).float()

    @torch.no_grad()
    def forward_dense(self, tokens: torch.Tensor) -> torch.Tensor:
        """Reference: a plain causal forward over one whole sequence, no cache.

        Args:
            tokens: ``[L]`` int64 (on the model's device).

        Returns:
            ``[L, vocab]`` float32 logits (row i predicts token i + 1).
        """
        cfg = self.cfg
        n = tokens.shape[0]
        pos = torch.arange(n, device=tokens.device)
        rep = cfg.num_heads // cfg.num_kv_heads
        x = self.embed_tokens(tokens)
        cos, sin = rope_cos_sin(pos, self.inv_freq)
        for layer in self.layers:
            q, k, v = layer.qkv(layer.input_layernorm(x), cos, sin, cfg)
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True)
            x = x + layer.o_proj(o.transpose(0, 1).reshape(n, cfg.num_heads * cfg.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.compute_logits(self.norm(x))


# ------------------------------------------------------------------------------- pools
class PoolExhausted(RuntimeError):
    """No free request row or not enough free KV slots (the scheduler's KV budget should
    have prevented it: the runtime pool is sized from the scenario)."""


def expand_slots(values: torch.Tensor, repeats: torch.Tensor, total: int | None) -> torch.Tensor:
    """Per-request values -> per-token values: ``repeat_interleave(values, repeats)``.

    Args:
        values: ``[N]`` per-request values (row ids, start positions...).
        repeats: ``[N]`` int64 tokens per request (device tensor).
        total: ``sum(repeats)`` when the host knows it: passed as ``output_size``, no host
            sync. None: torch must read ``repeats`` back to size the output: a host sync
            that waits for all queued work on the stream (DSpark's prefill slot expansion
            on the HIP unified-KV backend does exactly this, twice;
            speculative/dspark_components; reproduced on purpose by
            ``ModelRunner.prepare_inject(sync=True)``).

    Returns:
        ``[sum(repeats)]`` tensor of ``values``' dtype.
    """
    return torch.repeat_interleave(values, repeats, output_size=total)


class ReqToTokenPool:
    """Request rows, token positions -> KV slots, and the per-row device state.

    Combines SGLang's ReqToTokenPool (``req_to_token``), TokenToKVPoolAllocator (free
    slots as a device tensor, allocation by slicing: no host sync) and the FutureMap
    buffers (managers/overlap_utils.py) that let step N+1 read step N's outputs on the
    GPU without the host: ``seq_lens`` and ``last_token`` per row.

    Position -> slot mappings are reserved ahead (:meth:`reserve`) from host-known upper
    bounds, so a verify can write its whole window without allocating: rejected positions
    stay reserved and are overwritten by the next cycle ("rollback by not advancing").
    All slots of a row return to the free list when the row is freed.

    Args:
        max_reqs: request rows (row 0 extra, padding).
        max_context: positions per row.
        num_slots: KV slots (slot 0 extra, padding).
        window: verify window (spec state width; 1 without spec).
        device: the :class:`~runtime.device.Device`.

    Attributes (device tensors, int64, one entry per row incl. padding row 0):
        req_to_token: ``[rows, width]`` slot of each position (0 = unmapped/padding);
            ``width`` = max_context rounded up to :data:`CTX_ALIGN` (positions past
            max_context are never reserved: they only pad the attention context).
        seq_lens: ``[rows]`` committed tokens whose KV is in the cache.
        last_token: ``[rows]`` last sampled token (its KV is not yet written).
        prev_window / prev_start / prev_accept: ``[rows, window]`` / ``[rows]`` / ``[rows]``
            the previous verify window, its first position and its accepted drafts
            (-1: none; the drafter's KV catch-up reads these).
    Host attributes: ``reserved[row]`` positions mapped, ``len_bound[row]`` upper bound of
    ``seq_lens[row]`` (exact after extend/decode and forced-accept cycles).
    """

    def __init__(self, max_reqs: int, max_context: int, num_slots: int, window: int, device: Device) -> None:
        if max_reqs < 1 or max_context < 2 or num_slots < 2 or window < 1:
            raise ValueError(f"bad pool sizes: max_reqs={max_reqs}, max_context={max_context}, num_slots={num_slots}, window={window}")
        dev = device.torch_device
        self.device = device
        self.max_context = max_context
        self.width = _round_up(max_context)
        rows = max_reqs + 1
        self.req_to_token = torch.zeros(rows, self.width, dtype=torch.int64, device=dev)
        self.seq_lens = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.last_token = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.prev_window = torch.zeros(rows, window, dtype=torch.int64, device=dev)
        self.prev_start = torch.zeros(rows, dtype=torch.int64, device=dev)
        self.prev_accept = torch.full((rows,), -1, dtype=torch.int64, device=dev)
        self.free_slots = torch.arange(1, num_slots, dtype=torch.int64, device=dev)
        self.num_free_slots = num_slots - 1
        self._free_rows = list(range(max_reqs, 0, -1))
        self.reserved = [0] * rows
        self.len_bound = [0] * rows

    @property
    def num_free_rows(self) -> int:
        return len(self._free_rows)

    def alloc_row(self) -> int:
        """A free request row (>= 1).

        Raises:
            PoolExhausted: none left.
        """
        if not self._free_rows:
            raise PoolExhausted("no free request row")
        row = self._free_rows.pop()
        self.reserved[row] = 0
        self.len_bound[row] = 0
        return row

    def free_row(self, row: int) -> None:
        """Return ``row`` and all its reserved slots (no host sync).

        Raises:
            ValueError: row 0 or a row not in use.
        """
        if row <= 0 or row in self._free_rows:
            raise ValueError(f"row {row} is not an allocated request row")
        n = self.reserved[row]
        if n:
            self.free_slots = torch.cat([self.free_slots, self.req_to_token[row, :n]])
            self.req_to_token[row, :n].fill_(PAD_SLOT)
            self.num_free_slots += n
        self.reserved[row] = 0
        self.len_bound[row] = 0
        self._free_rows.append(row)

    def reserve(self, rows: Sequence[int], upto: Sequence[int]) -> None:
        """Map positions ``reserved[row] .. upto - 1`` of each row to fresh slots.

        Per-token (row, position) pairs come from :func:`expand_slots` with the total
        known on the host (no sync). Rows already reserved that far are skipped.

        Raises:
            ValueError: ``upto`` beyond ``max_context``.
            PoolExhausted: not enough free slots.
        """
        need, rs, starts = [], [], []
        for r, u in zip(rows, upto, strict=True):
            if u > self.max_context:
                raise ValueError(f"row {r}: position {u - 1} beyond max_context {self.max_context}")
            n = u - self.reserved[r]
            if n > 0:
                need.append(n)
                rs.append(r)
                starts.append(self.reserved[r])
                self.reserved[r] = u
        total = sum(need)
        if total == 0:
            return
        if total > self.num_free_slots:
            for r, s in zip(rs, starts, strict=True):
                self.reserved[r] = s
            raise PoolExhausted(f"need {total} KV slots, {self.num_free_slots} free")
        slots = self.free_slots[:total]
        self.free_slots = self.free_slots[total:]
        self.num_free_slots -= total
        cum = [0]
        for n in need[:-1]:
            cum.append(cum[-1] + n)
        meta = self.device.h2d([rs, need, starts, cum])
        rows_t, need_t, start_t, cum_t = meta[0], meta[1], meta[2], meta[3]
        tok_rows = expand_slots(rows_t, need_t, total)
        ar = torch.arange(total, device=rows_t.device)
        tok_pos = expand_slots(start_t - cum_t, need_t, total) + ar
        self.req_to_token[tok_rows, tok_pos] = slots

    def reset_padding(self) -> None:
        """Put padding row 0's device state back (graph replays pad with row 0).

        Scalar writes use ``fill_`` (a kernel argument): ``t[i] = 0`` would copy a
        pageable CPU scalar, a hidden host-to-device copy that graph capture rejects.
        """
        self.seq_lens.select(0, PAD_ROW).fill_(0)
        self.last_token.select(0, PAD_ROW).fill_(0)
        self.prev_start.select(0, PAD_ROW).fill_(0)
        self.prev_accept.select(0, PAD_ROW).fill_(-1)


# ------------------------------------------------------------------------------ runner
@dataclass(slots=True)
class RaggedBatch:
    """Device inputs of an extend forward over ragged per-request token counts.

    Attributes:
        rows: ``[B]`` int64 request rows.
        positions: ``[T]`` int64 position of each token.
        attn: :class:`AttnBatch` (padded query layout).
        last_index: ``[B]`` int64 flat index of each request's last token.
        seq_after: ``[B]`` int64 prefix + extend length.
        num_tokens: T (host).
    """

    rows: torch.Tensor
    positions: torch.Tensor
    attn: AttnBatch
    last_index: torch.Tensor
    seq_after: torch.Tensor
    num_tokens: int


@dataclass(slots=True)
class ExtendOut:
    """Result of :meth:`ModelRunner.extend` (device tensors, nothing read back).

    Attributes:
        next_tokens: ``[B]`` int64 first sampled token of requests whose prefill
            completed, -1 for the others (chunked prefill in progress).
        logits: ``[T, vocab]`` float32 when asked for, else None.
        batch: the forward's :class:`RaggedBatch`.
        tokens: ``[T]`` int64 input ids on the device (the inject forward reuses them).
    """

    next_tokens: torch.Tensor
    logits: torch.Tensor | None
    batch: RaggedBatch
    tokens: torch.Tensor


@dataclass(slots=True)
class VerifyOut:
    """Result of a teacher-forced :meth:`ModelRunner.verify`.

    Attributes:
        greedy: ``[B, W]`` int64 target argmax at each window position (position j
            predicts the token at n + j + 1).
        logits: ``[B, W, vocab]`` float32 or None.
    """

    greedy: torch.Tensor
    logits: torch.Tensor | None


@dataclass(slots=True)
class StepOut:
    """Per-request outputs of a decode step or a speculative cycle (device tensors,
    fresh per call: safe to copy to the host while the next step runs).

    Attributes:
        tokens: ``[B, W]`` int64 committed tokens in order; entries past
            ``committed - 1`` are -1 (W = 1 for decode).
        accept: ``[B]`` int64 accepted draft tokens (0 for decode).
        committed: ``[B]`` int64 tokens committed = accept + 1 (SGLang's accept length).
    """

    tokens: torch.Tensor
    accept: torch.Tensor
    committed: torch.Tensor

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.tokens, "accept": self.accept, "committed": self.committed}


@dataclass(slots=True)
class _Static:
    rows: torch.Tensor
    forced: torch.Tensor
    out: dict[str, torch.Tensor] = field(default_factory=dict)


def _check_extend(rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int]) -> None:
    b = len(rows)
    if b == 0 or not (b == len(prefix_lens) == len(extend_lens)):
        raise ValueError("rows, prefix_lens, extend_lens must be non-empty and of equal length")
    if min(extend_lens) < 1 or min(prefix_lens) < 0:
        raise ValueError("extend_lens must be >= 1 and prefix_lens >= 0")


def default_ctx_buckets(max_context: int, smallest: int = 256) -> list[int]:
    """Context buckets for graphs: powers of two from ``smallest`` up, then ``max_context``
    rounded up to :data:`CTX_ALIGN`."""
    top = _round_up(max_context)
    out, c = [], smallest
    while c < top:
        out.append(c)
        c *= 2
    out.append(top)
    return out


class ModelRunner:
    """Executes extend / inject / decode / verify / speculative cycles for request rows.

    The host side holds only integers (rows, lengths, bounds); every per-token tensor is
    built on the device, and no method syncs the host except
    :meth:`prepare_inject` with ``sync=True`` (on purpose), the constructor (one
    ``setup`` sync) and the explicitly named readers (:meth:`read_seq_lens`).

    Streams: work is queued on the *current* stream, and host data reaches the device
    through :meth:`Device.h2d` on that same stream, so every call must run on one stream
    (the engine enters ``device.use("forward")`` once); reading a runner's outputs on
    another stream needs an event (:meth:`Device.copy_to_host` pairs one).

    Args:
        target: the target model.
        device: the :class:`~runtime.device.Device` (h2d copies, graphs, sync counting).
        max_reqs: concurrent request rows.
        max_context: positions per request (prompt + output + window).
        num_slots: KV slots (default ``max_reqs * max_context + 1``).
        drafter: the block drafter (same class, typically fewer layers; same vocab).
        spec_window: verify window W = gamma + 1 (>= 2 for speculative cycles).
        attn_impl: ``"sdpa"`` or ``"explicit"``.
        mask_token: the drafter's mask token id (default ``vocab - 1``).
        bs_buckets / ctx_buckets: graph buckets (defaults: SGLang-like bs list up to
            ``max_reqs``; powers of two up to ``max_context``).

    Raises:
        ValueError: drafter vocab differs from the target's; a drafter with
            ``spec_window < 2``.
    """

    def __init__(
        self,
        target: LlamaProxy,
        device: Device,
        *,
        max_reqs: int,
        max_context: int,
        num_slots: int | None = None,
        drafter: LlamaProxy | None = None,
        spec_window: int = 1,
        attn_impl: AttnImpl = "sdpa",
        mask_token: int | None = None,
        bs_buckets: Sequence[int] | None = None,
        ctx_buckets: Sequence[int] | None = None,
    ) -> None:
        if drafter is not None:
            if drafter.cfg.vocab_size != target.cfg.vocab_size:
                raise ValueError(f"drafter vocab {drafter.cfg.vocab_size} != target vocab {target.cfg.vocab_size}")
            if spec_window < 2:
                raise ValueError("a drafter needs spec_window >= 2 (gamma >= 1)")
        self.target = target
        self.drafter = drafter
        self.device = device
        self.window = spec_window
        self.gamma = spec_window - 1
        self.attn_impl = attn_impl
        target.attn_impl = attn_impl
        if drafter is not None:
            drafter.attn_impl = attn_impl
        self.mask_token = target.cfg.vocab_size - 1 if mask_token is None else mask_token
        slots = num_slots if num_slots is not None else max_reqs * max_context + 1
        self.pool = ReqToTokenPool(max_reqs, max_context, slots, spec_window, device)
        dev, dt = device.torch_device, target.dtype
        self.kv = KVBuffers(target.cfg, slots, dev, dt)
        self.draft_kv = KVBuffers(drafter.cfg, slots, dev, drafter.dtype) if drafter is not None else None
        self.bs_buckets = list(bs_buckets) if bs_buckets else default_bs_buckets(max_reqs)
        width = self.pool.width
        self.ctx_buckets = sorted({min(_round_up(c), width) for c in ctx_buckets}) if ctx_buckets else default_ctx_buckets(max_context)
        self._statics: dict[tuple, _Static] = {}
        # buffers were filled on the constructing stream; the loop runs on the forward
        # stream: one setup sync (not in the loop) orders them
        device.synchronize("setup")

    # ------------------------------------------------------------------ requests
    def add_request(self) -> int:
        """Allocate a request row (its KV is reserved by the first extend).

        Raises:
            PoolExhausted: no row free.
        """
        return self.pool.alloc_row()

    def free_request(self, row: int) -> None:
        """Free a request's row and KV slots."""
        self.pool.free_row(row)

    def observe_lengths(self, rows: Sequence[int], lengths: Sequence[int]) -> None:
        """Tighten the host's length bounds with exact committed lengths (e.g. from a
        step's copied-back results)."""
        for r, n in zip(rows, lengths, strict=True):
            self.pool.len_bound[r] = n

    def read_seq_lens(self, rows: Sequence[int]) -> list[int]:
        """Committed lengths read back from the device. A HOST SYNC (tests, debugging)."""
        return self.pool.seq_lens[self.device.h2d(rows)].tolist()

    def context_bucket(self, need: int) -> int:
        """The graph context bucket covering ``need`` positions.

        Raises:
            ValueError: ``need`` exceeds ``max_context``.
        """
        c = pick_bucket(need, self.ctx_buckets)
        if c is None:
            raise ValueError(f"context {need} beyond max_context {self.pool.max_context}")
        return c

    def _arange(self, n: int) -> torch.Tensor:
        # not cached: a tensor first made during graph capture holds garbage until replay
        return torch.arange(n, device=self.device.torch_device)

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if t.device == self.device.torch_device:
            return t.to(torch.int64)
        return self.device.h2d(t)

    # -------------------------------------------------------------------- extend
    def _ragged(self, rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int], sync: bool) -> RaggedBatch:
        _check_extend(rows, prefix_lens, extend_lens)
        b = len(rows)
        t = sum(extend_lens)
        qn = max(extend_lens)
        ctx = min(_round_up(max(p + e for p, e in zip(prefix_lens, extend_lens, strict=True))), self.pool.width)
        cum = [0]
        for e in extend_lens[:-1]:
            cum.append(cum[-1] + e)
        meta = self.device.h2d([list(rows), list(prefix_lens), list(extend_lens), cum])
        rows_t, pre_t, ext_t, cum_t = meta[0], meta[1], meta[2], meta[3]
        total = None if sync else t
        dev = self.device
        t0 = time.perf_counter()
        tok_req = expand_slots(self._arange(b), ext_t, total)
        if sync:
            dev.count_sync("slot_expansion", time.perf_counter() - t0)
            t0 = time.perf_counter()
        tok_j = self._arange(t) - expand_slots(cum_t, ext_t, total)
        if sync:
            dev.count_sync("slot_expansion", time.perf_counter() - t0)
        positions = pre_t[tok_req] + tok_j
        out_loc = self.pool.req_to_token[rows_t[tok_req], positions]
        j = self._arange(qn)
        valid = j[None, :] < ext_t[:, None]
        q_index = torch.where(valid, cum_t[:, None] + j[None, :], t).reshape(-1)
        q_pos = torch.where(valid, pre_t[:, None] + j[None, :], -1)
        attn = AttnBatch(
            slots=self.pool.req_to_token[rows_t, :ctx],
            mask=position_mask(q_pos, ctx),
            out_loc=out_loc,
            q_index=q_index,
            tok_index=tok_req * qn + tok_j,
            batch=b,
            q_len=qn,
        )
        return RaggedBatch(rows_t, positions, attn, cum_t + ext_t - 1, pre_t + ext_t, t)

    @torch.no_grad()
    def extend(
        self,
        rows: Sequence[int],
        prefix_lens: Sequence[int],
        extend_lens: Sequence[int],
        tokens: torch.Tensor,
        *,
        completes: Sequence[bool] | None = None,
        return_logits: bool = False,
    ) -> ExtendOut:
        """Target extend (chunked prefill) forward: SGLang ForwardMode.EXTEND.

        Each request b computes positions ``prefix_lens[b] .. prefix_lens[b] +
        extend_lens[b] - 1`` over its cached prefix; KV slots are reserved first.
        Requests whose prefill completes (``completes[b]``, default all) sample their
        first token (greedy) into ``last_token``; ``seq_lens`` becomes prefix + extend.

        Args:
            rows: request rows (from :meth:`add_request`).
            prefix_lens: tokens already in the cache per request.
            extend_lens: tokens computed now per request (>= 1).
            tokens: ``[sum(extend_lens)]`` int64 input ids, request-major (host or device).
            completes: per request, whether this chunk finishes its prefill.
            return_logits: also return logits for every token (tests).

        Returns:
            :class:`ExtendOut` (device tensors).

        Raises:
            ValueError: inconsistent lengths; beyond max_context.
            PoolExhausted: not enough KV slots.
        """
        _check_extend(rows, prefix_lens, extend_lens)
        if completes is not None and len(completes) != len(rows):
            raise ValueError(f"completes has {len(completes)} entries for {len(rows)} requests")
        if tokens.shape[0] != sum(extend_lens):
            raise ValueError(f"tokens has {tokens.shape[0]} entries, extend_lens sum to {sum(extend_lens)}")
        self.pool.reserve(rows, [p + e for p, e in zip(prefix_lens, extend_lens, strict=True)])
        batch = self._ragged(rows, prefix_lens, extend_lens, sync=False)
        ids = self._to_device(tokens)
        hidden = self.target(ids, batch.positions, batch.attn, self.kv)
        nxt = torch.argmax(self.target.compute_logits(hidden[batch.last_index]), dim=-1)
        comp = self.device.h2d([True] * len(rows) if completes is None else list(completes), torch.bool)
        pool, r = self.pool, batch.rows
        pool.seq_lens[r] = batch.seq_after
        pool.last_token[r] = torch.where(comp, nxt, pool.last_token[r])
        pool.prev_accept.index_fill_(0, r, -1)
        pool.prev_start.index_fill_(0, r, 0)
        for row, p, e in zip(rows, prefix_lens, extend_lens, strict=True):
            pool.len_bound[row] = p + e
        logits = self.target.compute_logits(hidden) if return_logits else None
        return ExtendOut(torch.where(comp, nxt, -1), logits, batch, ids)

    def prepare_inject(
        self, rows: Sequence[int], prefix_lens: Sequence[int], extend_lens: Sequence[int], *, sync: bool
    ) -> RaggedBatch:
        """Per-token positions and slots for the drafter's prompt injection.

        DSpark's prefill (speculative/dspark_components) expands per-request slots to
        per-token positions with ``repeat_interleave`` on a device ``repeats`` tensor. With
        ``sync=True`` no ``output_size`` is given: called after the target extend was
        queued, this blocks the host until that forward drains (the HIP unified-KV
        backend's behaviour; counted as ``slot_expansion`` host syncs on the device).
        ``sync=False`` passes the host-known total: no sync.
        """
        return self._ragged(rows, prefix_lens, extend_lens, sync=sync)

    @torch.no_grad()
    def inject(self, prepared: RaggedBatch, tokens: torch.Tensor) -> None:
        """Drafter forward over the prompt tokens, filling the draft KV (DSpark injects
        the target's hidden states into the draft KV for every prompt token; this
        proxy runs the drafter over the tokens: same per-token shape of work).

        Args:
            prepared: from :meth:`prepare_inject` (same rows and lengths as the extend).
            tokens: ``[T]`` device input ids (``ExtendOut.tokens``).

        Raises:
            RuntimeError: no drafter.
        """
        if self.drafter is None or self.draft_kv is None:
            raise RuntimeError("inject needs a drafter")
        self.drafter(tokens, prepared.positions, prepared.attn, self.draft_kv)

    # ------------------------------------------------------------- device steps
    def _uniform_attn(self, rows_t: torch.Tensor, q_pos: torch.Tensor, out_loc: torch.Tensor, ctx: int) -> AttnBatch:
        b, qn = q_pos.shape
        return AttnBatch(
            slots=self.pool.req_to_token[rows_t, :ctx],
            mask=position_mask(q_pos, ctx),
            out_loc=out_loc.reshape(-1),
            q_index=None,
            tok_index=None,
            batch=b,
            q_len=qn,
        )

    def _decode_dev(self, rows_t: torch.Tensor, ctx: int) -> StepOut:
        pool = self.pool
        n = pool.seq_lens[rows_t]
        ids = pool.last_token[rows_t]
        loc = pool.req_to_token[rows_t, n]
        attn = self._uniform_attn(rows_t, n[:, None], loc, ctx)
        hidden = self.target(ids, n, attn, self.kv)
        tok = torch.argmax(self.target.compute_logits(hidden), dim=-1)
        pool.seq_lens[rows_t] = n + 1
        pool.last_token[rows_t] = tok
        pool.reset_padding()
        zero = torch.zeros_like(tok)
        return StepOut(tok[:, None], zero, zero + 1)

    def _verify_dev(self, rows_t: torch.Tensor, window: torch.Tensor, ctx: int, want_logits: bool) -> VerifyOut:
        b, w = window.shape
        n = self.pool.seq_lens[rows_t]
        pos = n[:, None] + self._arange(w)[None, :]
        loc = self.pool.req_to_token[rows_t[:, None], pos]
        attn = self._uniform_attn(rows_t, pos, loc, ctx)
        hidden = self.target(window.reshape(-1), pos.reshape(-1), attn, self.kv)
        logits = self.target.compute_logits(hidden).view(b, w, -1)
        return VerifyOut(torch.argmax(logits, dim=-1), logits if want_logits else None)

    def _commit_dev(self, rows_t: torch.Tensor, accept: torch.Tensor, bonus: torch.Tensor, window: torch.Tensor) -> None:
        pool = self.pool
        n = pool.seq_lens[rows_t]
        pool.seq_lens[rows_t] = n + accept + 1
        pool.last_token[rows_t] = bonus
        pool.prev_window[rows_t] = window
        pool.prev_start[rows_t] = n
        pool.prev_accept[rows_t] = accept
        pool.reset_padding()

    def _draft_dev(self, rows_t: torch.Tensor, ctx: int) -> torch.Tensor:
        """One parallel drafter forward: KV catch-up of the previous window + new block.

        Per request (n = committed length, a' = previous accept): the previous verify
        window's accepted tokens (positions prev_start .. prev_start + a') get their draft
        KV written (the rest go to the padding slot), and the block
        ``[anchor, mask x gamma]`` at positions n .. n + gamma proposes drafts from its
        first gamma outputs (LM shift: output j predicts position n + j + 1; DFlash trains
        mask positions to predict themselves, same compute shape). 2W positions per request.
        """
        assert self.drafter is not None and self.draft_kv is not None
        pool, w, g = self.pool, self.window, self.gamma
        b = rows_t.shape[0]
        j = self._arange(w)[None, :]
        n = pool.seq_lens[rows_t]
        p_pos = pool.prev_start[rows_t][:, None] + j
        p_ok = j <= pool.prev_accept[rows_t][:, None]
        p_loc = torch.where(p_ok, pool.req_to_token[rows_t[:, None], p_pos], PAD_SLOT)
        b_pos = n[:, None] + j
        b_loc = pool.req_to_token[rows_t[:, None], b_pos]
        anchor = pool.last_token[rows_t]
        b_tok = torch.cat([anchor[:, None], torch.full((b, g), self.mask_token, dtype=anchor.dtype, device=anchor.device)], 1)
        ids = torch.cat([pool.prev_window[rows_t], b_tok], 1).reshape(-1)
        rope_pos = torch.cat([p_pos, b_pos], 1).reshape(-1)
        q_pos = torch.cat([torch.where(p_ok, p_pos, -1), b_pos], 1)
        attn = self._uniform_attn(rows_t, q_pos, torch.cat([p_loc, b_loc], 1), ctx)
        hidden = self.drafter(ids, rope_pos, attn, self.draft_kv).view(b, 2 * w, -1)
        # contiguous [B * gamma, hidden] first: on a strided 3-D view cuBLAS picked a skinny
        # kernel re-reading the LM head per 8 tokens (15.9 ms instead of ~1 ms at batch 64, H200)
        block = hidden[:, w : w + g].reshape(b * g, hidden.shape[-1])
        return torch.argmax(self.drafter.compute_logits(block), dim=-1).view(b, g)

    def _spec_dev(self, rows_t: torch.Tensor, ctx: int, forced: torch.Tensor | None) -> StepOut:
        pool, g = self.pool, self.gamma
        b = rows_t.shape[0]
        anchor = pool.last_token[rows_t]
        if self.drafter is not None:
            drafts = self._draft_dev(rows_t, ctx)
        else:
            drafts = torch.full((b, g), self.mask_token, dtype=anchor.dtype, device=anchor.device)
        window = torch.cat([anchor[:, None], drafts], 1)
        greedy = self._verify_dev(rows_t, window, ctx, want_logits=False).greedy
        accept = (drafts == greedy[:, :g]).long().cumprod(1).sum(1)
        if forced is not None:
            accept = forced.clamp(0, g)
        bonus = greedy.gather(1, accept[:, None]).squeeze(1)
        j = self._arange(self.window)[None, :]
        tokens = torch.cat([drafts, bonus[:, None]], 1)
        tokens = torch.where(j < accept[:, None], tokens, torch.where(j == accept[:, None], bonus[:, None], -1))
        self._commit_dev(rows_t, accept, bonus, window)
        return StepOut(tokens, accept, accept + 1)

    # ---------------------------------------------------------------- public steps
    def _prepare(self, rows: Sequence[int], width: int) -> int:
        if not rows:
            raise ValueError("empty batch")
        bounds = [self.pool.len_bound[r] for r in rows]
        self.pool.reserve(rows, [n + width for n in bounds])
        return self.context_bucket(max(bounds) + width)

    @torch.no_grad()
    def decode(self, rows: Sequence[int], *, graph: bool = False) -> StepOut:
        """One decode step (SGLang ForwardMode.DECODE): feed each row's last token,
        write its KV, sample greedily, commit 1 token.

        Args:
            rows: request rows (prefill complete).
            graph: replay a captured graph for the (batch, context) bucket (captured on
                first use after warm-up; CPU: eager on the same static buffers). Batches
                above the largest bucket run eagerly.

        Returns:
            :class:`StepOut` with W = 1.
        """
        ctx = self._prepare(rows, 1)
        out = self._run("decode", rows, ctx, None) if graph else self._decode_dev(self.device.h2d(rows), ctx)
        for r in rows:
            self.pool.len_bound[r] += 1
        return out

    @torch.no_grad()
    def verify(self, rows: Sequence[int], window: torch.Tensor, *, return_logits: bool = True) -> VerifyOut:
        """Teacher-forced target verify (SGLang ForwardMode.TARGET_VERIFY) of a given
        window per request, at positions n .. n + W - 1, causal within the window.

        Writes the window's KV but commits nothing (rollback = not advancing; follow
        with :meth:`commit` to advance).

        Args:
            rows: request rows.
            window: ``[B, W]`` int64 tokens (anchor first).
            return_logits: return ``[B, W, vocab]`` logits.
        """
        ctx = self._prepare(rows, window.shape[1])
        win = self._to_device(window)
        return self._verify_dev(self.device.h2d(rows), win, ctx, return_logits)

    @torch.no_grad()
    def commit(self, rows: Sequence[int], accept: Sequence[int], bonus: torch.Tensor, window: torch.Tensor) -> None:
        """Commit ``accept[b] + 1`` tokens of the last verified window of each row:
        ``seq_lens += accept + 1``, ``last_token = bonus`` (the target's token after the
        accepted prefix); the rest of the window is rolled back (its KV stays in reserved
        slots and is overwritten later).

        Args:
            rows: request rows.
            accept: accepted draft tokens per row (0 .. W - 1).
            bonus: ``[B]`` int64 next token per row.
            window: ``[B, W]`` the verified window (drafter catch-up reads it).
        """
        rows_t = self.device.h2d(rows)
        self._commit_dev(rows_t, self.device.h2d(accept), self._to_device(bonus), self._to_device(window))
        for r, a in zip(rows, accept, strict=True):
            self.pool.len_bound[r] += a + 1

    @torch.no_grad()
    def spec_cycle(self, rows: Sequence[int], forced_accept: Sequence[int] | None = None, *, graph: bool = False) -> StepOut:
        """One speculative cycle (DSpark/DFlash-style, speculative/dflash_worker_v2.py):
        one parallel drafter forward proposes gamma tokens, one target forward verifies
        ``[anchor, drafts]``, accept = the longest prefix of drafts equal to the target's
        greedy tokens, commit ``accept + 1`` tokens (accepted drafts + the target's bonus
        token).

        Args:
            rows: request rows (prefill complete).
            forced_accept: per row, accepted draft tokens to force (0..gamma; SGLang's
                SGLANG_SIMULATE_ACC_LEN; :class:`sim.acceptance.AcceptanceModel` draws an
                accept *length* L, pass L - 1). All drafting and verifying still runs;
                only the committed count is forced. None: real greedy matching.
            graph: replay a captured graph (see :meth:`decode`).

        Returns:
            :class:`StepOut`: ``tokens[B, W]`` committed tokens (drafts[:accept] then the
            bonus), ``accept``, ``committed = accept + 1``.

        Raises:
            RuntimeError: ``spec_window < 2``.
        """
        if self.window < 2:
            raise RuntimeError("spec_cycle needs spec_window >= 2")
        ctx = self._prepare(rows, self.window)
        if graph:
            out = self._run("spec", rows, ctx, forced_accept)
        else:
            forced = self.device.h2d(forced_accept) if forced_accept is not None else None
            out = self._spec_dev(self.device.h2d(rows), ctx, forced)
        for i, r in enumerate(rows):
            self.pool.len_bound[r] += (min(max(forced_accept[i], 0), self.gamma) + 1) if forced_accept is not None else self.window
        return out

    # ---------------------------------------------------------------------- graphs
    def graph_key(self, kind: str, batch: int, ctx: int, forced: bool) -> tuple | None:
        """``(kind, bs_bucket, ctx_bucket, forced)`` or None if the batch exceeds every bucket."""
        bs = pick_bucket(batch, self.bs_buckets)
        return None if bs is None else (kind, bs, ctx, forced)

    def capture(self, kind: Literal["decode", "spec"], batch: int, ctx: int, forced: bool = True) -> tuple:
        """Capture (after warm-up) the graph for ``kind`` at the buckets covering
        ``batch`` and ``ctx``; idempotent. Capture before measuring: a lazy capture in
        the loop costs two device synchronizations.

        Raises:
            ValueError: batch above the largest bucket.
        """
        key = self.graph_key(kind, batch, self.context_bucket(ctx), forced)
        if key is None:
            raise ValueError(f"batch {batch} above the largest graph bucket {max(self.bs_buckets)}")
        self._static(key)
        return key

    def _static(self, key: tuple) -> _Static:
        st = self._statics.get(key)
        if st is not None:
            return st
        kind, bs, ctx, forced = key
        dev = self.device.torch_device
        st = _Static(torch.full((bs,), PAD_ROW, dtype=torch.int64, device=dev), torch.zeros(bs, dtype=torch.int64, device=dev))
        w = 1 if kind == "decode" else self.window
        st.out = {
            "tokens": torch.zeros(bs, w, dtype=torch.int64, device=dev),
            "accept": torch.zeros(bs, dtype=torch.int64, device=dev),
            "committed": torch.zeros(bs, dtype=torch.int64, device=dev),
        }

        def step() -> None:
            if kind == "decode":
                o = self._decode_dev(st.rows, ctx)
            else:
                o = self._spec_dev(st.rows, ctx, st.forced if forced else None)
            for name, t in o.as_dict().items():
                st.out[name].copy_(t)

        with torch.no_grad():
            self.device.graphs.capture(key, step)
        self._statics[key] = st
        return st

    def _run(self, kind: str, rows: Sequence[int], ctx: int, forced: Sequence[int] | None) -> StepOut:
        key = self.graph_key(kind, len(rows), ctx, forced is not None)
        if key is None:  # above the largest bucket: eager, as SGLang does
            rows_t = self.device.h2d(rows)
            if kind == "decode":
                return self._decode_dev(rows_t, ctx)
            return self._spec_dev(rows_t, ctx, self.device.h2d(forced) if forced is not None else None)
        st = self._static(key)
        bs, b = key[1], len(rows)
        st.rows.copy_(self.device.h2d(list(rows) + [PAD_ROW] * (bs - b)))
        if forced is not None:
            st.forced.copy_(self.device.h2d(list(forced) + [0] * (bs - b)))
        self.device.graphs.replay(key)
        return StepOut(st.out["tokens"][:b].clone(), st.out["accept"][:b].clone(), st.out["committed"][:b].clone())
