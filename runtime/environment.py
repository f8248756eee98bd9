"""Measurement provenance: what ran, where, and whether the numbers can be trusted.

Every measurement (``specsched measure``, ``validate``, ``profile``, ``doctor``) records:

- versions: torch, CUDA or HIP runtime, the driver, cuDNN, python;
- the backend that ran (``cuda``, ``hip``, or ``<native>-as-hip`` when forced), queue
  settings (GPU_MAX_HW_QUEUES, HIP_FORCE_DEV_KERNARG, CUDA_DEVICE_MAX_CONNECTIONS: on HIP
  the number of hardware queues decides which streams share one and serialize,
  hip-vs-cuda.md items 4 and 13) and the priority of each of the runtime's streams;
- which SDPA backend actually ran for the proxy's attention on its real shapes
  (:func:`probe_sdpa`; on ROCm flash attention is never eligible with a boolean mask,
  hip-vs-cuda.md item 11);
- serializing variables: AMD_SERIALIZE_KERNEL, AMD_SERIALIZE_COPY, HIP_LAUNCH_BLOCKING and
  CUDA_LAUNCH_BLOCKING make every launch wait for completion, so overlap disappears and
  host_block vs stream_wait measure the same (hip-vs-cuda.md item 12).
  :func:`check_serializing` refuses to measure with any of them set unless the caller
  allows it, and then the results carry the stamp.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import torch
from specsched.sim.errors import ConfigError

if TYPE_CHECKING:
    from specsched.runtime.device import Device

SERIALIZING_VARS = ("AMD_SERIALIZE_KERNEL", "AMD_SERIALIZE_COPY", "HIP_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING")
"""Variables that make every launch synchronous (a value other than empty or 0 counts)."""
QUEUE_VARS = ("GPU_MAX_HW_QUEUES", "HIP_FORCE_DEV_KERNARG", "CUDA_DEVICE_MAX_CONNECTIONS", "HIP_VISIBLE_DEVICES",
              "CUDA_VISIBLE_DEVICES")
"""Variables that decide how streams map to hardware queues (recorded, not refused)."""
ALLOW_FLAG = "--allow-serializing"


def serializing_set(env: dict[str, str] | None = None) -> dict[str, str]:
    """The serializing variables set to something other than empty or ``0``."""
    env = os.environ if env is None else env
    return {k: env[k] for k in SERIALIZING_VARS if env.get(k, "").strip() not in ("", "0")}


def check_serializing(allow: bool, env: dict[str, str] | None = None) -> dict[str, str]:
    """Refuse to measure with a serializing variable set, unless ``allow``.

    Returns:
        The variables set (empty when none), for the results' stamp.

    Raises:
        ConfigError: one is set and ``allow`` is False (exit 2, one line naming it).
    """
    found = serializing_set(env)
    if found and not allow:
        k, v = next(iter(found.items()))
        raise ConfigError("<environment>", k, v,
                          f"unset it to measure (it makes every launch synchronous: overlap and the host_block vs "
                          f"stream_wait difference disappear), or pass {ALLOW_FLAG} to measure anyway and stamp the results")
    return found


def _driver_version() -> str:
    """The GPU driver's version: NVML on NVIDIA (nvidia-ml-py), else the CUDA driver API
    version torch reports, else ``n/a`` (ROCm: the HIP runtime version is in ``hip``)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # no NVML (ROCm, CPU build, or not installed)
        pass
    try:
        v = torch._C._cuda_getDriverVersion()  # e.g. 13000 for CUDA 13.0
        return f"CUDA driver API {v // 1000}.{(v % 1000) // 10}"
    except Exception:
        return "n/a"


def stream_priorities(dev: Device) -> dict[str, int]:
    """Priority of each of the device's streams (0 = default; lower is higher on CUDA/HIP)."""
    if not dev.is_gpu:
        return {}
    return {name: int(dev.stream(name).priority) for name in ("schedule", "forward", "copy")}


_SDPA_OPS = (
    ("fused_cpu", "_flash_attention_for_cpu"),
    ("cudnn", "_scaled_dot_product_cudnn_attention"),
    ("flash", "_scaled_dot_product_flash_attention"),
    ("efficient", "_scaled_dot_product_efficient_attention"),
    ("math", "_scaled_dot_product_attention_math"),
)


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """The process's file descriptor 2 pointed at /dev/null while the body runs: torch's
    profiler (Kineto, torch 2.13) writes ``USDT: ... profiler_start`` / ``profiler_stop`` lines
    from C++ straight to it on every start and stop, which ``-q`` cannot silence, so every
    runtime command printed eight of them. Python's own ``sys.stderr`` is flushed first and
    restored after, so a Python error raised inside is still reported."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def probe_sdpa(dev: Device, *, kv_heads: int, rep: int, head_dim: int, dtype: torch.dtype,
               shapes: dict[str, tuple[int, int, int]], eager: Collection[str] = ()) -> dict[str, str]:
    """Which SDPA backend ran for the proxy's masked attention on each real shape.

    Runs ``F.scaled_dot_product_attention`` exactly as :func:`runtime.layers.paged_attention`
    calls it (GQA folded into the query axis, a boolean mask), under the backend choice of
    :func:`runtime.layers.attention_backends` (eager for the names in ``eager``, a captured
    graph's otherwise), with ``torch.profiler``, and reads the aten kernel it dispatched to
    (not which backends are enabled).

    Args:
        shapes: name -> (batch, queries per request, context), e.g. ``{"verify": (32, 6, 1024)}``.
        eager: names of shapes the loop runs eagerly (extend; decode above the graph limit).

    Returns:
        name -> backend (``cudnn``, ``flash``, ``efficient``, ``fused_cpu``, ``math`` or
        ``unknown``).
    """
    import torch.nn.functional as F
    from specsched.runtime.layers import attention_backends, graphed_attention
    from torch.profiler import ProfilerActivity, profile

    out: dict[str, str] = {}
    for name, (b, qn, c) in shapes.items():
        q = torch.randn(b, kv_heads, rep * qn, head_dim, device=dev.torch_device, dtype=dtype)
        k = torch.randn(b, kv_heads, c, head_dim, device=dev.torch_device, dtype=dtype)
        mask = torch.ones(b, 1, rep * qn, c, device=dev.torch_device, dtype=torch.bool).tril(c - rep * qn)
        backends = nullcontext() if name in eager else graphed_attention()
        with torch.no_grad(), backends, attention_backends(q.device):
            F.scaled_dot_product_attention(q, k, k, attn_mask=mask)  # warm-up (kernel selection)
            with _native_stderr_silenced(), profile(activities=[ProfilerActivity.CPU]) as prof:
                F.scaled_dot_product_attention(q, k, k, attn_mask=mask)
        names = {e.name for e in prof.events()}
        out[name] = next((label for label, op in _SDPA_OPS if any(op in n for n in names)), "unknown")
    return out


def environment(dev: Device, *, sdpa: dict[str, str] | None = None,
                serializing: dict[str, str] | None = None) -> dict[str, str]:
    """The provenance stamp of a measurement on ``dev`` (all values strings)."""
    env = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": dev.describe(),
        "backend": dev.label,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "hip": str(getattr(torch.version, "hip", None)),
        "driver": _driver_version() if dev.is_gpu else "n/a",
        "python": platform.python_version(),
        "host": f"{platform.machine()} {platform.processor() or platform.system()}, {os.cpu_count()} CPUs",
        "torch_threads": str(torch.get_num_threads()),
        "queue_settings": ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in QUEUE_VARS),
        "stream_priorities": ", ".join(f"{k} {v}" for k, v in stream_priorities(dev).items()) or "n/a (cpu)",
        "serializing_vars": (", ".join(f"{k}={v}" for k, v in (serializing or {}).items())
                             or "none set"),
    }
    if dev.is_gpu:
        env["cudnn"] = str(torch.backends.cudnn.version())
        env["sdpa_enabled"] = (f"flash={torch.backends.cuda.flash_sdp_enabled()}, "
                               f"mem_efficient={torch.backends.cuda.mem_efficient_sdp_enabled()}, "
                               f"math={torch.backends.cuda.math_sdp_enabled()}")
    if sdpa:
        env["sdpa_ran"] = ", ".join(f"{k}: {v}" for k, v in sdpa.items())
    return env


def model_sdpa_probe(dev: Device, cfg: Any, window: int, context: int = 1024, batch: int = 8) -> dict[str, str]:
    """:func:`probe_sdpa` on a preset's decode and verify shapes at ``context`` as graphs
    replay them, and its extend and eager decode (above the graph limit) shapes."""
    rep = cfg.num_heads // cfg.num_kv_heads
    shapes = {"decode": (batch, 1, context), "verify": (batch, window, context), "extend": (1, 256, context),
              "eager_decode": (batch, 1, context)}
    return probe_sdpa(dev, kv_heads=cfg.num_kv_heads, rep=rep, head_dim=cfg.head_dim, dtype=dev.dtype, shapes=shapes,
                      eager=("extend", "eager_decode"))
