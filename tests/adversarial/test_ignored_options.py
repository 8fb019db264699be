"""Issue 39 item 6 for the task, recipe and run options: an option the run would not read is
refused, naming it and what would read it (``python -m numerics.train``, its ``--resume`` and its
sweep cells; ``python -m numerics.roundoff`` and its sweep cells;
``python -m numerics.training.construction_task``): exit 2, one ``error:`` line, nothing touched.
Given on the command line it is refused at any value; a sweep cell's only off its default.  And
the tables the commands refuse from, against the code: a setting a table calls ignored changes
nothing the run computes (the task's samples, a training run's weights and history, the
iteration, the roundoff records, the initial weights); one it calls read does."""
from __future__ import annotations

import dataclasses
import io
import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from numerics import roundoff, roundoff_config, train
from numerics.training import construction_task as ct
from numerics.training.names import (EMA_READS, ITERATE_READS, RECIPE_OPTIONS, RECIPE_PRESETS, SCHEDULER_READS,
                                     TASK_OPTIONS, TASK_READS, TASKS, recipe_reads)
from polyverify.plumbing.cli import UsageError
from tests.support import NoTrainer, tripwire

SMALL = ["--n", "3", "--d", "2", "--width", "4", "--layers", "1", "--batch", "4", "--eval-batch", "8",
         "--eval-every", "1", "--no-progress"]


def _t(task, *extra):
    return [task, "--out", "{out}", *extra]


# (argv, substrings of the error line); "{out}" a folder that must never be created
TRAIN_CASES = [
    # task options the task does not read (TASK_READS), given at any value
    (_t("read", "--kappa", "2"), ["--kappa 2.0: the read task does not read --kappa",
                                  "only the gradient, iterate and icls tasks do", "drop it"]),
    (_t("linear", "--kappa", "5"), ["--kappa 5.0: the linear task does not read --kappa"]),  # at its default
    (_t("multiply", "--sigma", "3"), ["--sigma 3.0: the multiply task does not read --sigma"]),
    (_t("read", "--eta", "0.1"), ["--eta 0.1: the read task does not read --eta",
                                  "only the iterate task does, and the gradient task with --iterate"]),
    (_t("linear", "--k", "1"), ["--k 1: the linear task does not read --k", "only the iterate task does"]),
    (_t("gradient", "--k", "3"), ["--k 3: the gradient task does not read --k"]),
    (_t("icls", "--k", "2"), ["--k 2: the icls task does not read --k"]),
    (_t("gradient", "--eta", "0.1"), ["--eta 0.1: the gradient task does not read --eta", "with --iterate"]),
    (_t("icls", "--eta", "0.1"), ["--eta 0.1: the icls task does not read --eta"]),
    # recipe options the scheduler does not read (SCHEDULER_READS)
    (_t("gradient", "--scheduler", "steplr", "--threshold", "0.5"),
     ["--threshold 0.5: --scheduler steplr does not read --threshold", "only --scheduler adaptive does"]),
    (_t("gradient", "--scheduler", "steplr", "--warmup", "3"), ["--warmup 3: --scheduler steplr does not read"]),
    (_t("gradient", "--scheduler", "constant", "--metric-every", "5"), ["--metric-every 5: --scheduler constant"]),
    (_t("gradient", "--scheduler", "steplr", "--metric-batches", "4"), ["--metric-batches 4: --scheduler steplr"]),
    (_t("gradient", "--scheduler", "steplr", "--metric-pairs", "all"), ["--metric-pairs all: --scheduler steplr"]),
    (_t("gradient", "--scheduler", "constant", "--max-lr", "1"), ["--max-lr 1.0: --scheduler constant"]),
    (_t("gradient", "--recipe", "standard", "--threshold", "0.5"),
     ["--threshold 0.5: --scheduler steplr (the --recipe standard preset's) does not read --threshold"]),
    (_t("gradient", "--scheduler", "constant", "--step-size", "3"),
     ["--step-size 3: --scheduler constant does not read --step-size",
      "only --scheduler adaptive and --scheduler steplr do"]),
    (_t("gradient", "--scheduler", "constant", "--gamma", "0.5"), ["--gamma 0.5: --scheduler constant"]),
    # recipe options the EMA does not read (EMA_READS)
    (_t("gradient", "--ema", "none", "--ema-decay", "0.5"),
     ["--ema-decay 0.5: --ema none does not read --ema-decay", "only --ema grad-filter and --ema update do"]),
    (_t("gradient", "--recipe", "standard", "--ema-decay", "0.5"),
     ["--ema-decay 0.5: --ema none (the --recipe standard preset's) does not read --ema-decay"]),
    (_t("gradient", "--ema", "update", "--ema-lambda", "1"),
     ["--ema-lambda 1.0: --ema update does not read --ema-lambda", "only --ema grad-filter does"]),
    (_t("gradient", "--ema", "none", "--ema-lambda", "2"), ["--ema-lambda 2.0: --ema none"]),
    # a --recipe preset the run takes nothing from
    (_t("gradient", "--recipe", "standard", "--lr", "1e-2", "--scheduler", "adaptive", "--step-size", "3000",
        "--ema", "grad-filter"), ["--recipe standard: each setting it presets that this run reads",
                                  "is given by its own flag or the same in every preset (--gamma 0.9)"]),
    (_t("gradient", "--recipe", "paper", "--lr", "1e-2", "--scheduler", "constant", "--ema", "none"),
     ["--recipe paper:", "(--lr, --scheduler and --ema) is given by its own flag; drop it"]),
]

# command lines whose every option the run reads: accepted (the check must not refuse them)
TRAIN_ACCEPTED = [
    ["iterate", "--k", "3", "--eta", "0.1", "--kappa", "3", "--sigma", "2", "--n", "5", "--d", "2"],
    ["gradient", "--eta", "0.1", "--iterate", "--kappa", "2", "--sigma", "3"],
    ["icls", "--kappa", "2", "--sigma", "3"],
    ["multiply", "--n", "6", "--d", "4"],
    ["gradient", "--recipe", "standard", "--ema", "update", "--ema-decay", "0.5", "--step-size", "5", "--gamma", "0.5"],
    ["gradient", "--scheduler", "adaptive", "--threshold", "0.5", "--warmup", "3", "--metric-every", "5",
     "--metric-batches", "4", "--metric-pairs", "consecutive", "--max-lr", "1", "--ema-lambda", "1"],
    ["gradient", "--recipe", "standard", "--lr", "1e-2", "--scheduler", "adaptive", "--ema", "none"],  # step 10^4
    ["gradient", "--recipe", "paper", "--scheduler", "constant", "--ema", "none"],  # lr 1e-2
    ["gradient", "--scheduler", "constant", "--lr", "0.1", "--skip-grad-norm", "5"],
]


@pytest.mark.parametrize("argv,needles", TRAIN_CASES, ids=[" ".join(c[0][:1] + c[0][3:]) for c in TRAIN_CASES])
def test_train_refuses_an_option_the_run_does_not_read(argv, needles, tmp_path, monkeypatch, refused):
    monkeypatch.setattr(train, "Trainer", NoTrainer)
    refused(train.main, [a.format(out=tmp_path / "out") for a in argv], tmp_path, needles)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", TRAIN_ACCEPTED, ids=[" ".join(a) for a in TRAIN_ACCEPTED])
def test_train_accepts_the_options_the_run_reads(argv):
    argv = [*argv, "--out", "unused"]
    a = train.TrainOptions.from_args(train.parser().parse_args(argv))
    train.check_options_read(a, train.given_options(argv))
    train.check_args(a, train.given_options(argv))


def test_train_sweep_cells_refuse_an_ignored_option_off_its_default():
    cell = {"task": "read", "width": 4, "steps": 2}
    for extra, needle in [({"kappa": 2.0}, "--kappa 2.0: the read task does not read --kappa"),
                          ({"k": 3}, "--k 3: the read task"),
                          ({"task": "gradient", "eta": 0.1}, "--eta 0.1: the gradient task"),
                          ({"ema": "none", "ema_decay": 0.5}, "--ema-decay 0.5: --ema none does not read"),
                          ({"recipe": "standard", "threshold": 0.5}, "--threshold 0.5: --scheduler steplr (the "
                                                                      "--recipe standard preset's)")]:
        with pytest.raises(UsageError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            train.sweep_check({**cell, **extra})
    # a cell's value at its default is what every cell holds: not an option set
    assert train.sweep_check({**cell, "kappa": 5.0, "sigma": 1.0, "k": 1})["task"] == "read"


# ------------------------------------------------------------------ --resume

@pytest.fixture(scope="module")
def read_run(tmp_path_factory):
    """A finished 2-step run of the read task with the standard recipe (StepLR, no EMA)."""
    out = tmp_path_factory.mktemp("t39i") / "run"
    assert train.main(["read", "--out", str(out), "--steps", "2", "--recipe", "standard", *SMALL]) == 0
    return out


@pytest.mark.parametrize("extra,needles", [
    (["--kappa", "5"], ["--kappa 5.0: the checkpoint's read task does not read --kappa"]),
    (["--eta", "0.1"], ["--eta 0.1: the checkpoint's read task does not read --eta"]),
    (["--heads", "1"], ["--heads 1: the checkpoint's --model baseconv does not read --heads"]),
    (["--ema-decay", "0.98"], ["--ema-decay 0.98: the checkpoint's --ema none does not read --ema-decay"]),
    (["--threshold", "0.9"], ["--threshold 0.9: the checkpoint's --scheduler steplr does not read --threshold"]),
])
def test_resume_refuses_an_option_the_checkpoints_run_does_not_read(extra, needles, read_run, tmp_path, monkeypatch,
                                                                    refused):
    import shutil

    shutil.copytree(read_run, tmp_path / "run")
    monkeypatch.setattr(train, "Trainer", NoTrainer)
    refused(train.main, ["read", "--out", str(tmp_path / "run"), "--resume", "--steps", "3", "--no-progress", *extra],
            tmp_path, needles)


def test_resume_device_cpu_moves_a_cuda_run_to_the_cpu(read_run, tmp_path):
    """--device cpu given to --resume is applied (it was ignored: cpu read as 'not given')."""
    import shutil

    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    run = tmp_path / "run"
    shutil.copytree(read_run, run)
    ckpt = run / "checkpoint.safetensors"
    with safe_open(str(ckpt), framework="pt") as f:
        meta = f.metadata()
    meta["config"] = json.dumps({**json.loads(meta["config"]), "device": "cuda"})
    save_file(load_file(str(ckpt)), str(ckpt), metadata=meta)
    assert train.main(["read", "--out", str(run), "--resume", "--steps", "3", "--no-progress", "--device", "cpu"]) == 0
    with safe_open(str(ckpt), framework="pt") as f:
        assert json.loads(f.metadata()["config"])["device"] == "cpu"
        assert f.metadata()["step"] == "3"


# ------------------------------------------------------------------ numerics.roundoff

RO = ["--quiet", "--batch", "2", "--dtypes", "float64", "--layer-ref", "0"]

ROUNDOFF_CASES = [
    (["baseconv", "--layers", "4", "--lam", "0", *RO],
     ["--lam 0: baseconv is plain least squares and does not read --lam", "only the ridge architectures lsa, elsa"]),
    (["lsa", "--layers", "4", "--conv", "direct", *RO], ["--conv direct:", "lsa has none", "does not read --conv"]),
    (["baseconv", "--layers", "4", "--backend", "numpy", "--device", "cpu", *RO],
     ["--device cpu: --backend numpy does not read --device (only --backend torch does)"]),
    (["baseconv", "--layers", "4", "--layer-ref-layers", "5", *RO],
     ["--layer-ref-layers 5: --layer-ref 0 runs no layer-level reference"]),
    (["baseconv", "--layers", "4", "--quiet", "--batch", "2", "--layer-ref", "3"],
     ["--layer-ref 3 exceeds --batch 2", "give at most 2"]),
]

ROUNDOFF_ACCEPTED = [
    ["lsa", "--layers", "4", "--lam", "0", *RO],
    ["baseconv", "--layers", "4", "--conv", "direct,fft", *RO],
    ["baseconv", "--layers", "4", "--backend", "numpy,torch", "--device", "cpu", *RO],
    ["baseconv", "--layers", "4", "--quiet", "--batch", "2", "--layer-ref", "2", "--layer-ref-layers", "5"],
]


@pytest.mark.parametrize("argv,needles", ROUNDOFF_CASES, ids=[" ".join(c[0][3:5]) for c in ROUNDOFF_CASES])
def test_roundoff_refuses_an_option_the_run_does_not_read(argv, needles, tmp_path, monkeypatch, refused):
    monkeypatch.setattr(roundoff, "run_config", tripwire)
    monkeypatch.setattr(roundoff, "reference", tripwire)
    refused(roundoff.main, [*argv, "--out", str(tmp_path / "out")], tmp_path, needles)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", ROUNDOFF_ACCEPTED, ids=[" ".join(a[:5]) for a in ROUNDOFF_ACCEPTED])
def test_roundoff_accepts_the_options_the_run_reads(argv):
    c = roundoff_config.RoundoffConfig.from_args(roundoff_config.build_parser().parse_args(argv))
    roundoff_config.plan(c, create_out=False, given=roundoff_config.given_fields(argv))


def test_roundoff_sweep_cells_refuse_an_ignored_option_off_its_default():
    from numerics.roundoff_sweep import sweep_check

    cell = {"arch": "baseconv", "layers": 4, "dtype": "float64", "backend": "numpy", "batch": 2, "layer_ref": 0}
    with pytest.raises(UsageError, match="--layer-ref-layers 5: --layer-ref 0 runs no layer-level reference"):
        sweep_check({**cell, "layer_ref_layers": 5})
    with pytest.raises(UsageError, match="--lam 0.0: baseconv is plain least squares"):
        sweep_check({**cell, "lam": "0.0"})
    # the sweep's own defaults in every cell (lam 0, device cpu, conv direct, 40 layer-ref layers) are no option set
    assert sweep_check({**cell, "arch": "lsa", "lam": "0", "device": "cpu", "conv": "direct",
                        "layer_ref_layers": 40})["arch"] == "lsa"


# ------------------------------------------------------------------ construction_task

CT_CASES = [
    (["--init", "random", "--noise", "0.1"], ["--noise 0.1: --init random does not read --noise",
                                              "only --init construction does"]),
    (["--noise", "0.01"], ["--noise 0.01: --init random does not read --noise"]),  # random: the default init
    (["--init", "construction", "--init-scale", "0.2"], ["--init-scale 0.2: --init construction does not read"]),
    (["--scheduler", "constant", "--step-size", "5"], ["--step-size 5: --scheduler constant does not read",
                                                       "only --scheduler adaptive and --scheduler steplr do"]),
    (["--scheduler", "constant", "--gamma", "0.5"], ["--gamma 0.5: --scheduler constant does not read --gamma"]),
]


@pytest.mark.parametrize("extra,needles", CT_CASES, ids=[" ".join(c[0]) for c in CT_CASES])
def test_construction_task_refuses_an_option_the_run_does_not_read(extra, needles, tmp_path, monkeypatch, refused):
    monkeypatch.setattr(ct, "train", tripwire)
    refused(ct.main, ["gd-baseconv", "--out", str(tmp_path / "run"), *extra], tmp_path, needles)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("option,reader,other", [(["--init-scale", "0.2"], ["--init", "random"], ["--init", "construction"]),
                                                 (["--noise", "0.1"], ["--init", "construction"], ["--init", "random"]),
                                                 (["--step-size", "5", "--gamma", "0.5"], ["--scheduler", "steplr"],
                                                  ["--scheduler", "constant"])])
def test_construction_task_takes_an_option_where_it_is_read_only(option, reader, other, tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(ct, "train", lambda cfg, out, **kw: seen.append(cfg) or {
        "initial_test_mse": 1.0, "final_test_mse": 0.5, "construction_test_mse": 0.0})
    assert ct.main(["gd-baseconv", "--out", str(tmp_path / "run"), *reader, *option]) == 0, capsys.readouterr().err
    assert ct.main(["gd-baseconv", "--out", str(tmp_path / "run"), *other, *option]) == 2
    assert f"{option[0]} {option[1]}: {' '.join(other)} does not read {option[0]}" in capsys.readouterr().err
    assert len(seen) == 1


# ------------------------------------------------------------------ the tables against the code

#: a second value of each task setting (the first: n 4, d 2 and the defaults)
TASK_OTHER = {"n": 6, "d": 3, "kappa": 2.0, "sigma": 3.0, "k": 3, "eta": 0.05}


def _samples(task):
    u, y = task.sample(5, np.random.Generator(np.random.PCG64(7)))
    return task.describe(), u, y


@pytest.mark.parametrize("field", TASK_OPTIONS)
@pytest.mark.parametrize("name", TASKS)
def test_task_reads_table_is_what_the_tasks_read(name, field):
    """TASK_READS against the tasks make_task builds: a setting the table says a task ignores
    changes none of its samples (nor its shapes); one it reads does."""
    from numerics.training.tasks import make_task

    (da, ua, ya), (db, ub, yb) = (_samples(make_task(name, **{"n": 4, "d": 2, **kw}))
                                  for kw in ({}, {field: TASK_OTHER[field]}))
    same = (da == db and ua.shape == ub.shape and ya.shape == yb.shape and np.array_equal(ua, ub)
            and np.array_equal(ya, yb))
    assert same == (field not in TASK_READS[name]), (name, field)


@pytest.mark.parametrize("field", [f for f in TASK_OPTIONS if f not in TASK_READS["gradient"]])
def test_iterate_reads_table_is_what_the_iteration_reads(field):
    """ITERATE_READS: of the settings the gradient task's training ignores, --iterate (ood_sweep)
    reads exactly these."""
    from numerics.training.iterate import ood_sweep
    from numerics.training.modules import ModelConfig
    from numerics.training.tasks import make_task
    from numerics.training.trainer import TaskConfig, TrainConfig, build_model

    def swept(**kw):
        task = make_task("gradient", n=4, d=2, **kw)
        model = build_model(TrainConfig(task=TaskConfig("gradient", n=4, d=2), model=ModelConfig(width=4, layers=1)),
                            task).double()
        return ood_sweep(model, task, sigmas=(1.0,), batch=2, max_iters=3)

    assert (swept() == swept(**{field: TASK_OTHER[field]})) == (field not in ITERATE_READS), field


def test_every_option_of_train_is_in_a_table_or_always_read():
    """A new option of numerics.train must say which runs read it."""
    from numerics.training.recipe import RecipeConfig
    from numerics.training.trainer import TaskConfig

    always = {"task", "out", "resume", "overwrite", "allow_large", "model", "recipe", "steps", "batch", "eval_every",
              "eval_batch", "checkpoint_every", "seed", "dtype", "device", "threads", "max_minutes", "no_progress",
              "iterate"}
    options = {f.name for f in dataclasses.fields(train.TrainOptions)}
    tables = set(train.MODEL_OPTIONS) | set(TASK_OPTIONS) | set(RECIPE_OPTIONS)
    assert options == always | tables and not always & tables
    assert set(TASK_OPTIONS) == {f.name for f in dataclasses.fields(TaskConfig)} - {"name", "param_seed"}
    assert set(RECIPE_OPTIONS) <= {f.name for f in dataclasses.fields(RecipeConfig)}
    for name, preset in RECIPE_PRESETS.items():  # the presets the check reads are the ones the run gets
        built = RecipeConfig.paper() if name == "paper" else RecipeConfig.standard()
        assert {k: getattr(built, k) for k in preset} == preset
        assert dataclasses.asdict(built) == {**dataclasses.asdict(RecipeConfig()), **preset}


#: the recipe a run of the table test starts from: every decision visible in 4 steps (the adaptive
#: LR increases at steps 2 and 4, the metric below the threshold 1.0), and a second value of each option
RECIPE_BASE = dict(lr=1e-2, step_size=2, gamma=0.5, threshold=1.0, metric_every=2, metric_batches=3,
                   metric_pairs="all", warmup=0, max_lr=None, ema_decay=0.9, ema_lambda=2.0, skip_grad_norm=1e3)
RECIPE_OTHER = dict(lr=2e-2, step_size=3, gamma=0.8, threshold=-1.0, metric_every=3, metric_batches=4,
                    metric_pairs="consecutive", warmup=100, max_lr=1e-2, ema_decay=0.5, ema_lambda=0.5,
                    skip_grad_norm=0.0)
_RUNS: dict = {}


def _trained(scheduler, ema, **change):
    """A 4-step training run's final weights, scheduler state and history (less the timings)."""
    from numerics.training.modules import ModelConfig
    from numerics.training.recipe import RecipeConfig
    from numerics.training.trainer import TaskConfig, TrainConfig, Trainer

    key = (scheduler, ema, tuple(sorted(change.items())))
    if key not in _RUNS:
        rc = RecipeConfig(scheduler=scheduler, ema=ema, **{**RECIPE_BASE, **change})
        cfg = TrainConfig(task=TaskConfig("gradient", n=3, d=2), model=ModelConfig(width=4, layers=1), recipe=rc,
                          steps=4, batch=4, eval_every=2, eval_batch=4, checkpoint_every=100)
        tr = Trainer(cfg, None, progress=False)
        tr.run()
        hist = [{k: v for k, v in h.items() if k not in ("wall_s", "loadavg")} for h in tr.history]
        _RUNS[key] = ({k: v.clone() for k, v in tr.model.state_dict().items()}, json.dumps(tr.sched.state()),
                      json.dumps(hist), tr.skipped)
    return _RUNS[key]


def _same_run(a, b) -> bool:
    return a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0]) and a[1:] == b[1:]


@pytest.mark.parametrize("field", list(RECIPE_OTHER))
@pytest.mark.parametrize("scheduler,ema", [(s, "none") for s in SCHEDULER_READS] + [("constant", e) for e in EMA_READS])
def test_recipe_tables_are_what_the_training_reads(scheduler, ema, field):
    """SCHEDULER_READS / EMA_READS (and RECIPE_ALWAYS) against training runs: a recipe setting the
    tables say a run with this scheduler and EMA ignores changes neither its weights nor its
    scheduler state nor its history; one they say it reads does."""
    assert set(RECIPE_OTHER) == set(RECIPE_OPTIONS) - {"scheduler", "ema"}
    same = _same_run(_trained(scheduler, ema), _trained(scheduler, ema, **{field: RECIPE_OTHER[field]}))
    assert same == (field not in recipe_reads(scheduler, ema)), (scheduler, ema, field)


@pytest.mark.parametrize("field", ["init_scale", "noise"])
@pytest.mark.parametrize("init", list(ct.INIT_READS))
def test_init_reads_table_is_what_init_body_reads(init, field):
    con = ct.build("gd-baseconv", 2, 1)
    a = ct.init_body(con, init, seed=3)
    b = ct.init_body(con, init, seed=3, **{field: 0.5})
    same = all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert same == (field not in ct.INIT_READS[init]), (init, field)


def _roundoff_run(monkeypatch, **kw):
    """The run records of a tiny roundoff config, the option checks bypassed (to run what they refuse)."""
    from polyverify.plumbing.cli import progress

    monkeypatch.setattr(roundoff_config, "_check_read", lambda p, given: None)
    c = roundoff_config.RoundoffConfig(**{**dict(layers=(4,), dtypes=("float32",), backends=("numpy",), batch=2,
                                                 n=5, d=2, layer_ref=0, quiet=True), **kw})
    runs, layer_runs = roundoff.compute(roundoff_config.plan(c, create_out=False), io.StringIO(),
                                        progress(None, "", enabled=False))
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("seconds") and k != "conv"}  # noqa: E731
    return json.dumps([strip(r) for r in runs] + [strip(r) for r in layer_runs], default=str)


@pytest.mark.parametrize("arch", ["lsa", "baseconv"])
def test_roundoff_conv_is_read_where_the_table_says(arch, monkeypatch):
    direct = _roundoff_run(monkeypatch, construction=arch, convs=("direct",))
    fft = _roundoff_run(monkeypatch, construction=arch, convs=("fft",))
    p = roundoff_config.plan(roundoff_config.RoundoffConfig(construction=arch, layers=(4,), dtypes=("float32",),
                                                            backends=("numpy",), n=5, d=2, batch=2, layer_ref=0),
                             create_out=False)
    assert (direct == fft) == (not roundoff_config.READ_BY["convs"][0](p)), arch


@pytest.mark.parametrize("layer_ref", [0, 1])
def test_roundoff_layer_ref_layers_is_read_where_the_table_says(layer_ref, monkeypatch):
    a = _roundoff_run(monkeypatch, construction="baseconv", layer_ref=layer_ref, layer_ref_layers=2)
    b = _roundoff_run(monkeypatch, construction="baseconv", layer_ref=layer_ref, layer_ref_layers=5)
    assert (a == b) == (layer_ref == 0)


@pytest.mark.parametrize("arch", ["baseconv", "lsa"])
def test_roundoff_lam_is_read_where_the_table_says(arch):
    """The construction a roundoff run builds (roundoff_run.build) depends on lam only for a ridge
    architecture (READ_BY['lam'])."""
    from numerics.roundoff_run import build, resolve

    entry = resolve(arch)

    def arrays(lam):
        con = build(entry, 4, 2, Fraction(1, 16), lam)
        return con.params, [{k: np.asarray(v).tolist() for k, v in L.arrays().items()}
                            for L in (*con.prologue, *con.body, *con.epilogue)]

    assert (arrays(Fraction(0)) == arrays(Fraction(1, 4))) == (not entry.ridge)
