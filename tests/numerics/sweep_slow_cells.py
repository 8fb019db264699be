"""A cell module that takes IMPORT_S seconds to import (as the project's modules take seconds to
import torch, FLINT and sympy): the sweep's workers import it as they start, so no cell's wall
time counts it (tests/adversarial/test_sweep_failures.py)."""
from __future__ import annotations

import time

IMPORT_S = 0.6
time.sleep(IMPORT_S)


def cell(config: dict) -> dict:
    """``{"value": config["echo"]}``, at once."""
    return {"value": config["echo"]}
