"""verify/nearest.py: the nearest construction of a family to a learned (FAILED) weight file.

Exact constructions are perturbed by ``delta`` in random entries and put through random symmetries of
the model (BaseConv inner-channel permutations, per-channel scalings and sign flips; LSA head permutations, the W3 R / W1 R^-T
gauge and the scale exchanged between a head's two factors): the fitted parameters recover the
construction's (exactly after snapping at delta = 0), the distance is within a factor of 2 of delta,
and the snapped construction is PROVED.  Then the commands: the FAILED line carries the distance, the
JSON a ``nearest`` block, and the file's verdict stays FAILED."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constructions import weights_io
from constructions.catalogue import gd_architectures
from constructions.gd_baseconv import gd_baseconv
from constructions.layers import LSA, LSAHead
from verify import nearest as NR
from verify.comparison.analyses import permute_channels
from verify.construct import main

N, D = 4, 2
SCALES = [Fraction(s) for s in (1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))]
ETAS = [Fraction(j, 64) for j in range(1, 33)]


def _copy(layers):
    cache: dict = {}
    return [cache.setdefault(id(L), L.map(lambda w: np.array(w, dtype=object))) if id(L) not in cache
            else cache[id(L)] for L in layers]


def _run(layers, S):
    for L in layers:
        S = NR.float_layer(L).forward(S)
    return S


def _gd_family(arch, k=1):
    e = gd_architectures()[arch]

    def build(**p):
        c = e.build(N, D, **p)
        return c, c.layers(k)
    return e, build


# ------------------------------------------------------------------ BaseConv: gd-baseconv

def _live_channels(L):
    """Inner channels whose gate, convolution and input factors are all nonzero in the construction."""
    live = []
    for c in range(L.shape[1]):
        g = any(x != 0 for x in L.W_gate[:, c]) or any(x != 0 for x in L.b_gate[:, c])
        h = any(x != 0 for x in L.h[:, c])
        i = any(x != 0 for x in L.W_in[:, c]) or any(x != 0 for x in L.b_in[:, c])
        if g and h and i:
            live.append(c)
    return live


def _baseconv_symmetry(L, draw, permute: bool = True):
    """A random permutation of the inner channels and per-channel rescaling (with sign flips, by powers of
    two) of a BaseConv layer: the same function."""
    L = L.map(lambda w: np.array(w, dtype=object))
    if permute:
        L = permute_channels(L, draw(st.permutations(range(L.shape[1]))))
    for c in range(L.shape[1]):
        s, t, u = (draw(st.sampled_from(SCALES)) for _ in range(3))
        L.W_in[:, c] *= s
        L.b_in[:, c] *= s
        L.h[:, c] *= t
        L.b_conv[:, c] *= s * t
        L.W_gate[:, c] *= u
        L.b_gate[:, c] *= u
        L.W_out[c, :] /= s * t * u
    return L


def _structural_zero_in_live_channel(L, draw):
    """A (array, index) of an entry that is 0 in the construction, in a channel whose factors are live."""
    live = _live_channels(L)
    c = draw(st.sampled_from(live))
    T = L.shape[0]
    name = draw(st.sampled_from(["W_in", "W_gate", "W_out", "h", "b_gate"]))
    if name == "W_out":
        cands = [(c, j) for j in range(L.shape[1]) if L.W_out[c, j] == 0]
    elif name in ("W_in", "W_gate"):
        cands = [(i, c) for i in range(L.shape[1]) if getattr(L, name)[i, c] == 0]
    else:
        cands = [(t, c) for t in range(T) if getattr(L, name)[t, c] == 0]
    if not cands:
        return None
    return name, draw(st.sampled_from(cands))


@settings(max_examples=12, deadline=None)
@given(st.data(), st.sampled_from(ETAS), st.sampled_from([0.0, 1e-4, 1e-3, 1e-2]))
def test_gd_baseconv_fit_recovers_eta_through_symmetries(data, eta, delta):
    e, build = _gd_family("baseconv")
    con, layers = build(eta=eta)
    learned = _copy(layers)
    where = []
    if delta:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(learned) - 1))
            pick = _structural_zero_in_live_channel(learned[i], data.draw)
            if pick is None or (i, *pick) in where:
                continue
            name, idx = pick
            getattr(learned[i], name)[idx] = Fraction(delta) * data.draw(st.sampled_from([1, -1]))
            where.append((i, *pick))
    sym = [_baseconv_symmetry(L, data.draw) for L in learned]
    S = np.random.default_rng(0).standard_normal((3, *con.layout.shape))
    np.testing.assert_allclose(_run(sym, S), _run(learned, S), rtol=1e-12, atol=1e-12)  # a symmetry indeed

    used = {"eta": Fraction(1, 16)}  # the command's parameter, not the file's
    r = NR.nearest(build, used, sym, name=con.name)
    assert not r.skipped and r.snapped_verdict == "PROVED"
    if not where:
        assert r.rational["eta"] == eta and r.distance < 1e-12 and r.spurious == 0
        return
    assert abs(r.fitted["eta"] - float(eta)) <= 4 * delta ** 2 + 1e-12
    assert delta / 2 <= r.distance <= 2 * delta
    assert r.spurious == len(where)
    assert r.to_json()["snapped_verdict"] == "PROVED" and r.to_json()["rational"]["eta"] == str(r.rational["eta"])


@settings(max_examples=8, deadline=None)
@given(st.data(), st.sampled_from(ETAS), st.floats(1e-4, 1e-2))
def test_gd_baseconv_distance_is_at_most_twice_delta_for_any_entry(data, eta, delta):
    """Any entry moved by delta (one the symmetries may partly absorb): at most 2 delta after alignment."""
    e, build = _gd_family("baseconv")
    con, layers = build(eta=eta)
    learned = _copy(layers)
    i = data.draw(st.integers(0, len(learned) - 1))
    name = data.draw(st.sampled_from(["W_in", "W_gate", "W_out", "h", "b_gate", "b_out"]))
    a = getattr(learned[i], name)
    idx = tuple(data.draw(st.integers(0, s - 1)) for s in a.shape)
    a[idx] = a[idx] + Fraction(delta)
    sym = [_baseconv_symmetry(L, data.draw) for L in learned]
    r = NR.nearest(build, {"eta": Fraction(1, 16)}, sym, name=con.name)
    assert r.distance <= 2 * delta
    assert abs(r.fitted["eta"] - float(eta)) <= 2 * delta


# ------------------------------------------------------------------ LSA: gd-compiled-lsa (eta, lam in the weights)

def _lsa_symmetry(L: LSA, draw) -> LSA:
    """Heads permuted; each head's W3 R, W1 R^-T (R a signed, scaled permutation times a unit upper
    triangular matrix: a general invertible gauge, not only a monomial one) and W2 c, W3 / c."""
    import sympy

    heads = list(L.heads)
    order = draw(st.permutations(range(len(heads))))
    out = []
    for h in (heads[i] for i in order):
        n = h.W1.shape[0]
        perm = draw(st.permutations(range(n)))
        M = sympy.zeros(n, n)
        for i, j in enumerate(perm):
            M[i, j] = sympy.Rational(draw(st.sampled_from(SCALES)))
        U = sympy.eye(n)
        for i in range(n):
            for j in range(i + 1, n):
                U[i, j] = sympy.Rational(draw(st.sampled_from([0, 0, 1, Fraction(-1, 2)])))
        Rm = M * U
        R = np.array([[Fraction(int(x.p), int(x.q)) for x in row] for row in Rm.tolist()], dtype=object)
        R_inv_T = np.array([[Fraction(int(x.p), int(x.q)) for x in row] for row in Rm.inv().T.tolist()],
                           dtype=object)
        c = draw(st.sampled_from(SCALES))
        W3 = np.array(h.W3, dtype=object).dot(R) / c
        W1 = np.array(h.W1, dtype=object).dot(R_inv_T)
        out.append(LSAHead(W1, np.array(h.W2, dtype=object) * c, W3))
    return LSA(out, residual=L.residual)


@settings(max_examples=6, deadline=None)
@given(st.data(), st.sampled_from(ETAS[:16]), st.sampled_from(ETAS[:16]), st.sampled_from([0.0, 1e-3]))
def test_compiled_lsa_fit_recovers_eta_and_lam_through_head_symmetries(data, eta, lam, delta):
    e, build = _gd_family("compiled-lsa")
    con, layers = build(eta=eta, lam=lam)
    learned = _copy(layers)
    moved = 0
    if delta:  # a structural zero of some head's W2
        i = data.draw(st.integers(0, len(learned) - 1))
        h = data.draw(st.integers(0, len(learned[i].heads) - 1))
        W2 = learned[i].heads[h].W2
        zeros = [tuple(int(t) for t in z) for z in np.argwhere(np.vectorize(lambda x: x == 0)(W2))]
        W2[data.draw(st.sampled_from(zeros))] = Fraction(delta)
        moved = 1
    sym = [_lsa_symmetry(L, data.draw) for L in learned]
    S = np.random.default_rng(1).standard_normal((2, *con.layout.shape)) / 4
    np.testing.assert_allclose(_run(sym, S), _run(learned, S), rtol=1e-10, atol=1e-12)  # a symmetry indeed

    r = NR.nearest(build, {"eta": Fraction(1, 16), "lam": Fraction(1, 16)}, sym, name=con.name)
    assert not r.skipped and r.snapped_verdict == "PROVED" and not r.kept
    if not moved:
        assert r.rational == {"eta": eta, "lam": lam} and r.distance < 1e-12
    else:
        assert abs(r.fitted["eta"] - float(eta)) < 1e-6 and abs(r.fitted["lam"] - float(lam)) < 1e-6
        assert delta / 2 <= r.distance <= 2 * delta and r.spurious == 1
    assert "lsa" in r.symmetries


def test_gd_lsa_parameters_live_in_the_embedding_and_are_kept():
    e, build = _gd_family("lsa")
    con, layers = build(eta=Fraction(1, 16), lam=Fraction(1, 4))
    r = NR.nearest(build, {"eta": Fraction(1, 16), "lam": Fraction(1, 4)}, _copy(layers), name=con.name)
    assert set(r.kept) == {"eta", "lam"} and all("input embedding" in v for v in r.kept.values())
    assert r.fitted == {} and r.snapped_verdict == "PROVED" and r.distance == 0
    assert "lam = 1/4 kept" in "\n".join(r.lines())


def test_too_large_a_stack_is_skipped_with_the_bound(monkeypatch):
    e, build = _gd_family("baseconv")
    con, layers = build(eta=Fraction(1, 16))
    monkeypatch.setattr(NR, "MAX_ENTRIES", 10)
    r = NR.nearest(build, {"eta": Fraction(1, 16)}, layers, name=con.name)
    assert r.skipped and "MAX_ENTRIES" in r.skipped and "10" in r.skipped
    assert "not fitted" in r.summary() and r.to_json() == {"construction": con.name, "skipped": r.skipped}


def test_a_builder_refusing_a_parameter_keeps_it():
    e, build = _gd_family("baseconv")
    con, layers = build(eta=Fraction(1, 16))

    def picky(**p):
        if p["eta"] != Fraction(1, 16):
            raise ValueError("eta must be 1/16 here")
        return build(**p)
    r = NR.nearest(picky, {"eta": Fraction(1, 16)}, layers, name=con.name)
    assert "eta" in r.kept and "refuses" in r.kept["eta"] and r.snapped_verdict == "PROVED"


# ------------------------------------------------------------------ the commands

def _failed_gd_file(tmp_path, eta=Fraction(1, 8)):
    con = gd_baseconv(6, 2, eta=eta)
    L = con.layers(1)
    L[0].arrays()["W_gate"][0, 1] = Fraction(1, 100)  # a structural zero moved: the file is not the construction
    path = tmp_path / "t.safetensors"
    weights_io.save(path, con, 1)
    return path


def test_gd_weights_failed_line_has_the_distance_and_json_the_nearest_block(tmp_path):
    path = _failed_gd_file(tmp_path)
    out = io.StringIO()
    rc = main(["gd", "--weights", str(path), "--eta", "1/16", "--allow-metadata-mismatch", "--batch", "4",
               "--json", str(tmp_path / "r.json")], out=out)
    text = out.getvalue()
    assert rc == 1
    lines = text.splitlines()
    # the verdict line comes first, with the exact weight distance at the parameters used; the nearest
    # construction's fit after it, ending in its own "verdict:" line (the JSON report's verdict_line)
    failed = next(line for line in lines if line.startswith("proof: FAILED"))
    assert "weight distance to gd-baseconv at eta = 1/16 (the parameters used)" in failed
    assert "nearest" not in failed and "PROVED" not in failed
    after = next(line for line in lines if line.startswith("verdict: FAILED"))
    assert lines.index(failed) < lines.index(after)
    assert "distance 0.01 to the nearest gd-baseconv (eta = 1/8)" in after and "PROVED" not in after
    assert "the nearest construction (eta = 1/8, distance 0.01) is PROVED" in text
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["verdict"] == "failed"  # the file's verdict, unchanged
    near = rep["nearest"]
    assert near["rational"] == {"eta": "1/8"} and near["used"] == {"eta": "1/16"}
    assert near["snapped_verdict"] == "PROVED" and near["distance"]["spurious"] == 1
    assert abs(near["distance"]["max_abs"] - 0.01) < 1e-6 and "distance" in rep["verdict_line"]
    assert after == f"verdict: {rep['verdict_line']}"


def test_import_failed_line_has_the_distance_and_json_the_nearest_block(tmp_path):
    path = _failed_gd_file(tmp_path, eta=Fraction(1, 16))
    out = io.StringIO()
    rc = main(["import", str(path), "--from", "polyverify", "--spec", "baseconv", "--no-search", "--json", str(tmp_path / "r.json")],
              out=out)
    text = out.getvalue()
    assert rc == 1
    failed = next(line for line in text.splitlines() if line.startswith("verdict: FAILED"))
    assert "distance 0.01 to the nearest gd-baseconv (eta = 1/16)" in failed
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["verdict"]["ok"] is False and rep["proof"]["ok"] is False
    assert rep["nearest"]["rational"] == {"eta": "1/16"} and rep["nearest"]["snapped_verdict"] == "PROVED"


def test_circuit_weights_failed_line_has_the_entrywise_distance(tmp_path):
    import circuits as C
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    f = tmp_path / "dot.json"
    C.dump(C.dot(3), f)
    w = tmp_path / "c.safetensors"
    assert main(["circuit", "--graph", str(f), "--export", str(w), "--trials", "2"], out=io.StringIO()) == 0
    tensors = load_file(str(w))
    with safe_open(str(w), framework="numpy") as fh:
        meta = fh.metadata()
    t = tensors["layers.0.W_out"].copy()
    t[0, 0] += 0.5
    tensors["layers.0.W_out"] = t
    save_file(tensors, str(w), metadata=meta)
    out = io.StringIO()
    rc = main(["circuit", "--graph", str(f), "--weights", str(w), "--trials", "2", "--json",
               str(tmp_path / "r.json")], out=out)
    assert rc == 1
    failed = next(line for line in out.getvalue().splitlines() if line.startswith("proof: FAILED"))
    assert "weight distance 0.5 to the compiled stack" in failed
    assert "no family to fit" in out.getvalue()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["weights"]["distance"]["max_abs"] == 0.5


@pytest.mark.parametrize("arch", ["baseconv-causal", "token-lsa", "elsa"])
def test_other_architectures_recover_their_parameters(arch):
    e, build = _gd_family(arch)
    p = {"eta": Fraction(1, 4), **({"lam": Fraction(1, 16)} if e.ridge else {})}
    con, layers = build(**p)
    used = {"eta": Fraction(1, 16), **({"lam": Fraction(1, 4)} if e.ridge else {})}
    r = NR.nearest(build, used, _copy(layers), name=con.name)
    assert r.snapped_verdict == "PROVED" and r.distance < 1e-12
    for n, v in p.items():
        assert r.rational.get(n, r.used[n]) == (v if n in r.rational else used[n])


def test_distance_report_markdown_for_gd_and_import(tmp_path):
    path = _failed_gd_file(tmp_path)
    md = tmp_path / "sub" / "d.md"
    rc = main(["gd", "--weights", str(path), "--eta", "1/16", "--allow-metadata-mismatch", "--batch", "4",
               "--distance-report", str(md)], out=io.StringIO())
    text = md.read_text()
    assert rc == 1 and "The file's verdict: **FAILED; distance 0.01 to the nearest gd-baseconv" in text
    assert "| eta | 1/16 | 0.125 | 0 | 1/8 |" in text and "**PROVED**" in text and "| 0 | W_gate | 0.01 |" in text
    md2 = tmp_path / "i.md"
    rc = main(["import", str(path), "--from", "polyverify", "--spec", "baseconv", "--set", "eta=1/16", "--no-search",
               "--allow-metadata-mismatch", "--distance-report", str(md2)], out=io.StringIO())
    assert rc == 1 and "| eta | 1/16 | 0.125 | 0 | 1/8 |" in md2.read_text()


def test_distance_report_needs_a_weights_file(tmp_path, capsys):
    rc = main(["gd", "--layers", "4", "--batch", "4", "--distance-report", str(tmp_path / "d.md")])
    err = capsys.readouterr().err
    assert rc == 2 and "--distance-report applies to a --weights file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d.md").exists()


@settings(max_examples=50, deadline=None)
@given(st.fractions(min_value=Fraction(-4), max_value=Fraction(4), max_denominator=64),
       st.just(0.0) | st.floats(1e-12, 1e-3), st.floats(-1e-3, 1e-3))
def test_snap_is_the_simplest_rational_within_the_tolerance(q, tol, noise):
    x = float(q) + noise * tol  # |x - q| <= tol / 1000 (float rounding aside)
    s = NR.snap(x, tol)
    if tol == 0:
        assert s == Fraction(x).limit_denominator(NR.MAX_DENOMINATOR)
        return
    assert abs(s - Fraction(x)) <= Fraction(tol) and s.denominator <= q.denominator


def test_standard_errors_of_a_line_fit():
    rng = np.random.default_rng(0)
    J = rng.standard_normal((400, 1))
    r = rng.normal(0, 0.01, 400)
    se = NR.standard_errors(J, r)
    assert 0.5 * 0.01 / 20 < se[0] < 2 * 0.01 / 20  # sigma / sqrt(m |J|^2 / m) for unit-variance J


def test_import_through_a_layout_fits_on_the_files_channels(tmp_path):
    """precision-ls's notebook (its own channels [a, b, x, s1, s2], no query token, no epilogue): the
    specification's layers restricted to the file's channels and tokens; eta read as the float32 0.1
    snaps to 1/10, and the FAILED line has the distance."""
    import sys

    pytest.importorskip("torch")
    from tests.verify.import_files import precision_ls_notebook, save_pt

    p = tmp_path / "w.pt"
    save_pt(p, precision_ls_notebook(2, 4, 0.1, 2, causal=True), {"causal": True, "conv_type": "short"})
    out = io.StringIO()
    rc = main(["import", str(p), "--from", "precision-ls", "--spec", "baseconv", "--no-search", "--json",
               str(tmp_path / "r.json")], out=out)
    assert rc == 1 and "tests" in sys.modules
    failed = next(line for line in out.getvalue().splitlines() if line.startswith("verdict: FAILED"))
    assert "to the nearest gd-baseconv (eta = 1/10)" in failed and "distance" in failed
    near = json.loads((tmp_path / "r.json").read_text())["nearest"]
    assert near["rational"] == {"eta": "1/10"} and near["snapped_verdict"] == "PROVED"
    assert near["used"] == {"eta": str(Fraction(13421773, 134217728))}  # 0.1 in float32, read from the file


def test_a_fit_past_its_time_budget_says_so(monkeypatch):
    e, build = _gd_family("baseconv")
    con, layers = build(eta=Fraction(1, 16))
    monkeypatch.setattr(NR, "BUDGET_S", -1.0)
    r = NR.nearest(build, {"eta": Fraction(1, 16)}, layers, name=con.name, built=(con, layers))
    assert r.skipped.startswith("the fit had spent more than -1 s (verify/nearest.py BUDGET_S) before building")
    assert "not fitted" in r.summary() and r.lines() == []


def test_the_nearest_fit_writes_the_specification_with_the_files_own_token_classes():
    """An import whose layout has finer constant channels than the specification's own (a trained module's export
    whose per-token biases drifted apart: one indicator per token) gets the specification's layers written with those
    classes (``nearest._with_constants``), so the fit compares like with like; classes the stack's biases do not
    allow (token 4's rows put in the base) fall back to the projection alone (None)."""
    from types import SimpleNamespace

    from constructions.catalogue import gd_architectures
    from verify.importers.writing import constant_channels, indicator_classes
    from verify.nearest import _with_constants

    spec = gd_architectures()["baseconv-causal"].build(4, 2)
    T, C = spec.layout.shape
    layers = [*spec.prologue, *spec.body, *spec.epilogue]
    finer = {C + p: [int(t == p + 1) for t in range(T)] for p in range(T - 1)}  # every token but 0 its own class
    con = SimpleNamespace(constants=finer, rows=list(range(T)), cols=list(range(C)) + [None] * (T - 1))
    wide = _with_constants(layers, con, T)
    assert wide is not None
    want, got, _ = constant_channels(layers, "", "", classes=indicator_classes(finer))
    assert got == finer and len(wide) == len(want)
    assert all(a.W_in.shape == (C + T - 1, b.W_in.shape[1]) and (np.asarray(a.W_out) == np.asarray(b.W_out)).all()
               for a, b in zip(wide, want))
    coarse = {C: [0] * (T - 1) + [1]}  # the export's own class: as written by the export
    assert _with_constants(layers, SimpleNamespace(constants=coarse, rows=list(range(T)), cols=list(range(C)) + [None]),
                           T) is not None
    wrong = {C: [0, 1] + [0] * (T - 2)}  # token 1 alone, the query token T-1 in the base: its bias rows differ
    assert _with_constants(layers, SimpleNamespace(constants=wrong, rows=list(range(T)), cols=list(range(C)) + [None]),
                           T) is None
