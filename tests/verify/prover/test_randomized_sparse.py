"""The randomized check reads sparse weights off their nonzeros (issue 46 item 4): the statistics
of the bounds (``weight_stats``) and the residues of a BaseConv layer (``modular.layer_residues``)
of a ``SparseMatrix`` are those of its dense array, and the check's verdict, prime and bounds
are unchanged."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constructions.sparse import SparseMatrix, is_sparse
from verify.prover import modular
from verify.prover.randomized_bounds import weight_stats

P61 = 2305843009213693951  # 2^61 - 1, a wide prime
P31 = modular.PRIMES[0]

entry = st.one_of(st.just(0), st.integers(-5, 5), st.fractions(min_value=-4, max_value=4, max_denominator=12))


def dense_array(rows):
    A = np.empty((len(rows), len(rows[0])), dtype=object)
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            A[i, j] = v if v != 0 else 0
    return A


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6).flatmap(lambda c: st.lists(st.lists(entry, min_size=c, max_size=c), min_size=1, max_size=7)))
def test_weight_stats_of_sparse_equal_dense(rows):
    A = dense_array(rows)
    S = SparseMatrix.from_dense(A)
    assert is_sparse(S)
    assert weight_stats(S) == weight_stats(A)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8).flatmap(lambda c: st.lists(st.lists(entry, min_size=c, max_size=c), min_size=1, max_size=9)),
       st.sampled_from([P31, P61]))
def test_sparse_from_entries_is_sparse_of_dense(rows, p):
    A = dense_array(rows)
    S = SparseMatrix.from_dense(A)
    dense = modular.residues(A, p)
    got = modular._weight_residues(S, p, p >= modular.WIDE)
    want = modular.Sparse.maybe(dense) if p >= modular.WIDE else dense
    assert type(got) is type(want)
    if isinstance(want, modular.Sparse):
        for f in ("rows", "vals", "cols", "starts"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
        assert tuple(got.shape) == tuple(want.shape)
    else:
        assert np.array_equal(got, want)
    X = np.random.default_rng(0).integers(0, p, size=(3, A.shape[0]), dtype=np.int64)
    assert np.array_equal(modular.mm(X, got, p), modular.mm(X, want, p))


W_FIELDS = ("W_in", "W_gate", "W_out")


def sparse_layer(L):
    """A BaseConv layer with its channel maps as SparseMatrix (as the large constructions hold them)."""
    from dataclasses import replace

    if L.kind != "baseconv":
        return L
    return replace(L, **{f: SparseMatrix.from_dense(np.asarray(getattr(L, f), dtype=object)) for f in W_FIELDS})


@pytest.mark.parametrize("arch,n,d,seed", [("baseconv-causal", 12, 3, 4), ("compiled-baseconv-causal", 12, 3, 2),
                                           ("baseconv", 12, 3, 1)])
def test_randomized_check_unchanged_by_sparse_reading(arch, n, d, seed):
    """The check on the construction's own (dense) weights and on the same weights held sparse:
    the same verdict, prime, bounds and entries; a tampered sparse weight fails."""
    from dataclasses import replace

    from constructions.catalogue import gd_architectures
    from verify.prover.randomized import check

    con = gd_architectures()[arch].build(n, d, eta=Fraction(1, 16))
    secs = {"prologue": con.prologue, "body": con.body, "epilogue": con.epilogue}
    ssecs = {k: [sparse_layer(L) for L in v] for k, v in secs.items()}
    assert any(is_sparse(L.W_out) for L in ssecs["body"])
    a, b = check(con, sections=secs, seed=seed).to_json(), check(con, sections=ssecs, seed=seed).to_json()
    for r in (a, b):
        r.pop("seconds")
    assert a == b and a["verdict"] == "passed-randomized"
    L = ssecs["body"][-1]
    W = L.W_out.toarray()
    i, j = map(int, np.argwhere(W != 0)[0])
    W[i, j] = W[i, j] + Fraction(1, 3)
    tampered = dict(ssecs, body=[*ssecs["body"][:-1], replace(L, W_out=SparseMatrix.from_dense(W))])
    assert not check(con, sections=tampered, seed=seed).ok


def test_the_same_seed_gives_the_same_result():
    """Replaying a seed: the same prime, points, bounds and verdict; and the values this seed gave
    before the check read sparse weights off their nonzeros (recorded then: the prime the seed
    draws and the bounds of gd-baseconv-causal at 20x5)."""
    from constructions.catalogue import gd_architectures
    from verify.prover.randomized import check

    con = gd_architectures()["baseconv-causal"].build(20, 5, eta=Fraction(1, 16))
    a, b = check(con, seed=3).to_json(), check(con, seed=3).to_json()
    for r in (a, b):
        r.pop("seconds")
    assert a == b and a["verdict"] == "passed-randomized"
    assert (a["prime"], a["degree_bounds"], a["coefficient_bits"], a["error_bound"], a["entries_checked"]) == (
        "1955603899019158153", {"prologue": 2, "body": 4, "epilogue": 4}, {"prologue": 6, "body": 14, "epilogue": 12},
        "5/576460752303423488", 4851)
