"""The compiler's targets table (``constructions/compiler/targets.py``): every target compiles and
proves a small placed circuit, or refuses it with its stated reason; the options each target takes
are the table's, refused with one line through the API and the CLI (exit 2); the CLI's ``--target``
choices are the table."""
import argparse
import io
from fractions import Fraction

import pytest

import circuits as C
from constructions.compiler import TARGETS, CompileError, Target, compile_circuit, default_target
from constructions.compiler.budget import minimum_channels
from constructions.compiler.targets import OPTIONS, accepting, causal_targets, names_text, option_error, resolve
from verify.construct import build_parser, main
from verify.prover.proof import prove

GD = C.gd_step(3, 2, Fraction(1, 16), placed=True)  # every output after (or on) the tokens it reads
DOT = C.dot(3, placed=True)  # y at token 0 reads tokens 1, 2: a causal target refuses it


def _check(con, target: Target):
    assert prove(con).ok
    cm = con.info["compiled"]
    assert cm["target"] == target.name
    b = target.bound(con)
    assert cm["layers"] == len(con.layers(0)) <= b["layers"] and cm["tokens"] <= b["tokens"] and b["rule"]


def test_the_table_is_targets_by_name():
    assert TARGETS and all(isinstance(t, Target) and t.name == n for n, t in TARGETS.items())
    for t in TARGETS.values():
        assert t.description and t.paper and t.bound_rule and t.options <= set(OPTIONS)
        assert t.family in ("sequence", "attention", "mlp") and t.passes
        for p in t.passes:  # every pass named in the table is a function of the compiler
            assert callable(p.resolve()), p
    assert default_target(GD) in TARGETS and default_target(C.dot(2)) in TARGETS


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_target_compiles_and_proves_a_placed_circuit(name):
    t = TARGETS[name]
    _check(compile_circuit(GD, name="gd", target=name), t)
    _check(compile_circuit(GD, name="gd", target=name, reassociate=False), t)


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_causal_target_refuses_an_output_before_its_inputs_with_one_line(name):
    t = TARGETS[name]
    if not t.causal:
        _check(compile_circuit(DOT, name="dot", target=name), t)
        return
    with pytest.raises(CompileError) as e:
        compile_circuit(DOT, name="dot", target=name)
    msg = str(e.value)
    assert "\n" not in msg and "causal" in msg and "placed at token 0" in msg


def test_causal_targets_are_the_tables():
    assert causal_targets() == tuple(n for n, t in TARGETS.items() if t.causal) and causal_targets()


def _value(option, name):
    if option == "heads":
        return 1
    if option == "channels":
        return minimum_channels(GD, TARGETS[name].causal)
    return 9  # min_width


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("name", list(TARGETS))
def test_options_follow_the_table(name, option):
    t = TARGETS[name]
    v = _value(option, name)
    if not t.accepts(option):
        with pytest.raises(ValueError) as e:
            compile_circuit(GD, target=name, **{option: v})
        assert str(e.value) == option_error(t, option) and "\n" not in str(e.value)
        assert f"{option} applies to the" in str(e.value) and all(a in str(e.value) for a in accepting(option))
        return
    con = compile_circuit(GD, target=name, **{option: v})
    _check(con, t)
    cm = con.info["compiled"]
    if option == "heads":
        assert max(cm["heads_per_layer"]) <= 1
    elif option == "channels":
        assert cm["state_width"] <= v
    else:
        assert cm["state_width"] >= v


def test_unknown_target_is_one_line_naming_the_table():
    with pytest.raises(ValueError) as e:
        compile_circuit(GD, target="baseconv-typo")
    assert "\n" not in str(e.value) and all(n in str(e.value) for n in TARGETS)
    with pytest.raises(ValueError):
        resolve("nope")


def _circuit_parser():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["circuit"]


def test_cli_target_choices_are_the_table():
    act = next(a for a in _circuit_parser()._actions if "--target" in a.option_strings)
    assert set(act.choices) == set(TARGETS)
    for t in TARGETS.values():  # the help describes each from the table
        assert t.description in act.help


def _cli(argv, capsys):
    rc = main(argv, out=io.StringIO())
    return rc, capsys.readouterr().err


@pytest.fixture(scope="module")
def gd_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("targets") / "gd.json"
    C.dump(GD, f)
    return f


def test_cli_refuses_an_unknown_target_with_one_line(gd_file, capsys):
    rc, err = _cli(["circuit", "--graph", str(gd_file), "--target", "baseconv-typo"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "invalid choice" in err


@pytest.mark.parametrize("flag, option, value", [("--heads", "heads", "2"), ("--channels", "channels", "9"),
                                                 ("--pareto", "channels", None)])
def test_cli_refuses_an_option_the_target_does_not_take(gd_file, capsys, flag, option, value):
    refusing = [n for n, t in TARGETS.items() if not t.accepts(option)]
    assert refusing
    for name in refusing:
        rc, err = _cli(["circuit", "--graph", str(gd_file), "--target", name, flag]
                       + ([value] if value else []), capsys)
        assert rc == 2 and err.count("\n") == 1, err
        assert f"{flag} applies to --target {names_text(accepting(option))}, not {name}" in err
