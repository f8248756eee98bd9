"""benchmarks/public_cases.py's closed-loop split: a closed loop's throughputs give back the
lone-request lifetime and the per-concurrent-request cost they were made from, and the
crossover concurrency where speculation stops winning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import load_benchmark

pc = load_benchmark("public_cases")


def _tok_s(a: float, b: float, conc: list[int], out: int) -> list[float]:
    # a closed loop of C clients finishes C requests of `out` tokens per lifetime a + b C
    return [c * out / (a + b * c) for c in conc]


@given(a=st.floats(0.05, 20.0), b=st.floats(0.0, 0.5),
       conc=st.lists(st.integers(1, 256), min_size=2, max_size=6, unique=True))
def test_split_recovers_the_lifetime_line(a, b, conc):
    """Invariant: throughputs made from L(C) = a + b C split back into (a, b)."""
    got_a, got_b = pc.closed_loop_split(conc, _tok_s(a, b, conc, 128), 128)
    assert got_a == pytest.approx(a, rel=1e-6, abs=1e-6)
    assert got_b == pytest.approx(b, rel=1e-6, abs=1e-6)


def test_crossover_needs_a_larger_per_request_cost():
    conc = [8, 16, 32, 64]
    plain = pc.closed_loop_split(conc, _tok_s(3.6, 0.075, conc, 128), 128)
    spec = pc.closed_loop_split(conc, _tok_s(2.4, 0.110, conc, 128), 128)
    assert pc.crossover(plain, spec) == pytest.approx(1.2 / 0.035)
    # cheaper per request: speculation never stops winning
    assert pc.crossover(plain, pc.closed_loop_split(conc, _tok_s(2.4, 0.05, conc, 128), 128)) is None
    # slower alone and per request: it never wins
    assert pc.crossover(plain, pc.closed_loop_split(conc, _tok_s(4.0, 0.09, conc, 128), 128)) is None


def test_split_refuses_one_concurrency_or_a_zero_rate():
    with pytest.raises(ValueError):
        pc.closed_loop_split([8, 8], [100.0, 100.0], 128)
    with pytest.raises(ValueError):
        pc.closed_loop_split([8, 16], [100.0, 0.0], 128)


def test_mean_length_follows_bench_serving_lengths():
    assert pc.mean_length(128, 1.0) == 128
    assert pc.mean_length(128, 0.0) == 64.5  # uniform in [1, 128]
    assert pc.mean_length(128, 0.5) == 96.0  # uniform in [64, 128]


@given(p=st.floats(0.0, 0.1), d=st.floats(1e-5, 1e-3), f=st.floats(0.0, 0.95), window=st.integers(2, 9))
def test_missing_split_recovers_a_per_token_miss(p, d, f, window):
    """Invariant: misses made as P + n x d with n the tokens a request puts through the target
    (out_len decode tokens; window x out_len / accept verified tokens) split back into (P, d),
    for any accept length below the window (at the window both arms put 128 through)."""
    out, accept = 128, 1.0 + f * (window - 1)
    got = pc.missing_split(p + out * d, p + window * out / accept * d, out, window, accept)
    assert got["per_token"] == pytest.approx((p, d), rel=1e-6, abs=1e-9)


def test_missing_split_leaves_out_a_form_that_cannot_separate():
    # every draft accepted: both arms put 128 tokens through the target
    assert "per_token" not in pc.missing_split(0.04, 0.08, 128, 8, 8.0)


def test_missing_split_rejects_a_per_request_form_when_speculation_misses_more():
    """P1's reading: DSpark misses twice plain's b. A cost per request per step or cycle
    (fewer cycles than steps) would need a negative d, so that form is ruled out."""
    got = pc.missing_split(0.0427, 0.0860, 128, 8, 3.53)
    assert got["per_request"][1] < 0
    p, d = got["per_token"]
    assert p > 0 and d > 0


@pytest.mark.parametrize("args", [["--cases", "p3"], ["--cases", ""], ["--seeds", "0"],
                                  ["--models", "no-such-model"], ["--host-ghz", "abc"], ["--host-ghz", "0"]])
def test_bad_arguments_are_one_line_exit_2(args, capsys):
    """A typo in --cases ran no check and exited 0; --seeds 0 printed nan; a bad --models or
    --host-ghz was a traceback. Each is now argparse's one line naming the option, exit 2."""
    with pytest.raises(SystemExit) as e:
        pc.main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {args[0]}:" in err
