"""constructions/iterated.py: step circuits compiled as a repeated body and proved at every depth."""
import copy
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import circuits as C
from constructions.iterated import (MAX_REPEAT, IteratedCircuit, IterationError, check_repeat, compile_iteration,
                                    entry_shape)
from numerics.iterate import reference_iterates, run_against_reference
from verify.prover.kernel import verdict
from verify.prover.proof import prove

TARGETS = ("baseconv", "baseconv-mlp", "lsa", "elsa")


def gd(A, b, x, eta):
    return {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}


@st.composite
def step_circuits(draw):
    """A random step: state x_0..x_{m-1} (each output a random polynomial of degree <= 2 over all inputs, or
    x_i itself), data d_0..d_{p-1} passed through, maybe a parameter held (no output)."""
    m, p = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    param = draw(st.booleans())
    b = C.CircuitBuilder()
    xs = [b.input(f"x_{i}") for i in range(m)]
    ds = [b.input(f"d_{j}") for j in range(p)]
    atoms = xs + ds + ([b.input("eta")] if param else [])
    coef = st.fractions(min_value=-2, max_value=2, max_denominator=4)
    for i in range(m):
        if draw(st.integers(0, 4)) == 0:
            b.output(xs[i], f"x_{i}")  # a state entry the step keeps
            continue
        terms = [b.mul(b.const(draw(coef)), xs[i])]
        for _ in range(draw(st.integers(1, 3))):
            f = draw(st.lists(st.sampled_from(atoms), min_size=1, max_size=2))
            terms.append(b.mul(b.const(draw(coef)), *f))
        b.output(b.add(*terms), f"x_{i}")
    for j in range(p):
        b.output(ds[j], f"d_{j}")
    return b.graph(), ("eta",) if param else ()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(step_circuits(), st.sampled_from(TARGETS), st.integers(1, 3), st.integers(0, 2**16))
def test_random_steps_proved_at_every_depth_and_iterate(step, target, k, seed):
    g, params = step
    con = compile_iteration(g, k, params=params, target=target)
    assert isinstance(con, IteratedCircuit) and con.prologue == [] and con.epilogue == []
    res = prove(con)
    assert verdict(res).value == "PROVED", res.failure and res.failure.describe()
    # the proved body is the step: k copies run exactly are k exact steps of the circuit
    rng = np.random.default_rng(seed)
    v = {n: Fraction(int(rng.integers(-3, 4)), int(rng.integers(1, 4))) for n in C.inputs(con.graph)}
    S, _ = con.run(v, k)
    got = con.readout(S)
    want = con.iterate(v, k)
    assert all(got[n] == want[n] for n in want)
    assert con.info["compiled"]["repeat"] == k and len(con.layers(k)) == k * len(con.body)


def _nonzero_weights(layers):
    """(layer, array name, index, value) of every nonzero weight entry (sparse or dense)."""
    for li, L in enumerate(layers):
        for name, a in sorted(L.arrays().items()):
            if hasattr(a, "entries"):
                yield from ((li, name, (i, j), v) for i, j, v in a.entries() if v != 0)
            else:
                yield from ((li, name, tuple(int(t) for t in ix), a[tuple(ix)]) for ix in np.argwhere(a != 0))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(step_circuits(), st.sampled_from(TARGETS), st.data())
def test_a_tampered_body_fails(step, target, data):
    """One nonzero weight of the body, anywhere, doubled: the body section fails (where the stack has such
    a weight whose change the state sees: a weight of a zero channel changes nothing, so the test draws
    from the output weights of the last layer when it has any)."""
    g, params = step
    con = compile_iteration(g, 2, params=params, target=target)
    body = copy.deepcopy(con.body)
    cands = list(_nonzero_weights(body))
    last = [c for c in cands if c[0] == len(body) - 1 and c[1].split(".")[-1] in ("W_out", "W3", "b_out", "B3")]
    assume(last)
    li, name, ix, v = data.draw(st.sampled_from(last))
    body[li].arrays()[name][ix] = v * 2
    res = prove(con, sections={"prologue": [], "body": body, "epilogue": []})
    assert verdict(res).value == "FAILED" and res.sections.get("body") is False


@pytest.mark.parametrize("target", ("baseconv", "lsa", "elsa", "baseconv-causal"))
def test_gd_with_a_symbolic_step_size(target):
    """eta held in the state: one proof for every step size; the float run at eta = 1/16 follows the exact
    iteration (mpmath) for 100 steps."""
    g = C.from_function(gd, A=(4, 2), b=(4,), x=(2,), eta=(), placed=True)
    con = compile_iteration(g, 100, params=("eta",), target=target)
    assert verdict(prove(con)).value == "PROVED"
    assert con.carried == ("x_0", "x_1") and con.params_held == ("eta",)
    rng = np.random.default_rng(0)
    v0 = {n: rng.uniform(-1, 1, 3) for n in C.inputs(con.graph)}
    v0["eta"] = np.full(3, 1 / 16)
    r64 = run_against_reference(con, v0, 100, np.float64)
    r32 = run_against_reference(con, v0, 100, np.float32)
    assert len(r64.errors) == 100 and max(r64.errors) < 1e-13 and max(r32.errors) < 1e-4
    assert max(r32.errors) > max(r64.errors) and not any(r64.non_finite)


def test_reference_is_the_exact_iteration():
    """The mpmath iteration agrees with the Fraction iteration of the circuit (to its digits)."""
    g = C.from_function(lambda X, A: {"X": X * 2 - X @ A @ X, "A": A}, X=(2, 2), A=(2, 2))
    con = compile_iteration(g, 4)
    v = {n: np.array([x]) for n, x in zip(C.inputs(g), (0.5, 0.25, -0.125, 1.0, 0.375, 0.0, 0.5, 0.25))}
    ref = reference_iterates(g, v, 4)
    exact = con.iterate({n: Fraction(float(x[0])) for n, x in v.items()}, 4)
    for n, val in exact.items():
        assert abs(float(ref[-1][n][0]) - float(val)) <= 1e-15 * max(1, abs(float(val)))


def test_export_and_torch_module(tmp_path):
    torch = pytest.importorskip("torch")
    from polyverify.torch import load_module
    from verify.export import export

    g = C.from_function(gd, A=(3, 2), b=(3,), x=(2,), eta=(), placed=True)
    con = compile_iteration(g, 5, params=("eta",))
    m = load_module(con, 5)
    rng = np.random.default_rng(1)
    v0 = {n: rng.uniform(-1, 1, 2) for n in C.inputs(con.graph)}
    v0["eta"] = np.full(2, 1 / 8)
    want, _ = con.run(v0, 5, cast=lambda L: L.map(lambda a: np.asarray(a, dtype=float)))
    got = m(torch.as_tensor(con.input_state(v0))).detach().numpy()
    assert np.allclose(got, want, atol=1e-12)
    path = tmp_path / "it.safetensors"
    export(path, con, k=5)
    m2 = load_module(path)
    assert np.allclose(m2(torch.as_tensor(con.input_state(v0))).detach().numpy(), want, atol=1e-12)


def _refusal(fn, **kw):
    return lambda: compile_iteration(C.from_function(fn, **kw), 3)


@pytest.mark.parametrize("make, words", [
    (_refusal(lambda x, b: {"x": x * b}, x=(2,), b=(2,)), "input 'b_0' is not fed"),
    (_refusal(lambda x: {"x": x * x, "y": x.sum()}, x=(2,)), "output 'y' feeds no input"),
    (_refusal(lambda x: {"x": x[:1] * x[:1]}, x=(2,)), "output x (shape (1,)) feeds input x of another shape (2,)"),
    (lambda: compile_iteration(C.from_function(lambda x, e: {"x": x * e, "e": e * e}, x=(2,), e=()), 3, params=["e"]),
     "parameter 'e' is changed by the step"),
    (lambda: compile_iteration(C.from_function(lambda x: {"x": x * x}, x=(2,)), 3, params=["eta"]),
     "'eta' is not an input of the step"),
    (lambda: compile_iteration(C.from_function(lambda x: {"x": x * x}, x=(2,)), 0), "repeat 0 is outside 1 .."),
    (lambda: compile_iteration(C.from_function(lambda x: {"x": x * x}, x=(2,)), MAX_REPEAT + 1), "is outside"),
    (lambda: check_repeat(True), "must be an int"),
])
def test_refusals_are_one_line(make, words):
    with pytest.raises(IterationError) as e:
        make()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_misplaced_output_refused():
    b = C.CircuitBuilder()
    x = b.input("x", token=0, channel=0)
    y = b.input("y", token=0, channel=1)
    b.output(b.mul(x, y), "x", token=1, channel=0)
    b.output(y, "y", token=0, channel=1)
    with pytest.raises(IterationError, match=r"output 'x' is placed at \(1, 0\), not at the place \(0, 0\)"):
        compile_iteration(b.graph(), 2)


def test_entry_shape():
    assert entry_shape(["x_0", "x_4", "A_0_1", "A_2_0", "eta"]) == {"x": (5,), "A": (3, 2), "eta": ()}
