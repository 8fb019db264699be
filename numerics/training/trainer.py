"""The training loop: fresh data every step, periodic evaluation on fresh
problems, the gradient-cosine metric, checkpoints in safetensors, resume.

Outputs in ``out_dir``: ``history.json`` (one record per evaluation: step,
test MSE, train loss, LR, metric, skipped steps, wall seconds, load
average), ``checkpoint.safetensors`` (model, Adam and EMA state; the run's
configuration and scheduler state in the metadata), ``weights.safetensors``
(toolkit weight format, when the model has one), ``result.json`` and
``curves.png``.

Resume (:meth:`Trainer.resume`) continues a run exactly: the checkpoint holds every piece of state
the next steps and the next evaluation record read (weights, Adam, EMA, scheduler, the step and
skipped counters, the training losses since the last evaluation), so the weights and
``history.json`` of a run stopped anywhere (Ctrl-C, ``kill -9`` in the middle of a checkpoint) and
resumed are those of the run left alone; ``history.json`` byte for byte, but for the two
measurements of the machine in each record (``wall_s``, ``loadavg``).  Before it builds anything,
resume checks the checkpoint (:func:`read_checkpoint`: its counters are non-negative integers within
the run, its elapsed time a plausible number of seconds) and the history beside it
(:func:`read_history`: a record for every evaluation up to the checkpoint's step, so that none is
lost); then it removes the temporary files of the run's own names that a killed run left
(:func:`remove_stale_temporaries`).

Host synchronisation (issue 45 item 4).  On a GPU every read of a device value (``float(t)``,
``.item()``, ``if t:``, a blocking copy) stalls the host until the card has caught up, so
:meth:`Trainer.run` trains in *chunks* of at most :data:`SYNC_EVERY` steps (ending at every
evaluation and checkpoint) that read nothing from the device: the training losses and the
step-skipping test (:func:`recipe.grad_ok`: the gradient norm's same sums in the same order, decided
on the device) stay on the device, each batch is sampled on the host as before (the same float64
problems) and moves in one non-blocking copy from pinned memory.  At the chunk's end one read
(:meth:`Trainer.flush`) brings back its losses and flags.  A chunk in which some step should have
been skipped is rolled back to the state saved at its start (weights, Adam, EMA, scheduler,
counters) and replayed with the step-by-step host check (:meth:`Trainer.train_step`), so the weights
and every record are those of the step-by-step loop (bit for bit on the CPU;
``tests/numerics/training/test_host_syncs.py`` counts the reads per step with
:class:`numerics.training.host_syncs.HostSyncCounter`); the chunk after a rolled-back one runs step
by step, speculation resuming after a chunk without a skip.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from polyverify.plumbing.cli import atomic_path, atomic_write_text, interactive, make_folder
from polyverify.plumbing.cli import progress as progress_reporter

from . import jsonio
from .modules import ModelConfig, SequenceModel, export_weights
from .recipe import RecipeConfig, cosine_metric, flat_grad, grad_norm, grad_ok, make_ema, make_scheduler
from .tasks import Task, make_task

from .names import CKPT, stale_temporaries  # noqa: E402

#: the most training time (seconds) a checkpoint may say its run has taken: ten years
MAX_ELAPSED_S = 10 * 365.25 * 86400
#: the checkpoint's tensor of the training losses since the last evaluation record (the next
#: record's ``train_loss`` is their mean)
RECENT = "run.recent_losses"
#: the most training steps :meth:`Trainer.run` takes between two reads of the device (and the most a
#: rolled-back chunk replays); the progress bar's loss is shown at these reads
SYNC_EVERY = 50


@dataclass
class TaskConfig:
    name: str = "gradient"
    n: int | None = None
    d: int | None = None
    kappa: float = 5.0
    sigma: float = 1.0
    k: int = 1
    eta: float | None = None
    param_seed: int = 0

    def build(self) -> Task:
        return make_task(self.name, n=self.n, d=self.d, kappa=self.kappa, sigma=self.sigma, k=self.k,
                         eta=self.eta, param_seed=self.param_seed)


@dataclass
class TrainConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    steps: int = 1000
    batch: int = 1024
    eval_every: int = 1000
    eval_batch: int = 2048
    checkpoint_every: int = 10_000
    seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    threads: int | None = None

    def to_json(self):
        return {"task": asdict(self.task), "model": self.model.to_json(), "recipe": self.recipe.to_json(),
                **{k: getattr(self, k) for k in ("steps", "batch", "eval_every", "eval_batch",
                                                   "checkpoint_every", "seed", "dtype", "device", "threads")}}

    @classmethod
    def from_json(cls, d) -> "TrainConfig":
        r = dict(d["recipe"])
        r["betas"] = tuple(r["betas"])
        return cls(task=TaskConfig(**d["task"]), model=ModelConfig(**d["model"]), recipe=RecipeConfig(**r),
                   **{k: d[k] for k in ("steps", "batch", "eval_every", "eval_batch", "checkpoint_every",
                                         "seed", "dtype", "device", "threads")})


def rng_for(seed: int, stream: int, *idx: int) -> np.random.Generator:
    """Independent generator per (seed, stream, step, ...): 0 train, 1 eval, 2 metric."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream, *idx])))


def build_model(cfg: TrainConfig, task: Task) -> SequenceModel:
    mc = cfg.model
    mc.T, mc.d_in, mc.d_out = task.T, task.d_in, task.d_out
    torch.manual_seed(cfg.seed)
    return SequenceModel(mc).to(device=cfg.device, dtype=getattr(torch, cfg.dtype))


class Trainer:
    def __init__(self, cfg: TrainConfig, out_dir=None, *, progress: bool = True):
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.dtype = getattr(torch, cfg.dtype)
        self.task = cfg.task.build()
        self.model = build_model(cfg, self.task)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        rc = cfg.recipe
        self.opt = torch.optim.Adam(self.params, lr=rc.lr, betas=rc.betas, eps=rc.adam_eps)
        self.sched = make_scheduler(rc)
        self.ema = make_ema(rc, self.params)
        self.step = 0
        self.skipped = 0
        self.elapsed = 0.0
        self.history: list[dict] = []
        self.recent: list[float] = []  # the training losses since the last evaluation record
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (loss, ok) of the chunk's steps, on the device
        self._mark: dict | None = None  # the state at the chunk's start (None: no chunk open)
        self._careful = False  # the current chunk runs step by step (the last one was rolled back)
        self._careful_skips = 0  # steps skipped in the current step-by-step chunk
        self.stopped_by_time = False
        self.out_dir = Path(out_dir) if out_dir else None
        self.progress = progress

    # ------------------------------------------------------------ data
    def tensors(self, u, y, dtype=None):
        """``u`` and ``y`` (host arrays) as tensors of ``dtype`` on the run's device: cast on the host
        (the rounding ``torch.as_tensor`` does), one buffer, one non-blocking copy (from pinned memory
        on a GPU), so that moving a batch does not stall the host."""
        u, y = np.asarray(u), np.asarray(y)
        flat = torch.from_numpy(np.concatenate([u.reshape(-1), y.reshape(-1)])).to(dtype or self.dtype)
        dev = torch.device(self.cfg.device)
        if dev.type == "cuda":
            flat = flat.pin_memory()
        flat = flat.to(dev, non_blocking=True)
        return flat[:u.size].view(u.shape), flat[u.size:].view(y.shape)

    def loss_on(self, u, y, model=None):
        out = (model or self.model)(u)[:, self.task.out_rows]
        return torch.mean((out - y) ** 2)

    @torch.no_grad()
    def evaluate(self, n: int | None = None, stream_idx: int | None = None, *, float64: bool = False) -> float:
        """Test MSE on ``n`` fresh problems.  ``float64=True``: the same problems through a float64
        copy of the model (the trained weights exactly, the arithmetic in double precision), so a
        float32 run's error is not confused with float32 roundoff in the evaluation."""
        n = n or self.cfg.eval_batch
        rng = rng_for(self.cfg.seed, 1, self.step if stream_idx is None else stream_idx)
        model, dtype = self.model, self.dtype
        if float64 and dtype != torch.float64:
            import copy

            model, dtype = copy.deepcopy(self.model).to(torch.float64), torch.float64
        # the chunks' sum on the device in float64, in order (each float32 loss times b is exact in
        # float64: the sum a host loop of float(loss) * b makes), read once
        tot, done = None, 0
        while done < n:
            b = min(1024, n - done)
            u, y = self.tensors(*self.task.sample(b, rng), dtype=dtype)
            part = self.loss_on(u, y, model).to(torch.float64) * b
            tot = part if tot is None else tot + part
            done += b
        return tot.item() / n

    def gradient_metric(self) -> float:
        """Eq. (6) on ``metric_batches`` fresh minibatches at the current weights."""
        rc = self.cfg.recipe
        rng = rng_for(self.cfg.seed, 2, self.step)
        grads = []
        for _ in range(rc.metric_batches):
            u, y = self.tensors(*self.task.sample(self.cfg.batch, rng))
            self.opt.zero_grad(set_to_none=True)
            self.loss_on(u, y).backward()
            grads.append(flat_grad(self.params).detach().clone())
        self.opt.zero_grad(set_to_none=True)
        return cosine_metric(grads, rc.metric_pairs)

    # ------------------------------------------------------------ loop
    def train_step(self) -> tuple[float, bool]:
        """One step, checked on the host (it reads the gradient norm and the loss): the step-by-step
        loop, which a rolled-back chunk replays; the loss and whether the step was taken.
        :meth:`advance` takes steps without reading the device."""
        if self._pending:  # a chunk is open: end it first (its steps come before this one)
            self.flush()
        rc = self.cfg.recipe
        loss = self._loss_and_gradient()
        gn = grad_norm(self.params)
        ok = math.isfinite(gn) and gn <= rc.skip_grad_norm
        if ok:
            self._optimizer_step()
        else:
            self.skipped += 1
        self._advance_schedule()
        return float(loss.detach()), ok

    def _loss_and_gradient(self):
        """The step's batch (seeded by the step number), its loss and the gradient in the parameters."""
        u, y = self.tensors(*self.task.sample(self.cfg.batch, rng_for(self.cfg.seed, 0, self.step)))
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_on(u, y)
        loss.backward()
        return loss

    def _optimizer_step(self) -> None:
        """The optimiser's step at the schedule's learning rate, the EMA around it."""
        for g in self.opt.param_groups:
            g["lr"] = self.sched.lr
        self.ema.before_step()
        saved = self.ema.save_params()
        self.opt.step()
        self.ema.after_step(saved)

    def _advance_schedule(self) -> None:
        """One step counted; the adaptive schedule's metric where due; the schedule stepped."""
        rc = self.cfg.recipe
        self.step += 1
        if rc.scheduler == "adaptive" and self.step % rc.metric_every == 0:
            self.sched.observe(self.gradient_metric())
        self.sched.step(self.step)

    def _step_on_device(self) -> None:
        """:meth:`train_step`'s step, reading nothing from the device: the step is taken and its loss
        and whether it should have been skipped are kept (on the device) for :meth:`flush`."""
        if self._mark is None:
            self._mark = self._snapshot()
        loss = self._loss_and_gradient()
        ok = grad_ok(self.params, self.cfg.recipe.skip_grad_norm)
        self._optimizer_step()
        self._pending.append((loss.detach(), ok))
        self._advance_schedule()

    def _one_step(self) -> None:
        """The next step of the current chunk: on the device, or (after a rolled-back chunk) checked."""
        if self._careful:
            loss, ok = self.train_step()
            self.recent.append(loss)
            self._careful_skips += not ok
        else:
            self._step_on_device()

    def advance(self, n: int) -> None:
        """``n`` steps as :meth:`run` takes them (chunks of at most :data:`SYNC_EVERY`, each read once
        at its end), with no evaluation and no checkpoint."""
        for _ in range(n):
            self._one_step()
            if self.step % SYNC_EVERY == 0:
                self.flush()
        self.flush()

    def _snapshot(self) -> dict:
        """Everything a step changes, copied (on the device: no read)."""
        with torch.no_grad():
            return {"tensors": [t.detach().clone() for t in itertools.chain(self.model.parameters(), self.model.buffers())],
                    "opt": {p: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in self.opt.state[p].items()}
                            for p in self.params if p in self.opt.state},
                    "lrs": [g["lr"] for g in self.opt.param_groups],
                    "ema": [b.clone() for b in getattr(self.ema, "buf", [])], "ema_t": getattr(self.ema, "t", None),
                    "sched": dict(self.sched.state()), "step": self.step, "skipped": self.skipped}

    def _restore(self, m: dict) -> None:
        with torch.no_grad():
            for t, v in zip(itertools.chain(self.model.parameters(), self.model.buffers()), m["tensors"]):
                t.copy_(v)
            for p in self.params:
                if p in m["opt"]:
                    self.opt.state[p] = m["opt"][p]
                else:
                    self.opt.state.pop(p, None)
            for g, lr in zip(self.opt.param_groups, m["lrs"]):
                g["lr"] = lr
            for b, v in zip(getattr(self.ema, "buf", []), m["ema"]):
                b.copy_(v)
            if m["ema_t"] is not None:
                self.ema.t = m["ema_t"]
        self.sched.load(m["sched"])
        self.step, self.skipped = m["step"], m["skipped"]
        self.opt.zero_grad(set_to_none=True)

    def flush(self) -> None:
        """End the current chunk: one read of its losses and skip flags.  Where every step should
        have been taken, its losses join :attr:`recent`; otherwise the chunk is rolled back to its
        start and replayed by :meth:`train_step`, and the next chunk runs step by step too."""
        pending, mark = self._pending, self._mark
        self._pending, self._mark = [], None
        if self._careful:  # a step-by-step chunk ends: speculate again unless it skipped a step
            self._careful = self._careful_skips > 0
            self._careful_skips = 0
        if not pending:
            return
        n = len(pending)
        vals = torch.cat([torch.stack([lo for lo, _ in pending]).to(torch.float64),
                          torch.stack([ok for _, ok in pending]).to(torch.float64)]).tolist()
        if all(vals[n:]):
            self.recent.extend(vals[:n])
            return
        self._restore(mark)
        self._careful, self._careful_skips = True, 0
        for _ in range(n):
            loss, ok = self.train_step()
            self.recent.append(loss)
            self._careful_skips += not ok

    def run(self, steps: int | None = None, *, max_seconds: float | None = None) -> dict:
        """Train to ``steps`` (default the configuration's); with ``max_seconds``, stop earlier once
        that much wall time (this run plus any resumed time) has passed, after an evaluation."""
        if steps is not None:
            self.cfg.steps = steps  # the run's target, as its checkpoints and result.json state it
        steps = self.cfg.steps
        cfg = self.cfg
        bar = None
        if self.progress and steps > self.step:
            bar = self._progress_bar(steps)
        t0 = time.perf_counter() - self.elapsed
        self.flush()
        if self.step == 0 and not self.history:
            self._record(t0)
        while self.step < steps:
            if max_seconds is not None and time.perf_counter() - t0 >= max_seconds:
                self.flush()
                if self.history[-1]["step"] != self.step:
                    self._record(t0)
                self.stopped_by_time = True
                break
            self._one_step()
            checkpoint = self.out_dir and (self.step % cfg.checkpoint_every == 0 or self.step == steps)
            if self.step % SYNC_EVERY == 0 or self.step % cfg.eval_every == 0 or self.step == steps or checkpoint:
                self.flush()
            if bar is not None:
                bar.update(1)
                if self.step % SYNC_EVERY == 0:
                    bar.set_postfix(loss=f"{self.recent[-1]:.2e}", lr=f"{self.sched.lr:.1e}", refresh=False)
            if self.step % cfg.eval_every == 0 or self.step == steps:
                self._record(t0)
                if bar is not None:
                    bar.set_postfix(test=f"{self.history[-1]['test_mse']:.2e}", lr=f"{self.sched.lr:.1e}")
            if checkpoint:
                self.elapsed = time.perf_counter() - t0
                self.save(self.out_dir / CKPT)
        self.flush()
        if bar is not None:
            bar.close()
        self.elapsed = time.perf_counter() - t0
        if self.out_dir and self.stopped_by_time:
            self.save(self.out_dir / CKPT)
        return self.finish()

    def _progress_bar(self, steps: int):
        """Steps ``self.step .. steps``: a tqdm bar on a terminal (loss, LR, last test MSE), plain
        lines in a log (``polyverify.plumbing.cli.progress``: no carriage returns)."""
        desc = f"{self.cfg.model.model}/{self.task.name}"
        if interactive():
            return progress_reporter(steps, desc, initial=self.step, dynamic_ncols=True, mininterval=1.0)
        if self.step:
            desc += f" (resumed at step {self.step} of {steps})"
        return progress_reporter(steps - self.step, desc)

    def _record(self, t0):
        """The evaluation record of the current step; its train_loss is the mean of the training
        losses since the last record (NaN if none), which it consumes."""
        self.flush()
        train_loss = float(np.mean(self.recent)) if self.recent else float("nan")
        self.recent = []
        st = self.sched.state()
        rec = {"step": self.step, "test_mse": self.evaluate(), "train_loss": train_loss, "lr": st["lr"],
               **({"test_mse_f64": self.evaluate(float64=True)} if self.dtype != torch.float64 else {}),
               "metric": st["last_metric"], "metric_ema": st["metric_ema"], "skipped": self.skipped,
               "wall_s": round(time.perf_counter() - t0, 2), "loadavg": list(os.getloadavg())}
        self.history.append(rec)
        if self.out_dir:
            atomic_write_text(self.out_dir / "history.json", jsonio.dumps(self.history, indent=1))  # NaN: null + note

    def finish(self) -> dict:
        res = {"config": self.cfg.to_json(), "task": self.task.describe(), "steps": self.step,
               "final_test_mse": self.history[-1]["test_mse"] if self.history else None,
               "best_test_mse": min((h["test_mse"] for h in self.history), default=None),
               **({"final_test_mse_f64": self.history[-1]["test_mse_f64"]}
                  if self.history and "test_mse_f64" in self.history[-1] else {}),
               "skipped": self.skipped, "wall_s": round(self.elapsed, 1), "stopped_by_time": self.stopped_by_time, "loadavg_end": list(os.getloadavg()),
               "params": sum(p.numel() for p in self.params)}
        if self.out_dir:
            make_folder(self.out_dir)
            if self.model.exportable():
                tinfo = {**self.task.describe(), **{k: getattr(self.task, k) for k in ("kappa", "sigma", "eta", "k")
                                                     if isinstance(getattr(self.task, k, None), (int, float))}}
                with atomic_path(self.out_dir / "weights.safetensors") as tmp:
                    export_weights(self.model, tmp, name=f"trained-{self.cfg.model.model}-{self.task.name}",
                                   notes={"task": tinfo})
                res["weights"] = str(self.out_dir / "weights.safetensors")
            atomic_write_text(self.out_dir / "result.json", jsonio.dumps(res, indent=1))
            from .figures import plot_curves

            plot_curves(self.history, self.out_dir / "curves.png",
                        title=f"{self.cfg.model.model} {self.task.name} ({self.cfg.recipe.scheduler}, ema={self.cfg.recipe.ema})")
        return res

    # ------------------------------------------------------------ checkpoints
    def save(self, path):
        from safetensors.torch import save_file

        self.flush()

        t = {f"model.{k}": v.detach().contiguous() for k, v in self.model.state_dict().items()}
        for i, p in enumerate(self.params):
            for k, v in self.opt.state.get(p, {}).items():
                t[f"opt.{i}.{k}"] = (v if torch.is_tensor(v) else torch.tensor(v)).detach().reshape(v.shape if torch.is_tensor(v) else ()).contiguous()
        for k, v in self.ema.state().items():
            t[k] = v.detach().contiguous()
        t[RECENT] = torch.tensor(self.recent, dtype=torch.float64).reshape(-1)
        meta = {"config": json.dumps(self.cfg.to_json()), "step": str(self.step), "skipped": str(self.skipped),
                "elapsed": str(self.elapsed), "sched": json.dumps(self.sched.state())}
        path = Path(path)
        with atomic_path(path) as tmp:  # the folder made if missing
            save_file({k: v.cpu() for k, v in t.items()}, str(tmp), metadata=meta)

    @classmethod
    def resume(cls, path, out_dir=None, *, steps: int | None = None, progress=True, device=None) -> "Trainer":
        """The run saved in the checkpoint ``path`` (or ``path/checkpoint.safetensors``), its history
        read from ``out_dir`` (default: the checkpoint's folder), ready to continue to ``steps``.  A
        checkpoint or a history that is not sane (:func:`read_checkpoint`, :func:`read_history`) is a
        ValueError naming what; the stale temporary files a killed run left in ``out_dir`` are removed."""
        from safetensors.torch import load_file

        path = Path(path)
        if path.is_dir():
            path = path / CKPT
        cfg, state = read_checkpoint(path)
        if steps is not None:
            if steps < state["step"]:
                raise ValueError(f"{path} has trained {state['step']} steps, more than the {steps} asked for")
            cfg.steps = steps
        if device is not None:
            cfg.device = device
        out = Path(out_dir) if out_dir else path.parent
        history = read_history(out, state["step"], cfg)
        tr = cls(cfg, out, progress=progress)
        t = load_file(str(path), device=cfg.device)
        try:
            tr.model.load_state_dict({k[6:]: v for k, v in t.items() if k.startswith("model.")})
            for i, p in enumerate(tr.params):
                st = {k.split(".", 2)[2]: v for k, v in t.items() if k.startswith(f"opt.{i}.")}
                if st:
                    if "step" in st:
                        st["step"] = st["step"].cpu()
                    tr.opt.state[p] = st
            tr.ema.load(t)
        except (RuntimeError, KeyError) as e:  # tensors that do not fit the model the config builds
            raise ValueError(f"{path}: its tensors do not fit the run its config describes "
                             f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
        tr.step, tr.skipped, tr.elapsed = state["step"], state["skipped"], state["elapsed"]
        tr.sched.load(state["sched"])
        tr.recent = t[RECENT].tolist() if RECENT in t else []
        tr.history = history
        remove_stale_temporaries(out)
        return tr


def _counter(meta: dict, key: str, path, hi: int, what: str) -> int:
    text = meta[key]
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"{path}: its metadata {key} = {text!r:.40} is not a non-negative integer")
    if len(text.lstrip("0")) > len(str(hi)) or int(text) > hi:
        raise ValueError(f"{path}: its metadata {key} = {text:.40} exceeds {what} ({hi})")
    return int(text)


def read_checkpoint(path) -> tuple[TrainConfig, dict]:
    """The run configuration of the checkpoint ``path`` and its checked state: ``step`` (an integer,
    0 .. the run's steps), ``skipped`` (0 .. step), ``elapsed`` (seconds, finite, 0 ..
    ``MAX_ELAPSED_S``) and ``sched`` (the scheduler's state); anything else is a ValueError naming
    the field."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        missing = [k for k in ("config", "step", "skipped", "elapsed", "sched") if k not in meta]
        if missing:
            raise KeyError(f"its metadata has no {', '.join(missing)}")
        cfg = TrainConfig.from_json(json.loads(meta["config"]))
        sched = json.loads(meta["sched"])
        if not isinstance(sched, dict):
            raise TypeError(f"its metadata sched is not a JSON object: {meta['sched']!r:.60}")
    except Exception as e:  # noqa: BLE001 -- a damaged checkpoint is bad input, reported in one line
        raise ValueError(f"cannot read {path} ({type(e).__name__}: {str(e)[:300]})") from None
    for key in ("steps", "batch", "eval_every", "eval_batch", "checkpoint_every"):
        v = getattr(cfg, key)
        if type(v) is not int or v < 1:
            raise ValueError(f"{path}: its config's {key} = {v!r:.40} is not a positive integer")
    step = _counter(meta, "step", path, cfg.steps, "the run's steps")
    skipped = _counter(meta, "skipped", path, step, "its step")
    try:
        elapsed = float(meta["elapsed"])
    except ValueError:
        elapsed = math.nan
    if not (math.isfinite(elapsed) and 0 <= elapsed <= MAX_ELAPSED_S):
        raise ValueError(f"{path}: its metadata elapsed = {meta['elapsed']!r:.40} is not a number of seconds in "
                         f"0 .. {MAX_ELAPSED_S:.3g}")
    return cfg, {"step": step, "skipped": skipped, "elapsed": elapsed, "sched": sched}


def read_history(out_dir, step: int, cfg: TrainConfig) -> list[dict]:
    """The evaluation records of ``out_dir/history.json`` up to ``step`` (the checkpoint's), checked
    against the checkpoint: a list of records with increasing integer steps holding one for every
    evaluation the run made up to ``step`` (each multiple of ``eval_every``, and ``step`` itself
    where the checkpoint was not a periodic one: the end of a run, a --max-minutes stop).  A history
    that lacks one (``[]``, another run's, a missing file) would lose those records: a ValueError."""
    hist = Path(out_dir) / "history.json"
    if not hist.is_file():
        if step == 0:
            return []
        raise ValueError(f"{out_dir} has no history.json, though the checkpoint is at step {step}: resuming would "
                         f"lose the run's evaluation records")
    try:
        data = json.loads(hist.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{hist}: not a readable JSON history ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) and type(r.get("step")) is int for r in data):
        raise ValueError(f"{hist}: not a list of evaluation records with integer steps")
    steps = [r["step"] for r in data]
    if any(b <= a for a, b in zip(steps, steps[1:])) or (steps and steps[0] < 0):
        raise ValueError(f"{hist}: its records' steps are not increasing from 0")
    kept = [r for r in data if r["step"] <= step]
    have = {r["step"] for r in kept}
    due = itertools.chain(range(0, step + 1, cfg.eval_every), [step] if step % cfg.checkpoint_every else [])
    lost = next((s for s in due if s not in have), None)
    if lost is not None:
        raise ValueError(f"{hist} has no record of step {lost} (the checkpoint is at step {step}, an evaluation every "
                         f"{cfg.eval_every}): it is not this checkpoint's history, and resuming would lose the "
                         f"records it lacks")
    return [jsonio.restore(r) for r in kept]


def remove_stale_temporaries(out_dir) -> list[Path]:
    """Remove the temporary files of the run's own names (``names.stale_temporaries``) that a
    killed run left in ``out_dir``; the paths removed."""
    gone = []
    for p in stale_temporaries(out_dir):
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        gone.append(p)
    return gone
