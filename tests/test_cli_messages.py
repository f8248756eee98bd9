"""What a user sees after a mistake on the command line: one line that names the option,
the value and what is allowed, exit status 2, no usage block and no traceback."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsched.cli import main
from tests.conftest import ROOT


def _one_line_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.count("\n") == 1 and "usage:" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("argv", "option", "value", "allowed"), [
    (["compare", "burst256-ht", "--arms", "base,both", "--seeds", "0"], "--seeds", "0", ">= 1"),
    (["sweep", "batch8-ll", "--grid", "arm=base", "--seeds", "-2"], "--seeds", "-2", ">= 1"),
    (["sweep", "batch8-ll", "--grid", "arm=base", "--workers", "0"], "--workers", "0", ">= 1"),
    # built a list of 2e11 runs up front, ~50 MB a second, without a word
    (["sweep", "batch8-ll", "--grid", "arm=base", "--seeds", "99999999999"], "--seeds", "99999999999", "at most 100,000"),
    (["compare", "burst256-ht", "--arms", "base,both", "--seeds", "100001"], "--seeds", "100001", "at most 100,000"),
    (["run", "burst256-ht", "--seed", "x"], "--seed", "'x'", ">= 0"),
    (["run", "burst256-ht", "--seed", "-1"], "--seed", "-1", ">= 0"),
    (["run", "burst256-ht", "--max-requests", "1.5"], "--max-requests", "'1.5'", ">= 1"),
    (["calibrate", "--report-only", "--seeds", "0"], "--seeds", "0", ">= 1"),  # was a traceback
    (["validate-bench", "x.jsonl", "--seed", "-3"], "--seed", "-3", ">= 0"),
    (["run", "burst256-ht", "--format", "xml"], "--format", "'xml'", "parquet"),
])
def test_a_bad_option_value_is_one_line_naming_option_value_and_what_is_allowed(argv, option, value, allowed, capsys):
    err = _one_line_error(argv, capsys)
    assert err.startswith(f"specsched {argv[0]}: error: ") and option in err and value in err and allowed in err, err


def test_a_missing_required_option_is_one_line_too(capsys):
    assert "--arms" in _one_line_error(["compare", "burst256-ht"], capsys)


@pytest.mark.parametrize(("argv", "says"), [
    # was read as --seeds 3 (three seeds) by argparse's abbreviations, and run at once
    (["compare", "burst256-ht", "--arms", "base,both", "--seed", "3", "--no-save"],
     "specsched compare: error: unrecognized arguments: --seed 3; did you mean --seeds?"),
    (["run", "burst256-ht", "--seeds", "3"], "specsched run: error: unrecognized arguments: --seeds 3; did you mean --seed?"),
    (["run", "burst256-ht", "--sed", "3", "--outt", "x"],
     "unrecognized arguments: --sed 3 --outt x; did you mean --seed (for --sed), --out (for --outt)?"),
    (["scenario", "from-bench", "x.jsonl", "--profile", "h200-1b", "--burst", "2"],
     "specsched scenario from-bench: error: unrecognized arguments: --burst 2; did you mean --burstiness?"),
])
def test_an_unknown_or_shortened_option_is_refused_naming_the_closest_one(argv, says, capsys):
    """Options are taken by their full names only: a shortened or mistyped one is refused in
    the command's name with the option it is closest to, before anything runs."""
    err = _one_line_error(argv, capsys)
    cmd = " ".join(argv[:2 if argv[0] == "scenario" else 1])
    assert err.startswith(f"specsched {cmd}: error: ") and says in err and f"specsched {cmd} --help" in err, err


@settings(max_examples=25, deadline=None)
@given(st.integers(max_value=0))
def test_any_seed_count_below_one_is_refused_in_one_line(n):
    """Invariant: every count < 1 is refused before any run, naming the value."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(["compare", "burst256-ht", "--arms", "base,both", "--seeds", str(n)])
    assert e.value.code == 2 and err.getvalue() == f"specsched compare: error: argument --seeds: expected an integer >= 1, got {n}\n"


@pytest.mark.parametrize(("typed", "closest"), [("burst265-ht", "burst256-ht"), ("batch8", "h200/batch8"),
                                                ("h200/batch9", "h200/batch")])
def test_an_unknown_scenario_name_lists_the_bundled_ones_closest_first(typed, closest, capsys, tmp_path, monkeypatch):
    from specsched.sim.bundled import bundled_scenario_names

    monkeypatch.chdir(tmp_path)
    assert main(["run", typed]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and typed in err and "bundled" in err, err
    listed = err.split("(closest first): ")[1].strip().split(", ")
    assert sorted(listed) == sorted(bundled_scenario_names()) and listed[0].startswith(closest), listed
    assert not (tmp_path / "results").exists()


def test_the_readmes_repository_paths_find_the_bundled_files_from_any_folder(capsys, tmp_path, monkeypatch):
    """The README's commands name the shipped files by their repository paths
    (``scenarios/h200/batch8.yaml``, ``--profile profiles/h200-1b.yaml``); from another folder
    (an installed wheel, the user's own project) they were "file does not exist" and "no such
    profile file" while the bundled files were there. A path under ``scenarios/`` or
    ``profiles/`` that is not a file as given falls back to the bundled one."""
    from specsched.sim.bundled import profiles_dir, resolve_scenario_path, scenarios_dir
    from specsched.sim.profile import resolve_profile_path

    monkeypatch.chdir(tmp_path)
    assert resolve_scenario_path("scenarios/h200/batch8.yaml") == scenarios_dir() / "h200" / "batch8.yaml"
    assert resolve_profile_path("profiles/h200-1b.yaml") == profiles_dir() / "h200-1b.yaml"
    assert main(["run", "scenarios/h200/batch8.yaml", "--set", "profile=profiles/h200-1b.yaml",
                 "--set", "workload.num_requests=2"]) == 0
    capsys.readouterr()
    (tmp_path / "scenarios").mkdir()   # the user's own file of that name is still read first
    (tmp_path / "scenarios" / "burst256-ht.yaml").write_text("name: mine\n")
    assert resolve_scenario_path("scenarios/burst256-ht.yaml") == Path("scenarios/burst256-ht.yaml")


def test_a_profile_given_where_a_scenario_goes_is_named_a_profile(capsys, tmp_path, monkeypatch):
    """`specsched profile --analytic ... --out my.yaml`, then `specsched run my.yaml` (or
    validate --scenario, calibrate --scenario-template): refused as "profile = '<missing>':
    required", as if the user had forgotten a key of a scenario; the reverse (a scenario as
    --profile) was already named. Now the file is named a profile, with what to do."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text((ROOT / "profiles" / "h200-1b.yaml").read_text())
    line = str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.23.jsonl") + ":1"
    for argv in (["run", "my.yaml"], ["validate", "--measured", line, "--scenario", "my.yaml"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "a profile" in err[0] and "--set profile=my.yaml" in err[0], err
        assert "required" not in err[0]


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_bare_name_of_a_local_scenario_file_says_to_give_it_as_a_path(capsys, tmp_path, monkeypatch, suffix):
    """`specsched run mine` beside mine.yaml (as `specsched run burst256-ht` runs a bundled one)
    was "neither a file nor a bundled scenario", naming only the bundled ones; a profile's
    bare name beside its file says to give the path, and now so does a scenario's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / f"mine{suffix}").write_text("name: mine\n")
    assert main(["run", "mine"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no bundled scenario of that name, but mine{suffix} is there: give it as a path" in err[0], err
    assert "closest first" not in err[0]


def test_a_missing_yaml_file_is_still_named_as_a_missing_file(capsys, tmp_path):
    assert main(["run", str(tmp_path / "mine.yaml")]) == 2
    err = capsys.readouterr().err
    assert "mine.yaml" in err and "file does not exist" in err and "bundled" not in err, err


@pytest.mark.parametrize("target", ["file", "folder", "dot"])
def test_an_out_that_is_not_a_results_directory_is_refused_and_left_alone(target, tmp_path, monkeypatch, capsys):
    """`--out notes.txt`, `--out ~/project` or `--out .` used to be replaced by the results
    directory (the folder's content deleted, the file hidden as .NAME.old-*; `.` was a
    traceback). Now: one line, exit 2, before the run, nothing touched or left behind."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("keep")
    monkeypatch.chdir(work)
    out = {"file": "notes.txt", "folder": str(work), "dot": "."}[target]
    assert main(["run", "burst256-ht", "--set", "workload.num_requests=4", "--out", out, "-q"]) == 2
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and "not replaced" in cap.err and "Traceback" not in cap.err, cap.err
    assert "Serving Benchmark Result" not in cap.out   # refused before the run
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"] and (work / "notes.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_a_results_directory_or_an_empty_folder_is_still_written(tmp_path, capsys):
    for out in (tmp_path / "empty", tmp_path / "new"):
        if out.name == "empty":
            out.mkdir()
        for _ in range(2):   # the second time it replaces its own results directory
            assert main(["run", "burst256-ht", "--set", "workload.num_requests=4", "--out", str(out), "-q"]) == 0
        assert (out / "summary.json").is_file()


def test_compare_refuses_a_file_in_the_way_of_a_run_folder_before_running(tmp_path, capsys):
    (tmp_path / "base-seed2+workload.num_requests=4").write_text("keep")
    argv = ["compare", "burst256-ht", "--arms", "base,both", "--seeds", "2", "--set", "workload.num_requests=4",
            "--out", str(tmp_path), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "base-seed2" in err and "not replaced" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base-seed2+workload.num_requests=4"]


def test_plot_of_a_scenario_folder_names_the_runs_inside(tmp_path, capsys):
    """`specsched plot results/burst256-ht` (the folder `run` and `compare` fill) names the
    results directories in it instead of only "summary.json missing"."""
    for arm in ("base", "both"):
        assert main(["run", "burst256-ht", "--arm", arm, "--set", "workload.num_requests=4",
                     "--out", str(tmp_path / "s" / f"{arm}-seed1"), "-q"]) == 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "base-seed1, both-seed1" in err and "give one or more" in err, err
    assert not (tmp_path / "s" / "plots").exists()


def test_the_default_sweep_file_plots_without_a_doubled_prefix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "batch8-ll", "--grid", "server.sync_mode=host_block,stream_wait", "--set",
                 "workload.num_requests=4", "--workers", "1", "-q"]) == 0
    assert main(["plot", "results/sweep-batch8-ll.parquet"]) == 0
    # in ./plots, where the plot of several runs goes (it was results/plots, beside the file)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["sweep-batch8-ll.png", "sweep-batch8-ll.svg"]
    assert not (tmp_path / "results" / "plots").exists()


def test_from_bench_of_specsched_own_line_does_not_call_its_provenance_unknown(tmp_path, capsys):
    """A bench_serving.jsonl that specsched wrote carries server_info.specsched (scenario, arm,
    seed, profile); reading it back must not list that block as a server key left out."""
    assert main(["run", "burst256-ht", "--set", "workload.num_requests=4", "--out", str(tmp_path / "r"), "-q"]) == 0
    capsys.readouterr()
    assert main(["scenario", "from-bench", str(tmp_path / "r" / "bench_serving.jsonl"), "--profile",
                 "mi355x-dsv41-flash-tp4", "--out", str(tmp_path / "mine.yaml")]) == 0
    text = "".join(capsys.readouterr())
    unknown = [line for line in text.splitlines() if "has no argument for" in line]
    assert "arguments from the line's server_info" in text and not any("specsched" in line for line in unknown), text


_WITHOUT_TORCH = r"""
import contextlib, io, json, sys
sys.modules["torch"] = None          # torch absent, as after a plain `pip install -e .`
from specsched.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    out.append([rc, err.getvalue()])
print(json.dumps(out))
"""


def test_runtime_commands_without_torch_say_what_to_install_in_one_line(tmp_path):
    """Without torch, each runtime command is still a command and refuses in one line that
    names torch and the extra that installs it (pyproject's `runtime`), exit 2: no
    ModuleNotFoundError, no "unrecognized arguments: --device", no AttributeError for a
    `doctor` that was never registered. `validate --measured` measures nothing, so it needs
    no torch: it gets past the runtime to the file's own check."""
    import json
    import subprocess
    import sys

    cases = [
        ["measure", "scenarios/h200/batch8.yaml", "--device", "cpu"],
        ["validate", "scenarios/h200/batch8.yaml", "--profile", "h200-1b", "--device", "cpu"],
        ["doctor"],
        ["doctor", "--device", "cuda"],
        ["profile", "--device", "cuda"],
        ["profile", "--device", "cuda", "--preset", "1b", "--name", "x", "--out", str(tmp_path / "p.yaml")],
        ["validate", "--measured", "tests/data/bench/vllm-0.11.0-bench-serve.json", "--profile", "h200-1b"],
    ]
    res = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    for argv, (rc, err) in zip(cases, json.loads(res.stdout), strict=True):
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        if "--measured" in argv:
            assert "torch" not in err and "name one as FILE:LINE" in err, err
        else:
            assert "needs torch" in err and "pip install 'specsched[runtime]'" in err, (argv, err)
    assert not (tmp_path / "p.yaml").exists()


def test_the_analytic_profile_still_runs_without_torch(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "a.yaml"
    cases = [["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H200", "--out", str(out)]]
    res = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert json.loads(res.stdout) == [[0, ""]] and out.is_file(), res.stderr


@pytest.mark.parametrize("argv", [
    ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H200", "-q", "--out", "{long}.yaml"],
    ["run", "burst256-ht", "--set", "workload.num_requests=2", "-q", "--out", "{long}"],
])
def test_an_out_path_the_file_system_refuses_is_one_line(tmp_path, capsys, argv):
    """A file name over the file system's limit (255 bytes) was an OSError traceback."""
    long = str(tmp_path / ("x" * 300))
    assert main([a.format(long=long) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("specsched: error: cannot use ") and "too long" in err, err


def test_a_sweep_file_beside_other_inputs_is_named_as_such(tmp_path, capsys):
    """plot A.parquet B.parquet said A was "not a text file (bench_serving writes JSON)"."""
    for name in ("a", "b"):
        assert main(["sweep", "batch8-ll", "--grid", "server.sync_mode=host_block", "--set", "workload.num_requests=2",
                     "--workers", "1", "-q", "--out", str(tmp_path / f"{name}.parquet")]) == 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a sweep file is plotted alone" in err and "a.parquet" in err, err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(("old", "new", "key", "value"), [
    ("    verify_cycles_per_s: 66.78", "    verify_cycle_per_s: 66.78", "reference.base.verify_cycle_per_s", "66.78"),
    ("reference:\n  base:", "reference:\n  bse:", "reference.bse", "bse"),
])
def test_a_typo_in_the_reference_block_is_one_line_and_nothing_written(old, new, key, value, capsys, tmp_path, monkeypatch):
    """Every other scenario key is strict; a misspelt reference metric printed ``n/a`` against
    the figure and a misspelt reference arm dropped the comparison, both with exit 0."""
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "scenarios" / "batch8-ll.yaml").read_text()
    assert old in text
    (tmp_path / "s.yaml").write_text(text.replace(old, new, 1))
    assert main(["run", "s.yaml", "--out", "o"]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "s.yaml" in err[0] and key in err[0] and value in err[0], cap.err
    assert "Serving Benchmark Result" not in cap.out and not (tmp_path / "o").exists()


def test_scenario_without_its_subcommand_names_what_is_allowed(capsys):
    """``specsched scenario`` said "the following arguments are required: scenario_command"
    (an internal name, and not the choice a user could type)."""
    err = _one_line_error(["scenario"], capsys)
    assert "scenario_command" not in err and "from-bench" in err, err


@pytest.mark.parametrize(("extra", "flag"), [
    (["--device", "cuda"], "--device"), (["--preset", "8b"], "--preset"), (["--no-graphs"], "--no-graphs"),
    (["--backend", "hip"], "--backend"), (["--allow-serializing"], "--allow-serializing"),
])
def test_validate_measured_refuses_the_flags_of_a_measurement_here(tmp_path, monkeypatch, capsys, extra, flag):
    """``validate --measured runs.jsonl --profile P --device cuda`` ran and printed its table:
    with --measured nothing is measured here, so the measuring flags did nothing, without a
    word. Each is refused in one line (exit 2), nothing written."""
    monkeypatch.chdir(tmp_path)
    line = str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.10.jsonl")
    assert main(["validate", "--measured", f"{line}:1", "--profile", "h200-1b", "--out", "v", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"specsched: error: <command line>: {flag} = ") and "not with --measured" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "v").exists()


@pytest.mark.parametrize(("extra", "flag"), [
    (["--plot"], "--plot"), (["--log-x"], "--log-x"), (["--seeds", "5"], "--seeds"), (["--arrivals", "rate"], "--arrivals"),
    (["--scenario", "s.yaml"], "--scenario"), (["--num-prompts", "4"], "--num-prompts"),
])
def test_validate_measuring_here_refuses_the_flags_of_measured(tmp_path, monkeypatch, capsys, extra, flag):
    """The other way round: --plot, --seeds and the like only act with --measured; measuring
    here they were dropped silently. Refused in one line before anything runs (no torch needed)."""
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "scenarios/h200/batch8.yaml", "--profile", "h200-1b", "--device", "cpu", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"specsched: error: <command line>: {flag} = ") and "only with --measured" in err, err
    assert len(err.splitlines()) == 1


def test_a_chain_window_the_file_writes_and_sglang_resets_is_warned(capsys, tmp_path):
    """A file whose chain drafter (speculative_eagle_topk 1, speculative_num_steps 3) writes
    speculative_num_draft_tokens 32 runs at window 4, as SGLang 0.5.23 _handle_eagle_family
    resets it to num_steps + 1; the run said nothing (only a --set window got its note). One
    warning names the file, the key, the value written, the one run and why; a window that is
    already steps + 1, or one given with --set (its own note), gets none."""
    src = (ROOT / "scenarios" / "public" / "eagle3-l8-h100-b1.yaml").read_text()
    chain = "speculative_num_steps: 3, speculative_eagle_topk: 1, speculative_num_draft_tokens: 4}"
    assert chain in src
    path = tmp_path / "wide.yaml"
    path.write_text(src.replace(chain, chain.replace("tokens: 4}", "tokens: 32}")))
    small = ["--set", "workload.num_requests=2", "--out", str(tmp_path / "o")]
    assert main(["run", str(path), "--arm", "eagle3_chain", *small, "-q"]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "speculative_num_draft_tokens 32" in x]
    assert line.startswith(f"warning: {path}: server.speculative_num_draft_tokens 32 runs as 4: ")
    assert "speculative_num_steps + 1 = 4" in line and "_handle_eagle_family" in line
    window = ["--set", "server.speculative_num_draft_tokens=32"]
    assert main(["run", str(path), "--arm", "eagle3_chain", *small[:2], *window, "--out", str(tmp_path / "o2"), "-q"]) == 0
    assert "runs as 4" not in capsys.readouterr().err


def test_a_folder_where_a_histogram_goes_is_named_as_the_user_wrote_it(tmp_path, capsys):
    """A folder in the way of a length histogram was reported under the temporary file the
    write renames from (``.s-input-lengths.csv.PID.tmp``), a name the user never gave."""
    (tmp_path / "s-input-lengths.csv").mkdir()
    bench = ROOT / "tests/data/bench/sglang-0.5.23-details.jsonl"
    rc = main(["scenario", "from-bench", str(bench), "--profile", "h200-llama8b-roofline", "--lengths", "details",
               "--out", str(tmp_path / "s.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1] == f"specsched: error: cannot write {tmp_path / 's-input-lengths.csv'}: Is a directory", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s-input-lengths.csv"]   # nothing half-written


def test_an_atomic_write_over_a_folder_names_the_destination(tmp_path):
    from specsched.sim.atomic import atomic_write_text

    (tmp_path / "x.csv").mkdir()
    with pytest.raises(IsADirectoryError) as e:
        atomic_write_text(tmp_path / "x.csv", "a\n")
    assert e.value.filename == str(tmp_path / "x.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


def test_an_atomic_write_through_a_symlink_replaces_the_file_it_points_to(tmp_path):
    """A destination that is a symlink (a results file linked from elsewhere) had the link
    itself replaced by a plain file, leaving the file it points to stale; a plain write
    (open(path, "w")) writes through the link. The temporary file now goes beside the target."""
    import os

    from specsched.sim.atomic import atomic_write_text

    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(os.path.relpath(target, tmp_path))
    assert atomic_write_text(link, "new\n") == link
    assert link.is_symlink() and target.read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["t.csv"]


@pytest.mark.parametrize("bad", [
    "server.max_total_num_tokens=100",          # refused by the pool-fit check
    "workload.num_requests=3000000",            # refused by the size check
])
def test_a_run_refused_after_loading_prints_no_server_defaults_before_its_line(bad, tmp_path, capsys, monkeypatch):
    """``run`` printed the block of server defaults the profile's hardware filled in (stdout)
    before the checks that run after loading, so a refused input showed eight lines above its
    error; compare and sweep print nothing before theirs. The block now follows the refusals."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "h200/batch8", "--out", "ok", "-q"]) == 0
    assert "server defaults for this hardware" in capsys.readouterr().out  # the block exists
    assert main(["run", "h200/batch8", "--set", bad, "--out", "out", "-q"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and "Traceback" not in cap.err, (cap.out, cap.err)
    assert not (tmp_path / "out").exists()


def test_validate_help_says_what_out_does_in_each_form(capsys):
    """``validate --out D`` appends its rows to D/validate.csv when it measures here; with
    ``--measured`` it writes as validate-bench does, replacing validate.csv: the help says both."""
    with pytest.raises(SystemExit) as e:
        main(["validate", "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    start = out.index("--out OUT", out.index("options:"))
    text = out[start:out.index("--measured FILE[:LINE]", start)]
    assert "appended" in text and "--measured" in text and "replaced" in text, text


@pytest.mark.parametrize("name", ["x.csv", "x", "x.parquet.csv"])
def test_sweep_refuses_an_out_not_named_as_the_parquet_it_writes(name, tmp_path, capsys):
    """``sweep --out results/x.csv`` wrote parquet under the .csv name (and x.csv.samples.parquet):
    refused before any run, in one line naming the flag, the value and what is allowed."""
    out = tmp_path / name
    assert main(["sweep", "batch8-ll", "--grid", "server.chunked_prefill_size=2048,4096", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and str(out) in err and ".parquet" in err, err
    assert list(tmp_path.iterdir()) == []


def test_plot_of_a_scenario_file_says_it_is_a_scenario_and_how_to_get_results(tmp_path, capsys, monkeypatch):
    """``plot mine.yaml`` read the scenario as a bench_serving file ("not a complete JSON object
    ...; truncated?"): it says the file is a scenario, what plot takes and the command that makes
    results from it; exit 2, one line, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text((ROOT / "scenarios" / "batch8-ll.yaml").read_text())
    assert main(["plot", "mine.yaml", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "truncated" not in err, err
    assert "mine.yaml" in err and "a scenario" in err and "results directory" in err and "bench_serving" in err, err
    assert "specsched run mine.yaml" in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["mine.yaml"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, where no file can be made")
@pytest.mark.parametrize("argv", [
    ["run", "burst256-ht", "--set", "workload.num_requests=2", "-q", "--out", "{out}"],
    ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H200", "-q", "--out", "{out}.yaml"],
])
def test_an_out_the_file_system_refuses_is_named_as_the_user_wrote_it(capsys, argv):
    """An --out where no file can be made was reported under its lock file
    (``cannot use /proc/.NAME.lock``), a name the user never gave."""
    argv = [a.format(out="/proc/specsched-out") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"specsched: error: cannot use {argv[-1]}: "), err
    assert ".lock" not in err, err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, where no file can be made")
def test_an_out_where_nothing_can_be_written_is_refused_before_the_run(capsys):
    """``run --out /proc/x`` simulated the whole run and printed its report, then failed on
    the write: a results folder nothing can be written in is found before any work."""
    assert main(["run", "burst256-ht", "--set", "workload.num_requests=2", "--out", "/proc/specsched-out/run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == "specsched: error: cannot use /proc/specsched-out/run: No such file or directory", (out, err)


def test_a_profile_named_as_profile_wrote_it_without_out_is_pointed_to(tmp_path, monkeypatch, capsys):
    """`specsched profile --analytic` without --out writes profiles/NAME.yaml under the current
    directory; a scenario naming it `profile: NAME` (as the bundled cells name theirs) was
    refused with the bundled list only. The refusal names the file that is there and how to
    give it (a path); nothing is run."""
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--analytic", "--model", "qwen3-0.6b", "--gpu", "H100", "--tp", "1"]) == 0
    name = "h100-qwen3-0.6b-tp1-bf16-analytic"
    assert (tmp_path / "profiles" / f"{name}.yaml").is_file()
    capsys.readouterr()
    (tmp_path / "s.yaml").write_text(
        f"name: s\nprofile: {name}\nworkload: {{kind: burst, num_requests: 2, "
        "input_len: {kind: fixed, value: 64}, output_len: {kind: fixed, value: 4}}\n")
    assert main(["run", "s.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"profile = '{name}'" in err and f"profile: profiles/{name}.yaml" in err, err
    assert not (tmp_path / "results").exists()


def test_a_what_if_run_says_why_its_reference_figures_are_gone(tmp_path, capsys, monkeypatch):
    """`specsched run batch8-ll` ends with the reference figures and the model's error; with
    --set the section was silently gone. One note now says why (they were measured on the
    scenario as written) and gives the plot command that sets the what-if beside the plain run,
    with the run that makes the plain one while it is missing. A plain run prints no note."""
    monkeypatch.chdir(tmp_path)
    what_if = ["run", "scenarios/batch8-ll.yaml", "--set", "workload.num_requests=4"]
    assert main(what_if) == 0
    out = capsys.readouterr().out
    assert "Reference (measured) vs model" not in out
    said = [line for line in out.splitlines() if line.startswith("note: no reference figures")]
    plot = ("specsched plot results/batch8-ll/base-seed1 results/batch8-ll/base-seed1+workload.num_requests=4")
    assert said == [f"note: no reference figures: they were measured on batch8-ll / base as written, which --set "
                    f"changes; beside the plain run: {plot} (after specsched run scenarios/batch8-ll.yaml --arm base)"]
    assert main(["run", "scenarios/batch8-ll.yaml"]) == 0
    out = capsys.readouterr().out
    assert "Reference (measured) vs model" in out and "no reference figures" not in out
    assert main(what_if) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "no reference figures" in line][0].endswith(plot)
    assert main(plot.split()[1:]) == 0


def test_a_run_past_the_full_records_says_why_its_peak_output_throughput_is_na(tmp_path, capsys):
    """bench_serving's standard 1,000 prompts of 1K output tokens pass the 1,000,000 output
    tokens above which a run keeps compact records: the peak output token throughput row read
    n/a with no word of why (its whole-second count needs every token's time)."""
    argv = ["run", "poisson8b-fixed", "--set", "workload.num_requests=4000", "--out", str(tmp_path / "big")]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert re.search(r"Peak output token throughput \(tok/s\): +n/a", cap.out)
    assert "Peak output token throughput is n/a: above 1,000,000 output tokens" in cap.err
    assert main(["run", "poisson8b-fixed", "--set", "workload.num_requests=100", "--out", str(tmp_path / "small")]) == 0
    cap = capsys.readouterr()
    assert "n/a" not in cap.out.split("Peak output token throughput")[1].splitlines()[0] and "compact" not in cap.err


def _folder_no_file_can_be_made_in(tmp_path: Path) -> Path:
    """A read-only folder under ``tmp_path``, or /proc where the tests run as root (root writes
    anywhere; /proc refuses every user)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return Path("/proc") if os.access(ro, os.W_OK) else ro


def test_validate_measured_refuses_an_out_no_file_can_be_made_in_before_its_runs(tmp_path, monkeypatch, capsys):
    """``validate --measured F --out /proc/x`` ran every seed and printed its notes, then ended
    with "cannot use /proc/x" naming no option. Now refused before the runs, naming --out."""
    monkeypatch.chdir(tmp_path)
    ro = _folder_no_file_can_be_made_in(tmp_path)
    line = str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.10.jsonl")
    assert main(["validate", "--measured", f"{line}:1", "--profile", "h200-1b", "--out", str(ro / "v")]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert err.startswith("specsched: error: <command line>: --out = ") and "cannot be written" in err, err
    assert len(err.splitlines()) == 1 and "seed" not in cap.out.lower() and not (ro / "v").exists()


def test_calibrate_refuses_an_out_no_file_can_be_made_in_before_its_fit(tmp_path, monkeypatch, capsys):
    """``calibrate --from F --out /sys/f.yaml`` ran the whole fit and printed its table, then
    ended with "cannot write /sys/f.yaml: Permission denied" naming no option. Now refused
    before the fit, naming --out, nothing written."""
    monkeypatch.chdir(tmp_path)
    ro = _folder_no_file_can_be_made_in(tmp_path)
    line = str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.10.jsonl")
    out = str(ro / "f.yaml")
    assert main(["calibrate", "--from", f"{line}:1", "--profile", "h200-1b", "--out", out, "--max-evals", "3"]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert err.startswith(f"specsched: error: <command line>: --out = '{out}': cannot be written: "), err
    assert len(err.splitlines()) == 1 and cap.out == "" and not Path(out).exists(), cap
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]


@pytest.mark.parametrize("argv", [
    ["profile", "--analytic", "--model", "llama-3.1-8b", "--gpu", "H100", "--tp", "1", "--out", "afile/p.yaml"],
    ["scenario", "from-bench", str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.10.jsonl") + ":1", "--profile",
     "h200-1b", "--out", "afile/m.yaml"],
    ["calibrate", "--from", str(ROOT / "tests" / "data" / "bench" / "sglang-0.5.10.jsonl") + ":1", "--profile",
     "h200-1b", "--out", "afile/f.yaml"],
])
def test_an_out_under_a_file_says_the_file_is_not_a_folder(argv, tmp_path, monkeypatch, capsys):
    """``profile`` and ``scenario from-bench`` with ``--out afile/p.yaml`` (``afile`` a file)
    said "cannot write afile: File exists", read as an overwrite refusal; they say what run,
    validate, plot and calibrate say: the file in the way is not a folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep")
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert len(err.splitlines()) == 1 and f"--out = '{argv[-1]}': " in err, err
    assert f"{tmp_path / 'afile'} is a file, not a folder: it cannot hold " in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["afile"] and (tmp_path / "afile").read_text() == "keep"


@pytest.mark.parametrize("where", ["arm", "base"])
def test_a_typo_of_the_steps_beside_an_inherited_window_names_the_typo(where, tmp_path, capsys):
    """An arm ``eagle3`` with ``speculative_num_step: 3`` (a typo) under a base that sets
    ``speculative_num_draft_tokens: 6`` was refused as the window "given without
    server.speculative_num_steps ... (with arm eagle3)": the check across fields ran before
    the unknown key was found. The typo is named, as it is when no window is inherited."""
    arm = "{speculative_algorithm: eagle3, speculative_num_step: 3}"
    server = "{speculative_num_draft_tokens: 6}" if where == "arm" else arm[:-1] + ", speculative_num_draft_tokens: 6}"
    (tmp_path / "s.yaml").write_text(f"""name: s
profile: h200-1b
server: {server}
acceptance: {{mean_accept_length: 2.0}}
workload: {{kind: burst, num_requests: 4, input_len: {{kind: fixed, value: 64}}, output_len: {{kind: fixed, value: 8}}}}
arms:
  base: {{}}
  eagle3:
    server: {arm if where == "arm" else "{}"}
""")
    out = tmp_path / "r"
    assert main(["run", str(tmp_path / "s.yaml"), "--arm", "eagle3", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    key = "arms.eagle3.server" if where == "arm" else "server"
    assert err.count("\n") == 1 and f"{key}.speculative_num_step = 3: unknown key; did you mean " \
        "'speculative_num_steps'?" in err and "given without" not in err, err
    assert not out.exists()
