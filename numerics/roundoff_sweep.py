"""The roundoff command's sweep adapter (``SWEEP``, run by ``python -m numerics.sweep roundoff``):
a cell is one run of ``python -m numerics.roundoff``, its config the same :class:`RoundoffConfig`
(``numerics.roundoff_config``) the command line builds, checked as the command checks it.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

from constructions.catalogue import gd_architectures
from polyverify.plumbing.cli import UsageError, make_folder
from polyverify.plumbing.cli import progress as progress_reporter

from .backends import DTYPES
from .roundoff_config import DEFAULTS, LIMITS, RoundoffConfig, RoundoffPlan, plan
from .roundoff_run import clean

#: a sweep cell's config keys and the :class:`RoundoffConfig` field each sets
CELL_KEYS = {"arch": "construction", "layers": "layers", "dtype": "dtypes", "backend": "backends",
             "device": "device", "conv": "convs", "kappa": "kappas", "sigma": "sigmas", "eta": "eta", "lam": "lam",
             "batch": "batch", "n": "n", "d": "d", "seed": "seed", "digits": "digits", "layer_ref": "layer_ref",
             "layer_ref_layers": "layer_ref_layers", "allow_large": "allow_large"}
#: keys that name one value in a cell (one run per cell)
_SCALAR_KEYS = ("dtype", "backend", "conv", "kappa", "sigma")
#: the sweep's own defaults where they differ from one run's: two dtypes, the layer-level reference off
SWEEP_DTYPES = "float64,float32"
SWEEP_LAYER_REF = 0


def cell_config(config: dict, where: str = "cell") -> tuple[RoundoffConfig, RoundoffPlan]:
    """A cell's config as the typed config of one run, checked and resolved (UsageError naming
    ``where`` otherwise)."""
    for k in ("arch", "layers"):
        if k not in config:
            raise UsageError(f"{where}: the config needs {k!r}")
    for k in _SCALAR_KEYS:
        if isinstance(config.get(k), list):
            raise UsageError(f"{where}: {k} must be one value in a cell (one run per cell), got {config[k]!r}")
    try:
        c = RoundoffConfig.from_cell(config, CELL_KEYS, where)
        return c, plan(c, create_out=False)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None


def sweep_check(config: dict, *, allow_large: bool = False, where: str = "cell") -> dict:
    """One cell's config checked as the command line would be (UsageError naming the problem) and
    returned complete: every key with its value, so that a cell has one id however it was written."""
    from polyverify.sweep import check_lifting_limits

    config, (c, p) = check_lifting_limits(cell_config, config, allow_large, where)
    layers = list(p.config.layers)
    full = {"arch": p.entry.arch, "layers": layers[0] if len(layers) == 1 else layers,
            "dtype": p.pairs[0].dtype, "backend": p.pairs[0].name, "device": c.device,
            "conv": p.config.convs[0], "kappa": p.config.kappas[0], "sigma": p.config.sigmas[0], "eta": c.eta.strip(),
            "lam": str(p.lam), "batch": c.batch, "n": c.n, "d": c.d, "seed": c.seed, "digits": c.digits,
            "layer_ref": c.layer_ref, "layer_ref_layers": c.layer_ref_layers}
    if config.get("allow_large"):
        full["allow_large"] = True
    return full


def sweep_cell(config: dict) -> dict:
    """One roundoff run (one architecture, depth or list of depths, dtype, backend, convolution,
    kappa, sigma, size, seed): the run record of ``python -m numerics.roundoff`` (per-step errors,
    checkpoints, first non-finite layer; no timings, so that equal configs give equal results),
    the error at the largest depth at the top level, and the layer-level records if asked."""
    from .roundoff import compute

    _, p = cell_config(config)
    runs, layer_runs = compute(p, io.StringIO(), progress_reporter(None, "", enabled=False))
    (rec,) = runs
    rec = {k: v for k, v in rec.items() if not k.startswith("seconds")}
    top = {"construction": p.runs[p.config.kappas[0]].con.name}
    if rec.get("checkpoints"):
        c = rec["checkpoints"][-1]
        top.update({k: c[k] for k in ("mse", "max_rel", "bits_mean", "plain_mse", "overhead", "prediction_mse")})
    for lr in layer_runs:
        lr.pop("seconds", None)
    out = {**top, **rec}
    if layer_runs:
        out["layer_level"] = layer_runs
    return clean(out)


def _sweep_arguments(g) -> None:
    D = DEFAULTS
    g.add_argument("--archs", default="baseconv", help=f"architectures: {', '.join(gd_architectures())} "
                                                       "(default baseconv)")
    g.add_argument("--depths", required=True, help="model depths (layers), each realised by every architecture; "
                                                   "one cell per depth")
    g.add_argument("--dtypes", default=SWEEP_DTYPES, help=f"dtypes: {', '.join(DTYPES)} (default {SWEEP_DTYPES})")
    g.add_argument("--sizes", default=f"{D['n']}x{D['d']}", help=f"problem sizes NxD (default {D['n']}x{D['d']})")
    g.add_argument("--kappas", default=D["kappas"], help=f"condition numbers (default {D['kappas']})")
    g.add_argument("--sigmas", default=D["sigmas"], help=f"target scales of D_OOD^b(sigma) (default {D['sigmas']})")
    g.add_argument("--seeds", default=str(D["seed"]), help=f"problem seeds (default {D['seed']})")
    g.add_argument("--backends", default=D["backends"], help=f"numpy, torch, cupy (default {D['backends']})")
    g.add_argument("--convs", default=D["convs"], help=f"convolution methods: direct, fft (default {D['convs']})")
    g.add_argument("--device", default=D["device"], help=f"torch device (default {D['device']})")
    g.add_argument("--batch", type=int, default=D["batch"], help=f"problems per cell (default {D['batch']})")
    g.add_argument("--eta", default=D["eta"], help=f"step size, an exact rational or 'auto' (default {D['eta']})")
    g.add_argument("--lam", default=D["lam"], help=f"ridge parameter (lsa/elsa; default {D['lam']})")
    g.add_argument("--digits", type=int, default=D["digits"],
                   help=f"starting digits of the references (default {D['digits']})")
    g.add_argument("--layer-ref", type=int, default=SWEEP_LAYER_REF,
                   help=f"problems for the layer-level reference in each cell (default {SWEEP_LAYER_REF}: off)")
    g.add_argument("--layer-ref-layers", type=int, default=D["layer_ref_layers"],
                   help=f"layers it examines (default {D['layer_ref_layers']})")


def _size(s: str) -> tuple[int, int]:
    n, d = s.lower().split("x")
    return int(n), int(d)


_size.__name__ = "NxD"


def _sweep_configs(a) -> list[dict]:
    from polyverify.sweep import product, split_list

    big = a.allow_large
    L = LIMITS["list"]
    sizes = split_list("--sizes", a.sizes, _size, allow_large=big, limit=L)
    grid = product(arch=split_list("--archs", a.archs, allow_large=big, limit=L),
                   size=sizes,
                   kappa=split_list("--kappas", a.kappas, float, allow_large=big, limit=L),
                   sigma=split_list("--sigmas", a.sigmas, float, allow_large=big, limit=L),
                   seed=split_list("--seeds", a.seeds, int, allow_large=big, limit=L),
                   backend=split_list("--backends", a.backends, allow_large=big, limit=L),
                   conv=split_list("--convs", a.convs, allow_large=big, limit=L),
                   dtype=split_list("--dtypes", a.dtypes, allow_large=big, limit=L),
                   layers=split_list("--depths", a.depths, int, allow_large=big, limit=L))
    fixed = {"device": a.device, "batch": a.batch, "eta": a.eta, "lam": a.lam, "digits": a.digits,
             "layer_ref": a.layer_ref, "layer_ref_layers": a.layer_ref_layers}
    out = []
    for c in grid:
        n, d = c.pop("size")
        out.append({**c, "n": n, "d": d, **fixed})
    return out


def _sweep_finish(res, out: Path) -> tuple[list[str], bool]:
    """Error against depth, one plot per group of cells that differ only in dtype and depth: one
    line per dtype, from its deepest finished cell (whose per-step errors cover every smaller depth)."""
    from . import roundoff_plots

    rows = [r for r in res.rows if r["status"] == "ok"]
    if not rows:
        return [], True
    group_keys = [k for k in CELL_KEYS if k not in ("dtype", "layers", "allow_large")]
    varying = [k for k in group_keys if len({json.dumps(r["config"].get(k)) for r in rows}) > 1]
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = tuple(json.dumps(r["config"].get(k)) for k in group_keys)
        best = groups.setdefault(key, {})
        dt = r["config"]["dtype"]
        if dt not in best or r["result"]["depth"] > best[dt]["result"]["depth"]:
            best[dt] = r
    files = []
    for key, by_dtype in groups.items():
        c0 = next(iter(by_dtype.values()))["config"]
        tag = "_".join([str(c0["arch"])] + [f"{k}{c0[k]}" for k in varying if k != "arch"])
        tag = re.sub(r"[^\w.\-]+", "-", tag)
        title = (f"{c0['arch']}: N={c0['n']}, D={c0['d']}, {c0['backend']}, {c0['conv']} conv, kappa={c0['kappa']:g}, "
                 f"sigma={c0['sigma']:g}, eta={c0['eta']}, batch {c0['batch']}, seed {c0['seed']}")
        path = out / "plots" / f"mse_{tag}.png"
        make_folder(path.parent)
        roundoff_plots.error_vs_depth([r["result"] for r in by_dtype.values()], path, title=title)
        files.append(str(path))
    return files, True


SWEEP = SimpleNamespace(
    description="Roundoff sweep: one cell per architecture x depth x dtype x size x kappa x sigma x seed x backend x "
                "conv; each cell is one run of python -m numerics.roundoff (checked as that command checks it, "
                "before any work).  Writes the table and plots/mse_*.png (error against depth, one line per dtype).",
    cell="numerics.roundoff:sweep_cell", add_arguments=_sweep_arguments, configs=_sweep_configs,
    check=sweep_check, finish=_sweep_finish)
