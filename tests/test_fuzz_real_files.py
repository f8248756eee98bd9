"""Fuzzing of every command that reads a user's real-server file: the shipped fixtures
(tests/data/bench, tests/data/logs, tests/data/traces) damaged as files are met in the wild
(keys dropped, values of the wrong type or range, lists cut or grown, a line cut short, other
encodings, binary bytes, duplicate keys, garbled log figures, trace cells) and run through the
CLI in-process.

The invariant: exit status 0 or 2, never an exception or a traceback; on 2 stderr holds one
error line that names the file (notes and warnings before it are allowed), and nothing is
written. Examples are derandomized (the same ones on every run) and few, so the module stays
fast; the regression tests at the end pin each bug the fuzzing found.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsched.cli import main

DATA = Path(__file__).parent / "data"


def fuzz(examples: int) -> settings:
    """Hypothesis settings of a fuzz test: ``examples`` derandomized examples (the same ones on
    every run, for CI), no deadline, no example database."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------ the fixtures

def _runs(path: Path) -> list[Any]:
    """Every run of a bench fixture, read with plain json: JSONL, or indented objects one
    after another."""
    text = path.read_text()
    try:
        return [json.loads(s) for s in text.splitlines() if s.strip()]
    except json.JSONDecodeError:
        pass
    dec, out, k = json.JSONDecoder(), [], 0
    while text[k:].strip():
        k += len(text[k:]) - len(text[k:].lstrip())
        obj, k = dec.raw_decode(text, k)
        out.append(obj)
    return out


BENCH = {p.name: _runs(p) for p in sorted((DATA / "bench").glob("*.json*"))}
LINES = [(name, i) for name, runs in BENCH.items() for i in range(len(runs))]
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors", "start_times")
DETAILED = [(name, i) for name, i in LINES if isinstance(BENCH[name][i], dict)
            and any(isinstance(BENCH[name][i].get(k), list) for k in DETAIL_KEYS)]
DP_LOGS = ("sglang-0.4.9-swa-eagle-dp.log", "sglang-0.5.23-dspark-dp.log")
LOGS = [p for p in sorted((DATA / "logs").glob("sglang-*.log")) if p.name not in DP_LOGS]
TRACES = {"azure-2023-code.csv": "azure", "azure-2024-code-week.csv": "azure", "burstgpt.csv": "burstgpt",
          "mooncake-conversation.jsonl": "mooncake"}
TINY_RUN = {"backend": "sglang", "dataset_name": "random", "request_rate": math.inf, "max_concurrency": None,
            "random_input_len": 64, "random_output_len": 8, "random_range_ratio": 1.0, "duration": 0.2,
            "completed": 2, "total_input_tokens": 128, "total_output_tokens": 16, "median_ttft_ms": 20.0,
            "median_itl_ms": 5.0, "output_throughput": 80.0}
"""A two-request run to go with a server log through calibrate (tests/test_real_files_cli.py)."""
PROFILE = "h200-1b.yaml"
"""The profile the commands run with: a refusal that simulating a run brings (a chain drafter
the profile cannot price, found as the run is built) names it rather than the result file."""


# ------------------------------------------------------------------ running the CLI

@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    """A fresh empty working directory for one example (hypothesis runs many examples in one
    test, so pytest's per-test tmp_path and monkeypatch do not fit)."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(here)


def _cli(argv: list[str], where: Path, names: tuple[str, ...]) -> int:
    """Run ``specsched argv`` in-process in ``where`` and check the invariant: status 0 or 2,
    no traceback; on 2 one error line naming one of ``names`` (the files the user gave), and
    nothing new in ``where``. Returns the status."""
    before = {p.name for p in where.iterdir()}
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:   # argparse's refusals
            rc = e.code
    text = err.getvalue()
    assert rc in (0, 2), f"exit {rc} for {argv}:\n{text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    if rc == 2:
        errors = [x for x in text.splitlines() if ": error: " in x]
        assert len(errors) == 1, text[-3000:]
        assert not [x for x in text.splitlines() if x.strip() and not x.startswith(("specsched", "warning:", "note:",
                                                                                       "assumed:"))], text[-3000:]
        assert any(n in errors[0] for n in names), (names, errors[0])
        assert {p.name for p in where.iterdir()} == before, sorted(p.name for p in where.iterdir())
    return rc


# ------------------------------------------------------------------ damaged values

ODD = [None, "", "x", "12", "NaN", "a\nb", "\u2028", "../x", -1, 0, -0.0, 1.5, -1e300, 1e308, 10**30, 2**63, True,
       False, math.nan, math.inf, -math.inf, [], [1, 2], [None], ["a"], [[1]], {}, {"a": 1}, {"value": [1]}]
VALUES = st.one_of(st.sampled_from(ODD), st.integers(-10**20, 10**20), st.text(max_size=8),
                   st.floats(allow_nan=True, allow_infinity=True), st.lists(st.sampled_from(ODD), max_size=3))


def _paths(obj: Any, pre: tuple = ()) -> Iterator[tuple]:
    """Every key path of a JSON value (a list's first three items only)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*pre, k)
            yield from _paths(v, (*pre, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield (*pre, i)
            yield from _paths(v, (*pre, i))


@st.composite
def damaged_run(draw: Any, lines: list[tuple[str, int]] = LINES) -> tuple[str, int, list[Any]]:
    """(fixture, run index, its runs) with one to three of the run's values damaged: a key
    dropped, a value replaced, a list cut short or grown."""
    name, i = draw(st.sampled_from(lines))
    runs = copy.deepcopy(BENCH[name])
    run = runs[i]
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(run))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        damage_at(draw, run, path, draw(st.sampled_from(["drop", "set", "set", "cut", "grow"])))
    return name, i, runs


def damage_at(draw: Any, obj: Any, path: tuple, op: str) -> None:
    """Damage ``obj`` in place at ``path`` (from :func:`_paths`) by ``op``: ``drop`` the key,
    ``cut`` a list short or ``grow`` it by its last item, ``scale`` a number (or a list of
    them) by 0, 1e-9, 0.5, 2 or 1e6, keeping its type and shape; ``set``, or an op the value
    does not take (a list op on a number, a drop in a list), replaces it with one of
    :data:`VALUES`."""
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if op == "drop" and isinstance(parent, dict):
        del parent[key]
    elif op in ("cut", "grow") and isinstance(parent[key], list) and parent[key]:
        lst = parent[key]
        if op == "cut":
            del lst[draw(st.integers(0, len(lst) - 1)):]
        else:
            lst.append(lst[-1])
    elif op == "scale" and _numbers(parent[key]):
        parent[key] = _scaled(parent[key], draw(st.sampled_from([0.0, 1e-9, 0.5, 2.0, 1e6])))
    else:
        parent[key] = draw(VALUES)


def _numbers(v: Any) -> bool:
    """A number, or a (nested) list of them, that :func:`_scaled` can multiply."""
    if isinstance(v, bool):
        return False
    return isinstance(v, (int, float)) or (isinstance(v, list) and bool(v) and all(_numbers(x) for x in v))


def _scaled(v: Any, k: float) -> Any:
    """``v`` (a number or nested list of numbers) times ``k``, ints kept ints where they stay whole."""
    if isinstance(v, list):
        return [_scaled(x, k) for x in v]
    return type(v)(v * k) if isinstance(v, int) and float(v * k).is_integer() else v * k


def _write_runs(where: Path, name: str, runs: list[Any]) -> Path:
    p = where / ("m-" + name)
    p.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return p


@fuzz(150)
@given(damaged_run())
def test_fuzz_scenario_from_bench_of_a_damaged_run(case):
    name, i, runs = case
    with _workdir() as w:
        p = _write_runs(w, name, runs)
        _cli(["scenario", "from-bench", f"{p}:{i + 1}", "--profile", "h200-1b", "--out", "s.yaml"], w, (p.name,))


@fuzz(25)
@given(damaged_run())
def test_fuzz_validate_measured_of_a_damaged_run(case):
    name, i, runs = case
    with _workdir() as w:
        p = _write_runs(w, name, runs)
        _cli(["validate", "--measured", f"{p}:{i + 1}", "--profile", "h200-1b", "--seeds", "1",
              "--set", "workload.num_requests=8", "--out", "v", "-q"], w, (p.name, PROFILE))


@fuzz(20)
@given(damaged_run())
def test_fuzz_calibrate_from_a_damaged_run(case):
    name, i, runs = case
    with _workdir() as w:
        p = _write_runs(w, name, runs)
        _cli(["calibrate", "--from", f"{p}:{i + 1}", "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
              "--max-evals", "1", "--out", "f.yaml", "-q"], w, (p.name, PROFILE))


@st.composite
def mismatched_details(draw: Any) -> tuple[str, int, list[Any]]:
    """A run with per-request details whose lists disagree in length (one cut, one grown, or
    one of another type's items)."""
    name, i = draw(st.sampled_from(DETAILED))
    runs = copy.deepcopy(BENCH[name])
    run = runs[i]
    keys = [k for k in DETAIL_KEYS if isinstance(run.get(k), list)]
    for key in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True)):
        lst, op = run[key], draw(st.sampled_from(["cut", "grow", "empty", "items"]))
        if op == "cut" and lst:
            del lst[draw(st.integers(0, len(lst) - 1)):]
        elif op == "grow":
            lst.extend(lst[-1:] * draw(st.integers(1, 3)) or [0])
        elif op == "empty":
            run[key] = []
        else:
            run[key] = [draw(VALUES) for _ in lst]
    return name, i, runs


@fuzz(50)
@given(mismatched_details(), st.sampled_from(["from-bench", "from-bench", "validate"]))
def test_fuzz_per_request_details_of_mismatched_lengths(case, command):
    name, i, runs = case
    with _workdir() as w:
        p = _write_runs(w, name, runs)
        spec = f"{p}:{i + 1}"
        argv = (["scenario", "from-bench", spec, "--profile", "h200-1b", "--out", "s.yaml"] if command == "from-bench"
                else ["validate", "--measured", spec, "--profile", "h200-1b", "--seeds", "1",
                      "--set", "workload.num_requests=8", "--out", "v", "-q"])
        _cli(argv, w, (p.name, PROFILE))


# ------------------------------------------------------------------ damaged bytes

def _damaged_bytes(text: str, how: str, cut: int) -> bytes:
    """``text`` (a fixture) damaged as ``how`` says; ``cut`` a fraction (0-999) of its length."""
    at = len(text) * cut // 1000
    first = text.split("\n", 1)[0]
    return {
        "empty": b"",
        "blank": b" \n\r\n\t\n",
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
        "cut": text[:at].encode(),
        "cut-line": (first[:len(first) * cut // 1000] + "\n").encode(),
        "nul": text[:at].encode() + b"\x00" + text[at:].encode(),
        "bad-utf8": text[:at].encode() + b"\xff\xfe\xc3" + text[at:].encode(),
        "latin-1": text.replace('"', '"\u00e9', 1).encode("latin-1", "replace"),
        "utf-16-no-bom": text.encode("utf-16-le"),
        "utf-32": text.encode("utf-32"),
        "surrogate": text.replace('"', '"\\ud800', 1).encode(),
        "duplicate-key": text.replace("{", '{"completed": "x", "duration": [], ', 1).encode(),
        "duplicate-key-after": re.sub(r"\}\s*$", ', "completed": null, "duration": -1}\n', text, count=1).encode(),
        "big-int": text.replace(": 1", ": 1" + "9" * 5000, 1).encode(),
        "deep": ("[" * 50_000).encode(),
        "scalar": b"42\n",
        "list-of-lists": b"[[1, 2], [3]]\n",
        "doubled": (text[:at] + text).encode(),
    }[how]


HOW = ["empty", "blank", "binary", "cut", "cut-line", "nul", "bad-utf8", "latin-1", "utf-16-no-bom", "utf-32",
       "surrogate", "duplicate-key", "duplicate-key-after", "big-int", "deep", "scalar", "list-of-lists", "doubled"]


@fuzz(60)
@given(st.sampled_from(sorted(BENCH)), st.sampled_from(HOW), st.integers(0, 999),
       st.sampled_from(["from-bench", "from-bench", "from-bench", "validate-bench", "calibrate"]))
def test_fuzz_a_damaged_result_file(name, how, cut, command):
    with _workdir() as w:
        p = w / ("d-" + name)
        p.write_bytes(_damaged_bytes((DATA / "bench" / name).read_text(), how, cut))
        argv = {"from-bench": ["scenario", "from-bench", f"{p}:1", "--profile", "h200-1b", "--out", "s.yaml"],
                "validate-bench": ["validate-bench", f"{p}:1", "--profile", "h200-1b", "--seeds", "1",
                                   "--set", "workload.num_requests=8", "--out", "v", "-q"],
                "calibrate": ["calibrate", "--from", str(p), "--profile", "h200-1b", "--params", "decode",
                              "--seeds", "1", "--max-evals", "1", "--out", "f.yaml", "-q"]}[command]
        _cli(argv, w, (p.name, PROFILE))


# ------------------------------------------------------------------ server logs

GARBLED = ["-5", "0", "-0", "1e999", "9" * 40, "nan", "inf", "1.2.3", "", ".", "-", "1e-400", "x", "-1e308",
           "4294967296", "True"]
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@st.composite
def garbled_log(draw: Any) -> tuple[str, str]:
    """(fixture name, its text) with numbers of its "Prefill batch"/"Decode batch" lines
    garbled, fields dropped, stamps made impossible or lines cut short."""
    p = draw(st.sampled_from(LOGS))
    lines = p.read_text().split("\n")
    batch = [i for i, x in enumerate(lines) if "batch" in x]
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.sampled_from(batch))
        line, op = lines[i], draw(st.sampled_from(["number", "number", "number", "drop", "cut", "stamp", "append"]))
        numbers = list(_NUMBER.finditer(line))
        if op == "number" and numbers:
            m = draw(st.sampled_from(numbers))
            line = line[:m.start()] + draw(st.sampled_from(GARBLED)) + line[m.end():]
        elif op == "drop":
            parts = line.split(", ")
            if len(parts) > 2:
                del parts[draw(st.integers(1, len(parts) - 1))]
            line = ", ".join(parts)
        elif op == "cut":
            line = line[:draw(st.integers(0, len(line)))]
        elif op == "stamp":
            line = re.sub(r"\d\d:\d\d:\d\d", draw(st.sampled_from(["25:61:99", "00:00:00", "99:99:99"])), line, count=1)
        else:
            line += ", " + draw(st.sampled_from(["#token", "#running-req", "gen throughput (token/s)", "accept len"])) \
                + ": " + draw(st.sampled_from(GARBLED))
        lines[i] = line
    if draw(st.booleans()):
        lines.reverse()   # time going back
    return p.name, "\n".join(lines)


@fuzz(25)
@given(garbled_log())
def test_fuzz_calibrate_with_a_garbled_server_log(case):
    name, text = case
    with _workdir() as w:
        log = w / ("g-" + name)
        log.write_text(text)
        spec = "accept len" in text or "accept_len" in text
        (w / "run.jsonl").write_text(json.dumps(TINY_RUN | ({"accept_length": 3.0} if spec else {})) + "\n")
        _cli(["calibrate", "--from", "run.jsonl", "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
              "--max-evals", "1", "--server-log", str(log), "--out", "f.yaml", "-q"], w, (log.name, "run.jsonl"))


# ------------------------------------------------------------------ traces

CELLS = ["", " ", "-1", "-0.5", "0", "x", "nan", "inf", "-inf", "1e999", "1.5", "9" * 25, "2023-13-45 99:00:00",
         "1970-01-01", "true", "null", '"1,2"', "0x10", "1e-9"]
JSON_CELLS = [None, "", "x", "12", -1, 0, 1.5, math.nan, math.inf, 10**30, 2**70, [], [1], [-1], ["a"], [None],
              [1.5], {}, {"a": 1}, True]


@st.composite
def damaged_trace(draw: Any) -> tuple[str, str, str]:
    """(fixture name, layout, text): the fixture's first rows with cells replaced or missing,
    a column dropped, a row grown, or the text cut short."""
    name = draw(st.sampled_from(sorted(TRACES)))
    lines = (DATA / "traces" / name).read_text().split("\n")[:10]
    if name.endswith(".csv"):
        rows = [x.split(",") for x in lines]
        for _ in range(draw(st.integers(1, 3))):
            r = draw(st.integers(0, len(rows) - 1))
            op = draw(st.sampled_from(["cell", "cell", "cell", "delete", "column", "grow"]))
            if op == "cell" and rows[r]:
                rows[r][draw(st.integers(0, len(rows[r]) - 1))] = draw(st.sampled_from(CELLS))
            elif op == "delete" and rows[r]:
                del rows[r][draw(st.integers(0, len(rows[r]) - 1))]
            elif op == "column":
                c = draw(st.integers(0, len(rows[0]) - 1))
                for row in rows:
                    del row[c:c + 1]
            else:
                rows[r].append("5")
        text = "\n".join(",".join(x) for x in rows)
    else:
        objs = [json.loads(x) for x in lines if x.strip()]
        for _ in range(draw(st.integers(1, 3))):
            o = draw(st.sampled_from(objs))
            key = draw(st.sampled_from([*o, "extra"]))
            if draw(st.booleans()):
                o.pop(key, None)
            else:
                o[key] = draw(st.sampled_from(JSON_CELLS))
        text = "\n".join(json.dumps(o) for o in objs)
    if draw(st.integers(0, 9)) == 0:
        text = text[:draw(st.integers(0, len(text)))]
    return name, TRACES[name], text


@fuzz(50)
@given(damaged_trace(), st.sampled_from([None, 4]))
def test_fuzz_a_trace_replay_of_a_damaged_trace(case, num_requests):
    name, layout, text = case
    with _workdir() as w:
        trace = w / ("t-" + name)
        trace.write_text(text)
        workload: dict[str, Any] = {"kind": "trace", "trace": {"path": trace.name, "layout": layout}}
        if num_requests:
            workload["num_requests"] = num_requests
        (w / "s.yaml").write_text(yaml.safe_dump({"name": "s", "profile": "h200-llama8b-roofline",
                                                  "workload": workload}))
        _cli(["run", "s.yaml", "--out", "o"], w, (trace.name, "s.yaml"))


# ------------------------------------------------------------------ regressions the fuzzing found

def test_a_lone_surrogate_escape_in_a_result_line_is_read_as_a_damaged_character(tmp_path, capsys, monkeypatch):
    """JSON allows ``"\\ud800"``, a UTF-16 surrogate alone, and Python decodes it to a string
    nothing can encode as UTF-8: a run tagged so ended scenario from-bench, validate and plot
    in a UnicodeEncodeError traceback. The reader now shows it as U+FFFD, as a damaged UTF-8
    byte is shown; a pair of escapes is still the one character it encodes."""
    from specsched.sim.bench_serving import read_bench_one
    from specsched.sim.input_files import json_at, json_value

    assert json_value('{"a\\ud800": ["x\\udc00y", {"t": "\\ud83d\\ude00"}], "b": "\\\\ud800"}') == \
        {"a\ufffd": ["x\ufffdy", {"t": "\U0001f600"}], "b": "\\ud800"}
    assert json_at(' "\\udfff" 1', 1) == ("\ufffd", 9)
    monkeypatch.chdir(tmp_path)
    run = BENCH["sglang-0.5.23-details.jsonl"][0] | {"tag": "\ud800", "generated_texts": ["\udc00"] * 4}
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(run) + "\n")   # ensure_ascii: written as the escapes
    assert read_bench_one(p).extra["tag"] == "\ufffd"
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", "s.yaml"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    yaml.safe_load((tmp_path / "s.yaml").read_text(encoding="utf-8"))
    assert main(["plot", str(p), "--out", "p"]) == 0


def _with_server_info(tmp_path: Path, **info: Any) -> Path:
    """sglang-0.5.10.jsonl's run with ``info`` over its server_info, as runs.jsonl."""
    run = copy.deepcopy(BENCH["sglang-0.5.10.jsonl"][0])
    run["server_info"].update(info)
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(run) + "\n")
    return p


def test_a_cuda_graph_max_bs_past_int64_lists_no_batch_size_past_max_running_requests(tmp_path, capsys, monkeypatch):
    """A server_info's cuda_graph_max_bs of 2**63 (SGLang clamps it to max_running_requests)
    listed SGLang's default graph batch sizes up to it, 2.9e17 of them: calibrate --from and
    validate --measured ended in a MemoryError traceback. The list now stops at
    max_running_requests, where it was cut anyway; the sizes are the same for every smaller
    value."""
    from specsched.sim.server_args import ServerArgs

    assert ServerArgs(cuda_graph_max_bs=2**63, max_running_requests=48).graph_batch_sizes == \
        [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert ServerArgs(cuda_graph_max_bs=2**63, max_running_requests=300, speculative_algorithm="dspark",
                      speculative_num_draft_tokens=4).graph_batch_sizes[-3:] == [272, 288, 300]
    assert ServerArgs(cuda_graph_max_bs=600, max_running_requests=1000).graph_batch_sizes[-3:] == [544, 576, 600]
    monkeypatch.chdir(tmp_path)
    p = _with_server_info(tmp_path, cuda_graph_max_bs=2**63)
    assert main(["calibrate", "--from", str(p), "--profile", "h200-1b", "--params", "decode", "--seeds", "1",
                 "--max-evals", "1", "--out", "f.yaml", "-q"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_pool_past_int64_or_a_prefill_graph_past_int32_is_refused_or_left_out(tmp_path, capsys, monkeypatch):
    """max_total_num_tokens 2**63 (a scenario's, or a server_info's the built scenario kept)
    raised OverflowError mid-run (sim/served.py output_cut); cuda_graph_max_bs_prefill 2**63
    listed every 512th token bucket up to it (MemoryError). Each now has its bound (2**63 - 1,
    an int64; 2**31 - 1, as chunked_prefill_size): a scenario's is refused in one line naming
    the key, a server_info's left out of the built scenario with a note."""
    monkeypatch.chdir(tmp_path)
    for key, bound in (("max_total_num_tokens", 2**63 - 1), ("cuda_graph_max_bs_prefill", 2**31 - 1)):
        assert main(["run", "batch8-ll", "--set", f"server.{key}={2**63}", "--out", "o", "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"server.{key} = {2**63}" in err[0] and f"<= {bound}" in err[0], err
        p = _with_server_info(tmp_path, **{key: 2**63})
        assert main(["validate", "--measured", str(p), "--profile", "h200-1b", "--seeds", "1",
                     "--set", "workload.num_requests=8", "--out", f"v-{key}", "-q"]) == 0
        assert f"server_info {key} = {2**63} not usable by the model: left out" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()
