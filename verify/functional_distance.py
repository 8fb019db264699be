"""How far apart two stacks' *functions* are: a learned weight file against its construction (issue 41).

The weight distance (``verify/weight_distance.py``) says how far the entries are; this module says how
far the outputs are, two ways, each labelled for what it is:

* **sampled**: the largest and the root-mean-square difference of the outputs on a stated number of
  inputs drawn from the specification's input distribution with a stated seed (the problems the
  command samples: seed 000 Sec. 3.2 least squares, ``numerics/problems.py``), run in float64 through
  each layer's own ``forward`` (``constructions/layers.py``, as ``Construction.run`` runs them).  A
  measurement on those inputs, in floating point, and nothing more.
* **certified**: each output entry of a layer stack without MLPs and LayerNorms is a polynomial in the
  inputs.  Both stacks are run exactly over python-flint's ``fmpq_mpoly`` (the learned floats read as
  the binary fractions they are), and the difference ``p = f_learned - f_construction`` is formed.  For
  every input in the box ``|x_i| <= r_i``::

      |p(x)| <= sum_m |c_m| prod_i |x_i|^{e_i(m)} <= sum_m |c_m| prod_i r_i^{e_i(m)}

  (the triangle inequality, term by term), which is the l1 coefficient mass of ``p(r_1 x_1, ...,
  r_n x_n)``: the inputs are scaled by their radii before the forward, so the bound is one exact
  rational, computed with no rounding.  With the default box ``|entries| <= 1`` it is the l1 mass of
  ``p``.  Bounded work: at most :data:`MAX_VARIABLES` input variables, at most :data:`MAX_TERMS`
  terms in any state entry and :data:`MAX_STATE_TERMS` in a whole state, *counted before expanding*
  (each layer's own ``forward`` run first on upper bounds of the terms, :func:`_term_counter`; the
  layer is expanded only where they are within the limits), in a child under :data:`CERTIFIED_TIMEOUT_S` seconds and
  :data:`CERTIFIED_MEMORY_GIB` GiB; past a limit the certified bound is skipped with one line that
  names the limit.

The outputs are the construction's read-out ``prediction`` where it has one (the GD constructions'
``q^T x``), else every entry of the final state.  Diagnosis only: this module reads layers and states
and never decides a verdict (no call of the kernel's ``conclude``: it prints after the verdict, beside it).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from polyverify.plumbing.cli import UsageError
from polyverify.plumbing.rational import RationalError, parse_rational

#: inputs of the sampled distance where the command has no sample of its own (``import``)
DEFAULT_SAMPLES = 256
DEFAULT_SEED = 0
#: the certified bound's limits (module docstring)
MAX_VARIABLES = 2048
MAX_TERMS = 250_000
MAX_STATE_TERMS = 4_000_000
CERTIFIED_TIMEOUT_S = 120.0
CERTIFIED_MEMORY_GIB = 4.0
#: the largest radius --box takes: the sampled inputs are float64, so a radius past float64's range
#: (``--box 1e400``) names no box of float inputs
MAX_RADIUS = Fraction(2) ** 1000


# ------------------------------------------------------------------ the box

@dataclass(frozen=True)
class Box:
    """The input box of the certified bound: ``radius`` for every input, ``radii`` per variable."""

    radius: Fraction = Fraction(1)
    radii: dict = field(default_factory=dict)

    def of(self, name: str) -> Fraction:
        return self.radii.get(name, self.radius)

    def text(self) -> str:
        """``|entries| <= 1``, or ``|entries| <= 1, |A| <= 2`` with per-variable radii."""
        return ", ".join([f"|entries| <= {self.radius}"] + [f"|{k}| <= {v}" for k, v in self.radii.items()])

    def check_names(self, variables, flag: str = "--box") -> None:
        """Every named radius is a variable of the construction (a UsageError names the first that
        is not)."""
        for name in self.radii:
            if name not in variables:
                raise UsageError(f"{flag} {name}=...: the construction has no input {name!r} (inputs: "
                                 f"{', '.join(variables)})")

    def to_json(self) -> dict:
        return {"radius": str(self.radius), "radii": {k: str(v) for k, v in self.radii.items()}}


def _radius(text: str, what: str) -> Fraction:
    try:
        r = parse_rational(text.strip(), what)
    except RationalError as e:
        raise UsageError(f"{e}; the box radius is a positive rational such as 1, 1/2 or 0.25") from None
    if r <= 0:
        raise UsageError(f"{what}: the box radius must be > 0, got {r}")
    if r > MAX_RADIUS or r < 1 / MAX_RADIUS:
        raise UsageError(f"{what} {text.strip()}: outside float64's range (the sampled inputs are float64); "
                         f"give a radius between 2^-1000 and 2^1000")
    return r


def parse_box(text: str | None, flag: str = "--box") -> Box:
    """``--box R`` (one radius for every input) or ``--box R,A=R2,b=R3`` (per-variable radii; a
    variable not named gets R, default 1): every radius a positive finite rational, or a
    UsageError (one line) before any work.  The names are checked against the construction by
    :meth:`Box.check_names` once it is built."""
    if text is None:
        return Box()
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(parts):
        raise UsageError(f"{flag} {text!r}: an empty item; give R or R,NAME=R,...")
    radius, radii = None, {}
    for p in parts:
        if "=" in p:
            name, _, val = p.partition("=")
            name = name.strip()
            if not name.isidentifier():
                raise UsageError(f"{flag} {p!r}: {name!r} is not an input's name")
            if name in radii:
                raise UsageError(f"{flag}: the input {name} is given twice")
            radii[name] = _radius(val, f"{flag} {name}=")
        else:
            if radius is not None:
                raise UsageError(f"{flag} {text!r}: two radii for every input; give one (and NAME=R for the others)")
            radius = _radius(p, flag)
    return Box(radius if radius is not None else Fraction(1), radii)


# ------------------------------------------------------------------ the two stacks

@dataclass
class Stack:
    """A layer stack as a function: ``start(v)`` the input state, ``layers`` run in order by each
    layer's own ``forward``, ``output(S)`` the outputs read from the final state."""

    layers: list
    start: Callable
    output: Callable


def _outputs_of(S_out) -> list:
    """The outputs as a flat list of scalars (one problem) - a polynomial stays one scalar."""
    import numpy as np

    if isinstance(S_out, np.ndarray):
        return list(S_out.reshape(-1))
    return [S_out]


def _prediction(con) -> tuple[Callable, str]:
    """The read-out of ``con``'s final state that the distance compares, and its name."""
    import numpy as np

    probe = np.zeros((1,) + tuple(con.layout.shape))
    try:
        if "prediction" in con.readout(probe):
            return (lambda S: con.readout(S)["prediction"]), "the prediction"
    except Exception:  # noqa: BLE001 - a read-out that does not take a state: the whole state
        pass
    return (lambda S: S), "every entry of the final state"


def gd_stacks(con, k: int, layers) -> tuple[Stack, Stack, str]:
    """``gd --weights``: the construction's ``con.layers(k)`` and the file's ``layers``, both from
    ``con.input_state``, both read out by ``con.readout``: (construction, learned, what is compared)."""
    out, what = _prediction(con)
    return Stack(list(con.layers(k)), con.input_state, out), Stack(list(layers), con.input_state, out), what


def projected_stacks(con, k: int, layers) -> tuple[Stack, Stack, str]:
    """``import``: ``con`` is the specification projected onto the file's state
    (``verify/importers/mapping.py``).  The construction's stack is the specification's own layers
    (the sections the file has) on the specification's state, its final state projected onto the
    file's; the learned stack is the file's layers from the projected input state.  Compared: the
    specification's prediction where the file's state holds every entry it reads, else every entry
    of the file's final state."""
    import numpy as np

    spec, has = con.spec, con.has
    ref_layers = ((list(spec.prologue) if has["prologue"] else []) + list(spec.body) * k
                  + (list(spec.epilogue) if has["epilogue"] else []))
    ref_start = spec.input_state if has["prologue"] else spec.state
    R, C = spec.layout.shape
    mapped = [(i, j, r, c) for i, r in enumerate(con.rows) for j, c in enumerate(con.cols) if c is not None]

    def unproject(S):
        S = np.asarray(S)
        out = (np.full(S.shape[:-2] + (R, C), 0, dtype=object) if S.dtype == object
               else np.zeros(S.shape[:-2] + (R, C), dtype=S.dtype))
        for i, j, r, c in mapped:
            out[..., r, c] = S[..., i, j]
        return out

    pred, what = _prediction(spec)
    probe = np.full((1, R, C), np.nan)
    for _, _, r, c in mapped:
        probe[0, r, c] = 0.0
    if what == "the prediction":
        try:
            ok = bool(np.all(np.isfinite(np.asarray(pred(probe), dtype=float))))
        except (TypeError, ValueError):
            ok = False
        if ok:
            return (Stack(ref_layers, ref_start, pred), Stack(list(layers), con.input_state, lambda S: pred(unproject(S))),
                    what)
    return (Stack(ref_layers, ref_start, con.project), Stack(list(layers), con.input_state, lambda S: S),
            "every entry of the file's final state")


# ------------------------------------------------------------------ sampled (float64)

def command_problems(n: int, d: int, batch: int, seed: int, kappa: float) -> dict:
    """The problems ``gd`` runs (``verify/gd_cmd.py``: ``sample_ls`` with its seed, the query from
    ``default_rng(seed + 1)``), in float64, before any rounding to a run's dtype."""
    import numpy as np

    from numerics.problems import sample_ls

    P = sample_ls(batch, n, d, kappa=kappa, seed=seed)
    q = np.random.default_rng(seed + 1).standard_normal((batch, d))
    return {"A": P.A, "b": P.b, "x": P.x0, "q": q}


def specification_problems(spec, batch: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> tuple[dict, str]:
    """Inputs for a specification the command has no sample of: least-squares problems
    (``verify.comparison.models.sample``, seed 000 Sec. 3.2) where its variables are a least-squares
    problem or seed 004 tokens, else standard normal entries; (v, description)."""
    import numpy as np

    from verify.comparison.models import CompareError, sample

    try:
        P = sample(spec, batch, seed=seed)
        return P.variables(spec), f"least-squares problems of seed 000 Sec. 3.2 (kappa 5), seed {seed}"
    except CompareError:
        rng = np.random.Generator(np.random.PCG64(seed))
        return ({nm: rng.standard_normal((batch,) + tuple(shape)) for nm, shape in spec.variables.items()},
                f"standard normal entries, seed {seed}")


def _float_cast(L):
    import numpy as np

    from constructions.base import to_float_array

    return L.map(lambda a: to_float_array(a, np.float64)).prepare()


#: the sampled run's working memory: the inputs go through each layer in chunks whose states take at most this
#: many bytes (a 512x128 gd-baseconv state is 2.6 MB an input, so 256 inputs at once are 675 MB a state and
#: several such intermediates in a layer's forward); the whole batch's state between layers is kept once
SAMPLED_CHUNK_BYTES = 64 * 2 ** 20


def _start_states(stack: Stack, v: dict, batch: int):
    """The batched float64 input state of ``stack`` on ``v``."""
    import numpy as np

    try:
        return np.asarray(stack.start(v), dtype=np.float64)
    except ValueError:  # a specification whose states take one problem at a time (seed 004's)
        return np.stack([np.asarray(stack.start({nm: x[i] for nm, x in v.items()}), dtype=np.float64)
                         for i in range(batch)])


def run_float(stack: Stack, v: dict, chunk_bytes: int = SAMPLED_CHUNK_BYTES):
    """``stack`` on the batched float64 inputs ``v``: each distinct layer cast once (as
    ``Construction.run``'s ``cast``), every layer's own ``forward``; the outputs, (batch, m).  Layer by layer,
    the batch in chunks of states of at most ``chunk_bytes`` (:data:`SAMPLED_CHUNK_BYTES`; each input's values
    are its own: a chunk is the same forward on fewer inputs), so the intermediates of a forward are a chunk's,
    not the whole batch's; a cast layer is dropped after its last use (a dense filter's plans are large)."""
    import numpy as np

    cache: dict[int, object] = {}
    with np.errstate(all="ignore"):
        batch = len(next(iter(v.values())))
        S = _start_states(stack, v, batch)
        per = max(1, int(np.prod(S.shape[1:])) * S.itemsize)
        step = max(1, min(batch, chunk_bytes // per))
        last = {id(L): i for i, L in enumerate(stack.layers)}
        for i, L in enumerate(stack.layers):
            if id(L) not in cache:
                cache[id(L)] = _float_cast(L)
            F = cache[id(L)]
            if step >= batch:
                S = F.forward(S)
            else:
                parts = [F.forward(S[j:j + step]) for j in range(0, batch, step)]
                S = parts[0] if len(parts) == 1 else np.concatenate(parts)
                del parts
            if last[id(L)] == i:  # its float plans dropped after its last use
                del cache[id(L)]
            del F
        out = np.asarray(stack.output(S), dtype=np.float64)
    return out.reshape(out.shape[0], -1)


def sampled_distance(reference: Stack, learned: Stack, v: dict) -> dict:
    """The sampled functional distance on ``v`` (float64): every key says "sampled"."""
    import numpy as np

    a, b = run_float(reference, v), run_float(learned, v)
    diff = b - a
    finite = np.isfinite(diff)
    d = np.abs(diff[finite])
    n_inputs = int(a.shape[0])
    inputs_max = max((float(np.max(np.abs(x))) for x in v.values() if np.size(x)), default=0.0)
    return {"sampled_inputs": n_inputs, "sampled_outputs_per_input": int(a.shape[1]),
            "sampled_max_abs": float(d.max()) if d.size else float("nan"),
            "sampled_rms": float(np.sqrt(np.mean(d * d))) if d.size else float("nan"),
            "sampled_nonfinite": int(diff.size - int(finite.sum())),
            "sampled_largest_input_entry": inputs_max, "sampled_dtype": "float64"}


# ------------------------------------------------------------------ exact

def _exact_scalar(x):
    import numpy as np

    from verify.prover.rings import exact_float

    q = exact_float(x)
    if q is not None:
        return q
    return Fraction(x) if isinstance(x, (int, np.integer)) else x


def exact_layers(layers) -> list:
    """The layers with every float entry read as the binary fraction it is (Fractions)."""
    import numpy as np

    conv = np.vectorize(_exact_scalar, otypes=[object])
    cache: dict[int, object] = {}
    out = []
    for L in layers:
        if id(L) not in cache:
            cache[id(L)] = L.map(lambda a: conv(np.asarray(a, dtype=object)) if np.size(a) else a)
        out.append(cache[id(L)])
    return out


def run_exact(stack: Stack, v: dict) -> list:
    """``stack`` at one exact input ``v`` (object arrays of Fractions): the outputs, exactly."""
    from constructions.base import run_layers

    return _outputs_of(stack.output(run_layers(exact_layers(stack.layers), stack.start(v))))


class _FlintInputs:
    """The variables as generators of QQ[x] (python-flint), each scaled by its box radius."""

    def __init__(self, variables: dict, box: Box):
        import flint

        from verify.prover.rings import SymbolicProblem

        self.sp = SymbolicProblem(variables)
        self.names = list(self.sp.names)
        self.ctx = flint.fmpq_mpoly_ctx.get(tuple(self.names), "degrevlex")
        self.v = dict(self.sp.v)
        radii = []
        for var in variables:
            radii += [box.of(var)] * len(self.sp.slots[var])
        self.scaled = None
        if any(r != 1 for r in radii):
            gens = self.ctx.gens()
            self.scaled = [g * flint.fmpq(r.numerator, r.denominator) for g, r in zip(gens, radii)]

    def poly(self, x):
        from constructions.running_sums import RunningSum
        from verify.prover.flint_backend import fq

        n = len(self.names)
        if isinstance(x, RunningSum):
            x = x.value()
        if hasattr(x, "terms") and hasattr(x, "ring"):  # a sympy ring element
            p = self.ctx.from_dict({tuple(int(e) for e in m): fq(c) for m, c in x.terms()})
        elif hasattr(x, "terms"):
            p = x
        else:
            p = self.ctx.from_dict({(0,) * n: fq(x)}) if x != 0 else self.ctx.from_dict({})
        return p

    def array(self, S):
        import numpy as np

        out = np.empty(np.shape(S), dtype=object)
        for idx in np.ndindex(out.shape):
            p = self.poly(S[idx])
            out[idx] = p.compose(*self.scaled) if self.scaled is not None and not p.is_constant() else p
        return out


def _terms(x) -> int:
    """The terms of an exact entry; of a running sum (a causal prefix-sum chain,
    ``constructions/running_sums.py``), its terms' terms (an upper bound, the value not formed)."""
    from constructions.running_sums import RunningSum

    if isinstance(x, RunningSum):
        return sum(_terms(t) for t in x.terms())
    return len(x) if hasattr(x, "terms") else (0 if x == 0 else 1)


def _degree(x) -> int:
    from constructions.running_sums import RunningSum

    if isinstance(x, RunningSum):
        return max((_degree(t) for t in x.terms()), default=0)
    return int(x.total_degree()) if hasattr(x, "total_degree") else 0


def _term_counter(nvars: int):
    """The pre-count's scalar: an upper bound ``n`` of a polynomial's number of terms and its degree
    ``deg`` (a sum: at most the sum of the terms; a product: at most their product; never more than
    the monomials of degree <= deg in ``nvars`` variables).  A layer's own ``forward`` run on these
    (structural zeros stay the int 0, as in every exact forward) bounds every entry of its output
    before the polynomials are expanded."""
    cache: dict[int, int] = {}

    def cap(n: int, deg: int) -> int:
        if deg not in cache:
            cache[deg] = math.comb(nvars + deg, deg)
        return min(n, cache[deg])

    class Terms:
        __slots__ = ("n", "deg")

        def __init__(self, n: int, deg: int):
            self.n, self.deg = n, deg

        def __add__(self, o):
            if isinstance(o, Terms):
                d = max(self.deg, o.deg)
                return Terms(cap(self.n + o.n, d), d)
            return self if o == 0 else Terms(cap(self.n + 1, self.deg), self.deg)

        __radd__ = __add__

        def __sub__(self, o):
            return self.__add__(o)

        __rsub__ = __sub__

        def __neg__(self):
            return self

        def __mul__(self, o):
            if isinstance(o, Terms):
                d = self.deg + o.deg
                return Terms(cap(self.n * o.n, d), d)
            return 0 if o == 0 else self

        __rmul__ = __mul__

        def __eq__(self, o):
            return self is o  # never equal to 0 or 1: a bound stands for a nonzero polynomial

        def __hash__(self):
            return id(self)

    return Terms


def _counted(Terms, S):
    """A state of polynomials as its pre-count (exact entries: their terms and degree)."""
    import numpy as np

    out = np.empty(np.shape(S), dtype=object)
    for idx in np.ndindex(out.shape):
        x = S[idx]
        n = _terms(x)
        out[idx] = 0 if n == 0 else Terms(n, _degree(x))
    return out


def _count_layer(L, Terms):
    import numpy as np

    one = Terms(1, 0)
    f = np.vectorize(lambda x: 0 if x == 0 else one, otypes=[object])
    return L.map(lambda a: f(np.asarray(a, dtype=object)) if np.size(a) else a)


def _certified_items(reference: Stack, learned: Stack, variables: dict, box: Box, max_terms: int,
                     max_state_terms: int):
    """The child's work (``run_limited``): both stacks over QQ[x], the difference of each output's
    polynomials, its l1 mass; one item (plain data)."""
    import flint

    from verify.comparison.poly import flint_layers

    t0 = time.perf_counter()
    fp = _FlintInputs(variables, box)
    Terms = _term_counter(len(fp.names))
    outs = {}
    # the learned side first: its dense weights reach a limit sooner (a trained 20x5 gd-baseconv after layer
    # 1), and the construction's layers are then not expanded for nothing
    for side, stack in (("learned", learned), ("construction", reference)):
        S = fp.array(stack.start(fp.v))
        cache: dict[int, object] = {}
        counters: dict[int, object] = {}
        for i, L in enumerate(stack.layers):
            if id(L) not in cache:
                cache[id(L)] = flint_layers([L])[0]
                counters[id(L)] = _count_layer(L, Terms)
            # counted before expanding: an upper bound of every entry's terms after this layer
            bound = [x.n if isinstance(x, Terms) else 0 for x in counters[id(L)].forward(_counted(Terms, S)).flat]
            if max(bound, default=0) > max_terms or sum(bound) > max_state_terms:
                raise OverflowError(f"the {side} stack's state after layer {i} could have {sum(bound)} terms, "
                                    f"{max(bound)} in one entry (an upper bound counted before expanding; limits "
                                    f"{max_terms} terms in an entry, {max_state_terms} in a state)")
            S = cache[id(L)].forward(S)
            counts = [_terms(x) for x in S.flat]
            if max(counts, default=0) > max_terms:
                raise OverflowError(f"the {side} stack's state after layer {i} has an entry of {max(counts)} terms "
                                    f"(> {max_terms})")
            if sum(counts) > max_state_terms:
                raise OverflowError(f"the {side} stack's state after layer {i} has {sum(counts)} terms "
                                    f"(> {max_state_terms})")
        outs[side] = [fp.poly(x) for x in _outputs_of(stack.output(S))]
    best, best_j, terms, degree = Fraction(0), 0, 0, 0
    for j, (pc, pl) in enumerate(zip(outs["construction"], outs["learned"])):
        p = pl - pc
        total = flint.fmpq(0)
        for c in p.coeffs():
            total += abs(c)
        mass = Fraction(int(total.p), int(total.q))
        terms = max(terms, len(p))
        degree = max(degree, p.total_degree() if len(p) else 0)
        if mass > best or j == 0:
            best, best_j = mass, j
    yield {"bound": str(best), "output": best_j, "outputs": len(outs["construction"]), "terms": terms,
           "degree": int(degree), "seconds": time.perf_counter() - t0}


def certified_bound(reference: Stack, learned: Stack, variables: dict, box: Box = Box(), *,
                    max_variables: int = MAX_VARIABLES, max_terms: int = MAX_TERMS,
                    max_state_terms: int = MAX_STATE_TERMS, timeout: float = CERTIFIED_TIMEOUT_S,
                    memory_gb: float | None = CERTIFIED_MEMORY_GIB, child: bool = True) -> dict:
    """The certified bound (module docstring): ``{"certified_bound": Fraction, ...}``, or
    ``{"certified_skipped": reason}`` where a limit stopped it.  ``child=False`` runs it here
    (tests), with the same term limits but no time or memory limit."""
    import numpy as np

    nvars = sum(int(np.prod(s)) if len(s) else 1 for s in variables.values())
    base = {"certified_box": box.to_json(), "certified_box_text": box.text(),
            "certified_limits": {"max_variables": max_variables, "max_terms": max_terms,
                                 "max_state_terms": max_state_terms, "timeout_s": timeout, "memory_gib": memory_gb}}
    if nvars > max_variables:
        return {**base, "certified_skipped": f"{nvars} input variables (> {max_variables}, the limit of the exact "
                                             f"polynomial view)"}

    def gen():
        return _certified_items(reference, learned, variables, box, max_terms, max_state_terms)

    if child:
        from polyverify.plumbing.child import run_limited

        from verify.bounded import within_soft_limit

        # (within this process's own soft limit: an import's diagnosis child is held to the verdict's memory)
        items, status = run_limited(gen, timeout=timeout, memory_gb=within_soft_limit(memory_gb))
    else:
        try:
            items, status = list(gen()), "done"
        except OverflowError as e:
            items, status = [], str(e)
    if status != "done" or not items:
        return {**base, "certified_skipped": status if status != "done" else "no result"}
    it = items[0]
    return {**base, "certified_bound": Fraction(it["bound"]), "certified_output": it["output"],
            "certified_outputs": it["outputs"], "certified_difference_terms": it["terms"],
            "certified_difference_degree": it["degree"], "certified_seconds": it["seconds"]}


# ------------------------------------------------------------------ both, and the report

@dataclass
class FunctionalDistance:
    """The sampled distance, the certified bound (or why it was skipped), and what was compared."""

    compared: str
    sample: str  # the inputs' description (count, distribution, seed)
    sampled: dict
    certified: dict
    seconds: float = 0.0

    def line(self) -> str:
        s = self.sampled
        if "sampled_skipped" in s:
            head = (f"functional distance of {self.compared} (sampled, {s['sampled_inputs']} inputs: {self.sample}): "
                    f"not computed: {s['sampled_skipped']}")
        else:
            head = (f"functional distance of {self.compared} (sampled, {s['sampled_inputs']} inputs: {self.sample}; "
                    f"float64; largest |input entry| {s['sampled_largest_input_entry']:.3g}): sampled max "
                    f"|f_learned - f_construction| {s['sampled_max_abs']:.3e}, sampled rms {s['sampled_rms']:.3e}"
                    + (f", {s['sampled_nonfinite']} non-finite" if s["sampled_nonfinite"] else ""))
        c = self.certified
        if "certified_bound" in c:
            every = f"each of the {c['certified_outputs']} outputs and " if c["certified_outputs"] > 1 else ""
            tail = (f"certified: |f_learned - f_construction| <= {_show(c['certified_bound'])} for {every}every input "
                    f"with {c['certified_box_text']} (exact l1 coefficient mass of the difference, at most "
                    f"{c['certified_difference_terms']} terms)")
        else:
            tail = f"certified bound skipped: {c['certified_skipped']}"
        return f"{head}; {tail}"

    def to_json(self) -> dict:
        c = dict(self.certified)
        if "certified_bound" in c:
            b = c.pop("certified_bound")
            try:
                c["certified_bound"] = float(b)
            except OverflowError:  # past float64's range: the exact value below says it
                c["certified_bound"] = math.inf
            c["certified_bound_exact"] = _exact_text(b)
        return {"compared": self.compared, "sampled_inputs_description": self.sample, **self.sampled, **c,
                "seconds": self.seconds}


def _show(q: Fraction) -> str:
    try:
        return "0" if q == 0 else f"{float(q):.3e}"
    except OverflowError:
        return f"a number of {len(str(q.numerator // q.denominator))} digits"


def _exact_text(q: Fraction, limit: int = 200) -> str:
    t = str(q)
    return t if len(t) <= limit else f"{float(q):.17g} (a fraction of {len(t)} characters)"


def functional_distance(reference: Stack, learned: Stack, variables: dict, v: dict, sample: str, compared: str,
                        box: Box = Box(), **limits) -> FunctionalDistance:
    """Both measures of how far ``learned``'s function is from ``reference``'s (module docstring)."""
    t0 = time.perf_counter()
    try:
        sampled = sampled_distance(reference, learned, v)
    except (ValueError, TypeError, ArithmeticError) as e:  # a diagnosis after the verdict: said, not raised
        from polyverify.plumbing.cli import one_line

        sampled = {"sampled_inputs": len(next(iter(v.values()))), "sampled_skipped": one_line(e)}
    certified = certified_bound(reference, learned, variables, box, **limits)
    return FunctionalDistance(compared, sample, sampled, certified, time.perf_counter() - t0)


def for_gd(con, k: int, layers, *, batch: int, seed: int, kappa: float, box: Box = Box(),
           **limits) -> FunctionalDistance:
    """``gd --weights``: the file's layers against ``con.layers(k)`` on the command's problems."""
    ref, learned, what = gd_stacks(con, k, layers)
    n, d = con.variables["A"]
    v = command_problems(n, d, batch, seed, kappa)
    return functional_distance(ref, learned, con.variables, v, f"the command's problems, --seed {seed}, "
                               f"--kappa {kappa:g}", what, box, **limits)


#: the sampled run's work bound: inputs are drawn until the file's stack would take about this many multiply-adds
#: (each layer counted as ``R^2 C + R C^2`` on the file's R x C state: a dense convolution's Toeplitz product and
#: a dense C x C projection), at least :data:`MIN_SAMPLES`, at most :data:`DEFAULT_SAMPLES` (the count is in the
#: line: "sampled, N inputs").  A learned gd-baseconv: 256 inputs at 64x16, 12 at 256x64 (3.3e8 an input), 8 at
#: 512x128 (2.7e9 an input), where a dense convolution's Toeplitz product runs at about 1e9 multiply-adds a second
#: (in-process at 256x64: 102 inputs took 52.7 s CPU after a 9 s verdict)
SAMPLED_WORK = 2 ** 32
MIN_SAMPLES = 8


def sample_count(shape: tuple, n_layers: int, work: int = SAMPLED_WORK) -> int:
    """How many inputs the sampled distance draws for a stack of ``n_layers`` on states of ``shape``
    (:data:`SAMPLED_WORK`)."""
    R, C = (tuple(shape) + (1, 1))[:2]
    per = max(1, n_layers * (R * R * C + R * C * C))
    return int(min(DEFAULT_SAMPLES, max(MIN_SAMPLES, work // per)))


def for_import(con, k: int, layers, *, box: Box = Box(), **limits) -> FunctionalDistance:
    """``import``: the file's layers against the specification's (``projected_stacks``), on
    :func:`sample_count` inputs."""
    ref, learned, what = projected_stacks(con, k, layers)
    v, desc = specification_problems(con.spec, sample_count(con.layout.shape, len(layers)))
    return functional_distance(ref, learned, con.spec.variables, v, desc, what, box, **limits)
