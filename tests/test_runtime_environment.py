"""runtime/environment.py: the SDPA probe reports the kernel it ran and prints nothing."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.device import Device  # noqa: E402
from specsched.runtime.environment import _native_stderr_silenced, probe_sdpa  # noqa: E402


def test_the_sdpa_probe_reads_a_kernel_and_leaves_stderr_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    """torch's profiler writes ``USDT: ... profiler_start/stop`` from C++ to fd 2 on every
    start and stop (torch 2.13); the probe runs under it on every runtime command, so those
    lines went out even with -q."""
    got = probe_sdpa(Device("cpu"), kv_heads=2, rep=2, head_dim=16, dtype=torch.float32,
                     shapes={"verify": (2, 3, 64)})
    assert got["verify"] in {"fused_cpu", "flash", "efficient", "cudnn", "math"}
    assert capfd.readouterr().err == ""


def test_python_errors_inside_the_silenced_block_still_reach_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError, match="boom"), _native_stderr_silenced():
        print("hidden", file=sys.stderr, flush=True)
        raise RuntimeError("boom")
    print("after", file=sys.stderr, flush=True)
    err = capfd.readouterr().err
    assert "after" in err
