"""Argument text as programs print it: splitting at top-level commas, and Python reprs.

Three readers take apart a list of arguments written as text: ``--grid``/``--set`` values on
the command line (``server.x=1,[1, 2],'a,b'``, analysis/overrides.py), the ``server_args=``
line of an SGLang server log (``ServerArgs(model_path='m', cuda_graph_bs=[1, 2])`` up to 0.5.x's
dataclass repr, 0.5.23's ``resolved_dict()`` as a dict repr; analysis/server_launch.py), and the
``Namespace(...)`` line bench_serving prints before a run (``print(args)``; sim/bench_serving.py).
They split the same way, here: at the separators outside brackets and quotes, a backslash
escaping the next character inside quotes (Python's ``repr`` writes ``'it\\'s'``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

PYTHON_BRACKETS = ("([{<", ")]}>")
"""Brackets of a Python repr: ``<`` too, which opens an object's repr (``<Enum.X: 'x'>``)."""


def split_top_level(text: str, sep: str = ",", brackets: tuple[str, str] = ("([{", ")]}")) -> list[str]:
    """``text`` cut at each ``sep`` outside ``brackets`` (openers, closers) and outside single
    or double quotes, a backslash inside quotes escaping the next character. The parts are
    returned as written (not stripped); a closer without its opener is ignored, and an
    unclosed quote or bracket runs to the end (a line cut short).

    ``split_top_level("a=1, b=[1, 2], c='x, \\\\'y'")`` -> ``["a=1", " b=[1, 2]", " c='x, \\\\'y'"]``.
    """
    opens, closes = brackets
    parts: list[str] = []
    depth, quote, escaped, start = 0, "", False, 0
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in opens:
            depth += 1
        elif ch in closes:
            depth = max(depth - 1, 0)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


_ARG_KEY = re.compile(r"\s*(?:(?P<quote>['\"])(?P<q>[\w.-]+)(?P=quote)\s*:|(?P<kw>\w+)\s*=)\s*")


def _literal(node_or_text: Any) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node_or_text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None


def python_repr_args(text: str) -> dict[str, Any]:
    """The arguments of a Python repr of a call (``Name(key=value, ...)``: a dataclass's or an
    ``argparse.Namespace``'s) or of a dict (``{'key': value, ...}``): each key whose value is a
    Python literal, with that value. Text that does not parse whole (a value whose repr is no
    Python, ``<Enum.X: 'x'>`` or ``device(type='cuda')``, or a line cut short) is read pair by
    pair (:func:`split_top_level`), the pairs that are literals kept, but for the last pair of
    a text cut short (no closing bracket), which may be cut inside its value. Text of neither
    form gives ``{}``."""
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    out: dict[str, Any] = {}
    if isinstance(tree, ast.Dict):
        for k, v in zip(tree.keys, tree.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                ok, value = _literal(v)
                if ok:
                    out[k.value] = value
        return out
    if isinstance(tree, ast.Call):
        for kw in tree.keywords:
            if kw.arg:
                ok, value = _literal(kw.value)
                if ok:
                    out[kw.arg] = value
        return out
    m = re.match(r"\s*(?:[A-Za-z_][\w.]*\(|\{)", text)
    if m is None:
        return out
    items = split_top_level(text[m.end():], brackets=PYTHON_BRACKETS)
    if not text.endswith((")", "}")):
        # cut short (a log line cut at a size limit): its last pair may be cut inside its value,
        # ``chunked_prefill_size': 81`` of 8192, and is not read
        items = items[:-1]
    for item in items:
        km = _ARG_KEY.match(item)
        if km is None:
            continue
        value = item[km.end():].strip()
        for end in ("", ")", "}"):   # the last pair carries the closing bracket
            ok, v = _literal(value.removesuffix(end).strip() if end else value)
            if ok:
                out[km["q"] or km["kw"]] = v
                break
    return out
