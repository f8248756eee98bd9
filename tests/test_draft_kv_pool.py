"""The drafter's KV in the pool of an analytic profile (``--draft-layers`` drafters).

SGLang 0.5.23 sizes the KV pool of a speculating server for the target's KV plus the
drafter's, per token (model_executor/pool_configurator.py ``DefaultPoolConfigurator.__init__``:
EAGLE/STANDALONE add ``int(cell x draft_layers / layers)``, the DFLASH family the draft's own
cell from speculative/dflash_utils.py ``dflash_draft_cell_size_per_token``;
``HybridSWAPoolConfigurator`` adds the draft's layers as full layers). Before, a profile
made with ``--draft-layers N`` (EAGLE/MTP heads, DSpark/DFlash blocks) left the drafter's KV
out: the pool held up to 1/L x N too many tokens. The drafter's KV counts only when the
scenario speculates, as in SGLang (the branches are taken only for those algorithms).
"""

from __future__ import annotations

import pytest
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile
from specsched.sim.config import ServerArgs
from specsched.sim.defaults import resolve_server
from specsched.sim.hardware import Hardware


def _pool(hw: Hardware, algo: str) -> int:
    server, _ = resolve_server(ServerArgs(speculative_algorithm=algo), hw, set())
    return server.max_total_num_tokens


@pytest.mark.parametrize("model, tp, drafter, layers, per_layer", [
    ("llama-3.1-8b", 1, "chain", 1, 8 * 256 * 2),        # an EAGLE head: 8 KV heads x (128 + 128) x bf16
    ("llama-3.1-8b", 1, "block", 2, 8 * 256 * 2),        # a 2-layer DFlash block drafter
    ("deepseek-v3", 8, "chain", 1, (512 + 64) * 2),      # the MTP layer: the MLA latent, replicated
    ("gpt-oss-20b", 1, "chain", 1, 8 * 128 * 2),         # hybrid SWA: the head's layer is a full layer
])
def test_the_drafters_kv_is_counted_in_a_speculating_servers_pool(model, tp, drafter, layers, per_layer):
    d = build_profile(load_model(model), load_gpu("H200"), tp, window=4, drafter=drafter, draft_layers=layers)
    hw = Hardware.model_validate(d["hardware"])
    assert hw.draft_kv_cell_bytes == per_layer * layers
    assert "pool_configurator.py" in d["provenance"]["hardware.draft_kv_cell_bytes"]
    algo = "eagle" if drafter == "chain" else "dflash"
    spec, target_only = _pool(hw, algo), _pool(hw.model_copy(update={"draft_kv_cell_bytes": None}), algo)
    # the speculating server gives each token the drafter's bytes too; a plain one keeps the target's pool
    cell = hw.kv_cell_bytes + (0.8 * hw.swa_kv_cell_bytes if hw.swa_kv_cell_bytes else 0)
    assert spec == pytest.approx(target_only * cell / (cell + per_layer * layers), rel=2e-3)
    assert spec < target_only and _pool(hw, "none") > spec


def test_more_draft_layers_leave_fewer_tokens():
    pools, cells = [], []
    for n in (1, 2, 4):
        d = build_profile(load_model("qwen3-30b-a3b"), load_gpu("H100"), 1, window=4, drafter="chain", draft_layers=n)
        hw = Hardware.model_validate(d["hardware"])
        pools.append(_pool(hw, "eagle"))
        cells.append(hw.draft_kv_cell_bytes)
    assert pools[0] > pools[1] > pools[2]
    assert cells == [int(98304 * n / 48) for n in (1, 2, 4)]   # 48 layers x 4 KV heads x 256 x bf16


def test_a_draft_models_kv_also_counts_only_when_speculating():
    """``--draft-model``'s KV (STANDALONE: the target's per-layer cell x the draft model's
    layers) was folded into kv_cell_bytes, so even a run without speculation on that profile
    lost it; it is the drafter's KV now, counted like the others."""
    tgt, drf = load_model("qwen3-30b-a3b"), load_model("qwen3-0.6b")
    d = build_profile(tgt, load_gpu("H100"), 1, window=4, drafter="chain", draft_model=drf)
    hw = Hardware.model_validate(d["hardware"])
    plain = build_profile(tgt, load_gpu("H100"), 1, window=4, drafter="chain")["hardware"]["kv_cell_bytes"]
    assert hw.kv_cell_bytes == plain
    assert hw.draft_kv_cell_bytes == int(plain * drf.num_layers / tgt.num_layers)
    assert _pool(hw, "standalone") < _pool(hw, "none")
