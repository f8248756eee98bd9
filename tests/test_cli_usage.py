"""The command line as a person meets it: --version, plain help with examples, lazy imports,
python -m specsched, Ctrl-C (a real SIGINT to a real process), the user's umask."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from specsched.cli import COMMANDS, build_parser, main
from tests.conftest import ROOT
from tests.test_cli_and_io import small_scenario

HEAVY = ("torch", "matplotlib", "dask", "distributed", "scipy")


def _run(*args: str, cwd=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=cwd or ROOT, **kw)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("specsched ")


def test_the_version_is_looked_up_only_when_asked_for():
    # importlib.metadata and the distribution lookup cost every command 20-30 ms of CPU
    code = ("import sys\nfrom specsched.cli import build_parser\nbuild_parser(['--help'])\n"
            "print('importlib.metadata' in sys.modules)\nimport specsched\n"
            "print(specsched.__version__ == __import__('importlib.metadata').metadata.version('specsched'))\n")
    r = _run("-c", code)
    assert r.stdout.split() == ["False", "True"], r.stdout + r.stderr


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_is_plain_text_with_a_description_and_examples(command, capsys):
    argv = [command, "--help"] if command else ["--help"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    text = capsys.readouterr().out
    assert e.value.code == 0
    assert "``" not in text and ":func:" not in text and ":mod:" not in text
    assert "examples:" in text and "specsched " in text.split("examples:")[1]
    body = text.split("\n\n")[1]  # the paragraph after usage: the description
    assert len(body.split()) >= 4, body


def test_importing_the_cli_and_a_bad_scenario_import_nothing_heavy(tmp_path):
    code = ("import sys\nfrom specsched.cli import build_parser, main\nbuild_parser(['--help'])\n"
            f"rc = main(['run', {str(tmp_path / 'missing.yaml')!r}])\n"
            f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = _run("-c", code)
    assert r.stdout.strip() == "2 []", r.stdout + r.stderr


def test_python_dash_m_specsched(tmp_path):
    r = _run("-m", "specsched", "run", str(small_scenario(tmp_path)), "--out", str(tmp_path / "o"))
    assert r.returncode == 0 and "Serving Benchmark Result" in r.stdout and (tmp_path / "o" / "summary.json").is_file()
    assert r.stderr == ""  # not a terminal: no progress bar


def test_unknown_command_is_one_usage_error(tmp_path):
    r = _run("-m", "specsched", "rnu", "x")
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(tmp_path):
    text = (ROOT / "scenarios" / "poisson8b-fixed.yaml").read_text()
    text = text.replace("num_requests: 1000", "num_requests: 300000")
    text = text.replace("profile: h200-llama8b-roofline", f"profile: {ROOT / 'profiles' / 'h200-llama8b-roofline.yaml'}")
    path = tmp_path / "long.yaml"
    path.write_text(text)
    out = tmp_path / "res"
    # started as a shell starts it, Ctrl-C at its default: a child inherits an ignored SIGINT, and
    # Python then installs no KeyboardInterrupt (a pytest-xdist worker had SIGINT ignored once its
    # collection was done: the run went on to its end and exited 0)
    p = subprocess.Popen([sys.executable, "-m", "specsched", "run", str(path), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3.0)  # past the imports, inside the simulation (which takes far longer)
    assert p.poll() is None, "finished before the signal: make the workload longer"
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert stderr.strip() == "specsched: interrupted"
    assert not out.exists() and not [q for q in tmp_path.iterdir() if q.name.startswith(".res")]


def test_parser_lists_every_command():
    assert set(COMMANDS) <= set(build_parser(["--help"])._subparsers._group_actions[0].choices)


def test_results_follow_the_users_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "r"
        assert main(["run", str(small_scenario(tmp_path)), "--out", str(out), "-q"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "summary.json").stat().st_mode) == 0o644


def test_progress_on_a_terminal_and_quiet_with_q(tmp_path, monkeypatch):
    """A bar on stderr when it is a terminal; none with -q (the one-second delay set to 0)."""
    import io

    import specsched.cli as cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(cli, "PROGRESS_DELAY_S", 0.0)
    path = small_scenario(tmp_path, **{"num_requests: 10": "num_requests: 300", "concurrency: 8": "concurrency: 64"})
    seen = []
    for extra in ([], ["-q"]):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["run", str(path), "--out", str(tmp_path / "o"), *extra]) == 0
        seen.append(err.getvalue())
    assert "simulate" in seen[0] and "req" in seen[0], seen[0]
    assert seen[1] == ""


def test_compare_and_a_local_sweep_import_no_matplotlib_dask_or_torch(tmp_path):
    code = ("import sys\nfrom specsched.cli import main\n"
            "a = main(['compare', 'batch8-ll', '--arms', 'base,stream_wait', '--seeds', '1', '--set', 'workload.num_requests=4', '-q'])\n"
            f"b = main(['sweep', 'batch8-ll', '--grid', 'server.chunked_prefill_size=8192,4096', '--set', 'workload.num_requests=4', "
            f"'--workers', '1', '-q', '--out', {str(tmp_path / 's.parquet')!r}])\n"
            "print(a, b, sorted(m for m in ('torch', 'matplotlib', 'dask', 'distributed') if m in sys.modules))\n")
    r = _run("-c", code, cwd=tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "0 0 []", r.stdout + r.stderr


def test_a_speculative_run_imports_no_scipy_torch_matplotlib_or_dask(tmp_path):
    """The accept-length model solves its rates without scipy (sim.acceptance's own brentq,
    expit and logit): a spec run pays no scipy import at start-up."""
    code = ("import sys\nfrom specsched.cli import main\n"
            f"rc = main(['run', 'burst256-ht', '--set', 'workload.num_requests=4', '-q', '--out', {str(tmp_path / 'o')!r}])\n"
            f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = _run("-c", code, cwd=tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "0 []", r.stdout + r.stderr


def test_output_piped_into_a_reader_that_stops_early_ends_quietly() -> None:
    """``specsched ... | head``: the reader closes the pipe; the command stops with the
    SIGPIPE status (141) and no traceback."""
    import subprocess
    import sys

    code = ("import argparse, sys\nimport specsched.cli as c\n"
            "class P:\n    def parse_args(self, argv):\n"
            "        return argparse.Namespace(func=lambda a: [print('x' * 100) for _ in range(200000)])\n"
            "    def parse_known_args(self, argv):\n        return self.parse_args(argv), []\n"
            "c.build_parser = lambda argv: P()\nsys.exit(c.main([]))\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141
    assert b"Traceback" not in err and b"BrokenPipe" not in err


BENCHMARKS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS)
def test_every_benchmark_script_prints_its_help(script, capsys, monkeypatch):
    """``python benchmarks/X.py --help`` exits 0 with a usage line: a help string with a bare
    ``%`` (argparse formats help with %) made one script's --help a traceback."""
    import importlib.util
    import runpy

    monkeypatch.setattr(sys, "argv", [script, "--help"])
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    guarded = "import specsched.runtime._requires_torch" in (ROOT / "benchmarks" / script).read_text()
    if guarded and importlib.util.find_spec("torch") is None:   # a checkout without the runtime extra
        monkeypatch.delitem(sys.modules, "specsched.runtime._requires_torch", raising=False)
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(ROOT / "benchmarks" / script), run_name="__main__")
        assert e.value.code == 2 and "needs torch" in capsys.readouterr().err
        return
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(ROOT / "benchmarks" / script), run_name="__main__")
    assert e.value.code in (0, None)
    assert "usage:" in capsys.readouterr().out


def test_a_script_that_needs_torch_says_so_in_one_line_without_it(capsys, monkeypatch):
    """Every benchmark script that imports the runtime imports runtime/_requires_torch.py first:
    without torch it ends in one line naming the install, exit 2 (it was a ModuleNotFoundError
    traceback from whichever runtime module imported torch first)."""
    import runpy

    guard = "import specsched.runtime._requires_torch"
    guarded = {s: (ROOT / "benchmarks" / s).read_text().splitlines() for s in BENCHMARKS}
    guarded = {s: lines for s, lines in guarded.items() if any(ln.startswith(guard) for ln in lines)}
    assert {"gpu_validate.py", "cuda_plan_check.py", "extend_shape_cost.py"} <= set(guarded)
    for s, lines in guarded.items():   # the guard runs before anything that imports torch
        first = next(i for i, ln in enumerate(lines) if ln.startswith(guard))
        assert not any(ln.startswith(("import torch", "from specsched.runtime")) for ln in lines[:first]), s
    monkeypatch.setitem(sys.modules, "torch", None)   # torch not importable, as without the runtime extra
    monkeypatch.setattr(sys, "argv", ["gpu_validate.py", "--help"])
    monkeypatch.delitem(sys.modules, "specsched.runtime._requires_torch", raising=False)
    with pytest.raises(SystemExit) as e:
        runpy.run_module("specsched.runtime._requires_torch")
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gpu_validate.py: error: this script needs torch, which is not installed: "
                   "pip install 'specsched[runtime]' (in a checkout: pip install -e '.[runtime]')"], err


def test_an_option_of_one_value_given_twice_with_two_values_is_refused(capsys):
    """argparse keeps the last of an option given twice: ``calibrate --from ... --server-log
    prefill.log --server-log decode.log`` fitted to decode.log alone, ``--from a.jsonl --from
    b.jsonl`` to b alone, without a word. Refused in one line naming both values, exit 2; the
    same value twice is no conflict."""
    with pytest.raises(SystemExit) as e:
        main(["calibrate", "--from", "a.jsonl", "--profile", "h200-1b", "--server-log", "p.log",
              "--server-log", "d.log", "--out", "x.yaml"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--server-log" in err and "p.log" in err and "d.log" in err
    with pytest.raises(SystemExit) as e:
        main(["calibrate", "--from", "a.jsonl", "--from", "b.jsonl", "--profile", "h200-1b", "--out", "x.yaml"])
    assert e.value.code == 2 and "--from" in capsys.readouterr().err.strip().splitlines()[-1]
    # the same value twice (a script that adds a default it also passes): read as given
    argv = ["run", "x.yaml", "--format", "csv", "--format", "csv"]
    assert build_parser(argv).parse_known_args(argv)[0].format == "csv"
