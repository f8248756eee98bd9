"""What `specsched run` spends besides its run (docs/performance.md, "Start-up of `specsched
run`"), each checked in a fresh process:

- the program (``specsched.cli.script``) runs ``run`` with one OpenBLAS thread unless the
  environment names a count, and with the cyclic collector off to the end and the survivors
  frozen; every other command keeps both as they are;
- a run imports no numpy.ma (bench_serving's peaks took np.unique, whose NaN check imports it);
- the analytic model class is not built for a run (only its architecture tables are read);
- loading a scenario parses no builtin's text signature (pydantic reads a private
  attribute's default factory's signature, and list's is parsed by tokenize).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT
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


def test_a_run_imports_no_numpy_ma_builds_no_model_arch_and_parses_no_signature(tmp_path):
    code = ("import sys, tokenize\n"
            "parsed = []\n"
            "real = tokenize._compile\n"
            "tokenize._compile = lambda *a: parsed.append(a) or real(*a)\n"
            "from specsched.cli import main\n"
            f"rc = main(['run', {str(small_scenario(tmp_path))!r}, '-q', '--out', {str(tmp_path / 'o')!r}])\n"
            "from specsched.sim.analytic.models import ModelArch\n"
            "print(rc, 'numpy.ma' in sys.modules, ModelArch.__pydantic_complete__, len(parsed))\n")
    assert _python(code, ROOT) == ["0", "False", "False", "0"]
