"""Resolving the construction, loading the learned weights, sampling problems, casting layers.

The learned model is a weight file in the toolkit format (``constructions.weights_io``) with
the *construction's layer structure* (same kinds, settings and array shapes as
``con.layers(k)``); its prediction is the construction's read-out of its state.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions.base import Construction, run_layers, to_float_array
from constructions.layers import Layer
from constructions import weights_io


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
