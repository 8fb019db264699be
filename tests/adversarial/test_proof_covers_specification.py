"""Red-team follow-ups on the prover and user-written rationals.

1. A symbolic proof must cover the construction's *specification* too.  ``prove`` proves
   ``con.rebuild(eta=<symbol>)``; a ``step`` (or ``final_state``, ``intermediate_states``) that
   branches on the parameter's value (``if self.params['eta'] == 1/16``) computed another
   claim on the symbol than at the value, and the symbolic proof was PROVED while
   ``prove(con, symbolic=False)`` FAILED on both backends (the layer check of item 3 compared
   only the layers).  Now the specification's outputs rebuilt on the symbols, at the concrete
   values, are compared with ``con``'s own as polynomials (``verify.prover.proof.specification_cover``),
   and where they differ ``con`` is proved at its concrete values.
2. Rationals written with a huge exponent (``1e999999999``) made ``Fraction`` build a
   billion-digit integer: ``gd --eta``, ``import --set``, and a weight file's ``exact``
   metadata ran until killed.  Every such string now goes through the bounded
   ``polyverify.plumbing.rational.parse_rational``: refused at once, exit 2, one line.
"""
from __future__ import annotations

import dataclasses
import io
import json
import struct
import time
from fractions import Fraction

import numpy as np
import pytest

from constructions.gd_attention import GDLSA, gd_lsa
from constructions.gd_baseconv import GDBaseConv, gd_baseconv
from constructions.weights_io import WeightFileError, load
from polyverify.plumbing.rational import MAX_DIGITS, RationalError, parse_rational
from verify.construct import main
from verify.prover.proof import prove, prove_intermediate_states, specification_cover

ETA = Fraction(1, 16)


# ------------------------------------------------------------------ 1. the specification's cover

def _wrap(con, cls, build):
    """``con`` as an instance of ``cls`` (same fields) whose rebuild wraps again."""
    new = cls(**{f.name: getattr(con, f.name) for f in dataclasses.fields(con) if f.init})
    new.rebuild = lambda **kw: _wrap(build(**kw), cls, build)
    return new


def _at_value(params: dict, key: str) -> bool:
    x = params[key]
    return isinstance(x, (Fraction, int)) and x == ETA


class SneakyStep(GDBaseConv):
    """The red team's repro: at eta == 1/16 exactly, a doubled step."""

    def step(self, v):
        out = super().step(v)
        if _at_value(self.params, "eta"):
            out = dict(out)
            out["x"] = np.asarray(out["x"]) * 2 - np.asarray(v["x"])
        return out


class SneakyFinal(GDBaseConv):
    """At eta == 1/16, a final state with one entry doubled."""

    def final_state(self, v):
        S = super().final_state(v)
        if _at_value(self.params, "eta"):
            S = S.copy()
            S[..., -1, -1] = S[..., -1, -1] * 2 + 1
        return S


class SneakyDeclared(GDBaseConv):
    """At eta == 1/16, other declared intermediate states (the proof of them reads these)."""

    def intermediate_states(self, v, section):
        ds = super().intermediate_states(v, section)
        if ds is not None and _at_value(self.params, "eta"):
            d0 = ds[0]
            e = np.array(d0.expected, dtype=object, copy=True)
            i, j = map(int, np.argwhere(d0.mask)[0])
            e[..., i, j] = e[..., i, j] + 1
            ds = [dataclasses.replace(d0, expected=e), *ds[1:]]
        return ds


class SneakyLSA(GDLSA):
    """gd-lsa (two symbolic parameters, the grouped ring) whose step is wrong at sqrt_eta == 1/4."""

    def step(self, v):
        out = super().step(v)
        if isinstance(self.params["sqrt_eta"], Fraction) and self.params["sqrt_eta"] == Fraction(1, 4):
            out = dict(out)
            out["x"] = np.asarray(out["x"]) * 3
        return out


def sneaky(cls):
    build = lambda **kw: gd_baseconv(3, 2, **kw)  # noqa: E731
    return _wrap(build(eta=ETA), cls, build)


@pytest.mark.parametrize("backend", ["flint", "sympy"])
def test_value_branching_step_is_not_proved(backend):
    """The red team's repro (/tmp/attack/cover.py): FAILED concretely, PROVED symbolically before."""
    con = sneaky(SneakyStep)
    assert not prove(con, symbolic=False, backend=backend).ok
    assert not prove(con, backend=backend).ok  # refuted first, at the concrete value
    r = prove(con, backend=backend, refute=False)  # the exact proof alone: what its cover says
    assert not r.ok
    assert r.symbolic_params == []  # proved at the concrete value
    assert "specification" in r.symbolic_cover and "step(v)['x']" in r.symbolic_cover
    assert "differs from the construction's own" in r.symbolic_cover


def test_value_branching_step_intermediate_states():
    con = sneaky(SneakyStep)
    r = prove_intermediate_states(con)
    assert not r.ok and r.symbolic_params == [] and "specification" in r.symbolic_cover


def test_value_branching_final_state_is_not_proved():
    con = sneaky(SneakyFinal)
    assert not prove(con, symbolic=False).ok
    assert not prove(con).ok  # refuted first, at the concrete value
    r = prove(con, refute=False)  # the exact proof alone: what its cover says
    assert not r.ok and r.symbolic_params == [] and "final_state(v)" in r.symbolic_cover


def test_value_branching_declared_states_are_not_proved():
    con = sneaky(SneakyDeclared)
    assert not prove_intermediate_states(con, symbolic=False).ok
    r = prove_intermediate_states(con)
    assert not r.ok and r.symbolic_params == []
    assert "intermediate_states(v, 'body')" in r.symbolic_cover


def test_grouped_ring_difference_reported_in_the_problems_variables():
    """gd-lsa declares token groups: the comparison runs in the grouped ring, and a difference
    found there is reported in the construction's own variables (A[i,j], not alpha/tau)."""
    build = lambda **kw: gd_lsa(3, 2, **kw)  # noqa: E731
    con = _wrap(build(), SneakyLSA, build)
    assert con.params["sqrt_eta"] == Fraction(1, 4)
    d = specification_cover(con, tuple(con.symbolic_params))
    assert d is not None and d.startswith("step(v)['x']") and "A[" in d and "alpha" not in d
    assert not prove(con).ok  # refuted first, at the concrete value
    r = prove(con, refute=False)  # the exact proof alone: what its cover says
    assert not r.ok and r.symbolic_params == []


@pytest.mark.parametrize("build", [lambda: gd_baseconv(3, 2), lambda: gd_baseconv(8, 3, eta=Fraction(1, 7)),
                                   lambda: gd_lsa(4, 2)])
def test_honest_constructions_stay_symbolic(build):
    con = build()
    assert specification_cover(con, tuple(con.symbolic_params)) is None
    r = prove(con)
    assert r.ok and r.symbolic_params == list(con.symbolic_params)
    assert "and so does the specification" in r.symbolic_cover
    assert prove_intermediate_states(con).symbolic_params == list(con.symbolic_params)


def test_specification_cover_is_cheap_at_research_size():
    """gd-baseconv 64 x 16 (1,000+ variables): the comparison runs in the grouped ring."""
    con = gd_baseconv(64, 16)
    t0 = time.perf_counter()
    assert specification_cover(con, ("eta",)) is None
    assert time.perf_counter() - t0 < 5


# ------------------------------------------------------------------ 2. bounded rationals

@pytest.mark.parametrize("text, want", [("1/16", ETA), (" -3 ", Fraction(-3)), ("0.125", Fraction(1, 8)),
                                        (".5", Fraction(1, 2)), ("1e-3", Fraction(1, 1000)),
                                        ("2.5E2", Fraction(250)), ("1 / 3", Fraction(1, 3)),
                                        ("000007/0002", Fraction(7, 2)), ("1e4299", Fraction(10) ** 4299)])
def test_parse_rational_accepts(text, want):
    assert parse_rational(text, "--x") == want


@pytest.mark.parametrize("text, words", [
    ("1e999999999", ["exponent", "4300"]), ("1e-999999999", ["exponent"]), ("1e4300", ["4301-digit"]),
    ("9" * (MAX_DIGITS + 1), ["digit"]), ("1/" + "7" * (MAX_DIGITS + 1), ["denominator"]),
    ("1e" + "0" * 20000 + "1", ["too long"]), ("inf", ["not an exact rational"]), ("nan", ["not an exact"]),
    ("1_000", ["not an exact"]), ("0x10", ["not an exact"]), ("", ["not an exact"]), ("1/0", ["zero"]),
    ("\u0661\u0662", ["not an exact"]),
])
def test_parse_rational_refuses_at_once(text, words):
    t0 = time.perf_counter()
    with pytest.raises(RationalError) as e:
        parse_rational(text, "--eta")
    assert time.perf_counter() - t0 < 0.1
    msg = str(e.value)
    assert msg.startswith("--eta: ") and "\n" not in msg and len(msg) < 300
    assert all(w in msg for w in words), msg


def _refused(argv, capsys, *words):
    t0 = time.perf_counter()
    rc = main(argv, out=io.StringIO())
    dt = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert rc == 2, err
    assert dt < 1.0, dt
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert all(w in err for w in words), err
    return err


@pytest.mark.parametrize("eta", ["1e999999999", "1e-999999999"])
def test_gd_eta_with_a_huge_exponent_is_refused(eta, capsys):
    _refused(["gd", "--layers", "4", "--n", "4", "--d", "2", "--eta", eta], capsys, "--eta", "exponent")


def test_gd_lam_with_a_huge_exponent_is_refused(capsys):
    _refused(["gd", "--layers", "4", "--n", "4", "--d", "2", "--arch", "lsa", "--lam", "1e999999999"], capsys,
             "--lam", "exponent")


def _export(tmp_path, name="f.safetensors"):
    path = tmp_path / name
    assert main(["gd", "--layers", "4", "--n", "4", "--d", "2", "--batch", "2", "--quiet",
                 "--export", str(path)], out=io.StringIO()) == 0
    return path


def _edit_metadata(src, dst, edit):
    """Rewrite a safetensors file's header metadata (the tensors' bytes unchanged)."""
    raw = src.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    edit(header["__metadata__"])
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    dst.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])
    return dst


def test_import_set_with_a_huge_exponent_is_refused(tmp_path, capsys):
    f = _export(tmp_path)
    _refused(["import", str(f), "--from", "polyverify", "--spec", "baseconv", "--set", "eta=1e-999999999"], capsys,
             "--set eta", "exponent")


def test_weight_file_exact_entry_with_a_huge_exponent_is_refused(tmp_path, capsys):
    """/tmp/attack/bigexp.safetensors: an 'exact' entry [0, 1, "1e999999999"]."""
    f = _export(tmp_path)

    def edit(meta):
        ex = json.loads(meta["exact"])
        ex["0"]["W_in"].append([0, 1, "1e999999999"])
        meta["exact"] = json.dumps(ex)

    bad = _edit_metadata(f, tmp_path / "bigexp.safetensors", edit)
    t0 = time.perf_counter()
    with pytest.raises(WeightFileError, match="exponent 999999999"):
        load(bad)
    assert time.perf_counter() - t0 < 1.0
    _refused(["gd", "--weights", str(bad)], capsys, "'exact' value", "exponent")
    _refused(["import", str(bad), "--from", "polyverify", "--spec", "baseconv"], capsys, "exponent")


def test_weight_file_parameter_with_a_huge_exponent_is_refused(tmp_path, capsys):
    """The metadata's construction parameters (``eta``) are read through the same parser."""
    f = _export(tmp_path)

    def edit(meta):
        c = json.loads(meta["construction"])
        c["params"]["eta"] = "1e-999999999"
        meta["construction"] = json.dumps(c)

    bad = _edit_metadata(f, tmp_path / "bigeta.safetensors", edit)
    # gd: the unreadable parameter is no declaration; the default eta = 1/16 then contradicts it
    _refused(["gd", "--weights", str(bad), "--quiet", "--batch", "2"], capsys, "declares parameters")
    _refused(["import", str(bad), "--from", "polyverify", "--spec", "baseconv"], capsys, "parameter eta", "exponent")
