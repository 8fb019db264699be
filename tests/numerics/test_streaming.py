"""Streaming over depth: ``gd_reference_iter``, ``plain_gd_iter``, ``stream_construction`` and the
lockstep ``gd_accuracy`` give, bit for bit, the numbers of the former full-array path (kept here
verbatim as ``legacy_*``), and their memory does not grow with the number of steps."""
import tracemalloc
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from constructions.gd_attention import gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from numerics.backends import Backend
from numerics.problems import sample_ls
from numerics.reference import (
    mpfr_problem,
    prepare_reference,
    from_mpfr_array,
    gd_reference,
    gd_reference_direct,
    gd_reference_iter,
)
from numerics.runner import gd_accuracy, plain_gd, plain_gd_iter, rounded_inputs, stream_construction

# ------------------------------------------------------------ the former full-array path, verbatim


def legacy_finish(iterates, squeeze, return_mp):
    mp = np.empty((len(iterates),) + iterates[0].shape[:2], dtype=object)
    for k, it in enumerate(iterates):
        mp[k] = it[:, :, 0]
    if squeeze:
        mp = mp[:, 0]
    out = from_mpfr_array(mp)
    return (out, mp) if return_mp else out


def legacy_gd_reference(A, b, x0, eta, steps, *, digits=50, lam=0, return_mp=False):
    A, b, x0, squeeze, steps, prec = prepare_reference(A, b, x0, steps, digits)
    B, N, D = A.shape
    with gmpy2.context(precision=prec):
        Am, bm, x, eta_m, lam_m = mpfr_problem(A, b, x0, eta, lam)
        At = Am.transpose(0, 2, 1)
        G = np.matmul(At, Am)
        h = np.matmul(At, bm)
        M = -eta_m * G
        one = gmpy2.mpfr(1)
        eta_v, lam_v = eta_m[:, 0, 0], lam_m[:, 0, 0]
        for i in range(D):
            M[:, i, i] = one - eta_v * (G[:, i, i] + lam_v)
        c = eta_m * h
        iterates = [x]
        for _ in range(steps):
            x = np.matmul(M, x) + c
            iterates.append(x)
    return legacy_finish(iterates, squeeze, return_mp)


def legacy_gd_reference_direct(A, b, x0, eta, steps, *, digits=50, lam=0, return_mp=False):
    A, b, x0, squeeze, steps, prec = prepare_reference(A, b, x0, steps, digits)
    with gmpy2.context(precision=prec):
        Am, bm, x, eta_m, lam_m = mpfr_problem(A, b, x0, eta, lam)
        ridge = any(v != 0 for v in lam_m.ravel())
        At = Am.transpose(0, 2, 1)
        iterates = [x]
        for _ in range(steps):
            g = np.matmul(At, np.matmul(Am, x) - bm)
            if ridge:
                g = g + lam_m * x
            x = x - eta_m * g
            iterates.append(x)
    return legacy_finish(iterates, squeeze, return_mp)


def legacy_run_construction(con, v, k, backend, *, conv_method="direct"):
    secs = con.sections(k)
    xs, bad = [], []

    def on_layer(i, S):
        if not bad and not backend.isfinite_all(S):
            bad.append(i)

    def on_step(j, S):
        xs.append(backend.to_numpy64(con.readout(S)["x"]))
        return bool(bad)

    with np.errstate(all="ignore"):
        S, done = con.run(v, k, sections=secs, state=backend.asarray(con.input_state(v)),
                          cast=backend.cast_layer, conv_method=conv_method, on_layer=on_layer, on_step=on_step)
    pred = None if bad else backend.to_numpy64(con.readout(S)["prediction"])
    x = np.stack(xs)
    if x.shape[0] < k + 1:
        x = np.concatenate([x, np.full((k + 1 - x.shape[0],) + x.shape[1:], np.nan)])
    return x, pred, (bad[0] if bad else None), done


def legacy_plain_gd(A, b, x0, eta, k, backend, lam=0.0):
    At, bt, x = backend.asarray(A), backend.asarray(b), backend.asarray(x0)
    etat = backend.asarray(np.float64(eta))
    lamt = backend.asarray(np.float64(lam))
    out = [backend.to_numpy64(x)]
    ein = backend.einsum
    with np.errstate(all="ignore"):
        for _ in range(k):
            r = ein("bij,bj->bi", At, x) - bt
            g = ein("bij,bi->bj", At, r)
            if lam:
                g = g + lamt * x
            x = x - etat * g
            out.append(backend.to_numpy64(x))
    return np.stack(out)


def legacy_gd_accuracy(con, k, v, backend, eta, lam=0, *, digits=50, conv_method="direct"):
    from numerics.reference import lstsq_solution

    ref = legacy_gd_reference(v["A"], v["b"], v["x"], eta, k, digits=digits, lam=lam)
    xstar = lstsq_solution(v["A"], v["b"], lam=lam)
    x, pred, bad, _ = legacy_run_construction(con, v, k, backend, conv_method=conv_method)
    plain = legacy_plain_gd(v["A"], v["b"], v["x"], float(eta), k, backend, lam=float(lam))

    def mse(u, w):
        return float(np.mean((u - w) ** 2))

    pred_ref = np.einsum("bd,bd->b", v["q"], ref[-1])
    summary = {"dtype": backend.dtype, "backend": backend.name, "conv": conv_method, "steps": k,
               "first_nonfinite_layer": bad,
               "prediction_mse_vs_exact": None if pred is None else mse(pred, pred_ref)}
    rows = []
    for j in range(1, k + 1):
        m_c, m_p = mse(x[j], ref[j]), mse(plain[j], ref[j])
        rows.append({"dtype": backend.dtype, "step": j, "depth": con.depth(j), "mse_vs_exact_gd": m_c,
                     "mse_vs_solution": mse(x[j], xstar), "plain_gd_mse_vs_exact_gd": m_p,
                     "construction_overhead": (m_c / m_p) if m_p > 0 else None})
    return summary, rows


# ------------------------------------------------------------ helpers


def problems(B=5, n=6, d=2, seed=0, dtype="float32", scale=1.0):
    be = Backend("numpy", dtype)
    P = sample_ls(B, n, d, kappa=5.0, seed=seed)
    q = np.random.default_rng(seed + 1).standard_normal((B, d))
    [(be, v)] = rounded_inputs(P.A * scale, P.b * scale, P.x0, q, [be])
    return be, v


def same_bits(a, b) -> bool:
    """Equal as float64 bit patterns (NaN == NaN, -0.0 != 0.0)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def same_number(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return same_bits(np.float64(a), np.float64(b))


def assert_same_report(new, old):
    (s_new, rows_new), (s_old, rows_old) = new, old
    for key, val in s_old.items():
        if key == "prediction_mse_vs_exact":
            assert same_number(s_new[key], val), (s_new[key], val)
        else:
            assert s_new[key] == val, key
    assert set(s_new) - set(s_old) == {"seconds_run", "seconds_reference"}
    assert len(rows_new) == len(rows_old)
    for rn, ro in zip(rows_new, rows_old):
        assert rn.keys() == ro.keys()
        for key in ro:
            if isinstance(ro[key], float) or ro[key] is None:
                assert same_number(rn[key], ro[key]), (ro["step"], key, rn[key], ro[key])
            else:
                assert rn[key] == ro[key]


# ------------------------------------------------------------ bit-for-bit against the former path


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("lam", [0, Fraction(1, 4)])
def test_reference_stream_equals_full_array_path(direct, lam):
    _, v = problems(B=4, n=6, d=2, dtype="float64")
    legacy = legacy_gd_reference_direct if direct else legacy_gd_reference
    new = gd_reference_direct if direct else gd_reference
    old_f, old_mp = legacy(v["A"], v["b"], v["x"], Fraction(1, 16), 40, lam=lam, return_mp=True)
    f, mp = new(v["A"], v["b"], v["x"], Fraction(1, 16), 40, lam=lam, return_mp=True)
    assert same_bits(f, old_f) and mp.shape == old_mp.shape == (41, 4, 2)
    assert all(x == y and x.precision == y.precision for x, y in zip(mp.flat, old_mp.flat))
    steps = list(gd_reference_iter(v["A"], v["b"], v["x"], Fraction(1, 16), 40, lam=lam, direct=direct))
    assert len(steps) == 41 and same_bits(np.stack(steps), old_f)


def test_reference_stream_unbatched_and_zero_steps():
    _, v = problems(B=1, n=6, d=2, dtype="float64")
    A, b, x0 = v["A"][0], v["b"][0], v["x"][0]
    assert same_bits(gd_reference(A, b, x0, 0.1, 40), legacy_gd_reference(A, b, x0, 0.1, 40))
    f, mp = gd_reference(A, b, None, 0.1, 7, return_mp=True)
    of, omp = legacy_gd_reference(A, b, None, 0.1, 7, return_mp=True)
    assert same_bits(f, of) and f.shape == (8, 2) and mp.shape == omp.shape == (8, 2)
    assert same_bits(gd_reference(A, b, x0, 0.1, 0), legacy_gd_reference(A, b, x0, 0.1, 0))
    (x0f, x0m), = list(gd_reference_iter(A, b, x0, 0.1, 0, return_mp=True))
    assert same_bits(x0f, x0) and x0m.shape == (2,)


@pytest.mark.parametrize("case", ["float32", "float64-ridge-lsa", "float16-overflow", "causal-fft", "k0"])
def test_gd_accuracy_equals_full_array_path(case):
    eta, lam, conv, k = Fraction(1, 16), Fraction(0), "direct", 40
    if case == "float32":
        be, v = problems(dtype="float32")
        con = gd_baseconv(6, 2)
    elif case == "float64-ridge-lsa":
        be, v = problems(dtype="float64", seed=3)
        lam = Fraction(1, 4)
        con = gd_lsa(6, 2, eta=eta, lam=lam)
    elif case == "float16-overflow":  # stops at a non-finite value: the rest compares NaN
        be, v = problems(dtype="float16", seed=1)
        eta = Fraction(8)
        con = gd_baseconv(6, 2, eta=eta)
    elif case == "causal-fft":
        be, v = problems(dtype="float32", seed=2)
        con, conv = gd_baseconv_causal(6, 2), "fft"
    else:
        be, v = problems(dtype="float32")
        con, k = gd_baseconv(6, 2), 0
    with np.errstate(all="ignore"):
        new = gd_accuracy(con, k, v, be, eta, lam, conv_method=conv)
        old = legacy_gd_accuracy(con, k, v, be, eta, lam, conv_method=conv)
    assert_same_report(new, old)
    if case == "float16-overflow":
        assert new[0]["first_nonfinite_layer"] is not None and np.isnan(new[1][-1]["mse_vs_exact_gd"])


def test_plain_gd_and_stream_construction_equal_full_arrays():
    be, v = problems(dtype="float16", seed=1)
    con = gd_baseconv(6, 2, eta=8)
    old = legacy_plain_gd(v["A"], v["b"], v["x"], 8.0, 30, be)
    assert same_bits(np.stack(list(plain_gd_iter(v["A"], v["b"], v["x"], 8.0, 30, be))), old)
    assert same_bits(plain_gd(v["A"], v["b"], v["x"], 8.0, 30, be), old) and np.isnan(old[-1]).all()
    seen = []
    res = stream_construction(con, v, 30, be, lambda j, x: seen.append((j, x)))
    x, pred, bad, done = legacy_run_construction(con, v, 30, be)
    assert bad is not None and res.first_nonfinite_layer == bad and res.layers_run == done and pred is None
    assert res.steps_run == len(seen) < 31 and [j for j, _ in seen] == list(range(len(seen)))
    assert same_bits(np.stack([x for _, x in seen]), x[:len(seen)]) and np.isnan(x[len(seen):]).all()


# ------------------------------------------------------------ streaming semantics


def test_reference_iter_leaves_the_callers_context_alone():
    _, v = problems(B=3, n=6, d=2, dtype="float64")
    expect = gd_reference(v["A"], v["b"], v["x"], Fraction(1, 16), 12)
    with gmpy2.context(precision=30):
        it = gd_reference_iter(v["A"], v["b"], v["x"], Fraction(1, 16), 12)
        got, caller = [], 30
        for j, x in enumerate(it):
            assert gmpy2.get_context().precision == caller  # the caller's context between yields
            got.append(x)
            if j == 5:
                caller = gmpy2.get_context().precision = 20  # changing it does not affect the iterates
    assert same_bits(np.stack(got), expect)


def test_reference_iter_validates_when_called():
    _, v = problems(B=2, n=6, d=2, dtype="float64")
    with pytest.raises(ValueError, match="steps"):
        gd_reference_iter(v["A"], v["b"], v["x"], 0.1, -1)
    with pytest.raises(ValueError, match="x0"):
        gd_reference_iter(v["A"], v["b"], v["x"][:, :1], 0.1, 3)


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_flat_in_steps():
    """The former path kept 64 x 4 mpfr iterates (~28 KB) and three float arrays per step; the
    stream keeps one row of a few floats (< 1.5 KB) per step."""
    be, v = problems(B=64, n=6, d=4, dtype="float32")
    con = gd_baseconv(6, 4)
    _peak(lambda: gd_accuracy(con, 2, v, be, Fraction(1, 16)))  # warm caches and imports
    lo, hi = 20, 320
    p_lo = _peak(lambda: gd_accuracy(con, lo, v, be, Fraction(1, 16)))
    p_hi = _peak(lambda: gd_accuracy(con, hi, v, be, Fraction(1, 16)))
    assert (p_hi - p_lo) / (hi - lo) < 1500, (p_lo, p_hi)
    it_lo = _peak(lambda: sum(1 for _ in gd_reference_iter(v["A"], v["b"], v["x"], 0.0625, lo)))
    it_hi = _peak(lambda: sum(1 for _ in gd_reference_iter(v["A"], v["b"], v["x"], 0.0625, hi)))
    assert it_hi - it_lo < 20_000, (it_lo, it_hi)


# ------------------------------------------------------------ torch: the run loop's planned execution


def torch_problems(dtype, *, scale=1.0, B=6, n=6, d=2, seed=1):
    be = Backend("torch", dtype)
    P = sample_ls(B, n, d, kappa=5.0, seed=seed)
    q = np.random.default_rng(seed + 1).standard_normal((B, d))
    v = {"A": be.round_input(P.A * scale), "b": be.round_input(P.b * scale), "x": be.round_input(P.x0),
         "q": be.round_input(q)}
    return be, v


@pytest.mark.parametrize("arch", ["baseconv", "causal", "lsa"])
@pytest.mark.parametrize("dtype,case", [("float32", "finite"), ("float64", "finite"), ("float16", "finite"),
                                        ("float16", "overflow"), ("float16", "huge-input")])
def test_torch_run_loop_equals_the_per_layer_forwards(dtype, arch, case):
    """On torch the run loop runs planned BaseConv layers channel-major and reads the finiteness of
    each layer on the device; the former loop (every layer's forward, its state checked at once:
    ``legacy_run_construction``) gives the same iterates bit for bit, the same first non-finite layer
    and the same layers run.  After a non-finite value, which entries are inf and which NaN may
    differ (a matrix product turns 0 * inf into NaN where the channel-major run skips the zero)."""
    eta = Fraction(4) if case == "overflow" else Fraction(1, 16)  # eta = 4: GD diverges
    be, v = torch_problems(dtype, scale=300.0 if case == "huge-input" else 1.0)
    con = {"baseconv": gd_baseconv, "causal": gd_baseconv_causal, "lsa": gd_lsa}[arch](6, 2, eta=eta)
    k = 12
    seen = []
    with np.errstate(all="ignore"):
        res = stream_construction(con, v, k, be, lambda j, x: seen.append(x))
        x, pred, bad, done = legacy_run_construction(con, v, k, be)
    assert res.first_nonfinite_layer == bad and res.layers_run == done and res.steps_run == len(seen)
    if case == "finite":
        assert bad is None and len(seen) == k + 1 and same_bits(res.prediction, pred)
    else:
        assert bad is not None and res.prediction is None is pred
    got, want = np.stack(seen), x[:len(seen)]
    clean = np.isfinite(want).all(axis=(1, 2))  # the steps before the first non-finite value
    assert clean.sum() >= len(seen) - 1 and same_bits(got[clean], want[clean])
    both = np.isfinite(got) & np.isfinite(want)  # the step holding it: its finite entries
    assert same_bits(got[both], want[both])


def test_torch_run_loop_reports_a_non_finite_input_its_layers_carry():
    """A non-finite value in the input state that the layers carry on untouched (never a new value)
    is reported at the first layer, as the former loop's check of every state did."""
    be, v = torch_problems("float32")
    con = gd_baseconv(6, 2)
    v["A"] = v["A"].copy()
    v["A"][2, 3, 1] = np.inf
    with np.errstate(all="ignore"):
        res = stream_construction(con, v, 3, be, lambda j, x: None)
        _, _, bad, done = legacy_run_construction(con, v, 3, be)
    assert res.first_nonfinite_layer == bad == 0 and res.layers_run == done
