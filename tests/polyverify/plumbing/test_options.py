"""polyverify.plumbing.options: a command's typed options, built by its parser and by a sweep cell alike."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from polyverify.plumbing.cli import Parser, UsageError
from polyverify.plumbing.options import config_class


def _floats(s: str):
    try:
        return tuple(float(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {s!r}") from None


def _parser() -> Parser:
    p = Parser(prog="python -m demo")
    p.add_argument("task", choices=("a", "b"))
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--mode", choices=("x", "y"), default="x")
    p.add_argument("--sigmas", type=_floats, default=(1.0, 4.0))
    p.add_argument("--eta", default="1/16")
    p.add_argument("--mlp", action="store_true")
    p.add_argument("--out", required=True)
    return p


Demo = config_class(_parser(), "Demo", module=__name__)


def test_fields_types_and_defaults_come_from_the_parser():
    fields = {f.name: f for f in dataclasses.fields(Demo)}
    assert list(fields) == ["task", "width", "lr", "mode", "sigmas", "eta", "mlp", "out"]
    assert fields["width"].type is int and fields["lr"].type is float and fields["mlp"].type is bool
    assert fields["width"].default == 64 and fields["sigmas"].default == (1.0, 4.0) and fields["mlp"].default is False
    c = Demo.from_args(_parser().parse_args(["a", "--out", "o"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.width = 3


@pytest.mark.parametrize("config,argv", [
    ({"task": "a"}, ["a"]),
    ({"task": "b", "width": 8, "lr": 0.01, "mode": "y", "mlp": True}, ["b", "--width", "8", "--lr", "0.01", "--mode",
                                                                        "y", "--mlp"]),
    ({"task": "a", "sigmas": [0.5, 2], "eta": "1/8", "width": "16"}, ["a", "--sigmas", "0.5,2", "--eta", "1/8",
                                                                      "--width", "16"]),
    ({"task": "a", "mlp": False, "lr": None}, ["a"]),
])
def test_a_cell_is_the_command_line_it_stands_for(config, argv):
    cell = Demo.from_mapping(config, exclude={"out"}, out="o")
    assert cell == Demo.from_args(_parser().parse_args(argv + ["--out", "o"]))


@pytest.mark.parametrize("config,msg", [
    ({"task": "a", "bogus": 1}, "cell 2: unknown key(s) 'bogus'"),
    ({"task": "a", "out": "x"}, "unknown key(s) 'out'"),
    ({"task": "a", "width": "x"}, "cell 2: argument --width: invalid int value: 'x'"),
    ({"task": "a", "width": 6.5}, "invalid int value: '6.5'"),
    ({"task": "c"}, "argument task: invalid choice: 'c'"),
    ({"task": "a", "mode": "z"}, "argument --mode: invalid choice: 'z'"),
    ({"task": "a", "mlp": "yes"}, "argument --mlp: ignored explicit argument 'yes'"),
    ({"task": "a", "width": True}, "argument --width: expected one argument"),
    ({"task": "a", "sigmas": "a,b"}, "argument --sigmas: not a comma-separated list of numbers"),
    ({"task": ["a"]}, "task must be a single value"),
    ({"width": 3}, "the config needs 'task'"),
])
def test_a_bad_cell_is_one_line_naming_where(config, msg):
    with pytest.raises(UsageError) as e:
        Demo.from_mapping(config, where="cell 2", exclude={"out"})
    assert msg in str(e.value) and "\n" not in str(e.value)
