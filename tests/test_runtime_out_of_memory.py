"""A device that runs out of memory mid-run (the KV pool, the graph capture, a forward) is one
line at the command boundary naming the scenario file, what was being allocated, the
device's total memory and the server keys to lower, exit 2, nothing written; and the
up-front estimate refuses a pool that cannot fit a GPU's free memory, checkable on the CPU
with the device's figures given (runtime/memory.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsched.runtime import memory  # noqa: E402
from specsched.runtime.engine import RuntimeEngine  # noqa: E402
from specsched.runtime.kv_cache import KVBuffers  # noqa: E402
from specsched.runtime.model import PRESETS, draft_preset  # noqa: E402
from specsched.runtime.runner import ModelRunner  # noqa: E402
from specsched.sim.errors import ConfigError  # noqa: E402

from specsched.cli import main  # noqa: E402

GIB = 2**30
OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is free."


def _scenario(tmp_path) -> str:
    sc = tmp_path / "s.yaml"
    sc.write_text("name: t\nprofile: h200-1b\nacceptance: {mean_accept_length: 2.0}\n"
                  "server: {max_running_requests: 2, max_total_num_tokens: 600, cuda_graph_max_bs: 8}\n"
                  "workload: {kind: burst, num_requests: 2, input_len: {kind: fixed, value: 8}, "
                  "output_len: {kind: fixed, value: 3}}\n")
    return str(sc)


def _raise(exc):
    def f(*a, **k):
        raise exc
    return f


def _graphs_on(monkeypatch):
    """The engine captures decode/verify graphs as on a GPU (CPU engines capture none)."""
    init = RuntimeEngine.__init__

    def with_graphs(self, *a, **k):
        init(self, *a, **k)
        self.graphs = True
    monkeypatch.setattr(RuntimeEngine, "__init__", with_graphs)


@pytest.mark.parametrize("command", ["measure", "validate"])
@pytest.mark.parametrize("where, key, value, what", [
    ("kv", "server.max_total_num_tokens", "600", "the KV pool of 600 tokens"),
    ("graphs", "server.cuda_graph_max_bs", "8", "graphs captured up to cuda_graph_max_bs 8"),
    ("warm-up", "server.max_total_num_tokens", "600", "a forward of the warm-up request"),
    ("run", "server.max_running_requests", "2", "a forward of the run (batches of up to 2 requests"),
])
def test_a_device_out_of_memory_is_one_line_naming_the_allocation(tmp_path, capsys, monkeypatch, command, where,
                                                                  key, value, what):
    """An 80 GB GPU ran out of memory capturing the decode graphs of a scenario sized for
    141 GB: a traceback (torch.OutOfMemoryError from graphs.py capture). Now one line: the
    scenario file, the key that sizes what was being allocated and its value, the device and
    its memory in all, the size torch asked for, the three server keys to lower."""
    oom = torch.OutOfMemoryError(OOM)
    if where == "kv":
        monkeypatch.setattr(KVBuffers, "__init__", _raise(oom))
    elif where == "graphs":
        _graphs_on(monkeypatch)
        monkeypatch.setattr(ModelRunner, "capture", _raise(oom))
    elif where == "warm-up":
        monkeypatch.setattr(ModelRunner, "extend", _raise(oom))
    else:
        monkeypatch.setattr(RuntimeEngine, "_warm_requests", lambda self: None)
        monkeypatch.setattr(ModelRunner, "extend", _raise(RuntimeError("CUDA error: out of memory\nCUDA kernel "
                                                                          "errors might be asynchronously reported")))
    sc = _scenario(tmp_path)
    out = tmp_path / "o"
    extra = ["--profile", "h200-1b"] if command == "validate" else []
    assert main([command, sc, "--device", "cpu", "--preset", "tiny", "-q", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"specsched: error: {sc}: {key} = {value}: the device (cpu, "), line
    assert " GiB in all) ran out of memory allocating " in line and what in line, line
    assert ("torch asked for 2.00 GiB more" in line) == (where != "run"), line
    lower = line.split(": lower ", 1)[1]
    assert lower.startswith(key) and all(k in lower for k in memory.LOWER_KEYS), line
    assert not out.exists()


def test_other_errors_mid_run_are_not_taken_for_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(ModelRunner, "extend", _raise(RuntimeError("CUDA error: an illegal memory access")))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        main(["measure", _scenario(tmp_path), "--device", "cpu", "--preset", "tiny", "-q",
              "--out", str(tmp_path / "o")])


def test_the_innermost_allocation_names_the_error():
    outer = memory.Allocation("a forward", "server.max_running_requests", 2, memory.LOWER_KEYS)
    inner = memory.Allocation("the KV pool of 5 tokens", "server.max_total_num_tokens", 5, memory.LOWER_KEYS)
    with pytest.raises(torch.OutOfMemoryError) as e, memory.allocating(outer), memory.allocating(inner):
        raise torch.OutOfMemoryError("out")
    assert e.value.allocation is inner
    err = memory.device_oom_error(e.value, "s.yaml", total=80 * GIB)
    assert str(err).startswith("s.yaml: server.max_total_num_tokens = 5: the device (the device, 80.0 GiB in all) ran "
                               "out of memory allocating the KV pool of 5 tokens: lower server.max_total_num_tokens, ")
    with pytest.raises(ValueError) as v, memory.allocating(inner):
        raise ValueError("not memory")
    assert not hasattr(v.value, "allocation")


def _estimate(slots: int) -> memory.MemoryEstimate:
    """The 8b proxy with a DSpark drafter, 48 running requests of 4K context, graphs to 48."""
    return memory.estimate(PRESETS["8b"], PRESETS[draft_preset("8b")], slots=slots, max_reqs=56, max_context=4200,
                           window=8, chunk_tokens=8192, dtype_bytes=2, graph_max_bs=48, graphs=True)


def test_the_estimate_refuses_a_pool_sized_for_141_gb_on_an_80_gb_gpu():
    """Free and total memory given: the GPU's check runs on the CPU. A pool that fits an H200
    (141 GB) is refused on an H100 (80 GB) before anything is allocated, naming the free and
    total memory and the keys to lower."""
    slots = 500_001
    est = _estimate(slots)
    h200, h100 = (139 * GIB, 140 * GIB), (79 * GIB, int(79.6 * GIB))
    assert h100[0] * memory.HEADROOM < est.total <= h200[0] * memory.HEADROOM, est.describe()
    memory.check_fits(est, preset="8b", slots=slots, is_gpu=True, source="s.yaml", configured=500_000,
                      free_total=h200)
    with pytest.raises(ConfigError) as e:
        memory.check_fits(est, preset="8b", slots=slots, is_gpu=True, source="s.yaml", configured=500_000,
                          free_total=h100)
    msg = str(e.value)
    assert msg.startswith("s.yaml: server.max_total_num_tokens = 500000: preset 8b with a 500000-token KV pool")
    assert "GPU memory free is 79.0 GiB of 79.6 GiB" in msg and all(k in msg for k in memory.LOWER_KEYS), msg


def test_a_refusal_driven_by_a_long_context_names_the_context():
    """An agentic length file's 766K-token prompt made the activations the largest part; the
    refusal named only the pool, graph size and running cap, none of which moves them."""
    long = memory.estimate(PRESETS["tiny"], None, slots=10_001, max_reqs=4, max_context=766_000, window=1,
                           chunk_tokens=1024, dtype_bytes=4, graph_max_bs=4, graphs=False)
    assert long.activations > max(long.kv, long.weights, long.graphs), long.describe()
    with pytest.raises(ConfigError) as e:
        memory.check_fits(long, preset="tiny", slots=10_001, is_gpu=False, source="s.yaml", configured=10_000,
                          free_total=(int(long.total * 0.5), long.total), max_context=766_000)
    assert "the activations grow with the longest request's 766000 tokens of context" in str(e.value)
    short = _estimate(500_001)   # the KV pool is the largest part: the context is not named
    with pytest.raises(ConfigError) as e:
        memory.check_fits(short, preset="8b", slots=500_001, is_gpu=True, source="s.yaml", configured=500_000,
                          free_total=(79 * GIB, 80 * GIB), max_context=4200)
    assert "longest request" not in str(e.value)


# ------------------------------------------------------------------ graph capture order
def test_graphs_are_captured_largest_first_into_the_shared_pool(monkeypatch):
    """All captures share one graph pool (runtime/graphs.py GraphCache). Captured smallest
    first, each larger graph's temporaries found no freed block big enough and grew the pool
    by their own; SGLang captures largest first (decode_cuda_graph_runner.py
    reversed(capture_bs); prefill_cuda_graph_runner.py reversed(capture_num_tokens)) so the
    smaller ones reuse what the largest freed. Same keys, captured in that order."""
    from specsched.runtime.prefill_graph import PiecewiseExtend

    from tests.conftest import make_scenario

    sc = make_scenario({"max_running_requests": 20, "cuda_graph_max_bs": 16, "chunked_prefill_size": 64,
                        "max_prefill_tokens": 96, "max_total_num_tokens": 5000},
                       {"kind": "burst", "num_requests": 3, "input_len": {"kind": "fixed", "value": 300},
                        "output_len": {"kind": "fixed", "value": 300}})
    eng = RuntimeEngine(sc, preset="tiny", device="cpu", warmup=False)
    eng.graphs = True
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(eng.runner, "capture", lambda kind, b, c, forced=True: seen.append((c, b)))
    monkeypatch.setattr(eng.runner, "capture_prefill", lambda most: 0)
    eng._capture_all()
    assert len(seen) == len(set(seen)) > 4 and len({c for c, _ in seen}) > 1, seen
    assert seen == sorted(seen, reverse=True), seen

    from tests.test_runtime_prefill_graph import BUCKETS, THREE, runners

    _, pw = runners(THREE, BUCKETS)
    captured: list[int] = []
    monkeypatch.setattr(PiecewiseExtend, "capture", lambda self, b: captured.append(b))
    pw.capture_prefill()
    per_model = captured[:len(BUCKETS)]
    assert len(BUCKETS) > 1 and per_model == sorted(BUCKETS, reverse=True), captured


PROFILE_ARGS = ["profile", "--device", "cpu", "--preset", "tiny", "--window", "3", "--max-bs", "2", "--contexts", "64",
                "--extend-tokens", "16", "--graph-max-bs", "2", "--repeats", "1", "--no-progress"]


@pytest.mark.parametrize("where, flag, value, what", [
    ("build", "--max-bs", "2", "the KV pool of "),
    ("extend", "--extend-tokens", "[16]", "the extend grid's forwards"),
    ("grid", "--max-bs", "2", "the verify/decode grid's steps"),
])
def test_profile_out_of_memory_is_one_line_naming_the_allocation_and_its_flags(tmp_path, capsys, monkeypatch, where,
                                                                               flag, value, what):
    """`specsched profile` with grids too large for the device (batches, contexts or extend
    tokens) ended in torch.OutOfMemoryError's traceback from inside a phase. Now one line
    as measure and validate give: what was being allocated, the flag that sizes it with its
    value, the device's memory in all, the profile's flags that shrink it (not
    --graph-max-bs: the grid captures graphs at every batch size up to --max-bs, above it
    too); exit 2, --out not written."""
    from specsched.runtime.profile_gpu import GpuPhases

    oom = torch.OutOfMemoryError(OOM)
    if where == "build":
        monkeypatch.setattr(KVBuffers, "__init__", _raise(oom))
    else:
        monkeypatch.setattr(GpuPhases, f"{where}_phase", _raise(oom))
    out = tmp_path / "p.yaml"
    assert main([*PROFILE_ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"specsched: error: <command line>: {flag} = {value}: the device (cpu, "), line
    assert " GiB in all) ran out of memory allocating " in line and what in line, line
    assert "torch asked for 2.00 GiB more" in line, line
    lower = line.split(": lower ", 1)[1]
    assert lower.startswith(flag) and all(f in lower for f in ("--max-bs", "--contexts", "--extend-tokens")), line
    assert "--graph-max-bs" not in lower, line
    assert not out.exists()


@pytest.mark.parametrize("where, what", [
    ("build", "the proxy models of preset tiny"),
    ("capture", "check 2/7 capture"),
    ("step", "check 5/7 host_block_vs_queued"),
])
def test_doctor_out_of_memory_is_one_line_naming_the_allocation(tmp_path, capsys, monkeypatch, where, what):
    """`specsched doctor` on a device too small for its proxy ended in a traceback (the models
    and KV pool built before the first check), or, inside a check, printed it as the
    check's failure (the capture check read "a step that syncs the host") and ran the
    rest on a full device. Now one line naming what was being allocated and --preset to
    lower; exit 2, --out not written."""
    oom = torch.OutOfMemoryError(OOM)
    if where == "build":
        monkeypatch.setattr(KVBuffers, "__init__", _raise(oom))
    elif where == "capture":
        monkeypatch.setattr(ModelRunner, "capture", _raise(oom))
    else:
        monkeypatch.setattr(ModelRunner, "spec_cycle", _raise(oom))
    out = tmp_path / "doctor.md"
    assert main(["doctor", "--device", "cpu", "--preset", "tiny", "--repeats", "3", "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("doctor: check ")]
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("specsched: error: <command line>: --preset = 'tiny': the device (cpu, "), line
    assert " GiB in all) ran out of memory allocating " in line and what in line, line
    assert line.endswith(": use a smaller --preset"), line
    assert not out.exists()
