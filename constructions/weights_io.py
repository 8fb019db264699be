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

:func:`load` reads a file back exactly: each float tensor as an
:class:`~constructions.exact_floats.ExactFloats` (the array as stored, exact values formed where a
consumer reads them: residues modulo a prime, floats, ``Fraction``s; ``numpy.asarray`` gives the
eager object array), each integer tensor as an object array of ints.  An entry is taken
as the exact rational in ``exact`` only in a float64 tensor, only where the
stored value is nonzero and is exactly float64 of that rational (compared as
rationals: :func:`declared_stands_in`); otherwise (an edited, cast or foreign
file: float16 / float32 tensors included) as the exact binary fraction the
float is, so a verdict is about the values stored in the file.  How many
entries were read as declared rationals, and the largest gap between such a
rational and its stored float, are recorded (``LoadedWeights.entries_from_exact``,
``declared_gap``) and reported with every verdict.  Files without our metadata are read with the layer structure
of the construction they are checked against.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from polyverify.plumbing.cli import one_line
from polyverify.plumbing.rational import RationalError, parse_rational

from . import ops
from .base import Construction, to_float_array
from .exact_floats import FLOAT_DTYPES, ExactFloats, differs, equal_exact
from .layers import Layer, array_names, layer_from_arrays
from .sparse import is_sparse

FORMAT = "polyverify-weights/1"


class WeightFileError(ValueError):
    pass


class NoMetadataError(WeightFileError):
    """A weight file without our metadata, read without a construction to read it against."""


def _distinct(layers: list[Layer]) -> list[int]:
    """For each layer, the index of the first layer object identical to it."""
    ids, src = {}, []
    for i, L in enumerate(layers):
        src.append(ids.setdefault(id(L), i))
    return src


def _exact_entries(a: np.ndarray) -> list:
    if is_sparse(a):
        return [[i, j, str(Fraction(v))] for i, j, v in a.entries() if v != 0]
    out = []
    for idx, v in np.ndenumerate(a):
        if v != 0:
            out.append([*map(int, idx), str(Fraction(v))])
    return out


def save(path: str | Path, con: Construction, k: int, *, layers: list[Layer] | None = None) -> Path:
    """Write ``con.layers(k)``, or ``layers`` in its place: a stack of ``con``'s section sizes whose
    body copies may differ (a trained module's), written unrolled, each copy its own layers, with
    ``"unrolled": true`` in the ``construction`` metadata (a prover proves each distinct copy)."""
    from safetensors.numpy import save_file

    unrolled = layers is not None
    layers = con.layers(k) if layers is None else list(layers)
    if unrolled and len(layers) != con.depth(k):
        raise WeightFileError(f"{len(layers)} layers given; {con.name} at k={k} has {con.depth(k)}")
    src = _distinct(layers)
    tensors, exact, specs = {}, {}, []
    for i, L in enumerate(layers):
        for name, arr in L.arrays().items():
            # safetensors holds dense tensors (the format has no sparse form): a sparse weight is
            # rounded entry by entry, then laid out dense; its exact sidecar below lists its entries only
            f64 = arr.map_values(lambda v: to_float_array(v, np.float64)).toarray() if is_sparse(arr) \
                else to_float_array(arr, np.float64)
            tensors[f"layers.{i}.{name}"] = np.ascontiguousarray(f64)
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
            **({"unrolled": True} if unrolled else {}),
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
    layers: list[Layer]  # exact arrays: ExactFloats for float tensors, object arrays of ints for integer ones
    meta: dict
    entries_from_exact: int
    entries_from_float: int
    declared: dict | None = None  # the file's validated ``construction`` metadata, if any
    tensors_read: int = 0
    extra: dict | None = None  # the ``extra`` tensors the caller reads itself (numpy arrays, as stored)
    #: the largest |declared rational - stored float64| over the entries read as declared rationals
    #: (``entries_from_exact`` of them; 0 when none): what the file's floats differ from what is proved
    declared_gap: Fraction = Fraction(0)

    def declared_summary(self) -> str:
        """``N entries read as declared rationals, largest gap G`` (G as a float, e.g. 5.6e-18)."""
        return (f"{self.entries_from_exact} entries read as declared rationals, "
                f"largest gap {float(self.declared_gap):.2g}")


#: a weight file may hold at most this many entries in all: :func:`load` keeps its float tensors as
#: stored (:class:`~constructions.exact_floats.ExactFloats`, 8 bytes an entry at float64: 800 MB here),
#: exact values formed where a consumer reads them; the 512x128 fine-tuned gd-baseconv file holds 20.2M
MAX_ENTRIES = 100_000_000
#: ... and a reader that forms one ``Fraction`` per entry (:func:`exact_tensor` over a whole file: about
#: 120 bytes an entry) at most this many
MAX_EAGER_ENTRIES = 20_000_000
#: ... and at most this many layers
MAX_LAYERS = 100_000

_TENSOR_NAME = re.compile(r"layers\.(0|[1-9][0-9]*)\.(.+)")


def _header(meta: dict, path) -> tuple[list[dict], dict, dict]:
    """Validate a polyverify header: (layer specs, exact entries, construction)."""
    def bad(what):
        return WeightFileError(f"{path}: malformed {FORMAT} metadata: {what}")

    out = {}
    for key in ("construction", "layers", "exact"):
        if key not in meta:
            raise bad(f"missing {key!r}")
        try:
            out[key] = json.loads(meta[key])
        except (json.JSONDecodeError, TypeError) as e:
            raise bad(f"{key!r} is not JSON ({one_line(e)})") from None
    specs, exact, cons = out["layers"], out["exact"], out["construction"]
    if not isinstance(specs, list) or len(specs) > MAX_LAYERS:
        raise bad(f"'layers' must be a list of at most {MAX_LAYERS} layers")
    for i, sp in enumerate(specs):
        if not isinstance(sp, dict) or not isinstance(sp.get("kind"), str):
            raise bad(f"layer {i} must be an object with a 'kind'")
        try:
            sp["names"] = array_names(sp["kind"], sp.get("config"))
        except ValueError as e:
            raise bad(f"layer {i}: {e}") from None
        src = sp.get("source")
        if src is not None and (not isinstance(src, int) or isinstance(src, bool) or not 0 <= src <= i):
            raise bad(f"layer {i}: 'source' must be a layer index <= {i}, got {src!r}")
    if not isinstance(exact, dict):
        raise bad("'exact' must be an object")
    for key, arrs in exact.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < len(specs)) or not isinstance(arrs, dict):
            raise bad(f"'exact' entry {key!r} is not a layer index with an object of arrays")
        for name, entries in arrs.items():
            if name not in specs[int(key)]["names"] or not isinstance(entries, list):
                raise bad(f"'exact' entry for layer {key} names {name!r}, not an array of that layer")
            where = f"'exact' value of layer {key} {name}"
            for e in entries:
                if (not isinstance(e, list) or len(e) < 1 or not isinstance(e[-1], str)
                        or not all(type(i) is int and i >= 0 for i in e[:-1])):  # (type: a bool is no index)
                    raise bad(f"'exact' entry {e!r} of layer {key} {name} is not [index..., \"p/q\"]")
                try:  # bounded: '1e999999999' is refused before 10**999999999 is computed
                    e[-1] = parse_rational(e[-1], where)  # parsed once: _exact_entries_of reads the Fraction
                except RationalError as err:
                    raise bad(f"{where} is not a rational: {str(err)[len(where) + 2:]}") from None
    if not isinstance(cons, dict):
        raise bad("'construction' must be an object")
    return specs, exact, cons


def exact_tensor(t: np.ndarray, name: str, path) -> np.ndarray:
    """A tensor as an exact object array: integers as integers, floats as the
    exact binary fractions they are; other dtypes are refused by name, bool among them (a mask
    or a flag, not weights: read as 0/1 it would be proved as a matrix nobody wrote).  The one
    reading of a tensor's entries for ``gd --weights``, ``circuit --weights`` and every importer."""
    kind = t.dtype.kind
    if kind == "b":
        raise WeightFileError(f"{path}: tensor {name} has dtype bool, which is not a weight (a mask or flag; "
                              f"integer and float tensors only)")
    a = np.empty(t.size, dtype=object)
    if kind in "iu":
        a[:] = t.ravel().tolist()  # Python ints, exactly
        return a.reshape(t.shape)
    if kind != "f":
        raise WeightFileError(f"{path}: tensor {name} has dtype {t.dtype}, which cannot be read exactly "
                              f"(integer and float tensors only)")
    if not np.isfinite(t).all():
        raise WeightFileError(f"{path}: tensor {name} holds non-finite values")
    # float16/32/64 widen to float64 exactly; each value is the binary fraction it is (zero: the int 0)
    a[:] = [Fraction(x) if x else 0 for x in t.astype(np.float64).ravel().tolist()]
    return a.reshape(t.shape)


def lazy_tensor(t: np.ndarray, name: str, path, over_pos=(), over_vals=()) -> "ExactFloats | np.ndarray":
    """A tensor read exactly, lazily (``constructions/exact_floats.py``): a float tensor as an
    :class:`~constructions.exact_floats.ExactFloats` (the floats kept as stored; each entry the
    binary fraction it is, or the declared rational at ``over_pos``), an integer tensor as
    :func:`exact_tensor`'s object array; the same refusals as :func:`exact_tensor`."""
    if t.dtype.kind != "f" or t.dtype not in FLOAT_DTYPES:
        if len(over_pos):
            raise WeightFileError(f"{path}: tensor {name}: declared rationals apply to float tensors only")
        return exact_tensor(t, name, path)
    if not np.isfinite(t).all():
        raise WeightFileError(f"{path}: tensor {name} holds non-finite values")
    return ExactFloats(t, np.asarray(over_pos, dtype=np.int64), _fractions(over_vals))


def _fractions(vals) -> np.ndarray:
    a = np.empty(len(vals), dtype=object)
    a[:] = list(vals)
    return a


def load(path: str | Path, spec: Construction | None = None, k: int | None = None, *,
         extra: tuple[str, ...] = ()) -> LoadedWeights:
    """Read a weight file into exact layers (see the module docstring).

    Every tensor of the file is consumed by exactly one layer array, or the
    file is refused naming the tensors nothing reads.  Files without our
    metadata are read with the layer structure of ``spec``; their layer count
    comes from the tensor names (``k`` is not used: the caller compares the
    count with what it proves)."""
    path = Path(path)
    meta, names, tensors = _read_tensors(path)
    missing_extra = [n for n in extra if n not in tensors]
    if missing_extra:
        raise WeightFileError(f"{path}: lacks tensor {missing_extra[0]}")
    by_layer: dict[int, set[str]] = {}
    unread = []
    for n in names:
        if n in extra:
            continue
        m = _TENSOR_NAME.fullmatch(n)
        if m:
            by_layer.setdefault(int(m[1]), set()).add(m[2])
        else:
            unread.append(n)
    specs, exact, declared = _layer_specs(meta, spec, by_layer, path)
    unread += [f"layers.{i}.{nm}" for i, nms in sorted(by_layer.items()) if i >= len(specs) for nm in sorted(nms)]
    for i, sp in enumerate(specs):
        unread += [f"layers.{i}.{nm}" for nm in sorted(by_layer.get(i, set()) - set(sp["names"]))]
    if unread:
        more = f" and {len(unread) - 5} more" if len(unread) > 5 else ""
        raise WeightFileError(f"{path}: tensors that no layer of the stack reads: {', '.join(unread[:5])}{more} "
                              f"(the file is refused: every tensor must be part of the proof)")
    layers, n_exact, n_float, gap = _build_layers(specs, exact, by_layer, tensors, path)
    return LoadedWeights(layers, meta, n_exact, n_float - n_exact, declared, len(names),
                         {n: tensors[n] for n in extra}, gap)


def _read_tensors(path: Path) -> tuple[dict, list[str], dict]:
    """The file's metadata, tensor names and tensors; one-line errors for a missing, non-regular,
    oversized or unreadable file (naming the importer for a peer's checkpoint)."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():  # a device or FIFO exists but is no file: say so
        raise WeightFileError(f"weight file not found: {path}" if not path.exists() else
                              f"{path}: not a regular file (a directory, device or FIFO): a weight file is needed")
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
            names = list(f.keys())
            total = sum(int(np.prod(f.get_slice(n).get_shape())) for n in names)
            if total > MAX_ENTRIES:
                raise WeightFileError(f"{path}: {total} entries, above the limit {MAX_ENTRIES} of a weight file")
            tensors = {n: f.get_tensor(n) for n in names}
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        if isinstance(e, WeightFileError):
            raise
        peer = path.suffix.lower() in (".pt", ".pth", ".bin", ".ckpt", ".npz")  # a peer's checkpoint: say how to read it
        raise WeightFileError(f"{path}: {f'a {path.suffix} file, ' if peer else ''}not a readable safetensors file "
                              f"({one_line(e)})" + (f"; read a peer's checkpoint with python -m verify.construct import "
                                                    f"{path} --from precision-ls|zoology|icl-gd --spec SPEC" if peer else "")) from None
    return meta, names, tensors


def _layer_specs(meta: dict, spec: Construction | None, by_layer: dict[int, set[str]],
                 path: Path) -> tuple[list[dict], dict, dict | None]:
    """The layers the file holds (kind, config, source, array names), its exact entries and its
    declared claims: from our metadata, or (a file without it) from ``spec``'s layers, as many
    as the tensor names give."""
    if meta.get("format") == FORMAT:
        return _header(meta, path)
    if spec is None:
        raise NoMetadataError(f"{path}: no {FORMAT} metadata; give the construction to read it against")
    n_layers = 1 + max(by_layer) if by_layer else 0
    if n_layers > MAX_LAYERS:
        raise WeightFileError(f"{path}: {n_layers} layers, above the limit {MAX_LAYERS}")
    try:
        k_file = repetitions(spec, n_layers)
    except WeightFileError as e:
        raise WeightFileError(f"{path}: {e}") from None
    specs = [{"kind": L.kind, "config": L.config(), "source": None,
              "names": array_names(L.kind, L.config())} for L in spec.layers(k_file)]
    return specs, {}, None


def _build_layers(specs: list[dict], exact: dict, by_layer: dict[int, set[str]], tensors: dict,
                  path: Path) -> tuple[list[Layer], int, int, Fraction]:
    """Each layer from its tensors, declared exact entries put in place: the layers, the
    number of exact entries put in, of nonzero float entries, and the largest gap between an
    exact entry and its float."""
    n_exact = n_float = 0
    gap = Fraction(0)
    seen: set = set()
    layers = []
    for i, sp in enumerate(specs):
        prefix = f"layers.{i}."
        have = by_layer.get(i, set())
        if not have:
            raise WeightFileError(f"{path}: no tensors for layer {i} (expected names {prefix}*)")
        missing = [nm for nm in sp["names"] if nm not in have]
        if missing:
            raise WeightFileError(f"{path}: layer {i} ({sp['kind']}) lacks tensor {prefix}{missing[0]}")
        ex = exact.get(str(sp.get("source")), {}) if sp.get("source") is not None else {}
        arrays = {}
        for name in sp["names"]:
            t = tensors[prefix + name]
            if t.dtype.kind == "f":
                if not np.isfinite(t).all():  # before any declared rational is compared with it
                    raise WeightFileError(f"{path}: tensor {prefix + name} holds non-finite values")
                listed = list(_exact_entries_of(ex.get(name, []), t, i, name, prefix + name, seen, path))
                over_pos, over_vals = _standing_in(listed, t)
                for at, qf in zip(over_pos.tolist(), over_vals):
                    if not _own_float(qf):  # (a rational that is its own float64 is the stored value: gap 0)
                        gap = max(gap, abs(qf - Fraction(float(t.reshape(-1)[at]))))
                n_exact += len(over_vals)
                a = lazy_tensor(t, prefix + name, path, over_pos, over_vals)
            else:
                a = exact_tensor(t, prefix + name, path)
            n_float += int(np.count_nonzero(t))
            arrays[name] = a
        layers.append(layer_from_arrays(sp["kind"], sp["config"], arrays))
    return layers, n_exact, n_float, gap


def _exact_entries_of(listed: list, t: np.ndarray, i: int, name: str, full: str, seen: set, path: Path):
    """The metadata's exact entries of array ``name`` of layer ``i`` (tensor ``full``) as
    (index, Fraction), checked: inside the tensor, listed once (``seen``: across the file), a
    rational."""
    for *idx, q in listed:
        if len(idx) != t.ndim or any(j >= n for j, n in zip(idx, t.shape)):
            raise WeightFileError(f"{path}: malformed {FORMAT} metadata: 'exact' index {idx} "
                                  f"outside {full} of shape {tuple(t.shape)}")
        ix = tuple(idx)
        if (i, name, ix) in seen:
            raise WeightFileError(f"{path}: malformed {FORMAT} metadata: 'exact' lists {full}{list(ix)} twice")
        seen.add((i, name, ix))
        yield ix, q if type(q) is Fraction else parse_rational(q, f"'exact' value of {full}{list(ix)}")  # (_header)


def _standing_in(listed: list, t: np.ndarray) -> tuple[np.ndarray, list]:
    """The flat positions and rationals of the declared entries ``listed`` (``(index, Fraction)``) that
    are read in place of the stored ones: :func:`declared_stands_in` for all of them at once (float64
    only; a nonzero stored value equal, as a float, to the correctly rounded float64 of the rational:
    two finite floats are equal exactly when their rationals are)."""
    if not listed or t.dtype != np.float64:
        return np.zeros(0, dtype=np.int64), []
    flat = (np.ravel_multi_index(np.asarray([ix for ix, _ in listed], dtype=np.int64).T, t.shape) if t.ndim
            else np.zeros(len(listed), dtype=np.int64)).astype(np.int64)  # (indices checked inside the tensor)
    stored = t.reshape(-1)[flat]
    qd = np.asarray([_float64_or_nan(q) for _, q in listed], dtype=np.float64)
    keep = np.flatnonzero((stored != 0) & (stored == qd))  # NaN (no float64): never equal
    return flat[keep], [listed[j][1] for j in keep.tolist()]


def _own_float(q: Fraction) -> bool:
    """Whether ``q`` is a float64 exactly, read off its numerator and denominator: a power-of-two
    denominator of at most 2^1074 over a numerator of at most 53 bits (normal or subnormal alike; a
    sufficient test, so a False only costs an exact subtraction)."""
    n, d = q.numerator, q.denominator
    return d & (d - 1) == 0 and d.bit_length() <= 1075 and n.bit_length() <= 53  # (|q| < 2^53: in range)


def _float64_or_nan(q: Fraction) -> float:
    try:
        return float(q)  # correctly rounded (int / int true division)
    except OverflowError:
        return float("nan")


def declared_stands_in(q: Fraction, t: np.ndarray, idx: tuple) -> bool:
    """Whether the declared rational ``q`` is read in place of the stored entry ``t[idx]``: only
    in a float64 tensor, only for a nonzero stored value, and only when that value *is*
    float64(q) (the correctly rounded double of ``q``: Python's ``Fraction.__float__``), compared
    exactly as rationals.  A float16/float32 tensor never qualifies: numpy compares a Python
    float with such an entry after casting it *down* to the entry's dtype, so every ``q`` that
    merely rounds to the stored value would pass; their entries are read as the
    exact binary fractions they are."""
    if t.dtype != np.float64:
        return False
    stored = float(t[idx])
    if stored == 0.0:
        return False
    try:
        qd = float(q)  # correctly rounded to float64 (int / int true division)
    except OverflowError:
        return False
    return Fraction(stored) == Fraction(qd)


def repetitions(con: Construction, n_layers: int) -> int:
    """The body repetition count k of a stack of ``n_layers`` layers of ``con``'s shape
    (``p + b*k + e``), or a WeightFileError."""
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    L = n_layers
    if L < p + e or (b and (L - p - e) % b) or (not b and L != p + e):
        raise WeightFileError(f"the file has {L} layers; {con.name} needs {p} + {b}*k + {e}")
    return (L - p - e) // b if b else 0


def split_sections(con: Construction, layers: list[Layer]) -> tuple[dict[str, list[Layer]], int]:
    """Split a full stack into prologue / body copies / epilogue by the
    construction's section sizes; returns ({prologue, bodies, epilogue}, k)."""
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    L = len(layers)
    k = repetitions(con, L)
    bodies = [layers[p + j * b: p + (j + 1) * b] for j in range(k)]
    return {"prologue": layers[:p], "bodies": bodies, "epilogue": layers[L - e:]}, k


def same_layer(a: Layer, b: Layer) -> bool:
    if a.kind != b.kind or a.config() != b.config():
        return False
    A, B = a.arrays(), b.arrays()
    return A.keys() == B.keys() and all(A[n].shape == B[n].shape and _same_entries(A[n], B[n]) for n in A)


def _same_entries(X, Y) -> bool:
    """Every entry of X equals Y's.  Exact (object) arrays: entries that are the same object are
    equal (``==`` is reflexive for every exact scalar type; a builder's zeros are all the int 0
    object, and a C x C weight is mostly those), the others are compared with ``==``; both
    steps in numpy's loops."""
    if isinstance(X, ExactFloats) and isinstance(Y, ExactFloats):  # stored floats compared, no Fraction formed
        return X.shape == Y.shape and equal_exact(X, Y)
    if isinstance(X, ExactFloats) or isinstance(Y, ExactFloats):  # against a construction's exact array
        G, W = (X, Y) if isinstance(X, ExactFloats) else (Y, X)
        W = W.toarray() if is_sparse(W) else W
        return G.shape == tuple(np.shape(W)) and not differs(G, W).any()
    if is_sparse(X) and is_sparse(Y):  # the same pattern and values, entry by entry
        return (np.array_equal(X.rows, Y.rows) and np.array_equal(X.cols, Y.cols)
                and all(a == b for a, b in zip(list(X.vals), list(Y.vals))))
    X, Y = np.asarray(X), np.asarray(Y)  # a sparse weight against a dense one: laid out dense
    if X.dtype == object and Y.dtype == object:
        differ = np.flatnonzero(ops.addresses(X) != ops.addresses(Y))
        X, Y = X.ravel()[differ], Y.ravel()[differ]
    return bool(np.all(np.asarray(X == Y, dtype=bool)))


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


def declared_mismatches(con: Construction, k: int, lw: LoadedWeights) -> list[str]:
    """How the file's self-description differs from what is about to be proved:
    construction name, problem variables (sizes), parameters, repetition count
    and section sizes (from the ``construction`` metadata), and each layer's
    settings (causal, residual, heads, ...).  Empty for a file without metadata
    (nothing declared) or one that agrees."""
    out: list[str] = []
    d = lw.declared
    if d is not None:
        if d.get("name") != con.name:
            out.append(f"construction {d.get('name')!r} (proving {con.name!r})")
        dv = d.get("variables")
        want_v = {v: list(s) for v, s in con.variables.items()}
        if dv != want_v:
            out.append(f"variables {_short(dv)} (proving {_short(want_v)})")
        dp = d.get("params")
        want_p = {p: str(v) for p, v in con.params.items()}
        if not isinstance(dp, dict) or {p: str(v) for p, v in dp.items()} != want_p:
            out.append(f"parameters {_short(dp)} (proving {_short(want_p)})")
        if d.get("k") != k:
            out.append(f"k={d.get('k')!r} body repetitions (proving k={k})")
        want_s = {"prologue": len(con.prologue), "body": len(con.body), "epilogue": len(con.epilogue)}
        if d.get("sections") != want_s:
            out.append(f"sections {_short(d.get('sections'))} (proving {_short(want_s)})")
    spec_layers = con.layers(k)
    for i, (a, b) in enumerate(zip(spec_layers, lw.layers)):
        if a.kind != b.kind or a.config() != b.config():
            out.append(f"layer {i} is {b.kind} {_short(b.config())} (proving {a.kind} {_short(a.config())})")
            break
    return out


def _short(x, n: int = 80) -> str:
    s = json.dumps(x, sort_keys=True, default=str)
    return s if len(s) <= n else s[:n] + "..."
