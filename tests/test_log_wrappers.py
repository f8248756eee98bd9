"""A server log as a container runtime keeps it: Docker's json-file driver and the CRI
(containerd, CRI-O: Kubernetes' ``/var/log/pods/.../0.log``) wrap each line in a record and
split a line past 16 KiB into several records. Read through ``analysis.log_lines``."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pandas as pd
import pytest
from specsched.analysis.server_log import decode_step_samples, is_server_log, parse_server_log

DATA = Path(__file__).parent / "data"
LOGS = DATA / "logs"
LAUNCH = LOGS / "sglang-0.5.23-launch.log"
COLS = ["line", "time", "rank", "kind", "running_req", "queue_req", "token", "gen_throughput", "new_token"]
CHUNK = 16 * 1024
"""Docker's json-file driver (moby daemon/logger/copier.go ``defaultBufSize``) and containerd's
CRI logger (``max_container_log_line_size``, default 16384) cut a longer line into pieces of this
many bytes: only the last piece ends the line."""


def _pieces(line: str) -> list[str]:
    return [line[k:k + CHUNK] for k in range(0, len(line), CHUNK)] or [line]


def _docker(lines: list[str]) -> str:
    out = []
    for i, line in enumerate(lines):
        for piece in _pieces(line):
            out.append(json.dumps({"log": piece, "stream": "stderr", "time": f"2026-03-02T08:02:{i % 60:02d}.5Z"}))
    return "\n".join(out) + "\n"


def _cri(lines: list[str]) -> str:
    out = []
    for i, line in enumerate(lines):
        text = line.removesuffix("\n")
        pieces = _pieces(text)
        for k, piece in enumerate(pieces):
            tag = "F" if k == len(pieces) - 1 else "P"
            out.append(f"2026-03-02T08:02:{i % 60:02d}.123456789Z stderr {tag} {piece}")
    return "\n".join(out) + "\n"


def test_a_docker_json_log_joins_a_launch_line_split_into_16k_records(tmp_path):
    """0.5.23's ``server_args=`` line (every ServerArgs field) is past 16 KiB: Docker writes it
    as two records, only the last ending in a line end. The first record alone was read, and
    the 46 arguments in the second were lost (the fit ran them at specsched's defaults)."""
    lines = LAUNCH.read_text().splitlines(keepends=True)
    assert max(len(x) for x in lines) > CHUNK   # the fixture has such a line
    wrapped = tmp_path / "0123abcd-json.log"
    wrapped.write_text(_docker(lines))
    plain, log = parse_server_log(LAUNCH), parse_server_log(wrapped)
    assert is_server_log(wrapped)
    assert log.attrs["server_info"] == plain.attrs["server_info"]
    assert len(log) == len(plain) and (log["kind"] == plain["kind"]).all()


def test_a_kubernetes_cri_log_is_read_as_the_plain_one(tmp_path):
    """containerd/CRI-O write ``<RFC3339 time> <stream> <P|F> <text>``, a line past 16 KiB as
    ``P`` pieces ended by an ``F`` one. The launch line's pieces are joined; each batch line
    reads as in the plain log, numbered by its line in the file."""
    lines = LAUNCH.read_text().splitlines(keepends=True)
    wrapped = tmp_path / "0.log"
    wrapped.write_text(_cri(lines))
    plain, log = parse_server_log(LAUNCH), parse_server_log(wrapped)
    assert is_server_log(wrapped)
    assert log.attrs["server_info"] == plain.attrs["server_info"]
    cols = [c for c in COLS if c != "line"]
    assert log[cols].equals(plain[cols])
    assert (log["line"] == plain["line"] + 1).all()   # the launch line took two lines of the file


def test_a_cut_last_record_is_left_out_as_a_cut_line(tmp_path, capsys):
    """A Docker log copied while the server wrote it: the last record's text has no line end
    (a piece whose rest was never written): its batch line is left out with a warning."""
    lines = (LOGS / "sglang-0.5.23.log").read_text().splitlines(keepends=True)[:-1]   # ends at a batch line
    lines[-1] = lines[-1].removesuffix("\n")
    assert "Decode batch" in lines[-1]
    wrapped = tmp_path / "x-json.log"
    wrapped.write_text(_docker(lines))
    log = parse_server_log(wrapped)
    assert len(log) == len(parse_server_log(LOGS / "sglang-0.5.23.log")) - 1
    assert "cut short" in capsys.readouterr().err


def test_a_result_quoting_a_batch_line_is_not_a_server_log(tmp_path):
    """A bench_serving ``--output-details`` line whose ``generated_texts`` (a model asked about
    a log) or ``errors`` quote a "Decode batch" line is a result: the JSON line is judged
    before the batch text in it (it was taken for the server log, and ``calibrate --from``
    refused the fit as "an SGLang server log alone")."""
    line = json.loads((DATA / "bench" / "sglang-0.5.23-details.jsonl").read_text().splitlines()[0])
    line["generated_texts"][0] = ("[2026-03-02 08:01:02 TP0] Decode batch, #running-req: 16, #token: 18640, "
                                  "token usage: 0.05, gen throughput (token/s): 1066.67, #queue-req: 0")
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps(line) + "\n")
    assert not is_server_log(f)
    from specsched.analysis.calibrate_bench import split_server_log

    assert split_server_log([str(f)], None) == ([str(f)], [])


def test_colour_escapes_around_the_logger_prefix_keep_each_lines_rank(tmp_path):
    """``docker compose logs --ansi always`` (or a log kept by ``script``) colours the service
    name, and a coloured formatter the logger's prefix: with an escape between the prefix and
    "Prefill batch", the DP rank was lost, and two DP-attention ranks' lines were read as one
    rank's (each decode line a sample after the other rank's)."""
    plain = LOGS / "sglang-0.5.23-dspark-dp.log"
    coloured = tmp_path / "dp.log"
    coloured.write_text("".join(
        line.replace("sglang-1  | ", "\x1b[36msglang-1  |\x1b[0m ").replace("[", "\x1b[32m[", 1).replace("] ", "]\x1b[0m ", 1)
        for line in plain.read_text().splitlines(keepends=True)))
    assert "\x1b[0m Decode batch" in coloured.read_text()
    assert parse_server_log(coloured)[COLS].equals(parse_server_log(plain)[COLS])


def test_a_printed_report_kept_by_a_container_runtime_is_read_as_printed(tmp_path):
    """bench_serving's stdout kept by Docker's json-file driver, the CRI (a Kubernetes job's
    ``0.log``) or ``kubectl logs --timestamps``: the report was refused ("not bench_serving
    output: none of completed, ..." for Docker's records; "printed report without its run's size"
    for the others, whose rows start with the runtime's time). Read as the plain stdout."""
    from specsched.sim.bench_serving import read_bench

    from tests.test_bench_printed_report import _NAMESPACE, _report

    lines = [_NAMESPACE, "", *_report()]
    plain = tmp_path / "bench.log"
    plain.write_text("\n".join(lines) + "\n")
    want = read_bench(plain)[0]
    wrapped = {
        "docker-json.log": "".join(json.dumps({"log": x + "\n", "stream": "stdout", "time": "2026-03-02T08:02:00Z"}) + "\n"
                                   for x in lines),
        "cri.log": "".join(f"2026-03-02T08:02:{i:02d}.123456789Z stdout F {x}\n" for i, x in enumerate(lines)),
        "kubectl-t.log": "".join(f"2026-03-02T08:02:{i:02d}.123456789Z {x}\n" for i, x in enumerate(lines)),
    }
    for name, text in wrapped.items():
        f = tmp_path / name
        f.write_text(text)
        (run,) = read_bench(f)
        assert run.summary == want.summary and run.args == want.args, name
        assert run.source == f"{f}:3", name   # the title's line, as in the plain file


def test_logs_joined_out_of_order_are_said(tmp_path, capsys):
    """``cat server.log server.log.1``: the newer file before the rotated, older one. The batch
    lines go back in time at the seam; one warning names the line (it was read without a word,
    the seam's decode line timed against a line logged after it)."""
    plain = (LOGS / "sglang-0.5.23.log").read_text()
    older = plain.replace("2026-03-02 08:01", "2026-03-02 07:01")
    joined = tmp_path / "joined.log"
    joined.write_text(plain + older)
    parse_server_log(joined)
    err = capsys.readouterr().err.strip().splitlines()
    n = len(plain.splitlines())
    assert len(err) == 1 and f"joined.log:{n + 4}: logged at 2026-03-02 07:01:00.004" in err[0], err
    assert "joined out of order" in err[0]
    in_order = tmp_path / "in-order.log"
    in_order.write_text(older + plain)
    parse_server_log(in_order)
    assert not capsys.readouterr().err
    parse_server_log(LOGS / "sglang-0.3.0.log")   # time-only stamps: no date to order by
    assert not capsys.readouterr().err


def test_a_log_joined_with_itself_is_read_once_in_one_line(tmp_path, capsys):
    """``cat server.log server.log`` (or a log a user appended twice, or a snapshot followed by
    the later, longer copy): the second copy's batch lines go back to the first's times and
    repeat them field for field. Each decode step was a sample twice and the seam was said as
    logs joined out of order; the copy is now read once, said in one line naming both ranges."""
    plain = (LOGS / "sglang-0.5.23.log").read_text()
    n = len(plain.splitlines())
    once = parse_server_log(LOGS / "sglang-0.5.23.log")
    capsys.readouterr()
    twice = tmp_path / "both.log"
    twice.write_text(plain + plain)
    log = parse_server_log(twice)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"both.log:{n + 4}: from here the log repeats itself: batch lines {n + 4}-{n + 8} are " \
        "lines 4-8 again" in err[0] and "5 of 10 batch lines left out" in err[0], err
    assert log[COLS].equals(once[COLS])
    assert len(decode_step_samples(log)) == len(decode_step_samples(once)) == 2
    # a snapshot, then the whole log copied later (the first copy repeated, then new lines)
    more = plain.replace("08:01:0", "08:02:0").replace("[1", "[2")
    longer = tmp_path / "snapshot-then-all.log"
    longer.write_text(plain + plain + more)
    log = parse_server_log(longer)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "repeats itself" in err[0] and len(log) == 10 and log["time"].is_monotonic_increasing
    # 0.2.x logged no time: the copy is known by the server's start-up line before it
    dp = (LOGS / "sglang-0.2.9-dp.log").read_text()
    undated = tmp_path / "undated.log"
    undated.write_text(dp + dp)
    assert parse_server_log(undated)[["rank", "kind", "token"]].equals(
        parse_server_log(LOGS / "sglang-0.2.9-dp.log")[["rank", "kind", "token"]])
    assert "repeats itself" in capsys.readouterr().err


def test_a_second_launch_in_one_log_is_not_a_copy(tmp_path, capsys):
    """A server restarted with its log appended (``>>``): the same start-up and the same
    batch figures again, later in time, are the second launch's own lines, all read."""
    plain = (LOGS / "sglang-0.5.23.log").read_text()
    later = tmp_path / "two-launches.log"
    later.write_text(plain + plain.replace("2026-03-02", "2026-03-03"))
    assert len(parse_server_log(later)) == 10 and not capsys.readouterr().err


LINE_MAX = 48 * 1024
"""journald's default LineMax= (journald.conf): a longer line is stored as records of this many
bytes, the last one shorter (systemd journald-stream.c ``stdout_stream_scan``)."""


def _long_launch() -> list[str]:
    """The 0.5.23 launch log with its ``server_args=`` line past 48 KiB: a long JSON
    ``--json-model-override-args`` before every other argument, so ``tp_size`` and the rest
    come after journald's cut."""
    lines = LAUNCH.read_text().splitlines(keepends=True)
    k = next(i for i, x in enumerate(lines) if "server_args={" in x)
    override = json.dumps({f"expert_{i}": {"scale": i / 7} for i in range(2500)})
    lines[k] = lines[k].replace("server_args={", f"server_args={{'json_model_override_args': {override!r}, ", 1)
    assert len(lines[k]) > 2 * LINE_MAX
    return lines


@pytest.mark.parametrize("form", ["short", "short-iso", "cat", "json"])
def test_a_journal_export_joins_a_line_journald_cut_at_line_max(tmp_path, form):
    """``journalctl -u sglang > server.log`` of a server whose ``server_args=`` line is past
    journald's LineMax: the journal holds it as 48 KiB records, each printed as a record of its
    own. The first record alone was read: every argument after the cut was lost, and the one
    it cut through read short (a cut number kept its first digits)."""
    lines = _long_launch()
    plain = tmp_path / "plain.log"
    plain.write_text("".join(lines))
    heads = {"short": "Mar 02 07:59:50 gpu-node-1 python3[4242]: ",
             "short-iso": "2026-03-02T07:59:50+0000 gpu-node-1 python3[4242]: ", "cat": ""}
    out = []
    for line in lines:
        text = line.removesuffix("\n")
        pieces = [text[k:k + LINE_MAX] for k in range(0, len(text), LINE_MAX)] or [""]
        for n, piece in enumerate(pieces):
            if form == "json":
                rec = {"__CURSOR": f"s=1;i={len(out)}", "_HOSTNAME": "gpu-node-1", "SYSLOG_IDENTIFIER": "python3",
                       "_PID": "4242", "MESSAGE": piece}
                out.append(json.dumps(rec | ({"_LINE_BREAK": "line-max"} if n < len(pieces) - 1 else {})))
            else:
                out.append(heads[form] + piece)
        if form == "short":   # another process's record between the pieces' lines is no piece of them
            out.append("Mar 02 07:59:50 gpu-node-1 systemd[1]: Started sglang.service.")
    journal = tmp_path / "journal.log"
    journal.write_text("\n".join(out) + "\n")
    want, got = parse_server_log(plain), parse_server_log(journal)
    assert got.attrs["server_info"] == want.attrs["server_info"]
    assert want.attrs["server_info"]["tp_size"] == 1 and "page_size" in want.attrs["server_info"]
    assert len(got) == len(want) and (got["kind"] == want["kind"]).all()
    assert is_server_log(journal)


def test_a_server_args_line_cut_short_reads_no_cut_value():
    """A ``server_args=`` text cut inside its last value (a log cut at a size limit) read that
    value short: ``'chunked_prefill_size': 81`` of 8192."""
    from specsched.analysis.server_launch import server_args_text

    assert server_args_text("{'tp_size': 2, 'chunked_prefill_size': 81") == {"tp_size": 2}
    assert server_args_text("ServerArgs(tp_size=2, page_size=1") == {"tp_size": 2}
    assert server_args_text("{'tp_size': 2, 'chunked_prefill_size': 8192}") == {"tp_size": 2, "chunked_prefill_size": 8192}


def test_a_clock_set_back_an_hour_is_said_as_a_possible_clock_change(tmp_path, capsys):
    """SGLang stamps local time: at daylight saving's end the stamps go back an hour with the
    lines in order, which was said only as logs joined out of order. A jump of another size
    keeps the plain wording."""
    plain = (LOGS / "sglang-0.5.23.log").read_text()
    for back, clock in (("07:01", True), ("06:01", False)):
        joined = tmp_path / f"back-{back}.log"
        joined.write_text(plain + plain.replace("2026-03-02 08:01", f"2026-03-02 {back}"))
        parse_server_log(joined)
        err = capsys.readouterr().err
        assert ("daylight saving" in err) is clock and "joined out of order" in err, err


def test_validate_names_a_streamed_lines_folder_as_from_bench_names_its_scenario():
    """``-:3`` gave results/validate-bench/stdin-line3 under validate and
    bench_serving-line3.yaml under scenario from-bench: one name for a stream in both."""
    from specsched.analysis.bench_cli import validate_bench_stem

    assert validate_bench_stem("/dev/stdin") == "bench_serving"
    assert validate_bench_stem("runs/rate4.jsonl") == "rate4"


def _by_time(*logs: tuple[str, Path]) -> list[str]:
    """The lines of several servers' logs as ``docker compose logs`` gives them: each behind its
    service's ``name  | `` prefix, merged in time order (the logger's stamp)."""
    rows = [(line[1:20], k, f"{name:<10} | {line}") for k, (name, path) in enumerate(logs)
            for line in path.read_text().splitlines()]
    return [r[2] for r in sorted(rows)]


def test_a_compose_log_of_a_prefill_and_a_decode_server_times_each_servers_lines_apart(tmp_path, capsys):
    """Both servers' ranks are ``TP0`` (each SGLang server numbers its own from 0), so their lines
    in one ``docker compose logs`` file read as one rank's: each decode line followed the other
    server's prefill line and gave no pure-decode sample (calibrate from the log refused it: "none
    timing a pure decode step"). The wrapper's service name now tells the servers apart."""
    decode = LOGS / "sglang-0.5.10-pd-decode-mamba.log"
    prefill = tmp_path / "prefill.log"   # its batches logged while the decode server decodes
    prefill.write_text((LOGS / "sglang-0.5.10-pd-prefill.log").read_text().replace("11:00:00 TP0", "11:00:10 TP0")
                       .replace("11:00:01 TP0", "11:00:10 TP0"))
    lines = _by_time(("decode-1", decode), ("prefill-1", prefill))
    f = tmp_path / "compose.log"
    f.write_text("\n".join(lines) + "\n")
    log = parse_server_log(f)
    alone = decode_step_samples(parse_server_log(decode))
    got = decode_step_samples(log)
    assert len(alone) and got.drop(columns="line").equals(alone.drop(columns="line"))
    assert set(log["source"]) == {"prefill-1 |", "decode-1 |"}
    assert "warning" not in capsys.readouterr().err


def test_a_per_line_number_before_the_prefix_is_no_server(tmp_path):
    """``grep -n batch server.log`` puts each line's number before it, a shipper may put a
    record id: neither names a server, so the decode lines keep their samples."""
    text = LAUNCH.read_text().splitlines()
    plain = decode_step_samples(parse_server_log(LAUNCH))
    numbered = tmp_path / "grep.log"
    numbered.write_text("".join(f"{i}:{x}\n" for i, x in enumerate(text, start=1) if "batch" in x))
    ids = tmp_path / "ids.log"
    ids.write_text("".join(f"rec-{chr(97 + i % 26)}{chr(97 + i // 26 % 26)} {x}\n" for i, x in enumerate(text)))
    assert len(plain)
    for f in (numbered, ids):
        assert decode_step_samples(parse_server_log(f)).drop(columns="line").equals(plain.drop(columns="line"))


def _formatter_record(line: str, key: str, form: str) -> str:
    """A plain log line as a JSON logging formatter writes it: the message alone, the logger's
    time in a field of its own (``form``: how that field writes it)."""
    import re
    from datetime import datetime, timedelta

    m = re.match(r"\[(\S+ \S+?)(?: [A-Z]+\d+)*\] (.*)$", line)
    stamp, message = m.group(1), m.group(2)
    t = datetime.fromisoformat(stamp)
    utc = t.replace(tzinfo=UTC)
    value = {"asctime": stamp.replace(".", ","), "iso-z": stamp.replace(" ", "T") + "Z",
             "offset": (t + timedelta(hours=1)).isoformat() + "+01:00",
             "epoch-s": utc.timestamp(), "epoch-ms": int(round(utc.timestamp() * 1000)),
             "epoch-text": f"{utc.timestamp():.3f}"}[form]
    return json.dumps({key: value, "levelname": "INFO", "name": "sglang", "message": message})


@pytest.mark.parametrize("key, form", [("asctime", "asctime"), ("@timestamp", "iso-z"), ("timestamp", "offset"),
                                       ("ts", "epoch-s"), ("time", "epoch-ms"), ("created", "epoch-text")])
def test_a_json_formatter_log_keeps_each_lines_time(tmp_path, capsys, key, form):
    """A server logging through a JSON formatter (python-json-logger, a shipper) writes the message
    alone, its time in a field of its own: the batch figures were read but every line's time was
    NaT, so a log joined out of order or with itself read as time-less lines. The time now comes
    from the record's field (ISO 8601, logging's asctime, epoch seconds or ms; a zone put on UTC)."""
    lines = (LOGS / "sglang-0.5.23.log").read_text().splitlines()
    f = tmp_path / "server.jsonl"
    f.write_text("".join(_formatter_record(x, key, form) + "\n" for x in lines))
    plain, log = parse_server_log(LOGS / "sglang-0.5.23.log"), parse_server_log(f)
    assert log["time"].notna().all()
    assert (log["time"] - plain["time"]).abs().max() <= pd.Timedelta(milliseconds=1)
    assert decode_step_samples(log).equals(decode_step_samples(plain))
    # timed as the plain log is: lines joined out of order are said
    joined = tmp_path / "joined.jsonl"
    rows = f.read_text().splitlines(keepends=True)
    batch = [k for k, x in enumerate(rows) if "batch" in x]
    joined.write_text("".join(rows[batch[len(batch) // 2]:] + rows[:batch[len(batch) // 2]]))
    capsys.readouterr()
    parse_server_log(joined)
    assert "joined out of order" in capsys.readouterr().err


@pytest.mark.parametrize("prefixes, numbered", [(("sglang-1  | ", "sglang-2  | "), False),
                                                (("[pod/sglang-0/sglang] ", "[pod/sglang-1/sglang] "), False),
                                                (("sglang-1  | ", "sglang-2  | "), True)],
                         ids=["compose-replicas", "statefulset-pods", "grep-n-of-compose-replicas"])
def test_replicas_named_only_by_a_digit_are_told_apart(tmp_path, capsys, prefixes, numbered):
    """``docker compose logs`` of a service scaled to two replicas (``sglang-1  | ``, ``sglang-2  | ``),
    ``kubectl logs --prefix`` of a StatefulSet's pods (``sglang-0``, ``sglang-1``): the names differ
    by a digit alone, and digits were read as one ``#`` (a per-line number names no server), so
    both replicas read as one server, each decode line timed against the other replica's line
    before it: no pure-decode sample was left."""
    one = LOGS / "sglang-0.5.23.log"
    other = tmp_path / "other.log"   # the same batches, logged a little later by the second replica
    other.write_text(one.read_text().replace(":01.", ":01.5").replace(":02.", ":02.5").replace(":03.", ":03.5"))
    rows = sorted((line[1:24], k, prefixes[k] + line) for k, path in enumerate((one, other))
                  for line in path.read_text().splitlines())
    f = tmp_path / "replicas.log"
    # numbered: read through `grep -n` (each line's number before the replica's name), whose
    # digits were read as one "#" with the replica's, so both replicas read as one server again
    f.write_text("".join((f"{n}:" if numbered else "") + r[2] + "\n" for n, r in enumerate(rows, start=1)))
    log = parse_server_log(f)
    alone = decode_step_samples(parse_server_log(one))
    got = decode_step_samples(log)
    assert len(alone) and log["source"].nunique() == 2
    assert len(got) == 2 * len(alone)
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("stamp", ["{d}/03/2026", "2026/03/{d}", "2026.03.{d}", "2026-03-{d}"])
def test_one_server_logged_past_midnight_under_a_wrappers_date_is_one_server(tmp_path, stamp):
    """A wrapper's date apart from its time (``2026/03/02 08:01:00 `` of a process supervisor or
    a logger that writes slashes) is no server's name: with replicas told apart by their digits,
    a log that ran past midnight read as two servers, one a day."""
    lines = (LOGS / "sglang-0.5.23.log").read_text().splitlines()
    f = tmp_path / "dated.log"
    f.write_text("".join(f"{stamp.format(d='02' if i < len(lines) // 2 else '03')} 08:00:0{i % 10} {x}\n"
                         for i, x in enumerate(lines)))
    log = parse_server_log(f)
    assert len(log) == len(parse_server_log(LOGS / "sglang-0.5.23.log")) and log["source"].nunique() == 1


def test_a_json_records_time_field_reads_as_a_time_or_not_at_all():
    """What :func:`sim.log_lines.wrapper_time` takes for a time: ISO 8601 (logging's asctime comma,
    a zone put on UTC) and epoch s/ms/us/ns; a small number (a duration, a counter) is none."""
    from specsched.sim.log_lines import wrapper_time

    at = "2026-03-02 08:01:00.004000"
    assert {wrapper_time(v) for v in ("2026-03-02 08:01:00,004", "2026-03-02T09:01:00.004+01:00", 1772438460.004,
                                      1772438460004, "1772438460004000", 1772438460004000000)} == {at}
    assert [wrapper_time(v) for v in (0.25, 12, True, "soon", None, [1])] == [None] * 6
