"""What the bench scripts' command-line tests share (``test_bench_cli_errors*.py``): work functions replaced by
ones that fail the test if called, and the check of a refusal (exit status 2, one ``error:`` line, nothing on
standard output)."""
from __future__ import annotations


def no_work(monkeypatch, mod, script: str, names) -> None:
    """Replace each of ``mod``'s work functions ``names`` by one that fails the test if a refused command calls it."""
    for name in names:
        def forbidden(*a, _name=name, **k):
            raise AssertionError(f"{script}: {_name} ran on a refused command")
        monkeypatch.setattr(mod, name, forbidden)


def refused(rc, capsys, *words) -> str:
    """``rc`` is 2, standard output empty, standard error one ``error:`` line holding every one of ``words``."""
    cap = capsys.readouterr()
    assert rc == 2, cap
    assert cap.out == "", cap.out
    assert cap.err.startswith("error: ") and cap.err.count("\n") == 1, cap.err
    for w in words:
        assert w in cap.err, cap.err
    return cap.err
