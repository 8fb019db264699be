"""Issue 39, items 1-2: an output path never replaces what is not the command's own.

* an existing character device or FIFO is written through (the whole output lands in it, the node
  stays what it was), never replaced by a regular file;
* a symbolic link is followed: the file it points to is replaced, the link stays a link;
* any other special file (a socket here) is refused with one line, exit 2, before any work;
* two outputs of one command on one path (compared resolved) are refused, before any work.

Table-driven over every command and output option that writes a file; each command is called
in-process through its ``main`` (``polyverify.cli.run_main``), as ``python -m`` would run it.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from polyverify.cli import EXIT_USAGE


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

    return importlib.import_module(module).main


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
            with open(fifo, "wb"):
                pass
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
    from polyverify.cli import UsageError, output_file, run_main

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
    from polyverify.cli import UsageError, output_dir

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
