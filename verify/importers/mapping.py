"""A specification projected onto a foreign state: the ``--layout`` JSON.

A peer's model has its own tokens and channels.  Rather than rewriting its layers into a
specification's state (which changes what a circular or "same" convolution computes when the
number of tokens changes), the *specification* is projected onto the file's state: file entry
``(t, c)`` holds the specification's entry ``(tokens[t], columns[c])``.  The file's layers are
then proved against the projected states (``verify.prover.proof.prove`` with the file's layers as
sections), so the claim is exactly "the file's layers map the projected ``state(v)`` to the
projected ``state(step(v))``" (and likewise for prologue and epilogue where the file has them).

Layout JSON (``"format": "polyverify-layout/1"``, required in a ``--layout`` file: ``{}`` is refused, not
read as the identity)::

    {"tokens":   [spec row of file token 0, 1, ...],            # default: 0, 1, ..., T'-1
     "columns":  [spec column of file channel 0, 1, ... | null],  # or, by region:
     "channels": {"REGION": [file channel of the region's column 0, 1, ...], ...},
     "sections": {"prologue": 0, "epilogue": 0},                # layers the file has (default: the spec's)
     "constants": {"FILE CHANNEL": [value on file token 0, 1, ...]},  # constant channels
     "note": "..."}

* a token / channel permutation is a list that is not the identity;
* specification rows or columns no file entry maps to (an extra query token, channels the
  specification adds) are the specification's own: they are not part of the claim;
* a file channel mapped to nothing (``null``, or absent from ``channels``) is the file's own
  scratch: 0 in every projected state, so the file's layers must leave it 0 between sections
  (they may use it inside a section);
* ``constants``: a file channel mapped to no column that holds fixed values, one per file token
  (an int or an exact rational's string, ``"1/2"``), in every projected state: an export's
  indicator channels, through which per-token biases became weights (``verify/importers/writing.py``,
  ``constant_channels``).  The input state has them and the claim includes them: the layers must
  give them back unchanged at the end of every section, so a stack that changes one is FAILED.
  Without ``columns`` / ``channels``, a file whose channels are the specification's followed by
  exactly the constant channels maps the first ones as the identity;
* ``sections``: a file without the specification's prologue (epilogue) starts from (ends in)
  ``state(v)``; the report names what the specification has and the file does not.

Every carried variable of the specification must appear in the projected state (else the
claim would say nothing about the iteration): checked (`check_carried`), refused otherwise.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from constructions.base import Construction, PartialState
from constructions.layout import Layout
from polyverify.plumbing.cli import one_line
from verify.cli_common import input_file_problem

from .common import ImportRefused

FORMAT = "polyverify-layout/1"
MAX_LAYOUT_BYTES = 16 * 2**20


def read_layout_file(path) -> dict:
    p = Path(path)
    problem = input_file_problem(p)  # missing, a folder, /dev/zero, a FIFO: said as what it is
    if problem is not None:
        raise ImportRefused(f"--layout {p}: {problem}")
    if p.stat().st_size > MAX_LAYOUT_BYTES:
        raise ImportRefused(f"--layout {p}: larger than {MAX_LAYOUT_BYTES} bytes")
    try:
        d = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ImportRefused(f"--layout {p}: not JSON ({one_line(e)})") from None
    if not isinstance(d, dict):
        raise ImportRefused(f"--layout {p}: must be a JSON object")
    check_format(d, f"--layout {p}")  # before the weight file is read
    return d


def check_format(d: dict, where: str) -> None:
    """A layout file names its format: ``{}`` is refused, not read as the identity by omission (the
    identity is ``{"format": "polyverify-layout/1"}`` alone).  (:func:`parse`, for a dict from Python,
    takes one without the key as this format.)"""
    if "format" not in d:
        raise ImportRefused(f"{where}: no 'format' key; a layout is {{\"format\": \"{FORMAT}\", ...}} (that "
                            f"alone is the identity layout; docs/interop.md)")
    if d["format"] != FORMAT:
        raise ImportRefused(f"{where}: format {d['format']!r}, expected {FORMAT!r}")


class ProjectedLayout(Layout):
    """The file's state, whose entries are named by the specification's regions."""

    def __init__(self, shape, spec_layout: Layout, rows: list[int], cols: list[int | None], constants=()):
        super().__init__(tuple(shape), "file tokens", "file channels")
        self.spec_layout, self.map_rows, self.map_cols = spec_layout, rows, cols
        self.constants = set(constants)

    def locate(self, i: int, j: int):
        c = self.map_cols[j]
        if j in self.constants:
            return f"(file channel {j}, a constant channel of the layout)", (i, 0)
        if c is None:
            return f"(file channel {j}, not in the specification)", (i, 0)
        name, (a, b) = self.spec_layout.locate(self.map_rows[i], c)
        return name, (a, b)

    def describe(self, i: int, j: int) -> str:
        name, (a, b) = self.locate(i, j)
        return f"region {name!r} entry [{a}, {b}] (file state [{i}, {j}])"


def parse(d: dict, spec: Construction, file_shape: tuple[int, int] | None, n_file_tokens: int | None = None):
    """Validate a layout dict against the specification: (rows, cols, sections, file shape)."""
    if d.get("format", FORMAT) != FORMAT:  # a layout file's format is required (read_layout_file)
        raise ImportRefused(f"layout: format {d.get('format')!r}, expected {FORMAT!r}")
    known = {"format", "tokens", "columns", "channels", "sections", "constants", "note"}
    extra = sorted(set(d) - known)
    if extra:
        raise ImportRefused(f"layout: unknown key {extra[0]!r} (keys: {', '.join(sorted(known))})")
    R, C = spec.layout.shape
    tokens = d.get("tokens")
    if tokens is None:
        n = file_shape[0] if file_shape else n_file_tokens
        if n is None:
            raise ImportRefused("layout: 'tokens' is needed (the file does not fix its number of tokens)")
        tokens = list(range(n))
    if not isinstance(tokens, list) or not tokens or not all(_is_int(t) and 0 <= t < R for t in tokens):
        raise ImportRefused(f"layout: 'tokens' must be a non-empty list of specification rows in 0..{R - 1}")
    if len(set(tokens)) != len(tokens):
        raise ImportRefused("layout: 'tokens' maps two file tokens onto one specification row")
    if file_shape and len(tokens) != file_shape[0]:
        raise ImportRefused(f"layout: 'tokens' has {len(tokens)} entries; the file's state has {file_shape[0]} tokens")
    if "columns" in d and "channels" in d:
        raise ImportRefused("layout: give 'columns' or 'channels', not both")
    if "columns" in d:
        cols = d["columns"]
        if not isinstance(cols, list) or not all(c is None or (_is_int(c) and 0 <= c < C) for c in cols):
            raise ImportRefused(f"layout: 'columns' must list a specification column in 0..{C - 1} (or null) "
                               f"per file channel")
    elif "channels" in d:
        ch = d["channels"]
        if not isinstance(ch, dict):
            raise ImportRefused("layout: 'channels' must map region names to lists of file channels")
        width = file_shape[1] if file_shape else 1 + max((c for v in ch.values() if isinstance(v, list)
                                                          for c in v if _is_int(c)), default=-1)
        cols: list = [None] * width
        for reg, lst in ch.items():
            if reg not in spec.layout.regions:
                raise ImportRefused(f"layout: no region {reg!r} in {spec.name} (regions: "
                                   f"{', '.join(spec.layout.regions)})")
            r = spec.layout[reg]
            if not isinstance(lst, list) or len(lst) != r.shape[1] or not all(_is_int(c) and 0 <= c < width
                                                                              for c in lst):
                raise ImportRefused(f"layout: region {reg!r} has {r.shape[1]} columns; give that many file "
                                   f"channels in 0..{width - 1}")
            for j, c in enumerate(lst):
                want = r.cols[0] + j
                if cols[c] is not None and cols[c] != want:
                    raise ImportRefused(f"layout: file channel {c} is mapped to two specification columns")
                cols[c] = want
    else:
        extra = file_shape[1] - C if file_shape else 0
        consts = d.get("constants")
        if extra > 0 and isinstance(consts, dict) and sorted(consts) == sorted(str(j) for j in range(C, C + extra)):
            cols = list(range(C)) + [None] * extra  # the specification's channels, then the constant channels
        elif file_shape and file_shape[1] != C:
            raise ImportRefused(f"layout: 'columns' or 'channels' is needed (the file has {file_shape[1]} channels, "
                               f"{spec.name} {C})")
        else:
            cols = list(range(C))
    if file_shape and len(cols) != file_shape[1]:
        raise ImportRefused(f"layout: {len(cols)} channels mapped; the file's state has {file_shape[1]}")
    used = [c for c in cols if c is not None]
    if len(set(used)) != len(used):
        raise ImportRefused("layout: two file channels map onto one specification column")
    cols = FileChannels(cols)
    cols.constants = _constants(d.get("constants", {}), cols, len(tokens))
    secs = d.get("sections", {})
    if not isinstance(secs, dict) or set(secs) - {"prologue", "epilogue"} or not all(
            _is_int(v) and v >= 0 for v in secs.values()):
        raise ImportRefused("layout: 'sections' must be {\"prologue\": P, \"epilogue\": E} with counts >= 0")
    for s, v in secs.items():
        if v not in (0, len(getattr(spec, s))):
            raise ImportRefused(f"layout: sections.{s} = {v}: the file has the specification's {s} "
                               f"({len(getattr(spec, s))} layers) or none (0)")
    return tokens, cols, secs, (len(tokens), len(cols))


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class FileChannels(list):
    """The file's channels, each the specification column it holds or None, as :func:`parse` returns them;
    ``constants``: the constant channels, ``{file channel: [exact value on each file token]}`` (their
    entries are None in the list: they hold no column of the specification)."""

    constants: dict[int, list] = {}


def _constants(d, cols: list, n_tokens: int) -> dict[int, list]:
    """The layout's ``"constants"`` checked: a file channel mapped to no column, one exact value per file
    token (an int or a rational's string; a float or a bool is refused: the value must be exact)."""
    from fractions import Fraction

    if not isinstance(d, dict):
        raise ImportRefused("layout: 'constants' must map file channels to their values on the file's tokens")
    out: dict[int, list] = {}
    for key, vals in d.items():
        j = int(key) if isinstance(key, str) and key.isdigit() else None
        if j is None or not 0 <= j < len(cols):
            raise ImportRefused(f"layout: constants: {key!r} is not a file channel in 0..{len(cols) - 1}")
        if cols[j] is not None:
            raise ImportRefused(f"layout: constants: file channel {j} is mapped to specification column {cols[j]}; "
                                f"a constant channel holds no column")
        if not isinstance(vals, list) or len(vals) != n_tokens:
            raise ImportRefused(f"layout: constants: file channel {j} needs one value per file token ({n_tokens})")
        q = []
        for v in vals:
            try:
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    raise ValueError
                x = Fraction(v)
            except (ValueError, ZeroDivisionError):
                raise ImportRefused(f"layout: constants: file channel {j}: {v!r} is not an exact value (an int or a "
                                    f"rational's string such as \"1/2\")") from None
            q.append(int(x) if x.denominator == 1 else x)
        out[j] = q
    return out


class Projected(Construction):
    """``spec``'s states projected onto the file's state (see the module docstring)."""

    def __init__(self, spec: Construction, rows, cols, secs, shape, layers_by_section):
        self.spec, self.rows, self.cols = spec, list(rows), list(cols)
        #: the constant channels (``parse``'s ``cols.constants``): file channel -> value on each file token
        self.constants = dict(getattr(cols, "constants", {}))
        self.has = {s: secs.get(s, len(getattr(spec, s))) > 0 for s in ("prologue", "epilogue")}
        lay = ProjectedLayout(shape, spec.layout, self.rows, self.cols, self.constants)
        super().__init__(
            name=spec.name, reference=spec.reference, layout=lay, prologue=layers_by_section["prologue"],
            body=layers_by_section["body"], epilogue=layers_by_section["epilogue"], params=dict(spec.params),
            variables=dict(spec.variables), carried=spec.carried,
            notes=f"{spec.name} projected onto the file's {shape[0]} x {shape[1]} state", rebuild=None,
            symbolic_params=())
        self._mapped = np.array([c is not None for c in self.cols], dtype=bool)
        self._src_cols = np.array([c if c is not None else 0 for c in self.cols])

    def project(self, S):
        S = np.asarray(S)
        sub = S[..., self.rows, :][..., self._src_cols]
        if S.dtype == object:
            out = np.empty(sub.shape, dtype=object)
            out.fill(0)
        else:
            out = np.zeros_like(sub)
        out[..., self._mapped] = sub[..., self._mapped]
        for j, vals in self.constants.items():  # set on every token, in every state (the claim reads them)
            col = np.array(vals, dtype=object) if out.dtype == object else np.array([float(x) for x in vals])
            out[..., j] = col.astype(out.dtype) if out.dtype != object else col
        return out

    def project_mask(self, M):
        M = np.asarray(M, dtype=bool)
        sub = M[..., self.rows, :][..., self._src_cols] & self._mapped
        for j in self.constants:
            sub[..., j] = True
        return sub

    def input_state(self, v):
        return self.project(self.spec.input_state(v) if self.has["prologue"] else self.spec.state(v))

    def state(self, v):
        return self.project(self.spec.state(v))

    def final_state(self, v):
        return self.project(self.spec.final_state(v) if self.has["epilogue"] else self.spec.state(v))

    def step(self, v):
        return self.spec.step(v)

    def intermediate_states(self, v, section):
        if section == "prologue" and not self.has["prologue"] or section == "epilogue" and not self.has["epilogue"]:
            return None
        if len(getattr(self, section)) != len(getattr(self.spec, section)):
            return None
        ds = self.spec.intermediate_states(v, section)
        if ds is None:
            return None
        return [None if p is None else PartialState(self.project(p.expected), self.project_mask(p.mask)) for p in ds]

    def dropped(self) -> dict:
        """What of the specification the file's state does not hold (reported)."""
        R, C = self.spec.layout.shape
        rows = sorted(set(range(R)) - set(self.rows))
        cols = sorted(set(range(C)) - {c for c in self.cols if c is not None})
        regs = []
        for r in self.spec.layout.regions.values():
            inside = [(i, j) for i in range(*r.rows) for j in range(*r.cols)]
            kept = sum(1 for i, j in inside if i in set(self.rows) and j in {c for c in self.cols if c is not None})
            if kept < len(inside):
                regs.append(f"{r.name}" + ("" if kept == 0 else f" ({len(inside) - kept} of {len(inside)} entries)"))
        out = {"spec_rows": rows, "spec_columns": cols, "regions": regs,
               "file_only_channels": [j for j, c in enumerate(self.cols) if c is None and j not in self.constants],
               "constant_channels": {j: [str(x) for x in v] for j, v in self.constants.items()},
               "sections": [s for s in ("prologue", "epilogue") if not self.has[s] and getattr(self.spec, s)]}
        return out


def describe_constants(constants: dict) -> str:
    """The constant channels in words, for the import's report: ``"file channel 20: 1 on token 4, 0
    elsewhere"`` for an indicator, else the values."""
    def one(j, vals):
        on = [t for t, x in enumerate(vals) if x != 0]
        if all(vals[t] == 1 for t in on):
            return (f"file channel {j}: 1 on token{'s' * (len(on) != 1)} {', '.join(map(str, on)) or '(none)'}, "
                    f"0 elsewhere")
        return f"file channel {j}: [{', '.join(str(x) for x in vals)}] on the file's tokens"

    return "; ".join(one(j, v) for j, v in constants.items())


#: ``check_carried`` decides a carried variable's absence in every variable's symbols up to this many variable
#: entries (a sympy ring's generators cost quadratic memory: 2.4 GB at 256x64's 16,768)
CARRIED_SYMBOLIC_MAX = 4096


def check_carried(con: Projected) -> None:
    """Every carried variable appears in the projected state.  The state is formed with the carried
    variables' entries as fresh symbols and every other variable's entries as random integers below
    2^62 in size: a carried entry's symbol in it is in the state's polynomials, exactly (a value of the
    others cannot make a variable appear).  A carried variable missing there is then looked for with
    every variable in symbols (exact; up to :data:`CARRIED_SYMBOLIC_MAX` entries in all; above, it is
    refused on the integer values: a polynomial coefficient that is nonzero vanishes at such a point
    with probability below its degree / 2^62)."""
    carried = [var for var in con.variables if var in con.carried]
    if not carried:
        return
    missing = _carried_missing(con, carried, symbolic_others=False)
    size = sum(int(np.prod(shape)) if shape else 1 for shape in con.variables.values())
    if missing and size <= CARRIED_SYMBOLIC_MAX:
        missing = _carried_missing(con, carried, symbolic_others=True)
    if missing:
        raise ImportRefused(f"layout: the file's state holds nothing of {con.spec.name}'s iterate {missing[0]!r} "
                            f"(the claim would say nothing about the iteration); map its region")


def _carried_missing(con: Projected, carried: list[str], symbolic_others: bool) -> list[str]:
    """The carried variables none of whose entries' symbols is in ``con.state(v)`` (:func:`check_carried`),
    in the order of ``con.variables``."""
    import random

    from verify.prover.proof import SymbolicProblem

    names = list(con.variables) if symbolic_others else carried
    sp = SymbolicProblem({k: con.variables[k] for k in names})
    rng = random.Random(20260041)
    v = dict(sp.v)
    for var, shape in con.variables.items():
        if var not in v:
            a = np.empty(shape, dtype=object)
            for ix in np.ndindex(*shape):
                a[ix] = rng.randint(-(2**62), 2**62)
            v[var] = a if shape else a[()]
    S = con.state(v)
    gens_in = set()
    for x in np.asarray(S, dtype=object).flat:
        if hasattr(x, "monoms"):
            for m in x.monoms():
                gens_in.update(i for i, e in enumerate(m) if e)
    missing, pos = [], 0
    for var in names:
        shape = con.variables[var]
        n = int(np.prod(shape)) if shape else 1
        if var in carried and not any(i in gens_in for i in range(pos, pos + n)):
            missing.append(var)
        pos += n
    return missing
