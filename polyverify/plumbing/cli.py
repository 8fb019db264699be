"""The command-line conventions every ``python -m ...`` tool of the toolkit follows.

* **Exit codes** mean one thing each, everywhere: ``EXIT_OK`` (0) proved / ok,
  ``EXIT_FAILED`` (1) a proof failed (the report carries the counterexample),
  ``EXIT_USAGE`` (2) bad input or a refused request (one line on stderr, no
  traceback, no output file touched), ``EXIT_INTERRUPTED`` (130, as a shell
  reports a process stopped by SIGINT) Ctrl-C: one line ``interrupted`` on
  stderr, no traceback, no half-written file, no child process left running
  and no folder left that the run created and did not fill.  SIGTERM (``kill``,
  ``timeout``, batch systems) and SIGHUP (a closed terminal) end a command the
  same way, with ``terminated (SIGTERM)`` / exit 143 and ``hung up (SIGHUP)`` /
  exit 129 (:class:`Terminated`, a :class:`KeyboardInterrupt`, so every cleanup
  written for Ctrl-C runs for them too).
* **Bad input is refused before any work**: :class:`Parser` turns argparse's
  errors into :class:`UsageError`; :func:`output_file` / :func:`output_dir`
  check every output path up front (the path is not a folder / not a file, the
  nearest existing folder on its way is a folder in which a file can really be
  created: a probe file is made and removed, so /proc and read-only mounts are
  refused before the work) and create nothing; :func:`check_range`,
  :func:`check_finite` and :func:`check_memory` bound every size.
* **Folders are created last**, right before the first file is written into
  them (:func:`make_folder`, called by :func:`atomic_path`,
  :func:`atomic_write_text` and :func:`save_figure`), so a refused run leaves no
  empty folder; inside :func:`run_main` the folders a run created and left
  without a file are removed when it fails or is interrupted.
* **Outputs are written atomically** (:func:`atomic_write_text`,
  :func:`atomic_path`): a temporary file in the same folder, renamed over the
  target only when complete, so a failure never leaves half a file and never
  clobbers an old one.  An output path that is a symbolic link is followed (the
  file it points to is replaced; a dangling link's target is created); one that
  is a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe)
  is written through, as ``cp`` and shells do, never replaced; any other kind of
  file (a block device, a socket) is refused up front.  Two outputs of one
  command on one path are refused up front (:func:`output_file`,
  :func:`output_dir` compare the resolved paths).
* **Progress only on a terminal** (:func:`progress`): a tqdm bar when stderr
  is a terminal, otherwise one plain line per stage (no carriage returns in
  logs).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

from .startup import (EXIT_INTERRUPTED, ENDING_SIGNALS, catch_startup_interrupts,  # noqa: F401
                      ending_line, exit_status, startup_interrupt)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: memory (bytes) a run may plan to allocate without an explicit override: the
#: machines this toolkit targets have 24 GiB; leave room for the rest
DEFAULT_MEMORY_LIMIT = 16 * 2**30


#: the first field of every command's JSON report (README "JSON reports"); raised when a field changes meaning
REPORT_SCHEMA = "polyverify-report/1"


def report_json(report: dict, **dumps) -> str:
    """A command's JSON report as written: ``{"schema": REPORT_SCHEMA, **report}``, indented; ``dumps``
    are json.dumps's options (``default=str`` unless given: values JSON cannot hold written as text)."""
    import json

    opts = {"indent": 1, "default": str, **dumps}
    return json.dumps({"schema": REPORT_SCHEMA, **report}, **opts)


class UsageError(Exception):
    """Bad input or a refused request: printed as one line, exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP inside a command: raised where Ctrl-C raises :class:`KeyboardInterrupt`
    (it is one), so the same cleanup runs (children killed, temporary files removed, new empty
    folders removed); :func:`interrupted` then prints its own line and returns 128 + ``signum``."""

    def __init__(self, signum: int):
        super().__init__(ending_line(signum))
        self.signum = int(signum)


#: the exit statuses of a command ended by a signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)
INTERRUPT_STATUSES = frozenset(exit_status(s) for s in ENDING_SIGNALS)


def _signal_exception(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (:class:`UsageError`) instead of a usage dump + exit."""

    def error(self, message):
        raise UsageError(message)


#: the folders :func:`make_folder` created during the current :func:`run_main` call (None outside one)
_created_folders: list[Path] | None = None

#: the files the current :func:`run_main` call named: resolved path -> (the option, whether it is read)
_claimed_outputs: dict[str, tuple[str, bool]] | None = None


def _importing(frame) -> bool:
    """Whether ``frame``'s stack is inside an ``import`` (importlib's bootstrap frames)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _sigint_safe(signum, frame):
    """The handler of SIGINT (and SIGTERM, SIGHUP) inside :func:`run_main`:
    :class:`KeyboardInterrupt` as usual (:class:`Terminated` for SIGTERM and SIGHUP), except
    while a module is being imported.  A compiled extension's import (torch's, through
    pybind11) that a KeyboardInterrupt crosses can abort the process (``terminate called after
    throwing ... KeyboardInterrupt``) or leave an exception that kills it with SIGINT at exit;
    there the signal is held and sent again (:func:`_hold_interrupt`) until the import is over."""
    if not _importing(frame):
        raise _signal_exception(signum)
    _hold_interrupt(signum)


def _hold_interrupt(signum: int = signal.SIGINT) -> None:
    """Send ``signum`` to the main thread again in 50 ms, from a short-lived thread (not a
    process-wide timer, which other code may set or cancel): :func:`_sigint_safe` then raises or
    holds again."""
    import threading

    main = threading.main_thread().ident

    def again():
        time.sleep(0.05)
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            signal.pthread_kill(main, signum)

    threading.Thread(target=again, name="polyverify-held-interrupt", daemon=True).start()


def _default_handler(sig):
    return signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL


@contextlib.contextmanager
def _import_safe_interrupts():
    """:func:`_sigint_safe` as the handler of SIGINT, SIGTERM and SIGHUP while the block runs (in
    the main thread, for each signal that had its default handling: one set to be ignored, as
    ``nohup`` does for SIGHUP, stays ignored); afterwards each gets its default back."""
    # the handlers are set (or not) first, and the block runs outside that try: an error the block
    # raises (a UsageError is a ValueError) must reach the caller, not the "not the main thread" case
    installed = []
    for sig in ENDING_SIGNALS:
        try:  # (already _sigint_safe: set by exit_with, or an outer run_main, which restores it)
            if signal.getsignal(sig) in (_default_handler(sig), startup_interrupt):
                signal.signal(sig, _sigint_safe)
                installed.append(sig)
        except ValueError:  # not the main thread
            break
    if not installed:
        yield
        return
    try:
        yield
    finally:
        for sig in installed:
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(sig) is _sigint_safe:
                    signal.signal(sig, _default_handler(sig))


def run_main(fn, argv=None) -> int:
    """Call ``fn(argv)``; a :class:`UsageError` becomes one line on stderr and exit 2, Ctrl-C
    (:class:`KeyboardInterrupt`) the line ``interrupted`` and exit 130, SIGTERM / SIGHUP
    (:class:`Terminated`) their line and exit 143 / 129 (a signal that lands inside an import is
    raised when the import is over: :func:`_sigint_safe`).  When the run does not succeed
    (refused, interrupted, an exception), the folders it created (:func:`make_folder`) and left
    without a file are removed.  The outputs it names (:func:`output_file`, :func:`output_dir`)
    must be distinct paths."""
    global _created_folders, _claimed_outputs
    outer, _created_folders = _created_folders, []
    outer_claims, _claimed_outputs = _claimed_outputs, {}
    rc = None
    try:
        with _import_safe_interrupts():
            rc = fn(argv)
    except UsageError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        rc = EXIT_USAGE
    except KeyboardInterrupt:
        with _sigint_ignored():  # a second Ctrl-C does not cut the cleanup short
            _remove_unfilled(_created_folders)
            rc = interrupted()
    finally:
        created, _created_folders = _created_folders, outer
        _claimed_outputs = outer_claims
        if rc is None or rc == EXIT_USAGE or rc in INTERRUPT_STATUSES:
            _remove_unfilled(created)
        elif outer is not None:
            outer.extend(created)
    return rc


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT, SIGTERM and SIGHUP ignored while the block runs (a cleanup that a second signal
    must not cut short)."""
    old = {}
    for sig in ENDING_SIGNALS:
        try:
            old[sig] = signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread
            break
    try:
        yield
    finally:
        for sig, h in old.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, h)


def interrupted(e: BaseException | None = None) -> int:
    """After Ctrl-C (or SIGTERM, SIGHUP): say ``interrupted`` (``terminated (SIGTERM)``, ``hung up
    (SIGHUP)``) in one line on stderr; return 130 (143, 129).  The signal is read from ``e``, or
    from the exception being handled (a :class:`Terminated` names it; any other is Ctrl-C)."""
    e = e if e is not None else sys.exc_info()[1]
    signum = e.signum if isinstance(e, Terminated) else signal.SIGINT
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
        print(ending_line(signum), file=sys.stderr, flush=True)
    return exit_status(signum)


def one_line(e: BaseException | str) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else (type(e).__name__ if isinstance(e, BaseException) else "error")


# ------------------------------------------------------------------ numbers and sizes

def check_range(flag: str, value, lo=None, hi=None, *, override: str | None = None):
    """``lo <= value <= hi`` or a UsageError naming the flag, the bound and (for an
    upper bound a user could mean to exceed) the ``override`` flag."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {value}")
    if lo is not None and value < lo:
        raise UsageError(f"{flag} must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        more = f" (pass {override} to allow more)" if override else ""
        raise UsageError(f"{flag} = {value} exceeds the limit {hi}{more}")
    return value


def check_finite(flag: str, value: float, *, positive: bool = False) -> float:
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {value}")
    if positive and value <= 0:
        raise UsageError(f"{flag} must be > 0, got {value}")
    return value


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_memory(what: str, nbytes: float, limit: float = DEFAULT_MEMORY_LIMIT, *,
                 override: str | None = None) -> None:
    """Refuse a run whose estimated memory exceeds ``limit`` before allocating it."""
    if nbytes > limit:
        more = f"; pass {override} to allow it" if override else ""
        raise UsageError(f"{what} needs about {human_bytes(nbytes)} of memory, above the limit "
                         f"{human_bytes(limit)}{more}")


# ------------------------------------------------------------------ output paths

def file_kind(st_mode: int) -> str:
    """What a file is, in words, for messages (``"a character device"``, ``"a FIFO"``, ...)."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISLNK, "a symbolic link")):
        if test(st_mode):
            return words
    return "a special file"  # pragma: no cover


def input_file_problem(path) -> str | None:
    """What is wrong with ``path`` as an input file, or None for a regular file (symbolic links
    followed): ``file not found``, ``is a folder, not a regular file``, ``is not a regular file (a
    character device)`` (/dev/zero: never read, it would not end), ``... (a FIFO)`` (it would block),
    or why it cannot be looked at.  The one check of the commands' input files."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "file not found"
    except NotADirectoryError:
        return "file not found (a part of its path is a file, not a folder)"
    except (OSError, ValueError) as e:  # no permission on the way, a loop of links, a NUL in the name
        return f"cannot be read ({getattr(e, 'strerror', None) or one_line(e)})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a regular file"
    return f"is not a regular file ({file_kind(mode)})"


def input_file(flag: str, path):
    """``path`` if it is a regular file, else a UsageError ``FLAG PATH: what it is`` (checked before
    any work; ``flag`` "" for a positional argument).  Inside :func:`run_main` the file is claimed as
    an input: an output of the same command on it is refused (:func:`_claim`)."""
    problem = input_file_problem(path)
    if problem is not None:
        raise UsageError(f"{flag + ' ' if flag else ''}{path}: {problem}")
    claim_input(flag or "the input file", path)
    return path


def claim_input(flag: str, path) -> None:
    """Inside :func:`run_main`: ``path`` is read by the command (``flag`` names it); an output option
    naming the same file, before or after, is refused: the command would overwrite what it reads."""
    _claim(flag, Path(path), reads=True)


def _existing_mode(p: Path) -> int | None:
    """``p``'s mode, symbolic links followed (None: nothing there, or a dangling link)."""
    try:
        return os.stat(p).st_mode
    except (OSError, ValueError):  # missing, dangling, a file on the way, a NUL in the name
        return None


def writes_through(p: Path) -> bool:
    """Whether an output on ``p`` is written through (opened and written, never replaced): ``p``
    (its links followed) is a character device or a FIFO, or it names an open file descriptor
    (``/dev/stdout``, ``/dev/fd/N``, ``/proc/.../fd/N``: replacing the file behind one would
    cut the stream the caller reads)."""
    mode = _existing_mode(p)
    if mode is None:
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return True
    if not stat.S_ISREG(mode):
        return False
    raw = os.path.abspath(p)
    return raw.startswith(("/dev/fd/", "/dev/std", "/proc/")) or \
        os.path.realpath(p).startswith("/proc/")


def _claim(flag: str, p: Path, *, reads: bool = False) -> None:
    """Inside :func:`run_main`: ``p`` (resolved) is ``flag``'s output (``reads``: its input); a
    second option naming the same file or folder is refused when either writes it (one output would
    overwrite the other, or the input it reads).  A character device (``/dev/null``) may take several."""
    if _claimed_outputs is None:
        return
    mode = _existing_mode(p)
    if mode is not None and stat.S_ISCHR(mode):
        return
    key = os.path.realpath(p)
    other = _claimed_outputs.get(key)
    if other is None:
        _claimed_outputs[key] = (flag, reads)
        return
    other_flag, other_reads = other
    if other_flag == flag or (reads and other_reads):
        return
    if reads or other_reads:
        out_flag, in_flag = (other_flag, flag) if reads else (flag, other_flag)
        raise UsageError(f"{out_flag} {p}: the same file as {in_flag}, which the command reads (give the output "
                         f"another path)")
    raise UsageError(f"{flag} {p}: the same file as {other_flag} (give each output its own path)")


def output_file(flag: str, path: str | os.PathLike | None) -> Path | None:
    """Check an output file path before any work: a file name, not a folder, not read-only, not
    another output of the same command (:func:`_claim`), and its folder exists and is writable or
    can be created (see :func:`_check_folder`).  A symbolic link is followed; a character device
    or a FIFO is accepted and will be written through (:func:`atomic_path`); any other existing
    file that is not a regular file (a block device, a socket) is refused.  Creates nothing: the
    folder is made when the file is written.  Returns the path (or None)."""
    if path is None:
        return None
    p = Path(path)
    if str(path) == "" or str(path).endswith(os.sep):
        raise UsageError(f"{flag} {str(path)!r}: not a file name")
    mode = _existing_mode(p)
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {p}: is a folder, not a file")
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise UsageError(f"{flag} {p}: is {file_kind(mode)}, not a file to write")
    if mode is not None and not os.access(p, os.W_OK):
        raise UsageError(f"{flag} {p}: file is not writable")
    _claim(flag, p)
    if writes_through(p):
        return p
    real = Path(os.path.realpath(p))
    _check_folder(flag, real.parent)
    return p


def output_beside(flag: str, path: Path, suffix: str) -> Path | None:
    """The file written beside the output ``path`` (``path`` with ``suffix``, e.g. a ``.md`` table beside a
    ``--json``), checked by :func:`output_file` under ``flag`` before any work; None where ``path`` is written
    through (a character device or a FIFO, :func:`writes_through`): it has no folder of its own to put a file
    beside, and ``/dev/null.md`` is not one the command may make."""
    if writes_through(Path(path)):
        return None
    return output_file(flag, Path(path).with_suffix(suffix))


def output_dir(flag: str, path: str | os.PathLike | None, *, must_be_new: bool = False) -> Path | None:
    """Check an output folder before any work: not a file, writable or can be created
    (:func:`_check_folder`; nothing is created: :func:`make_folder` or the writers do it
    when the first file is written); ``must_be_new``: refuse a non-empty existing folder."""
    if path is None:
        return None
    if str(path) == "":
        raise UsageError(f"{flag} '': not a folder name")
    p = Path(path)
    mode = _existing_mode(p)
    if mode is not None and not stat.S_ISDIR(mode):
        what = "a file" if stat.S_ISREG(mode) else file_kind(mode)
        raise UsageError(f"{flag} {p}: is {what}, not a folder")
    if must_be_new and p.is_dir() and any(p.iterdir()):
        raise UsageError(f"{flag} {p}: folder exists and is not empty")
    _claim(flag, p)
    _check_folder(flag, Path(os.path.realpath(p)))  # a dangling link: its target is the folder made
    return p


def _check_folder(flag: str, d: Path) -> None:
    """``d`` exists as a writable folder, or can be created: its nearest existing ancestor is
    a folder in which a file can be created.  Checked by creating (and removing at once) an
    empty probe file there, since permission bits do not tell: root passes ``os.access`` on
    /proc and on read-only mounts."""
    anc = d
    for anc in [d, *d.parents]:
        if anc.exists():
            if not anc.is_dir():
                raise UsageError(f"{flag}: {anc} is a file, not a folder")
            break
    else:  # pragma: no cover - the root exists
        anc = Path(".")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: folder {d} is not writable" if anc == d
                         else f"{flag}: cannot create folder {d} ({anc} is not writable)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".polyverify-probe.", dir=anc)
    except OSError as e:
        why = e.strerror or one_line(e)
        raise UsageError(f"{flag}: folder {d} is not writable ({why})" if anc == d
                         else f"{flag}: cannot create folder {d} ({why})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def make_folder(d: str | os.PathLike, flag: str | None = None) -> Path:
    """Create folder ``d`` (and its missing parents) right before a file is written into it.
    Inside :func:`run_main` the folders made are remembered, and removed again if the run
    fails or is interrupted before it puts a file in them.  With ``flag``, an OSError is a
    :class:`UsageError` naming the option.  A symbolic link on the way is followed (a dangling link's
    target is created, as for an output file)."""
    d = Path(d) if str(d) else Path(".")
    if not d.is_dir() and any(os.path.islink(a) for a in [d, *d.parents]):
        d = Path(os.path.realpath(d))
    missing = []
    for anc in [d, *d.parents]:
        if anc.is_dir():
            break
        missing.append(anc)
    if not missing:
        return d
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if flag is None:
            raise
        raise UsageError(f"{flag}: cannot create folder {d} ({e.strerror or one_line(e)})") from None
    if _created_folders is not None:
        _created_folders.append(missing[-1])  # the outermost new folder holds the others
    return d


def _remove_unfilled(folders: list[Path]) -> None:
    """Remove each folder (made by this run) that holds no file, only empty folders."""
    for d in reversed(folders):
        with contextlib.suppress(OSError):
            if d.is_dir() and not any(f for _, _, fs in os.walk(d) for f in fs):
                shutil.rmtree(d)


def _cannot_write(flag: str | None, path: Path, e: OSError):
    if flag is None:
        raise e
    # checked up front; a file system can still refuse at write time (full, read-only, /proc)
    raise UsageError(f"{flag} {path}: cannot write ({e.strerror or one_line(e)})") from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, flag: str | None = None):
    """Yield a temporary path in ``path``'s folder (created if missing, :func:`make_folder`);
    on success it is renamed onto ``path`` (atomic on POSIX), on an exception (Ctrl-C included)
    it is removed and ``path`` is untouched.  A symbolic link is followed: the file it points to
    is the one replaced.  A ``path`` that is a character device or a FIFO (``/dev/null``, a named
    pipe, ``/dev/stdout``) is never replaced: the complete temporary file (in the system's
    temporary folder) is copied into it (:func:`writes_through`); any other file that is not a
    regular file (a block device, a socket) is refused.
    With ``flag`` (the option that named the path), an OSError is a UsageError naming it."""
    path = Path(path)
    mode = _existing_mode(path)
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        e = IsADirectoryError if stat.S_ISDIR(mode) else OSError
        _cannot_write(flag, path, e(0, f"is {file_kind(mode)}, not a file to write"))
    if writes_through(path):
        with _written_through(path, flag) as tmp:
            yield tmp
        return
    if os.path.islink(path):
        path = Path(os.path.realpath(path))
    try:
        make_folder(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                   dir=path.parent if str(path.parent) else ".")
    except OSError as e:
        _cannot_write(flag, path, e)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            _cannot_write(flag, path, e)
        raise


@contextlib.contextmanager
def _written_through(path: Path, flag: str | None):
    """:func:`atomic_path` for a character device or a FIFO: the writer fills a temporary file
    (whole, so a failure writes nothing), then its bytes are written into ``path``, opened as it is
    (never unlinked or replaced), for appending.  A ``path`` that is this process's own standard
    output or error (``/dev/stdout``, however it is redirected) is written through that stream, so
    the output follows what the command printed before it and what it prints after follows it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        stream = _own_stream(path)
        with open(tmp, "rb") as src:
            if stream is not None:
                stream.flush()
                shutil.copyfileobj(src, stream.buffer, 1 << 20)
                stream.buffer.flush()
            else:
                with open(path, "ab") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as e:
        _cannot_write(flag, path, e)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _own_stream(path: Path):
    """``sys.stdout`` or ``sys.stderr`` when ``path`` is the very file it writes to, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            own = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino) and hasattr(stream, "buffer"):
            return stream
    return None


def atomic_write_text(path: str | os.PathLike, text: str, flag: str | None = None) -> Path:
    with atomic_path(path, flag) as tmp:
        tmp.write_text(text)
    return Path(path)


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 90) -> Path:
    """``fig.savefig(path)`` (a matplotlib figure) atomically, in the format ``path``'s suffix
    names (png without one); the folder is created if missing."""
    path = Path(path)
    with atomic_path(path) as tmp:  # creates the folder
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    return path


# ------------------------------------------------------------------ progress

def interactive(stream=None) -> bool:
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _LineProgress:
    """tqdm's small interface for logs: a plain line at the start, about every
    10% and at the end; never a carriage return."""

    def __init__(self, total: int | None, desc: str, stream, every: int | None = None):
        self.total, self.desc, self.stream, self.n = total, desc, stream, 0
        self.every = every or (max(1, total // 10) if total else 1)
        self._next = self.every
        print(f"{desc}: started" + (f" ({total} steps)" if total else ""), file=stream, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n >= self._next and (self.total is None or self.n < self.total):
            print(f"{self.desc}: {self.n}" + (f"/{self.total}" if self.total else ""), file=self.stream, flush=True)
            self._next = (self.n // self.every + 1) * self.every

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:
        self.postfix = s

    def set_postfix(self, *a, **kw) -> None:
        pass

    def close(self) -> None:
        if self.stream is not None:
            print(f"{self.desc}: done ({self.n}" + (f"/{self.total}" if self.total else "") + ")",
                  file=self.stream, flush=True)
            self.stream = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _NoProgress:
    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, *a, **kw) -> None:
        pass

    set_postfix = set_postfix_str

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def progress(total: int | None, desc: str, *, enabled: bool = True, stream=None, **tqdm_kw):
    """A progress reporter on stderr: a tqdm bar on a terminal, plain lines
    otherwise (logs), nothing when ``enabled`` is False."""
    stream = stream or sys.stderr
    if not enabled:
        return _NoProgress()
    if interactive(stream):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, file=stream, **tqdm_kw)
    return _LineProgress(total, desc, stream)


def exit_with(main_fn, *args, **kwargs) -> None:
    """``sys.exit(main_fn())`` for a ``__main__`` block; output piped into a
    reader that stops early (``| head``) ends quietly instead of in a traceback,
    with status 141 as a process killed by SIGPIPE would (the verdict was not
    read, so none of 0/1/2 is claimed); Ctrl-C outside :func:`run_main` ends as
    inside it (``interrupted``, status 130).  From here on Ctrl-C is a KeyboardInterrupt again
    (not :func:`startup_interrupt`: the command may be writing), and once the command has
    returned, a late Ctrl-C while the interpreter shuts down is ignored: the verdict is out."""
    for sig in ENDING_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) is startup_interrupt:  # SIGTERM, SIGHUP: raise Terminated
                signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else _sigint_safe)
    try:
        rc = main_fn(*args, **kwargs)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        rc = 141
    except KeyboardInterrupt as e:
        rc = interrupted(e)
    if rc in INTERRUPT_STATUSES:
        # what shuts down after this (a process pool, a cluster's workers, at exit) may still
        # write to stderr while it stops, and a second Ctrl-C would cut it short: the one
        # line said it all
        with contextlib.suppress(OSError, ValueError):
            for sig in ENDING_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
            sys.stdout.flush()
            sys.stderr.flush()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stderr.fileno())
    else:
        with contextlib.suppress(OSError, ValueError):
            for sig in ENDING_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
    sys.exit(rc)
