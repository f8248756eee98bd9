"""Agentic traces (bench_serving's ``agentic-trace`` dataset), streamed as token counts.

SGLang 0.5.23's bench_serving (benchmark/datasets/agentic_trace.py ``AgenticTraceDataset``)
reads a JSON file of OpenHands / SWE-smith style conversations::

    {"metadata": {...},
     "conversations": [[{"messages": [...], "prompt_tokens": 73821},
                        {"messages": [...], "prompt_tokens": 74894}, ...], ...]}

Each turn's ``messages`` holds only that turn's new non-assistant messages; ``prompt_tokens``
is the whole prompt the trace's own run sent at that turn (history included). ``load``
rotates the conversation list by ``--dataset-offset`` (modulo its length), keeps the turns
that have messages (``turn.get("messages")``), cuts each conversation to
``--agentic-max-turns``, drops conversations left empty and stops at ``--num-prompts``
conversations. benchmark/serving.py replays each one round by round
(``wrap_multi_turn_request_func``: the history, the server's real reply, the next turn's
messages), every round asking ``--sharegpt-output-len`` tokens (default 220,
``DEFAULT_AGENTIC_OUTPUT_LEN``).

What the simulator needs is token counts, not text: each kept turn's ``prompt_tokens`` and
how many original turns it is from the previous kept one. The file is streamed in blocks of
:data:`BLOCK_CHARS` characters by a small JSON scanner: ``metadata`` is skipped without
being parsed; one turn object at a time is parsed (json's C decoder, straight from the
buffer) and its message text dropped at once; reading stops once the offset and the
conversation limit are satisfied. A trace of hundreds of MB is never held whole, nor twice:
a synthetic 512 MB trace (2000 conversations, 80648 turns) reads in 7 s at 46 MB peak RSS,
where ``json.load`` takes 6 s and 988 MB.

Bad input (no ``conversations`` key, a turn without ``prompt_tokens`` or with a negative or
decreasing one, messages of a shape bench_serving refuses, a file that is not JSON) raises
:class:`ConfigError` naming the file, the key path (``conversations[3][2].prompt_tokens``),
the value and what is allowed.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from specsched.sim.bench_serving import open_text
from specsched.sim.bundled import scenarios_dir
from specsched.sim.errors import ConfigError

BLOCK_CHARS = 1 << 20
_WS = re.compile(r"[ \t\r\n]*")
_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)
_DECODER = json.JSONDecoder()
MAX_VALUE_CHARS = 1 << 28
"""A turn object longer than this (256 M characters) is refused rather than buffered."""
_STRUCT = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[,\]}\s]")
SHAPE = ('an agentic trace is a JSON object {"conversations": [[{"messages": [...], "prompt_tokens": N}, ...], ...]} '
         "(bench_serving --dataset-name agentic-trace)")


@dataclass(frozen=True)
class AgenticConversations:
    """The conversations a replay sends, in send order, as token counts.

    Attributes:
        source_index: int (n,), each conversation's index in the file's list.
        turn_offsets: int (n + 1,), conversation c's turns are ``[turn_offsets[c], turn_offsets[c + 1])``.
        prompt_tokens: int (turns,), each kept turn's ``prompt_tokens`` (the trace run's whole prompt).
        gaps: int (turns,), original turns since the previous kept one (1 unless turns without
            messages were skipped between them; 0 for a conversation's first kept turn).
        total_conversations: conversations in the file, or None when reading stopped early.
        skipped_turns: turns without messages that were left out (bench_serving drops them).
        shared_system: conversations whose first kept turn opens with the most common system
            message (the same text; 0 when none opens with one). The trace does not say how
            many tokens it is: ``multi_turn.system_prompt_len`` states it.
    """

    source_index: np.ndarray
    turn_offsets: np.ndarray
    prompt_tokens: np.ndarray
    gaps: np.ndarray
    total_conversations: int | None
    skipped_turns: int
    shared_system: int = 0

    def __len__(self) -> int:
        return len(self.source_index)

    @property
    def num_turns(self) -> np.ndarray:
        """int (n,), turns per conversation."""
        return np.diff(self.turn_offsets)

    def new_tokens(self, trace_reply_len: int) -> tuple[np.ndarray, int]:
        """(int (turns,), clipped): each turn's new prompt tokens: a first turn's whole
        ``prompt_tokens``; a later turn's growth since the previous kept turn less
        ``trace_reply_len`` per original turn in between (the replies the trace's run got),
        at least 1; ``clipped`` counts the later turns raised to 1."""
        p = self.prompt_tokens.astype(np.int64)
        new = np.empty_like(p)
        if len(p):
            new[1:] = p[1:] - p[:-1] - trace_reply_len * self.gaps[1:]
        firsts = self.turn_offsets[:-1]
        new[firsts] = p[firsts]
        later = np.ones(len(p), dtype=bool)
        later[firsts] = False
        clipped = int(np.count_nonzero(later & (new < 1)))
        np.maximum(new, 1, out=new)
        return new, clipped


def agentic_trace_path(path: str, scenario_path: str | Path | None) -> Path:
    """The trace file: as given, beside the scenario, or a shipped example by name."""
    p = Path(path)
    if not p.is_absolute() and not p.is_file() and scenario_path:
        q = Path(scenario_path).parent / p
        if q.is_file():
            return q
    if not p.is_absolute() and not p.is_file() and (scenarios_dir() / p).is_file():
        return scenarios_dir() / p
    return p


class _Scanner:
    """A JSON text read in blocks with a cursor: skips values without keeping them, hands
    out one value's text at a time."""

    def __init__(self, f: IO[str], where: str) -> None:
        self.f, self.where = f, where
        self.buf, self.pos, self.mark, self.eof = "", 0, None, False

    def _more(self) -> bool:
        """Read the next block (dropping what was consumed and is not marked); False at the end."""
        if self.eof:
            return False
        keep = self.pos if self.mark is None else min(self.pos, self.mark)
        if keep:
            self.buf = self.buf[keep:]
            self.pos -= keep
            if self.mark is not None:
                self.mark -= keep
        block = self.f.read(BLOCK_CHARS)
        if not block:
            self.eof = True
            return False
        self.buf += block
        return True

    def bad(self, key: str, what: str) -> ConfigError:
        near = self.buf[self.pos:self.pos + 20]
        return ConfigError(self.where, key, near if near else "<end of file>", f"{what}; {SHAPE}")

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def take(self, ch: str, key: str) -> None:
        if self.peek() != ch:
            raise self.bad(key, f"expected {ch!r}")
        self.pos += 1

    def items(self, close: str, key: Callable[[int], str]) -> Iterator[int]:
        """Cursor just past a container's ``[`` or ``{``: yield each element's index with the
        cursor before it (the separating comma taken, named ``key(index)`` when missing), and
        move past ``close`` after the last. A caller that stops early leaves the rest unread."""
        i = 0
        while True:
            if self.peek() == close:
                self.pos += 1
                return
            if i:
                self.take(",", key(i))
            yield i
            i += 1

    def _skip_string(self) -> None:
        """Cursor on an opening quote: move past the closing one (one regex match in C; a
        string cut by the block's end is matched again once the next block is in)."""
        while True:
            m = _STRING_BODY.match(self.buf, self.pos + 1)
            if m is not None:
                self.pos = m.end()
                return
            if not self._more():
                raise self.bad("<file>", "unterminated string (a truncated file?)")

    def skip_value(self, key: str) -> None:
        """Move past the next value without keeping it."""
        c = self.peek()
        if c == "":
            raise self.bad(key, "unexpected end of file (a truncated file?)")
        if c == '"':
            self._skip_string()
            return
        if c not in "[{":
            while True:   # a number, true, false or null
                m = _SCALAR_END.search(self.buf, self.pos)
                if m is not None:
                    self.pos = m.start()
                    return
                if not self._more():
                    self.pos = len(self.buf)
                    return
        depth = 0
        i = self.pos
        while True:
            m = _STRUCT.search(self.buf, i)
            if m is None:
                rel = len(self.buf) - self.pos
                if not self._more():
                    raise self.bad(key, "unexpected end of file (a truncated file?)")
                i = self.pos + rel
                continue
            ch = m.group()
            if ch == '"':
                self.pos = m.start()
                self._skip_string()
                i = self.pos
                continue
            depth += 1 if ch in "[{" else -1
            if depth == 0:
                self.pos = m.end()
                return
            i = m.end()

    def value_text(self, key: str) -> str:
        """The next value's text (consumed)."""
        self.peek()
        self.mark = self.pos
        try:
            self.skip_value(key)
            return self.buf[self.mark:self.pos]
        finally:
            self.mark = None

    def decode(self, key: str) -> Any:
        """The next value, parsed by json's C decoder straight from the buffer; a value cut by
        the block's end is parsed again once more is read (so each is parsed about once)."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self.eof or len(self.buf) - self.pos > MAX_VALUE_CHARS or not self._more():
                    raise ConfigError(self.where, key, self.buf[self.pos:self.pos + 40] or "<end of file>",
                                      f"not valid JSON ({e.msg}; a truncated file?); {SHAPE}") from None
                continue
            if end == len(self.buf) and not self.eof and self._more():
                continue   # a number may go on in the next block
            self.pos = end
            return obj

    def key(self, where: str) -> str:
        if self.peek() != '"':
            raise self.bad(where, "expected a quoted key")
        text = self.value_text(where)
        self.take(":", where)
        return json.loads(text)


def _messages_ok(m: Any) -> bool:
    """bench_serving ``_normalize_round_messages``: a string, or a non-empty list of dicts
    that each have role and content."""
    return isinstance(m, str) or (isinstance(m, list) and bool(m)
                                  and all(isinstance(x, dict) and "role" in x and "content" in x for x in m))


Record = tuple[list[int], list[int], int, int | None]


def _system_key(messages: Any) -> int | None:
    """A hash of the system message a turn opens with (None without one)."""
    if isinstance(messages, list) and messages[0].get("role") == "system":
        return hash(str(messages[0].get("content")))
    return None


def _conversations(sc: _Scanner, max_turns: int | None) -> Iterator[Record | None]:
    """Per conversation of the file's list: (prompt_tokens, gaps, skipped, system message
    hash) of its kept turns, or None when none is kept. The cursor is inside the list."""
    for i in sc.items("]", lambda i: f"conversations[{i}]"):
        if sc.peek() != "[":
            raise sc.bad(f"conversations[{i}]", "each conversation must be a list of turns")
        sc.pos += 1
        prompts: list[int] = []
        gaps: list[int] = []
        skipped = 0
        last = 0
        system = None
        for k in sc.items("]", lambda k, i=i: f"conversations[{i}][{k}]"):
            key = f"conversations[{i}][{k}]"
            if max_turns is not None and len(prompts) >= max_turns:
                sc.decode(key)   # past --agentic-max-turns: parsed (json's C decoder is the fastest skip) and dropped
                continue
            turn = sc.decode(key)
            if not isinstance(turn, dict):
                raise ConfigError(sc.where, key, type(turn).__name__, "each turn must be an object with messages and prompt_tokens")
            if not turn.get("messages"):
                skipped += 1   # bench_serving keeps only turns that have messages
                continue
            if not _messages_ok(turn["messages"]):
                raise ConfigError(sc.where, f"{key}.messages", type(turn["messages"]).__name__,
                                  "must be a string or a non-empty list of {role, content} objects "
                                  "(bench_serving _normalize_round_messages)")
            if "prompt_tokens" not in turn:
                raise ConfigError(sc.where, f"{key}.prompt_tokens", "<missing>",
                                  "every turn with messages needs prompt_tokens, an integer >= 1 (the turn's whole prompt)")
            p = turn["prompt_tokens"]
            if not isinstance(p, int) or isinstance(p, bool) or p < 1:
                raise ConfigError(sc.where, f"{key}.prompt_tokens", p, "must be an integer >= 1 (the turn's whole prompt, tokens)")
            if prompts and p < prompts[-1]:
                raise ConfigError(sc.where, f"{key}.prompt_tokens", p,
                                  f"must not decrease within a conversation (the previous turn's is {prompts[-1]}): "
                                  "each turn's prompt holds the whole history")
            if not prompts:
                system = _system_key(turn["messages"])
            gaps.append(k - last if prompts else 0)
            prompts.append(p)
            last = k
            del turn
        yield (prompts, gaps, skipped, system) if prompts else None


def _read(p: Path, max_turns: int | None, offset: int, limit: int | None) -> AgenticConversations:
    where = str(p)
    records: list[Record | None] = []
    total: int | None = None
    found = False
    with open_text(p, encoding="utf-8") as f:
        sc = _Scanner(f, where)
        c = sc.peek()
        if c != "{":
            raise sc.bad("<top level>", "not a JSON object" if c else "the file is empty")
        sc.pos += 1
        for _ in sc.items("}", lambda _: "<top level>"):
            name = sc.key("<top level>")
            if name != "conversations" or found:
                sc.skip_value(name)
                continue
            found = True
            if sc.peek() != "[":
                raise sc.bad("conversations", "must be a list of conversations")
            sc.pos += 1
            usable_after = 0
            stopped = False
            for rec in _conversations(sc, max_turns):
                records.append(rec)
                if rec is not None and 0 <= offset < len(records):
                    usable_after += 1
                    if limit is not None and usable_after >= limit:
                        stopped = True   # offset < the list's length: no wrap-around is needed
                        break
            if not stopped:
                total = len(records)
            break   # what follows the list (metadata, say) is not needed
    if not found:
        raise ConfigError(where, "conversations", "<missing>", SHAPE)
    if total == 0:
        raise ConfigError(where, "conversations", [], "needs at least one conversation")
    n_all = total if total is not None else len(records)
    start = offset % n_all if total is not None else offset
    order = list(range(start, n_all)) + list(range(start))
    prompts: list[int] = []
    gaps: list[int] = []
    offsets = [0]
    src: list[int] = []
    skipped = 0
    systems: dict[int, int] = {}
    for j in order:
        rec = records[j] if j < len(records) else None
        if rec is None:
            continue
        if limit is not None and len(src) >= limit:
            break
        prompts += rec[0]
        gaps += rec[1]
        skipped += rec[2]
        if rec[3] is not None:
            systems[rec[3]] = systems.get(rec[3], 0) + 1
        offsets.append(len(prompts))
        src.append(j)
    if not src:
        raise ConfigError(where, "conversations", f"{n_all} conversation(s)",
                          "none has a turn with messages (bench_serving keeps only those)")
    arr = [np.asarray(src, dtype=np.int64), np.asarray(offsets, dtype=np.int64),
           np.asarray(prompts, dtype=np.int64), np.asarray(gaps, dtype=np.int64)]
    for a in arr:
        a.setflags(write=False)
    return AgenticConversations(*arr, total, skipped, max(systems.values(), default=0))


_CACHE: dict[tuple, AgenticConversations] = {}


def load_agentic_trace(path: str | Path, *, max_turns: int | None = None, offset: int = 0, limit: int | None = None,
                       scenario_path: str | Path | None = None, key: str = "workload.multi_turn.agentic_trace.path"
                       ) -> AgenticConversations:
    """The conversations bench_serving would replay from an agentic trace.

    Args:
        path: the trace JSON (gzip read as it streams); relative: as given, beside the
            scenario, or a shipped example by name.
        max_turns: keep at most this many turns per conversation (--agentic-max-turns).
        offset: rotate the file's conversation list by this much, modulo its length
            (--dataset-offset).
        limit: at most this many conversations (--num-prompts; None: all).
        scenario_path: the scenario file, for relative paths and messages.
        key: the scenario key that names the file (in the message when it is missing).

    Raises:
        ConfigError: missing file; not JSON; no ``conversations``; a bad turn (see the module).
    """
    p = agentic_trace_path(str(path), scenario_path)
    if not p.is_file():
        where = str(scenario_path) if scenario_path else ("<command line>" if key.startswith("--") else "<scenario>")
        beside = Path(scenario_path).parent / p if scenario_path and not p.is_absolute() else p
        raise ConfigError(where, key, str(path), "is a directory: give the trace JSON file in it"
                          if p.is_dir() or beside.is_dir() else
                          "agentic trace file does not exist (looked for it as given" + (", beside the scenario"
                          if scenario_path and not p.is_absolute() else "") + " and among the shipped examples)")
    st = p.stat()
    ck = (str(p.resolve()), st.st_size, st.st_mtime_ns, max_turns, offset, limit)
    if ck in _CACHE:
        return _CACHE[ck]
    try:
        out = _read(p, max_turns, offset, limit)
    except UnicodeDecodeError:
        raise ConfigError(str(p), "<file>", p.name, f"not a UTF-8 text file; {SHAPE}") from None
    except (EOFError, zlib.error, OSError) as e:
        why = getattr(e, "strerror", None) or f"a damaged or truncated gzip file: {e}"
        raise ConfigError(str(p), "<file>", p.name, f"cannot be read ({why})") from None
    if len(_CACHE) >= 4:
        _CACHE.clear()
    _CACHE[ck] = out
    return out
