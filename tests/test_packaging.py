"""The wheel installs outside the checkout and runs a bundled scenario by name from /."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SOURCES = ("pyproject.toml", "README.md", "specsched", "sim", "runtime", "analysis", "profiles", "scenarios")


def _can_build_wheels() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.mark.skipif(not _can_build_wheels(), reason="needs setuptools>=70.1 (the dev extra) to build a wheel offline")
def test_wheel_installs_and_runs_a_bundled_scenario_from_root(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:  # a copy, so building leaves nothing in the checkout
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(p, src / name)
    wheels, site, out = tmp_path / "wheels", tmp_path / "site", tmp_path / "out"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("specsched-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    assert (site / "specsched" / "profiles" / "mi355x-dsv41-flash-tp4.yaml").is_file()
    assert not (site / "sim").exists() and not (site / "analysis").exists()  # one top-level package
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run([sys.executable, "-m", "specsched.cli", "run", "burst256-ht", "--out", str(out)],
                       cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "burst256-ht / base" in r.stdout and (out / "summary.json").is_file()
    r = subprocess.run([sys.executable, "-c", "import specsched.cli; print(specsched.cli.__file__)"],
                       cwd="/", env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().startswith(str(site))  # the installed copy, not the checkout
