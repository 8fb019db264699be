"""constructions/ops.py: the four array operations on exact, numpy and torch arrays.

Convolution semantics (ops docstring, seed 003 App. H.1.1, seed 000 Def. D.20):
causal ``y[t] = sum_{s<=t} h[s] v[t-s]``, circular ``y[t] = sum_s h[s] v[(t-s) mod T]``,
lag 0 first -- a convolution, not the cross-correlation of ``torch.nn.Conv1d``.
"""
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions import ops

small_q = st.one_of(
    st.sampled_from([Fraction(0), Fraction(1), Fraction(-1)]),  # structural zeros and ones
    st.fractions(min_value=-5, max_value=5, max_denominator=6),
)


@st.composite
def exact_matrix(draw, rows, cols):
    a = np.empty((rows, cols), dtype=object)
    for idx in np.ndindex(rows, cols):
        a[idx] = draw(small_q)
    return a


@st.composite
def conv_case(draw):
    T = draw(st.integers(1, 6))
    C = draw(st.integers(1, 3))
    return draw(exact_matrix(T, C)), draw(exact_matrix(T, C))


def conv_by_definition(v, h, causal):
    """The definition, written out on plain Python lists of Fractions."""
    T, C = v.shape
    y = [[Fraction(0)] * C for _ in range(T)]
    for c in range(C):
        for t in range(T):
            acc = Fraction(0)
            if causal:
                for s in range(t + 1):
                    acc += Fraction(h[s, c]) * Fraction(v[t - s, c])
            else:
                for s in range(T):
                    acc += Fraction(h[s, c]) * Fraction(v[(t - s) % T, c])
            y[t][c] = acc
    return y


def as_fractions(a):
    return [[Fraction(x) for x in row] for row in np.asarray(a, dtype=object)]


# ----------------------------------------------------------------------------- exact conv

@pytest.mark.parametrize("causal", [True, False])
@given(case=conv_case())
def test_exact_conv_equals_definition(causal, case):
    v, h = case
    y = ops.conv(v, h, causal=causal)
    assert y.dtype == object and y.shape == v.shape
    assert as_fractions(y) == conv_by_definition(v, h, causal)


@pytest.mark.parametrize("causal", [True, False])
@given(case=conv_case())
def test_exact_conv_is_commutative(causal, case):
    # both the truncated linear and the circular convolution are symmetric in (v, h)
    v, h = case
    assert as_fractions(ops.conv(v, h, causal=causal)) == as_fractions(ops.conv(h, v, causal=causal))


@st.composite
def structured_conv_case(draw):
    """Filters of the channel classes the exact convolution runs in numpy's loops (lag 0 only,
    every tap equal) beside general ones, zero-heavy states and a mask of wanted outputs."""
    T = draw(st.integers(1, 6))
    C = draw(st.integers(1, 4))
    v = draw(exact_matrix(T, C))
    h = np.empty((T, C), dtype=object)
    for c in range(C):
        kind = draw(st.sampled_from(["lag0", "equal", "general"]))
        w = draw(small_q)
        for s in range(T):
            h[s, c] = (w if s == 0 else Fraction(0)) if kind == "lag0" else (w if kind == "equal" else draw(small_q))
    need = np.array([[draw(st.booleans()) for _ in range(C)] for _ in range(T)], dtype=bool)
    return v, h, need


@pytest.mark.parametrize("causal", [True, False])
@given(case=structured_conv_case())
def test_exact_conv_channel_classes_equal_definition(causal, case):
    # lag-0 channels (scaled copies), all-equal causal channels (prefix sums) and the rest,
    # with and without a mask of wanted outputs (the others are 0)
    v, h, need = case
    want = conv_by_definition(v, h, causal)
    assert as_fractions(ops.conv(v, h, causal=causal)) == want
    masked = as_fractions(ops.conv(v, h, causal=causal, need=need))
    assert masked == [[want[t][c] if need[t, c] else 0 for c in range(v.shape[1])] for t in range(v.shape[0])]


def test_exact_conv_lag0_tap_one_copies_the_object():
    v = np.array([[Fraction(2), Fraction(3)], [Fraction(0), Fraction(5)]], dtype=object)
    h = np.array([[Fraction(1), Fraction(4)], [Fraction(0), Fraction(0)]], dtype=object)
    y = ops.conv(v, h, causal=True)
    assert y[0, 0] is v[0, 0] and y[1, 0] == 0 and y[1, 1] == 20


def test_exact_conv_ignores_method_but_checks_it():
    v = np.array([[Fraction(1)], [Fraction(2)]], dtype=object)
    h = np.array([[Fraction(0)], [Fraction(1)]], dtype=object)
    assert as_fractions(ops.conv(v, h, causal=True, method="fft")) == [[0], [1]]
    with pytest.raises(ValueError, match="unknown convolution method"):
        ops.conv(v, h, causal=True, method="winograd")


def test_exact_conv_rejects_batched_object_arrays():
    v = np.empty((2, 3, 1), dtype=object)
    v.fill(Fraction(1))
    with pytest.raises(ValueError, match="2-D"):
        ops.conv(v, v[0], causal=True)


# ----------------------------------------------------------------------------- shift semantics

@pytest.mark.parametrize("T", [1, 4, 7])
def test_unit_filter_shifts_down_causal_and_rolls_circular(T):
    C = 2
    v = np.arange(1, T * C + 1, dtype=np.float64).reshape(T, C)
    vx = v.astype(object)
    for s in range(T):
        h = np.zeros((T, C))
        h[s, :] = 1
        hx = h.astype(object)
        shifted = np.zeros_like(v)
        shifted[s:] = v[: T - s]
        rolled = np.roll(v, s, axis=0)
        # exact, numpy direct, numpy fft and torch direct all agree on the direction
        np.testing.assert_array_equal(np.array(ops.conv(vx, hx, causal=True), dtype=float), shifted)
        np.testing.assert_array_equal(np.array(ops.conv(vx, hx, causal=False), dtype=float), rolled)
        np.testing.assert_array_equal(ops.conv(v, h, causal=True), shifted)
        np.testing.assert_array_equal(ops.conv(v, h, causal=False), rolled)
        np.testing.assert_allclose(ops.conv(v, h, causal=True, method="fft"), shifted, atol=1e-12)
        np.testing.assert_allclose(ops.conv(v, h, causal=False, method="fft"), rolled, atol=1e-12)
        tv, th = torch.from_numpy(v), torch.from_numpy(h)
        np.testing.assert_array_equal(ops.conv(tv, th, causal=True).numpy(), shifted)
        np.testing.assert_array_equal(ops.conv(tv, th, causal=False).numpy(), rolled)


def test_not_cross_correlation():
    # an asymmetric filter: convolution y[t] = sum_s h[s] v[t-s]; cross-correlation would give
    # y[t] = sum_s h[s] v[t+s] (what torch.nn.functional.conv1d computes)
    T = 5
    v = np.arange(1.0, T + 1).reshape(T, 1)
    h = np.zeros((T, 1))
    h[0, 0], h[1, 0] = 2.0, 3.0
    y = ops.conv(v, h, causal=True)[:, 0]
    expect = [2 * v[t, 0] + (3 * v[t - 1, 0] if t >= 1 else 0.0) for t in range(T)]
    np.testing.assert_array_equal(y, expect)
    xcorr = torch.nn.functional.conv1d(torch.from_numpy(np.pad(v[:, 0], (0, 1)))[None, None],
                                       torch.from_numpy(h[:2, 0])[None, None])[0, 0, :T].numpy()
    assert not np.array_equal(y, xcorr)


# ----------------------------------------------------------------------------- float conv

float_conv_shapes = st.tuples(st.integers(0, 2), st.integers(1, 9), st.integers(1, 4), st.integers(0, 2**31 - 1))


@pytest.mark.parametrize("causal", [True, False])
@given(shape=float_conv_shapes)
def test_float64_direct_equals_fft(causal, shape):
    nb, T, C, seed = shape
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((3,) * nb + (T, C))
    h = rng.standard_normal((T, C))
    d = ops.conv(v, h, causal=causal, method="direct")
    f = ops.conv(v, h, causal=causal, method="fft")
    assert d.shape == v.shape and f.shape == v.shape and f.dtype == np.float64
    np.testing.assert_allclose(f, d, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
@given(case=conv_case())
def test_float_direct_equals_exact_on_small_integers(causal, case):
    # integers keep every partial sum exact in float64
    v, h = case
    vi = np.vectorize(lambda z: float(round(4 * z)), otypes=[float])(v)
    hi = np.vectorize(lambda z: float(round(4 * z)), otypes=[float])(h)
    exact = ops.conv(vi.astype(object), hi.astype(object), causal=causal)
    np.testing.assert_array_equal(ops.conv(vi, hi, causal=causal), np.array(exact, dtype=float))


@pytest.mark.parametrize("method", ["direct", "fft"])
@pytest.mark.parametrize("causal", [True, False])
@given(shape=float_conv_shapes)
def test_numpy_and_torch_float64_agree(method, causal, shape):
    nb, T, C, seed = shape
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((2,) * nb + (T, C))
    h = rng.standard_normal((T, C))
    a = ops.conv(v, h, causal=causal, method=method)
    b = ops.conv(torch.from_numpy(v), torch.from_numpy(h), causal=causal, method=method)
    assert isinstance(b, torch.Tensor) and b.dtype == torch.float64
    np.testing.assert_allclose(b.numpy(), a, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fft_keeps_the_input_dtype(dtype):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((2, 6, 3)).astype(dtype)
    h = rng.standard_normal((6, 3)).astype(dtype)
    for causal in (True, False):
        assert ops.conv(v, h, causal=causal, method="fft").dtype == dtype
        assert ops.conv(v, h, causal=causal).dtype == dtype


def test_torch_mm_hadamard_add_transpose_match_numpy():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, 4, 5))
    Y = rng.standard_normal((3, 5, 2))
    Z = rng.standard_normal((3, 4, 5))
    tX, tY, tZ = map(torch.from_numpy, (X, Y, Z))
    np.testing.assert_allclose(ops.mm(tX, tY).numpy(), ops.mm(X, Y), rtol=1e-13)
    np.testing.assert_array_equal(ops.hadamard(tX, tZ).numpy(), ops.hadamard(X, Z))
    np.testing.assert_array_equal(ops.add(tX, tZ).numpy(), ops.add(X, Z))
    np.testing.assert_array_equal(ops.transpose(tX).numpy(), ops.transpose(X))
    assert ops.transpose(X).shape == (3, 5, 4)


# ----------------------------------------------------------------------------- exact mm / hadamard / add

@st.composite
def mm_case(draw):
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return draw(exact_matrix(m, k)), draw(exact_matrix(k, n))


@given(case=mm_case())
def test_exact_mm_equals_dense_object_product(case):
    X, Y = case
    got = ops.mm(X, Y)
    assert got.dtype == object and got.shape == (X.shape[0], Y.shape[1])
    assert as_fractions(got) == as_fractions(np.dot(X, Y))


@given(data=st.data())
def test_exact_hadamard_and_add_equal_dense(data):
    m, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    X, Y = data.draw(exact_matrix(m, n)), data.draw(exact_matrix(m, n))
    assert as_fractions(ops.hadamard(X, Y)) == as_fractions(X * Y)
    assert as_fractions(ops.add(X, Y)) == as_fractions(X + Y)
    row = data.draw(exact_matrix(1, n))  # broadcasting
    assert as_fractions(ops.hadamard(X, row)) == as_fractions(X * row)
    assert as_fractions(ops.add(X, row)) == as_fractions(X + row)


def test_exact_mm_shape_errors():
    X = ops.zeros_like_object((2, 3))
    with pytest.raises(ValueError, match="shape mismatch"):
        ops.mm(X, ops.zeros_like_object((2, 3)))
    with pytest.raises(ValueError, match="2-D"):
        ops.mm(ops.zeros_like_object((2, 2, 3)), ops.zeros_like_object((3, 1)))


def test_exact_ops_work_on_sympy_symbols():
    import sympy

    a, b, c = sympy.symbols("a b c")
    X = np.array([[a, 0], [1, b]], dtype=object)
    Y = np.array([[c], [a]], dtype=object)
    got = ops.mm(X, Y)
    assert sympy.expand(got[0, 0] - a * c) == 0
    assert sympy.expand(got[1, 0] - (c + a * b)) == 0


@given(M=exact_matrix(4, 5))
def test_nonzero_pattern_is_not_equal_zero_for_exact_scalars(M):
    # the int-0 object shortcut and the truth values agree with != 0 on Fractions and ints,
    # whatever mix of the int 0 object, Fraction(0) and other zeros the array holds
    M = M.copy()
    M[0, 0] = 0
    M[1, ::2] = 3 - 3  # a computed int 0 (the same object in CPython)
    np.testing.assert_array_equal(ops.nonzero_pattern(M), np.not_equal(M, 0))
    np.testing.assert_array_equal(ops.nonzero_pattern(M.T), np.not_equal(M.T, 0))  # not contiguous


def test_nonzero_pattern_of_polynomials_relations_and_unknown_types():
    import sympy

    R, a = sympy.ring("a", sympy.QQ)
    x = sympy.Symbol("x")

    class Opaque:  # no truth test: counted as nonzero (more work, never less)
        pass

    M = np.array([R(0), a, a - a, sympy.Integer(0), x, sympy.Eq(x, 1), Opaque(), 0.0], dtype=object)
    np.testing.assert_array_equal(ops.nonzero_pattern(M), [False, True, False, False, True, True, True, False])
    assert ops.nonzero_pattern(np.array(Fraction(0), dtype=object)).shape == ()
    assert ops.nonzero_pattern(np.zeros((0, 3), dtype=object)).shape == (0, 3)


def test_addresses_are_the_entries_identities():
    f = Fraction(1, 3)
    M = np.array([[0, f], [f, 2]], dtype=object)
    np.testing.assert_array_equal(ops.addresses(M) == id(f), [[False, True], [True, False]])
    np.testing.assert_array_equal(ops.addresses(M.T) == id(0), [[True, False], [False, False]])


def test_nonzero_pattern_and_zeros():
    M = np.array([[0, Fraction(1, 3)], [Fraction(0), -2]], dtype=object)
    np.testing.assert_array_equal(ops.nonzero_pattern(M), [[False, True], [False, True]])
    Z = ops.zeros_like_object((2, 3))
    assert Z.dtype == object and Z.shape == (2, 3) and all(z == 0 for z in Z.flat)
    assert ops.is_object(Z) and not ops.is_object(np.zeros(2)) and ops.is_torch(torch.zeros(1))


# ----------------------------------------------------------------------------- the FLINT product of rationals

#: binary fractions as a float's value is one (learned weights read exactly): an odd or even integer
#: numerator of up to 53 bits over 2^e, negative, zero (the int 0 and Fraction(0)) and one included
binary_q = st.one_of(
    st.sampled_from([0, Fraction(0), Fraction(1), Fraction(-1), 1, -3]),
    st.builds(lambda a, e: Fraction(a, 2 ** e), st.integers(-(2 ** 53), 2 ** 53), st.integers(0, 80)),
)


@st.composite
def binary_matrix(draw, rows, cols):
    a = np.empty((rows, cols), dtype=object)
    for idx in np.ndindex(rows, cols):
        a[idx] = draw(binary_q)
    return a


@st.composite
def rational_mm_case(draw):
    m, k, n = draw(st.integers(0, 5)), draw(st.integers(0, 5)), draw(st.integers(0, 5))
    return draw(binary_matrix(m, k)), draw(binary_matrix(k, n))


def _fraction_path(X, Y):
    """The entry-by-entry exact product (mm's column loop on Fractions, no FLINT)."""
    return ops._mm_columns(X, ops.nonzero_pattern(X), Y.shape[1], ops._dense_columns(Y, ops.nonzero_pattern(Y)))


def _as(kind, A):
    import flint
    import gmpy2

    f = {"mpq": lambda x: gmpy2.mpq(x.numerator, x.denominator),
         "fmpq": lambda x: flint.fmpq(x.numerator, x.denominator)}[kind]
    out = np.empty(A.shape, dtype=object)
    for idx in np.ndindex(*A.shape):
        out[idx] = f(A[idx]) if isinstance(A[idx], Fraction) else A[idx]
    return out


@given(case=rational_mm_case())
def test_flint_product_of_rationals_equals_the_fraction_path(case):
    """ops.mm_rational (rows and columns cleared of denominators, one fmpz_mat product) is the same exact
    product as the Fraction path, entry for entry, for Fraction, gmpy2 mpq and FLINT fmpq entries; zeros
    come back as the int 0, the other entries in the operands' type."""
    import flint
    import gmpy2

    X, Y = case
    want = _fraction_path(X, Y)
    for kind, (A, B) in {"fraction": (X, Y), "mpq": (_as("mpq", X), Y), "fmpq": (_as("fmpq", X), _as("fmpq", Y))}.items():
        got = ops.mm_rational(A, B)
        assert got is not None and got.shape == want.shape and got.dtype == object
        assert [[Fraction(int(x.p), int(x.q)) if isinstance(x, flint.fmpq) else Fraction(x) for x in row]
                for row in got.tolist()] == as_fractions(want)
        operands = {type(v) for v in [*A.flat, *B.flat]}
        for x in got.flat:
            if x == 0:
                assert id(x) == id(0)  # the structural zero object
            elif flint.fmpq in operands:
                assert isinstance(x, flint.fmpq)
            elif type(gmpy2.mpq(1)) in operands:
                assert isinstance(x, type(gmpy2.mpq(1)))
            elif Fraction in operands:
                assert isinstance(x, Fraction)
            else:
                assert type(x) is int


def test_flint_product_declines_what_is_not_only_rationals():
    import flint
    import sympy

    X = np.array([[Fraction(1, 2), 3]], dtype=object)
    assert ops.mm_rational(X, np.array([[sympy.Symbol("a")], [1]], dtype=object)) is None
    assert ops.mm_rational(X, np.array([[0.5], [1]], dtype=object)) is None  # a float: not exact
    assert ops.mm_rational(X, np.array([[True], [1]], dtype=object)) is None
    assert ops.mm_rational(X, np.array([[flint.fmpq(1, 3)], [1]], dtype=object)) is None  # FLINT's and Fraction mixed


def test_mm_takes_the_flint_product_from_its_size_on(monkeypatch):
    rng = np.random.default_rng(0)
    X = np.array([[Fraction(int(a), 2 ** int(e)) for a, e in zip(r, rng.integers(0, 60, 20))]
                  for r in rng.integers(-2 ** 40, 2 ** 40, (16, 20))], dtype=object)
    Y = np.array([[Fraction(int(a), 1024) for a in r] for r in rng.integers(-5, 5, (20, 16))], dtype=object)
    assert X.shape[0] * X.shape[1] * Y.shape[1] >= ops.RATIONAL_MM_MIN
    calls = []
    real = ops.mm_rational
    monkeypatch.setattr(ops, "mm_rational", lambda A, B: calls.append(1) or real(A, B))
    got = ops.mm(X, Y)
    assert calls and as_fractions(got) == as_fractions(_fraction_path(X, Y))
    calls.clear()
    ops.mm(X[:2, :2], Y[:2, :2])  # small: the column loop
    assert not calls


@st.composite
def rational_conv_case(draw):
    T, C = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    return draw(binary_matrix(T, C)), draw(binary_matrix(T, C))


@pytest.mark.parametrize("causal", [True, False])
@given(case=rational_conv_case())
def test_flint_convolution_of_rationals_equals_the_definition(causal, case):
    """ops.conv_rational (each channel one FLINT integer-polynomial product) is the exact convolution, causal
    and circular, for Fraction and gmpy2 mpq entries: the definition and constructions.conv's own exact
    convolution, entry for entry; zeros the int 0."""
    from constructions.conv import _conv_exact

    v, h = case
    want = conv_by_definition(v, h, causal)
    assert as_fractions(_conv_exact(v, h, causal)) == want
    for A, B in ((v, h), (_as("mpq", v), h)):
        got = ops.conv_rational(A, B, causal)
        assert got is not None and as_fractions(got) == want
        assert all(id(x) == id(0) for x in got.flat if x == 0)


def test_ops_conv_takes_the_flint_convolution_for_dense_rational_filters(monkeypatch):
    """ops.conv: a dense rational filter (and outputs mostly wanted) through conv_rational, the outputs not
    wanted 0 as constructions.conv leaves them; a sparse filter, 'same' or a symbol through constructions.conv."""
    import sympy

    from constructions import conv as C

    rng = np.random.default_rng(1)
    T, Ch = 16, 20
    v = np.array([[Fraction(int(a), 2 ** int(e)) for a, e in zip(r, rng.integers(0, 30, Ch))]
                  for r in rng.integers(-2 ** 30, 2 ** 30, (T, Ch))], dtype=object)
    h = np.array([[Fraction(int(a), 64) for a in r] for r in rng.integers(1, 9, (T, Ch))], dtype=object)
    need = np.ones((T, Ch), dtype=bool)
    need[3, 2] = need[7, 11] = False
    calls = []
    real = ops.conv_rational
    monkeypatch.setattr(ops, "conv_rational", lambda *a: calls.append(1) or real(*a))
    for causal in (True, False):
        got = ops.conv(v, h, causal=causal, need=need)
        assert calls and as_fractions(got) == as_fractions(C.conv(v, h, causal=causal, need=need))
        assert got[3, 2] == 0 and got[7, 11] == 0
        calls.clear()
    sparse = ops.zeros_like_object((T, Ch))
    sparse[0, :] = h[0, :]
    ops.conv(v, sparse, causal=True)
    ops.conv(v, h, causal=False, same=True)
    assert not calls
    v2 = v.copy()
    v2[0, 0] = sympy.Symbol("a")
    got = ops.conv(v2, h, causal=True)  # declined (a symbol): the reference's result
    assert calls and sympy.expand(got[1, 0] - (h[1, 0] * v2[0, 0] + h[0, 0] * v2[1, 0])) == 0


def test_flint_product_sees_a_weight_changed_in_place():
    """mm_rational keeps a right operand's cleared form by the array's id: an entry changed in place since
    is read again (the product is of the values the array holds now)."""
    X = np.array([[Fraction(1, 3), 2], [5, Fraction(-1, 2)]], dtype=object)
    Y = np.array([[Fraction(1, 2), 1], [3, Fraction(1, 4)]], dtype=object)
    first = ops.mm_rational(X, Y)
    assert as_fractions(first) == as_fractions(np.dot(X, Y))
    Y[1, 0] = Fraction(7, 8)
    assert as_fractions(ops.mm_rational(X, Y)) == as_fractions(np.dot(X, Y)) != as_fractions(first)
