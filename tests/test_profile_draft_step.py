"""``specsched profile``'s ``gpu.draft_step`` when the chain cycle timed with and without its
serial draft steps does not resolve the step: the cycles' noise above it (a loaded host, a
drafter far smaller than its target) makes every point's difference 0 (clamped). That grid of
zeros was refused by the profile's own validation once everything had been measured, a
pydantic traceback and nothing written (a CPU run of the tests' tiny preset hit it under
load). The step is then called alone at every point, as at window 2, and the provenance says
so."""

from __future__ import annotations

import argparse

import pytest
import yaml
from specsched.sim.profile import load_profile


def _profile(tmp_path, window: int = 3):
    from specsched.runtime.profiler import register_profile_command

    ap = argparse.ArgumentParser(prog="specsched")
    register_profile_command(ap.add_subparsers(dest="command", required=True))
    out = tmp_path / "p.yaml"
    a = ap.parse_args(["profile", "--device", "cpu", "--preset", "tiny", "--window", str(window), "--max-bs", "2",
                       "--contexts", "64", "--extend-tokens", "16,64", "--graph-max-bs", "2", "--repeats", "3",
                       "--no-progress", "--out", str(out)])
    assert a.func(a) == 0
    return out


def test_an_unresolved_draft_step_is_measured_alone(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from specsched.runtime import profile_harness

    real = profile_harness.time_calls

    def no_difference(dev, fn, repeats):   # the cycle with its steps as fast as without them
        times = real(dev, fn, repeats=repeats)
        return [1e-3] * len(times) if getattr(fn, "__name__", "") == "alternate" else times

    monkeypatch.setattr(profile_harness, "time_calls", no_difference)
    out = _profile(tmp_path)
    d = yaml.safe_load(out.read_text())
    seconds = [v for row in d["gpu"]["draft_step"]["seconds"] for v in row]
    assert seconds and all(v > 0 for v in seconds)
    assert "was not above 0 at any point" in d["provenance"]["gpu.draft_step"]
    assert load_profile(str(out)).gpu.draft_step is not None

