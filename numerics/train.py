"""``python -m numerics.train TASK --out DIR [options]`` (see docs/training.md).

TASK: gradient | iterate | icls | read | linear | multiply.  ``--recipe
paper`` (default: Adam lr 1e-2, adaptive LR, grad-filter EMA; App. B.2
Table 5) or ``standard`` (Adam lr 1e-3, StepLR 1e4 / 0.9, no EMA; Table 4);
any flag given overrides the preset.  ``--resume`` (a flag) continues the run
in ``--out DIR`` from ``DIR/checkpoint.safetensors`` to ``--steps``; the
model, task and recipe then come from the checkpoint.  ``--iterate``
(gradient task) then applies the model as an iterative solver and sweeps
sigma (Figures 1b, 2).

Every value is checked before anything is built or written: a bad one is
one ``error:`` line and exit status 2 (exit 0: trained).  Size limits
(``LIMITS``; ``--allow-large`` lifts them and the memory limit):
{limits}
and the estimated memory of the run (``estimate_memory``: activations kept
for the backward pass x 2, the direct convolution's (T, T, C) kernels,
parameters x (7 + metric batches) for weights, gradients, Adam, EMA and the
cosine metric, 0.5 GiB for torch itself; 1.5x to 2.5x the peak measured on
CPU) must stay under {memory}.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

from polyverify.plumbing.cli import (DEFAULT_MEMORY_LIMIT, Parser, UsageError, atomic_write_text, check_finite,
                            check_memory, check_range, human_bytes, output_dir, run_main)
from polyverify.plumbing.options import config_class

from numerics.training.names import (CKPT, EMA_READS, ITERATE_READS, MODEL_READS, MODELS, RECIPE_OPTIONS,
                                     RECIPE_PRESETS, RUN_FILES, SCHEDULER_READS, TASK_OPTIONS, TASK_READS, TASKS,
                                     and_list, foreign_entries, not_read, recipe_reads, stale_temporaries)

#: the training classes, imported (torch with them) only once the command line has been parsed and
#: checked: a usage error costs no torch import (:func:`_load_training`; as attributes of this
#: module on first use, so that tests can replace them)
_TRAINING = {"ModelConfig": "modules", "RecipeConfig": "recipe", "TaskConfig": "trainer", "TrainConfig": "trainer",
             "Trainer": "trainer"}


def _load_training() -> None:
    import importlib

    g = globals()
    for name, mod in _TRAINING.items():
        if name not in g:
            g[name] = getattr(importlib.import_module(f"numerics.training.{mod}"), name)


def __getattr__(name):
    if name in _TRAINING:
        _load_training()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: upper bounds of the sizes (inclusive; the lower bound of each is 1); ``--allow-large`` lifts them
LIMITS = {
    "steps": 10_000_000,
    "batch": 65_536,
    "eval_batch": 1_048_576,
    "n": 4096,
    "d": 1024,
    "width": 8192,
    "layers": 256,
    "heads": 256,
    "k": 10_000,
    "metric_batches": 1024,
    "threads": 1024,
}
#: the largest seed torch.manual_seed takes
MAX_SEED = 2**63 - 1
#: bytes of memory a run may be estimated to need without ``--allow-large``
MEMORY_LIMIT = DEFAULT_MEMORY_LIMIT
ALLOW = "--allow-large"

LS_TASKS = ("gradient", "iterate", "icls")


def _limits_text() -> str:
    return "\n".join(f"  --{k.replace('_', '-'):<15} 1 .. {v:,}" for k, v in LIMITS.items())


if __doc__:  # (None under python -OO)
    __doc__ = __doc__.format(limits=_limits_text(), memory=human_bytes(MEMORY_LIMIT))


def parser() -> Parser:
    p = Parser(prog="python -m numerics.train", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=TASKS, help="what the model learns: " + ", ".join(TASKS))
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder (history.json, checkpoint.safetensors, weights.safetensors, result.json, "
                        "curves.png); created if missing, must not be a file")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out DIR from DIR/checkpoint.safetensors to --steps "
                        "(model, task and recipe from the checkpoint; a flag that contradicts it is refused)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run in --out DIR (its files are removed when training starts); without "
                        "it (or --resume) a folder that holds a run is refused")
    p.add_argument("--allow-large", action="store_true",
                   help=f"lift the size limits (LIMITS) and the memory limit ({human_bytes(MEMORY_LIMIT)})")
    g = p.add_argument_group("task")
    g.add_argument("--n", type=int, help=f"rows N (LS default 20, primitives 40; <= {LIMITS['n']})")
    g.add_argument("--d", type=int, help=f"columns D (LS default 5, primitives 20; <= {LIMITS['d']})")
    g.add_argument("--kappa", type=float, default=5.0, help="LS tasks: condition number of A, >= 1 (default 5)")
    g.add_argument("--sigma", type=float, default=1.0, help="LS tasks: scale of x_true, > 0 (default 1)")
    g.add_argument("--k", type=int, default=1, help=f"iterate task: number of GD steps (1 .. {LIMITS['k']})")
    g.add_argument("--eta", type=float, default=None,
                   help="GD step on (1/N) A^T(Ax-b), > 0; default 2N/(kappa^2+1)")
    g = p.add_argument_group("model")
    g.add_argument("--model", choices=MODELS, default="baseconv", help="architecture (default baseconv)")
    g.add_argument("--width", type=int, default=64, help=f"channels C (default 64; <= {LIMITS['width']})")
    g.add_argument("--layers", type=int, default=3, help=f"blocks (default 3; <= {LIMITS['layers']})")
    g.add_argument("--heads", type=int, default=1,
                   help=f"lsa / transformer heads (default 1; <= {LIMITS['heads']}; transformer: divides --width)")
    g.add_argument("--head-dim", type=int, default=None,
                   help="lsa: low-rank head size, 1 .. width (default: full width x width heads)")
    g.add_argument("--mlp", action="store_true", help="an MLP after each mixer")
    g.add_argument("--layernorm", action="store_true", help="pre-LN LayerNorms")
    g.add_argument("--causal", action="store_true", help="causal convolution / attention mask")
    g.add_argument("--conv", choices=("direct", "fft"), default="direct",
                   help="BaseConv convolution algorithm (default direct)")
    g.add_argument("--init-scale", type=float, default=0.1,
                   help="scales the init of each mixer's output map, finite (default 0.1)")
    g.add_argument("--bias", choices=("matrix", "vector"), default="matrix",
                   help="baseconv: (T, C) bias matrices (Def. D.20) or one bias row shared by all tokens")
    g = p.add_argument_group("optimisation (unset: the --recipe preset)")
    g.add_argument("--recipe", choices=("paper", "standard"), default="paper",
                   help="preset: paper (App. B.2 Table 5) or standard (Table 4); default paper")
    g.add_argument("--lr", type=float, help="initial learning rate, > 0")
    g.add_argument("--scheduler", choices=("adaptive", "steplr", "constant"), help="learning-rate schedule")
    g.add_argument("--step-size", type=int, help="steps between LR decisions, >= 1")
    g.add_argument("--gamma", type=float, help="LR factor per decision, in (0, 1]")
    g.add_argument("--threshold", type=float, help="adaptive: metric threshold sigma_th, in [-1, 1]")
    g.add_argument("--metric-every", type=int, help="adaptive: steps between cosine metrics, >= 1")
    g.add_argument("--metric-batches", type=int,
                   help=f"adaptive: minibatches per cosine metric, 2 .. {LIMITS['metric_batches']}")
    g.add_argument("--metric-pairs", choices=("all", "consecutive"),
                   help="cosine metric over all pairs (eq. 6) or consecutive ones (official code)")
    g.add_argument("--warmup", type=int, help="adaptive: no LR increase before this step, >= 0")
    g.add_argument("--ema", choices=("grad-filter", "update", "none"), help="which EMA (recipe module docstring)")
    g.add_argument("--ema-decay", type=float, help="EMA decay, in [0, 1)")
    g.add_argument("--ema-lambda", type=float, help="grad-filter EMA amplification, finite, >= 0")
    g.add_argument("--max-lr", type=float, help="cap of the adaptive LR increase, > 0")
    g.add_argument("--skip-grad-norm", type=float,
                   help="skip a step whose gradient norm exceeds this, >= 0 (inf: never skip a finite one)")
    g.add_argument("--steps", type=int, default=1000,
                   help=f"train to this step (default 1000; 1 .. {LIMITS['steps']:,})")
    g.add_argument("--batch", type=int, default=1024,
                   help=f"problems per training step (default 1024; <= {LIMITS['batch']:,})")
    g.add_argument("--eval-every", type=int, default=1000, help="steps between evaluations, >= 1 (default 1000)")
    g.add_argument("--eval-batch", type=int, default=2048,
                   help=f"fresh problems per evaluation (default 2048; <= {LIMITS['eval_batch']:,})")
    g.add_argument("--checkpoint-every", type=int, default=10_000,
                   help="steps between checkpoints, >= 1 (default 10000)")
    g.add_argument("--seed", type=int, default=0,
                   help=f"random seed, 0 .. 2^{MAX_SEED.bit_length()}-1 (default 0)")
    g.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="training dtype (default float64)")
    g.add_argument("--device", default="cpu", help="cpu or cuda[:index] (default cpu)")
    g.add_argument("--threads", type=int, default=None,
                   help=f"torch CPU threads, 1 .. {LIMITS['threads']} (default: torch's)")
    g.add_argument("--max-minutes", type=float, default=None,
                   help="stop cleanly (evaluate, checkpoint, export) once this much training wall time has "
                        "passed; > 0")
    g.add_argument("--no-progress", action="store_true",
                   help="no progress report (default: a bar on a terminal, plain lines in a log)")
    g.add_argument("--iterate", action="store_true",
                   help="gradient task: afterwards iterate the model as a solver and sweep sigma")
    return p


#: the command's options, typed: one frozen dataclass built by the command line (``from_args``) and by
#: a sweep cell (``from_mapping``) alike, its fields and defaults those of :func:`parser`
TrainOptions = config_class(parser(), "TrainOptions", module=__name__,
                            doc="The options of python -m numerics.train, typed (fields and defaults: parser()).")


# ------------------------------------------------------------------ validation

def _size(flag: str, value, a, *, lo: int = 1, key: str | None = None):
    """``lo <= value <= LIMITS[key]`` (the upper bound lifted by --allow-large)."""
    if value is None:
        return None
    hi = None if a.allow_large else LIMITS[key or flag.lstrip("-").replace("-", "_")]
    return check_range(flag, value, lo, hi, override=ALLOW)


def _positive(flag: str, value):
    return None if value is None else check_finite(flag, value, positive=True)


def checked_device(flag: str, device: str) -> str:
    """``device`` (cpu, cuda, cuda:N) checked: a CUDA device that torch cannot use is a UsageError naming ``flag``."""
    if device == "cpu":
        return device
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise UsageError(f"{flag} must be cpu or cuda[:index], got {device!r}")
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"{flag} {device}: no CUDA GPU is available (torch.cuda.is_available() is False)")
    if ":" in device and int(device.split(":")[1]) >= torch.cuda.device_count():
        raise UsageError(f"{flag} {device}: only {torch.cuda.device_count()} CUDA device(s)")
    return device


#: the command's model options (their ``dest``) and the ``ModelConfig`` field each sets; which
#: architecture reads which field is ``numerics.training.names.MODEL_READS``
MODEL_OPTIONS = {"width": "width", "layers": "layers", "heads": "heads", "head_dim": "head_dim", "mlp": "mlp",
                 "layernorm": "layernorm", "causal": "causal", "conv": "conv_method", "init_scale": "init_scale",
                 "bias": "bias"}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _shown(dest: str, value) -> str:
    return _flag(dest) if isinstance(value, bool) else f"{_flag(dest)} {value}"


def _only(readers) -> str:
    readers = list(readers)
    return f"only {and_list(readers)} {'does' if len(readers) == 1 else 'do'}"


def check_unread(a, is_set, *, task: str, model: str, scheduler: str, ema: str, iterate: bool,
                 whose: str = "", scheduler_from: str = "", ema_from: str = "") -> None:
    """Refuse an option the run would not read, naming it and what would: a model option
    ``model`` does not read (``MODEL_READS``), a task option ``task`` does not read (``TASK_READS``,
    with ``ITERATE_READS`` under ``--iterate``), a recipe option neither ``scheduler``
    (``SCHEDULER_READS``) nor ``ema`` (``EMA_READS``) reads.  ``is_set(dest)``: whether the run
    sets the option (given on the command line, or a sweep cell's value off its default);
    ``whose`` / ``scheduler_from`` / ``ema_from``: where the run's model, task, scheduler and EMA
    come from, for the message (a checkpoint, a --recipe preset)."""
    for dest, field in MODEL_OPTIONS.items():
        if field not in MODEL_READS[model] and is_set(dest):
            raise UsageError(not_read(_shown(dest, getattr(a, dest)), _flag(dest), f"{whose}--model {model}",
                                      _only(m for m, fields in MODEL_READS.items() if field in fields)))
    reads = TASK_READS[task] + (ITERATE_READS if iterate and task == "gradient" else ())
    for field in TASK_OPTIONS:
        if field not in reads and is_set(field):
            tasks = [t for t, fields in TASK_READS.items() if field in fields]
            only = f"only the {and_list(tasks)} task{'s do' if len(tasks) > 1 else ' does'}"
            if field in ITERATE_READS:
                only += ", and the gradient task with --iterate"
            raise UsageError(not_read(_shown(field, getattr(a, field)), _flag(field),
                                      f"{whose or 'the '}{task} task", only))
    for field in RECIPE_OPTIONS:
        if field in recipe_reads(scheduler, ema) or not is_set(field):
            continue
        if any(field in fields for fields in SCHEDULER_READS.values()):
            by, readers = f"{whose}--scheduler {scheduler}{scheduler_from}", (
                f"--scheduler {s}" for s, fields in SCHEDULER_READS.items() if field in fields)
        else:
            by, readers = f"{whose}--ema {ema}{ema_from}", (f"--ema {e}" for e, fields in EMA_READS.items()
                                                             if field in fields)
        raise UsageError(not_read(_shown(field, getattr(a, field)), _flag(field), by, _only(readers)))


def check_options_read(a, given=()) -> None:
    """Refuse an option that the run ``a`` describes would not read (:func:`check_unread`), one
    given on the command line (``given``: the dests set explicitly) or set to other than its
    default (a sweep cell's config): it would start a run that silently ignores it.  So is a
    ``--recipe`` preset the run takes nothing from (every setting of it the run reads given by its
    own flag or the same in every preset)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainOptions)}

    def is_set(dest):
        return dest in given or getattr(a, dest) != defaults[dest]

    preset = RECIPE_PRESETS[a.recipe]
    scheduler, ema = a.scheduler or preset["scheduler"], a.ema or preset["ema"]
    check_unread(a, is_set, task=a.task, model=a.model, scheduler=scheduler, ema=ema, iterate=a.iterate,
                 scheduler_from="" if a.scheduler else f" (the --recipe {a.recipe} preset's)",
                 ema_from="" if a.ema else f" (the --recipe {a.recipe} preset's)")
    if is_set("recipe"):  # a preset the run takes nothing from that another preset would not give it
        reads = [k for k in preset if k in recipe_reads(scheduler, ema)]
        taken = [k for k in reads if getattr(a, k) is None]
        if all(other[k] == preset[k] for other in RECIPE_PRESETS.values() for k in taken):
            same = f" or the same in every preset ({', '.join(f'{_flag(k)} {preset[k]}' for k in taken)})" * bool(taken)
            raise UsageError(f"--recipe {a.recipe}: each setting it presets that this run reads "
                             f"({and_list(map(_flag, reads))}) is given by its own flag{same}; drop it")


def check_args(a, given=()) -> None:
    """Every command-line value on its own (not the combination: :func:`check_config`), and no
    option the run ignores (:func:`check_options_read`; ``given``: the dests the command line sets
    explicitly)."""
    _size("--steps", a.steps, a)
    _size("--batch", a.batch, a)
    _size("--eval-batch", a.eval_batch, a)
    check_range("--eval-every", a.eval_every, 1)
    check_range("--checkpoint-every", a.checkpoint_every, 1)
    check_range("--seed", a.seed, 0, MAX_SEED)
    _size("--threads", a.threads, a)
    if a.max_minutes is not None:
        check_finite("--max-minutes", a.max_minutes, positive=True)
    checked_device("--device", a.device)
    if a.resume:
        return
    _size("--n", a.n, a)
    _size("--d", a.d, a)
    _size("--width", a.width, a)
    _size("--layers", a.layers, a)
    _size("--heads", a.heads, a)
    _size("--k", a.k, a)
    if a.head_dim is not None:
        check_range("--head-dim", a.head_dim, 1, a.width)
    check_finite("--kappa", a.kappa)
    check_range("--kappa", a.kappa, 1)
    check_finite("--sigma", a.sigma, positive=True)
    _positive("--eta", a.eta)
    check_finite("--init-scale", a.init_scale)
    _positive("--lr", a.lr)
    _positive("--max-lr", a.max_lr)
    if a.gamma is not None:
        check_finite("--gamma", a.gamma, positive=True)
        check_range("--gamma", a.gamma, hi=1.0)
    if a.threshold is not None:
        check_range("--threshold", a.threshold, -1.0, 1.0)
    if a.ema_decay is not None:
        check_range("--ema-decay", a.ema_decay, 0.0)
        if a.ema_decay >= 1:
            raise UsageError(f"--ema-decay must be < 1, got {a.ema_decay}")
    if a.ema_lambda is not None:
        check_range("--ema-lambda", a.ema_lambda, 0.0)
    if a.skip_grad_norm is not None and (math.isnan(a.skip_grad_norm) or a.skip_grad_norm < 0):
        raise UsageError(f"--skip-grad-norm must be >= 0 (or inf), got {a.skip_grad_norm}")
    for flag in ("--step-size", "--metric-every"):
        v = getattr(a, flag[2:].replace("-", "_"))
        if v is not None:
            check_range(flag, v, 1)
    if a.warmup is not None:
        check_range("--warmup", a.warmup, 0)
    _size("--metric-batches", a.metric_batches, a, lo=2)
    check_options_read(a, given)


def check_config(cfg: "TrainConfig", *, allow_large: bool = False) -> None:
    """The combination: task sizes, heads against width, and the memory estimate."""
    t, m = cfg.task, cfg.model
    if t.name in LS_TASKS:
        n, d = t.n or 20, t.d or 5
        if n < d:
            raise UsageError(f"--n ({n}) must be >= --d ({d}) for a least-squares task")
    else:
        n, d = t.n or 40, t.d or 20
        if n < 2:
            raise UsageError(f"--n must be >= 2 for the {t.name} task, got {n}")
        if t.name == "multiply" and d < 2:
            raise UsageError(f"--d must be >= 2 for the multiply task (it multiplies pairs of columns), got {d}")
    if m.model == "transformer" and m.width % m.heads:
        raise UsageError(f"--width {m.width} is not divisible by --heads {m.heads} (transformer)")
    if not allow_large:
        check_memory(f"this run ({m.model}, batch {cfg.batch}, width {m.width}, {m.layers} layers, {cfg.dtype})",
                     estimate_memory(cfg), MEMORY_LIMIT, override=ALLOW)


#: activations kept per block for the backward pass, in units of T x C values per problem
#: (BaseConv: the projection, convolution, gate, product, output and sum; attention: q, k, v, output, sum)
ACT_PER_BLOCK = {"baseconv": 6, "lsa": 1, "transformer": 6}
#: copies of the parameters: weights, gradients, Adam's two moments, the EMA buffers (two), the flat gradient
PARAM_COPIES = 7
#: torch's kernels, thread pools and allocator slack on the first steps (about 0.4 GiB measured on CPU)
FIXED_OVERHEAD = 512 * 2**20


def param_count(m: "ModelConfig") -> int:
    """The number of trainable parameters of ``SequenceModel(m)``, from the sizes alone (building
    the model, even on torch's meta device, costs seconds; tests compare the two)."""
    T, C, H, tr = m.T, m.width, m.heads, m.model == "transformer"
    n = m.d_in * C + (C if tr else 0) + C * m.d_out + (m.d_out if tr else 0)  # in / out projections
    n += T * C if tr and m.pos_embedding else 0
    if m.model == "baseconv":
        block = 3 * C * C + T * C + 4 * (T if m.bias == "matrix" else 1) * C
    elif m.model == "lsa":
        block = 3 * H * C * C if m.head_dim is None or m.head_dim == C else 4 * H * C * m.head_dim
    else:
        block = 4 * C * C + 4 * C  # qkv and proj, with biases
    if m.mlp:
        block += 2 * m.mlp_mult * C * C + m.mlp_mult * C + C
    if m.layernorm:
        block += 2 * C + (2 * C if m.mlp else 0)
        n += 2 * C  # the final LayerNorm
    return n + m.layers * block


def estimate_memory(cfg: "TrainConfig") -> float:
    """A rough upper estimate (bytes) of what training ``cfg`` allocates, computed without allocating:
    the parameter count (:func:`param_count`), the values every block
    keeps for the backward pass (x 2: and their gradients) or, if larger, one block of an
    evaluation chunk (1024 problems, no gradients), the direct convolution's (T, T, C) kernels
    (and gradients), parameters x (PARAM_COPIES + metric batches), the float64 numpy batch and
    FIXED_OVERHEAD.  Against the peak RSS measured on CPU (2-step runs, float32 and float64,
    BaseConv / LSA / Transformer, 0.6 to 2.6 GiB measured) it is 1.5x to 2.5x the measurement."""
    _load_training()
    task = cfg.task.build()
    m = ModelConfig(**{**cfg.model.to_json(), "T": task.T, "d_in": task.d_in, "d_out": task.d_out})
    params = param_count(m)
    T, C, L = task.T, m.width, m.layers

    def block(heads):  # values one block keeps per problem
        act = ACT_PER_BLOCK[m.model] * T * C
        if m.model == "lsa":  # per head: H W1, H W2, H W3, (H W1)^T (H W2), the product
            act += heads * (4 * T * C + C * C)
        if m.model == "transformer":  # attention scores and probabilities per head
            act += 2 * heads * T * T
        if m.mlp:
            act += (2 * m.mlp_mult + 1) * T * C
        if m.layernorm:
            act += 2 * T * C
        return act

    train = 2 * cfg.batch * L * block(m.heads)  # every block's values, and their gradients
    evaluation = 2 * min(cfg.eval_batch, 1024) * block(1)  # no gradients: about one block (one head) at a time
    io = max(cfg.batch, min(cfg.eval_batch, 1024)) * T * (task.d_in + task.d_out + C)
    kernels = 2 * L * T * T * C if m.model == "baseconv" and m.conv_method == "direct" else 0
    el = 8 if cfg.dtype == "float64" else 4
    metric = cfg.recipe.metric_batches if cfg.recipe.scheduler == "adaptive" else 0
    values = max(train, evaluation) + io + kernels + params * (PARAM_COPIES + metric)
    numpy_batch = 8 * 2 * cfg.batch * T * (task.d_in + task.d_out)
    return float(el * values + numpy_batch + FIXED_OVERHEAD)


def config_from(a) -> "TrainConfig":
    _load_training()
    over = {k: getattr(a, k) for k in RECIPE_OPTIONS if getattr(a, k) is not None}
    rc = RecipeConfig.paper(**over) if a.recipe == "paper" else RecipeConfig.standard(**over)
    mc = ModelConfig(model=a.model, **{field: getattr(a, dest) for dest, field in MODEL_OPTIONS.items()})
    tc = TaskConfig(a.task, **{field: getattr(a, field) for field in TASK_OPTIONS})
    return TrainConfig(task=tc, model=mc, recipe=rc, steps=a.steps, batch=a.batch, eval_every=a.eval_every,
                       eval_batch=a.eval_batch, checkpoint_every=a.checkpoint_every, seed=a.seed,
                       dtype=a.dtype, device=a.device, threads=a.threads)


def resumed_config(a, given=None) -> "TrainConfig":
    """The configuration stored in ``--out``'s checkpoint, with --steps / --device applied (a
    --device given, ``given`` holding the dests the command line sets: ``--device cpu`` moves a
    cuda run to the CPU; without ``given`` a device other than cpu); the checkpoint's state and the
    history beside it checked first (``trainer.read_checkpoint``, ``trainer.read_history``: sane
    counters, no evaluation record lost)."""
    _load_training()
    from numerics.training.trainer import read_checkpoint, read_history

    out = Path(a.out)
    if not out.is_dir():
        raise UsageError(f"--resume: --out {out} is not a folder with a run")
    ckpt = out / CKPT
    if not ckpt.is_file():
        raise UsageError(f"--resume: no {CKPT} in {out}")
    try:
        cfg, state = read_checkpoint(ckpt)
        read_history(out, state["step"], cfg)
    except ValueError as e:
        raise UsageError(f"--resume: {e}") from None
    done = state["step"]
    if a.steps < done:  # it would report a run of --steps steps that trained for more
        raise UsageError(f"--resume: --steps {a.steps} is below the {done} steps the checkpoint has trained; "
                         f"give --steps {done} or more (or start a new run with --overwrite)")
    cfg.steps = a.steps
    if ("device" in given) if given is not None else a.device != "cpu":
        cfg.device = a.device
    return cfg


#: options a resumed run takes from the command line; every other one is the checkpoint's, and a
#: value given for it must agree with the checkpoint
_RESUME_APPLIES = {"out", "resume", "overwrite", "steps", "device", "threads", "max_minutes", "no_progress",
                   "iterate", "allow_large", "help"}
#: options of the recipe (stored in the checkpoint's recipe under the same name)
_RECIPE_KEYS = RECIPE_OPTIONS


def given_options(argv) -> dict:
    """The options the command line sets explicitly (not argparse's defaults), by dest."""
    p = parser()
    for act in p._actions:
        if act.dest != "help":
            act.default = argparse.SUPPRESS
    return vars(p.parse_args(argv))


def _stored(cfg, dest: str):
    """The checkpoint's value of the option ``dest`` (the task's sizes as the task built them)."""
    t, m = cfg.task, cfg.model
    if dest in ("n", "d", "eta") and getattr(t, dest) is None:
        return getattr(t.build(), dest, None)
    table = {"task": t.name, "n": t.n, "d": t.d, "kappa": t.kappa, "sigma": t.sigma, "k": t.k, "eta": t.eta,
             "model": m.model, "width": m.width, "layers": m.layers, "heads": m.heads, "head_dim": m.head_dim,
             "mlp": m.mlp, "layernorm": m.layernorm, "causal": m.causal, "conv": m.conv_method,
             "init_scale": m.init_scale, "bias": m.bias}
    if dest in table:
        return table[dest]
    if dest in _RECIPE_KEYS:
        return getattr(cfg.recipe, dest)
    return getattr(cfg, dest)


def check_resume(cfg, given: dict, ckpt, iterate: bool = False) -> None:
    """``--resume``: every option given that the checkpoint fixes is one its run reads
    (:func:`check_unread`) and agrees with it (a run continued with another --n would not be the
    run it claims to be); else one line naming the option and what it contradicts."""
    _load_training()
    check_unread(SimpleNamespace(**given), given.__contains__, task=cfg.task.name, model=cfg.model.model,
                 scheduler=cfg.recipe.scheduler, ema=cfg.recipe.ema, iterate=iterate, whose="the checkpoint's ")
    for dest, value in given.items():
        if dest in _RESUME_APPLIES:
            continue
        flag = "TASK" if dest == "task" else "--" + dest.replace("_", "-")
        if dest == "recipe":  # a preset: the fields it sets, where no flag of its own overrides them
            preset = RecipeConfig.paper() if value == "paper" else RecipeConfig.standard()
            for key in RECIPE_PRESETS[value]:
                if key not in given and getattr(preset, key) != getattr(cfg.recipe, key):
                    raise UsageError(f"--resume: --recipe {value} ({key} {getattr(preset, key)}) contradicts the "
                                     f"checkpoint's {key} {getattr(cfg.recipe, key)} ({ckpt}); drop the flag, or "
                                     f"start a new run with --overwrite")
            continue
        stored = _stored(cfg, dest)
        if value != stored:
            raise UsageError(f"--resume: {flag} {value} contradicts the checkpoint's {dest} = {stored} ({ckpt}); "
                             f"drop the flag, or start a new run with --overwrite")


def _run_files(out: Path) -> list[str]:
    return [f for f in RUN_FILES if (out / f).exists()] if out.is_dir() else []


def main(argv=None) -> int:
    return run_main(_main, argv)


def _main(argv) -> int:
    a = TrainOptions.from_args(parser().parse_args(argv))
    if not a.out:  # Path('') is the current folder: a run's files would land wherever the command ran
        raise UsageError("--out is empty; give the run's folder")
    given = given_options(argv)
    check_args(a, () if a.resume else given)  # every value on its own, before torch is imported
    if a.resume and a.overwrite:
        raise UsageError("--resume continues the run in --out, --overwrite replaces it: give one")
    foreign = foreign_entries(a.out)
    if foreign:  # a run folder holds a run's files only: these belong to something else
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UsageError(f"--out {a.out} holds files that are not a training run's ({shown}); a run folder holds "
                         f"only {', '.join(RUN_FILES)}: give a new or empty folder")
    held = _run_files(Path(a.out))
    if held and not (a.resume or a.overwrite):
        raise UsageError(f"--out {a.out} holds a run ({', '.join(held)}); pass --resume to continue it or "
                         f"--overwrite to replace it")
    cfg = resumed_config(a, given) if a.resume else config_from(a)
    if a.resume:
        check_resume(cfg, given, Path(a.out) / CKPT, iterate=a.iterate)
    try:
        check_config(cfg, allow_large=a.allow_large)
    except ValueError as e:  # a task / model the builders refuse
        raise UsageError(str(e)) from None
    if a.iterate and cfg.task.name != "gradient":
        raise UsageError(f"--iterate needs the gradient task, not {cfg.task.name}")
    out = output_dir("--out", a.out)  # checked last; created when the first file is written
    try:
        if a.resume:
            tr = Trainer.resume(out, out, steps=a.steps, progress=not a.no_progress,
                                device=a.device if "device" in given else None)
            if a.threads:
                import torch

                torch.set_num_threads(a.threads)
        else:
            tr = Trainer(cfg, out, progress=not a.no_progress)
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from None
    if a.overwrite:  # every check passed and the new run is built: the old one's files go
        for f in held:
            (out / f).unlink(missing_ok=True)
        for p in stale_temporaries(out):
            p.unlink(missing_ok=True)
    res = tr.run(max_seconds=None if a.max_minutes is None else 60.0 * a.max_minutes)
    print(json.dumps({k: res[k] for k in ("steps", "final_test_mse", "final_test_mse_f64", "best_test_mse",
                                          "skipped", "wall_s", "loadavg_end", "params") if k in res}))
    if a.iterate:
        from numerics.training.iterate import ood_sweep, plot_ood

        tr.model.eval()
        rows = ood_sweep(tr.model, tr.task, dtype=tr.dtype, device=tr.cfg.device)
        atomic_write_text(out / "iterate.json", json.dumps(rows, indent=1))
        plot_ood(rows, out / "iterate.png", title=f"{tr.cfg.model.model}: iterated vs exact GD (eta={tr.task.eta})")
        for r in rows:
            print(f"sigma={r['sigma']:g} iters={r['iters']} model_mse={r['model_mse']:.3e} gd_mse={r['gd_mse']:.3e}")
    return 0


# the sweep adapter (numerics.sweep), by the names the sweep and its records use ("numerics.train:sweep_cell")
from numerics.train_sweep import SWEEP, sweep_cell, sweep_check  # noqa: E402, F401

if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
