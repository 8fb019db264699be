"""Strict JSON for training histories and results (no torch).

A diverged run has NaN or infinite losses; Python's ``json`` writes them as the bare words
``NaN`` / ``Infinity``, which are not JSON (strict parsers such as ``jq``, JavaScript's
``JSON.parse`` or Go's ``encoding/json`` reject the whole file).  So each non-finite number is
written as ``null`` and the record says why, under ``"non_finite"``: the key (a path such as
``"test_mse"`` or ``"loadavg.1"``) and what the value was (``"nan"``, ``"inf"``, ``"-inf"``)::

    {"step": 40, "test_mse": null, ..., "non_finite": {"test_mse": "nan"}}

:func:`restore` puts the floats back (the history a resumed run continues, the report's tables).
"""
from __future__ import annotations

import json
import math

NOTE = "non_finite"


def _why(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _strip(obj, path: str, notes: dict):
    if isinstance(obj, float) and not math.isfinite(obj):
        notes[path] = _why(obj)
        return None
    if isinstance(obj, dict):
        return {k: _strip(v, f"{path}.{k}" if path else str(k), notes) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strip(v, f"{path}.{i}" if path else str(i), notes) for i, v in enumerate(obj)]
    return obj


def strict(record: dict) -> dict:
    """``record`` (a dict) with each non-finite float as None, noted under ``"non_finite"``."""
    notes: dict[str, str] = {}
    out = _strip({k: v for k, v in record.items() if k != NOTE}, "", notes)
    if notes:
        out[NOTE] = notes
    return out


def dumps(obj, **kw) -> str:
    """Strict JSON text of a record or a list of records (see the module docstring)."""
    data = [strict(r) if isinstance(r, dict) else r for r in obj] if isinstance(obj, list) else strict(obj)
    return json.dumps(data, allow_nan=False, **kw)


def restore(record):
    """The inverse of :func:`strict`: the noted values back as floats (other values unchanged)."""
    if not isinstance(record, dict) or not isinstance(record.get(NOTE), dict):
        return record
    out = {k: v for k, v in record.items() if k != NOTE}
    for path, why in record[NOTE].items():
        keys = str(path).split(".")
        node = out
        try:
            for k in keys[:-1]:
                node = node[int(k)] if isinstance(node, list) else node[k]
            last = int(keys[-1]) if isinstance(node, list) else keys[-1]
            if node[last] is None:
                node[last] = float(why)
        except (KeyError, IndexError, ValueError, TypeError):
            continue  # a note that does not fit the record: the null stays
    return out
