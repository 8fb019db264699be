"""Shared by the bad-input tests: a snapshot of a folder tree, to assert that a refused
command touched no file (contents, modification times, and which files and folders exist), and
the check that a command line is refused up front."""
from __future__ import annotations

import os

import pytest


def tree_snapshot(root, read_up_to: int = 2**20) -> dict:
    """Each file's contents (files up to ``read_up_to`` bytes) or its size and inode (larger
    ones: a write changes the size or the modification time, a replacement the inode), with its
    modification time; each folder's existence."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for f in fns:
            p = os.path.join(dp, f)
            st = os.stat(p)
            if st.st_size > read_up_to:
                out[p] = (st.st_size, st.st_ino, st.st_mtime_ns)
                continue
            with open(p, "rb") as fh:
                out[p] = (fh.read(), st.st_mtime_ns)
        for d in dns:
            out[os.path.join(dp, d)] = None
    return out


@pytest.fixture
def snapshot():
    return tree_snapshot


@pytest.fixture
def refused(capsys):
    """``refused(main, argv, root, needles, **kw)``: ``main(argv, **kw)`` refuses before any work:
    exit status 2, one line ``error: ...`` on stderr naming every needle (no traceback), nothing
    on stdout nor in an ``out=`` stream, and no file under ``root`` touched. Returns that line."""
    def check(main, argv, root, needles, **kw):
        before = tree_snapshot(root)
        rc = main(argv, **kw)
        cap = capsys.readouterr()
        err, out = cap.err, kw["out"].getvalue() if "out" in kw else ""
        assert rc == 2, (out, cap)
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        for s in needles:
            assert s in err, err
        assert out == "" and cap.out == "", "refused after work had started"
        assert tree_snapshot(root) == before, "an output file was touched"
        return err.rstrip("\n")
    return check
