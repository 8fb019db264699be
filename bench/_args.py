"""Argument checks the bench scripts share: :func:`gd_sizes` reads ``N x D`` (or ``N x D x k``) size lists
within ``gd``'s own limits (``verify.gd_cmd.GD_LIMITS``), a one-line ``UsageError`` naming the flag otherwise
(the scripts run through ``polyverify.plumbing.cli.run_main``: one ``error:`` line, exit status 2, before any
work)."""
from __future__ import annotations

from polyverify.plumbing.cli import UsageError


def gd_sizes(flag: str, text: str, parts: int = 2, *, like: str | None = None) -> list[tuple[int, ...]]:
    """``N x D`` (``parts`` 2) or ``N x D x k`` (``parts`` 3) items of ``text``, comma-separated (``''``: none),
    N and D within ``gd``'s ``--n`` and ``--d``, k within its ``--layers`` (depth 1 + 3k); else a UsageError
    naming ``flag`` (``like``: the example the message gives)."""
    from verify.gd_cmd import GD_LIMITS

    if parts not in (2, 3):
        raise ValueError(f"parts must be 2 or 3, got {parts}")
    hi = (GD_LIMITS["--n"], GD_LIMITS["--d"], GD_LIMITS["--layers"] // 3)[:parts]
    shape = "N x D x k" if parts == 3 else "N x D"
    like = like or ("20x5x10" if parts == 3 else "64x16")
    out = []
    for s in text.split(","):
        if not s:
            continue
        try:
            v = tuple(int(x) for x in s.split("x"))
        except ValueError:
            v = ()
        if len(v) != parts or not all(1 <= x <= h for x, h in zip(v, hi)):
            bounds = ", ".join(f"1 <= {name} <= {h}" for name, h in zip(("N", "D", "k"), hi))
            raise UsageError(f"{flag} takes {shape} items like {like} ({bounds}), comma-separated, not {text!r}")
        out.append(v)
    return out
