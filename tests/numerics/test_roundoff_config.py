"""numerics.roundoff_config: the roundoff command's typed config, one for the command line and a sweep cell."""
from __future__ import annotations

import dataclasses

import pytest

from numerics.roundoff_config import DEFAULTS, RoundoffConfig, build_parser, plan
from numerics.roundoff_sweep import CELL_KEYS
from polyverify.plumbing.cli import UsageError


def _from_argv(argv):
    return RoundoffConfig.from_args(build_parser().parse_args(argv))


def test_the_parser_defaults_are_the_dataclass_defaults():
    ns = build_parser().parse_args(["baseconv", "--layers", "4"])
    c = RoundoffConfig.from_args(ns)
    for f in dataclasses.fields(RoundoffConfig):
        if f.default is not dataclasses.MISSING:
            assert getattr(c, f.name) == f.default, f.name
    assert DEFAULTS["dtypes"] == "float64,float32,bfloat16,float16" and DEFAULTS["kappas"] == "5"
    assert set(CELL_KEYS.values()) <= {f.name for f in dataclasses.fields(RoundoffConfig)}


@pytest.mark.parametrize("cell,argv", [
    ({"arch": "baseconv", "layers": 4}, ["baseconv", "--layers", "4"]),
    ({"arch": "lsa", "layers": [4, 7], "dtype": "float32", "eta": "auto", "kappa": 10, "layer_ref": 0, "n": 6,
      "d": 3, "batch": 2}, ["lsa", "--layers", "4,7", "--dtypes", "float32", "--eta", "auto", "--kappa", "10",
                            "--layer-ref", "0", "--n", "6", "--d", "3", "--batch", "2"]),
    ({"arch": "elsa", "layers": "31", "lam": "1/8", "backend": "numpy", "allow_large": True},
     ["elsa", "--layers", "31", "--lam", "1/8", "--backend", "numpy", "--allow-large"]),
])
def test_a_cell_is_the_command_line_it_stands_for(cell, argv):
    c = RoundoffConfig.from_cell(cell, CELL_KEYS, "cell")
    assert c == dataclasses.replace(_from_argv(argv), quiet=True)
    p, q = plan(c, create_out=False), plan(_from_argv(argv), create_out=False)
    assert [(b.name, b.dtype) for b in p.pairs] == [(b.name, b.dtype) for b in q.pairs]
    assert {k: (r.eta, r.steps) for k, r in p.runs.items()} == {k: (r.eta, r.steps) for k, r in q.runs.items()}


@pytest.mark.parametrize("cell,msg", [
    ({"arch": "baseconv", "layers": 4, "batch": "x"}, "argument --batch: invalid int value: 'x'"),
    ({"arch": "baseconv", "layers": 4, "bogus": 1}, "unknown key(s) 'bogus'"),
    ({"arch": "baseconv", "layers": 4, "allow_large": "yes"}, "argument --allow-large: ignored explicit argument"),
    ({"arch": "baseconv", "layers": "4,x"}, "--layers: not a list of int values"),
    ({"arch": "nope", "layers": 4}, "unknown construction 'nope'"),
])
def test_a_bad_cell_is_refused_as_the_command_line_is(cell, msg):
    with pytest.raises(UsageError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        RoundoffConfig.from_cell(cell, CELL_KEYS, "cell")


def test_plan_checks_what_the_command_checks():
    with pytest.raises(UsageError, match="must be >= --d"):
        plan(_from_argv(["baseconv", "--layers", "4", "--n", "3", "--d", "5"]), create_out=False)
    with pytest.raises(UsageError, match="nearest valid"):
        plan(_from_argv(["baseconv", "--layers", "5"]), create_out=False)
