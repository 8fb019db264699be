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


def startup_interrupt(signum, frame):
    """Ctrl-C while a command is still starting (its modules importing, before :func:`exit_with`
    runs it): nothing has been computed or written yet, so the process ends at once with the one
    line and exit 130 (a KeyboardInterrupt there would print a traceback from the import)."""
    try:
        os.write(2, b"interrupted\n")
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def catch_startup_interrupts() -> None:
    """Called first by the project's packages (``verify``, ``numerics``, ``circuits``) when Python
    runs one of their modules as a command (``python -m ...``: ``sys.argv[0]`` is ``"-m"`` while
    the module is located): until :func:`exit_with` starts the command, Ctrl-C ends it with the
    one line ``interrupted`` and exit 130 (:func:`startup_interrupt`).  Imported as a library,
    nothing changes."""
    if sys.argv[:1] != ["-m"]:
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, startup_interrupt)
    except (ValueError, OSError):  # not the main thread: leave Python's handler
        pass
