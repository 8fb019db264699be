"""What every format's writer shares (``verify/export.py`` drives them; each format's own writer,
``plan(layers, make_tensors)``, is in its module beside its reader and mapping table): the
:class:`Exported` result, the :class:`ExportError` refusal (one line naming the layer and what does
not fit) and the exact checks the writers make on a stack before writing anything.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from fractions import Fraction
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
    #: the constant channels the stack was written with (:func:`constant_channels`): state channel ->
    #: its value on each token (the model's input sets them; empty where every bias is one per channel)
    constants: dict[int, list] = field(default_factory=dict)

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
        if desc and where != ".npz" and "circuit" in desc:  # a compiled circuit's (described.describe_circuit)
            c = desc["circuit"]
            lines.append(f"  self-describing: import {self.path} --from {self.format} --circuit G.json proves it against "
                         f"the circuit G.json compiled to {c['target']} (the target and the layout"
                         + (", its constant channels included," if self.constants else "")
                         + " from the file)")
        elif desc and where != ".npz":
            lines.append(f"  self-describing: import {self.path} --from {self.format} proves it against {desc['spec']} "
                         f"({', '.join(f'{k}={v}' for k, v in desc['sizes'].items())}) with no other flag")
        elif self.constants:  # no description: an import needs the layout with them
            lines.append("  import with --layout L.json holding " + json.dumps(
                {"format": "polyverify-layout/1", "constants": layout_constants(self.constants)})
                + " (the state's channels, then the constant channels with their values on the file's tokens)")
        lines += [f"  {n}" for n in self.notes]
        return lines


def layout_constants(constants: dict) -> dict:
    """``{state channel: per-token values}`` as a layout's ``"constants"`` (``mapping.parse``): JSON keys,
    each value an int or an exact rational's string."""
    return {str(j): [int(x) if Fraction(x).denominator == 1 else str(Fraction(x)) for x in vals]
            for j, vals in constants.items()}


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


# ------------------------------------------------------------------ per-token biases as constant channels

def _row_same(B, t: int, r: int) -> bool:
    return bool(np.asarray(B[t] == B[r], dtype=bool).all())


def _column_varies(B, c: int) -> bool:
    return not bool(np.asarray(B[:, c] == B[0, c], dtype=bool).all())


def _frac(z) -> Fraction:
    """An exact entry as a Fraction (ints, Fractions, sympy's / flint's rationals)."""
    return Fraction(int(z.p), int(z.q)) if hasattr(z, "p") and hasattr(z, "q") else Fraction(z)


def _solve(H: list[list[Fraction]], r: list[Fraction]) -> list[Fraction] | None:
    """One exact solution ``w`` of ``H w = r`` (Gauss-Jordan over the rationals, free unknowns 0), or None
    where there is none."""
    n, m = len(H), len(H[0])
    A = [list(H[i]) + [r[i]] for i in range(n)]
    pivots, row = [], 0
    for col in range(m):
        piv = next((i for i in range(row, n) if A[i][col] != 0), None)
        if piv is None:
            continue
        A[row], A[piv] = A[piv], A[row]
        inv = 1 / A[row][col]
        A[row] = [x * inv for x in A[row]]
        for i in range(n):
            if i != row and A[i][col] != 0:
                f = A[i][col]
                A[i] = [x - f * y for x, y in zip(A[i], A[row])]
        pivots.append(col)
        row += 1
        if row == n:
            break
    if any(A[i][m] != 0 for i in range(row, n)):
        return None
    w = [Fraction(0)] * m
    for i, col in enumerate(pivots):
        w[col] = A[i][m]
    return w


def _deconvolved(L, c: int, r) -> list[Fraction] | None:
    """``w`` (one value per token) with ``conv(w) = r`` under channel ``c``'s filter and ``L``'s convention,
    exactly, or None where no ``w`` gives ``r`` (a causal filter whose first taps are zero cannot reach
    the first tokens; a circular one whose spectrum vanishes misses a direction)."""
    T = L.h.shape[0]
    E = ops.eye_object(T)
    hc = np.array([[L.h[s, c]] * T for s in range(T)], dtype=object)
    H = ops.conv(E, hc, causal=L.causal, same=L.same)  # column j: the convolution of token j's unit vector
    return _solve([[_frac(H[i, j]) for j in range(T)] for i in range(T)], [_frac(x) for x in r])


def _moved_conv_bias(i: int, L, fmt: str, what: str, moved: list):
    """``(b_in, b_conv, b_out)`` of BaseConv ``L`` with the part of every channel of ``b_conv`` that differs
    between tokens (``r = b_conv[:, c] - b_conv[0, c]``) moved out of the convolution's output, the same
    map exactly: into ``b_in`` as the ``w`` whose convolution is ``r`` where there is one (``conv(v + w) =
    conv(v) + r``, solved exactly: ``r / alpha`` for ``alpha`` times the identity filter), else into
    ``b_out`` where the channel's gate is a constant (``W_gate``'s column zero: ``g_c (conv_c + r)`` adds the
    per-token constant ``g_c r`` times ``W_out``'s row c).  Any other such channel: an ExportError (no
    constant channel makes it a weight: the bias is added after a convolution that cannot give it and is
    multiplied by a gate that reads the state)."""
    T, C = L.b_conv.shape
    b_in, b_conv, b_out = (np.array(getattr(L, n), dtype=object) for n in ("b_in", "b_conv", "b_out"))
    for c in range(C):
        if not _column_varies(b_conv, c):
            continue
        r = b_conv[:, c] - b_conv[0, c]
        w = _deconvolved(L, c, r)
        if w is not None:
            b_in[:, c] = b_in[:, c] + np.array(w, dtype=object)
            moved.append((i, c, "b_in"))
        elif is_zero(np.asarray(L.W_gate, dtype=object)[:, c]):
            b_out = b_out + np.outer(np.asarray(L.b_gate, dtype=object)[:, c] * r,
                                     np.asarray(L.W_out, dtype=object)[c, :])
            moved.append((i, c, "b_out"))
        else:
            t = int(np.flatnonzero(np.asarray(r != 0, dtype=bool))[0])
            raise ExportError(f"{fmt}: layer {i} b_conv differs between tokens 0 and {t} in channel {c}, which no "
                              f"input to its {L.convolution} filter gives and whose gate reads the state (no constant "
                              f"channel makes that a weight); {what} is one per channel")
        b_conv[:, c] = b_conv[0, c]
    return b_in, b_conv, b_out


def constant_channels(layers, fmt: str, what: str, classes=None):
    """A BaseConv stack whose bias matrices differ between tokens written with extra *constant channels*
    (issue 44 item 4): ``(layers, constants, moved)``, ``constants`` ``{state channel: per-token values}``
    (empty, and the layers as they are, where every bias is one per channel), ``moved`` the per-token
    convolution biases moved, ``(layer, channel, "b_in" | "b_out")``.

    Tokens whose bias rows are the same in every layer form a class; the largest class (the first on a tie)
    is the base and each other class ``p`` gets one indicator channel ``C + p`` (1 on its tokens, 0
    elsewhere), so that every bias matrix is ``B = 1 b0^T + sum_p K_p (b_p - b0)^T``: a per-channel bias
    ``b0`` plus the weights ``b_p - b0`` from the indicator channels, in ``W_in`` / ``W_gate`` (they read the
    state) and ``W_out`` (it reads the inner channels, of which ``C + p`` carries ``K_p``).  A per-token
    ``b_conv`` is moved first (:func:`_moved_conv_bias`).  Each indicator channel is carried unchanged by
    every layer: its inner channel is ``W_in = e``, a filter of the identity, no convolution bias, the gate
    1 (``b_gate``, ``W_gate``'s column zero), and ``W_out``'s ``e`` back to it (none with the residual, which
    adds it).  On the construction's channels each layer is the same map exactly, given the constant
    channels on its input; the import sets them (the file's layout names them, ``mapping.parse``) and proves
    that they come out unchanged.

    ``classes``: ``(base, others)``, the classes of tokens to write the stack with instead of its own (a
    partition of the tokens, e.g. a file's indicator channels: :func:`indicator_classes`); every bias row must
    be the same within each (an ExportError names the first that is not), so they may be finer than the
    stack's own (a class whose rows are the base's gets zero weights)."""
    from .convs import filter_row

    distinct = distinct_layers(layers)
    if not all(L.kind == "baseconv" for _, L in distinct):
        if classes is not None:
            raise ExportError(f"{fmt}: constant channels are written for BaseConv stacks only")
        return layers, {}, []
    if classes is None and all(np.asarray(getattr(L, b) == getattr(L, b)[0:1], dtype=bool).all()
                               for _, L in distinct for b in ("b_in", "b_conv", "b_gate", "b_out")):
        return layers, {}, []
    moved: list = []
    eff = {id(L): (*_moved_conv_bias(i, L, fmt, what, moved), np.array(L.b_gate, dtype=object)) for i, L in distinct}
    T = layers[0].b_in.shape[0]
    if classes is not None:  # given (a file's): each must hold tokens whose bias rows are the same
        base, others = classes
        for cl in [base, *others]:
            t = next((t for t in cl if not all(_row_same(B, t, cl[0]) for bs in eff.values() for B in bs)), None)
            if t is not None:
                raise ExportError(f"{fmt}: the bias rows differ between tokens {cl[0]} and {t}, which the given "
                                  f"constant channels put in one class")
    else:
        own: list[list[int]] = []
        for t in range(T):
            for cl in own:
                if all(_row_same(B, t, cl[0]) for bs in eff.values() for B in bs):
                    cl.append(t)
                    break
            else:
                own.append([t])
        base = max(own, key=len)  # the first of the largest
        others = [cl for cl in own if cl is not base]
    P = len(others)
    out: dict[int, Layer] = {}
    for i, L in distinct:
        b_in, b_conv, b_out, b_gate = eff[id(L)]
        C = L.W_in.shape[0]
        Cx = C + P
        t0 = base[0]

        def square(W, biases=None, carry=False):
            Wx = ops.zeros_like_object((Cx, Cx))
            Wx[:C, :C] = np.asarray(W, dtype=object)
            for p, cl in enumerate(others):
                if biases is not None:
                    Wx[C + p, :C] = biases[cl[0]] - biases[t0]
                if carry:
                    Wx[C + p, C + p] = 1
            return Wx

        def rows(b, extra):
            B = ops.zeros_like_object((T, Cx))
            B[:, :C] = np.array([b[t0]] * T, dtype=object)
            B[:, C:] = extra
            return B

        h = ops.zeros_like_object((T, Cx))
        h[:, :C] = np.asarray(L.h, dtype=object)
        h[filter_row(0, T, same=L.same), C:] = 1
        if any(_column_varies(b_conv, c) for c in range(C)):  # _moved_conv_bias left none
            raise AssertionError("a per-token b_conv left after it was moved")
        out[id(L)] = replace(L, W_in=square(L.W_in, b_in, carry=True), b_in=rows(b_in, 0), h=h,
                             b_conv=rows(b_conv, 0), W_gate=square(L.W_gate, b_gate), b_gate=rows(b_gate, 1),
                             W_out=square(L.W_out, b_out, carry=not L.residual), b_out=rows(b_out, 0))
    C0 = layers[0].W_in.shape[0]
    constants = {C0 + p: [1 if t in cl else 0 for t in range(T)] for p, cl in enumerate(others)}
    return [out[id(L)] for L in layers], constants, moved


def indicator_classes(constants: dict) -> tuple[list[int], list[list[int]]] | None:
    """The classes of tokens that indicator channels stand for, ``(base, others)`` in the channels' order, as
    :func:`constant_channels` takes them; None unless every channel is 0 / 1, no token is 1 in two, each has
    a 1 and some token is 1 in none (the base)."""
    chans = [constants[j] for j in sorted(constants)]
    if not chans or any(any(x not in (0, 1) for x in v) for v in chans):
        return None
    T = len(chans[0])
    others = [[t for t in range(T) if v[t] == 1] for v in chans]
    base = [t for t in range(T) if all(v[t] == 0 for v in chans)]
    if not base or not all(others) or sum(map(len, others)) + len(base) != T:
        return None
    return base, others
