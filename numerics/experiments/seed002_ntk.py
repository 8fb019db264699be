"""Seed 002: the linear-RNN NTK (Thm. 3.3, eq. (21)) and the training experiments of Figs. 1 and 3.

Model (seed 002 eq. (1)): ``h_t = W h_{t-1} / sqrt(n) + F x_t``,
``y_t = C h_t / sqrt(n)``, init ``W_ij ~ N(0, nu_W)``, ``F ~ N(0, nu_F)``, ``C ~ N(0, nu_C)``; it is the
causal convolution with impulse response ``L_j = n^{-(j+1)/2} C W^j F`` (Prop. 2.1).  The scaled
convolution is ``L_j = sqrt(rho_j) theta_j`` with
``rho_j = nu_C (j nu_F nu_W^{j-1} + nu_W^j) + nu_F nu_W^j`` (eq. (21)).

* ``ntk`` cells: the lag Gram ``G[j, j'] = <dL_j/dtheta, dL_j'/dtheta>`` of a width-n RNN at its
  random init, with the Jacobians taken by torch autograd with respect to the raw (W, F, C) of
  eq. (1); the NTK on inputs x, x' is ``T(x)^T G T(x')`` (eq. (17)-(18)), so G against
  ``diag(rho)`` is the NTK against its limit.  Reported: the relative Frobenius error of G and of
  the NTK matrix on 8 random input sequences, and the largest cross-lag term ``|G[j, j']|``, j != j'.
* ``dynamics`` cells (Fig. 1): a teacher RNN (4 hidden units, eq. (1) with n = 4, nu_W = 0.3,
  nu_F = nu_C = 1), inputs ``x_t ~ N(0, 1)``, T = 10, 50 training and 50 test sequences, output noise
  at SNR 20 dB (noise variance = the mean squared clean training output / 100); students: a width-n
  RNN and the scaled convolution initialised to the RNN's impulse response (eq. (58)), both trained
  by full-batch GD with the same learning rate on the same loss (1/2 the sum of squared errors; the
  paper says "mean-squared error" and lr 1e-4, whose scale only fixes the time axis).
* ``delay`` cells (Fig. 3): n_x = 15, n_y = 1, T = 20, 10 training and 10 test sequences, SNR 20 dB,
  the teacher's output delayed by ``delay`` steps; the scaled and the unscaled (``rho_j = 1``)
  convolution trained from zero by full-batch GD with the same step size (1 / the largest
  eigenvalue of the scaled model's kernel on the training set) for a fixed number of steps; the
  normalised test MSE (MSE / mean squared test target), averaged over teacher draws.  The RNN itself
  is not trained here (Fig. 1's cells measure RNN = scaled convolution).
"""
from __future__ import annotations

import math

import numpy as np

from polyverify.plumbing.options import CellConfig, ConfigError, cell_config, non_negative, one_of, option, positive

from .common import rows_ok, std_err

NAME = "seed002-ntk"
TITLE = "Seed 002: the linear-RNN NTK (Thm. 3.3) and RNN vs scaled convolution (Figs. 1 and 3)"
REFERENCE = "seed 002 (Emami et al.), Thm. 3.3 eq. (21), Sec. 5.1 Figs. 1 and 3"

NU = {"W": 0.3, "F": 1.0, "C": 1.0}


def rho(T: int, nu_W=NU["W"], nu_F=NU["F"], nu_C=NU["C"]) -> np.ndarray:
    """Eq. (21): ``rho_j = nu_C (j nu_F nu_W^{j-1} + nu_W^j) + nu_F nu_W^j`` (``rho_0 = nu_C + nu_F``)."""
    j = np.arange(T, dtype=float)
    first = np.where(j > 0, j * nu_F * nu_W ** np.maximum(j - 1, 0), 0.0)
    return nu_C * (first + nu_W ** j) + nu_F * nu_W ** j


def toeplitz_inputs(x: np.ndarray) -> np.ndarray:
    """``T(x)`` of eq. (18) for a scalar sequence x (T,): ``[j, t] = x[t - j]`` for t >= j, else 0."""
    T = len(x)
    M = np.zeros((T, T))
    for j in range(T):
        M[j, j:] = x[:T - j]
    return M


# ====================================================================== the cells' configs

_N = (positive, ">= 1")
_SEED = (non_negative, ">= 0")


@cell_config
class NtkCell(CellConfig):
    """An ``ntk`` cell: the lag Gram of a width-``n`` RNN at its random init (``seed``), T lags, the NTK
    on ``inputs`` random sequences."""
    part: str = option("ntk", choices=("ntk",))
    n: int = option(check=_N)
    T: int = option(check=_N)
    seed: int = option(check=_SEED)
    inputs: int = option(8, check=_N)


@cell_config
class DynamicsCell(CellConfig):
    """A ``dynamics`` cell (Fig. 1): a width-``n`` RNN and the scaled convolution trained side by side
    (``steps`` of full-batch GD at ``lr``), the losses recorded at about ``points`` steps."""
    part: str = option("dynamics", choices=("dynamics",))
    n: int = option(check=_N)
    steps: int = option(check=_N)
    lr: float = option(check=(lambda x: x > 0, "> 0"))
    seed: int = option(0, check=_SEED)
    T: int = option(10, check=_N)
    n_train: int = option(50, check=_N)
    n_test: int = option(50, check=_N)
    snr_db: float = 20.0
    points: int = option(50, check=_N)


@cell_config
class DelayCell(CellConfig):
    """A ``delay`` cell (Fig. 3): the scaled and the unscaled convolution on a teacher delayed by
    ``delay`` steps, ``draws`` teachers."""
    part: str = option("delay", choices=("delay",))
    delay: int = option(check=_SEED)
    steps: int = option(check=_N)
    T: int = option(20, check=_N)
    n_x: int = option(15, check=_N)
    n_train: int = option(10, check=_N)
    n_test: int = option(10, check=_N)
    draws: int = option(20, check=_N)
    snr_db: float = 20.0

    def validate(self):
        if self.delay >= self.T:
            raise ConfigError(f"delay must be below T = {self.T}, got {self.delay}")


PARTS = {"ntk": NtkCell, "dynamics": DynamicsCell, "delay": DelayCell}


def config_of(config: dict, where: str = "cell") -> NtkCell | DynamicsCell | DelayCell:
    return one_of(config, "part", PARTS, where=where)


# ====================================================================== NTK

def init_rnn(n: int, n_x: int, n_y: int, rng: np.random.Generator, nu=NU):
    return (rng.standard_normal((n, n)) * math.sqrt(nu["W"]), rng.standard_normal((n, n_x)) * math.sqrt(nu["F"]),
            rng.standard_normal((n_y, n)) * math.sqrt(nu["C"]))


def impulse_torch(W, F, C, T: int):
    """``L_j = n^{-(j+1)/2} C W^j F`` for j < T (torch, differentiable), shape (T, n_y, n_x)."""
    import torch

    n = W.shape[0]
    v, out = F, []
    for _ in range(T):
        out.append(C @ v / math.sqrt(n))
        v = W @ v / math.sqrt(n)
    return torch.stack(out)


def ntk_cell(cfg: NtkCell) -> dict:
    import torch

    n, T, seed = cfg.n, cfg.T, cfg.seed
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, n, seed])))
    W, F, C = (torch.tensor(a, requires_grad=True) for a in init_rnn(n, 1, 1, rng))
    L = impulse_torch(W, F, C, T)[:, 0, 0]
    grads = []
    for j in range(T):
        gs = torch.autograd.grad(L[j], (W, F, C), retain_graph=j + 1 < T)
        grads.append(torch.cat([g.reshape(-1) for g in gs]))
    G = torch.stack(grads)
    G = (G @ G.T).numpy()
    del grads
    r = rho(T)
    Dr = np.diag(r)
    off = G - np.diag(np.diag(G))
    xs = rng.standard_normal((cfg.inputs, T))
    Tx = np.concatenate([toeplitz_inputs(x) for x in xs], axis=1)  # (T, T * inputs)
    K_emp, K_th = Tx.T @ G @ Tx, Tx.T @ Dr @ Tx
    return {"part": "ntk", "n": n, "seed": seed, "T": T, "gram_diag": np.diag(G).tolist(), "rho": r.tolist(),
            "gram_rel_err": float(np.linalg.norm(G - Dr) / np.linalg.norm(Dr)),
            "ntk_rel_err": float(np.linalg.norm(K_emp - K_th) / np.linalg.norm(K_th)),
            "max_cross_lag": float(np.abs(off).max()), "max_cross_lag_rel": float(np.abs(off).max() / r[0]),
            "L_init": L.detach().numpy().tolist()}


# ====================================================================== data

def teacher_data(n_seq: int, T: int, n_x: int, rng, *, hidden: int = 4, delay: int = 0, teacher=None,
                 noise_var: float | None = None):
    """Inputs (n_seq, T, n_x) ~ N(0, 1) and the teacher RNN's outputs (n_seq, T), delayed by ``delay``."""
    if teacher is None:
        teacher = init_rnn(hidden, n_x, 1, rng)
    W, F, C = teacher
    n = W.shape[0]
    x = rng.standard_normal((n_seq, T, n_x))
    h = np.zeros((n_seq, n))
    y = np.zeros((n_seq, T))
    for t in range(T):
        h = h @ W.T / math.sqrt(n) + x[:, t] @ F.T
        y[:, t] = (h @ C.T)[:, 0] / math.sqrt(n)
    if delay:
        y = np.concatenate([np.zeros((n_seq, delay)), y[:, :T - delay]], axis=1)
    return x, y, teacher


def conv_design(x: np.ndarray) -> np.ndarray:
    """The design matrix A (n_seq * T, T * n_x) with ``y = A vec(L)``, ``y_t = sum_j L_j x_{t-j}``."""
    n_seq, T, n_x = x.shape
    A = np.zeros((n_seq, T, T, n_x))
    for j in range(T):
        A[:, j:, j, :] = x[:, :T - j, :]
    return A.reshape(n_seq * T, T * n_x)


# ====================================================================== Fig. 1

def dynamics_cell(cfg: DynamicsCell) -> dict:
    import torch

    n, steps, lr, seed, T = cfg.n, cfg.steps, cfg.lr, cfg.seed, cfg.T
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, 1, seed])))
    x_tr, y_tr, teacher = teacher_data(cfg.n_train, T, 1, rng)
    x_te, y_te, _ = teacher_data(cfg.n_test, T, 1, rng, teacher=teacher)
    noise_var = float(np.mean(y_tr ** 2)) / 10 ** (cfg.snr_db / 10)
    y_tr = y_tr + rng.standard_normal(y_tr.shape) * math.sqrt(noise_var)
    y_te = y_te + rng.standard_normal(y_te.shape) * math.sqrt(noise_var)
    srng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, 2, n, seed])))
    W, F, C = (torch.tensor(a, requires_grad=True) for a in init_rnn(n, 1, 1, srng))
    r = rho(T)
    with torch.no_grad():
        L0 = impulse_torch(W, F, C, T)[:, 0, 0].numpy()
    theta = torch.tensor(L0 / np.sqrt(r), requires_grad=True)  # eq. (58)
    sq = torch.tensor(np.sqrt(r))
    X_tr, Y_tr = torch.tensor(x_tr), torch.tensor(y_tr)
    X_te, Y_te = torch.tensor(x_te), torch.tensor(y_te)
    A_tr, A_te = torch.tensor(conv_design(x_tr)), torch.tensor(conv_design(x_te))

    def rnn_out(X):
        h = torch.zeros(X.shape[0], n, dtype=X.dtype)
        ys = []
        for t in range(T):
            h = h @ W.T / math.sqrt(n) + X[:, t] @ F.T
            ys.append((h @ C.T)[:, 0] / math.sqrt(n))
        return torch.stack(ys, 1)

    def conv_out(A):
        return (A @ (sq * theta)).reshape(-1, T)

    half_sse = lambda out, Y: 0.5 * torch.sum((out - Y) ** 2)  # noqa: E731
    mse = lambda out, Y: float(torch.mean((out - Y) ** 2))  # noqa: E731
    curve = []
    every = max(1, steps // cfg.points)
    for step in range(steps + 1):
        o_r, o_c = rnn_out(X_tr), conv_out(A_tr)
        if step % every == 0 or step == steps:
            with torch.no_grad():
                curve.append({"step": step, "rnn_train": mse(o_r, Y_tr), "conv_train": mse(o_c, Y_tr),
                              "rnn_test": mse(rnn_out(X_te), Y_te), "conv_test": mse(conv_out(A_te), Y_te)})
        if step == steps:
            break
        gr = torch.autograd.grad(half_sse(o_r, Y_tr), (W, F, C))
        gc = torch.autograd.grad(half_sse(o_c, Y_tr), (theta,))
        with torch.no_grad():
            for p, g in zip((W, F, C), gr):
                p -= lr * g
            theta -= lr * gc[0]
    with torch.no_grad():
        L_rnn = impulse_torch(W, F, C, T)[:, 0, 0].numpy()
        L_conv = (sq * theta).numpy()
    rel = [abs(c["rnn_train"] - c["conv_train"]) / c["conv_train"] for c in curve]
    rel_te = [abs(c["rnn_test"] - c["conv_test"]) / c["conv_test"] for c in curve]
    return {"part": "dynamics", "n": n, "steps": steps, "lr": lr, "noise_var": noise_var, "curve": curve,
            "max_rel_train_gap": max(rel), "max_rel_test_gap": max(rel_te),
            "L_rnn": L_rnn.tolist(), "L_conv": L_conv.tolist(), "L_init": L0.tolist(),
            "impulse_rel_gap": float(np.linalg.norm(L_rnn - L_conv) / np.linalg.norm(L_conv - L0))}


# ====================================================================== Fig. 3

def delay_cell(cfg: DelayCell) -> dict:
    delay, T, n_x, steps = cfg.delay, cfg.T, cfg.n_x, cfg.steps
    n_tr, n_te, draws = cfg.n_train, cfg.n_test, cfg.draws
    r = np.repeat(rho(T), n_x)  # per (lag, input channel)
    errs = {"scaled": [], "unscaled": []}
    for draw in range(draws):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, 3, draw])))  # same teachers at every delay
        x_tr, y_tr, teacher = teacher_data(n_tr, T, n_x, rng, delay=delay)
        x_te, y_te, _ = teacher_data(n_te, T, n_x, rng, delay=delay, teacher=teacher)
        noise_var = float(np.mean(y_tr ** 2)) / 10 ** (cfg.snr_db / 10)
        y_tr = (y_tr + rng.standard_normal(y_tr.shape) * math.sqrt(noise_var)).reshape(-1)
        y_te = (y_te + rng.standard_normal(y_te.shape) * math.sqrt(noise_var)).reshape(-1)
        A_tr, A_te = conv_design(x_tr), conv_design(x_te)
        # the same step size for both models: 1 / the largest eigenvalue of the scaled model's kernel
        lr = 1.0 / np.linalg.eigvalsh((A_tr * r) @ A_tr.T)[-1]
        for kind, scale in (("scaled", r), ("unscaled", np.ones_like(r))):
            B = A_tr * np.sqrt(scale)  # y = B theta, L = sqrt(rho) theta
            theta = np.zeros(B.shape[1])
            for _ in range(steps):
                theta -= lr * (B.T @ (B @ theta - y_tr))
            pred = (A_te * np.sqrt(scale)) @ theta
            errs[kind].append(float(np.mean((pred - y_te) ** 2) / np.mean(y_te ** 2)))
    return {"part": "delay", "delay": delay, "steps": steps, "draws": draws,
            **{f"{k}_test_nmse": float(np.mean(v)) for k, v in errs.items()},
            **{f"{k}_test_nmse_se": std_err(v) or 0.0 for k, v in errs.items()}}


def cell(config: dict) -> dict:
    """One cell: its part's config (:func:`config_of`) run by that part's function."""
    c = config_of(config)
    return {"ntk": ntk_cell, "dynamics": dynamics_cell, "delay": delay_cell}[c.part](c)


# ====================================================================== grid

FULL = {"ntk_n": [250, 1000, 4000], "ntk_seeds": 16, "T": 5, "dyn_n": [250, 1000], "dyn_steps": 150, "lr": 1e-4,
        "delays": [0, 2, 4, 6, 8, 10], "delay_steps": 2000, "draws": 20}


def configs(quick: bool) -> list[dict]:
    if quick:
        return ([{"part": "ntk", "n": n, "T": 4, "seed": 0, "inputs": 4} for n in (50, 200)]
                + [{"part": "dynamics", "n": 50, "steps": 5, "lr": 1e-4, "points": 5}]
                + [{"part": "delay", "delay": d, "steps": 50, "draws": 2} for d in (0, 4)])
    f = FULL
    return ([{"part": "ntk", "n": n, "T": f["T"], "seed": s} for n in f["ntk_n"] for s in range(f["ntk_seeds"])]
            + [{"part": "dynamics", "n": n, "steps": f["dyn_steps"], "lr": f["lr"]} for n in f["dyn_n"]]
            + [{"part": "delay", "delay": d, "steps": f["delay_steps"], "draws": f["draws"]} for d in f["delays"]])


def summarise(rows, quick: bool) -> dict:
    ok = rows_ok(rows)
    by = {"ntk": [], "dynamics": [], "delay": []}
    for r in ok:
        by[r["result"]["part"]].append({**r["result"], "cpu_s": r.get("cpu_s")})
    ntk = {}
    for res in by["ntk"]:
        ntk.setdefault(str(res["n"]), []).append(res)
    ntk_sum = {n: {"runs": len(v), "gram_rel_err": float(np.mean([x["gram_rel_err"] for x in v])),
                   "ntk_rel_err": float(np.mean([x["ntk_rel_err"] for x in v])),
                   "ntk_rel_err_each": [x["ntk_rel_err"] for x in v],
                   "max_cross_lag_rel": float(np.mean([x["max_cross_lag_rel"] for x in v])),
                   "max_cross_lag_rel_each": [x["max_cross_lag_rel"] for x in v],
                   "gram_diag_mean": np.mean([x["gram_diag"] for x in v], axis=0).tolist(),
                   "rho": v[0]["rho"], "cpu_s": float(sum(x["cpu_s"] or 0 for x in v))} for n, v in ntk.items()}
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "nu": NU,
         "ntk": dict(sorted(ntk_sum.items(), key=lambda kv: int(kv[0]))),
         "dynamics": sorted(by["dynamics"], key=lambda x: x["n"]),
         "delay": sorted(by["delay"], key=lambda x: x["delay"]),
         "config": FULL if not quick else "quick"}
    s["criteria"] = criteria(s)
    return s


def criteria(s: dict) -> list[dict]:
    out = []
    ns = [int(n) for n in s["ntk"]]
    if len(ns) >= 2:
        errs = [s["ntk"][str(n)]["ntk_rel_err"] for n in ns]
        slope = float(np.polyfit(np.log(ns), np.log(errs), 1)[0])
        out.append({"id": "ntk-rate", "text": "the NTK's relative error falls like n^-1/2 (fitted log-log slope in "
                                              "[-0.75, -0.25])", "met": -0.75 <= slope <= -0.25, "slope": slope})
        big = str(max(ns))
        out.append({"id": "ntk-5pct", "text": "relative NTK error below 5% at n = 4000 (mean over inits)",
                    "met": s["ntk"][big]["ntk_rel_err"] < 0.05 if big == "4000" else None,
                    "value": s["ntk"][big]["ntk_rel_err"], "n": int(big)})
        cross = [s["ntk"][str(n)]["max_cross_lag_rel"] for n in ns]
        out.append({"id": "cross-lag", "text": "the cross-lag terms go to 0 (largest |G[j, j']| / rho_0 decreasing in n)",
                    "met": all(a > b for a, b in zip(cross, cross[1:])), "values": cross})
    dyn = s["dynamics"]
    if dyn:
        gaps = [d["max_rel_train_gap"] for d in dyn]
        at = {d["n"]: d["max_rel_train_gap"] for d in dyn}
        out.append({"id": "fig1-5pct", "text": "Fig. 1: the training losses of the wide RNN (n = 1000) and the scaled "
                                               "convolution within 5% (relative) at every step, and closer as n grows",
                    "met": (at[1000] <= 0.05 and all(a > b for a, b in zip(gaps, gaps[1:]))) if 1000 in at else None,
                    "gaps": {str(d["n"]): d["max_rel_train_gap"] for d in dyn}})
    dl = {d["delay"]: d for d in s["delay"]}
    if 0 in dl and 10 in dl:
        rs = dl[10]["scaled_test_nmse"] / dl[0]["scaled_test_nmse"]
        ru = dl[10]["unscaled_test_nmse"] / dl[0]["unscaled_test_nmse"]
        out.append({"id": "fig3-delay", "text": "Fig. 3: the scaled convolution's test error rises at least 3x from "
                                                "delay 0 to 10, the unscaled one's stays within 2x",
                    "met": rs >= 3 and 0.5 <= ru <= 2, "scaled_ratio": rs, "unscaled_ratio": ru})
    return out


def table(s: dict) -> list[dict]:
    rows = [{"part": "ntk", "n": int(n), "ntk_rel_err": v["ntk_rel_err"], "gram_rel_err": v["gram_rel_err"],
             "max_cross_lag_rel": v["max_cross_lag_rel"], "inits": v["runs"], "cpu_s": v["cpu_s"]}
            for n, v in s["ntk"].items()]
    rows += [{"part": "dynamics", "n": d["n"], "steps": d["steps"], "lr": d["lr"],
              "max_rel_train_gap": d["max_rel_train_gap"], "max_rel_test_gap": d["max_rel_test_gap"],
              "final_rnn_train": d["curve"][-1]["rnn_train"], "final_conv_train": d["curve"][-1]["conv_train"],
              "impulse_rel_gap": d["impulse_rel_gap"], "cpu_s": d["cpu_s"]} for d in s["dynamics"]]
    rows += [{"part": "delay", "delay": d["delay"], "scaled_test_nmse": d["scaled_test_nmse"],
              "unscaled_test_nmse": d["unscaled_test_nmse"], "scaled_se": d["scaled_test_nmse_se"],
              "unscaled_se": d["unscaled_test_nmse_se"], "draws": d["draws"], "steps": d["steps"], "cpu_s": d["cpu_s"]}
             for d in s["delay"]]
    return rows


def plot(s: dict):
    """The figure (:func:`.seed002_ntk_report.plot`)."""
    from .seed002_ntk_report import plot as draw

    return draw(s)


def markdown(s: dict, figure: str) -> str:
    """The section of ``docs/experiments.md`` (:func:`.seed002_ntk_report.markdown`)."""
    from .seed002_ntk_report import markdown as text

    return text(s, figure)
