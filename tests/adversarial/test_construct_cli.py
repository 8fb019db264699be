"""Bad input to ``python -m verify.construct`` (gd and catalogue entries) is refused
before any work: exit 2, one line on stderr, nothing on stdout, no file touched."""
from __future__ import annotations

import io
import json
import os

import pytest

from verify.construct import main

SMALL = ["--n", "4", "--d", "2", "--batch", "4", "--quiet"]

# (argv with {tmp} for the test folder, words the one-line error must contain)
CASES = [
    (["gd", "--layers", "7", *SMALL, "--json", "{tmp}/afolder"], ["--json", "is a folder"]),
    (["gd", "--layers", "7", *SMALL, "--export", "{tmp}/afolder"], ["--export", "is a folder"]),
    (["gd", "--layers", "7", *SMALL, "--json", "{tmp}/afile/x.json"], ["--json", "is a file, not a folder"]),
    (["gd", "--layers", "7", *SMALL, "--json", "{tmp}/x/"], ["--json", "not a file name"]),
    (["gd", "--layers", "7", *SMALL, "--kappa", "nan"], ["--kappa", "finite"]),
    (["gd", "--layers", "7", *SMALL, "--kappa", "inf"], ["--kappa", "finite"]),
    (["gd", "--layers", "7", *SMALL, "--kappa", "-1"], ["--kappa", ">= 1"]),
    (["gd", "--layers", "7", *SMALL, "--seed=-1"], ["--seed", ">= 0"]),
    (["gd", "--layers", "7", "--n", "4", "--d", "2", "--batch", "1000000000"], ["--batch", "limit", "--allow-large"]),
    (["gd", "--layers", "7", "--n", "4", "--d", "2", "--batch", "1048576", "--layers", "100000"],
     ["problem-layers", "--allow-large"]),
    (["gd", "--layers", "7", "--n", "256", "--d", "4", "--batch", "1048576", "--dtype", "float32,float64"],
     ["memory", "--allow-large"]),
    (["gd", "--layers", "1000000000", *SMALL], ["--layers", "limit"]),
    (["gd", "--layers", "1e9", *SMALL], ["--layers", "invalid int value"]),
    (["gd", "--layers", "7", "--n", "100000", "--d", "2"], ["--n", "limit"]),
    (["gd", "--layers", "7", "--n", "3000", "--d", "3000"], ["limit"]),
    (["gd", "--layers", "7", *SMALL, "--digits", "10000000"], ["--digits", "limit"]),
    (["gd", "--layers", "7", *SMALL, "--digits", "3"], ["--digits", ">= 16"]),
    (["gd", "--layers", "7", *SMALL, "--dtype", ","], ["--dtype", "empty name"]),
    (["gd", "--layers", "7", *SMALL, "--dtype", "float64,"], ["--dtype", "empty name"]),
    (["gd", "--layers", "7", *SMALL, "--dtype", "float8"], ["unknown dtype"]),
    (["gd", "--layers", "7", *SMALL, "--dtype", "float16", "--kappa", "1e6"], ["float16", "overflow"]),
    (["gd", "--layers", "0", *SMALL], ["--layers", ">= 1"]),
    (["gd", "--layers", "99", *SMALL], ["nearest valid"]),
    (["gd", *SMALL], ["--layers is required"]),
    (["gd", "--layers", "7", *SMALL, "--eta", "0"], ["--eta", "> 0"]),
    (["gd", "--layers", "7", *SMALL, "--eta", "1/0"], ["not an exact rational"]),
    (["gd", "--layers", "7", "--arch", "lsa", *SMALL, "--lam=-1/4"], ["--lam", ">= 0"]),
    (["gd", "--layers", "7", *SMALL, "--weights", "{tmp}/missing.safetensors"], ["not found"]),
    (["gd", "--layers", "7", *SMALL, "--weights", "{tmp}/afile"], ["not a readable safetensors"]),
    # a refused run creates no folder; options the run would ignore are refused;
    # an unwritable pseudo file system is refused before the work
    (["gd", "--layers", "7", *SMALL, "--kappa", "nan", "--json", "{tmp}/newdir/r.json"], ["--kappa", "finite"]),
    (["gd", "--layers", "7", *SMALL, "--seed=-1", "--export", "{tmp}/newdir/sub/w.safetensors"], ["--seed"]),
    (["gd", "--layers", "7", "--arch", "lsa", *SMALL, "--conv", "fft"], ["--conv fft", "--arch lsa has none"]),
    (["gd", "--layers", "7", *SMALL, "--device", "cuda:99"], ["--device cuda:99", "--backend torch only"]),
    (["gd", "--layers", "7", *SMALL, "--json", "/proc/polyverify-r.json"], ["--json", "/proc", "not writable"]),
    (["s003-add", "--set", "N=100000"], ["N=100000", "limit 64", "--allow-large"]),
    (["s003-add", "--set", "seed=5"], ["no size or parameter 'seed'"]),
    (["s003-add", "--json", "{tmp}/afolder"], ["--json", "is a folder"]),
    (["no-such-entry"], ["invalid choice"]),
    ([], ["choose a command"]),
]




@pytest.mark.parametrize("argv,needles", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_refused_up_front(tmp_path, argv, needles, refused):
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("not a weight file")
    refused(main, [a.replace("{tmp}", str(tmp_path)) for a in argv], tmp_path, needles, out=io.StringIO())


def test_missing_output_folder_is_created(tmp_path):
    """The README's own example in a fresh checkout: --json out/x.json without out/."""
    rep = tmp_path / "out" / "x.json"
    assert main(["gd", "--layers", "7", *SMALL, "--json", str(rep)], out=io.StringIO()) == 0
    assert json.loads(rep.read_text())["proof"]["ok"] is True


def test_failed_write_leaves_the_old_file(tmp_path, monkeypatch, capsys):
    """Outputs are written atomically: a failure while writing keeps the old report whole,
    and is one line (exit 2)."""
    rep = tmp_path / "r.json"
    rep.write_text("old report")
    import polyverify.plumbing.cli as cli

    def boom(*a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(cli.os, "replace", boom)
    assert main(["gd", "--layers", "7", *SMALL, "--json", str(rep)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --json") and "disk full" in err and err.count("\n") == 1
    assert rep.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_written_files_get_the_usual_mode(tmp_path):
    rep = tmp_path / "r.json"
    assert main(["gd", "--layers", "7", *SMALL, "--json", str(rep)], out=io.StringIO()) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert rep.stat().st_mode & 0o777 == 0o666 & ~umask


def test_interrupted_write_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the report is written: exit 130, one line, neither the file nor the folder made
    for it remains (the subprocess version: tests/adversarial/test_interrupt.py)."""
    import polyverify.plumbing.cli as cli

    def ctrl_c(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.os, "replace", ctrl_c)
    rc = main(["gd", "--layers", "7", *SMALL, "--json", str(tmp_path / "new" / "sub" / "r.json")], out=io.StringIO())
    assert rc == 130 and capsys.readouterr().err == "interrupted\n"
    assert list(tmp_path.iterdir()) == []
