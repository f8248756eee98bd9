"""Results and sweeps under faults, with real signals against real processes: kill -9 at
every filesystem step of a results write and of a sweep save leaves the old or the new
complete results; SIGTERM/SIGINT end a sweep with a final save, no worker left, exit
143/130; concurrent writers are serialised; a read-only place is refused before any run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from specsched.analysis.io import empty_table, read_results
from specsched.analysis.sweep import read_sweep
from specsched.analysis.sweep_store import read_run_log, read_samples, run_log_path
from specsched.analysis.synthetic import write_demo_scenario
from specsched.sim.records import RunResult
from specsched.sim.results import write_results

from tests.conftest import ROOT

CRASH_CHILD = Path(__file__).with_name("crash_child.py")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _tiny_run(seed: int) -> RunResult:
    req = pd.DataFrame({"rid": [0, 1], "input_len": [4, 4], "output_len": [2, 3], "start_s": [0.0, 0.0],
                        "first_token_s": [0.1, 0.2], "finish_s": [0.3, 0.4], "ttft_s": [0.1, 0.2],
                        "e2e_s": [0.3, 0.4], "tpot_s": [0.2, 0.1], "accept_level": [1.0, 1.0],
                        "spec_cycles": [1, 2], "retractions": [0, 0]})
    return RunResult(req, pd.DataFrame({"rid": [0], "time_s": [0.1], "n_tokens": [1]}),
                     empty_table("steps"), empty_table("timeseries"), {"seed": seed})


# ---------------------------------------------------------------- kill -9 at every step

@pytest.mark.parametrize("mode", ["results", "sweep"])
def test_kill_9_at_every_filesystem_step_keeps_old_or_new_results(tmp_path, mode):
    """tests/crash_child.py writes the old results, then for k = 1, 2, ... forks a writer of
    the new results that SIGKILLs itself before its k-th filesystem call (rename, replace,
    mkdir, unlink, rmdir, open for writing, write, fsync, a table written), and a checker
    that reads back: the old or the new complete results, and after the next write nothing
    stray. It ends when a writer gets through every step."""
    p = subprocess.run([sys.executable, str(CRASH_CHILD), mode, str(tmp_path)], capture_output=True, text=True,
                       env=_env(), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["steps"] >= (12 if mode == "results" else 5)  # every step was a kill point
    assert report["killed"] == report["steps"] and set(report["seen"]) == {"old", "new"}


# ---------------------------------------------------------------- lock, umask

def test_concurrent_writers_are_serialised_with_a_message(tmp_path):
    out = tmp_path / "res"
    release = tmp_path.parent / f"{tmp_path.name}-release"
    write_results(_tiny_run(1), out)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys, time; from specsched.sim.atomic import target_lock\n"
         "with target_lock(sys.argv[1]):\n    print('held', flush=True)\n"
         "    while not os.path.exists(sys.argv[2]): time.sleep(0.05)\n", str(out), str(release)],
        stdout=subprocess.PIPE, text=True, env=_env())
    assert holder.stdout.readline().strip() == "held"
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\n"
         "from specsched.analysis.io import read_results; from specsched.sim.results import write_results\n"
         "r = read_results(sys.argv[1]); r.summary['seed'] = 2; write_results(r, sys.argv[1])\n", str(out)],
        stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = writer.stderr.readline()  # printed while it waits
        assert read_results(out).summary["seed"] == 1  # nothing written while the lock is held
    finally:
        release.write_text("")
        holder.wait(30)
    rest = writer.communicate(timeout=60)[1]
    assert writer.returncode == 0, line + rest
    assert f"waiting for process {holder.pid}" in line and str(out) in line and not rest
    assert read_results(out).summary["seed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    release.unlink()


def test_results_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = write_results(_tiny_run(1), tmp_path / "res")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o755
    assert (out / "summary.json").stat().st_mode & 0o777 == 0o644
    assert (out / "requests.parquet").stat().st_mode & 0o777 == 0o644


def test_interrupted_swap_is_completed_by_the_next_reader(tmp_path):
    out = tmp_path / "res"
    write_results(_tiny_run(1), out)
    # the state after a kill between the two renames: out gone, old and new beside it
    new = tmp_path / ".res.new-1-x"
    write_results(_tiny_run(2), new)
    os.rename(out, tmp_path / ".res.old-1-x")
    (tmp_path / ".res.journal").write_text(json.dumps({"new": new.name, "old": ".res.old-1-x"}))
    assert read_results(out).summary["seed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


# ---------------------------------------------------------------- sweeps and signals

def _sweep_cmd(scenario: Path, out: Path, values: int) -> list[str]:
    sizes = ",".join(str(2048 + 64 * i) for i in range(values))
    return [sys.executable, "-m", "specsched.cli", "sweep", str(scenario), "--grid",
            f"server.chunked_prefill_size={sizes}", "--set", "workload.num_requests=300",
            "--workers", "2", "--no-progress", "--out", str(out)]


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parent[int(d.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def _alive(pids: set[int]) -> set[int]:
    left = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.add(p)
    return left


def _wait_for_logged_runs(out: Path, proc: subprocess.Popen, n: int = 1) -> int:
    log = run_log_path(out)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return len(log.read_text().splitlines())
        time.sleep(0.1)
    raise AssertionError("no run finished in time")


def _gone(pids: set[int], within_s: float = 15.0) -> set[int]:
    deadline = time.monotonic() + within_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process trees from /proc")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_saves_finished_runs_stops_workers_and_exits_128_plus_signal(tmp_path, sig, code):
    scenario = write_demo_scenario(tmp_path / "demo.yaml")
    out = tmp_path / "sweep.parquet"
    proc = subprocess.Popen(_sweep_cmd(scenario, out, 40), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(), start_new_session=True)
    try:
        logged = _wait_for_logged_runs(out, proc)
        workers = _children(proc.pid)
        assert workers
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    # the runs' own warning lines (the demo's short prompts are below the profile's measured
    # contexts) may come first; the interruption is one line
    lines = [x for x in err.strip().splitlines() if x and not x.startswith("warning: ")]
    assert len(lines) == 1 and signal.Signals(sig).name in lines[0] and "resume" in lines[0], err
    assert "Traceback" not in err
    assert not _gone(workers), "worker processes left behind"
    table = read_sweep(out)
    runs = table.groupby(["point", "seed"]).ngroups
    assert runs >= logged
    assert read_samples(out).groupby(["point", "seed"]).ngroups == runs  # every saved run's latency samples
    assert not run_log_path(out).exists()


HALF_SENT_CHILD = """
import os, struct, sys, time
from specsched.analysis.stop_signals import stop_pool
from specsched.analysis.sweep import _resolve_executor

def half_sent_result(sent):
    # a worker's result as far as a worker terminated midway through sending it got: the
    # message's length, then a part of it, written to the pool's result pipe
    frame = sys._getframe()
    while frame.f_code.co_name != "_process_worker":
        frame = frame.f_back
    os.write(frame.f_locals["result_queue"]._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 100)
    open(sent, "w").close()
    time.sleep(600)

if __name__ == "__main__":
    ex, owned = _resolve_executor(None, 1)
    sent = sys.argv[1]
    fut = ex.submit(half_sent_result, sent)
    while not os.path.exists(sent):
        time.sleep(0.05)
    time.sleep(0.5)                   # the pool's manager thread reads it and waits for the rest
    assert not fut.done()
    stop_pool(ex)
    print("stopped", flush=True)
"""


def test_a_pool_stopped_while_a_worker_sends_its_result_lets_the_process_exit(tmp_path):
    """A worker terminated midway through sending its result (a run's outcome is larger than a
    pipe holds) left the pool's manager thread reading the rest of it; the process, joining
    that thread at exit, then never ended (a sweep sent SIGTERM on a loaded machine)."""
    script = tmp_path / "half_sent.py"
    script.write_text(HALF_SENT_CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "sent")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out, err = "", "did not exit"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == 0 and out.strip() == "stopped", err[-3000:]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process trees from /proc")
def test_kill_9_of_a_sweep_loses_no_finished_run_and_leaves_no_worker(tmp_path):
    scenario = write_demo_scenario(tmp_path / "demo.yaml")
    out = tmp_path / "sweep.parquet"
    proc = subprocess.Popen(_sweep_cmd(scenario, out, 40), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=_env(), start_new_session=True)
    try:
        logged = _wait_for_logged_runs(out, proc, 2)
        workers = _children(proc.pid)
        proc.kill()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _gone(workers), "worker processes outlived their killed parent"
    # the next sweep takes the runs the killed one finished (resume) and runs only the rest
    saved = read_run_log(run_log_path(out))[0].groupby(["point", "seed"]).ngroups
    assert saved >= logged
    # resumed in-process with a stand-in runner: which runs it skips is what matters here
    from concurrent.futures import ThreadPoolExecutor

    from specsched.analysis.sweep import run_sweep

    calls = []

    def runner(sc, seed):  # pragma: no cover - called in a thread
        calls.append(sc.server.chunked_prefill_size)
        return {"x": 1.0}

    rep = run_sweep(scenario, {"server.chunked_prefill_size": [2048 + 64 * i for i in range(40)]}, 1, out,
                    executor=ThreadPoolExecutor(1), runner=runner, progress=False,
                    overrides={"workload.num_requests": 300})
    assert rep.skipped == saved and rep.ran == 40 - saved and len(calls) == 40 - saved
    assert not run_log_path(out).exists()


def test_unwritable_out_is_refused_before_any_run(tmp_path, capsys):
    from specsched.cli import main

    scenario = write_demo_scenario(tmp_path / "demo.yaml")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "sweep.parquet"  # a file where the directory should be
    assert main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048", "--out", str(out),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "cannot write" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_out_directory_is_refused_before_any_run(tmp_path, capsys):
    from specsched.cli import main

    scenario = write_demo_scenario(tmp_path / "demo.yaml")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["sweep", str(scenario), "--grid", "server.chunked_prefill_size=2048",
                     "--out", str(ro / "s.parquet"), "--no-progress"]) == 2
    finally:
        ro.chmod(0o755)
    assert "cannot write" in capsys.readouterr().err
