"""An extend reads every request's cached prefix (ragged attention over the radix cache).

SGLang 0.5.23 runs a batch of extends with cached prefixes (a follow-up turn resending its
history, a request re-prefilled after retraction) as one ragged extend forward whose
attention reads each request's whole cached KV (layers/radix_attention.py over the
request's ``req_to_token`` row). With one token per request that forward is the work of a
decode step of those requests; with a few tokens each it is more. So its GPU time is at
least the requests' KV bytes over the HBM bandwidth and at least their decode step.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.roofline import Efficiency
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import ServerArgs
from specsched.sim.cost_model import CostModel
from specsched.sim.profile import Profile

H100 = load_gpu("H100")
L8 = Profile.model_validate(build_profile(load_model("llama-3.1-8b"), H100, 1))
SERVER = ServerArgs(speculative_algorithm="none", speculative_num_draft_tokens=1, cuda_graph_max_bs=256,
                    max_total_num_tokens=10_000_000)
GRAPH_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]


def kv_read_floor_s(requests: int, prefix: int) -> float:
    """Seconds the requests' cached KV takes at the profile's HBM rate (datasheet x efficiency)."""
    return requests * prefix * L8.hardware.kv_cell_bytes / (H100.hbm_tbps * 1e12 * Efficiency().hbm)


def test_short_turns_after_long_histories_read_their_histories():
    """Eight 20-token turns after 30K-token histories (Llama-3.1-8B, H100): the reading at
    the batch's keys per token read two 1024-token requests' prefixes, 12.0 ms, below a
    decode step of the same eight requests (18.3 ms)."""
    model = CostModel(L8, SERVER)
    t = model.extend_s([20] * 8, [30000] * 8)
    assert t >= kv_read_floor_s(8, 30000)
    assert t >= model.step_s(8, 30000)


@settings(max_examples=80, deadline=None)
@given(requests=st.sampled_from(GRAPH_SIZES), tokens=st.integers(1, 64), prefix=st.integers(0, 60000))
def test_an_extend_with_cached_prefixes_does_at_least_their_decode_work(requests, tokens, prefix):
    """Invariant: ``requests`` extends of ``tokens`` each after ``prefix`` cached tokens read
    that KV (at least its bytes over the HBM rate) and cost at least the requests' decode
    step (within 5 %: a decode forward's graph launch and LM-head rows are priced apart),
    and more tokens each never cost less."""
    model = CostModel(L8, SERVER)
    t = model.extend_s([tokens] * requests, [prefix] * requests)
    assert t >= kv_read_floor_s(requests, prefix)
    assert t >= 0.95 * model.step_s(requests, prefix)
    # (1e-5: a piecewise graph's padded rows are read at the grid's first context column and
    # the real rows at their attention context; under the roofline's max() a token's price
    # at a few hundred keys is up to ~25 ns below its price at none, so one more real token
    # and one less padded one can cost that much less: at most 3.7e-6 of the extend over
    # every batch size, 1-65 tokens and prefixes to 60K, scanned when this bound was set)
    assert model.extend_s([tokens + 1] * requests, [prefix] * requests) >= t * (1 - 1e-5)


def test_a_long_chunk_is_still_read_at_its_attention_work():
    """The floor binds only where the KV read outweighs the attention work: an 8192-token
    chunk after 8192 cached tokens keeps the grid's reading."""
    model = CostModel(L8, SERVER)
    from specsched.sim.cost_model import attention_context

    grid = model.extend(8192, attention_context([8192], [8192]))
    assert model.extend_s([8192], [8192]) == grid
