"""Fuzzing of the two other files users write or edit by hand: a profile (a shipped one with
keys dropped, values of the wrong type or range, or timings scaled by 0 to 1e6, which pass
the schema and reach the cost model and the loop) and a length histogram CSV (a header or
a row damaged, rows cut, duplicated or emptied, another encoding), each run through
``specsched run`` in-process.

The invariant, as tests/test_fuzz_real_files.py's: exit status 0 or 2, never an exception
or a traceback; on 2 one error line that names the damaged file, and nothing written.
Examples are derandomized and few, so the module stays fast.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.test_fuzz_real_files import _cli, _paths, _workdir, damage_at, fuzz

ROOT = Path(__file__).resolve().parent.parent
PROFILES = {
    # profile -> the scenario it prices (one of its own kind: plain/DSpark on the H200 grids,
    # the MI355X reference profile's DSpark cells)
    "h200-1b.yaml": "scenarios/h200/batch8.yaml",
    "h200-llama8b-roofline.yaml": "scenarios/poisson8b-fixed.yaml",
    "mi355x-dsv41-flash-tp4.yaml": "scenarios/batch8-ll.yaml",
}
LOADED = {name: yaml.safe_load((ROOT / "profiles" / name).read_text()) for name in PROFILES}
HISTOGRAM = (ROOT / "scenarios" / "sharegpt-like-lengths-input.csv").read_text().splitlines()
ODD_CELLS = ["", "x", "-1", "0", "nan", "inf", "-inf", "1e400", "2147483648", "9" * 40, "1.5", " 3 ", "0x10",
             '"5"', "\x00", "\u00e9", "1e-320", "True"]


@st.composite
def damaged_profile(draw: Any) -> tuple[str, dict]:
    """(profile name, its mapping) with one or two values damaged (:func:`damage_at`): a key
    dropped, a value replaced or scaled, a list cut short; mostly its timings."""
    name = draw(st.sampled_from(sorted(PROFILES)))
    prof = copy.deepcopy(LOADED[name])
    for _ in range(draw(st.integers(1, 2))):
        paths = list(_paths(prof))
        # mostly the timings (gpu, host), so the damage reaches the cost model and the loop
        # rather than stopping at a renamed description
        costs = [p for p in paths if p[0] in ("gpu", "host")]
        path = draw(st.sampled_from(costs if costs and draw(st.integers(0, 4)) else paths))
        # half the damage a scaling: a value of the right type and shape, off by orders of
        # magnitude (or 0), which passes the schema and reaches the cost model and the loop
        damage_at(draw, prof, path, draw(st.sampled_from(["drop", "set", "set", "cut", "scale", "scale"])))
    return name, prof


@fuzz(60)
@given(damaged_profile())
def test_fuzz_run_with_a_damaged_profile(case):
    name, prof = case
    with _workdir() as w:
        p = w / ("m-" + name)
        p.write_text(yaml.safe_dump(prof, allow_unicode=True))
        _cli(["run", str(ROOT / PROFILES[name]), "--set", f"profile={p}", "--set", "workload.num_requests=4",
              "--out", "o", "-q"], w, (p.name,))


@st.composite
def damaged_histogram(draw: Any) -> bytes:
    """The input-length histogram's text with one damage: its header replaced, a cell or a
    row's tail replaced, rows cut or duplicated, every weight 0; UTF-8 or UTF-16."""
    lines = list(HISTOGRAM)
    row = draw(st.integers(1, len(lines) - 1))
    kind = draw(st.sampled_from(["header", "length", "weight", "extra", "cut", "zero", "twice", "short"]))
    if kind == "header":
        lines[0] = draw(st.sampled_from(["", "len,weight", "length", "length,weight,extra", "weight,length"]))
    elif kind in ("length", "weight"):
        length, weight = lines[row].split(",")
        cell = draw(st.sampled_from(ODD_CELLS))
        lines[row] = f"{cell},{weight}" if kind == "length" else f"{length},{cell}"
    elif kind == "extra":
        lines[row] += "," + draw(st.sampled_from(ODD_CELLS))
    elif kind == "cut":
        lines = lines[:draw(st.integers(0, 2))]
    elif kind == "zero":
        lines = [lines[0]] + [ln.split(",")[0] + ",0" for ln in lines[1:]]
    elif kind == "twice":
        lines.insert(row, lines[row])
    else:
        lines[row] = lines[row][:draw(st.integers(0, len(lines[row]) - 1))]
    return "\n".join(lines).encode(draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16"])))


@fuzz(30)
@given(damaged_histogram())
def test_fuzz_run_with_a_damaged_length_histogram(data):
    with _workdir() as w:
        (w / "m-input.csv").write_bytes(data)
        (w / "sharegpt-like-lengths-output.csv").write_text(
            (ROOT / "scenarios" / "sharegpt-like-lengths-output.csv").read_text())
        scenario = (ROOT / "scenarios" / "poisson8b-sharegpt.yaml").read_text()
        (w / "s.yaml").write_text(scenario.replace("sharegpt-like-lengths-input.csv", "m-input.csv"))
        _cli(["run", "s.yaml", "--set", "workload.num_requests=8", "--out", "o", "-q"], w, ("m-input.csv",))
