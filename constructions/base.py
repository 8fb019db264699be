"""A construction is prologue + body x k + epilogue, with exact weights.

The proof by induction needs it.  Each construction says which *state*
(a function of its variables, on the named layout) holds between the
sections:

* ``input_state(v)``  --prologue-->  ``state(v)``
* ``state(v)``        --body------>  ``state(step(v))``
* ``state(v)``        --epilogue-->  ``final_state(v)``

``verify/prover/proof.py`` checks the three arrows once, in fresh symbols; by
induction on k this proves the stack for every depth.  ``v`` is a dict of
numpy arrays: exact object arrays (one problem) or float arrays with a
leading batch axis, so the same functions embed symbolic and numeric inputs.

Intermediate states (optional).  A section of several layers may also state
what holds *inside* it: ``intermediate_states(v, section)`` returns one entry
per layer of the section, entry ``i`` the state after layer ``i`` as a
:class:`PartialState` (the expected state and a mask of its *declared*
entries), or ``None`` where the construction declares nothing.  The entry of
the section's last layer is always ``None``: the state after it is the
section's target (``state`` / ``final_state``), declared in full.
Convention: the declared entries of the state after layer ``i`` are
everything the later layers of the section read and everything that
survives to the target; the others (scratch channels a layer writes and the
next drops) may hold anything.  So layer ``i+1`` (up to the next declared
state) must take *any* state that agrees with the declared one on its
declared entries to the next declared state.  ``verify.prover.proof`` proves this
for the construction's own layers (undeclared entries as free symbols,
``prove_intermediate_states``; part of ``prove(con)``), and when a section
of some weights fails, names the first layer whose exact output differs from
its declared state on a declared entry: that layer got a correct input
(where it matters) and returned a wrong output.  Without declared states a
failure can only be located where the residual appears.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from . import ops
from .exact_floats import is_lazy
from .layers import Layer
from .layout import Layout


@dataclass
class PartialState:
    """A state of which only some entries are specified (see the module docstring).

    ``expected``: a full state (exact 2-D object array, or float with leading
    batch axes); ``mask``: a bool array of the layout's shape, True on the
    declared entries.  ``expected`` is meaningless where ``mask`` is False.
    """

    expected: np.ndarray
    mask: np.ndarray

    @classmethod
    def on_regions(cls, layout: Layout, state: np.ndarray, regions) -> "PartialState":
        """``state`` declared on the named regions of ``layout`` only."""
        mask = np.zeros(layout.shape, dtype=bool)
        for r in regions:
            mask[layout[r].index] = True
        return cls(state, mask)

    def declared_regions(self, layout: Layout) -> list[str]:
        """Names of the regions with at least one declared entry."""
        return [r.name for r in layout.regions.values() if self.mask[r.index].any()]


class DepthError(ValueError):
    """A requested number of layers that the construction cannot realise."""


@dataclass
class Sections:
    """A stack split as the proof sees it: prologue, one list of layers per body
    copy (a weight file's copies may differ), epilogue."""

    prologue: list
    bodies: list
    epilogue: list


def run_layers(layers, S, *, keep: bool = False, conv_method: str = "direct"):
    """Forward ``S`` through ``layers`` (no sections, no hooks); with ``keep``
    the list of states after every layer.  The section-aware loop is
    :meth:`Construction.run`."""
    states = []
    for L in layers:
        S = L.forward(S, conv_method=conv_method)
        if keep:
            states.append(S)
    return states if keep else S


@dataclass
class Construction(abc.ABC):
    """Base class; subclasses fill the sections and the state functions."""

    name: str
    reference: str  # paper and equation implemented
    layout: Layout
    prologue: list[Layer]
    body: list[Layer]
    epilogue: list[Layer]
    params: dict  # exact (or symbolic) scalars the weights were built from
    variables: dict[str, tuple[int, ...]]  # name -> shape of one problem's variable
    carried: tuple[str, ...] = ()  # variables that ``step`` changes
    notes: str = ""
    #: builder(**params) -> Construction of the same kind, used by the proof to
    #: rebuild the weights with symbolic parameters
    rebuild: Callable[..., "Construction"] | None = field(default=None, repr=False)
    #: parameters that may be replaced by a fresh symbol in the proof
    symbolic_params: tuple[str, ...] = ()
    #: variables whose entries are grouped by their leading index (least squares: ``A`` and
    #: ``b``, one group per token): lets the proof use a smaller exact ring where every
    #: monomial provably draws from at most one group (``verify/prover/token_groups.py``); a proof aid
    #: only, never an assumption
    token_groups: tuple[str, ...] = ()

    # ------------------------------------------------------------- depth
    def depth(self, k: int) -> int:
        return len(self.prologue) + k * len(self.body) + len(self.epilogue)

    def steps_for_depth(self, layers: int) -> int:
        """The repetition count k with ``depth(k) == layers``, or a DepthError
        naming the nearest depths this construction realises."""
        base, per = len(self.prologue) + len(self.epilogue), len(self.body)
        if layers >= base and (layers - base) % per == 0:
            return (layers - base) // per
        k_lo = max(0, (layers - base) // per)
        cands = sorted({self.depth(k) for k in (k_lo, k_lo + 1) if k >= 0})
        below = [c for c in cands if c < layers]
        above = [c for c in cands if c > layers]
        near = ([f"{below[-1]}"] if below else []) + ([f"{above[0]}"] if above else [])
        raise DepthError(
            f"depth {layers} is not realisable by {self.name}: depths are "
            f"{base} + {per}*k (prologue {len(self.prologue)}, body {per}, epilogue "
            f"{len(self.epilogue)}); nearest valid: {' or '.join(near)}")

    def layers(self, k: int) -> list[Layer]:
        return list(self.prologue) + list(self.body) * k + list(self.epilogue)

    def sections(self, k: int) -> "Sections":
        """This construction's own stack of depth ``depth(k)``, as sections."""
        return Sections(list(self.prologue), [list(self.body)] * k, list(self.epilogue))

    def run(self, v: dict, k: int | None = None, *, sections: "Sections | None" = None, state=None,
            cast: Callable[[Layer], Layer] | None = None, conv_method: str = "direct",
            on_layer: Callable[[int, np.ndarray], bool | None] | None = None,
            on_step: Callable[[int, np.ndarray], bool | None] | None = None,
            on_nonfinite: Callable[[int, np.ndarray], bool | None] | None = None):
        """**The** run loop: prologue + body x k + epilogue on ``input_state(v)``
        (or on ``state``), exact (object arrays) or float (any backend's arrays).

        ``sections`` replaces the layers (a weight file: each body copy its
        own); ``cast`` maps each distinct layer once before use (a backend's
        float cast); ``on_step(j, S)`` runs after the prologue (j = 0) and
        after body copy j; ``on_nonfinite(i, S)`` once, for the first stack
        layer ``i`` whose output ``S`` holds a non-finite value (inf or NaN);
        ``on_layer(i, S)`` after every stack layer ``i``.  Each may return
        True to stop (``on_nonfinite``: at layer ``i``).  Returns
        ``(S, layers_run)``.

        A section's layers run by :func:`constructions.plans.run_checked`
        (planned torch BaseConv layers channel-major, the state laid out by
        channel once a section; finiteness read on the device, a host sync per
        section); with ``on_layer`` every layer runs by its ``forward`` and hands
        its state to the hook.  A state handed to a hook is valid until the hook
        returns (the run lays its next state out in the same memory): a hook
        that keeps it copies it.
        """
        from .plans import ChannelBuffer, all_finite, run_checked

        secs = sections if sections is not None else self.sections(k or 0)
        if k is not None and sections is not None:
            secs = Sections(secs.prologue, secs.bodies[:k], secs.epilogue)
        S = self.input_state(v) if state is None else state
        done = 0
        cache: dict[int, Layer] = {}
        # each distinct layer's cast is dropped after the last section that runs it: a cast layer holds its
        # float plans (a learned file's dense filters: tens of MB a layer), and a stack's are not all needed
        # at once
        last = {id(L): i for i, sec in enumerate([secs.prologue, *secs.bodies, secs.epilogue]) for L in sec}
        section = [0]
        report = [on_nonfinite]  # the first non-finite layer is reported once
        # a non-finite input value the layers carry on untouched is reported at the first layer
        unchecked = [on_nonfinite is not None and on_layer is None and not all_finite(S)]
        buffer = ChannelBuffer()  # the channel-major state's memory across the sections

        def nonfinite(i, Si) -> bool:
            hook, report[0] = report[0], None
            return bool(hook(i, Si))

        def apply(layers) -> bool:
            nonlocal S, done
            if cast is not None:
                ids = [id(L) for L in layers]
                for L in layers:
                    if id(L) not in cache:
                        cache[id(L)] = cast(L)
                layers = [cache[id(L)] for L in layers]
                for i in ids:  # this section runs them last: the section's own list keeps them until it ends
                    if last.get(i) == section[0]:
                        cache.pop(i, None)
            section[0] += 1
            if on_layer is None:
                base, checked = done, not (unchecked[0] and layers)
                if layers:
                    unchecked[0] = False
                S, ran, stop = run_checked(layers, S, conv_method=conv_method, input_checked=checked, buffer=buffer,
                                           on_nonfinite=None if report[0] is None
                                           else (lambda i, Si: nonfinite(base + i, Si)))
                done += ran
                return stop
            for L in layers:
                S = L.forward(S, conv_method=conv_method)
                done += 1
                if report[0] is not None and not all_finite(S) and nonfinite(done - 1, S):
                    return True
                if on_layer(done - 1, S):
                    return True
            return False

        if apply(secs.prologue) or (on_step is not None and on_step(0, S)):
            return S, done
        for j, body in enumerate(secs.bodies):
            if apply(body) or (on_step is not None and on_step(j + 1, S)):
                return S, done
        apply(secs.epilogue)
        return S, done

    @property
    def state_size(self) -> int:
        r, c = self.layout.shape
        return r * c

    # ------------------------------------------------------------- semantics
    @abc.abstractmethod
    def input_state(self, v: dict) -> np.ndarray:
        """The state fed to the first layer."""

    @abc.abstractmethod
    def state(self, v: dict) -> np.ndarray:
        """The invariant state between body repetitions."""

    @abc.abstractmethod
    def final_state(self, v: dict) -> np.ndarray:
        """The state after the epilogue."""

    @abc.abstractmethod
    def step(self, v: dict) -> dict:
        """The algorithm step the body implements (same scalar type as ``v``)."""

    def intermediate_states(self, v: dict, section: str) -> "list[PartialState | None] | None":
        """The state after each layer of ``section`` (``prologue``/``body``/``epilogue``):
        a list with one entry per layer, a :class:`PartialState` or ``None`` (nothing
        declared after that layer; always ``None`` for the last layer, whose output is
        the section's target).  ``None`` for the whole list: no intermediate states
        declared (the default).  For ``body`` the input is ``state(v)``, for the
        prologue ``input_state(v)``, for the epilogue ``state(v)``."""
        return None

    def readout(self, state) -> dict:
        """Named read-outs of a (batched) state; default: every carried variable."""
        return {}

    def summary(self) -> dict:
        return {
            "name": self.name,
            "reference": self.reference,
            "layers": {"prologue": len(self.prologue), "body": len(self.body), "epilogue": len(self.epilogue)},
            "depth_formula": f"{len(self.prologue) + len(self.epilogue)} + {len(self.body)}*k",
            "state_shape": list(self.layout.shape),
            "state_size": self.state_size,
            "params": {k: str(v) for k, v in self.params.items()},
        }


@dataclass
class FunctionConstruction(Construction):
    """A construction whose states are given as plain functions of the variables and whose
    algorithm step is the identity: a fixed stack from ``input_state(v)`` to ``final_state(v)``
    (a primitive, a single layer, a few layers between two stated states).

    ``make_input(v)`` is the input state, ``make_final(v)`` the specified output, and
    ``make_state(v)`` the state between body copies (default: the input state; a stack of
    this kind usually has an empty body).  Each returns an exact object array (or a float
    array with leading batch axes), as :class:`Construction`'s methods do."""

    make_input: Callable[[dict], np.ndarray] | None = field(default=None, repr=False)
    make_final: Callable[[dict], np.ndarray] | None = field(default=None, repr=False)
    make_state: Callable[[dict], np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.make_input is None or self.make_final is None:
            raise TypeError(f"{self.name}: a FunctionConstruction needs make_input and make_final")

    def input_state(self, v):
        return self.make_input(v)

    def state(self, v):
        return (self.make_state or self.make_input)(v)

    def final_state(self, v):
        return self.make_final(v)

    def step(self, v):
        return v


# ----------------------------------------------------------------- helpers

def new_state(layout: Layout, like: np.ndarray, batch_ndim: int) -> np.ndarray:
    """A zero state of the right kind: exact (object, 2-D) or float (batched)."""
    if like.dtype == object:
        return layout.new_state()
    return np.zeros(like.shape[:batch_ndim] + tuple(layout.shape), dtype=like.dtype)


def batch_ndim(v: dict, shapes: dict[str, tuple[int, ...]]) -> int:
    """Number of leading batch axes of the variables ``v`` (0 for one problem)."""
    for name, shp in shapes.items():
        if name in v:
            return np.ndim(v[name]) - len(shp)
    return 0


def exact(x) -> Fraction:
    """An exact rational from int / Fraction / 'p/q' string / float (its exact binary value)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        from polyverify.plumbing.rational import parse_rational  # digits and exponent bounded before parsing

        return parse_rational(x.strip(), "value")  # a RationalError is a ValueError
    if isinstance(x, (float, np.floating)):
        if not np.isfinite(x):
            raise ValueError(f"not a finite number: {x!r}")
        return Fraction(float(x))
    raise ValueError(f"not an exact rational: {x!r}")


def exact_sqrt(q: Fraction, what: str) -> Fraction:
    """The rational square root of ``q``, or a one-line error saying why not."""
    q = exact(q)
    if q < 0:
        raise ValueError(f"{what} must be >= 0, got {q}")
    rn, rd = math.isqrt(q.numerator), math.isqrt(q.denominator)
    if rn * rn != q.numerator or rd * rd != q.denominator:
        raise ValueError(f"{what} = {q} has no rational square root; the construction stores "
                         f"sqrt({what}) in its input (choose e.g. 1/16 or 1/64)")
    return Fraction(rn, rd)


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: significand bits ``p`` (hidden bit included), width in
    bits, and the exponent range in MPFR's convention (value = m 2^e with 1/2 <= m < 1): the
    smallest subnormal is 2^(emin-1), values >= 2^emax overflow."""

    name: str
    p: int
    width: int
    emin: int
    emax: int

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -self.p

    @property
    def eps(self) -> float:
        """Machine epsilon, the gap between 1 and the next value: 2^(1-p)."""
        return 2.0 ** (1 - self.p)

    def context(self):
        """gmpy2's context that rounds to this format: to nearest, ties to even, with its
        subnormals and overflow to +-inf."""
        import gmpy2  # only the narrow formats need it

        return gmpy2.context(precision=self.p, emin=self.emin, emax=self.emax, subnormalize=True,
                             round=gmpy2.RoundToNearest)

    def round(self, values) -> list[float]:
        """Each value (float, int, Fraction, gmpy2 mpfr/mpq) correctly rounded *once* to this
        format, as Python floats holding those values; non-finite floats pass through."""
        import gmpy2

        out = []
        with self.context():
            for v in values:
                if isinstance(v, float) and not math.isfinite(v):
                    out.append(v)
                elif isinstance(v, Fraction):
                    out.append(float(gmpy2.mpfr(gmpy2.mpq(v.numerator, v.denominator))))
                else:
                    out.append(float(gmpy2.mpfr(v)))
        return out


#: every float format the toolkit rounds to, by name (the one table: ``numerics.error_measures``
#: reads it too)
FLOAT_FORMATS: dict[str, Format] = {
    "float64": Format("float64", 53, 64, -1073, 1024),
    "float32": Format("float32", 24, 32, -148, 128),
    "bfloat16": Format("bfloat16", 8, 16, -132, 128),
    "float16": Format("float16", 11, 16, -23, 16),
}


def round_exact(z, fmt: str = "float64") -> float:
    """The exact rational ``z`` correctly rounded (to nearest, ties to even) to
    the float format ``fmt``, returned as a Python float holding that value."""
    q = Fraction(z)
    if fmt == "float64":
        return float(q)  # Python's int / int division is correctly rounded
    return FLOAT_FORMATS[fmt].round([q])[0]


def to_float_array(a: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Exact object array -> float array, each entry correctly rounded *once*
    to ``dtype`` (``"bfloat16"``: a float64 array holding bfloat16 values)."""
    name = np.dtype(dtype).name if dtype != "bfloat16" else "bfloat16"
    if name in _NUMPY_ROUNDS and is_lazy(a):  # a weight file's floats, read lazily
        return a.to_float(dtype)  # (constructions/exact_floats.py: each exact value rounded once)
    if a.dtype != object:
        return a.astype(dtype if name != "bfloat16" else np.float64)
    vals = np.zeros(a.shape)
    nz = np.nonzero(ops.nonzero_pattern(a))  # only the nonzero entries (compiled weights are sparse)
    entries = a[nz]
    f64 = None
    if name in _NUMPY_ROUNDS and set(map(type, entries)) <= {int, Fraction}:
        # int and Fraction: float() is their correctly rounded float64 (int / int division), computed
        # in numpy's loop; an entry that float64 holds exactly is then rounded once by numpy's cast
        # (IEEE round to nearest, ties to even, subnormals and overflow included), the others once
        # by the format's gmpy2 context as below (an entry beyond float64's range: all as below)
        try:
            f64 = entries.astype(np.float64)
        except OverflowError:
            pass
    if f64 is not None:
        if name != "float64":
            inexact = np.flatnonzero(entries != f64.astype(object))
            with np.errstate(over="ignore"):
                f64 = f64.astype(dtype).astype(np.float64)
            if len(inexact):
                f64[inexact] = FLOAT_FORMATS[name].round([Fraction(z) for z in entries[inexact]])
        vals[nz] = f64
        return vals.astype(dtype)
    entries = [Fraction(z) for z in entries]
    vals[nz] = [float(q) for q in entries] if name == "float64" else FLOAT_FORMATS[name].round(entries)
    return vals if name == "bfloat16" else vals.astype(dtype)


#: the formats numpy's cast from float64 rounds correctly (round to nearest, ties to even)
_NUMPY_ROUNDS = ("float64", "float32", "float16")
