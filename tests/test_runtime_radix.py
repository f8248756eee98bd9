"""The runtime shares a cached prefix's KV between requests as SGLang's radix cache does
(runtime/radix_slots.py, runtime/kv_cache.py ``ReqToTokenPool.attach`` / ``to_tree`` /
``free_tree``): with the radix cache on and prompts that share prefixes, both engines make the
same plans (prefix lengths included) and report the same cache hit rate; the device pool holds
exactly the ledger's slots, tree included, and every slot has one holder (INV-POOL); a prefix
read from the cache gives the tokens the whole prompt alone gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.runtime.radix_slots import TreeSlots  # noqa: E402
from specsched.sim.config import Scenario  # noqa: E402
from specsched.sim.engine import SimEngine  # noqa: E402
from specsched.sim.radix_cache import RadixCache  # noqa: E402
from specsched.sim.scheduler import Scheduler  # noqa: E402

from tests.conftest import tiny_profile  # noqa: E402

SHARED = {"kind": "burst", "output_len": {"kind": "fixed", "value": 8},
          "shared_prefix": {"num_groups": 2, "prompts_per_group": 4, "system_prompt_len": 48, "question_len": 16}}
SERVER = {"max_running_requests": 3, "chunked_prefill_size": 64, "max_prefill_tokens": 96,
          "max_total_num_tokens": 5000}


PLAN_COLS = ["mode", "part", "batch_size", "num_extend_tokens", "accepted_tokens", "decoding_reqs"]


def _plans(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every plan with extends a Scheduler builds from now on, as (rids, extend lens, prefix
    lens) of its extends (the simulator runs stretches of decode passes without building
    their plans one by one: sim/decode_run.py)."""
    seen: list = []
    orig = Scheduler.schedule

    def recording(self):
        plan = orig(self)
        if plan is not None and plan.num_extend:
            n = plan.num_extend
            seen.append((list(plan.rids[:n]), list(plan.extend_lens[:n]), list(plan.prefix_lens[:n])))
        return plan

    monkeypatch.setattr(Scheduler, "schedule", recording)
    return seen


def _evictions(monkeypatch: pytest.MonkeyPatch) -> list:
    seen: list = []
    orig = RadixCache.evict

    def counting(self, n):
        out = orig(self, n)
        seen.append(out)
        return out

    monkeypatch.setattr(RadixCache, "evict", counting)
    return seen


def _check_pool(eng: RuntimeEngine) -> None:
    """INV-POOL at the end of a run: the rows still held (their requests finished after the
    last forward) own what they map past the tree's prefix."""
    pool = eng.runner.pool
    own = sum(pool.reserved[row] - pool.shared[row] for row in eng.rows.values())
    assert pool.num_free_slots + own + pool.tree_slots == pool.num_slots
    assert pool.tree_slots == len(eng.tree_slots) == eng.sched.kv.tree


def _checked(monkeypatch: pytest.MonkeyPatch, eng: RuntimeEngine) -> list:
    """Check, after every _sync_kv, that each row owns the ledger's slots, the tree holds the
    ledger's ``tree`` and free + rows' own + tree = the pool (each slot once)."""
    pool, sync, seen = eng.runner.pool, eng._sync_kv, []

    def checked(plan):
        sync(plan)
        own = {rid: pool.reserved[row] - pool.shared[row] for rid, row in eng.rows.items()}
        ledger = {rid: eng.sched.reqs[rid].kv_allocated for rid in eng.rows}
        assert own == ledger
        assert {rid: pool.shared[row] for rid, row in eng.rows.items()} == \
            {rid: eng.sched.reqs[rid].cache_protected_len for rid in eng.rows}
        assert pool.tree_slots == eng.sched.kv.tree == len(eng.tree_slots)
        assert pool.num_free_slots + sum(own.values()) + pool.tree_slots == pool.num_slots
        assert pool.free_slots.numel() == pool.num_free_slots
        held = torch.cat([pool.free_slots] + [pool.req_to_token[row, pool.shared[row]:pool.reserved[row]]
                                              for row in eng.rows.values()]
                         + list(eng.tree_slots._values.values()))
        assert sorted(held.tolist()) == list(range(1, pool.num_slots + 1))   # each slot exactly once
        seen.append(sum(own.values()) + pool.tree_slots)

    monkeypatch.setattr(eng, "_sync_kv", checked)
    return seen


SPEC = {"dspark": {"speculative_algorithm": "dspark", "speculative_num_draft_tokens": 4},
        "eagle-tree": {"speculative_algorithm": "eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 2,
                       "speculative_num_draft_tokens": 6}}


def _both(monkeypatch, server=None, workload=None, spec="dspark"):
    srv = {**SERVER, **(server or {})}
    if spec:
        srv.update(SPEC[spec])
    sc = Scenario.model_validate({"name": "t", "profile": "tiny", "seed": 1, "server": srv,
                                  "workload": {**SHARED, **(workload or {})},
                                  "acceptance": {"mean_accept_length": 2.2, "request_spread": 0.3}})
    plans = _plans(monkeypatch)
    evictions = _evictions(monkeypatch)
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    held = _checked(monkeypatch, eng)
    measured = eng.run()
    n_measured, ev_measured = len(plans), list(evictions)
    simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
    assert plans[:n_measured] == plans[n_measured:]
    assert measured.steps[PLAN_COLS].reset_index(drop=True).equals(simulated.steps[PLAN_COLS].reset_index(drop=True))
    assert ev_measured == evictions[len(ev_measured):]
    assert measured.summary["cache_hit_rate"] == simulated.summary["cache_hit_rate"] > 0
    assert measured.summary["completed"] == simulated.summary["completed"] == sc.workload.num_requests
    assert held and max(held) <= sc.server.max_total_num_tokens
    assert any(p > 0 for _, _, prefix in plans[:n_measured] for p in prefix)
    _check_pool(eng)
    return eng, measured, simulated, ev_measured


@pytest.mark.parametrize("spec", [None, "dspark", "eagle-tree"])
def test_shared_prefixes_run_with_the_same_plans_as_the_simulator(monkeypatch, spec):
    _both(monkeypatch, spec=spec)


@pytest.mark.parametrize("mixed", [False, True])
def test_prompts_longer_than_a_chunk_cache_chunk_by_chunk(monkeypatch, mixed):
    # 100 + 24 token prompts in 48-token chunks: each chunk enters the tree before the next
    # (the scheduler's _checkpoint), later requests match part of a chunked prompt; mixed
    # chunks carry the running decodes
    _both(monkeypatch, {"chunked_prefill_size": 48, "max_prefill_tokens": 48, "enable_mixed_chunk": mixed},
          {"shared_prefix": {"num_groups": 2, "prompts_per_group": 3, "system_prompt_len": 100, "question_len": 24}})


def test_a_pool_that_evicts_cached_prefixes(monkeypatch):
    # 4 groups of 3 prompts (48 shared + 16 own tokens), 3 at a time: the cached prompts
    # (4 x 48 + 12 x 16 = 384 tokens) outgrow a pool of 200
    _, measured, _, evictions = _both(
        monkeypatch, {"max_total_num_tokens": 200},
        {"shared_prefix": {"num_groups": 4, "prompts_per_group": 3, "system_prompt_len": 48, "question_len": 16}},
        spec=None)
    assert sum(evictions) > 0


def test_a_pool_that_retracts_with_shared_prefixes(monkeypatch):
    # long outputs that may stop early (admission over-commits as new_token_ratio decays) in a
    # small pool: a running request outgrows it, is retracted, and re-prefills over the
    # prompt it cached
    plans = _plans(monkeypatch)
    _, measured, simulated, _ = _both(
        monkeypatch, {"max_total_num_tokens": 320, "max_running_requests": 4, "admission_delay": "none"},
        {"ignore_eos": False, "output_len": {"kind": "fixed", "value": 96},
         "shared_prefix": {"num_groups": 2, "prompts_per_group": 4, "system_prompt_len": 32, "question_len": 8}})
    assert measured.summary["num_retractions"] == simulated.summary["num_retractions"] >= 1
    starts = [(rid, p) for rids, _, prefix in plans[:len(plans) // 2] for rid, p in zip(rids, prefix, strict=True)]
    again = [(rid, p) for i, (rid, p) in enumerate(starts) if any(r == rid for r, _ in starts[:i]) and p >= 40]
    assert again   # a re-prefill after a retraction found its whole prompt cached


def test_a_second_pass_starts_from_an_empty_pool(monkeypatch):
    eng, first, _, _ = _both(monkeypatch, spec=None)
    again = eng.run()
    assert again.summary["cache_hit_rate"] == first.summary["cache_hit_rate"]
    _check_pool(eng)


def test_a_prefix_from_the_cache_gives_the_tokens_of_the_whole_prompt_alone():
    """KV content, not only counts: B's first 40 positions are read from slots A wrote (the
    tree's, after A inserted its prompt), C prefills whole and hands its copies of the shared
    prefix back as duplicates (its row then points at the tree's); both decode greedily the
    same tokens as their prompt run alone on a fresh model."""
    from tests.test_runtime_model import make, tokens

    dev, _, r = make("cpu", max_reqs=4)
    pool = r.pool
    shared = tokens(40, 7, dev.torch_device)
    prompts = {k: torch.cat([shared, tokens(8, seed, dev.torch_device)]) for k, seed in (("a", 1), ("b", 2), ("c", 3))}
    rows = {k: r.add_request() for k in prompts}
    cache = RadixCache()
    cache.values = slots = TreeSlots(pool, rows.__getitem__)
    # A prefills whole and caches its prompt
    r.extend([rows["a"]], [0], [48], prompts["a"])
    _, node_a = cache.insert_from(prompts["a"].tolist(), owner="a")
    cache.inc_lock_ref(node_a)
    assert pool.shared[rows["a"]] == 48 and pool.tree_slots == 48
    # B matches 40 tokens (a split of A's node) and extends only its own 8
    n, node = cache.match_prefix(prompts["b"][:47].tolist())
    assert n == 40
    pool.attach(rows["b"], slots.prefix(node), n)
    r.extend([rows["b"]], [40], [8], prompts["b"][40:])
    # C prefills all 48 tokens, then caches: its first 40 are duplicates
    r.extend([rows["c"]], [0], [48], prompts["c"])
    free = pool.num_free_slots
    present, _ = cache.insert_from(prompts["c"].tolist(), owner="c")
    assert present == 40 and pool.num_free_slots == free + 40 and pool.shared[rows["c"]] == 48
    assert torch.equal(pool.req_to_token[rows["c"], :40], pool.req_to_token[rows["a"], :40])
    _decodes_as_alone_then_frees_every_slot(r, rows, prompts, ("b", "c"), cache, node_a, slots)


def _decodes_as_alone_then_frees_every_slot(r, rows, prompts, keys, cache, locked, slots) -> None:
    """The rows ``keys`` decode greedily the tokens their prompts alone give (5 steps after
    the extend's first token); then every row goes, the ``locked`` node is let go and every
    cached token evicted: each slot is back on the free list once."""
    from tests.test_runtime_model import greedy_reference

    pool = r.pool
    out = {k: [pool.last_token[rows[k]].item()] for k in keys}
    for _ in range(5):
        toks = r.decode([rows[k] for k in keys]).tokens[:, 0].tolist()
        for k, t in zip(keys, toks, strict=True):
            out[k].append(t)
    for k in keys:
        assert out[k] == greedy_reference("cpu", [prompts[k]], 6)[0], k
    for row in rows.values():
        r.free_request(row)
    cache.dec_lock_ref(locked)
    cache.evict(10**6)
    assert pool.tree_slots == 0 and len(slots) == 0
    assert sorted(pool.free_slots.tolist()) == list(range(1, pool.num_slots + 1))


def recorded_extends(eng: RuntimeEngine) -> list:
    """Record every extend ``eng`` runs from now on, as (rids, prefix lens, extend lens, the
    input ids fed) in a list that fills as the engine runs."""
    extend, seen = eng.runner.extend, []

    def recording(rows, prefix_lens, extend_lens, toks, **kw):
        by_row = {row: rid for rid, row in eng.rows.items()}
        seen.append(([by_row[row] for row in rows], list(prefix_lens), list(extend_lens), toks.tolist()))
        return extend(rows, prefix_lens, extend_lens, toks, **kw)

    eng.runner.extend = recording
    return seen


def test_each_extend_feeds_its_prompt_ids_at_their_positions():
    """The KV a later request reads from the tree is that of the tokens the tree matched:
    every extend's input ids are the request's prompt ids (mod the vocabulary) at positions
    prefix .. prefix + extend - 1."""
    sc = Scenario.model_validate({"name": "t", "profile": "tiny", "seed": 1, "server": SERVER, "workload": SHARED,
                                  "acceptance": {"mean_accept_length": 2.2}})
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    seen = recorded_extends(eng)
    eng.run()
    vocab = eng.vocab
    for rids, prefix, ext, toks in seen:
        off = 0
        for rid, p, e in zip(rids, prefix, ext, strict=True):
            prompt = [int(t) % vocab for t in eng.sched.reqs[rid].tokens]
            assert toks[off:off + e] == prompt[p:p + e]
            off += e
    assert any(p for _, prefix, _, _ in seen for p in prefix)


OPS = st.lists(st.one_of(
    st.tuples(st.just("admit"), st.integers(0, 2), st.integers(1, 12)),
    st.tuples(st.just("cache"), st.integers(0, 7)),
    st.tuples(st.just("finish"), st.integers(0, 7)),
    st.tuples(st.just("evict"), st.integers(1, 40)),
), min_size=15, max_size=40)


@pytest.mark.parametrize("page", [1, 4])
@settings(max_examples=100, deadline=None)
@given(OPS)
def test_every_slot_has_one_holder_through_matches_inserts_splits_and_evictions(page, ops):
    """INV-POOL over any order of admissions (match, lock, map the tree's prefix, reserve the
    rest), prompts entering the tree, finishes and evictions: each slot is free, owned by
    one row, or held by one tree node; the tree holds one slot per cached token, and a row's
    shared positions are the slots of its locked path. With KV pages as well."""
    from specsched.runtime.device import Device
    from specsched.runtime.kv_cache import ReqToTokenPool

    pool = ReqToTokenPool(max_reqs=4, max_context=64, num_slots=121, window=1, device=Device("cpu"))
    live: dict[int, dict] = {}
    cache = RadixCache(page_size=page)   # page > 1: whole pages in the tree, a row keeps its partial page
    cache.values = slots = TreeSlots(pool, lambda k: live[k]["row"])
    bases = [list(range(100, 120)), list(range(100, 110)) + list(range(200, 210)), list(range(300, 316))]
    made = 0
    for op in ops:
        if op[0] == "admit" and pool.num_free_rows:
            toks = bases[op[1]] + [1000 + made * 16 + j for j in range(op[2])]
            n, node = cache.match_prefix(toks[:-1])
            if n:
                cache.inc_lock_ref(node)
            short = len(toks) - n - pool.num_free_slots
            if short > 0:
                cache.evict(short)
            if len(toks) - n > pool.num_free_slots:
                if n:
                    cache.dec_lock_ref(node)
                continue
            row = pool.alloc_row()
            pool.attach(row, slots.prefix(node), n)
            pool.reserve([row], [len(toks)])
            live[made] = {"row": row, "toks": toks, "lock": node if n else None}
            made += 1
        elif op[0] == "cache" and live:
            k = sorted(live)[op[1] % len(live)]
            req = live[k]
            _, node = cache.insert_from(req["toks"], req["lock"], pool.shared[req["row"]], owner=k)
            cache.move_lock(req["lock"], node)
            req["lock"] = node
        elif op[0] == "finish" and live:
            req = live.pop(sorted(live)[op[1] % len(live)])
            pool.free_row(req["row"])
            if req["lock"] is not None:
                cache.dec_lock_ref(req["lock"])
        elif op[0] == "evict":
            cache.evict(op[1])
        own = [pool.req_to_token[q["row"], pool.shared[q["row"]]:pool.reserved[q["row"]]] for q in live.values()]
        held = torch.cat([pool.free_slots, *own, *slots._values.values()])
        assert sorted(held.tolist()) == list(range(1, pool.num_slots + 1))
        assert pool.tree_slots == len(slots) == cache.total_size
        assert pool.num_free_slots + sum(o.numel() for o in own) + pool.tree_slots == pool.num_slots
        for q in live.values():
            s = pool.shared[q["row"]]
            path = slots.prefix(q["lock"]) if q["lock"] is not None else torch.zeros(0, dtype=torch.int64)
            assert path.numel() == s and torch.equal(pool.req_to_token[q["row"], :s], path)




# KV pages (server.page_size > 1): the tree keeps whole pages only (sim/radix_cache.py
# ``_aligned``) and a request keeps its partial last page in its own slots past
# ``cache_protected_len`` (the scheduler's ``_checkpoint``); the device pool does the same.
PAGED = pytest.mark.parametrize("page", [4, 16])


@PAGED
@pytest.mark.parametrize("spec", [None, "dspark", "eagle-tree"])
def test_kv_pages_share_whole_pages_with_the_same_plans_as_the_simulator(monkeypatch, page, spec):
    # 48 + 16 token prompts, inserted at 64 (page-aligned): with page 16 the shared part ends
    # on a page boundary, with 4 too; the extends start at a page boundary
    eng, _, _, _ = _both(monkeypatch, {"page_size": page}, spec=spec)
    assert eng.sched.cache.page_size == page


@PAGED
@pytest.mark.parametrize("spec", [None, "dspark", "eagle-tree"])
def test_kv_pages_keep_a_partial_last_page_with_the_request(monkeypatch, page, spec):
    # 50 + 15 token prompts: the shared 50 tokens end inside a page, a prompt of 65 inside
    # another; the tree keeps 48 (or 64), each row keeps its partial last page; the pool
    # outgrows its cached prompts and evicts
    _, _, _, evictions = _both(
        monkeypatch, {"max_total_num_tokens": 200 if spec is None else 300, "page_size": page},
        {"shared_prefix": {"num_groups": 4, "prompts_per_group": 3, "system_prompt_len": 50, "question_len": 15}},
        spec=spec)
    assert sum(evictions) > 0


@PAGED
@pytest.mark.parametrize("mixed", [False, True])
def test_kv_pages_cache_a_long_prompt_chunk_by_chunk(monkeypatch, page, mixed):
    _both(monkeypatch, {"chunked_prefill_size": 48, "max_prefill_tokens": 48, "enable_mixed_chunk": mixed,
                        "page_size": page},
          {"shared_prefix": {"num_groups": 2, "prompts_per_group": 3, "system_prompt_len": 100, "question_len": 24}})


@pytest.mark.parametrize("page, pool", [(4, 380), (16, 400)])
def test_kv_pages_retract_and_re_prefill_over_the_cached_pages(monkeypatch, page, pool):
    plans = _plans(monkeypatch)
    _, measured, simulated, _ = _both(
        monkeypatch, {"max_total_num_tokens": pool, "max_running_requests": 4, "admission_delay": "none",
                      "page_size": page},
        {"ignore_eos": False, "output_len": {"kind": "fixed", "value": 96},
         "shared_prefix": {"num_groups": 2, "prompts_per_group": 4, "system_prompt_len": 40, "question_len": 9}})
    assert measured.summary["num_retractions"] == simulated.summary["num_retractions"] >= 1
    starts = [(rid, p) for rids, _, prefix in plans[:len(plans) // 2] for rid, p in zip(rids, prefix, strict=True)]
    assert all(p % page == 0 for _, p in starts)
    again = [(rid, p) for i, (rid, p) in enumerate(starts) if any(r == rid for r, _ in starts[:i]) and p >= 48]
    assert again   # a re-prefill after a retraction found its prompt's whole pages cached


@pytest.mark.parametrize("page", [4, 16])
def test_a_paged_prefix_from_the_cache_gives_the_tokens_of_the_whole_prompt_alone(page):
    """With KV pages the tree holds whole pages and each row its partial last page: A's 50-token
    prompt enters the tree as its first 48 positions (A keeps 48, 49); B shares 40 tokens with A,
    matches 32 or 40 (whole pages) and extends the rest; C prefills whole, hands its copies of
    the shared pages back as duplicates and its own whole pages to a new leaf, keeping its
    partial page. Each decodes greedily the tokens its prompt alone gives."""
    from tests.test_runtime_model import make, tokens

    dev, _, r = make("cpu", max_reqs=4)
    pool = r.pool
    shared = tokens(40, 7, dev.torch_device)
    prompts = {k: torch.cat([shared, tokens(10, seed, dev.torch_device)]) for k, seed in (("a", 1), ("b", 2), ("c", 3))}
    rows = {k: r.add_request() for k in prompts}
    cache = RadixCache(page_size=page)
    cache.values = slots = TreeSlots(pool, rows.__getitem__)
    r.extend([rows["a"]], [0], [50], prompts["a"])
    _, node_a = cache.insert_from(prompts["a"].tolist(), owner="a")
    cache.inc_lock_ref(node_a)
    assert pool.shared[rows["a"]] == 48 == pool.tree_slots and pool.reserved[rows["a"]] == 50
    n, node = cache.match_prefix(prompts["b"][:49].tolist())
    assert n == 40 // page * page
    pool.attach(rows["b"], slots.prefix(node), n)
    pool.reserve([rows["b"]], [50])
    r.extend([rows["b"]], [n], [50 - n], prompts["b"][n:])
    r.extend([rows["c"]], [0], [50], prompts["c"])
    free = pool.num_free_slots
    present, _ = cache.insert_from(prompts["c"].tolist(), owner="c")
    assert present == n and pool.num_free_slots == free + n
    assert pool.shared[rows["c"]] == 48 and pool.reserved[rows["c"]] == 50
    assert torch.equal(pool.req_to_token[rows["c"], :n], pool.req_to_token[rows["a"], :n])
    assert pool.tree_slots == len(slots) == cache.total_size == 48 + 48 - n
    _decodes_as_alone_then_frees_every_slot(r, rows, prompts, tuple(prompts), cache, node_a, slots)


@pytest.mark.parametrize("spec", [None, "dspark"])
def test_a_tree_larger_than_the_rows_can_map_fits_the_device_pool(monkeypatch, spec):
    """INV-POOL with one running request and a pool far above what its rows map: the tree keeps
    every finished request's prompt (SGLang cache_finished_req), 12 groups of 3 (12 x 100 +
    36 x 40 = 2,640 tokens), more than 9 rows of one request's positions map. The device pool
    was sized to the rows (``PoolExhausted: need 1 KV slots, 0 free``) where the simulator ran
    (runtime/engine.py ``device_kv_shape``)."""
    _both(monkeypatch, {"max_running_requests": 1, "max_total_num_tokens": 8192, "chunked_prefill_size": 256,
                        "max_prefill_tokens": 256},
          {"shared_prefix": {"num_groups": 12, "prompts_per_group": 3, "system_prompt_len": 100, "question_len": 40},
           "output_len": {"kind": "fixed", "value": 50}}, spec=spec)


@pytest.mark.parametrize(("page", "spec"), [(256, "dspark"), (256, None), (512, None), (16, "eagle-tree4")])
def test_whole_pages_and_a_tree_drafters_reserve_fit_the_rows(page, spec):
    """A request holds whole pages (ceil_page of its KV) and an EAGLE tree on pages keeps
    2 x pages x topk positions past its committed KV (ServerArgs.spec_kv_reserve, SGLang
    get_alloc_len_per_decode): each row maps that many positions, and the pool covers every
    row's pages; the runtime then makes the simulator's plans. Rows sized prompt + output +
    4 windows + 64 refused them (``position 287 beyond max_context 256``; ``PoolExhausted:
    need 256 KV slots, 0 free`` for 16 requests of 80 tokens on 256-token pages)."""
    spec_args = {"dspark": SPEC["dspark"], None: {},
                 "eagle-tree4": {**SPEC["eagle-tree"], "speculative_eagle_topk": 4}}[spec]
    n = 2 if page == 512 else 16
    sc = Scenario.model_validate({
        "name": "t", "profile": "tiny", "seed": 1,
        "server": {"max_running_requests": 16, "max_total_num_tokens": 8192, "chunked_prefill_size": page,
                   "page_size": page, "cuda_graph_max_bs": 16, **spec_args},
        "workload": {"kind": "burst", "num_requests": n, "input_len": {"kind": "fixed", "value": 32},
                     "output_len": {"kind": "fixed", "value": 48}},
        "acceptance": {"mean_accept_length": 2.2, "request_spread": 0.3}})
    measured = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False).run()
    simulated = SimEngine(sc, tiny_profile(ingest_per_request_s=0.0)).run()
    assert measured.steps[PLAN_COLS].reset_index(drop=True).equals(simulated.steps[PLAN_COLS].reset_index(drop=True))
    assert measured.summary["completed"] == simulated.summary["completed"] == n
