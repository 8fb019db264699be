"""circuits.frontend.from_function: numpy-style functions traced into circuits.

Checked against numpy itself: the same function run on object arrays of Fractions is the reference
value (Hypothesis, random shapes and expressions); names, outputs, sharing and places are checked
on small cases, and every refused operation is refused in one line naming it and this file's line.
"""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from circuits import frontend as fe
from circuits.frontend import from_function, prefix_sum, shift, token_sum

from tests.strategies import rationals_st

HERE = "test_frontend.py"


def frac_array(shape, draw_value):
    a = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        a[idx] = draw_value()
    return a


def input_values(shapes: dict, draw_value) -> tuple[dict, dict]:
    """Random Fractions for every argument: ``({arg: array or Fraction}, {input name: Fraction})``."""
    arrays, names = {}, {}
    for arg, s in shapes.items():
        if s == ():
            arrays[arg] = names[arg] = draw_value()
            continue
        arrays[arg] = frac_array(s, draw_value)
        for idx in np.ndindex(*s):
            names[fe.entry_name(arg, idx)] = arrays[arg][idx]
    return arrays, names


def reference_outputs(result) -> dict:
    """numpy's own value of ``fn`` (run on Fractions), named as from_function names its outputs."""
    groups = (list(result.items()) if isinstance(result, dict) else
              [(f"y{i}", v) for i, v in enumerate(result)] if isinstance(result, tuple) else [("y", result)])
    out = {}
    for key, v in groups:
        a = np.asarray(v, dtype=object)
        if a.ndim == 0:
            out[key] = Fraction(a[()])
        for idx in np.ndindex(*a.shape) if a.ndim else ():
            out[fe.entry_name(key, idx)] = Fraction(a[idx])
    return out


# --------------------------------------------------------------------------- random programs vs numpy

# a program is a tuple tree; ``run`` interprets it with numpy only, so the same tree is the traced
# function and, on Fractions, its reference value.  Vectors have length n, matrices are m x n.
CONSTS = st.fractions(min_value=-3, max_value=3, max_denominator=4)
NONZERO = CONSTS.filter(lambda c: c != 0)
VEC_LEAVES = st.sampled_from([("x",), ("ones",)])
MAT_LEAVES = st.just(("A",))


def _vec(children):
    vec, mat = children
    return st.one_of(
        st.tuples(st.just("AtA"), vec), st.tuples(st.just("add"), vec, vec), st.tuples(st.just("sub"), vec, vec),
        st.tuples(st.just("mul"), vec, vec), st.tuples(st.just("scale"), CONSTS, vec),
        st.tuples(st.just("div"), vec, NONZERO), st.tuples(st.just("pow"), vec, st.integers(0, 3)),
        st.tuples(st.just("s"), vec), st.tuples(st.just("rev"), vec), st.tuples(st.just("sumall"), vec),
        st.tuples(st.just("prefix"), vec), st.tuples(st.just("shift"), vec, st.integers(-2, 2)),
        st.tuples(st.just("colsum"), mat), st.tuples(st.just("MtMv"), mat, vec), st.tuples(st.just("neg"), vec))


def _mat(children):
    vec, mat = children
    return st.one_of(
        st.tuples(st.just("madd"), mat, mat), st.tuples(st.just("mmul"), mat, mat),
        st.tuples(st.just("mscale"), CONSTS, mat), st.tuples(st.just("bcast"), mat, vec),
        st.tuples(st.just("mpow"), mat, st.integers(0, 2)), st.tuples(st.just("mprefix"), mat),
        st.tuples(st.just("mshift"), mat, st.integers(-1, 1)))


def programs(depth: int):
    vec, mat = VEC_LEAVES, MAT_LEAVES
    for _ in range(depth):
        vec, mat = st.one_of(VEC_LEAVES, _vec((vec, mat))), st.one_of(MAT_LEAVES, _mat((vec, mat)))
    return st.tuples(vec, mat)


def run(t, A, x, s):
    r = lambda u: run(u, A, x, s)  # noqa: E731
    op = t[0]
    if op == "x":
        return x
    if op == "A":
        return A
    if op == "ones":
        return np.ones(len(x), dtype=int)
    if op == "AtA":
        return A.T @ (A @ r(t[1]))
    if op in ("add", "madd"):
        return r(t[1]) + r(t[2])
    if op == "sub":
        return r(t[1]) - r(t[2])
    if op in ("mul", "mmul"):
        return r(t[1]) * r(t[2])
    if op in ("scale", "mscale"):
        return t[1] * r(t[2])
    if op == "div":
        return r(t[1]) / t[2]
    if op in ("pow", "mpow"):
        return r(t[1]) ** t[2]
    if op == "s":
        return s * r(t[1])
    if op == "rev":
        return r(t[1])[::-1]
    if op == "sumall":
        v = r(t[1])
        return v.sum() * v
    if op in ("prefix", "mprefix"):
        return prefix_sum(r(t[1]))
    if op in ("shift", "mshift"):
        return shift(r(t[1]), t[2])
    if op == "colsum":
        return token_sum(r(t[1]))
    if op == "MtMv":
        M = r(t[1])
        return M.T @ (M @ r(t[2]))
    if op == "neg":
        return -r(t[1])
    if op == "bcast":
        return r(t[1]) * r(t[2])
    raise AssertionError(op)


@given(m=st.integers(1, 3), n=st.integers(1, 3), prog=programs(3), data=st.data())
def test_random_programs_evaluate_as_numpy_does_on_fractions(m, n, prog, data):
    shapes = {"A": (m, n), "x": (n,), "s": ()}
    fn = lambda A, x, s: (run(prog[0], A, x, s), run(prog[1], A, x, s))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing the trace builds is left unused
        g = from_function(fn, **shapes)
    arrays, values = input_values(shapes, lambda: data.draw(rationals_st()))
    want = reference_outputs(fn(**arrays))
    got = C.evaluate(g, values)
    assert set(got) == set(want)
    assert {k: Fraction(v) for k, v in got.items()} == want


# --------------------------------------------------------------------------- names, outputs, sharing


def test_inputs_are_named_by_argument_and_index():
    g = from_function(lambda A, x, s, T: s * (A @ x) + T.sum(axis=(1, 2))[:2], A=(2, 3), x=3, s=(), T=(2, 2, 2))
    assert C.inputs(g) == sorted([f"A_{i}_{j}" for i in range(2) for j in range(3)] + ["x_0", "x_1", "x_2", "s"]
                                 + [f"T_{i}_{j}_{k}" for i in range(2) for j in range(2) for k in range(2)])
    assert C.outputs(g) == ["y_0", "y_1"]


def test_unused_arguments_stay_inputs():
    g = from_function(lambda x, unused: x * x, x=(), unused=(2,))
    assert C.inputs(g) == ["unused_0", "unused_1", "x"] and C.outputs(g) == ["y"]


@pytest.mark.parametrize("fn, names", [
    (lambda x: x * 2, ["y_0", "y_1"]),
    (lambda x: x.sum(), ["y"]),
    (lambda x: np.outer(x, x), ["y_0_0", "y_0_1", "y_1_0", "y_1_1"]),
    (lambda x: (x.sum(), x), ["y0", "y1_0", "y1_1"]),
    (lambda x: {"total": x.sum(), "x": x * 3}, ["total", "x_0", "x_1"]),
    (lambda x: [x[0] * x[1], 7], ["y_0", "y_1"]),
])
def test_outputs_are_named_by_the_returned_structure(fn, names):
    assert C.outputs(from_function(fn, x=(2,))) == sorted(names)


def test_constant_pass_through_and_repeated_outputs():
    g = from_function(lambda x: {"c": Fraction(2, 3), "z": 0, "x": x, "again": x, "sq": x * x, "sq2": x * x}, x=())
    vals = C.evaluate(g, {"x": Fraction(5)})
    assert vals == {"c": Fraction(2, 3), "z": 0, "x": 5, "again": 5, "sq": 25, "sq2": 25}
    node = C.output_nodes(g)
    assert g.nodes[node["x"]]["op"] == "input"  # a pass-through output is the input itself


def test_common_subexpressions_are_one_gate():
    # a*b and b*a, A @ x computed twice: each product is one node
    g = from_function(lambda A, x: {"u": A @ x, "v": (A @ x) * 2, "w": x[0] * x[1] + x[1] * x[0]}, A=(3, 2), x=(2,))
    names = {n: d.get("name") for n, d in g.nodes(data=True)}
    products = [v for v, d in g.nodes(data=True) if d["op"] == "mul"
                and all(g.nodes[u]["op"] == "input" for u in g.predecessors(v))]
    pairs = sorted(tuple(sorted(names[u] for u in g.predecessors(v))) for v in products)
    assert len(pairs) == len(set(pairs)) == 3 * 2 + 1  # A_i_j x_j once each, x_0 x_1 once


def test_sums_built_as_chains_are_written_as_one_gate():
    """numpy's object ``@`` and ``sum`` add term by term; the circuit has one n-ary add per sum."""
    g = from_function(lambda x: x.sum(), x=(6,))
    assert [d["op"] for _, d in g.nodes(data=True)].count("add") == 1
    assert C.metrics(g)["depth"] == 1


def test_powers_are_repeated_squaring_with_shared_squares():
    g = from_function(lambda t: {"p8": t ** 8, "p64": t ** 64, "p0": t ** 0, "p1": t ** 1}, t=())
    assert C.evaluate(g, {"t": Fraction(3, 2)}) == {"p8": Fraction(3, 2) ** 8, "p64": Fraction(3, 2) ** 64,
                                                    "p0": 1, "p1": Fraction(3, 2)}
    assert sum(1 for _, d in g.nodes(data=True) if d["op"] == "mul") == 6  # t^2, t^4, ..., t^64


def test_constants_fold_and_scalings_merge():
    g = from_function(lambda x: {"a": (x + 1) - 1, "b": -(-x) * 3 / 3, "c": x * 0 + 2}, x=())
    assert C.evaluate(g, {"x": Fraction(7)}) == {"a": 7, "b": 7, "c": 2}
    assert g.nodes[C.output_nodes(g)["c"]]["op"] == "const"


def test_numpy_functions_that_are_allowed():
    fn = lambda A, x: {  # noqa: E731
        "dot": np.dot(A, x), "ein": np.einsum("ij,j->i", A, x), "tr": np.trace(A @ A.T),
        "cat": np.concatenate([x, x[::-1]]), "mp": np.linalg.matrix_power(A @ A.T, 2),
        "mean": np.mean(x), "kron": np.kron(x, x), "pad": np.pad(x, 1), "cum": np.cumsum(A, axis=1),
        "sq": np.square(x), "tril": np.tril(A @ A.T)}
    shapes = {"A": (2, 2), "x": (2,)}
    g = from_function(fn, **shapes)
    arrays, values = input_values(shapes, iter([Fraction(k, 3) for k in range(1, 7)]).__next__)
    assert {k: Fraction(v) for k, v in C.evaluate(g, values).items()} == reference_outputs(fn(**arrays))


# --------------------------------------------------------------------------- sequence helpers


def test_sequence_helpers_on_fractions():
    X = np.array([[Fraction(1), Fraction(2)], [Fraction(3), Fraction(4)], [Fraction(5), Fraction(6)]], dtype=object)
    assert token_sum(X).tolist() == [9, 12]
    assert prefix_sum(X).tolist() == [[1, 2], [4, 6], [9, 12]]
    assert shift(X, 1).tolist() == [[0, 0], [1, 2], [3, 4]]
    assert shift(X, -2).tolist() == [[5, 6], [0, 0], [0, 0]]
    assert shift(X, 0).tolist() == X.tolist() and shift(X, 3).tolist() == [[0, 0]] * 3
    with pytest.raises(C.CircuitError, match="shift: k must be an int, got 1.5"):
        shift(X, 1.5)


def test_prefix_sum_is_a_chain_of_one_sum_per_token():
    g = from_function(prefix_sum, X=(50, 2))
    assert [d["op"] for _, d in g.nodes(data=True)].count("add") == 49 * 2
    g = from_function(lambda X: shift(X, 2), X=(4,))
    assert C.evaluate(g, {f"X_{i}": Fraction(i + 1) for i in range(4)}) == {"y_0": 0, "y_1": 0, "y_2": 1, "y_3": 2}


# --------------------------------------------------------------------------- places


def test_default_layout_is_the_gd_builders():
    eta = Fraction(1, 16)
    g = from_function(lambda A, b, x: {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}, A=(5, 3), b=(5,), x=(3,),
                      placed=True)
    h = C.gd_step(5, 3, eta, placed=True)
    assert C.placement(g) == C.placement(h)
    pg, ph = C.polynomials(g), C.polynomials(h)
    assert set(pg) == set(ph) and all((pg[k] - ph[k]).expand() == 0 for k in ph)


def test_default_layout_is_the_newton_schulz_builders():
    g = from_function(lambda A, M: {"M": M @ (2 * np.eye(3, dtype=int) - A.T @ A @ M), "A": A}, A=(4, 3), M=(3, 3),
                      placed=True)
    h = C.newton_schulz_step(3, 4, placed=True)
    assert C.placement(g) == C.placement(h)
    pg, ph = C.polynomials(g), C.polynomials(h)
    assert all((pg[k] - ph[k]).expand() == 0 for k in ph)


def test_default_layout_columns_query_token_and_scalars():
    p = fe.default_layout({"u": (3,), "v": (3,), "q": (2,), "eta": ()})
    assert p == {"u_0": (0, 0), "u_1": (1, 0), "u_2": (2, 0), "v_0": (0, 1), "v_1": (1, 1), "v_2": (2, 1),
                 "q_0": (3, 2), "q_1": (3, 3), "eta": (3, 4)}


def test_explicit_places():
    g = from_function(lambda x, s: {"x": s * x, "z": x.sum()}, x=(2,), s=(),
                      placed={"x": lambda j: (j, 0), "s": (0, 1)})
    p = C.placement(g)
    assert p.inputs == {"s": (0, 1), "x_0": (0, 0), "x_1": (1, 0)}
    assert p.outputs == {"x_0": (0, 0), "x_1": (1, 0), "z": None}


def must_not_run(**_):
    pytest.fail("fn ran before its arguments were checked")


@pytest.mark.parametrize("kwargs, words", [
    ({"x": (2, 2, 2), "placed": True}, "placed=True lays out arguments of at most 2 dimensions; x has shape (2, 2, 2)"),
    ({"x": (2,), "placed": {"x": lambda j: (0, 0)}}, "placed: x_0 and x_1 are both at (0, 0)"),
    ({"x": (2,), "s": (), "placed": {"x": lambda j: (j, 0)}}, "placed: no places for an argument s"),
    ({"x": (), "placed": {"x": (0, 0), "z": (0, 1)}}, "placed: z is not an argument"),
    ({"x": (), "placed": {"x": (0, -1)}}, "placed: x: a place is a pair (token, channel) of ints >= 0, got (0, -1)"),
    ({"x": (), "placed": "rows"}, "placed must be True, False or a dict of places, got 'rows'"),
    ({"x": (0,)}, "argument x: shape must be a tuple of positive ints"),
    ({"x": -1}, "argument x: shape must be a tuple of positive ints"),
    ({"x": (2.0,)}, "argument x: shape must be a tuple of positive ints"),
    ({"x": True}, "argument x: shape must be a tuple of positive ints"),
    ({"x": [2]}, "argument x: shape must be a tuple of positive ints"),
    ({"A": (2, 2), "A_0": (2,)}, "arguments A and A_0 both name the input 'A_0_0'"),
])
def test_bad_arguments_are_refused_before_fn_runs(kwargs, words):
    with pytest.raises(C.CircuitError) as e:
        from_function(must_not_run, **kwargs)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_entry_limit(monkeypatch):
    monkeypatch.setattr(fe, "MAX_ENTRIES", 10)
    with pytest.raises(C.CircuitError, match="the arguments have 12 entries, above the limit "
                                             "circuits.frontend.MAX_ENTRIES = 10"):
        from_function(must_not_run, A=(3, 4))


def test_fn_must_be_callable():
    with pytest.raises(C.CircuitError, match="from_function: fn must be callable, got int"):
        from_function(3, x=())


# --------------------------------------------------------------------------- refusals

# (words the message names, the function: each on its own line, which the message must name)
REFUSED = [
    ("np.sqrt", lambda A, s: np.sqrt(A)),
    ("np.sqrt", lambda A, s: np.sqrt(s)),
    ("np.exp", lambda A, s: np.exp(np.asarray(A))),
    ("np.log", lambda A, s: np.log(A)),
    ("np.maximum", lambda A, s: np.maximum(A, 0)),
    ("np.maximum.reduce", lambda A, s: A.max()),
    ("np.less ('<')", lambda A, s: A < 1),
    ("np.greater_equal ('>=')", lambda A, s: A >= A),
    ("np.equal ('==')", lambda A, s: A == 0),
    ("the comparison '<'", lambda A, s: s < 1),
    ("the comparison '>'", lambda A, s: max(s, A[0, 0])),
    ("the comparison '=='", lambda A, s: s == A[0, 1]),
    ("the comparison '!='", lambda A, s: s != 0),
    ("the truth value of a variable", lambda A, s: A if s else -A),
    ("np.absolute ('abs()')", lambda A, s: abs(A)),
    ("abs()", lambda A, s: abs(s)),
    ("division by a variable ('/')", lambda A, s: A / s),
    ("division by a variable ('/')", lambda A, s: 1 / s),
    ("division by a variable ('/')", lambda A, s: A / A),
    ("division by zero ('/')", lambda A, s: A / 0),
    ("np.reciprocal", lambda A, s: np.reciprocal(A)),
    ("the float constant 0.5 in '*'", lambda A, s: 0.5 * s),
    ("the float constant 0.5 in '*'", lambda A, s: A * 0.5),
    ("the float constant 2.0 in '+'", lambda A, s: s + np.float64(2)),
    ("a float array (dtype float64) in '@'", lambda A, s: np.eye(2) @ A),
    ("a float array (dtype float32) in '+'", lambda A, s: A + np.ones(2, dtype=np.float32)),
    ("dtype=float64 in np.add.reduce", lambda A, s: A.sum(dtype=float)),
    ("a conversion to float", lambda A, s: float(s)),
    ("a conversion to float", lambda A, s: A.astype(float)),
    ("a conversion to int", lambda A, s: int(s)),
    ("a variable used as an index", lambda A, s: A[s]),
    ("round()", lambda A, s: round(s)),
    ("floor division '//'", lambda A, s: s // 2),
    ("np.floor_divide ('//')", lambda A, s: A // 2),
    ("the remainder '%'", lambda A, s: s % 2),
    ("np.remainder ('%')", lambda A, s: A % 2),
    ("divmod()", lambda A, s: divmod(s, 2)),
    ("the bitwise '&'", lambda A, s: s & 1),
    ("np.bitwise_and ('&')", lambda A, s: A & A),
    ("the bitwise '~'", lambda A, s: ~s),
    ("the shift '<<'", lambda A, s: s << 1),
    ("a power by a variable ('**')", lambda A, s: A ** s),
    ("a variable exponent ('**')", lambda A, s: 2 ** s),
    ("the negative power ** -1 ('**')", lambda A, s: s ** -1),
    ("the power ** 0.5 ('**')", lambda A, s: A ** 0.5),
    ("the power ** 1/2 ('**')", lambda A, s: s ** Fraction(1, 2)),
    ("the power ** 65 ('**')", lambda A, s: s ** 65),
    ("pow() with a modulus", lambda A, s: pow(s, 2, 5)),
    ("'@' on a scalar", lambda A, s: s @ s),
    ("the bool True in '+'", lambda A, s: s + True),
    ("an operand of type str in '*'", lambda A, s: s * "a"),
    ("np.linalg.inv", lambda A, s: np.linalg.inv(A)),
    ("np.linalg.solve", lambda A, s: np.linalg.solve(A, A[0])),
    ("np.where", lambda A, s: np.where(A, 1, 2)),
    ("np.sort", lambda A, s: np.sort(A)),
    ("np.round", lambda A, s: np.round(A)),
    ("np.conjugate", lambda A, s: A.conj()),
]


@pytest.mark.parametrize("words, fn", REFUSED, ids=[f"{i}-{w}" for i, (w, _) in enumerate(REFUSED)])
def test_refused_operations_name_the_operation_and_the_source_line(words, fn):
    with pytest.raises(fe.UnsupportedOperation) as e:
        from_function(fn, A=(2, 2), s=())
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("from_function: ") and words in msg, msg
    assert f"{HERE}:{fn.__code__.co_firstlineno} (" in msg and " is refused: " in msg, msg
    assert isinstance(e.value, C.CircuitError)


def test_a_value_kept_from_another_trace_is_refused():
    kept = []
    from_function(lambda x: kept.append(x) or x, x=())
    with pytest.raises(fe.UnsupportedOperation, match=r"'\+' at .*test_frontend.py:\d+ .*two traces"):
        from_function(lambda y: y + kept[0], y=())
    with pytest.raises(C.CircuitError, match="output 'y' is a value of another trace"):
        from_function(lambda y: kept[0], y=())


@pytest.mark.parametrize("fn, words", [
    (lambda x: 0.5, "output 'y' is the float 0.5; floats are not exact"),
    (lambda x: np.ones(2), "output 'y' is a float array (dtype float64)"),
    (lambda x: [x, 1.5], "output 'y_1' is the float 1.5"),
    (lambda x: None, "output 'y' is None (NoneType), not a traced value or an exact constant"),
    (lambda x: {"a": "text"}, "output 'a' is 'text' (str)"),
    (lambda x: {1: x}, "the returned dict's key 1 is not a non-empty str"),
    (lambda x: {"y": [x, x], "y_1": x}, "outputs 'y' and 'y_1' both name the output 'y_1'"),
    (lambda x: np.zeros((0,), dtype=object), "fn returned no values (an empty array)"),
])
def test_bad_return_values_are_refused_in_one_line(fn, words):
    with pytest.raises(C.CircuitError) as e:
        from_function(fn, x=())
    assert words in str(e.value) and "\n" not in str(e.value)


def test_builder_refuses_a_gate_of_fewer_than_two_operands_at_the_call():
    b = C.CircuitBuilder()
    x = b.input("x")
    for gate, args, n in ((b.add, (x,), 1), (b.mul, (), 0)):
        with pytest.raises(C.CircuitError) as e:
            gate(*args)
        line = e.traceback[0].lineno + 1  # the call's line (1-based) in this test
        assert f"{gate.__name__} needs at least 2 operands, got {n}, at " in str(e.value)
        assert f"{HERE}:{line} (gate(*args))" in str(e.value)
