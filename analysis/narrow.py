"""Tables in a terminal too narrow for them: one block per row instead of squeezed columns.

A rich table wider than the terminal is squeezed column by column: at 80 columns the arms
comparison's ten columns became six characters each, every name and number cut to ``outp…``
or folded over three lines, and nothing could be read. :func:`print_table` prints the table
where it fits (and wherever the output is no terminal) and otherwise each row as a block: its key cells as a heading line, then its
other cells as ``header: value`` items, packed into lines of the terminal's width (an item
is never broken inside).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SEPARATOR = " · "
"""Between two ``header: value`` items on one line of a stacked row."""


def natural_width(console: Any, table: Any) -> int:
    """``table``'s (a rich renderable) width unsqueezed, in characters."""
    from rich.measure import Measurement

    # measured with room to spare: under the console's own options the measure is clamped to its width
    return Measurement.get(console, console.options.update(max_width=1 << 20), table).maximum


def fits(console: Any, table: Any) -> bool:
    """``table`` (a rich renderable) at its natural width fits ``console``'s width."""
    return natural_width(console, table) <= console.width


def stacked_lines(header: Sequence[str], rows: Sequence[Sequence[str]], width: int, key_columns: int = 1) -> list[list[str]]:
    """Each row as lines of at most ``width`` characters (an item longer than that alone on
    its line): the first ``key_columns`` cells joined by two spaces as the heading, then the
    other cells as ``header: value`` items indented by two, joined by :data:`SEPARATOR`.

    Args:
        header: the column headers.
        rows: the cells of each row, as many as ``header``.
        width: the line width (characters).
        key_columns: the leading cells that name the row.

    Returns:
        One list of lines per row.
    """
    out = []
    for row in rows:
        lines = ["  ".join(str(c) for c in row[:key_columns])]
        line = ""
        for h, v in zip(header[key_columns:], row[key_columns:], strict=True):
            item = f"{h}: {v}"
            if line and 2 + len(line) + len(SEPARATOR) + len(item) > width:
                lines.append("  " + line)
                line = ""
            line = f"{line}{SEPARATOR}{item}" if line else item
        if line:
            lines.append("  " + line)
        out.append(lines)
    return out


def print_table(console: Any, table: Any, header: Sequence[str], rows: Sequence[Sequence[str]], *,
                key_columns: int = 1, title: str | None = None, caption: str | None = None,
                styles: Sequence[str | None] | None = None) -> None:
    """Print ``table`` (a rich Table of ``header`` and ``rows``) on ``console`` where it fits,
    or where the console is no terminal (piped or captured: a log keeps the whole table, the
    console widened to it where it is wider); else ``title``, each row stacked
    (:func:`stacked_lines`; its heading in the row's style from ``styles``), and ``caption``,
    wrapped at the terminal's width."""
    if not console.is_terminal:
        # a log keeps the whole table: at the console's width (200 for a piped sweep) rich
        # squeezed a wider one, cutting ``verify_cycles_per…`` and folding its CIs
        console.width = max(console.width, natural_width(console, table))
        console.print(table)
        return
    if fits(console, table):
        console.print(table)
        return
    from rich.text import Text

    if title:
        console.print(Text(title, style="italic"))
    for i, lines in enumerate(stacked_lines(header, rows, console.width, key_columns)):
        style = styles[i] if styles else None
        console.print(Text(lines[0], style=f"bold {style}" if style else "bold"), soft_wrap=True)
        for line in lines[1:]:
            console.print(Text(line), soft_wrap=True)
    if caption:
        console.print(Text(caption, style="dim"))
