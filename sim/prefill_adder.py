"""The budgets of one prefill pass: SGLang's ``PrefillAdder`` (managers/schedule_policy.py).

A pass admits requests in policy order until one of: the allocatable-request count, the
KV budget, ``max_prefill_tokens`` or the ``chunked_prefill_size`` budget runs out. At most
one request per batch is chunked (cut to the remaining chunk budget) and that ends
admission. With chunking off, the first request is admitted even if it exceeds
max_prefill_tokens. Ordering lives in the policy, budget checks here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from specsched.sim.request import Req

CLIP_MAX_NEW_TOKENS = 4096
"""SGLang's CLIP_MAX_NEW_TOKENS (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, default 4096)."""


class AddResult(Enum):
    """SGLang's AddReqResult."""

    CONTINUE = 0
    NO_TOKEN = 1
    OTHER = 2


def ceil_page(n: int, page_size: int) -> int:
    """Round ``n`` tokens up to whole pages."""
    return -(-n // page_size) * page_size


def reserved_decode_tokens(req: Req) -> int:
    """Tokens a running request may still need: min(max_new - out, CLIP_MAX_NEW_TOKENS)."""
    return min(max(req.remaining_output, 0), CLIP_MAX_NEW_TOKENS)


@dataclass
class PrefillAdder:
    """Budget state of one prefill pass.

    Attributes:
        rem_total_tokens: KV budget: free tokens minus running requests' reservations
            (min(max_new - out, 4096) x new_token_ratio), minus what this pass admitted.
        rem_input_tokens: what is left of max_prefill_tokens.
        rem_chunk_tokens: what is left of chunked_prefill_size; None when chunking is off.
        page_size: KV page size, tokens.
        can_run: (request, extend_len) admitted so far, in order.
        new_chunked: the request cut by chunking in this pass, if any.
    """

    rem_total_tokens: float
    rem_input_tokens: int
    rem_chunk_tokens: int | None
    page_size: int = 1
    can_run: list[tuple[Req, int]] = field(default_factory=list)
    new_chunked: Req | None = None

    @classmethod
    def start(
        cls,
        kv_available: int,
        running: list[Req],
        new_token_ratio: float,
        max_prefill_tokens: int,
        chunked_prefill_size: int,
        page_size: int,
        mixed_with_decode_tokens: int = 0,
    ) -> PrefillAdder:
        """Open a pass. ``mixed_with_decode_tokens`` shrinks the budgets (enable_mixed_chunk)."""
        reserve = sum(reserved_decode_tokens(r) for r in running if not r.finished) * new_token_ratio
        chunk = chunked_prefill_size if chunked_prefill_size > 0 else None
        if chunk is not None:
            chunk -= mixed_with_decode_tokens
        return cls(
            rem_total_tokens=kv_available - reserve - mixed_with_decode_tokens,
            rem_input_tokens=max_prefill_tokens - mixed_with_decode_tokens,
            rem_chunk_tokens=chunk,
            page_size=page_size,
        )

    def budget_state(self) -> AddResult:
        if self.rem_total_tokens <= 0:
            return AddResult.NO_TOKEN
        if self.rem_input_tokens <= 0 or (self.rem_chunk_tokens is not None and self.rem_chunk_tokens <= 0):
            return AddResult.OTHER
        return AddResult.CONTINUE

    def _spend(self, extend: int, reserve_new: int) -> None:
        self.rem_total_tokens -= extend + reserve_new
        self.rem_input_tokens -= extend
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= extend

    def add_chunked_req(self, req: Req) -> bool:
        """Continue the chunked request of the previous pass first (SGLang add_chunked_req).

        Returns True if it is still truncated after this chunk (it stays the chunked request).
        """
        extend = req.extend_remaining
        if self.rem_chunk_tokens is not None:
            extend = min(extend, self.rem_chunk_tokens)
        truncated = extend < req.extend_remaining
        self.can_run.append((req, extend))
        self._spend(extend, 0 if truncated else reserved_decode_tokens(req))
        return truncated

    def add_one_req(self, req: Req) -> AddResult:
        """Try to admit ``req`` (whole, or chunked if the chunk budget is short).

        Mirrors PrefillAdder.add_one_req: NO_TOKEN if its extend + reserved output does not
        fit the KV budget; OTHER if the prompt budget is spent and something is admitted.
        """
        extend = req.extend_remaining
        total = ceil_page(extend, self.page_size) + reserved_decode_tokens(req) + self.page_size
        if total >= self.rem_total_tokens:
            return AddResult.NO_TOKEN
        input_tokens = ceil_page(extend, self.page_size)
        if input_tokens >= self.rem_input_tokens and self.can_run:
            return AddResult.OTHER
        if self.rem_chunk_tokens is None or input_tokens <= self.rem_chunk_tokens:
            self.can_run.append((req, extend))
            self._spend(input_tokens, reserved_decode_tokens(req))
        else:
            trunc = self.rem_chunk_tokens // self.page_size * self.page_size
            if trunc <= 0:
                return AddResult.OTHER
            self.can_run.append((req, trunc))
            self.new_chunked = req
            self._spend(trunc, 0)
        return self.budget_state()
