"""Seed 004 Table 1: linear transformers and ridge baselines under mixed noise variance (Sec. 6).

Data (seed 004 Sec. 2.2-2.3): d = 10, n = 20; per sequence
``w ~ N(0, I)``, ``x_i ~ N(0, I)``, ``y_i = <w, x_i> + sigma_tau xi_i`` with ``sigma_tau`` drawn
once per sequence, uniform on [0, sigma_max] (columns ``"0"`` .. ``"7"``) or uniformly from a set
(``"{1,3}"``, ``"{1,3,5}"``; equal probabilities, the paper does not state them); the query
``x_t ~ N(0, I)`` has the noise-free target ``y_t = <w, x_t>``.

Metric: the *adjusted* loss, the predictor's loss minus the oracle's on the same sequences, in the
1/2 MSE convention (``0.5 E[(yhat - y_t)^2]``; the convention is inferred: with it our ConstRR
matches the paper's column by column, with the plain MSE it is twice the paper's).  The oracle is
ridge with the true ``sigma_tau``: ``w = (Sigma + sigma_tau^2 I)^{-1} alpha`` (eq. (5), raw sums).

Baselines, exact per sequence (one eigendecomposition of ``Sigma`` per sequence, then any ridge
parameter costs O(d)): **ConstRR** one lambda for all sequences (tuned on a separate tuning set:
a log grid, then golden-section refinement); **AdaRR** ``lambda = sigma_hat^2 = RSS_OLS / (n - d)``
(unbiased estimator); **TunedRR** ``lambda = min(c sigma_hat^2, m)`` with the scale c and the clip
m tuned on the tuning set (the order of clip and scale does not matter: ``c min(s, m) = min(cs, cm)``
is the same family).  The paper tunes on the evaluation loss; we tune on a separate set of the same
size, in ``BASELINE_DRAWS`` independent draws of (tuning set, evaluation set) per column: each baseline
is evaluated on the pooled evaluation sets, its value the mean over the draws' tunings, its standard
error counting the tuning sets' noise beside the evaluation's (:func:`baselines_cell`).

Criteria: the baselines within 10% of
Table 1; the 1-layer models equal within 2%; at L = 3, sigma_max = 5, Diag and Full at about a third
of GD++'s loss or below (Table 1's ratios there are 0.343 and 0.340; ``THIRD_BOUND``).  ``STUDY``
trains Full at L = 3, sigma_max = 3 again with one thing changed at a time (evaluation size, steps,
batch, learning rate, initialisation, seed), to find why Full is the weakest model.

Models: single-head linear transformers in token form, Full / Diag / GD++
(:class:`numerics.training.token_lsa.TokenLinearTransformer`), trained by Adam on fresh batches
with a recipe of our own (the paper's 200k steps at lr 1e-4, batch 2048, best of 5 seeds, are 4-12
GPU hours per model): a warm start at the toolkit's exact GD++ layer (``s004-gdpp``:
``(p_x, p_y, q_x, q_y) = (-gamma, -eta, 1, 0)``) plus Gaussian noise on every free parameter,
linear warm-up then cosine decay of the learning rate, gradient-norm clipping, a step with a
non-finite loss skipped.  Naive settings, measured before this recipe: Diag/Full stuck at
the GD++ level (0.38 after 1,500 steps at lr 1e-2) or diverging with a larger initialisation.
"""
from __future__ import annotations

import math
import time

import numpy as np

from polyverify.options import CellConfig, cell_config, non_negative, one_of, option, positive

from .common import fmt, rows_ok, std_err, timing_line, verdict

NAME = "seed004-table1"
TITLE = "Seed 004, Table 1: mixed noise variance (linear transformers vs ridge baselines)"
REFERENCE = "seed 004 (Vladymyrov et al.), Sec. 6, Table 1"

N, D = 20, 10
COLUMNS = ["0", "1", "2", "3", "4", "5", "6", "7", "{1,3}", "{1,3,5}"]
VARIANTS = ("gdpp", "diag", "full")
LABEL = {"gdpp": "GD++", "diag": "Diag", "full": "Full", "constrr": "ConstRR", "adarr": "AdaRR",
         "tunedrr": "TunedRR"}

#: seed 004 Table 1 as printed (adjusted evaluation loss; columns as ``COLUMNS``), quoted from the
#: paper
PAPER = {
    "gdpp": {1: [1.768, 1.639, 1.396, 1.175, 1.015, 0.907, 0.841, 0.806, 1.007, 0.819],
             2: [0.341, 0.295, 0.243, 0.265, 0.347, 0.366, 0.440, 0.530, 0.305, 0.427],
             3: [0.019, 0.021, 0.071, 0.161, 0.259, 0.344, 0.454, 0.530, 0.222, 0.422],
             4: [9.91e-05, 0.014, 0.066, 0.160, 0.258, 0.344, 0.454, 0.530, 0.222, 0.422],
             5: [1.14e-07, 0.014, 0.066, 0.161, 0.265, 0.344, 0.454, 0.530, 0.222, 0.422],
             6: [2.37e-10, 0.009, 0.066, 0.161, 0.265, 0.344, 0.454, 0.530, 0.222, 0.422],
             7: [2.65e-12, 0.009, 0.066, 0.161, 0.265, 0.344, 0.454, 0.530, 0.222, 0.422]},
    "diag": {1: [1.767, 1.639, 1.396, 1.175, 1.015, 0.906, 0.841, 0.806, 1.007, 0.819],
             2: [0.265, 0.214, 0.173, 0.188, 0.219, 0.242, 0.254, 0.259, 0.201, 0.246],
             3: [0.013, 0.015, 0.048, 0.087, 0.109, 0.118, 0.121, 0.123, 0.098, 0.119],
             4: [1.19e-04, 0.006, 0.024, 0.041, 0.050, 0.059, 0.065, 0.073, 0.043, 0.062],
             5: [1.81e-07, 0.004, 0.016, 0.029, 0.041, 0.051, 0.058, 0.062, 0.026, 0.051],
             6: [2.57e-10, 0.003, 0.014, 0.028, 0.040, 0.048, 0.054, 0.059, 0.020, 0.047],
             7: [2.50e-12, 0.002, 0.014, 0.027, 0.040, 0.047, 0.052, 0.059, 0.018, 0.046]},
    "full": {1: [1.768, 1.640, 1.397, 1.176, 1.016, 0.907, 0.842, 0.806, 1.008, 0.820],
             2: [0.264, 0.215, 0.173, 0.188, 0.220, 0.245, 0.259, 0.263, 0.202, 0.276],
             3: [0.012, 0.015, 0.049, 0.075, 0.101, 0.117, 0.124, 0.127, 0.076, 0.113],
             4: [1.63e-04, 0.005, 0.021, 0.038, 0.052, 0.065, 0.068, 0.076, 0.032, 0.061],
             5: [1.79e-07, 0.002, 0.015, 0.026, 0.038, 0.048, 0.059, 0.065, 0.016, 0.048],
             6: [2.71e-10, 0.002, 0.014, 0.025, 0.036, 0.044, 0.052, 0.059, 0.011, 0.043],
             7: [2.50e-12, 0.002, 0.010, 0.025, 0.035, 0.047, 0.050, 0.057, 0.010, 0.035]},
    "constrr": [0, 0.009, 0.066, 0.161, 0.265, 0.365, 0.454, 0.530, 0.222, 0.422],
    "adarr": [0, 0.003, 0.016, 0.034, 0.053, 0.068, 0.081, 0.092, 0.051, 0.084],
    "tunedrr": [0, 0.002, 0.010, 0.023, 0.037, 0.049, 0.060, 0.068, 0.021, 0.054],
}

#: the training recipe of the model cells (per-cell overrides in the config)
RECIPE = {"batch": 512, "lr": 3e-3, "warmup": 0.05, "clip": 1.0, "warm": "gdpp", "eta": 0.02, "gamma": 0.005}
INIT_STD = {"gdpp": 0.01, "diag": 0.01, "full": 0.001}


# ====================================================================== the cells' configs

_N = (positive, ">= 1")
_SEED = (non_negative, ">= 0")


@cell_config
class BaselinesCell(CellConfig):
    """A ``baselines`` cell: ConstRR, AdaRR and TunedRR on one column, from ``draws`` pairs (tuning
    set of ``tune``, evaluation set of ``eval`` sequences) drawn with ``seed``."""
    kind: str = option("baselines", choices=("baselines",))
    column: str = option(choices=COLUMNS)
    eval: int = option(check=_N)
    tune: int = option(check=_N)
    draws: int = option(1, check=_N)
    seed: int = option(0, check=_SEED)


@cell_config
class ModelCell(CellConfig):
    """A ``model`` cell: one variant x layers x column trained ``steps`` steps (seed ``seed``), monitored
    on ``monitor`` sequences and evaluated on ``eval`` (drawn with ``eval_seed``); the recipe's settings
    are ``RECIPE``'s unless the config sets them (``init_std``: ``INIT_STD`` of the variant); ``study``:
    the label of a study cell (``STUDY``)."""
    kind: str = option("model", choices=("model",))
    variant: str = option(choices=VARIANTS)
    layers: int = option(check=_N)
    column: str = option(choices=COLUMNS)
    steps: int = option(check=_N)
    eval: int = option(check=_N)
    monitor: int = option(4096, check=_N)
    seed: int = option(0, check=_SEED)
    eval_seed: int = option(0, check=_SEED)
    study: str | None = None
    batch: int = option(RECIPE["batch"], check=_N)
    lr: float = option(RECIPE["lr"], check=(lambda x: x > 0, "> 0"))
    warmup: float = option(RECIPE["warmup"], check=(lambda x: 0 <= x <= 1, "in [0, 1]"))
    clip: float = option(RECIPE["clip"], check=(lambda x: x > 0, "> 0"))
    warm: str = RECIPE["warm"]
    eta: float = RECIPE["eta"]
    gamma: float = RECIPE["gamma"]
    init_std: float | None = option(None, check=(non_negative, ">= 0"))

    def recipe(self) -> dict:
        """The training recipe: ``RECIPE``'s keys and ``init_std``, as this config sets them."""
        return {**{k: getattr(self, k) for k in RECIPE},
                "init_std": INIT_STD[self.variant] if self.init_std is None else self.init_std}


KINDS = {"baselines": BaselinesCell, "model": ModelCell}


def config_of(config: dict, where: str = "cell") -> BaselinesCell | ModelCell:
    return one_of(config, "kind", KINDS, where=where)


# ====================================================================== data

def _rng(*key) -> np.random.Generator:
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
    rng = _rng("seed004", which, column, seed)
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


def _draw_name(which: str, r: int) -> str:
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
    evals = [_lean(problem_set(col, n_eval, _draw_name("eval", r), seed)) for r in range(K)]
    params = {"constrr": [], "tunedrr": []}
    for r in range(K):
        tune = _lean(problem_set(col, n_tune, _draw_name("tune", r), seed))
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
RETRY_LR_FACTOR = 1 / 3
RETRIES = 2


def model_cell(cfg: ModelCell) -> dict:
    """Train one model (``_train_model``); while it diverges, again at ``RETRY_LR_FACTOR`` x the last lr
    (at most ``RETRIES`` times)."""
    rc = cfg.recipe()
    failed = []
    res = _train_model(cfg, rc)
    while not math.isfinite(res["adjusted"]) and len(failed) < RETRIES:
        failed.append({"lr": res["recipe"]["lr"], "skipped": res["skipped"], "train_seconds": res["train_seconds"]})
        res = _train_model(cfg, {**rc, "lr": res["recipe"]["lr"] * RETRY_LR_FACTOR})
    if failed:
        res["diverged"] = failed
        res["train_seconds"] += sum(f["train_seconds"] for f in failed)
    return res


def _train_model(cfg: ModelCell, rc: dict) -> dict:
    import torch

    from numerics.training.token_lsa import TokenLinearTransformer, tokens_torch

    col, variant, L = cfg.column, cfg.variant, cfg.layers
    seed, steps = cfg.seed, cfg.steps
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = TokenLinearTransformer(D, L, variant, warm=rc["warm"], eta=rc["eta"], gamma=rc["gamma"],
                                   init_std=rc["init_std"], seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=rc["lr"])
    mon = problem_set(col, cfg.monitor, "monitor", seed)

    def predict(ps, chunk=25_000):
        with torch.no_grad():
            return np.concatenate([model.predict(tokens_torch(ps["X"][i:i + chunk], ps["y"][i:i + chunk],
                                                              ps["xt"][i:i + chunk])).numpy()
                                   for i in range(0, len(ps["yt"]), chunk)])

    warm_steps = max(1, int(rc["warmup"] * steps))
    curve, skipped, recent = [], 0, []
    every = max(1, steps // 10)
    for step in range(steps):
        lr = rc["lr"] * min(1.0, (step + 1) / warm_steps) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for g in opt.param_groups:
            g["lr"] = lr
        b = sample(rc["batch"], col, _rng("seed004", "train", col, seed, step))
        E = tokens_torch(b["X"], b["y"], b["xt"])
        loss = 0.5 * torch.mean((model.predict(E) - torch.as_tensor(b["yt"])) ** 2)
        opt.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            skipped += 1
            continue
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), rc["clip"])
        opt.step()
        recent.append(float(loss.detach()))
        if (step + 1) % every == 0 or step + 1 == steps:
            curve.append({"step": step + 1, "train_half_mse": float(np.mean(recent)),
                          "monitor_adjusted": adjusted(predict(mon), mon)[0]})
            recent = []
    train_s = time.perf_counter() - t0
    # every model of a column is evaluated on the same set (the first draw of the baselines' when as large),
    # whatever its training seed
    ev = problem_set(col, cfg.eval, "eval", cfg.eval_seed)
    pred = predict(ev)
    adj, se, orc = adjusted(pred, ev)
    diff = 0.5 * ((pred - ev["yt"]) ** 2 - (ridge(ev, ev["sigma"] ** 2) - ev["yt"]) ** 2)
    # the evaluation set's size: the same loss on five disjoint fifths, and the share of the mean that its
    # largest 0.1% of sequences carry (the per-sequence loss of a degree-3^L polynomial is heavy-tailed)
    fifths = [float(x.mean()) for x in np.array_split(diff, 5)] if len(diff) >= 5 else []
    top = np.sort(diff)[::-1][:max(1, len(diff) // 1000)]
    tail = float(top.sum() / diff.sum()) if np.isfinite(diff).all() and diff.sum() > 0 else None
    with torch.no_grad():
        weights = ({"P": model.P.numpy().tolist(), "Q": model.Q.numpy().tolist()} if variant == "full"
                   else {"theta": model.theta.numpy().tolist()})
    return {"kind": "model", "variant": variant, "layers": L, "column": col, "adjusted": adj, "se": se,
            "oracle_half_mse": orc, "steps": steps, "skipped": skipped, "curve": curve,
            "omegas": model.omegas(), "weights": weights, "recipe": rc, "train_seconds": train_s,
            "eval_fifths": fifths, "tail_share": tail, "study": cfg.study}


def model_from_result(res: dict):
    """The trained :class:`TokenLinearTransformer` of a model cell's result (for export)."""
    import torch

    from numerics.training.token_lsa import TokenLinearTransformer

    m = TokenLinearTransformer(D, res["layers"], res["variant"], warm="none", init_std=0.0)
    with torch.no_grad():
        for k, v in res["weights"].items():
            getattr(m, k).copy_(torch.tensor(v, dtype=torch.float64))
    return m


def cell(config: dict) -> dict:
    """One Table 1 cell: ``kind`` ``baselines`` (one column: ConstRR, AdaRR, TunedRR) or ``model``
    (one variant x layers x column, trained then evaluated)."""
    c = config_of(config)
    return baselines_cell(c) if c.kind == "baselines" else model_cell(c)


# ====================================================================== the grid

#: the model grid of the full run: layers -> (columns, steps)
FULL_MODELS = {1: (["0", "3", "5", "{1,3}"], 400), 2: (["3", "5"], 1000), 3: (["3", "5"], 2000), 4: (["5"], 2000),
               5: (["5"], 2000), 6: (["5"], 2000), 7: (["5"], 2000)}
#: independent (tuning set, evaluation set) draws per baseline column, each of 100,000 sequences
#: (``baselines_cell``): the tuning set's noise enters the standard error; the pooled evaluation is 4x
#: the paper's
BASELINE_DRAWS = 4
#: evaluation sequences per model cell (the baselines use 100,000 per draw, as the paper, seed 004 Sec. 6);
#: the study's "eval x5" row measures what the paper's size changes
MODEL_EVAL = 20_000
#: why Full is the weakest model: Full at L = 3, sigma_max = 3 (the grid's cell: STUDY_BASE) trained again
#: with one thing changed at a time (label, overrides); each evaluated on the grid's evaluation set
STUDY_BASE = {"variant": "full", "layers": 3, "column": "3"}
STUDY = [("evaluated on 100,000 (the paper's size)", {"eval": 100_000}), ("steps x2", {"steps": 4000}),
         ("batch x4 (2048, the paper's)", {"batch": 2048}), ("lr / 3", {"lr": 1e-3}), ("init std x10", {"init_std": 0.01}),
         ("seed 1", {"seed": 1}), ("seed 2", {"seed": 2})]


def configs(quick: bool) -> list[dict]:
    if quick:
        out = [{"kind": "baselines", "column": c, "eval": 500, "tune": 500, "draws": 2} for c in ("0", "5")]
        out += [{"kind": "model", "variant": v, "layers": 1, "column": "5", "steps": 10, "eval": 500,
                 "monitor": 256, "batch": 64} for v in VARIANTS]
        out += [{"kind": "model", "variant": "full", "layers": 2, "column": "{1,3}", "steps": 8, "eval": 500,
                 "monitor": 256, "batch": 64}]
        out += [{"kind": "model", "variant": "full", "layers": 1, "column": "5", "steps": 10, "eval": 500,
                 "monitor": 256, "batch": 64, "seed": 1, "study": "seed 1"}]
        return out
    out = [{"kind": "baselines", "column": c, "eval": 100_000, "tune": 100_000, "draws": BASELINE_DRAWS}
           for c in COLUMNS]
    base = {"kind": "model", **STUDY_BASE, "steps": FULL_MODELS[STUDY_BASE["layers"]][1], "eval": MODEL_EVAL,
            "monitor": 2048}
    for L, (cols, steps) in FULL_MODELS.items():
        out += [{"kind": "model", "variant": v, "layers": L, "column": c, "steps": steps, "eval": MODEL_EVAL,
                 "monitor": 2048}
                for c in cols for v in VARIANTS]
        if L == STUDY_BASE["layers"]:  # the study before the deeper (slower) cells
            out += [{**base, **over, "study": label} for label, over in STUDY]
    return out


# ====================================================================== summary

def summarise(rows, quick: bool) -> dict:
    ok = rows_ok(rows)
    cs = [config_of(r["config"], where=f"record {r.get('id', i)}") for i, r in enumerate(ok)]
    base = {r["result"]["column"]: r["result"] for r in ok if r["result"]["kind"] == "baselines"}
    models, study = {}, []
    for r, c in zip(ok, cs):
        res = r["result"]
        if res["kind"] == "model":
            rec = {k: res[k] for k in ("adjusted", "se", "steps", "skipped", "omegas", "oracle_half_mse", "curve")} | {
                "cpu_s": r.get("cpu_s"), "recipe": res["recipe"], "diverged": res.get("diverged"),
                "eval_fifths": res.get("eval_fifths"), "tail_share": res.get("tail_share"), "eval": c.eval}
            if c.study:
                study.append(rec | {"study": c.study, "variant": res["variant"], "layers": res["layers"],
                                    "column": res["column"], "seed": c.seed, "batch": res["recipe"]["batch"]})
            else:
                models.setdefault(res["variant"], {}).setdefault(str(res["layers"]), {})[res["column"]] = rec
    cpu = {"baselines": sum(r.get("cpu_s", 0) for r in ok if r["result"]["kind"] == "baselines"),
           "models": sum(r.get("cpu_s", 0) for r in ok if r["result"]["kind"] == "model")}
    bases = [c for c in cs if c.kind == "baselines"]
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "columns": COLUMNS,
         "paper": PAPER, "baselines": base, "models": models, "study": study, "cpu_by_kind": cpu,
         "config": {"n": N, "d": D, "recipe": RECIPE, "init_std": INIT_STD,
                    "eval": sorted({c.eval for c in cs}),
                    "baseline_eval": sorted({c.eval for c in bases}),
                    "baseline_draws": sorted({c.draws for c in bases}),
                    "model_eval": sorted({c.eval for c in cs if c.kind == "model"}),
                    "grid": {"models": {str(L): {"columns": cols, "steps": st} for L, (cols, st) in FULL_MODELS.items()}}
                    if not quick else "quick"}}
    s["criteria"] = criteria(s)
    return s


def _paper_model(variant, L, col):
    return PAPER[variant][int(L)][COLUMNS.index(col)]


#: the paper's training sequences per model (seed 004 Sec. 6: 200,000 Adam steps at batch 2048)
PAPER_TRAIN_SEQUENCES = 200_000 * 2048
#: the third criterion's bound on Diag's and Full's adjusted loss over GD++'s at L = 3, sigma_max = 5: one
#: third, as in seed 004 Table 1 (Diag 0.118, Full 0.117 over GD++ 0.344: ratios 0.343 and 0.340), with
#: the 10% tolerance of the baseline criterion (the paper's own ratios are 3% above one third)
THIRD_BOUND = 1.1 / 3


def criteria(s: dict) -> list[dict]:
    out = []
    # 1. the three baselines within 10% of Table 1 in every column
    checks = []
    for col, b in s["baselines"].items():
        for key in ("constrr", "adarr", "tunedrr"):
            p = PAPER[key][COLUMNS.index(col)]
            ours = b[key]["adjusted"]
            within = abs(ours) <= 1e-4 if p == 0 else abs(ours - p) <= 0.1 * p
            # the paper prints 3 decimals: its value stands for [p - 0.0005, p + 0.0005]
            within_printed = abs(ours) <= 1e-4 if p == 0 else abs(ours - p) <= 0.1 * p + 0.0005
            se = b[key].get("se")
            # the paper prints no standard error: its value is one draw of the single-draw protocol (one
            # tuning, one evaluation set of 100,000), whose standard error is our se_one (tuning and
            # evaluation noise of one draw); results without it: the paper's taken equal to ours
            se_p = b[key].get("se_one", se)
            checks.append({"column": col, "baseline": key, "ours": ours, "se": se, "se_paper": se_p, "paper": p,
                           "z_diff": (ours - p) / math.sqrt(se ** 2 + se_p ** 2) if se else None,
                           "within_10pct": within,
                           "within_10pct_of_printed": within_printed})
    out.append({"id": "baselines-10pct", "text": "ConstRR, AdaRR and TunedRR within 10% of Table 1 in every column",
                "met": all(c["within_10pct"] for c in checks) if checks else None,
                "met_allowing_rounding": all(c["within_10pct_of_printed"] for c in checks) if checks else None,
                "columns": len(s["baselines"]), "misses": [c for c in checks if not c["within_10pct"]]})
    # 2. the 1-layer models equal within 2%
    one = {v: s["models"].get(v, {}).get("1", {}) for v in VARIANTS}
    cols = [c for c in COLUMNS if all(c in one[v] for v in VARIANTS)]
    spreads = []
    for c in cols:
        vals = [one[v][c]["adjusted"] for v in VARIANTS]
        spreads.append({"column": c, "spread": max(vals) / min(vals) - 1 if min(vals) > 0 else math.inf,
                        **{v: one[v][c]["adjusted"] for v in VARIANTS}})
    out.append({"id": "one-layer-equal", "text": "the 1-layer GD++, Diag and Full models equal within 2% (same function class)",
                "met": all(x["spread"] <= 0.02 for x in spreads) if spreads else None, "columns": spreads})
    # 3. L=3, sigma_max=5: Diag and Full at most a third of GD++ (the paper's Table 1 ratios)
    m3 = {v: s["models"].get(v, {}).get("3", {}).get("5") for v in VARIANTS}
    if all(m3.values()):
        g = m3["gdpp"]["adjusted"]
        ratios = {v: m3[v]["adjusted"] / g for v in ("diag", "full")}
        met = all(r <= THIRD_BOUND for r in ratios.values())
    else:
        ratios, met = {}, None
    out.append({"id": "l3-s5-third",
                "text": f"at L = 3, sigma_max = 5, Diag and Full at about a third of GD++'s adjusted loss or below "
                        f"(ratio at most {fmt(THIRD_BOUND)}: one third with the baselines' 10% tolerance)",
                "met": met, "ratios": ratios, "bound": THIRD_BOUND,
                "paper_ratios": {v: _paper_model(v, 3, "5") / _paper_model("gdpp", 3, "5") for v in ("diag", "full")}})
    return out


def table(s: dict) -> list[dict]:
    rows = []
    for col, b in s["baselines"].items():
        for key in ("constrr", "adarr", "tunedrr"):
            p = PAPER[key][COLUMNS.index(col)]
            rows.append({"method": LABEL[key], "layers": "", "column": col, "ours": b[key]["adjusted"],
                         "se": b[key]["se"], "paper": p, "ratio": b[key]["adjusted"] / p if p else None})
    for v, per_l in s["models"].items():
        for L, per_c in per_l.items():
            for col, m in per_c.items():
                p = _paper_model(v, L, col)
                rows.append({"method": LABEL[v], "layers": int(L), "column": col, "ours": m["adjusted"], "se": m["se"],
                             "paper": p, "ratio": m["adjusted"] / p, "steps": m["steps"], "cpu_s": m["cpu_s"]})
    return rows


def _segments(idx: list[int]) -> list[list[int]]:
    """Column indices split where a line must not be drawn: between columns that are not neighbours (a
    column not run lies between) and between the uniform columns (0..7) and the categorical sets."""
    n_uniform = sum(1 for c in COLUMNS if not c.startswith("{"))
    out: list[list[int]] = []
    for i in sorted(idx):
        if out and i == out[-1][-1] + 1 and (i < n_uniform) == (out[-1][-1] < n_uniform):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _plot_columns(ax, idx: list[int], ys: list[float], fmt_: str, *, label: str, **kw) -> None:
    """``ys`` at the column indices ``idx``, a line only within :func:`_segments` (a lone column: a marker)."""
    y = dict(zip(idx, ys))
    for j, seg in enumerate(_segments(idx)):
        ax.plot(seg, [y[i] for i in seg], fmt_, label=label if j == 0 else None, **kw)


#: the columns whose depth series get a panel of the figure
DEPTH_PANELS = ("5", "3")


def plot(s: dict):
    """Four panels: the ridge baselines, the 1-layer models and the depth at sigma_max = 5 and 3, ours (o, solid)
    beside the paper (x, dashed).  Lines join only neighbouring columns that were run, and never the uniform
    columns to the categorical sets: a column not run here shows the paper's marker alone."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 + len(DEPTH_PANELS), figsize=(18, 4.6))
    x = np.arange(len(COLUMNS))
    colors = {"constrr": "C0", "adarr": "C1", "tunedrr": "C2", "gdpp": "C3", "diag": "C4", "full": "C5"}
    ax = axes[0]
    for key in ("constrr", "adarr", "tunedrr"):
        got = {i: s["baselines"][c][key]["adjusted"] for i, c in enumerate(COLUMNS)
               if key in s["baselines"].get(c, {})}
        _plot_columns(ax, list(got), list(got.values()), "o-", color=colors[key], label=f"{LABEL[key]} (ours)")
        _plot_columns(ax, list(x), list(PAPER[key]), "x--", color=colors[key], alpha=0.7, label=f"{LABEL[key]} (paper)")
    ax.set_title("ridge baselines", fontsize=10)
    ax = axes[1]
    for v in VARIANTS:
        got = s["models"].get(v, {}).get("1", {})
        xs = [i for i, c in enumerate(COLUMNS) if c in got]
        _plot_columns(ax, xs, [got[COLUMNS[i]]["adjusted"] for i in xs], "o-", color=colors[v], label=f"{LABEL[v]} (ours)")
        _plot_columns(ax, list(x), list(PAPER[v][1]), "x--", color=colors[v], alpha=0.6, label=f"{LABEL[v]} (paper)")
    ax.set_title("1-layer linear transformers (ours: the columns run)", fontsize=10)
    layers = np.arange(1, 8)
    for ax, column in zip(axes[2:], DEPTH_PANELS):
        for v, ser in depth_series(s, column).items():
            if ser:
                ax.plot([L_ for L_, _, _ in ser], [o for _, o, _ in ser], "o-", color=colors[v], label=f"{LABEL[v]} (ours)")
            ax.plot(layers, [_paper_model(v, L_, column) for L_ in layers], "x--", color=colors[v], alpha=0.6,
                    label=f"{LABEL[v]} (paper)")
        i = COLUMNS.index(column)
        b = s["baselines"].get(column, {}).get("constrr", {}).get("adjusted")
        if b is not None:
            ax.axhline(b, ls=":", color=colors["constrr"], label="ConstRR (ours)")
        ax.axhline(PAPER["constrr"][i], ls=":", color="gray", label="ConstRR (paper)")
        ax.set_title(f"depth at sigma_max = {column} (ours: the depths run)", fontsize=10)
        ax.set_xticks(layers)
        ax.set_xlabel("layers L")
    for ax in axes[:2]:
        ax.set_xticks(x, COLUMNS, fontsize=8)
        ax.set_xlabel("sigma_max (uniform) / categorical set")
    for ax in axes:
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, ncol=2)
    axes[0].set_ylabel("adjusted loss (1/2 MSE minus oracle)")
    fig.suptitle("Seed 004 Table 1: ours (o, solid) vs the paper (x, dashed)" + (" [--quick]" if s["quick"] else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


# ====================================================================== report

def depth_series(s: dict, column: str = "5") -> dict:
    """Per variant, the adjusted loss at ``column`` for every trained depth: ``{variant: [(L, ours, paper)]}``."""
    out = {}
    for v in VARIANTS:
        got = s["models"].get(v, {})
        out[v] = [(int(L_), got[L_][column]["adjusted"], _paper_model(v, L_, column))
                  for L_ in sorted(got, key=int) if column in got[L_]]
    return out


def _depth_paragraph(s: dict, column: str = "5") -> list[str]:
    """What depth does at ``column`` (the paper: GD++ stops at ConstRR's loss from L = 3 on, Diag and Full
    keep improving): our numbers beside the paper's, and whether ours show the same."""
    ser = depth_series(s, column)
    if not all(sum(L_ >= 3 for L_, _, _ in x) >= 2 for x in ser.values()):
        return []  # needs at least two depths past L = 3 for every variant
    b = s["baselines"].get(column, {}).get("constrr", {}).get("adjusted")
    i = COLUMNS.index(column)
    L = [f"**Depth at sigma_max = {column}** (ours / paper; ConstRR here {fmt(b)}, paper {fmt(PAPER['constrr'][i])}):", ""]
    depths = sorted({L_ for x in ser.values() for L_, _, _ in x})
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        got = {L_: o for L_, o, _ in ser[v]}
        L.append(f"| {LABEL[v]} | " + " | ".join(f"{fmt(got.get(L_))} / {fmt(_paper_model(v, L_, column))}"
                                                for L_ in depths) + " |")
    L.append("")
    deep = {v: [(L_, o) for L_, o, _ in ser[v] if L_ >= 3] for v in VARIANTS}
    paper_g = sorted({round(_paper_model("gdpp", L_, column), 6) for L_ in range(3, 8)})
    notes = []
    g = deep["gdpp"]
    if g:
        lo, hi = min(o for _, o in g), max(o for _, o in g)
        flat = hi <= 1.1 * lo
        notes.append(f"GD++ from L = {g[0][0]} to {g[-1][0]} stays "
                     + (f"at {fmt(lo)} " if fmt(lo) == fmt(hi) else f"between {fmt(lo)} and {fmt(hi)} ")
                     + f"(spread {fmt(100 * (hi / lo - 1), 2)}%; ConstRR {fmt(b)}): "
                     + ("flat within 10%, the paper's plateau (" if flat else "not flat within 10%, unlike the paper's plateau (")
                     + f"{' to '.join(fmt(x) for x in paper_g)} at L = 3..7 there)")
    for v in ("diag", "full"):
        d = deep[v]
        if len(d) >= 2:
            best = min(d, key=lambda x: x[1])
            falls = all(x[1] > y[1] for x, y in zip(d, d[1:]))
            notes.append(f"{LABEL[v]} {'falls at every added layer' if falls else 'does not fall at every added layer'}"
                         f" (best {fmt(best[1])} at L = {best[0]}, {fmt(best[1] / g[-1][1])}x GD++ at L = {g[-1][0]}; "
                         f"paper {fmt(_paper_model(v, 7, column))} at L = 7"
                         + (f"; L = {', '.join(map(str, retried))} trained at a smaller learning rate after diverging, "
                            "see Configuration" if (retried := [L_ for L_, _ in d if s["models"][v][str(L_)][column].get(
                                "diverged")]) else "")
                         + ")")
    steps = sorted({s["models"][v][str(L_)][column]["steps"] for v in VARIANTS for L_, _ in deep[v]})
    L.append("; ".join(notes) + f". Every cell of L >= 3 is trained for {' or '.join(map(str, steps))} steps with the "
             "recipe below (the paper: 200,000), so at large L the gap to the paper is the training budget's as "
             "much as the model's.")
    L.append("")
    return L


def _pct(x: float) -> str:
    """A relative difference as a signed percentage."""
    return f"{'+' if x >= 0 else ''}{fmt(100 * x, 2)}%"


def _column_paragraph(s: dict, column: str = "3", depths=(1, 2, 3)) -> list[str]:
    """The models at ``column`` for ``depths`` (ours / paper and the ratio), and how their order compares
    with the paper's at the deepest of them; [] until every variant has every depth there."""
    got = {v: {L_: s["models"].get(v, {}).get(str(L_), {}).get(column) for L_ in depths} for v in VARIANTS}
    if not all(m for per in got.values() for m in per.values()):
        return []
    b = s["baselines"].get(column, {})
    i = COLUMNS.index(column)
    L = [f"**The sigma_max = {column} column** (ours / paper, our ratio to the paper in brackets; ConstRR here "
         f"{fmt(b.get('constrr', {}).get('adjusted'))}, paper {fmt(PAPER['constrr'][i])}; TunedRR "
         f"{fmt(b.get('tunedrr', {}).get('adjusted'))}, paper {fmt(PAPER['tunedrr'][i])}):", ""]
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        L.append(f"| {LABEL[v]} | " + " | ".join(
            f"{fmt(got[v][L_]['adjusted'])} / {fmt(_paper_model(v, L_, column))} "
            f"({fmt(got[v][L_]['adjusted'] / _paper_model(v, L_, column))})" for L_ in depths) + " |")
    L.append("")
    deep = depths[-1]
    ours = sorted(VARIANTS, key=lambda v: got[v][deep]["adjusted"])
    paper = sorted(VARIANTS, key=lambda v: _paper_model(v, deep, column))
    worst = max(VARIANTS, key=lambda v: got[v][deep]["adjusted"] / _paper_model(v, deep, column))
    m = got[worst][deep]
    L.append(f"At L = {deep} ours rank {' < '.join(LABEL[v] for v in ours)}, the paper "
             f"{' < '.join(LABEL[v] for v in paper)}"
             + (" (the same order)" if ours == paper else "")
             + f"; the model furthest above the paper is {LABEL[worst]}, {_pct(m['adjusted'] / _paper_model(worst, deep, column) - 1)} "
             f"({fmt(m['adjusted'])}, standard error {fmt(m['se'], 2)}).")
    L.append("")
    return L


def _study_paragraph(s: dict) -> list[str]:
    """Why Full is the weakest model: the study's runs (one change at a time) beside the grid's run, and
    what the numbers say (computed); [] without them."""
    st = s.get("study") or []
    b = STUDY_BASE
    ref = s["models"].get(b["variant"], {}).get(str(b["layers"]), {}).get(b["column"])
    if not st or not ref:
        return []
    p = _paper_model(b["variant"], b["layers"], b["column"])
    dg = s["models"].get("diag", {}).get(str(b["layers"]), {}).get(b["column"])
    L = [f"**Why Full is the weakest model** ({LABEL[b['variant']]}, L = {b['layers']}, sigma_max = {b['column']}: "
         f"the grid's run {fmt(ref['adjusted'])} (standard error {fmt(ref['se'], 2)}), {_pct(ref['adjusted'] / p - 1)} "
         f"against the paper's {fmt(p)}"
         + (f"; Diag {fmt(dg['adjusted'])}, {_pct(dg['adjusted'] / _paper_model('diag', b['layers'], b['column']) - 1)}"
            if dg else "")
         + f"). The same run again with one thing changed, each evaluated on the grid's {fmt(ref.get('eval'))} "
         "sequences unless the row says otherwise:", ""]
    L.append("| change | steps | batch | lr | adjusted loss | vs the grid's run | vs the paper |")
    L.append("|---|---|---|---|---|---|---|")
    rows = [("none (the grid's run)", ref)] + [(x["study"], x) for x in st]
    for lab, x in rows:
        L.append(f"| {lab} | {x['steps']} | {x['recipe']['batch']} | {fmt(x['recipe']['lr'])} | {fmt(x['adjusted'])} "
                 f"+- {fmt(x['se'], 2)} | {_pct(x['adjusted'] / ref['adjusted'] - 1)} | {_pct(x['adjusted'] / p - 1)} |")
    L.append("")
    notes = []
    seeds = [ref] + [x for x in st if x["study"].startswith("seed")]
    if len(seeds) > 1:
        lo, hi = min(x["adjusted"] for x in seeds), max(x["adjusted"] for x in seeds)
        notes.append(f"The training seed alone moves it by {fmt(100 * (hi / lo - 1), 2)}% ({fmt(lo)} to {fmt(hi)} over "
                     f"{len(seeds)} seeds; the best, {_pct(lo / p - 1)} against the paper, which reports the best of 5)")
    else:
        hi = lo = ref["adjusted"]
    spread = hi / lo - 1
    evals = [x for x in st if x.get("eval") != ref.get("eval")]
    others = [x for x in st if not x["study"].startswith("seed") and x not in evals]
    if others:
        best = min(others, key=lambda x: x["adjusted"])
        gain = 1 - best["adjusted"] / ref["adjusted"]
        beyond = [x["study"] for x in others if 1 - x["adjusted"] / ref["adjusted"] > spread]
        notes.append(f"the largest gain of one change to the training is {fmt(100 * gain, 2)}% ({best['study']}, still "
                     f"{_pct(best['adjusted'] / p - 1)} against the paper); "
                     + (f"beyond the seeds' spread: {', '.join(beyond)}" if beyond else
                        "no change gains more than the seeds' spread"))
        budget = [x for x in others if x["steps"] * x["recipe"]["batch"] > ref["steps"] * ref["recipe"]["batch"]]
        if budget:
            more = max(budget, key=lambda x: x["steps"] * x["recipe"]["batch"])
            notes.append(f"{fmt(more['steps'] * more['recipe']['batch'] / (ref['steps'] * ref['recipe']['batch']))}x the "
                         f"grid's training sequences ({more['study']}) gives {_pct(more['adjusted'] / ref['adjusted'] - 1)}, "
                         f"where the paper trains on {fmt(PAPER_TRAIN_SEQUENCES / (ref['steps'] * ref['recipe']['batch']))}x "
                         "the grid's (200,000 steps at batch 2048, seed 004 Sec. 6)")
    for x in evals:
        fifths = x.get("eval_fifths") or []
        notes.append(f"the same training evaluated on {fmt(x['eval'])} sequences instead of {fmt(ref.get('eval'))} reads "
                     f"{fmt(x['adjusted'])} ({_pct(x['adjusted'] / ref['adjusted'] - 1)}), and that set's five disjoint "
                     f"fifths read {fmt(min(fifths))} to {fmt(max(fifths))} ({_pct(min(fifths) / x['adjusted'] - 1)} to "
                     f"{_pct(max(fifths) / x['adjusted'] - 1)}): the evaluation set's size alone moves the "
                     "comparison with the paper by that much"
                     + (f" (its largest 0.1% of sequences carry {fmt(100 * x['tail_share'], 2)}% of the loss)"
                        if x.get("tail_share") is not None else ""))
    if notes:
        L.append(notes[0][0].upper() + "; ".join(notes)[1:] + ".")
        L.append("")
    full_params = 2 * (D + 1) ** 2
    pd = _paper_model("diag", b["layers"], b["column"])
    closing = (f"Full has {full_params} parameters a layer where Diag has 4, and Diag's tied diagonal form is a subspace "
               f"of Full's: the paper's Full is below its Diag here ({fmt(p)} against {fmt(pd)})"
               + (f", ours above ours ({fmt(ref['adjusted'])} against {fmt(dg['adjusted'])}), so our Full does not find "
                  "what the paper's finds" if dg and ref["adjusted"] > dg["adjusted"] else
                  (f", ours below ours too ({fmt(ref['adjusted'])} against {fmt(dg['adjusted'])})" if dg else ""))
               + ". ")
    tried = [x["study"] for x in others]
    if others:
        closing += ("Of the training changes tried (" + ", ".join(tried) + "), "
                    + (f"{', '.join(beyond)} gain{'s' if len(beyond) == 1 else ''} more than the seeds' spread: the gap is "
                       "at least partly the training budget or recipe, not a defect of the model"
                       if beyond else "none gains more than the seeds' spread: no defect of the initialisation or the "
                       "learning rate shows, and what is left is the paper's far longer training (or its best of 5 "
                       "seeds)")
                    + ". ")
    closing += ("Its parametrisation is the paper's eq. (2) (P and Q, each a full (d+1) x (d+1) matrix; seed 004 Sec. 6: "
                "'Full. Trains full parameter matrices'); the paper may have trained W_K, W_Q, W_V, W_P of eq. (1) "
                "instead, which it does not say and which is not tried here.")
    L.append(closing)
    L.append("")
    return L


def _adarr_paragraph(s: dict, column: str = "5") -> list[str]:
    """AdaRR at ``column``: the pooled value, the single draws, the paper's value in standard errors, the
    heavy tail and what its sequences are; [] without a multi-draw result there."""
    a = s["baselines"].get(column, {}).get("adarr")
    if not a or len(a.get("per_draw") or []) < 2:
        return []
    p = PAPER["adarr"][COLUMNS.index(column)]
    z = (a["adjusted"] - p) / math.sqrt(a["se"] ** 2 + a["se_one"] ** 2)
    d, n = a["per_draw"], s["baselines"][column].get("eval_per_draw")
    tail = a.get("tail")
    why = ""
    if tail:
        why = (f" Those sequences are the ones where sigma_hat^2 (n - d = {N - D} degrees of freedom) underestimates a "
               f"large noise: their median sigma_tau is {fmt(tail['sigma'][0])} against {fmt(tail['sigma'][1])} over "
               f"all, their median sigma_hat^2 / sigma_tau^2 {fmt(tail['s2hat_ratio'][0])} against "
               f"{fmt(tail['s2hat_ratio'][1])}, so the ridge is under-regularised (their smallest eigenvalue of Sigma, "
               f"median {fmt(tail['smallest_eig'][0])} against {fmt(tail['smallest_eig'][1])}, is not what sets "
               "them apart).")
    return [f"**AdaRR at sigma_max = {column}.** AdaRR tunes nothing (lambda = sigma_hat^2 per sequence), so its "
            f"only noise is the evaluation set's. Pooled over {len(d)} draws of {fmt(n)} sequences it is "
            f"{fmt(a['adjusted'])} (standard error {fmt(a['se'], 2)}), {_pct(a['adjusted'] / p - 1)} against the "
            f"paper's {fmt(p)}: {fmt(abs(z), 2)} standard errors of the difference, the paper's taken as one draw's "
            f"({fmt(a['se_one'], 2)}). The single draws read {', '.join(fmt(x) for x in d)} "
            f"({_pct(min(d) / p - 1)} to {_pct(max(d) / p - 1)} against the paper; the first is the set used alone "
            f"before). The loss is heavy-tailed: the largest 0.1% of sequences carry {fmt(100 * a['tail_share'], 2)}% "
            "of the mean." + why + " "
            + ("The paper's value is within sampling noise of ours." if abs(z) <= 2 else
               "The paper's value is beyond sampling noise of ours: its AdaRR or its data differ from ours there."), ""]


def _retry_sentence(s: dict) -> str:
    """The cells that diverged and were retrained at a smaller learning rate (from the results)."""
    hits = [(v, L_, c, m) for v, per in s["models"].items() for L_, pc in per.items() for c, m in pc.items()
            if m.get("diverged")]
    rule = (f" A run that diverges (no finite adjusted loss) is retrained at {fmt(RETRY_LR_FACTOR)} x its learning "
            f"rate, at most {RETRIES} times, the same rule for every cell")
    if not hits:
        return rule + "; none did."
    return (rule + ": "
            + "; ".join(f"{LABEL[v]} L = {L_}, column {c} ("
                        + ", ".join(f"at lr {fmt(f['lr'])} {f['skipped']} of {m['steps']} steps had a non-finite loss"
                                    for f in m["diverged"])
                        + f"; the result is the run at lr {fmt(m['recipe']['lr'])})"
                        for v, L_, c, m in sorted(hits, key=lambda x: (int(x[1]), x[0])))
            + ". The deep models' training losses are heavy-tailed (the 1/2 MSE averaged over a tenth of a run's "
            f"steps reaches {fmt(_largest_train_loss(s))} in a run that finished, from rare sequences, each model "
            "being a polynomial of degree 3^L in the tokens), which the gradient-norm clip and the skip of "
            "non-finite steps absorb.")


def _largest_train_loss(s: dict) -> float | None:
    vals = [h["train_half_mse"] for per in s["models"].values() for pc in per.values() for m in pc.values()
            for h in m.get("curve", []) if h.get("train_half_mse") is not None and math.isfinite(h["train_half_mse"])]
    return max(vals) if vals else None


def _miss_noise_sentence(misses: list[dict]) -> str:
    """The baseline misses weighed against the sampling noise (``z_diff`` of each), '' without them."""
    zs = [abs(m["z_diff"]) for m in misses if m.get("z_diff") is not None]
    if not zs or len(zs) != len(misses):
        return ""
    one = [0.1 * m["paper"] / m.get("se_paper", m["se"]) for m in misses]
    pooled = any(m.get("se_paper", m["se"]) != m["se"] for m in misses)
    how = ("ours from several independent tunings and evaluation sets pooled, its standard error counting both "
           "noises; the paper's from one tuning and one set of 100,000 sequences, its standard error taken as that "
           "of one such draw of ours, as it prints none" if pooled else
           "ours and the paper's, each from 100,000 sequences, the paper's standard error taken equal to ours as "
           "it prints none")
    return (f"Each miss is {'at most' if max(zs) <= 2 else 'up to'} {fmt(max(zs), 2)} standard errors of the "
            f"difference between two independent estimates ({how}): "
            + ("consistent with sampling noise; at these small losses 10% is only about "
               + (fmt(min(one), 2) if fmt(min(one), 2) == fmt(max(one), 2) else f"{fmt(min(one), 2)} to {fmt(max(one), 2)}")
               + " standard errors of one draw's estimate, so the criterion is tighter than the noise of the paper's "
               "table." if max(zs) <= 2 else
               "beyond sampling noise for at least one, so the paper's baseline differs from ours there (family, "
               "tuning or data)."))


def markdown(s: dict, figure: str) -> str:
    L = []
    cfg = s["config"]
    draws = cfg.get("baseline_draws", [1])
    ev_b, ev_m = cfg.get("baseline_eval", cfg["eval"]), cfg.get("model_eval", cfg["eval"])
    L.append(f"Data: d = {cfg['d']}, n = {cfg['n']}, w, x_i, x_t ~ N(0, I), noise std sigma_tau per sequence, "
             "noise-free query; adjusted loss = 1/2 MSE minus the oracle's (ridge with the true sigma_tau) on the "
             "same sequences. Baselines: per column "
             + (f"{' or '.join(map(str, draws))} independent draws, each a tuning set and an evaluation set of "
                f"{' or '.join(fmt(e) for e in ev_b)} sequences; ConstRR and TunedRR tuned once per draw, every "
                "baseline evaluated on the pooled evaluation sets, its value the mean over the tunings and its "
                "standard error counting the evaluation's and the tunings' noise"
                if max(draws) > 1 else f"{' or '.join(fmt(e) for e in ev_b)} evaluation sequences and as many for tuning")
             + f". Models: {' or '.join(fmt(e) for e in ev_m)} fresh evaluation sequences per cell (standard errors "
             "in `table.csv`; the paper evaluates on 100,000). Cells show **ours / paper**.")
    L.append("")
    L.append("| method | L | " + " | ".join(COLUMNS) + " |")
    L.append("|---|---|" + "---|" * len(COLUMNS))
    for key in ("constrr", "adarr", "tunedrr"):
        cells = []
        for i, c in enumerate(COLUMNS):
            b = s["baselines"].get(c)
            cells.append(f"{fmt(b[key]['adjusted'])} / {fmt(PAPER[key][i])}" if b else f"– / {fmt(PAPER[key][i])}")
        L.append(f"| {LABEL[key]} | – | " + " | ".join(cells) + " |")
    for Ls in sorted({L_ for v in s["models"].values() for L_ in v}, key=int):
        for v in VARIANTS:
            got = s["models"].get(v, {}).get(Ls, {})
            cells = [f"{fmt(got[c]['adjusted'])} / {fmt(PAPER[v][int(Ls)][i])}" if c in got
                     else f"– / {fmt(PAPER[v][int(Ls)][i])}" for i, c in enumerate(COLUMNS)]
            L.append(f"| {LABEL[v]} | {Ls} | " + " | ".join(cells) + " |")
    L.append("")
    run_layers = sorted({int(L_) for v in s["models"].values() for L_ in v})
    missing = [L_ for L_ in range(1, 8) if L_ not in run_layers]
    L.append("'–': not run here (the paper's value is shown)."
             + (f" Layers {', '.join(map(str, missing))} are not run; the paper's values for them are in seed 004 "
                "Table 1." if missing else ""))
    L.append("")
    L.extend(_depth_paragraph(s))
    L.extend(_column_paragraph(s))
    L.extend(_study_paragraph(s))
    L.append(f"![seed 004 Table 1]({figure})")
    L.append("")
    L.append("**Pass criteria**")
    L.append("")
    for c in s["criteria"]:
        L.append(f"* {c['text']}: {verdict(c['met'])}.")
        if c["id"] == "baselines-10pct":
            n_checks = 3 * c["columns"]
            L.append(f"  {n_checks - len(c['misses'])} of {n_checks} baseline values are within 10%; "
                     + ("the misses: " + "; ".join(
                         f"{LABEL[m['baseline']]} at {m['column']}: {fmt(m['ours'])} (standard error "
                         f"{fmt(m['se'], 2)}) vs {fmt(m['paper'])} ({fmt(100 * (m['ours'] / m['paper'] - 1), 2)}%)"
                         for m in c["misses"]) + ". "
                        if c["misses"] else "")
                     + "Allowing for the paper's rounding to 3 decimals (its value stands for +-0.0005): "
                     + verdict(c["met_allowing_rounding"]) + ".")
            if any(m["baseline"] == "tunedrr" for m in c["misses"]):
                L.append("  The paper does not define TunedRR's two parameters beyond 'a max threshold on the "
                         "estimated variance and a multiplicative adjustment' (Sec. 6); ours is "
                         "lambda = min(c sigma_hat^2, m), tuned on a separate set.")
            noise = _miss_noise_sentence(c["misses"])
            if noise:
                L.append("  " + noise)
            for m in c["misses"]:
                if m["baseline"] == "constrr" and m["column"] == "5":
                    i5 = COLUMNS.index("5")
                    L.append(f"  ConstRR at sigma_max = 5: the paper prints {fmt(PAPER['constrr'][i5])} for ConstRR but "
                             f"{fmt(PAPER['gdpp'][7][i5])} for GD++ at 3-7 layers; ours is {fmt(m['ours'])}. GD++ "
                             "equals ConstRR in every other noisy column of the table, and a tuned constant ridge "
                             "cannot lose to GD++: the printed ConstRR value is likely a typo.")
        elif c["id"] == "one-layer-equal" and c["columns"]:
            L.append("  GD++ and Diag compute the same function at L = 1 (the query's prediction -y_t^1 = "
                     "-omega_yx <alpha, x_t> depends on p_y q_x only; tested in "
                     "`tests/numerics/training/test_training_token_lsa.py`), so the check says most about Full.")
            worst = max(c["columns"], key=lambda x: x["spread"])
            L.append(f"  Over {len(c['columns'])} columns the largest spread (max/min - 1) is "
                     f"{fmt(100 * worst['spread'], 2)}% (column {worst['column']}: GD++ {fmt(worst['gdpp'])}, "
                     f"Diag {fmt(worst['diag'])}, Full {fmt(worst['full'])}).")
        elif c["id"] == "l3-s5-third" and c["ratios"]:
            L.append("  Ratios to GD++: " + ", ".join(f"{LABEL[v]} {fmt(r)} (paper {fmt(c['paper_ratios'][v])})"
                                                    for v, r in c["ratios"].items()) + ". "
                     "The paper states no ratio in words: Sec. 6 ('Uniform noise variance') says of Full and Diag "
                     "that 'the results quickly improve across the entire noise spectrum for 3 or more layers' and that "
                     "'GD++ quickly converges to a suboptimal solution'; the third is its Table 1's L = 3, sigma_max = 5 column "
                     "(an earlier criterion here, 'at most half', was looser than the paper's ratio).")
    L.append("")
    L.extend(_adarr_paragraph(s))
    m3 = {v: s["models"].get(v, {}).get("3", {}).get("5") for v in VARIANTS}
    if all(m3.values()):
        L.append("**What Diag and Full learn beyond GD++** (L = 3, sigma_max = 5; per layer the omegas of eq. (9): "
                 "GD++ has omega_xy = omega_yy = 0 by construction; for Full, of the averaged diagonals of P and Q):")
        L.append("")
        L.append("| model | layer | omega_xx | omega_yx | omega_xy | omega_yy | off-tied-diagonal norm P / Q |")
        L.append("|---|---|---|---|---|---|---|")
        for v in VARIANTS:
            for i, o in enumerate(m3[v]["omegas"]):
                off = f"{fmt(o['off_tied_P'])} / {fmt(o['off_tied_Q'])}" if "off_tied_P" in o else "–"
                L.append(f"| {LABEL[v]} | {i + 1} | {fmt(o['xx'])} | {fmt(o['yx'])} | {fmt(o['xy'])} | {fmt(o['yy'])} | {off} |")
        L.append("")
        L.append("omega_yy < 0 rescales y by (1 + omega_yy lambda^l), lambda^l = sum_i (y_i^l)^2: a shrinkage that "
                 "grows with the residual noise, which is what lets one set of weights act like ridge with a "
                 "per-sequence lambda (seed 004 Sec. 5.2); omega_xy < 0 makes the step size noise dependent (Sec. 5.3).")
        L.append("")
    rc = cfg["recipe"]
    if cfg["grid"] != "quick":
        grid = "; ".join(f"L = {L_}: columns {', '.join(g['columns'])}, {g['steps']} steps"
                         for L_, g in cfg["grid"]["models"].items())
        L.append(f"**Configuration.** Models (one seed, 0; the paper reports the best of 5): {grid}. Recipe: Adam, "
                 f"batch {rc['batch']} fresh sequences per step, lr {rc['lr']} with {int(100 * rc['warmup'])}% linear "
                 f"warm-up then cosine decay to 0, gradient-norm clip {rc['clip']}, float64, warm start at the exact "
                 f"GD++ layer (eta = {rc['eta']}, gamma = {rc['gamma']}) plus N(0, std^2) noise on every free "
                 f"parameter (std {', '.join(f'{LABEL[k]} {v}' for k, v in cfg['init_std'].items())}). The paper: "
                 "Adam lr 1e-4, batch 2048, 200,000 steps, best of 5 seeds, 4-12 h per model on an H100."
                 + _retry_sentence(s))
    L.append("")
    reused = (s.get("run") or {}).get("reused")
    L.append(f"**Cost.** {timing_line(s)}. Baselines {fmt(s['cpu_by_kind']['baselines'])} s CPU, models "
             f"{fmt(s['cpu_by_kind']['models'])} s CPU."
             + (f" {reused['cells']} of the cells are records of the run of {', '.join(reused['finished'])} ({reused['why']}); "
                "the command above trains them all again." if reused and reused.get("cells") else ""))
    L.append("")
    per_cell = [m["cpu_s"] for v in s["models"].values() for c in v.values() for m in c.values() if m.get("cpu_s")]
    L.append("**Not reproduced here.** The columns of L >= 2 not in the grid, among them the noiseless column "
             f"falling to the paper's {fmt(PAPER['full'][7][0])} at L = 7 (which needs the paper's long training): "
             "a model cell costs "
             + (f"{fmt(min(per_cell))} to {fmt(max(per_cell))} s of CPU here" if per_cell else "CPU time")
             + ", and all experiments of this page together had to fit in a small CPU budget on a shared machine.")
    return "\n".join(L)


def export(out_dir) -> list:
    """Every trained model of a finished grid in ``out_dir`` (``results.jsonl``) as a toolkit weight
    file ``weights/<variant>-L<layers>-<column>.safetensors`` (``token_lsa`` layers, float64)."""
    import json
    from pathlib import Path

    from numerics.training.token_lsa import export_token_model

    out = Path(out_dir)
    files = []
    for line in (out / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        res = rec.get("result") or {}
        if rec.get("status") != "ok" or res.get("kind") != "model":
            continue
        col = res["column"].strip("{}").replace(",", "-")
        path = out / "weights" / f"{res['variant']}-L{res['layers']}-{col}.safetensors"
        files.append(export_token_model(model_from_result(res), path,
                                        notes={"experiment": NAME, "column": res["column"],
                                               "adjusted_loss": res["adjusted"], "steps": res["steps"]}))
    return files
