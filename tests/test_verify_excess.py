"""gpu.verify's excess: the engine-issued verify loop against the bare cycle at its own width.

The profiler adds to every gpu.verify point, per batch size, what a verify as the engine
issues it (the stall phase's queued loop) takes beyond the bare graph replay. The loop's
rows start just past the grid's last context and grow, in a context bucket of their own
(runtime.profile_harness.launch_loop_width: 8576 positions for the default grid, whose
last column ran at 8256). Taken against the last column, the excess held the attention of
those 320 extra positions per request, and the simulator added it at every context: on
round 26's 8b preset the whole 0.406 ms of batch 8 and 1.23 of batch 32's 1.53 ms, the
sharegpt-lengths cycle predicted 11 % slow at batch 16 (docs/measurements/h200-v26.md,
"The verify excess").
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")

from specsched.runtime.profile_fit import (  # noqa: E402
    Fits,
    refit_verify_excess,
    verify_excess_fit,
)
from specsched.runtime.profile_harness import launch_loop_width  # noqa: E402
from specsched.sim.profile import load_profile  # noqa: E402

ROUND26 = Path(__file__).resolve().parents[1] / "docs" / "measurements" / "h200-v26" / "h200-8b.yaml"
CONTEXTS = [512, 1024, 2048, 4096, 8192]
WINDOW = 6
BS = [1, 8, 32]


def _bare(b: int, width: float) -> float:
    """A bare spec cycle linear in its attention width (seconds): 8 ms + 0.12 us per
    position and request."""
    return 8e-3 + 0.12e-6 * b * width


def _fits(excess_s: float) -> SimpleNamespace:
    """A finished run's measurements: the grid at round_up(context + W, 64) and a queued
    loop at the harness's own width, exactly ``excess_s`` above the bare cycle there."""
    widths = [-(-(c + WINDOW) // 64) * 64 for c in CONTEXTS]
    loop_w = launch_loop_width(-(-(CONTEXTS[-1] + WINDOW) // 64) * 64 + 1, WINDOW, 15)
    return SimpleNamespace(grid={"spec": [[_bare(b, w) for w in widths] for b in BS]}, contexts=CONTEXTS, W=WINDOW,
                           bs=BS, launch_bs=BS, launch_bucket=loop_w,
                           loop_med=[_bare(b, loop_w) + excess_s for b in BS])


def test_loop_runs_wider_than_the_grid():
    """The loop's bucket is above the grid's last column (by 320 positions by default)."""
    assert launch_loop_width(8257, 6, 15) == 8576
    assert launch_loop_width(8257, 6, 20) == 8576


@pytest.mark.parametrize("excess_s", [0.0, 50e-6])
def test_excess_is_taken_at_the_loops_width(excess_s):
    """Fitted against the bare cycle at the loop's width, the excess is what the loop adds
    beyond the cycle, at every batch size; the grid points get exactly that. At the last
    column it would be 320 positions of attention more (0.31 ms at batch 8 here)."""
    fits = _fits(excess_s)
    grid = Fits.verify_grid(fits)
    assert fits.verify_excess == pytest.approx([excess_s] * len(BS), abs=1e-9)
    for row, bare in zip(grid, fits.grid["spec"], strict=True):
        assert np.allclose(np.array(row) - np.array(bare), excess_s, atol=1e-9)


def test_inside_the_grid_the_bare_cycle_is_interpolated():
    widths = [576, 1088]
    grid = [[_bare(1, w) for w in widths]]
    assert verify_excess_fit([1], [_bare(1, 832) + 1e-4], [1], widths, grid, 832) == pytest.approx([1e-4])


def test_round26_profile_refits_to_the_engine_excess():
    """The committed round-26 profile (excess 80 / 406 / 1525 us at batch 1 / 8 / 32,
    taken at the last column): refitted, batch 1 and 8 lose all of it (the bare cycle at
    width 8576 is above the loop) and batch 32 keeps about 0.3 ms; batch 16's points drop
    by about 0.68 ms, the width part of the interpolated excess."""
    old = load_profile(str(ROUND26))
    new = refit_verify_excess(old)
    assert new is not None
    d = np.array(new.gpu.verify.seconds) - np.array(old.gpu.verify.seconds)
    xs = [int(x) for x in old.gpu.verify.x]
    assert np.allclose(d, d[:, :1])  # one change per batch size, at every context
    assert d[xs.index(1), 0] == pytest.approx(-80e-6, abs=1e-6)
    assert d[xs.index(8), 0] == pytest.approx(-406e-6, abs=1e-6)
    assert -1.3e-3 < d[xs.index(32), 0] < -1.1e-3
    assert -0.75e-3 < d[xs.index(16), 0] < -0.6e-3
    # a profile whose excess the provenance says was taken at the loop's width is left alone
    prov = dict(new.provenance)
    prov["gpu.verify"] = prov["gpu.verify"].replace("over the bare replay at the longest context",
                                                    "over the bare replay at the loop's own attention width, 8576")
    assert refit_verify_excess(new.model_copy(update={"provenance": prov})) is None
