"""polyverify.plumbing.cli.run_main: a usage error is one line and exit 2 whatever SIGINT handler is set."""
from __future__ import annotations

import signal

from polyverify.plumbing.cli import EXIT_USAGE, UsageError, run_main


class _BadValue(UsageError, ValueError):
    """A usage error that is also a ValueError (as the sweep's input errors are)."""


def _refuse(argv):
    raise _BadValue("--thing: not a thing")


def test_usage_error_under_a_custom_sigint_handler(capsys):
    # a library (dask-jobqueue) replaces Python's SIGINT handler; the usage error must still be
    # one line and exit 2, not "generator didn't stop after throw()"
    old = signal.signal(signal.SIGINT, lambda *a: None)
    try:
        assert run_main(_refuse, []) == EXIT_USAGE
    finally:
        signal.signal(signal.SIGINT, old)
    assert capsys.readouterr().err.strip() == "error: --thing: not a thing"


def test_usage_error_under_the_default_handler(capsys):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert run_main(_refuse, []) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "error: --thing: not a thing"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
