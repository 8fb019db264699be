"""The prover's fast paths at scale: each must still fail on one wrong entry.

* ``constructions.ops.mm`` on exact arrays runs column by column in numpy's loops, rows with the
  same operand objects computed once (``_mm_columns``), terms summed in a balanced tree;
* ``verify.prover.kernel.differing`` compares each distinct pair of objects once (identical objects
  equal), which ``kernel.first_mismatch`` and the specification cover use;
* ``verify.prover.cover._entry_differs`` substitutes each distinct entry once;
* a circular filter's column total is a balanced-tree sum (``ops.tree_sum``).

Each is checked against a plain reference, and a proof through it with a single wrong weight
entry (or a single wrong state entry among replicated ones) must fail.
"""
import random
from fractions import Fraction

import flint
import numpy as np
import pytest

from constructions import ops
from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import GDBaseConv, gd_baseconv, gd_baseconv_causal
from verify.prover.cover import _entry_differs
from verify.prover.kernel import differing as _differing, first_mismatch as _first_mismatch
from verify.prover.proof import prove

EPS = Fraction(1, 1024)


def _reference_mm(X, Y):
    m, k = X.shape
    n = Y.shape[1]
    out = np.zeros((m, n), dtype=object)
    for i in range(m):
        for j in range(n):
            acc = 0
            for r in range(k):
                acc = acc + X[i, r] * Y[r, j]
            out[i, j] = acc
    return out


def _sparse_fractions(rng, shape, density=0.4):
    A = ops.zeros_like_object(shape)
    for ix in np.ndindex(*shape):
        u = rng.random()
        if u < density / 2:
            A[ix] = 1
        elif u < density:
            A[ix] = Fraction(rng.randint(-5, 5), rng.randint(1, 4))
    return A


@pytest.mark.parametrize("seed", range(6))
def test_mm_columns_equals_the_dense_reference(seed):
    rng = random.Random(seed)
    X = _sparse_fractions(rng, (9, 7))
    X[5] = X[2]  # a replicated row: the same objects
    Y = _sparse_fractions(rng, (7, 6))
    Y[2, 1] = 1
    Y[:, 4] = Y[:, 1]  # an equal column (formed once) and one equal but for one entry (not)
    Y[:, 5] = Y[:, 1]
    Y[2, 5] = Fraction(3, 2)
    got = ops.mm(X, Y)
    want = _reference_mm(X, Y)
    assert all(Fraction(g) == Fraction(w) for g, w in zip(got.flat, want.flat))
    for j in range(6):  # the replicated row is computed once: the same object
        assert got[5, j] is got[2, j] or got[5, j] == 0
    assert all(a is b for a, b in zip(got[:, 4], got[:, 1]))


def test_mm_columns_on_polynomials_and_one_wrong_entry():
    ctx = flint.fmpq_mpoly_ctx.get(("a", "b", "c"), "lex")
    a, b, c = ctx.gens()
    X = ops.zeros_like_object((4, 3))
    X[0, 0], X[0, 1], X[1, 1], X[2, 2] = a, b, a * b, c + 1
    X[3] = X[0]
    Y = ops.zeros_like_object((3, 2))
    Y[0, 0], Y[1, 0], Y[2, 0], Y[1, 1] = 1, flint.fmpq(1, 3), 2, 1  # the prover's weights: fmpq
    got = ops.mm(X, Y)
    assert got[0, 0] == a + b / 3 and got[3, 0] is got[0, 0]
    assert got[1, 0] == a * b / 3 and got[2, 0] == 2 * c + 2 and got[2, 1] == 0
    Z = Y.copy()
    Z[2, 0] = flint.fmpq(2049, 1024)  # one wrong weight entry: the product differs at that entry
    idx, diff = _first_mismatch(ops.mm(X, Z), got)
    assert idx == (2, 0) and diff != 0


def test_tree_sum():
    assert ops.tree_sum([]) is None
    assert ops.tree_sum([Fraction(k) for k in range(1, 12)]) == 66


def test_differing_catches_one_entry_among_replicated_objects():
    ctx = flint.fmpq_mpoly_ctx.get(("a", "b"), "lex")
    a, b = ctx.gens()
    p, q = a * b + 1, a * b + 1  # equal values, distinct objects
    got = np.empty((5, 4), dtype=object)
    got.fill(p)
    want = np.empty((5, 4), dtype=object)
    want.fill(q)
    assert not _differing(got, want).any()
    got[3, 2] = a * b + 2  # one wrong entry
    assert np.argwhere(_differing(got, want)).tolist() == [[3, 2]]
    assert _first_mismatch(got, want)[0] == (3, 2)
    want[1, 1] = a  # and a wrong entry on the other side
    assert np.argwhere(_differing(got, want)).tolist() == [[1, 1], [3, 2]]


def test_entry_differs_substitutes_once_and_finds_one_entry():
    ctx = flint.fmpq_mpoly_ctx.get(("a", "e"), "lex")
    a, e = ctx.gens()
    calls = []

    def sub(x):
        calls.append(x)
        return x.subs({1: flint.fmpq(1, 16)}) if isinstance(x, flint.fmpq_mpoly) else x

    mine = np.empty(6, dtype=object)
    mine.fill(a / 16)
    theirs = np.empty(6, dtype=object)
    theirs.fill(a * e)
    assert _entry_differs("s", mine, theirs, sub) is None
    assert len(calls) == 1  # one distinct entry, one substitution
    theirs[4] = a * e + e
    assert _entry_differs("s", mine, theirs, sub).startswith("s[4]:")


def _perturb(layer, name, idx, delta=EPS):
    L = layer.map(lambda x: x.copy())
    arr = L.arrays()[name]
    arr[idx] = arr[idx] + delta
    return L


def _sections(con):
    return {"prologue": list(con.prologue), "body": list(con.body), "epilogue": list(con.epilogue)}


@pytest.mark.parametrize("what", ["sum filter tap", "gate bias one token", "W_out eta"])
def test_baseconv_one_wrong_entry_fails_at_size(what):
    n, d = 24, 6
    con = gd_baseconv(n, d)
    assert prove(con).ok
    secs = _sections(con)
    L3 = secs["body"][2]
    c = con.layout.cols("s2")[1]
    if what == "sum filter tap":  # the all-ones circular filter (a column total) with one tap off
        secs["body"][2] = _perturb(L3, "h", (7, c))
    elif what == "gate bias one token":  # the gradient at one token only: one replicated entry differs
        secs["body"][2] = _perturb(L3, "b_gate", (5, c))
    else:
        x = con.layout.cols("x")[1]
        secs["body"][2] = _perturb(L3, "W_out", (c, x))
    res = prove(con, sections=secs)
    assert not res.ok and res.failure.section == "body"


def test_baseconv_causal_one_wrong_entry_fails():
    con = gd_baseconv_causal(12, 3)
    secs = _sections(con)
    P2 = secs["prologue"][1]
    c = con.layout.cols("Saa")[4]
    secs["prologue"][1] = _perturb(P2, "h", (6, c))  # a prefix-sum filter with one tap off
    res = prove(con, sections=secs)
    assert not res.ok and res.failure.section == "prologue"


@pytest.mark.parametrize("build,array", [(gd_lsa, "head1.W2"), (gd_elsa, "stage0.head3.W2")])
def test_attention_one_wrong_entry_fails_at_size(build, array):
    con = build(24, 6)
    assert prove(con).ok
    secs = _sections(con)
    arr = secs["body"][0].arrays()[array]
    idx = tuple(int(i) for i in np.argwhere(ops.nonzero_pattern(np.asarray(arr, dtype=object)))[-1])
    secs["body"][0] = _perturb(secs["body"][0], array, idx)
    res = prove(con, sections=secs)
    assert not res.ok and res.failure.section == "body"


class _CountingBaseConv(GDBaseConv):
    """gd-baseconv counting its polynomial GD steps (the specification's most expensive output)."""

    calls = 0

    def step(self, v):
        if type(next(iter(np.asarray(v["x"]).flat))).__name__ == "FPoly":
            type(self).calls += 1
        return super().step(v)


class _WrongAtValue(GDBaseConv):
    """gd-baseconv whose step is wrong at eta == 1/16 only (right on a symbol)."""

    def step(self, v):
        out = super().step(v)
        eta = self.params["eta"]
        if isinstance(eta, Fraction) and eta == Fraction(1, 16):
            out = dict(out)
            out["x"] = np.asarray(out["x"]) * 2
        return out


def _as(cls, con, build):
    con.__class__ = cls
    inner = con.rebuild
    con.rebuild = lambda **p: _as(cls, inner(**p), build)
    return con


def test_cover_reuses_the_grouped_proofs_specification():
    """The grouped proof's symbolic specification is the cover's symbolic side (one polynomial GD
    step fewer), and a step wrong at the concrete value is still found (proved concretely: fails)."""
    build = lambda **kw: gd_baseconv(10, 3, **kw)  # noqa: E731
    con = _as(_CountingBaseConv, build(), build)
    _CountingBaseConv.calls = 0
    r = prove(con)
    assert r.ok and r.symbolic_params == ["eta"] and "and so does the specification" in r.symbolic_cover
    assert _CountingBaseConv.calls == 2  # the proof's (symbolic) and the cover's concrete side
    bad = _as(_WrongAtValue, build(), build)
    r = prove(bad, refute=False)  # the cover's concrete proof (refuting first fails it before any ring)
    assert not r.ok and r.symbolic_params == [] and "step(v)['x']" in r.symbolic_cover
