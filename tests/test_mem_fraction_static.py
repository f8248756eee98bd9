"""``server.mem_fraction_static``: SGLang's --mem-fraction-static, the first knob for the KV pool.

SGLang 0.5.23 computes mem_fraction_static from the memory, chunked_prefill_size and the
graphs only when it is not given (arg_groups/memory_hook.py ``handle_gpu_memory_settings``);
given, the pool is that fraction of the memory less the weights, over the KV bytes per token.
Before, the key was refused as unknown: a pool what-if had to be written as a token count.
"""

from __future__ import annotations

import pytest
import yaml
from specsched.sim.analytic.gpus import load_gpu
from specsched.sim.analytic.models import load_model
from specsched.sim.analytic.writer import build_profile

from specsched.cli import main


@pytest.fixture
def scenario(tmp_path):
    prof = build_profile(load_model("llama-3.1-8b"), load_gpu("H100"), 1)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(prof))
    sc = {"name": "mfs", "profile": str(tmp_path / "p.yaml"), "server": {"speculative_algorithm": "none"},
          "workload": {"kind": "burst", "num_requests": 2, "input_len": {"kind": "fixed", "value": 64},
                       "output_len": {"kind": "fixed", "value": 4}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path, prof["hardware"]


def _pool(capsys, path, *extra):
    capsys.readouterr()
    assert main(["run", str(path), "-q", "--out", str(path.parent / "o"), *extra]) in (0, None)
    line = next(x for x in capsys.readouterr().out.splitlines() if "max_total_num_tokens =" in x)
    return int(line.split("=")[1].split()[0]), line


def test_a_given_fraction_sizes_the_pool(scenario, capsys):
    path, hw = scenario
    pre_load = (hw["memory_mib"] - 1024) * 2**20
    for f in (0.5, 0.8):
        pool, line = _pool(capsys, path, "--set", f"server.mem_fraction_static={f}")
        # no drafter is loaded without speculation (hardware.draft_weight_bytes)
        assert pool == int((pre_load * f - (hw["weight_bytes"] - hw["draft_weight_bytes"])) // hw["kv_cell_bytes"])
        assert f"mem_fraction_static {f} (given)" in line
    default, line = _pool(capsys, path)
    assert "(given)" not in line and _pool(capsys, path, "--set", "server.mem_fraction_static=0.5")[0] < default


def test_a_fraction_that_leaves_no_pool_is_one_line(scenario, capsys):
    path, _ = scenario
    assert main(["run", str(path), "-q", "--out", str(path.parent / "o"), "--set", "server.mem_fraction_static=0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server.mem_fraction_static = 0.1" in err[0] and "must be above 0.19" in err[0], err


def test_one_owner_reads_a_given_fraction_or_computes_sglangs(scenario, tmp_path):
    """sim.defaults.mem_fraction_static_of is the one place that reads "given, else SGLang's
    formula": a given fraction holds for every role (a disaggregated server's prefill and
    decode pools are then equal), an unset one is the formula on the server's own settings
    (DP attention's ranks included), and the KV pool check reads the same value."""
    from specsched.sim.config import load_scenario
    from specsched.sim.defaults import kv_pool_tokens, mem_fraction_static, mem_fraction_static_of
    from specsched.sim.hardware import Hardware
    from specsched.sim.server_args import ServerArgs

    hw = Hardware(platform="cuda", memory_mib=143771, tp_size=8)
    srv = ServerArgs(chunked_prefill_size=8192, cuda_graph_max_bs=256, dp_size=8, enable_dp_attention=True)
    assert mem_fraction_static_of(srv, hw) == mem_fraction_static(hw, 8192, srv.max_prefill_tokens, 256, attn_dp_size=8)
    assert mem_fraction_static_of(srv, hw) < mem_fraction_static(hw, 8192, srv.max_prefill_tokens, 256)
    assert mem_fraction_static_of(srv, hw, chunked_prefill_size=2048, cuda_graph_max_bs=8) == mem_fraction_static(
        hw, 2048, srv.max_prefill_tokens, 8, attn_dp_size=8)
    assert mem_fraction_static_of(srv, hw, role="decode", decode_tokens=4096) == mem_fraction_static(
        hw, 8192, srv.max_prefill_tokens, 256, role="decode", decode_tokens=4096, attn_dp_size=8)
    given = srv.model_copy(update={"mem_fraction_static": 0.7})
    assert {mem_fraction_static_of(given, hw, role=r, decode_tokens=4096) for r in ("null", "prefill", "decode")} == {0.7}

    path, hwd = scenario
    raw = yaml.safe_load(path.read_text())
    raw["server"].update(mem_fraction_static=0.7, disaggregation={"prefill": {"instances": 1}, "decode": {"instances": 1}})
    pd = tmp_path / "pd.yaml"
    pd.write_text(yaml.safe_dump(raw))
    sc = load_scenario(pd)
    pools = {sc.server.role_server(r).max_total_num_tokens for r in ("prefill", "decode")}
    assert pools == {kv_pool_tokens(Hardware(**hwd), 0.7)}


def test_prefill_graph_reserve_follows_the_chunk_not_the_activation_floor():
    # sglang 0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings: the prefill graph's
    # max_bs is cfg.chunked_prefill_size (not max(chunk, 2048), the activation tokens), and
    # reserve_for_graph_mb adds len(bs) x 8 MiB; with chunking off (-1) no size is captured
    from specsched.sim.defaults import mem_fraction_static, prefill_graph_sizes
    from specsched.sim.hardware import Hardware

    hw = Hardware(platform="cuda", memory_mib=143771)
    off = 512 + 16384 * 1.5 + 128 + 256 * 2          # max_prefill_tokens 16384 activation tokens
    assert mem_fraction_static(hw, -1, 16384, 256) == round((143771 - off) / 143771, 3)
    small = hw.model_copy(update={"memory_mib": 32607})   # RTX 5090: no 10 GiB floor
    chunk_1k = 512 + 2048 * 1.5 + 128 + 48 * 2 + prefill_graph_sizes(1024) * 8
    assert mem_fraction_static(small, 1024, 16384, 48) == round((32607 - chunk_1k) / 32607, 3)
