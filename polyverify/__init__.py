"""Project-wide plumbing with no mathematics in it.

``polyverify.cli``: the conventions of every command-line tool (exit codes,
one-line errors, output paths checked up front and written atomically,
limits, progress).  This package imports nothing else of the project, so
``circuits``, ``constructions``, ``verify`` and ``numerics`` may all import it.
"""
