"""The specification an import proves against (``python -m verify.construct import --spec SPEC``):
the entry named, built at the given sizes and parameters, and which parameters its builder
takes (``--set``, a ``polyverify`` file's metadata).  Used by the command's checks
(``verify/importers/cli.py``) and its proof and nearby search (``verify/importers/prove.py``).
"""
from __future__ import annotations

from fractions import Fraction

from constructions.base import Construction
from polyverify.plumbing.cli import UsageError, one_line
from polyverify.plumbing.rational import parse_rational


def resolve_spec(name: str):
    from constructions.catalogue import entries, gd_architectures

    gd = gd_architectures()
    if name in gd:
        return gd[name]
    e = entries().get(name)
    if e is None:
        raise UsageError(f"--spec {name!r}: not a gd architecture ({', '.join(gd)}) or a catalogue entry "
                         f"(python -m verify.construct --list)")
    return e


def build_spec(entry, sizes: dict, params: dict) -> Construction:
    """The entry's construction at ``sizes`` and ``params`` (a builder's ValueError: one UsageError line)."""
    try:
        if "gd" in entry.roles:
            kw = dict(params)
            con = entry.build(sizes["n"], sizes["d"], **kw)
        else:
            con = entry.build(**sizes, **params)
    except TypeError as e:
        raise UsageError(f"--spec {entry.name}: {e}") from None
    except (ValueError, KeyError) as e:
        raise UsageError(f"--spec {entry.name}: {one_line(e)}") from None
    if not isinstance(con, Construction):
        tn = type(con).__name__
        raise UsageError(f"--spec {entry.name}: {'an' if tn[0] in 'AEIOU' else 'a'} {tn}, not a layer stack to prove weights "
                         f"against")
    return con


def builder_keywords(entry) -> tuple[dict, bool]:
    """``({name: default}, takes_any)``: the keyword arguments the entry's builder takes, and
    whether it takes any keyword (``**kwargs``).  A specification parameter the builder does not
    take (``s000-linear``'s ``H_0_0``: its builder takes the matrix ``H``) is the entry's own,
    not something ``--set`` or a file's metadata can give."""
    import inspect

    try:
        sig = inspect.signature(entry.build)
    except (TypeError, ValueError):  # pragma: no cover - every registered builder has a signature
        return {}, True
    kw = {n: p.default for n, p in sig.parameters.items()
          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return kw, any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def size_keys_of(entry) -> set:
    """The names that are sizes of ``entry`` (its ``sizes``, and n, d for a gd architecture)."""
    return set(entry.sizes or {}) | ({"n", "d"} if "gd" in entry.roles else set())


def builder_takes(entry, name: str) -> bool:
    """Whether the builder takes ``name`` as a parameter (not a size)."""
    if name in size_keys_of(entry):
        return False
    kw, anykw = builder_keywords(entry)
    return name in kw or anykw


def accepted(entry, spec) -> list[str]:
    """The parameters ``--set`` may give: the specification's own (``spec.params``) that its
    builder takes (sizes are given as sizes; ``s000-linear``'s entries ``H_i_j`` are the entry's
    fixed matrix) and, for a ``gd`` architecture, what its builder takes (``build(n, d, eta=...,
    [lam=...])``: a compiled architecture's ``lam`` is not among its params at ``lam = 0``,
    LSA's ``eta`` is its ``sqrt_eta`` squared)."""
    out = [k for k in spec.params if builder_takes(entry, k)]
    if "gd" in entry.roles:
        out += [k for k in ("eta", "lam") if k not in out and (k == "eta" or getattr(entry, "ridge", False))]
    return out


def parse_param(entry, name: str, value, what: str):
    """A parameter's value as its builder takes it: ``true``/``false`` where the builder's default
    is a bool (``s003-conv``'s ``circular``), else an exact rational (bounded parser)."""
    default = builder_keywords(entry)[0].get(name)
    if isinstance(default, bool) or isinstance(value, bool):
        s = str(value).strip().lower()
        if s in ("true", "1"):
            return True
        if s in ("false", "0"):
            return False
        raise UsageError(f"{what}: {value!r} is not true or false")
    try:  # bounded (polyverify/plumbing/rational.py): 1e-999999999 is refused at once
        return parse_rational(value if isinstance(value, (int, Fraction)) else str(value), what)
    except ValueError as e:
        raise UsageError(str(e)) from None


def unknown_param(given, entry, spec, size_keys) -> None:
    """Refuse ``given``, a name that is neither a size nor an accepted parameter, in one line."""
    acc = accepted(entry, spec)
    unknown = [k for k in given if k not in acc]
    if unknown:
        raise UsageError(f"--set {unknown[0]}: {spec.name} has no size or parameter {unknown[0]!r} (sizes: "
                         f"{', '.join(sorted(size_keys)) or 'none'}; parameters: {', '.join(acc) or 'none'})")


def alias_of(name: str, fixed: dict) -> str | None:
    """The fixed parameter that determines ``name`` through the builder: ``eta`` fixes
    ``sqrt_eta`` (LSA/ELSA take either)."""
    if name.startswith("sqrt_") and name[5:] in fixed:
        return name[5:]
    return None
