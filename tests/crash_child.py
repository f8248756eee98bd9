"""Kill -9 at every filesystem step of a write (run by tests/test_results_faults.py).

Usage: python tests/crash_child.py {results|sweep} DIR

For k = 1, 2, ...: a forked child sets up the old results, a forked writer writes the new
ones and SIGKILLs itself just before its k-th filesystem call, and a forked checker reads
what is there (it must be the old or the new complete results), lets the next writer finish
or clean up, and checks that nothing stray is left. Every piece of work runs in a fresh fork
of this process (which itself never writes, so no library thread pool is copied mid-use).
Prints one JSON line: ``{"steps": N, "killed": K, "seen": [...]}``; exit 1 on a violation.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

_state = {"k": 0, "n": 0}


def _step() -> None:
    _state["n"] += 1
    if _state["n"] == _state["k"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _hook(owner: object, name: str, when=None) -> None:
    orig = getattr(owner, name)

    def wrapped(*a, **kw):
        if when is None or when(*a, **kw):
            _step()
        return orig(*a, **kw)

    setattr(owner, name, wrapped)


def install_hooks(k: int) -> None:
    """Count (and at the k-th, die before) every call that changes the filesystem."""
    _state["k"] = k
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    for name in ("rename", "replace", "mkdir", "unlink", "rmdir", "fsync", "write", "pwrite", "ftruncate"):
        _hook(os, name)
    _hook(os, "open", lambda path, flags, *a, **kw: bool(flags & writes))
    _hook(pd.DataFrame, "to_parquet")
    _hook(pd.DataFrame, "to_csv")
    _hook(pq, "write_table")
    _hook(Path, "write_text")


def in_fork(fn) -> int:
    """Run ``fn()`` in a forked child; returns its wait status."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported through the exit status
            print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


# ---------------------------------------------------------------- results directories

def _run(seed: int, n: int):
    from specsched.analysis.io import empty_table
    from specsched.sim.records import RunResult

    req = pd.DataFrame({"rid": range(n), "input_len": [4] * n, "output_len": [2] * n, "start_s": [0.0] * n,
                        "first_token_s": [0.1] * n, "finish_s": [0.3] * n, "ttft_s": [0.1] * n, "e2e_s": [0.3] * n,
                        "tpot_s": [0.2] * n, "accept_level": [1.0] * n, "spec_cycles": [1] * n,
                        "retractions": [0] * n})
    chunks = pd.DataFrame({"rid": range(n), "time_s": [0.1] * n, "n_tokens": [1] * n})
    return RunResult(req, chunks, empty_table("steps"), empty_table("timeseries"),
                     {"seed": seed, "completed": n}, scenario={"name": "crash", "seed": seed})


def results_case(root: Path):
    from specsched.analysis.io import read_results
    from specsched.sim.atomic import recover_dir
    from specsched.sim.results import write_results

    out = root / "res"
    old, new = _run(1, 3), _run(2, 5)

    def setup() -> None:
        write_results(old, out)

    def write() -> None:
        write_results(new, out)

    def check() -> None:
        r = read_results(out)
        seed = r.summary["seed"]
        want = {1: old, 2: new}[seed]
        pd.testing.assert_frame_equal(r.requests, want.requests, check_dtype=False)
        assert r.summary["completed"] == len(want.requests)
        recover_dir(out)
        r2 = read_results(out)
        assert r2.summary["seed"] in (1, 2)
        write_results(r2, out)  # the next writer: nothing stray afterwards
        left = sorted(os.listdir(root))
        assert left == ["res"], left
        print("old" if seed == 1 else "new", file=sys.stderr, flush=True)

    return setup, write, check


# ---------------------------------------------------------------- sweeps

def _runner(scenario, seed):
    return {"v": float(scenario.server.chunked_prefill_size) + seed}


class _Now:
    """An executor that runs each task when it is submitted (no threads in the child)."""

    def submit(self, fn, *a):
        from concurrent.futures import Future

        f: Future = Future()
        f.set_result(fn(*a))
        return f


def sweep_case(root: Path):
    from specsched.analysis.sweep import read_sweep, run_sweep
    from specsched.analysis.synthetic import write_demo_scenario

    sdir = root / "scenario"
    sdir.mkdir(exist_ok=True)
    scenario = write_demo_scenario(sdir / "demo.yaml")
    odir = root / "out"
    out = odir / "sweep.parquet"
    old_grid = {"server.chunked_prefill_size": [2048, 4096]}
    new_grid = {"server.chunked_prefill_size": [2048, 4096, 8192]}

    def sweep(grid) -> None:
        run_sweep(scenario, grid, 2, out, executor=_Now(), runner=_runner, progress=False)

    def setup() -> None:
        if out.exists():
            os.unlink(out)
        sweep(old_grid)

    def check() -> None:
        t = read_sweep(out)
        runs = set(zip(t["server.chunked_prefill_size"], t["seed"], strict=True))
        old = {(c, s) for c in old_grid["server.chunked_prefill_size"] for s in (1, 2)}
        new = {(c, s) for c in new_grid["server.chunked_prefill_size"] for s in (1, 2)}
        assert runs in (old, new), runs
        assert (t["value"] == t["server.chunked_prefill_size"] + t["seed"]).all()
        sweep(new_grid)  # resume: completes from what was saved
        t = read_sweep(out)
        assert set(zip(t["server.chunked_prefill_size"], t["seed"], strict=True)) == new
        assert (t["value"] == t["server.chunked_prefill_size"] + t["seed"]).all()
        left = sorted(os.listdir(odir))
        assert left == ["sweep.parquet", "sweep.samples.parquet"], left
        print("old" if runs == old else "new", file=sys.stderr, flush=True)

    return setup, lambda: sweep(new_grid), check


def main() -> int:
    mode, root = sys.argv[1], Path(sys.argv[2])
    # kill -9 does not lose what is in the page cache, so flushing to disk changes nothing
    # here: fsync stays a kill point (counted) but does no I/O, which keeps this test fast
    os.fsync = lambda fd: None
    setup, write, check = (results_case if mode == "results" else sweep_case)(root)
    seen: set[str] = set()
    killed = 0
    k = 0
    while True:
        k += 1
        if in_fork(setup) != 0:
            print(f"setup failed at k={k}")
            return 1

        def killing_write(k: int = k) -> None:
            install_hooks(k)
            write()

        status = in_fork(killing_write)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            killed += 1
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            break
        else:
            print(f"writer failed at k={k}: status {status}")
            return 1
        r, w = os.pipe()

        def checked(w: int = w) -> None:
            os.dup2(w, 2)
            check()

        status = in_fork(checked)
        os.close(w)
        msg = os.read(r, 4096).decode().strip()
        os.close(r)
        if status != 0:
            print(f"after a kill at filesystem step {k}: {msg}")
            return 1
        seen.add(msg.splitlines()[-1])
    print(json.dumps({"steps": k - 1, "killed": killed, "seen": sorted(seen)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
