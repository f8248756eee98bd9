"""When the scheduler takes new requests in: ``--scheduler-recv-interval``.

SGLang 0.5.23 ``managers/scheduler_components/recv_skipper.py`` ``SchedulerRecvSkipper``
(created only for an interval above 1; ``request_receiver.py`` ``recv_requests`` returns no
requests when ``handle`` says no): each pass adds the weight of the last batch's forward mode
to a counter, and requests are received when the counter reaches the interval, which resets
it. The weights are SGLang's defaults (``environ.py``
``SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*``): 1 after a decode or a verify and after a pass
that ran no batch, 1000 after anything else (an extend or a mixed batch), so a prefill is
always followed by a receive and a steady decode receives every ``interval`` steps. Requests
not received wait in the server's queue (the engine's inbox) and are received later, so a
request that arrives during a decode stretch waits up to ``interval`` steps more for its TTFT.

One approximation: a server with nothing to run spins its idle passes in microseconds, each
adding 1; here an idle loop receives at once.
"""

from __future__ import annotations

from typing import Any

from specsched.sim.plan import ForwardMode

WEIGHT_STEADY = 1
"""``SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE`` / ``_TARGET_VERIFY`` / ``_NONE`` (0.5.23
environ.py defaults): a decode, a verify, or a pass without a batch."""

WEIGHT_OTHER = 1000
"""``SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT``: any other last batch (extend, mixed)."""

_STEADY = (ForwardMode.DECODE, ForwardMode.VERIFY)


class RecvSkipper:
    """The receive decision of one scheduler (``interval`` > 1; at 1 every pass receives and
    no skipper exists, as in SGLang ``maybe_create``)."""

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.counter = 0

    def should_recv(self, last_plan: Any, idle: bool) -> bool:
        """Whether this pass receives, given the previous pass's plan (None: it ran no batch;
        a group plan's ``mode`` is its ranks' shared one) and whether the server is idle
        (nothing running or in flight: receives at once, module docstring)."""
        if idle:
            self.counter = 0
            return True
        mode = getattr(last_plan, "mode", None)
        self.counter += WEIGHT_STEADY if last_plan is None or mode in _STEADY else WEIGHT_OTHER
        if self.counter >= self.interval:
            self.counter = 0
            return True
        return False
