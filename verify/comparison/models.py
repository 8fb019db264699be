"""Resolving the construction, loading the learned weights, sampling problems, casting layers.

The learned model is a weight file in the toolkit format (``constructions.weights_io``) with
the *construction's layer structure* (same kinds, settings and array shapes as
``con.layers(k)``); its prediction is the construction's read-out of its state.  A peer's file
(``--from precision-ls | zoology | icl-gd``) is read by the importer of ``python -m
verify.construct import`` (``verify/importers/``: its mapping table, every tensor read, exact
values) into this toolkit's layers on the file's own state, which must be the construction's
(the state ``verify.export`` writes; another state is mapped by ``import --layout``, not here), or
the construction's followed by constant channels (a precision-ls export of per-token biases:
:func:`with_file_constants` writes the construction with them, :class:`WithConstants`);
``--from torch``: a ``polyverify.torch`` module's ``state_dict`` saved with ``torch.save`` (read
with ``torch.load(weights_only=True)``, never unpickled: :func:`read_learned`).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions.base import Construction, run_layers, to_float_array
from constructions.layers import Layer
from constructions import weights_io
from verify.importers import REGISTRY


class CompareError(ValueError):
    """Bad input for the comparison (the CLI prints it as one line, exit status 2)."""


# ------------------------------------------------------------------ constructions

def build_construction(name: str, n: int, d: int, **params) -> Construction:
    """A named construction (``gd-baseconv``, ``gd-lsa``, ..., or a catalogue entry such as
    ``s004-gd``) at sizes ``n`` x ``d``."""
    from constructions import catalogue

    ents = catalogue.entries()
    if name in ents:
        sizes = dict(ents[name].sizes)
        sizes.update({"n": n, "d": d})
        try:
            con = ents[name].build(**sizes, **params)
        except TypeError as e:
            raise CompareError(f"construction {name!r} cannot be built with n, d: {e}") from None
        if not isinstance(con, Construction):
            raise CompareError(f"catalogue entry {name!r} is a claim, not a construction")
        return con
    raise CompareError(f"unknown construction {name!r}; choose one of "
                       f"{', '.join(e.name for e in catalogue.gd_architectures().values())} or a catalogue "
                       f"construction whose variables are a "
                       f"least-squares problem or seed 004 tokens (s004-gd)")


#: the variable names of the two problem families the comparison knows
LS_NAMES = {"A": "A", "b": "b", "x": "x", "q": "q"}
TOKEN_NAMES = {"A": "X", "b": "y", "x": "w", "q": "xt"}


def var_names(con: Construction) -> dict:
    """Map the generic names A, b, x (iterate), q (query) to the construction's variables."""
    for names in (LS_NAMES, TOKEN_NAMES):
        if set(names.values()) == set(con.variables):
            return names
    raise CompareError(f"{con.name}: variables {sorted(con.variables)} are not a least-squares "
                       f"problem (A, b, x, q) or seed 004 tokens (X, y, xt, w)")


def sizes(con: Construction) -> tuple[int, int]:
    nm = var_names(con)
    return tuple(con.variables[nm["A"]])


# ------------------------------------------------------------------ learned weights

@dataclass
class Stack:
    """A full layer stack split into sections (exact Fraction weights)."""

    layers: list[Layer]
    k: int
    prologue: list[Layer]
    bodies: list[list[Layer]]
    epilogue: list[Layer]

    def sections(self, body: int = 0) -> dict[str, list[Layer]]:
        return {"prologue": self.prologue, "body": self.bodies[body] if self.bodies else [],
                "epilogue": self.epilogue}


def stack_of(con: Construction, layers: list[Layer]) -> Stack:
    try:
        sec, k = weights_io.split_sections(con, layers)
    except weights_io.WeightFileError as e:
        raise CompareError(str(e)) from None
    return Stack(list(layers), k, sec["prologue"], sec["bodies"], sec["epilogue"])


def load_learned(path, con: Construction, k: int | None = None) -> Stack:
    """Read a weight file against ``con``: same number of layers, kinds and array shapes."""
    try:
        lw = weights_io.load(path, None, None)
    except weights_io.WeightFileError as e:
        msg = str(e)
        if "no polyverify-weights/1 metadata" in msg:
            msg = (f"{path}: not a toolkit weight file (no polyverify-weights/1 metadata; a training "
                   f"checkpoint?); pass a weight file with {con.name}'s layer structure")
        raise CompareError(msg) from None
    layers = lw.layers
    st = stack_of(con, layers)
    try:
        weights_io.check_against(con.layers(st.k), layers, path)
    except weights_io.WeightFileError as e:
        hint = ""
        meta = lw.meta.get("construction", "")
        if "trained (numerics.training)" in meta:
            hint = (" (a numerics.training SequenceModel export: its layers act on a learned "
                    "embedding, not on the construction's layout)")
        raise CompareError(str(e) + hint) from None
    return st


#: the formats ``--from`` reads: this toolkit's weight files, the peers' (the one registry of formats,
#: ``verify.importers.REGISTRY``: every format but this toolkit's own) and a ``polyverify.torch`` module's
#: ``state_dict``
PEER_FORMATS = tuple(name for name in REGISTRY if name != "polyverify")
FROM_FORMATS = ("polyverify",) + PEER_FORMATS + ("torch",)


@dataclass
class Learned:
    """A learned file read before any work (:func:`read_learned`): a peer's layers
    (``imported``, a ``verify.importers.common.Imported``) or a module's tensors (``tensors``)."""

    path: str
    format: str
    imported: object = None
    tensors: dict | None = None

    def describe(self) -> dict:
        """What was read, for the report: the format, and a peer file's conventions and tensors."""
        out = {"format": self.format}
        if self.imported is not None:
            out["conventions"] = self.imported.conventions
            out["dtype"] = self.imported.dtype
        if self.tensors is not None:
            out["tensors"] = len(self.tensors)
        return out


def read_learned(path, fmt: str, settings: dict | None = None) -> Learned:
    """Read a ``--from`` file (not ``polyverify``: :func:`load_learned`) before any work: the peer's
    importer (its ``check_config`` on ``settings``, its ``read``; a whole model's tensors outside the
    blocks refused, naming them) or the ``state_dict`` (``verify.importers.common.load_tensors``:
    ``torch.load(weights_only=True)``).  A CompareError (one line) for whatever it cannot read."""
    from verify.importers.common import ImportRefused, describe_not_proved, load_tensors

    settings = dict(settings or {})
    if fmt not in FROM_FORMATS or fmt == "polyverify":
        raise CompareError(f"--from {fmt!r}: read_learned reads {', '.join(FROM_FORMATS[1:])}")
    try:
        if fmt == "torch":
            if settings:
                raise CompareError(f"--config {next(iter(settings))}: a state_dict holds no peer's settings")
            tensors, extra = load_tensors(path, "polyverify.torch state_dict")
            extra = sorted(set(extra) - {"metadata"})  # a safetensors file's metadata is not read
            if extra:
                raise CompareError(f"{path}: holds {', '.join(extra)} beside the tensors; a module's state_dict is "
                                   f"tensors only (torch.save(module.state_dict(), path))")
            return Learned(str(path), fmt, tensors=tensors)
        from verify.importers import FORMATS

        mod = FORMATS[fmt]
        check = getattr(mod, "check_config", None)
        if check is not None:
            check(settings)
        elif settings:
            raise CompareError(f"--config {next(iter(settings))}: a {fmt} file carries its own settings")
        imp = mod.read(path, settings)
    except ImportRefused as e:
        msg = str(e)
        if fmt == "torch" and "pickles a" in msg:  # torch.save(module): a pickled object, never unpickled here
            msg += ("; compare --from torch reads torch.save(module.state_dict(), path) (or export the module: "
                    "verify.export.export)")
        raise CompareError(msg) from None
    outside = getattr(imp, "not_proved", None) or {}
    if outside:
        raise CompareError(f"{path}: {len(outside)} tensor(s) of the model are not part of the blocks the "
                           f"comparison reads ({describe_not_proved(outside)}); compare reads the blocks on the "
                           f"construction's state only")
    return Learned(str(path), fmt, imported=imp)


# ------------------------------------------------------------------ constant channels

class WithConstants(Construction):
    """``spec`` on its state followed by *constant channels*, the state a precision-ls export of a stack whose
    bias matrices differ between tokens has (issue 44 item 4; ``verify.importers.writing.constant_channels``):
    each constant channel holds fixed values on the tokens (an indicator) in every state, set on the input
    and carried unchanged; the layers are ``spec``'s written with them as the export writes them (the same
    map exactly on ``spec``'s channels).  The read-out, the variables and the step are ``spec``'s; each
    constant channel is a region of its own (``constant channel J``), so the comparison's per-region
    differences name a learned model that changes one.  ``source``: where the channels were read."""

    def __init__(self, spec: Construction, sections: dict, constants: dict, source: str):
        from constructions.layout import Layout

        T, C0 = spec.layout.shape
        self.spec, self.C0, self.source = spec, C0, source
        self.constants = {int(j): list(v) for j, v in sorted(constants.items())}
        lay = Layout((T, C0 + len(self.constants)), spec.layout.row_axis, spec.layout.col_axis)
        for r in spec.layout.regions.values():
            lay.add(r.name, r.rows, r.cols, r.doc)
        for j in self.constants:
            lay.add(f"constant channel {j}", (0, T), (j, j + 1),
                    "set on the input, carried unchanged by every layer (per-token biases as weights from it)")
        super().__init__(name=spec.name, reference=spec.reference, layout=lay, prologue=sections["prologue"],
                         body=sections["body"], epilogue=sections["epilogue"], params=dict(spec.params),
                         variables=dict(spec.variables), carried=spec.carried,
                         notes=f"{spec.name} with {len(self.constants)} constant channel(s) after its {C0}",
                         rebuild=None, symbolic_params=())

    def extend(self, S) -> np.ndarray:
        """A state of ``spec`` (exact, or float with leading batch axes) with the constant channels appended."""
        S = np.asarray(S)
        shape = S.shape[:-1] + (self.layout.shape[1],)
        if S.dtype == object:
            out = np.empty(shape, dtype=object)
            out.fill(0)
        else:
            out = np.zeros(shape, dtype=S.dtype)
        out[..., :self.C0] = S
        for j, vals in self.constants.items():
            out[..., j] = (np.array(vals, dtype=object) if S.dtype == object
                           else np.array([float(x) for x in vals], dtype=S.dtype))
        return out

    def input_state(self, v):
        return self.extend(self.spec.input_state(v))

    def state(self, v):
        return self.extend(self.spec.state(v))

    def final_state(self, v):
        return self.extend(self.spec.final_state(v))

    def step(self, v):
        return self.spec.step(v)

    def readout(self, state) -> dict:
        return self.spec.readout(state[..., :self.C0])  # numpy or torch (the sensitivities differentiate it)

    def intermediate_states(self, v, section):
        from constructions.base import PartialState

        ds = self.spec.intermediate_states(v, section)
        if ds is None:
            return None
        out = []
        for p in ds:
            if p is None:
                out.append(None)
                continue
            mask = np.zeros(self.layout.shape, dtype=bool)
            mask[:, :self.C0] = p.mask
            mask[:, self.C0:] = True
            out.append(PartialState(self.extend(p.expected), mask))
        return out

    def describe_constants(self) -> dict:
        """For the report: each constant channel's values on the tokens, and where they were read."""
        return {"channels": {str(j): [str(x) for x in v] for j, v in self.constants.items()}, "from": self.source}


def written_with_constants(con: Construction, classes=None):
    """``con``'s sections written with the constant channels a precision-ls export writes
    (``writing.constant_channels`` on prologue + body + epilogue at once; ``classes``: the classes of tokens
    to write them for, default ``con``'s own): ``(sections, constants)``; ``constants`` empty where every
    bias is one per channel and no classes are given."""
    from verify.importers.writing import ExportError, constant_channels

    P, B, E = list(con.prologue), list(con.body), list(con.epilogue)
    try:
        wide, constants, _ = constant_channels(P + B + E, "precision-ls", "the construction's b_conv", classes)
    except ExportError as e:
        raise CompareError(f"{con.name} cannot be written with these constant channels: {e}") from None
    return {"prologue": wide[:len(P)], "body": wide[len(P):len(P) + len(B)], "epilogue": wide[len(P) + len(B):]}, \
        constants


def with_file_constants(learned: Learned, con: Construction) -> Construction:
    """``con``, or ``con`` extended by constant channels (:class:`WithConstants`) where a peer's file has
    ``con``'s tokens and more channels: those of the file's description (``verify.importers.described``, a
    ``polyverify-export/1`` layout: ``con``'s channels, then the constant channels), which must be the ones
    ``con``'s export writes; a file without a description (a researcher's checkpoint as their training loop
    saves it) is read with ``con``'s own, where they are as many as its extra channels.  Anything else is left
    to :func:`learned_stack`, which refuses a state that is not ``con``'s in one line."""
    from verify.importers import mapping
    from verify.importers.common import ImportRefused
    from verify.importers.described import from_config
    from verify.importers.writing import indicator_classes

    imp = learned.imported
    shape = getattr(imp, "state_shape", None)
    T, C = con.layout.shape
    if imp is None or shape is None or int(shape[0]) != T or int(shape[1]) <= C:
        return con
    extra = int(shape[1]) - C
    path = learned.path
    try:
        desc = from_config(getattr(imp, "file_config", None), path)
    except ImportRefused as e:
        raise CompareError(str(e)) from None
    sections, own = written_with_constants(con)
    lay = (desc or {}).get("layout")
    if isinstance(lay, dict) and lay.get("constants"):
        try:
            rows, cols, secs, _ = mapping.parse(lay, con, (T, C + extra))
        except ImportRefused as e:
            raise CompareError(f"{path}: its description's {e}") from None
        if (rows != list(range(T)) or list(cols) != list(range(C)) + [None] * extra or secs
                or sorted(cols.constants) != list(range(C, C + extra))):
            raise CompareError(f"{path}: its description's layout is not {con.name}'s state followed by constant "
                               f"channels (compare reads that state; prove another with python -m verify.construct "
                               f"import)")
        constants, source = cols.constants, "the file's description"
        if constants != own:  # other classes of tokens (a trained module's biases drifted apart: finer ones)
            classes = indicator_classes(constants)
            if classes is None:
                raise CompareError(f"{path}: its description's constant channels "
                                   f"({mapping.describe_constants(constants)}) are not indicators of classes of "
                                   f"tokens (0 / 1, disjoint, some token in none), as an export writes them")
            try:
                sections, got = written_with_constants(con, classes)
            except CompareError as e:
                raise CompareError(f"{path}: its description's constant channels "
                                   f"({mapping.describe_constants(constants)}): {e}") from None
            assert got == constants, (got, constants)
    elif len(own) == extra:
        chans = f"channel {C} is" if extra == 1 else f"channels {C}..{C + extra - 1} are"
        constants, source = own, (f"{con.name}'s own, as its export writes them (the file has no description: its "
                                  f"{chans} read as {'this' if extra == 1 else 'these'})")
    else:
        return con
    return WithConstants(con, sections, constants, source)


def learned_stack(learned: Learned, con: Construction) -> Stack:
    """The layers of a file read by :func:`read_learned` as ``con``'s stack: the file's state must be
    the construction's, and its layers the construction's kinds and array shapes (``check_against``)."""
    path = learned.path
    if learned.tensors is not None:
        from polyverify.torch import layers_from_state_dict

        try:
            layers = layers_from_state_dict(learned.tensors, con, where=str(path))
        except ValueError as e:
            raise CompareError(str(e)) from None
    else:
        imp = learned.imported
        shape = tuple(con.layout.shape)
        if imp.state_shape is not None and tuple(imp.state_shape) != shape:
            raise CompareError(f"{path}: the {learned.format} file's state is {imp.state_shape[0]} x "
                               f"{imp.state_shape[1]}; {con.name} acts on {shape[0]} x {shape[1]}"
                               + _with_own_constants(con) + " (compare reads a peer's file in the construction's "
                               "own state, as verify.export writes it; map another state with python -m "
                               "verify.construct import --layout)")
        layers = list(imp.layers)
    st = stack_of(con, layers)
    try:
        weights_io.check_against(con.layers(st.k), layers, path)
    except weights_io.WeightFileError as e:
        raise CompareError(str(e)) from None
    return st


def _with_own_constants(con: Construction) -> str:
    """For a refusal: the width of ``con``'s state with the constant channels its precision-ls export writes."""
    try:
        _, own = written_with_constants(con)
    except CompareError:
        return ""
    T, C = con.layout.shape
    return f" ({T} x {C + len(own)} with the constant channels its precision-ls export writes)" if own else ""


def constructed_stack(con: Construction, k: int) -> Stack:
    return stack_of(con, [L.map(lambda a: a.copy()) for L in con.layers(k)])


def perturb(layers: list[Layer], layer: int, array: str, index: tuple, delta) -> list[Layer]:
    """A copy of ``layers`` with ``delta`` (exact) added to one weight entry."""
    out = [L.map(lambda a: a.copy()) for L in layers]
    L = out[layer]
    arrs = L.arrays()
    if array not in arrs:
        raise CompareError(f"layer {layer} ({L.kind}) has no array {array!r}; arrays: {sorted(arrs)}")
    a = arrs[array]
    a[tuple(index)] = Fraction(a[tuple(index)]) + Fraction(delta)
    return out


# ------------------------------------------------------------------ casting

def to_float(L: Layer) -> Layer:
    return L.map(lambda a: to_float_array(np.asarray(a), np.float64))


def to_torch(L: Layer) -> Layer:
    import torch

    return L.map(lambda a: torch.as_tensor(to_float_array(np.asarray(a), np.float64)))


def run_float(layers: list[Layer], S: np.ndarray, *, keep: bool = False):
    """Forward float64 states through ``layers``; with ``keep`` the state after every layer."""
    with np.errstate(all="ignore"):
        return run_layers(layers, S, keep=keep)


# ------------------------------------------------------------------ problems

@dataclass
class Problems:
    A: np.ndarray  # (B, n, d)
    b: np.ndarray
    x0: np.ndarray
    q: np.ndarray
    x_star: np.ndarray  # float64 least-squares solutions
    label: str

    def variables(self, con: Construction, x=None) -> dict:
        nm = var_names(con)
        v = {nm["A"]: self.A, nm["b"]: self.b, nm["x"]: self.x0 if x is None else x, nm["q"]: self.q}
        if nm is TOKEN_NAMES:  # seed 004: raw tokens, w = 0
            v[nm["x"]] = np.zeros_like(self.x0) if x is None else x
        return v


def sample(con: Construction, batch: int, *, sigma: float = 1.0, kappa: float = 5.0, scale: float = 1.0,
           seed: int = 0, label: str = "") -> Problems:
    """Fresh problems (``numerics.problems.sample_ls``): x_true ~ N(0, sigma^2), singular values of A
    on [1, kappa], then A, b and the query multiplied by the input ``scale``; x0 ~ N(0, I)."""
    from numerics.problems import sample_ls

    n, d = sizes(con)
    P = sample_ls(batch, n, d, kappa=kappa, sigma=sigma, seed=seed, x0="gaussian")
    rng = np.random.Generator(np.random.PCG64(seed + 7919))
    q = rng.standard_normal((batch, d)) * scale
    A, b = P.A * scale, P.b * scale
    xs = np.stack([np.linalg.lstsq(A[i], b[i], rcond=None)[0] for i in range(batch)])
    return Problems(A, b, P.x0.copy(), q, xs, label or f"sigma={sigma:g} kappa={kappa:g} scale={scale:g}")


def prediction(con: Construction, state) -> np.ndarray:
    return con.readout(state)["prediction"]
