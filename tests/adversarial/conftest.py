"""Shared by the bad-input tests: a snapshot of a folder tree, to assert that a refused
command touched no file (contents, modification times, and which files and folders exist)."""
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
