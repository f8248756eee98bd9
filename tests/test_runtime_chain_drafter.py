"""The runtime's chain drafter (EAGLE/MTP with topk 1, speculative/eagle_worker_v2.py):
``speculative_num_steps - 1`` serial one-token draft steps after the previous draft
extend's first proposal, the verify, then the draft extend over the verified window.

Tiny float32 models on CPU (and on CUDA when visible).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.device import Device  # noqa: E402
from specsched.runtime.model import PRESETS, LlamaProxy, ModelRunner  # noqa: E402
from specsched.runtime.sync_checker import SyncChecker  # noqa: E402

from tests.test_runtime_model import DEVICES, TINY, greedy_reference, run_spec, tokens  # noqa: E402


def make_chain(device: str = "cpu", *, window: int = 4, seed: int = 1, kind: str = "chain") -> ModelRunner:
    dev = Device(device, dtype=torch.float32)
    target = LlamaProxy(TINY, seed=seed, device=dev.torch_device)
    drafter = LlamaProxy(PRESETS["tiny-draft"], seed=seed + 2, device=dev.torch_device)
    return ModelRunner(target, dev, max_reqs=4, max_context=128, drafter=drafter, drafter_kind=kind, spec_window=window)


def prefilled(r: ModelRunner, lens: tuple[int, ...], seed: int) -> list[int]:
    dev = r.device.torch_device
    prompts = [tokens(n, seed + n, dev) for n in lens]
    rows = [r.add_request() for _ in prompts]
    ext = r.extend(rows, [0] * len(rows), list(lens), torch.cat(prompts))
    r.inject(r.prepare_inject(rows, [0] * len(rows), list(lens), sync=False), ext.tokens)
    return rows


def drafter_calls(r: ModelRunner) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Record every drafter forward's (input ids, positions)."""
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    r.drafter.register_forward_hook(lambda _m, args, _out: calls.append((args[0].clone(), args[1].clone())))
    return calls


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("graph", [False, True])
def test_chain_cycles_reproduce_the_targets_greedy_output(device: str, graph: bool) -> None:
    # whatever the drafter proposes, verify + commit must yield the target's greedy text
    prompts = [tokens(n, 120 + n, torch.device(device.split("-as-")[0])) for n in (9, 17, 4)]
    ref = greedy_reference(device, prompts, 20)
    got, accepts = run_spec(make_chain(device), prompts, 20, graph=graph)
    assert got == ref
    assert all(0 <= a <= 3 for a in accepts)


def test_a_chain_cycle_runs_its_draft_steps_serially_then_the_draft_extend() -> None:
    r = make_chain(window=4)  # speculative_num_steps 3: 2 serial steps, then the extend
    rows = prefilled(r, (7, 12), seed=3)
    calls = drafter_calls(r)
    first = r.pool.draft_next[torch.tensor(rows)].clone()
    n = r.read_seq_lens(rows)
    out = r.spec_cycle(rows, forced_accept=[1, 3])
    assert [tuple(ids.shape) for ids, _ in calls] == [(2,), (2,), (8,)]
    # step 1 feeds the previous extend's proposal at position n; step 2 feeds step 1's
    # proposal at n + 1 (EAGLE pairs position p with the token at p + 1)
    assert torch.equal(calls[0][0], first)
    assert calls[0][1].tolist() == n and calls[1][1].tolist() == [x + 1 for x in n]
    # the extend runs over the whole window with the committed tokens, -1 masked
    ids, pos = calls[2]
    assert pos.view(2, 4).tolist() == [[x + j for j in range(4)] for x in n]
    committed = out.tokens
    want = torch.where(committed >= 0, committed, r.mask_token).reshape(-1)
    assert torch.equal(ids, want)


def test_the_draft_steps_propose_from_their_predecessor() -> None:
    r = make_chain(window=5)
    rows = prefilled(r, (6,), seed=8)
    proposed: list[torch.Tensor] = []
    orig = r._draft_step_dev

    def spy(rows_t, pos, tok, ctx):
        proposed.append(tok.clone())
        out = orig(rows_t, pos, tok, ctx)
        proposed.append(out.clone())
        return out

    r._draft_step_dev = spy
    step = r.spec_cycle(rows, forced_accept=[4])
    # inputs of step i+1 are the outputs of step i, and the drafts are [first, outputs...]
    ins, outs = proposed[0::2], proposed[1::2]
    assert len(ins) == 3
    for a, b in zip(outs[:-1], ins[1:], strict=True):
        assert torch.equal(a, b)
    assert step.tokens[0, 1:4].tolist() == [int(o) for o in outs]


@pytest.mark.parametrize("device", DEVICES)
def test_chain_forced_accept_commits_accept_plus_one(device: str) -> None:
    r = make_chain(device, window=4)
    rows = prefilled(r, (11, 7, 20), seed=60)
    lens = r.read_seq_lens(rows)
    for forced in ([0, 3, 1], [2, 0, 3], [3, 3, 0], [9, -1, 0]):
        step = r.spec_cycle(rows, forced_accept=forced)
        want = [min(max(f, 0), 3) for f in forced]
        assert step.committed.tolist() == [a + 1 for a in want]
        lens = [n + a + 1 for n, a in zip(lens, want, strict=True)]
        assert r.read_seq_lens(rows) == lens == [r.pool.len_bound[x] for x in rows]


@pytest.mark.parametrize("device", DEVICES)
def test_chain_graph_replay_equals_eager_for_every_kind(device: str) -> None:
    results = []
    for graph in (False, True):
        r = make_chain(device, window=4, seed=5)
        rows = prefilled(r, (5, 14, 9), seed=80)  # batch 3 -> bucket 4
        seq = []
        for k in range(3):
            s = r.spec_cycle(rows, forced_accept=[k % 4, 1, 3], graph=graph)
            seq.append((s.tokens.tolist(), s.committed.tolist()))
            s = r.spec_cycle(rows, graph=graph)
            seq.append((s.tokens.tolist(), s.committed.tolist()))
            s = r.spec_cycle(rows, forced_accept=[1, 1, 1], graph=graph, draft_steps=False)
            seq.append((s.tokens.tolist(), s.committed.tolist()))
            seq.append(r.draft_step(rows, graph=graph).tokens.tolist())
        results.append(seq)
        if graph:
            assert {k[0] for k in r.device.graphs.keys()} == {"spec", "spec_no_steps", "draft_step"}
    assert results[0] == results[1]


def test_chain_paths_have_no_host_sync() -> None:
    r = make_chain(window=4)
    dev = r.device
    rows = prefilled(r, (8, 3), seed=90)
    r.capture("spec", 2, 64, forced=True)
    dev.reset_counters()
    with SyncChecker() as chk:
        r.spec_cycle(rows)
        r.spec_cycle(rows, forced_accept=[1, 2], graph=True)
        r.spec_cycle(rows, forced_accept=[1, 2], draft_steps=False)
        r.draft_step(rows, graph=True)
    chk.assert_none()
    assert dev.host_syncs == 0


def test_draft_step_needs_a_drafter_and_kind_is_checked() -> None:
    dev = Device("cpu", dtype=torch.float32)
    plain = ModelRunner(LlamaProxy(TINY, seed=1), dev, max_reqs=2, max_context=64)
    row = plain.add_request()
    plain.extend([row], [0], [4], tokens(4, 1, dev.torch_device))
    with pytest.raises(RuntimeError, match="needs a drafter"):
        plain.draft_step([row])
    with pytest.raises(ValueError, match="drafter_kind"):
        make_chain(kind="tree")
    # a block drafter's runner times the same one-token drafter forward
    r = make_chain(kind="block")
    rows = prefilled(r, (4, 6), seed=1)
    assert r.draft_step(rows).tokens.shape == (2, 1)


def test_skipping_the_steps_leaves_a_block_drafter_unchanged() -> None:
    outs = []
    for steps in (True, False):
        r = make_chain(kind="block", seed=3)
        rows = prefilled(r, (6, 9), seed=4)
        outs.append([r.spec_cycle(rows, forced_accept=[2, 1], draft_steps=steps).tokens.tolist() for _ in range(3)])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("graph", [False, True])
def test_a_block_runner_runs_the_chain_cycle_the_profiler_times(graph: bool) -> None:
    # the profiler's gpu.draft_step: a chain cycle with and without its steps on its block runner
    outs = []
    for kind, as_chain in (("chain", False), ("block", True)):
        r = make_chain(kind=kind, seed=7)
        rows = prefilled(r, (6, 10), seed=11)
        seq = []
        for steps in (True, False, True):
            s = r.spec_cycle(rows, forced_accept=[2, 1], graph=graph, draft_steps=steps, as_chain=as_chain)
            seq.append((s.tokens.tolist(), r.pool.draft_next[torch.tensor(rows)].tolist()))
        outs.append(seq)
        if graph and as_chain:
            assert {k[0] for k in r.device.graphs.keys()} == {"chain_spec", "chain_no_steps"}
    assert outs[0] == outs[1]
