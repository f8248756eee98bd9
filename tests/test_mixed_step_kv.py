"""A mixed step's running rows read their KV (enable_mixed_chunk, one extend forward).

SGLang 0.5.23 ``ScheduleBatch.mix_with_running`` (managers/schedule_batch.py) turns every
running request into a one-token extend row after its ``prefix_len`` cached tokens and runs
them in the chunk's extend forward; the ragged extend attention then reads each row's whole
cached KV, as its decode step would. So a mixed step does all the work of its rows' decode
step (weights, each row's KV) and the chunk besides, and its GPU time is at least the KV
bytes its rows read over the HBM bandwidth.
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
from specsched.sim.dp_attention import DPCost, GroupPlan, rank_server_args
from specsched.sim.plan import BatchPlan, ForwardMode
from specsched.sim.profile import Profile

H100 = load_gpu("H100")
L8 = Profile.model_validate(build_profile(load_model("llama-3.1-8b"), H100, 1))
SERVER = ServerArgs(speculative_algorithm="none", speculative_num_draft_tokens=1, enable_mixed_chunk=True,
                    cuda_graph_max_bs=256, max_total_num_tokens=10_000_000)
GRAPH_SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]


def mixed(lens: list[int], pre: list[int], rows: list[int]) -> BatchPlan:
    n, m = len(lens), len(rows)
    return BatchPlan(step=0, mode=ForwardMode.MIXED, rids=tuple(range(n + m)), extend_lens=tuple(lens) + (1,) * m,
                     prefix_lens=tuple(pre) + tuple(rows), num_extend=n, new_rids=tuple(range(n)))


def kv_read_floor_s(rows: int, ctx: int) -> float:
    """Seconds the rows' KV bytes take at the profile's HBM rate (datasheet x efficiency)."""
    return rows * ctx * L8.hardware.kv_cell_bytes / (H100.hbm_tbps * 1e12 * Efficiency().hbm)


def test_a_small_chunk_beside_long_context_rows_costs_more_than_their_decode_step():
    """Llama-3.1-8B on an H100: a 256-token chunk beside 12 rows at 16K tokens of context.
    The rows' decode step alone reads 12 x 16K KV cells (about 9.4 ms of HBM time); the
    mixed step was priced at the extend grid's mean keys per token (~830) and came out
    at 9.4 ms against the decode step's 16.2 ms."""
    model = CostModel(L8, SERVER)
    rows = [16000] * 12
    cost = model.gpu(mixed([256], [8000], rows)).total_s
    assert cost >= kv_read_floor_s(12, 16000)
    assert cost > model.decode_launch_s(12, sum(rows))
    assert cost > model.extend_s([256], [8000])


@settings(max_examples=60, deadline=None)
@given(chunk=st.integers(1, 8192), prefix=st.integers(0, 32768), rows=st.sampled_from(GRAPH_SIZES),
       ctx=st.integers(0, 120_000))
def test_a_mixed_step_does_at_least_its_rows_decode_work(chunk, prefix, rows, ctx):
    """Invariant: the mixed forward reads every row's KV (at least those bytes over the HBM
    rate) and does all of the rows' decode step besides the chunk (within 5 %: the rows'
    LM-head logits are priced with the extend's), and it costs no less than the chunk's
    extend alone."""
    model = CostModel(L8, SERVER)
    cost = model.gpu(mixed([chunk], [prefix], [ctx] * rows)).total_s
    assert cost >= kv_read_floor_s(rows, ctx)
    assert cost >= 0.95 * model.decode_launch_s(rows, rows * ctx)
    assert cost >= model.extend_s([chunk], [prefix])


def test_dp_attention_prices_the_slowest_ranks_rows():
    """Under DP attention each rank reads only its own rows' KV, in parallel: a group mixed
    step reads the slowest rank's, not the sum over ranks (sim/dp_attention.py ``DPCost``)."""
    ds = Profile.model_validate(build_profile(load_model("qwen3-30b-a3b"), H100, 4))
    srv = SERVER.model_copy(update={"enable_dp_attention": True, "dp_size": 4})
    cost = DPCost(CostModel(ds, rank_server_args(srv)), 0.0, 4)
    assert cost.group is not None
    one = mixed([512], [0], [20000] * 8)
    chunk_only = BatchPlan(step=0, mode=ForwardMode.EXTEND, rids=(0,), extend_lens=(512,), prefix_lens=(0,),
                           num_extend=1, new_rids=(0,))
    busy_all = cost.gpu(GroupPlan(0, (one, one, one, one))).total_s
    busy_one = cost.gpu(GroupPlan(0, (one, chunk_only, chunk_only, chunk_only))).total_s
    # the same slowest rank: the other ranks' rows add their tokens, not their KV reads
    assert busy_one <= busy_all < 1.2 * busy_one
    # and that rank's rows' KV is read in the forward: more than the chunks alone
    alone = cost.gpu(GroupPlan(0, (chunk_only,) * 4)).total_s
    assert busy_one > alone + 0.9 * cost.group.rows_context_s(4 * 8, 8 * 20000 * cost.kv_ratio / (4 * 8))


def test_a_mixed_forwards_host_issue_is_the_whole_forwards_not_a_decode_steps():
    """The issue of a mixed step run as one extend forward: its token bucket is the chunk's and
    the rows' tokens together (mix_with_running adds the rows to the extend; the prefill graph
    runner buckets the forward's token count), and its rows issue no eager decode step of
    their own, however many there are above cuda_graph_max_bs (they were charged one)."""
    srv = SERVER.model_copy(update={"cuda_graph_max_bs": 8})
    model = CostModel(L8, srv)
    assert L8.gpu.eager_host_issue_s
    many = mixed([256], [0], [1000] * 40)   # 40 rows above the 8 captured decode sizes
    alone = BatchPlan(step=0, mode=ForwardMode.EXTEND, rids=(0,), extend_lens=(256,), prefix_lens=(0,), num_extend=1,
                      new_rids=(0,))
    h = L8.host
    extra_tokens = h.launch_per_extend_token_s * 40
    assert model.issue(many) < model.issue(alone) + model.eager_issue_s(40)
    eager_whole = model.extend_bucket(256 + 40) is None
    if eager_whole == (model.extend_bucket(256) is None):   # the same bucket kind: only the rows' tokens differ
        assert abs(model.issue(many) - (model.issue(alone) + extra_tokens)) < 1e-12
