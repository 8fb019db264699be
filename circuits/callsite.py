"""Where the user's code called: ``file:line (source)`` of the innermost stack frame outside the
library's own files, for one-line errors that point at the user's line (the circuit builder's
refusals, the front ends' refused operations).  Imports only the standard library."""
from __future__ import annotations

import linecache
import os
import sys


def call_site(skip: tuple[str, ...] = (), depth: int = 1) -> str:
    """``path:line (source line)`` of the innermost frame, starting ``depth`` frames above this
    call, whose file is neither this module nor starts with one of ``skip`` (files or folders, as
    ``co_filename`` spells them); ``path`` relative to the working folder where it lies below it.
    ``"an unknown place"`` when every frame is skipped."""
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if name != __file__ and not name.startswith(skip) and not name.startswith("<__array_function__"):
            return f"{_short(name)}:{f.f_lineno}{_source(name, f.f_lineno)}"
        f = f.f_back
    return "an unknown place"


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _source(path: str, line: int, width: int = 72) -> str:
    text = " ".join(linecache.getline(path, line).split())
    if not text:
        return ""
    return f" ({text if len(text) <= width else text[: width - 3] + '...'})"
