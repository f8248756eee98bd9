"""Crash-safe writes: every file and results directory specsched writes goes through here.

What survives ``kill -9`` (or a power cut after the data reached the disk) at any point:

- A file (:func:`atomic_write`): the content goes to a temporary sibling
  ``.NAME.<pid>.<random>.tmp`` that is flushed to disk and renamed over ``NAME`` (one
  rename: readers see the old or the new file, never a mix). A temporary left by a
  killed writer (its process is gone) is removed by the next write of ``NAME``.
- A directory (:func:`replace_dir`): the new content is written completely into
  ``.NAME.new-<pid>-<random>``; then a write-ahead journal ``.NAME.journal`` names it, and
  the swap (``NAME`` -> ``.NAME.old-...``, new -> ``NAME``, remove the old) runs. A killed
  swap is finished by the next writer or reader of ``NAME`` (:func:`recover_dir`): once the
  journal exists the new directory is complete and wins; before it, the old one is kept and
  the half-written new one removed. Either the old or the new complete directory is there.
- Concurrent writers of one directory are serialised by a lock file ``.NAME.lock`` (an
  advisory ``flock``, removed on release); a writer that has to wait says which process it
  waits for.

Files and directories are created with the user's umask (``tempfile.mkdtemp`` would make
them 0700, ``mkstemp`` 0600).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

LOCK_SUFFIX = ".lock"
JOURNAL_SUFFIX = ".journal"


def is_path_component(name: str) -> bool:
    """Whether ``name`` is one file or folder name: not empty, not ``.`` or ``..``, no ``/``,
    ``\\`` or NUL. A name from a scenario or the command line that becomes part of an output
    path must be one, or the write lands outside its folder (``name: ../../x``)."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def file_above(path: str | Path) -> Path | None:
    """The nearest existing folder of ``path`` when it is a file instead: nothing can be
    written under ``path`` (``--out notes.txt/run1``), found before the work that would write
    there rather than by its write; None when the nearest existing one is a folder."""
    above = next((a for a in Path(path).absolute().parents if a.exists()), None)
    return above if above is not None and not above.is_dir() else None


def refuse_under_file(out: str | Path, what: str) -> None:
    """Refuse an ``--out`` under a file (``--out notes.txt/p.yaml``, :func:`file_above`)
    before the work that would write it, saying the file is not a folder: the write named
    it alone ("cannot write notes.txt: File exists", read as an overwrite refusal). ``what``
    names what is written ("the profile").

    Raises:
        ConfigError: naming ``--out``, its value and the file in the way.
    """
    from specsched.sim.errors import ConfigError

    above = file_above(out)
    if above is not None:
        raise ConfigError("<command line>", "--out", str(out), f"{above} is a file, not a folder: it cannot hold "
                          f"{what}; give a path under a folder")


def probe_writable(o: Path, given: str) -> None:
    """Create and delete one temporary file in the folder the write of ``o`` starts in (its
    nearest existing parent, where :func:`replace_dir` puts its lock and its new
    folder): a read-only file system, a folder without write permission, or one where no
    file can be made (``/proc``) is found before the run, not by the write after it. Nothing
    is left behind.

    Raises:
        OSError: the file system's refusal, its ``filename`` ``given`` (the ``--out`` as the
            user wrote it, not the probe's temporary name).
    """
    import tempfile

    start = next((a for a in o.absolute().parents if a.exists()), None)
    if start is None:
        return
    try:
        with tempfile.TemporaryFile(dir=start, prefix=f".{o.name}.probe-"):
            pass
    except OSError as e:
        raise type(e)(e.errno, e.strerror, given) from e


def refuse_file_out(out: str, what: str, example: str) -> None:
    """Refuse, before the work that would write it, an ``--out`` that cannot be one file:
    a folder (the write after the work named a temporary file), a path under a file
    (:func:`file_above`), or one in a folder no file can be made in (read-only, no write
    permission, ``/sys``: :func:`probe_writable`; the write after the work failed).
    ``what`` names what is written ("the table"), ``example`` a file name to suggest inside
    the folder given.

    Raises:
        ConfigError: naming ``--out``, its value and what to give instead.
    """
    from specsched.sim.errors import ConfigError

    if Path(out).is_dir():
        raise ConfigError("<command line>", "--out", out, f"a folder: give {what}'s file, e.g. {Path(out) / example}")
    refuse_under_file(out, what)
    try:
        probe_writable(Path(out), out)
    except OSError as e:
        raise ConfigError("<command line>", "--out", out, f"cannot be written: {e.strerror}; give a path in a "
                          f"folder {what} can be written to") from e


def refuse_replacing_foreign(out: str | Path, ours: Callable[[Any], bool], why: str, what: str) -> None:
    """Refuse, before any work, an ``--out`` that holds a file this command did not write:
    commands that write a YAML file (a profile, a scenario) wrote it over a user's own file
    without a word. ``ours`` is told the file's parsed YAML (None where it is no YAML) and
    says whether the command wrote it (then it is replaced, as running the command again
    regenerates it); ``why`` completes "exists and ..." for a file it did not. An ``--out``
    under a file is refused too (:func:`refuse_under_file`, ``what`` naming what is written).

    Raises:
        ConfigError: naming ``--out``, its value and how to go on.
    """
    import yaml
    from specsched.sim.errors import ConfigError

    refuse_under_file(out, what)
    p = Path(out)
    if not p.is_file():
        return
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError:
        data = None
    if ours(data):
        return
    raise ConfigError("<command line>", "--out", str(out), f"exists and {why}: not replaced; give another file, or "
                      "remove it first")


def _fsync_path(path: Path, directory: bool = False) -> None:
    """Flush a file's (or a directory's entries') data to disk; best effort on platforms
    where a directory cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """True when process ``pid`` exists on this machine."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _token() -> str:
    return f"{os.getpid()}.{secrets.token_hex(4)}"


def _remove_stale_file_temps(parent: Path, name: str) -> None:
    """Remove ``.NAME.<pid>.<random>.tmp`` files whose writer process is gone."""
    prefix = f".{name}."
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for e in entries:
        if not (e.startswith(prefix) and e.endswith(".tmp")):
            continue
        pid = e[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(parent / e)


def _naming(e: OSError, p: Path) -> OSError:
    """``e`` (raised about the temporary file) as the same error about ``p``."""
    return type(e)(e.errno, e.strerror, str(p))


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Create or replace the file ``path`` atomically.

    ``write(tmp)`` fills a temporary file in the same directory (created empty, mode 0666
    less the umask); it is flushed to disk and renamed over ``path``; a ``path`` that is a
    symlink keeps the link and has the file it names replaced (the temporary file goes
    beside that file), as a plain write through the link would. Readers never see a
    half-written file; a failed ``write`` leaves nothing behind and the old file intact.
    Parent directories are created.

    Args:
        path: the destination file.
        write: fills the temporary file it is given (its path).

    Returns:
        ``path`` as a Path.

    Raises:
        IsADirectoryError: ``path`` is a folder (checked before anything is written).
        OSError: the directory is not writable (nothing is left behind); whatever
            ``write`` raises. An error about the temporary file names ``path`` instead: the
            user gave that name, not the temporary one.
    """
    given = Path(path)
    # through a symlink, as open(path, "w") writes: the link stays, the file it names is replaced
    p = Path(os.path.realpath(given)) if given.is_symlink() else given
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(given))
    p.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_file_temps(p.parent, p.name)
    tmp = p.with_name(f".{p.name}.{_token()}.tmp")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as e:
        raise _naming(e, given) from None
    try:
        write(tmp)
        _fsync_path(tmp)
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and str(tmp) in (e.filename, e.filename2):
            raise _naming(e, given) from None
        raise
    _fsync_path(p.parent, directory=True)
    return given


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


# ---------------------------------------------------------------- lock

def _acquire(lock: Path, target: Path, what: str) -> int:
    """Open and ``flock`` the lock file; returns its fd. A holder removes the file when it
    is done, so the lock counts only if the file we locked is still the one at ``lock``."""
    said = False
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if not said:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                    print(f"specsched: waiting for {holder}, which is {what} {target}", file=sys.stderr, flush=True)
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def target_lock(target: str | Path, what: str = "writing") -> Iterator[None]:
    """Hold the lock of ``target``: an advisory ``flock`` on ``.NAME.lock`` beside it.

    Waits for another holder, first printing one line to stderr naming the process waited
    for (the lock file holds the holder's pid and command). The file is removed on release;
    one left by a killed holder is reused (the lock itself dies with its process).

    Raises:
        OSError: the directory is not writable; its ``filename`` is ``target`` as given, not
            the lock file beside it (a name the user never wrote).
    """
    t = Path(target)
    t.parent.mkdir(parents=True, exist_ok=True)
    lock = t.with_name(f".{t.name}{LOCK_SUFFIX}")
    try:
        fd = _acquire(lock, t, what)
    except OSError as e:
        if e.filename != str(lock):
            raise
        raise type(e)(e.errno, e.strerror, str(target)) from e
    try:
        os.ftruncate(fd, 0)
        cmd = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv[:2])) or "python"
        os.pwrite(fd, f"process {os.getpid()} ({cmd})\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ---------------------------------------------------------------- directories

def _journal(out: Path) -> Path:
    return out.with_name(f".{out.name}{JOURNAL_SUFFIX}")


def _finish_swap(out: Path) -> None:
    """Complete the swap the journal of ``out`` describes (idempotent; lock held)."""
    j = _journal(out)
    if not j.exists():
        return
    try:
        entry = json.loads(j.read_text())
        new, old = out.with_name(entry["new"]), out.with_name(entry["old"])
    except (ValueError, KeyError, TypeError):  # cannot happen: the journal is written atomically
        os.unlink(j)
        return
    if new.exists():
        if out.exists() or out.is_symlink():
            os.rename(out, old)
        os.rename(new, out)
        _fsync_path(out.parent, directory=True)
    if old.exists():
        shutil.rmtree(old)
    os.unlink(j)
    _fsync_path(out.parent, directory=True)


def _remove_stale_dir_temps(out: Path) -> None:
    """Remove ``.NAME.new-*`` / ``.NAME.old-*`` left by killed writers (lock held, journal
    already finished, so none of them is referenced)."""
    prefixes = (f".{out.name}.new-", f".{out.name}.old-")
    for e in os.listdir(out.parent):
        if e.startswith(prefixes):
            shutil.rmtree(out.parent / e, ignore_errors=True)
    _remove_stale_file_temps(out.parent, f"{out.name}{JOURNAL_SUFFIX}")


def recover_dir(out: str | Path) -> bool:
    """Finish or clean up an interrupted :func:`replace_dir` of ``out``.

    Returns:
        True when something was left by an interrupted write (and has been completed or
        removed), False when there was nothing to do (no lock taken then).
    """
    o = Path(out)
    if not o.parent.is_dir():
        return False
    prefixes = (f".{o.name}.new-", f".{o.name}.old-", f".{o.name}{JOURNAL_SUFFIX}", f".{o.name}{LOCK_SUFFIX}")
    if not any(e.startswith(prefixes) for e in os.listdir(o.parent)):
        return False
    with target_lock(o):
        _finish_swap(o)
        _remove_stale_dir_temps(o)
    return True


def replace_dir(out: str | Path, fill: Callable[[Path], None]) -> Path:
    """Create or replace the directory ``out`` as a whole, crash-safely.

    ``fill(tmp)`` writes the complete content into a fresh directory (mode 0777 less the
    umask) beside ``out``; then the journalled swap puts it in place (see the module
    docstring). Concurrent calls on one ``out`` run one after the other (last one wins).
    A ``fill`` that raises leaves ``out`` as it was and no temporary behind.

    Returns:
        ``out`` as a Path.

    Raises:
        OSError: the parent directory cannot be written; whatever ``fill`` raises.
    """
    o = Path(out)
    with target_lock(o):
        _finish_swap(o)
        _remove_stale_dir_temps(o)
        token = _token().replace(".", "-")
        tmp = o.with_name(f".{o.name}.new-{token}")
        os.mkdir(tmp, 0o777)
        try:
            fill(tmp)
            for f in tmp.rglob("*"):
                if f.is_file():
                    _fsync_path(f)
            _fsync_path(tmp, directory=True)
            entry = {"new": tmp.name, "old": f".{o.name}.old-{token}"}
            atomic_write_text(_journal(o), json.dumps(entry) + "\n")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _finish_swap(o)
    return o
