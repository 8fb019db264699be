"""Numeric runs, roundoff, training, sweeps and the seeds' experiments."""
from polyverify.plumbing.startup import catch_startup_interrupts as _catch

_catch()  # python -m numerics...: Ctrl-C while the command starts is one line, exit 130
