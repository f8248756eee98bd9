"""Model shapes of the runtime's Llama-style proxy: :class:`ModelConfig`, the roofline
estimate of one speculative cycle (:func:`verify_cycle_cost`) and the model-size presets
(:data:`PRESETS`, target and drafter pairs)."""

from __future__ import annotations

from dataclasses import dataclass


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

