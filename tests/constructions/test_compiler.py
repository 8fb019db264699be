"""constructions/compiler.py: arithmetic circuits -> levelled BaseConv stacks (T = 1).

Checked on random circuits (tests.strategies.circuits_st): the stack is proved equal to the
circuit's polynomials, it evaluates exactly like ``circuits.evaluate`` on random rationals,
and its depth is the multiplicative depth (between log2 of the true degree and the
multiplicative depth of the circuit as drawn).
"""
import math
import re
import warnings
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompiledCircuit, compile_circuit
from constructions.layers import BaseConv
from verify.prover.proof import prove

from tests.strategies import circuits_st, malformed_circuits_st, rationals_st


def quiet_compile(g, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return compile_circuit(g, **kw)


def run_stack(con, values):
    # exact inputs are Fractions (object scalars); a bare int would make an integer state
    S = con.input_state({k: Fraction(x) for k, x in values.items()})
    for L in con.layers(0):
        S = L.forward(S)
    return {k: Fraction(np.asarray(v).item()) for k, v in con.readout(S).items()}


def mult_depth_upper(g):
    """Multiplicative depth of the circuit as drawn, each n-ary product split in a balanced tree."""
    md = {}
    for v in nx.topological_sort(g):
        op = g.nodes[v]["op"]
        if op in ("input", "const"):
            md[v] = 0
        else:
            ops = C.operands(g, v)
            top = max(md[u] for u, _ in ops)
            if op == "add":
                md[v] = top
            else:
                m = sum(k for _, k in ops)
                md[v] = top + math.ceil(math.log2(m))
    return max(1, max(md[n] for n in C.output_nodes(g).values()))


def true_degree(g):
    degs = [sympy.Poly(p, *sympy.symbols(C.inputs(g))).total_degree() if C.inputs(g) else 0
            for p in C.polynomials(g).values()]
    return max(degs)


@given(g=circuits_st(), data=st.data())
def test_random_circuits_compile_prove_and_evaluate(g, data):
    con = quiet_compile(g)
    assert isinstance(con, CompiledCircuit)
    res = prove(con)
    assert res.ok, res.failure and res.failure.describe()
    names = C.inputs(con.graph)
    for _ in range(2):
        vals = {nm: data.draw(rationals_st(), label=nm) for nm in names}
        want = {k: Fraction(x) for k, x in C.evaluate(con.graph, vals).items()}
        assert run_stack(con, vals) == want


@given(g=circuits_st())
def test_random_circuit_depth_and_width_bounds(g):
    con = quiet_compile(g)
    L = len(con.epilogue)
    assert L == con.schedule.depth == con.depth(0) == con.schedule.info["compiled"]["layers"]
    assert not con.prologue and not con.body
    # each layer multiplies two affine forms: degree <= 2^layers
    deg = true_degree(con.graph)
    assert L >= 1 and 2 ** L >= deg
    assert L <= mult_depth_upper(con.graph)
    # the state is one token; the width is the widest live set
    assert con.layout.shape == (1, con.schedule.width)
    assert con.schedule.width >= max(len(C.inputs(con.graph)), len(C.outputs(con.graph)), 1)
    for layer in con.epilogue:
        assert isinstance(layer, BaseConv) and layer.shape == (1, con.schedule.width)


@given(g=circuits_st(max_inputs=3, max_gates=6), data=st.data())
def test_float_run_matches_exact_value(g, data):
    con = quiet_compile(g)
    names = C.inputs(con.graph)
    xs = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1))).uniform(-1, 1, (len(names), 4))
    S = con.input_state({nm: xs[i] for i, nm in enumerate(names)})
    for L in con.epilogue:
        S = L.map(lambda a: np.array(a, dtype=np.float64)).forward(S)
    got = con.readout(S)
    for t in range(4):
        want = C.evaluate(con.graph, {nm: Fraction(float(xs[i, t])) for i, nm in enumerate(names)})
        for o, w in want.items():
            assert abs(float(got[o][t]) - float(w)) <= 1e-9 * max(1.0, abs(float(w)))


def test_depth_of_builders():
    assert len(compile_circuit(C.dot(1)).epilogue) == 1
    assert len(compile_circuit(C.dot(7)).epilogue) == 1
    assert len(compile_circuit(C.matvec(3, 4)).epilogue) == 1
    assert len(compile_circuit(C.horner([1, 2])).epilogue) == 1
    assert len(compile_circuit(C.horner([1, -2, 3, Fraction(1, 2)])).epilogue) == 2
    # Horner's chain t*(t*(t*t)) is sequential as written; one 4-ary product is a balanced tree,
    # and the re-associated chain (the default) is one too
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 1]), reassociate=False).epilogue) == 3  # t^4
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 0, 1]), reassociate=False).epilogue) == 4  # t^5
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 1])).epilogue) == 2
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 0, 1])).epilogue) == 3
    b = C.CircuitBuilder()
    t = b.input("t")
    b.output(b.mul(t, t, t, t), "p")
    assert len(compile_circuit(b.graph()).epilogue) == 2
    assert len(compile_circuit(C.gd_step(4, 3, Fraction(1, 16))).epilogue) == 2
    assert len(compile_circuit(C.gd_step(3, 2, "eta"), reassociate=False).epilogue) == 3  # eta * A^T(Ax - b)
    assert len(compile_circuit(C.newton_schulz_step(2, 3), reassociate=False).epilogue) == 3
    assert len(compile_circuit(C.gd_step(3, 2, "eta")).epilogue) == 2  # (eta A_ij) r_i
    assert len(compile_circuit(C.newton_schulz_step(2, 3)).epilogue) == 2


@pytest.mark.parametrize("g", [C.dot(3), C.matvec(2, 3), C.gd_step(3, 2, Fraction(1, 10)),
                               C.ridge_gd_step(2, 2, "eta", Fraction(1, 3)), C.horner([1, 2, 3, 4]),
                               C.newton_schulz_step(2, 2)])
def test_builders_compile_and_prove(g):
    con = compile_circuit(g, name="b")
    assert con.name == "b"
    assert prove(con).ok
    rng = np.random.default_rng(0)
    vals = {nm: Fraction(int(rng.integers(-5, 6)), int(rng.integers(1, 4))) for nm in C.inputs(g)}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}
    # outputs sit at channels 0.. in sorted name order, named in the layout
    assert [r.name for r in con.layout.regions.values()] == [f"out:{o}" for o in sorted(C.outputs(g))]


def test_gd_step_compiled_equals_gd_construction_step():
    from constructions.lsq import gd_step

    g = C.gd_step(3, 2, Fraction(1, 10))
    con = compile_circuit(g)
    A = np.array([[1, 2], [3, Fraction(1, 2)], [-1, 0]], dtype=object)
    b = np.array([1, -2, 3], dtype=object)
    x = np.array([Fraction(1, 3), -1], dtype=object)
    vals = {f"A_{i}_{j}": A[i, j] for i in range(3) for j in range(2)}
    vals.update({f"b_{i}": b[i] for i in range(3)})
    vals.update({f"x_{j}": x[j] for j in range(2)})
    out = run_stack(con, vals)
    want = gd_step({"A": A, "b": b, "x": x}, Fraction(1, 10))["x"]
    assert [out[f"x_{j}"] for j in range(2)] == [Fraction(w) for w in want]


def test_constant_and_passthrough_outputs():
    b = C.CircuitBuilder()
    x = b.input("x")
    y = b.input("y")
    b.output(x, "a_copy")
    b.output(b.add(b.const(Fraction(3, 2)), b.mul(b.const(0), y)), "b_const")
    b.output(b.mul(x, y, y), "c_prod")
    g = b.graph()
    con = compile_circuit(g)
    assert prove(con).ok
    assert len(con.epilogue) == 2
    assert run_stack(con, {"x": Fraction(2), "y": Fraction(-3)}) == {
        "a_copy": 2, "b_const": Fraction(3, 2), "c_prod": 18}


def test_schedule_info():
    con = compile_circuit(C.dot(4))
    info = con.schedule.info
    assert info["compiled"]["layers"] == 1 and info["compiled"]["tokens"] == 1
    assert info["compiled"]["state_width"] == con.schedule.width == 8
    assert info["compiled"]["product_atoms"] == 4
    assert info["circuit"] == C.metrics(C.dot(4))
    assert "O(" in info["theorem_H21_bound"]["layers"]


@given(case=malformed_circuits_st())
def test_malformed_circuits_are_rejected(case):
    g, expected = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        with pytest.raises(C.CircuitError) as e:
            compile_circuit(g)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------- research scale: routing and linearise

def _route_reference(occupied, slot_of, targets, T, causal):
    """The route pass as it was before the sparse rewrite (dense per-row requests over every
    occupied slot, first fit over every group, Fractions; where a (source, destination) pair's rows
    read fewer distinct shifts than first fit gives groups, one single-tap group per shift):
    routing.route must give the same LayerSpec, entry for entry and in the same order."""
    from constructions.compiler.linearise import CONST
    from constructions.compiler.routing import CompileError, LayerSpec, shift

    def compatible(taps, req):
        lam = None
        for s, r in req.items():
            if s in taps and taps[s] != 0 and r != 0:
                lam = r / taps[s]
                break
        lam = Fraction(1) if lam is None else lam
        return None if any(s in taps and taps[s] * lam != r for s, r in req.items()) else lam

    spec = LayerSpec("route")
    by_channel = {}
    for (t2, c) in occupied:
        by_channel.setdefault(c, []).append(t2)
    needs = {}
    for (t, cd), form in sorted(targets.items()):
        per_src = {}
        for a, coef in form.items():
            if a == CONST:
                spec.b_out[(t, cd)] = spec.b_out.get((t, cd), 0) + coef
                continue
            t2, c = slot_of[a]
            per_src.setdefault(c, {})[t2] = coef
        for c, want in per_src.items():
            req = {}
            for t2 in by_channel.get(c, []):
                s = shift(t, t2, T, causal)
                coef = Fraction(want.get(t2, 0))
                if s is None:
                    if coef != 0:
                        raise CompileError(f"the causal target cannot move {occupied[(t2, c)]} from token {t2} "
                                           f"back to token {t}")
                    continue
                req[s] = coef
            needs.setdefault((c, cd), {})[t] = req
    groups = []
    for (c, cd), rows in sorted(needs.items()):
        mine = []
        for t, req in sorted(rows.items()):
            if all(v == 0 for v in req.values()):
                continue
            for taps, mask in mine:
                lam = compatible(taps, req)
                if lam is not None and lam != 0:
                    for s, r in req.items():
                        taps.setdefault(s, r / lam)
                    mask[t] = lam
                    break
            else:
                mine.append((dict(req), {t: Fraction(1)}))
        shifts = sorted({s for req in rows.values() for s, v in req.items() if v != 0})
        if len(shifts) < len(mine):  # one tap per inner channel, the rows' coefficients in its mask
            groups += [(c, cd, {s: Fraction(1)}, {t: req[s] for t, req in sorted(rows.items()) if req.get(s, 0) != 0})
                       for s in shifts]
        else:
            groups += [(c, cd, taps, mask) for taps, mask in mine]
    by_dst = {}
    for c, cd, taps, mask in groups:
        first = next(taps[s] for s in sorted(taps) if taps[s] != 0)
        norm = tuple(sorted((s, v / first) for s, v in taps.items() if v != 0))
        win = by_dst.setdefault((cd, norm, tuple(sorted(mask.items()))), {})
        win[c] = win.get(c, 0) + first
    by_src = {}
    for (cd, norm, mask), win in by_dst.items():
        by_src.setdefault((tuple(sorted(win.items())), norm, mask), []).append(cd)
    for (win, norm, mask), dsts in by_src.items():
        k = spec.new_inner()
        for c, w in win:
            spec.W_in[(c, k)] = w
        for s, v in norm:
            spec.h[(s, k)] = v
        for t, lam in mask:
            spec.b_gate[(t, k)] = lam
        for cd in dsts:
            spec.W_out[(k, cd)] = Fraction(1)
    return spec


@st.composite
def route_requests(draw):
    """A source state (atoms and junk on a T x D grid, some channels full, some sparse) and
    destination forms: shifted copies of a few patterns with scales (so rows share inner
    channels), random sparse forms, constants."""
    from constructions.compiler.linearise import CONST

    T = draw(st.integers(1, 7))
    D = draw(st.integers(1, 3))
    causal = draw(st.booleans())
    cells = [(t, c) for t in range(T) for c in range(D)]
    occ = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=len(cells), unique=True))
    occupied, slot_of = {}, {}
    for i, (t, c) in enumerate(occ):
        if draw(st.integers(0, 4)) == 0:
            occupied[(t, c)] = "junk"
        else:
            occupied[(t, c)] = f"a{i}"
            slot_of[f"a{i}"] = (t, c)
    atoms = sorted(slot_of)
    coef = st.fractions(min_value=-3, max_value=3, max_denominator=3).filter(lambda x: x != 0)
    targets = {}
    if atoms:
        patterns = draw(st.lists(st.dictionaries(st.sampled_from(atoms), coef, min_size=1, max_size=3),
                                 min_size=1, max_size=3))
        for _ in range(draw(st.integers(1, 2 * T + 2))):
            t, cd = draw(st.integers(0, T - 1)), draw(st.integers(0, D + 2))
            if draw(st.booleans()):  # a pattern moved by a common shift (kept on the grid) and scaled
                pat, d, lam = draw(st.sampled_from(patterns)), draw(st.integers(0, T - 1)), draw(coef)
                form = {}
                for a, v in pat.items():
                    t2, c = slot_of[a]
                    b = occupied.get(((t2 + d) % T, c))
                    if b in slot_of:
                        form[b] = lam * v
            else:
                form = draw(st.dictionaries(st.sampled_from(atoms), coef, max_size=4))
            if draw(st.integers(0, 3)) == 0:
                form[CONST] = draw(coef)
            targets[(t, cd)] = form
    return occupied, slot_of, targets, T, causal


def _apply_route(spec, T, causal, values, occupied):
    """The route layer applied to a state holding ``values[slot]`` (Fractions): {(t, c'): value}."""
    out = {}
    ks = range(spec.inner)
    mixed = {(t, k): sum((w * values.get((t, c), 0) for (c, kk), w in spec.W_in.items() if kk == k), Fraction(0))
             for t in range(T) for k in ks}
    for (k, cd), w_out in spec.W_out.items():
        for t in range(T):
            conv = Fraction(0)
            for (s, kk), hv in spec.h.items():
                if kk == k and (not causal or t - s >= 0):
                    conv += hv * mixed[((t - s) % T, k)]
            out[(t, cd)] = out.get((t, cd), 0) + spec.b_gate.get((t, k), 0) * conv * w_out
    for slot, b in spec.b_out.items():
        out[slot] = out.get(slot, 0) + b
    return out


@given(route_requests(), st.randoms(use_true_random=False))
def test_route_equals_the_dense_first_fit_reference_and_realises_the_map(req, rnd):
    from constructions.compiler.linearise import CONST
    from constructions.compiler.routing import CompileError, route

    occupied, slot_of, targets, T, causal = req
    try:
        want = _route_reference(occupied, slot_of, targets, T, causal)
    except CompileError as e:
        with pytest.raises(CompileError, match="^" + re.escape(str(e)) + "$"):
            route(occupied, slot_of, targets, T, causal)
        return
    got = route(occupied, slot_of, targets, T, causal)
    assert got.inner == want.inner
    for name in ("W_in", "h", "b_conv", "W_gate", "b_gate", "W_out", "b_out"):
        assert list(getattr(got, name).items()) == list(getattr(want, name).items()), name
    # and the layer computes the requested map (junk read nowhere, other slots zero)
    values = {slot: Fraction(rnd.randint(-9, 9), rnd.randint(1, 5)) for slot in occupied}
    atom_value = {a: values[s] for a, s in slot_of.items()}
    out = _apply_route(got, T, causal, values, occupied)
    for slot in set(out) | set(targets):
        form = targets.get(slot, {})
        assert out.get(slot, 0) == sum((v * (1 if a == CONST else atom_value[a]) for a, v in form.items()),
                                       Fraction(0)), slot


def test_route_scales_about_linearly_in_the_rows():
    """A full channel broadcast to every row of a long sequence, each row its own scale: the
    sparse first fit keeps one group per pattern, never rows x groups x T work (the dense
    reference takes seconds at this size)."""
    import gc
    import time

    from constructions.compiler.routing import route

    def run(T):
        occupied = {(t, 0): f"a{t}" for t in range(T)}
        slot_of = {f"a{t}": (t, 0) for t in range(T)}
        # row t reads a_{t-1} + 2 a_{t-2} (one pattern, every row) and a_t alone (another)
        targets = {}
        for t in range(T):
            targets[(t, 1)] = {f"a{(t - 1) % T}": Fraction(t + 1), f"a{(t - 2) % T}": Fraction(2 * (t + 1))}
            targets[(t, 2)] = {f"a{t}": Fraction(1, t + 1)}
        # the best of 3, the collector off while timing: a full collection of this test process's heap
        # (a whole suite's objects) inside one timed call took 1.2 s once, 10x the route itself
        best, spec = float("inf"), None
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                t0 = time.process_time()
                spec = route(occupied, slot_of, targets, T, causal=False)
                best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
        return best, spec

    small, s1 = run(250)
    big, s2 = run(2000)
    assert s1.inner == s2.inner == 2  # one inner channel per pattern, the scales in the masks
    assert big < max(0.5, 25 * small)  # 8x the rows: about 8x the time (the dense pass: 64x)


@given(circuits_st(max_inputs=4, max_gates=14), st.data())
def test_linearise_forms_evaluate_like_the_circuit(g, data):
    """Every output's affine form over atoms (products evaluated from their factors' forms)
    equals the circuit's value at random rationals: forms dropped after their last consumer,
    the merged sums and the heap-built product trees lose nothing."""
    from constructions.compiler.linearise import CONST, linearise

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        g = C.validate(g)
    names = C.inputs(g)
    vals = {n: data.draw(rationals_st(), label=n) for n in names}
    atoms, level, outputs = linearise(g)
    memo = {}

    def atom(a):
        if a not in memo:
            t = atoms[a]
            memo[a] = Fraction(vals[t[1]]) if t[0] == "input" else form(t[1]) * form(t[2])
        return memo[a]

    def form(f):
        return sum((v * (1 if a == CONST else atom(a)) for a, v in f.items()), Fraction(0))

    want = C.evaluate(g, {n: Fraction(vals[n]) for n in names})
    assert {n: form(f) for n, f in outputs.items()} == {n: Fraction(v) for n, v in want.items()}
    assert all(v != 0 for f in outputs.values() for v in f.values())  # zeros dropped
    for a, t in atoms.items():  # a product's level: one more than its factors' deepest atom
        if t[0] == "mul":
            assert level[a] == 1 + max((level[x] for f in t[1:] for x in f if x != CONST), default=0)


def test_route_rows_of_different_ratios_share_one_channel_per_shift():
    """Row t reads a_{t-1} + (t + 1) a_{t+1}: no two rows agree up to a scale, so first fit makes a group per
    row (grows with T); one inner channel per shift, the rows' coefficients in its mask, is 2 whatever T, and
    the layer computes the map exactly."""
    import random

    from constructions.compiler.routing import route

    for T in (5, 50, 200):
        occupied = {(t, 0): f"a{t}" for t in range(T)}
        slot_of = {f"a{t}": (t, 0) for t in range(T)}
        targets = {(t, 1): {f"a{(t - 1) % T}": Fraction(1), f"a{(t + 1) % T}": Fraction(t + 1)} for t in range(T)}
        spec = route(occupied, slot_of, targets, T, causal=False)
        assert spec.inner == 2, (T, spec.inner)
        rnd = random.Random(T)
        values = {slot: Fraction(rnd.randint(-9, 9), rnd.randint(1, 5)) for slot in occupied}
        out = _apply_route(spec, T, False, values, occupied)
        for t in range(T):
            assert out[(t, 1)] == values[((t - 1) % T, 0)] + (t + 1) * values[((t + 1) % T, 0)]
            assert out.get((t, 0), 0) == 0
