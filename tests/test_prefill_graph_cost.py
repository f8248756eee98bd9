"""The simulator charges a piecewise-graphed extend its padded token bucket, as SGLang 0.5.23
does on CUDA (prefill_cuda_graph_runner.py ``can_replay_locally`` / ``_pad_to_bucket``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import (
    MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR,
    ServerArgs,
    prefill_graph_bucket,
    prefill_token_buckets,
)
from specsched.sim.cost_model import CostModel
from specsched.sim.hardware import Hardware
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import Profile

from tests.conftest import tiny_profile


def profile(platform: str | None) -> Profile:
    """tiny_profile's grids (extend: 1 ms per 1K tokens, linear) on a CUDA or HIP device."""
    p = tiny_profile()
    if platform is None:
        return p
    return p.model_copy(update={"hardware": Hardware(platform=platform, gpu="H200" if platform == "cuda" else "MI355X")})


def server(**kw) -> ServerArgs:
    base = dict(max_running_requests=16, max_total_num_tokens=200_000, chunked_prefill_size=2048,
                speculative_algorithm="dspark", speculative_num_draft_tokens=4)
    base.update(kw)
    return ServerArgs.model_validate(base)


def extend_plan(tokens: int, prefix: int = 0) -> BatchPlan:
    return BatchPlan(step=0, mode=ForwardMode.EXTEND, rids=(0,), extend_lens=(tokens,), prefix_lens=(prefix,),
                     num_extend=1, new_rids=(0,))


def gpu_s(cm: CostModel, tokens: int, part: str = "main") -> float:
    return cm.gpu(extend_plan(tokens), part).extend_s


def test_extend_is_charged_its_token_bucket_on_cuda():
    # 700 tokens replay at the 704 bucket; 1025 at 1280 (buckets 256 apart above 1024)
    cm = CostModel(profile("cuda"), server())
    eager = CostModel(profile("cuda"), server(disable_prefill_cuda_graph=True))
    assert gpu_s(cm, 1025) == pytest.approx(gpu_s(eager, 1280))
    assert gpu_s(cm, 1025) > gpu_s(eager, 1025) * 1.2
    assert gpu_s(cm, 700) == pytest.approx(gpu_s(eager, 704))
    assert gpu_s(cm, 1024) == pytest.approx(gpu_s(eager, 1024))  # a bucket: no padding
    assert gpu_s(cm, 1025, "inject") > gpu_s(eager, 1025, "inject")


def test_no_prefill_graphs_off_cuda_or_without_hardware():
    # SGLang's default_prefill_backend is breakable on CUDA only
    for plat in ("hip", None):
        cm = CostModel(profile(plat), server())
        assert cm.extend_bucket(1025) is None
        eager = CostModel(profile(plat), server(disable_prefill_cuda_graph=True))
        assert gpu_s(cm, 1025) == gpu_s(eager, 1025) < gpu_s(eager, 1280)


def test_eager_above_the_largest_bucket_or_past_twice_the_tokens():
    cm = CostModel(profile("cuda"), server(cuda_graph_max_bs_prefill=512))
    eager = CostModel(profile("cuda"), server(disable_prefill_cuda_graph=True))
    assert cm.extend_bucket(513) is None and gpu_s(cm, 513) == gpu_s(eager, 513)
    assert cm.extend_bucket(1) is None  # bucket 4 > 2 x 1
    assert cm.extend_bucket(2) == 4


@settings(max_examples=200, deadline=None)
@given(tokens=st.integers(1, 20_000), top=st.integers(1, 16_384))
def test_bucket_invariants(tokens, top):
    """Invariant: the bucket is the smallest captured size >= tokens, within the padding
    factor, and None exactly when no captured size qualifies."""
    buckets = prefill_token_buckets(top)
    b = prefill_graph_bucket(tokens, buckets)
    fits = [s for s in buckets if s >= tokens]
    if b is None:
        assert not fits or min(fits) > MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR * tokens
    else:
        assert b == min(fits) and tokens <= b <= MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR * tokens


@settings(max_examples=100, deadline=None)
@given(tokens=st.integers(1, 4096), prefix=st.integers(0, 4096))
def test_padding_never_lowers_the_cost(tokens, prefix):
    """Invariant: a graphed extend costs at least the eager reading of its real tokens."""
    plan = extend_plan(tokens, prefix)
    cm = CostModel(profile("cuda"), server(chunked_prefill_size=4096))
    eager = CostModel(profile("cuda"), server(chunked_prefill_size=4096, disable_prefill_cuda_graph=True))
    assert cm.gpu(plan).extend_s >= eager.gpu(plan).extend_s - 1e-15


def test_the_runtime_picks_the_same_bucket():
    pg = pytest.importorskip("specsched.runtime.prefill_graph")
    buckets = prefill_token_buckets(16384)
    for t in (1, 2, 3, 5, 33, 100, 700, 1025, 4097, 16384, 16385):
        assert pg.pick_token_bucket(t, buckets) == prefill_graph_bucket(t, buckets)
