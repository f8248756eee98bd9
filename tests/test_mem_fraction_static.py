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
        assert pool == int((pre_load * f - hw["weight_bytes"]) // hw["kv_cell_bytes"])
        assert f"mem_fraction_static {f} (given)" in line
    default, line = _pool(capsys, path)
    assert "(given)" not in line and _pool(capsys, path, "--set", "server.mem_fraction_static=0.5")[0] < default


def test_a_fraction_that_leaves_no_pool_is_one_line(scenario, capsys):
    path, _ = scenario
    assert main(["run", str(path), "-q", "--out", str(path.parent / "o"), "--set", "server.mem_fraction_static=0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server.mem_fraction_static = 0.1" in err[0] and "must be above 0.19" in err[0], err
