"""constructions/base.py FunctionConstruction: a stack between two states given as functions
(seed 000 App. D.2.1's MULTIPLY, one BaseConv layer, as the example), proved and refused."""
import numpy as np
import pytest

from constructions import ops
from constructions.base import FunctionConstruction
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder
from verify.prover.proof import prove


def _multiply(final):
    """x <- x * y entry-wise on n tokens and one channel pair (eq. (22)); ``final`` the claimed output."""
    al = ChannelAllocator(3)
    al.block("x", 1, "first factor; the product after the layer")
    al.block("y", 1, "second factor")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    B.product(("x", 0), gate_src=("y", 0), conv_src=("x", 0))
    B.w_out(("x", 0), ("x", 0))
    return FunctionConstruction(
        name="multiply", reference="seed 000 App. D.2.1 eq. (22)", layout=lay, prologue=[], body=[],
        epilogue=[B.build()], params={}, variables={"u": (3, 2)},
        make_input=lambda v: np.array(v["u"], dtype=object, copy=True), make_final=final)


def _product(v):
    u = np.asarray(v["u"], dtype=object)
    out = ops.zeros_like_object(u.shape)
    for t in range(u.shape[0]):
        out[t, 0] = u[t, 0] * u[t, 1]
    return out


def test_a_function_construction_is_proved_and_its_states_are_the_functions():
    con = _multiply(_product)
    v = {"u": np.array([[2, 3], [5, 7], [1, 4]], dtype=object)}
    assert con.state(v).tolist() == con.input_state(v).tolist() == v["u"].tolist()
    assert con.step(v) is v and con.depth(5) == 1
    S, _ = con.run(v, 0)
    assert S.tolist() == [[6, 0], [35, 0], [4, 0]] == con.final_state(v).tolist()
    assert prove(con).ok


def test_a_wrong_specification_is_refused_and_missing_functions_are_a_type_error():
    def wrong(v):
        out = _product(v)
        out[1, 0] = out[1, 0] + 1
        return out

    assert not prove(_multiply(wrong)).ok
    with pytest.raises(TypeError, match="make_input and make_final"):
        FunctionConstruction(name="x", reference="", layout=None, prologue=[], body=[], epilogue=[], params={},
                             variables={})
