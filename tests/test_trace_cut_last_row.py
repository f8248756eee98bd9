"""A trace cut short in its last row (``head -c`` of a large trace, an interrupted download
or copy): the row has no line end, and its last field may read short."""

from __future__ import annotations

import pytest
from specsched.sim.config import TraceConfig
from specsched.sim.errors import ConfigError
from specsched.sim.trace import load_trace

_CSV = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,924,269\n2024-05-10 00:00:01,500,31\n"


def _cfg(p, **kw):
    return TraceConfig(path=str(p), layout="azure", **kw)


def test_a_csv_trace_whose_last_row_has_no_line_end_is_said(tmp_path, capsys):
    """``head -c -2`` of an Azure trace left '...,500,3' (31): the row was replayed with 3 output
    tokens without a word. Now a warning names the row's line and what it holds."""
    p = tmp_path / "t.csv"
    p.write_text(_CSV[:-2])
    tr = load_trace(_cfg(p))
    assert tr.output_len.tolist() == [269, 3]   # replayed as written
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {p}:3:") and "no line end" in err[0]
    assert "GeneratedTokens = 3" in err[0]


@pytest.mark.parametrize("text, limit", [
    (_CSV, None),                          # ended: nothing to say
    (_CSV.replace("\n", "\r\n"), None),    # a spreadsheet's CRLF
    (_CSV[:-2], 1),                        # the cut row is never read
    (_CSV + "\n", None),                   # a blank line after the last row
])
def test_an_ended_or_unread_last_row_says_nothing(tmp_path, capsys, text, limit):
    p = tmp_path / "t.csv"
    p.write_bytes(text.encode())
    load_trace(_cfg(p), limit=limit)
    assert "no line end" not in capsys.readouterr().err


def test_a_cut_jsonl_last_line_is_refused_saying_it_was_cut(tmp_path):
    """The refusal named only the JSON error ('Unterminated string ... column 18'): a Mooncake
    trace taken with head -c was not said to be cut, nor how to drop the line."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_le')
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert e.value.file.endswith("t.jsonl:2") and "column 18" in str(e.value)
    assert "no line end" in str(e.value) and "head -n -1" in str(e.value)


def test_a_bad_jsonl_line_inside_the_file_is_not_called_cut(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_le\n{"timestamp": 1, "input_length": 5, "output_length": 2}\n')
    with pytest.raises(ConfigError) as e:
        load_trace(TraceConfig(path=str(p), layout="mooncake"))
    assert e.value.file.endswith("t.jsonl:1") and "no line end" not in str(e.value)


@pytest.mark.parametrize("cut", ["2024-05-10 00:00:0", "2024-05-10 00:00:01,", "2024-05-10 00:00:01,50"])
def test_a_csv_last_row_cut_before_its_cells_is_refused_saying_it_was_cut(tmp_path, cut):
    """`head -c 3000` of an Azure trace ended in '2023-11-16 1': the row has no length cells,
    and the refusal named only `ContextTokens = '<empty>': not a number` (or a timestamp
    that does not parse), not that the file was cut nor how to drop the row."""
    p = tmp_path / "t.csv"
    p.write_text(_CSV.splitlines(keepends=True)[0] + _CSV.splitlines(keepends=True)[1] + cut)
    with pytest.raises(ConfigError) as e:
        load_trace(_cfg(p))
    assert e.value.file.endswith("t.csv:3"), str(e.value)
    assert "no line end" in str(e.value) and "head -n -1" in str(e.value)


def test_a_bad_csv_row_inside_the_file_is_not_called_cut(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(_CSV.replace("924", "x") + "2024-05-10 00:00:02,5")
    with pytest.raises(ConfigError) as e:
        load_trace(_cfg(p))
    assert e.value.file.endswith("t.csv:2") and "no line end" not in str(e.value)
