"""Load a user-written policy class named in a scenario (``module.path:Class`` or
``path/to/file.py:Class``).

A scenario may name, instead of a shipped policy, a Python class of the user's own
(docs/policies.md): ``server.admission_delay: mypkg.rules:MyDelay`` or
``server.admission_delay: rules/my_delay.py:MyDelay``. A module path is imported through
``sys.path``, then (if not found there) from the scenario's folder and the working
directory; a file path is relative to the scenario's folder, then the working directory.
The class must have the methods of its kind (checked here, so a scenario with a bad
policy fails at load with one line, not mid-run).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specsched.sim.input_files import is_stream

USER_POLICY_FILES: dict[str, str] = {}
"""Source file -> policy spec of every user policy loaded in this process (an exception
raised inside one of these files is the user's code failing, not the simulator's)."""


def user_policy_specs(server: Any) -> tuple[str, ...]:
    """The user policies (``module:Class`` / ``file.py:Class`` specs) a server's arguments name:
    its ``admission_delay`` and ``schedule_policy`` where they are not shipped names."""
    return tuple(v for v in (server.admission_delay, server.schedule_policy) if isinstance(v, str) and ":" in v)


def user_policy_failure(exc: BaseException) -> str | None:
    """One line for an exception raised inside a loaded user policy's code: the spec, the
    exception and the innermost line of the user's file it passed through; None when no
    frame of ``exc`` (or of the exceptions it was raised from) is in a user policy file."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        tb, hit = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in USER_POLICY_FILES:
                hit = tb
            tb = tb.tb_next
        if hit is not None:
            f = hit.tb_frame.f_code
            return (f"policy {USER_POLICY_FILES[f.co_filename]} raised {type(e).__name__}: {e} "
                    f"({Path(f.co_filename).name} line {hit.tb_lineno}, in {f.co_name})")
        # a run in a worker process: its traceback comes back as text (concurrent.futures
        # _RemoteTraceback.tb, or a run's formatted error inside the message of the
        # exception that reports it, analysis/runner.py)
        remote = getattr(e, "tb", None)
        remote = remote if isinstance(remote, str) else str(e)
        if USER_POLICY_FILES and 'File "' in remote:
            lines = [m for m in _FRAME_LINE.finditer(remote) if m.group(1) in USER_POLICY_FILES]
            if lines:
                path, line, fn = lines[-1].groups()
                last = remote.strip().splitlines()[-1]
                return f"policy {USER_POLICY_FILES[path]} raised {last} ({Path(path).name} line {line}, in {fn})"
        e = e.__cause__ or e.__context__
    return None


_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


class PolicyLoadError(ValueError):
    """A policy spec that does not import, or names a class without the interface.
    The message says what was wrong and what is allowed (one line)."""


def is_policy_spec(value: str) -> bool:
    """True when ``value`` names a user class (``module:Class``) rather than a shipped policy."""
    return ":" in value


def _split(spec: str) -> tuple[str, str]:
    target, _, cls_name = spec.rpartition(":")
    if not target or not cls_name.isidentifier():
        raise PolicyLoadError(f"expected 'module.path:Class' or 'path/to/file.py:Class', got {spec!r}")
    return target, cls_name


def _search_dirs(base_dir: Path | None) -> list[Path]:
    dirs = [base_dir] if base_dir is not None else []
    return [*dirs, Path.cwd()]


def _candidates(target: str, base_dir: Path | None) -> list[Path]:
    p = Path(target).expanduser()
    return [p] if p.is_absolute() else [d / p for d in _search_dirs(base_dir)]


def policy_file(target: str, base_dir: str | Path | None) -> Path | None:
    """The file a ``FILE.py:Class`` spec's ``target`` names, as the loader finds it: as given
    when absolute, else in the scenario's folder ``base_dir``, then the working directory;
    None where none is a file."""
    return next((c.resolve() for c in _candidates(target, Path(base_dir) if base_dir else None) if c.is_file()),
                None)


def _import_file(target: str, base_dir: Path | None) -> Any:
    cands = _candidates(target, base_dir)
    path = policy_file(target, base_dir)
    stream = next((c for c in cands if is_stream(c)), None)
    if path is None and stream is not None:   # <(cat rules.py), /dev/stdin, a named pipe: Python imports files
        raise PolicyLoadError(f"policy file {target} is not a regular file (a pipe or a device): the policy must be "
                              "importable, so give the .py file on disk (e.g. my_rules.py:MyDelay)")
    if path is None:
        raise PolicyLoadError(f"policy file {target} not found (looked in: {', '.join(str(c.parent) for c in cands)})")
    stat = path.stat()
    digest = hashlib.sha1(f"{path}:{stat.st_mtime_ns}:{stat.st_size}".encode()).hexdigest()[:12]
    name = f"specsched_user_policy_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"cannot import {path} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling look their module up here
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise PolicyLoadError(f"importing {path} failed: {type(e).__name__}: {e}") from None
    return mod


def _import_module(target: str, base_dir: Path | None) -> Any:
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name is None or not target.startswith(e.name.split(".")[0]):
            raise PolicyLoadError(f"importing {target} failed: {e}") from None
    except Exception as e:
        raise PolicyLoadError(f"importing {target} failed: {type(e).__name__}: {e}") from None
    # not on sys.path: try the scenario's folder and the working directory
    extra = [str(d) for d in _search_dirs(base_dir)]
    saved = list(sys.path)
    sys.path[:0] = extra
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        raise PolicyLoadError(f"module {target} not found (sys.path, {', '.join(extra)}): {e}") from None
    except Exception as e:
        raise PolicyLoadError(f"importing {target} failed: {type(e).__name__}: {e}") from None
    finally:
        sys.path[:] = saved


def load_policy_class(spec: str, required: Iterable[str], base_dir: str | Path | None = None) -> type:
    """The class named by ``spec``, checked for the ``required`` attributes.

    Args:
        spec: ``module.path:Class`` or ``path/to/file.py:Class``.
        required: method names the class must have (callable attributes).
        base_dir: the scenario's folder (relative file paths and module fallbacks resolve
            there first); None: the working directory only.

    Raises:
        PolicyLoadError: the spec is malformed, the module or file does not import, the
            name is missing or not a class, or a required method is missing.
    """
    target, cls_name = _split(spec)
    base = Path(base_dir) if base_dir is not None else None
    looks_like_file = target.endswith(".py") or "/" in target or "\\" in target
    mod = _import_file(target, base) if looks_like_file else _import_module(target, base)
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise PolicyLoadError(f"{target} has no class {cls_name}")
    if not isinstance(cls, type):
        raise PolicyLoadError(f"{target}:{cls_name} is a {type(cls).__name__}, not a class")
    missing = [m for m in required if not callable(getattr(cls, m, None))]
    if missing:
        raise PolicyLoadError(f"class {cls_name} lacks {', '.join(missing)}; a policy class needs {', '.join(required)} "
                              "(or subclass the base class, docs/policies.md)")
    src = getattr(mod, "__file__", None)
    if src and not getattr(mod, "__name__", "").startswith("specsched."):
        USER_POLICY_FILES[src] = spec
    return cls


def make_named_policy(server: Any, key: str, shipped: dict[str, type], required: Iterable[str], kind: str,
                      seed: int = 0, scenario_path: str | None = None) -> Any:
    """Build the policy ``server.<key>`` names: a shipped one (``shipped``, by name) or a user
    class (``module.path:Class`` / ``file.py:Class``, which must have the ``required``
    methods), with ``server.<key>_params`` as ``from_server`` keywords. The one builder of
    both kinds of policy a scenario names (``admission_delay``, ``schedule_policy``): they
    differ in their table and interface only. ``kind`` names the shipped ones in the refusal
    of parameters ("policies", "orders").

    Raises:
        ConfigError: the class does not import or lacks the interface (key ``server.<key>``),
            parameters for a shipped one, or ``from_server`` rejects them (``server.<key>_params``).
    """
    from specsched.sim.errors import ConfigError

    spec = getattr(server, key)
    where = scenario_path or "<server>"
    try:
        if is_policy_spec(spec):
            cls = load_policy_class(spec, required, Path(scenario_path).parent if scenario_path else None)
        else:
            cls = shipped[spec]
    except PolicyLoadError as e:
        raise ConfigError(where, f"server.{key}", spec, str(e)) from None
    params = dict(getattr(server, f"{key}_params", {}) or {})
    if params and not is_policy_spec(spec):
        raise ConfigError(where, f"server.{key}_params", params,
                          f"the shipped {kind} take no parameters; these are keywords for a user class "
                          f"'module.path:Class' / 'file.py:Class' named by server.{key} (docs/policies.md)")
    try:
        return cls.from_server(server, seed=seed, **params)
    except TypeError as e:
        raise ConfigError(where, f"server.{key}_params", params,
                          f"{cls.__name__}.from_server rejected them: {e}") from None
