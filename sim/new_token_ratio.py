"""new_token_ratio: how much of their remaining output running requests are assumed to need.

Source: sglang 0.5.23 managers/scheduler_components/new_token_ratio_tracker.py
(``NewTokenRatioTracker.from_config``, ``decay_step``, ``reset``,
``estimate_new_token_ratio_after_retract``) with the defaults of environ.py
(SGLANG_INIT_NEW_TOKEN_RATIO 0.7, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14,
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600, SGLANG_RETRACT_DECODE_STEPS 20). Starts at
0.7 x schedule_conservativeness (capped at 1); floor = start x 0.14; each decode pass
without retraction lowers it by (start - floor) / 600 (``update_running_batch``; a mixed
step does not); it resets to the start when the server is fully idle (``Scheduler.on_idle``:
nothing running, chunked or waiting); after a retraction it becomes
min(1, (decoded + 20 x bs) / (sum of max_new + 1)) over the requests kept.
"""

from __future__ import annotations

INIT_RATIO = 0.7
MIN_RATIO_FACTOR = 0.14
DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20


class NewTokenRatio:
    """The scheduler's current new_token_ratio (dimensionless, in [0, 1]; 0 with schedule_conservativeness 0)."""

    __slots__ = ("init", "floor", "decay", "value")

    def __init__(self, schedule_conservativeness: float = 1.0) -> None:
        self.init = min(1.0, INIT_RATIO * schedule_conservativeness)
        self.floor = self.init * MIN_RATIO_FACTOR
        self.decay = (self.init - self.floor) / DECAY_STEPS
        self.value = self.init

    def on_decode_step(self) -> None:
        """A decode step ran without retraction: decay toward the floor."""
        self.value = max(self.value - self.decay, self.floor)

    def on_idle(self) -> None:
        """Nothing runs and nothing waits: back to the initial ratio."""
        self.value = self.init

    def on_retract(self, decoded_tokens: int, batch_size: int, sum_max_new: int) -> None:
        """After retracting: min(1, (decoded + 20 x bs) / (sum of max_new + 1))."""
        self.value = min(1.0, (decoded_tokens + RETRACT_DECODE_STEPS * batch_size) / (sum_max_new + 1))
