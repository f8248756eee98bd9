"""specsched.runtime.prefill_graph: SGLang's prefill token buckets, the bucket choice with its
padding limit, the piece split, and the piecewise extend/inject giving what the eager
forwards give (CPU: the pieces run through the same GraphCache calls, without capture)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime.device import Device  # noqa: E402
from specsched.runtime.model import PRESETS, LlamaProxy, ModelConfig, ModelRunner  # noqa: E402
from specsched.runtime.prefill_graph import (  # noqa: E402
    PiecewiseExtend,
    pick_token_bucket,
    prefill_token_buckets,
)

# the piecewise path on CPU runs its pieces eagerly; on a GPU, when visible, it captures them
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
THREE = ModelConfig(3, 64, 4, 2, 128, 256, name="three")
BUCKETS = [4, 8, 12, 16, 32, 48, 64]


def test_buckets_are_sglang_0_5_23_list() -> None:
    b = prefill_token_buckets(16384)
    assert b[:8] == [4, 8, 12, 16, 20, 24, 28, 32]
    assert b[8:10] == [48, 64] and 256 in b and 272 not in b and 288 in b and 544 not in b
    assert 1024 in b and 1088 not in b and 1280 in b and 4096 in b and 4352 not in b and 4608 in b
    assert b[-1] == 16384 and b == sorted(b)
    assert prefill_token_buckets(3) == [] and prefill_token_buckets(100)[-1] == 96


# the bucket rule itself is the simulator's (tests/test_prefill_graph_cost.py test_bucket_invariants,
# test_the_runtime_picks_the_same_bucket); here only what the runtime adds
def test_pick_bucket_rejects_empty_extend() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        pick_token_bucket(0, [4])


def runners(cfg: ModelConfig, buckets: list[int], device: str = "cpu") -> tuple[ModelRunner, ModelRunner]:
    """Two runners with the same weights and drafter: eager, and piecewise at ``buckets``."""
    out = []
    for pw in (None, buckets):
        dev = Device(device, dtype=torch.float32)
        target = LlamaProxy(cfg, seed=3, device=dev.torch_device)
        drafter = LlamaProxy(PRESETS["tiny-draft"], seed=4, device=dev.torch_device)
        out.append(ModelRunner(target, dev, max_reqs=6, max_context=160, drafter=drafter, spec_window=3,
                               prefill_graph_tokens=pw))
    return out[0], out[1]


def test_piece_split_is_layers_plus_one_with_attention_between() -> None:
    _, pw = runners(THREE, BUCKETS)
    ext = pw.piecewise["extend"]
    assert len(ext.pieces(8)) == THREE.num_layers + 1
    assert len(pw.piecewise["inject"].pieces(8)) == PRESETS["tiny-draft"].num_layers + 1
    calls: list[int] = []
    key = ext.capture(8)
    pw.device.graphs.replay_pieces(key, calls.append)
    assert calls == list(range(THREE.num_layers))
    with pytest.raises(ValueError, match="not a prefill graph bucket"):
        ext.capture(9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cfg", [PRESETS["tiny"], THREE])
def test_piecewise_extend_and_inject_match_eager(cfg: ModelConfig, device: str) -> None:
    eager, pw = runners(cfg, BUCKETS, device)
    g = torch.Generator().manual_seed(7)
    # chunk 1 (ragged, no prefix; 29 tokens -> bucket 32), chunk 2 (with prefixes; 9 ->
    # 12), one token (bucket 4 > 2 x 1: eager), 70 tokens (above every bucket: eager)
    plan = [([0, 0, 0], [10, 12, 7]), ([10, 12, 7], [4, 3, 2]), ([14, 15, 9], [1, 0, 0]), ([15, 15, 9], [30, 25, 15])]
    rows_e = [eager.add_request() for _ in range(3)]
    rows_p = [pw.add_request() for _ in range(3)]
    assert [pw.prefill_bucket(sum(e)) for _, e in plan if sum(e) > 0] == [32, 12, None, None]
    for pre, ext in plan:
        keep = [i for i, e in enumerate(ext) if e > 0]
        p_, e_ = [pre[i] for i in keep], [ext[i] for i in keep]
        toks = torch.randint(0, cfg.vocab_size - 1, (sum(e_),), generator=g).to(eager.device.torch_device)
        outs = []
        for r, rows in ((eager, rows_e), (pw, rows_p)):
            rs = [rows[i] for i in keep]
            o = r.extend(rs, p_, e_, toks, return_logits=True)
            r.inject(r.prepare_inject(rs, p_, e_, sync=False), o.tokens)
            outs.append(o)
        assert torch.allclose(outs[0].logits, outs[1].logits, atol=1e-3, rtol=1e-3)
        assert outs[0].next_tokens.tolist() == outs[1].next_tokens.tolist()
    assert torch.allclose(eager.kv.k, pw.kv.k, atol=1e-5) and torch.allclose(eager.kv.v, pw.kv.v, atol=1e-5)
    assert torch.allclose(eager.draft_kv.k, pw.draft_kv.k, atol=1e-5)
    replays = pw.device.graphs.replays
    assert replays[("extend", cfg.name, 32)] == 1 and replays[("extend", cfg.name, 12)] == 1
    assert replays[("inject", "tiny-draft", 32)] == 1 and sum(replays.values()) == 4
    for _ in range(3):  # and the speculative cycles afterwards stay identical
        a, b = eager.spec_cycle(rows_e, [1, 1, 1]), pw.spec_cycle(rows_p, [1, 1, 1])
        assert a.tokens.tolist() == b.tokens.tolist()


def test_capture_prefill_up_to_max_tokens() -> None:
    _, pw = runners(PRESETS["tiny"], BUCKETS)
    assert pw.capture_prefill(20) == 4  # 4, 8, 12, 16
    keys = pw.device.graphs.keys()
    assert ("extend", "tiny", 16) in keys and ("inject", "tiny-draft", 16) in keys
    assert ("extend", "tiny", 32) not in keys


def test_no_buckets_refused() -> None:
    dev = Device("cpu", dtype=torch.float32)
    m = LlamaProxy(PRESETS["tiny"], seed=0)
    with pytest.raises(ValueError, match="non-empty"):
        PiecewiseExtend(m, ModelRunner(m, dev, max_reqs=1, max_context=8).kv, dev, [], "extend")
