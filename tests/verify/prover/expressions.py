"""Shared by the grouped-ring tests: random polynomial expressions over named leaves (a leaf name,
a small constant, or ``(op, left, right)`` with op in + - *), and their evaluation on any
arithmetic (the proof's ring, the abstract :class:`~verify.prover.token_groups.Support` values)."""
from __future__ import annotations

import copy
import itertools

from hypothesis import strategies as st


def expressions(names, max_leaves: int):
    """Expressions over the leaf ``names`` and the constants -2..2, up to ``max_leaves`` leaves."""
    return st.recursive(st.one_of(st.sampled_from(list(names)), st.integers(-2, 2)),
                        lambda kids: st.tuples(st.sampled_from(["+", "-", "*"]), kids, kids),
                        max_leaves=max_leaves)


def evaluate(e, leaf):
    """The expression ``e`` with each leaf name ``n`` read as ``leaf(n)``."""
    if isinstance(e, tuple):
        op, a, b = e
        x, y = evaluate(a, leaf), evaluate(b, leaf)
        return x + y if op == "+" else (x - y if op == "-" else x * y)
    return leaf(e) if isinstance(e, str) else e


def assert_injective_on_pivoted(names, image, group_of, groups: int, max_degree: int) -> None:
    """For every pivot group, the monomials (up to ``max_degree``) over ``names`` drawing from the
    pivot and at most one other group have pairwise distinct images (the product of ``image[n]``)."""
    for pivot in range(groups):
        seen: dict = {}
        for deg in range(1, max_degree + 1):
            for combo in itertools.combinations_with_replacement(names, deg):
                if len({group_of(n) for n in combo} - {None} - {pivot}) > 1:
                    continue
                img = 1
                for n in combo:
                    img = img * image[n]
                assert seen.setdefault(str(img), combo) == combo, (pivot, combo, seen[str(img)])


def prediction_entry(con) -> tuple[int, int]:
    """The final state's prediction entry ``y`` (last token, the ``y`` column)."""
    return con.layout.shape[0] - 1, con.layout["y"].cols[0]


def with_final_extra(con, extra, at=prediction_entry):
    """``con`` whose final state demands ``extra(A)`` more at the entry ``at(con)`` (the proof's
    symbolic rebuild too): a claim its layers do not meet."""
    base = type(con)

    class Tampered(base):
        def final_state(self, v):
            S = base.final_state(self, v)
            ix = at(self)
            S[ix] = S[ix] + extra(v["A"])
            return S

    out = copy.copy(con)
    out.__class__ = Tampered
    out.rebuild = lambda **p: with_final_extra(con.rebuild(**p), extra, at)
    return out
