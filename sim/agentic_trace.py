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
buffer) and its message text dropped at once. The file is read to its end and refused
where ``json.load`` (what bench_serving reads it with) refuses it: the last of a duplicated
key wins (a second ``conversations`` list replaces the first, whose faults then do not
count), anything but blanks after the top-level object is refused, and the values not
needed (metadata, conversations past the offset and the limit) are still parsed as JSON,
one element at a time when larger than a block. A trace of hundreds of MB is never held
whole, nor twice: a synthetic 512 MB trace (2000 conversations, 80648 turns) read in 7 s at
46 MB peak RSS, where ``json.load`` takes 6 s and 988 MB; a 132 MB one (500 conversations of
40 turns) reads in 0.6 s at 37 MB (``json.load``: 0.7 s, 280 MB), 0.7 s with a limit of 10
conversations (the rest parsed, not kept).

Bad input (no ``conversations`` key, a turn without ``prompt_tokens`` or with a negative or
decreasing one, messages of a shape bench_serving refuses, a file that is not JSON) raises
:class:`ConfigError` naming the file, the key path (``conversations[3][2].prompt_tokens``),
the value and what is allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from specsched.sim.bundled import scenario_data_path
from specsched.sim.errors import ConfigError, clipped
from specsched.sim.input_files import READ_ERRORS, file_key, is_input_file, open_text, unreadable

BLOCK_CHARS = 1 << 20
_WS = re.compile(r"[ \t\r\n]*")
_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)
_DECODER = json.JSONDecoder()
MAX_PROMPT_TOKENS = 1 << 62
"""A ``prompt_tokens`` at or past this is refused: the counts are held as int64 (1e23 was an
OverflowError traceback)."""
MAX_VALUE_CHARS = 1 << 28
"""A turn object longer than this (256 M characters) is refused rather than buffered."""
CUT_CHARS = 8
"""A JSON syntax error this close to the buffer's end (or an unterminated string) may be a
value cut by the block boundary: the next block is read and the value parsed again; any
other syntax error is the file's."""
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
        total_conversations: conversations in the (last) ``conversations`` list of the file.
        skipped_turns: turns without messages that were left out (bench_serving drops them).
        shared_system: conversations whose first kept turn opens with the most common system
            message (the same text; 0 when none opens with one). The trace does not say how
            many tokens it is: ``multi_turn.system_prompt_len`` states it.
    """

    source_index: np.ndarray
    turn_offsets: np.ndarray
    prompt_tokens: np.ndarray
    gaps: np.ndarray
    total_conversations: int
    skipped_turns: int
    shared_system: int = 0

    def __len__(self) -> int:
        return len(self.source_index)

    def shared_system_note(self) -> str | None:
        """The one sentence the run's warning and from-bench's assumptions say when more than
        one conversation opens with the same system message and no system_prompt_len is
        given (None otherwise: the caller decides whether one is given)."""
        if self.shared_system < 2:
            return None
        low = int(self.prompt_tokens[self.turn_offsets[:-1]].min())
        return (f"{self.shared_system} of {len(self)} conversations open with the same system message, which the "
                "server's radix cache shares; the trace does not say its tokens, so none is shared: state them as "
                f"workload.multi_turn.system_prompt_len (below {low}, the shortest first prompt)")

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

    def decode(self, key: str) -> Any:
        """The next value, parsed by json's C decoder straight from the buffer; a value cut by
        the block's end is parsed again once more is read (so each is parsed about once)."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                cut = e.pos >= len(self.buf) - CUT_CHARS or e.msg.startswith("Unterminated string")
                if not cut or self.eof or len(self.buf) - self.pos > MAX_VALUE_CHARS or not self._more():
                    raise ConfigError(self.where, key, self.buf[self.pos:self.pos + 40] or "<end of file>",
                                      f"not valid JSON ({e.msg}; a truncated file?); {SHAPE}") from None
                continue
            if end == len(self.buf) and not self.eof and self._more():
                continue   # a number may go on in the next block
            self.pos = end
            return obj

    def skip_checked(self, key: str) -> None:
        """Move past the next value, refusing what json.load refuses in it: parsed whole
        when it ends within the buffer, else one element at a time (so a value larger than
        the buffer is never held)."""
        c = self.peek()
        if c not in "[{":
            self.decode(key)
            return
        try:
            _, end = _DECODER.raw_decode(self.buf, self.pos)
            if end < len(self.buf) or self.eof:
                self.pos = end
                return
        except json.JSONDecodeError:
            pass   # cut by the buffer's end, or broken: walked, so the element at fault is named
        self.pos += 1
        if c == "[":
            for i in self.items("]", lambda i: f"{key}[{i}]"):
                self.skip_checked(f"{key}[{i}]")
            return
        for _ in self.items("}", lambda _: key):
            name = self.key(key)
            self.skip_checked(f"{key}.{name}")

    def key(self, where: str) -> str:
        if self.peek() != '"':
            raise self.bad(where, "expected a quoted key")
        name = self.decode(where)   # a key json refuses (a raw control character) is one line, as a value's is
        self.take(":", where)
        return name


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


def _turn_fault(where: str, key: str, turn: Any, previous: int | None) -> ConfigError | None:
    """What is wrong with a turn that has messages (None: nothing)."""
    if not _messages_ok(turn["messages"]):
        return ConfigError(where, f"{key}.messages", type(turn["messages"]).__name__,
                           "must be a string or a non-empty list of {role, content} objects "
                           "(bench_serving _normalize_round_messages)")
    if "prompt_tokens" not in turn:
        return ConfigError(where, f"{key}.prompt_tokens", "<missing>",
                           "every turn with messages needs prompt_tokens, an integer >= 1 (the turn's whole prompt)")
    p = turn["prompt_tokens"]
    if not isinstance(p, int) or isinstance(p, bool) or p < 1 or p >= MAX_PROMPT_TOKENS:
        return ConfigError(where, f"{key}.prompt_tokens", clipped(p),
                           f"must be an integer >= 1 and below {MAX_PROMPT_TOKENS:.0e} (the turn's whole prompt, tokens)")
    if previous is not None and p < previous:
        return ConfigError(where, f"{key}.prompt_tokens", p,
                           f"must not decrease within a conversation (the previous turn's is {previous}): "
                           "each turn's prompt holds the whole history")
    return None


class _ConversationList:
    """One ``conversations`` list of the file, read with the cursor inside it (:meth:`read`).

    ``records`` holds, per conversation, (prompt_tokens, gaps, skipped, system message
    hash) of its kept turns, or None when none is kept or it was not needed. ``fault`` is
    the first thing wrong with its content: raised only when this list is the file's last
    ``conversations`` (json.load keeps the last of a duplicated key, so bench_serving never
    sees the others). Once ``done`` is set (the conversations needed are in) or a fault is
    found, the rest is only checked as JSON, as json.load checks it."""

    def __init__(self, sc: _Scanner, max_turns: int | None) -> None:
        self.sc, self.max_turns = sc, max_turns
        self.records: list[Record | None] = []
        self.fault: ConfigError | None = None
        self.done = False

    def read(self) -> Iterator[Record | None]:
        """Each conversation's record as it is read (the caller may set ``done`` between)."""
        sc = self.sc
        for i in sc.items("]", lambda i: f"conversations[{i}]"):
            if sc.peek() != "[":
                if not self.done and self.fault is None:
                    self.fault = sc.bad(f"conversations[{i}]", "each conversation must be a list of turns")
                sc.skip_checked(f"conversations[{i}]")
                self.records.append(None)
                yield None
                continue
            sc.pos += 1
            rec = self._turns(i) if not self.done else self._skip_turns(i)
            self.records.append(rec)
            yield rec

    def _skip_turns(self, i: int) -> None:
        for k in self.sc.items("]", lambda k, i=i: f"conversations[{i}][{k}]"):
            self.sc.decode(f"conversations[{i}][{k}]")   # checked as JSON only, one turn held at a time

    def _turns(self, i: int) -> Record | None:
        sc = self.sc
        prompts: list[int] = []
        gaps: list[int] = []
        skipped = 0
        last = 0
        system = None
        for k in sc.items("]", lambda k, i=i: f"conversations[{i}][{k}]"):
            key = f"conversations[{i}][{k}]"
            # every turn parsed by json's C decoder (the fastest skip too): one turn held at a time
            turn = sc.decode(key)
            if self.fault is not None or (self.max_turns is not None and len(prompts) >= self.max_turns):
                continue   # past --agentic-max-turns, or the list is refused already: dropped
            if not isinstance(turn, dict):
                self.fault = ConfigError(sc.where, key, type(turn).__name__,
                                         "each turn must be an object with messages and prompt_tokens")
                continue
            if not turn.get("messages"):
                skipped += 1   # bench_serving keeps only turns that have messages
                continue
            self.fault = _turn_fault(sc.where, key, turn, prompts[-1] if prompts else None)
            if self.fault is not None:
                continue
            if not prompts:
                system = _system_key(turn["messages"])
            gaps.append(k - last if prompts else 0)
            prompts.append(turn["prompt_tokens"])
            last = k
            del turn
        return (prompts, gaps, skipped, system) if prompts and self.fault is None else None


def _read(p: Path, max_turns: int | None, offset: int, limit: int | None) -> AgenticConversations:
    where = str(p)
    chosen: _ConversationList | None = None
    not_a_list: ConfigError | None = None
    with open_text(p, "an agentic trace (JSON with conversations)", encoding="utf-8") as f:
        sc = _Scanner(f, where)
        c = sc.peek()
        if c != "{":
            raise sc.bad("<top level>", "not a JSON object" if c else "the file is empty")
        sc.pos += 1
        # the whole file is read, as json.load reads it: a later duplicate of
        # "conversations" wins, and anything after the top-level object is refused
        for _ in sc.items("}", lambda _: "<top level>"):
            name = sc.key("<top level>")
            if name != "conversations":
                sc.skip_checked(name)
                continue
            chosen, not_a_list = None, None   # json.load keeps the last value of a duplicated key
            if sc.peek() != "[":
                not_a_list = sc.bad("conversations", "must be a list of conversations")
                sc.skip_checked(name)
                continue
            sc.pos += 1
            chosen = _ConversationList(sc, max_turns)
            usable_after = 0
            for rec in chosen.read():
                if rec is not None and 0 <= offset < len(chosen.records) and not chosen.done:
                    usable_after += 1
                    # offset < the list's length: no wrap-around is needed, the rest is not read
                    chosen.done = limit is not None and usable_after >= limit
        if sc.peek() != "":
            raise sc.bad("<after the top-level object>",
                         "only blanks may follow the top-level object (json.load refuses extra data)")
    if not_a_list is not None:
        raise not_a_list
    if chosen is None:
        raise ConfigError(where, "conversations", "<missing>", SHAPE)
    if chosen.fault is not None:
        raise chosen.fault
    records = chosen.records
    n_all = total = len(records)
    if total == 0:
        raise ConfigError(where, "conversations", [], "needs at least one conversation")
    start = offset % n_all
    order = list(range(start, n_all)) + list(range(start))
    prompts: list[int] = []
    gaps: list[int] = []
    offsets = [0]
    src: list[int] = []
    skipped = 0
    systems: dict[int, int] = {}
    for j in order:
        rec = records[j]
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
        path: the trace JSON (compressed ones read as they stream: sim.compression); relative: as given, beside the
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
    p = scenario_data_path(path, scenario_path)
    if not is_input_file(p):
        where = str(scenario_path) if scenario_path else ("<command line>" if key.startswith("--") else "<scenario>")
        beside = Path(scenario_path).parent / p if scenario_path and not p.is_absolute() else p
        raise ConfigError(where, key, str(path), "is a directory: give the trace JSON file in it"
                          if p.is_dir() or beside.is_dir() else
                          "agentic trace file does not exist (looked for it as given" + (", beside the scenario"
                          if scenario_path and not p.is_absolute() else "") + " and among the shipped examples)")
    ck = (*file_key(p), max_turns, offset, limit)
    if ck in _CACHE:
        return _CACHE[ck]
    try:
        out = _read(p, max_turns, offset, limit)
    except UnicodeDecodeError:
        raise ConfigError(str(p), "<file>", p.name, f"not a UTF-8 text file; {SHAPE}") from None
    except RecursionError:   # json.load refuses such a file the same way
        raise ConfigError(str(p), "<file>", p.name, f"JSON nested too deeply to parse; {SHAPE}") from None
    except READ_ERRORS as e:
        raise unreadable(p, e) from None
    if len(_CACHE) >= 4:
        _CACHE.clear()
    _CACHE[ck] = out
    return out
