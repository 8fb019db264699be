"""The seeds' headline experiments, reproduced at CPU scale (``docs/experiments.md``).

One module per experiment (:mod:`.common` says what each provides); each runs its grid through
:func:`polyverify.sweep.run_grid` and writes JSON + CSV + a PNG; ``python -m numerics.experiments
report`` generates ``docs/experiments.md`` from the committed results under ``docs/experiments/``.
"""
from __future__ import annotations

import importlib

#: command name -> module (in the order of the report)
EXPERIMENTS = {
    "seed004-table1": "numerics.experiments.seed004_table1",
    "seed003-mqar": "numerics.experiments.seed003_mqar",
    "seed000-table7": "numerics.experiments.seed000_table7",
    "seed002-ntk": "numerics.experiments.seed002_ntk",
}


def load(name: str):
    return importlib.import_module(EXPERIMENTS[name])


__all__ = ["EXPERIMENTS", "load"]
