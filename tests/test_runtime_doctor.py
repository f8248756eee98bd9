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


@pytest.mark.parametrize(("argv", "needle"), [
    (["--device", "bogus"], "--device = 'bogus'"),
    (["--device", "cpu:1"], "--device = 'cpu:1'"),
    (["--device", "mps"], "--device = 'mps'"),
    (["--device", "cpu", "--preset", "nope"], "--preset = 'nope'"),
    (["--device", "cpu", "--repeats", "0"], "--repeats"),
])
def test_a_bad_doctor_argument_is_one_line_before_any_check(tmp_path, monkeypatch, capsys, argv, needle):
    """`specsched doctor --device bogus` ended in torch's RuntimeError traceback (exit 1) from
    inside the first check, and `--device cpu:1` ran every check on the CPU; measure and
    validate refuse both in one line. doctor now checks its device and preset the same way,
    and its repeats, before building anything."""
    from specsched.runtime import doctor

    built = []
    monkeypatch.setattr(doctor, "Doctor", lambda *a: built.append(a))
    out = tmp_path / "doctor.md"
    with pytest.raises(SystemExit) as e:   # argparse's own refusal (a type error) exits 2 too
        raise SystemExit(main(["doctor", *argv, "--out", str(out)]))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert "Traceback" not in err[0] and not built and not out.exists()


def test_doctor_says_which_check_runs(monkeypatch, capsys):
    """Its checks took 18 s on a 2-core CPU (minutes with the 1b proxy on a GPU) with nothing
    on the terminal; each check is named on stderr as it starts."""
    from specsched.runtime import doctor

    def fake_check(self):
        self.add("x", "y", "z")

    for name in ("versions", "capture", "sdpa", "event_cost", "host_block_vs_queued", "repeat_interleave", "cross_queue"):
        monkeypatch.setattr(doctor.Doctor, name, fake_check)
    monkeypatch.setattr(doctor.Doctor, "__init__", lambda self, *a: setattr(self, "rows", []))
    assert main(["doctor", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "doctor: check 1/7" in err and "doctor: check 7/7" in err


@pytest.mark.parametrize("kind", ["folder", "under_a_file"])
def test_a_doctor_out_that_cannot_be_written_is_refused_before_the_checks(tmp_path, monkeypatch, capsys, kind):
    """`--out DIR` ran every check (18 s on a CPU) and then failed to write the table."""
    from specsched.runtime import doctor

    built = []
    monkeypatch.setattr(doctor, "Doctor", lambda *a: built.append(a))
    (tmp_path / "notes.txt").write_text("x")
    out = tmp_path if kind == "folder" else tmp_path / "notes.txt" / "doctor.md"
    assert main(["doctor", "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0], err
    assert not built
