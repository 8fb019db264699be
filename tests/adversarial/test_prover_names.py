"""A soundness hole: symbol-name collisions in the prover.

Before the fix, ``SymbolicProblem`` looked generators up by a name built as
``var_i_j``, so an entry and a parameter (or entries of two variables) with the
same spelling became the *same* polynomial variable and false identities were
PROVED.  Generators are now assigned by position, and display names follow a
grammar in which no two can coincide (``verify.prover.proof.entry_name``)."""
from __future__ import annotations

import numpy as np
import pytest

from verify.prover.proof import SymbolicProblem, entry_name, prove_identity


def test_entry_is_not_the_parameter_spelled_alike():
    # x[1] == parameter x_1 was PROVED when entries were named x_1
    r = prove_identity("x1-vs-param", {"x": (2,)}, lambda v: np.array([v["x"][1]], dtype=object),
                       lambda v: np.array([v["x_1"]], dtype=object), params=("x_1",))
    assert not r.ok and r.failure.counterexample is not None


def test_entries_of_two_variables_spelled_alike():
    # A[1,1] == A_1[1] was PROVED when both were named A_1_1
    r = prove_identity("A11-vs-A_1", {"A": (2, 2), "A_1": (2,)},
                       lambda v: np.array([v["A"][1, 1]], dtype=object),
                       lambda v: np.array([v["A_1"][1]], dtype=object))
    assert not r.ok
    assert set(r.failure.counterexample.assignment) <= {"A[1,1]", "A_1[1]"}


def test_scalar_named_like_an_entry():
    # a scalar variable literally named "x[0]" (a circuit input may be) is not the entry x[0]
    r = prove_identity("quoted", {"x": (1,), "x[0]": ()}, lambda v: np.array([v["x"][0]], dtype=object),
                       lambda v: np.array([v["x[0]"][()]], dtype=object))
    assert not r.ok
    assert set(r.failure.counterexample.assignment) <= {"x[0]", "'x[0]'"}


@pytest.mark.parametrize("variables,params", [
    ({"A": (2, 2), "A_1": (2,), "A_1_1": ()}, ("A_1_1_",)),
    ({"x": (3,), "x[1]": (), "x[1": ()}, ("x_1",)),
])
def test_every_generator_is_distinct_and_every_name_unique(variables, params):
    sp = SymbolicProblem(variables, params)
    gens = [g for a in sp.v.values() for g in np.asarray(a, dtype=object).reshape(-1)] + list(sp.params.values())
    assert len(set(gens)) == len(gens) == sp.R.ngens
    assert len(set(sp.names)) == len(sp.names)


def test_a_parameter_may_not_reuse_a_variable_name():
    with pytest.raises(ValueError, match="used twice"):
        SymbolicProblem({"eta": ()}, ("eta",))


def test_entry_name_grammar():
    assert entry_name("A", (1, 2)) == "A[1,2]" and entry_name("b", ()) == "b"
    assert entry_name("x[0]", ()) == "'x[0]'" and entry_name("x[0]", (1,)) == "'x[0]'[1]"
