"""The compiles whose ``info["compiled"]`` was recorded from the dict-building compiler, before
:class:`constructions.compiler.info.CompileInfo` (``data/compile_info_before.json``): each case a
circuit, the ``compile_circuit`` keywords and the module constants it sets for the compile, chosen so
that every re-association outcome, every target and the channel budget are met.  Re-record only on
purpose: ``python -m tests.constructions.compile_info_cases`` writes the file again."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import circuits as C

DATA = Path(__file__).parent / "data"
RECORD = DATA / "compile_info_before.json"
TARGETS = ("baseconv", "baseconv-causal", "baseconv-mlp", "lsa", "elsa")
HORNER8 = [1, -2, 3, Fraction(1, 2), 5, -1, 2, 7, Fraction(-1, 3)]


def _horner5():
    b = C.CircuitBuilder()
    t = b.input("t", token=0, channel=0)
    acc = b.const(Fraction(1, 6))
    for c in (Fraction(-1, 5), Fraction(1, 4), Fraction(-1, 3), Fraction(1, 2), 1):
        acc = b.add(b.mul(acc, t), b.const(c))
    b.output(acc, "p")
    return b.graph()


def cases():
    """(name, circuit, compile_circuit keywords, {(module, constant): value}) per recorded compile."""
    out = []
    for t in TARGETS:
        out.append((f"dot-{t}", C.dot(3), {"target": t}, {}))
        out.append((f"horner8-{t}", C.horner(HORNER8, placed=True), {"target": t}, {}))
        out.append((f"horner8-as-written-{t}", C.horner(HORNER8, placed=True), {"target": t, "reassociate": False},
                    {}))
    out.append(("gd-eta-input-baseconv", C.gd_step(3, 2, "eta", placed=True), {"target": "baseconv"}, {}))
    out.append(("gd-ridge-lsa-heads1", C.ridge_gd_step(2, 2, Fraction(1, 16), Fraction(1, 16), placed=True),
                {"target": "lsa", "heads": 1}, {}))
    out.append(("causal-budget-refused", C.load(DATA / "causal_budget_reassociated_refused.json"),
                {"target": "baseconv-causal", "channels": "least"}, {}))
    out.append(("dot-budget-baseconv", C.dot(4), {"target": "baseconv", "channels": "least"}, {}))
    out.append(("horner8-uncompared", C.horner(HORNER8, placed=True), {"target": "baseconv"},
                {("constructions.compiler.pipeline", "COMPARE_MAX_GATES"): 1}))
    out.append(("horner5-skipped", _horner5(), {}, {("constructions.compiler.pipeline", "REASSOCIATE_MAX_GATES"): 5}))
    out.append(("horner5-forced", _horner5(), {"reassociate": True},
                {("constructions.compiler.pipeline", "REASSOCIATE_MAX_GATES"): 5}))
    return out


def compile_case(g, kw: dict, constants: dict, setattr_):
    """Compile one case; ``setattr_(module, name, value)`` sets each constant (monkeypatch.setattr in
    the tests, a save-and-restore when recording)."""
    import importlib

    from constructions.compiler import compile_circuit
    from constructions.compiler.budget import minimum_channels

    for (mod, name), value in constants.items():
        setattr_(importlib.import_module(mod), name, value)
    kw = dict(kw)
    if kw.get("channels") == "least":
        kw["channels"] = minimum_channels(C.validate(g), kw["target"] == "baseconv-causal")
    return compile_circuit(g, **kw)


def dumped(con) -> dict:
    """What the circuit command's --json writes of the compile (``json.dumps(..., default=str)``)."""
    return {"compiled": json.dumps(con.info["compiled"], indent=1, default=str),
            "info": json.dumps(con.info, indent=1, default=str)}


def record() -> None:
    import importlib

    out = {}
    for name, g, kw, constants in cases():
        saved = {}

        def set_(mod, attr, value):
            saved.setdefault((mod, attr), getattr(mod, attr))
            setattr(mod, attr, value)
        try:
            out[name] = dumped(compile_case(g, kw, constants, set_))
        finally:
            for (mod, attr), value in saved.items():
                setattr(mod, attr, value)
        print(name, json.loads(out[name]["compiled"]).get("reassociated"))
    RECORD.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record()
