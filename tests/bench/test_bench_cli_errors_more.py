"""The bench scripts' command-line contract (``polyverify.plumbing.cli``), for the scripts not covered by
``test_bench_cli_errors.py``: bench_memory, bench_compiler, bench_reference, bench_weight_distance, bench_sparse,
bench_prover_trace, bench_sweep and profile_import_stages.  A bad argument or output path is one ``error: ...``
line on stderr and exit status 2, refused before any work (each script's work functions are replaced by ones that
fail the test if called, and a new output folder named by a refused run is never created); a folder as an output
is refused; the outputs are written atomically (no temporary file left beside them) and a FIFO is written
through, never replaced (the work faked by cheap stand-ins: no real benchmark runs here).  Every output here is
under ``tmp_path``: no test names a device."""
import json
import os
import pstats
import stat
import threading
import types

import pytest

from tests.bench.cli_checks import no_work, refused

#: script -> its work functions (none may run on a refused command)
WORK = {
    "bench_memory.py": ("run",),
    "bench_compiler.py": ("scale", "pareto_table", "once", "_run_child", "random_circuit", "child"),
    "bench_reference.py": ("sample_ls", "gd_reference", "gd_reference_direct", "naive_mpmath"),
    "bench_weight_distance.py": ("_old_module", "measure"),
    "bench_sparse.py": ("measure", "prove", "compile_circuit"),
    "bench_prover_trace.py": ("trace",),
    "bench_sweep.py": ("measure", "child"),
    "profile_import_stages.py": ("instrument", "run"),
}

#: an import command for profile_import_stages (parsed and checked, never run here): its weight file must be a
#: regular file, and this test module is one (never written: an output on it is refused, as a test shows)
IMPORT = ["--", "import", os.path.abspath(__file__), "--from", "zoology"]

#: (script, bad arguments, what the error line must name)
BAD = [
    ("bench_memory.py", ["--repeat", "0"], "--repeat"),
    ("bench_memory.py", ["--depths", "100,x"], "--depths"),
    ("bench_memory.py", ["--depths", "100,500,1000"], "--depths"),  # 500 is no baseconv depth
    ("bench_memory.py", ["--depths", "4,300001"], "--depths"),  # above gd's --layers limit
    ("bench_memory.py", ["--bogus"], "--bogus"),
    ("bench_compiler.py", ["--gates", "0"], "--gates"),
    ("bench_compiler.py", ["--repeat", "two"], "--repeat"),
    ("bench_compiler.py", ["--seed", "-1"], "--seed"),
    ("bench_compiler.py", ["--targets", "baseconv,baseconv-mlp"], "--targets"),
    ("bench_compiler.py", ["--json", "r.json"], "--json"),  # the comparison writes no JSON
    ("bench_compiler.py", ["--scale", "--pareto"], "--pareto"),
    ("bench_compiler.py", ["--scale", "--timeout", "nan"], "--timeout"),
    ("bench_compiler.py", ["--scale", "--timeout", "inf"], "--timeout"),
    ("bench_compiler.py", ["--scale", "--max-rss-gib", "-1"], "--max-rss-gib"),
    ("bench_compiler.py", ["--scale", "--baseline-up-to", "-5"], "--baseline-up-to"),
    ("bench_compiler.py", ["--scale", "--sizes", "1000,100"], "--sizes"),
    ("bench_compiler.py", ["--scale", "--family", "trees"], "--family"),
    ("bench_compiler.py", ["--pareto", "--pareto-size", "6by2"], "--pareto-size"),
    ("bench_compiler.py", ["--pareto", "--target", "lsa"], "--target"),
    ("bench_reference.py", ["--steps", "0"], "--steps"),
    ("bench_reference.py", ["--batch", "x"], "--batch"),
    ("bench_reference.py", ["--kappa", "nan"], "--kappa"),
    ("bench_reference.py", ["--kappa", "0.5"], "--kappa"),
    ("bench_reference.py", ["--eta", "inf"], "--eta"),
    ("bench_reference.py", ["--eta", "-0.1"], "--eta"),
    ("bench_reference.py", ["--n", "3", "--d", "5"], "--n"),
    ("bench_reference.py", ["--digits", "5"], "--digits"),
    ("bench_reference.py", ["--seed", "-1"], "--seed"),
    ("bench_reference.py", ["--naive-problems", "0"], "--naive-problems"),
    ("bench_reference.py", ["--repeats", "0"], "--repeats"),
    ("bench_reference.py", ["--batch", "1048576", "--steps", "10000"], "--batch x --steps"),
    ("bench_weight_distance.py", [], "--before-commit"),
    ("bench_weight_distance.py", ["--before-commit", "no-such-commit"], "--before-commit"),
    ("bench_weight_distance.py", ["--before-commit=--output=x"], "--before-commit"),
    ("bench_weight_distance.py", ["--before-commit", "HEAD", "--sizes", "64x16,256"], "--sizes"),
    ("bench_weight_distance.py", ["--before-commit", "HEAD", "--sizes", "0x16"], "--sizes"),
    ("bench_sparse.py", ["--batch", "0"], "--batch"),
    ("bench_sparse.py", ["--batch", "two"], "--batch"),
    ("bench_sparse.py", ["--dense-proof-up-to", "-1"], "--dense-proof-up-to"),
    ("bench_sparse.py", ["--targets", "baseconv,mlp"], "--targets"),
    ("bench_sparse.py", ["--sizes", "ten"], "--sizes"),
    ("bench_prover_trace.py", ["--bogus"], "--bogus"),
    ("bench_prover_trace.py", ["--refute=yes"], "--refute"),
    ("bench_sweep.py", ["--depths", "152"], "--depths"),
    ("bench_sweep.py", ["--depths", "151,x"], "--depths"),
    ("bench_sweep.py", ["--depths", "0,151"], "--depths"),
    ("bench_sweep.py", ["--repeat", "0"], "--repeat"),
    ("profile_import_stages.py", ["--top", "0", *IMPORT], "--top"),
    ("profile_import_stages.py", [], "import"),
    ("profile_import_stages.py", ["--", "gd", "--layers", "4"], "import"),
    ("profile_import_stages.py", ["--", "import", "w.pt"], "--from"),
    ("profile_import_stages.py", [*IMPORT, "--proof-timeout", "-1"], "--proof-timeout"),
    ("profile_import_stages.py", ["--", "import", "/nonexistent/w.pt", "--from", "zoology"], "file not found"),
]

#: the scripts' outputs: name -> (script, the arguments with the output path ``p``, the output's flag)
OUTPUTS = {
    "bench_compiler.py --scale": ("bench_compiler.py", lambda p: ["--scale", "--json", p], "--json"),
    "bench_compiler.py --pareto": ("bench_compiler.py", lambda p: ["--pareto", "--pareto-size", "6x2", "--json", p],
                                   "--json"),
    "bench_weight_distance.py": ("bench_weight_distance.py", lambda p: ["--before-commit", "HEAD", "--json", p],
                                 "--json"),
    "bench_sparse.py": ("bench_sparse.py", lambda p: ["--json", p], "--json"),
    "bench_sweep.py --json": ("bench_sweep.py", lambda p: ["--json", p], "--json"),
    "bench_sweep.py --md": ("bench_sweep.py", lambda p: ["--md", p], "--md"),
    "profile_import_stages.py": ("profile_import_stages.py", lambda p: ["--cprofile", p, *IMPORT], "--cprofile"),
}

#: a bad argument of each script with an output (the output named too)
BAD_WITH_OUTPUT = {
    "bench_compiler.py --scale": ["--timeout", "0"],
    "bench_compiler.py --pareto": ["--target", "lsa"],
    "bench_weight_distance.py": ["--sizes", "64x"],
    "bench_sparse.py": ["--batch", "0"],
    "bench_sweep.py --json": ["--repeat", "0"],
    "profile_import_stages.py": ["--top", "-1"],
}


def _no_work(monkeypatch, mod, script):
    no_work(monkeypatch, mod, script, WORK[script])


_refused = refused


@pytest.mark.parametrize("script,args,flag", BAD, ids=[f"{s}:{' '.join(a)}" for s, a, _ in BAD])
def test_bad_argument_is_one_line_exit_2_before_any_work(script, args, flag, load_bench, monkeypatch, capsys):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    _refused(mod.main(args), capsys, flag)


@pytest.mark.parametrize("name", sorted(BAD_WITH_OUTPUT))
def test_a_bad_argument_creates_no_output_folder(name, load_bench, monkeypatch, capsys, tmp_path):
    script, with_output, _ = OUTPUTS[name]
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    out = str(tmp_path / "new" / "r.out")  # a folder the run would create: a refused run creates none
    args = with_output(out)
    cut = args.index("--") if "--" in args else len(args)
    _refused(mod.main([*args[:cut], *BAD_WITH_OUTPUT[name], *args[cut:]]), capsys, BAD_WITH_OUTPUT[name][0])
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_a_folder_as_the_output_is_refused_before_any_work(name, load_bench, monkeypatch, capsys, tmp_path):
    script, with_output, flag = OUTPUTS[name]
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    _refused(mod.main(with_output(str(tmp_path))), capsys, flag, str(tmp_path), "is a folder")


@pytest.mark.parametrize("name", sorted(set(OUTPUTS) - {"bench_sweep.py --md"}))
def test_an_output_in_an_unwritable_place_is_refused(name, load_bench, monkeypatch, capsys, tmp_path):
    script, with_output, flag = OUTPUTS[name]
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    (tmp_path / "file").write_text("")  # a file where the output's folder would be
    _refused(mod.main(with_output(str(tmp_path / "file" / "r.out"))), capsys, flag, "not a folder")


def test_bench_sweep_md_without_its_section_is_refused_before_any_run(load_bench, monkeypatch, capsys, tmp_path):
    """--md is read and replaced: a file without the measured section was refused only after every run."""
    mod = load_bench("bench_sweep.py")
    _no_work(monkeypatch, mod, "bench_sweep.py")
    md = tmp_path / "sweeps.md"
    md.write_text("# no section here\n")
    _refused(mod.main(["--md", str(md)]), capsys, "--md", "no <!-- bench_sweep:begin -->")
    _refused(mod.main(["--md", str(tmp_path / "missing.md")]), capsys, "--md", "file not found")
    assert md.read_text() == "# no section here\n"


def test_bench_sweep_json_on_the_md_is_refused(load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench("bench_sweep.py")
    _no_work(monkeypatch, mod, "bench_sweep.py")
    md = tmp_path / "sweeps.md"
    md.write_text(f"{mod.BEGIN}\n{mod.END}\n")
    _refused(mod.main(["--md", str(md), "--json", str(md)]), capsys, "--json", "the same file as --md")


def test_profile_import_stages_cprofile_on_the_weight_file_is_refused(load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench("profile_import_stages.py")
    _no_work(monkeypatch, mod, "profile_import_stages.py")
    w = tmp_path / "w.pt"
    w.write_bytes(b"weights")
    _refused(mod.main(["--cprofile", str(w), "--", "import", str(w), "--from", "zoology"]), capsys, "--cprofile",
             "the weight file")
    assert w.read_bytes() == b"weights"


def test_bench_compiler_child_mode_runs_as_it_was_called(load_bench, monkeypatch):
    """The scale children (``--child FAMILY GATES TARGET SEED MAX_RSS_GIB``, built by _run_child) bypass the
    parser and reach ``child`` with their arguments as before."""
    mod = load_bench("bench_compiler.py")
    got = []
    monkeypatch.setattr(mod, "child", lambda *a: got.append(a) or 0)
    assert mod.main(["--child", "blocks", "250", "baseconv", "3", "12"]) == 0
    assert got == [("blocks", 250, "baseconv", 3, 12.0)]


# ------------------------------------------------------------------ the writes, with the work faked


def _sweep_run(mode, workers, depths):
    return {"mode": mode, "workers": workers, "cells": 16, "ready_s": 0.0, "failed": 0, "cells_wall_s": 0.0,
            "cells_cpu_s": 0.0, "results": [1], "wall_s": 1.0, "cpu_user_s": 0.0, "cpu_sys_s": 0.0, "cpu_s": 0.0,
            "load_before": 0.0, "load_after": 0.0}


def _fake_work(monkeypatch, mod, name, tmp_path):
    """Cheap stand-ins for the work functions of output ``name``'s script; the arguments its success run needs
    besides the output."""
    if name == "bench_compiler.py --scale":
        monkeypatch.setattr(mod, "_run_child", lambda a, n, target: {
            "gates": n, "target": target, "compile_cpu": 1.0, "prove_cpu": 1.0, "compile_wall": 1.0,
            "prove_wall": 1.0, "peak_rss_mib": 10.0, "layers": 1, "state": [1, 1], "proved": True})
        return ["--sizes", "60,250", "--baseline-up-to", "60"]
    if name == "bench_compiler.py --pareto":
        monkeypatch.setattr("constructions.compiler.budget.pareto", lambda g, target: [])
        monkeypatch.setattr("circuits.builders.gd_step", lambda *a, **k: None)
        return []
    if name == "bench_weight_distance.py":
        monkeypatch.setattr(mod, "_old_module", lambda commit: types.SimpleNamespace(weight_distance=None))
        monkeypatch.setattr(mod, "measure", lambda size, n, d, new, old: {"size": size, "line": "fake"})
        return ["--sizes", "4x2"]
    if name == "bench_sparse.py":
        monkeypatch.setattr(mod, "compile_circuit", lambda *a, **k: None)
        monkeypatch.setattr(mod, "prove", lambda *a, **k: None)
        f = {"sparse_cpu_per_problem": 1.0, "dense_cpu_per_problem": 1.0, "sparse_wall": 0.0, "dense_wall": 0.0,
             "rel_diff": 0.0}
        monkeypatch.setattr(mod, "measure", lambda gates, target, a: {
            "gates": gates, "target": target, "state": [1, 1], "layers": 1, "compile_cpu": 0.0, "entries_sparse": 1,
            "entries_dense": 2, "nonzero": 1, "float64": f, "float32": f,
            "proof": {"sparse_cpu": 0.0, "dense_cpu": 0.0, "sparse_ok": True, "dense_ok": True}})
        return ["--sizes", "60", "--targets", "baseconv"]
    if name.startswith("bench_sweep.py"):
        monkeypatch.setattr(mod, "measure", _sweep_run)
        return []
    assert name == "profile_import_stages.py"
    monkeypatch.setattr(mod, "instrument", lambda stages: None)
    monkeypatch.setattr(mod, "run", lambda argv, out: 0)
    return []


def _with(with_output, path, extra):
    args = with_output(str(path))
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *extra, *args[cut:]]


def _check_written(name, data: bytes, mod):
    if name == "profile_import_stages.py":
        assert data  # cProfile's marshalled stats
    elif name == "bench_sweep.py --md":
        text = data.decode()
        assert text.startswith("intro\n" + mod.BEGIN + "\nMeasured by") and text.endswith(mod.END + "\ntail\n")
    else:
        json.loads(data)


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_the_output_is_written_atomically(name, load_bench, monkeypatch, capsys, tmp_path):
    script, with_output, _ = OUTPUTS[name]
    mod = load_bench(script)
    extra = _fake_work(monkeypatch, mod, name, tmp_path)
    folder = tmp_path / "new"
    out = folder / "r.out"
    if name == "bench_sweep.py --md":  # read and replaced: it must hold the section
        folder.mkdir()
        out.write_text(f"intro\n{mod.BEGIN}\nold\n{mod.END}\ntail\n")
    assert mod.main(_with(with_output, out, extra)) == 0, capsys.readouterr().err
    _check_written(name, out.read_bytes(), mod)
    if name == "profile_import_stages.py":
        pstats.Stats(str(out))  # a stats file pstats reads
    assert [p.name for p in folder.iterdir()] == ["r.out"]  # no temporary file left beside it


@pytest.mark.parametrize("name", sorted(set(OUTPUTS) - {"bench_sweep.py --md"}))
def test_a_fifo_as_the_output_is_written_through(name, load_bench, monkeypatch, capsys, tmp_path):
    """A FIFO (read by a thread) as the output is written through and stays a FIFO, nothing made beside it.
    (--md is read before it is replaced: a FIFO there is refused, as the next test shows.)"""
    script, with_output, _ = OUTPUTS[name]
    mod = load_bench(script)
    extra = _fake_work(monkeypatch, mod, name, tmp_path)
    fifo = tmp_path / "r.out"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        assert mod.main(_with(with_output, fifo, extra)) == 0, capsys.readouterr().err
    finally:
        if reader.is_alive() and not got:  # unblock the reader if nothing was written
            with open(fifo, "wb"):
                pass
        reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["r.out"]
    _check_written(name, got[0], mod)


def test_bench_sweep_a_fifo_as_md_is_refused(load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench("bench_sweep.py")
    _no_work(monkeypatch, mod, "bench_sweep.py")
    fifo = tmp_path / "sweeps.md"
    os.mkfifo(fifo)
    _refused(mod.main(["--md", str(fifo)]), capsys, "--md", "a FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("args,words", [
    (["--sizes", "10"], ("--sizes 10: not read by the comparison",)),
    (["--json", "x.json"], ("--json x.json: not read by the comparison",)),
    (["--scale", "--gates", "5"], ("--gates 5: not read by --scale",)),
    (["--scale", "--repeat", "2"], ("--repeat 2: not read by --scale",)),
    (["--pareto", "--seed", "3"], ("--seed 3: not read by --pareto",)),
    (["--pareto", "--family", "blocks"], ("--family blocks: not read by --pareto",)),
    (["--scale", "--quick", "--sizes", "100"], ("--sizes 100 with --quick",)),
])
def test_bench_compiler_refuses_an_option_its_mode_does_not_read(args, words, load_bench, monkeypatch, capsys):
    """Each mode of bench_compiler reads its own options (READ_BY); one set off its default that the mode would
    ignore is refused before any work, naming it and the mode."""
    mod = load_bench("bench_compiler.py")
    no_work(monkeypatch, mod, "bench_compiler.py", ("scale", "pareto_table", "random_circuit", "once"))
    refused(mod.main(args), capsys, *words)
