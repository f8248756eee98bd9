"""Conversations with their own turn counts: bench_serving 0.5.23's ``agentic-trace`` dataset
replayed through ``workload.multi_turn`` (sim/agentic_trace.py; benchmark/datasets/
agentic_trace.py ``AgenticTraceDataset.load``, benchmark/serving.py
``wrap_multi_turn_request_func``), ``num_turns`` as a distribution, and ``scenario from-bench``
for an agentic-trace line."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from pydantic import ValidationError
from specsched.sim.agentic_trace import load_agentic_trace
from specsched.sim.config import Scenario, load_scenario
from specsched.sim.engine import SimEngine
from specsched.sim.errors import ConfigError
from specsched.sim.workload import make_requests

from specsched.cli import main
from tests.conftest import ROOT

EXAMPLE = ROOT / "scenarios" / "agentic-trace-example.json"
EXAMPLE_TURNS = [3, 14, 6, 2, 9, 4, 11, 5]
SERVER = dict(max_running_requests=64, max_total_num_tokens=2_600_000, chunked_prefill_size=16384,
              max_prefill_tokens=16384, speculative_algorithm="dspark", speculative_num_draft_tokens=6)


def trace_doc(convs, **top):
    """A trace in the agentic-trace layout: ``convs`` lists of prompt_tokens (None: no messages)."""
    out = []
    for c, turns in enumerate(convs):
        row = []
        for k, p in enumerate(turns):
            t = {"messages": [{"role": "user", "content": f"c{c} t{k} " + "x" * 50}] if p is not None else []}
            if p is not None:
                t["prompt_tokens"] = p
            row.append(t)
        out.append(row)
    return {"metadata": {"note": "synthetic"}, "conversations": out, **top}


def write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def scenario(mt, concurrency=4, seed=1, out=220, server=None, path=""):
    return Scenario.model_validate(dict(
        name="agt", profile="mi355x-dsv41-flash-tp4", seed=seed, server={**SERVER, **(server or {})},
        acceptance=dict(mean_accept_length=3.2), path=path,
        workload=dict(kind="multi_turn", concurrency=concurrency, output_len=dict(kind="fixed", value=out),
                      multi_turn=mt)))


# ------------------------------------------------------------------ reading the trace

def test_the_example_trace_gives_each_conversation_its_own_turns_and_growth():
    tr = load_agentic_trace(EXAMPLE)
    assert tr.num_turns.tolist() == EXAMPLE_TURNS and tr.total_conversations == 8
    doc = json.loads(EXAMPLE.read_text())
    p0 = [t["prompt_tokens"] for t in doc["conversations"][1]]
    new, clipped = tr.new_tokens(220)
    first = tr.turn_offsets[1]
    assert new[first] == p0[0]                                   # turn 0: its whole prompt_tokens
    assert new[first + 1:first + 14].tolist() == [b - a - 220 for a, b in zip(p0, p0[1:], strict=False)]
    assert clipped == 0


def test_max_turns_offset_and_limit_are_bench_serving_s():
    # --agentic-max-turns cuts, --dataset-offset rotates modulo the list, --num-prompts limits
    assert load_agentic_trace(EXAMPLE, max_turns=4).num_turns.tolist() == [min(t, 4) for t in EXAMPLE_TURNS]
    rot = load_agentic_trace(EXAMPLE, offset=10)                 # 10 % 8 = 2
    assert rot.source_index.tolist() == [2, 3, 4, 5, 6, 7, 0, 1]
    assert rot.num_turns.tolist() == EXAMPLE_TURNS[2:] + EXAMPLE_TURNS[:2]
    lim = load_agentic_trace(EXAMPLE, offset=6, limit=3)
    assert lim.source_index.tolist() == [6, 7, 0]
    assert load_agentic_trace(EXAMPLE, offset=-1, limit=1).source_index.tolist() == [7]


def test_turns_without_messages_are_skipped_and_their_replies_still_counted(tmp_path):
    # bench_serving keeps turns that have messages; a skipped turn's reply is in the growth
    p = write(tmp_path, trace_doc([[1000, None, 2000, 2600], [None], [500]]))
    tr = load_agentic_trace(p)
    assert tr.num_turns.tolist() == [3, 1] and tr.source_index.tolist() == [0, 2] and tr.skipped_turns == 1
    new, _ = tr.new_tokens(100)
    assert new.tolist() == [1000, 2000 - 1000 - 2 * 100, 2600 - 2000 - 100, 500]


def test_metadata_with_brackets_and_escapes_in_strings_and_gzip_read_alike(tmp_path):
    import gzip

    doc = trace_doc([[100, 400]])
    text = json.dumps({"metadata": {"x": ['a \\" ] } [ {', {"y": "\\\\"}], "n": -1.5e3, "z": None}, **doc})
    assert load_agentic_trace(write(tmp_path, text)).prompt_tokens.tolist() == [100, 400]
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert load_agentic_trace(gz).prompt_tokens.tolist() == [100, 400]


def test_conversations_opening_with_one_system_message_are_counted_and_said(tmp_path, capsys):
    assert load_agentic_trace(EXAMPLE).shared_system == 8
    assert load_agentic_trace(write(tmp_path, trace_doc([[100], [200]]))).shared_system == 0   # user messages only
    p = write(tmp_path, SGLANG_LINE, "runs.jsonl")
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out",
                 str(tmp_path / "a.yaml"), "--dataset-path", str(EXAMPLE), "--dataset-offset", "2"]) == 0
    assert "system_prompt_len (below" in capsys.readouterr().out


def test_the_shared_system_message_sentence_is_the_same_in_the_run_and_from_bench(tmp_path, capsys):
    """The run's warning and from-bench's note say one sentence (one owner:
    AgenticConversations.shared_system_note), not two wordings of it."""
    import shutil

    trace = tmp_path / "mine.json"
    shutil.copy(EXAMPLE, trace)   # a path of its own: the run warns once per trace and process
    p = write(tmp_path, SGLANG_LINE, "runs.jsonl")
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out",
                 str(tmp_path / "a.yaml"), "--dataset-path", str(trace), "--dataset-offset", "2"]) == 0
    noted = [x for x in capsys.readouterr().out.splitlines() if "system message" in x]
    sc = load_scenario(tmp_path / "a.yaml")   # the scenario it wrote, run: no system_prompt_len given
    make_requests(sc.workload, 1, str(tmp_path / "a.yaml"))
    warned = [x for x in capsys.readouterr().err.splitlines() if "system message" in x]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {trace}: "), warned
    sentence = warned[0].removeprefix(f"warning: {trace}: ")
    assert noted == [f"  - prefix: {sentence}"], (noted, sentence)
    assert "system_prompt_len (below" in sentence

def test_a_growth_below_the_reply_is_one_new_token_and_counted(tmp_path):
    tr = load_agentic_trace(write(tmp_path, trace_doc([[1000, 1100, 1100]])))
    new, clipped = tr.new_tokens(220)
    assert new.tolist() == [1000, 1, 1] and clipped == 2



def _json_load_turns(text: str, limit: int | None = None) -> list[list[int]]:
    """What bench_serving keeps (json.load, then AgenticTraceDataset.load's filter): each
    conversation's prompt_tokens of its turns that have messages."""
    kept = [[t["prompt_tokens"] for t in c if t.get("messages")] for c in json.loads(text)["conversations"]]
    return [k for k in kept if k][:limit]


def _turns(tr) -> list[list[int]]:
    p = tr.prompt_tokens.tolist()
    return [p[a:b] for a, b in zip(tr.turn_offsets[:-1].tolist(), tr.turn_offsets[1:].tolist(), strict=True)]


@pytest.mark.parametrize("limit", [None, 1])
def test_a_duplicated_key_keeps_the_last_value_as_json_load_does(tmp_path, limit):
    first = json.dumps(trace_doc([[100, 200], [300]])["conversations"])
    # the first list is also one the reader would refuse (decreasing): json.load drops it unread
    bad = json.dumps(trace_doc([[500, 400]])["conversations"])
    last = json.dumps(trace_doc([[7000], [8000, 9000]])["conversations"])
    # inside a turn, too: the last messages (non-empty) keep the turn
    turn_dup = '[[{"messages": [], "prompt_tokens": 5, "messages": "hi", "prompt_tokens": 6}]]'
    for text, want in [
        (f'{{"conversations": {first}, "metadata": {{}}, "conversations": {last}}}', [[7000], [8000, 9000]]),
        (f'{{"conversations": {bad}, "conversations": {first}}}', [[100, 200], [300]]),
        (f'{{"conversations": {turn_dup}}}', [[6]]),
    ]:
        assert _json_load_turns(text, limit) == want[:limit]
        assert _turns(load_agentic_trace(write(tmp_path, text), limit=limit)) == want[:limit], text
    # the last list decides what is refused: an empty one is refused, as bench_serving does
    with pytest.raises(ConfigError, match="conversations"):
        load_agentic_trace(write(tmp_path, f'{{"conversations": {first}, "conversations": []}}'), limit=limit)
    with pytest.raises(ConfigError, match=r"conversations\[0\]\[1\]\.prompt_tokens"):
        load_agentic_trace(write(tmp_path, f'{{"conversations": {first}, "conversations": {bad}}}'), limit=limit)


@pytest.mark.parametrize("tail", [" x", "{}", ",", "]", ' {"conversations": []}', "\n}\n"])
@pytest.mark.parametrize("limit", [None, 1])
def test_anything_but_blanks_after_the_top_level_object_is_refused_as_json_load_does(tmp_path, tail, limit):
    text = json.dumps(trace_doc([[100, 200], [300]]))
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        json.loads(text + tail)
    p = write(tmp_path, text + tail)
    with pytest.raises(ConfigError) as e:
        load_agentic_trace(p, limit=limit)
    assert str(e.value).startswith(f"{p}: <after the top-level object> = ") and "\n" not in str(e.value)
    assert _turns(load_agentic_trace(write(tmp_path, text + " \n\t\r\n"), limit=limit)) == [[100, 200], [300]][:limit]


@pytest.mark.parametrize("limit", [None, 1])
def test_broken_json_after_the_conversations_is_refused_as_json_load_does(tmp_path, limit):
    # metadata after the list, conversations past --num-prompts: json.load reads them all
    text = json.dumps(trace_doc([[100], [300]]))
    for broken in (text.replace('"synthetic"', "synthetic"), text.replace('"c1 t0 ', "c1 t0 "),
                   text.replace('"c1 t0 ', '"c1 \\q')):
        with pytest.raises(json.JSONDecodeError):
            json.loads(broken)
        with pytest.raises(ConfigError, match="not valid JSON"):
            load_agentic_trace(write(tmp_path, broken), limit=limit)


BAD = [
    ("no-conversations", {"metadata": {}, "turns": []}, "conversations", "<missing>"),
    ("no-prompt-tokens", trace_doc([[1000, None]]) | {"conversations": [[{"messages": "hi", "prompt_tokens": 5},
                                                                         {"messages": "again"}]]},
     "conversations[0][1].prompt_tokens", "<missing>"),
    ("decreasing", trace_doc([[100, 300], [1000, 900]]), "conversations[1][1].prompt_tokens", "900"),
    ("negative", trace_doc([[100], [-5]]), "conversations[1][0].prompt_tokens", "-5"),
    ("not-an-int", trace_doc([[100, 250.5]]), "conversations[0][1].prompt_tokens", "250.5"),
    ("bad-messages", {"conversations": [[{"messages": [{"role": "user"}], "prompt_tokens": 5}]]},
     "conversations[0][0].messages", "list"),
    ("conversation-not-a-list", {"conversations": [{"messages": "x"}]}, "conversations[0]", ""),
    ("empty", {"conversations": []}, "conversations", "[]"),
    ("not-an-object", [[{"messages": "x", "prompt_tokens": 3}]], "<top level>", ""),
    ("truncated", json.dumps(trace_doc([[100, 200]]))[:-30], "", ""),
    # fuzzed: a raw control character in a key, and a count past int64, were tracebacks
    ("key-control-char", '{"a\tb": 1, "conversations": [[{"messages": "x", "prompt_tokens": 3}]]}', "<top level>",
     "not valid JSON"),
    ("prompt-tokens-huge", {"conversations": [[{"messages": "x", "prompt_tokens": 10**23}]]},
     "conversations[0][0].prompt_tokens", "100000000000000000000000"),
    # json.load refuses nesting this deep (RecursionError); so does the reader, in one line
    ("too-deep", '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + ', "conversations": [[{"messages": "x", '
     '"prompt_tokens": 3}]]}', "<file>", "nested too deeply"),
    ("too-deep-turn", '{"conversations": [[{"messages": ' + "[" * 100_000 + "]" * 100_000 + ', "prompt_tokens": 3}]]}',
     "<file>", "nested too deeply"),
]


@pytest.mark.parametrize("doc, key, value", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_traces_name_file_key_and_value(tmp_path, doc, key, value):
    p = write(tmp_path, doc)
    with pytest.raises(ConfigError) as e:
        load_agentic_trace(p)
    msg = str(e.value)
    assert msg.startswith(str(p)) and key in msg and value in msg


@pytest.mark.parametrize("doc, key, value", [BAD[2][1:], BAD[0][1:]], ids=["decreasing", "no-conversations"])
def test_a_bad_trace_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, doc, key, value):
    write(tmp_path, doc, "trace.json")
    y = tmp_path / "s.yaml"
    y.write_text((ROOT / "scenarios" / "agentic-trace-example.yaml").read_text()
                 .replace("path: agentic-trace-example.json", "path: trace.json"))
    out = tmp_path / "out"
    assert main(["run", str(y), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and "trace.json" in err[0]
    assert not out.exists()


def test_a_large_trace_streams_without_holding_its_text(tmp_path):
    # ~24 MB of message text; the reader keeps token counts only: its peak allocation stays
    # far below the file (json.load would hold the text and its parsed objects)
    text = "y" * 20_000
    convs = [[{"messages": [{"role": "tool", "content": text}], "prompt_tokens": 1000 + 500 * k} for k in range(30)]
             for _ in range(40)]
    p = write(tmp_path, {"metadata": {"blob": text * 10}, "conversations": convs})
    assert p.stat().st_size > 24e6
    tracemalloc.start()
    tr = load_agentic_trace(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tr.num_turns.tolist() == [30] * 40
    assert peak < 6e6, peak


# ------------------------------------------------------------------ the workload

def test_scenario_keys_that_the_trace_gives_are_refused_with_it():
    with pytest.raises(ValidationError, match="num_turns"):
        scenario(dict(num_turns=3, agentic_trace=dict(path=str(EXAMPLE))))
    with pytest.raises(ValidationError, match="first_prompt_len"):
        scenario(dict(num_conversations=2, num_turns=3))
    with pytest.raises(ValidationError, match="num_requests"):
        Scenario.model_validate(dict(
            name="x", profile="mi355x-dsv41-flash-tp4", server=SERVER,
            workload=dict(kind="multi_turn", concurrency=2, num_requests=5, output_len=dict(value=5),
                          multi_turn=dict(agentic_trace=dict(path=str(EXAMPLE))))))


def test_each_conversation_is_sent_turn_after_turn_with_its_own_count():
    sc = scenario(dict(agentic_trace=dict(path=str(EXAMPLE))), concurrency=3)
    eng = SimEngine(sc)
    res = eng.run()
    assert res.summary["completed"] == sum(EXAMPLE_TURNS)
    q = res.requests.sort_values("rid")
    start, fin = q["start_s"].to_numpy(), q["finish_s"].to_numpy()
    bounds = np.cumsum([0] + EXAMPLE_TURNS)
    for c in range(8):
        s, e = bounds[c], bounds[c + 1]
        assert [eng.specs[i].turn for i in range(s, e)] == list(range(e - s))
        assert (start[s + 1:e] >= fin[s:e - 1] - 1e-12).all()       # turn t+1 sent after turn t's last token
        # each later turn resends the previous turn's prompt and reply, plus the trace's growth
        for i in range(s + 1, e):
            assert np.array_equal(eng.specs[i].tokens[:len(eng.specs[i - 1].tokens)], eng.specs[i - 1].tokens)
    # 3 in flight: at no time more than 3 conversations have a turn in the server
    ev = sorted([(t, 1) for t in start] + [(t, -1) for t in fin])
    assert max(np.cumsum([d for _, d in ev])) <= 3


def test_conversations_start_at_the_request_rate_and_wait_for_a_slot():
    # bench_serving --request-rate R --max-concurrency C over multi-turn rows: each
    # conversation's first turn is sent at its drawn start, or when a slot frees if later
    from specsched.sim.workload import poisson_arrivals

    base = dict(agentic_trace=dict(path=str(EXAMPLE)))
    sc = Scenario.model_validate({**scenario(base).model_dump(), "workload": {
        **scenario(base).workload.model_dump(exclude_none=True), "request_rate": 0.5, "concurrency": 2}})
    eng = SimEngine(sc)
    res = eng.run()
    q = res.requests.sort_values("rid")
    start, fin = q["start_s"].to_numpy(), q["finish_s"].to_numpy()
    firsts = [i for i, s in enumerate(eng.specs) if s.turn == 0]
    drawn = poisson_arrivals(8, 0.5, sc.seed)
    assert (start[firsts] >= drawn - 1e-9).all()
    assert start[firsts[:2]] == pytest.approx(drawn[:2], abs=1e-9)        # a free slot: sent at its start
    assert (start[firsts] > drawn + 1e-3).any()                           # and some waited for one
    ev = sorted([(t, 1) for t in start] + [(t, -1) for t in fin])
    assert max(np.cumsum([d for _, d in ev])) <= 2
    # no cap: every conversation starts at its drawn time
    free = Scenario.model_validate({**sc.model_dump(), "workload": {**sc.workload.model_dump(exclude_none=True),
                                                                       "concurrency": None}})
    e2 = SimEngine(free)
    q2 = e2.run().requests.sort_values("rid")
    assert q2["start_s"].to_numpy()[firsts] == pytest.approx(drawn, abs=1e-9)


def test_hit_rate_rises_with_the_turns_a_conversation_keeps():
    rates = []
    for m in (1, 2, 4, None):
        res = SimEngine(scenario(dict(agentic_trace=dict(path=str(EXAMPLE), max_turns=m)))).run()
        rates.append(res.summary["cache_hit_rate"])   # present with the cache on, 0.0 without a hit
    assert rates[0] == 0.0                                          # one turn each: nothing to reuse
    assert all(a < b for a, b in zip(rates, rates[1:], strict=False)), rates
    assert rates[-1] > 0.8


def test_a_shared_system_prompt_is_carved_from_turn_zero_and_hit_by_every_conversation():
    eng = SimEngine(scenario(dict(system_prompt_len=4000, agentic_trace=dict(path=str(EXAMPLE), max_turns=1))))
    eng.run()
    firsts = load_agentic_trace(EXAMPLE, max_turns=1).prompt_tokens
    assert [s.input_len for s in eng.specs] == firsts.tolist()       # turn 0 = its prompt_tokens, still
    assert eng.sched.cache_hit_tokens >= 4000 * 4                   # the later conversations hit the shared part
    with pytest.raises(ConfigError, match="system_prompt_len"):
        make_requests(scenario(dict(system_prompt_len=6000, agentic_trace=dict(path=str(EXAMPLE)))).workload, 1)


def test_dp_ranks_route_each_turn_of_conversations_of_their_own_lengths():
    # round-robin DP ranks with turn counts that differ: a turn that stays on the rank
    # extends the previous turn's tokens; one that arrives from another shares the system prompt only
    from specsched.sim.prefix_workload import conversation_plan, multi_turn_conversations

    for mt in (dict(num_conversations=12, num_turns=dict(kind="uniform", value=7, range_ratio=0.0),
                    first_prompt_len=dict(value=50), user_len=dict(value=9), system_prompt_len=5, dp_ranks=3),
               dict(agentic_trace=dict(path=str(EXAMPLE)), system_prompt_len=5, dp_ranks=3)):
        cfg = scenario(mt).workload.multi_turn
        plan = conversation_plan(cfg, 4)
        convs = multi_turn_conversations(cfg, np.full(plan.total, 6), 4, None, plan)
        assert [len(c) for c in convs] == plan.turns.tolist()
        stayed = moved = 0
        for specs in convs:
            for a, b in zip(specs, specs[1:], strict=False):
                if np.array_equal(b.tokens[:len(a.tokens)], a.tokens):
                    stayed += 1
                else:
                    assert np.array_equal(b.tokens[:5], a.tokens[:5]) and b.tokens[5] != a.tokens[5]
                    moved += 1
        assert stayed and moved


def test_drawn_turn_counts_differ_per_conversation_and_keep_fixed_runs_unchanged():
    base = dict(num_conversations=200, first_prompt_len=dict(value=100), user_len=dict(value=20))
    w = scenario({**base, "num_turns": dict(kind="uniform", value=11, range_ratio=0.0)}).workload
    specs = make_requests(w, 3)
    turns = np.diff(np.flatnonzero([s.turn == 0 for s in specs] + [True]))
    assert len(turns) == 200 and turns.min() == 1 and turns.max() == 11
    assert 5 < turns.mean() < 7
    # a fixed count draws what it drew before the distribution existed: the same prompts
    fixed = make_requests(scenario({**base, "num_turns": 3}).workload, 3)
    same = make_requests(scenario({**base, "num_turns": dict(kind="fixed", value=3)}).workload, 3)
    assert [s.input_len for s in fixed] == [s.input_len for s in same]


def _tpot_shape(turns):
    med, mean, tail = [], [], []
    for seed in (1, 2, 3):
        res = SimEngine(scenario(dict(num_conversations=48, num_turns=turns, first_prompt_len=dict(value=6000),
                                      user_len=dict(value=800)), concurrency=8, seed=seed, out=200)).run()
        tp = res.requests["tpot_s"].dropna().to_numpy()
        med.append(np.median(tp))
        mean.append(tp.mean())
        tail.append(np.percentile(tp, 90) / np.median(tp))
    return np.mean(med), np.mean(mean), np.mean(tail)


def test_mixed_turn_counts_desynchronize_conversations_median_tpot_above_mean():
    # every conversation of 6 turns: the 8 slots refill in step, their 6K first prompts land
    # together and stall decode: a long TPOT tail, the mean ~4 % above the median. Turn counts
    # 1-11 (same mean) spread the first prompts over the run: a short tail and the mean back
    # at the median, towards the shape the agentic cells measured (median above the mean,
    # docs/agentic.md). Mixed counts put the median above the mean on 4 of seeds 1-8 (mean of
    # the 8: median/mean - 1 +0.05 % with the accept draws before their key moved, -0.03 % after):
    # "above" is a coin flip here, so the bound is "no longer below by the fixed run's gap"
    f_med, f_mean, f_tail = _tpot_shape(6)
    m_med, m_mean, m_tail = _tpot_shape(dict(kind="uniform", value=11, range_ratio=0.0))
    assert f_mean > 1.02 * f_med and abs(m_med / m_mean - 1) < 0.01
    assert m_tail < f_tail - 0.05


# ------------------------------------------------------------------ from-bench

SGLANG_LINE = {"tag": None, "backend": "sglang-oai-chat", "dataset_name": "agentic-trace", "request_rate": float("inf"),
               "max_concurrency": 4, "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 1024,
               "random_range_ratio": 0.0, "server_info": None, "duration": 20.0, "completed": 21,
               "total_input_tokens": 0, "total_output_tokens": 21 * 220, "median_ttft_ms": 80.0,
               "output_throughput": 230.0, "request_throughput": 1.05, "input_throughput": 0.0,
               "total_throughput": 230.0}
"""An agentic-trace line as SGLang 0.5.23 writes it: a multi-turn replay, so no input token is
counted (``calculate_metrics(input_requests=None)``) and ``total_throughput`` is the output's."""


def test_from_bench_builds_the_agentic_replay_from_a_sglang_line(tmp_path, monkeypatch):
    # SGLang writes neither the path, the offset nor --num-prompts: the path is an option and
    # the conversations are the count whose turns add up to the 21 completed requests
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, SGLANG_LINE, "runs.jsonl")
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out", "a.yaml",
                 "--dataset-path", str(EXAMPLE), "--dataset-offset", "2"]) == 0
    sc = load_scenario(tmp_path / "a.yaml")
    w = sc.workload
    assert (w.kind, w.concurrency, w.output_len.value) == ("multi_turn", 4, 220)
    assert w.multi_turn.agentic_trace.offset == 2 and w.multi_turn.num_conversations == 4   # 6 + 2 + 9 + 4
    assert sum(1 for s in make_requests(w, 1, sc.path) if s.turn == 0) == 4
    assert any("220" in a for a in sc.assumptions)
    # a conversation count given that does not send the line's requests is said
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out", "c.yaml",
                 "--dataset-path", str(EXAMPLE), "--num-prompts", "3"]) == 0
    assert any("send 23 turns, the line 21 requests" in a for a in load_scenario(tmp_path / "c.yaml").assumptions)


def test_from_bench_a_finite_rate_starts_conversations_at_it(tmp_path):
    p = write(tmp_path, dict(SGLANG_LINE, request_rate=2.0, max_concurrency=None, sharegpt_output_len=512), "r.jsonl")
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out",
                 str(tmp_path / "r.yaml"), "--dataset-path", str(EXAMPLE), "--num-prompts", "5"]) == 0
    w = load_scenario(tmp_path / "r.yaml").workload
    assert (w.request_rate, w.concurrency, w.output_len.value, w.multi_turn.num_conversations) == (2.0, None, 512, 5)


@pytest.mark.parametrize("args, key", [
    ([], "--dataset-path"),                                   # no trace named
    (["--dataset-path", str(EXAMPLE)], "completed"),          # 22 requests: no count of conversations sends them
    (["--dataset-path", "missing.json"], "--dataset-path"),
])
def test_from_bench_agentic_refusals_are_one_line_and_write_nothing(tmp_path, capsys, args, key):
    line = dict(SGLANG_LINE, completed=22, request_throughput=1.1) if len(args) == 2 and args[1] == str(EXAMPLE) else SGLANG_LINE
    p = write(tmp_path, line, "runs.jsonl")
    out = tmp_path / "a.yaml"
    assert main(["scenario", "from-bench", str(p), "--profile", "mi355x-dsv41-flash-tp4", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and (key in err[0] or "dataset_name" in err[0])
    assert not out.exists()


def test_from_bench_round_trip_of_a_simulated_agentic_run(tmp_path, monkeypatch):
    # run the shipped example, write it as bench_serving, rebuild the scenario from the line:
    # the same conversations (turns, prompts), concurrency and output per turn
    monkeypatch.chdir(tmp_path)
    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    mt = sc.workload.multi_turn.model_dump(exclude_none=True)
    assert mt["system_prompt_len"] == 4000   # the example's shared system prompt, which the trace does not give
    mt = {**mt, "agentic_trace": {"path": str(EXAMPLE), "offset": 3, "max_turns": 6, "trace_reply_len": 200}}
    sc = Scenario.model_validate({**sc.model_dump(), "workload": {**sc.workload.model_dump(exclude_none=True), "multi_turn": mt}})
    res = SimEngine(sc).run()
    line = write_results(res, tmp_path / "out") / "bench_serving.jsonl"
    assert main(["scenario", "from-bench", str(line), "--profile", "mi355x-dsv41-flash-tp4", "--out", "b.yaml"]) == 0
    back = load_scenario(tmp_path / "b.yaml")
    wa, wb = sc.workload, back.workload
    assert (wb.kind, wb.concurrency, wb.output_len) == (wa.kind, wa.concurrency, wa.output_len)
    assert (wb.multi_turn.agentic_trace.offset, wb.multi_turn.agentic_trace.max_turns) == (3, 6)
    # the assumptions the line's run made come back with it (the line carries them as its own keys)
    assert (wb.multi_turn.system_prompt_len, wb.multi_turn.agentic_trace.trace_reply_len) == (4000, 200)
    a, b = make_requests(wa, sc.seed, sc.path), make_requests(wb, back.seed, back.path)
    assert [(s.input_len, s.output_len, s.turn) for s in a] == [(s.input_len, s.output_len, s.turn) for s in b]


def test_validate_bench_rebuilds_an_agentic_line_from_its_trace(tmp_path, capsys):
    # a specsched line holds its send times; an agentic-trace line is still rebuilt from the
    # trace (conversation by conversation), not replayed as single requests
    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    line = write_results(SimEngine(sc).run(), tmp_path / "out") / "bench_serving.jsonl"
    assert main(["validate-bench", str(line), "--profile", "mi355x-dsv41-flash-tp4", "--seeds", "1",
                 "--out", str(tmp_path / "vb")]) == 0
    built = load_scenario(tmp_path / "vb" / "from-bench.yaml")
    assert built.workload.kind == "multi_turn" and built.workload.multi_turn.agentic_trace is not None
    out = capsys.readouterr().out
    assert "completed" in out and "+0.00%" in out.split("completed", 1)[1].splitlines()[0]


def test_validate_bench_of_an_agentic_line_neither_ignores_nor_suggests_arrivals_details(tmp_path, capsys):
    # from-bench refuses --arrivals details for an agentic-trace line (rebuilt from its trace
    # only); validate-bench ignored it silently, and with --scenario its note told the user
    # to run that refused command
    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    line = write_results(SimEngine(sc).run(), tmp_path / "out") / "bench_serving.jsonl"
    out = tmp_path / "vb"
    assert main(["validate-bench", str(line), "--profile", "mi355x-dsv41-flash-tp4", "--seeds", "1",
                 "--arrivals", "details", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--arrivals" in err[0] and "'details'" in err[0] and not out.exists()
    assert main(["validate-bench", str(line), "--scenario", str(ROOT / "scenarios" / "agentic-trace-example.yaml"),
                 "--seeds", "1", "--out", str(out)]) == 0
    assert "--arrivals details" not in capsys.readouterr().out


def test_a_directory_given_as_the_trace_is_named_as_one(tmp_path, capsys):
    # a folder was refused as 'agentic trace file does not exist', though it exists
    y = tmp_path / "s.yaml"
    y.write_text((ROOT / "scenarios" / "agentic-trace-example.yaml").read_text())
    (tmp_path / "traces").mkdir()
    out = tmp_path / "o"
    assert main(["run", str(y), "--set", "workload.multi_turn.agentic_trace.path=traces", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "path = 'traces'" in err[0] and "is a directory" in err[0] and not out.exists()
    assert main(["run", str(y), "--set", "workload.multi_turn.agentic_trace.path=nope.json", "--out", str(out), "--quiet"]) == 2
    assert "beside the scenario" in capsys.readouterr().err


def test_calibrate_from_an_agentic_line_rebuilds_it_from_its_trace(tmp_path):
    # calibrate --from (arrivals auto) asked from-bench to replay the send times of a
    # simulated agentic line, which it refuses: 'calibrate --from' failed on a line
    # validate-bench takes, naming an --arrivals the user never gave
    from specsched.analysis.calibrate_bench import cases_from_runs
    from specsched.sim.bench_serving import read_bench_one
    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    line = write_results(SimEngine(sc).run(), tmp_path / "out") / "bench_serving.jsonl"
    (case,) = cases_from_runs([read_bench_one(str(line))], "mi355x-dsv41-flash-tp4", None, tmp_path)
    assert case.scenario.workload.kind == "multi_turn" and case.scenario.workload.multi_turn.agentic_trace is not None
    with pytest.raises(ConfigError, match="--arrivals"):
        cases_from_runs([read_bench_one(str(line))], "mi355x-dsv41-flash-tp4", None, tmp_path, "details")


def test_calibrate_from_takes_the_trace_of_sglangs_own_agentic_lines(tmp_path, capsys):
    """SGLang's bench_serving writes no trace path into an agentic-trace line: calibrate said
    "give it with --dataset-path" and then refused --dataset-path as an unknown argument."""
    import json

    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    line = write_results(SimEngine(sc).run(), tmp_path / "out") / "bench_serving.jsonl"
    d = json.loads(line.read_text().splitlines()[0])
    for k in [k for k in d if k in ("dataset_path", "dataset_offset") or k.startswith("agentic_")]:   # as SGLang writes it
        d.pop(k)
    sgl = tmp_path / "sgl.jsonl"
    sgl.write_text(json.dumps(d) + "\n")
    base = ["calibrate", "--from", str(sgl), "--profile", "mi355x-dsv41-flash-tp4", "--params", "decode",
            "--seeds", "1", "--max-evals", "2", "--out", str(tmp_path / "fit.yaml")]
    assert main(base) == 2
    assert "--dataset-path" in capsys.readouterr().err and not (tmp_path / "fit.yaml").exists()
    assert main([*base, "--dataset-path", str(EXAMPLE)]) == 0
    assert (tmp_path / "fit.yaml").exists()


def test_validate_measured_takes_the_agentic_options_validate_bench_takes(tmp_path, capsys):
    """`validate --measured F:L` is documented as validate-bench's comparison, but it had no
    --dataset-path (nor --dataset-offset, --agentic-max-turns, --num-prompts): an SGLang
    agentic-trace line, which holds no trace path, was refused asking for --dataset-path, and
    giving it was an unrecognized argument. Now both commands take the four options."""
    import json

    from specsched.sim.results import write_results

    sc = load_scenario(ROOT / "scenarios" / "agentic-trace-example.yaml")
    line = write_results(SimEngine(sc).run(), tmp_path / "out") / "bench_serving.jsonl"
    obj = json.loads(line.read_text().splitlines()[0])
    for key in ("dataset_path", "dataset_offset", "agentic_max_turns"):   # as SGLang's line: none of them
        obj.pop(key, None)
    sglang_like = tmp_path / "agentic.jsonl"
    sglang_like.write_text(json.dumps(obj) + "\n")
    trace = ROOT / "scenarios" / sc.workload.multi_turn.agentic_trace.path
    offset = sc.workload.multi_turn.agentic_trace.offset or 0
    turns = sc.workload.multi_turn.agentic_trace.max_turns
    opts = ["--dataset-path", str(trace), "--dataset-offset", str(offset),
            *(["--agentic-max-turns", str(turns)] if turns else [])]
    assert main(["validate", "--measured", f"{sglang_like}:1", "--profile", "mi355x-dsv41-flash-tp4", "--seeds", "1",
                 "--out", str(tmp_path / "v"), *opts]) == 0
    built = load_scenario(tmp_path / "v" / "from-bench.yaml")
    assert built.workload.kind == "multi_turn" and built.workload.multi_turn.agentic_trace is not None
