"""A user's input file, read once: a regular file, or a stream that can be read only once.

Every reader of a user's file (scenario and profile YAML, bench_serving results, traces,
agentic traces, length histograms, SGLang server logs) opens it here, so that a pipe works
where a file does: process substitution (``--measured <(zcat runs.jsonl.gz)``), ``/dev/stdin``
or a named pipe. Such a stream has no size (``stat`` says 0), cannot seek and gives its bytes
to the first reader only, while one command may read the same file more than once (a
scenario checked then run, a result line read for the scenario then for the measured
figures). So a stream is read whole on first use and its bytes are kept for the process
(:data:`_STREAMS`); a regular file is opened and read as before, streamed where the reader
streams. An input with nothing in it (``/dev/null``, an empty file, a pipe whose writer
wrote nothing) is refused in one line: ``FILE: <file> = '0 bytes': empty, expected ...``.

The bytes of compressed files (gzip, bzip2, xz, a zip of one file; found by their first
bytes, not their name: :mod:`sim.compression`) are decompressed on the way, and a UTF-16 byte-order mark (Windows PowerShell 5's ``>``) or a
UTF-8 one (an editor's) is honoured: :func:`open_text`.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from pathlib import Path
from typing import IO, Any, BinaryIO

from specsched.sim import compression
from specsched.sim.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip stream."""

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
"""A UTF-16 byte-order mark: Windows PowerShell 5's ``>`` and ``Out-File`` write text so
(``docker logs sglang > server.log``, ``Get-Content runs.jsonl > copy.jsonl``)."""

READ_ERRORS = compression.READ_ERRORS
"""What reading a file (:func:`open_text`) raises besides a decoding error: the OS's and a
cut or damaged compressed stream's."""

_STREAMS: dict[str, tuple[tuple[int, int] | None, bytes]] = {}
"""Streams read in this process, by the path as given: (the stream's device and inode when
it was read, its bytes). A later read of the same path gets the same bytes; a path that now
names another stream (a new pipe under the same ``/dev/fd/N``) is read anew."""


def _mode(p: str | Path) -> int | None:
    try:
        return os.stat(p).st_mode
    except (OSError, ValueError):
        return None


def is_input_file(p: str | Path) -> bool:
    """``p`` names something a reader can read: a regular file, or a stream (a pipe, a FIFO,
    ``/dev/stdin``, ``/dev/null``); not a folder, not a missing path (a stream already read
    in this process counts, though its ``/dev/fd/N`` may be gone, as in a worker process)."""
    mode = _mode(p)
    if mode is None:
        return str(p) in _STREAMS
    return not stat.S_ISDIR(mode)


def is_stream(p: str | Path) -> bool:
    """``p`` is an input that is not a regular file (see :func:`is_input_file`): it can be
    read only once, has no size and cannot seek."""
    mode = _mode(p)
    if mode is None:
        return str(p) in _STREAMS
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def file_key(p: str | Path) -> tuple:
    """What tells this file's content from another's, for a reader's cache: a regular file's
    resolved path, size and modification time; a stream's path and device and inode (a stream
    read once keeps its bytes; a new pipe under the same ``/dev/fd/N`` is another)."""
    if is_stream(p):
        try:
            st = os.stat(p)
            return (str(p), "stream", st.st_dev, st.st_ino)
        except (OSError, ValueError):
            return (str(p), "stream", _STREAMS[str(p)][0])
    st = os.stat(p)
    return (str(Path(p).resolve()), st.st_size, st.st_mtime_ns)


def same_input(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one input: one regular file or folder however spelt
    (``a.log``, ``./a.log``, a link to it, a hard link: its device and inode), or one stream
    path (``-`` given twice reads the same bytes, once). False where either cannot be looked at
    (the reader names that)."""
    if str(a) == str(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    kind = stat.S_IFMT(sa.st_mode)
    return kind in (stat.S_IFREG, stat.S_IFDIR) and kind == stat.S_IFMT(sb.st_mode) \
        and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def streams_read() -> dict[str, tuple[tuple[int, int] | None, bytes]]:
    """The streams this process has read (for :func:`adopt_streams` in a worker process,
    where the parent's ``/dev/fd/N`` does not exist)."""
    return dict(_STREAMS)


def adopt_streams(streams: dict[str, tuple[tuple[int, int] | None, bytes]]) -> None:
    """In a worker process: read ``streams`` (the parent's :func:`streams_read`) as this
    process's own, so that a scenario's piped trace or profile reads the same bytes there."""
    for key, (ident, data) in streams.items():
        _STREAMS.setdefault(key, (ident, data))


def empty(p: str | Path, expected: str) -> ConfigError:
    """The one-line refusal of an input with nothing in it; ``expected`` says what it should
    hold ("a bench_serving result file (JSONL or JSON)")."""
    return ConfigError(str(p), "<file>", "0 bytes", f"empty, expected {expected}")


def too_large(p: str | Path, size: str, limit: int) -> ConfigError:
    """The one-line refusal of an input above ``limit`` bytes (``size`` as shown)."""
    return ConfigError(str(p), "<file>", size, f"larger than {limit:,} bytes")


def _stream_bytes(p: str | Path, limit: int | None) -> bytes:
    key = str(p)
    try:
        st = os.stat(p)
        ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except (OSError, ValueError):
        ident = None
    kept = _STREAMS.get(key)
    if kept is not None and (ident is None or kept[0] == ident):
        return kept[1]
    with open(p, "rb") as f:
        data = f.read() if limit is None else f.read(limit + 1)
    _STREAMS[key] = (ident, data)
    return data


def read_input(p: str | Path, expected: str, limit: int | None = None) -> bytes:
    """The whole content of ``p`` (a regular file, or a stream read once: see the module).

    Args:
        p: the file; the caller has said, in its own words, when it is missing or a folder
            (:func:`is_input_file`).
        expected: what the file should hold, for the refusal of an empty one.
        limit: refuse more than this many bytes (a regular file by its size, before reading).

    Raises:
        ConfigError: empty, above ``limit``, or unreadable (the OS's reason).
    """
    try:
        if is_stream(p):
            data = _stream_bytes(p, limit)
            if limit is not None and len(data) > limit:
                raise too_large(p, f"more than {limit:,} bytes", limit)
        else:
            if limit is not None and (size := os.stat(p).st_size) > limit:
                raise too_large(p, f"{size:,} bytes", limit)
            data = Path(p).read_bytes()
    except OSError as e:
        raise ConfigError(str(p), "<file>", str(p), f"cannot be read ({e.strerror})") from None
    if not data:
        raise empty(p, expected)
    return data


def open_input(p: str | Path, expected: str) -> BinaryIO:
    """``p`` opened for reading bytes, seekable: a regular file as itself (streamed), a stream
    as its bytes read once (:func:`read_input`).

    Raises:
        ConfigError: empty (see :func:`empty`).
        OSError: the OS refused to open it (the caller words it: :func:`unreadable`).
    """
    if is_stream(p):
        return io.BytesIO(read_input(p, expected))
    f = open(p, "rb")   # noqa: SIM115 - returned open
    if not f.peek(1):
        f.close()
        raise empty(p, expected)
    return f


def encoding_of(head: bytes) -> str:
    """The encoding a text starting with ``head`` is read with: ``utf-16`` after a UTF-16
    byte-order mark, else ``utf-8-sig`` (UTF-8, an editor's byte-order mark dropped)."""
    return "utf-16" if head[:2] in UTF16_BOMS else "utf-8-sig"


def open_text(p: str | Path, expected: str = "a text file", **kw: Any) -> IO[str]:
    """``p`` opened as text: decompressed on the way when it is compressed (by its first
    bytes: :func:`sim.compression.decompressed`), as UTF-16 after a UTF-16 byte-order mark (``kw``'s
    ``encoding``, default UTF-8, applies otherwise; ``errors`` and ``newline`` as for
    :func:`open`). A stream is read once (:func:`open_input`).

    Raises:
        ConfigError: empty (``expected`` says what it should hold); compressed as no reader
            here reads (:func:`sim.compression.decompressed`).
        OSError: the OS refused to open it.
    """
    f = open_input(p, expected)
    try:
        g = compression.decompressed(f, p)
        head = g.read(2)
        g.seek(0)
    except BaseException:
        f.close()
        raise
    encoding = "utf-16" if head in UTF16_BOMS else kw.get("encoding") or "utf-8"
    return io.TextIOWrapper(g, encoding=encoding, errors=kw.get("errors"), newline=kw.get("newline"))


JSON_INT_DIGITS = 300
"""A JSON integer of more digits than this is read as a float (+-inf past a float's range)."""


def _json_int(text: str) -> int | float:
    """A JSON integer as Python's ``json`` reads it, except one of more than
    :data:`JSON_INT_DIGITS` digits (no writer's count: a damaged file's), read as ``Infinity``
    reads: every later ``float()`` of it raised OverflowError (a traceback), and past 4,300
    digits Python refuses to parse it at all."""
    return int(text) if len(text) <= JSON_INT_DIGITS else float(text)


_JSON = json.JSONDecoder(parse_int=_json_int)
NESTED_TOO_DEEPLY = "nested too deeply"
"""The message of :func:`json_at`'s and :func:`json_value`'s error for nesting past Python's
recursion limit (no writer's file nests so deep: a damaged or hostile one)."""


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a UTF-16 surrogate (``\\ud800``): a pair of them is one character, one alone
decodes to a Python string no UTF-8 writer can encode."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole_text(value: Any) -> Any:
    """``value`` (a decoded JSON value) with every lone UTF-16 surrogate in its strings (keys
    included) replaced by U+FFFD, as UTF-8 text read with ``errors="replace"`` shows a damaged
    character. JSON allows ``"\\ud800"`` (RFC 8259 section 8.2 leaves its meaning open) and
    Python decodes it to a string that cannot be encoded: a run's tag written as a scenario's
    name, a generated text or a plot's title ended in a UnicodeEncodeError traceback. Walked
    without recursion: the value may nest nearly as deep as the recursion limit."""
    def fixed(x: Any) -> Any:
        return _SURROGATE.sub("\ufffd", x) if isinstance(x, str) else x

    top = [fixed(value)]
    todo: list[Any] = [top]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            items = [(fixed(k), fixed(v)) for k, v in node.items()]
            node.clear()
            node.update(items)
            todo.extend(v for _, v in items if isinstance(v, (dict, list)))
        else:
            for i, v in enumerate(node):
                node[i] = fixed(v)
                if isinstance(v, (dict, list)):
                    todo.append(v)
    return top[0]


def json_at(text: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value starting at ``pos`` of ``text`` and the position after it, as
    ``json.JSONDecoder().raw_decode`` gives them, for a user's file: an integer too long for a
    float reads as +-inf (:func:`_json_int`), and nesting too deep for Python's recursion
    limit is a :class:`json.JSONDecodeError` (it was a RecursionError traceback).

    Raises:
        json.JSONDecodeError: not JSON there (its ``msg``, ``lineno`` and ``colno`` say why and where).
    """
    try:
        value, end = _JSON.raw_decode(text, pos)
    except RecursionError:
        raise json.JSONDecodeError(NESTED_TOO_DEEPLY, text, pos) from None
    return (_whole_text(value) if _SURROGATE_ESCAPE.search(text, pos, end) else value), end


def json_value(text: str) -> Any:
    """``text`` as one JSON value (blanks around it allowed), as ``json.loads`` reads it, with
    :func:`json_at`'s guards.

    Raises:
        json.JSONDecodeError: not one JSON value.
    """
    try:
        value = _JSON.decode(text)
    except RecursionError:
        raise json.JSONDecodeError(NESTED_TOO_DEEPLY, text, 0) from None
    return _whole_text(value) if _SURROGATE_ESCAPE.search(text) else value


def unreadable(p: str | Path, e: BaseException) -> ConfigError:
    """The one-line refusal of ``p``, whose reading raised ``e`` (one of :data:`READ_ERRORS`):
    the OS's reason, else a damaged or truncated compressed stream (named by its first bytes)."""
    why = getattr(e, "strerror", None)
    if not why:
        try:
            with open_input(p, "") as f:
                kind = compression.kind(f.read(6)) or "compressed"
        except (OSError, ConfigError):
            kind = "compressed"
        why = f"a damaged or truncated {kind} file: {e}"
    return ConfigError(str(p), "<file>", Path(p).name, f"cannot be read ({why})")
