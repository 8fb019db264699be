"""The second checker (issue 40 item 2, de Bruijn's criterion): every catalogue entry that is a layer
stack, every GD architecture and a set of compiled stacks re-proved at small sizes by the independent
evaluator (:mod:`tests.independent.evaluator`, the papers' layer equations in plain loops over
Fractions), and the kernel's verdict (``verify.prover.proof``) compared with it: both must say
PROVED, and a perturbed weight both must reject.  Any disagreement fails here.
"""
from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

import circuits as C
from circuits import builders as CB
from constructions.base import Construction
from constructions.catalogue import entries, gd_architectures
from constructions.compiler import TARGETS, compile_circuit
from tests.independent.evaluator import (Poly, as_state, baseconv, convolve, differences, forward, from_sympy_ring,
                                         matrix)
from tests.independent.harness import Verdict, circuit_values, gd_iterates, reprove, symbols
from verify.prover.kernel import is_proved
from verify.prover.proof import check, prove

ETA, LAM = Fraction(1, 16), Fraction(1, 16)  # dyadic, and perfect squares (LSA/ELSA store the roots)
GD_N, GD_D, GD_K = 4, 2, 2  # the GD architectures: A is 4 x 2, two body copies unrolled
CATALOGUE = entries()
GD = {e.name: e for e in gd_architectures().values()}

#: catalogue entries that are not layer stacks, and why (a new such entry must be listed here)
NOT_STACKS = {
    "s000-softmax-square": "a witness (seed 000 Thm. D.31: softmax attention vs SQUARE), a certified computation "
                           "with no weight stack",
    "s001-mask-move": "an identity W A V == MskMov(A) between two matrix products (seed 001 Property 1), no layer",
    "s002-conv-lrnn": "an identity RNN(x) == conv_L(x) (seed 002 Prop. 2.1(b)): a linear RNN recursion, "
                      "not one of the four layer kinds",
    "s002-conv-lrnn-shift": "an identity RNN(x) == conv_L(x) (shift-register RNN): a linear RNN recursion, "
                            "not one of the four layer kinds",
    "s004-lemma-a3": "an identity between closed-form expressions (seed 004 Lemma A.3), no layer",
    "s004-ridge2-omega": "an identity of closed-form omegas (seed 004 Thm. 5.2), no layer",
}
#: one body copy unrolled instead of two: the carried matrix M (preconditioner, GD++'s data
#: transform) makes the second copy's polynomials 10^4 - 10^5 terms (minutes in plain Python)
ONE_COPY = {"s004-gdpp", "s004-implicit-w", "s004-precond"}
#: identities whose sides are layer stacks with symbolic weights: re-proved by their own tests below
LAYER_IDENTITIES = ("s003-baseconv-as-hyena", "s004-diag-update", "s004-full-vs-diag")


def _agree(name: str, mine, kernel) -> None:
    """Both PROVED; a disagreement names both sides."""
    if mine.ok != is_proved(kernel):
        pytest.fail(f"DISAGREEMENT on {name}: independent checker {'PROVED' if mine.ok else 'FAILED'}, kernel "
                    f"{'PROVED' if is_proved(kernel) else 'FAILED'}; checker: {mine.mismatches[:3]}; kernel: "
                    f"{kernel.failure and kernel.failure.describe()}")
    assert mine.ok, f"{name}: both checkers reject it: {mine.mismatches[:3]}"


# ------------------------------------------------------------------------------ the evaluator by itself


def test_convolution_conventions_by_hand():
    """The three conventions on T = 3, values worked out by hand from the formulas."""
    v = [[Poly.const(1)], [Poly.const(10)], [Poly.const(100)]]
    h = [[Fraction(1)], [Fraction(2)], [Fraction(3)]]
    got = {c: [row[0].terms.get((), 0) for row in convolve(v, h, c)] for c in ("causal", "circular", "same")}
    assert got["causal"] == [1, 10 + 2, 100 + 20 + 3]
    assert got["circular"] == [1 + 2 * 100 + 3 * 10, 10 + 2 + 3 * 100, 100 + 20 + 3]
    assert got["same"] == [2 * 1 + 1 * 10, 3 * 1 + 2 * 10 + 1 * 100, 3 * 10 + 2 * 100]  # h[1] is lag 0


def test_baseconv_equation_by_hand():
    """One token, one channel: y = ((u wg + bg) (h0 (u wi + bi) + bc)) wo + bo."""
    u = Poly.var(0)
    w = {"W_gate": [[Fraction(2)]], "b_gate": [[Fraction(1)]], "W_in": [[Fraction(3)]], "b_in": [[Fraction(5)]],
         "h": [[Fraction(7)]], "b_conv": [[Fraction(11)]], "W_out": [[Fraction(13)]], "b_out": [[Fraction(17)]]}
    y = baseconv([[u]], w, causal=True, residual=True)[0][0]
    assert y == u + ((u * 2 + 1) * ((u * 3 + 5) * 7 + 11)) * 13 + 17


# ------------------------------------------------------------------------------ catalogue entries

def _catalogue_cases():
    for name, e in CATALOGUE.items():
        if "gd" in e.roles or name in LAYER_IDENTITIES:
            continue  # the GD architectures: test_gd_architecture; layer identities: test_layer_identity
        yield pytest.param(name, id=name)


def test_every_catalogue_entry_is_covered():
    """Every entry is re-proved here (a stack, a GD architecture or a layer identity) or listed with
    the reason it is not a layer stack."""
    for name, e in CATALOGUE.items():
        if "gd" in e.roles or name in LAYER_IDENTITIES:
            continue
        obj = e.build(**e.sizes)
        assert isinstance(obj, Construction) or name in NOT_STACKS, f"{name} is neither a stack nor listed"
        assert not (isinstance(obj, Construction) and name in NOT_STACKS), f"{name} is a stack now"


@pytest.mark.parametrize("name", list(_catalogue_cases()))
def test_catalogue_entry(name):
    e = CATALOGUE[name]
    if name in NOT_STACKS:
        pytest.skip(f"not a layer stack: {NOT_STACKS[name]}")
    con = e.build(**e.sizes)
    mine = reprove(con, k=1 if name in ONE_COPY else 2)
    _agree(name, mine, check(con))


# ------------------------------------------------------------------------------ GD architectures

#: where each architecture's epilogue writes the prediction q^T x (the last entry of the region), and
#: its sign (seed 004 reads the negated last coordinate)
PREDICTION = {"gd-baseconv": ("y", 1), "gd-baseconv-causal": ("y", 1), "gd-lsa": ("pred", 1),
              "gd-elsa": ("z", 1), "gd-compiled-baseconv": ("y", 1), "gd-compiled-baseconv-causal": ("y", 1),
              "gd-compiled-lsa": ("y", 1), "gd-compiled-elsa": ("y", 1), "gd-token-lsa": ("pred", -1)}


def _gd_build(e, **kw):
    if e.ridge:
        kw.setdefault("lam", LAM)
    return e.build(GD_N, GD_D, eta=ETA, **kw)


@pytest.mark.parametrize("name", list(GD), ids=list(GD))
def test_gd_architecture(name):
    e = GD[name]
    con = _gd_build(e)
    lam = LAM if e.ridge else Fraction(0)
    mine = reprove(con, k=GD_K)
    kernel = check(con)
    _agree(name, mine, kernel)
    # (b) the algorithm, stated here: x_k by hand, and the prediction q^T x_k where the epilogue puts it
    sy = mine.symbols
    A, b, x, q = (sy.p[nm] for nm in ("A", "b", "x", "q"))
    xs = gd_iterates(A, b, x, ETA, lam, GD_K)
    for j, vj in enumerate(mine.steps):
        stated = [from_sympy_ring(z) for z in np.asarray(vj["x"]).reshape(-1)]
        assert stated == xs[j], f"{name}: the specification's step {j} is not GD with eta={ETA}, lam={lam}"
    region, sign = PREDICTION[name]
    ix = con.layout[region]
    got = mine.final[ix.rows[1] - 1][ix.cols[1] - 1]
    want = sum((q[j] * xs[-1][j] for j in range(GD_D)), Poly()) * sign
    assert got == want, f"{name}: the prediction after {GD_K} steps is not q^T x_{GD_K}"


# ------------------------------------------------------------------------------ compiled stacks


def _dot_placed():
    """y = u0 v0 + u1 v1 on a 2 x 3 grid, the output on the last token (every target takes it)."""
    b = C.CircuitBuilder()
    pairs = [(b.input(f"u{i}", token=i, channel=0), b.input(f"v{i}", token=i, channel=1)) for i in range(2)]
    b.output(b.add(*(b.mul(u, v) for u, v in pairs)), "y", token=1, channel=2)
    return b.graph()


def _product_of_sums():
    """y = (u0 + u1)(v0 + v1)(u0 + v1) + 3 on a 2 x 3 grid (multiplicative depth 2, a constant)."""
    b = C.CircuitBuilder()
    u = [b.input(f"u{i}", token=i, channel=0) for i in range(2)]
    v = [b.input(f"v{i}", token=i, channel=1) for i in range(2)]
    prod = b.mul(b.mul(b.add(u[0], u[1]), b.add(v[0], v[1])), b.add(u[0], v[1]))
    b.output(b.add(prod, b.const(3)), "y", token=1, channel=2)
    return b.graph()


GD_STEP = f"ridge-gd-step-{GD_N}x{GD_D}"
CIRCUITS = {
    "dot2": _dot_placed,
    "product-of-sums": _product_of_sums,
    GD_STEP: lambda: CB.ridge_gd_step(GD_N, GD_D, ETA, LAM, placed=True),
    "dot3-unplaced": lambda: CB.dot(3),
}
#: (circuit, target, options): every target on every circuit, and a few options that take other routes
COMPILED = [(c, t, {}) for c in CIRCUITS for t in TARGETS] + [
    (GD_STEP, "baseconv", {"channels": 7}),  # Benes routing under a channel budget
    ("product-of-sums", "lsa", {"heads": 1}),
    (GD_STEP, "elsa", {"heads": 1}),
]


def _cid(case):
    c, t, o = case
    return f"{c}-{t}" + "".join(f"-{k}{v}" for k, v in o.items())


@pytest.mark.parametrize("case", COMPILED, ids=[_cid(c) for c in COMPILED])
def test_compiled_stack(case):
    cname, target, opts = case
    g = CIRCUITS[cname]()
    con = compile_circuit(g, name=cname, target=target, **opts)
    mine = reprove(con, k=0)
    _agree(_cid(case), mine, prove(con))
    # (b) the circuit evaluated here, node by node, at the output slots of the evaluated final state
    sy = mine.symbols
    want = circuit_values(g, {nm: sy.p[nm] for nm in C.inputs(g)})
    for out, (t, c) in con.output_slots.items():
        assert mine.final[t][c] == want[out], f"{_cid(case)}: output {out!r} at ({t}, {c}) is not the circuit's"


# ------------------------------------------------------------------------------ identities with layer stacks


def _hyena_case():
    obj = CATALOGUE["s003-baseconv-as-hyena"].build(**CATALOGUE["s003-baseconv-as-hyena"].sizes)
    claim = obj.claim()
    sy = symbols(claim.variables)
    # the claim's left side: L causal BaseConv layers, W_in = obj.W_in, W_out = obj.W_out (identities),
    # W_gate = W^l, h = h^l (symbolic), every bias zero (the class docstring)
    N, d = obj.N, obj.d
    zero = [[Fraction(0)] * d for _ in range(N)]
    S = [list(r) for r in sy.p["u"]]
    for l in range(obj.L):
        w = {"W_in": matrix(np.asarray(obj.W_in, dtype=object)), "W_out": matrix(np.asarray(obj.W_out, dtype=object)),
             "W_gate": sy.p[f"W{l}"], "h": sy.p[f"h{l}"], "b_in": zero, "b_conv": zero, "b_gate": zero,
             "b_out": zero}
        S = baseconv(S, w, causal=True, residual=False)
    return obj, [(S, claim.rhs(sy.v))], sy


def _diag_update_case():
    from constructions.catalogue.seed004_common import diag_head, token_layer

    e = CATALOGUE["s004-diag-update"]
    obj = e.build(**e.sizes)
    d, heads = e.sizes["d"], e.sizes["heads"]
    sy = symbols(obj.variables, tuple(obj.params))
    layer = token_layer([diag_head(d, *(sy.v[f"{nm}{k}"] for nm in ("px", "py", "qx", "qy"))) for k in range(heads)])
    return obj, [(forward(layer, as_state(sy.v["E"])), obj.rhs(sy.v))], sy


def _full_vs_diag_case():
    from constructions.catalogue.seed004_common import token_layer
    from constructions.catalogue.seed004_token_gd import gd_heads, gdpp_heads

    e = CATALOGUE["s004-full-vs-diag"]
    obj = e.build(**e.sizes)
    d = e.sizes["d"]
    sy = symbols(obj.variables, tuple(obj.params))
    E = as_state(sy.v["E"])
    eta, gamma = sy.v["eta"], sy.v["gamma"]
    pairs = []
    for make in (lambda full: gd_heads(d, eta, full), lambda full: gdpp_heads(d, gamma, eta, full)):
        diag, full = forward(token_layer(make(False)), E), forward(token_layer(make(True)), E)
        pairs.append((diag, full))  # the two weight forms, both through this checker's equations
    rhs = obj.rhs(sy.v)  # the project's forward of the Full forms, (2, n+1, d+1)
    pairs += [(pairs[i][0], rhs[i]) for i in range(2)]
    return obj, pairs, sy


LAYER_IDENTITY_CASES = {"s003-baseconv-as-hyena": _hyena_case, "s004-diag-update": _diag_update_case,
                        "s004-full-vs-diag": _full_vs_diag_case}


@pytest.mark.parametrize("name", LAYER_IDENTITIES)
def test_layer_identity(name):
    obj, pairs, sy = LAYER_IDENTITY_CASES[name]()
    mine = Verdict()
    for side, (got, want) in enumerate(pairs):
        want = want if isinstance(want, list) else as_state(np.asarray(want, dtype=object))
        mine.mismatches += [f"comparison {side}, entry {ij}" for ij in differences(got, want)]
    _agree(name, mine, check(obj))


# ------------------------------------------------------------------------------ negative controls


def _perturbed(con, section: str, eps=Fraction(1, 1024)):
    """A shallow copy of ``con`` with ``eps`` added to one weight entry: the first nonzero entry of
    the first weight array of the first layer of ``section`` (a sparse channel mix: its first stored
    entry)."""
    layers = list(getattr(con, section))
    new = layers[0].map(lambda a: a.copy())
    for name, arr in new.arrays().items():
        if isinstance(arr, np.ndarray):
            nz = [ix for ix, z in np.ndenumerate(arr) if z != 0]
            if nz:
                arr[nz[0]] = arr[nz[0]] + eps
                where = list(nz[0])
                break
        elif len(getattr(arr, "vals", ())):  # a sparse matrix: its public vals, one per stored entry
            arr.vals[0] = arr.vals[0] + eps
            where = [int(arr.rows[0]), int(arr.cols[0])]
            break
    else:
        raise AssertionError("no nonzero weight to perturb")
    bad = copy.copy(con)
    layers[0] = new
    setattr(bad, section, layers)
    return bad, f"{section}[0].{name}{where}"


NEGATIVE = ["gd-baseconv", "gd-baseconv-causal", "gd-lsa", "gd-elsa", "gd-token-lsa", "gd-compiled-lsa"]


@pytest.mark.parametrize("name", NEGATIVE)
def test_perturbed_weight_is_rejected_by_both(name):
    con = _gd_build(GD[name])
    bad, where = _perturbed(con, "body")
    mine = reprove(bad, k=1)
    kernel = prove(bad)
    assert not mine.ok and not is_proved(kernel), (
        f"{name}, {where} + 1/1024: independent checker {'PROVED' if mine.ok else 'FAILED'}, kernel "
        f"{'PROVED' if is_proved(kernel) else 'FAILED'} (both must reject it)")


def _every_perturbation(con):
    """``con`` with 1/1024 added to one entry of one weight array, for every array of every layer
    (the middle nonzero entry; a sparse matrix's middle stored entry)."""
    for sec in ("prologue", "body", "epilogue"):
        for li, L in enumerate(getattr(con, sec)):
            for name in L.arrays():
                new = L.map(lambda a: a.copy())
                arr = new.arrays()[name]
                if isinstance(arr, np.ndarray):
                    nz = [ix for ix, z in np.ndenumerate(arr) if z != 0]
                    if not nz:
                        continue
                    ix = nz[len(nz) // 2]
                    arr[ix] = arr[ix] + Fraction(1, 1024)
                else:
                    if not len(arr.vals):
                        continue
                    ix = (int(arr.rows[len(arr.vals) // 2]), int(arr.cols[len(arr.vals) // 2]))
                    arr.vals[len(arr.vals) // 2] = arr.vals[len(arr.vals) // 2] + Fraction(1, 1024)
                bad = copy.copy(con)
                layers = list(getattr(con, sec))
                layers[li] = new
                setattr(bad, sec, layers)
                yield f"{sec}[{li}].{name}{list(ix)}", bad


@pytest.mark.parametrize("name", list(GD), ids=list(GD))
def test_every_perturbation_same_verdict(name):
    """Each weight array of each layer perturbed in turn (one body copy unrolled): the two checkers
    give the same verdict on every variant (most are rejected; a weight that only reaches a
    discarded channel may be proved by both)."""
    con = _gd_build(GD[name])
    seen = rejected = 0
    for where, bad in _every_perturbation(con):
        mine, kernel = reprove(bad, k=1), prove(bad)
        assert mine.ok == is_proved(kernel), (
            f"DISAGREEMENT on {name}, {where} + 1/1024: independent checker {'PROVED' if mine.ok else 'FAILED'} "
            f"{mine.mismatches[:2]}, kernel {'PROVED' if is_proved(kernel) else 'FAILED'}")
        seen += 1
        rejected += not is_proved(kernel)
    assert seen and rejected, f"{name}: {seen} perturbations, {rejected} rejected"
