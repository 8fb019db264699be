"""Seed 004 Table 1's ridge baselines and problem sets (Sec. 6): the mixed-noise regression problems
(N = 20 context points in D = 10 dimensions, noise sigma drawn per sequence from the column's set),
ConstRR / TunedRR / AdaRR and the adjusted loss, each tuned on its own draw; the cells and the
report are :mod:`.seed004_table1`'s."""
from __future__ import annotations

from typing import TYPE_CHECKING

import math
import time

import numpy as np

from .common import std_err

if TYPE_CHECKING:
    from .seed004_table1 import BaselinesCell

#: context points and dimension of every problem (seed 004 Sec. 6)
N, D = 20, 10


def keyed_rng(*key) -> np.random.Generator:
    """A generator seeded by ``key`` (each component through :func:`hash_key`): one stream per key."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([abs(hash_key(k)) for k in key])))


def hash_key(k) -> int:
    """A stable integer for a seed component (strings by their bytes, not Python's salted hash)."""
    if isinstance(k, (int, np.integer)):
        return int(k)
    return int.from_bytes(str(k).encode()[:16].ljust(16, b"\0"), "little")


def sigmas(column: str, batch: int, rng: np.random.Generator) -> np.ndarray:
    """``sigma_tau`` per sequence for a Table 1 column."""
    if column.startswith("{"):
        vals = np.array([float(v) for v in column.strip("{}").split(",")])
        return vals[rng.integers(0, len(vals), batch)]
    smax = float(column)
    return rng.uniform(0.0, smax, batch) if smax > 0 else np.zeros(batch)


def sample(batch: int, column: str, rng: np.random.Generator, n: int = N, d: int = D) -> dict:
    """One batch of Table 1 sequences (module docstring), float64."""
    w = rng.standard_normal((batch, d))
    X = rng.standard_normal((batch, n, d))
    xt = rng.standard_normal((batch, d))
    s = sigmas(column, batch, rng)
    y = np.einsum("bnd,bd->bn", X, w) + s[:, None] * rng.standard_normal((batch, n))
    return {"X": X, "y": y, "xt": xt, "yt": np.einsum("bd,bd->b", xt, w), "sigma": s}


def spectral(X, y, xt) -> dict:
    """Per sequence: eigenvalues ``s`` of ``Sigma = X^T X``, ``a = V^T alpha``, ``q = V^T x_t``, and
    the OLS noise estimate ``sigma_hat^2 = RSS / (n - d)`` (``RSS = |y|^2 - sum_k a_k^2 / s_k``)."""
    n, d = X.shape[-2:]
    Sig = np.einsum("bni,bnj->bij", X, X)
    s, V = np.linalg.eigh(Sig)
    a = np.einsum("bij,bi->bj", V, np.einsum("bni,bn->bi", X, y))
    q = np.einsum("bij,bi->bj", V, xt)
    rss = np.maximum(np.einsum("bn,bn->b", y, y) - np.sum(a * a / s, axis=1), 0.0)
    return {"s": s, "a": a, "q": q, "s2hat": rss / (n - d)}


def ridge(sp: dict, lam) -> np.ndarray:
    """The ridge prediction ``<(Sigma + lam I)^{-1} alpha, x_t>`` per sequence (lam scalar or per sequence)."""
    lam = np.asarray(lam, dtype=float)
    lam = lam[:, None] if lam.ndim else lam
    aq = sp["aq"] if "aq" in sp else sp["a"] * sp["q"]
    return np.sum(aq / (sp["s"] + lam), axis=1)


def subset(ps: dict, size: int) -> dict:
    """The first ``size`` sequences of a problem set."""
    return {k: v[:size] for k, v in ps.items()}


def problem_set(column: str, size: int, which: str, seed: int = 0, chunk: int = 25_000) -> dict:
    """A fixed set of ``size`` sequences (``which``: eval, tune, monitor) with their spectral data."""
    rng = keyed_rng("seed004", which, column, seed)
    parts = []
    for start in range(0, size, chunk):
        b = sample(min(chunk, size - start), column, rng)
        sp = spectral(b["X"], b["y"], b["xt"])
        parts.append({**b, **sp, "aq": sp["a"] * sp["q"]})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def adjusted(pred, ps) -> tuple[float, float, float]:
    """(adjusted loss, its standard error, the oracle's 1/2 MSE) of predictions on a problem set."""
    e_or = (ridge(ps, ps["sigma"] ** 2) - ps["yt"]) ** 2
    e = (np.asarray(pred) - ps["yt"]) ** 2
    diff = 0.5 * (e - e_or)
    return float(diff.mean()), std_err(diff), float(0.5 * e_or.mean())


# ====================================================================== baselines

def _mse(pred, yt) -> float:
    return float(np.mean((pred - yt) ** 2))


def tune_const(ps) -> float:
    """ConstRR: the lambda minimising the MSE on ``ps`` (0 and a log grid, then golden section)."""
    grid = np.concatenate([[0.0], np.geomspace(1e-4, 1e3, 141)])
    losses = [_mse(ridge(ps, lam), ps["yt"]) for lam in grid]
    i = int(np.argmin(losses))
    if i == 0:
        return 0.0
    lo, hi = math.log(grid[max(i - 1, 1)]), math.log(grid[min(i + 1, len(grid) - 1)])
    f = lambda t: _mse(ridge(ps, math.exp(t)), ps["yt"])  # noqa: E731
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, e = b - g * (b - a), a + g * (b - a)
    fc, fe = f(c), f(e)
    for _ in range(40):
        if fc < fe:
            b, e, fe = e, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, e, fe
            e = a + g * (b - a)
            fe = f(e)
    return math.exp((a + b) / 2)


def tuned_lambda(s2hat, c, m):
    return np.minimum(c * s2hat, m)


def tune_tuned(ps, coarse: int = 20_000) -> tuple[float, float]:
    """TunedRR: (scale c, clip m) minimising the MSE on ``ps``: a 2-D log grid on the first
    ``coarse`` sequences, then two finer grids around its best on all of ``ps``."""
    def best(cs, ms, p):
        vals = [(_mse(ridge(p, tuned_lambda(p["s2hat"], c, m)), p["yt"]), c, m) for c in cs for m in ms]
        return min(vals)

    _, c, m = best(np.geomspace(0.05, 5, 31), np.concatenate([np.geomspace(0.01, 1000, 31), [np.inf]]),
                   subset(ps, coarse))
    for width in (1.5, 1.12):
        cs = c * np.geomspace(1 / width, width, 9)
        ms = [np.inf] if not np.isfinite(m) else m * np.geomspace(1 / width, width, 9)
        _, c, m = best(cs, ms, ps)
    return float(c), float(m)


#: the arrays of a problem set the baselines need (the raw sequences are dropped after the spectral step)
_KEEP = ("s", "aq", "yt", "sigma", "s2hat")


def draw_name(which: str, r: int) -> str:
    """The problem-set name of independent draw ``r`` (draw 0 is the set of the single-draw protocol)."""
    return which if r == 0 else f"{which}-{r}"


def _lean(ps: dict) -> dict:
    return {k: ps[k] for k in _KEEP}


def baselines_cell(cfg: BaselinesCell) -> dict:
    """ConstRR, AdaRR and TunedRR on one column, from ``draws`` (K) independent pairs (tuning set r,
    evaluation set r), each of ``tune`` / ``eval`` sequences.

    Every baseline is evaluated on the pooled K evaluation sets; ConstRR and TunedRR are tuned K times,
    once on each tuning set, and their value is the mean over the K tunings of the pooled loss.  Its
    standard error adds the two noises: ``se^2 = se_eval^2 + s_tune^2 / K``, ``se_eval`` that of the
    mean over the pooled sequences (of the per-sequence loss averaged over the K tunings) and
    ``s_tune`` the standard deviation over the K tunings of their pooled losses (the tuning set's
    noise; the pooled set is common to them, so its own noise cancels from ``s_tune``).  Also recorded,
    per draw, the single-draw protocol (tune on set r, evaluate on set r: one value of what the paper
    measured once) and ``se_one``, the standard error of one such value (``K se_eval^2 + s_tune^2``),
    and ``tail_share``: the fraction of the pooled mean carried by its largest 0.1% of sequences."""
    col, n_eval, n_tune, seed, K = cfg.column, cfg.eval, cfg.tune, cfg.seed, cfg.draws
    t0 = time.perf_counter()
    evals = [_lean(problem_set(col, n_eval, draw_name("eval", r), seed)) for r in range(K)]
    params = {"constrr": [], "tunedrr": []}
    for r in range(K):
        tune = _lean(problem_set(col, n_tune, draw_name("tune", r), seed))
        params["constrr"].append(tune_const(tune))
        params["tunedrr"].append(tune_tuned(tune))
        del tune
    pooled = {k: np.concatenate([e[k] for e in evals]) for k in _KEEP}
    e_or = (ridge(pooled, pooled["sigma"] ** 2) - pooled["yt"]) ** 2

    def lam(key, prm, ps):
        if key == "constrr":
            return prm
        if key == "adarr":
            return ps["s2hat"]
        return tuned_lambda(ps["s2hat"], *prm)

    out = {"kind": "baselines", "column": col, "draws": K, "eval_per_draw": n_eval, "tune_per_draw": n_tune}
    for key in ("constrr", "adarr", "tunedrr"):
        prms = params.get(key, [None])
        diffs = np.array([0.5 * ((ridge(pooled, lam(key, prm, pooled)) - pooled["yt"]) ** 2 - e_or) for prm in prms])
        per_tuning = diffs.mean(axis=1)
        avg = diffs.mean(axis=0)
        se_eval = std_err(avg) or 0.0
        s_tune = float(per_tuning.std(ddof=1)) if len(prms) > 1 else 0.0
        adj = float(avg.mean())
        single = []
        for r, ev in enumerate(evals):
            prm = prms[r] if len(prms) > 1 else prms[0]
            single.append(adjusted(ridge(ev, lam(key, prm, ev)), ev)[0])
        order = np.argsort(avg)[::-1][:max(1, len(avg) // 1000)]
        rec = {"adjusted": adj, "se": math.sqrt(se_eval ** 2 + s_tune ** 2 / len(prms)), "se_eval": se_eval,
               "s_tune": s_tune, "se_one": math.sqrt(K * se_eval ** 2 + s_tune ** 2), "per_draw": single,
               "tail_share": float(avg[order].sum() / avg.sum()) if avg.sum() > 0 else None}
        if pooled["sigma"].min() > 0:
            # what the largest 0.1% of sequences are: medians over them and over all of the noise std and of
            # the variance estimate over the true variance
            ratio = pooled["s2hat"] / pooled["sigma"] ** 2
            rec["tail"] = {"sigma": [float(np.median(pooled["sigma"][order])), float(np.median(pooled["sigma"]))],
                           "s2hat_ratio": [float(np.median(ratio[order])), float(np.median(ratio))],
                           "smallest_eig": [float(np.median(pooled["s"][order, 0])), float(np.median(pooled["s"][:, 0]))]}
        if key == "constrr":
            rec["lambda"] = [float(x) for x in prms]
        elif key == "tunedrr":
            rec["scale"] = [c for c, _ in prms]
            rec["clip"] = [m if math.isfinite(m) else None for _, m in prms]
        out[key] = rec
    out["oracle_half_mse"] = float(0.5 * e_or.mean())
    out["seconds"] = time.perf_counter() - t0
    return out


# ====================================================================== models

#: a model run that diverges (no finite adjusted loss) is retrained at this fraction of its learning rate,
#: at most ``RETRIES`` times, the same rule for every cell; the result records the failed attempts.
#: Measured: at lr 3e-3 the 6- and 7-layer Full models diverged within their first 200 steps (1,830 and
#: 1,928 of 2,000 steps with a non-finite loss), and the 7-layer one again at 1e-3 (1,788)
