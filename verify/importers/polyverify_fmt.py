"""``--from polyverify``: this toolkit's own weight files (``constructions/weights_io.py``).

Tensors ``layers.{i}.{array}`` with the layout, each layer's kind and settings, and the exact
rationals in the metadata: read by :func:`constructions.weights_io.load` (an entry is the exact
rational of the metadata only in a float64 tensor whose nonzero stored value is exactly float64 of
that rational, else the float's exact binary value; every tensor must be read).  How many entries
were read as declared rationals, and the largest gap to their stored floats, go with the verdict
(``Imported.declared_rationals``).  A file without metadata is read with the specification's
layer structure.  Default layout: the identity (the file's state is the specification's).

The metadata's sizes (``variables``) and parameters (``params``) are what the import proves
(``verify/importers/cli.py``): where the file declares the construction being proved, its
declared parameters build the specification (``--set`` may repeat them, not contradict them),
and any other contradiction between the metadata and what is proved (sizes, ``k``, sections,
each layer's settings: :func:`constructions.weights_io.declared_mismatches`, as ``gd --weights``)
and any layer whose arrays do not have the shapes of the specification at those sizes is
refused before the proof.  The loaded file is kept as ``Imported.loaded`` for those checks.
"""
from __future__ import annotations

from constructions.weights_io import NoMetadataError, WeightFileError, load

from .common import ImportRefused, Imported

NAME = "polyverify"
#: the ``--config`` keys it reads: none (the file carries its own settings)
SETTINGS = ()


def read(path, settings: dict, spec_for=None) -> Imported:
    if settings:
        raise ImportRefused(f"--config {next(iter(settings))}: a polyverify file carries its own settings")
    try:
        lw = load(path)
    except NoMetadataError:
        if spec_for is None:
            raise ImportRefused(f"{path}: no polyverify metadata; the specification's layer structure is needed") from None
        try:
            lw = load(path, spec=spec_for())
        except WeightFileError as e:
            raise ImportRefused(str(e)) from None
    except WeightFileError as e:
        raise ImportRefused(str(e)) from None
    d = lw.declared or {}
    sizes, params = {}, {}
    A = (d.get("variables") or {}).get("A")
    if isinstance(A, list) and len(A) == 2:
        sizes = {"n": A[0], "d": A[1]}
    for k, v in (d.get("params") or {}).items():
        params[k] = v
    shape = tuple(lw.layers[0].shape) if lw.layers and hasattr(lw.layers[0], "shape") else None
    conventions = {"layers": {"value": [{"kind": L.kind, **L.config()} for L in lw.layers[:3]]
                              + ([f"... {len(lw.layers) - 3} more"] if len(lw.layers) > 3 else []),
                              "from": "the file's metadata" if lw.declared else "the specification (no metadata)"},
                   "construction": {"value": d.get("name"), "from": "the file's metadata"}}
    summary = (f"{lw.entries_from_exact} entries of the file from the exact metadata, "
               f"{lw.entries_from_float} from the float values")
    tensors = {f"(all {lw.tensors_read} tensors)": summary}
    dtype = "float64"
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            names = list(f.keys())
            dts = {str(f.get_slice(n).get_dtype()).lower() for n in names}
        if len(names) == lw.tensors_read:  # load() read every tensor (it refuses a file with one unread)
            tensors = {n: f"read by layer {n.split('.')[1]}" if n.startswith("layers.") else "read"
                       for n in names}
        dtype = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}.get(
            next(iter(dts)), next(iter(dts))) if len(dts) == 1 else "mixed"
    except Exception:  # noqa: BLE001 - the dtype is only reported
        pass
    imp = Imported(NAME, str(path), lw.layers, shape, conventions, tensors, dtype, sizes, params)
    imp.loaded = lw  # the LoadedWeights: declared metadata, checked against the specification (cli.settings)
    imp.declared_rationals = {"entries": lw.entries_from_exact, "largest_gap": str(lw.declared_gap),
                              "largest_gap_float": float(lw.declared_gap), "summary": lw.declared_summary()}
    return imp


def default_layout(spec, imported: Imported) -> dict | None:
    R, C = spec.layout.shape
    return {"format": "polyverify-layout/1", "tokens": list(range(R)), "columns": list(range(C))}


# ------------------------------------------------------------------ the writer (``verify/export.py`` drives it)
# This format writes its own container (``constructions.weights_io.save``: the construction's name, layout
# and input map beside the layers), so it has ``save`` where the peers' formats have ``plan``.

#: what the export's summary says the file is
WRITTEN_AS = "polyverify: safetensors, float64 with the exact rationals in the metadata"


def to_write(construction, k, sections):
    """``(construction, k, layers)`` for ``weights_io.save``: ``construction.layers(k)`` is the
    stack where its body copies are one body repeated (``layers`` None); where they differ,
    ``layers`` is the unrolled stack (each copy its own layers, ``"unrolled"`` in the metadata)."""
    import copy

    from constructions.weights_io import same_layer

    from .writing import ExportError, as_sections, default_k

    if construction is None:
        raise ExportError("polyverify: a module loaded from a weight file has no construction (its name, layout and "
                          "input map) to write beside its weights; build the module with load_module(construction, k)")
    if sections is None:
        return construction, default_k(construction, k), None
    s = as_sections(sections)
    body = s.bodies[0] if s.bodies else list(construction.body)
    for j, b in enumerate(s.bodies):
        if len(b) != len(body):
            raise ExportError(f"polyverify: body copy {j} has {len(b)} layers and copy 0 {len(body)}; "
                              f"{construction.name}'s body has {len(construction.body)}")
    con = copy.copy(construction)
    con.prologue, con.body, con.epilogue = list(s.prologue), list(body), list(s.epilogue)
    same = all(x is y or same_layer(x, y) for b in s.bodies for x, y in zip(b, body))
    unrolled = None if same else list(s.prologue) + [L for b in s.bodies for L in b] + list(s.epilogue)
    return con, len(s.bodies), unrolled


def check_writable(construction, k, sections) -> None:
    """Whether the stack can be written (an ``ExportError`` naming what not), writing nothing."""
    to_write(construction, k, sections)


def save(path, construction, k, sections):
    """Write the stack to ``path`` (the caller's temporary file; ``verify/export.py`` renames it):
    the :class:`~verify.importers.writing.Exported` record, its notes said."""
    from constructions.weights_io import save as save_weights

    from .writing import Exported

    con, kk, unrolled = to_write(construction, k, sections)
    save_weights(path, con, kk, layers=unrolled)
    ex = Exported(NAME, con.depth(kk))
    if unrolled is not None:
        ex.notes.append(f"the {kk} body copies differ: written unrolled (each copy its own layers; "
                        f"\"unrolled\": true in the metadata)")
    return ex


def frozen(L, n: str) -> bool:
    """What the format fixes in a layer (``verify.export.frozen_for``): nothing."""
    return False
