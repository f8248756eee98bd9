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


@pytest.mark.parametrize(("device", "preset"), [("cpu", "tiny"), ("cpu-as-hip", "tiny")])
def test_doctor_on_a_cpu_defaults_to_the_tiny_preset(monkeypatch, capsys, device, preset):
    """`specsched doctor --device cpu` ran the 1b proxy's checks for over ten minutes on a
    2-core machine; a CPU device now defaults to the tiny preset (same code paths)."""
    from specsched.runtime import doctor

    seen = []

    class Fake:
        def __init__(self, dev, preset, *rest):
            seen.append(preset)

        def run(self):
            return []

    monkeypatch.setattr(doctor, "Doctor", Fake)
    monkeypatch.setattr(doctor, "format_rows", lambda rows: "")
    assert main(["doctor", "--device", device]) == 0
    assert seen == [preset]
