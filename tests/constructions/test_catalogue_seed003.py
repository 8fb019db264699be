"""Seed 003 (Zoology) catalogue entries and errata (App. H.3-H.5), plus seed 000 D.23-D.26 / D.38.

* every ``s003-*`` entry is proved at its defaults and at random small sizes (Hypothesis);
* one changed weight in each is rejected with a counterexample;
* every erratum of these modules: the as-printed form is rejected with a counterexample,
  the correction is proved (also at random sizes where the erratum has sizes);
* the CLI proves each entry and writes proof.ok;
* layer counts and Thm. H.21 bounds are checked against what the entries report.
"""
import io
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.catalogue import entries, errata
from constructions.catalogue import seed003_circuits as SC
from constructions.catalogue import seed003_hyena as SH
from constructions.catalogue import seed003_primitives as SP
from verify.construct import main
from verify.prover.proof import check, prove

from tests.support import FAST, assert_proved, assert_rejected

NAMES = ["s003-linear", "s003-conv", "s003-gating", "s003-shift-down", "s003-shift-up", "s003-add", "s003-remember",
         "s003-hyena-equiv", "s003-baseconv-as-hyena", "s003-linear-circuit", "s003-circuit-h21",
         "s003-h21-mult-step"]
ERRATA = ["S003-shift-kernel-index", "S003-shift-up", "S003-add-bias", "S003-remember-mask", "S003-remember-size",
          "S003-H12-bias", "S003-H21-mult-bias", "S000-D38-remember-1-layer"]
_ok, _rejected = assert_proved, assert_rejected


def test_registered_defaults_prove_and_layer_counts():
    cat = entries()
    layers = {"s003-linear": 1, "s003-conv": 1, "s003-gating": 1, "s003-shift-down": 1, "s003-shift-up": 1,
              "s003-add": 2, "s003-remember": 3, "s003-hyena-equiv": 4, "s003-h21-mult-step": 1}
    for name in NAMES:
        e = cat[name]
        assert e.paper.startswith("seed 003") and e.claim and e.build.__doc__
        obj = e.build(**e.sizes)
        _ok(check(obj))
        if name in layers:
            assert len(obj.epilogue) == layers[name] and not obj.prologue and not obj.body


def test_every_erratum_rejected_as_printed_and_proved_corrected():
    reg = errata()
    for eid in ERRATA:
        e = reg[eid]
        _rejected(check(e.as_printed_check()))
        _ok(check(e.corrected_check()))


# ------------------------------------------------------------------ Lemma H.7, Prop. H.8

@FAST
@given(N=st.integers(1, 6), d=st.integers(1, 3), seed=st.integers(1, 10_000), circ=st.booleans())
def test_h7_primitives_random_sizes(N, d, seed, circ):
    for con in (SP.linear(N, d, seed), SP.conv(N, d, seed, circular=circ), SP.gating(N, d, seed)):
        _ok(prove(con))


@FAST
@given(N=st.integers(1, 6), d=st.integers(1, 2), data=st.data())
def test_h8_shifts_random_sizes(N, d, data):
    s = data.draw(st.integers(0, N))
    _ok(prove(SP.shift_down(N, d, s)))
    _ok(prove(SP.shift_up(N, d, s)))
    if 1 <= s < N:  # the as-printed forms are wrong whenever the shift is nontrivial
        _rejected(prove(SP.shift_up_as_printed(N, d, s)))
        _rejected(prove(SP.shift_down_index_as_printed(N, d, s)))


def test_seed000_prop_d24_is_shift_down_by_half():
    # Prop. D.24: H in R^{2M x D}, H[k,:] = 1 iff k = M: H * (u1; u2) = (0; u1)
    for M, D in ((1, 1), (2, 2), (3, 1)):
        con = SP.shift_down(2 * M, D, M)
        assert con.epilogue[0].h[M, 0] == 1 and sum(1 for v in con.epilogue[0].h[:, 0] if v != 0) == 1
        _ok(prove(con))


@FAST
@given(N=st.integers(1, 6), d=st.integers(1, 2), seed=st.integers(1, 10_000))
def test_h7_perturbed_weights_rejected(N, d, seed):
    con = SP.conv(N, d, seed)
    con.epilogue[0].h[0, 0] += 1
    _rejected(prove(con))
    con = SP.gating(N, d, seed)
    con.epilogue[0].b_gate[N - 1, d - 1] += 1
    _rejected(prove(con))
    con = SP.linear(N, d, seed)
    con.epilogue[0].W_gate[d - 1, 0] += 1
    _rejected(prove(con))


@FAST
@given(N=st.integers(2, 6), data=st.data())
def test_h8_perturbed_weights_rejected(N, data):
    s = data.draw(st.integers(0, N - 1))
    con = SP.shift_down(N, 1, s)
    con.epilogue[0].b_gate[N - 1, 0] += 1  # row N-1 holds y_{N-1-s}
    _rejected(prove(con))
    con = SP.shift_up(N, 1, s)
    con.epilogue[0].h[(N - s) % N, 0] += 1
    _rejected(prove(con))


# ------------------------------------------------------------------ Prop. H.9, H.10

@FAST
@given(n=st.integers(1, 3), d=st.integers(1, 2), extra=st.integers(0, 2))
def test_add_random_sizes(n, d, extra):
    _ok(prove(SP.add(n, d, 2 * n + extra)))
    _rejected(prove(SP.add(n, d, 2 * n + extra, as_printed=True)))
    con = SP.add(n, d, 2 * n + extra)
    con.epilogue[1].b_conv[0, 0] += 1  # the ones of the first block
    _rejected(prove(con))


@FAST
@given(n=st.integers(1, 3), m=st.integers(1, 3), s=st.integers(0, 2), t=st.integers(0, 2), d=st.integers(1, 2),
       extra=st.integers(0, 2), seed=st.integers(1, 10_000))
def test_remember_random_sizes(n, m, s, t, d, extra, seed):
    N = SP.remember_min_rows(n, m, s, t) + extra
    _ok(prove(SP.remember(n, m, s, t, d, N, seed)))
    fused = SP.remember(n, m, s, t, d, N, seed, layers=2)
    assert len(fused.epilogue) == 2
    _ok(prove(fused))
    _rejected(prove(SP.remember_mask_as_printed(n, m, s, t, d, seed)))
    _rejected(prove(SP.remember_size_as_printed(n, m, s, t, d, seed)))
    con = SP.remember(n, m, s, t, d, N, seed)
    con.epilogue[0].b_gate[0, 0] += 1  # p[0, 0]
    _rejected(prove(con))
    fused.epilogue[1].b_gate[n + s, 0] += 1  # the first row of v
    _rejected(prove(fused))


def test_remember_needs_the_larger_size():
    try:
        SP.remember(2, 2, 1, 1, 2, SP.remember_min_rows(2, 2, 1, 1) - 1, 1)
    except ValueError as e:
        assert "2n+2s+2m+t" in str(e)
    else:
        raise AssertionError("undersized remember accepted")
    assert main(["s003-remember", "--set", "N=10"], out=io.StringIO()) == 2


@FAST
@given(M=st.integers(1, 3), D=st.integers(1, 2))
def test_seed000_d38_line6(M, D):
    _rejected(prove(SP.d38_line6(M, D, as_printed=True)))
    con = SP.d38_line6(M, D)
    assert len(con.epilogue) == 2
    _ok(prove(con))
    con.epilogue[1].h[3 * M, 0] += 1
    _rejected(prove(con))


# ------------------------------------------------------------------ Prop. H.12

@FAST
@given(N=st.integers(1, 4), d=st.integers(1, 2), L=st.integers(1, 3), seed=st.integers(1, 10_000))
def test_hyena_to_baseconv_random_sizes(N, d, L, seed):
    con = SH.hyena_to_baseconv(N, d, L, seed)
    assert len(con.epilogue) == L + 2 and con.layout.shape == (N, (L + 1) * d)
    _ok(prove(con))
    con.epilogue[-1].W_gate[L * d, 0] += 1  # p^L routed onto z_0 twice
    _rejected(prove(con))


def test_hyena_reference_by_hand():
    # N = 2, d = 1, L = 1, h_s = e0: p = u a, v = u b, z^1 = p ⊙ (h * v)
    u = np.array([[2], [3]], dtype=object)
    W_proj = np.array([[5, 7]], dtype=object)  # (p^1 | v)
    h = np.array([[1], [4]], dtype=object)
    z, ps = SH.hyena_reference(u, W_proj, [1], [h], 2, 1, 1)
    assert list(ps[0][:, 0]) == [10, 15]
    assert list(z[:, 0]) == [10 * (1 * 14), 15 * (1 * 21 + 4 * 14)]


@FAST
@given(N=st.integers(1, 3), d=st.integers(1, 2), L=st.integers(1, 2))
def test_baseconv_as_hyena_identity(N, d, L):
    obj = SH.baseconv_as_hyena(N, d, L)
    _ok(check(obj))
    obj.W_in[0, 0] = 2
    _rejected(check(obj))


@FAST
@given(N=st.integers(1, 3), d=st.integers(1, 2), seed=st.integers(1, 10_000))
def test_h12_bias_erratum_random_sizes(N, d, seed):
    assert SH._h12_spec_is_hyena(N, d, seed)
    _rejected(prove(SH.h12_as_printed(N, d, seed)))


# ------------------------------------------------------------------ Cor. H.20, Thm. H.21

def _perturb_last_wout(con):
    """Change one output weight of the last layer: a nonzero W_out entry (adds a nonzero product
    atom to an output), or, when every output is constant, the output bias."""
    L = con.epilogue[-1]
    idx = next((i for i, v in np.ndenumerate(L.W_out) if v != 0), None)
    if idx is None:
        L.b_out[0, 0] += 1
    else:
        L.W_out[idx] += 1


@FAST
@given(n=st.integers(1, 2), d=st.integers(1, 2), levels=st.integers(1, 3), seed=st.integers(1, 10_000))
def test_linear_circuit_random_sizes(n, d, levels, seed):
    con = SC.linear_circuit(n, d, levels, seed)
    assert C.metrics(con.graph)["degree"] == 1
    _ok(prove(con))
    rep = SC.h21_report(con)
    assert rep["compiled"]["layers"] == 1  # dense W: one affine layer for any linear circuit
    assert rep["compiled"]["channels"] == n * d
    assert rep["circuit"]["depth_Delta"] == 2 * levels
    _perturb_last_wout(con)
    _rejected(prove(con))


@FAST
@given(inputs=st.integers(1, 4), gates=st.integers(1, 10), seed=st.integers(1, 10_000), data=st.data())
def test_circuit_h21_random_sizes_and_bounds(inputs, gates, seed, data):
    outputs = data.draw(st.integers(1, min(3, gates)))
    con = SC.circuit_h21(inputs, gates, outputs, seed)
    _ok(prove(con))
    rep = SC.h21_report(con)
    delta, w = rep["circuit"]["depth_Delta"], rep["circuit"]["width_w"]
    # every gate on a path adds <= ceil(log2 arity) <= ceil(log2 w) product levels: O(Delta log w)
    assert rep["compiled"]["layers"] <= max(1, delta * math.ceil(math.log2(max(w, 2))))
    assert rep["compiled"]["tokens"] == 1
    _perturb_last_wout(con)
    _rejected(prove(con))


@FAST
@given(a=st.integers(1, 3), b=st.integers(0, 3), d=st.integers(1, 2))
def test_mult_step_random_sizes(a, b, d):
    con = SC.mult_step(a, b, d)
    assert con.layout.shape == (3 * a + 2 * b, d) and len(con.epilogue) == 1
    _ok(prove(con))
    _rejected(prove(SC.mult_step_as_printed(a, b, d)))
    con.epilogue[0].h[1, 0] += 1
    _rejected(prove(con))


# ------------------------------------------------------------------ CLI

def test_cli_sizes():  # every entry at its defaults: tests/verify/test_registry_cli.py
    out = io.StringIO()
    assert main(["s003-shift-up", "--set", "N=7", "--set", "s=3"], out=out) == 0
    assert "PROVED" in out.getvalue() and "state 7 x 2" in out.getvalue()


def test_errata_cli_lists_ours_ok():
    from verify.errata import run_all

    rows = {r["id"]: r for r in run_all()}
    for eid in ERRATA:
        r = rows[eid]
        assert r["as_printed_rejected"] and r["corrected_proved"] and r["counterexample"], eid
