"""The bench scripts' command-line contract (the toolkit's plumbing, ``polyverify.plumbing.cli``): a bad
argument or output path is one ``error: ...`` line on stderr and exit status 2, refused before any benchmark
work (each script's work functions are replaced by ones that fail the test if called, and a new output folder
named by the refused run is never created); a folder as ``--json`` (or as the ``.md`` written beside it) is
refused; the results are written atomically and a character device (``/dev/null``) is written through, never
replaced (the work faked by cheap stand-ins: no real benchmark runs here)."""
import json
import os
import stat

import pytest

from tests.bench.cli_checks import no_work, refused

#: script -> its work functions (none may run on a refused command)
WORK = {
    "bench_default_compile.py": ("cases",),
    "bench_distance.py": ("measure",),
    "bench_import_trained.py": ("files", "run", "_modules_at"),
    "bench_modp.py": ("cases", "run_one"),
    "bench_modular.py": ("row", "load_baseline"),
    "bench_nearest.py": ("measure",),
    "bench_peer_import_read.py": ("make", "run_one"),
    "bench_refute.py": ("tampered_file", "measured"),
}
#: the scripts that write a .md table beside the --json
MD_BESIDE = ("bench_distance.py", "bench_modular.py", "bench_nearest.py")

#: (script, bad arguments, the flag the error line must name)
BAD = [
    ("bench_default_compile.py", ["--src", "/nonexistent-tree"], "--src"),
    ("bench_default_compile.py", ["--quick", "--unknown"], "--unknown"),
    ("bench_distance.py", ["--sizes", "64x16,256"], "--sizes"),
    ("bench_distance.py", ["--sizes", "8192x2"], "--sizes"),
    ("bench_distance.py", ["--finetuned", "20xfive"], "--finetuned"),
    ("bench_distance.py", ["--batch", "0"], "--batch"),
    ("bench_distance.py", ["--batch", "-3"], "--batch"),
    ("bench_import_trained.py", ["--sizes", "4x2,20"], "--sizes"),
    ("bench_import_trained.py", ["--timeout", "0"], "--timeout"),
    ("bench_import_trained.py", ["--memory-gib", "nan"], "--memory-gib"),
    ("bench_import_trained.py", ["--baseline-timeout", "-1"], "--baseline-timeout"),
    ("bench_import_trained.py", ["--baseline-commit", "no-such-commit"], "--baseline-commit"),
    ("bench_import_trained.py", ["--before-commit=--output=x"], "--before-commit"),
    ("bench_modp.py", ["--repeat", "0"], "--repeat"),
    ("bench_modp.py", ["--repeat", "two"], "--repeat"),
    ("bench_modular.py", ["--sizes", "64x16x2"], "--sizes"),
    ("bench_modular.py", ["--reps", "0"], "--reps"),
    ("bench_modular.py", ["--baseline-commit", "no-such-commit"], "--baseline-commit"),
    ("bench_nearest.py", ["--size", "64x"], "--size"),
    ("bench_nearest.py", ["--size", "64x16,8x2"], "--size"),
    ("bench_nearest.py", ["--eta", "one quarter"], "--eta"),
    ("bench_nearest.py", ["--eta", "1/0"], "--eta"),
    ("bench_nearest.py", ["--eta", "1/3", "--archs", "baseconv,lsa"], "--eta"),
    ("bench_nearest.py", ["--sigma", "-1e-3"], "--sigma"),
    ("bench_nearest.py", ["--sigma", "inf"], "--sigma"),
    ("bench_nearest.py", ["--archs", "baseconv,no-such-arch"], "--archs"),
    ("bench_peer_import_read.py", ["--runs", "0"], "--runs"),
    ("bench_peer_import_read.py", ["--tree", "/nonexistent-tree"], "--tree"),
    ("bench_refute.py", ["--sizes", "64x16x4"], "--sizes"),
    ("bench_refute.py", ["--finetuned", "20x5"], "--finetuned"),
    ("bench_refute.py", ["--baseline-sizes", "big"], "--baseline-sizes"),
    ("bench_refute.py", ["--memory-gib", "0"], "--memory-gib"),
    ("bench_refute.py", ["--timeout", "inf"], "--timeout"),
]


def _no_work(monkeypatch, mod, script):
    no_work(monkeypatch, mod, script, WORK[script])


_refused = refused


@pytest.mark.parametrize("script,args,flag", BAD, ids=[f"{s}:{' '.join(a)}" for s, a, _ in BAD])
def test_bad_argument_is_one_line_exit_2_before_any_work(script, args, flag, load_bench, monkeypatch, capsys,
                                                         tmp_path):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    out = tmp_path / "new" / "r.json"  # a folder the run would create: a refused run creates none
    _refused(mod.main([*args, "--json", str(out)]), capsys, flag)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("script", sorted(WORK))
def test_a_folder_as_json_is_refused_before_any_work(script, load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    _refused(mod.main(["--json", str(tmp_path)]), capsys, "--json", str(tmp_path), "is a folder")


@pytest.mark.parametrize("script", MD_BESIDE)
def test_a_folder_where_the_md_goes_is_refused_before_any_work(script, load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    (tmp_path / "r.md").mkdir()
    _refused(mod.main(["--json", str(tmp_path / "r.json")]), capsys, "--json (.md beside it)", "is a folder")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("script", sorted(WORK))
def test_an_output_in_an_unwritable_place_is_refused(script, load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    (tmp_path / "file").write_text("")  # a file where the output's folder would be
    _refused(mod.main(["--json", str(tmp_path / "file" / "r.json")]), capsys, "--json", "not a folder")


@pytest.mark.parametrize("script", sorted(set(WORK) - set(MD_BESIDE)))
def test_dev_null_with_a_bad_argument_is_left_alone(script, load_bench, monkeypatch, capsys):
    mod = load_bench(script)
    _no_work(monkeypatch, mod, script)
    bad = next(a for s, a, _ in BAD if s == script)
    _refused(mod.main([*bad, "--json", os.devnull]), capsys)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# ------------------------------------------------------------------ the writes, with the work faked


def _fake_work(monkeypatch, mod, script, tmp_path):
    """Cheap stand-ins for the work functions (rows of the shape each script prints and writes); the
    arguments each script's success run needs."""
    if script == "bench_default_compile.py":
        monkeypatch.setattr(mod, "cases", lambda quick: {})
        return ["--quick"]
    if script == "bench_distance.py":
        monkeypatch.setattr(mod, "measure", lambda n, d, folder, batch, finetuned: {
            "size": f"{n}x{d}", "file": "fake", "wall_s": 0.0, "cpu_s": 0.0, "line": "fake", "sampled_max_abs": 0.0,
            "sampled_rms": 0.0, "certified_bound": None, "certified_skipped": "fake", "certified_seconds": None,
            "certified_terms": None})
        return ["--sizes", "4x2", "--finetuned", ""]
    if script == "bench_import_trained.py":
        monkeypatch.setattr(mod, "files", lambda folder, sizes: [])
        return ["--sizes", "4x2"]
    if script == "bench_modp.py":
        monkeypatch.setattr(mod, "cases", lambda tmp: {})
        return ["--repeat", "1"]
    if script == "bench_modular.py":
        monkeypatch.setattr(mod, "load_baseline", lambda commit: None)
        monkeypatch.setattr(mod, "row", lambda new, old, n, d, dense, batch, reps: {
            "size": f"{n}x{d}", "layers": "fake", "state": [1, 1], "n_layers": 0, "batch": batch, "equal": True,
            "old_cpu_s": 0.0, "new_cpu_s": 0.0, "old_wall_s": 0.0, "new_wall_s": 0.0, "cpu_ratio": 1.0,
            "wall_ratio": 1.0})
        return ["--sizes", "4x2", "--reps", "1"]
    if script == "bench_nearest.py":
        monkeypatch.setattr(mod, "measure", lambda arch, n, d, sigma, eta: {
            "arch": arch, "size": f"{n}x{d}", "build_s": 0.0, "fit_wall_s": 0.0, "cpu_s": 0.0, "summary": "fake",
            "snapped_verdict": "fake", "kept": None, "file_params": {}, "fitted": {}, "rational": {},
            "distance": 0.0, "spurious": 0})
        return ["--size", "4x2", "--archs", "baseconv"]
    if script == "bench_peer_import_read.py":
        monkeypatch.setattr(mod, "make", lambda folder, fmt, n: (folder / "fake", {}, 1))
        monkeypatch.setattr(mod, "run_one", lambda tree, fmt, path, cfg: {
            "cpu_s": 0.0, "wall_s": 0.0, "peak_rss_mib": 1.0, "values_sha256": "fake"})
        return ["--sizes", "zoology:4x2x1", "--runs", "1"]
    assert script == "bench_refute.py"
    monkeypatch.setattr(mod, "tampered_file", lambda n, d, folder, k=1, finetuned=False: folder / "fake")
    monkeypatch.setattr(mod, "measured", lambda cmd, cap, timeout: {
        "rc": 1, "timed_out": False, "wall_s": 0.0, "verdict_s": 0.0, "cpu_s": 0.0, "rss_mib": 1.0,
        "tail": json.dumps({"verdict": "FAILED"})})
    return ["--sizes", "64x16", "--finetuned", "", "--baseline-sizes", ""]


@pytest.mark.parametrize("script", sorted(WORK))
def test_the_results_are_written_atomically(script, load_bench, monkeypatch, capsys, tmp_path):
    mod = load_bench(script)
    args = _fake_work(monkeypatch, mod, script, tmp_path)
    out = tmp_path / "new" / "r.json"
    assert mod.main([*args, "--json", str(out)]) == 0, capsys.readouterr().err
    json.loads(out.read_text())
    expected = {"r.json", "r.md"} if script in MD_BESIDE else {"r.json"}
    assert {p.name for p in out.parent.iterdir()} == expected  # no temporary file left beside it


@pytest.mark.parametrize("script", sorted(WORK))
def test_dev_null_is_written_through_never_replaced(script, load_bench, monkeypatch, capsys, tmp_path):
    """``--json /dev/null`` is written through and stays a character device; a script that writes a .md table
    beside its --json writes none beside a device (no ``/dev/null.md``) and says so."""
    mod = load_bench(script)
    args = _fake_work(monkeypatch, mod, script, tmp_path)
    before = set(os.listdir(os.path.dirname(os.devnull)))
    assert mod.main([*args, "--json", os.devnull]) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert set(os.listdir(os.path.dirname(os.devnull))) <= before
    if script in MD_BESIDE:
        assert "no .md table: --json is a device or FIFO" in capsys.readouterr().out


@pytest.mark.parametrize("script", MD_BESIDE)
def test_a_fifo_as_json_is_written_through(script, load_bench, monkeypatch, capsys, tmp_path):
    """The scripts with a .md beside the --json: a FIFO (read by a thread) is written through, not replaced,
    and no .md is made beside it (a FIFO is written through like a device)."""
    import threading

    mod = load_bench(script)
    args = _fake_work(monkeypatch, mod, script, tmp_path)
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    assert mod.main([*args, "--json", str(fifo)]) == 0, capsys.readouterr().err
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["rows"] and not (tmp_path / "r.md").exists()
