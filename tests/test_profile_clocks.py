"""benchmarks/profile_clocks.py: nvidia-smi samples joined to the profiler's phases."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import profile_clocks  # noqa: E402

LOG = """2026/12/06 18:00:00.000 profile:   0%|  | 0/9 [00:00<?, ?bench/s, build models]
2026/12/06 18:00:01.000 profile:  10%|  | 1/9 [00:01<00:08, 1.0s/bench, extend 1024 tok @ctx 512]
2026/12/06 18:00:01.200 profile:  10%|  | 1/9 [00:01<00:08, 1.0s/bench, extend 1024 tok @ctx 512]
2026/12/06 18:00:02.000 profile:  20%|  | 2/9 [00:02<00:07, 1.0bench/s, extend 1024 tok @ctx 512 behind 50 ms of itself]
2026/12/06 18:00:03.000 extend (ms) grid printed at the end, no label
"""
SMI = """timestamp, clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active
2026/12/06 17:59:59.900, 345, 70.0, 0x0000000000000001
2026/12/06 18:00:01.100, 1980, 400.0, 0x0000000000000000
2026/12/06 18:00:01.600, 1960, 420.0, 0x0000000000000004
2026/12/06 18:00:02.100, 1880, 600.0, 0x0000000000000004
2026/12/06 18:00:05.000, 1870, 610.0, 0x0000000000000004
"""


def test_each_sample_falls_in_the_phase_shown_last_before_it(tmp_path):
    """A sample belongs to the label the progress bar showed last before it (a repeated label
    is one phase; a sample before the first label belongs to none), and the table gives its
    samples' median clock and power and every throttle reason seen."""
    log, smi = tmp_path / "p.log", tmp_path / "smi.csv"
    log.write_text(LOG)
    smi.write_text(SMI)
    got = profile_clocks.by_phase(log, smi)
    assert list(got) == ["extend 1024 tok @ctx 512", "extend 1024 tok @ctx 512 behind 50 ms of itself"]
    assert [x[0] for x in got["extend 1024 tok @ctx 512"]] == [1980.0, 1960.0]
    assert [x[0] for x in got["extend 1024 tok @ctx 512 behind 50 ms of itself"]] == [1880.0, 1870.0]
    out = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, out
    try:
        assert profile_clocks.main([str(log), str(smi), "--match", "behind"]) == 0
    finally:
        sys.stdout = sys_stdout
    rows = [r for r in out.getvalue().splitlines() if r.startswith("| extend")]
    assert rows == ["| extend 1024 tok @ctx 512 behind 50 ms of itself | 2 | 1875 | 605 | sw power cap |"]


def test_stamp_ends_a_line_at_a_carriage_return_and_keeps_the_last():
    """The progress bar redraws with carriage returns: each redraw is its own stamped line,
    blank ones are dropped, and a last line without a newline is kept."""
    out = io.StringIO()
    profile_clocks.stamp(io.StringIO("a\rb\n\n c \rlast"), out)
    lines = out.getvalue().splitlines()
    assert [ln.split(" ", 2)[2] for ln in lines] == ["a", "b", "c", "last"]
    assert all(re.match(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3} ", ln) for ln in lines)
