"""What every format's writer shares (``verify/export.py`` drives them; each format's own writer,
``plan(layers, make_tensors)``, is in its module beside its reader and mapping table): the
:class:`Exported` result, the :class:`ExportError` refusal (one line naming the layer and what does
not fit) and the exact checks the writers make on a stack before writing anything.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from constructions import ops
from constructions.base import Sections
from constructions.layers import Layer


class ExportError(ValueError):
    """What a format cannot hold: one line naming the layer and what does not fit."""


@dataclass
class Exported:
    """A stack in a peer's format: the tensors (float32, the peer's names and shapes) and config."""

    format: str
    layers: int
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    #: the peer model's settings, written into the file where the container holds a config
    config: dict = field(default_factory=dict)
    #: the ``--config KEY=VALUE`` settings an import of an ``.npz`` file needs (it holds no config)
    settings: dict = field(default_factory=dict)
    #: rewrites into the peer's form (each the same map exactly)
    notes: list[str] = field(default_factory=list)
    #: the float dtype written (float32 where every entry is a float32 value, else float64)
    dtype: str = "float32"
    #: nonzero entries that are not values of that dtype (each rounded once to nearest)
    inexact: int = 0
    entries: int = 0
    path: Path | None = None

    def summary(self) -> list[str]:
        """What was written, one line each (the first names the file)."""
        from . import FORMATS

        mod = FORMATS[self.format]
        if not hasattr(mod, "plan"):  # a format with its own container (polyverify)
            return [f"exported {self.layers} layers to {self.path} ({mod.WRITTEN_AS})"] + [f"  {n}" for n in self.notes]
        where = self.path.suffix.lower() if self.path is not None else ""
        cfg = ", ".join(f"{k}={json.dumps(self.config[k])}" for k in mod.SHOWN + ("dtype",)
                        if k in self.config) + ", ..."
        lines = [f"exported {self.layers} layers to {self.path} ({self.format}: {len(self.tensors)} tensors, {self.dtype}; "
                 + ("config in the file: " + cfg if where != ".npz" else "an .npz file holds no config") + ")"]
        if self.inexact:
            lines.append(f"  {self.inexact} of {self.entries} nonzero entries are not {self.dtype} values: each rounded "
                         f"once to nearest (the file holds the construction at the rounded weights)")
        if where == ".npz" and self.settings:
            lines.append("  import with " + " ".join(f"--config {k}={v}" for k, v in self.settings.items()))
        desc = self.config.get("polyverify")
        if desc and where != ".npz":
            lines.append(f"  self-describing: import {self.path} --from {self.format} proves it against {desc['spec']} "
                         f"({', '.join(f'{k}={v}' for k, v in desc['sizes'].items())}) with no other flag")
        lines += [f"  {n}" for n in self.notes]
        return lines


# ------------------------------------------------------------------ the stack

def default_k(construction, k: int | None) -> int:
    """The body copies written: ``k``, or (None) 1 where the construction has a body, else 0."""
    if k is None:
        return 1 if construction.body else 0
    return k


def as_sections(sections) -> Sections:
    """A :class:`constructions.base.Sections`, or a dict ``{"prologue", "body" | "bodies", "epilogue"}``, as one."""
    if isinstance(sections, Sections):
        return sections
    bodies = sections.get("bodies")
    if bodies is None:
        body = list(sections.get("body") or [])
        bodies = [body] if body else []
    return Sections(list(sections.get("prologue") or []), [list(b) for b in bodies], list(sections.get("epilogue") or []))


# ------------------------------------------------------------------ exact checks on a stack

def is_zero(a) -> bool:
    return not bool(np.asarray(a != 0, dtype=bool).any())


def is_identity(W) -> bool:
    n, m = W.shape
    return n == m and bool(np.asarray(W == ops.eye_object(n), dtype=bool).all())


def row_constant(i: int, name: str, B, fmt: str, what: str) -> np.ndarray:
    """The one row of a bias matrix that is the same on every token, or an ExportError."""
    same = np.asarray(B == B[0:1], dtype=bool).all(axis=1)
    if not same.all():
        r = int(np.flatnonzero(~same)[0])
        raise ExportError(f"{fmt}: layer {i} {name} differs between tokens 0 and {r} (a position-dependent bias "
                          f"matrix); {what} is one per channel")
    return np.array(B[0], dtype=object)


def check_kinds(layers, fmt: str, kind: str, what: str) -> None:
    """Every layer is of ``kind`` (the stack not empty), else an ExportError naming the first that is not."""
    if not layers:
        raise ExportError(f"{fmt}: the stack has no layers to export")
    for i, L in enumerate(layers):
        if L.kind != kind:
            raise ExportError(f"{fmt} holds {what}; layer {i} is {'an' if L.kind in ('lsa', 'elsa') else 'a'} "
                              f"{L.kind} layer")


def same_for_all(layers, fmt: str, get, what: str, why: str) -> object:
    """``get(layer)``, the same for every layer (``why``: the model has one such setting), else an ExportError."""
    v0 = get(layers[0])
    for i, L in enumerate(layers):
        if get(L) != v0:
            raise ExportError(f"{fmt}: layer {i} has {what} {get(L)} and layer 0 {what} {v0}; {why}")
    return v0


def distinct_layers(layers) -> list[tuple[int, Layer]]:
    """``(first index, layer)`` of each distinct layer object (repeated body copies once)."""
    seen: dict[int, int] = {}
    out = []
    for i, L in enumerate(layers):
        if id(L) not in seen:
            seen[id(L)] = i
            out.append((i, L))
    return out
