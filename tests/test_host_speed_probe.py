"""benchmarks/host_speed_probe.py: a host that runs the same work slower for a while shows
as slow windows; a steady host shows none; the CPU run writes its rows atomically."""

from __future__ import annotations

import json

from tests.conftest import load_benchmark

hsp = load_benchmark("host_speed_probe")


def _rows(levels_ms):
    """One repetition every 0.25 s; ``levels_ms`` gives each 2.5 s window's CPU ms."""
    rows, t = [], 0.0
    for ms in levels_ms:
        for _ in range(10):
            rows.append(("python", t, ms, ms))
            t += 0.25
    return rows


def test_slow_windows_are_counted():
    out = hsp.summarize(_rows([2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.0]))
    assert "25% of 8 windows" in out


def test_a_steady_host_has_no_slow_window():
    assert "0% of 6 windows" in hsp.summarize(_rows([1.0, 1.05, 1.1, 1.0, 1.02, 1.0]))


def test_cpu_probe_writes_rows(tmp_path):
    out = tmp_path / "probe.json"
    assert hsp.main(["--seconds", "0.2", "--device", "cpu", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert rows and all(r[0] in ("python", "reference") and r[3] > 0 for r in rows)
    assert {r[0] for r in rows} == {"python", "reference"}
    assert hsp.main(["--seconds", "0"]) == 2


def test_the_speed_factor_against_a_profile(tmp_path, capsys):
    import yaml

    from tests.conftest import tiny_profile

    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(tiny_profile(reference_work_s=1.0).model_dump(mode="json", exclude_none=True)))
    assert hsp.main(["--seconds", "0.2", "--device", "cpu", "--profile", str(prof)]) == 0
    assert "host.speed_factor 0.0" in capsys.readouterr().out    # ~0.3 ms of work against 1 s
    bare = tmp_path / "old.yaml"
    bare.write_text(yaml.safe_dump(tiny_profile().model_dump(mode="json", exclude_none=True)))
    assert hsp.main(["--seconds", "0.2", "--device", "cpu", "--profile", str(bare)]) == 2
    assert "host.reference_work_s: not set" in capsys.readouterr().err
