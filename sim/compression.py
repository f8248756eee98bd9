"""Compressed input files, found by their first bytes (not their name) and decompressed as
they stream: gzip, bzip2, xz, and a zip archive of one file.

Public traces and archived results come so: the Mooncake and BurstGPT releases and many
dataset mirrors ship ``.zip`` archives, copies are kept as ``.gz``, ``.bz2`` or ``.xz``. The
formats and their first bytes are the standard library's (``gzip``: RFC 1952 ``1f 8b``;
``bz2``: ``BZh``; ``lzma``: the xz container's ``fd 37 7a 58 5a 00``; ``zipfile``: a local
file header's ``PK 03 04``). Zstandard (``28 b5 2f fd``, RFC 8878) has no reader in the
standard library (Python 3.14's ``compression.zstd``), so such a file is refused in one line
saying how to decompress it, as is a zip archive of several files (which one is the trace?).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from specsched.sim.errors import ConfigError

MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip", b"PK\x05\x06": "zip",
         b"(\xb5/\xfd": "zstd"}
"""First bytes of each compressed format, and its name in messages. A zip archive of no file
starts with its end-of-central-directory record (``PK 05 06``): it was read as text and
refused as "not a complete JSON object"."""

SUFFIXES = (".gz", ".gzip", ".bz2", ".xz", ".zip")
"""The names compressed copies usually end in (a file is still told by its first bytes; a name
only says what the file inside is: ``trace.jsonl.gz`` is JSONL)."""

READ_ERRORS = (EOFError, zlib.error, OSError, lzma.LZMAError, zipfile.BadZipFile)
"""What reading a compressed stream raises when it is cut or damaged (OSError also covers
gzip.BadGzipFile and bz2's invalid data, and the OS's own refusals)."""


def kind(head: bytes) -> str | None:
    """The compression a file starting with ``head`` (6 bytes or more) uses, None for none."""
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


SPREADSHEETS = {"xl/workbook.xml": "an Excel workbook (.xlsx)", "content.xml": "an OpenDocument spreadsheet (.ods)"}
"""A member that makes a zip archive an office spreadsheet (Office Open XML's ``xl/workbook.xml``
beside ``[Content_Types].xml``; OpenDocument's ``content.xml`` beside its ``mimetype``): a trace
or result opened in a spreadsheet and saved in its own format, whose XML parts are no data."""


def _zip_member(f: BinaryIO, p: str | Path) -> BinaryIO:
    z = zipfile.ZipFile(f)
    names = set(z.namelist())
    sheet = next((what for member, what in SPREADSHEETS.items()
                  if member in names and ({"[Content_Types].xml", "mimetype"} & names)), None)
    if sheet is not None:
        # it was "a zip archive of N files ([Content_Types].xml, ...): unzip it", which gives XML
        raise ConfigError(str(p), "<file>", Path(p).name, f"{sheet}, not a text file: give the file it was "
                          "made from, or save the sheet as CSV (a trace; File > Save As > CSV)")
    files = [i for i in z.infolist() if not i.is_dir() and not i.filename.startswith("__MACOSX/")]
    if not files:
        raise ConfigError(str(p), "<file>", Path(p).name, "an empty zip archive: no file in it")
    if len(files) != 1:
        names = ", ".join(i.filename for i in files[:5]) + (", ..." if len(files) > 5 else "")
        raise ConfigError(str(p), "<file>", Path(p).name, f"a zip archive of {len(files)} files ({names or 'none'}): "
                          "unzip it and name the one to read")
    return z.open(files[0])


def decompressed(f: BinaryIO, p: str | Path) -> BinaryIO:
    """``f`` (seekable, at its start; the file ``p``) decompressed on the way when it is
    compressed (:data:`MAGIC`), else ``f`` itself. Closing the result closes ``f``.

    Raises:
        ConfigError: zstd, or a zip archive that holds other than one file (``f`` closed).
        zipfile.BadZipFile: a damaged zip archive (one of :data:`READ_ERRORS`).
    """
    k = kind(f.read(6))
    f.seek(0)
    if k is None:
        return f
    if k == "zstd":
        raise ConfigError(str(p), "<file>", Path(p).name, "zstd-compressed: decompress it first (zstd -d); gzip, bzip2, "
                          "xz and a zip of one file are read as they are")
    inner = {"gzip": lambda: gzip.GzipFile(fileobj=f, mode="rb"), "bzip2": lambda: bz2.BZ2File(f),
             "xz": lambda: lzma.LZMAFile(f), "zip": lambda: _zip_member(f, p)}[k]()
    close = inner.close

    def close_both() -> None:   # each reader leaves a file object it was given open
        try:
            close()
        finally:
            f.close()

    inner.close = close_both   # type: ignore[method-assign]
    return inner


def decompress(data: bytes, p: str | Path) -> bytes:
    """``data`` (the whole content of the file ``p``) decompressed when it is compressed
    (:data:`MAGIC`, by its first bytes), else ``data`` itself: for a reader that holds a file's
    bytes at once (a bench_serving result file, read once so that a pipe works) and must read
    every format :func:`decompressed` streams, in the same words.

    Raises:
        ConfigError: zstd, or a zip archive that holds other than one file.
        EOFError, zlib.error, OSError, lzma.LZMAError, zipfile.BadZipFile: a damaged or cut
            compressed stream (:data:`READ_ERRORS`; the caller words it).
    """
    if kind(data[:6]) is None:
        return data
    with decompressed(io.BytesIO(data), p) as f:
        return f.read()
