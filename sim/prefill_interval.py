"""SGLang's prefill cadence knob: ``--prefill-decode-interval N`` (with
``--prefill-decode-interval-min-bs``): after a forward that ran an extend, the next N
scheduling rounds try no prefill (the running batch decodes), so at most one new prefill
pass runs every N + 1 rounds.

Source: sglang 0.5.23 managers/scheduler.py ``Scheduler._should_defer_prefill`` and
``_arm_prefill_decode_interval``, called from ``get_next_batch_to_run``. The check comes
before the prefill attempt, so a chunked prefill in progress waits too. A running batch
smaller than ``min_bs`` cancels the countdown, so a small batch can still fill quickly.
0 turns the knob off (the default except for some Qwen3-VL setups on Hopper).
"""

from __future__ import annotations


class PrefillDecodeInterval:
    """The countdown of decode rounds left before the next prefill may be tried.

    Args:
        interval: rounds to decode after an extend forward (>= 0; 0 = off).
        min_bs: apply the interval only while at least this many requests run.
    """

    __slots__ = ("interval", "min_bs", "remaining")

    def __init__(self, interval: int = 0, min_bs: int = 0) -> None:
        if interval < 0 or min_bs < 0:
            raise ValueError("prefill_decode_interval and prefill_decode_interval_min_bs must be >= 0")
        self.interval = interval
        self.min_bs = min_bs
        self.remaining = 0

    def should_defer(self, running_bs: int) -> bool:
        """Called once per scheduling round before the prefill attempt: True to skip it.
        Counts the round down when it defers."""
        if self.remaining == 0:
            return False
        if running_bs < self.min_bs:
            self.remaining = 0
            return False
        self.remaining -= 1
        return True

    def on_batch(self, is_extend: bool) -> None:
        """Called with the forward the round chose (extend or mixed: True)."""
        if self.interval and is_extend:
            self.remaining = self.interval
