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
current weights back as toolkit layers (float64 numpy), which a weight file, a proof or
``verify.export`` take.

``import polyverify`` does not import torch: only this module does.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = ["ConstructionModule", "LayerModule", "load_module"]


def _key(name: str) -> str:
    return name.replace(".", "__")  # a parameter's name has no dots in torch


class LayerModule(nn.Module):
    """One toolkit layer (any kind of ``constructions.layers.LAYER_TYPES``) with its weight arrays
    as parameters; ``forward`` is the layer's own."""

    def __init__(self, layer, dtype=torch.float64):
        super().__init__()
        from constructions.base import to_float_array

        self.kind, self.settings = layer.kind, layer.config()
        self.names = list(layer.arrays())
        np_dtype = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}.get(dtype)
        if np_dtype is None:
            raise ValueError(f"dtype {dtype}: float64, float32 or float16")

        def tensor(a):
            a = np.asarray(a)
            return torch.from_numpy(np.ascontiguousarray(to_float_array(a, np_dtype) if a.dtype == object
                                                         else a.astype(np_dtype)))

        self.weights = nn.ParameterDict({_key(n): nn.Parameter(tensor(a)) for n, a in layer.arrays().items()})

    def layer(self):
        """The toolkit layer over this module's parameters (torch tensors)."""
        from constructions.layers import LAYER_TYPES

        return LAYER_TYPES[self.kind].from_arrays(self.settings, {n: self.weights[_key(n)] for n in self.names})

    def forward(self, S):
        return self.layer().forward(S)

    def extra_repr(self) -> str:
        return f"{self.kind}, {self.settings}"


class ConstructionModule(nn.Module):
    """A stack of :class:`LayerModule` on a construction's state (module docstring)."""

    def __init__(self, blocks: list[LayerModule], *, layout=None, construction=None, k: int | None = None,
                 name: str = ""):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.layout, self.construction, self.k, self.name = layout, construction, k, name

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
        """The current weights as toolkit layers (float64 numpy arrays), one per stack layer."""
        return [b.layer().map(lambda t: t.detach().cpu().double().numpy()) for b in self.blocks]

    def _dtype(self):
        p = next(self.parameters(), None)
        return p.dtype if p is not None else torch.float64


def load_module(source, k: int | None = None, *, dtype=torch.float64, shared: bool = False) -> ConstructionModule:
    """A construction (``k`` body repetitions; not needed where it has no body) or a polyverify weight
    file (``constructions/weights_io.py``; ``k``: its first ``k`` body copies, default all) as a
    :class:`ConstructionModule`.  ``shared``: the body's copies share one set of parameters."""
    from constructions.base import Construction

    if isinstance(source, Construction):
        if k is None and source.body:
            raise ValueError(f"{source.name} repeats its body k times: pass k")
        kk = 0 if k is None else _count(k)
        layers = source.layers(kk)
        return ConstructionModule(_blocks(layers, dtype, shared), layout=source.layout, construction=source, k=kk,
                                  name=source.name)
    if isinstance(source, (str, os.PathLike)):
        return _from_file(Path(source), k, dtype, shared)
    raise TypeError(f"load_module takes a Construction or a weight file path, not a {type(source).__name__}")


def _count(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return k


def _blocks(layers, dtype, shared: bool) -> list[LayerModule]:
    made: dict[int, LayerModule] = {}
    out = []
    for L in layers:
        if shared and id(L) in made:
            out.append(made[id(L)])
            continue
        m = LayerModule(L, dtype)
        made[id(L)] = m
        out.append(m)
    return out


def _from_file(path: Path, k, dtype, shared) -> ConstructionModule:
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
    return ConstructionModule(_blocks(layers, dtype, shared), layout=lay, k=kk, name=str(d.get("name") or path.name))
