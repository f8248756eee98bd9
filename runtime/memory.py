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

Where the estimate passes and the device still runs out (the caching allocator's
fragmentation, a graph pool, another process on the GPU), :class:`allocating` marks the
error with what was being allocated and :func:`device_oom_error` turns it into one line at
the command boundary (runtime/cli_commands.py): the scenario file, the allocation, the
device's total memory and the server keys that shrink it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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
    free, _, where = memory_info(is_gpu, torch_device)
    return free, where


def memory_info(is_gpu: bool, torch_device: object = None) -> tuple[int | None, int | None, str]:
    """(bytes free, bytes in all, where): ``torch.cuda.mem_get_info`` on a GPU; on the host
    ``MemAvailable`` and the physical memory (:func:`sim.limits.physical_memory_bytes`). None
    where unknown."""
    if is_gpu:
        import torch

        free, total = torch.cuda.mem_get_info(torch_device)
        return int(free), int(total), "GPU memory free"
    from specsched.sim.limits import physical_memory_bytes

    return _host_available(), physical_memory_bytes(), "host memory available"


def check_fits(est: MemoryEstimate, *, preset: str, slots: int, is_gpu: bool, torch_device: object = None,
               source: str = "<runtime>", configured: int | None = None,
               free_total: tuple[int, int] | None = None, max_context: int | None = None) -> None:
    """Refuse a run that will not fit, before anything is allocated.

    Args:
        est: the run's :func:`estimate`.
        preset, slots: the model preset and the KV pool's slots (incl. the padding slot).
        is_gpu, torch_device: where the run allocates (a GPU's figures come from
            ``torch.cuda.mem_get_info``, the host's from ``/proc/meminfo``).
        source: the scenario file named in the message.
        configured: the scenario's ``server.max_total_num_tokens`` (the pool is capped to
            what the rows can map, ``slots - 1``, when that is smaller).
        free_total: (bytes free, bytes in all) to check against instead of asking the
            device (tests size a GPU's memory on the CPU this way).
        max_context: the longest request's positions (prompt plus output), which the
            activations' gathered K/V and attention mask grow with (:func:`estimate`): named
            when the activations are the largest part, since the keys that shrink the other
            parts do not move them then (a 766K-token prompt of an agentic length file needed
            42.6 GiB of them whatever the pool, running cap or graph size).

    Raises:
        ConfigError: the estimate exceeds :data:`HEADROOM` of the free memory (one line naming
            the preset, the pool size, the estimate, what is free of the device's total and
            the server keys that shrink the largest parts).
    """
    if free_total is not None:
        free, total, where = free_total[0], free_total[1], "GPU memory free" if is_gpu else "host memory available"
    else:
        free, total, where = memory_info(is_gpu, torch_device)
    if free is None or est.total <= HEADROOM * free:
        return
    of = f" of {total / GIB:.1f} GiB" if total else ""
    context = ""
    if max_context and est.activations >= max(est.kv, est.graphs, est.weights):
        # the proxy's attention gathers each row's whole context: a long prompt drives them
        context = (f"; the activations grow with the longest request's {max_context} tokens of context "
                   "(prompt plus output): shorter workload lengths shrink them")
    raise ConfigError(source, "server.max_total_num_tokens", configured if configured is not None else slots - 1,
                      f"preset {preset} with a {slots - 1}-token KV pool needs about {est.describe()}, "
                      f"{where} is {free / GIB:.1f} GiB{of}: lower server.max_total_num_tokens (KV), "
                      "server.cuda_graph_max_bs (graphs) or server.max_running_requests (activations), "
                      f"or use a smaller --preset{context}")


# ---------------------------------------------------------------- out of memory mid-run
@dataclass(frozen=True, slots=True)
class Allocation:
    """What a run was allocating when the device ran out: the words for it, the scenario key
    whose value sizes it (and that value), the other keys that shrink the run, and the
    torch device (for its total memory)."""

    what: str
    key: str
    value: Any
    lower: tuple[str, ...]
    torch_device: Any = None


LOWER_KEYS = ("server.max_total_num_tokens", "server.cuda_graph_max_bs", "server.max_running_requests")
"""The server keys a run out of device memory is told to lower (its allocation's own key first)."""


def is_device_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is the device running out of memory: torch's allocator error
    (``torch.OutOfMemoryError``, which ``torch.cuda.OutOfMemoryError`` is), or a CUDA/HIP
    runtime call that failed with out of memory outside the allocator (a ``RuntimeError``
    "CUDA error: out of memory", e.g. instantiating a captured graph)."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and re.search(r"\b(CUDA|HIP) error: out of memory", str(exc)) is not None


class allocating:  # noqa: N801  (used as a context manager, like torch.no_grad)
    """``with allocating(Allocation(...)):`` marks a device out-of-memory error raised in the
    block with the allocation (``exc.allocation``; the innermost block's is kept) and lets it
    propagate: nothing is caught here, the command boundary says it
    (:func:`device_oom_error`)."""

    def __init__(self, allocation: Allocation) -> None:
        self.allocation = allocation

    def __enter__(self) -> Allocation:
        return self.allocation

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None and getattr(exc, "allocation", None) is None and is_device_oom(exc):
            exc.allocation = self.allocation  # type: ignore[attr-defined]
        return False


def device_total(torch_device: Any) -> int | None:
    """The device's memory in all (bytes): the GPU's (``mem_get_info``), the host's physical
    memory for the CPU; None where unknown."""
    import torch

    dev = torch.device(torch_device) if torch_device is not None else None
    if dev is not None and dev.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(dev)[1])
        except RuntimeError:   # the context itself cannot answer any more
            return int(torch.cuda.get_device_properties(dev).total_memory)
    from specsched.sim.limits import physical_memory_bytes

    return physical_memory_bytes()


def device_oom_error(exc: BaseException, source: str, total: int | None = None) -> ConfigError:
    """The one line for a device that ran out of memory mid-run (``exc``, marked by
    :class:`allocating`): the scenario file ``source``, what was being allocated, the size
    torch asked for (where its message says), the device's total memory (``total``, default
    :func:`device_total`) and the keys to lower, its allocation's own first; where an entry of
    its ``lower`` names the key ("a smaller --preset"), those entries to use instead."""
    a: Allocation = getattr(exc, "allocation", None) or Allocation(
        "memory for the run", "server.max_total_num_tokens", "?", LOWER_KEYS)
    if total is None:
        total = device_total(a.torch_device)
    asked = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)", str(exc))
    dev = str(a.torch_device) if a.torch_device is not None else "the device"
    size = f"{total / GIB:.1f} GiB in all" if total else "its total memory unknown"
    others = [k for k in a.lower if k != a.key]
    named = any(a.key in k for k in others)   # "a smaller --preset": a choice, not a figure to lower
    lower = others if named else [a.key] + others
    keys = f"{', '.join(lower[:-1])} or {lower[-1]}" if len(lower) > 1 else lower[0]
    more = f" (torch asked for {asked.group(1)} more)" if asked else ""
    return ConfigError(source, a.key, a.value, f"the device ({dev}, {size}) ran out of memory allocating "
                       f"{a.what}{more}: {'use' if named else 'lower'} {keys}")
