"""The front ends' ``params=`` (issue 42 item 3): named inputs declared parameters of a step
(``"param": true`` on their input nodes, as ``constructions.iterated`` reads a circuit file), so
that ``compile_iteration`` holds them in the state as free symbols: one proof for every step size."""
from fractions import Fraction

import numpy as np
import pytest
import sympy

import circuits as C
from circuits.frontend import PARAM
from circuits.frontend_sympy import from_sympy
from constructions import iterated
from constructions.iterated import IterationError, compile_iteration
from verify.prover.kernel import verdict
from verify.prover.proof import prove

N, D = 4, 2


def gd(A, b, x, eta):
    """Seed 000 eq. (3): one GD step on least squares, x <- x - eta A^T (A x - b); A and b kept."""
    return {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}


def gd_sympy():
    A = sympy.Matrix(N, D, lambda i, j: sympy.Symbol(f"A_{i}_{j}"))
    b = sympy.Matrix(N, 1, lambda i, _: sympy.Symbol(f"b_{i}"))
    x = sympy.Matrix(D, 1, lambda i, _: sympy.Symbol(f"x_{i}"))
    eta = sympy.Symbol("eta")
    return {"x": x - eta * A.T * (A * x - b), "A": A, "b": b}


def declared(g):
    return sorted(d[C.keys.NAME] for _, d in g.nodes(data=True) if d.get(PARAM))


def from_function_gd(**kw):
    return C.from_function(gd, A=(N, D), b=(N,), x=(D,), eta=(), placed=True, **kw)


FRONT_ENDS = {"from_function": from_function_gd,
              "from_sympy": lambda **kw: from_sympy(gd_sympy(), placed=True, **kw)}


def test_the_mark_is_the_one_iteration_reads():
    assert PARAM == iterated.PARAM


@pytest.mark.parametrize("front", sorted(FRONT_ENDS))
def test_gd_step_with_a_symbolic_step_size_proved_iterated(front):
    g = FRONT_ENDS[front](params=("eta",))
    assert declared(g) == ["eta"]
    con = compile_iteration(g, 50)  # no params= here: the circuit declares eta
    assert con.params_held == ("eta",)
    res = prove(con)
    assert verdict(res).value == "PROVED", res.failure and res.failure.describe()
    # no step size was given to the compiler: the one proved stack iterates the step exactly at any
    rng = np.random.default_rng(4)
    v = {n: Fraction(int(rng.integers(-3, 4)), 4) for n in C.inputs(con.graph)}
    for eta in (Fraction(3, 7), Fraction(1, 16), Fraction(-2)):
        v["eta"] = eta
        S, _ = con.run(v, 3)
        got, want = con.readout(S), con.iterate(v, 3)
        assert all(got[n] == want[n] for n in want) and got["eta"] == eta


def test_without_params_the_step_is_refused():
    """The declaration is what makes the step repeatable: eta undeclared is an unfed input."""
    with pytest.raises(IterationError, match="'eta' is not fed"):
        compile_iteration(from_function_gd(), 2)


def test_both_front_ends_write_the_same_step():
    a, b = from_function_gd(params=("eta",)), from_sympy(gd_sympy(), placed=True, params=("eta",))
    assert C.inputs(a) == C.inputs(b) and declared(a) == declared(b)
    rng = np.random.default_rng(0)
    v = {n: Fraction(int(rng.integers(-5, 6)), int(rng.integers(1, 5))) for n in C.inputs(a)}
    assert C.evaluate(a, v) == C.evaluate(b, v)


def test_an_array_parameter_marks_every_entry_and_proves():
    """A per-coordinate step size w (D,) held fixed: x <- x - w * A^T (A x - b)."""
    g = C.from_function(lambda A, b, x, w: {"x": x - w * (A.T @ (A @ x - b)), "A": A, "b": b},
                        A=(3, 2), b=(3,), x=(2,), w=(2,), placed=True, params=("w",))
    assert declared(g) == ["w_0", "w_1"]
    con = compile_iteration(g, 7)
    assert con.params_held == ("w_0", "w_1")
    assert verdict(prove(con)).value == "PROVED"
    s = {f"w_{i}": sympy.Symbol(f"w_{i}") for i in range(2)}
    g2 = from_sympy({"x": sympy.Matrix([sympy.Symbol("x_0") * s["w_0"], sympy.Symbol("x_1") * s["w_1"]])},
                    params=("w",))
    assert declared(g2) == ["w_0", "w_1"]


def test_the_declaration_survives_a_circuit_file(tmp_path):
    g = from_function_gd(params=("eta",))
    C.dump(g, tmp_path / "step.json")
    h = C.load(tmp_path / "step.json")
    assert declared(h) == ["eta"] and compile_iteration(h, 2).params_held == ("eta",)


def refuse(call, *needles):
    with pytest.raises(C.CircuitError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg


def test_an_unknown_params_name_is_refused_in_one_line_before_fn_runs():
    def boom(**_):
        raise AssertionError("fn ran")

    refuse(lambda: C.from_function(boom, A=(N, D), x=(D,), eta=(), params=("etta",)),
           "from_function", "params", "'etta'", "not an argument", "eta")
    refuse(lambda: from_sympy(gd_sympy(), params=("etta",)), "from_sympy", "params", "'etta'", "not an input")


@pytest.mark.parametrize("params,needle", [("eta", "tuple of names"), ((1,), "not a name"),
                                           (("eta", "eta"), "named twice"), (("x_7",), "'x_7'")])
def test_bad_params_are_refused_in_one_line(params, needle):
    refuse(lambda: from_function_gd(params=params), "from_function", needle)
    refuse(lambda: from_sympy(gd_sympy(), params=params), "from_sympy", needle)


def test_a_single_entry_of_an_array_may_be_declared():
    g = C.from_function(lambda x, w: {"x": x * w}, x=(2,), w=(2,), params=("w_1",))
    assert declared(g) == ["w_1"]
