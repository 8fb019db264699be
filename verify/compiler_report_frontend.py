"""The section "From Python and sympy" of ``docs/compiler.md`` (``python -m verify.compiler_report``):
the front ends ``circuits.from_function`` and ``circuits.from_sympy``, with the code of
``docs/frontend_example.py``, which tests/circuits/test_frontend_docs.py runs as written.  Text
only: no number in it comes from a run."""
from __future__ import annotations

from pathlib import Path

#: the runnable example the section shows
EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "frontend_example.py"
TITLE = "## From Python and sympy"


def example_code() -> str:
    """The example's code as the section shows it: the script from its first import on."""
    text = EXAMPLE.read_text()
    return text[text.index("from fractions import Fraction"):].rstrip("\n")


def section() -> list[str]:
    """The section's markdown lines (a blank line first)."""
    return [
        "", TITLE, "",
        "A circuit need not be written gate by gate. Two front ends turn an algorithm as a researcher writes it "
        "into a validated circuit, which `compile_circuit` compiles and the prover proves like any other:",
        "",
        "- `circuits.from_function(fn, **shapes)` (`circuits/frontend.py`) calls a numpy-style function once on "
        "symbolic object arrays: `A=(20, 5)` is an input array whose entries are the inputs `A_i_j` (`x=(5,)`: "
        "`x_j`; `()`: a scalar). `fn` may use `+ - *`, `@`, `.T`, `.sum(axis)`, indexing, slicing, broadcasting, the "
        "structural numpy functions, `**` by an int and division by an exact constant; a returned array is the "
        "output `y` (`y_i`, `y_i_j`), a tuple the outputs `y0, y1, ...`, a dict names them. Every other operation "
        "(division by a variable, comparisons, `np.sqrt`, `np.linalg.inv`, a float constant such as `0.5` or "
        "`np.eye(3)`) is refused with one line naming the operation and the user's `file:line`. Equal "
        "subexpressions are one gate (the trace is hash-consed); sums built term by term (numpy's object `@`) are "
        "written as one n-ary gate. `token_sum`, `prefix_sum` (causal) and `shift` are the sequence-level helpers "
        "(rows are tokens).",
        "- `circuits.from_sympy({\"y\": expr, ...})` (`circuits/frontend_sympy.py`) takes polynomials with rational "
        "coefficients; the symbols are the inputs, `sympy.cse` shares subexpressions, a `Matrix` names its "
        "entries `y_i` / `y_i_j`. A non-polynomial subexpression (`1/x`, `sqrt(x)`, `sin(x)`, `pi`) is refused "
        "by name, and so is a float coefficient, even one that is a binary fraction (`0.1` is not 1/10): the "
        "exact number is asked for (`sympy.Rational`).",
        "- `placed=True` lays the inputs on the builders' grid, rows as tokens (a 2-D argument row `i` on token "
        "`i`; a vector as long as the token count a column; other vectors and scalars on one extra token, in "
        "channels of their own), and an output named like an input (the new iterate `x_j`, a passed-through "
        "`A_i_j`) at that input's place, so a step is a repeatable body; `from_sympy` reads `A_i_j` names as "
        "arrays. A dict gives the places explicitly.",
        "- `params=(\"eta\", ...)` (both front ends) declares inputs parameters of a step: their input nodes carry "
        "`\"param\": true`, the mark `constructions.iterated` reads from a circuit file, so "
        "`compile_iteration(from_function(step, params=(\"eta\",), ...), k)` holds `eta` in the state unchanged, a "
        "free symbol of the proof: one proof for every step size (`tests/circuits/test_frontend_params.py`). A name "
        "is an argument (`from_sympy`: a symbol, or the array of symbols `w_i`) and marks all its entries, or one "
        "entry (`w_1`); any other name is refused in one line before anything is traced.",
        "",
        "The example (`docs/frontend_example.py`) prints each circuit's layers and verdict per target, then the "
        "refusal of `np.sqrt`:",
        "", "```python", example_code(), "```"]


__all__ = ["EXAMPLE", "TITLE", "example_code", "section"]
