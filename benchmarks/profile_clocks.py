"""The GPU's clocks and power during each phase of a profiling run (docs/measurements/h100-v50.md).

``specsched profile`` names the measurement it is on in its progress bar (``extend 1024 tok
@ctx 512``, ``... behind 50 ms of itself``, ``decode bs 8 @ctx 1024``). With that progress
stamped line by line with the wall clock and nvidia-smi sampling beside it, every sample
falls in one phase: the phase whose label was shown last before it. This script joins the
two and prints, per phase, the samples, the median SM clock, the median power and the
throttle reasons that were active (nvidia-smi ``clocks_event_reasons.active`` bits).

Inputs (as the round's command writes them)::

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active \\
        --format=csv -lms 250 > smi-profile.csv &
    specsched profile ... 2>&1 | python3 -u benchmarks/profile_clocks.py --stamp > profile.log

Usage::

    python benchmarks/profile_clocks.py docs/measurements/h100-v50/p/profile.log \\
        docs/measurements/h100-v50/p/smi-profile.csv --match "extend (960|1024|1280|1536) tok"

``--stamp`` is the filter: it prefixes every line of its input, the progress bar's
carriage-return updates included, with the UTC wall clock (``YYYY/MM/DD HH:MM:SS.mmm``,
nvidia-smi's own format). Both clocks must be the same (the device's UTC, as nvidia-smi and the stamping both read it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from bisect import bisect_right
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}) (.*)$")
LABEL = re.compile(r"(?:bench/s|s/bench), ([^\]]+)\]")
"""The progress bar's postfix: the measurement it is on."""
REASONS = {0x1: "idle", 0x2: "app clocks", 0x4: "sw power cap", 0x8: "hw slowdown", 0x10: "sync boost",
           0x20: "sw thermal", 0x40: "hw thermal", 0x80: "hw power brake", 0x100: "display clocks"}
"""nvidia-smi's clocks_event_reasons bits (nvml ``nvmlClocksEventReasons``)."""


def _time(text: str) -> float:
    return datetime.strptime(text, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def phases(log: Path) -> list[tuple[float, str]]:
    """(start time s, label) of each phase, in order: a label's first stamped appearance."""
    out: list[tuple[float, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        lab = LABEL.search(m.group(2))
        if lab and (not out or out[-1][1] != lab.group(1).strip()):
            out.append((_time(m.group(1)), lab.group(1).strip()))
    return out


def samples(smi: Path) -> list[tuple[float, float, float, int]]:
    """(time s, SM clock MHz, power W, reasons bits) of each nvidia-smi sample."""
    out = []
    for line in smi.read_text(errors="replace").splitlines()[1:]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            out.append((_time(parts[0]), float(parts[1].split()[0]), float(parts[2].split()[0]), int(parts[3], 16)))
        except ValueError:
            continue
    return out


def by_phase(log: Path, smi: Path) -> dict[str, list[tuple[float, float, int]]]:
    """Each phase label's samples (SM clock, power, reasons), pooled over its appearances."""
    ph = phases(log)
    starts = [t for t, _ in ph]
    out: dict[str, list[tuple[float, float, int]]] = {}
    for t, mhz, w, bits in samples(smi):
        i = bisect_right(starts, t) - 1
        if i >= 0:
            out.setdefault(ph[i][1], []).append((mhz, w, bits))
    return out


def reasons_text(bits: int) -> str:
    return ", ".join(name for b, name in REASONS.items() if bits & b) or "none"


def stamp(source=sys.stdin, sink=sys.stdout) -> None:
    """Copy ``source`` to ``sink`` line by line (a carriage return ends a line too: the
    progress bar redraws itself with one), each non-blank line prefixed with the UTC wall
    clock when it arrived."""
    def emit(line: str) -> None:
        if line:
            t = time.time()
            sink.write(time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d} {line}\n")
            sink.flush()

    buf: list[str] = []
    for ch in iter(lambda: source.read(1), ""):
        if ch not in "\r\n":
            buf.append(ch)
            continue
        emit("".join(buf).strip())
        buf = []
    emit("".join(buf).strip())        # a last line without its newline


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, nargs="?", help="the stamped profile log")
    ap.add_argument("smi", type=Path, nargs="?", help="nvidia-smi's CSV sampled beside it")
    ap.add_argument("--match", default="", help="only phases whose label matches this regular expression")
    ap.add_argument("--stamp", action="store_true", help="stamp standard input's lines with the time instead")
    a = ap.parse_args(argv)
    if a.stamp:
        stamp()
        return 0
    if a.log is None or a.smi is None:
        ap.error("give the stamped log and nvidia-smi's CSV (or --stamp)")
    rows = by_phase(a.log, a.smi)
    pat = re.compile(a.match)
    print("| phase | samples | SM clock (MHz, median) | power (W, median) | throttle reasons seen |")
    print("|---|---:|---:|---:|---|")
    for label, s in rows.items():
        if not pat.search(label):
            continue
        seen = 0
        for _, _, bits in s:
            seen |= bits
        print(f"| {label} | {len(s)} | {statistics.median(x[0] for x in s):.0f} | "
              f"{statistics.median(x[1] for x in s):.0f} | {reasons_text(seen)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
