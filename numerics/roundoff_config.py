"""The typed config of ``python -m numerics.roundoff``: one :class:`RoundoffConfig`, built by the
command line (:func:`build_parser` + :meth:`RoundoffConfig.from_args`) and by a sweep cell
(:meth:`RoundoffConfig.from_cell`) alike, its defaults in one place (the dataclass fields); and
:func:`plan`, which checks it before any work (a :class:`~polyverify.plumbing.cli.UsageError`, one line,
otherwise) and resolves it into what the run needs (:class:`RoundoffPlan`).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np

from constructions.base import Construction, DepthError
from constructions.catalogue import CatalogueEntry, gd_architectures
from polyverify.plumbing.cli import (DEFAULT_MEMORY_LIMIT, Parser, UsageError, check_memory, check_range, human_bytes,
                            output_dir)
from polyverify.plumbing.options import split_list

from .backends import BACKENDS, DTYPES, Backend, BackendError
from .roundoff_run import auto_eta, build, resolve

CONV_METHODS = ("direct", "fft")

#: upper bounds (inclusive) of the sizes; ``--allow-large`` lifts them and the memory limit
LIMITS = {
    "layers": 100_000,          # the largest --layers depth
    "batch": 4096,
    "n": 1024,
    "d": 32,                    # baseconv-causal carries D^2 channels: D = 64 takes 8 GiB to build
    "layer_ref": 64,
    "layer_ref_layers": 10_000,
    "list": 32,                 # values in one comma-separated list
    "configurations": 256,      # backend/dtype pairs x conv x kappa x sigma
    "reference_ops": 10**9,     # mpfr multiply-adds of the references (1 to 3 million a second)
}
#: digits the references start at: at least float64's, at most stable_reference's ceiling (not liftable)
DIGITS_RANGE = (16, 400)
MAX_SEED = 2**62
#: bytes of memory a run may be estimated to need without ``--allow-large``
MEMORY_LIMIT = DEFAULT_MEMORY_LIMIT
ALLOW = "--allow-large"
#: one gmpy2 mpfr of a few hundred bits with its object-array slot (160 measured at 416 bits)
MP_BYTES = 160
#: an error entry (mpfr difference, bits of error, relative error) costs about this many multiply-adds
ERROR_OPS = 10
#: the interpreter, numpy, torch and gmpy2 themselves
FIXED_OVERHEAD = 512 * 2**20


def _meta(flag: str, conv=None, listed: bool = False) -> dict:
    return {"flag": flag, "conv": conv, "listed": listed}


@dataclass(frozen=True)
class RoundoffConfig:
    """One roundoff command: every option with its type and default.  Lists are of distinct
    values in the order given; ``eta`` is an exact rational or ``auto`` and ``lam`` an exact
    rational, as written (checked by :func:`plan`)."""
    construction: str = field(metadata=_meta(""))
    layers: tuple[int, ...] = field(metadata=_meta("--layers", int, True))
    dtypes: tuple[str, ...] = field(default=("float64", "float32", "bfloat16", "float16"),
                                    metadata=_meta("--dtypes", str, True))
    backends: tuple[str, ...] = field(default=("torch",), metadata=_meta("--backend", str, True))
    device: str = field(default="cpu", metadata=_meta("--device", str))
    convs: tuple[str, ...] = field(default=("direct",), metadata=_meta("--conv", str, True))
    kappas: tuple[float, ...] = field(default=(5.0,), metadata=_meta("--kappa", float, True))
    sigmas: tuple[float, ...] = field(default=(1.0,), metadata=_meta("--sigma", float, True))
    eta: str = field(default="1/16", metadata=_meta("--eta", str))
    lam: str = field(default="0", metadata=_meta("--lam", str))
    batch: int = field(default=64, metadata=_meta("--batch", int))
    n: int = field(default=20, metadata=_meta("--n", int))
    d: int = field(default=5, metadata=_meta("--d", int))
    seed: int = field(default=0, metadata=_meta("--seed", int))
    digits: int = field(default=50, metadata=_meta("--digits", int))
    layer_ref: int = field(default=2, metadata=_meta("--layer-ref", int))
    layer_ref_layers: int = field(default=40, metadata=_meta("--layer-ref-layers", int))
    out: str | None = field(default=None, metadata=_meta("--out", str))
    quiet: bool = field(default=False, metadata=_meta("--quiet", bool))
    allow_large: bool = field(default=False, metadata=_meta(ALLOW, bool))

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> RoundoffConfig:
        """From :func:`build_parser`'s namespace: the construction named, the lists split."""
        return cls._from_text({f.name: getattr(a, _dest(f)) for f in dataclasses.fields(cls)})

    @classmethod
    def from_cell(cls, config: dict, keys: dict[str, str], where: str) -> RoundoffConfig:
        """From a sweep cell's config: ``keys`` maps each accepted cell key to the field it sets
        (unknown keys refused); a list is a list field's values, True/False a switch; any other
        value as the command line would read it."""
        unknown = [k for k in config if k not in keys]
        if unknown:
            raise UsageError(f"unknown key(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(keys)}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        text: dict = {f.name: _default_text(f) for f in fields.values()}
        for key, name in keys.items():
            if key not in config or config[key] is None or config[key] is False:
                continue
            v, f = config[key], fields[name]
            flag = f.metadata["flag"] or key
            if isinstance(v, dict) or (isinstance(v, list) and not f.metadata["listed"]):
                raise UsageError(f"{key} must be a single value, got {v!r:.80}")
            if v is True and f.metadata["conv"] is not bool and f.metadata["flag"]:
                raise UsageError(f"argument {flag}: expected one argument")
            if f.metadata["listed"]:
                text[name] = ",".join(str(t) for t in v) if isinstance(v, list) else str(v)
            elif f.metadata["conv"] is bool:
                text[name] = v is True or _bad(flag, "ignored explicit argument", v)
            elif f.metadata["conv"] is int:
                text[name] = _int(flag, v)
            else:
                text[name] = str(v)
        for name in ("construction", "layers"):
            if text[name] is None:
                raise UsageError(f"the config needs {name!r}")
        return cls._from_text({**text, "quiet": True})

    @classmethod
    def _from_text(cls, text: dict) -> RoundoffConfig:
        resolve(text["construction"])
        big = bool(text["allow_large"])
        vals = {}
        for f in dataclasses.fields(cls):
            v = text[f.name]
            if f.metadata["listed"]:
                v = tuple(parse_list(v, f.metadata["flag"], f.metadata["conv"], allow_large=big))
            vals[f.name] = v
        return cls(**vals)


def _dest(f) -> str:
    return "backend" if f.name == "backends" else {"convs": "conv", "kappas": "kappa",
                                                   "sigmas": "sigma"}.get(f.name, f.name)


def _flag(name: str) -> str:
    return next(f.metadata["flag"] for f in dataclasses.fields(RoundoffConfig) if f.name == name)


def given_fields(argv) -> frozenset[str]:
    """The :class:`RoundoffConfig` fields the command line ``argv`` sets explicitly (not by default)."""
    p = build_parser()
    for act in p._actions:
        if act.dest != "help":
            act.default = argparse.SUPPRESS
    given = vars(p.parse_args(argv))
    return frozenset(f.name for f in dataclasses.fields(RoundoffConfig) if _dest(f) in given)


def _default_text(f) -> object:
    if f.default is dataclasses.MISSING:
        return None
    return ",".join(map(_num, f.default)) if f.metadata["listed"] else f.default


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _bad(flag: str, why: str, v):
    raise UsageError(f"argument {flag}: {why} {v!r}")


def _int(flag: str, v) -> int:
    try:
        return v if isinstance(v, int) else int(str(v))
    except ValueError:
        _bad(flag, "invalid int value:", str(v))


#: the defaults, for the help texts and the sweep's own options
DEFAULTS = {f.name: _default_text(f) for f in dataclasses.fields(RoundoffConfig)}


class KappaRun(NamedTuple):
    """The construction built for one kappa, its step size and the GD steps of each ``--layers`` depth."""
    con: Construction
    eta: Fraction
    steps: list[int]


@dataclass
class RoundoffPlan:
    """A checked :class:`RoundoffConfig` resolved: the catalogue entry, every valid backend/dtype
    pair (and the skipped ones, with the reason), the construction of each kappa and the folder."""
    config: RoundoffConfig
    entry: CatalogueEntry
    pairs: list[Backend]
    skipped: list[str]
    lam: Fraction
    runs: dict[float, KappaRun]
    outdir: Path | None = None

    def total_steps(self) -> int:
        c = self.config
        n_cfg = len(self.pairs) * len(c.convs) * len(c.kappas) * len(c.sigmas)
        return n_cfg * max(s for r in self.runs.values() for s in r.steps)


# ------------------------------------------------------------------ the command line

def _limits_text() -> str:
    return "; ".join(f"{k.replace('_', '-')} <= {v:,}" for k, v in LIMITS.items())


def build_parser() -> argparse.ArgumentParser:
    D = DEFAULTS
    p = Parser(prog="python -m numerics.roundoff",
               description="Roundoff of a GD construction against exact GD (mpmath/mpfr) across depth, "
                           "dtype, backend, convolution algorithm and problem conditioning.  Every value is "
                           "checked before any work (exit 2 and one 'error:' line otherwise).  Limits: "
                           f"{_limits_text()}; estimated memory <= {human_bytes(MEMORY_LIMIT)} "
                           f"(--allow-large lifts these).")
    gd = gd_architectures()
    p.add_argument("construction", help=f"{', '.join(gd)} (or {', '.join(e.name for e in gd.values())})")
    p.add_argument("--layers", required=True,
                   help=f"comma-separated model depths, 1 .. {LIMITS['layers']:,}; the run streams to the largest")
    p.add_argument("--dtypes", default=D["dtypes"], help=f"comma-separated dtypes: {', '.join(DTYPES)}")
    p.add_argument("--backend", default=D["backends"],
                   help=f"comma-separated: numpy, torch, cupy (default {D['backends']})")
    p.add_argument("--device", default=D["device"], help=f"torch device: cpu or cuda[:i] (default {D['device']})")
    p.add_argument("--conv", default=D["convs"], help="comma-separated convolution methods: direct, fft")
    p.add_argument("--kappa", default=D["kappas"], help=f"comma-separated condition numbers (default {D['kappas']})")
    p.add_argument("--sigma", default=D["sigmas"],
                   help=f"comma-separated target scales of D_OOD^b(sigma) (default {D['sigmas']})")
    p.add_argument("--eta", default=D["eta"], help="step size, an exact rational, or 'auto' (per kappa)")
    p.add_argument("--lam", default=D["lam"], help=f"ridge parameter (lsa/elsa only; default {D['lam']})")
    p.add_argument("--batch", type=int, default=D["batch"],
                   help=f"problems, 1 .. {LIMITS['batch']} (default {D['batch']})")
    p.add_argument("--n", type=int, default=D["n"], help=f"rows N of A, d .. {LIMITS['n']} (default {D['n']})")
    p.add_argument("--d", type=int, default=D["d"], help=f"columns D of A, 1 .. {LIMITS['d']} (default {D['d']})")
    p.add_argument("--seed", type=int, default=D["seed"], help=f"random seed of the problems, >= 0 (default {D['seed']})")
    p.add_argument("--digits", type=int, default=D["digits"],
                   help=f"starting digits of the references, {DIGITS_RANGE[0]} .. {DIGITS_RANGE[1]} "
                        f"(default {D['digits']})")
    p.add_argument("--layer-ref", type=int, default=D["layer_ref"],
                   help=f"problems for the layer-level reference, 0 (off) .. {LIMITS['layer_ref']} "
                        f"(default {D['layer_ref']})")
    p.add_argument("--layer-ref-layers", type=int, default=D["layer_ref_layers"],
                   help=f"layers examined by it, 1 .. {LIMITS['layer_ref_layers']:,} (default {D['layer_ref_layers']})")
    p.add_argument("--out", help="output folder (default out/roundoff/<construction>); created if missing")
    p.add_argument("--quiet", action="store_true",
                   help="no progress report (default: a bar on a terminal, plain lines in a log)")
    p.add_argument("--allow-large", action="store_true",
                   help=f"lift the size limits and the memory limit ({human_bytes(MEMORY_LIMIT)})")
    return p


def parse_list(s: str, what: str, conv=str, *, allow_large: bool = False) -> list:
    """A comma-separated list of ``conv`` values (``polyverify.plumbing.options.split_list``), at most
    ``LIMITS["list"]`` of them unless ``allow_large``."""
    return split_list(what, s, conv, allow_large=allow_large, limit=LIMITS["list"])


# ------------------------------------------------------------------ the checks

def _check_names(c: RoundoffConfig) -> None:
    for t in c.dtypes:
        if t not in DTYPES:
            raise UsageError(f"unknown dtype {t!r}; choose from {', '.join(DTYPES)}")
    for t in c.backends:
        if t not in BACKENDS:
            raise UsageError(f"unknown backend {t!r}; choose from {', '.join(BACKENDS)}")
    for t in c.convs:
        if t not in CONV_METHODS:
            raise UsageError(f"unknown convolution method {t!r}; choose from {', '.join(CONV_METHODS)}")


def _check_sizes(c: RoundoffConfig) -> None:
    big = c.allow_large
    for name, val, lo in (("--n", c.n, 1), ("--d", c.d, 1), ("--batch", c.batch, 1),
                          ("--layer-ref", c.layer_ref, 0), ("--layer-ref-layers", c.layer_ref_layers, 1)):
        check_range(name, val, lo, None if big else LIMITS[name[2:].replace("-", "_")], override=ALLOW)
    check_range("--digits", c.digits, *DIGITS_RANGE)
    check_range("--seed", c.seed, 0, MAX_SEED)
    if c.n < c.d:
        raise UsageError(f"--n ({c.n}) must be >= --d ({c.d}) for a least-squares problem")
    if any(x < 1 for x in c.layers):
        raise UsageError(f"--layers must be >= 1, got {','.join(map(str, c.layers))}")
    if not big and max(c.layers) > LIMITS["layers"]:
        raise UsageError(f"--layers {max(c.layers)} exceeds the limit {LIMITS['layers']:,} (pass {ALLOW} to allow more)")
    if any(x < 1 for x in c.kappas):
        raise UsageError(f"--kappa must be >= 1, got {','.join(map(_num, c.kappas))}")
    if any(x <= 0 for x in c.sigmas):
        raise UsageError(f"--sigma must be > 0, got {','.join(map(_num, c.sigmas))}")


def _step_sizes(c: RoundoffConfig, entry: CatalogueEntry) -> tuple[Fraction | None, Fraction]:
    """``(eta or None for auto, lam)``, exact."""
    from polyverify.plumbing.rational import parse_rational

    try:
        lam = parse_rational(c.lam, "--lam")
        eta = None if c.eta.strip() == "auto" else parse_rational(c.eta, "--eta")
    except ValueError as e:
        raise UsageError(str(e)) from None
    if eta is not None and eta <= 0:
        raise UsageError(f"--eta must be > 0, got {eta}")
    if lam != 0 and not entry.ridge:
        ridge = " or ".join(e.arch for e in gd_architectures().values() if e.ridge)
        raise UsageError(f"--lam needs a ridge architecture ({ridge}); {entry.arch} is plain least squares")
    if lam < 0:
        raise UsageError(f"--lam must be >= 0, got {lam}")
    return eta, lam


def _pairs(c: RoundoffConfig) -> tuple[list[Backend], list[str]]:
    """Every valid (backend, dtype) pair; bfloat16 exists only in torch (skipped elsewhere)."""
    if not (c.device == "cpu" or c.device.startswith("cuda")):
        raise UsageError(f"--device must be cpu or cuda[:index], got {c.device!r}")
    pairs, skipped = [], []
    for bn in c.backends:
        for dt in c.dtypes:
            try:
                pairs.append(Backend(bn, dt, c.device if bn == "torch" else "cpu"))
            except BackendError as e:
                if dt == "bfloat16" and bn != "torch":
                    skipped.append(f"{bn}/{dt}: {e}")
                else:
                    raise UsageError(str(e)) from None
    if not pairs:
        raise UsageError("no valid backend/dtype combination: " + "; ".join(skipped))
    if c.device != "cpu" and "torch" not in c.backends:
        raise UsageError("--device applies to --backend torch only (cupy always runs on the GPU)")
    n_cfg = len(pairs) * len(c.convs) * len(c.kappas) * len(c.sigmas)
    if not c.allow_large and n_cfg > LIMITS["configurations"]:
        raise UsageError(f"{n_cfg} configurations (backend/dtype pairs x --conv x --kappa x --sigma) exceed the "
                         f"limit {LIMITS['configurations']} (pass {ALLOW} to allow more)")
    return pairs, skipped


def _kappa_runs(c: RoundoffConfig, entry: CatalogueEntry, eta, lam: Fraction) -> dict[float, KappaRun]:
    """The construction of each kappa (eta may depend on kappa) and the steps of each depth."""
    runs = {}
    for kappa in c.kappas:
        e = auto_eta(kappa) if eta is None else eta
        try:
            con = build(entry, c.n, c.d, e, lam)
            ks = [con.steps_for_depth(L) for L in c.layers]
        except DepthError as err:
            raise UsageError(f"--layers: {err}") from None
        except ValueError as err:
            raise UsageError(str(err)) from None
        runs[kappa] = KappaRun(con, e, ks)
    return runs


def _has_baseconv(p: RoundoffPlan) -> bool:
    return any(L.kind == "baseconv" for r in p.runs.values() for L in (*r.con.prologue, *r.con.body, *r.con.epilogue))


def _ridge_archs() -> str:
    return ", ".join(e.arch for e in gd_architectures().values() if e.ridge)


#: the options only some runs read, by field: (whether the planned run reads it, why not).  One the
#: run does not read is refused (:func:`_check_read`): given on the command line, or a sweep cell's
#: value off its default (``tests/adversarial/test_ignored_options.py`` checks the table
#: against the runs)
READ_BY = {
    # a plain least-squares construction is built without a ridge parameter
    "lam": (lambda p: p.entry.ridge,
            lambda p: f"{p.entry.arch} is plain least squares and does not read --lam (only the ridge "
                      f"architectures {_ridge_archs()} do)"),
    # the convolution method only changes BaseConv layers: the runs would repeat, not compare
    "convs": (_has_baseconv,
              lambda p: f"the convolution method applies to BaseConv layers; {p.entry.arch} has none, so the run "
                        f"does not read --conv"),
    # numpy runs on the CPU, cupy on the GPU
    "device": (lambda p: "torch" in p.config.backends,
               lambda p: f"--backend {','.join(p.config.backends)} does not read --device (only --backend torch "
                         f"does)"),
    "layer_ref_layers": (lambda p: p.config.layer_ref > 0,
                         lambda p: "--layer-ref 0 runs no layer-level reference, the only reader of "
                                   "--layer-ref-layers"),
}
#: each field's default
_DEFAULT = {f.name: f.default for f in dataclasses.fields(RoundoffConfig)}


def _check_read(p: RoundoffPlan, given) -> None:
    """Refuse an option the planned run would not read (``READ_BY``), and a ``--layer-ref``
    above ``--batch`` (it takes its problems from the batch), each one set: in ``given`` (the
    fields the command line sets) or off its default."""
    c = p.config

    def is_set(name):
        return name in given or getattr(c, name) != _DEFAULT[name]

    for name, (reads, why) in READ_BY.items():
        if not reads(p) and is_set(name):
            v = getattr(c, name)
            raise UsageError(f"{_flag(name)} {','.join(map(_num, v)) if isinstance(v, tuple) else v}: {why(p)}; "
                             f"drop it")
    if is_set("layer_ref") and c.layer_ref > c.batch:
        raise UsageError(f"--layer-ref {c.layer_ref} exceeds --batch {c.batch}: the layer-level reference takes its "
                         f"problems from the batch; give at most {c.batch}")


def plan(c: RoundoffConfig, *, create_out: bool = True, given=frozenset()) -> RoundoffPlan:
    """Check every value of ``c`` before any work (sizes against ``LIMITS``, no option the run
    would not read -- ``given``: the fields the command line sets; otherwise one off its default --,
    the estimated memory and mpfr work unless ``allow_large``, the output folder last) and resolve it."""
    if c.out is not None and not str(c.out):  # Path('') is the current folder, not "the default folder"
        raise UsageError("--out is empty; give the report's folder (or leave --out out for "
                         "out/roundoff/<construction>)")
    entry = resolve(c.construction)
    _check_names(c)
    _check_sizes(c)
    eta, lam = _step_sizes(c, entry)
    pairs, skipped = _pairs(c)
    p = RoundoffPlan(config=c, entry=entry, pairs=pairs, skipped=skipped, lam=lam,
                     runs=_kappa_runs(c, entry, eta, lam))
    _check_read(p, given)
    if not c.allow_large:
        nbytes, ops = estimate_cost(p)
        check_memory("this run", nbytes, MEMORY_LIMIT, override=ALLOW)
        if ops > LIMITS["reference_ops"]:
            raise UsageError(f"the exact references need about {ops:.1e} mpfr multiply-adds (1 to 3 million a "
                             f"second), above the limit {LIMITS['reference_ops']:.0e} (pass {ALLOW} to allow it)")
    # the output folder last (checked here; created when the first file is written)
    if create_out:
        p.outdir = output_dir("--out", c.out if c.out is not None else Path("out") / "roundoff" / entry.name)
    return p


def _general_channels(layer) -> int:
    """Channels of a BaseConv layer whose direct convolution ``ops.ConvPlan`` runs as a (T, T)
    Toeplitz/circulant product (not lag-0 only, not all taps equal, not all zero); 0 for others."""
    if layer.kind != "baseconv":
        return 0
    h = np.asarray(layer.h)
    nz = h != 0
    lag0 = nz[0] & ~nz[1:].any(axis=0)
    uniform = (h == h[0]).all(axis=0) & nz[0] & ~lag0
    return int((nz.any(axis=0) & ~lag0 & ~uniform).sum())


def estimate_cost(p: RoundoffPlan) -> tuple[float, float]:
    """A rough upper estimate of a run's memory (bytes) and of the mpfr multiply-adds of its
    references, computed from the sizes alone (nothing is allocated):

    * per kappa (one at a time): the state in the backend and its float64 copies (x 4), the cast
      weights (x 2) and the direct convolution's (T, T) kernel per general channel, the exact
      references of every dtype (one more while ``stable_reference`` compares two precisions,
      ``MP_BYTES`` a value),
      the float64 iterates, and the layer-level reference's float states and mpfr states;
    * for the whole run: the per-step records kept for the report (x 2: the JSON copy);
    * ``FIXED_OVERHEAD`` for the libraries.
    """
    c = p.config
    B, N, D = c.batch, c.n, c.d
    n_dt = len({be.dtype for be in p.pairs})
    n_run = len(p.pairs) * len(c.convs)  # stream runs per (kappa, sigma)
    n_sig = len(c.sigmas)
    peak = records = ops = 0.0
    for con, _, ks in p.runs.values():
        k = max(ks)
        T, C = con.layout.shape
        distinct = list({id(L): L for L in (*con.prologue, *con.body, *con.epilogue)}.values())
        weights = sum(int(np.size(w)) for L in distinct for w in L.arrays().values())
        kernels = T * T * sum(_general_channels(L) for L in distinct) if "direct" in c.convs else 0
        state = 4 * B * T * C
        ref = (n_dt + 1) * (k + 1) * B * (D + 1) * MP_BYTES
        iterates = 4 * (k + 1) * B * D
        depth = con.depth(k)
        P2, nl = min(c.layer_ref, B), min(c.layer_ref_layers, depth)
        layer_ref = (3 * P2 * T * C * (nl + 1) * 8 + 2 * nl * P2 * T * C * MP_BYTES) if c.layer_ref else 0
        peak = max(peak, 8 * (state + 2 * weights + kernels + iterates) + ref + layer_ref)
        records += n_sig * n_run * (k + 1) * 24 * 32 * 2
        ops += n_sig * (n_dt * 2 * B * ((k + 1) * D * D + N * D * D) + ERROR_OPS * n_run * 2 * (k + 1) * B * D)
        if c.layer_ref:
            ops += n_sig * n_run * 2 * P2 * nl * T * C * (C + T)
    return peak + records + FIXED_OVERHEAD, ops
