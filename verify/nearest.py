"""Did a learned model learn the construction, and how close is it?  The nearest construction of a
family to a weight file (issue 41, item 2).  Diagnosis only: it reads layers, fits numbers and hands the
snapped construction to the ordinary prover; it never decides the file's verdict.

For a file whose exact proof FAILED (``gd --weights``, ``import``), the construction's family is the
builder of the specification with its parameters (``eta``, and ``lam`` for the ridge architectures;
whatever the builder takes, ``verify/importers/specs.py``).  The fit, in float64 (floats are the subject
here: a trained file is floats, and so is the distance):

1. **How the parameters enter the weights.**  The family is built at ``2^P`` corners (each fitted
   parameter at the value used and at 4 times it, or 1/16 where it was 0: squares stay squares, as
   ``gd-lsa`` needs) and each weight entry is interpolated multilinearly between them (every GD
   architecture's weights are multilinear in ``eta`` and ``lam``: ``-eta``, ``-eta lam``,
   ``1 - eta lam``).  A parameter on which no weight depends (``gd-lsa``'s and ``gd-elsa``'s: their
   ``eta`` and ``lam`` live in the input embedding, seed 001 eq. (37), (56)) is kept at the value used,
   and the report says so.  The multilinear model is checked against the exact build at the snapped
   parameters; a mismatch is reported.
2. **The model's symmetries divided out**, per layer kind, with the invariants the comparison already
   uses (``verify/comparison/analyses.py``, registered in ``constructions/kinds.py``):

   * BaseConv (seed 000 eq. (2)/(19)): the inner channels matched to the construction's (a permutation of
     the columns of ``W_in, b_in, h, b_conv, W_gate, b_gate`` and the rows of ``W_out`` together is the
     same function; ``match_channels``: the assignment of least summed squared distance between the
     channels' rank-one tensors gate (x) conv (x) ``W_out``, found once per fit), then per inner channel
     ``c`` the scalings and sign flips
     ``W_in[:, c], b_in[:, c]`` times ``s``, ``h[:, c]`` times ``t``, ``b_conv[:, c]`` times ``s t``,
     ``W_gate[:, c], b_gate[:, c]`` times ``u``, ``W_out[c, :]`` divided by ``s t u``; the learned layer
     is rescaled per channel to the scales nearest the construction in least squares (``align_baseconv``:
     from the construction's factor norms and signs, refined by Gauss-Newton on the channel's summed
     squared difference; norm ratios alone put a factor's dense noise whole into ``W_out``'s row);
   * LSA (seed 001 eq. (8)): each head compared as ``W3 W1^T`` and ``W2`` (the product is invariant
     under the gauge ``W3 R``, ``W1 R^-T``), heads matched (``match_heads``: every permutation up to 6
     heads, an optimal assignment above), the scale (and sign) exchanged between the two factors fitted
     by regressing the learned ``W3 W1^T`` on the construction's (unbiased by dense noise, where a norm
     ratio is not);
   * token-form LSA (seed 004 eq. (2)-(3)): ``Q`` and ``P`` per head, matched, scale exchanged;
   * ELSA (seed 001 eq. (16)): no invariant is derived (its bias matrices enter each head's cubic
     product), so its arrays are compared as stored.
3. **The fit**: least squares in the parameters (``scipy.optimize.least_squares``, Levenberg-Marquardt)
   of the residual "learned layer aligned to the construction at ``p``, minus the construction at ``p``",
   over every entry of the layers that move with the parameters (the alignment is redone at each ``p``:
   a head's scale moves ``eta`` between ``W3 W1^T`` and ``W2``).
4. **The distance** per layer and array (max ``|w - w*|``, where, relative ``|w - w*| / max(|w*|, 1)``,
   spurious entries: nonzero where the construction has a structural zero, i.e. a zero at every corner),
   to the fitted construction after alignment.
5. **The snapped construction**: each fitted parameter as the simplest rational (smallest denominator, at
   most :data:`MAX_DENOMINATOR`) within a tolerance, the wider of :data:`SNAP_ERRORS` standard errors and
   the change of the parameter that moves none of the entries depending on it by more than their largest
   residual; both from the residual's Jacobian at the fit (finite differences through the alignment) on
   the entries that depend on the parameter strongly (at least half its largest derivative): the residual
   elsewhere, a structure the file does not share, says nothing about the parameter, and the second
   absorbs a small bias dense noise may give the alignment, which the standard error does not see; never more than :data:`SNAP_RELATIVE` of the fitted value (a poorly determined ``lam``
   would snap to 0, where the compiled architectures have another structure).  At an exact fit: the
   nearest rational of denominator at most the bound (``Fraction.limit_denominator``).  It is built
   exactly and proved by the ordinary prover (``verify.prover.proof.prove`` or the command's own bounded call); its verdict is the kernel's
   word for *that construction*, never for the file.

Bounded: a stack of more than :data:`MAX_ENTRIES` weight entries, or more than :data:`MAX_FIT_PARAMS`
parameters to fit, is skipped with one line naming the bound.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from constructions.layers import BaseConv, layer_from_arrays
from constructions.sparse import dense, is_sparse

#: snapped parameters are rationals with a denominator at most this
MAX_DENOMINATOR = 1024
#: a fitted parameter snaps to the simplest rational within this many standard errors of the fit, or
#: within the change that moves no entry depending on it by more than their largest residual, but never
#: farther than SNAP_RELATIVE of its value (a poorly determined lam would otherwise snap to 0, another
#: structure for the compiled architectures)
SNAP_ERRORS = 3
SNAP_RELATIVE = 0.1
#: at most this many parameters are fitted (2^P builds)
MAX_FIT_PARAMS = 3
#: a learned stack of more weight entries than this is not fitted (one line says so)
MAX_ENTRIES = 20_000_000
#: evaluations of the aligned residual at most (scipy.optimize.least_squares's max_nfev)
MAX_EVALS = 200
#: seconds the fit may have spent before it builds the construction at one more point (a compiled
#: architecture's build is a compile: seconds at 64 x 16, minutes far above); past it, one line says so
BUDGET_S = 120.0


class _OverBudget(Exception):
    pass


def _f64(a) -> np.ndarray:
    a = dense(a) if is_sparse(a) else a
    return np.asarray(a, dtype=np.float64)


def float_layer(L):
    """The layer with dense float64 weights (an exact entry as its nearest float)."""
    return layer_from_arrays(L.kind, L.config(), {k: _f64(v) for k, v in L.arrays().items()})


def entries(layers) -> int:
    return sum(int(np.prod(getattr(a, "shape", ()))) for L in layers for a in L.arrays().values())


# ------------------------------------------------------------------ per kind: canonical forms and alignment

#: what is divided out, per layer kind (printed and in the JSON)
SYMMETRIES = {
    "baseconv": "inner channels matched (a permutation); per channel scalings and sign flips of the gate, filter "
                "and input projection (W_out row divided by their product), fitted in least squares",
    "lsa": "heads matched; per head W3 W1^T and W2 (gauge W3 R, W1 R^-T), scale and sign exchanged between them",
    "token_lsa": "heads matched; per head Q and P, scale and sign exchanged between them",
    "elsa": "none (no invariant is derived for ELSA: its bias matrices enter each head's cubic product)",
}

_HEAD_FACTORS = {"lsa": (("W3W1^T", lambda h: h.W3 @ h.W1.T), ("W2", lambda h: h.W2)),
                 "token_lsa": (("Q", lambda h: h.Q), ("P", lambda h: h.P))}


def canonical(L) -> dict[str, np.ndarray]:
    """A float layer's arrays in the form compared: BaseConv and ELSA as stored, an attention head as
    its invariant factors."""
    if L.kind in _HEAD_FACTORS:
        (fn, f), (gn, g) = _HEAD_FACTORS[L.kind]
        out = {}
        for i, h in enumerate(L.heads):
            out[f"head{i}.{fn}"], out[f"head{i}.{gn}"] = f(h), g(h)
        return out
    return dict(L.arrays())


def _heads(canon: dict, kind: str) -> list[tuple[np.ndarray, np.ndarray]]:
    (fn, _), (gn, _) = _HEAD_FACTORS[kind]
    n = len(canon) // 2
    return [(canon[f"head{i}.{fn}"], canon[f"head{i}.{gn}"]) for i in range(n)]


def _ref_baseconv(ref_canon: dict, ref_config: dict) -> BaseConv:
    return BaseConv(**ref_canon, causal=ref_config["causal"], residual=ref_config["residual"],
                    same=bool(ref_config.get("same", False)))


def unit_order(learned, ref_canon: dict, ref_config: dict) -> list[int] | None:
    """The learned unit matched to each constructed one: a head (attention kinds, ``match_heads``), a
    BaseConv inner channel (``match_channels``); None for a kind whose units are not permuted (ELSA)."""
    if learned.kind == "baseconv":
        from verify.comparison.analyses import match_channels

        order = match_channels(learned, _ref_baseconv(ref_canon, ref_config))
        return None if order == list(range(len(order))) else order
    if learned.kind not in _HEAD_FACTORS:
        return None
    from verify.comparison.analyses import match_heads

    return match_heads(_heads(canonical(learned), learned.kind), _heads(ref_canon, learned.kind))


def aligned(learned, ref_canon: dict, ref_config: dict, order: list[int] | None) -> dict[str, np.ndarray]:
    """The learned float layer's canonical arrays after its symmetries are fitted to the reference's."""
    kind = learned.kind
    if kind == "baseconv":
        from verify.comparison.analyses import align_baseconv, permute_channels

        if order is not None:  # the inner channels in the construction's order (formed once per fit)
            memo = learned.__dict__.get("_permuted")
            if memo is None or memo[0] != tuple(order):
                memo = learned.__dict__["_permuted"] = (tuple(order), permute_channels(learned, order))
            learned = memo[1]
        return dict(align_baseconv(learned, _ref_baseconv(ref_canon, ref_config)).arrays())
    if kind in _HEAD_FACTORS:
        (fn, _), (gn, _) = _HEAD_FACTORS[kind]
        own = learned.__dict__.get("_canonical")  # the learned layer's products, formed once per fit
        if own is None:
            own = learned.__dict__["_canonical"] = canonical(learned)
        fl, fc = _heads(own, kind), _heads(ref_canon, kind)
        out = {}
        for u, (Fc, _) in enumerate(fc):
            Fl, Gl = fl[order[u]]
            # the scale (and sign) exchanged between the two factors: the learned first factor regressed on
            # the construction's, F_l ~ t F_c (noise in F_l enters linearly: a norm ratio would be biased by
            # the noise's own norm, large where F_c is small, e.g. a head of entries -eta lam)
            cc, lc = float(np.vdot(Fc, Fc)), float(np.vdot(Fl, Fc))
            t = lc / cc if cc > 0 and lc != 0 else 1.0
            out[f"head{u}.{fn}"], out[f"head{u}.{gn}"] = Fl / t, Gl * t
        return out
    return dict(learned.arrays())


# ------------------------------------------------------------------ the multilinear family

class _Family:
    """The reference stack's canonical arrays as multilinear functions of the fitted parameters
    (entries that vary between the corners; the rest constant)."""

    def __init__(self, stacks: dict[tuple, list], names: list[str], nodes: dict[str, tuple[float, float]]):
        self.names, self.nodes = names, nodes
        corners = list(stacks)
        first = stacks[corners[0]]
        ids, self.slot, at = {}, [], []
        self.configs, base_layers = [], []
        for i, L in enumerate(first):  # a repeated layer object (a body copy) is one slot
            if id(L) not in ids:
                ids[id(L)] = len(base_layers)
                base_layers.append(L)
                at.append(i)
            self.slot.append(ids[id(L)])
        self.pos = {c: [stacks[c][i] for i in at] for c in corners}
        self.corners = corners
        self.base, self.var, self.vals, self.zero = [], [], [], []
        for j, L in enumerate(base_layers):
            cans = {c: canonical(float_layer(self.pos[c][j])) for c in corners}
            base = cans[corners[0]]
            self.configs.append(L.config())
            var, vals, zero = {}, {}, {}
            for name, a in base.items():
                stackd = np.stack([cans[c][name] for c in corners])
                m = np.any(stackd != stackd[0], axis=0)
                zero[name] = np.all(stackd == 0, axis=0)
                if m.any():
                    var[name] = m
                    vals[name] = stackd[:, m]  # (corners, varying entries)
            self.base.append(base)
            self.var.append(var)
            self.vals.append(vals)
            self.zero.append(zero)
        self.depends = {n: False for n in names}
        for i, n in enumerate(names):
            for c in corners:
                other = tuple(1 - x if k == i else x for k, x in enumerate(c))
                for vals in self.vals:
                    for v in vals.values():
                        if not np.array_equal(v[corners.index(c)], v[corners.index(other)]):
                            self.depends[n] = True

    def weights(self, p) -> np.ndarray:
        """The corners' multilinear interpolation weights at ``p``."""
        w = []
        for c in self.corners:
            x = 1.0
            for i, n in enumerate(self.names):
                a, b = self.nodes[n]
                t = (p[i] - a) / (b - a)
                x *= t if c[i] else 1.0 - t
            w.append(x)
        return np.array(w)

    def at(self, p, slots=None) -> list[dict]:
        """Every slot's canonical arrays at ``p`` (``slots``: only those; the others None)."""
        w = self.weights(p)
        out = []
        for j, (base, var, vals) in enumerate(zip(self.base, self.var, self.vals)):
            if slots is not None and j not in slots:
                out.append(None)
                continue
            d = dict(base)
            for name, m in var.items():
                a = base[name].copy()
                a[m] = w @ vals[name]
                d[name] = a
            out.append(d)
        return out


# ------------------------------------------------------------------ the report

@dataclass
class ArrayFit:
    """One layer's array after alignment against the fitted construction (float64)."""

    layer: int
    array: str
    max_abs: float
    index: tuple[int, ...]
    where: str
    max_rel: float
    spurious: int
    spurious_max: float

    def to_json(self) -> dict:
        return {"layer": self.layer, "array": self.array, "max_abs": self.max_abs, "index": list(self.index),
                "where": self.where, "max_rel": self.max_rel, "spurious": self.spurious,
                "spurious_max": self.spurious_max}


@dataclass
class Nearest:
    """The nearest construction of the family, the distance to it, and its snapped proof."""

    construction: str
    used: dict[str, Fraction]
    fitted: dict[str, float] = field(default_factory=dict)
    stderr: dict[str, float] = field(default_factory=dict)
    tolerance: dict[str, float] = field(default_factory=dict)
    rational: dict[str, Fraction] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    arrays: list[ArrayFit] = field(default_factory=list)
    symmetries: dict[str, str] = field(default_factory=dict)
    snapped_verdict: str = ""
    snapped_reason: str = ""
    snapped_distance: float | None = None
    model_note: str = ""
    iterations: int = 0
    seconds: float = 0.0
    skipped: str = ""

    @property
    def distance(self) -> float:
        return max((a.max_abs for a in self.arrays), default=0.0)

    @property
    def worst(self) -> ArrayFit | None:
        """The array farthest from the construction (None where every compared entry is equal)."""
        w = max(self.arrays, key=lambda a: a.max_abs, default=None)
        return w if w is not None and w.max_abs > 0 else None

    @property
    def spurious(self) -> int:
        return sum(a.spurious for a in self.arrays)

    def params_text(self, exact: bool = True) -> str:
        parts = []
        for n in self.used:
            if n in self.fitted:
                q = self.rational[n]
                parts.append(f"{n} = {q}" if exact else f"{n} = {self.fitted[n]:.6g}")
            else:
                parts.append(f"{n} = {self.used[n]}")
        return ", ".join(parts) or "no parameters"

    def summary(self) -> str:
        """A few words for the verdict line."""
        if self.skipped:
            return f"nearest {self.construction}: not fitted ({self.skipped})"
        return (f"distance {self.distance:.3g} to the nearest {self.construction} ({self.params_text()}) after its "
                f"symmetries are divided out")

    def verdict_text(self, distance_line: str | None = None) -> str:
        """What follows a FAILED file's verdict line: :meth:`summary`, preceded where the fit was skipped by
        ``distance_line`` (the exact weight distance at the parameters used), so the verdict line of a
        FAILED file always gives a distance when one was measured."""
        if self.skipped and distance_line:
            return f"{distance_line}; {self.summary()}"
        return self.summary()

    def lines(self) -> list[str]:
        """The report's lines (printed after the verdict; the verdict stays the file's)."""
        if self.skipped:  # the verdict line says it (summary)
            return []
        out = []
        fit = "; ".join(f"{n} fitted {self.fitted[n]:.9g} (standard error {self.stderr[n]:.2g}), snapped to "
                        f"{self.rational[n]} (the simplest rational within {self.tolerance[n]:.2g}, denominator "
                        f"<= {MAX_DENOMINATOR})" for n in self.fitted)
        kept = "; ".join(f"{n} = {self.used[n]} kept ({why})" for n, why in self.kept.items())
        out.append(f"nearest {self.construction}: " + "; ".join(x for x in (fit, kept) if x)
                   + f" ({self.iterations} least-squares evaluations, {self.seconds:.2f} s)")
        w = self.worst
        if w is None:
            out.append("  weight distance to it after alignment (float64): 0 (every compared entry equal)")
        else:
            out.append(f"  weight distance to it after alignment (float64): max |w - w*| = {w.max_abs:.3g} at layer "
                       f"{w.layer} {w.array}[{','.join(map(str, w.index))}] {w.where} (relative {w.max_rel:.3g}); "
                       f"{sum(1 for a in self.arrays if a.max_abs > 0)} array(s) differ, {self.spurious} spurious "
                       f"entr{'y' if self.spurious == 1 else 'ies'} (nonzero where the construction has a structural zero)")
        out.append("  symmetries divided out: " + "; ".join(f"{k}: {v}" for k, v in self.symmetries.items()))
        if self.model_note:
            out.append(f"  note: {self.model_note}")
        dist = f", distance {self.snapped_distance:.3g}" if self.snapped_distance is not None else ""
        if self.snapped_verdict == "PROVED":
            out.append(f"  the nearest construction ({self.params_text()}{dist}) is PROVED (that construction, "
                       f"by the exact prover; the file's verdict above is unchanged)")
        else:
            out.append(f"  the nearest construction ({self.params_text()}{dist}) is not PROVED: {self.snapped_reason}")
        return out

    def to_json(self) -> dict:
        if self.skipped:
            return {"construction": self.construction, "skipped": self.skipped}
        return {"construction": self.construction, "parameters": dict(self.fitted), "stderr": dict(self.stderr),
                "snap_tolerance": dict(self.tolerance),
                "rational": {n: str(q) for n, q in self.rational.items()}, "snap_errors": SNAP_ERRORS,
                "snap_relative": SNAP_RELATIVE,

                "used": {n: str(q) for n, q in self.used.items()}, "kept": dict(self.kept),
                "max_denominator": MAX_DENOMINATOR,
                "distance": {"max_abs": self.distance, "spurious": self.spurious, "arithmetic": "float64",
                             "arrays": [a.to_json() for a in self.arrays if a.max_abs > 0 or a.spurious]},
                "symmetries": dict(self.symmetries), "snapped_verdict": self.snapped_verdict,
                "snapped_reason": self.snapped_reason, "snapped_distance": self.snapped_distance,
                "model_note": self.model_note, "iterations": self.iterations, "seconds": self.seconds}

    def markdown(self, title: str = "Did the model learn it? The nearest construction") -> str:
        lines = [f"# {title}", ""]
        if self.skipped:
            return "\n".join(lines + [f"Not fitted: {self.skipped}", ""])
        lines += [f"Family: `{self.construction}`.", ""]
        lines += ["| parameter | used | fitted (float64) | standard error | snapped |", "|---|---|---|---|---|"]
        for n in self.used:
            if n in self.fitted:
                lines.append(f"| {n} | {self.used[n]} | {self.fitted[n]:.9g} | {self.stderr[n]:.2g} | "
                             f"{self.rational[n]} |")
            else:
                lines.append(f"| {n} | {self.used[n]} | kept: {self.kept.get(n, '')} | | {self.used[n]} |")
        lines += ["", f"Snapped: the simplest rational (denominator at most {MAX_DENOMINATOR}) within {SNAP_ERRORS} "
                  f"standard errors of the fitted value, or within the change of the parameter that moves none of the "
                  f"entries depending on it by more than their largest residual, whichever is wider, and at most "
                  f"{SNAP_RELATIVE:g} of the fitted value."]
        lines += ["", f"Snapped construction ({self.params_text()}): **{self.snapped_verdict or 'not PROVED'}**"
                  + (f" ({self.snapped_reason})" if self.snapped_reason else "") + ". This is the verdict of that "
                  "construction, not of the file.", ""]
        lines += ["Symmetries divided out: " + "; ".join(f"{k}: {v}" for k, v in self.symmetries.items()) + ".", ""]
        if self.model_note:
            lines += [f"Note: {self.model_note}", ""]
        lines += ["| layer | array | max abs | where | relative | spurious | largest spurious |",
                  "|---|---|---|---|---|---|---|"]
        for a in self.arrays:
            if a.max_abs > 0 or a.spurious:
                lines.append(f"| {a.layer} | {a.array} | {a.max_abs:.3g} | {a.where.replace('|', '/')} | "
                             f"{a.max_rel:.3g} | {a.spurious} | {a.spurious_max:.3g} |")
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ snapping

def standard_errors(J: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The least-squares fit's standard errors: ``sqrt(diag(s^2 (J^T J)^+))`` with ``s^2 = |r|^2 / (m - P)``
    (the residual's entries taken as independent noise of one size: an estimate, stated as such)."""
    m, P = J.shape
    if not m or not P:
        return np.zeros(P)
    s2 = float(r @ r) / max(m - P, 1)
    return np.sqrt(np.maximum(np.diag(s2 * np.linalg.pinv(J.T @ J)), 0.0))


def snap(x: float, tol: float) -> Fraction:
    """The rational of smallest denominator (at most :data:`MAX_DENOMINATOR`; of those, the nearest to
    ``x``) within ``tol`` of ``x``; the nearest rational of denominator at most the bound where none is
    (``Fraction.limit_denominator``; always so at ``tol = 0``, an exact fit)."""
    fx = Fraction(x)
    if tol > 0 and math.isfinite(tol):
        lo, hi = fx - Fraction(tol), fx + Fraction(tol)
        for q in range(1, MAX_DENOMINATOR + 1):
            a, b = math.ceil(lo * q), math.floor(hi * q)
            if a <= b:
                return min((Fraction(k, q) for k in (a, b, round(fx * q)) if a <= k <= b), key=lambda f: abs(f - fx))
    return fx.limit_denominator(MAX_DENOMINATOR)


# ------------------------------------------------------------------ naming entries

def channel_namer(layout, cols: list | None = None) -> Callable[[int], str]:
    """``c -> "x[2]"``: the region of state column ``c`` (``cols`` maps a file channel to the layout's
    column, None where the file's channel is its own)."""
    def name(c: int) -> str:
        cc = c if cols is None else (cols[c] if c < len(cols) else None)
        if cc is None:
            return f"file channel {c}"
        for r in layout.regions.values():
            if r.cols[0] <= cc < r.cols[1]:
                return f"{r.name}[{cc - r.cols[0]}]"
        return f"column {cc}"
    return name


def _where(kind: str, array: str, idx: tuple, chan: Callable[[int], str]) -> str:
    if len(idx) != 2:
        return ""
    i, j = idx
    leaf = array.split(".")[-1]
    square = leaf in ("W_in", "W_gate", "W_out", "W1", "W2", "W3", "W3W1^T", "P", "Q")
    if square:
        return f"({chan(i)} -> {chan(j)})"
    return f"(row {i}, {chan(j)})"


# ------------------------------------------------------------------ the fit

def _nodes(v: Fraction) -> tuple[Fraction, Fraction]:
    return (v, 4 * v) if v != 0 else (Fraction(0), Fraction(1, 16))


def nearest(build: Callable[..., tuple], used: dict[str, Fraction], learned: list, *, name: str,
            prove: Callable | None = None, chan: Callable[[int], str] | None = None,
            built: tuple | None = None) -> Nearest:
    """The nearest construction of ``build``'s family to the ``learned`` layers (module docstring).

    ``build(**params) -> (construction, reference layers)``: the construction (proved when snapped) and
    its layers in the learned stack's coordinates, as many as ``learned`` has; a ValueError means the
    builder refuses the values.  ``used``: every parameter at the value the command used.  ``prove``:
    ``construction -> ProofResult`` (default ``verify.prover.proof.prove``).  ``built``: the build at
    ``used``, when the caller has it."""
    t0 = time.perf_counter()
    res = Nearest(name, dict(used))
    n_entries = entries(learned)
    if n_entries > MAX_ENTRIES:
        res.skipped = (f"the stack holds {n_entries} weight entries, more than the bound {MAX_ENTRIES} "
                       f"(verify/nearest.py MAX_ENTRIES)")
        return res
    names = list(used)
    if len(names) > MAX_FIT_PARAMS:
        res.skipped = (f"{len(names)} parameters, more than the {MAX_FIT_PARAMS} fitted at most "
                       f"(verify/nearest.py MAX_FIT_PARAMS)")
        return res
    cache: dict[tuple, tuple] = {}
    if built is not None:
        cache[tuple(Fraction(used[n]) for n in names)] = built

    def build_at(vals: dict):
        key = tuple(Fraction(vals[n]) for n in names)
        if key not in cache:
            if time.perf_counter() - t0 > BUDGET_S:
                raise _OverBudget(f"the fit had spent more than {BUDGET_S:g} s (verify/nearest.py BUDGET_S) before "
                                  f"building {name} at " + ", ".join(f"{n} = {vals[n]}" for n in names))
            cache[key] = build(**{n: Fraction(vals[n]) for n in names})
        return cache[key]

    try:
        return _fit(res, build_at, used, names, learned, name, prove, chan, t0)
    except _OverBudget as e:
        res.skipped = str(e)
        return res


def _fit(res: Nearest, build_at, used, names, learned, name, prove, chan, t0) -> Nearest:
    nodes = {n: _nodes(Fraction(used[n])) for n in names}

    # which parameters can be moved (a builder refusing the second node keeps the parameter)
    fit = []
    for n in names:
        try:
            build_at({**used, n: nodes[n][1]})
            fit.append(n)
        except ValueError as e:
            res.kept[n] = f"the builder refuses {n} = {nodes[n][1]}: {str(e).splitlines()[0]}"
    stacks = {}
    for c in itertools.product((0, 1), repeat=len(fit)):
        vals = {**used, **{n: nodes[n][c[i]] for i, n in enumerate(fit)}}
        layers = build_at(vals)[1]
        if len(layers) != len(learned):
            raise ValueError(f"the construction has {len(layers)} layers, the file {len(learned)}")
        stacks[c] = layers
    first = next(iter(stacks.values()))
    for i, (L, R) in enumerate(zip(learned, first)):
        la, ra = L.arrays(), R.arrays()
        bad = L.kind != R.kind or set(la) != set(ra) or any(
            tuple(getattr(la[k], "shape", ())) != tuple(getattr(ra[k], "shape", ())) for k in ra)
        if bad:
            res.skipped = (f"stack layer {i}: the file's {L.kind} layer ({len(la)} arrays) and the construction's "
                           f"{R.kind} layer ({len(ra)} arrays) differ in their arrays or shapes: no entry-wise fit")
            return res
    fam = _Family(stacks, fit, {n: (float(nodes[n][0]), float(nodes[n][1])) for n in fit})
    for n in fit:
        if not fam.depends[n]:
            res.kept[n] = "no weight depends on it: it enters the specification only (the input embedding)"
    moving = [n for n in fit if fam.depends[n]]
    idx = [fit.index(n) for n in moving]
    Lf = [float_layer(L) for L in learned]
    p = np.array([float(used[n]) for n in fit])
    refs = fam.at(p)
    orders = [unit_order(Lf[i], refs[s], fam.configs[s]) for i, s in enumerate(fam.slot)]

    # the layers whose construction moves with the parameters: their alignment, and so their whole
    # residual, depends on the parameters (a head's scale moves eta between W3 W1^T and W2)
    active = [i for i, s in enumerate(fam.slot) if fam.var[s]]

    def resid(q):
        pp = p.copy()
        pp[idx] = q
        refs = fam.at(pp, {fam.slot[i] for i in active})
        out = []
        for i in active:
            s = fam.slot[i]
            X = aligned(Lf[i], refs[s], fam.configs[s], orders[i])
            out += [(X[k] - refs[s][k]).ravel() for k in refs[s] if X[k].shape == refs[s][k].shape]
        return np.concatenate(out) if out else np.zeros(1)

    its = 0
    if moving:
        from scipy.optimize import least_squares

        sol = least_squares(resid, p[idx], method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=MAX_EVALS)
        p[idx] = sol.x
        its = int(sol.nfev)
    refs = fam.at(p)
    X = [aligned(Lf[i], refs[s], fam.configs[s], orders[i]) for i, s in enumerate(fam.slot)]
    res.iterations = its
    # the standard errors and the snap tolerance, from the residual's Jacobian at the fit (finite
    # differences through the alignment: a head's scale carries eta lam into W2) on the entries that
    # depend on each parameter strongly (at least half its largest derivative: a structure the file does
    # not share elsewhere says nothing about the parameter)
    if moving:
        r0 = resid(p[idx])
        J = np.empty((len(r0), len(idx)))
        for j in range(len(idx)):
            h = 1e-6 * max(1.0, abs(p[idx][j]))
            q = p[idx].copy()
            q[j] += h
            J[:, j] = (resid(q) - r0) / h
        for j, n in enumerate(moving):
            g = float(np.max(np.abs(J[:, j])))
            rows = np.abs(J[:, j]) >= 0.5 * g if g > 0 else np.zeros(len(r0), dtype=bool)
            res.fitted[n] = float(p[idx][j])
            res.stderr[n] = float(standard_errors(J[rows], r0[rows])[j]) if rows.any() else 0.0
            worst = float(np.max(np.abs(r0[rows]))) if rows.any() else 0.0
            res.tolerance[n] = min(max(SNAP_ERRORS * res.stderr[n], worst / g if g > 0 else 0.0),
                                   SNAP_RELATIVE * abs(res.fitted[n]))
            res.rational[n] = snap(res.fitted[n], res.tolerance[n])
    kinds_seen = dict.fromkeys(L.kind for L in Lf)
    res.symmetries = {k: SYMMETRIES[k] for k in kinds_seen}
    chan = chan or (lambda c: f"channel {c}")
    for i, s in enumerate(fam.slot):
        zero = fam.zero[s]
        for a_name, want in refs[s].items():
            got = X[i][a_name]
            if got.shape != want.shape or not want.size:
                continue
            d = np.abs(got - want)
            flat = int(np.argmax(d))
            ix = tuple(int(t) for t in np.unravel_index(flat, d.shape))
            rel = float(np.max(d / np.maximum(np.abs(want), 1.0)))
            sp = zero[a_name] & (got != 0)
            res.arrays.append(ArrayFit(i, a_name, float(d[ix]), ix, _where(Lf[i].kind, a_name, ix, chan), rel,
                                       int(sp.sum()), float(np.max(np.abs(got[sp]))) if sp.any() else 0.0))
    _snap(res, build_at, used, Lf, fam, orders, prove)
    res.seconds = time.perf_counter() - t0
    return res


def _snap(res: Nearest, build_at, used, Lf, fam: _Family, orders, prove) -> None:
    """Build the construction at the snapped parameters, compare it with the model there, and prove it."""
    from verify.prover.kernel import verdict

    vals = {**used, **res.rational}
    try:
        con, layers = build_at(vals)
    except _OverBudget as e:
        res.snapped_verdict, res.snapped_reason = "not built", str(e)
        return
    except ValueError as e:
        res.snapped_verdict = "not built"
        res.snapped_reason = f"the builder refuses the snapped parameters: {str(e).splitlines()[0]}"
        return
    exact = [canonical(float_layer(layers[fam.slot.index(s)])) for s in range(len(fam.base))]
    q = np.array([float(vals[n]) for n in fam.names])
    model = fam.at(q)
    worst = max((float(np.max(np.abs(exact[s][k] - model[s][k]))) for s in range(len(exact)) for k in exact[s]
                 if exact[s][k].shape == model[s][k].shape and exact[s][k].size), default=0.0)
    if worst > 1e-9:
        res.model_note = (f"the weights at the snapped parameters differ from the multilinear model by {worst:.3g}: "
                          f"the parameters do not enter this family's weights multilinearly; the fit is approximate")
    X = [aligned(Lf[i], exact[s], fam.configs[s], orders[i]) for i, s in enumerate(fam.slot)]
    res.snapped_distance = max((float(np.max(np.abs(X[i][k] - exact[s][k]))) for i, s in enumerate(fam.slot)
                                for k in exact[s] if X[i][k].shape == exact[s][k].shape and exact[s][k].size),
                               default=0.0)
    if prove is None:
        from verify.prover.proof import prove as prove_
        prove = prove_
    from polyverify.plumbing.cli import UsageError, one_line

    try:
        r = prove(con)
    except UsageError as e:  # the command's proof limits (verify/bounded.py)
        res.snapped_verdict, res.snapped_reason = "not proved", one_line(e)
        return
    res.snapped_verdict = verdict(r).value
    if res.snapped_verdict != "PROVED":
        f = getattr(r, "failure", None)
        res.snapped_reason = (f.describe().splitlines()[0] if f is not None else
                              f"the prover's verdict is {res.snapped_verdict}")



# ------------------------------------------------------------------ the commands' use

def gd_nearest(con, n: int, d: int, k: int, eta, lam, layers, *, prove: Callable | None = None) -> Nearest:
    """The nearest construction of ``gd --arch``'s family (``con``'s builder: ``build(n, d, eta=...[,
    lam=...])``) to a weight file's ``layers`` (the construction's own layout, as ``gd --weights``
    reads them), ``eta`` and ``lam`` at the values the command used."""
    from constructions.catalogue import gd_architectures

    entry = next(e for e in gd_architectures().values() if e.name == con.name)
    used = {"eta": Fraction(eta), **({"lam": Fraction(lam or 0)} if entry.ridge else {})}

    def build(**p):
        c = entry.build(n, d, **p)
        return c, c.layers(k)

    return nearest(build, used, layers, name=con.name, prove=prove, chan=channel_namer(con.layout),
                   built=(con, con.layers(k)))


def guarded(fn: Callable[[], Nearest], name: str) -> Nearest:
    """``fn()``, or a skipped :class:`Nearest` naming why it could not be fitted (a limit of the snapped
    proof, a builder that refuses the sizes): the diagnosis never stops the command."""
    from polyverify.plumbing.cli import UsageError, one_line

    try:
        return fn()
    except (UsageError, ValueError, np.linalg.LinAlgError) as e:
        why = one_line(e)
    except Exception as e:  # noqa: BLE001 - a diagnosis that breaks is one line, never the command's end
        why = f"the fit broke ({type(e).__name__}: {one_line(e)})"
    out = Nearest(name, {})
    out.skipped = why
    return out


def print_failed(proof, near: Nearest | None, out, distance_line: str | None = None,
                 summary: str | None = None) -> None:
    """The proof's lines as ``print_proof`` prints them, the verdict line (the first) followed by the
    distance (``near``'s summary, or ``summary``; the verdict itself is the file's, unchanged); then the
    distance at the parameters used (``distance_line``) and the nearest construction's lines."""
    import io

    from verify.cli_common import print_proof

    buf = io.StringIO()
    print_proof(proof, buf)
    first, _, rest = buf.getvalue().partition("\n")
    if near is not None or summary:
        first += f"; {near.verdict_text(distance_line) if near is not None else summary}"
    print(first, file=out)
    out.write(rest)
    if distance_line:
        print("  " + distance_line, file=out)
    if near is not None:
        for line in near.lines():
            print("  " + line, file=out)


def print_nearest(verdict_line: str, near: Nearest, out, distance_line: str | None = None) -> None:
    """After a FAILED verdict line printed first (:func:`print_failed` with the distance at the parameters
    used as its ``summary``): the nearest construction's lines, then ``verdict: VERDICT_LINE; SUMMARY``,
    the file's verdict (unchanged) with the distance to the nearest construction (``near.verdict_text``),
    as the JSON report's ``verdict_line`` gives it."""
    for line in near.lines():
        print("  " + line, file=out)
    print(f"verdict: {verdict_line}; {near.verdict_text(distance_line)}", file=out)


def project_layers(layers, rows: list[int], cols: list, n_spec_rows: int) -> list:
    """A specification's layers on a file's state (``verify/importers/mapping.py``'s ``rows``: file token
    -> specification row, ``cols``: file channel -> specification column or None): each weight restricted
    to the mapped channels (a file-only channel's weights 0), bias matrices also to the mapped rows.  A
    BaseConv's filter mixes tokens, so its file tokens must be the specification's first ones, in order
    (the filter is cut to them); otherwise a ValueError says so.  A repeated layer stays one object."""
    cidx = [c if c is not None else -1 for c in cols]

    def take_cols(a, both: bool):
        a = dense(a) if is_sparse(a) else np.asarray(a, dtype=object)
        out = np.zeros((len(cidx) if both else a.shape[0], len(cidx)), dtype=object)
        for j, c in enumerate(cidx):
            if c < 0:
                continue
            if both:
                for i, r in enumerate(cidx):
                    if r >= 0:
                        out[i, j] = a[r, c]
            else:
                out[:, j] = a[:, c]
        return out

    def proj(L):
        arr = {}
        for name, a in L.arrays().items():
            leaf = name.split(".")[-1]
            if leaf in ("W_in", "W_gate", "W_out", "W1", "W2", "W3", "P", "Q"):
                arr[name] = take_cols(a, True)
            else:  # (rows, channels): BaseConv's filter and biases, ELSA's bias matrices
                arr[name] = take_cols(a, False)[list(rows)]
        return layer_from_arrays(L.kind, L.config(), arr)

    if any(L.kind == "baseconv" for L in layers) and list(rows) != list(range(len(rows))):
        raise ValueError("the file's tokens are not the specification's first tokens in order: a filter cannot "
                         "be compared tap by tap")
    cache: dict = {}
    return [cache.setdefault(id(L), proj(L)) if id(L) not in cache else cache[id(L)] for L in layers]


def import_family(st, values: dict) -> tuple[Callable, dict]:
    """``(build, used)`` for :func:`nearest` from the import command's settings (``verify/importers/cli.py``):
    the entry's builder at the file's sizes, its layers projected onto the file's state; the parameters
    ``--set`` may give (a ``sqrt_x`` left out where ``x`` is one), at the values the proof used."""
    from polyverify.plumbing.cli import UsageError

    from verify.importers.specs import accepted, build_spec

    entry, spec, con, k = st["entry"], st["spec"], st["con"], st["k"]
    acc = accepted(entry, spec)
    acc = [x for x in acc if not (x.startswith("sqrt_") and x[5:] in acc)]
    known = {}
    for n, v in [*spec.params.items(), *values.items()]:
        if not isinstance(v, bool):
            try:
                known[n] = Fraction(v)
            except (TypeError, ValueError):  # not a number (a matrix, a symbol): not fitted
                pass
    used = {}
    for x in acc:
        if x in known:
            used[x] = known[x]
        elif f"sqrt_{x}" in known:
            used[x] = known[f"sqrt_{x}"] ** 2
    base = {n: v for n, v in st.get("fixed", st.get("given", {})).items() if n not in used}
    R = spec.layout.shape[0]

    def build(**p):
        try:
            s = build_spec(entry, st["sizes"], {**base, **p})
        except UsageError as e:
            raise ValueError(str(e)) from None
        layers = [*(s.prologue if con.has["prologue"] else []), *(list(s.body) * k),
                  *(s.epilogue if con.has["epilogue"] else [])]  # the sections the file holds
        return s, _with_constants(layers, con, R) or project_layers(layers, con.rows, con.cols, R)

    return build, used


def _with_constants(layers, con, R):
    """Where the layout has constant channels after the specification's (an export's per-token biases as
    weights, ``verify.importers.writing.constant_channels``): the specification's layers projected onto the
    other channels and written the way the export writes them, with the layout's classes of tokens (one
    indicator channel each, :func:`verify.importers.writing.indicator_classes`), if that gives the layout's
    constant channels; else None (the projection alone)."""
    constants = getattr(con, "constants", None)
    if not constants:
        return None
    from verify.importers.writing import ExportError, constant_channels, indicator_classes

    keep = [j for j in range(len(con.cols)) if j not in constants]
    if keep != list(range(len(keep))):
        return None
    try:  # the file's own token classes (finer than the specification's where a trained file's biases drifted)
        wide, got, _ = constant_channels(project_layers(layers, con.rows, [con.cols[j] for j in keep], R), "", "",
                                         classes=indicator_classes(constants))
    except (ExportError, ValueError):
        return None
    return wide if got == constants else None


def import_nearest(st, values: dict, layers) -> Nearest:
    """The nearest construction of an import's specification family to the file's ``layers``."""
    build, used = import_family(st, values)
    return nearest(build, used, layers, name=st["spec"].name,
                   chan=channel_namer(st["spec"].layout, st["con"].cols))


def import_used_line(st, values: dict, layers) -> str | None:
    """The exact weight distance of an import's ``layers`` from its specification at the parameters the
    proof used (:func:`verify.weight_distance.weight_distance`, the ``gd --weights`` line), for the verdict
    line of a FAILED file whose nearest construction was not fitted; None where the specification cannot be
    built at those values (the verdict line then says why the fit was skipped)."""
    from .weight_distance import weight_distance

    build, used = import_family(st, values)
    try:
        reference = build(**used)[1]
    except ValueError:
        return None
    return weight_distance(reference, layers).line_at(st["spec"].name, used)


def guarded_line(fn: Callable[[], str | None]) -> str | None:
    """``fn()``, or None where it breaks: a distance line is diagnosis and never stops the command."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 - diagnosis after the verdict: a missing line, never the command's end
        return None


def distance_markdown(file: str, verdict_line: str, used_line: str | None, near: Nearest | None) -> str:
    """``--distance-report``: the file's verdict (as the command printed it), the distance at the
    parameters used, and the nearest construction (:meth:`Nearest.markdown`)."""
    lines = [f"# How far is `{file}` from the construction?", "", f"The file's verdict: **{verdict_line}** "
             "(about the file as stored; the nearest construction below is proved separately).", ""]
    if used_line:
        lines += [f"Entry-wise, exact: {used_line}.", ""]
    text = "\n".join(lines)
    if near is not None:
        text += "\n#" + near.markdown("The nearest construction of the family")
    return text if text.endswith("\n") else text + "\n"
