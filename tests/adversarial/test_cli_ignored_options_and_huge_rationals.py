"""A red-team run after the first fixes: options that were silently ignored or
contradicted, misleading lines, and huge-exponent rationals on the CLIs that build a construction
from a string (``constructions.base.exact``: every caller bounded at once)."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from verify.construct import main as construct_main


def _run(main, argv, capsys):
    out = io.StringIO()
    t0 = time.perf_counter()
    rc = main(argv, out=out) if main is construct_main else main(argv)
    err = capsys.readouterr().err
    return rc, out.getvalue(), err, time.perf_counter() - t0


@pytest.fixture(scope="module")
def gd_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("w") / "f.safetensors"
    assert construct_main(["gd", "--layers", "4", "--n", "4", "--d", "2", "--batch", "2", "--quiet",
                           "--export", str(p)], out=io.StringIO()) == 0
    return p


def test_exact_parses_a_string_with_bounded_digits_and_exponent():
    from constructions.base import exact

    t0 = time.perf_counter()
    for bad in ("1e999999999", "1e-999999999", "1" * 5000):
        with pytest.raises(ValueError):
            exact(bad)
    assert time.perf_counter() - t0 < 0.5
    assert exact(" 3/4 ") == exact("0.75") == exact("75e-2")


@pytest.mark.parametrize("argv", [["numerics.roundoff", "gd-baseconv", "--layers", "4", "--eta", "1e999999999"],
                                  ["numerics.roundoff", "gd-baseconv", "--layers", "4", "--lam", "1e-999999999"]])
def test_roundoff_refuses_a_huge_exponent_naming_the_flag(argv, tmp_path, capsys):
    from numerics.roundoff import main

    t0 = time.perf_counter()
    rc = main(argv[1:] + ["--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and argv[-2] in err and "exponent" in err, err
    assert time.perf_counter() - t0 < 5 and not (tmp_path / "o").exists()


def test_compare_refuses_a_huge_exponent_naming_the_flag(gd_file, tmp_path, capsys):
    from verify.compare import main

    rc = main(["--learned", str(gd_file), "--construction", "gd-baseconv", "--out", str(tmp_path / "c"),
               "--eta", "1e999999999"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--eta" in err and "exponent" in err, err


def test_weights_with_export_is_refused(gd_file, tmp_path, capsys):
    """--export wrote the built construction (the original float64 weights) while the --weights
    file (e.g. a float16 cast) was what the command proved and ran."""
    rc, _, err, _ = _run(construct_main, ["gd", "--weights", str(gd_file), "--export", str(tmp_path / "e.safetensors")],
                         capsys)
    assert rc == 2 and "--export" in err and "--weights" in err and not (tmp_path / "e.safetensors").exists()


def test_allow_metadata_mismatch_without_weights_is_refused(capsys):
    rc, _, err, _ = _run(construct_main, ["gd", "--layers", "4", "--allow-metadata-mismatch"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "--allow-metadata-mismatch" in err


def test_a_depth_from_the_metadata_is_not_called_the_command_lines(gd_file, tmp_path, capsys):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(gd_file), "np") as f:
        meta, t = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    c = json.loads(meta["construction"])
    c["k"] = c.get("k", 1) + 1
    meta["construction"] = json.dumps(c)
    bad = tmp_path / "k.safetensors"
    save_file(t, str(bad), metadata=meta)
    rc, _, err, _ = _run(construct_main, ["gd", "--weights", str(bad), "--batch", "2", "--quiet"], capsys)
    assert rc == 2 and "--layers" not in err and "metadata declares" in err, err


def _power_circuit(path: Path, power: int) -> Path:
    nodes = [{"id": "x", "op": "input", "name": "x"}, {"id": "y", "op": "mul", "output": "y"}]
    links = [{"source": "x", "target": "y", "mult": power}]
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}))
    return path


def test_circuit_float_trials_say_when_none_were_measured(tmp_path, capsys):
    g = _power_circuit(tmp_path / "p.json", 4)
    rc, out, _, _ = _run(construct_main, ["circuit", "--graph", str(g), "--float-trials", "0",
                                          "--json", str(tmp_path / "r.json")], capsys)
    assert rc == 0 and "float64 trials: none run (--float-trials 0)" in out and "max error 0.000e+00" not in out
    assert json.loads((tmp_path / "r.json").read_text())["float64_trials"]["max_relative_error"] is None
    g = _power_circuit(tmp_path / "big.json", 1024)  # x^1024 of a standard normal overflows for |x| > 2
    rc, out, _, _ = _run(construct_main, ["circuit", "--graph", str(g), "--trials", "8", "--float-trials", "8",
                                          "--seed", "3"], capsys)
    assert rc == 0 and ("finite output value" in out or "every output value" in out), out
    assert "max error 0.000e+00 (relative" not in out or "over " in out


def test_train_resume_below_the_checkpoints_steps_is_refused(tmp_path, capsys):
    from numerics.train import main

    out = tmp_path / "run"
    common = ["gradient", "--out", str(out), "--width", "8", "--batch", "16", "--eval-batch", "64",
              "--no-progress"]
    # the smallest task (N = 3, D = 2, one block): the size is not the subject, the checkpoint's step count is
    assert main(common + ["--n", "3", "--d", "2", "--layers", "1", "--steps", "6", "--eval-every", "6"]) == 0
    before = (out / "result.json").read_text()
    capsys.readouterr()
    assert main(common[:3] + ["--steps", "3", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--steps 3" in err and "6 steps" in err
    assert (out / "result.json").read_text() == before
