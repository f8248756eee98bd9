"""specsched.runtime.profiler: a CPU profile of the tiny preset validates, is physically ordered,
carries provenance for every field, writes atomically and round-trips, drives the
simulator, and the ``profile`` command is registered and runs."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from specsched.runtime.graphs import default_bs_buckets  # noqa: E402
from specsched.runtime.profile_harness import EXTEND_ALL_BUCKETS_UP_TO, extend_grid_tokens  # noqa: E402
from specsched.runtime.profiler import (  # noqa: E402
    extend_layout,
    fit_line,
    grid_batch_sizes,
    profile_device,
    register_profile_command,
    write_profile,
)
from specsched.sim.engine import run_scenario  # noqa: E402
from specsched.sim.profile import GpuProfile, HostProfile, Profile, load_profile  # noqa: E402
from specsched.sim.server_args import prefill_graph_bucket, prefill_token_buckets  # noqa: E402

from tests.conftest import make_scenario  # noqa: E402

WINDOW = 4
ARGS = dict(device="cpu", preset="tiny", spec_window=WINDOW, max_bs=16, contexts=[64, 2048],
            extend_tokens=[16, 128, 1024], cuda_graph_max_bs=8, repeats=7, progress=False)


@pytest.fixture(scope="module")
def prof() -> dict:
    return profile_device(**ARGS)


def test_profile_validates_with_the_requested_axes(prof: dict) -> None:
    p = Profile.model_validate(prof)
    assert p.device.startswith("cpu")
    assert p.gpu.verify is not None and p.gpu.decode is not None
    assert p.gpu.verify.x == [1.0, 2.0, 4.0, 8.0, 12.0, 16.0] == p.gpu.decode.x  # graph buckets up to 16
    assert p.gpu.verify.context_len == [64.0, 2048.0] == p.gpu.decode.context_len
    assert p.gpu.extend.x == [16.0, 128.0, 1024.0]
    # extend columns: the cost model's context (mean prefix + half the extend), prefix 0 and 2048
    assert p.gpu.extend.context_len == [512.0, 2560.0]
    for g in (p.gpu.extend, p.gpu.verify, p.gpu.decode):
        assert all(v > 0 for row in g.seconds for v in row)
    assert p.gpu.draft_inject_per_token_s >= 0  # a fitted slope: noise on a loaded CPU can clamp it
    # the runtime's extend attention is dense over [B, Q, C]; the grid's layouts are 1024 long
    assert (p.gpu.extend_attention, p.gpu.extend_layout_len, p.gpu.extend_attention_bucket) == ("padded_max", 1024, 64)
    # and its mixed steps run the extend, then the running rows' decode (runtime/engine.py)
    assert p.gpu.mixed_forward == "extend_then_decode" and "_launch_call" in p.provenance["gpu.mixed_forward"]
    # no clock state to carry on a CPU: no extend-after-step table, and the provenance says why
    assert p.gpu.extend_after_step is None and "CPU profile" in p.provenance["gpu.extend_after_step"]
    # the grids' columns (multiples of 64) ran attention over round_up(c + W, 64)
    assert p.gpu.attention_grid_align == 64 and "round_up" in p.provenance["gpu.attention_grid_align"]
    assert p.gpu.eager_factor >= 1.0
    assert p.host.ingest_per_request_s == 0.0
    assert p.host.schedule_per_req_s >= 0 and p.host.process_per_req_s >= 0
    # the host speed the host terms were measured at: the reference work, sampled per phase
    assert p.host.reference_work_s > 0
    assert all(f"{ph} " in p.provenance["host.reference_work_s"] for ph in ("extend", "grid", "launch", "host"))
    # ... and per host term, the level of the phase that measured it (sim/host_speed.py conditions on it)
    from specsched.runtime.host_reference import FAST_TERMS, PHASE_TERMS

    by_term = p.host.reference_work_by_term
    assert set(by_term) == {t for ts in PHASE_TERMS.values() for t in ts} | set(FAST_TERMS)
    assert all(v > 0 for v in by_term.values()) and "host.launch_s" in p.provenance["host.reference_work_by_term"]
    assert by_term["gpu.eager_host_issue_s"] <= p.host.reference_work_s     # the fast level
    # the launch path's own reference work, sampled beside it, for the launch-path terms only
    from specsched.sim.host_speed import LAUNCH_PATH_TERMS
    lby = p.host.launch_reference_work_by_term
    assert p.host.launch_reference_work_s > 0 and lby and set(lby) <= LAUNCH_PATH_TERMS and "host.launch_s" in lby
    assert lby["gpu.eager_host_issue_s"] <= p.host.launch_reference_work_s   # the fast level
    assert "LaunchReferenceWork" in p.provenance["host.launch_reference_work_s"]
    # each eager point carries the reference work sampled at it, and the refit still reads the points back
    from specsched.runtime.profile_fit import eager_issue_points_from_provenance

    eager_text = p.provenance["gpu.eager_host_issue_s"]
    n_eager = len(eager_issue_points_from_provenance(p))
    assert n_eager > 0 and eager_text.count(" ctx ") == 2 * n_eager
    assert "reference work at each point" in eager_text
    assert "phases were not re-run (--relevel-budget 0)" in p.provenance["host.reference_work_s"]
    # the extend terms come from its prefix-0 column: the other columns' samples are apart
    assert "extend prefix columns " in p.provenance["host.reference_work_s"]
    # launch_s is the measured publish-wait stall (block loop - queued loop): on the CPU every
    # call is synchronous, so it is ~0 there; it must be measured (not defaulted) and >= 0
    assert p.host.launch_s >= 0 and p.host.launch_per_req_s >= 0
    # the rest of the launch call after the forward is queued: measured, >= 0, with provenance
    assert p.host.launch_tail_s >= 0 and p.host.launch_tail_per_req_s >= 0
    assert "whole verify launch call" in p.provenance["host.launch_tail_s"]
    # the loop's result path (the no-overlap stall loop less the publish-wait loop), split at
    # the delivery's stamp: measured (not defaulted), >= 0, each part with its provenance
    for key in ("result_path", "recv_path"):
        assert f"{key}_s" in p.host.model_fields_set and f"{key}_per_req_s" in p.host.model_fields_set
        assert getattr(p.host, f"{key}_s") >= 0 and getattr(p.host, f"{key}_per_req_s") >= 0
        assert "runtime.engine.LoopHost" in p.provenance[f"host.{key}_s"]
    assert "host.result_path_s" in p.host.reference_work_by_term
    assert "block" in p.provenance["host.launch_s"] and "queued" in p.provenance["host.launch_s"]
    # the stall loops' launch call, wall / thread CPU per mode, beside the engine's (host probe)
    assert "bs 1 block " in p.provenance["host.launch_s"].split("the launch call in these loops")[1]


def test_grids_grow_with_batch_tokens_and_context(prof: dict) -> None:
    g = prof["gpu"]
    ext = np.array(g["extend"]["seconds"])
    # summed over the other axis: one CPU timing can invert on a loaded machine, a row cannot
    assert ext[-1].sum() > ext[0].sum(), ext  # 1024 vs 16 tokens
    for kind in ("verify", "decode", "draft_step"):
        s = np.array(g[kind]["seconds"])
        # the batch axis by concordance: over every pair of batch sizes in each column, more pairs
        # grow than shrink. A load spike moves only the pairs that hold its cell (5 of 30), where
        # comparing two cells failed on one spike (batch 1's row at 12 ms against batch 16's 10;
        # under two busy loops beside the run, batch 2's 1.9 ms against batch 16's 1.6). A grid
        # whose batch axis is reversed has every pair shrink.
        n = len(s)
        assert sum(np.sign(s[j] - s[i]).sum() for i in range(n) for j in range(i + 1, n)) > 0, (kind, s)
        # context 2048 vs 64, the median over batch sizes of the difference or its sum. At 512 the
        # tiny drafter's growth (0.03-0.3 ms) sat inside the load noise of a 2-worker CI run (its
        # draft_step grid read 1.0-1.7 ms with both statistics inverted); at 2048 it grows by
        # 0.1-1.5 ms unloaded. A grid whose context axis is reversed fails both.
        grow = s[:, -1] - s[:, 0]
        assert np.median(grow) > 0 or grow.sum() > 0, (kind, s)


def test_provenance_covers_every_gpu_and_host_field(prof: dict) -> None:
    prov = prof["provenance"]
    fields = [f"gpu.{f}" for f in GpuProfile.model_fields] + [f"host.{f}" for f in HostProfile.model_fields]
    missing = [f for f in fields if f not in prov]
    assert not missing, missing
    for f in fields:
        assert len(prov[f]) > 40, f
    measured = [f for f in fields if f not in ("gpu.draft_step_tokens_per_request",
                                               "host.ingest_per_request_s", "host.ingest_per_token_s")]
    for f in measured:  # how, with which versions and when
        assert torch.__version__ in prov[f] and "date" in prov[f], f
    assert "repeats" in prov["gpu.verify"] and "spec_cycle" in prov["gpu.verify"]
    assert "Scheduler.schedule()" in prov["host.schedule_s"]
    assert "tokenizer" in prov["host.ingest_per_request_s"]
    assert torch.__version__ in prov["environment"]


def test_the_tile_probe_runs_and_writes_its_times(prof: dict) -> None:
    """The profile states the attention tile it measured (runtime/profile_gpu.py tile_phase):
    a candidate the fit knows, with the probe's widths (a multiple of 256, then every 64)
    and both kinds' times in its provenance."""
    assert prof["gpu"]["attention_tile"] in (1, 128, 256)
    text = prof["provenance"]["gpu.attention_tile"]
    assert text.startswith(f"{prof['gpu']['attention_tile']}: the tile probe")
    widths = [int(w) for w in text.split("at widths [")[1].split("]")[0].split(", ")]
    assert widths[0] % 256 == 0 and [b - a for a, b in zip(widths, widths[1:], strict=False)] == [64] * 4
    assert text.count(" ms") >= 2 * len(widths)


def test_the_padding_probe_runs_and_writes_its_times(prof: dict) -> None:
    """The profile states what a padding position costs (runtime/profile_gpu.py padding_phase):
    a fraction, with the probe's three layouts at the two largest grid contexts and both
    kinds' times in its provenance; the cost model reads it (sim/cost_model.py step_s)."""
    f = prof["gpu"]["attention_padding_cost"]
    assert 0.0 <= f <= 1.0
    text = prof["provenance"]["gpu.attention_padding_cost"]
    assert text.startswith(f"{f:.3f}: the padding probe")
    big, small = ARGS["contexts"][-1], ARGS["contexts"][-2]
    assert f"every request at {big} tokens (full)" in text and f"every request at {small} (short)" in text
    assert text.count(" ms") >= 6


def test_write_profile_round_trips_in_flow_style(prof: dict, tmp_path: Path) -> None:
    out = write_profile(prof, tmp_path / "sub" / "p.yaml")
    text = out.read_text()
    assert "\n    x: [1.0, 2.0, 4.0, 8.0, 12.0, 16.0]\n" in text  # flow-style lists
    assert yaml.safe_load(text) == prof
    loaded = load_profile(str(out))
    assert loaded.model_dump(exclude={"path"}) == Profile.model_validate(prof).model_dump(exclude={"path"})
    assert [q.name for q in out.parent.iterdir()] == ["p.yaml"]  # no temporary left


def test_write_profile_is_atomic(prof: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "p.yaml"
    out.write_text("old contents\n")

    def boom(src, dst):  # noqa: ANN001
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_profile(prof, out)
    assert out.read_text() == "old contents\n"
    assert sorted(os.listdir(tmp_path)) == ["p.yaml"]
    monkeypatch.undo()
    bad = {**prof, "gpu": {**prof["gpu"], "eager_factor": 0.5}}
    with pytest.raises(ValueError):
        write_profile(bad, out)
    assert out.read_text() == "old contents\n"


def test_cpu_launch_tail_leaves_out_the_forward_run_inline(prof: dict) -> None:
    """On CPU the verify launch call runs the forward inline: the launch tail (a host term,
    charged to decode steps too) counted the verify forward itself, and a CPU run's plain
    decode was predicted ~2x slow. The forward's own time, timed in the same call, is left
    out: the tail at batch 1 is host work, well under the verify forward it launches."""
    h, verify = prof["host"], prof["gpu"]["verify"]["seconds"]
    tail_bs1 = h["launch_tail_s"] + h["launch_tail_per_req_s"]
    assert tail_bs1 < 0.5 * verify[0][0], (tail_bs1, verify[0][0])
    assert "less the forward it ran inline" in prof["provenance"]["host.launch_tail_s"]


def test_profile_warns_of_a_noisy_or_falling_grid(prof: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A CPU profile wrote verify ctx 64 bs 4 13.9 ms, bs 8 3.4 ms (spread 150 %) silently,
    and the simulator then priced bigger batches at 0 s. ``profile`` ends with one warning
    line naming the grid and its points; a clean grid gets none."""
    import copy
    import re

    import specsched.runtime.profiler as profiler

    def made(d: dict, spread: float, verify: list[list[float]], decode: list[list[float]],
             draft: list[list[float]] | None = None, draft_spread: float = 5.0) -> dict:
        d = copy.deepcopy(d)
        for kind, grid, pct in (("verify", verify, spread), ("decode", decode, 5.0),
                                ("draft_step", draft or decode, draft_spread)):
            d["gpu"][kind] = {**d["gpu"][kind], "x": [1.0, 2.0, 4.0, 8.0], "seconds": grid}
            d["provenance"][f"gpu.{kind}"] = re.sub(r"Largest \(p75-p25\)/median [\d.]+ %",
                                                    f"Largest (p75-p25)/median {pct:.1f} %",
                                                    d["provenance"][f"gpu.{kind}"])
        return d

    rising = [[1e-3, 2e-3], [1.1e-3, 2.2e-3], [1.3e-3, 2.5e-3], [1.6e-3, 3e-3]]
    falling = [[4.88e-3, 5e-3], [6.28e-3, 6e-3], [13.93e-3, 7e-3], [3.41e-3, 8e-3]]
    ap = argparse.ArgumentParser(prog="specsched")
    register_profile_command(ap.add_subparsers(dest="command", required=True))
    for d, warned in ((made(prof, 150.0, falling, rising), True), (made(prof, 5.0, rising, rising), False),
                      (made(prof, 5.0, rising, rising, falling, 40.0), "draft_step")):
        monkeypatch.setattr(profiler, "profile_device", lambda d=d, **kw: d)
        a = ap.parse_args(["profile", "--device", "cpu", "--preset", "tiny", "--no-progress",
                           "--out", str(tmp_path / "p.yaml")])
        assert a.func(a) == 0
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
        if not warned:
            assert err == []
            continue
        assert len(err) == 1, err
        if warned == "draft_step":
            # the chain drafter's serial step, a difference of two cycles: priced per step
            assert "draft_step grid: spread 40%" in err[0] and "ctx 64 falls from bs 4 13.930 ms" in err[0]
            assert "verify grid" not in err[0]
            continue
        assert "verify grid: spread 150%" in err[0] and "ctx 64 falls from bs 4 13.930 ms to bs 8 3.410 ms" in err[0]
        assert "decode" not in err[0] and "--repeats (now 20)" in err[0]


def test_the_chain_cycle_without_its_steps_is_written_as_verify_chain(prof: dict) -> None:
    """gpu.verify_chain: the without-steps calls of the draft-step pairs (target verify and
    the chain drafter's draft extend over the window), on gpu.verify's axes, with its issue
    excess; the simulator prices chain cycles off it."""
    p = Profile.model_validate(prof)
    vc, v = p.gpu.verify_chain, p.gpu.verify
    assert vc is not None and vc.x == v.x and vc.context_len == v.context_len
    assert all(t > 0 for row in vc.seconds for t in row)
    assert "as_chain=True" in p.provenance["gpu.verify_chain"] and "draft_steps=False" in p.provenance["gpu.verify_chain"]


@pytest.mark.parametrize("spec", ["block", "chain", None])
def test_simulator_runs_with_the_measured_profile(prof: dict, spec: str | None) -> None:
    # a chain drafter (eagle, topk 1) is priced from the measured gpu.draft_step grid
    server = ({"speculative_num_draft_tokens": WINDOW} if spec == "block" else
              {"speculative_algorithm": "eagle", "speculative_num_steps": WINDOW - 1, "speculative_eagle_topk": 1,
               "speculative_num_draft_tokens": WINDOW} if spec == "chain" else {"speculative_algorithm": "none"})
    sc = make_scenario(server=server, workload={"num_requests": 6, "input_len": {"kind": "fixed", "value": 300},
                                                "output_len": {"kind": "fixed", "value": 20}})
    res = run_scenario(sc, profile=Profile.model_validate(prof))
    s = res.summary
    assert s["completed"] == 6
    assert s["total_output_tokens"] == 6 * 20
    assert s["duration"] > 0 and s["mean_ttft_ms"] > 0


def test_extend_layout_sits_on_the_cost_models_context() -> None:
    for tokens in (1, 16, 100, 1000, 1024, 1025, 5000, 16384):
        for col in (512.0, 4096.0 + 512.0):
            lens, prefix = extend_layout(tokens, col, 1024)
            n = len(lens)
            assert sum(lens) == tokens and max(lens) <= 1024 and max(lens) - min(lens) <= 1
            assert n == -(-tokens // 1024)
            # sim.cost_model: mean prefix + tokens / (2 n)
            assert abs(prefix + tokens / (2 * n) - col) <= 0.5, (tokens, col, lens, prefix)
    with pytest.raises(ValueError):
        extend_layout(0, 10.0, 8)


def test_profile_times_unequal_two_request_extends(prof: dict) -> None:
    """gpu.extend_split: per token count of SPLIT_TOKENS within the grid's rows, the last
    eighth of one prompt at prefix 0 and at the last prefix column, then the next prompt's
    start at prefix 0, each timed (with provenance); the cost model reads them back."""
    from specsched.sim.cost_model import CostModel

    p = Profile.model_validate(prof)
    got = [(s.extend_lens, s.prefix_lens) for s in p.gpu.extend_split]
    assert got == [([t // 8, t - t // 8], [pre, 0]) for t in (256, 512, 1024) for pre in (0, 2048)]
    assert all(s.seconds > 0 for s in p.gpu.extend_split)
    text = p.provenance["gpu.extend_split"]
    assert "split_phase" in text and "64@2048+448@0" in text and "median of 7 repeats" in text
    cost = CostModel(p, make_scenario().server)
    assert cost.extend_s([64, 448], [512, 0]) >= cost._dense_extend_s([64, 448], [512, 0])


def test_split_layouts_on_the_gpu_defaults() -> None:
    """On an H200's default grid (rows 256..16384, prefixes 0 and 4096, layout length 1024):
    eight splits, at 256-2048 tokens; a layout longer than the runner's rows is left out."""
    from specsched.runtime.profile_harness import split_layouts

    rows = extend_grid_tokens([256, 1024, 4096, 16384], prefill_token_buckets(16384))
    got = split_layouts(rows, [0, 4096], 1024)
    assert got == [([t // 8, t - t // 8], [p, 0]) for t in (256, 512, 1024, 2048) for p in (0, 4096)]
    assert split_layouts([16, 64, 256], [0, 256], 256) == [([32, 224], [0, 0]), ([32, 224], [256, 0])]
    assert split_layouts([16, 64], [0], 64) == [([8, 56], [0, 0])]   # no SPLIT_TOKENS row: the largest
    assert split_layouts([256, 2048], [0], 256) == [([32, 224], [0, 0])]  # 1792 > 0 + 256 from 2048 on


def test_padded_extend_reading_lands_on_the_measured_layouts() -> None:
    """sim.cost_model under extend_attention padded_max reads a grid row at the dense keys
    per token (B Q C / T, runtime/runner.py _ragged) minus half its layout's request length:
    on the profiler's own layouts that is the row's column again (within C's 64-rounding)."""
    from specsched.runtime.kv_cache import CTX_ALIGN
    from specsched.sim.cost_model import dense_keys_per_token, layout_shift

    for tokens in (256, 1024, 2048, 4096, 8192, 5000):
        shift = layout_shift([float(tokens)], 1024)[0]
        for col in (512.0, 1536.0, 4608.0):
            lens, prefix = extend_layout(tokens, col, 1024)
            keys = dense_keys_per_token(lens, [prefix] * len(lens), CTX_ALIGN)
            assert col - 1 <= keys - shift <= col + CTX_ALIGN * len(lens) * max(lens) / tokens, (tokens, col)


def test_fit_line_and_batch_sizes() -> None:
    assert fit_line([1, 2, 3], [3.0, 5.0, 7.0]) == pytest.approx((1.0, 2.0))
    assert fit_line([1, 2, 3], [3.0, 2.0, 1.0]) == pytest.approx((2.0, 0.0))  # negative slope: flat
    icpt, slope = fit_line([1, 2, 3], [0.5, 2.0, 3.5])  # negative intercept: through the origin
    assert icpt == 0.0 and slope == pytest.approx(15 / 14)
    # every graph bucket up to 64 (the engine's default_bs_buckets), powers of two above
    assert grid_batch_sizes(64) == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64]
    assert grid_batch_sizes(48) == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert grid_batch_sizes(128) == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 128]
    assert grid_batch_sizes(20) == [1, 2, 4, 8, 12, 16, 20]
    assert grid_batch_sizes(1) == [1]
    assert set(grid_batch_sizes(128)) <= set(default_bs_buckets(128))


@settings(max_examples=60, deadline=None)
@given(asked=st.lists(st.integers(1, 20000), min_size=1, max_size=5),
       top=st.sampled_from([0, 512, 1024, 4096, 8192, 16384]), tokens=st.integers(1, 20000))
def test_extend_grid_has_a_row_at_every_bucket_an_extend_between_rows_replays(asked: list[int], top: int,
                                                                               tokens: int) -> None:
    """The invariant the serving loop needs of the extend grid: an extend of ``tokens``
    between the grid's first row and its last (at most EXTEND_ALL_BUCKETS_UP_TO) replays its
    piecewise graphs at a bucket that is itself a row, so its token work is a timed row, not
    a line between rows (the H200 loop's extends at buckets 576-960 ran 2-13 % above that
    line); the rows asked for are kept, and no row falls outside them."""
    buckets = prefill_token_buckets(top) if top else []
    rows = extend_grid_tokens(asked, buckets)
    assert set(asked) <= set(rows) and rows == sorted(set(rows))
    assert min(rows) == min(asked) and max(rows) == max(asked)
    b = prefill_graph_bucket(tokens, buckets) if buckets else None
    if b is not None and min(asked) <= tokens and b <= min(max(asked), EXTEND_ALL_BUCKETS_UP_TO):
        assert b in rows
    if not buckets:
        assert rows == sorted(set(asked))


def test_extend_grid_rows_of_the_h200_profiles() -> None:
    """The rows the H200 rounds asked for (256, 1024, 2048, 4096, 8192) gain every bucket
    from 256 up to 2048: 32 apart to 512, 64 to 1024, 256 to 2048."""
    rows = extend_grid_tokens([256, 1024, 2048, 4096, 8192], prefill_token_buckets(16384))
    assert rows[:10] == [256, 288, 320, 352, 384, 416, 448, 480, 512, 576]
    assert [r for r in rows if 1024 <= r] == [1024, 1280, 1536, 1792, 2048, 4096, 8192]
    assert {576, 640, 704, 768, 832, 896, 960} <= set(rows)
    with pytest.raises(ValueError, match="non-empty"):
        extend_grid_tokens([], [])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="spec_window"):
        profile_device(**{**ARGS, "spec_window": 1})
    with pytest.raises(ValueError, match="preset"):
        profile_device(**{**ARGS, "preset": "tiny-draft"})
    with pytest.raises(ValueError, match="contexts"):
        profile_device(**{**ARGS, "contexts": []})


def test_profile_command_registers_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ap = argparse.ArgumentParser(prog="specsched")
    sub = ap.add_subparsers(dest="command", required=True)
    register_profile_command(sub)
    a = ap.parse_args(["profile", "--device", "cpu"])
    assert (a.preset, a.window, a.graph_max_bs, a.repeats) == ("1b", 6, 256, 20)
    assert a.max_bs is None and a.contexts is None and a.out is None  # per-device defaults
    # extends timed behind 50 ms of themselves, as a busy loop runs them (h200-v35.md)
    assert a.extend_lead_ms == 50.0
    with pytest.raises(SystemExit):
        ap.parse_args(["profile", "--device", "cpu", "--contexts", "1024,x"])
    with pytest.raises(SystemExit):
        ap.parse_args(["profile", "--device", "tpu"])
    out = tmp_path / "cli.yaml"
    a = ap.parse_args(["profile", "--device", "cpu", "--preset", "tiny", "--window", "3", "--max-bs", "4",
                       "--contexts", "32,96", "--extend-tokens", "8,64", "--repeats", "3", "--no-progress",
                       "--name", "cli-test", "--out", str(out)])
    assert a.func(a) == 0
    p = load_profile(str(out))
    assert p.name == "cli-test"
    assert p.gpu.verify is not None and p.gpu.verify.x == [1.0, 2.0, 4.0]
    assert p.gpu.verify.context_len == [32.0, 96.0]
    assert "wrote" in capsys.readouterr().out


@settings(max_examples=60, deadline=None)
@given(issue=st.floats(1e-3, 0.05), busy_extra=st.lists(st.floats(0, 0.02), min_size=1, max_size=9),
       idle_extra=st.lists(st.floats(0, 0.02), min_size=0, max_size=9))
def test_issue_estimate_is_the_less_inflated_timing(issue: float, busy_extra: list[float],
                                                    idle_extra: list[float]) -> None:
    """Invariant: both timings of one eager issue are the issue plus non-negative delays (a
    launch queue filled behind the spin; device-bound kernels piling up on an idle stream),
    so the estimate is never below the issue and never above either timing's median; with
    one timing free of delay it is exact (round 7 on an H200: kept busy 15-28 ms per point,
    the loop's eager verify 16.3 ms)."""
    import statistics

    from specsched.runtime.profile_fit import issue_estimate

    busy = [issue + e for e in busy_extra]
    idle = [issue + e for e in idle_extra]
    est = issue_estimate(busy, idle)
    assert issue - 1e-12 <= est <= statistics.median(busy) + 1e-12
    if idle:
        assert est <= statistics.median(idle) + 1e-12
        assert issue_estimate(busy, [issue] * len(idle)) == pytest.approx(issue)
    else:
        assert est == pytest.approx(statistics.median(busy))


def test_slot_expansion_is_timed_as_the_loop_runs_it(prof: dict) -> None:
    """host.slot_expansion_s is measured (extend, prepare_inject(sync=True), inject at every
    prefix-0 grid size), >= 0, and its provenance gives the per-size gap and preparation."""
    h, prov = prof["host"], prof["provenance"]["host.slot_expansion_s"]
    assert h["slot_expansion_s"] >= 0 and h["inject_prepare_s"] >= 0
    assert "prepare_inject(sync=True)" in prov and "sync=False" in prov
    for t in ARGS["extend_tokens"]:
        assert f"{t}: " in prov.split("medians (tokens: gap / preparation): ")[1]


@settings(max_examples=80, deadline=None)
@given(pts=st.lists(st.tuples(st.integers(1, 10_000), st.floats(0, 5e-3), st.floats(0, 2e-3)), min_size=1, max_size=6),
       wake=st.floats(0, 1e-4), more=st.floats(0, 1e-3))
def test_slot_expansion_fit_invariants(pts: list[tuple[int, float, float]], wake: float, more: float) -> None:
    """Invariants of runtime.profile_fit.slot_expansion_fit: never negative, never above the
    largest gap less the wake-up's share, and a longer gap at every point never lowers it."""
    from specsched.runtime.profile_fit import slot_expansion_fit

    s = slot_expansion_fit(pts, wake)
    assert 0.0 <= s <= max(g for _, g, _ in pts) + 1e-15
    assert slot_expansion_fit([(t, g + more, p) for t, g, p in pts], wake) >= s - 1e-15
    assert slot_expansion_fit([], wake) == 0.0


@settings(max_examples=60, deadline=None)
@given(pts=st.lists(st.tuples(st.integers(1, 10_000), st.floats(0, 5e-3), st.floats(-1e-4, 2e-3)), min_size=1, max_size=6))
def test_inject_prepare_fit_is_the_median_preparation(pts: list[tuple[int, float, float]]) -> None:
    """runtime.profile_fit.inject_prepare_fit: the median preparation (negatives read as 0),
    between the smallest and largest, 0 without points; the gap does not enter it."""
    from specsched.runtime.profile_fit import inject_prepare_fit

    s = inject_prepare_fit(pts)
    preps = [max(0.0, p) for _, _, p in pts]
    assert min(preps) - 1e-15 <= s <= max(preps) + 1e-15
    assert inject_prepare_fit([(t, 2 * g + 1e-3, p) for t, g, p in pts]) == s
    assert inject_prepare_fit([]) == 0.0


def test_inject_prepare_from_an_older_profiles_provenance() -> None:
    """A profile made before host.inject_prepare_s existed (H200 round 18) gets it from its
    own slot-expansion provenance (preparations 0.8858, 0.9115, 0.6646, 0.7657, 1.141 ms:
    median 0.8858 ms), with host.slot_expansion_s's per-term reference; nothing else moves."""
    from specsched.runtime.profile_fit import refit_inject_prepare

    old = load_profile(Path(__file__).resolve().parents[1] / "docs/measurements/h200-v18/h200-1b.yaml")
    assert old.host.inject_prepare_s == 0.0
    new = refit_inject_prepare(old)
    assert new.host.inject_prepare_s == pytest.approx(0.8858e-3)
    by = new.host.reference_work_by_term
    assert by["host.inject_prepare_s"] == by["host.slot_expansion_s"]
    a, b = old.host.model_dump(), new.host.model_dump()
    assert {k for k in a if a[k] != b[k]} == {"inject_prepare_s", "reference_work_by_term"}


def test_a_call_never_queued_whole_behind_the_spin_is_timed_as_issued(monkeypatch):
    """The 8b preset's eager cycle found the spin finished on every try (the host cannot
    issue ~1,700 kernels past a busy GPU), and the eager phase then took the median of no
    samples. Such a call is timed with the GPU idle before each call instead, and named in
    the profile's method provenance."""
    from types import SimpleNamespace

    from specsched.runtime.profile_gpu import GpuPhases

    ph = object.__new__(GpuPhases)
    ph.dev = SimpleNamespace(is_gpu=True, use=lambda stream: contextlib.nullcontext())
    ph.repeats, ph.reps, ph.spin_retries, ph.queue_full = 3, {}, {}, []
    monkeypatch.setattr(GpuPhases, "_warm_and_plan", lambda self, label, fn, want: 3)
    monkeypatch.setattr(GpuPhases, "_first_spin", lambda self, fn: 0.001)
    monkeypatch.setattr(GpuPhases, "_kept_busy", lambda self, fn, spin: (None, min(2 * spin, 1.0)))
    monkeypatch.setattr(GpuPhases, "_tick", lambda self: None)
    issued = []

    def as_run(self, label, fn, n):
        self.queue_full.append(label)
        issued.append(n)
        return [0.02] * n, [0.015] * n

    monkeypatch.setattr(GpuPhases, "_issued_as_run", as_run)
    dev_t, host_t = ph._device_and_host("eager spec bs 32 @ctx 512", "eager", lambda: None)
    assert dev_t == [0.02] * 3 and host_t == [0.015] * 3
    assert issued == [3] and ph.queue_full == ["eager spec bs 32 @ctx 512"]
    assert ph.reps == {"eager": [3]}


def test_spin_retries_are_counted_per_group_so_the_extend_provenance_holds_its_own(monkeypatch):
    """The gpu.extend provenance says how many extend and injection calls found the spin
    finished. Round 26's 8b profile said 180: every one an eager-phase try (15 points x 12 tries
    that all ran dry), none an extend's. Each group's retries are counted apart."""
    from types import SimpleNamespace

    from specsched.runtime.profile_gpu import GpuPhases

    ph = object.__new__(GpuPhases)
    ph.dev = SimpleNamespace(is_gpu=True, use=lambda stream: contextlib.nullcontext())
    ph.repeats, ph.reps, ph.queue_full, ph.spin_retries = 3, {}, [], {}
    monkeypatch.setattr(GpuPhases, "_warm_and_plan", lambda self, label, fn, want: 3)
    monkeypatch.setattr(GpuPhases, "_first_spin", lambda self, fn: 0.001)
    monkeypatch.setattr(GpuPhases, "_tick", lambda self: None)
    monkeypatch.setattr(GpuPhases, "_issued_as_run", lambda self, label, fn, n: ([0.02] * n, [0.015] * n))
    tries = iter([None, (0.01, 0.002)] * 3)   # extend: every other try ran dry
    monkeypatch.setattr(GpuPhases, "_kept_busy", lambda self, fn, spin: (next(tries), spin))
    ph._device_and_host("extend 256 tok @ctx 0", "extend", lambda: None)
    monkeypatch.setattr(GpuPhases, "_kept_busy", lambda self, fn, spin: (None, spin))
    ph._device_and_host("eager spec bs 32 @ctx 512", "eager", lambda: None)
    assert ph.spin_retries == {"extend": 3, "eager": 12}


def test_the_issued_as_run_fallback_drains_the_gpu_before_each_timed_call(monkeypatch):
    """``_issued_as_run``: ``n`` calls, each after a synchronize (the GPU idle: the events then
    hold the device time with the issue gaps in it), no spin marker; the label is kept for the
    method provenance."""
    from types import SimpleNamespace

    from specsched.runtime.profile_gpu import GpuPhases

    seen = []
    ph = object.__new__(GpuPhases)
    ph.dev = SimpleNamespace(synchronize=lambda why: seen.append(("sync", why)))
    ph.queue_full = []

    def timed(fn, marker=None):
        seen.append(("call", marker))
        fn()
        return 0.02, 0.015, False

    monkeypatch.setattr(GpuPhases, "_timed_call", staticmethod(timed))
    calls = []
    dev_t, host_t = ph._issued_as_run("eager spec bs 8 @ctx 512", lambda: calls.append(1), 3)
    assert (dev_t, host_t, len(calls)) == ([0.02] * 3, [0.015] * 3, 3)
    assert seen == [("sync", "profile"), ("call", None)] * 3
    assert ph.queue_full == ["eager spec bs 8 @ctx 512"]


def test_behind_same_times_each_call_right_behind_its_own_lead(monkeypatch):
    """``_behind_same`` (``--extend-lead-ms``): per repeat ``ceil(lead / device)`` calls of the
    same forward, a marker, then the timed call with the marker; a repeat that found the
    marker reached is dropped (counted per group); no synchronize between repeats. A call
    the host cannot keep ahead of is given up after LEAD_GIVE_UP drops with none kept (the
    spin times stand, the label is listed). No lead, or no GPU: nothing is timed."""
    from types import SimpleNamespace

    from specsched.runtime.profile_gpu import LEAD_GIVE_UP, GpuPhases

    seen = []
    ph = object.__new__(GpuPhases)
    ph.dev = SimpleNamespace(is_gpu=True, use=lambda stream: contextlib.nullcontext(),
                             synchronize=lambda why: seen.append("sync"))
    ph.repeats, ph.reps, ph.spin_retries, ph.lead_dry, ph.extend_lead_s = 3, {}, {}, [], 0.05
    monkeypatch.setattr(GpuPhases, "_warm_and_plan", lambda self, label, fn, want: want)
    monkeypatch.setattr(GpuPhases, "_tick", lambda self: None)
    monkeypatch.setattr(GpuPhases, "_marker", staticmethod(lambda: seen.append("marker") or "ev"))
    dry = iter([False, True, False, False])

    def timed(fn, marker=None):
        assert marker == "ev"
        seen.append("timed")
        return 0.021, 0.001, next(dry)

    monkeypatch.setattr(GpuPhases, "_timed_call", staticmethod(timed))
    out = ph._behind_same("extend 1024 tok @ctx 512", "extend_lead", lambda: seen.append("call"), device_s=0.02)
    assert out == [0.021] * 3
    per_repeat = ["call"] * 3 + ["marker", "timed"]   # k = ceil(0.05 / 0.02)
    assert seen == per_repeat * 4 + ["sync"]
    assert ph.spin_retries == {"extend_lead": 1} and ph.reps == {"extend_lead": [3]} and ph.lead_dry == []
    # every repeat finds the lead drained: given up after LEAD_GIVE_UP, the label kept
    seen.clear()
    monkeypatch.setattr(GpuPhases, "_timed_call", staticmethod(lambda fn, marker=None: (0.02, 0.03, True)))
    assert ph._behind_same("extend 256 tok @ctx 512", "extend_lead", lambda: seen.append("call"), device_s=0.002) == []
    assert seen.count("call") == 25 * LEAD_GIVE_UP and ph.lead_dry == ["extend 256 tok @ctx 512"]
    ph.extend_lead_s = 0.0
    assert ph._behind_same("x", "extend_lead", lambda: None, device_s=0.02) == []
    ph.extend_lead_s, ph.dev.is_gpu = 0.05, False
    assert ph._behind_same("x", "extend_lead", lambda: None, device_s=0.02) == []


def test_extend_lead_outside_its_range_is_refused() -> None:
    with pytest.raises(ValueError, match="extend_lead_s"):
        profile_device(**{**ARGS, "extend_lead_s": 2.0})


def test_the_progress_total_is_the_measurements_the_phases_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress bar's and the time budget's total (Harness.task_counts) equals the
    measurements each phase ticks off: a CPU review saw the bar count 77 of 74 (the launch
    phase ticks each batch size in its launch and its stall loops; the padding probe runs only
    with two grid contexts)."""
    from specsched.runtime import profile_harness as ph

    planned: dict[str, int] = {}
    ticked: dict[str, int] = {}
    phase = ["init"]
    counts, tick, start = ph.Harness.task_counts, ph.Harness._tick, ph.Harness._phase

    def task_counts(self):
        planned.update(counts(self))
        return counts(self)

    def counted_tick(self):
        ticked[phase[0]] = ticked.get(phase[0], 0) + 1
        tick(self)

    def named_phase(self, name):
        phase[0] = name
        start(self, name)

    monkeypatch.setattr(ph.Harness, "task_counts", task_counts)
    monkeypatch.setattr(ph.Harness, "_tick", counted_tick)
    monkeypatch.setattr(ph.Harness, "_phase", named_phase)
    profile_device(device="cpu", preset="tiny", spec_window=3, max_bs=2, contexts=[32, 96], extend_tokens=[8, 64],
                   cuda_graph_max_bs=2, repeats=3, progress=False)
    assert planned["padding"] == 6 and planned["launch"] == 2 * 2
    assert ticked == {k: v for k, v in planned.items() if v}


def test_the_profile_carries_its_decode_launch_calls_and_a_run_reads_its_host_speed_from_them(prof: dict) -> None:
    """The decode stall loop's launch calls (wall / thread CPU per batch size, block and queued)
    are written into host.decode_launch_s's provenance, and launch_call_reference(profile,
    "decode") reads the queued loop's thread CPU back per batch size: the reference a
    plain-decoding run's own decode launch calls are read against (benchmarks/gpu_validate.py
    checks.md), since the launch path's speed did not follow the Python reference work across
    machines (docs/measurements/h200-v39.md)."""
    import numpy as np
    from specsched.runtime.host_reference import launch_call_reference, launch_speed_factor

    p = Profile.model_validate(prof)
    text = p.provenance["host.decode_launch_s"]
    assert "the launch call in these loops" in text and "dqueued" in text
    bs, sec = launch_call_reference(p, "decode")
    assert list(bs) == sorted(bs) and len(bs) >= 2 and all(s > 0 for s in sec)
    # a run whose decode calls took 2x the profile's reads x2; its verify and eager calls are not read
    mode = ["decode"] * len(bs) + ["verify", "decode"]
    f = launch_speed_factor(mode, ["main"] * (len(bs) + 2), [*bs, bs[0], 10_000], [*(2 * sec), 9.0, 9.0],
                            int(bs[-1]), (bs, sec), step_mode="decode")
    assert f == pytest.approx(2.0)
    assert launch_call_reference(p, "verify") is not None
    assert not np.array_equal(launch_call_reference(p, "verify")[1], sec)
    with pytest.raises(ValueError, match="allowed: verify, decode"):
        launch_call_reference(p, "extend")


def test_the_draft_step_grid_is_a_serial_step_inside_the_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu.draft_step prices each of a chain drafter's serial steps (the simulator charges
    speculative_num_steps - 1 of them on top of gpu.verify), so it must be what one step adds
    to a cycle, not a step called alone: a lone call also pays the work around every forward
    (reserving KV, the graph's input and output copies), which a cycle pays once. On CPU the
    lone call charged ~0.11 ms a step more than the step inside the cycle (0.81 vs 0.70 ms,
    tiny preset), and the eagle-chain cell's chain arms were predicted 7-10 % slow where the
    block arm was not. Here that per-call work is made 5 ms: it must not reach the grid."""
    from specsched.runtime.spec_cycle import SpecCycle

    prepare = SpecCycle._prepare

    def slow_prepare(self, rows, width):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.005:  # a spin: a sleep overshoots by milliseconds on a loaded host
            pass
        return prepare(self, rows, width)

    monkeypatch.setattr(SpecCycle, "_prepare", slow_prepare)
    p = profile_device(device="cpu", preset="tiny", spec_window=4, max_bs=2, contexts=[32, 96], extend_tokens=[8, 64],
                       cuda_graph_max_bs=2, repeats=9, progress=False)
    steps = np.array(p["gpu"]["draft_step"]["seconds"])
    verify = np.array(p["gpu"]["verify"]["seconds"])
    assert (verify > 0.005).all()  # the per-call work is in every cycle ...
    # ... and in no step (a step called alone: >= 5 ms at every point; the median over the
    # points, since a loaded host can still throw one point's difference off)
    assert np.median(steps) < 0.003, steps
    assert "draft_steps=False" in p["provenance"]["gpu.draft_step"]
