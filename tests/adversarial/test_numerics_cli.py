"""Adversarial command lines for the numerics CLIs: ``numerics.train``,
``numerics.roundoff`` and ``numerics.training.report``.

Every bad input is refused before any work: exit status 2, exactly one ``error:`` line
on stderr (no traceback), and nothing under the test folder created or changed (the
output folder is not made, an existing file given as ``--out`` keeps its bytes and
mtime).  The work functions are replaced by tripwires so that a case which got past
validation fails loudly instead of training.  With stderr going to a file, a small real
run logs plain progress lines, never a carriage return.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from numerics import roundoff, train
from numerics.training import report
from tests.support import NoTrainer, tripwire

REPO = Path(__file__).resolve().parents[2]
NO_CUDA = not torch.cuda.is_available()

TRAIN = ["gradient", "--out", "{out}"]


def _t(*extra):
    return TRAIN + list(extra)


# (argv, substring of the error line); "{out}" is a folder that must never be created,
# "{file}" an existing file that must not change, "{tmp}" the test folder
TRAIN_CASES = [
    (_t("--steps", "-1"), "--steps must be >= 1"),
    (_t("--steps", "0"), "--steps must be >= 1"),
    (_t("--steps", "10000001"), "--steps = 10000001 exceeds the limit"),
    (_t("--steps", "1e3"), "invalid int value"),
    (_t("--layers", "0"), "--layers must be >= 1"),
    (_t("--layers", "257"), "--allow-large"),
    (_t("--width", "0"), "--width must be >= 1"),
    (_t("--width", "-4"), "--width must be >= 1"),
    (_t("--width", "8193"), "exceeds the limit 8192"),
    (_t("--batch", "0"), "--batch must be >= 1"),
    (_t("--batch", "-8"), "--batch must be >= 1"),
    (_t("--batch", "65537"), "exceeds the limit 65536"),
    (_t("--eval-every", "0"), "--eval-every must be >= 1"),
    (_t("--eval-batch", "0"), "--eval-batch must be >= 1"),
    (_t("--eval-batch", "1048577"), "--eval-batch"),
    (_t("--checkpoint-every", "0"), "--checkpoint-every must be >= 1"),
    (_t("--heads", "0"), "--heads must be >= 1"),
    (_t("--heads", "257"), "--heads"),
    (_t("--head-dim", "0", "--model", "lsa"), "--head-dim must be >= 1"),
    (_t("--head-dim", "65", "--model", "lsa", "--width", "64"), "--head-dim = 65 exceeds the limit 64"),
    (_t("--model", "transformer", "--width", "10", "--heads", "3"), "not divisible"),
    (_t("--n", "0"), "--n must be >= 1"),
    (_t("--n", "4097"), "--n"),
    (_t("--d", "0"), "--d must be >= 1"),
    (_t("--d", "1025"), "--d"),
    (_t("--n", "3", "--d", "5"), "must be >= --d"),
    (["multiply", "--out", "{out}", "--d", "1"], "multiply task"),
    (["read", "--out", "{out}", "--n", "1"], "--n must be >= 2"),
    (_t("--k", "0"), "--k must be >= 1"),
    (_t("--kappa", "nan"), "--kappa must be a finite number"),
    (_t("--kappa", "inf"), "--kappa must be a finite number"),
    (_t("--kappa", "0.5"), "--kappa must be >= 1"),
    (_t("--sigma", "nan"), "--sigma must be a finite number"),
    (_t("--sigma", "0"), "--sigma must be > 0"),
    (_t("--sigma", "-1"), "--sigma must be > 0"),
    (_t("--lr", "nan"), "--lr must be a finite number"),
    (_t("--lr", "inf"), "--lr must be a finite number"),
    (_t("--lr", "0"), "--lr must be > 0"),
    (_t("--lr=-1e-3"), "--lr must be > 0"),
    (_t("--lr", "-1e-3"), "--lr: expected one argument"),
    (_t("--eta", "nan"), "--eta must be a finite number"),
    (_t("--eta", "0"), "--eta must be > 0"),
    (_t("--eta", "-0.1"), "--eta must be > 0"),
    (_t("--max-lr", "0"), "--max-lr must be > 0"),
    (_t("--gamma", "0"), "--gamma must be > 0"),
    (_t("--gamma", "2"), "--gamma"),
    (_t("--gamma", "nan"), "--gamma must be a finite number"),
    (_t("--threshold", "2"), "--threshold"),
    (_t("--threshold", "nan"), "--threshold must be a finite number"),
    (_t("--ema-decay", "1"), "--ema-decay must be < 1"),
    (_t("--ema-decay", "-0.5"), "--ema-decay must be >= 0"),
    (_t("--ema-lambda", "-1"), "--ema-lambda must be >= 0"),
    (_t("--skip-grad-norm", "nan"), "--skip-grad-norm"),
    (_t("--skip-grad-norm", "-1"), "--skip-grad-norm"),
    (_t("--metric-batches", "1"), "--metric-batches must be >= 2"),
    (_t("--metric-every", "0"), "--metric-every must be >= 1"),
    (_t("--step-size", "0"), "--step-size must be >= 1"),
    (_t("--warmup", "-1"), "--warmup must be >= 0"),
    (_t("--init-scale", "nan"), "--init-scale must be a finite number"),
    (_t("--scheduler", "cosine"), "invalid choice"),
    (_t("--model", "mamba"), "invalid choice"),
    (_t("--seed=-1"), "--seed must be >= 0"),
    (_t("--seed", str(2**64)), "--seed"),
    (_t("--threads", "0"), "--threads must be >= 1"),
    (_t("--threads", "-2"), "--threads must be >= 1"),
    (_t("--max-minutes", "0"), "--max-minutes must be > 0"),
    (_t("--max-minutes", "-1"), "--max-minutes must be > 0"),
    (_t("--max-minutes", "nan"), "--max-minutes must be a finite number"),
    (_t("--device", "gpu"), "--device must be cpu or cuda"),
    pytest.param(_t("--device", "cuda"), "no CUDA GPU",
                 marks=pytest.mark.skipif(not NO_CUDA, reason="a CUDA GPU is present")),
    (_t("--batch", "65536", "--width", "1024"), "of memory, above the limit"),
    (_t("--model", "lsa", "--width", "256", "--heads", "16", "--head-dim", "16", "--dtype", "float32"),
     "--allow-large"),
    (["multiply", "--out", "{out}", "--iterate"], "--iterate needs the gradient task"),
    (["icls", "--out", "{out}", "--iterate"], "--iterate needs the gradient task"),
    (_t("--resume"), "--resume"),
    (["gradient", "--out", "{tmp}/norun", "--resume"], "no checkpoint.safetensors"),
    (["gradient", "--out", "{tmp}/damaged", "--resume"], "cannot read"),
    (_t("--resume", "--steps", "0"), "--steps must be >= 1"),
    (["gradient", "--out", "{file}"], "is a file, not a folder"),
    (["gradient", "--out", "{file}/sub"], "is a file, not a folder"),
    (["gradient", "--out", "{file}", "--steps", "5"], "is a file, not a folder"),
    (["gradient"], "--out"),
    (["transformer", "--out", "{out}"], "invalid choice"),
    (_t("--no-such-flag"), "unrecognized arguments"),
    # a folder that holds a run is not replaced silently; --resume keeps the checkpoint's settings
    (["gradient", "--out", "{tmp}/run3", "--steps", "60"], "holds a run (checkpoint.safetensors"),
    (["gradient", "--out", "{tmp}/run3", "--steps", "60", "--resume", "--overwrite"], "give one"),
    (["gradient", "--out", "{tmp}/run3", "--steps", "60", "--resume", "--n", "4"],
     "--n 4 contradicts the checkpoint's n = 3"),
    (["gradient", "--out", "{tmp}/run3", "--steps", "60", "--resume", "--model", "lsa"],
     "--model lsa contradicts the checkpoint's model = baseconv"),
    (["multiply", "--out", "{tmp}/run3", "--steps", "60", "--resume"], "TASK multiply contradicts"),
    (["gradient", "--out", "{tmp}/run3", "--steps", "60", "--resume", "--recipe", "standard"],
     "--recipe standard (lr 0.001) contradicts the checkpoint's lr 0.01"),
]

RO = ["--out", "{out}", "--quiet"]


def _r(arch, layers, *extra):
    return [arch, "--layers", layers, *extra, *RO]


ROUNDOFF_CASES = [
    (_r("baseconv", "0"), "--layers must be >= 1"),
    (_r("baseconv", "-3"), "--layers must be >= 1"),
    (_r("baseconv", "1000000000"), "--layers 1000000000 exceeds the limit"),
    (_r("baseconv", "1e9"), "not a list of int values"),
    (_r("baseconv", ""), "--layers is empty"),
    (_r("baseconv", "4,,7"), "empty item"),
    (_r("baseconv", "four"), "not a list of int values"),
    (_r("baseconv", "5"), "not realisable"),
    (_r("baseconv", "4", "--dtypes", "float8"), "unknown dtype"),
    (_r("baseconv", "4", "--dtypes", "float64,"), "empty item"),
    (_r("baseconv", "4", "--backend", "jax"), "unknown backend"),
    (_r("baseconv", "4", "--conv", "winograd"), "unknown convolution method"),
    (_r("baseconv", "4", "--kappa", "nan"), "must be finite"),
    (_r("baseconv", "4", "--kappa", "5,inf"), "must be finite"),
    (_r("baseconv", "4", "--kappa", "0.5"), "--kappa must be >= 1"),
    (_r("baseconv", "4", "--sigma", "0"), "--sigma must be > 0"),
    (_r("baseconv", "4", "--sigma", "1,nan"), "must be finite"),
    (_r("baseconv", "4", "--kappa", ",".join(str(i) for i in range(1, 34))), "above the limit 32"),
    (_r("baseconv", "4", "--kappa", "1,2,3,4,5,6,7,8,9,10", "--sigma", "1,2,3,4,5,6,7,8", "--conv", "direct,fft"),
     "configurations"),
    (_r("baseconv", "4", "--eta", "0"), "--eta must be > 0"),
    (_r("baseconv", "4", "--eta", "nan"), "not an exact rational"),
    (_r("baseconv", "4", "--eta=-1/16"), "--eta must be > 0"),
    (_r("lsa", "4", "--lam", "-1"), "--lam must be >= 0"),
    (_r("lsa", "4", "--lam", "inf"), "not an exact rational"),
    (_r("baseconv", "4", "--batch", "0"), "--batch must be >= 1"),
    (_r("baseconv", "4", "--batch", "4097"), "exceeds the limit 4096"),
    (_r("baseconv", "4", "--n", "0"), "--n must be >= 1"),
    (_r("baseconv", "4", "--n", "1025"), "exceeds the limit 1024"),
    (_r("baseconv", "4", "--d", "0"), "--d must be >= 1"),
    (_r("baseconv", "4", "--d", "33", "--n", "40"), "exceeds the limit 32"),
    (_r("baseconv", "4", "--digits", "5"), "--digits must be >= 16"),
    (_r("baseconv", "4", "--digits", "401"), "--digits = 401 exceeds the limit 400"),
    (_r("baseconv", "4", "--seed", "-1"), "--seed must be >= 0"),
    (_r("baseconv", "4", "--layer-ref", "-1"), "--layer-ref must be >= 0"),
    (_r("baseconv", "4", "--layer-ref", "65"), "exceeds the limit 64"),
    (_r("baseconv", "4", "--layer-ref-layers", "0"), "--layer-ref-layers must be >= 1"),
    (_r("baseconv", "4", "--device", "gpu"), "--device must be cpu or cuda"),
    (_r("transformer", "4"), "unknown construction"),
    (_r("baseconv", "4", "--steps", "3"), "unrecognized arguments"),
    (_r("baseconv", "3001", "--n", "32", "--d", "32", "--batch", "512", "--dtypes", "float64", "--layer-ref", "0"),
     "mpfr multiply-adds"),
    (_r("baseconv", "31", "--n", "1024", "--d", "32", "--batch", "4096", "--dtypes", "float64", "--layer-ref", "0"),
     "of memory, above the limit"),
    (["baseconv", "--layers", "4", "--out", "{file}"], "is a file, not a folder"),
    (["baseconv", "--layers", "4", "--out", "{file}/sub"], "is a file, not a folder"),
    (["baseconv", "--out", "{out}"], "--layers"),
    # an option the run would ignore is refused
    (_r("lsa", "3", "--conv", "fft"), "lsa has none"),
    (_r("lsa", "3", "--conv", "direct,fft"), "lsa has none"),
]

REPORT_CASES = [
    (["{tmp}/missing", "--docs", "{out}"], "does not exist"),
    (["{file}", "--docs", "{out}"], "is not a folder"),
    (["{tmp}/runs_empty", "--docs", "{out}"], "no runs under"),
    (["{tmp}/runs_badjson", "--docs", "{out}"], "not a readable JSON history"),
    (["{tmp}/runs_notlist", "--docs", "{out}"], "not a non-empty list"),
    (["{tmp}/runs_emptylist", "--docs", "{out}"], "not a non-empty list"),
    (["{tmp}/runs_norecord", "--docs", "{out}"], "lacks step / test_mse"),
    (["{tmp}/runs_badstep", "--docs", "{out}"], "step must be an integer"),
    (["{tmp}/runs", "--docs", "{file}"], "is a file, not a folder"),
    (["{tmp}/runs", "--docs", "{file}/sub"], "is a file, not a folder"),
    (["--docs", "{out}"], "root"),
    (["{tmp}/runs", "--docs", "{out}", "--plots"], "unrecognized arguments"),
]

GOOD_HISTORY = '[{"step": 0, "test_mse": 1.0, "wall_s": 0.1, "loadavg": [0.1, 0.1, 0.1]}, ' \
               '{"step": 10, "test_mse": 0.5, "wall_s": 0.2, "loadavg": [0.1, 0.1, 0.1]}]'


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished 2-step training run (N = 3, D = 2), made once."""
    out = tmp_path_factory.mktemp("tiny") / "run3"
    assert train.main(["gradient", "--out", str(out), "--n", "3", "--d", "2", "--width", "4", "--layers", "1",
                       "--steps", "2", "--batch", "4", "--eval-batch", "8", "--eval-every", "1",
                       "--no-progress"]) == 0
    return out


@pytest.fixture
def arena(tmp_path, tiny_run):
    """The test folder: an existing file, run folders good and bad, a damaged checkpoint, a finished run."""
    (tmp_path / "existing.txt").write_text("keep me\n")
    shutil.copytree(tiny_run, tmp_path / "run3")
    files = {
        "runs/grad_a/history.json": GOOD_HISTORY,
        "runs_badjson/r/history.json": "{",
        "runs_notlist/r/history.json": '{"step": 1}',
        "runs_emptylist/r/history.json": "[]",
        "runs_norecord/r/history.json": '[{"step": 1}]',
        "runs_badstep/r/history.json": '[{"step": "one", "test_mse": 1.0}]',
        "damaged/checkpoint.safetensors": "not a safetensors file",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "runs_empty").mkdir()
    (tmp_path / "norun").mkdir()
    return tmp_path


def fill(argv, root: Path) -> list[str]:
    return [a.format(out=root / "out", file=root / "existing.txt", tmp=root) for a in argv]


@pytest.mark.parametrize("argv,msg", TRAIN_CASES)
def test_train_refuses(argv, msg, arena, monkeypatch, refused):
    monkeypatch.setattr(train, "Trainer", NoTrainer)
    refused(train.main, fill(argv, arena), arena, [msg])
    assert not (arena / "out").exists()


@pytest.mark.parametrize("argv,msg", ROUNDOFF_CASES)
def test_roundoff_refuses(argv, msg, arena, monkeypatch, refused):
    monkeypatch.setattr(roundoff, "run_config", tripwire)
    monkeypatch.setattr(roundoff, "reference", tripwire)
    refused(roundoff.main, fill(argv, arena), arena, [msg])
    assert not (arena / "out").exists()


@pytest.mark.parametrize("argv,msg", REPORT_CASES)
def test_report_refuses(argv, msg, arena, monkeypatch, refused):
    monkeypatch.setattr(report, "plot_compare", tripwire)
    monkeypatch.setattr(report, "save_closed", tripwire)
    refused(report.main, fill(argv, arena), arena, [msg])
    assert not (arena / "out").exists()


def test_allow_large_lifts_the_size_limits(arena):
    """--allow-large is the one way past LIMITS (it does not lift the lower bounds)."""
    a = train.parser().parse_args(["gradient", "--out", "x", "--width", "8193", "--allow-large"])
    train.check_args(a)
    a = train.parser().parse_args(["gradient", "--out", "x", "--width", "0", "--allow-large"])
    with pytest.raises(train.UsageError, match="--width must be >= 1"):
        train.check_args(a)


@pytest.mark.parametrize("make", [train.parser, roundoff.build_parser, report.parser])
def test_every_option_has_help(make):
    p = make()
    assert p.prog.startswith("python -m ") and p.description
    for act in p._actions:
        if isinstance(act, argparse._HelpAction):
            continue
        assert act.help and act.help != argparse.SUPPRESS, act.dest


def test_train_help_states_the_limits():
    text = train.parser().format_help()
    for key, value in train.LIMITS.items():
        assert f"--{key.replace('_', '-')}" in text and f"{value:,}" in text, key
    assert "--allow-large" in text and "--resume" in text


TRAIN_RUN = [sys.executable, "-m", "numerics.train", "gradient", "--n", "4", "--d", "2", "--width", "4",
             "--layers", "1", "--steps", "20", "--batch", "8", "--eval-every", "10", "--eval-batch", "16",
             "--threads", "1", "--out", "{out}"]


def _plain_log(text: str) -> None:
    assert "\r" not in text
    assert ": started" in text and ": done" in text, text


def test_train_progress_in_a_log_has_no_carriage_returns(tmp_path):
    """A real (tiny) training run with stderr redirected to a file: plain progress lines."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as fh:
        proc = subprocess.run(fill(TRAIN_RUN, tmp_path), cwd=REPO, stdout=subprocess.DEVNULL, stderr=fh,
                              env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=120)
    text = log.read_text()
    assert proc.returncode == 0, text
    _plain_log(text)
    assert (tmp_path / "out" / "result.json").is_file() and (tmp_path / "out" / "curves.png").is_file()


def test_roundoff_progress_in_a_log_has_no_carriage_returns(tmp_path, monkeypatch):
    """The same for a small roundoff sweep, in-process with sys.stderr a file (not a terminal)."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as fh:
        monkeypatch.setattr(sys, "stderr", fh)
        rc = roundoff.main(["baseconv", "--layers", "4,7", "--dtypes", "float64", "--backend", "numpy",
                            "--batch", "2", "--layer-ref", "0", "--out", str(tmp_path / "out")], out=io.StringIO())
        monkeypatch.undo()
    assert rc == 0
    _plain_log(log.read_text())
    assert (tmp_path / "out" / "roundoff.json").is_file()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temporary left


@pytest.mark.parametrize("kw", [
    {"model": "baseconv"}, {"model": "baseconv", "bias": "vector", "layers": 2},
    {"model": "lsa", "heads": 3}, {"model": "lsa", "heads": 4, "head_dim": 3},
    {"model": "transformer", "heads": 2}, {"model": "transformer", "heads": 2, "mlp": True, "layernorm": True},
    {"model": "baseconv", "mlp": True, "layernorm": True}, {"model": "lsa", "layernorm": True},
])
def test_memory_estimate_counts_the_parameters_exactly(kw):
    """train.param_count (used by the memory estimate instead of building the model) agrees with
    the model the Trainer builds."""
    from numerics.training.modules import ModelConfig, SequenceModel

    m = ModelConfig(**{"T": 7, "d_in": 5, "d_out": 3, "width": 8, "layers": 3, **kw})
    assert train.param_count(m) == sum(p.numel() for p in SequenceModel(m).parameters() if p.requires_grad)


# ------------------------------------------------------------------ start-up order, run folders, corrupt summaries

def test_train_usage_error_comes_before_torch():
    """A bad command line is refused before torch is imported (it took 8 s on a loaded machine)."""
    code = ("import sys; from numerics import train; rc = train.main(['gradient', '--out', 'x', '--steps', '0']); "
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["2", "False"], (r.stdout, r.stderr)
    assert r.stderr == "error: --steps must be >= 1, got 0\n"


def test_train_overwrite_replaces_and_resume_continues(arena, capsys):
    run = arena / "run3"
    small = ["--n", "3", "--d", "2", "--width", "4", "--layers", "1", "--batch", "4", "--eval-batch", "8",
             "--eval-every", "1", "--no-progress"]
    (run / "iterate.json").write_text("[]")  # a file of the earlier run that the new one does not write
    assert train.main(["gradient", "--out", str(run), "--steps", "3", "--overwrite", *small]) == 0
    assert json.loads((run / "result.json").read_text())["steps"] == 3 and not (run / "iterate.json").exists()
    # flags that agree with the checkpoint are accepted
    assert train.main(["gradient", "--out", str(run), "--steps", "4", "--resume", "--n", "3", "--width", "4",
                       "--no-progress"]) == 0
    assert [h["step"] for h in json.loads((run / "history.json").read_text())] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("text,needles", [
    ('{"quick": tr', ["not a readable JSON summary", "JSONDecodeError", "rerun python -m numerics.experiments"]),
    ("[1, 2]", ["not a summary this experiment wrote"]),
    ('{"quick": true}', ["not a summary this experiment wrote", "KeyError"]),
])
def test_experiments_report_refuses_a_corrupt_summary(tmp_path, refused, text, needles):
    from numerics.experiments.__main__ import main as experiments_main

    (tmp_path / "results" / "seed002-ntk").mkdir(parents=True)
    (tmp_path / "results" / "seed002-ntk" / "summary.json").write_text(text)
    argv = ["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "new" / "r.md")]
    refused(experiments_main, argv, tmp_path, ["seed002-ntk/summary.json", *needles])
    assert not (tmp_path / "new").exists()
