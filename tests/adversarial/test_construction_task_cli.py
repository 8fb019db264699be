"""Bad input to ``python -m numerics.training.construction_task`` is refused before any
training: exit 2, one line, nothing written."""
from __future__ import annotations

import pytest

from numerics.training import construction_task as ct

CASES = [
    (["--n", "100000"], "--n = 100000 exceeds the limit"),
    (["--n", "2", "--d", "3"], "--n (2) must be >= --d (3)"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--batch", "10000000"], "--batch = 10000000 exceeds the limit"),
    (["--lr", "nan"], "--lr must be a finite number"),
    (["--lr=-1"], "--lr must be > 0"),
    (["--gamma", "2"], "--gamma = 2.0 exceeds the limit 1.0"),
    (["--seed=-1"], "--seed must be >= 0"),
    (["--threads", "0"], "--threads must be >= 1"),
    (["--out", "{tmp}/afile"], "is a file, not a folder"),
]


@pytest.mark.parametrize("extra,needle", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_refused_before_training(tmp_path, monkeypatch, refused, extra, needle):
    monkeypatch.setattr(ct, "train", lambda *a, **kw: pytest.fail("training started"))
    (tmp_path / "afile").write_text("a file")
    argv = ["gd-baseconv", "--out", str(tmp_path / "run")] + [x.replace("{tmp}", str(tmp_path)) for x in extra]
    refused(ct.main, argv, tmp_path, [needle])
