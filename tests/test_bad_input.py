"""Every bad input a user can give: exit 2, one line on stderr naming the file and key, no
traceback, nothing written (issue 12 part 6, issue 13 part 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specsched.cli import main
from tests.conftest import ROOT
from tests.test_cli_and_io import small_scenario

BILLION_LAUGHS = """name: bomb
profile: mi355x-dsv41-flash-tp4
workload: {kind: burst, num_requests: 2, input_len: {value: 8}, output_len: {value: 8}}
arms:
  unused:
    description: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    source: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    x1: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    x2: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    x3: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    x4: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    x5: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    x6: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    x7: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""

# (case id, text replacements in the small scenario, key expected in the message)
SCENARIO_CASES = [
    # server section
    ("mrr-negative", {"max_running_requests: 128": "max_running_requests: -3"}, "server.max_running_requests"),
    ("mrr-bool", {"max_running_requests: 128": "max_running_requests: true"}, "server.max_running_requests"),
    ("mrr-yes", {"max_running_requests: 128": "max_running_requests: yes"}, "server.max_running_requests"),
    ("mrr-hex", {"max_running_requests: 128": "max_running_requests: 0x10"}, "server.max_running_requests"),
    ("mrr-float", {"max_running_requests: 128": "max_running_requests: 128.0"}, "server.max_running_requests"),
    ("chunk-zero", {"chunked_prefill_size: 16384": "chunked_prefill_size: 0"}, "server.chunked_prefill_size"),
    ("chunk-minus5", {"chunked_prefill_size: 16384": "chunked_prefill_size: -5"}, "server.chunked_prefill_size"),
    ("chunk-2e31", {"chunked_prefill_size: 16384": "chunked_prefill_size: 2147483648"}, "server.chunked_prefill_size"),
    ("chunk-1e29", {"chunked_prefill_size: 16384": "chunked_prefill_size: 100000000000000000000000000000"},
     "server.chunked_prefill_size"),
    ("chunk-below-page", {"chunked_prefill_size: 16384": "chunked_prefill_size: 7\n  page_size: 16"},
     "server.chunked_prefill_size"),
    ("page-huge", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  page_size: 1000000000"},
     "server.page_size"),
    ("spec-steps-huge", {"speculative_algorithm: dspark": "speculative_algorithm: eagle\n  speculative_num_steps: 1000000"},
     "server.speculative_num_steps"),
    ("ngram", {"speculative_algorithm: dspark": "speculative_algorithm: NGRAM"}, "server.speculative_algorithm"),
    ("dp-replicas-bootstrap-room", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  dp_size: 4\n  load_balance_method: follow_bootstrap_room"},
     "server.load_balance_method"),
    # sglang 0.5.23 arg_groups/validation_hook.py check_server_args: chunked_prefill_size must be
    # divisible by page_size; priority scheduling takes fcfs or lof only
    ("chunk-not-whole-pages", {"chunked_prefill_size: 16384": "chunked_prefill_size: 1000\n  page_size: 16"},
     "server.chunked_prefill_size"),
    ("priority-lpm", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  enable_priority_scheduling: true\n  schedule_policy: lpm"},
     "server.schedule_policy"),
    ("dp-chunk-below-page", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16\n  page_size: 16\n  dp_size: 2\n  enable_dp_attention: true"},
     "server.chunked_prefill_size"),
    ("sync-mode", {"sync_mode: host_block": "sync_mode: spin"}, "server.sync_mode"),
    ("retraction-priority-alone", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  retraction_policy: priority"},
     "server.retraction_policy"),
    ("retraction-unknown", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  retraction_policy: oldest"},
     "server.retraction_policy"),
    ("mixed-yes", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  enable_mixed_chunk: yes"},
     "server.enable_mixed_chunk"),
    ("duplicate-key", {"chunked_prefill_size: 16384": "chunked_prefill_size: 16384\n  chunked_prefill_size: 8192"},
     "line"),
    # acceptance section
    ("rates-empty", {"mean_accept_length: ": "per_position_rates: []\n  #"}, "acceptance.per_position_rates"),
    ("rates-too-long", {"mean_accept_length: ": "per_position_rates: [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]\n  #"},
     "acceptance.per_position_rates"),
    ("hist-inf", {"mean_accept_length: ": "histogram: [.inf, 1]\n  #"}, "acceptance.histogram"),
    ("hist-sum", {"mean_accept_length: ": "histogram: [0.5, 0.2]\n  #"}, "acceptance.histogram"),
    ("hist-nan", {"mean_accept_length: ": "histogram: [.nan, 1]\n  #"}, "acceptance.histogram"),
    ("accept-window", {"mean_accept_length: ": "mean_accept_length: 9 #"}, "acceptance.mean_accept_length"),
    # speculative decoding with no accept-length distribution would reject every draft
    ("accept-missing", {"mean_accept_length: ": "# no mean_accept_length: "}, "acceptance"),
    # workload section
    ("requests-huge", {"num_requests: 10": "num_requests: 100000000000"}, "workload.num_requests"),
    ("requests-1e12", {"num_requests: 10": "num_requests: 1e12"}, "workload.num_requests"),
    ("requests-true", {"num_requests: 10": "num_requests: true"}, "workload.num_requests"),
    ("prompt-over-pool", {"max_total_num_tokens: 2600000": "max_total_num_tokens: 3000",
                          "value: 4096": "value: 4000"}, "workload.input_len"),
    ("output-over-pool", {"max_total_num_tokens: 2600000": "max_total_num_tokens: 3000",
                          "value: 4096": "value: 100", "value: 64": "value: 2990"}, "workload.output_len"),
    ("concurrency-missing", {"  concurrency: 8\n": ""}, "workload"),
    ("kind-typo", {"kind: closed_loop": "kind: closedloop"}, "workload.kind"),
    # a YAML escape of a lone surrogate: a profile name of one was a UnicodeEncodeError traceback
    ("surrogate", {"name: batch8-ll": 'name: "\\ud800"'}, "surrogate"),
    # top level and arms
    ("unknown-top", {"seed: ": "sed: 3\nseed: "}, "sed"),
    ("arm-typo-unused", {"arms:": "arms:\n  typo_arm: {server: {max_runing_requests: 3}}"},
     "arms.typo_arm.server.max_runing_requests"),
    ("arm-bad-value-unused", {"arms:": "arms:\n  typo_arm: {server: {chunked_prefill_size: 0}}"},
     "arms.typo_arm.server.chunked_prefill_size"),
    # names become folders: results/<name>/<arm>-seed<N> (../ wrote outside results/)
    ("name-up", {"name: batch8-ll": "name: ../../escaped"}, "name = '../../escaped'"),
    ("name-slash", {"name: batch8-ll": "name: a/b"}, "name = 'a/b'"),
    ("name-dotdot", {"name: batch8-ll": "name: '..'"}, "name = '..'"),
    ("arm-up", {"arms:": "arms:\n  ../up: {seed: 2}"}, "arms.../up"),
]


def _poisson(tmp_path: Path, rate: str) -> Path:
    text = (ROOT / "scenarios" / "poisson8b-fixed.yaml").read_text()
    for a, b in (("request_rate: 6.0", f"request_rate: {rate}"), ("num_requests: 1000", "num_requests: 20"),
                 ("profile: h200-llama8b-roofline", f"profile: {ROOT / 'profiles' / 'h200-llama8b-roofline.yaml'}")):
        assert a in text
        text = text.replace(a, b)
    p = tmp_path / "p.yaml"
    p.write_text(text)
    return p


def _assert_refused(capsys, argv: list[str], out: Path, *needles: str) -> str:
    assert main([*argv, "--out", str(out)]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("specsched: error: ") and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))
    return err


@pytest.mark.parametrize(("case", "replace", "key"), SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
def test_bad_scenario_value(tmp_path, capsys, case, replace, key):
    path = small_scenario(tmp_path, **replace)
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path), key)


@pytest.mark.parametrize(("replace", "tail"), [
    ({"sync_mode: host_block": "sync_mode: stream-wait"},
     "server.sync_mode = 'stream-wait': allowed: host_block, stream_wait, cross_queue_wait; did you mean 'stream_wait'?"),
    ({"kind: closed_loop": "kind: closedloop"},
     "workload.kind = 'closedloop': allowed: burst, closed_loop, poisson, trace, multi_turn; did you mean 'closed_loop'?"),
    ({"sync_mode: host_block": "sync_mode: zzz"}, "server.sync_mode = 'zzz': allowed: host_block, stream_wait, cross_queue_wait"),
])
def test_a_value_outside_a_fixed_set_lists_the_allowed_values(tmp_path, capsys, replace, tail):
    """A value outside an enum or a literal reads in the project's words, ``allowed: a, b, c``
    (and the closest one when it looks like a typo), not pydantic's "Input should be 'a', 'b'
    or 'c'"."""
    path = small_scenario(tmp_path, **replace)
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert err.endswith(tail) and "Input should be" not in err, err


def test_a_server_key_written_at_the_top_level_names_its_block(tmp_path, capsys):
    """A scenario file with ``chunked_prefill_size`` at the top level (not under
    ``server:``) is refused naming the key it belongs to, ``server.chunked_prefill_size``."""
    path = small_scenario(tmp_path, **{"seed: 1": "seed: 1\nchunked_prefill_size: 4096"})
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert "chunked_prefill_size = 4096: unknown key; did you mean 'server.chunked_prefill_size'?" in err, err


@pytest.mark.parametrize(("replace", "key"), [({"name: batch8-ll\n": ""}, "name"),
                                            ({"  kind: closed_loop\n": ""}, "workload.kind")])
def test_a_missing_required_key_says_required_and_where_the_keys_are_listed(tmp_path, capsys, replace, key):
    """A required key left out reads "required" and points at ``specsched schema``, not
    pydantic's "Field required"."""
    path = small_scenario(tmp_path, **replace)
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert f"{key} = '<missing>': required (specsched schema lists every key" in err and "Field" not in err, err


def test_a_bare_number_for_a_length_shows_the_mapping_it_means(tmp_path, capsys):
    """``output_len: 1024`` (a number where a length distribution belongs) is refused with
    the mapping that says it, ``{kind: fixed, value: 1024}``."""
    path = small_scenario(tmp_path, **{"output_len: {kind: fixed, value: 64}": "output_len: 64"})
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert "workload.output_len = 64: must be a mapping (key: value), e.g. {kind: fixed, value: 64}" in err, err


@pytest.mark.parametrize(("written", "shown", "unquoted"), [('"0.5"', "'0.5'", "0.5"), ("'16'", "'16'", "16"),
                                                        ('"false"', "'false'", "false")])
def test_a_quoted_number_or_boolean_says_to_drop_the_quotes(tmp_path, capsys, written, shown, unquoted):
    """``mem_fraction_static: "0.85"`` was refused as "must be a number", which reads as
    nonsense to whoever wrote 0.85; the value is a YAML string because it is quoted: the
    refusal says so and what to write. A string that is no number (``8k``) is refused as before."""
    key = {"0.5": "workload.burstiness", "16": "server.page_size", "false": "server.enable_mixed_chunk"}[unquoted]
    block, name = key.split(".")
    path = small_scenario(tmp_path)
    text = path.read_text().replace(f"{block}:\n", f"{block}:\n  {name}: {written}\n", 1)
    path.write_text(text)
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert f"{key} = {shown}: must be" in err and f"quoted: write {unquoted} without quotes" in err, err


def test_chunk_above_int32_names_file_key_value_and_range(tmp_path, capsys):
    """chunked_prefill_size has an upper bound, SGLang's int32 KV slot index (it ran a chunk of
    1e29 tokens as no chunking); -1 (off) and 2**31 - 1 still load."""
    from specsched.sim.config import load_scenario
    from specsched.sim.server_args import MAX_CHUNK_TOKENS

    path = small_scenario(tmp_path, **{"chunked_prefill_size: 16384": "chunked_prefill_size: 2147483648"})
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path))
    assert "server.chunked_prefill_size = 2147483648" in err and "[1, 2147483647]" in err and "-1" in err, err
    for ok in (-1, 1, MAX_CHUNK_TOKENS):
        p = small_scenario(tmp_path, **{"chunked_prefill_size: 16384": f"chunked_prefill_size: {ok}"})
        assert load_scenario(p).server.chunked_prefill_size == ok


@pytest.mark.parametrize(("case", "content"), [
    ("binary", bytes(range(256)) * 4),
    ("empty", b""),
    ("only-comment", b"# nothing\n"),
    ("a-list", b"- 1\n- 2\n"),
    ("nul-bytes", b"name: x\x00\n"),
    ("billion-laughs", BILLION_LAUGHS.encode()),
    ("recursive-alias", b"name: &a [*a]\n"),
    ("bad-yaml", b"name: [unclosed\n"),
    ("deep-nesting", b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
])
def test_bad_file(tmp_path, capsys, case, content):
    p = tmp_path / "bad.yaml"
    p.write_bytes(content)
    _assert_refused(capsys, ["run", str(p)], tmp_path / "res", str(p))


def test_directory_and_missing_file(tmp_path, capsys):
    (tmp_path / "d.yaml").mkdir()
    assert "is a directory" in _assert_refused(capsys, ["run", str(tmp_path / "d.yaml")], tmp_path / "res")
    assert "does not exist" in _assert_refused(capsys, ["run", str(tmp_path / "nope.yaml")], tmp_path / "res")


@pytest.mark.parametrize(("item", "needle"), [
    ("server.max_runing_requests=3", "did you mean 'server.max_running_requests'"),
    ("workload.num_request=3", "did you mean 'workload.num_requests'"),
    ("workload.rate=4", "did you mean 'workload.request_rate'"),   # a short form, not the nearest spelling ('trace')
    ("server.max_running_requests=0x10", "server.max_running_requests"),
    ("server.enable_mixed_chunk=yes", "server.enable_mixed_chunk"),
    ("workload.request_rate=1e-300", "workload"),
    ("arm=x", "arm"),
])
def test_bad_set(tmp_path, capsys, item, needle):
    err = _assert_refused(capsys, ["run", str(small_scenario(tmp_path)), "--set", item], tmp_path / "res", needle)
    key, _, value = item.partition("=")
    assert f"{key} = {key!r}" not in err  # the value shown is the value, never the key again


def test_set_typo_shows_the_value(tmp_path, capsys):
    err = _assert_refused(capsys, ["run", str(small_scenario(tmp_path)), "--set", "server.max_runing_requests=3"],
                          tmp_path / "res")
    assert "server.max_runing_requests = 3:" in err


def test_request_rate_tiny_refused_and_inf_means_all_at_t0(tmp_path, capsys):
    p = _poisson(tmp_path, "1e-300")
    _assert_refused(capsys, ["run", str(p)], tmp_path / "res", "workload.request_rate")
    p = _poisson(tmp_path, ".inf")
    out = tmp_path / "inf"
    assert main(["run", str(p), "--out", str(out), "-q"]) == 0
    import pandas as pd

    req = pd.read_parquet(out / "requests.parquet")
    assert len(req) == 20 and (req["start_s"] == 0).all()  # bench_serving --request-rate inf: every request at t=0


@pytest.mark.parametrize("text", ["inf", "Infinity", "INF"])
def test_request_rate_inf_as_text_says_to_write_yaml_infinity(tmp_path, capsys, text):
    """bench_serving's ``--request-rate inf`` copied into YAML is text: one line that says
    to write ``.inf`` (it said only "Input should be a valid number")."""
    p = _poisson(tmp_path, text)
    _assert_refused(capsys, ["run", str(p)], tmp_path / "res", "workload.request_rate", f"'{text}'", "write .inf")


@pytest.mark.parametrize(("written", "decimal"), [("010", "10"), ("00", "0"), ("007", "7")])
def test_leading_zero_number_is_named_as_written(tmp_path, capsys, written, decimal):
    """A number with a leading zero (YAML 1.1, which PyYAML follows, reads ``010`` as octal 8)
    is refused as ``0x10`` is, named as the user wrote it: the float rule took it, and the line
    said ``max_running_requests = 10.0: must be an integer`` (and a rate of ``010`` ran at 10)."""
    path = small_scenario(tmp_path, **{"max_running_requests: 128": f"max_running_requests: {written}"})
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "server.max_running_requests",
                          f"= '{written}'", f"write {decimal}")
    assert "quoted" not in err
    err = _assert_refused(capsys, ["run", str(_poisson(tmp_path, written))], tmp_path / "res2",
                          "workload.request_rate", f"= '{written}'", f"write {decimal}")
    err = _assert_refused(capsys, ["run", str(small_scenario(tmp_path)), "--set",
                                   f"server.max_running_requests={written}"], tmp_path / "res3",
                          f"= '{written}'", f"write {decimal}")


def test_max_requests_can_be_raised(tmp_path, capsys):
    path = small_scenario(tmp_path)
    _assert_refused(capsys, ["run", str(path), "--max-requests", "5"], tmp_path / "res", "--max-requests", "GiB")
    assert main(["run", str(path), "--max-requests", "10", "--out", str(tmp_path / "ok"), "-q"]) == 0


def test_seed_flag_is_what_the_saved_scenario_says(tmp_path):
    import yaml

    out = tmp_path / "r"
    assert main(["run", str(small_scenario(tmp_path)), "--seed", "2", "--out", str(out), "-q"]) == 0
    assert yaml.safe_load((out / "scenario.yaml").read_text())["seed"] == 2


def test_billion_laughs_fails_fast_through_the_real_command(tmp_path):
    p = tmp_path / "bomb.yaml"
    p.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS.encode()) < 1100
    r = subprocess.run([sys.executable, "-m", "specsched", "run", str(p), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "aliases" in r.stderr
    assert not (tmp_path / "o").exists()


def test_sglang_and_bench_serving_names(tmp_path):
    from specsched.sim.config import load_scenario

    for name, value in (("EAGLE", "eagle"), ("EAGLE3", "eagle3"), ("NEXTN", "nextn"), ("STANDALONE", "standalone")):
        sc = load_scenario(small_scenario(tmp_path, **{"speculative_algorithm: dspark":
                                                       f"speculative_algorithm: {name}\n  speculative_num_steps: 5"}))
        assert sc.server.speculative_algorithm.value == value
        assert sc.server.num_draft_forwards == sc.server.speculative_num_draft_tokens - 1  # a chain
    sc = load_scenario(small_scenario(tmp_path, **{"num_requests: 10": "num_prompts: 10", "kind: uniform": "kind: random"}))
    assert sc.workload.num_requests == 10 and sc.workload.input_len.kind == "uniform"


@pytest.mark.parametrize(("flag", "value"), [
    ("--device", "cuda:7"), ("--device", "gpu"), ("--device", "rocm"), ("--device", "hip"), ("--device", "mps"),
    ("--device", "xpu"), ("--device", ""), ("--preset", "huge"),
])
def test_bad_runtime_device_or_preset(tmp_path, capsys, flag, value):
    pytest.importorskip("torch")
    argv = ["measure", "h200/batch8", *(["--device", "cpu"] if flag != "--device" else []), flag, value]
    err = _assert_refused(capsys, argv, tmp_path / "res", flag)
    assert repr(value) in err


@pytest.mark.parametrize("argv", [
    ["compare", "batch8-ll", "--arms", "base,stream_wait", "--set", "workload.num_requests=100000000"],
    ["sweep", "batch8-ll", "--grid", "workload.num_requests=10,30000000"],
    ["sweep", "batch8-ll", "--grid", "server.chunked_prefil_size=8192,4096"],
])
def test_compare_and_sweep_refuse_before_running(tmp_path, capsys, argv):
    out = tmp_path / "s.parquet"
    if argv[0] == "compare":
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "workload.num_requests" in err
    else:
        err = _assert_refused(capsys, argv, out)
        assert "num_requests" in err or "did you mean 'server.chunked_prefill_size'" in err


def test_a_prompt_at_exactly_the_pool_is_refused_saying_the_pool_must_exceed_it():
    """sim/limits.py refuses a prompt SGLang aborts at the pool's bound (validate_input_length:
    ``>=`` max_req_input_len); the line says the longest prompt and the pool, where it once
    read 'needs N ...; max_total_num_tokens is N'."""
    from specsched.sim.errors import ConfigError
    from specsched.sim.limits import check_fits

    from tests.conftest import make_scenario

    def fits(cap: int) -> str | None:
        sc = make_scenario({"max_total_num_tokens": cap}, {"num_requests": 1, "input_len": {"kind": "fixed", "value": 1000},
                                                           "output_len": {"kind": "fixed", "value": 1}})
        try:
            check_fits(sc)
        except ConfigError as e:
            return str(e)
        return None

    first_ok = next(c for c in range(1000, 1200) if fits(c) is None or "workload.input_len" not in fits(c))
    # SGLang's bound binds first: max_req_input_len = min(context_len - 1, pool - 1) - 5 aborts
    # a prompt of 1000 on a pool of 1006 (validate_input_length), not of 1007
    assert first_ok == 1007
    msg = fits(first_ok - 1)
    assert "must be at most 999 tokens" in msg and "is 1006" in msg and "\n" not in msg
    assert "validate_input_length" in msg


def test_an_out_folder_under_a_file_is_refused_before_the_run(tmp_path, capsys):
    """``--out notes.txt/run1`` (a file where a parent folder should be) ran the whole
    simulation, printed its table, then failed with "cannot write ...: File exists"."""
    (tmp_path / "notes.txt").write_text("mine\n")
    argv = ["run", str(small_scenario(tmp_path)), "--out", str(tmp_path / "notes.txt" / "run1")]
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "notes.txt" in err[0] and "not a folder" in err[0], cap.err
    assert "Serving Benchmark Result" not in cap.out and (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize(("turns", "needles"), [
    ("{kind: uniform, value: 0}", ("workload.multi_turn.num_turns.value = 0", "must be >= 1")),
    ("{kind: gauss, value: 3}", ("workload.multi_turn.num_turns.kind = 'gauss'", "allowed: fixed, uniform, file")),
    ("{kind: uniform}", ("workload.multi_turn.num_turns = ", "needs 'value'")),
    ("{kind: fixed, value: 3, x: 1}", ("workload.multi_turn.num_turns.x = 1", "unknown key; allowed: kind")),
    ("2.5", ("workload.multi_turn.num_turns = 2.5", "integer")),
])
def test_a_bad_turn_count_distribution_names_its_own_fault(tmp_path, capsys, turns, needles):
    """num_turns is a count or a distribution (a union): a bad mapping is refused for what is
    wrong inside it, not as 'num_turns.int = {...}: Input should be a valid integer'."""
    err = _assert_refused(capsys, ["run", "multi-turn-example", "--set", f"workload.multi_turn.num_turns={turns}"],
                          tmp_path / "res", *needles)
    assert ".int " not in err and "function-after" not in err


@pytest.mark.parametrize(("where", "dist", "needles"), [
    ("workload.output_len", "{kind: fixed, value: 8, range_ratio: 0.5}",
     ("workload.output_len.range_ratio = 0.5", "read only by kind uniform", "kind is 'fixed'")),
    ("workload.output_len", "{kind: fixed, value: 8, path: x.csv}",
     ("workload.output_len.path = 'x.csv'", "read only by kind file")),
    ("workload.output_len", "{kind: uniform, value: 8, path: x.csv}",
     ("workload.output_len.path = 'x.csv'", "read only by kind file", "kind is 'uniform'")),
    ("workload.output_len", "{kind: file, path: sharegpt-like-lengths-output.csv, value: 8}",
     ("workload.output_len.value = 8", "read only by kinds fixed and uniform", "kind is 'file'")),
    ("workload.output_len", "{kind: file, path: sharegpt-like-lengths-output.csv, value: null, range_ratio: 0.5}",
     ("workload.output_len.range_ratio = 0.5", "read only by kind uniform", "kind is 'file'")),
    ("workload.multi_turn.num_turns", "{kind: fixed, value: 3, range_ratio: 0.25}",
     ("workload.multi_turn.num_turns.range_ratio = 0.25", "read only by kind uniform")),
    ("workload.multi_turn.user_len", "{kind: fixed, value: 30, range_ratio: 0.2}",
     ("workload.multi_turn.user_len.range_ratio = 0.2", "read only by kind uniform")),
])
def test_a_length_distribution_refuses_a_key_its_kind_does_not_read(tmp_path, capsys, where, dist, needles):
    """fixed reads value; uniform value and range_ratio; file path: any other key would be
    accepted and change nothing (a fixed length with range_ratio 0.5 still sends one length)."""
    scenario = "multi-turn-example" if where.startswith("workload.multi_turn") else str(small_scenario(tmp_path))
    _assert_refused(capsys, ["run", scenario, "--set", f"{where}={dist}"], tmp_path / "res", *needles)


def test_a_length_distribution_in_a_file_names_its_key_and_an_arm(tmp_path, capsys):
    bad = "{kind: fixed, value: 1024, range_ratio: 0.5}"
    path = small_scenario(tmp_path, **{"output_len: {kind: fixed, value: 64}": f"output_len: {bad}"})
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", f"{path}: workload.output_len.range_ratio = 0.5")
    path = small_scenario(tmp_path, **{"output_len: {kind: fixed, value: 64}": "output_len: {value: 9, range_ratio: 0.5}"})
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "workload.output_len.range_ratio = 0.5",
                    "kind is 'fixed', the default")


@pytest.mark.parametrize("override", ["workload.input_len={kind: fixed, value: 9}", "workload.input_len.kind=fixed"])
def test_an_override_that_changes_a_length_kind_leaves_the_old_kinds_keys_behind(tmp_path, override):
    """--set (and an arm) deep-merge into the file's block: a uniform length's range_ratio was
    carried into the fixed one the override asked for, and refused there."""
    from specsched.analysis.overrides import load_scenario_with_overrides
    from specsched.sim.config import load_scenario
    from specsched.sim.errors import ConfigError

    sc = load_scenario_with_overrides(small_scenario(tmp_path), overrides=[override])
    assert sc.workload.input_len.kind == "fixed" and sc.workload.input_len.value == (9 if "9" in override else 4096)
    path = small_scenario(tmp_path, **{"arms:": "arms:\n  fixed_in: {workload: {input_len: {kind: fixed, value: 9}}}"})
    assert load_scenario(path, "fixed_in").workload.input_len.value == 9
    # a key the override itself gives to a kind that does not read it is still refused
    with pytest.raises(ConfigError, match="range_ratio"):
        load_scenario_with_overrides(small_scenario(tmp_path), overrides=["workload.input_len={kind: fixed, value: 9, range_ratio: 0.5}"])


def test_a_key_a_length_distribution_would_read_the_same_is_accepted(tmp_path):
    """A value equal to what the kind does anyway (range_ratio 1 on fixed: [value, value]; the
    defaults a full dump of the model writes) is not refused: it cannot mislead, and a saved
    or re-validated scenario carries it."""
    from specsched.sim.config import LengthDist, with_value

    assert LengthDist.model_validate({"kind": "fixed", "value": 8, "range_ratio": 1.0}).value == 8
    d = LengthDist.model_validate({"kind": "file", "path": "x.csv"})
    assert LengthDist.model_validate(d.model_dump()) == d
    assert with_value(d, "path", "y.csv").path == "y.csv"


def test_exponential_think_time_without_a_mean_is_refused(tmp_path, capsys):
    """think_time_dist draws pauses with mean think_time_s: at 0 every pause is 0, the
    distribution unread."""
    _assert_refused(capsys, ["run", "multi-turn-example", "--set", "workload.multi_turn.think_time_dist=exponential",
                             "--set", "workload.multi_turn.think_time_s=0"],
                    tmp_path / "res", "workload.multi_turn.think_time_dist = 'exponential'", "think_time_s")


_BAD_REPLAYS = {
    "trace-negative": ("t.csv", "timestamp,input_length,output_length\n0,10,5\n-1,10,5\n",
                       "{kind: trace, trace: {path: t.csv}}", "t.csv:3: timestamp = '-1'"),
    "trace-unsorted": ("t.csv", "timestamp,input_length,output_length\n5,10,5\n4,10,5\n",
                       "{kind: trace, trace: {path: t.csv}}", "t.csv:3: timestamp = '4'"),
    "trace-missing-column": ("t.csv", "timestamp,input_length\n0,10\n",
                             "{kind: trace, trace: {path: t.csv}}", "t.csv:1: output_length = '<missing>'"),
    "agentic-truncated": ("a.json", (ROOT / "scenarios" / "agentic-trace-example.json").read_text()[:300],
                          "{kind: multi_turn, concurrency: 2, output_len: {kind: fixed, value: 8}, "
                          "multi_turn: {agentic_trace: {path: a.json}}}", "a.json: conversations[0][0]"),
}


@pytest.mark.parametrize("command", ["compare", "sweep"])
@pytest.mark.parametrize("case", list(_BAD_REPLAYS))
def test_a_bad_replayed_file_is_refused_before_compare_or_sweep_runs(tmp_path, capsys, monkeypatch, command, case):
    """A trace row with a negative or decreasing timestamp, a trace without a column, a cut
    agentic trace: ``run`` refused them in one line, but compare and sweep met them inside
    their runs (a traceback, exit 1, an empty folder; a sweep's table and failures file).
    Now each is one line naming file:line, key and value; exit 2; nothing written."""
    monkeypatch.chdir(tmp_path)
    name, text, workload, needle = _BAD_REPLAYS[case]
    (tmp_path / name).write_text(text)
    (tmp_path / "s.yaml").write_text(f"name: s\nprofile: h200-1b\nworkload: {workload}\n"
                                     "arms:\n  b: {server: {max_running_requests: 8}}\n")
    argv = {"compare": ["compare", "s.yaml", "--arms", "base,b", "--seeds", "1"],
            "sweep": ["sweep", "s.yaml", "--grid", "server.max_running_requests=4,8"]}[command]
    out = tmp_path / ("o.parquet" if command == "sweep" else "o")
    _assert_refused(capsys, argv, out, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "s.yaml"])


@pytest.mark.parametrize(("section", "good", "typo"), [
    ("host", "  schedule_s:", "  schedul_s:"),
    ("gpu", "  eager_factor:", "  eager_factr:"),
    ("", "host:", "hosts:"),
])
def test_a_misspelt_profile_key_lists_the_profile_sections_keys(tmp_path, capsys, section, good, typo):
    """A typo in a profile names the profile's own keys for that section (it listed the
    scenario's ``host`` block, speed_factor and reference_work_s, for a profile's host typo)."""
    from specsched.sim.profile import Profile

    text = (ROOT / "profiles" / "h200-llama8b-roofline.yaml").read_text()
    assert f"\n{good}" in text
    prof = tmp_path / "prof.yaml"
    prof.write_text(text.replace(f"\n{good}", f"\n{typo}", 1))
    path = small_scenario(tmp_path, **{f"profile: {ROOT / 'profiles' / 'mi355x-dsv41-flash-tp4.yaml'}": f"profile: {prof}"})
    key = ".".join(filter(None, (section, typo.strip(" :"))))
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(prof), f"{key} = ")
    model: Any = Profile
    if section:
        ann = Profile.model_fields[section].annotation
        model = next(c for c in (ann, *getattr(ann, "__args__", ())) if hasattr(c, "model_fields"))
    assert f"did you mean '{good.strip(' :')}'" in err, err
    assert err.endswith("allowed: " + ", ".join(model.model_fields)), err


@pytest.mark.parametrize(("rate", "bound"), [("-8", "must be > 0"), ("0", "must be > 0")])
def test_a_value_out_of_bounds_says_the_bound_as_the_reference_writes_it(tmp_path, capsys, rate, bound):
    """A value past a bound reads as the scenario reference's 'allowed' column (> 0), not as
    pydantic's 'Input should be greater than 0'."""
    path = _poisson(tmp_path, rate)
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path), f"workload.request_rate = {rate}: ")
    assert bound in err and "Input should" not in err, err


def test_a_misspelt_arm_suggests_the_close_one(tmp_path, capsys):
    """--arm with a typo of an arm (dash for underscore) offers it before the allowed list."""
    path = small_scenario(tmp_path, **{"arms:": "arms:\n  small_chunk: {server: {chunked_prefill_size: 512}}"})
    err = _assert_refused(capsys, ["run", str(path), "--arm", "small-chunk"], tmp_path / "res", "--arm = 'small-chunk'")
    assert "did you mean 'small_chunk'?" in err and "allowed: base" in err and "small_chunk" in err.split("allowed:")[1]
    err = _assert_refused(capsys, ["run", str(path), "--arm", "zzz"], tmp_path / "res", "--arm = 'zzz'")
    assert "did you mean" not in err


def test_a_misspelt_server_key_points_at_the_schema_instead_of_listing_every_key(tmp_path, capsys):
    """A typo in ``server`` named its close match, then listed all ~50 server keys: one line of
    a thousand characters. Now the suggestion and where to read the keys; a short block
    (a turn-count distribution, the top level) still lists its keys."""
    path = _poisson(tmp_path, "6.0")
    text = path.read_text()
    assert "\nserver:\n" in text
    path.write_text(text.replace("\nserver:\n", "\nserver:\n  max_runing_requests: 8\n", 1))
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path),
                          "server.max_runing_requests = 8: unknown key; did you mean 'max_running_requests'?",
                          "specsched schema", "docs/scenario-reference.md")
    assert "schedule_policy" not in err and len(err) < 300, err
    path.write_text(text.replace("\nserver:\n", "\nserver:\n  zzzqq: 8\n", 1))
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "server.zzzqq = 8: unknown key; ", "specsched schema")
    assert "did you mean" not in err and len(err) < 300, err
    path.write_text(text.replace("\nserver:\n", "\nservr:\n", 1))
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "did you mean 'server'?; allowed: name, ")
    err = _assert_refused(capsys, ["run", "poisson8b-fixed", "--set", "server.max_runing_requests=8"], tmp_path / "res",
                          "did you mean 'server.max_running_requests'?", "specsched schema")
    assert "schedule_policy" not in err and len(err) < 300, err


@pytest.mark.parametrize(("text", "line", "opener", "problem_line"), [
    ("name: x\nseed: 1\nserver: {max_running_requests: 8,\n  page_size: 1\n", 3, "{", 5),
    ("name: x\nassumptions: [a, b\nseed: 1\n", 2, "[", 3),
    ('name: "abc\nseed: 1\n', 1, "quote", 3),
])
def test_an_unclosed_bracket_is_named_where_it_opens(tmp_path, capsys, text, line, opener, problem_line):
    """A ``{``, ``[`` or quote left open was reported where the parser gave up (the file's end:
    ``line 5 = ''``); the line that opened it is named, and the problem's own line after."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    opened = text.splitlines()[line - 1].strip()
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", str(path), f"line {line} = {opened!r}: ",
                    f"not valid YAML: the {opener} opened on this line is not closed", f"line {problem_line})")


def test_a_yaml_error_with_no_opener_is_named_where_it_is(tmp_path, capsys):
    """A stray indent is blamed on its own line, not on the mapping it sits in."""
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nseed: 1\n  bad: 2\n")
    _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "line 3 = 'bad: 2': not valid YAML: mapping values")


@pytest.mark.parametrize(("assign", "says"), [
    ("server.max_running_requests=abc", "server.max_running_requests = 'abc': must be an integer"),
    ("workload.num_requests=[1]", "workload.num_requests = [1]: must be an integer"),
    ("workload.request_rate=fast", "workload.request_rate = 'fast': must be a number"),
    ("server.enable_mixed_chunk=maybe", "server.enable_mixed_chunk = 'maybe': must be true or false"),
    ("server.disable_radix_cache=3", "server.disable_radix_cache = 3: must be true or false"),
    ("server=3", "server = 3: must be a mapping"),
])
def test_a_value_of_the_wrong_type_reads_like_the_bound_messages(tmp_path, capsys, assign, says):
    """A wrong type read as pydantic words it ('Input should be a valid integer'); it reads as
    the project's own checks do ('must be an integer', 'must be true or false')."""
    err = _assert_refused(capsys, ["run", "poisson8b-fixed", "--set", assign], tmp_path / "res", says)
    assert "Input should" not in err, err


@pytest.mark.parametrize("how", ["file", "set"])
def test_an_sglang_launch_argument_says_where_it_lives_here(tmp_path, capsys, how):
    """A user copies SGLang's launch arguments into server: tp_size was answered "did you mean
    dp_size", which is another setting. The line says where the TP size lives here."""
    import yaml

    sc = {"name": "x", "profile": "h200-1b", "server": {},
          "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 10},
                       "output_len": {"kind": "fixed", "value": 10}}}
    if how == "file":
        sc["server"]["tp_size"] = 2
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    argv = ["run", str(path), "--out", str(tmp_path / "o")] + (["--set", "server.tp_size=2"] if how == "set" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server.tp_size = 2: not a server key here" in err[0] and "hardware.tp_size" in err[0]
    assert "dp_size" not in err[0] and not (tmp_path / "o").exists()


@pytest.mark.parametrize("axis, needle", [
    ("workload.trace.path=good.csv,bad.csv", "bad.csv:3: timestamp = '4'"),
    ("workload.trace.time_unit=s,datetime", "good.csv:2: timestamp = '0'"),
])
def test_a_sweep_over_trace_keys_refuses_a_bad_point_before_running(tmp_path, capsys, monkeypatch, axis, needle):
    """A sweep checked its replayed file at the scenario's own trace block only: a grid over
    workload.trace.* (another file, unit or layout) met a bad point inside its run (exit 1, a
    table and a failures file). Every point of such an axis is read first now."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.csv").write_text("timestamp,input_length,output_length\n0,10,5\n1,10,5\n")
    (tmp_path / "bad.csv").write_text("timestamp,input_length,output_length\n5,10,5\n4,10,5\n")
    (tmp_path / "s.yaml").write_text("name: s\nprofile: h200-1b\nworkload: {kind: trace, trace: {path: good.csv}}\n")
    _assert_refused(capsys, ["sweep", "s.yaml", "--grid", axis], tmp_path / "o.parquet", needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv", "s.yaml"]


def test_a_trace_request_that_never_fits_the_pool_names_the_trace_line(tmp_path, capsys):
    """A disaggregated deployment's trace row that can never fit the pool is refused before the
    run, the one line naming the trace file and line, the column and the pool (the scheduler
    refused it mid-run, first as 'request 3: ...', then naming only the scenario file): row 1's
    prompt plus the decode server's reserve is past the pool, and SGLang's prealloc queue would
    keep it waiting. A prompt past max_req_input_len (row 4) fails as SGLang rejects it
    (tests/test_pd_trace_aborts.py)."""
    p = tmp_path / "tiny-pool-trace.yaml"
    p.write_text(
        "name: tiny-pool-trace\n"
        f"profile: {ROOT / 'profiles' / 'h200-llama8b-roofline.yaml'}\n"
        "server: {max_total_num_tokens: 1425, chunked_prefill_size: 128, disaggregation: "
        "{prefill: {instances: 1, server: {}}, decode: {instances: 1, server: {}}}}\n"
        "workload:\n"
        "  kind: trace\n"
        "  num_requests: 10\n"
        f"  trace: {{path: {ROOT / 'scenarios' / 'trace-example-mooncake.jsonl'}, layout: mooncake}}\n")
    _assert_refused(capsys, ["run", str(p)], tmp_path / "out", "trace-example-mooncake.jsonl:1: output_length = 195: "
                    "request 1 ", "a decode server preallocates a prompt of 992 tokens")


def test_a_short_form_of_a_key_is_suggested_before_the_nearest_spelling(tmp_path, capsys):
    """``rate:`` under workload means ``request_rate`` (a short form), not ``trace`` (the
    nearest spelling): the scenario file's message suggests the short form's key."""
    path = small_scenario(tmp_path, **{"num_requests: 10": "num_requests: 10\n  rate: 4"})
    err = _assert_refused(capsys, ["run", str(path)], tmp_path / "res", "workload.rate")
    assert "did you mean 'request_rate'" in err and "'trace'" not in err, err


@pytest.mark.parametrize(("text", "shown"), [("[1, 2]\n", "'1 (a JSON number)'"), ('"runs"\n', "'\"runs\" (a JSON string)'"),
                                             ("[[1, 2]]\n", "'[1, 2] (a JSON array)'")])
def test_a_bench_line_that_is_no_object_shows_what_it_is(tmp_path, capsys, text, shown):
    """A result file holding ``[1, 2]`` was refused as ``<line> = 'int'``: the Python type
    name of what was read, which the file never says. The line now shows the value and its
    JSON kind."""
    p = tmp_path / "runs.jsonl"
    p.write_text(text)
    assert main(["scenario", "from-bench", str(p), "--profile", "h200-1b", "--out", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"<line> = {shown}: a bench_serving result is a JSON object" in err and len(err.splitlines()) == 1, err


def test_a_field_error_crosses_a_process_pool():
    """A FieldError raised in a worker (a sweep's or the fidelity report's process pool) is
    pickled back: it was built with its message as its only argument, so unpickling called
    FieldError(message), failed, and broke the pool with a TypeError in place of the one-line
    refusal. It rebuilds with its key, value and text."""
    import pickle

    from specsched.sim.errors import ConfigError, FieldError

    for e in (FieldError("server.x", 3, "must be 1"), ConfigError("s.yaml", "server.x", 3, "must be 1")):
        f = pickle.loads(pickle.dumps(e))
        assert type(f) is type(e) and str(f) == str(e) and (f.key, f.value, f.allowed) == (e.key, e.value, e.allowed)
