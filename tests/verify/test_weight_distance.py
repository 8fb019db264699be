"""verify/weight_distance.py: a FAILED file's distance to the construction, exact, entry by entry."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
from hypothesis import given, settings, strategies as st

from constructions import weights_io
from constructions.gd_baseconv import gd_baseconv
from verify.construct import main
from verify.weight_distance import weight_distance

CON = gd_baseconv(6, 2)
LAYERS = CON.layers(1)


def _changed(layer_i: int, name: str, idx, new):
    layers = [L.map(lambda w: w.copy()) for L in LAYERS]  # copies (map keeps the arrays themselves)
    layers[layer_i].arrays()[name][idx] = new
    return layers


def test_equal_stacks_are_at_distance_zero():
    d = weight_distance(LAYERS, [L.map(lambda w: w.copy()) for L in LAYERS])
    assert d.arrays == [] and d.worst is None and "0 (every entry equal)" in d.line("x")


@settings(max_examples=25, deadline=None)
@given(st.data(), st.fractions(min_value=Fraction(-4), max_value=Fraction(4), max_denominator=1024)
       .filter(lambda q: q != 0))
def test_one_changed_entry_is_the_distance_exactly(data, delta):
    i = data.draw(st.integers(0, len(LAYERS) - 1))
    arrays = {n: a for n, a in LAYERS[i].arrays().items() if getattr(a, "size", 0)}
    name = data.draw(st.sampled_from(sorted(arrays)))
    a = arrays[name]
    idx = tuple(data.draw(st.integers(0, s - 1)) for s in a.shape)
    old = Fraction(a[idx])
    d = weight_distance(LAYERS, _changed(i, name, idx, old + delta))
    assert len(d.arrays) == 1
    w = d.worst
    assert (w.layer, w.array, w.index, w.max_abs) == (i, name, idx, abs(delta))
    assert w.max_rel == abs(delta) / max(abs(old), 1)
    assert w.spurious == (1 if old == 0 else 0)


def test_gd_weights_says_the_distance_of_a_failed_file(tmp_path):
    i = next(j for j, L in enumerate(LAYERS) if "W_out" in L.arrays())
    a = LAYERS[i].arrays()["W_out"]
    idx = tuple(int(t) for t in np.argwhere(np.asarray(a != 0))[0])
    con = gd_baseconv(6, 2)
    layers = _changed(i, "W_out", idx, Fraction(a[idx]) * 2)
    con.prologue, con.body, con.epilogue = layers[:len(con.prologue)], \
        layers[len(con.prologue):len(con.prologue) + len(con.body)], layers[len(con.prologue) + len(con.body):]
    path = tmp_path / "t.safetensors"
    weights_io.save(path, con, 1)
    out = io.StringIO()
    assert main(["gd", "--weights", str(path), "--batch", "4", "--json", str(tmp_path / "r.json")], out=out) == 1
    text = out.getvalue()
    assert "proof: FAILED" in text and "weight distance to gd-baseconv at eta = 1/16" in text
    rep = json.loads((tmp_path / "r.json").read_text())["weights"]["distance"]
    assert rep["arrays"][0]["layer"] == i and rep["arrays"][0]["index"] == list(idx)
    assert Fraction(rep["arrays"][0]["max_abs_exact"]) == abs(Fraction(a[idx]))


def _reference_distance(want, got):
    """The definition, every entry in Fractions: (max_abs, first index of it, max_rel, spurious)."""
    W = [Fraction(x) for x in np.asarray(want, dtype=object).flat]
    G = [Fraction(x) for x in np.asarray(got, dtype=object).flat]
    diff = [abs(g - w) for g, w in zip(G, W)]
    at = max(range(len(diff)), key=lambda j: (diff[j], -j))
    rel = max(d / max(abs(w), Fraction(1)) for d, w in zip(diff, W))
    return diff[at], at, rel, sum(1 for w, g in zip(W, G) if w == 0 and g != 0)


_ENTRY = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300),
                   st.sampled_from([0.0, -0.0, 5e-324, 1.0, 1 + 2**-52, 1 - 2**-53, 2.0**-1074 * 3]),
                   st.fractions(max_denominator=10**6, min_value=-10**6, max_value=10**6),
                   st.integers(-2**70, 2**70))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ENTRY, _ENTRY), min_size=1, max_size=12), st.booleans())
def test_the_float_candidates_give_the_exact_maxima_of_the_definition(pairs, as_floats):
    """The float-guided path (floats pick candidates within their rounding bound, each decided exactly)
    equals the definition in Fractions on any entries: floats near each other, subnormals, big integers,
    Fractions no float holds, near-ties."""
    from verify.weight_distance import _array_distance

    want = np.array([w for w, _ in pairs], dtype=object)
    got = np.array([g for _, g in pairs], dtype=object)
    if as_floats:  # both float64 arrays (a learned file against a float construction)
        want, got = np.array([float(x) for x in want]), np.array([float(x) for x in got])
    ref = _reference_distance(want, got)
    a = _array_distance(0, "w", want, got)
    if ref[0] == 0:
        assert a is None
        return
    assert (a.max_abs, a.index, a.max_rel, a.spurious) == (ref[0], (ref[1],), ref[2], ref[3])
