"""Extend forwards with the non-attention work replayed from graphs captured at token-count
buckets, attention eager between the pieces: SGLang 0.5.23's default prefill path on CUDA.

What SGLang does (0.5.23):

- model_executor/cuda_graph_config.py ``default_prefill_backend``: the prefill (EXTEND)
  phase uses the ``breakable`` backend on CUDA, ``disabled`` elsewhere.
- runner_backend/breakable_cuda_graph_backend.py ``BreakableCudaGraphBackend`` with
  runner_backend_utils/breakable_cuda_graph/breakable_cuda_graph.py
  ``BreakableCUDAGraph``/``eager_on_graph``: the transformer body is captured as a chain
  of ``torch.cuda.CUDAGraph`` segments split at every attention call
  (layers/radix_attention.py ``RadixAttention._eager_attention`` is ``@eager_on_graph``);
  replay runs segment, eager attention, segment, ... The eager attention runs the real
  (unpadded) tokens only, KV save included, and zeroes the padded rows of its output.
  The LM head / logits tail runs eagerly after the body (runner/prefill_cuda_graph_runner.py
  ``can_run_graph``: "logits_processor eagerly on top with live request metadata").
- Token buckets: arg_groups/cuda_graph_hook.py ``generate_prefill_cuda_graph_batch_sizes``
  (:func:`sim.server_args.prefill_token_buckets`, re-exported here); the maximum (``cuda_graph_max_bs_prefill``) defaults to
  ``chunked_prefill_size``, capped by ``max_total_tokens`` (arg_groups/memory_hook.py).
- Replay pads the token count up to the smallest bucket >= it
  (runner/base_cuda_graph_runner.py ``_pad_to_bucket``) and runs eagerly above the largest
  bucket or when padding would more than double the tokens
  (runner/prefill_cuda_graph_runner.py ``can_replay_locally``,
  ``_MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR = 2``).

Here (:class:`PiecewiseExtend`): one proxy model's ``L`` layers become ``L + 1`` pieces per
bucket ``N``: piece 0 = embedding, RoPE tables, layer 0's norm + QKV + RoPE; piece ``j`` =
layer ``j-1``'s output projection, residual, MLP block, then layer ``j``'s norm + QKV + RoPE;
piece ``L`` = the last layer's output projection and MLP block and the final norm. Between
pieces, layer ``i``'s KV write, context gather and paged attention run eagerly on the real
``T`` tokens. Pieces read and write static buffers sized for the largest bucket (views
``[:N]``, so every bucket's addresses are fixed). On CPU the pieces run eagerly through the
same :class:`runtime.graphs.GraphCache` calls (no capture), so bucket choice, padding and
the split are testable there.

Padded rows (``T..N``) hold stale, finite values; every non-attention op is row-wise
(linear, RMSNorm, RoPE, SiLU, embedding), so they never reach a real row, and attention
reads the real rows only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from specsched.runtime.kv_cache import KVBuffers
from specsched.runtime.layers import (
    AttnBatch,
    LlamaProxy,
    attention_backends,
    paged_attention,
    rope_cos_sin,
)
from specsched.sim.server_args import (
    MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR,
    prefill_graph_bucket,
    prefill_token_buckets,  # noqa: F401  (re-exported)
)

MAX_PADDING_FACTOR = MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR
"""A bucket more than this many times the real tokens runs eagerly instead (SGLang 0.5.23
runner/prefill_cuda_graph_runner.py ``_MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR``)."""


def pick_token_bucket(tokens: int, buckets: Sequence[int]) -> int | None:
    """The bucket an extend of ``tokens`` replays at, or None for the eager path.

    The simulator's rule (:func:`sim.server_args.prefill_graph_bucket`, so both engines pick
    the same bucket by construction): the smallest bucket >= ``tokens``; None when
    ``tokens`` exceeds every bucket or that bucket exceeds ``MAX_PADDING_FACTOR * tokens``
    (SGLang ``can_replay_locally``).

    Raises:
        ValueError: tokens < 1 (the runtime never launches an empty extend).
    """
    if tokens < 1:
        raise ValueError(f"extend of {tokens} tokens: must be >= 1")
    return prefill_graph_bucket(tokens, sorted(buckets))


class PiecewiseExtend:
    """The extend forward of one model (target or drafter) split into graph-replayed pieces
    with eager attention between them (see the module docstring).

    Args:
        model: the :class:`LlamaProxy`.
        kv: its :class:`KVBuffers`.
        device: the :class:`runtime.device.Device` (graphs, stream); ``device.graphs``
            captures and replays the pieces (CPU: runs them eagerly).
        buckets: token buckets (ascending or not); static buffers are sized for the largest.
        name: graph-key prefix (``"extend"``, ``"inject"``).

    Raises:
        ValueError: no bucket, or a bucket < 1.
    """

    def __init__(self, model: LlamaProxy, kv: KVBuffers, device, buckets: Sequence[int], name: str) -> None:
        if not buckets or min(buckets) < 1:
            raise ValueError(f"prefill graph buckets must be non-empty and >= 1, got {list(buckets)}")
        self.model, self.kv, self.device, self.name = model, kv, device, name
        self.buckets = sorted(set(int(b) for b in buckets))
        cfg, dev, dt = model.cfg, model.device, model.dtype
        n, d = self.buckets[-1], cfg.head_dim
        z = torch.zeros
        self.ids = z(n, dtype=torch.int64, device=dev)
        self.pos = z(n, dtype=torch.int64, device=dev)
        self.x = z(n, cfg.hidden_size, dtype=dt, device=dev)
        self.cos = z(n, 1, d // 2, dtype=torch.float32, device=dev)
        self.sin = z(n, 1, d // 2, dtype=torch.float32, device=dev)
        self.q = z(n, cfg.num_heads, d, dtype=dt, device=dev)
        self.k = z(n, cfg.num_kv_heads, d, dtype=dt, device=dev)
        self.v = z(n, cfg.num_kv_heads, d, dtype=dt, device=dev)
        self.attn = z(n, cfg.num_heads * d, dtype=dt, device=dev)
        self.out = z(n, cfg.hidden_size, dtype=dt, device=dev)

    @property
    def nbytes(self) -> int:
        """Bytes of the static buffers."""
        return sum(t.numel() * t.element_size() for t in (self.ids, self.pos, self.x, self.cos, self.sin,
                                                          self.q, self.k, self.v, self.attn, self.out))

    def bucket(self, tokens: int) -> int | None:
        """:func:`pick_token_bucket` over this model's buckets."""
        return pick_token_bucket(tokens, self.buckets)

    def key(self, bucket: int) -> tuple:
        return (self.name, self.model.cfg.name, bucket)

    # ------------------------------------------------------------------------- pieces
    def pieces(self, n: int) -> list:
        """The ``L + 1`` piece functions of bucket ``n`` (no arguments; static buffers only)."""
        m, cfg = self.model, self.model.cfg
        ids, pos, x, cos, sin = self.ids[:n], self.pos[:n], self.x[:n], self.cos[:n], self.sin[:n]
        q, k, v, a, out = self.q[:n], self.k[:n], self.v[:n], self.attn[:n], self.out[:n]
        layers = list(m.layers)

        def qkv(layer) -> None:
            q_, k_, v_ = layer.qkv(layer.input_layernorm(x), cos, sin, cfg)
            q.copy_(q_)
            k.copy_(k_)
            v.copy_(v_)

        def post(layer) -> None:
            x.add_(layer.o_proj(a))
            x.add_(layer.mlp(layer.post_attention_layernorm(x)))

        def first() -> None:
            x.copy_(m.embed_tokens(ids))
            c, s = rope_cos_sin(pos, m.inv_freq)
            cos.copy_(c)
            sin.copy_(s)
            qkv(layers[0])

        def middle(j: int):
            def piece() -> None:
                post(layers[j - 1])
                qkv(layers[j])
            return piece

        def last() -> None:
            post(layers[-1])
            out.copy_(m.norm(x))

        return [first, *(middle(j) for j in range(1, len(layers))), last]

    def capture(self, bucket: int) -> tuple:
        """Capture bucket ``bucket``'s pieces (idempotent); returns its graph key.

        Raises:
            ValueError: ``bucket`` is not one of :attr:`buckets`.
        """
        if bucket not in self.buckets:
            raise ValueError(f"{bucket} is not a prefill graph bucket of {self.name} ({self.buckets})")
        key = self.key(bucket)
        if key not in self.device.graphs:
            with torch.no_grad():
                self.device.graphs.capture_pieces(key, self.pieces(bucket))
        return key

    # ------------------------------------------------------------------------ forward
    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttnBatch, bucket: int) -> torch.Tensor:
        """The model's extend forward over ``T`` real tokens padded to ``bucket``.

        Args:
            input_ids, positions: ``[T]`` int64 device tensors.
            attn: the forward's paged metadata (built for the ``T`` real tokens).
            bucket: from :meth:`bucket` (>= T).

        Returns:
            ``[T, hidden]`` final-normed hidden states: a view of a static buffer, valid
            until the next forward of this object.
        """
        t = input_ids.shape[0]
        key = self.capture(bucket)
        self.ids[:t].copy_(input_ids)
        self.pos[:t].copy_(positions)
        q, k, v, a = self.q[:t], self.k[:t], self.v[:t], self.attn[:t]
        m, kv = self.model, self.kv

        def attention(i: int) -> None:
            # layer i's KV save, context gather and attention over the real tokens, eager
            # (SGLang RadixAttention._eager_attention between graph segments)
            kv.write(i, attn.out_loc, k, v)
            k_ctx, v_ctx = kv.gather(i, attn.slots)
            a.copy_(paged_attention(q, k_ctx, v_ctx, attn, m.attn_impl))

        with attention_backends(self.x.device):
            self.device.graphs.replay_pieces(key, attention)
        return self.out[:t]
