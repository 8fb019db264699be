"""Hypothesis profiles: ``quick`` (CI, default) and ``thorough``.

Select with the environment variable ``POLYVERIFY_PROFILE=thorough``.

A test run started in the background of a non-interactive shell (``pytest ... &``, a CI runner's
script) inherits SIGINT ignored, and so would every command the tests start: Python then installs
no KeyboardInterrupt handler and a test that sends Ctrl-C to a command waits for it forever.  The
default disposition is restored here, once, in the main thread of each test process.
"""
import os
import signal
import threading

from hypothesis import HealthCheck, settings

settings.register_profile("quick", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("POLYVERIFY_PROFILE", "quick"))

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, signal.default_int_handler)
