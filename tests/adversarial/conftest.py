"""Shared by the bad-input tests: a snapshot of a folder tree, to assert that a refused
command touched no file (contents, modification times, and which files and folders exist)."""
from __future__ import annotations

import os

import pytest


def tree_snapshot(root) -> dict:
    out = {}
    for dp, dns, fns in os.walk(root):
        for f in fns:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[p] = (fh.read(), os.stat(p).st_mtime_ns)
        for d in dns:
            out[os.path.join(dp, d)] = None
    return out


@pytest.fixture
def snapshot():
    return tree_snapshot
