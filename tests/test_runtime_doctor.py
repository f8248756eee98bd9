"""specsched doctor runs every check on CPU with the HIP code paths and reports each figure."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from specsched.cli import main  # noqa: E402


def test_doctor_runs_every_check_as_hip_on_cpu(tmp_path, capsys):
    out = tmp_path / "doctor.md"
    assert main(["doctor", "--device", "cpu-as-hip", "--preset", "tiny", "--repeats", "3", "--out", str(out)]) == 0
    text = out.read_text()
    for check in ("backend", "versions", "queue settings", "graph capture under sync checker", "SDPA backend that ran",
                  "event record", "host_block vs queued wait", "repeat_interleave", "cross-queue penalty"):
        assert check in text
    assert "cpu-as-hip" in text and "FAILED" not in text
    assert "fused_cpu" in text or "math" in text
