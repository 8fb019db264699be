"""Seed 003 (Zoology), Sec. 4.3 / Figure 2 (top) / Claim 1: multi-query associative recall (MQAR),
attention against BaseConv as the model dimension d grows.

Data (:func:`mqar_data`): Zoology App. E.1 Algorithm 1 as its reference generator (``multiquery_ar``,
``random_non_queries=False``): D key-value pairs at the start, each key asked once more at a gap drawn
from a power law (alpha, App. F.1: 0.1), filler token 0; one training set and one test set for every
run (App. E.2).  Models (:func:`build_model`, :mod:`.seed003_mqar_models`): the reference code's Fig. 2
configs rebuilt: two layers, each a sequence mixer with pre-LayerNorm residuals and no MLP (state mixer
``Identity``), tied read-out, the reference init and dropout; ``attention`` one causal softmax head with
learned positions, ``baseconv`` the reference BaseConv (a width-3 short convolution in layer 1, a long
convolution in layer 2: the reference default's implicit filter or the paper's Listing 1 explicit one,
``long_conv``).  Training (:func:`train`): AdamW, weight decay 0.1, 10% linear warm-up then cosine decay
(App. E.2), a run stopping once its test accuracy reaches 0.99; the accuracy is the exact match of the
argmax at the query positions, a run reports its best test accuracy over its evaluations.  A cell's
config is :class:`MQARCell` (every key with its default in one place).

Two grids.  The CPU grid (``FULL``, :func:`configs`): a vocabulary, N, widths, batch and steps a 2-core CPU
affords for the whole grid, each mixer at its own learning rate(s), three
seeds per cell (a cell's value: the median over seeds at the rate with the highest median); beside it,
not read by the criteria (``PARTS``): each mixer at one cell with the paper's four rates and 3e-2
(``TUNE``), one longer BaseConv run (``LONG``), BaseConv with the reference default's implicit
filter at one cell (``FILTER``), attention below the grid's widths (``SMALL``), and two more seeds of
BaseConv at the widths where it crosses the threshold (``MORE_SEEDS``).  The GPU grid (``GPU``, :func:`gpu_configs`,
``numerics/experiments/gpu.sh``): the paper's vocabulary, N and widths on a card within a time budget.
The width grid (``WIDTHS``: both mixers at widths 16 to 256, five seeds, N = 16, 32, 64) adds the cells the CPU
grid lacks (:func:`missing_cells`, in :func:`decide_order`) through a grid file for ``python -m numerics.sweep run``
(:func:`write_widths_grid`); :func:`add_widths_records` adds its records to the CPU grid's, where they are kept
apart (``widths``) and pooled with its seeds for the smallest-width criterion.
The criteria (:func:`criteria`) count a cell below the threshold only where that mixer demonstrably
reaches the threshold somewhere in the grid within as many steps.  The report
(:mod:`.seed003_mqar_report`: ``markdown``, ``gpu_markdown``, ``plot``) states every remaining
difference from the paper and its reference code.
"""
from __future__ import annotations

import statistics

from polyverify.plumbing.options import cell_config, non_negative, option, positive

from .common import OnDevice, fmt, rows_ok

NAME = "seed003-mqar"
TITLE = "Seed 003 (Zoology), Figure 2 / Claim 1: MQAR accuracy of attention and BaseConv against model dimension"
REFERENCE = "seed 003 (Arora et al., Zoology), Sec. 4, Figure 2 (top), Claim 1"

MIXERS = ("attention", "baseconv")
THRESHOLD = 0.9

#: the CPU grid (``configs(False)``): sizes, widths per mixer, learning rates per mixer (chosen per mixer by
#: the ``TUNE`` cells, which run with the grid), seeds; the rest as the reference (App. E.2 / F.1 in comments
#: where they differ).  App. F.1 varies N "holding alpha and D constant": D = 4 at both N here.  Why this grid
#: (from short exploratory single runs, seed 0 unless said): attention at d = 16 reached the threshold at N = 16
#: (seeds 0, 1, 2) but not at N = 32, at d = 32 at both N, so the widths start at 32 for both mixers (the
#: ``SMALL`` cells run d = 16 beside the grid); BaseConv at N = 32 stayed on the plateau at d = 128 and reached
#: the threshold at d = 256, so its widths go up to 256, where its smallest width reaching the threshold is
#: measured at both N; D = 2 instead of 4 left attention on the plateau at d = 16 and 32; the paper's batch 64
#: (App. E.2) with 12,000 steps let attention leave the plateau in seeds that stayed on it at batch 256 with
#: 3,000 steps (the same 768,000 sequences).  BaseConv also runs at d = 96, halfway between 64 and 128 on a
#: linear scale: at widths a factor of two apart its smallest width reaching the threshold was 128 at both N
#: (d = 64 below it at both, 0.668 at N = 16 against 0.296 at N = 32), so a growth with N smaller than the
#: factor of two could not show.  N stops at 32 on this CPU: the generator needs V > N, so N = 48 is the next
#: size V = 64 admits, and one attention run there (d = 32, seed 0) cost 247 s of CPU on the machine that ran
#: the d = 96 cells, against at most 53 s for any attention run of the grid at N = 32 on the machine of the others.
FULL = {
    "sizes": ((16, 4), (32, 4)),  # App. F.1: N = 64 to 512, D = N/16 in the reference configs (the CPU's budget)
    "dims": {"attention": (32, 64), "baseconv": (32, 64, 96, 128, 256)},
    "lrs": {"attention": (1e-2,), "baseconv": (1e-2,)},
    "seeds": (0, 1, 2),
    "vocab": 64,              # App. F.1: 8,192 (64: V > N as the generator needs, an embedding a CPU affords)
    "power_a": 0.1,           # App. F.1 (the reference configs: 0.01)
    "data_seed": 0,           # the same data for every run (App. E.2)
    "steps": 12000,           # App. E.2: 64 epochs of 100,000 examples (here 7.68 epochs)
    "batch": 64,              # App. E.2 (the reference configs: 512 at N <= 128)
    "train_examples": 100_000,
    "test_examples": 1000,    # App. E.2: 3,000
    "eval_every": 200,
    "stop_at": 0.99,          # the reference's early stopping
    "mlp_mult": 0,            # the reference configs: state mixer Identity (App. E.2's text: an MLP)
    "weight_decay": 0.1,
    "warmup": 0.1,
    "embed_dropout": 0.1,
    "attn_dropout": 0.1,
    "long_conv": "explicit",  # the paper's Listing 1 filter (the reference's LongConvolution; its default: implicit)
}
#: the learning-rate tuning (part of the grid, not read by the criteria): each mixer at one cell of its own (a
#: width at which short exploratory runs of it reached the threshold, so that the rule compares steps to it) with the paper's four rates (App. E.2:
#: np.logspace(-4, -2, 4)) and 3e-2, seed 0; ``FULL["lrs"]`` holds each mixer's rates for the grid
TUNE = {"N": 16, "D": 4, "d": {"attention": 32, "baseconv": 128},
        "lrs": (0.0001, 0.00046415888336127773, 0.002154434690031882, 0.01, 0.03), "seed": 0}
#: a longer run (part of the grid, not read by the criteria): BaseConv at 2x the steps at attention's smallest
#: width of the grid, to see whether a BaseConv cell below the threshold stays there given more training
LONG = {"mixer": "baseconv", "N": 16, "D": 4, "d": 32, "steps": 24000, "seed": 0}
#: the reference configs' implicit long filter (part of the grid, not read by the criteria): BaseConv with it at
#: one cell of the grid, beside the grid's explicit filter there
FILTER = {"N": 16, "D": 4, "d": 64, "long_conv": "implicit", "seeds": (0,)}
#: attention below the grid's widths (part of the grid, not read by the criteria): d = 16 at every N, every seed
SMALL = {"mixer": "attention", "d": 16}
#: more seeds where BaseConv crosses the threshold (part of the grid, not read by the criteria): BaseConv at d = 96
#: and 128 at every N with two seeds beyond the grid's, so that the report reads the smallest width reaching the
#: threshold over five seeds beside the grid's three (the grid's crossing cells had their seeds split 2 of 3)
MORE_SEEDS = {"mixer": "baseconv", "dims": (96, 128), "seeds": (3, 4)}
#: the parts of the full grid that the criteria do not read (but for ``small`` and ``seeds``, whose runs share the
#: grid's settings and are pooled with its seeds by :func:`pooled` for the smallest-width criterion)
PARTS = ("tune", "long", "filter", "small", "seeds")
#: the parts pooled with the grid's runs (:func:`pooled`): the same settings, other widths or seeds
POOLED_PARTS = ("small", "more_seeds", "widths")
#: the width grid on which both mixers' smallest width reaching the threshold is to be measured alike (issue 45
#: item 1): every width from 16 up for both mixers, five seeds per cell, three sequence lengths; N = 64 needs a
#: vocabulary above N (the generator's assertion), so it runs at ``vocab_at`` (a smaller vocabulary-to-N ratio
#: than N = 16's).  :func:`missing_cells` lists the cells of it that have no record, :func:`widths_grid` writes
#: them as a grid file for ``python -m numerics.sweep run`` (:data:`WIDTHS_GRID_FILE`)
WIDTHS = {"sizes": ((16, 4), (32, 4), (64, 4)), "dims": (16, 32, 64, 96, 128, 256), "seeds": (0, 1, 2, 3, 4),
          "vocab_at": {64: 128}}
#: the grid file of the cells of ``WIDTHS`` without a record (written by :func:`write_widths_grid`)
WIDTHS_GRID_FILE = "numerics/experiments/grids/seed003-mqar-widths.json"
#: where the width grid's run writes its records (``python -m numerics.sweep run WIDTHS_GRID_FILE --out WIDTHS_DIR``:
#: ``cells/<id>.json`` as each cell finishes) and the CPU grid's folder that :func:`add_widths_records` adds them to
WIDTHS_DIR, CPU_DIR = "docs/experiments/seed003-mqar/widths", "docs/experiments/seed003-mqar"
#: the summary's key for each part's runs (``seeds`` is the summary's list of the grid's seed numbers)
PART_KEY = {part: ("more_seeds" if part == "seeds" else part) for part in PARTS}
#: ``--quick``: the CI check of the pipeline (tiny cells, not the paper's numbers)
QUICK = {**FULL, "sizes": ((32, 2),), "dims": {"attention": (16,), "baseconv": (16,)}, "seeds": (0,),
         "lrs": {"attention": (1e-2,), "baseconv": (1e-2,)}, "steps": 12, "batch": 16, "train_examples": 192,
         "test_examples": 48, "eval_every": 6, "stop_at": None}

#: what Zoology says about Fig. 2 (top) in its text (the figure is an image: no numbers in the text)
PAPER_CLAIM = ("attention solves MQAR 'perfectly at all sequence lengths' with d = 64; the gated "
               "convolutions do not exceed 0.9 accuracy unless d >= N ('model dimension must scale at least "
               "linearly in sequence length')")


# ====================================================================== data (Zoology App. E.1, reference generator)

def mqar_data(num_examples: int, N: int, D: int, vocab: int, seed: int, *, power_a: float = 0.1):
    """``(inputs, labels)``, (num_examples, N) int64 each: Zoology's MQAR (App. E.1 Algorithm 1 as its
    reference generator ``multiquery_ar`` with ``random_non_queries=False``, the Fig. 2 configs): keys from
    ``[1, V/2)``, values from ``[V/2, V)``, D distinct of each per example in the block ``k0 v0 k1 v1 ...``;
    each key asked again once at position ``2D + 2g``, the gaps ``g`` drawn without replacement from
    ``[0, (N - 2D)/2)`` with probability proportional to ``a (g + 1)^(a - 1)``; the label at a query is its
    value, every other label ``IGNORE`` (-100), every other input 0.  The same distribution as
    ``numerics.training.mqar.mqar`` (another random stream), in memory O(n (N + D)) instead of O(n V), so
    that the paper's vocabulary of 8,192 and 100,000 examples are cheap: the D distinct keys (values) of
    an example are drawn by rejection (rows with a repeat drawn again), a uniform ordered sample without
    replacement as the reference's ``np.random.choice(replace=False)``."""
    import numpy as np

    from numerics.training.mqar import check_mqar, place_mqar

    check_mqar(num_examples, N, D, vocab, power_a)
    rng = np.random.default_rng(seed)
    n, half = num_examples, vocab // 2

    def distinct(lo, hi):
        out = rng.integers(lo, hi, size=(n, D))
        while True:
            s = np.sort(out, axis=1)
            bad = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
            if not len(bad):
                return out
            out[bad] = rng.integers(lo, hi, size=(len(bad), D))

    keys, values = distinct(1, half), distinct(half, vocab)
    return place_mqar(rng, keys, values, N, power_a)


# ====================================================================== models (Zoology's reference code)

def _torch():
    import torch

    return torch


def build_model(mixer: str, vocab: int, N: int, d: int, **kw):
    """The two-layer language model of Zoology's Fig. 2 reference configs
    (:func:`numerics.experiments.seed003_mqar_models.build_model`, whose docstring says what is rebuilt)."""
    from .seed003_mqar_models import build_model as build

    return build(mixer, vocab, N, d, **kw)


# ====================================================================== cells

def _above_zero(x) -> bool:
    return x > 0


def _fraction(x) -> bool:
    return 0 <= x < 1


@cell_config
class MQARCell(OnDevice):
    """One cell of the seed003-mqar grids (:func:`configs`, :func:`gpu_configs`): every key :func:`cell`
    reads, with its default (the reference configs' where they have one); ``device``, ``grid``, ``order``
    and ``cells`` from :class:`~numerics.experiments.common.OnDevice`."""
    mixer: str = option(choices=MIXERS)
    N: int = option(check=(positive, ">= 1"))
    D: int = option(check=(positive, ">= 1"))
    d: int = option(check=(positive, ">= 1"))
    vocab: int = option(check=(positive, ">= 1"))
    lr: float = option(check=(_above_zero, "> 0"))
    seed: int = option(0, check=(non_negative, ">= 0"))  # the model's initialisation and the data order
    data_seed: int | None = option(None, check=(non_negative, ">= 0"))  # the data; None: ``seed``
    steps: int = option(check=(positive, ">= 1"))
    batch: int = option(check=(positive, ">= 1"))
    train_examples: int = option(check=(positive, ">= 1"))
    test_examples: int = option(check=(positive, ">= 1"))
    eval_every: int = option(check=(positive, ">= 1"))
    stop_at: float | None = option(None, check=(_above_zero, "> 0"))  # the reference's early stopping: 0.99
    power_a: float = option(0.1, check=(_above_zero, "> 0"))  # App. F.1 (the reference configs: 0.01)
    mlp_mult: int = option(0, check=(non_negative, ">= 0"))  # 0: the reference configs' Identity state mixer
    weight_decay: float = option(0.1, check=(non_negative, ">= 0"))
    warmup: float = option(0.1, check=(_fraction, "in [0, 1)"))
    embed_dropout: float = option(0.1, check=(_fraction, "in [0, 1)"))
    attn_dropout: float = option(0.1, check=(_fraction, "in [0, 1)"))
    long_conv: str = option("implicit", choices=("implicit", "explicit"))  # the reference default: implicit
    #: the CPU grid's parts that the criteria do not read: the learning-rate tuning and the longer run
    part: str | None = option(None, choices=(None, *PARTS))


def config_of(config: dict, where: str = "cell") -> MQARCell:
    return MQARCell.from_mapping(config, where=where)


def _plan_steps(c: MQARCell, budget: float, left: float, per_step: float, per_eval: float) -> dict:
    """Under a global deadline: the steps and the evaluation interval that fit 75% of the ``left`` seconds
    of the cell's ``budget`` (75%: the card is shared with the other cells, whose load grows once they
    all train), at most ``c.steps``, at least 10 evaluations per run."""
    every = c.eval_every
    fit = int(0.75 * left / (per_step + per_eval / max(1, min(every, c.steps // 10 or 1))))
    planned = max(1, min(c.steps, fit))
    return {"budget_s": round(budget, 1), "step_s": per_step, "eval_s": per_eval, "steps_max": c.steps,
            "steps_planned": planned, "eval_every": max(1, min(every, planned // 10 or 1))}


def cell(config: dict) -> dict:
    """Train one two-layer model (:func:`build_model`) on MQAR; the test accuracy history and its best.

    ``config``: :class:`MQARCell` (the training and test sets come from ``data_seed``, the same for every
    run as App. E.2 says).  Under a global deadline (``common.cell_budget``: the GPU grid) the cell
    measures its step time first and runs ``min(steps, what fits its share of the time left)`` steps,
    the schedule laid over those."""
    import time

    torch = _torch()
    from .common import cell_budget, describe_device
    from .seed003_mqar_models import step_time, train

    c = config_of(config)
    t_start = time.time()
    budget = cell_budget(c)
    torch.set_num_threads(1)
    t0 = time.process_time()
    data_seed = c.seed if c.data_seed is None else c.data_seed
    tr = mqar_data(c.train_examples, c.N, c.D, c.vocab, data_seed, power_a=c.power_a)
    te = mqar_data(c.test_examples, c.N, c.D, c.vocab, data_seed + 10, power_a=c.power_a)
    data_cpu = time.process_time() - t0
    model = build_model(c.mixer, c.vocab, c.N, c.d, seed=c.seed, mlp_mult=c.mlp_mult, embed_dropout=c.embed_dropout,
                        attn_dropout=c.attn_dropout, long_conv=c.long_conv)
    steps, every, plan = c.steps, c.eval_every, None
    if budget is not None:
        per_step, per_eval = step_time(model, tr, te, batch=c.batch, device=c.device, lr=c.lr)
        plan = _plan_steps(c, budget, budget - (time.time() - t_start), per_step, per_eval)
        steps, every = plan["steps_planned"], plan["eval_every"]
    res = train(model, tr, te, lr=c.lr, steps=steps, batch=c.batch, weight_decay=c.weight_decay, warmup=c.warmup,
                eval_every=every, stop_at=c.stop_at, seed=c.seed, device=c.device,
                deadline=None if budget is None else t_start + budget)
    return {"mixer": c.mixer, "N": c.N, "D": c.D, "d": c.d, "lr": c.lr, "vocab": c.vocab,
            "params": sum(p.numel() for p in model.parameters()), "data_cpu_s": round(data_cpu, 3),
            "device": describe_device(c.device), "plan": plan, **res}


def configs(quick: bool) -> list[dict]:
    """The CPU grid (``FULL``; ``QUICK`` with ``quick``): every (mixer, N, d) of the mixer's widths, at each
    of the mixer's learning rates, once per seed; the seed sets the model's initialisation and the data
    order, the data are the same for every run (``data_seed``; App. E.2 keeps the data order constant too).
    The full grid also runs the ``TUNE`` cells (part ``tune``), the ``LONG`` cell (part ``long``), the ``FILTER``
    cells (part ``filter``), the ``SMALL`` cells (part ``small``) and the ``MORE_SEEDS`` cells (part ``seeds``)."""
    f = QUICK if quick else FULL
    out = []
    for sd in f["seeds"]:
        for m in MIXERS:
            for (N, D) in f["sizes"]:
                for d in f["dims"][m]:
                    for lr in f["lrs"][m]:
                        out.append({"mixer": m, "N": N, "D": D, "d": d, "lr": lr, "seed": sd, **_common(f)})
    if quick:
        return out
    tune = [{"mixer": m, "N": TUNE["N"], "D": TUNE["D"], "d": TUNE["d"][m], "lr": lr, "seed": TUNE["seed"],
             **_common(f), "part": "tune"} for m in MIXERS for lr in TUNE["lrs"]]
    long = [{"mixer": LONG["mixer"], "N": LONG["N"], "D": LONG["D"], "d": LONG["d"], "lr": min(f["lrs"][LONG["mixer"]]),
             "seed": LONG["seed"], **_common(f), "steps": LONG["steps"], "part": "long"}]
    filt = [{"mixer": "baseconv", "N": FILTER["N"], "D": FILTER["D"], "d": FILTER["d"], "lr": min(f["lrs"]["baseconv"]),
             "seed": sd, **_common(f), "long_conv": FILTER["long_conv"], "part": "filter"} for sd in FILTER["seeds"]]
    small = [{"mixer": SMALL["mixer"], "N": N, "D": D, "d": SMALL["d"], "lr": min(f["lrs"][SMALL["mixer"]]), "seed": sd,
              **_common(f), "part": "small"} for (N, D) in f["sizes"] for sd in f["seeds"]]
    more = [{"mixer": MORE_SEEDS["mixer"], "N": N, "D": D, "d": d, "lr": min(f["lrs"][MORE_SEEDS["mixer"]]), "seed": sd,
             **_common(f), "part": "seeds"} for sd in MORE_SEEDS["seeds"] for (N, D) in f["sizes"] for d in MORE_SEEDS["dims"]]
    return tune + out + long + filt + small + more


#: the GPU grid (``--grid gpu``, ``numerics/experiments/gpu.sh``): the paper's widths (App. F.1: d 64 to 512)
#: at N = 64, 128 with the reference configs' D = N / 16 and batch (512 at N <= 128, 256 at N = 256), the
#: paper's vocabulary 8,192 and alpha = 0.1 (App. F.1), 100,000 training and 3,000 test examples (App. E.2),
#: at most 64 epochs (App. E.2), stopping at 0.99 (the reference's early stopping); one learning rate, the
#: paper's largest (1e-2 of np.logspace(-4, -2, 4)): a first H100 run of 72 cells (N up to 256, three rates)
#: gave every cell under 900 steps, too few to leave the plateau, and 1e-2 was the best rate of every cell
#: that left it; 16 cells on 16 workers give each cell the whole budget.  Each cell's steps are what fits its
#: share of the global budget (``cell``), at most the 64 epochs.
GPU = {"sizes": ((64, 4), (128, 8)), "dims": (64, 128, 256, 512),
       "lrs": (1e-2,), "vocab": 8192, "power_a": 0.1,
       "train_examples": 100_000, "test_examples": 3000, "epochs": 64, "stop_at": 0.99, "seed": 0, "data_seed": 0,
       "batch": {64: 512, 128: 512, 256: 256}}
#: ``--grid gpu --quick`` (the CI smoke test of the GPU script on a CPU): tiny sizes, the same code path
GPU_QUICK = {**GPU, "sizes": ((32, 2),), "dims": (16,), "lrs": (1e-2,), "vocab": 64, "train_examples": 256,
             "test_examples": 32, "epochs": 2, "stop_at": None, "batch": {32: 32}}


def gpu_configs(quick: bool) -> list[dict]:
    """The GPU grid (``GPU``; ``GPU_QUICK`` with ``quick``), in the order the cells should start: the
    larger learning rates first, then by N and d; each config carries its place in that order
    (``order``, ``cells``) for the fair share of the time budget."""
    g = GPU_QUICK if quick else GPU
    out = []
    for lr in g["lrs"]:
        for (N, D) in g["sizes"]:
            for d in g["dims"]:
                for m in MIXERS:
                    batch = g["batch"][N]
                    out.append({"mixer": m, "N": N, "D": D, "d": d, "lr": lr, "seed": g["seed"],
                                "data_seed": g["data_seed"], "vocab": g["vocab"], "power_a": g["power_a"],
                                "train_examples": g["train_examples"], "test_examples": g["test_examples"],
                                "batch": batch, "steps": g["epochs"] * (g["train_examples"] // batch),
                                "eval_every": max(1, g["train_examples"] // batch // 2), "stop_at": g["stop_at"],
                                "mlp_mult": 0, "weight_decay": 0.1, "warmup": 0.1, "embed_dropout": 0.1,
                                "attn_dropout": 0.1, "long_conv": "implicit", "grid": "gpu"})
    for i, c in enumerate(out):
        c.update(order=i, cells=len(out))
    return out


#: the settings every cell of a grid shares (everything but mixer, N, D, d, lr, seed)
SHARED = ("vocab", "power_a", "data_seed", "steps", "batch", "train_examples", "test_examples", "eval_every",
          "stop_at", "mlp_mult", "weight_decay", "warmup", "embed_dropout", "attn_dropout", "long_conv")


def _common(f: dict) -> dict:
    return {k: f[k] for k in SHARED}


# ====================================================================== summary and criteria

def summarise(rows, quick: bool) -> dict:
    """The grid's records as the summary: every run (``runs``), and per (mixer, N, d) the value the criteria
    read (``best``): each learning rate's median over the seeds of the runs' best test accuracy, the
    learning rate with the highest median kept (the paper's "maximum test accuracy" over its sweep, made
    robust to one lucky seed), with the seeds' spread at it."""
    every = rows_ok(rows)
    wide = {canonical_config(c) for c in widths_configs()} - {canonical_config(c) for c in configs(quick)}
    in_widths = [r for r in every if canonical_config(r["config"]) in wide]
    ok = [r for r in every if not r["config"].get("part") and r not in in_widths]
    key = lambda x: (x["N"], x["mixer"], x["d"], x["lr"], x["seed"])  # noqa: E731
    extra = {PART_KEY[part]: sorted((_run_record(r) for r in every if r["config"].get("part") == part), key=key)
             for part in PARTS}
    runs = sorted((_run_record(r) for r in ok), key=key)
    groups: dict = {}
    for x in runs:
        groups.setdefault((x["mixer"], x["N"], x["d"]), {}).setdefault(x["lr"], []).append(x)
    best = {}
    for (m, N, d), by_lr in groups.items():
        med = {lr: statistics.median(x["best_test_acc"] for x in xs) for lr, xs in by_lr.items()}
        lr = max(sorted(med), key=lambda v: med[v])  # ties: the smaller rate
        xs = sorted(by_lr[lr], key=lambda x: x["seed"])
        accs = [x["best_test_acc"] for x in xs]
        best[f"{m}/{N}/{d}"] = {
            "mixer": m, "N": N, "D": xs[0]["D"], "d": d, "lr": lr, "acc": med[lr], "min": min(accs), "max": max(accs),
            "seeds": [x["seed"] for x in xs], "accs": accs, "reached": sum(a >= THRESHOLD for a in accs),
            "steps_run": max(x["steps_run"] for x in xs),
            # the most steps any run of this (mixer, N, d) ran, at any rate: what a failure here is weighed by
            "ran": max(x["steps_run"] for v in by_lr.values() for x in v),
            "by_lr": {repr(k): v for k, v in sorted(med.items())}}
    cfg = (ok or every)[0]["config"] if every else {}
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "paper_claim": PAPER_CLAIM,
         "threshold": THRESHOLD, "runs": runs, "best": best,
         "config": {k: cfg.get(k) for k in SHARED},
         "lrs": {m: sorted({x["lr"] for x in runs if x["mixer"] == m}) for m in MIXERS},
         "seeds": sorted({x["seed"] for x in runs}), "sizes": sorted({(x["N"], x["D"]) for x in runs}),
         "dims": {m: sorted({x["d"] for x in runs if x["mixer"] == m}) for m in MIXERS}, **extra,
         # the width grid's runs beyond the CPU grid's (:func:`widths_configs`, :func:`add_widths_records`)
         "widths": sorted((_run_record(r) for r in in_widths), key=key), "widths_run": _widths_run(in_widths)}
    s["carried"] = carried(every)
    s["criteria"] = criteria(s)
    return s


def _widths_run(rows) -> dict | None:
    """What the width grid's records beyond the CPU grid cost: how many, their CPU and wall time summed, when the
    first and the last finished, the code versions that made them (None where there are none)."""
    if not rows:
        return None
    done = sorted(str(r.get("finished") or "") for r in rows)
    return {"cells": len(rows), "cpu_s": round(sum(r.get("cpu_s") or 0 for r in rows), 2),
            "wall_s": round(sum(r.get("wall_s") or 0 for r in rows), 2), "first": done[0], "last": done[-1],
            "sources": sorted({str((r.get("code_version") or {}).get("sources")) for r in rows})}


def carried(rows) -> dict | None:
    """The records an earlier code version made and this one carried over instead of training them again
    (each marked ``made_by``: that version and the day it finished): how many, which versions and days, their
    CPU time, and how they were carried: ``verified``, those carried by ``python -m numerics.experiments NAME
    --carry REV`` (``numerics/experiments/carry.py``: the code the cell runs checked unchanged; the record's
    ``carried`` names the commit), per commit; ``by_hand``, those whose code version was rewritten by hand
    (a ``made_by`` and no ``carried``: nothing checked).  None where there are none."""
    xs = [r for r in rows if isinstance(r.get("made_by"), dict)]
    if not xs:
        return None
    checked = [r for r in xs if isinstance(r.get("carried"), dict)]
    commits: dict = {}
    for r in checked:
        commits[str(r["carried"].get("commit"))[:12]] = commits.get(str(r["carried"].get("commit"))[:12], 0) + 1

    def part(ys):
        return {"cells": len(ys), "sources": sorted({str(r["made_by"].get("sources")) for r in ys}),
                "finished": sorted({str(r["made_by"].get("finished")) for r in ys}),
                "cpu_s": round(sum(r.get("cpu_s") or 0 for r in ys), 2)}
    hand = [r for r in xs if r not in checked]
    return {**part(xs), "verified": {**part(checked), "commits": commits} if checked else None,
            "by_hand": part(hand) if hand else None}


def _run_record(r: dict) -> dict:
    """One finished cell as the summary keeps it: its numbers, its history, the step at which its test
    accuracy first reached the threshold (``first_at``, None if never), why it stopped, and under a time
    budget the steps it planned."""
    x = r["result"]
    first = next((h["step"] for h in x["history"] if h.get("test_acc") is not None and h["test_acc"] >= THRESHOLD),
                 None)
    return ({k: x[k] for k in ("mixer", "N", "D", "d", "lr", "best_test_acc", "final_test_acc", "steps_run",
                               "final_train_loss", "params")}
            | {"seed": int(r["config"].get("seed", 0)), "steps": int(r["config"]["steps"]), "history": x["history"],
               "first_at": first, "stopped": x.get("stopped"),
               "steps_planned": (x.get("plan") or {}).get("steps_planned"),
               "cpu_s": r.get("cpu_s"), "wall_s": r.get("wall_s")})


def acc_at(s: dict, mixer: str, N: int, d: int):
    b = s["best"].get(f"{mixer}/{N}/{d}")
    return None if b is None else b["acc"]


def smallest_d(s: dict, mixer: str, N: int):
    """The smallest d of the grid at which ``mixer`` reaches the threshold at N (None: none does)."""
    ds = sorted(b["d"] for b in s["best"].values() if b["mixer"] == mixer and b["N"] == N)
    return next((d for d in ds if acc_at(s, mixer, N, d) >= s["threshold"]), None)


def learn_steps(s: dict, mixer: str):
    """The fewest steps after which a run of ``mixer`` anywhere in the grid had reached the threshold
    (None: no run of it did): the evidence that the mixer learns the task within the grid's training."""
    steps = [x["first_at"] for x in s["runs"] if x["mixer"] == mixer and x.get("first_at") is not None]
    return min(steps) if steps else None


def counts(s: dict, mixer: str, N: int, d: int) -> bool:
    """Whether (mixer, N, d) staying below the threshold counts as evidence: the mixer demonstrably learns
    somewhere in the grid, and this cell's runs trained at least as many steps as that took there.  (A
    cell that stopped earlier, e.g. its share of a GPU budget, says only that its budget was short.)"""
    need, b = learn_steps(s, mixer), s["best"].get(f"{mixer}/{N}/{d}")
    return need is not None and b is not None and b["ran"] >= need


def _combine(parts: list) -> bool | None:
    if any(p is False for p in parts):
        return False
    if not parts or all(p is None for p in parts):
        return None
    return True


def _attention_small_d(s: dict, Ns: list[int], th: float) -> dict:
    """Criterion 1 of :func:`criteria`."""
    per, notes = {}, []
    for N in Ns:
        ds = sorted(b["d"] for b in s["best"].values() if b["mixer"] == "attention" and b["N"] == N)
        if not ds:
            per[str(N)] = None
            continue
        v = acc_at(s, "attention", N, ds[0])
        per[str(N)] = True if v >= th else (False if counts(s, "attention", N, ds[0]) else None)
        if per[str(N)] is None:
            notes.append(f"N = {N}: attention {fmt(v)} at d = {ds[0]}, trained fewer steps than attention needed "
                         "where it reached the threshold (or it reaches it nowhere): not read")
    dmin = min((b["d"] for b in s["best"].values() if b["mixer"] == "attention"), default=None)
    return ({"id": "attention-small-d", "text": f"attention reaches {th} at the grid's smallest d"
                + (f" ({dmin})" if dmin is not None else "") + " at every N",
                "met": _combine(list(per.values())), "per_N": per, "d": dmin, "notes": notes})


def _gap(s: dict, Ns: list[int], th: float) -> dict:
    """Criterion 2 of :func:`criteria`."""
    per, notes = {}, []
    bc_learns = learn_steps(s, "baseconv") is not None
    for N in Ns:
        a = smallest_d(s, "attention", N)
        if a is None:
            per[str(N)] = None
            notes.append(f"N = {N}: attention reaches {th} at no d of the grid")
            continue
        low = sorted((b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == N and b["d"] <= a),
                     key=lambda b: b["d"])
        if not low:
            per[str(N)] = None
            notes.append(f"N = {N}: no BaseConv cell at d <= {a}")
        elif any(b["acc"] >= th for b in low):
            per[str(N)] = False
        elif not bc_learns:
            per[str(N)] = None
            notes.append(f"N = {N}: BaseConv is below {th} at d <= {a}, but it reaches {th} nowhere in the grid: "
                         "no evidence of a gap (it may not have trained long enough anywhere)")
        elif all(counts(s, "baseconv", N, b["d"]) for b in low):
            per[str(N)] = True
        else:
            per[str(N)] = None
            notes.append(f"N = {N}: BaseConv is below {th} at d <= {a}, but trained fewer steps there "
                         f"({', '.join(str(b['ran']) for b in low)}) than the {learn_steps(s, 'baseconv')} after which "
                         f"it reached {th} elsewhere in the grid: not read")
    return ({"id": "gap", "text": f"BaseConv below {th} at every d up to attention's smallest d reaching it, at "
                                     "every N (it needs a larger d, if any)",
                "met": _combine(list(per.values())), "per_N": per, "notes": notes,
                "smallest": {str(N): {"attention": smallest_d(s, "attention", N),
                                      "baseconv": smallest_d(s, "baseconv", N)} for N in Ns}})


def _step(s: dict, n0: int, n1: int, th: float) -> tuple[str | None, str | None]:
    """BaseConv's smallest d reaching the threshold from N = ``n0`` to the larger ``n1``: ``">"`` where it is
    larger at ``n1`` (or where it reaches the threshold at no d at ``n1`` while every cell there up to ``n0``'s
    width trained long enough to count), ``"="`` where it is the same, ``"<"`` where it is smaller, None
    where it cannot be read; with a note saying why not."""
    b0, b1 = smallest_d(s, "baseconv", n0), smallest_d(s, "baseconv", n1)
    if b0 is None:
        return None, f"BaseConv reaches {th} at no d at N = {n0}"
    if b1 is not None:
        return (">" if b1 > b0 else "=" if b1 == b0 else "<"), None
    below = [b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == n1 and b["d"] <= b0]
    if below and all(counts(s, "baseconv", n1, b["d"]) for b in below):
        return ">", None
    return None, (f"BaseConv reaches {th} at no d at N = {n1}, where its runs trained fewer steps ("
                  + ", ".join(f"d = {b['d']}: {b['ran']}" for b in sorted(below, key=lambda b: b["d"]))
                  + f") than the {learn_steps(s, 'baseconv')} after which it reached {th} at N = {n0}: not read")


def _grows_with_N(s: dict, Ns: list[int], th: float) -> dict:
    """Criterion 3 of :func:`criteria`: BaseConv's smallest d reaching the threshold is larger at the grid's
    largest N than at its smallest, and smaller at no larger N than at the N before it (``steps``: each
    consecutive pair's reading by :func:`_step`, ``">"``, ``"="``, ``"<"`` or None)."""
    grows, notes, steps = None, [], {}
    if len(Ns) < 2:
        notes.append("the grid has one N")
    else:
        for n0, n1 in zip(Ns, Ns[1:]):
            steps[f"{n0}->{n1}"], why = _step(s, n0, n1, th)
            if why:
                notes.append(why)
        end, why = _step(s, Ns[0], Ns[-1], th)
        if why and len(Ns) > 2:
            notes.append(why)
        if "<" in steps.values() or end in ("=", "<"):
            grows = False
        elif end == ">" and None not in steps.values():
            grows = True
    return ({"id": "grows-with-N", "text": f"BaseConv's smallest d reaching {th} grows with N (larger at the largest N "
                                          "than at the smallest, smaller at no larger N)", "met": grows,
             "steps": steps, "smallest": {str(N): smallest_d(s, "baseconv", N) for N in Ns}, "notes": list(dict.fromkeys(notes))})


def at_least_N(s: dict) -> dict:
    """The paper's "d >= N" for BaseConv read from the grid (a reading of the report, not one of the pass
    criteria): per N, whether BaseConv's smallest d reaching the threshold is at least N; None at an N where
    it reaches the threshold at no d of the grid; ``met`` as the criteria combine them."""
    th = s["threshold"]
    Ns = sorted({b["N"] for b in s["best"].values()})
    per, notes = {}, []
    for N in Ns:
        b = smallest_d(s, "baseconv", N)
        below_N = any(x["d"] < N for x in s["best"].values() if x["mixer"] == "baseconv" and x["N"] == N)
        # where the grid has no BaseConv width below N, "d >= N" cannot fail there: not read
        per[str(N)] = None if b is None or not below_N else b >= N
        if b is None:
            notes.append(f"N = {N}: BaseConv reaches {th} at no d of the grid")
        elif not below_N:
            notes.append(f"N = {N}: every BaseConv width of the grid is >= N, so d >= N cannot fail there")
    return {"met": _combine(list(per.values())), "per_N": per, "notes": notes}


def pooled(s: dict) -> dict:
    """Per ``"mixer/N/d"``: every recorded run at the grid's settings and learning rate(s), the grid's seeds and
    those of the parts that share its settings (:data:`POOLED_PARTS`: attention below the grid's widths, more
    BaseConv seeds); ``seeds``, ``accs`` (best test accuracy per seed, by seed), their ``median``, how many
    ``reached`` the threshold, and each run's ``steps`` and ``cpu`` (CPU seconds, None where not recorded).  The figure draws these and the smallest-width criterion reads them."""
    th, steps = s["threshold"], s["config"].get("steps")
    out: dict = {}
    for x in [*s["runs"], *(y for part in POOLED_PARTS for y in s.get(part) or [])]:
        if x["lr"] not in (s.get("lrs") or {}).get(x["mixer"], [x["lr"]]) or x["steps"] != steps:
            continue
        out.setdefault(f"{x['mixer']}/{x['N']}/{x['d']}", []).append(x)
    cells = {}
    for key, xs in out.items():
        xs = sorted(xs, key=lambda x: (x["seed"], x["lr"]))
        accs = [x["best_test_acc"] for x in xs]
        cells[key] = {"mixer": xs[0]["mixer"], "N": xs[0]["N"], "D": xs[0]["D"], "d": xs[0]["d"],
                      "seeds": [x["seed"] for x in xs], "accs": accs, "median": statistics.median(accs),
                      "steps": [x["steps_run"] for x in xs], "cpu": [x.get("cpu_s") for x in xs],
                      "reached": sum(a >= th for a in accs), "ran": max(x["steps_run"] for x in xs),
                      # the steps its runs could run: under a GPU budget the steps planned, else the configured ones
                      "budget": max(x.get("steps_planned") or x["steps"] for x in xs)}
    return cells


def smallest_width(s: dict, mixer: str, N: int, widths: list[int]):
    """The smallest of ``widths`` at which ``mixer``'s median over every pooled seed (:func:`pooled`) reaches the
    threshold at N (None: none does)."""
    p = pooled(s)
    return next((d for d in widths if p[f"{mixer}/{N}/{d}"]["median"] >= s["threshold"]), None)


def cell_state(s: dict, mixer: str, N: int, d: int, want: int) -> dict:
    """Whether ``mixer`` at (N, d) reaches the threshold by the median over ``want`` seeds, read from the seeds
    recorded (:func:`pooled`): ``"reach"`` where the median reaches it whatever the seeds not recorded would give
    (with 5 wanted: 3 recorded at or above it), ``"below"`` where it stays below it whatever they give and the runs
    below it trained at least as many steps as the mixer needed where it reached the threshold (:func:`learn_steps`;
    a run stopped short says only that its budget was short), else ``"open"`` (seeds missing, or too little
    training to read); with the cell's ``seeds``, ``reached``, ``median`` (None without a record) and ``missing``
    (how many of the ``want`` seeds have no record)."""
    th, c = s["threshold"], pooled(s).get(f"{mixer}/{N}/{d}")
    accs = list(c["accs"]) if c else []
    n, gap = len(accs), max(0, want - len(accs))
    lo, hi = statistics.median(accs + [0.0] * gap) if want else 0.0, statistics.median(accs + [1.0] * gap) if want else 0.0
    need = learn_steps(s, mixer)
    short = c is not None and any(a < th and (need is None or r < need) for a, r in zip(accs, c["steps"]))
    state = "reach" if n and lo >= th else "below" if n and hi < th and not short else "open"
    return {"d": d, "state": state, "seeds": n, "reached": c["reached"] if c else 0,
            "median": c["median"] if c else None, "missing": gap, "short": short}


def _crossing(s: dict, mixer: str, N: int, widths: list[int], want: int) -> dict:
    """``mixer``'s smallest width reaching the threshold at N over ``widths`` (:func:`cell_state` of each):
    ``lo`` the first width not below it, ``hi`` the first width reaching it (None: none does, so far), ``d`` the
    smallest width where decided (``lo == hi``; None where every width stays below it: above them all), ``decided``;
    ``cells``: the states from the width below ``lo`` up to ``hi`` (every width above ``lo`` where ``hi`` is None),
    the cells that decide the crossing or would."""
    st = [cell_state(s, mixer, N, d, want) for d in widths]
    i = next((k for k, c in enumerate(st) if c["state"] != "below"), len(st))
    j = next((k for k, c in enumerate(st) if c["state"] == "reach"), None)
    decided = (j is not None and j == i) or i == len(st)
    top = (j if j is not None else len(st) - 1) + 1
    return {"lo": widths[i] if i < len(st) else None, "hi": widths[j] if j is not None else None,
            "d": widths[j] if decided and j is not None else None, "decided": decided,
            "cells": st[max(0, i - 1):top]}


def _bounds(x: dict) -> tuple[float, float]:
    """A crossing (:func:`_crossing`) as the interval its smallest width lies in, math.inf for "above every width"."""
    import math

    lo = math.inf if x["lo"] is None else x["lo"]
    return lo, (x["hi"] if x["hi"] is not None else math.inf)


def _compare(first: dict, last: dict) -> str | None:
    """Two crossings (:func:`_crossing`) of one mixer, at a smaller N and a larger: ``grows`` (every width it can be
    at the larger N is above every width it can be at the smaller; reaching the threshold at no width there counts
    as above), ``same`` (both decided and equal), ``smaller``, ``not larger`` (no growth, the exact relation open),
    ``undecided`` (cells missing), ``short`` (open only where runs below the threshold trained too little), or None
    (it reaches the threshold at no width at the smaller N: nothing to compare)."""
    import math

    (lo0, hi0), (lo1, hi1) = _bounds(first), _bounds(last)
    if first["decided"] and first["d"] is None:
        return None
    if lo1 > hi0 or (math.isinf(lo1) and not math.isinf(hi0)):
        return "grows"
    if first["decided"] and last["decided"]:
        return "same" if last["d"] == first["d"] else "smaller" if hi1 < lo0 else "not larger"
    if hi1 < lo0:
        return "smaller"
    if hi1 <= lo0:
        return "not larger"
    opened = [c for x in (first, last) for c in x["cells"] if c["state"] == "open"]
    return "undecided" if any(c["missing"] for c in opened) else "short"


def _widths_vs_N(s: dict, Ns: list[int], th: float) -> dict:
    """Criterion 4 of :func:`criteria`: each mixer's smallest width reaching the threshold, by the median over the
    seeds a cell is asked for (``want``: the most seeds any cell has recorded; :func:`cell_state` reads a cell
    with fewer only where those recorded already settle that median), on the widths recorded (with ``WIDTHS``' where
    the width grid's records are in the summary), an interval where cells are open (:func:`_crossing`), read alike
    for both mixers from the smallest N to the largest (``per_mixer``) and from one N to the next (``steps``), each
    by :func:`_compare`; ``missing``: the open cells at each N where its crossing is open.  Met where attention's grows
    at no comparison and BaseConv's is larger at the largest N than at the smallest and smaller at no step (the
    paper's Claim 1, as criterion 3 reads growth); not met where a decided reading contradicts that (attention's
    grows somewhere, BaseConv's does not grow overall or is smaller at a step); else not read (None: undecided,
    cells missing).  It reads every N with a record (:func:`pooled`: the width grid's N = 64 has none in
    ``best``), not only the CPU grid's ``Ns``."""

    p = pooled(s)
    Ns = sorted({c["N"] for c in p.values()})  # every N recorded, the width grid's runs' included
    want = max((len(c["seeds"]) for c in p.values()), default=0)
    per, steps, decide, widths, smallest, bounds, missing, notes = {}, {}, {}, {}, {}, {}, {}, []
    for m in MIXERS:
        # the width grid's widths where its records are part of the summary (not the GPU grid's, nor a test's)
        ws = sorted({c["d"] for c in p.values() if c["mixer"] == m} | (set(WIDTHS["dims"]) if s.get("widths") else set()))
        widths[m] = ws
        xs = {N: _crossing(s, m, N, ws, want) for N in Ns}
        smallest[m] = {str(N): x["d"] for N, x in xs.items()}
        bounds[m] = {str(N): {"lo": x["lo"], "hi": x["hi"], "decided": x["decided"]} for N, x in xs.items()}
        decide[m] = {str(N): x["cells"] for N, x in xs.items()}
        missing[m] = {str(N): [c for c in xs[N]["cells"] if c["state"] == "open"] for N in Ns if not xs[N]["decided"]}
        if len(Ns) < 2 or not ws:
            per[m], steps[m] = None, {}
            continue
        per[m] = _compare(xs[Ns[0]], xs[Ns[-1]])
        steps[m] = {f"{n0}->{n1}": _compare(xs[n0], xs[n1]) for n0, n1 in zip(Ns, Ns[1:])}
    read = ("grows", "same", "smaller", "not larger")
    att = [per["attention"], *steps["attention"].values()]
    bc = list(steps["baseconv"].values())
    if "grows" in att or per["baseconv"] in ("same", "smaller", "not larger") or "smaller" in bc:
        met = False
    elif all(v in read for v in att) and per["baseconv"] == "grows" and all(v in ("grows", "same") for v in bc):
        met = True
    else:
        met = None
    absent = [N for N, _ in WIDTHS["sizes"] if N not in Ns]
    if absent and s.get("widths"):
        notes.append(f"N = {', '.join(map(str, absent))} of the width grid: no record yet, so read from N = "
                     f"{Ns[0] if Ns else '-'} to {Ns[-1] if Ns else '-'} only")
    return {"id": "widths-vs-N", "text": f"each mixer's smallest d reaching {th} (the median over {want} seed(s) per "
                                         "cell, read only where the seeds recorded settle it) read alike from the "
                                         "smallest N to the largest and from one N to the next: attention's grows "
                                         "nowhere, BaseConv's is larger at the largest N than at the smallest and "
                                         "smaller at no larger N (Claim 1)",
            "met": met, "per_mixer": per, "steps": steps, "smallest": smallest, "bounds": bounds, "widths": widths, "decide": decide,
            "missing": missing, "want": want, "notes": notes}


def missing_cells(s: dict) -> list[dict]:
    """The cells of :data:`WIDTHS` (both mixers at every width from 16 up, five seeds, three N) with no recorded
    run at the grid's settings (:func:`pooled`), as (mixer, N, D, d, seed) dicts."""
    p = pooled(s)
    out = []
    for m in MIXERS:
        for N, D in WIDTHS["sizes"]:
            for d in WIDTHS["dims"]:
                have = set(p.get(f"{m}/{N}/{d}", {}).get("seeds", []))
                out.extend({"mixer": m, "N": N, "D": D, "d": d, "seed": sd} for sd in WIDTHS["seeds"] if sd not in have)
    return out


def decide_order(s: dict, cells: list[dict]) -> list[dict]:
    """``cells`` (:func:`missing_cells`) in the order they decide each mixer's smallest width reaching the threshold
    as N grows, the cheapest first (the sweep runner starts a grid's cells in its order, so a run stopped early has
    run these first), read from the records as the criterion reads them (:func:`_crossing` over ``WIDTHS``' widths,
    five seeds), at every N alike (the criterion reads the smallest N against the largest and each N against the
    next).  The deciding cells come first:

    * the open cells of a crossing (:func:`cell_state`: from the first width not below the threshold up to the
      first reaching it, every width above where none reaches it yet); at an N where the mixer has no record,
      every width up to the largest at which it crosses (or first reaches the threshold) at a recorded N;
    * the missing seeds of the cells that decide a crossing, or will once its open cells settle: the first width
      reaching the threshold and the width below the first not below it (the rule asks for five seeds there);

    ordered by N x d (a run's cost grows with both: the cheaper runs first, so that a stopped run has decided what
    it could), then seeds 0-2 before 3-4 (three seeds of five agreeing settle a median), then by mixer.  Then the
    rest alike: seeds 0-2 of every cell before seeds 3-4 (a stopped run has a three-seed median at as many cells
    as it could), each the cheapest (N x d) first, then by mixer, N, width and seed."""
    want = len(WIDTHS["seeds"])
    dims = sorted(set(WIDTHS["dims"]))
    have = {(c["mixer"], c["N"]) for c in pooled(s).values()}
    cross = {(m, N): _crossing(s, m, N, dims, want) for m in MIXERS for N, _ in WIDTHS["sizes"] if (m, N) in have}
    # the widths at which it crosses (or first reaches the threshold, where the crossing is still open) at a recorded N
    at = {m: {x["hi"] for (mm, _), x in cross.items() if mm == m and x["hi"] is not None} for m in MIXERS}
    top = {m: max(at[m], default=max(dims)) for m in MIXERS}

    def deciding(x: dict) -> set:
        below = [d for d in dims if x["lo"] is not None and d < x["lo"]]
        return {x["hi"], *below[-1:]} - {None}

    def key(c):
        m, N, d, sd = c["mixer"], c["N"], c["d"], c["seed"]
        x = cross.get((m, N))
        if x is None:
            first = d <= top[m]
        else:
            first = d in {y["d"] for y in x["cells"] if y["state"] == "open"} or d in deciding(x)
        if not first:
            return (True, sd >= 3, N * d, MIXERS.index(m), N, d, sd)
        return (False, N * d, sd >= 3, MIXERS.index(m), N, sd)

    return sorted(cells, key=key)


def _widths_cell(c: dict) -> dict:
    """A cell of ``WIDTHS`` (mixer, N, D, d, seed) with its learning rate and, where N needs it, vocabulary."""
    return {**c, "lr": min(FULL["lrs"][c["mixer"]]),
            **({"vocab": WIDTHS["vocab_at"][c["N"]]} if c["N"] in WIDTHS["vocab_at"] else {})}


def widths_configs() -> list[dict]:
    """Every cell of ``WIDTHS`` as its whole config (the CPU grid's settings, ``FULL``), those the CPU grid runs
    (:func:`configs`) included: what :func:`summarise` reads a record of the width grid's run by."""
    return [{**_common(FULL), **_widths_cell({"mixer": m, "N": N, "D": D, "d": d, "seed": sd})}
            for m in MIXERS for N, D in WIDTHS["sizes"] for d in WIDTHS["dims"] for sd in WIDTHS["seeds"]]


def canonical_config(c: dict) -> str:
    import json

    return json.dumps(c, sort_keys=True)


def add_widths_records(widths: str = WIDTHS_DIR, out: str = CPU_DIR) -> dict:
    """Add the width grid's finished records (``widths/cells/<id>.json``, what ``python -m numerics.sweep run
    WIDTHS_GRID_FILE --out widths`` writes as each cell finishes) to ``out/results.jsonl``, the records the CPU
    grid's summary is made from (``python -m numerics.experiments seed003-mqar --resummarise --out out``).  A record
    is added only where it is whole and a cell of ``WIDTHS`` beyond the CPU grid: status ok, this module's cell,
    its config one of :func:`widths_configs` and not of :func:`configs`, its id the hash of that cell
    (:func:`polyverify.sweep.cell_id`), and its digest that of its contents (the runner's own check, at the code
    version the record names); one already there (by id) is replaced.  Written atomically; returns the counts."""
    import json
    from pathlib import Path

    from polyverify.plumbing.cli import atomic_write_text
    from polyverify.sweep import cell_id, record_digest

    cell = f"{__name__}:cell"
    wide = {canonical_config(c) for c in widths_configs()} - {canonical_config(c) for c in configs(False)}
    rows = [json.loads(line) for line in (Path(out) / "results.jsonl").read_text().splitlines() if line.strip()]
    found, refused = [], []
    for f in sorted((Path(widths) / "cells").glob("*.json")):
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            refused.append(f.name)
            continue
        if not isinstance(rec, dict) or rec.get("status") != "ok":
            continue
        ok = (rec.get("cell") == cell and canonical_config(rec.get("config")) in wide
              and rec.get("id") == cell_id(cell, rec["config"]) and rec.get("digest") == record_digest(rec))
        (found if ok else refused).append(rec if ok else f.name)
    ids = {r["id"] for r in found}
    kept = [r for r in rows if r.get("id") not in ids]
    new = [{**{k: v for k, v in r.items() if k not in ("index", "resumed")}, "index": len(kept) + i, "resumed": False}
           for i, r in enumerate(sorted(found, key=lambda r: (r.get("finished") or "", r["id"])))]
    atomic_write_text(Path(out) / "results.jsonl", "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept + new))
    return {"added": len(ids - {r.get("id") for r in rows}), "replaced": len(ids & {r.get("id") for r in rows}),
            "records": len(kept) + len(new), "refused": refused}


def widths_grid(s: dict) -> dict:
    """The grid file (``python -m numerics.sweep run FILE``) of :func:`missing_cells` in :func:`decide_order`: the
    CPU grid's settings (``FULL``) at its learning rate per mixer, the vocabulary raised where N needs it
    (``WIDTHS["vocab_at"]``)."""
    cells = [_widths_cell(c) for c in decide_order(s, missing_cells(s))]
    return {"cell": "numerics.experiments.seed003_mqar:cell", "fixed": _common(FULL), "cells": cells}


def write_widths_grid(summary: str = "docs/experiments/seed003-mqar/summary.json", out: str = WIDTHS_GRID_FILE) -> None:
    """Write :func:`widths_grid` of the committed summary to :data:`WIDTHS_GRID_FILE` (``python -c "import
    numerics.experiments.seed003_mqar as m; m.write_widths_grid()"``)."""
    import json

    from polyverify.plumbing.cli import atomic_write_text

    with open(summary) as f:
        s = json.load(f)
    atomic_write_text(out, json.dumps(widths_grid(s), indent=1) + "\n")


def criteria(s: dict) -> list[dict]:
    """Four checks of Claim 1 on the per-(mixer, N, d) values (``best``; the fourth on :func:`pooled`).  A cell below the threshold counts
    only where the mixer demonstrably learns somewhere in the grid within as many steps (:func:`counts`);
    where it does not, the check is not measured at that N (``None``), never met by default.

    1. attention reaches the threshold at the grid's smallest d, at every N (the paper: d = 64 at every N);
    2. the gap: at every N, BaseConv stays below the threshold at every d up to the smallest d at which
       attention reaches it (so BaseConv needs a larger d, if any);
    3. BaseConv's smallest d reaching the threshold grows from the smallest N of the grid to the largest, and
       is smaller at no larger N than at the N before it;
    4. each mixer's smallest d reaching the threshold over every seed recorded, read alike for both mixers
       (:func:`_widths_vs_N`): attention's does not grow with N and BaseConv's does (Claim 1).

    The paper's "d >= N" for BaseConv is read by :func:`at_least_N` (in the report's words).
    """
    th = s["threshold"]
    Ns = sorted({b["N"] for b in s["best"].values()})
    return [check(s, Ns, th) for check in (_attention_small_d, _gap, _grows_with_N, _widths_vs_N)]


# ====================================================================== outputs

def table(s: dict) -> list[dict]:
    return [{"mixer": x["mixer"], "N": x["N"], "D": x["D"], "d": x["d"], "lr": x["lr"], "seed": x["seed"],
             "best_test_acc": x["best_test_acc"], "final_test_acc": x["final_test_acc"], "steps_run": x["steps_run"],
             "first_at_threshold": x.get("first_at"), "stopped": x.get("stopped"),
             "final_train_loss": x["final_train_loss"], "params": x["params"], "cpu_s": x["cpu_s"],
             "wall_s": x["wall_s"]} for x in s["runs"]]


def plot(s: dict):
    """The figure (:func:`.seed003_mqar_report.plot`)."""
    from .seed003_mqar_report import plot as draw

    return draw(s)


def markdown(s: dict, figure: str) -> str:
    """The CPU grid's section of ``docs/experiments.md`` (:func:`.seed003_mqar_report.markdown`)."""
    from .seed003_mqar_report import markdown as text

    return text(s, figure)


def index_criteria(s: dict) -> str | None:
    """The index table's reading: the deciding criterion first (:func:`.seed003_mqar_report.index_criteria`)."""
    from .seed003_mqar_report import index_criteria as text

    return text(s)


def gpu_markdown(s: dict, figure: str) -> str:
    """The GPU grid's section (:func:`.seed003_mqar_report.gpu_markdown`)."""
    from .seed003_mqar_report import gpu_markdown as text

    return text(s, figure)


__all__ = ["NAME", "TITLE", "REFERENCE", "FULL", "QUICK", "cell", "configs", "gpu_configs", "summarise", "criteria",
           "table", "plot", "markdown", "gpu_markdown", "index_criteria", "smallest_d", "acc_at", "learn_steps", "counts", "mqar_data",
           "build_model", "MQARCell", "config_of", "at_least_N", "carried", "PARTS", "PART_KEY", "pooled", "smallest_width",
           "missing_cells", "decide_order", "widths_grid", "widths_configs", "canonical_config", "add_widths_records",
           "cell_state", "WIDTHS_DIR", "CPU_DIR", "write_widths_grid", "WIDTHS", "WIDTHS_GRID_FILE"]
