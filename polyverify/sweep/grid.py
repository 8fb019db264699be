"""Grids: a grid file's cells (``fixed``, ``grid``, ``cells``), the table files it and the jobqueue
config are read from, and the helpers the commands' adapters build their grids with."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

from polyverify.plumbing.cli import UsageError, one_line

from polyverify.plumbing.options import split_list  # noqa: F401 -- the adapters' list helper, also here

from .base import LIMITS, input_file
from .cluster import check_resources
from .registry import named_sweeps

def grid_configs(spec: dict, where: str) -> list[dict]:
    """``fixed`` (shared values), ``grid`` (lists: one cell per combination, in the order written)
    and ``cells`` (explicit configs, after the grid's), each merged over ``fixed``."""
    fixed = spec.get("fixed", {})
    grid = spec.get("grid", {})
    explicit = spec.get("cells", [])
    if not isinstance(fixed, dict):
        raise UsageError(f"{where}: 'fixed' must be a table of values")
    if not isinstance(grid, dict):
        raise UsageError(f"{where}: 'grid' must be a table of lists")
    if not isinstance(explicit, list) or not all(isinstance(c, dict) for c in explicit):
        raise UsageError(f"{where}: 'cells' must be a list of tables")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise UsageError(f"{where}: grid.{k} must be a non-empty list, got {v!r:.80}")
        if k in fixed:
            raise UsageError(f"{where}: {k!r} is both in 'fixed' and in 'grid'")
    if not grid and not explicit:
        raise UsageError(f"{where}: no cells (give a 'grid' of lists or a list of 'cells')")
    keys = list(grid)
    out = [{**fixed, **dict(zip(keys, combo))} for combo in itertools.product(*(grid[k] for k in keys))] if grid else []
    out += [{**fixed, **c} for c in explicit]
    return out


def load_table_file(path, label: str) -> dict:
    """A TOML, JSON or YAML file whose top level is a table; UsageError ``"<label> <path>: ..."``."""
    p = Path(path)
    if str(path) == "":
        raise UsageError(f"{label}: empty file name")
    st = input_file(p, f"{label} {path}")  # a FIFO or /dev/zero is refused, never read
    if st.st_size > LIMITS["grid_bytes"]:
        raise UsageError(f"{label} {path}: larger than {LIMITS['grid_bytes'] // 2**20} MiB")
    suffix = p.suffix.lower()
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{label} {path}: cannot read ({one_line(e)})") from None
    try:
        if suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            spec = tomllib.loads(text)
        elif suffix == ".json":
            spec = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            spec = yaml.safe_load(text)
        else:
            raise UsageError(f"{label} {path}: unknown format {suffix or '(no suffix)'}; use .toml, .json, .yaml")
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 -- any parser's error is a malformed file
        raise UsageError(f"{label} {path}: not valid {suffix.lstrip('.').upper()} ({one_line(e)})") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{label} {path}: the top level must be a table, not {type(spec).__name__}")
    return spec


def read_grid_file(path: str) -> dict:
    spec = load_table_file(path, "grid file")
    unknown = set(spec) - {"sweep", "cell", "name", "fixed", "grid", "cells", "resources"}
    if unknown:
        raise UsageError(f"grid file {path}: unknown key(s) {', '.join(sorted(unknown))}; the keys are sweep or "
                         f"cell, name, fixed, grid, cells, resources")
    if "resources" in spec:
        check_resources(spec["resources"], f"grid file {path}")
    if ("sweep" in spec) == ("cell" in spec):
        raise UsageError(f"grid file {path}: give exactly one of 'sweep' (one of {', '.join(named_sweeps())}) or 'cell' "
                         f"('package.module:function')")
    return spec


# ------------------------------------------------------------------ helpers for the adapters

def product(**lists) -> list[dict]:
    """One config per combination of the lists (the first key varies slowest)."""
    keys = list(lists)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(lists[k] for k in keys))]


def check_lifting_limits(check, config: dict, allow_large: bool, where: str):
    """``check(config, where)`` of a sweep cell; with ``allow_large`` (the sweep's --allow-large), a
    config refused within the command's limits is checked again with its own ``allow_large`` set.
    Returns ``(config as checked, what check returned)``."""
    config = dict(config)
    try:
        return config, check(config, where)
    except UsageError:
        if not allow_large or config.get("allow_large"):
            raise
        config["allow_large"] = True
        return config, check(config, where)
