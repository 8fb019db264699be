"""Exact proofs of the constructions, the CLIs and the generated documents."""
from polyverify.plumbing.startup import catch_startup_interrupts as _catch

_catch()  # python -m verify...: Ctrl-C while the command starts is one line, exit 130
