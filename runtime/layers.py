"""Layers and attention of the runtime's Llama-style proxy (RMSNorm, RoPE, GQA attention,
SwiGLU), the paged-attention metadata and :class:`LlamaProxy` (random weights).

Attention has two paths that must agree (tests/test_runtime_model.py):

- paged (:func:`paged_attention`): gather the request's slots ``req_to_token[rows, :C]``,
  then SDPA (``attn_impl="sdpa"``) or an explicit float32 softmax (``"explicit"``) with a
  position mask; GQA folds the query heads sharing a KV head into the query axis, so KV is
  never expanded. Shapes are static given (batch, C), hence graphable.
- dense (:meth:`LlamaProxy.forward_dense`): a plain causal forward over a whole sequence,
  no cache: the reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from specsched.runtime.kv_cache import KVBuffers
from specsched.runtime.model_config import ModelConfig
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

AttnImpl = Literal["sdpa", "explicit"]


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


PLANLESS_SDPA = (SDPBackend.EFFICIENT_ATTENTION,)
"""SDPA backends of eager forwards on CUDA: kernels compiled ahead, the shape passed as
arguments, so a new (batch, queries, context) costs nothing extra. cuDNN's fused attention
(which PyTorch prefers on Hopper) builds and caches an execution plan per shape on its
first call: measured on an H200 (docs/runtime.md, "Attention backends"), 50-90 ms of host
time for each new extend shape. SGLang's extend kernels (FlashInfer, FA3) take ragged
lengths as arguments and pay no such cost, so eager forwards use these backends."""

_GRAPHED: ContextVar[bool] = ContextVar("graphed_attention", default=False)


@contextmanager
def graphed_attention() -> Iterator[None]:
    """Forwards inside run as a captured graph's body (its warm-up and its capture): SDPA
    picks its default backend (cuDNN on Hopper), whose per-shape plan is then built once,
    before the measurement, for the graph's fixed (batch, context) bucket."""
    token = _GRAPHED.set(True)
    try:
        yield
    finally:
        _GRAPHED.reset(token)


def attention_backends(device: torch.device) -> AbstractContextManager[None]:
    """The SDPA backend choice of a forward on ``device``: :data:`PLANLESS_SDPA` for an eager
    forward on a CUDA build (extend, draft injection, decode/verify above the graph limit);
    the default choice inside :func:`graphed_attention`, on CPU and on ROCm (no cuDNN)."""
    if device.type != "cuda" or torch.version.cuda is None or _GRAPHED.get():
        return nullcontext()
    return sdpa_kernel(list(PLANLESS_SDPA))


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

        SDPA's backend: :func:`attention_backends` (eager forwards avoid per-shape plans).

        Returns:
            ``[T, hidden]`` final-normed hidden states (model dtype).
        """
        cfg = self.cfg
        x = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        with attention_backends(x.device):
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

