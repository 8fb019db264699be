"""Issue 39, items 1-2: an output path never replaces what is not the command's own.

* an existing character device or FIFO is written through (the whole output lands in it, the node
  stays what it was), never replaced by a regular file;
* a symbolic link is followed: the file it points to is replaced, the link stays a link;
* any other special file (a socket here) is refused with one line, exit 2, before any work;
* two outputs of one command on one path (compared resolved) are refused, before any work.

Table-driven over every command and output option that writes a file; each command is called
in-process through its ``main`` (``polyverify.plumbing.cli.run_main``), as ``python -m`` would run it.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from polyverify.plumbing.cli import EXIT_USAGE


def _graph(tmp: Path) -> str:
    """y = x0 x1 + x2: a circuit the circuit command compiles and proves in well under a second."""
    nodes = [{"id": i, "op": "input", "name": f"x{i}"} for i in range(3)]
    nodes += [{"id": "m", "op": "mul"}, {"id": "y", "op": "add", "output": "y"}]
    links = [{"source": 0, "target": "m"}, {"source": 1, "target": "m"}, {"source": "m", "target": "y"},
             {"source": 2, "target": "y"}]
    p = tmp / "g.json"
    p.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}))
    return str(p)


def _main(module: str):
    import importlib

    mod = importlib.import_module(module)
    return getattr(mod, "main", None) or importlib.import_module(module + ".__main__").main


# (id, module, argv before the output option, the output option, a file name with the right suffix)
COMMANDS = [
    ("gd-json", "verify.construct", ["gd", "--layers", "4", "--batch", "8"], "--json", "r.json"),
    ("gd-export", "verify.construct", ["gd", "--layers", "4", "--batch", "8"], "--export", "w.safetensors"),
    ("circuit-json", "verify.construct", ["circuit", "--graph", "{graph}", "--float-trials", "4"], "--json", "r.json"),
    ("circuit-export", "verify.construct", ["circuit", "--graph", "{graph}", "--float-trials", "4"], "--export",
     "w.safetensors"),
    ("entry-json", "verify.construct", ["s000-linear"], "--json", "r.json"),
    ("errata-json", "verify.errata", [], "--json", "e.json"),
    ("errata-markdown", "verify.errata", [], "--markdown", "e.md"),
    ("random-out", "circuits.random", ["--gates", "5"], "--out", "c.json"),
]

#: commands with two output options: (id, module, argv, first option, second option, suffix)
PAIRS = [
    ("gd", "verify.construct", ["gd", "--layers", "4", "--batch", "8"], "--export", "--json", "w.safetensors"),
    ("gd-resolved", "verify.construct", ["gd", "--layers", "4", "--batch", "8"], "--json", "--export",
     "sub/../w.safetensors"),
    ("circuit", "verify.construct", ["circuit", "--graph", "{graph}"], "--json", "--export", "w.safetensors"),
    ("errata", "verify.errata", [], "--json", "--markdown", "e.md"),
]


def _argv(tmp: Path, argv: list[str]) -> list[str]:
    graph = _graph(tmp) if any("{graph}" in a for a in argv) else None
    return [a.replace("{graph}", graph) if graph else a for a in argv]


def _run(module: str, argv: list[str], capsys):
    rc = _main(module)(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def release_reader(fifo) -> None:
    """End a reader thread's wait on ``fifo`` (a command that never opened it): open and close its write
    end without blocking.  A blocking open hung forever when the reader finished between the caller's
    ``is_alive()`` and the open (no reader left); here that is ENXIO, and nothing is left to release."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: no reader any more (it read what the command wrote, to its end)
        pass


@pytest.mark.parametrize("name,module,argv,flag,fname", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_fifo_is_written_through(tmp_path, capsys, name, module, argv, flag, fname):
    fifo = tmp_path / fname
    os.mkfifo(fifo)
    got = []

    def read():
        with open(fifo, "rb") as f:  # blocks until the command opens it for writing
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc, _, err = _run(module, [*_argv(tmp_path, argv), flag, str(fifo)], capsys)
    finally:
        if reader.is_alive():  # the command never wrote: let the reader go
            release_reader(fifo)
        reader.join(10)
    assert rc == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert got and len(got[0]) > 0, "nothing reached the FIFO's reader"


def _char_device(tmp: Path) -> Path:
    """A character device node in ``tmp`` that behaves as /dev/null (major 1, minor 3), or a skip."""
    node = tmp / "null-node"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with open(node, "wb") as f:
            f.write(b"x")
    except (OSError, AttributeError) as e:
        pytest.skip(f"cannot make a working character device node here ({e}): needs root and a dev mount")
    return node


@pytest.mark.parametrize("name,module,argv,flag,fname", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_character_device_is_written_through(tmp_path, capsys, name, module, argv, flag, fname):
    node = _char_device(tmp_path)
    link = tmp_path / fname  # the right suffix for the option, pointing at the device
    link.symlink_to(node)
    rc, _, err = _run(module, [*_argv(tmp_path, argv), flag, str(link)], capsys)
    assert rc == 0, err
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the device node was replaced"
    assert os.path.islink(link), "the link to the device was replaced"


@pytest.mark.parametrize("name,module,argv,flag,fname", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_symbolic_link_is_followed(tmp_path, capsys, name, module, argv, flag, fname):
    target = tmp_path / "real" / fname
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / fname
    link.symlink_to(target)
    rc, _, err = _run(module, [*_argv(tmp_path, argv), flag, str(link)], capsys)
    assert rc == 0, err
    assert os.path.islink(link) and os.readlink(link) == str(target), "the link was replaced"
    assert target.read_bytes() != b"old", "the file the link points to was not written"
    assert not list(target.parent.glob(".*.tmp")) and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("name,module,argv,flag,fname", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_socket_is_refused_before_any_work(tmp_path, capsys, name, module, argv, flag, fname):
    path = tmp_path / fname
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        rc, out, err = _run(module, [*_argv(tmp_path, argv), flag, str(path)], capsys)
    finally:
        s.close()
    assert rc == EXIT_USAGE
    assert err.count("\n") == 1 and "socket" in err and flag in err, err
    assert "PROVED" not in out and "proof" not in err
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.mark.parametrize("name,module,argv,first,second,fname", PAIRS, ids=[c[0] for c in PAIRS])
def test_two_outputs_on_one_path_are_refused_before_any_work(tmp_path, capsys, name, module, argv, first, second,
                                                            fname):
    (tmp_path / "sub").mkdir()
    argv = _argv(tmp_path, argv)
    before = sorted(tmp_path.rglob("*"))
    rc, out, err = _run(module, [*argv, first, str(tmp_path / "w.safetensors" if "w." in fname else tmp_path / fname),
                                 second, str(tmp_path / fname)], capsys)
    assert rc == EXIT_USAGE, err
    assert err.count("\n") == 1 and first in err and second in err and "same" in err, err
    assert "PROVED" not in out
    assert sorted(tmp_path.rglob("*")) == before, "a file was written"


def test_a_character_device_takes_several_outputs(tmp_path, capsys):
    """Two outputs discarded into one character device is no clash: nothing is overwritten."""
    node = _char_device(tmp_path)
    (tmp_path / "w.safetensors").symlink_to(node)
    rc, _, err = _run("verify.construct", ["gd", "--layers", "4", "--batch", "8", "--json", str(node),
                                           "--export", str(tmp_path / "w.safetensors")], capsys)
    assert rc == 0, err
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_dev_stdout_redirected_to_a_file_keeps_what_was_printed_before(tmp_path):
    """``--json /dev/stdout > out.txt``: the report is appended after the lines printed before it,
    not written over them (the shell's file is not truncated or replaced)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(repo) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(out, "wb") as f:
        p = subprocess.run([sys.executable, "-m", "verify.construct", "gd", "--layers", "4", "--batch", "8",
                            "--json", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                           timeout=120)
    assert p.returncode == 0, p.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("gd-baseconv") and any("PROVED" in x for x in lines), lines[:5]
    start, end = lines.index("{"), lines.index("}")
    report = json.loads("\n".join(lines[start:end + 1]))  # whole, not written over by later lines
    assert report["construction"]["name"] == "gd-baseconv"
    assert lines[end + 1:] == ["report written to /dev/stdout"]


@pytest.mark.parametrize("flag", ["--json", "--export"])
def test_output_file_refuses_a_socket_and_accepts_a_fifo(tmp_path, flag):
    from polyverify.plumbing.cli import UsageError, output_file, run_main

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    sock = tmp_path / "s"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    try:
        def fn(_):
            assert output_file(flag, fifo) == fifo
            with pytest.raises(UsageError, match="is a socket"):
                output_file(flag, sock)
            return 0

        assert run_main(fn, []) == 0
    finally:
        s.close()


def test_output_dir_refuses_an_empty_name():
    from polyverify.plumbing.cli import UsageError, output_dir

    with pytest.raises(UsageError, match="not a folder name"):
        output_dir("--out", "")


@pytest.mark.parametrize("fmt", [[], ["--format", "precision-ls"]])
def test_export_into_a_device_without_a_suffix(tmp_path, capsys, fmt):
    """``--export /dev/null``: a device has no suffix to read the format from, so the suffix check
    (``--export keep.txt`` is refused) does not apply; the format's own encoding is written through."""
    node = _char_device(tmp_path)
    rc, _, err = _run("verify.construct", ["gd", "--layers", "4", "--batch", "8", "--export", str(node), *fmt], capsys)
    assert rc == 0, err
    assert stat.S_ISCHR(os.lstat(node).st_mode)


# ------------------------------------------------------------------ an attack run's findings (issue 39)

def _export(tmp: Path, name: str = "w.safetensors") -> Path:
    from constructions.gd_baseconv import gd_baseconv
    from verify.export import export

    path = tmp / name
    export(path, gd_baseconv(20, 5))
    return path


def _results_copy(tmp: Path) -> Path:
    import shutil

    repo = Path(__file__).resolve().parents[2]
    dst = tmp / "results"
    shutil.copytree(repo / "docs" / "experiments", dst)
    return dst


# (id, module, argv with {tmp}, {w} (a gd-baseconv weight file), {results} (a copy of the committed
#  experiment results); the file that must stay as it was)
OUTPUT_ON_INPUT = [
    ("gd-weights", "verify.construct", ["gd", "--layers", "4", "--batch", "8", "--weights", "{w}", "--json", "{w}"],
     "{w}", "--weights"),
    ("gd-weights-resolved", "verify.construct", ["gd", "--layers", "4", "--batch", "8", "--weights",
                                                 "{tmp}/sub/../w.safetensors", "--json", "{w}"], "{w}", "--weights"),
    ("import-file", "verify.construct", ["import", "{w}", "--from", "polyverify", "--spec", "gd-baseconv", "--json",
                                         "{w}"], "{w}", "input"),
    ("import-layout", "verify.construct", ["import", "{w}", "--from", "polyverify", "--spec", "gd-baseconv",
                                           "--layout", "{tmp}/lay.json", "--json", "{tmp}/lay.json"],
     "{tmp}/lay.json", "--layout"),
    ("circuit-graph", "verify.construct", ["circuit", "--graph", "{graph}", "--json", "{graph}"], "{graph}", "--graph"),
    ("compare-learned", "verify.compare", ["--learned", "{tmp}/cmp/report.json", "--construction", "gd-baseconv",
                                           "--out", "{tmp}/cmp"], "{tmp}/cmp/report.json", "--learned"),
    ("experiments-report", "numerics.experiments", ["report", "--results", "{results}", "--out",
                                                    "{results}/seed000-table7/summary.json"],
     "{results}/seed000-table7/summary.json", "--results"),
    ("sweep-grid", "numerics.sweep", ["run", "{tmp}/sw/sweep.json", "--out", "{tmp}/sw", "--workers", "1"],
     "{tmp}/sw/sweep.json", "sweep.json"),
]


@pytest.mark.parametrize("name,module,argv,keep,words", OUTPUT_ON_INPUT, ids=[c[0] for c in OUTPUT_ON_INPUT])
def test_an_output_on_an_input_is_refused_before_any_work(tmp_path, capsys, name, module, argv, keep, words):
    (tmp_path / "sub").mkdir()
    w = _export(tmp_path)
    (tmp_path / "lay.json").write_text('{"format": "polyverify-layout/1"}')
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "report.json").write_bytes(w.read_bytes())
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "sweep.json").write_text(json.dumps({"sweep": "roundoff", "fixed": {"n": 4, "d": 2, "batch": 4},
                                                            "grid": {"arch": ["baseconv"], "layers": [4]}}))
    results = _results_copy(tmp_path) if "{results}" in " ".join(argv) else tmp_path

    def fill(s: str) -> str:
        return (s.replace("{tmp}", str(tmp_path)).replace("{w}", str(w)).replace("{results}", str(results))
                .replace("{graph}", str(tmp_path / "g.json")))

    _graph(tmp_path)
    kept = Path(fill(keep))
    before = kept.read_bytes()
    rc, out, err = _run(module, [fill(a) for a in argv], capsys)
    assert rc == EXIT_USAGE, (rc, err)
    assert err.count("\n") == 1 and words in err, err
    assert "PROVED" not in out
    assert kept.read_bytes() == before, "the input was overwritten"


@pytest.mark.parametrize("module,argv", [
    ("numerics.roundoff", ["baseconv", "--layers", "4", "--dtypes", "float64", "--batch", "8", "--backend", "numpy"]),
    ("numerics.train", ["gradient", "--steps", "2", "--batch", "8", "--width", "8", "--eval-every", "2",
                        "--n", "3", "--d", "2", "--layers", "1", "--eval-batch", "8"]),  # the smallest run
], ids=["roundoff", "train"])
def test_an_output_folder_that_is_a_dangling_link_is_followed(tmp_path, capsys, module, argv):
    """``--out LINK`` where LINK points at a folder not made yet: the folder it names is made and
    written (was a FileExistsError traceback after the work)."""
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "target")
    rc, _, err = _run(module, [*argv, "--out", str(link)], capsys)
    assert rc == 0, err
    assert os.path.islink(link) and (tmp_path / "target").is_dir() and any((tmp_path / "target").iterdir())


def test_a_plot_into_a_fifo_needs_no_png_suffix(tmp_path, capsys):
    """``--plot`` onto a FIFO is written through, as ``--export`` and ``--json`` are (it was refused for
    its missing .png suffix)."""
    fifo = tmp_path / "plot"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    rc, _, err = _run("verify.construct", ["circuit", "--graph", _graph(tmp_path), "--float-trials", "4",
                                           "--plot", str(fifo)], capsys)
    if reader.is_alive():  # a command that wrote nothing: end the reader's wait
        release_reader(fifo)
    reader.join(10)
    assert rc == 0, err
    assert got and got[0].startswith(b"\x89PNG")


@pytest.mark.parametrize("module,argv,words", [
    ("verify.construct", ["gd", "--layers", "4", "--batch", "8", "--dtype", "float32,float32"], "given twice"),
    ("verify.construct", ["s000-read", "--set", "n=3", "--set", "n=4"], "given twice"),
    ("verify.compare", ["--learned", "{w}", "--construction", "gd-baseconv", "--out", "{tmp}/c", "--sigmas", "1,1"],
     "given twice"),
    ("numerics.experiments", ["report", "--results", "", "--out", "{tmp}/r.md"], "--results"),
    ("numerics.experiments", ["report", "--results", "{tmp}/empty", "--out", "{tmp}/r.md"], "no experiment"),
], ids=["gd-dtype-twice", "set-twice", "compare-sigmas-twice", "results-empty-name", "results-empty-folder"])
def test_a_repeated_or_empty_value_is_refused(tmp_path, capsys, module, argv, words):
    (tmp_path / "empty").mkdir()
    w = _export(tmp_path)
    rc, out, err = _run(module, [a.replace("{tmp}", str(tmp_path)).replace("{w}", str(w)) for a in argv], capsys)
    assert rc == EXIT_USAGE, (rc, err)
    assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "r.md").exists()


def test_a_graph_from_a_fifo_whose_writer_comes_late_is_read(tmp_path, capsys):
    """``--graph FIFO``: the command waits for the writer, as ``cat`` does (a non-blocking open raced the
    writer and read an empty file: 'invalid JSON')."""
    import time

    src = Path(_graph(tmp_path)).read_bytes()
    fifo = tmp_path / "gfifo"
    os.mkfifo(fifo)

    def write():
        time.sleep(0.5)
        with open(fifo, "wb") as f:
            f.write(src)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    rc, out, err = _run("verify.construct", ["circuit", "--graph", str(fifo), "--float-trials", "4"], capsys)
    writer.join(10)
    assert rc == 0, err
    assert "PROVED" in out


def test_output_beside_is_checked_beside_a_file_and_none_beside_a_device(tmp_path):
    """The file written beside an output (a .md table beside a --json): checked like any output beside a regular
    path (a folder in its place refused), None beside a FIFO or a character device (nothing made in /dev)."""
    from polyverify.plumbing.cli import UsageError, output_beside, run_main

    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    (tmp_path / "taken.md").mkdir()

    def fn(_):
        assert output_beside("--json (.md)", tmp_path / "r.json", ".md") == tmp_path / "r.md"
        assert output_beside("--json (.md)", fifo, ".md") is None
        assert output_beside("--json (.md)", Path(os.devnull), ".md") is None
        with pytest.raises(UsageError, match=r"--json \(\.md\) .*taken\.md: is a folder"):
            output_beside("--json (.md)", tmp_path / "taken.json", ".md")
        return 0

    assert run_main(fn, []) == 0
    assert not (tmp_path / "r.md").exists() and not os.path.exists(os.devnull + ".md")
