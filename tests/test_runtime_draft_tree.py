"""The runtime's draft tree (EAGLE-family drafters with ``speculative_eagle_topk`` > 1,
speculative/eagle_worker_v2.py): K branches per serial step, a verify of
``speculative_num_draft_tokens`` nodes under a tree mask, one accepted root-to-leaf path.

Tiny float32 models on CPU (and on CUDA when visible).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specsched.runtime.device import Device  # noqa: E402
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner  # noqa: E402
from specsched.runtime.spec_cycle import draft_tree_shape, tree_mask  # noqa: E402

from tests.test_runtime_chain_drafter import drafter_calls, prefilled  # noqa: E402
from tests.test_runtime_model import DEVICES, TINY, greedy_reference, run_spec, tokens  # noqa: E402


def make_tree(device: str = "cpu", *, topk: int = 3, steps: int = 3, nodes: int = 6, seed: int = 1) -> ModelRunner:
    dev = Device(device, dtype=torch.float32)
    target = LlamaProxy(TINY, seed=seed, device=dev.torch_device)
    drafter = LlamaProxy(PRESETS["tiny-draft"], seed=seed + 2, device=dev.torch_device)
    return ModelRunner(target, dev, max_reqs=4, max_context=128, drafter=drafter, drafter_kind="chain",
                       spec_window=nodes, topk=topk, num_steps=steps)


@settings(max_examples=60, deadline=None)
@given(steps=st.integers(1, 8), nodes=st.integers(2, 64))
def test_the_tree_shape_is_a_tree_of_its_size_whose_spine_is_the_longest_path(steps, nodes):
    """Invariants: N nodes, the root first, every parent before its child, depth = parent's
    depth + 1, no node deeper than num_steps, and the spine 1..spine a chain holding the
    deepest node (the path a verify can accept)."""
    t = draft_tree_shape(steps, nodes)
    assert len(t.parent) == len(t.depth) == nodes
    assert t.parent[0] == -1 and t.depth[0] == 0
    for j in range(1, nodes):
        assert 0 <= t.parent[j] < j and t.depth[j] == t.depth[t.parent[j]] + 1 <= steps
    assert t.spine == min(steps, nodes - 1) == max(t.depth)
    assert all(t.parent[j] == j - 1 for j in range(1, t.spine + 1))
    anc = t.ancestors()
    assert all(anc[j][j] and anc[j][0] for j in range(nodes))
    assert all(sum(anc[j]) == t.depth[j] + 1 for j in range(nodes))


def test_a_tree_mask_shows_each_node_the_prefix_and_its_ancestors_only():
    t = draft_tree_shape(2, 5)   # spine 0 -> 1 -> 2; siblings 3 (under 0) and 4 (under 1)
    anc = torch.tensor(t.ancestors())
    m = tree_mask(anc, torch.tensor([4]), 12)[0, 0]
    for j, want in enumerate([[0], [0, 1], [0, 1, 2], [0, 3], [0, 1, 4]]):
        seen = [c for c in range(12) if m[j, c]]
        assert seen == [0, 1, 2, 3] + [4 + i for i in want]


def test_bad_tree_arguments_are_refused():
    with pytest.raises(ValueError, match="num_draft_tokens >= 2"):
        draft_tree_shape(3, 1)
    dev = Device("cpu", dtype=torch.float32)
    target = LlamaProxy(TINY, seed=1, device=dev.torch_device)
    drafter = LlamaProxy(PRESETS["tiny-draft"], seed=3, device=dev.torch_device)
    with pytest.raises(ValueError, match="chain drafter"):
        ModelRunner(target, dev, max_reqs=2, max_context=64, drafter=drafter, drafter_kind="block", spec_window=4, topk=2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("graph", [False, True])
def test_tree_cycles_reproduce_the_targets_greedy_output(device: str, graph: bool) -> None:
    # whatever the tree holds, verify + commit along its spine must yield the greedy text
    prompts = [tokens(n, 140 + n, torch.device(device.split("-as-")[0])) for n in (9, 17, 4)]
    ref = greedy_reference(device, prompts, 20)
    got, accepts = run_spec(make_tree(device, topk=3, steps=3, nodes=8), prompts, 20, graph=graph)
    assert got == ref
    assert all(0 <= a <= 3 for a in accepts)


def test_a_tree_cycle_runs_k_branches_per_step_then_the_extend_over_the_tree_width() -> None:
    r = make_tree(topk=4, steps=3, nodes=8)   # 2 serial steps of 4 branches, 8 nodes
    rows = prefilled(r, (7, 12), seed=5)
    calls = drafter_calls(r)
    n = r.read_seq_lens(rows)
    r.spec_cycle(rows, forced_accept=[0, 3])
    assert [tuple(ids.shape) for ids, _ in calls] == [(8,), (8,), (16,)]
    # step i: every branch of a request at rope position n + i
    assert calls[0][1].view(2, 4).tolist() == [[x] * 4 for x in n]
    assert calls[1][1].view(2, 4).tolist() == [[x + 1] * 4 for x in n]
    # the forced accepts commit along the spine: 1 and 4 tokens
    assert r.read_seq_lens(rows) == [n[0] + 1, n[1] + 4]


def test_the_spine_verifies_as_a_chain_whatever_its_siblings_hold() -> None:
    """The tree mask isolates branches: the target's outputs on the spine equal a plain
    causal verify of the same spine tokens, and do not move when the siblings change."""
    r = make_tree(topk=2, steps=3, nodes=7)
    rows = prefilled(r, (10,), seed=9)
    rows_t = torch.tensor(rows)
    ctx = r._prepare(rows, r.window)
    spine = torch.tensor([[5, 17, 23, 42]])
    siblings = torch.tensor([[7, 8, 9]])
    tree = r._tree_verify_dev(rows_t, torch.cat([spine, siblings], 1), ctx)
    other = r._tree_verify_dev(rows_t, torch.cat([spine, siblings + 100], 1), ctx)
    chain = r._verify_dev(rows_t, spine, ctx, want_logits=False).greedy
    assert torch.equal(tree[:, :4], chain) and torch.equal(other[:, :4], chain)


def test_a_tree_runs_in_the_engine_as_the_simulator_schedules_it() -> None:
    """A tiny EAGLE tree burst in both engines: the runtime commits what the acceptance
    model draws (at most num_steps drafts a cycle), so plans, accepted tokens and chunks
    agree with the simulator step for step."""
    from specsched.runtime.engine import RuntimeEngine
    from specsched.sim.engine import SimEngine

    from tests.conftest import make_scenario, tiny_profile
    from tests.test_runtime_engine import BURST, SERVER

    tree = {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 2,
            "speculative_num_draft_tokens": 6}
    sc = make_scenario({**SERVER, **tree}, BURST, {"mean_accept_length": 2.6})
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    assert eng.runner.tree is not None and eng.runner.window == 6 and eng.runner.accept_max == 3
    measured = eng.run()
    simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
    cols = ["mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs"]
    assert measured.steps[cols].reset_index(drop=True).equals(simulated.steps[cols].reset_index(drop=True))
    assert measured.summary["completed"] == 5
    assert measured.summary["total_output_tokens"] == simulated.summary["total_output_tokens"]


@pytest.mark.parametrize("topk,steps,nodes", [(2, 4, 3), (4, 5, 4), (8, 3, 4)])
def test_a_tree_of_fewer_drafts_than_steps_still_runs_every_serial_step(topk: int, steps: int, nodes: int) -> None:
    """SGLang's draft_forward runs num_steps - 1 serial drafter forwards whatever the tree
    keeps (eagle_worker_v2.py: the loop over speculative_num_steps breaks at the last step
    only); a tree of num_draft_tokens - 1 < num_steps drafts ran only num_draft_tokens - 2
    of them, a cheaper draft phase than SGLang's and than the simulator prices
    (num_draft_forwards = num_steps). Accepts stay within the tree: at most N - 1 drafts."""
    r = make_tree(topk=topk, steps=steps, nodes=nodes)
    rows = prefilled(r, (7, 12), seed=5)
    calls = drafter_calls(r)
    n = r.read_seq_lens(rows)
    r.spec_cycle(rows, forced_accept=[0, steps])
    assert [tuple(ids.shape) for ids, _ in calls] == [(2 * topk,)] * (steps - 1) + [(2 * nodes,)]
    assert r.read_seq_lens(rows) == [n[0] + 1, n[1] + nodes]
