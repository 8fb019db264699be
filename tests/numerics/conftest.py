"""One Dask cluster for the whole test run (per pytest-xdist worker process: each runs its own
session), shared by the sweep and experiment tests that only need somewhere to run their cells: one
worker thread in this process (no nanny or worker process to start, the project imported once),
passed to the commands as ``--scheduler``.  The tests of the local cluster's start-up, of a lost
or killed worker, of worker versions and resources start clusters of their own."""
from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """The session's in-process ``LocalCluster``; its scheduler also writes a scheduler file
    (``cluster.scheduler_file``), as ``dask scheduler --scheduler-file`` does.  No dashboard: its
    server would update in this process for the whole run."""
    from distributed import LocalCluster

    sf = tmp_path_factory.mktemp("dask") / "scheduler.json"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      silence_logs=logging.CRITICAL, scheduler_kwargs={"scheduler_file": str(sf)}) as cluster:
        cluster.scheduler_file = sf
        yield cluster
