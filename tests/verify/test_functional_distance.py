"""verify/functional_distance.py: the sampled functional distance and the certified bound of a FAILED
learned file, and their line / JSON key / --box on ``gd --weights`` and ``import``.

The certified bound is checked against exact evaluations of both stacks (Fractions, each layer's own
forward) at random rational points of the box, against the l1 mass recomputed term by term from the
difference polynomial, and against the sampled distance on float inputs drawn from the box."""
from __future__ import annotations

import io
import json
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constructions import weights_io
from constructions.base import run_layers
from constructions.catalogue import gd_architectures
from verify import functional_distance as F
from verify.comparison.poly import FlintProblem, flint_layers
from verify.construct import main

#: the two small constructions perturbed: gd-baseconv (seed 000 eq. (46)) and gd-lsa (seed 001 eq. (37)-(55))
CONS = {"baseconv": (gd_architectures()["baseconv"].build(4, 2), 1),
        "lsa": (gd_architectures()["lsa"].build(3, 2), 1)}


def _copy(layers):
    return [L.map(lambda w: w.copy()) for L in layers]


def _perturbed(name: str, i: int, array: str, idx, delta: Fraction):
    con, k = CONS[name]
    layers = _copy(con.layers(k))
    a = layers[i].arrays()[array]
    a[idx] = Fraction(a[idx]) + delta
    return con, k, layers


def _point(con, box: F.Box, rng: random.Random) -> dict:
    """A random rational point of the box (each entry in [-r, r], its corners included)."""
    v = {}
    for name, shape in con.variables.items():
        r = box.of(name)
        a = np.empty(shape, dtype=object)
        for idx in np.ndindex(*shape):
            a[idx] = r * Fraction(rng.choice([-1, 1, rng.randint(-64, 64)]), 64) if rng.random() < 0.5 else \
                r * rng.choice([-1, 1])
        v[name] = a
    return v


def _entry(data, con, k):
    layers = con.layers(k)
    i = data.draw(st.integers(0, len(layers) - 1), label="layer")
    arrays = {n: a for n, a in layers[i].arrays().items() if getattr(a, "size", 0)}
    array = data.draw(st.sampled_from(sorted(arrays)), label="array")
    idx = tuple(data.draw(st.integers(0, s - 1)) for s in arrays[array].shape)
    return i, array, idx


DELTAS = st.builds(lambda m, j: Fraction(m, 2 ** j), st.integers(-64, 64).filter(bool), st.integers(0, 8))
BOXES = st.sampled_from(["1", "1/2", "2", "3/4,A=2", "1,q=1/4,x=3"])


@settings(max_examples=20, deadline=None)
@given(st.data(), st.sampled_from(sorted(CONS)), DELTAS, BOXES)
def test_the_certified_bound_holds_in_the_box_and_is_zero_exactly_for_a_dont_care_entry(data, name, delta, box_text):
    con, k = CONS[name]
    i, array, idx = _entry(data, con, k)
    con, k, layers = _perturbed(name, i, array, idx, delta)
    box = F.parse_box(box_text)
    ref, learned, what = F.gd_stacks(con, k, layers)
    assert what == "the prediction"
    c = F.certified_bound(ref, learned, con.variables, box, child=False)
    B = c["certified_bound"]
    rng = random.Random(data.draw(st.integers(0, 2 ** 32), label="seed"))
    differs = False
    for _ in range(6):
        v = _point(con, box, rng)
        got, want = F.run_exact(learned, v), F.run_exact(ref, v)
        assert all(abs(g - w) <= B for g, w in zip(got, want)), (got, want, B)
        differs |= got != want
    # B is the l1 mass of the difference polynomial: 0 exactly when the two predictions are one
    # polynomial (a don't-care entry); otherwise random rational points tell them apart (with
    # probability 1: Schwartz-Zippel), so B > 0 goes with a point where they differ
    assert (B == 0) == (not differs)


def _difference_terms(con, ref_layers, learned_layers):
    """The difference polynomial's terms (exponents, coefficient), computed here over the comparison's
    FlintProblem (the module builds its own inputs, scaled by the box)."""
    fp = FlintProblem(con)
    p = []
    for layers in (learned_layers, ref_layers):
        S = run_layers(flint_layers(layers), fp.input_state())
        out = con.readout(S)["prediction"]
        out = out.reshape(-1)[0] if isinstance(out, np.ndarray) else out
        p.append(out if hasattr(out, "terms") else fp.poly(out))
    diff = p[0] - p[1]
    return fp.names, [(tuple(int(e) for e in m), Fraction(int(c.p), int(c.q))) for m, c in diff.terms()]


@settings(max_examples=12, deadline=None)
@given(st.data(), st.sampled_from(sorted(CONS)), DELTAS, BOXES)
def test_the_bound_scales_as_stated_with_the_box(data, name, delta, box_text):
    """B(box) = sum_m |c_m| prod_i r_i^{e_i(m)}, from the terms of the difference at radius 1."""
    con, k = CONS[name]
    i, array, idx = _entry(data, con, k)
    con, k, layers = _perturbed(name, i, array, idx, delta)
    box = F.parse_box(box_text)
    ref, learned, _ = F.gd_stacks(con, k, layers)
    names, terms = _difference_terms(con, ref.layers, learned.layers)
    var_of = [n.split("[")[0] for n in names]
    want = sum((abs(c) * np.prod([box.of(var_of[j]) ** e for j, e in enumerate(m) if e], dtype=object)
                for m, c in terms), Fraction(0))
    got = F.certified_bound(ref, learned, con.variables, box, child=False)["certified_bound"]
    assert got == want
    assert F.certified_bound(ref, learned, con.variables, F.Box(), child=False)["certified_bound"] == \
        sum((abs(c) for _, c in terms), Fraction(0))


@settings(max_examples=10, deadline=None)
@given(st.data(), st.sampled_from(sorted(CONS)), DELTAS, st.sampled_from(["1", "1/2", "2"]))
def test_the_sampled_max_on_the_box_is_at_most_the_certified_bound(data, name, delta, r):
    con, k = CONS[name]
    i, array, idx = _entry(data, con, k)
    con, k, layers = _perturbed(name, i, array, idx, delta)
    box = F.parse_box(r)
    ref, learned, _ = F.gd_stacks(con, k, layers)
    B = F.certified_bound(ref, learned, con.variables, box, child=False)["certified_bound"]
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32), label="seed"))
    v = {nm: rng.uniform(-1, 1, (64,) + tuple(shape)) * float(box.radius) for nm, shape in con.variables.items()}
    s = F.sampled_distance(ref, learned, v)
    assert s["sampled_inputs"] == 64 and s["sampled_largest_input_entry"] <= float(box.radius)
    assert s["sampled_max_abs"] <= float(B) * (1 + 1e-9) + 1e-12  # float64 rounding of the sampled side only


def test_a_bias_on_the_prediction_is_its_own_bound_and_one_elsewhere_is_zero():
    """The epilogue's b_out at the prediction's entry adds delta to it (the difference is the
    constant delta: bound |delta| on every box); at another token of the same channel it changes no
    output (bound 0), though the weight distance is the same."""
    con, k = CONS["baseconv"]
    last = len(con.layers(k)) - 1
    n, col = con.variables["A"][0], con.layout["y"].cols[0]
    delta = Fraction(-3, 8)
    for row, want in ((n, abs(delta)), (0, Fraction(0))):
        con, k, layers = _perturbed("baseconv", last, "b_out", (row, col), delta)
        ref, learned, _ = F.gd_stacks(con, k, layers)
        for box in (F.Box(), F.parse_box("5")):
            assert F.certified_bound(ref, learned, con.variables, box, child=False)["certified_bound"] == want


def test_limits_skip_the_certified_bound_with_the_limit_named():
    con, k, layers = _perturbed("baseconv", 0, "W_out", (0, 0), Fraction(1, 4))
    ref, learned, _ = F.gd_stacks(con, k, layers)
    c = F.certified_bound(ref, learned, con.variables, child=False, max_terms=3)
    assert "certified_bound" not in c and "counted before expanding; limits 3 terms in an entry" in c["certified_skipped"]
    c = F.certified_bound(ref, learned, con.variables, child=False, max_state_terms=100)
    assert "certified_bound" not in c and "100 in a state" in c["certified_skipped"]
    c = F.certified_bound(ref, learned, con.variables, max_variables=10)
    assert c["certified_skipped"] == "16 input variables (> 10, the limit of the exact polynomial view)"
    fd = F.FunctionalDistance("the prediction", "x", F.sampled_distance(ref, learned, F.command_problems(4, 2, 8, 0, 5.0)), c)
    assert "certified bound skipped: 16 input variables (> 10" in fd.line() and "sampled max" in fd.line()
    # in the limited child: the same number as here
    here = F.certified_bound(ref, learned, con.variables, child=False)["certified_bound"]
    assert F.certified_bound(ref, learned, con.variables)["certified_bound"] == here > 0


# ------------------------------------------------------------------ --box

@pytest.mark.parametrize("text, why", [("0", "must be > 0"), ("-1", "must be > 0"), ("nan", "not an exact rational"),
                                       ("1e400", "outside float64's range"), ("abc", "not an exact rational"),
                                       ("1,2", "two radii"), ("A=1,A=2", "given twice"), ("", "an empty item")])
def test_box_refusals(text, why):
    with pytest.raises(F.UsageError, match=why):
        F.parse_box(text)


def test_box_values():
    assert F.parse_box(None) == F.Box() and F.parse_box("0.25").radius == Fraction(1, 4)
    b = F.parse_box("1/2,A=3")
    assert (b.of("A"), b.of("b"), b.text()) == (3, Fraction(1, 2), "|entries| <= 1/2, |A| <= 3")
    with pytest.raises(F.UsageError, match="no input 'Z'"):
        F.parse_box("Z=2").check_names({"A": (2, 2)})


# ------------------------------------------------------------------ the commands

def _tampered_file(tmp_path, arch="baseconv", n=6, d=2):
    """A gd file with one body W_out entry (of gd-baseconv; W3 for LSA) doubled: FAILED."""
    con = gd_architectures()[arch].build(n, d)
    layers = _copy(con.layers(1))
    i = next(j for j, L in enumerate(layers) if "W_out" in L.arrays())
    a = layers[i].arrays()["W_out"]
    idx = tuple(int(t) for t in np.argwhere(np.asarray(a != 0))[0])
    a[idx] = Fraction(a[idx]) * 2
    p, b = len(con.prologue), len(con.body)
    con.prologue, con.body, con.epilogue = layers[:p], layers[p:p + b], layers[p + b:]
    path = tmp_path / "t.safetensors"
    weights_io.save(path, con, 1)
    return path


def test_gd_weights_prints_the_functional_distance_and_writes_it(tmp_path):
    path = _tampered_file(tmp_path)
    bounds = []
    for box, text_box in ((None, "|entries| <= 1"), ("2", "|entries| <= 2")):
        out = io.StringIO()
        argv = ["gd", "--weights", str(path), "--batch", "8", "--json", str(tmp_path / "r.json")]
        assert main(argv + (["--box", box] if box else []), out=out) == 1
        text = out.getvalue()
        line = next(x for x in text.splitlines() if "functional distance" in x)
        assert text.index("proof: FAILED") < text.index(line)
        assert "(sampled, 8 inputs: the command's problems, --seed 0" in line and "sampled max" in line
        assert "certified: |f_learned - f_construction| <= " in line and f"every input with {text_box}" in line
        rep = json.loads((tmp_path / "r.json").read_text())["functional_distance"]
        assert rep["sampled_inputs"] == 8 and rep["compared"] == "the prediction"
        assert rep["certified_box_text"] == text_box and Fraction(rep["certified_bound_exact"]) > 0
        assert all(k.startswith(("sampled", "certified")) for k in rep if k not in ("compared", "seconds"))
        bounds.append(Fraction(rep["certified_bound_exact"]))
    # the difference (a doubled W_out entry) has no constant term: every term grows with the radius
    assert bounds[1] > bounds[0]


def test_a_proved_file_has_no_functional_distance(tmp_path):
    con = gd_architectures()["baseconv"].build(4, 2)
    weights_io.save(tmp_path / "ok.safetensors", con, 1)
    out = io.StringIO()
    assert main(["gd", "--weights", str(tmp_path / "ok.safetensors"), "--batch", "4", "--json",
                 str(tmp_path / "r.json")], out=out) == 0
    assert "functional distance" not in out.getvalue()
    assert "functional_distance" not in json.loads((tmp_path / "r.json").read_text())


def test_import_prints_the_functional_distance_and_writes_it(tmp_path):
    path = _tampered_file(tmp_path)
    out = io.StringIO()
    rc = main(["import", str(path), "--from", "polyverify", "--spec", "baseconv", "--no-search", "--box", "1/2",
               "--json", str(tmp_path / "r.json")], out=out)
    assert rc == 1
    text = out.getvalue()
    line = next(x for x in text.splitlines() if "functional distance" in x)
    assert text.index("verdict: FAILED") < text.index(line)
    assert "functional distance of the prediction (sampled, 256 inputs" in line
    assert "every input with |entries| <= 1/2" in line
    rep = json.loads((tmp_path / "r.json").read_text())["functional_distance"]
    assert rep["sampled_inputs"] == F.DEFAULT_SAMPLES and rep["certified_box"] == {"radius": "1/2", "radii": {}}


@pytest.mark.parametrize("box", ["0", "-1", "nan", "1e400", "abc"])
def test_box_is_refused_up_front_by_both_commands(tmp_path, capsys, box):
    path = _tampered_file(tmp_path)
    for argv in (["gd", "--weights", str(path), "--box", box],
                 ["import", str(path), "--from", "polyverify", "--spec", "baseconv", "--box", box]):
        out = io.StringIO()
        assert main(argv, out=out) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "--box" in err and out.getvalue() == ""  # nothing proved or printed


def test_box_without_weights_or_with_an_unknown_input_is_refused(tmp_path, capsys):
    assert main(["gd", "--layers", "4", "--box", "2"], out=io.StringIO()) == 2
    assert "no --weights file was given" in capsys.readouterr().err
    path = _tampered_file(tmp_path)
    assert main(["gd", "--weights", str(path), "--box", "Z=2"], out=io.StringIO()) == 2
    assert "no input 'Z'" in capsys.readouterr().err
    assert main(["import", str(path), "--from", "polyverify", "--spec", "baseconv", "--box", "Z=2"],
                out=io.StringIO()) == 2
    assert "no input 'Z'" in capsys.readouterr().err


def test_box_argument_errors_import_nothing_heavy():
    from tests.verify.test_startup import HEAVY, _imports

    for argv in (["gd", "--layers", "4", "--box", "0"], ["gd", "--layers", "4", "--box", "1"]):
        rc, mods, err = _imports(argv)
        assert rc == 2 and err.startswith("error: ") and "--box" in err, (argv, err)
        assert not [m for m in HEAVY if m in mods], argv


@pytest.mark.parametrize("arch", sorted(gd_architectures()))
def test_every_gd_architecture_bound_holds_and_the_precount_bounds_every_entry(arch):
    """One random entry of each GD architecture (4 x 2, k = 2) moved: the certified bound holds at
    random points of the box, and the pre-count (the layers' own forward on term-count bounds) is at
    least every state entry's terms after every layer."""
    con = gd_architectures()[arch].build(4, 2)
    k = 2
    rng = random.Random(arch)
    layers = _copy(con.layers(k))
    L = rng.choice([L for L in layers if any(getattr(a, "size", 0) for a in L.arrays().values())])
    name, a = rng.choice([(n, a) for n, a in sorted(L.arrays().items()) if getattr(a, "size", 0)])
    idx = tuple(rng.randrange(s) for s in a.shape)
    a[idx] = Fraction(a[idx]) + Fraction(rng.choice([-3, 1, 5]), 8)
    box = F.parse_box("3/2")
    ref, learned, _ = F.gd_stacks(con, k, layers)
    B = F.certified_bound(ref, learned, con.variables, box, child=False)["certified_bound"]
    for _ in range(3):
        v = _point(con, box, rng)
        assert all(abs(g - w) <= B for g, w in zip(F.run_exact(learned, v), F.run_exact(ref, v)))
    fp = F._FlintInputs(con.variables, F.Box())
    Terms = F._term_counter(len(fp.names))
    S = fp.array(con.input_state(fp.v))
    for L in layers:
        bound = F._count_layer(L, Terms).forward(F._counted(Terms, S))
        S = flint_layers([L])[0].forward(S)
        for b, x in zip(bound.flat, S.flat):
            assert F._terms(x) <= (b.n if isinstance(b, Terms) else 0)
