"""constructions/sparse.py: sparse weight matrices, exact and float, and the compiled layers that hold them.

The sparse form must give what the dense form gives: the same exact products (entry for entry),
the same float products (exactly, on integer-valued operands, where every product and sum is
exact in the format), the same submatrices, and the compiler's layers must never build their
``C x C`` arrays dense on the way through compile, proof and float run.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from circuits.random import random_circuit
from constructions import ops
from constructions.compiler import compile_circuit
from constructions.layers import BaseConv
from constructions.sparse import SparseMatrix, map_weight, nnz
from verify.prover.proof import prove

from tests.support import assert_proved

small_fracs = st.builds(Fraction, st.integers(-4, 4), st.integers(1, 3))


@st.composite
def sparse_and_dense(draw, max_dim: int = 6):
    m, n = draw(st.integers(1, max_dim)), draw(st.integers(1, max_dim))
    cells = [(i, j) for i in range(m) for j in range(n)]
    chosen = draw(st.lists(st.sampled_from(cells), unique=True, max_size=len(cells)))
    entries = {c: draw(small_fracs) for c in chosen}
    D = ops.zeros_like_object((m, n))
    for (i, j), v in entries.items():
        D[i, j] = v
    return SparseMatrix.from_entries((m, n), entries), D


@given(sparse_and_dense(), st.data())
def test_exact_product_equals_the_dense_one(SD, data):
    S, D = SD
    rows = data.draw(st.integers(1, 5))
    X = np.array([[data.draw(small_fracs) for _ in range(S.shape[0])] for _ in range(rows)], dtype=object)
    got, want = ops.mm(X, S), ops.mm(X, D)
    assert got.shape == want.shape
    assert all(a == b for a, b in zip(got.ravel().tolist(), want.ravel().tolist()))


@given(sparse_and_dense())
def test_round_trip_and_counts(SD):
    S, D = SD
    A = S.toarray()
    assert A.shape == D.shape and all(a == b for a, b in zip(A.ravel().tolist(), D.ravel().tolist()))
    assert S.nnz == nnz(D) == nnz(S)
    B = SparseMatrix.from_dense(D)
    assert list(B.entries()) == list(S.entries())  # column-major, no zeros


def test_from_entries_sums_repeats_and_drops_zeros():
    S = SparseMatrix.from_entries((2, 3), [(0, 1, 1), (0, 1, Fraction(1, 2)), (1, 2, 3), (1, 2, -3), (1, 0, 2)])
    assert list(S.entries()) == [(1, 0, 2), (0, 1, Fraction(3, 2))]
    with pytest.raises(ValueError, match="outside the shape"):
        SparseMatrix((2, 2), [0], [2], np.array([1], dtype=object))


@given(sparse_and_dense(), st.data())
def test_selection_matches_numpy(SD, data):
    S, D = SD
    m, n = S.shape
    r0 = data.draw(st.integers(0, m - 1))
    r1 = data.draw(st.integers(r0, m))
    cols = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    for sub, want in ((S[r0:r1], D[r0:r1]), (S[:, cols], D[:, cols]), (S[r0:r1, cols], D[r0:r1][:, cols])):
        got = sub.toarray()
        assert got.shape == want.shape
        assert all(a == b for a, b in zip(got.ravel().tolist(), want.ravel().tolist()))


def test_pointwise_index_and_comparison_are_refused():
    S = SparseMatrix.from_entries((2, 2), {(0, 0): 1})
    with pytest.raises(TypeError, match="at most one index list"):
        S[[0, 1], [0, 1]]
    with pytest.raises(TypeError, match="compared with a scalar"):
        S == S.toarray()  # noqa: B015
    np.testing.assert_array_equal(S != 0, [[True, False], [False, False]])
    np.testing.assert_array_equal(S == 0, [[False, True], [True, True]])


@pytest.mark.parametrize("lib,dtype", [("numpy", "float64"), ("numpy", "float32"), ("numpy", "float16"),
                                       ("torch", "float64"), ("torch", "float32"), ("torch", "float16"),
                                       ("torch", "bfloat16")])
def test_float_product_equals_dense(lib, dtype):
    """Integer operands of at most 8 and at most 6 terms: every product and partial sum is an
    integer below 2^8, exact in every format here, so the sparse and dense products agree exactly."""
    rng = np.random.default_rng(0)
    D = rng.integers(-2, 3, (6, 5)) * (rng.random((6, 5)) < 0.4)
    S = SparseMatrix.from_dense(D.astype(object))
    X = rng.integers(-2, 3, (3, 4, 6))
    want = X @ D
    if lib == "numpy":
        Sf = S.map_values(lambda v: np.asarray(v, dtype=np.float64).astype(dtype))
        got = X.astype(dtype) @ Sf
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.astype(np.float64), want)
    else:
        td = getattr(torch, dtype)
        Sf = S.map_values(lambda v: torch.as_tensor(np.asarray(v, dtype=np.float64)).to(td))
        got = torch.as_tensor(X, dtype=torch.float64).to(td) @ Sf
        assert got.dtype == td
        np.testing.assert_array_equal(got.double().numpy(), want)


def _entries_st(T, C):
    cell = lambda a, b: st.tuples(st.integers(0, a - 1), st.integers(0, b - 1))  # noqa: E731
    field = lambda a, b: st.dictionaries(cell(a, b), small_fracs, max_size=6)  # noqa: E731
    return st.fixed_dictionaries({nm: field(C, C) if nm in ("W_in", "W_gate", "W_out") else field(T, C)
                                  for nm in BaseConv.array_fields})


@given(st.data())
def test_from_entries_is_the_dense_layer(data):
    """``BaseConv.from_entries`` (sparse mixes) is the layer a dense build of the same entries
    gives: the same weights, the same exact forward and ``forward_rows``."""
    T, Cn = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    causal = data.draw(st.booleans())
    ent = data.draw(_entries_st(T, Cn))
    L = BaseConv.from_entries(T, Cn, ent, causal=causal)
    dense = BaseConv.zeros(T, Cn, causal=causal)
    for nm, e in ent.items():
        for (i, j), v in e.items():
            getattr(dense, nm)[i, j] = v
    for nm in BaseConv.array_fields:
        a, b = np.asarray(getattr(L, nm), dtype=object), getattr(dense, nm)
        assert all(x == y for x, y in zip(a.ravel().tolist(), b.ravel().tolist())), nm
    assert all(isinstance(getattr(L, nm), SparseMatrix) for nm in ("W_in", "W_gate", "W_out"))
    u = np.array([[data.draw(small_fracs) for _ in range(Cn)] for _ in range(T)], dtype=object)
    for got, want in ((L.forward(u), dense.forward(u)), (L.forward_rows(u, range(T)), dense.forward_rows(u, range(T)))):
        assert all(x == y for x, y in zip(got.ravel().tolist(), want.ravel().tolist()))
    # a conversion keeps the form sparse
    M = L.map(lambda A: np.asarray(A, dtype=object))
    assert isinstance(M.W_out, SparseMatrix) and isinstance(map_weight(np.negative, M.W_in), SparseMatrix)


@pytest.mark.parametrize("target", ["baseconv", "baseconv-causal", "baseconv-mlp"])
def test_compile_prove_and_float_run_never_densify(monkeypatch, target):
    """The compiled layers' channel mixes stay sparse through compile, exact proof and a float64
    run: any dense copy of a SparseMatrix fails the test."""
    def refuse(self, *a, **k):
        raise AssertionError(f"a dense copy of a {self.shape} sparse weight was made")

    g = random_circuit(3, 12, 120, n_outputs=3)
    g = C.place_inputs(g, 4) if target != "baseconv-mlp" else g
    monkeypatch.setattr(SparseMatrix, "toarray", refuse)
    monkeypatch.setattr(SparseMatrix, "__array__", refuse)
    con = compile_circuit(g, name="sparse", target=target)
    mixes = [getattr(L, nm) for L in con.epilogue for nm in ("W_in", "W_gate", "W_out")]
    assert mixes and all(isinstance(W, SparseMatrix) for W in mixes)
    assert_proved(prove(con))
    names = C.inputs(g)
    xs = np.random.default_rng(1).integers(-3, 4, (len(names), 5)).astype(np.float64)
    fv = {n: xs[i] for i, n in enumerate(names)}
    from verify.circuit_cmd import _float_array

    S, _ = con.run(fv, 0, state=con.input_state(fv), cast=lambda L: L.map(_float_array))
    got = con.readout(S)
    for t in range(5):  # integer inputs, small rational constants: float64 within a relative 1e-9
        want = C.evaluate(g, {n: Fraction(int(fv[n][t])) for n in names})
        for o, w in want.items():
            f = float(np.asarray(got[o]).reshape(-1)[t])
            assert abs(f - float(w)) <= 1e-9 * max(1.0, abs(float(w))), (o, t, f, w)


@given(sparse_and_dense(), st.data())
def test_entry_read_and_write_match_numpy(SD, data):
    S, D = SD
    m, n = S.shape
    for _ in range(4):
        i, j = data.draw(st.integers(0, m - 1)), data.draw(st.integers(0, n - 1))
        assert S[i, j] == D[i, j]
        v = data.draw(st.one_of(st.just(Fraction(0)), small_fracs))
        S[i, j] = D[i, j] = v
    A = S.toarray()
    assert all(a == b for a, b in zip(A.ravel().tolist(), D.ravel().tolist()))
    assert S.nnz == nnz(D)  # a zero written removes the entry
    keys = S.cols * m + S.rows
    assert np.all(np.diff(keys) > 0)  # still in column, row order
