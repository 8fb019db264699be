"""Ctrl-C while a command starts: the first thing the project's packages run when Python runs one
of their modules as a command (``python -m ...``).  Imports only ``os``, ``signal`` and ``sys``, so
that the handler is in place within a few milliseconds of the package's import, before the
command's own (heavy) imports.
"""
from __future__ import annotations

import os
import signal
import sys

#: Ctrl-C (SIGINT): 128 + 2, the status a shell shows for a process the signal stopped
EXIT_INTERRUPTED = 130

#: the signals that end a command as Ctrl-C does (children ended, nothing half-written, one line),
#: each with its line; the exit status is 128 + the signal's number (130, 143, 129), as a shell shows
#: it.  SIGTERM is what ``kill``, ``timeout`` and batch systems send; SIGHUP a closed terminal.
ENDING_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}
if hasattr(signal, "SIGHUP"):  # POSIX
    ENDING_SIGNALS[signal.SIGHUP] = "hung up (SIGHUP)"


def exit_status(signum: int) -> int:
    """The status of a command ended by signal ``signum``: 128 + its number."""
    return 128 + int(signum)


def ending_line(signum: int) -> str:
    """The one line a command ended by ``signum`` prints on stderr."""
    return ENDING_SIGNALS.get(signum, f"ended by signal {int(signum)}")


def startup_interrupt(signum, frame):
    """Ctrl-C (or SIGTERM, SIGHUP) while a command is still starting (its modules importing, before
    :func:`exit_with` runs it): nothing has been computed or written yet and no child started, so the
    process ends at once with the one line and exit 130 (143, 129) (a KeyboardInterrupt there would
    print a traceback from the import)."""
    try:
        os.write(2, ending_line(signum).encode() + b"\n")
    except OSError:
        pass
    os._exit(exit_status(signum))


def catch_startup_interrupts() -> None:
    """Called first by the project's packages (``verify``, ``numerics``, ``circuits``) when Python
    runs one of their modules as a command (``python -m ...``: ``sys.argv[0]`` is ``"-m"`` while
    the module is located): until :func:`exit_with` starts the command, Ctrl-C ends it with the
    one line ``interrupted`` and exit 130, SIGTERM with ``terminated (SIGTERM)`` and 143, SIGHUP
    with ``hung up (SIGHUP)`` and 129 (:func:`startup_interrupt`; a signal the caller set to be
    ignored, as ``nohup`` does, stays ignored).  Imported as a library, nothing changes."""
    if sys.argv[:1] != ["-m"]:
        return
    for sig in ENDING_SIGNALS:
        default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        try:
            if signal.getsignal(sig) is default:
                signal.signal(sig, startup_interrupt)
        except (ValueError, OSError):  # not the main thread: leave Python's handler
            pass
