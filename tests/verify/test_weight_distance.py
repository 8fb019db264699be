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
