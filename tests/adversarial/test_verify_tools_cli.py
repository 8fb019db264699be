"""Bad input to ``python -m verify.compare``, ``python -m verify.errata`` and
``python -m verify.catalogue_report`` is refused before any work: exit 2, one line on stderr
(``error: ...``, no traceback), nothing on stdout, no file touched."""
from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from safetensors.numpy import save_file

import verify.catalogue_report as catalogue_report
import verify.compare as compare
import verify.errata as errata
from constructions import weights_io
from verify.comparison import build_construction


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Learned-model files, in a folder of their own (never written by the commands)."""
    d = tmp_path_factory.mktemp("learned")
    weights_io.save(d / "gd42.safetensors", build_construction("gd-baseconv", 4, 2), 1)
    save_file({"w": np.zeros((2, 2))}, str(d / "bare.safetensors"))  # no toolkit metadata
    (d / "model.pkl").write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    (d / "notes.txt").write_text("a text file\n")
    (d / "empty.safetensors").write_bytes(b"")
    return d


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("a file, not a folder")
    (tmp_path / "errata.md").write_text("an old table")
    (tmp_path / "report.json").write_text("an old report")
    return tmp_path




def _fill(argv, tmp, learned):
    return [a.replace("{tmp}", str(tmp)).replace("{in}", str(learned)) for a in argv]


# ------------------------------------------------------------------ verify.compare

def _cmp(learned="{in}/gd42.safetensors", *more, out="{tmp}/out"):
    return ["--learned", learned, "--construction", "gd-baseconv", "--out", out, *more]


AL = "--allow-large"
L = compare.LIMITS
COMPARE_CASES = [
    # the learned file: named as what it is
    (_cmp("{tmp}/missing.safetensors"), ["--learned", "missing.safetensors: file not found"]),
    (_cmp("{tmp}/missing.safetensors", "--n", "4", "--d", "2"), ["file not found"]),
    (_cmp("{in}/model.pkl"), ["model.pkl: not a safetensors file"]),
    (_cmp("{in}/notes.txt"), ["notes.txt: not a safetensors file"]),
    (_cmp("{in}/empty.safetensors"), ["empty.safetensors: not a safetensors file"]),
    (_cmp("{tmp}/afolder"), ["--learned", "is a folder, not a regular file"]),
    (_cmp("{in}/bare.safetensors"), ["bare.safetensors: the file does not record N and D", "--n and --d"]),
    (_cmp("{in}/bare.safetensors", "--n", "4", "--d", "2"), ["no polyverify-weights/1 metadata"]),
    (_cmp("{in}/gd42.safetensors", "--n", "6", "--d", "3"), ["gd42.safetensors"]),
    # --construction: the valid names are listed
    (["--learned", "{in}/gd42.safetensors", "--construction", "nope", "--out", "{tmp}/out"],
     ["unknown construction 'nope'", ", ".join(compare.CONSTRUCTIONS)]),
    (["--learned", "{in}/gd42.safetensors", "--construction", "s000-newton", "--out", "{tmp}/out"],
     ["unknown construction", "s004-gd"]),
    (["--construction", "gd-baseconv", "--out", "{tmp}/out"], ["required", "--learned"]),
    # sizes
    (_cmp("{in}/gd42.safetensors", "--problems", "0"), ["--problems must be >= 1"]),
    (_cmp("{in}/gd42.safetensors", "--problems", "1000000000"), ["--problems", f"limit {L['max_problems']}", AL]),
    (_cmp("{in}/gd42.safetensors", "--problems", "1000000000", AL),
     ["--problems", f"limit {compare.LARGE_LIMITS['max_problems']}"]),
    (_cmp("{in}/gd42.safetensors", "--problems", "1e9"), ["--problems", "invalid int value"]),
    (_cmp("{in}/gd42.safetensors", "--iters", "-1"), ["--iters must be >= 0"]),
    (_cmp("{in}/gd42.safetensors", "--iters", "1000000000"), ["--iters", f"limit {L['max_iters']}", AL]),
    (_cmp("{in}/gd42.safetensors", "--n", "100000", "--d", "2"), ["--n", f"limit {L['max_n']}", AL]),
    (_cmp("{in}/gd42.safetensors", "--n", "4", "--d", "100000"), ["--d", f"limit {L['max_d']}", AL]),
    (_cmp("{in}/gd42.safetensors", "--n", "0", "--d", "2"), ["--n must be >= 1"]),
    (_cmp("{in}/gd42.safetensors", "--n", "1024", "--d", "256", "--problems", "4096"), ["memory", "16.0 GiB"]),
    (_cmp("{in}/gd42.safetensors", "--sigmas", ",".join(str(i) for i in range(1, 101))), ["--sigmas", f"limit {L['max_values']}"]),
    (_cmp("{in}/gd42.safetensors", "--sigmas", "nan"), ["--sigmas", "finite"]),
    (_cmp("{in}/gd42.safetensors", "--sigmas", "-1"), ["--sigmas must be >= 0"]),
    (_cmp("{in}/gd42.safetensors", "--sigmas", "a,b"), ["--sigmas", "not a comma-separated list"]),
    (_cmp("{in}/gd42.safetensors", "--kappas", "0.5"), ["--kappas must be >= 1"]),
    (_cmp("{in}/gd42.safetensors", "--scales", "0"), ["--scales must be > 0"]),
    (_cmp("{in}/gd42.safetensors", "--iter-sigmas", "inf"), ["--iter-sigmas", "finite"]),
    (_cmp("{in}/gd42.safetensors", "--poly-timeout", "0"), ["--poly-timeout must be > 0"]),
    (_cmp("{in}/gd42.safetensors", "--poly-memory-gb", "nan"), ["--poly-memory-gb", "finite"]),
    (_cmp("{in}/gd42.safetensors", "--skip", "bogus"), ["--skip: unknown section(s) bogus"]),
    (_cmp("{in}/gd42.safetensors", "--seed=-1"), ["--seed must be >= 0"]),
    (_cmp("{in}/gd42.safetensors", "--eta", "1/0"), ["1/0"]),
    # --out
    (_cmp("{in}/gd42.safetensors", out="{tmp}/afile"), ["--out", "is a file, not a folder"]),
    (_cmp("{in}/gd42.safetensors", out="{tmp}/afile/sub"), ["--out", "is a file, not a folder"]),
    (_cmp("{in}/gd42.safetensors", "--bogus"), ["unrecognized arguments: --bogus"]),
]


@pytest.mark.parametrize("argv,needles", COMPARE_CASES, ids=[" ".join(c[0])[:80] for c in COMPARE_CASES])
def test_compare_bad_input_is_refused_up_front(workdir, inputs, argv, needles, refused):
    refused(compare.main, _fill(argv, workdir, inputs), workdir, needles)


def test_compare_construction_names_are_exactly_the_comparable_ones():
    """CONSTRUCTIONS (listed in --help and in the error) holds every name build_construction
    can compare: the gd constructions and the catalogue constructions with least-squares variables."""
    from constructions import catalogue
    from verify.comparison import CompareError
    from verify.comparison.models import sizes

    catalogue.load_all()
    ok = {e.name for e in catalogue.gd_architectures().values()}
    for name, e in catalogue.entries().items():
        if {"n", "d"} <= set(e.sizes):
            try:
                sizes(build_construction(name, e.sizes["n"], e.sizes["d"]))
            except (CompareError, TypeError, ValueError):
                continue
            ok.add(name)
    assert ok == set(compare.CONSTRUCTIONS)


def test_compare_help_lists_constructions_and_helps_every_option(capsys):
    for action in compare.build_parser()._actions:
        assert action.help, action.option_strings
    with pytest.raises(SystemExit):
        compare.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in compare.CONSTRUCTIONS:
        assert name in text
    assert "--allow-large" in text and f"<= {compare.LIMITS['max_problems']}" in text


# ------------------------------------------------------------------ verify.errata, verify.catalogue_report

ERRATA_CASES = [
    (["--markdown", "{tmp}/afolder"], ["--markdown", "is a folder, not a file"]),
    (["--markdown", "{tmp}"], ["--markdown", "is a folder, not a file"]),
    (["--markdown", "{tmp}/afile/errata.md"], ["--markdown", "is a file, not a folder"]),
    (["--markdown", "{tmp}/new/"], ["--markdown", "not a file name"]),
    (["--json", "{tmp}/afolder"], ["--json", "is a folder, not a file"]),
    (["--json", "{tmp}/afile/e.json"], ["--json", "is a file, not a folder"]),
    (["--markdown", "{tmp}/errata.md", "--json", "{tmp}/afolder"], ["--json", "is a folder"]),
    (["--markdown", "{tmp}/errata.md", "--json", "{tmp}/errata.md"], ["--json", "the same file as --markdown"]),
    (["--bogus"], ["unrecognized arguments: --bogus"]),
    # a refusal leaves no new folder
    (["--markdown", "{tmp}/newdir/errata.md", "--json", "{tmp}/newdir/errata.md"], ["the same file as --markdown"]),
]

REPORT_CASES = [
    (["--markdown", "{tmp}/afolder"], ["--markdown", "is a folder, not a file"]),
    (["--markdown", "{tmp}"], ["--markdown", "is a folder, not a file"]),
    (["--markdown", "{tmp}/afile/catalogue.md"], ["--markdown", "is a file, not a folder"]),
    (["--markdown", "{tmp}/new/"], ["--markdown", "not a file name"]),
    (["--markdown"], ["--markdown", "expected one argument"]),
    (["--bogus"], ["unrecognized arguments: --bogus"]),
]


def _no_work(*a, **k):
    raise AssertionError("the work started before the arguments were checked")


@pytest.mark.parametrize("argv,needles", ERRATA_CASES, ids=[" ".join(c[0])[:60] for c in ERRATA_CASES])
def test_errata_bad_input_is_refused_up_front(workdir, monkeypatch, argv, needles, refused):
    monkeypatch.setattr(errata, "run_all", _no_work)
    refused(errata.main, _fill(argv, workdir, ""), workdir, needles)


@pytest.mark.parametrize("argv,needles", REPORT_CASES, ids=[" ".join(c[0])[:60] for c in REPORT_CASES])
def test_catalogue_report_bad_input_is_refused_up_front(workdir, monkeypatch, argv, needles, refused):
    monkeypatch.setattr(catalogue_report, "rows", _no_work)
    refused(catalogue_report.main, _fill(argv, workdir, ""), workdir, needles)


NOWHERE = "/proc/polyverify-no-such-folder"  # cannot be created, even by root


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("tool,argv", [
    ("errata", ["--markdown", NOWHERE + "/errata.md"]),
    ("errata", ["--json", NOWHERE + "/errata.json"]),
    ("catalogue_report", ["--markdown", NOWHERE + "/catalogue.md"]),
    ("compare", _cmp("{in}/gd42.safetensors", out=NOWHERE + "/out")),
])
def test_unwritable_output_is_refused_up_front(workdir, inputs, monkeypatch, tool, argv, refused):
    monkeypatch.setattr(errata, "run_all", _no_work)
    monkeypatch.setattr(catalogue_report, "rows", _no_work)
    monkeypatch.setattr(compare, "compare", _no_work)
    main = {"errata": errata.main, "catalogue_report": catalogue_report.main, "compare": compare.main}[tool]
    refused(main, _fill(argv, workdir, inputs), workdir, ["cannot create folder", NOWHERE])


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("tool,argv", [
    ("errata", ["--json", "/proc/polyverify-e.json"]),
    ("errata", ["--markdown", "/proc/polyverify-e.md"]),
    ("catalogue_report", ["--markdown", "/proc/polyverify-c.md"]),
])
def test_existing_unwritable_folder_is_refused_up_front(workdir, monkeypatch, tool, argv, refused):
    """/proc exists and root passes os.access on it, yet no file can be made there:
    the check creates a probe file, so the refusal comes before the work (errata ran everything first)."""
    monkeypatch.setattr(errata, "run_all", _no_work)
    monkeypatch.setattr(catalogue_report, "rows", _no_work)
    main = {"errata": errata.main, "catalogue_report": catalogue_report.main}[tool]
    refused(main, argv, workdir, [argv[0], "/proc", "not writable"])


ROW = {"id": "e1", "paper": "seed 000", "location": "eq. (1)", "as_printed": "a", "correction": "b",
       "as_printed_rejected": True, "corrected_proved": True, "failure": None, "residual": None,
       "counterexample": {"assignment": {"x": "1"}, "left": "1", "right": "2"}, "seconds": 0.0}


def test_errata_outputs_go_into_a_new_folder_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(errata, "run_all", lambda: [dict(ROW)])
    md, js = tmp_path / "new" / "errata.md", tmp_path / "other" / "e.json"
    assert errata.main(["--markdown", str(md), "--json", str(js)]) == 0
    assert md.read_text() == errata.markdown([ROW]) and json.loads(js.read_text())[0]["id"] == "e1"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["e.json", "errata.md", "new", "other"]  # no temp


def test_catalogue_report_output_goes_into_a_new_folder_whole(tmp_path, capsys, monkeypatch):
    row = {"name": "x", "paper": "seed 000", "sizes": {"n": 2}, "layers": "1", "state": "1 x 1", "claim": None,
           "proved": True, "seconds": 0.0}
    monkeypatch.setattr(catalogue_report, "rows", lambda: [row])
    md = tmp_path / "new" / "catalogue.md"
    assert catalogue_report.main(["--markdown", str(md)]) == 0
    assert md.read_text() == catalogue_report.markdown([row])
    assert str(md) in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["catalogue.md", "new"]


@pytest.mark.parametrize("mod", [errata, catalogue_report])
def test_every_option_has_help(mod):
    for action in mod.build_parser()._actions:
        assert action.help, action.option_strings
