"""``measure`` and ``validate`` say which server defaults they filled, as ``run`` does: a
scenario whose profile names an H200 runs the H200's defaults on any device, and a measurement
that does not say so reads as the user's file (a CPU run of an H200 cell ran 48 running
requests and 8192-token chunks where nothing said it would). ``validate --profile P`` with
P of another device says that the defaults are the scenario's profile's, not P's."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import tiny_profile


def _files(tmp_path):
    h200 = tiny_profile().model_dump(mode="json", exclude_none=True)
    h200.update(name="h200-made-up", device="cuda:NVIDIA H200 (made-up costs)")
    cpu = tiny_profile().model_dump(mode="json", exclude_none=True)
    cpu.update(name="cpu-made-up", device="cpu (made-up costs)")
    (tmp_path / "h200.yaml").write_text(yaml.safe_dump(h200))
    (tmp_path / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({
        "name": "d", "profile": str(tmp_path / "h200.yaml"),
        "server": {"max_total_num_tokens": 5000},   # chunk, running cap, graphs: the H200's defaults
        "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 40},
                     "output_len": {"kind": "fixed", "value": 4}}}))
    return sc, tmp_path / "cpu.yaml"


@pytest.mark.parametrize("command", ["measure", "validate"])
def test_a_measurement_prints_the_defaults_it_filled(tmp_path, capsys, command):
    pytest.importorskip("torch")
    from specsched.cli import main

    sc, cpu = _files(tmp_path)
    extra = ["--profile", str(cpu)] if command == "validate" else []
    assert main([command, str(sc), *extra, "--device", "cpu", "--preset", "tiny", "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    block = captured.out.split("server defaults for this hardware (not in the scenario file):", 1)
    assert len(block) == 2, captured.out[:400]
    assert "chunked_prefill_size = 8192" in block[1] and "H200" in block[1]
    note = [ln for ln in captured.err.splitlines() if ln.startswith("note: the defaults above are for the scenario's")]
    if command == "validate":   # the costs' device is not the scenario's: said once
        assert len(note) == 1 and "cpu-made-up" in note[0] and "H200" in note[0], captured.err
    else:
        assert note == []


def test_validate_with_a_profile_of_the_scenarios_device_adds_no_note(tmp_path, capsys):
    pytest.importorskip("torch")
    from specsched.cli import main

    sc, _ = _files(tmp_path)
    assert main(["validate", str(sc), "--profile", str(tmp_path / "h200.yaml"), "--device", "cpu", "--preset", "tiny",
                 "--quiet", "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "server defaults for this hardware" in captured.out
    assert "note: the defaults above" not in captured.err
