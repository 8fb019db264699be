"""``python -m verify.construct gd``: gradient descent on least squares (seed 000 Sec. 3.2).

    python -m verify.construct gd --layers 100 [--arch ARCH] [--n 20] [--d 5] [--dtype float32[,float64,...]]
        [--batch 256] [--seed 0] [--json FILE] [--export FILE] [--weights FILE]

Builds a GD construction (or reads a ``--weights`` file), proves it exactly at every depth (in a
child under ``--proof-memory-gib`` / ``--proof-timeout``; ``--check random``: the randomized
identity test), and runs it in floating point against a high-precision reference of exact GD.
Every option is checked before any work (:func:`gd_settings`), first from the catalogue's
manifest so that an argument error imports nothing heavy.  The command line itself
(``verify.construct``) names this command beside ``circuit``, ``import`` and the catalogue entries.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from circuits.limits import MAX_SEED
from polyverify.plumbing.cli import (DEFAULT_MEMORY_LIMIT, atomic_write_text, report_json, check_memory, check_range, output_file,
                                     progress)
from polyverify.plumbing.rational import parse_rational

from .cli_common import (UsageError, add_check_arguments, add_export_arguments, call_check, check_check_arguments,
                         check_export_suffix, holds, input_file, print_proof, verdict_of)

if TYPE_CHECKING:  # annotations only: the command imports the constructions when it runs
    from constructions.base import Construction
    from constructions.claims import ProofResult

#: sizes ``gd`` accepts without --allow-large (the exact proof grows faster than N*D: see
#: docs/performance.md, "Exact proofs of the GD architectures", for its time and memory per size)
GD_LIMITS = {"--layers": 100_000, "--n": 4096, "--d": 1024, "--n x --d (proof variables)": 1024,
             "--batch": 1 << 20, "--digits": 10_000, "--batch x --layers (problem-layers)": 1_000_000_000,
             "memory (estimate)": f"{DEFAULT_MEMORY_LIMIT // 2**30} GiB"}  # check_memory's default limit
#: the fewest --digits of the reference (float64 needs 16)
GD_MIN_DIGITS = 16
DEFAULTS = {"arch": "baseconv", "n": 20, "d": 5, "eta": "1/16", "lam": "0"}
#: numerics.backends' dtypes and array libraries, named here so that --help and argument errors do
#: not import numpy (a test checks they are the same)
DTYPES = ("float16", "bfloat16", "float32", "float64")
BACKENDS = ("numpy", "torch", "cupy")


def add_arguments(g, archs: list[str]) -> None:
    """The options of ``gd`` (``archs``: the --arch choices, from the manifest)."""
    g.add_argument("--layers", type=int, default=None,
                   help="model depth (layers of the stack); required unless --weights gives it")
    g.add_argument("--arch", default=None, choices=archs, help="construction (default baseconv)")
    g.add_argument("--n", type=int, default=None, help="rows N of A (default 20)")
    g.add_argument("--d", type=int, default=None, help="columns D of A (default 5)")
    g.add_argument("--eta", default=None, help="step size, an exact rational (default 1/16)")
    g.add_argument("--lam", default=None, help="ridge parameter (the ridge architectures only: see --list; default 0)")
    g.add_argument("--dtype", default="float32",
                   help=f"comma-separated dtypes ({','.join(DTYPES)}; default float32)")
    g.add_argument("--backend", default="numpy", choices=list(BACKENDS), help="array library (default numpy)")
    g.add_argument("--device", default="cpu", help="torch device (default cpu)")
    g.add_argument("--conv", default="direct", choices=["direct", "fft"], help="convolution algorithm")
    g.add_argument("--batch", type=int, default=256, help="number of random problems (default 256)")
    g.add_argument("--seed", type=int, default=0, help="seed of the problem sampler (>= 0; default 0)")
    g.add_argument("--kappa", type=float, default=5.0, help="singular values rescaled to [1, kappa] (default 5)")
    g.add_argument("--digits", type=int, default=50, help="digits of the mpmath reference (default 50)")
    g.add_argument("--json", help="write the whole report as JSON (folder created if missing)")
    g.add_argument("--distance-report", metavar="PATH.md",
                   help="with --weights: write how far the file is from the construction, and the nearest "
                        "construction of its family, as markdown (verify/nearest.py)")
    add_export_arguments(g, "the built weights")
    g.add_argument("--weights", help="prove (and run) this weight file instead of the built weights")
    g.add_argument("--box", default=None, metavar="R[,NAME=R]",
                   help="a FAILED --weights file: the certified bound of its functional distance holds for every "
                        "input with |entries| <= R (a positive rational, default 1; NAME=R for one input, e.g. A=2)")
    g.add_argument("--allow-metadata-mismatch", action="store_true",
                   help="prove --weights even where its metadata declares another construction, size, "
                        "parameter, depth or layer setting than the command line")
    g.add_argument("--allow-large", action="store_true", help="lift the size limits (see above)")
    g.add_argument("--quiet", action="store_true", help="no progress output")
    from .bounded import add_arguments as add_proof_limits

    add_proof_limits(g)  # --proof-memory-gib, --proof-timeout: the proof runs in a child under them
    add_check_arguments(g)  # --check exact|random, --random-seed


# ------------------------------------------------------------------ helpers

def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.3e}"


def _checkpoints(k: int) -> list[int]:
    pts = {k}
    for base in (1, 2, 5):
        m = base
        while m <= k:
            pts.add(m)
            m *= 10
    return sorted(p for p in pts if p >= 1)


def prove_weights(con, lw, path: str, k: int, a, layers_from: str = "command line") -> tuple[ProofResult, dict]:
    """Prove a loaded weight file: each distinct body copy once, plus prologue and epilogue, in a
    child under ``--proof-memory-gib`` and ``--proof-timeout`` (``verify/bounded.py``); with
    ``--check random``, the randomized test of the same sections (each distinct body its own)."""
    from constructions.weights_io import check_against, same_layer, split_sections

    from . import bounded
    from .prover.proof import prove

    secs, k_file = split_sections(con, lw.layers)
    if k_file != k:
        asks = ("--layers asks for" if layers_from == "command line" else
                "its metadata declares" if layers_from == "file" else f"the {layers_from} depth is")
        raise UsageError(f"{path} has {len(lw.layers)} layers (k={k_file}), but {asks} {con.depth(k)} (k={k})")
    check_against(con.layers(k), lw.layers, path)
    variants: list[tuple[int, list]] = []  # (first copy index, body layers)
    for j, body in enumerate(secs["bodies"]):
        if not any(all(same_layer(a, b) for a, b in zip(body, v)) for _, v in variants):
            variants.append((j, body))
    t0 = time.perf_counter()

    def prove_variants():
        result = None
        for j, body in variants or [(0, [])]:
            # refuting first (verify/prover/refute.py): a wrong file is FAILED at an integer point, exactly
            r = prove(con, sections={"prologue": secs["prologue"], "body": body, "epilogue": secs["epilogue"]},
                      refute=True)
            if result is None or not r.ok:
                result = r
            if not r.ok:
                if r.failure.section == "body":  # name the copy in the file, not the variant
                    r.failure.layer += j * len(con.body)
                    r.failure.note = (f"body copy {j} (steps before it are other variants); "
                                      + r.failure.note).strip()
                if r.failure.section == "epilogue":
                    r.failure.layer += (k - 1) * len(con.body) if k else 0
                break
        return result

    if a.check == "random":
        from .prover.randomized import RandomizedUnsupported, check as random_check

        sections = {"prologue": secs["prologue"], "bodies": variants, "epilogue": secs["epilogue"], "k": k}
        try:
            result = call_check(lambda: random_check(con, sections=sections, seed=a.random_seed), a, path)
        except RandomizedUnsupported as e:
            raise UsageError(f"{path}: {e}") from None
    else:
        result = bounded.call(prove_variants, a, path)
    result.seconds = time.perf_counter() - t0
    info = {"file": str(path), "layers": len(lw.layers), "tensors_read": lw.tensors_read,
            "distinct_bodies": len(variants),
            "entries_from_exact_metadata": lw.entries_from_exact, "entries_from_float_values": lw.entries_from_float,
            "entries_read_as_declared_rationals": lw.entries_from_exact,
            "declared_rational_largest_gap": str(lw.declared_gap),
            "declared_rational_largest_gap_float": float(lw.declared_gap)}
    return result, {"weights": info, "sections": secs}


def _from_file(declared: dict | None) -> dict:
    """The ``gd`` options a weight file's metadata declares: arch, n, d, eta, lam, layers."""
    if not declared:
        return {}
    out = {}
    from constructions.catalogue import light_gd_architectures

    arch = {e.name: key for key, e in light_gd_architectures().items()}.get(declared.get("name"))
    if arch is None:
        return {}
    out["arch"] = arch
    A = (declared.get("variables") or {}).get("A")
    if isinstance(A, list) and len(A) == 2 and all(isinstance(x, int) for x in A):
        out["n"], out["d"] = A
    P = declared.get("params") or {}
    try:
        q = lambda key: parse_rational(P[key], f"the weight file's parameter {key}")  # noqa: E731 - bounded
        if "eta" in P:
            out["eta"] = str(q("eta"))
        elif "sqrt_eta" in P:
            out["eta"] = str(q("sqrt_eta") ** 2)
        if "lam" in P:
            out["lam"] = str(q("lam"))
        elif "sqrt_lam" in P:
            out["lam"] = str(q("sqrt_lam") ** 2)
    except ValueError:
        pass  # a malformed parameter shows up as a mismatch below
    sec, kk = declared.get("sections"), declared.get("k")
    if isinstance(sec, dict) and isinstance(kk, int) and all(isinstance(sec.get(x), int) for x in
                                                             ("prologue", "body", "epilogue")):
        out["layers"] = sec["prologue"] + sec["body"] * kk + sec["epilogue"]
    return out


def _resolve(a) -> tuple[dict, dict, object]:
    """Each gd option's value and where it came from (command line, weight file, default)."""
    lw = None
    if a.weights:
        from constructions.weights_io import NoMetadataError, WeightFileError, load

        try:
            lw = load(a.weights)
        except NoMetadataError:
            lw = None  # a foreign file: read against the construction below
        except WeightFileError as e:
            raise UsageError(str(e)) from None
    filed = _from_file(lw.declared if lw is not None else None)
    vals, source = {}, {}
    for key in ("arch", "n", "d", "eta", "lam", "layers"):
        given = getattr(a, key)
        if given is not None:
            vals[key], source[key] = given, "command line"
        elif key in filed:
            vals[key], source[key] = filed[key], "file"
        elif key in DEFAULTS:
            vals[key], source[key] = DEFAULTS[key], "default"
    return vals, source, lw


def _estimate_bytes(n: int, d: int, state_size: int, k: int, batch: int, n_dtypes: int, digits: int) -> float:
    """A rough upper estimate of a gd run's memory: the problems rounded to each dtype (kept
    for all dtypes), the streamed float states (a few copies of the batched state), the
    current iterates of the run, plain GD and the reference, one report row per step, and the
    mpfr reference's matrix M and vector c (~(digits/2 + 40) bytes each); the reference, the
    run and plain GD advance in lockstep (numerics.runner.gd_accuracy), so nothing else grows
    with depth; the dtypes run one after another."""
    mp = digits / 2 + 40
    inputs = n_dtypes * batch * (n * d + n + 2 * d) * 8
    state = 4 * batch * state_size * 8
    iterates = 3 * batch * d * (8 + mp)
    rows = (k + 1) * n_dtypes * 512
    reference = batch * (d * d + d) * mp
    return inputs + state + iterates + rows + reference


def state_size(formula: str, n: int, d: int) -> int | None:
    """The number of state entries of a gd architecture's state formula (``"(N+1) x (5D+2)"``,
    ``constructions.catalogue``) at N = n, D = d, or None where the formula is not plain
    arithmetic in N and D (the construction is then built to know it)."""
    import re

    parts = formula.split(" x ")
    if len(parts) != 2:
        return None
    total = 1
    for part in parts:
        expr = re.sub(r"(\d)(?=[ND(])", r"\1*", part.strip()).replace("^", "**")
        if not re.fullmatch(r"[0-9ND+*() ]+", expr):
            return None
        try:  # digits, N, D, + * ** and parentheses only: nothing else can run
            total *= int(eval(expr, {"__builtins__": {}}, {"N": n, "D": d}))  # noqa: S307
        except (SyntaxError, ValueError, TypeError, ArithmeticError):
            return None
    return total


def depth_error(name: str, layers_counts: tuple[int, int, int], layers: int) -> str | None:
    """``constructions.base.Construction.steps_for_depth``'s refusal, from the layer counts alone
    (prologue, body, epilogue), or None when ``layers`` is realisable (a test checks the two
    agree)."""
    pro, per, epi = layers_counts
    base = pro + epi
    if layers >= base and (layers - base) % per == 0:
        return None
    k_lo = max(0, (layers - base) // per)
    cands = sorted({base + k * per for k in (k_lo, k_lo + 1) if k >= 0})
    below = [c for c in cands if c < layers]
    above = [c for c in cands if c > layers]
    near = ([f"{below[-1]}"] if below else []) + ([f"{above[0]}"] if above else [])
    return (f"depth {layers} is not realisable by {name}: depths are {base} + {per}*k (prologue {pro}, body {per}, "
            f"epilogue {epi}); nearest valid: {' or '.join(near)}")


# ------------------------------------------------------------------ gd

@dataclass
class GDSettings:
    """A validated ``gd`` command: what to prove and run, and where each parameter came from."""

    con: "Construction"
    k: int
    n: int
    d: int
    eta: Fraction
    lam: Fraction
    source: dict  # parameter -> "command line" | "file" | "default"
    weights: object | None  # the loaded --weights file (constructions.weights_io.LoadedWeights)
    inputs: list  # (backend, rounded problems) per dtype
    json_path: Path | None
    export_path: Path | None


def gd_settings(a) -> GDSettings:
    """Validate every option of ``gd`` (and the --weights file, and the problems' rounding)
    before any work; a UsageError names the first problem.  The options are checked first, from
    the catalogue's manifest (nothing heavy imported: an argument error costs a fraction of
    ``import sympy``); then the construction is built, the --weights file read and the problems
    rounded."""
    json_path, export_path = _check_outputs(a)
    vals, source, lw = _resolve(a)
    arch, n, d, layers, eta, lam, dtypes = _check_options(a, vals, source)
    con, k, backends = _build(a, arch, n, d, layers, eta, lam, dtypes)
    if a.box is not None:
        from .functional_distance import parse_box

        parse_box(a.box).check_names(con.variables)
    lw = _check_weights(a, con, k, lw)
    inputs = _rounded_problems(a, n, d, backends)
    return GDSettings(con, k, n, d, eta, lam, source, lw, inputs, json_path, export_path)


def _check_outputs(a) -> tuple[Path | None, Path | None]:
    """The proof's limits, --check's seed and the output paths (--json, --export, --format)."""
    from . import bounded

    bounded.check(a)  # --proof-memory-gib, --proof-timeout
    check_check_arguments(a)  # --random-seed
    json_path = output_file("--json", a.json)
    export_path = output_file("--export", a.export)
    if getattr(a, "distance_report", None) is not None:
        if not a.weights:
            raise UsageError("--distance-report applies to a --weights file (how far it is from the construction); "
                             "none was given")
        output_file("--distance-report", a.distance_report)
    check_export_suffix(a)  # --export keep.txt: refused, not a safetensors file under a text file's name
    if a.weights:
        input_file("--weights", a.weights)  # missing, a folder, /dev/zero, a FIFO: said as what it is
    if a.weights and a.export:
        raise UsageError("--export writes the built construction's weights, not the --weights file that is "
                         "proved and run: give one of them")
    if a.allow_metadata_mismatch and not a.weights:
        raise UsageError("--allow-metadata-mismatch applies to a --weights file; none was given")
    if a.box is not None:  # the functional distance's box (verify/functional_distance.py)
        from .functional_distance import parse_box

        parse_box(a.box)
        if not a.weights:
            raise UsageError("--box bounds the functional distance of a --weights file to the construction; no "
                             "--weights file was given")
    return json_path, export_path


def _check_options(a, vals: dict, source: dict) -> tuple:
    """Sizes, step sizes, dtypes, device and work against ``GD_LIMITS``, from the manifest alone:
    ``(arch, n, d, layers, eta, lam, dtypes)``."""
    from constructions.catalogue import light_gd_architectures

    if "layers" not in vals:
        raise UsageError("--layers is required (or a --weights file whose metadata gives the depth)")
    arch, n, d, layers = vals["arch"], vals["n"], vals["d"], vals["layers"]
    big = None if a.allow_large else "--allow-large"
    lim = lambda key: None if a.allow_large else GD_LIMITS[key]  # noqa: E731
    check_range("--layers", layers, 1, lim("--layers"), override=big)
    check_range("--n", n, 1, lim("--n"), override=big)
    check_range("--d", d, 1, lim("--d"), override=big)
    if n < d:
        raise UsageError(f"--n ({n}) must be >= --d ({d}) for a least-squares problem")
    check_range("--n x --d", n * d, 1, lim("--n x --d (proof variables)"), override=big)
    check_range("--batch", a.batch, 1, lim("--batch"), override=big)
    check_range("--digits", a.digits, GD_MIN_DIGITS, lim("--digits"), override=big)
    check_range("--seed", a.seed, 0, MAX_SEED)
    check_range("--kappa", a.kappa, 1.0)
    try:
        flag = lambda key: f"--{key}" if source[key] == "command line" else f"{key} (from the {source[key]})"  # noqa: E731
        eta = parse_rational(vals["eta"], flag("eta"))  # bounded: --eta 1e999999999 is refused at once
        lam = parse_rational(vals["lam"], flag("lam"))
    except ValueError as e:
        raise UsageError(str(e)) from None
    if eta <= 0:
        raise UsageError(f"--eta must be > 0, got {eta}")
    if lam < 0:
        raise UsageError(f"--lam must be >= 0, got {lam}")
    light = light_gd_architectures()
    info = light[arch]
    if lam != 0 and not info.ridge:
        ridge = " or ".join(e.arch for e in light.values() if e.ridge)
        raise UsageError(f"--lam needs a ridge architecture (--arch {ridge}); {arch} is plain least squares")
    dtypes = [t.strip() for t in a.dtype.split(",")]
    if not all(dtypes):
        raise UsageError(f"--dtype {a.dtype!r}: an empty name in the list; choose from {', '.join(DTYPES)}")
    from polyverify.plumbing.options import split_list

    split_list("--dtype", a.dtype)  # a repeated dtype refused as by every list option (the run would go twice)
    # what the manifest knows, refused before anything is built (the same checks run again on the
    # built construction, for an architecture the manifest does not cover)
    if info.gd_layers is not None:
        msg = depth_error(info.name, info.gd_layers, layers)
        if msg:
            raise UsageError(f"--layers: {msg}")
    bad_dtype = next((t for t in dtypes if t not in DTYPES), None)
    if bad_dtype is not None:
        raise UsageError(f"unknown dtype {bad_dtype!r}; choose one of {', '.join(DTYPES)}")
    _check_device(a)
    if a.conv != "direct" and info.gd_baseconv is False:
        raise UsageError(f"--conv {a.conv} applies to BaseConv layers; --arch {arch} has none")
    _check_work(a, layers)
    size = state_size(info.state, n, d)
    if info.gd_layers is not None and size is not None and not a.allow_large:
        k_light = (layers - info.gd_layers[0] - info.gd_layers[2]) // info.gd_layers[1]
        _check_memory(a, layers, n, d, size, k_light, len(dtypes))
    return arch, n, d, layers, eta, lam, dtypes


def _build(a, arch: str, n: int, d: int, layers: int, eta: Fraction, lam: Fraction, dtypes: list[str]) -> tuple:
    """The work starts: the construction, its GD steps and the backends, ``(con, k, backends)``;
    options the run would ignore are refused, not silently dropped."""
    from constructions.base import DepthError
    from constructions.catalogue import gd_architectures
    from numerics.backends import Backend, BackendError

    entry = gd_architectures()[arch]
    try:
        con = entry.build(n, d, eta=eta, lam=lam) if entry.ridge else entry.build(n, d, eta=eta)
        k = con.steps_for_depth(layers)
        backends = [Backend(a.backend, dt, a.device) for dt in dtypes]
        if a.export is not None:  # the --format holds this construction, or one line now, before any work
            from .export import check_export_arguments

            check_export_arguments(a, con, k=k)
    except DepthError as e:
        raise UsageError(f"--layers: {e}") from None
    except (ValueError, BackendError) as e:
        raise UsageError(str(e)) from None
    if a.conv != "direct" and not any(L.kind == "baseconv" for L in (*con.prologue, *con.body, *con.epilogue)):
        raise UsageError(f"--conv {a.conv} applies to BaseConv layers; --arch {arch} has none")
    if not a.allow_large:
        _check_memory(a, layers, n, d, con.state_size, k, len(backends))
    return con, k, backends


def _check_weights(a, con, k: int, lw):
    """The --weights file read (if not already) and its metadata checked against the command line."""
    if not a.weights:
        return lw
    from constructions.weights_io import WeightFileError, declared_mismatches, load

    try:
        if lw is None:
            lw = load(a.weights, spec=con)
        bad = declared_mismatches(con, k, lw)
    except WeightFileError as e:
        raise UsageError(str(e)) from None
    if bad and not a.allow_metadata_mismatch:
        raise UsageError(f"{a.weights} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove "
                         f"it as given on the command line")
    return lw


def _rounded_problems(a, n: int, d: int, backends: list) -> list:
    """The problems, sampled (cheap) and rounded up front: a dtype they overflow is refused now."""
    import numpy as np

    from numerics.problems import sample_ls
    from numerics.runner import rounded_inputs

    P = sample_ls(a.batch, n, d, kappa=a.kappa, seed=a.seed)
    q = np.random.default_rng(a.seed + 1).standard_normal((a.batch, d))
    try:
        return rounded_inputs(P.A, P.b, P.x0, q, backends)
    except ValueError as e:
        raise UsageError(f"{e}; use a smaller --kappa or --n, or another --dtype") from None


def _check_device(a) -> None:
    """--device: only with --backend torch, and a device torch has here (``numerics.train``'s own
    check, the one ``numerics.train --device`` runs: cpu or cuda[:index], the GPU present), before
    any work; ``--device tpu`` was a RuntimeError from torch once the run started."""
    if a.device != "cpu" and a.backend != "torch":
        raise UsageError(f"--device {a.device} applies to --backend torch only (--backend {a.backend} "
                         f"{'runs on the CPU' if a.backend == 'numpy' else 'picks its own GPU'})")
    if a.backend == "torch":
        from numerics.train import checked_device  # light: imports torch only for a cuda device

        checked_device("--device", a.device)


def _check_work(a, layers: int) -> None:
    work, work_lim = a.batch * layers, GD_LIMITS["--batch x --layers (problem-layers)"]
    if not a.allow_large and work > work_lim:
        raise UsageError(f"--batch {a.batch} x --layers {layers} = {work} problem-layers exceeds the limit "
                         f"{work_lim} (lower --batch or --layers, or pass --allow-large)")


def _check_memory(a, layers: int, n: int, d: int, size: int, k: int, n_dtypes: int) -> None:
    check_memory(f"gd at depth {layers}, batch {a.batch}, N={n}, D={d}",
                 _estimate_bytes(n, d, size, k, a.batch, n_dtypes, a.digits), override="--allow-large")


def _gd_proof(a, con, k: int, source: dict, lw, out) -> tuple:
    """``(proof, the weight file's summary or None)``: the gd command's check of the weight file's
    layers (``--weights``; its line printed), randomized (``--check random``) or the bounded proof."""
    if a.weights:
        from constructions.weights_io import WeightFileError

        try:
            proof, user = prove_weights(con, lw, a.weights, k, a, layers_from=source.get("layers", "command line"))
        except WeightFileError as e:
            raise UsageError(str(e)) from None
        print(f"weights: {a.weights} ({user['weights']['tensors_read']} tensors, all read; "
              f"{user['weights']['distinct_bodies']} distinct body variant(s); {lw.declared_summary()})", file=out)
        return proof, user
    if a.check == "random":
        from .catalogue_cmd import random_check
        from .prover.randomized import check as check_randomized

        return random_check(lambda: check_randomized(con, seed=a.random_seed), a, con.name), None
    from . import bounded

    return bounded.prove(con, a, con.name, refute=True), None


def _print_run(a, be, rep: dict, runs: list[dict], k: int, out) -> None:
    """One numeric run's lines: its times, the first non-finite layer, a row per checkpoint step (from
    ``runs``, the rows so far), and the prediction's MSE."""
    t_ref, t_run = rep["seconds_reference"], rep["seconds_run"]
    res_bad = rep["first_nonfinite_layer"]
    print(f"\n{be.dtype} ({be.name}, {a.conv} conv), {a.batch} problems, reference {a.digits} digits "
          f"({t_ref:.2f} s), run {t_run:.2f} s", file=out)
    if res_bad is not None:
        print(f"  first non-finite value after stack layer {res_bad}", file=out)
    print(f"  {'step':>6} {'depth':>6} {'MSE vs exact GD':>16} {'MSE vs solution':>16} "
          f"{'plain GD vs exact':>18} {'overhead':>9}", file=out)
    by_step = {r["step"]: r for r in runs if r["dtype"] == be.dtype}
    for j in _checkpoints(k):
        r = by_step[j]
        ov = r["construction_overhead"]
        print(f"  {j:>6} {r['depth']:>6} {_fmt(r['mse_vs_exact_gd']):>16} {_fmt(r['mse_vs_solution']):>16} "
              f"{_fmt(r['plain_gd_mse_vs_exact_gd']):>18} {('%.2f' % ov) if ov is not None else '-':>9}", file=out)
    if rep["prediction_mse_vs_exact"] is not None:
        print(f"  prediction q^T x after the epilogue: MSE vs exact {_fmt(rep['prediction_mse_vs_exact'])}",
              file=out)


def cmd_gd(a, out) -> int:
    st = gd_settings(a)
    from numerics.runner import gd_accuracy

    con, k, n, d, eta, lam, source, lw = st.con, st.k, st.n, st.d, st.eta, st.lam, st.source, st.weights
    inputs, json_path, export_path = st.inputs, st.json_path, st.export_path
    print(f"{con.name}: {con.reference}", file=out)
    print(f"  depth {con.depth(k)} = {len(con.prologue)} prologue + {len(con.body)} x {k} steps + "
          f"{len(con.epilogue)} epilogue; state {con.layout.shape[0]} x {con.layout.shape[1]} "
          f"= {con.state_size}; N={n}, D={d}, eta={eta}" + (f", lam={lam}" if lam else ""), file=out)

    if a.weights:
        by = {}
        for key, src in source.items():
            by.setdefault(src, []).append(key)
        print("  parameters: " + "; ".join(f"{', '.join(keys)} from the {src}" if src != "default"
                                          else f"{', '.join(keys)} by default" for src, keys in by.items()), file=out)
    proof, user = _gd_proof(a, con, k, source, lw, out)
    distance = near = used_line = None
    if lw is not None and not holds(proof):  # exact or --check random: the FAILED line gives the distance
        from . import bounded
        from .nearest import gd_nearest, guarded, print_failed, print_nearest  # diagnosis: how far, from what
        from .weight_distance import weight_distance

        distance = weight_distance(con.layers(k), lw.layers)
        used_line = distance.line_at(con.name, con.params)
        # the verdict line first, with the exact weight distance at the parameters used; the nearest
        # construction's fit (the slow part of the diagnosis) after it, then its own "verdict:" line
        print_failed(proof, None, out, summary=used_line)
        near = guarded(lambda: gd_nearest(con, n, d, k, eta, lam, lw.layers,
                                          prove=lambda c: bounded.prove(c, a, f"the nearest {c.name}")), con.name)
        print_nearest(verdict_of(proof)[1], near, out, used_line)
    else:
        print_proof(proof, out)

    functional = None
    if lw is not None and not holds(proof):  # diagnosis of a FAILED file: how far apart the functions are
        from .functional_distance import for_gd, parse_box

        functional = for_gd(con, k, lw.layers, batch=a.batch, seed=a.seed, kappa=a.kappa, box=parse_box(a.box))
        print("  " + functional.line(), file=out)

    if export_path:
        from .export import write_export

        write_export(a, con, k=k, out=out)

    # ---- numeric runs
    runs, dtype_reports = [], []
    for be, v in inputs:
        bar = progress(k, f"{be.dtype} run", enabled=not a.quiet, unit="step", leave=False)
        rep, rows = gd_accuracy(con, k, v, be, eta, lam, digits=a.digits, conv_method=a.conv, progress=bar,
                                sections=user["sections"] if user is not None else None)
        bar.close()
        dtype_reports.append(rep)
        runs += rows
        _print_run(a, be, rep, runs, k, out)

    verdict, line = verdict_of(proof)
    report = {"command": "gd", "construction": con.summary(), "k": k, "depth": con.depth(k),
              "n": n, "d": d, "parameter_sources": source, "batch": a.batch, "seed": a.seed, "kappa": a.kappa, "digits": a.digits,
              "eta": str(eta), "lam": str(lam), "check": a.check, "verdict": verdict, "verdict_line": line,
              ("randomized" if a.check == "random" else "proof"): proof.to_json(), "runs": runs, "dtypes": dtype_reports}
    if user is not None:
        report["weights"] = user["weights"]
        if distance is not None:
            report["weights"]["distance"] = distance.to_json()
    if near is not None:  # the nearest construction of the family: its own block, never the file's verdict
        report["nearest"] = near.to_json()
        report["verdict_line"] = f"{line}; {near.verdict_text(used_line)}"
    if functional is not None:
        report["functional_distance"] = functional.to_json()
    if getattr(a, "distance_report", None):
        from .nearest import distance_markdown

        atomic_write_text(a.distance_report, distance_markdown(a.weights, report["verdict_line"], used_line, near),
                          "--distance-report")
        print(f"\ndistance report written to {a.distance_report}", file=out)
    if json_path:
        atomic_write_text(json_path, report_json(report), "--json")
        print(f"\nreport written to {json_path}", file=out)
    return 0 if holds(proof) else 1
