"""DeepSeek sparse attention (DSA: DeepSeek-V3.2's top-k MLA and lightning indexer) in the
analytic roofline: sim/analytic/models.py reads index_topk / index_n_heads / index_head_dim,
roofline.py prices the attention over min(context, index_topk) entries plus the indexer's
linear term, and the KV pool's cell holds the indexer's keys (SGLang 0.5.23
model_executor/pool_configurator.py ``_compute_dsa_indexer_cell_size``)."""

from __future__ import annotations

import pytest
from specsched.sim.analytic import roofline as r
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import from_hf_config, load_model, shipped_models
from specsched.sim.analytic.writer import build_profile
from specsched.sim.errors import ConfigError

H200 = load_gpu("H200")
EFF = r.gpu_efficiency(H200)
FP8 = r.Parallel(8, "fp8")
V3_CFG = shipped_models()["deepseek-v3"]
DSA_CFG = {**V3_CFG, "architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048, "index_n_heads": 64,
           "index_head_dim": 128}
V32 = from_hf_config(DSA_CFG, "dsv32", "dsv32.json")
V3 = load_model("deepseek-v3")
TOPK = 2048


def _indexer(arch, tokens, requests, keys, kv_read, decode=True):
    bw = H200.hbm_tbps * 1e12 * EFF.hbm
    return r.indexer_s(arch, H200, EFF, tokens=tokens, requests=requests, keys=keys, kv_read=kv_read,
                       decode=decode, kv_bw=bw)


def test_the_indexer_fields_are_read_from_a_dsa_config_and_the_shipped_v32_carries_them():
    assert (V32.index_topk, V32.index_n_heads, V32.index_head_dim, V32.indexer_layers) == (2048, 64, 128, 61)
    assert V3.index_topk is None and not V3.sparse_attention and V3.indexer_layers == 0
    shipped = load_model("deepseek-v3.2")
    assert shipped.dsa and (shipped.index_topk, shipped.index_n_heads, shipped.index_head_dim) == (2048, 64, 128)
    # a non-DSA architecture with the keys is not priced as DSA (configs/model_config.py is_deepseek_dsa)
    assert from_hf_config({**DSA_CFG, "architectures": ["Qwen3ForCausalLM"]}, "x", "x.json").index_topk is None
    # SGLang reads config.index_head_dim with no default: refused, naming the key
    with pytest.raises(ConfigError, match="index_head_dim"):
        from_hf_config({k: v for k, v in DSA_CFG.items() if k != "index_head_dim"}, "x", "x.json")
    # dsa_layer_skips_topk: index_topk_freq 2 reuses the top-k on layers 2, 4, ... (max(i - 1, 0) % 2)
    freq = from_hf_config({**DSA_CFG, "index_topk_freq": 2}, "x", "x.json")
    assert freq.index_shared_layers == 30 and freq.indexer_layers == 31
    shared = from_hf_config({**DSA_CFG, "indexer_types": ["full", "shared"] * 30 + ["full"]}, "x", "x.json")
    assert shared.index_shared_layers == 30


@pytest.mark.parametrize(("batch", "per_request"), [(32, 1), (8, 4)])
def test_decode_and_verify_attention_is_dense_below_topk_and_flat_past_it_but_for_the_indexer(batch, per_request):
    """Below index_topk the MLA reads every entry (V3's attention plus the indexer); past it
    the attention's FLOPs and KV reads stop growing and only the indexer grows, linearly."""
    def core(arch, ctx):
        c = r.decode_like(arch, H200, FP8, EFF, batch, per_request, ctx)
        return c.attention_s - _indexer(arch, batch * per_request, batch, ctx + (per_request + 1) / 2, ctx)

    for ctx in (256, 1024, TOPK - 8):
        assert core(V32, ctx) == pytest.approx(r.decode_like(V3, H200, FP8, EFF, batch, per_request, ctx).attention_s,
                                               rel=1e-9)
    flat = [core(V32, ctx) for ctx in (TOPK + 64, 8192, 65536, 131072)]
    assert max(flat) == pytest.approx(min(flat), rel=1e-9)
    idx = [_indexer(V32, batch * per_request, batch, c + (per_request + 1) / 2, c) for c in (32768, 65536, 131072)]
    assert idx[1] / idx[0] == pytest.approx(2, rel=0.01) and idx[2] / idx[1] == pytest.approx(2, rel=0.01)
    long_ = r.decode_like(V32, H200, FP8, EFF, batch, per_request, 65536).attention_s
    assert long_ < 0.3 * r.decode_like(V3, H200, FP8, EFF, batch, per_request, 65536).attention_s


def test_the_indexer_scores_every_position_with_all_its_heads_on_every_rank():
    """2 x index_n_heads x index_head_dim fp8 FLOPs per query and position, whole on every TP
    rank (a ReplicatedLinear wq_b), and 132 bytes of index key per position and layer."""
    assert r.indexer_cell_bytes(V32) == (128 + 4) * 61
    # an extend of one 8K-token request on 120K cached positions: compute-bound
    t, keys = 8192, 120_000 + 4096
    flops = 61 * t * keys * 2 * 64 * 128
    assert _indexer(V32, t, 1, keys, 120_000, decode=False) == pytest.approx(
        flops / (H200.peak_flops("fp8") * EFF.attention), rel=1e-9)
    tp1 = r.decode_like(V32, H200, r.Parallel(1, "fp8"), EFF, 32, 1, 65536)
    tp8 = r.decode_like(V32, H200, FP8, EFF, 32, 1, 65536)
    ind = _indexer(V32, 32, 32, 65536 + 1, 65536)
    assert tp1.attention_s - ind > tp8.attention_s - ind   # the MLA heads split over TP, the indexer does not
    # a plain extend whose requests fit in the top-k skips the scoring (only the new keys are written)
    assert _indexer(V32, 1024, 1, 512 + 512, 512, decode=False) == pytest.approx(
        1024 * r.indexer_cell_bytes(V32) / (H200.hbm_tbps * 1e12 * EFF.hbm))


def test_a_long_extend_attends_the_topk_and_a_short_one_stays_dense():
    """A DSA extend of requests longer than 2048 tokens runs the sparse MLA over the top-k
    (flat in prefix but for the indexer); a shorter one is V3's dense MHA (dsa_backend.py
    set_dsa_prefill_impl)."""
    short, short_v3 = r.extend(V32, H200, FP8, EFF, 1024, 512), r.extend(V3, H200, FP8, EFF, 1024, 512)
    assert short.attention_s == pytest.approx(short_v3.attention_s + _indexer(V32, 1024, 1, 512, 0, decode=False))

    def core(prefix):
        c = r.extend(V32, H200, FP8, EFF, 4096, prefix + 512, request_tokens=1024)
        n = 4
        return c.attention_s - _indexer(V32, 4096, n, prefix + 512, prefix, decode=False)

    flat = [core(p) for p in (8192, 32768, 100_000)]
    assert max(flat) == pytest.approx(min(flat), rel=1e-9)


def test_the_pool_cell_holds_the_indexer_keys_and_the_latent_reads_do_not():
    latent = (512 + 64) * 61 * 2
    assert r.kv_cell_bytes(V32, 8) == latent
    assert r.kv_pool_cell_bytes(V32, 8) == (latent + 132 * 61, 0.0)
    p = build_profile(V32, H200, 8)
    assert p["hardware"]["kv_cell_bytes"] == latent + 132 * 61
    assert "_compute_dsa_indexer_cell_size" in p["provenance"]["hardware.kv_cell_bytes"]
    assert "index_topk 2048" in p["provenance"]["dsa.attention"] and "ReplicatedLinear" in p["provenance"]["dsa.indexer"]
    assert p["analytic"]["model"]["index_topk"] == 2048
    # shared-top-k layers keep no index keys (_should_elide_dsa_index_k)
    freq = from_hf_config({**DSA_CFG, "index_topk_freq": 2}, "x", "x.json")
    assert r.kv_pool_cell_bytes(freq, 8)[0] == latent + 132 * 31
    # an MTP (chain) drafter: its latent share plus its own indexer keys (pool_configurator.py DSA branch)
    chain = build_profile(V32, H200, 8, drafter="chain", draft_layers=1)
    assert chain["hardware"]["draft_kv_cell_bytes"] == int(latent / 61) + 132


def test_a_v3_config_without_index_topk_is_priced_as_before():
    """No index_topk: no DSA fields in the profile, the same profile whatever other index keys
    say (SGLang's is_deepseek_dsa needs index_topk)."""
    plain = build_profile(V3, H200, 8)
    assert not {"index_topk", "index_n_heads", "index_head_dim", "index_shared_layers"} & set(plain["analytic"]["model"])
    assert not any(k.startswith("dsa.") for k in plain["provenance"])
    keys_only = from_hf_config({**V3_CFG, "index_n_heads": 64, "index_head_dim": 128}, "deepseek-v3", V3.source)
    assert build_profile(keys_only, H200, 8, name="x") == build_profile(V3, H200, 8, name="x")
    assert plain["hardware"]["kv_cell_bytes"] == (512 + 64) * 61 * 2
