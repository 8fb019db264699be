"""``python -m verify.construct NAME --set eta=1/64``: a catalogue entry's exact scalar parameters
(the builder's keyword arguments such as eta, lam, gamma) are set like its sizes, read exactly,
refused in one line when malformed, and reported."""
import io
import json
from fractions import Fraction

import pytest

from constructions.catalogue import by_name, light_entries, scalar_params
from verify.construct import main


def run(argv, capsys):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue(), capsys.readouterr().err


def test_s004_gd_takes_eta_and_reports_it(tmp_path, capsys):
    rc, text, _ = run(["s004-gd", "--set", "eta=1/64", "--json", str(tmp_path / "r.json")], capsys)
    assert rc == 0 and "PROVED" in text and "parameters eta=1/64" in text
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["params"] == {"eta": "1/64"}


def test_the_parameter_reaches_the_construction():
    """What --set eta= gives is the construction's parameter (not the builder's default)."""
    entry = by_name("s004-gd")
    assert entry.params == {"eta": "1/8"}
    assert entry.build(n=3, d=2, eta=Fraction(1, 64)).params["eta"] == Fraction(1, 64)


def test_the_manifest_knows_the_parameters_without_the_registry():
    light = light_entries()
    for name in ("s004-gd", "s004-gdpp", "gd-lsa", "gd-baseconv"):
        assert light[name].params == by_name(name).params, name
    assert light["s004-gdpp"].params == {"gamma": "1/16", "eta": "1/8"}
    assert light["gd-lsa"].params["eta"] == "builder's default"


def test_flags_strings_and_seeds_are_not_parameters():
    def build(n=2, *, eta="1/8", lam=None, gamma=None, fused=True, conv="auto", seed=0, weights=None, k=3):
        return None

    assert scalar_params(build) == {"eta": "1/8", "lam": "builder's default", "gamma": "builder's default",
                                    "k": "3"}


@pytest.mark.parametrize("value,needle", [("abc", "not an exact rational"), ("1e999999", "exponent"),
                                          ("", "not an exact rational")])
def test_a_malformed_parameter_is_one_line(capsys, value, needle):
    rc, text, err = run(["s004-gd", "--set", f"eta={value}"], capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1 and text == ""


def test_an_unknown_key_names_sizes_and_parameters(capsys):
    rc, _, err = run(["s004-gd", "--set", "zeta=1"], capsys)
    assert rc == 2 and "has no size or parameter 'zeta'" in err and "eta" in err and "n" in err


def test_a_square_root_that_disagrees_with_its_square_is_refused(capsys):
    rc, _, err = run(["gd-lsa", "--set", "n=3", "--set", "d=2", "--set", "eta=1/4", "--set", "sqrt_eta=1/3"], capsys)
    assert rc == 2 and "disagree" in err and err.count("\n") == 1
    rc, text, _ = run(["gd-lsa", "--set", "n=3", "--set", "d=2", "--set", "eta=1/4", "--set", "sqrt_eta=1/2"], capsys)
    assert rc == 0 and "PROVED" in text


def test_the_help_lists_the_parameters(capsys):
    with pytest.raises(SystemExit):
        main(["s004-gdpp", "--help"], out=io.StringIO())
    out = capsys.readouterr().out
    assert "gamma=1/16" in out and "eta=1/8" in out


def test_export_k_writes_that_many_body_copies_and_imports_proved(tmp_path, capsys):
    """``--k K`` with ``--export``: the file holds K body copies (issue 44: the catalogue exported only k = 1)."""
    from constructions.weights_io import load

    path = tmp_path / "w.safetensors"
    rc, text, _ = run(["s004-gd", "--export", str(path), "--k", "3"], capsys)
    assert rc == 0 and "exported 3 layers" in text
    assert len(load(path).layers) == 3
    rc, text, _ = run(["import", str(path), "--from", "polyverify"], capsys)
    assert rc == 0 and "k = 3 in the file" in text


@pytest.mark.parametrize("argv,needle", [
    (["s004-gd", "--k", "3"], "--k applies only with --export"),
    (["s004-gd", "--k", "0", "--export", "{out}"], "--k must be in 1.."),
    (["s003-add", "--k", "2", "--export", "{out}"], "has no body to repeat"),
])
def test_export_k_refusals_are_one_line_before_any_work(tmp_path, capsys, argv, needle):
    out = tmp_path / "w.safetensors"
    rc, text, err = run([x.format(out=out) for x in argv], capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1 and text == "" and not out.exists()
