"""The project's base package, in three layers whose names say where they sit.

``polyverify.plumbing`` (bottom): the conventions of every command-line tool (exit codes, one-line
errors, output paths checked up front and written atomically, limits, progress, signals, the proof
child process, exact rational parsing).  It imports nothing else of the project, so ``circuits``,
``constructions``, ``numerics`` and ``verify`` may all import it.

``polyverify.sweep`` (beside it): the sweep runner (a grid of cells, their records and code
versions, run on dask.distributed or dask-jobqueue).  It imports only ``polyverify.plumbing``;
the cells it runs are registered by ``numerics``.

``polyverify.torch`` (top): the public torch facade, a construction or a weight file as a
``torch.nn.Module``.  It sits above ``constructions`` and imports it; nothing below imports it.

Importing ``polyverify`` imports none of them.
"""
