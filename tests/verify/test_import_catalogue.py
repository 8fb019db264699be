"""Every catalogue entry through ``python -m verify.construct import --from polyverify``: a layer
stack's own weight file proves against it (exit 0); an entry that is no layer stack is refused
in one line (exit 2) before the file is read.  Regressions: parameters that are no builder
arguments (``s000-linear``'s ``H_i_j``, ``s000-poly``'s ``c_i``), parameters that are sizes
(``s000-read``'s ``i``, ``s003-hyena-equiv``'s ``L``, ``s003-shift-*``'s ``s``), a boolean
parameter (``s003-conv``'s ``circular``) and a builder that takes its parameters as
``**kwargs`` (``s004-implicit-w``)."""
from __future__ import annotations

import io

import pytest

from constructions.base import Construction
from constructions.catalogue import entries
from constructions.weights_io import save
from verify.construct import main

NON_GD = sorted(n for n, e in entries().items() if "gd" not in e.roles)


def _import(argv, capsys):
    out = io.StringIO()
    rc = main(["import", *map(str, argv), "--no-search"], out=out)
    return rc, out.getvalue(), capsys.readouterr().err


@pytest.mark.parametrize("name", NON_GD)
def test_every_catalogue_entry_imports_or_is_refused_in_one_line(name, tmp_path, capsys):
    e = entries()[name]
    con = e.build(**dict(e.sizes or {}))
    p = tmp_path / "w.safetensors"
    if not isinstance(con, Construction):
        p.write_bytes(b"not read")  # refused before the file is read
        rc, _, err = _import([p, "--from", "polyverify", "--spec", name], capsys)
        assert rc == 2 and err.count("\n") == 1 and "not a layer stack" in err, err
        return
    save(p, con, 1 if con.body else 0)
    rc, text, err = _import([p, "--from", "polyverify", "--spec", name], capsys)
    assert rc == 0, (text, err)
    assert "verdict: PROVED" in text


def test_parameters_that_are_no_builder_arguments_are_refused_by_set(tmp_path, capsys):
    e = entries()["s000-linear"]
    con = e.build(**e.sizes)
    save(tmp_path / "w.safetensors", con, 0)
    rc, _, err = _import([tmp_path / "w.safetensors", "--from", "polyverify", "--spec", "s000-linear",
                          "--set", "H_0_0=1"], capsys)
    assert rc == 2 and "has no size or parameter 'H_0_0'" in err and err.count("\n") == 1


@pytest.mark.parametrize("value, ok", [("false", True), ("true", False), ("False", True)])
def test_a_boolean_parameter_is_read_as_true_or_false(tmp_path, capsys, value, ok):
    e = entries()["s003-conv"]
    save(tmp_path / "w.safetensors", e.build(**e.sizes), 0)  # circular=False
    rc, text, err = _import([tmp_path / "w.safetensors", "--from", "polyverify", "--spec", "s003-conv",
                             "--set", f"circular={value}", "--allow-metadata-mismatch"], capsys)
    assert rc == (0 if ok else 1), (text, err)
    rc, _, err = _import([tmp_path / "w.safetensors", "--from", "polyverify", "--spec", "s003-conv",
                          "--set", "circular=1/2"], capsys)
    assert rc == 2 and "not true or false" in err


def test_kwargs_builder_solves_each_parameter_with_the_others_given(tmp_path, capsys):
    """s004-implicit-w's builder takes every P/Q entry at once: a file that declares another
    construction (so no parameter comes from its metadata) is proved or refuted, no KeyError."""
    save(tmp_path / "g.safetensors", entries()["s004-gd"].build(n=3, d=2), 2)
    rc, text, err = _import([tmp_path / "g.safetensors", "--from", "polyverify", "--spec", "s004-implicit-w",
                             "--set", "n=3"], capsys)
    assert rc == 1 and "verdict: FAILED" in text and "Traceback" not in err
