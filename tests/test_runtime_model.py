"""specsched.runtime.model: paged attention vs the dense reference, the speculative cycle, forced
acceptance, graph replay, host-sync freedom, pools and presets.

Tiny float32 models on CPU (also on CUDA when visible, still float32 so argmax ties
cannot differ between paths).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.device import Device  # noqa: E402
from specsched.runtime.model import (  # noqa: E402
    PRESETS,
    LlamaProxy,
    ModelConfig,
    ModelRunner,
    PoolExhausted,
    ReqToTokenPool,
    default_ctx_buckets,
    draft_preset,
    verify_cycle_cost,
)
from specsched.runtime.sync_checker import SyncChecker  # noqa: E402

# every HIP branch also runs on CPU (cpu-as-hip) and, where a GPU is present, on it (cuda-as-hip)
DEVICES = ["cpu", "cpu-as-hip"] + (["cuda", "cuda-as-hip"] if torch.cuda.is_available() else [])
TINY = PRESETS["tiny"]
ATOL = 2e-4


def make(device: str = "cpu", *, window: int = 1, drafter: str | None = None, attn_impl: str = "sdpa", max_reqs: int = 4, max_context: int = 128, seed: int = 1):
    dev = Device(device, dtype=torch.float32)
    target = LlamaProxy(TINY, seed=seed, device=dev.torch_device)
    d = None
    if drafter == "copy":
        d = LlamaProxy(TINY, seed=seed + 1, device=dev.torch_device)
        d.load_state_dict(target.state_dict())
    elif drafter is not None:
        d = LlamaProxy(PRESETS[drafter], seed=seed + 2, device=dev.torch_device)
    runner = ModelRunner(target, dev, max_reqs=max_reqs, max_context=max_context, drafter=d, spec_window=window, attn_impl=attn_impl)
    return dev, target, runner


def tokens(n: int, seed: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TINY.vocab_size - 1, (n,), generator=g).to(device)


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.cpu(), b.cpu(), atol=ATOL, rtol=1e-4)


# ------------------------------------------------------------------ paged vs dense
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
def test_paged_extend_decode_verify_match_dense(device: str, impl: str) -> None:
    dev, model, r = make(device, attn_impl=impl)
    seq = tokens(40, 0, dev.torch_device)
    dense = model.forward_dense(seq)
    row = r.add_request()
    a = r.extend([row], [0], [16], seq[:16], completes=[False], return_logits=True)  # chunk 1
    b = r.extend([row], [16], [14], seq[16:30], return_logits=True)  # chunk 2, completes
    assert close(a.logits, dense[:16]) and close(b.logits, dense[16:30])
    assert int(b.next_tokens[0]) == int(dense[29].argmax()) and int(a.next_tokens[0]) == -1
    r.pool.last_token[row] = seq[30]  # teacher-force the decode input
    out = r.decode([row])
    assert int(out.tokens[0, 0]) == int(dense[30].argmax()) and r.read_seq_lens([row]) == [31]
    v = r.verify([row], seq[31:39][None])  # window of 8 at positions 31..38
    assert close(v.logits[0], dense[31:39])
    assert v.greedy[0].tolist() == dense[31:39].argmax(-1).tolist()
    assert r.read_seq_lens([row]) == [31]  # verify alone commits nothing


@pytest.mark.parametrize("device", DEVICES)
def test_chunked_prefill_equals_one_shot(device: str) -> None:
    dev, model, one = make(device)
    _, _, chunked = make(device)
    seq = tokens(50, 1, dev.torch_device)
    r1 = one.add_request()
    full = one.extend([r1], [0], [50], seq, return_logits=True)
    r2 = chunked.add_request()
    parts, pre = [], 0
    for n in (7, 20, 1, 22):
        parts.append(chunked.extend([r2], [pre], [n], seq[pre : pre + n], completes=[pre + n == 50], return_logits=True))
        pre += n
    assert close(torch.cat([p.logits for p in parts]), full.logits)
    assert int(parts[-1].next_tokens[0]) == int(full.next_tokens[0])
    assert close(full.logits, model.forward_dense(seq))
    for _ in range(3):  # and decoding afterwards stays identical
        assert one.decode([r1]).tokens.tolist() == chunked.decode([r2]).tokens.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_ragged_batch_extend_decode_verify_match_dense(device: str) -> None:
    dev, model, r = make(device)
    seqs = [tokens(n, 10 + n, dev.torch_device) for n in (30, 45, 12)]
    dense = [model.forward_dense(s) for s in seqs]
    rows = [r.add_request() for _ in seqs]
    # first chunks of different sizes (one request fully prefilled), then the rest together
    first = [10, 45, 5]
    out = r.extend(rows, [0, 0, 0], first, torch.cat([s[:f] for s, f in zip(seqs, first, strict=True)]), completes=[False, True, False], return_logits=True)
    off = 0
    for f, d in zip(first, dense, strict=True):
        assert close(out.logits[off : off + f], d[:f])
        off += f
    rest = [(rows[0], 10, 18), (rows[2], 5, 5)]
    out2 = r.extend([x[0] for x in rest], [x[1] for x in rest], [x[2] for x in rest], torch.cat([seqs[0][10:28], seqs[2][5:10]]), return_logits=True)
    assert close(out2.logits[:18], dense[0][10:28]) and close(out2.logits[18:], dense[2][5:10])
    # batched decode at lengths 28, 45, 10 (teacher-forced inputs)
    lens = [28, 45, 10]
    full = [torch.cat([s, tokens(20, 99 + i, dev.torch_device)]) for i, s in enumerate(seqs)]
    dense_full = [model.forward_dense(f) for f in full]
    for row, f, n in zip(rows, full, lens, strict=True):
        r.pool.last_token[row] = f[n]
    dec = r.decode(rows)
    assert dec.tokens[:, 0].tolist() == [int(d[n].argmax()) for d, n in zip(dense_full, lens, strict=True)]
    # batched verify of a window of 5 at each request's next positions
    win = torch.stack([f[n + 1 : n + 6] for f, n in zip(full, lens, strict=True)])
    v = r.verify(rows, win)
    for i, (d, n) in enumerate(zip(dense_full, lens, strict=True)):
        assert close(v.logits[i], d[n + 1 : n + 6])


def test_sdpa_and_explicit_paths_agree() -> None:
    _, _, a = make(attn_impl="sdpa")
    _, _, b = make(attn_impl="explicit")
    seq = tokens(33, 3, torch.device("cpu"))
    ra, rb = a.add_request(), b.add_request()
    la = a.extend([ra], [0], [33], seq, return_logits=True).logits
    lb = b.extend([rb], [0], [33], seq, return_logits=True).logits
    assert close(la, lb)
    with pytest.raises(ValueError, match="attn_impl"):
        make(attn_impl="flash")[2].extend([1], [0], [3], seq[:3])


# ------------------------------------------------------------------------ speculative
def greedy_reference(device: str, prompts: list[torch.Tensor], n_out: int) -> list[list[int]]:
    dev, _, r = make(device)
    rows = [r.add_request() for _ in prompts]
    first = r.extend(rows, [0] * len(rows), [len(p) for p in prompts], torch.cat(prompts))
    out = [[t] for t in first.next_tokens.tolist()]
    for _ in range(n_out - 1):
        for o, t in zip(out, r.decode(rows).tokens[:, 0].tolist(), strict=True):
            o.append(t)
    return out


def run_spec(r: ModelRunner, prompts: list[torch.Tensor], n_out: int, *, graph: bool = False, inject_sync: bool = False):
    rows = [r.add_request() for _ in prompts]
    lens = [len(p) for p in prompts]
    ext = r.extend(rows, [0] * len(rows), lens, torch.cat(prompts))
    r.inject(r.prepare_inject(rows, [0] * len(rows), lens, sync=inject_sync), ext.tokens)
    out = [[t] for t in ext.next_tokens.tolist()]
    accepts: list[int] = []
    while min(len(o) for o in out) < n_out:
        step = r.spec_cycle(rows, graph=graph)
        toks, comm = step.tokens.tolist(), step.committed.tolist()
        accepts += step.accept.tolist()
        for o, t, c in zip(out, toks, comm, strict=True):
            assert all(x >= 0 for x in t[:c]) and all(x == -1 for x in t[c:])
            o.extend(t[:c])
        r.observe_lengths(rows, r.read_seq_lens(rows))
    return [o[:n_out] for o in out], accepts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("graph", [False, True])
def test_spec_with_target_as_drafter_reproduces_greedy(device: str, graph: bool) -> None:
    prompts = [tokens(n, 20 + n, torch.device(device.split("-as-")[0])) for n in (9, 17, 4)]
    ref = greedy_reference(device, prompts, 24)
    _, _, r = make(device, window=4, drafter="copy")
    got, accepts = run_spec(r, prompts, 24, graph=graph)
    assert got == ref
    # real matching: the copied drafter's anchor output is the target's next token, so the
    # first draft is always accepted (mask positions only rarely guess further)
    assert min(accepts) >= 1


@pytest.mark.parametrize("device", DEVICES)
def test_spec_with_a_different_drafter_still_reproduces_greedy(device: str) -> None:
    prompts = [tokens(n, 40 + n, torch.device(device.split("-as-")[0])) for n in (6, 13)]
    ref = greedy_reference(device, prompts, 15)
    _, _, r = make(device, window=3, drafter="tiny-draft")
    got, accepts = run_spec(r, prompts, 15)
    assert got == ref
    assert all(0 <= a <= 2 for a in accepts)


@pytest.mark.parametrize("device", DEVICES)
def test_forced_accept_commits_exactly_accept_plus_one_and_rolls_back_the_rest(device: str) -> None:
    dev, model, r = make(device, window=4, drafter="tiny-draft")
    prompts = [tokens(n, 60 + n, dev.torch_device) for n in (11, 7, 20)]
    rows = [r.add_request() for _ in prompts]
    ext = r.extend(rows, [0, 0, 0], [len(p) for p in prompts], torch.cat(prompts))
    r.inject(r.prepare_inject(rows, [0, 0, 0], [len(p) for p in prompts], sync=False), ext.tokens)
    committed = [p.tolist() for p in prompts]  # tokens whose KV is in the cache
    last = ext.next_tokens.tolist()  # sampled, KV not yet written
    lens = [len(p) for p in prompts]
    for forced in ([0, 3, 1], [2, 0, 3], [3, 3, 0], [1, 2, 2], [9, -1, 0]):
        step = r.spec_cycle(rows, forced_accept=forced)
        want = [min(max(f, 0), 3) for f in forced]
        assert step.accept.tolist() == want
        assert step.committed.tolist() == [a + 1 for a in want]
        lens = [n + a + 1 for n, a in zip(lens, want, strict=True)]
        assert r.read_seq_lens(rows) == lens
        assert [r.pool.len_bound[x] for x in rows] == lens  # forced: the host knows exactly
        toks = step.tokens.tolist()
        for i, a in enumerate(want):
            assert all(t == -1 for t in toks[i][a + 1 :])
            committed[i] += [last[i]] + toks[i][:a]  # anchor + accepted drafts enter the KV
            last[i] = toks[i][a]  # the bonus token is the new anchor
    # rollback: the cache holds exactly the committed tokens, so the target's bonus token is
    # its greedy continuation of them and a fresh verify matches the dense reference
    for i, row in enumerate(rows):
        seq = torch.tensor(committed[i] + [last[i]], device=dev.torch_device)
        dense = model.forward_dense(seq)
        assert int(dense[-2].argmax()) == last[i]
        v = r.verify([row], seq[-1:][None].expand(1, 1).contiguous())
        assert close(v.logits[0, 0], dense[-1])


@pytest.mark.parametrize("device", DEVICES)
def test_graph_replay_equals_eager_with_padding(device: str) -> None:
    prompts = [tokens(n, 80 + n, torch.device(device.split("-as-")[0])) for n in (5, 14, 9)]  # batch 3 -> bucket 4
    results = []
    for graph in (False, True):
        _, _, r = make(device, window=4, drafter="tiny-draft", seed=5)
        rows = [r.add_request() for _ in prompts]
        ext = r.extend(rows, [0, 0, 0], [len(p) for p in prompts], torch.cat(prompts))
        r.inject(r.prepare_inject(rows, [0, 0, 0], [len(p) for p in prompts], sync=False), ext.tokens)
        seq = []
        for k in range(4):
            s = r.spec_cycle(rows, forced_accept=[k % 4, 1, 3], graph=graph)
            seq.append((s.tokens.tolist(), s.committed.tolist()))
            s = r.spec_cycle(rows, graph=graph)
            seq.append((s.tokens.tolist(), s.committed.tolist()))
        results.append(seq)
        if graph:
            assert len(r.device.graphs.keys()) == 2  # forced and real acceptance, bucket (4, 256)
            assert r.device.graphs.keys()[0][:2] == ("spec", 4)
    assert results[0] == results[1]
    dec = []
    for graph in (False, True):
        _, _, r = make(device, seed=5)
        rows = [r.add_request() for _ in prompts]
        r.extend(rows, [0, 0, 0], [len(p) for p in prompts], torch.cat(prompts))
        dec.append([r.decode(rows, graph=graph).tokens.tolist() for _ in range(5)])
    assert dec[0] == dec[1]


# ------------------------------------------------------------------------ host syncs
def test_step_paths_have_no_host_sync() -> None:
    dev, _, r = make(window=4, drafter="tiny-draft")
    prompts = [tokens(n, 90 + n, dev.torch_device) for n in (8, 3)]
    rows = [r.add_request() for _ in prompts]
    lens = [len(p) for p in prompts]
    r.capture("spec", 2, 64, forced=True)
    assert dev.sync_counts["setup"] == 1  # the runner's constructor, outside the loop
    dev.reset_counters()
    with SyncChecker() as chk:
        ext = r.extend(rows, [0, 0], lens, torch.cat(prompts))
        r.inject(r.prepare_inject(rows, [0, 0], lens, sync=False), ext.tokens)
        r.spec_cycle(rows)
        r.spec_cycle(rows, forced_accept=[1, 2])
        r.spec_cycle(rows, forced_accept=[0, 3], graph=True)
        out = r.spec_cycle(rows, graph=True)
        hc = dev.copy_to_host(out.as_dict())
    chk.assert_none()
    assert dev.host_syncs == 0
    dev.wait_copy(hc)
    assert dev.sync_counts == {"results": 1}
    _, _, plain = make()
    row = plain.add_request()
    with SyncChecker() as chk:
        plain.extend([row], [0], [6], prompts[0][:6])
        plain.decode([row])
        plain.decode([row], graph=True)
    chk.assert_none()


def test_prepare_inject_sync_flag_reproduces_the_slot_expansion_sync() -> None:
    dev, _, r = make(window=3, drafter="tiny-draft")
    rows = [r.add_request(), r.add_request()]
    seq = tokens(12, 5, dev.torch_device)
    ext = r.extend(rows, [0, 0], [5, 7], seq)
    with SyncChecker() as chk:
        quiet = r.prepare_inject(rows, [0, 0], [5, 7], sync=False)
    assert chk.events == [] and dev.sync_counts["slot_expansion"] == 0
    with SyncChecker() as chk:
        loud = r.prepare_inject(rows, [0, 0], [5, 7], sync=True)
    assert chk.ops() == ["aten.repeat_interleave.Tensor"] * 2  # DSpark's two calls
    assert dev.sync_counts["slot_expansion"] == 2
    assert torch.equal(quiet.positions, loud.positions) and torch.equal(quiet.attn.out_loc, loud.attn.out_loc)
    assert quiet.positions.tolist() == list(range(5)) + list(range(7))
    r.inject(loud, ext.tokens)


# ---------------------------------------------------------------------------- pools
def test_pool_reserve_free_and_exhaustion() -> None:
    dev, _, r = make(max_reqs=2, max_context=16)
    pool = r.pool
    assert pool.num_free_slots == 2 * 16
    a, b = r.add_request(), r.add_request()
    assert {a, b} == {1, 2}
    with pytest.raises(PoolExhausted, match="row"):
        r.add_request()
    pool.reserve([a, b], [5, 3])
    pool.reserve([a], [4])  # already reserved that far: no-op
    assert pool.num_free_slots == 32 - 8 and pool.reserved[a] == 5
    slots_a = pool.req_to_token[a, :5].tolist()
    slots_b = pool.req_to_token[b, :3].tolist()
    assert len(set(slots_a + slots_b)) == 8 and 0 not in slots_a + slots_b
    assert pool.width == 64  # max_context 16 rounded up to CTX_ALIGN for the attention gather
    assert pool.req_to_token[a, 5:].tolist() == [0] * 59
    with pytest.raises(ValueError, match="max_context"):
        pool.reserve([a], [17])
    r.free_request(a)
    assert pool.num_free_slots == 29 and pool.req_to_token[a].tolist() == [0] * 64
    with pytest.raises(ValueError):
        r.free_request(a)
    small = ReqToTokenPool(2, 16, 10, 1, dev)  # 9 usable slots
    x, y = small.alloc_row(), small.alloc_row()
    small.reserve([x], [8])
    with pytest.raises(PoolExhausted, match="KV slots"):
        small.reserve([x, y], [9, 2])
    assert small.reserved[x] == 8 and small.reserved[y] == 0  # unchanged after the failure
    small.reserve([y], [1])
    assert small.num_free_slots == 0
    seq = tokens(20, 1, dev.torch_device)
    with pytest.raises(ValueError, match="tokens has"):
        r.extend([b], [3], [4], seq[:5])
    with pytest.raises(ValueError, match="extend_lens must be >= 1"):
        r.extend([b], [3], [0], seq[:0])
    assert pool.reserved[b] == 3  # nothing reserved by the rejected calls


# -------------------------------------------------------------------------- configs
def test_model_is_deterministic_per_seed_and_shapes() -> None:
    a, b, c = (LlamaProxy(TINY, seed=s) for s in (3, 3, 4))
    x = tokens(10, 0, torch.device("cpu"))
    assert torch.equal(a.forward_dense(x), b.forward_dense(x))
    assert not torch.equal(a.forward_dense(x), c.forward_dense(x))
    assert a.forward_dense(x).shape == (10, TINY.vocab_size) and a.forward_dense(x).dtype == torch.float32
    assert sum(p.numel() for p in a.parameters()) == TINY.num_params


def test_config_validation_and_presets() -> None:
    with pytest.raises(ValueError, match="divide"):
        ModelConfig(2, 64, 4, 3, 128, 256)
    with pytest.raises(ValueError, match=">= 1"):
        ModelConfig(0, 64, 4, 2, 128, 256)
    assert PRESETS["tiny"].head_dim == 16
    assert abs(PRESETS["1b"].num_params - 1.50e9) < 0.02e9  # Llama-3.2-1B shape, untied head
    assert abs(PRESETS["8b"].num_params - 8.03e9) < 0.02e9  # Llama-3.1-8B shape
    assert draft_preset("8b") == "8b-draft"
    with pytest.raises(KeyError):
        draft_preset("8b-draft")
    big = verify_cycle_cost(PRESETS["8b"], PRESETS["8b-draft"], batch=1, window=8, context=4096)
    small = verify_cycle_cost(PRESETS["1b"], PRESETS["1b-draft"], batch=1, window=8, context=4096)
    assert 3.0 < big["est_ms"] < 6.0 and small["est_ms"] < 1.5
    wide = verify_cycle_cost(PRESETS["8b"], None, batch=64, window=8, context=4096)
    assert wide["target_ms"] > 8.0 and wide["draft_ms"] == 0.0
    assert default_ctx_buckets(4100) == [256, 512, 1024, 2048, 4096, 4160]  # aligned to 64
    r = ModelRunner(LlamaProxy(TINY), Device("cpu"), max_reqs=1, max_context=100, ctx_buckets=[10, 100, 70])
    assert r.ctx_buckets == [64, 128] and r.context_bucket(65) == 128
    with pytest.raises(ValueError, match="beyond max_context"):
        r.context_bucket(129)
    with pytest.raises(ValueError, match="vocab"):
        ModelRunner(LlamaProxy(TINY), Device("cpu"), max_reqs=1, max_context=8, drafter=LlamaProxy(PRESETS["small-draft"]), spec_window=2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_step_paths_pass_cuda_sync_debug_error_mode() -> None:
    from specsched.runtime.sync_checker import cuda_sync_debug

    dev, _, r = make("cuda", window=4, drafter="tiny-draft")
    prompts = [tokens(n, 90 + n, dev.torch_device) for n in (8, 3)]
    rows = [r.add_request() for _ in prompts]
    lens = [len(p) for p in prompts]
    r.capture("spec", 2, 64, forced=True)
    with dev.use("forward"), cuda_sync_debug("error"):
        ext = r.extend(rows, [0, 0], lens, torch.cat(prompts))
        r.inject(r.prepare_inject(rows, [0, 0], lens, sync=False), ext.tokens)
        r.spec_cycle(rows)
        r.spec_cycle(rows, forced_accept=[0, 3], graph=True)
        out = r.spec_cycle(rows, graph=True)
        hc = dev.copy_to_host(out.as_dict())
        with pytest.raises(RuntimeError):
            r.prepare_inject(rows, [0, 0], lens, sync=True)
    dev.wait_copy(hc)


def test_microbench_runs_on_cpu() -> None:
    from specsched.runtime.microbench import bench, prefilled_runner

    dev = Device("cpu")
    r, rows = prefilled_runner("tiny", batch=2, context=40, window=4, device=dev)
    res = bench(r, rows, "spec", context=40, iters=3, warmup=1, preset="tiny")
    assert res.gpu_ms > 0 and res.wall_ms > 0 and res.window == 4 and res.batch == 2
    assert r.read_seq_lens(rows) == [43, 43]  # forced accept 2 -> 3 tokens from context 40
    d = bench(r, rows, "decode", context=40, iters=2, warmup=1, graph=False)
    assert d.window == 1 and d.as_dict()["kind"] == "decode"


def test_eager_forwards_pick_planless_sdpa_on_cuda_graph_bodies_the_default(monkeypatch):
    """On a CUDA build an eager forward (extend, injection, decode above the graph limit)
    restricts SDPA to kernels without a per-shape plan (cuDNN built one per new extend shape:
    50-90 ms each on an H200); a captured graph's body keeps the default choice, so its
    plan is built once at capture. CPU and ROCm builds keep the default everywhere."""
    from contextlib import nullcontext

    from specsched.runtime.layers import PLANLESS_SDPA, attention_backends, graphed_attention
    from torch.nn.attention import SDPBackend

    assert isinstance(attention_backends(torch.device("cpu")), nullcontext)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert SDPBackend.CUDNN_ATTENTION not in PLANLESS_SDPA
    ctx = attention_backends(torch.device("cuda"))
    assert not isinstance(ctx, nullcontext)
    with graphed_attention():
        assert isinstance(attention_backends(torch.device("cuda")), nullcontext)
    assert not isinstance(attention_backends(torch.device("cuda")), nullcontext)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert isinstance(attention_backends(torch.device("cuda")), nullcontext)
