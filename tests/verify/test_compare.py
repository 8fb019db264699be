"""verify.compare: perturb a constructed model by a known amount; every metric sees it in the
right place with the right size, and an unperturbed copy gives exactly zero differences."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction

import pytest

from constructions import weights_io
from verify.compare import compare, main
from verify.comparison import build_construction, constructed_stack, perturb, stack_of

DELTA = Fraction(1, 2 ** 10)
KW = dict(problems=8, iters=15, iter_sigmas=(1.0, 4.0), sigmas=(1.0, 4.0), kappas=(5.0,), scales=(1.0, 2.0))


def _bc_target(con):
    """gd-baseconv layer 0 (body L1): W_out from channel s1[0] into s2[0]."""
    lay = con.layout
    return 0, "W_out", (lay.cols("s1")[0], lay.cols("s2")[0]), lay.cols("s1")[0], "s2"


def _lsa_target(con):
    """gd-lsa layer 0 (body), head 1 (the X^T X w head): W2 entry feeding the w column."""
    cw = con.layout.cols("w")[0]
    return 0, "head1.W2", (cw, cw), 1, None


@pytest.fixture(scope="module")
def reports():
    out = {}
    for name, target in (("gd-baseconv", _bc_target), ("gd-lsa", _lsa_target)):
        con = build_construction(name, 4, 2)
        C = constructed_stack(con, 1)
        layer, arr, idx, unit, region = target(con)
        reps = {}
        for delta in (DELTA, DELTA / 2):
            Lp = stack_of(con, perturb(C.layers, layer, arr, idx, delta))
            reps[delta] = compare(con, Lp, C, weights=True, **KW)
        reps[0] = compare(con, stack_of(con, perturb(C.layers, layer, arr, idx, 0)), C, weights=True, **KW)
        out[name] = (con, layer, unit, region, reps)
    return out


NAMES = ("gd-baseconv", "gd-lsa")


@pytest.mark.parametrize("name", NAMES)
def test_unperturbed_copy_is_exactly_zero(reports, name):
    con, layer, unit, region, reps = reports[name]
    r = reps[0]
    assert all(p["max_abs"] == 0 for p in r["functional"]["predictions"])
    assert r["functional"]["per_layer"][0]["first_difference"] is None
    assert all(s["l2_max"] == 0 and s["cosine_min"] == pytest.approx(1.0) for s in r["sensitivities"])
    p = r["polynomial"]
    assert p["prediction"]["finished"] and p["body"]["finished"] and len(p["body"]["entries"]) == 2
    for q in [p["prediction"], *p["body"]["entries"]]:
        assert q["true_monomials"]["error_mass"] == 0 and q["spurious_monomials"]["count"] == 0
    assert all(L["differing"] == [] and L["max_distance"] == 0 for L in r["invariants"]["layers"])
    assert all(row["l2_max"] == 0 for row in r["implicit_w"]["layers"])
    assert all(row["rms_vs_constructed"] == 0 for row in r["interpolation"]["curve"])
    for it in r["iterate"]:
        assert it["curve_learned"] == it["curve_constructed"]
    assert r["weights"]["exact"] and all(s["residual_mass"] == 0 for s in r["weights"]["sections"])


@pytest.mark.parametrize("name", NAMES)
def test_prediction_differences_linear_in_delta(reports, name):
    con, layer, unit, region, reps = reports[name]
    for a, b in zip(reps[DELTA]["functional"]["predictions"], reps[DELTA / 2]["functional"]["predictions"]):
        assert a["rms"] > 0
        assert a["rms"] / b["rms"] == pytest.approx(2.0, rel=1e-3)
        assert a["rms"] < 1e3 * float(DELTA) * max(1.0, a["rms_constructed_prediction"]) ** 3


@pytest.mark.parametrize("name", NAMES)
def test_first_state_difference_at_perturbed_layer_and_region(reports, name):
    con, layer, unit, region, reps = reports[name]
    f = reps[DELTA]["functional"]["per_layer"][0]["first_difference"]
    assert f["layer"] == layer
    if region is not None:
        assert f["region"] == region
    else:  # gd-lsa: the head writes the w column
        assert f["region"] in ("w", "pred")
    layers = reps[DELTA]["functional"]["per_layer"][0]["layers"]
    assert all(L["max_abs"] == 0 for L in layers[:layer])


@pytest.mark.parametrize("name", NAMES)
def test_sensitivities(reports, name):
    con, layer, unit, region, reps = reports[name]
    for a, b in zip(reps[DELTA]["sensitivities"], reps[DELTA / 2]["sensitivities"]):
        assert a["cosine_mean"] == pytest.approx(1.0, abs=1e-4)
        assert 0 < a["l2_mean"] < 100 * float(DELTA) * 10
        assert a["l2_mean"] / b["l2_mean"] == pytest.approx(2.0, rel=1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_polynomial_view_sees_delta_sized_monomials(reports, name):
    con, layer, unit, region, reps = reports[name]
    P1, P2 = reps[DELTA]["polynomial"], reps[DELTA / 2]["polynomial"]
    pairs = [(P1["prediction"], P2["prediction"])] + list(zip(P1["body"]["entries"], P2["body"]["entries"]))
    for p1, p2 in pairs:
        s1, s2 = p1["spurious_monomials"], p2["spurious_monomials"]
        t1, t2 = p1["true_monomials"], p2["true_monomials"]
        # exact arithmetic: the changes are exactly linear in delta
        assert s1["mass"] == pytest.approx(2 * s2["mass"], rel=1e-12)
        assert t1["error_mass"] == pytest.approx(2 * t2["error_mass"], rel=1e-12)
        assert sum(t1["error_mass_by_degree"].values()) == pytest.approx(t1["error_mass"], rel=1e-12)
    p1 = P1["prediction"]
    assert p1["spurious_monomials"]["mass"] + p1["true_monomials"]["error_mass"] > 0
    biggest = max(p1["spurious_monomials"]["max"], p1["true_monomials"]["error_max"])
    assert float(DELTA) / 64 <= biggest <= 64 * float(DELTA)
    assert p1["constructed"]["terms"] == reps[0]["polynomial"]["prediction"]["learned"]["terms"]
    # the body polynomial: the perturbation reaches the iterate's first component by delta times
    # products of data entries (BaseConv: the other component is untouched)
    b0, b1 = P1["body"]["entries"]
    assert b0["region"] == b1["region"] == ("x" if name == "gd-baseconv" else "w")
    assert float(DELTA) / 64 <= b0["true_monomials"]["error_max"] <= float(DELTA)
    if name == "gd-baseconv":
        assert b1["true_monomials"]["error_mass"] == 0 and b1["spurious_monomials"]["count"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_invariants_differ_only_for_the_perturbed_unit(reports, name):
    con, layer, unit, region, reps = reports[name]
    for L in reps[DELTA]["invariants"]["layers"]:
        if L["layer"] == layer:
            assert L["differing"] == [unit]
            row = L["rows"][unit]
            assert 0 < row["distance"] <= 2 * float(DELTA) * max(1.0, row["scale_constructed"])
        else:
            assert L["differing"] == []
    a = reps[DELTA]["invariants"]["layers"][layer]["rows"][unit]["distance"]
    b = reps[DELTA / 2]["invariants"]["layers"][layer]["rows"][unit]["distance"]
    assert a / b == pytest.approx(2.0, rel=1e-6)
    ip = reps[DELTA]["interpolation"]
    assert ip["curve"][0]["rms_vs_constructed"] == 0 and ip["curve"][-1]["rms_vs_constructed"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_implicit_w_and_iteration(reports, name):
    con, layer, unit, region, reps = reports[name]
    rows = reps[DELTA]["implicit_w"]["layers"]
    assert rows[0]["l2_max"] == 0  # no body copy: prologue + epilogue only
    assert 0 < rows[1]["l2_mean"] < 10 * float(DELTA)
    it = reps[DELTA]["iterate"][0]
    assert it["curve_learned"][0] == it["curve_constructed"][0]
    assert it["curve_learned"][5] != it["curve_constructed"][5]


@pytest.mark.parametrize("name", NAMES)
def test_weights_check_reports_residual_size(reports, name):
    con, layer, unit, region, reps = reports[name]
    w1, w2 = reps[DELTA]["weights"], reps[DELTA / 2]["weights"]
    assert not w1["exact"]
    bad = [s for s in w1["sections"] if not s["exact"]]
    assert [s["section"] for s in bad] == ["body0"]
    bad2 = [s for s in w2["sections"] if not s["exact"]]
    assert bad[0]["residual_mass"] == pytest.approx(2 * bad2[0]["residual_mass"], rel=1e-12)
    assert float(DELTA) / 64 <= bad[0]["residual_max_coeff"] <= 64 * float(DELTA)
    assert "body" in w1["first_failure"]


def test_token_lsa_implicit_w_matches_lemma43():
    con = build_construction("s004-gd", 3, 2)
    C = constructed_stack(con, 2)
    Lp = stack_of(con, perturb(C.layers, 1, "head0.Q", (0, 1), DELTA))
    r = compare(con, Lp, C, skip=("polynomial",), **KW)
    rows = r["implicit_w"]["layers"]
    assert rows[1]["l2_max"] == 0 and rows[2]["l2_mean"] > 0
    assert all(row["recursion_vs_gradient_max"] < 1e-10 for row in rows)
    assert r["invariants"]["layers"][0]["differing"] == [] and r["invariants"]["layers"][1]["differing"] == [0]


def test_a_kind_without_invariants_or_interpolation_is_reported_not_raised():
    """ELSA declares no invariant and no interpolation (constructions/kinds.py): the comparison
    says so per layer and for the curve, with the kind's name, and computes everything else."""
    from constructions import kinds

    con = build_construction("gd-elsa", 3, 2)
    C = constructed_stack(con, 1)
    r = compare(con, stack_of(con, perturb(C.layers, 0, "stage0.head0.W1", (0, 0), DELTA)), C,
                skip=("polynomial",), **KW)
    assert [L["supported"] for L in r["invariants"]["layers"]] == [False] * len(C.layers)
    assert r["interpolation"] == {"supported": False, "reason": "no interpolation for layer kind elsa"}
    assert r["functional"]["predictions"][0]["max_abs"] > 0
    with pytest.raises(kinds.KindUnsupported, match="'elsa' has no invariants: no invariant is derived"):
        kinds.get("elsa", "invariants")


# ------------------------------------------------------------------ CLI

def _save(tmp_path, con, layers, k):
    st = stack_of(con, layers)
    c2 = replace(con, prologue=st.prologue, body=st.bodies[0], epilogue=st.epilogue)
    return weights_io.save(tmp_path / "w.safetensors", c2, k)


def test_cli_runs_on_a_weight_file(tmp_path, capsys):
    con = build_construction("gd-baseconv", 4, 2)
    C = constructed_stack(con, 1)
    path = _save(tmp_path, con, perturb(C.layers, *_bc_target(con)[:3], DELTA), 1)
    rc = main(["--learned", str(path), "--construction", "gd-baseconv", "--out", str(tmp_path / "o"),
               "--problems", "4", "--iters", "5", "--weights", "--iter-sigmas", "1"])
    assert rc == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["n"] == 4 and rep["d"] == 2
    assert rep["functional"]["per_layer"][0]["first_difference"]["region"] == "s2"
    assert (tmp_path / "o" / "report.md").read_text().startswith("# gd-baseconv")
    assert (tmp_path / "o" / "iterate.png").is_file()


@pytest.mark.parametrize("args,needle", [
    (["--learned", "/nonexistent.safetensors", "--construction", "gd-baseconv", "--n", "4", "--d", "2"], "not found"),
    (["--learned", "X", "--construction", "nope", "--n", "4", "--d", "2"], "unknown construction"),
    (["--construction", "gd-baseconv"], "required"),
])
def test_cli_bad_input_exits_2_one_line(tmp_path, args, needle):
    p = subprocess.run([sys.executable, "-m", "verify.compare", *args, "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_cli_wrong_shape_file_exits_2(tmp_path):
    con = build_construction("gd-baseconv", 4, 2)
    path = _save(tmp_path, con, constructed_stack(con, 1).layers, 1)
    p = subprocess.run([sys.executable, "-m", "verify.compare", "--learned", str(path), "--construction",
                        "gd-lsa", "--out", str(tmp_path / "o")], capture_output=True, text=True,
                       cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ limits of the exact parts

def _slow_items():
    yield {"n": 1}
    import time as _t

    _t.sleep(30)
    yield {"n": 2}


def test_run_limited_keeps_streamed_items_and_names_the_time_limit():
    from verify.comparison.poly import run_limited

    items, status = run_limited(_slow_items, timeout=2.0, memory_gb=None)
    assert items == [{"n": 1}]
    assert "time limit (2 s)" in status


def _big_items():
    yield {"n": 1}
    blob = bytearray(3 * 2 ** 30)  # 3 GiB, over the 1 GiB limit
    yield {"n": len(blob)}


def test_run_limited_names_the_memory_limit():
    from verify.comparison.poly import run_limited

    items, status = run_limited(_big_items, timeout=60.0, memory_gb=1.0)
    assert items == [{"n": 1}] and "memory limit (1 GiB)" in status


def test_weights_check_cut_off_reports_rows_checked():
    from verify.comparison.poly import weights_check

    con = build_construction("gd-baseconv", 4, 2)
    C = constructed_stack(con, 1)
    w = weights_check(con, C, timeout=1e-3, memory_gb=None)
    assert not w["complete"] and not w["exact"] and "time limit" in w["reason"]
    assert all(s["rows_checked"] <= s["rows"] for s in w["sections"])


def test_invariants_match_permuted_and_rescaled_baseconv_channels():
    """A permutation of BaseConv's inner channels with per-channel power-of-two scalings and sign flips
    is the same function: the invariants find every channel equal (the learned channel matched to each
    constructed one named), and one moved entry is reported on the construction's channel it belongs to."""
    import numpy as np

    from verify.comparison.analyses import invariants, match_channels, permute_channels

    con = build_construction("gd-baseconv", 4, 2)
    C = constructed_stack(con, 1)
    rng = np.random.default_rng(5)

    def symmetric(L, order):
        L = permute_channels(L.map(lambda w: np.array(w, dtype=object)), order)
        for c in range(L.shape[1]):
            s, u = (Fraction(int(rng.choice([1, -1, 2, -2]))) for _ in range(2))
            L.W_in[:, c] *= s
            L.b_in[:, c] *= s
            L.b_conv[:, c] *= s
            L.W_gate[:, c] *= u
            L.b_gate[:, c] *= u
            L.W_out[c, :] /= s * u
        return L

    C_ = C.layers[0].shape[1]
    orders = [list(rng.permutation(C_)) for _ in C.layers]
    sym = stack_of(con, [symmetric(L, o) for L, o in zip(C.layers, orders)])
    rep = invariants(sym, C)
    assert all(L["differing"] == [] and L["max_distance"] < 1e-9 for L in rep["layers"])
    for L, o in zip(rep["layers"], orders):  # the learned channel now at o.index(c) was constructed channel c
        assert all(row.get("learned_channel", row["channel"]) == o.index(row["channel"]) or row["distance"] == 0
                   for row in L["rows"])
    from verify.comparison.models import to_float
    assert match_channels(to_float(C.layers[0]), to_float(C.layers[0])) == list(range(C_))  # identity kept

    layer, arr, idx, unit, region = _bc_target(con)
    moved = perturb(C.layers, layer, arr, idx, DELTA)
    sym = stack_of(con, [symmetric(L, o) for L, o in zip(moved, orders)])
    rep = invariants(sym, C)
    assert rep["layers"][layer]["differing"] == [unit]


def test_more_than_six_heads_are_matched_by_assignment():
    import numpy as np

    from verify.comparison.analyses import match_heads

    rng = np.random.default_rng(2)
    fc = [(rng.standard_normal((3, 3)), rng.standard_normal((3, 3))) for _ in range(9)]
    perm = [int(j) for j in rng.permutation(9)]
    fl = [(fc[j][0] * -2.0, fc[j][1] * 0.5) for j in perm]  # learned head i is constructed head perm[i]
    got = match_heads(fl, fc)  # the learned head matched to each constructed head
    assert [perm[i] for i in got] == list(range(9))
