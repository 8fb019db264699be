"""Helpers shared by the sweep's cluster tests: a grid file, and the one-line error check."""
from __future__ import annotations

import json
from pathlib import Path

CELL = "tests.numerics.sweep_cells:cell"


def grid_file(tmp: Path, cells: list[dict], cell: str = CELL, **extra) -> Path:
    """``tmp/grid.json`` for ``python -m numerics.sweep grid``: the cell, its configs, any other keys."""
    g = tmp / "grid.json"
    g.write_text(json.dumps({"cell": cell, "cells": cells, **extra}))
    return g


def one_error_line(capsys) -> str:
    """The one ``error: ...`` line the command wrote on stderr (no traceback, nothing else)."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]
