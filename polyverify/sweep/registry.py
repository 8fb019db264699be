"""The named sweeps (``python -m numerics.sweep NAME``), registered from above: the runner names no
command.  Each package of the project that has sweepable commands declares them in a light module
``<package>.sweeps`` (``numerics/sweeps.py``, ``verify/sweeps.py``), calling :func:`register` for
each; :func:`named_sweeps` imports those modules (lowest layer first) and lists what they
registered.  An adapter is named by its import path and imported only when its sweep is used, so
that ``--help`` imports nothing heavy.

An adapter (``SWEEP``, next to its command's CLI) has ``description``, ``cell``
(``"package.module:function"``), ``add_arguments(group)``, ``configs(args) -> list[dict]``,
``check(config, allow_large=, where=) -> dict`` (the config complete, checked as the command
checks its own) and optionally ``finish(result, out_dir) -> (files, verdict_ok)``.
"""
from __future__ import annotations

import importlib
import importlib.util

from .versions import PROJECT_PACKAGES

_SWEEPS: dict[str, tuple[str, str]] = {}


def register(name: str, adapter: str, summary: str) -> None:
    """Register the sweep ``name``: its adapter's import path ``"package.module:ATTR"`` and a
    one-line summary for ``--help``.  Registering a name again replaces it."""
    if ":" not in adapter:
        raise ValueError(f"sweep {name!r}: adapter {adapter!r} is not 'package.module:ATTR'")
    _SWEEPS[name] = (adapter, summary)


def named_sweeps() -> dict[str, tuple[str, str]]:
    """``{name: (adapter path, summary)}`` of every registered sweep, the project's packages'
    ``sweeps`` modules imported first (the upper layers after the lower ones)."""
    for pkg in reversed(PROJECT_PACKAGES):
        try:
            found = importlib.util.find_spec(f"{pkg}.sweeps") is not None
        except ImportError:  # the package itself is not installed
            found = False
        if found:
            importlib.import_module(f"{pkg}.sweeps")
    return dict(_SWEEPS)


def adapter(kind: str):
    """The adapter object of the named sweep ``kind`` (its module imported now)."""
    path, _ = named_sweeps()[kind]
    mod, attr = path.split(":")
    return getattr(importlib.import_module(mod), attr)
