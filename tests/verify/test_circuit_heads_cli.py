"""``circuit --heads H`` (targets lsa and elsa): at most H heads per layer, in the report; bad values
are one line, exit 2, before any work."""
import json

import pytest

import circuits as C
from tests.verify.test_circuit_cli import run


@pytest.mark.parametrize("target", ["lsa", "elsa"])
def test_heads_bounds_every_layer_and_the_report_says_so(tmp_path, target):
    f, rep = tmp_path / "dot.json", tmp_path / "r.json"
    C.dump(C.matvec(3, 2, placed=True), f)
    rc, text = run(["circuit", "--graph", str(f), "--target", target, "--heads", "1", "--trials", "4",
                    "--json", str(rep)])
    assert rc == 0 and "proof: PROVED" in text
    cm = json.loads(rep.read_text())["compiled"]
    assert cm["heads_limit"] == 1 and max(cm["heads_per_layer"]) == 1 and len(cm["heads_per_layer"]) == cm["layers"]


@pytest.mark.parametrize("argv,needle", [
    (["--heads", "0", "--target", "lsa"], "--heads must be at least 1, got 0"),
    (["--heads", "-2"], "--heads must be at least 1"),
    (["--heads", "2", "--target", "baseconv"], "--heads applies to --target lsa and elsa"),
])
def test_bad_heads_exit_2_before_any_work(tmp_path, capsys, argv, needle):
    # the graph file does not exist: the --heads check comes first
    rc, _ = run(["circuit", "--graph", str(tmp_path / "missing.json")] + argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and needle in err, err


def test_heads_with_a_default_target_that_is_not_attention_exits_2(tmp_path, capsys):
    f = tmp_path / "dot.json"
    C.dump(C.dot(2, placed=True), f)  # default target baseconv
    rc, _ = run(["circuit", "--graph", str(f), "--heads", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "not baseconv" in err
