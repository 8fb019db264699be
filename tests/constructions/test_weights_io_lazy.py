"""The lazy exact form of a weight file's floats (constructions/exact_floats.py) against the eager one
(``weights_io.exact_tensor``, one Fraction per entry): the same values, residues, floats and verdicts."""
from fractions import Fraction

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from constructions.base import to_float_array
from constructions.exact_floats import ExactFloats, differs, equal_exact, is_lazy
from constructions.gd_baseconv import gd_baseconv
from constructions.weights_io import (MAX_ENTRIES, WeightFileError, exact_tensor, lazy_tensor, load, same_layer,
                                      save)
from verify.prover.modular import float_residues, object_residues, residues
from verify.prover.proof import prove

P61 = 1758613800527271587  # the refutation's 61-bit prime (verify/prover/refute.py)
PRIMES = (2_147_483_647, P61, 1_000_000_007)


def awkward_floats(rng, n: int, dtype) -> np.ndarray:
    """Random floats of ``dtype`` with the hard cases: zeros of both signs, subnormals, the largest and
    smallest normals, huge and tiny exponents, integers, halves."""
    fi = np.finfo(dtype)
    special = np.array([0.0, -0.0, fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
                        fi.smallest_subnormal * 3, fi.max, -fi.max, fi.eps, 1.0, -1.0, 0.5, 3.0, 1e-3],
                       dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        bulk = (rng.standard_normal(n) * np.exp2(rng.integers(fi.minexp - fi.nmant, fi.maxexp - 1, n))).astype(dtype)
    bulk = bulk[np.isfinite(bulk)]
    return np.concatenate([special.astype(dtype), bulk])


def eager(x: np.ndarray) -> np.ndarray:
    return exact_tensor(x, "t", "test")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_lazy_values_residues_and_floats_equal_the_eager_ones(dtype):
    rng = np.random.default_rng(7)
    x = awkward_floats(rng, 3000, dtype).reshape(-1, 5)
    L, E = ExactFloats(x), eager(x)
    M = L.materialise()
    assert M.dtype == object and M.shape == E.shape
    assert all(type(a) is type(b) and a == b for a, b in zip(M.ravel().tolist(), E.ravel().tolist()))
    assert all((type(z) is int and z == 0) or type(z) is Fraction for z in M.ravel().tolist())
    assert np.array_equal(np.asarray(L, dtype=object) == E, np.ones(E.shape, dtype=bool))
    for p in PRIMES:
        assert np.array_equal(residues(L, p), residues(E, p))
        assert np.array_equal(L.residues(p, float_residues, object_residues), residues(E, p))
        assert residues(L, p).tolist() == [[q.numerator % p * pow(q.denominator, -1, p) % p for q in map(Fraction, r)]
                                           for r in E.tolist()]
    for dt in (np.float16, np.float32, np.float64):
        with np.errstate(over="ignore"):
            assert np.array_equal(L.to_float(dt), to_float_array(E, dt), equal_nan=True)
            assert np.array_equal(to_float_array(L, dt), to_float_array(E, dt))
    assert np.array_equal(L.nonzero(), E != 0)
    # selected entries: only those formed, the same values
    assert L[3, 2] == E[3, 2] and list(L[5]) == list(E[5]) and list(L[:, 1]) == list(E[:, 1])
    assert L[-1, -1] == E[-1, -1]
    with pytest.raises(IndexError):
        L[10**6, 0]
    assert L.swapaxes(0, 1).tolist() == E.T.tolist() and L.T.tolist() == E.T.tolist()
    import pickle

    back = pickle.loads(pickle.dumps(L))  # a proof's child sends results back pickled
    assert is_lazy(back) and back.materialise().tolist() == E.tolist()


def test_mpq_materialisation_is_the_same_values():
    rng = np.random.default_rng(3)
    x = awkward_floats(rng, 500, np.float64)
    L = ExactFloats(x, [1, 9], [Fraction(1, 3), Fraction(-7, 10)]) if x[1] and x[9] else ExactFloats(x)
    for a, b in zip(L.materialise("mpq").tolist(), L.materialise().tolist()):
        assert (type(a) is int and a == 0 and b == 0) or Fraction(int(a.numerator), int(a.denominator)) == b


def test_declared_rationals_override_their_entries_only():
    x = np.array([[0.5, 1 / 3, 0.0], [0.1, -2.0, 1e-300]])
    L = ExactFloats(x, [1, 3], [Fraction(1, 3), Fraction(1, 10)])
    E = eager(x)
    E[0, 1], E[1, 0] = Fraction(1, 3), Fraction(1, 10)
    assert L.materialise().tolist() == E.tolist()
    assert L[0, 1] == Fraction(1, 3) and L[1, 0] == Fraction(1, 10) and L[0, 0] == Fraction(1, 2)
    assert L[:, :2].tolist() == E[:, :2].tolist() and L[1].tolist() == E[1].tolist()
    for p in PRIMES:
        assert np.array_equal(residues(L, p), residues(E, p))
    assert np.array_equal(L.to_float(np.float64), x)  # float64(1/3) is the stored float: no change
    assert L.to_float(np.float32)[0, 1] == np.float32(1 / 3)
    assert not differs(L, E).any() and differs(L, eager(x)).tolist() == [[False, True, False], [True, False, False]]
    with pytest.raises(ValueError):
        ExactFloats(x, [2], [Fraction(1)])  # a declared rational in place of a stored zero
    with pytest.raises(ValueError):
        ExactFloats(np.array([1.0, np.inf]))
    with pytest.raises(TypeError):
        L[0, 0] = 1


def test_equality_and_differs_are_exact():
    rng = np.random.default_rng(11)
    x = awkward_floats(rng, 400, np.float32)
    a, b = ExactFloats(x), ExactFloats(x.astype(np.float64))  # the same values in two widths
    assert equal_exact(a, b) and not differs(a, eager(x.astype(np.float64))).any()
    y = x.copy()
    y[10] = np.nextafter(y[10], np.float32(np.inf))  # 1.0 -> 1 + 2^-23
    assert not equal_exact(a, ExactFloats(y))
    assert differs(a, eager(y)).nonzero()[0].tolist() == [10]
    third = np.full(3, 1 / 3)
    w = np.array([Fraction(1, 3)] * 3, dtype=object)  # 1/3 is not its float: equal floats, unequal values
    assert differs(ExactFloats(third), w).all()
    assert not differs(ExactFloats(third, [0, 1, 2], [Fraction(1, 3)] * 3), w).any()
    assert (ExactFloats(np.array([0.0, -0.0, 2.0])) == 0).tolist() == [True, True, False]


def test_load_gives_lazy_layers_with_the_eager_values(tmp_path):
    con = gd_baseconv(4, 2, eta=Fraction(1, 10))  # 1/10: declared rationals that are not their floats
    p = save(tmp_path / "w.safetensors", con, 2)
    lw = load(p)
    assert lw.entries_from_exact > 0
    for got, want in zip(lw.layers, con.layers(2)):
        assert same_layer(got, want)
        for name, A in got.arrays().items():
            assert is_lazy(A)
            W = np.asarray(want.arrays()[name].toarray() if hasattr(want.arrays()[name], "toarray")
                           else want.arrays()[name], dtype=object)
            assert A.materialise().tolist() == W.tolist()
    assert prove(con, sections=_sections(lw, con)).ok


def _sections(lw, con):
    from constructions.weights_io import split_sections

    secs, _ = split_sections(con, lw.layers)
    return {"prologue": secs["prologue"], "body": secs["bodies"][0], "epilogue": secs["epilogue"]}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_tampered_entry_still_fails(tmp_path, dtype):
    con = gd_baseconv(4, 2)
    p = save(tmp_path / "w.safetensors", con, 1)
    tensors = {k: v.astype(dtype) for k, v in load_file(str(p)).items()}
    with safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
    W = tensors["layers.0.W_out"]
    i, j = (int(t[0]) for t in np.nonzero(W))
    W[i, j] = np.nextafter(W[i, j], dtype(np.inf))  # one ulp: the smallest change a float can make
    save_file(tensors, str(p), metadata=meta)
    lw = load(p)
    assert is_lazy(lw.layers[0].W_out) and lw.layers[0].W_out[i, j] == Fraction(float(W[i, j]))
    r = prove(con, sections=_sections(lw, con))
    assert not r.ok and r.failure.section == "body"


def test_lazy_tensor_refuses_what_exact_tensor_refuses():
    with pytest.raises(WeightFileError, match="bool"):
        lazy_tensor(np.array([True]), "m", "f")
    with pytest.raises(WeightFileError, match="non-finite"):
        lazy_tensor(np.array([np.nan]), "m", "f")
    assert lazy_tensor(np.array([3, -2], dtype=np.int32), "i", "f").tolist() == [3, -2]


def test_entry_bound_is_checked_before_any_tensor_is_read(tmp_path, monkeypatch):
    import constructions.weights_io as W

    p = save(tmp_path / "w.safetensors", gd_baseconv(4, 2), 1)
    n = sum(v.size for v in load_file(str(p)).values())
    monkeypatch.setattr(W, "MAX_ENTRIES", n - 1)
    with pytest.raises(WeightFileError, match=f"{n} entries, above the limit {n - 1}"):
        load(p)
    monkeypatch.setattr(W, "MAX_ENTRIES", n)
    assert len(load(p).layers) == 4
    assert MAX_ENTRIES > 20_182_554  # the 512x128 fine-tuned gd-baseconv file (bench_learned_targets.py)


def test_standing_in_all_at_once_is_declared_stands_in_entry_by_entry():
    from constructions.weights_io import _standing_in, declared_stands_in

    rng = np.random.default_rng(5)
    qs = [Fraction(1, 3), Fraction(1, 10), Fraction(0), Fraction(10) ** 400, Fraction(1, 10 ** 400), Fraction(-5, 4),
          Fraction(2) ** -1074, Fraction(3, 2) ** 50] + [Fraction(int(rng.integers(-99, 99)), int(rng.integers(1, 50)))
                                                          for _ in range(40)]
    for dtype in (np.float64, np.float32):
        t = np.array([float(q) if abs(q) < 10 ** 300 else 1.0 for q in qs], dtype=dtype).reshape(-1, 4)
        t.reshape(-1)[::7] = np.nextafter(t.reshape(-1)[::7], 2.0)  # some stored values off by an ulp
        listed = [(np.unravel_index(j, t.shape), q) for j, q in enumerate(qs)]
        pos, vals = _standing_in(listed, t)
        want = [j for j, (ix, q) in enumerate(listed) if declared_stands_in(q, t, tuple(int(x) for x in ix))]
        assert pos.tolist() == want and vals == [qs[j] for j in want]
        assert (dtype == np.float32) == (not want)


def test_the_exact_proof_reads_eager_arrays_the_refutation_may_keep_them_lazy(tmp_path):
    from verify.prover.rings import exact_layer

    con = gd_baseconv(4, 2)
    L = load(save(tmp_path / "w.safetensors", con, 1)).layers[0]
    eager_layer, kept = exact_layer(L), exact_layer(L, lazy=True)
    for name, A in L.arrays().items():
        E = eager_layer.arrays()[name]
        assert isinstance(E, np.ndarray) and E.dtype == object and E.tolist() == A.materialise().tolist()
        assert kept.arrays()[name] is A
    assert isinstance(L.W_in.copy(), np.ndarray)  # a copy is writable: the eager array


def test_own_float_is_never_wrong():
    from constructions.weights_io import _own_float

    rng = np.random.default_rng(9)
    qs = [Fraction(1, 16), Fraction(-3, 2 ** 1074), Fraction(1, 2 ** 1075), Fraction(2 ** 53 + 1, 2), Fraction(1, 3),
          Fraction(2) ** 1023, Fraction(2 ** 53 - 1, 2 ** 60), Fraction(0)]
    qs += [Fraction(float(x)) for x in rng.standard_normal(200) * np.exp2(rng.integers(-1070, 1000, 200))]
    for q in qs:
        try:
            exact = Fraction(float(q)) == q
        except OverflowError:
            exact = False
        assert not _own_float(q) or exact  # sufficient: a True is always right
    assert _own_float(Fraction(1, 16)) and _own_float(Fraction(-3, 2 ** 1074)) and not _own_float(Fraction(1, 3))


@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_lazy_and_eager_layers_get_the_same_verdict(tmp_path, noise):
    from constructions.exact_floats import ExactFloats as EF

    con = gd_baseconv(4, 2)
    p = save(tmp_path / "w.safetensors", con, 1)
    if noise:  # every entry moved a little, as a fine-tuned file's (its metadata then stands in nowhere)
        tensors = load_file(str(p))
        with safe_open(str(p), framework="numpy") as f:
            meta = f.metadata()
        rng = np.random.default_rng(1)
        save_file({k: v + noise * rng.standard_normal(v.shape) for k, v in tensors.items()}, str(p), metadata=meta)
    lw = load(p)
    lazy = _sections(lw, con)
    eager = {sec: [L.map(lambda A: A.materialise() if isinstance(A, EF) else A) for L in Ls]
             for sec, Ls in lazy.items()}
    assert all(not is_lazy(A) for Ls in eager.values() for L in Ls for A in L.arrays().values())
    r_lazy, r_eager = prove(con, sections=lazy), prove(con, sections=eager)
    assert r_lazy.ok == r_eager.ok == (noise == 0)
    if not r_lazy.ok:
        assert (r_lazy.failure.section, r_lazy.failure.layer) == (r_eager.failure.section, r_eager.failure.layer)
