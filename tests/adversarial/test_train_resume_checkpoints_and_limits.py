"""Trust IV in the numerics commands: options a run would ignore, repeated list values, an empty
``--out``, a folder of another command's files, a checkpoint whose counters are not sane, a history
that does not belong to its checkpoint (``python -m numerics.train`` / ``numerics.roundoff``, table
driven as ``test_numerics_cli.py``: exit 2, one ``error:`` line, nothing touched); a run killed
with SIGKILL in the middle of a checkpoint and resumed is the run left alone (weights and
``history.json``) with no temporary file left; the benches never raise the address-space limit
they were given."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from numerics import roundoff, train
from numerics.training.names import MODEL_READS, MODELS
from polyverify.plumbing.cli import UsageError
from polyverify.plumbing.options import split_list
from tests.support import NoTrainer, tripwire

REPO = Path(__file__).resolve().parents[2]

SMALL = ["--n", "3", "--d", "2", "--width", "4", "--layers", "1", "--batch", "4", "--eval-batch", "8",
         "--eval-every", "1", "--no-progress", "--threads", "1"]


def _t(*extra):
    return ["gradient", "--out", "{out}", *extra]


def _resume(run):
    return ["gradient", "--out", "{tmp}/" + run, "--resume", "--steps", "4", "--no-progress"]


# (argv, substrings of the error line); "{out}" a folder that must never be created, "{tmp}" the test folder
TRAIN_CASES = [
    # a model option the chosen model does not read (MODEL_READS), given or set off its default
    (_t("--model", "lsa", "--bias", "vector"), ["--bias vector", "--model lsa does not read --bias", "only baseconv"]),
    (_t("--model", "lsa", "--conv", "fft"), ["--conv fft", "--model lsa does not read --conv"]),
    (_t("--model", "lsa", "--causal"), ["--causal:", "--model lsa does not read --causal"]),
    (_t("--model", "lsa", "--bias", "matrix"), ["--bias matrix", "does not read --bias"]),  # given, at its default
    (_t("--model", "transformer", "--width", "4", "--heads", "2", "--head-dim", "2"),
     ["--head-dim 2", "--model transformer does not read --head-dim", "only lsa"]),
    (_t("--model", "transformer", "--init-scale", "0.5"), ["--init-scale 0.5", "only baseconv and lsa"]),
    (_t("--model", "transformer", "--bias", "vector"), ["--bias vector"]),
    (_t("--heads", "2"), ["--heads 2", "--model baseconv does not read --heads", "only lsa and transformer"]),
    (_t("--model", "baseconv", "--heads", "1"), ["--heads 1", "does not read --heads"]),
    (_t("--head-dim", "2"), ["--head-dim 2", "--model baseconv does not read"]),
    # an empty --out is not "the current folder"
    (["gradient", "--out", ""], ["--out is empty"]),
    (["gradient", "--out", "", "--resume"], ["--out is empty"]),
    # a folder that holds another command's outputs is not a training run's folder
    (["gradient", "--out", "{tmp}/compared", *SMALL], ["--out", "not a training run's (report.json, report.md)"]),
    (["gradient", "--out", "{tmp}/compared", "--overwrite", *SMALL], ["not a training run's (report.json"]),
    (["gradient", "--out", "{tmp}/mixed", "--resume", "--steps", "4"], ["not a training run's (report.json)"]),
    (["gradient", "--out", "{tmp}/nested", *SMALL], ["not a training run's (run/)"]),
    # checkpoint metadata that is not a run's: each field named
    (_resume("step_neg"), ["--resume:", "metadata step = '-7' is not a non-negative integer"]),
    (_resume("step_huge"), ["metadata step = '1e30' is not a non-negative integer"]),
    (_resume("step_big"), ["metadata step = 1000000000000000000000000000000 exceeds the run's steps (2)"]),
    (_resume("step_past"), ["metadata step = 3 exceeds the run's steps (2)"]),
    (_resume("skipped_neg"), ["metadata skipped = '-1' is not a non-negative integer"]),
    (_resume("skipped_past"), ["metadata skipped = 3 exceeds its step (2)"]),
    (_resume("elapsed_huge"), ["metadata elapsed = '1e30' is not a number of seconds"]),
    (_resume("elapsed_neg"), ["metadata elapsed = '-7' is not a number of seconds"]),
    (_resume("elapsed_nan"), ["metadata elapsed = 'nan'"]),
    (_resume("steps_bad"), ["config's steps = 1e+30 is not a positive integer"]),
    (_resume("eval_every_0"), ["config's eval_every = 0 is not a positive integer"]),
    (_resume("no_step"), ["cannot read", "has no step"]),
    # a history that does not hold the checkpoint's records: resuming would lose them
    (_resume("hist_empty"), ["--resume:", "history.json has no record of step 0", "would lose"]),
    (_resume("hist_missing"), ["has no history.json", "checkpoint is at step 2"]),
    (_resume("hist_other"), ["has no record of step 2"]),
    (_resume("hist_notlist"), ["not a list of evaluation records"]),
    (_resume("hist_unsorted"), ["not increasing from 0"]),
    (_resume("hist_bad_json"), ["not a readable JSON history"]),
]

RO = ["--quiet", "--batch", "2", "--dtypes", "float64", "--backend", "numpy", "--layer-ref", "0"]

ROUNDOFF_CASES = [
    (["baseconv", "--layers", "4", "--out", "", *RO], ["--out is empty"]),
    (["baseconv", "--layers", "4", "--out", "{out}", "--quiet", "--dtypes", "float32,float32"],
     ["--dtypes: 'float32' is given twice"]),
    (["baseconv", "--layers", ",".join(["4"] * 40), "--out", "{out}", *RO], ["--layers: '4' is given twice"]),
    (["baseconv", "--layers", "4,7,4", "--out", "{out}", *RO], ["'4' is given twice in '4,7,4'"]),
    (["baseconv", "--layers", "4", "--kappa", "2,2.0", "--out", "{out}", *RO],
     ["--kappa: '2.0' (= '2') is given twice"]),
]


# ------------------------------------------------------------------ the test folder

def _rewrite_checkpoint(path: Path, **meta) -> None:
    """The checkpoint at ``path`` with metadata entries replaced (None: removed)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), framework="pt") as f:
        old = f.metadata()
    new = {k: v for k, v in {**old, **meta}.items() if v is not None}
    save_file(load_file(str(path)), str(path), metadata=new)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished 2-step run (N = 3, D = 2, an evaluation every step), made once."""
    out = tmp_path_factory.mktemp("t39") / "run"
    assert train.main(["gradient", "--out", str(out), "--steps", "2", *SMALL]) == 0
    return out


@pytest.fixture
def arena(tmp_path, tiny_run):
    (tmp_path / "compared").mkdir()
    (tmp_path / "compared" / "report.json").write_text("{}")
    (tmp_path / "compared" / "report.md").write_text("# a comparison\n")
    shutil.copytree(tiny_run, tmp_path / "mixed")
    (tmp_path / "mixed" / "report.json").write_text("{}")
    shutil.copytree(tiny_run, tmp_path / "nested" / "run")
    tampered = {"step_neg": {"step": "-7"}, "step_huge": {"step": "1e30"}, "step_big": {"step": str(10**30)},
                "step_past": {"step": "3"}, "skipped_neg": {"skipped": "-1"}, "skipped_past": {"skipped": "3"},
                "elapsed_huge": {"elapsed": "1e30"}, "elapsed_neg": {"elapsed": "-7"},
                "elapsed_nan": {"elapsed": "nan"},
                "no_step": {"step": None}}
    for name, meta in tampered.items():
        shutil.copytree(tiny_run, tmp_path / name)
        _rewrite_checkpoint(tmp_path / name / "checkpoint.safetensors", **meta)
    from safetensors import safe_open

    with safe_open(str(tiny_run / "checkpoint.safetensors"), framework="pt") as f:
        config = json.loads(f.metadata()["config"])
    for name, change in {"steps_bad": {"steps": 1e30}, "eval_every_0": {"eval_every": 0}}.items():
        shutil.copytree(tiny_run, tmp_path / name)
        _rewrite_checkpoint(tmp_path / name / "checkpoint.safetensors", config=json.dumps({**config, **change}))
    history = json.loads((tiny_run / "history.json").read_text())
    assert [h["step"] for h in history] == [0, 1, 2]
    histories = {"hist_empty": "[]", "hist_other": json.dumps(history[:2]), "hist_notlist": '{"step": 0}',
                 "hist_unsorted": json.dumps([history[0], history[2], history[1]]), "hist_bad_json": "[{"}
    for name, text in histories.items():
        shutil.copytree(tiny_run, tmp_path / name)
        (tmp_path / name / "history.json").write_text(text)
    shutil.copytree(tiny_run, tmp_path / "hist_missing")
    (tmp_path / "hist_missing" / "history.json").unlink()
    return tmp_path


def fill(argv, root: Path) -> list[str]:
    return [a.format(out=root / "out", tmp=root) for a in argv]


@pytest.mark.parametrize("argv,needles", TRAIN_CASES)
def test_train_refuses(argv, needles, arena, monkeypatch, refused):
    monkeypatch.setattr(train, "Trainer", NoTrainer)
    monkeypatch.chdir(arena)  # an empty --out must not mean this folder
    refused(train.main, fill(argv, arena), arena, needles)
    assert not (arena / "out").exists()


@pytest.mark.parametrize("argv,needles", ROUNDOFF_CASES)
def test_roundoff_refuses(argv, needles, arena, monkeypatch, refused):
    monkeypatch.setattr(roundoff, "run_config", tripwire)
    monkeypatch.setattr(roundoff, "reference", tripwire)
    monkeypatch.chdir(arena)  # an empty --out must not mean the default folder (out/roundoff/...) here
    refused(roundoff.main, fill(argv, arena), arena, needles)
    assert not (arena / "out").exists()


def test_library_resume_refuses_a_history_that_lost_records(arena):
    """Trainer.resume (the library, as the sweep's and the experiments' callers use it) refuses too."""
    from numerics.training.trainer import Trainer

    with pytest.raises(ValueError, match="has no record of step 0"):
        Trainer.resume(arena / "hist_empty", progress=False)
    with pytest.raises(ValueError, match="metadata step = '-7'"):
        Trainer.resume(arena / "step_neg", progress=False)


# ------------------------------------------------------------------ which model reads which option

@pytest.mark.parametrize("field,other", [("heads", 2), ("head_dim", 2), ("causal", True), ("conv_method", "fft"),
                                         ("init_scale", 0.5), ("bias", "vector"), ("mlp", True),
                                         ("layernorm", True), ("width", 8), ("layers", 2)])
@pytest.mark.parametrize("model", MODELS)
def test_model_reads_table_is_what_the_models_read(model, field, other, monkeypatch):
    """MODEL_READS (what the command refuses from) against the models themselves: a setting the
    table says a model ignores changes neither its parameters nor its output; one it reads does.
    ``conv_method``: the FFT and the direct sum differ only in rounding, which the residual stream
    can absorb bit for bit (it did under some thread settings), so what is compared is whether the
    forward runs the FFT convolution at all."""
    from constructions import conv as conv_module
    from numerics.training.modules import ModelConfig, SequenceModel

    if field == "conv_method":
        calls = []
        fft = conv_module._conv_fft

        def counted(*args, **kwargs):
            calls.append(1)
            return fft(*args, **kwargs)

        monkeypatch.setattr(conv_module, "_conv_fft", counted)

    base = ModelConfig(model=model, T=7, d_in=3, d_out=2, width=4, layers=1, heads=1, init_scale=0.1)

    def built(m):
        torch.manual_seed(0)
        return SequenceModel(m).double()

    a, b = built(base), built(dataclasses.replace(base, **{field: other}))
    u = torch.randn(2, 7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    sa, sb = a.state_dict(), b.state_dict()
    same = (sa.keys() == sb.keys() and all(sa[k].shape == sb[k].shape and torch.equal(sa[k], sb[k]) for k in sa)
            and torch.equal(a(u), b(u)))
    if field == "conv_method":
        calls.clear()
        a(u)
        assert not calls, "the direct model ran an FFT"
        b(u)
        same = not calls  # the 'fft' model ran the FFT convolution: it reads the setting
    assert same == (field not in MODEL_READS[model]), (model, field)


def test_every_model_option_is_in_the_table():
    assert set(train.MODEL_OPTIONS.values()) == {f for fields in MODEL_READS.values() for f in fields}


def test_sweep_cells_refuse_an_ignored_model_option():
    with pytest.raises(UsageError, match="--bias vector: --model lsa does not read --bias"):
        train.sweep_check({"task": "gradient", "model": "lsa", "bias": "vector", "width": 4, "steps": 2})


@pytest.mark.parametrize("text,conv,needle", [("0,1,0", int, "'0' is given twice"),
                                              ("a,b,a", str, "'a' is given twice"),
                                              ("1e-3,0.001", float, "'0.001' (= '1e-3') is given twice")])
def test_split_list_refuses_a_repeated_value(text, conv, needle):
    """The list parser of every command (roundoff's lists, the sweeps' grids): no silent shrinking."""
    with pytest.raises(UsageError, match=re.escape(needle)):
        split_list("--x", text, conv)
    assert split_list("--x", "3,1,2", int) == [3, 1, 2]


# ------------------------------------------------------------------ kill -9 in the middle of a checkpoint

KILLED = textwrap.dedent("""
    import os, signal, sys
    import safetensors.torch as st
    from numerics import train
    saves, save_file = [0], st.save_file
    def save(*a, **kw):  # the second checkpoint: its temporary file exists, empty; the process dies
        saves[0] += 1
        if saves[0] == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return save_file(*a, **kw)
    st.save_file = save
    sys.exit(train.main(sys.argv[1:]))
""")

RUN = ["gradient", "--n", "4", "--d", "2", "--width", "4", "--layers", "1", "--batch", "8", "--eval-batch", "16",
       "--eval-every", "10", "--checkpoint-every", "15", "--steps", "40", "--no-progress", "--threads", "1"]


def _machine_free(text: str) -> str:
    """history.json's text with the two measurements of the machine (wall seconds, load average) blanked."""
    text = re.sub(r'"wall_s": [-+0-9.eE]+', '"wall_s": 0', text)
    return re.sub(r'"loadavg": \[[^\]]*\]', '"loadavg": []', text)


def test_kill_9_mid_checkpoint_then_resume_is_the_uninterrupted_run(tmp_path):
    """Checkpoints at 15, 30, 40, evaluations every 10: killed while writing the checkpoint of step 30
    (history.json then holds steps 0 .. 30), resumed from step 15: the weights, the checkpoint and
    history.json are the uninterrupted run's (history byte for byte but for wall_s / loadavg: the
    record of step 20 averages the losses of steps 11-20, 11-15 of them from before the kill), and
    the empty temporary file the kill left is gone."""
    from safetensors.torch import load_file

    full, killed = tmp_path / "full", tmp_path / "killed"
    assert train.main([*RUN, "--out", str(full)]) == 0
    p = subprocess.run([sys.executable, "-c", KILLED, *RUN, "--out", str(killed)], cwd=REPO, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == -9, p.stderr
    left = sorted(q.name for q in killed.iterdir())
    assert any(n.startswith(".checkpoint.safetensors.") and n.endswith(".tmp") for n in left), left
    assert [h["step"] for h in json.loads((killed / "history.json").read_text())] == [0, 10, 20, 30]
    assert train.main([*RUN, "--out", str(killed), "--resume"]) == 0
    assert sorted(q.name for q in killed.iterdir()) == sorted(q.name for q in full.iterdir())  # no .tmp left
    for f in ("checkpoint.safetensors", "weights.safetensors"):
        a, b = load_file(str(full / f)), load_file(str(killed / f))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f
    ha, hb = (full / "history.json").read_text(), (killed / "history.json").read_text()
    assert _machine_free(ha) == _machine_free(hb)
    assert _machine_free(ha) != ha  # the blanking did blank something (and nothing else differs)


# ------------------------------------------------------------------ benches under a lower memory limit

def _lowered(limit: int):
    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return pre


@pytest.mark.parametrize("script,args", [
    ("bench_compiler.py", ["--scale", "--family", "random", "--sizes", "60", "--baseline-up-to", "0"]),
    ("bench_proof.py", ["--archs", "baseconv", "--sizes", "3x2", "--sympy-up-to", "0", "--full-up-to", "0",
                        "--paired-up-to", "0", "--no-randomized"]),
])
def test_bench_runs_under_a_lower_hard_limit(tmp_path, script, args):
    """Under a hard address-space limit below the bench's 12 GiB cap (a CI runner's ``prlimit
    --as=10G``) the bench's children do not try to raise it (setrlimit: 'not allowed to raise maximum
    limit'): they run under the limit given, and the bench says so in one line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = min(x for x in (10 * 2**30, soft, hard) if x != resource.RLIM_INFINITY)
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(REPO / "bench" / script), *args, "--json", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=300, preexec_fn=_lowered(limit))
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    notes = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(notes) == 1 and notes[0].startswith("note: the address-space limit this bench was given"), p.stderr
    assert "not allowed to raise" not in p.stdout
    d = json.loads(out.read_text())
    if script == "bench_compiler.py":
        assert [r["gates"] for r in d["runs"]] == [60] and all(r["proved"] for r in d["runs"]), d
    else:
        assert d["baseconv 3x2 flint"]["ok"] is True, d
