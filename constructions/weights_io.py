"""Weight files: safetensors tensors + the layout and the exact rationals.

Layout of a file written by :func:`save`:

* tensors ``layers.{i}.{array}`` in float64, one per weight array of every
  layer of the stack (``Layer.arrays()`` names), so the file loads into any
  framework as it is;
* ``__metadata__`` (strings): ``format``, ``construction`` (name, paper,
  parameters, repetition count, section sizes), ``layout`` (the named
  regions, JSON), ``layers`` (kind and settings of each layer, and which
  distinct layer it repeats), and ``exact`` (the nonzero entries of each
  distinct layer as ``"p/q"`` strings).

:func:`load` reads a file back into exact object arrays.  An entry is taken
as the exact rational in ``exact`` when that rational rounds to the stored
float64; otherwise (an edited or foreign file) as the exact binary fraction
the float is.  Files without our metadata are read with the layer structure
of the construction they are checked against.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from .base import Construction, to_float_array
from .layers import Layer, layer_from_arrays

FORMAT = "polyverify-weights/1"


class WeightFileError(ValueError):
    pass


def _distinct(layers: list[Layer]) -> list[int]:
    """For each layer, the index of the first layer object identical to it."""
    ids, src = {}, []
    for i, L in enumerate(layers):
        src.append(ids.setdefault(id(L), i))
    return src


def _exact_entries(a: np.ndarray) -> list:
    out = []
    for idx, v in np.ndenumerate(a):
        if v != 0:
            out.append([*map(int, idx), str(Fraction(v))])
    return out


def save(path: str | Path, con: Construction, k: int) -> Path:
    from safetensors.numpy import save_file

    layers = con.layers(k)
    src = _distinct(layers)
    tensors, exact, specs = {}, {}, []
    for i, L in enumerate(layers):
        for name, arr in L.arrays().items():
            tensors[f"layers.{i}.{name}"] = np.ascontiguousarray(to_float_array(arr, np.float64))
        specs.append({"kind": L.kind, "config": L.config(), "source": src[i]})
        if src[i] == i:
            exact[str(i)] = {name: _exact_entries(arr) for name, arr in L.arrays().items()}
    meta = {
        "format": FORMAT,
        "construction": json.dumps({
            "name": con.name, "reference": con.reference, "k": k,
            "params": {p: str(v) for p, v in con.params.items()},
            "variables": {v: list(s) for v, s in con.variables.items()},
            "sections": {"prologue": len(con.prologue), "body": len(con.body), "epilogue": len(con.epilogue)},
        }),
        "layout": json.dumps(con.layout.to_json()),
        "layers": json.dumps(specs),
        "exact": json.dumps(exact),
    }
    path = Path(path)
    save_file(tensors, str(path), metadata=meta)
    return path


@dataclass
class LoadedWeights:
    layers: list[Layer]  # exact object arrays of Fractions
    meta: dict
    entries_from_exact: int
    entries_from_float: int


def load(path: str | Path, spec: Construction | None = None, k: int | None = None) -> LoadedWeights:
    """Read a weight file into exact layers (see the module docstring)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    if not path.is_file():
        raise WeightFileError(f"weight file not found: {path}")
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightFileError(f"{path}: not a readable safetensors file ({str(e).splitlines()[0]})") from None
    if meta.get("format") == FORMAT:
        specs = json.loads(meta["layers"])
        exact = json.loads(meta["exact"])
    else:
        if spec is None or k is None:
            raise WeightFileError(f"{path}: no {FORMAT} metadata; give the construction to read it against")
        specs = [{"kind": L.kind, "config": L.config(), "source": None} for L in spec.layers(k)]
        exact = {}
    n_exact = n_float = 0
    layers = []
    for i, sp in enumerate(specs):
        prefix = f"layers.{i}."
        arrays = {}
        names = [t[len(prefix):] for t in tensors if t.startswith(prefix)]
        if not names:
            raise WeightFileError(f"{path}: no tensors for layer {i} (expected names {prefix}*)")
        ex = exact.get(str(sp.get("source")), {}) if sp.get("source") is not None else {}
        for name in names:
            f = np.asarray(tensors[prefix + name], dtype=np.float64)
            if not np.isfinite(f).all():
                raise WeightFileError(f"{path}: tensor {prefix + name} holds non-finite values")
            a = np.empty(f.shape, dtype=object)
            for idx, val in np.ndenumerate(f):
                a[idx] = Fraction(float(val)) if val != 0 else 0
            for *idx, q in ex.get(name, []):
                qf = Fraction(q)
                if float(qf) == f[tuple(idx)]:
                    a[tuple(idx)] = qf
                    n_exact += 1
            arrays[name] = a
        n_float += sum(int(np.count_nonzero(np.asarray(tensors[prefix + nm]))) for nm in names)
        try:
            layers.append(layer_from_arrays(sp["kind"], sp["config"], arrays))
        except KeyError as e:
            raise WeightFileError(f"{path}: layer {i} ({sp['kind']}) lacks tensor {prefix}{e.args[0]}") from None
    return LoadedWeights(layers, meta, n_exact, n_float - n_exact)


def split_sections(con: Construction, layers: list[Layer]) -> tuple[dict[str, list[Layer]], int]:
    """Split a full stack into prologue / body copies / epilogue by the
    construction's section sizes; returns ({prologue, bodies, epilogue}, k)."""
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    L = len(layers)
    if L < p + e or (b and (L - p - e) % b) or (not b and L != p + e):
        raise WeightFileError(f"the file has {L} layers; {con.name} needs {p} + {b}*k + {e}")
    k = (L - p - e) // b if b else 0
    bodies = [layers[p + j * b: p + (j + 1) * b] for j in range(k)]
    return {"prologue": layers[:p], "bodies": bodies, "epilogue": layers[L - e:]}, k


def same_layer(a: Layer, b: Layer) -> bool:
    if a.kind != b.kind or a.config() != b.config():
        return False
    A, B = a.arrays(), b.arrays()
    return A.keys() == B.keys() and all(
        A[n].shape == B[n].shape and all(x == y for x, y in zip(A[n].flat, B[n].flat)) for n in A)


def check_against(spec_layers: list[Layer], layers: list[Layer], path) -> None:
    """Each layer of a file has the kind, settings and array shapes of the spec's layer."""
    if len(spec_layers) != len(layers):
        raise WeightFileError(f"{path} has {len(layers)} layers; the construction has {len(spec_layers)}")
    for i, (a, b) in enumerate(zip(spec_layers, layers)):
        if a.kind != b.kind:
            raise WeightFileError(f"{path}: layer {i} is {b.kind}, the construction needs {a.kind}")
        A, B = a.arrays(), b.arrays()
        for name, arr in A.items():
            if name not in B:
                raise WeightFileError(f"{path}: layer {i} lacks array {name}")
            if tuple(B[name].shape) != tuple(arr.shape):
                raise WeightFileError(f"{path}: layer {i} {name} has shape {tuple(B[name].shape)}, "
                                      f"the construction needs {tuple(arr.shape)}")
