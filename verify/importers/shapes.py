"""The shapes an imported file's layers must have on the state they are proved on, by kind.

Each layer kind's rule is registered in ``constructions.kinds`` (``import_shapes``): a function
``(layer, T, C, what) -> None`` (fits) or the rest of a one-line refusal.  A kind without a rule
is refused too, before the proof, never checked by a guess.
"""
from __future__ import annotations

from constructions import kinds
from polyverify.plumbing.cli import UsageError


def check_layer_shapes(layers, shape, what: str, path) -> None:
    """Every layer of the file acts on ``shape`` (tokens x channels) states, by its kind's rule
    (``constructions.kinds``, ``import_shapes``).  A file whose arrays do not fit, or holding a
    kind with no rule, is refused here, before the proof, naming the first array."""
    T, C = shape
    for i, L in enumerate(layers):
        try:
            rule = kinds.get(L.kind, "import_shapes")
        except kinds.KindUnsupported as e:
            raise UsageError(f"{path}: layer {i}: {e}") from None
        bad = rule(L, T, C, what)
        if bad:
            raise UsageError(f"{path}: layer {i} {bad}")


def _baseconv_shapes(L, T: int, C: int, what: str) -> str | None:
    """BaseConv: (T, C) biases and filters, (C, C) weights: ``L.shape`` is (T, C)."""
    got = tuple(L.shape)
    return None if got == (T, C) else f"acts on {got[0]} x {got[1]} states; {what} {T} x {C}"


def _attention_shapes(L, T: int, C: int, what: str) -> str | None:
    """LSA / ELSA heads: (C, C) weights; ELSA's bias matrices B1, B2, B3 (T, C)."""
    for name, arr in L.arrays().items():
        want = (T, C) if L.kind == "elsa" and name.rsplit(".", 1)[-1].startswith("B") else (C, C)
        if tuple(arr.shape) != want:
            return (f"({L.kind}) {name} has shape {tuple(arr.shape)}, not {want[0]} x {want[1]}: {what} {T} x {C} "
                    f"states")
    return None


def _token_lsa_shapes(L, T: int, C: int, what: str) -> str | None:
    """Token-form LSA: (P, Q) per head, (d+1, d+1) for C = d + 1 coordinates per token."""
    for arr in L.arrays().values():
        if tuple(arr.shape) != (C, C):
            return f"has {arr.shape[0]} coordinates; {what} {C}"
    return None


# each kind's shape rule (constructions/kinds.py)
kinds.provide("baseconv", "import_shapes", _baseconv_shapes)
kinds.provide("lsa", "import_shapes", _attention_shapes)
kinds.provide("elsa", "import_shapes", _attention_shapes)
kinds.provide("token_lsa", "import_shapes", _token_lsa_shapes)
