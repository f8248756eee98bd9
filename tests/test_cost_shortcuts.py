"""The per-launch shortcuts of the cost model and the plan give what they replace, bit for bit
(docs/performance.md, fourteenth round): ``CostModel.host`` from each kind's two terms summed
once, ``CostModel.extend_bucket`` kept per token count, ``BatchPlan.num_extend_tokens`` set
once at construction."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from specsched.sim.config import ServerArgs, prefill_graph_bucket
from specsched.sim.cost_model import CostModel
from specsched.sim.hardware import Hardware
from specsched.sim.plan import BatchPlan, ForwardMode

from tests.conftest import tiny_profile

seconds = st.floats(0.0, 5e-3, allow_nan=False, allow_infinity=False)


def _server(spec: bool, **kw) -> ServerArgs:
    base = dict(max_running_requests=64, max_total_num_tokens=200_000, chunked_prefill_size=2048)
    if spec:
        base.update(speculative_algorithm="dspark", speculative_num_draft_tokens=4)
    base.update(kw)
    return ServerArgs.model_validate(base)


def _plan(bs: int) -> BatchPlan:
    return BatchPlan(0, ForwardMode.DECODE, tuple(range(bs)), (1,) * bs, (100,) * bs)


def _host_as_summed_per_call(h, spec: bool, kind: str, bs: int) -> float:
    """CostModel.host as it summed its terms at every call (before the terms were kept)."""
    plain = not spec and h.decode_schedule_s is not None
    if kind == "schedule":
        s, s_req = (h.decode_schedule_s, h.decode_schedule_per_req_s) if plain else (h.schedule_s, h.schedule_per_req_s)
        return s + h.recv_path_s + (s_req + h.recv_path_per_req_s) * bs
    if kind == "launch":
        if not spec and h.decode_launch_s is not None:
            return h.decode_launch_s + h.decode_launch_per_req_s * bs
        return h.launch_s + h.launch_per_req_s * bs
    p, p_req = (h.decode_process_s, h.decode_process_per_req_s) if plain else (h.process_s, h.process_per_req_s)
    return p + h.result_path_s + (p_req + h.result_path_per_req_s) * bs


@settings(max_examples=150, deadline=None)
@given(terms=st.fixed_dictionaries({k: seconds for k in (
           "schedule_s", "schedule_per_req_s", "launch_s", "launch_per_req_s", "process_s", "process_per_req_s",
           "recv_path_s", "recv_path_per_req_s", "result_path_s", "result_path_per_req_s")}),
       plain_sched=st.none() | st.tuples(seconds, seconds, seconds, seconds),
       plain_launch=st.none() | st.tuples(seconds, seconds),
       spec=st.booleans(), sizes=st.lists(st.integers(1, 300), min_size=1, max_size=6))
def test_host_seconds_are_the_terms_summed_at_each_call(terms, plain_sched, plain_launch, spec, sizes):
    """Each kind's fixed and per-request terms are added once at construction in the order
    host() added them per call, so every answer is the per-call sum's, bit for bit; with and
    without a plain-decoding server's own terms, speculative decoding on and off."""
    host = dict(terms)
    if plain_sched is not None:
        host.update(zip(("decode_schedule_s", "decode_schedule_per_req_s", "decode_process_s",
                         "decode_process_per_req_s"), plain_sched, strict=True))
    if plain_launch is not None:
        host.update(zip(("decode_launch_s", "decode_launch_per_req_s"), plain_launch, strict=True))
    profile = tiny_profile(**host)
    cost = CostModel(profile, _server(spec))
    for bs in sizes:
        for kind in ("schedule", "launch", "process"):
            got = cost.host(kind, _plan(bs))
            want = _host_as_summed_per_call(profile.host, spec, kind, bs)
            assert got == want and type(got) is type(want), (kind, bs, got, want)


@settings(max_examples=100, deadline=None)
@given(tokens=st.lists(st.integers(-2, 20_000), min_size=1, max_size=40), cuda=st.booleans(),
       small_memo=st.booleans())
def test_extend_bucket_kept_per_token_count_is_the_bucket(tokens, cuda, small_memo):
    """Asked again (and after the memo is cleared at its bound), the bucket is the one
    prefill_graph_bucket gives for that count; no graphs off CUDA: always None (eager)."""
    profile = tiny_profile()
    if cuda:
        profile = profile.model_copy(update={"hardware": Hardware(platform="cuda", gpu="H200")})
    cost = CostModel(profile, _server(False))
    if small_memo:
        cost._buckets = _Bounded(3)
    for n in tokens + tokens[::-1]:
        want = prefill_graph_bucket(n, cost.prefill_buckets) if cost.prefill_buckets else None
        assert cost.extend_bucket(n) == want, n
    assert bool(cost.prefill_buckets) == cuda


class _Bounded(dict):
    """A memo that reports itself full from ``n`` entries on (the clear path, quickly)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __len__(self) -> int:
        return super().__len__() * (1 << 12) // self.n


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.integers(1, 5000), min_size=1, max_size=12), data=st.data())
def test_num_extend_tokens_is_the_extend_rows_sum(rows, data):
    """Set once at construction: the sum of the first num_extend extend lengths (0 without
    extend rows), for extend, mixed and decode plans."""
    num_extend = data.draw(st.integers(0, len(rows)))
    mode = ForwardMode.EXTEND if num_extend == len(rows) else ForwardMode.MIXED if num_extend else ForwardMode.DECODE
    plan = BatchPlan(3, mode, tuple(range(len(rows))), tuple(rows), (0,) * len(rows), num_extend)
    assert plan.num_extend_tokens == sum(rows[:num_extend])
    assert plan.batch_size == len(rows)
