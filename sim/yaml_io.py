"""Reading scenario and profile YAML strictly: what the user wrote is what is validated.

PyYAML's SafeLoader follows YAML 1.1, which turns ``yes``/``on`` into True, ``0x10`` and
``010`` into 16 and 8, ``1:30`` into 90, lets a repeated key silently win, and expands
aliases without limit (a 975-byte "billion laughs" file grows to billions of nodes). Here:

- scalars resolve as in YAML 1.2's core schema, narrowed: booleans are only
  ``true``/``false``, integers only decimal, floats decimal (``1e6`` included) or
  ``.inf``/``.nan``; anything else stays a string, which the strict pydantic models refuse
  for a number or boolean field (so ``yes`` or ``0x10`` is an error, not a 1); so does a
  number of digits with a leading zero (``010``: YAML 1.1 reads it as octal 8, 1.2 as 10),
  which the float rule read as 10.0;
- a key repeated in one mapping is an error naming both lines;
- aliases are allowed (with ``<<`` merge keys) but the document's size with every alias
  expanded is limited to :data:`MAX_EXPANDED_NODES`, and recursive aliases are refused.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from specsched.sim.errors import ConfigError
from specsched.sim.input_files import is_input_file, read_input

MAX_EXPANDED_NODES = 100_000
"""Nodes a document may have once its aliases are expanded (a large scenario has ~1,000)."""

MAX_FILE_BYTES = 64 * 2**20
"""Largest YAML file read (a scenario or profile is a few KiB)."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with narrowed implicit types and duplicate-key detection."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeConstructor reports it
                continue
            line = key_node.start_mark.line + 1
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} repeated (first on line {first}, again on line {line})",
                    key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"), list("-+0123456789"))
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:(?![-+]?0[0-9_]+$)[-+]?(?=\.?[0-9])(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def _expanded_size(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """Nodes under ``node`` with aliases expanded (memoised: a shared node is counted once
    per reference without walking it again)."""
    k = id(node)
    if k in memo:
        return memo[k]
    if k in active:
        raise ValueError("a recursive alias (an anchor used inside itself)")
    active.add(k)
    n = 1
    if isinstance(node, yaml.SequenceNode):
        n += sum(_expanded_size(c, memo, active) for c in node.value)
    elif isinstance(node, yaml.MappingNode):
        n += sum(_expanded_size(a, memo, active) + _expanded_size(b, memo, active) for a, b in node.value)
    active.discard(k)
    memo[k] = n
    if n > MAX_EXPANDED_NODES:
        raise ValueError(f"more than {MAX_EXPANDED_NODES:,} nodes once aliases are expanded")
    return n


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(node: yaml.Node) -> yaml.Node | None:
    """The first scalar whose value holds a surrogate code point (YAML's ``"\\ud800"``
    escape makes one, and PyYAML keeps an escaped pair as two; no file, path or name can
    hold it: a profile name of one was a UnicodeEncodeError traceback), else None. Each node
    is visited once."""
    seen: set[int] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.ScalarNode):
            if isinstance(n.value, str) and _SURROGATE.search(n.value):
                return n
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
        elif isinstance(n, yaml.MappingNode):
            todo.extend(x for pair in n.value for x in pair)
    return None


def load_yaml_text(text: str, file: str) -> Any:
    """Parse one YAML document strictly (see the module docstring).

    Raises:
        ConfigError: not valid YAML, a repeated key (naming its lines), too many nodes once
            aliases are expanded, a recursive alias, or nesting too deep to read.
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        bad = _lone_surrogate(node)
        if bad is None:
            return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark, problem = _where_it_starts(e)
        where = f"line {mark.line + 1}" if mark is not None else "<file>"
        raise ConfigError(file, where, _snippet(text, mark), f"not valid YAML: {problem}") from None
    except ValueError as e:
        raise ConfigError(file, "<file>", "aliases", f"refused: {e}") from None
    except RecursionError:
        raise ConfigError(file, "<file>", "nesting", "nested too deeply to read") from None
    finally:
        loader.dispose()
    raise ConfigError(file, f"line {bad.start_mark.line + 1}", _snippet(text, bad.start_mark),
                      "a surrogate escape (\\ud800 to \\udfff) is no character: write the character itself "
                      "(or \\UXXXXXXXX, YAML's escape for one past \\uffff)")


_OPENERS = {"flow mapping": "{", "flow sequence": "[", "quoted scalar": "quote"}
"""A parser context that an opening token started -> the token, as the error names it."""


def _where_it_starts(e: yaml.YAMLError) -> tuple[Any, str]:
    """The mark to blame for a parse error and the problem's text.

    A ``{``, ``[`` or quote left open is found only where the parser gives up (often the
    file's end: ``line 5 = ''``); PyYAML's ``context_mark`` is where the open construct
    started, so that line is named, with the problem and its own line after it. Other
    errors (indentation, a stray ``:``) are named at ``problem_mark``."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context, start = getattr(e, "context", None) or "", getattr(e, "context_mark", None)
    opener = next((tok for what, tok in _OPENERS.items() if what in context), None)
    if opener is None or start is None or (mark is not None and mark.line == start.line):
        return mark, problem
    at = f", line {mark.line + 1}" if mark is not None else ""
    return start, f"the {opener} opened on this line is not closed ({problem}{at})"


def _snippet(text: str, mark: Any) -> str:
    if mark is None:
        return ""
    lines = text.splitlines()
    return lines[mark.line].strip()[:60] if mark.line < len(lines) else ""


def read_yaml_file(path: str | Path, expected: str = "a YAML file") -> Any:
    """Read and parse a YAML file strictly; a pipe (``<(cat s.yaml)``, ``/dev/stdin``) is read
    once (:mod:`sim.input_files`).

    Args:
        path: the file.
        expected: what it should hold, for the refusal of an empty one ("a YAML scenario").

    Raises:
        ConfigError: missing, a directory, empty, larger than :data:`MAX_FILE_BYTES`, not UTF-8
            text (e.g. a binary file), or not valid YAML (see :func:`load_yaml_text`).
    """
    p = Path(path)
    if p.is_dir():
        raise ConfigError(str(p), "<file>", str(p), "is a directory; give a YAML file")
    if not is_input_file(p):
        raise ConfigError(str(p), "<file>", str(p), "file does not exist")
    raw = read_input(p, expected, MAX_FILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(str(p), "<file>", f"byte {e.start}", "not UTF-8 text (a binary file?); give a YAML file") from None
    if "\x00" in text:
        raise ConfigError(str(p), "<file>", "NUL byte", "not a text file; give a YAML file")
    doc = _PARSED.get(text)
    if doc is None:
        doc = load_yaml_text(text, str(p))
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[text] = doc
    return copy.deepcopy(doc)  # callers own (and may change) what they get


_PARSED: dict[str, Any] = {}
"""Documents parsed in this process, by their exact text: one command reads a profile
several times (the scenario's check, the engine, the summary), and the pure-Python parser
is ~10 ms a read; a file whose text changed is parsed again."""
_PARSED_MAX = 32
