"""The one splitter of argument text (sim/arg_text.py), as the three readers meet it: a
``--grid`` value list, a server log's ``server_args=`` repr, bench_serving's ``Namespace(...)``."""

from __future__ import annotations

import pytest
from specsched.sim.arg_text import python_repr_args, split_top_level


@pytest.mark.parametrize(("text", "want"), [
    ("a,b", ["a", "b"]),
    ("1,[1, 2],{a: 1, b: 2},'x,y'", ["1", "[1, 2]", "{a: 1, b: 2}", "'x,y'"]),
    # Python's repr escapes a quote inside a string with a backslash, and a backslash with one
    (r"'it\'s, here', 2", [r"'it\'s, here'", " 2"]),
    (r"'C:\\cache\\', 2", [r"'C:\\cache\\'", " 2"]),
    ('"o\'brien, x", 3', ['"o\'brien, x"', " 3"]),
    ("a], b", ["a]", " b"]),         # a closer without its opener: ignored
    ("f(1, 2), 3", ["f(1, 2)", " 3"]),
])
def test_split_at_top_level_commas(text, want):
    assert split_top_level(text, brackets=("([{", ")]}")) == want


def test_a_repr_read_pair_by_pair_keeps_what_follows_a_string_ending_in_a_backslash():
    """A ``server_args=`` dict with a value that is no Python (an enum's repr) is read pair by
    pair: a string ending in an escaped backslash closed no quote for the old splitter (it took
    ``\\'`` for an escaped quote), and every later argument was lost."""
    text = r"{'download_dir': 'C:\\cache\\', 'algo': <SpeculativeAlgorithm.EAGLE: 'EAGLE'>, 'tp_size': 2}"
    assert python_repr_args(text) == {"download_dir": "C:\\cache\\", "tp_size": 2}


def test_a_namespace_line_reads_every_literal_argument():
    """bench_serving's ``print(args)``: a double-quoted string holding a single quote, a
    list, ``inf`` (no literal: left out), ``None``."""
    text = ("Namespace(backend='sglang', dataset_path=\"/data/o'brien, 2.json\", random_input_len=1024, "
            "random_range_ratio=0.5, request_rate=inf, lora_name=['a', 'b'], max_concurrency=None)")
    assert python_repr_args(text) == {"backend": "sglang", "dataset_path": "/data/o'brien, 2.json",
                                      "random_input_len": 1024, "random_range_ratio": 0.5, "lora_name": ["a", "b"],
                                      "max_concurrency": None}
