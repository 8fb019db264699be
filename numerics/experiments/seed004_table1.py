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

from polyverify.plumbing.options import CellConfig, cell_config, non_negative, one_of, option, positive

from .common import fmt, rows_ok
from .seed004_table1_baselines import (  # noqa: F401 - also the baselines' names, re-exported
    D, N, draw_name, keyed_rng, adjusted, baselines_cell, problem_set, ridge, sample, sigmas, tune_const, tune_tuned,
    tuned_lambda)

NAME = "seed004-table1"
TITLE = "Seed 004, Table 1: mixed noise variance (linear transformers vs ridge baselines)"
REFERENCE = "seed 004 (Vladymyrov et al.), Sec. 6, Table 1"

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
        b = sample(rc["batch"], col, keyed_rng("seed004", "train", col, seed, step))
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


def paper_model(variant, L, col):
    """The paper's Table 1 value for ``variant`` at ``L`` layers in column ``col``."""
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
                "paper_ratios": {v: paper_model(v, 3, "5") / paper_model("gdpp", 3, "5") for v in ("diag", "full")}})
    return out


def table(s: dict) -> list[dict]:
    """The table rows (:func:`.seed004_table1_report.table`)."""
    from .seed004_table1_report import table as rows

    return rows(s)


def plot(s: dict):
    """The figure (:func:`.seed004_table1_report.plot`)."""
    from .seed004_table1_report import plot as figure

    return figure(s)


def markdown(s: dict, figure: str) -> str:
    """Its section of docs/experiments.md (:func:`.seed004_table1_report.markdown`)."""
    from .seed004_table1_report import markdown as section

    return section(s, figure)


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
