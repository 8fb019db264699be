"""A construction or a weight file as a ``torch.nn.Module``: start training from a construction.

    from polyverify.torch import load_module

    m = load_module(con, k=3)                  # or load_module("w.safetensors") (a polyverify weight file)
    S = m.input_state({"A": A, "b": b, ...})   # (batch, tokens, channels) float64: the construction's input map
    Y = m(S)                                   # the output state: Construction.run in float64
    m.layout                                   # the named regions of the state (constructions/layout.py)

**The state.**  ``forward`` maps a state ``S`` of shape ``(batch, tokens, channels)`` (any
number of leading batch axes, or none) to the state after the whole stack (prologue, the body
``k`` times, epilogue), layer by layer, each layer's math the toolkit's own
(``constructions/layers.py``: BaseConv, LSA, token-form LSA, ELSA; ``forward`` builds the layer
from the module's parameters and calls its ``forward`` on the tensors, so there is one
definition of each layer).  Rows are tokens and columns channels for BaseConv (seed 000 eq. (2))
and the token-form LSA (seed 004 eq. (2)-(3)); for seed 001's LSA / ELSA the state is the matrix
``H`` of the paper (eq. (8), (16)).  ``m.layout`` names the regions (``m.layout.regions``:
``name -> Region(rows, cols)``), ``m.describe()`` lists them, ``m.input_state(v)`` is the
construction's input map (its ``input_state`` on float64 arrays with a leading batch axis) and
``m.readout(S)`` its named read-outs where it has them (a compiled circuit's outputs by name).
A weight file gives the layout it stores; its input map is the construction's, so build the
module from the construction for that.

**Parameters.**  Every weight array of every layer is an ``nn.Parameter`` (``requires_grad``),
its exact rationals rounded once to ``dtype`` (float64 by default).  The body's ``k`` copies get
their own parameters (``shared=True``: one set, applied ``k`` times); ``m.layers()`` gives the
current weights back as toolkit layers (float64 numpy), ``m.sections()`` the same split as the
stack is (prologue, one list per body copy, epilogue), and ``m.exact_sections()`` as exact
rationals, which a weight file, a proof or ``verify.export.export(path, m, fmt)`` take.

**Biases.**  A bias (BaseConv's ``b_in``, ``b_conv``, ``b_gate``, ``b_out``, seed 000 Def. D.20;
ELSA's ``B1``, ``B2``, ``B3``, seed 001 eq. (16)) is a (tokens, channels) matrix in the layer.  Where
the construction's matrix is the same on every token (a zero bias included), the module's
parameter is that one row, (1, channels), expanded to the matrix in ``forward``: the forward is the
construction's, and training keeps the bias per channel, which is what the peers' formats hold
(``nn.Linear`` and ``Conv1d`` biases).  Only a construction's position-dependent bias matrix is a
(tokens, channels) parameter.  ``frozen`` (a set of array names, or a function ``(layer, name) ->
bool``) keeps arrays at the construction's values (buffers, not parameters): those a format fixes,
``verify.export.frozen_for(fmt)`` (zoology's mixer has no in / out projection), so a trained module
still fits it.

``import polyverify`` does not import torch: only this module does.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = ["ConstructionModule", "LayerModule", "layers_from_state_dict", "load_module"]


def _key(name: str) -> str:
    return name.replace(".", "__")  # a parameter's name has no dots in torch


def is_bias(kind: str, name: str) -> bool:
    """Whether array ``name`` of a ``kind`` layer is a bias matrix (tokens x channels): BaseConv's
    ``b_*`` (seed 000 Def. D.20), ELSA's ``B1``, ``B2``, ``B3`` (seed 001 eq. (16))."""
    if kind == "baseconv":
        return name in ("b_in", "b_conv", "b_gate", "b_out")
    return kind == "elsa" and name.rsplit(".", 1)[-1] in ("B1", "B2", "B3")


def _per_channel(a) -> bool:
    """A 2-D exact (or float) matrix whose rows are all the first one."""
    from constructions.sparse import dense

    a = np.asarray(dense(a))
    return a.ndim == 2 and a.shape[0] > 1 and bool(np.asarray(a == a[0:1], dtype=bool).all())


class LayerModule(nn.Module):
    """One toolkit layer (any kind of ``constructions.layers.LAYER_TYPES``) with its weight arrays
    as parameters (a bias the same on every token as one row: module docstring); ``forward`` is the
    layer's own.  ``frozen``: names of arrays kept as buffers (not trained)."""

    def __init__(self, layer, dtype=torch.float64, frozen=()):
        super().__init__()
        from constructions.base import to_float_array
        from constructions.sparse import dense

        self.kind, self.settings = layer.kind, layer.config()
        self.names = list(layer.arrays())
        np_dtype = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}.get(dtype)
        if np_dtype is None:
            raise ValueError(f"dtype {dtype}: float64, float32 or float16")

        def tensor(a):
            a = np.asarray(dense(a))
            return torch.from_numpy(np.ascontiguousarray(to_float_array(a, np_dtype) if a.dtype == object
                                                         else a.astype(np_dtype)))

        #: the bias matrices held as one row: name -> the number of tokens it is expanded to
        self.rows = {}
        params, fixed = {}, {}
        for n, a in layer.arrays().items():
            t = tensor(a)
            if is_bias(self.kind, n) and _per_channel(a):
                self.rows[n] = t.shape[0]
                t = t[:1].clone()
            (fixed if n in frozen else params)[n] = t
        self.weights = nn.ParameterDict({_key(n): nn.Parameter(t) for n, t in params.items()})
        self.frozen = sorted(fixed)
        for n, t in fixed.items():
            self.register_buffer("fixed__" + _key(n), t)

    def array(self, name: str):
        """Array ``name`` as the layer reads it (a one-row bias expanded to its tokens)."""
        k = _key(name)
        t = self.weights[k] if k in self.weights else getattr(self, "fixed__" + k)
        return t.expand(self.rows[name], -1) if name in self.rows else t

    def layer(self):
        """The toolkit layer over this module's parameters (torch tensors)."""
        from constructions.layers import LAYER_TYPES

        return LAYER_TYPES[self.kind].from_arrays(self.settings, {n: self.array(n) for n in self.names})

    def forward(self, S):
        return self.layer().forward(S)

    def extra_repr(self) -> str:
        return f"{self.kind}, {self.settings}"


class ConstructionModule(nn.Module):
    """A stack of :class:`LayerModule` on a construction's state (module docstring)."""

    def __init__(self, blocks: list[LayerModule], *, layout=None, construction=None, k: int | None = None,
                 name: str = "", sizes: tuple[int, int, int] | None = None):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.layout, self.construction, self.k, self.name = layout, construction, k, name
        #: (prologue, body, epilogue) layer counts of the stack's sections (None: not known)
        self.sizes = sizes

    @property
    def state_shape(self) -> tuple[int, int] | None:
        """(tokens, channels) of the state, where the layout gives it."""
        return tuple(self.layout.shape) if self.layout is not None else None

    def forward(self, S):
        shape = self.state_shape
        if shape is not None and tuple(S.shape[-2:]) != shape:
            raise ValueError(f"{self.name or 'the stack'} acts on (batch, {shape[0]}, {shape[1]}) states, got "
                             f"{tuple(S.shape)}")
        for b in self.blocks:
            S = b(S)
        return S

    def input_state(self, v: dict) -> torch.Tensor:
        """The construction's input map on float arrays with a leading batch axis (numpy or torch),
        as a tensor of the parameters' dtype."""
        if self.construction is None:
            raise ValueError("a module built from a weight file has no input map; build it from the construction "
                             "(load_module(con, k))")
        vv = {n: (x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64))
              for n, x in v.items()}
        S = self.construction.input_state(vv)
        return torch.as_tensor(np.asarray(S, dtype=np.float64), dtype=self._dtype())

    def readout(self, S) -> dict:
        """The construction's named read-outs of a state (``Construction.readout``)."""
        return self.construction.readout(S) if self.construction is not None else {}

    def describe(self) -> str:
        """The state's layout, one region per line."""
        if self.layout is None:
            return "(no layout)"
        head = f"state {self.layout.shape[0]} {self.layout.row_axis} x {self.layout.shape[1]} {self.layout.col_axis}"
        return "\n".join([head] + [f"  {r.name}: rows {r.rows[0]}..{r.rows[1] - 1}, columns {r.cols[0]}..{r.cols[1] - 1}"
                                   + (f"  ({r.doc})" if r.doc else "") for r in self.layout.regions.values()])

    def layers(self) -> list:
        """The current weights as toolkit layers (float64 numpy arrays), one per stack layer (the body
        copies of a shared module are one layer object, as its blocks are one module)."""
        made: dict[int, object] = {}
        out = []
        for b in self.blocks:
            if id(b) not in made:
                made[id(b)] = b.layer().map(lambda t: np.array(t.detach().cpu().double().numpy()))
            out.append(made[id(b)])
        return out

    def sections(self):
        """The current weights split as the stack is: a :class:`constructions.base.Sections`
        (prologue, one list of toolkit layers per body copy, epilogue; float64 numpy arrays)."""
        return self._split(self.layers())

    def exact_sections(self):
        """:meth:`sections` with exact weights (``verify.export`` writes these): each entry the
        construction's own rational where the float64 value is exactly that rational's rounding
        (an entry training left alone; the rule of a weight file's declared rationals,
        ``constructions.weights_io.declared_stands_in``), else the binary fraction the float is.
        A module from a weight file has no construction: every entry is its binary fraction."""
        want = self.construction.layers(self.k or 0) if self.construction is not None else None
        made: dict[int, object] = {}
        out = []
        for i, (b, L) in enumerate(zip(self.blocks, self.layers())):
            if id(b) not in made:
                made[id(b)] = _exact_like(L, want[i] if want is not None else None)
            out.append(made[id(b)])
        return self._split(out)

    def _split(self, layers):
        from constructions.base import Sections

        if self.sizes is None:
            raise ValueError(f"{self.name or 'the module'}: its sections are not known (a weight file without "
                             f"section sizes)")
        p, b, e = self.sizes
        k = (len(layers) - p - e) // b if b else 0
        return Sections(layers[:p], [layers[p + j * b:p + (j + 1) * b] for j in range(k)],
                        layers[len(layers) - e:] if e else [])

    def _dtype(self):
        p = next(self.parameters(), None)
        return p.dtype if p is not None else torch.float64


def load_module(source, k: int | None = None, *, dtype=torch.float64, shared: bool = False,
                frozen=None) -> ConstructionModule:
    """A construction (``k`` body repetitions; not needed where it has no body) or a polyverify weight
    file (``constructions/weights_io.py``; ``k``: its first ``k`` body copies, default all) as a
    :class:`ConstructionModule`.  ``shared``: the body's copies share one set of parameters.
    ``frozen``: array names (or a function ``(layer, name) -> bool``) kept at their values, not
    trained (``verify.export.frozen_for(fmt)``: what a peer's format fixes)."""
    from constructions.base import Construction

    if isinstance(source, Construction):
        if k is None and source.body:
            raise ValueError(f"{source.name} repeats its body k times: pass k")
        kk = 0 if k is None else _count(k)
        layers = source.layers(kk)
        return ConstructionModule(_blocks(layers, dtype, shared, frozen), layout=source.layout, construction=source,
                                  k=kk, name=source.name,
                                  sizes=(len(source.prologue), len(source.body), len(source.epilogue)))
    if isinstance(source, (str, os.PathLike)):
        return _from_file(Path(source), k, dtype, shared, frozen)
    raise TypeError(f"load_module takes a Construction or a weight file path, not a {type(source).__name__}")


def _exact_like(L, want):
    """Layer ``L`` (float arrays) with exact entries: ``want``'s rational where the float64 value is
    exactly its rounding, else the float's binary fraction (:meth:`ConstructionModule.exact_sections`)."""
    from fractions import Fraction

    from constructions.base import to_float_array
    from constructions.sparse import dense

    W = want.arrays() if want is not None else {}

    def exact(name, a):
        a = np.asarray(a, dtype=np.float64)
        out = np.empty(a.shape, dtype=object)
        out.fill(0)
        for idx in zip(*np.nonzero(a)):
            out[idx] = Fraction(float(a[idx]))
        w = W.get(name)
        if w is not None:
            w = np.asarray(dense(w), dtype=object)
            if w.shape == a.shape:
                same = to_float_array(w, np.float64) == a
                out[same] = w[same]
        return out

    arrays = {n: exact(n, a) for n, a in L.arrays().items()}
    from constructions.layers import LAYER_TYPES

    return LAYER_TYPES[L.kind].from_arrays(L.config(), arrays)


def layers_from_state_dict(state: dict, con, where: str = "the state_dict") -> list:
    """A module's ``state_dict`` (``load_module(con, k)``'s, any ``k``, shared or not, tensors as
    numpy or torch arrays) as ``con``'s layers at that ``k``: exact arrays (each float the binary
    fraction it is: ``constructions.weights_io.exact_tensor``), a one-row bias expanded to its
    tokens.  ``k`` from the number of blocks; a tensor missing, unread or of another shape is a
    one-line ValueError naming it."""
    import re

    from constructions.layers import LAYER_TYPES
    from constructions.weights_io import WeightFileError, exact_tensor, repetitions

    pat = re.compile(r"blocks\.(0|[1-9][0-9]*)\.(?:weights\.|fixed__)(.+)")
    found = {str(n): pat.fullmatch(str(n)) for n in state}
    unread = [n for n, m in found.items() if m is None]
    if unread:
        raise ValueError(f"{where}: tensor {unread[0]} is not a block's weight (a polyverify.torch module's "
                         f"state_dict holds blocks.I.weights.NAME and blocks.I.fixed__NAME)")
    n_blocks = 1 + max((int(m[1]) for m in found.values()), default=-1)
    try:
        k = repetitions(con, n_blocks)
    except WeightFileError as e:
        raise ValueError(f"{where}: {e}") from None
    taken: set = set()
    out = []
    for i, L in enumerate(con.layers(k)):
        arrays = {}
        for name, want in L.arrays().items():
            keys = [f"blocks.{i}.weights.{_key(name)}", f"blocks.{i}.fixed__{_key(name)}"]
            key = next((x for x in keys if x in state), None)
            if key is None:
                raise ValueError(f"{where}: lacks {keys[0]} ({con.name}'s layer {i}, a {L.kind} layer, has {name})")
            t = state[key]
            t = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
            shape = tuple(np.shape(want))
            if tuple(t.shape) != shape:
                if not (is_bias(L.kind, name) and len(shape) == 2 and tuple(t.shape) == (1, shape[1])):
                    raise ValueError(f"{where}: {key} has shape {tuple(t.shape)}; {con.name}'s layer {i} {name} "
                                     f"is {shape}")
                t = np.broadcast_to(t, shape)
            try:
                arrays[name] = exact_tensor(np.ascontiguousarray(t), key, where)
            except WeightFileError as e:
                raise ValueError(str(e)) from None
            taken.add(key)
        out.append(LAYER_TYPES[L.kind].from_arrays(L.config(), arrays))
    left = sorted(set(found) - taken)
    if left:
        raise ValueError(f"{where}: tensor {left[0]} is no weight of {con.name}'s layers (every tensor must be read)")
    return out


def _count(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return k


def _frozen_names(L, frozen) -> set:
    if not frozen:
        return set()
    if callable(frozen):
        return {n for n in L.arrays() if frozen(L, n)}
    if isinstance(frozen, str):
        frozen = (frozen,)
    return {n for n in L.arrays() if n in set(frozen)}


def _blocks(layers, dtype, shared: bool, frozen=None) -> list[LayerModule]:
    made: dict[int, LayerModule] = {}
    out = []
    for L in layers:
        if shared and id(L) in made:
            out.append(made[id(L)])
            continue
        m = LayerModule(L, dtype, _frozen_names(L, frozen))
        made[id(L)] = m
        out.append(m)
    return out


def _from_file(path: Path, k, dtype, shared, frozen=None) -> ConstructionModule:
    import json

    from constructions.layout import Layout
    from constructions.weights_io import load

    lw = load(path)  # refuses a file without polyverify metadata (its layer structure is needed)
    layers = lw.layers
    d = lw.declared or {}
    secs, kf = d.get("sections") or {}, d.get("k")
    if k is not None:
        kk = _count(k)
        p, b, e = secs.get("prologue", 0), secs.get("body", 0), secs.get("epilogue", 0)
        if not isinstance(kf, int) or not b or kk > kf:
            raise ValueError(f"{path}: k={kk}: the file holds {kf} body copies" if b else
                             f"{path}: the file has no body to repeat")
        layers = layers[:p + b * kk] + layers[len(layers) - e:] if e else layers[:p + b * kk]
    else:
        kk = kf if isinstance(kf, int) else None
    if shared:  # body copies that are the same weights share one module
        from constructions.weights_io import same_layer

        canon: list = []
        merged = []
        for L in layers:
            same = next((c for c in canon if c.kind == L.kind and same_layer(c, L)), None)
            if same is None:
                canon.append(L)
                same = L
            merged.append(same)
        layers = merged
    lay = None
    try:
        lj = json.loads(lw.meta.get("layout", "{}"))
        lay = Layout.from_json(lj) if lj else None
    except (ValueError, KeyError, TypeError):
        lay = None
    sizes = None
    if all(isinstance(secs.get(s), int) for s in ("prologue", "body", "epilogue")):
        sizes = (secs["prologue"], secs["body"], secs["epilogue"])
        if sizes[1] and (len(layers) - sizes[0] - sizes[2]) % sizes[1] or len(layers) < sizes[0] + sizes[2]:
            sizes = None  # the metadata's sections do not split this stack
    return ConstructionModule(_blocks(layers, dtype, shared, frozen), layout=lay, k=kk,
                              name=str(d.get("name") or path.name), sizes=sizes)
