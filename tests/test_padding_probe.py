"""The padding probe (runtime/profile_gpu.py ``padding_phase``) and its fit
(runtime.profile_fit.attention_padding_fit): what a padding position of the runtime's dense
decode/verify attention costs, measured from microbenchmarks so a profile carries
``gpu.attention_padding_cost`` without loop runs (issue 8: profiles from microbenchmarks only).

INV-PP1: a probe synthesized from a known cost ``f`` (t = a + s x (real + f x padding) per
request) fits ``f`` back. INV-PP2: a probe whose moved positions are inside the noise keeps 1.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from specsched.runtime.profile_fit import attention_padding_fit  # noqa: E402


def _probe(f: float, a: float, s: float, big: int, small: int, b: int) -> tuple[tuple[float, float, float], list[float]]:
    """(L, S, m) and the (full, short, half) times of a step whose per-request cost is
    ``a + s x (real positions + f x padding positions)`` at a width ``big``."""
    mean = (big + (b - 1) * small) / b
    full = a + s * big
    short = a + s * small
    half = a + s * (mean + f * (big - mean))
    return (float(big), float(small), mean), [full, short, half]


@settings(max_examples=60, deadline=None)
@given(f=st.floats(0.0, 1.0), a=st.floats(1e-4, 1e-2), s=st.floats(1e-7, 1e-5),
       small=st.integers(64, 2048), extra=st.integers(64, 4096), b=st.integers(2, 64))
def test_inv_pp1_a_synthesized_probe_fits_its_cost_back(f, a, s, small, extra, b) -> None:
    lens, times = _probe(f, a, s, small + extra, small, b)
    got, per = attention_padding_fit({"decode": lens, "spec": lens}, {"decode": times, "spec": times})
    assert math.isclose(got, f, abs_tol=1e-6)
    assert all(math.isclose(v, f, abs_tol=1e-6) for v in per.values())


def test_inv_pp2_a_probe_inside_its_noise_keeps_a_padding_position_at_a_real_ones_cost() -> None:
    lens, times = _probe(0.5, 5e-3, 1e-7, 2048, 1024, 16)  # 1024 positions move ~0.1 ms
    noisy = {"decode": [1e-4, 1e-4, 1e-4]}
    got, per = attention_padding_fit({"decode": lens}, {"decode": times}, noisy)
    assert got == 1.0 and math.isnan(per["decode"])
    quiet = {"decode": [1e-6, 1e-6, 1e-6]}
    assert math.isclose(attention_padding_fit({"decode": lens}, {"decode": times}, quiet)[0], 0.5, abs_tol=1e-9)


def test_the_estimate_is_clipped_to_a_fraction() -> None:
    """A half layout slower than full (noise) reads as 1, faster than short as 0."""
    lens, (full, short, _) = _probe(0.5, 5e-3, 1e-6, 2048, 1024, 8)
    assert attention_padding_fit({"spec": lens}, {"spec": [full, short, full * 1.1]})[0] == 1.0
    assert attention_padding_fit({"spec": lens}, {"spec": [full, short, short * 0.9]})[0] == 0.0
