"""What `specsched run` spends besides its run (docs/performance.md, "Start-up of `specsched
run`"), each checked in a fresh process:

- the program (``specsched.cli.script``) runs ``run`` with one OpenBLAS thread unless the
  environment names a count, and with the cyclic collector off to the end and the survivors
  frozen; every other command keeps both as they are;
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.test_cli_and_io import small_scenario


def _python(code: str, cwd, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd,
                       env={**clean, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()[-1].split()


def _script(argv: list[str]) -> str:
    return ("import gc, os, sys\n"
            f"sys.argv = ['specsched', *{argv!r}]\n"
            "from specsched.cli import script\n"
            "rc = script()\n"
            "print(rc, gc.isenabled(), gc.get_freeze_count() > 0, os.environ.get('OPENBLAS_NUM_THREADS'))\n")


def test_the_program_runs_a_run_with_one_blas_thread_and_no_collections(tmp_path):
    argv = ["run", str(small_scenario(tmp_path)), "-q", "--out", str(tmp_path / "o")]
    assert _python(_script(argv), tmp_path) == ["0", "False", "True", "1"]
    assert (tmp_path / "o" / "summary.json").is_file()
    # a count the user set is theirs
    assert _python(_script(argv), tmp_path, OPENBLAS_NUM_THREADS="3") == ["0", "False", "True", "3"]


def test_the_program_leaves_other_commands_as_they_were(tmp_path):
    assert _python(_script(["schema"]), tmp_path) == ["0", "True", "False", "None"]

