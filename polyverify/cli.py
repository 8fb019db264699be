"""The command-line conventions every ``python -m ...`` tool of the toolkit follows.

* **Exit codes** mean one thing each, everywhere: ``EXIT_OK`` (0) proved / ok,
  ``EXIT_FAILED`` (1) a proof failed (the report carries the counterexample),
  ``EXIT_USAGE`` (2) bad input or a refused request (one line on stderr, no
  traceback, no output file touched), ``EXIT_INTERRUPTED`` (130, as a shell
  reports a process stopped by SIGINT) Ctrl-C: one line ``interrupted`` on
  stderr, no traceback, no half-written file and no folder left that the run
  created and did not fill.
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
  clobbers an old one.
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
import sys
import tempfile
import time
from pathlib import Path

from .startup import EXIT_INTERRUPTED, startup_interrupt, catch_startup_interrupts  # noqa: F401

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: memory (bytes) a run may plan to allocate without an explicit override: the
#: machines this toolkit targets have 24 GiB; leave room for the rest
DEFAULT_MEMORY_LIMIT = 16 * 2**30


class UsageError(Exception):
    """Bad input or a refused request: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (:class:`UsageError`) instead of a usage dump + exit."""

    def error(self, message):
        raise UsageError(message)


#: the folders :func:`make_folder` created during the current :func:`run_main` call (None outside one)
_created_folders: list[Path] | None = None


def _importing(frame) -> bool:
    """Whether ``frame``'s stack is inside an ``import`` (importlib's bootstrap frames)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _sigint_safe(signum, frame):
    """The SIGINT handler inside :func:`run_main`: :class:`KeyboardInterrupt` as usual, except
    while a module is being imported.  A compiled extension's import (torch's, through
    pybind11) that a KeyboardInterrupt crosses can abort the process (``terminate called after
    throwing ... KeyboardInterrupt``) or leave an exception that kills it with SIGINT at exit;
    there the interrupt is held and sent again (:func:`_hold_interrupt`) until the import is over."""
    if not _importing(frame):
        raise KeyboardInterrupt
    _hold_interrupt()


def _hold_interrupt() -> None:
    """Send SIGINT to the main thread again in 50 ms, from a short-lived thread (not a process-wide
    timer, which other code may set or cancel): :func:`_sigint_safe` then raises or holds again."""
    import threading

    main = threading.main_thread().ident

    def again():
        time.sleep(0.05)
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=again, name="polyverify-held-interrupt", daemon=True).start()


@contextlib.contextmanager
def _import_safe_interrupts():
    """:func:`_sigint_safe` as the SIGINT handler while the block runs (in the main thread,
    where Python's default handler was set)."""
    # the handler is set (or not) first, and the block runs outside that try: an error the block
    # raises (a UsageError is a ValueError) must reach the caller, not the "not the main thread" case
    try:
        installed = signal.getsignal(signal.SIGINT) in (signal.default_int_handler, startup_interrupt)
        if installed:
            signal.signal(signal.SIGINT, _sigint_safe)
    except ValueError:  # not the main thread
        installed = False
    if not installed:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGINT) is _sigint_safe:
                signal.signal(signal.SIGINT, signal.default_int_handler)


def run_main(fn, argv=None) -> int:
    """Call ``fn(argv)``; a :class:`UsageError` becomes one line on stderr and exit 2, Ctrl-C
    (:class:`KeyboardInterrupt`) the line ``interrupted`` and exit 130 (an interrupt that
    lands inside an import is raised when the import is over: :func:`_sigint_safe`).  When
    the run does not succeed (refused, interrupted, an exception), the folders it created
    (:func:`make_folder`) and left without a file are removed."""
    global _created_folders
    outer, _created_folders = _created_folders, []
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
        if rc is None or rc in (EXIT_USAGE, EXIT_INTERRUPTED):
            _remove_unfilled(created)
        elif outer is not None:
            outer.extend(created)
    return rc


@contextlib.contextmanager
def _sigint_ignored():
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread
        old = None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def interrupted() -> int:
    """After Ctrl-C: say ``interrupted`` in one line on stderr; return :data:`EXIT_INTERRUPTED`."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
        print("interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


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

def output_file(flag: str, path: str | os.PathLike | None) -> Path | None:
    """Check an output file path before any work: not a folder, not read-only, and its
    folder exists and is writable or can be created (see :func:`_check_folder`).  Creates
    nothing: the folder is made when the file is written.  Returns the path (or None)."""
    if path is None:
        return None
    p = Path(path)
    if str(path) == "" or str(path).endswith(os.sep):
        raise UsageError(f"{flag} {str(path)!r}: not a file name")
    if p.is_dir():
        raise UsageError(f"{flag} {p}: is a folder, not a file")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{flag} {p}: file is not writable")
    _check_folder(flag, p.parent if str(p.parent) else Path("."))
    return p


def output_dir(flag: str, path: str | os.PathLike | None, *, must_be_new: bool = False) -> Path | None:
    """Check an output folder before any work: not a file, writable or can be created
    (:func:`_check_folder`; nothing is created: :func:`make_folder` or the writers do it
    when the first file is written); ``must_be_new``: refuse a non-empty existing folder."""
    if path is None:
        return None
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {p}: is a file, not a folder")
    if must_be_new and p.is_dir() and any(p.iterdir()):
        raise UsageError(f"{flag} {p}: folder exists and is not empty")
    _check_folder(flag, p)
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
    :class:`UsageError` naming the option."""
    d = Path(d) if str(d) else Path(".")
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
    it is removed and ``path`` is untouched.
    With ``flag`` (the option that named the path), an OSError is a UsageError naming it."""
    path = Path(path)
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
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGINT) is startup_interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc = main_fn(*args, **kwargs)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        rc = 141
    except KeyboardInterrupt:
        rc = interrupted()
    if rc == EXIT_INTERRUPTED:
        # what shuts down after this (a process pool, a cluster's workers, at exit) may still
        # write to stderr while it stops, and a second Ctrl-C would cut it short: the one
        # line said it all
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sys.stdout.flush()
            sys.stderr.flush()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stderr.fileno())
    else:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(rc)
