"""The runtime's memory, estimated before anything is allocated.

A run allocates the target and drafter weights, the KV buffers of both models over the
pool's slots (:class:`runtime.kv_cache.KVBuffers`), the req_to_token map, the activations of
the largest forward (a prefill chunk, or a verify of the whole batch with its gathered
context: the proxy's paged attention gathers each request's KV before SDPA) and the graph
pool of the captured decode/verify buckets and the static buffers of the piecewise prefill
graphs. :func:`estimate` adds these up from the
shapes alone; :func:`check_fits` refuses (one line, exit 2) when the total exceeds what the
device (``torch.cuda.mem_get_info``) or the host (``MemAvailable``) has free, instead of
letting the kernel kill the process for memory with no message.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsched.runtime.model_config import ModelConfig
from specsched.sim.errors import ConfigError

GIB = 2**30
HEADROOM = 0.9
"""Use at most this share of the free memory (allocator fragmentation, the CUDA context)."""


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes a run will allocate, by part."""

    weights: int
    kv: int
    activations: int
    graphs: int

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.activations + self.graphs

    def describe(self) -> str:
        return (f"{self.total / GIB:.1f} GiB (weights {self.weights / GIB:.1f}, KV {self.kv / GIB:.1f}, "
                f"activations {self.activations / GIB:.1f}, graphs {self.graphs / GIB:.1f})")


def estimate(target: ModelConfig, drafter: ModelConfig | None, *, slots: int, max_reqs: int, max_context: int,
             window: int, chunk_tokens: int, dtype_bytes: int, graph_max_bs: int, graphs: bool,
             prefill_graph_tokens: int = 0) -> MemoryEstimate:
    """Estimate a run's memory (bytes) from its shapes.

    Args:
        target, drafter: model shapes (drafter None without speculation).
        slots: KV slots of the pool (both models have one buffer each).
        max_reqs, max_context: request rows and positions per row (req_to_token).
        window: verify window (1 without speculation).
        chunk_tokens: the largest prefill forward's tokens (chunked_prefill_size or prompt).
        dtype_bytes: bytes per element of the model dtype.
        graph_max_bs: largest captured batch; graphs: whether graphs are captured.
        prefill_graph_tokens: largest extend token bucket of the piecewise prefill graphs
            (0: none); their static buffers (residual, q/k/v, attention output, final
            hidden) per model, and one piece's MLP activations in the graph pool.
    """
    models = [target] + ([drafter] if drafter is not None else [])
    weights = sum(m.num_params for m in models) * dtype_bytes
    kv = sum(m.kv_bytes_per_token(dtype_bytes) for m in models) * slots + (max_reqs + 1) * max_context * 8
    h, inter, vocab = target.hidden_size, target.intermediate_size, target.vocab_size
    kv_tok = 2 * target.num_kv_heads * target.head_dim * dtype_bytes  # one layer's K and V per position

    def forward(tokens: int, batch: int, ctx: int) -> int:
        # residual stream, q/k/v, MLP gate+up and the product, one layer live at a time; the
        # gathered context K/V of that layer; the mask; float32 logits of the sampled rows
        per_tok = (6 * h + 3 * inter) * dtype_bytes
        mask = batch * target.num_heads * (tokens // max(batch, 1) + 1) * ctx
        return tokens * per_tok + batch * ctx * kv_tok + mask + batch * window * vocab * 4

    prefill = forward(chunk_tokens, max(1, chunk_tokens // max(1, min(chunk_tokens, 1024))), max_context)
    verify = forward(max_reqs * (2 * window if drafter is not None else window), max_reqs, max_context)
    act = 2 * max(prefill, verify)  # the allocator keeps freed blocks: count the peak twice
    gr = forward(min(graph_max_bs, max_reqs) * 2 * window, min(graph_max_bs, max_reqs), max_context) if graphs else 0
    for m in models:
        if not prefill_graph_tokens:
            break
        q_dim, kv_dim = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
        gr += prefill_graph_tokens * ((3 * m.hidden_size + 2 * q_dim + 2 * kv_dim + 3 * m.intermediate_size)
                                      * dtype_bytes + 16 + 4 * m.head_dim)
    return MemoryEstimate(int(weights), int(kv), int(act), int(gr))


def _host_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def available(is_gpu: bool, torch_device: object = None) -> tuple[int | None, str]:
    """(bytes free, where) on the device or the host; None when unknown."""
    if is_gpu:
        import torch

        free, _ = torch.cuda.mem_get_info(torch_device)
        return int(free), "GPU memory free"
    return _host_available(), "host memory available"


def check_fits(est: MemoryEstimate, *, preset: str, slots: int, is_gpu: bool, torch_device: object = None,
               source: str = "<runtime>", configured: int | None = None) -> None:
    """Refuse a run that will not fit.

    Raises:
        ConfigError: the estimate exceeds :data:`HEADROOM` of the free memory (one line naming
            the preset, the pool size, the estimate and what is available).
    """
    free, where = available(is_gpu, torch_device)
    if free is None or est.total <= HEADROOM * free:
        return
    raise ConfigError(source, "server.max_total_num_tokens", configured if configured is not None else slots - 1,
                      f"preset {preset} with a {slots - 1}-token KV pool needs about {est.describe()}, "
                      f"{where} is {free / GIB:.1f} GiB: lower max_total_num_tokens or use a smaller --preset")
