"""The cost model: GPU and host seconds for a batch plan, from a profile.

GPU time of a forward is a function of the batch composition (SGLang's simulator reduces a
batch to (extend_len, past_kv_len) per request the same way, tools/sglang-simulator):
extend tokens and their context for prefill; batch size and context for decode and verify.
Host time is per step plus per request. The breakdown is returned, not one number.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsched.sim.config import ServerArgs
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import Profile


@dataclass(frozen=True, slots=True)
class GpuCost:
    """Seconds of GPU work of one launch, split by what it does."""

    extend_s: float = 0.0
    decode_s: float = 0.0
    penalty_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.extend_s + self.decode_s + self.penalty_s


class CostModel:
    """Times plans for one (profile, server args) pair.

    Raises:
        ValueError: the profile lacks the grid the server args need (``verify`` for
            speculative decoding, ``decode`` otherwise).
    """

    def __init__(self, profile: Profile, server: ServerArgs) -> None:
        g = profile.gpu
        self.profile = profile
        self.server = server
        self.extend = g.extend.interpolator()
        self.inject = g.draft_inject.interpolator() if g.draft_inject is not None else None
        spec = server.speculative_algorithm
        if spec.enabled and g.verify is None:
            raise ValueError(f"profile {profile.name}: speculative decoding needs gpu.verify")
        if not spec.enabled and g.decode is None:
            raise ValueError(f"profile {profile.name}: plain decoding needs gpu.decode")
        self.step_grid = (g.verify if spec.enabled else g.decode).interpolator()
        self.draft_step = g.draft_step.interpolator() if g.draft_step is not None else None
        self.extra_draft_steps = max(0, server.num_draft_forwards - 1)
        self.h = profile.host

    def _decode_s(self, bs: int, ctx_sum: int) -> float:
        ctx = ctx_sum / bs
        t = self.step_grid(bs, ctx)
        if self.extra_draft_steps and self.draft_step is not None:
            t += self.extra_draft_steps * self.draft_step(bs, ctx)
        if bs > self.server.cuda_graph_max_bs:
            t *= self.profile.gpu.eager_factor
        return t

    def gpu(self, plan: BatchPlan, part: str = "main", cross_queue: bool = False) -> GpuCost:
        """GPU seconds of one launch of ``plan`` (``part`` = ``main`` or ``inject``).

        ``cross_queue``: a wait is queued from a separate schedule stream; graph-replayed
        decode/verify launches pay the profile's cross_queue_penalty_s.
        """
        n_ext = plan.num_extend
        if part == "inject":
            tokens = plan.num_extend_tokens
            if self.inject is not None:
                ctx = sum(plan.prefix_lens[:n_ext]) / n_ext + tokens / (2 * n_ext)
                return GpuCost(extend_s=self.inject(tokens, ctx))
            return GpuCost(extend_s=tokens * self.profile.gpu.draft_inject_per_token_s)
        extend_s = 0.0
        if n_ext:
            tokens = plan.num_extend_tokens
            ctx = sum(plan.prefix_lens[:n_ext]) / n_ext + tokens / (2 * n_ext)
            extend_s = self.extend(tokens, ctx)
        decode_s = penalty = 0.0
        n_dec = plan.batch_size - n_ext
        if n_dec:
            decode_s = self._decode_s(n_dec, sum(plan.prefix_lens[n_ext:]))
            if cross_queue and plan.mode is not ForwardMode.MIXED and n_dec <= self.server.cuda_graph_max_bs:
                penalty = self.h.cross_queue_penalty_s
        return GpuCost(extend_s, decode_s, penalty)

    def host(self, kind: str, plan: BatchPlan) -> float:
        """Host seconds of ``kind`` (schedule / launch / process) for ``plan``."""
        h, bs = self.h, plan.batch_size
        if kind == "schedule":
            return h.schedule_s + h.schedule_per_req_s * bs
        if kind == "launch":
            return h.launch_s + h.launch_per_req_s * bs
        return h.process_s + h.process_per_req_s * bs
