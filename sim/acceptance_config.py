"""The ``acceptance`` block of a scenario: the accept-length distribution a run draws from.

The draws themselves are :mod:`sim.acceptance`'s. Re-exported by :mod:`sim.config`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator
from specsched.sim.errors import FieldError
from specsched.sim.strict import STRICT as _STRICT

HISTOGRAM_SUM_TOLERANCE = 1e-3
"""How far an acceptance histogram's sum may be from 1 (measured fractions are rounded)."""


ACCEPTANCE_SOURCES = ("mean_accept_length", "per_position_rates", "histogram")
"""The three ways a scenario states its acceptance; exactly one is given."""


class AcceptanceConfig(BaseModel):
    """Accept length distribution (tokens committed per request per verify cycle, 1..window).

    Either ``mean_accept_length`` (per-position rates p_i = p_1 x rate_decay^(i-1) with p_1
    solved so that the mean at ``window`` matches), ``per_position_rates`` (P(draft i
    accepted | drafts < i accepted)), or ``histogram`` (P(accept length = k), k = 1..len).
    With ``window`` set, a run at another verify window reuses the same per-position rates
    (cut when shorter; continued with ``rate_decay`` past the last one when longer), so a
    longer window adds ever less (sim/acceptance.py). Each request draws its own level: a
    shift of the per-position logits by ``request_spread`` x N(0, 1) (real prompts differ).

    ``mean_accept_length`` is the population mean of the requests' own means. The figure a
    server reports is verify-weighted: SGLang 0.5.23
    managers/scheduler_components/metrics_reporter.py adds each verify batch's accepted
    tokens and its ``bs`` rows (``spec_num_accept_tokens / spec_num_forward_ct``, served as
    ``avg_spec_accept_length``, the accept length bench_serving prints), and a request that
    accepts less needs more verifies for the same output. So with ``request_spread`` > 0
    the run's reported accept length is below ``mean_accept_length`` (scenarios/batch8-ll:
    3.34 set at spread 0.25, window 6, reports 3.30 on average over seeds 1-3; 3.0 at
    spread 1 reports about 2.6); equal only at spread 0.
    """

    model_config = _STRICT

    mean_accept_length: float | None = Field(None, ge=1.0, description="Mean accept length (committed tokens per request per verify, bonus token included) over the requests' own means. The accept length a server reports (SGLang avg_spec_accept_length: accepted tokens over verify rows, what bench_serving prints) weights each request by its verify count, so with request_spread > 0 it comes out lower: requests that accept less need more verifies.")
    per_position_rates: list[Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(None, min_length=1, description="P(draft i accepted | drafts < i accepted), i = 1..window - 1.")
    histogram: list[Annotated[float, Field(ge=0.0)]] | None = Field(None, min_length=1, description="P(accept length = k), k = 1..len (<= window); sums to 1.")
    request_spread: float = Field(0.0, ge=0.0, le=5.0, description="Std of the per-request logit shift.")
    window: int | None = Field(None, ge=2, le=64, description="Verify window the acceptance was measured at (None: the scenario's window; an arm, --set or sweep axis that moves the window carries the rates from the file's window, as if it were given). A run at a longer window says in one warning line that its later positions' rates are continued (rate_decay), not measured.")
    tree: list[Annotated[int, Field(ge=1, le=64)]] | None = Field(None, min_length=2, max_length=2, description="[speculative_eagle_topk, speculative_num_draft_tokens] of the chain drafter's draft the acceptance was measured at (None: the scenario's; an arm, --set or sweep axis that changes either carries the file's, as if it were given). The rates are per depth: a run on another draft tree prices its candidates but accepts as stated, and says so in one warning line (a tree's extra candidates raise SGLang's accept length, speculative/eagle_utils.py eagle_sample: verify_tree_greedy keeps the longest path that matches the target, over every candidate of each depth).")
    sibling_rate: float | None = Field(None, ge=0.0, le=1.0, description="Carries the acceptance across draft trees (chain drafters): past the draft's rank-1 token, each next-ranked candidate of a depth is the target's token with this share of what is left (rank r >= 2: (1 - p_d) x sibling_rate x (1 - sibling_rate)^(r - 2)), and the tree SGLang selects by score (speculative_eagle_topk, speculative_num_draft_tokens) accepts the longest matching path (sim/draft_tree.py). per_position_rates are then the rank-1 rates p_d; a mean_accept_length is solved on the tree it was measured on (acceptance.tree, else the scenario's). Fit it from two accept lengths measured on two trees of one drafter (benchmarks/fit_tree_acceptance.py reads them from bench_serving lines). None: each depth accepts at the stated rate whatever the tree, and a run on another tree says so in one warning line.")
    rate_decay: float = Field(1.0, gt=0.0, le=1.0, description="p_(i+1) / p_i of the rates derived from a mean accept length and of rates continued past the last given one (1: a constant rate, i.e. a truncated geometric accept length).")
    seed_key: Literal["accept", "shared"] = Field("accept", description="The seed key of each request's accept draws (sim/seed_streams.py): accept, [seed, 8, rid], the stream of their own; shared, [seed, 3, rid], the key every run was made with before they had one (it shared the prefix workloads' tag). The runtime forces the same draws on the GPU, so a run recorded with the shared key is predicted again with it (benchmarks/repredict_h200.py picks the key per run from its requests).")

    @model_validator(mode="after")
    def _one_source(self) -> AcceptanceConfig:
        given = [k for k in ACCEPTANCE_SOURCES if getattr(self, k) is not None]
        if len(given) > 1:
            raise FieldError("acceptance", " and ".join(given),
                             f"give only one of {', '.join(ACCEPTANCE_SOURCES)}")
        if self.sibling_rate is not None and self.histogram is not None:
            raise FieldError("acceptance.sibling_rate", self.sibling_rate,
                             "give it with per_position_rates (the draft's rank-1 rates per depth) or a "
                             "mean_accept_length (solved on the measured tree), not with a histogram")
        if self.histogram is not None and abs(sum(self.histogram) - 1.0) > HISTOGRAM_SUM_TOLERANCE:
            raise FieldError("acceptance.histogram", self.histogram, "P(accept length = k) must sum to 1 "
                             f"(within {HISTOGRAM_SUM_TOLERANCE}); it sums to {sum(self.histogram):.6g}")
        return self
