"""constructions/weights_io.py: safetensors tensors + layout + exact rationals, and back."""
import json
from fractions import Fraction

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from constructions.compiler import compile_circuit
from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from constructions.layout import Layout
from constructions.weights_io import FORMAT, WeightFileError, load, same_layer, save, split_sections
from verify.prover.proof import prove


def exact_entries(layer):
    return {k: [Fraction(z) for z in np.asarray(a, dtype=object).flat] for k, a in layer.arrays().items()}


def assert_same_stack(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.kind == b.kind and a.config() == b.config()
        assert exact_entries(a) == exact_entries(b)
        assert same_layer(a, b)
        for name, arr in a.arrays().items():
            assert arr.dtype == object
            assert all(isinstance(z, (int, Fraction)) for z in arr.flat)


@pytest.mark.parametrize("con,k", [
    (gd_baseconv(3, 2), 2),
    (gd_baseconv(3, 2, eta="1/10"), 2),  # non-dyadic: recovered from the exact metadata
    (gd_baseconv_causal(3, 2, eta="3/7"), 3),
    (gd_lsa(3, 2, eta="1/9", lam="1/4"), 2),
    (gd_elsa(3, 2, eta="1/4", lam="1/3"), 1),
    (gd_baseconv(2, 1), 0),
])
def test_round_trip_is_exact(tmp_path, con, k):
    p = save(tmp_path / "w.safetensors", con, k)
    lw = load(p)
    assert_same_stack(lw.layers, con.layers(k))
    assert lw.entries_from_float == 0
    assert lw.entries_from_exact == sum(
        int(np.count_nonzero(np.array(a, dtype=float))) for L in con.layers(k) for a in L.arrays().values())
    meta = lw.meta
    assert meta["format"] == FORMAT
    info = json.loads(meta["construction"])
    assert info["name"] == con.name and info["k"] == k
    assert info["sections"] == {"prologue": len(con.prologue), "body": len(con.body),
                                "epilogue": len(con.epilogue)}
    assert {p_: Fraction(v) for p_, v in info["params"].items()} == dict(con.params)
    assert Layout.from_json(json.loads(meta["layout"])).regions == con.layout.regions
    # the stack splits back into its sections and still proves
    secs, k2 = split_sections(con, lw.layers)
    assert k2 == k
    if k:
        assert prove(con, sections={"prologue": secs["prologue"], "body": secs["bodies"][0],
                                    "epilogue": secs["epilogue"]}).ok


def test_non_dyadic_eta_entry_is_exactly_one_tenth(tmp_path):
    con = gd_baseconv(3, 2, eta="1/10")
    p = save(tmp_path / "w.safetensors", con, 1)
    L3 = load(p).layers[2]
    lay = con.layout
    assert L3.W_out[lay.cols("s2")[0], lay.cols("x")[0]] == Fraction(-1, 10)
    # the float tensor holds the rounded value, the metadata the exact one
    t = load_file(str(p))["layers.2.W_out"]
    assert t.dtype == np.float64 and t[lay.cols("s2")[0], lay.cols("x")[0]] == -0.1
    assert Fraction(-0.1) != Fraction(-1, 10)


def test_tensor_names_and_repeated_layers(tmp_path):
    con = gd_baseconv(2, 1)
    p = save(tmp_path / "w.safetensors", con, 2)
    tensors = load_file(str(p))
    names = {f"layers.{i}.{a}" for i, L in enumerate(con.layers(2)) for a in L.arrays()}
    assert set(tensors) == names
    with safe_open(str(p), framework="numpy") as f:
        specs = json.loads(f.metadata()["layers"])
    assert [s["source"] for s in specs] == [0, 1, 2, 0, 1, 2, 6]  # copies point at the first copy
    assert all(s["kind"] == "baseconv" for s in specs)


def _rewrite(path, tensors, meta):
    save_file(tensors, str(path), metadata=meta)


def test_edited_float_comes_back_as_its_binary_value(tmp_path):
    con = gd_baseconv(3, 2, eta="1/10")
    p = save(tmp_path / "w.safetensors", con, 2)
    tensors = load_file(str(p))
    with safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
    lay = con.layout
    i, j = lay.cols("s2")[1], lay.cols("x")[1]
    # edit the second body copy's W_out (stack layer 5 = copy 1 of layer 3) and a zero entry
    tensors["layers.5.W_out"] = tensors["layers.5.W_out"].copy()
    tensors["layers.5.W_out"][i, j] = 0.1
    tensors["layers.0.b_out"] = tensors["layers.0.b_out"].copy()
    tensors["layers.0.b_out"][0, 0] = 1.5
    _rewrite(p, tensors, meta)
    lw = load(p)
    assert lw.layers[5].W_out[i, j] == Fraction(0.1) == Fraction(3602879701896397, 36028797018963968)
    assert lw.layers[2].W_out[i, j] == Fraction(-1, 10)  # the untouched first copy stays exact
    assert lw.layers[5].W_out[lay.cols("s2")[0], lay.cols("x")[0]] == Fraction(-1, 10)
    assert lw.layers[0].b_out[0, 0] == Fraction(3, 2)
    assert lw.entries_from_float == 2


def test_foreign_file_loads_against_a_spec(tmp_path):
    con = gd_baseconv_causal(3, 2)  # eta 1/16: every weight is dyadic, float64 holds it exactly
    k = 2
    tensors = {f"layers.{i}.{a}": np.array(arr, dtype=np.float64)
               for i, L in enumerate(con.layers(k)) for a, arr in L.arrays().items()}
    p = tmp_path / "foreign.safetensors"
    save_file(tensors, str(p))  # no metadata at all
    with pytest.raises(WeightFileError, match="no polyverify-weights/1 metadata"):
        load(p)
    lw = load(p, spec=con, k=k)
    assert_same_stack(lw.layers, con.layers(k))
    assert lw.entries_from_exact == 0 and lw.entries_from_float > 0


def test_foreign_file_with_non_dyadic_values_gets_binary_fractions(tmp_path):
    con = gd_baseconv(2, 1, eta="1/10")
    tensors = {f"layers.{i}.{a}": np.array(arr, dtype=np.float64)
               for i, L in enumerate(con.layers(1)) for a, arr in L.arrays().items()}
    p = tmp_path / "foreign.safetensors"
    save_file(tensors, str(p), metadata={"note": "not ours"})
    lw = load(p, spec=con, k=1)
    lay = con.layout
    assert lw.layers[2].W_out[lay.cols("s2")[0], lay.cols("x")[0]] == Fraction(-0.1)
    res = prove(con, sections={"prologue": [], "body": lw.layers[:3], "epilogue": lw.layers[3:]})
    assert not res.ok and res.failure.section == "body"


def test_missing_tensor_is_a_one_line_error(tmp_path):
    con = gd_baseconv(2, 1)
    p = save(tmp_path / "w.safetensors", con, 1)
    tensors = load_file(str(p))
    with safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
    del tensors["layers.1.W_gate"]
    _rewrite(p, tensors, meta)
    with pytest.raises(WeightFileError) as e:
        load(p)
    assert "layers.1.W_gate" in str(e.value) and "\n" not in str(e.value)
    tensors = {k: v for k, v in load_file(str(save(tmp_path / "w2.safetensors", con, 1))).items()
               if not k.startswith("layers.2.")}
    _rewrite(p, tensors, meta)
    with pytest.raises(WeightFileError, match=r"no tensors for layer 2 \(expected names layers\.2\.\*\)"):
        load(p)


@pytest.mark.parametrize("content", [b"", b"garbage, not safetensors", b"\xff" * 64,
                                     (8).to_bytes(8, "little") + b"{bad json"])
def test_garbage_file_is_a_one_line_error(tmp_path, content):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(content)
    with pytest.raises(WeightFileError) as e:
        load(p, spec=gd_baseconv(2, 1), k=1)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_missing_file_and_non_finite_values(tmp_path):
    with pytest.raises(WeightFileError, match="not found"):
        load(tmp_path / "nope.safetensors")
    con = gd_baseconv(2, 1)
    p = save(tmp_path / "w.safetensors", con, 1)
    tensors = load_file(str(p))
    with safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
    tensors["layers.0.h"] = tensors["layers.0.h"].copy()
    tensors["layers.0.h"][0, 0] = np.inf
    _rewrite(p, tensors, meta)
    with pytest.raises(WeightFileError, match="non-finite"):
        load(p)


def test_split_sections_checks_the_layer_count():
    con = gd_baseconv_causal(2, 1)
    layers = con.layers(3)
    secs, k = split_sections(con, layers)
    assert k == 3 and len(secs["bodies"]) == 3 and len(secs["prologue"]) == 2 and len(secs["epilogue"]) == 1
    with pytest.raises(WeightFileError, match="needs 2 \\+ 1\\*k \\+ 1"):
        split_sections(con, layers[:2])
    bc = gd_baseconv(2, 1)
    with pytest.raises(WeightFileError, match="has 3 layers"):
        split_sections(bc, bc.layers(1)[:3])


def test_compiled_circuit_round_trip(tmp_path):
    import circuits as C

    con = compile_circuit(C.gd_step(2, 2, Fraction(1, 3)))
    p = save(tmp_path / "c.safetensors", con, 0)
    lw = load(p, spec=con, k=0)
    assert_same_stack(lw.layers, con.epilogue)


def test_same_layer_detects_differences():
    a = gd_baseconv(2, 1).body[0]
    b = a.map(lambda x: x.copy())
    assert same_layer(a, b)
    b.W_in[0, 0] += Fraction(1, 1024)
    assert not same_layer(a, b)
    b = a.map(lambda x: x.copy())
    b.W_out[tuple(np.argwhere(np.not_equal(a.W_out, 0, dtype=bool) == 0)[0])] = Fraction(0)  # an equal zero, another type
    assert same_layer(a, b)
    b.b_gate[0, 0] = Fraction(b.b_gate[0, 0]) + 1  # a different object that differs
    assert not same_layer(a, b)
    assert not same_layer(a, gd_baseconv(2, 1).body[1])
    assert not same_layer(gd_lsa(2, 1).body[0], gd_elsa(2, 1).body[0])


def test_exact_tensor_is_each_entry_as_the_binary_fraction_it_is():
    """The vectorised reading equals the definition entry by entry: a float (any width) is the exact
    binary fraction it is, zero (either sign) the int 0, an integer the Python int; shapes kept."""
    from hypothesis import given, settings, strategies as st
    from hypothesis.extra import numpy as hnp

    from constructions.weights_io import exact_tensor

    dtypes = st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.int64, np.uint64])

    @settings(max_examples=60, deadline=None)
    @given(dtypes.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                                                elements={"allow_nan": False, "allow_infinity": False}
                                                if np.dtype(dt).kind == "f" else None)))
    def check(t):
        got = exact_tensor(t, "t", "f")
        assert got.shape == t.shape and got.dtype == object
        for idx, v in np.ndenumerate(t):
            want = (Fraction(float(v)) if v != 0 else 0) if t.dtype.kind == "f" else int(v)
            assert got[idx] == want and type(got[idx]) is type(want), (idx, v, got[idx])

    check()
