"""Applying a trained gradient model iteratively (seed 000 Sec. 5.2, Figure 1b)
and its out-of-distribution behaviour against the target scale sigma (Figure 2).

``x_{i+1} = x_i - eta T(A, b, x_i)`` with ``T`` the model's prediction of
grad L(x_i) = (1/N) A^T (A x_i - b), run until a fixed point (the update stops
shrinking: ``max |x_{i+1} - x_i|`` has not decreased for ``patience``
iterations) or ``max_iters``; exact GD with the same eta
is run alongside for ``max_iters`` iterations (its own fixed point).  MSE is against the float64 least-squares solution.
"""
from __future__ import annotations

import numpy as np
import torch

from .tasks import LSTask


@torch.no_grad()
def apply_iteratively(model, task: LSTask, A, b, x0, *, eta: float | None = None, max_iters: int = 2000,
                      patience: int = 50, dtype=torch.float64, device="cpu") -> dict:
    eta = task.eta if eta is None else eta
    x = x0.copy()
    best, since, steps = np.inf, 0, 0
    for steps in range(1, max_iters + 1):
        u = torch.as_tensor(task.embed(A, b, x), dtype=dtype, device=device)
        g = model(u)[:, task.out_rows][:, 0].double().cpu().numpy()
        x_new = x - eta * g
        delta = float(np.max(np.abs(x_new - x))) if np.isfinite(x_new).all() else np.inf
        x = x_new
        if not np.isfinite(delta):
            break
        if delta < best:
            best, since = delta, 0
        else:
            since += 1
            if since >= patience:
                break
    xs = np.stack([np.linalg.lstsq(A[i], b[i], rcond=None)[0] for i in range(A.shape[0])])
    mse = lambda z: float(np.mean((z - xs) ** 2)) if np.isfinite(z).all() else float("inf")  # noqa: E731
    return {"iters": steps, "model_mse": mse(x), "gd_mse": mse(task.gd(A, b, x0.copy(), max_iters)),
            "gd_iters": max_iters}


def ood_sweep(model, task: LSTask, sigmas=(0.25, 0.5, 1, 2, 4, 8, 16, 32), *, batch: int = 64, seed: int = 0,
              **kw) -> list[dict]:
    """Figure 2: the fixed-point MSE on D_OOD^b(sigma) (x_true ~ N(0, sigma^2))."""
    out = []
    for s in sigmas:
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 3, int(s * 1000)])))
        A, b, xt, x0 = task.problems(batch, rng, sigma=float(s))
        r = apply_iteratively(model, task, A, b, x0, **kw)
        r["sigma"] = float(s)
        out.append(r)
    return out


def plot_ood(rows, path, *, title=""):
    from .figures import finish_axes, save_closed  # sets the Agg backend

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    s = [r["sigma"] for r in rows]
    ax.loglog(s, [max(r["model_mse"], 1e-40) for r in rows], "o-", label="trained model, iterated")
    ax.loglog(s, [max(r["gd_mse"], 1e-40) for r in rows], "s--", label="exact GD, same iterations")
    finish_axes(ax, "sigma (x_true ~ N(0, sigma^2))", "MSE of the fixed point", title, title_size=9)
    save_closed(fig, path)
